/* test_cuda_gemm.c - the CUDA GEMM-shaped ops (matmul, moe_ffn, conv1d, conv_transpose1d)
 * against their CPU twins (tests/cuda_cmp.h: the same inputs on both backends, compared by
 * NMSE = sum (cuda - cpu)^2 / sum cpu^2 with a tolerance per op and path). Skips (77)
 * without a CUDA device.
 *
 * Tolerances. Float32 paths (Sgemm, the 16-bit GEMV at m <= CZ__CUDA_GEMV_MAX_M, the
 * convolutions) differ from the CPU by float32 rounding in another order only: 1e-10, as
 * tests/test_kernels.c against double. 16-bit weights at larger m go through cublasGemmEx
 * on activations rounded to the weight's type (matmul.cu): a relative error delta per
 * product with E[delta^2] ~ ulp^2 / 12 x E[1 / mantissa^2] ~ 2.5e-6 for bf16 (ulp 2^-7)
 * and 4e-8 for f16 (ulp 2^-10), which is the expected NMSE of a sum of random-signed
 * products; the tolerances leave a factor of 4 (bf16) and 25 (f16) above it, while a wrong
 * result scores about 1. MoE inputs sit on a grid exact in every dtype, so only the SwiGLU
 * activations are rounded before the down GEMM: the same bounds with room for SwiGLU's
 * propagation (2e-5 and 1e-6); float32 MoE keeps test_kernels.c's 1e-9. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cmp.h"
#include "cz_kcuda.h" /* CZ__CUDA_GEMV_MAX_M: where 16-bit matmuls leave float32 */

#define TOL_F32 1e-10   /* float32 sums in another order */
#define TOL_BF16 1e-5   /* GemmEx on bf16-rounded activations */
#define TOL_F16 1e-6    /* GemmEx on f16-rounded activations */
#define TOL_MOE_F32 1e-9
#define TOL_MOE_BF16 2e-5
#define TOL_MOE_F16 1e-6

/* max_dim 32768 at 1024 rows asks 64 MiB for the GemmEx copy of x, capped at 32 MiB: the
 * largest matmul below goes through it in two chunks of rows. */
static const cz_kreserve RES = {.max_rows = 1024, .max_ctx = 16, .max_heads = 1,
                                .max_dim = 32768, .max_experts = 64, .max_moe_dim = 256};

static const cz_dtype DTS[] = {CZ_F32, CZ_BF16, CZ_F16};

static void *dev_alloc(cz_cmp *t, size_t bytes)
{
    return cz_kmem_alloc(t->cu, bytes);
}

/* ---- matmul ---- */

static double mm_tol(cz_dtype dt, uint32_t m)
{
    if (dt == CZ_F32 || m <= CZ__CUDA_GEMV_MAX_M)
        return TOL_F32;
    return dt == CZ_BF16 ? TOL_BF16 : TOL_F16;
}

/* One matmul on both backends; x_off floats of offset into x's buffers (an x that is not
 * 16-byte aligned takes the GEMV's scalar loads). */
static void run_matmul(cz_cmp *t, cz_dtype dt, uint32_t m, uint32_t n, uint32_t kd, int bias,
                       uint32_t x_off)
{
    size_t xn = (size_t)m * kd + x_off, on = (size_t)m * n;
    float *x = cz_cmp_randf(t, xn, 1.0f);
    void *w = cz_cmp_rand_dt(t, dt, (size_t)n * kd, 1.0f / sqrtf((float)(kd ? kd : 1)));
    float *b = cz_cmp_randf(t, n, 0.5f);
    float *ref = malloc((on ? on : 1) * sizeof *ref);
    t->C->matmul(t->cpu, ref, x + x_off, w, dt, bias ? b : NULL, m, n, kd);
    float *dx = cz_cmp_up(t, x, xn * sizeof(float));
    void *dw = cz_cmp_up(t, w, (size_t)n * kd * cz_dtype_size(dt));
    float *db = cz_cmp_up(t, b, (size_t)n * sizeof(float));
    float *dout = dev_alloc(t, on * sizeof(float));
    t->G->matmul(t->cu, dout, dx + x_off, dw, dt, bias ? db : NULL, m, n, kd);
    float *got = cz_cmp_down(t, dout, on * sizeof(float));
    char what[128];
    snprintf(what, sizeof what, "matmul %s m %u n %u kd %u%s%s", cz_dtype_name(dt), m, n, kd,
             bias ? " bias" : "", x_off ? " unaligned x" : "");
    cz_cmp_nmse(t, what, ref, got, on, mm_tol(dt, m));
    cz_kmem_free(t->cu, dx);
    cz_kmem_free(t->cu, dw);
    cz_kmem_free(t->cu, db);
    cz_kmem_free(t->cu, dout);
    free(x);
    free(w);
    free(b);
    free(ref);
    free(got);
}

