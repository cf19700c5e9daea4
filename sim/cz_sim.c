/* cz_sim.c - see cz_sim.h. Config keys are documented in docs/config.md. */
#include "cz_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "cz_evq.h"
#include "cz_link.h"
#include "cz_json.h"
#include "cz_policies.h"
#include "cz_rng.h"
#include "cz_traces.h"

/* ---- config ---- */

static cz_status parse_server(const cJSON *j, const char *where, cz_sim_config *c, cz_err *err)
{
    static const char *const keys[] = {"max_num_seqs", "max_num_batched_tokens",
                                       "chunked_prefill", "block_tokens", "kv_blocks",
                                       "gpu_memory_utilization", "max_model_len"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: server", where);
    uint64_t v;
    cz_status st = cz_json_check_keys(j, ctx, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;
#define U32(key, field, lo)                                                                  \
    do {                                                                                      \
        v = c->server.field;                                                                  \
        if ((st = cz_json_u64(j, ctx, key, false, lo, UINT32_MAX, &v, err)) != CZ_OK)        \
            return st;                                                                        \
        c->server.field = (uint32_t)v;                                                        \
    } while (0)
    U32("max_num_seqs", max_num_seqs, 1);
    U32("max_num_batched_tokens", max_num_batched_tokens, 1);
    U32("block_tokens", block_tokens, 1);
    U32("kv_blocks", kv_blocks, 0);
    U32("max_model_len", max_model_len, 0);
#undef U32
    if ((st = cz_json_bool(j, ctx, "chunked_prefill", false, &c->server.chunked_prefill, err)) !=
        CZ_OK)
        return st;
    if (c->server.max_num_batched_tokens < c->server.max_num_seqs)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'max_num_batched_tokens': expected at least max_num_seqs "
                          "(%u), as vLLM requires, got %u",
                          ctx, c->server.max_num_seqs, c->server.max_num_batched_tokens);
    return cz_json_num(j, ctx, "gpu_memory_utilization", false, 0.01, 1.0,
                       &c->gpu_memory_utilization, err);
}

static cz_status parse_cost(const cJSON *j, const char *where, cz_sim_config *c, cz_err *err)
{
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: cost", where);
    const char *kind = "roofline";
    cz_status st = cz_json_str(j, ctx, "kind", false, &kind, err);
    if (st != CZ_OK)
        return st;
    cJSON *rest = cJSON_Duplicate(j, 1);
    CZ_ASSERT(rest != NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(rest, "kind");
    if (strcmp(kind, "service") == 0) {
        c->cost_kind = CZ_COST_SERVICE;
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(j, "service_s");
        static const char *const keys[] = {"service_s"};
        if (!sv)
            st = cz_err_set(err, CZ_EINVAL, "%s: missing field 'service_s' (kind \"service\")",
                            ctx);
        else if ((st = cz_json_check_keys(rest, ctx, keys, 1, err)) == CZ_OK)
            st = cz_distspec_parse(sv, ctx, "service_s", &c->service, err);
    } else if (strcmp(kind, "roofline") == 0) {
        c->cost_kind = CZ_COST_ROOFLINE;
        st = cz_cost_params_parse(rest, ctx, &c->cost, err);
    } else {
        st = cz_err_set(err, CZ_EINVAL, "%s: field 'kind': expected roofline or service, got '%s'",
                        ctx, kind);
    }
    cJSON_Delete(rest);
    return st;
}

static cz_status parse_slo(const cJSON *j, const char *where, cz_slo *slo, cz_err *err)
{
    static const char *const keys[] = {"ttft_ms", "tpot_ms", "e2el_ms"};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: slo", where);
    cz_status st = cz_json_check_keys(j, ctx, keys, 3, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "ttft_ms", false, 0, 1e12, &slo->ttft_ms, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "tpot_ms", false, 0, 1e12, &slo->tpot_ms, err);
    if (st == CZ_OK)
        st = cz_json_num(j, ctx, "e2el_ms", false, 0, 1e12, &slo->e2el_ms, err);
    return st;
}

static cz_status derive_kv_blocks(cz_sim_config *c, const char *where, cz_err *err)
{
    const cz_stage_card *s = &c->model.stages[c->stage];
    double tp = c->cost.tp ? c->cost.tp : 1;
    double free_bytes = c->hw.hbm_bytes * c->gpu_memory_utilization - cz_stage_weight_bytes(s) / tp;
    double block_bytes = cz_stage_kv_bytes_per_token_gpu(s, (uint32_t)tp) * c->server.block_tokens;
    double blocks = floor(free_bytes / block_bytes);
    if (!(blocks >= 1))
        return cz_err_set(err, CZ_EINVAL,
                          "%s: model '%s' stage '%s' does not fit on %s at tp %u: weights "
                          "%.1f GB per GPU leave no room for KV (set server.kv_blocks or cost.tp)",
                          where, c->model.name, s->name, c->hw.name, (unsigned)tp,
                          cz_stage_weight_bytes(s) / tp / 1e9);
    c->server.kv_blocks = blocks > UINT32_MAX ? UINT32_MAX : (uint32_t)blocks;
    return CZ_OK;
}

cz_status cz_sim_config_parse(const cJSON *cfg, const char *where, const char *base_dir,
                              cz_sim_config *c, cz_workload *wl, cz_err *err)
{
    static const char *const keys[] = {"name", "description", "seed", "workload", "model",
                                       "stage", "hardware", "cost", "server", "scheduler",
                                       "slo", "sim"};
    memset(c, 0, sizeof *c);
    c->seed = 1;
    c->server = cz_server_config_default();
    c->gpu_memory_utilization = 0.9;
    c->cost = cz_cost_params_default();
    c->max_time_s = INFINITY;
    c->timeline_interval_s = 0.1;
    c->sched = &cz_sched_fcfs;
    if (!cJSON_IsObject(cfg))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object at the top level", where);
    cz_status st = cz_json_check_keys(cfg, where, keys, (int)CZ_ARRAY_LEN(keys), err);
    if (st != CZ_OK)
        return st;

    const char *name = "unnamed";
    if ((st = cz_json_str(cfg, where, "name", false, &name, err)) != CZ_OK)
        return st;
    snprintf(c->name, sizeof c->name, "%s", name);
    if ((st = cz_json_u64(cfg, where, "seed", false, 0, UINT64_MAX / 2, &c->seed, err)) != CZ_OK)
        return st;

    const cJSON *obj = NULL;
    if ((st = cz_json_obj(cfg, where, "cost", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_cost(obj, where, c, err)) != CZ_OK)
        return st;

    const char *model = "llama-3-8b", *hw = "h100-sxm", *stage = NULL, *sched = "fcfs";
    if ((st = cz_json_str(cfg, where, "model", false, &model, err)) != CZ_OK ||
        (st = cz_json_str(cfg, where, "hardware", false, &hw, err)) != CZ_OK ||
        (st = cz_json_str(cfg, where, "stage", false, &stage, err)) != CZ_OK ||
        (st = cz_json_str(cfg, where, "scheduler", false, &sched, err)) != CZ_OK)
        return st;
    if ((st = cz_model_card_load(model, &c->model, err)) != CZ_OK ||
        (st = cz_hw_card_load(hw, &c->hw, err)) != CZ_OK)
        return cz_err_prefix(err, "%s: ", where);
    c->stage = UINT32_MAX;
    for (uint32_t i = 0; i < c->model.n_stages; i++) {
        const cz_stage_card *s = &c->model.stages[i];
        bool match = stage ? strcmp(s->name, stage) == 0 : s->kind == CZ_STAGE_AR;
        if (match && s->kind == CZ_STAGE_AR) {
            c->stage = i;
            break;
        }
    }
    if (c->stage == UINT32_MAX)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'stage': model '%s' has no autoregressive stage named '%s'",
                          where, c->model.name, stage ? stage : "(any)");
    if ((st = cz_policy_scheduler_find(sched, &c->sched, err)) != CZ_OK)
        return cz_err_prefix(err, "%s: field 'scheduler': ", where);

    if ((st = cz_json_obj(cfg, where, "server", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_server(obj, where, c, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "slo", false, &obj, err)) != CZ_OK)
        return st;
    if (obj && (st = parse_slo(obj, where, &c->slo, err)) != CZ_OK)
        return st;
    if ((st = cz_json_obj(cfg, where, "sim", false, &obj, err)) != CZ_OK)
        return st;
    if (obj) {
        static const char *const sk[] = {"max_time_s", "timeline_interval_s"};
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: sim", where);
        if ((st = cz_json_check_keys(obj, ctx, sk, 2, err)) != CZ_OK ||
            (st = cz_json_num(obj, ctx, "max_time_s", false, 0, 1e15, &c->max_time_s, err)) !=
                CZ_OK ||
            (st = cz_json_num(obj, ctx, "timeline_interval_s", false, 0, 1e9,
                              &c->timeline_interval_s, err)) != CZ_OK)
            return st;
    }
    if (c->server.kv_blocks == 0 && (st = derive_kv_blocks(c, where, err)) != CZ_OK)
        return st;

    if ((st = cz_json_obj(cfg, where, "workload", true, &obj, err)) != CZ_OK)
        return st;
    char wctx[256];
    snprintf(wctx, sizeof wctx, "%s: workload", where);
    return cz_workload_from_config(obj, wctx, base_dir, c->seed, wl, err);
}

/* ---- run ---- */

enum { EV_ARRIVAL = 1, EV_STEP_DONE = 2, EV_XFER_DONE = 3 };

/* Per-session state of a run. */
typedef struct ses_state {
    uint32_t seq;         /* its sequence at the server; UINT32_MAX before the first turn */
    uint32_t arrived;     /* turns that have arrived */
    uint32_t submitted;   /* turns handed to the server */
    uint32_t ended;       /* turns whose reply ended (completed, rejected or cut) */
} ses_state;

typedef struct sim_state {
    const cz_sim_config *cfg;
    const cz_workload *wl;
    cz_metrics *m;
    cz_server *srv;
    cz_evq q;
    cz_link link;
    double kv_bytes_per_token;
    uint32_t *turn_session;  /* global turn -> session */
    ses_state *ses;
    uint32_t *initial;       /* turns that arrive on their own, sorted by arrival */
    uint32_t n_initial, next_initial;
    uint32_t *bounded;       /* closed sessions started under the concurrency bound */
    uint32_t n_bounded, next_bounded, active_bounded;
    double *service_s;       /* per sequence, the open turn's service time (CZ_COST_SERVICE) */
    uint32_t *service_life;  /* per sequence, tokens the open turn computes */
    gsl_rng *rng;
    uint64_t arrived, finished;
} sim_state;

/* Sort key: arrival time, then index, so equal times keep workload order. */
typedef struct sort_key {
    double t_s;
    uint32_t idx;
} sort_key;

static int cmp_key(const void *a, const void *b)
{
    const sort_key *x = a, *y = b;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sorts ids[0..n) by times[k] (the arrival of ids[k]). */
static void sort_by_time(uint32_t *ids, const double *times, uint32_t n)
{
    sort_key *k = cz_xmalloc((n ? n : 1) * sizeof *k);
    for (uint32_t i = 0; i < n; i++)
        k[i] = (sort_key){times[i], ids[i]};
    qsort(k, n, sizeof *k, cmp_key);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = k[i].idx;
    free(k);
}

static void push_next_initial(sim_state *S)
{
    if (S->next_initial < S->n_initial) {
        uint32_t g = S->initial[S->next_initial++];
        cz_evq_push(&S->q, S->wl->turns[g].arrival_s, EV_ARRIVAL, g);
    }
}

static void start_bounded_session(sim_state *S, double now)
{
    if (S->next_bounded >= S->n_bounded)
        return;
    const cz_session *ses = &S->wl->sessions[S->bounded[S->next_bounded++]];
    double t = S->wl->turns[ses->turn_off].arrival_s;
    cz_evq_push(&S->q, t > now ? t : now, EV_ARRIVAL, ses->turn_off);
    S->active_bounded++;
}

/* Hands the transfers the server asked for to the host link. */
static void run_xfers(sim_state *S, double now)
{
    uint32_t n;
    const cz_xfer *x = cz_server_take_xfers(S->srv, &n);
    for (uint32_t i = 0; i < n; i++) {
        double done = cz_link_submit(&S->link, now, x[i].tokens * S->kv_bytes_per_token,
                                     x[i].to_host);
        cz_evq_push(&S->q, done, EV_XFER_DONE, x[i].seq * 2 + (x[i].to_host ? 1 : 0));
    }
}

static void turn_ended(sim_state *S, uint32_t g, double now);

/* Submits the session's next arrived turn if its sequence is free. A turn that arrives
 * while the previous one is still served waits for it; its latencies count from its own
 * arrival. */
static void submit_next(sim_state *S, uint32_t si, double now)
{
    ses_state *st = &S->ses[si];
    const cz_session *ses = &S->wl->sessions[si];
    if (st->submitted >= st->arrived || st->submitted > st->ended)
        return;
    uint32_t k = st->submitted++;
    uint32_t g = ses->turn_off + k;
    const cz_turn *t = &S->wl->turns[g];
    uint32_t in = cz_turn_in_tokens(t), out = t->out_text_tokens;
    in = in ? in : 1;
    out = out ? out : 1;
    if (st->seq == UINT32_MAX)
        st->seq = cz_server_seq_open(S->srv, si, (uint32_t)ses->cls, false);
    double arrival = k == 0 || ses->timing == CZ_TIMING_OPEN ? t->arrival_s : now;
    if (ses->timing == CZ_TIMING_CLOSED && k == 0 && now > arrival)
        arrival = now;
    uint64_t rec = cz_server_turn(S->srv, arrival, st->seq, k, 0, in, out, true);
    if (S->cfg->cost_kind == CZ_COST_SERVICE) {
        cz_rng_reseed(S->rng, S->cfg->seed, CZ_RNG_SERVICE, rec);
        S->service_s[st->seq] = cz_distspec_draw(&S->cfg->service, S->rng);
        S->service_life[st->seq] = in + out - 1;
    }
    if (S->m->req[rec].outcome == CZ_REQ_REJECTED)
        turn_ended(S, g, now);
}

/* The reply to turn `g` of its session ended at `now`: schedule what follows. */
static void turn_ended(sim_state *S, uint32_t g, double now)
{
    uint32_t si = S->turn_session[g];
    const cz_session *ses = &S->wl->sessions[si];
    ses_state *st = &S->ses[si];
    st->ended++;
    if (st->ended == ses->n_turns) {
        cz_server_seq_close(S->srv, st->seq);
        if (ses->timing == CZ_TIMING_CLOSED && S->wl->concurrency > 0) {
            S->active_bounded--;
            start_bounded_session(S, now);
        }
        return;
    }
    if (ses->timing == CZ_TIMING_CLOSED) {
        const cz_turn *next = &S->wl->turns[g + 1];
        cz_evq_push(&S->q, now + S->wl->turns[g].think_s + next->speech_s, EV_ARRIVAL, g + 1);
    } else {
        submit_next(S, si, now);
    }
}

static void on_arrival(sim_state *S, double now, uint32_t g)
{
    uint32_t si = S->turn_session[g];
    const cz_session *ses = &S->wl->sessions[si];
    S->ses[si].arrived++;
    S->arrived++;
    submit_next(S, si, now);
    if (ses->timing == CZ_TIMING_OPEN || (g == ses->turn_off && S->wl->concurrency == 0))
        push_next_initial(S);
}

double cz_sim_roofline_step_s(const cz_sim_config *cfg, const cz_batch *b)
{
    cz_batch_shape shape = {
        .prefill_tokens = b->prefill_tokens,
        .prefill_seqs = b->prefill_seqs,
        .prefill_attn_ctx = b->prefill_attn_ctx,
        .decode_seqs = b->decode_seqs,
        .decode_ctx_tokens = b->decode_ctx_tokens,
    };
    cz_step_cost c;
    cz_cost_step(&cfg->model.stages[cfg->stage], &cfg->hw, &cfg->cost, &shape, &c);
    return c.total_s;
}

/* Share of sequence `id`'s open turn service time that `tokens` tokens of work are. */
static double service_share(sim_state *S, uint32_t id, uint32_t tokens)
{
    return S->service_s[id] * (double)tokens / (double)S->service_life[id];
}

static double step_time(sim_state *S, const cz_batch *b)
{
    if (S->cfg->cost_kind == CZ_COST_ROOFLINE)
        return cz_sim_roofline_step_s(S->cfg, b);
    double t = 0.0;
    for (uint32_t k = 0; k < b->n_items; k++)
        t += service_share(S, b->items[k].seq, b->items[k].tokens);
    for (uint32_t id = cz_server_decode_first(S->srv); id != UINT32_MAX;
         id = cz_server_decode_next(S->srv, id))
        t += service_share(S, id, 1);
    return t;
}

static void sim_state_free(sim_state *S)
{
    cz_server_free(S->srv);
    cz_evq_free(&S->q);
    free(S->turn_session);
    free(S->ses);
    free(S->initial);
    free(S->bounded);
    free(S->service_s);
    free(S->service_life);
    if (S->rng)
        gsl_rng_free(S->rng);
}

cz_status cz_sim_run(const cz_sim_config *cfg, const cz_workload *wl, cz_metrics *m,
                     cz_sim_stats *stats, cz_sim_progress_fn progress, void *progress_ctx,
                     cz_err *err)
{
    sim_state S;
    memset(&S, 0, sizeof S);
    memset(stats, 0, sizeof *stats);
    S.cfg = cfg;
    S.wl = wl;
    S.m = m;
    if (wl->n_turns == 0)
        return cz_err_set(err, CZ_EINVAL, "workload has no requests");
    if (wl->n_streams > 0)
        return cz_err_set(err, CZ_EINVAL,
                          "workload has %u periodic streams, which this simulator's single "
                          "autoregressive stage does not serve; remove workload.streams",
                          wl->n_streams);
    S.srv = cz_server_create(&cfg->server, cfg->sched, m, wl->n_sessions);
    cz_link_init(&S.link, cfg->hw.host_link_Bps, cfg->hw.host_link_latency_s,
                 cfg->hw.host_link_full_duplex);
    S.kv_bytes_per_token = cz_stage_kv_bytes_per_token_gpu(&cfg->model.stages[cfg->stage],
                                                            cfg->cost.tp ? cfg->cost.tp : 1);
    cz_evq_init(&S.q, (size_t)wl->n_sessions + 16);
    S.turn_session = cz_xmalloc(wl->n_turns * sizeof *S.turn_session);
    S.ses = cz_xmalloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof *S.ses);
    S.initial = cz_xmalloc(wl->n_turns * sizeof *S.initial);
    S.bounded = cz_xmalloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof *S.bounded);
    for (uint32_t si = 0; si < wl->n_sessions; si++) {
        const cz_session *ses = &wl->sessions[si];
        S.ses[si] = (ses_state){UINT32_MAX, 0, 0, 0};
        for (uint32_t k = 0; k < ses->n_turns; k++)
            S.turn_session[ses->turn_off + k] = si;
        if (ses->n_turns == 0)
            continue;
        if (ses->timing == CZ_TIMING_OPEN) {
            for (uint32_t k = 0; k < ses->n_turns; k++)
                S.initial[S.n_initial++] = ses->turn_off + k;
        } else if (wl->concurrency > 0) {
            S.bounded[S.n_bounded++] = si;
        } else {
            S.initial[S.n_initial++] = ses->turn_off;
        }
    }
    double *times = cz_xmalloc((size_t)wl->n_turns * sizeof *times);
    for (uint32_t i = 0; i < S.n_initial; i++)
        times[i] = wl->turns[S.initial[i]].arrival_s;
    sort_by_time(S.initial, times, S.n_initial);
    for (uint32_t i = 0; i < S.n_bounded; i++)
        times[i] = wl->turns[wl->sessions[S.bounded[i]].turn_off].arrival_s;
    sort_by_time(S.bounded, times, S.n_bounded);
    free(times);
    if (cfg->cost_kind == CZ_COST_SERVICE) {
        S.service_s = cz_xmalloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof *S.service_s);
        S.service_life =
            cz_xmalloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof *S.service_life);
        S.rng = cz_rng_new(cfg->seed, CZ_RNG_SERVICE, 0);
    }

    push_next_initial(&S);
    for (uint32_t i = 0; i < wl->concurrency && S.next_bounded < S.n_bounded; i++)
        start_bounded_session(&S, 0.0);

    cz_event ev;
    double now = 0.0;
    while (cz_evq_pop(&S.q, &ev)) {
        if (ev.t_s > cfg->max_time_s)
            break;
        now = ev.t_s;
        stats->events++;
        if (ev.type == EV_ARRIVAL) {
            on_arrival(&S, now, ev.arg);
        } else if (ev.type == EV_XFER_DONE) {
            cz_server_on_xfer_done(S.srv, now, ev.arg / 2, ev.arg % 2 == 1);
        } else {
            cz_step_events se;
            cz_server_on_batch_done(S.srv, now, &se);
            for (uint32_t i = 0; i < se.n_turn_done; i++) {
                const cz_seq *q = cz_server_seq(S.srv, se.turn_done[i]);
                const cz_req_record *rec = &m->req[q->turn_rec];
                turn_ended(&S, wl->sessions[rec->session].turn_off + rec->turn, now);
            }
            S.finished += se.n_turn_done;
        }
        if (!cz_server_busy(S.srv)) {
            cz_batch b;
            if (cz_server_schedule(S.srv, now, &b))
                cz_evq_push(&S.q, now + step_time(&S, &b), EV_STEP_DONE, 0);
        }
        run_xfers(&S, now);
        if (progress && (stats->events & 0xFFFF) == 0) {
            cz_sim_progress p = {now, stats->events, S.arrived, S.finished, wl->n_turns, false};
            progress(progress_ctx, &p);
        }
    }
    cz_server_finalize(S.srv);
    stats->arrivals = S.arrived;
    stats->sim_time_s = now;
    if (progress) {
        cz_sim_progress p = {now, stats->events, S.arrived, S.finished, wl->n_turns, true};
        progress(progress_ctx, &p);
    }
    sim_state_free(&S);
    return CZ_OK;
}

