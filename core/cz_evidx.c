/* cz_evidx.c - see cz_evidx.h. */
#include "cz_evidx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_base.h"

#define ABSENT UINT32_MAX

void cz_evidx_init(cz_evidx *x)
{
    memset(x, 0, sizeof *x);
}

void cz_evidx_free(cz_evidx *x)
{
    free(x->heap);
    free(x->pos);
    free(x->key);
    free(x->tie);
    memset(x, 0, sizeof *x);
}

static void grow(cz_evidx *x, uint32_t id)
{
    size_t cap = x->cap ? x->cap : 64;
    while (cap <= id)
        cap *= 2;
    x->heap = cz_xrealloc(x->heap, cap, sizeof *x->heap);
    x->pos = cz_xrealloc(x->pos, cap, sizeof *x->pos);
    x->key = cz_xrealloc(x->key, cap, sizeof *x->key);
    x->tie = cz_xrealloc(x->tie, cap, sizeof *x->tie);
    for (size_t i = x->cap; i < cap; i++)
        x->pos[i] = ABSENT;
    x->cap = cap;
}

/* a is evicted before b */
static bool before(const cz_evidx *x, uint32_t a, uint32_t b)
{
    return x->key[a] > x->key[b] || (x->key[a] == x->key[b] && x->tie[a] < x->tie[b]);
}

static void place(cz_evidx *x, uint32_t p, uint32_t id)
{
    x->heap[p] = id;
    x->pos[id] = p;
}

static void up(cz_evidx *x, uint32_t p)
{
    uint32_t id = x->heap[p];
    while (p > 0) {
        uint32_t parent = (p - 1) / 2;
        if (!before(x, id, x->heap[parent]))
            break;
        place(x, p, x->heap[parent]);
        p = parent;
    }
    place(x, p, id);
}

static void down(cz_evidx *x, uint32_t p)
{
    uint32_t id = x->heap[p];
    for (;;) {
        uint32_t c = 2 * p + 1;
        if (c >= x->n)
            break;
        if (c + 1 < x->n && before(x, x->heap[c + 1], x->heap[c]))
            c++;
        if (!before(x, x->heap[c], id))
            break;
        place(x, p, x->heap[c]);
        p = c;
    }
    place(x, p, id);
}

void cz_evidx_set(cz_evidx *x, uint32_t id, double key)
{
    CZ_ASSERT(!isnan(key) && id != ABSENT);
    if (id >= x->cap)
        grow(x, id);
    if (x->pos[id] == ABSENT) {
        x->key[id] = key;
        x->tie[id] = x->clock++;
        place(x, x->n++, id);
        up(x, x->n - 1);
        return;
    }
    x->key[id] = key;
    up(x, x->pos[id]);
    down(x, x->pos[id]);
}

void cz_evidx_remove(cz_evidx *x, uint32_t id)
{
    if (id >= x->cap || x->pos[id] == ABSENT)
        return;
    uint32_t p = x->pos[id];
    x->pos[id] = ABSENT;
    uint32_t last = x->heap[--x->n];
    if (p == x->n)
        return;
    place(x, p, last);
    up(x, p);
    down(x, x->pos[last]);
}

bool cz_evidx_has(const cz_evidx *x, uint32_t id)
{
    return id < x->cap && x->pos[id] != ABSENT;
}

uint32_t cz_evidx_len(const cz_evidx *x)
{
    return x->n;
}

uint32_t cz_evidx_top(const cz_evidx *x)
{
    return x->n ? x->heap[0] : ABSENT;
}

uint32_t cz_evidx_scan_top(const cz_evidx *x)
{
    uint32_t best = ABSENT;
    for (uint32_t i = 0; i < x->n; i++)
        if (best == ABSENT || before(x, x->heap[i], best))
            best = x->heap[i];
    return best;
}
