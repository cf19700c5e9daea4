/* cz_gnuplot.c - writes a figure's data and script and runs gnuplot on them (cz_gnuplot.h). */
#include "cz_gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Figure size in pixels per panel, and the most panels a row. */
#define GP_PANEL_W 620
#define GP_PANEL_H 430
/* Most rows of a key; more entries go to further columns. */
#define GP_KEY_ROWS 6

void cz_gp_figure_init(cz_gp_figure *f, const char *title, int rows, int cols)
{
    CZ_ASSERT(rows >= 1 && cols >= 1);
    memset(f, 0, sizeof *f);
    snprintf(f->title, sizeof f->title, "%s", title ? title : "");
    f->rows = rows;
    f->cols = cols;
}

cz_gp_panel *cz_gp_panel_add(cz_gp_figure *f, const char *title, const char *xlabel,
                             const char *ylabel)
{
    if (f->n_panels == f->cap_panels) {
        f->cap_panels = f->cap_panels ? 2 * f->cap_panels : 4;
        f->panels = cz_xrealloc(f->panels, f->cap_panels, sizeof *f->panels);
    }
    cz_gp_panel *p = &f->panels[f->n_panels++];
    memset(p, 0, sizeof *p);
    snprintf(p->title, sizeof p->title, "%s", title ? title : "");
    snprintf(p->xlabel, sizeof p->xlabel, "%s", xlabel ? xlabel : "");
    snprintf(p->ylabel, sizeof p->ylabel, "%s", ylabel ? ylabel : "");
    p->xmin = p->xmax = NAN;
    p->ymin = p->ymax = NAN;
    p->hline = NAN;
    return p;
}

static double *dup_doubles(const double *v, size_t n)
{
    if (!v)
        return NULL;
    double *d = cz_xmalloc((n ? n : 1) * sizeof *d);
    if (n)
        memcpy(d, v, n * sizeof *d);
    return d;
}

cz_gp_series *cz_gp_series_add(cz_gp_panel *p, const char *label, cz_gp_style style, size_t n,
                               const double *x, const double *y, const double *lo,
                               const double *hi)
{
    CZ_ASSERT((style != CZ_GP_ERRORLINES && style != CZ_GP_BAND) || (lo && hi));
    if (p->n_series == p->cap_series) {
        p->cap_series = p->cap_series ? 2 * p->cap_series : 4;
        p->series = cz_xrealloc(p->series, p->cap_series, sizeof *p->series);
    }
    cz_gp_series *s = &p->series[p->n_series++];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label ? label : "");
    s->style = style;
    s->n = n;
    s->x = dup_doubles(x, n);
    s->y = dup_doubles(y, n);
    s->lo = dup_doubles(lo, n);
    s->hi = dup_doubles(hi, n);
    return s;
}

void cz_gp_panel_xtics(cz_gp_panel *p, const char *const *names, size_t n)
{
    for (size_t i = 0; i < p->n_xtics; i++)
        free(p->xtics[i]);
    free(p->xtics);
    p->xtics = cz_xcalloc(n ? n : 1, sizeof *p->xtics);
    for (size_t i = 0; i < n; i++)
        p->xtics[i] = cz_xstrdup(names[i]);
    p->n_xtics = n;
}

void cz_gp_figure_free(cz_gp_figure *f)
{
    for (size_t i = 0; i < f->n_panels; i++) {
        cz_gp_panel *p = &f->panels[i];
        for (size_t j = 0; j < p->n_series; j++) {
            free(p->series[j].x);
            free(p->series[j].y);
            free(p->series[j].lo);
            free(p->series[j].hi);
        }
        free(p->series);
        for (size_t j = 0; j < p->n_xtics; j++)
            free(p->xtics[j]);
        free(p->xtics);
    }
    free(f->panels);
    memset(f, 0, sizeof *f);
}

/* Writes `s` as a gnuplot string literal: single-quoted, a quote doubled. */
static void put_str(FILE *fp, const char *s)
{
    fputc('\'', fp);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', fp);
        fputc(*s, fp);
    }
    fputc('\'', fp);
}

/* Writes `s` as a double-quoted gnuplot string, broken into lines of at most `width`
 * characters at spaces and at its own newlines. */
