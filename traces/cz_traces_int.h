/* cz_traces_int.h - internals shared inside traces/: the line and CSV scanners the
 * readers use, one entry point per format, and the workload copy helpers the transforms
 * and cz_trace_read use. Not part of the public API. */
#ifndef CZ_TRACES_INT_H
#define CZ_TRACES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_traces.h"
#include "cz_workload.h"

/* Bound on every time a workload holds, in seconds (about 31,700 years): what cadenza's own
 * files accept, so that whatever a reader takes in converts and reads back. */
#define CZ_MAX_TIME_S 1e12

/* ---- line scanner ---------------------------------------------------------------- */

/* A text file read a line at a time into one reused buffer. */
typedef struct cz__lines {
    const char *path; /* as given by the caller; names the file in messages */
    FILE *f;
    char *buf;        /* the line returned last (getline's buffer) */
    size_t cap;
    size_t line;      /* 1-based number of the line returned last */
} cz__lines;

/* Opens `path`; an error names the file when it cannot be opened. */
cz_status cz__lines_open(cz__lines *ls, const char *path, cz_err *err);
/* Closes the file and frees the buffer (safe on a scanner whose open failed). */
void cz__lines_close(cz__lines *ls);
/* *line = the next line that is not blank (NUL-terminated, without "\r\n"), with its
 * number in ls->line, or NULL at the end of the file. The text stays valid until the next
 * call (the caller may modify it). CZ_EFORMAT "file:line:col: found a NUL byte" on a line
 * that is not text, CZ_EIO on a read error. */
cz_status cz__lines_next(cz__lines *ls, char **line, cz_err *err);

/* Parses one JSONL record; on a syntax error fails with CZ_EFORMAT naming `where` (the
 * file and line) and the column. The caller deletes *out. */
cz_status cz__jsonl_parse(const char *line, const char *where, cJSON **out, cz_err *err);

/* ---- CSV ------------------------------------------------------------------------- */

/* A CSV file with a header line; fields are looked up by column name. Fields may be
 * double-quoted ("" is a quote inside quotes) but may not span lines. */
typedef struct cz__csv {
    cz__lines lines;
    char *header_line; /* owned copy of the header line, cut into the names */
    char **header;     /* column names, pointing into header_line */
    size_t n_header;
    char **fields;     /* fields of the current row, pointing into the line buffer (valid
                          until the next row) */
    size_t n_fields, cap_fields;
} cz__csv;

/* Opens `path` and splits its header line. CZ_EFORMAT when the file has no header. */
cz_status cz__csv_open(cz__csv *c, const char *path, cz_err *err);
void cz__csv_close(cz__csv *c);
/* Finds column `name` in the header: *idx is its index, or -1 when it is absent and not
 * required. A required absent column is CZ_EFORMAT listing the header's columns. */
cz_status cz__csv_column(const cz__csv *c, const char *name, bool required, int *idx,
                         cz_err *err);
/* Moves to the next data row (*more = false at the end). CZ_EFORMAT when the row has a
 * different number of fields than the header or a broken quoted field. */
cz_status cz__csv_next(cz__csv *c, bool *more, cz_err *err);
/* Text of field `idx` (a column index from cz__csv_column) of the current row. */
const char *cz__csv_field(const cz__csv *c, int idx);
/* Field `idx` as a non-negative integer that fits 32 bits ("12" or "12.0").
 * CZ_EFORMAT "file:line: field 'name': expected a non-negative integer, got '...'". */
cz_status cz__csv_u32(const cz__csv *c, int idx, uint32_t *out, cz_err *err);
/* Field `idx` as a finite number >= 0; CZ_EFORMAT as above otherwise. */
cz_status cz__csv_num(const cz__csv *c, int idx, double *out, cz_err *err);

/* ---- readers. A record reader (cz__rd) reads a trace one record at a time: azure,
 * mooncake, cadenza, and burstgpt files without session ids; cz_trace_read drains one
 * into a whole workload, and a streamed workload reads it as the run goes. ShareGPT (one
 * JSON document) and BurstGPT files with sessions (whose rows may lie anywhere) are read
 * whole. Records come in source order, arrival_s in the source's clock converted to
 * seconds, not yet shifted. Errors name the file, the line or record, the field and what
 * was expected. --------------------------------------------------------------------- */

