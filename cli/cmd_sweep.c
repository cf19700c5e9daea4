/* cmd_sweep.c - `cadenza sweep`: runs an experiment config over a grid of overrides, once
 * per seed when seeds are given, and tabulates chosen summary keys, one row per point
 * (docs/config.md). */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "cz_cli.h"
#include "cz_config.h"
#include "cz_workload.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_sweep_rows.h"
#include "cz_team.h"

static const char sweep_usage[] =
    "usage: cadenza sweep SWEEP.json [--trace PATH] [--set key=value]... [--cost cost.json]\n"
    "                     [--seeds N] [--percentiles LIST] [--exact-percentiles]\n"
    "                     [-o results.jsonl] [--resume] [--quiet] [--no-progress]\n"
    "\n"
    "Runs the sweep's base experiment once per point of its grid (every combination of\n"
    "the values listed per key, the last key varying fastest) and prints one row per point\n"
    "with the summary keys the sweep reports. A sweep file:\n"
    "\n"
    "  {\"name\": \"...\", \"base\": \"experiment.json\",\n"
    "   \"grid\": {\"workload.arrivals.concurrency\": [2, 4, 8],\n"
    "            \"server.kv_idle\": [\"drop\", \"offload\"]},\n"
    "   \"report\": [\"p90_audio_ttfp_ms\", \"audio_continuity_ok_rate\"],\n"
    "   \"seeds\": [1, 2, 3],\n"
    "   \"paper\": [\"what the paper reports, printed after the rows\"]}\n"
    "\n"
    "A report key may be a dotted path into the summary (classes.rt.p90_ttft_ms). With\n"
    "seeds, every point runs once per seed (the config's seed set to it) and the table\n"
    "prints each report key's mean over the seeds +- the half-width of its Student-t 95 %\n"
    "interval; a key that is null in some seed's summary has a null mean. The table is\n"
    "printed once every point has run; progress goes to stderr.\n"
    "\n"
    "Every point's config is checked before the first runs. With -o, each row is also\n"
    "appended to FILE.partial as its point finishes; the finished output replaces it, and\n"
    "a run that fails keeps it for --resume. Under `mpirun -n N` (a build with MPI) the points are\n"
    "spread over the N ranks; rank 0 prints and writes the same rows, in grid order.\n"
    "\n"
    "  --trace PATH         every point's workload reads this trace, as for `cadenza sim`\n"
    "  --set key=value      override a field of the base experiment at every point\n"
    "  --cost FILE          step times from a fitted cost model (`cadenza calibrate`)\n"
    "  --seeds N            run every point with seeds 1..N (overrides the file's seeds)\n"
    "  --percentiles LIST   percentiles in each summary, as for `cadenza sim`\n"
    "  --exact-percentiles  exact percentiles, as for `cadenza sim`\n"
    "  -o, --output FILE    write every point as a JSON line: {\"point\", \"summary\"}, or\n"
    "                       with seeds {\"point\", \"seeds\", \"summaries\", \"mean\", \"ci95\"}\n"
    "  --resume             with -o: keep the rows FILE and FILE.partial hold for this\n"
    "                       sweep's points (and seeds), run only the missing points\n"
    "                       and write FILE whole\n"
    "  --quiet              print nothing but errors\n"
    "  --no-progress        no progress line per point (the table is still printed)\n"
    "  -h, --help           this help\n";

typedef struct sweep {
    cJSON *json;
    const char *name;
    cJSON *base;            /* the base experiment (owned copy) */
    char *base_dir;
    const cJSON *grid;
    int n_keys;
    const cJSON *keys[16];  /* the grid's arrays */
    const cJSON *report;
    uint32_t n_seeds;       /* 0: no seeds (one run per point, the config's seed) */
    uint64_t *seeds;
    const char *goodput_rate; /* "goodput": the grid key of the rate (NULL: none) */
    double goodput_attainment;
} sweep;

/* The file's "seeds": a non-empty array of distinct integers in [0, 2^53]. */
static cz_status parse_seeds(const cJSON *j, const char *path, sweep *sw, cz_err *err)
{
    int n = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : 0;
    if (n < 1 || n > 1000)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'seeds': expected an array of 1 to 1000 integer seeds", path);
    sw->seeds = cz_xcalloc((size_t)n, sizeof *sw->seeds);
    const cJSON *it;
    cJSON_ArrayForEach(it, j)
    {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
        if (!(v >= 0.0 && v <= 9007199254740992.0 && v == floor(v))) {
            char *t = cJSON_PrintUnformatted(it);
            cz_status st = cz_err_set(err, CZ_EINVAL,
                                      "%s: field 'seeds': expected integer seeds from 0 to "
                                      "2^53, got %s",
                                      path, t);
            cJSON_free(t);
            return st;
        }
        for (uint32_t i = 0; i < sw->n_seeds; i++)
            if (sw->seeds[i] == (uint64_t)v)
                return cz_err_set(err, CZ_EINVAL, "%s: field 'seeds': seed %.0f is given twice",
                                  path, v);
        sw->seeds[sw->n_seeds++] = (uint64_t)v;
    }
    return CZ_OK;
}

/* The file's "paper_values": the papers' numbers at the papers' settings, drawn as points
 * by `cadenza plot` (docs/plots.md): objects {"metric": key, "x": number, "value": number,
 * "label": text}. */
