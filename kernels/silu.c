/* silu.c - SiLU (swish), in place. */
#include <math.h>

#include "cz_kernels_cpu.h"

static void silu_range(void *p, size_t b, size_t e, uint32_t tid)
{
    float *x = p;
    for (size_t i = b; i < e; i++)
        x[i] = x[i] / (1.0f + expf(-x[i]));
}

void cz_cpu_silu(cz_kctx *k, float *x, size_t n)
{
    cz__kpar(k, n, 1024, 16384, silu_range, x);
}
