/* cz_plot.c - a run's and a sweep's figures (cz_plot.h). */
#include "cz_plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_fleet.h"
#include "cz_gnuplot.h"
#include "cz_h5read.h"
#include "cz_h5stream.h"
#include "cz_json.h"
#include "cz_metrics.h"

/* Most autoregressive stages drawn as panels. */
#define PLOT_MAX_STAGES 8
_Static_assert(PLOT_MAX_STAGES == CZ_FLEET_MAX_STAGES, "one stage limit");

static void list_add(cz_plot_list *out, const char *name)
{
    CZ_ASSERT(out->n < CZ_PLOT_MAX_FIGS);
    snprintf(out->names[out->n++], sizeof out->names[0], "%s", name);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Adds the CDF of v[0..n) (finite values only, each with weight w[i] or 1) as a step
 * series. Sorts v (and w with it when given). */
static void add_cdf(cz_gp_panel *p, const char *label, double *v, const double *w, size_t n)
{
    size_t m = 0;
    p->ymin = 0.0;
    p->ymax = 1.02;
    /* one extra point: the step up from 0 at the smallest value */
    double *x = cz_xmalloc((n + 1) * sizeof *x), *y = cz_xmalloc((n + 1) * sizeof *y);
    if (!w) {
        for (size_t i = 0; i < n; i++)
            if (isfinite(v[i]))
                x[m++] = v[i];
        qsort(x, m, sizeof *x, cmp_double);
        for (size_t i = 0; i < m; i++)
            y[i] = (double)(i + 1) / (double)m;
    } else {
        /* weighted: sort (value, weight) pairs by value */
        double *pairs = cz_xmalloc((n ? n : 1) * 2 * sizeof *pairs);
        double total = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(v[i]) && w[i] > 0) {
                pairs[2 * m] = v[i];
                pairs[2 * m + 1] = w[i];
                total += w[i];
                m++;
            }
        qsort(pairs, m, 2 * sizeof *pairs, cmp_double);
        double acc = 0;
        for (size_t i = 0; i < m; i++) {
            acc += pairs[2 * i + 1];
            x[i] = pairs[2 * i];
            y[i] = acc / total;
        }
        free(pairs);
    }
    if (m > 0) {
        memmove(x + 1, x, m * sizeof *x);
        memmove(y + 1, y, m * sizeof *y);
        y[0] = 0.0;
        cz_gp_series_add(p, label, CZ_GP_STEPS, m + 1, x, y, NULL, NULL);
    }
    free(x);
    free(y);
}

/* A CDF panel's x axis on a log scale when its values span more than two decades. */
static void maybe_logx(cz_gp_panel *p)
{
    double lo = INFINITY, hi = 0;
    for (size_t j = 0; j < p->n_series; j++)
        for (size_t k = 0; k < p->series[j].n; k++) {
            double v = p->series[j].x[k];
            if (v > 0 && v < lo)
                lo = v;
            if (v > hi)
                hi = v;
        }
    p->logx = isfinite(lo) && hi / lo > 100.0;
    /* a log axis cannot hold a zero: drop the zeros' rows of the CDF */
    if (p->logx)
        for (size_t j = 0; j < p->n_series; j++)
            for (size_t k = 0; k < p->series[j].n; k++)
                if (p->series[j].x[k] <= 0)
                    p->series[j].x[k] = NAN;
}

/* The stage names of a results file, from its summary attribute ("stages"[i].stage);
 * "stage i" where it has none. Returns how many (at least 1). */
static size_t stage_names(const cJSON *summary, char names[PLOT_MAX_STAGES][64])
{
    size_t n = 0;
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(summary, "stages");
    const cJSON *it;
    cJSON_ArrayForEach(it, stages)
    {
        if (n == PLOT_MAX_STAGES)
            break;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "stage");
        snprintf(names[n], 64, "%s", cJSON_IsString(nm) ? nm->valuestring : "stage");
        n++;
    }
    if (n == 0)
        snprintf(names[n++], 64, "stage 0");
    return n;
}

typedef struct table {
    size_t n;
    size_t nf;
    double *col[24];
} table;

static void table_free(table *t)
{
    for (size_t i = 0; i < t->nf; i++)
        free(t->col[i]);
    memset(t, 0, sizeof *t);
}

/* Reads the named columns of `name`; an absent table reads as zero rows. */
static cz_status table_read(const char *h5, const char *name, const char *const *fields,
                            size_t nf, table *t, cz_err *err)
{
    CZ_ASSERT(nf <= CZ_ARRAY_LEN(t->col));
    memset(t, 0, sizeof *t);
    t->nf = nf;
    if (!cz_h5_has_table(h5, name)) {
        for (size_t i = 0; i < nf; i++)
            t->col[i] = cz_xmalloc(sizeof(double));
        return CZ_OK;
    }
    cz_status st = cz_h5_read_columns(h5, name, fields, nf, t->col, &t->n, err);
    if (st != CZ_OK)
        t->nf = 0;
    return st;
}

/* latency_cdf: TTFT, TPOT, E2E of the first stage's completed turns (per class when both
 * classes ran), ITL per stage, audio TTFP. */
static cz_status fig_latency(const char *h5, const char *dir, const char *title,
                             const char *subtitle, char stages[PLOT_MAX_STAGES][64],
                             size_t n_stages, cz_plot_list *out, cz_err *err)
{
    static const char *const rf[] = {"stage", "stream", "cls", "outcome", "ttft_s", "tpot_s",
                                     "e2el_s"};
    table rq, itl, au;
    cz_status st = table_read(h5, "requests", rf, CZ_ARRAY_LEN(rf), &rq, err);
    if (st != CZ_OK)
        return st;
    bool itl_stage = true;
    static const char *const itf[] = {"gap_s", "count", "stage"};
    st = table_read(h5, "itl", itf, 3, &itl, err);
    if (st == CZ_EFORMAT) { /* a file whose ITL gaps carry no stage */
        itl_stage = false;
        st = table_read(h5, "itl", itf, 2, &itl, err);
    }
    if (st != CZ_OK) {
        table_free(&rq);
        return st;
    }
    static const char *const af[] = {"ready_s", "first_audio_s"};
    if ((st = table_read(h5, "audio", af, 2, &au, err)) != CZ_OK) {
        table_free(&rq);
        table_free(&itl);
        return st;
    }
    bool classes[2] = {false, false};
    for (size_t i = 0; i < rq.n; i++)
        if (rq.col[0][i] == 0 && rq.col[1][i] == 0 && rq.col[2][i] >= 0 && rq.col[2][i] < 2)
            classes[(int)rq.col[2][i]] = true;
    bool split = classes[0] && classes[1];
    static const char *const cls_name[2] = {"rt", "be"};
    cz_gp_figure f;
    bool audio = au.n > 0;
    cz_gp_figure_init(&f, title, 2, audio ? 3 : 2);
    snprintf(f.subtitle, sizeof f.subtitle, "%s", subtitle);
    const char *const labels[3] = {"TTFT (ms)", "TPOT (ms)", "E2E latency (s)"};
    const double scale[3] = {1e3, 1e3, 1.0};
    const int col[3] = {4, 5, 6};
    double *v = cz_xmalloc((rq.n ? rq.n : 1) * sizeof *v);
    for (int k = 0; k < 3; k++) {
        char t[96];
        snprintf(t, sizeof t, "%s, completed turns", labels[k]);
        cz_gp_panel *p = cz_gp_panel_add(&f, t, labels[k], "fraction of turns");
        for (int c = 0; c < (split ? 2 : 1); c++) {
            size_t m = 0;
            for (size_t i = 0; i < rq.n; i++) {
                if (rq.col[0][i] != 0 || rq.col[1][i] != 0 ||
                    rq.col[3][i] != CZ_REQ_COMPLETED || (split && rq.col[2][i] != c))
                    continue;
                v[m++] = rq.col[col[k]][i] * scale[k];
            }
            char lab[128];
            snprintf(lab, sizeof lab, "%.64s%s", stages[0], split ? (c ? ", be" : ", rt") : "");
            (void)cls_name;
            add_cdf(p, lab, v, NULL, m);
        }
        maybe_logx(p);
        if (k == 1) { /* ITL beside TPOT */
            cz_gp_panel *q = cz_gp_panel_add(&f, "ITL (ms), every token gap", "ITL (ms)",
                                             "fraction of gaps");
            double *g = cz_xmalloc((itl.n ? itl.n : 1) * sizeof *g);
            double *w = cz_xmalloc((itl.n ? itl.n : 1) * sizeof *w);
            for (size_t s = 0; s < (itl_stage ? n_stages : 1); s++) {
                size_t m = 0;
                for (size_t i = 0; i < itl.n; i++) {
                    if (itl_stage && itl.col[2][i] != (double)s)
                        continue;
                    g[m] = itl.col[0][i] * 1e3;
                    w[m++] = itl.col[1][i];
                }
                add_cdf(q, itl_stage ? stages[s] : "all stages", g, w, m);
            }
            maybe_logx(q);
            free(g);
            free(w);
        }
    }
    if (audio) {
        cz_gp_panel *p = cz_gp_panel_add(&f, "audio TTFP (ms): end of speech to first audio",
                                         "audio TTFP (ms)", "fraction of spoken turns");
        double *a = cz_xmalloc(au.n * sizeof *a);
        for (size_t i = 0; i < au.n; i++)
            a[i] = (au.col[1][i] - au.col[0][i]) * 1e3;
        add_cdf(p, "spoken turns", a, NULL, au.n);
        maybe_logx(p);
        free(a);
    }
    free(v);
    st = cz_gp_render(&f, dir, "latency_cdf", err);
    if (st == CZ_OK)
        list_add(out, "latency_cdf");
    cz_gp_figure_free(&f);
    table_free(&rq);
    table_free(&itl);
    table_free(&au);
    return st;
}