static cz_status check_paper_values(const cJSON *json, const char *path, cz_err *err)
{
    static const char *const keys[] = {"metric", "x", "value", "label"};
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(json, "paper_values");
    if (!pv)
        return CZ_OK;
    if (!cJSON_IsArray(pv))
        return cz_err_set(err, CZ_EINVAL, "%s: field 'paper_values': expected an array of "
                                          "{\"metric\", \"x\", \"value\", \"label\"}",
                          path);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, pv)
    {
        char where[600];
        snprintf(where, sizeof where, "%s: paper_values[%d]", path, i++);
        double x, v;
        const char *s;
        cz_status st;
        if (!cJSON_IsObject(it))
            return cz_err_set(err, CZ_EINVAL, "%s: expected an object", where);
        if ((st = cz_json_check_keys(it, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
            (st = cz_json_str(it, where, "metric", true, &s, err)) != CZ_OK ||
            (st = cz_json_num(it, where, "x", true, -DBL_MAX, DBL_MAX, &x, err)) != CZ_OK ||
            (st = cz_json_num(it, where, "value", true, -DBL_MAX, DBL_MAX, &v, err)) != CZ_OK ||
            (st = cz_json_str(it, where, "label", true, &s, err)) != CZ_OK)
            return st;
    }
    return CZ_OK;
}

static cz_status sweep_load(const char *path, sweep *sw, cz_err *err)
{
    static const char *const keys[] = {"name",   "description", "base",         "grid",
                                       "report", "paper",       "paper_values", "seeds",
                                       "goodput"};
    memset(sw, 0, sizeof *sw);
    cz_status st = cz_file_check_input(path, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "sweep argument: ");
    if ((st = cz_json_load(path, &sw->json, err)) != CZ_OK)
        return st;
    if (!cJSON_IsObject(sw->json))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object", path);
    const char *base = NULL;
    sw->name = "sweep";
    if ((st = cz_json_check_keys(sw->json, path, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_str(sw->json, path, "name", false, &sw->name, err)) != CZ_OK ||
        (st = cz_json_str(sw->json, path, "base", true, &base, err)) != CZ_OK ||
        (st = cz_json_obj(sw->json, path, "grid", true, &sw->grid, err)) != CZ_OK)
        return st;
    if ((st = check_paper_values(sw->json, path, err)) != CZ_OK)
        return st;
    sw->report = cJSON_GetObjectItemCaseSensitive(sw->json, "report");
    if (!sw->report || !cJSON_IsArray(sw->report) || cJSON_GetArraySize(sw->report) < 1)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'report': expected a non-empty array of summary keys", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, sw->report)
    {
        if (!cJSON_IsString(it))
            return cz_err_set(err, CZ_EINVAL, "%s: field 'report': expected summary key names",
                              path);
    }
    const cJSON *seeds = cJSON_GetObjectItemCaseSensitive(sw->json, "seeds");
    if (seeds && (st = parse_seeds(seeds, path, sw, err)) != CZ_OK)
        return st;
    const cJSON *gp = NULL;
    if ((st = cz_json_obj(sw->json, path, "goodput", false, &gp, err)) != CZ_OK)
        return st;
    if (gp) {
        static const char *const gk[] = {"rate", "attainment"};
        char ctx[1100];
        snprintf(ctx, sizeof ctx, "%s: goodput", path);
        const char *rate = NULL;
        sw->goodput_attainment = 0.9;
        if ((st = cz_json_check_keys(gp, ctx, gk, 2, err)) != CZ_OK ||
            (st = cz_json_str(gp, ctx, "rate", true, &rate, err)) != CZ_OK ||
            (st = cz_json_num(gp, ctx, "attainment", false, 1e-9, 1.0, &sw->goodput_attainment,
                              err)) != CZ_OK)
            return st;
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(sw->grid, rate)))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'rate': '%s' is not a key of the grid; expected the "
                              "grid key that sets the arrival rate (workload.arrivals.rate_rps)",
                              ctx, rate);
        sw->goodput_rate = rate;
    }
    cJSON_ArrayForEach(it, sw->grid)
    {
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) < 1)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: grid.%s: expected a non-empty array of values", path,
                              it->string);
        if (sw->n_keys == (int)CZ_ARRAY_LEN(sw->keys))
            return cz_err_set(err, CZ_EINVAL, "%s: field 'grid': at most %d keys", path,
                              (int)CZ_ARRAY_LEN(sw->keys));
        sw->keys[sw->n_keys++] = it;
    }
    char *dir = cz_cli_dir_of(path);
    char *base_path = cz_path_resolve(dir, base);
    st = cz_json_load(base_path, &sw->base, err);
    sw->base_dir = cz_cli_dir_of(base_path);
    free(base_path);
    free(dir);
    if (st != CZ_OK)
        return cz_err_prefix(err, "%s: field 'base': ", path);
    return CZ_OK;
}

static void sweep_free(sweep *sw)
{
    cJSON_Delete(sw->json);
    cJSON_Delete(sw->base);
    free(sw->base_dir);
    free(sw->seeds);
}

/* "key=value" with the value as JSON text; caller frees. */
static char *assignment(const char *key, const cJSON *value)
{
    char *v = cJSON_PrintUnformatted(value);
    size_t n = strlen(key) + strlen(v) + 2;
    char *a = cz_xmalloc(n);
    snprintf(a, n, "%s=%s", key, v);
    cJSON_free(v);
    return a;
}

/* printf into a new string; caller frees. */
static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CZ_ASSERT(n >= 0);
    char *b = cz_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return b;
}

/* One column's numbers share a format: integers when every value is one, else the same
 * number of decimals for all, enough for 4 significant digits of the smallest non-zero
 * magnitude (1 to 6). Returns the decimals; -1 for integers. */
static int column_decimals(const double *v, size_t n)
{
    bool ints = true;
    double least = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            continue;
        if (!(v[i] == floor(v[i]) && fabs(v[i]) < 1e15))
            ints = false;
        if (v[i] != 0 && fabs(v[i]) < least)
            least = fabs(v[i]);
    }
    if (ints)
        return -1;
    int d = isfinite(least) ? 3 - (int)floor(log10(least)) : 1;
    return d < 1 ? 1 : d > 6 ? 6 : d;
}

static char *format_num(double v, int decimals)
{
    if (isnan(v))
        return cz_xstrdup("null");
    if (decimals < 0)
        return xprintf("%.0f", v);
    return xprintf("%.*f", decimals, v);
}

/* A column of the table: its name and one cell per row. */
typedef struct column {
    const char *name;
    char **cell;
} column;

/* Prints the columns right-aligned, each as wide as the longer of its name and its widest
 * cell (never cut), separated by one space. */
static void print_table(const column *cols, int n_cols, uint64_t n_rows)
{
    int *w = cz_xcalloc((size_t)n_cols, sizeof *w);
    for (int c = 0; c < n_cols; c++) {
        w[c] = (int)strlen(cols[c].name);
        for (uint64_t r = 0; r < n_rows; r++)
            if ((int)strlen(cols[c].cell[r]) > w[c])
                w[c] = (int)strlen(cols[c].cell[r]);
    }
    for (int c = 0; c < n_cols; c++)
        printf(" %*s", w[c], cols[c].name);
    printf("\n");
    for (uint64_t r = 0; r < n_rows; r++) {
        for (int c = 0; c < n_cols; c++)
            printf(" %*s", w[c], cols[c].cell[r]);
        printf("\n");
    }
    free(w);
}

