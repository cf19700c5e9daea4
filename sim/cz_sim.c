/* cz_sim.c - the discrete-event driver of the deployment runtime (cz_sim.h): time is an
 * event queue, a step takes the cost model's time (under the model of co-running streams,
 * cz_streams.h), a KV transfer the modelled host link's (cz_link.h). */
#include "cz_sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "cz_deploy.h"
#include "cz_evq.h"
#include "cz_link.h"
#include "cz_rng.h"
#include "cz_sim_int.h"
#include "cz_streams.h"

#define NONE UINT32_MAX
/* The watchdog (cz_watchdog): a run is stalled after a million events and an hour of
 * simulated time with work open and no progress */
#define CZ_SIM_STALL_EVENTS 1000000u
#define CZ_SIM_STALL_S 3600.0

/* Event types past the runtime's timers (cz_timer_kind, which keep their own numbers). */
enum {
    EV_STEP_DONE = 100, /* a step's phase ends (cz_streams); arg: replica, arg2: its GPU's
                           stream epoch when posted (stale once the epoch moved on) */
    EV_XFER_DONE,       /* arg: replica, arg2: sequence * 2 + to_host */
    EV_RUN_DONE         /* a decode run's end (cz_driver.run); arg: replica, arg2: its
                           run serial when posted (stale once it moved on) */
};

typedef struct sim_gpu {
    cz_link link;
    cz_link nic;     /* disaggregation: its network link (out: to_host's direction) */
    cz_streams st;   /* the steps in flight */
    uint32_t *reps;  /* its replicas, by slot */
    uint32_t n_reps;
    bool async;
} sim_gpu;

struct cz_sim {
    const cz_config *cfg;
    cz_workload *wl;
    cz_metrics *m;
    cz_deploy *d;
    cz_evq q;
    sim_gpu *gpus;
    uint32_t n_reps;
    uint32_t *rep_gpu, *rep_slot;
    bool *busy;            /* per replica: a step in flight */
    bool *in_run;          /* per replica: that step is a decode run's (no stream phases) */
    uint32_t *run_serial;  /* per replica: bumped at each run and cut */
    double *service_s;     /* per sequence: the open turn's service time (CZ_COST_SERVICE) */
    uint32_t *service_life;
    gsl_rng *rng;
    /* the run */
    double now;            /* the time of the last event handled */
    double over_s;         /* an event past CZ_CLOCK_MAX_S: its time */
    uint64_t events;
    cz_watchdog dog;
    /* an observer of autoregressive steps (cz_sim_observer): the sequences each step in
     * flight ran, per replica */
    cz_sim_observer obs;
    uint32_t **ran;
    uint32_t *n_ran, *cap_ran;
    /* per pipeline stage: its decode-only steps' roofline, planned (cz_config_decode_cost) */
    cz_cost_decode decode[CZ_MAX_STAGES];
    bool decode_ok[CZ_MAX_STAGES];
};
/* ---- step costs ---- */

static double service_share(const cz_sim *S, uint32_t seq, uint32_t tokens)
{
    return S->service_s[seq] * (double)tokens / (double)S->service_life[seq];
}

static double ar_step_s(const cz_sim *S, const cz_deploy_step *st)
{
    const cz_batch *b = st->batch;
    if (S->cfg->cost_kind != CZ_COST_SERVICE) {
        if (S->decode_ok[st->p] && b->prefill_tokens == 0 && b->prefill_attn_ctx == 0)
            return cz_cost_decode_s(&S->decode[st->p], b->decode_seqs, b->decode_ctx_tokens);
        return cz_config_roofline_step_s(S->cfg, st->p, b);
    }
    double t = 0.0;
    for (uint32_t k = 0; k < b->n_items; k++)
        t += service_share(S, b->items[k].seq, b->items[k].tokens);
    for (uint32_t id = cz_server_decode_first(st->srv); id != NONE;
         id = cz_server_decode_next(st->srv, id))
        t += service_share(S, id, 1);
    return t;
}

/* ---- the driver's table ---- */

/* The most of a step of st's that runs on the host: the cost model's per-step overhead
 * on an asynchronous GPU, else 0 (a step's host part is this or its whole time, the
 * less). */
