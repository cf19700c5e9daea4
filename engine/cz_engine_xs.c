/* cz_engine_xs.c - the wall-clock driver of the cross-stage runtime (runtime/
 * cz_xstage.h): Nova's vision encode, LLM prefill and LLM decode on one device, with real
 * forward passes on SM partitions (docs/engine.md, "Cross-stage execution").
 *
 * The device has two workers, each a thread: the exclusive worker runs vision, prefill and
 * hybrid steps, the decode worker decode steps. A step runs on the kernel context of the
 * partition the runtime gave it:
 *  - two whole-device contexts, one per worker (a step alone, and the Multi-Stream
 *    baseline, where both share every SM);
 *  - for each decode share Nova's Eq. 5 can produce, a pair of contexts on disjoint
 *    partitions from one split: the decode part and the rest. On CUDA these are green
 *    contexts (cz_kctx_cuda_split), created ahead so a step only picks its stream; on the
 *    CPU the units are threads: a pair is two thread pools of d and T - d threads.
 * Every context runs the same networks: the LLM and the vision encoders are built once on
 * the exclusive worker's whole-device context and shared by the others (cz_net_share),
 * and one KV pool holds every request's blocks.
 *
 * The LLM's KV for a request's whole context is reserved by the runtime when its prefill
 * starts; the driver gives the request ceil((in + out) / block) blocks then and takes them
 * back when it ends. Input ids are drawn from the request's index; each sampled id feeds
 * the request's next step. Every step is a row of /steps with the runtime's prediction. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cz_engine_int.h"
#include "cz_kernels.h"
#include "cz_kvpool.h"
#include "cz_net.h"
#include "cz_wall.h"
#include "cz_xstage.h"

#define NONE UINT32_MAX
#define XS_EXCL 0u
#define XS_DEC 1u

/* A kernel context and the nets on it. */
typedef struct xs_ctx {
    cz_kctx *k;
    uint32_t units;     /* SMs (CUDA) or threads (CPU) */
    cz_net *llm;
    cz_net **vis;       /* (vision stages); NULL on decode-side contexts */
} xs_ctx;

/* A step handed to a worker, and what comes back. */
typedef struct xs_job {
    cz_xs_work work;
    uint32_t ctx;
    uint32_t req;           /* VISION, PREFILL */
    cz_step_batch b;
    int32_t *tokens, *positions, *qsl, *seq_lens, *table, *rows, *out_ids;
    int64_t *slots;
    uint32_t *sample_req;   /* per sampled row: its request */
    uint32_t n_samples;
    uint64_t seed;
    double kernel_s;
    cz_step_record rec;
    bool done;
} xs_job;

typedef struct xs_worker {
    pthread_t th;
    bool started;
    pthread_cond_t cv;
    xs_job job;
    bool queued;            /* job waits to run */
    bool busy;              /* a job is queued or running */
} xs_worker;

typedef struct xs_eng {
    const cz_config *cfg;
    const cz_workload *wl;
    cz_metrics *m;
    cz_xstage *x;
    bool cuda;
    uint32_t llm;           /* pipeline index of the LLM */
    uint32_t total;         /* units of the whole device */
    uint32_t min_units, step_units; /* CUDA partitions' rules */
    xs_ctx *ctx;            /* 0, 1: whole device (exclusive, decode); then pairs */
    uint32_t n_ctx;
    uint32_t *pair_units;   /* decode units of pair i: ctx 2 + 2i (decode), 3 + 2i (rest) */
    uint32_t n_pairs;
    cz_kv_pool *pool;
    uint32_t bt, max_blocks;
    int32_t *free_blocks;   /* a stack */
    uint32_t n_free;
    int32_t *table;         /* (requests, max_blocks) */
    bool *has_blocks;
    int32_t **ids;          /* per request: its in + out token ids */
    cz_sampling sampling;
    cz_err bad;             /* bad.status set: a step's logits held NaN or +inf */
    xs_worker w[2];
    pthread_mutex_t mu;
    pthread_cond_t cv_main;
    struct timespec t0;
    bool quit;
    uint32_t done_mask;     /* workers whose job finished, not yet reported */
    uint32_t done_order[2]; /* ... in the order they finished */
    uint32_t n_done;
    double arrival_t;       /* the pending arrival timer (NAN: none) */
    uint64_t step_seed;
} xs_eng;

