/* kv_write.cu - a step's new K and V rows into their slots of the paged cache on CUDA
 * (contract: cz_kernels.h, kv_write; vLLM's reshape_and_cache), converted to the cache's
 * dtype with round to nearest even, bit for bit as cz_f32_to_bf16 / cz_f32_to_f16 (a NaN
 * stays a NaN with the CPU's bits). Launch: one block of up to 256 threads per token
 * (blocks stride over tokens past the grid), the threads striding over its kv_heads x
 * head_dim elements, K and V alike; a negative slot is skipped. kv is a host struct whose
 * k and v are device memory; knew, vnew and slots are device memory. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

/* Stores f at element i of p, of dtype dt. */
__device__ static inline void cz__kvw_st(void *p, cz_dtype dt, size_t i, float f)
{
    unsigned u = __float_as_uint(f);
    bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    if (dt == CZ_F32)
        ((float *)p)[i] = f;
    else if (dt == CZ_BF16)
        ((unsigned short *)p)[i] = nan ? (unsigned short)((u >> 16) | 0x40)
                                       : __bfloat16_as_ushort(__float2bfloat16_rn(f));
    else
        ((unsigned short *)p)[i] = nan ? (unsigned short)(((u >> 16) & 0x8000) | 0x7e00)
                                       : __half_as_ushort(__float2half_rn(f));
}

static __global__ void cz__k_kv_write(cz_kv_layer kv, const float *knew, const float *vnew,
                                      uint32_t ld, const int64_t *slots, uint32_t n)
{
    uint32_t row = kv.kv_heads * kv.head_dim;
    for (uint32_t t = blockIdx.x; t < n; t += gridDim.x) {
        int64_t s = slots[t];
        if (s < 0)
            continue;
        size_t blk = (size_t)s / kv.block_tokens, off = (size_t)s % kv.block_tokens;
        size_t at = blk * kv.block_stride + off * row;
        const float *kr = knew + (size_t)t * ld, *vr = vnew + (size_t)t * ld;
        for (uint32_t i = threadIdx.x; i < row; i += blockDim.x) {
            cz__kvw_st(kv.k, kv.dt, at + i, kr[i]);
            cz__kvw_st(kv.v, kv.dt, at + i, vr[i]);
        }
    }
}

extern "C" void cz_cuda_kv_write(cz_kctx *k, const cz_kv_layer *kv, const float *knew,
                                 const float *vnew, uint32_t ld, const int64_t *slots, uint32_t n)
{
    cz__kcuda *c = cz__cu(k);
    size_t row = (size_t)kv->kv_heads * kv->head_dim;
    CZ_ASSERT(kv->block_tokens > 0);
    if (!n || !row)
        return;
    unsigned grid = n < 65535u ? n : 65535u;
    cz__k_kv_write<<<grid, cz__cuda_row_threads(row, 256), 0, c->stream>>>(*kv, knew, vnew, ld,
                                                                            slots, n);
    CZ_CUDA_LAUNCHED(c);
}
