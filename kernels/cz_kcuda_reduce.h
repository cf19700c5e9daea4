/* cz_kcuda_reduce.h - warp and block reductions of the CUDA ops (device code only): sums
 * and maxima of floats by warp shuffles, then one shared-memory slot per warp. Every lane
 * of a warp, and every thread of a block, gets the same bits (a butterfly adds x + y on
 * one lane and y + x on its partner, which IEEE makes equal), so a result is a function
 * of the inputs and the block size only: deterministic. */
#ifndef CZ_KCUDA_REDUCE_H
#define CZ_KCUDA_REDUCE_H

#ifdef __CUDACC__

#define CZ__FULL_WARP 0xffffffffu

__device__ static inline float cz__warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(CZ__FULL_WARP, v, o);
    return v;
}

__device__ static inline float cz__warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(CZ__FULL_WARP, v, o));
    return v;
}

/* The sum (max false) or maximum (max true) of v over the block, returned to every
 * thread. blockDim.x is a multiple of 32, at most 1024; sh holds 32 floats of shared
 * memory, free again when this returns (it ends on a barrier); every thread of the block
 * calls it. */
__device__ static inline float cz__block_reduce(float v, float *sh, bool max)
{
    unsigned lane = threadIdx.x % 32, nw = blockDim.x / 32;
    v = max ? cz__warp_max(v) : cz__warp_sum(v);
    if (lane == 0)
        sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (max ? -INFINITY : 0.0f);
    v = max ? cz__warp_max(v) : cz__warp_sum(v);
    __syncthreads();
    return v;
}

__device__ static inline float cz__block_sum(float v, float *sh)
{
    return cz__block_reduce(v, sh, false);
}

__device__ static inline float cz__block_max(float v, float *sh)
{
    return cz__block_reduce(v, sh, true);
}

/* Threads for one block per row of `dim` elements: dim rounded up to a warp, within
 * [32, cap]. */
static inline unsigned cz__cuda_row_threads(size_t dim, unsigned cap)
{
    size_t t = (dim + 31) / 32 * 32;
    return t < 32 ? 32u : (t > cap ? cap : (unsigned)t);
}

#endif

#endif
