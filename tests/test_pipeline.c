/* test_pipeline.c - the simulator's pipeline on a hand-computed case: a thinker, a talker
 * fed token by token, and a vocoder, each on its own GPU, every step costing the fixed
 * 10 ms overhead (tests/data/pipeline/tiny-omni.json). Checks the stage hand-off times,
 * the client's audio timing, and what barge-in keeps and wastes; and the first-order
 * model of Metronome §3.1 for the KV pool's saturation time. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_h5read.h"
#include "cz_json.h"
#include "cz_results.h"
#include "cz_sim.h"
#include "test_util.h"


typedef struct run {
    cz_config cfg;
    cz_workload wl;
    cz_metrics m;
    cz_run_stats st;
    cz_summary sum;
    cJSON *summary;
} run;

static void run_config(run *r, const char *json)
{
    cJSON *j = cJSON_Parse(json);
    cr_assert(j != NULL);
    char *dir = cz_test_path("tests/data/pipeline");
    cz_err err;
    cz_err_clear(&err);
    cz_workload_init(&r->wl);
    cr_assert_eq(cz_config_parse(j, "test", dir, &r->cfg, &r->wl, &err), CZ_OK, "%s",
                 err.msg);
    cz_metrics_init(&r->m, 0.0, 0);
    cr_assert_eq(cz_sim_run(&r->cfg, &r->wl, &r->m, &r->st, NULL, NULL, &err), CZ_OK, "%s",
                 err.msg);
    cz_metrics_summarize(&r->m, &r->cfg.slo, &r->sum);
    r->summary = cz_summary_json(&r->sum);
    cz_run_summary_json(&r->cfg, &r->m, &r->st, &r->sum, r->summary);
    cJSON_Delete(j);
    free(dir);
}

static void run_free(run *r)
{
    cJSON_Delete(r->summary);
    cz_metrics_free(&r->m);
    cz_workload_free(&r->wl);
}

static const char *tiny_cfg(const char *trace)
{
    static char buf[1024];
    char *card = cz_test_path("tests/data/pipeline/tiny-omni.json");
    snprintf(buf, sizeof buf,
             "{\"model\": \"%s\", \"hardware\": \"h100-sxm\","
             " \"cost\": {\"step_overhead_s\": 0.01},"
             " \"pipeline\": {\"thinker\": {\"gpus\": [0]}, \"talker\": {\"gpus\": [1]},"
             "              \"voc\": {\"gpus\": [2]}},"
             " \"server\": {\"kv_blocks\": 64},"
             " \"workload\": {\"trace\": {\"path\": \"%s\"}}}",
             card, trace);
    free(card);
    return buf;
}

/* A record of AR stage `stage` (0 thinker, 1 talker). */
static const cz_req_record *rec_of(const run *r, uint32_t stage)
{
    for (uint64_t i = 0; i < r->m.n_req; i++)
        if (r->m.req[i].stage == stage)
            return &r->m.req[i];
    cr_assert(0, "no record for stage %u", stage);
    return NULL;
}

#define EPS 1e-5

Test(pipeline, hand_offs_and_audio_timing)
{
    run r;
    run_config(&r, tiny_cfg("one_turn.jsonl"));
    const cz_req_record *th = rec_of(&r, 0), *tk = rec_of(&r, 1);
    /* thinker: prefill of 4 at [0, .01] samples text token 1; tokens 2, 3 at .02, .03 */
    cr_assert_float_eq(th->first_token_s, 0.01, EPS);
    cr_assert_float_eq(th->finish_s, 0.03, EPS);
    /* talker: starts when text token 1 exists (2 audio tokens allowed per text token),
     * prefills its 4 input embeddings at [.01, .02]: audio token 1 at .02; tokens 2..6 at
     * .03 ... .07, the last ones released when the thinker finishes at .03 */
    cr_assert_float_eq(tk->first_token_s, 0.02, EPS);
    cr_assert_float_eq(tk->finish_s, 0.07, EPS);
    cr_assert_eq(tk->output_tokens, 6);
    /* vocoder: chunks of 2 audio tokens when the talker reaches 2, 4 and 6 (at .03, .05,
     * .07), each one step: audio at the client at .04, .06, .08 */
    cr_assert_eq(r.m.n_audio, 1);
    const cz_audio_record *a = &r.m.audio[0];
    cr_assert_float_eq(a->first_audio_s, 0.04, EPS);
    cr_assert_float_eq(a->last_audio_s, 0.08, EPS);
    cr_assert_float_eq(a->audio_s, 0.48, EPS);
    cr_assert(a->continuous && a->max_underrun_s == 0);
    /* the reply ends when its 0.48 s of audio has played from .04 */
    cr_assert_float_eq(a->end_s, 0.52, EPS);
    const cJSON *rtf = cJSON_GetObjectItem(r.summary, "mean_audio_rtf");
    cr_assert_float_eq(rtf->valuedouble, 0.08 / 0.48, EPS);
    /* generation against playback (LiveServe Figure 15): 0.08 s to the last chunk, 0.48 s
     * of audio, for the mean and for the longest (only) reply */
    cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "mean_generation_s")->valuedouble, 0.08,
                       EPS);
    cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "mean_playback_s")->valuedouble, 0.48, EPS);
    cr_assert_float_eq(
        cJSON_GetObjectItem(r.summary, "longest_reply_generation_s")->valuedouble, 0.08, EPS);
    /* completed, continuous, no TTFP SLO: effective; one request over 0.07 s of duration */
    cr_assert_float_eq(
        cJSON_GetObjectItem(r.summary, "effective_request_throughput")->valuedouble,
        cJSON_GetObjectItem(r.summary, "request_throughput")->valuedouble, 1e-9);
    cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "waste_ratio")->valuedouble, 0, 0);
    run_free(&r);
}

Test(pipeline, barge_in_heard_plus_wasted_is_generated)
{
    run r;
    run_config(&r, tiny_cfg("one_turn_barge.jsonl"));
    const cz_req_record *th = rec_of(&r, 0), *tk = rec_of(&r, 1);
    const cz_audio_record *a = &r.m.audio[0];
    /* the user barges in 0.10 s after the first audio (.04): 0.10 s heard = 1 audio token
     * of 0.08 s; it was conditioned on ceil(1 / 2) = 1 text token */
    cr_assert(a->barged);
    cr_assert_float_eq(a->end_s, 0.14, EPS);
    cr_assert_float_eq(a->heard_s, 0.10, EPS);
    cr_assert_eq(tk->outcome, CZ_REQ_ABORTED);
    cr_assert_eq(tk->output_tokens, 6);
    cr_assert_eq(tk->heard_tokens, 1);
    cr_assert_eq(th->output_tokens, 3);
    cr_assert_eq(th->heard_tokens, 1);
    const cJSON *s = r.summary;
    double gen = cJSON_GetObjectItem(s, "generated_tokens")->valuedouble;
    double heard = cJSON_GetObjectItem(s, "heard_tokens")->valuedouble;
    double waste = cJSON_GetObjectItem(s, "waste_ratio")->valuedouble;
    cr_assert_float_eq(gen, 9, 0);
    cr_assert_float_eq(heard, 2, 0);
    cr_assert_float_eq(heard + waste * gen, gen, 1e-9); /* heard + wasted = generated */
    /* a cut reply is not completed work: it is never effective (LiveServe section 7.1) */
    cr_assert_float_eq(cJSON_GetObjectItem(s, "effective_request_throughput")->valuedouble, 0,
                       0);
    cr_assert_float_eq(cJSON_GetObjectItem(s, "aborted")->valuedouble, 1, 0);
    run_free(&r);
}

