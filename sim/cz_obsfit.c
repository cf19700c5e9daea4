/* cz_obsfit.c - see cz_obsfit.h. */
#define _POSIX_C_SOURCE 200809L
#include "cz_obsfit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_multimin.h>

#include "cz_h5read.h"
#include "cz_metrics.h"
#include "cz_sim.h"
#include "cz_stats.h"

/* A simulated request that did not complete counts as this far off (|ln ratio|). */
#define MISS_LOG 2.302585092994046 /* ln 10 */
/* The simplex's first steps, in log units: a factor of about 1.65 either way. */
#define STEP0 0.5
/* Converged when the simplex's size is below this (a relative change of 0.1 %). */
#define SIZE_TOL 1e-3
/* Seeds for groups that are all 0 in the base cost. */
#define SEED_SEQ_S 1e-5
#define SEED_INGEST_S 1e-3
#define SEED_INGEST_TOKEN_S 1e-6

static const char *const param_names[CZ_OF_N] = {"step", "compute", "kv", "seq", "ingest",
                                                 "ingest_per_token"};

const char *cz_obsfit_param_name(cz_obsfit_param p)
{
    CZ_ASSERT(p < CZ_OF_N);
    return param_names[p];
}

cz_status cz_obsfit_parse_mask(const char *list, uint32_t *mask, cz_err *err)
{
    *mask = 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int k = -1;
        for (int i = 0; i < CZ_OF_N; i++)
            if (strlen(param_names[i]) == n && strncmp(p, param_names[i], n) == 0)
                k = i;
        if (k < 0)
            return cz_err_set(err, CZ_EINVAL,
                              "--fit: unknown parameter '%.*s' (expected a comma-separated "
                              "list of step, compute, kv, seq, ingest, ingest_per_token)",
                              (int)n, p);
        *mask |= 1u << k;
        p += n;
        if (*p == ',')
            p++;
    }
    if (!*mask)
        return cz_err_set(err, CZ_EINVAL, "--fit: expected at least one parameter (step, "
                                          "compute, kv, seq, ingest, ingest_per_token)");
    return CZ_OK;
}

/* ---- observed runs ---- */

cz_status cz_obs_load(const char *path, cz_obs_run *out, cz_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    cz_workload_init(&out->wl);
    static const char *const f[] = {"stage",  "stream",        "outcome",  "input_tokens",
                                    "output_tokens", "sent_s", "first_token_s", "finish_s"};
    enum { NF = 8 };
    double *c[NF];
    size_t n;
    cz_status st = cz_h5_read_columns(path, "requests", f, NF, c, &n, err);
    if (st != CZ_OK)
        return st;
    uint32_t *ids = cz_xmalloc((n ? n : 1) * sizeof *ids);
    double *t = cz_xmalloc((n ? n : 1) * sizeof *t);
    uint32_t k = 0;
    for (size_t i = 0; i < n && st == CZ_OK; i++) {
        if (c[0][i] != 0 || c[1][i] != 0)
            continue; /* a later stage's part, a periodic stream */
        if ((uint32_t)c[2][i] != CZ_REQ_COMPLETED || !(c[4][i] >= 1)) {
            out->excluded++;
            continue;
        }
        double sent = c[5][i], first = c[6][i], fin = c[7][i];
        if (!isfinite(sent) || !isfinite(first) || !isfinite(fin) || sent < 0 ||
            first < sent || fin < first || !(c[3][i] >= 1) || c[3][i] > 4e9 || c[4][i] > 4e9)
            st = cz_err_set(err, CZ_EINVAL,
                            "%s: /requests row %zu: a completed request needs 0 <= sent_s <= "
                            "first_token_s <= finish_s and token counts from 1 (got %g, %g, "
                            "%g; %g in, %g out)",
                            path, i, sent, first, fin, c[3][i], c[4][i]);
        ids[k] = (uint32_t)i;
        t[k++] = sent;
    }
    if (st == CZ_OK && k == 0)
        st = cz_err_set(err, CZ_EINVAL, "%s: /requests has no completed request to fit", path);
    if (st == CZ_OK) {
        cz_sort_by_time(ids, t, k);
        out->n = k;
        out->ttft = cz_xmalloc(k * sizeof *out->ttft);
        out->e2e = cz_xmalloc(k * sizeof *out->e2e);
        out->itl = cz_xmalloc(k * sizeof *out->itl);
        for (uint32_t j = 0; j < k; j++) {
            size_t i = ids[j];
            char name[32];
            snprintf(name, sizeof name, "r%zu", i);
            cz_workload_begin_session(&out->wl, name, CZ_CLASS_RT, CZ_TIMING_OPEN);
            cz_turn *tu = cz_workload_add_turn(&out->wl);
            tu->arrival_s = c[5][i];
            tu->in_text_tokens = (uint32_t)c[3][i];
            tu->out_text_tokens = (uint32_t)c[4][i];
            out->ttft[j] = c[6][i] - c[5][i];
            out->e2e[j] = c[7][i] - c[5][i];
            out->itl[j] = c[4][i] > 1 ? (c[7][i] - c[6][i]) / (c[4][i] - 1) : NAN;
        }
    }
    for (int i = 0; i < NF; i++)
        free(c[i]);
    free(ids);
    free(t);
    if (st != CZ_OK)
        cz_obs_free(out);
    return st;
}

