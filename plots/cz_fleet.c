/* cz_fleet.c - see cz_fleet.h. */
#include "cz_fleet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_h5read.h"
#include "cz_h5stream.h"

static void swap_d(double *a, size_t i, size_t j)
{
    double t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Reorders a[0..n) so that a[k] is its k-th smallest (0-based), a[0..k) <= a[k] <=
 * a[k+1..n): quickselect with a median-of-three pivot (expected O(n)). */
static void nth_element(double *a, size_t n, size_t k)
{
    CZ_ASSERT(k < n);
    size_t lo = 0, hi = n - 1;
    for (;;) {
        if (hi <= lo + 1) {
            if (hi == lo + 1 && a[hi] < a[lo])
                swap_d(a, lo, hi);
            return;
        }
        size_t mid = lo + (hi - lo) / 2;
        swap_d(a, mid, lo + 1);
        if (a[lo] > a[hi])
            swap_d(a, lo, hi);
        if (a[lo + 1] > a[hi])
            swap_d(a, lo + 1, hi);
        if (a[lo] > a[lo + 1])
            swap_d(a, lo, lo + 1);
        /* a[lo] <= pivot = a[lo + 1] <= a[hi]: both ends are sentinels */
        size_t i = lo + 1, j = hi;
        double pivot = a[lo + 1];
        for (;;) {
            do
                i++;
            while (a[i] < pivot);
            do
                j--;
            while (a[j] > pivot);
            if (j < i)
                break;
            swap_d(a, i, j);
        }
        a[lo + 1] = a[j];
        a[j] = pivot;
        if (j >= k)
            hi = j - 1;
        if (j <= k)
            lo = i;
    }
}

static double min_of(const double *a, size_t n)
{
    double m = a[0];
    for (size_t i = 1; i < n; i++)
        if (a[i] < m)
            m = a[i];
    return m;
}

void cz_fleet_quantiles(double *a, size_t n, double out[CZ_FL_NS])
{
    CZ_ASSERT(n >= 1);
    double mx = a[0];
    for (size_t i = 1; i < n; i++)
        if (a[i] > mx)
            mx = a[i];
    out[CZ_FL_MAX] = mx;
    static const double p[3] = {0.1, 0.5, 0.9};
    size_t k[3];
    double fr[3];
    for (int i = 0; i < 3; i++) {
        double h = p[i] * (double)(n - 1);
        k[i] = (size_t)h;
        fr[i] = h - (double)k[i];
    }
    /* the median over all; then the 90th among the values from the median's up, and the
     * 10th among those below it (each part holds exactly the order statistics it needs) */
    nth_element(a, n, k[1]);
    double m_lo = a[k[1]], m_hi = k[1] + 1 < n ? min_of(a + k[1] + 1, n - k[1] - 1) : m_lo;
    out[CZ_FL_P50] = m_lo + fr[1] * (m_hi - m_lo);
    nth_element(a + k[1], n - k[1], k[2] - k[1]);
    double h_lo = a[k[2]], h_hi = k[2] + 1 < n ? min_of(a + k[2] + 1, n - k[2] - 1) : h_lo;
    out[CZ_FL_P90] = h_lo + fr[2] * (h_hi - h_lo);
    double l_lo, l_hi;
    if (k[0] < k[1]) {
        /* a[0..k1) are the k1 smallest, untouched since the median's selection */
        nth_element(a, k[1], k[0]);
        l_lo = a[k[0]];
        l_hi = k[0] + 1 < k[1] ? min_of(a + k[0] + 1, k[1] - k[0] - 1) : m_lo;
    } else {
        l_lo = m_lo;
        l_hi = m_hi;
    }
    out[CZ_FL_P10] = l_lo + fr[0] * (l_hi - l_lo);
}

/* Makes room for replica r of stage `s` (new replicas hold zeros). */
static void stage_grow(cz_fleet_stage *s, uint32_t need)
{
    if (need <= s->cap_rep) {
        if (need > s->n_rep)
            s->n_rep = need;
        return;
    }
    uint32_t cap = s->cap_rep ? s->cap_rep : 1;
    while (cap < need)
        cap = cap > UINT32_MAX / 2 ? need : 2 * cap;
    s->cur = cz_xrealloc(s->cur, (size_t)cap * CZ_FL_NQ, sizeof *s->cur);
    s->area = cz_xrealloc(s->area, (size_t)cap * 2, sizeof *s->area);
    s->t_last = cz_xrealloc(s->t_last, cap, sizeof *s->t_last);
    s->prev = cz_xrealloc(s->prev, (size_t)cap * 3, sizeof *s->prev);
    size_t old = s->cap_rep;
    memset(s->cur + old * CZ_FL_NQ, 0, (cap - old) * CZ_FL_NQ * sizeof *s->cur);
    memset(s->area + old * 2, 0, (cap - old) * 2 * sizeof *s->area);
    memset(s->t_last + old, 0, (cap - old) * sizeof *s->t_last);
    memset(s->prev + old * 3, 0, (cap - old) * 3 * sizeof *s->prev);
    s->cap_rep = cap;
    s->n_rep = need;
}

/* Stage s's distributions and totals at sample k, with `scratch` (room for n_rep). */
static void sample(cz_fleet *fl, size_t k, double *scratch)
{
    for (size_t si = 0; si < fl->n_stages; si++) {
        cz_fleet_stage *s = &fl->st[si];
        for (int c = 0; c < CZ_FL_NQ; c++)
            s->bsum[k * CZ_FL_NQ + (size_t)c] = s->sum[c];
        for (int c = 0; c < CZ_FL_ND; c++) {
            double *out = &s->q[(k * CZ_FL_ND + (size_t)c) * CZ_FL_NS];
            if (s->n_rep == 0) {
                for (int q = 0; q < CZ_FL_NS; q++)
                    out[q] = 0;
                continue;
            }
            for (uint32_t r = 0; r < s->n_rep; r++)
                scratch[r] = s->cur[(size_t)r * CZ_FL_NQ + (size_t)c];
            cz_fleet_quantiles(scratch, s->n_rep, out);
        }
        /* the rates since the rate sample before: hit rates of the replicas that looked up */
        if (k % fl->rate_stride)
            continue;
        size_t j = k / fl->rate_stride;
        double dt = j ? fl->bin_s * (double)fl->rate_stride : 0;
        size_t n_hit = 0;
        for (uint32_t r = 0; r < s->n_rep; r++) {
            const double *cur = &s->cur[(size_t)r * CZ_FL_NQ];
            double *pv = &s->prev[(size_t)r * 3];
            double dq = cur[CZ_FL_PREFIX_Q] - pv[0];
            if (dq > 0)
                scratch[n_hit++] = (cur[CZ_FL_PREFIX_H] - pv[1]) / dq;
            pv[0] = cur[CZ_FL_PREFIX_Q];
            pv[1] = cur[CZ_FL_PREFIX_H];
        }
        double *out = &s->qr[(j * CZ_FL_NR + CZ_FL_R_HIT) * CZ_FL_NS];
        if (n_hit)
            cz_fleet_quantiles(scratch, n_hit, out);
        else
            for (int q = 0; q < CZ_FL_NS; q++)
                out[q] = NAN;
        for (uint32_t r = 0; r < s->n_rep; r++) {
            const double *cur = &s->cur[(size_t)r * CZ_FL_NQ];
            double *pv = &s->prev[(size_t)r * 3];
            double moved = cur[CZ_FL_PULLED] + cur[CZ_FL_SENT];
            scratch[r] = dt > 0 ? (moved - pv[2]) / dt : 0;
            pv[2] = moved;
        }
        out = &s->qr[(j * CZ_FL_NR + CZ_FL_R_MOVED) * CZ_FL_NS];
        if (s->n_rep)
            cz_fleet_quantiles(scratch, s->n_rep, out);
        else
            for (int q = 0; q < CZ_FL_NS; q++)
                out[q] = NAN;
    }
}

void cz_fleet_free(cz_fleet *fl)
{
    for (size_t i = 0; i < CZ_FLEET_MAX_STAGES; i++) {
        cz_fleet_stage *s = &fl->st[i];
        free(s->cur);
        free(s->area);
        free(s->t_last);
        free(s->prev);
        free(s->qr);
        free(s->mean_running);
        free(s->mean_kv);
        free(s->q);
        free(s->bsum);
        free(s->rt);
        free(s->rsum);
    }
    memset(fl, 0, sizeof *fl);
}

/* The per-row totals of a small stage, appended after a row at t. */
static void row_totals(cz_fleet_stage *s, double t)
{
    if (s->n_rows == s->cap_rows) {
        size_t cap = s->cap_rows;
        cz_grow((void **)&s->rt, &cap, s->n_rows + 1, sizeof *s->rt);
        cz_grow((void **)&s->rsum, &s->cap_rows, s->n_rows + 1, CZ_FL_NQ * sizeof *s->rsum);
    }
    s->rt[s->n_rows] = t;
    memcpy(&s->rsum[s->n_rows * CZ_FL_NQ], s->sum, sizeof s->sum);
    s->n_rows++;
}

cz_status cz_fleet_read(const char *h5, size_t n_stages, const uint32_t *replicas,
                        double interval_s, cz_fleet *fl, cz_err *err)
{
    CZ_ASSERT(n_stages >= 1 && n_stages <= CZ_FLEET_MAX_STAGES);
    memset(fl, 0, sizeof *fl);
    fl->n_stages = n_stages;
    for (size_t i = 0; i < n_stages; i++) {
        stage_grow(&fl->st[i], replicas[i]);
        fl->st[i].fleet = fl->st[i].n_rep > CZ_FLEET_MAX_LINES;
    }
    if (!cz_h5_has_table(h5, "timeline"))
        return CZ_OK;
    /* the table's order: running .. sent as CZ_FL_*, after time, stage and replica */
    static const char *const tf[] = {"t_s",            "stage",          "replica",
                                     "running",        "waiting",        "batch_tokens",
                                     "kv_blocks_used", "kv_blocks_idle", "host_kv_tokens",
                                     "prefix_queries", "prefix_hits",    "kv_pulled_tokens",
                                     "kv_sent_tokens"};
    _Static_assert(CZ_ARRAY_LEN(tf) == 3 + CZ_FL_NQ, "a field per column");
    cz_h5_stream in;
    cz_status st = cz_h5_stream_open(h5, "timeline", tf, CZ_ARRAY_LEN(tf), 0, &in, err);
    size_t nf = CZ_ARRAY_LEN(tf);
    if (st == CZ_EFORMAT) {
        /* a file from before the running totals: those read as 0 */
        cz_err e2;
        cz_err_clear(&e2);
        nf = 3 + CZ_FL_PREFIX_Q;
        if (cz_h5_stream_open(h5, "timeline", tf, nf, 0, &in, &e2) == CZ_OK) {
            st = CZ_OK;
            cz_err_clear(err);
        }
    }
    if (st != CZ_OK)
        return st;
    fl->rows = in.n_rows;
    if (in.n_rows == 0) {
        cz_h5_stream_close(&in);
        return CZ_OK;
    }
    /* the rows are in time order: the last is the latest */
    if ((st = cz_h5_stream_value(&in, 0, in.n_rows - 1, &fl->t_end, err)) != CZ_OK) {
        cz_h5_stream_close(&in);
        return st;
    }
    if (!(fl->t_end > 0))
        fl->t_end = 0;
    fl->bin_s = interval_s > 0 ? interval_s : 0;
    if (fl->bin_s < fl->t_end / (CZ_FLEET_MAX_BINS - 1))
        fl->bin_s = fl->t_end / (CZ_FLEET_MAX_BINS - 1);
    if (!(fl->bin_s > 0))
        fl->bin_s = 1.0; /* every row at time 0: one sample */
    /* the last sample at or after the last row (a rounding error short of it counts) */
    size_t last = (size_t)ceil(fl->t_end / fl->bin_s - 1e-9);
    if ((double)last * fl->bin_s < fl->t_end * (1 - 1e-12))
        last++;
    fl->n_bins = last + 1;
    fl->rate_stride = (fl->n_bins + CZ_FLEET_MAX_RATES - 1) / CZ_FLEET_MAX_RATES;
    fl->n_rates = (fl->n_bins + fl->rate_stride - 1) / fl->rate_stride;
    size_t scratch_n = 1;
    for (size_t i = 0; i < n_stages; i++) {
        cz_fleet_stage *s = &fl->st[i];
        s->q = cz_xcalloc(fl->n_bins * CZ_FL_ND * CZ_FL_NS, sizeof *s->q);
        s->bsum = cz_xcalloc(fl->n_bins * CZ_FL_NQ, sizeof *s->bsum);
        s->qr = cz_xcalloc(fl->n_rates * CZ_FL_NR * CZ_FL_NS, sizeof *s->qr);
        if (s->n_rep > scratch_n)
            scratch_n = s->n_rep;
    }
    double *scratch = cz_xmalloc(scratch_n * sizeof *scratch);
    size_t next = 0; /* the next sample to take */
    double t_prev = 0;
    size_t n;
    while ((st = cz_h5_stream_next(&in, &n, err)) == CZ_OK && n > 0) {
        for (size_t i = 0; i < n; i++) {
            double t_row = in.col[0][i], sd = in.col[1][i], rd = in.col[2][i];
            if (!(sd >= 0 && sd < (double)n_stages) || !(rd >= 0 && rd < (double)UINT32_MAX))
                continue;
            double t = t_row;
            if (t < t_prev) {
                fl->out_of_order++;
                t = t_prev;
            }
            t_prev = t;
            /* the samples before this row see the state before it; the last sample is
             * taken at the end, whatever rows come */
            while (next + 1 < fl->n_bins && t > (double)next * fl->bin_s) {
                sample(fl, next, scratch);
                next++;
            }
            cz_fleet_stage *s = &fl->st[(size_t)sd];
            uint32_t r = (uint32_t)rd;
            if (r >= s->n_rep) {
                stage_grow(s, r + 1);
                if (s->n_rep > scratch_n) {
                    scratch_n = s->cap_rep;
                    scratch = cz_xrealloc(scratch, scratch_n, sizeof *scratch);
                }
                if (!s->fleet && s->n_rep > CZ_FLEET_MAX_LINES) {
                    /* more replicas than the config said: a fleet after all */
                    s->fleet = true;
                    free(s->rt);
                    free(s->rsum);
                    s->rt = s->rsum = NULL;
                    s->n_rows = s->cap_rows = 0;
                }
            }
            double *cur = &s->cur[(size_t)r * CZ_FL_NQ];
            double dt = t - s->t_last[r];
            s->area[(size_t)r * 2] += cur[CZ_FL_RUNNING] * dt;
            s->area[(size_t)r * 2 + 1] += cur[CZ_FL_KV_USED] * dt;
            s->t_last[r] = t;
            for (int c = 0; c < CZ_FL_NQ; c++) {
                double v = 3 + (size_t)c < nf ? in.col[3 + c][i] : 0;
                /* integer counts: the running totals stay exact */
                s->sum[c] += v - cur[c];
                cur[c] = v;
            }
            s->rows++;
            if (!s->fleet)
                row_totals(s, t_row);
        }
    }
    cz_h5_stream_close(&in);
    if (st == CZ_OK) {
        while (next < fl->n_bins)
            sample(fl, next++, scratch);
        if (t_prev > fl->t_end)
            fl->t_end = t_prev;
        for (size_t i = 0; i < n_stages; i++) {
            cz_fleet_stage *s = &fl->st[i];
            s->mean_running = cz_xcalloc(s->n_rep ? s->n_rep : 1, sizeof *s->mean_running);
            s->mean_kv = cz_xcalloc(s->n_rep ? s->n_rep : 1, sizeof *s->mean_kv);
            for (uint32_t r = 0; r < s->n_rep; r++) {
                const double *cur = &s->cur[(size_t)r * CZ_FL_NQ];
                double dt = fl->t_end - s->t_last[r];
                double a0 = s->area[(size_t)r * 2] + cur[CZ_FL_RUNNING] * dt;
                double a1 = s->area[(size_t)r * 2 + 1] + cur[CZ_FL_KV_USED] * dt;
                s->mean_running[r] = fl->t_end > 0 ? a0 / fl->t_end : cur[CZ_FL_RUNNING];
                s->mean_kv[r] = fl->t_end > 0 ? a1 / fl->t_end : cur[CZ_FL_KV_USED];
            }
        }
    }
    free(scratch);
    if (st != CZ_OK)
        cz_fleet_free(fl);
    return st;
}
