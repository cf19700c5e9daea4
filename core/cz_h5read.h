/* cz_h5read.h - reading back the tables cadenza writes to HDF5 (a profile, a results
 * file): named columns of a compound table as doubles, and string attributes of the root.
 * HDF5's own error printing is switched off; failures are a cz_status naming the file,
 * the table or attribute and what was expected. */
#ifndef CZ_H5READ_H
#define CZ_H5READ_H

#include <stdbool.h>
#include <stddef.h>

#include "cz_base.h"

/* Reads the members fields[0..nf) of the 1-D compound dataset `table` of the file at
 * `path`, each converted to double (integer and float members alike, and enum members as
 * their integer codes) into cols[f]
 * (allocated here, *n rows each; the caller frees every cols[f], even when *n is 0).
 * CZ_EIO when the file cannot be opened as HDF5; CZ_EFORMAT naming the table when it is
 * missing or not a compound table, or the first field it lacks. Nothing is allocated on
 * failure. */
cz_status cz_h5_read_columns(const char *path, const char *table, const char *const *fields,
                             size_t nf, double **cols, size_t *n, cz_err *err);

/* Widens, in place, an enum member's integer code of `size` bytes (1, 2, 4 or 8; signed
 * when `sgn`) read into the first bytes of the double at *d (HDF5 converts no enum to a
 * number: a reader reads the enum's native type there) into that double. */
void cz_h5_widen_code(double *d, size_t size, bool sgn);

/* Whether the file at `path` has a dataset named `table` (false when it cannot be read). */
int cz_h5_has_table(const char *path, const char *table);

/* The string attribute `name` of the file's root (caller frees); CZ_ENOTFOUND when it has
 * none, CZ_EIO when the file cannot be read. */
cz_status cz_h5_read_str_attr(const char *path, const char *name, char **out, cz_err *err);

#endif