/* One ratio, from the card: the tiny pipeline's talker makes 2 audio tokens per text token
 * of 0.08 s each, so the workload's spoken replies are those lengths by default, and a
 * workload that says otherwise is refused naming the field. */
Test(pipeline, audio_lengths_follow_the_card)
{
    char *card = cz_test_path("tests/data/pipeline/tiny-omni.json");
    char json[1024];
    for (int k = 0; k < 3; k++) {
        const char *audio = k == 0 ? "{}" : k == 1 ? "{\"tokens_per_text_token\": 2}"
                                                    : "{\"tokens_per_text_token\": 3}";
        snprintf(json, sizeof json,
                 "{\"model\": \"%s\", \"workload\": {\"synthetic\": {\"requests\": 3,"
                 " \"input_tokens\": 4, \"output_tokens\": 5}, \"arrivals\": {\"process\":"
                 " \"poisson\", \"rate_rps\": 1}, \"audio\": %s}}",
                 card, audio);
        cJSON *j = cJSON_Parse(json);
        cr_assert(j != NULL);
        cz_config cfg;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_err err;
        cz_err_clear(&err);
        cz_status st = cz_config_parse(j, "t.json", ".", &cfg, &wl, &err);
        if (k < 2) {
            cr_assert_eq(st, CZ_OK, "%s", err.msg);
            cr_assert_eq(wl.turns[0].out_audio_tokens, 10);
            cr_assert_float_eq(wl.turns[0].out_audio_s, 0.8, 1e-12);
        } else {
            cr_assert_eq(st, CZ_EINVAL);
            cr_assert(strstr(err.msg, "tokens_per_text_token") && strstr(err.msg, "t.json"),
                      "%s", err.msg);
        }
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
    free(card);
}

/* Metronome §3.1 (Eq. 1): with unbounded resident KV the pool
 * fills linearly, rho(t) = rho0 + N r t, and saturates at t_sat = (1 - rho0) / (N r).
 * Here rho0 = 0 and each stream adds 25 + 50 tokens every 2 s to a 20,000-block pool of
 * 16-token blocks: r = 37.5 / 320,000 per second. */
Test(pipeline, metronome_saturation_first_order_model)
{
    const unsigned ns[] = {32, 64, 128};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\","
                 " \"server\": {\"kv_blocks\": 20000, \"max_model_len\": 0},"
                 " \"workload\": {\"streams\": {\"count\": %u, \"frame_period_s\": 2,"
                 "   \"tokens_in_per_frame\": 25, \"tokens_out_per_frame\": 50,"
                 "   \"duration_s\": 300, \"stagger\": true}}}",
                 ns[i]);
        run r;
        run_config(&r, json);
        double predicted = 1.0 / (ns[i] * 37.5 / 320000.0);
        double got = r.st.kv_saturated_at_s;
        cr_assert(fabs(got - predicted) / predicted < 0.05, "N %u: saturated at %.2f s, "
                  "first-order model %.2f s", ns[i], got, predicted);
        /* after the cliff the stalled engine returns empty frames on time */
        cr_assert_gt(cJSON_GetObjectItem(r.summary, "empty_frames")->valuedouble, 0);
        cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "deadline_misses")->valuedouble, 0, 0);
        run_free(&r);
    }
}

/* Two replicas of a text model on two GPUs: the least-loaded router spreads two sessions
 * that arrive together over both (a session router would too; a lone replica would not). */
Test(pipeline, least_loaded_router_spreads_sessions)
{
    const char *cfg =
        "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\", \"router\": \"least_loaded\","
        " \"pipeline\": {\"llm\": {\"replicas\": 2, \"gpus\": [0, 1]}},"
        " \"sim\": {\"timeline_interval_s\": 0},"
        " \"workload\": {\"synthetic\": {\"requests\": 2, \"input_tokens\": 100, \"output_tokens\": 50},"
        "   \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1e6}}}";
    run r;
    run_config(&r, cfg);
    bool busy[2] = {false, false};
    for (uint64_t i = 0; i < r.m.n_tl; i++)
        if (r.m.tl[i].running > 0)
            busy[r.m.tl[i].replica] = true;
    cr_assert(busy[0] && busy[1], "both replicas served a session");
    run_free(&r);
}

/* The session gateway: under a static cap of 2, five sessions arriving 0.1 s apart see the
 * first two admitted and the other three refused; the admitted ones run every frame and,
 * when they end, give their KV back. The same sessions windowed (4 sinks, 32 tokens) end
 * holding the sink block and the window's blocks only. */
Test(pipeline, gateway_and_window)
{
    for (int windowed = 0; windowed < 2; windowed++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\","
                 " \"server\": {\"kv_blocks\": 20000%s},"
                 " \"admission\": {\"policy\": \"static\", \"cap\": 2},"
                 " \"workload\": {\"streams\": {\"count\": 5, \"frame_period_s\": 2,"
                 "   \"tokens_in_per_frame\": 25, \"tokens_out_per_frame\": 50,"
                 "   \"duration_s\": 20, \"arrival_spacing_s\": 0.1}}}",
                 windowed ? ", \"kv_sink_tokens\": 4, \"kv_window_tokens\": 32" : "");
        run r;
        run_config(&r, json);
        cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "sessions_admitted")->valuedouble, 2, 0);
        cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "sessions_rejected")->valuedouble, 3, 0);
        cr_assert_eq(r.m.n_frames, 20); /* 10 frames for each admitted session */
        for (uint64_t i = 0; i < r.m.n_frames; i++)
            cr_assert(r.m.frames[i].stream < 2 && !r.m.frames[i].empty);
        /* 10 frames of 75 tokens: 750 tokens, 47 blocks of 16; windowed: block 0 and the
         * blocks of the last 32 tokens [718, 750): 44..46 */
        double blocks = cJSON_GetObjectItem(r.summary, "mean_stream_kv_blocks")->valuedouble;
        cr_assert_float_eq(blocks, windowed ? 4 : 47, 0, "%g", blocks);
        run_free(&r);
    }
}

/* ---- periodic streams: Metronome's frame (docs/pipeline.md, "Periodic streams") ----
 * On tiny-omni's thinker alone every step costs the 10 ms overhead, so a frame of 4 input
 * tokens and 3 output tokens is a prefill step that samples token 1 and two decode steps:
 * its reply is out 30 ms after its chunk arrives. The worker returns it at the next tick,
 * one period later (Metronome, section 4: "returns the tokens produced since
 * the last tick"), waiting at most frame_wait_fraction x B for it (section 3). */
static const char *tiny_streams(const char *server, const char *admission,
                                const char *streams, double wait_fraction)
{
    static char buf[1536];
    char *card = cz_test_path("tests/data/pipeline/tiny-omni.json");
    snprintf(buf, sizeof buf,
             "{\"model\": \"%s\", \"stage\": \"thinker\", \"hardware\": \"h100-sxm\","
             " \"cost\": {\"step_overhead_s\": 0.01}, \"server\": {%s}, \"admission\": %s,"
             " \"client\": {\"frame_wait_fraction\": %g},"
             " \"workload\": {\"streams\": {\"tokens_in_per_frame\": 4,"
             "   \"tokens_out_per_frame\": 3, %s}}}",
             card, server, admission, wait_fraction, streams);
    free(card);
    return buf;
}

