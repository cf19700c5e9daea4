/* cz_profile.c - see cz_profile.h. The grid of each stage is planned first (so progress
 * knows the total and the KV pool and the net's reserve are sized once, to its largest
 * shape), then every shape is built and timed on the stage's net. */
#define _GNU_SOURCE
#include "cz_profile.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cz_engine.h"
#include "cz_h5.h"
#include "cz_kernels.h"
#include "cz_wall.h"
#include "cz_kvpool.h"
#include "cz_net.h"
#include "cz_proc.h"
#include "cz_stats.h"

/* ---- the grid ----------------------------------------------------------------------------- */

/* How many points each axis of a class gets, in the full grid and the quick one. */
typedef struct grid_sizes {
    uint32_t chunks, prefixes;            /* prefill: chunk tokens x cached prefix */
    uint32_t dec_seqs, dec_ctx;           /* decode: sequences x context */
    uint32_t mix_seqs, mix_ctx, mix_chunks; /* mixed: decodes x their context x chunk */
    uint32_t mix_prefixes;                /* ... x the chunk's prefix (none, or a quarter
                                             of the longest context) */
    uint32_t jobs, job_tokens;            /* encoder, vocoder */
    uint32_t inner_rows;                  /* code predictor */
    uint32_t xfer_sizes, xfer_blocks;     /* host link */
    uint32_t ctx_hi;                      /* longest context a shape reaches */
    uint32_t xfer_hi;                     /* largest contiguous copy, bytes */
    bool probe;                           /* ctx_hi as given (not twice the step budget) */
} grid_sizes;

static const grid_sizes grid_full = {
    .chunks = 12, .prefixes = 5, .dec_seqs = 10, .dec_ctx = 7,
    .mix_seqs = 5, .mix_ctx = 2, .mix_chunks = 4, .mix_prefixes = 2,
    .jobs = 6, .job_tokens = 6, .inner_rows = 8,
    .xfer_sizes = 12, .xfer_blocks = 8, .ctx_hi = 8192, .xfer_hi = 64u << 20,
};

static const grid_sizes grid_quick = {
    .chunks = 6, .prefixes = 2, .dec_seqs = 5, .dec_ctx = 3,
    .mix_seqs = 3, .mix_ctx = 1, .mix_chunks = 4, .mix_prefixes = 1,
    .jobs = 3, .job_tokens = 3, .inner_rows = 3,
    .xfer_sizes = 5, .xfer_blocks = 3, .ctx_hi = 2048, .xfer_hi = 16u << 20,
};

/* A machine's speed against a fit (cz_profile_opts.probe): a few shapes per stage, short
 * contexts, no copies. */
static const grid_sizes grid_probe = {
    .chunks = 2, .prefixes = 1, .dec_seqs = 2, .dec_ctx = 2,
    .mix_seqs = 1, .mix_ctx = 1, .mix_chunks = 1, .mix_prefixes = 1,
    .jobs = 2, .job_tokens = 2, .inner_rows = 2,
    .xfer_sizes = 0, .xfer_blocks = 0, .ctx_hi = 512, .xfer_hi = 0, .probe = true,
};

/* Up to n integers geometrically spaced from lo to hi (both included; n == 1 gives hi),
 * rounded and without repeats, ascending, into out; returns how many. lo >= 1. */
static uint32_t logspace(uint64_t lo, uint64_t hi, uint32_t n, uint64_t *out)
{
    CZ_ASSERT(lo >= 1 && n >= 1);
    if (hi < lo)
        hi = lo;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        double f = n == 1 ? 1.0 : (double)i / (double)(n - 1);
        uint64_t v = (uint64_t)llround(exp(log((double)lo) + f * (log((double)hi) - log((double)lo))));
        if (v < lo)
            v = lo;
        if (v > hi)
            v = hi;
        if (k == 0 || v > out[k - 1])
            out[k++] = v;
    }
    return k;
}

#define AXIS_MAX 32

/* The shapes of one stage, and what its run must allocate for them. */
typedef struct stage_plan {
    uint32_t p;                       /* pipeline stage */
    cz_profile_row *rows;
    size_t n_rows, cap_rows;
    /* autoregressive stages: the step's largest sizes */
    uint32_t max_tokens, max_seqs, max_ctx, max_blocks_seq, pool_blocks;
    /* encoders and vocoders */
    uint32_t max_frames_job, max_frames_step, max_jobs;
    /* the code predictor */
    uint32_t max_inner_rows;
    /* block copies of the pool */
    uint64_t xfer_blocks[AXIS_MAX];
    uint32_t n_xfer_blocks;
} stage_plan;

static cz_profile_row *add_row(stage_plan *sp, const cz_config *cfg, cz_profile_class cls)
{
    cz_grow((void **)&sp->rows, &sp->cap_rows, sp->n_rows + 1, sizeof *sp->rows);
    cz_profile_row *r = &sp->rows[sp->n_rows++];
    memset(r, 0, sizeof *r);
    const cz_pipe_stage *ps = &cfg->model.pipe[sp->p];
    const cz_stage_card *c = &cfg->model.stages[ps->stage];
    r->stage = sp->p;
    r->card = ps->stage;
    r->kind = (uint32_t)c->kind;
    r->cls = (uint32_t)cls;
    snprintf(r->stage_name, sizeof r->stage_name, "%s", c->name);
    return r;
}

