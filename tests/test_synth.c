/* test_synth.c - cz_workload_from_config: synthetic lengths, arrival processes (Poisson
 * and Gamma moments), closed loop, think times, audio, barge-in, streams, transforms,
 * determinism under a seed, and config errors. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_traces.h"
#include "cz_workload.h"

#define AZURE_CONV "traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv"
#define BURSTGPT3 "traces/data/burstgpt3/BurstGPT_3_head.csv"

/* Builds the workload of the JSON text `json` with paths relative to the source root. */
static cz_status build(const char *json, uint64_t seed, cz_workload *w, cz_err *err)
{
    const char *root = getenv("CZ_SOURCE_ROOT");
    cr_assert_not_null(root, "CZ_SOURCE_ROOT must point at the repository root");
    cJSON *cfg = cJSON_Parse(json);
    cr_assert_not_null(cfg, "test config is not JSON: %s", json);
    cz_workload_init(w);
    cz_err_clear(err);
    cz_status st = cz_workload_from_config(cfg, "exp.json: workload", root, seed, w, err);
    cJSON_Delete(cfg);
    return st;
}

static void build_ok(const char *json, uint64_t seed, cz_workload *w)
{
    cz_err err;
    cz_status st = build(json, seed, w, &err);
    cr_assert_eq(st, CZ_OK, "%s", err.msg);
}

/* The config must fail with `status` and a message containing `a` and `b`. */
static void build_fails(const char *json, cz_status status, const char *a, const char *b)
{
    cz_workload w;
    cz_err err;
    cz_status st = build(json, 1, &w, &err);
    cr_assert_eq(st, status, "status %d: %s", st, err.msg);
    cr_assert(strstr(err.msg, a) != NULL, "message lacks '%s': %s", a, err.msg);
    cr_assert(!b || strstr(err.msg, b) != NULL, "message lacks '%s': %s", b, err.msg);
    cr_assert_eq(w.n_sessions, 0);
    cz_workload_free(&w);
}

/* Mean and squared coefficient of variation of the gaps between first arrivals. */
static void gap_moments(const cz_workload *w, double *mean, double *cv2)
{
    double sum = 0.0, sum2 = 0.0;
    uint32_t n = w->n_sessions - 1;
    for (uint32_t i = 0; i < n; i++) {
        double g = w->turns[w->sessions[i + 1].turn_off].arrival_s -
                   w->turns[w->sessions[i].turn_off].arrival_s;
        cr_assert(g >= 0.0, "arrivals never go back in time");
        sum += g;
        sum2 += g * g;
    }
    *mean = sum / n;
    *cv2 = (sum2 / n - *mean * *mean) / (*mean * *mean);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- arrival processes ---------------------------------------------------------------- */

Test(synth, poisson_mean_gap)
{
    cz_workload w;
    build_ok("{\"synthetic\": {\"requests\": 20000, \"input_tokens\": 100, "
             "\"output_tokens\": {\"dist\": \"fixed\", \"value\": 10}},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 4}}",
             1, &w);
    cr_assert_eq(w.n_sessions, 20000);
    cr_assert_str_eq(w.source, "synthetic");
    cr_assert(w.arrivals_given);
    cr_assert_eq(w.turns[0].arrival_s, 0.0, "the first request starts at 0");
    cr_assert_eq(w.turns[123].in_text_tokens, 100);
    cr_assert_eq(w.turns[123].out_text_tokens, 10);
    double mean, cv2;
    gap_moments(&w, &mean, &cv2);
    cr_assert(fabs(mean - 0.25) < 0.03 * 0.25, "mean gap %g, expected 0.25", mean);
    cr_assert(fabs(cv2 - 1.0) < 0.05, "exponential gaps have CV^2 1, got %g", cv2);
    cz_workload_free(&w);
}

Test(synth, gamma_burstiness_sets_gap_cv)
{
    const struct {
        double b;
        int n;
    } cases[] = {{0.5, 100000}, {4.0, 20000}};
    for (size_t i = 0; i < 2; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"synthetic\": {\"requests\": %d, \"input_tokens\": 8, \"output_tokens\": 8},"
                 " \"arrivals\": {\"process\": \"gamma\", \"rate_rps\": 10, "
                 "\"burstiness\": %g}}",
                 cases[i].n, cases[i].b);
        cz_workload w;
        build_ok(json, 7, &w);
        double mean, cv2;
        gap_moments(&w, &mean, &cv2);
        cr_assert(fabs(mean - 0.1) < 0.03 * 0.1, "b %g: mean gap %g", cases[i].b, mean);
        cr_assert(fabs(cv2 - 1.0 / cases[i].b) < 0.05 / cases[i].b,
                  "b %g: CV^2 %g, expected %g", cases[i].b, cv2, 1.0 / cases[i].b);
        cz_workload_free(&w);
    }
}

