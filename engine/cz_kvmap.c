/* cz_kvmap.c - physical KV blocks following the core's accounting (cz_kvmap.h). */
#include "cz_kvmap.h"

#include <stdlib.h>
#include <string.h>

/* A sequence's holding: logical blocks [0, sink_hi) and [lo, hi). */
typedef struct kv_span {
    uint32_t sink_hi, lo, hi;
} kv_span;

typedef struct kv_seq {
    int32_t *tbl;      /* logical block -> physical, -1 when not held */
    uint32_t cap;      /* entries of tbl */
    uint32_t held;     /* physical blocks held */
    uint32_t inflight; /* tokens in the step in flight */
    kv_span span;      /* what it held after the last sync */
} kv_seq;

struct cz_kvmap {
    uint32_t blocks, capacity, bt, sinks, window;
    int32_t *free_ids;
    uint32_t n_free;
    uint64_t *fence;
    kv_seq *seqs;
    size_t n_seqs, cap_seqs;
};

cz_kvmap *cz_kvmap_create(uint32_t blocks, uint32_t reserve, uint32_t block_tokens,
                          uint32_t sinks, uint32_t window)
{
    CZ_ASSERT(block_tokens > 0 && blocks > 0 && (uint64_t)blocks + reserve <= INT32_MAX);
    cz_kvmap *m = cz_xcalloc(1, sizeof *m);
    m->blocks = blocks;
    m->capacity = blocks + reserve;
    m->bt = block_tokens;
    m->sinks = sinks;
    m->window = window;
    m->free_ids = cz_xmalloc(m->capacity * sizeof *m->free_ids);
    m->fence = cz_xcalloc(m->capacity, sizeof *m->fence);
    /* popped from the end: block 0 first */
    for (uint32_t i = 0; i < m->capacity; i++)
        m->free_ids[i] = (int32_t)(m->capacity - 1 - i);
    m->n_free = m->capacity;
    return m;
}

void cz_kvmap_free(cz_kvmap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_seqs; i++)
        free(m->seqs[i].tbl);
    free(m->seqs);
    free(m->free_ids);
    free(m->fence);
    free(m);
}

static void ensure_seq(cz_kvmap *m, uint32_t seq)
{
    if (seq < m->n_seqs)
        return;
    cz_grow((void **)&m->seqs, &m->cap_seqs, (size_t)seq + 1, sizeof *m->seqs);
    memset(m->seqs + m->n_seqs, 0, ((size_t)seq + 1 - m->n_seqs) * sizeof *m->seqs);
    m->n_seqs = (size_t)seq + 1;
}

void cz_kvmap_set_inflight(cz_kvmap *m, uint32_t seq, uint32_t tokens)
{
    ensure_seq(m, seq);
    m->seqs[seq].inflight = tokens;
}

/* The blocks a sequence with T tokens keeps (cz_kv_blocks_held's set). */
static kv_span kept(const cz_kvmap *m, uint64_t T)
{
    uint32_t all = (uint32_t)((T + m->bt - 1) / m->bt);
    kv_span s = {0, 0, all};
    if (m->window == 0 || T <= (uint64_t)m->sinks + m->window)
        return s;
    uint32_t sb = (m->sinks + m->bt - 1) / m->bt;
    uint32_t first = (uint32_t)((T - m->window) / m->bt);
    if (first < sb)
        return s;
    s.sink_hi = sb;
    s.lo = first;
    return s;
}

static uint32_t span_count(kv_span s)
{
    return s.sink_hi + (s.hi - s.lo);
}

static bool span_has(kv_span s, uint32_t j)
{
    return j < s.sink_hi || (j >= s.lo && j < s.hi);
}

/* What sequence q (state from the core) must hold now, and the core's count for it. */
static kv_span wanted(const cz_kvmap *m, const cz_seq *q, bool decoding, uint32_t inflight,
                      uint32_t *core)
{
    kv_span none = {0, 0, 0};
    if (inflight == 0) {
        *core = q->blocks;
        if (q->blocks == 0)
            return none;
        if (m->window == 0)
            return (kv_span){0, 0, q->blocks};
        kv_span s = kept(m, q->computed);
        /* a loading or preloading sequence holds blocks for KV not yet computed here */
        if (span_count(s) != q->blocks && s.sink_hi == 0)
            s.hi = q->blocks;
        return s;
    }
    /* in a step: prefill chunks hold their blocks in q->blocks; decode members' new
     * blocks are in the pool's count only */
    uint64_t T1 = (uint64_t)q->computed + inflight;
    *core = decoding ? cz_kv_blocks_held(T1, m->bt, m->sinks, m->window) : q->blocks;
    if (m->window == 0)
        return (kv_span){0, 0, *core};
    kv_span a = kept(m, q->computed), b = kept(m, T1);
    if (q->computed == 0 || a.sink_hi == 0)
        return (kv_span){0, 0, b.hi};
    return (kv_span){a.sink_hi, a.lo, b.hi};
}

