/* cz_h5.c - see cz_h5.h. */
#include "cz_h5.h"

#include <string.h>

herr_t cz_h5_write_table(hid_t file, const char *name, hid_t type, uint64_t n, const void *data)
{
    hsize_t dims[1] = {n};
    hid_t ftype = H5Tcopy(type);
    if (ftype < 0)
        return -1;
    hid_t space = H5Tpack(ftype) < 0 ? -1 : H5Screate_simple(1, dims, NULL);
    if (space < 0) {
        H5Tclose(ftype);
        return -1;
    }
    hid_t ds = H5Dcreate2(file, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = ds < 0 ? -1 : 0;
    if (rc == 0 && n > 0)
        rc = H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (ds >= 0)
        H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(ftype);
    return rc;
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
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    return rc;
}

static herr_t write_scalar_attr(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, type, v);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
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