static double num_of(const run *r, const char *key)
{
    const cJSON *it = cJSON_GetObjectItem(r->summary, key);
    cr_assert(it != NULL, "no '%s' in the summary", key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

/* One frame, its reply out at 30 ms. With B = 50 ms the reply is ready before the Step at
 * 50 ms: latency 0 (the GPU work lay in the period before). With B = 25 ms the Step at
 * 25 ms waits 5 ms for it (within the 20 ms wait). With B = 10 ms the Step at 10 ms gives
 * up after its 8 ms wait: the frame comes back empty at 18 ms, counted as the wait, and
 * on time (no deadline miss). */
Test(pipeline, stream_frame_is_returned_at_the_next_tick)
{
    const double period[] = {0.05, 0.025, 0.01};
    const double latency[] = {0, 0.005, 0.008};
    for (int i = 0; i < 3; i++) {
        char streams[256];
        snprintf(streams, sizeof streams,
                 "\"count\": 1, \"frame_period_s\": %g, \"duration_s\": %g", period[i],
                 period[i]);
        run r;
        run_config(&r, tiny_streams("\"kv_blocks\": 64", "{\"policy\": \"none\"}", streams, 0.8));
        cr_assert_eq(r.m.n_frames, 1);
        const cz_frame_record *f = &r.m.frames[0];
        cr_assert_float_eq(f->done_s, 0.03, EPS);
        cr_assert_float_eq(f->tick_s, period[i], EPS, "returned at the next tick");
        cr_assert_float_eq(f->latency_s, latency[i], EPS, "B %g: latency %g", period[i],
                           f->latency_s);
        cr_assert_eq(f->empty, i == 2);
        cr_assert_eq(f->missed, 0);
        cr_assert_float_eq(num_of(&r, "empty_frames"), i == 2, 0);
        if (i == 2)
            cr_assert_float_eq(num_of(&r, "first_empty_frame_s"), 0.018, EPS);
        else
            cr_assert(isnan(num_of(&r, "first_empty_frame_s")), "null when no frame is empty");
        run_free(&r);
    }
}

/* The wall on a scripted run. Two streams from t = 0, each adding 4 + 3 tokens every
 * B = 0.1 s to a 140-token pool (1-token blocks): Eq. 1 of section 3.1 with rho0 = 0 and
 * r = 70 tokens/s / 140 = 0.5 per second and stream gives t_sat = 1 / (2 x 0.5) = 1.0 s.
 * Step by step: after frame k a stream holds 7k + 6 tokens (its last sampled token has no
 * KV yet), so the chunks at t = 1.0 s need 2 x 74 > 140 and the pool saturates there.
 * Until then every reply is out 30-40 ms after its chunk: latency 0. At the wall one
 * stream is preempted (its KV recomputed later); the other returns frame 10 at 1.03 s and
 * ends at 1.13 s (frame 11: [1.10, 1.13]), which frees the pool: the preempted one
 * recomputes its 78 tokens in [1.13, 1.14] and decodes tokens 32, 33 by 1.16 s, 60 ms after
 * its Step at 1.10 s began to wait. With a 50 ms wait (0.5 B) that frame comes back empty
 * at 1.15 s, the first and only empty frame; its frame 11 is out at 1.19 s, in time for
 * the Step at 1.20 s. */
Test(pipeline, stream_wall_scripted)
{
    run r;
    run_config(&r, tiny_streams("\"kv_blocks\": 140, \"block_tokens\": 1", "{\"policy\": \"none\"}",
                                "\"count\": 2, \"frame_period_s\": 0.1, \"duration_s\": 1.2,"
                                " \"stagger\": false",
                                0.5));
    cr_assert_float_eq(r.st.kv_saturated_at_s, 1.0, EPS, "saturated at %g",
                       r.st.kv_saturated_at_s);
    cr_assert_eq(r.m.n_frames, 24);
    uint32_t victim = 2;
    for (uint64_t i = 0; i < r.m.n_frames; i++) {
        const cz_frame_record *f = &r.m.frames[i];
        cr_assert_float_eq(f->tick_s, 0.1 * (f->frame + 1), EPS);
        if (f->empty) {
            cr_assert_eq(victim, 2, "one empty frame");
            victim = f->stream;
            cr_assert_eq(f->frame, 10);
            cr_assert_float_eq(f->done_s, 1.16, EPS);
            cr_assert_float_eq(f->latency_s, 0.05, EPS);
        }
    }
    cr_assert(victim < 2);
    for (uint64_t i = 0; i < r.m.n_frames; i++) {
        const cz_frame_record *f = &r.m.frames[i];
        if (f->stream == victim && f->frame == 11)
            cr_assert_float_eq(f->done_s, 1.19, EPS);
        if (f->stream != victim || f->frame != 10)
            cr_assert_float_eq(f->latency_s, 0, 0, "stream %u frame %u", f->stream, f->frame);
    }
    cr_assert_float_eq(num_of(&r, "first_empty_frame_s"), 1.15, EPS);
    cr_assert_float_eq(num_of(&r, "empty_frames"), 1, 0);
    cr_assert_float_eq(num_of(&r, "deadline_misses"), 0, 0);
    run_free(&r);
}

/* The gateway measures the Step that waits. Eight sessions arrive 50 ms apart (B = 0.1 s)
 * and the server holds two sequences, so session 2 (at 0.10 s) is never scheduled while
 * sessions 0 and 1 live. Its first Step, at 0.20 s, waits: the gateway's tick at 0.20 s
 * sees it just begun (age 0) and every returned frame on time, and leaves the cap
 * unbounded; at 0.30 s it has waited the whole 80 ms, above the 30 ms target (0.3 B), so
 * the cap drops to floor(0.9 x 7 live) = 6 (session 6 arrived at 0.30 s, before the tick).
 * Session 7 (0.35 s) is refused; 7 admitted. Live sessions over the second half of the
 * arrivals [0.175, 0.35]: 4, then 5, 6, 7 from 0.20, 0.25, 0.30 s: mean 1.0 / 0.175. The
 * first frame to come back empty is session 2's, at 0.20 + 0.08 s. */
Test(pipeline, aimd_gateway_measures_the_waiting_step)
{
    run r;
    run_config(&r, tiny_streams("\"kv_blocks\": 64, \"max_num_seqs\": 2",
                                "{\"policy\": \"aimd\", \"target_fraction\": 0.3}",
                                "\"count\": 8, \"frame_period_s\": 0.1, \"duration_s\": 0.5,"
                                " \"arrival_spacing_s\": 0.05",
                                0.8));
    cr_assert_float_eq(num_of(&r, "sessions_admitted"), 7, 0);
    cr_assert_float_eq(num_of(&r, "sessions_rejected"), 1, 0);
    cr_assert_float_eq(num_of(&r, "admission_cap"), 6, 0);
    cr_assert_float_eq(num_of(&r, "mean_live_sessions"), 1.0 / 0.175, 1e-4);
    cr_assert_float_eq(num_of(&r, "first_empty_frame_s"), 0.28, EPS);
    run_free(&r);
}

/* The shipped baseline at the paper's N = 128 (experiments/metronome/unbounded.json):
 * the pool of 512,000 tokens fills at 128 x (25 + 30) tokens per 2 s, so Eq. 1 gives
 * t_sat = 512,000 / (128 x 27.5) = 145.45 s; the simulated pool saturates within 1 % of it,
 * every frame before is returned without waiting (the cliff is memory, not compute), and
 * the first empty frame comes back after it. */
Test(pipeline, metronome_unbounded_walls_by_memory)
{
    char *path = cz_test_path("experiments/metronome/unbounded.json");
    cJSON *j;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_load(path, &j, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_json_set_path(j, "workload.streams.count=128", &err), CZ_OK, "%s", err.msg);
    char *text = cJSON_PrintUnformatted(j);
    run r;
    run_config(&r, text);
    double t_sat = 512000.0 / (128 * 27.5);
    cr_assert(fabs(r.st.kv_saturated_at_s - t_sat) / t_sat < 0.01, "saturated at %g s, Eq. 1 %g s",
              r.st.kv_saturated_at_s, t_sat);
    for (uint64_t i = 0; i < r.m.n_frames; i++)
        if (r.m.frames[i].tick_s < r.st.kv_saturated_at_s)
            cr_assert_float_eq(r.m.frames[i].latency_s, 0, 0);
    double first = num_of(&r, "first_empty_frame_s");
    cr_assert(first > r.st.kv_saturated_at_s && first < r.st.kv_saturated_at_s + 2 * 2.0,
              "first empty frame at %g s", first);
    cr_assert_float_eq(num_of(&r, "deadline_misses"), 0, 0);
    run_free(&r);
    cJSON_free(text);
    cJSON_Delete(j);
    free(path);
}

static const char *tts_cfg(const char *card_file, const char *scheduler)
{
    static char buf[1024];
    char *card = cz_test_path(card_file);
    snprintf(buf, sizeof buf,
             "{\"model\": \"%s\", \"hardware\": \"h100-sxm\","
             " \"cost\": {\"step_overhead_s\": 0.01}, \"scheduler\": %s,"
             " \"server\": {\"kv_blocks\": 64},"
             " \"workload\": {\"trace\": {\"path\": \"one_turn.jsonl\"}}}",
             card, scheduler);
    free(card);
    return buf;
}

/* VoxServe's asynchronous pipeline (VoxServe, section 3.2.2, Figure 5) on
 * one GPU, by hand (tests/data/pipeline/tiny-tts.json): an LLM step is 10 ms on the host
 * and 10 ms of kernels, a detokenizer call 10 ms on the host and 20 ms of kernels; one
 * turn of 6 audio tokens in chunks of 2.
 *
 * Synchronous, one step at a time: LLM steps [0, .02] .. [.02, .04] (tokens 1, 2: chunk 1),
 * detokenizer [.04, .07] (audio 1), LLM [.07, .09] [.09, .11] (chunk 2), detokenizer
 * [.11, .14], LLM [.14, .16] [.16, .18] (the last chunk), detokenizer [.18, .21].
 *
 * Asynchronous with contention 1.5: the LLM's first two steps end at .02 and .04. At .04
 * LLM step 3 and detokenizer call 1 start together: their host parts share the host thread
 * (each at half speed) until .06; then both kernels co-run at 1 / 1.5: the LLM's 10 ms end
 * at .075 (token 3), and the detokenizer, with 10 of its 20 ms done, runs alone to .085
 * (audio 1). LLM step 4: host [.075, .085] beside the detokenizer's kernels, kernels alone
 * [.085, .095] (token 4, chunk 2). At .095 LLM step 5 and call 2 repeat the pattern of .04:
 * token 5 at .13, audio 2 at .14; step 6: host [.13, .14], kernels [.14, .15] (token 6, the
 * last chunk); call 3 alone: [.15, .18]. */
Test(pipeline, async_pipeline_hand_timeline)
{
    const struct {
        const char *sched;
        double audio[3], llm_done;
    } cases[] = {
        {"\"fcfs\"", {0.07, 0.14, 0.21}, 0.18},
        {"{\"name\": \"fcfs\", \"async_pipeline\": true, \"corun_slowdown\": 1.5}",
         {0.085, 0.14, 0.18}, 0.15},
    };
    for (size_t k = 0; k < 2; k++) {
        run r;
        run_config(&r, tts_cfg("tests/data/pipeline/tiny-tts.json", cases[k].sched));
        const cz_req_record *llm = rec_of(&r, 0);
        cr_assert_eq(llm->output_tokens, 6);
        cr_assert_float_eq(llm->first_token_s, 0.02, EPS);
        cr_assert_float_eq(llm->finish_s, cases[k].llm_done, EPS, "case %zu: LLM done at %g", k,
                           llm->finish_s);
        const cz_audio_record *a = &r.m.audio[0];
        cr_assert_float_eq(a->first_audio_s, cases[k].audio[0], EPS, "case %zu: %g", k,
                           a->first_audio_s);
        cr_assert_float_eq(a->last_audio_s, cases[k].audio[2], EPS, "case %zu: %g", k,
                           a->last_audio_s);
        cr_assert_eq(a->chunks, 3);
        /* Eq. 2: audio 2 is due by audio 1 + 0.16 s, audio 3 by audio 1 + 0.32 s */
        cr_assert_eq(a->underruns, 0);
        cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "streaming_viability")->valuedouble,
                           1.0, 0);
        run_free(&r);
    }
}

