/* rmsnorm.c - RMSNorm over rows (Llama, Qwen; also Qwen3's per-head q/k norms). */
#include <math.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *x, *w;
    float eps;
    uint32_t dim;
} rms_job;

static void rms_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const rms_job *j = p;
    for (size_t r = b; r < e; r++) {
        const float *x = j->x + r * j->dim;
        float *o = j->out + r * j->dim;
        float s = 1.0f / sqrtf(cz__dot(x, x, j->dim) / (float)j->dim + j->eps);
        for (uint32_t i = 0; i < j->dim; i++)
            o[i] = x[i] * s * j->w[i];
    }
}

void cz_cpu_rmsnorm(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                    uint32_t rows, uint32_t dim)
{
    rms_job j = {out, x, w, eps, dim};
    cz__kpar(k, rows, 1, 1 + 32768 / (dim + 1), rms_rows, &j);
}