Test(synth, poisson_keeps_gaps_inside_open_sessions)
{
    cz_workload base, w;
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"}}", 1, &base);
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 0.5}}",
             1, &w);
    cr_assert_eq(w.n_turns, base.n_turns);
    for (uint32_t i = 0; i < w.n_sessions; i++) {
        const cz_session *s = &w.sessions[i];
        for (uint32_t k = 1; k < s->n_turns; k++) {
            double g = w.turns[s->turn_off + k].arrival_s - w.turns[s->turn_off].arrival_s;
            double g0 = base.turns[s->turn_off + k].arrival_s - base.turns[s->turn_off].arrival_s;
            cr_assert_float_eq(g, g0, 1e-6);
        }
    }
    cz_workload_free(&base);
    cz_workload_free(&w);
}

Test(synth, trace_process_keeps_trace_times)
{
    cz_workload a, b;
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"}}", 1, &a);
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\", \"format\": \"azure\"},"
             " \"arrivals\": {\"process\": \"trace\"}}",
             99, &b);
    cr_assert(cz_workload_equal(&a, &b, NULL, 0), "the seed does not touch a replayed trace");
    cr_assert_eq(a.n_turns, 9754);
    cz_workload_free(&a);
    cz_workload_free(&b);
}

/* ---- determinism -------------------------------------------------------------------- */

#define RICH_CONFIG                                                                          \
    "{\"synthetic\": {\"requests\": 2000,"                                                   \
    "   \"input_tokens\": {\"dist\": \"lognormal\", \"mean\": 300, \"cv\": 1.5},"           \
    "   \"output_tokens\": {\"dist\": \"uniform\", \"min\": 10, \"max\": 400}},"             \
    " \"arrivals\": {\"process\": \"gamma\", \"rate_rps\": 5, \"burstiness\": 0.5},"        \
    " \"audio\": {\"tokens_per_text_token\": 2.5, \"seconds_per_audio_token\": 0.04},"      \
    " \"barge_in\": {\"p\": 0.3},"                                                           \
    " \"streams\": {\"count\": 3, \"frame_period_s\": 0.08, \"tokens_in_per_frame\": 2,"     \
    "   \"tokens_out_per_frame\": 1, \"duration_s\": 60}}"

Test(synth, same_seed_same_workload_other_seed_differs)
{
    cz_workload a, b, c;
    build_ok(RICH_CONFIG, 42, &a);
    build_ok(RICH_CONFIG, 42, &b);
    build_ok(RICH_CONFIG, 43, &c);
    char why[256] = "";
    cr_assert(cz_workload_equal(&a, &b, why, sizeof why), "same seed differs: %s", why);
    cr_assert_not(cz_workload_equal(&a, &c, NULL, 0));
    uint32_t same_len = 0, same_t = 0;
    for (uint32_t i = 0; i < a.n_turns; i++) {
        same_len += a.turns[i].in_text_tokens == c.turns[i].in_text_tokens;
        same_t += a.turns[i].arrival_s == c.turns[i].arrival_s;
    }
    cr_assert(same_len < a.n_turns / 10, "lengths change with the seed (%u equal)", same_len);
    cr_assert(same_t < 2, "arrivals change with the seed (%u equal)", same_t);
    cz_workload_free(&a);
    cz_workload_free(&b);
    cz_workload_free(&c);
}

