/* cz_cards.c - model and hardware cards: lookup by name, JSON parsing with located
 * messages, and the per-stage quantities derived from a card (KV bytes per token, weight
 * bytes). The card schemas are documented in docs/cost-model.md. */
#include "cz_models.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cz_hfconfig.h"
#include "cz_json.h"
#include "cz_models_int.h"

#define CZ_PATH_MAX 4096
/* Largest accepted weight or KV element size in bytes (fp64). */
#define CZ_ELEM_BYTES_MAX 8

/* ---- small typed getters on top of cz_json ------------------------------------------- */

static cz_status get_u32(const cJSON *obj, const char *where, const char *key, bool required,
                         uint32_t min, uint32_t *out, cz_err *err)
{
    uint64_t v = *out;
    cz_status st = cz_json_u64(obj, where, key, required, min, UINT32_MAX, &v, err);
    if (st == CZ_OK)
        *out = (uint32_t)v;
    return st;
}

/* An optional integer in [0, max]. Absent: *out untouched. */
static cz_status get_u32_max(const cJSON *obj, const char *where, const char *key, uint32_t max,
                             uint32_t *out, cz_err *err)
{
    uint64_t v = *out;
    cz_status st = cz_json_u64(obj, where, key, false, 0, max, &v, err);
    if (st == CZ_OK)
        *out = (uint32_t)v;
    return st;
}

/* A finite number > 0 (or >= 0 when `allow_zero`). Absent and optional: *out untouched. */
static cz_status get_pos(const cJSON *obj, const char *where, const char *key, bool required,
                         bool allow_zero, double *out, cz_err *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it)
        return required ? cz_err_set(err, CZ_EINVAL, "%s: missing field '%s'", where, key) : CZ_OK;
    const char *want = allow_zero ? "a non-negative number" : "a positive number";
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return cz_err_set(err, CZ_EINVAL, "%s: field '%s': expected %s, got %s", where, key, want,
                          cJSON_IsString(it) ? "a string" : "a value that is not a number");
    double v = it->valuedouble;
    if (v < 0.0 || (!allow_zero && v == 0.0))
        return cz_err_set(err, CZ_EINVAL, "%s: field '%s': expected %s, got %g", where, key, want,
                          v);
    *out = v;
    return CZ_OK;
}

/* A string that fits in a CZ_NAME_MAX buffer, copied into `out`. */
static cz_status get_name(const cJSON *obj, const char *where, const char *key, char *out,
                          cz_err *err)
{
    const char *s = NULL;
    cz_status st = cz_json_str(obj, where, key, true, &s, err);
    if (st != CZ_OK)
        return st;
    size_t n = strlen(s);
    if (n == 0 || n >= CZ_NAME_MAX)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field '%s': expected a non-empty string of at most %d characters, "
                          "got %zu characters",
                          where, key, CZ_NAME_MAX - 1, n);
    memcpy(out, s, n + 1);
    return CZ_OK;
}

/* "source" (required) and "notes" (optional) must be strings; their text is not kept. */
static cz_status check_provenance(const cJSON *obj, const char *where, cz_err *err)
{
    const char *s = NULL;
    cz_status st = cz_json_str(obj, where, "source", true, &s, err);
    if (st != CZ_OK)
        return st;
    if (s && s[0] == '\0')
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'source': expected the public document the numbers come "
                          "from, got an empty string",
                          where);
    return cz_json_str(obj, where, "notes", false, &s, err);
}

/* ---- stage kinds --------------------------------------------------------------------- */

static const char *const kind_names[] = {"ar", "encoder", "vocoder"};

const char *cz_stage_kind_name(cz_stage_kind kind)
{
    if ((unsigned)kind < CZ_ARRAY_LEN(kind_names))
        return kind_names[kind];
    return "unknown";
}

/* ---- model cards --------------------------------------------------------------------- */

static const char *const stage_keys[] = {
    "name",         "kind",           "layers",          "hidden",
    "heads",        "kv_heads",       "head_dim",        "intermediate",
    "vocab",        "experts",        "experts_active",  "expert_intermediate",
    "params",       "active_params",  "embed_params",    "tied_embeddings",
    "flops_per_token", "weight_bytes", "kv_bytes",       "notes", "passes",
    "nonlayer_params", "max_position_embeddings",
    /* architecture (cz_stage_arch, docs/models.md) */
    "rope_theta",   "rope_scaling",   "norm",            "norm_eps",
    "activation",   "qkv_bias",       "o_bias",          "qk_norm",
    "shared_expert_intermediate",     "norm_topk_prob",  "window",
    "codebooks",    "codebook_size",  "upsample_rates",  "decoder_dim",
    "input_dim",    "downsample",     "output_dim",
};

static const char *const model_keys[] = {"name", "source", "notes", "stages", "pipeline"};

double cz__stage_expert_params(const cz_stage_card *s)
{
    return 3.0 * s->hidden * (double)s->expert_intermediate * s->layers;
}

double cz__stage_head_params(const cz_stage_card *s)
{
    if (s->kind != CZ_STAGE_AR || s->tied_embeddings)
        return 0.0;
    return (double)s->vocab * s->hidden;
}

double cz__stage_body_params(const cz_stage_card *s)
{
    return s->active_params - s->embed_params - cz__stage_head_params(s);
}

static cz_status parse_kind(const cJSON *j, const char *where, cz_stage_kind *out, cz_err *err)
{
    const char *k = NULL;
    cz_status st = cz_json_str(j, where, "kind", true, &k, err);
    if (st != CZ_OK)
        return st;
    for (size_t i = 0; i < CZ_ARRAY_LEN(kind_names); i++) {
        if (strcmp(k, kind_names[i]) == 0) {
            *out = (cz_stage_kind)i;
            return CZ_OK;
        }
    }
    return cz_err_set(err, CZ_EINVAL,
                      "%s: field 'kind': expected one of \"ar\", \"encoder\", \"vocoder\", "
                      "got \"%s\"",
                      where, k);
}

