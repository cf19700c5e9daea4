/* cz_sim.h - the discrete-event simulator: an experiment config, a workload and the
 * serving core (cz_server.h), with step times from the cost model.
 *
 * The driver owns time. Events are arrivals (open-loop turns in time order, fed one at
 * a time; closed-loop turns pushed when the previous reply ends), session starts under a
 * concurrency bound, and batch completions. After every event the driver asks the idle
 * server for its next batch and schedules its completion at now + cost(batch). */
#ifndef CZ_SIM_H
#define CZ_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_distspec.h"
#include "cz_metrics.h"
#include "cz_models.h"
#include "cz_server.h"
#include "cz_workload.h"

typedef enum cz_cost_kind {
    CZ_COST_ROOFLINE = 0, /* step time from the roofline of the model stage on the hardware */
    CZ_COST_SERVICE       /* each request carries a service time drawn from a distribution;
                             a step costs the shares of the requests it advances (queueing
                             validation, docs/validation.md) */
} cz_cost_kind;

/* A parsed experiment config (docs/config.md). */
typedef struct cz_sim_config {
    char name[128];
    uint64_t seed;
    cz_cost_kind cost_kind;
    cz_model_card model;
    uint32_t stage;           /* index of the simulated AR stage in model.stages */
    cz_hw_card hw;
    cz_cost_params cost;
    cz_distspec service;      /* CZ_COST_SERVICE */
    cz_server_config server;
    double gpu_memory_utilization;
    const cz_sched_ops *sched;
    cz_slo slo;
    double max_time_s;        /* stop the clock here (requests in flight count as failed) */
    double timeline_interval_s;
} cz_sim_config;

/* Parses an experiment config. `where` names it in messages (the file name),
 * `base_dir` resolves the workload's relative paths. The workload is built into *wl
 * (initialised by the caller). KV blocks left at 0 are derived from the hardware card:
 * (hbm_bytes x gpu_memory_utilization - weight bytes / tp) / (block bytes / tp). */
cz_status cz_sim_config_parse(const cJSON *cfg, const char *where, const char *base_dir,
                              cz_sim_config *out, cz_workload *wl, cz_err *err);

/* Counters of a run. */
typedef struct cz_sim_stats {
    uint64_t events;
    uint64_t arrivals;
    double sim_time_s; /* time of the last event */
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

/* Queueing-theory check of a run: when the config is a single server without batching
 * (cost kind "service", server.max_num_seqs 1) fed by Poisson arrivals
 * (workload.arrivals.process "poisson"), adds to `summary` an object "queueing_theory"
 * with the model name (M/M/1 or M/G/1), rho, the Pollaczek-Khinchine mean queue wait
 * lambda E[S^2] / (2 (1 - rho)) in ms, and the simulated mean's relative error. Returns
 * whether it applied (rho < 1 and the config qualifies). */
bool cz_sim_add_theory(const cz_sim_config *cfg, const cJSON *cfg_json, const cz_summary *sum,
                       cJSON *summary);

/* Step time of a batch under the roofline cost of cfg (exposed for tests). */
double cz_sim_roofline_step_s(const cz_sim_config *cfg, const cz_batch *b);

#endif