static void layout(size_t n, int *rows, int *cols)
{
    *cols = n <= 1 ? 1 : 2;
    *rows = (int)((n + (size_t)*cols - 1) / (size_t)*cols);
}

/* A figure of n_panels panels laid out by layout(), titled "TITLE: WHAT" over `subtitle`. */
static void figure_init(cz_gp_figure *f, size_t n_panels, const char *title, const char *what,
                        const char *subtitle)
{
    int rows, cols;
    layout(n_panels, &rows, &cols);
    char t[256];
    snprintf(t, sizeof t, "%s: %s", title, what);
    cz_gp_figure_init(f, t, rows, cols);
    snprintf(f->subtitle, sizeof f->subtitle, "%s", subtitle);
}

/* What a results file's config (as run) says of the timeline: each autoregressive stage's
 * replicas (`pipeline.<stage>.replicas`, else 1; 0 without a config: the rows tell) and KV
 * pool per replica (`pipeline.<stage>.kv_blocks`, else `server.kv_blocks`; 0: derived from
 * memory, not recorded; a disaggregated config's pools as `disaggregation.<pool>`), and the
 * sampling interval (`sim.timeline_interval_s`, else 0.1). */
typedef struct timeline_config {
    uint32_t replicas[PLOT_MAX_STAGES];
    double pool[PLOT_MAX_STAGES];
    double interval_s;
    char router[64];
} timeline_config;

static double positive_num(const cJSON *j)
{
    return cJSON_IsNumber(j) && j->valuedouble > 0 ? j->valuedouble : 0;
}

static void timeline_config_read(const cJSON *cfg, char stages[PLOT_MAX_STAGES][64],
                                 size_t n_stages, timeline_config *tc)
{
    memset(tc, 0, sizeof *tc);
    const cJSON *iv = cz_json_get_path(cfg, "sim.timeline_interval_s");
    tc->interval_s = cJSON_IsNumber(iv) && iv->valuedouble >= 0 ? iv->valuedouble : 0.1;
    const cJSON *pipe = cJSON_GetObjectItemCaseSensitive(cfg, "pipeline");
    const cJSON *pd = cJSON_GetObjectItemCaseSensitive(cfg, "disaggregation");
    double pool = positive_num(cz_json_get_path(cfg, "server.kv_blocks"));
    for (size_t s = 0; s < n_stages; s++) {
        /* a disaggregated config's stages are its pools, "decode" and "prefill" */
        const cJSON *pl = cJSON_GetObjectItemCaseSensitive(pd ? pd : pipe, stages[s]);
        double r = positive_num(cJSON_GetObjectItemCaseSensitive(pl, "replicas"));
        if (r == 0 && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(pl, "gpus")))
            r = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(pl, "gpus"));
        tc->replicas[s] = !cfg ? 0 : r >= 1 && r < UINT32_MAX ? (uint32_t)r : 1;
        double own = positive_num(cJSON_GetObjectItemCaseSensitive(pl, "kv_blocks"));
        tc->pool[s] = own > 0 ? own : pool;
    }
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cfg, "router");
    if (cJSON_IsObject(rt))
        rt = cJSON_GetObjectItemCaseSensitive(rt, "policy");
    snprintf(tc->router, sizeof tc->router, "%s", cJSON_IsString(rt) ? rt->valuestring : "");
}

/* A stage's replicas drawn as distributions, under the panel title `what`: the 10-90 %
 * band, the median and the maximum over replicas of column `col` at each sample, times
 * `scale`. */
static cz_gp_panel *add_dist_panel(cz_gp_figure *f, const cz_fleet *fl, size_t s,
                                   const char *stage, const char *what, const char *ylabel,
                                   int col, double scale, double *t, double *y, double *lo,
                                   double *hi)
{
    char title[160];
    snprintf(title, sizeof title, "%.60s, %u replicas: %s", stage, fl->st[s].n_rep, what);
    cz_gp_panel *p = cz_gp_panel_add(f, title, "time (s)", ylabel);
    for (size_t k = 0; k < fl->n_bins; k++) {
        t[k] = (double)k * fl->bin_s;
        y[k] = cz_fleet_q(fl, s, k, col, CZ_FL_P50) * scale;
        lo[k] = cz_fleet_q(fl, s, k, col, CZ_FL_P10) * scale;
        hi[k] = cz_fleet_q(fl, s, k, col, CZ_FL_P90) * scale;
    }
    cz_gp_series_add(p, "10-90 % of replicas", CZ_GP_BAND, fl->n_bins, t, y, lo, hi);
    cz_gp_series_add(p, "median replica", CZ_GP_LINES, fl->n_bins, t, y, NULL, NULL);
    for (size_t k = 0; k < fl->n_bins; k++)
        y[k] = cz_fleet_q(fl, s, k, col, CZ_FL_MAX) * scale;
    cz_gp_series_add(p, "busiest replica (max)", CZ_GP_LINES, fl->n_bins, t, y, NULL, NULL);
    p->ymin = 0;
    return p;
}

/* The fleet's totals of columns cols[0..nc) at each sample, as lines (axis2[c]: right). */
static void add_totals(cz_gp_panel *p, const cz_fleet *fl, size_t s, const int *cols,
                       const char *const *labels, const bool *axis2, int nc, double *t,
                       double *y)
{
    for (int c = 0; c < nc; c++) {
        for (size_t k = 0; k < fl->n_bins; k++) {
            t[k] = (double)k * fl->bin_s;
            y[k] = fl->st[s].bsum[k * CZ_FL_NQ + (size_t)cols[c]];
        }
        cz_gp_series_add(p, labels[c], CZ_GP_LINES, fl->n_bins, t, y, NULL, NULL)->axis2 =
            axis2[c];
    }
    p->ymin = 0;
}

/* A small stage's totals at each of its rows, as steps (the form before fleets). */
static void add_row_totals(cz_gp_panel *p, const cz_fleet_stage *st, int col, const char *label,
                           bool axis2, double *y)
{
    for (size_t i = 0; i < st->n_rows; i++)
        y[i] = st->rsum[i * CZ_FL_NQ + (size_t)col];
    cz_gp_series_add(p, label, CZ_GP_STEPS, st->n_rows, st->rt, y, NULL, NULL)->axis2 = axis2;
}