static void put_wrapped(FILE *fp, const char *s, size_t width)
{
    fputc('"', fp);
    size_t col = 0;
    for (; *s; s++) {
        if (*s == '\n' || (*s == ' ' && col >= width)) {
            fputs("\\n", fp);
            col = 0;
            continue;
        }
        if (*s == '"' || *s == '\\')
            fputc('\\', fp);
        fputc(*s, fp);
        col++;
    }
    fputc('"', fp);
}

static void put_num(FILE *fp, double v)
{
    if (isnan(v) || isinf(v))
        fputs("NaN", fp);
    else
        fprintf(fp, "%.10g", v);
}

static void write_data(FILE *fp, const cz_gp_figure *f)
{
    int block = 0;
    for (size_t i = 0; i < f->n_panels; i++) {
        const cz_gp_panel *p = &f->panels[i];
        for (size_t j = 0; j < p->n_series; j++, block++) {
            const cz_gp_series *s = &p->series[j];
            fprintf(fp, "# block %d: panel %zu, series '%s'\n", block, i + 1, s->label);
            for (size_t k = 0; k < s->n; k++) {
                put_num(fp, s->x[k]);
                fputc(' ', fp);
                put_num(fp, s->y[k]);
                if (s->lo) {
                    fputc(' ', fp);
                    put_num(fp, s->lo[k]);
                    fputc(' ', fp);
                    put_num(fp, s->hi[k]);
                }
                fputc('\n', fp);
            }
            if (s->n == 0) /* an empty block would merge with the next: one gap row */
                fputs("NaN NaN\n", fp);
            fputs("\n\n", fp);
        }
    }
}

/* The clustered-bar offsets of series j of m: bars of width 0.8/m centred in the group. */
static double bar_offset(size_t j, size_t m)
{
    double w = 0.8 / (double)m;
    return -0.4 + w * ((double)j + 0.5);
}

/* Series colours: ten that stay apart on white (Tableau 10); past ten the dash type and the
 * marker change too, so no two of the first fifty series of a panel look alike. */
static const char *const gp_colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                         "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                         "#bcbd22", "#17becf"};
static const int gp_dashes[] = {1, 2, 4, 5, 3};
static const int gp_markers[] = {7, 5, 9, 11, 13};
/* The papers' points: black open markers, one shape per series. */
static const int gp_paper_markers[] = {6, 4, 8, 12, 10, 14};

/* Writes the colour, dash type and (with `points`) marker of the i-th series of a panel. */
static void put_series_style(FILE *fp, size_t i, bool points)
{
    size_t nc = CZ_ARRAY_LEN(gp_colours);
    size_t cycle = (i / nc) % CZ_ARRAY_LEN(gp_dashes);
    fprintf(fp, " lc rgb '%s' dt %d", gp_colours[i % nc], gp_dashes[cycle]);
    if (points)
        fprintf(fp, " pt %d", gp_markers[cycle]);
}

/* What a panel's data span, per axis: whether any finite value is on it and whether every
 * one is >= 0 (values and intervals; the reference line counts on y). */
typedef struct axis_span {
    bool any, nonneg;
} axis_span;

static void span_add(axis_span *a, double v)
{
    if (!isfinite(v))
        return;
    a->any = true;
    if (v < 0)
        a->nonneg = false;
}

/* Whether a log-y panel has an interval whose lower bound is at or below 0 (not drawn). */
static bool lower_bound_cut(const cz_gp_panel *p)
{
    if (!p->logy)
        return false;
    for (size_t j = 0; j < p->n_series; j++) {
        const cz_gp_series *s = &p->series[j];
        if (s->style != CZ_GP_ERRORLINES)
            continue;
        for (size_t k = 0; k < s->n; k++)
            if (isfinite(s->lo[k]) && s->lo[k] <= 0 && isfinite(s->y[k]) && s->y[k] > 0)
                return true;
    }
    return false;
}

/* The entries of a panel's key (its series with a label). */
static size_t key_entries(const cz_gp_panel *p)
{
    size_t keyed = 0;
    for (size_t j = 0; j < p->n_series; j++)
        keyed += p->series[j].label[0] != '\0';
    return keyed;
}

/* Writes one panel; `key_rows` is the most rows of a key among the figure's panels (their
 * bottom margins the same, so the panels of a row line up). */