Test(synth, length_distributions)
{
    cz_workload w;
    build_ok(RICH_CONFIG, 5, &w);
    double sum = 0.0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < w.n_turns; i++) {
        sum += w.turns[i].in_text_tokens;
        cr_assert(w.turns[i].in_text_tokens >= 1);
        uint32_t o = w.turns[i].out_text_tokens;
        lo = o < lo ? o : lo;
        hi = o > hi ? o : hi;
    }
    /* Lognormal mean 300, CV 1.5: the sample mean over 2,000 has a standard error of
     * about 10 tokens. */
    cr_assert(fabs(sum / w.n_turns - 300.0) < 40.0, "mean input %g", sum / w.n_turns);
    cr_assert(lo >= 10 && hi <= 400 && lo < 20 && hi > 390, "uniform output in [%u, %u]", lo, hi);
    cz_workload_free(&w);
}

Test(synth, lengths_sampled_as_pairs_from_a_trace)
{
    cz_workload azure, w;
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"}}", 1, &azure);
    build_ok("{\"synthetic\": {\"requests\": 3000,"
             " \"input_tokens\": {\"dist\": \"trace\", \"path\": \"" AZURE_CONV "\","
             " \"max_tokens\": 4096},"
             " \"output_tokens\": {\"dist\": \"trace\", \"path\": \"" AZURE_CONV "\","
             " \"max_tokens\": 4096}},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 2}}",
             3, &w);
    uint32_t clipped = 0;
    for (uint32_t i = 0; i < w.n_turns; i++) {
        uint32_t in = w.turns[i].in_text_tokens, out = w.turns[i].out_text_tokens;
        cr_assert(in <= 4096 && out <= 4096);
        clipped += in == 4096;
        bool found = false;
        for (uint32_t j = 0; j < azure.n_turns && !found; j++) {
            uint32_t ain = azure.turns[j].in_text_tokens, aout = azure.turns[j].out_text_tokens;
            found = (ain > 4096 ? 4096 : ain) == in && (aout > 4096 ? 4096 : aout) == out;
        }
        cr_assert(found, "request %u: (%u, %u) is not a pair of the trace", i, in, out);
    }
    cr_assert(clipped > 0, "the conversation trace has prompts above 4,096 tokens");
    cz_workload_free(&azure);
    cz_workload_free(&w);
}

/* Vidur's cap on a request's input + output (trace_request_length_generator.py): the excess
 * comes off both in proportion to their shares, each cut rounded up, each length kept >= 1.
 * tests/data/traces/azure_total_cap.csv holds four rows; with a cap of 100 tokens:
 * (30, 20) fits; (150, 50) loses 100 as 75 + 25; (101, 100) loses ceil(50.75) + ceil(50.25)
 * = 102, one more than the excess, as Vidur's does; (1, 199) loses ceil(0.5) = 1 of its 1
 * input token, raised back to 1, and ceil(99.5) = 100 output tokens. */
Test(synth, max_total_tokens_caps_a_pair_as_vidur_does)
{
    static const uint32_t want[4][2] = {{30, 20}, {75, 25}, {50, 49}, {1, 99}};
    static const uint32_t raw[4][2] = {{30, 20}, {150, 50}, {101, 100}, {1, 199}};
    const char *fmt = "{\"synthetic\": {\"requests\": 400,%s"
                      " \"input_tokens\": {\"dist\": \"trace\", \"path\":"
                      " \"tests/data/traces/azure_total_cap.csv\", \"max_tokens\": 1000},"
                      " \"output_tokens\": {\"dist\": \"trace\", \"path\":"
                      " \"tests/data/traces/azure_total_cap.csv\", \"max_tokens\": 1000}},"
                      " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}";
    for (int capped = 0; capped < 2; capped++) {
        char json[1024];
        snprintf(json, sizeof json, fmt, capped ? " \"max_total_tokens\": 100," : "");
        cz_workload w;
        build_ok(json, 2, &w);
        const uint32_t(*rows)[2] = capped ? want : raw;
        uint32_t seen[4] = {0};
        for (uint32_t i = 0; i < w.n_turns; i++) {
            uint32_t in = w.turns[i].in_text_tokens, out = w.turns[i].out_text_tokens;
            int k = 0;
            while (k < 4 && !(rows[k][0] == in && rows[k][1] == out))
                k++;
            cr_assert(k < 4, "cap %s: request %u has (%u, %u), not a row's pair",
                      capped ? "100" : "off", i, in, out);
            seen[k]++;
        }
        for (int k = 0; k < 4; k++)
            cr_assert(seen[k] > 0, "cap %s: row %d never drawn", capped ? "100" : "off", k);
        cz_workload_free(&w);
    }
    /* the cap applies to any length distribution: 300 + 100 in 200 is 150 + 50 */
    cz_workload w;
    build_ok("{\"synthetic\": {\"requests\": 3, \"input_tokens\": 300, \"output_tokens\": 100,"
             " \"max_total_tokens\": 200}, \"arrivals\": {\"process\": \"poisson\","
             " \"rate_rps\": 1}}",
             1, &w);
    for (uint32_t i = 0; i < w.n_turns; i++) {
        cr_assert_eq(w.turns[i].in_text_tokens, 150);
        cr_assert_eq(w.turns[i].out_text_tokens, 50);
    }
    cz_workload_free(&w);
    build_fails("{\"synthetic\": {\"requests\": 3, \"input_tokens\": 3, \"output_tokens\": 1,"
                " \"max_total_tokens\": 1}, \"arrivals\": {\"process\": \"poisson\","
                " \"rate_rps\": 1}}",
                CZ_EINVAL, "workload.synthetic: field 'max_total_tokens'", "at least 2");
    build_fails("{\"synthetic\": {\"requests\": 3, \"input_tokens\": 3, \"output_tokens\": 1,"
                " \"max_total_tokens\": 2.5}, \"arrivals\": {\"process\": \"poisson\","
                " \"rate_rps\": 1}}",
                CZ_EINVAL, "workload.synthetic: field 'max_total_tokens'", "integer");
}

