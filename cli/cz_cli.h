/* cz_cli.h - the `cadenza` command line: subcommands and shared helpers. Only this
 * layer prints errors and chooses exit codes: 0 success, 2 usage or input error, 1 any
 * other failure (such as an output file that cannot be written or memory exhausted),
 * 3 an internal error (a run that lost track of a request: a bug, with its evidence). */
#ifndef CZ_CLI_H
#define CZ_CLI_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_engine.h"
#include "cz_hclient.h"
#include "cz_results.h"
#include "cz_sim.h"

enum { CZ_EXIT_OK = 0, CZ_EXIT_FAIL = 1, CZ_EXIT_USAGE = 2, CZ_EXIT_INTERNAL = 3 };

int cz_cmd_sim(int argc, char **argv);
int cz_cmd_replay(int argc, char **argv);
int cz_cmd_sweep(int argc, char **argv);
int cz_cmd_trace(int argc, char **argv);
int cz_cmd_generate(int argc, char **argv);
int cz_cmd_validate(int argc, char **argv);
int cz_cmd_calibrate(int argc, char **argv);
int cz_cmd_cards(int argc, char **argv);
int cz_cmd_card(int argc, char **argv);
int cz_cmd_profile(int argc, char **argv);
int cz_cmd_plot(int argc, char **argv);
int cz_cmd_figures(int argc, char **argv);
int cz_cmd_serve(int argc, char **argv);

/* An output folder named by `flag` of `cmd`: created when missing (its parent must exist),
 * refused when not a writable folder. Prints the error naming the flag and the folder and
 * returns CZ_EXIT_FAIL (an output that cannot be written) on failure, CZ_EXIT_OK
 * otherwise. */
int cz_cli_output_dir(const char *cmd, const char *flag, const char *dir);

/* Parses and simulates one experiment config. On success: *cfg, *m (caller frees with
 * cz_metrics_free), *sum and *summary (the JSON summary: the run's metadata first, vLLM's
 * date, backend, model_id, num_prompts, request_rate, burstiness, max_concurrency,
 * max_concurrent_requests, max_output_tokens_per_s (docs/metrics.md), then the metrics,
 * the config, seed and version; caller deletes) are filled and *wall_s is the
 * simulation's wall time. `pct`: the percentiles reported per metric (NULL: the default
 * set). `keep_records`: *m keeps every request record (m->req); otherwise it streams
 * and holds only the records in flight (docs/metrics.md). CZ_EINVAL naming
 * SOURCE_DATE_EPOCH when it is set and not a count of seconds. */
cz_status cz_cli_simulate(const cJSON *cfg_json, const char *where, const char *base_dir,
                          bool progress, const cz_pctset *pct, bool keep_records,
                          cz_config *cfg, cz_metrics *m, cz_summary *sum, cz_run_stats *stats,
                          cJSON **summary, double *wall_s, cz_err *err);

/* cz_cli_simulate keeping every record, on the engine when `eng` is not NULL: *partial
 * is true for a run cut by Ctrl-C. */
cz_status cz_cli_run(const cJSON *cfg_json, const char *where, const char *base_dir,
                     bool progress, const cz_engine_opts *eng, const cz_pctset *pct,
                     cz_config *cfg, cz_metrics *m, cz_summary *sum, cz_run_stats *stats,
                     cJSON **summary, double *wall_s, bool *partial, cz_err *err);

/* cz_cli_run against an OpenAI-compatible server (`http`, cz_hclient.h) instead: the
 * summary has the replay's "http" object; *hs its counters. */
cz_status cz_cli_run_http(const cJSON *cfg_json, const char *where, const char *base_dir,
                          bool progress, const cz_hclient_opts *http, cz_hclient_stats *hs,
                          cz_config *cfg, cz_metrics *m, cz_summary *sum,
                          cz_run_stats *stats, cJSON **summary, double *wall_s,
                          bool *partial, cz_err *err);

/* The summary JSON of a run (caller deletes): vLLM's result keys first (date, or null when
 * `date` is NULL or empty; backend; model_id; num_prompts; request_rate, burstiness and
 * max_concurrency from the config's arrivals, null for a live workload's; the peaks), the
 * metrics, the pipeline-level keys, the queueing-theory check where it applies, the version
 * and "driver". The caller adds the seed, the config and its driver's own keys. */
cJSON *cz_cli_summary(const cJSON *cfg_json, const cz_config *cfg, const cz_workload *wl,
                      const cz_metrics *m, const cz_summary *sum, const cz_run_stats *stats,
                      const char *date, const char *backend, const char *driver);

/* Lands a run's outputs together: closes the results file `*writer` (when not NULL; it is
 * NULL after) with the config and the summary as its attributes, writes the summary to
 * `tmp_summary` (when not NULL), and commits every output (cz_out_commit): all of them or,
 * on an error, none. */
cz_status cz_cli_land_outputs(cz_results_writer **writer, cz_metrics *m, const cJSON *cfg_json,
                              const cJSON *summary, uint64_t seed, const char *tmp_summary,
                              cz_err *err);

