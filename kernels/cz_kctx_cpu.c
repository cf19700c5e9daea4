/* cz_kctx_cpu.c - the CPU backend's context: its thread pool and parallel-for, its scratch
 * (sized at creation and by cz_kctx_reserve, never per call), its memory functions and
 * the table of its ops.
 *
 * Threading: the calling thread and threads - 1 persistent workers. A job is published
 * by moving a generation counter; workers spin on it for CZ__SPIN_NS after their last job
 * (back-to-back ops of a forward pass find them awake) and then block on a condition
 * variable; the caller runs its own share, then waits the same way for the others. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "cz_kernels_cpu.h"

/* How long an idle thread spins before it blocks (ns). */
#define CZ__SPIN_NS 200000

struct cz__kworker {
    cz_kctx *k;
    uint32_t tid;
};

static const cz__kbackend cpu_backend; /* defined at the end */

static const cz_kernels cpu_ops = {
    .name = "cpu",
    .embed = cz_cpu_embed,
    .rmsnorm = cz_cpu_rmsnorm,
    .layernorm = cz_cpu_layernorm,
    .matmul = cz_cpu_matmul,
    .rope = cz_cpu_rope,
    .silu_mul = cz_cpu_silu_mul,
    .gelu = cz_cpu_gelu,
    .silu = cz_cpu_silu,
    .add = cz_cpu_add,
    .transpose = cz_cpu_transpose,
    .gather_rows = cz_cpu_gather_rows,
    .kv_write = cz_cpu_kv_write,
    .attn_paged = cz_cpu_attn_paged,
    .attn_dense = cz_cpu_attn_dense,
    .copy_blocks = cz_cpu_copy_blocks,
    .moe_ffn = cz_cpu_moe_ffn,
    .conv1d = cz_cpu_conv1d,
    .conv_transpose1d = cz_cpu_conv_transpose1d,
    .argmax = cz_cpu_argmax,
    .sample = cz_cpu_sample,
};

const cz_kernels *cz_kernels_cpu(void)
{
    return &cpu_ops;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the pool ---- */

/* Runs thread tid's share of the current job. */
static void run_share(cz_kctx *k, uint32_t tid)
{
    if (k->dynamic) {
        for (;;) {
            size_t b = atomic_fetch_add_explicit(&k->next, k->chunk, memory_order_relaxed);
            if (b >= k->n)
                break;
            size_t e = k->n - b < k->chunk ? k->n : b + k->chunk;
            k->fn(k->arg, b, e, tid);
        }
        return;
    }
    if (tid >= k->used)
        return;
    size_t units = (k->n + k->chunk - 1) / k->chunk;
    size_t b = units * tid / k->used * k->chunk, e = units * (tid + 1) / k->used * k->chunk;
    if (e > k->n)
        e = k->n;
    if (b < e)
        k->fn(k->arg, b, e, tid);
}

/* Waits until the generation differs from `seen` and returns it. */
static unsigned wait_job(cz_kctx *k, unsigned seen)
{
    int64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        unsigned g = atomic_load(&k->gen);
        if (g != seen)
            return g;
        cpu_relax();
        if (i % 64 == 0) {
            int64_t t = now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > CZ__SPIN_NS)
                break;
            sched_yield(); /* a descheduled thread of this job may need the core */
        }
    }
    /* sleepers is raised before gen is read again (both sequentially consistent) and the
     * caller moves gen before it reads sleepers: one of them sees the other */
    pthread_mutex_lock(&k->mu);
    atomic_fetch_add(&k->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&k->gen)) == seen)
        pthread_cond_wait(&k->wake, &k->mu);
    atomic_fetch_sub(&k->sleepers, 1);
    pthread_mutex_unlock(&k->mu);
    return g;
}

static void *worker_main(void *p)
{
    struct cz__kworker *w = p;
    cz_kctx *k = w->k;
    unsigned seen = 0;
    for (;;) {
        seen = wait_job(k, seen);
        if (atomic_load(&k->stop))
            break;
        run_share(k, w->tid);
        if (atomic_fetch_sub(&k->pending, 1) == 1 && atomic_load(&k->caller_sleeping)) {
            pthread_mutex_lock(&k->mu);
            pthread_cond_signal(&k->done);
            pthread_mutex_unlock(&k->mu);
        }
    }
    return NULL;
}

/* Publishes the job set in k's fields, runs the caller's share and waits for the rest. */
static void run_job(cz_kctx *k)
{
    atomic_store(&k->pending, k->threads - 1);
    atomic_fetch_add(&k->gen, 1);
    if (atomic_load(&k->sleepers)) {
        pthread_mutex_lock(&k->mu);
        pthread_cond_broadcast(&k->wake);
        pthread_mutex_unlock(&k->mu);
    }
    run_share(k, 0);
    int64_t t0 = 0;
    for (unsigned i = 1; atomic_load(&k->pending); i++) {
        cpu_relax();
        if (i % 64 == 0) {
            int64_t t = now_ns();
            sched_yield(); /* a descheduled worker may need this core to finish */
            if (!t0) {
                t0 = t;
            } else if (t - t0 > CZ__SPIN_NS) {
                pthread_mutex_lock(&k->mu);
                atomic_store(&k->caller_sleeping, true);
                while (atomic_load(&k->pending))
                    pthread_cond_wait(&k->done, &k->mu);
                atomic_store(&k->caller_sleeping, false);
                pthread_mutex_unlock(&k->mu);
                break;
            }
        }
    }
}

