/* silu_mul.c - SwiGLU's gate: silu(gate) x up over rows of a fused gate/up projection. */
#include <math.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *gu;
    uint32_t inter;
} sm_job;

static void sm_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const sm_job *j = p;
    for (size_t r = b; r < e; r++) {
        const float *g = j->gu + r * 2 * j->inter, *u = g + j->inter;
        float *o = j->out + r * j->inter;
        for (uint32_t i = 0; i < j->inter; i++)
            o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

void cz_cpu_silu_mul(cz_kctx *k, float *out, const float *gu, uint32_t n, uint32_t inter)
{
    sm_job j = {out, gu, inter};
    cz__kpar(k, n, 1, 1 + 16384 / (inter + 1), sm_rows, &j);
}