static void write_panel(FILE *fp, const cz_gp_panel *p, const char *dat, int *block,
                        bool single, const char *note, size_t key_rows)
{
    fputs("reset\nset grid back lc rgb '#dddddd'\n", fp);
    /* the key under the plot, in columns of at most six entries, in a box with room for
     * descenders ('_'); the bottom margin is set to hold the tics, the x label and the key
     * apart (gnuplot's own room for a key below is short of the x label by about half a
     * line, so the two overlap) */
    fprintf(fp, "set key below left vertical maxrows %d Left reverse box noenhanced font ',9' "
                "height 1\n",
            GP_KEY_ROWS);
    fprintf(fp, "set bmargin %.1f\n", key_rows ? 4.0 + 0.9 * (double)key_rows : 3.5);
    if (!p->logx && !p->n_xtics)
        fputs("set offsets graph 0.03, graph 0.03, graph 0.05, 0\n", fp);
    fputs("set datafile missing 'NaN'\nset termoption noenhanced\n", fp);
    /* one panel: the note (what the paper reports) is its title */
    fputs("set title ", fp);
    if (single && note && note[0]) {
        put_wrapped(fp, note, 120);
        fputs(" font ',9'", fp);
    } else {
        put_str(fp, p->title);
    }
    fputs(" noenhanced\nset xlabel ", fp);
    put_str(fp, p->xlabel);
    fputs(" noenhanced\nset ylabel ", fp);
    put_str(fp, p->ylabel);
    fputs(" noenhanced\n", fp);
    bool any2 = false;
    bool bars = false;
    size_t n_bars = 0;
    axis_span xs = {false, true}, ys = {false, true}, y2s = {false, true};
    for (size_t j = 0; j < p->n_series; j++) {
        const cz_gp_series *s = &p->series[j];
        any2 |= s->axis2;
        if (s->style == CZ_GP_BARS) {
            bars = true;
            n_bars++;
        }
        for (size_t k = 0; k < s->n; k++) {
            span_add(&xs, s->x[k]);
            axis_span *a = s->axis2 ? &y2s : &ys;
            span_add(a, s->y[k]);
            if (s->lo) {
                span_add(a, s->lo[k]);
                span_add(a, s->hi[k]);
            }
        }
    }
    span_add(&ys, p->hline);
    if (any2) {
        fputs("set y2tics\nset ytics nomirror\nset y2label ", fp);
        put_str(fp, p->y2label);
        fputs(" noenhanced\n", fp);
        if (y2s.any && y2s.nonneg)
            fputs("set y2range [0<*:*]\n", fp);
    }
    if (p->logx)
        fputs("set logscale x\n", fp);
    if (p->logy)
        fputs("set logscale y\n", fp);
    if (p->n_xtics) {
        fputs("set xtics (", fp);
        for (size_t i = 0; i < p->n_xtics; i++) {
            if (i)
                fputs(", ", fp);
            put_str(fp, p->xtics[i]);
            fprintf(fp, " %zu", i);
        }
        fprintf(fp, ")\nset xrange [-0.6:%zu.6]\n", p->n_xtics - 1);
    } else if (!isnan(p->xmin) || !isnan(p->xmax)) {
        /* an explicit bound (the offsets apply to autoscaled ends only) */
        fputs("set xrange [", fp);
        if (!isnan(p->xmin))
            put_num(fp, p->xmin);
        else
            fputs(!p->logx && xs.any && xs.nonneg ? "0<*" : "*", fp);
        fputc(':', fp);
        if (!isnan(p->xmax))
            put_num(fp, p->xmax);
        else
            fputc('*', fp);
        fputs("]\n", fp);
    } else if (!p->logx && xs.any && xs.nonneg) {
        /* non-negative data: the offsets may not carry the axis below 0 */
        fputs("set xrange [0<*:*]\n", fp);
    }
    if (bars) {
        fputs("set style fill solid 0.75 border -1\nset yrange [0:*]\n", fp);
    } else {
        /* an explicit bound, else a linear axis over non-negative data starts at 0 or above */
        bool floor0 = isnan(p->ymin) && !p->logy && ys.any && ys.nonneg;
        if (!isnan(p->ymin) || !isnan(p->ymax) || floor0) {
            fputs("set yrange [", fp);
            if (floor0)
                fputs("0<*", fp);
            else if (!isnan(p->ymin))
                put_num(fp, p->ymin);
            else
                fputc('*', fp);
            fputc(':', fp);
            if (!isnan(p->ymax))
                put_num(fp, p->ymax);
            else
                fputc('*', fp);
            fputs("]\n", fp);
        }
    }
    if (!isnan(p->hline)) {
        fputs("set arrow from graph 0, first ", fp);
        put_num(fp, p->hline);
        fputs(" to graph 1, first ", fp);
        put_num(fp, p->hline);
        fputs(" nohead dashtype 2 lw 1.5 lc rgb '#aa0000' front\n", fp);
        if (p->hline_label[0]) {
            fputs("set label ", fp);
            put_str(fp, p->hline_label);
            fputs(p->hline_label_left ? " at graph 0.01, first " : " at graph 0.99, first ", fp);
            put_num(fp, p->hline);
            fprintf(fp, " %s offset 0,0.6 textcolor rgb '#aa0000' font ',9' noenhanced front\n",
                    p->hline_label_left ? "left" : "right");
        }
    }
    bool cut = lower_bound_cut(p);
    if (cut)
        fputs("set label 'an interval reaching 0 or below: its lower bound is not drawn "
              "(log axis; the .dat holds it)' at graph 0.01, graph 0.03 left font ',8' "
              "textcolor rgb '#555555' noenhanced\n",
              fp);
    if (p->n_series == 0) {
        fputs("set label 'no data' at graph 0.5, graph 0.5 center\nunset key\n"
              "plot [0:1] [0:1] NaN notitle\n",
              fp);
        return;
    }
    fputs("plot ", fp);
    size_t bar_j = 0, ours_j = 0, paper_j = 0;
    for (size_t j = 0; j < p->n_series; j++) {
        const cz_gp_series *s = &p->series[j];
        if (j)
            fputs(", \\\n     ", fp);
        put_str(fp, dat);
        fprintf(fp, " index %d", (*block)++);
        switch (s->style) {
        case CZ_GP_LINES: fputs(" using 1:2 with lines lw 2", fp); break;
        case CZ_GP_LINESPOINTS: fputs(" using 1:2 with linespoints lw 2 ps 0.8", fp); break;
        case CZ_GP_STEPS: fputs(" using 1:2 with steps lw 2", fp); break;
        case CZ_GP_POINTS: fputs(" using 1:2 with points ps 0.5", fp); break;
        case CZ_GP_ERRORLINES:
            /* a log axis cannot show a lower bound at or below 0: the whisker stops at the
             * point */
            fputs(cut ? " using 1:2:($3 > 0 ? $3 : $2):4" : " using 1:2:3:4", fp);
            fputs(" with yerrorlines lw 2 ps 0.8", fp);
            break;
        case CZ_GP_PAPER:
            fprintf(fp, " using 1:2 with points pt %d ps 2.2 lw 2.5 lc rgb '#000000'",
                    gp_paper_markers[paper_j++ % CZ_ARRAY_LEN(gp_paper_markers)]);
            break;
        case CZ_GP_BARS:
            fprintf(fp, " using ($1%+.4f):2:(%.4f) with boxes", bar_offset(bar_j, n_bars),
                    0.8 / (double)n_bars);
            bar_j++;
            break;
        case CZ_GP_BAND:
            /* the next series' colour: a band does not take a colour of its own */
            fprintf(fp, " using 1:3:4 with filledcurves fs transparent solid 0.22 noborder"
                        " lc rgb '%s'",
                    gp_colours[ours_j % CZ_ARRAY_LEN(gp_colours)]);
            break;
        case CZ_GP_FILLSTEPS:
            /* the fill without borders (a thousand steps would be striped), outlined by
             * the same steps drawn as a line */
            fprintf(fp,
                    " using 1:2 with fillsteps fs solid 0.35 noborder fc rgb '%s' notitle, \\\n"
                    "     ",
                    gp_colours[ours_j % CZ_ARRAY_LEN(gp_colours)]);
            put_str(fp, dat);
            fprintf(fp, " index %d using 1:2 with steps lw 1.5", *block - 1);
            break;
        }
        if (s->style != CZ_GP_PAPER && s->style != CZ_GP_BAND)
            put_series_style(fp, ours_j++,
                             s->style == CZ_GP_LINESPOINTS || s->style == CZ_GP_POINTS ||
                                 s->style == CZ_GP_ERRORLINES);
        if (s->axis2)
            fputs(" axes x1y2", fp);
        fputs(" title ", fp);
        put_str(fp, s->label);
    }
    fputc('\n', fp);
}

