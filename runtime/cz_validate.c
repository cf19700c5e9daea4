/* cz_validate.c - see cz_validate.h. */
#include "cz_validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_fit.h"

const char *const cz_validate_keys[] = {
    "p50_ttft_ms",        "p90_ttft_ms",        "p99_ttft_ms",  "p50_tpot_ms",
    "p90_tpot_ms",        "p99_tpot_ms",        "p50_itl_ms",   "p90_itl_ms",
    "p99_itl_ms",         "p50_e2el_ms",        "p90_e2el_ms",  "p99_e2el_ms",
    "p50_audio_ttfp_ms",  "p90_audio_ttfp_ms",  "p99_audio_ttfp_ms",
    "request_throughput", "output_throughput",
};
const uint32_t cz_validate_n_keys = sizeof cz_validate_keys / sizeof cz_validate_keys[0];

static bool number_of(const cJSON *j, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return false;
    *out = v->valuedouble;
    return true;
}

static void add_num(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

/* APE statistics of predictions against measurements (cz_fit_errors). */
static cJSON *ape_stats(const double *measured, const double *pred, size_t n)
{
    cz_fit_err e = cz_fit_errors(measured, pred, NULL, n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)e.n);
    add_num(o, "mape", e.mape);
    add_num(o, "median_ape", e.median_ape);
    add_num(o, "p90_ape", e.p90_ape);
    add_num(o, "max_ape", e.max_ape);
    return o;
}

enum { CLS_PREFILL, CLS_DECODE, CLS_MIXED, CLS_JOBS, CLS_N };
static const char *const cls_name[CLS_N] = {"prefill", "decode", "mixed", "jobs"};

static int step_class(const cz_config *cfg, const cz_step_record *r)
{
    uint32_t stage = r->stage < cfg->model.n_pipe ? cfg->model.pipe[r->stage].stage : 0;
    if (cfg->model.stages[stage].kind != CZ_STAGE_AR)
        return CLS_JOBS;
    if (r->prefill_tokens > 0 && r->decode_seqs > 0)
        return CLS_MIXED;
    return r->prefill_tokens > 0 ? CLS_PREFILL : CLS_DECODE;
}

static cJSON *steps_report(const cz_config *cfg, const cz_metrics *const *eng, uint32_t repeats)
{
    size_t n = 0;
    for (uint32_t r = 0; r < repeats; r++)
        n += eng[r]->n_step_rows;
    size_t cap = n ? n : 1;
    double *dur = malloc(cap * sizeof *dur), *pred = malloc(cap * sizeof *pred);
    double *cd[CLS_N], *cp[CLS_N];
    size_t nb[CLS_N] = {0};
    for (int c = 0; c < CLS_N; c++) {
        cd[c] = malloc(cap * sizeof *cd[c]);
        cp[c] = malloc(cap * sizeof *cp[c]);
    }
    size_t k = 0;
    for (uint32_t r = 0; r < repeats; r++)
        for (uint64_t i = 0; i < eng[r]->n_step_rows; i++) {
            const cz_step_record *s = &eng[r]->step_rows[i];
            double d = s->end_s - s->start_s; /* what the simulator's step lasts */
            if (!(d > 0) || !isfinite(s->predicted_s))
                continue;
            dur[k] = d;
            pred[k++] = s->predicted_s;
            int c = step_class(cfg, s);
            cd[c][nb[c]] = d;
            cp[c][nb[c]++] = s->predicted_s;
        }
    cJSON *o = ape_stats(dur, pred, k);
    cJSON *bc = cJSON_AddObjectToObject(o, "by_class");
    for (int c = 0; c < CLS_N; c++) {
        if (nb[c])
            cJSON_AddItemToObject(bc, cls_name[c], ape_stats(cd[c], cp[c], nb[c]));
        free(cd[c]);
        free(cp[c]);
    }
    free(dur);
    free(pred);
    return o;
}