static double clock_s(const xs_eng *X)
{
    return cz_wall_since_s(&X->t0);
}

/* ---- partitions ---- */

/* The decode side's units for a share of the device (0: the whole device). */
static uint32_t units_of(const xs_eng *X, double share)
{
    if (share >= 1.0 - 1e-9 || X->total < 2)
        return 0;
    double want = share * X->total;
    uint32_t u;
    if (X->cuda) {
        u = cz_kcuda_sm_round((uint32_t)llround(want), X->total, X->min_units, X->step_units);
    } else {
        long r = lround(want);
        u = r < 1 ? 1u : (uint32_t)r;
        if (u > X->total - 1)
            u = X->total - 1;
    }
    return u >= X->total ? 0 : u;
}

/* The context a step runs on: its worker's whole-device context, or its side of the pair
 * its share names. */
static uint32_t ctx_for(const xs_eng *X, const cz_xs_step *s)
{
    bool dec = s->work == CZ_XS_DECODE;
    uint32_t u = units_of(X, dec ? s->share : 1.0 - s->share);
    if (s->share >= 1.0 - 1e-9 || u == 0)
        return dec ? XS_DEC : XS_EXCL;
    for (uint32_t i = 0; i < X->n_pairs; i++)
        if (X->pair_units[i] == u)
            return 2 + 2 * i + (dec ? 0 : 1);
    CZ_ASSERT(0 && "a partition that was not created ahead");
    return XS_EXCL;
}

/* The decode units every share Eq. 5 can give (the pairs to create). */
static void plan_pairs(xs_eng *X)
{
    const cz_xs_policy *pol = &X->cfg->xs;
    uint32_t cap = 64;
    X->pair_units = cz_xcalloc(cap, sizeof *X->pair_units);
    if (pol->kind != CZ_XS_NOVA || pol->multi_stream)
        return;
    uint32_t most = (pol->pending_vision > pol->pending_prefill ? pol->pending_vision
                                                                 : pol->pending_prefill) + 2;
    cz_xs_work beside[2] = {CZ_XS_VISION, CZ_XS_PREFILL};
    for (int b = 0; b < 2; b++)
        for (uint32_t pend = 1; pend <= most; pend++) {
            /* an exclusive step beside a decode of this share maps to the same pair */
            uint32_t u = units_of(X, cz_xs_decode_share(pol, beside[b], pend, X->cfg->hw.sms));
            bool seen = u == 0;
            for (uint32_t i = 0; i < X->n_pairs && !seen; i++)
                seen = X->pair_units[i] == u;
            if (!seen && X->n_pairs < cap)
                X->pair_units[X->n_pairs++] = u;
        }
}

static cz_status make_contexts(xs_eng *X, uint32_t threads, cz_err *err)
{
    cz_status st;
    plan_pairs(X);
    X->n_ctx = 2 + 2 * X->n_pairs;
    X->ctx = cz_xcalloc(X->n_ctx, sizeof *X->ctx);
    for (uint32_t i = 0; i < 2; i++) {
        st = X->cuda ? cz_kctx_cuda_create(0, 0, NULL, &X->ctx[i].k, err)
                     : cz_kctx_cpu_create(threads, &X->ctx[i].k, err);
        if (st != CZ_OK)
            return st;
        X->ctx[i].units = X->total;
    }
    for (uint32_t i = 0; i < X->n_pairs; i++) {
        xs_ctx *d = &X->ctx[2 + 2 * i], *r = &X->ctx[3 + 2 * i];
        uint32_t u = X->pair_units[i];
        if (X->cuda) {
            if ((st = cz_kctx_cuda_split(0, u, &d->k, &r->k, err)) != CZ_OK)
                return st;
            d->units = cz_kctx_sms(d->k);
            r->units = cz_kctx_sms(r->k);
        } else {
            if ((st = cz_kctx_cpu_create(u, &d->k, err)) != CZ_OK ||
                (st = cz_kctx_cpu_create(threads - u, &r->k, err)) != CZ_OK)
                return st;
            d->units = u;
            r->units = threads - u;
        }
    }
    return CZ_OK;
}

