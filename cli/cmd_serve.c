/* cmd_serve.c - `cadenza serve`: an experiment config's deployment behind an
 * OpenAI-compatible HTTP endpoint (serve/cz_serve.h, docs/serve.md), until SIGINT or
 * SIGTERM; then its results and summary, as `cadenza sim` writes them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cz_cli.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_proc.h"
#include "cz_results.h"
#include "cz_serve.h"

static const char serve_usage[] =
    "usage: cadenza serve CONFIG.json [--set key=value]... [--host 127.0.0.1] [--port 8000]\n"
    "                     [--execution modelled|engine] [--backend cpu|cuda] [--threads N]\n"
    "                     [--cost cost.json]\n"
    "                     [--model-dir DIR] [--served-model-name NAME] [--api-key KEY]\n"
    "                     [--max-pending-tokens N] [--session-idle-s S] [--port-file FILE]\n"
    "                     [-o results.h5] [--summary summary.json] [--percentiles LIST]\n"
    "                     [--exact-percentiles] [--quiet]\n"
    "\n"
    "Serve an experiment config's deployment (its model, hardware, server and scheduler;\n"
    "its workload is not read) behind an OpenAI-compatible HTTP endpoint: POST\n"
    "/v1/completions and /v1/chat/completions (streamed or not), GET /v1/models, /health\n"
    "and /metrics (Prometheus, vLLM's metric names). Requests carrying a session id (the\n"
    "X-Session-ID header, or the body's \"user\") are one conversation: a prompt that\n"
    "extends the session's last prompt and reply reuses its KV (usage's cached_tokens);\n"
    "POST /v1/sessions/ID/events takes its client's speech_start, speech_end, playback and\n"
    "barge_in (LiveServe's interaction plane).\n"
    "Runs until SIGINT or SIGTERM, then ends open streams with finish_reason \"abort\" and\n"
    "writes the results and the summary (the simulator's keys, \"driver\": \"serve\").\n"
    "docs/serve.md.\n"
    "\n"
    "  --set key=value      override a config field (repeatable)\n"
    "  --host ADDR          address to bind (default 127.0.0.1, loopback only)\n"
    "  --port N             port (default 8000; 0: any free port)\n"
    "  --execution KIND     modelled (default): each step lasts what the cost model says,\n"
    "                       waited out on the clock, and emits token ids drawn from the\n"
    "                       seed (or the request's), never the EOS (a reply runs to its\n"
    "                       max_tokens or a stop string);\n"
    "                       engine: each step runs through the kernels on the config's\n"
    "                       weights (engine.weights), as `cadenza replay` runs it, and\n"
    "                       emits the ids it samples with the request's sampling (the\n"
    "                       EOS, stop ids and stop strings end a reply)\n"
    "  --backend NAME       the engine's kernel backend: cpu (default) or cuda (a build\n"
    "                       with -Dcuda)\n"
    "  --threads N          the engine's CPU threads (default: engine.threads, else every\n"
    "                       CPU)\n"
    "  --cost FILE          step times from a fitted cost model (`cadenza calibrate`)\n"
    "  --model-dir DIR      a folder with tokenizer.json (and tokenizer_config.json) for\n"
    "                       text prompts and chat; default: the byte-level fallback\n"
    "  --served-model-name  the model's name in the API (default: the model card's)\n"
    "  --api-key KEY        requests must carry Authorization: Bearer KEY (401 otherwise)\n"
    "  --max-pending-tokens N  token ids a stream may hold unsent before its client is\n"
    "                       dropped as too slow (default 4096)\n"
    "  --session-idle-s S   a session's kept KV is released after S seconds idle (600)\n"
    "  --port-file FILE     write the port listened on to FILE\n"
    "  -o, --output FILE    write the HDF5 results at the end\n"
    "  --summary FILE       write the JSON summary at the end\n"
    "  --percentiles LIST   percentiles reported per latency metric (as for `sim`)\n"
    "  --exact-percentiles  exact percentiles instead of the sketch's\n"
    "  --quiet              print nothing but errors\n"
    "  -h, --help           this help\n";

/* A count option's value in [lo, hi]; prints a usage error and returns false otherwise. */
static bool parse_u64(const char *opt, const char *v, unsigned long long lo,
                      unsigned long long hi, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
        cz_cli_usage_error("serve", "option '%s': expected a whole number from %llu to %llu, "
                                    "got '%s'",
                           opt, lo, hi, v);
        return false;
    }
    *out = x;
    return true;
}

