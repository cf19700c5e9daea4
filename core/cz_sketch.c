/* cz_sketch.c - see cz_sketch.h. */
#include "cz_sketch.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_base.h"

/* First allocation of the bucket window (it doubles from here up to max_bins). */
#define SKETCH_FIRST_BINS 64u

void cz_sketch_init(cz_sketch *s, double alpha, uint32_t max_bins)
{
    CZ_ASSERT(alpha > 0.0 && alpha < 1.0 && max_bins >= 1);
    memset(s, 0, sizeof *s);
    s->alpha = alpha;
    s->gamma = (1.0 + alpha) / (1.0 - alpha);
    s->inv_log_gamma = 1.0 / log(s->gamma);
    s->max_bins = max_bins;
    s->min = s->max = NAN;
}

void cz_sketch_free(cz_sketch *s)
{
    free(s->bins);
    s->bins = NULL;
    s->n_bins = s->cap_bins = 0;
}

uint64_t cz_sketch_count(const cz_sketch *s)
{
    return s->count;
}

uint64_t cz_sketch_low_count(const cz_sketch *s)
{
    return s->n_bins ? s->bins[0] : 0;
}

/* Makes the window exactly [lo, hi] (hi - lo < max_bins, hi >= the current top, lo <=
 * the current bottom unless hi moved up past max_bins): buckets below lo fold into lo. */
static void relayout(cz_sketch *s, int64_t lo, int64_t hi)
{
    CZ_ASSERT(hi >= lo && hi - lo < (int64_t)s->max_bins);
    uint32_t need = (uint32_t)(hi - lo + 1);
    if (need > s->cap_bins) {
        uint32_t cap = s->cap_bins ? s->cap_bins : SKETCH_FIRST_BINS;
        while (cap < need)
            cap *= 2;
        if (cap > s->max_bins)
            cap = s->max_bins;
        s->bins = cz_xrealloc(s->bins, cap, sizeof *s->bins);
        s->cap_bins = cap;
    }
    if (s->n_bins == 0) {
        memset(s->bins, 0, need * sizeof *s->bins);
    } else if (lo <= s->offset) {
        uint32_t shift = (uint32_t)(s->offset - lo);
        memmove(s->bins + shift, s->bins, s->n_bins * sizeof *s->bins);
        memset(s->bins, 0, shift * sizeof *s->bins);
        memset(s->bins + shift + s->n_bins, 0, (need - shift - s->n_bins) * sizeof *s->bins);
    } else {
        /* DDSketch's collapsing-lowest store: what lies below lo goes into lo */
        int64_t d = lo - s->offset;
        uint32_t gone = d < (int64_t)s->n_bins ? (uint32_t)d : s->n_bins;
        uint32_t keep = s->n_bins - gone;
        uint64_t folded = 0;
        for (uint32_t k = 0; k < gone; k++)
            folded += s->bins[k];
        memmove(s->bins, s->bins + gone, keep * sizeof *s->bins);
        memset(s->bins + keep, 0, (need - keep) * sizeof *s->bins);
        s->bins[0] += folded;
        s->folded = s->folded || folded > 0;
    }
    s->offset = (int32_t)lo;
    s->n_bins = need;
}

/* Adds `count` values to bucket index i, moving the window as needed. */
static void add_index(cz_sketch *s, int64_t i, uint64_t count)
{
    if (s->n_bins == 0) {
        relayout(s, i, i);
    } else {
        int64_t lo = s->offset, hi = (int64_t)s->offset + s->n_bins - 1;
        int64_t cap = s->max_bins;
        if (i > hi) {
            relayout(s, i - lo + 1 > cap ? i - cap + 1 : lo, i);
        } else if (i < lo) {
            if (hi - i + 1 > cap) {
                s->folded = true;
                i = hi - cap + 1;
            }
            if (i < lo)
                relayout(s, i, hi);
        }
    }
    s->bins[i - s->offset] += count;
}

static void note_extremes(cz_sketch *s, double lo, double hi)
{
    if (!(s->min <= lo))
        s->min = lo;
    if (!(s->max >= hi))
        s->max = hi;
}

