/* cz_kcuda_pending.cu - ops whose CUDA twin is not written yet: each asserts. Removed
 * from the build when the last twin lands. */
#include "cz_kcuda.h"

extern "C" void cz_cuda_embed(cz_kctx *k, float *out, const void *table, cz_dtype dt, const int32_t *ids,
                   uint32_t n, uint32_t dim)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_embed is not written yet");
}

extern "C" void cz_cuda_rmsnorm(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                     uint32_t rows, uint32_t dim)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_rmsnorm is not written yet");
}

extern "C" void cz_cuda_layernorm(cz_kctx *k, float *out, const float *x, const float *w, const float *b,
                       float eps, uint32_t rows, uint32_t dim)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_layernorm is not written yet");
}

extern "C" void cz_cuda_matmul(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                    const float *bias, uint32_t m, uint32_t n, uint32_t kd)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_matmul is not written yet");
}

extern "C" void cz_cuda_rope(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos, const float *inv_freq,
                  uint32_t n, uint32_t heads, uint32_t head_dim)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_rope is not written yet");
}

extern "C" void cz_cuda_silu_mul(cz_kctx *k, float *out, const float *gu, uint32_t n, uint32_t inter)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_silu_mul is not written yet");
}

extern "C" void cz_cuda_gelu(cz_kctx *k, float *x, size_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_gelu is not written yet");
}

extern "C" void cz_cuda_silu(cz_kctx *k, float *x, size_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_silu is not written yet");
}

extern "C" void cz_cuda_add(cz_kctx *k, float *out, const float *a, const float *b, size_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_add is not written yet");
}

extern "C" void cz_cuda_transpose(cz_kctx *k, float *out, const float *x, uint32_t rows, uint32_t cols)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_transpose is not written yet");
}

extern "C" void cz_cuda_gather_rows(cz_kctx *k, float *out, const float *x, const int32_t *idx, uint32_t n,
                         uint32_t dim)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_gather_rows is not written yet");
}

extern "C" void cz_cuda_kv_write(cz_kctx *k, const cz_kv_layer *kv, const float *knew, const float *vnew,
                      uint32_t ld, const int64_t *slots, uint32_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_kv_write is not written yet");
}

extern "C" void cz_cuda_copy_blocks(cz_kctx *k, void *dst, size_t dst_stride, const int32_t *dst_ids,
                         const void *src, size_t src_stride, const int32_t *src_ids,
                         size_t block_bytes, uint32_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_copy_blocks is not written yet");
}

extern "C" void cz_cuda_moe_ffn(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                     uint32_t n)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_moe_ffn is not written yet");
}

extern "C" void cz_cuda_conv1d(cz_kctx *k, float *out, const float *x, const float *w, const float *bias,
                    uint32_t cin, uint32_t cout, uint32_t len, uint32_t ksize, uint32_t stride,
                    uint32_t dilation, uint32_t pad_l, uint32_t pad_r, uint32_t groups)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_conv1d is not written yet");
}

extern "C" void cz_cuda_conv_transpose1d(cz_kctx *k, float *out, const float *x, const float *w,
                              const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                              uint32_t ksize, uint32_t stride, uint32_t pad_l, uint32_t pad_r)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_conv_transpose1d is not written yet");
}

extern "C" void cz_cuda_argmax(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                    uint32_t vocab)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_argmax is not written yet");
}

extern "C" void cz_cuda_sample(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                    uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                    uint64_t seed, const uint64_t *counter)
{
    (void)k;
    CZ_ASSERT(!"cz_cuda_sample is not written yet");
}

size_t cz__cuda_gemm_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}

size_t cz__cuda_moe_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}

size_t cz__cuda_sample_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}

size_t cz__cuda_conv_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}
