/* cz_hfconfig.c - see cz_hfconfig.h. The keys and defaults follow transformers'
 * configuration classes (LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig); the
 * mapping is tabled in docs/models.md. */
#include "cz_hfconfig.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cz_json.h"

#define CZ_HF_PATH_MAX 4096
/* Largest dimension accepted from a config: beyond any released model, small enough that
 * parameter counts stay exact in doubles. */
#define CZ_HF_DIM_MAX (1u << 24)

static const char *const arch_names[] = {"LlamaForCausalLM", "Qwen2ForCausalLM",
                                         "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"};
static const char *const model_types[] = {"llama", "qwen2", "qwen3", "qwen3_moe"};

const char *cz_hf_arch_name(cz_hf_arch a)
{
    return (unsigned)a < CZ_ARRAY_LEN(arch_names) ? arch_names[a] : "unknown";
}

/* The value of an optional key, NULL when absent or JSON null (configs write both). */
static const cJSON *opt(const cJSON *j, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNull(it) ? NULL : it;
}

/* An integer in [min, CZ_HF_DIM_MAX]; `def` when optional and absent. */
static cz_status get_dim(const cJSON *j, const char *where, const char *key, bool required,
                         uint32_t min, uint32_t def, uint32_t *out, cz_err *err)
{
    const cJSON *it = opt(j, key);
    if (!it) {
        if (required)
            return cz_err_field(err, CZ_EINVAL, where, key, "missing (expected an integer)");
        *out = def;
        return CZ_OK;
    }
    double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
    if (!cJSON_IsNumber(it) || v != floor(v) || v < min || v > CZ_HF_DIM_MAX)
        return cz_err_field(err, CZ_EINVAL, where, key, "expected an integer in [%u, %u]", min,
                            CZ_HF_DIM_MAX);
    *out = (uint32_t)v;
    return CZ_OK;
}

static cz_status get_bool(const cJSON *j, const char *where, const char *key, bool def,
                          bool *out, cz_err *err)
{
    const cJSON *it = opt(j, key);
    if (!it) {
        *out = def;
        return CZ_OK;
    }
    if (!cJSON_IsBool(it))
        return cz_err_field(err, CZ_EINVAL, where, key, "expected true or false");
    *out = cJSON_IsTrue(it);
    return CZ_OK;
}

static cz_status get_real(const cJSON *j, const char *where, const char *key, double lo,
                          double hi, double def, double *out, cz_err *err)
{
    const cJSON *it = opt(j, key);
    if (!it) {
        *out = def;
        return CZ_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi)
        return cz_err_field(err, CZ_EINVAL, where, key, "expected a number in [%g, %g]", lo,
                            hi);
    *out = it->valuedouble;
    return CZ_OK;
}

/* Which architecture: "architectures"[0], else "model_type". */
static cz_status parse_arch_name(const cJSON *j, const char *where, cz_hf_arch *out, cz_err *err)
{
    const cJSON *a = opt(j, "architectures");
    if (a) {
        const cJSON *first = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
        if (!cJSON_IsString(first))
            return cz_err_field(err, CZ_EINVAL, where, "architectures",
                                "expected an array of class names");
        for (size_t i = 0; i < CZ_ARRAY_LEN(arch_names); i++) {
            if (strcmp(first->valuestring, arch_names[i]) == 0) {
                *out = (cz_hf_arch)i;
                return CZ_OK;
            }
        }
        return cz_err_field(err, CZ_EINVAL, where, "architectures",
                            "expected LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or "
                            "Qwen3MoeForCausalLM, got \"%.64s\"",
                            first->valuestring);
    }
    const cJSON *mt = opt(j, "model_type");
    if (cJSON_IsString(mt)) {
        for (size_t i = 0; i < CZ_ARRAY_LEN(model_types); i++) {
            if (strcmp(mt->valuestring, model_types[i]) == 0) {
                *out = (cz_hf_arch)i;
                return CZ_OK;
            }
        }
        return cz_err_field(err, CZ_EINVAL, where, "model_type",
                            "expected llama, qwen2, qwen3 or qwen3_moe, got \"%.64s\"",
                            mt->valuestring);
    }
    return cz_err_set(err, CZ_EINVAL,
                      "%s: missing field 'architectures' (or 'model_type'): cannot tell the "
                      "architecture",
                      where);
}

/* RoPE: "rope_theta" and "rope_scaling" (transformers 4), or "rope_parameters"
 * (transformers 5, holding rope_theta too). Fills the card JSON's fields. */
