/* test_cards.c - model and hardware cards: every built-in card loads with sane fields, the
 * dimensions the cost model relies on match the public configs, KV bytes per token match
 * hand computation, lookup by name / path / $CZ_CARDS_DIR works, and malformed cards fail
 * with messages that name the file, the field and what was expected. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_models.h"
#include "cz_version.h"

static const char *root(void)
{
    const char *r = getenv("CZ_SOURCE_ROOT");
    return r && r[0] ? r : CZ_SOURCE_ROOT;
}

static void path_of(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", root(), rel);
}

static cz_model_card load_model(const char *name)
{
    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_model_card_load(name, &m, &err);
    cr_assert_eq(st, CZ_OK, "loading %s: %s", name, err.msg);
    return m;
}

static cz_hw_card load_hw(const char *name)
{
    cz_hw_card h;
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_hw_card_load(name, &h, &err);
    cr_assert_eq(st, CZ_OK, "loading %s: %s", name, err.msg);
    return h;
}

static const cz_stage_card *stage(const cz_model_card *m, const char *name)
{
    const cz_stage_card *s = cz_model_card_stage(m, name);
    cr_assert_not_null(s, "%s has no stage %s", m->name, name);
    return s;
}

/* ---- KV bytes and weight bytes by hand ------------------------------------------------ */

Test(cards, kv_bytes_llama3_8b)
{
    cz_model_card m = load_model("llama-3-8b");
    const cz_stage_card *s = stage(&m, "llm");
    /* 2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes */
    cr_assert_eq(cz_stage_kv_bytes_per_token(s), 131072.0);
    cr_assert_eq(cz_stage_kv_bytes_per_token_gpu(s, 1), 131072.0);
    cr_assert_eq(cz_stage_kv_bytes_per_token_gpu(s, 2), 65536.0);
    cr_assert_eq(cz_stage_weight_bytes(s), 8030261248.0 * 2.0);
}

Test(cards, kv_bytes_llama2_70b)
{
    cz_model_card m = load_model("llama-2-70b");
    const cz_stage_card *s = stage(&m, "llm");
    /* 2 x 80 x 8 x 128 x 2 */
    cr_assert_eq(cz_stage_kv_bytes_per_token(s), 327680.0);
    cr_assert_eq(cz_stage_kv_bytes_per_token_gpu(s, 8), 327680.0 / 8.0);
    /* 16 GPUs share 8 KV heads: each holds one head, replicated. 2 x 80 x 1 x 128 x 2 */
    cr_assert_eq(cz_stage_kv_bytes_per_token_gpu(s, 16), 40960.0);
    cr_assert(fabs(s->params - 6.9e10) / 6.9e10 < 0.005);
}

Test(cards, non_ar_stages_hold_no_kv)
{
    cz_model_card m = load_model("qwen3-omni");
    cr_assert_eq(cz_stage_kv_bytes_per_token(stage(&m, "audio_encoder")), 0.0);
    cr_assert_eq(cz_stage_kv_bytes_per_token(stage(&m, "code2wav")), 0.0);
    /* thinker: 2 x 48 x 4 x 128 x 2 */
    cr_assert_eq(cz_stage_kv_bytes_per_token(stage(&m, "thinker")), 98304.0);
}

/* ---- the public configs' dimensions ---------------------------------------------------- */

Test(cards, llama_dimensions)
{
    cz_model_card a = load_model("llama-3-8b");
    const cz_stage_card *s = stage(&a, "llm");
    cr_assert_eq(s->kind, CZ_STAGE_AR);
    cr_assert_eq(s->layers, 32);
    cr_assert_eq(s->hidden, 4096);
    cr_assert_eq(s->heads, 32);
    cr_assert_eq(s->kv_heads, 8);
    cr_assert_eq(s->head_dim, 128);
    cr_assert_eq(s->intermediate, 14336);
    cr_assert_eq(s->vocab, 128256);
    cr_assert_eq(s->params, 8030261248.0);
    /* defaults: dense, bf16, untied embedding table of vocab x hidden */
    cr_assert_eq(s->active_params, s->params);
    cr_assert_eq(s->experts, 0);
    cr_assert_eq(s->weight_bytes, 2);
    cr_assert_eq(s->kv_bytes, 2);
    cr_assert_eq(s->embed_params, 128256.0 * 4096.0);
    cr_assert(!s->tied_embeddings);
    cr_assert_eq(s->flops_per_token, 0.0);

    cz_model_card b = load_model("llama-2-70b");
    s = stage(&b, "llm");
    cr_assert_eq(s->layers, 80);
    cr_assert_eq(s->hidden, 8192);
    cr_assert_eq(s->heads, 64);
    cr_assert_eq(s->kv_heads, 8);
    cr_assert_eq(s->intermediate, 28672);
    cr_assert_eq(s->vocab, 32000);
}