static double host_cap_s(const cz_sim *S, const cz_deploy_step *st)
{
    if (S->gpus[st->gpu].async && S->cfg->cost_kind != CZ_COST_SERVICE)
        return cz_config_step_overhead_s(S->cfg, st->p);
    return 0.0;
}

/* Step st's time, and its host part (*host_s: the cost model's per-step overhead on an
 * asynchronous GPU, else 0). */
static double step_split(const cz_sim *S, const cz_deploy_step *st, double *host_s)
{
    double dur = st->srv ? ar_step_s(S, st) : cz_config_jobs_step_s(S->cfg, st->p, st->jobs, st->n_jobs);
    *host_s = fmin(host_cap_s(S, st), dur);
    return dur;
}

/* Starts a step alone on its replica's stream. On an asynchronous GPU its host part, the
 * cost model's per-step overhead (launches, scheduling, sampling), runs on the host thread
 * and its kernels on the GPU (cz_streams.h); a synchronous GPU runs one step at a time, so
 * the split changes nothing there. */
static void drv_step(void *ctx, const cz_deploy_step *st, double now)
{
    cz_sim *S = ctx;
    double host, dur = step_split(S, st, &host);
    sim_gpu *g = &S->gpus[st->gpu];
    S->busy[st->rep] = true;
    cz_streams_start(&g->st, S->rep_slot[st->rep], now, host, dur - host);
    if (S->obs.step_ended && st->srv) {
        /* the sequences the step runs: its decode set and its chunks */
        uint32_t n = 0, r = st->rep;
        for (uint32_t id = cz_server_decode_first(st->srv); id != NONE;
             id = cz_server_decode_next(st->srv, id))
            n++;
        n += st->batch->n_items;
        if (n > S->cap_ran[r]) {
            S->cap_ran[r] = n * 2;
            S->ran[r] = cz_xrealloc(S->ran[r], S->cap_ran[r], sizeof **S->ran);
        }
        n = 0;
        for (uint32_t id = cz_server_decode_first(st->srv); id != NONE;
             id = cz_server_decode_next(st->srv, id))
            S->ran[r][n++] = id;
        for (uint32_t k = 0; k < st->batch->n_items; k++)
            S->ran[r][n++] = st->batch->items[k].seq;
        S->n_ran[r] = n;
    }
}

/* Decode runs (cz_driver.run): the ends of n decode-only steps, one after another from
 * start_s alone on their device, the k-th reading k x decode_seqs more KV than st's, as
 * drv_step and the stream model time each (a lone stream: its host part, then its
 * kernels, each at full rate). */
static void drv_run_step_ends(void *ctx, const cz_deploy_step *st, double start_s, uint32_t n,
                              double *end_s)
{
    cz_sim *S = ctx;
    const cz_batch *b = st->batch;
    CZ_ASSERT(st->srv && b->prefill_tokens == 0 && b->prefill_attn_ctx == 0);
    if (S->cfg->cost_kind != CZ_COST_SERVICE && S->decode_ok[st->p]) {
        /* ar_step_s's planned roofline, the run at once */
        cz_cost_decode_steps(&S->decode[st->p], b->decode_seqs, b->decode_ctx_tokens, n, end_s);
    } else {
        cz_batch vb = *b;
        cz_deploy_step vs = *st;
        vs.batch = &vb;
        for (uint32_t k = 0; k < n; k++) {
            vb.decode_ctx_tokens = b->decode_ctx_tokens + (uint64_t)k * b->decode_seqs;
            end_s[k] = ar_step_s(S, &vs);
        }
    }
    /* step_split's host part, then the stream model's lone-stream arithmetic */
    double cap = host_cap_s(S, st), t = start_s;
    for (uint32_t k = 0; k < n; k++) {
        double dur = end_s[k];
        double host = dur < cap ? dur : cap; /* fmin(cap, dur), without its call */
        double gpu = dur - host;
        if (host > 0.0)
            t = gpu > 0.0 ? (t + host) + gpu : t + host;
        else
            t = t + gpu * 1.0;
        end_s[k] = t;
    }
}

