/* cz_stats.h - distribution summaries as vLLM's benchmark computes them.
 *
 * Percentiles use linear interpolation between closest ranks (numpy.percentile's
 * default, which vLLM's benchmark calls); std is the population standard deviation
 * (numpy.std, ddof = 0). The weighted form gives the same numbers as the plain form on
 * the data expanded by its weights, without expanding it. */
#ifndef CZ_STATS_H
#define CZ_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cz_dist {
    uint64_t n;
    double mean, std, median, min, max;
    double p50, p90, p95, p99;
} cz_dist;

/* Summary of v[0..n). Sorts v in place. n == 0 gives n = 0 and NaN everywhere. */
void cz_dist_compute(double *v, size_t n, cz_dist *out);

/* q-th percentile (0..100) of sorted data, numpy's linear interpolation. n > 0. */
double cz_percentile_sorted(const double *sorted, size_t n, double q);

/* A value with a multiplicity. */
typedef struct cz_wsample {
    double v;
    uint64_t w;
} cz_wsample;

/* Summary of the multiset {s[i].v repeated s[i].w times}. Sorts s in place. */
void cz_wdist_compute(cz_wsample *s, size_t n, cz_dist *out);

#endif
