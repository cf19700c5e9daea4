/* test_sketch.c - the DDSketch against the exact order statistics: every rank's estimate
 * and numpy's interpolated percentiles within alpha, relatively, on known distributions;
 * merging equal to adding; the bucket cap bounding memory and keeping the upper ranks
 * within the bound; the same values giving the same bytes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>

#include "cz_rng.h"
#include "cz_sketch.h"
#include "cz_stats.h"

#define ALPHA 0.01
/* the bound up to floating-point rounding of log() at bucket edges */
#define SLACK (1.0 + 1e-12)

static const double qs[] = {0, 0.1, 1, 5, 10, 25, 33.3, 50, 75, 90, 95, 99, 99.9, 100};

static bool within(double est, double exact, double alpha)
{
    return fabs(est - exact) <= alpha * fabs(exact) * SLACK;
}

/* Every rank from `from` on and every percentile whose lower rank is at least `from`
 * within alpha of sorted[0..n) (n values, with multiplicity). */
static void check_ranks(const cz_sketch *s, const double *sorted, size_t n, uint64_t from)
{
    cr_assert_eq(cz_sketch_count(s), n);
    for (uint64_t r = from; r < n; r++) {
        double est = cz_sketch_rank_value(s, r);
        cr_assert(within(est, sorted[r], s->alpha), "rank %llu: sketch %.17g, exact %.17g",
                  (unsigned long long)r, est, sorted[r]);
    }
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        if (floor((double)(n - 1) * qs[i] / 100.0) < (double)from)
            continue;
        double exact = cz_percentile_sorted(sorted, n, qs[i]);
        double est = cz_sketch_quantile(s, qs[i] / 100.0);
        cr_assert(within(est, exact, s->alpha), "p%g: sketch %.17g, numpy %.17g", qs[i], est,
                  exact);
    }
}

typedef double (*draw_fn)(gsl_rng *r);
static double draw_uniform(gsl_rng *r) { return gsl_ran_flat(r, 0.0, 100.0); }
static double draw_lognormal(gsl_rng *r) { return gsl_ran_lognormal(r, 0.0, 2.0); }
static double draw_pareto(gsl_rng *r) { return gsl_ran_pareto(r, 1.1, 1e-3); }
static double draw_exp_ms(gsl_rng *r) { return gsl_ran_exponential(r, 20.0); }

static void check_dist(draw_fn draw, size_t n, uint64_t id)
{
    gsl_rng *r = cz_rng_new(7, 99, id);
    double *v = malloc(n * sizeof *v);
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    for (size_t i = 0; i < n; i++) {
        v[i] = draw(r);
        cz_sketch_add(&s, v[i], 1);
    }
    gsl_sort(v, 1, n);
    cr_assert(!s.folded);
    check_ranks(&s, v, n, 0);
    cr_assert_eq(cz_sketch_quantile(&s, 0.0), v[0]); /* the first and last ranks: exact */
    cr_assert_eq(cz_sketch_quantile(&s, 1.0), v[n - 1]);
    cz_sketch_free(&s);
    free(v);
    gsl_rng_free(r);
}

Test(sketch, uniform) { check_dist(draw_uniform, 20000, 1); }
Test(sketch, lognormal) { check_dist(draw_lognormal, 20000, 2); }
Test(sketch, pareto_heavy_tail) { check_dist(draw_pareto, 20000, 3); }
Test(sketch, exponential) { check_dist(draw_exp_ms, 5000, 4); }

Test(sketch, a_bucket_estimate_is_within_alpha_of_every_value_in_it)
{
    /* the edges: powers of gamma and their neighbours, where log() rounding decides */
    double g = (1 + ALPHA) / (1 - ALPHA);
    for (int k = -300; k <= 300; k++) {
        double e = pow(g, k);
        double vals[] = {nextafter(e, 0), e, nextafter(e, INFINITY), e * (1 + ALPHA)};
        for (size_t i = 0; i < 4; i++) {
            cz_sketch one;
            cz_sketch_init(&one, ALPHA, 2048);
            cz_sketch_add(&one, vals[i], 1);
            cz_sketch_add(&one, vals[i] * 10, 1); /* rank 1 is neither first nor last */
            cz_sketch_add(&one, 0.0, 1);
            double est = cz_sketch_rank_value(&one, 1);
            cr_assert(within(est, vals[i], ALPHA), "%.17g: %.17g", vals[i], est);
            cz_sketch_free(&one);
        }
    }
}

