/* rmsnorm.cu - RMSNorm over rows on CUDA (contract: cz_kernels.h, rmsnorm): out = x /
 * sqrt(mean(x^2) + eps) * w, the sum of squares in float32 by a block reduction (warp
 * shuffles, then shared memory), scaled as the CPU twin does (x * s * w). Launch: one
 * block per row (blocks stride over rows past the grid), dim rounded up to a warp and
 * capped at 512 threads, each thread striding over the row. out may equal x: a thread
 * writes only the elements it read, after the reduction's barrier. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

static __global__ void cz__k_rmsnorm(float *out, const float *x, const float *w, float eps,
                                     uint32_t rows, uint32_t dim)
{
    __shared__ float sh[32];
    for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        float ss = 0.0f;
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            ss += xr[i] * xr[i];
        ss = cz__block_sum(ss, sh);
        float s = 1.0f / sqrtf(ss / (float)dim + eps);
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            o[i] = xr[i] * s * w[i];
    }
}

extern "C" void cz_cuda_rmsnorm(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                                uint32_t rows, uint32_t dim)
{
    cz__kcuda *c = cz__cu(k);
    if (!rows || !dim)
        return;
    unsigned grid = rows < 65535u ? rows : 65535u;
    cz__k_rmsnorm<<<grid, cz__cuda_row_threads(dim, 512), 0, c->stream>>>(out, x, w, eps, rows,
                                                                           dim);
    CZ_CUDA_LAUNCHED(c);
}