/* kv_blocks and load: per-stage timelines; a stage of more than CZ_FLEET_MAX_LINES replicas
 * as distributions over its replicas and its totals, sampled every fl->bin_s. */
static void fig_timeline(cz_gp_figure *f, int which, const cz_fleet *fl,
                         const timeline_config *tc, char stages[PLOT_MAX_STAGES][64],
                         size_t n_stages)
{
    size_t n_max = fl->n_bins;
    for (size_t s = 0; s < n_stages; s++)
        if (fl->st[s].n_rows > n_max)
            n_max = fl->st[s].n_rows;
    n_max = n_max ? n_max : 1;
    double *t = cz_xmalloc(n_max * sizeof *t), *y = cz_xmalloc(n_max * sizeof *y);
    double *lo = cz_xmalloc(n_max * sizeof *lo), *hi = cz_xmalloc(n_max * sizeof *hi);
    for (size_t s = 0; s < n_stages; s++) {
        const cz_fleet_stage *st = &fl->st[s];
        if (which == 0 && st->fleet) {
            double pool = tc->pool[s];
            char what[96];
            if (pool > 0)
                snprintf(what, sizeof what, "GPU KV blocks used, %% of its pool of %.0f", pool);
            else
                snprintf(what, sizeof what, "GPU KV blocks used per replica");
            cz_gp_panel *p = add_dist_panel(f, fl, s, stages[s], what,
                                            pool > 0 ? "GPU KV blocks used (% of the pool)"
                                                     : "GPU KV blocks used",
                                            CZ_FL_KV_USED, pool > 0 ? 100.0 / pool : 1.0, t, y,
                                            lo, hi);
            if (pool > 0) {
                p->ymin = 0;
                p->ymax = 100;
            }
            char title[160];
            snprintf(title, sizeof title, "%.60s, %u replicas: fleet total", stages[s],
                     st->n_rep);
            p = cz_gp_panel_add(f, title, "time (s)", "GPU KV blocks");
            snprintf(p->y2label, sizeof p->y2label, "host-memory KV (tokens)");
            bool host = false;
            for (size_t k = 0; k < fl->n_bins; k++)
                host |= st->bsum[k * CZ_FL_NQ + CZ_FL_HOST] > 0;
            static const int kc[3] = {CZ_FL_KV_USED, CZ_FL_KV_IDLE, CZ_FL_HOST};
            static const char *const kl[3] = {"GPU: in use", "GPU: idle sessions' (of in use)",
                                              "host memory (tokens, right axis)"};
            static const bool k2[3] = {false, false, true};
            add_totals(p, fl, s, kc, kl, k2, host ? 3 : 2, t, y);
        } else if (which == 0) {
            cz_gp_panel *p = cz_gp_panel_add(f, stages[s], "time (s)", "GPU KV blocks");
            snprintf(p->y2label, sizeof p->y2label, "host-memory KV (tokens)");
            add_row_totals(p, st, CZ_FL_KV_USED, "GPU: in use", false, y);
            add_row_totals(p, st, CZ_FL_KV_IDLE, "GPU: idle sessions' (of in use)", false, y);
            bool host = false;
            for (size_t i = 0; i < st->n_rows; i++)
                host |= st->rsum[i * CZ_FL_NQ + CZ_FL_HOST] > 0;
            if (host)
                add_row_totals(p, st, CZ_FL_HOST, "host memory (tokens, right axis)", true, y);
        } else if (st->fleet) {
            add_dist_panel(f, fl, s, stages[s], "running requests per replica",
                           "running requests", CZ_FL_RUNNING, 1.0, t, y, lo, hi);
            add_dist_panel(f, fl, s, stages[s], "waiting requests per replica",
                           "waiting requests", CZ_FL_WAITING, 1.0, t, y, lo, hi);
            add_dist_panel(f, fl, s, stages[s], "batch tokens per replica", "batch tokens",
                           CZ_FL_BATCH, 1.0, t, y, lo, hi);
            char title[160];
            snprintf(title, sizeof title, "%.60s, %u replicas: fleet total", stages[s],
                     st->n_rep);
            cz_gp_panel *p = cz_gp_panel_add(f, title, "time (s)", "requests");
            snprintf(p->y2label, sizeof p->y2label, "batch tokens");
            static const int lc[3] = {CZ_FL_RUNNING, CZ_FL_WAITING, CZ_FL_BATCH};
            static const char *const ll[3] = {"running", "waiting",
                                              "batch tokens (right axis)"};
            static const bool l2[3] = {false, false, true};
            add_totals(p, fl, s, lc, ll, l2, 3, t, y);
        } else {
            cz_gp_panel *p = cz_gp_panel_add(f, stages[s], "time (s)", "requests");
            snprintf(p->y2label, sizeof p->y2label, "batch tokens");
            add_row_totals(p, st, CZ_FL_RUNNING, "running", false, y);
            add_row_totals(p, st, CZ_FL_WAITING, "waiting", false, y);
            add_row_totals(p, st, CZ_FL_BATCH, "batch tokens (right axis)", true, y);
        }
    }
    free(t);
    free(y);
    free(lo);
    free(hi);
}

typedef struct ranked {
    double v;
    uint32_t replica;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v)
        return (x->v > y->v) - (x->v < y->v);
    return (x->replica > y->replica) - (x->replica < y->replica);
}

/* One replica_balance panel: the per-replica values v[0..n) sorted, as filled steps over
 * the replicas' ranks, with the fleet's mean as a dashed line. */
static void add_balance_panel(cz_gp_figure *f, const char *stage, const double *v, uint32_t n,
                              double scale, const char *what, const char *ylabel)
{
    char title[160];
    snprintf(title, sizeof title, "%.60s, %u replicas: %s", stage, n, what);
    cz_gp_panel *p = cz_gp_panel_add(f, title, "replicas, least to most loaded", ylabel);
    ranked *rk = cz_xmalloc((n ? n : 1) * sizeof *rk);
    double *x = cz_xmalloc(((size_t)n + 1) * sizeof *x), *y = cz_xmalloc(((size_t)n + 1) * sizeof *y);
    double mean = 0;
    for (uint32_t r = 0; r < n; r++) {
        rk[r].v = v[r] * scale;
        rk[r].replica = r;
        mean += rk[r].v;
    }
    mean = n ? mean / n : 0;
    qsort(rk, n, sizeof *rk, cmp_ranked);
    for (uint32_t i = 0; i < n; i++) {
        x[i] = i;
        y[i] = rk[i].v;
    }
    /* the last replica's step ends at n */
    x[n] = n;
    y[n] = n ? rk[n - 1].v : 0;
    char label[128] = "replicas";
    if (n)
        snprintf(label, sizeof label, "replicas (max: replica %u, min: replica %u)",
                 rk[n - 1].replica, rk[0].replica);
    cz_gp_series_add(p, label, CZ_GP_FILLSTEPS, (size_t)n + 1, x, y, NULL, NULL);
    /* bars from 0 over exactly the replicas; the mean's label on the left, where the
     * least loaded replicas leave room above the line */
    p->xmin = 0;
    p->xmax = n;
    p->ymin = 0;
    p->hline = mean;
    p->hline_label_left = true;
    char m[32];
    /* three significant digits, without an exponent under a billion */
    snprintf(m, sizeof m, mean >= 1000 && mean < 1e9 ? "%.0f" : "%.3g", mean);
    if (n && mean > 0)
        snprintf(p->hline_label, sizeof p->hline_label, "fleet mean %s; max %.3gx, min %.3gx", m,
                 rk[n - 1].v / mean, rk[0].v / mean);
    else
        snprintf(p->hline_label, sizeof p->hline_label, "fleet mean %s", m);
    free(rk);
    free(x);
    free(y);
}

/* replica_balance: per fleet stage, each replica's time-averaged running requests and KV
 * use, sorted, against the fleet's mean. */
