/* bench_decode.c - decode at batch 1 on the CPU backend against the machine's memory
 * bandwidth: a decode step reads every weight once and the sequence's KV, so its speed is
 * bytes / step time, and the yardstick is what the cores can stream.
 *
 * 1. STREAM's triad (McCalpin: a[i] = b[i] + s x c[i] over double arrays far larger than
 *    the caches, counted as 3 x 8 bytes per element, best of NTIMES runs) on as many
 *    threads as online CPUs, each owning a contiguous slice it first touched itself.
 * 2. For tiny-llama and llama-3.2-1b with random bf16 weights (a bf16 KV cache) on the same
 *    threads: a prompt prefilled in one step, then decode steps; the median and the best
 *    step time (the best compares with the triad's best), bytes per step = the net's
 *    weight bytes + the KV of the context read by attention, the resulting GB/s and their
 *    share of the triad's.
 *
 * 3. tiny-omni's pipeline (random bf16 weights) at one conversation: the compute time of
 *    one second of speech in and out (100 mel frames encoded, 3.6 thinker tokens, 12.5
 *    talker tokens each with 3 code-predictor steps, 25 code frames vocoded, the chunks'
 *    overlap included), as a real-time factor: below 1 keeps up.
 *
 * Usage: bench_decode [--quick] (meson benchmark decode_bandwidth). --quick uses smaller
 * arrays and fewer steps. Prints a table; exits 0. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cz_net.h"

#define NTIMES 10
#define BT 16u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- STREAM triad ---- */

typedef struct triad {
    double *a, *b, *c;
    size_t lo, hi;
    pthread_barrier_t *bar;
    double best_s; /* thread 0's */
} triad;

static void *triad_main(void *p)
{
    triad *t = p;
    for (size_t i = t->lo; i < t->hi; i++) {
        t->a[i] = 1.0;
        t->b[i] = 2.0;
        t->c[i] = 0.5;
    }
    const double s = 3.0;
    double best = 1e30;
    for (int r = 0; r < NTIMES; r++) {
        pthread_barrier_wait(t->bar);
        double t0 = now_s();
        double *restrict a = t->a;
        const double *restrict b = t->b, *restrict c = t->c;
        for (size_t i = t->lo; i < t->hi; i++)
            a[i] = b[i] + s * c[i];
        pthread_barrier_wait(t->bar);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    t->best_s = best;
    return NULL;
}

/* Best triad bandwidth in bytes/s over `n` doubles per array on `threads` threads. */
static double stream_triad(size_t n, uint32_t threads)
{
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    CZ_ASSERT(a && b && c);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, threads);
    triad *ts = calloc(threads, sizeof *ts);
    pthread_t *tid = calloc(threads, sizeof *tid);
    for (uint32_t t = 0; t < threads; t++) {
        ts[t] = (triad){a, b, c, n * t / threads, n * (t + 1) / threads, &bar, 0};
        if (t)
            CZ_ASSERT(pthread_create(&tid[t], NULL, triad_main, &ts[t]) == 0);
    }
    triad_main(&ts[0]);
    for (uint32_t t = 1; t < threads; t++)
        pthread_join(tid[t], NULL);
    double check = 0;
    for (size_t i = 0; i < n; i += n / 7 + 1)
        check += a[i];
    CZ_ASSERT(check > 0);
    double best = ts[0].best_s;
    pthread_barrier_destroy(&bar);
    free(ts);
    free(tid);
    free(a);
    free(b);
    free(c);
    return 3.0 * sizeof(double) * (double)n / best;
}

/* ---- decode ---- */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef struct result {
    double weights_bytes, kv_bytes, step_s, best_s;
    uint32_t ctx;
} result;