/* ---- loading ---- */

static cz_status load_nets(xs_eng *X, cz_err *err)
{
    const cz_config *cfg = X->cfg;
    const cz_model_card *mc = &cfg->model;
    uint32_t nreq = cz_xstage_requests(X->x);
    uint32_t max_in = 1, max_ctx = 1, max_img = 1;
    for (uint32_t r = 0; r < nreq; r++) {
        cz_xs_req_info q = cz_xstage_req(X->x, r);
        max_in = q.in_tokens > max_in ? q.in_tokens : max_in;
        max_ctx = q.in_tokens + q.out_tokens > max_ctx ? q.in_tokens + q.out_tokens : max_ctx;
        max_img = q.image_tokens > max_img ? q.image_tokens : max_img;
    }
    uint32_t max_tokens = max_in > cfg->xs.token_budget ? max_in : cfg->xs.token_budget;
    uint32_t max_seqs = nreq ? nreq : 1;
    const cz_stage_card *lc = &mc->stages[mc->pipe[X->llm].stage];
    cz_net_source src = cz_engine_net_source(cfg, mc->pipe[X->llm].stage);
    cz_status st = cz_net_create(X->ctx[0].k, lc, &src, &X->ctx[0].llm, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "engine: ");
    for (uint32_t c = 0; c < X->n_ctx; c++) {
        xs_ctx *C = &X->ctx[c];
        if (c > 0)
            C->llm = cz_net_share(X->ctx[0].llm, C->k);
        cz_net_reserve(C->llm, max_tokens, max_seqs, max_ctx);
        bool excl = c == XS_EXCL || (c >= 2 && c % 2 == 1);
        if (!excl || X->llm == 0)
            continue;
        C->vis = cz_xcalloc(X->llm, sizeof *C->vis);
        for (uint32_t p = 0; p < X->llm; p++) {
            const cz_stage_card *vc = &mc->stages[mc->pipe[p].stage];
            uint32_t frames = mc->pipe[p].input_tokens ? mc->pipe[p].input_tokens : max_img;
            uint32_t ds = vc->arch.downsample ? vc->arch.downsample : 1;
            if (c == XS_EXCL) {
                cz_net_source vs = cz_engine_net_source(cfg, mc->pipe[p].stage);
                if ((st = cz_net_create(C->k, vc, &vs, &C->vis[p], err)) != CZ_OK)
                    return cz_err_prefix(err, "engine: ");
            } else {
                C->vis[p] = cz_net_share(X->ctx[XS_EXCL].vis[p], C->k);
            }
            cz_net_reserve(C->vis[p], frames * ds, 1, frames * ds);
        }
    }
    /* one pool: the runtime's KV tokens in blocks, plus one block per request for the
     * rounding of each request's reservation */
    const cz_server_config *sc = &cfg->place[X->llm].server;
    X->bt = sc->block_tokens;
    X->max_blocks = (max_ctx + X->bt - 1) / X->bt;
    uint32_t blocks = sc->kv_blocks + nreq;
    double bytes = (double)blocks * X->bt * cz_stage_kv_bytes_per_token(lc) /
                   (lc->kv_bytes ? lc->kv_bytes : 2) * (double)cz_dtype_size((cz_dtype)cfg->engine.kv_dtype);
    if (bytes > cfg->engine.max_kv_bytes)
        return cz_err_set(err, CZ_EINVAL,
                          "engine: the LLM's KV pool of %u blocks needs %.0f MiB, above "
                          "engine.max_kv_bytes (%.0f MiB); set server.kv_blocks or "
                          "engine.max_kv_bytes",
                          blocks, bytes / 1048576.0, cfg->engine.max_kv_bytes / 1048576.0);
    if ((st = cz_kv_pool_create(X->ctx[0].k, lc, blocks, X->bt, (cz_dtype)cfg->engine.kv_dtype,
                                &X->pool, err)) != CZ_OK)
        return cz_err_prefix(err, "engine: ");
    X->free_blocks = cz_xmalloc((size_t)blocks * sizeof *X->free_blocks);
    for (uint32_t i = 0; i < blocks; i++)
        X->free_blocks[i] = (int32_t)(blocks - 1 - i);
    X->n_free = blocks;
    X->table = cz_xmalloc((size_t)max_seqs * X->max_blocks * sizeof *X->table);
    X->has_blocks = cz_xcalloc(max_seqs, sizeof *X->has_blocks);
    X->ids = cz_xcalloc(max_seqs, sizeof *X->ids);
    uint32_t V = lc->vocab ? lc->vocab : 1;
    for (uint32_t r = 0; r < nreq; r++) {
        cz_xs_req_info q = cz_xstage_req(X->x, r);
        X->ids[r] = cz_xmalloc(((size_t)q.in_tokens + q.out_tokens) * sizeof **X->ids);
        for (uint32_t i = 0; i < q.in_tokens; i++)
            X->ids[r][i] = (int32_t)(((uint64_t)r * 7919u + (uint64_t)i * 104729u + 1) % V);
    }
    /* every job's buffers, sized for the largest step */
    for (int w = 0; w < 2; w++) {
        xs_job *j = &X->w[w].job;
        size_t T = max_tokens > max_seqs ? max_tokens : max_seqs;
        j->tokens = cz_xmalloc(T * sizeof *j->tokens);
        j->positions = cz_xmalloc(T * sizeof *j->positions);
        j->slots = cz_xmalloc(T * sizeof *j->slots);
        j->qsl = cz_xmalloc(((size_t)max_seqs + 1) * sizeof *j->qsl);
        j->seq_lens = cz_xmalloc((size_t)max_seqs * sizeof *j->seq_lens);
        j->table = cz_xmalloc((size_t)max_seqs * X->max_blocks * sizeof *j->table);
        j->rows = cz_xmalloc((size_t)max_seqs * sizeof *j->rows);
        j->out_ids = cz_xmalloc((size_t)max_seqs * sizeof *j->out_ids);
        j->sample_req = cz_xmalloc((size_t)max_seqs * sizeof *j->sample_req);
    }
    return CZ_OK;
}

