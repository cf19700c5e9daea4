/* cz_engine.c - the wall-clock driver of the deployment runtime (cz_engine.h). */
#define _GNU_SOURCE
#include "cz_engine.h"
#include "cz_engine_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cz_deploy.h"
#include "cz_evq.h"
#include "cz_kernels.h"
#include "cz_kvmap.h"
#include "cz_kvpool.h"
#include "cz_link.h"
#include "cz_net.h"
#include "cz_wall.h"

#define NONE UINT32_MAX

/* ---- completions: an intrusive FIFO from the device threads to the run's thread ---- */

enum { NODE_STEP = 1, NODE_COPY = 2 };

typedef struct eng_node {
    struct eng_node *next;
    uint32_t kind;
} eng_node;

/* A KV copy between a pool block and a host-tier block: rows [off, off + cnt) of every
 * layer's K and V; for a pull, between rows [src_off, src_off + cnt) of block src_phys of
 * the source replica's pool and rows [off, off + cnt) of block phys (host NULL). */
typedef struct eng_seg {
    int32_t phys;
    uint8_t *host;
    uint32_t off, cnt;
    int32_t src_phys;
    uint32_t src_off;
} eng_seg;

/* One transfer the core asked for, carried out by its device's copy thread: a store or a
 * load of the host tier, or a pull (disaggregation: a decode replica's load of KV from a
 * prefill replica's pool, on the decode replica's device). */
typedef struct eng_copy {
    eng_node node;          /* first: a node is its copy */
    struct eng_copy *qnext; /* the copy thread's queue */
    uint32_t rep, seq;
    bool to_host;
    bool pull;
    uint32_t src_rep, src_seq, first; /* a pull's source and its first position */
    uint64_t id;            /* its number on the device (fences) */
    uint32_t n_segs;
    eng_seg segs[];
} eng_copy;

/* The step in flight on a replica: what its device runs, and what comes back. */
typedef struct eng_step {
    eng_node node;          /* first */
    uint32_t rep;
    bool ar;
    /* decoder steps: vLLM V1's flattened batch, in buffers sized at load */
    cz_step_batch b;
    int32_t *tokens, *positions, *qsl, *seq_lens, *block_table, *sample_rows, *out_ids;
    int64_t *slots;
    uint64_t *counter;      /* per sampled row: its draw's counter (temperature > 0) */
    cz_row_sampling *rows;  /* per sampled row: its request's sampling (per_row) */
    bool per_row;           /* the observer gives each row's sampling */
    uint32_t *row_seq;      /* per sequence of the batch: the core's id */
    uint32_t *sample_seq;   /* per sampled row: the core's sequence id */
    uint32_t *sample_pos;   /* per sampled row: the position the sampled id takes */
    uint32_t cap_tokens, cap_seqs, cap_table;
    uint32_t inner_rows, inner_steps;
    /* encoder and vocoder steps */
    uint32_t *lens;
    uint32_t n_jobs, cap_jobs;
    uint64_t seed;
    uint64_t wait_copy;     /* the copy it waits for (fences) */
    double kernel_s;
    cz_step_record rec;
} eng_step;

/* A sequence's token ids: sampled ones where the replica sampled them, the workload's
 * synthetic input elsewhere. */
typedef struct eng_toks {
    int32_t *ids;
    uint32_t valid, cap;
} eng_toks;

/* A sequence's host KV tier: one block-sized chunk per logical block, allocated when
 * first stored to. */
typedef struct eng_host {
    uint8_t **chunk;
    uint32_t cap;
    uint32_t pending; /* copies in flight */
} eng_host;

typedef struct eng_dev {
    cz_kctx *k;
    pthread_t worker, copier;
    bool started_worker, started_copier;
    pthread_cond_t cv_work, cv_copy;
    eng_step **q;           /* steps to run, FIFO ring */
    uint32_t q_head, q_len, q_cap;
    eng_copy *c_head, *c_tail;
    uint64_t copies_issued, copies_done;
    cz_link link;           /* the host-link model behind xfer_eta */
} eng_dev;

/* A transfer the core asked for, not yet handed to the copy thread; a pull names the
 * prefill replica's sequence that holds the KV. */
typedef struct eng_pending {
    cz_xfer x;
    double bytes, now;
    bool pull;
    uint32_t src_rep, src_seq;
} eng_pending;

/* Disaggregation: a session's sequence at each pool (CZ_PD_PREFILL, CZ_PD_DECODE), as its
 * turns last opened there (NONE: none yet). */
typedef struct eng_pd_ses {
    uint32_t rep[2], seq[2];
} eng_pd_ses;

typedef struct eng_rep {
    uint32_t p, gpu, card;
    uint32_t id_p;          /* the stage whose synthetic input ids it reads: its own, or
                               with disaggregation the prefill pool's for both pools */
    eng_pending *pend;
    size_t n_pend, cap_pend;
    cz_server *srv;
    cz_net *net, *inner;
    cz_kv_pool *pool;
    cz_kvmap *map;
    eng_toks *toks;
    eng_host *host;
    size_t n_seq_state, cap_seq_state;
    eng_step step;
    bool busy;
} eng_rep;

typedef struct eng_netkey {
    uint32_t gpu, card;
    cz_net *net;
} eng_netkey;

struct cz_engine {
    const cz_config *cfg;
    const cz_workload *wl;
    cz_metrics *m;
    cz_deploy *d;
    cz_evq timers;
    struct timespec t0;
    pthread_mutex_t mu;
    pthread_cond_t cv_main;
    eng_node *done_head, *done_tail;
    bool quit;
    eng_dev *devs;
    uint32_t n_devs;
    eng_rep *reps;
    uint32_t n_reps;
    eng_netkey *nets;
    uint32_t n_nets;
    bool cuda;              /* the CUDA backend */
    eng_pd_ses *pd_ses;     /* disaggregation: per session (index) */
    size_t n_pd_ses, cap_pd_ses;
    uint32_t steps_inflight;
    uint64_t copies_inflight;
    uint64_t step_seed;
    cz_sampling sampling;
    cz_err bad;             /* bad.status set: a step's logits held NaN or +inf */
    cz_engine_observer obs;
    bool kicked;            /* cz_engine_kick since the last wait (under mu) */
    /* the run's state (cz_engine_advance) */
    double now;
    uint64_t events;
    cz_watchdog dog;
    uint64_t watched;       /* events the watchdog has seen */
    cz_err fail;            /* a device's failure, or non-finite logits */
};
typedef struct cz_engine eng;

static double clock_s(const eng *E)
{
    return cz_wall_since_s(&E->t0);
}

/* Called with E->mu held. */
static void post_done(eng *E, eng_node *n)
{
    n->next = NULL;
    if (E->done_tail)
        E->done_tail->next = n;
    else
        E->done_head = n;
    E->done_tail = n;
    pthread_cond_signal(&E->cv_main);
}

/* ---- device threads ---- */

typedef struct dev_arg {
    eng *E;
    uint32_t gpu;
} dev_arg;

static void run_step(eng *E, eng_step *st)
{
    eng_rep *r = &E->reps[st->rep];
    if (st->ar) {
        cz_sampling s = E->sampling;
        if (st->per_row) {
            s.rows = st->rows; /* counters set as the step was built */
            s.counter = st->counter;
        } else if (s.temperature > 0) {
            for (uint32_t i = 0; i < st->b.n_samples; i++)
                st->counter[i] = st->seed * 1000003u + i; /* per step and row */
            s.counter = st->counter;
        }
        cz_net_decode(r->net, r->pool, &st->b, &s, st->out_ids, NULL);
        if (r->inner && st->inner_rows)
            cz_net_inner(r->inner, st->inner_rows, st->inner_steps);
    } else {
        const cz_stage_card *c = &E->cfg->model.stages[r->card];
        if (c->kind == CZ_STAGE_ENCODER)
            cz_net_encode(r->net, st->lens, st->n_jobs, st->seed);
        else
            cz_net_vocode(r->net, st->lens, st->n_jobs, st->seed);
    }
}

static void *worker_main(void *arg)
{
    dev_arg *a = arg;
    eng *E = a->E;
    eng_dev *D = &E->devs[a->gpu];
    free(a);
    cz_kctx_bind(D->k);
    pthread_mutex_lock(&E->mu);
    for (;;) {
        while (!E->quit && D->q_len == 0)
            pthread_cond_wait(&D->cv_work, &E->mu);
        if (E->quit)
            break;
        eng_step *st = D->q[D->q_head];
        /* a block it writes is still read by a copy to host memory */
        while (!E->quit && D->copies_done < st->wait_copy)
            pthread_cond_wait(&D->cv_work, &E->mu);
        if (D->copies_done < st->wait_copy)
            break;
        D->q_head = (D->q_head + 1) % D->q_cap;
        D->q_len--;
        pthread_mutex_unlock(&E->mu);
        double t0 = cz_wall_s();
        run_step(E, st);
        cz_kctx_sync(D->k);
        st->kernel_s = cz_wall_s() - t0;
        pthread_mutex_lock(&E->mu);
        post_done(E, &st->node);
    }
    pthread_mutex_unlock(&E->mu);
    return NULL;
}

