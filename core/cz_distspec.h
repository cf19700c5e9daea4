/* cz_distspec.h - a random distribution named in a config, and its draws (GSL).
 *
 * JSON forms: {"dist": "fixed", "value": v} | {"dist": "uniform", "min": a, "max": b} |
 * {"dist": "exponential", "mean": m} | {"dist": "lognormal", "mean": m, "cv": c} |
 * {"dist": "gamma", "mean": m, "cv": c}. A bare number means "fixed". The lognormal's
 * parameters come from its mean and coefficient of variation: sigma^2 = ln(1 + cv^2),
 * mu = ln(mean) - sigma^2 / 2. */
#ifndef CZ_DISTSPEC_H
#define CZ_DISTSPEC_H

#include <cjson/cJSON.h>
#include <gsl/gsl_rng.h>

#include "cz_base.h"

typedef enum cz_dist_kind {
    CZ_DIST_FIXED = 0,
    CZ_DIST_UNIFORM,
    CZ_DIST_EXPONENTIAL,
    CZ_DIST_LOGNORMAL,
    CZ_DIST_GAMMA
} cz_dist_kind;

typedef struct cz_distspec {
    cz_dist_kind kind;
    double a, b; /* fixed: value; uniform: min, max; exponential: mean; lognormal: mu, sigma;
                    gamma: shape, scale */
    double mean, cv; /* as given (mean and cv of the distribution) */
} cz_distspec;

/* Parses `j` (the value of field `key` inside `where`). Values must be >= 0. */
cz_status cz_distspec_parse(const cJSON *j, const char *where, const char *key, cz_distspec *out,
                            cz_err *err);

/* One draw. Pure apart from advancing `r`. */
double cz_distspec_draw(const cz_distspec *d, gsl_rng *r);

/* Mean and second moment E[X^2] of the distribution (closed forms). */
double cz_distspec_mean(const cz_distspec *d);
double cz_distspec_second_moment(const cz_distspec *d);

#endif