static void drv_run(void *ctx, uint32_t rep, double end_s, double now)
{
    cz_sim *S = ctx;
    (void)now;
    CZ_ASSERT(!S->busy[rep] && S->gpus[S->rep_gpu[rep]].n_reps == 1);
    S->busy[rep] = true;
    S->in_run[rep] = true;
    cz_evq_push(&S->q, end_s, EV_RUN_DONE, rep, ++S->run_serial[rep]);
}

static void drv_run_cut(void *ctx, uint32_t rep, double end_s)
{
    cz_sim *S = ctx;
    CZ_ASSERT(S->in_run[rep]);
    cz_evq_push(&S->q, end_s, EV_RUN_DONE, rep, ++S->run_serial[rep]);
}

/* Posts the phase boundary of every step in flight on GPU gi at the time its stream model
 * gives now (cz_streams_next_s), tagged with the current epoch: those posted before are
 * stale. */
static void post_step_ends(cz_sim *S, uint32_t gi)
{
    sim_gpu *g = &S->gpus[gi];
    for (uint32_t k = 0; k < g->n_reps; k++) {
        uint32_t ri = g->reps[k];
        if (S->busy[ri] && !S->in_run[ri])
            cz_evq_push(&S->q, cz_streams_next_s(&g->st, k), EV_STEP_DONE, ri,
                        (uint32_t)g->st.epoch);
    }
}

static void drv_turn_end(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                         uint32_t out_tokens, double now)
{
    cz_sim *S = ctx;
    S->obs.turn_end(S->obs.ctx, session, turn, outcome, out_tokens, now);
}

static void drv_launched(void *ctx, uint32_t gpu, double now)
{
    (void)now;
    post_step_ends(ctx, gpu);
}

static void drv_xfer(void *ctx, uint32_t rep, uint32_t gpu, const cz_xfer *x, double bytes,
                     double now)
{
    cz_sim *S = ctx;
    double done = cz_link_submit(&S->gpus[gpu].link, now, bytes, x->to_host);
    cz_evq_push(&S->q, done, EV_XFER_DONE, rep, x->seq * 2 + (x->to_host ? 1 : 0));
}

static void drv_pull(void *ctx, uint32_t rep, const cz_xfer *x, uint32_t src_rep,
                     uint32_t src_seq, double bytes, double now)
{
    cz_sim *S = ctx;
    (void)src_seq;
    double done = cz_link_pair_submit(&S->gpus[S->rep_gpu[src_rep]].nic,
                                      &S->gpus[S->rep_gpu[rep]].nic, now, bytes);
    cz_evq_push(&S->q, done, EV_XFER_DONE, rep, x->seq * 2);
}

static double drv_xfer_eta(void *ctx, uint32_t gpu, double bytes, bool to_host, double now)
{
    cz_sim *S = ctx;
    return cz_link_eta(&S->gpus[gpu].link, now, bytes, to_host);
}

static void drv_timer(void *ctx, double t, uint32_t kind, uint32_t a, uint32_t b)
{
    cz_sim *S = ctx;
    cz_evq_push(&S->q, t, kind, a, b);
}

/* Cost kind "service": each turn carries a service time drawn from the config's
 * distribution, spread over the tokens it computes (docs/validation.md). */
static void drv_turn_opened(void *ctx, uint32_t rep, uint32_t seq, uint64_t rec, uint32_t in,
                            uint32_t out)
{
    cz_sim *S = ctx;
    (void)rep;
    if (S->cfg->cost_kind != CZ_COST_SERVICE)
        return;
    cz_rng_reseed(S->rng, S->cfg->seed, CZ_RNG_SERVICE, rec);
    S->service_s[seq] = cz_distspec_draw(&S->cfg->service, S->rng);
    S->service_life[seq] = in + out - 1;
}

/* ---- the run ---- */

static void sim_free(cz_sim *S)
{
    for (uint32_t g = 0; S->gpus && g < S->cfg->n_gpus; g++) {
        free(S->gpus[g].reps);
        cz_streams_free(&S->gpus[g].st);
    }
    free(S->gpus);
    free(S->rep_gpu);
    free(S->rep_slot);
    free(S->busy);
    free(S->in_run);
    free(S->run_serial);
    free(S->service_s);
    free(S->service_life);
    if (S->rng)
        gsl_rng_free(S->rng);
    for (uint32_t r = 0; S->ran && r < S->n_reps; r++)
        free(S->ran[r]);
    free(S->ran);
    free(S->n_ran);
    free(S->cap_ran);
    cz_evq_free(&S->q);
    cz_deploy_free(S->d);
    free(S);
}