/* The figure's size in pixels: one panel is drawn larger. */
static int fig_width(const cz_gp_figure *f)
{
    return f->rows * f->cols == 1 ? 960 : GP_PANEL_W * f->cols;
}

static int fig_height(const cz_gp_figure *f)
{
    return f->rows * f->cols == 1 ? 680 : GP_PANEL_H * f->rows;
}

/* The drawing commands, written once per terminal. */
static void write_body(FILE *fp, const cz_gp_figure *f, const char *dat)
{
    int block = 0;
    size_t key_rows = 0;
    for (size_t i = 0; i < f->n_panels; i++) {
        size_t k = key_entries(&f->panels[i]);
        k = k < GP_KEY_ROWS ? k : GP_KEY_ROWS;
        key_rows = k > key_rows ? k : key_rows;
    }
    fprintf(fp, "set multiplot layout %d,%d title ", f->rows, f->cols);
    if (f->subtitle[0]) { /* the title, and under it the subtitle */
        char both[sizeof f->title + sizeof f->subtitle + 2];
        snprintf(both, sizeof both, "%s\n%s", f->title, f->subtitle);
        put_wrapped(fp, both, (size_t)fig_width(f) / 9); /* about 8 pixels a character */
    } else {
        put_str(fp, f->title);
    }
    fputs(" noenhanced\n", fp);
    for (size_t i = 0; i < f->n_panels; i++)
        write_panel(fp, &f->panels[i], dat, &block, f->n_panels == 1, f->note, key_rows);
    fputs("unset multiplot\n", fp);
}

