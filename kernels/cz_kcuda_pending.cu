/* cz_kcuda_pending.cu - ops whose CUDA twin is not written yet: each asserts. Removed
 * from the build when the last twin lands. */
#include "cz_kcuda.h"

extern "C" void cz_cuda_attn_paged(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                        const cz_kv_layer *kv, const int32_t *qsl, const int32_t *seq_lens,
                        const int32_t *block_table, uint32_t max_blocks, uint32_t n_seqs,
                        uint32_t heads, float scale, uint32_t window, uint32_t sinks)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_attn_paged is not written yet");
}

extern "C" void cz_cuda_attn_dense(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                        const float *kk, const float *v, uint32_t ld_kv, const int32_t *cu,
                        uint32_t n_seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                        float scale, bool causal, uint32_t window)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_attn_dense is not written yet");
}

size_t cz__cuda_attn_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}
