/* cz_router.h - the routers: which data-parallel replica of a stage serves a turn
 * (docs/policies.md, "Routers"). Pure decisions on a read-only view of the replicas' loads,
 * as the deployment runtime keeps them: a replica's load is its outstanding turns (an
 * autoregressive stage) or jobs (an encoder or vocoder), or under vllm_dp its queues, as
 * the router sees them, which may be late (cz_router_config.signal_delay_s). */
#ifndef CZ_ROUTER_H
#define CZ_ROUTER_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

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
    CZ_ROUTER_VLLM_DP      /* vLLM's data-parallel load balancer: the least of 4 x waiting +
                              running requests, as last published, plus 4 per request it
                              sent since (the runtime computes the load) */
} cz_router;

/* The config's "router" (docs/config.md). */
typedef struct cz_router_config {
    uint32_t policy;           /* cz_router */
    double signal_delay_s;     /* replicas publish their loads every this many seconds; a
                                  router sees the last published loads plus the turns it
                                  routed since (0: the true loads) */
    uint32_t affinity_max_load;/* session: a sticky replica at this load or more sends the
                                  turn to the least loaded one (0: never) */
} cz_router_config;

/* What a router reads: the stage's replicas 0 .. n-1 and their loads as it sees them. */
typedef struct cz_router_view {
    uint32_t n;        /* replicas (> 0) */
    uint32_t sticky;   /* the replica that served the session's last turn, UINT32_MAX none */
    uint32_t rr_next;  /* round robin: the replica whose turn it is (< n) */
    gsl_rng *rng;      /* random and power of two: the turn's stream, seeded by the caller */
    const void *ctx;
    uint32_t (*load)(const void *ctx, uint32_t r); /* replica r's load */
    uint32_t (*least)(const void *ctx);            /* the least loaded replica, the lowest
                                                      on a tie */
} cz_router_view;

/* The replica that serves the turn (< v->n). Allocates nothing; O(1) calls of the view. */
uint32_t cz_route(const cz_router_config *rc, const cz_router_view *v);

#endif
