/* test_traces.c - trace readers on the real slices in traces/data/ (counts and statistics
 * stated in their READMEs or recomputed with python from the files), format detection,
 * the cadenza JSONL round trip, and malformed inputs (tests/data/traces/) whose messages
 * must name the file, the line or record, and the field. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_traces.h"
#include "cz_workload.h"

#define BURSTGPT1 "traces/data/burstgpt/BurstGPT_1_head.csv"
#define BURSTGPT3 "traces/data/burstgpt3/BurstGPT_3_head.csv"
#define AZURE_CONV "traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv"
#define AZURE_CODE "traces/data/azure_llm_2023_code/AzureLLMInferenceTrace_code.csv"
#define MOONCAKE "traces/data/mooncake_conversation/conversation_trace_head.jsonl"
#define SHAREGPT_SAMPLE "traces/data/sharegpt/sharegpt_sample.json"
#define SHAREGPT_1000 "traces/data/sharegpt/ShareGPT_V3_filtered_1000.json"
#define FIXTURES "tests/data/traces/"

/* Absolute path of a file given relative to the source root. */
static void src_path(char *buf, size_t n, const char *rel)
{
    const char *root = getenv("CZ_SOURCE_ROOT");
    cr_assert_not_null(root, "CZ_SOURCE_ROOT must point at the repository root");
    snprintf(buf, n, "%s/%s", root, rel);
}

/* Reads `rel` (with `o`, or the defaults when NULL) into a fresh workload. */
static cz_status read_rel(const char *rel, const cz_trace_opts *o, cz_workload *w, cz_err *err)
{
    char path[4096];
    src_path(path, sizeof path, rel);
    cz_workload_init(w);
    cz_err_clear(err);
    return cz_trace_read(path, o, w, err);
}

static void read_ok(const char *rel, const cz_trace_opts *o, cz_workload *w)
{
    cz_err err;
    cz_status st = read_rel(rel, o, w, &err);
    cr_assert_eq(st, CZ_OK, "%s: %s", rel, err.msg);
}

/* Reads a fixture that must fail with `status` and a message that contains every one of
 * the NULL-terminated strings that follow. */
static void read_fails(const char *rel, const cz_trace_opts *o, cz_status status, ...)
{
    cz_workload w;
    cz_err err;
    cz_status st = read_rel(rel, o, &w, &err);
    cr_assert_eq(st, status, "%s: status %d, message: %s", rel, st, err.msg);
    va_list ap;
    va_start(ap, status);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        cr_assert(strstr(err.msg, s) != NULL, "message lacks '%s': %s", s, err.msg);
    va_end(ap);
    cr_assert_eq(w.n_sessions, 0, "a failed read leaves the workload untouched");
    cz_workload_free(&w);
}

/* Writes w as cadenza JSONL into a fresh directory, reads it back (by detection) and
 * requires an identical workload and no leftover temporary file. */
