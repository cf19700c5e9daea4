/* bench_cuda.c - the CUDA backend against the device's own limits (meson benchmark
 * `cuda`; skipped without a device):
 *
 * 1. Decode steps at batch 1 and 64 (context 1024 each, bf16 KV) of llama-3.2-1b and
 *    llama-3-8b with random bf16 weights: bytes per step (every weight once plus the KV
 *    the attention reads) over the median step time, against the DRAM peak (2 x memory
 *    clock x bus width). Goal: 70 % at batch 1.
 * 2. Prefill GEMMs at 8B shapes, m = 512 and 2048: cz's matmul (float32 activations
 *    rounded to bf16 in a kernel, then cublasGemmEx bf16 x bf16 -> f32) against
 *    cublasGemmEx on inputs already in bf16, the same call without the conversion.
 * 3. Paged attention decode (32 query heads, 8 KV heads of 128, blocks of 16, bf16 KV)
 *    as KV bytes read per second against the peak.
 *
 * Two bandwidth ceilings: the DRAM peak the device reports and a measured device-to-device
 * copy (bytes read plus bytes written); the decode and attention tables give both. Inputs
 * are random (zeros can run faster than real data), each timing the median of REPS after
 * 3 warm-ups, synchronized before the host clock is read. Also prints the device's green
 * context rules (cz_kcuda_sm_info) and the partitions a split at them gets.
 *
 * Usage: bench_cuda [device]: prints the tables; bench_cuda device --decode CARD BATCH:
 * that decode alone, 3 warm-up steps and 3 timed (for a kernel profiler such as Nsight
 * Compute). Exits 0, or 77 without a device. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cz_kvpool.h"
#include "cz_models.h"
#include "cz_net.h"

#define BT 16u
#define REPS 20

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* Fills `count` elements of `es` bytes (2: bf16, 4: float32) at device memory dst with
 * uniform draws in [-1, 1) (an xorshift stream from `seed`), through a host chunk. */
