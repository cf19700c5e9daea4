/* cmd_figures.c - `cadenza figures`: regenerates each paper's headline figure from the
 * shipped experiments, with the paper's numbers overlaid, and says whether ours shows the
 * paper's direction and how far ours is from each of the paper's numbers
 * (experiments/figures.json lists them; docs/plots.md). */
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
    "paper's values (open markers) and says whether ours shows the paper's direction and\n"
    "how far each of the paper's numbers is from ours (ours / the paper's).\n"
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
    "                       (whatever the distance)\n"
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
                                 const char *metric, const cJSON *dir, bool *direction_ok,
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
        *direction_ok = isfinite(a) && isfinite(b) && b > a;
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
    *direction_ok = ok;
    return CZ_OK;
}

/* What `cadenza figures` finds for one figure: whether ours shows the paper's direction,
 * and how far each of the paper's numbers the figure names is from ours. */
typedef struct fig_result {
    bool direction_ok;
    char ours[512];      /* the numbers the direction compared */
    char verdict[1024];  /* "direction matches; WHAT: OURS vs the paper's PAPER: RATIOx; ..." */
    cJSON *compared;     /* [{"what", "quantity", "ours", "paper", "ratio",
                            "relative_difference", "unit"}] (owned) */
    cJSON *seeds;        /* the seeds the sweep ran (owned), or NULL */
} fig_result;

/* A number of a comparison as text: a reduction as a percentage, a ratio with an x, else
 * three digits and the unit; "none" when it is not a number (a reach never made). */
static void cmp_format(double v, const char *quantity, const char *unit, char *buf, size_t n)
{
    if (!isfinite(v))
        snprintf(buf, n, "%s", v > 0 ? "never" : "none");
    else if (strcmp(quantity, "max_reduction") == 0)
        snprintf(buf, n, "%.1f %%", 100.0 * v);
    else if (strcmp(quantity, "reach_ratio") == 0)
        snprintf(buf, n, "%.3gx", v);
    else
        snprintf(buf, n, "%.4g%s%s", v, unit[0] ? " " : "", unit);
}

/* Adds one comparison to `res`: its record in res->compared and its clause to the
 * verdict. */
static void cmp_add(fig_result *res, const char *what, const char *quantity, const char *unit,
                    double ours, double paper)
{
    double ratio = isfinite(ours) && paper != 0 ? ours / paper : NAN;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "what", what);
    cJSON_AddStringToObject(c, "quantity", quantity);
    if (isfinite(ours))
        cJSON_AddNumberToObject(c, "ours", ours);
    else
        cJSON_AddNullToObject(c, "ours");
    cJSON_AddNumberToObject(c, "paper", paper);
    if (isfinite(ratio)) {
        cJSON_AddNumberToObject(c, "ratio", ratio);
        cJSON_AddNumberToObject(c, "relative_difference", ratio - 1.0);
    } else {
        cJSON_AddNullToObject(c, "ratio");
        cJSON_AddNullToObject(c, "relative_difference");
    }
    cJSON_AddStringToObject(c, "unit", unit);
    cJSON_AddItemToArray(res->compared, c);
    char o[64], p[64], r[48];
    cmp_format(ours, quantity, unit, o, sizeof o);
    cmp_format(paper, quantity, unit, p, sizeof p);
    if (isfinite(ratio))
        snprintf(r, sizeof r, "%.3gx", ratio);
    else
        snprintf(r, sizeof r, "no ratio");
    size_t len = strlen(res->verdict);
    if (len < sizeof res->verdict)
        snprintf(res->verdict + len, sizeof res->verdict - len, "; %s: %s vs the paper's %s: %s",
                 what, o, p, r);
}

/* The fields of one entry of a figure's "compare" list: "what", "quantity" (value,
 * max_reduction, reach or reach_ratio), "paper" and "unit" (optional). CZ_EINVAL naming
 * the figure and entry when one is missing or the quantity is none of those. */