Test(sketch, constant)
{
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    cz_sketch_add(&s, 42.5, 1000);
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
        cr_assert_eq(cz_sketch_quantile(&s, qs[i] / 100.0), 42.5);
    cz_sketch_free(&s);
}

Test(sketch, single_value)
{
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    cz_sketch_add(&s, 3.7, 1);
    cr_assert_eq(cz_sketch_count(&s), 1);
    cr_assert_eq(cz_sketch_quantile(&s, 0.5), 3.7);
    cr_assert_eq(cz_sketch_quantile(&s, 0.99), 3.7);
    cz_sketch_free(&s);
}

Test(sketch, empty_is_nan)
{
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    cr_assert(isnan(cz_sketch_quantile(&s, 0.5)));
    cr_assert_eq(cz_sketch_count(&s), 0);
    cz_sketch_free(&s);
}

Test(sketch, zeros)
{
    /* 300 zeros below 700 positive values: ranks 0..299 are exactly 0, and the
     * interpolation across the edge stays within alpha of numpy's */
    size_t n = 1000;
    double *v = malloc(n * sizeof *v);
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    gsl_rng *r = cz_rng_new(7, 99, 5);
    for (size_t i = 0; i < n; i++) {
        v[i] = i < 300 ? 0.0 : gsl_ran_exponential(r, 5.0);
        cz_sketch_add(&s, v[i], 1);
    }
    gsl_sort(v, 1, n);
    check_ranks(&s, v, n, 0);
    cr_assert_eq(cz_sketch_quantile(&s, 0.25), 0.0);
    cr_assert_eq(s.zeros, 300);
    /* numpy.percentile([0, 0, 10], 75) = 5: halfway from rank 1 (0) to rank 2 (10) */
    cz_sketch t;
    cz_sketch_init(&t, ALPHA, 2048);
    cz_sketch_add(&t, 0.0, 2);
    cz_sketch_add(&t, 10.0, 1);
    cr_assert_eq(cz_sketch_quantile(&t, 0.75), 5.0);
    cz_sketch_free(&t);
    cz_sketch_free(&s);
    gsl_rng_free(r);
    free(v);
}

Test(sketch, weighted_equals_expanded)
{
    gsl_rng *r = cz_rng_new(7, 99, 6);
    size_t n = 0, cap = 1 << 16;
    double *v = malloc(cap * sizeof *v);
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    for (int i = 0; i < 2000; i++) {
        double x = gsl_ran_lognormal(r, 3.0, 0.5);
        uint64_t w = 1 + gsl_rng_uniform_int(r, 20);
        cz_sketch_add(&s, x, w);
        for (uint64_t k = 0; k < w; k++)
            v[n++] = x;
    }
    gsl_sort(v, 1, n);
    check_ranks(&s, v, n, 0);
    cz_sketch_free(&s);
    gsl_rng_free(r);
    free(v);
}

static void fill(cz_sketch *s, gsl_rng *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cz_sketch_add(s, i % 17 == 0 ? 0.0 : gsl_ran_lognormal(r, 1.0, 3.0), 1 + i % 3);
}

static void assert_same(const cz_sketch *a, const cz_sketch *b)
{
    cr_assert_eq(a->count, b->count);
    cr_assert_eq(a->zeros, b->zeros);
    cr_assert_eq(a->min, b->min);
    cr_assert_eq(a->max, b->max);
    /* the same counts per bucket index */
    int64_t lo = a->offset < b->offset ? a->offset : b->offset;
    int64_t hi_a = (int64_t)a->offset + a->n_bins, hi_b = (int64_t)b->offset + b->n_bins;
    for (int64_t i = lo; i < (hi_a > hi_b ? hi_a : hi_b); i++) {
        uint64_t ca = i >= a->offset && i < hi_a ? a->bins[i - a->offset] : 0;
        uint64_t cb = i >= b->offset && i < hi_b ? b->bins[i - b->offset] : 0;
        cr_assert_eq(ca, cb, "bucket %lld: %llu vs %llu", (long long)i,
                     (unsigned long long)ca, (unsigned long long)cb);
    }
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
        cr_assert_eq(cz_sketch_quantile(a, qs[i] / 100), cz_sketch_quantile(b, qs[i] / 100));
}

