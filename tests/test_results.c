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
    cz_metrics_add_turn(m, &(cz_turn_record){.session = 7, .turn = 1, .req = 0,
                                             .outcome = CZ_REQ_COMPLETED, .end_s = 3.0});
    cz_metrics_add_turn(m, &(cz_turn_record){.session = 8, .turn = 1, .req = 1,
                                             .outcome = CZ_REQ_REJECTED, .end_s = 1.0});
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

/* The bytes of dataset `name` exactly as stored (read with its own file type, so HDF5
 * converts nothing); *size gets their count. Caller frees. */
static unsigned char *stored_bytes(hid_t f, const char *name, size_t *size)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    cr_assert(ds >= 0, "%s", name);
    hid_t ft = H5Dget_type(ds);
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    size_t elem = H5Tget_size(ft);
    /* no padding: the stored row is its members back to back */
    size_t members = 0;
    for (int i = 0; i < H5Tget_nmembers(ft); i++) {
        hid_t mt = H5Tget_member_type(ft, (unsigned)i);
        members += H5Tget_size(mt);
        H5Tclose(mt);
    }
    cr_assert_eq(elem, members, "/%s stores %zu bytes a row for %zu bytes of fields", name,
                 elem, members);
    *size = elem * (size_t)n;
    unsigned char *buf = malloc(*size ? *size : 1);
    cr_assert(n == 0 || H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Sclose(sp);
    H5Tclose(ft);
    H5Dclose(ds);
    return buf;
}

/* Fills `m` with one row of each table from structs whose every byte (padding included)
 * was first set to `junk`, as rows built on the stack hold whatever was there. */
static void fill_junk(cz_metrics *m, unsigned char junk)
{
    fill(m);
    cz_timeline_row row;
    memset(&row, junk, sizeof row);
    row.t_s = 0.5;
    row.stage = 0;
    row.replica = 1;
    row.kv_blocks_used = 2;
    row.kv_blocks_idle = 3;
    row.host_kv_tokens = 4;
    row.running = 5;
    row.waiting = 6;
    row.batch_tokens = 7;
    cz_metrics_timeline(m, &row);
    cz_audio_record a;
    memset(&a, junk, sizeof a);
    a.session = 1;
    a.turn = a.barged = a.continuous = a.underruns = a.chunks = 0;
    a.ready_s = a.speech_start_s = a.first_audio_s = a.last_audio_s = 1.0;
    a.audio_s = a.heard_s = a.max_underrun_s = a.end_s = 2.0;
    cz_metrics_add_audio(m, &a);
    cz_frame_record fr;
    memset(&fr, junk, sizeof fr);
    fr.stream = fr.frame = fr.empty = fr.missed = 1;
    fr.tick_s = fr.done_s = fr.latency_s = 0.25;
    cz_metrics_add_frame(m, &fr);
    cz_step_record st;
    memset(&st, junk, sizeof st);
    st.start_s = 1.0;
    st.end_s = 1.5;
    st.build_s = 1e-5;
    st.kernel_s = 0.4;
    st.predicted_s = 0.3;
    st.prefill_tokens = 64;
    st.prefill_attn_ctx = 2080;
    st.decode_ctx_tokens = 900;
    st.replica = 2;
    st.stage = 1;
    st.prefill_seqs = 1;
    st.decode_seqs = 9;
    st.sampled = 10;
    st.device = 0;
    cz_metrics_add_step(m, &st);
}

/* What reaches the file is the fields and nothing else: every table is stored without
 * padding, so two runs with the same rows write the same bytes whatever garbage the
 * structs' padding held (cz_timeline_row has 4 trailing bytes; valgrind reported them
 * as uninitialised when they were written). */
