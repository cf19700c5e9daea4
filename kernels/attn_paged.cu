/* attn_paged.cu - the CUDA twin of attn_paged.c: attention of a varlen batch (chunked
 * prefills and decodes together) over the paged KV cache, vLLM V1's interface, with
 * flash-decoding's split-KV for few long sequences (vLLM's paged attention v2).
 *
 * Launches, on the context's stream:
 *   1. cz__ka_attend<NT, DCH, true> (cz_kattn.cuh): grid (tile slots, kv_heads x head
 *      chunks, parts), NT = 64 or 128 threads. A block takes a tile of one sequence's
 *      query rows and the query heads of one GQA group (up to 16 queries), walks the keys
 *      they keep through the block table, and writes the output, or with parts > 1 its
 *      partition's partial result (m, l, unnormalised output) to the context's scratch.
 *   2. with parts > 1 only, cz__ka_merge: grid (n_seqs, heads), 128 threads: merges a
 *      (row, head)'s partitions into its output.
 * parts comes from host-known bounds only (cz__attn_partitions over max_blocks x
 * block_tokens, or window + sinks, and n_seqs x the grid's y extent), as the host does not
 * know seq_lens or qsl; the kernel splits only a batch of at most n_seqs rows (decodes),
 * the rows the scratch is sized for, and the merge then runs, else both ignore the
 * partitions. Partitions past a sequence's kept keys write an empty partial (m = -inf). */
#include <string.h>

#include "cz_kattn.cuh"

#define CZ__ATTN_PART_MIN 128u    /* keys a partition holds at least (4 steps of a block) */
#define CZ__ATTN_ITEMS_PER_SM 4u  /* work items per SM that keep the device busy without a
                                     split: about as many blocks as an SM runs at once (5
                                     to 7 of them fit, by registers, on sm_80 and sm_90) */
#define CZ__ATTN_MAX_PARTS 256u   /* partitions of one work item at most */
#define CZ__ATTN_SPLIT_SLOTS 256u /* (row, partition) partials per query head the scratch */
#define CZ__ATTN_SPLIT_DIM 128u   /* holds at this head_dim (wider heads get fewer) */

extern "C" uint32_t cz__attn_partitions(uint32_t max_ctx, uint32_t n_items, uint32_t sms)
{
    uint32_t by_len = max_ctx / CZ__ATTN_PART_MIN;
    uint64_t target = (uint64_t)CZ__ATTN_ITEMS_PER_SM * (sms ? sms : 1);
    if (by_len < 2 || n_items == 0 || n_items >= target)
        return 1;
    uint64_t p = (target + n_items - 1) / n_items;
    if (p > by_len)
        p = by_len;
    if (p > CZ__ATTN_MAX_PARTS)
        p = CZ__ATTN_MAX_PARTS;
    return (uint32_t)p;
}

/* The split partials: CZ__ATTN_SPLIT_SLOTS per query head of (CZ__ATTN_SPLIT_DIM + 2)
 * floats (output, m, l); none when no query attends over two partitions' worth. */
size_t cz__cuda_attn_scratch_bytes(const cz_kreserve *r)
{
    if (r->max_ctx < 2 * CZ__ATTN_PART_MIN)
        return 0;
    return (size_t)r->max_heads * CZ__ATTN_SPLIT_SLOTS * (CZ__ATTN_SPLIT_DIM + 2) * sizeof(float);
}

/* out for (row blockIdx.x, head blockIdx.y) from its partitions z: with M = max m_z,
 * sum_z e^(m_z - M) acc_z / sum_z e^(m_z - M) l_z; empty partitions (m_z = -inf) are
 * skipped, not weighted by 0 (their acc is not read). A batch the kernel did not split
 * (more rows than split_rows) is left alone. */