/* A report value as a number: NaN when it is missing, null or not a number. */
static double report_num(const cJSON *summary, const char *key)
{
    const cJSON *v = cz_json_get_path(summary, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The mean of x[0..n) and its Student-t 95 % interval (t_{0.975, n-1} s / sqrt(n), s the
 * sample standard deviation; gsl_cdf_tdist_Pinv); lo = hi = x[0] for n = 1. NaN when any
 * x is NaN (a null in some seed's summary). */
static void mean_ci95(const double *x, size_t n, double *mean, double *lo, double *hi)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / (double)n;
    if (isnan(*mean)) {
        *lo = *hi = NAN;
        return;
    }
    double half = 0;
    if (n > 1) {
        double ss = 0;
        for (size_t i = 0; i < n; i++)
            ss += (x[i] - *mean) * (x[i] - *mean);
        double sd = sqrt(ss / (double)(n - 1));
        half = gsl_cdf_tdist_Pinv(0.975, (double)(n - 1)) * sd / sqrt((double)n);
    }
    *lo = *mean - half;
    *hi = *mean + half;
}

static cJSON *json_num_or_null(double v)
{
    return isnan(v) ? cJSON_CreateNull() : cJSON_CreateNumber(v);
}

/* Sets the config's top-level seed. */
static void set_seed(cJSON *cfg, uint64_t seed)
{
    cJSON *v = cJSON_CreateNumber((double)seed);
    if (cJSON_GetObjectItemCaseSensitive(cfg, "seed"))
        cJSON_ReplaceItemInObjectCaseSensitive(cfg, "seed", v);
    else
        cJSON_AddItemToObject(cfg, "seed", v);
}

/* The table of a finished sweep: a column per grid key, then one per report key (with
 * seeds: mean +- half-width of the 95 % interval). `rows` holds one JSON row per point. */
static void print_sweep_table(const sweep *sw, const cJSON *rows, uint64_t points)
{
    int n_rep = cJSON_GetArraySize(sw->report);
    int n_cols = sw->n_keys + n_rep;
    column *cols = cz_xcalloc((size_t)n_cols, sizeof *cols);
    double *v = cz_xcalloc(points ? points : 1, sizeof *v);
    double *h = cz_xcalloc(points ? points : 1, sizeof *h);
    for (int c = 0; c < n_cols; c++)
        cols[c].cell = cz_xcalloc(points ? points : 1, sizeof *cols[c].cell);
    for (int k = 0; k < sw->n_keys; k++) {
        cols[k].name = sw->keys[k]->string;
        bool numeric = true;
        uint64_t r = 0;
        const cJSON *row;
        cJSON_ArrayForEach(row, rows)
        {
            const cJSON *val = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(row, "point"), sw->keys[k]->string);
            numeric = numeric && cJSON_IsNumber(val);
            v[r++] = cJSON_IsNumber(val) ? val->valuedouble : NAN;
        }
        int d = numeric ? column_decimals(v, points) : 0;
        r = 0;
        cJSON_ArrayForEach(row, rows)
        {
            const cJSON *val = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(row, "point"), sw->keys[k]->string);
            cols[k].cell[r] = numeric ? format_num(v[r], d) : cz_json_value_label(val);
            r++;
        }
    }
    const cJSON *rep;
    int c = sw->n_keys;
    cJSON_ArrayForEach(rep, sw->report)
    {
        cols[c].name = rep->valuestring;
        uint64_t r = 0;
        const cJSON *row;
        cJSON_ArrayForEach(row, rows)
        {
            if (sw->n_seeds) {
                const cJSON *mean = cJSON_GetObjectItemCaseSensitive(row, "mean");
                const cJSON *ci = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(row, "ci95"), rep->valuestring);
                const cJSON *mv = cJSON_GetObjectItemCaseSensitive(mean, rep->valuestring);
                v[r] = cJSON_IsNumber(mv) ? mv->valuedouble : NAN;
                h[r] = cJSON_IsArray(ci) ? (cJSON_GetArrayItem(ci, 1)->valuedouble -
                                            cJSON_GetArrayItem(ci, 0)->valuedouble) / 2
                                         : NAN;
            } else {
                v[r] = report_num(cJSON_GetObjectItemCaseSensitive(row, "summary"),
                                  rep->valuestring);
            }
            r++;
        }
        int d = column_decimals(v, points);
        if (sw->n_seeds && d < 0) {
            /* integer means: the half-widths decide (all integers too: stay integers) */
            int dh = column_decimals(h, points);
            d = dh < 0 ? -1 : dh;
        }
        for (r = 0; r < points; r++) {
            if (!sw->n_seeds || isnan(v[r])) {
                cols[c].cell[r] = format_num(v[r], d);
            } else {
                char *m = format_num(v[r], d), *hw = format_num(h[r], d);
                cols[c].cell[r] = xprintf("%s ± %s", m, hw);
                free(m);
                free(hw);
            }
        }
        c++;
    }
    print_table(cols, n_cols, points);
    for (c = 0; c < n_cols; c++) {
        for (uint64_t r = 0; r < points; r++)
            free(cols[c].cell[r]);
        free(cols[c].cell);
    }
    free(cols);
    free(v);
    free(h);
}

/* The mean and ci95 objects of a point run with seeds: for each report key, over the
 * seeds' summaries; null for a key that is not a number in some summary. */
static void add_seed_stats(const sweep *sw, const cJSON *summaries, cJSON *row)
{
    cJSON *mean = cJSON_AddObjectToObject(row, "mean");
    cJSON *ci = cJSON_AddObjectToObject(row, "ci95");
    CZ_ASSERT(mean && ci);
    double *x = cz_xcalloc(sw->n_seeds, sizeof *x);
    const cJSON *rep;
    cJSON_ArrayForEach(rep, sw->report)
    {
        size_t n = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, summaries)
        {
            x[n++] = report_num(s, rep->valuestring);
        }
        CZ_ASSERT(n == sw->n_seeds);
        double mu, lo, hi;
        mean_ci95(x, n, &mu, &lo, &hi);
        cJSON_AddItemToObject(mean, rep->valuestring, json_num_or_null(mu));
        if (isnan(mu)) {
            cJSON_AddNullToObject(ci, rep->valuestring);
        } else {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(lo));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(hi));
            cJSON_AddItemToObject(ci, rep->valuestring, pair);
        }
    }
    free(x);
}

