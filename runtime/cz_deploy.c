/* cz_deploy.c - the deployment runtime (cz_deploy.h): the pipeline of a model card on its
 * devices, the client (playback, barge-in), periodic streams and the session gateway,
 * driven by a driver's time and execution (docs/pipeline.md). */
#include "cz_deploy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "cz_evidx.h"
#include "cz_jobq.h"
#include "cz_kvindex.h"
#include "cz_lvheap.h"
#include "cz_playback.h"
#include "cz_rng.h"

#define NONE UINT32_MAX
#define CLOSED (UINT32_MAX - 1) /* a session slot_of: the session closed */
#define SLOT_CHUNK 1024u

/* An operation on a replica's serving core that must wait for its batch to end. */
typedef struct deferred_op {
    uint32_t kind; /* 0 feed, 1 abort */
    uint32_t seq, session;
    uint32_t in, out; /* feed: tokens; abort: out = tokens to keep */
    bool final;
} deferred_op;

typedef struct rep_rt {
    uint32_t p;          /* pipeline stage */
    uint32_t gpu;
    uint32_t slot;       /* its position among its device's replicas */
    cz_server *srv;      /* autoregressive stages */
    cz_jobq jq;          /* encoders and vocoders */
    uint32_t outstanding;/* turns (an AR stage) or jobs (an encoder or vocoder) routed to it
                            and not yet done */
    uint32_t load;       /* its router load: outstanding, or under vllm_dp its serving
                            core's 4 x waiting + running */
    uint32_t pub, since; /* router.signal_delay_s: the load it last published, and the
                            turns routed to it since */
    uint32_t kv_now, kv_pub; /* llm_d: its serving core's KV blocks in use, and as last
                                published */
    uint32_t kv_blocks;  /* its KV pool (an autoregressive stage) */
    uint32_t active;     /* kv_router: the KV blocks of the turns routed to it and not yet
                            ended, as the router counts them (Dynamo's active blocks): each
                            turn's context blocks when it was routed, less those held there
                            then, and with router.track_output_blocks the blocks its
                            generated tokens started since */
    uint64_t grown;      /* kv_router, tracking output blocks: its serving core's
                            cz_server_ctx_grown, as `active` last took it in */
    bool sig_dirty;      /* its load changed since it last published */
    uint64_t turns;      /* turns started on it (AR stages) */
    bool busy;           /* its batch is in flight */
    /* a decode run (step_again, docs/serving-core.md "Decode runs"): run_m more steps of
     * the decode set in flight promised, the ends of the steps from the one in flight in
     * run_t[0..run_m] (the last the driver's event), run_j of them applied; 0: none */
    uint32_t run_m, run_j, run_cap;
    double *run_t;
    deferred_op *ops;
    uint32_t n_ops, cap_ops;
    bool detok_rule;     /* a vocoder under VoxServe: cz_voxserve_detok_pick orders it */
    cz_detok_job *djobs; /* its scratch, capacity dcap */
    cz_cand *dcands;
    uint32_t *dpos;
    size_t dcap;
} rep_rt;

/* A device: synchronous, it runs one step at a time; asynchronous (a stage's policy asks
 * for VoxServe's pipeline, section 3.2.2 of the VoxServe paper), every replica may
 * have a step in flight. */
typedef struct gpu_rt {
    uint32_t *reps;
    uint32_t n_reps, rr;
    bool async;       /* replicas' steps co-run */
    bool dirty;       /* a replica on it changed since it was last dispatched */
    bool always;      /* dispatched on every event: a vocoder under VoxServe's rule reads
                         its upstream stage's progress and the clock */
    uint32_t inflight;/* steps in flight */
    double wake_s;    /* the pending CZ_TIMER_WAKE, INFINITY when none */
} gpu_rt;

/* A session's progress; per pipeline stage state lives in cz_deploy.sp. */
typedef struct ses_rt {
    uint32_t arrived, submitted, ended;
    uint32_t g;           /* global index of the open turn, NONE when none */
    uint32_t blocked;     /* barge-in aborts still waiting for a batch to end */
    uint32_t outstanding; /* encoder jobs, open stage turns and vocoder jobs of the turn */
    uint32_t enc_pending;
    bool barged, generated; /* the open turn was cut; its generation is complete */
    uint32_t refused;     /* a stage refused the open turn: CZ_REQ_REJECTED (the first
                             autoregressive stage) or CZ_REQ_FAILED (a later one); 0 none */
    uint32_t refused_at;  /* the autoregressive stage that refused it */
    uint64_t rec0;        /* the open turn's record at the first AR stage (UINT64_MAX none) */
    double ready_s;
    uint64_t audio_rec;
    bool tts;             /* the open turn's reply is text the client speaks (a model with
                             no vocoder, a turn with out_audio_s): its tokens are played */
    uint32_t played;      /* tts: reply tokens handed to the player */
    double a_tok;         /* tts: seconds of audio per reply token */
    bool keep;            /* a live session that more turns may follow: it stays open, its
                             KV kept, after its last turn (cz_deploy_submit) */
    /* disaggregated prefill and decode (cz_config.pd) */
    uint32_t pd_ctx;      /* the session's context before the open turn (the decode
                             pool's): both pools' sequences are cut or fed to it */
    bool pd_pulling;      /* the decode pool is loading the open turn's KV from the prefill
                             pool's sequence, which holds it (its turn stays open) until
                             the load lands */
    bool pd_abort;        /* a cut came while pulling: the prefill pool's abort waits for
                             the load (keeping pd_keep tokens) */
    bool pd_released;     /* the prefill pool's turn was told to end (its feed may wait
                             for the replica's batch) */
    uint32_t pd_keep;
} ses_rt;

/* A session's state at one pipeline stage. */
typedef struct ses_stage {
    uint32_t rep;    /* replica serving it, NONE before routing */
    uint32_t seq;    /* its sequence there (AR stages), NONE when none */
    uint32_t gen;    /* tokens generated in the open turn, as last reported */
    uint32_t fed;    /* tokens of output allowed to this stage so far (a fed AR stage) */
    uint32_t handed; /* upstream tokens handed to this stage so far (a vocoder) */
    uint32_t target; /* output tokens of the open turn at this stage */
    uint32_t active; /* kv_router: the blocks the open turn adds to its replica's active
                        at its start (its context's, less `held`) */
    uint32_t blocks0;/* kv_router, tracking output blocks: its context's blocks at its
                        start (the blocks its generated tokens start later add to its
                        replica's active as they come) */
    uint32_t held;   /* kv_router: the turn's leading blocks in use on its replica when it
                        was routed (they add nothing to its active blocks) */
    bool open, done; /* its turn started; finished */
} ses_stage;

typedef struct stream_rt {
    uint32_t rep, seq;
    uint32_t frames, ticked, done;
    bool live, rejected;  /* admitted and not yet ended; refused (by the gateway, or its
                             first frame can never fit the KV pool) */
    bool failed;          /* its context outgrew the pool: later frames come back empty */
} stream_rt;

typedef struct cz_deploy {
    const cz_config *cfg;
    cz_workload *wl;       /* whole, or streamed: read through WS/WT */
    cz_metrics *m;
    cz_driver drv;
    uint32_t n_pipe;
    uint32_t first_ar;     /* pipeline index of the first AR stage */
    int32_t voc;           /* pipeline index of the vocoder, -1 none */
    uint32_t play_p;       /* no vocoder: the last AR stage, whose tokens a spoken turn's
                              client plays */
    uint32_t ar_ord[CZ_MAX_STAGES]; /* AR ordinal of each pipeline stage */
    rep_rt *reps;
    uint32_t n_reps;
    uint32_t rep_off[CZ_MAX_STAGES]; /* first replica of each stage */
    gpu_rt *gpus;
    /* devices to dispatch: those whose replicas changed since their last dispatch, so an
     * event costs what it touches, not the fleet (dirty[0 .. n_dirty)) */
    uint32_t *dirty, *dirty_next;
    uint32_t n_dirty;
    uint32_t *always;      /* devices with gpu_rt.always */
    uint32_t n_always;
    /* routers (docs/policies.md, "Routers"): per stage, its replicas by the load the
     * router sees (least first, ties to the lowest index), and round robin's next */
    cz_evidx by_load[CZ_MAX_STAGES];
    uint32_t rr_next[CZ_MAX_STAGES];
    uint32_t route_stage;  /* the stage route() is routing (its view's) */
    uint32_t order;        /* how the stages' replicas are kept in order for the router
                              (ORDER_*) */
    /* llm_d: per stage, its replicas by the waiting queue (level) and KV use (key) the
     * router sees */
    cz_lvheap by_queue[CZ_MAX_STAGES];
    /* the prefix-aware routers (llm_d, kv_router) with prefix caching at the stages that
     * read a turn's prompt from an empty context (the first autoregressive stage; with
     * disaggregation, both pools): per such stage, the blocks its replicas hold cached, by
     * hash (always as the caches are), and a turn's scratch */
    cz_kvindex kvx[2];
    uint32_t n_kvx;
    int8_t kvx_of[CZ_MAX_STAGES]; /* the stage's index into kvx, or -1 */
    uint64_t *rt_hash;     /* the routed turn's block hashes */
    size_t cap_rt_hash;
    uint32_t *mt_rep, *mt_len; /* cz_kvindex_match's answer (a stage's replicas) */
    cz_router_cand *cand;  /* the view's candidates (every replica of any stage) */
    uint32_t *sig_changed; /* replicas whose load changed since the last publication */
    uint32_t n_sig_changed;
    bool sig_pending;      /* a CZ_TIMER_SIGNAL is set */
    double kv_bytes_per_token[CZ_MAX_STAGES];
    /* per-session and per-turn arrays cover sessions [ses0, ...) and turns [turn0, ...):
     * the whole workload, or a streamed workload's window (they move with it) */
    uint32_t ses0, turn0;
    size_t cap_ses_arr, cap_turn_arr;
    bool streamed;         /* sessions are produced as they arrive (cz_workload_stream) */
    bool live;             /* sessions are pushed as requests come (cz_workload_live) */
    uint32_t low;          /* streamed: every session below is closed */
    uint32_t *turn_session;
    /* per-session state lives in slots held while the session is open (from the first
     * time it is touched to its close), in chunks of SLOT_CHUNK that never move, so the
     * state follows the sessions open at once rather than the workload */
    uint32_t *slot_of;     /* per workload session: its slot, NONE before it opens,
                              CLOSED after */
    ses_rt **ses_chunk;    /* slot s: ses_chunk[s / SLOT_CHUNK][s % SLOT_CHUNK] */
    ses_stage **sp_chunk;  /* SLOT_CHUNK x n_pipe per chunk */
    cz_player **pl_chunk;  /* audio pipelines */
    size_t n_chunks;
    uint32_t n_slots;      /* slots ever made */
    uint32_t *free_slots;
    size_t n_free, cap_free;
    /* the open session looked up last and its state (memo_si NONE: none): a handler reads
     * one session's state many times, and the slot's chunks never move */
    uint32_t memo_si;
    ses_rt *memo_ses;
    ses_stage *memo_sp;    /* its n_pipe stages */
    ses_rt closed_ses;     /* what a closed session reads as (rebuilt on each access) */
    ses_stage *closed_sp;  /* n_pipe */
    cz_player closed_pl;
    stream_rt *streams;
    uint32_t *initial;     /* pre-timed arrivals by time (whole workloads; a streamed one
                              arrives in session order: initial i is session i's first) */
    uint32_t n_initial, next_initial;
    uint32_t *bounded;     /* sessions waiting for a concurrency slot, by time (likewise) */
    uint32_t n_bounded, next_bounded;
    gsl_rng *rng;
    uint64_t arrived, finished;
    uint64_t progress;     /* arrivals, turn ends, frames recorded and steps completed */
    double now_s;          /* the time of the driver's report being handled */
    bool runs;             /* decode runs (cz_driver.run): the driver plans them, and the
                              router reads no load that a decode step changes */
    bool stalled;          /* the driver's watchdog stopped the run (cz_deploy_stalled) */
    uint8_t *turn_out;     /* per workload turn: its outcome once decided (0: open) */
    /* the session gateway */
    cz_admission adm;
    uint32_t live_streams;
    double tick_max_lat_s;   /* the longest Step wait recorded since the last gateway tick */
    double streams_end_s;    /* when the last stream ends */
    double last_start_s;     /* when the last stream starts (arrivals stop) */
    uint32_t cap_at_last_s;  /* the gateway's cap when the last session arrived */
    double live_since_s;     /* live-session time integral over the second half of the
                                arrivals, [last_start_s / 2, last_start_s] */
    double live_area;
    uint64_t end_blocks_sum;  /* KV blocks sessions held when they ended */
    uint32_t n_ended;
    uint64_t pd_pulls;        /* disaggregation: KV transfers from prefill to decode */
    double pd_pull_bytes;
} cz_deploy;

/* Session si and turn g of the workload. */
static inline const cz_session *WS(const cz_deploy *S, uint32_t si)
{
    return cz_workload_session_at(S->wl, si);
}
static inline const cz_turn *WT(const cz_deploy *S, uint32_t g)
{
    return cz_workload_turn_at(S->wl, g);
}

/* The per-session and per-turn arrays' entries (sessions below ses0 are closed). */
/* Device gi is dispatched at the end of the event. */
static inline void gpu_mark(cz_deploy *S, uint32_t gi)
{
    gpu_rt *g = &S->gpus[gi];
    if (!g->dirty) {
        g->dirty = true;
        S->dirty[S->n_dirty++] = gi;
    }
}

/* Replica ri, whose state the caller may change: its device is dispatched at the end of
 * the event (a device no event touched has nothing new to start). */
static inline rep_rt *REP(cz_deploy *S, uint32_t ri)
{
    rep_rt *r = &S->reps[ri];
    gpu_mark(S, r->gpu);
    return r;
}

static double run_sync(cz_deploy *S, uint32_t ri, double until, bool cut);

/* Replica ri's serving core, as of the report being handled: a decode run on it is
 * brought up to now and ends with the step in flight (run_sync), so that the caller may
 * read or change it. */
static inline cz_server *SRV(cz_deploy *S, uint32_t ri)
{
    rep_rt *r = &S->reps[ri];
    if (r->run_m > 0)
        run_sync(S, ri, S->now_s, true);
    return r->srv;
}

static inline cz_server *RSRV(cz_deploy *S, rep_rt *r)
{
    return SRV(S, (uint32_t)(r - S->reps));
}

static inline uint32_t *SLOT_OF(cz_deploy *S, uint32_t si)
{
    CZ_ASSERT(si >= S->ses0 && si < S->wl->n_sessions);
    return &S->slot_of[si - S->ses0];
}
static inline uint32_t TURN_SES(const cz_deploy *S, uint32_t g)
{
    CZ_ASSERT(g >= S->turn0 && g < S->wl->n_turns);
    return S->turn_session[g - S->turn0];
}
static inline uint8_t *TURN_OUT(cz_deploy *S, uint32_t g)
{
    CZ_ASSERT(g >= S->turn0 && g < S->wl->n_turns);
    return &S->turn_out[g - S->turn0];
}

/* Session si's slot entry: CLOSED below the window. */
static inline uint32_t slot_of(cz_deploy *S, uint32_t si)
{
    return si < S->ses0 ? CLOSED : *SLOT_OF(S, si);
}

/* The slot of session si, opened now if it was not (a session's state starts as it was
 * before: no turn, no sequences); NONE for a closed session. */
static uint32_t slot_open(cz_deploy *S, uint32_t si);

static inline uint32_t slot(cz_deploy *S, uint32_t si)
{
    CZ_ASSERT(si < S->wl->n_sessions);
    uint32_t k = slot_of(S, si);
    if (k != NONE)
        return k == CLOSED ? NONE : k;
    return slot_open(S, si);
}

static uint32_t slot_open(cz_deploy *S, uint32_t si)
{
    uint32_t k;
    if (S->n_free > 0) {
        k = S->free_slots[--S->n_free];
    } else {
        k = S->n_slots++;
        size_t c = k / SLOT_CHUNK;
        if (c == S->n_chunks) {
            /* a chunk per SLOT_CHUNK sessions open at once */
            size_t n = S->n_chunks + 1;
            S->ses_chunk = cz_xrealloc(S->ses_chunk, n, sizeof *S->ses_chunk);
            S->sp_chunk = cz_xrealloc(S->sp_chunk, n, sizeof *S->sp_chunk);
            S->pl_chunk = cz_xrealloc(S->pl_chunk, n, sizeof *S->pl_chunk);
            S->ses_chunk[c] = cz_xmalloc(SLOT_CHUNK * sizeof **S->ses_chunk);
            S->sp_chunk[c] = cz_xmalloc((size_t)SLOT_CHUNK * S->n_pipe * sizeof **S->sp_chunk);
            S->pl_chunk[c] = cz_xmalloc(SLOT_CHUNK * sizeof **S->pl_chunk);
            S->n_chunks = n;
        }
    }
    *SLOT_OF(S, si) = k;
    ses_rt *ss = &S->ses_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK];
    *ss = (ses_rt){.g = NONE, .rec0 = UINT64_MAX};
    ses_stage *sp = &S->sp_chunk[k / SLOT_CHUNK][(size_t)(k % SLOT_CHUNK) * S->n_pipe];
    for (uint32_t p = 0; p < S->n_pipe; p++)
        sp[p] = (ses_stage){.rep = NONE, .seq = NONE};
    memset(&S->pl_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK], 0, sizeof(cz_player));
    return k;
}

