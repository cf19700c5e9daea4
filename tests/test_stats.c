/* test_stats.c - percentiles and std as numpy computes them; weighted = expanded. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_stats.h"

Test(stats, numpy_linear_percentiles)
{
    double v[] = {4, 1, 3, 2};
    cz_dist d;
    cz_dist_compute(v, 4, &d);
    cr_assert_float_eq(d.mean, 2.5, 1e-12);
    cr_assert_float_eq(d.median, 2.5, 1e-12);
    cr_assert_float_eq(d.p90, 3.7, 1e-12); /* numpy.percentile([1,2,3,4], 90) */
    cr_assert_float_eq(d.p99, 3.97, 1e-12);
    cr_assert_float_eq(d.std, sqrt(1.25), 1e-12); /* numpy.std, ddof = 0 */
    cr_assert_float_eq(d.min, 1, 0);
    cr_assert_float_eq(d.max, 4, 0);
}

Test(stats, empty_is_nan)
{
    cz_dist d;
    cz_dist_compute(NULL, 0, &d);
    cr_assert_eq(d.n, 0);
    cr_assert(isnan(d.mean) && isnan(d.p99));
}

Test(stats, weighted_equals_expanded)
{
    cz_wsample s[] = {{3.0, 1}, {1.0, 2}, {7.0, 0}, {2.5, 3}};
    double e[] = {3.0, 1.0, 1.0, 2.5, 2.5, 2.5};
    cz_dist dw, de;
    cz_wdist_compute(s, 4, &dw);
    cz_dist_compute(e, 6, &de);
    cr_assert_eq(dw.n, 6);
    cr_assert_float_eq(dw.mean, de.mean, 1e-12);
    cr_assert_float_eq(dw.std, de.std, 1e-12);
    cr_assert_float_eq(dw.median, de.median, 1e-12);
    cr_assert_float_eq(dw.p90, de.p90, 1e-12);
    cr_assert_float_eq(dw.p95, de.p95, 1e-12);
    cr_assert_float_eq(dw.p99, de.p99, 1e-12);
    cr_assert_float_eq(dw.max, 3.0, 0);
}

/* An accumulator of each mode fed the same values. */
static void feed(cz_distacc *a, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cz_distacc_add(a, v[i], 1);
}

Test(stats, distacc_exact_percentiles_are_cz_dist_compute)
{
    double v[] = {12.5, 3.0, 0.0, 7.25, 100.0, 3.0, 41.0, 8.5, 0.5, 19.0, 2.0};
    size_t n = sizeof v / sizeof v[0];
    cz_pctset set = {3, {25, 50, 99.9}};
    cz_distacc a;
    cz_distacc_init(&a, CZ_PCT_EXACT, false);
    feed(&a, v, n);
    cz_dist d, e;
    cz_distacc_summary(&a, &set, &d);
    double c[sizeof v / sizeof v[0]];
    memcpy(c, v, sizeof v);
    cz_dist_compute_set(c, n, &set, &e);
    cr_assert_eq(d.n, e.n);
    cr_assert_eq(d.median, e.median);
    cr_assert_eq(d.p90, e.p90);
    cr_assert_eq(d.p99, e.p99);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(d.pct_v[i], e.pct_v[i]);
    cr_assert_eq(d.min, e.min);
    cr_assert_eq(d.max, e.max);
    cr_assert_float_eq(d.mean, e.mean, 1e-13);
    cr_assert_float_eq(d.std, e.std, 1e-13);
    cz_distacc_free(&a);
}

Test(stats, distacc_sketch_has_the_exact_moments_and_percentiles_within_alpha)
{
    cz_wsample s[64];
    cz_distacc sk, ex;
    cz_distacc_init(&sk, CZ_PCT_SKETCH, true);
    cz_distacc_init(&ex, CZ_PCT_EXACT, true);
    for (int i = 0; i < 64; i++) {
        s[i] = (cz_wsample){20.0 + 7.0 * sin(i * 1.3) + (i % 9 == 0 ? 150.0 : 0.0),
                            (uint64_t)(1 + i % 5)};
        cz_distacc_add(&sk, s[i].v, s[i].w);
        cz_distacc_add(&ex, s[i].v, s[i].w);
    }
    cz_dist a, b, w;
    cz_distacc_summary(&sk, NULL, &a);
    cz_distacc_summary(&ex, NULL, &b);
    cz_wdist_compute(s, 64, &w);
    cr_assert_eq(a.n, b.n);
    cr_assert_eq(a.mean, b.mean);
    cr_assert_eq(a.std, b.std);
    cr_assert_eq(a.min, b.min);
    cr_assert_eq(a.max, b.max);
    cr_assert_eq(b.p99, w.p99); /* exact weighted = cz_wdist_compute, bit for bit */
    cr_assert_eq(b.median, w.median);
    cr_assert_float_eq(b.mean, w.mean, 1e-12);
    cr_assert_float_eq(b.std, w.std, 1e-12);
    const double pa[] = {a.median, a.p90, a.p95, a.p99}, pb[] = {b.median, b.p90, b.p95, b.p99};
    for (int i = 0; i < 4; i++)
        cr_assert(fabs(pa[i] - pb[i]) <= CZ_SKETCH_ALPHA * pb[i] * (1 + 1e-12), "%g vs %g",
                  pa[i], pb[i]);
    cr_assert_neq(a.p99, b.p99); /* the sketch's, not a copy of the exact value */
    cz_distacc_free(&sk);
    cz_distacc_free(&ex);
}