/* What running a point needs, the same on every rank. */
typedef struct sweep_run {
    const sweep *sw;
    const char *path;  /* the sweep file, in messages */
    const char **sets; /* the --set assignments */
    int n_sets;
    const cz_pctset *pct;
    uint64_t points;
    bool progress;     /* a progress line per run on stderr (the root, without --quiet) */
    char *info_text;   /* the rows' "sweep" object as text */
    char *seeds_text;  /* the rows' "seeds" array as text (with seeds) */
} sweep_run;

/* The rows' "sweep" object: what a plot of the rows needs without the sweep file
 * (docs/plots.md). */
static cJSON *sweep_info(const sweep *sw)
{
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "name", sw->name);
    cJSON_AddItemToObject(info, "report", cJSON_Duplicate(sw->report, 1));
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(sw->json, "paper_values");
    if (pv)
        cJSON_AddItemToObject(info, "paper_values", cJSON_Duplicate(pv, 1));
    return info;
}

static cJSON *seeds_array(const sweep *sw)
{
    cJSON *seeds = cJSON_CreateArray();
    for (uint32_t si = 0; si < sw->n_seeds; si++)
        cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)sw->seeds[si]));
    return seeds;
}

/* Runs point `pt` of the grid (point 0 first, the last key varying fastest), once per seed
 * when there are seeds, and returns its row as one line of JSON text (*text, caller frees;
 * the same bytes on any rank) and the runs' wall time. On failure the error names the
 * point (and seed), and the --set argument a bad value came from. */
/* Point `pt`'s config: the base with the --set arguments (already in it), then its grid
 * values. *point: the grid values as an object; *applied (n_sets + n_keys entries, the
 * --sets then the grid's assignments, owned by *grid_asg) for blaming an error. */
static cz_status point_config(const sweep_run *r, uint64_t pt, cJSON **pcfg_out,
                              cJSON **point_out, char ***grid_asg_out,
                              const char ***applied_out, cz_err *err)
{
    const sweep *sw = r->sw;
    char **grid_asg = cz_xcalloc((size_t)sw->n_keys + 1, sizeof *grid_asg);
    const char **applied = cz_xcalloc((size_t)(r->n_sets + sw->n_keys) + 1, sizeof *applied);
    for (int i = 0; i < r->n_sets; i++)
        applied[i] = r->sets[i];
    cz_status st = CZ_OK;
    cJSON *point = cJSON_CreateObject();
    cJSON *pcfg = cJSON_Duplicate(sw->base, 1);
    uint64_t rest = pt;
    for (int k = sw->n_keys - 1; k >= 0; k--) {
        int n = cJSON_GetArraySize(sw->keys[k]);
        const cJSON *v = cJSON_GetArrayItem(sw->keys[k], (int)(rest % (uint64_t)n));
        rest /= (uint64_t)n;
        grid_asg[k] = assignment(sw->keys[k]->string, v);
        applied[r->n_sets + k] = grid_asg[k];
        if (st == CZ_OK)
            st = cz_json_set_path(pcfg, grid_asg[k], err);
        cJSON_AddItemToObject(point, sw->keys[k]->string, cJSON_Duplicate(v, 1));
    }
    *pcfg_out = pcfg;
    *point_out = point;
    *grid_asg_out = grid_asg;
    *applied_out = applied;
    return st;
}

static void point_config_free(const sweep *sw, char **grid_asg, const char **applied)
{
    for (int k = 0; k < sw->n_keys; k++)
        free(grid_asg[k]);
    free(grid_asg);
    free(applied);
}

/* Every point's config is parsed (its workload too, streamed, so nothing is generated)
 * before the first runs: a bad value at the last point fails the sweep at once, not after
 * hours of finished points. The error is the point's, as its run would report it. */
static cz_status check_points(const sweep_run *r, cz_err *err)
{
    const sweep *sw = r->sw;
    cz_status st = CZ_OK;
    for (uint64_t pt = 0; pt < r->points && st == CZ_OK; pt++) {
        cJSON *pcfg = NULL, *point = NULL;
        char **grid_asg = NULL;
        const char **applied = NULL;
        st = point_config(r, pt, &pcfg, &point, &grid_asg, &applied, err);
        char where[512];
        snprintf(where, sizeof where, "%s (point %llu)", r->path, (unsigned long long)pt + 1);
        if (st == CZ_OK) {
            cz_config c;
            cz_workload wl;
            cz_workload_init(&wl);
            wl.stream = true;
            st = cz_config_parse(pcfg, where, sw->base_dir, &c, &wl, err);
            cz_workload_free(&wl);
        }
        if (st != CZ_OK)
            cz_cli_blame_set(err, where, applied, r->n_sets + sw->n_keys, r->n_sets);
        cJSON_Delete(pcfg);
        cJSON_Delete(point);
        point_config_free(sw, grid_asg, applied);
    }
    return st;
}

/* A report key that names nothing in a summary: the summary's top-level keys sharing its
 * first 4 characters, as hints (into hint). */
static void report_hints(const cJSON *summary, const char *key, char *hint, size_t cap)
{
    size_t n = 0;
    hint[0] = '\0';
    const cJSON *k;
    cJSON_ArrayForEach(k, summary)
    {
        if (strncmp(k->string, key, 4) != 0 || n + strlen(k->string) + 3 >= cap)
            continue;
        n += (size_t)snprintf(hint + n, cap - n, "%s%s", n ? ", " : "", k->string);
    }
}

/* Every report key must name a value (null included: a metric with no sample) in the
 * summary of some point; a key no point has is a typo, not a column of nulls. Some keys
 * exist only at some points (BROS's kv_overwrites with bidirectional blocks on), so the
 * check takes every row, once all are in (their rows stay in the partial file). */