/* A closed session as every late event reads it: every turn arrived, submitted and
 * ended, nothing open, no sequence; what such an event writes is dropped. */
static void closed_view(cz_deploy *S, uint32_t si)
{
    /* a session gone from a streamed workload's window reads as having ended many turns */
    uint32_t n = si >= S->wl->ses_base ? WS(S, si)->n_turns : UINT32_MAX / 2;
    S->closed_ses = (ses_rt){.arrived = n, .submitted = n, .ended = n, .g = NONE,
                             .rec0 = UINT64_MAX};
    for (uint32_t p = 0; p < S->n_pipe; p++)
        S->closed_sp[p] = (ses_stage){.rep = NONE, .seq = NONE, .done = true};
    memset(&S->closed_pl, 0, sizeof S->closed_pl);
}

/* Session si's state, its slot opened if it was not; false for a closed session. The
 * memo of the last session looked up spares most lookups (slot_close forgets it). */
static inline bool memo(cz_deploy *S, uint32_t si)
{
    if (si == S->memo_si)
        return true;
    uint32_t k = slot(S, si);
    if (k == NONE)
        return false;
    S->memo_si = si;
    S->memo_ses = &S->ses_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK];
    S->memo_sp = &S->sp_chunk[k / SLOT_CHUNK][(size_t)(k % SLOT_CHUNK) * S->n_pipe];
    return true;
}

static inline ses_rt *SES(cz_deploy *S, uint32_t si)
{
    if (memo(S, si))
        return S->memo_ses;
    closed_view(S, si);
    return &S->closed_ses;
}

static inline ses_stage *SP(cz_deploy *S, uint32_t si, uint32_t p)
{
    CZ_ASSERT(p < S->n_pipe);
    if (memo(S, si))
        return S->memo_sp + p;
    closed_view(S, si);
    return &S->closed_sp[p];
}

static cz_player *PLAYER(cz_deploy *S, uint32_t si)
{
    uint32_t k = slot(S, si);
    if (k == NONE) {
        closed_view(S, si);
        return &S->closed_pl;
    }
    return &S->pl_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK];
}

/* Streamed: moves `low` past the closed sessions. Every turn not decided yet, or still to
 * come, then arrives no earlier than session low's first turn (sessions come in order of
 * first arrival): the recorder may fix vLLM's peak origin (cz_metrics_settled). */
static void advance_low(cz_deploy *S)
{
    if (!S->streamed)
        return;
    uint32_t was = S->low;
    while (S->low < S->wl->ses_end && *SLOT_OF(S, S->low) == CLOSED)
        S->low++;
    if (S->low != was && S->low < S->wl->ses_end)
        cz_metrics_settled(S->m, WT(S, WS(S, S->low)->turn_off)->arrival_s);
}

/* Session si is closed: its slot goes back for the next session to open. */
static void slot_close(cz_deploy *S, uint32_t si)
{
    uint32_t k = *SLOT_OF(S, si);
    CZ_ASSERT(k != NONE && k != CLOSED);
    if (S->memo_si == si)
        S->memo_si = NONE;
    cz_grow((void **)&S->free_slots, &S->cap_free, S->n_free + 1, sizeof *S->free_slots);
    S->free_slots[S->n_free++] = k;
    *SLOT_OF(S, si) = CLOSED;
    advance_low(S);
}

/* Streamed: the window's sessions below `low` are done with; the workload may drop them,
 * and the per-session and per-turn arrays follow it. Called only where no pointer into
 * the window is held (before producing the next session). */
static void window_release(cz_deploy *S)
{
    cz_workload *wl = S->wl;
    cz_workload_release(wl, S->low);
    if (wl->ses_base == S->ses0)
        return;
    uint32_t ds = wl->ses_base - S->ses0, dt = wl->turn_base - S->turn0;
    memmove(S->slot_of, S->slot_of + ds, (size_t)(wl->ses_end - wl->ses_base) * sizeof *S->slot_of);
    memmove(S->turn_session, S->turn_session + dt,
            (size_t)(wl->turn_end - wl->turn_base) * sizeof *S->turn_session);
    memmove(S->turn_out, S->turn_out + dt, (size_t)(wl->turn_end - wl->turn_base));
    S->ses0 = wl->ses_base;
    S->turn0 = wl->turn_base;
}

static void track_window(cz_deploy *S, uint32_t s_from, uint32_t t_from);

/* Makes sure session si has been produced (a streamed workload makes it now, and the
 * per-session and per-turn arrays cover it); false past the last session. */
static bool pull(cz_deploy *S, uint32_t si)
{
    cz_workload *wl = S->wl;
    if (!S->streamed || si < wl->ses_end)
        return si < wl->n_sessions;
    window_release(S);
    uint32_t s_from = wl->ses_end, t_from = wl->turn_end;
    if (!cz_workload_fill(wl, si))
        return false;
    track_window(S, s_from, t_from);
    return true;
}

/* The per-session and per-turn arrays cover the window's sessions from s_from and turns
 * from t_from, just produced or pushed. */
static void track_window(cz_deploy *S, uint32_t s_from, uint32_t t_from)
{
    cz_workload *wl = S->wl;
    uint32_t ns = wl->ses_end - S->ses0, nt = wl->turn_end - S->turn0;
    cz_grow((void **)&S->slot_of, &S->cap_ses_arr, ns, sizeof *S->slot_of);
    size_t had = S->cap_turn_arr;
    cz_grow((void **)&S->turn_session, &S->cap_turn_arr, nt, sizeof *S->turn_session);
    if (S->cap_turn_arr != had || !S->turn_out) /* turn_session's capacity */
        S->turn_out = cz_xrealloc(S->turn_out, S->cap_turn_arr, 1);
    for (uint32_t x = s_from; x < wl->ses_end; x++) {
        const cz_session *ses = WS(S, x);
        /* a streamed session's later turns follow its replies */
        CZ_ASSERT(ses->n_turns == 1 || ses->timing == CZ_TIMING_CLOSED);
        S->slot_of[x - S->ses0] = NONE;
        for (uint32_t k = 0; k < ses->n_turns; k++)
            S->turn_session[ses->turn_off + k - S->turn0] = x;
    }
    memset(S->turn_out + (t_from - S->turn0), 0, wl->turn_end - t_from);
}

/* Turn g of session si ends in `outcome` at `now`: recorded once (a second outcome for
 * one turn is a bug). */
static void turn_outcome(cz_deploy *S, uint32_t si, uint32_t g, uint32_t outcome,
                         uint32_t stage, double now)
{
    CZ_ASSERT(*TURN_OUT(S, g) == 0);
    *TURN_OUT(S, g) = (uint8_t)outcome;
    /* a session never opened (its turns unfinished at the end of the run) has no record */
    uint32_t k = slot_of(S, si);
    const ses_rt *ss = k == NONE || k == CLOSED ? NULL : SES(S, si);
    const cz_session *ses = WS(S, si);
    cz_turn_record t = {
        .session = si,
        .req = ss && ss->g == g ? ss->rec0 : UINT64_MAX,
        .end_s = now,
        .turn = g - ses->turn_off,
        .cls = (uint32_t)ses->cls,
        .outcome = outcome,
        .stage = stage,
    };
    /* the record's tokens before the outcome lets the recorder retire it */
    uint32_t out = S->drv.turn_end && t.req != UINT64_MAX
                       ? cz_metrics_req(S->m, t.req)->output_tokens
                       : 0;
    cz_metrics_add_turn(S->m, &t);
    if (S->drv.turn_end)
        S->drv.turn_end(S->drv.ctx, si, t.turn, outcome, out, now);
}

/* ---- sorting the arrivals ---- */

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

/* Sorts ids[0..n) by times[k] (the arrival of ids[k]). Arrivals mostly come in order:
 * an input already strictly ordered by cmp_key (no NaN, every pair in order) is the sort's
 * only possible result and is left as it is. */
void cz_sort_by_time(uint32_t *ids, const double *times, uint32_t n)
{
    uint32_t in_order = 1; /* the leading ids already in order */
    while (in_order < n &&
           (times[in_order - 1] < times[in_order] ||
            (times[in_order - 1] == times[in_order] && ids[in_order - 1] < ids[in_order])))
        in_order++;
    if (in_order >= n)
        return;
    sort_key *k = cz_xmalloc(n * sizeof *k);
    for (uint32_t i = 0; i < n; i++)
        k[i] = (sort_key){times[i], ids[i]};
    qsort(k, n, sizeof *k, cmp_key);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = k[i].idx;
    free(k);
}

/* ---- routing ---- */

/* How the runtime keeps each stage's replicas in order for its router. */
enum {
    ORDER_NONE = 0, /* round_robin, power_of_two, random: no order */
    ORDER_LOAD,     /* session, least_loaded, vllm_dp: by_load on the load the router sees */
    ORDER_ACTIVE,   /* kv_router: by_load on kv_load */
    ORDER_QUEUE_KV  /* llm_d: by_queue on (the queue, the KV use) the router sees */
};

/* The load the router sees on replica ri (cz_router_config.signal_delay_s). */
static inline uint32_t seen_load(const cz_deploy *S, const rep_rt *r)
{
    return S->cfg->router.signal_delay_s > 0 ? r->pub + r->since : r->load;
}

/* llm_d: the KV cache utilization the router sees on replica r (published like its
 * load; 0 for an encoder or vocoder, which holds no KV). */
static inline double seen_kv_use(const cz_deploy *S, const rep_rt *r)
{
    if (!r->srv)
        return 0.0;
    uint32_t kv = S->cfg->router.signal_delay_s > 0 ? r->kv_pub : r->kv_now;
    return (double)kv / (double)r->kv_blocks;
}

/* kv_router: replica r's load, exact (the router's own count, as Dynamo's router tracks
 * its workers' active blocks): its active blocks, or an encoder's or vocoder's
 * outstanding jobs. */
static inline uint32_t kv_load(const rep_rt *r)
{
    return r->srv ? r->active : r->outstanding;
}

/* Replica ri's place in its stage's order follows what the router sees. */
static void load_order(cz_deploy *S, uint32_t ri)
{
    const rep_rt *r = &S->reps[ri];
    if (S->cfg->place[r->p].replicas <= 1)
        return;
    uint32_t k = ri - S->rep_off[r->p];
    switch (S->order) {
    case ORDER_LOAD: cz_evidx_set(&S->by_load[r->p], k, -(double)seen_load(S, r)); break;
    case ORDER_ACTIVE: cz_evidx_set(&S->by_load[r->p], k, -(double)kv_load(r)); break;
    case ORDER_QUEUE_KV:
        /* without a KV term, a queue's lowest index is its best (cz_router_llmd_free) */
        cz_lvheap_set(&S->by_queue[r->p], k, seen_load(S, r),
                      S->cfg->router.kv_weight > 0 ? seen_kv_use(S, r) : 0.0);
        break;
    default: break;
    }
}

/* Replica ri's load or KV use changed: with delayed signals it publishes them at the next
 * multiple of signal_delay_s. */
static void signal_changed(cz_deploy *S, uint32_t ri, double now)
{
    rep_rt *r = &S->reps[ri];
    double dt = S->cfg->router.signal_delay_s;
    if (!r->sig_dirty) {
        r->sig_dirty = true;
        S->sig_changed[S->n_sig_changed++] = ri;
    }
    if (!S->sig_pending) {
        S->sig_pending = true;
        double next = (floor(now / dt) + 1) * dt;
        if (!(next > now))
            next = nextafter(now, INFINITY);
        S->drv.timer(S->drv.ctx, next, CZ_TIMER_SIGNAL, 0, 0);
    }
}

/* What the router reads of replica ri changed: it sees it now, or with delayed signals at
 * the next publication (every signal_delay_s). */
static void router_learns(cz_deploy *S, uint32_t ri, double now)
{
    if (S->cfg->router.signal_delay_s > 0)
        signal_changed(S, ri, now);
    else
        load_order(S, ri);
}

/* Replica ri's router load is now `load`. */
static void load_set(cz_deploy *S, uint32_t ri, uint32_t load, double now)
{
    rep_rt *r = &S->reps[ri];
    if (load == r->load)
        return;
    r->load = load;
    router_learns(S, ri, now);
}

/* llm_d: replica ri's serving core holds `kv` blocks in use; the router learns it as it
 * learns the load. */
static void kv_set(cz_deploy *S, uint32_t ri, uint32_t kv, double now)
{
    rep_rt *r = &S->reps[ri];
    if (kv == r->kv_now)
        return;
    r->kv_now = kv;
    router_learns(S, ri, now);
}

/* Whether replica ri's router load is its serving core's queues (vLLM's data-parallel
 * rule; llm_d's queue scorer) rather than its outstanding turns. */
static inline bool load_from_queues(const cz_deploy *S, const rep_rt *r)
{
    return (S->cfg->router.policy == CZ_ROUTER_VLLM_DP ||
            S->cfg->router.policy == CZ_ROUTER_LLM_D) &&
           r->srv;
}

/* Replica ri's outstanding turns or jobs change by `delta`. */
static void load_add(cz_deploy *S, uint32_t ri, int32_t delta, double now)
{
    rep_rt *r = &S->reps[ri];
    CZ_ASSERT(delta >= 0 || r->outstanding >= (uint32_t)-delta);
    r->outstanding = (uint32_t)((int64_t)r->outstanding + delta);
    if (!load_from_queues(S, r))
        load_set(S, ri, r->outstanding, now);
    if (S->order == ORDER_ACTIVE && !r->srv)
        load_order(S, ri);
}

/* Blocks of `tokens` context tokens at AR stage p, as Dynamo's router counts them. */
static inline uint32_t ctx_blocks(const cz_deploy *S, uint32_t p, uint64_t tokens)
{
    uint64_t bt = S->cfg->place[p].server.block_tokens;
    return (uint32_t)((tokens + bt - 1) / bt);
}

/* kv_router: the open turn of session si at AR stage p adds its context's blocks, less
 * those already in use on its replica (ses_stage.held), to the replica's active blocks
 * (`start`, once the turn is given to its serving core), or gives back all it added (at
 * its end, before any cut of its context). Dynamo's router (its ActiveSequences) adds a
 * request's new blocks when it routes it and frees them when it ends; with output-block
 * tracking (router.track_output_blocks), each output token that starts a block adds one
 * more meanwhile (active_sync), and the end gives those back too: its context's blocks
 * less those at its start, as a session's turn is fed no input (op_apply). O(1). */
static void active_add(cz_deploy *S, uint32_t si, uint32_t p, bool start)
{
    if (S->order != ORDER_ACTIVE)
        return;
    ses_stage *st = SP(S, si, p);
    rep_rt *r = &S->reps[st->rep];
    if (!S->cfg->router.track_output_blocks) {
        if (start) {
            const cz_seq *q = cz_server_seq(RSRV(S, r), st->seq);
            uint32_t blocks = ctx_blocks(S, p, (uint64_t)q->tokens_in + q->generated);
            st->active = blocks > st->held ? blocks - st->held : 0;
            r->active += st->active;
        } else {
            CZ_ASSERT(r->active >= st->active);
            r->active -= st->active;
            st->active = 0;
        }
        load_order(S, st->rep);
        return;
    }
    cz_server *srv = RSRV(S, r);
    const cz_seq *q = cz_server_seq(srv, st->seq);
    uint32_t blocks = ctx_blocks(S, p, (uint64_t)q->tokens_in + q->generated);
    /* every block its tokens grew into was taken in when its step ended (active_sync) */
    CZ_ASSERT(r->grown == cz_server_ctx_grown(srv));
    if (start) {
        st->blocks0 = blocks;
        st->active = blocks > st->held ? blocks - st->held : 0;
        r->active += st->active;
    } else {
        CZ_ASSERT(blocks >= st->blocks0 && r->active >= st->active + (blocks - st->blocks0));
        r->active -= st->active + (blocks - st->blocks0);
        st->active = 0;
    }
    cz_server_count_ctx(srv, st->seq, start);
    load_order(S, st->rep);
}

