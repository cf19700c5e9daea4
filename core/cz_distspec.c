/* cz_distspec.c - see cz_distspec.h. */
#include "cz_distspec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "cz_json.h"

cz_status cz_distspec_parse(const cJSON *j, const char *where, const char *key, cz_distspec *out,
                            cz_err *err)
{
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s.%s", where, key);
    memset(out, 0, sizeof *out);
    if (cJSON_IsNumber(j)) {
        if (!(j->valuedouble >= 0) || !isfinite(j->valuedouble))
            return cz_err_field(err, CZ_EINVAL, where, key, "expected a non-negative number");
        out->kind = CZ_DIST_FIXED;
        out->a = out->mean = j->valuedouble;
        return CZ_OK;
    }
    if (!cJSON_IsObject(j))
        return cz_err_field(err, CZ_EINVAL, where, key,
                            "expected a number or an object {\"dist\": fixed|uniform|"
                            "exponential|lognormal|gamma, ...}");
    const char *name = NULL;
    cz_status st = cz_json_str(j, ctx, "dist", true, &name, err);
    if (st != CZ_OK)
        return st;
    const double big = 1e12;
    if (strcmp(name, "fixed") == 0) {
        static const char *const k[] = {"dist", "value"};
        if ((st = cz_json_check_keys(j, ctx, k, 2, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "value", true, 0, big, &out->a, err)) != CZ_OK)
            return st;
        out->kind = CZ_DIST_FIXED;
        out->mean = out->a;
    } else if (strcmp(name, "uniform") == 0) {
        static const char *const k[] = {"dist", "min", "max"};
        if ((st = cz_json_check_keys(j, ctx, k, 3, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "min", true, 0, big, &out->a, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "max", true, out->a, big, &out->b, err)) != CZ_OK)
            return st;
        out->kind = CZ_DIST_UNIFORM;
        out->mean = (out->a + out->b) / 2;
        out->cv = out->mean > 0 ? (out->b - out->a) / sqrt(12.0) / out->mean : 0;
    } else if (strcmp(name, "exponential") == 0) {
        static const char *const k[] = {"dist", "mean"};
        if ((st = cz_json_check_keys(j, ctx, k, 2, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "mean", true, 1e-12, big, &out->a, err)) != CZ_OK)
            return st;
        out->kind = CZ_DIST_EXPONENTIAL;
        out->mean = out->a;
        out->cv = 1.0;
    } else if (strcmp(name, "lognormal") == 0 || strcmp(name, "gamma") == 0) {
        static const char *const k[] = {"dist", "mean", "cv"};
        if ((st = cz_json_check_keys(j, ctx, k, 3, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "mean", true, 1e-12, big, &out->mean, err)) != CZ_OK ||
            (st = cz_json_num(j, ctx, "cv", true, 1e-6, 100, &out->cv, err)) != CZ_OK)
            return st;
        if (name[0] == 'l') {
            out->kind = CZ_DIST_LOGNORMAL;
            double s2 = log1p(out->cv * out->cv);
            out->a = log(out->mean) - s2 / 2;
            out->b = sqrt(s2);
        } else {
            out->kind = CZ_DIST_GAMMA;
            out->a = 1.0 / (out->cv * out->cv);
            out->b = out->mean / out->a;
        }
    } else {
        return cz_err_field(err, CZ_EINVAL, ctx, "dist",
                            "expected fixed, uniform, exponential, lognormal or gamma, got '%s'",
                            name);
    }
    return CZ_OK;
}

double cz_distspec_draw(const cz_distspec *d, gsl_rng *r)
{
    switch (d->kind) {
    case CZ_DIST_FIXED: return d->a;
    case CZ_DIST_UNIFORM: return d->a + (d->b - d->a) * gsl_rng_uniform(r);
    case CZ_DIST_EXPONENTIAL: return gsl_ran_exponential(r, d->a);
    case CZ_DIST_LOGNORMAL: return gsl_ran_lognormal(r, d->a, d->b);
    case CZ_DIST_GAMMA: return gsl_ran_gamma(r, d->a, d->b);
    }
    CZ_ASSERT(0 && "unknown distribution kind");
    return 0;
}

double cz_distspec_mean(const cz_distspec *d)
{
    return d->mean;
}

double cz_distspec_second_moment(const cz_distspec *d)
{
    switch (d->kind) {
    case CZ_DIST_FIXED: return d->a * d->a;
    case CZ_DIST_UNIFORM: return (d->a * d->a + d->a * d->b + d->b * d->b) / 3.0;
    default: return d->mean * d->mean * (1.0 + d->cv * d->cv);
    }
}