static cz_status fig_balance(const cz_fleet *fl, const timeline_config *tc,
                             char stages[PLOT_MAX_STAGES][64], size_t n_stages,
                             const char *dir, const char *title, const char *subtitle,
                             cz_plot_list *out, cz_err *err)
{
    size_t n_fleet = 0;
    char t[256];
    size_t len = (size_t)snprintf(t, sizeof t, "%s: replica balance,", title);
    for (size_t s = 0; s < n_stages; s++)
        if (fl->st[s].fleet && len < sizeof t)
            len += (size_t)snprintf(t + len, sizeof t - len, "%s %s (%u replicas)",
                                    n_fleet++ ? "," : "", stages[s], fl->st[s].n_rep);
    if (n_fleet == 0)
        return CZ_OK;
    if (tc->router[0] && len < sizeof t)
        snprintf(t + len, sizeof t - len, ", router %s", tc->router);
    cz_gp_figure f;
    cz_gp_figure_init(&f, t, (int)n_fleet, 2);
    snprintf(f.subtitle, sizeof f.subtitle, "%s", subtitle);
    for (size_t s = 0; s < n_stages; s++) {
        const cz_fleet_stage *st = &fl->st[s];
        if (!st->fleet)
            continue;
        add_balance_panel(&f, stages[s], st->mean_running, st->n_rep, 1.0,
                          "running requests, time-averaged", "mean running requests");
        double pool = tc->pool[s];
        add_balance_panel(&f, stages[s], st->mean_kv, st->n_rep, pool > 0 ? 100.0 / pool : 1.0,
                          "GPU KV blocks used, time-averaged",
                          pool > 0 ? "mean KV blocks used (% of the pool)" : "mean KV blocks used");
    }
    cz_status st = cz_gp_render(&f, dir, "replica_balance", err);
    if (st == CZ_OK)
        list_add(out, "replica_balance");
    cz_gp_figure_free(&f);
    return st;
}

/* The rate of running total `col` (+ `col2` when >= 0) of stage s over each rate interval
 * (fl->rate_stride samples) into y[0..n_rates), at its end t[]: per second, or (den >= 0)
 * per unit of running total `den` (NaN where that did not grow). */
static void bin_rates(const cz_fleet *fl, size_t s, int col, int col2, int den, double *t,
                      double *y)
{
    const double *b = fl->st[s].bsum;
    size_t m = fl->rate_stride;
    /* the totals at the sample before (0 before the first), as cz_fleet's replicas' rates */
    double z[CZ_FL_NQ] = {0};
    for (size_t j = 0; j < fl->n_rates; j++) {
        t[j] = (double)(j * m) * fl->bin_s;
        const double *now = &b[j * m * CZ_FL_NQ], *pr = j ? &b[(j - 1) * m * CZ_FL_NQ] : z;
        double v = now[col] - pr[col] + (col2 >= 0 ? now[col2] - pr[col2] : 0);
        double d = den >= 0 ? now[den] - pr[den] : j ? fl->bin_s * (double)m : 0;
        y[j] = d > 0 ? v / d : den >= 0 ? NAN : 0;
    }
}

/* The band, median and maximum over a fleet stage's replicas of rate r at each sample,
 * times `scale`. */
static void add_rate_dist(cz_gp_panel *p, const cz_fleet *fl, size_t s, int r, double scale,
                          double *t, double *y, double *lo, double *hi)
{
    size_t n = fl->n_rates;
    for (size_t j = 0; j < n; j++) {
        t[j] = (double)(j * fl->rate_stride) * fl->bin_s;
        y[j] = cz_fleet_qr(fl, s, j, r, CZ_FL_P50) * scale;
        lo[j] = cz_fleet_qr(fl, s, j, r, CZ_FL_P10) * scale;
        hi[j] = cz_fleet_qr(fl, s, j, r, CZ_FL_P90) * scale;
    }
    cz_gp_series_add(p, "10-90 % of replicas", CZ_GP_BAND, n, t, y, lo, hi);
    cz_gp_series_add(p, "median replica", CZ_GP_LINES, n, t, y, NULL, NULL);
    for (size_t j = 0; j < n; j++)
        y[j] = cz_fleet_qr(fl, s, j, r, CZ_FL_MAX) * scale;
    cz_gp_series_add(p, r == CZ_FL_R_HIT ? "best replica (max)" : "busiest replica (max)",
                     CZ_GP_LINES, n, t, y, NULL, NULL);
}

/* prefix_cache and kv_transfers: per stage that looked prefixes up (moved KV between pools),
 * the hit rate (KV tokens moved per second) over each sample's interval: the stage's, and
 * for a fleet its distribution over replicas. */
static cz_status fig_rates(const cz_fleet *fl, char stages[PLOT_MAX_STAGES][64],
                           size_t n_stages, const char *dir, const char *title,
                           const char *subtitle, cz_plot_list *out, cz_err *err)
{
    cz_status st = CZ_OK;
    size_t n = fl->n_rates ? fl->n_rates : 1;
    double *t = cz_xmalloc(n * sizeof *t), *y = cz_xmalloc(n * sizeof *y);
    double *lo = cz_xmalloc(n * sizeof *lo), *hi = cz_xmalloc(n * sizeof *hi);
    for (int which = 0; which < 2 && st == CZ_OK; which++) {
        bool has[PLOT_MAX_STAGES] = {false};
        size_t n_panels = 0;
        for (size_t s = 0; s < n_stages; s++) {
            const double *sum = fl->st[s].sum;
            has[s] = which == 0 ? sum[CZ_FL_PREFIX_Q] > 0
                                : sum[CZ_FL_PULLED] + sum[CZ_FL_SENT] > 0;
            n_panels += has[s];
        }
        if (n_panels == 0)
            continue;
        cz_gp_figure f;
        figure_init(&f, n_panels, title,
                    which == 0 ? "prefix-cache hit rate" : "KV transfers between pools", subtitle);
        for (size_t s = 0; s < n_stages; s++) {
            if (!has[s])
                continue;
            const cz_fleet_stage *fs = &fl->st[s];
            char pt[160];
            if (which == 0) {
                snprintf(pt, sizeof pt, "%.60s, %u replica%s: hit rate per %.3g s", stages[s],
                         fs->n_rep, fs->n_rep == 1 ? "" : "s",
                         fl->bin_s * (double)fl->rate_stride);
                cz_gp_panel *p = cz_gp_panel_add(&f, pt, "time (s)", "prefix-cache hit rate (%)");
                snprintf(p->y2label, sizeof p->y2label, "tokens looked up per second");
                if (fs->fleet)
                    add_rate_dist(p, fl, s, CZ_FL_R_HIT, 100.0, t, y, lo, hi);
                bin_rates(fl, s, CZ_FL_PREFIX_H, -1, CZ_FL_PREFIX_Q, t, y);
                for (size_t j = 0; j < fl->n_rates; j++)
                    y[j] *= 100.0;
                cz_gp_series_add(p, fs->fleet ? "fleet" : "all replicas", CZ_GP_LINES,
                                 fl->n_rates, t, y, NULL, NULL);
                bin_rates(fl, s, CZ_FL_PREFIX_Q, -1, -1, t, y);
                cz_gp_series_add(p, "tokens looked up (right axis)", CZ_GP_LINES, fl->n_rates, t,
                                 y, NULL, NULL)->axis2 = true;
                p->ymin = 0;
                p->ymax = 100;
            } else {
                bool pulled = fs->sum[CZ_FL_PULLED] > 0;
                snprintf(pt, sizeof pt, "%.60s, %u replica%s: KV %s per %.3g s", stages[s],
                         fs->n_rep, fs->n_rep == 1 ? "" : "s",
                         pulled ? "pulled in" : "sent out", fl->bin_s * (double)fl->rate_stride);
                cz_gp_panel *p = cz_gp_panel_add(&f, pt, "time (s)", "KV tokens per second");
                if (fs->fleet)
                    add_rate_dist(p, fl, s, CZ_FL_R_MOVED, 1.0, t, y, lo, hi);
                bin_rates(fl, s, CZ_FL_PULLED, CZ_FL_SENT, -1, t, y);
                cz_gp_series_add(p, fs->fleet ? "fleet total" : "all replicas", CZ_GP_LINES,
                                 fl->n_rates, t, y, NULL, NULL);
                p->ymin = 0;
            }
        }
        const char *name = which == 0 ? "prefix_cache" : "kv_transfers";
        st = cz_gp_render(&f, dir, name, err);
        cz_gp_figure_free(&f);
        if (st == CZ_OK)
            list_add(out, name);
    }
    free(t);
    free(y);
    free(lo);
    free(hi);
    return st;
}

