/* cmd_figures.c - `cadenza figures`: regenerates each paper's headline figure from the
 * shipped experiments, with the paper's numbers overlaid, and says whether ours shows the
 * paper's direction (experiments/figures.json lists them; docs/plots.md). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cz_cli.h"
#include "cz_wall.h"
#include "cz_gnuplot.h"
#include "cz_json.h"
#include "cz_plot.h"

static const char figures_usage[] =
    "usage: cadenza figures [--quick] [-o DIR] [--only NAME]... [--spec FILE] [--check]\n"
    "\n"
    "Regenerates each paper's headline figure from the shipped experiments (the list is\n"
    "experiments/figures.json): runs the experiment, draws ours with gnuplot beside the\n"
    "paper's values (open circles) and says whether ours shows the paper's direction.\n"
    "Files are named after the paper (liveserve_..., voxserve_..., metronome_..., bros_...,\n"
    "nova_...): NAME.png, NAME.svg, NAME.gp and NAME.dat, and figures.json with each\n"
    "figure's verdict.\n"
    "\n"
    "  --quick              reduced runs (fewer points and requests): seconds in all\n"
    "  -o, --output DIR     folder for the figures (default: figures; created when its\n"
    "                       parent exists)\n"
    "  --only NAME          only this figure (repeatable)\n"
    "  --spec FILE          another list of figures (default: the shipped one)\n"
    "  --check              exit 1 when a figure does not show the paper's direction\n"
    "  -h, --help           this help\n";

/* Most runs of one figure and most overrides of one run. */
#define FIG_MAX_RUNS 8
#define FIG_MAX_SETS 16

/* Runs `cmd` (argv[0] its name) in a child process with its stdout discarded, so its
 * tables do not mix with ours and its output registrations end with it. Returns its exit
 * status (CZ_EXIT_FAIL when it could not run or died). */
static int run_child(int (*cmd)(int, char **), int argc, char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return CZ_EXIT_FAIL;
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(CZ_EXIT_FAIL);
        int rc = cmd(argc, argv);
        fflush(NULL);
        _exit(rc);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : CZ_EXIT_FAIL;
}

/* The value of `metric` at x = `at` on the rows matching `sel` (NaN: no such row). */
static double value_at(const cJSON *rows, const char *x, double at, const cJSON *sel,
                       const char *metric)
{
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(row, "point");
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(pt, x);
        if (cJSON_IsNumber(xv) && xv->valuedouble == at && cz_plot_point_matches(pt, sel))
            return cz_plot_row_value(row, metric, NULL, NULL);
    }
    return NAN;
}

/* The largest x up to which every point of the rows matching `sel` is at most
 * `threshold` (-inf when the first is above it). */
static double reach(const cJSON *rows, const char *x, const cJSON *sel, const char *metric,
                    double threshold)
{
    double xs[256], ys[256];
    size_t n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(row, "point");
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(pt, x);
        if (n < 256 && cJSON_IsNumber(xv) && cz_plot_point_matches(pt, sel)) {
            xs[n] = xv->valuedouble;
            ys[n++] = cz_plot_row_value(row, metric, NULL, NULL);
        }
    }
    for (size_t i = 1; i < n; i++) /* insertion sort by x */
        for (size_t j = i; j > 0 && xs[j] < xs[j - 1]; j--) {
            double tx = xs[j], ty = ys[j];
            xs[j] = xs[j - 1];
            ys[j] = ys[j - 1];
            xs[j - 1] = tx;
            ys[j - 1] = ty;
        }
    double r = -INFINITY;
    for (size_t i = 0; i < n && ys[i] <= threshold; i++)
        r = xs[i];
    return r;
}

static void sel_label(const cJSON *sel, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    const cJSON *it;
    cJSON_ArrayForEach(it, sel)
    {
        char *v = cz_json_value_label(it);
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? " " : "", v);
        free(v);
    }
}

/* Whether the rows show the direction `dir` (see experiments/figures.json's description);
 * `ours` gets the numbers it compared. CZ_EINVAL naming the figure on a bad direction. */
