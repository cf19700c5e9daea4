/* gather_rows.c - out (n, dim) = rows idx[i] of x (the last token of each sequence
 * before the LM head, a MoE expert's tokens). */
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *x;
    const int32_t *idx;
    uint32_t dim;
} gather_job;

static void gather_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const gather_job *j = p;
    for (size_t i = b; i < e; i++) {
        CZ_ASSERT(j->idx[i] >= 0);
        memcpy(j->out + i * j->dim, j->x + (size_t)j->idx[i] * j->dim, j->dim * sizeof(float));
    }
}

void cz_cpu_gather_rows(cz_kctx *k, float *out, const float *x, const int32_t *idx, uint32_t n,
                        uint32_t dim)
{
    gather_job j = {out, x, idx, dim};
    cz__kpar(k, n, 1, 1 + 65536 / (dim + 1), gather_range, &j);
}
