/* gather_rows.cu - out (n, dim) = rows idx[i] of x on CUDA (contract: cz_kernels.h,
 * gather_rows). Launch: one block of up to 256 threads per output row (blocks stride
 * over rows past the grid), the threads striding over dim. out, x and idx are device
 * memory. A negative index is a caller's bug, as on the CPU (asserted there): the kernel
 * traps, which the context records at its next call. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

static __global__ void cz__k_gather_rows(float *out, const float *x, const int32_t *idx,
                                         uint32_t n, uint32_t dim)
{
    for (uint32_t r = blockIdx.x; r < n; r += gridDim.x) {
        int32_t id = idx[r];
        if (id < 0)
            __trap();
        const float *xr = x + (size_t)id * dim;
        float *o = out + (size_t)r * dim;
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            o[i] = xr[i];
    }
}

extern "C" void cz_cuda_gather_rows(cz_kctx *k, float *out, const float *x, const int32_t *idx,
                                    uint32_t n, uint32_t dim)
{
    cz__kcuda *c = cz__cu(k);
    if (!n || !dim)
        return;
    unsigned grid = n < 65535u ? n : 65535u;
    cz__k_gather_rows<<<grid, cz__cuda_row_threads(dim, 256), 0, c->stream>>>(out, x, idx, n,
                                                                               dim);
    CZ_CUDA_LAUNCHED(c);
}