static void run_copy(eng *E, const eng_copy *c)
{
    eng_rep *r = &E->reps[c->rep];
    cz_kctx *k = E->devs[r->gpu].k;
    const cz_kv_pool *pool = r->pool;
    size_t el = cz_dtype_size(pool->dt);
    size_t row = (size_t)pool->kv_heads * pool->head_dim * el;
    size_t half = (size_t)pool->block_tokens * row; /* one layer's K (or V) of a block */
    for (uint32_t s = 0; s < c->n_segs; s++) {
        const eng_seg *g = &c->segs[s];
        for (uint32_t l = 0; l < pool->layers; l++) {
            cz_kv_layer v = cz_kv_pool_layer(pool, l);
            uint8_t *kb = (uint8_t *)v.k + (size_t)g->phys * v.block_stride * el;
            uint8_t *vb = (uint8_t *)v.v + (size_t)g->phys * v.block_stride * el;
            uint8_t *hk = g->host + (size_t)l * 2 * half, *hv = hk + half;
            size_t off = (size_t)g->off * row, n = (size_t)g->cnt * row;
            if (c->to_host) {
                cz_kmem_copy_async(k, hk + off, kb + off, n, true);
                cz_kmem_copy_async(k, hv + off, vb + off, n, true);
            } else {
                cz_kmem_copy_async(k, kb + off, hk + off, n, false);
                cz_kmem_copy_async(k, vb + off, hv + off, n, false);
            }
        }
    }
    cz_kmem_copy_wait(k);
}

/* A pull: the rows of its segments from the prefill replica's pool into the decode
 * replica's, K and V of every layer. Both pools are of one model card (asserted when it
 * was issued) and, on the CPU backend (the only one that runs disaggregation), host
 * memory. */
static void run_pull(eng *E, const eng_copy *c)
{
    const cz_kv_pool *dst = E->reps[c->rep].pool, *src = E->reps[c->src_rep].pool;
    size_t el = cz_dtype_size(dst->dt);
    size_t row = (size_t)dst->kv_heads * dst->head_dim * el;
    for (uint32_t s = 0; s < c->n_segs; s++) {
        const eng_seg *g = &c->segs[s];
        size_t n = (size_t)g->cnt * row;
        for (uint32_t l = 0; l < dst->layers; l++) {
            cz_kv_layer dv = cz_kv_pool_layer(dst, l), sv = cz_kv_pool_layer(src, l);
            size_t doff = (size_t)g->phys * dv.block_stride * el + (size_t)g->off * row;
            size_t soff = (size_t)g->src_phys * sv.block_stride * el + (size_t)g->src_off * row;
            memcpy((uint8_t *)dv.k + doff, (const uint8_t *)sv.k + soff, n);
            memcpy((uint8_t *)dv.v + doff, (const uint8_t *)sv.v + soff, n);
        }
    }
}

static void *copier_main(void *arg)
{
    dev_arg *a = arg;
    eng *E = a->E;
    eng_dev *D = &E->devs[a->gpu];
    free(a);
    cz_kctx_bind(D->k);
    pthread_mutex_lock(&E->mu);
    for (;;) {
        while (!E->quit && !D->c_head)
            pthread_cond_wait(&D->cv_copy, &E->mu);
        if (E->quit)
            break;
        eng_copy *c = D->c_head;
        D->c_head = c->qnext;
        if (!D->c_head)
            D->c_tail = NULL;
        pthread_mutex_unlock(&E->mu);
        if (c->pull)
            run_pull(E, c);
        else
            run_copy(E, c);
        pthread_mutex_lock(&E->mu);
        D->copies_done = c->id;
        pthread_cond_broadcast(&D->cv_work);
        post_done(E, &c->node);
    }
    pthread_mutex_unlock(&E->mu);
    return NULL;
}

/* ---- per-sequence state ---- */

static void ensure_seq_state(eng_rep *r, uint32_t seq)
{
    if (seq < r->n_seq_state)
        return;
    size_t cap = r->cap_seq_state;
    cz_grow((void **)&r->toks, &cap, (size_t)seq + 1, sizeof *r->toks);
    cap = r->cap_seq_state;
    cz_grow((void **)&r->host, &cap, (size_t)seq + 1, sizeof *r->host);
    r->cap_seq_state = cap;
    memset(r->toks + r->n_seq_state, 0, ((size_t)seq + 1 - r->n_seq_state) * sizeof *r->toks);
    memset(r->host + r->n_seq_state, 0, ((size_t)seq + 1 - r->n_seq_state) * sizeof *r->host);
    r->n_seq_state = (size_t)seq + 1;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The id at `pos` of sequence `seq` whose context is `ctx` tokens: sampled, or the
 * workload's synthetic input (a hash of the seed, the session and the position). */
static int32_t token_at(eng *E, eng_rep *r, uint32_t seq, uint64_t session, uint32_t pos,
                        uint32_t ctx)
{
    eng_toks *t = &r->toks[seq];
    if (t->valid > ctx)
        t->valid = ctx; /* a barge-in cut the context back */
    if (pos >= t->valid) {
        if (pos >= t->cap) {
            size_t cap = t->cap;
            cz_grow((void **)&t->ids, &cap, (size_t)pos + 1, sizeof *t->ids);
            t->cap = (uint32_t)cap;
        }
        uint32_t vocab = E->cfg->model.stages[r->card].vocab;
        for (uint32_t i = t->valid; i <= pos; i++) {
            if (E->obs.input_id) {
                int32_t id = E->obs.input_id(E->obs.ctx, session, i);
                CZ_ASSERT(id >= 0 && (uint32_t)id < vocab); /* the driver checked its ids */
                t->ids[i] = id;
            } else {
                t->ids[i] = (int32_t)(mix64(E->cfg->seed ^
                                            mix64(session * 0x100000001B3ull + r->id_p) ^ i) %
                                      vocab);
            }
        }
        t->valid = pos + 1;
    }
    return t->ids[pos];
}

static void token_set(eng_rep *r, uint32_t seq, uint32_t pos, int32_t id)
{
    eng_toks *t = &r->toks[seq];
    CZ_ASSERT(pos <= t->valid); /* the step read every position before it */
    if (pos >= t->cap) {
        size_t cap = t->cap;
        cz_grow((void **)&t->ids, &cap, (size_t)pos + 1, sizeof *t->ids);
        t->cap = (uint32_t)cap;
    }
    t->ids[pos] = id;
    t->valid = pos + 1;
}

/* Disaggregation: the ids at positions [lo, hi) of sequence `seq` of replica r become those
 * of sequence `sseq` of replica sr (both pools' sequences of a session hold one context),
 * as far as sr knows them; r's ids before lo are read first (synthesized where unknown). */
static void toks_copy(eng *E, eng_rep *r, uint32_t seq, const eng_rep *sr, uint32_t sseq,
                      uint32_t lo, uint32_t hi)
{
    const eng_toks *s = &sr->toks[sseq];
    eng_toks *t = &r->toks[seq];
    if (hi > s->valid)
        hi = s->valid;
    if (lo >= hi)
        return;
    if (lo > t->valid) {
        const cz_seq *q = cz_server_seq(r->srv, seq);
        token_at(E, r, seq, q->session, lo - 1, q->tokens_in + q->generated);
    }
    if (hi > t->cap) {
        size_t cap = t->cap;
        cz_grow((void **)&t->ids, &cap, hi, sizeof *t->ids);
        t->cap = (uint32_t)cap;
    }
    memcpy(t->ids + lo, s->ids + lo, (size_t)(hi - lo) * sizeof *t->ids);
    if (hi > t->valid)
        t->valid = hi;
}

/* ---- building a decoder step ---- */

static void add_row_seq(eng *E, eng_rep *r, eng_step *st, uint32_t seq, uint32_t start,
                        uint32_t n, bool sample)
{
    cz_step_batch *b = &st->b;
    const cz_seq *q = cz_server_seq(r->srv, seq);
    uint32_t ctx = q->tokens_in + q->generated, bt = r->pool->block_tokens;
    CZ_ASSERT(b->n_seqs < st->cap_seqs && b->n_tokens + n <= st->cap_tokens);
    uint32_t bi = b->n_seqs++;
    st->row_seq[bi] = seq;
    st->qsl[bi] = (int32_t)b->n_tokens;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pos = start + i, row = b->n_tokens++;
        st->tokens[row] = token_at(E, r, seq, q->session, pos, ctx);
        st->positions[row] = (int32_t)pos;
        int32_t phys = cz_kvmap_block(r->map, seq, pos / bt);
        CZ_ASSERT(phys >= 0); /* the step's own tokens are always held */
        st->slots[row] = (int64_t)phys * bt + pos % bt;
        uint64_t f = cz_kvmap_fence_of(r->map, phys);
        if (f > st->wait_copy)
            st->wait_copy = f;
    }
    st->qsl[bi + 1] = (int32_t)b->n_tokens;
    st->seq_lens[bi] = (int32_t)(start + n);
    if (sample) {
        uint32_t k = b->n_samples++;
        st->sample_rows[k] = (int32_t)(b->n_tokens - 1);
        st->sample_seq[k] = seq;
        st->sample_pos[k] = start + n;
        if (E->obs.sampling) {
            /* the request's own sampling; a seeded request draws by position, so its
             * reply repeats whatever it is batched with */
            cz_row_sampling *rs = &st->rows[k];
            *rs = (cz_row_sampling){E->sampling.temperature, E->sampling.top_k,
                                    E->sampling.top_p, E->sampling.seed};
            bool seeded = false;
            E->obs.sampling(E->obs.ctx, q->session, start + n, rs, &seeded);
            st->counter[k] = seeded ? start + n : st->seed * 1000003u + k;
            st->per_row = true;
        }
    }
}

