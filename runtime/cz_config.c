/* cz_config.c - experiment configs (cz_config.h) for both drivers; every key is in
 * docs/config.md. */
#include "cz_config.h"
#include "cz_costfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_policies.h"
#include "cz_traces.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

/* ---- config ---- */

/* Fields of a serving-core config present in `j` (the "server" object, or a stage's
 * entry in "pipeline"); `keys` lists what `j` may hold. */
static cz_status parse_server_fields(const cJSON *j, const char *ctx, cz_server_config *srv,
                                     cz_err *err)
{
    uint64_t v;
    cz_status st;
#define U32(key, field, lo, hi)                                                              \
    do {                                                                                      \
        v = srv->field;                                                                       \
        if ((st = cz_json_u64(j, ctx, key, false, lo, hi, &v, err)) != CZ_OK)                \
            return st;                                                                        \
        srv->field = (uint32_t)v;                                                             \
    } while (0)
    /* the core sizes per-step arrays by the sequence cap and a phase table by the block
     * size: bounds far above any engine's (vLLM: 256 sequences, blocks of 16) keep a typo
     * from asking for gigabytes */
    U32("max_num_seqs", max_num_seqs, 1, 65536);
    U32("max_num_batched_tokens", max_num_batched_tokens, 1, UINT32_MAX);
    U32("block_tokens", block_tokens, 1, 4096);
    U32("kv_blocks", kv_blocks, 0, UINT32_MAX);
    U32("max_model_len", max_model_len, 0, UINT32_MAX);
    U32("kv_sink_tokens", kv_sink_tokens, 0, UINT32_MAX);
    U32("kv_window_tokens", kv_window_tokens, 0, UINT32_MAX);
#undef U32
    if ((st = cz_json_bool(j, ctx, "kv_preload", false, &srv->kv_preload, err)) != CZ_OK ||
        (st = cz_json_bool(j, ctx, "kv_bidirectional", false, &srv->kv_bidirectional, err)) !=
            CZ_OK ||
        (st = cz_json_bool(j, ctx, "prefix_caching", false, &srv->prefix_caching, err)) != CZ_OK)
        return st;
    const char *evict = NULL, *unit = NULL;
    if ((st = cz_json_str(j, ctx, "kv_evict", false, &evict, err)) != CZ_OK ||
        (st = cz_json_str(j, ctx, "kv_evict_unit", false, &unit, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "reply_prior_s", false, 0, 1e6, &srv->reply_prior_s, err)) !=
            CZ_OK ||
        (st = cz_json_num(j, ctx, "preload_protect_fraction", false, 0, 1,
                          &srv->preload_protect_fraction, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "speech_prior_s", false, 0, 1e6, &srv->speech_prior_s,
                          err)) != CZ_OK)
        return st;
    const char *speech_end = NULL;
    if ((st = cz_json_str(j, ctx, "preload_speech_end", false, &speech_end, err)) != CZ_OK)
        return st;
    if (speech_end) {
        if (strcmp(speech_end, "estimate") == 0)
            srv->preload_oracle = false;
        else if (strcmp(speech_end, "oracle") == 0)
            srv->preload_oracle = true;
        else
            return cz_err_field(err, CZ_EINVAL, ctx, "preload_speech_end",
                                "expected estimate or oracle, got '%s'", speech_end);
    }
    if (evict) {
        if (strcmp(evict, "lru") == 0)
            srv->kv_evict = CZ_EVICT_LRU;
        else if (strcmp(evict, "next_use") == 0)
            srv->kv_evict = CZ_EVICT_NEXT_USE;
        else if (strcmp(evict, "next_use_scan") == 0)
            srv->kv_evict = CZ_EVICT_NEXT_USE_SCAN;
        else
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'kv_evict': expected lru, next_use or next_use_scan, "
                              "got '%s'",
                              ctx, evict);
    }
    if (unit) {
        if (strcmp(unit, "session") == 0)
            srv->kv_evict_unit = CZ_EVICT_UNIT_SESSION;
        else if (strcmp(unit, "block") == 0)
            srv->kv_evict_unit = CZ_EVICT_UNIT_BLOCK;
        else
            return cz_err_field(err, CZ_EINVAL, ctx, "kv_evict_unit",
                                "expected session or block, got '%s'", unit);
    }
    uint32_t eff_unit = srv->kv_evict_unit != CZ_EVICT_UNIT_DEFAULT ? srv->kv_evict_unit
                        : srv->kv_evict == CZ_EVICT_LRU             ? CZ_EVICT_UNIT_SESSION
                                                                    : CZ_EVICT_UNIT_BLOCK;
    if (eff_unit == CZ_EVICT_UNIT_BLOCK && srv->kv_window_tokens > 0)
        return cz_err_field(err, CZ_EINVAL, ctx, unit ? "kv_evict_unit" : "kv_evict",
                            "evicting blocks from a session's tail keeps its prefix, which a "
                            "windowed KV (kv_window_tokens) does not have; evict whole "
                            "sessions (kv_evict_unit session, the default under lru)");
    if (srv->kv_sink_tokens > 0 && srv->kv_window_tokens == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'kv_sink_tokens': sinks apply to a windowed KV; set "
                          "kv_window_tokens too",
                          ctx);
    if ((st = cz_json_bool(j, ctx, "chunked_prefill", false, &srv->chunked_prefill, err)) != CZ_OK)
        return st;
    const char *idle = NULL;
    if ((st = cz_json_str(j, ctx, "kv_idle", false, &idle, err)) != CZ_OK)
        return st;
    if (idle) {
        if (strcmp(idle, "drop") == 0)
            srv->kv_idle = CZ_KV_IDLE_DROP;
        else if (strcmp(idle, "offload") == 0)
            srv->kv_idle = CZ_KV_IDLE_OFFLOAD;
        else
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'kv_idle': expected drop or offload, got '%s'", ctx, idle);
    }
    if (srv->kv_bidirectional && srv->kv_window_tokens > 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'kv_bidirectional': a windowed KV has no tail to share; "
                          "drop kv_window_tokens or kv_bidirectional",
                          ctx);
    if (srv->prefix_caching && srv->kv_window_tokens > 0)
        return cz_err_field(err, CZ_EINVAL, ctx, "prefix_caching",
                            "a windowed KV (kv_window_tokens) frees the blocks behind its "
                            "window, so it keeps no prefix to share; drop kv_window_tokens or "
                            "prefix_caching");
    if (srv->kv_preload && srv->kv_idle != CZ_KV_IDLE_OFFLOAD)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'kv_preload': preloads bring offloaded KV back; set "
                          "kv_idle to offload",
                          ctx);
    if (srv->max_num_batched_tokens < srv->max_num_seqs)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'max_num_batched_tokens': expected at least max_num_seqs "
                          "(%u), as vLLM requires, got %u",
                          ctx, srv->max_num_seqs, srv->max_num_batched_tokens);
    return CZ_OK;
}

static cz_status parse_server(const cJSON *j, const char *where, cz_config *c,
                              cz_server_config *srv, cz_err *err)
{
    static const char *const keys[] = {"max_num_seqs",    "max_num_batched_tokens",
                                       "chunked_prefill", "block_tokens",
                                       "kv_blocks",       "gpu_memory_utilization",
                                       "max_model_len",   "kv_idle",
                                       "kv_sink_tokens",  "kv_window_tokens",
                                       "kv_evict",        "kv_evict_unit",
                                       "reply_prior_s",
                                       "kv_preload",      "kv_bidirectional",
                                       "preload_protect_fraction", "speech_prior_s",
                                       "preload_speech_end", "prefix_caching"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: server", where);
    cz_status st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st == CZ_OK)
        st = parse_server_fields(j, ctx, srv, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "gpu_memory_utilization", false, 0.01, 1.0,
                         &c->gpu_memory_utilization, err);
    return st;
}

/* The "pipeline" object: per stage name, its replicas, their GPUs, and serving settings
 * that differ from "server". */
static cz_status parse_place_entry(const cJSON *it, const char *ctx, cz_stage_place *pl,
                                   cz_err *err);

static cz_status parse_placement(const cJSON *j, const char *where, cz_config *c,
                                 cz_err *err)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: pipeline.%s", where, it->string);
        uint32_t p = UINT32_MAX;
        for (uint32_t k = 0; k < c->model.n_pipe; k++)
            if (strcmp(c->model.stages[c->model.pipe[k].stage].name, it->string) == 0)
                p = k;
        if (p == UINT32_MAX)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: model '%s' has no pipeline stage named '%s'", where,
                              c->model.name, it->string);
        cz_status st = parse_place_entry(it, ctx, &c->place[p], err);
        if (st != CZ_OK)
            return st;
    }
    return CZ_OK;
}