Test(sketch, merge_equals_adding_all)
{
    cz_sketch all, part[3], merged;
    cz_sketch_init(&all, ALPHA, 2048);
    cz_sketch_init(&merged, ALPHA, 2048);
    for (int k = 0; k < 3; k++) {
        cz_sketch_init(&part[k], ALPHA, 2048);
        gsl_rng *r = cz_rng_new(7, 98, (uint64_t)k);
        fill(&part[k], r, 3000);
        gsl_rng_free(r);
        r = cz_rng_new(7, 98, (uint64_t)k);
        fill(&all, r, 3000);
        gsl_rng_free(r);
    }
    /* in an order other than the values' */
    cz_sketch_merge(&merged, &part[2]);
    cz_sketch_merge(&merged, &part[0]);
    cz_sketch_merge(&merged, &part[1]);
    cr_assert(!all.folded && !merged.folded);
    assert_same(&merged, &all);
    for (int k = 0; k < 3; k++)
        cz_sketch_free(&part[k]);
    cz_sketch_free(&all);
    cz_sketch_free(&merged);
}

/* Values log-uniform over 1e-6 .. 1e6 need about 1380 buckets at alpha 0.01. */
static void check_cap(bool ascending)
{
    const uint32_t cap = 64;
    size_t n = 20000;
    double *v = malloc(n * sizeof *v);
    gsl_rng *r = cz_rng_new(7, 97, 0);
    for (size_t i = 0; i < n; i++)
        v[i] = pow(10.0, gsl_ran_flat(r, -6.0, 6.0));
    /* ascending: every new value above the window, which folds from below; descending:
     * every new value below it, clamped into the lowest bucket */
    gsl_sort(v, 1, n);
    if (!ascending)
        for (size_t i = 0; i < n / 2; i++) {
            double t = v[i];
            v[i] = v[n - 1 - i];
            v[n - 1 - i] = t;
        }
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, cap);
    for (size_t i = 0; i < n; i++)
        cz_sketch_add(&s, v[i], 1);
    gsl_sort(v, 1, n);
    cr_assert(s.folded);
    cr_assert(s.n_bins <= cap && s.cap_bins <= cap, "%u buckets, %u allocated", s.n_bins,
              s.cap_bins);
    /* 64 buckets span a factor gamma^64 = 3.6: the top ~5 % of log-uniform values */
    uint64_t low = cz_sketch_low_count(&s);
    cr_assert(low < n && low > n / 2);
    check_ranks(&s, v, n, low);
    cr_assert(within(cz_sketch_quantile(&s, 0.99), cz_percentile_sorted(v, n, 99), ALPHA));
    cr_assert_eq(cz_sketch_quantile(&s, 1.0), v[n - 1]);
    cz_sketch_free(&s);
    gsl_rng_free(r);
    free(v);
}

Test(sketch, cap_folds_ascending_values) { check_cap(true); }
Test(sketch, cap_folds_values_below_the_window) { check_cap(false); }

Test(sketch, memory_is_bounded_by_the_cap)
{
    /* every positive double: one bucket index each way */
    cz_sketch s;
    cz_sketch_init(&s, ALPHA, 2048);
    cz_sketch_add(&s, 4.9e-324, 1);
    cz_sketch_add(&s, 1.7e308, 1);
    cz_sketch_add(&s, 1e-300, 1);
    for (int e = -300; e <= 300; e++)
        cz_sketch_add(&s, pow(10.0, e), 1);
    cr_assert(s.cap_bins <= 2048 && s.n_bins <= 2048);
    cr_assert_eq(cz_sketch_quantile(&s, 1.0), 1.7e308);
    /* the top 2048 buckets reach down to 1.7e308 / gamma^2048 = 2.8e290 */
    cr_assert(within(cz_sketch_rank_value(&s, 602), 1e300, ALPHA));
    cr_assert(within(cz_sketch_rank_value(&s, 593), 1e291, ALPHA));
    cz_sketch_free(&s);
}