void cz_obs_free(cz_obs_run *r)
{
    cz_workload_free(&r->wl);
    free(r->ttft);
    free(r->e2e);
    free(r->itl);
    r->ttft = r->e2e = r->itl = NULL;
    r->n = 0;
}

/* ---- one simulation ---- */

enum { M_TTFT = 0, M_ITL, M_E2E, N_M };
static const char *const metric_names[N_M] = {"ttft", "itl", "e2el"};

/* Simulates run r under cfg: sim[m][i] per request (NaN: did not complete). */
static cz_status simulate(const cz_config *cfg, cz_obs_run *r, double *sim[N_M], cz_err *err)
{
    cz_metrics m;
    cz_metrics_init(&m, cfg->timeline_interval_s, r->n);
    cz_run_stats stats;
    cz_status st = cz_sim_run(cfg, &r->wl, &m, &stats, NULL, NULL, err);
    for (uint32_t i = 0; i < r->n; i++)
        sim[M_TTFT][i] = sim[M_ITL][i] = sim[M_E2E][i] = NAN;
    for (uint64_t id = 0; st == CZ_OK && id < m.n_req; id++) {
        const cz_req_record *q = cz_metrics_req(&m, id);
        if (q->stage != 0 || q->stream || q->outcome != CZ_REQ_COMPLETED ||
            q->session >= r->n)
            continue;
        uint32_t i = (uint32_t)q->session;
        sim[M_TTFT][i] = q->first_token_s - q->arrival_s;
        sim[M_E2E][i] = q->finish_s - q->arrival_s;
        sim[M_ITL][i] = q->output_tokens > 1 ? (q->finish_s - q->first_token_s) /
                                                   (double)(q->output_tokens - 1)
                                             : NAN;
    }
    cz_metrics_free(&m);
    return st;
}

static const double *obs_of(const cz_obs_run *r, int m)
{
    return m == M_TTFT ? r->ttft : m == M_ITL ? r->itl : r->e2e;
}

/* The p-th percentile of the finite values of v[0..n) (scratch: n doubles). */
static double pct(const double *v, uint32_t n, double p, double *scratch)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            scratch[k++] = v[i];
    cz_dist d;
    cz_dist_compute(scratch, k, &d);
    return p == 50 ? d.p50 : p == 90 ? d.p90 : d.p99;
}

/* The residuals of one run into res (run_n_res of them): per metric, ln(sim / observed)
 * of each request over sqrt(requests), and ln of the P50 and P90 ratios (BLIS fits means
 * and P90s); the loss is their sum of squares. A request the simulation did not complete
 * counts as MISS_LOG. */
static uint32_t run_n_res(const cz_obs_run *r)
{
    return N_M * (r->n + 2);
}

