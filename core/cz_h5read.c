/* cz_h5read.c - see cz_h5read.h. */
#include "cz_h5read.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
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

/* The enum codes of column `field` of dataset `d` (file type `ft`; the member is an enum)
 * as doubles into out[0..n): HDF5 converts no enum to a number, so each code is read as
 * the enum's native type, whose bytes are its base integer's, and widened here. */
void cz_h5_widen_code(double *d, size_t size, bool sgn)
{
    const unsigned char *b = (const unsigned char *)d;
    double v;
    switch (size) {
    case 1: v = sgn ? (double)*(const int8_t *)b : (double)*(const uint8_t *)b; break;
    case 2: {
        uint16_t u;
        memcpy(&u, b, 2);
        v = sgn ? (double)(int16_t)u : (double)u;
        break;
    }
    case 4: {
        uint32_t u;
        memcpy(&u, b, 4);
        v = sgn ? (double)(int32_t)u : (double)u;
        break;
    }
    default: {
        uint64_t u;
        memcpy(&u, b, 8);
        v = sgn ? (double)(int64_t)u : (double)u;
        break;
    }
    }
    *d = v;
}

static herr_t read_enum_column(hid_t d, hid_t et, const char *field, size_t n, double *out)
{
    herr_t rc = -1;
    hid_t ne = H5Tget_native_type(et, H5T_DIR_ASCEND), base = -1, mt = -1;
    if (ne < 0 || (base = H5Tget_super(ne)) < 0)
        goto out;
    size_t size = H5Tget_size(ne);
    bool sgn = H5Tget_sign(base) == H5T_SGN_2;
    if (size != 1 && size != 2 && size != 4 && size != 8)
        goto out;
    /* each code at the start of its double's 8 bytes, widened in place below */
    if ((mt = H5Tcreate(H5T_COMPOUND, sizeof(double))) < 0 || H5Tinsert(mt, field, 0, ne) < 0)
        goto out;
    if (n && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
        goto out;
    for (size_t r = 0; r < n; r++)
        cz_h5_widen_code(&out[r], size, sgn);
    rc = 0;
out:
    if (mt >= 0)
        H5Tclose(mt);
    if (base >= 0)
        H5Tclose(base);
    if (ne >= 0)
        H5Tclose(ne);
    return rc;
}

/* Column `field` of dataset `d` (compound file type `ft`) as doubles into out[0..n). */
static herr_t read_column(hid_t d, hid_t ft, const char *field, size_t n, double *out)
{
    int k = H5Tget_member_index(ft, field);
    hid_t et = k < 0 ? -1 : H5Tget_member_type(ft, (unsigned)k);
    if (et < 0)
        return -1;
    herr_t rc;
    if (H5Tget_class(et) == H5T_ENUM) {
        rc = read_enum_column(d, et, field, n, out);
    } else {
        hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(double));
        rc = mt < 0 || H5Tinsert(mt, field, 0, H5T_NATIVE_DOUBLE) < 0 ? -1 : 0;
        if (rc == 0 && n)
            rc = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0 ? -1 : 0;
        if (mt >= 0)
            H5Tclose(mt);
    }
    H5Tclose(et);
    return rc;
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
        cols[i] = cz_xmalloc((dims[0] ? dims[0] : 1) * sizeof(double));
        if (read_column(d, ft, fields[i], (size_t)dims[0], cols[i]) < 0)
            st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: cannot read column '%s' as numbers", path,
                            table, fields[i]);
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