static void test_matmul(cz_cmp *t)
{
    static const struct {
        uint32_t m, n, kd;
    } shapes[] = {
        {1, 256, 512},   /* decode: the GEMV's 16-byte loads */
        {1, 129, 37},    /* kd odd: the GEMV's scalar loads; n not a multiple of 8 */
        {1, 1, 1},
        {3, 200, 64},
        {8, 96, 1000},   /* the GEMV's widest m */
        {9, 130, 72},    /* the first GemmEx m */
        {37, 300, 257},  /* m and kd odd */
        {100, 64, 3},
        {256, 512, 1024},
        {4, 33, 0},      /* kd 0: bias (or zeros) only */
        {20, 17, 0},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < 3; d++)
            for (int bias = 0; bias < 2; bias++)
                run_matmul(t, DTS[d], shapes[s].m, shapes[s].n, shapes[s].kd, bias, 0);
    for (size_t d = 1; d < 3; d++) {
        run_matmul(t, DTS[d], 1, 64, 256, 1, 1);
        run_matmul(t, DTS[d], 5, 64, 256, 0, 3);
    }
    /* the GemmEx copy of x in two chunks of rows (see RES) */
    run_matmul(t, CZ_BF16, 1024, 48, 20000, 1, 0);
}

/* ---- mixture of experts ---- */

typedef struct {
    uint32_t n, experts, top_k, hidden, inter, shared;
    bool norm;
} moe_cfg;

static void *dev_copy(cz_cmp *t, const void *host, size_t bytes)
{
    return host ? cz_cmp_up(t, host, bytes) : NULL;
}

/* Router inputs on a grid (x in eighths, router weights in sixteenths, both exact in
 * every dtype; their sums exact in float32), so router ties are exact on both backends:
 * every third router row repeats the one before and token 0 is zeros (all experts tie).
 * Ties go to the lower id. */
static void run_moe(cz_cmp *t, const moe_cfg *mc, cz_dtype dt)
{
    uint32_t n = mc->n, ne = mc->experts, h = mc->hidden, in = mc->inter, si = mc->shared;
    size_t es = cz_dtype_size(dt);
    float *x = malloc((size_t)n * h * sizeof *x), *rt = malloc((size_t)ne * h * sizeof *rt);
    for (size_t i = 0; i < (size_t)n * h; i++)
        x[i] = i < h ? 0.0f : (float)((int)cz_cmp_randu(t, 17) - 8) / 8;
    for (uint32_t e = 0; e < ne; e++)
        for (uint32_t j = 0; j < h; j++)
            rt[(size_t)e * h + j] = e % 3 == 2 ? rt[(size_t)(e - 1) * h + j]
                                               : (float)((int)cz_cmp_randu(t, 17) - 8) / 16;
    void *router = malloc((size_t)ne * h * es);
    for (size_t i = 0; i < (size_t)ne * h; i++) {
        if (dt == CZ_F32)
            ((float *)router)[i] = rt[i];
        else
            ((uint16_t *)router)[i] = dt == CZ_BF16 ? cz_f32_to_bf16(rt[i]) : cz_f32_to_f16(rt[i]);
    }
    void *gu = cz_cmp_rand_dt(t, dt, (size_t)ne * 2 * in * h, 1.0f / sqrtf((float)h));
    void *dn = cz_cmp_rand_dt(t, dt, (size_t)ne * h * in, 1.0f / sqrtf((float)in));
    void *sgu = si ? cz_cmp_rand_dt(t, dt, (size_t)2 * si * h, 1.0f / sqrtf((float)h)) : NULL;
    void *sdn = si ? cz_cmp_rand_dt(t, dt, (size_t)h * si, 1.0f / sqrtf((float)si)) : NULL;
    void *sg = si ? cz_cmp_rand_dt(t, dt, h, 0.2f) : NULL;
    cz_moe_weights hw = {.experts = ne, .top_k = mc->top_k, .hidden = h, .inter = in,
                         .norm_topk_prob = mc->norm, .dt = dt, .router = router,
                         .gate_up = gu, .down = dn, .shared_inter = si,
                         .shared_gate_up = sgu, .shared_down = sdn, .shared_gate = sg};
    cz_moe_weights dw = hw;
    dw.router = dev_copy(t, router, (size_t)ne * h * es);
    dw.gate_up = dev_copy(t, gu, (size_t)ne * 2 * in * h * es);
    dw.down = dev_copy(t, dn, (size_t)ne * h * in * es);
    dw.shared_gate_up = dev_copy(t, sgu, (size_t)2 * si * h * es);
    dw.shared_down = dev_copy(t, sdn, (size_t)h * si * es);
    dw.shared_gate = dev_copy(t, sg, (size_t)h * es);

    size_t on = (size_t)n * h;
    float *ref = malloc((on ? on : 1) * sizeof *ref);
    t->C->moe_ffn(t->cpu, ref, x, &hw, n);
    float *dx = cz_cmp_up(t, x, on * sizeof(float)), *dout = dev_alloc(t, on * sizeof(float));
    t->G->moe_ffn(t->cu, dout, dx, &dw, n);
    float *got = cz_cmp_down(t, dout, on * sizeof(float));
    char what[128];
    snprintf(what, sizeof what, "moe_ffn %s n %u experts %u top_k %u h %u inter %u shared %u%s",
             cz_dtype_name(dt), n, ne, mc->top_k, h, in, si, mc->norm ? " norm" : "");
    cz_cmp_nmse(t, what, ref, got, on,
                dt == CZ_F32 ? TOL_MOE_F32 : dt == CZ_BF16 ? TOL_MOE_BF16 : TOL_MOE_F16);

    cz_kmem_free(t->cu, dx);
    cz_kmem_free(t->cu, dout);
    cz_kmem_free(t->cu, (void *)dw.router);
    cz_kmem_free(t->cu, (void *)dw.gate_up);
    cz_kmem_free(t->cu, (void *)dw.down);
    if (si) {
        cz_kmem_free(t->cu, (void *)dw.shared_gate_up);
        cz_kmem_free(t->cu, (void *)dw.shared_down);
        cz_kmem_free(t->cu, (void *)dw.shared_gate);
    }
    free(x);
    free(rt);
    free(router);
    free(gu);
    free(dn);
    free(sgu);
    free(sdn);
    free(sg);
    free(ref);
    free(got);
}