Test(cards, qwen3_omni_stages)
{
    cz_model_card m = load_model("qwen3-omni");
    const cz_stage_card *t = stage(&m, "thinker");
    cr_assert_eq(t->kind, CZ_STAGE_AR);
    cr_assert_eq(t->layers, 48);
    cr_assert_eq(t->hidden, 2048);
    cr_assert_eq(t->heads, 32);
    cr_assert_eq(t->kv_heads, 4);
    cr_assert_eq(t->head_dim, 128);
    cr_assert_eq(t->experts, 128);
    cr_assert_eq(t->experts_active, 8);
    cr_assert_eq(t->expert_intermediate, 768);
    cr_assert(t->params > 30e9 && t->params < 31e9);
    cr_assert(t->active_params > 3e9 && t->active_params < 3.5e9);

    const cz_stage_card *k = stage(&m, "talker");
    cr_assert_eq(k->kind, CZ_STAGE_AR);
    cr_assert(k->experts > 0 && k->params < t->params && k->hidden < t->hidden);
    cr_assert_eq(stage(&m, "code2wav")->kind, CZ_STAGE_VOCODER);
    cr_assert(stage(&m, "code2wav")->flops_per_token > 0.0);
    cr_assert_eq(stage(&m, "audio_encoder")->kind, CZ_STAGE_ENCODER);
    cr_assert_null(cz_model_card_stage(&m, "vision_encoder"));
}

Test(cards, speech_and_vision_models)
{
    cz_model_card c = load_model("cosyvoice2");
    const cz_stage_card *s = stage(&c, "llm");
    cr_assert_eq(s->layers, 24);
    cr_assert_eq(s->hidden, 896);
    cr_assert_eq(s->heads, 14);
    cr_assert_eq(s->kv_heads, 2);
    cr_assert_eq(s->head_dim, 64);
    cr_assert_eq(s->intermediate, 4864);
    cr_assert_eq(c.stages[c.n_stages - 1].kind, CZ_STAGE_VOCODER);

    cz_model_card g = load_model("cogagent");
    s = stage(&g, "llm");
    cr_assert_eq(s->layers, 32);
    cr_assert_eq(s->hidden, 4096);
    cr_assert_eq(s->heads, 32);
    cr_assert(s->active_params < s->params); /* the visual expert is idle for text tokens */
    cr_assert(stage(&g, "vision_lowres")->params > 4.3e9);
    cr_assert_eq(stage(&g, "vision_lowres")->kind, CZ_STAGE_ENCODER);

    /* the CogAgent Nova serves (Nova, section V-A2): a 4B ViT, a 9B
     * 40-layer LLM, about 9 GB and 18 GB of bf16 weights, 70 MB of KV for a 1,700-token
     * request (2 x 40 layers x 2 KV groups x 128 x 2 bytes = 40,960 bytes a token) */
    cz_model_card n = load_model("cogagent-9b");
    s = stage(&n, "llm");
    cr_assert_eq(s->layers, 40);
    cr_assert_eq(cz_stage_kv_bytes_per_token(s), 40960.0);
    cr_assert(fabs(cz_stage_kv_bytes_per_token(s) * 1700 / 70e6 - 1) < 0.01);
    cr_assert(fabs(cz_stage_weight_bytes(s) / 18e9 - 1) < 0.05);
    cr_assert(fabs(cz_stage_weight_bytes(stage(&n, "vision")) / 9e9 - 1) < 0.01);
    cr_assert_eq(n.pipe[0].input_tokens, 6401); /* 80 x 80 patches of 14 px and a class token */
    cr_assert_eq(n.pipe[1].input_tokens, 0);
    /* the ViT's 63 layers of 67,926,784 parameters, and outside them the position table
     * (6,401 x 1,792), the patch embedding (3 x 14 x 14 x 1,792 + 1,792) and the adapter
     * (214,454,272): Nova's Table VI in MiB, 8,595.2 whole, 692.1 with two layers */
    const cz_stage_card *v = stage(&n, "vision");
    cr_assert_eq(v->nonlayer_params, 6401.0 * 1792 + 3 * 14 * 14 * 1792 + 1792 + 214454272);
    cr_assert_eq(cz_stage_layer_weight_bytes(v), 67926784.0 * 2);
    cr_assert_eq(cz_stage_nonlayer_weight_bytes(v), 226980352.0 * 2);
    cr_assert(fabs(cz_stage_weight_bytes(v) / 1048576 - 8595.2) < 0.05);
    cr_assert(fabs((cz_stage_nonlayer_weight_bytes(v) + 2 * cz_stage_layer_weight_bytes(v)) /
                       1048576 - 692.1) < 0.05);
    cr_assert_eq(s->nonlayer_params, 0.0); /* not given: none */

    cz_model_card o = load_model("moshi");
    s = stage(&o, "temporal");
    cr_assert_eq(s->layers, 32);
    cr_assert_eq(s->hidden, 4096);
    cr_assert_eq(s->heads, 32);
    cr_assert_eq(stage(&o, "depth")->kind, CZ_STAGE_AR);
    cr_assert(stage(&o, "depth")->params < s->params);
    cr_assert_eq(stage(&o, "mimi_decoder")->kind, CZ_STAGE_VOCODER);
}

