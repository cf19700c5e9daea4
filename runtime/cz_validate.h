/* cz_validate.h - the simulator set against the engine on one config (`cadenza validate`,
 * docs/validation.md): the summary metrics side by side, the cost model's error on the
 * engine's own batches (separating cost-model error from scheduling divergence), the
 * per-request agreement of TTFT and end-to-end latency, and the engine's own run-to-run
 * spread.
 *
 * Everything here reads finished runs; nothing runs a driver. */
#ifndef CZ_VALIDATE_H
#define CZ_VALIDATE_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_config.h"
#include "cz_metrics.h"

/* The summary keys compared (those present in both summaries): P50/P90/P99 of TTFT, TPOT,
 * ITL, E2E and audio TTFP, and request and output throughput. */
extern const char *const cz_validate_keys[];
extern const uint32_t cz_validate_n_keys;

/* The comparison of `repeats` (>= 1) engine runs eng[r] (their metrics and JSON
 * summaries) with one simulator run of the same config `cfg`:
 *
 *   {"metrics": {KEY: {"engine": mean over the repeats, "sim": ..., "rel_error":
 *                      (sim - engine) / engine, "engine_spread": (max - min) / mean}},
 *    "steps": {"n", "median_ape", "mape", "p90_ape", "max_ape", "by_class": {CLASS: {...}}},
 *    "requests": {"matched", "ttft": {"mape", "pearson_r"}, "e2el": {"mape", "pearson_r"}},
 *    "engine_repeats": R}
 *
 * "steps" sets each engine batch's cost-model prediction (/steps' predicted_s, the
 * config's cost model at that batch's shape) against its measured duration, from its
 * hand-over to the device until the run heard it ended (end_s - start_s: what a step of
 * the simulator lasts),
 * APE = |predicted - measured| / measured, over every repeat's batches; classes are
 * "prefill", "decode", "mixed" (autoregressive batches with prefill chunks, decodes, or
 * both) and "jobs" (encoder and vocoder batches). "requests" matches the runs' request
 * records by (session, turn, stage), completed in both, and compares the first repeat's
 * TTFT and end-to-end latency with the simulator's. A statistic without data is null.
 * Caller deletes the result. */
cJSON *cz_validate_report(const cz_config *cfg, const cz_metrics *const *eng,
                          const cJSON *const *eng_summary, uint32_t repeats,
                          const cz_metrics *sim, const cJSON *sim_summary);

/* Adds the machine-speed probes to `report` (`validate`'s --probe): ratios[0..n) of the
 * engine's step time to the cost model's on a few shapes (cz_profile_probe; before each
 * engine run and after the last) as "probe": {"ratios": [...], "scale": scale}; and when
 * `rescaled` (the summary of a simulator run whose fitted cost was multiplied by `scale`,
 * cost.scale) is not NULL, "sim_rescaled" and "rel_error_rescaled" in each metric (null
 * where a summary lacks it). */
void cz_validate_add_probe(cJSON *report, const double *ratios, uint32_t n, double scale,
                           const cJSON *rescaled);

/* Prints the report as tables (metrics, steps, requests); a report with an "endpoint"
 * (`validate --endpoint`: the measured runs are a server's) labels them so. */
void cz_validate_print(const cJSON *report, FILE *out);

#endif
