/* cz_xstage.c - the cross-stage runtime (cz_xstage.h): Nova's three workers on one GPU
 * (Nova, section III-D) and its baselines, their queues, SM partitions
 * and predicted step times, driven by a driver's time and execution (docs/pipeline.md,
 * "Cross-stage execution"). Step times come from the roofline (cz_cost_step) scaled by the
 * share (cz_cost_share_s), through cz_config_stage_share_s. */
#include "cz_xstage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_deploy.h"

typedef struct xs_req {
    uint32_t g;          /* global turn index */
    uint32_t in, out;    /* LLM input tokens, output tokens */
    uint32_t image;      /* vision encoder input tokens (0: no vision step) */
    uint32_t prefilled;  /* input tokens prefilled so far */
    uint32_t gen;        /* tokens generated */
    uint64_t rec;        /* its request record (UINT64_MAX before it arrives) */
    double last_tok_s;
    double service_s;    /* its vision step and whole prefill step, summed: the time it
                            holds the exclusive worker (Table V's processing time) */
    bool ended;          /* its outcome is recorded */
} xs_req;

/* A FIFO of request indices; every request enters each queue at most once. */
typedef struct xs_fifo {
    uint32_t *v;
    uint32_t head, tail;
} xs_fifo;

struct cz_xstage {
    const cz_config *cfg;
    const cz_workload *wl;
    cz_metrics *m;
    cz_run_stats *st;
    cz_xs_driver drv;
    uint32_t llm;         /* pipeline index of the LLM stage */
    xs_req *r;            /* by global turn index */
    uint32_t *order;      /* requests by arrival time */
    uint32_t *ses_of;     /* session of each turn */
    uint32_t n, next_arrival;
    double first_arrival_s, last_arrival_s;
    xs_fifo vision, prefill;
    uint32_t *ready;      /* decode-ready requests, in the order they became ready */
    uint32_t n_ready;
    uint32_t *batch;      /* the decode (or hybrid) step in flight: its decoding requests */
    uint32_t n_batch;
    uint32_t *hyb;        /* chunked: the hybrid step's prefill members and their chunks */
    uint32_t *hyb_tok;
    uint32_t n_hyb;
    cz_xs_work excl, last_excl;
    uint32_t excl_req;    /* the vision or prefill step's request */
    bool decoding;
    uint64_t kv_cap, kv_used; /* LLM KV tokens */
    uint32_t in_stages;   /* requests arrived and not yet through prefill */
    /* vision-encoder weight offload (section III-E) */
    uint32_t vis_layers;  /* L: layers of every encoder, in order */
    double *layer_bytes;  /* weights of each logical layer */
    double *load_done;    /* this encode: when each layer's weights land */
    double *wrap_ready;   /* the next encode's first K layers: when they land */
    double link_free;     /* the host link's copy stream is busy until then */
    uint64_t finished;
    double tl_next_s;
};

static uint32_t fifo_len(const xs_fifo *f) { return f->tail - f->head; }
static uint32_t fifo_front(const xs_fifo *f) { return f->v[f->head]; }

static bool prefill_fits(const cz_xstage *S, uint32_t i)
{
    const xs_req *q = &S->r[i];
    return q->prefilled > 0 || S->kv_used + q->in + q->out <= S->kv_cap;
}

/* Requests in the vision or prefill stages: Nova's "pending" count (section III-C2). */
static uint32_t pending(const cz_xstage *S) { return S->in_stages; }

static void timeline(cz_xstage *S, double now, uint32_t tokens)
{
    if (now < S->tl_next_s)
        return;
    uint32_t bt = S->cfg->place[S->llm].server.block_tokens;
    cz_timeline_row row = {
        .t_s = now,
        .kv_blocks_used = (uint32_t)((S->kv_used + bt - 1) / bt),
        .running = S->n_ready + S->n_batch + (S->excl == CZ_XS_PREFILL ? 1 : 0),
        .waiting = fifo_len(&S->vision) + fifo_len(&S->prefill),
        .batch_tokens = tokens,
    };
    cz_metrics_timeline(S->m, &row);
    S->tl_next_s = now + S->m->timeline_interval_s;
}

