/* cz_h5stream.c - see cz_h5stream.h. */
#include "cz_h5stream.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "cz_h5read.h"

/* rows a block: a few of the writer's chunks (cz_h5.h, 4,096 rows), small enough that HDF5
 * converts a block in its own buffer (1 MiB) at once; larger blocks read slower */
#define DEFAULT_BLOCK 16384

void cz_h5_stream_close(cz_h5_stream *s)
{
    for (size_t f = 0; f < s->nf; f++)
        free(s->col[f]);
    free(s->buf);
    if (s->ftype >= 0)
        H5Tclose(s->ftype);
    if (s->dset >= 0)
        H5Dclose(s->dset);
    if (s->file >= 0)
        H5Fclose(s->file);
    memset(s, 0, sizeof *s);
    s->file = s->dset = s->ftype = -1;
}

cz_status cz_h5_stream_open(const char *path, const char *table, const char *const *fields,
                            size_t nf, size_t block, cz_h5_stream *s, cz_err *err)
{
    CZ_ASSERT(nf <= CZ_H5S_MAX_FIELDS);
    memset(s, 0, sizeof *s);
    s->file = s->dset = s->ftype = -1;
    s->path = path;
    s->table = table;
    s->block = block ? block : DEFAULT_BLOCK;
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return cz_err_open(err, path, errno);
    fclose(probe);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((s->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        cz_h5_stream_close(s);
        return cz_err_set(err, CZ_EFORMAT, "%s: cannot open it as an HDF5 file", path);
    }
    cz_status st = CZ_OK;
    hid_t sp = -1;
    hsize_t dims[1] = {0};
    if (H5Lexists(s->file, table, H5P_DEFAULT) <= 0 ||
        (s->dset = H5Dopen2(s->file, table, H5P_DEFAULT)) < 0) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: no table /%s", path, table);
    } else if ((s->ftype = H5Dget_type(s->dset)) < 0 || (sp = H5Dget_space(s->dset)) < 0 ||
               H5Tget_class(s->ftype) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1 ||
               H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: expected a 1-D table of records", path, table);
    }
    for (size_t f = 0; f < nf && st == CZ_OK; f++)
        if (H5Tget_member_index(s->ftype, fields[f]) < 0)
            st = cz_err_set(err, CZ_EFORMAT, "%s: /%s: no column '%s'", path, table, fields[f]);
    if (sp >= 0)
        H5Sclose(sp);
    if (st != CZ_OK) {
        cz_h5_stream_close(s);
        return st;
    }
    s->n_rows = (size_t)dims[0];
    s->nf = nf;
    for (size_t f = 0; f < nf; f++) {
        snprintf(s->fields[f], sizeof s->fields[f], "%s", fields[f]);
        s->col[f] = cz_xmalloc(s->block * sizeof(double));
    }
    s->buf = cz_xmalloc(s->block * nf * sizeof(double));
    return CZ_OK;
}

/* The memory type of a block: field f as a double at offset 8 f, or, for an enum member
 * (HDF5 converts no enum to a number), as the enum's native type, whose bytes are its base
 * integer's, at the start of its 8 bytes, widened after the read (as cz_h5read.c does). */
static hid_t block_type(const cz_h5_stream *s, size_t *code_size, bool *code_signed)
{
    hid_t mt = H5Tcreate(H5T_COMPOUND, s->nf * sizeof(double));
    if (mt < 0)
        return -1;
    for (size_t f = 0; f < s->nf; f++) {
        code_size[f] = 0;
        int k = H5Tget_member_index(s->ftype, s->fields[f]);
        hid_t et = k < 0 ? -1 : H5Tget_member_type(s->ftype, (unsigned)k);
        bool ok = et >= 0;
        if (ok && H5Tget_class(et) == H5T_ENUM) {
            hid_t ne = H5Tget_native_type(et, H5T_DIR_ASCEND);
            hid_t base = ne < 0 ? -1 : H5Tget_super(ne);
            size_t size = ne < 0 ? 0 : H5Tget_size(ne);
            ok = base >= 0 && (size == 1 || size == 2 || size == 4 || size == 8) &&
                 H5Tinsert(mt, s->fields[f], f * sizeof(double), ne) >= 0;
            code_size[f] = size;
            code_signed[f] = base >= 0 && H5Tget_sign(base) == H5T_SGN_2;
            if (base >= 0)
                H5Tclose(base);
            if (ne >= 0)
                H5Tclose(ne);
        } else if (ok) {
            ok = H5Tinsert(mt, s->fields[f], f * sizeof(double), H5T_NATIVE_DOUBLE) >= 0;
        }
        if (et >= 0)
            H5Tclose(et);
        if (!ok) {
            H5Tclose(mt);
            return -1;
        }
    }
    return mt;
}

/* Rows [start, start + n) of every field, interleaved, into buf[0 .. n nf). */
static herr_t read_block(const cz_h5_stream *s, size_t start, size_t n, double *buf)
{
    size_t code_size[CZ_H5S_MAX_FIELDS];
    bool code_signed[CZ_H5S_MAX_FIELDS];
    herr_t rc = -1;
    hid_t mt = block_type(s, code_size, code_signed), fsp = -1, msp = -1;
    hsize_t off[1] = {(hsize_t)start}, cnt[1] = {(hsize_t)n};
    if (mt < 0 || (fsp = H5Dget_space(s->dset)) < 0 ||
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
        (msp = H5Screate_simple(1, cnt, NULL)) < 0 ||
        H5Dread(s->dset, mt, msp, fsp, H5P_DEFAULT, buf) < 0)
        goto out;
    for (size_t f = 0; f < s->nf; f++) {
        if (!code_size[f])
            continue;
        for (size_t r = 0; r < n; r++)
            cz_h5_widen_code(&buf[r * s->nf + f], code_size[f], code_signed[f]);
    }
    rc = 0;
out:
    if (msp >= 0)
        H5Sclose(msp);
    if (fsp >= 0)
        H5Sclose(fsp);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

cz_status cz_h5_stream_next(cz_h5_stream *s, size_t *n, cz_err *err)
{
    *n = 0;
    size_t m = s->n_rows - s->pos;
    if (m > s->block)
        m = s->block;
    if (m == 0)
        return CZ_OK;
    if (read_block(s, s->pos, m, s->buf) < 0)
        return cz_err_set(err, CZ_EFORMAT, "%s: /%s: cannot read the columns (%s ...) as numbers",
                          s->path, s->table, s->fields[0]);
    for (size_t f = 0; f < s->nf; f++)
        for (size_t r = 0; r < m; r++)
            s->col[f][r] = s->buf[r * s->nf + f];
    s->pos += m;
    *n = m;
    return CZ_OK;
}

cz_status cz_h5_stream_value(cz_h5_stream *s, size_t f, size_t row, double *v, cz_err *err)
{
    CZ_ASSERT(f < s->nf && row < s->n_rows);
    double one[CZ_H5S_MAX_FIELDS];
    if (read_block(s, row, 1, one) < 0)
        return cz_err_set(err, CZ_EFORMAT, "%s: /%s: cannot read row %zu as numbers", s->path,
                          s->table, row);
    *v = one[f];
    return CZ_OK;
}