static uint32_t div_up(uint64_t a, uint64_t b)
{
    return (uint32_t)((a + b - 1) / b);
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

/* An autoregressive step: `dec` decode sequences of `ctx` positions each (after the step)
 * and, when chunk > 0, one prefill chunk of `chunk` tokens after `prefix` cached ones.
 * Fills the row's shape as the serving core counts it (cz_server.c's add_item, no window)
 * and the plan's sizes. */
static void plan_ar(stage_plan *sp, const cz_config *cfg, cz_profile_class cls, uint32_t dec,
                    uint32_t ctx, uint32_t chunk, uint32_t prefix, uint32_t bt)
{
    cz_profile_row *r = add_row(sp, cfg, cls);
    r->decode_seqs = dec;
    r->ctx_tokens = dec ? ctx : 0;
    r->decode_ctx_tokens = (uint64_t)dec * ctx;
    r->chunk_tokens = chunk;
    r->prefix_tokens = chunk ? prefix : 0;
    if (chunk) {
        cz_batch_shape sh = cz_prefill_shape(prefix, chunk);
        r->prefill_tokens = sh.prefill_tokens;
        r->prefill_seqs = sh.prefill_seqs;
        r->prefill_attn_ctx = sh.prefill_attn_ctx;
    }
    r->net_rows = dec + chunk;
    cz_batch_shape shape = {.prefill_tokens = r->prefill_tokens,
                            .prefill_attn_ctx = r->prefill_attn_ctx,
                            .decode_seqs = r->decode_seqs,
                            .decode_ctx_tokens = r->decode_ctx_tokens,
                            .prefill_seqs = r->prefill_seqs};
    r->predicted_s = cz_config_stage_share_s(cfg, sp->p, &shape, 1.0);
    uint32_t seqs = dec + (chunk ? 1 : 0);
    uint32_t longest = max_u32(dec ? ctx : 0, chunk ? prefix + chunk : 0);
    uint32_t blocks = dec * div_up(ctx, bt) + (chunk ? div_up((uint64_t)prefix + chunk, bt) : 0);
    sp->max_tokens = max_u32(sp->max_tokens, dec + chunk);
    sp->max_seqs = max_u32(sp->max_seqs, seqs);
    sp->max_ctx = max_u32(sp->max_ctx, longest);
    sp->max_blocks_seq = max_u32(sp->max_blocks_seq, div_up(longest, bt));
    sp->pool_blocks = max_u32(sp->pool_blocks, blocks);
}

/* The grid of an autoregressive stage. Contexts reach ctx_hi: the grid's own reach (at
 * least twice the step budget) within the config's context cap (max_model_len, else the
 * pool) and what engine.max_kv_bytes holds; the KV one step reads stays within four times
 * the config's pool. */
static void plan_ar_stage(stage_plan *sp, const cz_config *cfg, const grid_sizes *g,
                          uint64_t tok_cap)
{
    const cz_server_config *sc = &cfg->place[sp->p].server;
    const cz_pipe_stage *ps = &cfg->model.pipe[sp->p];
    uint32_t T = sc->max_num_batched_tokens, S = sc->max_num_seqs, bt = sc->block_tokens;
    uint64_t pool = (uint64_t)sc->kv_blocks * sc->block_tokens;
    uint64_t ctx_cap = sc->max_model_len && (!pool || sc->max_model_len < pool)
                           ? sc->max_model_len
                           : pool;
    uint64_t hi = g->probe || g->ctx_hi > 2 * (uint64_t)T ? g->ctx_hi : 2 * (uint64_t)T;
    if (ctx_cap && hi > ctx_cap)
        hi = ctx_cap;
    if (hi > tok_cap)
        hi = tok_cap;
    uint32_t ctx_hi = (uint32_t)(hi > 16 ? hi : 16);
    uint64_t kv_cap = pool && 4 * pool < tok_cap ? 4 * pool : tok_cap;
    if (kv_cap < ctx_hi)
        kv_cap = ctx_hi;
    uint32_t chunk_hi = T < ctx_hi ? T : ctx_hi;
    uint64_t a[AXIS_MAX], b[AXIS_MAX], c[AXIS_MAX], d[AXIS_MAX];

    /* prefill: chunks up to the step's budget, after no prefix or up to half the longest
     * context */
    uint32_t na = logspace(chunk_hi < 16 ? chunk_hi : 16, chunk_hi, g->chunks, a);
    b[0] = 0;
    uint32_t nb = 1;
    if (g->prefixes > 1)
        nb += logspace(bt > 64 ? bt : 64, ctx_hi / 2 > 64 ? ctx_hi / 2 : 64, g->prefixes - 1,
                       b + 1);
    for (uint32_t j = 0; j < nb; j++)
        for (uint32_t i = 0; i < na; i++)
            if (a[i] + b[j] <= ctx_hi)
                plan_ar(sp, cfg, CZ_PROFILE_PREFILL, 0, 0, (uint32_t)a[i], (uint32_t)b[j], bt);

    /* decode: 1 to max_num_seqs sequences, 16 positions to the longest context each */
    na = logspace(1, S, g->dec_seqs, a);
    nb = logspace(16 < ctx_hi ? 16 : ctx_hi, ctx_hi, g->dec_ctx, b);
    for (uint32_t i = 0; i < na; i++)
        for (uint32_t j = 0; j < nb; j++)
            if (a[i] * b[j] <= kv_cap)
                plan_ar(sp, cfg, CZ_PROFILE_DECODE, (uint32_t)a[i], (uint32_t)b[j], 0, 0, bt);

    /* mixed: decodes beside one prompt's chunk that fills part or all of the rest of the
     * budget (vLLM's chunked prefill), a fresh prompt's or a later chunk's */
    if (S >= 2 && chunk_hi >= 2) {
        na = logspace(1, S - 1 < chunk_hi - 1 ? S - 1 : chunk_hi - 1, g->mix_seqs, a);
        nb = logspace(64 < ctx_hi ? 64 : ctx_hi, ctx_hi / 4 > 64 ? ctx_hi / 4 : 64, g->mix_ctx,
                      b);
        d[0] = 0;
        d[1] = ctx_hi / 4 > bt ? ctx_hi / 4 : bt;
        uint32_t nd = g->mix_prefixes > 1 ? 2 : 1;
        for (uint32_t m = 0; m < nd; m++)
            for (uint32_t i = 0; i < na; i++)
                for (uint32_t j = 0; j < nb; j++) {
                    uint32_t rest = chunk_hi - (uint32_t)a[i];
                    uint32_t nc = logspace(rest < 16 ? rest : 16, rest, g->mix_chunks, c);
                    for (uint32_t k = 0; k < nc; k++)
                        if (a[i] * b[j] + d[m] + c[k] <= kv_cap && d[m] + c[k] <= ctx_hi)
                            plan_ar(sp, cfg, CZ_PROFILE_MIXED, (uint32_t)a[i], (uint32_t)b[j],
                                    (uint32_t)c[k], (uint32_t)d[m], bt);
                }
    }

    /* the code predictor run after the step, for every sampled row */
    if (ps->inner >= 0 && ps->inner_steps > 0) {
        na = logspace(1, S, g->inner_rows, a);
        for (uint32_t i = 0; i < na; i++) {
            cz_profile_row *r = add_row(sp, cfg, CZ_PROFILE_INNER);
            uint32_t rows = (uint32_t)a[i];
            r->jobs = rows;
            r->ctx_tokens = ps->inner_steps;
            r->net_rows = rows;
            r->decode_seqs = rows;
            r->decode_ctx_tokens = (uint64_t)rows * ps->inner_steps;
            /* what cz_config_roofline_step_s adds for the inner stage of a step emitting
             * `rows` tokens: the step's time less its outer stage's */
            cz_batch b1 = {.decode_seqs = rows, .decode_ctx_tokens = rows};
            cz_batch_shape s1 = {.decode_seqs = rows, .decode_ctx_tokens = rows};
            r->predicted_s = cz_config_roofline_step_s(cfg, sp->p, &b1) -
                             cz_config_stage_share_s(cfg, sp->p, &s1, 1.0);
            sp->max_inner_rows = max_u32(sp->max_inner_rows, rows);
        }
    }

    /* whole blocks to and from host memory, one to all the pool holds (at most 4096) */
    uint32_t most = sp->pool_blocks < 4096 ? sp->pool_blocks : 4096;
    sp->n_xfer_blocks =
        g->xfer_blocks ? logspace(1, most ? most : 1, g->xfer_blocks, sp->xfer_blocks) : 0;
}

/* Encoders and vocoders: jobs x tokens per job; a vocoder's jobs also re-read the prompt.
 * Tokens per job span an eighth to four times the stage's usual job (a vocoder's chunk
 * and overlap, an encoder's fixed input or 64 tokens), jobs one to max_batch (at most 32). */
static void plan_jobs_stage(stage_plan *sp, const cz_config *cfg, const grid_sizes *g)
{
    const cz_pipe_stage *ps = &cfg->model.pipe[sp->p];
    const cz_stage_card *c = &cfg->model.stages[ps->stage];
    const cz_stage_place *pl = &cfg->place[sp->p];
    bool enc = c->kind == CZ_STAGE_ENCODER;
    uint64_t usual = enc ? (ps->input_tokens ? ps->input_tokens : 64)
                         : (uint64_t)ps->chunk_tokens + ps->overlap_tokens;
    if (usual < 1)
        usual = 1;
    uint64_t lo = usual / 8 ? usual / 8 : 1, hi = usual * 4;
    uint32_t mb = pl->max_batch ? pl->max_batch : 64;
    if (mb > 32)
        mb = 32;
    uint64_t a[AXIS_MAX], b[AXIS_MAX];
    uint32_t na = logspace(1, mb, g->jobs, a), nb = logspace(lo, hi, g->job_tokens, b);
    uint32_t ds = enc && c->arch.downsample ? c->arch.downsample : 1;
    for (uint32_t i = 0; i < na; i++)
        for (uint32_t j = 0; j < nb; j++) {
            if (pl->max_tokens && a[i] * b[j] > pl->max_tokens)
                continue;
            cz_profile_row *r = add_row(sp, cfg, enc ? CZ_PROFILE_ENCODER : CZ_PROFILE_VOCODER);
            uint32_t jobs = (uint32_t)a[i], t = (uint32_t)b[j];
            uint32_t per = enc ? t : t + ps->prompt_tokens; /* tokens the cost model sees */
            uint32_t frames = enc ? t * ds : per;           /* rows the net runs per job */
            r->jobs = jobs;
            r->job_tokens = t;
            r->net_rows = frames * jobs;
            r->prefill_seqs = jobs;
            r->prefill_tokens = (uint64_t)per * jobs;
            r->prefill_attn_ctx = (uint64_t)jobs * per * (per + 1) / 2;
            cz_batch_shape shape = {.prefill_tokens = r->prefill_tokens,
                                    .prefill_attn_ctx = r->prefill_attn_ctx,
                                    .prefill_seqs = r->prefill_seqs};
            r->predicted_s = cz_config_stage_share_s(cfg, sp->p, &shape, 1.0);
            sp->max_frames_job = max_u32(sp->max_frames_job, frames);
            sp->max_frames_step = max_u32(sp->max_frames_step, frames * jobs);
            sp->max_jobs = max_u32(sp->max_jobs, jobs);
        }
}

/* ---- timing ------------------------------------------------------------------------------- */


static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Passes run the engine's way: on a device thread of their own, handed over and reported
 * back through a mutex and condition variables as the engine's device worker takes a step
 * and posts its completion (cz_engine.c), the profiling thread asleep meanwhile. A pass is
 * timed from its hand-over until the profiling thread runs again (what a replay's /steps
 * count and a simulated step lasts), and on the device thread around the pass and
 * cz_kctx_sync (the device time). */
typedef void (*pass_fn)(void *ctx);

typedef struct prof_dev {
    cz_kctx *k;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    pass_fn run;
    void *ctx;
    bool has_job, done, quit;
    double device_s;
} prof_dev;

static void *dev_main(void *arg)
{
    prof_dev *D = arg;
    cz_kctx_bind(D->k);
    pthread_mutex_lock(&D->mu);
    for (;;) {
        while (!D->quit && !D->has_job)
            pthread_cond_wait(&D->cv_work, &D->mu);
        if (D->quit)
            break;
        D->has_job = false;
        pthread_mutex_unlock(&D->mu);
        double t0 = cz_wall_s();
        D->run(D->ctx);
        cz_kctx_sync(D->k);
        double t = cz_wall_s() - t0;
        pthread_mutex_lock(&D->mu);
        D->device_s = t;
        D->done = true;
        pthread_cond_signal(&D->cv_done);
    }
    pthread_mutex_unlock(&D->mu);
    return NULL;
}

static bool dev_start(prof_dev *D, cz_kctx *k)
{
    memset(D, 0, sizeof *D);
    D->k = k;
    pthread_mutex_init(&D->mu, NULL);
    pthread_cond_init(&D->cv_work, NULL);
    pthread_cond_init(&D->cv_done, NULL);
    D->started = pthread_create(&D->th, NULL, dev_main, D) == 0;
    return D->started;
}

static void dev_stop(prof_dev *D)
{
    if (D->started) {
        pthread_mutex_lock(&D->mu);
        D->quit = true;
        pthread_cond_signal(&D->cv_work);
        pthread_mutex_unlock(&D->mu);
        pthread_join(D->th, NULL);
    }
    pthread_cond_destroy(&D->cv_done);
    pthread_cond_destroy(&D->cv_work);
    pthread_mutex_destroy(&D->mu);
}

/* One pass through the device thread: returns its hand-over-to-report time and sets
 * *device_s. */
static double dev_pass(prof_dev *D, pass_fn run, void *ctx, double *device_s)
{
    double t0 = cz_wall_s();
    pthread_mutex_lock(&D->mu);
    D->run = run;
    D->ctx = ctx;
    D->done = false;
    D->has_job = true;
    pthread_cond_signal(&D->cv_work);
    while (!D->done)
        pthread_cond_wait(&D->cv_done, &D->mu);
    *device_s = D->device_s;
    pthread_mutex_unlock(&D->mu);
    return cz_wall_s() - t0;
}

typedef struct warm_ctx {
    cz_net *net;
    const cz_kv_pool *pool;
    double min_s;
} warm_ctx;

static void warm_pass(void *ctx)
{
    warm_ctx *w = ctx;
    cz_net_warmup(w->net, w->pool, w->min_s);
}

static void warm_net(prof_dev *D, cz_net *net, const cz_kv_pool *pool, double min_s)
{
    warm_ctx w = {net, pool, min_s};
    double unused;
    dev_pass(D, warm_pass, &w, &unused);
}

/* Warm-up goes on while its passes have taken less than this in all (three at most). */
#define WARM_S 0.02

/* Untimed passes before a timed one: at least `least`, and more, up to three, while they
 * have taken under WARM_S in all. Returns how many ran. */
static uint32_t warm_up(prof_dev *D, pass_fn run, void *ctx, uint32_t least)
{
    double warm = 0, unused;
    uint32_t n = 0;
    while (n < least || (n < 3 && warm < WARM_S))
        warm += dev_pass(D, run, ctx, &unused), n++;
    return n;
}

/* The statistics of one item's `repeats` samples (host and dev, sorted here). */
static void time_stats(double *host, double *dev, uint32_t repeats, cz_profile_times *t)
{
    qsort(host, repeats, sizeof *host, cmp_double);
    qsort(dev, repeats, sizeof *dev, cmp_double);
    t->repeats = repeats;
    t->median_s = cz_percentile_sorted(host, repeats, 50);
    t->p10_s = cz_percentile_sorted(host, repeats, 10);
    t->p90_s = cz_percentile_sorted(host, repeats, 90);
    t->min_s = host[0];
    t->max_s = host[repeats - 1];
    t->device_median_s = cz_percentile_sorted(dev, repeats, 50);
}

/* Readies item i of a timed set (a shape's batch, a copy's region) and returns the pass
 * that runs it with *pass_ctx. */
typedef pass_fn (*prep_fn)(void *ctx, uint32_t i, void **pass_ctx);

/* How far a set's median stands above its fastest pass: something else having the
 * machine only ever slows a pass, so a median well above the fastest pass means half the
 * passes or more were slowed. */
static double lift(const cz_profile_times *t)
{
    return t->median_s - t->min_s;
}

/* ---- one autoregressive stage ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A decoder step under construction: host arrays sized to the stage's largest shape. */
typedef struct ar_step {
    cz_net *net;
    const cz_kv_pool *pool;
    cz_step_batch b;
    int32_t *tokens, *positions, *qsl, *seq_lens, *block_table, *sample_rows, *out_ids;
    int64_t *slots;
    const int32_t *perm;      /* physical blocks in the order sequences take them */
    uint32_t next_block, vocab;
} ar_step;

/* Appends a sequence of `len` positions whose last `n` are this step's rows. */
static void add_seq(ar_step *s, uint32_t len, uint32_t n, uint32_t max_blocks, uint32_t bt)
{
    cz_step_batch *b = &s->b;
    uint32_t si = b->n_seqs++, nb = div_up(len, bt);
    int32_t *row = s->block_table + (size_t)si * max_blocks;
    for (uint32_t j = 0; j < max_blocks; j++)
        row[j] = j < nb ? s->perm[s->next_block + j] : -1;
    s->next_block += nb;
    s->qsl[si] = (int32_t)b->n_tokens;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pos = len - n + i, r = b->n_tokens++;
        s->tokens[r] = (int32_t)(mix64(((uint64_t)si << 32) ^ pos) % s->vocab);
        s->positions[r] = (int32_t)pos;
        s->slots[r] = (int64_t)row[pos / bt] * bt + pos % bt;
    }
    s->qsl[si + 1] = (int32_t)b->n_tokens;
    s->seq_lens[si] = (int32_t)len;
    s->sample_rows[b->n_samples++] = (int32_t)(b->n_tokens - 1);
}

