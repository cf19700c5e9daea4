/* cz_sched_nova.c - Nova's cross-stage pipeline scheduler and its two baselines (Nova:
 * Real-Time Agentic Vision-Language Model Serving with Adaptive Cross-Stage Parallelization,
 * section III-D and Algorithm 1; SM partition of section III-C2, Eq. 5, with the values of
 * section V-A5; PF-Limit and Chunk of section V-A7). */
#include <math.h>
#include <string.h>

#include "cz_json.h"
#include "cz_policies.h"

cz_status cz_xs_policy_make(const char *name, const cJSON *params, const char *where,
                            cz_xs_policy *out, cz_err *err)
{
    memset(out, 0, sizeof *out);
    if (strcmp(name, "nova") == 0)
        out->kind = CZ_XS_NOVA;
    else if (strcmp(name, "nova_pf_limit") == 0 || strcmp(name, "pf_limit") == 0)
        out->kind = CZ_XS_PF_LIMIT; /* the short names are older spellings */
    else if (strcmp(name, "nova_chunked_prefill") == 0 || strcmp(name, "chunked_prefill") == 0)
        out->kind = CZ_XS_CHUNKED;
    else
        return CZ_ENOTFOUND;
    out->sm_decode_vision = 24;
    out->sm_decode_prefill = 30;
    out->sm_floor = 12;
    out->pending_vision = 4;
    out->pending_prefill = 6;
    out->adaptive = true;
    out->decode_threshold = 5;
    out->token_budget = 128;
    out->sm_granularity = 2;
    out->corun_slowdown = 1.0;
    /* Table IV and section III-B1: decode and vision linear kernels on separate streams
     * finish together in 1241.8 ms against 699.8 + 588.3 ms alone; vision ends at 680.6 ms
     * (588.3 / 680.6 = 0.864 of its speed alone), so decode did 699.8 - (1241.8 - 680.6) =
     * 138.6 ms of its work in those 680.6 ms (0.204) */
    out->ms_excl_speed = 588.3 / 680.6;
    out->ms_decode_speed = (699.8 - (1241.8 - 680.6)) / 680.6;
    if (!params)
        return CZ_OK;
    static const char *const keys[] = {"name",           "sm_decode_vision", "sm_decode_prefill",
                                       "sm_floor",       "pending_vision",   "pending_prefill",
                                       "adaptive",       "decode_threshold", "token_budget",
                                       "enumerate",      "sm_granularity",   "corun_slowdown",
                                       "multi_stream",   "ms_excl_speed",    "ms_decode_speed",
                                       "vision_resident_layers"};
    cz_status st = cz_json_check_keys(params, where, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;
    struct {
        const char *key;
        uint32_t *v;
        uint64_t lo, hi;
    } u[] = {
        {"sm_decode_vision", &out->sm_decode_vision, 1, 1u << 16},
        {"sm_decode_prefill", &out->sm_decode_prefill, 1, 1u << 16},
        {"sm_floor", &out->sm_floor, 1, 1u << 16},
        {"pending_vision", &out->pending_vision, 2, 1u << 20},
        {"pending_prefill", &out->pending_prefill, 2, 1u << 20},
        {"decode_threshold", &out->decode_threshold, 0, 1u << 20},
        {"token_budget", &out->token_budget, 1, 1u << 20},
        {"sm_granularity", &out->sm_granularity, 1, 1u << 16},
        {"vision_resident_layers", &out->vision_resident_layers, 0, 1u << 16},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(u); i++) {
        uint64_t v = *u[i].v;
        if ((st = cz_json_u64(params, where, u[i].key, false, u[i].lo, u[i].hi, &v, err)) !=
            CZ_OK)
            return st;
        *u[i].v = (uint32_t)v;
    }
    if ((st = cz_json_bool(params, where, "adaptive", false, &out->adaptive, err)) != CZ_OK ||
        (st = cz_json_bool(params, where, "enumerate", false, &out->enumerate, err)) != CZ_OK ||
        (st = cz_json_bool(params, where, "multi_stream", false, &out->multi_stream, err)) !=
            CZ_OK ||
        (st = cz_json_num(params, where, "corun_slowdown", false, 1.0, 100.0,
                          &out->corun_slowdown, err)) != CZ_OK ||
        (st = cz_json_num(params, where, "ms_excl_speed", false, 1e-3, 1.0, &out->ms_excl_speed,
                          err)) != CZ_OK ||
        (st = cz_json_num(params, where, "ms_decode_speed", false, 1e-3, 1.0,
                          &out->ms_decode_speed, err)) != CZ_OK)
        return st;
    if (out->multi_stream && out->kind != CZ_XS_NOVA)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'multi_stream': applies to scheduler 'nova' only", where);
    if (out->sm_floor > out->sm_decode_vision || out->sm_floor > out->sm_decode_prefill)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'sm_floor': expected at most sm_decode_vision (%u) and "
                          "sm_decode_prefill (%u), got %u",
                          where, out->sm_decode_vision, out->sm_decode_prefill, out->sm_floor);
    return CZ_OK;
}

