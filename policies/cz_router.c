/* cz_router.c - the routers (cz_router.h, docs/policies.md "Routers"). */
#include "cz_router.h"

#include "cz_base.h"

cz_router_config cz_router_config_default(uint32_t policy)
{
    return (cz_router_config){.policy = policy,
                              .prefix_weight = CZ_ROUTER_LLMD_PREFIX_WEIGHT,
                              .queue_weight = CZ_ROUTER_LLMD_QUEUE_WEIGHT,
                              .kv_weight = CZ_ROUTER_LLMD_KV_WEIGHT,
                              .overlap_score_weight = CZ_ROUTER_KV_OVERLAP_WEIGHT};
}

double cz_router_llmd_score(const cz_router_config *rc, uint32_t queue, uint32_t queue_min,
                            uint32_t queue_max, double kv_use, uint32_t cached,
                            uint32_t blocks)
{
    CZ_ASSERT(queue_min <= queue && queue <= queue_max && cached <= blocks);
    /* the Gateway API Inference Extension's scorers, which llm-d's scheduler runs:
     * prefix-cache-scorer: matched blocks / the request's blocks (0 without blocks) */
    double prefix = blocks ? (double)cached / (double)blocks : 0.0;
    /* queue-scorer: (max - queue) / (max - min) over the candidates, 1 when all are equal */
    double queue_score = queue_max == queue_min ? 1.0
                                                : (double)(queue_max - queue) /
                                                      (double)(queue_max - queue_min);
    /* kv-cache-utilization-scorer: 1 - the KV cache usage */
    double s = rc->prefix_weight * prefix;
    s += rc->queue_weight * queue_score;
    s += rc->kv_weight * (1.0 - kv_use);
    return s;
}

double cz_router_kv_cost(const cz_router_config *rc, uint32_t active, uint32_t tokens,
                         uint32_t block_tokens, uint32_t cached, uint32_t held)
{
    CZ_ASSERT(block_tokens > 0 && held <= cached);
    /* Dynamo, "KV Cache Routing", cost calculation: new prefill tokens = input tokens -
     * overlap blocks x block size; prefill blocks = those / block size; cost =
     * overlap_score_weight x prefill blocks + decode blocks. "Router Design": the potential
     * decode blocks are the worker's active blocks and the request's new ones */
    uint64_t hit = (uint64_t)cached * block_tokens;
    double prefill = (double)(hit < tokens ? tokens - hit : 0) / (double)block_tokens;
    uint64_t blocks = ((uint64_t)tokens + block_tokens - 1) / block_tokens;
    uint64_t fresh = held < blocks ? blocks - held : 0;
    return rc->overlap_score_weight * prefill + (double)((uint64_t)active + fresh);
}

uint32_t cz_router_llmd_free(const cz_router_config *rc, const cz_lvheap *h)
{
    uint32_t lo = cz_lvheap_lo(h), hi = cz_lvheap_hi(h), best = UINT32_MAX;
    double best_s = 0.0;
    for (uint32_t q = lo; q != UINT32_MAX; q = cz_lvheap_next(h, q)) {
        /* at this queue and longer, nothing beats an empty KV cache (the score is
         * nonincreasing in both): past the best found, stop */
        if (best != UINT32_MAX && cz_router_llmd_score(rc, q, lo, hi, 0.0, 0, 0) < best_s)
            break;
        /* the level's least KV use (the lowest index on a tie) scores the most there */
        uint32_t r = cz_lvheap_top(h, q);
        double s = cz_router_llmd_score(rc, q, lo, hi, cz_lvheap_key(h, r), 0, 0);
        if (best == UINT32_MAX || s > best_s || (s == best_s && r < best)) {
            best = r;
            best_s = s;
        }
    }
    return best;
}

/* llm_d (cz_router_llmd_score): the replicas holding a prefix, then the best by the load
 * terms alone, which every other replica can at most equal (the lowest index on a tie; a
 * candidate scored again without its prefix only scores less). */
static uint32_t route_llmd(const cz_router_config *rc, const cz_router_view *v)
{
    uint32_t blocks = v->tokens / v->block_tokens, best = UINT32_MAX;
    double best_s = 0.0;
    for (uint32_t i = 0; i <= v->n_cand; i++) {
        uint32_t r = i < v->n_cand ? v->cand[i].r : v->least(v->ctx);
        uint32_t cached = i < v->n_cand ? v->cand[i].cached : 0;
        CZ_ASSERT(r < v->n);
        double s = cz_router_llmd_score(rc, v->load(v->ctx, r), v->queue_min, v->queue_max,
                                        v->kv_use(v->ctx, r), cached < blocks ? cached : blocks,
                                        blocks);
        if (best == UINT32_MAX || s > best_s || (s == best_s && r < best)) {
            best = r;
            best_s = s;
        }
    }
    return best;
}

/* kv_router (cz_router_kv_cost): likewise, the least cost. */
static uint32_t route_kv(const cz_router_config *rc, const cz_router_view *v)
{
    uint32_t best = UINT32_MAX;
    double best_c = 0.0;
    for (uint32_t i = 0; i <= v->n_cand; i++) {
        uint32_t r = i < v->n_cand ? v->cand[i].r : v->least(v->ctx);
        uint32_t cached = i < v->n_cand ? v->cand[i].cached : 0;
        uint32_t held = i < v->n_cand ? v->cand[i].held : 0;
        CZ_ASSERT(r < v->n);
        double c = cz_router_kv_cost(rc, v->load(v->ctx, r), v->tokens, v->block_tokens, cached,
                                     held < cached ? held : cached);
        if (best == UINT32_MAX || c < best_c || (c == best_c && r < best)) {
            best = r;
            best_c = c;
        }
    }
    return best;
}

uint32_t cz_route(const cz_router_config *rc, const cz_router_view *v)
{
    CZ_ASSERT(v->n > 0);
    if (v->n == 1)
        return 0;
    switch (rc->policy) {
    case CZ_ROUTER_SESSION:
        if (v->sticky != UINT32_MAX &&
            (rc->affinity_max_load == 0 || v->load(v->ctx, v->sticky) < rc->affinity_max_load))
            return v->sticky;
        return v->least(v->ctx);
    case CZ_ROUTER_LEAST_LOADED:
    case CZ_ROUTER_VLLM_DP: return v->least(v->ctx);
    case CZ_ROUTER_RANDOM: return (uint32_t)gsl_rng_uniform_int(v->rng, v->n);
    case CZ_ROUTER_ROUND_ROBIN: CZ_ASSERT(v->rr_next < v->n); return v->rr_next;
    case CZ_ROUTER_POWER_OF_TWO: {
        /* Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", section
         * 1: d = 2 choices drawn independently; here distinct, the first kept on a tie */
        uint32_t a = (uint32_t)gsl_rng_uniform_int(v->rng, v->n);
        uint32_t b = (uint32_t)gsl_rng_uniform_int(v->rng, v->n - 1);
        b += b >= a;
        return v->load(v->ctx, b) < v->load(v->ctx, a) ? b : a;
    }
    case CZ_ROUTER_LLM_D: return route_llmd(rc, v);
    case CZ_ROUTER_KV: return route_kv(rc, v);
    default: CZ_ASSERT(0 && "unknown router"); return 0;
    }
}
