/* cz_engine.h - the real engine: a driver of the deployment runtime (runtime/
 * cz_deploy.h) whose time is the wall clock and whose steps are real forward passes.
 *
 * The runtime holds the deployment (pipelines, placement, routers, the client, streams,
 * the gateway) and the serving cores; the engine gives them time and execution
 * (docs/engine.md):
 *  - the clock: seconds since the run started (CLOCK_MONOTONIC); the runtime's timers
 *    wait in an event queue keyed by that clock and fire when it passes them;
 *  - devices: each device of the config's placement is a kernel context (the CPU backend
 *    splits the engine's threads among the devices; on CUDA, one context per GPU with its
 *    compute and copy streams) with a worker thread that runs the
 *    steps handed to it in order, and a copy thread that moves KV between its pools and
 *    host memory; both report back to the run's thread, which alone calls the runtime;
 *  - a step of a decoder replica is built from the core's batch as vLLM V1 builds one
 *    (flattened tokens, positions, query_start_loc, seq_lens, block tables, slot mapping)
 *    over physical blocks that follow the core's accounting (cz_kvmap.h), and runs on the
 *    stage's net (cz_net.h); sampled ids extend each sequence's tokens; encoder and
 *    vocoder steps run their jobs through their nets;
 *  - a KV transfer copies the bytes of the positions it names between the pool and the
 *    replica's host tier on the copy thread; its completion is the core's;
 *  - with disaggregated prefill and decode (cz_config.pd) a decode replica's pull copies
 *    the positions it names from the prefill replica's pool into its own, with their
 *    token ids, on its device's copy thread (CPU backend only).
 * Every executed batch is recorded (cz_metrics' /steps): its shape, host build time,
 * device time, and what the config's cost model predicts for it.
 *
 * Wall-clock runs are not deterministic (thread timing); the workload and every sampled
 * id are (greedy by default). */
#ifndef CZ_ENGINE_H
#define CZ_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "cz_config.h"
#include "cz_deploy.h"
#include "cz_net.h"
#include "cz_run.h"

/* How `cadenza replay` runs the engine. */
typedef struct cz_engine_opts {
    const char *backend;              /* "cpu" or "cuda" (NULL: "cpu"); on CUDA, GPU g of
                                         the placement is CUDA device g */
    uint32_t threads;                 /* CPU threads in all; 0: the config's engine.threads */
    volatile sig_atomic_t *stop;      /* NULL, or a flag set asynchronously (Ctrl-C): the
                                         run stops at once, waits for the work in flight,
                                         and ends as a cut run */
} cz_engine_opts;

/* The weights the engine builds stage card `card` of cfg's model from: a Hugging Face
 * checkpoint (cfg->engine.weights, when not "random") for the pipeline's first
 * autoregressive stage, weights drawn from cfg->seed and the card's index (of type
 * engine.dtype) for every other stage. The checkpoint path points into cfg. */
cz_net_source cz_engine_net_source(const cz_config *cfg, uint32_t card);

/* CPU threads one device of the placement computes with: the total (opts->threads, else
 * engine.threads, else every online CPU) split evenly over sim.n_gpus devices (at least
 * 1); a cross-stage run's one device has them all. `opts` may be NULL. */
uint32_t cz_engine_device_threads(const cz_config *cfg, const cz_engine_opts *opts);

/* Serves `wl` under `cfg` on the engine, recording into `m` (initialised by the caller):
 * loads every stage's weights (cfg->engine), allocates the KV pools (at most
 * engine.max_kv_bytes each), starts the clock, and runs until the workload drains, the
 * clock passes sim.max_time_s or *opts->stop is set (*partial then true: turns still open
 * are unfinished). `progress` (may be NULL) is called about twice a second and at the end.
 * CZ_EINVAL (message naming the field) for a config the engine cannot run: a cross-stage
 * scheduler, a pool beyond max_kv_bytes, an unknown backend, disaggregation on the CUDA
 * backend; CZ_EDEVICE when the CUDA
 * backend has no device for every GPU of the placement, or a device call fails during the
 * run (the run stops: no results); a checkpoint's errors as cz_net_create's; CZ_EINTERNAL
 * when the accounting check fails. */
cz_status cz_engine_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                        const cz_engine_opts *opts, cz_run_stats *stats, bool *partial,
                        cz_run_progress_fn progress, void *progress_ctx, cz_err *err);

