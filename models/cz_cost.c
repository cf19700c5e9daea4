/* cz_cost.c - the roofline cost model: FLOPs and bytes of one batch step of one stage on
 * one GPU of a tensor-parallel group, turned into seconds against the hardware card's peak
 * rates scaled by efficiency factors, plus the tensor-parallel all-reduces and a fixed step
 * overhead; and host-link transfer times. The formulas and the choices behind each term are
 * in docs/cost-model.md; this file is their only implementation. */
#include "cz_models.h"

#include <math.h>
#include <string.h>

#include "cz_json.h"
#include "cz_models_int.h"

/* Activations and all-reduce payloads travel in bf16, whatever the weight precision. */
#define CZ_ACT_BYTES 2.0
/* Upper bounds accepted in a config's "cost" object. */
#define CZ_TP_MAX 1024
#define CZ_STEP_OVERHEAD_MAX_S 10.0
/* The smallest efficiency a config may give (a millionth of the card's peak): below it a
 * step's time leaves what a simulation can represent (hours per token, a clock past the
 * limit of sim.max_time_s) */
#define CZ_EFF_MIN 1e-6
#define CZ_ALLREDUCE_LATENCY_MAX_S 1.0

cz_cost_params cz_cost_params_default(void)
{
    return (cz_cost_params){
        .flops_eff = 0.6,
        .bw_eff = 0.8,
        .link_eff = 0.7,
        .step_overhead_s = 2e-3,
        .allreduce_latency_s = 10e-6,
        .tp = 1,
        .bw_sat_sm_fraction = 0.4,
    };
}

static const char *const cost_keys[] = {
    "flops_eff", "bw_eff", "link_eff", "step_overhead_s", "allreduce_latency_s", "tp",
    "bw_sat_sm_fraction",
};

/* Optional number in [lo, hi], or when `fraction` in (0, 1] (lo 0) or [lo, 1] (hi unused). */
static cz_status get_opt(const cJSON *j, const char *where, const char *key, bool fraction,
                         double lo, double hi, double *out, cz_err *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!it)
        return CZ_OK;
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    /* a fraction is in (0, 1], or [lo, 1] when lo is given */
    bool ok = isfinite(v) && (fraction ? (lo > 0.0 ? v >= lo : v > 0.0) && v <= 1.0
                                       : (v >= lo && v <= hi));
    if (!ok) {
        char range[64];
        if (!fraction)
            snprintf(range, sizeof range, "a number in [%g, %g]", lo, hi);
        else if (lo > 0.0)
            snprintf(range, sizeof range, "a fraction in [%g, 1]", lo);
        else
            snprintf(range, sizeof range, "a fraction in (0, 1]");
        char got[64];
        if (cJSON_IsNumber(it))
            snprintf(got, sizeof got, "%g", it->valuedouble);
        else
            snprintf(got, sizeof got, "a value that is not a number");
        return cz_err_field(err, CZ_EINVAL, where, key, "expected %s, got %s", range, got);
    }
    *out = v;
    return CZ_OK;
}

cz_status cz_cost_params_parse(const cJSON *j, const char *where, cz_cost_params *out, cz_err *err)
{
    CZ_ASSERT(where != NULL && out != NULL);
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected an object with the cost-model parameters",
                          where);
    cz_status st = cz_json_check_keys(j, where, cost_keys, (int)CZ_ARRAY_LEN(cost_keys), err);
    if (st != CZ_OK)
        return st;
    cz_cost_params p = *out;
    uint64_t tp = p.tp;
    if ((st = get_opt(j, where, "flops_eff", true, CZ_EFF_MIN, 0, &p.flops_eff, err)) != CZ_OK ||
        (st = get_opt(j, where, "bw_eff", true, CZ_EFF_MIN, 0, &p.bw_eff, err)) != CZ_OK ||
        (st = get_opt(j, where, "link_eff", true, CZ_EFF_MIN, 0, &p.link_eff, err)) != CZ_OK ||
        (st = get_opt(j, where, "step_overhead_s", false, 0.0, CZ_STEP_OVERHEAD_MAX_S,
                      &p.step_overhead_s, err)) != CZ_OK ||
        (st = get_opt(j, where, "allreduce_latency_s", false, 0.0, CZ_ALLREDUCE_LATENCY_MAX_S,
                      &p.allreduce_latency_s, err)) != CZ_OK ||
        (st = cz_json_u64(j, where, "tp", false, 1, CZ_TP_MAX, &tp, err)) != CZ_OK ||
        (st = get_opt(j, where, "bw_sat_sm_fraction", true, 0, 0, &p.bw_sat_sm_fraction, err)) !=
            CZ_OK)
        return st;
    p.tp = (uint32_t)tp;
    *out = p;
    return CZ_OK;
}