/* ---- closed loop and think times ------------------------------------------------------- */

Test(synth, closed_loop_sets_concurrency_and_timing)
{
    cz_workload base, w;
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"}}", 1, &base);
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"},"
             " \"arrivals\": {\"process\": \"closed_loop\", \"concurrency\": 8,"
             " \"think_s\": {\"dist\": \"fixed\", \"value\": 99}}}",
             1, &w);
    cr_assert_eq(w.concurrency, 8);
    cr_assert_eq(w.n_sessions, base.n_sessions);
    for (uint32_t i = 0; i < w.n_sessions; i++) {
        cr_assert_eq(w.sessions[i].timing, CZ_TIMING_CLOSED);
        cr_assert_eq(w.turns[w.sessions[i].turn_off].arrival_s, 0.0);
    }
    for (uint32_t i = 0; i < w.n_turns; i++)
        cr_assert_eq(w.turns[i].think_s, base.turns[i].think_s,
                     "think times the trace gives are kept");
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_eq(ti.duration_s, 0.0);
    cz_workload_free(&base);
    cz_workload_free(&w);
}

Test(synth, think_times_drawn_for_closed_sessions)
{
    cz_workload w;
    build_ok("{\"trace\": {\"path\": \"tests/data/traces/sharegpt_multi.json\","
             " \"multi_turn\": true, \"filter\": false, \"output_tokens\": 7},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1,"
             " \"think_s\": {\"dist\": \"exponential\", \"mean\": 3}}}",
             1, &w);
    cr_assert_eq(w.n_sessions, 2);
    const cz_session *a = &w.sessions[0];
    cr_assert_eq(a->timing, CZ_TIMING_CLOSED);
    cr_assert(w.turns[a->turn_off].think_s > 0.0);
    cr_assert(w.turns[a->turn_off + 1].think_s > 0.0);
    cr_assert(w.turns[a->turn_off].think_s != w.turns[a->turn_off + 1].think_s);
    cr_assert_eq(w.turns[a->turn_off + 2].think_s, 0.0, "no think after the last turn");
    cr_assert(w.think_given);
    cz_workload_free(&w);

    build_ok("{\"trace\": {\"path\": \"tests/data/traces/sharegpt_multi.json\","
             " \"multi_turn\": true, \"filter\": false, \"output_tokens\": 7},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}",
             1, &w);
    cr_assert_eq(w.turns[0].think_s, 0.0, "default think time is 0");
    cz_workload_free(&w);
}

/* ---- audio and barge-in ---------------------------------------------------------------- */

