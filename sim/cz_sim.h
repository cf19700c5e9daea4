/* cz_sim.h - the discrete-event simulator: a driver of the deployment runtime
 * (cz_deploy.h) whose time is an event queue and whose steps take the cost model's time.
 *
 * The runtime holds the deployment (pipelines, placement, routers, the client, periodic
 * streams, the session gateway); the simulator gives it time and execution: a step's
 * duration comes from the roofline (or a drawn service time) and, under VoxServe's
 * asynchronous pipeline, from the model of co-running streams (cz_streams.h); a KV
 * transfer takes the modelled host link's time (cz_link.h); timers are events. A config
 * with a cross-stage scheduler (Nova) runs the cross-stage runtime
 * (runtime/cz_xstage.h) instead, under the same kind of driver (docs/pipeline.md). */
#ifndef CZ_SIM_H
#define CZ_SIM_H

#include "cz_config.h"
#include "cz_run.h"

/* Runs the simulation of `wl` under `cfg`, recording into `m` (initialised by the
 * caller). `progress` may be NULL. Deterministic for a given config and seed. */
cz_status cz_sim_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                     cz_run_stats *stats, cz_run_progress_fn progress, void *progress_ctx,
                     cz_err *err);

#endif
