/* cz_deploy.h - the deployment runtime: everything between a workload and the serving core
 * that both drivers share (docs/architecture.md).
 *
 * It holds the model card's pipeline placed on devices: stage replicas (a serving core,
 * cz_server.h, per autoregressive replica; a batching queue, cz_jobq.h, per encoder and
 * vocoder replica), routers, chunk forwarding between stages, the client (speech, voice
 * activity, playback at real-time rate, barge-in), periodic streams and their ticks, the
 * session gateway, operations deferred until a replica's batch ends, and the accounting of
 * every turn and frame. Like the core it is reactive: it never reads a clock and never
 * sleeps. A driver supplies time and execution through a `cz_driver` table: it runs the
 * steps the runtime starts on its devices, moves the KV bytes it asks for, fires its
 * timers, and reports each back at its own time. The discrete-event simulator
 * (sim/cz_sim.h) and the real engine (engine/) are two drivers of this one runtime.
 *
 * A device runs its replicas' steps one at a time, asking its idle replicas for work in
 * turn (round robin); a device whose stage runs VoxServe's asynchronous pipeline
 * (VoxServe, section 3.2.2) lets every replica keep a step in flight.
 *
 * Deterministic: the runtime's own random choices (the random router) come from streams
 * seeded by the config's seed; everything else follows from the calls the driver makes
 * and their order. */
#ifndef CZ_DEPLOY_H
#define CZ_DEPLOY_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_config.h"
#include "cz_jobq.h"
#include "cz_run.h"
#include "cz_server.h"

/* The runtime's timers; a driver fires them with cz_deploy_timer and never reads their
 * arguments. */
typedef enum cz_timer_kind {
    CZ_TIMER_ARRIVAL = 1, /* a: global turn index: its input is ready */
    CZ_TIMER_BARGE_IN,    /* a: session, b: global turn index */
    CZ_TIMER_REPLY_END,   /* a: session, b: global turn index: the reply has played */
    CZ_TIMER_TICK,        /* a: stream, b: frame */
    CZ_TIMER_SPEECH,      /* a: global turn index: the user starts speaking it */
    CZ_TIMER_WAKE,        /* a: device: deferred work becomes due */
    CZ_TIMER_ADMIT,       /* the session gateway's tick (Metronome's AIMD) */
    CZ_TIMER_SIGNAL       /* the replicas publish their loads to the routers */
} cz_timer_kind;

/* A step the runtime starts on one replica. For an autoregressive replica `srv` holds the
 * batch `batch` (server-owned, valid until cz_deploy_step_done; the decode set is walked
 * with cz_server_decode_first/_next); for an encoder or vocoder replica `jobs[0..n_jobs)`
 * are its jobs (`job_tokens` tokens in all) and `srv` is NULL. */
typedef struct cz_deploy_step {
    uint32_t rep;   /* replica id (0 .. cz_deploy_replicas) */
    uint32_t p;     /* its pipeline stage */
    uint32_t gpu;   /* its device */
    cz_server *srv;
    const cz_batch *batch;
    const cz_job *jobs;
    uint32_t n_jobs;
    uint64_t job_tokens;
} cz_deploy_step;

/* What a driver does for the runtime. Every callback is made from inside a cz_deploy_*
 * call, at that call's `now`. */