/* kv_blocks, load, (fleets) replica_balance, prefix_cache and kv_transfers, from one pass
 * over /timeline. */
static cz_status fig_timelines(const char *h5, const cJSON *cfg, const char *dir,
                               const char *title, const char *subtitle,
                               char stages[PLOT_MAX_STAGES][64], size_t n_stages,
                               cz_plot_list *out, cz_err *err)
{
    timeline_config tc;
    timeline_config_read(cfg, stages, n_stages, &tc);
    cz_fleet fl;
    cz_status st = cz_fleet_read(h5, n_stages, tc.replicas, tc.interval_s, &fl, err);
    if (st != CZ_OK)
        return st;
    if (fl.rows == 0) {
        cz_fleet_free(&fl);
        return CZ_OK;
    }
    for (int which = 0; which < 2 && st == CZ_OK; which++) {
        size_t n_panels = 0;
        for (size_t s = 0; s < n_stages; s++)
            n_panels += !fl.st[s].fleet ? 1 : which == 0 ? 2 : 4;
        cz_gp_figure f;
        figure_init(&f, n_panels, title,
                    which == 0 ? "KV cache per tier" : "requests and batch size", subtitle);
        fig_timeline(&f, which, &fl, &tc, stages, n_stages);
        const char *name = which == 0 ? "kv_blocks" : "load";
        st = cz_gp_render(&f, dir, name, err);
        cz_gp_figure_free(&f);
        if (st == CZ_OK)
            list_add(out, name);
    }
    if (st == CZ_OK)
        st = fig_balance(&fl, &tc, stages, n_stages, dir, title, subtitle, out, err);
    if (st == CZ_OK)
        st = fig_rates(&fl, stages, n_stages, dir, title, subtitle, out, err);
    cz_fleet_free(&fl);
    return st;
}

/* frames: each frame's latency at its tick, empty frames apart; the gateway's cap and the
 * live sessions over time when the file has them (/gateway). */
static cz_status fig_frames(const char *h5, const char *dir, const char *title,
                            const char *subtitle, cz_plot_list *out, cz_err *err)
{
    static const char *const ff[] = {"tick_s", "latency_s", "empty"};
    table fr, gw;
    cz_status st = table_read(h5, "frames", ff, 3, &fr, err);
    if (st != CZ_OK)
        return st;
    if (fr.n == 0) {
        table_free(&fr);
        return CZ_OK;
    }
    static const char *const gf[] = {"t_s", "cap", "live"};
    if ((st = table_read(h5, "gateway", gf, 3, &gw, err)) != CZ_OK) {
        table_free(&fr);
        return st;
    }
    double *x[2], *y[2];
    size_t m[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        x[k] = cz_xmalloc(fr.n * sizeof *x[k]);
        y[k] = cz_xmalloc(fr.n * sizeof *y[k]);
    }
    for (size_t i = 0; i < fr.n; i++) {
        int k = fr.col[2][i] != 0;
        x[k][m[k]] = fr.col[0][i];
        y[k][m[k]++] = fr.col[1][i] * 1e3;
    }
    char t[256];
    snprintf(t, sizeof t, "%s: periodic streams", title);
    cz_gp_figure f;
    cz_gp_figure_init(&f, t, 1, 1);
    snprintf(f.subtitle, sizeof f.subtitle, "%s", subtitle);
    cz_gp_panel *p = cz_gp_panel_add(&f, "frame latency at its tick", "time (s)",
                                     "frame latency (ms)");
    cz_gp_series_add(p, "served frames", CZ_GP_POINTS, m[0], x[0], y[0], NULL, NULL);
    cz_gp_series_add(p, "empty frames", CZ_GP_POINTS, m[1], x[1], y[1], NULL, NULL);
    if (gw.n > 0) {
        snprintf(p->y2label, sizeof p->y2label, "sessions");
        double *cap = cz_xmalloc(gw.n * sizeof *cap);
        for (size_t i = 0; i < gw.n; i++)
            cap[i] = gw.col[1][i] >= (double)UINT32_MAX ? NAN : gw.col[1][i]; /* unbounded */
        cz_gp_series_add(p, "admission cap (right axis)", CZ_GP_STEPS, gw.n, gw.col[0], cap,
                         NULL, NULL)
            ->axis2 = true;
        cz_gp_series_add(p, "live sessions (right axis)", CZ_GP_STEPS, gw.n, gw.col[0],
                         gw.col[2], NULL, NULL)
            ->axis2 = true;
        free(cap);
    }
    st = cz_gp_render(&f, dir, "frames", err);
    if (st == CZ_OK)
        list_add(out, "frames");
    cz_gp_figure_free(&f);
    for (int k = 0; k < 2; k++) {
        free(x[k]);
        free(y[k]);
    }
    table_free(&fr);
    table_free(&gw);
    return st;
}

/* stage_tokens: generated against heard tokens per autoregressive stage. */
static cz_status fig_stage_tokens(const char *h5, const char *dir, const char *title,
                                  const char *subtitle, char stages[PLOT_MAX_STAGES][64],
                                  size_t n_stages, cz_plot_list *out, cz_err *err)
{
    if (n_stages < 2)
        return CZ_OK;
    static const char *const rf[] = {"stage", "output_tokens", "heard_tokens"};
    table rq;
    cz_status st = table_read(h5, "requests", rf, 3, &rq, err);
    if (st != CZ_OK)
        return st;
    double gen[PLOT_MAX_STAGES] = {0}, heard[PLOT_MAX_STAGES] = {0}, x[PLOT_MAX_STAGES];
    for (size_t i = 0; i < rq.n; i++) {
        size_t s = (size_t)rq.col[0][i];
        if (s < n_stages) {
            gen[s] += rq.col[1][i];
            heard[s] += rq.col[2][i];
        }
    }
    const char *names[PLOT_MAX_STAGES];
    for (size_t s = 0; s < n_stages; s++) {
        x[s] = (double)s;
        names[s] = stages[s];
    }
    char t[256];
    snprintf(t, sizeof t, "%s: tokens per stage", title);
    cz_gp_figure f;
    cz_gp_figure_init(&f, t, 1, 1);
    snprintf(f.subtitle, sizeof f.subtitle, "%s", subtitle);
    cz_gp_panel *p = cz_gp_panel_add(&f, "generated and heard (the rest was cut by barge-in)",
                                     "stage", "tokens");
    cz_gp_panel_xtics(p, names, n_stages);
    cz_gp_series_add(p, "generated", CZ_GP_BARS, n_stages, x, gen, NULL, NULL);
    cz_gp_series_add(p, "heard", CZ_GP_BARS, n_stages, x, heard, NULL, NULL);
    st = cz_gp_render(&f, dir, "stage_tokens", err);
    if (st == CZ_OK)
        list_add(out, "stage_tokens");
    cz_gp_figure_free(&f);
    table_free(&rq);
    return st;
}