/* Request i ends in `outcome` (recorded once per request of the workload). */
static void xs_outcome(cz_xstage *S, uint32_t i, uint32_t outcome, double now)
{
    xs_req *q = &S->r[i];
    CZ_ASSERT(!q->ended);
    q->ended = true;
    uint32_t si = S->ses_of[q->g];
    cz_turn_record t = {.session = si,
                        .req = q->rec,
                        .end_s = now,
                        .turn = q->g - S->wl->sessions[si].turn_off,
                        .cls = (uint32_t)S->wl->sessions[si].cls,
                        .outcome = outcome};
    cz_metrics_add_turn(S->m, &t);
    if (q->rec != UINT64_MAX)
        cz_metrics_release(S->m, q->rec); /* its last change was this outcome */
}

static void token(cz_xstage *S, uint32_t i, double now)
{
    xs_req *q = &S->r[i];
    cz_req_record *rec = cz_metrics_req(S->m, q->rec);
    if (q->gen == 0)
        rec->first_token_s = now;
    else
        cz_metrics_add_itl(S->m, 0, now - q->last_tok_s, 1);
    cz_metrics_add_tokens(S->m, now, 1);
    q->gen++;
    q->last_tok_s = now;
    if (q->gen == q->out) {
        rec->output_tokens = q->gen;
        rec->heard_tokens = q->gen;
        rec->finish_s = now;
        rec->outcome = CZ_REQ_COMPLETED;
        S->kv_used -= q->in + q->out;
        if (S->drv.released)
            S->drv.released(S->drv.ctx, i);
        S->finished++;
        xs_outcome(S, i, CZ_REQ_COMPLETED, now);
    } else {
        S->ready[S->n_ready++] = i;
    }
}

static void first_sched(cz_xstage *S, uint32_t i, double now)
{
    cz_req_record *rec = cz_metrics_req(S->m, S->r[i].rec);
    if (isnan(rec->first_sched_s))
        rec->first_sched_s = now;
}

/* One vision encode of `image` tokens started at `now` on `share` of the SMs, its compute
 * stretched by `factor`: the encoders run one after another, layer by layer. With K
 * resident layers (section III-E) each physical layer, once its layer has run, loads the
 * weights of the logical layer K ahead (Eq. 7: (j + K) mod L, wrapping into the next
 * encode) over the host link, one copy at a time; a layer whose weights have not landed
 * waits (the condition of Eq. 8 fails). Returns the encode's duration. */
static double vision_pass(cz_xstage *S, uint32_t image, double share, double factor, double now)
{
    const cz_model_card *mc = &S->cfg->model;
    uint32_t K = S->cfg->xs.vision_resident_layers, L = S->vis_layers, l = 0;
    double t = now, stall = 0.0;
    for (uint32_t p = 0; p < S->llm; p++) {
        const cz_stage_card *card = &mc->stages[mc->pipe[p].stage];
        uint32_t fixed = mc->pipe[p].input_tokens;
        cz_batch_shape b = cz_prefill_shape(0, fixed ? fixed : image);
        double stage_s = cz_config_stage_share_s(S->cfg, p, &b, share) * factor;
        if (K == 0 || K >= L) {
            t += stage_s;
            continue;
        }
        double layer_s = stage_s / card->layers;
        for (uint32_t k = 0; k < card->layers; k++, l++) {
            double ready = l < K ? S->wrap_ready[l] : S->load_done[l];
            if (ready > t) {
                stall += ready - t;
                t = ready;
            }
            t += layer_s;
            /* its physical layer now loads logical layer l + K */
            uint32_t j = l + K;
            double start = t > S->link_free ? t : S->link_free;
            S->link_free = start + S->layer_bytes[j % L] / S->cfg->hw.host_link_Bps;
            if (j < L)
                S->load_done[j] = S->link_free;
            else
                S->wrap_ready[j - L] = S->link_free;
        }
    }
    S->st->vision_step_sum_s += t - now;
    S->st->vision_stall_sum_s += stall;
    return t - now;
}