/* ---- architecture fields (cz_stage_arch) --------------------------------------------- */

/* Largest width, rate or count an architecture field accepts: far beyond any model, small
 * enough that products of a few of them stay exact in doubles and sizes in size_t. */
#define CZ_ARCH_DIM_MAX (1u << 24)

cz_stage_arch cz_stage_arch_default(cz_stage_kind kind, uint32_t hidden, uint32_t intermediate,
                                    uint32_t experts)
{
    bool enc = kind == CZ_STAGE_ENCODER;
    cz_stage_arch a = {
        .rope_theta = 10000.0,
        .rope_type = CZ_ROPE_DEFAULT,
        .rope_factor = 1.0,
        .rope_low_freq_factor = 1.0,
        .rope_high_freq_factor = 4.0,
        .rope_original_max_pos = 8192,
        .norm = enc ? CZ_NORM_LAYER : CZ_NORM_RMS,
        .norm_eps = enc ? 1e-5 : 1e-6,
        .act = enc ? CZ_ACT_GELU : CZ_ACT_SILU,
        .qkv_bias = enc,
        .o_bias = enc,
        .qk_norm = false,
        .shared_expert_intermediate = experts > 0 ? intermediate : 0,
        .norm_topk_prob = true,
        .window = 0,
        .codebooks = 1,
        .codebook_size = 1024,
        .n_upsample = 0,
        .decoder_dim = hidden,
        .input_dim = hidden,
        .downsample = 1,
        .output_dim = 0,
    };
    return a;
}

uint32_t cz_stage_samples_per_token(const cz_stage_card *s)
{
    CZ_ASSERT(s != NULL);
    if (s->kind != CZ_STAGE_VOCODER)
        return 0;
    uint32_t n = 1;
    for (uint32_t i = 0; i < s->arch.n_upsample; i++)
        n *= s->arch.upsample_rates[i];
    return n;
}

/* A field that only a stage of kind `only` may carry. */
static cz_status kind_only(const cJSON *j, const char *where, const char *key, cz_stage_kind kind,
                           cz_stage_kind only, cz_err *err)
{
    if (kind == only || !cJSON_GetObjectItemCaseSensitive(j, key))
        return CZ_OK;
    return cz_err_field(err, CZ_EINVAL, where, key, "only allowed for %s \"%s\" stage",
                        only == CZ_STAGE_AR ? "an" : "a", cz_stage_kind_name(only));
}

/* One of `n` spellings, stored as its index. Absent: *out untouched. */
static cz_status get_enum(const cJSON *j, const char *where, const char *key,
                          const char *const *names, unsigned n, unsigned *out, cz_err *err)
{
    const char *v = NULL;
    cz_status st = cz_json_str(j, where, key, false, &v, err);
    if (st != CZ_OK || !v)
        return st;
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return CZ_OK;
        }
    }
    char want[128] = "";
    for (unsigned i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\"%s\"",
                 i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
    return cz_err_field(err, CZ_EINVAL, where, key, "expected %s, got \"%s\"", want, v);
}

/* "rope_scaling": {"type": "default" | "linear" | "llama3", "factor",
 * "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}. */
