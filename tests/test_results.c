/* test_results.c - the HDF5 results file reads back, describes itself (every table's
 * description and units, enum code columns, chunked and compressed storage), and a failed
 * write leaves nothing. */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_h5.h"
#include "cz_h5read.h"
#include "cz_results.h"

/* The stages the tests' files name: a pipeline of an encoder and two autoregressive
 * stages. */
static const cz_results_stages stages = {
    .n_pipe = 3, .n_ar = 2, .pipe = {"encoder", "thinker", "talker"}, .ar = {"thinker", "talker"}};

static const char *const all_tables[] = {"requests", "timeline", "itl",  "audio",
                                         "frames",   "turns",    "steps", "gateway"};

/* Writes `m` to a fresh temporary file, named in `path` (a "/tmp/cz_test_results_XXXXXX"
 * buffer). */
static void write_tmp(cz_metrics *m, char *path)
{
    if (!m->finished)
        cz_metrics_finish(m);
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_results_write_h5(path, m, &stages, "{}", "{}", 1, &err), CZ_OK, "%s",
                 err.msg);
}

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
    cz_metrics_add_itl(m, 0, 0.5, 2);
    cz_timeline_row row = {.kv_blocks_used = 3, .running = 1, .batch_tokens = 10};
    cz_metrics_timeline(m, &row);
    cz_metrics_add_turn(m, &(cz_turn_record){.session = 7, .turn = 1, .req = 0,
                                             .outcome = CZ_REQ_COMPLETED, .end_s = 3.0});
    cz_metrics_add_turn(m, &(cz_turn_record){.session = 8, .turn = 1, .req = 1,
                                             .outcome = CZ_REQ_REJECTED, .end_s = 1.0});
    cz_metrics_finish(m);
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
    cr_assert_eq(cz_results_write_h5(path, &m, &stages, "{\"seed\":3}", "{\"completed\":1}", 3, &err),
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
    cr_assert_eq(cz_results_write_h5("/nonexistent-dir/r.h5", &m, &stages, "{}", "{}", 1, &err), CZ_EIO);
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
    row.prefix_queries = 8;
    row.prefix_hits = 9;
    row.kv_pulled_tokens = 10;
    row.kv_sent_tokens = 11;
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
    cz_metrics_gateway(m, 0.0, UINT32_MAX, 0);
    cz_metrics_gateway(m, 2.0, 12, 3);
    cz_metrics_gateway(m, 2.5, 12, 3); /* no change: no row */
    cz_metrics_gateway(m, 4.0, 11, 3);
}

/* What reaches the file is the fields and nothing else: every table is stored without
 * padding, so two runs with the same rows write the same bytes whatever garbage the
 * structs' padding held (cz_timeline_row has 4 bytes of padding; valgrind reported them
 * as uninitialised when they were written). */