static uint32_t share_sms(const cz_xstage *S, double share)
{
    return (uint32_t)lround(share * S->cfg->hw.sms);
}

/* Starts work `w` on the exclusive worker at `now` and hands the step to the driver. */
static void start_excl(cz_xstage *S, cz_xs_work w, double now)
{
    const cz_xs_policy *xs = &S->cfg->xs;
    cz_run_stats *st = S->st;
    bool others_decode = S->n_ready + S->n_batch > 0;
    double share = 1.0, factor = 1.0;
    if (xs->kind == CZ_XS_NOVA && others_decode && w != CZ_XS_HYBRID) {
        if (xs->multi_stream) {
            factor = 1.0 / xs->ms_excl_speed;
        } else {
            share = 1.0 - cz_xs_decode_share(xs, w, pending(S), S->cfg->hw.sms);
            factor = xs->corun_slowdown;
        }
    }
    cz_xs_step step = {.work = w, .share = share, .factor = factor, .req = UINT32_MAX};
    double dur = 0.0;
    uint32_t tokens = 0;
    if (w == CZ_XS_VISION) {
        uint32_t i = S->vision.v[S->vision.head++];
        S->excl_req = i;
        st->vision_starts++;
        st->vision_wait_sum_s += now - cz_metrics_req(S->m, S->r[i].rec)->arrival_s;
        dur = vision_pass(S, S->r[i].image, share, factor, now);
        S->r[i].service_s = dur;
        tokens = S->r[i].image;
        step.req = i;
    } else if (w == CZ_XS_PREFILL) {
        uint32_t i = S->prefill.v[S->prefill.head++];
        xs_req *q = &S->r[i];
        S->excl_req = i;
        first_sched(S, i, now);
        S->kv_used += q->in + q->out;
        cz_batch_shape b = cz_prefill_shape(0, q->in);
        dur = cz_config_stage_share_s(S->cfg, S->llm, &b, share) * factor;
        q->service_s += dur;
        tokens = q->in;
        step.req = i;
    } else {
        /* chunked: every ready decode, then prefill chunks in FIFO order, under the budget */
        CZ_ASSERT(w == CZ_XS_HYBRID);
        CZ_ASSERT(!S->decoding);
        uint32_t budget = S->cfg->xs.token_budget;
        cz_batch_shape b = {0};
        S->n_batch = 0;
        for (uint32_t k = 0; k < S->n_ready && budget > 0; k++, budget--) {
            uint32_t i = S->ready[k];
            S->batch[S->n_batch++] = i;
            b.decode_seqs++;
            b.decode_ctx_tokens += S->r[i].in + S->r[i].gen;
        }
        memmove(S->ready, S->ready + S->n_batch, (S->n_ready - S->n_batch) * sizeof *S->ready);
        S->n_ready -= S->n_batch;
        S->n_hyb = 0;
        for (uint32_t h = S->prefill.head; h < S->prefill.tail && budget > 0; h++) {
            uint32_t i = S->prefill.v[h];
            xs_req *q = &S->r[i];
            if (!prefill_fits(S, i))
                break;
            if (q->prefilled == 0) {
                S->kv_used += q->in + q->out;
                first_sched(S, i, now);
            }
            uint32_t chunk = q->in - q->prefilled < budget ? q->in - q->prefilled : budget;
            cz_batch_shape c = cz_prefill_shape(q->prefilled, chunk);
            b.prefill_tokens += c.prefill_tokens;
            b.prefill_attn_ctx += c.prefill_attn_ctx;
            b.prefill_seqs++;
            S->hyb[S->n_hyb] = i;
            S->hyb_tok[S->n_hyb++] = chunk;
            budget -= chunk;
        }
        dur = cz_config_stage_share_s(S->cfg, S->llm, &b, 1.0);
        tokens = S->cfg->xs.token_budget - budget;
        if (S->n_batch) {
            st->decode_steps++;
            st->decode_seq_steps += S->n_batch;
            st->decode_share_sum += 1.0;
        }
        step.reqs = S->batch;
        step.n_reqs = S->n_batch;
        step.chunk_reqs = S->hyb;
        step.chunk_tokens = S->hyb_tok;
        step.n_chunks = S->n_hyb;
    }
    S->excl = S->last_excl = w;
    S->m->steps++;
    timeline(S, now, tokens);
    step.sms = share_sms(S, share);
    step.predicted_s = dur;
    step.tokens = tokens;
    S->drv.start(S->drv.ctx, &step, now);
}