void cz_kvmap_sync(cz_kvmap *m, cz_server *srv)
{
    uint32_t n = cz_server_n_seqs(srv);
    ensure_seq(m, n ? n - 1 : 0);
    uint64_t core_total = 0;
    /* pass 1: every sequence gives back what it no longer holds */
    for (uint32_t id = 0; id < n; id++) {
        kv_seq *k = &m->seqs[id];
        const cz_seq *q = cz_server_seq(srv, id);
        uint32_t core;
        kv_span w = wanted(m, q, cz_server_seq_decoding(srv, id), k->inflight, &core);
        core_total += core;
        CZ_ASSERT(k->inflight != 0 || span_count(w) == core);
        if (w.hi > k->cap) {
            uint32_t old = k->cap;
            size_t cap = k->cap;
            cz_grow((void **)&k->tbl, &cap, w.hi, sizeof *k->tbl);
            k->cap = (uint32_t)cap;
            for (uint32_t j = old; j < k->cap; j++)
                k->tbl[j] = -1;
        }
        if (k->held > 0 && (w.sink_hi != k->span.sink_hi || w.lo != k->span.lo ||
                            w.hi != k->span.hi)) {
            uint32_t top = k->span.hi < k->cap ? k->span.hi : k->cap;
            for (uint32_t j = 0; j < top; j++)
                if (k->tbl[j] >= 0 && !span_has(w, j)) {
                    m->free_ids[m->n_free++] = k->tbl[j];
                    k->tbl[j] = -1;
                    k->held--;
                }
        }
        k->span.sink_hi = w.sink_hi; /* pass 2 fills it */
        k->span.lo = w.lo;
        k->span.hi = w.hi;
    }
    CZ_ASSERT(core_total == cz_server_kv_used(srv));
    /* pass 2: every sequence takes what it lacks */
    uint32_t used = 0;
    for (uint32_t id = 0; id < n; id++) {
        kv_seq *k = &m->seqs[id];
        kv_span w = k->span;
        if (span_count(w) != k->held) {
            for (uint32_t j = 0; j < w.hi; j++) {
                if (!span_has(w, j) || k->tbl[j] >= 0)
                    continue;
                CZ_ASSERT(m->n_free > 0);
                k->tbl[j] = m->free_ids[--m->n_free];
                k->held++;
            }
        }
        CZ_ASSERT(k->held == span_count(w));
        used += k->held;
    }
    CZ_ASSERT(used + m->n_free == m->capacity);
    /* out of a step the pool holds exactly the core's count */
    CZ_ASSERT(used <= m->capacity && (m->window > 0 || used == core_total));
}

int32_t cz_kvmap_block(const cz_kvmap *m, uint32_t seq, uint32_t j)
{
    if (seq >= m->n_seqs || j >= m->seqs[seq].cap)
        return -1;
    return m->seqs[seq].tbl[j];
}

const int32_t *cz_kvmap_table(const cz_kvmap *m, uint32_t seq, uint32_t *n)
{
    if (seq >= m->n_seqs) {
        *n = 0;
        return NULL;
    }
    *n = m->seqs[seq].span.hi < m->seqs[seq].cap ? m->seqs[seq].span.hi : m->seqs[seq].cap;
    return m->seqs[seq].tbl;
}

uint32_t cz_kvmap_used(const cz_kvmap *m)
{
    return m->capacity - m->n_free;
}

uint32_t cz_kvmap_capacity(const cz_kvmap *m)
{
    return m->capacity;
}

void cz_kvmap_fence(cz_kvmap *m, int32_t b, uint64_t job)
{
    CZ_ASSERT(b >= 0 && (uint32_t)b < m->capacity);
    if (job > m->fence[b])
        m->fence[b] = job;
}

uint64_t cz_kvmap_fence_of(const cz_kvmap *m, int32_t b)
{
    CZ_ASSERT(b >= 0 && (uint32_t)b < m->capacity);
    return m->fence[b];
}
