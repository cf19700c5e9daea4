/* cmd_calibrate.c - `cadenza calibrate`: fit the cost model to measured step times
 * (runtime/cz_calibrate.h, docs/validation.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_calibrate.h"
#include "cz_cli.h"
#include "cz_h5read.h"
#include "cz_json.h"
#include "cz_out.h"

#define CMD "calibrate"

static const char calibrate_usage[] =
    "usage: cadenza calibrate INPUT.h5 [INPUT.h5]... -o cost.json [--folds K] [--seed S]\n"
    "                         [--quiet]\n"
    "\n"
    "Fits the simulator's cost model to step times measured on the engine: each stage's\n"
    "coefficients per step, sequence, token, linear and attention FLOP, weight and KV byte\n"
    "by non-negative least squares on relative error, the host link's bandwidth and\n"
    "latency from timed copies; K-fold cross-validation gives every measurement a held-out\n"
    "prediction, and the errors are printed by stage and batch class. The cost file is\n"
    "what `cadenza sim --cost`, `sweep --cost`, `validate --cost` and a config's\n"
    "\"cost\": {\"file\": ...} take (docs/validation.md).\n"
    "\n"
    "An input is a profile (`cadenza profile`: its /shapes and /transfers) or the results\n"
    "of a replay (`cadenza replay -o`: its /steps, each batch's device time); several\n"
    "inputs of the same model are fitted together.\n"
    "\n"
    "  -o, --output FILE    the cost file to write (required)\n"
    "  --folds K            cross-validation folds, 2 to 100 (default 5)\n"
    "  --seed S             the folds' shuffle (default 1)\n"
    "  --quiet              print nothing but errors\n"
    "  -h, --help           this help\n";

typedef struct inputs {
    cz_calib_row *rows;
    size_t n_rows, cap_rows;
    cz_calib_xfer *xfers;
    size_t n_xfers, cap_xfers;
    char model[128];
} inputs;

static void add_row(inputs *in, const cz_calib_row *r)
{
    cz_grow((void **)&in->rows, &in->cap_rows, in->n_rows + 1, sizeof *in->rows);
    in->rows[in->n_rows++] = *r;
}

static cz_status set_model(inputs *in, const char *path, const char *model, cz_err *err)
{
    if (!in->model[0]) {
        snprintf(in->model, sizeof in->model, "%s", model);
        return CZ_OK;
    }
    if (strcmp(in->model, model) != 0)
        return cz_err_set(err, CZ_EINVAL, "%s: measured model '%s', but the inputs before it "
                                          "measured '%s': fit one model at a time",
                          path, model, in->model);
    return CZ_OK;
}

/* A profile's /shapes and /transfers. */
static cz_status read_profile(inputs *in, const char *path, cz_err *err)
{
    char *model = NULL;
    cz_status st = cz_h5_read_str_attr(path, "model", &model, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "a profile names its model: ");
    st = set_model(in, path, model, err);
    free(model);
    if (st != CZ_OK)
        return st;
    cz_model_card card;
    if ((st = cz_model_card_load(in->model, &card, err)) != CZ_OK)
        return cz_err_prefix(err, "%s: ", path);
    /* an inner row (class 5: a code predictor) times `ctx_tokens` sequential steps of the
     * inner stage of pipeline stage `stage`: one step of that stage is the time over them */
    static const char *const f[] = {"card",        "prefill_tokens",   "prefill_seqs",
                                    "prefill_attn_ctx", "decode_seqs", "decode_ctx_tokens",
                                    "median_s",    "class",            "stage",
                                    "ctx_tokens"};
    enum { NF = 10, INNER = 5 };
    double *c[NF];
    size_t n;
    if ((st = cz_h5_read_columns(path, "shapes", f, NF, c, &n, err)) != CZ_OK)
        return st;
    for (size_t i = 0; i < n && st == CZ_OK; i++) {
        cz_calib_row r = {.stage = (uint32_t)c[0][i],
                          .shape = {.prefill_tokens = (uint64_t)c[1][i],
                                    .prefill_seqs = (uint32_t)c[2][i],
                                    .prefill_attn_ctx = (uint64_t)c[3][i],
                                    .decode_seqs = (uint32_t)c[4][i],
                                    .decode_ctx_tokens = (uint64_t)c[5][i]},
                          .seconds = c[6][i]};
        if ((int)c[7][i] == INNER) {
            uint32_t p = (uint32_t)c[8][i];
            if (p >= card.n_pipe || card.pipe[p].inner < 0 || !(c[9][i] >= 1)) {
                st = cz_err_set(err, CZ_EFORMAT, "%s: /shapes row %zu: an inner row of pipeline "
                                                 "stage %u, which has no inner stage in model '%s'",
                                path, i, p, card.name);
                break;
            }
            r.stage = (uint32_t)card.pipe[p].inner;
            r.seconds /= c[9][i];
        }
        add_row(in, &r);
    }
    for (int k = 0; k < NF; k++)
        free(c[k]);
    if (st != CZ_OK)
        return st;
    /* the link is fitted on the copies made the engine's way, block by block and layer by
     * layer (blocks > 0), when the profile has them: one contiguous copy runs faster */
    static const char *const g[] = {"bytes", "median_s", "blocks"};
    double *x[3];
    if (cz_h5_has_table(path, "transfers")) {
        if ((st = cz_h5_read_columns(path, "transfers", g, 3, x, &n, err)) != CZ_OK)
            return st;
        bool blocks = false;
        for (size_t i = 0; i < n; i++)
            blocks = blocks || x[2][i] > 0;
        for (size_t i = 0; i < n; i++) {
            if (blocks && !(x[2][i] > 0))
                continue;
            cz_grow((void **)&in->xfers, &in->cap_xfers, in->n_xfers + 1, sizeof *in->xfers);
            in->xfers[in->n_xfers++] = (cz_calib_xfer){x[0][i], x[1][i]};
        }
        for (int k = 0; k < 3; k++)
            free(x[k]);
    }
    return CZ_OK;
}

