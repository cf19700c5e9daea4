/* rope.cu - rotary embedding in place on CUDA, Hugging Face's rotate-half layout
 * (contract: cz_kernels.h, rope). Launch: one block of 256 threads per row (blocks
 * stride over rows past the grid): the row's cos and sin of the float32 angles
 * pos x inv_freq[j] go to shared memory once, then the threads stride over the
 * (head, j) pairs of the row, as the CPU twin does. x, pos and inv_freq are device
 * memory. */
#include "cz_kcuda.h"

static __global__ void cz__k_rope(float *x, uint32_t ld, const int32_t *pos,
                                  const float *inv_freq, uint32_t n, uint32_t heads,
                                  uint32_t head_dim)
{
    __shared__ float cs[CZ_KMAX_HEAD_DIM / 2], sn[CZ_KMAX_HEAD_DIM / 2];
    uint32_t half = head_dim / 2, pairs = heads * half;
    for (uint32_t r = blockIdx.x; r < n; r += gridDim.x) {
        for (uint32_t j = threadIdx.x; j < half; j += blockDim.x) {
            float a = (float)pos[r] * inv_freq[j];
            sincosf(a, &sn[j], &cs[j]);
        }
        __syncthreads();
        float *xr = x + (size_t)r * ld;
        for (uint32_t t = threadIdx.x; t < pairs; t += blockDim.x) {
            uint32_t h = t / half, j = t % half;
            float *xh = xr + (size_t)h * head_dim;
            float x1 = xh[j], x2 = xh[j + half];
            xh[j] = x1 * cs[j] - x2 * sn[j];
            xh[j + half] = x2 * cs[j] + x1 * sn[j];
        }
        __syncthreads();
    }
}

extern "C" void cz_cuda_rope(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos,
                             const float *inv_freq, uint32_t n, uint32_t heads, uint32_t head_dim)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(head_dim % 2 == 0 && head_dim <= CZ_KMAX_HEAD_DIM);
    if (!n || !heads || !head_dim)
        return;
    unsigned grid = n < 65535u ? n : 65535u;
    cz__k_rope<<<grid, 256, 0, c->stream>>>(x, ld, pos, inv_freq, n, heads, head_dim);
    CZ_CUDA_LAUNCHED(c);
}
