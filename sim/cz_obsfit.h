/* cz_obsfit.h - calibrating the simulator from what a client observed of a server
 * (`cadenza calibrate --observed RUN.h5 --config CONFIG`, docs/validation.md): the
 * observe -> replay -> calibrate loop of BLIS (Blackbox Inference Simulator).
 *
 * An observed run is the results of `cadenza replay --endpoint` (or of any run with a
 * /requests table): per request its send time, input and output tokens, first and last
 * token. The simulator replays each run's requests at their send times (one open-loop
 * request each) under the config's scheduler and a candidate cost model, and the fit moves
 * the candidate until the simulated per-request TTFT, ITL and E2E match the observed ones.
 * The simulator is the inner loop of GSL's Nelder-Mead simplex (derivative-free: a
 * scheduler's response to step times has no useful gradient).
 *
 * The fitted quantities are multipliers on groups of the config's cost coefficients
 * (starting from its fitted cost file, or from the roofline's rates turned into
 * coefficients) and the server's request handling before scheduling (BLIS's alpha terms):
 *
 *   step     per_step_s, per_weight_byte_s: what every step pays
 *   compute  per_token_s and the FLOP terms, per_gemm_weight_byte_s: what grows with the
 *            tokens a step computes (prefill)
 *   kv       per_kv_byte_s: what grows with the context decodes read
 *   seq      per_seq_s: each sequence sampling a token, per step (the per-output-token
 *            term on a step's critical path)
 *   ingest   request.ingest_s: a constant per request before it is scheduled
 *   ingest_per_token  request.ingest_per_token_s: per input token (tokenizing)
 *
 * Every parameter is fitted in log space (positive, scale-free); a group whose coefficients
 * are all 0 starts from a small seed value (docs/validation.md). */
#ifndef CZ_OBSFIT_H
#define CZ_OBSFIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_config.h"
#include "cz_costfile.h"
#include "cz_workload.h"

typedef enum cz_obsfit_param {
    CZ_OF_STEP = 0,
    CZ_OF_COMPUTE,
    CZ_OF_KV,
    CZ_OF_SEQ,
    CZ_OF_INGEST,
    CZ_OF_INGEST_TOKEN,
    CZ_OF_N
} cz_obsfit_param;

/* "step", "compute", "kv", "seq", "ingest", "ingest_per_token". */
const char *cz_obsfit_param_name(cz_obsfit_param p);
/* Parses a comma-separated list of those names into a mask (bit p). CZ_EINVAL naming the
 * unknown name and listing the known ones; an empty list is an error. */
cz_status cz_obsfit_parse_mask(const char *list, uint32_t *mask, cz_err *err);
/* The default set: step, compute, ingest (what runs at light and moderate load determine;
 * kv and seq need batches that vary in size and context apart from each other). */
#define CZ_OBSFIT_DEFAULT_MASK 0x13u

/* One observed run: its requests as a workload (session i = request i, one open-loop turn
 * at its send time) and what was observed of each. */
typedef struct cz_obs_run {
    char path[1024];
    cz_workload wl;
    uint32_t n;              /* requests fitted (completed ones) */
    double *ttft, *e2e, *itl;/* per request, seconds; itl NaN for a single-token reply */
    uint32_t excluded;       /* rows of other outcomes (failed, cut): not fitted */
} cz_obs_run;

/* Reads the /requests table of `path` (first autoregressive stage, completed rows) into
 * *out. CZ_EIO / CZ_EFORMAT naming the file and table; CZ_EINVAL when it holds no
 * completed request or a row's times are not finite and ordered (naming the row). */
cz_status cz_obs_load(const char *path, cz_obs_run *out, cz_err *err);
void cz_obs_free(cz_obs_run *r);

typedef struct cz_obsfit_opts {
    uint32_t mask;           /* parameters fitted (bit p: cz_obsfit_param p) */
    uint32_t max_evals;      /* simulations per fit at most (> 0) */
    bool verbose;            /* a progress line on stderr */
} cz_obsfit_opts;

/* Fits `base` (a parsed config; its cost fitted or roofline, its workload unused) to
 * runs[0..n_runs): with two runs or more, each is held out in turn (fitted on the others,
 * its error reported), then the fit on all of them is the result. *out: the cost file
 * (the base's stages' coefficients times the fitted multipliers, the request terms).
 * *report (caller deletes):
 *
 *   {"parameters": {NAME: {"unit", "start", "fitted", "held_out_spread"}},
 *                     multipliers ("multiplier"), or seconds ("s"); held_out_spread: the
 *                     largest relative distance of a held-out fit's value from it (null
 *                     with one run): how well the runs determine it
 *    "evaluations", "loss", "seconds",
 *    "in_sample": {RUN: ERRORS}, "held_out": {RUN: ERRORS} (two runs or more),
 *   ERRORS = {"requests", "ttft"|"itl"|"e2el": {"median_ape", "p90_ape", "p99_ape",
 *             "p50_error", "p90_error", "p99_error"}}
 *
 * *_ape: percentiles over requests of |sim - observed| / observed (BLIS's table);
 * pNN_error: (sim pNN - observed pNN) / observed pNN of the distribution. CZ_EINVAL for a
 * config the fit cannot take (service-time cost, cross-stage scheduler, streams); the
 * simulator's errors pass through. */
cz_status cz_obsfit(const cz_config *base, cz_obs_run *runs, uint32_t n_runs,
                    const cz_obsfit_opts *o, cz_cost_file *out, cJSON **report, cz_err *err);

/* The simulated per-request errors of `cfg` on run `r`, as ERRORS above. */
cz_status cz_obsfit_errors(const cz_config *cfg, cz_obs_run *r, cJSON **errors, cz_err *err);

/* Prints the report: the parameters, then BLIS's table per run. */
void cz_obsfit_print(const cJSON *report, FILE *f);

#endif