static void check_round_trip(const cz_workload *w)
{
    char dir[] = "/tmp/cz_test_traces_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/w.jsonl", dir);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_trace_write_cadenza(w, path, &err), CZ_OK, "%s", err.msg);
    cz_trace_format f;
    cr_assert_eq(cz_trace_detect(path, &f, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(f, CZ_FMT_CADENZA);
    cz_workload back;
    cz_workload_init(&back);
    cr_assert_eq(cz_trace_read(path, NULL, &back, &err), CZ_OK, "%s", err.msg);
    char why[256] = "";
    cr_assert(cz_workload_equal(w, &back, why, sizeof why), "round trip differs: %s", why);
    cz_workload_free(&back);

    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int entries = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        entries += e->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(entries, 1, "only the written file remains (no temporary file)");
    unlink(path);
    rmdir(dir);
}

static uint32_t find_session(const cz_workload *w, const char *name)
{
    for (uint32_t i = 0; i < w->n_sessions; i++)
        if (strcmp(cz_workload_session_name(w, &w->sessions[i]), name) == 0)
            return i;
    cr_assert_fail("no session named %s", name);
    return UINT32_MAX;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- detection ------------------------------------------------------------------------ */

static void detect_is(const char *rel, cz_trace_format want)
{
    char path[4096];
    src_path(path, sizeof path, rel);
    cz_trace_format f = CZ_FMT_AUTO;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_trace_detect(path, &f, &err), CZ_OK, "%s: %s", rel, err.msg);
    cr_assert_eq(f, want, "%s detected as %s, expected %s", rel, cz_trace_format_name(f),
                 cz_trace_format_name(want));
}

Test(traces, detects_every_format)
{
    detect_is(BURSTGPT1, CZ_FMT_BURSTGPT);
    detect_is(BURSTGPT3, CZ_FMT_BURSTGPT);
    detect_is(AZURE_CONV, CZ_FMT_AZURE);
    detect_is(AZURE_CODE, CZ_FMT_AZURE);
    detect_is(FIXTURES "azure_reordered.csv", CZ_FMT_AZURE);
    detect_is(MOONCAKE, CZ_FMT_MOONCAKE);
    detect_is(SHAREGPT_SAMPLE, CZ_FMT_SHAREGPT);
    detect_is(SHAREGPT_1000, CZ_FMT_SHAREGPT);
    detect_is(FIXTURES "cadenza_bad_turn.jsonl", CZ_FMT_CADENZA);
}

Test(traces, unknown_format_lists_the_formats)
{
    read_fails(FIXTURES "unknown_format.csv", NULL, CZ_EFORMAT, "unknown_format.csv:1",
               "sharegpt", "burstgpt", "mooncake", "azure", "cadenza", NULL);
}

Test(traces, missing_file_is_an_input_error)
{
    read_fails(FIXTURES "no_such_file.csv", NULL, CZ_ENOTFOUND, "cannot open '",
               "no_such_file.csv' (No such file or directory)", NULL);
}

Test(traces, format_names_round_trip)
{
    const char *names[] = {"auto", "sharegpt", "burstgpt", "mooncake", "azure", "cadenza"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cz_trace_format f;
        cz_err err;
        cr_assert_eq(cz_trace_format_parse(names[i], &f, &err), CZ_OK);
        cr_assert_str_eq(cz_trace_format_name(f), names[i]);
    }
    cz_trace_format f;
    cz_err err;
    cr_assert_eq(cz_trace_format_parse("csv", &f, &err), CZ_ENOTFOUND);
    cr_assert(strstr(err.msg, "'csv'") && strstr(err.msg, "mooncake"), "%s", err.msg);
}

/* ---- BurstGPT ------------------------------------------------------------------------- */

Test(traces, burstgpt1_drops_failed_rows_and_matches_readme)
{
    cz_workload w;
    read_ok(BURSTGPT1, NULL, &w);
    cr_assert_eq(w.n_turns, 289);
    cr_assert_eq(w.n_sessions, 289);
    cr_assert_eq(w.dropped_failed, 11);
    cr_assert_str_eq(w.source, "burstgpt");
    cr_assert(w.arrivals_given && !w.think_given);
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "row-2");
    cr_assert_eq(w.turns[0].arrival_s, 0.0, "first row (Timestamp 5) moved to 0");
    cr_assert_eq(w.turns[0].in_text_tokens, 472);
    cr_assert_eq(w.turns[0].out_text_tokens, 18);
    cr_assert_eq(w.turns[288].arrival_s, 35541.0 - 5.0);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    /* README: request tokens median 419, p90 1,462 (1,461.6 interpolated), mean 590;
     * response tokens median 241, p90 556. */
    cr_assert_float_eq(ti.input_tokens_p50, 419.0, 1e-9);
    cr_assert_float_eq(ti.input_tokens_p90, 1461.6, 1e-9);
    cr_assert_float_eq(ti.input_tokens_mean, 589.5294117647059, 1e-9);
    cr_assert_float_eq(ti.output_tokens_p50, 241.0, 1e-9);
    cr_assert_float_eq(ti.output_tokens_p90, 556.2, 1e-9);
    cr_assert_float_eq(ti.duration_s, 35536.0, 1e-9);
    cr_assert_float_eq(ti.mean_rate_rps, 289.0 / 35536.0, 1e-12);
    cr_assert_float_eq(ti.burstiness_iod_1s, 1.012628876594275, 1e-9);
    cr_assert_eq(ti.dropped_failed, 11);
    cr_assert_eq(ti.turns_max, 1);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, burstgpt3_sessions_and_think_times_match_readme)
{
    cz_workload w;
    read_ok(BURSTGPT3, NULL, &w);
    cr_assert_eq(w.dropped_failed, 1);
    cr_assert_eq(w.n_turns, 299);
    /* 103 sessions with a Session ID after dropping the failed row, plus 6 API rows. */
    cr_assert_eq(w.n_sessions, 109);
    uint32_t named = 0, max_turns = 0, pairs = 0;
    double think[300];
    for (uint32_t i = 0; i < w.n_sessions; i++) {
        const cz_session *s = &w.sessions[i];
        named += strncmp(cz_workload_session_name(&w, s), "row-", 4) != 0;
        if (s->n_turns > max_turns)
            max_turns = s->n_turns;
        cr_assert_eq(s->timing, CZ_TIMING_OPEN);
        for (uint32_t k = 0; k + 1 < s->n_turns; k++) {
            const cz_turn *t = &w.turns[s->turn_off + k];
            cr_assert(t[1].arrival_s >= t[0].arrival_s, "turns ordered by time");
            think[pairs++] = t->think_s;
        }
        cr_assert_eq(w.turns[s->turn_off + s->n_turns - 1].think_s, 0.0);
    }
    cr_assert_eq(named, 103);
    cr_assert_eq(max_turns, 24);
    uint32_t big = find_session(&w, "313b905a-2252-45ca-bf14-46e87f6233dd");
    cr_assert_eq(w.sessions[big].n_turns, 24);
    /* README: 190 pairs, gap minus Elapsed time has median 115.5 s, min 2 s. */
    cr_assert_eq(pairs, 190);
    qsort(think, pairs, sizeof think[0], cmp_double);
    cr_assert_float_eq((think[94] + think[95]) / 2.0, 115.5, 1e-9);
    cr_assert_float_eq(think[0], 2.0, 1e-9);
    cr_assert(w.think_given);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_float_eq(ti.duration_s, 38974.0, 1e-9);
    cr_assert_float_eq(ti.input_tokens_p50, 298.0, 1e-9);
    cr_assert_float_eq(ti.output_tokens_p50, 103.0, 1e-9);
    cr_assert_eq(ti.turns_max, 24);
    cr_assert_float_eq(ti.turns_mean, 299.0 / 109.0, 1e-12);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, burstgpt_sessions_by_column_name)
{
    cz_workload w;
    read_ok(FIXTURES "burstgpt_sessions.csv", NULL, &w);
    cr_assert_eq(w.dropped_failed, 1);
    cr_assert_eq(w.n_sessions, 3);
    cr_assert_eq(w.n_turns, 5);
    /* Sessions in order of first arrival: a (100), row-3 (105), b (110). */
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "a");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[1]), "row-3");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[2]), "b");
    const cz_turn *a = &w.turns[w.sessions[0].turn_off];
    cr_assert_eq(w.sessions[0].n_turns, 3);
    cr_assert_eq(a[0].arrival_s, 0.0);
    cr_assert_eq(a[1].arrival_s, 20.0, "the 120 s row sorts before the 130 s row");
    cr_assert_eq(a[2].arrival_s, 30.0);
    cr_assert_eq(a[1].in_text_tokens, 12);
    cr_assert_eq(a[0].think_s, 17.0, "120 - 100 - Elapsed 3");
    cr_assert_eq(a[1].think_s, 0.0, "130 - 120 - Elapsed 40 < 0 floors at 0");
    cr_assert_eq(a[2].think_s, 0.0);
    cr_assert_eq(w.turns[w.sessions[1].turn_off].arrival_s, 5.0);
    cr_assert_eq(w.turns[w.sessions[2].turn_off].arrival_s, 10.0);
    cr_assert_eq(w.turns[w.sessions[2].turn_off].in_text_tokens, 20);
    cz_workload_free(&w);
}

