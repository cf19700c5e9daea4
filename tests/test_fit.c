/* test_fit.c - NNLS against known coefficients and a brute force over active sets, the
 * relative fit, cross-validation and the error summaries. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "cz_fit.h"
#include "cz_rng.h"

#define MAXP 8

static double dot(const double *row, const double *theta, size_t p)
{
    double s = 0.0;
    for (size_t i = 0; i < p; i++)
        s += row[i] * theta[i];
    return s;
}

static double rel_diff(double a, double b)
{
    return fabs(a - b) / fmax(fabs(a), fabs(b));
}

/* The NNLS optimum by enumeration: the least-squares solution (GSL's SVD fit) on every
 * subset of at most n columns that comes out non-negative; the smallest weighted RSS wins.
 * p <= 5. */
static double brute_nnls(const double *X, const double *y, const double *w, size_t n,
                         size_t p, double *theta_best)
{
    gsl_set_error_handler_off();
    double best = INFINITY;
    for (unsigned mask = 0; mask < (1u << p); mask++) {
        size_t cols[MAXP], k = 0;
        for (size_t i = 0; i < p; i++)
            if (mask & (1u << i))
                cols[k++] = i;
        if (k > n)
            continue;
        double th[MAXP] = {0};
        if (k > 0) {
            gsl_matrix *A = gsl_matrix_alloc(n, k), *cov = gsl_matrix_alloc(k, k);
            gsl_vector *b = gsl_vector_alloc(n), *c = gsl_vector_alloc(k);
            gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(n, k);
            for (size_t r = 0; r < n; r++) {
                double sw = w ? sqrt(w[r]) : 1.0;
                gsl_vector_set(b, r, sw * y[r]);
                for (size_t j = 0; j < k; j++)
                    gsl_matrix_set(A, r, j, sw * X[r * p + cols[j]]);
            }
            double chisq;
            cr_assert_eq(gsl_multifit_linear(A, b, c, cov, &chisq, ws), 0);
            int feasible = 1;
            for (size_t j = 0; j < k; j++) {
                th[cols[j]] = gsl_vector_get(c, j);
                if (th[cols[j]] < 0.0)
                    feasible = 0;
            }
            gsl_multifit_linear_free(ws);
            gsl_matrix_free(A);
            gsl_matrix_free(cov);
            gsl_vector_free(b);
            gsl_vector_free(c);
            if (!feasible)
                continue;
        }
        double rss = 0.0;
        for (size_t r = 0; r < n; r++) {
            double d = y[r] - dot(X + r * p, th, p);
            rss += (w ? w[r] : 1.0) * d * d;
        }
        if (rss < best) {
            best = rss;
            memcpy(theta_best, th, p * sizeof *th);
        }
    }
    return best;
}

Test(fit, exact_recovery_noiseless)
{
    enum { N = 40, P = 4 };
    const double truth[P] = {2e-3, 1e-5, 3e-12, 4e-4};
    double X[N * P], y[N], theta[P], rss;
    gsl_rng *r = cz_rng_new(1, 100, 0);
    for (size_t k = 0; k < N; k++) {
        X[k * P + 0] = 1.0;
        X[k * P + 1] = 1.0 + 999.0 * gsl_rng_uniform(r);
        X[k * P + 2] = 1e6 + 1e9 * gsl_rng_uniform(r);
        X[k * P + 3] = floor(50.0 * gsl_rng_uniform(r));
        y[k] = dot(X + k * P, truth, P);
    }
    gsl_rng_free(r);
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
    for (size_t i = 0; i < P; i++)
        cr_assert_lt(rel_diff(theta[i], truth[i]), 1e-9, "theta[%zu] = %.17g, want %.17g", i,
                     theta[i], truth[i]);
    cr_assert_lt(rss, 1e-24);
}

