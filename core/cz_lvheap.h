/* cz_lvheap.h - ids bucketed by an integer level, each level a binary min-heap on
 * (key, id): the least key of a level, the lowest id on a tie, in O(1), a move in
 * O(log n). The lowest and highest non-empty levels are kept, and the non-empty levels can
 * be walked upward. A router whose score mixes a replica's queue (the level) and its KV
 * use (the key) with a weight that depends on the fleet's queue range (llm-d's queue
 * scorer normalises the queues by their min and max) finds its best replica by walking
 * the levels from the lowest (cz_router_llmd_free), which a single heap on a fixed key
 * cannot answer.
 *
 * Ids are the caller's, in [0, n_ids), each at one level at a time. A level's array grows
 * by doubling the first time it holds that many ids (amortized; a steady fleet stops
 * allocating), and the level array when a level is first reached. */
#ifndef CZ_LVHEAP_H
#define CZ_LVHEAP_H

#include <stdint.h>

typedef struct cz_lvheap_bucket {
    uint32_t *ids; /* a min-heap on (key, id) */
    uint32_t n, cap;
} cz_lvheap_bucket;

typedef struct cz_lvheap {
    cz_lvheap_bucket *lv; /* n_lv levels */
    uint32_t n_lv;
    uint32_t *level;     /* per id: its level, UINT32_MAX when absent */
    uint32_t *pos;       /* per id: its place in its level's heap */
    double *key;         /* per id */
    uint32_t n_ids, len;
    uint32_t lo, hi;     /* the lowest and highest non-empty levels (UINT32_MAX: empty) */
} cz_lvheap;

/* An empty structure for ids [0, n_ids) (> 0); cz_lvheap_free releases it. */
void cz_lvheap_init(cz_lvheap *h, uint32_t n_ids);
void cz_lvheap_free(cz_lvheap *h);

/* Puts `id` at `level` (< UINT32_MAX) with `key` (not NaN), moving it if present.
 * O(log n), plus the levels skipped when its old level was the lowest or highest and
 * empties. */
void cz_lvheap_set(cz_lvheap *h, uint32_t id, uint32_t level, double key);

/* The lowest and highest non-empty levels; UINT32_MAX when empty. O(1). */
uint32_t cz_lvheap_lo(const cz_lvheap *h);
uint32_t cz_lvheap_hi(const cz_lvheap *h);

/* The lowest non-empty level above `level`, UINT32_MAX when none. O(levels skipped). */
uint32_t cz_lvheap_next(const cz_lvheap *h, uint32_t level);

/* The id of least (key, id) at non-empty `level`. O(1). */
uint32_t cz_lvheap_top(const cz_lvheap *h, uint32_t level);

/* Id `id`'s level (UINT32_MAX when absent) and key. O(1). */
uint32_t cz_lvheap_level(const cz_lvheap *h, uint32_t id);
double cz_lvheap_key(const cz_lvheap *h, uint32_t id);

#endif