Test(synth, audio_lengths)
{
    cz_workload w;
    build_ok("{\"synthetic\": {\"requests\": 10, \"input_tokens\": 100, \"output_tokens\": 50},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1},"
             " \"audio\": {\"tokens_per_text_token\": 2.5, \"speech_s_per_input_token\": 0.02}}",
             1, &w);
    for (uint32_t i = 0; i < w.n_turns; i++) {
        cr_assert_eq(w.turns[i].out_audio_tokens, 125);
        cr_assert_float_eq(w.turns[i].out_audio_s, 10.0, 1e-12, "125 x 0.08 s default");
        cr_assert_float_eq(w.turns[i].speech_s, 2.0, 1e-12);
        cr_assert_eq(w.turns[i].barge_in_s, -1.0);
    }
    cz_workload_free(&w);
}

Test(synth, barge_in_fraction_and_offsets)
{
    cz_workload w;
    build_ok("{\"synthetic\": {\"requests\": 20000, \"input_tokens\": 100,"
             " \"output_tokens\": {\"dist\": \"lognormal\", \"mean\": 100, \"cv\": 0.8}},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1},"
             " \"audio\": {\"tokens_per_text_token\": 1, \"seconds_per_audio_token\": 0.08},"
             " \"barge_in\": {\"p\": 0.3}}",
             11, &w);
    double *audio = malloc(w.n_turns * sizeof *audio);
    for (uint32_t i = 0; i < w.n_turns; i++)
        audio[i] = w.turns[i].out_audio_s;
    qsort(audio, w.n_turns, sizeof *audio, cmp_double);
    uint32_t hits = 0;
    for (uint32_t i = 0; i < w.n_turns; i++) {
        double b = w.turns[i].barge_in_s;
        if (b < 0.0) {
            cr_assert_eq(b, -1.0);
            continue;
        }
        hits++;
        cr_assert_not_null(bsearch(&b, audio, w.n_turns, sizeof *audio, cmp_double),
                           "offset %g is an output audio duration of the workload", b);
    }
    double frac = (double)hits / w.n_turns;
    /* Binomial standard error sqrt(0.3 x 0.7 / 20000) = 0.0032. */
    cr_assert(fabs(frac - 0.3) < 0.015, "barge-in fraction %g", frac);
    free(audio);
    cz_workload_free(&w);
}

Test(synth, barge_in_without_audio_is_an_error)
{
    build_fails("{\"synthetic\": {\"requests\": 10, \"input_tokens\": 100, \"output_tokens\": 50},"
                " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1},"
                " \"barge_in\": {\"p\": 0.5}}",
                CZ_EINVAL, "exp.json: workload.barge_in", "audio");
}

/* ---- streams ------------------------------------------------------------------------- */

Test(synth, periodic_streams)
{
    cz_workload w;
    build_ok("{\"streams\": {\"count\": 4, \"frame_period_s\": 0.08, \"tokens_in_per_frame\": 3,"
             " \"tokens_out_per_frame\": 2, \"duration_s\": 300, \"class\": \"rt\"}}",
             1, &w);
    cr_assert_eq(w.n_streams, 4);
    cr_assert_eq(w.n_sessions, 0);
    for (uint32_t i = 0; i < 4; i++) {
        cr_assert_float_eq(w.streams[i].start_s, i * 0.02, 1e-15);
        cr_assert_eq(w.streams[i].frame_period_s, 0.08);
        cr_assert_eq(w.streams[i].tokens_in_per_frame, 3);
        cr_assert_eq(w.streams[i].tokens_out_per_frame, 2);
        cr_assert_eq(w.streams[i].duration_s, 300.0);
    }
    cz_workload_free(&w);
    build_ok("{\"streams\": {\"count\": 2, \"frame_period_s\": 1, \"tokens_in_per_frame\": 3,"
             " \"tokens_out_per_frame\": 2, \"duration_s\": 10, \"stagger\": false,"
             " \"class\": \"be\"}}",
             1, &w);
    cr_assert_eq(w.streams[1].start_s, 0.0);
    cr_assert_eq(w.streams[1].cls, CZ_CLASS_BE);
    cz_workload_free(&w);
}

/* ---- transforms ----------------------------------------------------------------------- */