/* One stage's placement (a "pipeline" entry, or a pool of "disaggregation") into *pl. */
static cz_status parse_place_entry(const cJSON *it, const char *ctx, cz_stage_place *pl,
                                   cz_err *err)
{
    static const char *const keys[] = {"replicas",     "gpus",         "first_gpu",
                                       "tp",
                                       "max_num_seqs",
                                       "max_num_batched_tokens", "chunked_prefill",
                                       "block_tokens", "kv_blocks",    "max_model_len",
                                       "kv_idle",      "max_batch",    "max_tokens",
                                       "kv_sink_tokens", "kv_window_tokens", "kv_evict",
                                       "kv_evict_unit",
                                       "reply_prior_s", "kv_preload", "kv_bidirectional",
                                       "preload_protect_fraction", "prefix_caching"};
    cz_status st;
    {
        if (!cJSON_IsObject(it))
            return cz_err_set(err, CZ_EINVAL, "%s: expected an object", ctx);
        if ((st = cz_json_check_keys(it, ctx, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK)
            return st;
        uint64_t v = pl->replicas;
        if ((st = cz_json_u64(it, ctx, "replicas", false, 1, CZ_MAX_STAGE_REPLICAS, &v,
                              err)) != CZ_OK)
            return st;
        pl->replicas = (uint32_t)v;
        const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(it, "gpus");
        if (gpus && cJSON_GetObjectItemCaseSensitive(it, "first_gpu"))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: fields 'gpus' and 'first_gpu': expected one of them (a "
                              "list of GPUs, or consecutive GPUs from the first)",
                              ctx);
        if (gpus) {
            if (!cJSON_IsArray(gpus) || cJSON_GetArraySize(gpus) != (int)pl->replicas ||
                pl->replicas > CZ_MAX_GPU_LIST)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'gpus': expected an array of %u GPU indices (one "
                                  "per replica; at most %u, 'first_gpu' places more)",
                                  ctx, pl->replicas, CZ_MAX_GPU_LIST);
            uint32_t r = 0;
            const cJSON *g;
            cJSON_ArrayForEach(g, gpus)
            {
                if (!cJSON_IsNumber(g) || g->valuedouble < 0 ||
                    g->valuedouble >= CZ_MAX_STAGE_REPLICAS ||
                    g->valuedouble != floor(g->valuedouble))
                    return cz_err_set(err, CZ_EINVAL,
                                      "%s: field 'gpus': entry %u: expected a GPU index in "
                                      "[0, %u]",
                                      ctx, r, CZ_MAX_STAGE_REPLICAS - 1);
                pl->gpus[r++] = (uint32_t)g->valuedouble;
            }
            pl->gpu_list = true;
        } else {
            v = pl->first_gpu;
            if ((st = cz_json_u64(it, ctx, "first_gpu", false, 0, CZ_MAX_STAGE_REPLICAS, &v,
                                  err)) != CZ_OK)
                return st;
            pl->first_gpu = (uint32_t)v;
            pl->gpu_list = false;
        }
        if ((st = parse_server_fields(it, ctx, &pl->server, err)) != CZ_OK)
            return st;
        v = pl->max_batch;
        if ((st = cz_json_u64(it, ctx, "max_batch", false, 1, 1u << 20, &v, err)) != CZ_OK)
            return st;
        pl->max_batch = (uint32_t)v;
        v = pl->max_tokens;
        if ((st = cz_json_u64(it, ctx, "max_tokens", false, 1, UINT32_MAX, &v, err)) != CZ_OK)
            return st;
        pl->max_tokens = (uint32_t)v;
        v = pl->tp;
        if ((st = cz_json_u64(it, ctx, "tp", false, 1, 1024, &v, err)) != CZ_OK)
            return st;
        pl->tp = (uint32_t)v;
    }
    return CZ_OK;
}

/* A card named in a config: a name stays; a path (holding a '/' or ending in .json) is
 * resolved against the config's folder. Caller frees. */
static char *card_ref(const char *base_dir, const char *ref)
{
    return cz_card_ref_is_path(ref) ? cz_path_resolve(base_dir, ref) : cz_xstrdup(ref);
}

/* An autoregressive stage whose config sets no max_model_len (in "server" or its
 * "pipeline" entry) gets its card's max_position_embeddings, as vLLM derives max_model_len
 * from the model's config; an explicit 0 keeps it unbounded (only the pool bounds it). */
static void default_max_model_len(const cJSON *cfg, cz_config *c)
{
    const cJSON *srv = cJSON_GetObjectItemCaseSensitive(cfg, "server");
    const cJSON *pipe = cJSON_GetObjectItemCaseSensitive(cfg, "pipeline");
    bool in_server = cJSON_GetObjectItemCaseSensitive(srv, "max_model_len") != NULL;
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(cfg, "disaggregation");
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_stage_card *s = &c->model.stages[c->model.pipe[p].stage];
        const cJSON *pl = c->pd ? cJSON_GetObjectItemCaseSensitive(
                                      pd, p == CZ_PD_PREFILL ? "prefill" : "decode")
                                : cJSON_GetObjectItemCaseSensitive(pipe, s->name);
        if (s->kind == CZ_STAGE_AR && s->max_position_embeddings && !in_server &&
            !cJSON_GetObjectItemCaseSensitive(pl, "max_model_len"))
            c->place[p].server.max_model_len = s->max_position_embeddings;
    }
}

static cz_status parse_cost(const cJSON *j, const char *where, const char *base_dir,
                            cz_config *c, cz_err *err)
{
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: cost", where);
    const char *kind = NULL, *file = NULL;
    cz_status st = cz_json_str(j, ctx, "kind", false, &kind, err);
    if (st == CZ_OK)
        st = cz_json_str(j, ctx, "file", false, &file, err);
    if (st != CZ_OK)
        return st;
    if (!kind)
        kind = file ? "fitted" : "roofline";
    cJSON *rest = cJSON_Duplicate(j, 1);
    CZ_ASSERT(rest != NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(rest, "kind");
    if (strcmp(kind, "service") == 0) {
        c->cost_kind = CZ_COST_SERVICE;
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(j, "service_s");
        static const char *const keys[] = {"service_s"};
        if (!sv)
            st = cz_err_set(err, CZ_EINVAL, "%s: missing field 'service_s' (kind \"service\")",
                            ctx);
        else if ((st = cz_json_check_keys(rest, ctx, keys, 1, err)) == CZ_OK)
            st = cz_distspec_parse(sv, ctx, "service_s", &c->service, err);
    } else if (strcmp(kind, "roofline") == 0 && !file) {
        c->cost_kind = CZ_COST_ROOFLINE;
        st = cz_cost_params_parse(rest, ctx, &c->cost, err);
    } else if (strcmp(kind, "fitted") == 0) {
        c->cost_kind = CZ_COST_FITTED;
        cJSON_DeleteItemFromObjectCaseSensitive(rest, "file");
        cJSON_DeleteItemFromObjectCaseSensitive(rest, "scale");
        c->cost_scale = 1.0;
        if ((st = cz_json_num(j, ctx, "scale", false, 1e-3, 1e3, &c->cost_scale, err)) !=
            CZ_OK) {
            cJSON_Delete(rest);
            return st;
        }
        char *full = file ? cz_path_resolve(base_dir, file) : NULL;
        int n = full ? snprintf(c->cost_file, sizeof c->cost_file, "%s", full) : 0;
        free(full);
        if (!file)
            st = cz_err_set(err, CZ_EINVAL,
                            "%s: missing field 'file' (kind \"fitted\": the cost file "
                            "`cadenza calibrate` writes)",
                            ctx);
        else if (n < 0 || (size_t)n >= sizeof c->cost_file)
            st = cz_err_field(err, CZ_EINVAL, ctx, "file", "path too long");
        else
            st = cz_cost_params_parse(rest, ctx, &c->cost, err); /* tp, bw_sat_sm_fraction */
    } else if (file) {
        st = cz_err_field(err, CZ_EINVAL, ctx, "file",
                          "a cost file is a fitted model: expected kind \"fitted\", got '%s'",
                          kind);
    } else {
        st = cz_err_set(err, CZ_EINVAL,
                        "%s: field 'kind': expected roofline, fitted or service, got '%s'", ctx,
                        kind);
    }
    cJSON_Delete(rest);
    return st;
}

/* Loads the cost file of a fitted config into the per-stage coefficients of its model
 * (after the model and hardware cards are read). */
static cz_status apply_cost_file(cz_config *c, const char *where, cz_err *err)
{
    cz_cost_file f;
    cz_status st = cz_cost_file_load(c->cost_file, &f, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "%s: cost.file: ", where);
    if (strcmp(f.model, c->model.name) != 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: cost.file %s was fitted on model '%s', not this config's '%s'",
                          where, c->cost_file, f.model, c->model.name);
    /* a fit times one machine's steps; the hardware card sizes the KV pool and the links */
    if (f.hardware[0] && strcmp(f.hardware, c->hw.name) != 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: cost.file %s was measured on hardware '%s', not this config's "
                          "'%s': set \"hardware\": \"%s\" (--set hardware=%s), or fit on "
                          "this hardware",
                          where, c->cost_file, f.hardware, c->hw.name, f.hardware,
                          f.hardware);
    for (uint32_t i = 0; i < c->model.n_stages; i++) {
        const cz_cost_fit *fit = cz_cost_file_stage(&f, c->model.stages[i].name);
        bool used = false;
        for (uint32_t p = 0; p < c->model.n_pipe; p++)
            used = used || c->model.pipe[p].stage == i || c->model.pipe[p].inner == (int32_t)i;
        if (!fit && used)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: cost.file %s has no fit for stage '%s' of model '%s' (its "
                              "stages: %u); profile and calibrate every stage the pipeline "
                              "runs",
                              where, c->cost_file, c->model.stages[i].name, c->model.name,
                              f.n_stages);
        if (fit) {
            c->fit[i] = *fit;
            for (uint32_t t = 0; t < CZ_CF_N; t++)
                c->fit[i].theta[t] *= c->cost_scale;
        }
    }
    if (f.has_link) {
        c->hw.host_link_Bps = f.link_Bps;
        c->hw.host_link_latency_s = f.link_latency_s;
    }
    c->ingest_s = f.ingest_s;
    c->ingest_per_token_s = f.ingest_per_token_s;
    return CZ_OK;
}

static cz_status parse_slo(const cJSON *j, const char *where, cz_slo *slo, cz_err *err)
{
    static const char *const keys[] = {"ttft_ms", "tpot_ms", "e2el_ms", "audio_ttfp_ms"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: slo", where);
    cz_status st = cz_json_check_keys(j, ctx, keys, 4, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "audio_ttfp_ms", false, 0, 1e12, &slo->audio_ttfp_ms, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "ttft_ms", false, 0, 1e12, &slo->ttft_ms, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "tpot_ms", false, 0, 1e12, &slo->tpot_ms, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "e2el_ms", false, 0, 1e12, &slo->e2el_ms, err);
    return st;
}

/* The batch shapes BROS's step model is fitted on: decode batches of 1 to 256 sequences at
 * 128 to 8,192 tokens of context each, prefill chunks of 16 to 8,192 tokens over cached
 * prefixes of 0 to 4,096, and mixed steps (docs/policies.md). Returns how many it wrote
 * (at most CZ_STEP_FIT_SHAPES). */
uint32_t cz_config_step_fit_shapes(cz_batch *out)
{
    static const uint32_t seqs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    static const uint32_t ctxs[] = {128, 512, 2048, 8192};
    static const uint32_t chunks[] = {16, 64, 256, 1024, 4096, 8192};
    static const uint32_t cached[] = {0, 1024, 4096};
    uint32_t n = 0;
    for (size_t i = 0; i < CZ_ARRAY_LEN(seqs); i++)
        for (size_t j = 0; j < CZ_ARRAY_LEN(ctxs); j++)
            out[n++] = (cz_batch){.decode_seqs = seqs[i],
                                  .decode_ctx_tokens = (uint64_t)seqs[i] * ctxs[j],
                                  .total_tokens = seqs[i]};
    for (size_t i = 0; i < CZ_ARRAY_LEN(chunks); i++)
        for (size_t j = 0; j < CZ_ARRAY_LEN(cached); j++) {
            cz_batch_shape sh = cz_prefill_shape(cached[j], chunks[i]);
            out[n++] = (cz_batch){.prefill_tokens = sh.prefill_tokens, .prefill_seqs = 1,
                                  .prefill_attn_ctx = sh.prefill_attn_ctx,
                                  .total_tokens = chunks[i]};
        }
    for (uint32_t d = 8; d <= 64; d *= 8)
        for (uint32_t t = 256; t <= 2048; t *= 8) {
            cz_batch_shape sh = cz_prefill_shape(0, t);
            out[n++] = (cz_batch){.decode_seqs = d, .decode_ctx_tokens = (uint64_t)d * 1024,
                                  .prefill_tokens = t, .prefill_seqs = 1,
                                  .prefill_attn_ctx = sh.prefill_attn_ctx,
                                  .total_tokens = d + t};
        }
    CZ_ASSERT(n <= CZ_STEP_FIT_SHAPES);
    return n;
}

/* BROS's iteration-latency model (the BROS paper: a linear cost model over input
 * and context lengths), fitted by least squares (GSL) to the stage's step times
 * (cz_config_roofline_step_s, inner stages included) on cz_config_step_fit_shapes. */
static void fit_step_model(const cz_config *c, uint32_t p, cz_policy_params *out)
{
    cz_batch b[CZ_STEP_FIT_SHAPES];
    uint32_t n = cz_config_step_fit_shapes(b);
    gsl_matrix *X = gsl_matrix_alloc(n, 5), *cov = gsl_matrix_alloc(5, 5);
    gsl_vector *y = gsl_vector_alloc(n), *coef = gsl_vector_alloc(5);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, 5);
    CZ_ASSERT(X && cov && y && coef && w);
    for (uint32_t i = 0; i < n; i++) {
        gsl_matrix_set(X, i, 0, 1.0);
        gsl_matrix_set(X, i, 1, (double)b[i].prefill_tokens);
        gsl_matrix_set(X, i, 2, (double)b[i].decode_seqs);
        gsl_matrix_set(X, i, 3, (double)b[i].decode_ctx_tokens);
        gsl_matrix_set(X, i, 4, (double)b[i].prefill_attn_ctx);
        gsl_vector_set(y, i, cz_config_roofline_step_s(c, p, &b[i]));
    }
    double chisq;
    gsl_set_error_handler_off();
    int rc = gsl_multifit_linear(X, y, coef, cov, &chisq, w);
    CZ_ASSERT(rc == 0);
    for (int k = 0; k < 5; k++)
        out->step_s[k] = gsl_vector_get(coef, (size_t)k);
    gsl_multifit_linear_free(w);
    gsl_matrix_free(X);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(coef);
}

/* A cross-stage scheduler runs a vision-language model on one GPU: encoders, then one
 * autoregressive stage without an inner stage, one replica each, all on GPU 0. */
static cz_status check_cross_stage(const cz_config *c, const char *where, cz_err *err)
{
    uint32_t n_ar = 0, n_vision = 0;
    for (uint32_t p = 0; p < c->model.n_pipe; p++)
        n_vision += c->model.stages[c->model.pipe[p].stage].kind == CZ_STAGE_ENCODER &&
                    c->model.pipe[p].io == CZ_IO_IMAGE;
    if (n_vision == 0)
        return cz_err_field(err, CZ_EINVAL, where, "scheduler",
                          "'%s' is a cross-stage scheduler of Nova "
                          "(Nova: Real-Time Agentic Vision-Language Model Serving with Adaptive "
                          "Cross-Stage Parallelization) for a vision-language model, and model "
                          "'%s' has no vision encoder stage; for it use fcfs (vLLM's, with "
                          "chunked prefill on by default: server.chunked_prefill), fcfs_scan, "
                          "liveserve, voxserve or bros",
                          c->scheduler, c->model.name);
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_pipe_stage *ps = &c->model.pipe[p];
        cz_stage_kind kind = c->model.stages[ps->stage].kind;
        const char *sname = c->model.stages[ps->stage].name;
        if (kind == CZ_STAGE_VOCODER ||
            (kind == CZ_STAGE_ENCODER && (n_ar > 0 || ps->io != CZ_IO_IMAGE)) ||
            (kind == CZ_STAGE_AR && (n_ar > 0 || ps->inner >= 0)))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'scheduler': '%s' serves encoders followed by one "
                              "autoregressive stage (a vision-language model); stage '%s' of "
                              "model '%s' does not fit that",
                              where, c->scheduler, sname, c->model.name);
        if (kind == CZ_STAGE_AR)
            n_ar++;
        if (c->place[p].server.prefix_caching)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'server.prefix_caching': scheduler '%s' runs the "
                              "cross-stage runtime, whose KV reservation has no prefix cache; "
                              "use a serving-core scheduler (fcfs) or drop prefix_caching",
                              where, c->scheduler);
        if (c->place[p].replicas != 1 || cz_stage_place_gpu(&c->place[p], 0) != 0)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'pipeline.%s': scheduler '%s' runs every stage on one "
                              "GPU: expected one replica on GPU 0",
                              where, sname, c->scheduler);
    }
    if (n_ar != 1)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'scheduler': '%s' needs a model with one autoregressive "
                          "stage; model '%s' has none",
                          where, c->scheduler, c->model.name);
    if (c->cost_kind == CZ_COST_SERVICE)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'scheduler': '%s' needs a cost model of step shapes (cost "
                          "kind \"roofline\" or \"fitted\")",
                          where, c->scheduler);
    /* decode's partition leaves SMs to the step beside it (section III-C) */
    if (c->xs.kind == CZ_XS_NOVA && !c->xs.enumerate) {
        bool vis = c->xs.sm_decode_vision >= c->hw.sms;
        if (vis || c->xs.sm_decode_prefill >= c->hw.sms)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'scheduler.%s': expected fewer SMs than the GPU's %u "
                              "(%s), got %u",
                              where, vis ? "sm_decode_vision" : "sm_decode_prefill", c->hw.sms,
                              c->hw.name,
                              vis ? c->xs.sm_decode_vision : c->xs.sm_decode_prefill);
    }
    return CZ_OK;
}

