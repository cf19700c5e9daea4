/* transpose.c - out (cols, rows) = x (rows, cols)^T, in 32 x 32 tiles. */
#include "cz_kernels_cpu.h"

#define TILE 32u

typedef struct {
    float *out;
    const float *x;
    uint32_t rows, cols;
} tr_job;

/* Items are bands of TILE rows of x. */
static void tr_bands(void *p, size_t b, size_t e, uint32_t tid)
{
    const tr_job *j = p;
    for (size_t band = b; band < e; band++) {
        uint32_t r0 = (uint32_t)band * TILE, r1 = r0 + TILE < j->rows ? r0 + TILE : j->rows;
        for (uint32_t c0 = 0; c0 < j->cols; c0 += TILE) {
            uint32_t c1 = c0 + TILE < j->cols ? c0 + TILE : j->cols;
            for (uint32_t r = r0; r < r1; r++)
                for (uint32_t c = c0; c < c1; c++)
                    j->out[(size_t)c * j->rows + r] = j->x[(size_t)r * j->cols + c];
        }
    }
}

void cz_cpu_transpose(cz_kctx *k, float *out, const float *x, uint32_t rows, uint32_t cols)
{
    tr_job j = {out, x, rows, cols};
    cz__kpar(k, (rows + TILE - 1) / TILE, 1, 1 + 65536 / ((size_t)TILE * cols + 1), tr_bands,
             &j);
}
