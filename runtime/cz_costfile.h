/* cz_costfile.h - the fitted cost model's file (`cadenza calibrate -o cost.json`, read by a
 * config's `"cost": {"kind": "fitted", "file": ...}` or `--cost`; docs/validation.md).
 *
 *   {"kind": "fitted", "model": "tiny-llama",
 *    "stages": {"llm": {"per_step_s": 1.2e-4, "per_seq_s": ..., ...}, ...},
 *    "host_link": {"bandwidth_Bps": 9.1e9, "latency_s": 4e-6},
 *    "request": {"ingest_s": 2e-3, "ingest_per_token_s": 1e-6},
 *    ... (anything else: the fit's provenance and errors, kept for readers)}
 *
 * Each stage's coefficients are cz_cost_fit's, keyed by cz_cost_feature_name; a key left
 * out is 0. host_link is optional. request (optional; `calibrate --observed` fits it) is
 * the server's handling of a request before it reaches the scheduler, BLIS's alpha terms
 * (its API server: parsing, tokenizing): ingest_s + ingest_per_token_s x input tokens after
 * the request is sent. */
#ifndef CZ_COSTFILE_H
#define CZ_COSTFILE_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_models.h"

typedef struct cz_cost_file {
    char model[128];                     /* the model card the fit is of */
    char hardware[128];                  /* the hardware card it was measured on ("" when
                                          * the file does not say) */
    uint32_t n_stages;
    char stage[CZ_MAX_STAGES][64];       /* stage names */
    cz_cost_fit fit[CZ_MAX_STAGES];
    bool has_link;
    double link_Bps, link_latency_s;     /* the host link's fitted rate and latency */
    bool has_request;
    double ingest_s, ingest_per_token_s; /* the request's handling before scheduling */
} cz_cost_file;

/* Reads the cost file at `path` (or the parsed object `j`, named `where` in messages).
 * Errors name the file and the field: CZ_EIO, CZ_EFORMAT, CZ_EINVAL (a negative or
 * non-finite coefficient, an unknown coefficient, a kind other than "fitted", more stages
 * than CZ_MAX_STAGES). */
cz_status cz_cost_file_load(const char *path, cz_cost_file *out, cz_err *err);
cz_status cz_cost_file_parse(const cJSON *j, const char *where, cz_cost_file *out,
                             cz_err *err);

/* The object of `f` (kind, model, stages, host_link), to which a writer adds its own
 * fields. Caller deletes it. */
cJSON *cz_cost_file_json(const cz_cost_file *f);

/* The fit of stage `name`, or NULL. */
const cz_cost_fit *cz_cost_file_stage(const cz_cost_file *f, const char *name);

#endif
