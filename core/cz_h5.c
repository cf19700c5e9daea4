/* cz_h5.c - see cz_h5.h. */
#include "cz_h5.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct reason_walk {
    char *buf;
    size_t n;
    bool found; /* a system error message was found */
} reason_walk;

static herr_t reason_cb(unsigned k, const H5E_error2_t *e, void *ctx)
{
    reason_walk *w = ctx;
    if (w->found || !e->desc)
        return 0;
    /* the file drivers' messages: "..., errno = 28, error message = 'No space left on
     * device', ..." */
    const char *m = strstr(e->desc, "error message = '");
    if (m) {
        m += strlen("error message = '");
        const char *end = strchr(m, '\'');
        size_t len = end ? (size_t)(end - m) : strlen(m);
        snprintf(w->buf, w->n, "%.*s", (int)len, m);
        w->found = true;
    } else if (k == 0) {
        snprintf(w->buf, w->n, "%s", e->desc);
    }
    return 0;
}

const char *cz_h5_reason(char *buf, size_t n)
{
    CZ_ASSERT(n > 0);
    snprintf(buf, n, "no reason given by the library");
    reason_walk w = {buf, n, false};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_cb, &w);
    return buf;
}

/* Cleanup after a failed call: the failure's error stack is taken off before the cleanup
 * calls (which clear it) and put back after them, for cz_h5_reason. */
static hid_t err_take(herr_t rc)
{
    return rc < 0 ? H5Eget_current_stack() : -1;
}

static void err_put_back(hid_t es)
{
    if (es >= 0)
        H5Eset_current_stack(es);
}

void cz_h5_no_atexit(void)
{
    H5dont_atexit();
}

static size_t col_bytes(const cz_h5_col *c)
{
    switch (c->type) {
    case CZ_H5_U32:
    case CZ_H5_ENUM: return sizeof(uint32_t);
    case CZ_H5_U64: return sizeof(uint64_t);
    case CZ_H5_F64: return sizeof(double);
    case CZ_H5_STR: return c->size;
    }
    CZ_ASSERT(!"a column of an unknown type");
    return 0;
}

