/* h5table.c - a reader of cadenza's HDF5 files for the shell suites (no h5dump needed):
 *   h5table FILE TABLE     the compound table /TABLE as tab-separated text: a header of
 *                          its field names, then one line per row; numbers as %.9g,
 *                          strings as they are, enum codes as their names
 *   h5table FILE --attrs   the root attributes, one "name<TAB>value" line each (numbers
 *                          as %.9g, strings on one line with newlines as spaces)
 *   h5table FILE TABLE --units
 *                          the table's description, then one "column<TAB>units" line per
 *                          column from its `units` attribute
 * Exit 0, or 1 with a message when the file, the table or a field cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

static int fail(const char *what, const char *name)
{
    fprintf(stderr, "h5table: cannot %s '%s'\n", what, name);
    return 1;
}

static void print_flat(const char *s)
{
    for (; *s; s++)
        putchar(*s == '\n' || *s == '\t' ? ' ' : *s);
}

/* Prints member `i` of compound type `ct` of row `row` (raw bytes of type `ct`). */
static int print_member(hid_t ct, unsigned i, const unsigned char *row)
{
    hid_t mt = H5Tget_member_type(ct, i);
    size_t off = H5Tget_member_offset(ct, i);
    H5T_class_t cls = H5Tget_class(mt);
    int rc = 0;
    if (cls == H5T_STRING) {
        size_t n = H5Tget_size(mt);
        char *s = calloc(n + 1, 1);
        if (H5Tis_variable_str(mt) > 0) {
            const char *p;
            memcpy(&p, row + off, sizeof p);
            print_flat(p ? p : "");
        } else {
            memcpy(s, row + off, n);
            print_flat(s);
        }
        free(s);
    } else if (cls == H5T_ENUM) {
        /* its name; a code the enum does not name prints as the number */
        char name[256];
        if (H5Tenum_nameof(mt, row + off, name, sizeof name) >= 0) {
            print_flat(name);
        } else {
            hid_t base = H5Tget_super(mt);
            unsigned char buf[64] = {0};
            double v;
            memcpy(buf, row + off, H5Tget_size(mt));
            if (base < 0 || H5Tconvert(base, H5T_NATIVE_DOUBLE, 1, buf, NULL, H5P_DEFAULT) < 0)
                rc = -1;
            memcpy(&v, buf, sizeof v);
            printf("%.9g", v);
            if (base >= 0)
                H5Tclose(base);
        }
    } else if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        double v;
        hid_t tmp = H5Tcopy(mt);
        unsigned char buf[64] = {0};
        size_t n = H5Tget_size(mt);
        memcpy(buf, row + off, n);
        if (H5Tconvert(tmp, H5T_NATIVE_DOUBLE, 1, buf, NULL, H5P_DEFAULT) < 0)
            rc = -1;
        memcpy(&v, buf, sizeof v);
        printf("%.9g", v);
        H5Tclose(tmp);
    } else {
        rc = -1;
    }
    H5Tclose(mt);
    return rc;
}

static int dump_table(hid_t f, const char *name)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return fail("open the table", name);
    hid_t ft = H5Dget_type(ds);
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int nm = H5Tget_nmembers(mt);
    if (H5Tget_class(mt) != H5T_COMPOUND || nm <= 0 || n < 0)
        return fail("read a compound table from", name);
    size_t row = H5Tget_size(mt);
    unsigned char *buf = malloc(row * (size_t)(n ? n : 1));
    if (n > 0 && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return fail("read the table", name);
    for (int i = 0; i < nm; i++) {
        char *m = H5Tget_member_name(mt, (unsigned)i);
        printf("%s%s", i ? "\t" : "", m);
        H5free_memory(m);
    }
    putchar('\n');
    for (hssize_t r = 0; r < n; r++) {
        for (int i = 0; i < nm; i++) {
            if (i)
                putchar('\t');
            if (print_member(mt, (unsigned)i, buf + (size_t)r * row) < 0)
                return fail("print a field of", name);
        }
        putchar('\n');
    }
    free(buf);
    H5Sclose(sp);
    H5Tclose(mt);
    H5Tclose(ft);
    H5Dclose(ds);
    return 0;
}

static int print_units(hid_t f, const char *name)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return fail("open the table", name);
    hid_t da = H5Aopen(ds, "description", H5P_DEFAULT);
    hid_t dt = da < 0 ? -1 : H5Aget_type(da);
    hid_t ua = H5Aopen(ds, "units", H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    int nm = H5Tget_nmembers(ft);
    hid_t sp = ua < 0 ? -1 : H5Aget_space(ua);
    if (dt < 0 || H5Tget_class(dt) != H5T_STRING || sp < 0 || nm <= 0 ||
        H5Sget_simple_extent_npoints(sp) != nm)
        return fail("read the description and units of", name);
    char *desc = calloc(H5Tget_size(dt) + 1, 1);
    char **units = calloc((size_t)nm, sizeof *units);
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    if (H5Aread(da, dt, desc) < 0 || H5Aread(ua, st, units) < 0)
        return fail("read the description and units of", name);
    printf("description\t");
    print_flat(desc);
    putchar('\n');
    for (int i = 0; i < nm; i++) {
        char *m = H5Tget_member_name(ft, (unsigned)i);
        printf("%s\t%s\n", m, units[i] ? units[i] : "");
        H5free_memory(m);
        H5free_memory(units[i]);
    }
    free(units);
    free(desc);
    H5Tclose(st);
    H5Sclose(sp);
    H5Tclose(ft);
    H5Aclose(ua);
    H5Tclose(dt);
    H5Aclose(da);
    H5Dclose(ds);
    return 0;
}

static herr_t print_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    int *rc = data;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a);
    printf("%s\t", name);
    if (H5Tget_class(t) == H5T_STRING) {
        size_t n = H5Tget_size(t);
        char *s = calloc(n + 1, 1);
        if (H5Aread(a, t, s) < 0)
            *rc = 1;
        print_flat(s);
        free(s);
    } else {
        double v = 0;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
            *rc = 1;
        printf("%.9g", v);
    }
    putchar('\n');
    H5Tclose(t);
    H5Aclose(a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && strcmp(argv[3], "--units") == 0)) {
        fprintf(stderr, "usage: h5table FILE TABLE [--units] | h5table FILE --attrs\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return fail("open", argv[1]);
    int rc = 0;
    if (strcmp(argv[2], "--attrs") == 0) {
        if (H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, print_attr, &rc) < 0)
            rc = fail("list the attributes of", argv[1]);
    } else if (argc == 4) {
        rc = print_units(f, argv[2]);
    } else {
        rc = dump_table(f, argv[2]);
    }
    H5Fclose(f);
    return rc;
}
