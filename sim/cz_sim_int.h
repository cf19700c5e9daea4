/* cz_sim_int.h - the simulator's internal entry points. */
#ifndef CZ_SIM_INT_H
#define CZ_SIM_INT_H
#include "cz_sim.h"

/* cz_sim_run for a config with a cross-stage scheduler (cfg->cross_stage): the
 * vision-language executor of cz_xstage.c. Same contract as cz_sim_run; fails with
 * CZ_EINVAL when the workload is not open-loop requests. */
cz_status cz__xstage_run(const cz_sim_config *cfg, const cz_workload *wl, cz_metrics *m,
                         cz_sim_stats *stats, cz_sim_progress_fn progress, void *progress_ctx,
                         cz_err *err);
/* Adds a cross-stage run's keys to its summary (docs/pipeline.md, "Cross-stage
 * execution"): Nova's queueing figures (Table V), decode batch and SM share, the vision
 * step, its offload stall and the weights kept, and for Nova's partition the split and
 * Eq. 1 there. */
void cz__xstage_summary_json(const cz_sim_config *cfg, const cz_sim_stats *st, cJSON *summary);
/* Roofline time of one step of pipeline stage p with shape b on a fraction `share` of the
 * GPU's SMs (cz_cost_step, then cz_cost_share_s). */
double cz__stage_share_s(const cz_sim_config *cfg, uint32_t p, const cz_batch_shape *b,
                         double share);
/* The shape of one prefill chunk of `tokens` after `start` tokens of context: its tokens
 * attend to everything before them and to each other. */
cz_batch_shape cz__prefill_shape(uint64_t start, uint64_t tokens);
/* The batch shapes BROS's step-latency model is fitted on (cz_config.c); out holds
 * CZ__STEP_FIT_SHAPES. Returns how many. */
#define CZ__STEP_FIT_SHAPES 64
uint32_t cz__step_fit_shapes(cz_batch *out);
/* Sorts ids[0..n) by times[i] (the time of ids[i]), ties by id. */
void cz__sort_by_time(uint32_t *ids, const double *times, uint32_t n);
#endif