/* kv_router with output-block tracking: replica ri's step ended: the blocks its open
 * turns' generated tokens started join its active blocks (Dynamo's router adds a block to
 * a request each time its output tokens fill one). Called as the step's end is taken in,
 * before anything routes: the fast-forward (step_again) and an ordinary step's end leave
 * the same count. O(1) (O(log replicas) when the count changed). */
static void active_sync(cz_deploy *S, uint32_t ri)
{
    if (S->order != ORDER_ACTIVE || !S->cfg->router.track_output_blocks)
        return;
    rep_rt *r = &S->reps[ri];
    uint64_t g = cz_server_ctx_grown(SRV(S, ri));
    if (g == r->grown)
        return;
    CZ_ASSERT(g > r->grown && g - r->grown <= UINT32_MAX - r->active);
    r->active += (uint32_t)(g - r->grown);
    r->grown = g;
    load_order(S, ri);
}

/* vllm_dp, llm_d: replica ri's load (and KV use) after its serving core changed (it was
 * dispatched: every change to a replica marks its device). */
static void load_refresh(cz_deploy *S, uint32_t ri, double now)
{
    const rep_rt *r = &S->reps[ri];
    if (!load_from_queues(S, r))
        return;
    if (S->cfg->router.policy == CZ_ROUTER_LLM_D) {
        load_set(S, ri, cz_server_waiting(r->srv), now);
        kv_set(S, ri, cz_server_kv_used(r->srv), now);
    } else {
        load_set(S, ri, 4 * cz_server_waiting(r->srv) + cz_server_running(r->srv), now);
    }
}

/* The replicas publish their loads: the router now sees them as they are. */
static void on_signal(cz_deploy *S)
{
    S->sig_pending = false;
    for (uint32_t i = 0; i < S->n_sig_changed; i++) {
        uint32_t ri = S->sig_changed[i];
        rep_rt *r = &S->reps[ri];
        r->pub = r->load;
        r->kv_pub = r->kv_now;
        r->since = 0;
        r->sig_dirty = false;
        load_order(S, ri);
    }
    S->n_sig_changed = 0;
}

/* The router's view of the stage being routed (cz_deploy.route_stage). */
static uint32_t route_load(const void *ctx, uint32_t r)
{
    const cz_deploy *S = ctx;
    return seen_load(S, &S->reps[S->rep_off[S->route_stage] + r]);
}

static uint32_t route_least(const void *ctx)
{
    const cz_deploy *S = ctx;
    if (S->order == ORDER_QUEUE_KV)
        return cz_router_llmd_free(&S->cfg->router, &S->by_queue[S->route_stage]);
    return cz_evidx_top(&S->by_load[S->route_stage]);
}

static uint32_t route_kv_load(const void *ctx, uint32_t r)
{
    const cz_deploy *S = ctx;
    return kv_load(&S->reps[S->rep_off[S->route_stage] + r]);
}

static double route_kv_use(const void *ctx, uint32_t r)
{
    const cz_deploy *S = ctx;
    return seen_kv_use(S, &S->reps[S->rep_off[S->route_stage] + r]);
}

static bool stage_is_ar(const cz_deploy *S, uint32_t p);
static uint32_t turn_in_tokens(const cz_turn *t);

/* The prefix-aware routers' part of the view of stage p for turn g of session si: the
 * turn's context and the replicas holding a prefix of it cached. A session with history
 * on its replica (a later turn) sends it with the turn, as a client resends the
 * conversation: only that replica can hold it (its blocks chain the session's lineage),
 * cached as far as cz_server_seq_cached_blocks finds. A turn with no history is named by
 * the trace's hashes at the first AR stage (Mooncake's hash_ids): the index gives every
 * replica's longest cached prefix of them. */
static void route_prefix_view(cz_deploy *S, uint32_t si, uint32_t p, uint32_t g,
                              cz_router_view *v)
{
    const ses_stage *st = SP(S, si, p);
    uint32_t base = S->rep_off[p];
    v->n_cand = 0;
    v->cand = S->cand;
    v->block_tokens = 1;
    v->tokens = 0;
    if (!stage_is_ar(S, p))
        return; /* an encoder or vocoder: no KV to reuse */
    v->block_tokens = S->cfg->place[p].server.block_tokens;
    const cz_turn *t = WT(S, g);
    uint64_t hist = 0;
    if (st->rep != NONE && st->seq != NONE) {
        const cz_seq *q = cz_server_seq(SRV(S, st->rep), st->seq);
        hist = (uint64_t)q->tokens_in + q->generated;
    }
    uint64_t tokens = hist + turn_in_tokens(t);
    v->tokens = tokens < UINT32_MAX ? (uint32_t)tokens : UINT32_MAX;
    if (hist > 0) {
        uint32_t held, c = cz_server_seq_cached_blocks(SRV(S, st->rep), st->seq, &held);
        if (c > 0)
            S->cand[v->n_cand++] = (cz_router_cand){st->rep - base, c, held};
        return;
    }
    if (S->kvx_of[p] < 0)
        return;
    const cz_turn_hashes th = {cz_workload_turn_hashes(S->wl, t), t->hash_len,
                               S->wl->hash_block_tokens};
    uint32_t in = turn_in_tokens(t);
    uint32_t nb = cz_turn_block_count(v->block_tokens, in, &th);
    cz_grow((void **)&S->rt_hash, &S->cap_rt_hash, nb ? nb : 1, sizeof *S->rt_hash);
    nb = cz_turn_block_hashes(v->block_tokens, in, &th, S->rt_hash, nb);
    uint32_t n = S->cfg->place[p].replicas;
    uint32_t m = cz_kvindex_match(&S->kvx[S->kvx_of[p]], S->rt_hash, nb, 0, n, S->mt_rep,
                                  S->mt_len);
    bool kv = S->cfg->router.policy == CZ_ROUTER_KV;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t held = kv ? cz_server_held_prefix(S->reps[base + S->mt_rep[i]].srv, S->rt_hash,
                                                   S->mt_len[i])
                           : 0;
        S->cand[v->n_cand++] = (cz_router_cand){S->mt_rep[i], S->mt_len[i], held};
    }
}

/* The replica of stage p that serves turn g of session si (cz_route). */
static uint32_t route(cz_deploy *S, uint32_t si, uint32_t p, uint32_t g)
{
    uint32_t base = S->rep_off[p], n = S->cfg->place[p].replicas;
    if (n == 1)
        return base;
    const cz_router_config *rc = &S->cfg->router;
    ses_stage *st = SP(S, si, p);
    if (rc->policy == CZ_ROUTER_RANDOM || rc->policy == CZ_ROUTER_POWER_OF_TWO)
        cz_rng_reseed(S->rng, S->cfg->seed, CZ_RNG_ROUTER, (uint64_t)g * CZ_MAX_STAGES + p);
    S->route_stage = p;
    cz_router_view v = {.n = n, .sticky = st->rep != NONE ? st->rep - base : UINT32_MAX,
                        .rr_next = S->rr_next[p], .rng = S->rng, .ctx = S,
                        .load = route_load, .least = route_least};
    if (rc->policy == CZ_ROUTER_LLM_D || rc->policy == CZ_ROUTER_KV) {
        route_prefix_view(S, si, p, g, &v);
        if (rc->policy == CZ_ROUTER_KV) {
            v.load = route_kv_load;
        } else {
            v.kv_use = route_kv_use;
            v.queue_min = cz_lvheap_lo(&S->by_queue[p]);
            v.queue_max = cz_lvheap_hi(&S->by_queue[p]);
        }
    }
    uint32_t ri = base + cz_route(rc, &v);
    if (rc->policy == CZ_ROUTER_KV) {
        st->held = 0;
        for (uint32_t i = 0; i < v.n_cand; i++)
            if (v.cand[i].r == ri - base)
                st->held = v.cand[i].held;
    }
    if (rc->policy == CZ_ROUTER_ROUND_ROBIN)
        S->rr_next[p] = S->rr_next[p] + 1 == n ? 0 : S->rr_next[p] + 1;
    if (rc->signal_delay_s > 0) {
        /* the router counts what it sends until the replica's next publication (vLLM's
         * data-parallel client: as waiting, weighed 4; llm_d: one more waiting) */
        const rep_rt *r = &S->reps[ri];
        S->reps[ri].since += rc->policy == CZ_ROUTER_VLLM_DP && r->srv ? 4 : 1;
        load_order(S, ri);
    }
    return ri;
}

/* ---- dispatch ---- */

/* Hands the transfers replica `ri` asked for to the driver, over its device's host link. */
static void run_xfers(cz_deploy *S, uint32_t ri, double now)
{
    rep_rt *r = &S->reps[ri];
    if (!r->srv)
        return;
    uint32_t n;
    const cz_xfer *x = cz_server_take_xfers(RSRV(S, r), &n);
    for (uint32_t i = 0; i < n; i++) {
        double bytes = x[i].tokens * S->kv_bytes_per_token[r->p];
        if (!x[i].remote) {
            S->drv.xfer(S->drv.ctx, ri, r->gpu, &x[i], bytes, now);
            continue;
        }
        /* a decode replica pulls the turn's KV from the prefill replica that holds it
         * (DistServe, section 4.3: the decoding instance fetches it when it admits the
         * request) */
        uint32_t si = (uint32_t)cz_server_seq(RSRV(S, r), x[i].seq)->session;
        ses_rt *ss = SES(S, si);
        const ses_stage *src = SP(S, si, CZ_PD_PREFILL);
        CZ_ASSERT(S->cfg->pd && r->p == CZ_PD_DECODE && !ss->pd_pulling && src->open &&
                  src->seq != NONE);
        ss->pd_pulling = true;
        S->pd_pulls++;
        S->pd_pull_bytes += bytes;
        cz_server_note_sent(SRV(S, src->rep), x[i].tokens);
        S->drv.pull(S->drv.ctx, ri, &x[i], src->rep, src->seq, bytes, now);
    }
}

/* Hands step `st` of replica r to the driver on device gi. */
static void step_start(cz_deploy *S, uint32_t gi, rep_rt *r, const cz_deploy_step *st,
                       double now)
{
    r->busy = true;
    S->gpus[gi].inflight++;
    S->drv.step(S->drv.ctx, st, now);
}

/* An idle device whose stages deferred work asks to be dispatched again at `wake` (at the
 * latest); one pending wake-up per device, the earliest. */
static void gpu_wake(cz_deploy *S, uint32_t gi, double wake, double now)
{
    gpu_rt *g = &S->gpus[gi];
    if (!(wake < INFINITY))
        return;
    /* strictly later than now: a nanosecond, or the next double where a nanosecond is
     * below the clock's resolution (t > 2^23 s), else the wake-up fires at now for ever */
    wake = fmax(wake, fmax(now + 1e-9, nextafter(now, INFINITY)));
    if (wake < g->wake_s) {
        g->wake_s = wake;
        S->drv.timer(S->drv.ctx, wake, CZ_TIMER_WAKE, gi, 0);
    }
}

/* True when no replica of pipeline stage p has a turn open: an autoregressive stage has
 * nothing left to run. */
static bool stage_idle(const cz_deploy *S, uint32_t p)
{
    for (uint32_t k = 0; k < S->cfg->place[p].replicas; k++)
        if (S->reps[S->rep_off[p] + k].outstanding > 0)
            return false;
    return true;
}

/* VoxServe's detokenizer (cz_voxserve_detok_pick): the vocoder replica runs only when an
 * urgent request has a chunk queued, urgent requests first; otherwise the GPU is woken
 * when the first queued chunk becomes urgent. In throughput mode it waits for a full batch
 * or for the LLM feeding it to run out of work (section 4.3.3). */
static uint32_t detok_schedule(cz_deploy *S, uint32_t gi, rep_rt *r, double now,
                               uint64_t *tokens)
{
    uint32_t n = cz_jobq_len(&r->jq);
    if (n == 0)
        return 0;
    if (n > r->dcap) {
        size_t cap = r->dcap;
        cz_grow((void **)&r->djobs, &cap, n, sizeof *r->djobs);
        cap = r->dcap;
        cz_grow((void **)&r->dcands, &cap, n, sizeof *r->dcands);
        cap = r->dcap;
        cz_grow((void **)&r->dpos, &cap, n, sizeof *r->dpos);
        r->dcap = cap;
    }
    int32_t from = S->cfg->model.pipe[r->p].from;
    for (uint32_t i = 0; i < n; i++) {
        const cz_job *j = cz_jobq_peek(&r->jq, i);
        const ses_stage *st = SP(S, j->owner, (uint32_t)from);
        bool live = SES(S, j->owner)->g == j->tag && st->seq != NONE;
        r->djobs[i] = (cz_detok_job){
            .q = live ? cz_server_seq(SRV(S, st->rep), st->seq) : NULL, .pos = i};
    }
    double wake;
    const cz_policy_params *pp = &S->cfg->place[r->p].policy.params;
    bool upstream_idle = pp->throughput_mode && stage_idle(S, (uint32_t)from);
    uint32_t k = cz_voxserve_detok_pick(pp, r->djobs, n, now, r->jq.max_batch, upstream_idle,
                                        r->dcands, r->dpos, &wake);
    if (k == 0) {
        gpu_wake(S, gi, wake, now);
        return 0;
    }
    return cz_jobq_schedule_picked(&r->jq, r->dpos, k, tokens);
}

/* A device asks its idle replicas for work in turn, starting after the last one served:
 * synchronous, only when no step is in flight, and the first that has work runs;
 * asynchronous, every idle replica that has work starts a step. */
static void dispatch_run(cz_deploy *S, uint32_t gi, double now)
{
    gpu_rt *g = &S->gpus[gi];
    if (!g->async && g->inflight > 0)
        return;
    double wake = INFINITY; /* the earliest look-again a stage's policy asked for */
    bool started = false;
    for (uint32_t i = 0; i < g->n_reps; i++) {
        uint32_t k = g->rr + i; /* (rr + i) % n_reps: rr < n_reps */
        uint32_t ri = g->reps[k < g->n_reps ? k : k - g->n_reps];
        rep_rt *r = &S->reps[ri];
        if (r->busy)
            continue;
        cz_deploy_step st = {.rep = ri, .p = r->p, .gpu = gi, .srv = r->srv};
        bool run = false;
        cz_batch b;
        if (r->srv) {
            if (cz_server_schedule(RSRV(S, r), now, &b)) {
                st.batch = &b;
                run = true;
            } else {
                wake = fmin(wake, cz_server_wake_at(RSRV(S, r)));
            }
            run_xfers(S, ri, now);
        } else {
            uint64_t tokens;
            uint32_t n = r->detok_rule ? detok_schedule(S, gi, r, now, &tokens)
                                       : cz_jobq_schedule(&r->jq, &tokens);
            if (n) {
                st.jobs = r->jq.batch;
                st.n_jobs = n;
                st.job_tokens = tokens;
                run = true;
            }
        }
        if (run) {
            step_start(S, gi, r, &st, now);
            started = true;
            if (!g->async) {
                g->rr = (g->rr + i + 1) % g->n_reps;
                break;
            }
        }
    }
    if (started)
        S->drv.launched(S->drv.ctx, gi, now);
    /* a synchronous device that started a step is dispatched again when it ends; an
     * asynchronous one may hold a deferring stage beside a step in flight */
    if (!started || g->async)
        gpu_wake(S, gi, wake, now);
}