void cz__kpar(cz_kctx *k, size_t n, size_t grain, size_t min_items, cz__kfn fn, void *arg)
{
    if (!n)
        return;
    if (grain < 1)
        grain = 1;
    size_t used = min_items ? n / min_items : n;
    if (used > k->threads)
        used = k->threads;
    if (used > (n + grain - 1) / grain)
        used = (n + grain - 1) / grain;
    if (used <= 1) {
        fn(arg, 0, n, 0);
        return;
    }
    k->fn = fn;
    k->arg = arg;
    k->n = n;
    k->chunk = grain;
    k->used = (uint32_t)used;
    k->dynamic = false;
    run_job(k);
}

void cz__kpar_dyn(cz_kctx *k, size_t n, size_t chunk, cz__kfn fn, void *arg)
{
    if (!n)
        return;
    if (chunk < 1)
        chunk = 1;
    if (k->threads == 1 || n <= chunk) {
        fn(arg, 0, n, 0);
        return;
    }
    k->fn = fn;
    k->arg = arg;
    k->n = n;
    k->chunk = chunk;
    k->dynamic = true;
    atomic_store(&k->next, 0);
    run_job(k);
}

/* ---- memory ---- */

static void *alloc_aligned(size_t bytes)
{
    void *p = NULL;
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    if (posix_memalign(&p, 64, n) != 0 || !p) {
        fprintf(stderr, "cadenza: out of memory: cannot allocate %zu bytes\n", n);
        exit(1);
    }
    return p;
}

static void *cpu_alloc(cz_kctx *k, size_t bytes)
{
    (void)k;
    return alloc_aligned(bytes);
}

static void cpu_free(cz_kctx *k, void *p)
{
    (void)k;
    free(p);
}

static void cpu_copy(cz_kctx *k, void *dst, const void *src, size_t bytes)
{
    (void)k;
    if (bytes)
        memcpy(dst, src, bytes);
}

static void cpu_copy_async(cz_kctx *k, void *dst, const void *src, size_t bytes, bool to_host)
{
    (void)to_host;
    cpu_copy(k, dst, src, bytes);
}

static void cpu_nop(cz_kctx *k)
{
    (void)k;
}

static cz_status cpu_status(const cz_kctx *k, cz_err *err)
{
    (void)k;
    cz_err_clear(err);
    return CZ_OK;
}

void cz__kctx_cpu_set_avx2(cz_kctx *k, bool on)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    CZ_ASSERT(!on || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
#else
    CZ_ASSERT(!on);
#endif
    k->avx2 = on;
}

static void stop_workers(cz_kctx *k)
{
    atomic_store(&k->stop, true);
    pthread_mutex_lock(&k->mu);
    atomic_fetch_add(&k->gen, 1);
    pthread_cond_broadcast(&k->wake);
    pthread_mutex_unlock(&k->mu);
    for (uint32_t i = 0; i < k->started; i++)
        pthread_join(k->workers[i], NULL);
    k->started = 0;
}

uint32_t cz_kctx_cpu_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 && n <= 4096 ? (uint32_t)n : 1u;
}

cz_status cz_kctx_cpu_create(uint32_t threads, cz_kctx **out, cz_err *err)
{
    *out = NULL;
    if (threads == 0)
        return cz_err_set(err, CZ_EINVAL, "kernels: threads must be at least 1");
    /* OpenBLAS is first loaded here, by a command that runs the engine (a simulation never
     * needs it); the context's threads and its caller may each run a GEMM at once */
    cz_status st = cz_blas_reserve(threads + 1, err);
    if (st != CZ_OK)
        return st;
    cz_kctx *k = cz_xcalloc(1, sizeof *k);
    k->h = (cz__khead){.ops = &cpu_ops, .be = &cpu_backend, .threads = threads};
    k->threads = threads;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    k->avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    atomic_init(&k->next, 0);
    atomic_init(&k->gen, 0);
    atomic_init(&k->pending, 0);
    atomic_init(&k->sleepers, 0);
    atomic_init(&k->caller_sleeping, false);
    atomic_init(&k->stop, false);
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->wake, NULL);
    pthread_cond_init(&k->done, NULL);

    k->ts = cz_xcalloc(threads, sizeof *k->ts);
    size_t tile = (size_t)CZ__ATT_QT * CZ_KMAX_HEAD_DIM;
    for (uint32_t t = 0; t < threads; t++) {
        cz__kthread *s = &k->ts[t];
        s->q = alloc_aligned(tile * sizeof(float));
        s->acc = alloc_aligned(tile * sizeof(float));
        s->m = alloc_aligned(CZ__ATT_QT * sizeof(float));
        s->l = alloc_aligned(CZ__ATT_QT * sizeof(float));
        s->s = alloc_aligned((size_t)CZ__ATT_QT * CZ__ATT_KT * sizeof(float));
        s->kw = alloc_aligned((size_t)CZ__ATT_KT * CZ_KMAX_HEAD_DIM * sizeof(float));
        s->vw = alloc_aligned((size_t)CZ__ATT_KT * CZ_KMAX_HEAD_DIM * sizeof(float));
        s->panel = alloc_aligned((size_t)CZ__TPANEL_FLOATS * sizeof(float));
    }
    k->panel = alloc_aligned((size_t)CZ__PANEL_FLOATS * sizeof(float));

    if (threads > 1) {
        k->workers = cz_xcalloc(threads - 1, sizeof *k->workers);
        k->wargs = cz_xcalloc(threads - 1, sizeof *k->wargs);
        for (uint32_t i = 0; i + 1 < threads; i++) {
            k->wargs[i] = (struct cz__kworker){.k = k, .tid = i + 1};
            int rc = pthread_create(&k->workers[i], NULL, worker_main, &k->wargs[i]);
            if (rc != 0) {
                cz_kctx_free(k);
                return cz_err_set(err, CZ_EINVAL, "kernels: cannot start worker thread %u of %u: %s",
                                  i + 1, threads - 1, strerror(rc));
            }
            k->started++;
        }
    }
    *out = k;
    return CZ_OK;
}

