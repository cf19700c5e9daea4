/* attn_dense.cu - the CUDA twin of attn_dense.c: attention without a cache over a varlen
 * batch (encoders, vocoders' and talkers' windowed transformers), causal or not, with a
 * window; the same kernel as attn_paged.cu (cz_kattn.cuh) with keys read straight from
 * the float32 (rows, kv_heads, head_dim) K and V.
 *
 * One launch on the context's stream: cz__ka_attend<NT, DCH, false>, grid (tile slots,
 * kv_heads x head chunks, 1), NT = 64 or 128 threads; a block takes up to 16 queries (a
 * tile of one sequence's rows x the query heads of one GQA group), walks the keys any of
 * them keeps (lo .. hi of its sequence) and writes their outputs. No split-KV: a dense
 * batch's rows give the grid its size (a sequence attends over its own rows). */
#include <string.h>

#include "cz_kattn.cuh"

extern "C" void cz_cuda_attn_dense(cz_kctx *k, float *out, uint32_t ld_o, const float *q,
                                   uint32_t ld_q, const float *kk, const float *v,
                                   uint32_t ld_kv, const int32_t *cu, uint32_t n_seqs,
                                   uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                                   float scale, bool causal, uint32_t window)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(kv_heads > 0 && heads % kv_heads == 0);
    CZ_ASSERT(head_dim > 0 && head_dim <= CZ_KMAX_HEAD_DIM);
    if (!n_seqs)
        return;
    cz__ka_args a;
    memset(&a, 0, sizeof a);
    a.out = out;
    a.ld_o = ld_o;
    a.q = q;
    a.ld_q = ld_q;
    a.k = kk;
    a.v = v;
    a.dt = CZ_F32;
    a.ld_kv = ld_kv;
    a.qsl = cu;
    a.n_seqs = n_seqs;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = head_dim;
    a.kvec = cz__ka_vec_ok(kk, v, CZ_F32, head_dim, ld_kv);
    a.scale = scale;
    a.window = window;
    a.causal = causal;
    a.parts = 1;
    uint32_t y = cz__ka_plan(&a);
    CZ_ASSERT(y <= 65535);
    dim3 grid(cz__ka_grid_x(c, n_seqs, y, a.rt), y, 1);
    cz__ka_launch<false>(c, grid, &a);
}
