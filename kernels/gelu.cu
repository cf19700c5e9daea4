/* gelu.cu - GELU, erf form, in place on CUDA (contract: cz_kernels.h, gelu): the CPU
 * twin's 0.5 x (1 + erf(x / sqrt 2)). Launch: a 1-D grid-stride loop, 256 threads a
 * block, at most 65535 blocks. */
#include "cz_kcuda.h"

static __global__ void cz__k_gelu(float *x, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

extern "C" void cz_cuda_gelu(cz_kctx *k, float *x, size_t n)
{
    cz__kcuda *c = cz__cu(k);
    if (!n)
        return;
    unsigned grid = cz__cuda_blocks(n, 256);
    cz__k_gelu<<<grid < 65535u ? grid : 65535u, 256, 0, c->stream>>>(x, n);
    CZ_CUDA_LAUNCHED(c);
}