Test(cards, hardware_datasheet_numbers)
{
    cz_hw_card h = load_hw("h100-sxm");
    cr_assert_eq(h.sms, 132);
    cr_assert_eq(h.hbm_bw_Bps, 3.35e12);
    cr_assert_eq(h.bf16_flops, 989e12);
    cr_assert_eq(h.interconnect_Bps, 450e9);
    cz_hw_card a = load_hw("a100-80gb");
    cr_assert_eq(a.sms, 108);
    cr_assert_eq(a.hbm_bw_Bps, 2.039e12);
    cr_assert_eq(a.bf16_flops, 312e12);
    cr_assert_eq(a.interconnect_Bps, 300e9);
    cz_hw_card g = load_hw("h200");
    cr_assert_eq(g.hbm_bw_Bps, 4.8e12);
    cr_assert(g.hbm_bytes > h.hbm_bytes);
    cz_hw_card w = load_hw("rtx-a6000");
    cr_assert_eq(w.sms, 84);
    cr_assert_eq(w.hbm_bw_Bps, 768e9);
    cz_hw_card b = load_hw("rtx-pro-6000-blackwell");
    cr_assert_eq(b.sms, 188);
    cr_assert_eq(b.hbm_bw_Bps, 1.792e12);
    /* no NVLink: GPU-to-GPU goes over PCIe, no faster than 64 GB/s per direction */
    cr_assert(b.interconnect_Bps <= 64e9);
}

/* ---- every built-in card loads --------------------------------------------------------- */

/* Calls `check(name)` for every .json file in `rel_dir`; returns how many. */
static int for_each_card(const char *rel_dir, void (*check)(const char *name))
{
    char dir[4096];
    path_of(dir, sizeof dir, rel_dir);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        check(name);
        n++;
    }
    closedir(d);
    return n;
}

static void check_model(const char *name)
{
    cz_model_card m = load_model(name);
    cr_assert_str_eq(m.name, name);
    cr_assert(m.n_stages >= 1 && m.n_stages <= CZ_MAX_STAGES);
    for (uint32_t i = 0; i < m.n_stages; i++) {
        const cz_stage_card *s = &m.stages[i];
        cr_assert(s->name[0] != '\0');
        cr_assert(s->layers > 0 && s->hidden > 0 && s->heads > 0 && s->head_dim > 0,
                  "%s/%s", name, s->name);
        cr_assert(s->kv_heads > 0 && s->kv_heads <= s->heads && s->heads % s->kv_heads == 0);
        cr_assert(s->params > 0.0 && s->active_params > 0.0 && s->active_params <= s->params);
        cr_assert(s->weight_bytes > 0 && s->kv_bytes > 0);
        cr_assert(cz_stage_weight_bytes(s) > 0.0);
        if (s->kind == CZ_STAGE_AR) {
            cr_assert(s->vocab > 0, "%s/%s", name, s->name);
            cr_assert(cz_stage_kv_bytes_per_token(s) > 0.0);
        } else {
            cr_assert_eq(s->vocab, 0);
        }
        if (s->experts > 0)
            cr_assert(s->experts_active > 0 && s->experts_active <= s->experts &&
                      s->expert_intermediate > 0);
        cr_assert(cz_model_card_stage(&m, s->name) == s);
    }
}

static void check_hw(const char *name)
{
    cz_hw_card h = load_hw(name);
    cr_assert_str_eq(h.name, name);
    cr_assert(h.sms > 0);
    /* GPUs, and the host a CPU replay runs on (cpu-host) */
    cr_assert(h.hbm_bytes > 1e8 && h.hbm_bw_Bps > 1e9 && h.bf16_flops > 1e10, "%s", name);
    cr_assert(h.host_link_Bps > 1e9 && h.host_link_latency_s >= 0.0);
    cr_assert(h.interconnect_Bps > 1e9);
}

