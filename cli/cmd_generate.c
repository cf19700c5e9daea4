/* cmd_generate.c - `cadenza generate`: greedy continuation of a prompt by one decoder on the
 * CPU backend, from a Hugging Face checkpoint or a model card's random weights; optionally
 * every generated position's logits, as raw float32 or a NumPy .npy file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cz_cli.h"
#include "cz_hfconfig.h"
#include "cz_net.h"
#include "cz_out.h"

#define CMD "generate"
/* Tokens of one KV block. */
#define GEN_BLOCK_TOKENS 16u
/* Longest prompt plus continuation. */
#define GEN_MAX_CTX (1u << 20)

static const char generate_usage[] =
    "usage: cadenza generate --model DIR_OR_CARD --tokens ID,ID,... --max-tokens N\n"
    "                        [--json] [--logits FILE] [--seed S] [--dtype bf16|f16|f32]\n"
    "                        [--threads T] [--backend cpu|cuda] [--device D]\n"
    "\n"
    "Runs a decoder on the CPU or a CUDA GPU: the prompt in one prefill step, then one decode step per\n"
    "token, greedy (argmax), and prints the N generated ids on one line.\n"
    "\n"
    "  --model DIR_OR_CARD  a Hugging Face checkpoint folder (config.json and\n"
    "                       model.safetensors or its sharded index; Llama, Qwen2, Qwen3,\n"
    "                       Qwen3-MoE) or a model card name or .json path, whose first\n"
    "                       autoregressive stage runs with random weights\n"
    "  --tokens ID,...      the prompt's token ids, each below the vocabulary\n"
    "  --max-tokens N       tokens to generate (>= 1)\n"
    "  --json               print {\"tokens\": [...]} instead\n"
    "  --logits FILE        write every generated position's logits, float32 (N x vocab)\n"
    "                       little-endian, raw or, for a name ending in .npy, as a NumPy\n"
    "                       array; the file appears whole or not at all\n"
    "  --seed S             random weights' seed (default 0)\n"
    "  --dtype T            random weights' element type (default bf16) and the KV\n"
    "                       cache's (default bf16 for a card, f32 for a checkpoint)\n"
    "  --threads T          CPU threads (default: the online CPUs)\n"
    "  --backend NAME       kernel backend: cpu (default) or cuda (a build with -Dcuda)\n"
    "  --device D           the CUDA device (default 0)\n"
    "  -h, --help           this help\n";

/* Parses a decimal unsigned integer in [lo, hi]. */
static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!*s || *s == '-' || *s == '+')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* "1,2,3" into a new array (caller frees); false on anything else. */
static bool parse_tokens(const char *s, int32_t **ids, uint32_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *a = cz_xcalloc(cap, sizeof *a);
    uint32_t m = 0;
    const char *p = s;
    for (;;) {
        char num[32];
        size_t len = strcspn(p, ",");
        uint64_t v;
        if (len == 0 || len >= sizeof num) {
            free(a);
            return false;
        }
        memcpy(num, p, len);
        num[len] = '\0';
        if (!parse_u64(num, 0, INT32_MAX, &v)) {
            free(a);
            return false;
        }
        a[m++] = (int32_t)v;
        if (!p[len])
            break;
        p += len + 1;
    }
    *ids = a;
    *n = m;
    return true;
}

static bool is_checkpoint_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The stage to run: a checkpoint's decoder, or a card's first autoregressive stage (in
 * pipeline order when the card has a pipeline). */