/* A detokenizer conditioned on a reference clip reads its 3 prompt tokens in every call
 * (App. A), in 3 passes (tests/data/pipeline/tiny-tts-prompt.json): the first chunk's 2
 * tokens, queued when the LLM's second step ends at .02, take (2 + 3) x 1 ms of compute
 * and 3 x 10 ms of per-pass overhead: audio 1 at .02 + .035. */
Test(pipeline, detokenizer_reads_its_reference_every_call)
{
    run r;
    run_config(&r, tts_cfg("tests/data/pipeline/tiny-tts-prompt.json", "\"fcfs\""));
    cr_assert_float_eq(r.m.audio[0].first_audio_s, 0.055, EPS, "%g",
                       r.m.audio[0].first_audio_s);
    run_free(&r);
}

/* Inter-token latency per stage: LiveServe's ShareGPT audio deployment (a thinker and a
 * talker; experiments/liveserve/sharegpt_audio.json, 100 sessions). Each stage's object of
 * the summary carries the ITL statistics of its own gaps; the first stage's are the
 * top-level ones (vLLM's ITL, the text model's), and the results file's /itl rows name the
 * stage they were recorded at. */
Test(pipeline, itl_per_stage)
{
    char *path = cz_test_path("experiments/liveserve/sharegpt_audio.json");
    char *dir = cz_test_path("experiments/liveserve");
    cJSON *j = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_load(path, &j, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(cz_json_set_path(j, "workload.synthetic.requests=100", &err), CZ_OK, "%s",
                 err.msg);
    run r;
    cz_workload_init(&r.wl);
    cr_assert_eq(cz_config_parse(j, path, dir, &r.cfg, &r.wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics_init(&r.m, 0.1, 0);
    cr_assert_eq(cz_sim_run(&r.cfg, &r.wl, &r.m, &r.st, NULL, NULL, &err), CZ_OK, "%s",
                 err.msg);
    cz_metrics_summarize(&r.m, &r.cfg.slo, &r.sum);
    r.summary = cz_summary_json(&r.sum);
    cz_run_summary_json(&r.cfg, &r.m, &r.st, &r.sum, r.summary);

    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(r.summary, "stages");
    cr_assert_eq(cJSON_GetArraySize(stages), 2);
    static const char *const names[] = {"thinker", "talker"};
    static const char *const keys[] = {"mean_itl_ms", "median_itl_ms", "std_itl_ms",
                                       "p50_itl_ms",  "p90_itl_ms",    "p95_itl_ms",
                                       "p99_itl_ms",  "max_itl_ms"};
    double mean[2];
    for (int s = 0; s < 2; s++) {
        const cJSON *st = cJSON_GetArrayItem(stages, s);
        cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(st, "stage")->valuestring, names[s]);
        for (size_t k = 0; k < CZ_ARRAY_LEN(keys); k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, keys[k]);
            cr_assert(cJSON_IsNumber(v), "%s: %s", names[s], keys[k]);
            if (s == 0) {
                const cJSON *top = cJSON_GetObjectItemCaseSensitive(r.summary, keys[k]);
                cr_assert(cJSON_IsNumber(top));
                cr_assert_eq(v->valuedouble, top->valuedouble, "%s", keys[k]);
            }
        }
        mean[s] = cJSON_GetObjectItemCaseSensitive(st, "mean_itl_ms")->valuedouble;
    }
    /* the talker decodes 3.5 codec frames a text token, one step each: its gaps are not
     * the thinker's */
    cr_assert(mean[0] > 0 && mean[1] > 0 && mean[0] != mean[1], "%g %g", mean[0], mean[1]);

    /* the results file: /itl's stage column holds both stages, as the enum names them, and
     * its gaps at each stage sum to the tokens after each turn's first there */
    char h5[] = "/tmp/cz_test_pipeline_XXXXXX";
    int fd = mkstemp(h5);
    cr_assert(fd >= 0);
    close(fd);
    cz_results_stages rs;
    cz_run_stages(&r.cfg, &rs);
    cr_assert(rs.n_ar == 2 && strcmp(rs.ar[0], "thinker") == 0 && strcmp(rs.ar[1], "talker") == 0);
    cr_assert_eq(rs.n_pipe, 4);
    cr_assert_eq(cz_results_write_h5(h5, &r.m, &rs, "{}", "{}", r.cfg.seed, &err), CZ_OK, "%s",
                 err.msg);
    const char *const cols[] = {"stage", "count"};
    double *c[2];
    size_t n;
    cr_assert_eq(cz_h5_read_columns(h5, "itl", cols, 2, c, &n, &err), CZ_OK, "%s", err.msg);
    double gaps[2] = {0, 0}, want[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        cr_assert(c[0][i] == 0 || c[0][i] == 1);
        gaps[(int)c[0][i]] += c[1][i];
    }
    for (uint64_t i = 0; i < r.m.n_req; i++)
        if (r.m.req[i].output_tokens > 1)
            want[r.m.req[i].stage] += r.m.req[i].output_tokens - 1;
    cr_assert(gaps[0] > 0 && gaps[1] > 0);
    cr_assert_float_eq(gaps[0], want[0], 0, "thinker: %g gaps, %g tokens after a first", gaps[0],
                       want[0]);
    cr_assert_float_eq(gaps[1], want[1], 0, "talker: %g gaps, %g tokens after a first", gaps[1],
                       want[1]);
    free(c[0]);
    free(c[1]);
    remove(h5);
    run_free(&r);
    cJSON_Delete(j);
    free(path);
    free(dir);
}

/* ---- routers in the runtime (docs/policies.md, "Routers") ---- */

typedef struct route_log {
    uint32_t rep_of[4096]; /* per session: the replica whose step first ran it, +1 */
} route_log;

static void log_step(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs, uint32_t n,
                     double now)
{
    (void)now;
    route_log *l = ctx;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = cz_server_seq(srv, seqs[i])->session;
        if (s < 4096 && l->rep_of[s] == 0)
            l->rep_of[s] = rep + 1;
    }
}