/* The cost model's time of a step of card stage `stage` on `share` of the SMs, run by
 * pipeline stage p (its tensor parallelism: cz_config_tp). */
static double stage_cost_s(const cz_config *c, uint32_t p, uint32_t stage,
                           const cz_batch_shape *b, double share)
{
    const cz_stage_card *s = &c->model.stages[stage];
    cz_cost_params own;
    const cz_cost_params *cp = &c->cost;
    uint32_t tp = cz_config_tp(c, p);
    if (tp != (c->cost.tp ? c->cost.tp : 1)) {
        own = c->cost;
        own.tp = tp;
        cp = &own;
    }
    if (c->cost_kind == CZ_COST_FITTED) {
        double x[CZ_CF_N];
        cz_cost_features(s, cp, b, x);
        return cz_cost_fit_s(&c->fit[stage], cp, x, share);
    }
    cz_step_cost cost;
    cz_cost_step(s, &c->hw, cp, b, &cost);
    return share < 1.0 ? cz_cost_share_s(&cost, cp, share) : cost.total_s;
}

double cz_config_stage_share_s(const cz_config *c, uint32_t p, const cz_batch_shape *b,
                         double share)
{
    return stage_cost_s(c, p, c->model.pipe[p].stage, b, share);
}

double cz_config_step_overhead_s(const cz_config *c, uint32_t p)
{
    if (c->cost_kind == CZ_COST_FITTED)
        return c->fit[c->model.pipe[p].stage].theta[CZ_CF_STEP];
    return c->cost.step_overhead_s;
}

