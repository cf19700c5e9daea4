/* test_sim.c - the simulator against queueing theory (smaller versions of
 * experiments/validation/), determinism, and config errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <unistd.h>

#include "cz_json.h"
#include "cz_results.h"
#include "cz_run.h"
#include "cz_sim.h"
#include "cz_sim_int.h"
#include "test_util.h"


/* Loads the shipped experiment `rel` (relative to the source root), applies the `--set`
 * assignments sets[0..n_sets) (NULL ones skipped) and parses it; the caller deletes *j and
 * frees *wl. */
static void load_experiment(const char *rel, const char *const *sets, size_t n_sets, cJSON **j,
                            cz_config *cfg, cz_workload *wl)
{
    char *path = cz_test_path(rel);
    char *dir = strdup(path);
    *strrchr(dir, '/') = '\0';
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_load(path, j, &err), CZ_OK, "%s", err.msg);
    for (size_t i = 0; i < n_sets; i++)
        if (sets[i])
            cr_assert_eq(cz_json_set_path(*j, sets[i], &err), CZ_OK, "%s", err.msg);
    cz_workload_init(wl);
    cr_assert_eq(cz_config_parse(*j, path, dir, cfg, wl, &err), CZ_OK, "%s", err.msg);
    free(path);
    free(dir);
}

/* Runs a validation config with `requests` requests; returns simulated and predicted
 * mean queue wait (ms). */
static void run_validation(const char *rel, unsigned requests, double *sim_ms, double *pred_ms)
{
    char set[64];
    snprintf(set, sizeof set, "workload.synthetic.requests=%u", requests);
    const char *sets[] = {set};
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment(rel, sets, 1, &j, &cfg, &wl);
    cz_err err;
    cz_err_clear(&err);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, wl.n_turns);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cr_assert_eq(sum.completed, requests);
    cJSON *sj = cz_summary_json(&sum);
    cr_assert(cz_run_add_theory(&cfg, j, &sum, sj));
    *sim_ms = sum.queue_wait_ms.mean;
    *pred_ms = cJSON_GetObjectItem(cJSON_GetObjectItem(sj, "queueing_theory"),
                                   "mean_queue_wait_ms")->valuedouble;
    cJSON_Delete(sj);
    cJSON_Delete(j);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
}

Test(sim, mm1_rho05_closed_form)
{
    double s, p;
    run_validation("experiments/validation/mm1_rho0.5.json", 200000, &s, &p);
    cr_assert_float_eq(p, 1000.0, 1e-6); /* rho / (mu - lambda) = 0.5 / 0.5 s */
    cr_assert(fabs(s - p) / p < 0.03, "simulated %.2f ms vs %.2f ms", s, p);
}

Test(sim, mm1_rho08_closed_form)
{
    double s, p;
    run_validation("experiments/validation/mm1_rho0.8.json", 400000, &s, &p);
    cr_assert_float_eq(p, 4000.0, 1e-6);
    cr_assert(fabs(s - p) / p < 0.05, "simulated %.2f ms vs %.2f ms", s, p);
}

Test(sim, mg1_pollaczek_khinchine)
{
    double s, p;
    run_validation("experiments/validation/mg1_rho0.42.json", 200000, &s, &p);
    cr_assert_float_eq(p, 1e3 * 0.3 * 1.96 * 1.25 / (2 * (1 - 0.42)), 1e-6);
    cr_assert(fabs(s - p) / p < 0.03, "simulated %.2f ms vs %.2f ms", s, p);
}

/* Runs experiments/validation/nova_tableV.json (Nova's pipeline) with `requests` requests,
 * the rate and the scheduler given; returns the measured wait for the vision worker and
 * Eq. 6's M/D/1 prediction on the run's own service and arrival rate (ms). */