/* The step's sequences and their tokens, which the map must know before any sync: the
 * core already counts their blocks. */
static void mark_inflight(eng_rep *r, const cz_batch *cb)
{
    for (uint32_t id = cz_server_decode_first(r->srv); id != NONE;
         id = cz_server_decode_next(r->srv, id)) {
        ensure_seq_state(r, id);
        cz_kvmap_set_inflight(r->map, id, 1);
    }
    for (uint32_t k = 0; k < cb->n_items; k++) {
        ensure_seq_state(r, cb->items[k].seq);
        cz_kvmap_set_inflight(r->map, cb->items[k].seq, cb->items[k].tokens);
    }
}

static void build_ar(eng *E, eng_rep *r, const cz_deploy_step *s)
{
    eng_step *st = &r->step;
    const cz_batch *cb = s->batch;
    memset(&st->b, 0, sizeof st->b);
    st->wait_copy = 0;
    st->per_row = false;
    cz_kvmap_sync(r->map, r->srv);
    for (uint32_t id = cz_server_decode_first(r->srv); id != NONE;
         id = cz_server_decode_next(r->srv, id)) {
        const cz_seq *q = cz_server_seq(r->srv, id);
        add_row_seq(E, r, st, id, q->computed, 1, true);
    }
    for (uint32_t k = 0; k < cb->n_items; k++) {
        const cz_batch_item *it = &cb->items[k];
        const cz_seq *q = cz_server_seq(r->srv, it->seq);
        CZ_ASSERT(q->computed == it->ctx_before);
        bool sample = it->ctx_before + it->tokens == q->tokens_in + q->generated;
        add_row_seq(E, r, st, it->seq, it->ctx_before, it->tokens, sample);
    }
    /* block tables, one row per sequence, as wide as the widest */
    cz_step_batch *b = &st->b;
    uint32_t mb = 1;
    for (uint32_t i = 0; i < b->n_seqs; i++) {
        uint32_t n;
        cz_kvmap_table(r->map, st->row_seq[i], &n);
        if (n > mb)
            mb = n;
    }
    if ((size_t)mb * b->n_seqs > st->cap_table) {
        size_t cap = st->cap_table;
        cz_grow((void **)&st->block_table, &cap, (size_t)mb * b->n_seqs,
                sizeof *st->block_table);
        st->cap_table = (uint32_t)cap;
    }
    for (uint32_t i = 0; i < b->n_seqs; i++) {
        uint32_t n;
        const int32_t *t = cz_kvmap_table(r->map, st->row_seq[i], &n);
        int32_t *row = st->block_table + (size_t)i * mb;
        if (n)
            memcpy(row, t, n * sizeof *row);
        for (uint32_t j = n; j < mb; j++)
            row[j] = -1;
    }
    b->max_blocks = mb;
    b->tokens = st->tokens;
    b->positions = st->positions;
    b->qsl = st->qsl;
    b->seq_lens = st->seq_lens;
    b->block_table = st->block_table;
    b->slots = st->slots;
    b->sample_rows = st->sample_rows;
    const cz_server_config *sc = &E->cfg->place[r->p].server;
    b->window = sc->kv_window_tokens;
    b->sinks = sc->kv_sink_tokens;
    const cz_pipe_stage *ps = &E->cfg->model.pipe[r->p];
    st->inner_rows = ps->inner >= 0 ? b->n_samples : 0;
    st->inner_steps = ps->inner_steps;
    cz_step_record *rec = &st->rec;
    rec->prefill_tokens = cb->prefill_tokens;
    rec->prefill_seqs = cb->prefill_seqs;
    rec->prefill_attn_ctx = cb->prefill_attn_ctx;
    rec->decode_seqs = cb->decode_seqs;
    rec->decode_ctx_tokens = cb->decode_ctx_tokens;
    rec->sampled = b->n_samples;
    rec->predicted_s = cz_config_roofline_step_s(E->cfg, r->p, cb);
}

static void build_jobs(eng *E, eng_rep *r, const cz_deploy_step *s)
{
    eng_step *st = &r->step;
    if (s->n_jobs > st->cap_jobs) {
        size_t cap = st->cap_jobs;
        cz_grow((void **)&st->lens, &cap, s->n_jobs, sizeof *st->lens);
        st->cap_jobs = (uint32_t)cap;
    }
    const cz_stage_card *c = &E->cfg->model.stages[r->card];
    uint32_t prompt = E->cfg->model.pipe[r->p].prompt_tokens;
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < s->n_jobs; i++) {
        uint32_t t = s->jobs[i].tokens;
        st->lens[i] = c->kind == CZ_STAGE_ENCODER ? t * c->arch.downsample : t + prompt;
        tokens += t + (c->kind == CZ_STAGE_ENCODER ? 0 : prompt);
    }
    st->n_jobs = s->n_jobs;
    st->wait_copy = 0;
    cz_step_record *rec = &st->rec;
    rec->prefill_tokens = tokens;
    rec->prefill_seqs = s->n_jobs;
    rec->predicted_s = cz_config_jobs_step_s(E->cfg, r->p, s->jobs, s->n_jobs);
}

/* ---- the driver's table ---- */

static void flush_xfers(eng *E);

static void drv_step(void *ctx, const cz_deploy_step *s, double now)
{
    eng *E = ctx;
    eng_rep *r = &E->reps[s->rep];
    eng_step *st = &r->step;
    CZ_ASSERT(!r->busy);
    double t0 = clock_s(E);
    if (s->srv)
        mark_inflight(r, s->batch);
    flush_xfers(E);
    memset(&st->rec, 0, sizeof st->rec);
    st->ar = s->srv != NULL;
    st->seed = ++E->step_seed;
    if (st->ar)
        build_ar(E, r, s);
    else
        build_jobs(E, r, s);
    st->rec.replica = s->rep;
    st->rec.stage = s->p;
    st->rec.device = s->gpu;
    st->rec.start_s = now;
    st->rec.build_s = clock_s(E) - t0;
    r->busy = true;
    eng_dev *D = &E->devs[s->gpu];
    pthread_mutex_lock(&E->mu);
    CZ_ASSERT(D->q_len < D->q_cap);
    D->q[(D->q_head + D->q_len) % D->q_cap] = st;
    D->q_len++;
    E->steps_inflight++;
    pthread_cond_signal(&D->cv_work);
    pthread_mutex_unlock(&E->mu);
}

static void drv_launched(void *ctx, uint32_t gpu, double now)
{
    (void)ctx;
    (void)gpu;
    (void)now;
}

static uint8_t *host_chunk(eng *E, eng_rep *r, uint32_t seq, uint32_t j)
{
    eng_host *h = &r->host[seq];
    if (j >= h->cap) {
        uint32_t old = h->cap;
        size_t cap = h->cap;
        cz_grow((void **)&h->chunk, &cap, (size_t)j + 1, sizeof *h->chunk);
        h->cap = (uint32_t)cap;
        memset(h->chunk + old, 0, (h->cap - old) * sizeof *h->chunk);
    }
    if (!h->chunk[j])
        h->chunk[j] = cz_kmem_host_alloc(E->devs[r->gpu].k, r->pool->block_bytes);
    return h->chunk[j];
}

