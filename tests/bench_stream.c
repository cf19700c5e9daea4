/* bench_stream.c - STREAM copy and triad on a set of threads (bench_stream.h). */
#include "bench_stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cz_base.h"

#define STREAM_N ((size_t)1 << 24)
#define STREAM_REPS 10

typedef struct {
    double *a, *b, *c;
    uint32_t threads;
    pthread_barrier_t bar;
    double t0, best[2];
} stream_run;

typedef struct {
    stream_run *r;
    uint32_t tid;
} stream_arg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *stream_thread(void *p)
{
    const stream_arg *g = p;
    stream_run *r = g->r;
    size_t b = STREAM_N * g->tid / r->threads, e = STREAM_N * (g->tid + 1) / r->threads;
    double *restrict a = r->a, *restrict bb = r->b, *restrict c = r->c;
    for (size_t i = b; i < e; i++) { /* first touch: the pages live near their thread */
        a[i] = 1.0;
        bb[i] = 2.0;
        c[i] = 0.0;
    }
    for (int op = 0; op < 2; op++)
        for (int rep = 0; rep < STREAM_REPS; rep++) {
            pthread_barrier_wait(&r->bar);
            if (g->tid == 0)
                r->t0 = now_s();
            if (op == 0)
                for (size_t i = b; i < e; i++)
                    c[i] = a[i];
            else
                for (size_t i = b; i < e; i++)
                    a[i] = bb[i] + 3.0 * c[i];
            pthread_barrier_wait(&r->bar);
            if (g->tid == 0) {
                double t = now_s() - r->t0;
                if (rep == 0 || t < r->best[op])
                    r->best[op] = t;
            }
        }
    return NULL;
}

cz_bench_stream cz_bench_stream_measure(uint32_t threads)
{
    CZ_ASSERT(threads >= 1);
    stream_run r = {.threads = threads};
    r.a = cz_xmalloc(STREAM_N * sizeof(double));
    r.b = cz_xmalloc(STREAM_N * sizeof(double));
    r.c = cz_xmalloc(STREAM_N * sizeof(double));
    pthread_barrier_init(&r.bar, NULL, threads);
    pthread_t *th = cz_xcalloc(threads, sizeof *th);
    stream_arg *args = cz_xcalloc(threads, sizeof *args);
    for (uint32_t t = 0; t < threads; t++) {
        args[t] = (stream_arg){&r, t};
        if (t && pthread_create(&th[t], NULL, stream_thread, &args[t]) != 0) {
            fprintf(stderr, "bench_stream: cannot start thread %u of %u\n", t, threads);
            abort();
        }
    }
    stream_thread(&args[0]);
    for (uint32_t t = 1; t < threads; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&r.bar);
    volatile double sink = r.a[STREAM_N / 2] + r.c[STREAM_N / 3]; /* keep the loops */
    (void)sink;
    free(th);
    free(args);
    free(r.a);
    free(r.b);
    free(r.c);
    return (cz_bench_stream){.copy_Bps = 16.0 * STREAM_N / r.best[0],
                             .triad_Bps = 24.0 * STREAM_N / r.best[1]};
}

double cz_bench_stream_triad_Bps(uint32_t threads)
{
    return cz_bench_stream_measure(threads).triad_Bps;
}