static cz_status check_report_rows(const sweep *sw, const char *path,
                                   const cz_sweep_rows *rows, cz_err *err)
{
    int n_rep = cJSON_GetArraySize(sw->report);
    bool *seen = cz_xcalloc((size_t)n_rep, sizeof *seen);
    cJSON *first = NULL;
    for (uint64_t r = 0; r < rows->n; r++) {
        cJSON *row = cJSON_Parse(rows->text[r]);
        CZ_ASSERT(row != NULL); /* rows this run wrote or --resume checked */
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "summary");
        if (!s)
            s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(row, "summaries"), 0);
        int k = 0;
        const cJSON *rep;
        cJSON_ArrayForEach(rep, sw->report)
        {
            seen[k] = seen[k] || (s && cz_json_get_path(s, rep->valuestring));
            k++;
        }
        if (!first && s)
            first = cJSON_Duplicate(s, 1);
        cJSON_Delete(row);
    }
    cz_status st = CZ_OK;
    int k = 0;
    const cJSON *rep;
    cJSON_ArrayForEach(rep, sw->report)
    {
        if (!seen[k++] && st == CZ_OK) {
            char hint[512];
            report_hints(first, rep->valuestring, hint, sizeof hint);
            st = cz_err_set(err, CZ_EINVAL,
                            "%s: field 'report': '%s' is not a key of any point's summary%s%s%s "
                            "(docs/metrics.md lists them)",
                            path, rep->valuestring, hint[0] ? " (keys like it: " : "", hint,
                            hint[0] ? ")" : "");
        }
    }
    cJSON_Delete(first);
    free(seen);
    return st;
}

/* A report key the first point's summary lacks: said at once, so a typo need not wait for
 * the sweep's end (where a key no point has fails it). */
static void warn_report(const sweep *sw, const char *path, const cJSON *summary)
{
    const cJSON *rep;
    cJSON_ArrayForEach(rep, sw->report)
    {
        if (cz_json_get_path(summary, rep->valuestring))
            continue;
        char hint[512];
        report_hints(summary, rep->valuestring, hint, sizeof hint);
        fprintf(stderr,
                "cadenza: sweep: %s: report key '%s' is not in point 1's summary%s%s%s; if no "
                "point has it, the sweep fails at its end\n",
                path, rep->valuestring, hint[0] ? " (keys like it: " : "", hint,
                hint[0] ? ")" : "");
    }
}

static cz_status run_point(const sweep_run *r, uint64_t pt, char **text, double *wall_s,
                           cz_err *err)
{
    const sweep *sw = r->sw;
    uint32_t runs = sw->n_seeds ? sw->n_seeds : 1;
    cJSON *pcfg = NULL, *point = NULL;
    char **grid_asg = NULL;
    const char **applied = NULL;
    cz_status st = point_config(r, pt, &pcfg, &point, &grid_asg, &applied, err);
    *wall_s = 0;
    cJSON *summaries = cJSON_CreateArray();
    for (uint32_t si = 0; si < runs && st == CZ_OK; si++) {
        cJSON *cfg = cJSON_Duplicate(pcfg, 1);
        char where[512];
        if (sw->n_seeds) {
            set_seed(cfg, sw->seeds[si]);
            snprintf(where, sizeof where, "%s (point %llu, seed %llu)", r->path,
                     (unsigned long long)pt + 1, (unsigned long long)sw->seeds[si]);
        } else {
            snprintf(where, sizeof where, "%s (point %llu)", r->path, (unsigned long long)pt + 1);
        }
        cz_config c;
        cz_metrics m;
        memset(&m, 0, sizeof m);
        cz_summary sum;
        cz_run_stats stats;
        cJSON *summary = NULL;
        double run_s = 0;
        st = cz_cli_simulate(cfg, where, sw->base_dir, false, r->pct, false, &c, &m, &sum, &stats,
                             &summary, &run_s, err);
        if (st != CZ_OK) {
            cz_cli_blame_set(err, where, applied, r->n_sets + sw->n_keys, r->n_sets);
        } else {
            if (pt == 0 && si == 0)
                warn_report(sw, r->path, summary);
            *wall_s += run_s;
            cJSON_AddItemToArray(summaries, summary);
            if (r->progress && sw->n_seeds)
                fprintf(stderr, "sweep: point %llu/%llu seed %llu done in %.2f s\n",
                        (unsigned long long)pt + 1, (unsigned long long)r->points,
                        (unsigned long long)sw->seeds[si], run_s);
            else if (r->progress)
                fprintf(stderr, "sweep: point %llu/%llu done in %.2f s\n",
                        (unsigned long long)pt + 1, (unsigned long long)r->points, run_s);
        }
        cz_metrics_free(&m);
        cJSON_Delete(cfg);
    }
    *text = NULL;
    if (st == CZ_OK) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddItemToObject(row, "point", point);
        point = NULL;
        if (sw->n_seeds) {
            cJSON_AddItemToObject(row, "seeds", seeds_array(sw));
            cJSON_AddItemToObject(row, "summaries", summaries);
            summaries = NULL;
            add_seed_stats(sw, cJSON_GetObjectItemCaseSensitive(row, "summaries"), row);
        } else {
            cJSON_AddItemToObject(row, "summary", cJSON_DetachItemFromArray(summaries, 0));
        }
        cJSON_AddItemToObject(row, "sweep", sweep_info(sw));
        *text = cJSON_PrintUnformatted(row);
        cJSON_Delete(row);
    }
    cJSON_Delete(summaries);
    cJSON_Delete(point);
    cJSON_Delete(pcfg);
    point_config_free(sw, grid_asg, applied);
    return st;
}

/* Whether `v` prints as `text`. */
static bool prints_as(const cJSON *v, const char *text)
{
    char *t = cJSON_PrintUnformatted(v);
    bool same = t && strcmp(t, text) == 0;
    cJSON_free(t);
    return same;
}

/* cz_sweep_row_match for --resume: a row of this sweep (its "sweep" object the same, else
 * an error) at a point of this grid, with this run's seeds and a complete body. */