/* Starts a decode step of every ready request at `now` and hands it to the driver. */
static void start_decode(cz_xstage *S, double now)
{
    const cz_xs_policy *xs = &S->cfg->xs;
    cz_run_stats *st = S->st;
    double share = 1.0, factor = 1.0;
    if (xs->kind == CZ_XS_NOVA && xs->multi_stream) {
        if (S->excl != CZ_XS_IDLE)
            factor = 1.0 / xs->ms_decode_speed;
    } else if (xs->kind == CZ_XS_NOVA && pending(S) > 0) {
        cz_xs_work beside = S->excl == CZ_XS_PREFILL ? CZ_XS_PREFILL : CZ_XS_VISION;
        share = cz_xs_decode_share(xs, beside, pending(S), S->cfg->hw.sms);
        factor = xs->corun_slowdown;
    }
    CZ_ASSERT(S->excl != CZ_XS_HYBRID);
    cz_batch_shape b = {0};
    for (uint32_t k = 0; k < S->n_ready; k++) {
        uint32_t i = S->ready[k];
        S->batch[k] = i;
        b.decode_seqs++;
        b.decode_ctx_tokens += S->r[i].in + S->r[i].gen;
    }
    S->n_batch = S->n_ready;
    S->n_ready = 0;
    S->decoding = true;
    st->decode_steps++;
    st->decode_seq_steps += S->n_batch;
    st->decode_share_sum += share;
    S->m->steps++;
    timeline(S, now, b.decode_seqs);
    double dur = cz_config_stage_share_s(S->cfg, S->llm, &b, share) * factor;
    cz_xs_step step = {.work = CZ_XS_DECODE,
                       .share = share,
                       .sms = share_sms(S, share),
                       .factor = factor,
                       .predicted_s = dur,
                       .tokens = S->n_batch,
                       .req = UINT32_MAX,
                       .reqs = S->batch,
                       .n_reqs = S->n_batch};
    S->drv.start(S->drv.ctx, &step, now);
}

/* Starts what the scheduler decides until it decides nothing. */
static void decide(cz_xstage *S, double now)
{
    for (;;) {
        uint32_t pw = fifo_len(&S->prefill);
        if (pw > 0 && !prefill_fits(S, fifo_front(&S->prefill)))
            pw = 0; /* its KV does not fit yet: it waits */
        cz_xs_view v = {
            .vision_waiting = fifo_len(&S->vision),
            .prefill_waiting = pw,
            .decode_ready = S->n_ready,
            .excl = S->excl,
            .decoding = S->decoding,
            .last_excl = S->last_excl,
        };
        if (S->cfg->xs.kind == CZ_XS_CHUNKED && pw > 0 && S->r[fifo_front(&S->prefill)].prefilled)
            v.prefilling = 1;
        cz_xs_decision d;
        cz_xs_decide(&S->cfg->xs, &v, &d);
        if (d.excl == CZ_XS_IDLE && !d.decode)
            return;
        CZ_ASSERT(d.excl == CZ_XS_IDLE || S->excl == CZ_XS_IDLE);
        CZ_ASSERT(!d.decode || (!S->decoding && S->n_ready > 0));
        /* a decode decided beside a step that starts now sees that step */
        if (d.excl != CZ_XS_IDLE)
            start_excl(S, d.excl, now);
        if (d.decode)
            start_decode(S, now);
    }
}