/* Runs `json` with the step observer filling `l`. */
static void run_routed(run *r, const char *json, route_log *l)
{
    cJSON *j = cJSON_Parse(json);
    cr_assert(j != NULL);
    cz_err err;
    cz_err_clear(&err);
    cz_workload_init(&r->wl);
    cr_assert_eq(cz_config_parse(j, "test", ".", &r->cfg, &r->wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics_init(&r->m, 0.0, 0);
    cz_sim_observer obs = {.ctx = l, .step_ended = log_step};
    cz_sim *s;
    cr_assert_eq(cz_sim_open(&r->cfg, &r->wl, &r->m, &obs, &s, &err), CZ_OK, "%s", err.msg);
    cz_sim_state st;
    while ((st = cz_sim_advance(s)) == CZ_SIM_RAN)
        ;
    cr_assert_eq(cz_sim_close(s, st, &r->st, &err), CZ_OK, "%s", err.msg);
    cz_metrics_summarize(&r->m, &r->cfg.slo, &r->sum);
    r->summary = cz_summary_json(&r->sum);
    cJSON_Delete(j);
}

/* A fleet past the old 64-replica limit: round robin gives each of 300 replicas
 * exactly two of 600 requests, and every request completes. */
Test(pipeline, round_robin_over_300_replicas)
{
    const char *cfg =
        "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\", \"router\": \"round_robin\","
        " \"pipeline\": {\"llm\": {\"replicas\": 300}}, \"sim\": {\"timeline_interval_s\": 0},"
        " \"workload\": {\"synthetic\": {\"requests\": 600, \"input_tokens\": 100, \"output_tokens\": 20},"
        "   \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 100}}}";
    static route_log l;
    memset(&l, 0, sizeof l);
    run r;
    run_routed(&r, cfg, &l);
    cr_assert_eq(r.cfg.n_gpus, 300);
    uint32_t per[300] = {0};
    for (uint32_t s = 0; s < 600; s++) {
        cr_assert(l.rep_of[s] > 0, "session %u ran", s);
        per[l.rep_of[s] - 1]++;
        cr_assert_eq(l.rep_of[s] - 1, s % 300, "session %u in arrival order", s);
    }
    for (uint32_t k = 0; k < 300; k++)
        cr_assert_eq(per[k], 2);
    cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "completed")->valuedouble, 600, 0);
    run_free(&r);
}

/* Late load signals: requests 2 s apart each finish long before the next arrives. Seeing
 * the truth, least-outstanding finds every replica idle and takes replica 0 each time;
 * with loads published every 100 s it sees only its own routing since the last
 * publication, and spreads them 0, 1, 2, 0, 1, 2. vLLM's rule (its queues) does the same. */
Test(pipeline, least_outstanding_with_late_signals)
{
    for (int late = 0; late < 4; late++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg,
                 "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\","
                 " \"router\": {\"policy\": \"%s\", \"signal_delay_s\": %s},"
                 " \"pipeline\": {\"llm\": {\"replicas\": 3}}, \"sim\": {\"timeline_interval_s\": 0},"
                 " \"workload\": {\"synthetic\": {\"requests\": 6, \"input_tokens\": 100,"
                 "   \"output_tokens\": 5}, \"arrivals\": {\"process\": \"gamma\", \"rate_rps\": 0.5,"
                 "   \"burstiness\": 1e6}}}",
                 late < 2 ? "least_outstanding" : "vllm_dp", late % 2 ? "100" : "0");
        static route_log l;
        memset(&l, 0, sizeof l);
        run r;
        run_routed(&r, cfg, &l);
        for (uint32_t s = 0; s < 6; s++)
            cr_assert_eq(l.rep_of[s] - 1, late % 2 ? s % 3 : 0, "case %d: session %u on %u", late,
                         s, l.rep_of[s] - 1);
        run_free(&r);
    }
}