static cz_status match_row(const cJSON *row, const char *where, const void *ctx,
                           uint64_t *point, const char **why, cz_err *err)
{
    const sweep_run *r = ctx;
    const sweep *sw = r->sw;
    *point = CZ_SWEEP_NO_POINT;
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(row, "sweep");
    if (!info || !prints_as(info, r->info_text)) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(info, "name");
        return cz_err_set(err, CZ_EINVAL,
                          "--resume: %s: a row of sweep '%s' whose name, report or "
                          "paper_values differ from those of '%s' ('%s'): --resume completes "
                          "an output of the same sweep",
                          where, cJSON_IsString(name) ? name->valuestring : "?", r->path,
                          sw->name);
    }
    *why = "not a complete row";
    if (sw->n_seeds) {
        const cJSON *seeds = cJSON_GetObjectItemCaseSensitive(row, "seeds");
        if (!seeds || !prints_as(seeds, r->seeds_text)) {
            *why = seeds ? "run with other seeds than this run's" : "run without seeds";
            return CZ_OK;
        }
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "summaries");
        if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) != (int)sw->n_seeds ||
            !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(row, "mean")) ||
            !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(row, "ci95")))
            return CZ_OK;
    } else {
        if (cJSON_GetObjectItemCaseSensitive(row, "seeds")) {
            *why = "run with seeds, and this run has none";
            return CZ_OK;
        }
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(row, "summary")))
            return CZ_OK;
    }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(row, "point");
    *why = "its point is not in this sweep's grid";
    if (!cJSON_IsObject(p) || cJSON_GetArraySize(p) != sw->n_keys)
        return CZ_OK;
    uint64_t idx = 0;
    for (int k = 0; k < sw->n_keys; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, sw->keys[k]->string);
        if (!v)
            return CZ_OK;
        char *vt = cJSON_PrintUnformatted(v);
        int n = cJSON_GetArraySize(sw->keys[k]), i = 0;
        while (i < n && !prints_as(cJSON_GetArrayItem(sw->keys[k], i), vt))
            i++;
        cJSON_free(vt);
        if (i == n)
            return CZ_OK;
        idx = idx * (uint64_t)n + (uint64_t)i;
    }
    CZ_ASSERT(idx < r->points);
    *point = idx;
    return CZ_OK;
}

/* The options of one `cadenza sweep`. */
typedef struct sweep_args {
    const char *path, *out, *cost_path, *trace_path;
    const char **sets;
    int n_sets;
    bool quiet, resume, no_progress;
    uint32_t cli_seeds;
    cz_pctset pct;
} sweep_args;

/* Parses the command line into *a (a->sets: caller frees). Returns CZ_EXIT_OK, or the
 * exit code after printing a usage error or the help (*done then set). */
static int parse_args(int argc, char **argv, sweep_args *a, bool *done)
{
    memset(a, 0, sizeof *a);
    *done = false;
    a->sets = cz_xcalloc((size_t)argc, sizeof *a->sets);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(sweep_usage, stdout);
            *done = true;
            return CZ_EXIT_OK;
        } else if (strcmp(s, "--set") == 0 || strcmp(s, "-o") == 0 ||
                   strcmp(s, "--output") == 0 || strcmp(s, "--cost") == 0 ||
                   strcmp(s, "--trace") == 0 || strcmp(s, "--seeds") == 0 ||
                   strcmp(s, "--percentiles") == 0) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("sweep", "option '%s' needs a value", s);
            const char *v = argv[++i];
            if (strcmp(s, "--set") == 0) {
                a->sets[a->n_sets++] = v;
            } else if (strcmp(s, "--cost") == 0) {
                a->cost_path = v;
            } else if (strcmp(s, "--trace") == 0) {
                a->trace_path = v;
            } else if (strcmp(s, "--seeds") == 0) {
                char *end;
                errno = 0;
                unsigned long n = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || n < 1 || n > 1000)
                    return cz_cli_usage_error(
                        "sweep", "option '--seeds': expected a count from 1 to 1000, got '%s'", v);
                a->cli_seeds = (uint32_t)n;
            } else if (strcmp(s, "--percentiles") == 0) {
                int prc = cz_cli_parse_percentiles("sweep", v, &a->pct);
                if (prc != CZ_EXIT_OK)
                    return prc;
            } else {
                a->out = v;
            }
        } else if (strcmp(s, "--exact-percentiles") == 0) {
            a->sets[a->n_sets++] = "metrics.percentiles=exact";
        } else if (strcmp(s, "--quiet") == 0) {
            a->quiet = true;
        } else if (strcmp(s, "--no-progress") == 0) {
            a->no_progress = true;
        } else if (strcmp(s, "--resume") == 0) {
            a->resume = true;
        } else if (s[0] == '-' || a->path) {
            return cz_cli_usage_error("sweep", "unexpected argument '%s'", s);
        } else {
            a->path = s;
        }
    }
    if (!a->path)
        return cz_cli_usage_error("sweep", "missing the SWEEP.json file");
    if (a->resume && !a->out)
        return cz_cli_usage_error("sweep", "option '--resume' needs -o, the output to complete");
    return CZ_EXIT_OK;
}

/* The sweep's "goodput" (DistServe's goodput: the highest rate at which the SLO attainment
 * reaches a target, per GPU): for every combination of the grid's other keys, the highest
 * rate of the grid whose slo_attainment (a seeded sweep: its mean) reaches the target, and
 * that rate over the GPUs the point runs on (the summary's gpus); then the combination with
 * the most per GPU. */
static void print_goodput(const sweep *sw, const cJSON *rows)
{
    uint64_t n = (uint64_t)cJSON_GetArraySize(rows);
    char **group = cz_xcalloc(n ? n : 1, sizeof *group);
    double *best = cz_xcalloc(n ? n : 1, sizeof *best), *gpus = cz_xcalloc(n ? n : 1, sizeof *gpus);
    uint64_t n_groups = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        cJSON *point = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(row, "point"), 1);
        CZ_ASSERT(point != NULL);
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(point, sw->goodput_rate);
        double rate = cJSON_IsNumber(rv) ? rv->valuedouble : NAN;
        cJSON_DeleteItemFromObjectCaseSensitive(point, sw->goodput_rate);
        char *key = cJSON_PrintUnformatted(point);
        CZ_ASSERT(key != NULL);
        cJSON_Delete(point);
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(row, sw->n_seeds ? "mean" : "summary");
        const cJSON *att = cJSON_GetObjectItemCaseSensitive(sum, "slo_attainment");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(
            sw->n_seeds ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(row, "summaries"), 0)
                        : sum,
            "gpus");
        uint64_t k = 0;
        while (k < n_groups && strcmp(group[k], key) != 0)
            k++;
        if (k == n_groups) {
            group[n_groups] = key;
            best[n_groups] = NAN;
            gpus[n_groups++] = cJSON_IsNumber(g) ? g->valuedouble : NAN;
        } else {
            free(key);
        }
        if (cJSON_IsNumber(att) && att->valuedouble >= sw->goodput_attainment &&
            !(rate <= best[k]))
            best[k] = rate;
    }
    printf("goodput: the highest %s with slo_attainment >= %g, per GPU\n", sw->goodput_rate,
           sw->goodput_attainment);
    uint64_t top = UINT64_MAX;
    for (uint64_t k = 0; k < n_groups; k++) {
        double per = best[k] / gpus[k];
        if (isnan(best[k]))
            printf("  %s: none of the rates meets it\n", group[k]);
        else
            printf("  %s: %g on %g GPUs = %.3g per GPU\n", group[k], best[k], gpus[k], per);
        if (!isnan(per) && (top == UINT64_MAX || per > best[top] / gpus[top]))
            top = k;
    }
    if (top != UINT64_MAX)
        printf("goodput: best per GPU: %s\n", group[top]);
    for (uint64_t k = 0; k < n_groups; k++)
        free(group[k]);
    free(group);
    free(best);
    free(gpus);
}