static cz_status sweep_direction(const char *fig, const cJSON *rows, const char *x,
                                 const char *metric, const cJSON *dir, bool *as_paper,
                                 char *ours, size_t n, cz_err *err)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(dir, "kind");
    const cJSON *better = cJSON_GetObjectItemCaseSensitive(dir, "better");
    const cJSON *than = cJSON_GetObjectItemCaseSensitive(dir, "than");
    if (!cJSON_IsString(kind) || !cJSON_IsObject(better))
        return cz_err_set(err, CZ_EINVAL,
                          "figure '%s': direction: expected \"kind\" and a \"better\" object",
                          fig);
    double max_x = -INFINITY, min_x = INFINITY;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(row, "point"), x);
        if (cJSON_IsNumber(xv)) {
            max_x = fmax(max_x, xv->valuedouble);
            min_x = fmin(min_x, xv->valuedouble);
        }
    }
    char bl[96];
    sel_label(better, bl, sizeof bl);
    const char *k = kind->valuestring;
    if (strcmp(k, "rises") == 0) {
        double a = value_at(rows, x, min_x, better, metric);
        double b = value_at(rows, x, max_x, better, metric);
        *as_paper = isfinite(a) && isfinite(b) && b > a;
        snprintf(ours, n, "%s%s%s %.4g at %s = %g -> %.4g at %g", bl, bl[0] ? ": " : "", metric, a,
                 x, min_x, b, max_x);
        return CZ_OK;
    }
    if (!cJSON_IsArray(than) || cJSON_GetArraySize(than) < 1)
        return cz_err_set(err, CZ_EINVAL, "figure '%s': direction: expected \"than\": an array "
                                          "of selectors",
                          fig);
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(dir, "at");
    double at_x = cJSON_IsNumber(at) ? at->valuedouble : max_x;
    const cJSON *thr = cJSON_GetObjectItemCaseSensitive(dir, "threshold");
    bool reach_kind = strcmp(k, "reaches_further") == 0;
    if (reach_kind && !cJSON_IsNumber(thr))
        return cz_err_set(err, CZ_EINVAL, "figure '%s': direction reaches_further: expected a "
                                          "numeric \"threshold\"",
                          fig);
    if (!reach_kind && strcmp(k, "lower") != 0 && strcmp(k, "higher") != 0)
        return cz_err_set(err, CZ_EINVAL, "figure '%s': direction kind '%s': expected lower, "
                                          "higher, reaches_further or rises",
                          fig, k);
    double vb = reach_kind ? reach(rows, x, better, metric, thr->valuedouble)
                           : value_at(rows, x, at_x, better, metric);
    size_t len = (size_t)snprintf(ours, n, reach_kind ? "%s reaches %.4g" : "%s %.4g", bl, vb);
    bool ok = reach_kind ? true : isfinite(vb);
    const cJSON *t;
    cJSON_ArrayForEach(t, than)
    {
        char tl[96];
        sel_label(t, tl, sizeof tl);
        double vt = reach_kind ? reach(rows, x, t, metric, thr->valuedouble)
                               : value_at(rows, x, at_x, t, metric);
        if (reach_kind)
            ok &= vb > vt;
        else if (strcmp(k, "lower") == 0)
            ok &= isfinite(vt) && vb < vt;
        else
            ok &= isfinite(vt) && vb > vt;
        if (len < n)
            len += (size_t)snprintf(ours + len, n - len, ", %s %.4g", tl, vt);
    }
    if (len < n && reach_kind)
        snprintf(ours + len, n - len, " (%s <= %g)", metric, thr->valuedouble);
    else if (len < n)
        snprintf(ours + len, n - len, " (%s at %s = %g)", metric, x, at_x);
    *as_paper = ok;
    return CZ_OK;
}

/* Builds the argument vector of a child command: fixed words then --set pairs. */
typedef struct argv_buf {
    int argc;
    char *argv[8 + 2 * FIG_MAX_SETS + 2];
} argv_buf;