cz_status cz_plot_timeline(const char *h5, const char *column, uint32_t stage, double **t,
                           double **v, size_t *n, cz_err *err)
{
    *t = *v = NULL;
    *n = 0;
    const char *const tf[] = {"t_s", "stage", "replica", column};
    cz_h5_stream in;
    cz_status st = CZ_OK;
    size_t m = 0, cap = 0, n_rep = 0, got;
    double *tt = NULL, *vv = NULL, *last = NULL, sum = 0;
    /* an absent table reads as zero rows */
    if (cz_h5_has_table(h5, "timeline") &&
        (st = cz_h5_stream_open(h5, "timeline", tf, 4, 0, &in, err)) == CZ_OK) {
        /* one pass: each row replaces its replica's latest value in the running total */
        while ((st = cz_h5_stream_next(&in, &got, err)) == CZ_OK && got > 0) {
            for (size_t i = 0; i < got; i++) {
                double rd = in.col[2][i];
                if (in.col[1][i] != stage || !(rd >= 0 && rd < (double)UINT32_MAX))
                    continue;
                size_t r = (size_t)rd;
                if (r >= n_rep) {
                    size_t nr = r + 1 > 2 * n_rep ? r + 1 : 2 * n_rep;
                    last = cz_xrealloc(last, nr, sizeof *last);
                    memset(last + n_rep, 0, (nr - n_rep) * sizeof *last);
                    n_rep = nr;
                }
                sum += in.col[3][i] - last[r];
                last[r] = in.col[3][i];
                if (m == cap) {
                    cap = cap ? 2 * cap : 256;
                    tt = cz_xrealloc(tt, cap, sizeof *tt);
                    vv = cz_xrealloc(vv, cap, sizeof *vv);
                }
                tt[m] = in.col[0][i];
                vv[m++] = sum;
            }
        }
        cz_h5_stream_close(&in);
    }
    free(last);
    if (st != CZ_OK) {
        free(tt);
        free(vv);
        return st;
    }
    *t = tt ? tt : cz_xmalloc(sizeof **t);
    *v = vv ? vv : cz_xmalloc(sizeof **v);
    *n = m;
    return CZ_OK;
}

/* The differences cz_plot_overrides collects, each "K=V" or "K removed". */
typedef struct diff_list {
    char **items;
    size_t n, cap;
} diff_list;

static void diff_push(diff_list *d, const char *path, const cJSON *v)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 8;
        d->items = cz_xrealloc(d->items, d->cap, sizeof *d->items);
    }
    char *label = v ? cz_json_value_label(v) : NULL;
    size_t len = strlen(path) + (label ? strlen(label) : 0) + 16;
    char *item = cz_xmalloc(len);
    /* a long value (a whole object or array) is cut: the title has room for names */
    if (label)
        snprintf(item, len, "%s=%.60s%s", path, label, strlen(label) > 60 ? "..." : "");
    else
        snprintf(item, len, "%s removed", path);
    free(label);
    d->items[d->n++] = item;
}

/* Whether `path` is a key of `skip` or under one. */
static bool diff_skipped(const char *path, const cJSON *skip)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, skip)
    {
        size_t kl = strlen(w->string);
        if (strncmp(path, w->string, kl) == 0 && (path[kl] == '\0' || path[kl] == '.'))
            return true;
    }
    return false;
}

/* Collects where `run` (at the dotted key `path`, "" at the top) differs from `base` (NULL:
 * absent there). */
static void diff_walk(const cJSON *base, const cJSON *run, const char *path, const cJSON *skip,
                      diff_list *d)
{
    if (path[0] && diff_skipped(path, skip))
        return;
    if (cJSON_IsObject(run) && (!base || cJSON_IsObject(base))) {
        const cJSON *m;
        cJSON_ArrayForEach(m, run)
        {
            size_t len = strlen(path) + strlen(m->string) + 2;
            char *child = cz_xmalloc(len);
            snprintf(child, len, "%s%s%s", path, path[0] ? "." : "", m->string);
            diff_walk(base ? cJSON_GetObjectItemCaseSensitive(base, m->string) : NULL, m, child,
                      skip, d);
            free(child);
        }
        cJSON_ArrayForEach(m, base)
        {
            if (cJSON_HasObjectItem(run, m->string))
                continue;
            size_t len = strlen(path) + strlen(m->string) + 2;
            char *child = cz_xmalloc(len);
            snprintf(child, len, "%s%s%s", path, path[0] ? "." : "", m->string);
            if (!diff_skipped(child, skip))
                diff_push(d, child, NULL);
            free(child);
        }
        return;
    }
    if (!base || !cJSON_Compare(base, run, true))
        diff_push(d, path, run);
}

void cz_plot_overrides(const cJSON *run, const cJSON *base, const char *base_name,
                       const cJSON *skip, char *buf, size_t n)
{
    CZ_ASSERT(n > 0);
    buf[0] = '\0';
    if (!base || !cJSON_IsObject(run))
        return;
    diff_list d = {0};
    diff_walk(base, run, "", skip, &d);
    if (d.n > 0) {
        char tail[320];
        snprintf(tail, sizeof tail, " (against %.280s)", base_name ? base_name : "its base");
        size_t len = (size_t)snprintf(buf, n, "run with ");
        size_t shown = 0;
        /* room kept for the tail and "... and N more" */
        size_t keep = strlen(tail) + 24;
        for (size_t i = 0; i < d.n; i++) {
            size_t need = strlen(d.items[i]) + (shown ? 2 : 0);
            if (len + need + keep >= n)
                break;
            len += (size_t)snprintf(buf + len, n - len, "%s%s", shown ? ", " : "", d.items[i]);
            shown++;
        }
        if (shown < d.n && len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s... and %zu more", shown ? ", " : "",
                                    d.n - shown);
        if (len < n)
            snprintf(buf + len, n - len, "%s", tail);
    }
    for (size_t i = 0; i < d.n; i++)
        free(d.items[i]);
    free(d.items);
}

cz_status cz_plot_results(const char *h5, const cJSON *base, const char *base_name,
                          const char *dir, cz_plot_list *out, cz_err *err)
{
    char *text = NULL;
    cz_status st = cz_h5_read_str_attr(h5, "summary", &text, err);
    if (st == CZ_ENOTFOUND)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: no 'summary' attribute: not a cadenza results file (expected "
                          "the output of `cadenza sim -o` or `cadenza replay -o`)",
                          h5);
    if (st != CZ_OK)
        return st;
    cJSON *summary = cJSON_Parse(text);
    free(text);
    if (!summary)
        return cz_err_set(err, CZ_EFORMAT, "%s: the 'summary' attribute is not JSON", h5);
    char stages[PLOT_MAX_STAGES][64];
    size_t n_stages = stage_names(summary, stages);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(summary, "config");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cfg, "name");
    const cJSON *drv = cJSON_GetObjectItemCaseSensitive(summary, "driver");
    char title[160], sub[sizeof ((cz_gp_figure *)0)->subtitle];
    snprintf(title, sizeof title, "%s (%s)", cJSON_IsString(nm) ? nm->valuestring : h5,
             cJSON_IsString(drv) ? drv->valuestring : "sim");
    cz_plot_overrides(cfg, base, base_name, NULL, sub, sizeof sub);
    if ((st = fig_latency(h5, dir, title, sub, stages, n_stages, out, err)) == CZ_OK &&
        (st = fig_timelines(h5, cfg, dir, title, sub, stages, n_stages, out, err)) == CZ_OK &&
        (st = fig_frames(h5, dir, title, sub, out, err)) == CZ_OK)
        st = fig_stage_tokens(h5, dir, title, sub, stages, n_stages, out, err);
    cJSON_Delete(summary);
    return st;
}

