/* test_kernels.c - the CPU backend (kernels/cz_kernels.h) against naive references
 * written here (plain loops, double accumulation), ggml's test-backend-ops method: each
 * op on several shapes, compared by normalized mean squared error (NMSE = sum (out -
 * ref)^2 / sum ref^2) with a tolerance per op, and exactly where exact is right (lookups,
 * copies, slots, ties, dtype conversions, sampled ids). Every op runs on one and on two
 * threads, whose results must agree; attention and the decode GEMV also with their AVX2
 * loops turned off, so the portable ones are checked on any machine. The executable is linked with malloc, calloc and
 * realloc wrapped, so a test counts what the ops allocate after the reserve (nothing). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "cz_kernels.h"
#include "cz_kernels_cpu.h" /* cz__kctx_cpu_set_avx2: the portable inner loops too */


/* ---- tolerances (NMSE) per op ----
 * Inputs of every reference are the exact values the kernel sees (16-bit weights and KV
 * widened the same way), so the only differences are float32 rounding and summation
 * order: well below ggml's default of 1e-7 for sums of a few hundred terms. */
#define TOL_ELEM 1e-12   /* rmsnorm, layernorm, silu, silu_mul, gelu, add */
#define TOL_ROPE 1e-11   /* float32 cos/sin of the same float32 angles */
#define TOL_MATMUL 1e-10 /* matmul, conv1d, conv_transpose1d (float32 sums) */
#define TOL_ATTN 1e-10   /* attn_paged, attn_dense (online softmax in float32) */
#define TOL_MOE 1e-9     /* moe_ffn (chains of matmuls) */

static const cz_kreserve RES = {.max_rows = 1024, .max_ctx = 4096, .max_heads = 128,
                                .max_dim = 8192, .max_experts = 16, .max_moe_dim = 256};

static const cz_dtype DTS[] = {CZ_F32, CZ_BF16, CZ_F16};

static cz_kctx *mk(uint32_t threads)
{
    cz_kctx *k = NULL;
    cz_err e;
    cr_assert_eq(cz_kctx_cpu_create(threads, &k, &e), CZ_OK);
    cz_kctx_reserve(k, &RES);
    return k;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float urand(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * 0x1p-52 - 1.0);
}

static uint32_t irand(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static float *frand(uint64_t *s, size_t n, float scale)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = urand(s) * scale;
    return a;
}

/* Stores floats as dtype dt (caller frees). */
static void *store(cz_dtype dt, const float *src, size_t n)
{
    void *p = malloc((n ? n : 1) * cz_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        if (dt == CZ_F32)
            ((float *)p)[i] = src[i];
        else if (dt == CZ_BF16)
            ((uint16_t *)p)[i] = cz_f32_to_bf16(src[i]);
        else
            ((uint16_t *)p)[i] = cz_f32_to_f16(src[i]);
    }
    return p;
}

