/* cmd_cards.c - `cadenza cards` (the model and hardware cards shipped) and `cadenza card`
 * (a model card from a Hugging Face config.json). Card schemas: docs/cost-model.md and
 * docs/models.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cz_cli.h"
#include "cz_hfconfig.h"
#include "cz_json.h"
#include "cz_models.h"
#include "cz_out.h"

static const char cards_usage[] =
    "usage: cadenza cards\n"
    "\n"
    "List the model and hardware cards a config can name by name (\"model\", \"hardware\"),\n"
    "with what each holds: a model's stages, parameters and context limit (the default\n"
    "server.max_model_len); a GPU's SMs, memory, bandwidth and bf16 FLOP/s. They are read\n"
    "from the data folder's models/ ($CZ_CARDS_DIR when set; docs/install.md). A config may\n"
    "also name a card file (.json) or a Hugging Face checkpoint folder.\n";

static const char card_usage[] =
    "usage: cadenza card CONFIG_JSON_OR_DIR [-o card.json] [--name NAME]\n"
    "\n"
    "Write a model card from a Hugging Face config.json (or the checkpoint folder holding\n"
    "it): the decoder's dimensions, architecture fields, exact parameter count and context\n"
    "limit (max_position_embeddings), checked as any card is. Architectures: Llama, Qwen2,\n"
    "Qwen3, Qwen3-MoE (docs/models.md). A config can then name the card file, or the folder\n"
    "directly (`cadenza sim --model DIR`).\n"
    "\n"
    "  -o, --output FILE    write the card there (default: print it)\n"
    "  --name NAME          the card's name (default: the checkpoint folder's name)\n";

int cz_cmd_cards(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(cards_usage, stdout);
            return CZ_EXIT_OK;
        }
        return cz_cli_usage_error("cards", "unexpected argument '%s'", argv[i]);
    }
    cz_err err;
    cz_err_clear(&err);
    char dir[4096];
    char **names = NULL;
    size_t n = 0;
    if (cz_cards_list(false, &names, &n, dir, sizeof dir, &err) != CZ_OK)
        return cz_cli_fail(&err);
    printf("model cards (%s):\n", dir);
    printf("  %-14s %-9s %-11s  %s\n", "name", "params", "max context", "stages");
    for (size_t i = 0; i < n; i++) {
        cz_model_card c;
        if (cz_model_card_load(names[i], &c, &err) != CZ_OK) {
            printf("  %-14s (cannot be read: %s)\n", names[i], err.msg);
            cz_err_clear(&err);
            free(names[i]);
            continue;
        }
        double params = 0;
        uint32_t ctx = 0;
        char stages[512] = "";
        size_t used = 0;
        for (uint32_t s = 0; s < c.n_stages; s++) {
            params += c.stages[s].params;
            if (c.stages[s].kind == CZ_STAGE_AR && !ctx)
                ctx = c.stages[s].max_position_embeddings;
            if (used < sizeof stages)
                used += (size_t)snprintf(stages + used, sizeof stages - used, "%s%s (%s)",
                                         s ? ", " : "", c.stages[s].name,
                                         cz_stage_kind_name(c.stages[s].kind));
        }
        char p[32], m[32];
        if (params >= 1e9)
            snprintf(p, sizeof p, "%.2f B", params / 1e9);
        else
            snprintf(p, sizeof p, "%.2f M", params / 1e6);
        if (ctx)
            snprintf(m, sizeof m, "%u", ctx);
        else
            snprintf(m, sizeof m, "-");
        printf("  %-14s %-9s %-11s  %s\n", c.name, p, m, stages);
        free(names[i]);
    }
    free(names);
    if (cz_cards_list(true, &names, &n, dir, sizeof dir, &err) != CZ_OK)
        return cz_cli_fail(&err);
    printf("hardware cards (%s):\n", dir);
    printf("  %-24s %5s %9s %12s %14s\n", "name", "SMs", "HBM GB", "HBM TB/s", "bf16 TFLOP/s");
    for (size_t i = 0; i < n; i++) {
        cz_hw_card h;
        if (cz_hw_card_load(names[i], &h, &err) != CZ_OK) {
            printf("  %-24s (cannot be read: %s)\n", names[i], err.msg);
            cz_err_clear(&err);
        } else {
            printf("  %-24s %5u %9.1f %12.2f %14.1f\n", h.name, h.sms, h.hbm_bytes / 1e9,
                   h.hbm_bw_Bps / 1e12, h.bf16_flops / 1e12);
        }
        free(names[i]);
    }
    free(names);
    return CZ_EXIT_OK;
}

int cz_cmd_card(int argc, char **argv)
{
    const char *src = NULL, *out = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(card_usage, stdout);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                   strcmp(a, "--name") == 0) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("card", "option '%s' needs a value", a);
            if (strcmp(a, "--name") == 0)
                name = argv[++i];
            else
                out = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cz_cli_usage_error("card", "unknown option '%s'", a);
        } else if (!src) {
            src = a;
        } else {
            return cz_cli_usage_error("card", "unexpected argument '%s'", a);
        }
    }
    if (!src)
        return cz_cli_usage_error("card", "a config.json or checkpoint folder is required");
    cz_err err;
    cz_err_clear(&err);
    const char *tmp = NULL;
    cz_status st = out ? cz_out_add("-o", out, &tmp, &err) : CZ_OK;
    /* the folder's config.json, or the file itself */
    struct stat sb;
    bool dir = stat(src, &sb) == 0 && S_ISDIR(sb.st_mode);
    char path[4096];
    snprintf(path, sizeof path, dir ? "%s/config.json" : "%s", src);
    if (st == CZ_OK && cz_file_check_input(path, &err) != CZ_OK)
        st = cz_err_prefix(&err, "config argument: ");
    /* the card's name: --name, else the checkpoint folder's */
    char folder[CZ_NAME_MAX];
    if (!name) {
        cz_hf_card_name(path, folder);
        name = folder;
    }
    cJSON *j = NULL, *card = NULL;
    cz_hf_arch arch;
    if (st == CZ_OK)
        st = cz_json_load(path, &j, &err);
    if (st == CZ_OK)
        st = cz_hf_config_card(j, path, name, &card, &arch, &err);
    if (st == CZ_OK) {
        /* where it came from, as the shipped cards say */
        cJSON_ReplaceItemInObjectCaseSensitive(
            card, "source", cJSON_CreateString(path));
        if (out) {
            st = cz_json_write_file(card, tmp, true, &err);
            if (st == CZ_OK)
                st = cz_out_commit(&err);
        } else {
            char *text = cJSON_Print(card);
            printf("%s\n", text);
            cJSON_free(text);
        }
    }
    cJSON_Delete(j);
    cJSON_Delete(card);
    if (st != CZ_OK) {
        cz_out_discard();
        return cz_cli_fail(&err);
    }
    if (out)
        fprintf(stderr, "cadenza card: %s (%s) -> %s\n", name, cz_hf_arch_name(arch), out);
    return CZ_EXIT_OK;
}
