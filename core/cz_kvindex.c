/* cz_kvindex.c - see cz_kvindex.h. */
#include "cz_kvindex.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

void cz_kvindex_init(cz_kvindex *x, uint32_t n_reps)
{
    CZ_ASSERT(n_reps > 0);
    memset(x, 0, sizeof *x);
    x->n_reps = n_reps;
    x->mask = 15;
    x->slot = cz_xmalloc((x->mask + 1) * sizeof *x->slot);
    for (uint32_t i = 0; i <= x->mask; i++)
        x->slot[i] = NONE;
    x->free_node = NONE;
    x->held = cz_xcalloc(n_reps, sizeof *x->held);
    x->ports = cz_xmalloc(n_reps * sizeof *x->ports);
    for (uint32_t r = 0; r < n_reps; r++)
        x->ports[r] = (cz_kvindex_port){x, r};
    x->stamp = cz_xcalloc(n_reps, sizeof *x->stamp);
    x->len = cz_xcalloc(n_reps, sizeof *x->len);
}

void cz_kvindex_free(cz_kvindex *x)
{
    free(x->node);
    free(x->slot);
    free(x->held);
    free(x->ports);
    free(x->stamp);
    free(x->len);
    memset(x, 0, sizeof *x);
}

/* The table slot a hash starts probing from (the hashes are already mixed). */
static uint32_t home(const cz_kvindex *x, uint64_t hash)
{
    return (uint32_t)(hash ^ (hash >> 32)) & x->mask;
}

/* The slot holding `hash`'s list, or the empty slot where its probe ends. */
static uint32_t probe(const cz_kvindex *x, uint64_t hash)
{
    uint32_t i = home(x, hash);
    while (x->slot[i] != NONE && x->node[x->slot[i]].hash != hash)
        i = (i + 1) & x->mask;
    return i;
}

/* Doubles the table and places every list head again. */
static void grow_table(cz_kvindex *x)
{
    uint32_t old_mask = x->mask, *old = x->slot;
    CZ_ASSERT(old_mask < UINT32_MAX / 4);
    x->mask = old_mask * 2 + 1;
    x->slot = cz_xmalloc(((size_t)x->mask + 1) * sizeof *x->slot);
    for (uint32_t i = 0; i <= x->mask; i++)
        x->slot[i] = NONE;
    for (uint32_t i = 0; i <= old_mask; i++)
        if (old[i] != NONE)
            x->slot[probe(x, x->node[old[i]].hash)] = old[i];
    free(old);
}

/* Empties slot i (backward-shift deletion: the entries after it in its probe run move up,
 * so no tombstone is left). */
static void slot_delete(cz_kvindex *x, uint32_t i)
{
    for (uint32_t j = (i + 1) & x->mask; x->slot[j] != NONE; j = (j + 1) & x->mask) {
        uint32_t h = home(x, x->node[x->slot[j]].hash);
        /* the entry at j may fill the hole at i unless its home lies cyclically in (i, j] */
        if (((j - h) & x->mask) >= ((j - i) & x->mask)) {
            x->slot[i] = x->slot[j];
            i = j;
        }
    }
    x->slot[i] = NONE;
}

uint32_t cz_kvindex_add(cz_kvindex *x, uint32_t rep, uint64_t hash)
{
    CZ_ASSERT(rep < x->n_reps);
    if (x->free_node == NONE) {
        size_t cap = x->cap_node;
        cz_grow((void **)&x->node, &cap, (size_t)x->cap_node + 1, sizeof *x->node);
        CZ_ASSERT(cap < NONE);
        for (size_t k = cap; k-- > x->cap_node;) {
            x->node[k].next = x->free_node;
            x->free_node = (uint32_t)k;
        }
        x->cap_node = (uint32_t)cap;
    }
    uint32_t i = probe(x, hash);
    if (x->slot[i] == NONE && 2 * ((uint64_t)x->n_hashes + 1) > (uint64_t)x->mask + 1) {
        grow_table(x);
        i = probe(x, hash);
    }
    uint32_t n = x->free_node, head = x->slot[i];
    x->free_node = x->node[n].next;
    x->node[n] = (cz_kvindex_node){.hash = hash, .rep = rep, .prev = NONE, .next = head};
    if (head != NONE)
        x->node[head].prev = n;
    else
        x->n_hashes++;
    x->slot[i] = n;
    x->n_node++;
    x->held[rep]++;
    return n;
}

void cz_kvindex_remove(cz_kvindex *x, uint64_t hash, uint32_t tag)
{
    CZ_ASSERT(tag < x->cap_node && x->node[tag].hash == hash && x->node[tag].rep < x->n_reps);
    cz_kvindex_node *d = &x->node[tag];
    if (d->prev != NONE) {
        x->node[d->prev].next = d->next;
    } else {
        uint32_t i = probe(x, hash);
        CZ_ASSERT(x->slot[i] == tag);
        if (d->next != NONE) {
            x->slot[i] = d->next;
        } else {
            slot_delete(x, i);
            x->n_hashes--;
        }
    }
    if (d->next != NONE)
        x->node[d->next].prev = d->prev;
    x->held[d->rep]--;
    x->n_node--;
    *d = (cz_kvindex_node){.rep = NONE, .prev = NONE, .next = x->free_node};
    x->free_node = tag;
}