/* ---- steps ---- */

static void take_blocks(xs_eng *X, uint32_t r)
{
    if (X->has_blocks[r])
        return;
    cz_xs_req_info q = cz_xstage_req(X->x, r);
    uint32_t nb = (q.in_tokens + q.out_tokens + X->bt - 1) / X->bt;
    CZ_ASSERT(nb <= X->n_free && "the runtime reserved KV the pool does not have");
    for (uint32_t j = 0; j < X->max_blocks; j++)
        X->table[(size_t)r * X->max_blocks + j] = j < nb ? X->free_blocks[--X->n_free] : -1;
    X->has_blocks[r] = true;
}

static void give_back(xs_eng *X, uint32_t r)
{
    if (!X->has_blocks[r])
        return;
    for (uint32_t j = 0; j < X->max_blocks; j++) {
        int32_t b = X->table[(size_t)r * X->max_blocks + j];
        if (b >= 0)
            X->free_blocks[X->n_free++] = b;
    }
    X->has_blocks[r] = false;
}

/* Appends `n` tokens of request r from position `from` (n = 1 from the last sampled id:
 * a decode) to the job's batch; `sample`: its last row samples the next id. */
static void add_seq(xs_eng *X, xs_job *j, uint32_t r, uint32_t from, uint32_t n, bool sample)
{
    cz_step_batch *b = &j->b;
    uint32_t s = b->n_seqs, t0 = b->n_tokens;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = from + i;
        j->tokens[t0 + i] = X->ids[r][p];
        j->positions[t0 + i] = (int32_t)p;
        int32_t blk = X->table[(size_t)r * X->max_blocks + p / X->bt];
        CZ_ASSERT(blk >= 0);
        j->slots[t0 + i] = (int64_t)blk * X->bt + p % X->bt;
    }
    memcpy(j->table + (size_t)s * X->max_blocks, X->table + (size_t)r * X->max_blocks,
           X->max_blocks * sizeof *j->table);
    b->n_tokens += n;
    j->qsl[s + 1] = (int32_t)b->n_tokens;
    j->seq_lens[s] = (int32_t)(from + n);
    b->n_seqs++;
    if (sample) {
        j->rows[j->n_samples] = (int32_t)b->n_tokens - 1;
        j->sample_req[j->n_samples++] = r;
    }
}

