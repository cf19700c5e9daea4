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
#include "cz_json.h"
#include "cz_out.h"

static const char sweep_usage[] =
    "usage: cadenza sweep SWEEP.json [--set key=value]... [--cost cost.json]\n"
    "                     [--seeds N] [--percentiles LIST] [--exact-percentiles]\n"
    "                     [-o results.jsonl] [--quiet]\n"
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
    "  --set key=value      override a field of the base experiment at every point\n"
    "  --cost FILE          step times from a fitted cost model (`cadenza calibrate`)\n"
    "  --seeds N            run every point with seeds 1..N (overrides the file's seeds)\n"
    "  --percentiles LIST   percentiles in each summary, as for `cadenza sim`\n"
    "  --exact-percentiles  exact percentiles, as for `cadenza sim`\n"
    "  -o, --output FILE    write every point as a JSON line: {\"point\", \"summary\"}, or\n"
    "                       with seeds {\"point\", \"seeds\", \"summaries\", \"mean\", \"ci95\"}\n"
    "  --quiet              print nothing but errors\n"
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
    static const char *const keys[] = {"name", "description", "base",  "grid",
                                       "report", "paper", "paper_values", "seeds"};
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
    size_t n = strlen(dir) + strlen(base) + 2;
    char *base_path = cz_xmalloc(n);
    snprintf(base_path, n, "%s/%s", base[0] == '/' ? "" : dir, base);
    st = cz_json_load(base[0] == '/' ? base : base_path, &sw->base, err);
    sw->base_dir = cz_cli_dir_of(base[0] == '/' ? base : base_path);
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