static cz_status load_stage(const char *model, bool *checkpoint, cz_model_card *m,
                            const cz_stage_card **stage, cz_err *err)
{
    *checkpoint = is_checkpoint_dir(model);
    cz_status s;
    struct stat sb;
    if (*checkpoint) {
        cz_hf_arch arch;
        s = cz_hf_config_load(model, m, &arch, err);
    } else if (strchr(model, '/') && stat(model, &sb) != 0) {
        s = cz_err_open(err, model, errno); /* a path, not a card name */
    } else {
        s = cz_model_card_load(model, m, err);
    }
    if (s != CZ_OK)
        return cz_err_prefix(err, "--model: ");
    *stage = NULL;
    for (uint32_t i = 0; i < m->n_pipe && !*stage; i++)
        if (m->stages[m->pipe[i].stage].kind == CZ_STAGE_AR)
            *stage = &m->stages[m->pipe[i].stage];
    for (uint32_t i = 0; i < m->n_stages && !*stage; i++)
        if (m->stages[i].kind == CZ_STAGE_AR)
            *stage = &m->stages[i];
    if (!*stage)
        return cz_err_set(err, CZ_EINVAL, "%s: model card '%s' has no autoregressive stage",
                          model, m->name);
    return CZ_OK;
}

/* Writes logits (rows, vocab) to path: raw float32 little-endian, or .npy v1.0. */
static cz_status write_logits(const char *path, bool npy, const float *logits, uint32_t rows,
                              uint32_t vocab, const char *shown, cz_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return cz_err_set(err, CZ_EIO, "%s: cannot open for writing: %s", shown,
                          strerror(errno));
    bool ok = true;
    if (npy) {
        /* magic, version 1.0, header length, then the dict padded with spaces and a
         * newline so the data start on a multiple of 64 bytes (NEP 1) */
        char dict[128];
        int dl = snprintf(dict, sizeof dict,
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (%u, %u), }", rows,
                          vocab);
        size_t total = 10 + (size_t)dl + 1;
        size_t pad = (64 - total % 64) % 64;
        uint16_t hl = (uint16_t)(dl + pad + 1);
        unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                                 (unsigned char)(hl >> 8)};
        ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)dl, f) == (size_t)dl;
        for (size_t i = 0; i < pad && ok; i++)
            ok = fputc(' ', f) != EOF;
        ok = ok && fputc('\n', f) != EOF;
    }
    size_t count = (size_t)rows * vocab;
    /* the host is little-endian (x86-64, aarch64): the floats' bytes as they are */
    ok = ok && fwrite(logits, sizeof(float), count, f) == count;
    if (fclose(f) != 0)
        ok = false;
    if (!ok)
        return cz_err_set(err, CZ_EIO, "%s: cannot write the logits", shown);
    return CZ_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The prefill and the decode steps; ids (max_new) and, when logits is not NULL, logits
 * (max_new, vocab) filled. CZ_EFORMAT, naming the position, at the first step whose logits
 * hold NaN or +inf (non-finite weights, or an overflow). */
static cz_status run_generation(cz_net *net, cz_kv_pool *kv, const int32_t *prompt, uint32_t np,
                                uint32_t max_new, int32_t *ids, float *logits, cz_err *err)
{
    cz_status st = CZ_OK;
    const cz_stage_card *c = cz_net_card(net);
    uint32_t total = np + max_new, nb = kv->blocks;
    int32_t *bt = cz_xcalloc(nb, sizeof *bt);
    int32_t *pos = cz_xcalloc(np, sizeof *pos);
    int64_t *slots = cz_xcalloc(np, sizeof *slots);
    for (uint32_t i = 0; i < nb; i++)
        bt[i] = (int32_t)i;
    for (uint32_t i = 0; i < np; i++) {
        pos[i] = (int32_t)i;
        slots[i] = i;
    }
    int32_t qsl[2] = {0, (int32_t)np}, seq_len = (int32_t)np, row = (int32_t)np - 1;
    cz_step_batch b = {.n_seqs = 1, .n_tokens = np, .max_blocks = nb, .tokens = prompt,
                       .positions = pos, .qsl = qsl, .seq_lens = &seq_len, .block_table = bt,
                       .slots = slots, .sample_rows = &row, .n_samples = 1};
    cz_net_decode(net, kv, &b, NULL, &ids[0], logits);
    for (uint32_t t = 1; t < max_new && ids[t - 1] >= 0; t++) {
        int32_t p = (int32_t)(np + t - 1);
        int64_t slot = p;
        qsl[1] = 1;
        seq_len = p + 1;
        row = 0;
        b.n_tokens = 1;
        b.tokens = &ids[t - 1];
        b.positions = &p;
        b.slots = &slot;
        cz_net_decode(net, kv, &b, NULL, &ids[t], logits ? logits + (size_t)t * c->vocab : NULL);
    }
    CZ_ASSERT(total <= (uint64_t)nb * kv->block_tokens);
    for (uint32_t t = 0; t < max_new; t++)
        if (ids[t] < 0) {
            st = cz_err_set(err, CZ_EFORMAT,
                            "the logits at position %u hold NaN or +inf: the model's weights "
                            "are not finite or its activations overflow (try --dtype f32)",
                            np + t);
            break;
        }
    free(bt);
    free(pos);
    free(slots);
    return st;
}