Test(stats, distacc_nan_makes_the_statistics_nan)
{
    cz_distacc a;
    cz_distacc_init(&a, CZ_PCT_SKETCH, false);
    cz_distacc_add(&a, 1.0, 1);
    cz_distacc_add(&a, NAN, 1);
    cz_dist d;
    cz_distacc_summary(&a, NULL, &d);
    cr_assert_eq(d.n, 2);
    cr_assert(isnan(d.mean) && isnan(d.std) && isnan(d.median) && isnan(d.max));
    cz_distacc_free(&a);
}

/* The running sum is compensated: a million 0.1 ms samples after one of 1e9 ms keep their
 * share of the mean, which a plain double sum (ulp of 1e9 is 1.2e-7) would round away
 * in part; the std follows Welford's update. Reference: the exact sums in closed form. */
Test(stats, distacc_mean_keeps_small_values_beside_a_large_one)
{
    cz_distacc a;
    cz_distacc_init(&a, CZ_PCT_SKETCH, false);
    const double big = 1e9, small = 0.1;
    const uint64_t n_small = 1000000;
    cz_distacc_add(&a, big, 1);
    for (uint64_t i = 0; i < n_small; i++)
        cz_distacc_add(&a, small, 1);
    cz_dist d;
    cz_distacc_summary(&a, NULL, &d);
    double n = (double)(n_small + 1);
    double mean = (big + small * (double)n_small) / n;
    double var = (big - mean) * (big - mean) / n + (double)n_small * (small - mean) * (small - mean) / n;
    cr_assert_eq(d.n, n_small + 1);
    cr_assert_float_eq(d.mean, mean, mean * 1e-15, "mean %.17g, expected %.17g", d.mean, mean);
    cr_assert_float_eq(d.std, sqrt(var), sqrt(var) * 1e-9, "std %.17g, expected %.17g", d.std,
                       sqrt(var));
    cz_distacc_free(&a);
}

/* Auto mode: exact (bit for bit) while the samples fit the budget; one more sample moves
 * them into the sketch, and the percentiles are then within alpha of the exact ones. */
Test(stats, distacc_auto_is_exact_within_its_budget_then_a_sketch)
{
    size_t n = CZ_PCT_EXACT_MAX;
    double *v = malloc((n + 1000) * sizeof *v);
    cr_assert_not_null(v);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n + 1000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        v[i] = (double)(x >> 11) / 9007199254740992.0 * 1000.0;
    }
    cz_distacc a, e;
    cz_distacc_init(&a, CZ_PCT_AUTO, false);
    cz_distacc_init(&e, CZ_PCT_EXACT, false);
    feed(&a, v, n);
    feed(&e, v, n);
    cz_dist da, de;
    cz_distacc_summary(&a, NULL, &da);
    cz_distacc_summary(&e, NULL, &de);
    cr_assert(!da.sketched && !de.sketched);
    cr_assert_eq(da.p99, de.p99);
    cr_assert_eq(da.median, de.median);
    feed(&a, v + n, 1000);
    feed(&e, v + n, 1000);
    cz_distacc_summary(&a, NULL, &da);
    cz_distacc_summary(&e, NULL, &de);
    cr_assert(da.sketched && !de.sketched);
    cr_assert_eq(da.n, de.n);
    cr_assert_eq(a.n_s, 0); /* the samples went into the sketch */
    double q[] = {da.median, da.p90, da.p95, da.p99}, r[] = {de.median, de.p90, de.p95, de.p99};
    for (int i = 0; i < 4; i++)
        cr_assert_leq(fabs(q[i] - r[i]), CZ_SKETCH_ALPHA * r[i] * (1 + 1e-12), "%g vs %g", q[i],
                      r[i]);
    cz_distacc_free(&a);
    cz_distacc_free(&e);
    free(v);
}

/* Two empty weighted order-free accumulators of `mode`. */
static void order_free_pair(cz_distacc *a, cz_distacc *b, cz_pct_mode mode)
{
    cz_distacc_init(a, mode, true);
    cz_distacc_init(b, mode, true);
    cz_distacc_order_free(a);
    cz_distacc_order_free(b);
}