/* Element i of a dtype array, as the kernel sees it. */
static double at(cz_dtype dt, const void *p, size_t i)
{
    if (dt == CZ_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == CZ_BF16 ? cz_bf16_to_f32(h) : cz_f16_to_f32(h);
}

static double nmse(const float *out, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static double nmse_ff(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* Checks out (one thread) and out2 (two threads) against ref and each other. */
static void check2(const char *what, const float *o1, const float *o2, const double *ref,
                   size_t n, double tol)
{
    double e1 = nmse(o1, ref, n), e2 = nmse(o2, ref, n), e12 = nmse_ff(o2, o1, n);
    cr_assert(e1 <= tol, "%s: 1 thread: NMSE %.3g > %.3g", what, e1, tol);
    cr_assert(e2 <= tol, "%s: 2 threads: NMSE %.3g > %.3g", what, e2, tol);
    cr_assert(e12 <= tol, "%s: 1 vs 2 threads: NMSE %.3g > %.3g", what, e12, tol);
    for (size_t i = 0; i < n; i++)
        cr_assert(isfinite(o1[i]) && isfinite(o2[i]), "%s: element %zu not finite", what, i);
}

/* ---- dtypes and the uniform draw ---- */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

Test(kernels, dtype_round_trips)
{
    cr_assert_eq(cz_dtype_size(CZ_F32), 4);
    cr_assert_eq(cz_dtype_size(CZ_BF16), 2);
    cr_assert_str_eq(cz_dtype_name(CZ_F16), "F16");
    for (uint32_t h = 0; h < 65536; h++) {
        float b = cz_bf16_to_f32((uint16_t)h), f = cz_f16_to_f32((uint16_t)h);
        cr_assert_eq(fbits(b), h << 16);
        if (isnan(b))
            cr_assert(isnan(cz_bf16_to_f32(cz_f32_to_bf16(b))), "bf16 NaN %04x", h);
        else
            cr_assert_eq(cz_f32_to_bf16(b), h, "bf16 %04x", h);
        bool fnan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        cr_assert_eq(!!isnan(f), fnan, "f16 %04x", h);
        if (fnan) {
            cr_assert(isnan(cz_f16_to_f32(cz_f32_to_f16(f))));
            continue;
        }
        cr_assert_eq(cz_f32_to_f16(f), h, "f16 %04x -> %g", h, f);
        /* value: (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 m/1024 */
        uint32_t e = (h >> 10) & 31, m = h & 1023;
        double v = e == 31 ? INFINITY : e ? ldexp(1 + m / 1024.0, (int)e - 15) : ldexp(m / 1024.0, -14);
        cr_assert_eq((double)f, h & 0x8000 ? -v : v, "f16 %04x value", h);
    }
    /* round to nearest even, overflow, underflow, signed zero, NaN */
    cr_assert_eq(cz_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);           /* tie: to even */
    cr_assert_eq(cz_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);       /* tie: up to even */
    cr_assert_eq(cz_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above the tie */
    cr_assert_eq(cz_f32_to_bf16(bitsf(0x7f7fffff)), 0x7f80);        /* FLT_MAX -> inf */
    cr_assert_eq(cz_f32_to_bf16(-INFINITY), 0xff80);
    cr_assert(isnan(cz_bf16_to_f32(cz_f32_to_bf16(bitsf(0x7f800001))))); /* signalling */
    cr_assert_eq(cz_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(cz_f32_to_f16(65519.99f), 0x7bff);
    cr_assert_eq(cz_f32_to_f16(65520.0f), 0x7c00);                  /* tie -> inf */
    cr_assert_eq(cz_f32_to_f16(1e10f), 0x7c00);
    cr_assert_eq(cz_f32_to_f16(-INFINITY), 0xfc00);
    cr_assert_eq(cz_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    cr_assert_eq(cz_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    cr_assert_eq(cz_f32_to_f16(0x1p-24f), 0x0001);                  /* least subnormal */
    cr_assert_eq(cz_f32_to_f16(0x1p-25f), 0x0000);                  /* tie -> 0 (even) */
    cr_assert_eq(cz_f32_to_f16(0x1.8p-25f), 0x0001);
    cr_assert_eq(cz_f32_to_f16(3 * 0x1p-25f), 0x0002);              /* tie -> even 2 */
    cr_assert_eq(cz_f32_to_f16(0x1.ff8p-15f), 0x03ff);              /* largest subnormal */
    cr_assert_eq(cz_f32_to_f16(0x1.ffcp-15f), 0x0400);              /* tie rounds up to normal */
    cr_assert_eq(cz_f32_to_f16(-0.0f), 0x8000);
    cr_assert(isnan(cz_f16_to_f32(cz_f32_to_f16(NAN))));
    /* random floats: the nearest float16, ties to the even one */
    uint64_t s = 11;
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf(urand(&s), (int)irand(&s, 44) - 28);
        uint16_t h = cz_f32_to_f16(f);
        double d = fabs((double)cz_f16_to_f32(h) - f);
        for (int nb = -1; nb <= 1; nb += 2) {
            uint16_t g = (uint16_t)(h + nb);
            if ((g & 0x7fff) > 0x7c00 || ((g ^ h) & 0x8000))
                continue;
            double dg = fabs((double)cz_f16_to_f32(g) - f);
            cr_assert(d < dg || (d == dg && !(h & 1)), "%a -> %04x, %04x is nearer", f, h, g);
        }
    }
}

static float uniform_ref(uint64_t seed, uint64_t counter)
{
    uint64_t x = seed + 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < 2; r++) {
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        x ^= x >> 31;
        if (!r)
            x += 0x9E3779B97F4A7C15ull * (counter + 1);
    }
    return (float)ldexp((double)(x >> 40), -24);
}

Test(kernels, uniform)
{
    double sum = 0;
    for (uint64_t c = 0; c < 100000; c++) {
        float u = cz_kernel_uniform(42, c);
        cr_assert(u >= 0.0f && u < 1.0f);
        cr_assert_eq(u, uniform_ref(42, c));
        sum += u;
    }
    cr_assert(fabs(sum / 100000 - 0.5) < 0.005);
    cr_assert_neq(cz_kernel_uniform(1, 5), cz_kernel_uniform(2, 5));
}

Test(kernels, context)
{
    cz_kctx *k = NULL;
    cz_err e;
    cr_assert_eq(cz_kctx_cpu_create(0, &k, &e), CZ_EINVAL);
    cr_assert_null(k);
    k = mk(2);
    cr_assert_eq(cz_kctx_threads(k), 2);
    cr_assert_eq(cz_kctx_ops(k), cz_kernels_cpu());
    cr_assert_str_eq(cz_kernels_cpu()->name, "cpu");
    cr_assert_geq(cz_kctx_cpu_default_threads(), 1);
    cr_assert_str_eq(cz_dtype_name(CZ_F32), "F32");
    cr_assert_str_eq(cz_dtype_name(CZ_BF16), "BF16");
    float src[5] = {1, 2, 3, 4, 5}, dst[5];
    float *d = cz_kmem_alloc(k, sizeof src);
    cr_assert_eq((uintptr_t)d % 64, 0);
    cz_kmem_upload(k, d, src, sizeof src);
    cz_kmem_download(k, dst, d, sizeof src);
    cz_kctx_sync(k);
    cr_assert_arr_eq(dst, src, sizeof src);
    cz_kmem_free(k, d);
    cz_kctx_reserve(k, &RES); /* idempotent */
    cz_kctx_free(k);
}

/* ---- lookups and copies (exact) ---- */

Test(kernels, embed_exact)
{
    uint32_t vocab = 300, dim = 37, n = 20;
    uint64_t s = 1;
    float *tab = frand(&s, (size_t)vocab * dim, 3.0f);
    int32_t ids[20];
    for (uint32_t i = 0; i < n; i++)
        ids[i] = (int32_t)irand(&s, vocab);
    ids[3] = ids[7]; /* repeated ids */
    for (uint32_t t = 1; t <= 2; t++) {
        cz_kctx *k = mk(t);
        for (size_t d = 0; d < 3; d++) {
            void *w = store(DTS[d], tab, (size_t)vocab * dim);
            float out[20 * 37];
            cz_kernels_cpu()->embed(k, out, w, DTS[d], ids, n, dim);
            for (uint32_t i = 0; i < n; i++)
                for (uint32_t j = 0; j < dim; j++)
                    cr_assert_eq(out[i * dim + j], (float)at(DTS[d], w, (size_t)ids[i] * dim + j));
            free(w);
        }
        /* every 16-bit pattern through the 8-wide widening */
        uint16_t *all = malloc(65536 * 2);
        for (uint32_t h = 0; h < 65536; h++)
            all[h] = (uint16_t)h;
        float *o = malloc(65536 * sizeof *o);
        int32_t zero = 0;
        for (int d = 1; d < 3; d++) {
            cz_kernels_cpu()->embed(k, o, all, DTS[d], &zero, 1, 65536);
            for (uint32_t h = 0; h < 65536; h++) {
                float r = d == 1 ? cz_bf16_to_f32((uint16_t)h) : cz_f16_to_f32((uint16_t)h);
                cr_assert(fbits(o[h]) == fbits(r) || (isnan(o[h]) && isnan(r)), "%04x", h);
            }
        }
        free(all);
        free(o);
        cz_kctx_free(k);
    }
    free(tab);
}

Test(kernels, gather_copy_blocks_exact)
{
    uint64_t s = 2;
    uint32_t rows = 50, dim = 13, n = 17;
    float *x = frand(&s, (size_t)rows * dim, 1.0f);
    int32_t idx[17];
    for (uint32_t i = 0; i < n; i++)
        idx[i] = (int32_t)irand(&s, rows);
    /* a pool of 12 blocks of 3 layers' KV, a NaN with a payload among them */
    size_t bb = 96, pool_n = 12;
    uint8_t *pool = malloc(pool_n * bb), *host = malloc(5 * bb), *back = malloc(pool_n * bb);
    for (size_t i = 0; i < pool_n * bb; i++)
        pool[i] = (uint8_t)rng_next(&s);
    uint32_t nan = 0x7f812345;
    memcpy(pool + 3 * bb + 8, &nan, 4);
    int32_t src_ids[5] = {3, 0, 11, 7, 3}, dst_ids[5] = {1, 2, 4, 5, 9};
    for (uint32_t t = 1; t <= 2; t++) {
        cz_kctx *k = mk(t);
        const cz_kernels *K = cz_kctx_ops(k);
        float out[17 * 13];
        K->gather_rows(k, out, x, idx, n, dim);
        for (uint32_t i = 0; i < n; i++)
            cr_assert_arr_eq(out + i * dim, x + (size_t)idx[i] * dim, dim * sizeof(float));
        /* pool -> packed host buffer -> other pool blocks, bit for bit */
        memset(host, 0, 5 * bb);
        memset(back, 0xab, pool_n * bb);
        K->copy_blocks(k, host, bb, NULL, pool, bb, src_ids, bb, 5);
        K->copy_blocks(k, back, bb, dst_ids, host, bb, NULL, bb, 5);
        for (int i = 0; i < 5; i++)
            cr_assert_arr_eq(back + dst_ids[i] * bb, pool + src_ids[i] * bb, bb);
        cr_assert_eq(back[0], 0xab); /* untouched block 0 */
        cr_assert_eq(back[3 * bb], 0xab);
        cz_kctx_free(k);
    }
    free(x);
    free(pool);
    free(host);
    free(back);
}

Test(kernels, kv_write_slots)
{
    uint64_t s = 3;
    for (size_t d = 0; d < 3; d++) {
        cz_dtype dt = DTS[d];
        uint32_t bt = 4, kvh = 2, hd = 6, blocks = 6, n = 9, ld = 2 * kvh * hd + 5;
        size_t row = (size_t)kvh * hd, stride = (size_t)bt * row * 2; /* two layers/block */
        size_t es = cz_dtype_size(dt), bytes = blocks * stride * es;
        float *knew = frand(&s, (size_t)n * ld, 2.0f), *vnew = frand(&s, (size_t)n * ld, 2.0f);
        int64_t slots[9] = {0, 5, 23, -1, 7, 12, 4, 22, -3};
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            uint8_t *base = malloc(bytes);
            memset(base, 0x5a, bytes);
            /* layer 1 of a block-by-block pool: K at offset 0 of the block's layer, V after */
            cz_kv_layer kv = {.k = base + row * bt * es, .v = NULL, .dt = dt,
                              .block_stride = stride, .block_tokens = bt, .kv_heads = kvh,
                              .head_dim = hd};
            uint8_t *vbase = malloc(bytes);
            memset(vbase, 0x5a, bytes);
            kv.v = vbase;
            cz_kctx_ops(k)->kv_write(k, &kv, knew + 1, vnew + 2, ld, slots, n);
            uint8_t *kexp = malloc(bytes), *vexp = malloc(bytes);
            memset(kexp, 0x5a, bytes);
            memset(vexp, 0x5a, bytes);
            for (uint32_t i = 0; i < n; i++) {
                if (slots[i] < 0)
                    continue;
                size_t b = (size_t)slots[i] / bt, off = (size_t)slots[i] % bt;
                size_t e0 = b * stride + off * row;
                void *kc = store(dt, knew + 1 + (size_t)i * ld, row);
                void *vc = store(dt, vnew + 2 + (size_t)i * ld, row);
                memcpy(kexp + row * bt * es + e0 * es, kc, row * es);
                memcpy(vexp + e0 * es, vc, row * es);
                free(kc);
                free(vc);
            }
            cr_assert_arr_eq(base, kexp, bytes, "K, dtype %s", cz_dtype_name(dt));
            cr_assert_arr_eq(vbase, vexp, bytes, "V, dtype %s", cz_dtype_name(dt));
            free(base);
            free(vbase);
            free(kexp);
            free(vexp);
            cz_kctx_free(k);
        }
        free(knew);
        free(vnew);
    }
}

/* ---- elementwise and row ops ---- */

Test(kernels, norms)
{
    static const uint32_t shapes[][2] = {{1, 2048}, {7, 33}, {48, 128}, {300, 5}, {3, 1}};
    uint64_t s = 4;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        uint32_t rows = shapes[c][0], dim = shapes[c][1];
        size_t n = (size_t)rows * dim;
        float *x = frand(&s, n, 4.0f), *w = frand(&s, dim, 1.5f), *b = frand(&s, dim, 1.0f);
        for (size_t i = 0; i < n; i++)
            x[i] += 0.5f; /* a mean for layernorm to remove */
        double *ref = malloc(n * sizeof *ref), *ref2 = malloc(n * sizeof *ref2);
        for (uint32_t r = 0; r < rows; r++) {
            double ss = 0, mean = 0, var = 0;
            for (uint32_t i = 0; i < dim; i++) {
                ss += (double)x[r * dim + i] * x[r * dim + i];
                mean += x[r * dim + i];
            }
            mean /= dim;
            for (uint32_t i = 0; i < dim; i++)
                var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
            var /= dim;
            for (uint32_t i = 0; i < dim; i++) {
                ref[r * dim + i] = x[r * dim + i] / sqrt(ss / dim + 1e-6) * w[i];
                ref2[r * dim + i] = (x[r * dim + i] - mean) / sqrt(var + 1e-5) * w[i] +
                                    (c % 2 ? b[i] : 0);
            }
        }
        float *o[2], *o2[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            const cz_kernels *K = cz_kctx_ops(k);
            o[t - 1] = malloc(n * sizeof(float));
            o2[t - 1] = malloc(n * sizeof(float));
            memcpy(o[t - 1], x, n * sizeof(float));
            K->rmsnorm(k, o[t - 1], o[t - 1], w, 1e-6f, rows, dim); /* in place */
            K->layernorm(k, o2[t - 1], x, w, c % 2 ? b : NULL, 1e-5f, rows, dim);
            cz_kctx_free(k);
        }
        check2("rmsnorm", o[0], o[1], ref, n, TOL_ELEM);
        check2("layernorm", o2[0], o2[1], ref2, n, TOL_ELEM);
        for (int t = 0; t < 2; t++) {
            free(o[t]);
            free(o2[t]);
        }
        free(x);
        free(w);
        free(b);
        free(ref);
        free(ref2);
    }
}

Test(kernels, activations)
{
    static const size_t sizes[] = {1, 7, 1000, 100003};
    uint64_t s = 5;
    for (size_t c = 0; c < CZ_ARRAY_LEN(sizes); c++) {
        size_t n = sizes[c];
        float *a = frand(&s, n, 6.0f), *b = frand(&s, n, 6.0f);
        double *rg = malloc(n * sizeof *rg), *rs = malloc(n * sizeof *rs), *ra = malloc(n * sizeof *ra);
        for (size_t i = 0; i < n; i++) {
            rg[i] = 0.5 * a[i] * (1 + erf(a[i] / sqrt(2.0)));
            rs[i] = a[i] / (1 + exp(-(double)a[i]));
            ra[i] = (float)(a[i] + b[i]); /* float addition, exactly */
        }
        float *og[2], *os[2], *oa[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            const cz_kernels *K = cz_kctx_ops(k);
            og[t - 1] = malloc(n * 4);
            os[t - 1] = malloc(n * 4);
            oa[t - 1] = malloc(n * 4);
            memcpy(og[t - 1], a, n * 4);
            memcpy(os[t - 1], a, n * 4);
            memcpy(oa[t - 1], b, n * 4);
            K->gelu(k, og[t - 1], n);
            K->silu(k, os[t - 1], n);
            K->add(k, oa[t - 1], a, oa[t - 1], n); /* out aliases b */
            cz_kctx_free(k);
        }
        check2("gelu", og[0], og[1], rg, n, TOL_ELEM);
        check2("silu", os[0], os[1], rs, n, TOL_ELEM);
        check2("add", oa[0], oa[1], ra, n, 0);
        for (int t = 0; t < 2; t++) {
            free(og[t]);
            free(os[t]);
            free(oa[t]);
        }
        free(a);
        free(b);
        free(rg);
        free(rs);
        free(ra);
    }
}

Test(kernels, silu_mul_transpose)
{
    static const uint32_t shapes[][2] = {{1, 8192}, {5, 37}, {64, 96}, {33, 1}};
    uint64_t s = 6;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        uint32_t n = shapes[c][0], in = shapes[c][1];
        float *gu = frand(&s, (size_t)n * 2 * in, 5.0f);
        double *ref = malloc((size_t)n * in * sizeof *ref);
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t i = 0; i < in; i++) {
                double g = gu[(size_t)r * 2 * in + i], u = gu[(size_t)r * 2 * in + in + i];
                ref[(size_t)r * in + i] = g / (1 + exp(-g)) * u;
            }
        float *o[2], *tr[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            o[t - 1] = malloc((size_t)n * in * 4);
            tr[t - 1] = malloc((size_t)n * 2 * in * 4);
            cz_kctx_ops(k)->silu_mul(k, o[t - 1], gu, n, in);
            cz_kctx_ops(k)->transpose(k, tr[t - 1], gu, n, 2 * in);
            cz_kctx_free(k);
        }
        check2("silu_mul", o[0], o[1], ref, (size_t)n * in, TOL_ELEM);
        for (int t = 0; t < 2; t++) {
            for (uint32_t r = 0; r < n; r++)
                for (uint32_t i = 0; i < 2 * in; i++)
                    cr_assert_eq(tr[t][(size_t)i * n + r], gu[(size_t)r * 2 * in + i]);
            free(o[t]);
            free(tr[t]);
        }
        free(gu);
        free(ref);
    }
}

Test(kernels, rope)
{
    static const uint32_t shapes[][3] = {{1, 32, 128}, {9, 3, 64}, {40, 2, 6}, {2, 1, 512}};
    uint64_t s = 7;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        uint32_t n = shapes[c][0], heads = shapes[c][1], hd = shapes[c][2];
        uint32_t ld = heads * hd * 3 + 4; /* q inside a fused qkv row */
        float *x = frand(&s, (size_t)n * ld, 2.0f), *inv = malloc(hd / 2 * sizeof *inv);
        for (uint32_t i = 0; i < hd / 2; i++)
            inv[i] = (float)pow(500000.0, -2.0 * i / hd);
        int32_t *pos = malloc(n * sizeof *pos);
        for (uint32_t i = 0; i < n; i++)
            pos[i] = (int32_t)irand(&s, 40000);
        size_t tot = (size_t)n * ld;
        double *ref = malloc(tot * sizeof *ref);
        for (size_t i = 0; i < tot; i++)
            ref[i] = x[i];
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t h = 0; h < heads; h++)
                for (uint32_t i = 0; i < hd / 2; i++) {
                    double a = (float)pos[r] * inv[i]; /* the float32 angle, as transformers */
                    size_t p0 = (size_t)r * ld + h * hd + i, p1 = p0 + hd / 2;
                    ref[p0] = x[p0] * cos(a) - x[p1] * sin(a);
                    ref[p1] = x[p1] * cos(a) + x[p0] * sin(a);
                }
        float *o[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            o[t - 1] = malloc(tot * 4);
            memcpy(o[t - 1], x, tot * 4);
            cz_kctx_ops(k)->rope(k, o[t - 1], ld, pos, inv, n, heads, hd);
            cz_kctx_free(k);
        }
        check2("rope", o[0], o[1], ref, tot, TOL_ROPE);
        for (uint32_t r = 0; r < n; r++) /* the rest of the row untouched */
            for (uint32_t i = heads * hd; i < ld; i++)
                cr_assert_eq(o[0][(size_t)r * ld + i], x[(size_t)r * ld + i]);
        free(o[0]);
        free(o[1]);
        free(x);
        free(inv);
        free(pos);
        free(ref);
    }
}