/* ---- the engine one event at a time ----
 *
 * For a driver loop of its own (cz_engine_run is one; `cadenza serve`'s engine execution,
 * which submits requests to the runtime as they come, is another). Not for cross-stage
 * configs. One thread makes every call except cz_engine_kick. */
typedef struct cz_engine cz_engine;

/* What a live driver sees and supplies. Every callback is made on the calling thread,
 * from inside cz_engine_advance. Any may be NULL. */
typedef struct cz_engine_observer {
    void *ctx;
    /* The input id at position `pos` of the context of a sequence of `session` (a live
     * request's prompt), asked once a position, in increasing order, as a step first
     * reads it; NULL: the workload's synthetic ids (a hash of the seed, the session and
     * the position). */
    int32_t (*input_id)(void *ctx, uint64_t session, uint32_t pos);
    /* A step of autoregressive replica `rep` ended at `now` having sampled ids[i] for
     * sequence seqs[i] (n of them), before the runtime handles its end: the observer may
     * end a sequence's turn with the id just sampled (cz_server_end_output; a stop
     * token). */
    void (*sampled)(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs,
                    const int32_t *ids, uint32_t n, double now);
    /* The runtime's turn outcomes as they are decided (cz_driver.turn_end). */
    void (*turn_end)(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                     uint32_t out_tokens, double now);
    /* Optional (may be NULL: the config's engine sampling for every row). The sampling of
     * the id a step samples for context position `pos` of a sequence of `session`, asked
     * as the step is built: *out holds the config's and the observer may change it (a
     * request's temperature, top_k, top_p); *seeded set true makes out->seed the row's
     * own seed, its draw keyed by `pos`, so the reply repeats wherever it is batched. */
    void (*sampling)(void *ctx, uint64_t session, uint32_t pos, cz_row_sampling *out,
                     bool *seeded);
} cz_engine_observer;

/* What the last cz_engine_advance did: handled a completion or a due timer; found nothing
 * due (work in flight or timers ahead: cz_engine_wait); found nothing in flight and no
 * timer (a live driver may still submit); the clock passed sim.max_time_s; the progress
 * watchdog stopped the run; a device failed or a step's logits were not finite. */
typedef enum cz_engine_state {
    CZ_ENGINE_RAN = 0,
    CZ_ENGINE_IDLE,
    CZ_ENGINE_DRAINED,
    CZ_ENGINE_CUT,
    CZ_ENGINE_STALLED,
    CZ_ENGINE_FAILED
} cz_engine_state;

/* Loads the engine for `wl` under `cfg` (both, and `m`, outlive it; wl may be a live
 * workload), starts its threads and its clock at 0 with the runtime started. `obs` may
 * be NULL (copied). Errors as cz_engine_run's; a cross-stage config is CZ_EINVAL. */
cz_status cz_engine_open(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                         const cz_engine_opts *opts, const cz_engine_observer *obs,
                         cz_engine **out, cz_err *err);
/* The runtime, for a driver that calls into it between cz_engine_advance calls (at
 * cz_engine_clock's time); what those calls ask of the devices is carried out at the
 * next cz_engine_advance or cz_engine_wait. */
cz_deploy *cz_engine_deploy(cz_engine *e);
/* Seconds since the engine's clock started. */
double cz_engine_clock(const cz_engine *e);
/* Handles the next completion, else the next timer due, else says why none. */
cz_engine_state cz_engine_advance(cz_engine *e);
/* Waits until a completion arrives, the next timer is due, cz_engine_kick is called, or
 * the clock reaches `until_s`, whichever is first. */
void cz_engine_wait(cz_engine *e, double until_s);
/* Wakes a cz_engine_wait (any thread). */
void cz_engine_kick(cz_engine *e);
/* Ends the run as `how` says (not CZ_ENGINE_RAN or _IDLE: CZ_ENGINE_DRAINED for a run
 * that a live driver ends with nothing open) and frees the engine: a failure's error; else
 * the runtime's accounting (cz_deploy_finish, cut for CZ_ENGINE_CUT; a stall names what
 * is stuck), the metrics finished and checked. Fills `stats`. */
cz_status cz_engine_close(cz_engine *e, cz_engine_state how, cz_run_stats *stats,
                          cz_err *err);

#endif