/* Builds the batch of row r: its decodes first, then its chunk (the engine's order). */
static void build_ar(ar_step *s, const cz_profile_row *r, uint32_t bt)
{
    memset(&s->b, 0, sizeof s->b);
    s->next_block = 0;
    uint32_t longest = max_u32(r->ctx_tokens, r->prefix_tokens + r->chunk_tokens);
    uint32_t mb = div_up(longest ? longest : 1, bt);
    for (uint32_t i = 0; i < r->decode_seqs; i++)
        add_seq(s, r->ctx_tokens, 1, mb, bt);
    if (r->chunk_tokens)
        add_seq(s, r->prefix_tokens + r->chunk_tokens, r->chunk_tokens, mb, bt);
    cz_step_batch *b = &s->b;
    b->max_blocks = mb;
    b->tokens = s->tokens;
    b->positions = s->positions;
    b->qsl = s->qsl;
    b->seq_lens = s->seq_lens;
    b->block_table = s->block_table;
    b->slots = s->slots;
    b->sample_rows = s->sample_rows;
}

static void ar_pass(void *ctx)
{
    ar_step *s = ctx;
    cz_net_decode(s->net, s->pool, &s->b, NULL, s->out_ids, NULL);
}

typedef struct inner_pass_ctx {
    cz_net *net;
    uint32_t rows, steps;
} inner_pass_ctx;