/* ---- matmul ---- */

static void ref_matmul(double *ref, const float *x, const void *w, cz_dtype dt, const float *bias,
                       uint32_t m, uint32_t n, uint32_t kd)
{
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            double acc = bias ? bias[j] : 0;
            for (uint32_t l = 0; l < kd; l++)
                acc += (double)x[(size_t)i * kd + l] * at(dt, w, (size_t)j * kd + l);
            ref[(size_t)i * n + j] = acc;
        }
}

Test(kernels, matmul)
{
    /* m, n, kd: decode rows (GEMV kernel), odd sizes, prefill rows (sgemm, panels),
     * a kd so wide that n spans several panels, and kd 0 (the bias alone) with few and
     * with many rows */
    static const uint32_t shapes[][3] = {{1, 37, 129}, {1, 64, 2048}, {1, 21, 4500},
                                         {2, 64, 256}, {3, 5, 7}, {4, 19, 33}, {5, 100, 200},
                                         {8, 33, 70}, {9, 40, 64}, {64, 130, 300},
                                         {200, 24, 72}, {9, 72, 16384}, {7, 50, 300},
                                         {6, 16, 24}, {4, 33, 0}, {20, 17, 0}, {3, 9, 0},
                                         {41, 8, 0}};
    uint64_t s = 8;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        uint32_t m = shapes[c][0], n = shapes[c][1], kd = shapes[c][2];
        float *x = frand(&s, (size_t)m * kd, 1.0f), *wf = frand(&s, (size_t)n * kd, 0.5f);
        float *bias = c % 2 ? frand(&s, n, 1.0f) : NULL;
        double *ref = malloc((size_t)m * n * sizeof *ref);
        for (size_t d = 0; d < 3; d++) {
            void *w = store(DTS[d], wf, (size_t)n * kd);
            ref_matmul(ref, x, w, DTS[d], bias, m, n, kd);
            float *o[2];
            for (uint32_t t = 1; t <= 2; t++) {
                cz_kctx *k = mk(t);
                o[t - 1] = malloc((size_t)m * n * 4);
                for (size_t i = 0; i < (size_t)m * n; i++) /* poisoned: every element written */
                    o[t - 1][i] = NAN;
                cz_kctx_ops(k)->matmul(k, o[t - 1], x, w, DTS[d], bias, m, n, kd);
                cz_kctx_free(k);
            }
            char what[96];
            snprintf(what, sizeof what, "matmul %s m %u n %u kd %u", cz_dtype_name(DTS[d]), m, n, kd);
            check2(what, o[0], o[1], ref, (size_t)m * n, TOL_MATMUL);
            if (m <= 8) { /* the decode GEMV has AVX2 loops: the portable ones too */
                cz_kctx *kp = mk(2);
                cz__kctx_cpu_set_avx2(kp, false);
                cz_kctx_ops(kp)->matmul(kp, o[0], x, w, DTS[d], bias, m, n, kd);
                double e = nmse(o[0], ref, (size_t)m * n);
                cr_assert(e <= TOL_MATMUL, "%s: portable loops: NMSE %.3g", what, e);
                cz_kctx_free(kp);
            }
            free(o[0]);
            free(o[1]);
            free(w);
        }
        free(x);
        free(wf);
        free(bias);
        free(ref);
    }
}

/* ---- attention ---- */

typedef struct {
    uint32_t bt, kv_heads, heads, hd, window, sinks;
} attn_cfg;

/* Softmax attention of one query (hd) over the keys kept, in double. */
static void ref_attend(double *out, const float *q, uint32_t hd, double scale, size_t nkeys,
                       const bool *kept, double (*key)(void *, size_t, uint32_t),
                       double (*val)(void *, size_t, uint32_t), void *ctx)
{
    double mx = -INFINITY, sum = 0;
    double *sc = malloc((nkeys ? nkeys : 1) * sizeof *sc);
    for (size_t t = 0; t < nkeys; t++) {
        if (!kept[t])
            continue;
        double d = 0;
        for (uint32_t i = 0; i < hd; i++)
            d += (double)q[i] * key(ctx, t, i);
        sc[t] = d * scale;
        if (sc[t] > mx)
            mx = sc[t];
    }
    for (uint32_t i = 0; i < hd; i++)
        out[i] = 0;
    for (size_t t = 0; t < nkeys; t++) {
        if (!kept[t])
            continue;
        double p = exp(sc[t] - mx);
        sum += p;
        for (uint32_t i = 0; i < hd; i++)
            out[i] += p * val(ctx, t, i);
    }
    for (uint32_t i = 0; i < hd; i++)
        out[i] /= sum;
    free(sc);
}

typedef struct {
    const cz_kv_layer *kv;
    const int32_t *table; /* this sequence's row */
    uint32_t g;           /* KV head */
} paged_ref;

static double paged_at(const paged_ref *r, const void *base, size_t t, uint32_t i)
{
    const cz_kv_layer *kv = r->kv;
    size_t e = (size_t)r->table[t / kv->block_tokens] * kv->block_stride +
               (t % kv->block_tokens) * kv->kv_heads * kv->head_dim + (size_t)r->g * kv->head_dim + i;
    return at(kv->dt, base, e);
}
static double paged_key(void *c, size_t t, uint32_t i)
{
    paged_ref *r = c;
    return paged_at(r, r->kv->k, t, i);
}
static double paged_val(void *c, size_t t, uint32_t i)
{
    paged_ref *r = c;
    return paged_at(r, r->kv->v, t, i);
}

static bool kept_paged(int64_t t, int64_t p, uint32_t window, uint32_t sinks)
{
    return t <= p && (!window || t > p - window || t < sinks);
}

