/* cz_router.h - the routers: which data-parallel replica of a stage serves a turn
 * (docs/policies.md, "Routers"). Pure decisions on a read-only view of the replicas' loads,
 * as the deployment runtime keeps them: a replica's load is its outstanding turns (an
 * autoregressive stage) or jobs (an encoder or vocoder), or under vllm_dp its queues, as
 * the router sees them, which may be late (cz_router_config.signal_delay_s). The
 * prefix-aware routers (llm_d, kv_router) also read, per turn, the replicas that hold a
 * prefix of its blocks cached and how long that prefix is (cz_router_view.cand). */
#ifndef CZ_ROUTER_H
#define CZ_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "cz_lvheap.h"

typedef enum cz_router {
    CZ_ROUTER_SESSION = 0, /* the least loaded at a session's first turn, then sticky (its
                              multi-turn KV stays where it was) while its replica's load is
                              below affinity_max_load, else the least loaded again */
    CZ_ROUTER_LEAST_LOADED,/* least outstanding requests, at every turn (Vidur's LOR global
                              scheduler; vLLM's data-parallel load balancer) */
    CZ_ROUTER_RANDOM,      /* uniformly at random, at every turn */
    CZ_ROUTER_ROUND_ROBIN, /* replicas in turn (Vidur's round-robin global scheduler) */
    CZ_ROUTER_POWER_OF_TWO,/* the less loaded of two distinct replicas drawn at random
                              (Mitzenmacher, "The Power of Two Choices in Randomized Load
                              Balancing") */
    CZ_ROUTER_VLLM_DP,     /* vLLM's data-parallel load balancer: the least of 4 x waiting +
                              running requests, as last published, plus 4 per request it
                              sent since (the runtime computes the load) */
    CZ_ROUTER_LLM_D,       /* llm-d's inference scheduler (its default profile): the highest
                              weighted sum of the prefix-cache, queue and KV-cache
                              utilization scorers (cz_router_llmd_score) */
    CZ_ROUTER_KV           /* NVIDIA Dynamo's KV router at temperature 0: the least
                              overlap_score_weight x prefill blocks + active blocks
                              (cz_router_kv_cost) */
} cz_router;

/* llm-d's default scheduling profile (the inference-scheduling guide's plugins config, and
 * the Gateway API Inference Extension's default-plugins.yaml): prefix-cache-scorer 3,
 * queue-scorer 2, kv-cache-utilization-scorer 2. */
#define CZ_ROUTER_LLMD_PREFIX_WEIGHT 3.0
#define CZ_ROUTER_LLMD_QUEUE_WEIGHT 2.0
#define CZ_ROUTER_LLMD_KV_WEIGHT 2.0
/* Dynamo's --kv-overlap-score-weight default ("KV Cache Routing": "Defaults to 1"). */
#define CZ_ROUTER_KV_OVERLAP_WEIGHT 1.0

/* The config's "router" (docs/config.md). */
typedef struct cz_router_config {
    uint32_t policy;           /* cz_router */
    double signal_delay_s;     /* replicas publish their loads every this many seconds; a
                                  router sees the last published loads plus the turns it
                                  routed since (0: the true loads) */
    uint32_t affinity_max_load;/* session: a sticky replica at this load or more sends the
                                  turn to the least loaded one (0: never) */
    double prefix_weight;      /* llm_d: the scorers' weights (>= 0; the CZ_ROUTER_LLMD_* */
    double queue_weight;       /* defaults) */
    double kv_weight;
    double overlap_score_weight; /* kv_router: the weight of the prefill blocks (>= 0) */
    bool track_output_blocks;  /* kv_router: a turn's active blocks grow with its output, a
                                  block each time its context starts one (Dynamo's
                                  --router-track-output-blocks; false: its prompt's only) */
} cz_router_config;

/* A router config of `policy` with every other field at its default. */
cz_router_config cz_router_config_default(uint32_t policy);

/* A replica that holds a prefix of the turn's blocks cached (the prefix-aware routers). */
typedef struct cz_router_cand {
    uint32_t r;          /* the replica (< n) */
    uint32_t cached;     /* the turn's leading blocks it holds cached (<= the turn's full
                            blocks) */
    uint32_t held;       /* kv_router: how many of those lead in use there (held by its
                            requests: routing the turn there adds no blocks for them) */
} cz_router_cand;