static cz_status parse_rope(const cJSON *j, const char *where, cJSON *st, cz_err *err)
{
    const cJSON *params = opt(j, "rope_parameters");
    const cJSON *rs = opt(j, "rope_scaling");
    const char *rs_key = "rope_scaling";
    double theta = 10000.0;
    cz_status s = get_real(j, where, "rope_theta", 1.0, 1e12, 10000.0, &theta, err);
    if (s != CZ_OK)
        return s;
    char ctx[CZ_HF_PATH_MAX + 32];
    if (params) {
        if (!cJSON_IsObject(params))
            return cz_err_field(err, CZ_EINVAL, where, "rope_parameters", "expected an object");
        snprintf(ctx, sizeof ctx, "%s: rope_parameters", where);
        if ((s = get_real(params, ctx, "rope_theta", 1.0, 1e12, theta, &theta, err)) != CZ_OK)
            return s;
        if (!rs) {
            rs = params;
            rs_key = "rope_parameters";
        }
    }
    cJSON_AddNumberToObject(st, "rope_theta", theta);
    if (!rs)
        return CZ_OK;
    if (!cJSON_IsObject(rs))
        return cz_err_field(err, CZ_EINVAL, where, rs_key, "expected an object or null");
    snprintf(ctx, sizeof ctx, "%s: %s", where, rs_key);
    const cJSON *type = opt(rs, "rope_type");
    const char *tkey = "rope_type";
    if (!type) {
        type = opt(rs, "type");
        tkey = "type";
    }
    const char *t = cJSON_IsString(type) ? type->valuestring : type ? NULL : "default";
    if (!t)
        return cz_err_field(err, CZ_EINVAL, ctx, tkey, "expected a string");
    if (strcmp(t, "default") == 0)
        return CZ_OK;
    if (strcmp(t, "linear") != 0 && strcmp(t, "llama3") != 0)
        return cz_err_field(err, CZ_EINVAL, ctx, tkey,
                            "expected \"default\", \"linear\" or \"llama3\" (the RoPE scalings "
                            "the engine implements), got \"%.32s\"",
                            t);
    double factor = 1.0;
    if (!opt(rs, "factor"))
        return cz_err_field(err, CZ_EINVAL, ctx, "factor", "missing (expected a number >= 1)");
    if ((s = get_real(rs, ctx, "factor", 1.0, 1e6, 1.0, &factor, err)) != CZ_OK)
        return s;
    cJSON *o = cJSON_AddObjectToObject(st, "rope_scaling");
    cJSON_AddStringToObject(o, "type", t);
    cJSON_AddNumberToObject(o, "factor", factor);
    if (strcmp(t, "llama3") == 0) {
        double lo = 1.0, hi = 4.0;
        uint32_t orig = 8192;
        if ((s = get_real(rs, ctx, "low_freq_factor", 1e-6, 1e6, 1.0, &lo, err)) != CZ_OK ||
            (s = get_real(rs, ctx, "high_freq_factor", 1e-6, 1e6, 4.0, &hi, err)) != CZ_OK ||
            (s = get_dim(rs, ctx, "original_max_position_embeddings", false, 1, 8192, &orig,
                         err)) != CZ_OK)
            return s;
        if (hi <= lo)
            return cz_err_field(err, CZ_EINVAL, ctx, "high_freq_factor",
                                "expected more than low_freq_factor (%g), got %g", lo, hi);
        cJSON_AddNumberToObject(o, "low_freq_factor", lo);
        cJSON_AddNumberToObject(o, "high_freq_factor", hi);
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", orig);
    }
    return CZ_OK;
}

/* A key whose only supported value is `want` (absent counts as it). */
static cz_status must_be_false(const cJSON *j, const char *where, const char *key,
                               const char *why, cz_err *err)
{
    bool v = false;
    cz_status s = get_bool(j, where, key, false, &v, err);
    if (s == CZ_OK && v)
        return cz_err_field(err, CZ_EINVAL, where, key, "expected false (%s), got true", why);
    return s;
}