/* Writes NaN over position t's K and V rows (all KV heads) of sequence row `table`. */
static void poison(const cz_kv_layer *kv, const int32_t *table, size_t t)
{
    size_t row = (size_t)kv->kv_heads * kv->head_dim, es = cz_dtype_size(kv->dt);
    float *nan = malloc(row * sizeof *nan);
    for (size_t i = 0; i < row; i++)
        nan[i] = NAN;
    void *st = store(kv->dt, nan, row);
    size_t e = (size_t)table[t / kv->block_tokens] * kv->block_stride + (t % kv->block_tokens) * row;
    memcpy((char *)kv->k + e * es, st, row * es);
    memcpy((char *)kv->v + e * es, st, row * es);
    free(st);
    free(nan);
}

/* A varlen batch over a paged cache: decodes, a chunked prefill over a cached prefix and
 * fresh prefills, in shuffled physical blocks of a pool laid out block by block over two
 * layers (this is layer 1); with a window, blocks no query keeps are -1 in the table, and
 * every position no query keeps (the tails of last blocks too) holds NaN, so a read of one
 * shows. Then the KV round trip: sequence 3's blocks go to a packed host buffer, the pool
 * blocks are overwritten, and they come back in reverse physical order, one of them moved
 * again inside the pool to a spare block; the output must be bit for bit the same. */