Test(traces, burstgpt_new_input_only)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.burstgpt_new_input = true;
    cz_workload w;
    read_ok(FIXTURES "burstgpt_sessions.csv", &o, &w);
    const cz_turn *a = &w.turns[w.sessions[0].turn_off];
    cr_assert_eq(a[0].in_text_tokens, 10);
    cr_assert_eq(a[1].in_text_tokens, 1, "12 - (10 + 5) < 0: at least 1");
    cr_assert_eq(a[2].in_text_tokens, 10, "30 - (12 + 8)");
    cz_workload_free(&w);
}

Test(traces, burstgpt_bad_number_names_file_line_field)
{
    read_fails(FIXTURES "burstgpt_bad_number.csv", NULL, CZ_EFORMAT, "burstgpt_bad_number.csv:3",
               "'Request tokens'", "non-negative integer", "'abc'", NULL);
}

Test(traces, burstgpt_missing_column_names_it)
{
    read_fails(FIXTURES "burstgpt_missing_column.csv", NULL, CZ_EFORMAT,
               "burstgpt_missing_column.csv:1", "'Response tokens'", NULL);
}

Test(traces, burstgpt_short_row_names_line)
{
    read_fails(FIXTURES "burstgpt_short_row.csv", NULL, CZ_EFORMAT, "burstgpt_short_row.csv:4",
               "expected 6 fields", NULL);
}

