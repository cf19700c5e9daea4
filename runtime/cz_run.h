/* cz_run.h - what a run of a deployment reports beside its metrics, whichever driver ran
 * it: counters filled by the deployment runtime (cz_deploy.h) or the cross-stage
 * runtime (cz_xstage.h), the progress callback, and the pipeline-level keys of the summary. */
#ifndef CZ_RUN_H
#define CZ_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_config.h"
#include "cz_metrics.h"
#include "cz_results.h"
#include "cz_server.h"

/* Counters of a run. */
typedef struct cz_run_stats {
    uint64_t events;
    uint64_t arrivals;
    double sim_time_s;       /* time of the last event */
    double kv_saturated_at_s;/* first time any KV pool saturated (NaN: never) */
    /* cross-stage runtime: decode steps, requests summed over them, SM share summed */
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
    /* the first autoregressive stage's replicas (more than one: the router's balance):
     * turns each started, least, mean and most, and their coefficient of variation */
    uint32_t replicas;
    double replica_turns_min, replica_turns_mean, replica_turns_max, replica_turns_cv;
    /* disaggregated prefill and decode: KV transfers from the prefill pool to the decode
     * pool, and their bytes (per GPU of a tensor-parallel group) */
    uint64_t kv_pulls;
    double kv_pull_bytes;
} cz_run_stats;

/* Called every few thousand events and once at the end (`done` set): lets a front end
 * print progress. Must not touch the simulation. */
typedef struct cz_run_progress {
    double sim_time_s;
    uint64_t events;
    uint64_t arrived, finished, total_requests;
    bool done;
} cz_run_progress;
typedef void (*cz_run_progress_fn)(void *ctx, const cz_run_progress *p);

/* The latest time a run represents, in seconds of its clock (sim.max_time_s's limit):
 * a simulated clock that would pass it ends the run with CZ_EINVAL (cz_run_clock_error),
 * for the config's times are out of range. */
#define CZ_CLOCK_MAX_S 1e15

/* Sets CZ_EINVAL on `err`: the clock would pass CZ_CLOCK_MAX_S at `t_s`. */
cz_status cz_run_clock_error(double t_s, cz_err *err);

/* The progress watchdog every driver keeps. Progress is what the runtime counts in its
 * progress mark (cz_deploy_progress: a turn arriving or ending, a frame recorded, a step
 * completing). A run is stalled when work is open and the mark has not moved over at least
 * `min_events` of the driver's events and `min_s` of its clock (simulated or wall), or
 * over CZ_WATCHDOG_SAME_TIME x min_events events whatever the clock did: a
 * livelock, whose events never finish anything, ends as a bug report naming where it is
 * stuck, as a run whose events ran out does. */
/* A loop whose events keep the clock still is stalled after this many times min_events. */
#define CZ_WATCHDOG_SAME_TIME 20

typedef struct cz_watchdog {
    uint64_t min_events;
    double min_s;
    uint64_t mark;      /* the mark at the last progress */
    uint64_t quiet;     /* events since */
    double since_s;     /* the clock at the last progress */
} cz_watchdog;

void cz_watchdog_init(cz_watchdog *w, uint64_t min_events, double min_s);

/* After an event at `now` with the runtime's progress mark `mark` and whether work is open
 * (`busy`): true when the run is stalled. O(1). */
bool cz_watchdog_stalled(cz_watchdog *w, double now, uint64_t mark, bool busy);

/* Prefixes `err` (the runtime's report of what is stuck) with the stall's extent. */
void cz_watchdog_report(const cz_watchdog *w, double now, const char *clock, cz_err *err);

/* Adds the pipeline-level keys of a run to its summary object: audio and frame metrics
 * when the run had them, per-stage waste and KV reload ("stages"), generated and heard
 * tokens and the waste ratio over all autoregressive stages, kv_pool_saturated_at_s, and
 * percentile_mode / percentile_rel_error: "exact" and 0 when every distribution of the
 * summary was exact, else "sketch" and the sketch's bound. */
void cz_run_summary_json(const cz_config *cfg, const cz_metrics *m, const cz_run_stats *st,
                         const cz_summary *sum, cJSON *summary);

/* The names of `cfg`'s pipeline stages and of its autoregressive ones, in order, as the
 * summary's "stages" names them (borrowed from cfg): the stage enums of its results file. */
void cz_run_stages(const cz_config *cfg, cz_results_stages *out);

/* Queueing-theory check of a run: when the config is a single server without batching
 * (cost kind "service", max_num_seqs 1) fed by Poisson arrivals
 * (workload.arrivals.process "poisson"), adds to `summary` an object "queueing_theory"
 * with the model name (M/M/1 or M/G/1), rho, the Pollaczek-Khinchine mean queue wait
 * lambda E[S^2] / (2 (1 - rho)) in ms, and the simulated mean's relative error. Returns
 * whether it applied (rho < 1 and the config qualifies). */
bool cz_run_add_theory(const cz_config *cfg, const cJSON *cfg_json, const cz_summary *sum,
                       cJSON *summary);

#endif