static void run_residuals(const cz_obs_run *r, double *sim[N_M], double *scratch, double *res)
{
    uint32_t at = 0;
    for (int m = 0; m < N_M; m++) {
        const double *o = obs_of(r, m);
        uint32_t k = 0;
        for (uint32_t i = 0; i < r->n; i++)
            k += isfinite(o[i]) && o[i] > 0;
        double w = k ? 1.0 / sqrt((double)k) : 0.0;
        for (uint32_t i = 0; i < r->n; i++) {
            double d = 0.0;
            if (isfinite(o[i]) && o[i] > 0)
                d = isfinite(sim[m][i]) && sim[m][i] > 0 ? log(sim[m][i] / o[i]) : MISS_LOG;
            res[at++] = w * d;
        }
        for (int q = 0; q < 2; q++) {
            double p = q ? 90 : 50;
            double a = pct(sim[m], r->n, p, scratch), b = pct(o, r->n, p, scratch);
            res[at++] = !k ? 0.0 : isfinite(a) && a > 0 && b > 0 ? log(a / b) : MISS_LOG;
        }
    }
    CZ_ASSERT(at == run_n_res(r));
}

/* ---- the candidate ---- */

typedef struct fitctx {
    const cz_config *base;
    cz_config *cand;          /* scratch config */
    cz_obs_run *runs;
    uint32_t n_runs;
    int32_t skip;             /* the held-out run (-1: none) */
    int idx[CZ_OF_N];         /* parameter -> position in x (-1: not fitted) */
    double seed[CZ_OF_N];     /* the start of each parameter (multiplier, or seconds) */
    double *sim[N_M];
    double *scratch;
    double *res;              /* the training runs' residuals (n_res) */
    uint32_t n_res;
    double *res_hi;           /* a Jacobian column's other side */
    uint32_t evals, max_evals;
    double best;
    cz_status st;
    cz_err *err;
    bool verbose;
    double t0;
} fitctx;

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The cost features of each group. */
static int group_of(cz_cost_feature f)
{
    switch (f) {
    case CZ_CF_STEP:
    case CZ_CF_WEIGHT_BYTE: return CZ_OF_STEP;
    case CZ_CF_TOKEN:
    case CZ_CF_LINEAR_FLOP:
    case CZ_CF_GEMV_FLOP:
    case CZ_CF_ATTN_FLOP:
    case CZ_CF_GEMM_WEIGHT_BYTE: return CZ_OF_COMPUTE;
    case CZ_CF_KV_BYTE: return CZ_OF_KV;
    case CZ_CF_SEQ: return CZ_OF_SEQ;
    default: CZ_ASSERT(0); return -1;
    }
}

/* The value of parameter p at x (its seed where not fitted). */
static double param_value(const fitctx *F, const double *x, int p)
{
    return F->idx[p] < 0 ? F->seed[p] : F->seed[p] * exp(x[F->idx[p]]);
}

/* Writes the candidate at x into F->cand (a copy of the start F->base, of which only the
 * fitted coefficients and request terms change). */
static void apply(fitctx *F, const double *x)
{
    for (uint32_t s = 0; s < F->base->model.n_stages; s++)
        for (int f = 0; f < CZ_CF_N; f++) {
            int g = group_of((cz_cost_feature)f);
            double v = param_value(F, x, g);
            /* seq: a seeded group gives the value itself, the rest multiply */
            F->cand->fit[s].theta[f] =
                g == CZ_OF_SEQ && F->base->fit[s].theta[f] == 0 ? v
                                                               : F->base->fit[s].theta[f] * v;
        }
    F->cand->ingest_s = param_value(F, x, CZ_OF_INGEST);
    F->cand->ingest_per_token_s = param_value(F, x, CZ_OF_INGEST_TOKEN);
}

/* The training runs' residuals at x into res; false when x is out of range or a
 * simulation failed (F->st). */
static bool residuals(fitctx *F, const double *x, uint32_t n, double *res)
{
    if (F->st != CZ_OK)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!(fabs(x[i]) < 40)) /* e^40: the search has wandered out of any sense */
            return false;
    apply(F, x);
    uint32_t at = 0;
    for (uint32_t r = 0; r < F->n_runs && F->st == CZ_OK; r++) {
        if ((int32_t)r == F->skip)
            continue;
        F->st = simulate(F->cand, &F->runs[r], F->sim, F->err);
        if (F->st == CZ_OK)
            run_residuals(&F->runs[r], F->sim, F->scratch, res + at);
        at += run_n_res(&F->runs[r]);
    }
    F->evals++;
    return F->st == CZ_OK;
}

