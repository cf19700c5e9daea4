/* cz_plot.h - the figures of one run (a results file) and of a sweep (its JSON Lines),
 * drawn with gnuplot (cz_gnuplot.h); docs/plots.md lists what each shows.
 *
 * A results file gives (each as NAME.png, NAME.svg, NAME.gp, NAME.dat in the folder):
 *   latency_cdf   CDFs of TTFT, TPOT, ITL (per stage), E2E latency and audio TTFP
 *   kv_blocks     KV blocks on the GPU (in use, of which idle) and in host memory over time,
 *                 one panel per autoregressive stage
 *   load          running and waiting requests and batch tokens over time, per stage
 *                 (both summed over a stage's replicas; a stage of more than 8 replicas, a
 *                 fleet, is drawn per time bin as the distribution over its replicas: the
 *                 10-90 % band, the median and the max, beside the fleet's totals)
 *   replica_balance  fleets: each replica's time-averaged running requests and KV blocks
 *                 used, sorted, against the fleet's mean
 *   frames        periodic streams: each frame's latency over time, empty frames marked,
 *                 with the gateway's admission cap and the live sessions (when streams ran)
 *   stage_tokens  pipelines: tokens each stage generated and the user heard (two or more
 *                 autoregressive stages)
 * A sweep gives one figure per reported metric against the swept parameter, one line per
 * combination of the other grid values, the 95 % interval over seeds as error bars when
 * the sweep repeated seeds, and the papers' values as large open points. */
#ifndef CZ_PLOT_H
#define CZ_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"

#define CZ_PLOT_MAX_FIGS 64

/* The names of the figures a call drew (without extension), in drawing order. */
typedef struct cz_plot_list {
    size_t n;
    char names[CZ_PLOT_MAX_FIGS][128];
} cz_plot_list;

/* What a run changed from the config it started from: `buf` gets "run with K=V, K=V
 * (against BASE_NAME)", every leaf of the run's config `run` (dotted keys, as --set names
 * them) whose value differs from `base`'s, in the run's order ("K removed" for a key only
 * the base has), or "" when nothing differs or `base` is NULL. Keys named by `skip` (an
 * object whose member names are dotted keys, such as a sweep point; NULL: none) are left
 * out with everything under them. What does not fit `n` ends in "... and N more". */
void cz_plot_overrides(const cJSON *run, const cJSON *base, const char *base_name,
                       const cJSON *skip, char *buf, size_t n);

/* Draws the figures of the results file `h5` (written by `cadenza sim -o` or `replay -o`)
 * into the existing folder `dir`, appending their names to *out. With `base` (the config
 * the run started from, named `base_name`; may be NULL) every title shows what the run's
 * config changed from it (cz_plot_overrides). CZ_EIO/CZ_EFORMAT naming the file and table
 * on a file that is not cadenza's results; gnuplot's failures as cz_gp_render's. */
cz_status cz_plot_results(const char *h5, const cJSON *base, const char *base_name,
                          const char *dir, cz_plot_list *out, cz_err *err);

/* Reads a JSON Lines file of sweep rows (`cadenza sweep -o`) into a new array *rows (caller
 * deletes). CZ_EIO when it cannot be read; CZ_EFORMAT naming the line of a row that is not
 * a JSON object with a "point" object and a "summary" or "summaries". Empty lines are
 * skipped; a file without rows is CZ_EFORMAT. */
cz_status cz_plot_read_rows(const char *path, cJSON **rows, cz_err *err);

/* What a sweep figure shows. */
typedef struct cz_plot_sweep_opts {
    const char *x;               /* the grid key along x; NULL: the numeric key with the
                                    most values (else the key with the most values) */
    const char *const *metrics;  /* report keys to draw; NULL: the sweep's report list */
    size_t n_metrics;
    const cJSON *where;          /* only rows whose point matches (cz_plot_point_matches) */
    const char *name;            /* figure name (with one metric; "<name>_<metric>" with
                                    several); NULL: "sweep_<metric>" per metric */
    const char *title;           /* NULL: the sweep's name and the metric */
    const char *xlabel;          /* NULL: the x key */
    const char *ylabel;          /* NULL: the metric */
    const char *note;            /* a line under the figure, or NULL */
    const cJSON *base;           /* the config the sweep's base started from, or NULL: the
                                    title shows what the rows' runs changed from it other
                                    than the grid's keys and the seed (cz_plot_overrides) */
    const char *base_name;       /* how the title names `base` */
    double y_scale;              /* multiplies every y (0: 1) */
    bool logy;
    double hline;                /* a dashed reference line (NaN: none) */
    const char *hline_label;
} cz_plot_sweep_opts;

/* Draws rows (an array from cz_plot_read_rows) into `dir`. CZ_EINVAL naming the key when
 * `x` or a metric is not in the rows, or no row matches `where`. */
cz_status cz_plot_sweep(const cJSON *rows, const cz_plot_sweep_opts *o, const char *dir,
                        cz_plot_list *out, cz_err *err);

/* Whether a sweep point matches `where`: for every member k of `where`, the point's value
 * at k equals it (as JSON: {"scheduler": {"name": "bros", ...}} names an object value). */
bool cz_plot_point_matches(const cJSON *point, const cJSON *where);

/* The value of `metric` in a sweep row: the seeds' mean when the row has one, else the
 * summary's value at the dotted path. NaN when missing or null; *lo and *hi (may be NULL)
 * get the 95 % interval, or the value itself without seeds. */
double cz_plot_row_value(const cJSON *row, const char *metric, double *lo, double *hi);

/* The sum over replicas of the /timeline column `column` of autoregressive stage `stage`,
 * as a step series: at each of that stage's rows, the sum of every replica's latest value
 * (one pass over the table, read in blocks). *t and *v (caller frees, *n entries each) are
 * set on success; CZ_EFORMAT naming the file when it has no such column. */
cz_status cz_plot_timeline(const char *h5, const char *column, uint32_t stage, double **t,
                           double **v, size_t *n, cz_err *err);

#endif