Test(synth, time_scale_multiplies_arrival_times)
{
    cz_workload w;
    cz_trace_info base, slow, fast;
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"}}", 1, &w);
    cz_trace_info_compute(&w, &base);
    cz_workload_free(&w);
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"}, \"time_scale\": 2}", 1, &w);
    cz_trace_info_compute(&w, &slow);
    cz_workload_free(&w);
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"}, \"time_scale\": 0.5}", 1, &w);
    cz_trace_info_compute(&w, &fast);
    cz_workload_free(&w);
    cr_assert_float_eq(slow.duration_s, 2.0 * base.duration_s, 1e-6);
    cr_assert_float_eq(slow.mean_rate_rps, base.mean_rate_rps / 2.0, 1e-9,
                       "time_scale 2 halves the rate");
    cr_assert_float_eq(fast.mean_rate_rps, base.mean_rate_rps * 2.0, 1e-9);
    cr_assert_eq(slow.requests, base.requests);
}

Test(synth, window_keeps_and_shifts)
{
    cz_workload w;
    build_ok("{\"trace\": {\"path\": \"" AZURE_CONV "\"},"
             " \"window\": {\"start_s\": 600, \"duration_s\": 300}}",
             1, &w);
    cr_assert_eq(w.n_turns, 1557, "rows with arrival in [600, 900) s");
    cr_assert_eq(w.dropped_filtered, 9754 - 1557);
    for (uint32_t i = 0; i < w.n_turns; i++)
        cr_assert(w.turns[i].arrival_s >= 0.0 && w.turns[i].arrival_s < 300.0);
    cz_workload_free(&w);
}

Test(synth, max_requests_keeps_whole_sessions)
{
    cz_workload base, w;
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"}}", 1, &base);
    build_ok("{\"trace\": {\"path\": \"" BURSTGPT3 "\"}, \"max_requests\": 50}", 1, &w);
    cr_assert(w.n_turns <= 50 && w.n_turns > 25, "%u turns", w.n_turns);
    cr_assert_eq(w.dropped_filtered, 299 - w.n_turns);
    /* Every kept session is whole: same turn count as in the full trace. */
    for (uint32_t i = 0; i < w.n_sessions; i++) {
        const char *name = cz_workload_session_name(&w, &w.sessions[i]);
        bool found = false;
        for (uint32_t j = 0; j < base.n_sessions && !found; j++) {
            if (strcmp(cz_workload_session_name(&base, &base.sessions[j]), name) == 0) {
                found = true;
                cr_assert_eq(w.sessions[i].n_turns, base.sessions[j].n_turns, "%s", name);
            }
        }
        cr_assert(found);
    }
    /* The kept sessions are the earliest ones: the first session left out starts no
     * earlier than the last one kept. */
    double last_kept = w.turns[w.sessions[w.n_sessions - 1].turn_off].arrival_s;
    cr_assert(last_kept <= base.turns[base.sessions[w.n_sessions].turn_off].arrival_s);
    cz_workload_free(&base);
    cz_workload_free(&w);
}

/* ---- config errors -------------------------------------------------------------------- */

