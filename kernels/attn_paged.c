/* attn_paged.c - attention of a varlen batch (chunked prefills and decodes together)
 * over the paged KV cache, vLLM V1's interface (query_start_loc, seq_lens, block table).
 *
 * Work items are (tile of a sequence's query rows, KV head, chunk of that head's query
 * heads): the query heads sharing a KV head (GQA) and up to CZ__ATT_QT / group query
 * rows share one pass over the keys, so a decode reads each KV block once per KV head.
 * Blocks are read in position order, only those holding a position some query of the
 * tile keeps (the sinks and the window), gathered CZ__ATT_KT positions at a time across
 * blocks into the thread's buffers (16-bit KV widened on the way). Items are handed out
 * dynamically (their costs differ with their sequence's length). */
#include "cz_kernels_cpu.h"

typedef struct {
    cz_kctx *k;
    float *out;
    uint32_t ld_o;
    const float *q;
    uint32_t ld_q;
    const cz_kv_layer *kv;
    const int32_t *qsl, *seq_lens, *bt;
    uint32_t max_blocks, heads, group, hchunk, nhc;
    uint32_t nkv;        /* KV heads per item of a one-row tile */
    size_t tiles;
    float scale;
    uint32_t window, sinks;
    const int32_t *plan; /* (tiles, 4): sequence, first row, end row, first item */
} ap_job;

/* Byte offset of position t's row, from KV head g on, in sequence b's blocks (K and V
 * alike). */
static size_t row_at(const ap_job *j, uint32_t b, uint32_t g, int64_t t)
{
    const cz_kv_layer *kv = j->kv;
    int64_t blk = t / kv->block_tokens, off = t % kv->block_tokens;
    CZ_ASSERT(blk < j->max_blocks);
    int32_t phys = j->bt[(size_t)b * j->max_blocks + (size_t)blk];
    CZ_ASSERT(phys >= 0);
    return ((size_t)phys * kv->block_stride + (size_t)off * kv->kv_heads * kv->head_dim +
            (size_t)g * kv->head_dim) * cz_dtype_size(kv->dt);
}

/* Folds positions [lo, hi] of sequence b, KV heads [g, g + nkv), into the tile: chunks of
 * positions gathered from their blocks (and widened) into the thread's key and value
 * buffers, each position's nkv heads side by side, so a chunk spans blocks. The next
 * chunk's rows are prefetched first (its blocks are anywhere in the pool). */
static void fold_range(const ap_job *j, cz__attn_tile *a, uint32_t b, uint32_t g, uint32_t nkv,
                       int64_t lo, int64_t hi)
{
    const cz_kv_layer *kv = j->kv;
    size_t w = (size_t)nkv * kv->head_dim;
    uint32_t chunk = (uint32_t)((size_t)CZ__ATT_KT * CZ_KMAX_HEAD_DIM / w);
    if (chunk > CZ__ATT_KT)
        chunk = CZ__ATT_KT;
    const char *kb = kv->k, *vb = kv->v;
    size_t bytes = w * cz_dtype_size(kv->dt);
    for (int64_t c0 = lo; c0 <= hi; c0 += chunk) {
        uint32_t nc = hi - c0 + 1 < chunk ? (uint32_t)(hi - c0 + 1) : chunk;
        for (int64_t t = c0 + chunk; t <= hi && t < c0 + 2 * chunk; t++) {
            size_t at = row_at(j, b, g, t);
            for (size_t l = 0; l < bytes; l += 64) {
                __builtin_prefetch(kb + at + l);
                __builtin_prefetch(vb + at + l);
            }
        }
        for (uint32_t i = 0; i < nc; i++) {
            size_t at = row_at(j, b, g, c0 + i);
            cz__widen_fast(a->t->kw + i * w, kb + at, kv->dt, w, a->avx2);
            cz__widen_fast(a->t->vw + i * w, vb + at, kv->dt, w, a->avx2);
        }
        cz__attn_chunk(a, a->t->kw, a->t->vw, w, c0, nc);
    }
}

static void ap_items(void *p, size_t b, size_t e, uint32_t tid);

