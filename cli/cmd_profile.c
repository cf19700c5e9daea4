/* cmd_profile.c - `cadenza profile`: time the engine's forward passes over a grid of batch
 * shapes for every stage of a config's model, and the host link's KV copies, into an HDF5
 * file for calibrating the cost model (engine/cz_profile.h, docs/engine.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cz_cli.h"
#include "cz_wall.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_profile.h"
#include "cz_version.h"

static const char profile_usage[] =
    "usage: cadenza profile CONFIG.json -o profile.h5 [--set key=value]...\n"
    "                       [--backend cpu|cuda] [--threads N] [--quick] [--repeats R]\n"
    "                       [--no-progress]\n"
    "\n"
    "Time the real engine's forward passes over a grid of batch shapes, for calibrating the\n"
    "cost model (docs/engine.md, \"Profiling\"). Every stage of the config's model is built\n"
    "as `cadenza replay` builds it (the config's `engine` object: weights, dtype, kv_dtype,\n"
    "threads) on one device, and each shape runs alone: decoder stages over a paged KV pool\n"
    "(prefill chunks after a cached prefix, decode batches, decodes mixed with a prefill\n"
    "chunk; a code predictor's steps), encoders and vocoders over jobs x tokens; then KV\n"
    "copies between the pool and host memory, both ways. The grid follows the config's\n"
    "step budget, sequence cap and context cap.\n"
    "\n"
    "  -o, --output FILE    the HDF5 profile (required): /shapes, one row a shape (its\n"
    "                       cz_batch_shape, median, p10 and p90 of the step time, the cost\n"
    "                       model's prediction), /transfers, the machine as attributes\n"
    "  --set key=value      override a config field (repeatable)\n"
    "  --backend NAME       kernel backend: cpu (default) or cuda (CUDA device 0; a build\n"
    "                       with -Dcuda)\n"
    "  --threads N          CPU threads (default: what one device of a replay gets:\n"
    "                       engine.threads, else every CPU, split over sim.n_gpus)\n"
    "  --quick              a small grid and 3 repeats (about 14 s for tiny-llama on 2\n"
    "                       cores, where the full grid takes two minutes)\n"
    "  --repeats R          rounds over the grid, each timing every shape once after\n"
    "                       its warm-up (default 5, quick 3)\n"
    "  --no-progress        no progress line\n"
    "  -h, --help           this help\n"
    "\n"
    "Prints, per stage and class, the shapes measured and how the cost model's predictions\n"
    "compare with the medians.\n";

typedef struct prof_progress {
    bool tty;
    double t0, last;
} prof_progress;

/* A live line on a terminal (4 updates a second), a plain line every 5 s otherwise. */
static void print_progress(void *ctx, uint32_t stage, const char *name, uint32_t done,
                           uint32_t total)
{
    prof_progress *c = ctx;
    double now = cz_wall_s();
    bool end = done == total;
    if (!end && now - c->last < (c->tty ? 0.25 : 5.0))
        return;
    c->last = now;
    (void)stage;
    if (c->tty || !end)
        fprintf(stderr, "%sprofile %-12s %u/%u passes  %.1f s%s", c->tty ? "\r" : "",
                end ? "done" : name, done, total, now - c->t0, c->tty ? "\033[K" : "\n");
    if (c->tty && end)
        fputc('\n', stderr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Per stage and class: shapes, the range of medians, and the median of measured /
 * predicted. */
static void print_summary(const cz_profile *p, const char *out)
{
    double *ratio = cz_xmalloc((p->n_rows ? p->n_rows : 1) * sizeof *ratio);
    printf("cadenza %s  profile of %zu shapes and %zu copies on %s (%u thread%s%s%s) in %.1f s"
           " -> %s\n",
           cz_version(), p->n_rows, p->n_xfers, p->backend, p->threads,
           p->threads == 1 ? "" : "s", p->device[0] ? ", " : "", p->device, p->wall_s, out);
    printf("  %-14s %-8s %6s %12s %12s %18s\n", "stage", "class", "shapes", "min med ms",
           "max med ms", "measured/model p50");
    for (size_t i = 0; i < p->n_rows;) {
        size_t j = i;
        double lo = INFINITY, hi = 0;
        uint32_t n = 0;
        while (j < p->n_rows && p->rows[j].stage == p->rows[i].stage &&
               p->rows[j].cls == p->rows[i].cls) {
            const cz_profile_row *r = &p->rows[j];
            lo = fmin(lo, r->t.median_s);
            hi = fmax(hi, r->t.median_s);
            if (r->predicted_s > 0)
                ratio[n++] = r->t.median_s / r->predicted_s;
            j++;
        }
        qsort(ratio, n, sizeof *ratio, cmp_double);
        printf("  %-14s %-8s %6zu %12.3f %12.3f %18.3g\n", p->rows[i].stage_name,
               cz_profile_class_name((cz_profile_class)p->rows[i].cls), j - i, lo * 1e3,
               hi * 1e3, n ? ratio[n / 2] : NAN);
        i = j;
    }
    free(ratio);
}

static int parse_count(const char *flag, const char *v, unsigned long most, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long t = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || t == 0 || t > most)
        return cz_cli_usage_error("profile", "option '%s': expected a count from 1 to %lu, got "
                                  "'%s'", flag, most, v);
    *out = (uint32_t)t;
    return CZ_EXIT_OK;
}

int cz_cmd_profile(int argc, char **argv)
{
    const char *config_path = NULL, *out_h5 = NULL;
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    int n_sets = 0, rc = CZ_EXIT_OK;
    bool show_progress = true;
    cz_profile_opts opts = {.backend = "cpu"};
    for (int i = 1; i < argc && rc == CZ_EXIT_OK; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(profile_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--set") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--output") == 0 || strcmp(a, "--backend") == 0 ||
                   strcmp(a, "--threads") == 0 || strcmp(a, "--repeats") == 0) {
            if (i + 1 >= argc) {
                rc = cz_cli_usage_error("profile", "option '%s' needs a value", a);
                break;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--set") == 0)
                sets[n_sets++] = v;
            else if (strcmp(a, "--backend") == 0) {
                if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                    rc = cz_cli_usage_error("profile", "option '--backend': expected cpu or "
                                            "cuda, got '%s'", v);
                opts.backend = v;
            } else if (strcmp(a, "--threads") == 0)
                rc = parse_count(a, v, 1024, &opts.threads);
            else if (strcmp(a, "--repeats") == 0)
                rc = parse_count(a, v, 1000, &opts.repeats);
            else
                out_h5 = v;
        } else if (strcmp(a, "--quick") == 0) {
            opts.quick = true;
        } else if (strcmp(a, "--no-progress") == 0) {
            show_progress = false;
        } else if (a[0] == '-') {
            rc = cz_cli_usage_error("profile", "unknown option '%s'", a);
        } else if (!config_path) {
            config_path = a;
        } else {
            rc = cz_cli_usage_error("profile", "more than one config given ('%s', '%s')",
                                    config_path, a);
        }
    }
    if (rc == CZ_EXIT_OK && !config_path)
        rc = cz_cli_usage_error("profile",
                                "a config is required (e.g. experiments/engine/cpu.json)");
    if (rc == CZ_EXIT_OK && !out_h5)
        rc = cz_cli_usage_error("profile", "an output file is required (-o profile.h5)");
    if (rc != CZ_EXIT_OK) {
        free(sets);
        return rc;
    }

    cz_err err;
    cz_err_clear(&err);
    cJSON *cfg_json = NULL;
    char *base_dir = NULL, *cfg_text = NULL;
    cz_config cfg;
    cz_workload wl;
    cz_workload_init(&wl);
    cz_profile prof;
    memset(&prof, 0, sizeof prof);
    const char *tmp_h5 = NULL;
    cz_status st = cz_cli_load_config(config_path, sets, n_sets, &cfg_json, &base_dir, &err);
    /* the output gets its temporary now, so an unwritable one fails before the run */
    if (st == CZ_OK)
        st = cz_out_add("-o", out_h5, &tmp_h5, &err);
    if (st == CZ_OK) {
        /* the config as replay reads it (its workload is built and checked too) */
        st = cz_config_parse(cfg_json, config_path, base_dir, &cfg, &wl, &err);
        if (st != CZ_OK)
            cz_cli_blame_set(&err, config_path, sets, n_sets, n_sets);
    }
    if (st == CZ_OK) {
        prof_progress pc = {isatty(STDERR_FILENO) == 1, cz_wall_s(), 0};
        opts.progress = show_progress ? print_progress : NULL;
        opts.progress_ctx = &pc;
        st = cz_profile_run(&cfg, &opts, &prof, &err);
    }
    if (st == CZ_OK) {
        cfg_text = cJSON_PrintUnformatted(cfg_json);
        cz_profile_meta meta = {.config_path = config_path, .config_json = cfg_text,
                                .quick = opts.quick};
        st = cz_profile_write_h5(tmp_h5, &prof, &cfg, &meta, &err);
    }
    if (st == CZ_OK)
        st = cz_out_commit(&err);
    if (st == CZ_OK)
        print_summary(&prof, out_h5);
    else
        rc = cz_cli_fail(&err);
    cz_out_discard();
    cz_profile_free(&prof);
    cz_workload_free(&wl);
    cJSON_free(cfg_text);
    cJSON_Delete(cfg_json);
    free(base_dir);
    free(sets);
    return rc;
}