static void inner_pass(void *ctx)
{
    inner_pass_ctx *c = ctx;
    cz_net_inner(c->net, c->rows, c->steps);
}

typedef struct jobs_pass_ctx {
    cz_net *net;
    const uint32_t *lens;
    uint32_t n;
    bool enc;
} jobs_pass_ctx;

static void jobs_pass(void *ctx)
{
    jobs_pass_ctx *c = ctx;
    if (c->enc)
        cz_net_encode(c->net, c->lens, c->n, 1);
    else
        cz_net_vocode(c->net, c->lens, c->n, 1);
}

/* Host-link copies. Each pass moves a different region of arenas larger than the CPU's
 * caches (on the CPU backend a copy is a memcpy, and copying one region again and again
 * would time the caches): a contiguous range at the next offset of the arenas, or the
 * next `blocks` blocks of the pool's permutation into the next host chunks. */
typedef struct copy_pass_ctx {
    cz_kctx *k;
    bool to_host;
    uint8_t *dev, *host;      /* contiguous: arenas of `arena` bytes */
    size_t bytes, arena;      /* contiguous copy; bytes 0: whole blocks */
    const cz_kv_pool *pool;
    const int32_t *perm;      /* the pool's blocks in a scattered order */
    uint32_t blocks;          /* blocks per copy */
    uint32_t host_blocks;     /* block-sized chunks of `host` */
    uint64_t pass;
} copy_pass_ctx;

/* Whole blocks as the engine's copy thread moves them: per block and layer, the K rows and
 * the V rows, each one copy, into a host chunk laid out the same way. */
static void copy_pass(void *ctx)
{
    copy_pass_ctx *c = ctx;
    uint64_t pass = c->pass++;
    if (c->bytes) {
        size_t step = (c->bytes + 4095) / 4096 * 4096;
        size_t slots = (c->arena - c->bytes) / step + 1;
        size_t off = (size_t)(pass % slots) * step;
        if (c->to_host)
            cz_kmem_copy_async(c->k, c->host + off, c->dev + off, c->bytes, true);
        else
            cz_kmem_copy_async(c->k, c->dev + off, c->host + off, c->bytes, false);
        cz_kmem_copy_wait(c->k);
        return;
    }
    const cz_kv_pool *pool = c->pool;
    size_t el = cz_dtype_size(pool->dt);
    size_t half = (size_t)pool->block_tokens * pool->kv_heads * pool->head_dim * el;
    uint64_t first = pass * c->blocks % ((uint64_t)pool->blocks - c->blocks + 1);
    uint64_t hfirst = pass * c->blocks % ((uint64_t)c->host_blocks - c->blocks + 1);
    for (uint32_t i = 0; i < c->blocks; i++) {
        int32_t phys = c->perm[first + i];
        uint8_t *hb = c->host + (size_t)(hfirst + i) * pool->block_bytes;
        for (uint32_t l = 0; l < pool->layers; l++) {
            cz_kv_layer v = cz_kv_pool_layer(pool, l);
            uint8_t *kb = (uint8_t *)v.k + (size_t)phys * v.block_stride * el;
            uint8_t *vb = (uint8_t *)v.v + (size_t)phys * v.block_stride * el;
            uint8_t *hk = hb + (size_t)l * 2 * half, *hv = hk + half;
            if (c->to_host) {
                cz_kmem_copy_async(c->k, hk, kb, half, true);
                cz_kmem_copy_async(c->k, hv, vb, half, true);
            } else {
                cz_kmem_copy_async(c->k, kb, hk, half, false);
                cz_kmem_copy_async(c->k, vb, hv, half, false);
            }
        }
    }
    cz_kmem_copy_wait(c->k);
}

/* Timed sets' items (time_items): a decoder stage's rows, an encoder's or vocoder's rows,
 * copies. */
typedef struct ar_items {
    const cz_profile_row *rows;
    ar_step *s;
    inner_pass_ctx inner;
    uint32_t bt;
} ar_items;

static pass_fn ar_prep(void *ctx, uint32_t i, void **pass_ctx)
{
    ar_items *a = ctx;
    const cz_profile_row *r = &a->rows[i];
    if (r->cls == CZ_PROFILE_INNER) {
        a->inner.rows = r->jobs;
        a->inner.steps = r->ctx_tokens;
        *pass_ctx = &a->inner;
        return inner_pass;
    }
    build_ar(a->s, r, a->bt);
    *pass_ctx = a->s;
    return ar_pass;
}

typedef struct jobs_items {
    const cz_profile_row *rows;
    uint32_t *lens;           /* room for the most jobs; pc.lens */
    jobs_pass_ctx pc;
    uint32_t frames_per_token, extra; /* a job's length: tokens x frames + extra */
} jobs_items;

static pass_fn jobs_prep(void *ctx, uint32_t i, void **pass_ctx)
{
    jobs_items *a = ctx;
    const cz_profile_row *r = &a->rows[i];
    for (uint32_t j = 0; j < r->jobs; j++)
        a->lens[j] = r->job_tokens * a->frames_per_token + a->extra;
    a->pc.n = r->jobs;
    *pass_ctx = &a->pc;
    return jobs_pass;
}

static pass_fn copy_prep(void *ctx, uint32_t i, void **pass_ctx)
{
    *pass_ctx = (copy_pass_ctx *)ctx + i;
    return copy_pass;
}

/* Bytes the copy arenas span at least: past the last-level caches of the CPUs this runs
 * on. */
#define COPY_ARENA_BYTES (128u << 20)

/* ---- the run ------------------------------------------------------------------------------- */

typedef struct prof_run {
    const cz_config *cfg;
    const cz_profile_opts *opts;
    cz_kctx *k;
    prof_dev dev;             /* the device thread passes run on */
    uint32_t repeats, done, total; /* timed passes per item; passes run and planned */
    cz_profile *out;
} prof_run;

/* Reports progress on pipeline stage p (UINT32_MAX: the host link). */
static void progress(prof_run *R, uint32_t p)
{
    if (R->opts->progress)
        R->opts->progress(R->opts->progress_ctx, p,
                          p == UINT32_MAX ? "host link"
                                          : R->cfg->model.stages[R->cfg->model.pipe[p].stage].name,
                          R->done, R->total);
}