static bool write_lines(FILE *f, const void *ctx)
{
    const cJSON *rows = ctx;
    const cJSON *it;
    cJSON_ArrayForEach(it, rows)
    {
        char *t = cJSON_PrintUnformatted(it);
        bool ok = fputs(t, f) >= 0 && fputc('\n', f) != EOF;
        cJSON_free(t);
        if (!ok)
            return false;
    }
    return true;
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

int cz_cmd_sweep(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *cost_path = NULL;
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    int n_sets = 0;
    bool quiet = false;
    uint32_t cli_seeds = 0;
    cz_pctset pct = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(sweep_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--set") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--output") == 0 || strcmp(a, "--cost") == 0 ||
                   strcmp(a, "--seeds") == 0 || strcmp(a, "--percentiles") == 0) {
            if (i + 1 >= argc) {
                free(sets);
                return cz_cli_usage_error("sweep", "option '%s' needs a value", a);
            }
            const char *v = argv[++i];
            if (strcmp(a, "--set") == 0) {
                sets[n_sets++] = v;
            } else if (strcmp(a, "--cost") == 0) {
                cost_path = v;
            } else if (strcmp(a, "--seeds") == 0) {
                char *end;
                errno = 0;
                unsigned long n = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || n < 1 || n > 1000) {
                    free(sets);
                    return cz_cli_usage_error(
                        "sweep", "option '--seeds': expected a count from 1 to 1000, got '%s'", v);
                }
                cli_seeds = (uint32_t)n;
            } else if (strcmp(a, "--percentiles") == 0) {
                int prc = cz_cli_parse_percentiles("sweep", v, &pct);
                if (prc != CZ_EXIT_OK) {
                    free(sets);
                    return prc;
                }
            } else {
                out = v;
            }
        } else if (strcmp(a, "--exact-percentiles") == 0) {
            sets[n_sets++] = "metrics.percentiles=exact";
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (a[0] == '-' || path) {
            free(sets);
            return cz_cli_usage_error("sweep", "unexpected argument '%s'", a);
        } else {
            path = a;
        }
    }
    if (!path) {
        free(sets);
        return cz_cli_usage_error("sweep", "missing the SWEEP.json file");
    }
    cz_err err;
    cz_err_clear(&err);
    sweep sw;
    cz_status st = sweep_load(path, &sw, &err);
    if (st == CZ_OK && cli_seeds) {
        free(sw.seeds);
        sw.seeds = cz_xcalloc(cli_seeds, sizeof *sw.seeds);
        for (uint32_t i = 0; i < cli_seeds; i++)
            sw.seeds[i] = i + 1;
        sw.n_seeds = cli_seeds;
    }
    for (int i = 0; i < n_sets && st == CZ_OK; i++)
        st = cz_json_set_path(sw.base, sets[i], &err);
    if (st == CZ_OK && cost_path)
        st = cz_cli_use_cost_file(sw.base, cost_path, &err);
    const char *tmp_out = NULL;
    if (st == CZ_OK && out)
        st = cz_out_add("-o", out, &tmp_out, &err);
    if (st != CZ_OK) {
        free(sets);
        sweep_free(&sw);
        return cz_cli_fail(&err);
    }
    /* a point's overrides: the --set arguments, then its grid values */
    char **grid_asg = cz_xcalloc((size_t)sw.n_keys + 1, sizeof *grid_asg);
    const char **applied = cz_xcalloc((size_t)(n_sets + sw.n_keys) + 1, sizeof *applied);
    for (int i = 0; i < n_sets; i++)
        applied[i] = sets[i];

    uint64_t points = 1;
    for (int k = 0; k < sw.n_keys; k++)
        points *= (uint64_t)cJSON_GetArraySize(sw.keys[k]);
    uint32_t runs = sw.n_seeds ? sw.n_seeds : 1;
    cJSON *rows = cJSON_CreateArray();
    if (!quiet) {
        if (sw.n_seeds)
            printf("sweep '%s': %llu points x %u seeds\n", sw.name, (unsigned long long)points,
                   sw.n_seeds);
        else
            printf("sweep '%s': %llu points\n", sw.name, (unsigned long long)points);
        fflush(stdout);
    }
    int rc = CZ_EXIT_OK;
    for (uint64_t pt = 0; pt < points && rc == CZ_EXIT_OK; pt++) {
        cJSON *point = cJSON_CreateObject();
        cJSON *pcfg = cJSON_Duplicate(sw.base, 1);
        uint64_t rest = pt;
        for (int k = sw.n_keys - 1; k >= 0; k--) {
            int n = cJSON_GetArraySize(sw.keys[k]);
            const cJSON *v = cJSON_GetArrayItem(sw.keys[k], (int)(rest % (uint64_t)n));
            rest /= (uint64_t)n;
            free(grid_asg[k]);
            grid_asg[k] = assignment(sw.keys[k]->string, v);
            applied[n_sets + k] = grid_asg[k];
            if (st == CZ_OK)
                st = cz_json_set_path(pcfg, grid_asg[k], &err);
            cJSON_AddItemToObject(point, sw.keys[k]->string, cJSON_Duplicate(v, 1));
        }
        cJSON *summaries = cJSON_CreateArray();
        for (uint32_t si = 0; si < runs && st == CZ_OK; si++) {
            cJSON *cfg = cJSON_Duplicate(pcfg, 1);
            char where[512];
            if (sw.n_seeds) {
                set_seed(cfg, sw.seeds[si]);
                snprintf(where, sizeof where, "%s (point %llu, seed %llu)", path,
                         (unsigned long long)pt + 1, (unsigned long long)sw.seeds[si]);
            } else {
                snprintf(where, sizeof where, "%s (point %llu)", path, (unsigned long long)pt + 1);
            }
            cz_config c;
            cz_metrics m;
            memset(&m, 0, sizeof m);
            cz_summary sum;
            cz_run_stats stats;
            cJSON *summary = NULL;
            double wall_s = 0;
            st = cz_cli_simulate(cfg, where, sw.base_dir, false, &pct, &c, &m, &sum, &stats,
                                 &summary, &wall_s, &err);
            if (st != CZ_OK) {
                cz_cli_blame_set(&err, where, applied, n_sets + sw.n_keys, n_sets);
            } else {
                cJSON_AddItemToArray(summaries, summary);
                if (!quiet && sw.n_seeds)
                    fprintf(stderr, "sweep: point %llu/%llu seed %llu done in %.2f s\n",
                            (unsigned long long)pt + 1, (unsigned long long)points,
                            (unsigned long long)sw.seeds[si], wall_s);
                else if (!quiet)
                    fprintf(stderr, "sweep: point %llu/%llu done in %.2f s\n",
                            (unsigned long long)pt + 1, (unsigned long long)points, wall_s);
            }
            cz_metrics_free(&m);
            cJSON_Delete(cfg);
        }
        if (st != CZ_OK) {
            rc = cz_cli_fail(&err);
            cJSON_Delete(summaries);
            cJSON_Delete(point);
        } else {
            cJSON *row = cJSON_CreateObject();
            cJSON_AddItemToObject(row, "point", point);
            if (sw.n_seeds) {
                cJSON *seeds = cJSON_AddArrayToObject(row, "seeds");
                for (uint32_t si = 0; si < sw.n_seeds; si++)
                    cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)sw.seeds[si]));
                cJSON_AddItemToObject(row, "summaries", summaries);
                add_seed_stats(&sw, summaries, row);
            } else {
                cJSON_AddItemToObject(row, "summary",
                                      cJSON_DetachItemFromArray(summaries, 0));
                cJSON_Delete(summaries);
            }
            /* what a plot of the rows needs without the sweep file (docs/plots.md) */
            cJSON *info = cJSON_AddObjectToObject(row, "sweep");
            cJSON_AddStringToObject(info, "name", sw.name);
            cJSON_AddItemToObject(info, "report", cJSON_Duplicate(sw.report, 1));
            const cJSON *pv = cJSON_GetObjectItemCaseSensitive(sw.json, "paper_values");
            if (pv)
                cJSON_AddItemToObject(info, "paper_values", cJSON_Duplicate(pv, 1));
            cJSON_AddItemToArray(rows, row);
        }
        cJSON_Delete(pcfg);
    }
    if (rc == CZ_EXIT_OK && !quiet) {
        print_sweep_table(&sw, rows, points);
        /* what the paper reports for the same setting, printed beside our rows */
        const cJSON *paper = cJSON_GetObjectItemCaseSensitive(sw.json, "paper");
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
    if (rc == CZ_EXIT_OK && out) {
        st = cz_file_write(tmp_out, write_lines, rows, &err);
        if (st == CZ_OK)
            st = cz_out_commit(&err);
        if (st != CZ_OK)
            rc = cz_cli_fail(&err);
    }
    cz_out_discard();
    for (int k = 0; k < sw.n_keys; k++)
        free(grid_asg[k]);
    free(grid_asg);
    free(applied);
    free(sets);
    cJSON_Delete(rows);
    sweep_free(&sw);
    return rc;
}