/* ---- Azure ---------------------------------------------------------------------------- */

Test(traces, azure_conv_slice)
{
    cz_workload w;
    read_ok(AZURE_CONV, NULL, &w);
    cr_assert_eq(w.n_turns, 9754);
    cr_assert_eq(w.n_sessions, 9754);
    cr_assert_str_eq(w.source, "azure");
    cr_assert_eq(w.turns[0].in_text_tokens, 374);
    cr_assert_eq(w.turns[0].out_text_tokens, 44);
    /* 18:15:50.9951690 - 18:15:46.6805900 */
    cr_assert_float_eq(w.turns[1].arrival_s, 4.314579, 1e-9);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    /* 18:44:59.9377300 - 18:15:46.6805900 */
    cr_assert_float_eq(ti.duration_s, 1753.25714, 1e-7);
    cr_assert_float_eq(ti.mean_rate_rps, 9754.0 / 1753.25714, 1e-9);
    cr_assert_float_eq(ti.burstiness_iod_1s, 1.3048977479987185, 1e-9);
    cr_assert_float_eq(ti.input_tokens_p50, 1035.0, 1e-9);
    cr_assert_float_eq(ti.input_tokens_p90, 4075.0, 1e-9);
    cr_assert_float_eq(ti.output_tokens_p50, 139.5, 1e-9);
    cr_assert_float_eq(ti.output_tokens_mean, 221.09596063153577, 1e-9);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, azure_code_slice)
{
    cz_workload w;
    read_ok(AZURE_CODE, NULL, &w);
    cr_assert_eq(w.n_turns, 5100);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_float_eq(ti.duration_s, 1645.852656, 1e-7);
    cr_assert_float_eq(ti.burstiness_iod_1s, 14.335697233936317, 1e-9);
    cr_assert_float_eq(ti.input_tokens_p50, 1472.5, 1e-9);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, azure_day_month_year_boundaries)
{
    cz_workload w;
    read_ok(FIXTURES "azure_day_boundaries.csv", NULL, &w);
    const double want[] = {0.0, 0.2, 86400.1, 26524799.6, 26524800.6};
    cr_assert_eq(w.n_turns, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(w.turns[i].arrival_s, want[i], 1e-9, "row %d: %.9f", i,
                           w.turns[i].arrival_s);
    cz_workload_free(&w);
}

Test(traces, azure_columns_by_name)
{
    cz_workload w;
    read_ok(FIXTURES "azure_reordered.csv", NULL, &w);
    cr_assert_eq(w.n_turns, 2);
    cr_assert_eq(w.turns[0].in_text_tokens, 374);
    cr_assert_eq(w.turns[0].out_text_tokens, 44);
    cr_assert_float_eq(w.turns[1].arrival_s, 4.314579, 1e-9);
    cz_workload_free(&w);
}

Test(traces, azure_bad_timestamp_names_file_line_field)
{
    read_fails(FIXTURES "azure_bad_timestamp.csv", NULL, CZ_EFORMAT,
               "azure_bad_timestamp.csv:3", "'TIMESTAMP'", "2023-02-30", NULL);
}

/* ---- Mooncake ------------------------------------------------------------------------- */

Test(traces, mooncake_head_hashes)
{
    cz_workload w;
    read_ok(MOONCAKE, NULL, &w);
    cr_assert_eq(w.n_sessions, 2000);
    cr_assert_eq(w.n_turns, 2000);
    cr_assert_eq(w.hash_block_tokens, 512);
    cr_assert_eq(w.n_hash, 54559, "sum of len(hash_ids) over the 2,000 lines");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "req-1");
    const cz_turn *t0 = &w.turns[0];
    cr_assert_eq(t0->in_text_tokens, 6758);
    cr_assert_eq(t0->out_text_tokens, 500);
    cr_assert_eq(t0->hash_len, 14);
    for (uint32_t i = 0; i < 14; i++)
        cr_assert_eq(w.hash_pool[t0->hash_off + i], i);
    for (uint32_t i = 0; i < w.n_turns; i++) {
        const cz_turn *t = &w.turns[i];
        cr_assert_eq(t->hash_len, (t->in_text_tokens + 511) / 512, "line %u", i + 1);
        cr_assert_eq(w.hash_pool[t->hash_off], 0, "every request starts with hash 0");
    }
    cr_assert_eq(w.turns[1999].arrival_s, 669.0);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_float_eq(ti.input_tokens_p50, 7965.0, 1e-9);
    cr_assert_float_eq(ti.burstiness_iod_1s, 7.068925373134351, 1e-9);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, mooncake_hash_count_mismatch_names_line)
{
    read_fails(FIXTURES "mooncake_bad_hashes.jsonl", NULL, CZ_EINVAL,
               "mooncake_bad_hashes.jsonl:2", "'hash_ids'", "= 3", "got 2", NULL);
}