static void arg_add(argv_buf *a, const char *s)
{
    CZ_ASSERT(a->argc + 1 < (int)CZ_ARRAY_LEN(a->argv));
    a->argv[a->argc++] = (char *)s;
    a->argv[a->argc] = NULL;
}

static cz_status add_sets(argv_buf *a, const cJSON *sets, const char *fig, cz_err *err)
{
    const cJSON *s;
    int n = 0;
    cJSON_ArrayForEach(s, sets)
    {
        if (!cJSON_IsString(s) || ++n > FIG_MAX_SETS)
            return cz_err_set(err, CZ_EINVAL, "figure '%s': \"set\": expected at most %d "
                                              "key=value strings",
                              fig, FIG_MAX_SETS);
        arg_add(a, "--set");
        arg_add(a, s->valuestring);
    }
    return CZ_OK;
}

/* A sweep figure: the sweep file rewritten with the figure's grid and seeds (the quick
 * ones under --quick), run, and drawn. */
static cz_status fig_sweep(const cJSON *fig, const char *name, const char *spec_dir,
                           const char *tmp, const char *dir, bool quick, bool *as_paper,
                           char *ours, size_t ours_n, double *run_s, cz_err *err)
{
    const char *sweep_rel = NULL, *x = NULL, *metric = NULL;
    cz_status st;
    if ((st = cz_json_str(fig, name, "sweep", true, &sweep_rel, err)) != CZ_OK ||
        (st = cz_json_str(fig, name, "x", true, &x, err)) != CZ_OK ||
        (st = cz_json_str(fig, name, "metric", true, &metric, err)) != CZ_OK)
        return st;
    char sweep_path[1024];
    char *sp = cz_path_resolve(spec_dir, sweep_rel);
    snprintf(sweep_path, sizeof sweep_path, "%s", sp);
    free(sp);
    cJSON *sw = NULL;
    if ((st = cz_json_load(sweep_path, &sw, err)) != CZ_OK)
        return cz_err_prefix(err, "figure '%s': sweep: ", name);
    /* base made absolute: the rewritten sweep lives in the temporary folder */
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(sw, "base");
    char *sdir = cz_cli_dir_of(sweep_path);
    char *base_rel = cJSON_IsString(base) ? cz_path_resolve(sdir, base->valuestring) : NULL;
    char *base_abs = base_rel ? realpath(base_rel, NULL) : NULL;
    free(sdir);
    free(base_rel);
    if (!base_abs) {
        st = cz_err_set(err, CZ_EINVAL, "%s: field 'base': expected the path of an experiment",
                        sweep_path);
        cJSON_Delete(sw);
        return st;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(sw, "base", cJSON_CreateString(base_abs));
    free(base_abs);
    const cJSON *q = quick ? cJSON_GetObjectItemCaseSensitive(fig, "quick") : NULL;
    const cJSON *grid = cJSON_GetObjectItemCaseSensitive(sw, "grid");
    const cJSON *layers[2] = {cJSON_GetObjectItemCaseSensitive(fig, "grid"),
                              cJSON_GetObjectItemCaseSensitive(q, "grid")};
    for (int l = 0; l < 2; l++) {
        const cJSON *g;
        cJSON_ArrayForEach(g, layers[l])
        {
            if (cJSON_IsNull(g)) {
                cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)grid, g->string);
                continue;
            }
            if (!cJSON_HasObjectItem(grid, g->string)) {
                cJSON_Delete(sw);
                return cz_err_set(err, CZ_EINVAL, "figure '%s': grid.%s: not a grid key of %s",
                                  name, g->string, sweep_path);
            }
            cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)grid, g->string,
                                                   cJSON_Duplicate(g, 1));
        }
    }
    const cJSON *seeds = cJSON_GetObjectItemCaseSensitive(q, "seeds");
    if (!seeds)
        seeds = cJSON_GetObjectItemCaseSensitive(fig, "seeds");
    if (seeds) {
        cJSON_DeleteItemFromObjectCaseSensitive(sw, "seeds");
        cJSON_AddItemToObject(sw, "seeds", cJSON_Duplicate(seeds, 1));
    }
    cJSON *paper_values = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(sw, "paper_values"), 1);
    char sw_tmp[1200], rows_tmp[1200];
    snprintf(sw_tmp, sizeof sw_tmp, "%s/%s.sweep.json", tmp, name);
    snprintf(rows_tmp, sizeof rows_tmp, "%s/%s.jsonl", tmp, name);
    st = cz_json_write_file(sw, sw_tmp, true, err);
    cJSON_Delete(sw);
    if (st != CZ_OK) {
        cJSON_Delete(paper_values);
        return st;
    }
    argv_buf a = {0};
    arg_add(&a, "sweep");
    arg_add(&a, sw_tmp);
    arg_add(&a, "-o");
    arg_add(&a, rows_tmp);
    arg_add(&a, "--quiet");
    if ((st = add_sets(&a, cJSON_GetObjectItemCaseSensitive(fig, "set"), name, err)) != CZ_OK ||
        (st = add_sets(&a, cJSON_GetObjectItemCaseSensitive(q, "set"), name, err)) != CZ_OK) {
        cJSON_Delete(paper_values);
        return st;
    }
    double t0 = cz_wall_s();
    int rc = run_child(cz_cmd_sweep, a.argc, a.argv);
    *run_s = cz_wall_s() - t0;
    if (rc != CZ_EXIT_OK) {
        cJSON_Delete(paper_values);
        return cz_err_set(err, rc == CZ_EXIT_USAGE ? CZ_EINVAL : CZ_EIO,
                          "figure '%s': `cadenza sweep %s` failed (exit %d; its message is "
                          "above)",
                          name, sweep_path, rc);
    }
    cJSON *rows = NULL;
    if ((st = cz_plot_read_rows(rows_tmp, &rows, err)) != CZ_OK) {
        cJSON_Delete(paper_values);
        return st;
    }
    /* the rows carry what the sweep reports and the paper's values for the figure */
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "name", name);
    cJSON *rep = cJSON_AddArrayToObject(info, "report");
    cJSON_AddItemToArray(rep, cJSON_CreateString(metric));
    if (paper_values)
        cJSON_AddItemToObject(info, "paper_values", paper_values);
    cJSON *row0 = cJSON_GetArrayItem(rows, 0);
    cJSON_DeleteItemFromObjectCaseSensitive(row0, "sweep");
    cJSON_AddItemToObject(row0, "sweep", info);
    const cJSON *xl = cJSON_GetObjectItemCaseSensitive(fig, "xlabel");
    const cJSON *yl = cJSON_GetObjectItemCaseSensitive(fig, "ylabel");
    const cJSON *ys = cJSON_GetObjectItemCaseSensitive(fig, "y_scale");
    const cJSON *logy = cJSON_GetObjectItemCaseSensitive(fig, "logy");
    const cJSON *hl = cJSON_GetObjectItemCaseSensitive(fig, "hline");
    const cJSON *hll = cJSON_GetObjectItemCaseSensitive(fig, "hline_label");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(fig, "title");
    const cJSON *says = cJSON_GetObjectItemCaseSensitive(fig, "paper_says");
    char note[400];
    snprintf(note, sizeof note, "paper: %s%s", cJSON_IsString(says) ? says->valuestring : "",
             quick ? "   [--quick: reduced runs]" : "");
    const char *metrics[1] = {metric};
    cz_plot_sweep_opts o = {
        .x = x,
        .metrics = metrics,
        .n_metrics = 1,
        .where = cJSON_GetObjectItemCaseSensitive(fig, "where"),
        .name = name,
        .title = cJSON_IsString(title) ? title->valuestring : NULL,
        .xlabel = cJSON_IsString(xl) ? xl->valuestring : NULL,
        .ylabel = cJSON_IsString(yl) ? yl->valuestring : NULL,
        .note = note,
        .y_scale = cJSON_IsNumber(ys) ? ys->valuedouble : 1.0,
        .logy = cJSON_IsTrue(logy),
        .hline = cJSON_IsNumber(hl) ? hl->valuedouble : NAN,
        .hline_label = cJSON_IsString(hll) ? hll->valuestring : NULL,
    };
    cz_plot_list out = {0};
    st = cz_plot_sweep(rows, &o, dir, &out, err);
    if (st == CZ_OK)
        st = sweep_direction(name, rows, x, metric,
                             cJSON_GetObjectItemCaseSensitive(fig, "direction"), as_paper, ours,
                             ours_n, err);
    cJSON_Delete(rows);
    remove(sw_tmp);
    remove(rows_tmp);
    return st;
}

