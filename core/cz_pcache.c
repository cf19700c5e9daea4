/* cz_pcache.c - see cz_pcache.h. */
#include "cz_pcache.h"

#include <stdlib.h>
#include <string.h>

#define NONE CZ_PCACHE_NONE

void cz_pcache_init(cz_pcache *c, uint32_t blocks)
{
    CZ_ASSERT(blocks > 0 && blocks <= UINT32_MAX / 4);
    memset(c, 0, sizeof *c);
    uint64_t slots = 16;
    while (slots < 2ull * blocks)
        slots *= 2;
    c->cap = blocks;
    c->mask = (uint32_t)(slots - 1);
    c->blk = cz_xmalloc((size_t)blocks * sizeof *c->blk);
    c->slot = cz_xmalloc((size_t)slots * sizeof *c->slot);
    for (uint64_t i = 0; i < slots; i++)
        c->slot[i] = NONE;
    for (uint32_t e = 0; e < blocks; e++)
        c->blk[e] = (cz_pcache_blk){
            .prev = NONE, .next = e + 1 < blocks ? e + 1 : NONE, .tag = NONE};
    c->spare = 0;
    c->fq_head = c->fq_tail = NONE;
}

void cz_pcache_free(cz_pcache *c)
{
    free(c->blk);
    free(c->slot);
    memset(c, 0, sizeof *c);
}

/* The table slot a hash starts probing from (the hashes are already mixed). */
static uint32_t home(const cz_pcache *c, uint64_t hash)
{
    return (uint32_t)(hash ^ (hash >> 32)) & c->mask;
}

/* The slot holding `hash`, or the empty slot where its probe ends. */
static uint32_t probe(const cz_pcache *c, uint64_t hash)
{
    uint32_t i = home(c, hash);
    while (c->slot[i] != NONE && c->blk[c->slot[i]].hash != hash)
        i = (i + 1) & c->mask;
    return i;
}

uint32_t cz_pcache_find(const cz_pcache *c, uint64_t hash)
{
    return c->slot[probe(c, hash)];
}

uint32_t cz_pcache_insert(cz_pcache *c, uint64_t hash)
{
    uint32_t i = probe(c, hash);
    CZ_ASSERT(c->slot[i] == NONE && c->spare != NONE);
    uint32_t e = c->spare;
    c->spare = c->blk[e].next;
    c->blk[e] = (cz_pcache_blk){.hash = hash, .ref = 1, .prev = NONE, .next = NONE, .tag = NONE};
    c->slot[i] = e;
    c->n_live++;
    return e;
}

/* Removes entry e's hash from the table (backward-shift deletion: the entries after it in
 * its probe run move up, so no tombstone is left) and puts e on the spare list; a
 * published entry's watcher hears of it. */
static void unlink_hash(cz_pcache *c, uint32_t e)
{
    if (c->blk[e].tag != NONE)
        c->watch.forgotten(c->watch.ctx, c->blk[e].hash, c->blk[e].tag);
    uint32_t i = probe(c, c->blk[e].hash);
    CZ_ASSERT(c->slot[i] == e);
    for (uint32_t j = (i + 1) & c->mask; c->slot[j] != NONE; j = (j + 1) & c->mask) {
        uint32_t h = home(c, c->blk[c->slot[j]].hash);
        /* the entry at j may fill the hole at i unless its home lies cyclically in (i, j] */
        if (((j - h) & c->mask) >= ((j - i) & c->mask)) {
            c->slot[i] = c->slot[j];
            i = j;
        }
    }
    c->slot[i] = NONE;
    c->blk[e] = (cz_pcache_blk){.prev = NONE, .next = c->spare, .tag = NONE};
    c->spare = e;
    c->n_live--;
}

static void fq_remove(cz_pcache *c, uint32_t e)
{
    cz_pcache_blk *b = &c->blk[e];
    if (b->prev != NONE)
        c->blk[b->prev].next = b->next;
    else
        c->fq_head = b->next;
    if (b->next != NONE)
        c->blk[b->next].prev = b->prev;
    else
        c->fq_tail = b->prev;
    b->prev = b->next = NONE;
    c->n_free--;
}

bool cz_pcache_hold(cz_pcache *c, uint32_t e)
{
    CZ_ASSERT(e < c->cap);
    bool queued = c->blk[e].ref == 0;
    if (queued)
        fq_remove(c, e);
    c->blk[e].ref++;
    return queued;
}

bool cz_pcache_release(cz_pcache *c, uint32_t e)
{
    CZ_ASSERT(e < c->cap && c->blk[e].ref > 0);
    if (--c->blk[e].ref > 0)
        return false;
    cz_pcache_blk *b = &c->blk[e];
    b->prev = c->fq_tail;
    b->next = NONE;
    if (c->fq_tail != NONE)
        c->blk[c->fq_tail].next = e;
    else
        c->fq_head = e;
    c->fq_tail = e;
    c->n_free++;
    return true;
}

uint32_t cz_pcache_evict(cz_pcache *c)
{
    uint32_t e = c->fq_head;
    CZ_ASSERT(e != NONE);
    fq_remove(c, e);
    unlink_hash(c, e);
    return e;
}

void cz_pcache_forget(cz_pcache *c, uint32_t e)
{
    CZ_ASSERT(e < c->cap && c->blk[e].ref == 1);
    unlink_hash(c, e);
}

void cz_pcache_set_watch(cz_pcache *c, const cz_pcache_watch *w)
{
    if (w) {
        CZ_ASSERT(w->cached && w->forgotten);
        c->watch = *w;
    } else {
        c->watch = (cz_pcache_watch){0};
    }
}

void cz_pcache_publish(cz_pcache *c, uint32_t e)
{
    CZ_ASSERT(e < c->cap);
    cz_pcache_blk *b = &c->blk[e];
    if (!c->watch.cached || b->tag != NONE)
        return;
    b->tag = c->watch.cached(c->watch.ctx, b->hash);
    CZ_ASSERT(b->tag != NONE);
}

bool cz_pcache_check(const cz_pcache *c, cz_err *err)
{
    uint32_t in_table = 0, queued = 0, spare = 0;
    for (uint32_t i = 0; i <= c->mask; i++) {
        uint32_t e = c->slot[i];
        if (e == NONE)
            continue;
        in_table++;
        if (e >= c->cap || cz_pcache_find(c, c->blk[e].hash) != e) {
            cz_err_set(err, CZ_EINVAL, "table slot %u names entry %u, not found by its hash",
                       i, e);
            return false;
        }
    }
    uint32_t prev = NONE;
    for (uint32_t e = c->fq_head; e != NONE && queued <= c->cap; e = c->blk[e].next) {
        if (c->blk[e].ref != 0 || c->blk[e].prev != prev) {
            cz_err_set(err, CZ_EINVAL, "free queue: entry %u has %u holders or a bad link", e,
                       c->blk[e].ref);
            return false;
        }
        prev = e;
        queued++;
    }
    for (uint32_t e = c->spare; e != NONE && spare <= c->cap; e = c->blk[e].next)
        spare++;
    if (in_table != c->n_live || queued != c->n_free || prev != c->fq_tail ||
        c->n_live + spare != c->cap) {
        cz_err_set(err, CZ_EINVAL,
                   "cache: %u hashed in the table (counted %u), %u queued (counted %u), %u "
                   "spare, %u entries",
                   in_table, c->n_live, queued, c->n_free, spare, c->cap);
        return false;
    }
    return true;
}