static cz_status cmp_fields(const char *fig, int i, const cJSON *c, const char **what,
                            const char **quantity, double *paper, const char **unit, cz_err *err)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(c, "what");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "quantity");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "paper");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(c, "unit");
    if (!cJSON_IsObject(c) || !cJSON_IsString(w) || !cJSON_IsString(q) || !cJSON_IsNumber(p) ||
        (u && !cJSON_IsString(u)))
        return cz_err_set(err, CZ_EINVAL,
                          "figure '%s': compare[%d]: expected an object with \"what\" (text), "
                          "\"quantity\" (text), \"paper\" (the paper's number) and optionally "
                          "\"unit\" (text)",
                          fig, i);
    static const char *const quantities[] = {"value", "max_reduction", "reach", "reach_ratio"};
    bool known = false;
    for (size_t k = 0; k < CZ_ARRAY_LEN(quantities); k++)
        known |= strcmp(q->valuestring, quantities[k]) == 0;
    if (!known)
        return cz_err_set(err, CZ_EINVAL,
                          "figure '%s': compare[%d]: quantity '%s': expected value, "
                          "max_reduction, reach or reach_ratio",
                          fig, i, q->valuestring);
    *what = w->valuestring;
    *quantity = q->valuestring;
    *paper = p->valuedouble;
    *unit = u ? u->valuestring : "";
    return CZ_OK;
}

/* The comparisons of a sweep figure (its "compare" list; docs/plots.md), added to `res`.
 * `y_scale` scales a "value" (ours and the paper's alike) as the figure draws it. */
static cz_status sweep_compare(const char *fig, const cJSON *rows, const char *x,
                               const char *metric, const cJSON *dir, const cJSON *compare,
                               double y_scale, fig_result *res, cz_err *err)
{
    const cJSON *better = cJSON_GetObjectItemCaseSensitive(dir, "better");
    const cJSON *than = cJSON_GetObjectItemCaseSensitive(dir, "than");
    const cJSON *thr = cJSON_GetObjectItemCaseSensitive(dir, "threshold");
    const cJSON *dir_at = cJSON_GetObjectItemCaseSensitive(dir, "at");
    double max_x = -INFINITY;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(row, "point"), x);
        if (cJSON_IsNumber(xv))
            max_x = fmax(max_x, xv->valuedouble);
    }
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, compare)
    {
        const char *what, *quantity, *unit;
        double paper;
        cz_status st = cmp_fields(fig, i, c, &what, &quantity, &paper, &unit, err);
        if (st != CZ_OK)
            return st;
        double ours = NAN;
        if (strcmp(quantity, "value") == 0) {
            /* the metric of one point: "select" (default: the direction's better) at "at"
             * (default: the direction's, else the largest x) */
            const cJSON *sel = cJSON_GetObjectItemCaseSensitive(c, "select");
            const cJSON *at = cJSON_GetObjectItemCaseSensitive(c, "at");
            double at_x = cJSON_IsNumber(at)       ? at->valuedouble
                          : cJSON_IsNumber(dir_at) ? dir_at->valuedouble
                                                   : max_x;
            ours = value_at(rows, x, at_x, sel ? sel : better, metric) * y_scale;
            paper *= y_scale;
        } else if (strcmp(quantity, "max_reduction") == 0 && cJSON_IsArray(than)) {
            /* "up to N % below the best baseline": the most, over x, of 1 - better / the
             * lowest of the others at that x */
            cJSON_ArrayForEach(row, rows)
            {
                const cJSON *xv = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(row, "point"), x);
                if (!cJSON_IsNumber(xv))
                    continue;
                double vb = value_at(rows, x, xv->valuedouble, better, metric), best = INFINITY;
                const cJSON *t;
                cJSON_ArrayForEach(t, than)
                    best = fmin(best, value_at(rows, x, xv->valuedouble, t, metric));
                double r = 1.0 - vb / best;
                if (isfinite(r) && (!isfinite(ours) || r > ours))
                    ours = r;
            }
        } else if ((strcmp(quantity, "reach") == 0 || strcmp(quantity, "reach_ratio") == 0) &&
                   cJSON_IsNumber(thr) && cJSON_IsArray(than)) {
            /* how far the better point stays at or under the threshold, alone or against
             * the furthest of the others */
            ours = reach(rows, x, better, metric, thr->valuedouble);
            if (strcmp(quantity, "reach_ratio") == 0) {
                double other = -INFINITY;
                const cJSON *t;
                cJSON_ArrayForEach(t, than)
                    other = fmax(other, reach(rows, x, t, metric, thr->valuedouble));
                ours = other > 0 ? ours / other : NAN;
            }
        } else {
            return cz_err_set(err, CZ_EINVAL,
                              "figure '%s': compare[%d]: quantity '%s': expected value, "
                              "max_reduction (a direction lower or higher), reach or "
                              "reach_ratio (a direction reaches_further)",
                              fig, i, quantity);
        }
        cmp_add(res, what, quantity, unit, ours, paper);
        i++;
    }
    return CZ_OK;
}