static void run_paged(const attn_cfg *c, cz_dtype dt, uint64_t seed, uint32_t ns,
                      const uint32_t *prefix, const uint32_t *nq)
{
    const uint32_t ld_q = c->heads * c->hd + 2 * c->kv_heads * c->hd, ld_o = c->heads * c->hd + 3;
    uint64_t s = seed;
    int32_t qsl[6] = {0}, lens[5];
    CZ_ASSERT(ns >= 1 && ns <= 5);
    uint32_t max_blocks = 0, total_blocks = 0;
    for (uint32_t b = 0; b < ns; b++) {
        lens[b] = (int32_t)(prefix[b] + nq[b]);
        qsl[b + 1] = qsl[b] + (int32_t)nq[b];
        uint32_t nb = (lens[b] + c->bt - 1) / c->bt;
        max_blocks = nb > max_blocks ? nb : max_blocks;
        total_blocks += nb;
    }
    uint32_t pool_blocks = total_blocks + 3, rows = (uint32_t)qsl[ns];
    int32_t *perm = malloc(pool_blocks * sizeof *perm), *table = malloc(ns * max_blocks * sizeof *table);
    for (uint32_t i = 0; i < pool_blocks; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = pool_blocks - 1; i > 0; i--) {
        uint32_t j = irand(&s, i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint32_t b = 0, used = 0; b < ns; b++)
        for (uint32_t j = 0; j < max_blocks; j++)
            table[b * max_blocks + j] = j * c->bt < (uint32_t)lens[b] ? perm[used++] : -1;
    size_t row = (size_t)c->kv_heads * c->hd, stride = 2 * (size_t)c->bt * row, es = cz_dtype_size(dt);
    uint8_t *pool_k = malloc(pool_blocks * stride * es), *pool_v = malloc(pool_blocks * stride * es);
    memset(pool_k, 0, pool_blocks * stride * es);
    memset(pool_v, 0, pool_blocks * stride * es);
    cz_kv_layer kv = {.k = pool_k + (size_t)c->bt * row * es, .v = pool_v + (size_t)c->bt * row * es,
                      .dt = dt, .block_stride = stride, .block_tokens = c->bt,
                      .kv_heads = c->kv_heads, .head_dim = c->hd};
    float *q = frand(&s, (size_t)rows * ld_q, 1.0f);
    float scale = 1.0f / sqrtf((float)c->hd);

    /* fill every position's K and V through kv_write (tested on its own) */
    cz_kctx *k1 = mk(1);
    for (uint32_t b = 0; b < ns; b++) {
        uint32_t L = (uint32_t)lens[b];
        float *kn = frand(&s, L * row, 1.5f), *vn = frand(&s, L * row, 1.0f);
        int64_t *slots = malloc(L * sizeof *slots);
        for (uint32_t t = 0; t < L; t++)
            slots[t] = (int64_t)table[b * max_blocks + t / c->bt] * c->bt + t % c->bt;
        cz_kctx_ops(k1)->kv_write(k1, &kv, kn, vn, (uint32_t)row, slots, L);
        free(kn);
        free(vn);
        free(slots);
    }
    cz_kctx_free(k1);

    /* the reference, and -1 for blocks no query of the sequence keeps */
    size_t on = (size_t)rows * ld_o;
    double *ref = calloc(on, sizeof *ref);
    for (uint32_t b = 0; b < ns; b++) {
        uint32_t L = (uint32_t)lens[b];
        bool *kept = malloc(L), *any = calloc(L, 1);
        for (int32_t r = qsl[b]; r < qsl[b + 1]; r++) {
            int64_t p = lens[b] - (qsl[b + 1] - qsl[b]) + (r - qsl[b]);
            for (uint32_t t = 0; t < L; t++) {
                kept[t] = kept_paged(t, p, c->window, c->sinks);
                any[t] |= kept[t];
            }
            for (uint32_t h = 0; h < c->heads; h++) {
                paged_ref pr = {&kv, table + b * max_blocks, h / (c->heads / c->kv_heads)};
                ref_attend(ref + (size_t)r * ld_o + h * c->hd, q + (size_t)r * ld_q + h * c->hd,
                           c->hd, scale, L, kept, paged_key, paged_val, &pr);
            }
        }
        for (uint32_t j = 0; j * c->bt < L; j++) {
            bool need = false;
            for (uint32_t t = j * c->bt; t < (j + 1) * c->bt; t++) {
                if (t < L && any[t])
                    need = true;
                else
                    poison(&kv, table + b * max_blocks, t);
            }
            if (!need)
                table[b * max_blocks + j] = -1;
        }
        free(kept);
        free(any);
    }
    float *o[2];
    for (uint32_t t = 1; t <= 2; t++) {
        cz_kctx *k = mk(t);
        o[t - 1] = calloc(on, sizeof(float));
        cz_kctx_ops(k)->attn_paged(k, o[t - 1], ld_o, q, ld_q, &kv, qsl, lens, table, max_blocks,
                                   ns, c->heads, scale, c->window, c->sinks);
        cz_kctx_free(k);
    }
    char what[128];
    snprintf(what, sizeof what, "attn_paged %s bt %u kvh %u heads %u hd %u window %u sinks %u",
             cz_dtype_name(dt), c->bt, c->kv_heads, c->heads, c->hd, c->window, c->sinks);
    check2(what, o[0], o[1], ref, on, TOL_ATTN);
    {
        cz_kctx *kp = mk(1);
        cz__kctx_cpu_set_avx2(kp, false);
        float *op = calloc(on, sizeof(float));
        cz_kctx_ops(kp)->attn_paged(kp, op, ld_o, q, ld_q, &kv, qsl, lens, table, max_blocks, ns,
                                    c->heads, scale, c->window, c->sinks);
        double e = nmse(op, ref, on);
        cr_assert(e <= TOL_ATTN, "%s: portable loops: NMSE %.3g", what, e);
        cz_kctx_free(kp);
        free(op);
    }

    if (ns < 4) {
        free(o[0]);
        free(o[1]);
        free(ref);
        free(q);
        free(pool_k);
        free(pool_v);
        free(perm);
        free(table);
        return;
    }
    /* offload sequence 3's blocks (whole blocks: both layers) and reload them elsewhere */
    cz_kctx *k = mk(2);
    const cz_kernels *K = cz_kctx_ops(k);
    int32_t *row3 = table + 3 * max_blocks, ids[64], back[64];
    uint32_t nb = 0;
    for (uint32_t j = 0; j < max_blocks; j++)
        if (row3[j] >= 0)
            ids[nb++] = row3[j];
    cr_assert(nb > 0 && nb <= 64);
    size_t bbytes = stride * es;
    uint8_t *host_k = malloc(nb * bbytes), *host_v = malloc(nb * bbytes);
    K->copy_blocks(k, host_k, bbytes, NULL, pool_k, bbytes, ids, bbytes, nb);
    K->copy_blocks(k, host_v, bbytes, NULL, pool_v, bbytes, ids, bbytes, nb);
    for (uint32_t i = 0; i < nb; i++) {
        memset(pool_k + (size_t)ids[i] * bbytes, 0xff, bbytes); /* NaN in every dtype */
        memset(pool_v + (size_t)ids[i] * bbytes, 0xff, bbytes);
        back[i] = ids[nb - 1 - i];
    }
    K->copy_blocks(k, pool_k, bbytes, back, host_k, bbytes, NULL, bbytes, nb);
    K->copy_blocks(k, pool_v, bbytes, back, host_v, bbytes, NULL, bbytes, nb);
    int32_t spare = perm[pool_blocks - 1]; /* never in a table */
    K->copy_blocks(k, pool_k, bbytes, &spare, pool_k, bbytes, &back[0], bbytes, 1);
    K->copy_blocks(k, pool_v, bbytes, &spare, pool_v, bbytes, &back[0], bbytes, 1);
    memset(pool_k + (size_t)back[0] * bbytes, 0xff, bbytes);
    memset(pool_v + (size_t)back[0] * bbytes, 0xff, bbytes);
    back[0] = spare;
    for (uint32_t j = 0, i = 0; j < max_blocks; j++)
        if (row3[j] >= 0)
            row3[j] = back[i++];
    float *o3 = calloc(on, sizeof(float));
    K->attn_paged(k, o3, ld_o, q, ld_q, &kv, qsl, lens, table, max_blocks, ns, c->heads, scale,
                  c->window, c->sinks);
    cr_assert_arr_eq(o3, o[1], on * sizeof(float), "%s: after the KV round trip", what);
    cz_kctx_free(k);
    free(o3);
    free(host_k);
    free(host_v);
    free(o[0]);
    free(o[1]);
    free(ref);
    free(q);
    free(pool_k);
    free(pool_v);
    free(perm);
    free(table);
}

Test(kernels, attn_paged)
{
    static const attn_cfg cfgs[] = {
        {16, 2, 6, 32, 0, 0},  /* GQA 3 */
        {5, 1, 72, 8, 0, 0},   /* MQA, a group wider than one tile */
        {4, 2, 4, 20, 7, 3},   /* window with sinks, unread blocks -1 */
        {16, 4, 16, 16, 10, 0}, /* window without sinks */
        {8, 2, 8, 32, 32, 4},  /* GQA 4, a window across blocks, sinks inside block 0 */
        {4, 1, 8, 16, 6, 9},   /* MQA, sinks over three blocks and wider than the window */
        {16, 2, 2, 8, 1, 0},   /* a window of one: each query sees only itself */
        {4, 2, 6, 20, 300, 2}, /* a window longer than every sequence: all kept */
        {8, 1, 2, 38, 5, 2}    /* a head_dim that is not a multiple of 4 */
    };
    static const uint32_t prefix[] = {36, 30, 0, 199, 0}, nq[] = {1, 20, 9, 1, 70};
    for (size_t c = 0; c < CZ_ARRAY_LEN(cfgs); c++)
        for (size_t d = 0; d < 3; d++)
            run_paged(&cfgs[c], DTS[d], 100 + c * 3 + d, 5, prefix, nq);
}

/* Decode-only batches of one and two sequences: the items of one-row tiles cover several
 * KV heads, fewer of them when the items would not occupy the threads. */
Test(kernels, attn_paged_decodes)
{
    static const attn_cfg cfgs[] = {{16, 4, 16, 32, 0, 0}, {8, 8, 32, 16, 50, 4},
                                    {16, 2, 128, 8, 0, 0}};
    static const uint32_t prefix[] = {299, 40}, nq[] = {1, 1};
    for (size_t c = 0; c < CZ_ARRAY_LEN(cfgs); c++)
        for (uint32_t ns = 1; ns <= 2; ns++)
            run_paged(&cfgs[c], DTS[c % 3], 200 + c * 2 + ns, ns, prefix, nq);
}

typedef struct {
    const float *k, *v;
    uint32_t ld, off;
} dense_ref;
static double dense_key(void *c, size_t t, uint32_t i)
{
    dense_ref *r = c;
    return r->k[t * r->ld + r->off + i];
}
static double dense_val(void *c, size_t t, uint32_t i)
{
    dense_ref *r = c;
    return r->v[t * r->ld + r->off + i];
}

Test(kernels, attn_dense)
{
    static const struct {
        bool causal;
        uint32_t window;
    } modes[] = {{true, 0}, {true, 5}, {false, 0}, {false, 4}};
    const uint32_t heads = 6, kvh = 3, hd = 16, ns = 3, ld_q = heads * hd + 7;
    const uint32_t ld_kv = 2 * kvh * hd + 1, ld_o = heads * hd + 2;
    const int32_t cu[4] = {0, 1, 18, 88};
    const uint32_t rows = 88;
    uint64_t s = 9;
    float *q = frand(&s, (size_t)rows * ld_q, 1.0f), *kk = frand(&s, (size_t)rows * ld_kv, 1.5f);
    float *v = frand(&s, (size_t)rows * ld_kv, 1.0f);
    float scale = 0.3f;
    for (size_t m = 0; m < CZ_ARRAY_LEN(modes); m++) {
        size_t on = (size_t)rows * ld_o;
        double *ref = calloc(on, sizeof *ref);
        for (uint32_t b = 0; b < ns; b++) {
            uint32_t L = (uint32_t)(cu[b + 1] - cu[b]);
            bool *kept = malloc(L);
            for (uint32_t i = 0; i < L; i++) {
                for (uint32_t j = 0; j < L; j++) {
                    int64_t d = (int64_t)i - j;
                    uint32_t w = modes[m].window;
                    kept[j] = modes[m].causal ? d >= 0 && (!w || d < w) : !w || llabs(d) < w;
                }
                for (uint32_t h = 0; h < heads; h++) {
                    dense_ref r = {kk + (size_t)cu[b] * ld_kv, v + (size_t)cu[b] * ld_kv, ld_kv,
                                   h / (heads / kvh) * hd};
                    ref_attend(ref + (size_t)(cu[b] + i) * ld_o + h * hd,
                               q + (size_t)(cu[b] + i) * ld_q + h * hd, hd, scale, L, kept,
                               dense_key, dense_val, &r);
                }
            }
            free(kept);
        }
        float *o[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            o[t - 1] = calloc(on, sizeof(float));
            cz_kctx_ops(k)->attn_dense(k, o[t - 1], ld_o, q, ld_q, kk, v, ld_kv, cu, ns, heads,
                                       kvh, hd, scale, modes[m].causal, modes[m].window);
            cz_kctx_free(k);
        }
        char what[64];
        snprintf(what, sizeof what, "attn_dense causal %d window %u", modes[m].causal,
                 modes[m].window);
        check2(what, o[0], o[1], ref, on, TOL_ATTN);
        cz_kctx *kp = mk(2);
        cz__kctx_cpu_set_avx2(kp, false);
        float *op = calloc(on, sizeof(float));
        cz_kctx_ops(kp)->attn_dense(kp, op, ld_o, q, ld_q, kk, v, ld_kv, cu, ns, heads, kvh, hd,
                                    scale, modes[m].causal, modes[m].window);
        double ep = nmse(op, ref, on);
        cr_assert(ep <= TOL_ATTN, "%s: portable loops: NMSE %.3g", what, ep);
        cz_kctx_free(kp);
        free(op);
        free(o[0]);
        free(o[1]);
        free(ref);
    }
    free(q);
    free(kk);
    free(v);
}

/* ---- convolutions ---- */

Test(kernels, conv1d)
{
    /* cin, cout, len, ksize, stride, dilation, pad_l, pad_r, groups: direct loops (narrow
     * groups, depthwise) and im2col tiles through sgemm (wide groups), strides, dilations,
     * causal and asymmetric padding, a sequence shorter than the kernel, two tiles */
    static const uint32_t shapes[][9] = {
        {1, 1, 1, 1, 1, 1, 0, 0, 1},       /* one tap of one sample */
        {3, 5, 40, 3, 1, 1, 1, 1, 1},      /* direct, "same" padding */
        {4, 6, 33, 5, 2, 1, 4, 0, 2},      /* direct, strided, causal, groups 2 */
        {2, 4, 17, 3, 3, 2, 1, 3, 1},      /* direct, stride 3, dilation 2, right padding */
        {16, 16, 50, 7, 1, 3, 18, 0, 16},  /* depthwise, dilated, causal */
        {32, 24, 64, 3, 3, 2, 0, 5, 1},    /* im2col, stride 3, dilation 2 */
        {64, 32, 29, 4, 1, 1, 2, 1, 2},    /* im2col, groups 2 */
        {8, 8, 2, 5, 1, 1, 2, 2, 1},       /* im2col, sequence shorter than the kernel */
        {24, 16, 10, 3, 4, 1, 0, 0, 1},    /* stride above the kernel: inputs skipped */
        {128, 16, 2300, 4, 1, 1, 3, 0, 1}, /* im2col in two tiles */
    };
    uint64_t s = 20;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        const uint32_t *h = shapes[c];
        uint32_t cin = h[0], cout = h[1], len = h[2], ks = h[3], st = h[4], dil = h[5];
        uint32_t pl = h[6], pr = h[7], g = h[8], cig = cin / g, cog = cout / g;
        uint32_t lout = (len + pl + pr - dil * (ks - 1) - 1) / st + 1;
        float *x = frand(&s, (size_t)cin * len, 1.0f), *w = frand(&s, (size_t)cout * cig * ks, 0.3f);
        float *bias = c % 2 ? frand(&s, cout, 1.0f) : NULL;
        double *ref = malloc((size_t)cout * lout * sizeof *ref);
        for (uint32_t co = 0; co < cout; co++)
            for (uint32_t l = 0; l < lout; l++) {
                double acc = bias ? bias[co] : 0;
                for (uint32_t ci = 0; ci < cig; ci++)
                    for (uint32_t kk = 0; kk < ks; kk++) {
                        int64_t at_ = (int64_t)l * st + (int64_t)kk * dil - pl;
                        if (at_ >= 0 && at_ < len)
                            acc += (double)x[(size_t)(co / cog * cig + ci) * len + at_] *
                                   w[((size_t)co * cig + ci) * ks + kk];
                    }
                ref[(size_t)co * lout + l] = acc;
            }
        float *o[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            o[t - 1] = malloc((size_t)cout * lout * 4);
            cz_kctx_ops(k)->conv1d(k, o[t - 1], x, w, bias, cin, cout, len, ks, st, dil, pl, pr, g);
            cz_kctx_free(k);
        }
        char what[128];
        snprintf(what, sizeof what, "conv1d cin %u cout %u len %u k %u stride %u dil %u pad %u,%u "
                 "groups %u", cin, cout, len, ks, st, dil, pl, pr, g);
        check2(what, o[0], o[1], ref, (size_t)cout * lout, TOL_MATMUL);
        free(o[0]);
        free(o[1]);
        free(x);
        free(w);
        free(bias);
        free(ref);
    }
}