/* Prefills `prompt` tokens, then times `steps` decode steps at batch 1. */
static result decode_run(const char *card, uint32_t threads, uint32_t prompt, uint32_t steps)
{
    cz_err err;
    cz_model_card m;
    if (cz_model_card_load(card, &m, &err) != CZ_OK) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        exit(1);
    }
    const cz_stage_card *s = &m.stages[0];
    cz_kctx *k = NULL;
    cz_net *n = NULL;
    cz_kv_pool *kv = NULL;
    cz_net_source src = {.checkpoint = NULL, .seed = 1, .dtype = CZ_BF16};
    uint32_t total = prompt + steps, blocks = (total + BT - 1) / BT;
    if (cz_kctx_cpu_create(threads, &k, &err) != CZ_OK ||
        cz_net_create(k, s, &src, &n, &err) != CZ_OK ||
        cz_kv_pool_create(k, s, blocks, BT, CZ_BF16, &kv, &err) != CZ_OK) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        exit(1);
    }
    cz_net_reserve(n, prompt, 1, total);
    int32_t *toks = calloc(total, sizeof *toks), *pos = calloc(total, sizeof *pos);
    int32_t *bt = calloc(blocks, sizeof *bt);
    int64_t *slots = calloc(total, sizeof *slots);
    double *dt = calloc(steps, sizeof *dt);
    for (uint32_t i = 0; i < total; i++) {
        toks[i] = (int32_t)((i * 2654435761u) % s->vocab);
        pos[i] = (int32_t)i;
        slots[i] = i;
    }
    for (uint32_t i = 0; i < blocks; i++)
        bt[i] = (int32_t)i;
    int32_t qsl[2] = {0, (int32_t)prompt}, len = (int32_t)prompt, row = (int32_t)prompt - 1, id;
    cz_step_batch b = {.n_seqs = 1, .n_tokens = prompt, .max_blocks = blocks, .tokens = toks,
                       .positions = pos, .qsl = qsl, .seq_lens = &len, .block_table = bt,
                       .slots = slots, .sample_rows = &row, .n_samples = 1};
    cz_net_decode(n, kv, &b, NULL, &id, NULL);
    double kv_read = 0;
    for (uint32_t t = 0; t < steps; t++) {
        uint32_t p = prompt + t;
        toks[p] = id;
        qsl[1] = 1;
        len = (int32_t)p + 1;
        row = 0;
        b.n_tokens = 1;
        b.tokens = &toks[p];
        b.positions = &pos[p];
        b.slots = &slots[p];
        double t0 = now_s();
        cz_net_decode(n, kv, &b, NULL, &id, NULL);
        dt[t] = now_s() - t0;
        kv_read += (double)cz_kv_pool_token_bytes(kv, p + 1);
    }
    qsort(dt, steps, sizeof *dt, cmp_double);
    result r = {.weights_bytes = (double)cz_net_weight_bytes(n), .kv_bytes = kv_read / steps,
                .step_s = dt[steps / 2], .best_s = dt[0], .ctx = prompt + steps / 2};
    free(toks);
    free(pos);
    free(bt);
    free(slots);
    free(dt);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
    return r;
}

/* ---- tiny-omni at one conversation ---- */

/* Median seconds of `reps` calls of fn. */
typedef void (*stage_fn)(void *arg);

static double median_of(stage_fn fn, void *arg, int reps)
{
    double t[64];
    CZ_ASSERT(reps > 0 && reps <= 64);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        fn(arg);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return t[reps / 2];
}

typedef struct omni {
    cz_net *net;
    cz_kv_pool *kv;
    int32_t tok, pos, qsl[2], len, row, bt[64];
    int64_t slot;
    uint32_t frames;
} omni;

static void omni_encode(void *p)
{
    omni *o = p;
    cz_net_encode(o->net, &o->frames, 1, 1);
}

static void omni_vocode(void *p)
{
    omni *o = p;
    cz_net_vocode(o->net, &o->frames, 1, 1);
}

static void omni_inner(void *p)
{
    omni *o = p;
    cz_net_inner(o->net, 1, o->frames);
}

/* One decode step at position o->pos (the cache before it is whatever was written). */
static void omni_decode(void *p)
{
    omni *o = p;
    o->qsl[0] = 0;
    o->qsl[1] = 1;
    o->len = o->pos + 1;
    o->row = 0;
    o->slot = o->pos;
    cz_step_batch b = {.n_seqs = 1, .n_tokens = 1, .max_blocks = 64, .tokens = &o->tok,
                       .positions = &o->pos, .qsl = o->qsl, .seq_lens = &o->len,
                       .block_table = o->bt, .slots = &o->slot, .sample_rows = &o->row,
                       .n_samples = 1};
    int32_t id;
    cz_net_decode(o->net, o->kv, &b, NULL, &id, NULL);
    o->tok = id;
}

