/* argmax.cu - greedy decoding on CUDA (contract: cz_kernels.h, argmax): ids[b] = the
 * lowest id holding the maximum of logits row b, -1 when the row holds NaN or +inf, as the
 * CPU twin. Launch: one block of up to 1024 threads per
 * row (blocks stride over rows past the grid): each thread scans a strided share, then
 * (value, id) pairs meet by warp shuffles and shared memory under one order (larger
 * value, then lower id), which makes the result independent of the reduction's shape.
 * ids and logits are device memory. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

/* Whether (v, i) beats (bv, bi): not NaN, and larger or equal with a lower id; a NaN
 * best (nothing yet) is beaten by any number. */
__device__ static inline bool cz__am_better(float v, uint32_t i, float bv, uint32_t bi)
{
    return !isnan(v) && (isnan(bv) || v > bv || (v == bv && i < bi));
}

__device__ static inline void cz__am_warp(float *v, uint32_t *i)
{
    for (int o = 16; o > 0; o /= 2) {
        float ov = __shfl_xor_sync(CZ__FULL_WARP, *v, o);
        uint32_t oi = __shfl_xor_sync(CZ__FULL_WARP, *i, o);
        if (cz__am_better(ov, oi, *v, *i)) {
            *v = ov;
            *i = oi;
        }
    }
}

static __global__ void cz__k_argmax(int32_t *ids, const float *logits, uint32_t rows,
                                    uint32_t vocab)
{
    __shared__ float sv[32];
    __shared__ uint32_t si[32];
    unsigned lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *l = logits + (size_t)r * vocab;
        float bv = NAN;
        uint32_t bi = UINT32_MAX;
        int bad = 0;
        for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
            bad |= !(l[i] < INFINITY); /* NaN or +inf; -inf is a masked id */
            if (cz__am_better(l[i], i, bv, bi)) {
                bv = l[i];
                bi = i;
            }
        }
        bad = __syncthreads_or(bad);
        cz__am_warp(&bv, &bi);
        if (lane == 0) {
            sv[threadIdx.x / 32] = bv;
            si[threadIdx.x / 32] = bi;
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            bv = lane < nw ? sv[lane] : NAN;
            bi = lane < nw ? si[lane] : UINT32_MAX;
            cz__am_warp(&bv, &bi);
            if (threadIdx.x == 0)
                ids[r] = bad || bi == UINT32_MAX ? -1 : (int32_t)bi;
        }
        __syncthreads();
    }
}

extern "C" void cz_cuda_argmax(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                               uint32_t vocab)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(vocab > 0);
    if (!rows)
        return;
    unsigned grid = rows < 65535u ? rows : 65535u;
    cz__k_argmax<<<grid, cz__cuda_row_threads(vocab, 1024), 0, c->stream>>>(ids, logits, rows,
                                                                             vocab);
    CZ_CUDA_LAUNCHED(c);
}