Test(traces, mooncake_bad_field_names_line_and_field)
{
    read_fails(FIXTURES "mooncake_bad_field.jsonl", NULL, CZ_EINVAL, "mooncake_bad_field.jsonl:2",
               "'input_length'", "a string", NULL);
}

Test(traces, mooncake_truncated_line)
{
    read_fails(FIXTURES "mooncake_truncated.jsonl", NULL, CZ_EFORMAT,
               "mooncake_truncated.jsonl:2", "not valid JSON", NULL);
}

/* ---- ShareGPT ------------------------------------------------------------------------- */

Test(traces, sharegpt_sample_uses_token_counts_and_vllm_filter)
{
    cz_workload w;
    read_ok(SHAREGPT_SAMPLE, NULL, &w);
    /* 35 entries; entry 27 has a 3-token response, below vLLM's minimum of 4. */
    cr_assert_eq(w.n_sessions, 34);
    cr_assert_eq(w.dropped_filtered, 1);
    cr_assert(!w.arrivals_given);
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "aLzORDR_0");
    cr_assert_eq(w.turns[0].in_text_tokens, 1003, "prompt_tokens from the file");
    cr_assert_eq(w.turns[0].out_text_tokens, 237, "response_tokens from the file");
    cr_assert_eq(w.turns[0].arrival_s, 0.0);
    check_round_trip(&w);
    cz_workload_free(&w);

    cz_trace_opts o = cz_trace_opts_default();
    o.sharegpt_filter = false;
    read_ok(SHAREGPT_SAMPLE, &o, &w);
    cr_assert_eq(w.n_sessions, 35);
    cr_assert_eq(w.dropped_filtered, 0);
    cr_assert_eq(w.turns[27].out_text_tokens, 3);
    cr_assert_eq(w.turns[34].in_text_tokens, 1001);
    cr_assert_eq(w.turns[34].out_text_tokens, 521);
    cz_workload_free(&w);
}

Test(traces, sharegpt_prompts_only_need_output_tokens)
{
    read_fails(SHAREGPT_1000, NULL, CZ_EINVAL, "ShareGPT_V3_filtered_1000.json: record 0",
               "'conversations[0]'", "'output_tokens'", NULL);
    cz_trace_opts o = cz_trace_opts_default();
    o.default_output_tokens = 128;
    cz_workload w;
    read_ok(SHAREGPT_1000, &o, &w);
    /* Estimated prompts (ceil(code points / 4)): one exceeds 1,024 tokens. */
    cr_assert_eq(w.n_sessions, 999);
    cr_assert_eq(w.dropped_filtered, 1);
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "wc1OQ5t_9");
    cr_assert_eq(w.turns[0].in_text_tokens, 535);
    cr_assert_eq(w.turns[1].in_text_tokens, 224);
    cr_assert_eq(w.turns[0].out_text_tokens, 128);
    check_round_trip(&w);
    cz_workload_free(&w);
}

