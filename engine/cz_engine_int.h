/* cz_engine_int.h - the engine's drivers, between cz_engine.c (which parses the options,
 * picks the backend and the thread count) and the cross-stage driver (cz_engine_xs.c). */
#ifndef CZ_ENGINE_INT_H
#define CZ_ENGINE_INT_H

#include "cz_engine.h"

/* cz_engine_run for a config with a cross-stage scheduler (cfg->cross_stage): the
 * cross-stage runtime (cz_xstage.h) on one device, `cuda` or `threads` CPU threads.
 * Contract as cz_engine_run's; CZ_EINVAL for what the engine does not run (the vision
 * weight offload). */
cz_status cz__engine_xs_run(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                            const cz_engine_opts *opts, bool cuda, uint32_t threads,
                            cz_run_stats *stats, bool *partial, cz_run_progress_fn progress,
                            void *progress_ctx, cz_err *err);

#endif