Test(fit, clamps_negative_coefficient_by_hand)
{
    /* Unconstrained: y = 3 - x. NNLS: slope 0, intercept the mean 2, RSS 1 + 0 + 1. */
    const double X[] = {1, 0, 1, 1, 1, 2};
    const double y[] = {3, 2, 1};
    double theta[2], rss;
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, NULL, 3, 2, theta, &rss, &err), CZ_OK, "%s", err.msg);
    cr_assert_float_eq(theta[0], 2.0, 1e-12);
    cr_assert_eq(theta[1], 0.0);
    cr_assert_float_eq(rss, 2.0, 1e-12);
}

Test(fit, matches_brute_force_over_active_sets)
{
    gsl_rng *r = cz_rng_new(2, 100, 0);
    size_t clamped = 0, interior = 0;
    for (unsigned trial = 0; trial < 400; trial++) {
        size_t p = 1 + trial % 5, n = p + 1 + trial % 13;
        double X[30 * MAXP], y[30], w[30], truth[MAXP], scale[MAXP];
        double theta[MAXP], theta_bf[MAXP], rss;
        int weighted = trial % 2;
        for (size_t i = 0; i < p; i++) {
            scale[i] = pow(10.0, -3.0 + 12.0 * gsl_rng_uniform(r)); /* 1e-3 .. 1e9 */
            truth[i] = gsl_ran_gaussian(r, 1.0) / scale[i];
        }
        for (size_t k = 0; k < n; k++) {
            for (size_t i = 0; i < p; i++)
                X[k * p + i] = scale[i] * gsl_rng_uniform(r);
            y[k] = dot(X + k * p, truth, p) + gsl_ran_gaussian(r, 0.3);
            w[k] = weighted ? 0.1 + 10.0 * gsl_rng_uniform(r) : 1.0;
        }
        cz_err err = {0};
        cr_assert_eq(cz_fit_nnls(X, y, weighted ? w : NULL, n, p, theta, &rss, &err), CZ_OK,
                     "trial %u: %s", trial, err.msg);
        double best = brute_nnls(X, y, weighted ? w : NULL, n, p, theta_bf);
        cr_assert(rss <= best * (1 + 1e-9) + 1e-300, "trial %u: rss %.17g, brute force %.17g",
                  trial, rss, best);
        cr_assert(rss >= best * (1 - 1e-9), "trial %u: rss %.17g below brute force %.17g",
                  trial, rss, best);
        double ynorm = 0.0;
        for (size_t k = 0; k < n; k++)
            ynorm += y[k] * y[k];
        ynorm = sqrt(ynorm);
        for (size_t i = 0; i < p; i++) {
            cr_assert_geq(theta[i], 0.0);
            double cnorm = 0.0;
            for (size_t k = 0; k < n; k++)
                cnorm += X[k * p + i] * X[k * p + i];
            /* Compared in units of y: the coefficient times its column's norm. */
            cr_assert_lt(fabs(theta[i] - theta_bf[i]) * sqrt(cnorm), 1e-7 * ynorm,
                         "trial %u: theta[%zu] = %.17g, brute force %.17g", trial, i,
                         theta[i], theta_bf[i]);
            if (theta_bf[i] == 0.0)
                clamped++;
            else
                interior++;
        }
    }
    gsl_rng_free(r);
    cr_assert_gt(clamped, 100); /* the trials exercise the constraint */
    cr_assert_gt(interior, 100);
}