/* Appends copy job c to device D's queue and wakes its copy thread; a job not yet named
 * (c->id 0: a pull) takes the device's next id. */
static void copy_enqueue(eng *E, eng_dev *D, eng_copy *c)
{
    pthread_mutex_lock(&E->mu);
    if (c->id == 0)
        c->id = ++D->copies_issued;
    if (D->c_tail)
        D->c_tail->qnext = c;
    else
        D->c_head = c;
    D->c_tail = c;
    E->copies_inflight++;
    pthread_cond_signal(&D->cv_copy);
    pthread_mutex_unlock(&E->mu);
}

/* Hands one transfer to its device's copy thread: the blocks it reads or writes are named
 * now, from the map as it stands. */
static void issue_copy(eng *E, uint32_t rep, const cz_xfer *x, double bytes, double now)
{
    eng_rep *r = &E->reps[rep];
    eng_dev *D = &E->devs[r->gpu];
    CZ_ASSERT(x->tokens > 0 && !x->remote);
    ensure_seq_state(r, x->seq);
    uint32_t bt = r->pool->block_tokens;
    uint32_t j0 = x->first / bt, j1 = (x->first + x->tokens - 1) / bt;
    uint32_t n = j1 - j0 + 1;
    eng_copy *c = cz_xmalloc(sizeof *c + n * sizeof c->segs[0]);
    memset(c, 0, sizeof *c);
    c->node.kind = NODE_COPY;
    c->rep = rep;
    c->seq = x->seq;
    c->to_host = x->to_host;

    pthread_mutex_lock(&E->mu);
    c->id = ++D->copies_issued;
    pthread_mutex_unlock(&E->mu);
    bool window = E->cfg->place[r->p].server.kv_window_tokens > 0;
    uint32_t ns = 0;
    for (uint32_t j = j0; j <= j1; j++) {
        uint32_t lo = j == j0 ? x->first % bt : 0;
        uint32_t hi = j == j1 ? (x->first + x->tokens - 1) % bt + 1 : bt;
        int32_t phys = cz_kvmap_block(r->map, x->seq, j);
        if (phys < 0) {
            /* behind the window (Metronome's sinks and window, section 4.1): never read
             * again, so neither stored nor loaded; the blocks a load brings back are the
             * ones the store copied (the window only slides forward) */
            CZ_ASSERT(window);
            continue;
        }
        eng_seg *g = &c->segs[ns++];
        g->phys = phys;
        g->host = host_chunk(E, r, x->seq, j);
        g->off = lo;
        g->cnt = hi - lo;
        if (x->to_host)
            cz_kvmap_fence(r->map, phys, c->id);
    }
    c->n_segs = ns;
    r->host[x->seq].pending++;
    cz_link_submit(&D->link, now, bytes, x->to_host);
    copy_enqueue(E, D, c);
}

/* Hands a pull (disaggregation) to the decode replica's device's copy thread, after the
 * replica's map followed the core: it writes the blocks the core has just given x->seq,
 * as a load does (behind any store of that device still reading them: one copy thread, in
 * order). It reads sequence src_seq's blocks in the prefill replica's pool, named from
 * that map as it stands: the core holds them (the prefill turn stays open, stalled, until
 * the pull is reported), and a map frees no block its sequence's count still holds, so no
 * step of the prefill replica writes them until the copy has finished. Rows go one run at
 * a time within one block on each side (the pools' block_tokens may differ). The ids of
 * those positions follow the KV. */
static void issue_pull(eng *E, uint32_t rep, const eng_pending *pd)
{
    const cz_xfer *x = &pd->x;
    eng_rep *r = &E->reps[rep], *sr = &E->reps[pd->src_rep];
    eng_dev *D = &E->devs[r->gpu];
    CZ_ASSERT(!E->cuda && x->remote && !x->to_host && x->tokens > 0);
    const cz_kv_pool *dp = r->pool, *sp = sr->pool;
    CZ_ASSERT(r->card == sr->card && dp->layers == sp->layers &&
              dp->kv_heads == sp->kv_heads && dp->head_dim == sp->head_dim &&
              dp->dt == sp->dt);
    ensure_seq_state(r, x->seq);
    CZ_ASSERT(pd->src_seq < sr->n_seq_state);
    uint32_t bt = dp->block_tokens, sbt = sp->block_tokens;
    uint32_t end = x->first + x->tokens;
    /* a run ends at every block boundary of either side */
    uint32_t n = x->tokens / bt + x->tokens / sbt + 3;
    eng_copy *c = cz_xmalloc(sizeof *c + n * sizeof c->segs[0]);
    memset(c, 0, sizeof *c);
    c->node.kind = NODE_COPY;
    c->rep = rep;
    c->seq = x->seq;
    c->pull = true;
    c->src_rep = pd->src_rep;
    c->src_seq = pd->src_seq;
    c->first = x->first;
    uint32_t ns = 0;
    for (uint32_t pos = x->first; pos < end;) {
        uint32_t doff = pos % bt, soff = pos % sbt, cnt = end - pos;
        if (bt - doff < cnt)
            cnt = bt - doff;
        if (sbt - soff < cnt)
            cnt = sbt - soff;
        int32_t dphys = cz_kvmap_block(r->map, x->seq, pos / bt);
        int32_t sphys = cz_kvmap_block(sr->map, pd->src_seq, pos / sbt);
        CZ_ASSERT(dphys >= 0 && sphys >= 0 && ns < n); /* both held: no window */
        c->segs[ns++] = (eng_seg){.phys = dphys, .off = doff, .cnt = cnt,
                                  .src_phys = sphys, .src_off = soff};
        pos += cnt;
    }
    c->n_segs = ns;
    /* the prefill replica read every one of these ids as it computed their KV */
    CZ_ASSERT(sr->toks[pd->src_seq].valid >= end);
    toks_copy(E, r, x->seq, sr, pd->src_seq, x->first, end);
    copy_enqueue(E, D, c);
}

/* The transfers asked for since the last flush: stores first, reading the blocks the
 * sequences held when the core asked (a cut tail is gone from the core's count but not
 * yet from the map), then the map follows the core, then loads and pulls write the blocks
 * the core has just given. Called after every call into the runtime and before a step is
 * built. */
static void flush_xfers(eng *E)
{
    for (uint32_t ri = 0; ri < E->n_reps; ri++) {
        eng_rep *r = &E->reps[ri];
        if (r->n_pend == 0)
            continue;
        for (size_t i = 0; i < r->n_pend; i++)
            if (r->pend[i].x.to_host)
                issue_copy(E, ri, &r->pend[i].x, r->pend[i].bytes, r->pend[i].now);
        cz_kvmap_sync(r->map, r->srv);
        for (size_t i = 0; i < r->n_pend; i++) {
            if (r->pend[i].pull)
                issue_pull(E, ri, &r->pend[i]);
            else if (!r->pend[i].x.to_host)
                issue_copy(E, ri, &r->pend[i].x, r->pend[i].bytes, r->pend[i].now);
        }
        r->n_pend = 0;
    }
}

static void drv_xfer(void *ctx, uint32_t rep, uint32_t gpu, const cz_xfer *x, double bytes,
                     double now)
{
    eng *E = ctx;
    eng_rep *r = &E->reps[rep];
    (void)gpu;
    cz_grow((void **)&r->pend, &r->cap_pend, r->n_pend + 1, sizeof *r->pend);
    r->pend[r->n_pend++] = (eng_pending){*x, bytes, now, false, 0, 0};
}

/* Disaggregation: decode replica `rep` loads positions [x->first, x->first + x->tokens) of
 * x->seq from sequence src_seq of prefill replica src_rep, queued as drv_xfer queues a
 * load. The copy is real (memcpy on the CPU) and takes the time it takes: the modelled
 * network link (cz_link_pair_submit, the simulator's) is not used. */
static void drv_pull(void *ctx, uint32_t rep, const cz_xfer *x, uint32_t src_rep,
                     uint32_t src_seq, double bytes, double now)
{
    eng *E = ctx;
    eng_rep *r = &E->reps[rep];
    CZ_ASSERT(x->remote && src_rep < E->n_reps && E->reps[src_rep].srv);
    cz_grow((void **)&r->pend, &r->cap_pend, r->n_pend + 1, sizeof *r->pend);
    r->pend[r->n_pend++] = (eng_pending){*x, bytes, now, true, src_rep, src_seq};
}