int cz_cmd_serve(int argc, char **argv)
{
    const char *config_path = NULL, *out_h5 = NULL, *out_summary = NULL, *cost_path = NULL;
    cz_serve_opts o = {.host = "127.0.0.1", .port = 8000, .exec = CZ_SERVE_MODELLED};
    cz_pctset pct = {0};
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    int n_sets = 0;
    bool quiet = false;
    int rc = CZ_EXIT_OK;
    static const char *const valued[] = {
        "--set",       "-o",           "--output",        "--summary",          "--cost",
        "--percentiles", "--host",     "--port",          "--execution",
        "--model-dir", "--served-model-name", "--api-key", "--max-pending-tokens",
        "--session-idle-s", "--port-file", "--backend", "--threads"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = false;
        for (size_t k = 0; k < CZ_ARRAY_LEN(valued); k++)
            takes = takes || strcmp(a, valued[k]) == 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(serve_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        }
        if (takes) {
            if (i + 1 >= argc) {
                free(sets);
                return cz_cli_usage_error("serve", "option '%s' needs a value", a);
            }
            const char *v = argv[++i];
            unsigned long long x;
            if (strcmp(a, "--set") == 0) {
                sets[n_sets++] = v;
            } else if (strcmp(a, "--percentiles") == 0) {
                if ((rc = cz_cli_parse_percentiles("serve", v, &pct)) != CZ_EXIT_OK)
                    goto usage;
            } else if (strcmp(a, "--cost") == 0) {
                cost_path = v;
            } else if (strcmp(a, "--summary") == 0) {
                out_summary = v;
            } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
                out_h5 = v;
            } else if (strcmp(a, "--host") == 0) {
                o.host = v;
            } else if (strcmp(a, "--port") == 0) {
                if (!parse_u64(a, v, 0, 65535, &x))
                    goto usage_rc;
                o.port = (uint16_t)x;
            } else if (strcmp(a, "--execution") == 0) {
                if (strcmp(v, "modelled") == 0) {
                    o.exec = CZ_SERVE_MODELLED;
                } else if (strcmp(v, "engine") == 0) {
                    o.exec = CZ_SERVE_ENGINE;
                } else {
                    rc = cz_cli_usage_error("serve", "option '--execution': expected modelled or "
                                                     "engine, got '%s'",
                                            v);
                    goto usage;
                }
            } else if (strcmp(a, "--model-dir") == 0) {
                o.model_dir = v;
            } else if (strcmp(a, "--served-model-name") == 0) {
                if (!v[0] || strlen(v) >= 128) {
                    rc = cz_cli_usage_error("serve", "option '--served-model-name': expected 1 "
                                                     "to 127 characters, got %zu",
                                            strlen(v));
                    goto usage;
                }
                o.served_name = v;
            } else if (strcmp(a, "--api-key") == 0) {
                o.api_key = v;
            } else if (strcmp(a, "--max-pending-tokens") == 0) {
                if (!parse_u64(a, v, 16, 1u << 24, &x))
                    goto usage_rc;
                o.max_pending_tokens = (uint32_t)x;
            } else if (strcmp(a, "--session-idle-s") == 0) {
                char *end;
                errno = 0;
                double s = strtod(v, &end);
                if (errno || end == v || *end || !(s > 0 && s <= 1e9)) {
                    rc = cz_cli_usage_error("serve", "option '--session-idle-s': expected "
                                                     "seconds in (0, 1e9], got '%s'",
                                            v);
                    goto usage;
                }
                o.session_idle_s = s;
            } else if (strcmp(a, "--port-file") == 0) {
                o.port_file = v;
            } else if (strcmp(a, "--backend") == 0) {
                if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                    rc = cz_cli_usage_error("serve", "option '--backend': expected cpu or cuda, "
                                                     "got '%s'",
                                            v);
                    goto usage;
                }
                o.backend = v;
            } else if (strcmp(a, "--threads") == 0) {
                if (!parse_u64(a, v, 1, 1024, &x))
                    goto usage_rc;
                o.threads = (uint32_t)x;
            }
        } else if (strcmp(a, "--exact-percentiles") == 0) {
            sets[n_sets++] = "metrics.percentiles=exact";
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (a[0] == '-') {
            rc = cz_cli_usage_error("serve", "unknown option '%s'", a);
            goto usage;
        } else if (!config_path) {
            config_path = a;
        } else {
            rc = cz_cli_usage_error("serve", "more than one config given ('%s', '%s')",
                                    config_path, a);
            goto usage;
        }
    }
    if (!config_path) {
        rc = cz_cli_usage_error("serve", "a config is required (e.g. experiments/default.json)");
        goto usage;
    }
    o.quiet = quiet;
    /* a client that goes away must not end the server */
    signal(SIGPIPE, SIG_IGN);
    volatile sig_atomic_t *stop = cz_out_graceful_interrupt(true);

    cz_err err;
    cz_err_clear(&err);
    cJSON *cfg_json = NULL;
    char *base_dir = NULL;
    cz_status st = cz_cli_load_config(config_path, sets, n_sets, &cfg_json, &base_dir, &err);
    if (st == CZ_OK && cost_path)
        st = cz_cli_use_cost_file(cfg_json, cost_path, &err);
    const char *tmp_h5 = NULL, *tmp_summary = NULL;
    if (st == CZ_OK && out_h5)
        st = cz_out_add("-o", out_h5, &tmp_h5, &err);
    if (st == CZ_OK && out_summary)
        st = cz_out_add("--summary", out_summary, &tmp_summary, &err);
    cz_config cfg;
    cz_workload wl;
    cz_workload_init(&wl);
    cz_workload_live(&wl); /* the config's workload is not read */
    if (st == CZ_OK) {
        st = cz_config_parse(cfg_json, config_path, base_dir, &cfg, &wl, &err);
        if (st != CZ_OK)
            cz_cli_blame_set(&err, config_path, sets, n_sets, n_sets);
    }
    cz_metrics m;
    memset(&m, 0, sizeof m);
    cz_results_writer *writer = NULL;
    cJSON *summary = NULL;
    cz_run_stats stats;
    cz_serve_report rep;
    memset(&rep, 0, sizeof rep);
    if (st == CZ_OK) {
        cz_metrics_init(&m, cfg.timeline_interval_s, 0);
        cz_metrics_set_pct_mode(&m, cfg.pct_mode);
        if (pct.n)
            m.pct = pct;
        if (tmp_h5) {
            cz_results_stages stages;
            cz_run_stages(&cfg, &stages);
            st = cz_results_open(tmp_h5, &stages, &writer, &err);
        }
        if (st == CZ_OK) {
            cz_rows_sink sink = tmp_h5 ? cz_results_sink(writer) : (cz_rows_sink){0};
            cz_metrics_stream(&m, tmp_h5 ? &sink : NULL);
        }
    }
    char date[32] = "";
    if (st == CZ_OK) {
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm))
            strftime(date, sizeof date, "%Y%m%d-%H%M%S", &tm);
        st = cz_serve_run(&cfg, &o, stop, &m, &stats, &rep, &err);
    }
    if (st == CZ_OK) {
        cz_summary sum;
        cz_metrics_summarize(&m, &cfg.slo, &sum);
        summary = cz_cli_summary(cfg_json, &cfg, &wl, &m, &sum, &stats, date, "cadenza-serve",
                                 "serve");
        cJSON *sv = cJSON_AddObjectToObject(summary, "serve");
        cJSON_AddStringToObject(sv, "execution", o.exec == CZ_SERVE_MODELLED ? "modelled" : "engine");
        cJSON_AddStringToObject(sv, "tokenizer", rep.tokenizer);
        cJSON_AddNumberToObject(sv, "http_requests", (double)rep.http_requests);
        cJSON_AddNumberToObject(sv, "http_errors", (double)rep.errors_4xx);
        cJSON_AddNumberToObject(sv, "client_aborts", (double)rep.client_aborts);
        cJSON_AddNumberToObject(sv, "streams_dropped", (double)rep.streams_dropped);
        cJSON_AddNumberToObject(sv, "cached_tokens", (double)rep.cached_tokens);
        const cz_serve_clock *ck = &rep.clock;
        double mean_late_us = ck->times ? 1e6 * ck->late_sum_s / (double)ck->times : 0.0;
        if (o.exec == CZ_SERVE_MODELLED) {
            cJSON *c = cJSON_AddObjectToObject(sv, "clock");
            cJSON_AddNumberToObject(c, "model_times", (double)ck->times);
            cJSON_AddNumberToObject(c, "mean_late_us", mean_late_us);
            cJSON_AddNumberToObject(c, "max_late_us", 1e6 * ck->late_max_s);
            cJSON_AddNumberToObject(c, "over_1ms", (double)ck->over_1ms);
        }
        cJSON_AddNumberToObject(summary, "seed", (double)cfg.seed);
        cJSON_AddItemToObject(summary, "config", cJSON_Duplicate(cfg_json, 1));
        st = cz_cli_land_outputs(&writer, &m, cfg_json, summary, cfg.seed, tmp_summary, &err);
        if (st == CZ_OK && !quiet) {
            printf("cadenza %s serve  model %s on %s  scheduler %s  execution %s\n",
                   cz_version(), cfg.model.name, cfg.hw.name, cfg.scheduler,
                   o.exec == CZ_SERVE_MODELLED ? "modelled" : "engine");
            printf("http: %llu requests, %llu refused, %llu aborted by their client, %llu "
                   "dropped as too slow, %llu prompt tokens from kept KV\n",
                   (unsigned long long)rep.http_requests, (unsigned long long)rep.errors_4xx,
                   (unsigned long long)rep.client_aborts, (unsigned long long)rep.streams_dropped,
                   (unsigned long long)rep.cached_tokens);
            if (o.exec == CZ_SERVE_MODELLED)
                printf("clock: %llu model times kept, %.1f us late on average, %llu over 1 ms, "
                       "worst %.3f ms\n",
                       (unsigned long long)ck->times, mean_late_us,
                       (unsigned long long)ck->over_1ms, 1e3 * ck->late_max_s);
            cz_summary_print(&sum, stdout);
            fflush(stdout);
        }
    }
    if (st != CZ_OK)
        rc = cz_cli_fail(&err);
    cz_results_discard(writer);
    cz_out_discard();
    cJSON_Delete(summary);
    cJSON_Delete(cfg_json);
    free(base_dir);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    free(sets);
    return rc;
usage_rc:
    rc = CZ_EXIT_USAGE;
usage:
    free(sets);
    return rc;
}
