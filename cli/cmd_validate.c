/* cmd_validate.c - `cadenza validate`: one config on the engine (repeated) and in the
 * simulator, compared (runtime/cz_validate.h, docs/validation.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_profile.h"
#include "cz_results.h"
#include "cz_run.h"
#include "cz_stats.h"
#include "cz_validate.h"

#define CMD "validate"

static const char validate_usage[] =
    "usage: cadenza validate CONFIG.json [--cost cost.json] [--set key=value]...\n"
    "                        [--backend cpu|cuda] [--threads N] [--repeats R]\n"
    "                        [--summary v.json] [-o v.h5] [--no-probe] [--quiet]\n"
    "                        [--no-progress]\n"
    "       cadenza validate CONFIG.json --endpoint URL --cost cost.json [--model NAME]\n"
    "                        [--api-key KEY] [--api completions|chat] [--tokenizer DIR]\n"
    "                        [--max-concurrency N] [--request-timeout S] [--no-events]\n"
    "                        [--repeats R] ...\n"
    "\n"
    "Runs the config on the engine (R times, default 2) and in the simulator, and reports\n"
    "side by side each summary metric (P50/P90/P99 TTFT, TPOT, ITL, E2E, audio TTFP,\n"
    "throughput) with the simulator's relative error and the engine's run-to-run spread;\n"
    "the cost model's step-time error on the engine's own batches (cost-model error apart\n"
    "from scheduling divergence), by batch class; and per request, the MAPE and Pearson r\n"
    "of TTFT and end-to-end latency (docs/validation.md). Before each engine run and after\n"
    "the last, a probe times a few shapes and compares them with the cost model: the\n"
    "machine's speed now against the fit's; with a fitted cost, the simulator also runs\n"
    "with its cost scaled by their median (cost.scale), reported beside the plain run.\n"
    "\n"
    "With --endpoint the workload runs against an OpenAI-compatible server instead of the\n"
    "engine (`cadenza replay --endpoint`, R times, default 1) and the simulator uses the\n"
    "cost (`cadenza calibrate --observed`): the same side-by-side report without the\n"
    "step-level and probe sections, which need the engine.\n"
    "\n"
    "  --cost FILE          the fitted cost model (`cadenza calibrate`) both runs use\n"
    "                       (default: the config's cost object)\n"
    "  --endpoint URL       the server's base URL (http://host:port), as replay takes it\n"
    "  --model NAME         the request's model (default: the config's model card name)\n"
    "  --api-key KEY        sent as a bearer token (default: $OPENAI_API_KEY, if set)\n"
    "  --max-concurrency N  requests in flight at most, as replay's\n"
    "  --api, --tokenizer, --request-timeout, --no-events   as replay's\n"
    "  --set key=value      override a config field (repeatable)\n"
    "  --backend NAME       the engine's kernels: cpu (default) or cuda\n"
    "  --threads N          CPU threads in all (default: engine.threads, else every CPU)\n"
    "  --repeats R          engine runs, 1 to 100 (default 2)\n"
    "  --summary FILE       write the report as JSON, with both runs' summaries\n"
    "  -o, --output FILE    write the first engine run's HDF5 results (with /steps), the\n"
    "                       report as its summary\n"
    "  --no-probe           no speed probes (and no rescaled simulator run)\n"
    "  --quiet              print nothing but errors\n"
    "  --no-progress        no progress line\n"
    "  -h, --help           this help\n";

/* The config's own cost.scale (1 when it has none). */
static double cost_scale_of(const cJSON *cfg_json)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cfg_json, "cost"), "scale");
    return cJSON_IsNumber(v) ? v->valuedouble : 1.0;
}

