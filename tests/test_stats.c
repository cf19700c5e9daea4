/* test_stats.c - percentiles and std as numpy computes them; weighted = expanded. */
#include <criterion/criterion.h>
#include <math.h>

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
