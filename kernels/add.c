/* add.c - elementwise sum (residual connections); out may be either input. */
#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *a, *b;
} add_job;

static void add_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const add_job *j = p;
    for (size_t i = b; i < e; i++)
        j->out[i] = j->a[i] + j->b[i];
}

void cz_cpu_add(cz_kctx *k, float *out, const float *a, const float *b, size_t n)
{
    add_job j = {out, a, b};
    cz__kpar(k, n, 1024, 65536, add_range, &j);
}