static void fill_random(cz_kctx *k, void *dst, size_t es, size_t count, uint64_t seed)
{
    enum { CHUNK = 1 << 22 };
    void *h = malloc(CHUNK * es);
    if (!h) {
        fprintf(stderr, "bench_cuda: out of memory\n");
        exit(1);
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t at = 0; at < count; at += CHUNK) {
        size_t m = count - at < CHUNK ? count - at : CHUNK;
        for (size_t i = 0; i < m; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float f = (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
            if (es == 4) {
                ((float *)h)[i] = f;
            } else {
                uint32_t u;
                memcpy(&u, &f, 4);
                ((uint16_t *)h)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            }
        }
        cz_kmem_upload(k, (char *)dst + at * es, h, m * es);
    }
    free(h);
}

/* Ends the benchmark when a CUDA runtime or cuBLAS call the benchmark makes itself fails. */
static void cu(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void cb(cublasStatus_t e, const char *what)
{
    if (e != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_cuda: %s: cuBLAS status %d\n", what, (int)e);
        exit(1);
    }
}

/* A device-to-device copy of 1 GiB: bytes read plus bytes written per second. */
static double copy_Bps(cz_kctx *k)
{
    const size_t n = (size_t)1 << 30;
    void *a = cz_kmem_alloc(k, n), *b = cz_kmem_alloc(k, n);
    fill_random(k, a, 2, n / 2, 3);
    double t[REPS];
    for (int r = -3; r < REPS; r++) {
        cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        double t0 = now_s();
        cu(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice), "cudaMemcpy");
        cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    cz_kmem_free(k, a), cz_kmem_free(k, b);
    return 2.0 * (double)n / median(t, REPS);
}

static void check(cz_kctx *k)
{
    cz_err e;
    if (cz_kctx_status(k, &e) != CZ_OK) {
        fprintf(stderr, "bench_cuda: %s\n", e.msg);
        exit(1);
    }
}

static void bench_decode(cz_kctx *k, const char *card_name, const uint32_t *batches, int nb,
                         int reps, double peak, double copy)
{
    cz_model_card m;
    cz_err e;
    if (cz_model_card_load(card_name, &m, &e) != CZ_OK) {
        fprintf(stderr, "bench_cuda: %s\n", e.msg);
        exit(1);
    }
    const cz_stage_card *s = &m.stages[0];
    const uint32_t ctx = 1024, maxb = 64, mb = ctx / BT;
    cz_net *n = NULL;
    cz_kv_pool *p = NULL;
    cz_net_source src = {.checkpoint = NULL, .seed = 1, .dtype = CZ_BF16};
    if (cz_net_create(k, s, &src, &n, &e) != CZ_OK ||
        cz_kv_pool_create(k, s, maxb * mb, BT, CZ_BF16, &p, &e) != CZ_OK) {
        fprintf(stderr, "bench_cuda: %s\n", e.msg);
        exit(1);
    }
    cz_net_reserve(n, maxb, maxb, ctx);
    size_t kv_tok = (size_t)s->layers * 2 * s->kv_heads * s->head_dim * 2;
    for (int bi = 0; bi < nb; bi++) {
        uint32_t b = batches[bi];
        int32_t *tok = calloc(b, 4), *pos = calloc(b, 4), *qsl = calloc(b + 1, 4);
        int32_t *sl = calloc(b, 4), *bt = calloc((size_t)b * mb, 4), *rows = calloc(b, 4);
        int32_t *ids = calloc(b, 4);
        int64_t *slots = calloc(b, 8);
        for (uint32_t i = 0; i < b; i++) {
            tok[i] = (int32_t)(i * 7 % s->vocab);
            pos[i] = (int32_t)ctx - 1;
            qsl[i + 1] = (int32_t)i + 1;
            sl[i] = (int32_t)ctx;
            rows[i] = (int32_t)i;
            for (uint32_t j = 0; j < mb; j++)
                bt[i * mb + j] = (int32_t)(i * mb + j);
            slots[i] = (int64_t)(i * mb + mb - 1) * BT + BT - 1;
        }
        cz_step_batch sb = {.n_seqs = b, .n_tokens = b, .max_blocks = mb, .tokens = tok,
                            .positions = pos, .qsl = qsl, .seq_lens = sl, .block_table = bt,
                            .slots = slots, .sample_rows = rows, .n_samples = b};
        double t[REPS];
        for (int r = -3; r < reps; r++) {
            double t0 = now_s();
            cz_net_decode(n, p, &sb, NULL, ids, NULL); /* ends with the ids' download */
            if (r >= 0)
                t[r] = now_s() - t0;
        }
        check(k);
        double med = median(t, reps);
        double bytes = (double)cz_net_weight_bytes(n) + (double)b * ctx * kv_tok;
        printf("| %-13s | %2u | %4u | %8.1f | %7.3f | %7.1f | %5.1f %% | %5.1f %% |\n", card_name,
               b, ctx, bytes / 1e6, med * 1e3, bytes / med / 1e9, 100.0 * bytes / med / peak,
               100.0 * bytes / med / copy);
        free(tok), free(pos), free(qsl), free(sl), free(bt), free(rows), free(ids), free(slots);
    }
    cz_kv_pool_free(p);
    cz_net_free(n);
}

static void bench_gemm(cz_kctx *k)
{
    const cz_kernels *K = cz_kctx_ops(k);
    cublasHandle_t h;
    cb(cublasCreate(&h), "cublasCreate");
    struct { const char *what; uint32_t n, kd; } shapes[] = {
        {"q/o proj", 4096, 4096}, {"gate/up", 28672, 4096}, {"down", 4096, 14336}};
    uint32_t ms[2] = {512, 2048};
    for (size_t si = 0; si < 3; si++)
        for (int mi = 0; mi < 2; mi++) {
            uint32_t m = ms[mi], n = shapes[si].n, kd = shapes[si].kd;
            float *x = cz_kmem_alloc(k, (size_t)m * kd * 4), *out = cz_kmem_alloc(k, (size_t)m * n * 4);
            void *w = cz_kmem_alloc(k, (size_t)n * kd * 2), *xb = cz_kmem_alloc(k, (size_t)m * kd * 2);
            fill_random(k, x, 4, (size_t)m * kd, 11 + si);
            fill_random(k, w, 2, (size_t)n * kd, 23 + si);
            fill_random(k, xb, 2, (size_t)m * kd, 37 + si);
            double t[REPS], u[REPS];
            for (int r = -3; r < REPS; r++) {
                cz_kctx_sync(k);
                double t0 = now_s();
                K->matmul(k, out, x, w, CZ_BF16, NULL, m, n, kd);
                cz_kctx_sync(k);
                if (r >= 0)
                    t[r] = now_s() - t0;
            }
            const float one = 1.0f, zero = 0.0f;
            for (int r = -3; r < REPS; r++) {
                cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                double t0 = now_s();
                cb(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)kd, &one, w,
                                CUDA_R_16BF, (int)kd, xb, CUDA_R_16BF, (int)kd, &zero, out,
                                CUDA_R_32F, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
                cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                if (r >= 0)
                    u[r] = now_s() - t0;
            }
            check(k);
            double fl = 2.0 * m * n * kd, a = median(t, REPS), b = median(u, REPS);
            printf("| %-9s | %4u | %5u x %5u | %7.1f | %7.1f | %5.1f %% |\n", shapes[si].what, m,
                   n, kd, fl / a / 1e12, fl / b / 1e12, 100.0 * b / a);
            cz_kmem_free(k, x), cz_kmem_free(k, out), cz_kmem_free(k, w), cz_kmem_free(k, xb);
        }
    cb(cublasDestroy(h), "cublasDestroy");
}

static void bench_attn(cz_kctx *k, double peak, double copy)
{
    const cz_kernels *K = cz_kctx_ops(k);
    const uint32_t H = 32, KVH = 8, D = 128;
    struct { uint32_t seqs, ctx; } cases[] = {{64, 4096}, {8, 32768}, {1, 131072}};
    for (size_t ci = 0; ci < 3; ci++) {
        uint32_t S = cases[ci].seqs, C = cases[ci].ctx, mb = C / BT, blocks = S * mb;
        size_t bstride = (size_t)BT * KVH * D;
        void *kc = cz_kmem_alloc(k, (size_t)blocks * bstride * 2);
        void *vc = cz_kmem_alloc(k, (size_t)blocks * bstride * 2);
        fill_random(k, kc, 2, (size_t)blocks * bstride, 41 + ci);
        fill_random(k, vc, 2, (size_t)blocks * bstride, 43 + ci);
        cz_kv_layer kv = {kc, vc, CZ_BF16, bstride, BT, KVH, D};
        int32_t *qsl = calloc(S + 1, 4), *sl = calloc(S, 4), *bt = calloc((size_t)S * mb, 4);
        for (uint32_t i = 0; i < S; i++) {
            qsl[i + 1] = (int32_t)i + 1;
            sl[i] = (int32_t)C;
            for (uint32_t j = 0; j < mb; j++)
                bt[i * mb + j] = (int32_t)(i * mb + j);
        }
        int32_t *dq = cz_kmem_alloc(k, (S + 1) * 4), *ds = cz_kmem_alloc(k, S * 4);
        int32_t *db = cz_kmem_alloc(k, (size_t)S * mb * 4);
        cz_kmem_upload(k, dq, qsl, (S + 1) * 4);
        cz_kmem_upload(k, ds, sl, S * 4);
        cz_kmem_upload(k, db, bt, (size_t)S * mb * 4);
        float *q = cz_kmem_alloc(k, (size_t)S * H * D * 4), *o = cz_kmem_alloc(k, (size_t)S * H * D * 4);
        fill_random(k, q, 4, (size_t)S * H * D, 47 + ci);
        cz_kreserve r = {.max_rows = S, .max_ctx = C, .max_heads = H, .max_dim = H * D};
        cz_kctx_reserve(k, &r);
        double t[REPS];
        for (int rep = -3; rep < REPS; rep++) {
            cz_kctx_sync(k);
            double t0 = now_s();
            K->attn_paged(k, o, H * D, q, H * D, &kv, dq, ds, db, mb, S, H, 0.088f, 0, 0);
            cz_kctx_sync(k);
            if (rep >= 0)
                t[rep] = now_s() - t0;
        }
        check(k);
        double med = median(t, REPS), bytes = (double)S * C * KVH * D * 2 * 2;
        printf("| bf16 KV | %3u x %6u | %7.1f MiB | %8.3f ms | %7.1f GB/s | %5.1f %% | %5.1f %% |\n",
               S, C, bytes / 1048576.0, med * 1e3, bytes / med / 1e9, 100.0 * bytes / med / peak,
               100.0 * bytes / med / copy);
        free(qsl), free(sl), free(bt);
        cz_kmem_free(k, kc), cz_kmem_free(k, vc), cz_kmem_free(k, dq), cz_kmem_free(k, ds);
        cz_kmem_free(k, db), cz_kmem_free(k, q), cz_kmem_free(k, o);
    }
}

int main(int argc, char **argv)
{
    int dev = argc > 1 ? atoi(argv[1]) : 0;
    char why[CZ_ERR_MSG_MAX];
    if (cz_kcuda_device_count(why) == 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    cz_kcuda_info info;
    cz_kctx *k = NULL;
    cz_err e;
    if (cz_kcuda_device_info(dev, &info, &e) != CZ_OK ||
        cz_kctx_cuda_create(dev, 0, NULL, &k, &e) != CZ_OK) {
        fprintf(stderr, "bench_cuda: %s\n", e.msg);
        return 1;
    }
    printf("CUDA device %d: %s, sm_%d%d, %u SMs, %.1f GiB, DRAM peak %.0f GB/s\n", dev, info.name,
           info.major, info.minor, info.sms, info.mem_bytes / 1073741824.0, info.peak_Bps / 1e9);
    if (argc == 5 && strcmp(argv[2], "--decode") == 0) {
        uint32_t b = (uint32_t)atoi(argv[4]);
        if (b < 1 || b > 64) {
            fprintf(stderr, "bench_cuda: --decode: BATCH is 1 to 64\n");
            return 2;
        }
        bench_decode(k, argv[3], &b, 1, 3, info.peak_Bps, info.peak_Bps);
        cz_kctx_free(k);
        return 0;
    }
    double copy = copy_Bps(k);
    printf("device-to-device copy (read + written): %.0f GB/s, %.1f %% of the DRAM peak\n",
           copy / 1e9, 100.0 * copy / info.peak_Bps);
    uint32_t total = 0, min_sms = 0, step = 0;
    if (cz_kcuda_sm_info(dev, &total, &min_sms, &step, &e) != CZ_OK) {
        printf("green contexts: %s\n", e.msg);
    } else {
        printf("green contexts: %u SMs, partitions of at least %u SMs in steps of %u\n", total,
               min_sms, step);
        uint32_t wants[3] = {min_sms, total / 2, total - min_sms};
        for (int i = 0; i < 3; i++) {
            cz_kctx *a = NULL, *b = NULL;
            if (cz_kctx_cuda_split(dev, wants[i], &a, &b, &e) != CZ_OK) {
                printf("  split asking %u SMs: %s\n", wants[i], e.msg);
                continue;
            }
            printf("  split asking %u SMs: %u + %u SMs\n", wants[i], cz_kctx_sms(a), cz_kctx_sms(b));
            cz_kctx_free(a), cz_kctx_free(b);
        }
    }
    printf("| decode | batch | ctx | MB/step | ms/step | GB/s | %% of DRAM peak | %% of copy |\n"
           "|---|---|---|---|---|---|---|---|\n");
    const uint32_t batches[2] = {1, 64};
    bench_decode(k, "llama-3.2-1b", batches, 2, REPS, info.peak_Bps, copy);
    bench_decode(k, "llama-3-8b", batches, 2, REPS, info.peak_Bps, copy);
    printf("| prefill GEMM | m | n x kd | cz matmul TFLOP/s | cuBLAS bf16 TFLOP/s | %% of cuBLAS |\n|---|---|---|---|---|---|\n");
    bench_gemm(k);
    printf("| attention decode | seqs x ctx | KV read | per call | GB/s | %% of DRAM peak | %% of copy |\n"
           "|---|---|---|---|---|---|---|\n");
    bench_attn(k, info.peak_Bps, copy);
    cz_kctx_free(k);
    return 0;
}
