/* cz_read_burstgpt.c - BurstGPT CSV reader (HPMLL/BurstGPT; see the READMEs in
 * traces/data/burstgpt/ and traces/data/burstgpt3/).
 *
 * Both layouts are read by column name: the 6-column BurstGPT_1 file
 * (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type) and the 8-column
 * release-v2.0 file that inserts Session ID and Elapsed time. Rows with 0 request and 0
 * response tokens are failed requests: dropped and counted in dropped_failed. Without a
 * Session ID every row is a single-turn open-loop session named "row-<line>"; rows that
 * share a non-empty Session ID form one multi-turn open-loop session ordered by time,
 * with think_s = gap to the next turn - the row's Elapsed time (the source's end-to-end
 * response time), floored at 0. */
#include "cz_traces_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bg_row {
    double ts_s;      /* Timestamp, seconds on the trace clock */
    double elapsed_s; /* Elapsed time (0 without the column) */
    uint32_t in_tokens, out_tokens;
    size_t line;
    const char *sid; /* Session ID, "" when absent */
} bg_row;

typedef struct bg_group {
    size_t first, n;  /* rows [first, first + n) of the sorted row array */
    double first_ts_s;
    size_t first_line;
} bg_group;

/* Rows by session id, then time, then line; rows without an id sort by line. */
static int cmp_row(const void *pa, const void *pb)
{
    const bg_row *a = pa, *b = pb;
    int c = strcmp(a->sid, b->sid);
    if (c != 0)
        return c;
    if (a->ts_s != b->ts_s && a->sid[0] != '\0')
        return a->ts_s < b->ts_s ? -1 : 1;
    return (a->line > b->line) - (a->line < b->line);
}

/* Sessions by their first arrival, then by the line of their first row. */
static int cmp_group(const void *pa, const void *pb)
{
    const bg_group *a = pa, *b = pb;
    if (a->first_ts_s != b->first_ts_s)
        return a->first_ts_s < b->first_ts_s ? -1 : 1;
    return (a->first_line > b->first_line) - (a->first_line < b->first_line);
}

/* The columns of the header: Timestamp, Request tokens, Response tokens, Session ID and
 * Elapsed time (the last two -1 when absent; Elapsed time is required with Session ID). */
static cz_status find_columns(const cz__csv *c, int col[5], cz_err *err)
{
    cz_status st;
    if ((st = cz__csv_column(c, "Timestamp", true, &col[0], err)) != CZ_OK ||
        (st = cz__csv_column(c, "Request tokens", true, &col[1], err)) != CZ_OK ||
        (st = cz__csv_column(c, "Response tokens", true, &col[2], err)) != CZ_OK ||
        (st = cz__csv_column(c, "Session ID", false, &col[3], err)) != CZ_OK ||
        (st = cz__csv_column(c, "Elapsed time", col[3] >= 0, &col[4], err)) != CZ_OK)
        return st;
    return CZ_OK;
}

/* The next row that is not a failed request into *r (its Session ID as the field's text,
 * valid until the next row); failed rows are counted in *failed. *more false at the end. */
static cz_status next_row(cz__csv *c, const int col[5], bg_row *r, uint64_t *failed, bool *more,
                          cz_err *err)
{
    for (;;) {
        cz_status st = cz__csv_next(c, more, err);
        if (st != CZ_OK || !*more)
            return st;
        *r = (bg_row){.elapsed_s = 0.0, .line = c->lines.line, .sid = ""};
        if ((st = cz__csv_num(c, col[0], &r->ts_s, err)) != CZ_OK ||
            (st = cz__csv_u32(c, col[1], &r->in_tokens, err)) != CZ_OK ||
            (st = cz__csv_u32(c, col[2], &r->out_tokens, err)) != CZ_OK)
            return st;
        if (col[4] >= 0 && (st = cz__csv_num(c, col[4], &r->elapsed_s, err)) != CZ_OK)
            return st;
        if (col[3] >= 0)
            r->sid = cz__csv_field(c, col[3]);
        if (r->in_tokens != 0 || r->out_tokens != 0)
            return CZ_OK;
        (*failed)++;
    }
}

/* Reads every non-failed row into *rows, their Session IDs into the pool *sids (each
 * row's sid points into it once every row is read). */