Test(synth, config_errors_name_the_field)
{
    build_fails("{\"trace\": {\"path\": \"" AZURE_CONV "\"}, \"arrival\": {}}", CZ_EINVAL,
                "exp.json: workload", "unknown field 'arrival'");
    build_fails("{\"trace\": {\"path\": \"traces/data/sharegpt/sharegpt_sample.json\"}}",
                CZ_EINVAL, "workload.arrivals", "'process'");
    build_fails("{\"trace\": {\"path\": \"traces/data/sharegpt/sharegpt_sample.json\"},"
                " \"arrivals\": {\"process\": \"trace\"}}",
                CZ_EINVAL, "no timestamps", "poisson");
    build_fails("{\"synthetic\": {\"requests\": 5, \"input_tokens\": 1, \"output_tokens\": 1},"
                " \"arrivals\": {\"process\": \"poisson\"}}",
                CZ_EINVAL, "workload.arrivals", "'rate_rps'");
    build_fails("{\"synthetic\": {\"requests\": 5, \"input_tokens\": 1, \"output_tokens\": 1},"
                " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1, \"burstiness\": 2}}",
                CZ_EINVAL, "workload.arrivals", "'burstiness'");
    build_fails("{\"synthetic\": {\"requests\": 5, \"input_tokens\": {\"dist\": \"zipf\"},"
                " \"output_tokens\": 1}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}",
                CZ_EINVAL, "workload.synthetic.input_tokens", "'zipf'");
    build_fails("{\"synthetic\": {\"requests\": 5, \"input_tokens\": 1},"
                " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}",
                CZ_EINVAL, "workload.synthetic", "'output_tokens'");
    build_fails("{\"trace\": {\"path\": \"" AZURE_CONV "\"}, \"synthetic\": {}}", CZ_EINVAL,
                "exp.json: workload", "not both");
    build_fails("{\"trace\": {\"path\": \"no/such/trace.csv\", \"format\": \"azure\"}}",
                CZ_ENOTFOUND, "workload.trace.path: cannot open '", "no/such/trace.csv'");
    build_fails("{\"trace\": {\"path\": \"" AZURE_CONV "\", \"format\": \"parquet\"}}",
                CZ_ENOTFOUND, "workload.trace", "'parquet'");
    build_fails("{\"streams\": {\"count\": 1, \"frame_period_s\": 1, \"tokens_in_per_frame\": 1,"
                " \"tokens_out_per_frame\": 1, \"duration_s\": 1}, \"time_scale\": 2}",
                CZ_EINVAL, "exp.json: workload", "request source");
    build_fails("{\"trace\": {\"path\": \"" AZURE_CONV "\"}, \"time_scale\": 0}", CZ_EINVAL,
                "exp.json: workload", "'time_scale'");
    build_fails("{\"trace\": {\"path\": \"tests/data/traces/burstgpt_bad_number.csv\"}}",
                CZ_EFORMAT, "burstgpt_bad_number.csv:3", "'Request tokens'");
}

Test(synth, turns_make_closed_conversations)
{
    cz_workload w;
    build_ok("{\"synthetic\": {\"requests\": 10, \"turns\": 3, \"input_tokens\": 20,"
             " \"output_tokens\": 5}, \"arrivals\": {\"process\": \"closed_loop\","
             " \"concurrency\": 2, \"think_s\": 0.5}}",
             1, &w);
    /* 3 + 3 + 3 + the 1 left */
    cr_assert_eq(w.n_sessions, 4);
    cr_assert_eq(w.n_turns, 10);
    for (uint32_t i = 0; i < 4; i++) {
        const cz_session *s = &w.sessions[i];
        cr_assert_eq(s->n_turns, i < 3 ? 3u : 1u);
        cr_assert_eq(s->timing, CZ_TIMING_CLOSED);
        char want[16];
        snprintf(want, sizeof want, "syn-%u", i);
        cr_assert_str_eq(cz_workload_session_name(&w, s), want);
        for (uint32_t k = 0; k + 1 < s->n_turns; k++)
            cr_assert_float_eq(w.turns[s->turn_off + k].think_s, 0.5, 1e-12);
    }
    cz_workload_free(&w);
    /* each turn's lengths are the request's draw: the same as one-turn sessions' */
    cz_workload one, many;
    build_ok("{\"synthetic\": {\"requests\": 12, \"input_tokens\": {\"dist\": \"uniform\","
             " \"min\": 1, \"max\": 500}, \"output_tokens\": 7}, \"arrivals\": {\"process\":"
             " \"poisson\", \"rate_rps\": 1}}", 3, &one);
    build_ok("{\"synthetic\": {\"requests\": 12, \"turns\": {\"dist\": \"uniform\", \"min\": 1,"
             " \"max\": 5}, \"input_tokens\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 500},"
             " \"output_tokens\": 7}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}",
             3, &many);
    cr_assert_eq(many.n_turns, 12);
    cr_assert(many.n_sessions < 12, "sessions of several turns");
    for (uint32_t g = 0; g < 12; g++)
        cr_assert_eq(many.turns[g].in_text_tokens, one.turns[g].in_text_tokens);
    cz_workload_free(&one);
    cz_workload_free(&many);
    build_fails("{\"synthetic\": {\"requests\": 4, \"turns\": -1, \"input_tokens\": 2,"
                " \"output_tokens\": 2}, \"arrivals\": {\"process\": \"closed_loop\","
                " \"concurrency\": 1}}",
                CZ_EINVAL, "turns", NULL);
}
