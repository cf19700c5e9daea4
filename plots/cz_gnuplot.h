/* cz_gnuplot.h - figures drawn by gnuplot (Debian's gnuplot-nox): a figure is a grid of
 * panels, a panel a set of series (x, y and optionally an interval per point). Rendering
 * writes three files beside the images, so a figure can be restyled and redrawn by hand:
 *   DIR/NAME.dat   the series, one gnuplot data block each ("index i")
 *   DIR/NAME.gp    the script (`cd DIR && gnuplot NAME.gp` redraws NAME.png and NAME.svg)
 *   DIR/NAME.png, DIR/NAME.svg
 * Every file is written under a temporary name and renamed when gnuplot succeeded, so a
 * failure leaves no half-written figure. gnuplot is found on PATH, or at $CZ_GNUPLOT. */
#ifndef CZ_GNUPLOT_H
#define CZ_GNUPLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "cz_base.h"

/* How a series is drawn. */
typedef enum cz_gp_style {
    CZ_GP_LINES,       /* lines through the points */
    CZ_GP_LINESPOINTS, /* lines with a marker at each point */
    CZ_GP_STEPS,       /* a step function (a CDF, a counter over time) */
    CZ_GP_POINTS,      /* markers only */
    CZ_GP_ERRORLINES,  /* lines with markers and the interval [lo, hi] as error bars */
    CZ_GP_PAPER,       /* a paper's value: a large open marker, labelled */
    CZ_GP_BARS,        /* clustered bars: x is the bar group's index (0, 1, ...) */
    CZ_GP_BAND,        /* the interval [lo, hi] as a translucent filled band (y, kept in the
                          .dat, is not drawn); it takes the colour of the series after it,
                          so a band and its centre line read as one */
    CZ_GP_FILLSTEPS,   /* a step function filled down to 0 (sorted values read as bars) */
} cz_gp_style;

typedef struct cz_gp_series {
    char label[128];
    cz_gp_style style;
    bool axis2;        /* plotted against the right-hand y axis */
    size_t n;
    double *x, *y;     /* n each; NaN y leaves a gap */
    double *lo, *hi;   /* CZ_GP_ERRORLINES and CZ_GP_BAND only: the interval per point */
} cz_gp_series;

typedef struct cz_gp_panel {
    char title[160];
    char xlabel[96], ylabel[96], y2label[96];
    bool logx, logy;
    double xmin, xmax;      /* the x range; NaN: autoscaled */
    double ymin, ymax;      /* the y range; NaN: autoscaled */
    double hline;           /* a dashed horizontal reference line (an SLO); NaN: none */
    char hline_label[128];
    bool hline_label_left;  /* the line's label at the left end (default: the right) */
    char **xtics;           /* CZ_GP_BARS / categorical x: n_xtics names at x = 0, 1, ... */
    size_t n_xtics;
    cz_gp_series *series;
    size_t n_series, cap_series;
} cz_gp_panel;

typedef struct cz_gp_figure {
    char title[200];
    char subtitle[400];     /* a line under the title (what the run changed from its base
                               config), or "" */
    char note[800];         /* a line under the panels (what the paper reports), or "" */
    int rows, cols;         /* panel layout (1 x 1 for one panel) */
    cz_gp_panel *panels;
    size_t n_panels, cap_panels;
} cz_gp_figure;

/* An empty figure titled `title`, laid out as rows x cols panels. */
void cz_gp_figure_init(cz_gp_figure *f, const char *title, int rows, int cols);

/* Adds a panel (autoscaled: its ranges and hline NaN, no log axes) and returns it; valid
 * until the next add. */
cz_gp_panel *cz_gp_panel_add(cz_gp_figure *f, const char *title, const char *xlabel,
                             const char *ylabel);

/* Adds a series of n points, copying x and y (and lo, hi when not NULL); returns it. */
cz_gp_series *cz_gp_series_add(cz_gp_panel *p, const char *label, cz_gp_style style, size_t n,
                               const double *x, const double *y, const double *lo,
                               const double *hi);

/* Sets the panel's categorical x tic names (copied). */
void cz_gp_panel_xtics(cz_gp_panel *p, const char *const *names, size_t n);

/* Frees everything the figure holds. */
void cz_gp_figure_free(cz_gp_figure *f);

/* Writes DIR/NAME.{dat,gp} and has gnuplot draw DIR/NAME.{png,svg} (see above). `dir`
 * must exist. How every figure is drawn, whatever its data:
 *   - the key sits below the plot, clear of the axis labels;
 *   - series are told apart by colour (ten), then by dash type and marker, so no two of the
 *     first fifty in a panel look alike; the papers' points are black open markers, each
 *     series its own shape;
 *   - text is literal: no gnuplot enhanced-text markup ('_' is an underscore);
 *   - a linear axis whose data (values, intervals, reference line) are all >= 0 starts at 0
 *     or above, never below;
 *   - on a logarithmic y axis an interval's lower bound at or below 0 is not drawn (the
 *     .dat keeps it) and a line in the panel says so.
 * CZ_EIO naming the file or gnuplot's complaint (its last stderr line) on failure
 * (gnuplot missing included), with nothing of NAME left behind. */
cz_status cz_gp_render(const cz_gp_figure *f, const char *dir, const char *name, cz_err *err);

/* Whether gnuplot can be run (for a command to fail before its work, not after). */
cz_status cz_gp_available(cz_err *err);

#endif