void cz_cpu_attn_paged(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const cz_kv_layer *kv, const int32_t *qsl, const int32_t *seq_lens,
                       const int32_t *block_table, uint32_t max_blocks, uint32_t n_seqs,
                       uint32_t heads, float scale, uint32_t window, uint32_t sinks)
{
    CZ_ASSERT(kv->kv_heads > 0 && heads % kv->kv_heads == 0);
    CZ_ASSERT(kv->head_dim <= CZ_KMAX_HEAD_DIM);
    if (!n_seqs)
        return;
    uint32_t kvh = kv->kv_heads, group = heads / kvh;
    uint32_t hchunk = group < CZ__ATT_QT ? group : CZ__ATT_QT;
    uint32_t nhc = (group + hchunk - 1) / hchunk, rows_per_tile = CZ__ATT_QT / hchunk;
    CZ_ASSERT((uint32_t)(qsl[n_seqs] - qsl[0]) <= k->res.max_rows);
    size_t tiles = 0, single = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        CZ_ASSERT(qsl[s + 1] >= qsl[s] && seq_lens[s] >= qsl[s + 1] - qsl[s]);
        for (int32_t r0 = qsl[s]; r0 < qsl[s + 1]; r0 += (int32_t)rows_per_tile) {
            int32_t r1 = r0 + (int32_t)rows_per_tile;
            k->plan[tiles * 4] = (int32_t)s;
            k->plan[tiles * 4 + 1] = r0;
            k->plan[tiles * 4 + 2] = r1 < qsl[s + 1] ? r1 : qsl[s + 1];
            single += k->plan[tiles * 4 + 2] - r0 == 1;
            tiles++;
        }
    }
    /* KV heads per item of a one-row tile: as many whole groups as the tile holds, halved
     * while the items would not give every thread two */
    uint32_t nkv = group <= CZ__ATT_QT ? CZ__ATT_QT / group : 1;
    if (nkv > kvh)
        nkv = kvh;
    while (nkv > 1 && (tiles - single) * kvh * nhc + single * ((kvh + nkv - 1) / nkv) <
                          2 * (size_t)k->threads)
        nkv /= 2;
    size_t items = 0;
    for (size_t t = 0; t < tiles; t++) {
        k->plan[t * 4 + 3] = (int32_t)items;
        bool one = k->plan[t * 4 + 2] - k->plan[t * 4 + 1] == 1 && nkv > 1;
        items += one ? (kvh + nkv - 1) / nkv : (size_t)kvh * nhc;
    }
    ap_job j = {k, out, ld_o, q, ld_q, kv, qsl, seq_lens, block_table, max_blocks, heads, group,
                hchunk, nhc, nkv, tiles, scale, window, sinks, k->plan};
    cz__kpar_dyn(k, items, 1, ap_items, &j);
}

static void ap_items(void *p, size_t b, size_t e, uint32_t tid)
{
    const ap_job *j = p;
    uint32_t kvh = j->kv->kv_heads, hd = j->kv->head_dim;
    size_t tile = 0;
    for (size_t it = b; it < e; it++) {
        /* the tile holding item it: the last whose first item is at most it */
        size_t ta = tile, tb = j->tiles;
        while (tb - ta > 1) {
            size_t mid = (ta + tb) / 2;
            if ((size_t)j->plan[mid * 4 + 3] <= it)
                ta = mid;
            else
                tb = mid;
        }
        tile = ta;
        uint32_t s = (uint32_t)j->plan[tile * 4], local = (uint32_t)(it - (size_t)j->plan[tile * 4 + 3]);
        int32_t r0 = j->plan[tile * 4 + 1], r1 = j->plan[tile * 4 + 2];
        /* its KV heads [g, g + nkv) and query heads [h, h + nh) */
        uint32_t g, nkv, h, nh;
        if (r1 - r0 == 1 && j->nkv > 1) {
            g = local * j->nkv;
            nkv = g + j->nkv < kvh ? j->nkv : kvh - g;
            h = g * j->group;
            nh = nkv * j->group;
        } else {
            g = local / j->nhc;
            nkv = 1;
            uint32_t h0 = local % j->nhc * j->hchunk;
            h = g * j->group + h0;
            nh = h0 + j->hchunk < j->group ? j->hchunk : j->group - h0;
        }
        int64_t pos[CZ__ATT_QT];
        int64_t first = (int64_t)j->seq_lens[s] - (j->qsl[s + 1] - j->qsl[s]) + (r0 - j->qsl[s]);
        for (int32_t r = r0; r < r1; r++)
            pos[r - r0] = first + (r - r0);
        cz__attn_tile a = {&j->k->ts[tid], (uint32_t)(r1 - r0), nh, hd, j->group, h % j->group,
                           pos, true, j->window, j->sinks, j->k->avx2};
        cz__attn_begin(&a, j->q + (size_t)r0 * j->ld_q + (size_t)h * hd, j->ld_q, j->scale);
        int64_t pmin = pos[0], pmax = pos[r1 - r0 - 1];
        /* positions kept by some query of the tile: the sinks, then the window */
        int64_t sink_end = j->window ? (j->sinks < pmax + 1 ? j->sinks : pmax + 1) : pmax + 1;
        fold_range(j, &a, s, g, nkv, 0, sink_end - 1);
        if (j->window) {
            int64_t lo = pmin - j->window + 1;
            fold_range(j, &a, s, g, nkv, lo > sink_end ? lo : sink_end, pmax);
        }
        cz__attn_end(&a, j->out + (size_t)r0 * j->ld_o + (size_t)h * hd, j->ld_o);
    }
}
