/* cz_attn.c - the online-softmax core both attention ops share (flash attention's
 * recurrence on the CPU): a tile of up to CZ__ATT_QT queries keeps a running max m, sum l
 * and unnormalised output acc per query, and folds the keys in chunks, so no row of
 * scores is ever as long as the context. */
#include <math.h>
#include <string.h>

#include "cz_kernels_cpu.h"

void cz__attn_begin(cz__attn_tile *a, const float *q, size_t ld_q, float scale)
{
    cz__kthread *t = a->t;
    CZ_ASSERT(a->rows * a->heads <= CZ__ATT_QT && a->hd <= CZ_KMAX_HEAD_DIM);
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t h = 0; h < a->heads; h++) {
            uint32_t qi = r * a->heads + h;
            const float *src = q + r * ld_q + (size_t)h * a->hd;
            float *dst = t->q + (size_t)qi * a->hd;
            for (uint32_t d = 0; d < a->hd; d++)
                dst[d] = src[d] * scale;
            memset(t->acc + (size_t)qi * a->hd, 0, a->hd * sizeof(float));
            t->m[qi] = -INFINITY;
            t->l[qi] = 0.0f;
        }
}

bool cz__attn_kept(const cz__attn_tile *a, int64_t t, int64_t p)
{
    if (a->causal ? t > p : a->window && t >= p + a->window)
        return false;
    return !a->window || t > p - a->window || t < a->sinks;
}

void cz__attn_chunk(cz__attn_tile *a, const float *kc, const float *vc, size_t ld, int64_t t0,
                    uint32_t nt)
{
    cz__kthread *t = a->t;
    for (uint32_t r = 0; r < a->rows; r++) {
        int64_t p = a->pos[r];
        for (uint32_t h = 0; h < a->heads; h++) {
            uint32_t qi = r * a->heads + h;
            const float *qv = t->q + (size_t)qi * a->hd;
            float *s = t->s + (size_t)qi * CZ__ATT_KT, mx = -INFINITY;
            for (uint32_t j = 0; j < nt; j++) {
                s[j] = cz__attn_kept(a, t0 + j, p) ? cz__dot(qv, kc + j * ld, a->hd) : -INFINITY;
                if (s[j] > mx)
                    mx = s[j];
            }
            if (mx == -INFINITY)
                continue;
            float *acc = t->acc + (size_t)qi * a->hd;
            if (mx > t->m[qi]) {
                float corr = expf(t->m[qi] - mx);
                t->l[qi] *= corr;
                for (uint32_t d = 0; d < a->hd; d++)
                    acc[d] *= corr;
                t->m[qi] = mx;
            }
            float m = t->m[qi], l = t->l[qi];
            for (uint32_t j = 0; j < nt; j++) {
                if (s[j] == -INFINITY)
                    continue;
                float pj = expf(s[j] - m);
                l += pj;
                cz__axpy(acc, pj, vc + j * ld, a->hd);
            }
            t->l[qi] = l;
        }
    }
}

void cz__attn_end(cz__attn_tile *a, float *out, size_t ld_o)
{
    cz__kthread *t = a->t;
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t h = 0; h < a->heads; h++) {
            uint32_t qi = r * a->heads + h;
            float inv = t->l[qi] > 0.0f ? 1.0f / t->l[qi] : 0.0f;
            const float *acc = t->acc + (size_t)qi * a->hd;
            float *o = out + r * ld_o + (size_t)h * a->hd;
            for (uint32_t d = 0; d < a->hd; d++)
                o[d] = acc[d] * inv;
        }
}