Test(traces, sharegpt_multi_turn_and_estimator)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.sharegpt_multi_turn = true;
    o.sharegpt_filter = false;
    o.default_output_tokens = 7;
    cz_workload w;
    read_ok(FIXTURES "sharegpt_multi.json", &o, &w);
    cr_assert_eq(w.n_sessions, 2);
    cr_assert_eq(w.dropped_filtered, 1, "the empty conversation");
    const cz_session *a = &w.sessions[0];
    cr_assert_str_eq(cz_workload_session_name(&w, a), "conv-a");
    cr_assert_eq(a->n_turns, 3, "system message skipped, three exchanges");
    cr_assert_eq(a->timing, CZ_TIMING_CLOSED);
    const cz_turn *t = &w.turns[a->turn_off];
    cr_assert_eq(t[0].in_text_tokens, 2);  /* 8 chars */
    cr_assert_eq(t[0].out_text_tokens, 4); /* 16 chars */
    cr_assert_eq(t[1].in_text_tokens, 3);  /* 12 chars */
    cr_assert_eq(t[1].out_text_tokens, 1); /* 2 chars: ceil(0.5) */
    cr_assert_eq(t[2].in_text_tokens, 5, "20 code points (24 bytes)");
    cr_assert_eq(t[2].out_text_tokens, 1);
    const cz_session *b = &w.sessions[1];
    cr_assert_str_eq(cz_workload_session_name(&w, b), "record-1");
    cr_assert_eq(b->timing, CZ_TIMING_OPEN);
    cr_assert_eq(w.turns[b->turn_off].in_text_tokens, 4);
    cr_assert_eq(w.turns[b->turn_off].out_text_tokens, 7, "default output tokens");
    check_round_trip(&w);
    cz_workload_free(&w);

    /* With the filter, conv-a is cut at its first exchange (2 < 4 prompt tokens). */
    o.sharegpt_filter = true;
    read_ok(FIXTURES "sharegpt_multi.json", &o, &w);
    cr_assert_eq(w.n_sessions, 1);
    cr_assert_eq(w.dropped_filtered, 4);
    cz_workload_free(&w);

    o.chars_per_token = 2.0;
    o.sharegpt_filter = false;
    read_ok(FIXTURES "sharegpt_multi.json", &o, &w);
    cr_assert_eq(w.turns[0].in_text_tokens, 4);
    cr_assert_eq(w.turns[2].in_text_tokens, 10);
    cz_workload_free(&w);

    o.default_output_tokens = 0;
    read_fails(FIXTURES "sharegpt_multi.json", &o, CZ_EINVAL, "sharegpt_multi.json: record 1",
               "'output_tokens'", NULL);
}

Test(traces, sharegpt_truncated_json_names_line)
{
    read_fails(FIXTURES "sharegpt_truncated.json", NULL, CZ_EFORMAT, "sharegpt_truncated.json:3",
               "not valid JSON", NULL);
}

/* ---- cadenza -------------------------------------------------------------------------- */

Test(traces, cadenza_bad_turn_names_line_turn_field)
{
    read_fails(FIXTURES "cadenza_bad_turn.jsonl", NULL, CZ_EINVAL, "cadenza_bad_turn.jsonl:3",
               "turns[1]", "'arrival_s'", NULL);
}

Test(traces, cadenza_bad_version)
{
    read_fails(FIXTURES "cadenza_bad_version.jsonl", NULL, CZ_EFORMAT,
               "cadenza_bad_version.jsonl:1", "'version'", NULL);
}

Test(traces, cadenza_count_past_u64_names_field)
{
    /* 2^64 parses as a double equal to (double)UINT64_MAX: it must still be refused */
    read_fails(FIXTURES "cadenza_bad_dropped.jsonl", NULL, CZ_EINVAL,
               "cadenza_bad_dropped.jsonl:1", "'dropped_failed'", "integer in [0, 18446744073709551615]",
               NULL);
}

