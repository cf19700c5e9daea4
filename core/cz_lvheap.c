/* cz_lvheap.c - see cz_lvheap.h. */
#include "cz_lvheap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_base.h"

#define NONE UINT32_MAX

void cz_lvheap_init(cz_lvheap *h, uint32_t n_ids)
{
    CZ_ASSERT(n_ids > 0);
    memset(h, 0, sizeof *h);
    h->n_ids = n_ids;
    h->level = cz_xmalloc(n_ids * sizeof *h->level);
    h->pos = cz_xmalloc(n_ids * sizeof *h->pos);
    h->key = cz_xcalloc(n_ids, sizeof *h->key);
    for (uint32_t i = 0; i < n_ids; i++)
        h->level[i] = NONE;
    h->lo = h->hi = NONE;
}

void cz_lvheap_free(cz_lvheap *h)
{
    for (uint32_t l = 0; l < h->n_lv; l++)
        free(h->lv[l].ids);
    free(h->lv);
    free(h->level);
    free(h->pos);
    free(h->key);
    memset(h, 0, sizeof *h);
}

/* Whether id a goes before id b: the lesser key, the lower id on a tie. */
static int before(const cz_lvheap *h, uint32_t a, uint32_t b)
{
    return h->key[a] < h->key[b] || (h->key[a] == h->key[b] && a < b);
}

static void place(cz_lvheap *h, cz_lvheap_bucket *v, uint32_t i, uint32_t id)
{
    v->ids[i] = id;
    h->pos[id] = i;
}

static void sift_up(cz_lvheap *h, cz_lvheap_bucket *v, uint32_t i)
{
    uint32_t id = v->ids[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(h, id, v->ids[parent]))
            break;
        place(h, v, i, v->ids[parent]);
        i = parent;
    }
    place(h, v, i, id);
}

static void sift_down(cz_lvheap *h, cz_lvheap_bucket *v, uint32_t i)
{
    uint32_t id = v->ids[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= v->n)
            break;
        if (c + 1 < v->n && before(h, v->ids[c + 1], v->ids[c]))
            c++;
        if (!before(h, v->ids[c], id))
            break;
        place(h, v, i, v->ids[c]);
        i = c;
    }
    place(h, v, i, id);
}

/* Takes `id` out of its level, keeping lo and hi. */
static void take_out(cz_lvheap *h, uint32_t id)
{
    uint32_t l = h->level[id];
    cz_lvheap_bucket *v = &h->lv[l];
    uint32_t i = h->pos[id], last = v->ids[--v->n];
    h->level[id] = NONE;
    h->len--;
    if (i < v->n) {
        place(h, v, i, last);
        sift_up(h, v, i);
        sift_down(h, v, h->pos[last]);
    }
    if (v->n > 0)
        return;
    if (h->len == 0) {
        h->lo = h->hi = NONE;
        return;
    }
    if (l == h->lo)
        while (h->lv[h->lo].n == 0)
            h->lo++;
    if (l == h->hi)
        while (h->lv[h->hi].n == 0)
            h->hi--;
}

void cz_lvheap_set(cz_lvheap *h, uint32_t id, uint32_t level, double key)
{
    CZ_ASSERT(id < h->n_ids && level < NONE && !isnan(key));
    if (h->level[id] == level) {
        cz_lvheap_bucket *v = &h->lv[level];
        h->key[id] = key;
        sift_up(h, v, h->pos[id]);
        sift_down(h, v, h->pos[id]);
        return;
    }
    if (h->level[id] != NONE)
        take_out(h, id);
    if (level >= h->n_lv) {
        size_t cap = h->n_lv;
        cz_grow((void **)&h->lv, &cap, (size_t)level + 1, sizeof *h->lv);
        memset(h->lv + h->n_lv, 0, (cap - h->n_lv) * sizeof *h->lv);
        h->n_lv = (uint32_t)cap;
    }
    cz_lvheap_bucket *v = &h->lv[level];
    if (v->n == v->cap) {
        size_t cap = v->cap;
        cz_grow((void **)&v->ids, &cap, (size_t)v->n + 1, sizeof *v->ids);
        v->cap = (uint32_t)cap;
    }
    h->key[id] = key;
    h->level[id] = level;
    v->n++;
    h->len++;
    place(h, v, v->n - 1, id);
    sift_up(h, v, v->n - 1);
    if (h->lo == NONE || level < h->lo)
        h->lo = level;
    if (h->hi == NONE || level > h->hi)
        h->hi = level;
}

uint32_t cz_lvheap_lo(const cz_lvheap *h)
{
    return h->lo;
}

uint32_t cz_lvheap_hi(const cz_lvheap *h)
{
    return h->hi;
}

uint32_t cz_lvheap_next(const cz_lvheap *h, uint32_t level)
{
    if (h->hi == NONE || level >= h->hi)
        return NONE;
    uint32_t l = level + 1;
    while (h->lv[l].n == 0)
        l++;
    return l;
}

uint32_t cz_lvheap_top(const cz_lvheap *h, uint32_t level)
{
    CZ_ASSERT(level < h->n_lv && h->lv[level].n > 0);
    return h->lv[level].ids[0];
}

uint32_t cz_lvheap_level(const cz_lvheap *h, uint32_t id)
{
    CZ_ASSERT(id < h->n_ids);
    return h->level[id];
}

double cz_lvheap_key(const cz_lvheap *h, uint32_t id)
{
    CZ_ASSERT(id < h->n_ids);
    return h->key[id];
}