static void tiny_omni(uint32_t threads, int reps)
{
    cz_err err;
    cz_model_card m;
    cz_kctx *k = NULL;
    if (cz_model_card_load("tiny-omni", &m, &err) != CZ_OK ||
        cz_kctx_cpu_create(threads, &k, &err) != CZ_OK) {
        fprintf(stderr, "bench_decode: %s\n", err.msg);
        exit(1);
    }
    const char *names[] = {"audio_encoder", "thinker", "talker", "code_predictor", "code2wav"};
    omni o[5];
    memset(o, 0, sizeof o);
    cz_net_source src = {.checkpoint = NULL, .seed = 1, .dtype = CZ_BF16};
    for (int i = 0; i < 5; i++) {
        const cz_stage_card *s = cz_model_card_stage(&m, names[i]);
        CZ_ASSERT(s != NULL);
        if (cz_net_create(k, s, &src, &o[i].net, &err) != CZ_OK ||
            (s->kind == CZ_STAGE_AR &&
             cz_kv_pool_create(k, s, 64, BT, CZ_BF16, &o[i].kv, &err) != CZ_OK)) {
            fprintf(stderr, "bench_decode: %s\n", err.msg);
            exit(1);
        }
        for (int j = 0; j < 64; j++)
            o[i].bt[j] = j;
        o[i].pos = 200; /* a turn's context: 200 positions (their KV left as drawn) */
    }
    cz_net_reserve(o[0].net, 128, 1, 128);
    cz_net_reserve(o[1].net, 1, 1, 64 * BT);
    cz_net_reserve(o[2].net, 1, 1, 64 * BT);
    cz_net_reserve(o[3].net, 1, 1, 3);
    cz_net_reserve(o[4].net, 64, 1, 64);
    o[0].frames = 100; /* 1 s of 100 Hz mel frames */
    o[3].frames = 3;   /* the 3 residual codebooks */
    o[4].frames = 50;  /* a 25-frame chunk with 25 of overlap: 2 s of speech */
    double enc = median_of(omni_encode, &o[0], reps);
    double th = median_of(omni_decode, &o[1], reps);
    double tk = median_of(omni_decode, &o[2], reps);
    double cp = median_of(omni_inner, &o[3], reps);
    double voc = median_of(omni_vocode, &o[4], reps) / 2.0;
    double per_s = enc + 3.6 * th + 12.5 * (tk + cp) + voc;
    printf("\ntiny-omni, %u threads, compute per second of speech (batch 1):\n", threads);
    printf("  encoder 100 frames %.3f ms | thinker 3.6 x %.3f ms | talker 12.5 x (%.3f + code "
           "predictor %.3f) ms | code2wav %.3f ms\n",
           enc * 1e3, th * 1e3, tk * 1e3, cp * 1e3, voc * 1e3);
    printf("  %.1f ms per second: real-time factor %.3f\n", per_s * 1e3, per_s);
    for (int i = 0; i < 5; i++) {
        cz_kv_pool_free(o[i].kv);
        cz_net_free(o[i].net);
    }
    cz_kctx_free(k);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    uint32_t threads = cz_kctx_cpu_default_threads();
    size_t n = quick ? (size_t)8 << 20 : (size_t)32 << 20; /* doubles per array */
    double stream = stream_triad(n, threads);
    printf("STREAM triad, %u threads, 3 arrays of %zu MiB: %.2f GB/s (best of %d)\n\n", threads,
           n * sizeof(double) >> 20, stream / 1e9, NTIMES);
    printf("%-14s %7s %11s %5s %17s %8s %15s %15s\n", "model (bf16)", "threads",
           "weights MiB", "ctx", "step ms med/best", "tok/s", "GB/s med/best", "% STREAM m/b");
    const char *cards[] = {"tiny-llama", "llama-3.2-1b"};
    uint32_t steps[] = {quick ? 50u : 400u, quick ? 8u : 48u};
    for (size_t i = 0; i < CZ_ARRAY_LEN(cards); i++) {
        result r = decode_run(cards[i], threads, 128, steps[i]);
        double bytes = r.weights_bytes + r.kv_bytes, bw = bytes / r.step_s,
               bb = bytes / r.best_s;
        printf("%-14s %7u %11.1f %5u %8.3f/%8.3f %8.1f %7.2f/%7.2f %6.1f/%6.1f%%\n", cards[i],
               threads, r.weights_bytes / (1 << 20), r.ctx, r.step_s * 1e3, r.best_s * 1e3,
               1.0 / r.step_s, bw / 1e9, bb / 1e9, 100.0 * bw / stream, 100.0 * bb / stream);
    }
    printf("\nbytes per step = weights + the context's KV; a model whose weights fit in the "
           "caches can pass 100 %%.\n");
    tiny_omni(threads, quick ? 5 : 31);
    return 0;
}