void cz_xstage_excl_done(cz_xstage *S, double now)
{
    cz_xs_work w = S->excl;
    CZ_ASSERT(w != CZ_XS_IDLE);
    S->excl = CZ_XS_IDLE;
    if (w == CZ_XS_VISION) {
        uint32_t i = S->excl_req;
        S->prefill.v[S->prefill.tail++] = i;
    } else if (w == CZ_XS_PREFILL) {
        uint32_t i = S->excl_req;
        S->r[i].prefilled = S->r[i].in;
        S->in_stages--;
        S->st->service_n++;
        S->st->service_sum_s += S->r[i].service_s;
        S->st->service_sq_sum_s2 += S->r[i].service_s * S->r[i].service_s;
        token(S, i, now); /* the prefill samples the first token */
    } else {
        for (uint32_t k = 0; k < S->n_batch; k++)
            token(S, S->batch[k], now);
        S->n_batch = 0;
        for (uint32_t h = 0; h < S->n_hyb; h++) {
            uint32_t i = S->hyb[h];
            xs_req *q = &S->r[i];
            q->prefilled += S->hyb_tok[h];
            if (q->prefilled == q->in) {
                /* prefill chunks are taken from the front in order: this is the front */
                CZ_ASSERT(fifo_front(&S->prefill) == i);
                S->prefill.head++;
                S->in_stages--;
                token(S, i, now);
            }
        }
        S->n_hyb = 0;
    }
    decide(S, now);
}

void cz_xstage_decode_done(cz_xstage *S, double now)
{
    CZ_ASSERT(S->decoding);
    S->decoding = false;
    for (uint32_t k = 0; k < S->n_batch; k++)
        token(S, S->batch[k], now);
    S->n_batch = 0;
    decide(S, now);
}

void cz_xstage_arrival(cz_xstage *S, double now)
{
    CZ_ASSERT(S->next_arrival < S->n);
    uint32_t i = S->order[S->next_arrival++];
    xs_req *q = &S->r[i];
    const cz_turn *t = &S->wl->turns[q->g];
    uint32_t si = S->ses_of[q->g];
    cz_req_record rec = {
        .session = si,
        .turn = q->g - S->wl->sessions[si].turn_off,
        .cls = (uint32_t)S->wl->sessions[si].cls,
        .input_tokens = q->in,
        .arrival_s = t->arrival_s,
        .first_sched_s = NAN,
        .first_token_s = NAN,
        .finish_s = NAN,
    };
    q->rec = cz_metrics_add_request(S->m, &rec);
    if (S->next_arrival == 1)
        S->first_arrival_s = t->arrival_s;
    S->last_arrival_s = t->arrival_s;
    S->in_stages++;
    if (q->in + q->out > S->kv_cap) {
        cz_metrics_req(S->m, q->rec)->outcome = CZ_REQ_REJECTED;
        S->in_stages--;
        xs_outcome(S, i, CZ_REQ_REJECTED, now);
    } else if (q->image > 0) {
        S->vision.v[S->vision.tail++] = i;
    } else {
        S->prefill.v[S->prefill.tail++] = i;
    }
    if (S->next_arrival < S->n)
        S->drv.timer(S->drv.ctx, S->wl->turns[S->r[S->order[S->next_arrival]].g].arrival_s);
    decide(S, now);
}

void cz_xstage_start(cz_xstage *S)
{
    if (S->n > 0)
        S->drv.timer(S->drv.ctx, S->wl->turns[S->r[S->order[0]].g].arrival_s);
}

/* The encoders' weights: their repeated layers, and what lies outside them (position
 * tables, patch embedding, adapters: the card's nonlayer_params). Section III-E and Table
 * VI: with K resident layers, K physical layers (each sized for the largest layer) and the
 * weights outside the layers stay on the GPU; the rest goes to the LLM's KV pool. */