Test(results, tables_store_no_padding)
{
    static const char *const tables[] = {"requests", "timeline", "itl", "audio", "frames",
                                         "turns", "steps", "gateway"};
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
        cr_assert_eq(cz_results_write_h5(path, &m, &stages, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
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
    cr_assert_eq(cz_results_write_h5(path, &m, &stages, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
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
    cr_assert_eq(cz_results_write_h5(path, &m, &stages, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "turns", H5P_DEFAULT);
    cr_assert(ds >= 0);
    /* the outcome is an enum: read back through a memory enum of the same names */
    hid_t ft = H5Dget_type(ds);
    hid_t et = H5Tget_member_type(ft, (unsigned)H5Tget_member_index(ft, "outcome"));
    hid_t ne = H5Tget_native_type(et, H5T_DIR_ASCEND);
    struct {
        uint64_t session;
        uint32_t outcome;
    } back[2];
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof back[0]);
    H5Tinsert(t, "session", 0, H5T_NATIVE_UINT64);
    H5Tinsert(t, "outcome", sizeof(uint64_t), ne);
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    cr_assert(back[0].session == 7 && back[0].outcome == CZ_REQ_COMPLETED);
    cr_assert(back[1].session == 8 && back[1].outcome == CZ_REQ_REJECTED);
    char name[32];
    cr_assert(H5Tenum_nameof(ne, &back[1].outcome, name, sizeof name) >= 0);
    cr_assert_str_eq(name, "rejected");
    H5Tclose(t);
    H5Tclose(ne);
    H5Tclose(et);
    H5Tclose(ft);
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
    cr_assert_eq(cz_results_write_h5(path, &m, &stages, "{}", "{}", 1, &err), CZ_OK, "%s", err.msg);
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
    m.acct.streams = 1;
    m.acct.frames = 5;
    m.acct.frames_rejected = 5;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL); /* the stream has no outcome */
    m.acct.streams_rejected = 1;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_OK, "%s", err.msg);
    m.acct.frames_unfinished = 1; /* one frame counted twice */
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL);
    cz_metrics_free(&m);
    /* a stage's part still open when the run ended, kept or streamed */
    for (int streaming = 0; streaming < 2; streaming++) {
        cz_metrics_init(&m, 0.0, 0);
        if (streaming)
            cz_metrics_stream(&m, NULL);
        cz_req_record r = {.session = 4, .turn = 2, .stage = 1, .outcome = CZ_REQ_PENDING};
        cz_metrics_add_request(&m, &r);
        cz_metrics_finish(&m);
        cr_assert_eq(cz_metrics_check(&m, &err), CZ_EINTERNAL);
        cr_assert(strstr(err.msg, "turn 2 of session 4 at stage 1 is still pending") != NULL,
                  "%s", err.msg);
        cz_metrics_free(&m);
    }
}

/* The names of enum type `et` by value: names[v] for v < n (NULL where none). */
static void enum_names(hid_t et, char names[][32], uint32_t n)
{
    for (uint32_t v = 0; v < n; v++) {
        hid_t ne = H5Tget_native_type(et, H5T_DIR_ASCEND);
        if (H5Tenum_nameof(ne, &v, names[v], 32) < 0)
            names[v][0] = '\0';
        H5Tclose(ne);
    }
}

/* The type of column `col` of dataset `ds` (caller closes). */
static hid_t column_type(hid_t ds, const char *col)
{
    hid_t ft = H5Dget_type(ds);
    int k = H5Tget_member_index(ft, col);
    cr_assert(k >= 0, "no column %s", col);
    hid_t mt = H5Tget_member_type(ft, (unsigned)k);
    H5Tclose(ft);
    return mt;
}

/* Every table says what a row is and gives each column its units, in column order. */
Test(results, every_table_has_a_description_and_units)
{
    cz_metrics m;
    fill_junk(&m, 0);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t n_obj = 0;
    H5G_info_t gi;
    cr_assert(H5Gget_info(f, &gi) >= 0);
    n_obj = gi.nlinks;
    cr_assert_eq(n_obj, CZ_ARRAY_LEN(all_tables), "a table this test does not know");
    for (size_t t = 0; t < CZ_ARRAY_LEN(all_tables); t++) {
        hid_t ds = H5Dopen2(f, all_tables[t], H5P_DEFAULT);
        cr_assert(ds >= 0, "%s", all_tables[t]);
        char *desc = NULL;
        hid_t a = H5Aopen(ds, "description", H5P_DEFAULT);
        cr_assert(a >= 0, "/%s has no description", all_tables[t]);
        hid_t at = H5Aget_type(a);
        cr_assert_eq(H5Tget_class(at), H5T_STRING);
        desc = calloc(H5Tget_size(at) + 1, 1);
        cr_assert(H5Aread(a, at, desc) >= 0);
        cr_assert(strlen(desc) > 20 && desc[strlen(desc) - 1] == '.', "/%s: '%s'",
                  all_tables[t], desc);
        free(desc);
        H5Tclose(at);
        H5Aclose(a);

        hid_t ft = H5Dget_type(ds);
        int nm = H5Tget_nmembers(ft);
        a = H5Aopen(ds, "units", H5P_DEFAULT);
        cr_assert(a >= 0, "/%s has no units", all_tables[t]);
        hid_t sp = H5Aget_space(a);
        cr_assert_eq(H5Sget_simple_extent_npoints(sp), nm, "/%s: units for every column",
                     all_tables[t]);
        char **units = calloc((size_t)nm, sizeof *units);
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, H5T_VARIABLE);
        cr_assert(H5Aread(a, st, units) >= 0);
        for (int i = 0; i < nm; i++) {
            char *col = H5Tget_member_name(ft, (unsigned)i);
            size_t len = strlen(col);
            cr_assert(units[i] != NULL);
            /* a column named *_s is in seconds; nothing else is */
            bool secs = len > 2 && strcmp(col + len - 2, "_s") == 0;
            cr_assert_eq(secs, strcmp(units[i], "s") == 0, "/%s.%s: units '%s'", all_tables[t],
                         col, units[i]);
            if (len > 7 && strcmp(col + len - 7, "_tokens") == 0)
                cr_assert_str_eq(units[i], "tokens", "/%s.%s", all_tables[t], col);
            hid_t mt = H5Tget_member_type(ft, (unsigned)i);
            if (H5Tget_class(mt) == H5T_ENUM)
                cr_assert_str_eq(units[i], "", "/%s.%s: an enum has no units", all_tables[t],
                                 col);
            H5Tclose(mt);
            H5free_memory(col);
            H5free_memory(units[i]);
        }
        free(units);
        H5Tclose(st);
        H5Sclose(sp);
        H5Aclose(a);
        H5Tclose(ft);
        H5Dclose(ds);
    }
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

/* Stage, class and outcome columns are HDF5 enums named as the summary names them. */
Test(results, code_columns_are_named_enums)
{
    cz_metrics m;
    fill_junk(&m, 0);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    static const struct {
        const char *table, *col;
        uint32_t n;
        const char *names[6];
    } want[] = {
        {"requests", "stage", 2, {"thinker", "talker"}},
        {"requests", "cls", 2, {"rt", "be"}},
        {"requests", "outcome", 6,
         {"pending", "completed", "rejected", "aborted", "failed", "unfinished"}},
        {"timeline", "stage", 2, {"thinker", "talker"}},
        {"itl", "stage", 2, {"thinker", "talker"}},
        {"turns", "stage", 2, {"thinker", "talker"}},
        {"turns", "cls", 2, {"rt", "be"}},
        {"turns", "outcome", 6,
         {"pending", "completed", "rejected", "aborted", "failed", "unfinished"}},
        {"steps", "stage", 3, {"encoder", "thinker", "talker"}},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(want); i++) {
        hid_t ds = H5Dopen2(f, want[i].table, H5P_DEFAULT);
        hid_t et = column_type(ds, want[i].col);
        cr_assert_eq(H5Tget_class(et), H5T_ENUM, "/%s.%s", want[i].table, want[i].col);
        cr_assert_eq(H5Tget_nmembers(et), (int)want[i].n, "/%s.%s", want[i].table, want[i].col);
        char names[8][32];
        enum_names(et, names, want[i].n);
        for (uint32_t v = 0; v < want[i].n; v++)
            cr_assert_str_eq(names[v], want[i].names[v], "/%s.%s = %u", want[i].table,
                             want[i].col, v);
        H5Tclose(et);
        H5Dclose(ds);
    }
    H5Fclose(f);
    /* the codes read back as numbers where a reader expects them (calibrate's path) */
    const char *const cols[] = {"stage", "decode_seqs"};
    double *c[2];
    size_t n;
    cz_err err;
    cr_assert_eq(cz_h5_read_columns(path, "steps", cols, 2, c, &n, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_float_eq(c[0][0], 1.0, 0);
    cr_assert_float_eq(c[1][0], 9.0, 0);
    free(c[0]);
    free(c[1]);
    const char *const oc[] = {"outcome"};
    cr_assert_eq(cz_h5_read_columns(path, "requests", oc, 1, c, &n, &err), CZ_OK, "%s", err.msg);
    cr_assert(n == 2 && c[0][0] == CZ_REQ_COMPLETED && c[0][1] == CZ_REQ_REJECTED);
    free(c[0]);
    remove(path);
    cz_metrics_free(&m);
}

/* Chunked (a few thousand rows a chunk, capped at the rows, at least 1), extendible and
 * compressed with shuffle and deflate; checked on a table of 10000 rows and on the small
 * ones. */
Test(results, tables_are_chunked_and_compressed)
{
    cr_assert_eq(cz_h5_check_filters("x", &(cz_err){0}), CZ_OK);
    cz_metrics m;
    fill_junk(&m, 0);
    for (uint32_t i = 0; i < 10000; i++)
        cz_metrics_add_itl(&m, i % 2, 0.001 * i, 1);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    for (size_t t = 0; t < CZ_ARRAY_LEN(all_tables); t++) {
        hid_t ds = H5Dopen2(f, all_tables[t], H5P_DEFAULT);
        hid_t sp = H5Dget_space(ds);
        hsize_t dims[1], maxdims[1];
        H5Sget_simple_extent_dims(sp, dims, maxdims);
        cr_assert_eq(maxdims[0], H5S_UNLIMITED, "/%s", all_tables[t]);
        hid_t dcpl = H5Dget_create_plist(ds);
        cr_assert_eq(H5Pget_layout(dcpl), H5D_CHUNKED, "/%s", all_tables[t]);
        hsize_t chunk[1];
        cr_assert_eq(H5Pget_chunk(dcpl, 1, chunk), 1);
        hsize_t want = dims[0] < CZ_H5_CHUNK_ROWS ? (dims[0] ? dims[0] : 1) : CZ_H5_CHUNK_ROWS;
        cr_assert_eq(chunk[0], want, "/%s: chunk %llu for %llu rows", all_tables[t],
                     (unsigned long long)chunk[0], (unsigned long long)dims[0]);
        bool shuffle = false, deflate = false;
        int nf = H5Pget_nfilters(dcpl);
        for (int i = 0; i < nf; i++) {
            unsigned flags, cd[4];
            size_t ncd = 4;
            char name[64];
            H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name,
                                             name, NULL);
            shuffle = shuffle || id == H5Z_FILTER_SHUFFLE;
            if (id == H5Z_FILTER_DEFLATE) {
                deflate = true;
                cr_assert(shuffle, "/%s: shuffle runs before deflate", all_tables[t]);
                cr_assert_eq(cd[0], CZ_H5_DEFLATE_LEVEL);
            }
        }
        cr_assert(shuffle && deflate, "/%s: filters", all_tables[t]);
        H5Pclose(dcpl);
        H5Sclose(sp);
        H5Dclose(ds);
    }
    /* compressed: /itl's 10000 rows take less than their 20 bytes each */
    hid_t ds = H5Dopen2(f, "itl", H5P_DEFAULT);
    cr_assert_lt(H5Dget_storage_size(ds), 10000 * 20 / 2);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
    cz_metrics_free(&m);
}

/* A run that recorded nothing writes every table with zero rows; each reads back. */
Test(results, zero_row_tables)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    for (size_t t = 0; t < CZ_ARRAY_LEN(all_tables); t++) {
        hid_t ds = H5Dopen2(f, all_tables[t], H5P_DEFAULT);
        cr_assert(ds >= 0, "%s", all_tables[t]);
        hid_t sp = H5Dget_space(ds);
        cr_assert_eq(H5Sget_simple_extent_npoints(sp), 0, "/%s", all_tables[t]);
        hid_t ft = H5Dget_type(ds);
        unsigned char buf[1];
        cr_assert(H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0, "/%s",
                  all_tables[t]);
        H5Tclose(ft);
        H5Sclose(sp);
        H5Dclose(ds);
    }
    H5Fclose(f);
    const char *const cols[] = {"stage", "start_s"};
    double *c[2];
    size_t n = 99;
    cz_err err;
    cr_assert_eq(cz_h5_read_columns(path, "steps", cols, 2, c, &n, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(n, 0);
    free(c[0]);
    free(c[1]);
    remove(path);
    cz_metrics_free(&m);
}

/* Gaps are kept per stage: equal gaps merge only within a stage, and /itl names it. */
Test(results, itl_rows_name_their_stage)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_metrics_add_itl(&m, 0, 0.02, 3);
    cz_metrics_add_itl(&m, 0, 0.02, 1); /* merges */
    cz_metrics_add_itl(&m, 1, 0.02, 5); /* the same gap at the talker: a row of its own */
    cz_metrics_add_itl(&m, 0, 0.03, 2);
    cr_assert_eq(m.n_itl, 3);
    cr_assert_eq(m.itl[0].count, 4);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "itl", H5P_DEFAULT);
    hid_t et = column_type(ds, "stage");
    hid_t ne = H5Tget_native_type(et, H5T_DIR_ASCEND);
    struct {
        double gap_s;
        uint64_t count;
        uint32_t stage;
    } back[3];
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof back[0]);
    H5Tinsert(t, "gap_s", 0, H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "count", sizeof(double), H5T_NATIVE_UINT64);
    H5Tinsert(t, "stage", 2 * sizeof(double), ne);
    cr_assert(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    static const char *const want[] = {"thinker", "talker", "thinker"};
    static const uint64_t counts[] = {4, 5, 2};
    for (int i = 0; i < 3; i++) {
        char name[32];
        cr_assert(H5Tenum_nameof(ne, &back[i].stage, name, sizeof name) >= 0);
        cr_assert_str_eq(name, want[i]);
        cr_assert_eq(back[i].count, counts[i]);
    }
    H5Tclose(t);
    H5Tclose(ne);
    H5Tclose(et);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
    /* the summary's ITL is the first stage's; each stage's its own */
    cz_summary sum;
    cz_metrics_summarize(&m, NULL, &sum);
    cr_assert_float_eq(sum.itl_ms.mean, (4 * 20.0 + 2 * 30.0) / 6, 1e-9);
    cz_stage_summary s0, s1;
    cz_stage_summarize(&m, 0, &s0);
    cz_stage_summarize(&m, 1, &s1);
    cr_assert_float_eq(s0.itl_ms.mean, sum.itl_ms.mean, 0);
    cr_assert_float_eq(s0.itl_ms.p99, sum.itl_ms.p99, 0);
    cr_assert_float_eq(s1.itl_ms.mean, 20.0, 1e-9);
    cr_assert_float_eq(s1.itl_ms.max, 20.0, 1e-9);
    cz_metrics_free(&m);
}

/* A table description that leaves out a member of its row struct is a bug. */
typedef struct three {
    uint32_t a, b;
    uint64_t c;
} three;

typedef struct flat {
    uint32_t a, b, c;
} flat;

Test(results, a_column_left_out_aborts, .signal = SIGABRT)
{
    static const cz_h5_col cols[] = {
        {"a", offsetof(flat, a), CZ_H5_U32, 0, 0, ""},
        {"c", offsetof(flat, c), CZ_H5_U32, 0, 0, "tokens"},
    };
    const cz_h5_table t = {"flat", "A test row.", sizeof(flat), cols, 2};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    cz_h5_table_type(&t, NULL, 0);
}

Test(results, a_last_column_left_out_aborts, .signal = SIGABRT)
{
    static const cz_h5_col cols[] = {
        {"a", offsetof(flat, a), CZ_H5_U32, 0, 0, ""},
        {"b", offsetof(flat, b), CZ_H5_U32, 0, 0, "tokens"},
    };
    const cz_h5_table t = {"flat", "A test row.", sizeof(flat), cols, 2};
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    cz_h5_table_type(&t, NULL, 0);
}

/* Listed out of offset order, the table keeps the listing's column order and its units
 * follow it. */
Test(results, units_follow_the_stored_column_order)
{
    static const cz_h5_col cols[] = {
        {"c", offsetof(three, c), CZ_H5_U64, 0, 0, "tokens"},
        {"a", offsetof(three, a), CZ_H5_U32, 0, 0, ""},
        {"b", offsetof(three, b), CZ_H5_U32, 0, 0, "count"},
    };
    const cz_h5_table t = {"three", "A test row.", sizeof(three), cols, 3};
    const three rows[2] = {{1, 2, 3}, {4, 5, 6}};
    char path[] = "/tmp/cz_test_results_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert(cz_h5_write_table(f, &t, NULL, 0, 2, rows) >= 0);
    hid_t ds = H5Dopen2(f, "three", H5P_DEFAULT);
    hid_t ft = H5Dget_type(ds);
    hid_t a = H5Aopen(ds, "units", H5P_DEFAULT);
    char *units[3];
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    cr_assert(H5Aread(a, st, units) >= 0);
    static const char *const want_name[] = {"c", "a", "b"};
    static const char *const want_units[] = {"tokens", "", "count"};
    for (unsigned i = 0; i < 3; i++) {
        char *name = H5Tget_member_name(ft, i);
        cr_assert_str_eq(name, want_name[i]);
        cr_assert_str_eq(units[i], want_units[i], "units of %s", name);
        H5free_memory(name);
        H5free_memory(units[i]);
    }
    three back[2];
    hid_t mt = cz_h5_table_type(&t, NULL, 0);
    cr_assert(H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    cr_assert(back[1].a == 4 && back[1].b == 5 && back[1].c == 6);
    H5Tclose(mt);
    H5Tclose(st);
    H5Aclose(a);
    H5Tclose(ft);
    H5Dclose(ds);
    H5Fclose(f);
    remove(path);
}

/* A name given twice gets its code appended (HDF5 enum names are unique). */
Test(results, repeated_enum_names_stay_distinct)
{
    static const char *const names[] = {"talker", "talker"};
    const cz_h5_enum e = {names, NULL, 2};
    hid_t t = cz_h5_enum_type(&e);
    cr_assert(t >= 0);
    char got[32];
    uint32_t v = 1;
    cr_assert(H5Tenum_nameof(t, &v, got, sizeof got) >= 0);
    cr_assert_str_eq(got, "talker#1");
    H5Tclose(t);
}

/* The gateway's rows: one per change of the cap or the live sessions, unbounded as
 * UINT32_MAX. */
Test(results, gateway_rows_at_changes)
{
    cz_metrics m;
    fill_junk(&m, 0);
    char path[] = "/tmp/cz_test_results_XXXXXX";
    write_tmp(&m, path);
    static const char *const cols[] = {"t_s", "cap", "live"};
    double *c[3];
    size_t n = 0;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_h5_read_columns(path, "gateway", cols, 3, c, &n, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(n, 3);
    cr_assert_eq(c[1][0], (double)UINT32_MAX);
    cr_assert_eq(c[0][1], 2.0);
    cr_assert_eq(c[1][1], 12.0);
    cr_assert_eq(c[2][1], 3.0);
    cr_assert_eq(c[0][2], 4.0);
    cr_assert_eq(c[1][2], 11.0);
    for (int k = 0; k < 3; k++)
        free(c[k]);
    remove(path);
    cz_metrics_free(&m);
}