int cz_cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *tokens_arg = NULL, *logits_path = NULL;
    uint64_t max_new = 0, seed = 0, threads = 0, device = 0;
    bool cuda = false;
    bool as_json = false, have_max = false, have_dtype = false;
    cz_dtype dtype = CZ_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(generate_usage, stdout);
            return CZ_EXIT_OK;
        }
        if (strcmp(a, "--json") == 0) {
            as_json = true;
            continue;
        }
        static const char *const valued[] = {"--model", "--tokens", "--max-tokens", "--logits",
                                             "--seed",  "--dtype",  "--threads",
                                             "--backend", "--device"};
        bool known = false;
        for (size_t k = 0; k < CZ_ARRAY_LEN(valued); k++)
            known = known || strcmp(a, valued[k]) == 0;
        if (!known)
            return cz_cli_usage_error(CMD, a[0] == '-' ? "unknown option '%s'"
                                                       : "unexpected argument '%s'",
                                      a);
        if (i + 1 >= argc)
            return cz_cli_usage_error(CMD, "option '%s' needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--model") == 0) {
            model = v;
        } else if (strcmp(a, "--tokens") == 0) {
            tokens_arg = v;
        } else if (strcmp(a, "--logits") == 0) {
            logits_path = v;
        } else if (strcmp(a, "--max-tokens") == 0) {
            if (!parse_u64(v, 1, GEN_MAX_CTX, &max_new))
                return cz_cli_usage_error(CMD, "--max-tokens: expected an integer in [1, %u], "
                                               "got '%s'",
                                          GEN_MAX_CTX, v);
            have_max = true;
        } else if (strcmp(a, "--seed") == 0) {
            if (!parse_u64(v, 0, UINT64_MAX, &seed))
                return cz_cli_usage_error(CMD, "--seed: expected a non-negative integer, got "
                                               "'%s'",
                                          v);
        } else if (strcmp(a, "--backend") == 0) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                return cz_cli_usage_error(CMD, "--backend: expected cpu or cuda, got '%s'", v);
            cuda = strcmp(v, "cuda") == 0;
        } else if (strcmp(a, "--device") == 0) {
            if (!parse_u64(v, 0, 1023, &device))
                return cz_cli_usage_error(CMD, "--device: expected a device index in [0, 1023], "
                                               "got '%s'",
                                          v);
        } else if (strcmp(a, "--threads") == 0) {
            if (!parse_u64(v, 1, 1024, &threads))
                return cz_cli_usage_error(CMD, "--threads: expected an integer in [1, 1024], "
                                               "got '%s'",
                                          v);
        } else {
            if (strcmp(v, "bf16") == 0)
                dtype = CZ_BF16;
            else if (strcmp(v, "f16") == 0)
                dtype = CZ_F16;
            else if (strcmp(v, "f32") == 0)
                dtype = CZ_F32;
            else
                return cz_cli_usage_error(CMD, "--dtype: expected bf16, f16 or f32, got '%s'",
                                          v);
            have_dtype = true;
        }
    }
    if (!model)
        return cz_cli_usage_error(CMD, "missing --model DIR_OR_CARD");
    if (!tokens_arg)
        return cz_cli_usage_error(CMD, "missing --tokens ID,ID,...");
    if (!have_max)
        return cz_cli_usage_error(CMD, "missing --max-tokens N");
    int32_t *prompt = NULL;
    uint32_t np = 0;
    if (!parse_tokens(tokens_arg, &prompt, &np))
        return cz_cli_usage_error(CMD, "--tokens: expected comma-separated non-negative "
                                       "integers, got '%s'",
                                  tokens_arg);
    if ((uint64_t)np + max_new > GEN_MAX_CTX) {
        free(prompt);
        return cz_cli_usage_error(CMD, "prompt (%u) plus --max-tokens (%llu) exceed %u "
                                       "positions",
                                  np, (unsigned long long)max_new, GEN_MAX_CTX);
    }

    cz_err err;
    cz_err_clear(&err);
    cz_model_card card;
    const cz_stage_card *stage = NULL;
    bool checkpoint = false;
    cz_status st = load_stage(model, &checkpoint, &card, &stage, &err);
    if (st != CZ_OK) {
        free(prompt);
        return cz_cli_fail(&err);
    }
    for (uint32_t i = 0; i < np; i++) {
        if ((uint32_t)prompt[i] >= stage->vocab) {
            int rc = cz_cli_usage_error(CMD, "--tokens: token %u is %d, not below the "
                                             "vocabulary of '%s' (%u)",
                                        i, prompt[i], stage->name, stage->vocab);
            free(prompt);
            return rc;
        }
    }

    const char *tmp_logits = NULL;
    if (logits_path && (st = cz_out_add("--logits", logits_path, &tmp_logits, &err)) != CZ_OK) {
        free(prompt);
        return cz_cli_fail(&err);
    }
    uint32_t nthreads = threads ? (uint32_t)threads : cz_kctx_cpu_default_threads();
    cz_kctx *k = NULL;
    cz_net *net = NULL;
    cz_kv_pool *kv = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    int rc = CZ_EXIT_OK;
    if ((st = cuda ? cz_kctx_cuda_create((int)device, 0, NULL, &k, &err)
                   : cz_kctx_cpu_create(nthreads, &k, &err)) != CZ_OK)
        goto fail;
    cz_net_source src = {.checkpoint = checkpoint ? model : NULL, .named_by = "--model",
                         .seed = seed, .dtype = dtype};
    if ((st = cz_net_create(k, stage, &src, &net, &err)) != CZ_OK)
        goto fail;
    uint32_t total = np + (uint32_t)max_new;
    cz_dtype kv_dt = have_dtype || !checkpoint ? dtype : CZ_F32;
    if ((st = cz_kv_pool_create(k, stage, (total + GEN_BLOCK_TOKENS - 1) / GEN_BLOCK_TOKENS,
                                GEN_BLOCK_TOKENS, kv_dt, &kv, &err)) != CZ_OK)
        goto fail;
    cz_net_reserve(net, np, 1, total);
    ids = cz_xcalloc(max_new, sizeof *ids);
    if (logits_path)
        logits = cz_xcalloc((size_t)max_new * stage->vocab, sizeof *logits);
    st = run_generation(net, kv, prompt, np, (uint32_t)max_new, ids, logits, &err);
    cz_err dev_err; /* a device failure explains non-finite logits: it comes first */
    if (cz_kctx_status(k, &dev_err) != CZ_OK) {
        err = dev_err;
        st = dev_err.status;
    }
    if (st != CZ_OK)
        goto fail;
    if (logits_path) {
        if ((st = write_logits(tmp_logits, ends_with(logits_path, ".npy"), logits,
                               (uint32_t)max_new, stage->vocab, logits_path, &err)) != CZ_OK ||
            (st = cz_out_commit(&err)) != CZ_OK)
            goto fail;
    }
    if (as_json) {
        fputs("{\"tokens\": [", stdout);
        for (uint64_t i = 0; i < max_new; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        fputs("]}\n", stdout);
    } else {
        for (uint64_t i = 0; i < max_new; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        fputc('\n', stdout);
    }
    goto done;
fail:
    cz_out_discard();
    rc = cz_cli_fail(&err);
done:
    free(ids);
    free(logits);
    free(prompt);
    cz_kv_pool_free(kv);
    cz_net_free(net);
    cz_kctx_free(k);
    return rc;
}
