/* test_router.c - the routers (cz_router.h) on hand-built loads: round robin, least
 * outstanding requests, power of two choices, session affinity with its fallback. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "cz_rng.h"
#include "cz_router.h"

typedef struct loads {
    uint32_t n;
    uint32_t v[8];
} loads;

static uint32_t load_of(const void *ctx, uint32_t r)
{
    const loads *l = ctx;
    return l->v[r];
}

/* the lowest of the least loaded, by a scan (the runtime keeps a heap) */
static uint32_t least_of(const void *ctx)
{
    const loads *l = ctx;
    uint32_t best = 0;
    for (uint32_t r = 1; r < l->n; r++)
        if (l->v[r] < l->v[best])
            best = r;
    return best;
}

static cz_router_view view(const loads *l, uint32_t sticky, gsl_rng *rng)
{
    return (cz_router_view){.n = l->n, .sticky = sticky, .rng = rng, .ctx = l,
                            .load = load_of, .least = least_of};
}

Test(router, round_robin_takes_the_replica_whose_turn_it_is)
{
    loads l = {4, {9, 0, 0, 0}};
    cz_router_config rc = {.policy = CZ_ROUTER_ROUND_ROBIN};
    for (uint32_t k = 0; k < 4; k++) {
        cz_router_view v = view(&l, UINT32_MAX, NULL);
        v.rr_next = k;
        cr_assert_eq(cz_route(&rc, &v), k, "loads do not matter");
    }
}

Test(router, least_outstanding_takes_the_lowest_of_the_least_loaded)
{
    loads l = {5, {3, 1, 2, 1, 4}};
    cz_router_config rc = {.policy = CZ_ROUTER_LEAST_LOADED};
    cz_router_view v = view(&l, 0, NULL);
    cr_assert_eq(cz_route(&rc, &v), 1);
    l.v[1] = 5;
    cr_assert_eq(cz_route(&rc, &v), 3);
}

Test(router, session_is_sticky_until_its_replica_is_full)
{
    loads l = {3, {7, 2, 0}};
    cz_router_config rc = {.policy = CZ_ROUTER_SESSION};
    cz_router_view v = view(&l, UINT32_MAX, NULL);
    cr_assert_eq(cz_route(&rc, &v), 2, "a first turn goes to the least loaded");
    v.sticky = 0;
    cr_assert_eq(cz_route(&rc, &v), 0, "no fallback: sticky at any load");
    rc.affinity_max_load = 8;
    cr_assert_eq(cz_route(&rc, &v), 0, "below the bound: sticky");
    rc.affinity_max_load = 7;
    cr_assert_eq(cz_route(&rc, &v), 2, "at the bound: the least loaded");
}

Test(router, power_of_two_never_takes_the_more_loaded_of_its_two)
{
    gsl_rng *rng = cz_rng_new(7, CZ_RNG_ROUTER, 0);
    cz_router_config rc = {.policy = CZ_ROUTER_POWER_OF_TWO};
    /* one idle replica among loaded ones: it wins whenever it is drawn, which two distinct
     * draws of three replicas do with probability 2/3; the busiest never wins */
    loads l = {3, {0, 5, 9}};
    uint32_t hits[3] = {0};
    const uint32_t N = 30000;
    for (uint32_t i = 0; i < N; i++) {
        cz_router_view v = view(&l, UINT32_MAX, rng);
        hits[cz_route(&rc, &v)]++;
    }
    cr_assert_eq(hits[2], 0);
    cr_assert(hits[0] > 0.64 * N && hits[0] < 0.69 * N, "%u of %u", hits[0], N);
    cr_assert_eq(hits[0] + hits[1], N);
    gsl_rng_free(rng);
}

Test(router, random_is_uniform)
{
    gsl_rng *rng = cz_rng_new(3, CZ_RNG_ROUTER, 0);
    cz_router_config rc = {.policy = CZ_ROUTER_RANDOM};
    loads l = {4, {0, 9, 9, 9}};
    uint32_t hits[4] = {0};
    for (uint32_t i = 0; i < 40000; i++) {
        cz_router_view v = view(&l, 0, rng);
        hits[cz_route(&rc, &v)]++;
    }
    for (uint32_t r = 0; r < 4; r++)
        cr_assert(hits[r] > 9500 && hits[r] < 10500, "replica %u: %u", r, hits[r]);
    gsl_rng_free(rng);
}

Test(router, one_replica_is_the_only_choice)
{
    loads l = {1, {4}};
    for (uint32_t p = CZ_ROUTER_SESSION; p <= CZ_ROUTER_VLLM_DP; p++) {
        cz_router_config rc = {.policy = p};
        cz_router_view v = view(&l, UINT32_MAX, NULL);
        cr_assert_eq(cz_route(&rc, &v), 0);
    }
}