static double sumsq(const double *v, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += v[i] * v[i];
    return s;
}

static double objective(const gsl_vector *v, void *ctx)
{
    fitctx *F = ctx;
    double x[CZ_OF_N];
    for (size_t i = 0; i < v->size; i++)
        x[i] = gsl_vector_get(v, i);
    if (!residuals(F, x, (uint32_t)v->size, F->res))
        return 1e30;
    double loss = sumsq(F->res, F->n_res);
    if (loss < F->best)
        F->best = loss;
    if (F->verbose && F->evals % 20 == 0)
        fprintf(stderr, "\rcalibrate: fit %u simulations, loss %.5f, %.1f s   ", F->evals,
                F->best, wall_now() - F->t0);
    return loss;
}

/* Levenberg-Marquardt's residuals and Jacobian (GSL's nonlinear least squares). The
 * Jacobian is by central differences of JAC_H in log units: wide enough to step over the
 * simulation's small discontinuities (a request landing in the next step). */
#define JAC_H 0.02
static int lm_f(const gsl_vector *v, void *ctx, gsl_vector *f)
{
    fitctx *F = ctx;
    double x[CZ_OF_N];
    for (size_t i = 0; i < v->size; i++)
        x[i] = gsl_vector_get(v, i);
    if (!residuals(F, x, (uint32_t)v->size, F->res))
        return GSL_EDOM;
    for (uint32_t i = 0; i < F->n_res; i++)
        gsl_vector_set(f, i, F->res[i]);
    double loss = sumsq(F->res, F->n_res);
    if (loss < F->best)
        F->best = loss;
    return GSL_SUCCESS;
}

static int lm_df(const gsl_vector *v, void *ctx, gsl_matrix *J)
{
    fitctx *F = ctx;
    double x[CZ_OF_N];
    for (size_t i = 0; i < v->size; i++)
        x[i] = gsl_vector_get(v, i);
    for (size_t k = 0; k < v->size; k++) {
        double keep = x[k];
        x[k] = keep + JAC_H;
        if (!residuals(F, x, (uint32_t)v->size, F->res_hi))
            return GSL_EDOM;
        x[k] = keep - JAC_H;
        if (!residuals(F, x, (uint32_t)v->size, F->res))
            return GSL_EDOM;
        x[k] = keep;
        for (uint32_t i = 0; i < F->n_res; i++)
            gsl_matrix_set(J, i, k, (F->res_hi[i] - F->res[i]) / (2 * JAC_H));
    }
    return GSL_SUCCESS;
}

/* Levenberg-Marquardt from x; x and *loss replaced when it ends lower. */
static void polish(fitctx *F, double *x, uint32_t n, double *loss)
{
    gsl_multifit_nlinear_fdf fdf = {.f = lm_f, .df = lm_df, .fvv = NULL, .n = F->n_res,
                                    .p = n, .params = F};
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    fp.trs = gsl_multifit_nlinear_trs_lm;
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, F->n_res, n);
    gsl_vector_view xv = gsl_vector_view_array(x, n);
    gsl_vector *x0 = gsl_vector_alloc(n);
    gsl_vector_memcpy(x0, &xv.vector);
    int info = 0;
    if (gsl_multifit_nlinear_init(x0, &fdf, w) == GSL_SUCCESS) {
        for (int it = 0; it < 50 && F->st == CZ_OK && F->evals < F->max_evals; it++) {
            int s = gsl_multifit_nlinear_iterate(w);
            if (s != GSL_SUCCESS && s != GSL_ENOPROG)
                break;
            if (gsl_multifit_nlinear_test(1e-4, 1e-8, 1e-10, &info, w) == GSL_SUCCESS)
                break;
            if (s == GSL_ENOPROG)
                break;
        }
        gsl_vector *f = gsl_multifit_nlinear_residual(w);
        double l = 0;
        gsl_blas_ddot(f, f, &l);
        if (F->st == CZ_OK && isfinite(l) && l < *loss) {
            gsl_vector *xb = gsl_multifit_nlinear_position(w);
            for (uint32_t i = 0; i < n; i++)
                x[i] = gsl_vector_get(xb, i);
            *loss = l;
        }
    }
    gsl_vector_free(x0);
    gsl_multifit_nlinear_free(w);
}

