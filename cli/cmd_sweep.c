/* cmd_sweep.c - `cadenza sweep`: runs an experiment config over a grid of overrides and
 * tabulates chosen summary keys, one row per point (docs/config.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_json.h"
#include "cz_out.h"

static const char sweep_usage[] =
    "usage: cadenza sweep SWEEP.json [--set key=value]... [--cost cost.json]\n"
    "                     [-o results.jsonl] [--quiet]\n"
    "\n"
    "Runs the sweep's base experiment once per point of its grid (every combination of\n"
    "the values listed per key, the last key varying fastest) and prints one row per point\n"
    "with the summary keys the sweep reports. A sweep file:\n"
    "\n"
    "  {\"name\": \"...\", \"base\": \"experiment.json\",\n"
    "   \"grid\": {\"workload.arrivals.concurrency\": [2, 4, 8],\n"
    "            \"server.kv_idle\": [\"drop\", \"offload\"]},\n"
    "   \"report\": [\"p90_audio_ttfp_ms\", \"continuity_ok_rate\"],\n"
    "   \"paper\": [\"what the paper reports, printed after the rows\"]}\n"
    "\n"
    "A report key may be a dotted path into the summary (classes.rt.p90_ttft_ms).\n"
    "\n"
    "  --set key=value      override a field of the base experiment at every point\n"
    "  --cost FILE          step times from a fitted cost model (`cadenza calibrate`)\n"
    "  -o, --output FILE    write every point's full summary as JSON lines\n"
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
} sweep;

static cz_status sweep_load(const char *path, sweep *sw, cz_err *err)
{
    static const char *const keys[] = {"name", "description", "base", "grid", "report", "paper"};
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
    if ((st = cz_json_check_keys(sw->json, path, keys, 6, err)) != CZ_OK ||
        (st = cz_json_str(sw->json, path, "name", false, &sw->name, err)) != CZ_OK ||
        (st = cz_json_str(sw->json, path, "base", true, &base, err)) != CZ_OK ||
        (st = cz_json_obj(sw->json, path, "grid", true, &sw->grid, err)) != CZ_OK)
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

/* The summary value at a dotted path ("classes.rt.p90_ttft_ms"; an array element by its
 * index: "stages.0.total_kv_reload_s"), or NULL. */
static const cJSON *lookup(const cJSON *j, const char *path)
{
    char key[256];
    while (j && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        if (cJSON_IsArray(j)) {
            char *end;
            long i = strtol(key, &end, 10);
            j = *key && !*end && i >= 0 && i < INT32_MAX ? cJSON_GetArrayItem(j, (int)i) : NULL;
        } else {
            j = cJSON_GetObjectItemCaseSensitive(j, key);
        }
        path += n + (dot ? 1 : 0);
    }
    return j;
}

/* A grid value as a short label: numbers and strings as they are, an object with a
 * "name" as the name followed by its other keys as key=value, anything else as JSON. */
static void value_label(const cJSON *v, char *buf, size_t n)
{
    const cJSON *name = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "name") : NULL;
    if (cJSON_IsNumber(v)) {
        snprintf(buf, n, "%g", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        snprintf(buf, n, "%s", v->valuestring);
    } else if (cJSON_IsString(name)) {
        size_t len = (size_t)snprintf(buf, n, "%s", name->valuestring);
        const cJSON *it;
        cJSON_ArrayForEach(it, v)
        {
            if (it == name || len >= n)
                continue;
            char *t = cJSON_PrintUnformatted(it);
            len += (size_t)snprintf(buf + len, n - len, " %s=%s", it->string, t);
            cJSON_free(t);
        }
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(buf, n, "%s", t);
        cJSON_free(t);
    }
}

/* Width of a grid column: its longest label or key, at least 14, at most 64. */
static int column_width(const cJSON *key)
{
    int w = (int)strlen(key->string);
    const cJSON *v;
    char buf[80];
    cJSON_ArrayForEach(v, key)
    {
        value_label(v, buf, sizeof buf);
        if ((int)strlen(buf) > w)
            w = (int)strlen(buf);
    }
    return w < 14 ? 14 : w > 64 ? 64 : w;
}