static void build(xs_eng *X, xs_job *j, const cz_xs_step *s)
{
    memset(&j->b, 0, sizeof j->b);
    memset(&j->rec, 0, sizeof j->rec);
    j->n_samples = 0;
    j->qsl[0] = 0;
    j->work = s->work;
    j->req = s->req;
    j->seed = X->cfg->seed * 1000003u + (++X->step_seed);
    j->rec.predicted_s = s->predicted_s;
    j->rec.stage = s->work == CZ_XS_VISION ? 0 : X->llm;
    if (s->work == CZ_XS_VISION) {
        j->rec.prefill_tokens = s->tokens;
        j->rec.prefill_seqs = 1;
        return;
    }
    if (s->work == CZ_XS_PREFILL) {
        cz_xs_req_info q = cz_xstage_req(X->x, s->req);
        take_blocks(X, s->req);
        add_seq(X, j, s->req, 0, q.in_tokens, true);
        j->rec.prefill_tokens = q.in_tokens;
        j->rec.prefill_seqs = 1;
        j->rec.prefill_attn_ctx = cz_prefill_shape(0, q.in_tokens).prefill_attn_ctx;
    }
    for (uint32_t i = 0; i < s->n_reqs; i++) { /* DECODE, HYBRID's decodes */
        cz_xs_req_info q = cz_xstage_req(X->x, s->reqs[i]);
        CZ_ASSERT(q.generated >= 1 && q.prefilled == q.in_tokens);
        add_seq(X, j, s->reqs[i], q.context_tokens - 1, 1, true);
        j->rec.decode_seqs++;
        j->rec.decode_ctx_tokens += q.context_tokens;
    }
    for (uint32_t i = 0; i < s->n_chunks; i++) { /* HYBRID's prefill chunks */
        uint32_t r = s->chunk_reqs[i];
        cz_xs_req_info q = cz_xstage_req(X->x, r);
        take_blocks(X, r);
        uint32_t n = s->chunk_tokens[i];
        add_seq(X, j, r, q.prefilled, n, q.prefilled + n == q.in_tokens);
        cz_batch_shape c = cz_prefill_shape(q.prefilled, n);
        j->rec.prefill_tokens += c.prefill_tokens;
        j->rec.prefill_attn_ctx += c.prefill_attn_ctx;
        j->rec.prefill_seqs++;
    }
    j->b.max_blocks = X->max_blocks;
    j->b.tokens = j->tokens;
    j->b.positions = j->positions;
    j->b.qsl = j->qsl;
    j->b.seq_lens = j->seq_lens;
    j->b.block_table = j->table;
    j->b.slots = j->slots;
    j->b.sample_rows = j->rows;
    j->b.n_samples = j->n_samples;
    j->rec.sampled = j->n_samples;
}