Test(results, tables_store_no_padding)
{
    static const char *const tables[] = {"requests", "timeline", "itl", "audio", "frames",
                                         "steps"};
    unsigned char *bytes[2][CZ_ARRAY_LEN(tables)];
    size_t sizes[2][CZ_ARRAY_LEN(tables)];
    for (int k = 0; k < 2; k++) {
        cz_metrics m;
        fill_junk(&m, k ? 0xA5 : 0x00);
        char path[] = "/tmp/cz_test_results_XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        close(fd);
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(cz_results_write_h5(path, &m, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        cr_assert(f >= 0);
        for (size_t t = 0; t < CZ_ARRAY_LEN(tables); t++)
            bytes[k][t] = stored_bytes(f, tables[t], &sizes[k][t]);
        H5Fclose(f);
        remove(path);
        cz_metrics_free(&m);
    }
    for (size_t t = 0; t < CZ_ARRAY_LEN(tables); t++) {
        cr_assert_eq(sizes[0][t], sizes[1][t]);
        cr_assert(sizes[0][t] > 0, "/%s is empty", tables[t]);
        cr_assert(memcmp(bytes[0][t], bytes[1][t], sizes[0][t]) == 0,
                  "/%s: the stored bytes depend on the structs' padding", tables[t]);
        free(bytes[0][t]);
        free(bytes[1][t]);
    }
}

/* The packed tables read back field by field into the C structs. */
Test(results, timeline_reads_back)
{
    cz_metrics m;
    fill_junk(&m, 0x5A);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5(path, &m, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "timeline", H5P_DEFAULT);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_timeline_row));
    H5Tinsert(t, "t_s", HOFFSET(cz_timeline_row, t_s), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "host_kv_tokens", HOFFSET(cz_timeline_row, host_kv_tokens), H5T_NATIVE_UINT64);
    H5Tinsert(t, "batch_tokens", HOFFSET(cz_timeline_row, batch_tokens), H5T_NATIVE_UINT32);
    cz_timeline_row back[2];
    memset(back, 0, sizeof back);
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    cr_assert_eq(back[0].batch_tokens, 10);
    cr_assert_float_eq(back[1].t_s, 0.5, 0);
    cr_assert_eq(back[1].host_kv_tokens, 4);
    cr_assert_eq(back[1].batch_tokens, 7);
    H5Tclose(t);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

Test(results, turns_carry_their_outcomes)
{
    cz_metrics m;
    fill(&m);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5(path, &m, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "turns", H5P_DEFAULT);
    cr_assert(ds >= 0);
    hid_t t = H5Tcreate(H5T_COMPOUND, 2 * sizeof(uint64_t));
    H5Tinsert(t, "session", 0, H5T_NATIVE_UINT64);
    H5Tinsert(t, "outcome", sizeof(uint64_t), H5T_NATIVE_UINT64);
    uint64_t back[2][2];
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    cr_assert(back[0][0] == 7 && back[0][1] == CZ_REQ_COMPLETED);
    cr_assert(back[1][0] == 8 && back[1][1] == CZ_REQ_REJECTED);
    H5Tclose(t);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

/* The engine's /steps rows read back by name: the shape, the times and the prediction. */
Test(results, steps_read_back)
{
    cz_metrics m;
    fill_junk(&m, 0x3C);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5(path, &m, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "steps", H5P_DEFAULT);
    cr_assert(ds >= 0);
    hid_t t = H5Tcreate(H5T_COMPOUND, 2 * sizeof(double) + 2 * sizeof(uint64_t));
    H5Tinsert(t, "kernel_s", 0, H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "predicted_s", sizeof(double), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "decode_seqs", 2 * sizeof(double), H5T_NATIVE_UINT64);
    H5Tinsert(t, "prefill_attn_ctx", 2 * sizeof(double) + sizeof(uint64_t), H5T_NATIVE_UINT64);
    struct {
        double kernel_s, predicted_s;
        uint64_t decode_seqs, prefill_attn_ctx;
    } back;
    hid_t sp = H5Dget_space(ds);
    cr_assert_eq(H5Sget_simple_extent_npoints(sp), 1);
    H5Sclose(sp);
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &back) >= 0);
    cr_assert_float_eq(back.kernel_s, 0.4, 1e-15);
    cr_assert_float_eq(back.predicted_s, 0.3, 1e-15);
    cr_assert_eq(back.decode_seqs, 9);
    cr_assert_eq(back.prefill_attn_ctx, 2080);
    H5Tclose(t);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

/* The end-of-run check: one outcome per turn of the workload, frames and streams likewise,
 * no record left pending; each broken count is an internal error naming the numbers. */
Test(results, accounting_check)
{
    cz_metrics m;
    fill(&m);
    cz_err err;
    m.acct.requests = 2;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_OK, "%s", err.msg);
    m.acct.requests = 3; /* a turn that never got an outcome */
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL);
    cr_assert(strstr(err.msg, "3 requests in the workload") != NULL, "%s", err.msg);
    m.acct.requests = 2;
    m.req[1].outcome = CZ_REQ_PENDING; /* a stage's part still open */
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL);
    m.req[1].outcome = CZ_REQ_REJECTED;
    m.acct.streams = 1;
    m.acct.frames = 5;
    m.acct.frames_rejected = 5;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL); /* the stream has no outcome */
    m.acct.streams_rejected = 1;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_OK, "%s", err.msg);
    m.acct.frames_unfinished = 1; /* one frame counted twice */
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL);
    cz_metrics_free(&m);
}