static cz_status check_device(prof_run *R, cz_err *err)
{
    cz_status st = cz_kctx_status(R->k, err);
    return st == CZ_OK ? st : cz_err_prefix(err, "profile: ");
}

/* Times items [0, n) of pipeline stage p (UINT32_MAX: the host link) in `repeats` rounds,
 * each round running every item once: prep, warm-up, one timed pass. Something else
 * having the machine for a while then slows one pass of many items, which their medians
 * pass over, rather than every pass of a few, which would bend a fit. After the first
 * round an item whose set's first timed pass (in a second set's first round, the first
 * set's fastest) took WARM_S or more runs without warm-up (an engine's steps follow steps
 * of other shapes; at that length the caches hardly count). Items whose median stands
 * more than a quarter of it above their fastest pass after the rounds run `repeats`
 * rounds more among themselves, and the set whose median stands nearer its fastest pass
 * is kept (tries 2). The context's status is checked after every pass; the first failure
 * ends the set with its status. t[i] receives item i's times. */
static cz_status time_items(prof_run *R, uint32_t p, uint32_t n, prep_fn prep, void *ctx,
                            cz_profile_times *const *t, cz_err *err)
{
    uint32_t rep = R->repeats, m = n;
    double *host = cz_xmalloc(((size_t)2 * n * rep + 1) * sizeof *host);
    double *dev = host + (size_t)n * rep;
    uint32_t *left = cz_xmalloc((n ? n : 1) * sizeof *left); /* the items this set times */
    for (uint32_t i = 0; i < n; i++)
        left[i] = i;
    cz_status st = CZ_OK;
    for (uint32_t tries = 1; tries <= 2 && m && st == CZ_OK; tries++) {
        for (uint32_t k = 0; k < rep && st == CZ_OK; k++)
            for (uint32_t j = 0; j < m && st == CZ_OK; j++) {
                uint32_t i = left[j];
                size_t at = (size_t)i * rep + k;
                progress(R, p);
                void *pc;
                pass_fn run = prep(ctx, i, &pc);
                if (tries == 1 && k == 0)
                    t[i]->warmup = warm_up(&R->dev, run, pc, 1);
                else if (host[(size_t)i * rep] < WARM_S)
                    warm_up(&R->dev, run, pc, 1);
                host[at] = dev_pass(&R->dev, run, pc, &dev[at]);
                st = check_device(R, err);
                R->done++;
            }
        if (st != CZ_OK)
            break;
        uint32_t again = 0;
        for (uint32_t j = 0; j < m; j++) {
            uint32_t i = left[j];
            cz_profile_times x = *t[i];
            time_stats(host + (size_t)i * rep, dev + (size_t)i * rep, rep, &x);
            if (tries == 1 || lift(&x) < lift(t[i]))
                *t[i] = x;
            t[i]->tries = tries;
            if (tries == 1 && lift(&x) > 0.25 * x.median_s)
                left[again++] = i;
        }
        m = again;
        R->total += m * rep;
    }
    free(left);
    free(host);
    return st;
}

/* Zeroes backend memory [p, p + bytes) through a host buffer of zeros. */
static void zero_backend(cz_kctx *k, void *p, size_t bytes)
{
    size_t chunk = 4u << 20;
    void *z = cz_xcalloc(1, chunk);
    for (size_t off = 0; off < bytes; off += chunk)
        cz_kmem_upload(k, (char *)p + off, z, bytes - off < chunk ? bytes - off : chunk);
    free(z);
}

/* A permutation of [0, n) from a fixed seed (Fisher-Yates): physical blocks scattered over
 * the pool as a pool that has served a while holds them. */
