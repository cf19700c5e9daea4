/* cz_cli.h - the `cadenza` command line: subcommands and shared helpers. Only this
 * layer prints errors and chooses exit codes: 0 success, 2 usage or input error, 1 any
 * other failure (such as an output file that cannot be written or memory exhausted),
 * 3 an internal error (a run that lost track of a request: a bug, with its evidence). */
#ifndef CZ_CLI_H
#define CZ_CLI_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_sim.h"

enum { CZ_EXIT_OK = 0, CZ_EXIT_FAIL = 1, CZ_EXIT_USAGE = 2, CZ_EXIT_INTERNAL = 3 };

int cz_cmd_sim(int argc, char **argv);
int cz_cmd_sweep(int argc, char **argv);
int cz_cmd_trace(int argc, char **argv);

/* Parses and simulates one experiment config. On success: *cfg, *m (caller frees with
 * cz_metrics_free), *sum and *summary (the JSON summary with the config, seed and version;
 * caller deletes) are filled and *wall_s is the simulation's wall time. */
cz_status cz_cli_simulate(const cJSON *cfg_json, const char *where, const char *base_dir,
                          bool progress, cz_sim_config *cfg, cz_metrics *m, cz_summary *sum,
                          cz_sim_stats *stats, cJSON **summary, double *wall_s, cz_err *err);

/* The folder of `path` ("." when it has none); caller frees. */
char *cz_cli_dir_of(const char *path);

/* Prints "cadenza: <msg>" to stderr and returns the exit code for `st` (1 for I/O
 * errors and exhausted memory, 3 for internal errors, 2 for everything else). */
int cz_cli_fail(const cz_err *err);

/* Prints a usage error and a hint to run --help; returns CZ_EXIT_USAGE. */
int cz_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The experiment config built into the binary (experiments/default.json). */
extern const char cz_default_config[];

#endif
