/* cz_fit.h - non-negative least squares for fitting a linear cost model to measured times.
 *
 * The calibration of the simulator's cost model (`cadenza calibrate`) fits measured step
 * times y_k of a real engine to time = sum_i theta_i x_ki over a few features (FLOPs, KV
 * bytes, sequences, a constant column of ones ...) with theta >= 0, and judges the fit by
 * its relative errors on held-out steps. This module holds the fit (Lawson & Hanson,
 * "Solving Least Squares Problems", 1974, ch. 23, algorithm NNLS), its relative-error
 * form, k-fold cross-validation and the error summaries.
 *
 * Matrices are row-major doubles: X[k * p + i] is feature i of observation (row) k. Row
 * and column numbers in error messages are 0-based. Every function allocates its own
 * scratch and frees it before returning; nothing is kept between calls and no state is
 * global, except that the fitting functions turn GSL's abort-on-error handler off
 * (gsl_set_error_handler_off, as the rest of the toolkit does) and report GSL's failures
 * as a cz_status. Not a hot path: each fit costs O(n p^2) per active-set change. */
#ifndef CZ_FIT_H
#define CZ_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

/* Weighted non-negative least squares: finds theta[0..p) >= 0 minimising
 *     sum_k w_k (y_k - sum_i X[k*p+i] theta_i)^2
 * over the n x p row-major matrix X, the targets y[0..n) and the weights w[0..n)
 * (w == NULL: every weight 1; w_k = 0 drops row k). theta is in the units of y per unit of
 * each feature. *rss (rss may be NULL) receives the minimised weighted sum itself,
 * computed in the original units from the returned theta.
 *
 * Method: Lawson-Hanson active set. Internally each row is multiplied by sqrt(w_k) and
 * each column divided by its weighted 2-norm, so features spanning 1 to 1e12 are equally
 * well conditioned; theta is returned in the original units. Each unconstrained
 * sub-problem on the passive (free) columns is solved by GSL's SVD (gsl_linalg_SV_decomp,
 * gsl_linalg_SV_solve).
 *
 * Rank deficiency: a column that is zero on every row of non-zero weight keeps
 * theta_i = 0. A column enters the passive set only if the passive columns stay linearly
 * independent (smallest singular value of the scaled passive columns above 1e-10 times
 * the largest), so of exactly or nearly collinear columns only one carries a coefficient
 * (the first to enter; the others stay 0) and the solution is the minimiser over the
 * columns kept. n < p is allowed: at most rank(X) <= n coefficients are non-zero. n == 0
 * or p == 0 gives theta = 0.
 *
 * Relative error: passing w_k = 1 / y_k^2 minimises the sum of squared relative errors
 * sum_k ((y_k - X_k . theta) / y_k)^2, the least-squares surrogate of the MAPE the
 * calibration targets (cz_fit_nnls_rel does exactly this).
 *
 * Errors (theta and *rss are written only on CZ_OK):
 *   CZ_EINVAL  a NaN or infinite X or y, or a NaN, infinite or negative weight; the message
 *              names the row and, for X, the column ("cz_fit_nnls: X row 3, column 2:
 *              nan is not a finite number").
 *   CZ_ERANGE  no convergence within 3 p column entries into the passive set (Lawson and
 *              Hanson's finite-termination argument makes this a numerical breakdown), a
 *              weighted value that overflows, or a GSL SVD failure (the message names the
 *              call and GSL's reason).
 * X, y and theta must not be NULL when n and p are non-zero (CZ_ASSERT). */
cz_status cz_fit_nnls(const double *X, const double *y, const double *w, size_t n, size_t p,
                      double *theta, double *rss, cz_err *err);

/* cz_fit_nnls with w_k = 1 / y_k^2: minimises the sum of squared relative errors
 * sum_k ((y_k - X_k . theta) / y_k)^2 over theta >= 0. Every y_k must be finite and > 0
 * (a time); otherwise CZ_EINVAL naming the row. Other errors and the treatment of rank
 * deficiency as cz_fit_nnls. theta is written only on CZ_OK. */
cz_status cz_fit_nnls_rel(const double *X, const double *y, size_t n, size_t p, double *theta,
                          cz_err *err);

/* k-fold cross-validation of cz_fit_nnls_rel. The rows are shuffled by a GSL taus2 stream
 * seeded from (seed, CZ_RNG_FIT_CV, 0) (cz_rng.h) with gsl_ran_shuffle, and the row at
 * shuffled position i goes to fold i % folds, so fold sizes differ by at most one. For
 * each fold, theta is fitted on the rows of the other folds and pred[k] = X_k . theta for
 * every row k of the fold: pred[0..n) holds each row's held-out prediction, in the units
 * of y. The same (X, y, folds, seed) give bit-identical pred.
 *
 * Errors: CZ_EINVAL when folds < 2 or folds > n, or for the inputs cz_fit_nnls_rel refuses
 * (checked on all rows first, so the message names the row of X and y as passed);
 * CZ_ERANGE when a fold's fit fails, the message prefixed with "fold F: ". pred is fully
 * written only on CZ_OK (partly on failure). */
cz_status cz_fit_cv(const double *X, const double *y, size_t n, size_t p, uint32_t folds,
                    uint64_t seed, double *pred, cz_err *err);

/* Relative-error summary of predictions against measurements. All errors are fractions
 * (0.05 = 5 %), not percents. */
typedef struct cz_fit_err {
    double mape;       /* mean of APE_k = |pred_k - y_k| / y_k over the rows counted */
    double median_ape; /* median APE (numpy's linear interpolation, cz_percentile_sorted) */
    double p90_ape;    /* 90th percentile of APE (likewise) */
    double max_ape;    /* largest APE */
    double rmse_rel;   /* sqrt(mean APE_k^2): root mean squared relative error */
    size_t n;          /* rows counted */
} cz_fit_err;

/* Summary over the rows k < n with mask[k] != 0 (mask == NULL: every row) whose y_k is
 * finite and > 0; the other rows are skipped and not counted. A non-finite pred_k counts
 * with APE = +inf. No row counted gives n = 0 and NaN everywhere. Allocates a scratch
 * copy of the APEs (freed before returning); never fails. */
cz_fit_err cz_fit_errors(const double *y, const double *pred, const uint8_t *mask, size_t n);

/* For tests of the non-convergence path only: cz_fit_nnls with the cap on column entries
 * into the passive set set to max_iter instead of 3 p. */
cz_status cz__fit_nnls_capped(const double *X, const double *y, const double *w, size_t n,
                              size_t p, size_t max_iter, double *theta, double *rss,
                              cz_err *err);

#endif
