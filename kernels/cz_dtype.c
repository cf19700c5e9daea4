/* cz_dtype.c - the weight and KV dtypes: sizes, names, and the conversions between
 * float32 and bfloat16 / float16 (round to nearest even; NaN stays NaN, infinities and
 * float16 subnormals exact), scalar and 4-lane (cz__widen, cz__narrow). The float16
 * conversions are F. Giesen's branch-free ones ("half_to_float_fast5",
 * "float_to_half_fast3_rtne"). */
#include <string.h>

#include "cz_kernels_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

size_t cz_dtype_size(cz_dtype dt)
{
    return dt == CZ_F32 ? 4 : 2;
}

const char *cz_dtype_name(cz_dtype dt)
{
    switch (dt) {
    case CZ_F32: return "F32";
    case CZ_BF16: return "BF16";
    case CZ_F16: return "F16";
    }
    return "?";
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float cz_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t cz_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN, sign kept */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float cz_f16_to_f32(uint16_t h)
{
    /* exponent and mantissa moved into place and rebiased by one multiply (which also
     * normalises subnormals); what was Inf/NaN gets the full exponent back */
    float o = float_of((uint32_t)(h & 0x7fff) << 13) * 0x1p112f;
    uint32_t u = bits_of(o);
    if (o >= 65536.0f)
        u |= 255u << 23;
    return float_of(u | (uint32_t)(h & 0x8000) << 16);
}

uint16_t cz_f32_to_f16(float f)
{
    uint32_t u = bits_of(f), sign = u & 0x80000000u, o;
    u ^= sign;
    if (u >= (127u + 16) << 23) {           /* overflows to Inf, or is Inf/NaN */
        o = u > 0x7f800000u ? 0x7e00 : 0x7c00;
    } else if (u < 113u << 23) {            /* subnormal or zero in float16 */
        const float magic = float_of(((127u - 15) + (23 - 10) + 1) << 23);
        o = bits_of(float_of(u) + magic) - bits_of(magic);
    } else {
        uint32_t odd = (u >> 13) & 1;
        u += ((uint32_t)(15 - 127) << 23) + 0xfff + odd;
        o = u >> 13;
    }
    return (uint16_t)(o | sign >> 16);
}

/* 4 lanes, each holding a float16 in its low 16 bits, to float32. */
static cz__v4f f16x4(cz__v4u h)
{
    cz__v4u em = (h & 0x7fff) << 13;
    cz__v4f o;
    memcpy(&o, &em, 16);
    o *= 0x1p112f;
    cz__v4u u;
    memcpy(&u, &o, 16);
    cz__v4i big = o >= 65536.0f;
    u |= (cz__v4u)big & (255u << 23);
    u |= (h & 0x8000) << 16;
    memcpy(&o, &u, 16);
    return o;
}

void cz__widen(float *dst, const void *src, cz_dtype dt, size_t n)
{
    if (dt == CZ_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    size_t i = 0;
    const cz__v8h z = {0};
    if (dt == CZ_BF16) {
        for (; i + 8 <= n; i += 8) {
            cz__v8h h;
            memcpy(&h, s + i, 16);
            cz__v8h lo = __builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
            cz__v8h hi = __builtin_shufflevector(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
            memcpy(dst + i, &lo, 16);
            memcpy(dst + i + 4, &hi, 16);
        }
        for (; i < n; i++)
            dst[i] = cz_bf16_to_f32(s[i]);
    } else {
        for (; i + 8 <= n; i += 8) {
            cz__v8h h;
            memcpy(&h, s + i, 16);
            cz__v8h lo = __builtin_shufflevector(h, z, 0, 8, 1, 9, 2, 10, 3, 11);
            cz__v8h hi = __builtin_shufflevector(h, z, 4, 12, 5, 13, 6, 14, 7, 15);
            cz__v4u ul, uh;
            memcpy(&ul, &lo, 16);
            memcpy(&uh, &hi, 16);
            cz__v4f fl = f16x4(ul), fh = f16x4(uh);
            memcpy(dst + i, &fl, 16);
            memcpy(dst + i + 4, &fh, 16);
        }
        for (; i < n; i++)
            dst[i] = cz_f16_to_f32(s[i]);
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2"))) static void widen_bf16_avx2(float *dst, const uint16_t *s,
                                                            size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i + 8)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(a, 16)));
        _mm256_storeu_ps(dst + i + 8, _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)));
    }
    for (; i < n; i++)
        dst[i] = cz_bf16_to_f32(s[i]);
}
#endif

void cz__widen_fast(float *dst, const void *src, cz_dtype dt, size_t n, bool avx2)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (avx2 && dt == CZ_BF16) {
        widen_bf16_avx2(dst, src, n);
        return;
    }
#endif
    cz__widen(dst, src, dt, n);
}

void cz__narrow(void *dst, const float *src, cz_dtype dt, size_t n)
{
    if (dt == CZ_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    if (dt == CZ_BF16)
        for (size_t i = 0; i < n; i++)
            d[i] = cz_f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            d[i] = cz_f32_to_f16(src[i]);
}