/* A figure of runs: each run's /timeline column over time, and a summary key compared. */
static cz_status fig_runs(const cJSON *fig, const char *name, const char *spec_dir,
                          const char *tmp, const char *dir, bool quick, bool *as_paper,
                          char *ours, size_t ours_n, double *run_s, cz_err *err)
{
    const char *column = NULL;
    cz_status st = cz_json_str(fig, name, "column", true, &column, err);
    if (st != CZ_OK)
        return st;
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(fig, "runs");
    int nr = cJSON_GetArraySize(runs);
    if (!cJSON_IsArray(runs) || nr < 1 || nr > FIG_MAX_RUNS)
        return cz_err_set(err, CZ_EINVAL, "figure '%s': \"runs\": expected 1 to %d runs", name,
                          FIG_MAX_RUNS);
    const cJSON *dir_spec = cJSON_GetObjectItemCaseSensitive(fig, "direction");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(dir_spec, "key");
    const cJSON *better = cJSON_GetObjectItemCaseSensitive(dir_spec, "better");
    const cJSON *than = cJSON_GetObjectItemCaseSensitive(dir_spec, "than");
    if (!cJSON_IsString(key) || !cJSON_IsString(better) || !cJSON_IsString(than))
        return cz_err_set(err, CZ_EINVAL, "figure '%s': direction: expected \"key\", \"better\" "
                                          "and \"than\" (run labels)",
                          name);
    const cJSON *q = quick ? cJSON_GetObjectItemCaseSensitive(fig, "quick") : NULL;
    const cJSON *ys = cJSON_GetObjectItemCaseSensitive(fig, "y_scale");
    double scale = cJSON_IsNumber(ys) ? ys->valuedouble : 1.0;
    const cJSON *yl = cJSON_GetObjectItemCaseSensitive(fig, "ylabel");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(fig, "title");
    const cJSON *says = cJSON_GetObjectItemCaseSensitive(fig, "paper_says");
    cz_gp_figure f;
    cz_gp_figure_init(&f, cJSON_IsString(title) ? title->valuestring : name, 1, 1);
    snprintf(f.note, sizeof f.note, "paper: %s%s", cJSON_IsString(says) ? says->valuestring : "",
             quick ? "   [--quick: reduced runs]" : "");
    cz_gp_panel *p = cz_gp_panel_add(&f, "", "time (s)",
                                     cJSON_IsString(yl) ? yl->valuestring : column);
    double vb = NAN, vt = NAN;
    bool seen_b = false, seen_t = false;
    double t0 = cz_wall_s();
    const cJSON *run;
    int i = 0;
    cJSON_ArrayForEach(run, runs)
    {
        const char *label = NULL, *cfg_rel = NULL;
        if ((st = cz_json_str(run, name, "label", true, &label, err)) != CZ_OK ||
            (st = cz_json_str(run, name, "config", true, &cfg_rel, err)) != CZ_OK)
            break;
        char cfg[1024], h5[1200], sum[1200];
        char *cfg_path = cz_path_resolve(spec_dir, cfg_rel);
        snprintf(cfg, sizeof cfg, "%s", cfg_path);
        free(cfg_path);
        snprintf(h5, sizeof h5, "%s/%s.%d.h5", tmp, name, i);
        snprintf(sum, sizeof sum, "%s/%s.%d.json", tmp, name, i);
        i++;
        argv_buf a = {0};
        arg_add(&a, "sim");
        arg_add(&a, cfg);
        arg_add(&a, "-o");
        arg_add(&a, h5);
        arg_add(&a, "--summary");
        arg_add(&a, sum);
        arg_add(&a, "--quiet");
        if ((st = add_sets(&a, cJSON_GetObjectItemCaseSensitive(run, "set"), name, err)) !=
                CZ_OK ||
            (st = add_sets(&a, cJSON_GetObjectItemCaseSensitive(q, "set"), name, err)) != CZ_OK)
            break;
        int rc = run_child(cz_cmd_sim, a.argc, a.argv);
        if (rc != CZ_EXIT_OK) {
            st = cz_err_set(err, rc == CZ_EXIT_USAGE ? CZ_EINVAL : CZ_EIO,
                            "figure '%s': `cadenza sim %s` failed (exit %d; its message is "
                            "above)",
                            name, cfg, rc);
            break;
        }
        double *t = NULL, *v = NULL;
        size_t n = 0;
        if ((st = cz_plot_timeline(h5, column, 0, &t, &v, &n, err)) != CZ_OK)
            break;
        for (size_t k = 0; k < n; k++)
            v[k] *= scale;
        cz_gp_series_add(p, label, CZ_GP_STEPS, n, t, v, NULL, NULL);
        free(t);
        free(v);
        cJSON *s = NULL;
        if ((st = cz_json_load(sum, &s, err)) != CZ_OK)
            break;
        const cJSON *kv = cz_json_get_path(s, key->valuestring);
        /* null: never happened in the run (a wall never reached): later than any time */
        double val = cJSON_IsNumber(kv) ? kv->valuedouble : INFINITY;
        if (strcmp(label, better->valuestring) == 0) {
            vb = val;
            seen_b = true;
        }
        if (strcmp(label, than->valuestring) == 0) {
            vt = val;
            seen_t = true;
        }
        cJSON_Delete(s);
        remove(h5);
        remove(sum);
    }
    *run_s = cz_wall_s() - t0;
    if (st == CZ_OK && (!seen_b || !seen_t))
        st = cz_err_set(err, CZ_EINVAL, "figure '%s': direction: \"better\" and \"than\" must "
                                        "name run labels",
                        name);
    if (st == CZ_OK) {
        const cJSON *pv;
        cJSON_ArrayForEach(pv, cJSON_GetObjectItemCaseSensitive(fig, "paper_values"))
        {
            const cJSON *px = cJSON_GetObjectItemCaseSensitive(pv, "x");
            const cJSON *py = cJSON_GetObjectItemCaseSensitive(pv, "value");
            const cJSON *pl = cJSON_GetObjectItemCaseSensitive(pv, "label");
            if (!cJSON_IsNumber(px) || !cJSON_IsNumber(py)) {
                st = cz_err_set(err, CZ_EINVAL, "figure '%s': paper_values: expected numeric "
                                                "\"x\" and \"value\"",
                                name);
                break;
            }
            double x = px->valuedouble, y = py->valuedouble * scale;
            char lab[128];
            snprintf(lab, sizeof lab, "paper: %s", cJSON_IsString(pl) ? pl->valuestring : "");
            cz_gp_series_add(p, lab, CZ_GP_PAPER, 1, &x, &y, NULL, NULL);
        }
    }
    if (st == CZ_OK) {
        /* "later": the better run's event comes later than the other's, or never */
        *as_paper = isfinite(vt) && vb > vt;
        char b[32], t[32];
        snprintf(b, sizeof b, isfinite(vb) ? "%.4g s" : "never", vb);
        snprintf(t, sizeof t, isfinite(vt) ? "%.4g s" : "never", vt);
        snprintf(ours, ours_n, "%s: %s %s, %s %s", key->valuestring, better->valuestring, b,
                 than->valuestring, t);
        st = cz_gp_render(&f, dir, name, err);
    }
    cz_gp_figure_free(&f);
    return st;
}