/* Pearson's r of x and y (n pairs); NaN when n < 2 or a variance is 0. */
static double pearson(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

static int cmp_key(const cz_req_record *ra, const cz_req_record *rb)
{
    if (ra->session != rb->session)
        return ra->session < rb->session ? -1 : 1;
    if (ra->turn != rb->turn)
        return ra->turn < rb->turn ? -1 : 1;
    if (ra->stage != rb->stage)
        return ra->stage < rb->stage ? -1 : 1;
    return 0;
}

typedef struct req_ix {
    const cz_req_record *r;
} req_ix;

static int cmp_req(const void *a, const void *b)
{
    const req_ix *x = a, *y = b;
    return cmp_key(x->r, y->r);
}

static req_ix *completed_sorted(const cz_metrics *m, size_t *n)
{
    CZ_ASSERT(!m->streaming); /* validate keeps every record */
    req_ix *v = malloc((m->n_req ? m->n_req : 1) * sizeof *v);
    size_t k = 0;
    for (uint64_t i = 0; i < m->n_req; i++)
        if (m->req[i].outcome == CZ_REQ_COMPLETED && !m->req[i].stream)
            v[k++].r = &m->req[i];
    qsort(v, k, sizeof *v, cmp_req);
    *n = k;
    return v;
}

static cJSON *agreement(const double *eng, const double *sim, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    add_num(o, "mape", cz_fit_errors(eng, sim, NULL, n).mape);
    add_num(o, "pearson_r", pearson(eng, sim, n));
    return o;
}

static cJSON *requests_report(const cz_metrics *eng, const cz_metrics *sim)
{
    size_t ne, ns;
    req_ix *e = completed_sorted(eng, &ne), *s = completed_sorted(sim, &ns);
    size_t cap = ne < ns ? ne : ns;
    double *ttft_e = malloc((cap ? cap : 1) * sizeof(double));
    double *ttft_s = malloc((cap ? cap : 1) * sizeof(double));
    double *e2e_e = malloc((cap ? cap : 1) * sizeof(double));
    double *e2e_s = malloc((cap ? cap : 1) * sizeof(double));
    size_t i = 0, j = 0, m = 0;
    while (i < ne && j < ns) {
        int c = cmp_req(&e[i], &s[j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            const cz_req_record *a = e[i].r, *b = s[j].r;
            ttft_e[m] = a->first_token_s - a->arrival_s;
            ttft_s[m] = b->first_token_s - b->arrival_s;
            e2e_e[m] = a->finish_s - a->arrival_s;
            e2e_s[m] = b->finish_s - b->arrival_s;
            m++;
            i++;
            j++;
        }
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "matched", (double)m);
    cJSON_AddItemToObject(o, "ttft", agreement(ttft_e, ttft_s, m));
    cJSON_AddItemToObject(o, "e2el", agreement(e2e_e, e2e_s, m));
    free(e);
    free(s);
    free(ttft_e);
    free(ttft_s);
    free(e2e_e);
    free(e2e_s);
    return o;
}

cJSON *cz_validate_report(const cz_config *cfg, const cz_metrics *const *eng,
                          const cJSON *const *eng_summary, uint32_t repeats,
                          const cz_metrics *sim, const cJSON *sim_summary)
{
    CZ_ASSERT(repeats >= 1);
    cJSON *rep = cJSON_CreateObject();
    cJSON *mets = cJSON_AddObjectToObject(rep, "metrics");
    for (uint32_t k = 0; k < cz_validate_n_keys; k++) {
        const char *key = cz_validate_keys[k];
        double sv, sum = 0, lo = INFINITY, hi = -INFINITY;
        if (!number_of(sim_summary, key, &sv))
            continue;
        uint32_t have = 0;
        for (uint32_t r = 0; r < repeats; r++) {
            double v;
            if (!number_of(eng_summary[r], key, &v))
                continue;
            sum += v;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
            have++;
        }
        if (have == 0)
            continue;
        double ev = sum / have;
        cJSON *o = cJSON_AddObjectToObject(mets, key);
        add_num(o, "engine", ev);
        add_num(o, "sim", sv);
        add_num(o, "rel_error", ev != 0 ? (sv - ev) / ev : NAN);
        add_num(o, "engine_spread", have > 1 && ev != 0 ? (hi - lo) / ev : NAN);
    }
    cJSON_AddItemToObject(rep, "steps", steps_report(cfg, eng, repeats));
    cJSON_AddItemToObject(rep, "requests", requests_report(eng[0], sim));
    cJSON_AddNumberToObject(rep, "engine_repeats", repeats);
    return rep;
}

static double num_or_nan(const cJSON *o, const char *key)
{
    double v;
    return number_of(o, key, &v) ? v : NAN;
}

void cz_validate_add_probe(cJSON *report, const double *ratios, uint32_t n, double scale,
                           const cJSON *rescaled)
{
    cJSON *pr = cJSON_AddObjectToObject(report, "probe");
    cJSON *arr = cJSON_AddArrayToObject(pr, "ratios");
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, isfinite(ratios[i]) ? cJSON_CreateNumber(ratios[i])
                                                      : cJSON_CreateNull());
    add_num(pr, "scale", scale);
    if (!rescaled)
        return;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(report, "metrics"))
    {
        double e, s;
        bool have = number_of(m, "engine", &e) && number_of(rescaled, m->string, &s);
        add_num(m, "sim_rescaled", have ? s : NAN);
        add_num(m, "rel_error_rescaled", have && e != 0 ? (s - e) / e : NAN);
    }
}