/* Parses `--percentiles` (vLLM's --metric-percentiles): comma-separated numbers in
 * (0, 100], at most CZ_PCT_MAX, none twice. On a bad value prints a usage error naming
 * the flag and returns CZ_EXIT_USAGE; CZ_EXIT_OK otherwise. */
int cz_cli_parse_percentiles(const char *cmd, const char *value, cz_pctset *out);

/* `--cost FILE`: makes the config's cost object {"kind": "fitted", "file": <FILE made
 * absolute>}, keeping its tp and bw_sat_sm_fraction (the fitted model reads them).
 * CZ_ENOTFOUND naming --cost and the file when it cannot be opened. */
cz_status cz_cli_use_cost_file(cJSON *cfg_json, const char *path, cz_err *err);
/* `--set key=value` (cz_json_set_path), with the paths the value holds made absolute
 * against the working directory, as a user typing them means them: a string that is a
 * relative path under a key named "path", "file" or "weights" (not "random"), or under
 * "model" or "hardware" when it names a file or folder (holds a '/' or ends in .json),
 * at the key set or anywhere inside the value set. Paths written in a config file stay
 * relative to the file (cz_config_parse resolves them). */
cz_status cz_cli_set(cJSON *cfg_json, const char *assignment, cz_err *err);

/* `--trace PATH`: the config's workload reads the trace at PATH (made absolute; its format
 * detected as `trace info` does) in place of its trace or synthetic requests; every other
 * workload field (arrivals, time scaling, caps) stays. CZ_ENOTFOUND naming --trace when
 * the file cannot be opened. */
cz_status cz_cli_use_trace(cJSON *cfg_json, const char *path, cz_err *err);

/* `--model NAME|PATH`: the config's model: a card name, a card file, or a Hugging Face
 * checkpoint folder or its config.json (docs/models.md), a path made absolute. */
void cz_cli_use_model(cJSON *cfg_json, const char *model);

/* Loads the experiment config at `path` (NULL: the built-in default) and applies the
 * --set assignments sets[0..n_sets) in order. On success *cfg_json (caller deletes) and
 * *base_dir (the folder its relative paths resolve against; caller frees) are set; on
 * failure (cz_json_load's and cz_json_set_path's errors; a file that cannot be opened
 * is CZ_ENOTFOUND naming the "config argument") both are NULL. The built-in default's
 * folder is <data folder>/experiments (cz_data_dir). */
cz_status cz_cli_load_config(const char *path, const char *const *sets, int n_sets,
                             cJSON **cfg_json, char **base_dir, cz_err *err);

/* The folder of `path` ("." when it has none); caller frees. */
char *cz_cli_dir_of(const char *path);

/* Prints "cadenza: <msg>" to stderr and returns the exit code for `st` (1 for I/O
 * errors and exhausted memory, 3 for internal errors, 2 for everything else). */
int cz_cli_fail(const cz_err *err);

/* Names the --set argument a bad config value came from. `overrides` are the key=value
 * assignments applied, in order, to the config named `cfg_where` in messages; the first
 * `n_user` of them are --set arguments (the rest, a sweep's grid values, keep the config's
 * name). When `err` is located on a field (cz_err_locate) of that config at or under the
 * key path of an override, and the last such override is a --set argument, the message
 * "<cfg_where>: server: field 'max_num_seqs': expected ..." becomes
 * "--set server.max_num_seqs=64junk: field 'max_num_seqs': expected ...". Otherwise `err`
 * is left as it is. */
void cz_cli_blame_set(cz_err *err, const char *cfg_where, const char *const *overrides,
                      int n_overrides, int n_user);

/* Prints a usage error and a hint to run --help; returns CZ_EXIT_USAGE. */
int cz_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The HTTP client's flags, one meaning in every command that takes --endpoint (`replay`,
 * `validate`): --endpoint, --model, --api-key, --max-concurrency, --request-timeout,
 * --api, --tokenizer (each with a value) and --no-events. Start it as
 * {.o = {.timeout_s = 21600.0}}. */
typedef struct cz_cli_http {
    cz_hclient_opts o;
    bool others; /* a flag other than --endpoint was given (they need it) */
} cz_cli_http;

/* Whether `flag` is one of the HTTP client's flags that take a value. */
bool cz_cli_http_valued(const char *flag);
/* Applies one of them (`value` NULL for --no-events). Prints the usage error and returns
 * CZ_EXIT_USAGE for a bad value, else CZ_EXIT_OK. */
int cz_cli_http_flag(const char *cmd, cz_cli_http *h, const char *flag, const char *value);
/* After the command line: the flags' combination checked (each needs --endpoint; chat needs
 * a tokenizer, and a tokenizer chat), the API key from $OPENAI_API_KEY when not given.
 * Prints the usage error and returns CZ_EXIT_USAGE, else CZ_EXIT_OK. */
int cz_cli_http_finish(const char *cmd, cz_cli_http *h);

/* The experiment config built into the binary (experiments/default.json). */
extern const char cz_default_config[];

#endif