/* dispatch_run; under vllm_dp, the device's replicas' loads then follow their queues */
static void dispatch(cz_deploy *S, uint32_t gi, double now)
{
    dispatch_run(S, gi, now);
    if (S->cfg->router.policy == CZ_ROUTER_VLLM_DP || S->cfg->router.policy == CZ_ROUTER_LLM_D) {
        const gpu_rt *g = &S->gpus[gi];
        for (uint32_t i = 0; i < g->n_reps; i++)
            load_refresh(S, g->reps[i], now);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Dispatches the devices the event touched (and those dispatched on every event), in
 * device order. A device marked while they are dispatched waits for the next event. */
static void dispatch_all(cz_deploy *S, double now)
{
    for (uint32_t i = 0; i < S->n_always; i++)
        gpu_mark(S, S->always[i]);
    uint32_t n = S->n_dirty, *list = S->dirty;
    if (n > 1) {
        if (n <= 16) {
            for (uint32_t i = 1; i < n; i++)
                for (uint32_t k = i; k > 0 && list[k - 1] > list[k]; k--) {
                    uint32_t t = list[k];
                    list[k] = list[k - 1];
                    list[k - 1] = t;
                }
        } else {
            qsort(list, n, sizeof *list, cmp_u32);
        }
    }
    S->dirty = S->dirty_next;
    S->dirty_next = list;
    S->n_dirty = 0;
    for (uint32_t i = 0; i < n; i++) {
        S->gpus[list[i]].dirty = false;
        dispatch(S, list[i], now);
    }
}

/* The sequence of session `si` at AR stage `p` on the replica the router picks; a
 * session moved to another replica leaves its KV behind. */
static uint32_t stage_seq(cz_deploy *S, uint32_t si, uint32_t p, uint32_t g)
{
    ses_stage *st = SP(S, si, p);
    uint32_t ri = route(S, si, p, g);
    if (st->rep != ri && st->seq != NONE) {
        cz_server_seq_close(SRV(S, st->rep), st->seq);
        st->seq = NONE;
    }
    st->rep = ri;
    if (st->seq == NONE)
        st->seq = cz_server_seq_open(SRV(S, ri), si, (uint32_t)WS(S, si)->cls, false);
    return st->seq;
}

/* ---- deferred operations ---- */

static void op_apply(cz_deploy *S, rep_rt *r, const deferred_op *op, double now);

static void op_submit(cz_deploy *S, uint32_t ri, deferred_op op, double now)
{
    rep_rt *r = REP(S, ri);
    if (!r->busy) {
        op_apply(S, r, &op, now);
        run_xfers(S, ri, now);
        return;
    }
    /* the operation waits for the step in flight to end: a decode run ends with it */
    if (r->run_m > 0)
        run_sync(S, ri, S->now_s, true);
    if (r->n_ops + 1 > r->cap_ops) {
        size_t cap = r->cap_ops;
        cz_grow((void **)&r->ops, &cap, r->n_ops + 1, sizeof *r->ops);
        r->cap_ops = (uint32_t)cap;
    }
    r->ops[r->n_ops++] = op;
}

/* ---- turns ---- */

static void turn_ended(cz_deploy *S, uint32_t si, double now, bool barged);
static void submit_next(cz_deploy *S, uint32_t si, double now);
static void pd_release_prefill(cz_deploy *S, uint32_t si, double now);
static void generation_complete(cz_deploy *S, uint32_t si, double now);

static bool stage_is_ar(const cz_deploy *S, uint32_t p)
{
    return S->cfg->model.stages[S->cfg->model.pipe[p].stage].kind == CZ_STAGE_AR;
}

static uint32_t turn_in_tokens(const cz_turn *t)
{
    uint32_t in = cz_turn_in_tokens(t);
    return in ? in : 1;
}

/* Output tokens of the turn at AR stage p: text or audio tokens (at least 1: an engine
 * cannot serve a zero-token reply). */
static uint32_t stage_out_tokens(const cz_deploy *S, uint32_t p, const cz_turn *t)
{
    uint32_t out = S->cfg->model.pipe[p].io == CZ_IO_AUDIO ? t->out_audio_tokens
                                                            : t->out_text_tokens;
    return out ? out : 1;
}

/* Asks AR stage p of the session to report when its next hand-off to a downstream stage
 * is due. */
static void ask_next_report(cz_deploy *S, uint32_t si, uint32_t p)
{
    ses_stage *st = SP(S, si, p);
    uint32_t next = NONE;
    for (uint32_t d = p + 1; d < S->n_pipe; d++) {
        const cz_pipe_stage *ds = &S->cfg->model.pipe[d];
        if (ds->from != (int32_t)p)
            continue;
        uint32_t at = stage_is_ar(S, d) ? st->gen + ds->chunk_tokens
                                        : SP(S, si, d)->handed + ds->chunk_tokens;
        if (at < next)
            next = at;
    }
    if (p == S->play_p && SES(S, si)->tts && st->gen + 1 < next)
        next = st->gen + 1; /* every token reaches the client's player */
    if (next == NONE || next >= st->target)
        return;
    rep_rt *r = REP(S, st->rep);
    const cz_seq *q = cz_server_seq(RSRV(S, r), st->seq);
    cz_server_notify_at(RSRV(S, r), st->seq, q->turn_generated_base + next);
}

/* Starts the turn at AR stage p: the first AR stage gets the whole input; a fed one
 * starts with the input embeddings and the output its upstream allows so far. */
static void stage_start(cz_deploy *S, uint32_t si, uint32_t p, uint32_t out, bool final,
                        double now)
{
    ses_rt *ss = SES(S, si);
    const cz_turn *t = WT(S, ss->g);
    ses_stage *st = SP(S, si, p);
    uint32_t seq = st->seq;
    rep_rt *r = REP(S, st->rep);
    uint32_t k = ss->g - WS(S, si)->turn_off;
    uint32_t in = turn_in_tokens(t);
    if (S->cfg->pd) {
        /* each pool's sequence holds the session's context as the decode pool left it:
         * cut back to it, or given what it lacks (the replies the other pool generated,
         * or all of it on a replica new to the session) as input */
        const cz_seq *q = cz_server_seq(RSRV(S, r), seq);
        uint32_t have = q->tokens_in + q->generated;
        if (have > ss->pd_ctx && cz_server_seq_moving(RSRV(S, r), seq)) {
            /* its KV is still being stored: it starts again from nothing */
            cz_server_seq_close(RSRV(S, r), seq);
            seq = st->seq = cz_server_seq_open(RSRV(S, r), si, (uint32_t)WS(S, si)->cls, false);
            have = 0;
        } else if (have > ss->pd_ctx) {
            cz_server_seq_truncate(RSRV(S, r), seq, ss->pd_ctx);
            have = ss->pd_ctx;
        }
        in += ss->pd_ctx - have;
    }
    /* the trace's prefix-block hashes name the prompt the first AR stage reads, and with
     * disaggregation the decode pool, which holds the same prompt (automatic prefix
     * caching; ignored by a server without it) */
    const cz_turn_hashes th = {cz_workload_turn_hashes(S->wl, t), t->hash_len,
                               S->wl->hash_block_tokens};
    bool prompt = p == S->first_ar || (S->cfg->pd && p == CZ_PD_DECODE);
    uint64_t rec = cz_server_turn_hashed(RSRV(S, r), ss->ready_s, seq, k, S->ar_ord[p], in, out,
                                         st->target, final, prompt ? &th : NULL);
    st->open = true;
    st->gen = 0;
    st->fed = out;
    if (S->drv.turn_opened)
        S->drv.turn_opened(S->drv.ctx, st->rep, seq, rec, in, out);
    /* a refused turn leaves its sequence idle (its record, released, may be gone) */
    if (!cz_server_seq(RSRV(S, r), seq)->turn_open) {
        /* the turn cannot be served: nothing flows to the later stages; refused by the
         * first stage it is rejected, by a later one (after work was done) it failed; a
         * disaggregated turn's record is its decode pool's (a prefill pool's rejected
         * record is gone) */
        if (p == S->first_ar && !S->cfg->pd)
            ss->rec0 = rec;
        if (!ss->refused) {
            ss->refused = p == S->first_ar ? CZ_REQ_REJECTED : CZ_REQ_FAILED;
            ss->refused_at = S->ar_ord[p];
        }
        st->open = false;
        for (uint32_t d = p; d < S->n_pipe; d++)
            SP(S, si, d)->done = true;
        if (ss->outstanding == 0 && !ss->generated)
            generation_complete(S, si, now);
        return;
    }
    if (p == S->first_ar || (S->cfg->pd && p == CZ_PD_DECODE))
        ss->rec0 = rec; /* the record the turn's outcome names: what its client saw */
    r->turns++;
    load_add(S, st->rep, 1, now);
    /* Dynamo's router adds a request's new blocks to its worker's active blocks (those
     * not already in use there) */
    active_add(S, si, p, true);
    ss->outstanding++;
    if (S->cfg->pd && p == CZ_PD_DECODE) {
        /* its context but the last token was computed by the prefill pool */
        const cz_seq *q = cz_server_seq(RSRV(S, r), seq);
        uint32_t ctx = q->tokens_in + q->generated;
        if (ctx > 1 && q->computed < ctx - 1)
            cz_server_import(RSRV(S, r), seq, ctx - 1);
        else
            pd_release_prefill(S, si, now); /* it holds all it needs */
    }
    run_xfers(S, st->rep, now);
    ask_next_report(S, si, p);
}

/* ---- disaggregated prefill and decode (docs/pipeline.md) ---- */

/* The prefill pool's turn of session si ends: the decode pool holds its KV (or will never
 * need it: refused, or its prefix cache held it). Its sequence stays, idle, its KV cached
 * for the session's next turn. */
static void pd_release_prefill(cz_deploy *S, uint32_t si, double now)
{
    ses_rt *ss = SES(S, si);
    const ses_stage *pst = SP(S, si, CZ_PD_PREFILL);
    if (!pst->open || ss->pd_released)
        return;
    ss->pd_released = true;
    deferred_op op = {0, pst->seq, si, 0, 0, true};
    op_submit(S, pst->rep, op, now);
}

/* The prefill pool sampled the open turn's first token: the turn goes to a decode replica
 * the router picks, whole (its output and its input, whose KV it will pull). */
static void pd_decode_start(cz_deploy *S, uint32_t si, double now)
{
    ses_rt *ss = SES(S, si);
    ses_stage *dst = SP(S, si, CZ_PD_DECODE);
    stage_seq(S, si, CZ_PD_DECODE, ss->g);
    dst->target = stage_out_tokens(S, CZ_PD_DECODE, WT(S, ss->g));
    stage_start(S, si, CZ_PD_DECODE, dst->target, true, now);
    if (!dst->open)
        pd_release_prefill(S, si, now); /* refused: the pull will never come */
}

/* The turn's generation is complete (every stage done): the reply ends when its audio
 * has played, or now for text. */
static void generation_complete(cz_deploy *S, uint32_t si, double now)
{
    ses_rt *ss = SES(S, si);
    ss->generated = true;
    if (S->voc < 0 && !ss->tts) {
        turn_ended(S, si, now, false);
        return;
    }
    const cz_player *pl = PLAYER(S, si);
    double end = pl->chunks ? cz_player_end_s(pl) : now;
    S->drv.timer(S->drv.ctx, end > now ? end : now, CZ_TIMER_REPLY_END, si, ss->g);
}

/* `audio_s` seconds of the open turn's reply reach session si's client at `now` (a
 * vocoder's chunk, or a text reply's tokens the client speaks): its player takes them,
 * the client reports its playback to every autoregressive stage of the session
 * (LiveServe's interaction plane), and the first audio starts the barge-in's clock. */
static void client_audio(cz_deploy *S, uint32_t si, double audio_s, double now)
{
    ses_rt *ss = SES(S, si);
    cz_player *pl = PLAYER(S, si);
    bool first = pl->chunks == 0;
    cz_player_chunk(pl, now, audio_s);
    for (uint32_t q = 0; q < S->n_pipe; q++) {
        ses_stage *st = SP(S, si, q);
        if (st->seq != NONE)
            cz_server_on_playback(SRV(S, st->rep), now, st->seq,
                                  cz_player_heard_s(pl, now), pl->audio_s, audio_s);
    }
    if (first) {
        S->m->audio[ss->audio_rec].first_audio_s = now;
        double bi = WT(S, ss->g)->barge_in_s;
        if (bi >= 0)
            S->drv.timer(S->drv.ctx, now + bi, CZ_TIMER_BARGE_IN, si, ss->g);
    }
}

/* Stage p of the session's open turn made progress (a report or its end): hand tokens
 * to the stages it feeds. */
static void stage_progress(cz_deploy *S, uint32_t si, uint32_t p, double now, bool done)
{
    ses_rt *ss = SES(S, si);
    ses_stage *st = SP(S, si, p);
    const cz_turn *t = WT(S, ss->g);
    if (stage_is_ar(S, p) && st->seq != NONE && st->open) {
        rep_rt *r = REP(S, st->rep);
        const cz_seq *q = cz_server_seq(RSRV(S, r), st->seq);
        st->gen = q->generated - q->turn_generated_base;
    }
    if (S->cfg->pd && p == CZ_PD_DECODE && !ss->pd_pulling)
        pd_release_prefill(S, si, now); /* it ran without pulling (its cache held it all) */
    if (ss->tts && p == S->play_p && st->gen > ss->played) {
        double audio = (st->gen - ss->played) * ss->a_tok;
        ss->played = st->gen;
        client_audio(S, si, audio, now);
    }
    for (uint32_t d = p + 1; d < S->n_pipe; d++) {
        const cz_pipe_stage *ds = &S->cfg->model.pipe[d];
        if (ds->from != (int32_t)p)
            continue;
        ses_stage *dst = SP(S, si, d);
        if (S->cfg->pd) {
            if (!done && st->gen > 0 && !dst->open && !dst->done)
                pd_decode_start(S, si, now);
            continue;
        }
        if (stage_is_ar(S, d)) {
            uint32_t total = stage_out_tokens(S, d, t);
            double want = floor(st->gen * ds->out_per_in);
            uint32_t allowed = done || want >= total ? total : (uint32_t)want;
            if (!dst->open && !dst->done) {
                if (allowed == 0 && !done)
                    continue;
                stage_seq(S, si, d, ss->g);
                dst->target = total;
                stage_start(S, si, d, allowed, done, now);
            } else if (dst->open && (allowed > dst->fed || done)) {
                deferred_op op = {0, dst->seq, si, 0, allowed - dst->fed, done};
                dst->fed = allowed;
                op_submit(S, dst->rep, op, now);
            }
        } else {
            /* a vocoder: every chunk_tokens tokens (the rest at the end) become audio */
            rep_rt *vr = REP(S, dst->rep);
            while (st->gen >= dst->handed + ds->chunk_tokens ||
                   (done && st->gen > dst->handed)) {
                uint32_t n = st->gen - dst->handed;
                if (n > ds->chunk_tokens)
                    n = ds->chunk_tokens;
                uint32_t ctx = dst->handed < ds->overlap_tokens ? dst->handed : ds->overlap_tokens;
                cz_job job = {si, n + ctx, ss->g, n * ds->audio_s_per_token};
                cz_jobq_push(&vr->jq, &job);
                load_add(S, dst->rep, 1, now);
                dst->handed += n;
                ss->outstanding++;
            }
        }
    }
    if (done) {
        if (st->open) {
            st->open = false;
            st->done = true;
            load_add(S, st->rep, -1, now);
            active_add(S, si, p, false);
            ss->outstanding--;
        }
    } else if (stage_is_ar(S, p)) {
        ask_next_report(S, si, p);
    }
    if (ss->outstanding == 0 && !ss->generated)
        generation_complete(S, si, now);
}

/* The server's handling of turn g before it reaches the scheduler, when the driver
 * models time (cz_driver.modelled): the fitted cost's request terms (BLIS's alpha terms,
 * docs/validation.md). */
static double ingest_s(const cz_deploy *S, uint32_t g)
{
    if (!S->drv.modelled)
        return 0.0;
    return S->cfg->ingest_s + S->cfg->ingest_per_token_s * (double)cz_turn_in_tokens(WT(S, g));
}

/* Starts the session's next arrived turn when its sequences are free. A turn that
 * arrives while the previous one is still served waits for it; its latencies count from
 * its own arrival. */
static void submit_next(cz_deploy *S, uint32_t si, double now)
{
    ses_rt *ss = SES(S, si);
    if (ss->submitted >= ss->arrived || ss->g != NONE || ss->blocked)
        return; /* a closed session (maybe gone from a streamed window) returns here */
    const cz_session *ses = WS(S, si);
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        if (st->seq != NONE &&
            cz_server_seq(SRV(S, st->rep), st->seq)->state != CZ_SEQ_IDLE)
            return; /* a KV load still landing after a barge-in */
    }
    uint32_t k = ss->submitted++;
    uint32_t g = ses->turn_off + k;
    const cz_turn *t = WT(S, g);
    ss->g = g;
    ss->barged = ss->generated = false;
    ss->refused = ss->refused_at = 0;
    ss->rec0 = UINT64_MAX;
    ss->outstanding = ss->enc_pending = 0;
    /* a turn timed by the client (closed loop, a slot of a closed-loop workload) was sent
     * its request handling before now (ingest_s) */
    double sent = now - ingest_s(S, g);
    double arrival = k == 0 || ses->timing == CZ_TIMING_OPEN ? t->arrival_s : sent;
    if (k == 0 && S->wl->concurrency > 0 && sent > arrival)
        arrival = sent; /* it waited for a slot: sent when it got one */
    ss->ready_s = arrival;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        st->open = st->done = false;
        st->gen = st->fed = st->handed = 0;
        if (!stage_is_ar(S, p))
            st->rep = route(S, si, p, g);
    }
    stage_seq(S, si, S->first_ar, g);
    /* a model with no vocoder answering a spoken turn: the client speaks its text, each
     * token its share of the turn's audio */
    ss->tts = S->voc < 0 && t->out_audio_s > 0;
    ss->played = 0;
    ss->a_tok = ss->tts ? t->out_audio_s / stage_out_tokens(S, S->play_p, t) : 0.0;
    if (S->voc >= 0 || ss->tts) {
        cz_player_init(PLAYER(S, si), S->cfg->continuity_threshold_s);
        cz_audio_record a = {.session = si, .turn = k, .ready_s = arrival,
                             .speech_start_s = arrival - t->speech_s, .first_audio_s = NAN,
                             .last_audio_s = NAN, .end_s = NAN};
        ss->audio_rec = cz_metrics_add_audio(S->m, &a);
    }
    for (uint32_t p = 0; p < S->first_ar; p++) {
        const cz_pipe_stage *ps = &S->cfg->model.pipe[p];
        uint32_t tokens = ps->io == CZ_IO_AUDIO ? t->in_audio_tokens : t->in_image_tokens;
        if (tokens == 0)
            continue;
        if (ps->input_tokens)
            tokens = ps->input_tokens;
        cz_job job = {si, tokens, g, 0};
        cz_jobq_push(&REP(S, SP(S, si, p)->rep)->jq, &job);
        load_add(S, SP(S, si, p)->rep, 1, now);
        ss->outstanding++;
        ss->enc_pending++;
    }
    if (S->cfg->pd) {
        /* the prefill pool computes the prompt and samples one token (vLLM's disaggregated
         * prefill: max_tokens 1), then stalls, holding the KV until the decode pool has
         * pulled it; the context both pools align to is the decode pool's */
        const ses_stage *dst = SP(S, si, CZ_PD_DECODE);
        ss->pd_ctx = 0;
        ss->pd_released = false;
        if (dst->seq != NONE) {
            const cz_seq *q = cz_server_seq(SRV(S, dst->rep), dst->seq);
            ss->pd_ctx = q->tokens_in + q->generated;
        }
        SP(S, si, CZ_PD_PREFILL)->target = 1;
        stage_start(S, si, CZ_PD_PREFILL, 1, false, now);
        return;
    }
    if (ss->enc_pending == 0) {
        SP(S, si, S->first_ar)->target = stage_out_tokens(S, S->first_ar, t);
        stage_start(S, si, S->first_ar, SP(S, si, S->first_ar)->target, true, now);
    }
}