void cz_validate_print(const cJSON *report, FILE *out)
{
    const cJSON *mets = cJSON_GetObjectItemCaseSensitive(report, "metrics");
    const cJSON *probe = cJSON_GetObjectItemCaseSensitive(report, "probe");
    bool resc = false;
    const cJSON *m;
    cJSON_ArrayForEach(m, mets)
        resc = resc || cJSON_GetObjectItemCaseSensitive(m, "sim_rescaled") != NULL;
    if (probe) {
        fprintf(out, "machine speed against the cost model (probe, measured / predicted):");
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(probe, "ratios"))
            fprintf(out, " %.3f", cJSON_IsNumber(r) ? r->valuedouble : NAN);
        if (resc)
            fprintf(out, "; rescaled simulator: cost x %.3f", num_or_nan(probe, "scale"));
        fputc('\n', out);
    }
    /* against a server (validate --endpoint) the measured column is the server's */
    bool server = cJSON_GetObjectItemCaseSensitive(report, "endpoint") != NULL;
    fprintf(out, "  %-20s %12s %12s %10s %14s", "metric", server ? "server" : "engine", "sim",
            "error", server ? "server spread" : "engine spread");
    if (resc)
        fprintf(out, " %12s %10s", "sim rescaled", "error");
    fputc('\n', out);
    cJSON_ArrayForEach(m, mets)
    {
        fprintf(out, "  %-20s %12.3f %12.3f %+9.1f%%", m->string, num_or_nan(m, "engine"),
                num_or_nan(m, "sim"), 100 * num_or_nan(m, "rel_error"));
        double spread = num_or_nan(m, "engine_spread");
        if (isnan(spread)) /* one measured run: no spread */
            fprintf(out, " %14s", "-");
        else
            fprintf(out, " %13.1f%%", 100 * spread);
        if (resc)
            fprintf(out, " %12.3f %+9.1f%%", num_or_nan(m, "sim_rescaled"),
                    100 * num_or_nan(m, "rel_error_rescaled"));
        fputc('\n', out);
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(report, "steps");
    if (server)
        fprintf(out, "step time: a server's batches are not visible to its client\n");
    else
        fprintf(out, "step time, cost model vs engine (%.0f batches): median %.1f %%, mean "
                     "%.1f %%, p90 %.1f %%, worst %.1f %%\n",
                num_or_nan(st, "n"), 100 * num_or_nan(st, "median_ape"),
                100 * num_or_nan(st, "mape"), 100 * num_or_nan(st, "p90_ape"),
                100 * num_or_nan(st, "max_ape"));
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, "by_class"))
    {
        fprintf(out, "  %-8s %6.0f batches: median %.1f %%, mean %.1f %%, worst %.1f %%\n",
                c->string, num_or_nan(c, "n"), 100 * num_or_nan(c, "median_ape"),
                100 * num_or_nan(c, "mape"), 100 * num_or_nan(c, "max_ape"));
    }
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(report, "requests");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(rq, "ttft");
    const cJSON *ee = cJSON_GetObjectItemCaseSensitive(rq, "e2el");
    fprintf(out, "per request (%.0f matched): TTFT MAPE %.1f %%, r %.3f; E2E MAPE %.1f %%, r %.3f\n",
            num_or_nan(rq, "matched"), 100 * num_or_nan(tt, "mape"), num_or_nan(tt, "pearson_r"),
            100 * num_or_nan(ee, "mape"), num_or_nan(ee, "pearson_r"));
}