Test(kernels, conv_transpose1d)
{
    /* cin, cout, len, ksize, stride, pad_l, pad_r */
    static const uint32_t shapes[][7] = {
        {1, 1, 1, 1, 1, 0, 0},        /* one tap of one sample */
        {4, 3, 10, 3, 1, 1, 1},       /* stride 1: a "same" convolution's transpose */
        {8, 6, 20, 16, 8, 4, 4},      /* HiFi-GAN's upsampler: kernel 16, stride 8, pad 4 */
        {5, 7, 13, 2, 3, 0, 0},       /* stride above the kernel: gaps hold the bias only */
        {3, 2, 9, 4, 2, 3, 0},        /* asymmetric cut */
        {32, 16, 1, 7, 5, 3, 3},      /* one input position, one output */
        {16, 64, 2500, 8, 4, 2, 2},   /* cout x ksize = 512: two tiles of the panel */
    };
    uint64_t s = 21;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        const uint32_t *h = shapes[c];
        uint32_t cin = h[0], cout = h[1], len = h[2], ks = h[3], st = h[4], pl = h[5], pr = h[6];
        uint32_t full = (len - 1) * st + ks, lout = full - pl - pr;
        float *x = frand(&s, (size_t)cin * len, 1.0f), *w = frand(&s, (size_t)cin * cout * ks, 0.3f);
        float *bias = c % 2 ? NULL : frand(&s, cout, 1.0f);
        double *acc = calloc((size_t)cout * full, sizeof *acc), *ref = malloc((size_t)cout * lout * sizeof *ref);
        for (uint32_t ci = 0; ci < cin; ci++)
            for (uint32_t l = 0; l < len; l++)
                for (uint32_t co = 0; co < cout; co++)
                    for (uint32_t kk = 0; kk < ks; kk++)
                        acc[(size_t)co * full + (size_t)l * st + kk] +=
                            (double)x[(size_t)ci * len + l] * w[((size_t)ci * cout + co) * ks + kk];
        for (uint32_t co = 0; co < cout; co++)
            for (uint32_t l = 0; l < lout; l++)
                ref[(size_t)co * lout + l] = acc[(size_t)co * full + pl + l] + (bias ? bias[co] : 0);
        float *o[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            o[t - 1] = malloc((size_t)cout * lout * 4);
            cz_kctx_ops(k)->conv_transpose1d(k, o[t - 1], x, w, bias, cin, cout, len, ks, st, pl, pr);
            cz_kctx_free(k);
        }
        char what[128];
        snprintf(what, sizeof what, "conv_transpose1d cin %u cout %u len %u k %u stride %u pad %u,%u",
                 cin, cout, len, ks, st, pl, pr);
        check2(what, o[0], o[1], ref, (size_t)cout * lout, TOL_MATMUL);
        free(o[0]);
        free(o[1]);
        free(x);
        free(w);
        free(bias);
        free(acc);
        free(ref);
    }
}

/* ---- argmax and sampling ---- */

/* The first maximum of each row. */
static int32_t ref_argmax(const float *l, uint32_t v)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < v; i++)
        if (l[i] > l[best])
            best = i;
    return (int32_t)best;
}

/* Logits on a grid of 1/8 in [-6, 6] (many ties, probabilities that differ by at least
 * a factor exp(1/16) when they differ at all); every third row peaked on a few ids, every
 * seventh row flat. */
static void grid_logits(uint64_t *s, float *l, uint32_t rows, uint32_t v)
{
    for (uint32_t r = 0; r < rows; r++) {
        float *row = l + (size_t)r * v;
        for (uint32_t i = 0; i < v; i++)
            row[i] = r % 7 == 6 ? 0.5f : (float)((int)irand(s, 97) - 48) / 8;
        if (r % 3 == 0)
            for (int j = 0; j < 3; j++)
                row[irand(s, v)] += 6.0f;
    }
}

Test(kernels, argmax)
{
    static const uint32_t shapes[][2] = {{1, 1}, {5, 2}, {40, 9}, {40, 8192}, {50000, 3}};
    uint64_t s = 22;
    for (size_t c = 0; c < CZ_ARRAY_LEN(shapes); c++) {
        uint32_t rows = shapes[c][0], v = shapes[c][1];
        float *l = malloc((size_t)rows * v * sizeof *l);
        grid_logits(&s, l, rows, v);
        if (rows > 3 && v > 2) {
            l[0 * v + v - 1] = 100.0f;              /* the maximum at the last id */
            l[1 * v + 0] = 100.0f;                  /* at id 0 */
            for (uint32_t i = 0; i < v; i++)        /* all -inf but a tie of two at the end */
                l[2 * v + i] = i + 2 >= v ? -1.0f : -INFINITY;
            for (uint32_t i = 0; i < v; i++)        /* two ids one ulp apart */
                l[3 * v + i] = 0.0f;
            l[3 * v + 1] = 7.0f;
            l[3 * v + 2] = nextafterf(7.0f, 8.0f);
        }
        int32_t *ids[2];
        for (uint32_t t = 1; t <= 2; t++) {
            cz_kctx *k = mk(t);
            ids[t - 1] = malloc(rows * sizeof(int32_t));
            cz_kctx_ops(k)->argmax(k, ids[t - 1], l, rows, v);
            cz_kctx_free(k);
        }
        for (uint32_t r = 0; r < rows; r++) {
            int32_t want = ref_argmax(l + (size_t)r * v, v);
            cr_assert_eq(ids[0][r], want, "argmax vocab %u row %u: %d, want %d", v, r, ids[0][r], want);
            cr_assert_eq(ids[1][r], want, "argmax vocab %u row %u, 2 threads", v, r);
        }
        if (rows > 3 && v > 2) {
            cr_assert_eq(ids[0][2], (int32_t)v - 2);
            cr_assert_eq(ids[0][3], 2);
        }
        free(ids[0]);
        free(ids[1]);
        free(l);
    }
}

/* A row holding NaN or +inf gives -1 (greedy and sampled); -inf is a masked id. */
Test(kernels, nonfinite_logits_give_minus_one)
{
    enum { V = 37, R = 4 };
    float l[R * V];
    for (uint32_t i = 0; i < R * V; i++)
        l[i] = (float)(i % V) / 8.0f;
    l[0 * V + 5] = NAN;
    l[1 * V + 36] = INFINITY;
    l[2 * V + 0] = -INFINITY; /* masked: the row is fine */
    uint64_t counter[R] = {1, 2, 3, 4};
    for (uint32_t t = 1; t <= 2; t++) {
        cz_kctx *k = mk(t);
        int32_t ids[R], sid[R];
        cz_kctx_ops(k)->argmax(k, ids, l, R, V);
        cz_kctx_ops(k)->sample(k, sid, l, R, V, 0.7f, 0, 1.0f, 9, counter);
        cr_assert_eq(ids[0], -1);
        cr_assert_eq(ids[1], -1);
        cr_assert_eq(ids[2], V - 1);
        cr_assert_eq(ids[3], V - 1);
        cr_assert_eq(sid[0], -1);
        cr_assert_eq(sid[1], -1);
        cr_assert(sid[2] >= 1 && sid[2] < V && sid[3] >= 0 && sid[3] < V);
        cz_kctx_free(k);
    }
}

typedef struct {
    float l;
    int32_t id;
} ranked;

/* More likely first (a larger logit), ties to the lower id. */
static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The kept set of `sample`'s contract, in double: top_k of the ranking, then the smallest
 * prefix of it whose mass reaches top_p of the top_k's mass. Fills kept (increasing ids)
 * and p (their unnormalised probabilities exp((l - max) / T)), returns how many; *ntop
 * is the size of the top_k set and *pmargin the least distance, relative to its mass, of
 * a partial sum of the top-p walk from the threshold (the top-p set is only certain when
 * this exceeds float rounding). */
static uint32_t ref_kept(const float *l, uint32_t v, float temp, uint32_t top_k, float top_p,
                         int32_t *kept, double *p, uint32_t *ntop, double *pmargin)
{
    ranked *rk = malloc(v * sizeof *rk);
    float mx = l[0];
    for (uint32_t i = 0; i < v; i++) {
        rk[i] = (ranked){l[i], (int32_t)i};
        mx = l[i] > mx ? l[i] : mx;
    }
    qsort(rk, v, sizeof *rk, by_rank);
    uint32_t nk = top_k && top_k < v ? top_k : v;
    *ntop = nk;
    *pmargin = INFINITY;
    if (top_p < 1.0f) {
        double tot = 0, cum = 0;
        for (uint32_t i = 0; i < nk; i++)
            tot += exp(((double)rk[i].l - mx) / temp);
        double thr = (double)top_p * tot;
        for (uint32_t i = 0; i < nk; i++) {
            cum += exp(((double)rk[i].l - mx) / temp);
            *pmargin = fmin(*pmargin, fabs(cum - thr) / tot);
            if (cum >= thr) {
                nk = i + 1;
                break;
            }
        }
    }
    for (uint32_t i = 0; i < nk; i++)
        kept[i] = rk[i].id;
    qsort(kept, nk, sizeof *kept, by_id);
    for (uint32_t i = 0; i < nk; i++)
        p[i] = exp(((double)l[kept[i]] - mx) / temp);
    free(rk);
    return nk;
}

typedef struct {
    float temperature;
    uint32_t top_k;
    float top_p;
} sample_cfg;

/* Each sampled id against the contract: the kept set (ref_kept), then the first kept id
 * in increasing id order whose cumulative probability exceeds u x total, u =
 * cz_kernel_uniform(seed, counter). Where float rounding could move the answer (the draw
 * within delta of a boundary of the cumulative sum, delta a bound on the float sums'
 * error, or a top-p partial sum that close to the threshold) a neighbouring id is
 * accepted too; everywhere else the id must be the reference's. */