int cz_cmd_validate(int argc, char **argv)
{
    const char *config_path = NULL, *out_h5 = NULL, *out_summary = NULL, *cost_path = NULL;
    cz_engine_opts eopts = {.backend = "cpu"};
    const char **sets = cz_xcalloc((size_t)argc + 1, sizeof *sets);
    int n_sets = 0;
    unsigned long repeats = 2;
    bool quiet = false, progress = true, probe = true, repeats_given = false;
    bool engine_flag = false;
    cz_cli_http http = {.o = {.timeout_s = 21600.0}};
    int rc = CZ_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(validate_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        }
        if (strcmp(a, "--quiet") == 0) {
            quiet = true;
            continue;
        }
        if (strcmp(a, "--no-probe") == 0) {
            probe = false;
            continue;
        }
        if (strcmp(a, "--no-progress") == 0) {
            progress = false;
            continue;
        }
        if (strcmp(a, "--no-events") == 0) {
            (void)cz_cli_http_flag(CMD, &http, a, NULL);
            continue;
        }
        static const char *const valued[] = {"--cost",    "--set",     "--backend", "--threads",
                                             "--repeats", "--summary", "-o",        "--output"};
        bool known = cz_cli_http_valued(a);
        for (size_t k = 0; k < CZ_ARRAY_LEN(valued); k++)
            known = known || strcmp(a, valued[k]) == 0;
        if (!known && a[0] == '-') {
            free(sets);
            return cz_cli_usage_error(CMD, "unknown option '%s'", a);
        }
        if (!known) {
            if (config_path) {
                free(sets);
                return cz_cli_usage_error(CMD, "more than one config given ('%s', '%s')",
                                          config_path, a);
            }
            config_path = a;
            continue;
        }
        if (i + 1 >= argc) {
            free(sets);
            return cz_cli_usage_error(CMD, "option '%s' needs a value", a);
        }
        const char *v = argv[++i];
        char *end;
        if (strcmp(a, "--cost") == 0) {
            cost_path = v;
        } else if (cz_cli_http_valued(a)) {
            int hrc = cz_cli_http_flag(CMD, &http, a, v);
            if (hrc != CZ_EXIT_OK) {
                free(sets);
                return hrc;
            }
        } else if (strcmp(a, "--set") == 0) {
            sets[n_sets++] = v;
        } else if (strcmp(a, "--backend") == 0) {
            engine_flag = true;
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                free(sets);
                return cz_cli_usage_error(CMD, "option '--backend': expected cpu or cuda, got "
                                               "'%s'",
                                          v);
            }
            eopts.backend = v;
        } else if (strcmp(a, "--threads") == 0 || strcmp(a, "--repeats") == 0) {
            bool th = strcmp(a, "--threads") == 0;
            unsigned long max = th ? 1024u : 100u;
            errno = 0;
            unsigned long t = strtoul(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-' || t == 0 || t > max) {
                free(sets);
                return cz_cli_usage_error(CMD, "option '%s': expected a count from 1 to %lu, "
                                               "got '%s'",
                                          a, max, v);
            }
            if (th) {
                eopts.threads = (uint32_t)t;
                engine_flag = true;
            } else {
                repeats = t;
                repeats_given = true;
            }
        } else if (strcmp(a, "--summary") == 0) {
            out_summary = v;
        } else {
            out_h5 = v;
        }
    }
    if (!config_path) {
        free(sets);
        return cz_cli_usage_error(CMD, "a config is required (e.g. experiments/engine/cpu.json)");
    }
    int hrc = cz_cli_http_finish(CMD, &http);
    if (hrc != CZ_EXIT_OK) {
        free(sets);
        return hrc;
    }
    if (http.o.endpoint && engine_flag) {
        free(sets);
        return cz_cli_usage_error(CMD, "--backend and --threads are the engine's: with "
                                       "--endpoint the server runs the model");
    }
    if (http.o.endpoint) {
        probe = false; /* the probes time the engine */
        if (!repeats_given)
            repeats = 1;
    }
    eopts.stop = cz_out_graceful_interrupt(false);
    http.o.stop = eopts.stop;

    cz_err err;
    cz_err_clear(&err);
    cJSON *cfg_json = NULL;
    cz_status st = cz_file_check_input(config_path, &err);
    if (st != CZ_OK)
        cz_err_prefix(&err, "config argument: ");
    else
        st = cz_json_load(config_path, &cfg_json, &err);
    if (st != CZ_OK) {
        free(sets);
        return cz_cli_fail(&err);
    }
    char *base_dir = cz_cli_dir_of(config_path);
    for (int i = 0; i < n_sets && st == CZ_OK; i++)
        st = cz_cli_set(cfg_json, sets[i], &err);
    if (st == CZ_OK && cost_path)
        st = cz_cli_use_cost_file(cfg_json, cost_path, &err);
    const char *tmp_h5 = NULL, *tmp_summary = NULL;
    if (st == CZ_OK && out_h5)
        st = cz_out_add("-o", out_h5, &tmp_h5, &err);
    if (st == CZ_OK && out_summary)
        st = cz_out_add("--summary", out_summary, &tmp_summary, &err);

    uint32_t R = (uint32_t)repeats;
    cz_metrics *em = cz_xcalloc(R, sizeof *em), sm;
    cJSON **esum = cz_xcalloc(R, sizeof *esum), *ssum = NULL, *report = NULL;
    cz_config cfg;
    cz_summary sum;
    cz_run_stats stats;
    double wall;
    bool partial = false;
    uint32_t ran = 0;
    bool sim_ran = false;
    memset(&sm, 0, sizeof sm);
    /* the probes' config: the one the engine runs (its workload is not needed) */
    cz_config pcfg;
    double *ratios = cz_xcalloc((size_t)R + 1, sizeof *ratios);
    if (st == CZ_OK && probe) {
        cz_workload wl;
        cz_workload_init(&wl);
        st = cz_config_parse(cfg_json, config_path, base_dir, &pcfg, &wl, &err);
        cz_workload_free(&wl);
    }
    cz_profile_opts popts = {.backend = eopts.backend, .threads = eopts.threads};
    for (uint32_t r = 0; r < R && st == CZ_OK; r++) {
        if (probe) {
            if (!quiet)
                fprintf(stderr, "validate: probe %u\n", r + 1);
            st = cz_profile_probe(&pcfg, &popts, &ratios[r], &err);
            if (st != CZ_OK)
                break;
        }
        if (!quiet)
            fprintf(stderr, "validate: %s run %u of %u\n", http.o.endpoint ? "server" : "engine",
                    r + 1, R);
        if (http.o.endpoint) {
            cz_hclient_stats hs;
            st = cz_cli_run_http(cfg_json, config_path, base_dir, progress && !quiet, &http.o,
                                 &hs, &cfg, &em[r], &sum, &stats, &esum[r], &wall, &partial,
                                 &err);
        } else {
            st = cz_cli_run(cfg_json, config_path, base_dir, progress && !quiet, &eopts, NULL,
                            &cfg, &em[r], &sum, &stats, &esum[r], &wall, &partial, &err);
        }
        if (st == CZ_OK)
            ran++;
        if (st == CZ_OK && partial)
            st = cz_err_set(&err, CZ_EINVAL, "validate: %s run %u was stopped (Ctrl-C); "
                                             "nothing written",
                            http.o.endpoint ? "server" : "engine", r + 1);
    }
    if (st == CZ_OK && probe) {
        if (!quiet)
            fprintf(stderr, "validate: probe %u\n", R + 1);
        st = cz_profile_probe(&pcfg, &popts, &ratios[R], &err);
    }
    if (st == CZ_OK) {
        if (!quiet)
            fprintf(stderr, "validate: simulator\n");
        st = cz_cli_simulate(cfg_json, config_path, base_dir, false, NULL, true, &cfg, &sm, &sum, &stats,
                             &ssum, &wall, &err);
        sim_ran = st == CZ_OK;
    }
    /* the simulator again at the machine's speed the probes saw */
    double scale = NAN;
    cJSON *rsum = NULL;
    if (st == CZ_OK && probe) {
        double *sorted = cz_xmalloc(((size_t)R + 1) * sizeof *sorted);
        memcpy(sorted, ratios, ((size_t)R + 1) * sizeof *sorted);
        cz_dist d;
        cz_dist_compute(sorted, (size_t)R + 1, &d);
        scale = d.median;
        free(sorted);
    }
    if (st == CZ_OK && probe && cfg.cost_kind == CZ_COST_FITTED && isfinite(scale) &&
        scale > 1e-3 && scale < 1e3) {
        cJSON *scaled = cJSON_Duplicate(cfg_json, 1);
        cJSON *cost = cJSON_GetObjectItemCaseSensitive(scaled, "cost");
        cJSON_DeleteItemFromObjectCaseSensitive(cost, "scale");
        cJSON_AddNumberToObject(cost, "scale", cost_scale_of(cfg_json) * scale);
        cz_config rcfg;
        cz_metrics rm;
        memset(&rm, 0, sizeof rm);
        if (!quiet)
            fprintf(stderr, "validate: simulator, cost x %.3f\n", scale);
        st = cz_cli_simulate(scaled, config_path, base_dir, false, NULL, true, &rcfg, &rm, &sum, &stats,
                             &rsum, &wall, &err);
        if (st == CZ_OK)
            cz_metrics_free(&rm);
        cJSON_Delete(scaled);
    }
    if (st == CZ_OK) {
        const cz_metrics **ep = cz_xcalloc(R, sizeof *ep);
        for (uint32_t r = 0; r < R; r++)
            ep[r] = &em[r];
        report = cz_validate_report(&cfg, ep, (const cJSON *const *)esum, R, &sm, ssum);
        free(ep);
        if (probe)
            cz_validate_add_probe(report, ratios, R + 1, scale, rsum);
        cJSON_AddStringToObject(report, "config", config_path);
        if (http.o.endpoint)
            cJSON_AddStringToObject(report, "endpoint", http.o.endpoint);
        else
            cJSON_AddStringToObject(report, "kernel_backend", eopts.backend);
        if (out_summary) {
            cJSON *out = cJSON_Duplicate(report, 1);
            cJSON *runs = cJSON_AddArrayToObject(out, "engine_summaries");
            for (uint32_t r = 0; r < R; r++)
                cJSON_AddItemToArray(runs, cJSON_Duplicate(esum[r], 1));
            cJSON_AddItemToObject(out, "sim_summary", cJSON_Duplicate(ssum, 1));
            st = cz_json_write_file(out, tmp_summary, true, &err);
            cJSON_Delete(out);
        }
        if (st == CZ_OK && out_h5) {
            char *cfg_text = cJSON_PrintUnformatted(cfg_json);
            char *rep_text = cJSON_PrintUnformatted(report);
            cz_results_stages stages;
            cz_run_stages(&cfg, &stages);
            st = cz_results_write_h5(tmp_h5, &em[0], &stages, cfg_text, rep_text, cfg.seed,
                                     &err);
            cJSON_free(cfg_text);
            cJSON_free(rep_text);
        }
        if (st == CZ_OK)
            st = cz_out_commit(&err);
    }
    if (st != CZ_OK) {
        cz_out_discard();
        cz_cli_blame_set(&err, config_path, sets, n_sets, n_sets);
        rc = cz_cli_fail(&err);
    } else if (!quiet) {
        if (http.o.endpoint)
            printf("cadenza %s  validate '%s'  model %s: server %s (%u runs) against the "
                   "simulator on %s, scheduler %s, cost %s\n",
                   cz_version(), cfg.name, cfg.model.name, http.o.endpoint, R, cfg.hw.name,
                   cfg.scheduler, cost_path ? cost_path : "the config's");
        else
            printf("cadenza %s  validate '%s'  model %s on %s (%s backend, %u engine runs)  "
                   "scheduler %s  cost %s\n",
                   cz_version(), cfg.name, cfg.model.name, cfg.hw.name, eopts.backend, R,
                   cfg.scheduler, cost_path ? cost_path : "the config's");
        cz_validate_print(report, stdout);
    }
    for (uint32_t r = 0; r < ran; r++) {
        cz_metrics_free(&em[r]);
        cJSON_Delete(esum[r]);
    }
    if (sim_ran)
        cz_metrics_free(&sm);
    cJSON_Delete(ssum);
    cJSON_Delete(rsum);
    free(ratios);
    cJSON_Delete(report);
    free(em);
    free(esum);
    free(base_dir);
    cJSON_Delete(cfg_json);
    free(sets);
    return rc;
}