/* A replay's /steps: each batch's device time, its stage mapped from the pipeline of the
 * config the results carry to the model card's stages. */
static cz_status read_steps(inputs *in, const char *path, cz_err *err)
{
    char *text = NULL;
    cz_status st = cz_h5_read_str_attr(path, "config", &text, err);
    if (st != CZ_OK)
        return st;
    cJSON *cfg = NULL;
    st = cz_json_parse(text, path, &cfg, err);
    free(text);
    if (st != CZ_OK)
        return st;
    const char *model_name = "llama-3-8b", *stage = NULL;
    cz_model_card card;
    if ((st = cz_json_str(cfg, path, "model", false, &model_name, err)) == CZ_OK &&
        (st = cz_json_str(cfg, path, "stage", false, &stage, err)) == CZ_OK &&
        (st = cz_model_card_load(model_name, &card, err)) == CZ_OK)
        st = set_model(in, path, card.name, err);
    uint32_t pipe_stage[CZ_MAX_STAGES] = {0};
    uint32_t n_pipe = card.n_pipe;
    for (uint32_t p = 0; st == CZ_OK && p < n_pipe; p++)
        pipe_stage[p] = card.pipe[p].stage;
    if (st == CZ_OK && stage) {
        const cz_stage_card *sc = cz_model_card_stage(&card, stage);
        n_pipe = 1;
        pipe_stage[0] = sc ? (uint32_t)(sc - card.stages) : 0;
    }
    cJSON_Delete(cfg);
    if (st != CZ_OK)
        return st;
    /* a batch's time is from its hand-over to the device until the run heard it ended
     * (end_s - start_s): what the simulator's step lasts, the engine's hand-offs included */
    static const char *const f[] = {"stage",       "prefill_tokens",   "prefill_seqs",
                                    "prefill_attn_ctx", "decode_seqs", "decode_ctx_tokens",
                                    "start_s",     "end_s"};
    double *c[8];
    size_t n;
    if ((st = cz_h5_read_columns(path, "steps", f, 8, c, &n, err)) != CZ_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        c[6][i] = c[7][i] - c[6][i];
    for (size_t i = 0; i < n && st == CZ_OK; i++) {
        uint32_t p = (uint32_t)c[0][i];
        if (p >= n_pipe) {
            st = cz_err_set(err, CZ_EFORMAT, "%s: /steps row %zu: stage %u, but the pipeline "
                                             "has %u",
                            path, i, p, n_pipe);
            break;
        }
        if (!(c[6][i] > 0))
            continue; /* a batch with no device time (none recorded) */
        cz_calib_row r = {.stage = pipe_stage[p],
                          .shape = {.prefill_tokens = (uint64_t)c[1][i],
                                    .prefill_seqs = (uint32_t)c[2][i],
                                    .prefill_attn_ctx = (uint64_t)c[3][i],
                                    .decode_seqs = (uint32_t)c[4][i],
                                    .decode_ctx_tokens = (uint64_t)c[5][i]},
                          .seconds = c[6][i]};
        add_row(in, &r);
    }
    for (int k = 0; k < 8; k++)
        free(c[k]);
    if (st == CZ_OK && n == 0)
        st = cz_err_set(err, CZ_EINVAL, "%s: /steps is empty (a simulator's results have no "
                                        "executed batches: replay the config on the engine)",
                        path);
    return st;
}

int cz_cmd_calibrate(int argc, char **argv)
{
    const char **paths = cz_xcalloc((size_t)argc, sizeof *paths);
    size_t n_paths = 0;
    const char *out = NULL;
    unsigned long folds = 5;
    unsigned long long seed = 1;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(calibrate_usage, stdout);
            free(paths);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                   strcmp(a, "--folds") == 0 || strcmp(a, "--seed") == 0) {
            if (i + 1 >= argc) {
                free(paths);
                return cz_cli_usage_error(CMD, "option '%s' needs a value", a);
            }
            const char *v = argv[++i];
            char *end;
            errno = 0;
            if (a[1] == 'o' || strcmp(a, "--output") == 0) {
                out = v;
            } else if (strcmp(a, "--folds") == 0) {
                folds = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || folds < 2 || folds > 100) {
                    free(paths);
                    return cz_cli_usage_error(CMD, "option '--folds': expected 2 to 100, got "
                                                   "'%s'",
                                              v);
                }
            } else {
                seed = strtoull(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-') {
                    free(paths);
                    return cz_cli_usage_error(CMD, "option '--seed': expected a non-negative "
                                                   "integer, got '%s'",
                                              v);
                }
            }
        } else if (a[0] == '-') {
            free(paths);
            return cz_cli_usage_error(CMD, "unknown option '%s'", a);
        } else {
            paths[n_paths++] = a;
        }
    }
    if (!n_paths || !out) {
        free(paths);
        return cz_cli_usage_error(CMD, !n_paths ? "an input is required (a profile or replay "
                                                  "results)"
                                                : "-o cost.json is required");
    }
    cz_err err;
    cz_err_clear(&err);
    inputs in;
    memset(&in, 0, sizeof in);
    /* the output gets its temporary first, so an unwritable one fails before any reading */
    const char *tmp = NULL;
    cz_status st = cz_out_add("-o", out, &tmp, &err);
    for (size_t i = 0; i < n_paths && st == CZ_OK; i++) {
        if (cz_file_check_input(paths[i], &err) != CZ_OK)
            st = cz_err_prefix(&err, "input argument: ");
        else if (cz_h5_has_table(paths[i], "shapes"))
            st = read_profile(&in, paths[i], &err);
        else if (cz_h5_has_table(paths[i], "steps"))
            st = read_steps(&in, paths[i], &err);
        else
            st = cz_err_set(&err, CZ_EFORMAT,
                            "%s: expected a profile (/shapes) or replay results (/steps), an "
                            "HDF5 file",
                            paths[i]);
    }
    cz_cost_file cf;
    cJSON *report = NULL;
    cz_model_card card;
    if (st == CZ_OK)
        st = cz_model_card_load(in.model, &card, &err);
    if (st == CZ_OK) {
        cz_cost_params p = cz_cost_params_default();
        st = cz_calibrate(&card, &p, in.rows, in.n_rows, in.xfers, in.n_xfers, (uint32_t)folds,
                          seed, &cf, &report, &err);
    }
    if (st == CZ_OK) {
        cJSON *j = cz_cost_file_json(&cf);
        cJSON *src = cJSON_AddArrayToObject(j, "inputs");
        for (size_t i = 0; i < n_paths; i++)
            cJSON_AddItemToArray(src, cJSON_CreateString(paths[i]));
        cJSON_AddStringToObject(j, "cadenza_version", cz_version());
        cJSON_AddItemToObject(j, "calibration", cJSON_Duplicate(report, 1));
        st = cz_json_write_file(j, tmp, true, &err);
        cJSON_Delete(j);
        if (st == CZ_OK)
            st = cz_out_commit(&err);
    }
    int rc = CZ_EXIT_OK;
    if (st != CZ_OK) {
        cz_out_discard();
        rc = cz_cli_fail(&err);
    } else if (!quiet) {
        printf("cadenza %s  calibrate: model %s, %zu measured steps, %zu copies, %lu-fold "
               "cross-validation -> %s\n",
               cz_version(), in.model, in.n_rows, in.n_xfers, folds, out);
        cz_calibrate_print(report, stdout);
    }
    cJSON_Delete(report);
    free(in.rows);
    free(in.xfers);
    free(paths);
    return rc;
}
