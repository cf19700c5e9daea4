/* cz_stats.h - distribution summaries as vLLM's benchmark computes them.
 *
 * Percentiles use linear interpolation between closest ranks (numpy.percentile's
 * default, which vLLM's benchmark calls); std is the population standard deviation
 * (numpy.std, ddof = 0). The weighted form gives the same numbers as the plain form on
 * the data expanded by its weights, without expanding it. */
#ifndef CZ_STATS_H
#define CZ_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_sketch.h"

/* Most percentiles one summary reports per metric (`--percentiles`). */
#define CZ_PCT_MAX 16

/* The percentiles reported per metric, in the order given (vLLM's --metric-percentiles).
 * n = 0 stands for the default set {50, 90, 95, 99}. */
typedef struct cz_pctset {
    uint32_t n;
    double q[CZ_PCT_MAX]; /* each in (0, 100], no two equal */
} cz_pctset;

typedef struct cz_dist {
    uint64_t n;
    double mean, std, median, min, max;
    double p50, p90, p95, p99;
    uint32_t n_pct;            /* the reported set: pct_q[i]-th percentile is pct_v[i] */
    double pct_q[CZ_PCT_MAX];
    double pct_v[CZ_PCT_MAX];  /* NaN with no samples */
    bool sketched;             /* the median and percentiles came from a sketch */
} cz_dist;

/* The set `set` stands for (the default one for NULL or n = 0). */
void cz_pctset_resolve(const cz_pctset *set, cz_pctset *out);

/* A percentile's name as vLLM's benchmark writes it in a key (`p{label}_ttft_ms`):
 * `str(int(p)) if int(p) == p else str(p)`, i.e. "99" for 99 and Python's shortest
 * round-trip form for the rest ("99.9", "0.5"). Writes at most n bytes with the NUL. */
void cz_pct_label(double q, char *buf, size_t n);

/* Summary of v[0..n) with the default percentile set. Sorts v in place. n == 0 gives
 * n = 0 and NaN everywhere. */
void cz_dist_compute(double *v, size_t n, cz_dist *out);

/* The same with the percentiles of `set` (NULL: the default) in pct_q / pct_v. */
void cz_dist_compute_set(double *v, size_t n, const cz_pctset *set, cz_dist *out);

/* q-th percentile (0..100) of sorted data, numpy's linear interpolation. n > 0. */
double cz_percentile_sorted(const double *sorted, size_t n, double q);

/* A value with a multiplicity. */
typedef struct cz_wsample {
    double v;
    uint64_t w;
} cz_wsample;

/* Summary of the multiset {s[i].v repeated s[i].w times}. Sorts s in place. */
void cz_wdist_compute(cz_wsample *s, size_t n, cz_dist *out);
void cz_wdist_compute_set(cz_wsample *s, size_t n, const cz_pctset *set, cz_dist *out);

/* How a summary computes its percentiles and medians (docs/metrics.md, "Percentiles"). */
typedef enum cz_pct_mode {
    CZ_PCT_AUTO = 0, /* exact while a metric's samples number at most CZ_PCT_EXACT_MAX, then
                      * its samples go into a sketch (the default) */
    CZ_PCT_SKETCH,   /* a DDSketch per metric: within CZ_SKETCH_ALPHA of the exact value */
    CZ_PCT_EXACT,    /* every sample kept and sorted (numpy's linear interpolation) */
} cz_pct_mode;

/* CZ_PCT_AUTO's budget: samples a metric keeps before it switches to the sketch (16 MB of
 * plain values, 32 MB of weighted pairs). */
#define CZ_PCT_EXACT_MAX (1u << 21)

/* The sketch mode's relative accuracy and its cap on buckets per metric: 2048 buckets of
 * 8 bytes cover values from x to x * 6e17 before any folds (docs/metrics.md). */
#define CZ_SKETCH_ALPHA 0.01
#define CZ_SKETCH_MAX_BINS 2048u