/* Parameters whose weights a step of `tokens` tokens reads. A dense stage reads the weights
 * its tokens use, active_params (= params for a plain dense model). A mixture-of-experts
 * stage reads its non-expert weights plus the experts the tokens are routed to, taken as the
 * expected number of distinct experts when each token picks experts_active of the experts
 * uniformly: experts x (1 - (1 - experts_active / experts)^tokens). */
static double weight_params_read(const cz_stage_card *s, double tokens)
{
    if (s->experts == 0)
        return s->active_params;
    double e = cz__stage_expert_params(s);
    double k = s->experts_active, n = s->experts;
    double touched = n * (1.0 - pow(1.0 - k / n, tokens));
    return s->active_params - k * e + touched * e;
}

/* The quantities both cost models read of a step (docs/cost-model.md): per GPU, one pass. */
typedef struct cost_terms {
    double tokens, seqs;   /* T; sequences sampling (ar) or jobs (encoders, vocoders) */
    double linear, attn;   /* FLOPs */
    double weights, kv, act; /* bytes */
    double passes;
} cost_terms;

/* False for an empty step (every term 0). */
static bool step_terms(const cz_stage_card *s, const cz_cost_params *p, const cz_batch_shape *b,
                       cost_terms *t)
{
    memset(t, 0, sizeof *t);
    double tokens = (double)b->prefill_tokens + (double)b->decode_seqs;
    if (tokens == 0.0)
        return false;
    double tp = p->tp;
    bool ar = s->kind == CZ_STAGE_AR;
    double prefill_seqs = 0.0;
    if (b->prefill_tokens > 0)
        prefill_seqs = b->prefill_seqs > 0 ? (double)b->prefill_seqs : 1.0;

    /* FLOPs: matrix multiplies through the body weights for every token, the LM head once
     * per sequence that samples a token, and QK^T plus PV over every attended position. */
    double linear;
    if (s->flops_per_token > 0.0) {
        linear = s->flops_per_token * tokens;
    } else {
        double emitting = ar ? (double)b->decode_seqs + prefill_seqs : 0.0;
        linear = 2.0 * cz__stage_body_params(s) * tokens +
                 2.0 * (double)s->vocab * s->hidden * emitting;
    }
    /* a stage that makes several passes over its tokens (a flow-matching detokenizer's ODE
     * steps) attends in each; flops_per_token already counts its linear FLOPs per pass */
    double passes = s->passes ? s->passes : 1;
    double attn_positions = (double)b->prefill_attn_ctx + (double)b->decode_ctx_tokens;
    double attn = 4.0 * s->layers * (double)s->heads * s->head_dim * attn_positions * passes;

    /* Bytes: weights once per step; the KV cache each decode sequence attends to, and for
     * each prefill chunk its mean attended context once; the KV of every new token written;
     * each layer's activations read and written once. */
    double weights = weight_params_read(s, tokens) * s->weight_bytes / tp;
    double kv_token = cz_stage_kv_bytes_per_token_gpu(s, p->tp);
    double prefill_ctx = 0.0;
    if (b->prefill_tokens > 0)
        prefill_ctx = (double)b->prefill_attn_ctx / (double)b->prefill_tokens * prefill_seqs;
    t->tokens = tokens;
    t->seqs = (double)b->decode_seqs + prefill_seqs;
    t->linear = linear / tp;
    t->attn = attn / tp;
    t->weights = weights;
    t->kv = kv_token * ((double)b->decode_ctx_tokens + prefill_ctx + tokens);
    t->act = 2.0 * s->layers * (double)s->hidden * tokens * CZ_ACT_BYTES;
    t->passes = passes;
    return true;
}