/* The root's prints once every row is in: the table, then what the paper reports. */
static void print_result(const sweep *sw, const cz_sweep_rows *rows)
{
    cJSON *arr = cJSON_CreateArray();
    for (uint64_t i = 0; i < rows->n; i++) {
        cJSON *row = cJSON_Parse(rows->text[i]);
        CZ_ASSERT(row != NULL);
        cJSON_AddItemToArray(arr, row);
    }
    print_sweep_table(sw, arr, rows->n);
    if (sw->goodput_rate)
        print_goodput(sw, arr);
    cJSON_Delete(arr);
    /* what the paper reports for the same setting, printed beside our rows */
    const cJSON *paper = cJSON_GetObjectItemCaseSensitive(sw->json, "paper");
    const cJSON *line;
    if (cJSON_IsString(paper))
        printf("paper: %s\n", paper->valuestring);
    if (cJSON_IsArray(paper)) {
        cJSON_ArrayForEach(line, paper)
        {
            if (cJSON_IsString(line))
                printf("paper: %s\n", line->valuestring);
        }
    }
}

/* The root takes a worker's message: a row is stored and appended to the partial file; a
 * failure stops every worker. *rc: the run's exit code so far. */
static void root_take(cz_team *team, const sweep_run *r, cz_sweep_rows *rows, cz_team_msg *msg,
                      int *rc, int *done)
{
    cz_err err;
    cz_err_clear(&err);
    switch (msg->kind) {
    case CZ_TEAM_ROW:
        CZ_ASSERT(msg->item < rows->n);
        if (r->progress)
            fprintf(stderr, "sweep: point %llu/%llu done in %.2f s (rank %d)\n",
                    (unsigned long long)msg->item + 1, (unsigned long long)r->points,
                    msg->wall_s, msg->from);
        if (cz_sweep_rows_put(rows, msg->item, msg->text, &err) != CZ_OK && *rc == CZ_EXIT_OK) {
            *rc = cz_cli_fail(&err);
            cz_team_stop_all(team);
        }
        msg->text = NULL;
        break;
    case CZ_TEAM_FAIL:
        if (*rc == CZ_EXIT_OK) {
            *rc = msg->code;
            cz_team_stop_all(team);
        }
        break;
    case CZ_TEAM_DONE: (*done)++; break;
    }
}

/* The points this run still has to run (grid order): those without a row. *n: how many. */
static uint64_t *missing_points(const cz_sweep_rows *rows, uint64_t *n)
{
    uint64_t *todo = cz_xcalloc(rows->n ? rows->n : 1, sizeof *todo);
    *n = 0;
    for (uint64_t i = 0; i < rows->n; i++)
        if (!rows->text[i])
            todo[(*n)++] = i;
    return todo;
}

/* The sweep on one rank of `team`: the root (rank 0) loads what --resume keeps, writes the
 * partial file, the output and the table; every rank takes the points left from the
 * team's queue (in grid order, each as its rank asks for one), and the workers send their
 * rows to the root. */
