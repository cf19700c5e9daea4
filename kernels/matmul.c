/* matmul.c - out (m, n) = x (m, kd) . w^T + bias for w (n, kd) of float32, bfloat16 or
 * float16.
 *
 * Few rows (decode, m <= CZ__GEMV_M_*): a GEMV-style kernel streams each row of w once
 * for all m rows of x, widening 16-bit weights in registers (bfloat16 is a 16-bit shift,
 * float16 a shift and one multiply), the rows of w split across the threads; at m = 1
 * four rows of w go together, sharing the loads of x, with eight independent sums (on a
 * CPU with AVX2 and FMA, float32 and bfloat16 weights go eight lanes wide, see
 * gemv1_avx2, and gemvm_avx2 for 2 to 8 rows). The speed is that of reading w from memory. Many rows (prefill): the threads split the
 * output columns and each calls OpenBLAS's sgemm (single-threaded) on its share: float32
 * weights as they are, 16-bit weights widened into the thread's panel a panel of rows at
 * a time, so each weight is widened once for all m rows and one thread's widening
 * overlaps the other's sgemm. */
#include <string.h>

#include "cz_kernels_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CZ__MM_AVX2 1
#include <immintrin.h>
#define CZ__AVX2 __attribute__((target("avx2,fma")))
#endif

/* Largest m served by the GEMV kernel, per weight dtype (measured: tests/bench_kernels). */
#define CZ__GEMV_M_F32 4u
#define CZ__GEMV_M_16 8u

typedef struct {
    cz_kctx *k;
    float *out;
    const float *x;
    const void *w;
    cz_dtype dt;
    const float *bias;
    uint32_t m, n, kd;
} mm_job;

/* Eight weights of row w from element i, widened. */
static inline __attribute__((always_inline)) void load8(const void *w, cz_dtype dt, uint32_t i,
                                                        cz__v4f *w0, cz__v4f *w1)
{
    if (dt == CZ_F32) {
        memcpy(w0, (const float *)w + i, 16);
        memcpy(w1, (const float *)w + i + 4, 16);
        return;
    }
    const cz__v8h z = {0};
    cz__v8h h;
    memcpy(&h, (const uint16_t *)w + i, 16);
    if (dt == CZ_BF16) {
        cz__v8h lo = __builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
        cz__v8h hi = __builtin_shufflevector(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
        memcpy(w0, &lo, 16);
        memcpy(w1, &hi, 16);
        return;
    }
    /* float16: F. Giesen's half_to_float_fast5, 4 lanes at a time */
    cz__v8h lo = __builtin_shufflevector(h, z, 0, 8, 1, 9, 2, 10, 3, 11);
    cz__v8h hi = __builtin_shufflevector(h, z, 4, 12, 5, 13, 6, 14, 7, 15);
    cz__v4u u[2];
    memcpy(&u[0], &lo, 16);
    memcpy(&u[1], &hi, 16);
    cz__v4f f[2];
    for (int t = 0; t < 2; t++) {
        cz__v4u em = (u[t] & 0x7fff) << 13, r;
        memcpy(&f[t], &em, 16);
        f[t] *= 0x1p112f;
        memcpy(&r, &f[t], 16);
        r |= (cz__v4u)(f[t] >= 65536.0f) & (255u << 23);
        r |= (u[t] & 0x8000) << 16;
        memcpy(&f[t], &r, 16);
    }
    *w0 = f[0];
    *w1 = f[1];
}

static inline __attribute__((always_inline)) float widen1(const void *w, cz_dtype dt, uint32_t i)
{
    if (dt == CZ_F32)
        return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == CZ_BF16 ? cz_bf16_to_f32(h) : cz_f16_to_f32(h);
}

/* res[r] = w . x_r for r < mr, x_r = x + r * kd. Inlined with constant dt and mr. */
static inline __attribute__((always_inline)) void dot_rows(const void *w, cz_dtype dt,
                                                           const float *x, uint32_t kd, int mr,
                                                           float *res)
{
    cz__v4f a0[4] = {{0}}, a1[4] = {{0}};
    uint32_t i = 0;
    for (; i + 8 <= kd; i += 8) {
        cz__v4f w0, w1;
        load8(w, dt, i, &w0, &w1);
        for (int r = 0; r < mr; r++) {
            cz__v4f x0, x1;
            memcpy(&x0, x + (size_t)r * kd + i, 16);
            memcpy(&x1, x + (size_t)r * kd + i + 4, 16);
            a0[r] += w0 * x0;
            a1[r] += w1 * x1;
        }
    }
    for (int r = 0; r < mr; r++) {
        cz__v4f s = a0[r] + a1[r];
        res[r] = (s[0] + s[2]) + (s[1] + s[3]);
    }
    for (; i < kd; i++) {
        float wi = widen1(w, dt, i);
        for (int r = 0; r < mr; r++)
            res[r] += wi * x[(size_t)r * kd + i];
    }
}

/* res[c] = w_c . x for the four rows w_c = w + c * row (m = 1): the rows share each load
 * of x and their eight accumulators hide the adds' latency. Each row's sum is formed
 * exactly as dot_rows forms it, so a row's result does not depend on its group. */
static inline __attribute__((always_inline)) void dot4_rows(const char *w, size_t row,
                                                            cz_dtype dt, const float *x,
                                                            uint32_t kd, float *res)
{
    cz__v4f a0[4] = {{0}}, a1[4] = {{0}};
    uint32_t i = 0;
    for (; i + 8 <= kd; i += 8) {
        cz__v4f x0, x1;
        memcpy(&x0, x + i, 16);
        memcpy(&x1, x + i + 4, 16);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            cz__v4f w0, w1;
            load8(w + c * row, dt, i, &w0, &w1);
            a0[c] += w0 * x0;
            a1[c] += w1 * x1;
        }
    }
    for (int c = 0; c < 4; c++) {
        cz__v4f s = a0[c] + a1[c];
        res[c] = (s[0] + s[2]) + (s[1] + s[3]);
    }
    for (; i < kd; i++)
        for (int c = 0; c < 4; c++)
            res[c] += widen1(w + c * row, dt, i) * x[i];
}