/* Schedules turn g's arrival (its input ready) at t_s, reaching the scheduler its
 * request handling later (ingest_s), and the voice activity of its speech start speech_s
 * before, or now if that has passed. */
static void push_turn(cz_deploy *S, uint32_t g, double t_s, double now)
{
    double speech = WT(S, g)->speech_s;
    if (speech > 0)
        S->drv.timer(S->drv.ctx, t_s - speech > now ? t_s - speech : now, CZ_TIMER_SPEECH, g, 0);
    double at = t_s + ingest_s(S, g);
    S->drv.timer(S->drv.ctx, at > now ? at : now, CZ_TIMER_ARRIVAL, g, 0);
}

static void push_next_initial(cz_deploy *S, double now)
{
    if (S->next_initial < S->n_initial) {
        uint32_t i = S->next_initial++;
        uint32_t g = S->streamed ? (pull(S, i), WS(S, i)->turn_off) : S->initial[i];
        push_turn(S, g, WT(S, g)->arrival_s, now);
    }
}

/* The user starts speaking the next turn of session si: the voice-activity signal reaches
 * the session's idle sequence at every autoregressive stage, protecting its resident KV;
 * with preload on (LiveServe section 5.2) a stage holding offloaded KV starts reloading it
 * when the load would land, under the link's current queue, by the time the turn is
 * expected there: `oracle_s` after now when given (>= 0, the true end of speech), else the
 * stage's estimate from what it has observed (cz_server_speech_end_estimate). Returns what
 * the preload did at the first autoregressive stage. */
static cz_preload_outcome speech_start(cz_deploy *S, uint32_t si, double oracle_s, double now)
{
    cz_preload_outcome first = CZ_PRELOAD_NOTHING;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        if (!stage_is_ar(S, p) || st->seq == NONE)
            continue;
        rep_rt *r = REP(S, st->rep);
        uint32_t tokens = cz_server_preload_tokens(RSRV(S, r), st->seq);
        cz_server_on_speech_start(RSRV(S, r), now, st->seq);
        if (tokens == 0)
            continue;
        double needed_at = S->cfg->place[p].server.preload_oracle && oracle_s >= 0
                               ? now + oracle_s
                               : cz_server_speech_end_estimate(RSRV(S, r), st->seq, now);
        double eta = S->drv.xfer_eta(S->drv.ctx, r->gpu, tokens * S->kv_bytes_per_token[p],
                                     false, now);
        cz_preload_outcome o =
            cz_server_preload(RSRV(S, r), now, st->seq, cz_preload_admit(eta, needed_at), needed_at);
        if (p == S->first_ar)
            first = o;
        run_xfers(S, st->rep, now);
    }
    return first;
}

/* The user starts speaking turn g (the simulated client's voice activity). */
static void on_speech(cz_deploy *S, uint32_t g, double now)
{
    (void)speech_start(S, TURN_SES(S, g), WT(S, g)->speech_s, now);
}

static void start_bounded_session(cz_deploy *S, double now)
{
    if (S->next_bounded >= S->n_bounded)
        return;
    uint32_t i = S->next_bounded++;
    uint32_t si = S->streamed ? (pull(S, i), i) : S->bounded[i];
    uint32_t g = WS(S, si)->turn_off;
    double t = WT(S, g)->arrival_s;
    push_turn(S, g, t > now ? t : now, now);
}

/* Frees the session's sequences once its last turn has ended and nothing is pending. */
static void maybe_close(cz_deploy *S, uint32_t si)
{
    if (slot_of(S, si) == CLOSED)
        return;
    ses_rt *ss = SES(S, si);
    if (ss->ended < WS(S, si)->n_turns || ss->blocked || ss->keep)
        return;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        if (st->seq == NONE)
            continue;
        cz_server *srv = SRV(S, st->rep);
        if (cz_server_seq(srv, st->seq)->state != CZ_SEQ_IDLE)
            return; /* closed when its KV load lands */
    }
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        if (st->seq != NONE) {
            cz_server_seq_close(SRV(S, st->rep), st->seq);
            st->seq = NONE;
        }
    }
    slot_close(S, si);
}

/* The reply to the session's open turn ended at `now` (played out, or cut by the user
 * barging in): schedule what follows. */
static void turn_ended(cz_deploy *S, uint32_t si, double now, bool barged)
{
    ses_rt *ss = SES(S, si);
    const cz_session *ses = WS(S, si);
    uint32_t g = ss->g;
    turn_outcome(S, si, g,
                 barged ? CZ_REQ_ABORTED : ss->refused ? ss->refused : CZ_REQ_COMPLETED,
                 barged ? 0 : ss->refused_at, now);
    ss->g = NONE;
    ss->ended++;
    S->finished++;
    S->progress++;
    if (ss->ended == ses->n_turns) {
        maybe_close(S, si);
        if (S->wl->concurrency > 0)
            start_bounded_session(S, now);
        return;
    }
    if (ses->timing == CZ_TIMING_CLOSED) {
        /* the user's next utterance: after the think time, or at once after a barge-in
         * (the interruption is the start of the next turn) */
        const cz_turn *next = WT(S, g + 1);
        double speech_start = barged ? now : now + WT(S, g)->think_s;
        push_turn(S, g + 1, speech_start + next->speech_s, now);
    } else {
        submit_next(S, si, now);
    }
}

static void on_arrival(cz_deploy *S, double now, uint32_t g)
{
    uint32_t si = TURN_SES(S, g);
    const cz_session *ses = WS(S, si);
    /* the next of the pre-timed arrivals (not a turn a slot or a reply end released);
     * decided before the turn is submitted: a turn refused at once ends there, and the
     * session it releases may move a streamed workload's window (and `ses` with it) */
    bool pretimed = (ses->timing == CZ_TIMING_OPEN && g != ses->turn_off) ||
                    (g == ses->turn_off && S->wl->concurrency == 0);
    SES(S, si)->arrived++;
    S->arrived++;
    S->progress++;
    submit_next(S, si, now);
    if (pretimed)
        push_next_initial(S, now);
}

/* ---- barge-in ---- */

static void op_apply(cz_deploy *S, rep_rt *r, const deferred_op *op, double now)
{
    if (op->kind == 0) {
        /* a feed queued behind one that failed the turn, or before a barge-in (whose
         * abort follows it), has nothing left to feed */
        if (op->session == NONE) {
            uint64_t who = cz_server_seq(RSRV(S, r), op->seq)->session;
            if (S->streams[who - S->wl->n_sessions].failed)
                return;
        } else if (!SP(S, op->session, r->p)->open) {
            CZ_ASSERT(SES(S, op->session)->refused == CZ_REQ_FAILED ||
                      SES(S, op->session)->barged || SES(S, op->session)->g == NONE);
            return;
        }
        /* a session's turn is fed output only: its context grows by what it generates
         * (kv_router's count of its blocks relies on it, active_add) */
        CZ_ASSERT(op->session == NONE || op->in == 0);
        cz_feed_result fr = cz_server_feed(RSRV(S, r), now, op->seq, op->in, op->out, op->final);
        if (fr == CZ_FEED_OK)
            return;
        if (op->session == NONE) {
            /* a stream whose context outgrew the pool: no more frames are served (they
             * come back empty) */
            uint64_t who = cz_server_seq(RSRV(S, r), op->seq)->session;
            CZ_ASSERT(fr == CZ_FEED_FAILED && who >= S->wl->n_sessions);
            S->streams[who - S->wl->n_sessions].failed = true;
            return;
        }
        /* the final feed completed a stalled turn (as a turn_done of a batch), or the
         * turn's context outgrew the stage: it ends there and fails */
        ses_rt *fs = SES(S, op->session);
        ses_stage *st = SP(S, op->session, r->p);
        if (fs->g == NONE || fs->barged || !st->open || st->seq != op->seq)
            return;
        if (fr == CZ_FEED_FAILED && !fs->refused) {
            fs->refused = CZ_REQ_FAILED;
            fs->refused_at = S->ar_ord[r->p];
        }
        stage_progress(S, op->session, r->p, now, true);
        return;
    }
    cz_server_abort(RSRV(S, r), now, op->seq, op->out);
    ses_rt *ss = SES(S, op->session);
    ss->blocked--;
    if (ss->blocked == 0) {
        submit_next(S, op->session, now);
        maybe_close(S, op->session);
    }
}

/* The cut open turn of session si stops at every stage: an autoregressive stage aborts it
 * keeping heard[stage] generated tokens (once its batch in flight ends), an encoder's or
 * vocoder's queued jobs go; the turn ends aborted. */
static void stop_stages(cz_deploy *S, uint32_t si, const uint32_t *heard, double now)
{
    ses_rt *ss = SES(S, si);
    for (uint32_t q = 0; q < S->n_pipe; q++) {
        ses_stage *st = SP(S, si, q);
        if (stage_is_ar(S, q)) {
            if (st->seq == NONE || (!st->open && !st->done))
                continue;
            if (st->open) {
                st->open = false;
                load_add(S, st->rep, -1, now);
                active_add(S, si, q, false);
            }
            ss->blocked++;
            if (S->cfg->pd && q == CZ_PD_PREFILL && ss->pd_pulling) {
                /* the decode pool is reading its KV: the abort waits for the pull */
                ss->pd_abort = true;
                ss->pd_keep = heard[q];
                continue;
            }
            deferred_op op = {1, st->seq, si, 0, heard[q], false};
            op_submit(S, st->rep, op, now);
        } else if (st->rep != NONE) {
            load_add(S, st->rep, -(int32_t)cz_jobq_cancel(&REP(S, st->rep)->jq, si), now);
        }
    }
    turn_ended(S, si, now, true);
}

static void on_barge_in(cz_deploy *S, uint32_t si, uint32_t g, double now)
{
    ses_rt *ss = SES(S, si);
    if (ss->g != g || ss->barged)
        return;
    const cz_player *pl = PLAYER(S, si);
    double heard_s = cz_player_heard_s(pl, now);
    if (ss->generated && heard_s >= pl->audio_s)
        return; /* the whole reply had already played */
    ss->barged = true;
    cz_audio_record *a = &S->m->audio[ss->audio_rec];
    a->barged = 1;
    a->heard_s = heard_s;
    a->end_s = now;
    a->audio_s = pl->audio_s;
    a->last_audio_s = pl->last_arrival_s;
    /* what was heard, stage by stage from the vocoder up: audio tokens played, and the
     * upstream tokens they were conditioned on */
    uint32_t heard[CZ_MAX_STAGES] = {0};
    uint32_t p;
    if (S->voc >= 0) {
        const cz_pipe_stage *vs = &S->cfg->model.pipe[S->voc];
        p = (uint32_t)vs->from;
        heard[p] = (uint32_t)floor(heard_s / vs->audio_s_per_token + 1e-9);
    } else { /* the tokens the client has finished speaking */
        p = S->play_p;
        heard[p] = (uint32_t)floor(heard_s / ss->a_tok + 1e-9);
    }
    while (S->cfg->model.pipe[p].from >= 0 && stage_is_ar(S, (uint32_t)S->cfg->model.pipe[p].from)) {
        uint32_t up = (uint32_t)S->cfg->model.pipe[p].from;
        heard[up] = (uint32_t)ceil(heard[p] / S->cfg->model.pipe[p].out_per_in);
        p = up;
    }
    stop_stages(S, si, heard, now);
}

/* ---- completions ---- */

static void on_jobs_done(cz_deploy *S, rep_rt *r, double now)
{
    uint32_t n;
    const cz_job *jobs = cz_jobq_done(&r->jq, &n);
    load_add(S, (uint32_t)(r - S->reps), -(int32_t)n, now);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t si = jobs[i].owner;
        ses_rt *ss = SES(S, si);
        if (ss->g != jobs[i].tag || ss->barged)
            continue; /* the turn was cut: its audio is dropped */
        ss->outstanding--;
        if ((int32_t)r->p == S->voc) {
            client_audio(S, si, jobs[i].audio_s, now);
            if (ss->outstanding == 0 && !ss->generated)
                generation_complete(S, si, now);
        } else if (--ss->enc_pending == 0) {
            const cz_turn *t = WT(S, ss->g);
            SP(S, si, S->first_ar)->target = stage_out_tokens(S, S->first_ar, t);
            stage_start(S, si, S->first_ar, SP(S, si, S->first_ar)->target, true, now);
        }
    }
}

static void frame_done(cz_deploy *S, uint32_t j, double now);

static void on_ar_done(cz_deploy *S, uint32_t ri, double now)
{
    rep_rt *r = REP(S, ri);
    cz_step_events ev;
    cz_server_on_batch_done(RSRV(S, r), now, &ev);
    active_sync(S, ri);
    /* copy: handling the events can call back into this server */
    uint32_t n_ms = ev.n_milestone, n_td = ev.n_turn_done;
    /* a prefill pool's turn stalls at its first token, holding its KV for the decode
     * pool's pull: that is its report */
    uint32_t n_st = S->cfg->pd && r->p == CZ_PD_PREFILL ? ev.n_stalled : 0;
    n_ms += n_st;
    uint32_t ids[2 * 1024];
    uint32_t *ms = n_ms + n_td <= 2048 ? ids : cz_xmalloc((n_ms + n_td) * sizeof *ms);
    memcpy(ms, ev.milestone, ev.n_milestone * sizeof *ms);
    memcpy(ms + ev.n_milestone, ev.stalled, n_st * sizeof *ms);
    memcpy(ms + n_ms, ev.turn_done, n_td * sizeof *ms);
    for (uint32_t i = 0; i < n_ms + n_td; i++) {
        bool done = i >= n_ms;
        const cz_seq *q = cz_server_seq(RSRV(S, r), ms[i]);
        uint64_t who = q->session;
        if (who >= S->wl->n_sessions) {
            if (!done)
                frame_done(S, (uint32_t)(who - S->wl->n_sessions), now);
            continue;
        }
        uint32_t si = (uint32_t)who;
        ses_rt *ss = SES(S, si);
        ses_stage *st = SP(S, si, r->p);
        if (ss->g == NONE || ss->barged || !st->open || st->seq != ms[i])
            continue;
        if (done || !st->done)
            stage_progress(S, si, r->p, now, done);
    }
    if (ms != ids)
        free(ms);
    /* the sessions whose turns end (or report) at the next step arrived long ago: their
     * state is fetched towards the cache ahead of it */
    uint64_t due[4];
    uint32_t n_due = cz_server_due_next(RSRV(S, r), due, 4);
    for (uint32_t i = 0; i < n_due; i++) {
        uint32_t k = due[i] < S->wl->n_sessions ? slot_of(S, (uint32_t)due[i]) : NONE;
        if (k != NONE && k != CLOSED) {
            CZ_PREFETCH(&S->ses_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK]);
            CZ_PREFETCH(&S->sp_chunk[k / SLOT_CHUNK][(size_t)(k % SLOT_CHUNK) * S->n_pipe + r->p]);
            CZ_PREFETCH(WS(S, (uint32_t)due[i]));
        }
    }
}

