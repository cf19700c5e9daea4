/* main.c - the `cadenza` program: dispatches to subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_h5.h"
#include "cz_json.h"
#include "cz_kernels.h"
#include "cz_out.h"

static const char usage[] =
    "usage: cadenza <command> [options]\n"
    "\n"
    "Simulate and replay real-time LLM serving.\n"
    "\n"
    "commands:\n"
    "  sim [CONFIG.json]      run the discrete-event simulator on an experiment config\n"
    "                         (the built-in default experiment when none is given)\n"
    "  replay CONFIG.json     serve a config's workload on the real engine, in wall-clock\n"
    "                         time (CPU or CUDA backend; docs/engine.md)\n"
    "  profile CONFIG.json    time the engine's steps over a grid of batch shapes and its\n"
    "                         KV copies, for calibrating the cost model (docs/engine.md)\n"
    "  calibrate IN.h5 -o F   fit the cost model to a profile or replay results\n"
    "  validate CONFIG.json   run a config on the engine and in the simulator and report\n"
    "                         how far apart they are (docs/validation.md)\n"
    "  sweep SWEEP.json       run an experiment over a grid of overrides, one row a point\n"
    "  plot FILE -o DIR       figures (PNG, SVG) of a results file or of a sweep's rows\n"
    "  figures [--quick]      regenerate the papers' headline figures with the papers'\n"
    "                         numbers overlaid (docs/plots.md)\n"
    "  trace info FILE        statistics of a trace (requests, sessions, rate, burstiness)\n"
    "  trace convert FILE     convert a trace to cadenza's session JSONL format\n"
    "  generate               run a decoder (CPU or CUDA): greedy continuation of a prompt\n"
    "                         from a Hugging Face checkpoint or a card's random weights\n"
    "\n"
    "options:\n"
    "  -h, --help             this help; `cadenza <command> --help` for a command's\n"
    "  -V, --version          print the version\n";

int cz_cli_fail(const cz_err *err)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg[0] ? err->msg : cz_strerror(err->status));
    cz_out_final_names(msg, sizeof msg);
    fprintf(stderr, "cadenza: %s\n", msg);
    switch (err->status) {
    case CZ_EIO:
    case CZ_ENOMEM:
    case CZ_EDEVICE: return CZ_EXIT_FAIL;
    case CZ_EINTERNAL: return CZ_EXIT_INTERNAL;
    default: return CZ_EXIT_USAGE;
    }
}

void cz_cli_blame_set(cz_err *err, const char *cfg_where, const char *const *overrides,
                      int n_overrides, int n_user)
{
    const char *fw = err->field_where;
    size_t wl = strlen(cfg_where);
    if (!err->field_key[0] || strncmp(fw, cfg_where, wl) != 0)
        return;
    /* the field's dotted path in the config: "<cfg_where>: a.b" + key, or a top-level key */
    char path[CZ_ERR_WHERE_MAX + CZ_ERR_KEY_MAX];
    if (fw[wl] == '\0')
        snprintf(path, sizeof path, "%s", err->field_key);
    else if (fw[wl] == ':' && fw[wl + 1] == ' ')
        snprintf(path, sizeof path, "%s.%s", fw + wl + 2, err->field_key);
    else
        return;
    int by = -1;
    for (int i = 0; i < n_overrides; i++)
        if (cz_json_set_covers(overrides[i], path))
            by = i;
    if (by < 0 || by >= n_user)
        return;
    /* "<where>: field 'k': expected ..." becomes "--set a.k=v: field 'k': expected ..." */
    size_t fl = strlen(fw);
    if (strncmp(err->msg, fw, fl) == 0 && err->msg[fl] == ':' && err->msg[fl + 1] == ' ')
        memmove(err->msg, err->msg + fl + 2, strlen(err->msg + fl + 2) + 1);
    cz_err_prefix(err, "--set %s: ", overrides[by]);
}

int cz_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cadenza %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'cadenza %s --help'.\n", cmd);
    return CZ_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* cJSON allocates through cz_xmalloc: exhausted memory ends the program with its
     * message (cz_base.h) instead of coming back as a NULL that reads as bad JSON. */
    cJSON_Hooks hooks = {.malloc_fn = cz_xmalloc, .free_fn = free};
    cJSON_InitHooks(&hooks);
    /* a results file whose close failed (a full disk) is removed and reported; HDF5's own
     * exit handler would crash on it */
    cz_h5_no_atexit();
    if (argc < 2) {
        fputs(usage, stderr);
        return CZ_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return CZ_EXIT_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("cadenza %s\n", cz_version());
        return CZ_EXIT_OK;
    }
    if (strcmp(cmd, "sim") == 0)
        return cz_cmd_sim(argc - 1, argv + 1);
    if (strcmp(cmd, "replay") == 0)
        return cz_cmd_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0)
        return cz_cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "sweep") == 0)
        return cz_cmd_sweep(argc - 1, argv + 1);
    if (strcmp(cmd, "trace") == 0)
        return cz_cmd_trace(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0)
        return cz_cmd_generate(argc - 1, argv + 1);
    if (strcmp(cmd, "validate") == 0)
        return cz_cmd_validate(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0)
        return cz_cmd_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "figures") == 0)
        return cz_cmd_figures(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0)
        return cz_cmd_calibrate(argc - 1, argv + 1);
    fprintf(stderr, "cadenza: unknown command '%s'\n\n%s", cmd, usage);
    return CZ_EXIT_USAGE;
}