Test(traces, cadenza_defaults_and_classes)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.format = CZ_FMT_CADENZA;
    cz_workload w;
    cz_err err;
    cr_assert_eq(read_rel(FIXTURES "cadenza_bad_turn.jsonl", &o, &w, &err), CZ_EINVAL);
    cz_workload_free(&w);

    char dir[] = "/tmp/cz_test_cadenza_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/hand.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"format\":\"cadenza-sessions\",\"version\":1,\"source\":\"hand\","
          "\"concurrency\":4}\n"
          "\n"
          "{\"session\":\"x\",\"class\":\"be\",\"timing\":\"closed\",\"turns\":["
          "{\"arrival_s\":0.1,\"in_text_tokens\":5,\"out_text_tokens\":3,\"think_s\":2.5},"
          "{\"arrival_s\":0,\"in_text_tokens\":6,\"in_audio_tokens\":10,\"out_text_tokens\":4,"
          "\"hash_ids\":[7,8]}]}\n"
          "{\"stream\":{\"start_s\":0.5,\"frame_period_s\":0.08,\"duration_s\":60,"
          "\"tokens_in_per_frame\":2,\"tokens_out_per_frame\":1}}\n",
          f);
    fclose(f);
    cz_workload_init(&w);
    cr_assert_eq(cz_trace_read(path, NULL, &w, &err), CZ_OK, "%s", err.msg);
    cr_assert_str_eq(w.source, "hand");
    cr_assert_eq(w.concurrency, 4);
    cr_assert_eq(w.n_sessions, 1);
    cr_assert_eq(w.sessions[0].cls, CZ_CLASS_BE);
    cr_assert_eq(w.sessions[0].timing, CZ_TIMING_CLOSED);
    cr_assert_eq(w.turns[0].arrival_s, 0.1, "not shifted on reading");
    cr_assert_eq(w.turns[0].think_s, 2.5);
    cr_assert_eq(w.turns[0].barge_in_s, -1.0, "barge_in_s defaults to none");
    cr_assert_eq(cz_turn_in_tokens(&w.turns[1]), 16);
    cr_assert_eq(w.turns[1].hash_len, 2);
    cr_assert_eq(w.hash_pool[w.turns[1].hash_off + 1], 8);
    cr_assert_eq(w.n_streams, 1);
    cr_assert_eq(w.streams[0].frame_period_s, 0.08);
    cr_assert_eq(w.streams[0].cls, CZ_CLASS_RT);
    check_round_trip(&w);
    cz_workload_free(&w);
    unlink(path);
    rmdir(dir);
}

Test(traces, write_to_missing_directory_fails_cleanly)
{
    cz_workload w;
    read_ok(FIXTURES "burstgpt_sessions.csv", NULL, &w);
    cz_err err;
    cr_assert_eq(cz_trace_write_cadenza(&w, "/nonexistent-dir/w.jsonl", &err), CZ_EIO);
    cr_assert(strstr(err.msg, "/nonexistent-dir/w.jsonl") != NULL, "%s", err.msg);
    cz_workload_free(&w);
}

/* ---- appending ------------------------------------------------------------------------ */