static void run_job(xs_eng *X, xs_job *j)
{
    xs_ctx *C = &X->ctx[j->ctx];
    if (j->work == CZ_XS_VISION) {
        const cz_model_card *mc = &X->cfg->model;
        for (uint32_t p = 0; p < X->llm; p++) {
            const cz_stage_card *vc = &mc->stages[mc->pipe[p].stage];
            uint32_t frames = mc->pipe[p].input_tokens ? mc->pipe[p].input_tokens
                                                       : (uint32_t)j->rec.prefill_tokens;
            frames *= vc->arch.downsample ? vc->arch.downsample : 1;
            cz_net_encode(C->vis[p], &frames, 1, j->seed + p);
        }
        return;
    }
    cz_net_decode(C->llm, X->pool, &j->b, &X->sampling, j->out_ids, NULL);
}

static void *worker_main(void *arg)
{
    xs_eng *X = ((void **)arg)[0];
    uint32_t w = (uint32_t)(uintptr_t)((void **)arg)[1];
    free(arg);
    xs_worker *W = &X->w[w];
    for (uint32_t c = 0; c < X->n_ctx; c++)
        cz_kctx_bind(X->ctx[c].k);
    pthread_mutex_lock(&X->mu);
    for (;;) {
        while (!X->quit && !W->queued)
            pthread_cond_wait(&W->cv, &X->mu);
        if (X->quit)
            break;
        W->queued = false;
        pthread_mutex_unlock(&X->mu);
        double t0 = cz_wall_s();
        run_job(X, &W->job);
        cz_kctx_sync(X->ctx[W->job.ctx].k);
        W->job.kernel_s = cz_wall_s() - t0;
        pthread_mutex_lock(&X->mu);
        X->done_order[X->n_done++] = w;
        pthread_cond_signal(&X->cv_main);
    }
    pthread_mutex_unlock(&X->mu);
    return NULL;
}

/* ---- the driver's table ---- */

static void drv_start(void *ctx, const cz_xs_step *s, double now)
{
    xs_eng *X = ctx;
    uint32_t w = s->work == CZ_XS_DECODE ? XS_DEC : XS_EXCL;
    xs_worker *W = &X->w[w];
    CZ_ASSERT(!W->busy);
    double t0 = cz_wall_s();
    build(X, &W->job, s);
    W->job.ctx = ctx_for(X, s);
    W->job.rec.build_s = cz_wall_s() - t0;
    W->job.rec.start_s = now;
    W->job.rec.device = 0;
    W->job.rec.replica = w;
    pthread_mutex_lock(&X->mu);
    W->busy = W->queued = true;
    pthread_cond_signal(&W->cv);
    pthread_mutex_unlock(&X->mu);
}

static void drv_timer(void *ctx, double t)
{
    xs_eng *X = ctx;
    X->arrival_t = t;
}

static void drv_released(void *ctx, uint32_t req)
{
    give_back(ctx, req);
}

/* Worker w's job is done: its ids, its row of /steps, and the runtime's report. */
static void job_finished(xs_eng *X, uint32_t w, double now)
{
    xs_job *j = &X->w[w].job;
    X->w[w].busy = false;
    for (uint32_t i = 0; i < j->n_samples; i++) {
        uint32_t r = j->sample_req[i];
        cz_xs_req_info q = cz_xstage_req(X->x, r);
        if (j->out_ids[i] < 0 && X->bad.status == CZ_OK)
            cz_err_set(&X->bad, CZ_EFORMAT,
                       "engine: the LLM's logits of request %u hold NaN or +inf: the model's "
                       "weights are not finite or its activations overflow",
                       r);
        if (q.in_tokens + q.generated < q.in_tokens + q.out_tokens)
            X->ids[r][q.in_tokens + q.generated] = j->out_ids[i] < 0 ? 0 : j->out_ids[i];
    }
    j->rec.end_s = now;
    j->rec.kernel_s = j->kernel_s;
    cz_metrics_add_step(X->m, &j->rec);
    /* a request that ends gives its blocks back from inside the report (drv_released),
     * before the runtime starts a step on its reservation */
    if (w == XS_DEC)
        cz_xstage_decode_done(X->x, now);
    else
        cz_xstage_excl_done(X->x, now);
}

