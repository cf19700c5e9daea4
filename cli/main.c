/* main.c - the `cadenza` program: dispatches to subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_h5.h"

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
    "  serve CONFIG.json      an OpenAI-compatible HTTP endpoint in front of the config's\n"
    "                         deployment, steps timed by the cost model (docs/serve.md)\n"
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
    "  cards                  list the model and hardware cards shipped\n"
    "  card DIR -o card.json  a model card from a Hugging Face checkpoint's config.json\n"
    "  generate               run a decoder (CPU or CUDA): greedy continuation of a prompt\n"
    "                         from a Hugging Face checkpoint or a card's random weights\n"
    "\n"
    "options:\n"
    "  -h, --help             this help; `cadenza <command> --help` for a command's\n"
    "  -V, --version          print the version\n";

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
    if (strcmp(cmd, "serve") == 0)
        return cz_cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0)
        return cz_cmd_calibrate(argc - 1, argv + 1);
    if (strcmp(cmd, "cards") == 0)
        return cz_cmd_cards(argc - 1, argv + 1);
    if (strcmp(cmd, "card") == 0)
        return cz_cmd_card(argc - 1, argv + 1);
    fprintf(stderr, "cadenza: unknown command '%s'\n\n%s", cmd, usage);
    return CZ_EXIT_USAGE;
}
