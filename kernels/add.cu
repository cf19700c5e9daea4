/* add.cu - elementwise sum on CUDA (contract: cz_kernels.h, add): out = a + b; out may
 * equal a or b (each element is read, then written, by one thread). Launch: a 1-D
 * grid-stride loop, 256 threads a block, at most 65535 blocks. */
#include "cz_kcuda.h"

static __global__ void cz__k_add(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

extern "C" void cz_cuda_add(cz_kctx *k, float *out, const float *a, const float *b, size_t n)
{
    cz__kcuda *c = cz__cu(k);
    if (!n)
        return;
    unsigned grid = cz__cuda_blocks(n, 256);
    cz__k_add<<<grid < 65535u ? grid : 65535u, 256, 0, c->stream>>>(out, a, b, n);
    CZ_CUDA_LAUNCHED(c);
}