cz_batch_shape cz_prefill_shape(uint64_t start, uint64_t tokens)
{
    cz_batch_shape b = {.prefill_tokens = tokens, .prefill_seqs = 1};
    b.prefill_attn_ctx = tokens * start + tokens * (tokens + 1) / 2;
    return b;
}

/* The latencies Nova's enumeration sees (section III-C1), on the cost model, for the mean
 * request (img image tokens, in LLM input tokens, out output tokens): with decode on d of
 * the GPU's SMs, the vision encode (every encoder in turn) and the prefill on the others,
 * and one decode step of one request at the middle of its reply on the d SMs. Times on
 * their SMs alone: cz_xs_ideal_e2e_s applies the co-run factor. 0 < d < sms. */
static cz_xs_split split_at(const cz_config *c, double img, double in, double out,
                            uint32_t d)
{
    uint32_t llm = c->model.n_pipe - 1;
    double f = (double)d / c->hw.sms;
    cz_xs_split sp = {.sms = d};
    for (uint32_t p = 0; p < llm && img > 0; p++) {
        uint64_t t = c->model.pipe[p].input_tokens ? c->model.pipe[p].input_tokens
                                                   : (uint64_t)llround(img);
        cz_batch_shape b = cz_prefill_shape(0, t);
        sp.vision_s += cz_config_stage_share_s(c, p, &b, 1.0 - f);
    }
    uint64_t t = in >= 1 ? (uint64_t)llround(in) : 1; /* the executor prefills >= 1 token */
    cz_batch_shape b = cz_prefill_shape(0, t);
    sp.prefill_s = cz_config_stage_share_s(c, llm, &b, 1.0 - f);
    cz_batch_shape dec = {.decode_seqs = 1, .decode_ctx_tokens = t + (uint64_t)(out / 2)};
    sp.decode_s = cz_config_stage_share_s(c, llm, &dec, f);
    return sp;
}

/* Nova's SM partition (section III-C): the static split by enumeration (Eq. 3) over every
 * split in units of sm_granularity when `enumerate` is set (sets sm_decode_vision /
 * sm_decode_prefill, lowering sm_floor to them when needed), then Eq. 1 at the split decode
 * starts from, recorded with the latencies it saw there. Needs requests. */
static cz_status nova_split(cz_config *c, const cz_workload *wl, const char *where,
                            cz_err *err)
{
    CZ_ASSERT(!wl->gen);
    uint32_t S = c->hw.sms, g = c->xs.sm_granularity;
    if (wl->n_turns == 0 || (c->xs.enumerate && g >= S))
        return c->xs.enumerate
                   ? cz_err_set(err, CZ_EINVAL,
                                "%s: field 'scheduler.enumerate': needs requests and "
                                "sm_granularity (%u) below the GPU's %u SMs",
                                where, g, S)
                   : CZ_OK;
    double img = 0, in = 0, out = 0;
    for (uint32_t i = 0; i < wl->n_turns; i++) {
        img += wl->turns[i].in_image_tokens;
        in += cz_turn_in_tokens(&wl->turns[i]);
        out += wl->turns[i].out_text_tokens;
    }
    img /= wl->n_turns;
    in /= wl->n_turns;
    out /= wl->n_turns;
    if (c->xs.enumerate) {
        uint32_t n = 0;
        cz_xs_split *splits = cz_xmalloc((S / g + 1) * sizeof *splits);
        for (uint32_t d = g; d < S; d += g)
            splits[n++] = split_at(c, img, in, out, d);
        cz_xs_enumerate_split(splits, n, out, c->xs.corun_slowdown, &c->xs.sm_decode_vision,
                              &c->xs.sm_decode_prefill);
        free(splits);
        if (c->xs.sm_floor > c->xs.sm_decode_vision)
            c->xs.sm_floor = c->xs.sm_decode_vision;
        if (c->xs.sm_floor > c->xs.sm_decode_prefill)
            c->xs.sm_floor = c->xs.sm_decode_prefill;
    }
    c->xs_ideal_vision = split_at(c, img, in, out, c->xs.sm_decode_vision);
    c->xs_ideal_prefill = split_at(c, img, in, out, c->xs.sm_decode_prefill);
    c->xs_ideal_e2e_s =
        cz_xs_ideal_e2e_s(&c->xs_ideal_vision, &c->xs_ideal_prefill, out, c->xs.corun_slowdown);
    return CZ_OK;
}

/* "scheduler": a name, or {"name", parameters..., "stages": {stage: {parameters}}}; the
 * same scheduler runs every autoregressive stage, each with its own parameters and the
 * driver's telemetry (audio seconds per token of the stage). */