Test(kernels, sample_matches_contract)
{
    static const uint32_t vocabs[] = {1, 7, 64, 1000, 8192};
    static const sample_cfg cfgs[] = {
        {0.0f, 0, 1.0f},    /* greedy */
        {1.0f, 0, 1.0f},    /* the full distribution */
        {0.7f, 40, 1.0f},   /* top-k */
        {1.3f, 0, 0.9f},    /* top-p */
        {0.5f, 5, 0.5f},    /* both */
        {1.0f, 1, 1.0f},    /* top-k 1: greedy */
        {1.0f, 0, 0.0f},    /* top-p 0: the most likely id */
        {2.0f, 3, 0.999f},
        {1.0f, 100000, 1.0f}, /* top-k beyond the vocabulary: all */
    };
    uint64_t s = 23;
    uint32_t checked = 0, exact = 0;
    for (size_t vi = 0; vi < CZ_ARRAY_LEN(vocabs); vi++) {
        uint32_t v = vocabs[vi], rows = v > 1000 ? 12 : 40;
        float *l = malloc((size_t)rows * v * sizeof *l), *copy = malloc((size_t)rows * v * sizeof *l);
        int32_t *kept = malloc(v * sizeof *kept);
        double *p = malloc(v * sizeof *p);
        uint64_t *ctr = malloc(rows * sizeof *ctr);
        grid_logits(&s, l, rows, v);
        memcpy(copy, l, (size_t)rows * v * sizeof *l);
        for (size_t c = 0; c < CZ_ARRAY_LEN(cfgs); c++) {
            const sample_cfg *sc = &cfgs[c];
            uint64_t seed = rng_next(&s);
            for (uint32_t r = 0; r < rows; r++)
                ctr[r] = r % 2 ? rng_next(&s) : r;
            int32_t *ids[2];
            for (uint32_t t = 1; t <= 2; t++) {
                cz_kctx *k = mk(t);
                ids[t - 1] = malloc(rows * sizeof(int32_t));
                cz_kctx_ops(k)->sample(k, ids[t - 1], l, rows, v, sc->temperature, sc->top_k,
                                       sc->top_p, seed, ctr);
                cz_kctx_free(k);
            }
            cr_assert_arr_eq(l, copy, (size_t)rows * v * sizeof *l, "sample modified the logits");
            for (uint32_t r = 0; r < rows; r++) {
                const float *lr = l + (size_t)r * v;
                int32_t got = ids[0][r];
                cr_assert_eq(ids[1][r], got, "sample: 1 and 2 threads differ");
                cr_assert(got >= 0 && (uint32_t)got < v);
                if (sc->temperature == 0.0f) {
                    cr_assert_eq(got, ref_argmax(lr, v), "temperature 0 is argmax");
                    continue;
                }
                uint32_t ntop;
                double pm;
                uint32_t nk = ref_kept(lr, v, sc->temperature, sc->top_k, sc->top_p, kept, p,
                                       &ntop, &pm);
                double total = 0;
                for (uint32_t i = 0; i < nk; i++)
                    total += p[i];
                double delta = (ntop + 64.0) * 0x1p-23 * total;
                if (pm * total < delta)
                    continue; /* the top-p set itself is within rounding */
                double target = uniform_ref(seed, ctr[r]) * total, cum = 0;
                int32_t want = -1;
                bool ok = false;
                for (uint32_t i = 0; i < nk; i++) {
                    double lo = cum;
                    cum += p[i];
                    if (want < 0 && cum > target)
                        want = kept[i];
                    if (kept[i] == got)
                        ok = target >= lo - delta && target < cum + delta;
                }
                if (want < 0)
                    want = kept[nk - 1];
                cr_assert(ok, "sample vocab %u T %g top_k %u top_p %g row %u: id %d (want %d)",
                          v, sc->temperature, sc->top_k, sc->top_p, r, got, want);
                checked++;
                exact += got == want;
            }
            free(ids[0]);
            free(ids[1]);
        }
        free(l);
        free(copy);
        free(kept);
        free(p);
        free(ctr);
    }
    /* the tolerance is for rounding, not a licence: almost every draw is the reference's */
    cr_assert(checked > 1000 && exact >= checked - checked / 50, "%u of %u exact", exact, checked);

    /* exact boundaries: 8 equal logits (probabilities 1, sums exact in float). top_p 0.5
     * is reached by 4 ids exactly ("reaches": 4, not 5); top_k 3 keeps ids 0, 1, 2 (ties
     * to the lower id); each kept id is drawn */
    const uint32_t n = 4000;
    float *flat = malloc((size_t)n * 8 * sizeof *flat);
    uint64_t *ctr = malloc(n * sizeof *ctr);
    int32_t *ids = malloc(n * sizeof *ids);
    for (uint32_t i = 0; i < n * 8; i++)
        flat[i] = 1.25f;
    for (uint32_t r = 0; r < n; r++)
        ctr[r] = r;
    cz_kctx *k = mk(2);
    static const sample_cfg edges[] = {{1.0f, 0, 0.5f}, {0.9f, 3, 1.0f}, {1.0f, 6, 0.5f}};
    static const uint32_t nkept[] = {4, 3, 3};
    for (size_t c = 0; c < CZ_ARRAY_LEN(edges); c++) {
        uint32_t counts[8] = {0};
        cz_kctx_ops(k)->sample(k, ids, flat, n, 8, edges[c].temperature, edges[c].top_k,
                               edges[c].top_p, 5, ctr);
        for (uint32_t r = 0; r < n; r++)
            counts[ids[r]]++;
        for (uint32_t i = 0; i < 8; i++)
            cr_assert(i < nkept[c] ? counts[i] > 0 : counts[i] == 0,
                      "flat logits, config %zu: id %u drawn %u times", c, i, counts[i]);
    }
    cz_kctx_free(k);
    free(flat);
    free(ctr);
    free(ids);
}

/* Frequencies over many counters against the kept set's renormalised probabilities:
 * Pearson's chi-square with df = kept - 1 under a bound that a correct sampler exceeds
 * with probability below 1e-6; the seeds and counters are fixed, so the outcome is too. */
Test(kernels, sample_distribution)
{
    static const float logits[12] = {2.0f, 1.5f, 1.5f, 0.5f, 0.0f, -1.0f,
                                     3.0f, 2.0f, -0.5f, 1.0f, 0.25f, -2.0f};
    static const sample_cfg cfgs[] = {
        {1.0f, 0, 1.0f}, {0.8f, 5, 1.0f}, {1.2f, 0, 0.75f}, {1.0f, 6, 0.9f}, {3.0f, 0, 1.0f}};
    const uint32_t v = 12, n = 20000;
    float *l = malloc((size_t)n * v * sizeof *l);
    for (uint32_t r = 0; r < n; r++)
        memcpy(l + (size_t)r * v, logits, sizeof logits);
    uint64_t *ctr = malloc(n * sizeof *ctr);
    for (uint32_t r = 0; r < n; r++)
        ctr[r] = 1000 + r;
    int32_t *ids = malloc(n * sizeof *ids), kept[12];
    double p[12];
    cz_kctx *k = mk(2);
    for (size_t c = 0; c < CZ_ARRAY_LEN(cfgs); c++) {
        const sample_cfg *sc = &cfgs[c];
        cz_kctx_ops(k)->sample(k, ids, l, n, v, sc->temperature, sc->top_k, sc->top_p, 77 + c, ctr);
        uint32_t ntop, counts[12] = {0};
        double pm, total = 0, chi2 = 0;
        uint32_t nk = ref_kept(logits, v, sc->temperature, sc->top_k, sc->top_p, kept, p, &ntop, &pm);
        for (uint32_t r = 0; r < n; r++) {
            cr_assert(ids[r] >= 0 && ids[r] < 12);
            counts[ids[r]]++;
        }
        uint32_t in_set = 0;
        for (uint32_t i = 0; i < nk; i++) {
            total += p[i];
            in_set += counts[kept[i]];
        }
        cr_assert_eq(in_set, n, "config %zu: an id outside the kept set was drawn", c);
        for (uint32_t i = 0; i < nk; i++) {
            double e = n * p[i] / total;
            chi2 += (counts[kept[i]] - e) * (counts[kept[i]] - e) / e;
        }
        double df = nk - 1.0;
        cr_assert(nk == 1 || chi2 < df + 9 * sqrt(2 * df) + 10,
                  "config %zu: chi-square %.1f with %.0f degrees of freedom", c, chi2, df);
    }
    cz_kctx_free(k);
    free(l);
    free(ctr);
    free(ids);
}

/* ---- mixture of experts ---- */

typedef struct {
    uint32_t n, experts, top_k, hidden, inter, shared;
    bool norm;
} moe_cfg;

/* Widened copy of n weights of dtype dt. */
static double *widened(cz_dtype dt, const void *p, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = at(dt, p, i);
    return d;
}

/* y (hidden) += scale x down (silu(gate x) * up x) for one token, gu (2 inter, hidden),
 * down (hidden, inter), in double. */
static void ref_expert(double *y, double scale, const float *x, const double *gu,
                       const double *down, uint32_t hidden, uint32_t inter)
{
    double *a = malloc(inter * sizeof *a);
    for (uint32_t i = 0; i < inter; i++) {
        double g = 0, u = 0;
        for (uint32_t h = 0; h < hidden; h++) {
            g += x[h] * gu[(size_t)i * hidden + h];
            u += x[h] * gu[(size_t)(inter + i) * hidden + h];
        }
        a[i] = g / (1 + exp(-g)) * u;
    }
    for (uint32_t h = 0; h < hidden; h++) {
        double d = 0;
        for (uint32_t i = 0; i < inter; i++)
            d += a[i] * down[(size_t)h * inter + i];
        y[h] += scale * d;
    }
    free(a);
}

/* Router logits are exact (inputs on a grid of 1/8, router weights on a grid of 1/16,
 * exact in every dtype, sums of a few hundred such products exact in float32), so ties
 * between experts are exact ties in the kernel too: some router rows repeat, and token 0
 * is all zeros (every expert ties). Ties go to the lower expert id. */