static cz_status parse_rope_scaling(const cJSON *j, const char *where, cz_stage_arch *a,
                                    cz_err *err)
{
    static const char *const keys[] = {"type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    static const char *const types[] = {"default", "linear", "llama3"};
    const cJSON *rs = NULL;
    cz_status st = cz_json_obj(j, where, "rope_scaling", false, &rs, err);
    if (st != CZ_OK || !rs)
        return st;
    char ctx[CZ_ERR_MSG_MAX / 2 + 16];
    snprintf(ctx, sizeof ctx, "%s: rope_scaling", where);
    if ((st = cz_json_check_keys(rs, ctx, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK)
        return st;
    unsigned type = 0;
    if (!cJSON_GetObjectItemCaseSensitive(rs, "type"))
        return cz_err_set(err, CZ_EINVAL, "%s: missing field 'type' (\"linear\" or \"llama3\")",
                          ctx);
    if ((st = get_enum(rs, ctx, "type", types, CZ_ARRAY_LEN(types), &type, err)) != CZ_OK)
        return st;
    a->rope_type = (cz_rope_type)type;
    uint64_t orig = a->rope_original_max_pos;
    if ((st = cz_json_num(rs, ctx, "factor", a->rope_type != CZ_ROPE_DEFAULT, 1.0, 1e6,
                          &a->rope_factor, err)) != CZ_OK)
        return st;
    if (a->rope_type != CZ_ROPE_LLAMA3) {
        static const char *const l3[] = {"low_freq_factor", "high_freq_factor",
                                         "original_max_position_embeddings"};
        for (size_t i = 0; i < CZ_ARRAY_LEN(l3); i++)
            if (cJSON_GetObjectItemCaseSensitive(rs, l3[i]))
                return cz_err_field(err, CZ_EINVAL, ctx, l3[i],
                                    "only allowed with \"type\": \"llama3\"");
        if (a->rope_type == CZ_ROPE_DEFAULT)
            a->rope_factor = 1.0;
        return CZ_OK;
    }
    if ((st = cz_json_num(rs, ctx, "low_freq_factor", false, 1e-6, 1e6,
                          &a->rope_low_freq_factor, err)) != CZ_OK ||
        (st = cz_json_num(rs, ctx, "high_freq_factor", false, 1e-6, 1e6,
                          &a->rope_high_freq_factor, err)) != CZ_OK ||
        (st = cz_json_u64(rs, ctx, "original_max_position_embeddings", false, 1,
                          CZ_ARCH_DIM_MAX, &orig, err)) != CZ_OK)
        return st;
    a->rope_original_max_pos = (uint32_t)orig;
    if (a->rope_high_freq_factor <= a->rope_low_freq_factor)
        return cz_err_field(err, CZ_EINVAL, ctx, "high_freq_factor",
                            "expected more than low_freq_factor (%g), got %g",
                            a->rope_low_freq_factor, a->rope_high_freq_factor);
    return CZ_OK;
}

/* "upsample_rates": an array of 0 to CZ_UPSAMPLE_MAX integers in [1, 64]. */
static cz_status parse_upsample(const cJSON *j, const char *where, cz_stage_arch *a, cz_err *err)
{
    const cJSON *ur = cJSON_GetObjectItemCaseSensitive(j, "upsample_rates");
    if (!ur)
        return CZ_OK;
    int n = cJSON_IsArray(ur) ? cJSON_GetArraySize(ur) : -1;
    if (n < 0 || n > CZ_UPSAMPLE_MAX)
        return cz_err_field(err, CZ_EINVAL, where, "upsample_rates",
                            "expected an array of at most %d integers in [1, 64]",
                            CZ_UPSAMPLE_MAX);
    const cJSON *it;
    uint32_t k = 0;
    double total = 1.0;
    cJSON_ArrayForEach(it, ur)
    {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
        if (!cJSON_IsNumber(it) || v != floor(v) || v < 1.0 || v > 64.0)
            return cz_err_field(err, CZ_EINVAL, where, "upsample_rates",
                                "element %u: expected an integer in [1, 64]", k);
        a->upsample_rates[k++] = (uint32_t)v;
        total *= v;
    }
    if (total > 65536.0)
        return cz_err_field(err, CZ_EINVAL, where, "upsample_rates",
                            "expected at most 65536 samples per token in all, got %.0f", total);
    a->n_upsample = k;
    return CZ_OK;
}

/* The optional architecture fields of stage *s (its dimensions already parsed). */
static cz_status parse_arch(const cJSON *j, const char *where, cz_stage_card *s, cz_err *err)
{
    static const char *const norms[] = {"rms", "layer"};
    static const char *const acts[] = {"silu", "gelu"};
    cz_stage_arch *a = &s->arch;
    *a = cz_stage_arch_default(s->kind, s->hidden, s->intermediate, s->experts);
    static const char *const vocoder_only[] = {"window", "codebooks", "codebook_size",
                                               "upsample_rates", "decoder_dim"};
    static const char *const encoder_only[] = {"input_dim", "downsample", "output_dim"};
    static const char *const ar_only[] = {"rope_scaling"};
    cz_status st;
    for (size_t i = 0; i < CZ_ARRAY_LEN(vocoder_only); i++)
        if ((st = kind_only(j, where, vocoder_only[i], s->kind, CZ_STAGE_VOCODER, err)) != CZ_OK)
            return st;
    for (size_t i = 0; i < CZ_ARRAY_LEN(encoder_only); i++)
        if ((st = kind_only(j, where, encoder_only[i], s->kind, CZ_STAGE_ENCODER, err)) != CZ_OK)
            return st;
    for (size_t i = 0; i < CZ_ARRAY_LEN(ar_only); i++)
        if ((st = kind_only(j, where, ar_only[i], s->kind, CZ_STAGE_AR, err)) != CZ_OK)
            return st;
    if (s->experts == 0) {
        static const char *const moe_only[] = {"shared_expert_intermediate", "norm_topk_prob"};
        for (size_t i = 0; i < CZ_ARRAY_LEN(moe_only); i++)
            if (cJSON_GetObjectItemCaseSensitive(j, moe_only[i]))
                return cz_err_field(err, CZ_EINVAL, where, moe_only[i],
                                    "only allowed with 'experts' > 0 (a mixture-of-experts "
                                    "stage)");
    }

    unsigned norm = a->norm, act = a->act;
    if ((st = cz_json_num(j, where, "rope_theta", false, 1.0, 1e12, &a->rope_theta, err)) !=
            CZ_OK ||
        (st = parse_rope_scaling(j, where, a, err)) != CZ_OK ||
        (st = get_enum(j, where, "norm", norms, CZ_ARRAY_LEN(norms), &norm, err)) != CZ_OK ||
        (st = get_enum(j, where, "activation", acts, CZ_ARRAY_LEN(acts), &act, err)) != CZ_OK)
        return st;
    a->norm = (cz_norm_kind)norm;
    a->act = (cz_act_kind)act;
    if (a->norm == CZ_NORM_LAYER)
        a->norm_eps = 1e-5;
    else
        a->norm_eps = 1e-6;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(j, "norm_eps");
    if (eps && (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0.0 && eps->valuedouble < 1.0)))
        return cz_err_field(err, CZ_EINVAL, where, "norm_eps", "expected a number in (0, 1)");
    if (eps)
        a->norm_eps = eps->valuedouble;
    if ((st = cz_json_bool(j, where, "qkv_bias", false, &a->qkv_bias, err)) != CZ_OK ||
        (st = cz_json_bool(j, where, "o_bias", false, &a->o_bias, err)) != CZ_OK ||
        (st = cz_json_bool(j, where, "qk_norm", false, &a->qk_norm, err)) != CZ_OK ||
        (st = cz_json_bool(j, where, "norm_topk_prob", false, &a->norm_topk_prob, err)) != CZ_OK)
        return st;
    if (s->experts > 0 && a->act != CZ_ACT_SILU)
        return cz_err_field(err, CZ_EINVAL, where, "activation",
                            "expected \"silu\" for a mixture-of-experts stage (its experts are "
                            "gated MLPs), got \"gelu\"");
    if (s->experts > 0 &&
        (st = get_u32_max(j, where, "shared_expert_intermediate", CZ_ARCH_DIM_MAX,
                          &a->shared_expert_intermediate, err)) != CZ_OK)
        return st;

    if (s->kind == CZ_STAGE_VOCODER) {
        if ((st = get_u32_max(j, where, "window", CZ_ARCH_DIM_MAX, &a->window, err)) != CZ_OK ||
            (st = get_u32(j, where, "codebooks", false, 1, &a->codebooks, err)) != CZ_OK ||
            (st = get_u32(j, where, "codebook_size", false, 1, &a->codebook_size, err)) !=
                CZ_OK ||
            (st = get_u32(j, where, "decoder_dim", false, 1, &a->decoder_dim, err)) != CZ_OK ||
            (st = parse_upsample(j, where, a, err)) != CZ_OK)
            return st;
        if (a->codebooks > 64 || a->codebook_size > CZ_ARCH_DIM_MAX ||
            a->decoder_dim > CZ_ARCH_DIM_MAX)
            return cz_err_field(err, CZ_EINVAL, where,
                                a->codebooks > 64 ? "codebooks"
                                : a->codebook_size > CZ_ARCH_DIM_MAX ? "codebook_size"
                                                                     : "decoder_dim",
                                "expected at most %u", a->codebooks > 64 ? 64u : CZ_ARCH_DIM_MAX);
        if ((a->decoder_dim >> a->n_upsample) == 0)
            return cz_err_field(err, CZ_EINVAL, where, "decoder_dim",
                                "expected at least 2^%u (each of the %u upsampling stages halves "
                                "the channels), got %u",
                                a->n_upsample, a->n_upsample, a->decoder_dim);
    }
    if (s->kind == CZ_STAGE_ENCODER) {
        if ((st = get_u32(j, where, "input_dim", false, 1, &a->input_dim, err)) != CZ_OK ||
            (st = get_u32(j, where, "downsample", false, 1, &a->downsample, err)) != CZ_OK ||
            (st = get_u32_max(j, where, "output_dim", CZ_ARCH_DIM_MAX, &a->output_dim, err)) !=
                CZ_OK)
            return st;
        if (a->input_dim > CZ_ARCH_DIM_MAX || a->downsample > 64)
            return cz_err_field(err, CZ_EINVAL, where,
                                a->downsample > 64 ? "downsample" : "input_dim",
                                "expected at most %u", a->downsample > 64 ? 64u : CZ_ARCH_DIM_MAX);
    }
    return CZ_OK;
}

/* Parses stage `idx` of a model card into *s. `file` names the card in messages. */
static cz_status parse_stage(const cJSON *j, const char *file, unsigned idx, cz_stage_card *s,
                             cz_err *err)
{
    char where[CZ_ERR_MSG_MAX / 2];
    snprintf(where, sizeof where, "%s: stages[%u]", file, idx);
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected an object", where);

    memset(s, 0, sizeof *s);
    cz_status st = get_name(j, where, "name", s->name, err);
    if (st != CZ_OK)
        return st;
    /* From here on messages name the stage too: "card.json: stages[1] (talker)". */
    snprintf(where, sizeof where, "%s: stages[%u] (%s)", file, idx, s->name);

    st = cz_json_check_keys(j, where, stage_keys, (int)CZ_ARRAY_LEN(stage_keys), err);
    if (st != CZ_OK)
        return st;
    const char *notes = NULL;
    if ((st = cz_json_str(j, where, "notes", false, &notes, err)) != CZ_OK)
        return st;
    if ((st = parse_kind(j, where, &s->kind, err)) != CZ_OK)
        return st;

    bool ar = s->kind == CZ_STAGE_AR;
    if ((st = get_u32(j, where, "layers", true, 1, &s->layers, err)) != CZ_OK ||
        (st = get_u32(j, where, "hidden", true, 1, &s->hidden, err)) != CZ_OK ||
        (st = get_u32(j, where, "heads", true, 1, &s->heads, err)) != CZ_OK ||
        (st = get_u32(j, where, "kv_heads", true, 1, &s->kv_heads, err)) != CZ_OK ||
        (st = get_u32(j, where, "intermediate", true, 0, &s->intermediate, err)) != CZ_OK ||
        (st = get_u32(j, where, "vocab", true, ar ? 1 : 0, &s->vocab, err)) != CZ_OK)
        return st;
    if (!ar && s->vocab != 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'vocab': expected 0 for an %s stage (its lookup tables and "
                          "codebooks count in params), got %u",
                          where, cz_stage_kind_name(s->kind), s->vocab);
    if (s->kv_heads > s->heads || s->heads % s->kv_heads != 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'kv_heads': expected a divisor of heads (%u), got %u", where,
                          s->heads, s->kv_heads);

    if (cJSON_GetObjectItemCaseSensitive(j, "head_dim")) {
        if ((st = get_u32(j, where, "head_dim", true, 1, &s->head_dim, err)) != CZ_OK)
            return st;
    } else {
        if (s->hidden % s->heads != 0)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: missing field 'head_dim' (needed because hidden %u is not a "
                              "multiple of heads %u)",
                              where, s->hidden, s->heads);
        s->head_dim = s->hidden / s->heads;
    }

    if ((st = get_u32(j, where, "experts", false, 0, &s->experts, err)) != CZ_OK)
        return st;
    if (s->experts > 0) {
        if ((st = get_u32(j, where, "experts_active", true, 1, &s->experts_active, err)) !=
                CZ_OK ||
            (st = get_u32(j, where, "expert_intermediate", true, 1, &s->expert_intermediate,
                          err)) != CZ_OK)
            return st;
        if (s->experts_active > s->experts)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'experts_active': expected at most experts (%u), got %u",
                              where, s->experts, s->experts_active);
    } else {
        static const char *const moe_only[] = {"experts_active", "expert_intermediate"};
        for (size_t i = 0; i < CZ_ARRAY_LEN(moe_only); i++)
            if (cJSON_GetObjectItemCaseSensitive(j, moe_only[i]))
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field '%s': only allowed with 'experts' > 0 (a "
                                  "mixture-of-experts stage)",
                                  where, moe_only[i]);
    }

    if ((st = get_pos(j, where, "params", true, false, &s->params, err)) != CZ_OK)
        return st;
    s->active_params = s->params;
    if ((st = get_pos(j, where, "active_params", false, false, &s->active_params, err)) != CZ_OK)
        return st;
    if (s->active_params > s->params)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'active_params': expected at most params (%.6g), got %.6g",
                          where, s->params, s->active_params);

    s->tied_embeddings = false;
    if ((st = cz_json_bool(j, where, "tied_embeddings", false, &s->tied_embeddings, err)) != CZ_OK)
        return st;
    if (s->tied_embeddings && !ar)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'tied_embeddings': only meaningful for an \"ar\" stage",
                          where);
    s->embed_params = ar ? (double)s->vocab * s->hidden : 0.0;
    if ((st = get_pos(j, where, "embed_params", false, true, &s->embed_params, err)) != CZ_OK)
        return st;
    if ((st = get_pos(j, where, "flops_per_token", false, true, &s->flops_per_token, err)) !=
        CZ_OK)
        return st;
    s->nonlayer_params = 0.0;
    if ((st = get_pos(j, where, "nonlayer_params", false, true, &s->nonlayer_params, err)) !=
        CZ_OK)
        return st;
    if (s->nonlayer_params >= s->params)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'nonlayer_params': expected less than params (%.6g), the "
                          "rest being the layers' weights, got %.6g",
                          where, s->params, s->nonlayer_params);
    s->passes = 1;
    if ((st = get_u32_max(j, where, "passes", 1000, &s->passes, err)) != CZ_OK)
        return st;
    if (s->passes == 0)
        return cz_err_set(err, CZ_EINVAL, "%s: field 'passes': expected 1 to 1000, got 0", where);

    s->max_position_embeddings = 0;
    if ((st = get_u32_max(j, where, "max_position_embeddings", UINT32_MAX,
                          &s->max_position_embeddings, err)) != CZ_OK)
        return st;
    if (s->max_position_embeddings && s->kind != CZ_STAGE_AR)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'max_position_embeddings': only an autoregressive stage "
                          "has a context limit (this stage is %s)",
                          where, cz_stage_kind_name(s->kind));

    s->weight_bytes = 2;
    s->kv_bytes = 2;
    if ((st = get_u32(j, where, "weight_bytes", false, 1, &s->weight_bytes, err)) != CZ_OK ||
        (st = get_u32(j, where, "kv_bytes", false, 1, &s->kv_bytes, err)) != CZ_OK)
        return st;
    if (s->weight_bytes > CZ_ELEM_BYTES_MAX || s->kv_bytes > CZ_ELEM_BYTES_MAX)
        return cz_err_set(err, CZ_EINVAL, "%s: field '%s': expected at most %d bytes, got %u",
                          where, s->weight_bytes > CZ_ELEM_BYTES_MAX ? "weight_bytes" : "kv_bytes",
                          CZ_ELEM_BYTES_MAX,
                          s->weight_bytes > CZ_ELEM_BYTES_MAX ? s->weight_bytes : s->kv_bytes);

    /* The per-token compute must be positive once the lookup tables and the LM head (counted
     * separately, per emitted token) are taken out of active_params. */
    double body = cz__stage_body_params(s);
    if (body <= 0.0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'active_params': expected more than embed_params + LM head "
                          "(%.6g + %.6g), got %.6g",
                          where, s->embed_params, cz__stage_head_params(s), s->active_params);
    if (s->experts > 0) {
        double e = cz__stage_expert_params(s);
        if (s->experts_active * e >= body)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'expert_intermediate': %u active experts of 3 x %u x %u "
                              "x %u layers (%.6g) leave no room in active_params (%.6g) for "
                              "attention",
                              where, s->experts_active, s->hidden, s->expert_intermediate,
                              s->layers, s->experts_active * e, body);
        if (s->experts * e >= s->params)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'params': expected more than the %u experts' %.6g "
                              "parameters, got %.6g",
                              where, s->experts, s->experts * e, s->params);
    }
    return parse_arch(j, where, s, err);
}