static void run_nova_table_v(unsigned requests, double rate, const char *scheduler,
                             double *wait_ms, double *md1_ms)
{
    char *path = cz_test_path("experiments/validation/nova_tableV.json");
    cJSON *j;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_load(path, &j, &err), CZ_OK, "%s", err.msg);
    char set[128];
    snprintf(set, sizeof set, "workload.synthetic.requests=%u", requests);
    cr_assert_eq(cz_json_set_path(j, set, &err), CZ_OK, "%s", err.msg);
    snprintf(set, sizeof set, "workload.arrivals.rate_rps=%g", rate);
    cr_assert_eq(cz_json_set_path(j, set, &err), CZ_OK, "%s", err.msg);
    snprintf(set, sizeof set, "scheduler=%s", scheduler);
    cr_assert_eq(cz_json_set_path(j, set, &err), CZ_OK, "%s", err.msg);
    cz_config cfg;
    cz_workload wl;
    cz_workload_init(&wl);
    cr_assert_eq(cz_config_parse(j, path, ".", &cfg, &wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, wl.n_turns);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cr_assert_eq(sum.completed, requests);
    cJSON *sj = cz_summary_json(&sum);
    cz_run_summary_json(&cfg, &m, &st, &sum, sj);
    *wait_ms = cJSON_GetObjectItem(sj, "mean_vision_queue_ms")->valuedouble;
    *md1_ms = cJSON_GetObjectItem(sj, "md1_vision_queue_ms")->valuedouble;
    cJSON_Delete(sj);
    cJSON_Delete(j);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    free(path);
}

/* Nova's Table V through the pipeline, in steady state (docs/validation.md): at 0.3 req/s
 * the wait for the vision worker is Eq. 6's M/D/1 on the run's own service within 5 %; at
 * 0.6 req/s the adaptive partition, which gives vision more SMs as requests queue, keeps
 * it more than 10 % below, and the static split, whose waiting requests always encode
 * beside a decode, more than 5 % above. */
Test(sim, nova_table_v_pipeline_against_md1)
{
    double w, p;
    run_nova_table_v(20000, 0.3, "\"nova\"", &w, &p);
    cr_assert(fabs(w - p) / p < 0.05, "0.3 req/s: %.1f ms vs M/D/1 %.1f ms", w, p);
    run_nova_table_v(20000, 0.6, "\"nova\"", &w, &p);
    cr_assert(w < 0.9 * p, "0.6 req/s adaptive: %.1f ms vs M/D/1 %.1f ms", w, p);
    run_nova_table_v(20000, 0.6, "{\"name\": \"nova\", \"adaptive\": false}", &w, &p);
    cr_assert(w > 1.05 * p, "0.6 req/s static: %.1f ms vs M/D/1 %.1f ms", w, p);
}

/* Runs the shipped experiment `rel` with `sets` (load_experiment), its rows kept or, with
 * `drop_rows`, dropped as a run without a results file drops them; returns its summary as
 * JSON, the events it took and its completed plus rejected turns. */
static char *run_summary(const char *rel, const char *const *sets, size_t n_sets, bool drop_rows,
                         uint64_t *events, uint64_t *accounted)
{
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment(rel, sets, n_sets, &j, &cfg, &wl);
    cz_err err;
    cz_err_clear(&err);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, drop_rows ? 0 : wl.n_turns);
    if (drop_rows)
        cz_metrics_stream(&m, NULL);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    *events = st.events;
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    *accounted = sum.completed + sum.rejected;
    cJSON *sj = cz_summary_json(&sum);
    char *text = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);
    cJSON_Delete(j);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    return text;
}

static char *run_default_summary(const char *set)
{
    const char *sets[] = {"workload.max_requests=400", set};
    uint64_t events, accounted;
    char *text = run_summary("experiments/default.json", sets, 2, false, &events, &accounted);
    cr_assert_eq(accounted, 400);
    return text;
}

Test(sim, same_config_same_summary)
{
    char *a = run_default_summary(NULL), *b = run_default_summary(NULL);
    cr_assert_str_eq(a, b);
    char *c = run_default_summary("server.max_num_seqs=4");
    cr_assert(strcmp(a, c) != 0, "a tighter sequence cap must change the run");
    free(a);
    free(b);
    free(c);
}