Test(kernels, moe_ffn)
{
    static const moe_cfg cfgs[] = {
        {1, 8, 2, 64, 32, 0, true},       /* a decode: GEMV everywhere */
        {5, 16, 4, 128, 96, 64, false},   /* experts without tokens, a shared expert */
        {37, 8, 8, 64, 24, 40, true},     /* top_k = experts */
        {80, 4, 2, 128, 96, 64, false},   /* a prefill: experts' GEMMs through sgemm */
        {64, 16, 1, 64, 32, 0, true},     /* top-1, renormalised: weight 1 */
        {12, 4, 3, 48, 20, 16, true},
    };
    uint64_t s = 24;
    for (size_t c = 0; c < CZ_ARRAY_LEN(cfgs); c++) {
        const moe_cfg *mc = &cfgs[c];
        uint32_t n = mc->n, ne = mc->experts, h = mc->hidden, in = mc->inter, si = mc->shared;
        float *x = malloc((size_t)n * h * sizeof *x), *router = malloc((size_t)ne * h * sizeof *router);
        for (size_t i = 0; i < (size_t)n * h; i++)
            x[i] = i < h ? 0.0f : (float)((int)irand(&s, 17) - 8) / 8;
        for (uint32_t e = 0; e < ne; e++)
            for (uint32_t j = 0; j < h; j++)
                router[(size_t)e * h + j] = e % 3 == 2 ? router[(size_t)(e - 1) * h + j]
                                                       : (float)((int)irand(&s, 17) - 8) / 16;
        float *gu = frand(&s, (size_t)ne * 2 * in * h, 1.0f / sqrtf((float)h));
        float *dn = frand(&s, (size_t)ne * h * in, 1.0f / sqrtf((float)in));
        float *sgu = frand(&s, (size_t)2 * si * h, 1.0f / sqrtf((float)h));
        float *sdn = frand(&s, (size_t)h * si, 1.0f / sqrtf((float)(si ? si : 1)));
        float *sg = frand(&s, h, 0.2f);
        for (size_t d = 0; d < 3; d++) {
            cz_dtype dt = DTS[d];
            cz_moe_weights w = {.experts = ne, .top_k = mc->top_k, .hidden = h, .inter = in,
                                .norm_topk_prob = mc->norm, .dt = dt,
                                .router = store(dt, router, (size_t)ne * h),
                                .gate_up = store(dt, gu, (size_t)ne * 2 * in * h),
                                .down = store(dt, dn, (size_t)ne * h * in),
                                .shared_inter = si,
                                .shared_gate_up = si ? store(dt, sgu, (size_t)2 * si * h) : NULL,
                                .shared_down = si ? store(dt, sdn, (size_t)h * si) : NULL,
                                .shared_gate = si ? store(dt, sg, h) : NULL};
            double *rt = widened(dt, w.router, (size_t)ne * h);
            double *gud = widened(dt, w.gate_up, (size_t)ne * 2 * in * h);
            double *dnd = widened(dt, w.down, (size_t)ne * h * in);
            double *sgud = si ? widened(dt, w.shared_gate_up, (size_t)2 * si * h) : NULL;
            double *sdnd = si ? widened(dt, w.shared_down, (size_t)h * si) : NULL;
            double *sgd = si ? widened(dt, w.shared_gate, h) : NULL;
            double *ref = calloc((size_t)n * h, sizeof *ref);
            for (uint32_t t = 0; t < n; t++) {
                const float *xt = x + (size_t)t * h;
                double lg[16], pr[16], mx = -INFINITY, sum = 0, kept = 0;
                bool taken[16] = {false};
                int32_t ids[16];
                for (uint32_t e = 0; e < ne; e++) {
                    lg[e] = 0;
                    for (uint32_t j = 0; j < h; j++)
                        lg[e] += xt[j] * rt[(size_t)e * h + j];
                    mx = fmax(mx, lg[e]);
                }
                for (uint32_t e = 0; e < ne; e++)
                    sum += pr[e] = exp(lg[e] - mx);
                for (uint32_t k = 0; k < mc->top_k; k++) {
                    int32_t best = -1;
                    for (uint32_t e = 0; e < ne; e++)
                        if (!taken[e] && (best < 0 || lg[e] > lg[best]))
                            best = (int32_t)e;
                    taken[best] = true;
                    ids[k] = best;
                    kept += pr[best] / sum;
                }
                for (uint32_t k = 0; k < mc->top_k; k++) {
                    double wt = pr[ids[k]] / sum / (mc->norm ? kept : 1.0);
                    ref_expert(ref + (size_t)t * h, wt, xt, gud + (size_t)ids[k] * 2 * in * h,
                               dnd + (size_t)ids[k] * h * in, h, in);
                }
                if (si) {
                    double g = 0;
                    for (uint32_t j = 0; j < h; j++)
                        g += xt[j] * sgd[j];
                    ref_expert(ref + (size_t)t * h, 1 / (1 + exp(-g)), xt, sgud, sdnd, h, si);
                }
            }
            float *o[2];
            for (uint32_t t = 1; t <= 2; t++) {
                cz_kctx *k = mk(t);
                o[t - 1] = malloc((size_t)n * h * 4);
                cz_kctx_ops(k)->moe_ffn(k, o[t - 1], x, &w, n);
                cz_kctx_free(k);
            }
            char what[128];
            snprintf(what, sizeof what, "moe_ffn %s n %u experts %u top_k %u hidden %u inter %u "
                     "shared %u norm %d", cz_dtype_name(dt), n, ne, mc->top_k, h, in, si, mc->norm);
            check2(what, o[0], o[1], ref, (size_t)n * h, TOL_MOE);
            free(o[0]);
            free(o[1]);
            free(ref);
            free(rt);
            free(gud);
            free(dnd);
            free(sgud);
            free(sdnd);
            free(sgd);
            free((void *)w.router);
            free((void *)w.gate_up);
            free((void *)w.down);
            free((void *)w.shared_gate_up);
            free((void *)w.shared_down);
            free((void *)w.shared_gate);
        }
        free(x);
        free(router);
        free(gu);
        free(dn);
        free(sgu);
        free(sdn);
        free(sg);
    }
}

/* ---- no allocation after the reserve ---- */

/* Every op of the table, each on shapes that take its threaded and its BLAS paths, on a
 * context that has only been reserved: the allocation counter must not move. */
Test(kernels, no_allocation_after_reserve)
{
    uint64_t s = 25;
    const uint32_t m = 32, n = 96, kd = 160, bt = 16, kvh = 2, hd = 32, heads = 4;
    const uint32_t blocks = 8, vocab = 8192;
    float *x = frand(&s, (size_t)m * kd, 1.0f), *wf = frand(&s, (size_t)n * kd, 0.1f);
    void *wb = store(CZ_BF16, wf, (size_t)n * kd);
    float *out = malloc((size_t)m * vocab * sizeof *out), *out2 = malloc((size_t)m * vocab * sizeof *out2);
    float *vec = frand(&s, kd, 1.0f), *logits = frand(&s, (size_t)m * vocab, 4.0f);
    float *inv = frand(&s, hd / 2, 0.1f);
    int32_t ids[32], pos[32], cu[3] = {0, 1, 32}, lens[2] = {40, 31}, table[2 * 4];
    int64_t slots[32];
    uint64_t ctr[32];
    for (uint32_t i = 0; i < m; i++) {
        ids[i] = (int32_t)irand(&s, n);
        pos[i] = (int32_t)i;
        slots[i] = i;
        ctr[i] = i;
    }
    for (uint32_t i = 0; i < 8; i++)
        table[i] = (int32_t)i;
    size_t stride = (size_t)bt * kvh * hd;
    float *kpool = frand(&s, blocks * stride, 1.0f), *vpool = frand(&s, blocks * stride, 1.0f);
    float *host = malloc(blocks * stride * sizeof *host);
    cz_kv_layer kv = {kpool, vpool, CZ_F32, stride, bt, kvh, hd};
    float *cw = frand(&s, (size_t)32 * 32 * 3, 0.2f), *tw = frand(&s, (size_t)32 * 32 * 4, 0.2f);
    float *router = frand(&s, (size_t)8 * 64, 0.3f), *gu = frand(&s, (size_t)8 * 64 * 64, 0.1f);
    float *dn = frand(&s, (size_t)8 * 64 * 32, 0.1f), *sg = frand(&s, 64, 0.1f);
    cz_moe_weights mw = {8, 2, 64, 32, true, CZ_F32, router, gu, dn, 32, gu, dn, sg};
    int32_t bsrc[3] = {1, 4, 6};

    cz_kctx *k = mk(2);
    const cz_kernels *K = cz_kctx_ops(k);
    unsigned long before = cz_test_allocations();
    K->embed(k, out, wb, CZ_BF16, ids, m, kd);
    K->rmsnorm(k, out, x, vec, 1e-6f, m, kd);
    K->layernorm(k, out, x, vec, vec, 1e-5f, m, kd);
    K->matmul(k, out, x, wf, CZ_F32, vec, m, n, kd);
    K->matmul(k, out, x, wb, CZ_BF16, vec, m, n, kd);
    K->matmul(k, out, x, wb, CZ_BF16, NULL, 1, n, kd);
    K->rope(k, out, kd, pos, inv, m, 4, hd);
    K->silu_mul(k, out2, out, m, kd / 2);
    K->gelu(k, out, (size_t)m * kd);
    K->silu(k, out, (size_t)m * kd);
    K->add(k, out, out, x, (size_t)m * kd);
    K->transpose(k, out2, x, m, kd);
    K->gather_rows(k, out2, x, pos, m, kd);
    K->kv_write(k, &kv, x, x + hd, kd, slots, m);
    K->attn_paged(k, out, heads * hd, x, kd, &kv, cu, lens, table, 4, 2, heads, 0.2f, 0, 0);
    K->attn_paged(k, out, heads * hd, x, kd, &kv, cu, lens, table, 4, 2, heads, 0.2f, 8, 4);
    K->attn_dense(k, out, heads * hd, x, kd, x, x, kd, cu, 2, heads, kvh, hd, 0.2f, true, 0);
    K->copy_blocks(k, host, stride * 4, NULL, kpool, stride * 4, bsrc, stride * 4, 3);
    K->moe_ffn(k, out, x, &mw, m);
    K->conv1d(k, out, x, cw, vec, 32, 32, 100, 3, 1, 1, 1, 1, 1);
    K->conv1d(k, out, x, cw, vec, 32, 32, 100, 3, 2, 2, 2, 0, 32);
    K->conv_transpose1d(k, out, x, tw, vec, 32, 32, 100, 4, 2, 1, 1);
    K->argmax(k, ids, logits, m, vocab);
    K->sample(k, ids, logits, m, vocab, 0.8f, 50, 0.9f, 3, ctr);
    K->sample(k, ids, logits, m, vocab, 1.0f, 0, 1.0f, 3, ctr);
    unsigned long after = cz_test_allocations();
    cr_assert_eq(after, before, "the ops allocated %lu times after the reserve", after - before);
    cz_kctx_free(k);
    free(x);
    free(wf);
    free(wb);
    free(out);
    free(out2);
    free(vec);
    free(logits);
    free(inv);
    free(kpool);
    free(vpool);
    free(host);
    free(cw);
    free(tw);
    free(router);
    free(gu);
    free(dn);
    free(sg);
}