static int stage_index(const cz_model_card *m, const char *name)
{
    for (uint32_t i = 0; i < m->n_stages; i++)
        if (strcmp(m->stages[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Parses the optional "pipeline" array (docs/pipeline.md); without one the pipeline is
 * the card's first autoregressive stage alone. */
static cz_status parse_pipeline(const cJSON *p, const char *where, cz_model_card *m, cz_err *err)
{
    static const char *const keys[] = {"stage",          "from",         "io",
                                       "chunk_tokens",   "overlap_tokens", "out_per_in",
                                       "audio_s_per_token", "inner_stage", "inner_steps_per_token",
                                       "input_tokens", "prompt_tokens", "sample_rate_hz"};
    if (!p) {
        for (uint32_t i = 0; i < m->n_stages; i++) {
            if (m->stages[i].kind == CZ_STAGE_AR) {
                m->pipe[0] = (cz_pipe_stage){.stage = i, .from = -1, .io = CZ_IO_TEXT,
                                             .chunk_tokens = 1, .out_per_in = 1, .inner = -1};
                m->n_pipe = 1;
                return CZ_OK;
            }
        }
        return cz_err_set(err, CZ_EINVAL,
                          "%s: no 'pipeline' and no autoregressive stage to serve", where);
    }
    int n = cJSON_IsArray(p) ? cJSON_GetArraySize(p) : -1;
    if (n < 1 || n > CZ_MAX_STAGES)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'pipeline': expected an array of 1 to %d stage objects",
                          where, CZ_MAX_STAGES);
    const cJSON *it;
    uint32_t k = 0, n_ar = 0;
    cz_status st;
    cJSON_ArrayForEach(it, p)
    {
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: pipeline[%u]", where, k);
        if (!cJSON_IsObject(it))
            return cz_err_set(err, CZ_EINVAL, "%s: expected an object", ctx);
        if ((st = cz_json_check_keys(it, ctx, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK)
            return st;
        cz_pipe_stage *ps = &m->pipe[k];
        *ps = (cz_pipe_stage){.from = -1, .chunk_tokens = 1, .out_per_in = 1, .inner = -1};
        const char *name = NULL, *from = NULL, *io = NULL, *inner = NULL;
        if ((st = cz_json_str(it, ctx, "stage", true, &name, err)) != CZ_OK ||
            (st = cz_json_str(it, ctx, "from", false, &from, err)) != CZ_OK ||
            (st = cz_json_str(it, ctx, "io", false, &io, err)) != CZ_OK ||
            (st = cz_json_str(it, ctx, "inner_stage", false, &inner, err)) != CZ_OK)
            return st;
        int si = stage_index(m, name);
        if (si < 0)
            return cz_err_set(err, CZ_EINVAL, "%s: field 'stage': no stage named '%s'", ctx, name);
        ps->stage = (uint32_t)si;
        cz_stage_kind kind = m->stages[si].kind;
        if (kind == CZ_STAGE_VOCODER) {
            ps->chunk_tokens = 25;
            ps->sample_rate_hz = 24000.0;
        }
        if ((st = get_u32(it, ctx, "chunk_tokens", false, 1, &ps->chunk_tokens, err)) != CZ_OK ||
            (st = get_u32(it, ctx, "overlap_tokens", false, 0, &ps->overlap_tokens, err)) !=
                CZ_OK ||
            (st = get_u32(it, ctx, "input_tokens", false, 0, &ps->input_tokens, err)) != CZ_OK ||
            (st = get_u32_max(it, ctx, "prompt_tokens", 1u << 20, &ps->prompt_tokens, err)) !=
                CZ_OK ||
            (st = get_pos(it, ctx, "out_per_in", false, false, &ps->out_per_in, err)) != CZ_OK ||
            (st = get_pos(it, ctx, "audio_s_per_token", kind == CZ_STAGE_VOCODER, false,
                          &ps->audio_s_per_token, err)) != CZ_OK ||
            (st = get_pos(it, ctx, "sample_rate_hz", false, false, &ps->sample_rate_hz, err)) !=
                CZ_OK)
            return st;
        if (kind != CZ_STAGE_VOCODER && cJSON_GetObjectItemCaseSensitive(it, "sample_rate_hz"))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'sample_rate_hz': only a vocoder has an audio sample "
                              "rate", ctx);
        if (from) {
            int fi = -1;
            for (uint32_t q = 0; q < k; q++)
                if (strcmp(m->stages[m->pipe[q].stage].name, from) == 0)
                    fi = (int)q;
            if (fi < 0)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'from': '%s' is not an earlier pipeline stage", ctx,
                                  from);
            ps->from = fi;
        }
        if (io) {
            if (strcmp(io, "text") == 0)
                ps->io = CZ_IO_TEXT;
            else if (strcmp(io, "audio") == 0)
                ps->io = CZ_IO_AUDIO;
            else if (strcmp(io, "image") == 0)
                ps->io = CZ_IO_IMAGE;
            else
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'io': expected text, audio or image, got '%s'", ctx,
                                  io);
        }
        if (inner) {
            int ii = stage_index(m, inner);
            if (ii < 0 || m->stages[ii].kind != CZ_STAGE_AR)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'inner_stage': '%s' is not an autoregressive stage",
                                  ctx, inner);
            ps->inner = ii;
            ps->inner_steps = 1;
            if ((st = get_u32(it, ctx, "inner_steps_per_token", false, 1, &ps->inner_steps,
                              err)) != CZ_OK)
                return st;
        }
        /* the shapes the simulator serves: encoders, then AR stages in a chain, then
         * vocoders fed by an audio-producing AR stage */
        const char *why = NULL;
        if (kind == CZ_STAGE_ENCODER) {
            if (n_ar > 0)
                why = "an encoder must come before every autoregressive stage";
            else if (ps->io != CZ_IO_AUDIO && ps->io != CZ_IO_IMAGE)
                why = "an encoder needs \"io\": \"audio\" or \"image\" (what it encodes)";
        } else if (ps->input_tokens > 0) {
            why = "\"input_tokens\" applies to encoders only";
        } else if (ps->prompt_tokens > 0 && kind != CZ_STAGE_VOCODER) {
            why = "\"prompt_tokens\" applies to vocoders only";
        } else if (kind == CZ_STAGE_AR) {
            if (ps->io == CZ_IO_NONE)
                ps->io = n_ar == 0 ? CZ_IO_TEXT : CZ_IO_AUDIO;
            if (ps->io == CZ_IO_IMAGE)
                why = "an autoregressive stage produces text or audio";
            else if (n_ar > 0 && (ps->from < 0 || m->stages[m->pipe[ps->from].stage].kind !=
                                                      CZ_STAGE_AR))
                why = "a second autoregressive stage must be fed (\"from\") by the one before it";
            n_ar++;
        } else {
            if (ps->from < 0 || m->stages[m->pipe[ps->from].stage].kind != CZ_STAGE_AR ||
                m->pipe[ps->from].io != CZ_IO_AUDIO)
                why = "a vocoder must be fed (\"from\") by an audio-producing autoregressive stage";
        }
        if (why)
            return cz_err_set(err, CZ_EINVAL, "%s: %s", ctx, why);
        k++;
    }
    if (n_ar == 0)
        return cz_err_set(err, CZ_EINVAL, "%s: field 'pipeline': no autoregressive stage", where);
    m->n_pipe = k;
    return CZ_OK;
}

cz_status cz_model_card_parse(const cJSON *j, const char *where, cz_model_card *out, cz_err *err)
{
    CZ_ASSERT(where != NULL && out != NULL);
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object (a model card)", where);
    cz_status st = cz_json_check_keys(j, where, model_keys, (int)CZ_ARRAY_LEN(model_keys), err);
    if (st != CZ_OK)
        return st;
    memset(out, 0, sizeof *out);
    if ((st = get_name(j, where, "name", out->name, err)) != CZ_OK ||
        (st = check_provenance(j, where, err)) != CZ_OK)
        return st;

    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(j, "stages");
    if (!stages)
        return cz_err_set(err, CZ_EINVAL, "%s: missing field 'stages'", where);
    int n = cJSON_IsArray(stages) ? cJSON_GetArraySize(stages) : -1;
    if (n < 1 || n > CZ_MAX_STAGES)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'stages': expected an array of 1 to %d stage objects", where,
                          CZ_MAX_STAGES);
    const cJSON *it;
    unsigned i = 0;
    cJSON_ArrayForEach(it, stages)
    {
        if ((st = parse_stage(it, where, i, &out->stages[i], err)) != CZ_OK)
            return st;
        for (unsigned k = 0; k < i; k++)
            if (strcmp(out->stages[k].name, out->stages[i].name) == 0)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: stages[%u]: field 'name': \"%s\" is already the name of "
                                  "stages[%u]",
                                  where, i, out->stages[i].name, k);
        i++;
    }
    out->n_stages = i;
    return parse_pipeline(cJSON_GetObjectItemCaseSensitive(j, "pipeline"), where, out, err);
}

