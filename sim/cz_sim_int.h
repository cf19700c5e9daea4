/* cz_sim_int.h - the simulator's internal entry points. */
#ifndef CZ_SIM_INT_H
#define CZ_SIM_INT_H

#include "cz_sim.h"

/* cz_sim_run_stoppable for a config with a cross-stage scheduler (cfg->cross_stage): the
 * discrete-event driver (cz_xstage.c) of the cross-stage runtime
 * (runtime/cz_xstage.h), each step lasting its predicted time. Same contract as
 * cz_sim_run_stoppable; fails with CZ_EINVAL when the workload is not open-loop requests
 * (cz_xstage_create). */
cz_status cz__xstage_run(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                         volatile sig_atomic_t *stop, bool *partial, cz_run_stats *stats,
                         cz_run_progress_fn progress, void *progress_ctx, cz_err *err);

#endif