static cz_status parse_scheduler(const cJSON *cfg, const char *where, cz_config *c,
                                 cz_err *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, "scheduler");
    const char *name = "fcfs";
    const cJSON *params = NULL, *stages = NULL;
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: scheduler", where);
    cz_status st;
    if (cJSON_IsString(j)) {
        name = j->valuestring;
    } else if (cJSON_IsObject(j)) {
        params = j;
        if ((st = cz_json_str(j, ctx, "name", true, &name, err)) != CZ_OK ||
            (st = cz_json_obj(j, ctx, "stages", false, &stages, err)) != CZ_OK)
            return st;
    } else if (j) {
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'scheduler': expected a name or an object with \"name\"",
                          where);
    }
    snprintf(c->scheduler, sizeof c->scheduler, "%s", name);
    st = cz_xs_policy_make(name, params, ctx, &c->xs, err);
    if (st == CZ_OK) {
        c->cross_stage = true;
        return check_cross_stage(c, where, err);
    }
    if (st != CZ_ENOTFOUND)
        return st;
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_pipe_stage *ps = &c->model.pipe[p];
        const char *sname = c->model.stages[ps->stage].name;
        if ((st = cz_policy_make(name, params, ctx, &c->place[p].policy, err)) != CZ_OK)
            return st;
        const cJSON *over = stages ? cJSON_GetObjectItemCaseSensitive(stages, sname) : NULL;
        if (over) {
            char sctx[400];
            snprintf(sctx, sizeof sctx, "%s.stages.%s", ctx, sname);
            cJSON *merged = cJSON_Duplicate(params, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(merged, "stages");
            const cJSON *it;
            cJSON_ArrayForEach(it, over)
            {
                cJSON_DeleteItemFromObjectCaseSensitive(merged, it->string);
                cJSON_AddItemToObject(merged, it->string, cJSON_Duplicate(it, 1));
            }
            st = cz_policy_make(name, merged, sctx, &c->place[p].policy, err);
            cJSON_Delete(merged);
            if (st != CZ_OK)
                return st;
        }
        /* telemetry: the audio seconds one token of this stage becomes downstream */
        double spt = 0;
        if (ps->io == CZ_IO_AUDIO) {
            for (uint32_t d = p + 1; d < c->model.n_pipe; d++)
                if (c->model.pipe[d].from == (int32_t)p &&
                    c->model.stages[c->model.pipe[d].stage].kind == CZ_STAGE_VOCODER)
                    spt = c->model.pipe[d].audio_s_per_token;
        } else if (ps->io == CZ_IO_TEXT) {
            for (uint32_t d = p + 1; d < c->model.n_pipe; d++) {
                if (c->model.pipe[d].from != (int32_t)p ||
                    c->model.stages[c->model.pipe[d].stage].kind != CZ_STAGE_AR)
                    continue;
                for (uint32_t v = d + 1; v < c->model.n_pipe; v++)
                    if (c->model.pipe[v].from == (int32_t)d &&
                        c->model.stages[c->model.pipe[v].stage].kind == CZ_STAGE_VOCODER)
                        spt = c->model.pipe[d].out_per_in * c->model.pipe[v].audio_s_per_token;
            }
        }
        c->place[p].policy.params.audio_s_per_token = spt;
        if (c->model.stages[ps->stage].kind == CZ_STAGE_AR)
            fit_step_model(c, p, &c->place[p].policy.params);
    }
    return CZ_OK;
}

/* One ratio, from the card: a pipeline whose text stage feeds an audio stage makes
 * out_per_in audio tokens per text token, each audio_s_per_token seconds at its vocoder.
 * The workload's spoken replies must be those lengths, or the stages' telemetry, the
 * talker's gating and a barge-in's heard tokens would each use another ratio. The
 * workload's `audio.tokens_per_text_token` and `audio.seconds_per_audio_token` default to
 * the card's (in a copy of the workload object, *out, which the caller deletes; NULL when
 * nothing was added) and must equal them when given. */
static cz_status reconcile_audio(const cz_config *c, const cJSON *wobj, const char *where,
                                 cJSON **out, cz_err *err)
{
    *out = NULL;
    double ratio = 0, spt = 0;
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_pipe_stage *ps = &c->model.pipe[p];
        if (c->model.stages[ps->stage].kind != CZ_STAGE_AR || ps->io != CZ_IO_AUDIO ||
            ps->from < 0)
            continue;
        const cz_pipe_stage *up = &c->model.pipe[ps->from];
        if (c->model.stages[up->stage].kind != CZ_STAGE_AR || up->io != CZ_IO_TEXT)
            continue;
        ratio = ps->out_per_in;
        for (uint32_t v = p + 1; v < c->model.n_pipe; v++)
            if (c->model.pipe[v].from == (int32_t)p &&
                c->model.stages[c->model.pipe[v].stage].kind == CZ_STAGE_VOCODER)
                spt = c->model.pipe[v].audio_s_per_token;
    }
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(wobj, "audio");
    if (!(ratio > 0) || !cJSON_IsObject(au))
        return CZ_OK;
    static const char *const keys[] = {"tokens_per_text_token", "seconds_per_audio_token"};
    const double card[] = {ratio, spt};
    const char *const what[] = {"talker's out_per_in", "vocoder's audio_s_per_token"};
    for (int k = 0; k < 2; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(au, keys[k]);
        if (!it) {
            if (!(card[k] > 0))
                continue;
            if (!*out)
                *out = cJSON_Duplicate(wobj, 1);
            cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(*out, "audio"), keys[k],
                                    card[k]);
            continue;
        }
        if (!cJSON_IsNumber(it) || fabs(it->valuedouble - card[k]) > 1e-9 * card[k]) {
            cJSON_Delete(*out);
            *out = NULL;
            char awhere[300];
            snprintf(awhere, sizeof awhere, "%s: audio", where);
            return cz_err_field(err, CZ_EINVAL, awhere, keys[k],
                                "model '%s' makes %g (its %s); the workload's spoken replies "
                                "must match it: leave the field out or set it to %g",
                                c->model.name, card[k], what[k], card[k]);
        }
    }
    return CZ_OK;
}

/* A pool too small for every turn of the workload would reject them all: an error, not a
 * run. The check is for a pipeline whose first stage is a decoder without a KV window: the
 * smallest turn needs its text prompt and one generated token in the pool. */
static cz_status check_pool_holds_a_request(const cz_config *c, const cz_workload *wl,
                                            const char *where, cz_err *err)
{
    const cz_pipe_stage *ps = &c->model.pipe[0];
    const cz_server_config *sc = &c->place[0].server;
    if (c->cross_stage || wl->n_turns == 0 || c->model.stages[ps->stage].kind != CZ_STAGE_AR ||
        sc->kv_window_tokens || sc->kv_blocks == 0)
        return CZ_OK;
    uint64_t least = (uint64_t)cz_workload_min_text_in(wl) + 1;
    uint64_t pool = (uint64_t)sc->kv_blocks * sc->block_tokens;
    if (pool >= least)
        return CZ_OK;
    return cz_err_set(err, CZ_EINVAL,
                      "%s: field 'server.kv_blocks': %u blocks of %u tokens (%llu tokens) hold "
                      "no turn of the workload: the shortest needs %llu (its prompt and one "
                      "generated token); expected at least %llu blocks",
                      where, sc->kv_blocks, sc->block_tokens, (unsigned long long)pool,
                      (unsigned long long)least,
                      (unsigned long long)((least + sc->block_tokens - 1) / sc->block_tokens));
}

/* Every stage the pipeline runs splits its attention heads over cost.tp GPUs (vLLM's
 * rule): the query heads in equal parts, the KV heads too or each replicated over
 * tp / kv_heads GPUs. */
static cz_status check_tp_divides_heads(const cz_config *c, const char *where, cz_err *err)
{
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        uint32_t tp = cz_config_tp(c, p);
        if (tp == 1)
            continue;
        char field[96] = "cost.tp";
        if (c->place[p].tp)
            snprintf(field, sizeof field, "%s%s.tp", c->pd ? "disaggregation." : "pipeline.",
                     cz_config_stage_name(c, p));
        int32_t idx[2] = {(int32_t)c->model.pipe[p].stage, c->model.pipe[p].inner};
        for (int k = 0; k < 2; k++) {
            if (idx[k] < 0)
                continue;
            const cz_stage_card *s = &c->model.stages[idx[k]];
            if (s->heads && s->heads % tp)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field '%s': %u does not divide the %u attention "
                                  "heads of stage '%s' (model '%s'); expected a divisor of %u",
                                  where, field, tp, s->heads, s->name, c->model.name, s->heads);
            uint32_t kv = s->kv_heads ? s->kv_heads : s->heads;
            if (kv && (kv >= tp ? kv % tp : tp % kv))
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field '%s': %u GPUs cannot share the %u KV heads of "
                                  "stage '%s' (model '%s'); expected a divisor or a multiple "
                                  "of %u",
                                  where, field, tp, kv, s->name, c->model.name, kv);
        }
    }
    return CZ_OK;
}

/* The routers by name (docs/policies.md, "Routers"); least_outstanding is
 * least_loaded's other name. */
static const struct {
    const char *name;
    cz_router policy;
} routers[] = {{"session", CZ_ROUTER_SESSION},          {"least_loaded", CZ_ROUTER_LEAST_LOADED},
               {"least_outstanding", CZ_ROUTER_LEAST_LOADED}, {"random", CZ_ROUTER_RANDOM},
               {"round_robin", CZ_ROUTER_ROUND_ROBIN},  {"power_of_two", CZ_ROUTER_POWER_OF_TWO},
               {"vllm_dp", CZ_ROUTER_VLLM_DP},          {"llm_d", CZ_ROUTER_LLM_D},
               {"kv_router", CZ_ROUTER_KV}};