/* An order-free accumulator (the inter-token gaps): the summary is the same bit for bit
 * whatever the order of the values, its mean and std are those of the values rounded to
 * 2^-30, and equal values have a std of exactly 0. */
Test(stats, distacc_order_free_is_exact_and_ignores_the_order)
{
    enum { N = 5000 };
    static double v[N];
    static uint64_t w[N];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = (double)(x % 1000000) / 997.0 + (i % 7 == 0 ? 1e4 : 0.0);
        w[i] = 1 + x % 5;
    }
    cz_pct_mode modes[] = {CZ_PCT_EXACT, CZ_PCT_SKETCH, CZ_PCT_AUTO};
    for (size_t mi = 0; mi < 3; mi++) {
        cz_distacc a, b;
        order_free_pair(&a, &b, modes[mi]);
        for (size_t i = 0; i < N; i++)
            cz_distacc_add(&a, v[i], w[i]);
        for (size_t i = N; i-- > 0;)
            cz_distacc_add(&b, v[i], w[i]);
        cz_dist da, db;
        cz_distacc_summary(&a, NULL, &da);
        cz_distacc_summary(&b, NULL, &db);
        cr_assert(memcmp(&da.mean, &db.mean, sizeof da.mean) == 0 && da.std == db.std &&
                  da.p99 == db.p99 && da.min == db.min && da.max == db.max);
        /* the moments of the rounded values, in long double */
        long double s = 0, n = 0;
        for (size_t i = 0; i < N; i++) {
            s += (long double)w[i] * roundl((long double)v[i] * 1073741824.0L) / 1073741824.0L;
            n += w[i];
        }
        long double mean = s / n, ss = 0;
        for (size_t i = 0; i < N; i++) {
            long double d = roundl((long double)v[i] * 1073741824.0L) / 1073741824.0L - mean;
            ss += (long double)w[i] * d * d;
        }
        cr_assert_float_eq(da.mean, (double)mean, 1e-12 * (double)mean);
        cr_assert_float_eq(da.std, (double)sqrtl(ss / n), 1e-9 * (double)sqrtl(ss / n));
        cz_distacc_free(&a);
        cz_distacc_free(&b);
    }
    cz_distacc c;
    cz_distacc_init(&c, CZ_PCT_AUTO, true);
    cz_distacc_order_free(&c);
    for (size_t i = 0; i < 1000; i++)
        cz_distacc_add(&c, 12.345678901, 3 + i % 4);
    cz_dist dc;
    cz_distacc_summary(&c, NULL, &dc);
    cr_assert(dc.std == 0.0, "std %g", dc.std);
    cr_assert_float_eq(dc.mean, 12.345678901, 1e-6);
    cz_distacc_free(&c);
}

Test(stats, distacc_add_many_is_adding_one_by_one)
{
    enum { N = 6000 };
    static double v[N];
    for (int series = 0; series < 3; series++) {
        for (size_t i = 0; i < N; i++) {
            switch (series) {
            case 0: v[i] = 8.0 + 1e-4 * (double)i; break;             /* a run's gaps */
            case 1: v[i] = (double)(i % 13) * 3.25e7; break;          /* q past 2^57 */
            default: v[i] = i == N / 2 ? 1e10 : 0.5 * (double)i; break; /* one past the
                                                                           exact range */
            }
        }
        cz_pct_mode modes[] = {CZ_PCT_EXACT, CZ_PCT_SKETCH, CZ_PCT_AUTO};
        for (size_t mi = 0; mi < 3; mi++) {
            cz_distacc a, b;
            order_free_pair(&a, &b, modes[mi]);
            for (size_t i = 0; i < N; i++)
                cz_distacc_add(&a, v[i], 5);
            for (size_t i = 0, len = 1; i < N; i += len, len = len * 2 % 5000 + 1)
                cz_distacc_add_many(&b, v + i, i + len <= N ? len : N - i, 5);
            cr_assert(a.n == b.n && a.s1 == b.s1 && a.s2[0] == b.s2[0] && a.s2[1] == b.s2[1] &&
                      a.ofl == b.ofl && a.ofl == (series == 2));
            cr_assert(memcmp(&a.sum, &b.sum, sizeof a.sum) == 0 &&
                      memcmp(&a.m2, &b.m2, sizeof a.m2) == 0 && a.min == b.min &&
                      a.max == b.max);
            cz_dist da, db;
            cz_distacc_summary(&a, NULL, &da);
            cz_distacc_summary(&b, NULL, &db);
            cr_assert(da.n == db.n && memcmp(&da.mean, &db.mean, sizeof da.mean) == 0 &&
                          memcmp(&da.std, &db.std, sizeof da.std) == 0 && da.p50 == db.p50 &&
                          da.p99 == db.p99,
                      "series %d mode %zu", series, mi);
            cz_distacc_free(&a);
            cz_distacc_free(&b);
        }
    }
}