/* A distribution fed one value (with a multiplicity) at a time: count, mean, population
 * std, min and max exactly from running sums in either mode; the percentiles from a
 * sketch (CZ_PCT_SKETCH) or from every sample (CZ_PCT_EXACT, as cz_dist_compute_set for
 * a plain accumulator and cz_wdist_compute_set for a weighted one, bit for bit), or
 * (CZ_PCT_AUTO) from every sample until CZ_PCT_EXACT_MAX are kept, when they move into the
 * sketch and the rest follow them there. A NaN
 * value makes every statistic but n NaN, as it makes the mean. */
typedef struct cz_distacc {
    cz_pct_mode mode;
    bool weighted;            /* exact mode keeps (value, multiplicity) pairs */
    uint64_t n;               /* values, with multiplicity */
    uint64_t n_nan;
    double sum, sum_c;        /* sum of value x multiplicity, Neumaier-compensated (plain
                                 when order_free) */
    double wmean, m2;         /* West's weighted form of Welford's update (order_free: m2
                                 is the plain sum of multiplicity x value^2) */
    bool order_free;          /* cz_distacc_order_free: mean and std from exact sums */
    bool ofl;                 /* a value past CZ_DISTACC_EXACT_MAX: the double sums serve */
    unsigned __int128 s1;     /* order_free: sum of w q, q = round(v 2^CZ_DISTACC_FRAC) */
    unsigned __int128 s2[2];  /* sum of w q^2, 256 bits (low, high) */
    double min, max;
    bool sketched;            /* the values are in sk (CZ_PCT_SKETCH, or CZ_PCT_AUTO past
                               * its budget), else in v or s */
    cz_sketch sk;
    double *v;                /* CZ_PCT_EXACT, plain: the values */
    cz_wsample *s;            /* CZ_PCT_EXACT, weighted: the pairs */
    size_t n_s, cap_s;
} cz_distacc;

/* An empty accumulator (allocates nothing until values come). */
void cz_distacc_init(cz_distacc *a, cz_pct_mode mode, bool weighted);

/* Fixed point of an order-free accumulator: v is summed as round(v 2^CZ_DISTACC_FRAC),
 * exactly, for 0 <= v < CZ_DISTACC_EXACT_MAX. */
#define CZ_DISTACC_FRAC 30
#define CZ_DISTACC_EXACT_MAX 8589934592.0 /* 2^33: 99 days in ms */

/* Makes an empty accumulator's summary independent of the order its values come in: the
 * mean and std from exact integer sums of the values in fixed point (CZ_DISTACC_FRAC
 * fractional bits), min, max and the percentiles as they are. Values must be >= 0 (or
 * NaN); one at or past CZ_DISTACC_EXACT_MAX (absurd for what it serves, inter-token gaps
 * in ms) leaves the mean and std to the ordered double sums. Call before any add. */
void cz_distacc_order_free(cz_distacc *a);
void cz_distacc_free(cz_distacc *a);

/* Adds `w` copies of `v`. A plain accumulator takes w == 1 only. Sketch and auto modes:
 * v >= 0 (or NaN). The exact modes grow the sample array by doubling. */
void cz_distacc_add(cz_distacc *a, double v, uint64_t w);

/* cz_distacc_add(a, v[k], w) for k = 0 .. n - 1, in that order, with the same result bit
 * for bit; an order-free accumulator in sketch mode takes the batch at once (its integer
 * sums and the sketch's buckets, cz_sketch_add_many). No allocation on that path. */
void cz_distacc_add_many(cz_distacc *a, const double *v, size_t n, uint64_t w);

/* The summary of what was added, with the percentiles of `set` (NULL: the default).
 * Leaves `a` as it is (exact mode sorts a copy). */
void cz_distacc_summary(const cz_distacc *a, const cz_pctset *set, cz_dist *out);

#endif