/* Nelder-Mead from x (in place) until the simplex is small or evaluations run out; then
 * once more from the best point with smaller steps (a simplex can collapse early). */
static void minimize(fitctx *F, double *x, uint32_t n, double *loss)
{
    gsl_multimin_function fn = {.n = n, .f = objective, .params = F};
    gsl_vector *xv = gsl_vector_alloc(n), *step = gsl_vector_alloc(n);
    double prev = HUGE_VAL;
    for (int round = 0; F->st == CZ_OK && F->evals < F->max_evals; round++) {
        for (uint32_t i = 0; i < n; i++)
            gsl_vector_set(xv, i, x[i]);
        gsl_vector_set_all(step, STEP0);
        gsl_multimin_fminimizer *m =
            gsl_multimin_fminimizer_alloc(gsl_multimin_fminimizer_nmsimplex2, n);
        gsl_multimin_fminimizer_set(m, &fn, xv, step);
        while (F->st == CZ_OK && F->evals < F->max_evals) {
            if (gsl_multimin_fminimizer_iterate(m) != GSL_SUCCESS)
                break;
            if (gsl_multimin_fminimizer_size(m) < SIZE_TOL)
                break;
        }
        for (uint32_t i = 0; i < n; i++)
            x[i] = gsl_vector_get(m->x, i);
        *loss = m->fval;
        gsl_multimin_fminimizer_free(m);
        /* then Levenberg-Marquardt on the residuals: the simplex finds the valley, the
         * least squares follow it (step, seq and kv trade off along a narrow one) */
        polish(F, x, n, loss);
        if (isfinite(prev) && !(*loss < prev - 1e-6 * fabs(prev)))
            break; /* a restart found nothing better */
        prev = *loss;
    }
    gsl_vector_free(xv);
    gsl_vector_free(step);
}

/* ---- errors ---- */

static cJSON *errors_json(const cz_obs_run *r, double *sim[N_M], double *scratch)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "requests", r->n);
    double *ape = cz_xmalloc((r->n ? r->n : 1) * sizeof *ape);
    for (int m = 0; m < N_M; m++) {
        const double *o = obs_of(r, m);
        cJSON *e = cJSON_AddObjectToObject(j, metric_names[m]);
        size_t k = 0;
        for (uint32_t i = 0; i < r->n; i++)
            if (isfinite(o[i]) && o[i] > 0)
                ape[k++] = isfinite(sim[m][i]) ? fabs(sim[m][i] - o[i]) / o[i] : HUGE_VAL;
        cz_dist d;
        cz_dist_compute(ape, k, &d);
        cJSON_AddNumberToObject(e, "median_ape", d.p50);
        cJSON_AddNumberToObject(e, "p90_ape", d.p90);
        cJSON_AddNumberToObject(e, "p99_ape", d.p99);
        static const double ps[3] = {50, 90, 99};
        static const char *const keys[3] = {"p50_error", "p90_error", "p99_error"};
        for (int q = 0; q < 3; q++) {
            double a = pct(sim[m], r->n, ps[q], scratch), b = pct(o, r->n, ps[q], scratch);
            cJSON_AddNumberToObject(e, keys[q], (a - b) / b);
        }
    }
    free(ape);
    return j;
}

static uint32_t max_n(const cz_obs_run *runs, uint32_t n_runs)
{
    uint32_t n = 1;
    for (uint32_t r = 0; r < n_runs; r++)
        n = runs[r].n > n ? runs[r].n : n;
    return n;
}

cz_status cz_obsfit_errors(const cz_config *cfg, cz_obs_run *r, cJSON **errors, cz_err *err)
{
    *errors = NULL;
    double *sim[N_M], *scratch = cz_xmalloc((r->n ? r->n : 1) * sizeof *scratch);
    for (int m = 0; m < N_M; m++)
        sim[m] = cz_xmalloc((r->n ? r->n : 1) * sizeof *sim[m]);
    cz_status st = simulate(cfg, r, sim, err);
    if (st == CZ_OK)
        *errors = errors_json(r, sim, scratch);
    for (int m = 0; m < N_M; m++)
        free(sim[m]);
    free(scratch);
    return st;
}