static void print_value(const cJSON *v)
{
    if (cJSON_IsNumber(v)) {
        printf(" %14.4g", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        printf(" %14.14s", v->valuestring);
    } else if (cJSON_IsNull(v) || !v) {
        printf(" %14s", "null");
    } else {
        /* an object or array value of the grid: its JSON, cut to the column */
        char *t = cJSON_PrintUnformatted(v);
        printf(" %14.14s", t);
        cJSON_free(t);
    }
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

int cz_cmd_sweep(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *cost_path = NULL;
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    int n_sets = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(sweep_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--set") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--output") == 0 || strcmp(a, "--cost") == 0) {
            if (i + 1 >= argc) {
                free(sets);
                return cz_cli_usage_error("sweep", "option '%s' needs a value", a);
            }
            if (strcmp(a, "--set") == 0)
                sets[n_sets++] = argv[++i];
            else if (strcmp(a, "--cost") == 0)
                cost_path = argv[++i];
            else
                out = argv[++i];
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
    cJSON *rows = cJSON_CreateArray();
    if (!quiet) {
        printf("sweep '%s': %llu points\n", sw.name, (unsigned long long)points);
        for (int k = 0; k < sw.n_keys; k++)
            printf(" %*.*s", column_width(sw.keys[k]), column_width(sw.keys[k]),
                   sw.keys[k]->string);
        const cJSON *r;
        cJSON_ArrayForEach(r, sw.report)
        {
            printf(" %14.14s", r->valuestring);
        }
        printf("\n");
    }
    int rc = CZ_EXIT_OK;
    for (uint64_t pt = 0; pt < points && rc == CZ_EXIT_OK; pt++) {
        cJSON *cfg = cJSON_Duplicate(sw.base, 1);
        cJSON *point = cJSON_CreateObject();
        uint64_t rest = pt;
        for (int k = sw.n_keys - 1; k >= 0; k--) {
            int n = cJSON_GetArraySize(sw.keys[k]);
            const cJSON *v = cJSON_GetArrayItem(sw.keys[k], (int)(rest % (uint64_t)n));
            rest /= (uint64_t)n;
            free(grid_asg[k]);
            grid_asg[k] = assignment(sw.keys[k]->string, v);
            applied[n_sets + k] = grid_asg[k];
            if (st == CZ_OK)
                st = cz_json_set_path(cfg, grid_asg[k], &err);
            cJSON_AddItemToObject(point, sw.keys[k]->string, cJSON_Duplicate(v, 1));
        }
        char where[512];
        snprintf(where, sizeof where, "%s (point %llu)", path, (unsigned long long)pt + 1);
        cz_config c;
        cz_metrics m;
        memset(&m, 0, sizeof m);
        cz_summary sum;
        cz_run_stats stats;
        cJSON *summary = NULL;
        double wall_s = 0;
        if (st == CZ_OK) {
            st = cz_cli_simulate(cfg, where, sw.base_dir, false, &c, &m, &sum, &stats, &summary,
                                 &wall_s, &err);
            if (st != CZ_OK)
                cz_cli_blame_set(&err, where, applied, n_sets + sw.n_keys, n_sets);
        }
        if (st != CZ_OK) {
            rc = cz_cli_fail(&err);
        } else {
            if (!quiet) {
                for (int k = 0; k < sw.n_keys; k++) {
                    char label[80];
                    int w = column_width(sw.keys[k]);
                    value_label(cJSON_GetObjectItemCaseSensitive(point, sw.keys[k]->string),
                                label, sizeof label);
                    printf(" %*.*s", w, w, label);
                }
                const cJSON *r;
                cJSON_ArrayForEach(r, sw.report)
                {
                    print_value(lookup(summary, r->valuestring));
                }
                printf("\n");
                fflush(stdout);
                fprintf(stderr, "sweep: point %llu/%llu done in %.2f s\n",
                        (unsigned long long)pt + 1, (unsigned long long)points, wall_s);
            }
            cJSON *row = cJSON_CreateObject();
            cJSON_AddItemToObject(row, "point", point);
            point = NULL;
            cJSON_AddItemToObject(row, "summary", summary);
            summary = NULL;
            cJSON_AddItemToArray(rows, row);
        }
        cz_metrics_free(&m);
        cJSON_Delete(summary);
        cJSON_Delete(point);
        cJSON_Delete(cfg);
    }
    /* what the paper reports for the same setting, printed beside our rows */
    const cJSON *paper = cJSON_GetObjectItemCaseSensitive(sw.json, "paper");
    if (rc == CZ_EXIT_OK && !quiet && paper) {
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