void cz_cost_step(const cz_stage_card *s, const cz_hw_card *hw, const cz_cost_params *p,
                  const cz_batch_shape *b, cz_step_cost *out)
{
    CZ_ASSERT(s != NULL && hw != NULL && p != NULL && b != NULL && out != NULL);
    CZ_ASSERT(p->tp >= 1);
    CZ_ASSERT(p->flops_eff > 0.0 && p->flops_eff <= 1.0);
    CZ_ASSERT(p->bw_eff > 0.0 && p->bw_eff <= 1.0);
    CZ_ASSERT(p->link_eff > 0.0 && p->link_eff <= 1.0);
    CZ_ASSERT(p->step_overhead_s >= 0.0 && p->allreduce_latency_s >= 0.0);
    CZ_ASSERT(hw->bf16_flops > 0.0 && hw->hbm_bw_Bps > 0.0 && hw->interconnect_Bps > 0.0);
    CZ_ASSERT(s->layers > 0 && s->hidden > 0 && s->weight_bytes > 0);

    memset(out, 0, sizeof *out);
    cost_terms t;
    if (!step_terms(s, p, b, &t))
        return;
    double tokens = t.tokens, tp = p->tp, passes = t.passes;
    out->flops = t.linear + t.attn;
    out->bytes = (t.weights + t.kv + t.act) * passes; /* every pass reads them again */

    out->compute_s = out->flops / (hw->bf16_flops * p->flops_eff);
    out->memory_s = out->bytes / (hw->hbm_bw_Bps * p->bw_eff);

    /* Two ring all-reduces per layer (after attention and after the MLP) of the step's
     * hidden states: each GPU sends 2 (tp - 1) / tp of the payload. */
    if (p->tp > 1) {
        double payload = tokens * s->hidden * CZ_ACT_BYTES;
        double ring_s = 2.0 * (tp - 1.0) / tp * payload / (hw->interconnect_Bps * p->link_eff);
        out->comm_s = 2.0 * s->layers * (p->allreduce_latency_s + ring_s) * passes;
    }
    /* the passes run one after the other, each bound by its own compute or memory and each
     * paying the per-step overhead (as an inner stage's steps do, docs/cost-model.md) */
    out->passes = (uint32_t)passes;
    out->total_s = fmax(out->compute_s, out->memory_s) + out->comm_s +
                   passes * p->step_overhead_s;
}

void cz_cost_decode_init(cz_cost_decode *d, const cz_stage_card *s, const cz_hw_card *hw,
                         const cz_cost_params *p)
{
    CZ_ASSERT(s != NULL && hw != NULL && p != NULL && p->tp >= 1);
    memset(d, 0, sizeof *d);
    d->s = s;
    d->p = *p;
    d->tp = p->tp;
    d->passes = s->passes ? s->passes : 1;
    /* each a leading subexpression of step_terms' and cz_cost_step's, evaluated as there */
    d->body2 = 2.0 * cz__stage_body_params(s);
    d->head2 = 2.0 * (double)s->vocab * s->hidden;
    d->attn_k = 4.0 * s->layers * (double)s->heads * s->head_dim;
    d->act_k = 2.0 * s->layers * (double)s->hidden;
    d->kv_token = cz_stage_kv_bytes_per_token_gpu(s, p->tp);
    d->flops_Bps = hw->bf16_flops * p->flops_eff;
    d->mem_Bps = hw->hbm_bw_Bps * p->bw_eff;
    d->link_Bps = hw->interconnect_Bps * p->link_eff;
    d->ring_k = 2.0 * (d->tp - 1.0) / d->tp;
}

/* The terms of a decode-only step that do not depend on its KV read, for `seqs`. */
typedef struct decode_fixed {
    double tokens, linear_tp, weights, act, comm_s, overhead_s;
} decode_fixed;

static void decode_fixed_terms(const cz_cost_decode *d, uint32_t seqs, decode_fixed *f)
{
    CZ_ASSERT(seqs > 0);
    const cz_stage_card *s = d->s;
    /* step_terms with no prefill: the "+ 0.0" are its prefill terms, kept so that every
     * operation matches */
    double tokens = 0.0 + (double)seqs;
    double linear;
    if (s->flops_per_token > 0.0) {
        linear = s->flops_per_token * tokens;
    } else {
        double emitting = s->kind == CZ_STAGE_AR ? (double)seqs + 0.0 : 0.0;
        linear = d->body2 * tokens + d->head2 * emitting;
    }
    f->tokens = tokens;
    f->linear_tp = linear / d->tp;
    f->weights = weight_params_read(s, tokens) * s->weight_bytes / d->tp;
    f->act = d->act_k * tokens * CZ_ACT_BYTES;
    f->comm_s = 0.0;
    if (d->p.tp > 1) {
        double payload = tokens * s->hidden * CZ_ACT_BYTES;
        double ring_s = d->ring_k * payload / d->link_Bps;
        f->comm_s = 2.0 * s->layers * (d->p.allreduce_latency_s + ring_s) * d->passes;
    }
    f->overhead_s = d->passes * d->p.step_overhead_s;
}