typedef struct cz_driver {
    void *ctx;
    /* Runs step `s` on its device from `now`; the driver reports its end with
     * cz_deploy_step_done. The step's contents must be taken before returning. */
    void (*step)(void *ctx, const cz_deploy_step *s, double now);
    /* Every step the runtime starts on device `gpu` at `now` has been handed over. */
    void (*launched)(void *ctx, uint32_t gpu, double now);
    /* Moves `bytes` of KV of sequence x->seq of replica `rep` over device `gpu`'s host link
     * (x->to_host: device to host); reported with cz_deploy_xfer_done. */
    void (*xfer)(void *ctx, uint32_t rep, uint32_t gpu, const cz_xfer *x, double bytes,
                 double now);
    /* Disaggregated prefill and decode (cz_config.pd): decode replica `rep` loads the KV of
     * positions [x->first, x->first + x->tokens) of its sequence x->seq (x->remote) from
     * sequence `src_seq` of prefill replica `src_rep`, which holds them until it is
     * reported, over the devices' network links; `bytes` per GPU. Reported with
     * cz_deploy_xfer_done(rep, x->seq, false). NULL for a driver that cannot (the config
     * parser refuses a disaggregated config there). */
    void (*pull)(void *ctx, uint32_t rep, const cz_xfer *x, uint32_t src_rep,
                 uint32_t src_seq, double bytes, double now);
    /* When a transfer of `bytes` over device `gpu`'s host link, submitted now, would
     * complete (the preload admission check); submits nothing. */
    double (*xfer_eta)(void *ctx, uint32_t gpu, double bytes, bool to_host, double now);
    /* Calls cz_deploy_timer(kind, a, b) at time t (>= now). */
    void (*timer)(void *ctx, double t, uint32_t kind, uint32_t a, uint32_t b);
    /* A turn opened on sequence `seq` of replica `rep` with metrics record `rec`, `in`
     * input tokens and `out` output tokens allowed so far (may be NULL). */
    void (*turn_opened)(void *ctx, uint32_t rep, uint32_t seq, uint64_t rec, uint32_t in,
                        uint32_t out);
    /* Optional (may be NULL). Turn `turn` (its index within session `session`) got its
     * outcome (cz_req_outcome) at `now`, having generated `out_tokens` tokens at the first
     * autoregressive stage. */
    void (*turn_end)(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                     uint32_t out_tokens, double now);
    /* The driver's time is the cost model's (the simulator): the runtime adds the cost's
     * request handling (cfg->ingest_s, ingest_per_token_s) before a workload's turn
     * reaches the scheduler. An engine's time is its own: false. A live submission
     * (cz_deploy_submit: a server's request) arrives when submitted either way, its
     * handling the server's own. */
    bool modelled;
    /* The driver takes the fast-forward step (docs/serving-core.md, "Fast-forward"): at a
     * step's end, cz_deploy_step_done may start the same decode-only batch again at once
     * (cz_server_step_again), skipping the dispatch, when nothing else was touched. The
     * result is the one a dispatch gives, call for call; a driver that runs steps one by
     * one on a device of its own (the engine) or watches each step's sequences leaves it
     * false. */
    bool fast_forward;
    /* Optional (NULL: none), with fast_forward: decode runs (docs/serving-core.md,
     * "Decode runs"). run_step_ends: when n decode-only steps, one after another from
     * start_s alone on their device, would end (end_s[0..n)), the k-th step `s` with
     * decode_ctx_tokens k x decode_seqs higher; a pure function of its arguments. run: replica `rep`
     * runs decode steps until end_s, which the driver reports with cz_deploy_step_done as
     * a step's end (the runtime applies the steps between when it needs them). run_cut:
     * the run on `rep` ends at end_s instead (< the end given); the end reported before is
     * void. */
    void (*run_step_ends)(void *ctx, const cz_deploy_step *s, double start_s, uint32_t n,
                          double *end_s);
    void (*run)(void *ctx, uint32_t rep, double end_s, double now);
    void (*run_cut)(void *ctx, uint32_t rep, double end_s);
} cz_driver;

typedef struct cz_deploy cz_deploy;

/* Decode runs: applies every step of a run that ended by `until` and ends each run with
 * its step then in flight (cz_driver.run_cut); returns the latest such step end (-inf:
 * none). A driver calls it when its run stops short of its events (a time limit). */
double cz_deploy_runs_sync(cz_deploy *d, double until);

/* A replica's place, for drivers. While a decode run is on the replica (cz_driver.run),
 * its serving core asserts on every call (cz_server_run_hold): runs are taken only for a
 * workload that is not live, whose driver reads no serving core between its reports. */