static double drv_xfer_eta(void *ctx, uint32_t gpu, double bytes, bool to_host, double now)
{
    eng *E = ctx;
    return cz_link_eta(&E->devs[gpu].link, now, bytes, to_host);
}

static void drv_timer(void *ctx, double t, uint32_t kind, uint32_t a, uint32_t b)
{
    eng *E = ctx;
    cz_evq_push(&E->timers, t, kind, a, b);
}

/* Disaggregation: a turn opened on sequence `seq` of replica `rep` (either pool). The
 * session's sequence at the other pool holds the context both align to (docs/engine.md):
 * the ids of the positions this one has not computed are taken from it, as far as it
 * knows them. A prefill turn so reads the replies the decode pool sampled (its input
 * there), and a decode turn the prefill pool's context, which it reads where it computes
 * rather than pulls. */
static void pd_align(eng *E, uint32_t rep, uint32_t seq)
{
    eng_rep *r = &E->reps[rep];
    const cz_seq *q = cz_server_seq(r->srv, seq);
    CZ_ASSERT(r->p == CZ_PD_PREFILL || r->p == CZ_PD_DECODE);
    size_t si = (size_t)q->session;
    if (si >= E->n_pd_ses) {
        cz_grow((void **)&E->pd_ses, &E->cap_pd_ses, si + 1, sizeof *E->pd_ses);
        for (size_t i = E->n_pd_ses; i <= si; i++)
            E->pd_ses[i] = (eng_pd_ses){{NONE, NONE}, {NONE, NONE}};
        E->n_pd_ses = si + 1;
    }
    eng_pd_ses *ps = &E->pd_ses[si];
    ps->rep[r->p] = rep;
    ps->seq[r->p] = seq;
    uint32_t other = 1 - r->p;
    if (ps->rep[other] == NONE)
        return;
    const eng_rep *o = &E->reps[ps->rep[other]];
    uint32_t oseq = ps->seq[other];
    if (oseq >= o->n_seq_state || oseq >= cz_server_n_seqs(o->srv))
        return;
    const cz_seq *oq = cz_server_seq(o->srv, oseq);
    if (oq->session != q->session)
        return; /* its sequence id went to another session */
    uint32_t ctx = q->tokens_in + q->generated, octx = oq->tokens_in + oq->generated;
    toks_copy(E, r, seq, o, oseq, q->computed, ctx < octx ? ctx : octx);
}

static void drv_turn_opened(void *ctx, uint32_t rep, uint32_t seq, uint64_t rec, uint32_t in,
                            uint32_t out)
{
    eng *E = ctx;
    (void)rec;
    (void)out;
    eng_rep *r = &E->reps[rep];
    if (!r->srv)
        return;
    ensure_seq_state(r, seq);
    /* the ids known past the context the turn found are another turn's: a sequence id a
     * closed session used, or the part of a context a live request cut off */
    const cz_seq *q = cz_server_seq(r->srv, seq);
    uint32_t before = q->tokens_in + q->generated - (q->turn_open ? in : 0); /* refused */
    if (r->toks[seq].valid > before)
        r->toks[seq].valid = before;
    if (E->cfg->pd && q->turn_open)
        pd_align(E, rep, seq);
}

static void drv_turn_end(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                         uint32_t out_tokens, double now)
{
    eng *E = ctx;
    E->obs.turn_end(E->obs.ctx, session, turn, outcome, out_tokens, now);
}

/* ---- completions ---- */

static void step_finished(eng *E, eng_step *st, double now)
{
    eng_rep *r = &E->reps[st->rep];
    if (st->ar) {
        for (uint32_t i = 0; i < st->b.n_samples; i++) {
            int32_t id = st->out_ids[i];
            if (id < 0 && E->bad.status == CZ_OK)
                cz_err_set(&E->bad, CZ_EFORMAT,
                           "engine: stage '%s' replica %u: the logits of sequence %u at "
                           "position %u hold NaN or +inf: the model's weights are not finite "
                           "or its activations overflow (a damaged checkpoint, or one for "
                           "another dtype)",
                           E->cfg->model.stages[r->card].name, st->rep, st->sample_seq[i],
                           st->sample_pos[i]);
            token_set(r, st->sample_seq[i], st->sample_pos[i], id < 0 ? 0 : id);
        }
        if (E->obs.sampled && E->bad.status == CZ_OK)
            E->obs.sampled(E->obs.ctx, st->rep, r->srv, st->sample_seq, st->out_ids,
                           st->b.n_samples, now);
        for (uint32_t i = 0; i < st->b.n_seqs; i++)
            cz_kvmap_set_inflight(r->map, st->row_seq[i], 0);
    }
    st->rec.kernel_s = st->kernel_s;
    st->rec.end_s = now;
    cz_metrics_add_step(E->m, &st->rec);
    r->busy = false;
    cz_deploy_step_done(E->d, st->rep, now);
    flush_xfers(E);
    /* after every step the physical pool holds exactly what the core counts */
    if (r->srv)
        cz_kvmap_sync(r->map, r->srv);
}

static void copy_finished(eng *E, eng_copy *c, double now)
{
    eng_rep *r = &E->reps[c->rep];
    if (c->pull) {
        /* a pull has no host chunks; the blocks it read are still its source's, as the
         * prefill replica's map names them: nothing wrote them while it ran */
        const eng_rep *sr = &E->reps[c->src_rep];
        uint32_t pos = c->first, sbt = sr->pool->block_tokens;
        for (uint32_t s = 0; s < c->n_segs; pos += c->segs[s++].cnt)
            CZ_ASSERT(cz_kvmap_block(sr->map, c->src_seq, pos / sbt) == c->segs[s].src_phys);
    } else {
        CZ_ASSERT(r->host[c->seq].pending > 0);
        r->host[c->seq].pending--;
    }
    uint32_t rep = c->rep, seq = c->seq;
    bool to_host = c->to_host;
    free(c);
    cz_deploy_xfer_done(E->d, rep, seq, to_host, now);
    flush_xfers(E);
}

/* ---- loading ---- */

/* One kernel context per device of the placement: on the CPU backend the threads split
 * evenly among them; on CUDA, GPU g of the placement is CUDA device g. */
static cz_status make_devices(eng *E, uint32_t threads_total, bool cuda, cz_err *err)
{
    const cz_config *cfg = E->cfg;
    E->n_devs = cfg->n_gpus;
    E->devs = cz_xcalloc(E->n_devs, sizeof *E->devs);
    uint32_t per = threads_total / E->n_devs;
    if (per == 0)
        per = 1;
    for (uint32_t g = 0; g < E->n_devs; g++) {
        pthread_cond_init(&E->devs[g].cv_work, NULL);
        pthread_cond_init(&E->devs[g].cv_copy, NULL);
    }
    int have = 0;
    if (cuda) {
        char why[CZ_ERR_MSG_MAX];
        have = cz_kcuda_device_count(why);
        if (have == 0)
            return cz_err_set(err, CZ_EDEVICE, "engine: backend 'cuda': %s", why);
        if ((int)E->n_devs > have)
            return cz_err_set(err, CZ_EDEVICE,
                              "engine: the placement uses %u GPUs (sim.n_gpus) but %d CUDA "
                              "device%s present",
                              E->n_devs, have, have == 1 ? " is" : "s are");
    }
    for (uint32_t g = 0; g < E->n_devs; g++) {
        eng_dev *D = &E->devs[g];
        cz_status st = cuda ? cz_kctx_cuda_create((int)g, 0, NULL, &D->k, err)
                            : cz_kctx_cpu_create(per, &D->k, err);
        if (st != CZ_OK)
            return st;
    }
    return CZ_OK;
}

/* A device failed (a CUDA call inside an op or a copy): the run stops with its error. */
static bool device_failed(eng *E, cz_err *err)
{
    for (uint32_t g = 0; g < E->n_devs; g++)
        if (cz_kctx_status(E->devs[g].k, err) != CZ_OK)
            return true;
    return false;
}

static cz_net *net_for(eng *E, uint32_t gpu, uint32_t card, cz_err *err, cz_status *st)
{
    for (uint32_t i = 0; i < E->n_nets; i++)
        if (E->nets[i].gpu == gpu && E->nets[i].card == card)
            return E->nets[i].net;
    const cz_config *cfg = E->cfg;
    const cz_stage_card *c = &cfg->model.stages[card];
    cz_net_source src = cz_engine_net_source(cfg, card);
    cz_net *n = NULL;
    *st = cz_net_create(E->devs[gpu].k, c, &src, &n, err);
    if (*st != CZ_OK) {
        cz_err_prefix(err, "engine: stage '%s': ", c->name);
        return NULL;
    }
    E->nets = cz_xrealloc(E->nets, E->n_nets + 1, sizeof *E->nets);
    E->nets[E->n_nets++] = (eng_netkey){gpu, card, n};
    return n;
}