/* Removes the temporary folder and whatever a failed run left in it. */
static void remove_tmp(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
            remove(path);
        }
        closedir(d);
    }
    rmdir(tmp);
}

int cz_cmd_figures(int argc, char **argv)
{
    const char *dir = "figures", *spec = NULL;
    const char *only[64];
    size_t n_only = 0;
    bool quick = false, check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(figures_usage, stdout);
            return CZ_EXIT_OK;
        }
        if (strcmp(a, "--quick") == 0) {
            quick = true;
        } else if (strcmp(a, "--check") == 0) {
            check = true;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                   strcmp(a, "--only") == 0 || strcmp(a, "--spec") == 0) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("figures", "option '%s' needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--only") == 0) {
                if (n_only == CZ_ARRAY_LEN(only))
                    return cz_cli_usage_error("figures", "--only: at most %zu",
                                              CZ_ARRAY_LEN(only));
                only[n_only++] = v;
            } else if (strcmp(a, "--spec") == 0) {
                spec = v;
            } else {
                dir = v;
            }
        } else {
            return cz_cli_usage_error("figures", "unexpected argument '%s'", a);
        }
    }
    char spec_default[1200], data[1024];
    if (!spec) {
        cz_data_dir(data, sizeof data);
        snprintf(spec_default, sizeof spec_default, "%s/experiments/figures.json", data);
        spec = spec_default;
    }
    cz_err err = {0};
    cJSON *sp = NULL;
    if (cz_json_load(spec, &sp, &err) != CZ_OK) {
        if (spec != spec_default)
            cz_err_prefix(&err, "--spec: ");
        return cz_cli_fail(&err);
    }
    const cJSON *figs = cJSON_GetObjectItemCaseSensitive(sp, "figures");
    if (!cJSON_IsArray(figs) || cJSON_GetArraySize(figs) < 1) {
        cJSON_Delete(sp);
        cz_err_set(&err, CZ_EINVAL, "%s: field 'figures': expected a non-empty array", spec);
        return cz_cli_fail(&err);
    }
    /* every figure names only known fields (checked before anything runs) */
    static const char *const fig_keys[] = {
        "name",  "kind",   "paper", "paper_says", "title", "sweep",     "x",
        "xlabel", "metric", "ylabel", "y_scale",   "logy",  "hline",     "hline_label",
        "where", "grid",   "seeds", "quick",      "set",   "direction", "runs",
        "column", "paper_values"};
    int fi = 0;
    const cJSON *fc;
    cJSON_ArrayForEach(fc, figs)
    {
        char where[1300];
        snprintf(where, sizeof where, "%s: figures[%d]", spec, fi++);
        if (!cJSON_IsObject(fc) ||
            cz_json_check_keys(fc, where, fig_keys, (int)CZ_ARRAY_LEN(fig_keys), &err) != CZ_OK) {
            if (!cJSON_IsObject(fc))
                cz_err_set(&err, CZ_EINVAL, "%s: expected an object", where);
            cJSON_Delete(sp);
            return cz_cli_fail(&err);
        }
    }
    /* every --only names a figure */
    for (size_t k = 0; k < n_only; k++) {
        bool found = false;
        const cJSON *f;
        cJSON_ArrayForEach(f, figs)
        {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
            found |= cJSON_IsString(nm) && strcmp(nm->valuestring, only[k]) == 0;
        }
        if (!found) {
            cJSON_Delete(sp);
            return cz_cli_usage_error("figures", "--only '%s': no such figure in %s", only[k],
                                      spec);
        }
    }
    if (cz_gp_available(&err) != CZ_OK) {
        cJSON_Delete(sp);
        return cz_cli_fail(&err);
    }
    int rc = cz_cli_output_dir("figures", "-o", dir);
    if (rc != CZ_EXIT_OK) {
        cJSON_Delete(sp);
        return rc;
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/.figures.tmpXXXXXX", dir);
    if (!mkdtemp(tmp)) {
        cJSON_Delete(sp);
        cz_err_set(&err, CZ_EIO, "cannot create a temporary folder in '%s': %s", dir,
                   strerror(errno));
        return cz_cli_fail(&err);
    }
    char *spec_dir = cz_cli_dir_of(spec);
    cJSON *report = cJSON_CreateObject();
    cJSON_AddStringToObject(report, "cadenza_version", cz_version());
    cJSON_AddBoolToObject(report, "quick", quick);
    cJSON *list = cJSON_AddArrayToObject(report, "figures");
    int total = 0, idx = 0, failed_dir = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, figs)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        bool take = n_only == 0;
        for (size_t k = 0; k < n_only; k++)
            take |= cJSON_IsString(nm) && strcmp(nm->valuestring, only[k]) == 0;
        total += take;
    }
    cz_status st = CZ_OK;
    cJSON_ArrayForEach(f, figs)
    {
        const char *name = NULL, *kind = "sweep", *paper = "";
        if ((st = cz_json_str(f, spec, "name", true, &name, &err)) != CZ_OK ||
            (st = cz_json_str(f, name, "kind", false, &kind, &err)) != CZ_OK ||
            (st = cz_json_str(f, name, "paper", true, &paper, &err)) != CZ_OK)
            break;
        bool take = n_only == 0;
        for (size_t k = 0; k < n_only; k++)
            take |= strcmp(name, only[k]) == 0;
        if (!take)
            continue;
        idx++;
        bool as_paper = false;
        char ours[512] = "";
        double run_s = 0;
        if (strcmp(kind, "sweep") == 0)
            st = fig_sweep(f, name, spec_dir, tmp, dir, quick, &as_paper, ours, sizeof ours,
                           &run_s, &err);
        else if (strcmp(kind, "runs") == 0)
            st = fig_runs(f, name, spec_dir, tmp, dir, quick, &as_paper, ours, sizeof ours,
                          &run_s, &err);
        else
            st = cz_err_set(&err, CZ_EINVAL, "figure '%s': kind '%s': expected sweep or runs",
                            name, kind);
        if (st != CZ_OK)
            break;
        failed_dir += !as_paper;
        fprintf(stderr, "figures: [%d/%d] %s (%.1f s): %s\n", idx, total, name, run_s,
                as_paper ? "the paper's direction" : "NOT the paper's direction");
        const cJSON *says = cJSON_GetObjectItemCaseSensitive(f, "paper_says");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", name);
        cJSON_AddStringToObject(e, "paper", paper);
        cJSON_AddStringToObject(e, "paper_says", cJSON_IsString(says) ? says->valuestring : "");
        cJSON_AddStringToObject(e, "ours", ours);
        cJSON_AddBoolToObject(e, "as_paper", as_paper);
        char png[1200], svg[1200];
        snprintf(png, sizeof png, "%s.png", name);
        snprintf(svg, sizeof svg, "%s.svg", name);
        cJSON *files = cJSON_AddArrayToObject(e, "files");
        cJSON_AddItemToArray(files, cJSON_CreateString(png));
        cJSON_AddItemToArray(files, cJSON_CreateString(svg));
        cJSON_AddItemToArray(list, e);
        printf("%-34s %s\n  paper: %s\n  ours:  %s\n", name, as_paper ? "as paper" : "DIFFERS",
               cJSON_IsString(says) ? says->valuestring : "", ours);
    }
    remove_tmp(tmp);
    free(spec_dir);
    cJSON_Delete(sp);
    if (st == CZ_OK) {
        char path[1100];
        snprintf(path, sizeof path, "%s/figures.json", dir);
        st = cz_json_write_file(report, path, true, &err);
    }
    cJSON_Delete(report);
    if (st != CZ_OK)
        return cz_cli_fail(&err);
    printf("%d figures in %s/, %d with the paper's direction\n", idx, dir, idx - failed_dir);
    return check && failed_dir ? CZ_EXIT_FAIL : CZ_EXIT_OK;
}