/* The "router": a policy name, or an object {"policy", "signal_delay_s",
 * "affinity_max_load", "prefix_weight", "queue_weight", "kv_weight",
 * "overlap_score_weight", "track_output_blocks"}. */
static cz_status parse_router(const cJSON *cfg, const char *where, cz_config *c, cz_err *err)
{
    c->router = cz_router_config_default(CZ_ROUTER_SESSION);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, "router");
    const char *name = "session";
    cz_status st;
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: router", where);
    if (cJSON_IsObject(j)) {
        static const char *const keys[] = {"policy",        "signal_delay_s",
                                           "affinity_max_load", "prefix_weight",
                                           "queue_weight",  "kv_weight",
                                           "overlap_score_weight", "track_output_blocks"};
        uint64_t v = 0;
        if ((st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
            (st = cz_json_str(j, ctx, "policy", false, &name, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "signal_delay_s", false, 0, 3600,
                              &c->router.signal_delay_s, err)) != CZ_OK ||
            (st = cz_json_u64(j, ctx, "affinity_max_load", false, 0, UINT32_MAX, &v, err)) !=
                CZ_OK ||
            (st = cz_json_num(j, ctx, "prefix_weight", false, 0, 1000, &c->router.prefix_weight,
                              err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "queue_weight", false, 0, 1000, &c->router.queue_weight,
                              err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "kv_weight", false, 0, 1000, &c->router.kv_weight,
                              err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "overlap_score_weight", false, 0, 1000,
                              &c->router.overlap_score_weight, err)) != CZ_OK ||
            (st = cz_json_bool(j, ctx, "track_output_blocks", false,
                               &c->router.track_output_blocks, err)) != CZ_OK)
            return st;
        c->router.affinity_max_load = (uint32_t)v;
    } else if (j && (st = cz_json_str(cfg, where, "router", false, &name, err)) != CZ_OK) {
        return st;
    }
    for (size_t i = 0; i < CZ_ARRAY_LEN(routers); i++)
        if (strcmp(name, routers[i].name) == 0) {
            c->router.policy = routers[i].policy;
            return CZ_OK;
        }
    return cz_err_set(err, CZ_EINVAL,
                      "%s: field '%s': expected session, least_loaded (least_outstanding), "
                      "vllm_dp, round_robin, power_of_two, random, llm_d or kv_router, got "
                      "'%s'",
                      where, cJSON_IsObject(j) ? "router.policy" : "router", name);
}

/* Sizes the KV pool of every autoregressive replica left unsized: each GPU's memory
 * (hbm_bytes x gpu_memory_utilization) less the weights of every replica placed on it
 * (inner stages included; tensor parallelism divides them) is shared equally by the
 * autoregressive replicas on that GPU. */
static cz_status derive_kv_blocks(cz_config *c, const char *where, cz_err *err)
{
    /* per GPU: the weights placed on it and its autoregressive replicas, in one pass */
    double *weights = cz_xcalloc(c->n_gpus, sizeof *weights);
    uint32_t *n_ar = cz_xcalloc(c->n_gpus, sizeof *n_ar);
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_pipe_stage *ps = &c->model.pipe[p];
        double tp = cz_config_tp(c, p);
        double w = cz_stage_weight_bytes(&c->model.stages[ps->stage]) / tp;
        if (ps->inner >= 0)
            w += cz_stage_weight_bytes(&c->model.stages[ps->inner]) / tp;
        bool ar = c->model.stages[ps->stage].kind == CZ_STAGE_AR;
        for (uint32_t r = 0; r < c->place[p].replicas; r++) {
            uint32_t gpu = cz_stage_place_gpu(&c->place[p], r);
            weights[gpu] += w;
            n_ar[gpu] += ar;
        }
    }
    /* a stage left unsized takes the share of the lowest GPU it is placed on */
    cz_status st = CZ_OK;
    for (uint32_t p = 0; p < c->model.n_pipe && st == CZ_OK; p++) {
        const cz_stage_card *s = &c->model.stages[c->model.pipe[p].stage];
        cz_server_config *srv = &c->place[p].server;
        if (s->kind != CZ_STAGE_AR || srv->kv_blocks != 0)
            continue;
        uint32_t tp = cz_config_tp(c, p);
        uint32_t gpu = UINT32_MAX;
        for (uint32_t r = 0; r < c->place[p].replicas; r++)
            if (cz_stage_place_gpu(&c->place[p], r) < gpu)
                gpu = cz_stage_place_gpu(&c->place[p], r);
        double free_bytes = c->hw.hbm_bytes * c->gpu_memory_utilization - weights[gpu];
        double block_bytes = cz_stage_kv_bytes_per_token_gpu(s, tp) * srv->block_tokens;
        double blocks = floor(free_bytes / n_ar[gpu] / block_bytes);
        if (!(blocks >= 1))
            st = cz_err_set(err, CZ_EINVAL,
                            "%s: model '%s' does not fit on GPU %u (%s) at tp %u: the "
                            "weights placed there (%.1f GB) leave no room for the KV of "
                            "stage '%s' (set server.kv_blocks, cost.tp or the placement)",
                            where, c->model.name, gpu, c->hw.name, tp,
                            weights[gpu] / 1e9, s->name);
        else
            srv->kv_blocks = blocks > UINT32_MAX ? UINT32_MAX : (uint32_t)blocks;
    }
    free(weights);
    free(n_ar);
    return st;
}

double cz_config_jobs_step_s(const cz_config *cfg, uint32_t p, const cz_job *jobs, uint32_t n)
{
    uint64_t prompt = cfg->model.pipe[p].prompt_tokens;
    cz_batch_shape shape = {.prefill_seqs = n};
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t = jobs[i].tokens + prompt;
        shape.prefill_tokens += t;
        shape.prefill_attn_ctx += t * (t + 1) / 2;
    }
    return stage_cost_s(cfg, p, cfg->model.pipe[p].stage, &shape, 1.0);
}

static cz_status parse_dtype(const cJSON *j, const char *ctx, const char *key, uint32_t *out,
                             cz_err *err)
{
    const char *v = NULL;
    cz_status st = cz_json_str(j, ctx, key, false, &v, err);
    if (st != CZ_OK || !v)
        return st;
    static const char *const names[] = {"f32", "bf16", "f16"};
    for (uint32_t i = 0; i < 3; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return CZ_OK;
        }
    return cz_err_field(err, CZ_EINVAL, ctx, key,
                        "expected \"f32\", \"bf16\" or \"f16\", got \"%s\"", v);
}

