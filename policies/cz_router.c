/* cz_router.c - the routers (cz_router.h, docs/policies.md "Routers"). */
#include "cz_router.h"

#include "cz_base.h"

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
    default: CZ_ASSERT(0 && "unknown router"); return 0;
    }
}