typedef struct cz_deploy_replica {
    uint32_t p;        /* pipeline stage */
    uint32_t gpu;      /* its device */
    uint32_t slot;     /* its position among the device's replicas (a stream) */
    cz_server *srv;    /* autoregressive stages; NULL for encoders and vocoders */
} cz_deploy_replica;

/* Builds the deployment of `cfg` for workload `wl` (both must outlive it), recording into
 * `m` (initialised by the caller), driven by `drv` (copied). Fails with CZ_EINVAL when the
 * workload is empty or the config's cost kind "service" meets a multi-stage pipeline. A
 * config with a cross-stage scheduler has no deployment runtime (asserted). A streamed
 * workload (cz_workload_stream) is consumed as the run goes: the deployment asks for each
 * session as the one before it arrives and releases those behind the oldest open one. */
cz_status cz_deploy_create(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                           const cz_driver *drv, cz_deploy **out, cz_err *err);
void cz_deploy_free(cz_deploy *d);

/* Starts the run at time 0: the first arrivals, stream ticks and gateway ticks become
 * timers. */
void cz_deploy_start(cz_deploy *d);

/* The driver's reports, each at its time `now` (non-decreasing over calls): a timer fired,
 * the step in flight on replica `rep` ended, a transfer of sequence `seq` of replica `rep`
 * completed. Each handles what follows and then starts the work its devices can take
 * (with cz_driver.fast_forward, a step's end may start the replica's next step at once,
 * handed over through the driver's step and launched callbacks as a dispatch would). */
void cz_deploy_timer(cz_deploy *d, double now, uint32_t kind, uint32_t a, uint32_t b);
void cz_deploy_step_done(cz_deploy *d, uint32_t rep, double now);
void cz_deploy_xfer_done(cz_deploy *d, uint32_t rep, uint32_t seq, bool to_host, double now);

/* Ends the run at `now`: `cut` when the driver stopped its clock (max_time_s) with work
 * left, which then counts as unfinished. Fills `stats` (the driver's counters, events and
 * sim_time_s, are the driver's to set) and gives every turn and frame its outcome; a turn
 * still open after a run that drained is CZ_EINTERNAL naming where it is stuck. */
cz_status cz_deploy_finish(cz_deploy *d, bool cut, double now, cz_run_stats *stats,
                           cz_err *err);

/* Replicas and devices, for drivers. */
uint32_t cz_deploy_replicas(const cz_deploy *d);
cz_deploy_replica cz_deploy_replica_at(const cz_deploy *d, uint32_t rep);
/* Whether device `gpu` lets its replicas' steps co-run (asynchronous pipeline). */
bool cz_deploy_gpu_async(const cz_deploy *d, uint32_t gpu);
/* For tests: under a prefix-aware router (llm_d, kv_router) with prefix caching, the
 * router's index of cached blocks agrees with the first autoregressive stage's caches:
 * every block a replica caches under a trace's hash is in the index under that replica,
 * and the index holds nothing else. True otherwise. False with the first difference in
 * err. O(the stage's blocks and sequences). */
bool cz_deploy_check_router_index(const cz_deploy *d, cz_err *err);

/* Requests arrived and ended so far (progress lines). */
void cz_deploy_counts(const cz_deploy *d, uint64_t *arrived, uint64_t *finished);

/* Live workloads (cz_workload_live): requests submitted as they come, each a session of
 * its own: the one session of `one` (cz_workload_live_push), whose first turn arrives at
 * `now` (non-decreasing, like every report's); returns its index. `follows` (UINT32_MAX: none) names an
 * earlier session of the same client conversation: when it is open and idle (every turn
 * ended, nothing in flight, kept by `keep` when it was submitted) the new session takes
 * over its sequences, replicas and the KV they hold, which then serves as the prefix of its
 * context (its turn's input tokens are only what is new); otherwise `follows` is released
 * and the new session starts cold; *took_over (may be NULL) says which. `keep_tokens`
 * (UINT32_MAX: all) keeps only that prefix of the followed context (the tokens a new prompt
 * shares with it; cz_server_seq_truncate), which a pipeline of more than one
 * autoregressive stage cannot do: it then starts cold. `keep`: the session stays
 * open after its turn, its KV idle (dropped or offloaded as the config says, evictable), for
 * a session that may follow it, until cz_deploy_release. */
