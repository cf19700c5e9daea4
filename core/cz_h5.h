/* cz_h5.h - the pieces of an HDF5 file cadenza writes (the results file, cz_results.h; a
 * profile, engine/cz_profile.h): self-describing compound tables, and scalar attributes.
 *
 * A table is described once, next to the C struct of its rows (cz_h5_table: every member's
 * name, offset, type and units), and that description both builds the HDF5 compound type
 * and writes the table's attributes, so the two cannot drift:
 *  - `description`: one sentence saying what a row is;
 *  - `units`: one variable-length string per column, in column order ("s", "tokens",
 *    "bytes", "count", ...; "" for ids, names, flags and enum columns).
 * Code columns (a stage, a class, an outcome) are HDF5 enums over a uint32, their names the
 * ones the summary and the docs use. A table is 1-D, chunked (CZ_H5_CHUNK_ROWS rows, capped
 * at the row count, at least 1), extendible (maxdims H5S_UNLIMITED, so an empty table is
 * an ordinary dataset) and compressed with the shuffle and deflate filters.
 *
 * Each function returns HDF5's status (negative on failure) and leaves nothing open; the
 * caller turns a failure into a cz_err naming its file and step (CZ_H5_CHECK below) and
 * switches HDF5's own error printing off first (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)). */
#ifndef CZ_H5_H
#define CZ_H5_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "cz_base.h"

/* Inside a writer with `cz_status st`, `cz_err *err`, `const char *path` and a `fail:`
 * label: an HDF5 call that returned a negative value sets CZ_EIO naming the path, the
 * step, the reason (cz_h5_reason: "No space left on device", ...) and this file and line,
 * and jumps to `fail`. */
#define CZ_H5_CHECK(expr, what)                                                                \
    do {                                                                                       \
        if ((expr) < 0) {                                                                      \
            char why_[160];                                                                    \
            st = cz_err_set(err, CZ_EIO, "%s: HDF5 failed to %s: %s (%s:%d)", path, what,      \
                            cz_h5_reason(why_, sizeof why_), __FILE__, __LINE__);              \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

/* Why the HDF5 call that just failed failed, from the library's error stack, written to
 * buf (n bytes) and returned: the system's message when a read or write of the file
 * failed ("No space left on device"), else the innermost error's description. */
const char *cz_h5_reason(char *buf, size_t n);

/* Keeps HDF5 from closing what is still open at the process's exit. A file whose close
 * failed (a full disk) stays half-open in the library, and its exit handler crashes on it
 * (HDF5 1.10); a program that removes such a file and exits with its error calls this
 * first, before any other HDF5 call. */
void cz_h5_no_atexit(void);

enum {
    CZ_H5_CHUNK_ROWS = 4096, /* rows per chunk of a table */
    CZ_H5_DEFLATE_LEVEL = 4  /* zlib level of the deflate filter */
};

/* The C type of a column's member. */
typedef enum cz_h5_ctype {
    CZ_H5_U32 = 0,
    CZ_H5_U64,
    CZ_H5_F64,
    CZ_H5_STR, /* char[size], NUL-padded */
    CZ_H5_ENUM /* uint32_t code, stored as an HDF5 enum named by the writer's enum `enum_id` */
} cz_h5_ctype;

/* One column: a member of the in-memory row. */
typedef struct cz_h5_col {
    const char *name;   /* the column's name in the file */
    size_t offset;      /* offsetof the member in the row struct */
    cz_h5_ctype type;
    size_t size;        /* CZ_H5_STR: bytes of the char array; 0 otherwise */
    uint32_t enum_id;   /* CZ_H5_ENUM: index into the enums passed with the table */
    const char *units;  /* "s", "tokens", "bytes", "count", ...; "" for ids, names, flags, enums */
} cz_h5_col;

/* An enum: code values[i] (i when values is NULL) is named names[i]. A name given twice
 * is stored with "#<code>" appended (HDF5 enum names are unique). */
typedef struct cz_h5_enum {
    const char *const *names;
    const uint32_t *values;
    uint32_t n;         /* >= 1 */
} cz_h5_enum;

/* A table: its dataset name, the sentence on what one row is, the row struct's size and
 * its columns in file order. The columns must cover the struct (CZ_ASSERT): in offset
 * order each one starts where the previous ended, rounded up to its own alignment, and the
 * struct ends where the last one did, rounded up to the widest column's alignment; so a
 * member left out is caught unless it would fit in the alignment padding before the next. */
typedef struct cz_h5_table {
    const char *name;
    const char *description;
    size_t row_size;
    const cz_h5_col *cols;
    size_t n_cols;
} cz_h5_table;

/* The in-memory compound type of `t`'s rows, enum columns named from enums[0..n_enums);
 * the caller closes it. Negative on failure. Asserts the columns cover the row struct and
 * name enums that exist. */
hid_t cz_h5_table_type(const cz_h5_table *t, const cz_h5_enum *enums, size_t n_enums);

/* An enum type over a native uint32 holding `e`'s names (caller closes); negative on
 * failure. */
hid_t cz_h5_enum_type(const cz_h5_enum *e);

/* Writes `n` rows of `t` from `rows` (n * t->row_size bytes) as the dataset t->name of
 * `file`, with its `description` and `units` attributes. The file stores the packed copy
 * of the type (members back to back), so the padding of the C structs never reaches it. */
herr_t cz_h5_write_table(hid_t file, const cz_h5_table *t, const cz_h5_enum *enums,
                         size_t n_enums, uint64_t n, const void *rows);

/* A table written in parts: created empty by cz_h5_table_open (with its attributes and
 * chunks of `chunk_rows` rows, >= 1), grown by cz_h5_table_append (`n` rows of
 * t->row_size bytes at its end), closed by cz_h5_table_close. A failed open leaves nothing
 * open. The file holds the same table as cz_h5_write_table's with the same chunks. */
typedef struct cz_h5_appender {
    hid_t ds, type;   /* the dataset, and the in-memory row type */
    uint64_t n;       /* rows written */
} cz_h5_appender;
herr_t cz_h5_table_open(hid_t file, const cz_h5_table *t, const cz_h5_enum *enums,
                        size_t n_enums, uint64_t chunk_rows, cz_h5_appender *a);
herr_t cz_h5_table_append(cz_h5_appender *a, uint64_t n, const void *rows);
herr_t cz_h5_table_close(cz_h5_appender *a);

/* The chunk of a table of `n` rows written at once: CZ_H5_CHUNK_ROWS, or n when fewer
 * (at least 1). */
uint64_t cz_h5_chunk_rows(uint64_t n);

/* CZ_OK when this HDF5 library can write the deflate and shuffle filters; CZ_EIO naming
 * `path` and the missing filter otherwise (checked before a file is created). */
cz_status cz_h5_check_filters(const char *path, cz_err *err);

/* A fixed-length string type of `bytes` bytes (NUL-padded), for a compound member that
 * holds a char array; the caller closes it. */
hid_t cz_h5_str_type(size_t bytes);

/* Scalar attributes of `obj`: a string (its length, NUL-terminated), an unsigned integer,
 * a double. */
herr_t cz_h5_write_str_attr(hid_t obj, const char *name, const char *text);
herr_t cz_h5_write_u64_attr(hid_t obj, const char *name, uint64_t v);
herr_t cz_h5_write_f64_attr(hid_t obj, const char *name, double v);

#endif
