/* attn_dense.c - attention without a cache over a varlen batch (encoders, vocoders' and
 * talkers' windowed transformers): the same tiles and online softmax as attn_paged,
 * with keys read straight from the (rows, kv_heads, head_dim) K and V. */
#include "cz_kernels_cpu.h"

typedef struct {
    cz_kctx *k;
    float *out;
    uint32_t ld_o;
    const float *q;
    uint32_t ld_q;
    const float *kk, *v;
    uint32_t ld_kv;
    const int32_t *cu;
    uint32_t kv_heads, hd, group, hchunk, nhc;
    float scale;
    bool causal;
    uint32_t window;
    const int32_t *plan;
} ad_job;

static void ad_items(void *p, size_t b, size_t e, uint32_t tid)
{
    const ad_job *j = p;
    for (size_t it = b; it < e; it++) {
        size_t tile = it / ((size_t)j->kv_heads * j->nhc);
        uint32_t g = (uint32_t)(it / j->nhc % j->kv_heads);
        uint32_t h0 = (uint32_t)(it % j->nhc) * j->hchunk;
        uint32_t h1 = h0 + j->hchunk < j->group ? h0 + j->hchunk : j->group;
        uint32_t s = (uint32_t)j->plan[tile * 4];
        int32_t r0 = j->plan[tile * 4 + 1], r1 = j->plan[tile * 4 + 2], base = j->cu[s];
        int64_t len = j->cu[s + 1] - base, pos[CZ__ATT_QT];
        for (int32_t r = r0; r < r1; r++)
            pos[r - r0] = r - base;
        uint32_t h = g * j->group + h0;
        cz__attn_tile a = {&j->k->ts[tid], (uint32_t)(r1 - r0), h1 - h0, j->hd, j->group, h0,
                           pos, j->causal, j->window, 0, j->k->avx2};
        cz__attn_begin(&a, j->q + (size_t)r0 * j->ld_q + (size_t)h * j->hd, j->ld_q, j->scale);
        int64_t pmin = pos[0], pmax = pos[r1 - r0 - 1];
        int64_t lo = j->window ? pmin - j->window + 1 : 0;
        int64_t hi = j->causal ? pmax : j->window ? pmax + j->window - 1 : len - 1;
        if (lo < 0)
            lo = 0;
        if (hi > len - 1)
            hi = len - 1;
        const float *kb = j->kk + (size_t)base * j->ld_kv + (size_t)g * j->hd;
        const float *vb = j->v + (size_t)base * j->ld_kv + (size_t)g * j->hd;
        for (int64_t t0 = lo; t0 <= hi; t0 += CZ__ATT_KT) {
            uint32_t nt = hi - t0 + 1 < CZ__ATT_KT ? (uint32_t)(hi - t0 + 1) : CZ__ATT_KT;
            cz__attn_chunk(&a, kb + (size_t)t0 * j->ld_kv, vb + (size_t)t0 * j->ld_kv, j->ld_kv,
                           t0, nt);
        }
        cz__attn_end(&a, j->out + (size_t)r0 * j->ld_o + (size_t)h * j->hd, j->ld_o);
    }
}

void cz_cpu_attn_dense(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const float *kk, const float *v, uint32_t ld_kv, const int32_t *cu,
                       uint32_t n_seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                       float scale, bool causal, uint32_t window)
{
    CZ_ASSERT(kv_heads > 0 && heads % kv_heads == 0 && head_dim <= CZ_KMAX_HEAD_DIM);
    if (!n_seqs)
        return;
    uint32_t group = heads / kv_heads;
    uint32_t hchunk = group < CZ__ATT_QT ? group : CZ__ATT_QT;
    uint32_t rows_per_tile = CZ__ATT_QT / hchunk;
    CZ_ASSERT((uint32_t)(cu[n_seqs] - cu[0]) <= k->res.max_rows);
    size_t tiles = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        CZ_ASSERT(cu[s + 1] >= cu[s]);
        for (int32_t r0 = cu[s]; r0 < cu[s + 1]; r0 += (int32_t)rows_per_tile) {
            int32_t r1 = r0 + (int32_t)rows_per_tile;
            k->plan[tiles * 4] = (int32_t)s;
            k->plan[tiles * 4 + 1] = r0;
            k->plan[tiles * 4 + 2] = r1 < cu[s + 1] ? r1 : cu[s + 1];
            k->plan[tiles * 4 + 3] = (int32_t)(tiles * kv_heads * ((group + hchunk - 1) / hchunk));
            tiles++;
        }
    }
    ad_job j = {k, out, ld_o, q, ld_q, kk, v, ld_kv, cu, kv_heads, head_dim, group, hchunk,
                (group + hchunk - 1) / hchunk, scale, causal, window, k->plan};
    cz__kpar_dyn(k, tiles * kv_heads * j.nhc, 1, ad_items, &j);
}
