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
#include "cz_obsfit.h"
#include "cz_out.h"

#define CMD "calibrate"

static const char calibrate_usage[] =
    "usage: cadenza calibrate INPUT.h5 [INPUT.h5]... -o cost.json [--folds K] [--seed S]\n"
    "                         [--quiet]\n"
    "       cadenza calibrate --observed RUN.h5 [--observed RUN.h5]... --config CONFIG.json\n"
    "                         [--set key=value]... [--cost cost.json] [--fit LIST]\n"
    "                         [--max-evals N]\n"
    "                         -o cost.json [--quiet]\n"
    "\n"
    "The first form fits the simulator's cost model to step times measured on the engine:\n"
    "each stage's coefficients per step, sequence, token, linear and attention FLOP, weight\n"
    "and KV byte by non-negative least squares on relative error, the host link's bandwidth\n"
    "and latency from timed copies; K-fold cross-validation gives every measurement a\n"
    "held-out prediction, and the errors are printed by stage and batch class. An input is a\n"
    "profile (`cadenza profile`: its /shapes and /transfers) or the results of a replay on\n"
    "the engine (`cadenza replay -o`: its /steps); inputs of the same model are fitted\n"
    "together.\n"
    "\n"
    "The second form fits the simulator to what a client saw of a server (any server:\n"
    "`cadenza replay --endpoint URL -o RUN.h5` against vLLM, SGLang, llama.cpp or cadenza\n"
    "serve): the simulator replays each run's requests at their send times under CONFIG's\n"
    "scheduler, and Nelder-Mead moves multipliers on groups of CONFIG's cost coefficients\n"
    "(its fitted cost file, or its roofline) and the server's per-request handling before\n"
    "scheduling until the simulated per-request TTFT, ITL and E2E match the observed ones.\n"
    "With two runs or more, each is held out in turn and its error printed in BLIS's table\n"
    "(median, P90, P99 of the per-request error), then all are fitted together.\n"
    "\n"
    "  -o, --output FILE    the cost file to write (required)\n"
    "  --folds K            cross-validation folds, 2 to 100 (default 5)\n"
    "  --seed S             the folds' shuffle (default 1)\n"
    "  --observed RUN.h5    an observed run (repeatable): a replay's results\n"
    "  --config FILE        the served deployment (model, scheduler, limits) and the cost\n"
    "                       the fit starts from\n"
    "  --set key=value      override a field of --config (repeatable)\n"
    "  --cost FILE          the fitted cost the fit starts from (default: the config's\n"
    "                       cost: a fitted file, or the roofline's rates)\n"
    "  --fit LIST           what to fit, comma-separated: step, compute, kv, seq, ingest,\n"
    "                       ingest_per_token (default step,compute,ingest)\n"
    "  --max-evals N        simulations per fit at most, 10 to 100000 (default 600)\n"
    "  --quiet              print nothing but errors\n"
    "  -h, --help           this help\n"
    "\n"
    "The cost file is what `cadenza sim --cost`, `sweep --cost`, `validate --cost` and a\n"
    "config's \"cost\": {\"kind\": \"fitted\", \"file\": ...} take (docs/validation.md).\n";

typedef struct inputs {
    cz_calib_row *rows;
    size_t n_rows, cap_rows;
    cz_calib_xfer *xfers;
    size_t n_xfers, cap_xfers;
    char model[128];
    char hardware[128]; /* the hardware card the inputs were measured on */
} inputs;

static void add_row(inputs *in, const cz_calib_row *r)
{
    cz_grow((void **)&in->rows, &in->cap_rows, in->n_rows + 1, sizeof *in->rows);
    in->rows[in->n_rows++] = *r;
}

/* The first input sets what the inputs measured (`slot`: the model card or the hardware
 * card, `what` naming it in messages); every later one must agree: one fit is of one model
 * on one machine. */
static cz_status set_same(char *slot, size_t n, const char *what, const char *path,
                          const char *value, cz_err *err)
{
    if (!slot[0]) {
        snprintf(slot, n, "%s", value);
        return CZ_OK;
    }
    if (strcmp(slot, value) != 0)
        return cz_err_set(err, CZ_EINVAL, "%s: measured %s '%s', but the inputs before it "
                                          "measured '%s': fit one %s at a time",
                          path, what, value, slot, what);
    return CZ_OK;
}

static cz_status set_model(inputs *in, const char *path, const char *model, cz_err *err)
{
    return set_same(in->model, sizeof in->model, "model", path, model, err);
}