static int32_t *block_perm(uint32_t n)
{
    int32_t *perm = cz_xmalloc((n ? n : 1) * sizeof *perm);
    for (uint32_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(mix64(0x5eed ^ i) % i);
        int32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    return perm;
}

static void add_xfer(prof_run *R, uint32_t p, bool to_host, uint64_t bytes, uint32_t blocks,
                     uint32_t copies, const cz_profile_times *t)
{
    cz_profile *o = R->out;
    size_t cap = o->n_xfers;
    cz_grow((void **)&o->xfers, &cap, o->n_xfers + 1, sizeof *o->xfers);
    cz_profile_xfer *x = &o->xfers[o->n_xfers++];
    memset(x, 0, sizeof *x);
    x->stage = p;
    x->to_host = to_host;
    x->bytes = bytes;
    x->blocks = blocks;
    x->copies = copies;
    x->t = *t;
    x->predicted_s = cz_cost_host_transfer_s(&R->cfg->hw, (double)bytes);
}

static cz_status run_ar_stage(prof_run *R, stage_plan *sp, cz_net *net, cz_err *err)
{
    const cz_config *cfg = R->cfg;
    const cz_pipe_stage *ps = &cfg->model.pipe[sp->p];
    const cz_stage_card *c = &cfg->model.stages[ps->stage];
    uint32_t bt = cfg->place[sp->p].server.block_tokens;
    cz_kv_pool *pool = NULL;
    cz_net *inner = NULL;
    cz_status st = cz_kv_pool_create(R->k, c, sp->pool_blocks ? sp->pool_blocks : 1, bt,
                                     (cz_dtype)cfg->engine.kv_dtype, &pool, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "profile: ");
    zero_backend(R->k, pool->base, pool->block_bytes * pool->blocks);
    cz_net_reserve(net, max_u32(sp->max_tokens, 1), max_u32(sp->max_seqs, 1),
                   max_u32(sp->max_ctx, 1));
    if (ps->inner >= 0 && sp->max_inner_rows) {
        const cz_stage_card *ic = &cfg->model.stages[ps->inner];
        cz_net_source src = cz_engine_net_source(cfg, (uint32_t)ps->inner);
        if ((st = cz_net_create(R->k, ic, &src, &inner, err)) != CZ_OK) {
            cz_kv_pool_free(pool);
            return cz_err_prefix(err, "profile: stage '%s': ", ic->name);
        }
        cz_net_reserve(inner, sp->max_inner_rows, sp->max_inner_rows, ps->inner_steps + 1);
        warm_net(&R->dev, inner, NULL, CZ_NET_WARMUP_S / 4);
    }
    warm_net(&R->dev, net, pool, CZ_NET_WARMUP_S);
    uint32_t T = max_u32(sp->max_tokens, 1), S = max_u32(sp->max_seqs, 1);
    ar_step s = {.net = net, .pool = pool, .vocab = c->vocab};
    s.tokens = cz_xmalloc(T * sizeof *s.tokens);
    s.positions = cz_xmalloc(T * sizeof *s.positions);
    s.slots = cz_xmalloc(T * sizeof *s.slots);
    s.qsl = cz_xmalloc((S + 1) * sizeof *s.qsl);
    s.seq_lens = cz_xmalloc(S * sizeof *s.seq_lens);
    s.sample_rows = cz_xmalloc(S * sizeof *s.sample_rows);
    s.out_ids = cz_xmalloc(S * sizeof *s.out_ids);
    s.block_table = cz_xmalloc((size_t)S * max_u32(sp->max_blocks_seq, 1) * sizeof *s.block_table);
    int32_t *perm = block_perm(pool->blocks);
    s.perm = perm;

    ar_items ai = {.rows = sp->rows, .s = &s, .inner = {.net = inner}, .bt = bt};
    cz_profile_times **t = cz_xmalloc((sp->n_rows + 2 * sp->n_xfer_blocks + 1) * sizeof *t);
    for (size_t i = 0; i < sp->n_rows; i++)
        t[i] = &sp->rows[i].t;
    st = time_items(R, sp->p, (uint32_t)sp->n_rows, ar_prep, &ai, t, err);

    /* whole blocks of this pool to and from host memory */
    uint64_t most = sp->n_xfer_blocks ? sp->xfer_blocks[sp->n_xfer_blocks - 1] : 0;
    if (st == CZ_OK && most) {
        uint64_t hb = COPY_ARENA_BYTES / pool->block_bytes;
        hb = hb > most ? hb : most;
        uint8_t *host = cz_kmem_host_alloc(R->k, (size_t)hb * pool->block_bytes);
        memset(host, 0, (size_t)hb * pool->block_bytes);
        uint32_t nx = 2 * sp->n_xfer_blocks;
        copy_pass_ctx *cc = cz_xcalloc(nx, sizeof *cc);
        cz_profile_times *xt = cz_xcalloc(nx, sizeof *xt);
        for (uint32_t i = 0; i < nx; i++) { /* per block count: to host, then back */
            cc[i] = (copy_pass_ctx){.k = R->k, .to_host = i % 2 == 0, .host = host,
                                    .pool = pool, .perm = perm,
                                    .blocks = (uint32_t)sp->xfer_blocks[i / 2],
                                    .host_blocks = (uint32_t)hb};
            t[i] = &xt[i];
        }
        st = time_items(R, sp->p, nx, copy_prep, cc, t, err);
        for (uint32_t i = 0; i < nx && st == CZ_OK; i++)
            add_xfer(R, sp->p, cc[i].to_host, (uint64_t)cc[i].blocks * pool->block_bytes,
                     cc[i].blocks, cc[i].blocks * pool->layers * 2, &xt[i]);
        free(cc);
        free(xt);
        cz_kmem_host_free(R->k, host);
    }
    free(t);
    free(perm);
    free(s.tokens);
    free(s.positions);
    free(s.slots);
    free(s.qsl);
    free(s.seq_lens);
    free(s.sample_rows);
    free(s.out_ids);
    free(s.block_table);
    cz_net_free(inner);
    cz_kv_pool_free(pool);
    return st;
}

static cz_status run_jobs_stage(prof_run *R, stage_plan *sp, cz_net *net, cz_err *err)
{
    const cz_config *cfg = R->cfg;
    const cz_pipe_stage *ps = &cfg->model.pipe[sp->p];
    const cz_stage_card *c = &cfg->model.stages[ps->stage];
    bool enc = c->kind == CZ_STAGE_ENCODER;
    uint32_t ds = enc && c->arch.downsample ? c->arch.downsample : 1;
    cz_net_reserve(net, max_u32(max_u32(sp->max_frames_step, sp->max_frames_job), 1),
                   max_u32(sp->max_jobs, 1), max_u32(sp->max_frames_job, 1));
    warm_net(&R->dev, net, NULL, CZ_NET_WARMUP_S);
    uint32_t *lens = cz_xmalloc(max_u32(sp->max_jobs, 1) * sizeof *lens);
    jobs_items ji = {.rows = sp->rows, .lens = lens, .pc = {.net = net, .lens = lens, .enc = enc},
                     .frames_per_token = enc ? ds : 1, .extra = enc ? 0 : ps->prompt_tokens};
    cz_profile_times **t = cz_xmalloc((sp->n_rows + 1) * sizeof *t);
    for (size_t i = 0; i < sp->n_rows; i++)
        t[i] = &sp->rows[i].t;
    cz_status st = time_items(R, sp->p, (uint32_t)sp->n_rows, jobs_prep, &ji, t, err);
    free(t);
    free(lens);
    return st;
}

/* Contiguous ranges between backend memory and host memory, both directions. */
static cz_status run_link(prof_run *R, const uint64_t *sizes, uint32_t n, cz_err *err)
{
    if (!n)
        return CZ_OK;
    uint64_t most = sizes[n - 1] > COPY_ARENA_BYTES ? sizes[n - 1] : COPY_ARENA_BYTES;
    uint8_t *dev = cz_kmem_alloc(R->k, most), *host = cz_kmem_host_alloc(R->k, most);
    zero_backend(R->k, dev, most);
    memset(host, 0, most);
    copy_pass_ctx *cc = cz_xcalloc(2 * n, sizeof *cc);
    cz_profile_times *xt = cz_xcalloc(2 * n, sizeof *xt), **t = cz_xmalloc(2 * n * sizeof *t);
    for (uint32_t i = 0; i < 2 * n; i++) { /* per size: to host, then back */
        cc[i] = (copy_pass_ctx){.k = R->k, .to_host = i % 2 == 0, .dev = dev, .host = host,
                                .bytes = sizes[i / 2], .arena = most};
        t[i] = &xt[i];
    }
    cz_status st = time_items(R, UINT32_MAX, 2 * n, copy_prep, cc, t, err);
    for (uint32_t i = 0; i < 2 * n && st == CZ_OK; i++)
        add_xfer(R, UINT32_MAX, cc[i].to_host, cc[i].bytes, 0, 1, &xt[i]);
    free(cc);
    free(xt);
    free(t);
    cz_kmem_host_free(R->k, host);
    cz_kmem_free(R->k, dev);
    return st;
}

const char *cz_profile_class_name(cz_profile_class c)
{
    static const char *const names[] = {"prefill", "decode",  "mixed",
                                        "encoder", "vocoder", "inner"};
    return (unsigned)c < CZ_ARRAY_LEN(names) ? names[c] : "unknown";
}

void cz_profile_free(cz_profile *p)
{
    if (!p)
        return;
    free(p->rows);
    free(p->xfers);
    memset(p, 0, sizeof *p);
}

static cz_status make_context(const cz_config *cfg, const cz_profile_opts *opts, cz_profile *out,
                              cz_kctx **k, cz_err *err)
{
    const char *backend = opts->backend ? opts->backend : "cpu";
    bool cuda = strcmp(backend, "cuda") == 0;
    if (!cuda && strcmp(backend, "cpu") != 0)
        return cz_err_set(err, CZ_EINVAL, "profile: unknown backend '%s' (expected \"cpu\" or "
                          "\"cuda\")", backend);
    snprintf(out->backend, sizeof out->backend, "%s", backend);
    if (!cuda) {
        cz_engine_opts eo = {.backend = backend, .threads = opts->threads};
        out->threads = cz_engine_device_threads(cfg, &eo);
        return cz_kctx_cpu_create(out->threads, k, err);
    }
    char why[CZ_ERR_MSG_MAX];
    if (cz_kcuda_device_count(why) == 0)
        return cz_err_set(err, CZ_EDEVICE, "profile: backend 'cuda': %s", why);
    cz_kcuda_info info;
    cz_status st = cz_kcuda_device_info(0, &info, err);
    if (st == CZ_OK)
        st = cz_kctx_cuda_create(0, 0, NULL, k, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "profile: backend 'cuda': ");
    snprintf(out->device, sizeof out->device, "%s", info.name);
    out->threads = 1;
    return CZ_OK;
}

cz_status cz_profile_run(const cz_config *cfg, const cz_profile_opts *opts, cz_profile *out,
                         cz_err *err)
{
    CZ_ASSERT(cfg && opts && out);
    memset(out, 0, sizeof *out);
    double t0 = cz_wall_s();
    const grid_sizes *g = opts->probe ? &grid_probe : opts->quick ? &grid_quick : &grid_full;
    prof_run R = {.cfg = cfg, .opts = opts, .out = out};
    R.repeats = opts->repeats ? opts->repeats : opts->quick ? 3 : 5;
    out->repeats = R.repeats;

    /* plan every stage first: the total for progress, and the KV each needs */
    uint32_t n_pipe = cfg->model.n_pipe;
    stage_plan *plans = cz_xcalloc(n_pipe, sizeof *plans);
    cz_status st = CZ_OK;
    for (uint32_t p = 0; p < n_pipe && st == CZ_OK; p++) {
        stage_plan *sp = &plans[p];
        sp->p = p;
        const cz_stage_card *c = &cfg->model.stages[cfg->model.pipe[p].stage];
        if (c->kind != CZ_STAGE_AR) {
            plan_jobs_stage(sp, cfg, g);
        } else {
            double tok_bytes = cz_stage_kv_bytes_per_token(c) / (c->kv_bytes ? c->kv_bytes : 2) *
                               (double)cz_dtype_size((cz_dtype)cfg->engine.kv_dtype);
            uint64_t bt = cfg->place[p].server.block_tokens;
            uint64_t tok_cap = (uint64_t)(cfg->engine.max_kv_bytes / tok_bytes) / bt * bt;
            if (tok_cap < 16 + bt)
                st = cz_err_set(err, CZ_EINVAL,
                                "profile: stage '%s': engine.max_kv_bytes (%.0f MiB) holds no "
                                "more than %llu tokens of its KV; raise it",
                                c->name, cfg->engine.max_kv_bytes / 1048576.0,
                                (unsigned long long)tok_cap);
            else
                plan_ar_stage(sp, cfg, g, tok_cap);
        }
        R.total += ((uint32_t)sp->n_rows + 2 * sp->n_xfer_blocks) * R.repeats;
    }
    uint64_t sizes[AXIS_MAX];
    uint32_t n_sizes = g->xfer_sizes ? logspace(4096, g->xfer_hi, g->xfer_sizes, sizes) : 0;
    R.total += 2 * n_sizes * R.repeats;
    if (st == CZ_OK)
        st = make_context(cfg, opts, out, &R.k, err);
    bool dev = false;
    if (st == CZ_OK) {
        cz_kctx_bind(R.k);
        if (!(dev = dev_start(&R.dev, R.k)))
            st = cz_err_set(err, CZ_ENOMEM, "profile: cannot start the device thread");
    }

    for (uint32_t p = 0; p < n_pipe && st == CZ_OK; p++) {
        stage_plan *sp = &plans[p];
        const cz_pipe_stage *ps = &cfg->model.pipe[p];
        const cz_stage_card *c = &cfg->model.stages[ps->stage];
        progress(&R, p);
        cz_net_source src = cz_engine_net_source(cfg, ps->stage);
        cz_net *net = NULL;
        if ((st = cz_net_create(R.k, c, &src, &net, err)) != CZ_OK) {
            cz_err_prefix(err, "profile: stage '%s': ", c->name);
            break;
        }
        st = c->kind == CZ_STAGE_AR ? run_ar_stage(&R, sp, net, err)
                                    : run_jobs_stage(&R, sp, net, err);
        cz_net_free(net);
        if (st != CZ_OK)
            break;
        size_t cap = out->n_rows;
        cz_grow((void **)&out->rows, &cap, out->n_rows + sp->n_rows, sizeof *out->rows);
        memcpy(out->rows + out->n_rows, sp->rows, sp->n_rows * sizeof *sp->rows);
        out->n_rows += sp->n_rows;
    }
    if (st == CZ_OK)
        st = run_link(&R, sizes, n_sizes, err);
    if (st == CZ_OK && opts->progress)
        opts->progress(opts->progress_ctx, UINT32_MAX, "done", R.done, R.total);
    for (uint32_t p = 0; p < n_pipe; p++)
        free(plans[p].rows);
    free(plans);
    if (dev)
        dev_stop(&R.dev);
    if (R.k)
        cz_kctx_free(R.k);
    out->wall_s = cz_wall_s() - t0;
    if (st != CZ_OK)
        cz_profile_free(out);
    return st;
}

cz_status cz_profile_probe(const cz_config *cfg, const cz_profile_opts *opts, double *ratio,
                           cz_err *err)
{
    cz_profile_opts o = *opts;
    o.probe = true;
    o.progress = NULL;
    cz_profile p;
    cz_status st = cz_profile_run(cfg, &o, &p, err);
    if (st != CZ_OK)
        return st;
    double *r = cz_xmalloc((p.n_rows ? p.n_rows : 1) * sizeof *r);
    size_t n = 0;
    for (size_t i = 0; i < p.n_rows; i++)
        if (p.rows[i].predicted_s > 0 && p.rows[i].t.median_s > 0)
            r[n++] = p.rows[i].t.median_s / p.rows[i].predicted_s;
    cz_dist d;
    cz_dist_compute(r, n, &d); /* NaN without rows */
    *ratio = d.median;
    free(r);
    cz_profile_free(&p);
    return CZ_OK;
}

/* ---- the file ----------------------------------------------------------------------------- */

/* The enums the profile's code columns name. */
enum { E_PIPE_STAGE = 0, E_CARD_STAGE, E_KIND, E_CLASS, E_XFER_STAGE, N_ENUMS };

#define COLN(name, T, member, ctype, units) {name, offsetof(T, member), ctype, 0, 0, units}
#define COL(T, member, ctype, units) COLN(#member, T, member, ctype, units)
#define CODE(name, T, member, e) {name, offsetof(T, member), CZ_H5_ENUM, 0, e, ""}
#define TIMES(T)                                                                               \
    COLN("warmup", T, t.warmup, CZ_H5_U32, "count"),                                           \
        COLN("repeats", T, t.repeats, CZ_H5_U32, "count"),                                     \
        COLN("tries", T, t.tries, CZ_H5_U32, "count"),                                         \
        COLN("median_s", T, t.median_s, CZ_H5_F64, "s"),                                       \
        COLN("p10_s", T, t.p10_s, CZ_H5_F64, "s"), COLN("p90_s", T, t.p90_s, CZ_H5_F64, "s"),  \
        COLN("min_s", T, t.min_s, CZ_H5_F64, "s"), COLN("max_s", T, t.max_s, CZ_H5_F64, "s"),  \
        COLN("device_median_s", T, t.device_median_s, CZ_H5_F64, "s")

static const cz_h5_col shape_cols[] = {
    CODE("stage", cz_profile_row, stage, E_PIPE_STAGE),
    CODE("card", cz_profile_row, card, E_CARD_STAGE),
    CODE("kind", cz_profile_row, kind, E_KIND),
    {"stage_name", offsetof(cz_profile_row, stage_name), CZ_H5_STR, CZ_NAME_MAX, 0, ""},
    CODE("class", cz_profile_row, cls, E_CLASS),
    COL(cz_profile_row, prefill_tokens, CZ_H5_U64, "tokens"),
    COL(cz_profile_row, prefill_seqs, CZ_H5_U32, "count"),
    COL(cz_profile_row, prefill_attn_ctx, CZ_H5_U64, "tokens"),
    COL(cz_profile_row, decode_seqs, CZ_H5_U32, "count"),
    COL(cz_profile_row, decode_ctx_tokens, CZ_H5_U64, "tokens"),
    COL(cz_profile_row, chunk_tokens, CZ_H5_U32, "tokens"),
    COL(cz_profile_row, prefix_tokens, CZ_H5_U32, "tokens"),
    COL(cz_profile_row, ctx_tokens, CZ_H5_U32, "tokens"),
    COL(cz_profile_row, jobs, CZ_H5_U32, "count"),
    COL(cz_profile_row, job_tokens, CZ_H5_U32, "tokens"),
    COL(cz_profile_row, net_rows, CZ_H5_U32, "count"),
    TIMES(cz_profile_row),
    COL(cz_profile_row, predicted_s, CZ_H5_F64, "s"),
};

static const cz_h5_col xfer_cols[] = {
    COL(cz_profile_xfer, bytes, CZ_H5_U64, "bytes"),
    COL(cz_profile_xfer, to_host, CZ_H5_U32, ""),
    CODE("stage", cz_profile_xfer, stage, E_XFER_STAGE),
    COL(cz_profile_xfer, blocks, CZ_H5_U32, "blocks"),
    COL(cz_profile_xfer, copies, CZ_H5_U32, "count"),
    TIMES(cz_profile_xfer),
    COL(cz_profile_xfer, predicted_s, CZ_H5_F64, "s"),
};

static const cz_h5_table shape_table = {
    "shapes",
    "One batch shape of one pipeline stage timed on the engine: the grid point, the shape "
    "the cost model sees, the timing statistics of its passes and the model's prediction.",
    sizeof(cz_profile_row), shape_cols, CZ_ARRAY_LEN(shape_cols)};
static const cz_h5_table xfer_table = {
    "transfers",
    "One KV copy between a pool and host memory timed on the engine: its bytes, direction "
    "and layout, the timing statistics of its passes and the cost model's prediction.",
    sizeof(cz_profile_xfer), xfer_cols, CZ_ARRAY_LEN(xfer_cols)};

static const char *dtype_name(uint32_t dt)
{
    return dt == CZ_ENGINE_F32 ? "f32" : dt == CZ_ENGINE_F16 ? "f16" : "bf16";
}

/* Every pipeline stage as JSON text: its index, card, name, kind and the card's code
 * predictor. Caller frees with cJSON_free. */
static char *stages_json(const cz_config *cfg)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t p = 0; p < cfg->model.n_pipe; p++) {
        const cz_pipe_stage *ps = &cfg->model.pipe[p];
        const cz_stage_card *c = &cfg->model.stages[ps->stage];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stage", p);
        cJSON_AddNumberToObject(o, "card", ps->stage);
        cJSON_AddStringToObject(o, "name", c->name);
        cJSON_AddStringToObject(o, "kind", cz_stage_kind_name(c->kind));
        if (ps->inner >= 0) {
            cJSON_AddStringToObject(o, "inner", cfg->model.stages[ps->inner].name);
            cJSON_AddNumberToObject(o, "inner_steps", ps->inner_steps);
        }
        if (c->kind == CZ_STAGE_AR)
            cJSON_AddNumberToObject(o, "block_tokens", cfg->place[p].server.block_tokens);
        cJSON_AddItemToArray(a, o);
    }
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return s;
}