uint32_t cz_deploy_submit(cz_deploy *d, const cz_workload *one, uint32_t follows,
                          uint32_t keep_tokens, bool keep, double now, bool *took_over);
/* Whether a session submitted now could follow session si keeping `keep_tokens` of its
 * context (UINT32_MAX: all): cz_deploy_submit would take it over. */
bool cz_deploy_can_follow(cz_deploy *d, uint32_t si, uint32_t keep_tokens);
/* Tokens of session si's context at its first autoregressive stage whose KV is held, in
 * the pool or in host memory (0 for a closed session): what a session following it gets
 * without recomputing. */
uint32_t cz_deploy_kv_tokens(cz_deploy *d, uint32_t si);
/* A kept session is no longer kept: it closes (its KV freed) once its turn has ended.
 * No effect on a closed session. */
void cz_deploy_release(cz_deploy *d, uint32_t si, double now);
/* The client of session si went away at `now`: its open turn ends aborted (a spoken reply
 * cut where it was heard), its work stops, and the session closes, its KV freed. No effect
 * on a closed session. */
void cz_deploy_cancel(cz_deploy *d, uint32_t si, double now);

/* The interaction plane of live sessions (LiveServe section 3): the client's signals for
 * session si at `now`, fed to the runtime's client model as the simulated client's are.
 * No effect on a closed session.
 *
 * The user started speaking the session's next turn. With its turn ended (a kept session
 * whose next request has not come) its resident KV is protected from eviction and, with
 * preload on, its offloaded KV starts loading when the load would land by the time the
 * turn is expected (LiveServe section 5.2's admission, cz_server_speech_end_estimate).
 * Returns what the preload did at the first autoregressive stage; CZ_PRELOAD_NOTHING when
 * the turn is still open or nothing is offloaded. */
cz_preload_outcome cz_deploy_speech_start(cz_deploy *d, uint32_t si, double now);
/* The client has played `played_s` of the `received_s` seconds of audio it holds of the
 * session's latest reply (0 <= played_s <= received_s), the last `last_chunk_s` of it
 * received in its latest chunk: read by interaction-aware schedulers (playback buffer)
 * and next-use eviction (the reply's remaining playback). */
void cz_deploy_playback(cz_deploy *d, uint32_t si, double played_s, double received_s,
                        double last_chunk_s, double now);
/* Barge-in: the user interrupted the session's open turn having heard the first `heard`
 * tokens of its reply. The turn ends aborted and its work stops; the heard tokens stay in
 * the context (their KV kept) and the rest are discarded with their KV; a kept session
 * stays open for the request that follows. A pipeline with a vocoder cuts where its own
 * player says the user stopped hearing (`heard` is not read). Returns false, doing nothing,
 * when no turn is open. */
bool cz_deploy_barge_in(cz_deploy *d, uint32_t si, uint32_t heard, double now);

/* Whether session si is settling: a cut (a barge-in's, a cancel's) waits for the batch in
 * flight, or its KV is moving (a store, a preload). cz_deploy_can_follow may say yes once
 * it has settled. */
bool cz_deploy_settling(cz_deploy *d, uint32_t si);

/* The progress watchdog's view (cz_watchdog, cz_run.h): a mark that grows with every
 * arrival, turn end, frame recorded and step completed, and whether work is open (a turn
 * arrived and not ended, or a stream live). */
uint64_t cz_deploy_progress(const cz_deploy *d);
bool cz_deploy_busy(const cz_deploy *d);
/* The driver's watchdog stops the run: cz_deploy_finish (not cut) then reports the open
 * turns as stuck in a stalled run rather than a drained one. */
void cz_deploy_stalled(cz_deploy *d);

/* Sorts ids[0..n) by times[i] (the time of ids[i]), ties by id. Allocates a scratch
 * array (load time only). */
void cz_sort_by_time(uint32_t *ids, const double *times, uint32_t n);

#endif
