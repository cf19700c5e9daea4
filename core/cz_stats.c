/* cz_stats.c - see cz_stats.h. */
#include "cz_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cz_base.h"

void cz_pctset_resolve(const cz_pctset *set, cz_pctset *out)
{
    static const cz_pctset def = {4, {50, 90, 95, 99}};
    *out = set && set->n ? *set : def;
    CZ_ASSERT(out->n <= CZ_PCT_MAX);
}

void cz_pct_label(double q, char *buf, size_t n)
{
    CZ_ASSERT(isfinite(q));
    if (q == floor(q) && fabs(q) < 1e15) {
        snprintf(buf, n, "%lld", (long long)q);
        return;
    }
    /* Python's repr of a float: the fewest significant digits that read back exactly
     * (%g switches to an exponent where repr does for |q| < 1e-4) */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, q);
        if (strtod(buf, NULL) == q)
            return;
    }
}

static void dist_nan(const cz_pctset *set, cz_dist *o)
{
    o->n = 0;
    o->sketched = false;
    o->mean = o->std = o->median = o->min = o->max = NAN;
    o->p50 = o->p90 = o->p95 = o->p99 = NAN;
    o->n_pct = set->n;
    for (uint32_t i = 0; i < set->n; i++) {
        o->pct_q[i] = set->q[i];
        o->pct_v[i] = NAN;
    }
}

double cz_percentile_sorted(const double *sorted, size_t n, double q)
{
    CZ_ASSERT(n > 0 && q >= 0.0 && q <= 100.0);
    return gsl_stats_quantile_from_sorted_data(sorted, 1, n, q / 100.0);
}

/* The median and percentiles of sorted v[0..n), n > 0. */
static void pcts_sorted(const double *v, size_t n, const cz_pctset *ps, cz_dist *o)
{
    o->sketched = false;
    o->p50 = o->median = cz_percentile_sorted(v, n, 50);
    o->p90 = cz_percentile_sorted(v, n, 90);
    o->p95 = cz_percentile_sorted(v, n, 95);
    o->p99 = cz_percentile_sorted(v, n, 99);
    o->n_pct = ps->n;
    for (uint32_t i = 0; i < ps->n; i++) {
        o->pct_q[i] = ps->q[i];
        o->pct_v[i] = cz_percentile_sorted(v, n, ps->q[i]);
    }
}

void cz_dist_compute(double *v, size_t n, cz_dist *o)
{
    cz_dist_compute_set(v, n, NULL, o);
}

void cz_dist_compute_set(double *v, size_t n, const cz_pctset *set, cz_dist *o)
{
    cz_pctset ps;
    cz_pctset_resolve(set, &ps);
    if (n == 0) {
        dist_nan(&ps, o);
        return;
    }
    gsl_sort(v, 1, n);
    o->n = n;
    o->mean = gsl_stats_mean(v, 1, n);
    o->std = n > 1 ? sqrt(gsl_stats_variance_with_fixed_mean(v, 1, n, o->mean)) : 0.0;
    o->min = v[0];
    o->max = v[n - 1];
    pcts_sorted(v, n, &ps, o);
}

static int cmp_wsample(const void *a, const void *b)
{
    double x = ((const cz_wsample *)a)->v, y = ((const cz_wsample *)b)->v;
    return (x > y) - (x < y);
}

/* Value at 0-based rank r of the expanded multiset (cum[i] = sum of w[0..i]). */
static double wrank(const cz_wsample *s, const uint64_t *cum, size_t n, uint64_t r)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > r)
            hi = mid;
        else
            lo = mid + 1;
    }
    return s[lo].v;
}

static double wpercentile(const cz_wsample *s, const uint64_t *cum, size_t n, uint64_t total,
                          double q)
{
    double h = (double)(total - 1) * q / 100.0;
    uint64_t lo = (uint64_t)floor(h);
    uint64_t hi = lo + 1 < total ? lo + 1 : lo;
    double a = wrank(s, cum, n, lo), b = wrank(s, cum, n, hi);
    return a + (h - (double)lo) * (b - a);
}

static void wpcts_sorted(const cz_wsample *s, size_t n, const cz_pctset *ps, cz_dist *o);

void cz_wdist_compute(cz_wsample *s, size_t n, cz_dist *o)
{
    cz_wdist_compute_set(s, n, NULL, o);
}

void cz_wdist_compute_set(cz_wsample *s, size_t n, const cz_pctset *set, cz_dist *o)
{
    cz_pctset ps;
    cz_pctset_resolve(set, &ps);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].w > 0)
            s[k++] = s[i];
    n = k;
    if (n == 0) {
        dist_nan(&ps, o);
        return;
    }
    qsort(s, n, sizeof *s, cmp_wsample);
    uint64_t total = 0;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        total += s[i].w;
        sum += s[i].v * (double)s[i].w;
    }
    double mean = sum / (double)total, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = s[i].v - mean;
        ss += d * d * (double)s[i].w;
    }
    o->n = total;
    o->mean = mean;
    o->std = sqrt(ss / (double)total);
    o->min = s[0].v;
    o->max = s[n - 1].v;
    wpcts_sorted(s, n, &ps, o);
}