/* Opens the verdict: whether ours shows the paper's direction. */
static void verdict_start(fig_result *res)
{
    snprintf(res->verdict, sizeof res->verdict, "%s",
             res->direction_ok ? "direction matches" : "direction does NOT match");
}

/* "seed 3", "seeds 1-5" (three or more consecutive) or "seeds 1, 2 and 7": the seeds a
 * sweep ran. */
static void seeds_text(const cJSON *seeds, char *buf, size_t n)
{
    int ns = cJSON_GetArraySize(seeds);
    bool run = ns > 2;
    for (int i = 1; i < ns && run; i++)
        run = cJSON_GetArrayItem(seeds, i)->valuedouble ==
              cJSON_GetArrayItem(seeds, i - 1)->valuedouble + 1;
    if (ns == 1) {
        snprintf(buf, n, "seed %.0f", cJSON_GetArrayItem(seeds, 0)->valuedouble);
    } else if (run) {
        snprintf(buf, n, "seeds %.0f-%.0f", cJSON_GetArrayItem(seeds, 0)->valuedouble,
                 cJSON_GetArrayItem(seeds, ns - 1)->valuedouble);
    } else {
        size_t len = (size_t)snprintf(buf, n, "seeds");
        for (int i = 0; i < ns && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, "%s %.0f",
                                    i == 0 ? "" : i == ns - 1 ? " and" : ",",
                                    cJSON_GetArrayItem(seeds, i)->valuedouble);
    }
}

/* The figure's title with "{seeds}" replaced by the seeds the rows ran (their "seeds"
 * array), so the title names the seeds run and no others. CZ_EINVAL naming the figure when
 * the title names seeds and the rows ran none. */
static cz_status title_with_seeds(const char *fig, const char *title, const cJSON *seeds,
                                  char *buf, size_t n, cz_err *err)
{
    const char *at = strstr(title, "{seeds}");
    if (!at) {
        snprintf(buf, n, "%s", title);
        return CZ_OK;
    }
    if (!cJSON_IsArray(seeds) || cJSON_GetArraySize(seeds) < 1)
        return cz_err_set(err, CZ_EINVAL,
                          "figure '%s': title: {seeds} names the seeds run, but the sweep "
                          "runs none (give the figure \"seeds\")",
                          fig);
    char st[256];
    seeds_text(seeds, st, sizeof st);
    snprintf(buf, n, "%.*s%s%s", (int)(at - title), title, st, at + strlen("{seeds}"));
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
                           const char *tmp, const char *dir, bool quick, fig_result *res,
                           double *run_s, cz_err *err)
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
    /* the base config's path, and its name from the figure list's folder, for the title to
     * show what the runs changed from it */
    char base_file[4096], base_label[1100];
    snprintf(base_file, sizeof base_file, "%s", base_abs);
    char *rel_dir = cz_cli_dir_of(sweep_rel);
    snprintf(base_label, sizeof base_label, "%s%s%s", strchr(sweep_rel, '/') ? rel_dir : "",
             strchr(sweep_rel, '/') ? "/" : "", base->valuestring);
    free(rel_dir);
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
    const cJSON *direction = cJSON_GetObjectItemCaseSensitive(fig, "direction");
    double y_scale = cJSON_IsNumber(ys) ? ys->valuedouble : 1.0;
    /* the verdict first: the figure shows it under the paper's claim */
    const cJSON *ran = cJSON_GetObjectItemCaseSensitive(row0, "seeds");
    if (ran)
        res->seeds = cJSON_Duplicate(ran, 1);
    char title_buf[512];
    cJSON *base_cfg = NULL;
    st = sweep_direction(name, rows, x, metric, direction, &res->direction_ok, res->ours,
                         sizeof res->ours, err);
    if (st == CZ_OK) {
        verdict_start(res);
        st = sweep_compare(name, rows, x, metric, direction,
                           cJSON_GetObjectItemCaseSensitive(fig, "compare"), y_scale, res, err);
    }
    if (st == CZ_OK && cJSON_IsString(title))
        st = title_with_seeds(name, title->valuestring, ran, title_buf, sizeof title_buf, err);
    if (st == CZ_OK && cz_json_load(base_file, &base_cfg, err) != CZ_OK)
        st = cz_err_prefix(err, "figure '%s': the sweep's base: ", name);
    if (st == CZ_OK) {
        char note[sizeof ((cz_gp_figure *)0)->note];
        snprintf(note, sizeof note, "paper: %.300s%s\nours: %.400s", /* cut to fit */
                 cJSON_IsString(says) ? says->valuestring : "",
                 quick ? "   [--quick: reduced runs]" : "", res->verdict);
        const char *metrics[1] = {metric};
        cz_plot_sweep_opts o = {
            .x = x,
            .metrics = metrics,
            .n_metrics = 1,
            .where = cJSON_GetObjectItemCaseSensitive(fig, "where"),
            .name = name,
            .title = cJSON_IsString(title) ? title_buf : NULL,
            .xlabel = cJSON_IsString(xl) ? xl->valuestring : NULL,
            .ylabel = cJSON_IsString(yl) ? yl->valuestring : NULL,
            .note = note,
            .base = base_cfg,
            .base_name = base_label,
            .y_scale = y_scale,
            .logy = cJSON_IsTrue(logy),
            .hline = cJSON_IsNumber(hl) ? hl->valuedouble : NAN,
            .hline_label = cJSON_IsString(hll) ? hll->valuestring : NULL,
        };
        cz_plot_list out = {0};
        st = cz_plot_sweep(rows, &o, dir, &out, err);
    }
    cJSON_Delete(base_cfg);
    cJSON_Delete(rows);
    remove(sw_tmp);
    remove(rows_tmp);
    return st;
}