cz_status cz_plot_read_rows(const char *path, cJSON **rows, cz_err *err)
{
    *rows = NULL;
    FILE *fp = fopen(path, "r");
    if (!fp)
        return cz_err_set(err, CZ_EIO, "cannot open '%s': %s", path, strerror(errno));
    cJSON *arr = cJSON_CreateArray();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    cz_status st = CZ_OK;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        if (lineno == 1) {
            size_t bom = cz_text_bom(line, (size_t)len);
            memmove(line, line + bom, (size_t)len - bom + 1);
            len -= (ssize_t)bom;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        cJSON *row = cJSON_ParseWithLength(line, (size_t)len);
        const cJSON *point = cJSON_GetObjectItemCaseSensitive(row, "point");
        if (!cJSON_IsObject(row) || !cJSON_IsObject(point) ||
            !(cJSON_HasObjectItem(row, "summary") || cJSON_HasObjectItem(row, "summaries"))) {
            cJSON_Delete(row);
            st = cz_err_set(err, CZ_EFORMAT,
                            "%s:%ld: expected a sweep row: a JSON object with a \"point\" "
                            "object and a \"summary\" (the output of `cadenza sweep -o`)",
                            path, lineno);
            break;
        }
        cJSON_AddItemToArray(arr, row);
    }
    if (st == CZ_OK && ferror(fp))
        st = cz_err_set(err, CZ_EIO, "cannot read '%s': %s", path, strerror(errno));
    free(line);
    fclose(fp);
    if (st == CZ_OK && cJSON_GetArraySize(arr) == 0)
        st = cz_err_set(err, CZ_EFORMAT, "%s: no sweep rows", path);
    if (st != CZ_OK) {
        cJSON_Delete(arr);
        return st;
    }
    *rows = arr;
    return CZ_OK;
}

bool cz_plot_point_matches(const cJSON *point, const cJSON *where)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, where)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(point, w->string);
        if (!v || !cJSON_Compare(v, w, true))
            return false;
    }
    return true;
}

double cz_plot_row_value(const cJSON *row, const char *metric, double *lo, double *hi)
{
    double v = NAN, l = NAN, h = NAN;
    const cJSON *mean = cJSON_GetObjectItemCaseSensitive(row, "mean");
    if (cJSON_IsObject(mean)) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(mean, metric);
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(row, "ci95"), metric);
        if (cJSON_IsNumber(m))
            v = l = h = m->valuedouble;
        if (cJSON_IsArray(ci) && cJSON_GetArraySize(ci) == 2 &&
            cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) && cJSON_IsNumber(cJSON_GetArrayItem(ci, 1))) {
            l = cJSON_GetArrayItem(ci, 0)->valuedouble;
            h = cJSON_GetArrayItem(ci, 1)->valuedouble;
        }
    } else {
        const cJSON *m = cz_json_get_path(cJSON_GetObjectItemCaseSensitive(row, "summary"), metric);
        if (cJSON_IsNumber(m))
            v = l = h = m->valuedouble;
    }
    if (lo)
        *lo = l;
    if (hi)
        *hi = h;
    return v;
}

/* The sweep description a row carries ("sweep": {"name", "report", "paper_values"}). */
static const cJSON *row_sweep(const cJSON *rows)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, 0), "sweep");
}

/* The grid keys of the rows (the first row's point keys) and how many distinct values
 * each takes; whether all its values are numbers. */
typedef struct grid_key {
    const char *key;
    size_t n_values;
    bool numeric;
} grid_key;

static size_t grid_keys(const cJSON *rows, grid_key *keys, size_t max)
{
    size_t n = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, 0), "point"))
    {
        if (n == max)
            break;
        grid_key *g = &keys[n++];
        g->key = k->string;
        g->numeric = true;
        g->n_values = 0;
        int nr = cJSON_GetArraySize(rows);
        for (int i = 0; i < nr; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, i), "point"), k->string);
            g->numeric &= cJSON_IsNumber(v);
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = cJSON_Compare(v,
                                     cJSON_GetObjectItemCaseSensitive(
                                         cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, j), "point"),
                                         k->string),
                                     true);
            if (!seen)
                g->n_values++;
        }
    }
    return n;
}

/* A figure name's characters: letters, digits, '_', '-' and '.'; others become '_'. */
static void safe_name(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            *s = '_';
}

/* The label of a row's line: the values of the grid keys other than x that vary. */
/* The shortest dotted suffix of keys[i].key that no other key ends with ("replicas"; with
 * disaggregation.prefill.replicas beside disaggregation.decode.replicas, "prefill.replicas"). */
static const char *short_key_of(const grid_key *keys, size_t nk, size_t i)
{
    const char *k = keys[i].key;
    const char *s = k + strlen(k);
    for (;;) {
        /* extend to the previous component */
        while (s > k && s[-1] != '.')
            s--;
        size_t ls = strlen(s);
        bool shared = false;
        for (size_t j = 0; j < nk && !shared; j++) {
            size_t lj = strlen(keys[j].key);
            shared = j != i && lj >= ls && strcmp(keys[j].key + lj - ls, s) == 0 &&
                     (lj == ls || keys[j].key[lj - ls - 1] == '.');
        }
        if (!shared || s == k)
            return s;
        s--; /* onto the dot */
    }
}

static void line_label(const cJSON *point, const grid_key *keys, size_t nk, const char *x,
                       char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < nk; i++) {
        if (strcmp(keys[i].key, x) == 0 || keys[i].n_values < 2)
            continue;
        char *v = cz_json_value_label(cJSON_GetObjectItemCaseSensitive(point, keys[i].key));
        const char *short_key = short_key_of(keys, nk, i);
        bool bare = strcmp(short_key, "scheduler") == 0; /* a policy reads as itself */
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s", len ? ", " : "",
                                    bare ? "" : short_key, bare ? "" : "=", v);
        free(v);
    }
    if (!buf[0])
        snprintf(buf, n, "%s", "cadenza");
}