/* ---- periodic streams ---- */

/* Live sessions changed at `now`: accumulates the second half's live-time integral. */
static void live_account(cz_deploy *S, double now)
{
    double half = 0.5 * S->last_start_s;
    double from = S->live_since_s > half ? S->live_since_s : half;
    double to = now < S->last_start_s ? now : S->last_start_s;
    if (to > from)
        S->live_area += (to - from) * S->live_streams;
    S->live_since_s = now;
}

/* When the worker returns frame f of stream j: at the tick after the one that fed its chunk.
 * Metronome's worker "returns the tokens produced since the last tick"
 * (Metronome, section 4): the chunk fed at tick f is prefilled and its
 * reply decoded during the period that follows (section 2: "at frame k the engine must
 * encode and prefill the new chunk, then decode up to tau output tokens", schedulable
 * iff that takes at most B), and the Step at tick f + 1 hands the reply back. */
static double frame_return_s(const cz_stream *sm, uint32_t f)
{
    return sm->start_s + (double)(f + 1) * sm->frame_period_s;
}

/* Records frame f of stream j, whose reply was all out at done_s (NaN: never). Its latency
 * is the Step's wait at its return tick: none when the reply was out by then (the GPU
 * work lay in the period before; the paper's 2-5 ms per frame, Table 1, is the Step's own
 * round trip, which is not modelled), else until it is out. The worker waits at most
 * `frame_wait_fraction` x B (section 3: 0.8 B) and then returns the frame empty, on time:
 * the stall is silent. */
static void frame_record(cz_deploy *S, uint32_t j, uint32_t f, double done_s)
{
    const cz_stream *sm = &S->wl->streams[j];
    double ret = frame_return_s(sm, f);
    double cap = S->cfg->frame_wait_fraction * sm->frame_period_s;
    bool empty = isnan(done_s) || done_s - ret > cap;
    double lat = empty ? cap : done_s > ret ? done_s - ret : 0.0;
    cz_frame_record fr = {
        .stream = j,
        .frame = f,
        .empty = empty,
        .missed = lat > sm->frame_period_s,
        .tick_s = ret,
        .done_s = done_s,
        .latency_s = lat,
    };
    cz_metrics_add_frame(S->m, &fr);
    S->progress++;
    if (!(lat <= S->tick_max_lat_s))
        S->tick_max_lat_s = lat;
}

static void frame_done(cz_deploy *S, uint32_t j, double now)
{
    stream_rt *sr = &S->streams[j];
    const cz_stream *sm = &S->wl->streams[j];
    frame_record(S, j, sr->done++, now);
    if (sr->done == sr->frames) {
        /* the session ends: its resident request goes, and with it its KV */
        live_account(S, now);
        sr->live = false;
        S->live_streams--;
        cz_metrics_gateway(S->m, now, S->adm.cap, S->live_streams);
        S->end_blocks_sum += cz_server_seq(SRV(S, sr->rep), sr->seq)->blocks;
        S->n_ended++;
        cz_server_seq_close(SRV(S, sr->rep), sr->seq);
        return;
    }
    if (sr->done < sr->ticked && !sr->failed)
        cz_server_notify_at(SRV(S, sr->rep), sr->seq,
                            (sr->done + 1) * sm->tokens_out_per_frame);
}

static void on_tick(cz_deploy *S, uint32_t j, uint32_t f, double now)
{
    stream_rt *sr = &S->streams[j];
    const cz_stream *sm = &S->wl->streams[j];
    rep_rt *r = REP(S, sr->rep);
    bool last = f + 1 == sr->frames;
    if (f == 0) {
        /* a new session at the gateway: refused ones never start, live ones stay */
        if (now >= S->last_start_s)
            S->cap_at_last_s = S->adm.cap;
        if (!cz_admission_admit(&S->adm, S->live_streams)) {
            sr->rejected = true;
            return;
        }
        live_account(S, now);
        sr->live = true;
        S->live_streams++;
        cz_metrics_gateway(S->m, now, S->adm.cap, S->live_streams);
        /* a resident request grows frame by frame with no bound known up front (the
         * Metronome cliff): only its first frame is checked */
        uint64_t rec = cz_server_turn(RSRV(S, r), now, sr->seq, 0, S->ar_ord[S->first_ar],
                                      sm->tokens_in_per_frame, sm->tokens_out_per_frame, 0, last);
        cz_metrics_req(S->m, rec)->stream = 1;
        if (cz_metrics_req(S->m, rec)->outcome == CZ_REQ_REJECTED) {
            /* even its first frame can never fit the pool: the session is refused */
            live_account(S, now);
            sr->live = false;
            S->live_streams--;
            cz_metrics_gateway(S->m, now, S->adm.cap, S->live_streams);
            sr->rejected = true;
            return;
        }
    } else if (!sr->failed) {
        deferred_op op = {0, sr->seq, NONE, sm->tokens_in_per_frame, sm->tokens_out_per_frame,
                          last};
        op_submit(S, sr->rep, op, now);
    }
    sr->ticked++;
    /* the oldest frame not yet done is reported when its tokens are all out; asking
     * before a deferred feed lands is fine: a report beyond the budget waits for it */
    if (sr->done + 1 == sr->ticked && !sr->failed)
        cz_server_notify_at(RSRV(S, r), sr->seq, sr->ticked * sm->tokens_out_per_frame);
    if (!last)
        S->drv.timer(S->drv.ctx, sm->start_s + (f + 1) * sm->frame_period_s, CZ_TIMER_TICK, j,
                     f + 1);
}

/* The gateway's tick: the batch time it measures is the slowest Step since the last
 * tick (a frame's wait at its return tick), or how long a Step has been waiting for a
 * reply still not out (at most the worker's wait) when the engine is behind; then AIMD
 * adjusts the cap (Metronome, section 4.2). */
static void on_admit_tick(cz_deploy *S, double now)
{
    double period = S->wl->streams[0].frame_period_s;
    double cap = S->cfg->frame_wait_fraction * period;
    double measured = S->tick_max_lat_s;
    for (uint32_t j = 0; j < S->wl->n_streams; j++) {
        const stream_rt *sr = &S->streams[j];
        if (!sr->live || sr->done >= sr->ticked)
            continue;
        double age = now - frame_return_s(&S->wl->streams[j], sr->done);
        if (age > cap)
            age = cap;
        if (age > 0 && !(age <= measured))
            measured = age;
    }
    cz_admission_tick(&S->adm, measured, period, S->live_streams);
    cz_metrics_gateway(S->m, now, S->adm.cap, S->live_streams);
    S->tick_max_lat_s = NAN;
    if (now + period < S->streams_end_s)
        S->drv.timer(S->drv.ctx, now + period, CZ_TIMER_ADMIT, 0, 0);
}

/* ---- the end of a run: every turn and frame accounted for ---- */

static const char *seq_state_name(uint32_t state)
{
    static const char *const names[] = {"idle", "waiting", "loading", "running", "stalled",
                                        "closed"};
    return state < CZ_ARRAY_LEN(names) ? names[state] : "unknown";
}

/* Describes where turn g of session si is stuck, for the error of a run that drained with
 * it open: each stage's replica and state, or what the turn is waiting for. */
static void describe_stuck(cz_deploy *S, uint32_t si, uint32_t g, char *buf, size_t n)
{
    const ses_rt *ss = SES(S, si);
    const cz_session *ses = WS(S, si);
    size_t used = 0;
#define ADD(...)                                                                              \
    do {                                                                                      \
        int w_ = snprintf(buf + used, used < n ? n - used : 0, __VA_ARGS__);                  \
        if (w_ > 0)                                                                           \
            used += (size_t)w_;                                                               \
    } while (0)
    ADD("session '%s' turn %u of %u", cz_workload_session_name(S->wl, ses),
        g - ses->turn_off, ses->n_turns);
    if (ss->g != g) {
        if (ss->g != NONE)
            ADD(" never started: turn %u of the session is still open", ss->g - ses->turn_off);
        else if (ss->blocked)
            ADD(" never started: %u barge-in aborts still wait for a batch to end",
                ss->blocked);
        else
            ADD(" never started (arrived turns %u, submitted %u, ended %u)", ss->arrived,
                ss->submitted, ss->ended);
        return;
    }
    ADD(" is open (%u stage jobs outstanding%s):", ss->outstanding,
        ss->generated ? ", generation complete, reply not ended" : "");
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        const ses_stage *st = SP(S, si, p);
        const char *name = S->cfg->model.stages[S->cfg->model.pipe[p].stage].name;
        if (!stage_is_ar(S, p)) {
            if (st->rep != NONE)
                ADD(" %s: replica %u, %u jobs queued;", name, st->rep - S->rep_off[p],
                    cz_jobq_len(&REP(S, st->rep)->jq));
            continue;
        }
        if (st->seq == NONE) {
            ADD(" %s: not started;", name);
            continue;
        }
        cz_server *srv = SRV(S, st->rep);
        const cz_seq *q = cz_server_seq(srv, st->seq);
        ADD(" %s: replica %u, sequence %s%s, generated %u of %u (fed %u), %u KV blocks, pool "
            "%u used (%u idle), %u running, %u waiting;",
            name, st->rep - S->rep_off[p], seq_state_name(q->state),
            st->open ? "" : st->done ? " (stage done)" : " (stage not open)", st->gen,
            st->target, st->fed, q->blocks, cz_server_kv_used(srv), cz_server_kv_idle(srv),
            cz_server_running(srv), cz_server_waiting(srv));
    }
#undef ADD
}

/* Gives every turn and frame its outcome at the end of the run. Cut by the clock
 * (`cut`), what is still open is unfinished and a frame whose wait had expired came back
 * empty; drained, a turn still open is a bug (CZ_EINTERNAL naming where it is stuck) and
 * a pending frame comes back empty (its wait expires with nothing left to happen). */
static cz_status account_end(cz_deploy *S, bool cut, double now, cz_err *err)
{
    const cz_workload *wl = S->wl;
    double stop = cut ? S->cfg->max_time_s : INFINITY;
    uint64_t stuck = 0;
    char where[CZ_ERR_MSG_MAX] = "";
    /* sessions below ses0 are closed, every turn accounted for; a streamed workload's
     * sessions not produced yet are made one at a time and dropped once accounted */
    for (uint32_t si = S->ses0; si < wl->n_sessions; si++) {
        if (!pull(S, si))
            CZ_ASSERT(!"a session the first pass counted was not produced");
        const cz_session *ses = WS(S, si);
        uint32_t g0 = ses->turn_off, n = ses->n_turns;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t g = g0 + k;
            if (*TURN_OUT(S, g))
                continue;
            if (!cut) {
                if (stuck++ == 0)
                    describe_stuck(S, si, g, where, sizeof where);
                continue;
            }
            turn_outcome(S, si, g, CZ_REQ_UNFINISHED, 0, stop);
        }
        if (S->streamed && slot_of(S, si) == NONE) {
            *SLOT_OF(S, si) = CLOSED; /* never opened: nothing of it is held */
            advance_low(S);
        }
    }
    const char *how = S->stalled ? "stalled (events kept coming, none finished anything)"
                                 : "drained (nothing left to happen)";
    if (stuck)
        return cz_err_set(err, CZ_EINTERNAL,
                          "the run %s at t = %.6f s with %llu of %llu requests unaccounted for "
                          "(a bug in cadenza, please report it with the config): %s",
                          how, now, (unsigned long long)stuck, (unsigned long long)wl->n_turns,
                          where);
    cz_accounting *a = &S->m->acct;
    for (uint32_t j = 0; j < wl->n_streams; j++) {
        const cz_stream *sm = &wl->streams[j];
        stream_rt *sr = &S->streams[j];
        if (sr->rejected) {
            a->streams_rejected++;
            a->frames_rejected += sr->frames;
            continue;
        }
        /* frames ticked and not returned: empty once their wait at the return tick
         * expired */
        uint32_t f = sr->done;
        for (; f < sr->ticked; f++) {
            if (frame_return_s(sm, f) + S->cfg->frame_wait_fraction * sm->frame_period_s > stop)
                break;
            frame_record(S, j, f, NAN);
        }
        if (f == sr->frames) {
            a->streams_completed++;
            continue;
        }
        if (!cut)
            return cz_err_set(err, CZ_EINTERNAL,
                              "the run %s at t = %.6f s with stream %u at frame %u of %u "
                              "(ticked %u): a bug in cadenza",
                              how, now, j, f, sr->frames, sr->ticked);
        a->streams_unfinished++;
        a->frames_unfinished += sr->frames - f;
    }
    return CZ_OK;
}

/* ---- the run ---- */

void cz_deploy_free(cz_deploy *S)
{
    if (!S)
        return;
    for (uint32_t i = 0; i < S->n_reps; i++) {
        cz_server_free(S->reps[i].srv);
        if (!S->reps[i].srv)
            cz_jobq_free(&S->reps[i].jq);
        free(S->reps[i].ops);
        free(S->reps[i].run_t);
        free(S->reps[i].djobs);
        free(S->reps[i].dcands);
        free(S->reps[i].dpos);
    }
    for (uint32_t g = 0; S->gpus && g < S->cfg->n_gpus; g++)
        free(S->gpus[g].reps);
    free(S->reps);
    free(S->gpus);
    free(S->dirty);
    free(S->dirty_next);
    free(S->always);
    free(S->sig_changed);
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        cz_evidx_free(&S->by_load[p]);
        if (S->order == ORDER_QUEUE_KV)
            cz_lvheap_free(&S->by_queue[p]);
    }
    for (uint32_t i = 0; i < S->n_kvx; i++)
        cz_kvindex_free(&S->kvx[i]);
    free(S->rt_hash);
    free(S->mt_rep);
    free(S->mt_len);
    free(S->cand);
    free(S->turn_session);
    for (size_t c = 0; c < S->n_chunks; c++) {
        free(S->ses_chunk[c]);
        free(S->sp_chunk[c]);
        free(S->pl_chunk[c]);
    }
    free(S->ses_chunk);
    free(S->sp_chunk);
    free(S->pl_chunk);
    free(S->slot_of);
    free(S->free_slots);
    free(S->closed_sp);
    free(S->streams);
    free(S->initial);
    free(S->bounded);
    free(S->turn_out);
    if (S->rng)
        gsl_rng_free(S->rng);
    free(S);
}

