/* cz_cli.h - the `cadenza` command line: subcommands and shared helpers. Only this
 * layer prints errors and chooses exit codes: 0 success, 2 usage or input error, 1 any
 * other failure (such as an output file that cannot be written). */
#ifndef CZ_CLI_H
#define CZ_CLI_H

#include "cz_base.h"

enum { CZ_EXIT_OK = 0, CZ_EXIT_FAIL = 1, CZ_EXIT_USAGE = 2 };

int cz_cmd_sim(int argc, char **argv);
int cz_cmd_trace(int argc, char **argv);

/* Prints "cadenza: <msg>" to stderr and returns the exit code for `st` (1 for I/O
 * errors, 2 for everything else). */
int cz_cli_fail(const cz_err *err);

/* Prints a usage error and a hint to run --help; returns CZ_EXIT_USAGE. */
int cz_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The experiment config built into the binary (experiments/default.json). */
extern const char cz_default_config[];

#endif
