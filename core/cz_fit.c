/* cz_fit.c - see cz_fit.h. Lawson-Hanson NNLS on the row-weighted, column-scaled problem
 * min ||A x - b||, A = diag(sqrt w) X diag(1/s), b = diag(sqrt w) y, theta = x / s. */
#include "cz_fit.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_vector.h>

#include "cz_rng.h"
#include "cz_stats.h"

/* A passive set whose scaled columns have sigma_min <= FIT_RCOND * sigma_max counts as
 * rank-deficient: the column that would make it so is refused. */
#define FIT_RCOND 1e-10

/* Runs a GSL call; a non-zero status records where and why and jumps to `fail`. */
#define FIT_GSL(call)                                                                    \
    do {                                                                                 \
        int fit_rc_ = (call);                                                            \
        if (fit_rc_ != 0) {                                                              \
            st = cz_err_set(err, CZ_ERANGE, "%s:%d: %s failed: %s", __FILE__, __LINE__,  \
                            #call, gsl_strerror(fit_rc_));                               \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)

/* Scratch of one fit: the scaled problem and the active-set state. */
typedef struct fit_ws {
    size_t n, p;
    gsl_matrix *A;     /* (n, p) weighted rows, unit-norm columns (dead columns zero) */
    gsl_vector *b;     /* (n) weighted targets */
    gsl_vector *r;     /* (n) residual b - A x */
    gsl_vector *g;     /* (p) A^T r: the negative gradient of ||A x - b||^2 / 2 */
    gsl_matrix *U;     /* (n, p) passive columns, overwritten by the SVD's U */
    gsl_matrix *V;     /* (p, p) */
    gsl_vector *S;     /* (p) singular values */
    gsl_vector *work;  /* (p) */
    gsl_vector *zs;    /* (p) sub-problem solution, in passive-list order */
    double *scale;     /* (p) weighted column norms s_i (0: dead column) */
    double *x;         /* (p) current iterate, scaled units; 0 outside the passive set */
    double *z;         /* (p) sub-problem solution by column; 0 outside the passive set */
    size_t *passive;   /* (p) the passive columns, in order of entry */
    uint8_t *in_p;     /* (p) 1: in the passive set */
    uint8_t *refused;  /* (p) 1: refused as a candidate since the last accepted entry */
} fit_ws;

static void fit_ws_free(fit_ws *ws)
{
    if (ws->A) gsl_matrix_free(ws->A);
    if (ws->b) gsl_vector_free(ws->b);
    if (ws->r) gsl_vector_free(ws->r);
    if (ws->g) gsl_vector_free(ws->g);
    if (ws->U) gsl_matrix_free(ws->U);
    if (ws->V) gsl_matrix_free(ws->V);
    if (ws->S) gsl_vector_free(ws->S);
    if (ws->work) gsl_vector_free(ws->work);
    if (ws->zs) gsl_vector_free(ws->zs);
    free(ws->scale);
    free(ws->x);
    free(ws->z);
    free(ws->passive);
    free(ws->in_p);
    free(ws->refused);
}

static void fit_ws_alloc(fit_ws *ws, size_t n, size_t p)
{
    memset(ws, 0, sizeof *ws);
    ws->n = n;
    ws->p = p;
    ws->A = gsl_matrix_calloc(n, p);
    ws->b = gsl_vector_calloc(n);
    ws->r = gsl_vector_calloc(n);
    ws->g = gsl_vector_calloc(p);
    ws->U = gsl_matrix_calloc(n, p);
    ws->V = gsl_matrix_calloc(p, p);
    ws->S = gsl_vector_calloc(p);
    ws->work = gsl_vector_calloc(p);
    ws->zs = gsl_vector_calloc(p);
    /* GSL returns NULL on exhaustion (its handler off): unrecoverable, as in cz_rng_new. */
    CZ_ASSERT(ws->A && ws->b && ws->r && ws->g && ws->U && ws->V && ws->S && ws->work &&
              ws->zs);
    ws->scale = cz_xcalloc(p, sizeof *ws->scale);
    ws->x = cz_xcalloc(p, sizeof *ws->x);
    ws->z = cz_xcalloc(p, sizeof *ws->z);
    ws->passive = cz_xcalloc(p, sizeof *ws->passive);
    ws->in_p = cz_xcalloc(p, sizeof *ws->in_p);
    ws->refused = cz_xcalloc(p, sizeof *ws->refused);
}

/* Solves the unconstrained least-squares problem on the k passive columns: z = argmin
 * ||A_P z - b||, scattered into ws->z by column. *full_rank is 0 (and z is not written)
 * when the passive columns are rank-deficient at FIT_RCOND or outnumber the rows. */
static cz_status solve_passive(fit_ws *ws, size_t k, int *full_rank, cz_err *err)
{
    cz_status st = CZ_OK;
    *full_rank = 0;
    if (k == 0) {
        memset(ws->z, 0, ws->p * sizeof *ws->z);
        *full_rank = 1;
        return CZ_OK;
    }
    if (k > ws->n)
        return CZ_OK;
    gsl_matrix_view U = gsl_matrix_submatrix(ws->U, 0, 0, ws->n, k);
    gsl_matrix_view V = gsl_matrix_submatrix(ws->V, 0, 0, k, k);
    gsl_vector_view S = gsl_vector_subvector(ws->S, 0, k);
    gsl_vector_view work = gsl_vector_subvector(ws->work, 0, k);
    gsl_vector_view zs = gsl_vector_subvector(ws->zs, 0, k);
    for (size_t c = 0; c < k; c++) {
        gsl_vector_const_view src = gsl_matrix_const_column(ws->A, ws->passive[c]);
        gsl_vector_view dst = gsl_matrix_column(&U.matrix, c);
        FIT_GSL(gsl_vector_memcpy(&dst.vector, &src.vector));
    }
    FIT_GSL(gsl_linalg_SV_decomp(&U.matrix, &V.matrix, &S.vector, &work.vector));
    double smax = gsl_vector_get(&S.vector, 0), smin = gsl_vector_get(&S.vector, k - 1);
    if (!(smin > FIT_RCOND * smax))
        return CZ_OK;
    FIT_GSL(gsl_linalg_SV_solve(&U.matrix, &V.matrix, &S.vector, ws->b, &zs.vector));
    memset(ws->z, 0, ws->p * sizeof *ws->z);
    for (size_t c = 0; c < k; c++)
        ws->z[ws->passive[c]] = gsl_vector_get(&zs.vector, c);
    *full_rank = 1;
    return CZ_OK;
fail:
    return st;
}

/* r = b - A x, g = A^T r. */
static cz_status gradient(fit_ws *ws, cz_err *err)
{
    cz_status st = CZ_OK;
    gsl_vector_view xv = gsl_vector_view_array(ws->x, ws->p);
    FIT_GSL(gsl_vector_memcpy(ws->r, ws->b));
    FIT_GSL(gsl_blas_dgemv(CblasNoTrans, -1.0, ws->A, &xv.vector, 1.0, ws->r));
    FIT_GSL(gsl_blas_dgemv(CblasTrans, 1.0, ws->A, ws->r, 0.0, ws->g));
    return CZ_OK;
fail:
    return st;
}

/* Removes passive column at list position c, keeping the order of the others. */
static void passive_remove(fit_ws *ws, size_t *k, size_t c)
{
    ws->in_p[ws->passive[c]] = 0;
    memmove(ws->passive + c, ws->passive + c + 1, (*k - c - 1) * sizeof *ws->passive);
    (*k)--;
}

/* The Lawson-Hanson iteration on validated inputs; sw[k] = sqrt(w_k) (NULL: 1), finite and
 * >= 0. Writes theta (original units) on success. */
static cz_status nnls_run(const double *X, const double *y, const double *sw, size_t n,
                          size_t p, size_t max_iter, double *theta, cz_err *err)
{
    cz_status st = CZ_OK;
    fit_ws ws;
    fit_ws_alloc(&ws, n, p);

    for (size_t k = 0; k < n; k++) {
        double rk = sw ? sw[k] : 1.0;
        double bk = rk * y[k];
        if (!isfinite(bk)) {
            st = cz_err_set(err, CZ_ERANGE, "cz_fit_nnls: row %zu: weighted y overflows "
                            "(y %g, sqrt(w) %g)", k, y[k], rk);
            goto fail;
        }
        gsl_vector_set(ws.b, k, bk);
        for (size_t i = 0; i < p; i++) {
            double a = rk * X[k * p + i];
            if (!isfinite(a)) {
                st = cz_err_set(err, CZ_ERANGE, "cz_fit_nnls: X row %zu, column %zu: "
                                "weighted value overflows (X %g, sqrt(w) %g)", k, i,
                                X[k * p + i], rk);
                goto fail;
            }
            gsl_matrix_set(ws.A, k, i, a);
        }
    }
    for (size_t i = 0; i < p; i++) {
        gsl_vector_view col = gsl_matrix_column(ws.A, i);
        double s = gsl_blas_dnrm2(&col.vector);
        if (!isfinite(s)) {
            st = cz_err_set(err, CZ_ERANGE, "cz_fit_nnls: column %zu: weighted norm "
                            "overflows", i);
            goto fail;
        }
        ws.scale[i] = s;
        if (s > 0.0)
            FIT_GSL(gsl_vector_scale(&col.vector, 1.0 / s));
    }

    /* Columns are unit-norm, so |g_i| <= ||r|| <= ||b||: the optimality tolerance is a
     * few rounding errors of the dot products relative to ||b||. */
    double tol = 10.0 * DBL_EPSILON * (double)(n > p ? n : p) * gsl_blas_dnrm2(ws.b);
    size_t np = 0, entries = 0;
    for (;;) {
        if ((st = gradient(&ws, err)) != CZ_OK)
            goto fail;
        memset(ws.refused, 0, p);
        int accepted = 0;
        for (;;) {
            /* The candidate: the free, live, unrefused column of largest gradient. */
            size_t t = p;
            for (size_t i = 0; i < p; i++)
                if (!ws.in_p[i] && !ws.refused[i] && ws.scale[i] > 0.0 &&
                    gsl_vector_get(ws.g, i) > tol &&
                    (t == p || gsl_vector_get(ws.g, i) > gsl_vector_get(ws.g, t)))
                    t = i;
            if (t == p)
                break;
            if (entries == max_iter) {
                st = cz_err_set(err, CZ_ERANGE, "cz_fit_nnls: no convergence after %zu "
                                "column entries into the passive set (n %zu, p %zu)",
                                entries, n, p);
                goto fail;
            }
            /* Lawson-Hanson's tests on the entering column: the passive columns must stay
             * independent and its unconstrained coefficient must be positive. */
            ws.passive[np++] = t;
            ws.in_p[t] = 1;
            int full_rank;
            if ((st = solve_passive(&ws, np, &full_rank, err)) != CZ_OK)
                goto fail;
            if (full_rank && ws.z[t] > 0.0) {
                accepted = 1;
                break;
            }
            passive_remove(&ws, &np, np - 1);
            ws.refused[t] = 1;
        }
        if (!accepted)
            break;
        entries++;

        /* Inner loop: step from x towards z until z is feasible, dropping the columns
         * that reach zero. Each pass drops at least one column. */
        for (;;) {
            int feasible = 1;
            for (size_t c = 0; c < np; c++)
                if (ws.z[ws.passive[c]] <= 0.0)
                    feasible = 0;
            if (feasible)
                break;
            double alpha = INFINITY;
            size_t argmin = p;
            for (size_t c = 0; c < np; c++) {
                size_t i = ws.passive[c];
                if (ws.z[i] <= 0.0) {
                    double a = ws.x[i] / (ws.x[i] - ws.z[i]);
                    if (a < alpha) {
                        alpha = a;
                        argmin = i;
                    }
                }
            }
            CZ_ASSERT(argmin < p);
            for (size_t c = 0; c < np; c++) {
                size_t i = ws.passive[c];
                ws.x[i] += alpha * (ws.z[i] - ws.x[i]);
            }
            ws.x[argmin] = 0.0;
            for (size_t c = np; c-- > 0;) {
                size_t i = ws.passive[c];
                if (ws.x[i] <= 0.0) {
                    ws.x[i] = 0.0;
                    passive_remove(&ws, &np, c);
                }
            }
            int full_rank;
            if ((st = solve_passive(&ws, np, &full_rank, err)) != CZ_OK)
                goto fail;
            if (!full_rank) {
                /* A subset of independent columns is at least as well conditioned: only
                 * a breakdown of the SVD itself gets here. */
                st = cz_err_set(err, CZ_ERANGE, "cz_fit_nnls: the passive columns became "
                                "rank-deficient after dropping a column (n %zu, p %zu)",
                                n, p);
                goto fail;
            }
        }
        for (size_t i = 0; i < p; i++)
            ws.x[i] = ws.in_p[i] ? ws.z[i] : 0.0;
    }

    for (size_t i = 0; i < p; i++)
        theta[i] = ws.scale[i] > 0.0 && ws.in_p[i] ? ws.x[i] / ws.scale[i] : 0.0;
    fit_ws_free(&ws);
    return CZ_OK;
fail:
    fit_ws_free(&ws);
    return st;
}

/* CZ_EINVAL naming the first non-finite X or y. */
static cz_status check_finite(const char *who, const double *X, const double *y, size_t n,
                              size_t p, cz_err *err)
{
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < p; i++)
            if (!isfinite(X[k * p + i]))
                return cz_err_set(err, CZ_EINVAL, "%s: X row %zu, column %zu: %g is not a "
                                  "finite number", who, k, i, X[k * p + i]);
        if (!isfinite(y[k]))
            return cz_err_set(err, CZ_EINVAL, "%s: y row %zu: %g is not a finite number",
                              who, k, y[k]);
    }
    return CZ_OK;
}

static double weighted_rss(const double *X, const double *y, const double *w, size_t n,
                           size_t p, const double *theta)
{
    double rss = 0.0;
    for (size_t k = 0; k < n; k++) {
        double f = 0.0;
        for (size_t i = 0; i < p; i++)
            f += X[k * p + i] * theta[i];
        double d = y[k] - f;
        rss += (w ? w[k] : 1.0) * d * d;
    }
    return rss;
}

cz_status cz__fit_nnls_capped(const double *X, const double *y, const double *w, size_t n,
                              size_t p, size_t max_iter, double *theta, double *rss,
                              cz_err *err)
{
    gsl_set_error_handler_off();
    CZ_ASSERT(n == 0 || y != NULL);
    CZ_ASSERT(p == 0 || theta != NULL);
    CZ_ASSERT(n == 0 || p == 0 || X != NULL);
    cz_status st = check_finite("cz_fit_nnls", X, y, n, p, err);
    if (st != CZ_OK)
        return st;
    for (size_t k = 0; w && k < n; k++)
        if (!isfinite(w[k]) || w[k] < 0.0)
            return cz_err_set(err, CZ_EINVAL, "cz_fit_nnls: w row %zu: %g is not a finite "
                              "non-negative weight", k, w[k]);
    if (n == 0 || p == 0) {
        for (size_t i = 0; i < p; i++)
            theta[i] = 0.0;
        if (rss)
            *rss = weighted_rss(X, y, w, n, 0, theta);
        return CZ_OK;
    }
    double *sw = NULL;
    if (w) {
        sw = cz_xmalloc(n * sizeof *sw);
        for (size_t k = 0; k < n; k++)
            sw[k] = sqrt(w[k]);
    }
    double *th = cz_xmalloc(p * sizeof *th);
    st = nnls_run(X, y, sw, n, p, max_iter, th, err);
    if (st == CZ_OK) {
        memcpy(theta, th, p * sizeof *th);
        if (rss)
            *rss = weighted_rss(X, y, w, n, p, theta);
    }
    free(th);
    free(sw);
    return st;
}

cz_status cz_fit_nnls(const double *X, const double *y, const double *w, size_t n, size_t p,
                      double *theta, double *rss, cz_err *err)
{
    return cz__fit_nnls_capped(X, y, w, n, p, 3 * p, theta, rss, err);
}

/* CZ_EINVAL naming the first row whose y is not a finite positive time. */
static cz_status check_positive(const char *who, const double *y, size_t n, cz_err *err)
{
    for (size_t k = 0; k < n; k++)
        if (!(isfinite(y[k]) && y[k] > 0.0))
            return cz_err_set(err, CZ_EINVAL, "%s: y row %zu: %g: a relative fit needs "
                              "finite y > 0", who, k, y[k]);
    return CZ_OK;
}

cz_status cz_fit_nnls_rel(const double *X, const double *y, size_t n, size_t p, double *theta,
                          cz_err *err)
{
    gsl_set_error_handler_off();
    CZ_ASSERT(n == 0 || y != NULL);
    CZ_ASSERT(p == 0 || theta != NULL);
    CZ_ASSERT(n == 0 || p == 0 || X != NULL);
    cz_status st = check_positive("cz_fit_nnls_rel", y, n, err);
    if (st == CZ_OK)
        st = check_finite("cz_fit_nnls_rel", X, y, n, p, err);
    if (st != CZ_OK)
        return st;
    if (n == 0 || p == 0) {
        for (size_t i = 0; i < p; i++)
            theta[i] = 0.0;
        return CZ_OK;
    }
    /* sqrt(1 / y^2) = 1 / y, taken directly so that tiny y do not overflow w first. */
    double *sw = cz_xmalloc(n * sizeof *sw);
    for (size_t k = 0; k < n; k++)
        sw[k] = 1.0 / y[k];
    double *th = cz_xmalloc(p * sizeof *th);
    st = nnls_run(X, y, sw, n, p, 3 * p, th, err);
    if (st == CZ_OK)
        memcpy(theta, th, p * sizeof *th);
    free(th);
    free(sw);
    return st;
}

cz_status cz_fit_cv(const double *X, const double *y, size_t n, size_t p, uint32_t folds,
                    uint64_t seed, double *pred, cz_err *err)
{
    if (folds < 2 || (size_t)folds > n)
        return cz_err_set(err, CZ_EINVAL, "cz_fit_cv: %" PRIu32 " folds for %zu rows: need "
                          "2 <= folds <= rows", folds, n);
    CZ_ASSERT(y != NULL && pred != NULL && (p == 0 || X != NULL));
    cz_status st = check_positive("cz_fit_cv", y, n, err);
    if (st == CZ_OK)
        st = check_finite("cz_fit_cv", X, y, n, p, err);
    if (st != CZ_OK)
        return st;

    size_t *perm = cz_xmalloc(n * sizeof *perm);
    uint32_t *fold_of = cz_xmalloc(n * sizeof *fold_of);
    for (size_t k = 0; k < n; k++)
        perm[k] = k;
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_FIT_CV, 0);
    gsl_ran_shuffle(r, perm, n, sizeof *perm);
    gsl_rng_free(r);
    for (size_t i = 0; i < n; i++)
        fold_of[perm[i]] = (uint32_t)(i % folds);

    double *Xt = cz_xmalloc((n * p > 0 ? n * p : 1) * sizeof *Xt);
    double *yt = cz_xmalloc(n * sizeof *yt);
    double *theta = cz_xmalloc((p > 0 ? p : 1) * sizeof *theta);
    for (uint32_t f = 0; f < folds && st == CZ_OK; f++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            if (fold_of[k] == f)
                continue;
            if (p > 0)
                memcpy(Xt + m * p, X + k * p, p * sizeof *Xt);
            yt[m++] = y[k];
        }
        st = cz_fit_nnls_rel(Xt, yt, m, p, theta, err);
        if (st != CZ_OK) {
            cz_err_prefix(err, "cz_fit_cv: fold %" PRIu32 ": ", f);
            break;
        }
        for (size_t k = 0; k < n; k++) {
            if (fold_of[k] != f)
                continue;
            double v = 0.0;
            for (size_t i = 0; i < p; i++)
                v += X[k * p + i] * theta[i];
            pred[k] = v;
        }
    }
    free(theta);
    free(yt);
    free(Xt);
    free(fold_of);
    free(perm);
    return st;
}

cz_fit_err cz_fit_errors(const double *y, const double *pred, const uint8_t *mask, size_t n)
{
    cz_fit_err e = {NAN, NAN, NAN, NAN, NAN, 0};
    double *ape = cz_xmalloc((n > 0 ? n : 1) * sizeof *ape);
    size_t m = 0;
    double sum = 0.0, sum2 = 0.0;
    for (size_t k = 0; k < n; k++) {
        if ((mask && !mask[k]) || !(isfinite(y[k]) && y[k] > 0.0))
            continue;
        double a = isfinite(pred[k]) ? fabs(pred[k] - y[k]) / y[k] : INFINITY;
        ape[m++] = a;
        sum += a;
        sum2 += a * a;
    }
    if (m > 0) {
        gsl_sort(ape, 1, m);
        e.mape = sum / (double)m;
        e.median_ape = cz_percentile_sorted(ape, m, 50.0);
        e.p90_ape = cz_percentile_sorted(ape, m, 90.0);
        e.max_ape = ape[m - 1];
        e.rmse_rel = sqrt(sum2 / (double)m);
        e.n = m;
    }
    free(ape);
    return e;
}