/* The GPUs: a host link each, and a stream per replica whose co-running steps slow each
 * other by the largest contention factor the GPU's asynchronous stages ask for. */
static void build_gpus(cz_sim *S)
{
    const cz_config *cfg = S->cfg;
    S->n_reps = cz_deploy_replicas(S->d);
    S->gpus = cz_xcalloc(cfg->n_gpus, sizeof *S->gpus);
    S->rep_gpu = cz_xmalloc(S->n_reps * sizeof *S->rep_gpu);
    S->rep_slot = cz_xmalloc(S->n_reps * sizeof *S->rep_slot);
    S->busy = cz_xcalloc(S->n_reps, sizeof *S->busy);
    S->in_run = cz_xcalloc(S->n_reps, sizeof *S->in_run);
    S->run_serial = cz_xcalloc(S->n_reps, sizeof *S->run_serial);
    double *corun = cz_xmalloc(cfg->n_gpus * sizeof *corun);
    uint32_t *on_gpu = cz_xcalloc(cfg->n_gpus, sizeof *on_gpu);
    for (uint32_t ri = 0; ri < S->n_reps; ri++)
        on_gpu[cz_deploy_replica_at(S->d, ri).gpu]++;
    for (uint32_t g = 0; g < cfg->n_gpus; g++) {
        corun[g] = 1.0;
        S->gpus[g].reps = cz_xmalloc((on_gpu[g] ? on_gpu[g] : 1) * sizeof(uint32_t));
        S->gpus[g].async = cz_deploy_gpu_async(S->d, g);
        cz_link_init(&S->gpus[g].link, cfg->hw.host_link_Bps, cfg->hw.host_link_latency_s,
                     cfg->hw.host_link_full_duplex);
        if (cfg->pd)
            cz_link_init(&S->gpus[g].nic, cfg->pd_link_Bps, cfg->pd_link_latency_s, true);
    }
    free(on_gpu);
    for (uint32_t ri = 0; ri < S->n_reps; ri++) {
        cz_deploy_replica r = cz_deploy_replica_at(S->d, ri);
        sim_gpu *g = &S->gpus[r.gpu];
        CZ_ASSERT(r.slot == g->n_reps);
        g->reps[g->n_reps++] = ri;
        S->rep_gpu[ri] = r.gpu;
        S->rep_slot[ri] = r.slot;
        /* VoxServe, section 3.2.2: steps on the streams of VoxServe's
         * asynchronous pipeline contend for the GPU */
        const cz_policy_params *pp = &cfg->place[r.p].policy.params;
        if (pp->async_pipeline && pp->corun_slowdown > corun[r.gpu])
            corun[r.gpu] = pp->corun_slowdown;
    }
    for (uint32_t g = 0; g < cfg->n_gpus; g++)
        cz_streams_init(&S->gpus[g].st, S->gpus[g].n_reps ? S->gpus[g].n_reps : 1, corun[g]);
    free(corun);
}