static void test_moe(cz_cmp *t)
{
    static const moe_cfg cfgs[] = {
        {1, 8, 2, 64, 32, 0, true},       /* a decode: the GEMV everywhere */
        {5, 16, 4, 128, 96, 64, false},   /* experts without tokens, a shared expert */
        {37, 8, 8, 64, 24, 40, true},     /* top_k = experts: 37 rows each, GemmEx */
        {80, 4, 2, 128, 96, 64, false},   /* a prefill */
        {64, 16, 1, 64, 32, 0, true},     /* top-1, renormalised: weight 1 */
        {12, 4, 3, 48, 20, 16, true},
        {6, 8, 2, 45, 20, 12, true},      /* hidden odd: the GEMV's scalar loads */
        {300, 40, 6, 64, 16, 8, true},    /* more experts than lanes in the routing warp */
        {200, 64, 8, 32, 16, 0, false},
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t d = 0; d < 3; d++)
            run_moe(t, &cfgs[c], DTS[d]);
}

/* ---- convolutions ---- */

static void run_conv1d(cz_cmp *t, uint32_t cin, uint32_t cout, uint32_t len, uint32_t ks,
                       uint32_t st, uint32_t dil, uint32_t pl, uint32_t pr, uint32_t g, int bias)
{
    uint32_t lout = (len + pl + pr - dil * (ks - 1) - 1) / st + 1;
    size_t xn = (size_t)cin * len, wn = (size_t)cout * (cin / g) * ks, on = (size_t)cout * lout;
    float *x = cz_cmp_randf(t, xn, 1.0f);
    float *w = cz_cmp_randf(t, wn, 1.0f / sqrtf((float)(cin / g * ks)));
    float *b = cz_cmp_randf(t, cout, 0.5f);
    float *ref = malloc(on * sizeof *ref);
    t->C->conv1d(t->cpu, ref, x, w, bias ? b : NULL, cin, cout, len, ks, st, dil, pl, pr, g);
    float *dx = cz_cmp_up(t, x, xn * 4), *dw = cz_cmp_up(t, w, wn * 4);
    float *db = cz_cmp_up(t, b, (size_t)cout * 4), *dout = dev_alloc(t, on * 4);
    t->G->conv1d(t->cu, dout, dx, dw, bias ? db : NULL, cin, cout, len, ks, st, dil, pl, pr, g);
    float *got = cz_cmp_down(t, dout, on * 4);
    char what[160];
    snprintf(what, sizeof what, "conv1d cin %u cout %u len %u k %u s %u d %u pad %u,%u g %u%s",
             cin, cout, len, ks, st, dil, pl, pr, g, bias ? " bias" : "");
    cz_cmp_nmse(t, what, ref, got, on, TOL_F32);
    cz_kmem_free(t->cu, dx);
    cz_kmem_free(t->cu, dw);
    cz_kmem_free(t->cu, db);
    cz_kmem_free(t->cu, dout);
    free(x);
    free(w);
    free(b);
    free(ref);
    free(got);
}