static bool device_failed(xs_eng *X, cz_err *err)
{
    for (uint32_t c = 0; c < X->n_ctx; c++)
        if (X->ctx[c].k && cz_kctx_status(X->ctx[c].k, err) != CZ_OK)
            return true;
    return false;
}

static void stop_workers(xs_eng *X)
{
    pthread_mutex_lock(&X->mu);
    X->quit = true;
    for (int w = 0; w < 2; w++)
        pthread_cond_broadcast(&X->w[w].cv);
    pthread_mutex_unlock(&X->mu);
    for (int w = 0; w < 2; w++)
        if (X->w[w].started) {
            pthread_join(X->w[w].th, NULL);
            X->w[w].started = false;
        }
}

static void xs_free(xs_eng *X)
{
    stop_workers(X);
    uint32_t nreq = X->x ? cz_xstage_requests(X->x) : 0;
    for (uint32_t r = 0; X->ids && r < nreq; r++)
        free(X->ids[r]);
    free(X->ids);
    free(X->table);
    free(X->has_blocks);
    free(X->free_blocks);
    for (int w = 0; w < 2; w++) {
        xs_job *j = &X->w[w].job;
        free(j->tokens), free(j->positions), free(j->slots), free(j->qsl), free(j->seq_lens);
        free(j->table), free(j->rows), free(j->out_ids), free(j->sample_req);
        pthread_cond_destroy(&X->w[w].cv);
    }
    cz_kv_pool_free(X->pool);
    /* shares before their owners (context 0 holds the owners) */
    for (uint32_t c = X->n_ctx; c-- > 0;) {
        xs_ctx *C = &X->ctx[c];
        for (uint32_t p = 0; C->vis && p < X->llm; p++)
            cz_net_free(C->vis[p]);
        free(C->vis);
        cz_net_free(C->llm);
    }
    for (uint32_t c = 0; c < X->n_ctx; c++)
        cz_kctx_free(X->ctx[c].k);
    free(X->ctx);
    free(X->pair_units);
    cz_xstage_free(X->x);
    pthread_cond_destroy(&X->cv_main);
    pthread_mutex_destroy(&X->mu);
}