static inline __attribute__((always_inline)) void gemv_dt(const mm_job *j, cz_dtype dt,
                                                          size_t b, size_t e)
{
    size_t row = (size_t)j->kd * cz_dtype_size(dt);
    if (j->m == 1)
        for (; b + 4 <= e; b += 4) {
            float res[4];
            dot4_rows((const char *)j->w + b * row, row, dt, j->x, j->kd, res);
            for (int c = 0; c < 4; c++)
                j->out[b + c] = res[c] + (j->bias ? j->bias[b + c] : 0.0f);
        }
    for (size_t c = b; c < e; c++) {
        const void *w = (const char *)j->w + c * row;
        float bias = j->bias ? j->bias[c] : 0.0f;
        for (uint32_t r0 = 0; r0 < j->m; r0 += 4) {
            float res[4];
            const float *x = j->x + (size_t)r0 * j->kd;
            switch (j->m - r0 >= 4 ? 4 : j->m - r0) {
            case 1: dot_rows(w, dt, x, j->kd, 1, res); break;
            case 2: dot_rows(w, dt, x, j->kd, 2, res); break;
            case 3: dot_rows(w, dt, x, j->kd, 3, res); break;
            default: dot_rows(w, dt, x, j->kd, 4, res); break;
            }
            for (uint32_t r = 0; r < 4 && r0 + r < j->m; r++)
                j->out[(size_t)(r0 + r) * j->n + c] = res[r] + bias;
        }
    }
}

#ifdef CZ__MM_AVX2
/* Longest row (elements) the AVX2 GEMV reads one row at a time (x: 16 KiB). */
#define CZ__GEMV_ONE_ROW_KD 4096u

CZ__AVX2 static inline float hsum8(__m256 v)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

