/* cmd_plot.c - `cadenza plot`: the figures of a results file or of a sweep's rows
 * (plots/cz_plot.h, docs/plots.md). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cz_cli.h"
#include "cz_gnuplot.h"
#include "cz_h5read.h"
#include "cz_json.h"
#include "cz_plot.h"

static const char plot_usage[] =
    "usage: cadenza plot RESULTS.h5 -o DIR [--base CONFIG.json]\n"
    "       cadenza plot POINTS.jsonl -o DIR [--x KEY] [--metric KEY]...\n"
    "                    [--base CONFIG.json]\n"
    "\n"
    "Draws PNG and SVG figures with gnuplot (Debian: gnuplot-nox), each beside its data\n"
    "(NAME.dat) and script (NAME.gp: `gnuplot NAME.gp` in DIR redraws it).\n"
    "\n"
    "From a results file (`cadenza sim -o`, `cadenza replay -o`):\n"
    "  latency_cdf   CDFs of TTFT, TPOT, ITL per stage, E2E latency and audio TTFP\n"
    "  kv_blocks     KV blocks on the GPU and KV in host memory over time, per stage\n"
    "  load          running and waiting requests and batch tokens over time, per stage\n"
    "                (a stage of more than 8 replicas: per time bin, the 10-90 % band,\n"
    "                median and max over its replicas, and the fleet's totals)\n"
    "  replica_balance  fleets: each replica's time-averaged running requests and KV\n"
    "                use, sorted, against the fleet's mean\n"
    "  frames        periodic streams: frame latency over time, empty frames marked, the\n"
    "                gateway's admission cap and live sessions\n"
    "  stage_tokens  pipelines: tokens generated and heard per stage\n"
    "From a sweep's rows (`cadenza sweep -o`): sweep_<metric> for each reported metric\n"
    "against the swept parameter, one line per combination of the other grid values,\n"
    "95 % intervals when the sweep repeated seeds, the papers' values as open markers.\n"
    "\n"
    "  -o, --output DIR     folder for the figures (created when its parent exists)\n"
    "  --base CONFIG.json   the config the run (a sweep: its base) started from; titles\n"
    "                       show what the run's config changed from it (default: the\n"
    "                       shipped experiment of the run's config name, if any)\n"
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

static int json_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* The shipped experiment named `name`: a config (not a sweep, not a figure list) among the
 * JSON files of the data folder's experiments/ and its folders, searched in name order.
 * Returns it (caller deletes) with *label its path from the data folder, or NULL. */
static cJSON *shipped_config(const char *name, char *label, size_t n)
{
    char data[1024], top[1200];
    cz_data_dir(data, sizeof data);
    snprintf(top, sizeof top, "%s/experiments", data);
    cJSON *found = NULL;
    struct dirent **ents = NULL;
    int ne = scandir(top, &ents, json_entry, alphasort);
    /* depth 0: the files of experiments/ and its folders; depth 1: their files */
    for (int i = 0; i < ne && !found; i++) {
        char sub[1500];
        snprintf(sub, sizeof sub, "%s/%s", top, ents[i]->d_name);
        struct dirent **files = NULL;
        int nf = ends_with(sub, ".json") ? 0 : scandir(sub, &files, json_entry, alphasort);
        for (int k = -1; k < nf && !found; k++) {
            char path[2100], rel[600];
            if (k < 0)
                snprintf(rel, sizeof rel, "%s", ents[i]->d_name);
            else
                snprintf(rel, sizeof rel, "%s/%s", ents[i]->d_name, files[k]->d_name);
            snprintf(path, sizeof path, "%s/%s", top, rel);
            if (!ends_with(path, ".json"))
                continue;
            cz_err e = {0};
            cJSON *j = NULL;
            if (cz_json_load(path, &j, &e) != CZ_OK)
                continue;
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0 &&
                !cJSON_HasObjectItem(j, "grid") && !cJSON_HasObjectItem(j, "figures")) {
                found = j;
                snprintf(label, n, "experiments/%s", rel);
            } else {
                cJSON_Delete(j);
            }
        }
        for (int k = 0; k < nf; k++)
            free(files[k]);
        free(files);
    }
    for (int i = 0; i < ne; i++)
        free(ents[i]);
    free(ents);
    return found;
}