Test(fit, collinear_and_zero_columns)
{
    enum { N = 25, P = 5 };
    /* Column 2 = 3 * column 0, column 3 is zero, column 4 = 2 * column 1 up to 1e-13. */
    double X[N * P], y[N], theta[P], rss;
    for (size_t k = 0; k < N; k++) {
        double a = 1.0 + (double)k, b = sin((double)k) + 2.0;
        X[k * P + 0] = a;
        X[k * P + 1] = b;
        X[k * P + 2] = 3.0 * a;
        X[k * P + 3] = 0.0;
        X[k * P + 4] = 2.0 * b * (1.0 + 1e-13 * cos(7.0 * (double)k));
        y[k] = 2.0 * a + 0.5 * b;
    }
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
    for (size_t i = 0; i < P; i++)
        cr_assert_geq(theta[i], 0.0);
    cr_assert_eq(theta[3], 0.0);
    cr_assert((theta[0] == 0.0) != (theta[2] == 0.0), "one of the collinear pair carries it");
    cr_assert((theta[1] == 0.0) != (theta[4] == 0.0), "one of the near-collinear pair");
    cr_assert_lt(rel_diff(theta[0] + 3.0 * theta[2], 2.0), 1e-9);
    cr_assert_lt(rel_diff(theta[1] + 2.0 * theta[4], 0.5), 1e-9);
    for (size_t k = 0; k < N; k++)
        cr_assert_lt(rel_diff(dot(X + k * P, theta, P), y[k]), 1e-9);
    cr_assert_lt(rss, 1e-20);
}

Test(fit, fewer_rows_than_columns)
{
    enum { N = 3, P = 6 };
    const double truth[P] = {0.5, 0, 1.5, 0, 0.25, 2};
    double X[N * P], y[N], theta[P], rss;
    gsl_rng *r = cz_rng_new(3, 100, 0);
    for (size_t k = 0; k < N; k++) {
        for (size_t i = 0; i < P; i++)
            X[k * P + i] = gsl_rng_uniform(r);
        y[k] = dot(X + k * P, truth, P);
    }
    gsl_rng_free(r);
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
    size_t nonzero = 0;
    for (size_t i = 0; i < P; i++) {
        cr_assert_geq(theta[i], 0.0);
        nonzero += theta[i] > 0.0;
    }
    cr_assert_leq(nonzero, N);
    for (size_t k = 0; k < N; k++)
        cr_assert_lt(rel_diff(dot(X + k * P, theta, P), y[k]), 1e-9);
}

Test(fit, empty_problem)
{
    double theta[2] = {7, 7}, rss = -1;
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(NULL, NULL, NULL, 0, 2, theta, &rss, &err), CZ_OK);
    cr_assert(theta[0] == 0.0 && theta[1] == 0.0 && rss == 0.0);
    const double y[] = {1, 2};
    cr_assert_eq(cz_fit_nnls(NULL, y, NULL, 2, 0, NULL, &rss, &err), CZ_OK);
    cr_assert_float_eq(rss, 5.0, 1e-15);
}

Test(fit, feature_scales_from_one_to_1e12)
{
    enum { N = 30, P = 3 };
    /* A constant, a FLOP count (~1e12) and a byte count (~1e6), as the cost model has. */
    const double truth[P] = {1e-2, 1e-13, 1e-9};
    double X[N * P], y[N], theta[P], rss;
    for (size_t k = 0; k < N; k++) {
        X[k * P + 0] = 1.0;
        X[k * P + 1] = 1e12 * (1.0 + (double)k * (double)k);
        X[k * P + 2] = 1e6 * (3.0 + sqrt((double)k) + (double)(k % 4));
        y[k] = dot(X + k * P, truth, P);
    }
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
    for (size_t i = 0; i < P; i++)
        cr_assert_lt(rel_diff(theta[i], truth[i]), 1e-9, "theta[%zu] = %.17g, want %.17g", i,
                     theta[i], truth[i]);
}

