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

void cz_distacc_order_free(cz_distacc *a)
{
    CZ_ASSERT(a->n == 0);
    a->order_free = true;
}

typedef unsigned __int128 u128;

/* acc (256 bits: low, high) += x * w, x < 2^126, w < 2^64. */
static void u256_add_mul(u128 acc[2], u128 x, uint64_t w)
{
    const u128 m64 = ((u128)1 << 64) - 1;
    u128 lo = (x & m64) * w, hi = (x >> 64) * w; /* x w = hi 2^64 + lo */
    u128 add_lo = lo + (hi << 64);
    u128 carry = add_lo < lo;
    u128 add_hi = (hi >> 64) + carry;
    acc[0] += add_lo;
    acc[1] += add_hi + (acc[0] < add_lo);
}

/* 256-bit values as four 64-bit limbs, least significant first. */
static void u256_limbs(const u128 a[2], uint64_t l[4])
{
    l[0] = (uint64_t)a[0];
    l[1] = (uint64_t)(a[0] >> 64);
    l[2] = (uint64_t)a[1];
    l[3] = (uint64_t)(a[1] >> 64);
}

/* x (limbs) times y (limbs), truncated to 256 bits (the callers' products fit). */
static void u256_mul(const uint64_t x[4], const uint64_t y[4], uint64_t out[4])
{
    uint64_t r[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        u128 carry = 0;
        for (int j = 0; i + j < 4; j++) {
            u128 t = (u128)x[i] * y[j] + r[i + j] + carry;
            r[i + j] = (uint64_t)t;
            carry = t >> 64;
        }
    }
    for (int i = 0; i < 4; i++)
        out[i] = r[i];
}

/* The exact sums' summary: mean = s1 / n and the population variance
 * (n s2 - s1^2) / n^2, exact in integers up to the last division. */
static void exact_moments(const cz_distacc *a, double *mean, double *std)
{
    uint64_t n = a->n - a->n_nan;
    double scale = ldexp(1.0, -CZ_DISTACC_FRAC);
    u128 q = a->s1 / n, r = a->s1 % n;
    *mean = ((double)q + (double)r / (double)n) * scale;
    /* n s2 < 2^254 (s2 < 2^190) and s1^2 < 2^254 (s1 < 2^127) */
    uint64_t s2[4], nn[4] = {n, 0, 0, 0}, ns2[4], s1[4], sq[4];
    u256_limbs(a->s2, s2);
    u256_mul(s2, nn, ns2);
    u128 s1w[2] = {a->s1, 0};
    u256_limbs(s1w, s1);
    u256_mul(s1, s1, sq);
    /* n s2 >= s1^2 (Cauchy-Schwarz): their difference */
    uint64_t d[4], borrow = 0;
    for (int i = 0; i < 4; i++) {
        u128 t = (u128)ns2[i] - sq[i] - borrow;
        d[i] = (uint64_t)t;
        borrow = (uint64_t)(t >> 127);
    }
    CZ_ASSERT(borrow == 0);
    double diff = ldexp((double)d[3], 192) + ldexp((double)d[2], 128) + ldexp((double)d[1], 64) +
                  (double)d[0];
    *std = sqrt(diff / (double)n / (double)n) * scale;
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

/* Keeps (v, w) for the percentiles: in the sketch, or as a sample (into the sketch with
 * every sample kept when the auto budget runs out). */
static void keep_value(cz_distacc *a, double v, uint64_t w)
{
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
    if (a->order_free) {
        CZ_ASSERT(v >= 0.0);
        if (!a->ofl && v < CZ_DISTACC_EXACT_MAX) {
            /* round(v 2^FRAC): v 2^FRAC is exact and below 2^63, x + 0.5 exact below 2^52 */
            double x = v * (double)(1ull << CZ_DISTACC_FRAC);
            uint64_t q = x < 4503599627370496.0 ? (uint64_t)(x + 0.5) : (uint64_t)x;
            a->s1 += (u128)q * w;
            u256_add_mul(a->s2, (u128)q * q, w);
        } else {
            a->ofl = true;
        }
        /* the fallback past CZ_DISTACC_EXACT_MAX: plain double sums */
        double y = v * (double)w;
        a->sum += y;
        a->m2 += y * v;
        keep_value(a, v, w);
        return;
    }
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
    keep_value(a, v, w);
}

void cz_distacc_add_many(cz_distacc *a, const double *v, size_t n, uint64_t w)
{
    if (!a->order_free || !a->sketched || w == 0) {
        for (size_t k = 0; k < n; k++)
            cz_distacc_add(a, v[k], w);
        return;
    }
    CZ_ASSERT(a->weighted || w == 1);
    /* the integer sums add in any order: the batch's own first (q^2 of a gap below 2^57
     * in fixed point, under 2^114; sum_q2 stays below 2^126 for u256_add_mul up to 2^12
     * of them), then times w once */
    const size_t chunk = 4096;
    double lo = a->min, hi = a->max, sum = a->sum, m2 = a->m2, lw = (double)w;
    bool ofl = a->ofl;
    for (size_t k0 = 0; k0 < n; k0 += chunk) {
        size_t k1 = n - k0 < chunk ? n : k0 + chunk;
        u128 sum_q = 0, sum_q2 = 0;
        for (size_t k = k0; k < k1; k++) {
            double x = v[k];
            CZ_ASSERT(x >= 0.0); /* and not NaN */
            if (!(lo <= x))
                lo = x;
            if (!(hi >= x))
                hi = x;
            if (!ofl && x < CZ_DISTACC_EXACT_MAX) {
                double f = x * (double)(1ull << CZ_DISTACC_FRAC);
                uint64_t q = f < 4503599627370496.0 ? (uint64_t)(f + 0.5) : (uint64_t)f;
                sum_q += q;
                if (q < (1ull << 57))
                    sum_q2 += (u128)q * q;
                else
                    u256_add_mul(a->s2, (u128)q * q, w);
            } else {
                ofl = true;
            }
            double y = x * lw;
            sum += y;
            m2 += y * x;
        }
        a->s1 += sum_q * w;
        u256_add_mul(a->s2, sum_q2, w);
    }
    a->min = lo;
    a->max = hi;
    a->sum = sum;
    a->m2 = m2;
    a->ofl = ofl;
    a->n += (uint64_t)n * w;
    cz_sketch_add_many(&a->sk, v, n, w);
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
    if (a->order_free && !a->ofl) {
        exact_moments(a, &o->mean, &o->std);
    } else if (a->order_free) {
        o->mean = a->sum / n;
        o->std = sqrt(fmax(a->m2 / n - o->mean * o->mean, 0.0));
    } else {
        o->mean = (a->sum + a->sum_c) / n;
        o->std = sqrt(a->m2 / n);
    }
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
