/* cz_attn.c - the online-softmax core both attention ops share (flash attention's
 * recurrence on the CPU): a tile of up to CZ__ATT_QT queries keeps a running max m, sum l
 * and unnormalised output acc per query, and folds the keys in chunks, so no row of
 * scores is ever as long as the context.
 *
 * Per chunk and query, the kept keys are at most two ranges (the sinks and the window,
 * or everything up to the query), found by arithmetic rather than tested key by key.
 * Scores are formed four keys at a time (each load of q shared by four keys); the
 * exponentials four lanes at a time (exp4); the outputs are accumulated 32 dimensions
 * at a time in registers over all of the chunk's kept keys. Every sum runs in a fixed
 * order, so a query's result depends on nothing but its inputs and the chunking. */
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

/* The keys of chunk [t0, t0 + nt) kept for a query at position p, as at most two ranges
 * [b[i], e[i]) of chunk indices; returns their number. Key t is kept when t <= p (causal)
 * or t < p + window (not causal, windowed), and, with a window, when t > p - window or
 * t < sinks (the sinks). */
static int kept_ranges(const cz__attn_tile *a, int64_t p, int64_t t0, uint32_t nt,
                       uint32_t b[2], uint32_t e[2])
{
    int64_t hi = a->causal ? p + 1 : a->window ? p + a->window : INT64_MAX;
    int64_t lo = a->window ? p - a->window + 1 : 0, sink_end = 0;
    if (lo < 0)
        lo = 0;
    if (a->window)
        sink_end = a->sinks < hi ? a->sinks : hi;
    if (sink_end >= lo) { /* the sinks run into the window: one range */
        lo = 0;
        sink_end = 0;
    }
    int64_t rb[2] = {0, lo}, re[2] = {sink_end, hi}, end = t0 + nt;
    int n = 0;
    for (int i = 0; i < 2; i++) {
        int64_t bb = rb[i] > t0 ? rb[i] : t0, ee = re[i] < end ? re[i] : end;
        if (bb < ee) {
            b[n] = (uint32_t)(bb - t0);
            e[n] = (uint32_t)(ee - t0);
            n++;
        }
    }
    return n;
}

static inline float hsum(cz__v4f v)
{
    return (v[0] + v[2]) + (v[1] + v[3]);
}

/* s[j] = q . k_j for j in [b, e), keys k_j = kc + j * ld. */
static void scores(float *s, const float *q, const float *kc, size_t ld, uint32_t hd, uint32_t b,
                   uint32_t e)
{
    uint32_t j = b, d4 = hd & ~3u;
    for (; j + 4 <= e; j += 4) {
        const float *k0 = kc + j * ld, *k1 = k0 + ld, *k2 = k1 + ld, *k3 = k2 + ld;
        cz__v4f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
        for (uint32_t d = 0; d < d4; d += 4) {
            cz__v4f qv, kv;
            memcpy(&qv, q + d, 16);
            memcpy(&kv, k0 + d, 16);
            s0 += qv * kv;
            memcpy(&kv, k1 + d, 16);
            s1 += qv * kv;
            memcpy(&kv, k2 + d, 16);
            s2 += qv * kv;
            memcpy(&kv, k3 + d, 16);
            s3 += qv * kv;
        }
        float r[4] = {hsum(s0), hsum(s1), hsum(s2), hsum(s3)};
        for (uint32_t d = d4; d < hd; d++) {
            r[0] += q[d] * k0[d];
            r[1] += q[d] * k1[d];
            r[2] += q[d] * k2[d];
            r[3] += q[d] * k3[d];
        }
        memcpy(s + j, r, sizeof r);
    }
    for (; j < e; j++) {
        const float *k0 = kc + j * ld;
        cz__v4f s0 = {0};
        for (uint32_t d = 0; d < d4; d += 4) {
            cz__v4f qv, kv;
            memcpy(&qv, q + d, 16);
            memcpy(&kv, k0 + d, 16);
            s0 += qv * kv;
        }
        float r = hsum(s0);
        for (uint32_t d = d4; d < hd; d++)
            r += q[d] * k0[d];
        s[j] = r;
    }
}

/* mask ? a : b, lane by lane (mask lanes all ones or all zeros). */
static inline cz__v4f sel(cz__v4i mask, cz__v4f a, cz__v4f b)
{
    cz__v4i ai, bi;
    memcpy(&ai, &a, 16);
    memcpy(&bi, &b, 16);
    ai = (ai & mask) | (bi & ~mask);
    memcpy(&a, &ai, 16);
    return a;
}

/* e^x in four lanes (Cephes' expf: x = n ln 2 + r, |r| <= ln 2 / 2, a degree-6
 * polynomial in r, 2^n through the exponent bits; within 2 ulp of expf); lanes below
 * -87.3 (-inf among them) give 0. */