static void alloc_step(eng_step *st, uint32_t tokens, uint32_t seqs, uint32_t samples)
{
    st->cap_tokens = tokens;
    st->cap_seqs = seqs;
    st->tokens = cz_xmalloc(tokens * sizeof *st->tokens);
    st->positions = cz_xmalloc(tokens * sizeof *st->positions);
    st->slots = cz_xmalloc(tokens * sizeof *st->slots);
    st->qsl = cz_xmalloc((seqs + 1) * sizeof *st->qsl);
    st->seq_lens = cz_xmalloc(seqs * sizeof *st->seq_lens);
    st->row_seq = cz_xmalloc(seqs * sizeof *st->row_seq);
    st->sample_rows = cz_xmalloc(samples * sizeof *st->sample_rows);
    st->sample_seq = cz_xmalloc(samples * sizeof *st->sample_seq);
    st->sample_pos = cz_xmalloc(samples * sizeof *st->sample_pos);
    st->out_ids = cz_xmalloc(samples * sizeof *st->out_ids);
    st->counter = cz_xmalloc(samples * sizeof *st->counter);
    st->rows = cz_xmalloc(samples * sizeof *st->rows);
}

/* The longest job an encoder or vocoder stage `p` can be given: a vocoder's chunk and the
 * context it re-reads; an encoder's fixed token count or the workload's longest input of
 * its modality. */
static uint64_t job_tokens_max(const eng *E, uint32_t p)
{
    const cz_pipe_stage *ps = &E->cfg->model.pipe[p];
    const cz_stage_card *c = &E->cfg->model.stages[ps->stage];
    if (c->kind == CZ_STAGE_VOCODER)
        return (uint64_t)ps->chunk_tokens + ps->overlap_tokens;
    if (ps->input_tokens)
        return ps->input_tokens;
    uint64_t most = 1;
    CZ_ASSERT(!E->wl->gen); /* the engine replays whole workloads */
    for (uint32_t i = 0; i < E->wl->n_turns; i++) {
        const cz_turn *t = &E->wl->turns[i];
        uint64_t n = ps->io == CZ_IO_IMAGE ? t->in_image_tokens : t->in_audio_tokens;
        if (n > most)
            most = n;
    }
    return most;
}

static cz_status load_replicas(eng *E, cz_err *err)
{
    const cz_config *cfg = E->cfg;
    E->n_reps = cz_deploy_replicas(E->d);
    E->reps = cz_xcalloc(E->n_reps, sizeof *E->reps);
    for (uint32_t ri = 0; ri < E->n_reps; ri++) {
        cz_deploy_replica dr = cz_deploy_replica_at(E->d, ri);
        eng_rep *r = &E->reps[ri];
        r->p = dr.p;
        r->id_p = cfg->pd ? CZ_PD_PREFILL : dr.p;
        r->gpu = dr.gpu;
        r->card = cfg->model.pipe[dr.p].stage;
        r->srv = dr.srv;
        r->step.node.kind = NODE_STEP;
        r->step.rep = ri;
        E->devs[dr.gpu].q_cap++;
        cz_status st = CZ_OK;
        r->net = net_for(E, dr.gpu, r->card, err, &st);
        if (!r->net)
            return st;
        const cz_stage_card *c = &cfg->model.stages[r->card];
        const cz_pipe_stage *ps = &cfg->model.pipe[dr.p];
        if (ps->inner >= 0 && !(r->inner = net_for(E, dr.gpu, (uint32_t)ps->inner, err, &st)))
            return st;
        if (!r->srv) {
            /* the largest step its queue can form: max_batch jobs of the longest job, within
             * max_tokens (whose default, unbounded in effect, must not size buffers) */
            uint64_t job = job_tokens_max(E, dr.p);
            uint64_t mb = cfg->place[dr.p].max_batch ? cfg->place[dr.p].max_batch : 64;
            uint64_t mt = mb * job;
            if (cfg->place[dr.p].max_tokens && cfg->place[dr.p].max_tokens < mt)
                mt = cfg->place[dr.p].max_tokens;
            uint64_t ds = c->kind == CZ_STAGE_ENCODER && c->arch.downsample ? c->arch.downsample
                                                                            : 1;
            cz_net_reserve(r->net, (uint32_t)(mt * ds + mb * ps->prompt_tokens), (uint32_t)mb,
                           (uint32_t)(job * ds + ps->prompt_tokens));
            continue;
        }
        const cz_server_config *sc = &cfg->place[dr.p].server;
        double bytes = (double)sc->kv_blocks * sc->block_tokens *
                       cz_stage_kv_bytes_per_token(c) / (c->kv_bytes ? c->kv_bytes : 2) *
                       (double)cz_dtype_size((cz_dtype)cfg->engine.kv_dtype);
        if (bytes > cfg->engine.max_kv_bytes)
            return cz_err_set(err, CZ_EINVAL,
                              "engine: stage '%s' replica %u: its KV pool of %u blocks needs "
                              "%.0f MiB, above engine.max_kv_bytes (%.0f MiB); set "
                              "server.kv_blocks, a smaller hardware card or "
                              "engine.max_kv_bytes",
                              c->name, ri, sc->kv_blocks, bytes / 1048576.0,
                              cfg->engine.max_kv_bytes / 1048576.0);
        uint32_t reserve = 0;
        if (sc->kv_window_tokens)
            reserve = sc->max_num_batched_tokens / sc->block_tokens + 2 * sc->max_num_seqs + 2;
        if ((st = cz_kv_pool_create(E->devs[dr.gpu].k, c, sc->kv_blocks + reserve,
                                    sc->block_tokens, (cz_dtype)cfg->engine.kv_dtype, &r->pool,
                                    err)) != CZ_OK)
            return cz_err_prefix(err, "engine: ");
        r->map = cz_kvmap_create(sc->kv_blocks, reserve, sc->block_tokens, sc->kv_sink_tokens,
                                 sc->kv_window_tokens);
        /* the longest context: max_model_len within what the pool holds */
        uint64_t pool_tok = (uint64_t)sc->kv_blocks * sc->block_tokens;
        uint32_t max_ctx = (uint32_t)(pool_tok < UINT32_MAX ? pool_tok : UINT32_MAX);
        if (sc->max_model_len && sc->max_model_len < max_ctx)
            max_ctx = sc->max_model_len;
        if (sc->kv_window_tokens && max_ctx > sc->kv_window_tokens + sc->kv_sink_tokens +
                                                  sc->max_num_batched_tokens)
            max_ctx = sc->kv_window_tokens + sc->kv_sink_tokens + sc->max_num_batched_tokens;
        uint32_t tokens = sc->max_num_batched_tokens, seqs = sc->max_num_seqs;
        cz_net_reserve(r->net, tokens, seqs, max_ctx);
        if (r->inner)
            cz_net_reserve(r->inner, seqs, seqs, ps->inner_steps + 1);
        alloc_step(&r->step, tokens, seqs, seqs);
    }
    for (uint32_t g = 0; g < E->n_devs; g++) {
        eng_dev *D = &E->devs[g];
        if (D->q_cap == 0)
            D->q_cap = 1;
        D->q = cz_xmalloc(D->q_cap * sizeof *D->q);
    }
    return CZ_OK;
}

/* Every replica's nets run before the clock starts (cz_net_warmup): the run's first steps
 * then time what its later ones do, as a profile's shapes do after their warm-up. */
static void warm_up(eng *E)
{
    for (uint32_t ri = 0; ri < E->n_reps; ri++) {
        eng_rep *r = &E->reps[ri];
        cz_kctx_bind(E->devs[r->gpu].k);
        cz_net_warmup(r->net, r->srv ? r->pool : NULL, CZ_NET_WARMUP_S);
        if (r->inner)
            cz_net_warmup(r->inner, NULL, CZ_NET_WARMUP_S / 4);
    }
}

/* The host link's model for the preload admission check: the rate of the device's own
 * host-tier copies (memcpy on the CPU, pinned memory over the bus on CUDA), best of three
 * 32 MiB copies each way. */
