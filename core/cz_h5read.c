/* cz_h5read.c - see cz_h5read.h. */
#include "cz_h5read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

/* Opens `path` read-only into *f: CZ_ENOTFOUND (cz_err_open) for a file that cannot be
 * opened, CZ_EFORMAT for one that opens but is not HDF5. */
static cz_status open_file(const char *path, hid_t *f, cz_err *err)
{
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return cz_err_open(err, path, errno);
    fclose(probe);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    *f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*f < 0)
        return cz_err_set(err, CZ_EFORMAT, "%s: cannot open it as an HDF5 file", path);
    return CZ_OK;
}

int cz_h5_has_table(const char *path, const char *table)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return 0;
    int ok = H5Lexists(f, table, H5P_DEFAULT) > 0;
    H5Fclose(f);
    return ok;
}

cz_status cz_h5_read_columns(const char *path, const char *table, const char *const *fields,
                             size_t nf, double **cols, size_t *n, cz_err *err)
{
    *n = 0;
    for (size_t i = 0; i < nf; i++)
        cols[i] = NULL;
    hid_t f = -1;
    cz_status st = open_file(path, &f, err);
    if (st != CZ_OK)
        return st;
    hid_t d = -1, ft = -1, sp = -1;
    if (H5Lexists(f, table, H5P_DEFAULT) <= 0 || (d = H5Dopen2(f, table, H5P_DEFAULT)) < 0) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: no table /%s", path, table);
        goto out;
    }
    ft = H5Dget_type(d);
    sp = H5Dget_space(d);
    hsize_t dims[1] = {0};
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1 ||
        H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: expected a 1-D table of records", path, table);
        goto out;
    }
    for (size_t i = 0; i < nf; i++)
        if (H5Tget_member_index(ft, fields[i]) < 0) {
            st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: no column '%s'", path, table, fields[i]);
            goto out;
        }
    for (size_t i = 0; i < nf && st == CZ_OK; i++) {
        cols[i] = malloc((dims[0] ? dims[0] : 1) * sizeof(double));
        hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(double));
        H5Tinsert(mt, fields[i], 0, H5T_NATIVE_DOUBLE);
        if (dims[0] && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, cols[i]) < 0)
            st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: cannot read column '%s' as numbers", path,
                            table, fields[i]);
        H5Tclose(mt);
    }
    if (st == CZ_OK)
        *n = (size_t)dims[0];
out:
    if (st != CZ_OK)
        for (size_t i = 0; i < nf; i++) {
            free(cols[i]);
            cols[i] = NULL;
        }
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    H5Fclose(f);
    return st;
}

cz_status cz_h5_read_str_attr(const char *path, const char *name, char **out, cz_err *err)
{
    *out = NULL;
    hid_t f = -1;
    cz_status st = open_file(path, &f, err);
    if (st != CZ_OK)
        return st;
    hid_t a = -1, t = -1;
    if (H5Aexists(f, name) <= 0) {
        st = cz_err_set(err, CZ_ENOTFOUND, "%s: no attribute '%s'", path, name);
        goto out;
    }
    a = H5Aopen(f, name, H5P_DEFAULT);
    t = a >= 0 ? H5Aget_type(a) : -1;
    if (t < 0 || H5Tget_class(t) != H5T_STRING) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: attribute '%s': expected a string", path, name);
        goto out;
    }
    if (H5Tis_variable_str(t) > 0) {
        char *v = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        if (H5Aread(a, mt, &v) < 0 || !v) {
            st = cz_err_set(err, CZ_EFORMAT, "%s: attribute '%s': unreadable", path, name);
        } else {
            *out = cz_xstrdup(v);
            H5free_memory(v);
        }
        H5Tclose(mt);
    } else {
        size_t len = H5Tget_size(t);
        char *v = cz_xcalloc(len + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, len + 1);
        if (H5Aread(a, mt, v) < 0) {
            st = cz_err_set(err, CZ_EFORMAT, "%s: attribute '%s': unreadable", path, name);
            free(v);
        } else {
            *out = v;
        }
        H5Tclose(mt);
    }
out:
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    H5Fclose(f);
    return st;
}
