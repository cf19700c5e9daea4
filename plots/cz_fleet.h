/* cz_fleet.h - the /timeline table of a results file read once, in blocks, into what the
 * `load`, `kv_blocks` and `replica_balance` figures draw (cz_plot.c, docs/plots.md).
 *
 * Rows are written when a replica steps (at most every sim.timeline_interval_s), in time
 * order, so a replica's state at any time is its latest row at or before it. The pass keeps
 * one value per replica and column (carried forward from its latest row; 0 before its
 * first) and, per autoregressive stage:
 *   - at each sample time k * bin_s (k = 0 .. n_bins - 1, the last at or after the last
 *     row), the 10th, 50th and 90th percentiles (linear interpolation between order
 *     statistics) and the maximum over replicas of running, waiting, batch tokens and KV
 *     blocks used, found by partial selection over the replicas' current values in one
 *     scratch array (no allocation per sample), and the fleet's totals of every column;
 *   - each replica's time average of running requests and KV blocks used over
 *     [0, t_end] (the step function of its rows);
 *   - for a stage of at most CZ_FLEET_MAX_LINES replicas, the totals at each of its rows
 *     (the step series the figures drew before fleets).
 *   - at every rate_stride-th sample, the rates over the interval since the one before, from the running
 *     totals (prefix-cache queries and hits, KV pulled and sent): the stage's (from its
 *     totals) and their distribution over replicas (hit rate: over the replicas that looked
 *     a prefix up in the interval; KV moved, pulled plus sent, per second: over all).
 * Memory is O(replicas + samples) per stage (plus the per-row totals of small stages);
 * time O(rows + samples x replicas). */
#ifndef CZ_FLEET_H
#define CZ_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

/* Most replicas a stage's figures draw as totals over time; more are drawn as
 * distributions. */
#define CZ_FLEET_MAX_LINES 8
#define CZ_FLEET_MAX_STAGES 8
/* Most samples over a run: the sample interval grows past sim.timeline_interval_s to keep
 * a long run's figures (and .dat files) this size. */
#define CZ_FLEET_MAX_BINS 600
/* Most intervals the rates are drawn over (each rate_stride samples). */
#define CZ_FLEET_MAX_RATES 100

/* The timeline columns kept per replica. */
enum {
    CZ_FL_RUNNING,
    CZ_FL_WAITING,
    CZ_FL_BATCH,
    CZ_FL_KV_USED,  /* the first CZ_FL_ND are the ones with distributions */
    CZ_FL_KV_IDLE,
    CZ_FL_HOST,
    CZ_FL_PREFIX_Q, /* running totals (tokens) from here on */
    CZ_FL_PREFIX_H,
    CZ_FL_PULLED,
    CZ_FL_SENT,
    CZ_FL_NQ
};
#define CZ_FL_ND 4
/* A distribution's statistics, in order. */
enum { CZ_FL_P10, CZ_FL_P50, CZ_FL_P90, CZ_FL_MAX, CZ_FL_NS };
/* The rates over a sample's interval drawn as distributions: prefix-cache hit rate
 * (hits / queries) and KV moved (pulled plus sent, tokens per second). */
enum { CZ_FL_R_HIT, CZ_FL_R_MOVED, CZ_FL_NR };

typedef struct cz_fleet_stage {
    uint32_t n_rep;       /* replicas: the config's, or more when the table names more */
    bool fleet;           /* n_rep > CZ_FLEET_MAX_LINES */
    size_t rows;          /* this stage's rows */
    /* per replica */
    double *cur;          /* n_rep x CZ_FL_NQ: the latest values */
    double *area;         /* n_rep x 2: integrals of running and KV blocks used over time */
    double *t_last;       /* n_rep: when cur last changed */
    double *mean_running; /* n_rep: time averages over [0, t_end] (after the pass) */
    double *mean_kv;
    double *prev;         /* n_rep x 3: prefix queries, hits and KV moved at the last sample */
    uint32_t cap_rep;
    double sum[CZ_FL_NQ]; /* the fleet's totals now */
    /* per sample */
    double *q;            /* n_bins x CZ_FL_ND x CZ_FL_NS */
    double *qr;           /* n_rates x CZ_FL_NR x CZ_FL_NS: rates (NaN: no replica had one) */
    double *bsum;         /* n_bins x CZ_FL_NQ: totals */
    /* per row of the stage (not a fleet): the totals after it, as the step series */
    size_t n_rows, cap_rows;
    double *rt;           /* n_rows */
    double *rsum;         /* n_rows x CZ_FL_NQ */
} cz_fleet_stage;

typedef struct cz_fleet {
    size_t n_stages;
    cz_fleet_stage st[CZ_FLEET_MAX_STAGES];
    size_t rows;          /* rows of the table */
    size_t out_of_order;  /* rows earlier than the one before (taken at that one's time) */
    double t_end;         /* the latest row's time */
    double bin_s;         /* the sample interval */
    size_t n_bins;        /* samples at k * bin_s, k < n_bins */
    size_t rate_stride;   /* samples per rate interval */
    size_t n_rates;       /* rates at samples j * rate_stride, j < n_rates (j = 0: none yet) */
} cz_fleet;

/* Reads /timeline of `h5` in one pass. `replicas[s]` is stage s's replica count from the
 * config (0: unknown, taken from the rows); `interval_s` the config's timeline interval (0:
 * a row per step). An absent table reads as no rows. Errors as cz_h5_stream's. */
cz_status cz_fleet_read(const char *h5, size_t n_stages, const uint32_t *replicas,
                        double interval_s, cz_fleet *fl, cz_err *err);

void cz_fleet_free(cz_fleet *fl);

/* The statistic `stat` (CZ_FL_P10 ...) of column `col` (< CZ_FL_ND) of stage s at sample k. */
static inline double cz_fleet_q(const cz_fleet *fl, size_t s, size_t k, int col, int stat)
{
    return fl->st[s].q[(k * CZ_FL_ND + (size_t)col) * CZ_FL_NS + (size_t)stat];
}

/* The statistic `stat` of rate `r` (CZ_FL_R_HIT ...) over stage s's replicas in the interval
 * ending at sample j * rate_stride (j < n_rates); NaN when no replica had one (no lookups). */
static inline double cz_fleet_qr(const cz_fleet *fl, size_t s, size_t j, int r, int stat)
{
    return fl->st[s].qr[(j * CZ_FL_NR + (size_t)r) * CZ_FL_NS + (size_t)stat];
}

/* The 10th, 50th and 90th percentiles (interpolated between order statistics) and the
 * maximum of a[0..n) (n >= 1) into out[CZ_FL_NS]; reorders a. No allocation. */
void cz_fleet_quantiles(double *a, size_t n, double out[CZ_FL_NS]);

#endif
