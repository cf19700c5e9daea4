/* test_workload.c - the workload builders, cz_workload_equal, the transforms (time scale,
 * window, request cap) and the trace statistics on a small hand-made workload whose
 * duration, rate, index of dispersion and percentiles are computed by hand below. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cz_traces.h"
#include "cz_workload.h"

Test(workload, init_and_free_leave_it_empty)
{
    cz_workload w;
    memset(&w, 0xAB, sizeof w);
    cz_workload_init(&w);
    cr_assert_eq(w.n_sessions, 0);
    cr_assert_null(w.turns);
    cr_assert_eq(w.concurrency, 0);
    cz_workload_begin_session(&w, "a", CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_workload_add_turn(&w);
    cz_workload_free(&w);
    cr_assert_eq(w.n_sessions, 0);
    cr_assert_eq(w.n_turns, 0);
    cr_assert_null(w.sessions);
    cr_assert_null(w.name_pool);
    cr_assert_eq(w.cap_turns, 0);
}

Test(workload, builders_keep_sessions_contiguous_through_growth)
{
    cz_workload w;
    cz_workload_init(&w);
    const uint32_t n = 10000;
    uint32_t hashes[3];
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "session-%05u", i);
        cz_session *s = cz_workload_begin_session(&w, name, i % 2 ? CZ_CLASS_BE : CZ_CLASS_RT,
                                                  i % 3 ? CZ_TIMING_OPEN : CZ_TIMING_CLOSED);
        cr_assert_eq(s->n_turns, 0);
        for (uint32_t k = 0; k < i % 3 + 1; k++) {
            cz_turn *t = cz_workload_add_turn(&w);
            t->in_text_tokens = i;
            t->out_text_tokens = k;
            for (uint32_t h = 0; h < k; h++)
                hashes[h] = i * 10 + h;
            cz_workload_add_hashes(&w, t, hashes, k);
        }
    }
    cr_assert_eq(w.n_sessions, n);
    cr_assert_eq(w.n_turns, n / 3 * 6 + 1, "turns 1, 2, 3 repeating: %u", w.n_turns);
    uint32_t next_turn = 0;
    for (uint32_t i = 0; i < n; i++) {
        const cz_session *s = &w.sessions[i];
        char name[32];
        snprintf(name, sizeof name, "session-%05u", i);
        cr_assert_str_eq(cz_workload_session_name(&w, s), name);
        cr_assert_eq(s->turn_off, next_turn);
        cr_assert_eq(s->n_turns, i % 3 + 1);
        cr_assert_eq(s->cls, i % 2 ? CZ_CLASS_BE : CZ_CLASS_RT);
        cr_assert_eq(s->timing, i % 3 ? CZ_TIMING_OPEN : CZ_TIMING_CLOSED);
        for (uint32_t k = 0; k < s->n_turns; k++) {
            const cz_turn *t = &w.turns[s->turn_off + k];
            cr_assert_eq(t->in_text_tokens, i);
            cr_assert_eq(t->hash_len, k);
            for (uint32_t h = 0; h < k; h++)
                cr_assert_eq(w.hash_pool[t->hash_off + h], i * 10 + h);
        }
        next_turn += s->n_turns;
    }
    cz_workload_free(&w);
}

Test(workload, new_turns_and_streams_have_defaults)
{
    cz_workload w;
    cz_workload_init(&w);
    cz_workload_begin_session(&w, "", CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(&w);
    cr_assert_eq(t->barge_in_s, -1.0, "no barge-in by default");
    cr_assert_eq(t->arrival_s, 0.0);
    cr_assert_eq(t->hash_len, 0);
    cr_assert_eq(t->out_audio_s, 0.0);
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "");
    cz_stream *s = cz_workload_add_stream(&w);
    cr_assert_eq(s->cls, CZ_CLASS_RT);
    cr_assert_eq(s->frame_period_s, 0.0);
    cr_assert_eq(w.n_streams, 1);
    cz_workload_free(&w);
}

Test(workload, turn_in_tokens_sums_modalities)
{
    cz_turn t = {.in_text_tokens = 100, .in_audio_tokens = 25, .in_image_tokens = 576};
    cr_assert_eq(cz_turn_in_tokens(&t), 701);
    t.in_text_tokens = UINT32_MAX;
    cr_assert_eq(cz_turn_in_tokens(&t), UINT32_MAX, "saturates instead of wrapping");
}

/* The hand-made workload of the statistics tests:
 *   s0 open, turns at 0.0 and 0.5 (in 10 text + 5 audio = 15, 20; out 3, 5)
 *   s1 closed, first turn at 1.2 (in 30, 40, 50; out 7, 9, 11)
 *   s2 open at 3.0 (in 60, out 13)
 *   s3 open at 3.9 (in 70, out 15) */