/* ---- the prefix-aware routers (llm_d, kv_router) end to end ---- */

/* A Mooncake trace of `n` requests 100 ms apart in groups of four consecutive ones that
 * share a 2,048-token prefix (4 trace blocks of 512) and add 1,024 tokens of their own:
 * round robin sends a group's four to four replicas, so no prompt finds its prefix;
 * a prefix-aware router sends the three after the first to where it is cached. Written to
 * a temporary file whose path is returned (the caller removes and frees it). */
static char *grouped_trace(uint32_t n)
{
    char *path = cz_xstrdup("/tmp/cz_test_prefix_routers_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f != NULL);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t g = i / 4, own = 1000000 + 2 * i;
        fprintf(f,
                "{\"timestamp\": %u, \"input_length\": 3072, \"output_length\": 16,"
                " \"hash_ids\": [%u, %u, %u, %u, %u, %u]}\n",
                100 * i, 4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3, own, own + 1);
    }
    fclose(f);
    return path;
}

/* Runs the grouped trace on 4 replicas under `router`, checking the router's index
 * against the caches every 200 events; returns the stage's prefix cache hit rate (-1 with
 * prefix caching off). */
static double grouped_run(const char *trace, const char *router, bool caching)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\", \"router\": \"%s\","
             " \"pipeline\": {\"llm\": {\"replicas\": 4}}, \"sim\": {\"timeline_interval_s\": 0},"
             " \"server\": {\"prefix_caching\": %s, \"max_model_len\": 0},"
             " \"workload\": {\"trace\": {\"path\": \"%s\", \"format\": \"mooncake\"}}}",
             router, caching ? "true" : "false", trace);
    cJSON *j = cJSON_Parse(cfg);
    cr_assert(j != NULL);
    cz_err err;
    cz_err_clear(&err);
    run r;
    cz_workload_init(&r.wl);
    cr_assert_eq(cz_config_parse(j, "test", ".", &r.cfg, &r.wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics_init(&r.m, 0.0, 0);
    cz_sim *s;
    cr_assert_eq(cz_sim_open(&r.cfg, &r.wl, &r.m, NULL, &s, &err), CZ_OK, "%s", err.msg);
    cz_sim_state st;
    uint64_t events = 0;
    while ((st = cz_sim_advance(s)) == CZ_SIM_RAN)
        if (++events % 200 == 0)
            cr_assert(cz_deploy_check_router_index(cz_sim_deploy(s), &err), "%s: %s", router,
                      err.msg);
    cr_assert(cz_deploy_check_router_index(cz_sim_deploy(s), &err), "%s: %s", router, err.msg);
    cr_assert_eq(cz_sim_close(s, st, &r.st, &err), CZ_OK, "%s", err.msg);
    cz_metrics_summarize(&r.m, &r.cfg.slo, &r.sum);
    r.summary = cz_summary_json(&r.sum);
    cr_assert_float_eq(cJSON_GetObjectItem(r.summary, "completed")->valuedouble, 200, 0, "%s",
                       router);
    cz_stage_summary ss;
    cz_stage_summarize(&r.m, 0, &ss);
    double rate = ss.prefix_caching ? ss.pc_hit_rate : -1;
    run_free(&r);
    cJSON_Delete(j);
    return rate;
}

/* On prompts that share prefixes in groups, llm-d's scorers find the replica holding a
 * group's prefix (2,048 of 3,072 tokens) for the group's last three: a hit rate of
 * 3/4 x 2/3 = 0.5. Dynamo's cost sends the second there too, but a third finds the holder
 * as costly as an idle replica (its two requests' blocks are active) and goes to the lower
 * index of the two: 0.34 here. Round robin finds no prefix, least outstanding requests a
 * few (0.17); the router's index agrees with the caches throughout. With prefix caching
 * off the two still route every request, by their load terms. */
Test(pipeline, prefix_aware_routers_find_shared_prefixes)
{
    char *trace = grouped_trace(200);
    double rr = grouped_run(trace, "round_robin", true);
    double ll = grouped_run(trace, "least_loaded", true);
    double llmd = grouped_run(trace, "llm_d", true);
    double kv = grouped_run(trace, "kv_router", true);
    cr_assert(rr < 0.05 && ll < 0.25, "round robin %g, least loaded %g", rr, ll);
    cr_assert(llmd > 0.45 && kv > 0.3, "llm_d %g, kv_router %g", llmd, kv);
    cr_assert(llmd > ll + 0.2 && kv > ll + 0.1, "least loaded %g", ll);
    cr_assert_eq(grouped_run(trace, "llm_d", false), -1);
    cr_assert_eq(grouped_run(trace, "kv_router", false), -1);
    remove(trace);
    free(trace);
}

/* Dynamo's active blocks grow with the output when the router tracks output blocks
 * (router.track_output_blocks, as Dynamo's --router-track-output-blocks; off by default):
 * request 0 (512 tokens, one trace block of 512 = 32 blocks of 16) generates 2,000 tokens
 * on replica 0; request 1 shares its 512-token prefix and adds 512 of its own. Routed
 * right away (at 0.1 s, a few tokens in), replica 0 costs 32 prefill blocks + 32 active +
 * 32 new = 96 against an idle replica's 64 + 0 + 64 = 128: the prefix wins. Routed at 8 s,
 * request 0's 512 + 2,000 tokens have grown past 64 blocks (its output fills a block every
 * 16 tokens): replica 0 costs 96 + 32 or more and replica 1 takes it. Without the
 * tracking the active blocks stay the prompt's 32 and both go to replica 0. The
 * fast-forward changes nothing. */
Test(pipeline, kv_router_active_blocks_grow_with_the_output)
{
    for (int track = 0; track < 2; track++) {
        for (int late = 0; late < 2; late++) {
            for (int ff = 0; ff < 2; ff++) {
                char trace[] = "/tmp/cz-kvgrow-XXXXXX";
                int fd = mkstemp(trace);
                cr_assert(fd >= 0);
                FILE *f = fdopen(fd, "w");
                cr_assert(f != NULL);
                fprintf(f,
                        "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 2000,"
                        " \"hash_ids\": [1]}\n"
                        "{\"timestamp\": %d, \"input_length\": 1024, \"output_length\": 16,"
                        " \"hash_ids\": [1, 2]}\n",
                        late ? 8000 : 100);
                fclose(f);
                char cfg[1024];
                snprintf(cfg, sizeof cfg,
                         "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\","
                         " \"router\": {\"policy\": \"kv_router\"%s},"
                         " \"pipeline\": {\"llm\": {\"replicas\": 2}},"
                         " \"sim\": {\"timeline_interval_s\": 0, \"fast_forward\": %s},"
                         " \"server\": {\"prefix_caching\": true, \"max_model_len\": 0},"
                         " \"workload\": {\"trace\": {\"path\": \"%s\","
                         " \"format\": \"mooncake\"}}}",
                         track ? ", \"track_output_blocks\": true" : "",
                         ff ? "true" : "false", trace);
                static route_log l;
                memset(&l, 0, sizeof l);
                run r;
                run_routed(&r, cfg, &l);
                unlink(trace);
                cr_assert_eq(r.cfg.router.track_output_blocks, track == 1);
                cr_assert_eq(l.rep_of[0], 1, "request 0 on %u", l.rep_of[0] - 1);
                cr_assert_eq(l.rep_of[1], late && track ? 2u : 1u,
                             "tracking %d, late %d, fast-forward %d: on %u", track, late, ff,
                             l.rep_of[1] - 1);
                /* request 0 was still generating when request 1 came */
                const cz_req_record *r0 = NULL;
                for (uint64_t i = 0; i < r.m.n_req; i++)
                    if (r.m.req[i].output_tokens == 2000)
                        r0 = &r.m.req[i];
                cr_assert(r0 != NULL && r0->finish_s > 8.5, "request 0 ends at %g",
                          r0 ? r0->finish_s : NAN);
                run_free(&r);
            }
        }
    }
}

/* A router or a placement the parser cannot take is an error naming the file. */
Test(pipeline, config_rejects_bad_routers)
{
    const char *bad[] = {
        "{\"model\": \"llama-3-8b\", \"router\": \"nearest\"}",
        "{\"model\": \"llama-3-8b\", \"router\": {\"policy\": \"random\", \"delay\": 1}}",
        "{\"model\": \"llama-3-8b\", \"router\": {\"signal_delay_s\": -1}}",
        "{\"model\": \"llama-3-8b\", \"router\": \"llm-d\"}",
        "{\"model\": \"llama-3-8b\", \"router\": {\"policy\": \"llm_d\", \"queue_weight\": -1}}",
        "{\"model\": \"llama-3-8b\", \"router\": {\"policy\": \"kv_router\","
        " \"overlap_score_weight\": \"high\"}}",
        "{\"model\": \"llama-3-8b\", \"router\": {\"policy\": \"kv_router\","
        " \"track_output_blocks\": \"yes\"}}",
        "{\"model\": \"llama-3-8b\", \"pipeline\": {\"llm\": {\"replicas\": 2, \"gpus\": [0, 1],"
        " \"first_gpu\": 3}}}",
        "{\"model\": \"llama-3-8b\", \"pipeline\": {\"llm\": {\"replicas\": 65, \"gpus\": [0]}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = cJSON_Parse(bad[i]);
        cr_assert(j != NULL);
        cz_config c;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(cz_config_parse(j, "t.json", ".", &c, &wl, &err), CZ_EINVAL, "%s", bad[i]);
        cr_assert(strstr(err.msg, "t.json") != NULL, "%s", err.msg);
        if (strstr(bad[i], "track_output_blocks"))
            cr_assert(strstr(err.msg, "t.json: router: field 'track_output_blocks': expected "
                                      "true or false") != NULL,
                      "%s", err.msg);
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
}

/* ---- disaggregated prefill and decode ---- */

/* A sessions trace at `path`: `n` sessions, each of `turns` turns of 64 input and 8 output
 * tokens, all arriving at 0 (later turns right after the one before: timing open, arrival
 * 0 each). */
static void pd_trace(const char *path, uint32_t n, uint32_t turns)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fprintf(f, "{\"format\":\"cadenza-sessions\",\"version\":1,\"arrivals_given\":true}\n");
    for (uint32_t s = 0; s < n; s++) {
        fprintf(f, "{\"session\":\"s%u\",\"class\":\"rt\",\"timing\":\"open\",\"turns\":[", s);
        for (uint32_t t = 0; t < turns; t++)
            fprintf(f, "%s{\"arrival_s\":%u,\"in_text_tokens\":64,\"out_text_tokens\":8}",
                    t ? "," : "", t * 100);
        fprintf(f, "]}\n");
    }
    fclose(f);
}

/* Runs `n` sessions of `turns` turns (pd_trace) on Llama-3-8B with `prefill` and `decode`
 * replicas behind `router`, the KV moving over a 1 MB/s link with 0.5 s latency. */
static void pd_run(run *r, uint32_t n, uint32_t turns, uint32_t prefill, uint32_t decode,
                   const char *router)
{
    char path[] = "/tmp/cz-pd-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    pd_trace(path, n, turns);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\", \"router\": \"%s\","
             " \"disaggregation\": {\"prefill\": {\"replicas\": %u},"
             "                      \"decode\": {\"replicas\": %u},"
             "                      \"link_GBps\": 0.001, \"link_latency_s\": 0.5},"
             " \"workload\": {\"trace\": {\"path\": \"%s\"}}}",
             router, prefill, decode, path);
    run_config(r, cfg);
    unlink(path);
}

