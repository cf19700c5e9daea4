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
#include <signal.h>

#include "cz_deploy.h"
#include "cz_run.h"

/* Runs the simulation of `wl` under `cfg`, recording into `m` (initialised by the
 * caller). `progress` may be NULL. Deterministic for a given config and seed. */
cz_status cz_sim_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                     cz_run_stats *stats, cz_run_progress_fn progress, void *progress_ctx,
                     cz_err *err);

/* cz_sim_run that also stops when *stop (a flag set asynchronously: Ctrl-C) is set: the run
 * ends at the simulated time it reached, as a sim.max_time_s cut does (turns still open
 * end unfinished), and *partial says so. `stop` may be NULL. */
cz_status cz_sim_run_stoppable(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                               volatile sig_atomic_t *stop, bool *partial,
                               cz_run_stats *stats, cz_run_progress_fn progress,
                               void *progress_ctx, cz_err *err);

/* The simulation one event at a time, for a driver loop of its own (cz_sim_run is one;
 * `cadenza serve`'s modelled execution, which waits out each event's time on the wall
 * clock and submits requests as they come, is another). Not for cross-stage configs. */
typedef struct cz_sim cz_sim;

/* Watches the steps of autoregressive replicas: after the runtime has handled the end of
 * replica `rep`'s step at `now`, the sequences that step ran (its decode set and its
 * chunks, as they were when it started; some may since have ended or been preempted). */
typedef struct cz_sim_observer {
    void *ctx;
    void (*step_ended)(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs,
                       uint32_t n, double now);
    /* May be NULL: the runtime's turn outcomes as they are decided (cz_driver.turn_end). */
    void (*turn_end)(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                     uint32_t out_tokens, double now);
} cz_sim_observer;

/* What the last cz_sim_advance did: handled an event; found none left; found the next
 * past sim.max_time_s (the clock stops: what is open is unfinished); stopped on the
 * progress watchdog; found the next past CZ_CLOCK_MAX_S. */
typedef enum cz_sim_state {
    CZ_SIM_RAN = 0,
    CZ_SIM_DRAINED,
    CZ_SIM_CUT,
    CZ_SIM_STALLED,
    CZ_SIM_CLOCK_OVER
} cz_sim_state;

/* Builds the simulation of `wl` under `cfg` (both, and `m`, outlive it) at time 0, the
 * runtime started (cz_deploy_start). `obs` may be NULL (copied). */
cz_status cz_sim_open(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                      const cz_sim_observer *obs, cz_sim **out, cz_err *err);
/* The runtime, for a driver that calls into it between events (at times >= cz_sim_now
 * and <= cz_sim_next_s). */
cz_deploy *cz_sim_deploy(cz_sim *s);
/* The time of the next event (INFINITY: none), the last event's, and how many ran. */
double cz_sim_next_s(cz_sim *s);
double cz_sim_now(const cz_sim *s);
uint64_t cz_sim_events(const cz_sim *s);
/* Handles the next event. */
cz_sim_state cz_sim_advance(cz_sim *s);
/* Ends the run as `how` (not CZ_SIM_RAN) says and frees the simulation: the runtime's
 * accounting (cz_deploy_finish, cut for CZ_SIM_CUT; a stall names what is stuck), the
 * metrics finished and checked; CZ_SIM_CLOCK_OVER is CZ_EINVAL (cz_run_clock_error).
 * Fills `stats`. */
cz_status cz_sim_close(cz_sim *s, cz_sim_state how, cz_run_stats *stats, cz_err *err);

#endif
