/* cz_h5stream.h - a table of a results file read a block of rows at a time: named columns
 * of a 1-D compound dataset as doubles (integers, floats and enum codes alike, as
 * cz_h5_read_columns reads them), so a figure drawn from a table of millions of rows holds
 * one block of it, not the whole table. */
#ifndef CZ_H5STREAM_H
#define CZ_H5STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

#define CZ_H5S_MAX_FIELDS 16

typedef struct cz_h5_stream {
    int64_t file, dset, ftype;      /* HDF5 handles (hid_t) */
    size_t n_rows;                  /* rows in the table */
    size_t pos;                     /* the next row cz_h5_stream_next reads */
    size_t block;                   /* rows a call reads at most */
    size_t nf;
    char fields[CZ_H5S_MAX_FIELDS][64];
    double *col[CZ_H5S_MAX_FIELDS]; /* the block read last: col[f][0..n) */
    double *buf;                    /* the block as read: row-major, nf doubles a row */
    const char *path, *table;       /* for messages (not copied) */
} cz_h5_stream;

/* Opens the table `table` of the file at `path` to read fields[0..nf) in blocks of at most
 * `block` rows (0: 16,384). CZ_ENOTFOUND/CZ_EFORMAT for a file that is not HDF5, CZ_EFORMAT
 * naming the table when it is missing or not a 1-D compound table, or the first field it
 * lacks. Nothing is held on failure; on success close it with cz_h5_stream_close. */
cz_status cz_h5_stream_open(const char *path, const char *table, const char *const *fields,
                            size_t nf, size_t block, cz_h5_stream *s, cz_err *err);

/* Reads the next block into s->col; *n is its rows (0 at the end). CZ_EFORMAT naming the
 * column that cannot be read as numbers. */
cz_status cz_h5_stream_next(cz_h5_stream *s, size_t *n, cz_err *err);

/* Reads field `f` of row `row` (< n_rows) into *v without moving the stream. */
cz_status cz_h5_stream_value(cz_h5_stream *s, size_t f, size_t row, double *v, cz_err *err);

void cz_h5_stream_close(cz_h5_stream *s);

#endif