typedef struct cz__rd {
    cz_trace_format fmt;  /* resolved, never CZ_FMT_AUTO */
    char *path;           /* owned */
    cz_trace_opts o;
    cz__csv csv;          /* azure, burstgpt */
    cz__lines ls;         /* mooncake, cadenza */
    int col[5];           /* CSV columns, -1 when absent */
    int64_t first_sec, first_ns; /* azure: the first row's time */
    bool have_first;
    uint32_t *hashes;     /* one record's hash ids */
    size_t cap_hashes;
    uint64_t dropped_failed; /* failed requests skipped so far (BurstGPT 0/0 rows) */
} cz__rd;

/* Opens `path` for reading record by record (o->format resolved) and writes the header
 * fields (source, flags, concurrency, hash_block_tokens, counters a header carries) into
 * `hdr`. *whole_only is set when the file must be read whole instead (ShareGPT, BurstGPT
 * with sessions): then nothing more is read. Close `r` in every case. */
cz_status cz__rd_open(cz__rd *r, const char *path, const cz_trace_opts *o, cz_workload *hdr,
                      bool *whole_only, cz_err *err);
/* Appends the next record to `w`: a session with its turns, or a stream (cadenza).
 * *more is false at the end of the file. */
cz_status cz__rd_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err);
void cz__rd_close(cz__rd *r);

/* Per-format halves of cz__rd_open / cz__rd_next (r->path, r->o and r->col set up). */
cz_status cz__azure_open(cz__rd *r, cz_workload *hdr, cz_err *err);
cz_status cz__azure_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err);
cz_status cz__mooncake_open(cz__rd *r, cz_workload *hdr, cz_err *err);
cz_status cz__mooncake_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err);
cz_status cz__cadenza_open(cz__rd *r, cz_workload *hdr, cz_err *err);
cz_status cz__cadenza_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err);
cz_status cz__burstgpt_open(cz__rd *r, cz_workload *hdr, bool *whole_only, cz_err *err);
cz_status cz__burstgpt_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err);

/* Whole readers: fill an empty workload `w` with the file's records (sessions ordered
 * as the format defines), w->source, the flags and the dropped counters. */
cz_status cz__read_sharegpt(const char *path, const cz_trace_opts *o, cz_workload *w,
                            cz_err *err);
cz_status cz__read_burstgpt(const char *path, const cz_trace_opts *o, cz_workload *w,
                            cz_err *err);

/* Every time of session si (read from `path`, shifted) within CZ_MAX_TIME_S, the bound
 * cadenza files hold; CZ_ERANGE naming the session, the turn and the field otherwise. */
cz_status cz__check_session_times(const cz_workload *w, uint32_t si, const char *path,
                                  cz_err *err);

/* ---- workload copies --------------------------------------------------------------- */

/* Copies the header fields (source, flags, concurrency, hash_block_tokens, counters)
 * of `src` into `dst`. */
void cz__workload_copy_header(cz_workload *dst, const cz_workload *src);
/* Appends session `si` of `src` (its name, turns and hashes) to `dst`. */
void cz__workload_copy_session(cz_workload *dst, const cz_workload *src, uint32_t si);
/* Empties a whole workload of its sessions, turns and hashes, keeping its arrays. */
void cz__workload_clear_sessions(cz_workload *w);
/* Removes the session begun last (its name, turns and hashes) from a whole workload. */
void cz__workload_pop_session(cz_workload *w);
/* Arrival time of session `si`'s first turn. */
double cz__session_first_arrival(const cz_workload *w, uint32_t si);
/* True when session si's first turn arrives in [start_s, end_s) (cz_workload_window). */
bool cz__session_in_window(const cz_workload *w, uint32_t si, double start_s, double end_s);
/* Adds by_s to the arrival times session si's timing fixes (every turn of an open session,
 * the first of a closed one). */
void cz__session_shift(cz_workload *w, uint32_t si, double by_s);
/* Fills order[0..n_sessions) with the session indices sorted by first arrival (stable:
 * ties keep workload order). */
void cz__sessions_by_arrival(const cz_workload *w, uint32_t *order);

/* Name of class `c` in configs and files ("rt", "be"); parses it back. */
const char *cz__class_name(cz_class c);
bool cz__class_parse(const char *s, cz_class *out);

#endif