/* The step's time reading `ctx_tokens` of KV (cz_cost_step's operations, in its order). */
static double decode_at(const cz_cost_decode *d, const decode_fixed *f, uint64_t ctx_tokens)
{
    double attn_positions = 0.0 + (double)ctx_tokens;
    double attn = d->attn_k * attn_positions * d->passes;
    double kv = d->kv_token * ((double)ctx_tokens + 0.0 + f->tokens);
    double flops = f->linear_tp + attn / d->tp;
    double bytes = (f->weights + kv + f->act) * d->passes;
    double compute_s = flops / d->flops_Bps;
    double memory_s = bytes / d->mem_Bps;
    /* fmax for these (positive, never NaN), without its call */
    return (compute_s > memory_s ? compute_s : memory_s) + f->comm_s + f->overhead_s;
}

double cz_cost_decode_s(const cz_cost_decode *d, uint32_t seqs, uint64_t ctx_tokens)
{
    decode_fixed f;
    decode_fixed_terms(d, seqs, &f);
    return decode_at(d, &f, ctx_tokens);
}

void cz_cost_decode_steps(const cz_cost_decode *d, uint32_t seqs, uint64_t ctx_tokens, uint32_t n,
                          double *out_s)
{
    decode_fixed f;
    decode_fixed_terms(d, seqs, &f);
    for (uint32_t k = 0; k < n; k++)
        out_s[k] = decode_at(d, &f, ctx_tokens + (uint64_t)k * seqs);
}

double cz_cost_share_s(const cz_step_cost *c, const cz_cost_params *p, double share)
{
    CZ_ASSERT(share > 0.0 && share <= 1.0 && p->bw_sat_sm_fraction > 0.0);
    if (c->total_s == 0.0)
        return 0.0;
    double bw = share < p->bw_sat_sm_fraction ? share / p->bw_sat_sm_fraction : 1.0;
    double passes = c->passes > 1 ? c->passes : 1;
    return fmax(c->compute_s / share, c->memory_s / bw) + c->comm_s + passes * p->step_overhead_s;
}

double cz_cost_host_transfer_s(const cz_hw_card *hw, double bytes)
{
    CZ_ASSERT(hw != NULL && hw->host_link_Bps > 0.0 && bytes >= 0.0);
    if (bytes == 0.0)
        return 0.0;
    return hw->host_link_latency_s + bytes / hw->host_link_Bps;
}

const char *cz_cost_feature_name(cz_cost_feature f)
{
    static const char *const names[CZ_CF_N] = {
        "per_step_s",        "per_seq_s",         "per_token_s",
        "per_linear_flop_s", "per_gemv_flop_s",   "per_attn_flop_s",
        "per_weight_byte_s", "per_gemm_weight_byte_s", "per_kv_byte_s",
    };
    CZ_ASSERT((unsigned)f < CZ_CF_N);
    return names[f];
}

void cz_cost_features(const cz_stage_card *s, const cz_cost_params *p, const cz_batch_shape *b,
                      double x[CZ_CF_N])
{
    CZ_ASSERT(s != NULL && p != NULL && b != NULL && p->tp >= 1);
    cost_terms t;
    for (int i = 0; i < CZ_CF_N; i++)
        x[i] = 0.0;
    if (!step_terms(s, p, b, &t))
        return;
    bool gemv = t.tokens <= CZ_COST_GEMV_TOKENS;
    x[CZ_CF_STEP] = t.passes;
    x[CZ_CF_SEQ] = t.seqs;
    x[CZ_CF_TOKEN] = t.tokens * t.passes;
    x[gemv ? CZ_CF_GEMV_FLOP : CZ_CF_LINEAR_FLOP] = t.linear;
    x[CZ_CF_ATTN_FLOP] = t.attn;
    x[gemv ? CZ_CF_WEIGHT_BYTE : CZ_CF_GEMM_WEIGHT_BYTE] = t.weights * t.passes;
    x[CZ_CF_KV_BYTE] = t.kv * t.passes;
}

double cz_cost_fit_s(const cz_cost_fit *f, const cz_cost_params *p, const double x[CZ_CF_N],
                     double share)
{
    CZ_ASSERT(share > 0.0 && share <= 1.0 && p->bw_sat_sm_fraction > 0.0);
    double bw = share < p->bw_sat_sm_fraction ? share / p->bw_sat_sm_fraction : 1.0;
    double t = 0.0;
    for (int i = 0; i < CZ_CF_N; i++) {
        double term = f->theta[i] * x[i];
        if (i == CZ_CF_LINEAR_FLOP || i == CZ_CF_GEMV_FLOP || i == CZ_CF_ATTN_FLOP)
            term /= share;
        else if (i == CZ_CF_WEIGHT_BYTE || i == CZ_CF_GEMM_WEIGHT_BYTE || i == CZ_CF_KV_BYTE)
            term /= bw;
        t += term;
    }
    return t;
}