Test(fit, weights_drop_and_repeat_rows)
{
    enum { N = 21, P = 3 };
    const double truth[P] = {1.0, 0.25, 4.0};
    double X[N * P], y[N], w[N], theta[P], rss;
    for (size_t k = 0; k < N; k++) {
        X[k * P + 0] = 1.0;
        X[k * P + 1] = (double)k;
        X[k * P + 2] = k == N - 1 ? 1.0 : 0.1 * (double)((k * 7) % 5);
        y[k] = dot(X + k * P, truth, P);
        w[k] = 1.0;
    }
    /* The last row is an outlier with weight 0; its column 2 is its only large entry. */
    y[N - 1] = 1e6;
    w[N - 1] = 0.0;
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls(X, y, w, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
    for (size_t i = 0; i < P; i++)
        cr_assert_lt(rel_diff(theta[i], truth[i]), 1e-9);
    cr_assert_lt(rss, 1e-20);

    /* A column non-zero only on zero-weight rows stays at 0. */
    double X2[N * 2], theta2[2];
    for (size_t k = 0; k < N; k++) {
        X2[k * 2 + 0] = 1.0 + (double)k;
        X2[k * 2 + 1] = k == N - 1 ? 5.0 : 0.0;
    }
    cr_assert_eq(cz_fit_nnls(X2, y, w, N, 2, theta2, NULL, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(theta2[1], 0.0);

    /* Integer weights are the same as repeated rows. */
    enum { M = 8 };
    double Xm[M * 2], ym[M], wm[M], Xr[3 * M * 2], yr[3 * M], ta[2], tb[2], ra, rb;
    size_t nr = 0;
    for (size_t k = 0; k < M; k++) {
        Xm[k * 2 + 0] = 1.0;
        Xm[k * 2 + 1] = (double)k;
        ym[k] = 2.0 + 0.5 * (double)k + (k % 2 ? 0.3 : -0.2) * (double)(k % 3);
        wm[k] = (double)(1 + k % 3);
        for (size_t c = 0; c < (size_t)wm[k]; c++, nr++) {
            Xr[nr * 2 + 0] = Xm[k * 2 + 0];
            Xr[nr * 2 + 1] = Xm[k * 2 + 1];
            yr[nr] = ym[k];
        }
    }
    cr_assert_eq(cz_fit_nnls(Xm, ym, wm, M, 2, ta, &ra, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_fit_nnls(Xr, yr, NULL, nr, 2, tb, &rb, &err), CZ_OK, "%s", err.msg);
    cr_assert_lt(rel_diff(ta[0], tb[0]), 1e-12);
    cr_assert_lt(rel_diff(ta[1], tb[1]), 1e-12);
    cr_assert_lt(rel_diff(ra, rb), 1e-12);
}

Test(fit, relative_fit_is_not_dominated_by_large_y)
{
    /* Step times from 11 ms to 10 s: a 10 ms constant plus 1 ms per unit of x, with 5 %
     * multiplicative noise. The absolute fit spends the constant on the seconds-long steps'
     * noise; the relative fit keeps every step within a few percent. */
    enum { N = 60, P = 2 };
    const double truth[P] = {1e-2, 1e-3};
    double X[N * P], y[N], theta_rel[P], theta_abs[P], pa[N], pr[N];
    gsl_rng *r = cz_rng_new(4, 100, 0);
    for (size_t k = 0; k < N; k++) {
        X[k * P + 0] = 1.0;
        X[k * P + 1] = pow(10.0, 4.0 * (double)k / (N - 1));
        y[k] = dot(X + k * P, truth, P) * (1.0 + gsl_ran_gaussian(r, 0.05));
    }
    gsl_rng_free(r);
    cz_err err = {0};
    cr_assert_eq(cz_fit_nnls_rel(X, y, N, P, theta_rel, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta_abs, NULL, &err), CZ_OK, "%s", err.msg);
    for (size_t k = 0; k < N; k++) {
        pr[k] = dot(X + k * P, theta_rel, P);
        pa[k] = dot(X + k * P, theta_abs, P);
    }
    cz_fit_err er = cz_fit_errors(y, pr, NULL, N), ea = cz_fit_errors(y, pa, NULL, N);
    cr_log_info("relative fit: theta %g %g, MAPE %.4f, max %.4f", theta_rel[0], theta_rel[1],
                er.mape, er.max_ape);
    cr_log_info("absolute fit: theta %g %g, MAPE %.4f, max %.4f", theta_abs[0], theta_abs[1],
                ea.mape, ea.max_ape);
    cr_assert_lt(rel_diff(theta_rel[0], truth[0]), 0.05);
    cr_assert_lt(rel_diff(theta_rel[1], truth[1]), 0.05);
    cr_assert_lt(er.mape, 0.06);
    cr_assert_gt(ea.mape, 3.0 * er.mape);

    /* It minimises exactly what cz_fit_nnls minimises with w = 1 / y^2. */
    double w[N], theta_w[P];
    for (size_t k = 0; k < N; k++)
        w[k] = 1.0 / (y[k] * y[k]);
    cr_assert_eq(cz_fit_nnls(X, y, w, N, P, theta_w, NULL, &err), CZ_OK, "%s", err.msg);
    cr_assert_lt(rel_diff(theta_w[0], theta_rel[0]), 1e-12);
    cr_assert_lt(rel_diff(theta_w[1], theta_rel[1]), 1e-12);

    /* Noiseless: exact. */
    for (size_t k = 0; k < N; k++)
        y[k] = dot(X + k * P, truth, P);
    cr_assert_eq(cz_fit_nnls_rel(X, y, N, P, theta_rel, &err), CZ_OK, "%s", err.msg);
    cr_assert_lt(rel_diff(theta_rel[0], truth[0]), 1e-10);
    cr_assert_lt(rel_diff(theta_rel[1], truth[1]), 1e-10);
}

static void cost_data(size_t n, double noise, uint64_t seed, double *X, double *y)
{
    const double truth[3] = {2e-3, 4e-13, 1e-10};
    gsl_rng *r = cz_rng_new(seed, 100, 0);
    for (size_t k = 0; k < n; k++) {
        X[k * 3 + 0] = 1.0;
        X[k * 3 + 1] = 1e9 * (1.0 + 1e3 * gsl_rng_uniform(r));
        X[k * 3 + 2] = 1e6 * (1.0 + 1e3 * gsl_rng_uniform(r));
        y[k] = dot(X + k * 3, truth, 3) * (1.0 + gsl_ran_gaussian(r, noise));
    }
    gsl_rng_free(r);
}

Test(fit, cv_noiseless_predicts_held_out_rows_exactly)
{
    enum { N = 30 };
    double X[N * 3], y[N], pred[N];
    cost_data(N, 0.0, 5, X, y);
    cz_err err = {0};
    cr_assert_eq(cz_fit_cv(X, y, N, 3, 5, 11, pred, &err), CZ_OK, "%s", err.msg);
    for (size_t k = 0; k < N; k++)
        cr_assert_lt(rel_diff(pred[k], y[k]), 1e-9, "row %zu: %.17g vs %.17g", k, pred[k],
                     y[k]);
    /* Leave-one-out too. */
    cr_assert_eq(cz_fit_cv(X, y, N, 3, N, 11, pred, &err), CZ_OK, "%s", err.msg);
    for (size_t k = 0; k < N; k++)
        cr_assert_lt(rel_diff(pred[k], y[k]), 1e-9);
}

Test(fit, cv_noisy_errors_are_sensible_and_deterministic)
{
    enum { N = 200 };
    double X[N * 3], y[N], pred[N], pred2[N], pred3[N];
    cost_data(N, 0.02, 6, X, y);
    cz_err err = {0};
    cr_assert_eq(cz_fit_cv(X, y, N, 3, 10, 7, pred, &err), CZ_OK, "%s", err.msg);
    cz_fit_err e = cz_fit_errors(y, pred, NULL, N);
    cr_log_info("CV: MAPE %.4f median %.4f max %.4f rmse_rel %.4f", e.mape, e.median_ape,
                e.max_ape, e.rmse_rel);
    cr_assert_eq(e.n, N);
    /* 2 % Gaussian noise: E|e| = 0.02 sqrt(2/pi) = 0.016, median 0.0135, RMS 0.02. */
    cr_assert(e.mape > 0.012 && e.mape < 0.022, "mape %g", e.mape);
    cr_assert(e.median_ape > 0.008 && e.median_ape < 0.02, "median %g", e.median_ape);
    cr_assert(e.rmse_rel > 0.015 && e.rmse_rel < 0.027, "rmse_rel %g", e.rmse_rel);
    cr_assert(e.max_ape >= e.rmse_rel && e.rmse_rel >= e.mape);
    cr_assert(e.max_ape < 0.1, "max %g", e.max_ape);

    cr_assert_eq(cz_fit_cv(X, y, N, 3, 10, 7, pred2, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(memcmp(pred, pred2, sizeof pred), 0, "same seed, same predictions");
    cr_assert_eq(cz_fit_cv(X, y, N, 3, 10, 8, pred3, &err), CZ_OK, "%s", err.msg);
    cr_assert_neq(memcmp(pred, pred3, sizeof pred), 0, "another seed, other folds");
}

Test(fit, errors_by_hand)
{
    const double y[] = {1, 2, 4, 0, -1, 8};
    const double pred[] = {1.1, 1.8, 5, 3, 3, 8};
    /* APE: 0.1, 0.1, 0.25, skipped, skipped, 0. */
    cz_fit_err e = cz_fit_errors(y, pred, NULL, 6);
    cr_assert_eq(e.n, 4);
    cr_assert_float_eq(e.mape, 0.45 / 4, 1e-12);
    cr_assert_float_eq(e.median_ape, 0.1, 1e-12);
    cr_assert_float_eq(e.max_ape, 0.25, 1e-12);
    cr_assert_float_eq(e.rmse_rel, sqrt((0.01 + 0.01 + 0.0625) / 4), 1e-12);

    const uint8_t mask[] = {1, 0, 1, 1, 1, 0};
    e = cz_fit_errors(y, pred, mask, 6);
    cr_assert_eq(e.n, 2);
    cr_assert_float_eq(e.mape, 0.175, 1e-12);
    cr_assert_float_eq(e.median_ape, 0.175, 1e-12);

    const double bad[] = {1.1, NAN};
    e = cz_fit_errors(y, bad, NULL, 2);
    cr_assert_eq(e.n, 2);
    cr_assert(isinf(e.max_ape) && isinf(e.mape));

    e = cz_fit_errors(y + 3, pred, NULL, 2);
    cr_assert_eq(e.n, 0);
    cr_assert(isnan(e.mape) && isnan(e.median_ape) && isnan(e.max_ape) && isnan(e.rmse_rel));
}

Test(fit, bad_input_names_row_and_column)
{
    enum { N = 6, P = 3 };
    double X[N * P], y[N], w[N], theta[P] = {42, 42, 42}, pred[N];
    for (size_t k = 0; k < N; k++) {
        for (size_t i = 0; i < P; i++)
            X[k * P + i] = 1.0 + (double)(k * P + i);
        y[k] = 1.0 + (double)k;
        w[k] = 1.0;
    }
    cz_err err = {0};
    X[3 * P + 2] = NAN;
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, NULL, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "row 3") && strstr(err.msg, "column 2"), "%s", err.msg);
    cr_assert_eq(theta[0], 42.0, "theta untouched on failure");
    cr_assert_eq(cz_fit_nnls_rel(X, y, N, P, theta, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "row 3") && strstr(err.msg, "column 2"), "%s", err.msg);
    cr_assert_eq(cz_fit_cv(X, y, N, P, 2, 1, pred, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "row 3") && strstr(err.msg, "column 2"), "%s", err.msg);
    X[3 * P + 2] = 1.0;

    X[5 * P + 0] = -INFINITY;
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, NULL, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "row 5") && strstr(err.msg, "column 0"), "%s", err.msg);
    X[5 * P + 0] = 1.0;

    y[4] = NAN;
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, NULL, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "y row 4"), "%s", err.msg);
    y[4] = 0.0; /* fine for the absolute fit, not for a relative one */
    cr_assert_eq(cz_fit_nnls(X, y, NULL, N, P, theta, NULL, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_fit_nnls_rel(X, y, N, P, theta, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "y row 4"), "%s", err.msg);
    y[4] = 5.0;

    w[1] = -1.0;
    cr_assert_eq(cz_fit_nnls(X, y, w, N, P, theta, NULL, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "w row 1"), "%s", err.msg);
    w[1] = NAN;
    cr_assert_eq(cz_fit_nnls(X, y, w, N, P, theta, NULL, &err), CZ_EINVAL);

    cr_assert_eq(cz_fit_cv(X, y, N, P, 1, 1, pred, &err), CZ_EINVAL);
    cr_assert_eq(cz_fit_cv(X, y, N, P, N + 1, 1, pred, &err), CZ_EINVAL);
    cr_assert_eq(cz_fit_cv(X, y, N, P, N, 1, pred, &err), CZ_OK, "%s", err.msg);
}

Test(fit, iteration_cap_is_erange)
{
    enum { N = 10, P = 3 };
    const double truth[P] = {1, 2, 3};
    double X[N * P], y[N], theta[P] = {42, 42, 42};
    for (size_t k = 0; k < N; k++) {
        X[k * P + 0] = 1.0;
        X[k * P + 1] = (double)k;
        X[k * P + 2] = (double)(k * k % 7);
        y[k] = dot(X + k * P, truth, P);
    }
    cz_err err = {0};
    cr_assert_eq(cz__fit_nnls_capped(X, y, NULL, N, P, 2, theta, NULL, &err), CZ_ERANGE);
    cr_assert(strstr(err.msg, "no convergence"), "%s", err.msg);
    cr_assert_eq(theta[0], 42.0);
    cr_assert_eq(cz__fit_nnls_capped(X, y, NULL, N, P, 3, theta, NULL, &err), CZ_OK, "%s",
                 err.msg);
    cr_assert_lt(rel_diff(theta[2], 3.0), 1e-10);
}

Test(fit, kkt_conditions_on_larger_problems)
{
    /* Beyond the brute force's reach: at the optimum the weighted gradient
     * g_i = X_i^T W (y - X theta) is zero where theta_i > 0 and <= 0 where theta_i = 0. */
    enum { N = 300, P = 8 };
    static double X[N * P], y[N], w[N];
    gsl_rng *r = cz_rng_new(9, 100, 0);
    for (unsigned trial = 0; trial < 50; trial++) {
        double truth[P], scale[P], theta[P], rss;
        for (size_t i = 0; i < P; i++) {
            scale[i] = pow(10.0, 12.0 * gsl_rng_uniform(r));
            truth[i] = gsl_ran_gaussian(r, 1.0) / scale[i];
        }
        for (size_t k = 0; k < N; k++) {
            for (size_t i = 0; i < P; i++)
                X[k * P + i] = scale[i] * gsl_rng_uniform(r);
            y[k] = dot(X + k * P, truth, P) + gsl_ran_gaussian(r, 0.5);
            w[k] = trial % 2 ? gsl_rng_uniform(r) : 1.0;
        }
        cz_err err = {0};
        cr_assert_eq(cz_fit_nnls(X, y, w, N, P, theta, &rss, &err), CZ_OK, "%s", err.msg);
        double ynorm = 0.0;
        for (size_t k = 0; k < N; k++)
            ynorm += w[k] * y[k] * y[k];
        ynorm = sqrt(ynorm);
        for (size_t i = 0; i < P; i++) {
            double g = 0.0, cnorm = 0.0;
            for (size_t k = 0; k < N; k++) {
                g += w[k] * X[k * P + i] * (y[k] - dot(X + k * P, theta, P));
                cnorm += w[k] * X[k * P + i] * X[k * P + i];
            }
            g /= sqrt(cnorm) * ynorm; /* the gradient of the column-scaled problem, over ||y|| */
            cr_assert_geq(theta[i], 0.0);
            if (theta[i] > 0.0)
                cr_assert_lt(fabs(g), 1e-9, "trial %u: column %zu: g %g", trial, i, g);
            else
                cr_assert_lt(g, 1e-9, "trial %u: column %zu: g %g", trial, i, g);
        }
    }
    gsl_rng_free(r);
}