static void *regrow(void *p, size_t bytes)
{
    free(p);
    return alloc_aligned(bytes);
}

static void cpu_reserve(cz_kctx *k, const cz_kreserve *r)
{
    cz_kreserve o = k->res, n = o;
#define CZ__MAXF(f) n.f = r->f > o.f ? r->f : o.f
    CZ__MAXF(max_rows);
    CZ__MAXF(max_ctx);
    CZ__MAXF(max_heads);
    CZ__MAXF(max_dim);
    CZ__MAXF(max_experts);
    CZ__MAXF(max_moe_dim);
#undef CZ__MAXF
    if (r->max_experts && !r->max_moe_dim && r->max_dim > n.max_moe_dim)
        n.max_moe_dim = r->max_dim;
    if (n.max_dim != o.max_dim) {
        for (uint32_t t = 0; t < k->threads; t++) {
            k->ts[t].row = regrow(k->ts[t].row, (size_t)n.max_dim * sizeof(float));
            k->ts[t].idx = regrow(k->ts[t].idx, (size_t)n.max_dim * sizeof(int32_t));
        }
    }
    if (n.max_rows != o.max_rows)
        k->plan = regrow(k->plan, (size_t)n.max_rows * 4 * sizeof(int32_t));
    if (n.max_experts && (n.max_rows != o.max_rows || n.max_experts != o.max_experts ||
                          n.max_moe_dim != o.max_moe_dim)) {
        size_t re = (size_t)n.max_rows * n.max_experts, rd = (size_t)n.max_rows * n.max_moe_dim;
        k->moe_logits = regrow(k->moe_logits, re * sizeof(float));
        k->moe_ids = regrow(k->moe_ids, re * sizeof(int32_t));
        k->moe_w = regrow(k->moe_w, re * sizeof(float));
        k->moe_count = regrow(k->moe_count, ((size_t)n.max_experts + 1) * sizeof(int32_t));
        k->moe_tok = regrow(k->moe_tok, re * sizeof(int32_t));
        k->moe_tokw = regrow(k->moe_tokw, re * sizeof(float));
        k->moe_x = regrow(k->moe_x, rd * sizeof(float));
        k->moe_gu = regrow(k->moe_gu, rd * sizeof(float));
        k->moe_act = regrow(k->moe_act, rd * sizeof(float));
        k->moe_y = regrow(k->moe_y, rd * sizeof(float));
    }
    k->res = n;
}

static void cpu_destroy(cz_kctx *k)
{
    stop_workers(k);
    for (uint32_t t = 0; t < k->threads; t++) {
        cz__kthread *s = &k->ts[t];
        free(s->q);
        free(s->acc);
        free(s->m);
        free(s->l);
        free(s->s);
        free(s->kw);
        free(s->vw);
        free(s->panel);
        free(s->row);
        free(s->idx);
    }
    free(k->ts);
    free(k->panel);
    free(k->plan);
    free(k->moe_logits);
    free(k->moe_ids);
    free(k->moe_w);
    free(k->moe_count);
    free(k->moe_tok);
    free(k->moe_tokw);
    free(k->moe_x);
    free(k->moe_gu);
    free(k->moe_act);
    free(k->moe_y);
    free(k->workers);
    free(k->wargs);
    pthread_cond_destroy(&k->wake);
    pthread_cond_destroy(&k->done);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

static const cz__kbackend cpu_backend = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .copy_async = cpu_copy_async,
    .copy_wait = cpu_nop,
    .sync = cpu_nop,
    .bind = cpu_nop,
    .reserve = cpu_reserve,
    .status = cpu_status,
    .destroy = cpu_destroy,
};