const cz_stage_card *cz_model_card_stage(const cz_model_card *m, const char *stage)
{
    CZ_ASSERT(m != NULL && stage != NULL);
    for (uint32_t i = 0; i < m->n_stages; i++)
        if (strcmp(m->stages[i].name, stage) == 0)
            return &m->stages[i];
    return NULL;
}

/* ---- hardware cards ------------------------------------------------------------------ */

static const char *const hw_keys[] = {
    "name",          "source",           "notes",                 "sms",
    "hbm_bytes",     "hbm_bw_Bps",       "bf16_flops",            "host_link_Bps",
    "host_link_full_duplex", "host_link_latency_s", "interconnect_Bps",
};

cz_status cz_hw_card_parse(const cJSON *j, const char *where, cz_hw_card *out, cz_err *err)
{
    CZ_ASSERT(where != NULL && out != NULL);
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object (a hardware card)", where);
    cz_status st = cz_json_check_keys(j, where, hw_keys, (int)CZ_ARRAY_LEN(hw_keys), err);
    if (st != CZ_OK)
        return st;
    memset(out, 0, sizeof *out);
    if ((st = get_name(j, where, "name", out->name, err)) != CZ_OK ||
        (st = check_provenance(j, where, err)) != CZ_OK ||
        (st = get_u32(j, where, "sms", true, 1, &out->sms, err)) != CZ_OK ||
        (st = get_pos(j, where, "hbm_bytes", true, false, &out->hbm_bytes, err)) != CZ_OK ||
        (st = get_pos(j, where, "hbm_bw_Bps", true, false, &out->hbm_bw_Bps, err)) != CZ_OK ||
        (st = get_pos(j, where, "bf16_flops", true, false, &out->bf16_flops, err)) != CZ_OK ||
        (st = get_pos(j, where, "host_link_Bps", true, false, &out->host_link_Bps, err)) !=
            CZ_OK ||
        (st = cz_json_bool(j, where, "host_link_full_duplex", true, &out->host_link_full_duplex,
                           err)) != CZ_OK ||
        (st = get_pos(j, where, "host_link_latency_s", true, true, &out->host_link_latency_s,
                      err)) != CZ_OK ||
        (st = get_pos(j, where, "interconnect_Bps", true, false, &out->interconnect_Bps, err)) !=
            CZ_OK)
        return st;
    return CZ_OK;
}