static cz_status read_rows(cz__csv *c, bg_row **rows, size_t *n_rows, size_t *cap,
                           bool *has_sid, char **sids, cz_workload *w, cz_err *err)
{
    int col[5];
    cz_status st = find_columns(c, col, err);
    if (st != CZ_OK)
        return st;
    *has_sid = col[3] >= 0;
    size_t used = 0, cap_sids = 0;
    for (;;) {
        bg_row r;
        bool more;
        if ((st = next_row(c, col, &r, &w->dropped_failed, &more, err)) != CZ_OK || !more)
            break;
        size_t len = strlen(r.sid) + 1;
        cz_grow((void **)sids, &cap_sids, used + len, 1);
        memcpy(*sids + used, r.sid, len);
        r.sid = (const char *)(uintptr_t)used; /* an offset until the pool stops moving */
        used += len;
        cz_grow((void **)rows, cap, *n_rows + 1, sizeof **rows);
        (*rows)[(*n_rows)++] = r;
    }
    for (size_t i = 0; i < *n_rows; i++)
        (*rows)[i].sid = *sids + (uintptr_t)(*rows)[i].sid;
    return st;
}

cz_status cz__burstgpt_open(cz__rd *r, cz_workload *hdr, bool *whole_only, cz_err *err)
{
    cz_status st = cz__csv_open(&r->csv, r->path, err);
    if (st == CZ_OK)
        st = find_columns(&r->csv, r->col, err);
    snprintf(hdr->source, sizeof hdr->source, "burstgpt");
    hdr->arrivals_given = true;
    /* rows of one session may lie anywhere in the file: such a file is read whole */
    *whole_only = r->col[3] >= 0;
    return st;
}

cz_status cz__burstgpt_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err)
{
    CZ_ASSERT(r->col[3] < 0);
    bg_row row;
    cz_status st = next_row(&r->csv, r->col, &row, &r->dropped_failed, more, err);
    if (st != CZ_OK || !*more)
        return st;
    char name[32];
    snprintf(name, sizeof name, "row-%zu", row.line);
    cz_workload_begin_session(w, name, r->o.cls, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(w);
    t->arrival_s = row.ts_s;
    t->in_text_tokens = row.in_tokens;
    t->out_text_tokens = row.out_tokens;
    return CZ_OK;
}

cz_status cz__read_burstgpt(const char *path, const cz_trace_opts *o, cz_workload *w,
                            cz_err *err)
{
    cz__csv c;
    bg_row *rows = NULL;
    char *sids = NULL;
    bg_group *groups = NULL;
    size_t n_rows = 0, cap_rows = 0, n_groups = 0, cap_groups = 0;
    bool has_sid = false;
    cz_status st = cz__csv_open(&c, path, err);
    if (st == CZ_OK)
        st = read_rows(&c, &rows, &n_rows, &cap_rows, &has_sid, &sids, w, err);
    if (st != CZ_OK)
        goto done;
    snprintf(w->source, sizeof w->source, "burstgpt");
    w->arrivals_given = true;
    w->think_given = has_sid;
    if (n_rows > 0)
        qsort(rows, n_rows, sizeof *rows, cmp_row);
    for (size_t i = 0; i < n_rows;) {
        size_t j = i + 1;
        if (rows[i].sid[0] != '\0')
            while (j < n_rows && strcmp(rows[j].sid, rows[i].sid) == 0)
                j++;
        cz_grow((void **)&groups, &cap_groups, n_groups + 1, sizeof *groups);
        groups[n_groups++] = (bg_group){.first = i, .n = j - i, .first_ts_s = rows[i].ts_s,
                                        .first_line = rows[i].line};
        i = j;
    }
    if (n_groups > 0)
        qsort(groups, n_groups, sizeof *groups, cmp_group);
    for (size_t g = 0; g < n_groups; g++) {
        const bg_row *r = rows + groups[g].first;
        char name[32];
        const char *sname = r->sid;
        if (sname[0] == '\0') {
            snprintf(name, sizeof name, "row-%zu", r->line);
            sname = name;
        }
        cz_workload_begin_session(w, sname, o->cls, CZ_TIMING_OPEN);
        for (size_t k = 0; k < groups[g].n; k++) {
            cz_turn *t = cz_workload_add_turn(w);
            t->arrival_s = r[k].ts_s;
            t->in_text_tokens = r[k].in_tokens;
            if (o->burstgpt_new_input && k > 0) {
                uint64_t before = (uint64_t)r[k - 1].in_tokens + r[k - 1].out_tokens;
                t->in_text_tokens = r[k].in_tokens > before ? (uint32_t)(r[k].in_tokens - before) : 1;
            }
            t->out_text_tokens = r[k].out_tokens;
            if (k + 1 < groups[g].n) {
                double think_s = r[k + 1].ts_s - r[k].ts_s - r[k].elapsed_s;
                t->think_s = think_s > 0.0 ? think_s : 0.0;
            }
        }
    }
done:
    free(groups);
    free(rows);
    free(sids);
    cz__csv_close(&c);
    return st;
}
