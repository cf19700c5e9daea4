/* bench_kernels.c - the CPU kernels' speed on this machine against what the machine can
 * deliver (the goals of docs/kernels.md: decode-side kernels at >= 70 % of STREAM's
 * bandwidth, prefill GEMMs at >= 70 % of OpenBLAS's sgemm):
 *   - STREAM copy and triad on all threads (bench_stream.h);
 *   - decode GEMV (m = 1): weight bytes per second for bfloat16 and float32 weights at
 *     the shapes of a 1B model (Llama-3.2-1B: hidden 2048, intermediate 8192, vocabulary
 *     128256), as a share of the triad; each layer's weights are cycled through copies
 *     that together far exceed the last-level cache, as a forward pass reads them;
 *   - prefill GEMM (m = 128, 512) with bfloat16 weights against OpenBLAS's sgemm on
 *     float32 weights of the same shape, on all threads each (GFLOP/s);
 *   - paged attention decode (one query row per sequence, Llama-3.2-1B's 32 query and 8
 *     KV heads of 64): the KV bytes it must read per second, as a share of the triad.
 * Run by `meson test -C build --benchmark -v`, or `bench_kernels [threads [part]]`
 * (threads: every online CPU by default; part: gemv, gemm or attn runs that table alone,
 * after STREAM). */
#include <f77blas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "bench_stream.h"
#include "cz_kernels.h"

/* Bytes of weight copies a GEMV cycles through (far above the last-level cache). */
#define GEMV_SPAN_BYTES ((size_t)512 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* n elements of dtype dt with values in [-0.05, 0.05] (no subnormals, no NaN: they would
 * time the FPU's slow paths, not the kernel), a 64 Ki pattern repeated. */
static void *weights(cz_dtype dt, size_t n)
{
    size_t es = cz_dtype_size(dt), pat = 65536;
    uint8_t *w = cz_xmalloc(n * es), *p = cz_xmalloc(pat * es);
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < pat; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float f = ((float)(s >> 40) * 0x1p-24f - 0.5f) * 0.1f;
        if (dt == CZ_F32)
            memcpy(p + i * 4, &f, 4);
        else {
            uint16_t h = dt == CZ_BF16 ? cz_f32_to_bf16(f) : cz_f32_to_f16(f);
            memcpy(p + i * 2, &h, 2);
        }
    }
    for (size_t i = 0; i < n; i += pat)
        memcpy(w + i * es, p, (n - i < pat ? n - i : pat) * es);
    free(p);
    return w;
}

static const uint32_t SHAPES[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}};
static const char *const SHAPE_NAMES[] = {"q/o proj", "gate/up", "down", "lm head"};

/* Seconds per call of a GEMV on copies of one weight: the best of 5 passes over them. */
static double time_gemv(cz_kctx *k, cz_dtype dt, uint32_t n, uint32_t kd, const float *x,
                        float *out)
{
    size_t bytes = (size_t)n * kd * cz_dtype_size(dt);
    size_t copies = (GEMV_SPAN_BYTES + bytes - 1) / bytes;
    void **w = cz_xcalloc(copies, sizeof *w);
    for (size_t c = 0; c < copies; c++)
        w[c] = weights(dt, (size_t)n * kd);
    const cz_kernels *K = cz_kctx_ops(k);
    double best = INFINITY;
    for (int pass = 0; pass < 6; pass++) {
        double t0 = now_s();
        for (size_t c = 0; c < copies; c++)
            K->matmul(k, out, x, w[c], dt, NULL, 1, n, kd);
        double t = (now_s() - t0) / copies;
        if (pass > 0 && t < best) /* pass 0 warms up */
            best = t;
    }
    for (size_t c = 0; c < copies; c++)
        free(w[c]);
    free(w);
    return best;
}

/* OpenBLAS's sgemm on float32 weights: out (m, n) = x (m, kd) . w^T, on OpenBLAS's own
 * threads (the caller sets their number). */
static void ref_sgemm(float *out, const float *x, const float *w, uint32_t m, uint32_t n,
                      uint32_t kd)
{
    char ta = 'T', tb = 'N';
    blasint M = (blasint)n, N = (blasint)m, K = (blasint)kd, ld = (blasint)kd, ldc = (blasint)n;
    float one = 1.0f, zero = 0.0f;
    sgemm_(&ta, &tb, &M, &N, &K, &one, (float *)w, &ld, (float *)x, &ld, &zero, out, &ldc);
}