Test(cards, every_builtin_card_loads)
{
    cr_assert_geq(for_each_card("models/cards", check_model), 6);
    cr_assert_geq(for_each_card("models/hw", check_hw), 5);
}

/* ---- lookup ---------------------------------------------------------------------------- */

Test(cards, load_by_path)
{
    char p[4096];
    path_of(p, sizeof p, "models/cards/llama-3-8b.json");
    cz_model_card m = load_model(p);
    cr_assert_str_eq(m.name, "llama-3-8b");
    path_of(p, sizeof p, "models/hw/h200.json");
    cz_hw_card h = load_hw(p);
    cr_assert_str_eq(h.name, "h200");
}

Test(cards, cards_dir_override)
{
    char dir[4096];
    path_of(dir, sizeof dir, "tests/data/cards/override");
    cr_assert_eq(setenv("CZ_CARDS_DIR", dir, 1), 0);
    cz_model_card m = load_model("tiny");
    cr_assert_eq(m.n_stages, 2);
    const cz_stage_card *s = stage(&m, "llm");
    cr_assert_eq(s->head_dim, 16); /* 64 / 4, since the card omits head_dim */
    cr_assert_eq(s->embed_params, 100.0 * 64.0);
    cr_assert_eq(stage(&m, "encoder")->embed_params, 0.0);
    cz_hw_card h = load_hw("tiny-gpu");
    cr_assert(!h.host_link_full_duplex);

    /* the built-in cards are no longer on the search path */
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_model_card_load("llama-3-8b", &m, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, dir) != NULL, "%s", err.msg);
}

Test(cards, name_must_match_file)
{
    char dir[4096];
    path_of(dir, sizeof dir, "tests/data/cards/override");
    cr_assert_eq(setenv("CZ_CARDS_DIR", dir, 1), 0);
    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_model_card_load("misnamed", &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "misnamed.json") && strstr(err.msg, "'name'") &&
                  strstr(err.msg, "something-else"),
              "%s", err.msg);
}

Test(cards, unknown_names)
{
    cz_model_card m;
    cz_hw_card h;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_model_card_load("no-such-model", &m, &err), CZ_ENOTFOUND);
    /* a build-tree program finds the cards in the source tree, and says where it looked */
    char want[4096];
    snprintf(want, sizeof want, "cannot open '%s/models/cards/no-such-model.json' (", root());
    cr_assert(strstr(err.msg, want) != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "$CZ_CARDS_DIR is not set") != NULL, "%s", err.msg);
    cr_assert_eq(cz_hw_card_load("no-such-gpu", &h, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "no-such-gpu") != NULL, "%s", err.msg);
    cr_assert_eq(cz_model_card_load("../hw/h100-sxm", &m, &err), CZ_EINVAL);
    cr_assert_eq(cz_model_card_load("", &m, &err), CZ_EINVAL);
    cr_assert_eq(cz_model_card_load("/nonexistent/dir/x.json", &m, &err), CZ_ENOTFOUND);
}

Test(cards, kind_names)
{
    cr_assert_str_eq(cz_stage_kind_name(CZ_STAGE_AR), "ar");
    cr_assert_str_eq(cz_stage_kind_name(CZ_STAGE_ENCODER), "encoder");
    cr_assert_str_eq(cz_stage_kind_name(CZ_STAGE_VOCODER), "vocoder");
}

/* ---- bad cards ------------------------------------------------------------------------- */

/* Loads the fixture as a model or hardware card and checks the status and that the message
 * contains each of the NULL-terminated fragments. */
static void expect_bad(bool hw, const char *fixture, cz_status want, ...)
{
    char p[4096];
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/cards/%s", fixture);
    path_of(p, sizeof p, rel);
    cz_err err;
    cz_err_clear(&err);
    cz_status st;
    if (hw) {
        cz_hw_card h;
        st = cz_hw_card_load(p, &h, &err);
    } else {
        cz_model_card m;
        st = cz_model_card_load(p, &m, &err);
    }
    cr_assert_eq(st, want, "%s: status %d, message: %s", fixture, st, err.msg);
    cr_assert(strstr(err.msg, fixture) != NULL, "message does not name the file: %s", err.msg);
    va_list ap;
    va_start(ap, want);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        cr_assert(strstr(err.msg, frag) != NULL, "expected '%s' in: %s", frag, err.msg);
    va_end(ap);
}

