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
    float scale;
    uint32_t window, sinks;
    const int32_t *plan; /* (tiles, 3): sequence, first row, end row */
} ap_job;

/* Folds positions [lo, hi] of sequence b, KV head g, into the tile: CZ__ATT_KT positions
 * at a time, gathered from their blocks (and widened) into the thread's key and value
 * buffers, so a chunk spans blocks. */
static void fold_range(const ap_job *j, cz__attn_tile *a, uint32_t b, uint32_t g, int64_t lo,
                       int64_t hi)
{
    const cz_kv_layer *kv = j->kv;
    size_t es = cz_dtype_size(kv->dt), row = (size_t)kv->kv_heads * kv->head_dim;
    uint32_t hd = kv->head_dim;
    for (int64_t c0 = lo; c0 <= hi; c0 += CZ__ATT_KT) {
        uint32_t nc = hi - c0 + 1 < CZ__ATT_KT ? (uint32_t)(hi - c0 + 1) : CZ__ATT_KT;
        for (uint32_t i = 0; i < nc;) {
            int64_t t = c0 + i, blk = t / kv->block_tokens, off = t % kv->block_tokens;
            uint32_t run = kv->block_tokens - (uint32_t)off;
            if (run > nc - i)
                run = nc - i;
            CZ_ASSERT(blk < j->max_blocks);
            int32_t phys = j->bt[(size_t)b * j->max_blocks + (size_t)blk];
            CZ_ASSERT(phys >= 0);
            size_t at = ((size_t)phys * kv->block_stride + (size_t)off * row + (size_t)g * hd) * es;
            const char *kp = (const char *)kv->k + at, *vp = (const char *)kv->v + at;
            for (uint32_t r = 0; r < run; r++) {
                cz__widen(a->t->kw + (size_t)(i + r) * hd, kp + r * row * es, kv->dt, hd);
                cz__widen(a->t->vw + (size_t)(i + r) * hd, vp + r * row * es, kv->dt, hd);
            }
            i += run;
        }
        cz__attn_chunk(a, a->t->kw, a->t->vw, hd, c0, nc);
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
    uint32_t group = heads / kv->kv_heads;
    uint32_t hchunk = group < CZ__ATT_QT ? group : CZ__ATT_QT;
    uint32_t rows_per_tile = CZ__ATT_QT / hchunk;
    CZ_ASSERT((uint32_t)(qsl[n_seqs] - qsl[0]) <= k->res.max_rows);
    size_t tiles = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        CZ_ASSERT(qsl[s + 1] >= qsl[s] && seq_lens[s] >= qsl[s + 1] - qsl[s]);
        for (int32_t r0 = qsl[s]; r0 < qsl[s + 1]; r0 += (int32_t)rows_per_tile) {
            int32_t r1 = r0 + (int32_t)rows_per_tile;
            k->plan[tiles * 3] = (int32_t)s;
            k->plan[tiles * 3 + 1] = r0;
            k->plan[tiles * 3 + 2] = r1 < qsl[s + 1] ? r1 : qsl[s + 1];
            tiles++;
        }
    }
    ap_job j = {k, out, ld_o, q, ld_q, kv, qsl, seq_lens, block_table, max_blocks, heads, group,
                hchunk, (group + hchunk - 1) / hchunk, scale, window, sinks, k->plan};
    cz__kpar_dyn(k, tiles * kv->kv_heads * j.nhc, 1, ap_items, &j);
}

static void ap_items(void *p, size_t b, size_t e, uint32_t tid)
{
    const ap_job *j = p;
    uint32_t kvh = j->kv->kv_heads, hd = j->kv->head_dim;
    for (size_t it = b; it < e; it++) {
        size_t tile = it / ((size_t)kvh * j->nhc);
        uint32_t g = (uint32_t)(it / j->nhc % kvh);
        uint32_t h0 = (uint32_t)(it % j->nhc) * j->hchunk;
        uint32_t h1 = h0 + j->hchunk < j->group ? h0 + j->hchunk : j->group;
        uint32_t s = (uint32_t)j->plan[tile * 3];
        int32_t r0 = j->plan[tile * 3 + 1], r1 = j->plan[tile * 3 + 2];
        int64_t pos[CZ__ATT_QT];
        int64_t first = (int64_t)j->seq_lens[s] - (j->qsl[s + 1] - j->qsl[s]) + (r0 - j->qsl[s]);
        for (int32_t r = r0; r < r1; r++)
            pos[r - r0] = first + (r - r0);
        uint32_t h = g * j->group + h0;
        cz__attn_tile a = {&j->k->ts[tid], (uint32_t)(r1 - r0), h1 - h0, hd, pos, true,
                           j->window, j->sinks};
        cz__attn_begin(&a, j->q + (size_t)r0 * j->ld_q + (size_t)h * hd, j->ld_q, j->scale);
        int64_t pmin = pos[0], pmax = pos[r1 - r0 - 1];
        /* positions kept by some query of the tile: the sinks, then the window */
        int64_t sink_end = j->window ? (j->sinks < pmax + 1 ? j->sinks : pmax + 1) : pmax + 1;
        fold_range(j, &a, s, g, 0, sink_end - 1);
        if (j->window) {
            int64_t lo = pmin - j->window + 1;
            fold_range(j, &a, s, g, lo > sink_end ? lo : sink_end, pmax);
        }
        cz__attn_end(&a, j->out + (size_t)r0 * j->ld_o + (size_t)h * hd, j->ld_o);
    }
}
