/* cz_sim.h - the discrete-event simulator: an experiment config, a workload, and the
 * serving pipeline of a model card (encoders, autoregressive stages, vocoders), each stage
 * replica served by the serving core (cz_server.h) or a batching queue (cz_jobq.h), with
 * step times from the cost model and KV transfers over modelled host links.
 *
 * The driver owns time. Events are arrivals (open-loop turns in time order, fed one at a
 * time; closed-loop turns pushed when the previous reply ends), session starts under a
 * concurrency bound, batch and transfer completions, barge-ins and stream ticks. A GPU
 * runs one step at a time and, when idle, asks its stage replicas for work in turn; under
 * VoxServe's asynchronous pipeline its replicas' steps co-run on streams (cz_streams.h). The
 * client side (playback, barge-in, periodic frames) is simulated here too
 * (docs/pipeline.md). */
#ifndef CZ_SIM_H
#define CZ_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_distspec.h"
#include "cz_metrics.h"
#include "cz_models.h"
#include "cz_policies.h"
#include "cz_server.h"
#include "cz_workload.h"

#define CZ_MAX_REPLICAS 64

typedef enum cz_cost_kind {
    CZ_COST_ROOFLINE = 0, /* step time from the roofline of the model stage on the hardware */
    CZ_COST_SERVICE       /* each request carries a service time drawn from a distribution;
                             a step costs the shares of the requests it advances (queueing
                             validation, docs/validation.md) */
} cz_cost_kind;

/* How a session's turns are spread over a stage's data-parallel replicas. */
typedef enum cz_router {
    CZ_ROUTER_SESSION = 0, /* least loaded at the session's first turn, then sticky (its
                              multi-turn KV stays where it was) */
    CZ_ROUTER_LEAST_LOADED,/* the replica with the fewest open turns, at every turn */
    CZ_ROUTER_RANDOM       /* uniformly at random, at every turn */
} cz_router;

/* Placement of one pipeline stage. */
typedef struct cz_stage_place {
    cz_policy policy;               /* its scheduler (autoregressive stages) */
    uint32_t replicas;
    uint32_t gpus[CZ_MAX_REPLICAS]; /* GPU of each replica; stages on one GPU time-share it */
    cz_server_config server;        /* autoregressive stages */
    uint32_t max_batch, max_tokens; /* encoders and vocoders: jobs and tokens per step */
} cz_stage_place;

/* A parsed experiment config (docs/config.md). */
typedef struct cz_sim_config {
    char name[128];
    uint64_t seed;
    cz_cost_kind cost_kind;
    cz_model_card model;      /* its pipeline is what runs */
    cz_hw_card hw;
    cz_cost_params cost;
    cz_distspec service;      /* CZ_COST_SERVICE */
    cz_stage_place place[CZ_MAX_STAGES]; /* per pipeline stage */
    uint32_t n_gpus;
    uint32_t router;          /* cz_router */
    double gpu_memory_utilization;
    char scheduler[32];       /* the scheduler's name (every stage runs the same one) */
    cz_admission admission;   /* the gateway for periodic sessions (streams) */
    bool cross_stage;         /* a cross-stage scheduler (cz_xs_policy) runs the GPU */
    cz_xs_policy xs;
    double xs_ideal_e2e_s;    /* Nova's partition: Eq. 1 at the split decode starts from
                                 (enumerated or given), co-run factor included (NaN: not
                                 a partitioned Nova run) */
    cz_xs_split xs_ideal_vision;  /* what Eq. 1 sees there for the workload's mean request:
                                     decode on sm_decode_vision SMs beside vision on the rest */
    cz_xs_split xs_ideal_prefill; /* ... decode on sm_decode_prefill SMs beside prefill */
    cz_slo slo;
    double continuity_threshold_s; /* client: largest playback deficit still continuous */
    double frame_wait_fraction;    /* streams: a tick returns empty when its tokens are not
                                      ready by this fraction of the frame period (0.8) */
    double max_time_s;        /* stop the clock here (requests in flight count as failed) */
    double timeline_interval_s;
} cz_sim_config;