cz_status cz_profile_write_h5(const char *path, const cz_profile *p, const cz_config *cfg,
                              const cz_profile_meta *meta, cz_err *err)
{
    cz_status st = CZ_OK;
    bool created = false;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((st = cz_h5_check_filters(path, err)) != CZ_OK)
        return st;
    /* the code columns' names: pipeline and card stages, stage kinds, shape classes, and a
     * copy's layout (a pipeline stage's blocks, or a contiguous range: UINT32_MAX) */
    const char *pipe[CZ_MAX_STAGES], *cards[CZ_MAX_STAGES], *kinds_e[CZ_STAGE_VOCODER + 1];
    const char *classes_e[CZ_PROFILE_N_CLASSES], *xfer[CZ_MAX_STAGES + 1];
    uint32_t xfer_v[CZ_MAX_STAGES + 1];
    for (uint32_t i = 0; i < cfg->model.n_pipe; i++) {
        pipe[i] = xfer[i] = cfg->model.stages[cfg->model.pipe[i].stage].name;
        xfer_v[i] = i;
    }
    xfer[cfg->model.n_pipe] = "contiguous";
    xfer_v[cfg->model.n_pipe] = UINT32_MAX;
    for (uint32_t i = 0; i < cfg->model.n_stages; i++)
        cards[i] = cfg->model.stages[i].name;
    for (uint32_t k = 0; k <= CZ_STAGE_VOCODER; k++)
        kinds_e[k] = cz_stage_kind_name((cz_stage_kind)k);
    for (uint32_t c = 0; c < CZ_PROFILE_N_CLASSES; c++)
        classes_e[c] = cz_profile_class_name((cz_profile_class)c);
    const cz_h5_enum enums[N_ENUMS] = {
        [E_PIPE_STAGE] = {pipe, NULL, cfg->model.n_pipe},
        [E_CARD_STAGE] = {cards, NULL, cfg->model.n_stages},
        [E_KIND] = {kinds_e, NULL, CZ_STAGE_VOCODER + 1},
        [E_CLASS] = {classes_e, NULL, CZ_PROFILE_N_CLASSES},
        [E_XFER_STAGE] = {xfer, xfer_v, cfg->model.n_pipe + 1},
    };
    for (size_t i = 0; i < p->n_rows; i++)
        CZ_ASSERT(p->rows[i].stage < cfg->model.n_pipe && p->rows[i].card < cfg->model.n_stages &&
                  p->rows[i].kind <= CZ_STAGE_VOCODER && p->rows[i].cls < CZ_PROFILE_N_CLASSES);
    for (size_t i = 0; i < p->n_xfers; i++)
        CZ_ASSERT(p->xfers[i].stage < cfg->model.n_pipe || p->xfers[i].stage == UINT32_MAX);
    char cpu[256], names[CZ_MAX_STAGES * (CZ_NAME_MAX + 1)] = "", kinds[CZ_MAX_STAGES * 8] = "";
    cz_proc_cpu_model(cpu, sizeof cpu);
    for (uint32_t i = 0; i < cfg->model.n_pipe; i++) {
        const cz_stage_card *c = &cfg->model.stages[cfg->model.pipe[i].stage];
        size_t ln = strlen(names), lk = strlen(kinds);
        snprintf(names + ln, sizeof names - ln, "%s%s", i ? "," : "", c->name);
        snprintf(kinds + lk, sizeof kinds - lk, "%s%s", i ? "," : "", cz_stage_kind_name(c->kind));
    }
    char classes[128] = "";
    for (int c = 0; c < CZ_PROFILE_N_CLASSES; c++) {
        size_t l = strlen(classes);
        snprintf(classes + l, sizeof classes - l, "%s%d=%s", c ? "," : "", c,
                 cz_profile_class_name((cz_profile_class)c));
    }
    char *stages = stages_json(cfg);
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CZ_H5_CHECK(file, "create the file");
    created = true;
    CZ_H5_CHECK(cz_h5_write_table(file, &shape_table, enums, N_ENUMS, p->n_rows, p->rows),
                "write /shapes");
    CZ_H5_CHECK(cz_h5_write_table(file, &xfer_table, enums, N_ENUMS, p->n_xfers, p->xfers),
                "write /transfers");
    struct {
        const char *name, *value;
    } strs[] = {
        {"cadenza_version", cz_version()},
        {"cpu_model", cpu},
        {"backend", p->backend},
        {"cuda_device", p->device},
        {"model", cfg->model.name},
        {"hardware", cfg->hw.name},
        {"stage_names", names},
        {"stage_kinds", kinds},
        {"stages", stages},
        {"classes", classes},
        {"weights", cfg->engine.weights},
        {"dtype", dtype_name(cfg->engine.dtype)},
        {"kv_dtype", dtype_name(cfg->engine.kv_dtype)},
        {"config_path", meta->config_path ? meta->config_path : ""},
        {"config", meta->config_json ? meta->config_json : "{}"},
        {"created", when},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(strs); i++)
        CZ_H5_CHECK(cz_h5_write_str_attr(file, strs[i].name, strs[i].value),
                    "write a string attribute");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "online_cpus", cz_kctx_cpu_default_threads()),
                "write online_cpus");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "threads", p->threads), "write threads");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "quick", meta->quick), "write quick");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "repeats", p->repeats), "write repeats");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "seed", cfg->seed), "write the seed");
    CZ_H5_CHECK(cz_h5_write_f64_attr(file, "wall_s", p->wall_s), "write wall_s");
    herr_t closed = H5Fclose(file);
    file = -1;
    CZ_H5_CHECK(closed, "close the file");
fail:
    if (file >= 0)
        H5Fclose(file);
    struct stat sb;
    if (st != CZ_OK && created && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        remove(path);
    cJSON_free(stages);
    return st;
}