cz_status cz_sim_open(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                      const cz_sim_observer *obs, cz_sim **out, cz_err *err)
{
    CZ_ASSERT(!cfg->cross_stage);
    *out = NULL;
    cz_sim *S = cz_xcalloc(1, sizeof *S);
    S->cfg = cfg;
    S->wl = wl;
    S->m = m;
    if (obs)
        S->obs = *obs;
    cz_driver drv = {
        .ctx = S,
        .step = drv_step,
        .launched = drv_launched,
        .xfer = drv_xfer,
        .xfer_eta = drv_xfer_eta,
        .pull = drv_pull,
        .timer = drv_timer,
        .turn_opened = drv_turn_opened,
        .turn_end = S->obs.turn_end ? drv_turn_end : NULL,
        .modelled = true,
        /* an observer watches each step's sequences as a dispatch hands them over */
        .fast_forward = cfg->fast_forward && !S->obs.step_ended,
    };
    if (drv.fast_forward && cfg->cost_kind != CZ_COST_SERVICE) {
        /* decode runs: a decode step's time is the cost model's of its batch alone */
        drv.run_step_ends = drv_run_step_ends;
        drv.run = drv_run;
        drv.run_cut = drv_run_cut;
    }
    cz_status st = cz_deploy_create(cfg, wl, m, &drv, &S->d, err);
    if (st != CZ_OK) {
        free(S);
        return st;
    }
    build_gpus(S);
    for (uint32_t p = 0; p < cfg->model.n_pipe; p++)
        S->decode_ok[p] = cz_config_decode_cost(cfg, p, &S->decode[p]);
    /* arrivals are pushed one at a time: the queue follows what is in flight */
    cz_evq_init(&S->q, (size_t)(wl->n_sessions < 4096 ? wl->n_sessions : 4096) + wl->n_streams + 16);
    S->rng = cz_rng_new(cfg->seed, CZ_RNG_SERVICE, 0);
    if (cfg->cost_kind == CZ_COST_SERVICE) {
        CZ_ASSERT(!wl->gen); /* per-session service times: a whole workload */
        size_t n = (size_t)(wl->n_sessions ? wl->n_sessions : 1) + wl->n_streams;
        S->service_s = cz_xmalloc(n * sizeof *S->service_s);
        S->service_life = cz_xmalloc(n * sizeof *S->service_life);
    }
    if (S->obs.step_ended) {
        S->ran = cz_xcalloc(S->n_reps, sizeof *S->ran);
        S->n_ran = cz_xcalloc(S->n_reps, sizeof *S->n_ran);
        S->cap_ran = cz_xcalloc(S->n_reps, sizeof *S->cap_ran);
    }
    cz_watchdog_init(&S->dog, CZ_SIM_STALL_EVENTS, CZ_SIM_STALL_S);
    cz_deploy_start(S->d);
    *out = S;
    return CZ_OK;
}

cz_deploy *cz_sim_deploy(cz_sim *S)
{
    return S->d;
}

double cz_sim_now(const cz_sim *S)
{
    return S->now;
}

uint64_t cz_sim_events(const cz_sim *S)
{
    return S->events;
}

/* A step end posted before its stream's epoch moved on, or for a step no longer in
 * flight: re-posted since. */
static bool stale(const cz_sim *S, const cz_event *ev)
{
    if (ev->type == EV_RUN_DONE)
        return !S->in_run[ev->arg] || ev->arg2 != S->run_serial[ev->arg];
    return ev->type == EV_STEP_DONE &&
           (!S->busy[ev->arg] || S->in_run[ev->arg] ||
            ev->arg2 != (uint32_t)S->gpus[S->rep_gpu[ev->arg]].st.epoch);
}

double cz_sim_next_s(cz_sim *S)
{
    const cz_event *top;
    cz_event ev;
    while ((top = cz_evq_peek(&S->q)) != NULL && stale(S, top))
        cz_evq_pop(&S->q, &ev);
    return top ? top->t_s : INFINITY;
}