/* Parses an experiment config. `where` names it in messages (the file name),
 * `base_dir` resolves the workload's relative paths. The workload is built into *wl
 * (initialised by the caller). KV pools left unsized are derived per GPU from the
 * hardware card: (hbm_bytes x gpu_memory_utilization - weights placed on the GPU) shared
 * equally by the autoregressive replicas on it (docs/config.md). */
cz_status cz_sim_config_parse(const cJSON *cfg, const char *where, const char *base_dir,
                              cz_sim_config *out, cz_workload *wl, cz_err *err);

/* Counters of a run. */
typedef struct cz_sim_stats {
    uint64_t events;
    uint64_t arrivals;
    double sim_time_s;       /* time of the last event */
    double kv_saturated_at_s;/* first time any KV pool saturated (NaN: never) */
    /* cross-stage executor: decode steps, requests summed over them, SM share summed */
    uint64_t decode_steps, decode_seq_steps;
    double decode_share_sum;
    uint64_t vision_starts;   /* vision steps, and their waits since arrival summed */
    double vision_wait_sum_s;
    double vision_step_sum_s; /* vision steps' durations, and their waits for weights */
    double vision_stall_sum_s;
    double vision_resident_bytes; /* vision-encoder weights held on the GPU */
    /* requests through prefill, and their service (vision step + whole prefill step:
     * the time each held the exclusive worker) summed and summed squared; the arrival
     * rate, (arrivals - 1) over the span from the first to the last (NaN: fewer than 2) */
    uint64_t service_n;
    double service_sum_s, service_sq_sum_s2;
    double arrival_rate_rps;
    /* streams under a gateway: admitted and refused sessions, the cap when the last
     * session arrived (where the controller settled while sessions were offered), and live
     * sessions averaged over time in the second half of the arrivals (from half the last
     * start to the last start) */
    uint64_t streams_admitted, streams_rejected;
    uint32_t admission_cap;
    double live_streams_mean;
    double stream_end_blocks; /* mean KV blocks a stream held when it ended (NaN: none) */
    cz_preload_stats preload; /* speech-triggered preloads, over every replica */
    uint64_t overwrites, overwrite_tokens; /* BROS's bidirectional blocks */
} cz_sim_stats;

/* Called every few thousand events and once at the end (`done` set): lets a front end
 * print progress. Must not touch the simulation. */
typedef struct cz_sim_progress {
    double sim_time_s;
    uint64_t events;
    uint64_t arrived, finished, total_requests;
    bool done;
} cz_sim_progress;
typedef void (*cz_sim_progress_fn)(void *ctx, const cz_sim_progress *p);

/* Runs the simulation of `wl` under `cfg`, recording into `m` (initialised by the
 * caller). `progress` may be NULL. Deterministic for a given config and seed. */
cz_status cz_sim_run(const cz_sim_config *cfg, const cz_workload *wl, cz_metrics *m,
                     cz_sim_stats *stats, cz_sim_progress_fn progress, void *progress_ctx,
                     cz_err *err);

/* Adds the pipeline-level keys of a run to its summary object: audio and frame metrics
 * when the run had them, per-stage waste and KV reload ("stages"), generated and heard
 * tokens and the waste ratio over all autoregressive stages, and kv_pool_saturated_at_s. */
void cz_sim_summary_json(const cz_sim_config *cfg, const cz_metrics *m, const cz_sim_stats *st,
                         const cz_summary *sum, cJSON *summary);

/* Queueing-theory check of a run: when the config is a single server without batching
 * (cost kind "service", max_num_seqs 1) fed by Poisson arrivals
 * (workload.arrivals.process "poisson"), adds to `summary` an object "queueing_theory"
 * with the model name (M/M/1 or M/G/1), rho, the Pollaczek-Khinchine mean queue wait
 * lambda E[S^2] / (2 (1 - rho)) in ms, and the simulated mean's relative error. Returns
 * whether it applied (rho < 1 and the config qualifies). */
bool cz_sim_add_theory(const cz_sim_config *cfg, const cJSON *cfg_json, const cz_summary *sum,
                       cJSON *summary);

/* Step time of an autoregressive batch of pipeline stage `p` under the roofline (exposed
 * for tests). */
double cz_sim_roofline_step_s(const cz_sim_config *cfg, uint32_t p, const cz_batch *b);

#endif