/* The name of the config a results file or the first sweep row ran, or NULL. */
static char *run_config_name(const char *in, const cJSON *rows)
{
    cJSON *sum = NULL;
    const cJSON *s;
    if (rows) {
        const cJSON *r0 = cJSON_GetArrayItem(rows, 0);
        s = cJSON_GetObjectItemCaseSensitive(r0, "summary");
        if (!s)
            s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r0, "summaries"), 0);
    } else {
        char *text = NULL;
        cz_err e = {0};
        if (cz_h5_read_str_attr(in, "summary", &text, &e) != CZ_OK)
            return NULL;
        sum = cJSON_Parse(text);
        free(text);
        s = sum;
    }
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "config"),
                                                       "name");
    char *name = cJSON_IsString(nm) ? cz_xstrdup(nm->valuestring) : NULL;
    cJSON_Delete(sum);
    return name;
}

int cz_cmd_plot(int argc, char **argv)
{
    const char *in = NULL, *dir = NULL, *x = NULL, *base_path = NULL;
    const char *metrics[64];
    size_t n_metrics = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(plot_usage, stdout);
            return CZ_EXIT_OK;
        }
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 || strcmp(a, "--x") == 0 ||
            strcmp(a, "--metric") == 0 || strcmp(a, "--base") == 0) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("plot", "option '%s' needs a value", a);
            const char *v = argv[++i];
            if (a[1] == 'o' || strcmp(a, "--output") == 0)
                dir = v;
            else if (strcmp(a, "--x") == 0)
                x = v;
            else if (strcmp(a, "--base") == 0)
                base_path = v;
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
    cJSON *base = NULL;
    char base_label[1100] = "";
    if (base_path) {
        if (cz_file_check_input(base_path, &err) != CZ_OK ||
            cz_json_load(base_path, &base, &err) != CZ_OK) {
            cz_err_prefix(&err, "--base: ");
            return cz_cli_fail(&err);
        }
        if (!cJSON_IsObject(base)) {
            cJSON_Delete(base);
            return cz_cli_usage_error("plot", "--base '%s': expected a config (a JSON object)",
                                      base_path);
        }
        snprintf(base_label, sizeof base_label, "%s", base_path);
    }
    if (cz_gp_available(&err) != CZ_OK) {
        cJSON_Delete(base);
        return cz_cli_fail(&err);
    }
    int rc = cz_cli_output_dir("plot", "-o", dir);
    if (rc != CZ_EXIT_OK) {
        cJSON_Delete(base);
        return rc;
    }
    cz_plot_list out = {0};
    cz_status st = CZ_OK;
    cJSON *rows = NULL;
    if (sweep)
        st = cz_plot_read_rows(in, &rows, &err);
    if (st == CZ_OK && !base) {
        /* the run's config by name among the shipped experiments, when it is one */
        char *name = run_config_name(in, rows);
        if (name)
            base = shipped_config(name, base_label, sizeof base_label);
        free(name);
    }
    if (st == CZ_OK && sweep) {
        cz_plot_sweep_opts o = {.x = x, .metrics = n_metrics ? metrics : NULL,
                                .n_metrics = n_metrics, .hline = NAN, .base = base,
                                .base_name = base_label};
        st = cz_plot_sweep(rows, &o, dir, &out, &err);
    } else if (st == CZ_OK) {
        st = cz_plot_results(in, base, base_label, dir, &out, &err);
    }
    cJSON_Delete(rows);
    cJSON_Delete(base);
    if (st != CZ_OK)
        return cz_cli_fail(&err);
    for (size_t i = 0; i < out.n; i++)
        printf("%s/%s.png  %s/%s.svg\n", dir, out.names[i], dir, out.names[i]);
    return CZ_EXIT_OK;
}
