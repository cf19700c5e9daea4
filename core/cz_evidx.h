/* cz_evidx.h - the eviction index of LiveServe's KV manager (LiveServe,
 * section 5.1, Table 1): eviction candidates keyed by their predicted next use, the
 * farthest first, in an indexed binary heap with O(log n) insert, update and remove, and a
 * linear scan over the same members as the slow reference. Ties go to the candidate whose
 * key was set first. Ids are the caller's (sequence ids); the index grows to hold them. */
#ifndef CZ_EVIDX_H
#define CZ_EVIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cz_evidx {
    uint32_t *heap;  /* ids, a max-heap on (key, -tie) */
    uint32_t n;
    uint32_t *pos;   /* per id: its heap position, UINT32_MAX when absent */
    double *key;     /* per id */
    uint64_t *tie;   /* per id: when its key was first set (smaller first on equal keys) */
    size_t cap;      /* ids the arrays hold */
    uint64_t clock;
} cz_evidx;

void cz_evidx_init(cz_evidx *x);
void cz_evidx_free(cz_evidx *x);
/* Inserts `id` with `key`, or moves it to `key` if present (its tie stays). O(log n);
 * allocates only when `id` is beyond every id seen so far. key is not NaN. */
void cz_evidx_set(cz_evidx *x, uint32_t id, double key);
/* Removes `id` if present. O(log n). */
void cz_evidx_remove(cz_evidx *x, uint32_t id);
bool cz_evidx_has(const cz_evidx *x, uint32_t id);
uint32_t cz_evidx_len(const cz_evidx *x);
/* The member to evict first (largest key), UINT32_MAX when empty. O(1). */
uint32_t cz_evidx_top(const cz_evidx *x);
/* The same answer by scanning every member. O(n): the reference. */
uint32_t cz_evidx_scan_top(const cz_evidx *x);

#endif