void cz_xs_decide(const cz_xs_policy *pol, const cz_xs_view *v, cz_xs_decision *out)
{
    out->excl = CZ_XS_IDLE;
    out->decode = false;
    switch (pol->kind) {
    case CZ_XS_NOVA:
        /* decode first, batched in flight: every ready request joins the next step once the
         * running one ends; it co-runs beside vision or prefill */
        if (!v->decoding && v->decode_ready > 0)
            out->decode = true;
        /* vision and prefill never run together nor batch; prefill before vision (it is
         * shorter and feeds decode), FIFO within each */
        if (v->excl == CZ_XS_IDLE) {
            if (v->prefill_waiting > 0)
                out->excl = CZ_XS_PREFILL;
            else if (v->vision_waiting > 0)
                out->excl = CZ_XS_VISION;
        }
        return;
    case CZ_XS_PF_LIMIT:
        /* one worker at a time; prefill-first, decode once more than the threshold wait
         * (and whenever nothing else is left to run) */
        if (v->excl != CZ_XS_IDLE || v->decoding)
            return;
        if (v->decode_ready > pol->decode_threshold)
            out->decode = true;
        else if (v->prefill_waiting > 0)
            out->excl = CZ_XS_PREFILL;
        else if (v->vision_waiting > 0)
            out->excl = CZ_XS_VISION;
        else if (v->decode_ready > 0)
            out->decode = true;
        return;
    case CZ_XS_CHUNKED: {
        /* hybrid LLM steps (decodes and prefill chunks under the token budget); the vision
         * encoder cannot join them (separate weights), so it takes turns with the LLM */
        if (v->excl != CZ_XS_IDLE || v->decoding)
            return;
        bool llm = v->decode_ready > 0 || v->prefill_waiting > 0 || v->prefilling > 0;
        bool vision = v->vision_waiting > 0;
        if (vision && (!llm || v->last_excl != CZ_XS_VISION))
            out->excl = CZ_XS_VISION;
        else if (llm)
            out->excl = CZ_XS_HYBRID;
        return;
    }
    }
    CZ_ASSERT(0 && "unknown cross-stage scheduler");
}

/* Eq. 1-2 (section III-C1); the co-run factor is the executor's contention on every step
 * that runs beside another (section III-B2) */
double cz_xs_ideal_e2e_s(const cz_xs_split *v, const cz_xs_split *p, double out_tokens,
                         double corun)
{
    CZ_ASSERT(out_tokens >= 0 && corun >= 1.0);
    double busy = v->vision_s + p->prefill_s;
    CZ_ASSERT(busy > 0);
    double r_v = v->vision_s / busy, r_p = p->prefill_s / busy;
    return corun * (busy + out_tokens * (r_v * v->decode_s + r_p * p->decode_s));
}

/* Eq. 3 (section III-C1): the pair of splits that minimises Eq. 1 */
double cz_xs_enumerate_split(const cz_xs_split *splits, uint32_t n, double out_tokens,
                             double corun, uint32_t *sm_vision, uint32_t *sm_prefill)
{
    CZ_ASSERT(n >= 1);
    double best = INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < n; j++) {
            double e2e = cz_xs_ideal_e2e_s(&splits[i], &splits[j], out_tokens, corun);
            if (e2e < best) {
                best = e2e;
                *sm_vision = splits[i].sms;
                *sm_prefill = splits[j].sms;
            }
        }
    }
    return best;
}

/* Eq. 6 (section III-D); Table V evaluates it with a deterministic service */
double cz_xs_mg1_wait_s(double rate_rps, double mean_service_s, double service_second_moment_s2)
{
    if (!(rate_rps > 0) || !(mean_service_s > 0) || !(service_second_moment_s2 > 0))
        return NAN;
    double rho = rate_rps * mean_service_s;
    if (!(rho < 1.0))
        return NAN;
    return rate_rps * service_second_moment_s2 / (2.0 * (1.0 - rho));
}

double cz_xs_decode_share(const cz_xs_policy *pol, cz_xs_work beside, uint32_t pending,
                          uint32_t total_sms)
{
    CZ_ASSERT(total_sms > 0);
    if (pol->kind != CZ_XS_NOVA || pending == 0)
        return 1.0;
    CZ_ASSERT(beside == CZ_XS_VISION || beside == CZ_XS_PREFILL);
    double d1 = beside == CZ_XS_PREFILL ? pol->sm_decode_prefill : pol->sm_decode_vision;
    double n_max = beside == CZ_XS_PREFILL ? pol->pending_prefill : pol->pending_vision;
    double d = d1;
    if (pol->adaptive && pending > 1) {
        /* Eq. 5: linear from d1 at one pending request to the floor at n_max */
        d = d1 - (d1 - pol->sm_floor) * (double)(pending - 1) / (n_max - 1);
        if (d < pol->sm_floor)
            d = pol->sm_floor;
        double g = pol->sm_granularity; /* libsmctrl: one TPC (2 SMs); green contexts on
                                           sm_90: 8 */
        d = g * floor(d / g + 1e-9);
        if (d < pol->sm_floor)
            d = pol->sm_floor;
    }
    if (d >= total_sms)
        return 1.0;
    return d / total_sms;
}