/* ---- loading ------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool cz_card_ref_is_path(const char *ref)
{
    return strchr(ref, '/') || ends_with(ref, ".json");
}

/* Resolves `name_or_path` to a file: a path ending in ".json" is used as given; a name is
 * looked up as <cards folder>/<sub>/<name>.json. *by_name tells which. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The built-in card folder (`sub`: "cards" or "hw") into dir; true when it is
 * $CZ_CARDS_DIR's. */
static bool cards_dir(const char *sub, char *dir, size_t n)
{
    const char *env = getenv("CZ_CARDS_DIR");
    if (env && env[0]) {
        snprintf(dir, n, "%s/%s", env, sub);
        return true;
    }
    char data[CZ_PATH_MAX - 16];
    cz_data_dir(data, sizeof data);
    snprintf(dir, n, "%s/models/%s", data, sub);
    return false;
}

cz_status cz_cards_list(bool hardware, char ***names, size_t *n, char *dir, size_t dir_n,
                        cz_err *err)
{
    CZ_ASSERT(names != NULL && n != NULL && dir != NULL);
    *names = NULL;
    *n = 0;
    cards_dir(hardware ? "hw" : "cards", dir, dir_n);
    DIR *d = opendir(dir);
    if (!d)
        return cz_err_open(err, dir, errno);
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0 || e->d_name[0] == '.')
            continue;
        cz_grow((void **)names, &cap, *n + 1, sizeof **names);
        char *name = cz_xmalloc(len - 4);
        memcpy(name, e->d_name, len - 5);
        name[len - 5] = '\0';
        (*names)[(*n)++] = name;
    }
    closedir(d);
    if (*n)
        qsort(*names, *n, sizeof **names, cmp_str);
    return CZ_OK;
}

