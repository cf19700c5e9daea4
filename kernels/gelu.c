/* gelu.c - GELU, erf form (PyTorch's default, approximate='none'), in place. */
#include <math.h>

#include "cz_kernels_cpu.h"

static void gelu_range(void *p, size_t b, size_t e, uint32_t tid)
{
    float *x = p;
    for (size_t i = b; i < e; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void cz_cpu_gelu(cz_kctx *k, float *x, size_t n)
{
    cz__kpar(k, n, 1024, 16384, gelu_range, x);
}