static int sweep_main(cz_team *team, int argc, char **argv)
{
    sweep_args a;
    bool helped = false;
    int rc = parse_args(argc, argv, &a, &helped);
    if (rc != CZ_EXIT_OK || helped) {
        free(a.sets);
        return rc;
    }
    bool root = cz_team_rank(team) == 0;
    int size = cz_team_size(team);
    cz_err err;
    cz_err_clear(&err);
    sweep sw;
    cz_status st = sweep_load(a.path, &sw, &err);
    if (st == CZ_OK && a.cli_seeds) {
        free(sw.seeds);
        sw.seeds = cz_xcalloc(a.cli_seeds, sizeof *sw.seeds);
        for (uint32_t i = 0; i < a.cli_seeds; i++)
            sw.seeds[i] = i + 1;
        sw.n_seeds = a.cli_seeds;
    }
    for (int k = 0; st == CZ_OK && sw.n_seeds && k < sw.n_keys; k++)
        if (strcmp(sw.keys[k]->string, "seed") == 0)
            st = cz_err_set(&err, CZ_EINVAL,
                            "%s: grid.seed and %s both set each run's seed: keep one (the grid's "
                            "seeds as points, or --seeds for the mean and 95 %% interval over "
                            "them)",
                            a.path, a.cli_seeds ? "--seeds" : "field 'seeds'");
    for (int i = 0; i < a.n_sets && st == CZ_OK; i++)
        st = cz_cli_set(sw.base, a.sets[i], &err);
    if (st == CZ_OK && a.trace_path)
        st = cz_cli_use_trace(sw.base, a.trace_path, &err);
    if (st == CZ_OK && a.cost_path)
        st = cz_cli_use_cost_file(sw.base, a.cost_path, &err);
    uint64_t points = 1;
    for (int k = 0; st == CZ_OK && k < sw.n_keys; k++)
        points *= (uint64_t)cJSON_GetArraySize(sw.keys[k]);
    sweep_run run = {.sw = &sw, .path = a.path, .sets = a.sets, .n_sets = a.n_sets,
                     .pct = &a.pct, .points = points, .progress = root && !a.quiet && !a.no_progress};
    if (st == CZ_OK)
        st = check_points(&run, &err);
    if (st == CZ_OK) {
        cJSON *info = sweep_info(&sw), *seeds = seeds_array(&sw);
        run.info_text = cJSON_PrintUnformatted(info);
        run.seeds_text = cJSON_PrintUnformatted(seeds);
        cJSON_Delete(info);
        cJSON_Delete(seeds);
    }
    /* the root: the output's temporary, the rows --resume keeps, the partial file */
    cz_sweep_rows rows;
    cz_sweep_rows_init(&rows, st == CZ_OK ? points : 0);
    const char *tmp_out = NULL;
    uint64_t kept = 0; /* rows --resume kept */
    bool final_failed = false; /* every point ran; the output could not be written */
    if (root && st == CZ_OK && a.out)
        st = cz_out_add("-o", a.out, &tmp_out, &err);
    bool in_place = a.out && tmp_out == a.out; /* -o names a device or a pipe */
    if (root && st == CZ_OK && a.resume && in_place)
        st = cz_err_set(&err, CZ_EINVAL, "--resume: -o '%s' is not a regular file", a.out);
    if (root && st == CZ_OK && a.resume) {
        size_t n = strlen(a.out) + 16;
        char *partial = cz_xmalloc(n);
        snprintf(partial, n, "%s.partial", a.out);
        uint64_t kept_out = 0, kept_partial = 0;
        st = cz_sweep_rows_load(&rows, a.out, "-o", match_row, &run, a.quiet, &kept_out, &err);
        if (st == CZ_OK)
            st = cz_sweep_rows_load(&rows, partial, "-o", match_row, &run, a.quiet,
                                    &kept_partial, &err);
        if (st == CZ_OK && !a.quiet)
            fprintf(stderr,
                    "sweep: --resume: %llu of %llu points kept (%llu from %s, %llu from %s), "
                    "%llu to run\n",
                    (unsigned long long)rows.have, (unsigned long long)points,
                    (unsigned long long)kept_out, a.out, (unsigned long long)kept_partial,
                    partial, (unsigned long long)(points - rows.have));
        free(partial);
    }
    if (root && st == CZ_OK && a.out && !in_place)
        st = cz_sweep_rows_start_partial(&rows, a.out, "-o", &err);
    kept = rows.have;
    /* every rank learns whether any failed; the root's message, else each failed one's */
    int root_failed = 0;
    if (cz_team_agree(team, st != CZ_OK, &root_failed)) {
        int code = st != CZ_OK && (root || !root_failed) ? cz_cli_fail(&err) : CZ_EXIT_OK;
        int root_code;
        rc = cz_team_agree(team, code, &root_code);
        goto out;
    }
    if (root && !a.quiet) {
        printf("sweep '%s': %llu points", sw.name, (unsigned long long)points);
        if (sw.n_seeds)
            printf(" x %u seeds", sw.n_seeds);
        if (size > 1)
            printf(" on %d ranks", size);
        printf("\n");
        fflush(stdout);
    }
    uint64_t n_todo = 0;
    uint64_t *todo = missing_points(&rows, &n_todo);
    cz_team_share(team, &n_todo, sizeof n_todo);
    if (!root) {
        free(todo);
        todo = cz_xcalloc(n_todo ? n_todo : 1, sizeof *todo);
    }
    cz_team_share(team, todo, n_todo * sizeof *todo);

    int done = 0; /* workers whose DONE is in */
    uint64_t j;
    cz_team_start(team, n_todo);
    while (cz_team_next(team, &j)) {
        char *text = NULL;
        double wall_s = 0;
        st = run_point(&run, todo[j], &text, &wall_s, &err);
        if (st != CZ_OK) {
            rc = cz_cli_fail(&err);
            if (root)
                cz_team_stop_all(team);
            else
                cz_team_send_fail(team, rc);
            break;
        }
        if (root) {
            if (cz_sweep_rows_put(&rows, todo[j], text, &err) != CZ_OK) {
                rc = cz_cli_fail(&err);
                cz_team_stop_all(team);
            }
            cz_team_msg msg;
            while (cz_team_recv(team, false, &msg))
                root_take(team, &run, &rows, &msg, &rc, &done);
        } else {
            cz_team_send_row(team, todo[j], wall_s, text);
            free(text);
        }
    }
    free(todo);
    if (!root) {
        int verdict = cz_team_finish_worker(team);
        rc = rc != CZ_EXIT_OK ? rc : verdict;
        goto out;
    }
    while (done < size - 1) {
        cz_team_msg msg;
        cz_team_recv(team, true, &msg);
        root_take(team, &run, &rows, &msg, &rc, &done);
    }
    cz_team_finish_root(team, rc);
    if (rc == CZ_EXIT_OK) {
        CZ_ASSERT(rows.have == points);
        if (check_report_rows(&sw, a.path, &rows, &err) != CZ_OK)
            rc = cz_cli_fail(&err);
    }
    if (rc == CZ_EXIT_OK) {
        if (!a.quiet)
            print_result(&sw, &rows);
        if (a.out) {
            st = cz_file_write(tmp_out, cz_sweep_rows_write, &rows, &err);
            if (st == CZ_OK)
                st = cz_out_commit(&err);
            if (st == CZ_OK) {
                cz_sweep_rows_drop_partial(&rows);
            } else {
                /* every row is finished and in the partial file: it stays for --resume */
                final_failed = true;
                rc = cz_cli_fail(&err);
                if (rows.partial)
                    fprintf(stderr,
                            "cadenza: sweep: every point's row is kept in %s.partial; the same "
                            "command with --resume writes %s from it\n",
                            a.out, a.out);
            }
        }
    }
out:
    /* a failed run keeps its partial file, with every row finished before the error, for
     * --resume; only a partial file that holds no row goes */
    if (rc != CZ_EXIT_OK && rows.have == 0 && !final_failed)
        cz_sweep_rows_drop_partial(&rows);
    if (rc != CZ_EXIT_OK && root && rows.partial && rows.have > kept && !final_failed)
        fprintf(stderr,
                "cadenza: sweep: the %llu rows finished are kept in %s; the same command "
                "with --resume runs only the points left\n",
                (unsigned long long)rows.have, rows.partial_path);
    cz_out_discard();
    cz_sweep_rows_free(&rows);
    cJSON_free(run.info_text);
    cJSON_free(run.seeds_text);
    free(a.sets);
    sweep_free(&sw);
    return rc;
}

int cz_cmd_sweep(int argc, char **argv)
{
    cz_err err;
    cz_err_clear(&err);
    cz_team *team = NULL;
    if (cz_team_open("sweep", &team, &err) != CZ_OK)
        return cz_cli_fail(&err);
    int rc = sweep_main(team, argc, argv);
    cz_team_close(team);
    return rc;
}
