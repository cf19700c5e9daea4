/* cz_sweep_rows.h - the rows of a `cadenza sweep` by point (docs/config.md): the rows kept
 * from a previous run's output for --resume, the partial file every finished row is
 * appended to as it comes ("<output>.partial", what an interrupted run leaves), and the
 * output written in point order. Each row is its JSON line as text, kept byte for byte. */
#ifndef CZ_SWEEP_ROWS_H
#define CZ_SWEEP_ROWS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"

/* No point: what a matcher returns for a row to drop. */
#define CZ_SWEEP_NO_POINT UINT64_MAX

typedef struct cz_sweep_rows {
    uint64_t n;         /* points of the sweep */
    char **text;        /* per point: its row (a JSON object on one line, no newline), or NULL */
    uint64_t have;      /* points with a row */
    char *partial_path; /* "<output>.partial" once started, else NULL */
    FILE *partial;      /* open for appending once started */
} cz_sweep_rows;

/* Finds the point of a row read from a file: *point is its index, or CZ_SWEEP_NO_POINT
 * with *why saying why it is dropped (a static string, printed as a note). A row that
 * cannot be part of this output at all (another sweep's) is an error: CZ_EINVAL naming
 * `where` ("<file>:<line>"). */
typedef cz_status (*cz_sweep_row_match)(const cJSON *row, const char *where, const void *ctx,
                                        uint64_t *point, const char **why, cz_err *err);

/* Empty rows for `n` points. */
void cz_sweep_rows_init(cz_sweep_rows *rows, uint64_t n);

/* Frees the rows; closes the partial file (kept on disk). */
void cz_sweep_rows_free(cz_sweep_rows *rows);

/* Reads the JSON lines of `path` (`flag` names it in messages; a missing file has none)
 * and keeps each row `match` places at a point that has none yet. A line that does not
 * parse as a JSON object (a write cut by a kill) or that `match` drops is skipped with a
 * note "<path>:<line>: ...: dropped, its point runs again" on stderr unless `quiet`; an
 * empty line is skipped. *kept counts the rows kept. CZ_EIO naming `flag` and `path` when
 * it cannot be read; `match`'s errors. */
cz_status cz_sweep_rows_load(cz_sweep_rows *rows, const char *path, const char *flag,
                             cz_sweep_row_match match, const void *ctx, bool quiet,
                             uint64_t *kept, cz_err *err);

/* Starts "<out_path>.partial" holding the rows already present, in point order: written to
 * a temporary beside it and renamed over it (an older partial file stays whole until then),
 * then opened for appending. CZ_EIO naming `flag` and the file when it cannot be written. */
cz_status cz_sweep_rows_start_partial(cz_sweep_rows *rows, const char *out_path,
                                      const char *flag, cz_err *err);

/* Stores `text` (taken: freed with the rows) as the row of point `pt` (which has none) and,
 * when the partial file is started, appends it there and flushes. CZ_EIO naming the
 * partial file when the append fails (the row is still stored). */
cz_status cz_sweep_rows_put(cz_sweep_rows *rows, uint64_t pt, char *text, cz_err *err);

/* Writes every row, in point order, one per line, to the open file `f` (every point must
 * have its row). False on a write error. A cz_file_writer (cz_json.h). */
bool cz_sweep_rows_write(FILE *f, const void *rows);

/* Closes the partial file and removes it (the output that holds its rows is in place). */
void cz_sweep_rows_drop_partial(cz_sweep_rows *rows);

#endif