cz_status cz_hf_config_card(const cJSON *j, const char *where, const char *name,
                            cJSON **card_out, cz_hf_arch *arch, cz_err *err)
{
    CZ_ASSERT(where != NULL && name != NULL && card_out != NULL && arch != NULL);
    *card_out = NULL;
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object (a model config)", where);
    cz_status s = parse_arch_name(j, where, arch, err);
    if (s != CZ_OK)
        return s;
    bool moe = *arch == CZ_HF_QWEN3_MOE;
    uint32_t vocab, hidden, layers, heads, kv_heads, head_dim, inter = 0;
    if ((s = get_dim(j, where, "vocab_size", true, 1, 0, &vocab, err)) != CZ_OK ||
        (s = get_dim(j, where, "hidden_size", true, 1, 0, &hidden, err)) != CZ_OK ||
        (s = get_dim(j, where, "num_hidden_layers", true, 1, 0, &layers, err)) != CZ_OK ||
        (s = get_dim(j, where, "num_attention_heads", true, 1, 0, &heads, err)) != CZ_OK ||
        (s = get_dim(j, where, "num_key_value_heads", false, 1, heads, &kv_heads, err)) !=
            CZ_OK ||
        (s = get_dim(j, where, "intermediate_size", !moe, 1, 0, &inter, err)) != CZ_OK)
        return s;
    if (kv_heads > heads || heads % kv_heads != 0)
        return cz_err_field(err, CZ_EINVAL, where, "num_key_value_heads",
                            "expected a divisor of num_attention_heads (%u), got %u", heads,
                            kv_heads);
    if (!opt(j, "head_dim") && hidden % heads != 0)
        return cz_err_field(err, CZ_EINVAL, where, "head_dim",
                            "missing, and hidden_size %u is not a multiple of "
                            "num_attention_heads %u",
                            hidden, heads);
    if ((s = get_dim(j, where, "head_dim", false, 2, hidden / heads, &head_dim, err)) != CZ_OK)
        return s;
    uint32_t max_pos = 0;
    if ((s = get_dim(j, where, "max_position_embeddings", false, 1, 0, &max_pos, err)) != CZ_OK)
        return s;
    if (head_dim % 2 != 0)
        return cz_err_field(err, CZ_EINVAL, where, "head_dim",
                            "expected an even number (rotary pairs), got %u", head_dim);
    const cJSON *act = opt(j, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return cz_err_field(err, CZ_EINVAL, where, "hidden_act",
                            "expected \"silu\" (the gated MLP the engine implements)");
    double eps;
    bool tied, attn_bias;
    if ((s = get_real(j, where, "rms_norm_eps", 1e-12, 0.5, 1e-6, &eps, err)) != CZ_OK ||
        (s = get_bool(j, where, "tie_word_embeddings", false, &tied, err)) != CZ_OK ||
        (s = get_bool(j, where, "attention_bias", false, &attn_bias, err)) != CZ_OK ||
        (s = must_be_false(j, where, "mlp_bias", "biases in the MLP are not implemented",
                           err)) != CZ_OK ||
        (s = must_be_false(j, where, "use_sliding_window",
                           "sliding-window layers are not implemented", err)) != CZ_OK)
        return s;

    cJSON *card = cJSON_CreateObject();
    cJSON_AddStringToObject(card, "name", name);
    cJSON_AddStringToObject(card, "source", where);
    cJSON *stages = cJSON_AddArrayToObject(card, "stages");
    cJSON *st = cJSON_CreateObject();
    cJSON_AddItemToArray(stages, st);
    cJSON_AddStringToObject(st, "name", "llm");
    cJSON_AddStringToObject(st, "kind", "ar");
    cJSON_AddNumberToObject(st, "layers", layers);
    cJSON_AddNumberToObject(st, "hidden", hidden);
    cJSON_AddNumberToObject(st, "heads", heads);
    cJSON_AddNumberToObject(st, "kv_heads", kv_heads);
    cJSON_AddNumberToObject(st, "head_dim", head_dim);
    cJSON_AddNumberToObject(st, "vocab", vocab);
    if (max_pos)
        cJSON_AddNumberToObject(st, "max_position_embeddings", max_pos);
    cJSON_AddBoolToObject(st, "tied_embeddings", tied);
    cJSON_AddNumberToObject(st, "norm_eps", eps);
    bool qkv_bias = *arch == CZ_HF_QWEN2 || attn_bias;
    bool o_bias = *arch != CZ_HF_QWEN2 && attn_bias;
    bool qk_norm = *arch == CZ_HF_QWEN3 || *arch == CZ_HF_QWEN3_MOE;
    cJSON_AddBoolToObject(st, "qkv_bias", qkv_bias);
    cJSON_AddBoolToObject(st, "o_bias", o_bias);
    cJSON_AddBoolToObject(st, "qk_norm", qk_norm);
    if ((s = parse_rope(j, where, st, err)) != CZ_OK)
        goto done;

    /* exact parameter count from the module shapes */
    double h = hidden, q = (double)heads * head_dim, kv = (double)kv_heads * head_dim;
    double attn = h * q + 2.0 * h * kv + q * h + (qkv_bias ? q + 2.0 * kv : 0.0) +
                  (o_bias ? h : 0.0) + (qk_norm ? 2.0 * head_dim : 0.0);
    double mlp = 0.0, idle = 0.0;
    if (moe) {
        uint32_t experts, active, einter;
        bool topk_norm;
        if ((s = get_dim(j, where, "num_experts", true, 1, 0, &experts, err)) != CZ_OK ||
            (s = get_dim(j, where, "num_experts_per_tok", true, 1, 0, &active, err)) != CZ_OK ||
            (s = get_dim(j, where, "moe_intermediate_size", true, 1, 0, &einter, err)) != CZ_OK ||
            (s = get_bool(j, where, "norm_topk_prob", false, &topk_norm, err)) != CZ_OK)
            goto done;
        if (active > experts) {
            s = cz_err_field(err, CZ_EINVAL, where, "num_experts_per_tok",
                             "expected at most num_experts (%u), got %u", experts, active);
            goto done;
        }
        uint32_t step = 1;
        if ((s = get_dim(j, where, "decoder_sparse_step", false, 1, 1, &step, err)) != CZ_OK)
            goto done;
        const cJSON *only = opt(j, "mlp_only_layers");
        if (step != 1 || (only && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) > 0))) {
            s = cz_err_field(err, CZ_EINVAL, where,
                             step != 1 ? "decoder_sparse_step" : "mlp_only_layers",
                             "expected every layer to be MoE (decoder_sparse_step 1, "
                             "mlp_only_layers empty): dense layers between MoE ones are not "
                             "implemented");
            goto done;
        }
        cJSON_AddNumberToObject(st, "intermediate", 0);
        cJSON_AddNumberToObject(st, "experts", experts);
        cJSON_AddNumberToObject(st, "experts_active", active);
        cJSON_AddNumberToObject(st, "expert_intermediate", einter);
        cJSON_AddNumberToObject(st, "shared_expert_intermediate", 0);
        cJSON_AddBoolToObject(st, "norm_topk_prob", topk_norm);
        double expert = 3.0 * h * einter;
        mlp = (double)experts * h + experts * expert;
        idle = (double)(experts - active) * expert * layers;
    } else {
        cJSON_AddNumberToObject(st, "intermediate", inter);
        mlp = 3.0 * h * inter;
    }
    double embed = (double)vocab * h;
    double params = embed + layers * (attn + mlp + 2.0 * h) + h + (tied ? 0.0 : embed);
    cJSON_AddNumberToObject(st, "params", params);
    cJSON_AddNumberToObject(st, "active_params", params - idle);
    cJSON_AddNumberToObject(st, "weight_bytes", 2);
    /* the card must parse as any card does */
    cz_model_card check;
    s = cz_model_card_parse(card, where, &check, err);