Test(cards, bad_missing_field)
{
    expect_bad(false, "bad_missing_field.json", CZ_EINVAL, "stages[0] (llm)", "missing field",
               "'layers'", NULL);
}

Test(cards, bad_negative_number)
{
    expect_bad(false, "bad_negative.json", CZ_EINVAL, "stages[0] (llm)", "'params'",
               "expected a positive number", "-5", NULL);
}

Test(cards, bad_unknown_key)
{
    expect_bad(false, "bad_unknown_key.json", CZ_EINVAL, "stages[0] (llm)",
               "unknown field 'num_layers'", "layers", NULL);
    expect_bad(false, "bad_top_key.json", CZ_EINVAL, "unknown field 'stage'", NULL);
}

Test(cards, bad_unknown_kind)
{
    expect_bad(false, "bad_unknown_kind.json", CZ_EINVAL, "'kind'", "\"ar\"", "\"encoder\"",
               "\"vocoder\"", "decoder", NULL);
}

Test(cards, bad_inconsistent_dimensions)
{
    expect_bad(false, "bad_kv_heads.json", CZ_EINVAL, "'kv_heads'", "divisor of heads", NULL);
    expect_bad(false, "bad_no_source.json", CZ_EINVAL, "missing field 'source'", NULL);
}

Test(cards, bad_json_syntax)
{
    expect_bad(false, "bad_syntax.json", CZ_EFORMAT, ":4:", "not valid JSON", NULL);
}

Test(cards, bad_hw_cards)
{
    expect_bad(true, "bad_hw_missing.json", CZ_EINVAL, "missing field 'hbm_bw_Bps'", NULL);
    expect_bad(true, "bad_hw_negative.json", CZ_EINVAL, "'hbm_bw_Bps'", "positive", NULL);
    expect_bad(true, "bad_hw_unknown_key.json", CZ_EINVAL, "unknown field 'fp8_flops'", NULL);
}

/* Cards parsed from text, for the rules a fixture file would only repeat. */
static cz_status parse_text(const char *text, cz_model_card *m, cz_err *err)
{
    cJSON *j = NULL;
    cz_status st = cz_json_parse(text, "inline", &j, err);
    cr_assert_eq(st, CZ_OK, "%s", err->msg);
    st = cz_model_card_parse(j, "inline.json", m, err);
    cJSON_Delete(j);
    return st;
}

