/* test_router.c - the routers (cz_router.h) on hand-built loads: round robin, least
 * outstanding requests, power of two choices, session affinity with its fallback; the
 * prefix-aware routers (llm-d's scorers, Dynamo's KV cost) on hand-scored replicas, and
 * llm-d's walk over the queue levels against a scan of every replica. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cz_lvheap.h"
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
    for (uint32_t p = CZ_ROUTER_SESSION; p <= CZ_ROUTER_KV; p++) {
        cz_router_config rc = cz_router_config_default(p);
        cz_router_view v = view(&l, UINT32_MAX, NULL);
        cr_assert_eq(cz_route(&rc, &v), 0);
    }
}

/* ---- the prefix-aware routers ---- */

/* Replicas as a prefix-aware router sees them: queues (llm_d) or active blocks (kv_router)
 * in `load` (first, so load_of reads it), KV cache utilization, and the turn's cached
 * prefix per replica. */
typedef struct fleet {
    loads l;
    double kv[8];
    uint32_t cached[8], held[8];
    cz_router_config rc;
    uint32_t tokens, bt;
    cz_router_cand cand[8];
} fleet;

static double kv_of(const void *ctx, uint32_t r)
{
    const fleet *f = ctx;
    return f->kv[r];
}

/* the best by the load terms alone, by a scan (the runtime walks its structures) */
static uint32_t free_best(const void *ctx)
{
    const fleet *f = ctx;
    uint32_t best = 0, lo = UINT32_MAX, hi = 0;
    for (uint32_t r = 0; r < f->l.n; r++) {
        lo = f->l.v[r] < lo ? f->l.v[r] : lo;
        hi = f->l.v[r] > hi ? f->l.v[r] : hi;
    }
    for (uint32_t r = 1; r < f->l.n; r++) {
        if (f->rc.policy == CZ_ROUTER_KV) {
            if (f->l.v[r] < f->l.v[best])
                best = r;
        } else if (cz_router_llmd_score(&f->rc, f->l.v[r], lo, hi, f->kv[r], 0, 0) >
                   cz_router_llmd_score(&f->rc, f->l.v[best], lo, hi, f->kv[best], 0, 0)) {
            best = r;
        }
    }
    return best;
}

/* The view of `f`, its candidates (cached > 0) listed last replica first, so an answer
 * cannot come from the order. */
static cz_router_view fleet_view(fleet *f)
{
    cz_router_view v = {.n = f->l.n, .sticky = UINT32_MAX, .ctx = f, .load = load_of,
                        .least = free_best, .tokens = f->tokens, .block_tokens = f->bt,
                        .cand = f->cand, .kv_use = kv_of};
    v.queue_min = UINT32_MAX;
    for (uint32_t r = f->l.n; r-- > 0;) {
        v.queue_min = f->l.v[r] < v.queue_min ? f->l.v[r] : v.queue_min;
        v.queue_max = f->l.v[r] > v.queue_max ? f->l.v[r] : v.queue_max;
        if (f->cached[r] > 0)
            f->cand[v.n_cand++] = (cz_router_cand){r, f->cached[r], f->held[r]};
    }
    return v;
}

/* llm-d's default profile (prefix-cache 3, queue 2, kv-cache-utilization 2) on a turn of
 * 160 tokens (10 blocks of 16), queues 4, 0, 2 (min 0, max 4):
 *   r0: 8 of 10 cached, KV 0.50: 3 x 0.8 + 2 x 0/4 + 2 x 0.50 = 3.4
 *   r1: nothing cached, KV 0.25: 3 x 0   + 2 x 4/4 + 2 x 0.75 = 3.5  <- the highest
 *   r2: 5 of 10 cached, KV 0.75: 3 x 0.5 + 2 x 2/4 + 2 x 0.25 = 3.0
 * with 9 of 10 on r0: 2.7 + 0 + 1.0 = 3.7, r0 wins. */
Test(router, llm_d_weighs_its_three_scorers)
{
    fleet f = {.l = {3, {4, 0, 2}}, .kv = {0.5, 0.25, 0.75}, .cached = {8, 0, 5},
               .rc = cz_router_config_default(CZ_ROUTER_LLM_D), .tokens = 160, .bt = 16};
    cz_router_view v = fleet_view(&f);
    cr_assert_eq(v.n_cand, 2);
    cr_assert_float_eq(cz_router_llmd_score(&f.rc, 4, 0, 4, 0.5, 8, 10), 3.4, 1e-12);
    cr_assert_float_eq(cz_router_llmd_score(&f.rc, 0, 0, 4, 0.25, 0, 10), 3.5, 1e-12);
    cr_assert_float_eq(cz_router_llmd_score(&f.rc, 2, 0, 4, 0.75, 5, 10), 3.0, 1e-12);
    cr_assert_eq(cz_route(&f.rc, &v), 1);
    f.cached[0] = 9;
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 0);
    /* a partial last block does not count: 175 tokens are still 10 full blocks */
    f.tokens = 175;
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 0);
}