static cz_status one_metric(const cJSON *rows, const cz_plot_sweep_opts *o, const char *metric,
                            const char *x, const grid_key *keys, size_t nk, bool x_numeric,
                            const char *dir, cz_plot_list *out, cz_err *err)
{
    const cJSON *sw = row_sweep(rows);
    const cJSON *swname = cJSON_GetObjectItemCaseSensitive(sw, "name");
    int nr = cJSON_GetArraySize(rows);
    double ys = o->y_scale > 0 ? o->y_scale : 1.0;
    /* categorical x: the distinct values in first-seen order */
    const cJSON *cats[256];
    size_t n_cats = 0;
    char title[200];
    snprintf(title, sizeof title, "%s%s%s", o->title ? o->title : (cJSON_IsString(swname) ? swname->valuestring : "sweep"),
             o->title ? "" : ": ", o->title ? "" : metric);
    cz_gp_figure f;
    cz_gp_figure_init(&f, title, 1, 1);
    if (o->base) {
        /* what every run changed from the base beyond its point: the same in every row */
        const cJSON *r0 = cJSON_GetArrayItem(rows, 0);
        const cJSON *s0 = cJSON_GetObjectItemCaseSensitive(r0, "summary");
        if (!s0)
            s0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r0, "summaries"), 0);
        cJSON *skip = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r0, "point"), 1);
        if (!skip)
            skip = cJSON_CreateObject();
        if (cJSON_HasObjectItem(r0, "seeds")) /* each run's seed is the sweep's */
            cJSON_AddNullToObject(skip, "seed");
        cz_plot_overrides(cJSON_GetObjectItemCaseSensitive(s0, "config"), o->base, o->base_name,
                          skip, f.subtitle, sizeof f.subtitle);
        cJSON_Delete(skip);
    }
    if (o->note)
        snprintf(f.note, sizeof f.note, "%s", o->note);
    cz_gp_panel *p = cz_gp_panel_add(&f, "", o->xlabel ? o->xlabel : x, o->ylabel ? o->ylabel : metric);
    p->logy = o->logy;
    p->hline = o->hline;
    if (o->hline_label)
        snprintf(p->hline_label, sizeof p->hline_label, "%s", o->hline_label);
    bool *done = cz_xcalloc((size_t)nr + 1, sizeof *done);
    double *xs = cz_xmalloc(((size_t)nr + 1) * sizeof *xs);
    double *yv = cz_xmalloc(((size_t)nr + 1) * sizeof *yv);
    double *lo = cz_xmalloc(((size_t)nr + 1) * sizeof *lo);
    double *hi = cz_xmalloc(((size_t)nr + 1) * sizeof *hi);
    bool any_ci = false, any_row = false;
    for (int i = 0; i < nr; i++) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, i), "point");
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(pt, x);
        if (!x_numeric) {
            bool seen = false;
            for (size_t c = 0; c < n_cats && !seen; c++)
                seen = cJSON_Compare(cats[c], xv, true);
            if (!seen && n_cats < CZ_ARRAY_LEN(cats))
                cats[n_cats++] = xv;
        }
        if (cJSON_HasObjectItem(cJSON_GetArrayItem(rows, i), "mean"))
            any_ci = true;
    }
    for (int i = 0; i < nr; i++) {
        if (done[i])
            continue;
        const cJSON *ri = cJSON_GetArrayItem(rows, i);
        const cJSON *pi = cJSON_GetObjectItemCaseSensitive(ri, "point");
        if (o->where && !cz_plot_point_matches(pi, o->where)) {
            done[i] = true;
            continue;
        }
        char label[128];
        line_label(pi, keys, nk, x, label, sizeof label);
        size_t m = 0;
        for (int j = i; j < nr; j++) {
            const cJSON *rj = cJSON_GetArrayItem(rows, j);
            const cJSON *pj = cJSON_GetObjectItemCaseSensitive(rj, "point");
            if (done[j])
                continue;
            char lj[128];
            line_label(pj, keys, nk, x, lj, sizeof lj);
            if (strcmp(lj, label) != 0 || (o->where && !cz_plot_point_matches(pj, o->where)))
                continue;
            done[j] = true;
            const cJSON *xv = cJSON_GetObjectItemCaseSensitive(pj, x);
            if (x_numeric) {
                xs[m] = xv->valuedouble;
            } else {
                xs[m] = NAN;
                for (size_t c = 0; c < n_cats; c++)
                    if (cJSON_Compare(cats[c], xv, true))
                        xs[m] = (double)c;
            }
            yv[m] = cz_plot_row_value(rj, metric, &lo[m], &hi[m]) * ys;
            lo[m] *= ys;
            hi[m] *= ys;
            m++;
        }
        any_row = true;
        cz_gp_series_add(p, label, any_ci ? CZ_GP_ERRORLINES : CZ_GP_LINESPOINTS, m, xs, yv, lo,
                         hi);
    }
    if (!x_numeric) {
        const char *names[256];
        char bufs[256][64];
        for (size_t c = 0; c < n_cats; c++) {
            char *l = cz_json_value_label(cats[c]);
            snprintf(bufs[c], sizeof bufs[c], "%s", l);
            free(l);
            names[c] = bufs[c];
        }
        cz_gp_panel_xtics(p, names, n_cats);
    }
    /* the papers' values for this metric: one series per label */
    const cJSON *pvs = cJSON_GetObjectItemCaseSensitive(sw, "paper_values");
    int n_pv = cJSON_GetArraySize(pvs);
    bool *drawn = cz_xcalloc((size_t)n_pv + 1, sizeof *drawn);
    double *px = cz_xmalloc(((size_t)n_pv + 1) * sizeof *px);
    double *py = cz_xmalloc(((size_t)n_pv + 1) * sizeof *py);
    for (int a = 0; a < n_pv; a++) {
        const cJSON *pa = cJSON_GetArrayItem(pvs, a);
        const cJSON *la = cJSON_GetObjectItemCaseSensitive(pa, "label");
        const char *lab_a = cJSON_IsString(la) ? la->valuestring : metric;
        size_t m = 0;
        for (int b = a; b < n_pv; b++) {
            const cJSON *pb = cJSON_GetArrayItem(pvs, b);
            const cJSON *mb = cJSON_GetObjectItemCaseSensitive(pb, "metric");
            const cJSON *xb = cJSON_GetObjectItemCaseSensitive(pb, "x");
            const cJSON *vb = cJSON_GetObjectItemCaseSensitive(pb, "value");
            const cJSON *lb = cJSON_GetObjectItemCaseSensitive(pb, "label");
            if (drawn[b] || !cJSON_IsString(mb) || strcmp(mb->valuestring, metric) != 0 ||
                !cJSON_IsNumber(xb) || !cJSON_IsNumber(vb) ||
                strcmp(cJSON_IsString(lb) ? lb->valuestring : metric, lab_a) != 0)
                continue;
            drawn[b] = true;
            px[m] = xb->valuedouble;
            py[m++] = vb->valuedouble * ys;
        }
        if (m == 0)
            continue;
        char lab[160];
        snprintf(lab, sizeof lab, "paper: %s", lab_a);
        cz_gp_series_add(p, lab, CZ_GP_PAPER, m, px, py, NULL, NULL);
    }
    free(drawn);
    free(px);
    free(py);
    free(done);
    free(xs);
    free(yv);
    free(lo);
    free(hi);
    cz_status st;
    if (!any_row) {
        st = cz_err_set(err, CZ_EINVAL, "no sweep row matches the points asked for (%s)", metric);
    } else {
        char name[128];
        if (o->name && o->n_metrics == 1)
            snprintf(name, sizeof name, "%s", o->name);
        else if (o->name)
            snprintf(name, sizeof name, "%s_%s", o->name, metric);
        else
            snprintf(name, sizeof name, "sweep_%s", metric);
        safe_name(name);
        st = cz_gp_render(&f, dir, name, err);
        if (st == CZ_OK)
            list_add(out, name);
    }
    cz_gp_figure_free(&f);
    return st;
}

cz_status cz_plot_sweep(const cJSON *rows, const cz_plot_sweep_opts *o, const char *dir,
                        cz_plot_list *out, cz_err *err)
{
    grid_key keys[32];
    size_t nk = grid_keys(rows, keys, CZ_ARRAY_LEN(keys));
    if (nk == 0)
        return cz_err_set(err, CZ_EINVAL, "the sweep rows have an empty point: nothing varies");
    const char *x = o->x;
    bool x_numeric = false;
    if (x) {
        size_t i = 0;
        while (i < nk && strcmp(keys[i].key, x) != 0)
            i++;
        if (i == nk)
            return cz_err_set(err, CZ_EINVAL, "x '%s': not a grid key of the sweep (its keys: "
                                              "%s%s%s)",
                              x, keys[0].key, nk > 1 ? ", " : "", nk > 1 ? keys[1].key : "");
        x_numeric = keys[i].numeric;
    } else {
        const grid_key *best = NULL;
        for (size_t i = 0; i < nk; i++)
            if (!best || (keys[i].numeric && !best->numeric) ||
                (keys[i].numeric == best->numeric && keys[i].n_values > best->n_values))
                best = &keys[i];
        x = best->key;
        x_numeric = best->numeric;
    }
    const cJSON *report = cJSON_GetObjectItemCaseSensitive(row_sweep(rows), "report");
    const cJSON *mean = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, 0), "mean");
    size_t nm = o->metrics ? o->n_metrics
                : cJSON_IsArray(report) ? (size_t)cJSON_GetArraySize(report)
                : cJSON_IsObject(mean) ? (size_t)cJSON_GetArraySize(mean)
                                        : 0;
    if (nm == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "the rows name no reported metric (rows from `cadenza sweep -o` carry "
                          "the sweep's report list): name one with --metric");
    for (size_t i = 0; i < nm; i++) {
        const char *metric = o->metrics ? o->metrics[i]
                             : cJSON_IsArray(report)
                                 ? cJSON_GetArrayItem(report, (int)i)->valuestring
                                 : cJSON_GetArrayItem(mean, (int)i)->string;
        if (!metric)
            continue;
        /* a metric no row has is a typo, not an empty figure */
        bool found = false;
        for (int r = 0; r < cJSON_GetArraySize(rows) && !found; r++) {
            const cJSON *row = cJSON_GetArrayItem(rows, r);
            found = cJSON_HasObjectItem(cJSON_GetObjectItemCaseSensitive(row, "mean"), metric) ||
                    cz_json_get_path(cJSON_GetObjectItemCaseSensitive(row, "summary"), metric);
        }
        if (!found)
            return cz_err_set(err, CZ_EINVAL, "metric '%s': no sweep row has it", metric);
        cz_status st = one_metric(rows, o, metric, x, keys, nk, x_numeric, dir, out, err);
        if (st != CZ_OK)
            return st;
    }
    return CZ_OK;
}