void cz_sketch_add(cz_sketch *s, double value, uint64_t count)
{
    CZ_ASSERT(isfinite(value) && value >= 0.0);
    if (count == 0)
        return;
    note_extremes(s, value, value);
    s->count += count;
    if (value == 0.0) {
        s->zeros += count;
        return;
    }
    add_index(s, (int64_t)ceil(log(value) * s->inv_log_gamma), count);
}

/* The margin of cz_sketch_add_many's bucket range, relative: bucket i holds the values with
 * i - 1 < log(v) / log(gamma) <= i; a value more than this inside those bounds is more than
 * (margin / log(gamma)) from a bucket edge in index units, while log's error (an ulp or
 * two) and exp's are below 1e-12 of one. */
#define SKETCH_RANGE_MARGIN 1e-9

void cz_sketch_add_many(cz_sketch *s, const double *v, size_t n, uint64_t count)
{
    if (count == 0 || n == 0)
        return;
    double lo = v[0], hi = v[0];
    for (size_t k = 1; k < n; k++) {
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    CZ_ASSERT(isfinite(lo) && isfinite(hi) && lo >= 0.0);
    note_extremes(s, lo, hi);
    s->count += (uint64_t)n * count;
    /* the bucket of the values in (in_lo, in_hi) (none: NaN bounds); its count waits in
     * `held` until a value falls elsewhere, as add_index would have added it */
    double in_lo = NAN, in_hi = NAN, log_gamma = 1.0 / s->inv_log_gamma;
    int64_t idx = 0;
    uint64_t held = 0;
    for (size_t k = 0; k < n; k++) {
        double x = v[k];
        if (x > in_lo && x < in_hi) {
            held += count;
            continue;
        }
        if (held)
            add_index(s, idx, held);
        held = 0;
        if (x == 0.0) {
            s->zeros += count;
            in_lo = in_hi = NAN;
            continue;
        }
        idx = (int64_t)ceil(log(x) * s->inv_log_gamma);
        held = count;
        if (k + 2 < n) {
            /* worth two exps: at least two more values may land here */
            in_lo = exp((double)(idx - 1) * log_gamma) * (1.0 + SKETCH_RANGE_MARGIN);
            in_hi = exp((double)idx * log_gamma) * (1.0 - SKETCH_RANGE_MARGIN);
            if (!(in_lo >= DBL_MIN && in_hi <= DBL_MAX))
                in_lo = in_hi = NAN; /* subnormal or past exp's range: a log each */
        } else {
            in_lo = in_hi = NAN;
        }
    }
    if (held)
        add_index(s, idx, held);
}

void cz_sketch_merge(cz_sketch *dst, const cz_sketch *src)
{
    CZ_ASSERT(dst->alpha == src->alpha && dst->max_bins == src->max_bins);
    if (src->count == 0)
        return;
    note_extremes(dst, src->min, src->max);
    dst->count += src->count;
    dst->zeros += src->zeros;
    dst->folded = dst->folded || src->folded;
    /* from the top down, so the window moves at most once per fold */
    for (uint32_t k = src->n_bins; k-- > 0;)
        if (src->bins[k])
            add_index(dst, (int64_t)src->offset + k, src->bins[k]);
}

double cz_sketch_rank_value(const cz_sketch *s, uint64_t r)
{
    CZ_ASSERT(r < s->count);
    if (r < s->zeros)
        return 0.0;
    if (r == 0)
        return s->min;
    if (r == s->count - 1)
        return s->max;
    uint64_t cum = s->zeros;
    uint32_t k = 0;
    for (; k < s->n_bins; k++) {
        cum += s->bins[k];
        if (cum > r)
            break;
    }
    CZ_ASSERT(k < s->n_bins);
    double v = 2.0 * pow(s->gamma, (double)((int64_t)s->offset + k)) / (s->gamma + 1.0);
    return fmin(fmax(v, s->min), s->max);
}

double cz_sketch_quantile(const cz_sketch *s, double q)
{
    CZ_ASSERT(q >= 0.0 && q <= 1.0);
    if (s->count == 0)
        return NAN;
    double h = (double)(s->count - 1) * q;
    uint64_t lo = (uint64_t)floor(h);
    uint64_t hi = lo + 1 < s->count ? lo + 1 : lo;
    double a = cz_sketch_rank_value(s, lo);
    double b = hi == lo ? a : cz_sketch_rank_value(s, hi);
    return a + (h - (double)lo) * (b - a);
}
