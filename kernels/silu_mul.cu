/* silu_mul.cu - SwiGLU's gate on CUDA (contract: cz_kernels.h, silu_mul): out (n, inter) =
 * silu(gu[:, :inter]) * gu[:, inter:], by the CPU twin's formula g / (1 + e^-g) * u.
 * Launch: a 2-D grid, x over column blocks of 256 threads, y over rows, both striding
 * past the grid. */
#include "cz_kcuda.h"

static __global__ void cz__k_silu_mul(float *out, const float *gu, uint32_t n, uint32_t inter)
{
    for (uint32_t r = blockIdx.y; r < n; r += gridDim.y) {
        const float *g = gu + (size_t)r * 2 * inter, *u = g + inter;
        float *o = out + (size_t)r * inter;
        for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < inter;
             i += gridDim.x * blockDim.x)
            o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

extern "C" void cz_cuda_silu_mul(cz_kctx *k, float *out, const float *gu, uint32_t n,
                                 uint32_t inter)
{
    cz__kcuda *c = cz__cu(k);
    if (!n || !inter)
        return;
    unsigned gx = cz__cuda_blocks(inter, 256);
    dim3 grid(gx < 4096u ? gx : 4096u, n < 65535u ? n : 65535u);
    cz__k_silu_mul<<<grid, 256, 0, c->stream>>>(out, gu, n, inter);
    CZ_CUDA_LAUNCHED(c);
}