static void build_replicas(cz_deploy *S, uint64_t expected)
{
    const cz_config *cfg = S->cfg;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        S->rep_off[p] = S->n_reps;
        S->n_reps += cfg->place[p].replicas;
    }
    S->reps = cz_xcalloc(S->n_reps, sizeof *S->reps);
    switch (cfg->router.policy) {
    case CZ_ROUTER_SESSION:
    case CZ_ROUTER_LEAST_LOADED:
    case CZ_ROUTER_VLLM_DP: S->order = ORDER_LOAD; break;
    case CZ_ROUTER_KV: S->order = ORDER_ACTIVE; break;
    case CZ_ROUTER_LLM_D: S->order = ORDER_QUEUE_KV; break;
    default: S->order = ORDER_NONE; break;
    }
    uint32_t most = 1;
    for (uint32_t p = 0; p < S->n_pipe; p++)
        if (cfg->place[p].replicas > most)
            most = cfg->place[p].replicas;
    S->cand = cz_xmalloc(most * sizeof *S->cand);
    memset(S->kvx_of, -1, sizeof S->kvx_of);
    const uint32_t prompt_stages[2] = {S->first_ar, cfg->pd ? CZ_PD_DECODE : NONE};
    uint32_t most_kvx = 0;
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t p = prompt_stages[i];
        if (p == NONE || (p == S->first_ar && i > 0))
            continue;
        uint32_t n = cfg->place[p].replicas;
        if ((cfg->router.policy == CZ_ROUTER_LLM_D || cfg->router.policy == CZ_ROUTER_KV) &&
            cfg->place[p].server.prefix_caching && n > 1) {
            S->kvx_of[p] = (int8_t)S->n_kvx;
            cz_kvindex_init(&S->kvx[S->n_kvx++], n);
            most_kvx = n > most_kvx ? n : most_kvx;
        }
    }
    if (S->n_kvx) {
        S->mt_rep = cz_xmalloc(most_kvx * sizeof *S->mt_rep);
        S->mt_len = cz_xmalloc(most_kvx * sizeof *S->mt_len);
    }
    S->gpus = cz_xcalloc(cfg->n_gpus, sizeof *S->gpus);
    S->dirty = cz_xmalloc(cfg->n_gpus * sizeof *S->dirty);
    S->dirty_next = cz_xmalloc(cfg->n_gpus * sizeof *S->dirty_next);
    S->sig_changed = cz_xmalloc(S->n_reps * sizeof *S->sig_changed);
    /* each device's replica list holds what is placed on it */
    uint32_t *on_gpu = cz_xcalloc(cfg->n_gpus, sizeof *on_gpu);
    for (uint32_t p = 0; p < S->n_pipe; p++)
        for (uint32_t k = 0; k < cfg->place[p].replicas; k++)
            on_gpu[cz_stage_place_gpu(&cfg->place[p], k)]++;
    for (uint32_t g = 0; g < cfg->n_gpus; g++) {
        S->gpus[g].reps = cz_xmalloc((on_gpu[g] ? on_gpu[g] : 1) * sizeof(uint32_t));
        S->gpus[g].wake_s = INFINITY;
    }
    free(on_gpu);
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        const cz_pipe_stage *ps = &cfg->model.pipe[p];
        const cz_stage_card *card = &cfg->model.stages[ps->stage];
        S->ar_ord[p] = cz_config_ar_ord(cfg, p);
        S->kv_bytes_per_token[p] =
            card->kind == CZ_STAGE_AR
                ? cz_stage_kv_bytes_per_token_gpu(card, cz_config_tp(cfg, p))
                : 0;
        for (uint32_t k = 0; k < cfg->place[p].replicas; k++) {
            uint32_t ri = S->rep_off[p] + k;
            rep_rt *r = &S->reps[ri];
            r->p = p;
            r->gpu = cz_stage_place_gpu(&cfg->place[p], k);
            if (card->kind == CZ_STAGE_AR) {
                cz_server_config sc = cfg->place[p].server;
                sc.timeline_stage = S->ar_ord[p];
                sc.timeline_replica = k;
                cz_sched_ops ops = cz_policy_ops(&cfg->place[p].policy);
                if ((sc.kv_window_tokens || sc.kv_bidirectional) && !ops.select) {
                    /* a windowed pool frees blocks as windows slide, and bidirectional
                     * blocks pick victims by class: FCFS runs on the ordering path (the
                     * same decisions, docs/policies.md) */
                    ops = cz_sched_fcfs_scan;
                    ops.state = &cfg->place[p].policy.params;
                }
                r->srv = cz_server_create(&sc, &ops, S->m, expected);
                r->kv_blocks = sc.kv_blocks;
                if (S->kvx_of[p] >= 0) {
                    cz_pcache_watch w = cz_kvindex_watch(&S->kvx[S->kvx_of[p]], k);
                    cz_server_watch_cache(r->srv, &w);
                }
            } else {
                cz_jobq_init(&r->jq, cfg->place[p].max_batch, cfg->place[p].max_tokens);
                r->detok_rule = card->kind == CZ_STAGE_VOCODER &&
                                cfg->place[p].policy.ops == &cz_sched_voxserve;
            }
            gpu_rt *g = &S->gpus[r->gpu];
            r->slot = g->n_reps;
            g->reps[g->n_reps++] = ri;
            /* VoxServe, section 3.2.2: a stage run under VoxServe's
             * asynchronous pipeline lets its device's steps co-run */
            if (cfg->place[p].policy.params.async_pipeline)
                g->async = true;
            if (r->detok_rule && !g->always) {
                g->always = true;
                S->n_always++;
            }
        }
        cz_evidx_init(&S->by_load[p]);
        /* in index order: ties go to the lowest */
        if ((S->order == ORDER_LOAD || S->order == ORDER_ACTIVE) && cfg->place[p].replicas > 1)
            for (uint32_t k = 0; k < cfg->place[p].replicas; k++)
                cz_evidx_set(&S->by_load[p], k, 0.0);
        if (S->order == ORDER_QUEUE_KV) {
            cz_lvheap_init(&S->by_queue[p], cfg->place[p].replicas);
            for (uint32_t k = 0; k < cfg->place[p].replicas; k++)
                cz_lvheap_set(&S->by_queue[p], k, 0, 0.0);
        }
    }
    S->always = cz_xmalloc((S->n_always ? S->n_always : 1) * sizeof *S->always);
    S->n_always = 0;
    for (uint32_t g = 0; g < cfg->n_gpus; g++)
        if (S->gpus[g].always)
            S->always[S->n_always++] = g;
}

/* A whole workload: the per-session and per-turn arrays, and the pre-timed arrivals and
 * the sessions waiting for a concurrency slot sorted by time. */
static void whole_arrays(cz_deploy *S)
{
    const cz_workload *wl = S->wl;
    uint32_t n_ses = wl->n_sessions ? wl->n_sessions : 1;
    S->turn_session = cz_xmalloc((wl->n_turns ? wl->n_turns : 1) * sizeof *S->turn_session);
    S->turn_out = cz_xcalloc(wl->n_turns ? wl->n_turns : 1, 1);
    S->slot_of = cz_xmalloc(n_ses * sizeof *S->slot_of);
    for (uint32_t si = 0; si < n_ses; si++)
        S->slot_of[si] = NONE;
    S->initial = cz_xmalloc((wl->n_turns ? wl->n_turns : 1) * sizeof *S->initial);
    S->bounded = cz_xmalloc(n_ses * sizeof *S->bounded);
    for (uint32_t si = 0; si < wl->n_sessions; si++) {
        const cz_session *ses = &wl->sessions[si];
        for (uint32_t k = 0; k < ses->n_turns; k++)
            S->turn_session[ses->turn_off + k] = si;
        if (ses->n_turns == 0)
            continue;
        /* under a concurrency bound every session's first turn waits for a slot (closed
         * loops, or open arrivals under vLLM's --max-concurrency); an open session's later
         * turns arrive at their own times */
        if (wl->concurrency > 0)
            S->bounded[S->n_bounded++] = si;
        else
            S->initial[S->n_initial++] = ses->turn_off;
        for (uint32_t k = 1; ses->timing == CZ_TIMING_OPEN && k < ses->n_turns; k++)
            S->initial[S->n_initial++] = ses->turn_off + k;
    }
    double *times = cz_xmalloc((wl->n_turns ? wl->n_turns : 1) * sizeof *times);
    for (uint32_t i = 0; i < S->n_initial; i++)
        times[i] = wl->turns[S->initial[i]].arrival_s;
    cz_sort_by_time(S->initial, times, S->n_initial);
    for (uint32_t i = 0; i < S->n_bounded; i++)
        times[i] = wl->turns[wl->sessions[S->bounded[i]].turn_off].arrival_s;
    cz_sort_by_time(S->bounded, times, S->n_bounded);
    free(times);
}

cz_status cz_deploy_create(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                           const cz_driver *drv, cz_deploy **out, cz_err *err)
{
    CZ_ASSERT(!cfg->cross_stage);
    CZ_ASSERT(!cfg->pd || (drv->pull && !wl->live && wl->n_streams == 0)); /* the parser's */
    *out = NULL;
    uint32_t first_ar = NONE, n_pipe = cfg->model.n_pipe;
    for (uint32_t p = 0; p < n_pipe && first_ar == NONE; p++)
        if (cfg->model.stages[cfg->model.pipe[p].stage].kind == CZ_STAGE_AR)
            first_ar = p;
    CZ_ASSERT(first_ar != NONE);
    if (wl->n_turns == 0 && wl->n_streams == 0 && !wl->live)
        return cz_err_set(err, CZ_EINVAL, "workload has no requests and no streams");
    if (wl->live && (wl->n_streams > 0 || wl->concurrency > 0))
        return cz_err_set(err, CZ_EINVAL, "a live workload (requests as they come) has no "
                                          "periodic streams and no concurrency bound");
    if (cfg->cost_kind == CZ_COST_SERVICE && n_pipe != 1)
        return cz_err_set(err, CZ_EINVAL,
                          "cost kind \"service\" needs a single-stage model (set \"stage\"); "
                          "model '%s' has a %u-stage pipeline",
                          cfg->model.name, n_pipe);
    cz_deploy *S = cz_xcalloc(1, sizeof *S);
    S->memo_si = NONE;
    S->cfg = cfg;
    S->wl = wl;
    S->streamed = wl->gen != NULL;
    S->live = wl->live;
    S->m = m;
    cz_metrics_set_slo(m, &cfg->slo);
    cz_metrics_track_classes(m, cz_workload_mixed_classes(wl));
    S->drv = *drv;
    /* llm_d reads a serving core's KV use, which a decode step changes, and kv_router
     * tracking the output its active blocks, which grow with the steps: each step goes
     * through the runtime for them. What the others read stays as it is through a run,
     * which admits, finishes and preempts nothing (cz_server_run_room): vllm_dp's load (4
     * x waiting + running), kv_router's active blocks without the output's and its index
     * of cached prefixes, which hears of no eviction in a run (a watched cache's runs take
     * only blocks never used) and whose held prefixes a run leaves alone
     * (cz_server_held_prefix). Each step goes through the runtime for a live workload
     * too, whose driver may read a serving core between its reports, and when the rows of
     * /timeline and /itl are kept, which come in time order */
    S->runs = drv->run && drv->fast_forward && !wl->live && cz_metrics_rows_dropped(m) &&
              cfg->router.policy != CZ_ROUTER_LLM_D &&
              !(cfg->router.policy == CZ_ROUTER_KV && cfg->router.track_output_blocks);
    S->n_pipe = n_pipe;
    S->voc = -1;
    S->first_ar = first_ar;
    for (uint32_t p = 0; p < n_pipe; p++)
        if (cfg->model.stages[cfg->model.pipe[p].stage].kind == CZ_STAGE_VOCODER)
            S->voc = (int32_t)p;
    for (uint32_t p = 0; p < n_pipe; p++)
        if (cfg->model.stages[cfg->model.pipe[p].stage].kind == CZ_STAGE_AR)
            S->play_p = p;
    build_replicas(S, wl->n_sessions + wl->n_streams);
    S->rng = cz_rng_new(cfg->seed, CZ_RNG_ROUTER, 0);
    m->acct.requests = wl->n_turns;
    m->acct.streams = wl->n_streams;
    S->closed_sp = cz_xmalloc(S->n_pipe * sizeof *S->closed_sp);
    if (S->streamed) {
        /* sessions arrive in order as they are produced (pull); the arrays grow with the
         * window */
        if (wl->concurrency > 0)
            S->n_bounded = wl->n_sessions;
        else
            S->n_initial = wl->n_sessions;
    } else {
        whole_arrays(S);
    }
    S->streams = cz_xcalloc(wl->n_streams ? wl->n_streams : 1, sizeof *S->streams);
    for (uint32_t j = 0; j < wl->n_streams; j++) {
        const cz_stream *sm = &wl->streams[j];
        stream_rt *sr = &S->streams[j];
        uint32_t base = S->rep_off[S->first_ar], n = cfg->place[S->first_ar].replicas;
        sr->rep = base + j % n;
        sr->seq = cz_server_seq_open(SRV(S, sr->rep), (uint64_t)wl->n_sessions + j,
                                     (uint32_t)sm->cls, true);
        sr->frames = (uint32_t)floor(sm->duration_s / sm->frame_period_s + 1e-9);
        m->acct.frames += sr->frames;
    }
    S->adm = cfg->admission;
    S->cap_at_last_s = S->adm.cap;
    if (wl->n_streams > 0)
        cz_metrics_gateway(m, 0.0, S->adm.cap, 0);
    S->tick_max_lat_s = NAN;
    for (uint32_t j = 0; j < wl->n_streams; j++) {
        double end = wl->streams[j].start_s + wl->streams[j].duration_s;
        if (end > S->streams_end_s)
            S->streams_end_s = end;
        if (wl->streams[j].start_s > S->last_start_s)
            S->last_start_s = wl->streams[j].start_s;
    }
    *out = S;
    return CZ_OK;
}

void cz_deploy_start(cz_deploy *S)
{
    const cz_workload *wl = S->wl;
    for (uint32_t j = 0; j < wl->n_streams; j++)
        if (S->streams[j].frames > 0)
            S->drv.timer(S->drv.ctx, wl->streams[j].start_s, CZ_TIMER_TICK, j, 0);
    if (S->adm.kind == CZ_ADMIT_AIMD)
        S->drv.timer(S->drv.ctx, wl->streams[0].frame_period_s, CZ_TIMER_ADMIT, 0, 0);
    push_next_initial(S, 0.0);
    for (uint32_t i = 0; i < wl->concurrency && S->next_bounded < S->n_bounded; i++)
        start_bounded_session(S, 0.0);
}

void cz_deploy_timer(cz_deploy *S, double now, uint32_t kind, uint32_t a, uint32_t b)
{
    S->now_s = now;
    switch (kind) {
    case CZ_TIMER_ARRIVAL: on_arrival(S, now, a); break;
    case CZ_TIMER_BARGE_IN: on_barge_in(S, a, b, now); break;
    case CZ_TIMER_REPLY_END: {
        ses_rt *ss = SES(S, a);
        if (ss->g == b && !ss->barged) {
            const cz_player *pl = PLAYER(S, a);
            cz_audio_record *ar = &S->m->audio[ss->audio_rec];
            ar->audio_s = pl->audio_s;
            ar->heard_s = pl->audio_s;
            ar->last_audio_s = pl->chunks ? pl->last_arrival_s : NAN;
            ar->max_underrun_s = pl->max_underrun_s;
            ar->underruns = pl->underruns;
            ar->chunks = pl->chunks;
            ar->continuous = cz_player_continuous(pl);
            ar->end_s = now;
            turn_ended(S, a, now, false);
        }
        break;
    }
    case CZ_TIMER_TICK: on_tick(S, a, b, now); break;
    case CZ_TIMER_SPEECH: on_speech(S, a, now); break;
    case CZ_TIMER_ADMIT: on_admit_tick(S, now); break;
    case CZ_TIMER_SIGNAL: on_signal(S); break;
    case CZ_TIMER_WAKE:
        if (S->gpus[a].wake_s <= now)
            S->gpus[a].wake_s = INFINITY;
        gpu_mark(S, a);
        break;
    default: CZ_ASSERT(0 && "unknown timer");
    }
    dispatch_all(S, now);
}

/* Decode runs: at most this many steps promised at once (a run cut short by an arrival
 * wastes the timing of the rest). */
#define RUN_CAP 1024u

/* Applies the steps of replica ri's decode run that ended by `until` (the fast-forward
 * steps at their ends, in one cz_server_run_apply, as the driver's reports of them would
 * have); with
 * `cut`, the run then ends with the step in flight, whose end the driver reports instead
 * (cz_driver.run_cut). Returns the end of the last step applied (-inf: none). */
static double run_sync(cz_deploy *S, uint32_t ri, double until, bool cut)
{
    rep_rt *r = &S->reps[ri];
    CZ_ASSERT(r->run_m > 0 && r->busy);
    cz_server_run_hold(r->srv, false);
    double last = -INFINITY;
    uint32_t j = r->run_j;
    while (j < r->run_m && r->run_t[j] <= until)
        j++;
    if (j > r->run_j) {
        /* cz_server_run_room promised them */
        cz_server_run_apply(r->srv, &r->run_t[r->run_j], j - r->run_j);
        S->progress += j - r->run_j;
        last = r->run_t[j - 1];
        r->run_j = j;
    }
    if (r->run_j == r->run_m) {
        r->run_m = r->run_j = 0; /* the step in flight is the run's last */
    } else if (cut) {
        double end = r->run_t[r->run_j];
        r->run_m = r->run_j = 0;
        S->drv.run_cut(S->drv.ctx, ri, end);
    } else {
        cz_server_run_hold(r->srv, true);
    }
    return last;
}

double cz_deploy_runs_sync(cz_deploy *S, double until)
{
    double last = -INFINITY;
    for (uint32_t ri = 0; ri < S->n_reps; ri++)
        if (S->reps[ri].run_m > 0)
            last = fmax(last, run_sync(S, ri, until, true));
    return last;
}

/* The fast-forward step: replica ri's batch ended at `now` and, when nothing else is to be
 * dispatched (no device marked, none dispatched on every event, no operation deferred) and
 * its serving core finds the next step the same decode set (cz_server_step_again), that
 * step starts at once, handed to the driver as dispatch_run would hand it (the replica is
 * its device's only one, so the dispatch would pick it), and the router learns its load as
 * dispatch would. False: nothing was done. */