Test(sketch, deterministic)
{
    cz_sketch a, b;
    cz_sketch_init(&a, ALPHA, 2048);
    cz_sketch_init(&b, ALPHA, 2048);
    gsl_rng *r = cz_rng_new(7, 96, 0);
    fill(&a, r, 5000);
    gsl_rng_free(r);
    r = cz_rng_new(7, 96, 0);
    fill(&b, r, 5000);
    gsl_rng_free(r);
    cr_assert_eq(a.offset, b.offset);
    cr_assert_eq(a.n_bins, b.n_bins);
    cr_assert_eq(memcmp(a.bins, b.bins, a.n_bins * sizeof *a.bins), 0);
    assert_same(&a, &b);
    cz_sketch_free(&a);
    cz_sketch_free(&b);
}

/* Two sketches hold the same state: every field and bucket. */
static void assert_same_sketch(const cz_sketch *a, const cz_sketch *b)
{
    cr_assert(a->count == b->count && a->zeros == b->zeros && a->n_bins == b->n_bins &&
              a->offset == b->offset && a->folded == b->folded);
    cr_assert(memcmp(&a->min, &b->min, sizeof a->min) == 0 &&
              memcmp(&a->max, &b->max, sizeof a->max) == 0);
    for (uint32_t k = 0; k < a->n_bins; k++)
        cr_assert(a->bins[k] == b->bins[k], "bin %u: %llu != %llu", k,
                  (unsigned long long)a->bins[k], (unsigned long long)b->bins[k]);
}

Test(sketch, add_many_is_adding_one_by_one)
{
    enum { N = 3000 };
    static double v[N];
    cz_sketch probe;
    cz_sketch_init(&probe, 0.01, 2048);
    double lg = 1.0 / probe.inv_log_gamma;
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int series = 0; series < 6; series++) {
        for (size_t i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            switch (series) {
            case 0: /* a decode run's gaps: slowly rising */
                v[i] = 10.0 + 1e-3 * (double)i;
                break;
            case 1: /* every value on or next to a bucket edge */
            {
                double e = exp((double)((long)(i / 3 % 400) - 200) * lg);
                v[i] = i % 3 == 0 ? e : i % 3 == 1 ? nextafter(e, 0.0) : nextafter(e, INFINITY);
                break;
            }
            case 2: /* zeros among rising values */
                v[i] = i % 5 == 0 ? 0.0 : 1e-3 * (double)i;
                break;
            case 3: /* at random over many decades */
                v[i] = exp((double)(x % 4000000) * 1e-5 - 20.0);
                break;
            case 4: /* tiny and huge */
                v[i] = i % 2 ? 4.9e-324 * (double)(1 + x % 7) : 1e300 / (double)(1 + i);
                break;
            default: /* constant runs */
                v[i] = (double)(i / 100) + 0.5;
                break;
            }
        }
        /* a wide window, and a narrow one that folds */
        uint32_t bins[] = {2048, 8};
        for (size_t bi = 0; bi < 4; bi++) {
            uint64_t count = bi < 2 ? 1 : 3;
            cz_sketch a, b;
            cz_sketch_init(&a, 0.01, bins[bi % 2]);
            cz_sketch_init(&b, 0.01, bins[bi % 2]);
            for (size_t i = 0; i < N; i++)
                cz_sketch_add(&a, v[i], count);
            /* batches of every size from 1 up */
            for (size_t i = 0, len = 1; i < N; i += len, len = len % 37 + 1)
                cz_sketch_add_many(&b, v + i, i + len <= N ? len : N - i, count);
            assert_same_sketch(&a, &b);
            cz_sketch_free(&a);
            cz_sketch_free(&b);
        }
    }
    cz_sketch_free(&probe);
}
