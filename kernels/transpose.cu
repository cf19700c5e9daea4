/* transpose.cu - out (cols, rows) = x (rows, cols) transposed on CUDA (contract:
 * cz_kernels.h, transpose). Launch: 32 x 32 tiles through shared memory (a padded
 * column, so the transposed reads are free of bank conflicts), blocks of 32 x 8 threads,
 * each thread moving 4 elements; grid x over column tiles, y over row tiles, both
 * striding past the grid. Reads and writes are coalesced along rows. */
#include "cz_kcuda.h"

#define CZ__TT 32u

static __global__ void cz__k_transpose(float *out, const float *x, uint32_t rows, uint32_t cols)
{
    __shared__ float tile[CZ__TT][CZ__TT + 1];
    uint32_t tx = threadIdx.x, ty = threadIdx.y;
    for (uint32_t r0 = blockIdx.y * CZ__TT; r0 < rows; r0 += gridDim.y * CZ__TT)
        for (uint32_t c0 = blockIdx.x * CZ__TT; c0 < cols; c0 += gridDim.x * CZ__TT) {
            for (uint32_t j = ty; j < CZ__TT; j += blockDim.y)
                if (r0 + j < rows && c0 + tx < cols)
                    tile[j][tx] = x[(size_t)(r0 + j) * cols + c0 + tx];
            __syncthreads();
            for (uint32_t j = ty; j < CZ__TT; j += blockDim.y)
                if (c0 + j < cols && r0 + tx < rows)
                    out[(size_t)(c0 + j) * rows + r0 + tx] = tile[tx][j];
            __syncthreads();
        }
}

extern "C" void cz_cuda_transpose(cz_kctx *k, float *out, const float *x, uint32_t rows,
                                  uint32_t cols)
{
    cz__kcuda *c = cz__cu(k);
    if (!rows || !cols)
        return;
    unsigned gx = cz__cuda_blocks(cols, CZ__TT), gy = cz__cuda_blocks(rows, CZ__TT);
    dim3 grid(gx < 65535u ? gx : 65535u, gy < 65535u ? gy : 65535u), block(CZ__TT, 8);
    cz__k_transpose<<<grid, block, 0, c->stream>>>(out, x, rows, cols);
    CZ_CUDA_LAUNCHED(c);
}