/* ---- the fit ---- */

/* The base's fitted coefficients, or the roofline's rates as coefficients: a step as the
 * sum of its compute and memory times plus the per-step overhead (the fit rescales). */
static void start_of(const cz_config *cfg, cz_config *start)
{
    *start = *cfg;
    if (cfg->cost_kind == CZ_COST_FITTED)
        return;
    start->cost_kind = CZ_COST_FITTED;
    start->cost_scale = 1.0;
    double per_flop = 1.0 / (cfg->hw.bf16_flops * cfg->cost.flops_eff);
    double per_byte = 1.0 / (cfg->hw.hbm_bw_Bps * cfg->cost.bw_eff);
    for (uint32_t s = 0; s < cfg->model.n_stages; s++) {
        double *th = start->fit[s].theta;
        memset(th, 0, CZ_CF_N * sizeof *th);
        th[CZ_CF_STEP] = cfg->cost.step_overhead_s;
        th[CZ_CF_LINEAR_FLOP] = th[CZ_CF_GEMV_FLOP] = th[CZ_CF_ATTN_FLOP] = per_flop;
        th[CZ_CF_WEIGHT_BYTE] = th[CZ_CF_GEMM_WEIGHT_BYTE] = th[CZ_CF_KV_BYTE] = per_byte;
    }
}

static cz_status fit_one(cz_obs_run *runs, uint32_t n_runs,
                         int32_t skip, const cz_obsfit_opts *o, double *x_out, double *loss,
                         uint32_t *evals, fitctx *proto, cz_err *err)
{
    fitctx F = *proto;
    F.runs = runs;
    F.n_runs = n_runs;
    F.skip = skip;
    F.max_evals = o->max_evals;
    F.evals = 0;
    F.best = HUGE_VAL;
    F.st = CZ_OK;
    F.err = err;
    F.n_res = 0;
    for (uint32_t r = 0; r < n_runs; r++)
        if ((int32_t)r != skip)
            F.n_res += run_n_res(&runs[r]);
    F.res = cz_xmalloc(F.n_res * sizeof *F.res);
    F.res_hi = cz_xmalloc(F.n_res * sizeof *F.res_hi);
    uint32_t n = 0;
    for (int p = 0; p < CZ_OF_N; p++)
        if (F.idx[p] >= 0)
            x_out[n++] = 0.0;
    minimize(&F, x_out, n, loss);
    *evals = F.evals;
    free(F.res);
    free(F.res_hi);
    if (o->verbose)
        fprintf(stderr, "\n");
    return F.st;
}