static void write_script(FILE *fp, const cz_gp_figure *f, const char *name)
{
    char dat[512];
    snprintf(dat, sizeof dat, "%s.dat", name);
    int w = fig_width(f), h = fig_height(f);
    fprintf(fp, "# %s: drawn by `cadenza`; redraw with `gnuplot %s.gp` in this folder.\n",
            name, name);
    fputs("# The data are in ", fp);
    fprintf(fp, "%s (one block per series, in plotting order).\n", dat);
    fputs("if (!exists('out')) out = ", fp);
    put_str(fp, name);
    fputc('\n', fp);
    const char *terms[2][2] = {{"pngcairo", ".png"}, {"svg", ".svg"}};
    for (int t = 0; t < 2; t++) {
        fprintf(fp, "\nset terminal %s size %d,%d noenhanced%s\n", terms[t][0], w, h,
                t == 1 ? " dynamic background rgb 'white'" : " background rgb 'white'");
        fprintf(fp, "set output out.'%s'\n", terms[t][1]);
        write_body(fp, f, dat);
        fputs("set output\n", fp);
    }
}

/* The gnuplot to run: $CZ_GNUPLOT, else gnuplot on PATH. */
static const char *gnuplot_bin(void)
{
    const char *gp = getenv("CZ_GNUPLOT");
    return gp && *gp ? gp : "gnuplot";
}

/* Runs `gnuplot -e EXPR [SCRIPT]` in `dir`; on failure *msg holds its last stderr line (or
 * why it could not start). */