/* The `engine` object (NULL: defaults). */
static cz_status parse_engine(const cJSON *j, const char *where, const char *base_dir,
                              cz_engine_config *e, cz_err *err)
{
    snprintf(e->weights, sizeof e->weights, "random");
    e->dtype = CZ_ENGINE_BF16;
    e->kv_dtype = CZ_ENGINE_BF16;
    e->top_p = 1.0;
    e->max_kv_bytes = 2.0 * 1024 * 1024 * 1024;
    if (!j)
        return CZ_OK;
    static const char *const keys[] = {"weights", "dtype",  "kv_dtype", "threads",
                                       "temperature", "top_k", "top_p", "max_kv_bytes"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: engine", where);
    cz_status st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;
    const char *w = NULL;
    uint64_t threads = 0, top_k = 0;
    if ((st = cz_json_str(j, ctx, "weights", false, &w, err)) != CZ_OK ||
        (st = parse_dtype(j, ctx, "dtype", &e->dtype, err)) != CZ_OK ||
        (st = parse_dtype(j, ctx, "kv_dtype", &e->kv_dtype, err)) != CZ_OK ||
        (st = cz_json_u64(j, ctx, "threads", false, 0, 1024, &threads, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "temperature", false, 0, 100, &e->temperature, err)) !=
            CZ_OK ||
        (st = cz_json_u64(j, ctx, "top_k", false, 0, UINT32_MAX, &top_k, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "top_p", false, 1e-6, 1, &e->top_p, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "max_kv_bytes", false, 1, 1e15, &e->max_kv_bytes, err)) !=
            CZ_OK)
        return st;
    e->threads = (uint32_t)threads;
    e->top_k = (uint32_t)top_k;
    if (w && strcmp(w, "random") != 0) {
        if (!w[0])
            return cz_err_field(err, CZ_EINVAL, ctx, "weights",
                                "expected \"random\" or a checkpoint folder, got \"\"");
        char *full = cz_path_resolve(base_dir, w);
        int n = snprintf(e->weights, sizeof e->weights, "%s", full);
        free(full);
        if (n < 0 || (size_t)n >= sizeof e->weights)
            return cz_err_field(err, CZ_EINVAL, ctx, "weights",
                                "expected a path shorter than %zu bytes", sizeof e->weights);
    }
    return CZ_OK;
}

/* The `metrics` object: how the summary computes percentiles (docs/metrics.md). */
static cz_status parse_metrics(const cJSON *j, const char *where, cz_pct_mode *mode,
                               cz_err *err)
{
    static const char *const keys[] = {"percentiles"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: metrics", where);
    const char *v = NULL;
    cz_status st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st == CZ_OK)
        st = cz_json_str(j, ctx, "percentiles", false, &v, err);
    if (st != CZ_OK || !v)
        return st;
    if (strcmp(v, "auto") == 0)
        *mode = CZ_PCT_AUTO;
    else if (strcmp(v, "sketch") == 0)
        *mode = CZ_PCT_SKETCH;
    else if (strcmp(v, "exact") == 0)
        *mode = CZ_PCT_EXACT;
    else
        return cz_err_field(err, CZ_EINVAL, ctx, "percentiles",
                            "expected \"auto\", \"sketch\" or \"exact\", got \"%s\"", v);
    return CZ_OK;
}

/* The "disaggregation" object (docs/pipeline.md, "Disaggregated prefill and decode"): the
 * card's one autoregressive stage becomes a prefill pool (pipeline stage 0) and a decode
 * pool (1) of the same model, each placed as a "pipeline" entry is, and the KV link. */
static cz_status parse_disaggregation(const cJSON *j, bool pipeline, const char *where,
                                      cz_config *c, cz_err *err)
{
    static const char *const keys[] = {"prefill", "decode", "link_GBps", "link_latency_s"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: disaggregation", where);
    cz_status st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;
    if (c->model.n_pipe != 1 ||
        c->model.stages[c->model.pipe[0].stage].kind != CZ_STAGE_AR)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: model '%s' runs a pipeline of %u stages; expected a model of "
                          "one autoregressive stage (a text model, or \"stage\" naming one "
                          "of the card's)",
                          ctx, c->model.name, c->model.n_pipe);
    if (pipeline)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: and field 'pipeline': expected one of them (the pools are "
                          "placed by disaggregation.prefill and disaggregation.decode)",
                          ctx);
    c->pd = true;
    c->model.pipe[1] = c->model.pipe[0];
    c->model.pipe[1].from = 0;
    c->model.n_pipe = 2;
    c->place[1] = c->place[0];
    c->place[1].server.kv_import = true;
    static const char *const pools[2] = {"prefill", "decode"};
    for (uint32_t p = 0; p < 2; p++) {
        const cJSON *o = NULL;
        if ((st = cz_json_obj(j, ctx, pools[p], false, &o, err)) != CZ_OK)
            return st;
        if (p == CZ_PD_DECODE && !(o && (cJSON_GetObjectItemCaseSensitive(o, "gpus") ||
                                         cJSON_GetObjectItemCaseSensitive(o, "first_gpu"))))
            /* the decode pool's GPUs follow the prefill pool's */
            c->place[1].first_gpu = cz_stage_place_gpu(&c->place[0], c->place[0].replicas - 1) + 1;
        char pctx[300];
        snprintf(pctx, sizeof pctx, "%s.%s", ctx, pools[p]);
        if (o && (st = parse_place_entry(o, pctx, &c->place[p], err)) != CZ_OK)
            return st;
    }
    for (uint32_t p = 0; p < 2; p++)
        if (c->place[p].server.kv_window_tokens > 0)
            return cz_err_set(err, CZ_EINVAL,
                              "%s.%s: field 'kv_window_tokens': a windowed KV keeps only its "
                              "window, which the decode pool could not pull whole; expected 0 "
                              "with disaggregation",
                              ctx, pools[p]);
    double gbps = 50.0;
    c->pd_link_latency_s = 1e-5;
    if ((st = cz_json_num(j, ctx, "link_GBps", false, 1e-6, 1e9, &gbps, err)) != CZ_OK ||
        (st = cz_json_num(j, ctx, "link_latency_s", false, 0, 1e3, &c->pd_link_latency_s,
                          err)) != CZ_OK)
        return st;
    c->pd_link_Bps = gbps * 1e9;
    return CZ_OK;
}

uint32_t cz_config_ar_ord(const cz_config *c, uint32_t p)
{
    if (c->model.stages[c->model.pipe[p].stage].kind != CZ_STAGE_AR)
        return UINT32_MAX;
    if (c->pd)
        return p == CZ_PD_DECODE ? 0 : 1;
    uint32_t ord = 0;
    for (uint32_t q = 0; q < p; q++)
        ord += c->model.stages[c->model.pipe[q].stage].kind == CZ_STAGE_AR;
    return ord;
}

const char *cz_config_stage_name(const cz_config *c, uint32_t p)
{
    if (c->pd)
        return p == CZ_PD_PREFILL ? "prefill" : "decode";
    return c->model.stages[c->model.pipe[p].stage].name;
}

cz_status cz_config_parse(const cJSON *cfg, const char *where, const char *base_dir,
                              cz_config *c, cz_workload *wl, cz_err *err)
{
    static const char *const keys[] = {"name",     "description", "seed",      "workload",
                                       "model",    "stage",       "hardware",  "cost",
                                       "server",   "scheduler",   "slo",       "sim",
                                       "pipeline", "router",      "client",    "weight_bytes",
                                       "admission", "engine",     "metrics",
                                       "disaggregation"};
    memset(c, 0, sizeof *c);
    c->seed = 1;
    cz_server_config server = cz_server_config_default();
    c->gpu_memory_utilization = 0.9;
    c->continuity_threshold_s = 0.1;
    c->frame_wait_fraction = 0.8;
    c->cost = cz_cost_params_default();
    c->max_time_s = INFINITY;
    c->fast_forward = true;
    c->xs_ideal_e2e_s = NAN;
    c->timeline_interval_s = 0.1;
    if (!cJSON_IsObject(cfg))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object at the top level", where);
    cz_status st = cz_json_check_keys(cfg, where, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;

    const char *name = "unnamed";
    if ((st = cz_json_str(cfg, where, "name", false, &name, err)) != CZ_OK)
        return st;
    snprintf(c->name, sizeof c->name, "%s", name);
    if ((st = cz_json_u64(cfg, where, "seed", false, 0, UINT64_MAX / 2, &c->seed, err)) != CZ_OK)
        return st;

    const cJSON *obj = NULL;
    if ((st = cz_json_obj(cfg, where, "cost", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_cost(obj, where, base_dir, c, err)) != CZ_OK)
        return st;

    const char *model = "llama-3-8b", *hw = "h100-sxm", *stage = NULL;
    if ((st = cz_json_str(cfg, where, "model", false, &model, err)) != CZ_OK ||
        (st = cz_json_str(cfg, where, "hardware", false, &hw, err)) != CZ_OK ||
        (st = cz_json_str(cfg, where, "stage", false, &stage, err)) != CZ_OK)
        return st;
    /* a card file or checkpoint folder written in the config is relative to it */
    char *model_path = card_ref(base_dir, model), *hw_path = card_ref(base_dir, hw);
    st = cz_model_card_load(model_path, &c->model, err);
    if (st == CZ_OK && (st = cz_hw_card_load(hw_path, &c->hw, err)) != CZ_OK) {
        cz_err_prefix(err, "%s: hardware: ", where);
        cz_err_locate(err, where, "hardware"); /* a --set of it is blamed */
    } else if (st != CZ_OK) {
        cz_err_prefix(err, "%s: model: ", where);
        cz_err_locate(err, where, "model");
    }
    free(model_path);
    free(hw_path);
    if (st != CZ_OK)
        return st;
    uint64_t wb = 0;
    if ((st = cz_json_u64(cfg, where, "weight_bytes", false, 1, 8, &wb, err)) != CZ_OK)
        return st;
    for (uint32_t i = 0; wb && i < c->model.n_stages; i++)
        c->model.stages[i].weight_bytes = (uint32_t)wb; /* e.g. 1 for FP8 weights */
    if (stage) {
        /* one autoregressive stage of the card served alone, as a text model */
        int si = -1;
        for (uint32_t i = 0; i < c->model.n_stages; i++)
            if (strcmp(c->model.stages[i].name, stage) == 0 &&
                c->model.stages[i].kind == CZ_STAGE_AR)
                si = (int)i;
        if (si < 0)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'stage': model '%s' has no autoregressive stage named "
                              "'%s'",
                              where, c->model.name, stage);
        c->model.pipe[0] = (cz_pipe_stage){.stage = (uint32_t)si, .from = -1, .io = CZ_IO_TEXT,
                                           .chunk_tokens = 1, .out_per_in = 1, .inner = -1};
        c->model.n_pipe = 1;
    }
    if (c->cost_kind == CZ_COST_FITTED && (st = apply_cost_file(c, where, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "server", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_server(obj, where, c, &server, err)) != CZ_OK)
        return st;
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        c->place[p].replicas = 1;
        c->place[p].server = server;
        c->place[p].max_batch = 64;
        c->place[p].max_tokens = 1u << 20;
    }
    if ((st = cz_json_obj(cfg, where, "pipeline", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_placement(obj, where, c, err)) != CZ_OK)
        return st;
    const cJSON *pd = NULL;
    if ((st = cz_json_obj(cfg, where, "disaggregation", false, &pd, err)) != CZ_OK)
        return st;
    if (pd && (st = parse_disaggregation(pd, obj != NULL, where, c, err)) != CZ_OK)
        return st;
    if ((st = check_tp_divides_heads(c, where, err)) != CZ_OK)
        return st;
    default_max_model_len(cfg, c);
    for (uint32_t p = 0; p < c->model.n_pipe; p++)
        for (uint32_t r = 0; r < c->place[p].replicas; r++)
            if (cz_stage_place_gpu(&c->place[p], r) + 1 > c->n_gpus)
                c->n_gpus = cz_stage_place_gpu(&c->place[p], r) + 1;
    if ((st = parse_scheduler(cfg, where, c, err)) != CZ_OK)
        return st;
    if ((st = parse_router(cfg, where, c, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "client", false, &obj, err)) != CZ_OK)
        return st;
    if (obj) {
        static const char *const ck[] = {"continuity_threshold_s", "frame_wait_fraction"};
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: client", where);
        if ((st = cz_json_check_keys(obj, ctx, ck, 2, err)) != CZ_OK ||
            (st = cz_json_num(obj, ctx, "continuity_threshold_s", false, 0, 1e6,
                              &c->continuity_threshold_s, err)) != CZ_OK ||
            (st = cz_json_num(obj, ctx, "frame_wait_fraction", false, 0.01, 1e6,
                              &c->frame_wait_fraction, err)) != CZ_OK)
            return st;
    }
    if ((st = cz_json_obj(cfg, where, "admission", false, &obj, err)) != CZ_OK)
        return st;
    {
        char actx[256];
        snprintf(actx, sizeof actx, "%s: admission", where);
        if ((st = cz_admission_parse(obj, actx, &c->admission, err)) != CZ_OK)
            return st;
    }
    if ((st = cz_json_obj(cfg, where, "slo", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_slo(obj, where, &c->slo, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "engine", false, &obj, err)) != CZ_OK)
        return st;
    if ((st = parse_engine(obj, where, base_dir, &c->engine, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "sim", false, &obj, err)) != CZ_OK)
        return st;
    if (obj) {
        static const char *const sk[] = {"max_time_s", "timeline_interval_s", "fast_forward"};
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: sim", where);
        if ((st = cz_json_check_keys(obj, ctx, sk, 3, err)) != CZ_OK ||
            (st = cz_json_bool(obj, ctx, "fast_forward", false, &c->fast_forward, err)) !=
                CZ_OK ||
            (st = cz_json_num(obj, ctx, "max_time_s", false, 0, 1e15, &c->max_time_s, err)) !=
                CZ_OK ||
            (st = cz_json_num(obj, ctx, "timeline_interval_s", false, 0, 1e9,
                              &c->timeline_interval_s, err)) != CZ_OK)
            return st;
    }
    if ((st = cz_json_obj(cfg, where, "metrics", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_metrics(obj, where, &c->pct_mode, err)) != CZ_OK)
        return st;
    if ((st = derive_kv_blocks(c, where, err)) != CZ_OK)
        return st;

    if (c->pd && c->cost_kind == CZ_COST_SERVICE)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'disaggregation': cost kind \"service\" gives a request "
                          "one service time, which cannot be split into prefill and decode",
                          where);
    if (wl->live) {
        /* requests come as they come (`cadenza serve`): a workload, if the config has one,
         * is not read; what serves them is checked as for any */
        if (c->pd)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'disaggregation': `cadenza serve` runs colocated "
                              "replicas; a disaggregated config runs in `cadenza sim` and "
                              "`cadenza replay`",
                              where);
        if (c->cross_stage)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: scheduler '%s': a cross-stage runtime serves a workload "
                              "read whole, not requests as they come",
                              where, c->scheduler);
        if (c->cost_kind == CZ_COST_SERVICE)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: cost kind \"service\" draws service times for a workload "
                              "read whole, not for requests as they come",
                              where);
        if (c->admission.kind != CZ_ADMIT_ALL)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'admission': admits periodic sessions, which requests "
                              "as they come are not",
                              where);
        return CZ_OK;
    }
    if ((st = cz_json_obj(cfg, where, "workload", true, &obj, err)) != CZ_OK)
        return st;
    char wctx[256];
    snprintf(wctx, sizeof wctx, "%s: workload", where);
    cJSON *wdup = NULL;
    if ((st = reconcile_audio(c, obj, wctx, &wdup, err)) != CZ_OK)
        return st;
    /* the cross-stage runtimes and the service-time cost read the whole workload */
    if (c->cross_stage || c->cost_kind == CZ_COST_SERVICE)
        wl->stream = false;
    st = cz_workload_from_config(wdup ? wdup : obj, wctx, base_dir, c->seed, wl, err);
    cJSON_Delete(wdup);
    if (st != CZ_OK)
        return st;
    if (c->pd && wl->n_streams > 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'disaggregation': the workload has periodic streams, "
                          "whose every frame is a prefill and a decode on one replica; "
                          "expected turns only",
                          where);
    if (c->admission.kind != CZ_ADMIT_ALL) {
        if (wl->n_streams == 0)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'admission': admits periodic sessions; the workload "
                              "has no streams",
                              where);
        for (uint32_t j = 1; j < wl->n_streams; j++)
            if (wl->streams[j].frame_period_s != wl->streams[0].frame_period_s)
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'admission': the gateway ticks once a frame "
                                  "period; streams 0 and %u have different periods",
                                  where, j);
    }
    if ((st = check_pool_holds_a_request(c, wl, where, err)) != CZ_OK)
        return st;
    if (c->cross_stage && c->xs.kind == CZ_XS_NOVA && !c->xs.multi_stream)
        return nova_split(c, wl, where, err);
    return CZ_OK;
}