/* Eight float32 or bfloat16 weights of row w from element i, widened. */
CZ__AVX2 static inline __attribute__((always_inline)) __m256 load8_avx2(const char *w,
                                                                         cz_dtype dt, uint32_t i)
{
    if (dt == CZ_F32)
        return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* res[c] = w_c . x for the nr <= 8 rows w_c = w + c * row (m = 1), eight lanes with fused
 * multiply-adds; a row's result does not depend on nr. */
CZ__AVX2 static inline __attribute__((always_inline)) void dotn_avx2(const char *w, size_t row,
                                                                     cz_dtype dt,
                                                                     const float *x, uint32_t kd,
                                                                     int nr, float *res)
{
    __m256 a0[8];
    for (int c = 0; c < nr; c++)
        a0[c] = _mm256_setzero_ps();
    uint32_t i = 0;
    for (; i + 16 <= kd; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
#pragma GCC unroll 8
        for (int c = 0; c < nr; c++) {
            a0[c] = _mm256_fmadd_ps(load8_avx2(w + c * row, dt, i), x0, a0[c]);
            a0[c] = _mm256_fmadd_ps(load8_avx2(w + c * row, dt, i + 8), x1, a0[c]);
        }
    }
    for (int c = 0; c < nr; c++)
        res[c] = hsum8(a0[c]);
    for (; i < kd; i++)
        for (int c = 0; c < nr; c++)
            res[c] += widen1(w + c * row, dt, i) * x[i];
}

/* Rows [b, e) of a GEMV with m = 1 and float32 or bfloat16 weights, in AVX2. Rows of up
 * to CZ__GEMV_ONE_ROW_KD elements go one at a time with four sums, x staying in L1 and w
 * read as one sequential stream (what the hardware prefetchers follow best); longer rows
 * go eight at a time sharing the loads of x, whose copy in L1 the stream would evict. */
CZ__AVX2 static void gemv1_avx2(const mm_job *j, cz_dtype dt, size_t b, size_t e)
{
    size_t row = (size_t)j->kd * cz_dtype_size(dt);
    if (j->kd <= CZ__GEMV_ONE_ROW_KD) {
        uint32_t kd = j->kd;
        const float *x = j->x;
        for (; b < e; b++) {
            const char *w = (const char *)j->w + b * row;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            uint32_t i = 0;
            for (; i + 32 <= kd; i += 32) {
                a0 = _mm256_fmadd_ps(load8_avx2(w, dt, i), _mm256_loadu_ps(x + i), a0);
                a1 = _mm256_fmadd_ps(load8_avx2(w, dt, i + 8), _mm256_loadu_ps(x + i + 8), a1);
                a2 = _mm256_fmadd_ps(load8_avx2(w, dt, i + 16), _mm256_loadu_ps(x + i + 16), a2);
                a3 = _mm256_fmadd_ps(load8_avx2(w, dt, i + 24), _mm256_loadu_ps(x + i + 24), a3);
            }
            float r = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
            for (; i < kd; i++)
                r += widen1(w, dt, i) * x[i];
            j->out[b] = r + (j->bias ? j->bias[b] : 0.0f);
        }
        return;
    }
    float res[8];
    for (; b + 8 <= e; b += 8) {
        dotn_avx2((const char *)j->w + b * row, row, dt, j->x, j->kd, 8, res);
        for (int c = 0; c < 8; c++)
            j->out[b + c] = res[c] + (j->bias ? j->bias[b + c] : 0.0f);
    }
    for (; b < e; b++) {
        dotn_avx2((const char *)j->w + b * row, row, dt, j->x, j->kd, 1, res);
        j->out[b] = res[0] + (j->bias ? j->bias[b] : 0.0f);
    }
}

/* res[r] = w . x_r for rows r < mr <= 4 of x (x_r = x + r * kd), w one row of float32 or
 * bfloat16 weights, in AVX2: each weight is widened once for the mr rows; below four rows
 * two sums per row alternate over 8-element chunks, so at least four fused multiply-adds
 * are in flight. The sums live in named registers (an array indexed by row would not). A
 * row's result depends on mr by rounding only (the order of its sums). Inlined with
 * constant dt and mr. */
CZ__AVX2 static inline __attribute__((always_inline)) void dot4x_avx2(const char *w, cz_dtype dt,
                                                                      const float *x,
                                                                      uint32_t kd, int mr,
                                                                      float *res)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0; /* b3 stays 0: four rows use one set */
    const float *x0 = x, *x1 = x + kd, *x2 = x + 2 * (size_t)kd, *x3 = x + 3 * (size_t)kd;
    uint32_t i = 0;
    for (; mr <= 3 && i + 16 <= kd; i += 16) {
        __m256 w0 = load8_avx2(w, dt, i), w1 = load8_avx2(w, dt, i + 8);
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x0 + i), a0);
        b0 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x0 + i + 8), b0);
        if (mr > 1) {
            a1 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x1 + i), a1);
            b1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x1 + i + 8), b1);
        }
        if (mr > 2) {
            a2 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x2 + i), a2);
            b2 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x2 + i + 8), b2);
        }
    }
    for (; i + 8 <= kd; i += 8) { /* four rows: their four sums keep four in flight */
        __m256 w0 = load8_avx2(w, dt, i);
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x0 + i), a0);
        if (mr > 1)
            a1 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x1 + i), a1);
        if (mr > 2)
            a2 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x2 + i), a2);
        if (mr > 3)
            a3 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x3 + i), a3);
    }
    res[0] = hsum8(_mm256_add_ps(a0, b0));
    if (mr > 1)
        res[1] = hsum8(_mm256_add_ps(a1, b1));
    if (mr > 2)
        res[2] = hsum8(_mm256_add_ps(a2, b2));
    if (mr > 3)
        res[3] = hsum8(_mm256_add_ps(a3, b3));
    for (; i < kd; i++) {
        float wi = widen1(w, dt, i);
        for (int r = 0; r < mr; r++)
            res[r] += wi * x[(size_t)r * kd + i];
    }
}