static void test_conv1d(cz_cmp *t)
{
    static const uint32_t cfgs[][9] = {
        /* cin cout len ks stride dil pad_l pad_r groups */
        {4, 6, 50, 3, 1, 1, 1, 1, 1},         /* narrow: direct */
        {16, 32, 200, 7, 1, 1, 3, 3, 1},      /* im2col + Sgemm */
        {64, 64, 300, 5, 1, 1, 2, 2, 64},     /* depthwise: direct */
        {32, 48, 129, 3, 2, 2, 1, 0, 2},      /* two groups, stride and dilation: Sgemm */
        {8, 16, 33, 4, 3, 3, 0, 5, 4},        /* cog 4: direct, asymmetric padding */
        {24, 24, 1000, 1, 1, 1, 0, 0, 1},     /* pointwise */
        {512, 256, 50, 7, 1, 1, 3, 3, 1},     /* a vocoder's block */
        {512, 32, 6000, 7, 1, 1, 3, 3, 1},    /* several im2col tiles */
        {16, 16, 5, 5, 1, 1, 0, 0, 1},        /* lout 1 */
        {12, 24, 40, 3, 1, 4, 8, 0, 3},       /* causal padding, dilation 4 */
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (int bias = 0; bias < 2; bias++) {
            const uint32_t *v = cfgs[c];
            run_conv1d(t, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], bias);
        }
}

static void run_convt(cz_cmp *t, uint32_t cin, uint32_t cout, uint32_t len, uint32_t ks,
                      uint32_t st, uint32_t pl, uint32_t pr, int bias)
{
    uint32_t lout = (len - 1) * st + ks - pl - pr;
    size_t xn = (size_t)cin * len, wn = (size_t)cin * cout * ks, on = (size_t)cout * lout;
    float *x = cz_cmp_randf(t, xn, 1.0f);
    float *w = cz_cmp_randf(t, wn, 1.0f / sqrtf((float)cin));
    float *b = cz_cmp_randf(t, cout, 0.5f);
    float *ref = malloc(on * sizeof *ref);
    t->C->conv_transpose1d(t->cpu, ref, x, w, bias ? b : NULL, cin, cout, len, ks, st, pl, pr);
    float *dx = cz_cmp_up(t, x, xn * 4), *dw = cz_cmp_up(t, w, wn * 4);
    float *db = cz_cmp_up(t, b, (size_t)cout * 4), *dout = dev_alloc(t, on * 4);
    t->G->conv_transpose1d(t->cu, dout, dx, dw, bias ? db : NULL, cin, cout, len, ks, st, pl,
                           pr);
    float *got = cz_cmp_down(t, dout, on * 4);
    char what[160];
    snprintf(what, sizeof what, "conv_transpose1d cin %u cout %u len %u k %u s %u pad %u,%u%s",
             cin, cout, len, ks, st, pl, pr, bias ? " bias" : "");
    cz_cmp_nmse(t, what, ref, got, on, TOL_F32);
    cz_kmem_free(t->cu, dx);
    cz_kmem_free(t->cu, dw);
    cz_kmem_free(t->cu, db);
    cz_kmem_free(t->cu, dout);
    free(x);
    free(w);
    free(b);
    free(ref);
    free(got);
}

static void test_conv_transpose1d(cz_cmp *t)
{
    static const uint32_t cfgs[][7] = {
        /* cin cout len ks stride pad_l pad_r */
        {4, 6, 20, 4, 2, 1, 1},          /* cin < 16: direct */
        {8, 4, 30, 5, 1, 2, 2},          /* direct, stride 1 */
        {32, 16, 100, 16, 8, 4, 4},      /* a vocoder's upsampler: Sgemm + col2im */
        {16, 8, 1, 3, 1, 0, 0},          /* one input position */
        {24, 12, 77, 7, 3, 0, 2},        /* ksize not a multiple of the stride */
        {20, 10, 50, 2, 5, 0, 0},        /* ksize < stride: outputs no tap reaches */
        {6, 5, 21, 3, 4, 1, 0},          /* the same, direct */
        {64, 512, 3000, 16, 8, 4, 4},    /* several column tiles */
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (int bias = 0; bias < 2; bias++) {
            const uint32_t *v = cfgs[c];
            run_convt(t, v[0], v[1], v[2], v[3], v[4], v[5], v[6], bias);
        }
}

int main(void)
{
    cz_cmp t;
    int rc = cz_cmp_open(&t, 11);
    if (rc)
        return rc;
    cz_kctx_reserve(t.cpu, &RES);
    cz_kctx_reserve(t.cu, &RES);
    test_matmul(&t);
    test_moe(&t);
    test_conv1d(&t);
    test_conv_transpose1d(&t);
    return cz_cmp_close(&t);
}