static void plan_vision_weights(cz_xstage *S)
{
    const cz_config *cfg = S->cfg;
    double vis_bytes = 0.0, nonlayer_bytes = 0.0, slot_bytes = 0.0;
    for (uint32_t p = 0; p < S->llm; p++) {
        const cz_stage_card *card = &cfg->model.stages[cfg->model.pipe[p].stage];
        S->vis_layers += card->layers;
        vis_bytes += cz_stage_weight_bytes(card);
        nonlayer_bytes += cz_stage_nonlayer_weight_bytes(card);
        if (cz_stage_layer_weight_bytes(card) > slot_bytes)
            slot_bytes = cz_stage_layer_weight_bytes(card);
    }
    size_t nl = S->vis_layers ? S->vis_layers : 1;
    S->layer_bytes = cz_xmalloc(nl * sizeof *S->layer_bytes);
    S->load_done = cz_xcalloc(nl, sizeof *S->load_done);
    S->wrap_ready = cz_xcalloc(nl, sizeof *S->wrap_ready);
    for (uint32_t p = 0, l = 0; p < S->llm; p++) {
        const cz_stage_card *card = &cfg->model.stages[cfg->model.pipe[p].stage];
        for (uint32_t k = 0; k < card->layers; k++)
            S->layer_bytes[l++] = cz_stage_layer_weight_bytes(card);
    }
    uint32_t K = cfg->xs.vision_resident_layers;
    if (K > 0 && K < S->vis_layers) {
        double resident = nonlayer_bytes + K * slot_bytes;
        double saved = vis_bytes > resident ? vis_bytes - resident : 0.0;
        double per_token = cz_stage_kv_bytes_per_token(
            &cfg->model.stages[cfg->model.pipe[S->llm].stage]);
        S->kv_cap += (uint64_t)(saved / per_token);
        vis_bytes -= saved;
    }
    S->st->vision_resident_bytes = vis_bytes;
}

cz_status cz_xstage_create(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                           cz_run_stats *stats, const cz_xs_driver *drv, cz_xstage **out,
                           cz_err *err)
{
    *out = NULL;
    CZ_ASSERT(cfg->cross_stage);
    CZ_ASSERT(drv->start && drv->timer);
    if (wl->n_streams > 0 || wl->concurrency > 0)
        return cz_err_set(err, CZ_EINVAL,
                          "scheduler '%s' serves open-loop requests: the workload has %s",
                          cfg->scheduler,
                          wl->n_streams ? "periodic streams" : "a concurrency bound");
    for (uint32_t si = 0; si < wl->n_sessions; si++)
        if (wl->sessions[si].timing == CZ_TIMING_CLOSED && wl->sessions[si].n_turns > 1)
            return cz_err_set(err, CZ_EINVAL,
                              "scheduler '%s' serves open-loop requests: session %u is a "
                              "closed-loop conversation",
                              cfg->scheduler, si);
    memset(stats, 0, sizeof *stats);
    cz_xstage *S = cz_xcalloc(1, sizeof *S);
    S->cfg = cfg;
    S->wl = wl;
    S->m = m;
    cz_metrics_set_slo(m, &cfg->slo);
    cz_metrics_track_classes(m, cz_workload_mixed_classes(wl));
    S->st = stats;
    S->drv = *drv;
    S->llm = cfg->model.n_pipe - 1;
    S->n = wl->n_turns;
    size_t n1 = S->n ? S->n : 1;
    S->r = cz_xcalloc(n1, sizeof *S->r);
    S->order = cz_xmalloc(n1 * sizeof *S->order);
    S->ses_of = cz_xmalloc(n1 * sizeof *S->ses_of);
    for (uint32_t si = 0; si < wl->n_sessions; si++)
        for (uint32_t k = 0; k < wl->sessions[si].n_turns; k++)
            S->ses_of[wl->sessions[si].turn_off + k] = si;
    S->vision.v = cz_xmalloc(n1 * sizeof *S->vision.v);
    S->prefill.v = cz_xmalloc(n1 * sizeof *S->prefill.v);
    S->ready = cz_xmalloc(n1 * sizeof *S->ready);
    S->batch = cz_xmalloc(n1 * sizeof *S->batch);
    S->hyb = cz_xmalloc(n1 * sizeof *S->hyb);
    S->hyb_tok = cz_xmalloc(n1 * sizeof *S->hyb_tok);
    const cz_server_config *sc = &cfg->place[S->llm].server;
    S->kv_cap = (uint64_t)sc->kv_blocks * sc->block_tokens;
    plan_vision_weights(S);
    S->tl_next_s = -INFINITY;
    for (uint32_t g = 0; g < S->n; g++) {
        const cz_turn *t = &wl->turns[g];
        uint32_t in = cz_turn_in_tokens(t);
        S->r[g] = (xs_req){.g = g, .rec = UINT64_MAX, .in = in ? in : 1,
                           .out = t->out_text_tokens ? t->out_text_tokens : 1,
                           .image = S->llm > 0 ? t->in_image_tokens : 0};
        S->order[g] = g;
    }
    double *times = cz_xmalloc(n1 * sizeof *times);
    for (uint32_t g = 0; g < S->n; g++)
        times[g] = wl->turns[g].arrival_s;
    cz_sort_by_time(S->order, times, S->n);
    free(times);
    m->acct.requests = S->n;
    *out = S;
    return CZ_OK;
}

