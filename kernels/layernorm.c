/* layernorm.c - LayerNorm over rows (encoders, vocoders), mean and variance in two
 * passes. */
#include <math.h>
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *x, *w, *b;
    float eps;
    uint32_t dim;
} ln_job;

/* Sum of (x[i] - c)^2 when sq, else of x[i] - c. */
static float row_sum(const float *x, uint32_t n, float c, bool sq)
{
    cz__v4f s0 = {0}, s1 = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        cz__v4f a0, a1;
        memcpy(&a0, x + i, 16);
        memcpy(&a1, x + i + 4, 16);
        a0 -= c;
        a1 -= c;
        s0 += sq ? a0 * a0 : a0;
        s1 += sq ? a1 * a1 : a1;
    }
    s0 += s1;
    float s = (s0[0] + s0[2]) + (s0[1] + s0[3]);
    for (; i < n; i++)
        s += sq ? (x[i] - c) * (x[i] - c) : x[i] - c;
    return s;
}

static void ln_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const ln_job *j = p;
    for (size_t r = b; r < e; r++) {
        const float *x = j->x + r * j->dim;
        float *o = j->out + r * j->dim;
        float mean = row_sum(x, j->dim, 0.0f, false) / (float)j->dim;
        float var = row_sum(x, j->dim, mean, true) / (float)j->dim;
        float s = 1.0f / sqrtf(var + j->eps);
        for (uint32_t i = 0; i < j->dim; i++)
            o[i] = (x[i] - mean) * s * j->w[i] + (j->b ? j->b[i] : 0.0f);
    }
}

void cz_cpu_layernorm(cz_kctx *k, float *out, const float *x, const float *w, const float *b,
                      float eps, uint32_t rows, uint32_t dim)
{
    ln_job j = {out, x, w, b, eps, dim};
    cz__kpar(k, rows, 1, 1 + 32768 / (dim + 1), ln_rows, &j);
}