static int run_gnuplot(const char *dir, const char *expr, const char *script, char *msg,
                       size_t msg_len)
{
    const char *gp = gnuplot_bin();
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(msg, msg_len, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, msg_len, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        if (chdir(dir) != 0) {
            fprintf(stderr, "cannot enter %s: %s\n", dir, strerror(errno));
            _exit(126);
        }
        execlp(gp, gp, "-e", expr, script, (char *)NULL); /* script NULL: -e alone */
        fprintf(stderr, "cannot run '%s' (%s)\n", gp, strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    char buf[4096];
    size_t len = 0;
    for (;;) {
        char chunk[1024];
        ssize_t r = read(pfd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        /* keep the tail: the last lines name what went wrong */
        if (len + (size_t)r > sizeof buf - 1) {
            size_t drop = len + (size_t)r - (sizeof buf - 1);
            if (drop > len)
                drop = len;
            memmove(buf, buf + drop, len - drop);
            len -= drop;
        }
        size_t take = (size_t)r < sizeof buf - 1 - len ? (size_t)r : sizeof buf - 1 - len;
        memcpy(buf + len, chunk + ((size_t)r - take), take);
        len += take;
    }
    close(pfd[0]);
    buf[len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    /* gnuplot reports a bad script on stderr and may still exit 0 */
    bool complained = strstr(buf, "line ") && (strstr(buf, "rror") || strstr(buf, "invalid"));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !complained)
        return 0;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    const char *last = strrchr(buf, '\n');
    snprintf(msg, msg_len, "%.400s", len ? (last ? last + 1 : buf) : "gnuplot failed");
    return -1;
}

static cz_status write_file(const char *path, const cz_gp_figure *f, const char *name,
                            bool script, cz_err *err)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        return cz_err_set(err, CZ_EIO, "cannot write '%s': %s", path, strerror(errno));
    if (script)
        write_script(fp, f, name);
    else
        write_data(fp, f);
    if (ferror(fp) | (fclose(fp) != 0)) {
        remove(path);
        return cz_err_set(err, CZ_EIO, "cannot write '%s': %s", path, strerror(errno));
    }
    return CZ_OK;
}

cz_status cz_gp_render(const cz_gp_figure *f, const char *dir, const char *name, cz_err *err)
{
    static const char *const ext[4] = {".dat", ".gp", ".png", ".svg"};
    char fin[4][1024], tmp[4][1024];
    char tmp_name[600];
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp%ld", name, (long)getpid());
    for (int i = 0; i < 4; i++) {
        int a = snprintf(fin[i], sizeof fin[i], "%s/%s%s", dir, name, ext[i]);
        int b = snprintf(tmp[i], sizeof tmp[i], "%s/%s%s", dir, tmp_name, ext[i]);
        if (a < 0 || b < 0 || (size_t)a >= sizeof fin[i] || (size_t)b >= sizeof tmp[i])
            return cz_err_set(err, CZ_EINVAL, "figure path too long: %s/%s", dir, name);
    }
    /* gnuplot draws from the temporary data through a script that names the temporary
     * files; once it succeeded, the script is written again naming the final files, and
     * all four are renamed. */
    cz_status st = write_file(tmp[0], f, name, false, err);
    if (st != CZ_OK)
        return st;
    if ((st = write_file(tmp[1], f, tmp_name, true, err)) != CZ_OK) {
        remove(tmp[0]);
        return st;
    }
    char script_base[640];
    snprintf(script_base, sizeof script_base, "%s.gp", tmp_name);
    char msg[512], expr[700];
    snprintf(expr, sizeof expr, "out='%s'", tmp_name);
    if (run_gnuplot(dir, expr, script_base, msg, sizeof msg) != 0) {
        for (int i = 0; i < 4; i++)
            remove(tmp[i]);
        return cz_err_set(err, CZ_EIO, "%s: gnuplot: %s", fin[2], msg);
    }
    /* the kept script names the final files */
    remove(tmp[1]);
    if ((st = write_file(tmp[1], f, name, true, err)) != CZ_OK) {
        for (int i = 0; i < 4; i++)
            remove(tmp[i]);
        return st;
    }
    for (int i = 0; i < 4; i++) {
        if (rename(tmp[i], fin[i]) != 0) {
            st = cz_err_set(err, CZ_EIO, "cannot write '%s': %s", fin[i], strerror(errno));
            for (int j = 0; j < 4; j++)
                remove(j < i ? fin[j] : tmp[j]);
            return st;
        }
    }
    return CZ_OK;
}

cz_status cz_gp_available(cz_err *err)
{
    char msg[512];
    if (run_gnuplot(".", "set terminal pngcairo; set terminal svg", NULL, msg, sizeof msg) == 0)
        return CZ_OK;
    return cz_err_set(err, CZ_EIO,
                      "gnuplot cannot draw PNG (pngcairo) and SVG: %s; install it (Debian: "
                      "apt-get install gnuplot-nox) or set $CZ_GNUPLOT to its path",
                      msg);
}
