/* cz_calibrate.h - fitting the cost model to measured step times (`cadenza calibrate`,
 * docs/validation.md): each stage's coefficients (cz_cost_fit over cz_cost_features) by
 * non-negative least squares on relative error (core/cz_fit.h), cross-validated, and the
 * host link's bandwidth and latency from timed copies.
 *
 * The measurements come from `cadenza profile` (a grid of shapes per stage) or from the
 * /steps tables of `cadenza replay` (the batches a real run made); both reduce to rows of
 * (stage, shape, seconds). */
#ifndef CZ_CALIBRATE_H
#define CZ_CALIBRATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_costfile.h"
#include "cz_models.h"

/* Batch classes the errors are reported by. */
typedef enum cz_calib_class {
    CZ_CALIB_PREFILL = 0, /* prefill chunks only */
    CZ_CALIB_DECODE,      /* decodes only */
    CZ_CALIB_MIXED,       /* both */
    CZ_CALIB_JOBS,        /* an encoder's or vocoder's jobs */
    CZ_CALIB_N
} cz_calib_class;

/* "prefill", "decode", "mixed", "jobs". */
const char *cz_calib_class_name(cz_calib_class c);
/* The class of a step of a stage of kind `kind` with shape b. */
cz_calib_class cz_calib_class_of(cz_stage_kind kind, const cz_batch_shape *b);

/* One measured step: card stage index, its shape, its time (> 0). */
typedef struct cz_calib_row {
    uint32_t stage;
    cz_batch_shape shape;
    double seconds;
} cz_calib_row;

/* One timed host-link copy. */
typedef struct cz_calib_xfer {
    double bytes, seconds;
} cz_calib_xfer;

/* Fits every stage of `model` that has rows (features with cost params `p`: its tp) and,
 * when n_xfers >= 2, the host link (on absolute time: the large copies carry it), into
 * *out (model name, stages, link). Each stage's
 * coefficients minimize squared relative error under theta >= 0; `folds`-fold cross
 * validation (seed `seed`; folds clamped to the stage's rows, none below 4 rows) gives
 * every row a held-out prediction. *report receives (caller deletes):
 *
 *   {"stages": {NAME: {"rows", "coefficients": {...},
 *                      "fit": {"mape", "median_ape", "max_ape"},          in-sample
 *                      "held_out": {"mape", "median_ape", "p90_ape", "max_ape"},
 *                      "by_class": {CLASS: {"rows", "median_ape", "mape", "max_ape"}}}},
 *    "host_link": {"rows", "bandwidth_Bps", "latency_s", "fit": {...}},       in-sample
 *    "held_out": {... over every stage's rows}}
 *
 * held_out errors are the cross-validated ones (by_class too). CZ_EINVAL naming the row
 * for a stage index outside the model, a non-positive or non-finite time, or no rows at
 * all; the fit's own errors (cz_fit_nnls) pass through. */
cz_status cz_calibrate(const cz_model_card *model, const cz_cost_params *p,
                       const cz_calib_row *rows, size_t n_rows, const cz_calib_xfer *xfers,
                       size_t n_xfers, uint32_t folds, uint64_t seed, cz_cost_file *out,
                       cJSON **report, cz_err *err);

/* Prints the report: per stage and class, rows and held-out median / mean / worst APE;
 * the link. */
void cz_calibrate_print(const cJSON *report, FILE *f);

#endif
