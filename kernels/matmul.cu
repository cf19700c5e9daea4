/* matmul.cu - the CUDA twin of matmul.c: out (m, n) = x (m, kd) . w^T + bias for w (n, kd)
 * of float32, bfloat16 or float16, row-major, on the context's stream.
 *
 * Three paths (cz__cuda_gemm, which moe_ffn.cu calls with its own scratch):
 * - float32 weights: cublasSgemm in full float32 (the handle's math mode is the default,
 *   no TF32), row-major through the column-major transpose: out^T (n, m) = w (n, kd) .
 *   x^T, i.e. Sgemm(T, N, n, m, kd, w, ld kd, x, ld kd, out, ld n).
 * - 16-bit weights, m <= CZ__GEMV_MAX_M (decode, small MoE groups): cz__k_gemv16, a
 *   bandwidth-bound GEMV reading each weight row once for all m rows of x with 16-byte
 *   loads, widening in registers and accumulating in float32 against float32 x, so its
 *   accuracy is the CPU's (float32 sums, another order). Launch: blocks of
 *   CZ__GEMV_WARPS warps, one warp per row of w (output column), ceil(n / CZ__GEMV_WARPS)
 *   blocks; bias fused.
 * - 16-bit weights, larger m (prefill): x is rounded to the weight's type (round to
 *   nearest even) into scratch by cz__k_narrow, a chunk of rows at a time when the
 *   scratch cannot hold them all, then cublasGemmEx with A and B in CUDA_R_16BF (or
 *   CUDA_R_16F), C in CUDA_R_32F, CUBLAS_COMPUTE_32F: 16-bit products with float32
 *   accumulation on the tensor cores. Rounding the activations costs accuracy the CPU
 *   (which widens the weights and keeps x in float32) does not lose: up to 2^-9 relative
 *   error per product for bf16 (an NMSE of about 2.5e-6 against the CPU), 2^-12 for f16
 *   (about 4e-8; f16 also caps |x| at 65504); tests/test_cuda_gemm.c holds the
 *   tolerances.
 * The bias of the cuBLAS paths is added by cz__k_bias (one thread per output element). */
#include <limits.h>
#include <stdint.h>

#include "cz_kcuda.h"

/* Largest m served by the GEMV kernel (its accumulators per lane). */
#define CZ__GEMV_MAX_M CZ__CUDA_GEMV_MAX_M
/* Most bytes of scratch the GemmEx path's 16-bit copy of x asks of the reserve: rows go
 * through it a chunk at a time (2048 rows at kd = 8192). */
#define CZ__GEMM_XS_CAP_BYTES ((size_t)32 << 20)
/* Warps per block of the GEMV kernel. */
#define CZ__GEMV_WARPS 8u
/* Threads per block of the element-wise kernels. */
#define CZ__MM_THREADS 256u

/* xs[i] = x[i] rounded to nearest even in bf16 (CZ_BF16) or f16 (CZ_F16), i < count;
 * grid-stride, one element per thread per step. */
static __global__ void cz__k_narrow(unsigned short *xs, const float *x, cz_dtype dt,
                                    size_t count)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        xs[i] = dt == CZ_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i]))
                              : __half_as_ushort(__float2half_rn(x[i]));
}

/* out (m, n) += bias broadcast over rows; grid-stride over the m x n elements. */
static __global__ void cz__k_bias(float *out, const float *bias, uint32_t n, size_t count)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        out[i] += bias[i % n];
}

/* f[0..8) = the eight 16-bit weights packed in q (little-endian: element 2j in the low
 * half of word j), widened to float32. */
__device__ static __forceinline__ void cz__widen8(uint4 q, cz_dtype dt, float *f)
{
    unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (dt == CZ_BF16) {
            f[2 * j] = __uint_as_float(u[j] << 16);
            f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
        } else {
            f[2 * j] = __half2float(__ushort_as_half((unsigned short)(u[j] & 0xffffu)));
            f[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(u[j] >> 16)));
        }
    }
}

/* One warp: out[r][row] = w[row] . x[r] + bias[row] for r < m (m <= CZ__GEMV_MAX_M).
 * Lane j takes the 8-element chunks j, j + 32, ... of the row when `vec` (kd a multiple
 * of 8, w and x 16-byte aligned), then the elements left one at a time; the lanes' sums
 * meet in a butterfly. Inlined with a constant dt. */