Test(traces, reads_append_to_a_workload)
{
    cz_workload w;
    read_ok(BURSTGPT1, NULL, &w);
    char path[4096];
    src_path(path, sizeof path, FIXTURES "azure_reordered.csv");
    cz_err err;
    cr_assert_eq(cz_trace_read(path, NULL, &w, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(w.n_sessions, 291);
    cr_assert_eq(w.dropped_failed, 11);
    cr_assert_str_eq(w.source, "mixed");
    cr_assert_eq(w.turns[289].arrival_s, 0.0, "each file is shifted on its own");
    cr_assert_eq(w.turns[290].in_text_tokens, 396);
    /* A failing read leaves the workload as it was. */
    src_path(path, sizeof path, FIXTURES "burstgpt_bad_number.csv");
    cr_assert_eq(cz_trace_read(path, NULL, &w, &err), CZ_EFORMAT);
    cr_assert_eq(w.n_sessions, 291);
    cz_workload_free(&w);
}

/* ---- NUL bytes ------------------------------------------------------------------------ */

/* Copies the file at `src` to `dst` with a NUL byte inserted at the end of line `line`
 * (1-based, before its newline; past the last line: the last line), as a corrupted
 * download or a binary file renamed .csv holds. Returns the line and the 1-based column
 * the NUL lands on. */
static void copy_with_nul(const char *src, const char *dst, size_t line, size_t *at_line,
                          size_t *at_col)
{
    FILE *f = fopen(src, "rb");
    cr_assert_not_null(f, "%s", src);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    size_t start = 0, l = 1;
    for (; l < line; l++) {
        char *nl = memchr(buf + start, '\n', (size_t)n - start);
        if (!nl || (size_t)(nl - buf) + 1 >= (size_t)n)
            break; /* that was the last line */
        start = (size_t)(nl - buf) + 1;
    }
    char *nl = memchr(buf + start, '\n', (size_t)n - start);
    size_t at = nl ? (size_t)(nl - buf) : (size_t)n;
    FILE *o = fopen(dst, "wb");
    cr_assert_not_null(o, "%s", dst);
    cr_assert_eq(fwrite(buf, 1, at, o), at);
    cr_assert_eq(fputc('\0', o), 0);
    cr_assert_eq(fwrite(buf + at, 1, (size_t)n - at, o), (size_t)n - at);
    cr_assert_eq(fclose(o), 0);
    free(buf);
    *at_line = l;
    *at_col = at - start + 1;
}

/* Every reader, by detection and by name, fails on a NUL byte in the header, in the first
 * 64 KiB (which detection reads) and far past them, naming the file, line and column;
 * before, the line scanner stopped at the NUL and the Azure slice with a NUL at the end of
 * line 51 read as 50 requests. */
Test(traces, nul_byte_fails_every_reader_naming_line_and_column)
{
    char dir[] = "/tmp/cz_test_nul_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cadenza[sizeof dir + 32];
    snprintf(cadenza, sizeof cadenza, "%s/mooncake.cadenza.jsonl", dir);
    cz_workload w;
    read_ok(MOONCAKE, NULL, &w);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_trace_write_cadenza(&w, cadenza, &err), CZ_OK, "%s", err.msg);
    cz_workload_free(&w);

    char azure[4096], burst[4096], moon[4096], share[4096], share1k[4096];
    src_path(azure, sizeof azure, AZURE_CONV);
    src_path(burst, sizeof burst, BURSTGPT3);
    src_path(moon, sizeof moon, MOONCAKE);
    src_path(share, sizeof share, SHAREGPT_SAMPLE);
    src_path(share1k, sizeof share1k, SHAREGPT_1000);
    const struct {
        const char *src;
        cz_trace_format fmt;
        size_t line;
    } cases[] = {
        {azure, CZ_FMT_AZURE, 51},       {azure, CZ_FMT_AZURE, 1},
        {azure, CZ_FMT_AZURE, 9000},     {burst, CZ_FMT_BURSTGPT, 7},
        {burst, CZ_FMT_BURSTGPT, 1},     {moon, CZ_FMT_MOONCAKE, 3},
        {moon, CZ_FMT_MOONCAKE, 1900},   {share, CZ_FMT_SHAREGPT, 40},
        {share, CZ_FMT_SHAREGPT, 650},   {share1k, CZ_FMT_SHAREGPT, 1},
        {cadenza, CZ_FMT_CADENZA, 1},    {cadenza, CZ_FMT_CADENZA, 2},
        {cadenza, CZ_FMT_CADENZA, SIZE_MAX},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(cases); i++) {
        char path[sizeof dir + 32];
        snprintf(path, sizeof path, "%s/case%zu", dir, i);
        size_t line, col;
        copy_with_nul(cases[i].src, path, cases[i].line, &line, &col);
        char want[sizeof path + 96];
        snprintf(want, sizeof want, "%s:%zu:%zu: found a NUL byte, expected text", path, line,
                 col);
        for (int named = 0; named < 2; named++) {
            cz_trace_opts o = cz_trace_opts_default();
            o.format = named ? cases[i].fmt : CZ_FMT_AUTO;
            cz_workload_init(&w);
            cz_err_clear(&err);
            cz_status st = cz_trace_read(path, &o, &w, &err);
            cr_assert_eq(st, CZ_EFORMAT, "case %zu (%s line %zu, format %s): status %d, %s", i,
                         cases[i].src, line, named ? "named" : "detected", st,
                         st == CZ_OK ? "read without an error" : err.msg);
            cr_assert(strstr(err.msg, want) != NULL, "case %zu: want '%s', got '%s'", i, want,
                      err.msg);
            cr_assert_eq(w.n_sessions, 0);
            cz_workload_free(&w);
        }
        remove(path);
    }
    remove(cadenza);
    cr_assert_eq(rmdir(dir), 0, "no other file was left in %s", dir);
}

/* Regression (fuzzing): a BurstGPT trace spanning more than the 1e12 s a workload holds was
 * read, converted, and then refused when the converted file was read back. The reader now
 * refuses it, naming the row. */
Test(traces, times_beyond_what_a_workload_holds)
{
    char path[] = "/tmp/cz_test_times_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char text[] = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                        "0,m,8,4,12,c\n"
                        "2896429672960,m,7,2,9,c\n";
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    cz_trace_opts o = cz_trace_opts_default();
    o.format = CZ_FMT_BURSTGPT;
    cz_workload w;
    cz_workload_init(&w);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_trace_read(path, &o, &w, &err), CZ_ERANGE);
    cr_assert(strstr(err.msg, "row-3") && strstr(err.msg, "arrival"), "%s", err.msg);
    cz_workload_free(&w);
    remove(path);
}