/* "known: a, b, c" (sorted), the card names in the folder of `path`, into out. */
static void list_cards(const char *path, char *out, size_t cap)
{
    char dir[CZ_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    DIR *d = opendir(slash ? dir : ".");
    snprintf(out, cap, "no cards there");
    if (!d)
        return;
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < CZ_ARRAY_LEN(names)) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0 && e->d_name[0] != '.') {
            names[n] = cz_xmalloc(len - 4);
            memcpy(names[n], e->d_name, len - 5);
            names[n][len - 5] = '\0';
            n++;
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    size_t used = 0;
    if (n)
        used = (size_t)snprintf(out, cap, "known:");
    for (size_t i = 0; i < n; i++) {
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s %s", i ? "," : "", names[i]);
        free(names[i]);
    }
    if (used >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
}

static cz_status card_path(const char *what, const char *sub, const char *name_or_path,
                           char *path, size_t n, bool *by_name, cz_err *err)
{
    bool from_env = true;
    if (name_or_path[0] == '\0')
        return cz_err_set(err, CZ_EINVAL, "%s card: empty name", what);
    if (ends_with(name_or_path, ".json")) {
        if ((size_t)snprintf(path, n, "%s", name_or_path) >= n)
            return cz_err_set(err, CZ_ERANGE, "%s card '%s': path too long", what, name_or_path);
        *by_name = false;
    } else {
        for (const char *c = name_or_path; *c; c++)
            if (!(((*c | 0x20) >= 'a' && (*c | 0x20) <= 'z') || (*c >= '0' && *c <= '9') ||
                  *c == '-' || *c == '_' || *c == '.'))
                return cz_err_set(err, CZ_EINVAL,
                                  "%s card '%s': expected a card name (letters, digits, '-', "
                                  "'_', '.') or a path ending in .json",
                                  what, name_or_path);
        const char *dir = getenv("CZ_CARDS_DIR");
        char fallback[CZ_PATH_MAX];
        if (!dir || dir[0] == '\0') {
            char data[CZ_PATH_MAX - 8];
            cz_data_dir(data, sizeof data);
            snprintf(fallback, sizeof fallback, "%s/models", data);
            dir = fallback;
            from_env = false;
        }
        if ((size_t)snprintf(path, n, "%s/%s/%s.json", dir, sub, name_or_path) >= n)
            return cz_err_set(err, CZ_ERANGE, "%s card '%s': path too long", what, name_or_path);
        *by_name = true;
    }
    if (access(path, R_OK) != 0) {
        int e = errno;
        if (!*by_name)
            return cz_err_open(err, path, e);
        char known[400];
        list_cards(path, known, sizeof known);
        return cz_err_set(err, CZ_ENOTFOUND,
                          "%s card '%s': cannot open '%s' (%s); cards by name are looked up "
                          "in %s; %s",
                          what, name_or_path, path, strerror(e),
                          from_env ? "$CZ_CARDS_DIR" : "the data folder ($CZ_CARDS_DIR is not "
                                                       "set; docs/install.md)",
                          known);
    }
    return CZ_OK;
}

static cz_status check_loaded_name(const char *path, const char *want, const char *got,
                                   cz_err *err)
{
    if (strcmp(want, got) != 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'name': expected \"%s\" (the file's name), got \"%s\"", path,
                          want, got);
    return CZ_OK;
}

/* A JSON object that is a Hugging Face config.json rather than a card: it has no "stages"
 * and names its architecture. */
static bool is_hf_config(const cJSON *j)
{
    return cJSON_IsObject(j) && !cJSON_GetObjectItemCaseSensitive(j, "stages") &&
           (cJSON_GetObjectItemCaseSensitive(j, "architectures") ||
            cJSON_GetObjectItemCaseSensitive(j, "model_type"));
}

cz_status cz_model_card_load(const char *name_or_path, cz_model_card *out, cz_err *err)
{
    CZ_ASSERT(name_or_path != NULL && out != NULL);
    struct stat sb;
    cz_hf_arch arch;
    if (strchr(name_or_path, '/') && !ends_with(name_or_path, ".json") &&
        stat(name_or_path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cz_hf_config_load(name_or_path, out, &arch, err); /* a checkpoint folder */
    char path[CZ_PATH_MAX];
    bool by_name = false;
    cz_status st = card_path("model", "cards", name_or_path, path, sizeof path, &by_name, err);
    if (st != CZ_OK) {
        if (err && by_name && stat(name_or_path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n,
                     "; a checkpoint folder is named by a path: ./%s", name_or_path);
        }
        return st;
    }
    cJSON *j = NULL;
    if ((st = cz_json_load(path, &j, err)) != CZ_OK)
        return st;
    if (!by_name && is_hf_config(j)) {
        /* a config.json named directly: the card is named after its folder */
        char name[CZ_NAME_MAX];
        cz_hf_card_name(path, name);
        st = cz_hf_config_parse(j, path, name, out, &arch, err);
        cJSON_Delete(j);
        return st;
    }
    st = cz_model_card_parse(j, path, out, err);
    cJSON_Delete(j);
    if (st == CZ_OK && by_name)
        st = check_loaded_name(path, name_or_path, out->name, err);
    return st;
}

cz_status cz_hw_card_load(const char *name_or_path, cz_hw_card *out, cz_err *err)
{
    CZ_ASSERT(name_or_path != NULL && out != NULL);
    char path[CZ_PATH_MAX];
    bool by_name = false;
    cz_status st = card_path("hardware", "hw", name_or_path, path, sizeof path, &by_name, err);
    if (st != CZ_OK)
        return st;
    cJSON *j = NULL;
    if ((st = cz_json_load(path, &j, err)) != CZ_OK)
        return st;
    st = cz_hw_card_parse(j, path, out, err);
    cJSON_Delete(j);
    if (st == CZ_OK && by_name)
        st = check_loaded_name(path, name_or_path, out->name, err);
    return st;
}

/* ---- derived quantities -------------------------------------------------------------- */

double cz_stage_kv_bytes_per_token(const cz_stage_card *s)
{
    return cz_stage_kv_bytes_per_token_gpu(s, 1);
}

double cz_stage_kv_bytes_per_token_gpu(const cz_stage_card *s, uint32_t tp)
{
    CZ_ASSERT(s != NULL && tp >= 1);
    if (s->kind != CZ_STAGE_AR)
        return 0.0;
    uint32_t heads_gpu = (s->kv_heads + tp - 1) / tp;
    return 2.0 * s->layers * (double)heads_gpu * s->head_dim * s->kv_bytes;
}

double cz_stage_weight_bytes(const cz_stage_card *s)
{
    CZ_ASSERT(s != NULL);
    return s->params * s->weight_bytes;
}

double cz_stage_layer_weight_bytes(const cz_stage_card *s)
{
    CZ_ASSERT(s != NULL && s->layers > 0 && s->nonlayer_params < s->params);
    return (s->params - s->nonlayer_params) * s->weight_bytes / s->layers;
}

double cz_stage_nonlayer_weight_bytes(const cz_stage_card *s)
{
    CZ_ASSERT(s != NULL);
    return s->nonlayer_params * s->weight_bytes;
}