static cz_status set_hardware(inputs *in, const char *path, const char *hw, cz_err *err)
{
    return set_same(in->hardware, sizeof in->hardware, "hardware", path, hw, err);
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
    char *hw = NULL;
    if ((st = cz_h5_read_str_attr(path, "hardware", &hw, err)) != CZ_OK)
        return cz_err_prefix(err, "a profile names its hardware: ");
    st = set_hardware(in, path, hw, err);
    free(hw);
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
    const char *model_name = "llama-3-8b", *stage = NULL, *hw = "h100-sxm";
    cz_model_card card;
    if ((st = cz_json_str(cfg, path, "model", false, &model_name, err)) == CZ_OK &&
        (st = cz_json_str(cfg, path, "stage", false, &stage, err)) == CZ_OK &&
        (st = cz_json_str(cfg, path, "hardware", false, &hw, err)) == CZ_OK &&
        (st = cz_model_card_load(model_name, &card, err)) == CZ_OK &&
        (st = set_model(in, path, card.name, err)) == CZ_OK)
        st = set_hardware(in, path, hw, err);
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

/* The cost file's object: the fit, what it was fitted from (under `key`), the version and
 * the fit's report. Caller deletes. */
static cJSON *cost_json(const cz_cost_file *cf, const char *key, const char *const *paths,
                        size_t n, const cJSON *report)
{
    cJSON *j = cz_cost_file_json(cf);
    cJSON *src = cJSON_AddArrayToObject(j, key);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(src, cJSON_CreateString(paths[i]));
    cJSON_AddStringToObject(j, "cadenza_version", cz_version());
    cJSON_AddItemToObject(j, "calibration", cJSON_Duplicate(report, 1));
    return j;
}

/* Writes `j` (deleted here) to the output's temporary and lands it. */
static cz_status write_cost(cJSON *j, const char *tmp, cz_err *err)
{
    cz_status st = cz_json_write_file(j, tmp, true, err);
    cJSON_Delete(j);
    return st == CZ_OK ? cz_out_commit(err) : st;
}

/* The second form: fit the simulator to observed runs (sim/cz_obsfit.h). */
static int calibrate_observed(const char *const *obs, size_t n_obs, const char *config_path,
                              const char *const *sets, int n_sets, const char *cost_path,
                              const char *fit_list,
                              unsigned long max_evals, const char *out, bool quiet)
{
    cz_err err;
    cz_err_clear(&err);
    uint32_t mask = CZ_OBSFIT_DEFAULT_MASK;
    cz_status st = fit_list ? cz_obsfit_parse_mask(fit_list, &mask, &err) : CZ_OK;
    if (st != CZ_OK)
        return cz_cli_usage_error(CMD, "%s", err.msg);
    cJSON *cfg_json = NULL;
    char *base_dir = NULL;
    st = cz_cli_load_config(config_path, sets, n_sets, &cfg_json, &base_dir, &err);
    if (st == CZ_OK && cost_path)
        st = cz_cli_use_cost_file(cfg_json, cost_path, &err);
    const char *tmp = NULL;
    if (st == CZ_OK)
        st = cz_out_add("-o", out, &tmp, &err);
    cz_config cfg;
    if (st == CZ_OK) {
        cz_workload wl;
        cz_workload_init(&wl);
        st = cz_config_parse(cfg_json, config_path, base_dir, &cfg, &wl, &err);
        cz_workload_free(&wl);
        if (st != CZ_OK)
            cz_cli_blame_set(&err, config_path, sets, n_sets, n_sets);
    }
    cz_obs_run *runs = cz_xcalloc(n_obs, sizeof *runs);
    size_t loaded = 0;
    for (size_t i = 0; i < n_obs && st == CZ_OK; i++) {
        if ((st = cz_file_check_input(obs[i], &err)) != CZ_OK) {
            cz_err_prefix(&err, "--observed: ");
            break;
        }
        st = cz_obs_load(obs[i], &runs[i], &err);
        if (st == CZ_OK)
            loaded++;
    }
    cJSON *report = NULL;
    cz_cost_file cf;
    if (st == CZ_OK) {
        cz_obsfit_opts o = {.mask = mask, .max_evals = (uint32_t)max_evals,
                            .verbose = !quiet};
        st = cz_obsfit(&cfg, runs, (uint32_t)n_obs, &o, &cf, &report, &err);
        snprintf(cf.hardware, sizeof cf.hardware, "%s", cfg.hw.name);
    }
    if (st == CZ_OK) {
        cJSON *j = cost_json(&cf, "observed", obs, n_obs, report);
        cJSON_AddStringToObject(j, "config", config_path);
        st = write_cost(j, tmp, &err);
    }
    int rc = CZ_EXIT_OK;
    if (st != CZ_OK) {
        cz_out_discard();
        rc = cz_cli_fail(&err);
    } else if (!quiet) {
        uint64_t nreq = 0, excl = 0;
        for (size_t i = 0; i < n_obs; i++) {
            nreq += runs[i].n;
            excl += runs[i].excluded;
        }
        printf("cadenza %s  calibrate: model %s on %s, scheduler %s, %zu observed runs, "
               "%llu requests (%llu not completed, left out) -> %s\n",
               cz_version(), cfg.model.name, cfg.hw.name, cfg.scheduler, n_obs,
               (unsigned long long)nreq, (unsigned long long)excl, out);
        cz_obsfit_print(report, stdout);
    }
    for (size_t i = 0; i < loaded; i++)
        cz_obs_free(&runs[i]);
    free(runs);
    cJSON_Delete(report);
    cJSON_Delete(cfg_json);
    free(base_dir);
    return rc;
}

int cz_cmd_calibrate(int argc, char **argv)
{
    const char **paths = cz_xcalloc((size_t)argc, sizeof *paths);
    const char **obs = cz_xcalloc((size_t)argc, sizeof *obs);
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    size_t n_paths = 0, n_obs = 0;
    int n_sets = 0;
    const char *out = NULL, *config_path = NULL, *fit_list = NULL, *cost_path = NULL;
    unsigned long max_evals = 600;
    unsigned long folds = 5;
    unsigned long long seed = 1;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(calibrate_usage, stdout);
            free(paths);
            free(obs);
            free(sets);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                   strcmp(a, "--folds") == 0 || strcmp(a, "--seed") == 0 ||
                   strcmp(a, "--observed") == 0 || strcmp(a, "--config") == 0 ||
                   strcmp(a, "--set") == 0 || strcmp(a, "--fit") == 0 ||
                   strcmp(a, "--cost") == 0 ||
                   strcmp(a, "--max-evals") == 0) {
            if (i + 1 >= argc) {
                free(paths);
                free(obs);
                free(sets);
                return cz_cli_usage_error(CMD, "option '%s' needs a value", a);
            }
            const char *v = argv[++i];
            char *end;
            errno = 0;
            if (strcmp(a, "--observed") == 0) {
                obs[n_obs++] = v;
            } else if (strcmp(a, "--config") == 0) {
                config_path = v;
            } else if (strcmp(a, "--cost") == 0) {
                cost_path = v;
            } else if (strcmp(a, "--set") == 0) {
                sets[n_sets++] = v;
            } else if (strcmp(a, "--fit") == 0) {
                fit_list = v;
            } else if (strcmp(a, "--max-evals") == 0) {
                max_evals = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || max_evals < 10 ||
                    max_evals > 100000) {
                    free(paths);
                    free(obs);
                    free(sets);
                    return cz_cli_usage_error(CMD, "option '--max-evals': expected 10 to "
                                                   "100000, got '%s'",
                                              v);
                }
            } else if (a[1] == 'o' || strcmp(a, "--output") == 0) {
                out = v;
            } else if (strcmp(a, "--folds") == 0) {
                folds = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || folds < 2 || folds > 100) {
                    free(paths);
                    free(obs);
                    free(sets);
                    return cz_cli_usage_error(CMD, "option '--folds': expected 2 to 100, got "
                                                   "'%s'",
                                              v);
                }
            } else {
                seed = strtoull(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-') {
                    free(paths);
                    free(obs);
                    free(sets);
                    return cz_cli_usage_error(CMD, "option '--seed': expected a non-negative "
                                                   "integer, got '%s'",
                                              v);
                }
            }
        } else if (a[0] == '-') {
            free(paths);
            free(obs);
            free(sets);
            return cz_cli_usage_error(CMD, "unknown option '%s'", a);
        } else {
            paths[n_paths++] = a;
        }
    }
    if (n_obs || config_path || n_sets || fit_list || cost_path) {
        const char *why = n_paths ? "inputs of the first form (profiles, engine replays) "
                                    "cannot be mixed with --observed"
                          : !n_obs ? "--observed RUN.h5 is required with --config, --set, "
                                     "--cost and --fit"
                          : !config_path ? "--config CONFIG.json is required with --observed"
                          : !out         ? "-o cost.json is required"
                                         : NULL;
        int rc = why ? cz_cli_usage_error(CMD, "%s", why)
                     : calibrate_observed(obs, n_obs, config_path, sets, n_sets, cost_path,
                                          fit_list, max_evals, out, quiet);
        free(paths);
        free(obs);
        free(sets);
        return rc;
    }
    free(obs);
    free(sets);
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
        snprintf(cf.hardware, sizeof cf.hardware, "%s", in.hardware);
    }
    if (st == CZ_OK) {
        st = write_cost(cost_json(&cf, "inputs", paths, n_paths, report), tmp, &err);
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