/* The median and percentiles of sorted s[0..n), every w > 0, n > 0. */
static void wpcts_sorted(const cz_wsample *s, size_t n, const cz_pctset *ps, cz_dist *o)
{
    o->sketched = false;
    uint64_t *cum = cz_xmalloc(n * sizeof *cum);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += s[i].w;
        cum[i] = total;
    }
    o->p50 = o->median = wpercentile(s, cum, n, total, 50);
    o->p90 = wpercentile(s, cum, n, total, 90);
    o->p95 = wpercentile(s, cum, n, total, 95);
    o->p99 = wpercentile(s, cum, n, total, 99);
    o->n_pct = ps->n;
    for (uint32_t i = 0; i < ps->n; i++) {
        o->pct_q[i] = ps->q[i];
        o->pct_v[i] = wpercentile(s, cum, n, total, ps->q[i]);
    }
    free(cum);
}

void cz_distacc_init(cz_distacc *a, cz_pct_mode mode, bool weighted)
{
    CZ_ASSERT(mode == CZ_PCT_AUTO || mode == CZ_PCT_SKETCH || mode == CZ_PCT_EXACT);
    memset(a, 0, sizeof *a);
    a->mode = mode;
    a->sketched = mode == CZ_PCT_SKETCH;
    a->weighted = weighted;
    a->min = a->max = NAN;
    cz_sketch_init(&a->sk, CZ_SKETCH_ALPHA, CZ_SKETCH_MAX_BINS);
}

void cz_distacc_free(cz_distacc *a)
{
    cz_sketch_free(&a->sk);
    free(a->v);
    free(a->s);
    a->v = NULL;
    a->s = NULL;
    a->n_s = a->cap_s = 0;
}

void cz_distacc_add(cz_distacc *a, double v, uint64_t w)
{
    CZ_ASSERT(a->weighted || w == 1);
    if (w == 0)
        return;
    a->n += w;
    if (isnan(v)) {
        a->n_nan += w;
        return;
    }
    if (!(a->min <= v))
        a->min = v;
    if (!(a->max >= v))
        a->max = v;
    /* Doubles, not long doubles: x87 loads and stores of 80-bit values made this the
     * hottest function of a simulation. The sum is compensated (Neumaier 1974), so the
     * mean carries about twice double's precision. */
    double lw = (double)w, y = v * lw, t = a->sum + y;
    a->sum_c += fabs(a->sum) >= fabs(y) ? (a->sum - t) + y : (y - t) + a->sum;
    a->sum = t;
    /* West (1979), "Updating mean and variance estimates: an improved method" */
    double x = v, d = x - a->wmean;
    a->wmean += d * lw / (double)(a->n - a->n_nan);
    a->m2 += lw * d * (x - a->wmean);
    if (a->sketched) {
        cz_sketch_add(&a->sk, v, w);
        return;
    }
    if (a->mode == CZ_PCT_AUTO && a->n_s == CZ_PCT_EXACT_MAX) {
        /* past the budget: the samples kept move into the sketch, in the order they came */
        for (size_t i = 0; i < a->n_s; i++) {
            if (a->weighted)
                cz_sketch_add(&a->sk, a->s[i].v, a->s[i].w);
            else
                cz_sketch_add(&a->sk, a->v[i], 1);
        }
        free(a->v);
        free(a->s);
        a->v = NULL;
        a->s = NULL;
        a->n_s = a->cap_s = 0;
        a->sketched = true;
        cz_sketch_add(&a->sk, v, w);
        return;
    }
    if (a->weighted) {
        cz_grow((void **)&a->s, &a->cap_s, a->n_s + 1, sizeof *a->s);
        a->s[a->n_s++] = (cz_wsample){v, w};
    } else {
        cz_grow((void **)&a->v, &a->cap_s, a->n_s + 1, sizeof *a->v);
        a->v[a->n_s++] = v;
    }
}

void cz_distacc_summary(const cz_distacc *a, const cz_pctset *set, cz_dist *o)
{
    cz_pctset ps;
    cz_pctset_resolve(set, &ps);
    dist_nan(&ps, o);
    o->n = a->n;
    if (a->n == 0 || a->n_nan > 0)
        return;
    double n = (double)a->n;
    o->mean = (a->sum + a->sum_c) / n;
    o->std = sqrt(a->m2 / n);
    o->min = a->min;
    o->max = a->max;
    if (a->sketched) {
        o->sketched = true;
        o->p50 = o->median = cz_sketch_quantile(&a->sk, 0.50);
        o->p90 = cz_sketch_quantile(&a->sk, 0.90);
        o->p95 = cz_sketch_quantile(&a->sk, 0.95);
        o->p99 = cz_sketch_quantile(&a->sk, 0.99);
        for (uint32_t i = 0; i < ps.n; i++)
            o->pct_v[i] = cz_sketch_quantile(&a->sk, ps.q[i] / 100.0);
    } else if (a->weighted) {
        cz_wsample *s = cz_xmalloc(a->n_s * sizeof *s);
        memcpy(s, a->s, a->n_s * sizeof *s);
        qsort(s, a->n_s, sizeof *s, cmp_wsample);
        wpcts_sorted(s, a->n_s, &ps, o);
        free(s);
    } else {
        double *v = cz_xmalloc(a->n_s * sizeof *v);
        memcpy(v, a->v, a->n_s * sizeof *v);
        gsl_sort(v, 1, a->n_s);
        pcts_sorted(v, a->n_s, &ps, o);
        free(v);
    }
}