static __global__ void __launch_bounds__(128) cz__ka_merge(cz__ka_args a)
{
    __shared__ float wz[CZ__ATTN_MAX_PARTS];
    const int32_t row_base = a.qsl[0];
    const uint32_t rows = (uint32_t)(a.qsl[a.n_seqs] - row_base);
    const uint32_t r = blockIdx.x, h = blockIdx.y, parts = a.parts, hd = a.head_dim;
    if (rows > a.split_rows || r >= rows)
        return;
    const size_t slot = ((size_t)r * a.heads + h) * parts;
    float mx = -INFINITY;
    for (uint32_t zi = 0; zi < parts; zi++)
        mx = fmaxf(mx, a.pm[slot + zi]);
    for (uint32_t zi = threadIdx.x; zi < parts; zi += blockDim.x) {
        float mz = a.pm[slot + zi];
        wz[zi] = mz != -INFINITY ? expf(mz - mx) : 0.0f;
    }
    __syncthreads();
    float sum = 0.0f;
    for (uint32_t zi = 0; zi < parts; zi++)
        if (wz[zi] != 0.0f)
            sum += wz[zi] * a.pl[slot + zi];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float *o = a.out + (size_t)(row_base + (int32_t)r) * a.ld_o + (size_t)h * hd;
    for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t zi = 0; zi < parts; zi++)
            if (wz[zi] != 0.0f)
                acc = fmaf(wz[zi], a.pacc[(slot + zi) * hd + d], acc);
        o[d] = acc * inv;
    }
}

extern "C" void cz_cuda_attn_paged(cz_kctx *k, float *out, uint32_t ld_o, const float *q,
                                   uint32_t ld_q, const cz_kv_layer *kv, const int32_t *qsl,
                                   const int32_t *seq_lens, const int32_t *block_table,
                                   uint32_t max_blocks, uint32_t n_seqs, uint32_t heads,
                                   float scale, uint32_t window, uint32_t sinks)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(kv->kv_heads > 0 && heads % kv->kv_heads == 0);
    CZ_ASSERT(kv->head_dim > 0 && kv->head_dim <= CZ_KMAX_HEAD_DIM && kv->block_tokens > 0);
    if (!n_seqs)
        return;
    cz__ka_args a;
    memset(&a, 0, sizeof a);
    a.out = out;
    a.ld_o = ld_o;
    a.q = q;
    a.ld_q = ld_q;
    a.k = kv->k;
    a.v = kv->v;
    a.dt = kv->dt;
    a.block_stride = kv->block_stride;
    a.block_tokens = kv->block_tokens;
    a.max_blocks = max_blocks;
    a.qsl = qsl;
    a.seq_lens = seq_lens;
    a.bt = block_table;
    a.n_seqs = n_seqs;
    a.heads = heads;
    a.kv_heads = kv->kv_heads;
    a.head_dim = kv->head_dim;
    a.scale = scale;
    a.window = window;
    a.sinks = sinks;
    a.causal = true;
    a.parts = 1;
    a.kvec = cz__ka_vec_ok(kv->k, kv->v, kv->dt, kv->head_dim, kv->block_stride);
    uint32_t y = cz__ka_plan(&a);
    CZ_ASSERT(y <= 65535 && heads <= 65535);

    /* split-KV: the keys a query keeps are at most the table's positions, and with a
     * window at most window + sinks; the partials must fit the scratch for n_seqs rows */
    uint64_t ctx = (uint64_t)max_blocks * kv->block_tokens;
    if (window && (uint64_t)window + sinks < ctx)
        ctx = (uint64_t)window + sinks;
    uint64_t items = (uint64_t)n_seqs * y;
    uint32_t parts = cz__attn_partitions(ctx < UINT32_MAX ? (uint32_t)ctx : UINT32_MAX,
                                         items < UINT32_MAX ? (uint32_t)items : UINT32_MAX,
                                         c->sms);
    size_t fit = c->scratch_bytes / sizeof(float) /
                 ((size_t)n_seqs * heads * (kv->head_dim + 2));
    if (parts > fit)
        parts = (uint32_t)fit;
    if (parts > 1) {
        /* partitions of whole steps; the last takes whatever the bound missed */
        uint64_t len = (ctx + parts - 1) / parts;
        len = (len + CZ__KA_TK - 1) / CZ__KA_TK * CZ__KA_TK;
        a.parts = (uint32_t)((ctx + len - 1) / len);
        a.part_len = (uint32_t)len;
    }
    if (a.parts > 1) {
        size_t slots = (size_t)n_seqs * heads * a.parts;
        a.split_rows = n_seqs;
        a.pacc = (float *)c->scratch;
        a.pm = a.pacc + slots * kv->head_dim;
        a.pl = a.pm + slots;
    }
    dim3 grid(cz__ka_grid_x(c, n_seqs, y, a.rt), y, a.parts);
    cz__ka_launch<true>(c, grid, &a);
    if (a.parts > 1) {
        cz__ka_merge<<<dim3(n_seqs, heads), 128, 0, c->stream>>>(a);
        CZ_CUDA_LAUNCHED(c);
    }
}
