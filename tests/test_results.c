/* test_results.c - the HDF5 results file reads back, and a failed write leaves nothing. */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cz_results.h"

static void fill(cz_metrics *m)
{
    cz_metrics_init(m, 0.0, 0);
    cz_req_record r = {.session = 7, .turn = 1, .input_tokens = 10, .output_tokens = 3,
                       .outcome = CZ_REQ_COMPLETED, .arrival_s = 1.0, .first_sched_s = 1.5,
                       .first_token_s = 2.0, .finish_s = 3.0};
    cz_metrics_add_request(m, &r);
    r.session = 8;
    r.outcome = CZ_REQ_REJECTED;
    r.first_sched_s = r.first_token_s = r.finish_s = NAN;
    cz_metrics_add_request(m, &r);
    cz_metrics_add_itl(m, 0.5, 2);
    cz_timeline_row row = {.kv_blocks_used = 3, .running = 1, .batch_tokens = 10};
    cz_metrics_timeline(m, &row);
}

Test(results, round_trip)
{
    cz_metrics m;
    fill(&m);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5(path, &m, "{\"seed\":3}", "{\"completed\":1}", 3, &err),
                 CZ_OK, "%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    cr_assert(f >= 0);
    hid_t ds = H5Dopen2(f, "requests", H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[1];
    H5Sget_simple_extent_dims(sp, dims, NULL);
    cr_assert_eq(dims[0], 2);
    /* read one column back: e2el_s = finish - arrival */
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(double));
    H5Tinsert(t, "e2el_s", 0, H5T_NATIVE_DOUBLE);
    double e2el[2];
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, e2el) >= 0);
    cr_assert_float_eq(e2el[0], 2.0, 1e-12);
    cr_assert(isnan(e2el[1]));
    H5Tclose(t);
    H5Sclose(sp);
    H5Dclose(ds);
    hid_t a = H5Aopen(f, "config", H5P_DEFAULT);
    hid_t at = H5Aget_type(a);
    char buf[64] = {0};
    cr_assert(H5Tget_size(at) < sizeof buf);
    H5Aread(a, at, buf);
    cr_assert_str_eq(buf, "{\"seed\":3}");
    H5Tclose(at);
    H5Aclose(a);
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

Test(results, failure_leaves_no_file)
{
    cz_metrics m;
    fill(&m);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5("/nonexistent-dir/r.h5", &m, "{}", "{}", 1, &err), CZ_EIO);
    cr_assert(strstr(err.msg, "/nonexistent-dir/r.h5") != NULL, "%s", err.msg);
    cr_assert(access("/nonexistent-dir/r.h5", F_OK) != 0);
    cz_metrics_free(&m);
}