static inline cz__v4f exp4(cz__v4f x)
{
    const cz__v4f lo = {-87.3f, -87.3f, -87.3f, -87.3f}, hi = {88.3f, 88.3f, 88.3f, 88.3f};
    cz__v4i under = x < lo;
    x = sel(under, lo, x);
    x = sel(x > hi, hi, x);
    cz__v4f fx = x * 1.44269504088896341f + 0.5f;
    cz__v4i n = __builtin_convertvector(fx, cz__v4i);
    n -= (cz__v4i)(__builtin_convertvector(n, cz__v4f) > fx) & 1; /* floor */
    cz__v4f nf = __builtin_convertvector(n, cz__v4f);
    x = x - nf * 0.693359375f - nf * -2.12194440e-4f;
    cz__v4f z = x * x;
    cz__v4f y = 1.9875691500e-4f * x + 1.3981999507e-3f;
    y = y * x + 8.3334519073e-3f;
    y = y * x + 4.1665795894e-2f;
    y = y * x + 1.6666665459e-1f;
    y = y * x + 5.0000001201e-1f;
    y = y * z + x + 1.0f;
    cz__v4i pow2 = (n + 127) << 23;
    cz__v4f scale;
    memcpy(&scale, &pow2, 16);
    return sel(under, (cz__v4f){0}, y * scale);
}

/* s[j] = exp(s[j] - m) for j in [b, e); returns their sum. */
static float exps(float *s, float m, uint32_t b, uint32_t e)
{
    cz__v4f acc = {0}, mv = {m, m, m, m};
    uint32_t j = b;
    for (; j + 4 <= e; j += 4) {
        cz__v4f v;
        memcpy(&v, s + j, 16);
        v = exp4(v - mv);
        memcpy(s + j, &v, 16);
        acc += v;
    }
    float sum = hsum(acc);
    if (j < e) {
        cz__v4f v = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (uint32_t i = j; i < e; i++)
            v[i - j] = s[i] - m;
        v = exp4(v);
        for (uint32_t i = j; i < e; i++) {
            s[i] = v[i - j];
            sum += v[i - j];
        }
    }
    return sum;
}

/* acc[d] += sum over the ranges' keys j of p[j] x v_j[d], v_j = vc + j * ld: 32 dimensions
 * at a time kept in registers over all the keys. */
static void accumulate(float *acc, const float *p, const float *vc, size_t ld, uint32_t hd,
                       const uint32_t *b, const uint32_t *e, int nr)
{
    uint32_t d0 = 0;
    for (; d0 + 32 <= hd; d0 += 32) {
        cz__v4f o[8];
        memcpy(o, acc + d0, sizeof o);
        for (int r = 0; r < nr; r++)
            for (uint32_t j = b[r]; j < e[r]; j++) {
                const float *v = vc + j * ld + d0;
                cz__v4f pj = {p[j], p[j], p[j], p[j]};
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {
                    cz__v4f vv;
                    memcpy(&vv, v + 4 * i, 16);
                    o[i] += pj * vv;
                }
            }
        memcpy(acc + d0, o, sizeof o);
    }
    for (; d0 + 4 <= hd; d0 += 4) {
        cz__v4f o;
        memcpy(&o, acc + d0, 16);
        for (int r = 0; r < nr; r++)
            for (uint32_t j = b[r]; j < e[r]; j++) {
                cz__v4f pj = {p[j], p[j], p[j], p[j]}, vv;
                memcpy(&vv, vc + j * ld + d0, 16);
                o += pj * vv;
            }
        memcpy(acc + d0, &o, 16);
    }
    for (; d0 < hd; d0++) {
        float o = acc[d0];
        for (int r = 0; r < nr; r++)
            for (uint32_t j = b[r]; j < e[r]; j++)
                o += p[j] * vc[j * ld + d0];
        acc[d0] = o;
    }
}

void cz__attn_chunk(cz__attn_tile *a, const float *kc, const float *vc, size_t ld, int64_t t0,
                    uint32_t nt)
{
    cz__kthread *t = a->t;
    for (uint32_t r = 0; r < a->rows; r++) {
        uint32_t b[2], e[2];
        int nr = kept_ranges(a, a->pos[r], t0, nt, b, e);
        if (!nr)
            continue;
        for (uint32_t h = 0; h < a->heads; h++) {
            uint32_t qi = r * a->heads + h;
            const float *qv = t->q + (size_t)qi * a->hd;
            float *s = t->s + (size_t)qi * CZ__ATT_KT, mx = -INFINITY;
            for (int i = 0; i < nr; i++) {
                scores(s, qv, kc, ld, a->hd, b[i], e[i]);
                for (uint32_t j = b[i]; j < e[i]; j++)
                    mx = s[j] > mx ? s[j] : mx;
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
            float l = t->l[qi];
            for (int i = 0; i < nr; i++)
                l += exps(s, t->m[qi], b[i], e[i]);
            t->l[qi] = l;
            accumulate(acc, s, vc, ld, a->hd, b, e, nr);
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