cz_status cz_obsfit(const cz_config *base, cz_obs_run *runs, uint32_t n_runs,
                    const cz_obsfit_opts *o, cz_cost_file *out, cJSON **report, cz_err *err)
{
    *report = NULL;
    CZ_ASSERT(n_runs >= 1 && o->max_evals > 0 && o->mask && !(o->mask >> CZ_OF_N));
    if (base->cross_stage)
        return cz_err_set(err, CZ_EINVAL, "calibrate --observed: the config runs a cross-stage "
                                          "scheduler (%s); fit a config of the deployment "
                                          "runtime's schedulers",
                          base->scheduler);
    if (base->cost_kind == CZ_COST_SERVICE)
        return cz_err_set(err, CZ_EINVAL, "calibrate --observed: the config's cost is a "
                                          "service-time distribution; fit a roofline or "
                                          "fitted cost");
    double t0 = wall_now();
    cz_config *start = cz_xmalloc(sizeof *start), *cand = cz_xmalloc(sizeof *cand);
    start_of(base, start);
    *cand = *start; /* apply() rewrites only what the fit moves */
    fitctx proto;
    memset(&proto, 0, sizeof proto);
    proto.base = start;
    proto.cand = cand;
    proto.verbose = o->verbose;
    proto.t0 = t0;
    uint32_t np = 0;
    for (int p = 0; p < CZ_OF_N; p++)
        proto.idx[p] = o->mask >> p & 1u ? (int)np++ : -1;
    bool seq_zero = true;
    for (uint32_t s = 0; s < start->model.n_stages; s++)
        seq_zero = seq_zero && start->fit[s].theta[CZ_CF_SEQ] == 0;
    for (int p = 0; p < CZ_OF_N; p++)
        proto.seed[p] = 1.0;
    /* a seeded group starts at a small value, and stays 0 when it is not fitted */
    proto.seed[CZ_OF_SEQ] = seq_zero ? (proto.idx[CZ_OF_SEQ] >= 0 ? SEED_SEQ_S : 0.0) : 1.0;
    proto.seed[CZ_OF_INGEST] = start->ingest_s > 0 ? start->ingest_s
                               : proto.idx[CZ_OF_INGEST] >= 0 ? SEED_INGEST_S
                                                              : 0.0;
    proto.seed[CZ_OF_INGEST_TOKEN] = start->ingest_per_token_s > 0 ? start->ingest_per_token_s
                                     : proto.idx[CZ_OF_INGEST_TOKEN] >= 0 ? SEED_INGEST_TOKEN_S
                                                                          : 0.0;
    uint32_t nmax = max_n(runs, n_runs);
    for (int m = 0; m < N_M; m++)
        proto.sim[m] = cz_xmalloc(nmax * sizeof *proto.sim[m]);
    proto.scratch = cz_xmalloc(nmax * sizeof *proto.scratch);
    gsl_error_handler_t *old = gsl_set_error_handler_off();

    cJSON *rep = cJSON_CreateObject();
    cz_status st = CZ_OK;
    double x[CZ_OF_N], loss = 0;
    double *xs = cz_xcalloc((size_t)n_runs * CZ_OF_N, sizeof *xs);
    uint32_t evals = 0, total_evals = 0;
    if (n_runs >= 2) {
        cJSON *ho = cJSON_AddObjectToObject(rep, "held_out");
        for (uint32_t h = 0; h < n_runs && st == CZ_OK; h++) {
            if (o->verbose)
                fprintf(stderr, "calibrate: fit without %s\n", runs[h].path);
            st = fit_one(runs, n_runs, (int32_t)h, o, x, &loss, &evals, &proto, err);
            for (int q = 0; q < CZ_OF_N; q++) /* the held-out fits' spread, below */
                xs[h * CZ_OF_N + q] = x[q];
            total_evals += evals;
            if (st != CZ_OK)
                break;
            fitctx F = proto;
            apply(&F, x);
            cJSON *e = NULL;
            st = cz_obsfit_errors(cand, &runs[h], &e, err);
            if (st == CZ_OK)
                cJSON_AddItemToObject(ho, runs[h].path, e);
        }
    }
    if (st == CZ_OK) {
        if (o->verbose)
            fprintf(stderr, "calibrate: fit on every run\n");
        st = fit_one(runs, n_runs, -1, o, x, &loss, &evals, &proto, err);
        total_evals += evals;
    }
    if (st == CZ_OK) {
        fitctx F = proto;
        apply(&F, x);
        cJSON *params = cJSON_AddObjectToObject(rep, "parameters");
        for (int p = 0; p < CZ_OF_N; p++) {
            if (proto.idx[p] < 0)
                continue;
            cJSON *q = cJSON_AddObjectToObject(params, param_names[p]);
            bool abs_ = p >= CZ_OF_INGEST || (p == CZ_OF_SEQ && seq_zero);
            cJSON_AddStringToObject(q, "unit", abs_ ? "s" : "multiplier");
            cJSON_AddNumberToObject(q, "start", proto.seed[p]);
            cJSON_AddNumberToObject(q, "fitted", param_value(&F, x, p));
            /* how far a fit without one of the runs lands from it (relative): what the
             * runs determine of it (null with one run) */
            if (n_runs >= 2) {
                double w = 0;
                for (uint32_t h = 0; h < n_runs; h++)
                    w = fmax(w, fabs(xs[h * CZ_OF_N + proto.idx[p]] - x[proto.idx[p]]));
                cJSON_AddNumberToObject(q, "held_out_spread", expm1(w));
            } else {
                cJSON_AddNullToObject(q, "held_out_spread");
            }
        }
        cJSON_AddNumberToObject(rep, "evaluations", total_evals);
        cJSON_AddNumberToObject(rep, "evaluations_final_fit", evals);
        cJSON_AddNumberToObject(rep, "loss", loss);
        cJSON *in = cJSON_AddObjectToObject(rep, "in_sample");
        for (uint32_t r = 0; r < n_runs && st == CZ_OK; r++) {
            cJSON *e = NULL;
            st = cz_obsfit_errors(cand, &runs[r], &e, err);
            if (st == CZ_OK)
                cJSON_AddItemToObject(in, runs[r].path, e);
        }
        cJSON_AddNumberToObject(rep, "seconds", wall_now() - t0);
        memset(out, 0, sizeof *out);
        snprintf(out->model, sizeof out->model, "%s", cand->model.name);
        for (uint32_t s = 0; s < cand->model.n_stages && s < CZ_MAX_STAGES; s++) {
            snprintf(out->stage[s], sizeof out->stage[s], "%s", cand->model.stages[s].name);
            out->fit[s] = cand->fit[s];
            out->n_stages++;
        }
        out->has_link = true;
        out->link_Bps = cand->hw.host_link_Bps;
        out->link_latency_s = cand->hw.host_link_latency_s;
        out->has_request = true;
        out->ingest_s = cand->ingest_s;
        out->ingest_per_token_s = cand->ingest_per_token_s;
    }
    gsl_set_error_handler(old);
    for (int m = 0; m < N_M; m++)
        free(proto.sim[m]);
    free(proto.scratch);
    free(start);
    free(cand);
    free(xs);
    if (st != CZ_OK) {
        cJSON_Delete(rep);
        return st;
    }
    *report = rep;
    return CZ_OK;
}