/* One turn: the prefill replica samples a token and holds the KV; the decode replica pulls
 * the 63 tokens before the last (131,072 bytes each for Llama-3-8B's 8 KV heads of 128 in
 * bf16 over 32 layers) over a 1 MB/s link with 0.5 s latency: 8.758 s, all on the turn's
 * critical path (its TTFT) and in its record's kv_load_s. The headline is the decode
 * pool's (stage 0); the prefill pool's record is stage 1. */
Test(pipeline, disaggregated_turn_pulls_its_kv)
{
    run r;
    pd_run(&r, 1, 1, 1, 1, "session");
    const cz_req_record *dec = rec_of(&r, 0), *pre = rec_of(&r, 1);
    double xfer = 0.5 + 63.0 * 131072.0 / 1e6;
    cr_assert_float_eq(dec->kv_load_s, xfer, 1e-9, "kv_load_s %.9f", dec->kv_load_s);
    cr_assert_eq(dec->outcome, CZ_REQ_COMPLETED);
    cr_assert_eq(dec->output_tokens, 8);
    cr_assert_eq(pre->output_tokens, 1);
    double gap = dec->first_token_s - pre->first_token_s;
    cr_assert(gap > xfer && gap < xfer + 0.1, "first tokens %.6f apart", gap);
    cr_assert_float_eq(num_of(&r, "mean_ttft_ms"), 1e3 * (dec->first_token_s - dec->arrival_s),
                       1e-6);
    const cJSON *pd = cJSON_GetObjectItem(r.summary, "disaggregation");
    cr_assert_eq(cJSON_GetObjectItem(pd, "kv_transfers")->valuedouble, 1);
    cr_assert_float_eq(cJSON_GetObjectItem(pd, "kv_transfer_bytes")->valuedouble,
                       63.0 * 131072.0, 1e-3);
    cr_assert_eq(num_of(&r, "gpus"), 2);
    run_free(&r);
}

/* Two turns prefilled by the one prefill replica go to two decode replicas: both pulls
 * leave the prefill GPU's link and share it, first come first served: the second waits
 * for the first (about two transfer times), each decode GPU's link idle. */
Test(pipeline, disaggregated_pulls_share_the_source_link)
{
    run r;
    pd_run(&r, 2, 1, 1, 2, "round_robin");
    double xfer = 0.5 + 63.0 * 131072.0 / 1e6, load[2];
    uint32_t n = 0;
    for (uint64_t i = 0; i < r.m.n_req; i++)
        if (r.m.req[i].stage == 0)
            load[n++] = r.m.req[i].kv_load_s;
    cr_assert_eq(n, 2);
    double lo = load[0] < load[1] ? load[0] : load[1], hi = load[0] < load[1] ? load[1] : load[0];
    cr_assert_float_eq(lo, xfer, 1e-9, "%.9f %.9f (%.9f)", lo, hi, xfer);
    /* the second was admitted at most a prefill step after the first */
    cr_assert(hi <= 2 * xfer + 1e-9 && hi > 2 * xfer - 0.05, "%.9f %.9f (%.9f)", lo, hi, xfer);
    run_free(&r);
}