static size_t col_align(const cz_h5_col *c)
{
    return c->type == CZ_H5_STR ? 1 : col_bytes(c);
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* The columns cover the row struct: no member left out, none overlapping (cz_h5.h). */
static void check_cover(const cz_h5_table *t)
{
    enum { MAX_COLS = 64 };
    CZ_ASSERT(t->n_cols >= 1 && t->n_cols <= MAX_COLS);
    size_t order[MAX_COLS];
    for (size_t i = 0; i < t->n_cols; i++) {
        size_t k = i;
        while (k > 0 && t->cols[order[k - 1]].offset > t->cols[i].offset) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    size_t end = 0, align = 1;
    for (size_t i = 0; i < t->n_cols; i++) {
        const cz_h5_col *c = &t->cols[order[i]];
        CZ_ASSERT(c->name && c->units && (c->type != CZ_H5_STR || c->size > 0));
        CZ_ASSERT(c->offset == round_up(end, col_align(c)));
        end = c->offset + col_bytes(c);
        align = col_align(c) > align ? col_align(c) : align;
    }
    CZ_ASSERT(t->row_size == round_up(end, align));
}

hid_t cz_h5_enum_type(const cz_h5_enum *e)
{
    CZ_ASSERT(e->n >= 1 && e->names);
    hid_t t = H5Tenum_create(H5T_NATIVE_UINT32);
    if (t < 0)
        return -1;
    for (uint32_t i = 0; i < e->n; i++) {
        uint32_t v = e->values ? e->values[i] : i, other;
        const char *name = e->names[i];
        char alt[256];
        if (H5Tenum_valueof(t, name, &other) >= 0) {
            snprintf(alt, sizeof alt, "%s#%u", name, v);
            name = alt;
        }
        if (H5Tenum_insert(t, name, &v) < 0) {
            H5Tclose(t);
            return -1;
        }
    }
    return t;
}

hid_t cz_h5_table_type(const cz_h5_table *t, const cz_h5_enum *enums, size_t n_enums)
{
    check_cover(t);
    hid_t ct = H5Tcreate(H5T_COMPOUND, t->row_size);
    if (ct < 0)
        return -1;
    for (size_t i = 0; i < t->n_cols; i++) {
        const cz_h5_col *c = &t->cols[i];
        hid_t mt = -1;
        bool own = true;
        switch (c->type) {
        case CZ_H5_U32: mt = H5T_NATIVE_UINT32; own = false; break;
        case CZ_H5_U64: mt = H5T_NATIVE_UINT64; own = false; break;
        case CZ_H5_F64: mt = H5T_NATIVE_DOUBLE; own = false; break;
        case CZ_H5_STR: mt = cz_h5_str_type(c->size); break;
        case CZ_H5_ENUM:
            CZ_ASSERT(c->enum_id < n_enums);
            mt = cz_h5_enum_type(&enums[c->enum_id]);
            break;
        }
        herr_t rc = mt < 0 ? -1 : H5Tinsert(ct, c->name, c->offset, mt);
        if (own && mt >= 0)
            H5Tclose(mt);
        if (rc < 0) {
            H5Tclose(ct);
            return -1;
        }
    }
    return ct;
}

/* The `units` attribute: one variable-length string per column, in the order of the
 * stored type `ftype`'s members. */
static herr_t write_units(hid_t ds, hid_t ftype, const cz_h5_table *t)
{
    enum { MAX_COLS = 64 };
    const char *units[MAX_COLS];
    int nm = H5Tget_nmembers(ftype);
    if (nm != (int)t->n_cols)
        return -1;
    for (int i = 0; i < nm; i++) {
        char *name = H5Tget_member_name(ftype, (unsigned)i);
        if (!name)
            return -1;
        units[i] = NULL;
        for (size_t k = 0; k < t->n_cols; k++)
            if (strcmp(t->cols[k].name, name) == 0)
                units[i] = t->cols[k].units;
        H5free_memory(name);
        CZ_ASSERT(units[i] != NULL);
    }
    hsize_t dims[1] = {t->n_cols};
    hid_t st = H5Tcopy(H5T_C_S1);
    if (st < 0)
        return -1;
    hid_t space = H5Tset_size(st, H5T_VARIABLE) < 0 ? -1 : H5Screate_simple(1, dims, NULL);
    hid_t a = space < 0 ? -1 : H5Acreate2(ds, "units", st, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, st, units);
    if (a >= 0)
        H5Aclose(a);
    if (space >= 0)
        H5Sclose(space);
    H5Tclose(st);
    return rc;
}

herr_t cz_h5_table_open(hid_t file, const cz_h5_table *t, const cz_h5_enum *enums,
                        size_t n_enums, uint64_t chunk_rows, cz_h5_appender *a)
{
    CZ_ASSERT(chunk_rows >= 1);
    herr_t rc = -1;
    a->ds = -1;
    a->n = 0;
    a->type = cz_h5_table_type(t, enums, n_enums);
    hid_t ftype = -1, space = -1, dcpl = -1;
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {chunk_rows};
    if (a->type < 0 || (ftype = H5Tcopy(a->type)) < 0 || H5Tpack(ftype) < 0)
        goto out;
    if ((space = H5Screate_simple(1, dims, maxdims)) < 0 ||
        (dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0 || H5Pset_chunk(dcpl, 1, chunk) < 0 ||
        H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, CZ_H5_DEFLATE_LEVEL) < 0)
        goto out;
    /* no modification times: the same run writes the same bytes */
    if (H5Pset_obj_track_times(dcpl, false) < 0)
        goto out;
    if ((a->ds = H5Dcreate2(file, t->name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        goto out;
    if (cz_h5_write_str_attr(a->ds, "description", t->description) < 0 ||
        write_units(a->ds, ftype, t) < 0)
        goto out;
    rc = 0;
out:;
    hid_t es = err_take(rc);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (rc < 0)
        cz_h5_table_close(a);
    err_put_back(es);
    return rc;
}

herr_t cz_h5_table_append(cz_h5_appender *a, uint64_t n, const void *rows)
{
    if (n == 0)
        return 0;
    hsize_t size[1] = {a->n + n}, start[1] = {a->n}, count[1] = {n};
    hid_t fspace = -1, mspace = -1;
    herr_t rc = -1;
    if (H5Dset_extent(a->ds, size) < 0 || (fspace = H5Dget_space(a->ds)) < 0 ||
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        (mspace = H5Screate_simple(1, count, NULL)) < 0 ||
        H5Dwrite(a->ds, a->type, mspace, fspace, H5P_DEFAULT, rows) < 0)
        goto out;
    a->n += n;
    rc = 0;
out:;
    hid_t es = err_take(rc);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    err_put_back(es);
    return rc;
}

herr_t cz_h5_table_close(cz_h5_appender *a)
{
    herr_t rc = 0;
    if (a->ds >= 0 && H5Dclose(a->ds) < 0)
        rc = -1;
    hid_t es = err_take(rc);
    if (a->type >= 0 && H5Tclose(a->type) < 0)
        rc = -1;
    a->ds = a->type = -1;
    err_put_back(es);
    return rc;
}

uint64_t cz_h5_chunk_rows(uint64_t n)
{
    return n < CZ_H5_CHUNK_ROWS ? (n ? n : 1) : CZ_H5_CHUNK_ROWS;
}

herr_t cz_h5_write_table(hid_t file, const cz_h5_table *t, const cz_h5_enum *enums,
                         size_t n_enums, uint64_t n, const void *rows)
{
    cz_h5_appender a;
    if (cz_h5_table_open(file, t, enums, n_enums, cz_h5_chunk_rows(n), &a) < 0)
        return -1;
    herr_t rc = cz_h5_table_append(&a, n, rows);
    hid_t es = err_take(rc);
    if (cz_h5_table_close(&a) < 0)
        rc = -1;
    err_put_back(es);
    return rc;
}

cz_status cz_h5_check_filters(const char *path, cz_err *err)
{
    static const struct {
        H5Z_filter_t id;
        const char *name;
    } need[] = {{H5Z_FILTER_DEFLATE, "deflate (zlib)"}, {H5Z_FILTER_SHUFFLE, "shuffle"}};
    for (size_t i = 0; i < CZ_ARRAY_LEN(need); i++) {
        unsigned info = 0;
        if (H5Zfilter_avail(need[i].id) <= 0 || H5Zget_filter_info(need[i].id, &info) < 0 ||
            !(info & H5Z_FILTER_CONFIG_ENCODE_ENABLED))
            return cz_err_set(err, CZ_EIO,
                              "%s: this HDF5 library cannot write the %s filter that cadenza's "
                              "tables are compressed with (install a libhdf5 built with it)",
                              path, need[i].name);
    }
    return CZ_OK;
}

hid_t cz_h5_str_type(size_t bytes)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    if (H5Tset_size(t, bytes) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

herr_t cz_h5_write_str_attr(hid_t obj, const char *name, const char *text)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    H5Tset_size(t, strlen(text) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, text);
    hid_t es = err_take(rc);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    err_put_back(es);
    return rc;
}

static herr_t write_scalar_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, v);
    hid_t es = err_take(rc);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    err_put_back(es);
    return rc;
}

herr_t cz_h5_write_u64_attr(hid_t obj, const char *name, uint64_t v)
{
    return write_scalar_attr(obj, name, H5T_NATIVE_UINT64, &v);
}

herr_t cz_h5_write_f64_attr(hid_t obj, const char *name, double v)
{
    return write_scalar_attr(obj, name, H5T_NATIVE_DOUBLE, &v);
}