static bool step_again(cz_deploy *S, uint32_t ri, double now)
{
    rep_rt *r = &S->reps[ri];
    gpu_rt *g = &S->gpus[r->gpu];
    if (!S->drv.fast_forward || !r->srv || S->n_dirty > 0 || S->n_always > 0 || r->n_ops > 0 ||
        g->n_reps != 1)
        return false;
    cz_batch b;
    if (!cz_server_step_again(r->srv, now, &b))
        return false;
    S->progress++;
    active_sync(S, ri); /* as on_ar_done takes the step's end in */
    cz_deploy_step st = {.rep = ri, .p = r->p, .gpu = r->gpu, .srv = r->srv, .batch = &b};
    uint32_t m = S->runs ? cz_server_run_room(r->srv, RUN_CAP) : 0;
    if (m == 0) {
        S->drv.step(S->drv.ctx, &st, now);
        S->drv.launched(S->drv.ctx, r->gpu, now);
    } else {
        /* a decode run: the driver times the step in flight and the m promised after it,
         * each the decode set again with m x decode_seqs more context, and reports the
         * last one's end; the steps between are applied when something reaches the
         * replica or the run ends (run_sync) */
        if (m + 1 > r->run_cap) {
            /* by doubling, up to RUN_CAP + 1: a replica's runs are as long as its decodes */
            uint32_t cap = r->run_cap ? 2 * r->run_cap : 16;
            while (cap < m + 1)
                cap *= 2;
            r->run_cap = cap < RUN_CAP + 1 ? cap : RUN_CAP + 1;
            r->run_t = cz_xrealloc(r->run_t, r->run_cap, sizeof *r->run_t);
        }
        S->drv.run_step_ends(S->drv.ctx, &st, now, m + 1, r->run_t);
        r->run_m = m;
        r->run_j = 0;
        cz_server_run_hold(r->srv, true);
        S->drv.run(S->drv.ctx, ri, r->run_t[m], now);
    }
    if (S->cfg->router.policy == CZ_ROUTER_VLLM_DP || S->cfg->router.policy == CZ_ROUTER_LLM_D)
        load_refresh(S, ri, now);
    return true;
}

void cz_deploy_step_done(cz_deploy *S, uint32_t ri, double now)
{
    CZ_ASSERT(S->reps[ri].busy && S->gpus[S->reps[ri].gpu].inflight > 0);
    S->now_s = now;
    if (S->reps[ri].run_m > 0)
        run_sync(S, ri, now, false); /* the run's end: every step before it */
    CZ_ASSERT(S->reps[ri].run_m == 0);
    if (step_again(S, ri, now))
        return;
    rep_rt *r = REP(S, ri);
    r->busy = false;
    S->progress++;
    S->gpus[r->gpu].inflight--;
    if (r->srv)
        on_ar_done(S, ri, now);
    else
        on_jobs_done(S, r, now);
    /* operations that waited for the batch to end */
    for (uint32_t i = 0; i < r->n_ops; i++)
        op_apply(S, r, &r->ops[i], now);
    r->n_ops = 0;
    if (r->srv)
        run_xfers(S, ri, now);
    dispatch_all(S, now);
}

void cz_deploy_xfer_done(cz_deploy *S, uint32_t ri, uint32_t seq, bool to_host, double now)
{
    S->now_s = now;
    rep_rt *r = REP(S, ri);
    cz_server_on_xfer_done(RSRV(S, r), now, seq, to_host);
    uint64_t who = cz_server_seq(RSRV(S, r), seq)->session;
    if (S->cfg->pd && r->p == CZ_PD_DECODE && !to_host) {
        ses_rt *ss = SES(S, (uint32_t)who);
        if (ss->pd_pulling) {
            /* the pull landed: the prefill replica's copy is free to go */
            ss->pd_pulling = false;
            const ses_stage *pst = SP(S, (uint32_t)who, CZ_PD_PREFILL);
            if (ss->pd_abort) {
                ss->pd_abort = false;
                deferred_op op = {1, pst->seq, (uint32_t)who, 0, ss->pd_keep, false};
                op_submit(S, pst->rep, op, now);
            } else {
                pd_release_prefill(S, (uint32_t)who, now);
            }
        }
    }
    /* a store that outlived its session's close ends here: the session (perhaps gone
     * from a streamed workload's window) has nothing left to start */
    if (who < S->wl->n_sessions && slot_of(S, (uint32_t)who) != CLOSED) {
        submit_next(S, (uint32_t)who, now);
        maybe_close(S, (uint32_t)who);
    }
    run_xfers(S, ri, now);
    dispatch_all(S, now);
}

cz_status cz_deploy_finish(cz_deploy *S, bool cut, double now, cz_run_stats *stats,
                           cz_err *err)
{
    const cz_workload *wl = S->wl;
    S->now_s = now;
    cz_deploy_runs_sync(S, now);
    stats->kv_saturated_at_s = NAN;
    for (uint32_t i = 0; i < S->n_reps; i++) {
        if (!S->reps[i].srv)
            continue;
        cz_preload_stats pl;
        cz_server_preload_stats(SRV(S, i), &pl);
        stats->preload.started += pl.started;
        stats->preload.hits += pl.hits;
        stats->preload.late += pl.late;
        stats->preload.skips += pl.skips;
        stats->preload.cancels += pl.cancels;
        stats->preload.fallbacks += pl.fallbacks;
        uint64_t ow, owt;
        cz_server_overwrites(SRV(S, i), &ow, &owt);
        stats->overwrites += ow;
        stats->overwrite_tokens += owt;
        cz_server_finalize(SRV(S, i));
        double t = cz_server_saturated_at(SRV(S, i));
        if (!isnan(t) && !(t >= stats->kv_saturated_at_s))
            stats->kv_saturated_at_s = t;
    }
    stats->kv_pulls = S->pd_pulls;
    stats->kv_pull_bytes = S->pd_pull_bytes;
    /* the router's balance over the first autoregressive stage */
    uint32_t n = S->cfg->place[S->first_ar].replicas;
    stats->replicas = n;
    double sum = 0, sq = 0, lo = INFINITY, hi = 0;
    for (uint32_t k = 0; k < n; k++) {
        double t = (double)S->reps[S->rep_off[S->first_ar] + k].turns;
        sum += t;
        sq += t * t;
        lo = fmin(lo, t);
        hi = fmax(hi, t);
    }
    double mean = sum / n;
    stats->replica_turns_min = lo;
    stats->replica_turns_mean = mean;
    stats->replica_turns_max = hi;
    stats->replica_turns_cv = mean > 0 ? sqrt(fmax(sq / n - mean * mean, 0)) / mean : 0;
    cz_status st = account_end(S, cut, now, err);
    stats->arrivals = S->arrived;
    live_account(S, now);
    for (uint32_t j = 0; j < wl->n_streams; j++) {
        stats->streams_admitted += S->streams[j].ticked > 0;
        stats->streams_rejected += S->streams[j].rejected;
    }
    stats->admission_cap = S->cap_at_last_s;
    stats->stream_end_blocks = S->n_ended ? (double)S->end_blocks_sum / S->n_ended : NAN;
    stats->live_streams_mean = S->last_start_s > 0 ? S->live_area / (0.5 * S->last_start_s) : NAN;
    return st;
}

/* cz_deploy_check_router_index: the watcher's membership test for one replica. */
typedef struct index_probe {
    const cz_kvindex *x;
    uint32_t rep;
} index_probe;

static bool index_has(void *ctx, uint64_t hash)
{
    const index_probe *ip = ctx;
    return cz_kvindex_has(ip->x, ip->rep, hash);
}

bool cz_deploy_check_router_index(const cz_deploy *S, cz_err *err)
{
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        if (S->kvx_of[p] < 0)
            continue;
        const cz_kvindex *x = &S->kvx[S->kvx_of[p]];
        if (!cz_kvindex_check(x, err))
            return false;
        uint32_t base = S->rep_off[p];
        for (uint32_t k = 0; k < S->cfg->place[p].replicas; k++) {
            index_probe ip = {x, k};
            uint32_t n = 0;
            if (!cz_server_check_published(S->reps[base + k].srv, index_has, &ip, &n, err))
                return false;
            if (n != cz_kvindex_held(x, k)) {
                cz_err_set(err, CZ_EINVAL, "stage %u replica %u caches %u published blocks, "
                           "the index holds %u", p, k, n, cz_kvindex_held(x, k));
                return false;
            }
        }
    }
    return true;
}

uint32_t cz_deploy_replicas(const cz_deploy *S)
{
    return S->n_reps;
}

cz_deploy_replica cz_deploy_replica_at(const cz_deploy *S, uint32_t ri)
{
    CZ_ASSERT(ri < S->n_reps);
    const rep_rt *r = &S->reps[ri];
    return (cz_deploy_replica){.p = r->p, .gpu = r->gpu, .slot = r->slot, .srv = r->srv};
}

bool cz_deploy_gpu_async(const cz_deploy *S, uint32_t gpu)
{
    CZ_ASSERT(gpu < S->cfg->n_gpus);
    return S->gpus[gpu].async;
}

/* ---- live workloads ---- */

/* Session b, never opened, takes over the state of session a, whose turns have all ended:
 * its sequences (and the KV they hold) and their replicas; a closes without closing
 * them. */
static void hand_over(cz_deploy *S, uint32_t a, uint32_t b)
{
    uint32_t k = *SLOT_OF(S, a);
    CZ_ASSERT(k != NONE && k != CLOSED && slot_of(S, b) == NONE);
    *SLOT_OF(S, b) = k;
    *SLOT_OF(S, a) = CLOSED;
    S->memo_si = NONE;
    ses_rt *ss = &S->ses_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK];
    *ss = (ses_rt){.g = NONE, .rec0 = UINT64_MAX};
    ses_stage *sp = &S->sp_chunk[k / SLOT_CHUNK][(size_t)(k % SLOT_CHUNK) * S->n_pipe];
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = &sp[p];
        *st = (ses_stage){.rep = st->rep, .seq = st->seq};
        if (st->seq != NONE)
            cz_server_seq_rebind(SRV(S, st->rep), st->seq, b);
    }
    memset(&S->pl_chunk[k / SLOT_CHUNK][k % SLOT_CHUNK], 0, sizeof(cz_player));
    advance_low(S);
}

/* Whether session si's state can be handed to a session that follows it: open, every turn
 * ended, nothing pending, its sequences idle. */
static bool can_hand_over(cz_deploy *S, uint32_t si, uint32_t keep_tokens)
{
    uint32_t k = slot_of(S, si);
    if (k == NONE || k == CLOSED)
        return false;
    const ses_rt *ss = SES(S, si);
    if (ss->g != NONE || ss->blocked || ss->ended < WS(S, si)->n_turns)
        return false;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        const ses_stage *st = SP(S, si, p);
        if (st->seq == NONE)
            continue;
        cz_server *srv = SRV(S, st->rep);
        const cz_seq *q = cz_server_seq(srv, st->seq);
        if (q->state != CZ_SEQ_IDLE)
            return false;
        /* a context cut short only where it maps to the prompt: the first AR stage */
        if (keep_tokens != UINT32_MAX && p != S->first_ar)
            return false;
        /* a cut needs its KV in place; a context kept whole may still be moving (a store,
         * or a speech-triggered preload the turn then waits for) */
        if (keep_tokens < q->tokens_in + q->generated && cz_server_seq_moving(srv, st->seq))
            return false;
    }
    return true;
}

uint32_t cz_deploy_submit(cz_deploy *S, const cz_workload *one, uint32_t follows,
                          uint32_t keep_tokens, bool keep, double now, bool *took_over)
{
    S->now_s = now;
    cz_workload *wl = S->wl;
    CZ_ASSERT(S->live && S->next_initial == wl->n_sessions);
    window_release(S); /* the sessions behind the oldest open one go */
    uint32_t t_from = wl->turn_end;
    uint32_t si = cz_workload_live_push(wl, one);
    track_window(S, si, t_from);
    S->next_initial = si + 1;
    S->n_initial = si + 1;
    S->m->acct.requests += WS(S, si)->n_turns;
    bool took = false;
    if (follows != NONE && follows < si) {
        if (can_hand_over(S, follows, keep_tokens)) {
            hand_over(S, follows, si);
            took = true;
            ses_stage *st = SP(S, si, S->first_ar);
            if (keep_tokens != UINT32_MAX && st->seq != NONE)
                cz_server_seq_truncate(SRV(S, st->rep), st->seq, keep_tokens);
        } else {
            cz_deploy_release(S, follows, now);
        }
    }
    if (keep)
        SES(S, si)->keep = true;
    /* arrivals of a live session: its first turn now, its later ones (pushed with it)
     * as their timing says */
    on_arrival(S, now, WS(S, si)->turn_off);
    dispatch_all(S, now);
    if (took_over)
        *took_over = took;
    return si;
}

bool cz_deploy_can_follow(cz_deploy *S, uint32_t si, uint32_t keep_tokens)
{
    return si < S->wl->n_sessions && can_hand_over(S, si, keep_tokens);
}

uint32_t cz_deploy_kv_tokens(cz_deploy *S, uint32_t si)
{
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return 0;
    const ses_stage *st = SP(S, si, S->first_ar);
    if (st->seq == NONE)
        return 0;
    const cz_seq *q = cz_server_seq(SRV(S, st->rep), st->seq);
    return q->host_tokens > q->computed ? q->host_tokens : q->computed;
}

void cz_deploy_release(cz_deploy *S, uint32_t si, double now)
{
    S->now_s = now;
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return;
    SES(S, si)->keep = false;
    maybe_close(S, si);
    dispatch_all(S, now);
}

/* Ends session si's open turn aborted at `now`, its work stopped: a spoken reply is cut
 * where the user stopped hearing it (the runtime's player); a text reply keeps its first
 * `heard` generated tokens in the context at each autoregressive stage (UINT32_MAX: as
 * many as the stage generated), the rest discarded with their KV. */
static void cut_open_turn(cz_deploy *S, uint32_t si, uint32_t heard, double now)
{
    ses_rt *ss = SES(S, si);
    if (S->voc >= 0 || ss->tts) {
        on_barge_in(S, si, ss->g, now);
        return;
    }
    ss->barged = true;
    uint32_t each[CZ_MAX_STAGES];
    for (uint32_t q = 0; q < CZ_MAX_STAGES; q++)
        each[q] = heard;
    stop_stages(S, si, each, now);
}

void cz_deploy_cancel(cz_deploy *S, uint32_t si, double now)
{
    S->now_s = now;
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return;
    ses_rt *ss = SES(S, si);
    ss->keep = false; /* its context is cut short: nothing follows it */
    if (ss->g != NONE && !ss->barged)
        cut_open_turn(S, si, 0, now);
    maybe_close(S, si);
    dispatch_all(S, now);
}

cz_preload_outcome cz_deploy_speech_start(cz_deploy *S, uint32_t si, double now)
{
    S->now_s = now;
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED || SES(S, si)->g != NONE || SES(S, si)->blocked)
        return CZ_PRELOAD_NOTHING;
    cz_preload_outcome o = speech_start(S, si, -1.0, now);
    dispatch_all(S, now);
    return o;
}

void cz_deploy_playback(cz_deploy *S, uint32_t si, double played_s, double received_s,
                        double last_chunk_s, double now)
{
    S->now_s = now;
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return;
    CZ_ASSERT(played_s >= 0 && played_s <= received_s && last_chunk_s >= 0);
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        ses_stage *st = SP(S, si, p);
        if (stage_is_ar(S, p) && st->seq != NONE)
            cz_server_on_playback(SRV(S, st->rep), now, st->seq, played_s, received_s,
                                  last_chunk_s);
    }
    dispatch_all(S, now); /* the scheduler's urgencies changed */
}

bool cz_deploy_barge_in(cz_deploy *S, uint32_t si, uint32_t heard, double now)
{
    S->now_s = now;
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return false;
    ses_rt *ss = SES(S, si);
    if (ss->g == NONE || ss->barged)
        return false;
    cut_open_turn(S, si, heard, now);
    maybe_close(S, si);
    dispatch_all(S, now);
    return true;
}

bool cz_deploy_settling(cz_deploy *S, uint32_t si)
{
    uint32_t k = si < S->wl->n_sessions ? slot_of(S, si) : CLOSED;
    if (k == NONE || k == CLOSED)
        return false;
    if (SES(S, si)->blocked)
        return true;
    for (uint32_t p = 0; p < S->n_pipe; p++) {
        const ses_stage *st = SP(S, si, p);
        if (st->seq != NONE && cz_server_seq_moving(SRV(S, st->rep), st->seq))
            return true;
    }
    return false;
}

uint64_t cz_deploy_progress(const cz_deploy *S)
{
    return S->progress;
}

bool cz_deploy_busy(const cz_deploy *S)
{
    return S->arrived > S->finished || S->live_streams > 0;
}

void cz_deploy_stalled(cz_deploy *S)
{
    S->stalled = true;
}

void cz_deploy_counts(const cz_deploy *S, uint64_t *arrived, uint64_t *finished)
{
    *arrived = S->arrived;
    *finished = S->finished;
}