/* Equal queues score 1 each (no spread to normalise); equal scores go to the lowest index,
 * whatever order the candidates come in: r0 and r2 both 5 of 10 cached, KV 0.5:
 * 1.5 + 2 + 1 = 4.5; r1 nothing cached: 0 + 2 + 1 = 3. */
Test(router, llm_d_ties_go_to_the_lowest_index)
{
    fleet f = {.l = {3, {2, 2, 2}}, .kv = {0.5, 0.5, 0.5}, .cached = {5, 0, 5},
               .rc = cz_router_config_default(CZ_ROUTER_LLM_D), .tokens = 160, .bt = 16};
    cz_router_view v = fleet_view(&f);
    cr_assert_eq(v.cand[0].r, 2, "the candidates are listed r2 first");
    cr_assert_eq(cz_route(&f.rc, &v), 0);
    f.cached[0] = 0;
    f.cached[2] = 0;
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 0, "nothing cached anywhere: all 3.0, the lowest");
}

/* Prefix caching off (no candidates): the load terms alone. Queues 3, 1, 1 (min 1, max 3),
 * KV 0.2, 0.5, 0.4: r0 0 + 2 x 0.8 = 1.6; r1 2 + 2 x 0.5 = 3.0; r2 2 + 2 x 0.6 = 3.2. */
Test(router, llm_d_without_prefixes_weighs_queue_and_kv)
{
    fleet f = {.l = {3, {3, 1, 1}}, .kv = {0.2, 0.5, 0.4},
               .rc = cz_router_config_default(CZ_ROUTER_LLM_D), .tokens = 160, .bt = 16};
    cz_router_view v = fleet_view(&f);
    cr_assert_eq(v.n_cand, 0);
    cr_assert_eq(cz_route(&f.rc, &v), 2);
    f.rc.kv_weight = 0; /* the queue alone: r1 and r2 tie, the lowest */
    cr_assert_eq(cz_route(&f.rc, &v), 1);
}

/* Dynamo's example ("KV Cache Routing", overlap_score_weight 1): a 10-block prompt
 * (160 tokens of 16) cached 2, 5, 8 blocks deep, so 8, 5, 2 blocks to prefill, on workers
 * whose potential decode blocks are 10, 5, 9 (active 2, 0, 7 plus the prompt's blocks not
 * already in use there: with its cached blocks all in use, 8, 5, 2): costs 18, 10, 11,
 * worker 1. With weight 2: 26, 15, 13, worker 2; with weight 0 the least decode, worker 1. */
Test(router, kv_router_takes_the_least_prefill_plus_decode_blocks)
{
    fleet f = {.l = {3, {2, 0, 7}}, .cached = {2, 5, 8}, .held = {2, 5, 8},
               .rc = cz_router_config_default(CZ_ROUTER_KV), .tokens = 160, .bt = 16};
    cr_assert_float_eq(f.rc.overlap_score_weight, 1.0, 0);
    cz_router_view v = fleet_view(&f);
    cr_assert_float_eq(cz_router_kv_cost(&f.rc, 2, 160, 16, 2, 2), 18, 1e-12);
    cr_assert_float_eq(cz_router_kv_cost(&f.rc, 0, 160, 16, 5, 5), 10, 1e-12);
    cr_assert_float_eq(cz_router_kv_cost(&f.rc, 7, 160, 16, 8, 8), 11, 1e-12);
    cr_assert_eq(cz_route(&f.rc, &v), 1);
    f.rc.overlap_score_weight = 2;
    cr_assert_eq(cz_route(&f.rc, &v), 2);
    f.rc.overlap_score_weight = 0;
    cr_assert_eq(cz_route(&f.rc, &v), 1);
    /* prefill is in tokens over the block size: 170 tokens cached 5 blocks leave 5.625;
     * the prompt is 11 blocks, none in use: 5.625 + 5 + 11 */
    f.rc.overlap_score_weight = 1;
    cr_assert_float_eq(cz_router_kv_cost(&f.rc, 5, 170, 16, 5, 0), 21.625, 1e-12);
}