Test(cards, parse_rules)
{
    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    const char *moe_ok =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":0,\"vocab\":10,"
        "\"experts\":4,\"experts_active\":2,\"expert_intermediate\":32,\"params\":1e5,"
        "\"active_params\":5e4,\"tied_embeddings\":true,\"weight_bytes\":1}]}";
    cr_assert_eq(parse_text(moe_ok, &m, &err), CZ_OK, "%s", err.msg);
    cr_assert(m.stages[0].tied_embeddings);
    cr_assert_eq(m.stages[0].weight_bytes, 1);
    cr_assert_eq(m.stages[0].kv_bytes, 2);

    /* experts_active above experts */
    const char *too_many =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":0,\"vocab\":10,"
        "\"experts\":4,\"experts_active\":5,\"expert_intermediate\":32,\"params\":1e5}]}";
    cr_assert_eq(parse_text(too_many, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'experts_active'") != NULL, "%s", err.msg);

    /* MoE fields on a dense stage */
    const char *stray =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,\"vocab\":10,"
        "\"experts_active\":2,\"params\":1e5}]}";
    cr_assert_eq(parse_text(stray, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'experts_active'") != NULL, "%s", err.msg);

    /* input_tokens is for encoders */
    const char *fixed_ar =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,\"vocab\":10,"
        "\"params\":1e5}],\"pipeline\":[{\"stage\":\"x\",\"input_tokens\":5}]}";
    cr_assert_eq(parse_text(fixed_ar, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "input_tokens") != NULL, "%s", err.msg);

    /* active_params above params */
    const char *active =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,\"vocab\":10,"
        "\"params\":1e5,\"active_params\":2e5}]}";
    cr_assert_eq(parse_text(active, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'active_params'") != NULL, "%s", err.msg);

    /* embedding and head larger than the model */
    const char *tables =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":1000,\"params\":1e5}]}";
    cr_assert_eq(parse_text(tables, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "embed_params") != NULL, "%s", err.msg);

    /* weights outside the layers: at most the stage's, and not negative */
    const char *nonlayer =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"encoder\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":0,\"params\":1e5,\"nonlayer_params\":1e5}]}";
    cr_assert_eq(parse_text(nonlayer, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'nonlayer_params'") && strstr(err.msg, "stages[0] (x)"), "%s",
              err.msg);
    const char *nonlayer_neg =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"encoder\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":0,\"params\":1e5,\"nonlayer_params\":-1}]}";
    cr_assert_eq(parse_text(nonlayer_neg, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'nonlayer_params'") != NULL, "%s", err.msg);
    const char *nonlayer_ok =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":4,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":10,\"params\":1e5,\"nonlayer_params\":2e4,\"weight_bytes\":1}]}";
    cr_assert_eq(parse_text(nonlayer_ok, &m, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_stage_layer_weight_bytes(&m.stages[0]), 2e4); /* (1e5 - 2e4) / 4 layers */
    cr_assert_eq(cz_stage_nonlayer_weight_bytes(&m.stages[0]), 2e4);

    /* a vocoder with a vocabulary */
    const char *voc =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"vocoder\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":10,\"params\":1e5}]}";
    cr_assert_eq(parse_text(voc, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'vocab'") != NULL, "%s", err.msg);

    /* head_dim required when hidden is not a multiple of heads */
    const char *hd =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"encoder\","
        "\"layers\":2,\"hidden\":66,\"heads\":4,\"kv_heads\":4,\"intermediate\":8,"
        "\"vocab\":0,\"params\":1e5}]}";
    cr_assert_eq(parse_text(hd, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'head_dim'") != NULL, "%s", err.msg);

    /* duplicate stage names, and an empty stage list */
    const char *dup =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":["
        "{\"name\":\"x\",\"kind\":\"encoder\",\"layers\":1,\"hidden\":64,\"heads\":4,"
        "\"kv_heads\":4,\"intermediate\":8,\"vocab\":0,\"params\":1e5},"
        "{\"name\":\"x\",\"kind\":\"encoder\",\"layers\":1,\"hidden\":64,\"heads\":4,"
        "\"kv_heads\":4,\"intermediate\":8,\"vocab\":0,\"params\":1e5}]}";
    cr_assert_eq(parse_text(dup, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "stages[1]") && strstr(err.msg, "already"), "%s", err.msg);
    cr_assert_eq(parse_text("{\"name\":\"m\",\"source\":\"s\",\"stages\":[]}", &m, &err),
                 CZ_EINVAL);
    cr_assert(strstr(err.msg, "'stages'") != NULL, "%s", err.msg);
}

/* CosyVoice2 as App. A of the VoxServe paper runs it: chunks of 15 new
 * tokens with 3 of lookahead, every detokenizer call reading the 164-token reference
 * clip, the flow-matching ODE's 10 Euler steps as 10 passes; and the fields' rules. */
Test(cards, detokenizer_passes_and_reference_prompt)
{
    cz_model_card c = load_model("cosyvoice2");
    const cz_pipe_stage *v = &c.pipe[1];
    cr_assert_eq(v->chunk_tokens, 15);
    cr_assert_eq(v->overlap_tokens, 3);
    cr_assert_eq(v->prompt_tokens, 164);
    cr_assert_eq(stage(&c, "token2wav")->passes, 10);
    cr_assert_eq(stage(&c, "llm")->passes, 1);
    cr_assert_eq(c.pipe[0].prompt_tokens, 0);

    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    const char *base =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":["
        "{\"name\":\"x\",\"kind\":\"ar\",\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,"
        "\"intermediate\":8,\"vocab\":10,\"params\":1e5},"
        "{\"name\":\"v\",\"kind\":\"vocoder\",\"layers\":2,\"hidden\":64,\"heads\":4,"
        "\"kv_heads\":4,\"intermediate\":8,\"vocab\":0,\"params\":1e5%s}],"
        "\"pipeline\":[{\"stage\":\"x\",\"io\":\"audio\"%s},"
        "{\"stage\":\"v\",\"from\":\"x\",\"audio_s_per_token\":0.04%s}]}";
    char text[1024];
    snprintf(text, sizeof text, base, ",\"passes\":4", "", ",\"prompt_tokens\":7");
    cr_assert_eq(parse_text(text, &m, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(m.stages[1].passes, 4);
    cr_assert_eq(m.pipe[1].prompt_tokens, 7);
    snprintf(text, sizeof text, base, ",\"passes\":0", "", "");
    cr_assert_eq(parse_text(text, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "stages[1] (v)") && strstr(err.msg, "'passes'"), "%s", err.msg);
    /* a reference clip is a vocoder's */
    snprintf(text, sizeof text, base, "", ",\"prompt_tokens\":7", "");
    cr_assert_eq(parse_text(text, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "pipeline[0]") && strstr(err.msg, "prompt_tokens"), "%s", err.msg);
    snprintf(text, sizeof text, base, "", "", ",\"prompt_tokens\":2000000");
    cr_assert_eq(parse_text(text, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'prompt_tokens'"), "%s", err.msg);
}

/* ---- architecture fields (docs/models.md) ---------------------------------------------- */

/* A card without architecture fields gets the documented defaults, per stage kind. */
Test(cards, arch_defaults)
{
    cz_model_card m = load_model("qwen3-omni");
    const cz_stage_card *enc = stage(&m, "audio_encoder");
    cr_assert_eq(enc->arch.norm, CZ_NORM_LAYER);
    cr_assert_eq(enc->arch.act, CZ_ACT_GELU);
    cr_assert(enc->arch.qkv_bias && enc->arch.o_bias && !enc->arch.qk_norm);
    cr_assert_eq(enc->arch.norm_eps, 1e-5);
    cr_assert_eq(enc->arch.input_dim, 1280);
    cr_assert_eq(enc->arch.downsample, 1);
    cr_assert_eq(enc->arch.output_dim, 0);
    const cz_stage_card *th = stage(&m, "thinker");
    cr_assert_eq(th->arch.norm, CZ_NORM_RMS);
    cr_assert_eq(th->arch.act, CZ_ACT_SILU);
    cr_assert_eq(th->arch.norm_eps, 1e-6);
    cr_assert_eq(th->arch.rope_theta, 10000.0);
    cr_assert_eq(th->arch.rope_type, CZ_ROPE_DEFAULT);
    cr_assert(!th->arch.qkv_bias && !th->arch.o_bias && th->arch.norm_topk_prob);
    cr_assert_eq(th->arch.shared_expert_intermediate, 0);
    /* the talker's card gives its shared expert as intermediate */
    cr_assert_eq(stage(&m, "talker")->arch.shared_expert_intermediate, 768);
    cr_assert_eq(stage(&m, "code_predictor")->arch.shared_expert_intermediate, 0);
    const cz_stage_card *voc = stage(&m, "code2wav");
    cr_assert_eq(voc->arch.window, 0);
    cr_assert_eq(voc->arch.codebooks, 1);
    cr_assert_eq(voc->arch.codebook_size, 1024);
    cr_assert_eq(voc->arch.n_upsample, 0);
    cr_assert_eq(voc->arch.decoder_dim, 1024);
    cr_assert_eq(cz_stage_samples_per_token(voc), 1);
    cr_assert_eq(cz_stage_samples_per_token(th), 0);
}

/* A dense decoder stage to serve, beside an encoder or a vocoder under test. */
#define AR_STAGE                                                                             \
    "{\"name\":\"lm\",\"kind\":\"ar\",\"layers\":2,\"hidden\":64,\"heads\":4,"               \
    "\"kv_heads\":4,\"intermediate\":128,\"vocab\":10,\"params\":1e6}"

Test(cards, arch_fields_parse)
{
    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    const char *llama =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":2,\"intermediate\":128,"
        "\"vocab\":10,\"params\":1e6,\"rope_theta\":500000,\"norm_eps\":1e-5,"
        "\"qkv_bias\":true,\"qk_norm\":true,\"rope_scaling\":{\"type\":\"llama3\","
        "\"factor\":32,\"low_freq_factor\":1,\"high_freq_factor\":4,"
        "\"original_max_position_embeddings\":8192}}]}";
    cr_assert_eq(parse_text(llama, &m, &err), CZ_OK, "%s", err.msg);
    const cz_stage_arch *a = &m.stages[0].arch;
    cr_assert_eq(a->rope_theta, 500000.0);
    cr_assert_eq(a->rope_type, CZ_ROPE_LLAMA3);
    cr_assert_eq(a->rope_factor, 32.0);
    cr_assert_eq(a->rope_original_max_pos, 8192);
    cr_assert_eq(a->norm_eps, 1e-5);
    cr_assert(a->qkv_bias && a->qk_norm && !a->o_bias);

    const char *voc =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"vocoder\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":128,"
        "\"vocab\":0,\"params\":1e6,\"window\":72,\"codebooks\":16,\"codebook_size\":2048,"
        "\"upsample_rates\":[2,2,8,5,4,3],\"decoder_dim\":256,\"norm\":\"layer\","
        "\"activation\":\"gelu\"}," AR_STAGE "]}";
    cr_assert_eq(parse_text(voc, &m, &err), CZ_OK, "%s", err.msg);
    a = &m.stages[0].arch;
    cr_assert_eq(a->window, 72);
    cr_assert_eq(a->codebooks, 16);
    cr_assert_eq(a->codebook_size, 2048);
    cr_assert_eq(a->n_upsample, 6);
    cr_assert_eq(cz_stage_samples_per_token(&m.stages[0]), 1920);
    cr_assert_eq(a->norm, CZ_NORM_LAYER);
    cr_assert_eq(a->norm_eps, 1e-5);
    cr_assert_eq(a->act, CZ_ACT_GELU);

    const char *enc =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"encoder\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":128,"
        "\"vocab\":0,\"params\":1e6,\"input_dim\":128,\"downsample\":8,\"output_dim\":96,"
        "\"qkv_bias\":false}," AR_STAGE "]}";
    cr_assert_eq(parse_text(enc, &m, &err), CZ_OK, "%s", err.msg);
    a = &m.stages[0].arch;
    cr_assert_eq(a->input_dim, 128);
    cr_assert_eq(a->downsample, 8);
    cr_assert_eq(a->output_dim, 96);
    cr_assert(!a->qkv_bias && a->o_bias);
}

/* Each bad architecture value names the file, the stage and the field. */
Test(cards, arch_fields_bad)
{
    static const struct {
        const char *text, *field;
    } cases[] = {
        {"\"kind\":\"ar\",\"vocab\":10,\"norm\":\"batch\"", "'norm'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"activation\":\"relu\"", "'activation'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_theta\":0", "'rope_theta'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"norm_eps\":1.5", "'norm_eps'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"qk_norm\":1", "'qk_norm'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"window\":4", "'window'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"input_dim\":4", "'input_dim'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"shared_expert_intermediate\":4",
         "'shared_expert_intermediate'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}",
         "'type'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_scaling\":{\"factor\":4}", "'type'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_scaling\":{\"type\":\"linear\"}", "'factor'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2,"
         "\"low_freq_factor\":1}",
         "'low_freq_factor'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"rope_scaling\":{\"type\":\"llama3\",\"factor\":8,"
         "\"low_freq_factor\":4,\"high_freq_factor\":1}",
         "'high_freq_factor'"},
        {"\"kind\":\"encoder\",\"vocab\":0,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2}",
         "'rope_scaling'"},
        {"\"kind\":\"vocoder\",\"vocab\":0,\"upsample_rates\":[2,0]", "'upsample_rates'"},
        {"\"kind\":\"encoder\",\"vocab\":0,\"max_position_embeddings\":4096",
         "'max_position_embeddings'"},
        {"\"kind\":\"ar\",\"vocab\":10,\"max_position_embeddings\":-1",
         "'max_position_embeddings'"},
        {"\"kind\":\"vocoder\",\"vocab\":0,\"upsample_rates\":[2,2,2,2,2,2,2,2,2]",
         "'upsample_rates'"},
        {"\"kind\":\"vocoder\",\"vocab\":0,\"upsample_rates\":[8,8],\"decoder_dim\":2",
         "'decoder_dim'"},
        {"\"kind\":\"vocoder\",\"vocab\":0,\"codebooks\":0", "'codebooks'"},
        {"\"kind\":\"vocoder\",\"vocab\":0,\"codebooks\":65", "'codebooks'"},
        {"\"kind\":\"encoder\",\"vocab\":0,\"downsample\":0", "'downsample'"},
        {"\"kind\":\"encoder\",\"vocab\":0,\"window\":3", "'window'"},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(cases); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",%s,"
                 "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":2,\"intermediate\":128,"
                 "\"params\":1e6}]}",
                 cases[i].text);
        cz_model_card m;
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(parse_text(text, &m, &err), CZ_EINVAL, "case %zu passed: %s", i,
                     cases[i].text);
        cr_assert(strstr(err.msg, "inline.json") && strstr(err.msg, "stages[0] (x)") &&
                      strstr(err.msg, cases[i].field),
                  "case %zu: %s", i, err.msg);
    }
    /* MoE stages: gated experts only */
    const char *moe_gelu =
        "{\"name\":\"m\",\"source\":\"s\",\"stages\":[{\"name\":\"x\",\"kind\":\"ar\","
        "\"layers\":2,\"hidden\":64,\"heads\":4,\"kv_heads\":4,\"intermediate\":0,\"vocab\":10,"
        "\"experts\":4,\"experts_active\":2,\"expert_intermediate\":32,\"params\":1e5,"
        "\"active_params\":5e4,\"activation\":\"gelu\"}]}";
    cz_model_card m;
    cz_err err;
    cr_assert_eq(parse_text(moe_gelu, &m, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "'activation'") != NULL, "%s", err.msg);
}
