/* rope.c - rotary position embedding in place, Hugging Face's rotate-half layout; the
 * angles are float32 products pos x inv_freq, as in transformers. */
#include <math.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *x;
    uint32_t ld;
    const int32_t *pos;
    const float *inv_freq;
    uint32_t heads, hd;
} rope_job;

static void rope_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const rope_job *j = p;
    uint32_t half = j->hd / 2;
    float c[CZ_KMAX_HEAD_DIM / 2], s[CZ_KMAX_HEAD_DIM / 2];
    for (size_t r = b; r < e; r++) {
        for (uint32_t i = 0; i < half; i++) {
            float a = (float)j->pos[r] * j->inv_freq[i];
            c[i] = cosf(a);
            s[i] = sinf(a);
        }
        for (uint32_t h = 0; h < j->heads; h++) {
            float *x = j->x + r * j->ld + (size_t)h * j->hd;
            for (uint32_t i = 0; i < half; i++) {
                float x1 = x[i], x2 = x[i + half];
                x[i] = x1 * c[i] - x2 * s[i];
                x[i + half] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

void cz_cpu_rope(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos, const float *inv_freq,
                 uint32_t n, uint32_t heads, uint32_t head_dim)
{
    CZ_ASSERT(head_dim % 2 == 0 && head_dim <= CZ_KMAX_HEAD_DIM);
    rope_job j = {x, ld, pos, inv_freq, heads, head_dim};
    cz__kpar(k, n, 1, 1 + 16384 / (heads * head_dim + 1), rope_rows, &j);
}