cz_status cz_xstage_finish(cz_xstage *S, bool cut, double now, cz_err *err)
{
    cz_status st = CZ_OK;
    for (uint32_t g = 0; g < S->n && st == CZ_OK; g++) {
        xs_req *q = &S->r[g];
        if (q->ended)
            continue;
        if (!cut) {
            st = cz_err_set(err, CZ_EINTERNAL,
                            "the cross-stage run drained (nothing left to happen) at t = %.6f "
                            "s with request %u open (%s, prefilled %u of %u, generated %u of "
                            "%u; KV %llu of %llu tokens): a bug in cadenza",
                            now, g, q->rec == UINT64_MAX ? "never arrived" : "arrived",
                            q->prefilled, q->in, q->gen, q->out,
                            (unsigned long long)S->kv_used, (unsigned long long)S->kv_cap);
            break;
        }
        if (q->rec != UINT64_MAX) {
            cz_req_record *rec = cz_metrics_req(S->m, q->rec);
            rec->outcome = CZ_REQ_UNFINISHED;
            rec->output_tokens = rec->heard_tokens = q->gen;
        }
        xs_outcome(S, g, CZ_REQ_UNFINISHED, S->cfg->max_time_s);
    }
    cz_run_stats *stats = S->st;
    stats->arrivals = S->next_arrival;
    stats->arrival_rate_rps = S->next_arrival > 1 && S->last_arrival_s > S->first_arrival_s
                                  ? (S->next_arrival - 1) / (S->last_arrival_s - S->first_arrival_s)
                                  : NAN;
    stats->kv_saturated_at_s = NAN;
    return st;
}

void cz_xstage_counts(const cz_xstage *S, uint64_t *arrived, uint64_t *finished)
{
    *arrived = S->next_arrival;
    *finished = S->finished;
}

uint32_t cz_xstage_requests(const cz_xstage *S) { return S->n; }

cz_xs_req_info cz_xstage_req(const cz_xstage *S, uint32_t req)
{
    CZ_ASSERT(req < S->n);
    const xs_req *q = &S->r[req];
    return (cz_xs_req_info){.in_tokens = q->in,
                            .out_tokens = q->out,
                            .image_tokens = q->image,
                            .prefilled = q->prefilled,
                            .generated = q->gen,
                            .context_tokens = q->prefilled + q->gen,
                            .rec = q->rec,
                            .ended = q->ended};
}

void cz_xstage_free(cz_xstage *S)
{
    if (!S)
        return;
    free(S->r);
    free(S->order);
    free(S->ses_of);
    free(S->vision.v);
    free(S->prefill.v);
    free(S->ready);
    free(S->batch);
    free(S->hyb);
    free(S->hyb_tok);
    free(S->layer_bytes);
    free(S->load_done);
    free(S->wrap_ready);
    free(S);
}