Test(sim, config_errors_name_the_field)
{
    const char *bad[][2] = {
        {"{\"workload\": {}, \"server\": {\"max_num_seqs\": 0}}", "max_num_seqs"},
        {"{\"workload\": {}, \"sheduler\": \"fcfs\"}", "sheduler"},
        {"{\"workload\": {}, \"scheduler\": \"lifo\"}", "lifo"},
        {"{\"workload\": {}, \"cost\": {\"kind\": \"magic\"}}", "kind"},
        {"{\"workload\": {}, \"model\": \"no-such-model\"}", "no-such-model"},
        {"{\"seed\": 1}", "workload"},
        {"{\"workload\": {}, \"server\": {\"max_num_seqs\": 64, \"max_num_batched_tokens\": 32}}",
         "max_num_batched_tokens"},
        {"{\"workload\": {}, \"scheduler\": {\"name\": \"liveserve\", \"p_safe\": 1}}", "p_safe"},
        {"{\"workload\": {}, \"scheduler\": {\"name\": \"bros\", \"rt_ttft_ms\": -1}}", "rt_ttft_ms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = cJSON_Parse(bad[i][0]);
        cr_assert(j != NULL);
        cz_config cfg;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_err err;
        cz_err_clear(&err);
        cr_assert_neq(cz_config_parse(j, "bad.json", ".", &cfg, &wl, &err), CZ_OK);
        cr_assert(strstr(err.msg, "bad.json") != NULL, "message: %s", err.msg);
        cr_assert(strstr(err.msg, bad[i][1]) != NULL, "message: %s", err.msg);
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
}

/* Per-stage scheduler parameters and the playback telemetry the driver derives: on
 * Qwen3-Omni one talker token is 0.08 s of audio and one thinker token allows one talker
 * token, so both stages see 0.08 s per token. */
Test(sim, scheduler_parameters_per_stage)
{
    cJSON *j = cJSON_Parse("{\"model\": \"qwen3-omni\", \"hardware\": \"h200\","
                           " \"scheduler\": {\"name\": \"liveserve\", \"alpha\": 2,"
                           "   \"stages\": {\"talker\": {\"p_safe_s\": 1.5}}},"
                           " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 5,"
                           "   \"output_tokens\": 5}, \"arrivals\": {\"process\": \"poisson\","
                           "   \"rate_rps\": 1}}}");
    cz_config cfg;
    cz_workload wl;
    cz_workload_init(&wl);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_config_parse(j, "t.json", ".", &cfg, &wl, &err), CZ_OK, "%s", err.msg);
    /* pipeline: audio_encoder, thinker, talker, code2wav */
    const cz_policy_params *th = &cfg.place[1].policy.params, *tk = &cfg.place[2].policy.params;
    cr_assert_float_eq(th->p_safe_s, 2.0, 0);
    cr_assert_float_eq(tk->p_safe_s, 1.5, 0);
    cr_assert_float_eq(th->alpha, 2.0, 0);
    cr_assert_float_eq(tk->alpha, 2.0, 0);
    /* one ratio, from the card: the talker's 3.5 frames of 0.08 s per text token */
    cr_assert_float_eq(th->audio_s_per_token, 3.5 * 0.08, 1e-12);
    cr_assert_float_eq(tk->audio_s_per_token, 0.08, 1e-12);
    cr_assert_gt(tk->step_s[1], 0); /* the fitted step model rises with prefill tokens */
    cz_workload_free(&wl);
    cJSON_Delete(j);
}

/* vLLM's --max-concurrency on open arrivals: with one slot, requests that all arrive at
 * once go one at a time, each sent (and timed) when the one before it finishes. */
Test(sim, max_concurrency_holds_arrivals_for_a_slot)
{
    const char *json =
        "{\"cost\": {\"kind\": \"service\", \"service_s\": 1.0},"
        " \"server\": {\"max_num_seqs\": 4},"
        " \"workload\": {\"synthetic\": {\"requests\": 3, \"input_tokens\": 1,"
        " \"output_tokens\": 2}, \"arrivals\": {\"process\": \"poisson\","
        " \"rate_rps\": 1e9, \"max_concurrency\": 1}}}";
    cJSON *j = cJSON_Parse(json);
    cr_assert(j != NULL);
    cz_config cfg;
    cz_workload wl;
    cz_workload_init(&wl);
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_config_parse(j, "t.json", ".", &cfg, &wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cr_assert_eq(m.n_req, 3);
    for (uint64_t i = 0; i < 3; i++) {
        /* each takes its 1 s of service alone: no queue wait, sent at the previous finish */
        cr_assert_float_eq(m.req[i].finish_s - m.req[i].arrival_s, 1.0, 1e-6);
        if (i > 0)
            cr_assert_float_eq(m.req[i].arrival_s, m.req[i - 1].finish_s, 1e-6);
    }
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    cJSON_Delete(j);
}

/* BROS's step-latency model, linear in the batch's input and context lengths, fitted to the
 * stage's roofline: how far it is from the roofline over the shapes it was fitted on (the
 * docs quote these figures). */
Test(sim, bros_step_model_fit)
{
    const char *models[] = {"llama-3-8b", "llama-2-70b"};
    for (int k = 0; k < 2; k++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"model\": \"%s\", \"cost\": {\"tp\": %d}, \"scheduler\": \"bros\","
                 " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 4,"
                 " \"output_tokens\": 4}, \"arrivals\": {\"process\": \"poisson\","
                 " \"rate_rps\": 1}}}",
                 models[k], k ? 4 : 1);
        cJSON *j = cJSON_Parse(json);
        cz_config cfg;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(cz_config_parse(j, "t.json", ".", &cfg, &wl, &err), CZ_OK, "%s",
                     err.msg);
        const cz_policy_params *pp = &cfg.place[0].policy.params;
        cz_batch b[CZ_STEP_FIT_SHAPES];
        uint32_t n = cz_config_step_fit_shapes(b);
        double sum = 0, worst = 0;
        for (uint32_t i = 0; i < n; i++) {
            double real = cz_config_roofline_step_s(&cfg, 0, &b[i]);
            double pred = cz_bros_step_s(pp, (double)b[i].prefill_tokens, b[i].decode_seqs,
                                         (double)b[i].decode_ctx_tokens,
                                         (double)b[i].prefill_attn_ctx);
            double e = fabs(pred - real) / real;
            sum += e;
            worst = e > worst ? e : worst;
        }
        cr_log_info("%s: %u shapes, mean error %.1f %%, worst %.1f %%", models[k], n,
                    100 * sum / n, 100 * worst);
        cr_assert_lt(sum / n, 0.25, "%s: mean relative error %.3f", models[k], sum / n);
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
}

/* One run of `rel` (with `set` applied when not NULL), its recorder keeping every record
 * or streaming its rows to a results file at `h5`; returns the summary's JSON text with
 * every stage's keys (caller frees). */
static char *run_recorded(const char *rel, const char *set, bool stream, const char *h5)
{
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment(rel, &set, 1, &j, &cfg, &wl);
    cz_err err;
    cz_err_clear(&err);
    cz_results_stages stages;
    cz_run_stages(&cfg, &stages);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, 0);
    cz_metrics_set_pct_mode(&m, cfg.pct_mode);
    cz_results_writer *w = NULL;
    if (stream) {
        cr_assert_eq(cz_results_open(h5, &stages, &w, &err), CZ_OK, "%s", err.msg);
        cz_rows_sink sink = cz_results_sink(w);
        cz_metrics_stream(&m, &sink);
    }
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cJSON *sj = cz_summary_json(&sum);
    cz_run_summary_json(&cfg, &m, &st, &sum, sj);
    uint64_t conc;
    double tok;
    cz_metrics_peaks(&m, &conc, &tok);
    cJSON_AddNumberToObject(sj, "max_concurrent_requests", (double)conc);
    cJSON_AddNumberToObject(sj, "max_output_tokens_per_s", tok);
    char *text = cJSON_PrintUnformatted(sj);
    if (stream)
        cr_assert_eq(cz_results_close(w, &m, "{}", text, 1, &err), CZ_OK, "%s", err.msg);
    else
        cr_assert_eq(cz_results_write_h5(h5, &m, &stages, "{}", text, 1, &err), CZ_OK, "%s",
                     err.msg);
    cJSON_Delete(sj);
    cJSON_Delete(j);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    return text;
}

/* Table `name` of both files holds the same rows, byte for byte in the stored type. */
static void same_table(const char *a, const char *b, const char *name, const char *what)
{
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t da = H5Dopen2(fa, name, H5P_DEFAULT), db = H5Dopen2(fb, name, H5P_DEFAULT);
    cr_assert(da >= 0 && db >= 0, "%s: /%s", what, name);
    hid_t sa = H5Dget_space(da), sb = H5Dget_space(db);
    hssize_t na = H5Sget_simple_extent_npoints(sa), nb = H5Sget_simple_extent_npoints(sb);
    cr_assert_eq(na, nb, "%s: /%s has %lld rows kept, %lld streamed", what, name,
                 (long long)na, (long long)nb);
    hid_t ta = H5Dget_type(da);
    size_t row = H5Tget_size(ta);
    char *ba = calloc((size_t)na + 1, row), *bb = calloc((size_t)nb + 1, row);
    cr_assert(H5Dread(da, ta, H5S_ALL, H5S_ALL, H5P_DEFAULT, ba) >= 0);
    cr_assert(H5Dread(db, ta, H5S_ALL, H5S_ALL, H5P_DEFAULT, bb) >= 0);
    cr_assert(memcmp(ba, bb, (size_t)na * row) == 0, "%s: /%s differs", what, name);
    free(ba);
    free(bb);
    H5Tclose(ta);
    H5Sclose(sa);
    H5Sclose(sb);
    H5Dclose(da);
    H5Dclose(db);
    H5Fclose(fa);
    H5Fclose(fb);
}

/* A streaming recorder holds only what is in flight, yet gives the summary and the results
 * file of one that keeps everything: runs with barge-ins and KV reloads, periodic streams,
 * the cross-stage runtime, and more requests than a batch of rows. */
Test(sim, streamed_records_match_kept)
{
    static const struct {
        const char *rel, *set;
    } runs[] = {
        {"experiments/liveserve/sharegpt_audio.json", NULL},
        {"experiments/liveserve/multiturn_burstgpt.json", NULL},
        {"experiments/metronome/windowed.json", NULL},
        {"experiments/nova/vlm.json", NULL},
        {"experiments/bros/mix.json", NULL},
        {"experiments/bench/sim_100k_1h.json", "workload.synthetic.requests=9000"},
    };
    static const char *const tables[] = {"requests", "timeline", "itl",  "audio",
                                         "frames",   "turns",    "steps", "gateway"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char a[] = "/tmp/cz_test_kept_XXXXXX", b[] = "/tmp/cz_test_streamed_XXXXXX";
        int fa = mkstemp(a), fb = mkstemp(b);
        cr_assert(fa >= 0 && fb >= 0);
        close(fa);
        close(fb);
        char *kept = run_recorded(runs[i].rel, runs[i].set, false, a);
        char *streamed = run_recorded(runs[i].rel, runs[i].set, true, b);
        cr_assert_str_eq(kept, streamed, "%s", runs[i].rel);
        for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
            same_table(a, b, tables[t], runs[i].rel);
        free(kept);
        free(streamed);
        remove(a);
        remove(b);
    }
}

/* The progress watchdog: stalled only after both the events and the clock it asks for,
 * with work open and the progress mark still; any progress, or no open work, resets it. */
Test(sim, watchdog_needs_events_and_time_without_progress)
{
    cz_watchdog w;
    cz_watchdog_init(&w, 3, 10.0);
    cr_assert(!cz_watchdog_stalled(&w, 0.0, 5, true)); /* the first mark is progress */
    cr_assert(!cz_watchdog_stalled(&w, 1.0, 5, true));
    cr_assert(!cz_watchdog_stalled(&w, 2.0, 5, true));
    cr_assert(!cz_watchdog_stalled(&w, 3.0, 5, true)); /* 3 events, 3 s */
    cr_assert(cz_watchdog_stalled(&w, 10.0, 5, true)); /* 4 events, 10 s */
    cr_assert(!cz_watchdog_stalled(&w, 11.0, 6, true)); /* progress */
    for (int i = 0; i < 3 * CZ_WATCHDOG_SAME_TIME - 1; i++)
        cr_assert(!cz_watchdog_stalled(&w, 12.0, 6, true)); /* events, but no time */
    cr_assert(cz_watchdog_stalled(&w, 12.0, 6, true)); /* ... until a loop at one instant */
    cr_assert(!cz_watchdog_stalled(&w, 50.0, 6, false)); /* nothing open: counts anew */
    cr_assert(!cz_watchdog_stalled(&w, 100.0, 6, true));
    cr_assert(!cz_watchdog_stalled(&w, 1000.0, 6, true)); /* time, but 2 events */
    cr_assert(cz_watchdog_stalled(&w, 1001.0, 6, true));
    cz_err e;
    cz_err_clear(&e);
    cz_err_set(&e, CZ_EINTERNAL, "where");
    cz_watchdog_report(&w, 1001.0, "simulated", &e);
    cr_assert(strstr(e.msg, "no progress over 3 events and 951 s of simulated time") != NULL,
              "%s", e.msg);
    cr_assert(strstr(e.msg, ": where") != NULL);
}

/* Runs `rel` (its whole workload) and again as a live workload whose sessions are
 * submitted one at a time at their first turns' arrivals between the simulator's events,
 * as a server submits requests; returns both summaries' JSON texts (caller frees). Each
 * multi-turn session's later turns go in as sessions of their own that follow the one
 * before (cz_deploy_submit's hand-over), submitted when the turn before ends and its
 * think time has passed. */
static void run_live(const char *rel, const char *const *sets, size_t n_sets, char **whole_json,
                     char **live_json, uint32_t *took)
{
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment(rel, sets, n_sets, &j, &cfg, &wl);
    cz_err err;
    cz_err_clear(&err);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, wl.n_turns);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cJSON *sj = cz_summary_json(&sum);
    *whole_json = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);
    cz_metrics_free(&m);

    /* the same turns, live: single-turn sessions in order of arrival */
    cz_workload live;
    cz_workload_init(&live);
    cz_workload_live(&live);
    cz_metrics_init(&m, cfg.timeline_interval_s, 0);
    cz_sim *S;
    cr_assert_eq(cz_sim_open(&cfg, &live, &m, NULL, &S, &err), CZ_OK, "%s", err.msg);
    cz_deploy *d = cz_sim_deploy(S);
    uint32_t *ids = calloc(wl.n_sessions, sizeof *ids);
    *took = 0;
    for (uint32_t si = 0; si < wl.n_sessions; si++) {
        const cz_session *ses = &wl.sessions[si];
        cr_assert(ses->n_turns == 1, "one turn a session in this test");
        const cz_turn *t = &wl.turns[ses->turn_off];
        while (cz_sim_next_s(S) <= t->arrival_s)
            cr_assert_eq(cz_sim_advance(S), CZ_SIM_RAN);
        cz_workload one;
        cz_workload_init(&one);
        cz_workload_begin_session(&one, cz_workload_session_name(&wl, ses), ses->cls,
                                  CZ_TIMING_OPEN);
        *cz_workload_add_turn(&one) = *t;
        bool over = false;
        ids[si] = cz_deploy_submit(d, &one, UINT32_MAX, UINT32_MAX, false, t->arrival_s, &over);
        cr_assert_eq(ids[si], si);
        cz_workload_free(&one);
    }
    cz_sim_state how;
    while ((how = cz_sim_advance(S)) == CZ_SIM_RAN) {
    }
    cr_assert_eq(cz_sim_close(S, how, &st, &err), CZ_OK, "%s", err.msg);
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    sj = cz_summary_json(&sum);
    *live_json = cJSON_PrintUnformatted(sj);
    cJSON_Delete(sj);
    cz_metrics_free(&m);
    cz_workload_free(&live);
    free(ids);
    cJSON_Delete(j);
    cz_workload_free(&wl);
}