/* Rows [b, e) of w for 2 <= m <= 8 rows of x, float32 or bfloat16 weights, in AVX2: each
 * row of w is read once and widened once per four rows of x (the row stays in L1 for the
 * second four), so decode batches stay bound by reading w. */
CZ__AVX2 static void gemvm_avx2(const mm_job *j, cz_dtype dt, size_t b, size_t e)
{
    size_t row = (size_t)j->kd * cz_dtype_size(dt);
    float res[4];
    for (; b < e; b++) {
        const char *w = (const char *)j->w + b * row;
        float bias = j->bias ? j->bias[b] : 0.0f;
        for (uint32_t r0 = 0; r0 < j->m; r0 += 4) {
            const float *x = j->x + (size_t)r0 * j->kd;
            uint32_t mr = j->m - r0 < 4 ? j->m - r0 : 4;
            switch (mr) {
            case 1: dot4x_avx2(w, dt, x, j->kd, 1, res); break;
            case 2: dot4x_avx2(w, dt, x, j->kd, 2, res); break;
            case 3: dot4x_avx2(w, dt, x, j->kd, 3, res); break;
            default: dot4x_avx2(w, dt, x, j->kd, 4, res); break;
            }
            for (uint32_t r = 0; r < mr; r++)
                j->out[(size_t)(r0 + r) * j->n + b] = res[r] + bias;
        }
    }
}
#endif

static void gemv_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const mm_job *j = p;
#ifdef CZ__MM_AVX2
    if (j->k->avx2 && j->dt != CZ_F16) {
        CZ_ASSERT(j->m <= 8);
        if (j->m == 1 && j->dt == CZ_F32)
            gemv1_avx2(j, CZ_F32, b, e);
        else if (j->m == 1)
            gemv1_avx2(j, CZ_BF16, b, e);
        else if (j->dt == CZ_F32)
            gemvm_avx2(j, CZ_F32, b, e);
        else
            gemvm_avx2(j, CZ_BF16, b, e);
        return;
    }
#endif
    switch (j->dt) {
    case CZ_F32: gemv_dt(j, CZ_F32, b, e); break;
    case CZ_BF16: gemv_dt(j, CZ_BF16, b, e); break;
    case CZ_F16: gemv_dt(j, CZ_F16, b, e); break;
    }
}

/* Output columns [b, e) of a prefill GEMM, on thread tid: float32 weights go to sgemm as
 * they are; 16-bit ones are widened into the thread's panel a panel of rows at a time,
 * each panel going to sgemm (so each weight is widened once for all m rows). */
static void gemm_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const mm_job *j = p;
    uint32_t m = j->m, n = j->n, kd = j->kd;
    size_t row = (size_t)kd * cz_dtype_size(j->dt);
    if (j->dt == CZ_F32) {
        cz__sgemm(false, true, m, (uint32_t)(e - b), kd, j->x, kd, (const float *)j->w + b * kd,
                  kd, 0.0f, j->out + b, n);
    } else {
        float *panel = j->k->ts[tid].panel;
        size_t rows = CZ__TPANEL_FLOATS / kd;
        for (size_t c0 = b; c0 < e; c0 += rows) {
            size_t pn = e - c0 < rows ? e - c0 : rows;
            cz__widen_fast(panel, (const char *)j->w + c0 * row, j->dt, pn * kd, j->k->avx2);
            cz__sgemm(false, true, m, (uint32_t)pn, kd, j->x, kd, panel, kd, 0.0f, j->out + c0, n);
        }
    }
    if (j->bias)
        for (uint32_t r = 0; r < m; r++)
            for (size_t c = b; c < e; c++)
                j->out[(size_t)r * n + c] += j->bias[c];
}

void cz_cpu_matmul(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                   const float *bias, uint32_t m, uint32_t n, uint32_t kd)
{
    if (!m || !n)
        return;
    if (!kd) { /* no products: the bias (or zeros) in every row, whatever m is */
        for (uint32_t r = 0; r < m; r++) {
            if (bias)
                memcpy(out + (size_t)r * n, bias, (size_t)n * sizeof *out);
            else
                memset(out + (size_t)r * n, 0, (size_t)n * sizeof *out);
        }
        return;
    }
    mm_job j = {k, out, x, w, dt, bias, m, n, kd};
    if (m <= (dt == CZ_F32 ? CZ__GEMV_M_F32 : CZ__GEMV_M_16)) {
        cz__kpar(k, n, 16, 1 + 32768 / ((size_t)kd * m + 1), gemv_range, &j);
        return;
    }
    CZ_ASSERT(kd <= CZ__TPANEL_FLOATS);
    cz__kpar(k, n, 16, 1 + 65536 / ((size_t)kd * m), gemm_range, &j);
}