/* A session's second turn: both pools align to the decode pool's context (64 + 8 tokens
 * after the first turn). The prefill replica holds 65 of them (its prompt and its one
 * token) and is given the rest of the first reply as input; the decode replica still holds
 * its 71 computed tokens and pulls only the new turn's 64: 63 + 64 tokens pulled in all. */
Test(pipeline, disaggregated_sessions_pull_only_what_is_new)
{
    run r;
    pd_run(&r, 1, 2, 1, 1, "session");
    const cJSON *pd = cJSON_GetObjectItem(r.summary, "disaggregation");
    cr_assert_eq(cJSON_GetObjectItem(pd, "kv_transfers")->valuedouble, 2);
    cr_assert_float_eq(cJSON_GetObjectItem(pd, "kv_transfer_bytes")->valuedouble,
                       (63.0 + 64.0) * 131072.0, 1e-3);
    cr_assert_eq(num_of(&r, "completed"), 2);
    uint32_t in_pre[2] = {0}, k = 0;
    for (uint64_t i = 0; i < r.m.n_req; i++)
        if (r.m.req[i].stage == 1 && k < 2)
            in_pre[k++] = r.m.req[i].input_tokens;
    cr_assert_eq(in_pre[0], 64);
    cr_assert_eq(in_pre[1], 64 + 7, "the prefill pool's second turn reads %u", in_pre[1]);
    run_free(&r);
}

/* Prefix caching on both pools, a Mooncake trace: the second request shares its first
 * three 512-token blocks with the first. The decode replica cached the first request's
 * pulled context when it ended, so it finds those 1,536 tokens and pulls only the
 * 1,599 - 1,536 = 63 after them; its pool's hit rate says so, and llm-d's router, with an
 * index per pool, sends the second request to the decode replica that holds its prefix. */
Test(pipeline, disaggregated_decode_pool_reuses_pulled_prefixes)
{
    char path[] = "/tmp/cz-pd-apc-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f != NULL);
    fprintf(f, "{\"timestamp\": 0, \"input_length\": 1600, \"output_length\": 4,"
               " \"hash_ids\": [1, 2, 3, 4]}\n"
               "{\"timestamp\": 20000, \"input_length\": 1600, \"output_length\": 4,"
               " \"hash_ids\": [1, 2, 3, 5]}\n");
    fclose(f);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\", \"router\": \"llm_d\","
             " \"disaggregation\": {\"prefill\": {\"replicas\": 2}, \"decode\": {\"replicas\": 3}},"
             " \"server\": {\"prefix_caching\": true},"
             " \"workload\": {\"trace\": {\"path\": \"%s\", \"format\": \"mooncake\"}}}",
             path);
    run r;
    run_config(&r, cfg);
    unlink(path);
    cr_assert_eq(num_of(&r, "completed"), 2);
    const cJSON *pd = cJSON_GetObjectItem(r.summary, "disaggregation");
    cr_assert_eq(cJSON_GetObjectItem(pd, "kv_transfers")->valuedouble, 2);
    cr_assert_float_eq(cJSON_GetObjectItem(pd, "kv_transfer_bytes")->valuedouble,
                       (1599.0 + 63.0) * 131072.0, 1e-3);
    const cJSON *st = cJSON_GetObjectItem(r.summary, "stages");
    const cJSON *dec = cJSON_GetArrayItem(st, 0), *pre = cJSON_GetArrayItem(st, 1);
    cr_assert_str_eq(cJSON_GetObjectItem(dec, "stage")->valuestring, "decode");
    cr_assert_eq(cJSON_GetObjectItem(dec, "prefix_cache_hits")->valuedouble, 1536);
    cr_assert_eq(cJSON_GetObjectItem(pre, "prefix_cache_hits")->valuedouble, 1536);
    /* both decode records of the second request's: it found the prefix where it went */
    uint32_t k = 0;
    for (uint64_t i = 0; i < r.m.n_req; i++)
        if (r.m.req[i].stage == 0 && k++ == 1)
            cr_assert_eq(r.m.req[i].cached_tokens, 1536, "%u", r.m.req[i].cached_tokens);
    /* one lookup per turn and pool: the decode admission after the pull is not another */
    cr_assert_eq(cJSON_GetObjectItem(dec, "prefix_cache_queries")->valuedouble, 1600 + 1600);
    cr_assert_eq(k, 2);
    run_free(&r);
}

/* Prefix caching counts a session's later turn as vLLM counts the follow-up request that
 * resends the conversation: its whole context (64 + 8 + 64 tokens) is looked up, and the
 * 71 tokens the replica still holds (the first turn's prompt and the 7 replies it fed
 * back; the last reply is computed with the new turn) are hits, also its record's
 * cached_tokens. The first turn looks up its 64 and finds nothing. */
Test(pipeline, session_history_counts_as_prefix_hits)
{
    char path[] = "/tmp/cz-apc-ses-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    pd_trace(path, 1, 2);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model\": \"llama-3-8b\", \"hardware\": \"h100-sxm\","
             " \"server\": {\"prefix_caching\": true},"
             " \"workload\": {\"trace\": {\"path\": \"%s\"}}}", path);
    run r;
    run_config(&r, cfg);
    unlink(path);
    cr_assert_eq(num_of(&r, "completed"), 2);
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(r.summary, "stages"), 0);
    cr_assert_eq(cJSON_GetObjectItem(st, "prefix_cache_queries")->valuedouble, 64 + 136);
    cr_assert_eq(cJSON_GetObjectItem(st, "prefix_cache_hits")->valuedouble, 71);
    cr_assert_eq(r.m.n_req, 2);
    cr_assert_eq(r.m.req[0].cached_tokens, 0);
    cr_assert_eq(r.m.req[1].cached_tokens, 71);
    run_free(&r);
}

Test(pipeline, config_rejects_bad_disaggregation)
{
    const char *bad[] = {
        "{\"model\": \"qwen3-omni\", \"disaggregation\": {}}",
        ("{\"model\": \"llama-3-8b\", \"pipeline\": {\"llm\": {\"replicas\": 2}},"
         " \"disaggregation\": {}}"),
        "{\"model\": \"llama-3-8b\", \"disaggregation\": {\"prefill\": {\"replicas\": 0}}}",
        "{\"model\": \"llama-3-8b\", \"disaggregation\": {\"link_GBps\": 0}}",
        "{\"model\": \"llama-3-8b\", \"disaggregation\": {\"pools\": 2}}",
        "{\"model\": \"llama-3-8b\", \"disaggregation\": {\"decode\": {\"tp\": 3}}}",
        "{\"model\": \"llama-3-8b\", \"disaggregation\": {\"decode\": {\"kv_window_tokens\": 64}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = cJSON_Parse(bad[i]);
        cr_assert(j != NULL);
        cz_config c;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(cz_config_parse(j, "t.json", ".", &c, &wl, &err), CZ_EINVAL, "%s", bad[i]);
        cr_assert(strstr(err.msg, "t.json") != NULL && strstr(err.msg, "disaggregation"),
                  "%s", err.msg);
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
}