bool cz_config_decode_cost(const cz_config *cfg, uint32_t p, cz_cost_decode *out)
{
    const cz_pipe_stage *ps = &cfg->model.pipe[p];
    if (cfg->cost_kind != CZ_COST_ROOFLINE || ps->inner >= 0)
        return false;
    /* stage_cost_s's parameters: the stage's own tensor parallelism */
    cz_cost_params cp = cfg->cost;
    cp.tp = cz_config_tp(cfg, p);
    cz_cost_decode_init(out, &cfg->model.stages[ps->stage], &cfg->hw, &cp);
    return true;
}

double cz_config_roofline_step_s(const cz_config *cfg, uint32_t p, const cz_batch *b)
{
    const cz_pipe_stage *ps = &cfg->model.pipe[p];
    cz_batch_shape shape = {
        .prefill_tokens = b->prefill_tokens,
        .prefill_seqs = b->prefill_seqs,
        .prefill_attn_ctx = b->prefill_attn_ctx,
        .decode_seqs = b->decode_seqs,
        .decode_ctx_tokens = b->decode_ctx_tokens,
    };
    double t = stage_cost_s(cfg, p, ps->stage, &shape, 1.0);
    if (ps->inner >= 0) {
        /* the inner stage (a code predictor) runs inner_steps sequential small steps for
         * the tokens this step emits, with a context of at most inner_steps */
        uint32_t emitted = b->decode_seqs + b->prefill_seqs;
        cz_batch_shape in = {.decode_seqs = emitted,
                             .decode_ctx_tokens = (uint64_t)emitted * ps->inner_steps};
        t += ps->inner_steps * stage_cost_s(cfg, p, (uint32_t)ps->inner, &in, 1.0);
    }
    return t;
}