done:
    if (s == CZ_OK)
        *card_out = card;
    else
        cJSON_Delete(card);
    return s;
}

cz_status cz_hf_config_parse(const cJSON *j, const char *where, const char *name,
                             cz_model_card *out, cz_hf_arch *arch, cz_err *err)
{
    CZ_ASSERT(out != NULL);
    cJSON *card = NULL;
    cz_status s = cz_hf_config_card(j, where, name, &card, arch, err);
    if (s == CZ_OK)
        s = cz_model_card_parse(card, where, out, err);
    cJSON_Delete(card);
    return s;
}

void cz_hf_card_name(const char *config_path, char name[CZ_NAME_MAX])
{
    /* the folder: everything before the last '/', its trailing slashes dropped */
    const char *slash = strrchr(config_path, '/');
    size_t len = slash ? (size_t)(slash - config_path) : 0;
    while (len > 1 && config_path[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && config_path[start - 1] != '/')
        start--;
    size_t n = len - start < CZ_NAME_MAX - 1 ? len - start : CZ_NAME_MAX - 1;
    memcpy(name, config_path + start, n); /* cut to fit */
    name[n] = '\0';
    if (n == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "/") == 0)
        snprintf(name, CZ_NAME_MAX, "checkpoint");
}

cz_status cz_hf_config_load(const char *dir, cz_model_card *out, cz_hf_arch *arch, cz_err *err)
{
    CZ_ASSERT(dir != NULL && out != NULL && arch != NULL);
    char path[CZ_HF_PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return cz_err_set(err, CZ_ERANGE, "%s: path too long", dir);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return cz_err_set(err, CZ_ENOTFOUND, "cannot open '%s' (%s): expected a Hugging Face "
                          "checkpoint folder with a config.json", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) /* a FIFO would block its reader for ever */
        return cz_err_set(err, CZ_EINVAL, "%s: not a regular file: expected a Hugging Face "
                          "config.json", path);
    cJSON *j = NULL;
    cz_status s = cz_json_load(path, &j, err);
    if (s != CZ_OK)
        return s;
    char name[CZ_NAME_MAX];
    cz_hf_card_name(path, name);
    s = cz_hf_config_parse(j, path, name, out, arch, err);
    cJSON_Delete(j);
    return s;
}
