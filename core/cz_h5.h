/* cz_h5.h - the pieces of an HDF5 file cadenza writes (the results file, cz_results.h; a
 * profile, engine/cz_profile.h): compound tables stored packed, and scalar attributes.
 * Each returns HDF5's status (negative on failure) and leaves nothing open; the caller
 * turns a failure into a cz_err naming its file and step (CZ_H5_CHECK below) and switches
 * HDF5's own error printing off first (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)). */
#ifndef CZ_H5_H
#define CZ_H5_H

#include <stdint.h>

#include <hdf5.h>

/* Inside a writer with `cz_status st`, `cz_err *err`, `const char *path` and a `fail:`
 * label: an HDF5 call that returned a negative value sets CZ_EIO naming the path, the
 * step and this file and line, and jumps to `fail`. */
#define CZ_H5_CHECK(expr, what)                                                                \
    do {                                                                                       \
        if ((expr) < 0) {                                                                      \
            st = cz_err_set(err, CZ_EIO, "%s: HDF5 failed to %s (%s:%d)", path, what,          \
                            __FILE__, __LINE__);                                               \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

/* Writes a 1-D dataset `name` of `n` rows of the in-memory compound type `type` from
 * `data`. The file stores the packed copy of the type (members back to back), and HDF5
 * converts member by member, so the padding of the C structs never reaches the file: the
 * bytes written are the fields' and nothing else. */
herr_t cz_h5_write_table(hid_t file, const char *name, hid_t type, uint64_t n, const void *data);

/* A fixed-length string type of `bytes` bytes (NUL-padded), for a compound member that
 * holds a char array; the caller closes it. */
hid_t cz_h5_str_type(size_t bytes);

/* Scalar attributes of `obj`: a string (its length, NUL-terminated), an unsigned integer,
 * a double. */
herr_t cz_h5_write_str_attr(hid_t obj, const char *name, const char *text);
herr_t cz_h5_write_u64_attr(hid_t obj, const char *name, uint64_t v);
herr_t cz_h5_write_f64_attr(hid_t obj, const char *name, double v);

#endif