static void hand_made(cz_workload *w)
{
    cz_workload_init(w);
    const struct {
        const char *name;
        cz_timing timing;
        int n;
        double t[3];
        uint32_t in[3], out[3];
    } spec[] = {
        {"s0", CZ_TIMING_OPEN, 2, {0.0, 0.5}, {10, 20}, {3, 5}},
        {"s1", CZ_TIMING_CLOSED, 3, {1.2, 0.0, 0.0}, {30, 40, 50}, {7, 9, 11}},
        {"s2", CZ_TIMING_OPEN, 1, {3.0}, {60}, {13}},
        {"s3", CZ_TIMING_OPEN, 1, {3.9}, {70}, {15}},
    };
    for (size_t i = 0; i < 4; i++) {
        cz_workload_begin_session(w, spec[i].name, CZ_CLASS_RT, spec[i].timing);
        for (int k = 0; k < spec[i].n; k++) {
            cz_turn *t = cz_workload_add_turn(w);
            t->arrival_s = spec[i].t[k];
            t->in_text_tokens = spec[i].in[k];
            t->out_text_tokens = spec[i].out[k];
        }
    }
    w->turns[0].in_audio_tokens = 5;
    w->arrivals_given = true;
}

Test(workload, equal_finds_the_first_difference)
{
    cz_workload a, b;
    hand_made(&a);
    hand_made(&b);
    char why[128];
    cr_assert(cz_workload_equal(&a, &b, why, sizeof why));
    b.turns[3].think_s = 1.0;
    cr_assert_not(cz_workload_equal(&a, &b, why, sizeof why));
    cr_assert_str_eq(why, "turn 3: field 'think_s' differs");
    b.turns[3].think_s = 0.0;
    cz_workload_add_hashes(&a, &a.turns[6], (const uint32_t[]){1, 2}, 2);
    cz_workload_add_hashes(&b, &b.turns[6], (const uint32_t[]){1, 3}, 2);
    cr_assert_not(cz_workload_equal(&a, &b, why, sizeof why));
    cr_assert_str_eq(why, "turn 6: field 'hash_ids' differs");
    b.hash_pool[1] = 2;
    cr_assert(cz_workload_equal(&a, &b, NULL, 0));
    b.dropped_failed = 1;
    cr_assert_not(cz_workload_equal(&a, &b, NULL, 0));
    cz_workload_free(&a);
    cz_workload_free(&b);
}

Test(workload, info_on_hand_made_workload)
{
    cz_workload w;
    hand_made(&w);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_eq(ti.requests, 7);
    cr_assert_eq(ti.sessions, 4);
    cr_assert_eq(ti.turns_max, 3);
    cr_assert_float_eq(ti.turns_mean, 7.0 / 4.0, 1e-12);
    /* Fixed arrivals: 0, 0.5, 1.2 (closed s1's first turn only), 3.0, 3.9. */
    cr_assert_float_eq(ti.duration_s, 3.9, 1e-12);
    cr_assert_float_eq(ti.mean_rate_rps, 5.0 / 3.9, 1e-12);
    /* 1 s bins over [0, 4): counts 2, 1, 0, 2; mean 1.25; variance
     * (0.75^2 + 0.25^2 + 1.25^2 + 0.75^2) / 4 = 0.6875; IoD = 0.55. */
    cr_assert_float_eq(ti.burstiness_iod_1s, 0.55, 1e-12);
    /* Inputs 15, 20, 30, 40, 50, 60, 70; outputs 3, 5, ..., 15. */
    cr_assert_float_eq(ti.input_tokens_p50, 40.0, 1e-12);
    cr_assert_float_eq(ti.input_tokens_p90, 64.0, 1e-12);
    cr_assert_float_eq(ti.input_tokens_p99, 69.4, 1e-12);
    cr_assert_float_eq(ti.input_tokens_mean, 285.0 / 7.0, 1e-12);
    cr_assert_float_eq(ti.output_tokens_p50, 9.0, 1e-12);
    cr_assert_float_eq(ti.output_tokens_p90, 13.8, 1e-12);
    cr_assert_float_eq(ti.output_tokens_mean, 9.0, 1e-12);

    cJSON *j = cz_trace_info_json(&ti);
    const char *keys[] = {"requests",          "sessions",         "streams",
                          "turns_max",         "turns_mean",       "dropped_failed",
                          "dropped_filtered",  "duration_s",       "mean_rate_rps",
                          "burstiness_iod_1s", "input_tokens_p50", "input_tokens_p90",
                          "input_tokens_p99",  "input_tokens_mean", "output_tokens_p50",
                          "output_tokens_p90", "output_tokens_p99", "output_tokens_mean"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, keys[i])), "key %s", keys[i]);
    cr_assert_eq(cJSON_GetObjectItemCaseSensitive(j, "requests")->valuedouble, 7.0);
    cr_assert_float_eq(cJSON_GetObjectItemCaseSensitive(j, "burstiness_iod_1s")->valuedouble,
                       0.55, 1e-12);
    cJSON_Delete(j);
    cz_workload_free(&w);
}