/* A prefix in use adds no decode blocks: both workers hold 8 of 10 blocks cached, worker 0
 * in use by a request (active 10), worker 1 idle in the free queue (active 3): 2 + 10 + 2
 * = 14 against 2 + 3 + 10 = 15. */
Test(router, kv_router_counts_a_prefix_in_use_once)
{
    fleet f = {.l = {2, {10, 3}}, .cached = {8, 8}, .held = {8, 0},
               .rc = cz_router_config_default(CZ_ROUTER_KV), .tokens = 160, .bt = 16};
    cz_router_view v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 0);
    f.held[0] = 0; /* not in use: 2 + 10 + 10 = 22 */
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 1);
}

/* Equal costs go to the lowest index: active 5, 9, 11 with 8, 5, 2 blocks to prefill and
 * no block in use cost 8 + 5 + 10 = 23, 24, 23; a fourth worker with nothing cached and
 * nothing active costs 10 + 0 + 10 = 20 and wins, as a worker outside the candidates;
 * with 3 active it ties at 23 (the lowest of three); prefix caching off (no candidates),
 * the least active. */
Test(router, kv_router_ties_and_workers_without_a_prefix)
{
    fleet f = {.l = {3, {5, 9, 11}}, .cached = {2, 5, 8},
               .rc = cz_router_config_default(CZ_ROUTER_KV), .tokens = 160, .bt = 16};
    cz_router_view v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 0);
    f.l = (loads){4, {5, 9, 11, 0}};
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 3);
    f.l.v[3] = 3;
    cr_assert_eq(cz_route(&f.rc, &v), 0);
    memset(f.cached, 0, sizeof f.cached);
    v = fleet_view(&f);
    cr_assert_eq(cz_route(&f.rc, &v), 3, "no prefix: the least active");
}

/* llm_d's best by load terms alone, walking the queue levels from the lowest
 * (cz_router_llmd_free), against the score of every replica: random queues and KV uses
 * with many ties, random weights (zero ones included), replicas moving between levels. */
Test(router, llm_d_level_walk_matches_a_scan)
{
    srand(11);
    for (int trial = 0; trial < 200; trial++) {
        uint32_t n = 1 + (uint32_t)(rand() % 60), levels = 1 + (uint32_t)(rand() % 12);
        uint32_t grain = 1 + (uint32_t)(rand() % 8); /* KV uses k / grain: ties */
        cz_router_config rc = cz_router_config_default(CZ_ROUTER_LLM_D);
        if (trial % 3) {
            rc.queue_weight = (double)(rand() % 5);
            rc.kv_weight = (double)(rand() % 5);
        }
        cz_lvheap h;
        cz_lvheap_init(&h, n);
        uint32_t *q = malloc(n * sizeof *q);
        double *u = malloc(n * sizeof *u);
        for (uint32_t r = 0; r < n; r++) {
            q[r] = 0;
            u[r] = 0;
            cz_lvheap_set(&h, r, 0, 0.0);
        }
        for (int step = 0; step < 100; step++) {
            uint32_t r = (uint32_t)rand() % n;
            q[r] = (uint32_t)rand() % levels * (trial % 2 ? 7 : 1);
            u[r] = (double)(rand() % (grain + 1)) / grain;
            /* without a KV term the runtime keys every replica 0 (the lowest index wins a
             * level) */
            cz_lvheap_set(&h, r, q[r], rc.kv_weight > 0 ? u[r] : 0.0);
            uint32_t lo = UINT32_MAX, hi = 0;
            for (uint32_t k = 0; k < n; k++) {
                lo = q[k] < lo ? q[k] : lo;
                hi = q[k] > hi ? q[k] : hi;
            }
            cr_assert_eq(cz_lvheap_lo(&h), lo);
            cr_assert_eq(cz_lvheap_hi(&h), hi);
            uint32_t best = 0;
            double bs = cz_router_llmd_score(&rc, q[0], lo, hi, u[0], 0, 0);
            for (uint32_t k = 1; k < n; k++) {
                double s = cz_router_llmd_score(&rc, q[k], lo, hi, u[k], 0, 0);
                if (s > bs) {
                    best = k;
                    bs = s;
                }
            }
            cr_assert_eq(cz_router_llmd_free(&rc, &h), best, "trial %d step %d", trial, step);
        }
        free(q);
        free(u);
        cz_lvheap_free(&h);
    }
}
