/* cz_calibrate.c - see cz_calibrate.h. */
#include "cz_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_fit.h"

const char *cz_calib_class_name(cz_calib_class c)
{
    static const char *const names[CZ_CALIB_N] = {"prefill", "decode", "mixed", "jobs"};
    CZ_ASSERT((unsigned)c < CZ_CALIB_N);
    return names[c];
}

cz_calib_class cz_calib_class_of(cz_stage_kind kind, const cz_batch_shape *b)
{
    if (kind != CZ_STAGE_AR)
        return CZ_CALIB_JOBS;
    if (b->prefill_tokens > 0 && b->decode_seqs > 0)
        return CZ_CALIB_MIXED;
    return b->prefill_tokens > 0 ? CZ_CALIB_PREFILL : CZ_CALIB_DECODE;
}

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* APE statistics of the masked rows (cz_fit_errors). */
static cJSON *ape_json(const double *y, const double *pred, const uint8_t *mask, size_t n)
{
    cz_fit_err e = cz_fit_errors(y, pred, mask, n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rows", (double)e.n);
    add_num(o, "median_ape", e.median_ape);
    add_num(o, "mape", e.mape);
    add_num(o, "p90_ape", e.p90_ape);
    add_num(o, "max_ape", e.max_ape);
    return o;
}

/* Fits rows[idx[0..m)] of one stage; writes the coefficients and each row's held-out
 * prediction into pred_all. */
static cz_status fit_stage(const cz_stage_card *s, const cz_cost_params *p,
                           const cz_calib_row *rows, const size_t *idx, size_t m,
                           uint32_t folds, uint64_t seed, cz_cost_fit *fit, double *pred_all,
                           cJSON *out, cz_err *err)
{
    double *X = malloc(m * CZ_CF_N * sizeof *X), *y = malloc(m * sizeof *y);
    double *pred = malloc(m * sizeof *pred), *in = malloc(m * sizeof *in);
    cz_status st = CZ_OK;
    for (size_t i = 0; i < m; i++) {
        cz_cost_features(s, p, &rows[idx[i]].shape, X + i * CZ_CF_N);
        y[i] = rows[idx[i]].seconds;
    }
    memset(fit, 0, sizeof *fit);
    st = cz_fit_nnls_rel(X, y, m, CZ_CF_N, fit->theta, err);
    uint32_t f = folds < m ? folds : (uint32_t)m;
    if (st == CZ_OK && m >= 4 && f >= 2)
        st = cz_fit_cv(X, y, m, CZ_CF_N, f, seed, pred, err);
    else if (st == CZ_OK)
        for (size_t i = 0; i < m; i++)
            pred[i] = NAN; /* too few rows to hold any out */
    if (st == CZ_OK) {
        for (size_t i = 0; i < m; i++) {
            double t = 0;
            for (int k = 0; k < CZ_CF_N; k++)
                t += fit->theta[k] * X[i * CZ_CF_N + k];
            in[i] = t;
            pred_all[idx[i]] = pred[i];
        }
        cJSON_AddNumberToObject(out, "rows", (double)m);
        cJSON *c = cJSON_AddObjectToObject(out, "coefficients");
        for (int k = 0; k < CZ_CF_N; k++)
            cJSON_AddNumberToObject(c, cz_cost_feature_name((cz_cost_feature)k), fit->theta[k]);
        cJSON_AddItemToObject(out, "fit", ape_json(y, in, NULL, m));
        cJSON_AddItemToObject(out, "held_out", ape_json(y, pred, NULL, m));
        cJSON *bc = cJSON_AddObjectToObject(out, "by_class");
        uint8_t *mask = malloc(m);
        for (int c2 = 0; c2 < CZ_CALIB_N; c2++) {
            size_t cnt = 0;
            for (size_t i = 0; i < m; i++) {
                mask[i] = cz_calib_class_of(s->kind, &rows[idx[i]].shape) == (cz_calib_class)c2;
                cnt += mask[i];
            }
            if (cnt)
                cJSON_AddItemToObject(bc, cz_calib_class_name((cz_calib_class)c2),
                                      ape_json(y, pred, mask, m));
        }
        free(mask);
    } else {
        cz_err_prefix(err, "stage '%s': ", s->name);
    }
    free(X);
    free(y);
    free(pred);
    free(in);
    return st;
}

cz_status cz_calibrate(const cz_model_card *model, const cz_cost_params *p,
                       const cz_calib_row *rows, size_t n_rows, const cz_calib_xfer *xfers,
                       size_t n_xfers, uint32_t folds, uint64_t seed, cz_cost_file *out,
                       cJSON **report, cz_err *err)
{
    *report = NULL;
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", model->name);
    if (n_rows == 0)
        return cz_err_set(err, CZ_EINVAL, "calibrate: no measured steps to fit");
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].stage >= model->n_stages)
            return cz_err_set(err, CZ_EINVAL,
                              "calibrate: row %zu: stage %u, but model '%s' has %u stages", i,
                              rows[i].stage, model->name, model->n_stages);
        if (!(rows[i].seconds > 0) || !isfinite(rows[i].seconds))
            return cz_err_set(err, CZ_EINVAL,
                              "calibrate: row %zu: time %g s: expected a positive number", i,
                              rows[i].seconds);
    }
    cJSON *rep = cJSON_CreateObject();
    cJSON *stages = cJSON_AddObjectToObject(rep, "stages");
    double *pred = malloc(n_rows * sizeof *pred), *y = malloc(n_rows * sizeof *y);
    size_t *idx = malloc(n_rows * sizeof *idx);
    cz_status st = CZ_OK;
    for (size_t i = 0; i < n_rows; i++) {
        pred[i] = NAN;
        y[i] = rows[i].seconds;
    }
    for (uint32_t s = 0; s < model->n_stages && st == CZ_OK; s++) {
        size_t m = 0;
        for (size_t i = 0; i < n_rows; i++)
            if (rows[i].stage == s)
                idx[m++] = i;
        if (m == 0)
            continue;
        uint32_t k = out->n_stages++;
        snprintf(out->stage[k], sizeof out->stage[k], "%s", model->stages[s].name);
        cJSON *so = cJSON_AddObjectToObject(stages, model->stages[s].name);
        st = fit_stage(&model->stages[s], p, rows, idx, m, folds, seed + s, &out->fit[k], pred,
                       so, err);
    }
    if (st == CZ_OK) {
        uint8_t *mask = malloc(n_rows);
        for (size_t i = 0; i < n_rows; i++)
            mask[i] = isfinite(pred[i]);
        cJSON_AddItemToObject(rep, "held_out", ape_json(y, pred, mask, n_rows));
        free(mask);
    }
    if (st == CZ_OK && n_xfers >= 2) {
        /* seconds = latency + bytes / bandwidth */
        double *X = malloc(2 * n_xfers * sizeof *X), *ty = malloc(n_xfers * sizeof *ty);
        double *tp = malloc(n_xfers * sizeof *tp), th[2];
        for (size_t i = 0; i < n_xfers && st == CZ_OK; i++) {
            if (!(xfers[i].seconds > 0) || !(xfers[i].bytes >= 0))
                st = cz_err_set(err, CZ_EINVAL,
                                "calibrate: transfer %zu: %g bytes in %g s: expected positive "
                                "numbers",
                                i, xfers[i].bytes, xfers[i].seconds);
            X[2 * i] = 1.0;
            X[2 * i + 1] = xfers[i].bytes;
            ty[i] = xfers[i].seconds;
        }
        /* on absolute error: the large copies a sequence's KV makes carry the time, and
         * small ones vary with the caches far more than a link model can say */
        double rss;
        if (st == CZ_OK)
            st = cz_fit_nnls(X, ty, NULL, n_xfers, 2, th, &rss, err);
        for (size_t i = 0; i < n_xfers; i++)
            tp[i] = th[0] + th[1] * xfers[i].bytes; /* in-sample: two parameters */
        if (st == CZ_OK && th[1] > 0) {
            out->has_link = true;
            out->link_latency_s = th[0];
            out->link_Bps = 1.0 / th[1];
            cJSON *l = cJSON_AddObjectToObject(rep, "host_link");
            cJSON_AddNumberToObject(l, "rows", (double)n_xfers);
            cJSON_AddNumberToObject(l, "bandwidth_Bps", out->link_Bps);
            cJSON_AddNumberToObject(l, "latency_s", out->link_latency_s);
            cJSON_AddItemToObject(l, "fit", ape_json(ty, tp, NULL, n_xfers));
        }
        free(X);
        free(ty);
        free(tp);
    }
    free(pred);
    free(y);
    free(idx);
    if (st != CZ_OK) {
        cJSON_Delete(rep);
        return st;
    }
    *report = rep;
    return CZ_OK;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void cz_calibrate_print(const cJSON *report, FILE *f)
{
    fprintf(f, "  %-16s %-8s %6s %13s %11s %11s\n", "stage", "class", "rows", "median error",
            "mean error", "worst");
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(report, "stages"))
    {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(s, "by_class"))
        {
            fprintf(f, "  %-16s %-8s %6.0f %12.2f%% %10.2f%% %10.2f%%\n", s->string, c->string,
                    num(c, "rows"), 100 * num(c, "median_ape"), 100 * num(c, "mape"),
                    100 * num(c, "max_ape"));
        }
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(report, "held_out");
    fprintf(f, "  %-16s %-8s %6.0f %12.2f%% %10.2f%% %10.2f%%   (held out, %s)\n", "all", "",
            num(h, "rows"), 100 * num(h, "median_ape"), 100 * num(h, "mape"),
            100 * num(h, "max_ape"), "cross-validated");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(report, "host_link");
    if (l) {
        const cJSON *lh = cJSON_GetObjectItemCaseSensitive(l, "fit");
        fprintf(f, "  host link: %.2f GB/s, latency %.1f us (%0.f copies, fitted on absolute "
                   "time: median error %.2f%%, worst %.2f%%)\n",
                num(l, "bandwidth_Bps") / 1e9, num(l, "latency_s") * 1e6, num(l, "rows"),
                100 * num(lh, "median_ape"), 100 * num(lh, "max_ape"));
    }
}
