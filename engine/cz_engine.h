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
 *    replica's host tier on the copy thread; its completion is the core's.
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
 * scheduler, a pool beyond max_kv_bytes, an unknown backend; CZ_EDEVICE when the CUDA
 * backend has no device for every GPU of the placement, or a device call fails during the
 * run (the run stops: no results); a checkpoint's errors as cz_net_create's; CZ_EINTERNAL
 * when the accounting check fails. */
cz_status cz_engine_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                        const cz_engine_opts *opts, cz_run_stats *stats, bool *partial,
                        cz_run_progress_fn progress, void *progress_ctx, cz_err *err);

#endif