/* Paged attention decode: `seqs` sequences of `ctx` positions each, one query row each. */
static void bench_attn(cz_kctx *k, cz_dtype dt, uint32_t seqs, uint32_t ctx, double triad)
{
    const uint32_t heads = 32, kvh = 8, hd = 64, bt = 16;
    uint32_t nb = (ctx + bt - 1) / bt, blocks = seqs * nb;
    size_t stride = (size_t)bt * kvh * hd;
    cz_kv_layer kv = {weights(dt, blocks * stride), weights(dt, blocks * stride), dt, stride, bt,
                      kvh, hd};
    int32_t *table = cz_xmalloc((size_t)seqs * nb * sizeof *table);
    int32_t *qsl = cz_xmalloc((seqs + 1) * sizeof *qsl), *lens = cz_xmalloc(seqs * sizeof *lens);
    for (uint32_t i = 0; i < blocks; i++) /* physical blocks spread over the pool */
        table[i] = (int32_t)((uint64_t)i * 7919 % blocks);
    for (uint32_t b = 0; b <= seqs; b++)
        qsl[b] = (int32_t)b;
    for (uint32_t b = 0; b < seqs; b++)
        lens[b] = (int32_t)ctx;
    float *q = weights(CZ_F32, (size_t)seqs * heads * hd), *out = cz_xmalloc((size_t)seqs * heads * hd * 4);
    const cz_kernels *K = cz_kctx_ops(k);
    double best = INFINITY;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now_s();
        K->attn_paged(k, out, heads * hd, q, heads * hd, &kv, qsl, lens, table, nb, seqs, heads,
                      0.125f, 0, 0);
        double t = now_s() - t0;
        if (rep > 0 && t < best)
            best = t;
    }
    double bytes = 2.0 * seqs * ctx * kvh * hd * cz_dtype_size(dt);
    printf("| %-5s | %3u x %5u | %8.1f MiB | %8.3f ms | %6.1f GB/s | %5.0f %% |\n",
           cz_dtype_name(dt), seqs, ctx, bytes / (1 << 20), best * 1e3, bytes / best / 1e9,
           100 * bytes / best / triad);
    free(kv.k);
    free(kv.v);
    free(table);
    free(qsl);
    free(lens);
    free(q);
    free(out);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint32_t threads = argc > 1 ? (uint32_t)atoi(argv[1]) : cz_kctx_cpu_default_threads();
    if (threads < 1)
        threads = 1;
    const char *part = argc > 2 ? argv[2] : "";
    cz_kctx *k = NULL;
    cz_err err;
    if (cz_kctx_cpu_create(threads, &k, &err) != CZ_OK) {
        fprintf(stderr, "bench_kernels: %s\n", err.msg);
        return 1;
    }
    cz_kctx_reserve(k, &(cz_kreserve){.max_rows = 512, .max_ctx = 32768, .max_heads = 32,
                                      .max_dim = 128256});
    printf("CPU kernels on %u thread%s (OpenBLAS %s, core %s)\n\n", threads,
           threads > 1 ? "s" : "", openblas_get_config(), openblas_get_corename());

    cz_bench_stream st = cz_bench_stream_measure(threads);
    printf("| STREAM | GB/s |\n|---|---|\n| copy | %.1f |\n| triad | %.1f |\n\n",
           st.copy_Bps / 1e9, st.triad_Bps / 1e9);

    printf("| GEMV m = 1 | n x kd | dtype | us/call | GB/s | %% of triad |\n"
           "|---|---|---|---|---|---|\n");
    float *x = weights(CZ_F32, (size_t)512 * 8192);
    float *out = cz_xmalloc((size_t)512 * 128256 * sizeof *out);
    for (size_t s = 0; s < 4 && (!*part || !strcmp(part, "gemv")); s++)
        for (int d = 0; d < 2; d++) {
            cz_dtype dt = d ? CZ_F32 : CZ_BF16;
            uint32_t n = SHAPES[s][0], kd = SHAPES[s][1];
            double t = time_gemv(k, dt, n, kd, x, out);
            double bytes = (double)n * kd * cz_dtype_size(dt);
            printf("| %s | %u x %u | %s | %.1f | %.1f | %.0f %% |\n", SHAPE_NAMES[s], n, kd,
                   cz_dtype_name(dt), t * 1e6, bytes / t / 1e9, 100 * bytes / t / st.triad_Bps);
        }

    printf("\n| GEMM | m | n x kd | bf16 (ours) GFLOP/s | f32 sgemm GFLOP/s | %% of sgemm |\n"
           "|---|---|---|---|---|---|\n");
    const cz_kernels *K = cz_kctx_ops(k);
    for (size_t s = 0; s < 4 && (!*part || !strcmp(part, "gemm")); s++)
        for (uint32_t m = 128; m <= 512; m *= 4) {
            uint32_t n = SHAPES[s][0], kd = SHAPES[s][1];
            void *wb = weights(CZ_BF16, (size_t)n * kd);
            float *wf = weights(CZ_F32, (size_t)n * kd);
            double flops = 2.0 * m * n * kd, tb = INFINITY, tf = INFINITY;
            int reps = flops > 1e11 ? 2 : 4;
            for (int r = 0; r < reps; r++) {
                double t0 = now_s();
                K->matmul(k, out, x, wb, CZ_BF16, NULL, m, n, kd);
                openblas_set_num_threads((int)threads);
                double t1 = now_s();
                ref_sgemm(out, x, wf, m, n, kd);
                double t2 = now_s();
                openblas_set_num_threads(1); /* the kernels' setting (cz_kctx_cpu_create) */
                if (r > 0 || reps == 2) {
                    tb = fmin(tb, t1 - t0);
                    tf = fmin(tf, t2 - t1);
                }
            }
            printf("| %s | %u | %u x %u | %.1f | %.1f | %.0f %% |\n", SHAPE_NAMES[s], m, n, kd,
                   flops / tb / 1e9, flops / tf / 1e9, 100 * tf / tb);
            free(wb);
            free(wf);
        }

    printf("\n| attention decode | seqs x ctx | KV read | per call | GB/s | %% of triad |\n"
           "|---|---|---|---|---|---|\n");
    if (!*part || !strcmp(part, "attn")) {
        bench_attn(k, CZ_BF16, 16, 4096, st.triad_Bps);
        bench_attn(k, CZ_F32, 16, 4096, st.triad_Bps);
        bench_attn(k, CZ_BF16, 1, 32768, st.triad_Bps);
        bench_attn(k, CZ_BF16, 64, 512, st.triad_Bps);
    }
    free(x);
    free(out);
    cz_kctx_free(k);
    return 0;
}