/* ---- printing ---- */

static void print_errors(const cJSON *e, const char *run, const char *what, FILE *f)
{
    fprintf(f, "  %s (%s, %d requests)\n", run, what,
            (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "requests")));
    fprintf(f, "    %-6s %10s %10s %10s   %10s %10s %10s\n", "metric", "median", "P90", "P99",
            "P50 error", "P90 error", "P99 error");
    for (int m = 0; m < N_M; m++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, metric_names[m]);
        static const char *const k[6] = {"median_ape", "p90_ape",   "p99_ape",
                                          "p50_error",  "p90_error", "p99_error"};
        fprintf(f, "    %-6s", m == M_E2E ? "E2E" : m == M_TTFT ? "TTFT" : "ITL");
        for (int i = 0; i < 6; i++) {
            double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, k[i]));
            fprintf(f, i == 3 ? "   %+9.1f%%" : i > 3 ? " %+9.1f%%" : " %9.1f%%", 100 * v);
        }
        fprintf(f, "\n");
    }
}

void cz_obsfit_print(const cJSON *report, FILE *f)
{
    const cJSON *p, *params = cJSON_GetObjectItemCaseSensitive(report, "parameters");
    fprintf(f, "fitted (%d simulations, %.1f s):\n",
            (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(report, "evaluations")),
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(report, "seconds")));
    cJSON_ArrayForEach(p, params)
    {
        const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "unit"));
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(p, "fitted"));
        const cJSON *se = cJSON_GetObjectItemCaseSensitive(p, "held_out_spread");
        char u[64] = "";
        if (cJSON_IsNumber(se))
            snprintf(u, sizeof u, "(%.1f%% apart without a run)", 100 * se->valuedouble);
        if (unit && strcmp(unit, "s") == 0)
            fprintf(f, "  %-17s %10.4g us            %s\n", p->string, v * 1e6, u);
        else
            fprintf(f, "  %-17s x %8.4f of the start  %s\n", p->string, v, u);
    }
    fprintf(f, "error per request, |sim - observed| / observed, and of the percentiles:\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(report, "held_out"))
        print_errors(e, e->string, "held out", f);
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(report, "in_sample"))
        print_errors(e, e->string, "in sample", f);
}