/* What a router reads: the stage's replicas 0 .. n-1 and their loads as it sees them. */
typedef struct cz_router_view {
    uint32_t n;        /* replicas (> 0) */
    uint32_t sticky;   /* the replica that served the session's last turn, UINT32_MAX none */
    uint32_t rr_next;  /* round robin: the replica whose turn it is (< n) */
    gsl_rng *rng;      /* random and power of two: the turn's stream, seeded by the caller */
    const void *ctx;
    uint32_t (*load)(const void *ctx, uint32_t r); /* replica r's load; llm_d: its waiting
                                                      requests; kv_router: its active
                                                      blocks */
    uint32_t (*least)(const void *ctx);            /* the least loaded replica, the lowest
                                                      on a tie; llm_d and kv_router: the
                                                      best by the load terms alone (no
                                                      prefix cached) */
    /* the prefix-aware routers (llm_d, kv_router) */
    uint32_t tokens;          /* the turn's context: its input, after the session's
                                 history on its replica */
    uint32_t block_tokens;    /* tokens per KV block (> 0) */
    const cz_router_cand *cand; /* the replicas holding a prefix of the turn's blocks, each
                                   once, in any order (n_cand of them); a replica absent
                                   holds none */
    uint32_t n_cand;
    double (*kv_use)(const void *ctx, uint32_t r); /* llm_d: replica r's KV cache
                                                      utilization in [0, 1] */
    uint32_t queue_min, queue_max; /* llm_d: the least and greatest waiting queues over the
                                      stage's replicas */
} cz_router_view;

/* The replica that serves the turn (< v->n). Allocates nothing; O(1) calls of the view,
 * plus O(n_cand) for the prefix-aware routers. */
uint32_t cz_route(const cz_router_config *rc, const cz_router_view *v);

/* llm_d's score of a replica with `queue` waiting requests (the stage's between queue_min
 * and queue_max), KV cache utilization `kv_use` and `cached` of the turn's `blocks` full
 * blocks cached (llm-d's max-score picker takes the highest):
 *   prefix_weight x cached / blocks (0 when blocks is 0; the prefix-cache scorer)
 *   + queue_weight x (queue_max - queue) / (queue_max - queue_min) (1 when they are equal;
 *     the queue scorer's min-max normalisation)
 *   + kv_weight x (1 - kv_use) (the kv-cache-utilization scorer).
 * Nonincreasing in queue and kv_use, nondecreasing in cached, as computed. */
double cz_router_llmd_score(const cz_router_config *rc, uint32_t queue, uint32_t queue_min,
                            uint32_t queue_max, double kv_use, uint32_t cached,
                            uint32_t blocks);

/* kv_router's cost of a replica with `active` blocks held by its requests when `cached` of
 * the turn's `tokens` (in blocks of `block_tokens`) are cached there, the first `held` of
 * them in use (Dynamo's "KV Cache Routing" and "Router Design": cost =
 * overlap_score_weight x prefill blocks + decode blocks, the least wins; prefill blocks =
 * (tokens - cached x block_tokens) / block_tokens; decode blocks, the "potential decode
 * blocks" = active + the turn's blocks not already in use there, ceil(tokens /
 * block_tokens) - held). */
double cz_router_kv_cost(const cz_router_config *rc, uint32_t active, uint32_t tokens,
                         uint32_t block_tokens, uint32_t cached, uint32_t held);

/* llm_d's best replica by its load terms alone (no prefix cached): the highest
 * cz_router_llmd_score(queue, lo, hi, kv_use, 0, blocks) over the ids of `h`, each at its
 * waiting queue as level with its KV cache utilization as key (0 for all when kv_weight is
 * 0: the score then ignores it), the lowest id on a tie. Walks the levels from the lowest
 * and stops where even an empty cache could not catch up: O(levels walked) <=
 * O(queue_max - queue_min + 1), whatever the number of replicas. Exact as long as two
 * KV uses at one queue never round to one score (kv_weight / KV blocks far above 1e-16 x
 * the score: weights of llm-d's magnitudes, 0.01 to 1,000, with pools under 10^9 blocks).
 * UINT32_MAX when `h` is empty. */
uint32_t cz_router_llmd_free(const cz_router_config *rc, const cz_lvheap *h);

#endif
