/* cz_sketch.h - a mergeable quantile sketch with relative accuracy (DDSketch: Masson,
 * Rim and Lee, "DDSketch: a fast and fully-mergeable quantile sketch with relative-error
 * guarantees", VLDB 2019, section 2).
 *
 * Values are non-negative (every metric the summary reports is a duration, a ratio of
 * durations or a size; a negative or non-finite value is a bug and asserts). With
 * gamma = (1 + alpha) / (1 - alpha), a positive value x falls in bucket
 * i = ceil(log_gamma(x)), the values in (gamma^(i-1), gamma^i]; zeros have a count of
 * their own. A bucket stands for 2 gamma^i / (gamma + 1), within alpha of every value in
 * it, relatively. The buckets are dense counts over a window of indices, grown by
 * doubling up to `max_bins`; past it the lowest buckets fold into the lowest kept one
 * (DDSketch's collapsing-lowest store), so memory is at most max_bins x 8 bytes whatever
 * the number of values.
 *
 * Guarantee (cz_sketch_quantile): the estimate of the value at rank r (0-based, in
 * ascending order) is within alpha of it, relatively, up to floating-point rounding
 * (1e-12 relative), for every r when no bucket was folded, and otherwise for every r at
 * or above the count of the lowest bucket (cz_sketch_low_count): folding only ever moves
 * values into the lowest bucket. */
#ifndef CZ_SKETCH_H
#define CZ_SKETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cz_sketch {
    double alpha;           /* relative accuracy, in (0, 1) */
    double gamma;           /* (1 + alpha) / (1 - alpha) */
    double inv_log_gamma;   /* 1 / ln(gamma) */
    uint64_t *bins;         /* bins[k]: values of bucket index offset + k (cap_bins) */
    int32_t offset;         /* bucket index of bins[0] */
    uint32_t n_bins;        /* window: indices offset .. offset + n_bins - 1 */
    uint32_t cap_bins;      /* allocated, <= max_bins */
    uint32_t max_bins;      /* hard cap on the window */
    bool folded;            /* some values were moved into the lowest bucket */
    uint64_t zeros;         /* values equal to 0 */
    uint64_t count;         /* all values, zeros included */
    double min, max;        /* exact extremes (NaN while empty) */
} cz_sketch;

/* An empty sketch of relative accuracy `alpha` (0 < alpha < 1) with at most `max_bins`
 * (>= 1) buckets. Allocates nothing until the first positive value. */
void cz_sketch_init(cz_sketch *s, double alpha, uint32_t max_bins);

/* Frees the buckets; the sketch is empty and reusable after cz_sketch_init. */
void cz_sketch_free(cz_sketch *s);

/* Adds `count` copies of `value` (finite, >= 0). O(1) but for the window growing (at most
 * log2(max_bins) reallocations over the sketch's life) or moving. */
void cz_sketch_add(cz_sketch *s, double value, uint64_t count);

/* Adds `count` copies of each of v[0..n), in that order: the sketch cz_sketch_add would
 * make of them one by one, bit for bit. A value strictly inside the last bucket's range
 * (with a margin far wider than log's rounding) takes that bucket without a log, so a
 * slowly moving series (a decode run's gaps) costs a compare per value. */
void cz_sketch_add_many(cz_sketch *s, const double *v, size_t n, uint64_t count);

/* Adds every value of `src` into `dst` (same alpha and max_bins). Without folding, the
 * result is the sketch of adding all the values to one sketch. */
void cz_sketch_merge(cz_sketch *dst, const cz_sketch *src);

/* Values added. */
uint64_t cz_sketch_count(const cz_sketch *s);

/* Values in the lowest bucket (0 with no bucket): when s->folded, the ranks below this
 * (after the zeros) may be off by more than alpha. */
uint64_t cz_sketch_low_count(const cz_sketch *s);

/* The estimate of the value at 0-based rank `r` < count: exact for the first and the
 * last rank (the sketch keeps min and max) and for zeros, otherwise its bucket's value
 * clamped to [min, max]. */
double cz_sketch_rank_value(const cz_sketch *s, uint64_t r);

/* The q-quantile, q in [0, 1], with numpy's rank convention (linear interpolation):
 * h = q (count - 1), the estimates of ranks floor(h) and floor(h) + 1 (the last rank at
 * most) weighted by h - floor(h). As each estimate is within alpha of its exact value and
 * both are non-negative, the result is within alpha of numpy.percentile(values, 100 q).
 * NaN when empty. */
double cz_sketch_quantile(const cz_sketch *s, double q);

#endif