/* A figure of runs: each run's /timeline column over time, and a summary key compared. */
static cz_status fig_runs(const cJSON *fig, const char *name, const char *spec_dir,
                          const char *tmp, const char *dir, bool quick, fig_result *res,
                          double *run_s, cz_err *err)
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
    double key_val[FIG_MAX_RUNS];  /* each run's direction key (inf: never) */
    const char *labels[FIG_MAX_RUNS];
    size_t sub_len = 0;            /* each run's changes from its config, in the subtitle */
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
        key_val[i - 1] = val;
        labels[i - 1] = label;
        cJSON *cfg_json = NULL;
        if ((st = cz_json_load(cfg, &cfg_json, err)) != CZ_OK) {
            cJSON_Delete(s);
            break;
        }
        char changed[sizeof f.subtitle];
        cz_plot_overrides(cJSON_GetObjectItemCaseSensitive(s, "config"), cfg_json, cfg_rel, NULL,
                          changed, sizeof changed);
        cJSON_Delete(cfg_json);
        if (changed[0] && sub_len < sizeof f.subtitle)
            sub_len += (size_t)snprintf(f.subtitle + sub_len, sizeof f.subtitle - sub_len,
                                        "%s%s: %s", sub_len ? "; " : "", label, changed);
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
        res->direction_ok = isfinite(vt) && vb > vt;
        char b[32], t[32];
        snprintf(b, sizeof b, isfinite(vb) ? "%.4g s" : "never", vb);
        snprintf(t, sizeof t, isfinite(vt) ? "%.4g s" : "never", vt);
        snprintf(res->ours, sizeof res->ours, "%s: %s %s, %s %s", key->valuestring,
                 better->valuestring, b, than->valuestring, t);
        verdict_start(res);
        /* the comparisons: the direction key of a run against the paper's number */
        int ci = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(fig, "compare"))
        {
            const char *what, *quantity, *unit;
            double paper;
            if ((st = cmp_fields(name, ci, c, &what, &quantity, &paper, &unit, err)) != CZ_OK)
                break;
            const cJSON *run_label = cJSON_GetObjectItemCaseSensitive(c, "run");
            int k = 0;
            while (k < i && cJSON_IsString(run_label) &&
                   strcmp(labels[k], run_label->valuestring) != 0)
                k++;
            if (strcmp(quantity, "value") != 0 || !cJSON_IsString(run_label) || k == i) {
                st = cz_err_set(err, CZ_EINVAL,
                                "figure '%s': compare[%d]: expected quantity value and \"run\" "
                                "naming a run's label",
                                name, ci);
                break;
            }
            cmp_add(res, what, quantity, unit, key_val[k], paper);
            ci++;
        }
    }
    if (st == CZ_OK) {
        size_t len = strlen(f.note);
        snprintf(f.note + len, sizeof f.note - len, "\nours: %s", res->verdict);
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
        "column", "paper_values", "compare"};
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
        /* every comparison names its fields */
        const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(fc, "compare");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fc, "name");
        int ci = 0;
        const cJSON *ce;
        cJSON_ArrayForEach(ce, cmp)
        {
            const char *w_, *q_, *u_;
            double p_;
            if (cmp_fields(cJSON_IsString(nm) ? nm->valuestring : where, ci++, ce, &w_, &q_, &p_,
                           &u_, &err) != CZ_OK) {
                cJSON_Delete(sp);
                return cz_cli_fail(&err);
            }
        }
        if (cmp && !cJSON_IsArray(cmp)) {
            cJSON_Delete(sp);
            cz_err_set(&err, CZ_EINVAL, "%s: compare: expected an array", where);
            return cz_cli_fail(&err);
        }
        /* a title names seeds only through {seeds}, which becomes the seeds run: a fixed
         * list could claim seeds a reduced run did not run */
        const cJSON *ti = cJSON_GetObjectItemCaseSensitive(fc, "title");
        if (cJSON_IsString(ti) && strstr(ti->valuestring, "seed") &&
            !strstr(ti->valuestring, "{seeds}")) {
            cJSON_Delete(sp);
            cz_err_set(&err, CZ_EINVAL,
                       "%s: title: name the seeds as {seeds} (replaced by the seeds run), not "
                       "by number",
                       where);
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
        fig_result res = {.compared = cJSON_CreateArray()};
        double run_s = 0;
        if (strcmp(kind, "sweep") == 0)
            st = fig_sweep(f, name, spec_dir, tmp, dir, quick, &res, &run_s, &err);
        else if (strcmp(kind, "runs") == 0)
            st = fig_runs(f, name, spec_dir, tmp, dir, quick, &res, &run_s, &err);
        else
            st = cz_err_set(&err, CZ_EINVAL, "figure '%s': kind '%s': expected sweep or runs",
                            name, kind);
        if (st != CZ_OK) {
            cJSON_Delete(res.compared);
            cJSON_Delete(res.seeds);
            break;
        }
        failed_dir += !res.direction_ok;
        fprintf(stderr, "figures: [%d/%d] %s (%.1f s): %s\n", idx, total, name, run_s,
                res.direction_ok ? "the paper's direction" : "NOT the paper's direction");
        const cJSON *says = cJSON_GetObjectItemCaseSensitive(f, "paper_says");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", name);
        cJSON_AddStringToObject(e, "paper", paper);
        cJSON_AddStringToObject(e, "paper_says", cJSON_IsString(says) ? says->valuestring : "");
        cJSON_AddStringToObject(e, "ours", res.ours);
        cJSON_AddBoolToObject(e, "direction_ok", res.direction_ok);
        cJSON_AddItemToObject(e, "compared", res.compared);
        cJSON_AddStringToObject(e, "verdict", res.verdict);
        if (res.seeds)
            cJSON_AddItemToObject(e, "seeds", res.seeds);
        char png[1200], svg[1200];
        snprintf(png, sizeof png, "%s.png", name);
        snprintf(svg, sizeof svg, "%s.svg", name);
        cJSON *files = cJSON_AddArrayToObject(e, "files");
        cJSON_AddItemToArray(files, cJSON_CreateString(png));
        cJSON_AddItemToArray(files, cJSON_CreateString(svg));
        cJSON_AddItemToArray(list, e);
        printf("%-34s %s\n  paper: %s\n  ours:  %s\n  %s\n", name,
               res.direction_ok ? "direction as paper" : "DIRECTION DIFFERS",
               cJSON_IsString(says) ? says->valuestring : "", res.ours, res.verdict);
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