bool cz_sim_add_theory(const cz_sim_config *cfg, const cJSON *cfg_json, const cz_summary *sum,
                       cJSON *summary)
{
    if (cfg->cost_kind != CZ_COST_SERVICE || cfg->server.max_num_seqs != 1)
        return false;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cfg_json, "workload");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(w, "arrivals");
    const cJSON *proc = cJSON_GetObjectItemCaseSensitive(a, "process");
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(a, "rate_rps");
    if (!cJSON_IsString(proc) || strcmp(proc->valuestring, "poisson") != 0 ||
        !cJSON_IsNumber(rate))
        return false;
    double lambda = rate->valuedouble;
    double rho = lambda * cz_distspec_mean(&cfg->service);
    if (!(rho < 1.0))
        return false;
    double wq_s = lambda * cz_distspec_second_moment(&cfg->service) / (2.0 * (1.0 - rho));
    cJSON *th = cJSON_AddObjectToObject(summary, "queueing_theory");
    cJSON_AddStringToObject(th, "model",
                            cfg->service.kind == CZ_DIST_EXPONENTIAL ? "M/M/1" : "M/G/1");
    cz_json_add_num(th, "rho", rho);
    cz_json_add_num(th, "mean_queue_wait_ms", wq_s * 1e3);
    cz_json_add_num(th, "relative_error", (sum->queue_wait_ms.mean - wq_s * 1e3) / (wq_s * 1e3));
    return true;
}