/* A live workload (requests submitted as they come, as `cadenza serve` submits them)
 * runs the very logic of the whole one: the same turns at the same times give the same
 * summary. */
Test(sim, live_submissions_match_the_whole_workload)
{
    const char *sets[] = {"workload.max_requests=400", "server.kv_idle=offload"};
    char *whole, *live;
    uint32_t took;
    run_live("experiments/default.json", sets, 2, &whole, &live, &took);
    cr_assert_str_eq(live, whole);
    free(whole);
    free(live);
}

/* Conversations as a server sees them: each later turn of a session is a request of its
 * own that follows the one before (cz_deploy_submit's hand-over of the sequences and the
 * KV they hold), and gives what the whole workload's multi-turn sessions give. */
Test(sim, live_conversations_take_over_their_kv)
{
    const char *sets[] = {"workload.max_requests=10", "server.kv_idle=offload",
                          "server.kv_blocks=2000"};
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment("experiments/default.json", sets, 3, &j, &cfg, &wl);
    cz_workload_free(&wl);
    /* 40 sessions of 4 turns, 60 s apart in a session (each reply long done): a first
     * prompt of 300 tokens, then 40 new tokens a turn, 50 out */
    cz_workload_init(&wl);
    enum { NS = 40, NT = 4 };
    for (uint32_t s = 0; s < NS; s++) {
        char name[32];
        snprintf(name, sizeof name, "conv-%u", s);
        cz_workload_begin_session(&wl, name, CZ_CLASS_RT, CZ_TIMING_OPEN);
        for (uint32_t k = 0; k < NT; k++) {
            cz_turn *t = cz_workload_add_turn(&wl);
            t->arrival_s = 0.25 * s + 60.0 * k;
            t->in_text_tokens = k == 0 ? 300 : 40;
            t->out_text_tokens = 50;
        }
    }
    wl.arrivals_given = true;
    cz_err err;
    cz_err_clear(&err);
    cz_metrics m;
    cz_metrics_init(&m, cfg.timeline_interval_s, wl.n_turns);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_OK, "%s", err.msg);
    cz_summary whole;
    cz_metrics_summarize(&m, &cfg.slo, &whole);
    cz_metrics_free(&m);

    cz_workload live;
    cz_workload_init(&live);
    cz_workload_live(&live);
    cz_metrics_init(&m, cfg.timeline_interval_s, 0);
    cz_sim *S;
    cr_assert_eq(cz_sim_open(&cfg, &live, &m, NULL, &S, &err), CZ_OK, "%s", err.msg);
    cz_deploy *d = cz_sim_deploy(S);
    uint32_t last[NS], took = 0;
    for (uint32_t k = 0; k < NT; k++)
        for (uint32_t s = 0; s < NS; s++) {
            const cz_turn *t = &wl.turns[s * NT + k];
            while (cz_sim_next_s(S) <= t->arrival_s)
                cr_assert_eq(cz_sim_advance(S), CZ_SIM_RAN);
            cz_workload one;
            cz_workload_init(&one);
            cz_workload_begin_session(&one, "turn", CZ_CLASS_RT, CZ_TIMING_OPEN);
            *cz_workload_add_turn(&one) = *t;
            bool over = false;
            last[s] = cz_deploy_submit(d, &one, k ? last[s] : UINT32_MAX, UINT32_MAX, k + 1 < NT,
                                       t->arrival_s, &over);
            took += over;
            cz_workload_free(&one);
        }
    cz_sim_state how;
    while ((how = cz_sim_advance(S)) == CZ_SIM_RAN) {
    }
    cr_assert_eq(cz_sim_close(S, how, &st, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cr_assert_eq(took, NS * (NT - 1), "every later turn took over the one before");
    cr_assert_eq(sum.completed, (uint64_t)NS * NT);
    /* the same prefills as the whole workload's sessions: the kept KV served as prefix */
    cr_assert_float_eq(sum.ttft_ms.mean, whole.ttft_ms.mean, 1e-9);
    cr_assert_float_eq(sum.e2el_ms.mean, whole.e2el_ms.mean, 1e-9);
    cr_assert_eq(sum.total_input_tokens, whole.total_input_tokens);
    cz_metrics_free(&m);
    cz_workload_free(&live);
    cz_workload_free(&wl);
    cJSON_Delete(j);
}

/* The interaction plane of a live session (what `cadenza serve`'s events call): a playback
 * report reaches the session's sequence; a barge-in ends the open turn aborted, keeping the
 * heard tokens' KV once the batch in flight has ended (the session settles), and the next
 * request follows the heard context; a second barge-in finds nothing open. */
Test(sim, live_interaction_plane)
{
    const char *sets[] = {"workload.max_requests=10", "server.kv_idle=offload"};
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    load_experiment("experiments/default.json", sets, 2, &j, &cfg, &wl);
    cz_workload_free(&wl);
    cz_err err;
    cz_err_clear(&err);
    cz_metrics m;
    cz_workload live;
    cz_workload_init(&live);
    cz_workload_live(&live);
    cz_metrics_init(&m, cfg.timeline_interval_s, 0);
    cz_sim *S;
    cr_assert_eq(cz_sim_open(&cfg, &live, &m, NULL, &S, &err), CZ_OK, "%s", err.msg);
    cz_deploy *d = cz_sim_deploy(S);
    cz_workload one;
    cz_workload_init(&one);
    cz_workload_begin_session(&one, "a", CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(&one);
    t->in_text_tokens = 300;
    t->out_text_tokens = 400;
    uint32_t a = cz_deploy_submit(d, &one, UINT32_MAX, UINT32_MAX, true, 0.0, NULL);
    cz_workload_free(&one);
    while (cz_sim_next_s(S) <= 0.3)
        cr_assert_eq(cz_sim_advance(S), CZ_SIM_RAN);
    cz_server *srv = cz_deploy_replica_at(d, 0).srv;
    const cz_seq *q = cz_server_seq(srv, 0);
    cr_assert_eq(q->session, a);
    cr_assert(q->turn_open && q->generated > 10 && q->generated < 400, "%u", q->generated);
    double now = cz_sim_now(S);
    cz_deploy_playback(d, a, 0.5, 2.0, 2.0, now);
    cr_assert(q->played_s == 0.5 && q->received_s == 2.0 && q->report_s == now);
    cr_assert_eq(cz_deploy_speech_start(d, a, now), CZ_PRELOAD_NOTHING, "its turn is open");
    cr_assert(cz_deploy_barge_in(d, a, 7, now));
    cr_assert(!cz_deploy_barge_in(d, a, 7, now), "nothing open to cut");
    while (cz_deploy_settling(d, a))
        cr_assert_eq(cz_sim_advance(S), CZ_SIM_RAN);
    cr_assert(!q->turn_open && q->generated == 7 && q->tokens_in == 300,
              "generated %u, input %u", q->generated, q->tokens_in);
    cr_assert(cz_deploy_can_follow(d, a, 307) && cz_deploy_kv_tokens(d, a) == 307);
    /* the next request: what was heard and 10 new tokens */
    cz_workload_init(&one);
    cz_workload_begin_session(&one, "b", CZ_CLASS_RT, CZ_TIMING_OPEN);
    t = cz_workload_add_turn(&one);
    t->arrival_s = cz_sim_now(S);
    t->in_text_tokens = 10;
    t->out_text_tokens = 5;
    bool took = false;
    uint32_t b = cz_deploy_submit(d, &one, a, 307, false, cz_sim_now(S), &took);
    cz_workload_free(&one);
    cr_assert(took && b == a + 1);
    cz_sim_state how;
    while ((how = cz_sim_advance(S)) == CZ_SIM_RAN) {
    }
    cz_run_stats st;
    cr_assert_eq(cz_sim_close(S, how, &st, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, &cfg.slo, &sum);
    cr_assert(sum.requests == 2 && sum.aborted == 1 && sum.completed == 1,
              "%llu requests, %llu aborted, %llu completed", (unsigned long long)sum.requests,
              (unsigned long long)sum.aborted, (unsigned long long)sum.completed);
    cr_assert_eq(sum.total_input_tokens, 10, "the completed request computed its new tokens only: %llu", (unsigned long long)sum.total_input_tokens);
    cz_metrics_free(&m);
    cz_workload_free(&live);
    cJSON_Delete(j);
}

/* Decode runs (docs/serving-core.md): the steps bound to follow a decode-only step are one
 * event, applied when an arrival reaches the replica or the run ends, and the summary is
 * byte for byte the one of stepping each step through the runtime's dispatch; also when
 * the time limit stops the runs in the middle (v 1), and under vllm_dp (v 2), whose load
 * is read from the queues each step. */
Test(sim, decode_runs_match_stepping)
{
    for (int v = 0; v < 3; v++) {
        /* the simulated day's load (1.16 requests/s a replica): runs of tens of steps */
        const char *on[] = {"pipeline.llm.replicas=8", "workload.arrivals.rate_rps=9.26",
                            "workload.synthetic.requests=600",
                            v == 1 ? "sim.max_time_s=31.37"
                            : v == 2 ? "router=vllm_dp"
                                       : NULL,
                            "sim.fast_forward=true"};
        const char *off[] = {on[0], on[1], on[2], on[3], "sim.fast_forward=false"};
        uint64_t ev_on, ev_off, n_on, n_off;
        const char *fleet = "experiments/bench/fleet.json";
        char *a = run_summary(fleet, on, 5, true, &ev_on, &n_on);
        char *b = run_summary(fleet, off, 5, true, &ev_off, &n_off);
        cr_assert(n_on == n_off && (v == 1 || n_on == 600));
        cr_assert_str_eq(a, b);
        cr_assert(ev_on * 10 < ev_off, "%llu events with runs, %llu without",
                  (unsigned long long)ev_on, (unsigned long long)ev_off);
        free(a);
        free(b);
    }
}

/* Decode runs under kv_router with prefix caching (the Mooncake slice's shared prefixes):
 * the router reads each replica's held prefixes and hears of each cached block's eviction
 * as it happens, so a run takes only blocks never used; byte for byte the summary of
 * stepping, on 4 replicas with the default pool, and on 8 whose pools of 12,000 blocks
 * fill (runs that evicted lazily route the slice differently there). */
Test(sim, decode_runs_match_stepping_under_kv_router)
{
    for (int full = 0; full < 2; full++) {
        const char *on[] = {"router=kv_router",
                            full ? "pipeline.llm.replicas=8" : "workload.max_requests=600",
                            full ? "server.kv_blocks=12000" : NULL, "sim.fast_forward=true"};
        const char *off[] = {on[0], on[1], on[2], "sim.fast_forward=false"};
        uint64_t ev_on, ev_off, n_on, n_off;
        const char *mc = "experiments/bench/mooncake_routers.json";
        char *a = run_summary(mc, on, 4, true, &ev_on, &n_on);
        char *b = run_summary(mc, off, 4, true, &ev_off, &n_off);
        cr_assert(n_on == n_off && n_on == (full ? 2000 : 600));
        cr_assert_str_eq(a, b);
        cr_assert(ev_on * 2 < ev_off, "%llu events with runs, %llu without",
                  (unsigned long long)ev_on, (unsigned long long)ev_off);
        free(a);
        free(b);
    }
}