static double measure_copy_Bps(cz_kctx *k)
{
    size_t n = 32u << 20;
    uint8_t *h = cz_kmem_host_alloc(k, n), *d = cz_kmem_alloc(k, n);
    memset(h, 1, n);
    double best = INFINITY;
    for (int i = 0; i < 6; i++) {
        double t0 = cz_wall_s();
        if (i % 2)
            cz_kmem_copy_async(k, h, d, n, true);
        else
            cz_kmem_copy_async(k, d, h, n, false);
        cz_kmem_copy_wait(k);
        double t = cz_wall_s() - t0;
        if (t < best)
            best = t;
    }
    cz_kmem_free(k, d);
    cz_kmem_host_free(k, h);
    return best > 0 ? (double)n / best : 1e10;
}

static void stop_threads(eng *E)
{
    pthread_mutex_lock(&E->mu);
    E->quit = true;
    for (uint32_t g = 0; g < E->n_devs; g++) {
        pthread_cond_broadcast(&E->devs[g].cv_work);
        pthread_cond_broadcast(&E->devs[g].cv_copy);
    }
    pthread_mutex_unlock(&E->mu);
    for (uint32_t g = 0; g < E->n_devs; g++) {
        if (E->devs[g].started_worker)
            pthread_join(E->devs[g].worker, NULL);
        if (E->devs[g].started_copier)
            pthread_join(E->devs[g].copier, NULL);
        E->devs[g].started_worker = E->devs[g].started_copier = false;
    }
}

static void free_step(eng_step *st)
{
    free(st->tokens);
    free(st->positions);
    free(st->slots);
    free(st->qsl);
    free(st->seq_lens);
    free(st->row_seq);
    free(st->sample_rows);
    free(st->sample_seq);
    free(st->sample_pos);
    free(st->out_ids);
    free(st->counter);
    free(st->rows);
    free(st->block_table);
    free(st->lens);
}

static void eng_free(eng *E)
{
    stop_threads(E);
    /* copies never run (a cut run) */
    for (uint32_t g = 0; E->devs && g < E->n_devs; g++) {
        eng_copy *c = E->devs[g].c_head;
        while (c) {
            eng_copy *n = c->qnext;
            free(c);
            c = n;
        }
    }
    for (eng_node *n = E->done_head; n;) {
        eng_node *next = n->next;
        if (n->kind == NODE_COPY)
            free(n);
        n = next;
    }
    for (uint32_t ri = 0; E->reps && ri < E->n_reps; ri++) {
        eng_rep *r = &E->reps[ri];
        for (size_t i = 0; i < r->n_seq_state; i++) {
            free(r->toks[i].ids);
            for (uint32_t j = 0; j < r->host[i].cap; j++)
                if (r->host[i].chunk[j])
                    cz_kmem_host_free(E->devs[r->gpu].k, r->host[i].chunk[j]);
            free(r->host[i].chunk);
        }
        free(r->toks);
        free(r->host);
        free(r->pend);
        free_step(&r->step);
        cz_kvmap_free(r->map);
        cz_kv_pool_free(r->pool);
    }
    free(E->reps);
    free(E->pd_ses);
    for (uint32_t i = 0; i < E->n_nets; i++)
        cz_net_free(E->nets[i].net);
    free(E->nets);
    for (uint32_t g = 0; E->devs && g < E->n_devs; g++) {
        free(E->devs[g].q);
        if (E->devs[g].k)
            cz_kctx_free(E->devs[g].k);
        pthread_cond_destroy(&E->devs[g].cv_work);
        pthread_cond_destroy(&E->devs[g].cv_copy);
    }
    free(E->devs);
    cz_evq_free(&E->timers);
    cz_deploy_free(E->d);
    pthread_cond_destroy(&E->cv_main);
    pthread_mutex_destroy(&E->mu);
}

static cz_status start_threads(eng *E, cz_err *err)
{
    for (uint32_t g = 0; g < E->n_devs; g++) {
        eng_dev *D = &E->devs[g];
        dev_arg *a = cz_xmalloc(sizeof *a), *b = cz_xmalloc(sizeof *b);
        *a = (dev_arg){E, g};
        *b = (dev_arg){E, g};
        if (pthread_create(&D->worker, NULL, worker_main, a) != 0) {
            free(a);
            free(b);
            return cz_err_set(err, CZ_ENOMEM, "engine: cannot start device %u's thread", g);
        }
        D->started_worker = true;
        if (pthread_create(&D->copier, NULL, copier_main, b) != 0) {
            free(b);
            return cz_err_set(err, CZ_ENOMEM, "engine: cannot start device %u's copy thread",
                              g);
        }
        D->started_copier = true;
    }
    return CZ_OK;
}

/* ---- the run ---- */

cz_net_source cz_engine_net_source(const cz_config *cfg, uint32_t card)
{
    CZ_ASSERT(card < cfg->model.n_stages);
    cz_net_source src = {
        .checkpoint = NULL,
        .seed = cfg->seed * 1000003u + card,
        .dtype = (cz_dtype)cfg->engine.dtype,
    };
    int32_t first_ar = -1;
    for (uint32_t p = 0; p < cfg->model.n_pipe && first_ar < 0; p++)
        if (cfg->model.stages[cfg->model.pipe[p].stage].kind == CZ_STAGE_AR)
            first_ar = (int32_t)cfg->model.pipe[p].stage;
    if (strcmp(cfg->engine.weights, "random") != 0 && (int32_t)card == first_ar) {
        src.checkpoint = cfg->engine.weights;
        src.named_by = "engine.weights";
    }
    return src;
}

static uint32_t total_threads(const cz_config *cfg, const cz_engine_opts *opts)
{
    uint32_t threads = opts && opts->threads ? opts->threads : cfg->engine.threads;
    return threads ? threads : cz_kctx_cpu_default_threads();
}

uint32_t cz_engine_device_threads(const cz_config *cfg, const cz_engine_opts *opts)
{
    uint32_t threads = total_threads(cfg, opts);
    if (cfg->cross_stage || cfg->n_gpus <= 1)
        return threads;
    uint32_t per = threads / cfg->n_gpus;
    return per ? per : 1;
}

static cz_status backend_of(const cz_engine_opts *opts, bool *cuda, cz_err *err)
{
    const char *backend = opts && opts->backend ? opts->backend : "cpu";
    *cuda = strcmp(backend, "cuda") == 0;
    if (!*cuda && strcmp(backend, "cpu") != 0)
        return cz_err_set(err, CZ_EINVAL, "engine: unknown backend '%s' (expected \"cpu\" or "
                          "\"cuda\")", backend);
    return CZ_OK;
}

cz_status cz_engine_open(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                         const cz_engine_opts *opts, const cz_engine_observer *obs,
                         cz_engine **out, cz_err *err)
{
    *out = NULL;
    bool cuda;
    cz_status st = backend_of(opts, &cuda, err);
    if (st != CZ_OK)
        return st;
    if (cfg->cross_stage)
        return cz_err_set(err, CZ_EINVAL, "engine: a cross-stage scheduler runs whole "
                          "workloads only (cadenza replay)");
    /* the decode pool's pull copies KV between two replicas' pools (run_pull): memcpy on
     * the CPU backend; the CUDA backend has no copy between two contexts' memory yet */
    if (cfg->pd && cuda)
        return cz_err_set(err, CZ_EINVAL, "engine: field 'disaggregation': backend 'cuda' "
                          "cannot copy KV from a prefill replica's pool to a decode "
                          "replica's yet; run it with --backend cpu, or in `cadenza sim`");
    /* the block map gives each sequence blocks of its own (engine/cz_kvmap.h); the core's
     * shared prefix blocks would have no physical twin, so the engine refuses them rather
     * than run KV that diverges from the core's accounting */
    for (uint32_t p = 0; p < cfg->model.n_pipe; p++)
        if (cfg->place[p].server.prefix_caching)
            return cz_err_set(err, CZ_EINVAL,
                              "engine: server.prefix_caching: the engine's KV block map "
                              "(engine/cz_kvmap.h) gives every sequence blocks of its own and "
                              "cannot share the prefix blocks automatic prefix caching "
                              "shares; run it in the simulator (cadenza sim) or set "
                              "server.prefix_caching to false");
    eng *E = cz_xcalloc(1, sizeof *E);
    E->cfg = cfg;
    E->wl = wl;
    E->m = m;
    E->cuda = cuda;
    if (obs)
        E->obs = *obs;
    pthread_mutex_init(&E->mu, NULL);
    cz_wall_cond_init(&E->cv_main); /* timed waits on the run's clock */
    cz_evq_init(&E->timers, (size_t)wl->n_sessions + wl->n_streams + 16);
    E->sampling = (cz_sampling){.temperature = (float)cfg->engine.temperature,
                                .top_k = cfg->engine.top_k,
                                .top_p = (float)cfg->engine.top_p,
                                .seed = cfg->seed};
    cz_driver drv = {
        .ctx = E,
        .step = drv_step,
        .launched = drv_launched,
        .xfer = drv_xfer,
        .pull = drv_pull,
        .xfer_eta = drv_xfer_eta,
        .timer = drv_timer,
        .turn_opened = drv_turn_opened,
        .turn_end = E->obs.turn_end ? drv_turn_end : NULL,
    };
    st = cz_deploy_create(cfg, wl, m, &drv, &E->d, err);
    if (st == CZ_OK)
        st = make_devices(E, total_threads(cfg, opts), cuda, err);
    if (st == CZ_OK)
        st = load_replicas(E, err);
    if (st == CZ_OK) {
        for (uint32_t g = 0; g < E->n_devs; g++)
            cz_link_init(&E->devs[g].link, measure_copy_Bps(E->devs[g].k), 5e-6, true);
        warm_up(E);
        if (device_failed(E, err))
            st = err->status;
        else
            st = start_threads(E, err);
    }
    if (st != CZ_OK) {
        eng_free(E);
        free(E);
        return st;
    }
    /* a stall: a thousand events and ten minutes of the clock with work open, none of them
     * an arrival, a turn's or frame's end or a completed step */
    cz_watchdog_init(&E->dog, 1000, 600.0);
    clock_gettime(CLOCK_MONOTONIC, &E->t0);
    cz_deploy_start(E->d);
    flush_xfers(E);
    *out = E;
    return CZ_OK;
}