cz_sim_state cz_sim_advance(cz_sim *S)
{
    const cz_config *cfg = S->cfg;
    cz_event ev;
    if (cz_sim_next_s(S) == INFINITY)
        return CZ_SIM_DRAINED;
    const cz_event *top = cz_evq_peek(&S->q);
    if (top->t_s > cfg->max_time_s) {
        /* the steps of decode runs up to the limit happened */
        double t = cz_deploy_runs_sync(S->d, cfg->max_time_s);
        if (t > S->now)
            S->now = t;
        return CZ_SIM_CUT;
    }
    if (top->t_s > CZ_CLOCK_MAX_S) {
        S->over_s = top->t_s;
        return CZ_SIM_CLOCK_OVER;
    }
    cz_evq_pop(&S->q, &ev);
    double now = S->now = ev.t_s;
    S->events++;
    if (ev.type == EV_RUN_DONE) {
        S->busy[ev.arg] = S->in_run[ev.arg] = false;
        cz_deploy_step_done(S->d, ev.arg, now);
    } else if (ev.type == EV_XFER_DONE) {
        cz_deploy_xfer_done(S->d, ev.arg, ev.arg2 / 2, ev.arg2 % 2 == 1, now);
    } else if (ev.type == EV_STEP_DONE) {
        uint32_t ri = ev.arg, gi = S->rep_gpu[ri];
        bool ended = cz_streams_boundary(&S->gpus[gi].st, S->rep_slot[ri], now);
        S->busy[ri] = !ended;
        post_step_ends(S, gi);
        if (!ended)
            return CZ_SIM_RAN; /* its host part is done; its kernels run */
        cz_deploy_replica r = cz_deploy_replica_at(S->d, ri);
        cz_deploy_step_done(S->d, ri, now);
        if (S->obs.step_ended && r.srv)
            S->obs.step_ended(S->obs.ctx, ri, r.srv, S->ran[ri], S->n_ran[ri], now);
    } else {
        cz_deploy_timer(S->d, now, ev.type, ev.arg, ev.arg2);
    }
    if (cz_watchdog_stalled(&S->dog, now, cz_deploy_progress(S->d), cz_deploy_busy(S->d))) {
        cz_deploy_stalled(S->d);
        return CZ_SIM_STALLED;
    }
    return CZ_SIM_RAN;
}

cz_status cz_sim_close(cz_sim *S, cz_sim_state how, cz_run_stats *stats, cz_err *err)
{
    CZ_ASSERT(how != CZ_SIM_RAN);
    cz_metrics *m = S->m;
    stats->events = S->events;
    stats->sim_time_s = S->now;
    if (how == CZ_SIM_CLOCK_OVER) {
        /* bad input, not a run to account: nothing is written */
        double t = S->over_s;
        sim_free(S);
        return cz_run_clock_error(t, err);
    }
    cz_status st = cz_deploy_finish(S->d, how == CZ_SIM_CUT, S->now, stats, err);
    if (how == CZ_SIM_STALLED && st == CZ_EINTERNAL)
        cz_watchdog_report(&S->dog, S->now, "simulated", err);
    stats->events = S->events;
    stats->sim_time_s = S->now;
    sim_free(S);
    cz_metrics_finish(m);
    if (st == CZ_OK)
        st = cz_metrics_check(m, err);
    return st;
}

cz_status cz_sim_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                     cz_run_stats *stats, cz_run_progress_fn progress, void *progress_ctx,
                     cz_err *err)
{
    bool partial;
    return cz_sim_run_stoppable(cfg, wl, m, NULL, &partial, stats, progress, progress_ctx,
                                err);
}

cz_status cz_sim_run_stoppable(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                               volatile sig_atomic_t *stop, bool *partial,
                               cz_run_stats *stats, cz_run_progress_fn progress,
                               void *progress_ctx, cz_err *err)
{
    memset(stats, 0, sizeof *stats);
    *partial = false;
    if (cfg->cross_stage)
        return cz__xstage_run(cfg, wl, m, stop, partial, stats, progress, progress_ctx, err);
    cz_sim *S;
    cz_status st = cz_sim_open(cfg, wl, m, NULL, &S, err);
    if (st != CZ_OK)
        return st;
    cz_sim_state how;
    uint64_t arrived, finished;
    while ((how = cz_sim_advance(S)) == CZ_SIM_RAN) {
        if (stop && (S->events & 0x3FF) == 0 && *stop) {
            how = CZ_SIM_CUT; /* Ctrl-C: end here, as a max_time_s cut does */
            *partial = true;
            break;
        }
        if (progress && (S->events & 0xFFFF) == 0) {
            cz_deploy_counts(S->d, &arrived, &finished);
            cz_run_progress pr = {S->now, S->events, arrived, finished, wl->n_turns, false};
            progress(progress_ctx, &pr);
        }
    }
    if (progress && how != CZ_SIM_CLOCK_OVER) {
        cz_deploy_counts(S->d, &arrived, &finished);
        cz_run_progress pr = {S->now, S->events, arrived, finished, wl->n_turns, true};
        progress(progress_ctx, &pr);
    }
    return cz_sim_close(S, how, stats, err);
}