cz_status cz__engine_xs_run(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                            const cz_engine_opts *opts, bool cuda, uint32_t threads,
                            cz_run_stats *stats, bool *partial, cz_run_progress_fn progress,
                            void *progress_ctx, cz_err *err)
{
    if (cfg->xs.vision_resident_layers > 0)
        return cz_err_set(err, CZ_EINVAL,
                          "engine: scheduler '%s': vision_resident_layers %u: the engine keeps "
                          "every vision encoder weight resident (expected 0); the simulator "
                          "models the offload",
                          cfg->scheduler, cfg->xs.vision_resident_layers);
    xs_eng X;
    memset(&X, 0, sizeof X);
    X.cfg = cfg;
    X.wl = wl;
    X.m = m;
    X.cuda = cuda;
    X.llm = cfg->model.n_pipe - 1;
    X.arrival_t = NAN;
    X.sampling = (cz_sampling){.temperature = 0, .top_k = 0, .top_p = 1, .seed = cfg->seed};
    pthread_mutex_init(&X.mu, NULL);
    cz_wall_cond_init(&X.cv_main);
    for (int w = 0; w < 2; w++)
        pthread_cond_init(&X.w[w].cv, NULL);
    cz_xs_driver drv = {.ctx = &X, .start = drv_start, .timer = drv_timer, .released = drv_released};
    cz_status st = cz_xstage_create(cfg, wl, m, stats, &drv, &X.x, err);
    if (st == CZ_OK && cuda) {
        char why[CZ_ERR_MSG_MAX];
        if (cz_kcuda_device_count(why) == 0)
            st = cz_err_set(err, CZ_EDEVICE, "engine: backend 'cuda': %s", why);
        else
            st = cz_kcuda_sm_info(0, &X.total, &X.min_units, &X.step_units, err);
    } else if (st == CZ_OK) {
        X.total = threads;
    }
    if (st == CZ_OK)
        st = make_contexts(&X, threads, err);
    if (st == CZ_OK)
        st = load_nets(&X, err);
    if (st == CZ_OK) {
        /* warm before the clock starts (cz_net_warmup): the whole device's context runs
         * every net once */
        xs_ctx *C = &X.ctx[XS_EXCL];
        cz_kctx_bind(C->k);
        cz_net_warmup(C->llm, X.pool, CZ_NET_WARMUP_S);
        for (uint32_t p = 0; C->vis && p < X.llm; p++)
            cz_net_warmup(C->vis[p], NULL, CZ_NET_WARMUP_S);
    }
    for (int w = 0; st == CZ_OK && w < 2; w++) {
        void **a = cz_xmalloc(2 * sizeof *a);
        a[0] = &X;
        a[1] = (void *)(uintptr_t)w;
        if (pthread_create(&X.w[w].th, NULL, worker_main, a) != 0) {
            free(a);
            st = cz_err_set(err, CZ_ENOMEM, "engine: cannot start a worker thread");
        } else {
            X.w[w].started = true;
        }
    }
    if (st != CZ_OK) {
        xs_free(&X);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &X.t0);
    cz_xstage_start(X.x);
    double now = 0.0, last_progress = 0.0;
    bool cut = false, failed = false;
    uint64_t arrived, finished;
    for (;;) {
        if (opts && opts->stop && *opts->stop) {
            cut = true;
            *partial = true;
            now = clock_s(&X);
            break;
        }
        pthread_mutex_lock(&X.mu);
        uint32_t w = NONE;
        if (X.n_done) {
            w = X.done_order[0];
            X.done_order[0] = X.done_order[1];
            X.n_done--;
        }
        pthread_mutex_unlock(&X.mu);
        if (w != NONE) {
            now = clock_s(&X);
            if (device_failed(&X, err)) {
                failed = true;
                break;
            }
            if (now > cfg->max_time_s) {
                cut = true;
                break;
            }
            stats->events++;
            job_finished(&X, w, now);
            if (X.bad.status != CZ_OK) {
                *err = X.bad;
                failed = true;
                break;
            }
            continue;
        }
        now = clock_s(&X);
        if (!isnan(X.arrival_t) && X.arrival_t <= now) {
            if (X.arrival_t > cfg->max_time_s) {
                cut = true;
                break;
            }
            X.arrival_t = NAN;
            stats->events++;
            cz_xstage_arrival(X.x, now);
            continue;
        }
        if (now > cfg->max_time_s) {
            cut = true;
            break;
        }
        if (progress && now - last_progress >= 0.5) {
            last_progress = now;
            cz_xstage_counts(X.x, &arrived, &finished);
            cz_run_progress pr = {now, stats->events, arrived, finished, wl->n_turns, false};
            progress(progress_ctx, &pr);
        }
        pthread_mutex_lock(&X.mu);
        bool idle = isnan(X.arrival_t) && !X.w[0].busy && !X.w[1].busy && X.n_done == 0;
        if (idle) {
            pthread_mutex_unlock(&X.mu);
            break;
        }
        if (X.n_done == 0) {
            double until = fmin(isnan(X.arrival_t) ? INFINITY : X.arrival_t, now + 0.05);
            until = fmin(until, cfg->max_time_s + 1e-3);
            cz_wall_wait_until(&X.cv_main, &X.mu, &X.t0, until);
        }
        pthread_mutex_unlock(&X.mu);
    }
    stop_workers(&X);
    if (failed) {
        xs_free(&X);
        return err->status; /* the device's failure, or non-finite logits */
    }
    st = cz_xstage_finish(X.x, cut, now, err);
    stats->sim_time_s = now;
    if (progress) {
        cz_xstage_counts(X.x, &arrived, &finished);
        cz_run_progress pr = {now, stats->events, arrived, finished, wl->n_turns, true};
        progress(progress_ctx, &pr);
    }
    xs_free(&X);
    cz_metrics_finish(m);
    if (st == CZ_OK)
        st = cz_metrics_check(m, err);
    return st;
}
