/* embed.cu - token embedding lookup on CUDA: out (n, dim) = table[ids[i]] widened to
 * float32 (contract: cz_kernels.h, embed). Launch: one block of up to 256 threads per
 * output row (blocks stride over rows past the grid), the threads striding over dim.
 * ids, table and out are device memory. A negative id is a caller's bug, as on the CPU
 * (asserted there): the kernel traps, which the context records at its next call. */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

static __global__ void cz__k_embed(float *out, const void *table, cz_dtype dt,
                                   const int32_t *ids, uint32_t n, uint32_t dim)
{
    for (uint32_t r = blockIdx.x; r < n; r += gridDim.x) {
        int32_t id = ids[r];
        if (id < 0)
            __trap();
        size_t base = (size_t)id * dim;
        float *o = out + (size_t)r * dim;
        for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
            o[i] = cz__cuda_ld(table, dt, base + i);
    }
}

extern "C" void cz_cuda_embed(cz_kctx *k, float *out, const void *table, cz_dtype dt,
                              const int32_t *ids, uint32_t n, uint32_t dim)
{
    cz__kcuda *c = cz__cu(k);
    if (!n || !dim)
        return;
    unsigned grid = n < 65535u ? n : 65535u;
    cz__k_embed<<<grid, cz__cuda_row_threads(dim, 256), 0, c->stream>>>(out, table, dt, ids, n,
                                                                         dim);
    CZ_CUDA_LAUNCHED(c);
}
