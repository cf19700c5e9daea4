/* cmd_plot.c - `cadenza plot`: the figures of a results file or of a sweep's rows
 * (plots/cz_plot.h, docs/plots.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cz_cli.h"
#include "cz_gnuplot.h"
#include "cz_plot.h"

static const char plot_usage[] =
    "usage: cadenza plot RESULTS.h5 -o DIR\n"
    "       cadenza plot POINTS.jsonl -o DIR [--x KEY] [--metric KEY]...\n"
    "\n"
    "Draws PNG and SVG figures with gnuplot (Debian: gnuplot-nox), each beside its data\n"
    "(NAME.dat) and script (NAME.gp: `gnuplot NAME.gp` in DIR redraws it).\n"
    "\n"
    "From a results file (`cadenza sim -o`, `cadenza replay -o`):\n"
    "  latency_cdf   CDFs of TTFT, TPOT, ITL per stage, E2E latency and audio TTFP\n"
    "  kv_blocks     KV blocks on the GPU and KV in host memory over time, per stage\n"
    "  load          running and waiting requests and batch tokens over time, per stage\n"
    "  frames        periodic streams: frame latency over time, empty frames marked, the\n"
    "                gateway's admission cap and live sessions\n"
    "  stage_tokens  pipelines: tokens generated and heard per stage\n"
    "From a sweep's rows (`cadenza sweep -o`): sweep_<metric> for each reported metric\n"
    "against the swept parameter, one line per combination of the other grid values,\n"
    "95 % intervals when the sweep repeated seeds, the papers' values as open circles.\n"
    "\n"
    "  -o, --output DIR     folder for the figures (created when its parent exists)\n"
    "  --x KEY              sweeps: the grid key along x (default: the numeric key with\n"
    "                       the most values)\n"
    "  --metric KEY         sweeps: draw this summary key (repeatable; default: the\n"
    "                       sweep's report list)\n"
    "  -h, --help           this help\n";

int cz_cli_output_dir(const char *cmd, const char *flag, const char *dir)
{
    struct stat sb;
    const char *why = NULL;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0777) != 0)
            why = strerror(errno);
    } else if (!S_ISDIR(sb.st_mode)) {
        why = "not a folder";
    } else if (access(dir, W_OK) != 0) {
        why = strerror(errno);
    }
    if (!why)
        return CZ_EXIT_OK;
    /* an output that cannot be written: exit 1, as every command's */
    fprintf(stderr, "cadenza %s: %s: cannot write the folder '%s' (%s)\n", cmd, flag, dir, why);
    return CZ_EXIT_FAIL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int cz_cmd_plot(int argc, char **argv)
{
    const char *in = NULL, *dir = NULL, *x = NULL;
    const char *metrics[64];
    size_t n_metrics = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(plot_usage, stdout);
            return CZ_EXIT_OK;
        }
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 || strcmp(a, "--x") == 0 ||
            strcmp(a, "--metric") == 0) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("plot", "option '%s' needs a value", a);
            const char *v = argv[++i];
            if (a[1] == 'o' || strcmp(a, "--output") == 0)
                dir = v;
            else if (strcmp(a, "--x") == 0)
                x = v;
            else if (n_metrics == CZ_ARRAY_LEN(metrics))
                return cz_cli_usage_error("plot", "--metric: at most %zu", CZ_ARRAY_LEN(metrics));
            else
                metrics[n_metrics++] = v;
        } else if (a[0] == '-' && a[1]) {
            return cz_cli_usage_error("plot", "unknown option '%s'", a);
        } else if (in) {
            return cz_cli_usage_error("plot", "one input file, got '%s' and '%s'", in, a);
        } else {
            in = a;
        }
    }
    if (!in)
        return cz_cli_usage_error("plot", "expected a results file (.h5) or sweep rows (.jsonl)");
    if (!dir)
        return cz_cli_usage_error("plot", "expected -o DIR, the folder for the figures");
    bool sweep = ends_with(in, ".jsonl") || ends_with(in, ".json");
    if (!sweep && (x || n_metrics))
        return cz_cli_usage_error("plot", "--x and --metric apply to sweep rows (.jsonl), not "
                                          "to '%s'", in);
    if (access(in, R_OK) != 0)
        return cz_cli_usage_error("plot", "input '%s': %s", in, strerror(errno));
    cz_err err = {0};
    if (cz_gp_available(&err) != CZ_OK)
        return cz_cli_fail(&err);
    int rc = cz_cli_output_dir("plot", "-o", dir);
    if (rc != CZ_EXIT_OK)
        return rc;
    cz_plot_list out = {0};
    cz_status st;
    if (sweep) {
        cJSON *rows = NULL;
        st = cz_plot_read_rows(in, &rows, &err);
        if (st == CZ_OK) {
            cz_plot_sweep_opts o = {.x = x, .metrics = n_metrics ? metrics : NULL,
                                    .n_metrics = n_metrics, .hline = NAN};
            st = cz_plot_sweep(rows, &o, dir, &out, &err);
            cJSON_Delete(rows);
        }
    } else {
        st = cz_plot_results(in, dir, &out, &err);
    }
    if (st != CZ_OK)
        return cz_cli_fail(&err);
    for (size_t i = 0; i < out.n; i++)
        printf("%s/%s.png  %s/%s.svg\n", dir, out.names[i], dir, out.names[i]);
    return CZ_EXIT_OK;
}