__device__ static __forceinline__ void cz__gemv_row(float *out, const float *x, const void *w,
                                                    cz_dtype dt, const float *bias, uint32_t m,
                                                    uint32_t n, uint32_t kd, uint32_t row,
                                                    bool vec)
{
    const unsigned short *wr = (const unsigned short *)w + (size_t)row * kd;
    unsigned lane = threadIdx.x & 31u;
    float acc[CZ__GEMV_MAX_M];
#pragma unroll
    for (uint32_t r = 0; r < CZ__GEMV_MAX_M; r++)
        acc[r] = 0.0f;
    uint32_t done = 0;
    if (vec) {
        uint32_t chunks = kd / 8;
        const uint4 *wv = (const uint4 *)wr;
#pragma unroll 4
        for (uint32_t j = lane; j < chunks; j += 32) {
            float f[8];
            cz__widen8(__ldcs(wv + j), dt, f);
#pragma unroll
            for (uint32_t r = 0; r < CZ__GEMV_MAX_M; r++) {
                if (r < m) {
                    const float4 *xv = (const float4 *)(x + (size_t)r * kd) + 2 * (size_t)j;
                    float4 a = __ldg(xv), b = __ldg(xv + 1);
                    float s = acc[r];
                    s = fmaf(f[0], a.x, s);
                    s = fmaf(f[1], a.y, s);
                    s = fmaf(f[2], a.z, s);
                    s = fmaf(f[3], a.w, s);
                    s = fmaf(f[4], b.x, s);
                    s = fmaf(f[5], b.y, s);
                    s = fmaf(f[6], b.z, s);
                    s = fmaf(f[7], b.w, s);
                    acc[r] = s;
                }
            }
        }
        done = chunks * 8;
    }
    for (uint32_t i = done + lane; i < kd; i += 32) {
        float wi = cz__cuda_ld(wr, dt, i);
#pragma unroll
        for (uint32_t r = 0; r < CZ__GEMV_MAX_M; r++)
            if (r < m)
                acc[r] = fmaf(wi, __ldg(x + (size_t)r * kd + i), acc[r]);
    }
#pragma unroll
    for (uint32_t r = 0; r < CZ__GEMV_MAX_M; r++) {
        if (r < m) {
            float s = acc[r];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, off);
            if (lane == 0)
                out[(size_t)r * n + row] = s + (bias ? bias[row] : 0.0f);
        }
    }
}

/* The GEMV for 16-bit weights: warp w of block b computes output column
 * b x CZ__GEMV_WARPS + w for all m rows (whole warps exit together past n, so the
 * butterfly always has 32 lanes). */
static __global__ void cz__k_gemv16(float *out, const float *x, const void *w, cz_dtype dt,
                                    const float *bias, uint32_t m, uint32_t n, uint32_t kd,
                                    bool vec)
{
    uint32_t row = blockIdx.x * CZ__GEMV_WARPS + threadIdx.x / 32u;
    if (row >= n)
        return;
    if (dt == CZ_BF16)
        cz__gemv_row(out, x, w, CZ_BF16, bias, m, n, kd, row, vec);
    else
        cz__gemv_row(out, x, w, CZ_F16, bias, m, n, kd, row, vec);
}

extern "C" void cz__cuda_gemm(cz__kcuda *c, float *out, const float *x, const void *w,
                              cz_dtype dt, const float *bias, uint32_t m, uint32_t n,
                              uint32_t kd, void *xs, size_t xs_bytes)
{
    if (!m || !n)
        return;
    CZ_ASSERT(m <= INT_MAX && n <= INT_MAX && kd <= INT_MAX);
    const float one = 1.0f, zero = 0.0f;
    if (!kd) {
        CZ_CUDA_CHECK(c, cudaMemsetAsync(out, 0, (size_t)m * n * sizeof(float), c->stream));
    } else if (dt != CZ_F32 && m <= CZ__GEMV_MAX_M) {
        bool vec = kd % 8 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)x % 16 == 0;
        unsigned blocks = (n + CZ__GEMV_WARPS - 1) / CZ__GEMV_WARPS;
        cz__k_gemv16<<<blocks, CZ__GEMV_WARPS * 32, 0, c->stream>>>(out, x, w, dt, bias, m, n,
                                                                    kd, vec);
        CZ_CUDA_LAUNCHED(c);
        return;
    } else if (dt == CZ_F32) {
        CZ_CUBLAS_CHECK(c, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)kd,
                                       &one, (const float *)w, (int)kd, x, (int)kd, &zero, out,
                                       (int)n));
    } else {
        /* rows [r0, r0 + mc) of x narrowed into xs, then their rows of out */
        size_t chunk = xs_bytes / ((size_t)kd * 2);
        CZ_ASSERT(xs && chunk >= 1);
        cudaDataType t = dt == CZ_BF16 ? CUDA_R_16BF : CUDA_R_16F;
        for (uint32_t r0 = 0; r0 < m; r0 += (uint32_t)chunk) {
            uint32_t mc = m - r0 < chunk ? m - r0 : (uint32_t)chunk;
            size_t count = (size_t)mc * kd;
            cz__k_narrow<<<cz__cuda_blocks(count, CZ__MM_THREADS), CZ__MM_THREADS, 0,
                           c->stream>>>((unsigned short *)xs, x + (size_t)r0 * kd, dt, count);
            CZ_CUDA_LAUNCHED(c);
            CZ_CUBLAS_CHECK(c, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)mc,
                                            (int)kd, &one, w, t, (int)kd, xs, t, (int)kd, &zero,
                                            out + (size_t)r0 * n, CUDA_R_32F, (int)n,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
    if (bias) {
        size_t count = (size_t)m * n;
        cz__k_bias<<<cz__cuda_blocks(count, CZ__MM_THREADS), CZ__MM_THREADS, 0, c->stream>>>(
            out, bias, n, count);
        CZ_CUDA_LAUNCHED(c);
    }
}

extern "C" void cz_cuda_matmul(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                               const float *bias, uint32_t m, uint32_t n, uint32_t kd)
{
    cz__kcuda *c = cz__cu(k);
    cz__cuda_gemm(c, out, x, w, dt, bias, m, n, kd, c->scratch, c->scratch_bytes);
}

/* The GemmEx path's 16-bit copy of x: (max_rows, max_dim) elements of 2 bytes, capped
 * (larger inputs go through it in chunks of rows). */
size_t cz__cuda_gemm_scratch_bytes(const cz_kreserve *r)
{
    size_t b = (size_t)r->max_rows * r->max_dim * 2;
    return b < CZ__GEMM_XS_CAP_BYTES ? b : CZ__GEMM_XS_CAP_BYTES;
}