Test(workload, info_of_empty_workload_is_null_where_undefined)
{
    cz_workload w;
    cz_workload_init(&w);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_eq(ti.requests, 0);
    cr_assert(isnan(ti.duration_s) && isnan(ti.mean_rate_rps) && isnan(ti.input_tokens_p50));
    cJSON *j = cz_trace_info_json(&ti);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "duration_s")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "input_tokens_p50")));
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "requests")));
    cJSON_Delete(j);
}

Test(workload, time_scale_multiplies_arrivals)
{
    cz_workload w;
    hand_made(&w);
    cz_workload_scale_time(&w, 2.0);
    cr_assert_eq(w.turns[1].arrival_s, 1.0);
    cr_assert_eq(w.turns[2].arrival_s, 2.4);
    cr_assert_eq(w.turns[6].arrival_s, 7.8);
    cz_trace_info ti;
    cz_trace_info_compute(&w, &ti);
    cr_assert_float_eq(ti.mean_rate_rps, 5.0 / 3.9 / 2.0, 1e-12, "factor 2 halves the rate");
    cz_workload_free(&w);
}

Test(workload, window_keeps_sessions_starting_inside_and_shifts)
{
    cz_workload w;
    hand_made(&w);
    cz_workload_window(&w, 1.0, 2.5);
    cr_assert_eq(w.n_sessions, 2);
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "s1");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[1]), "s2");
    cr_assert_float_eq(w.turns[0].arrival_s, 0.2, 1e-12);
    cr_assert_eq(w.turns[1].arrival_s, 0.0, "later turns of a closed session untouched");
    cr_assert_float_eq(w.turns[3].arrival_s, 2.0, 1e-12);
    cr_assert_eq(w.turns[3].in_text_tokens, 60);
    cr_assert_eq(w.dropped_filtered, 3, "s0's two turns and s3's one");
    cr_assert_eq(w.n_turns, 4);
    cz_workload_free(&w);

    hand_made(&w);
    cz_workload_window(&w, 0.0, INFINITY);
    cr_assert_eq(w.n_sessions, 4);
    cr_assert_eq(w.dropped_filtered, 0);
    cz_workload_free(&w);
}

Test(workload, limit_requests_keeps_whole_sessions_in_arrival_order)
{
    cz_workload w;
    hand_made(&w);
    /* Put s3 first in the arrays: selection goes by arrival, output keeps array order. */
    w.turns[6].arrival_s = 0.0;
    w.turns[0].arrival_s = 0.1;
    cz_workload_limit_requests(&w, 4);
    cr_assert_eq(w.n_sessions, 2, "s3 (1 turn at 0.0), s0 (2 turns), then s1 does not fit");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[0]), "s0");
    cr_assert_str_eq(cz_workload_session_name(&w, &w.sessions[1]), "s3");
    cr_assert_eq(w.n_turns, 3);
    cr_assert_eq(w.dropped_filtered, 4);
    cz_workload_free(&w);

    hand_made(&w);
    cz_workload_limit_requests(&w, 7);
    cr_assert_eq(w.n_sessions, 4);
    cz_workload_limit_requests(&w, 1);
    cr_assert_eq(w.n_sessions, 0, "the first session has 2 turns and does not fit");
    cr_assert_eq(w.dropped_filtered, 7);
    cz_workload_free(&w);
}

/* A workload without prefix hashes has no hash pool at all (NULL); copying its sessions
 * (the request cap does) must not form NULL + 0, which C leaves undefined and clang's
 * UBSan reports (-fsanitize=pointer-overflow). Turns with hashes keep theirs. */
Test(workload, limit_copies_turns_without_a_hash_pool)
{
    cz_workload w;
    cz_workload_init(&w);
    for (uint32_t i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%u", i);
        cz_workload_begin_session(&w, name, CZ_CLASS_RT, CZ_TIMING_OPEN);
        cz_workload_add_turn(&w)->arrival_s = i;
    }
    cr_assert_null(w.hash_pool);
    cr_assert_null(cz_workload_turn_hashes(&w, &w.turns[0]));
    cz_workload_limit_requests(&w, 3);
    cr_assert_eq(w.n_turns, 3);
    cr_assert_null(w.hash_pool);

    /* a turn with hashes between two without */
    uint32_t h[2] = {7, 9};
    cz_workload_begin_session(&w, "hashed", CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(&w);
    t->arrival_s = 3.5;
    cz_workload_add_hashes(&w, t, h, 2);
    cz_workload_begin_session(&w, "plain", CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_workload_add_turn(&w)->arrival_s = 4;
    cz_workload_limit_requests(&w, 4);
    cr_assert_eq(w.n_turns, 4);
    const uint32_t *back = cz_workload_turn_hashes(&w, &w.turns[3]);
    cr_assert_not_null(back);
    cr_assert_eq(w.turns[3].hash_len, 2);
    cr_assert_eq(back[0], 7);
    cr_assert_eq(back[1], 9);
    cr_assert_null(cz_workload_turn_hashes(&w, &w.turns[0]));
    cz_workload_free(&w);
}
