/* cz_kvindex.h - a router's index of the fleet's cached KV blocks: for each block hash the
 * replicas that hold it cached (NVIDIA Dynamo's KvIndexer, "KV Cache Routing"; llm-d's
 * precise prefix-cache scorer keeps the same map from the engines' KV events). The serving
 * cores announce their published blocks as they are cached and forgotten
 * (cz_server_watch_cache with cz_kvindex_watch), so the index always equals the caches.
 *
 * Nodes (hash, replica) are threaded on one doubly linked list per hash, the newest first;
 * a hash's list head is found through an open-addressing table (linear probing,
 * backward-shift deletion). A node's id is the tag its cache keeps, so a forgotten block
 * leaves in O(1) whatever the number of its holders. The node pool and the table grow by
 * doubling as the fleet caches more (amortized O(1); never on a lookup). Replica ids are
 * the caller's, in [0, n_reps). Everything hangs off the object: no globals. */
#ifndef CZ_KVINDEX_H
#define CZ_KVINDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_pcache.h"

struct cz_kvindex;

/* What a replica's cache watcher calls with (cz_kvindex_watch). */
typedef struct cz_kvindex_port {
    struct cz_kvindex *x;
    uint32_t rep;
} cz_kvindex_port;

typedef struct cz_kvindex_node {
    uint64_t hash;
    uint32_t rep;
    uint32_t prev, next; /* the hash's holders (next: the free list when unused) */
} cz_kvindex_node;

typedef struct cz_kvindex {
    cz_kvindex_node *node;  /* cap_node nodes */
    uint32_t cap_node, free_node, n_node;
    uint32_t *slot;         /* hash -> its list's head node, UINT32_MAX when empty */
    uint32_t mask;          /* slots - 1 (a power of two, at least twice the hashes) */
    uint32_t n_hashes;
    uint32_t n_reps;
    uint32_t *held;         /* per replica: the hashes it holds */
    cz_kvindex_port *ports; /* per replica: its watcher's context (never moves) */
    uint32_t *stamp, *len;  /* per replica: cz_kvindex_match's scratch */
    uint32_t gen;
} cz_kvindex;

/* An empty index over replicas [0, n_reps) (> 0); cz_kvindex_free releases it. */
void cz_kvindex_init(cz_kvindex *x, uint32_t n_reps);
void cz_kvindex_free(cz_kvindex *x);

/* The watcher replica `rep`'s cache reports to (cz_server_watch_cache): each published
 * block it caches is added under its hash, each forgotten one removed. */
cz_pcache_watch cz_kvindex_watch(cz_kvindex *x, uint32_t rep);

/* Replica `rep` caches `hash` (it must not hold it already): returns the node's id, the
 * tag to hand back to cz_kvindex_remove. Amortized O(1). */
uint32_t cz_kvindex_add(cz_kvindex *x, uint32_t rep, uint64_t hash);

/* Node `tag` (from cz_kvindex_add, for `hash`) leaves. O(1) expected. */
void cz_kvindex_remove(cz_kvindex *x, uint64_t hash, uint32_t tag);

/* The longest cached prefix of a request whose blocks hash to h[0 .. n): for each replica
 * in [lo, lo + cnt) that holds h[0], reps[i] and lens[i] = the k such that it holds
 * h[0 .. k) and not h[k] (k >= 1). Returns how many (<= cnt, the size of both arrays), in
 * the order h[0]'s holders were last added. The walk stops at the first block no candidate
 * extends: O(sum of the holders of the blocks walked), not O(cnt). Allocates nothing. */
uint32_t cz_kvindex_match(cz_kvindex *x, const uint64_t *h, uint32_t n, uint32_t lo,
                          uint32_t cnt, uint32_t *reps, uint32_t *lens);

/* Whether replica `rep` holds `hash`. O(holders of the hash): for tests. */
bool cz_kvindex_has(const cz_kvindex *x, uint32_t rep, uint64_t hash);

/* The hashes replica `rep` holds. O(1). */
uint32_t cz_kvindex_held(const cz_kvindex *x, uint32_t rep);

/* Checks the table, the lists and the per-replica counts against each other; false with
 * the first violation in err. For tests; O(nodes + slots). */
bool cz_kvindex_check(const cz_kvindex *x, cz_err *err);

#endif