cz_deploy *cz_engine_deploy(cz_engine *E)
{
    return E->d;
}

double cz_engine_clock(const cz_engine *E)
{
    return clock_s(E);
}

cz_engine_state cz_engine_advance(cz_engine *E)
{
    const cz_config *cfg = E->cfg;
    flush_xfers(E); /* what the driver's calls into the runtime asked for */
    if (E->events != E->watched) {
        E->watched = E->events;
        if (cz_watchdog_stalled(&E->dog, E->now, cz_deploy_progress(E->d),
                                cz_deploy_busy(E->d))) {
            cz_deploy_stalled(E->d);
            return CZ_ENGINE_STALLED;
        }
    }
    /* completions first, in the order the devices reported them */
    pthread_mutex_lock(&E->mu);
    eng_node *n = E->done_head;
    if (n) {
        E->done_head = n->next;
        if (!E->done_head)
            E->done_tail = NULL;
        if (n->kind == NODE_STEP)
            E->steps_inflight--;
        else
            E->copies_inflight--;
    }
    pthread_mutex_unlock(&E->mu);
    if (n) {
        double now = clock_s(E);
        if (now < E->now)
            now = E->now;
        E->now = now;
        cz_engine_state how = CZ_ENGINE_RAN;
        if (now > cfg->max_time_s)
            how = CZ_ENGINE_CUT;
        else if (device_failed(E, &E->fail))
            how = CZ_ENGINE_FAILED;
        if (how != CZ_ENGINE_RAN) {
            if (n->kind == NODE_COPY)
                free(n);
            return how;
        }
        E->events++;
        if (n->kind == NODE_STEP)
            step_finished(E, (eng_step *)n, now);
        else
            copy_finished(E, (eng_copy *)n, now);
        if (E->bad.status != CZ_OK) {
            E->fail = E->bad;
            return CZ_ENGINE_FAILED;
        }
        return CZ_ENGINE_RAN;
    }
    /* timers that are due */
    const cz_event *top = cz_evq_peek(&E->timers);
    double now = clock_s(E);
    if (now < E->now)
        now = E->now;
    if (top && top->t_s <= now) {
        E->now = now;
        if (top->t_s > cfg->max_time_s)
            return CZ_ENGINE_CUT;
        cz_event ev;
        cz_evq_pop(&E->timers, &ev);
        E->events++;
        cz_deploy_timer(E->d, now, ev.type, ev.arg, ev.arg2);
        flush_xfers(E);
        return CZ_ENGINE_RAN;
    }
    if (now > cfg->max_time_s) {
        E->now = now;
        return CZ_ENGINE_CUT;
    }
    pthread_mutex_lock(&E->mu);
    bool idle = !top && E->steps_inflight == 0 && E->copies_inflight == 0 && !E->done_head;
    pthread_mutex_unlock(&E->mu);
    return idle ? CZ_ENGINE_DRAINED : CZ_ENGINE_IDLE;
}

void cz_engine_wait(cz_engine *E, double until_s)
{
    flush_xfers(E);
    const cz_event *top = cz_evq_peek(&E->timers);
    double until = fmin(top ? top->t_s : INFINITY, until_s);
    until = fmin(until, E->cfg->max_time_s + 1e-3);
    pthread_mutex_lock(&E->mu);
    if (!E->done_head && !E->kicked)
        cz_wall_wait_until(&E->cv_main, &E->mu, &E->t0, until);
    E->kicked = false;
    pthread_mutex_unlock(&E->mu);
}

void cz_engine_kick(cz_engine *E)
{
    pthread_mutex_lock(&E->mu);
    E->kicked = true;
    pthread_cond_signal(&E->cv_main);
    pthread_mutex_unlock(&E->mu);
}

/* The run's accounting, the engine still whole (its progress line reads the runtime). */
static cz_status finish_run(eng *E, cz_engine_state how, cz_run_stats *stats, cz_err *err)
{
    CZ_ASSERT(how != CZ_ENGINE_RAN && how != CZ_ENGINE_IDLE);
    memset(stats, 0, sizeof *stats);
    stop_threads(E);
    if (how == CZ_ENGINE_FAILED) {
        *err = E->fail; /* the device's failure, or non-finite logits */
        return err->status;
    }
    double now = E->now;
    cz_status st = cz_deploy_finish(E->d, how == CZ_ENGINE_CUT, now, stats, err);
    if (how == CZ_ENGINE_STALLED && st == CZ_EINTERNAL)
        cz_watchdog_report(&E->dog, now, "wall-clock", err);
    stats->events = E->events;
    stats->sim_time_s = now;
    return st;
}

static cz_status close_run(eng *E, cz_status st, cz_err *err)
{
    bool failed = E->fail.status != CZ_OK && st == E->fail.status;
    cz_metrics *m = E->m;
    eng_free(E);
    free(E);
    if (failed)
        return st;
    cz_metrics_finish(m);
    if (st == CZ_OK)
        st = cz_metrics_check(m, err);
    return st;
}

cz_status cz_engine_close(cz_engine *E, cz_engine_state how, cz_run_stats *stats,
                          cz_err *err)
{
    cz_status st = finish_run(E, how, stats, err);
    return close_run(E, st, err);
}

cz_status cz_engine_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                        const cz_engine_opts *opts, cz_run_stats *stats, bool *partial,
                        cz_run_progress_fn progress, void *progress_ctx, cz_err *err)
{
    memset(stats, 0, sizeof *stats);
    *partial = false;
    if (cfg->cross_stage) {
        bool cuda;
        cz_status st = backend_of(opts, &cuda, err);
        if (st != CZ_OK)
            return st;
        return cz__engine_xs_run(cfg, wl, m, opts, cuda, total_threads(cfg, opts), stats,
                                 partial, progress, progress_ctx, err);
    }
    cz_engine *E;
    cz_status st = cz_engine_open(cfg, wl, m, opts, NULL, &E, err);
    if (st != CZ_OK)
        return st;
    double last_progress = 0.0;
    uint64_t arrived, finished;
    cz_engine_state how;
    for (;;) {
        if (opts && opts->stop && *opts->stop) {
            *partial = true;
            E->now = fmax(E->now, clock_s(E));
            how = CZ_ENGINE_CUT;
            break;
        }
        how = cz_engine_advance(E);
        if (how == CZ_ENGINE_RAN)
            continue;
        if (how != CZ_ENGINE_IDLE)
            break;
        double now = clock_s(E);
        if (progress && now - last_progress >= 0.5) {
            last_progress = now;
            cz_deploy_counts(E->d, &arrived, &finished);
            cz_run_progress pr = {now, E->events, arrived, finished, wl->n_turns, false};
            progress(progress_ctx, &pr);
        }
        /* nothing due: wait for a completion, the next timer or the next progress line */
        cz_engine_wait(E, now + 0.05);
    }
    st = finish_run(E, how, stats, err);
    if (progress && how != CZ_ENGINE_FAILED) {
        cz_deploy_counts(E->d, &arrived, &finished);
        cz_run_progress pr = {stats->sim_time_s, stats->events, arrived, finished,
                              wl->n_turns, true};
        progress(progress_ctx, &pr);
    }
    return close_run(E, st, err);
}