static uint32_t on_cached(void *ctx, uint64_t hash)
{
    const cz_kvindex_port *pt = ctx;
    return cz_kvindex_add(pt->x, pt->rep, hash);
}

static void on_forgotten(void *ctx, uint64_t hash, uint32_t tag)
{
    const cz_kvindex_port *pt = ctx;
    CZ_ASSERT(tag < pt->x->cap_node && pt->x->node[tag].rep == pt->rep);
    cz_kvindex_remove(pt->x, hash, tag);
}

cz_pcache_watch cz_kvindex_watch(cz_kvindex *x, uint32_t rep)
{
    CZ_ASSERT(rep < x->n_reps);
    return (cz_pcache_watch){.ctx = &x->ports[rep], .cached = on_cached,
                             .forgotten = on_forgotten};
}

/* The first node holding `hash`, NONE when no replica does. */
static uint32_t head_of(const cz_kvindex *x, uint64_t hash)
{
    return x->slot[probe(x, hash)];
}

uint32_t cz_kvindex_match(cz_kvindex *x, const uint64_t *h, uint32_t n, uint32_t lo,
                          uint32_t cnt, uint32_t *reps, uint32_t *lens)
{
    CZ_ASSERT((uint64_t)lo + cnt <= x->n_reps);
    if (n == 0)
        return 0;
    if (++x->gen == 0) { /* the stamps wrapped: none may look current */
        memset(x->stamp, 0, x->n_reps * sizeof *x->stamp);
        x->gen = 1;
    }
    uint32_t m = 0;
    for (uint32_t k = head_of(x, h[0]); k != NONE; k = x->node[k].next) {
        uint32_t r = x->node[k].rep;
        if (r - lo >= cnt)
            continue;
        CZ_ASSERT(x->stamp[r] != x->gen && m < cnt);
        x->stamp[r] = x->gen;
        x->len[r] = 1;
        reps[m++] = r;
    }
    /* block j extends the candidates that hold every block before it */
    bool extended = m > 0;
    for (uint32_t j = 1; j < n && extended; j++) {
        extended = false;
        for (uint32_t k = head_of(x, h[j]); k != NONE; k = x->node[k].next) {
            uint32_t r = x->node[k].rep;
            if (r - lo < cnt && x->stamp[r] == x->gen && x->len[r] == j) {
                x->len[r] = j + 1;
                extended = true;
            }
        }
    }
    for (uint32_t i = 0; i < m; i++)
        lens[i] = x->len[reps[i]];
    return m;
}

bool cz_kvindex_has(const cz_kvindex *x, uint32_t rep, uint64_t hash)
{
    for (uint32_t k = head_of(x, hash); k != NONE; k = x->node[k].next)
        if (x->node[k].rep == rep)
            return true;
    return false;
}

uint32_t cz_kvindex_held(const cz_kvindex *x, uint32_t rep)
{
    CZ_ASSERT(rep < x->n_reps);
    return x->held[rep];
}

bool cz_kvindex_check(const cz_kvindex *x, cz_err *err)
{
    uint32_t heads = 0, nodes = 0;
    uint32_t *count = cz_xcalloc(x->n_reps, sizeof *count);
    bool ok = false;
    for (uint32_t i = 0; i <= x->mask; i++) {
        uint32_t k = x->slot[i];
        if (k == NONE)
            continue;
        heads++;
        uint64_t hash = x->node[k].hash;
        if (probe(x, hash) != i) {
            cz_err_set(err, CZ_EINVAL, "slot %u (hash %016llx) is not where its probe ends", i,
                       (unsigned long long)hash);
            goto out;
        }
        for (uint32_t prev = NONE; k != NONE; prev = k, k = x->node[k].next) {
            const cz_kvindex_node *d = &x->node[k];
            if (d->hash != hash || d->prev != prev || d->rep >= x->n_reps ||
                nodes > x->n_node) {
                cz_err_set(err, CZ_EINVAL, "node %u: wrong hash, link or replica", k);
                goto out;
            }
            count[d->rep]++;
            nodes++;
        }
    }
    if (heads != x->n_hashes || nodes != x->n_node) {
        cz_err_set(err, CZ_EINVAL, "%u lists (counted %u), %u nodes (counted %u)", heads,
                   x->n_hashes, nodes, x->n_node);
        goto out;
    }
    for (uint32_t r = 0; r < x->n_reps; r++)
        if (count[r] != x->held[r]) {
            cz_err_set(err, CZ_EINVAL, "replica %u holds %u nodes, counted %u", r, count[r],
                       x->held[r]);
            goto out;
        }
    ok = true;
out:
    free(count);
    return ok;
}
