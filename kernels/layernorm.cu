/* layernorm.cu - LayerNorm over rows on CUDA (contract: cz_kernels.h, layernorm): mean,
 * then variance about it, in two float32 block reductions (warp shuffles, then shared
 * memory), as the CPU twin's two passes; out = (x - mean) * s * w + b. Launch: one block
 * per row (blocks stride over rows past the grid), dim rounded up to a warp and capped at
 * 512 threads. out may equal x: a thread writes only the elements it read, after the
 * reductions' barriers. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

static __global__ void cz__k_layernorm(float *out, const float *x, const float *w,
                                       const float *b, float eps, uint32_t rows, uint32_t dim)
{
    __shared__ float sh[32];
    for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + (size_t)r * dim;
        float *o = out + (size_t)r * dim;
        float sum = 0.0f;
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            sum += xr[i];
        float mean = cz__block_sum(sum, sh) / (float)dim, sq = 0.0f;
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            sq += (xr[i] - mean) * (xr[i] - mean);
        float s = 1.0f / sqrtf(cz__block_sum(sq, sh) / (float)dim + eps);
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            o[i] = (xr[i] - mean) * s * w[i] + (b ? b[i] : 0.0f);
    }
}

extern "C" void cz_cuda_layernorm(cz_kctx *k, float *out, const float *x, const float *w,
                                  const float *b, float eps, uint32_t rows, uint32_t dim)
{
    cz__kcuda *c = cz__cu(k);
    if (!rows || !dim)
        return;
    unsigned grid = rows < 65535u ? rows : 65535u;
    cz__k_layernorm<<<grid, cz__cuda_row_threads(dim, 512), 0, c->stream>>>(out, x, w, b, eps,
                                                                             rows, dim);
    CZ_CUDA_LAUNCHED(c);
}
