/* cmd_sim.c - `cadenza sim`: parse a config, build the workload, run the simulator,
 * write the results (HDF5 + JSON summary) and print a table. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <errno.h>
#include <sys/stat.h>
#include <limits.h>

#include "cz_cli.h"
#include "cz_wall.h"
#include "cz_engine.h"
#include "cz_hclient.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_proc.h"
#include "cz_results.h"
#include "cz_run.h"
#include "cz_sim.h"

static const char sim_usage[] =
    "usage: cadenza sim [CONFIG.json] [--trace PATH] [--model NAME|DIR] [--set key=value]...\n"
    "                   [-o results.h5] [--summary summary.json] [--percentiles LIST]\n"
    "                   [--exact-percentiles] [--whole-workload] [--quiet] [--no-progress]\n"
    "\n"
    "Run the discrete-event simulator on an experiment config (docs/config.md). Without\n"
    "CONFIG.json the built-in default experiment runs (experiments/default.json).\n"
    "Ctrl-C ends the run at the simulated time it reached and writes what it has, marked\n"
    "partial (\"partial\": true in the summary); a second Ctrl-C quits at once.\n"
    "\n"
    "  --trace PATH         the workload reads this trace (ShareGPT, BurstGPT, Mooncake,\n"
    "                       Azure or cadenza sessions; the format detected as `trace info`\n"
    "                       does) in place of the config's trace or synthetic requests\n"
    "  --model NAME|DIR     the model: a card name (`cadenza cards`), a card file, or a\n"
    "                       Hugging Face checkpoint folder (its config.json)\n"
    "  --set key=value      override a config field, e.g. --set workload.max_requests=500\n"
    "                       or --set server.max_num_seqs=64 (repeatable); a relative path\n"
    "                       given here is relative to the working directory\n"
    "  -o, --output FILE    write the HDF5 results: per-request table, timelines, config\n"
    "  --summary FILE       write the JSON summary (vLLM benchmark key names)\n"
    "  --percentiles LIST   percentiles reported per latency metric, comma-separated in\n"
    "                       (0, 100] (vLLM's --metric-percentiles), e.g. 25,50,99.9 gives\n"
    "                       p25_ttft_ms, p50_ttft_ms, p99.9_ttft_ms; default 50,90,95,99\n"
    "  --exact-percentiles  percentiles and medians from every sample, however many; by\n"
    "                       default a metric past 2M samples moves to a quantile sketch\n"
    "                       within 1 % of them, and the summary's percentile_mode says\n"
    "                       which (--set metrics.percentiles=exact; docs/metrics.md)\n"
    "  --cost FILE          step times from a fitted cost model (`cadenza calibrate`)\n"
    "                       instead of the config's cost object\n"
    "  --whole-workload     build the whole workload before the run; by default a synthetic\n"
    "                       one, or a trace whose records come in order of arrival, is\n"
    "                       produced as the run consumes it (same results, memory that\n"
    "                       follows the sessions in flight; docs/workload.md)\n"
    "  --quiet              print nothing but errors\n"
    "  --no-progress        no progress line\n"
    "  -h, --help           this help\n"
    "\n"
    "Prints a summary table on stdout and run statistics (events per second, simulated\n"
    "seconds per wall second, wall time, peak memory) on stderr.\n";

static const char replay_usage[] =
    "usage: cadenza replay CONFIG.json [--trace PATH] [--set key=value]... [-o results.h5]\n"
    "                      [--summary summary.json] [--percentiles LIST]\n"
    "                      [--exact-percentiles] [--backend cpu|cuda] [--threads N] [--quiet] [--no-progress]\n"
    "       cadenza replay CONFIG.json --endpoint URL [--model NAME] [--api-key KEY]\n"
    "                      [--api completions|chat] [--tokenizer DIR] [--max-concurrency N]\n"
    "                      [--request-timeout S] [--no-events] [--trace PATH]\n"
    "                      [--set key=value]...\n"
    "                      [-o results.h5] [--summary summary.json] [--percentiles LIST]\n"
    "                      [--quiet] [--no-progress]\n"
    "\n"
    "Serve an experiment config's workload on the real engine, in wall-clock time: the same\n"
    "deployment, serving cores and metrics as `cadenza sim`, with every batch run through\n"
    "the model's kernels (docs/engine.md). The config's `engine` object chooses the weights\n"
    "(\"random\" or a Hugging Face checkpoint folder) and their types; the trace's time\n"
    "scaling applies. Ctrl-C stops the run and writes what it has, marked partial.\n"
    "\n"
    "With --endpoint the workload goes to an OpenAI-compatible server instead (vLLM, SGLang,\n"
    "llama.cpp, `cadenza serve`; docs/http-replay.md): each turn a streamed request to\n"
    "URL/v1/completions at its time in the workload, a prompt of its input tokens as token\n"
    "ids (--api chat: /v1/chat/completions, text of that many tokens under --tokenizer),\n"
    "max_tokens its output tokens (with min_tokens and ignore_eos), measured as `vllm bench\n"
    "serve` measures (TTFT to the first chunk with content, ITL per chunk, TPOT from usage's\n"
    "completion tokens), each request's send lag behind the workload recorded.\n"
    "Failed requests (transport, HTTP status, error events, malformed or truncated streams)\n"
    "are outcomes, counted by reason. The summary says \"driver\": \"http\". Spoken turns are\n"
    "played at the client in real time (each token out_audio_s / max_tokens seconds), the\n"
    "next turn sent after the reply has played and its think and speech times; a barge-in\n"
    "cancels the stream at the player's position; speech starts, playback and barge-ins\n"
    "go to the server's POST /v1/sessions/ID/events (`cadenza serve`'s interaction plane).\n"
    "\n"
    "  --trace PATH         the workload reads this trace, as for `sim`\n"
    "  --set key=value      override a config field (repeatable; relative paths are\n"
    "                       relative to the working directory)\n"
    "  -o, --output FILE    write the HDF5 results, with a /steps table of every batch\n"
    "                       (its shape, host time, device time and the cost model's time)\n"
    "  --summary FILE       write the JSON summary (the simulator's keys, \"driver\": \"engine\",\n"
    "                       \"backend\": \"cadenza-engine\", \"kernel_backend\")\n"
    "  --percentiles LIST   percentiles reported per latency metric (as for `sim`)\n"
    "  --exact-percentiles  exact percentiles however many the samples (as for `sim`)\n"
    "  --cost FILE          the fitted cost model /steps compares each batch with\n"
    "  --backend NAME       kernel backend: cpu (default) or cuda (a build with -Dcuda;\n"
    "                       GPU g of the placement runs on CUDA device g)\n"
    "  --threads N          CPU threads in all (default: engine.threads, else every CPU)\n"
    "  --endpoint URL       the server's base URL (http://host:port; a trailing /v1 is fine)\n"
    "  --model NAME         the requests' \"model\" (default: the config's model card)\n"
    "  --api NAME           completions (default: /v1/completions, prompts of token ids)\n"
    "                       or chat (/v1/chat/completions, text messages)\n"
    "  --tokenizer DIR      chat: the folder of the served model's tokenizer.json; each\n"
    "                       message's text is made to tokenize to the turn's input count\n"
    "  --api-key KEY        sent as a bearer token (default: $OPENAI_API_KEY, if set)\n"
    "  --max-concurrency N  requests in flight at most, as vLLM's (default: no bound)\n"
    "  --request-timeout S  a request's whole time at most, after which it fails\n"
    "                       (transport); default 21600, vLLM's benchmark's 6 hours\n"
    "  --no-events          send no interaction-plane events (else sent to spoken\n"
    "                       sessions, and stopped if the server answers 404)\n"
    "  --quiet              print nothing but errors\n"
    "  --no-progress        no progress line\n"
    "  -h, --help           this help\n";

typedef struct progress_ctx {
    bool tty;
    double t0, last;
    const char *label; /* "sim", "replay" */
} progress_ctx;

/* A live line on a terminal (4 updates a second), a plain line every 5 s otherwise. */
static void print_progress(void *ctx, const cz_run_progress *p)
{
    progress_ctx *c = ctx;
    double now = cz_wall_s();
    double every = c->tty ? 0.25 : 5.0;
    if (!p->done && now - c->last < every)
        return;
    c->last = now;
    double el = now - c->t0;
    if (c->tty || !p->done)
        fprintf(stderr, "%s%s t=%.1f s  arrived %llu/%llu  finished %llu  %.2f M events/s%s",
                c->tty ? "\r" : "", c->label, p->sim_time_s, (unsigned long long)p->arrived,
                (unsigned long long)p->total_requests, (unsigned long long)p->finished,
                el > 0 ? (double)p->events / el / 1e6 : 0.0, c->tty ? "\033[K" : "\n");
    if (c->tty && p->done)
        fputc('\n', stderr);
}

static double num(const cJSON *j, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The engine's own figures: steps run, time on the devices and outside them (per-step
 * overhead: the core's scheduling and the batch building), and the cost model beside it. */
static void print_engine_lines(const cz_metrics *m, const cz_config *cfg,
                               const cz_run_stats *stats, double wall_s)
{
    uint64_t n = m->n_step_rows;
    double kernel = 0, build = 0, pred = 0;
    double *over = cz_xmalloc((n ? n : 1) * sizeof *over);
    for (uint64_t i = 0; i < n; i++) {
        const cz_step_record *r = &m->step_rows[i];
        kernel += r->kernel_s;
        build += r->build_s;
        pred += r->predicted_s;
        over[i] = (r->end_s - r->start_s) - r->kernel_s + r->build_s;
    }
    qsort(over, n, sizeof *over, cmp_double);
    fprintf(stderr,
            "engine: %llu steps in %.2f s of clock (%s); device busy %.2f s; batch building "
            "%.3f ms/step; overhead outside kernels p50 %.3f ms p99 %.3f ms per step; cost "
            "model (%s) predicts %.2f s for the same steps; wall %.1f s\n",
            (unsigned long long)n, stats->sim_time_s, cfg->hw.name, kernel,
            n ? build / (double)n * 1e3 : 0.0, n ? over[n / 2] * 1e3 : 0.0,
            n ? over[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] * 1e3 : 0.0, cfg->hw.name,
            pred, wall_s);
    free(over);
}

/* A summary value printed with `fmt` (one double), or "none" when the summary has none
 * (null). */
/* The HTTP client's lines: what was sent, what the server honoured, why turns failed. */
static void print_http_lines(const cz_hclient_opts *o, const cz_hclient_stats *h,
                             const cz_summary *sum)
{
    fprintf(stderr,
            "http: %llu requests sent to %s; %llu chunks; usage reported on %llu of %llu "
            "completed, max_tokens honoured on %llu; send lag p50 %.3f ms p99 %.3f ms\n",
            (unsigned long long)h->sent, o->endpoint, (unsigned long long)h->chunks,
            (unsigned long long)h->with_usage, (unsigned long long)h->completed,
            (unsigned long long)h->len_honoured, sum->send_lag_ms.median, sum->send_lag_ms.p99);
    for (int k = 0; k < CZ_HFAIL_N; k++)
        if (h->failed_by[k])
            fprintf(stderr, "http: %llu failed (%s), the first: %s\n",
                    (unsigned long long)h->failed_by[k], cz_hfail_name((cz_hfail)k),
                    h->first_error[k]);
    if (h->events_sent)
        fprintf(stderr,
                "http: %llu barge-ins (%llu cancelled a stream); %llu interaction events sent, "
                "%llu answered, %llu applied, %llu failed%s%s%s\n",
                (unsigned long long)h->barge_ins, (unsigned long long)h->barge_ins_streaming,
                (unsigned long long)h->events_sent, (unsigned long long)h->events_ok,
                (unsigned long long)h->events_applied, (unsigned long long)h->events_failed,
                h->events_unsupported ? "; the server takes none (" : "",
                h->events_unsupported ? h->first_event_error : "",
                h->events_unsupported ? "), none sent after the first" : "");
}

static const char *num_or_none(const cJSON *j, const char *key, const char *fmt, char *buf,
                               size_t n)
{
    double v = num(j, key);
    if (isnan(v))
        return "none";
    snprintf(buf, n, fmt, v);
    return buf;
}

/* The spoken-turn, frame and per-stage lines of the readable summary. */
static void print_pipeline_lines(const cJSON *s)
{
    if (cJSON_GetObjectItemCaseSensitive(s, "spoken_turns"))
        printf("audio: %.0f spoken turns (%.0f barged in)  TTFP p50 %.1f ms p90 %.1f ms p99 %.1f "
               "ms  RTF median %.3f  continuity %.4f  viability %.4f  effective %.4f req/s  audio "
               "%.1f s/s\n",
               num(s, "spoken_turns"), num(s, "barged_turns"), num(s, "p50_audio_ttfp_ms"),
               num(s, "p90_audio_ttfp_ms"), num(s, "p99_audio_ttfp_ms"),
               num(s, "median_audio_rtf"), num(s, "audio_continuity_ok_rate"),
               num(s, "streaming_viability"),
               num(s, "effective_request_throughput"), num(s, "audio_throughput"));
    if (cJSON_GetObjectItemCaseSensitive(s, "frames")) {
        printf("streams %.0f: completed %.0f  rejected %.0f  unfinished %.0f\n",
               num(s, "streams"), num(s, "streams_completed"), num(s, "streams_rejected"),
               num(s, "streams_unfinished"));
        printf("frames %.0f: served %.0f  empty %.0f  rejected %.0f  unfinished %.0f  latency "
               "p50 %.1f ms p99 %.1f ms  deadline misses %.0f  first empty ",
               num(s, "frames"), num(s, "served_frames"), num(s, "empty_frames"),
               num(s, "rejected_frames"), num(s, "unfinished_frames"),
               num(s, "p50_frame_latency_ms"), num(s, "p99_frame_latency_ms"),
               num(s, "deadline_misses"));
        double fe = num(s, "first_empty_frame_s");
        if (isnan(fe))
            printf("never\n");
        else
            printf("at %.2f s\n", fe);
    }
    if (cJSON_GetObjectItemCaseSensitive(s, "mean_vision_queue_ms")) {
        /* a cross-stage run: Nova's queueing figures (Table V) and its stages */
        char b[5][32];
        printf("vision worker: wait %s (Eq. 6: M/D/1 %s, M/G/1 %s)  service %s  utilisation "
               "%s at %.4f req/s\n",
               num_or_none(s, "mean_vision_queue_ms", "%.1f ms", b[0], sizeof b[0]),
               num_or_none(s, "md1_vision_queue_ms", "%.1f ms", b[1], sizeof b[1]),
               num_or_none(s, "mg1_vision_queue_ms", "%.1f ms", b[2], sizeof b[2]),
               num_or_none(s, "mean_vision_service_ms", "%.1f ms", b[3], sizeof b[3]),
               num_or_none(s, "vision_utilization", "%.3f", b[4], sizeof b[4]),
               num(s, "arrival_rate_rps"));
        printf("vision step %.1f ms (waiting for weights %.1f ms), weights on the GPU %.3f GB  "
               "decode batch %.2f on %.1f %% of the SMs\n",
               num(s, "mean_vision_step_ms"), num(s, "mean_vision_stall_ms"),
               num(s, "vision_weights_resident_gb"), num(s, "mean_decode_batch"),
               100 * num(s, "mean_decode_sm_share"));
        if (!isnan(num(s, "ideal_e2e_ms")))
            printf("SM split: decode on %.0f SMs beside vision, %.0f beside prefill; Eq. 1 "
                   "there %.1f ms (vision %.1f, prefill %.1f, decode step %.2f / %.2f ms)\n",
                   num(s, "sm_decode_vision"), num(s, "sm_decode_prefill"), num(s, "ideal_e2e_ms"),
                   num(s, "ideal_vision_ms"), num(s, "ideal_prefill_ms"),
                   num(s, "ideal_decode_beside_vision_ms"),
                   num(s, "ideal_decode_beside_prefill_ms"));
    }
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(s, "stages");
    double sat = num(s, "kv_pool_saturated_at_s");
    if (!cJSON_GetObjectItemCaseSensitive(s, "spoken_turns") &&
        !cJSON_GetObjectItemCaseSensitive(s, "frames") && cJSON_GetArraySize(stages) < 2 &&
        isnan(sat) && num(s, "waste_ratio") == 0)
        return; /* a plain text run: the table says it all */
    printf("tokens: generated %.0f  heard %.0f  waste ratio %.4f  KV pool %s", num(s, "generated_tokens"),
           num(s, "heard_tokens"), num(s, "waste_ratio"), isnan(sat) ? "never saturated" : "saturated at");
    if (!isnan(sat))
        printf(" %.2f s", sat);
    printf("\n");
    const cJSON *st;
    cJSON_ArrayForEach(st, stages)
    {
        printf("  stage %-10s generated %.0f heard %.0f waste %.4f  KV reload on the critical "
               "path %.3f s (p90 %.2f ms)\n",
               cJSON_GetObjectItemCaseSensitive(st, "stage")->valuestring,
               num(st, "generated_tokens"), num(st, "heard_tokens"), num(st, "waste_ratio"),
               num(st, "total_kv_reload_s"), num(st, "p90_kv_reload_ms"));
    }
}

/* vLLM's date format ("%Y%m%d-%H%M%S", benchmarks/serve.py: result_json["date"]) of the
 * simulator's run: SOURCE_DATE_EPOCH's time in UTC when the environment sets it (the
 * reproducible-builds convention, so a run stays byte-identical), else none (*out = '\0').
 * CZ_EINVAL naming the variable when it is not a count of seconds. */
static cz_status sim_date(char *out, size_t n, cz_err *err)
{
    out[0] = '\0';
    const char *v = getenv("SOURCE_DATE_EPOCH");
    if (!v)
        return CZ_OK;
    char *end;
    errno = 0;
    long long secs = strtoll(v, &end, 10);
    struct tm tm;
    time_t t = (time_t)secs;
    if (errno || end == v || *end || secs < 0 || !gmtime_r(&t, &tm))
        return cz_err_set(err, CZ_EINVAL,
                          "environment variable SOURCE_DATE_EPOCH: expected a count of seconds "
                          "since 1970-01-01 UTC, got '%s'",
                          v);
    strftime(out, n, "%Y%m%d-%H%M%S", &tm);
    return CZ_OK;
}

/* The arrival keys of vLLM's result JSON (benchmarks/serve.py, main_async: request_rate is
 * the configured --request-rate, "inf" for none; burstiness the gamma shape, 1.0 for
 * Poisson; max_concurrency --max-concurrency or None), from the config's
 * workload.arrivals (already validated) and the workload: trace-timed arrivals have no
 * configured rate (null); a closed loop starts each session as a slot frees, vLLM's
 * request rate "inf" with max_concurrency = its concurrency (docs/metrics.md). */
static void add_arrival_keys(const cJSON *cfg_json, const cz_workload *wl, cJSON *j)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cfg_json, "workload");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(w, "arrivals");
    const cJSON *proc = cJSON_GetObjectItemCaseSensitive(a, "process");
    const char *p = cJSON_IsString(proc) ? proc->valuestring : "trace";
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(a, "rate_rps");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(a, "burstiness");
    bool paced = strcmp(p, "poisson") == 0 || strcmp(p, "gamma") == 0;
    if (paced && cJSON_IsNumber(rate))
        cJSON_AddNumberToObject(j, "request_rate", rate->valuedouble);
    else if (strcmp(p, "closed_loop") == 0)
        cJSON_AddStringToObject(j, "request_rate", "inf");
    else
        cJSON_AddNullToObject(j, "request_rate");
    if (strcmp(p, "gamma") == 0)
        cJSON_AddNumberToObject(j, "burstiness", cJSON_IsNumber(b) ? b->valuedouble : 1.0);
    else if (strcmp(p, "poisson") == 0)
        cJSON_AddNumberToObject(j, "burstiness", 1.0);
    else
        cJSON_AddNullToObject(j, "burstiness");
    if (wl->concurrency)
        cJSON_AddNumberToObject(j, "max_concurrency", (double)wl->concurrency);
    else
        cJSON_AddNullToObject(j, "max_concurrency");
}

/* Parses the config and runs it on the simulator or the engine (`eng`: the engine's
 * options; NULL: the simulator). */
/* /sessions of a results file: every session's id in its trace, in batches. */
typedef struct sessions_ctx {
    cz_results_writer *w;
    cz_results_session rows[1024];
    uint32_t n;
    cz_status st;
    cz_err *err;
} sessions_ctx;

static void session_row(void *ctx, uint32_t si, const char *name, uint32_t n_turns)
{
    sessions_ctx *c = ctx;
    cz_results_session *r = &c->rows[c->n++];
    memset(r, 0, sizeof *r);
    r->session = si;
    r->turns = n_turns;
    snprintf(r->name, sizeof r->name, "%s", name);
    if (c->n == CZ_ARRAY_LEN(c->rows)) {
        if (c->st == CZ_OK)
            c->st = cz_results_put_sessions(c->w, c->rows, c->n, c->err);
        c->n = 0;
    }
}

static cz_status write_sessions(cz_results_writer *w, cz_workload *wl, cz_err *err)
{
    if (wl->live)
        return CZ_OK; /* requests a server took: no trace to name them */
    sessions_ctx *c = cz_xcalloc(1, sizeof *c);
    c->w = w;
    c->err = err;
    cz_workload_each_session(wl, session_row, c);
    if (c->st == CZ_OK)
        c->st = cz_results_put_sessions(w, c->rows, c->n, err);
    cz_status st = c->st;
    free(c);
    return st;
}

/* `keep`: the recorder keeps every record (validate compares them); otherwise it streams
 * (docs/metrics.md, "Streaming"), handing its rows to a results file opened at `h5_path`
 * (*writer; NULL: rows dropped), which the caller closes or discards. */
/* The config as a run's outputs echo it: without sim.fast_forward, which changes how fast
 * a simulation runs, never its result (a "sim" object left empty by it goes too), so the
 * summary and the results file come out byte-identical whichever way it is set. The
 * caller owns the copy. */
static cJSON *config_echo(const cJSON *cfg_json)
{
    cJSON *c = cJSON_Duplicate(cfg_json, 1);
    cJSON *sim = cJSON_GetObjectItemCaseSensitive(c, "sim");
    if (cJSON_IsObject(sim) && cJSON_GetObjectItemCaseSensitive(sim, "fast_forward")) {
        cJSON_DeleteItemFromObjectCaseSensitive(sim, "fast_forward");
        if (!sim->child)
            cJSON_DeleteItemFromObjectCaseSensitive(c, "sim");
    }
    return c;
}

static cz_status run_config(const cJSON *cfg_json, const char *where, const char *base_dir,
                            bool progress, volatile sig_atomic_t *stop,
                            const cz_engine_opts *eng,
                            const cz_hclient_opts *http, cz_hclient_stats *hstats,
                            const cz_pctset *pct,
                            bool keep, bool whole, const char *h5_path,
                            cz_results_writer **writer,
                            cz_config *cfg, cz_metrics *m, cz_summary *sum, cz_run_stats *stats,
                            cJSON **summary, double *wall_s, bool *partial, cz_err *err)
{
    CZ_ASSERT(!h5_path || (writer && !keep));
    if (writer)
        *writer = NULL;
    cz_workload wl;
    cz_workload_init(&wl);
    /* produced as the run consumes it, unless the run keeps every record or replays on
     * the engine */
    wl.stream = !keep && !eng && !http && !whole;
    *summary = NULL;
    *partial = false;
    memset(m, 0, sizeof *m);
    char date[32] = "";
    bool wall = eng || http; /* a run on the wall clock */
    cz_status st = wall ? CZ_OK : sim_date(date, sizeof date, err);
    if (st == CZ_OK)
        st = cz_config_parse(cfg_json, where, base_dir, cfg, &wl, err);
    if (st == CZ_OK) {
        cz_metrics_init(m, cfg->timeline_interval_s, keep ? wl.n_turns : 0);
        cz_metrics_set_pct_mode(m, cfg->pct_mode);
        if (pct)
            m->pct = *pct;
        if (h5_path) {
            cz_results_stages stages;
            cz_run_stages(cfg, &stages);
            st = cz_results_open(h5_path, &stages, writer, err);
        }
        if (!keep && st == CZ_OK) {
            cz_rows_sink sink = h5_path ? cz_results_sink(*writer) : (cz_rows_sink){0};
            cz_metrics_stream(m, h5_path ? &sink : NULL);
        }
    }
    if (st == CZ_OK) {
        progress_ctx pc = {isatty(STDERR_FILENO) == 1, cz_wall_s(), cz_wall_s(),
                           wall ? "replay" : "sim"};
        if (wall) {
            /* the engine's start time, as vLLM stamps its runs (datetime.now()) */
            time_t now = time(NULL);
            struct tm tm;
            if (localtime_r(&now, &tm))
                strftime(date, sizeof date, "%Y%m%d-%H%M%S", &tm);
        }
        double t0 = cz_wall_s();
        if (http)
            st = cz_hclient_run(cfg, &wl, m, http, stats, hstats, partial,
                                progress ? print_progress : NULL, &pc, err);
        else if (eng)
            st = cz_engine_run(cfg, &wl, m, eng, stats, partial,
                               progress ? print_progress : NULL, &pc, err);
        else
            st = cz_sim_run_stoppable(cfg, &wl, m, stop, partial, stats,
                                      progress ? print_progress : NULL, &pc, err);
        *wall_s = cz_wall_s() - t0;
    }
    if (st == CZ_OK) {
        cz_metrics_summarize(m, &cfg->slo, sum);
        cJSON *j = cz_cli_summary(cfg_json, cfg, &wl, m, sum, stats, date,
                                  http  ? "openai"
                                  : eng ? "cadenza-engine"
                                        : "cadenza-sim",
                                  http ? "http" : eng ? "engine" : "sim");
        if (http) {
            cJSON_AddStringToObject(j, "endpoint", http->endpoint);
            cJSON *h = cJSON_AddObjectToObject(j, "http");
            cJSON_AddNumberToObject(h, "sent", (double)hstats->sent);
            cJSON_AddNumberToObject(h, "chunks", (double)hstats->chunks);
            cJSON_AddNumberToObject(h, "usage_reported", (double)hstats->with_usage);
            cJSON_AddNumberToObject(h, "max_tokens_honoured", (double)hstats->len_honoured);
            cJSON_AddNumberToObject(h, "replies_carried_as_ids", (double)hstats->replies_as_ids);
            cJSON_AddNumberToObject(h, "replies_carried_as_count",
                                    (double)hstats->replies_as_count);
            cJSON_AddStringToObject(h, "api", http->api == CZ_HAPI_CHAT ? "chat" : "completions");
            cJSON_AddNumberToObject(h, "replies_carried_as_text", (double)hstats->replies_as_text);
            cJSON_AddNumberToObject(h, "prompt_len_missed", (double)hstats->prompt_len_missed);
            cJSON_AddNumberToObject(h, "barge_ins", (double)hstats->barge_ins);
            cJSON_AddNumberToObject(h, "barge_ins_streaming",
                                    (double)hstats->barge_ins_streaming);
            cJSON *ev = cJSON_AddObjectToObject(h, "events");
            cJSON_AddNumberToObject(ev, "sent", (double)hstats->events_sent);
            cJSON_AddNumberToObject(ev, "ok", (double)hstats->events_ok);
            cJSON_AddNumberToObject(ev, "applied", (double)hstats->events_applied);
            cJSON_AddNumberToObject(ev, "failed", (double)hstats->events_failed);
            cJSON_AddNumberToObject(ev, "dropped", (double)hstats->events_dropped);
            cJSON_AddBoolToObject(ev, "unsupported", hstats->events_unsupported);
            if (hstats->first_event_error[0])
                cJSON_AddStringToObject(ev, "first_error", hstats->first_event_error);
            cJSON *f = cJSON_AddObjectToObject(h, "failed_by");
            for (int k = 0; k < CZ_HFAIL_N; k++)
                cJSON_AddNumberToObject(f, cz_hfail_name((cz_hfail)k),
                                        (double)hstats->failed_by[k]);
            cJSON *fe = cJSON_AddObjectToObject(h, "first_error");
            for (int k = 0; k < CZ_HFAIL_N; k++)
                if (hstats->first_error[k][0])
                    cJSON_AddStringToObject(fe, cz_hfail_name((cz_hfail)k),
                                            hstats->first_error[k]);
        } else if (eng) {
            cJSON_AddStringToObject(j, "kernel_backend", eng->backend ? eng->backend : "cpu");
        }
        cJSON_AddBoolToObject(j, "partial", *partial); /* stopped by Ctrl-C */
        cJSON_AddNumberToObject(j, "seed", (double)cfg->seed);
        cJSON_AddItemToObject(j, "config", config_echo(cfg_json));
        *summary = j;
    }
    if (st == CZ_OK && writer && *writer)
        st = write_sessions(*writer, &wl, err);
    cz_workload_free(&wl);
    return st;
}

cz_status cz_cli_land_outputs(cz_results_writer **writer, cz_metrics *m, const cJSON *cfg_json,
                              const cJSON *summary, uint64_t seed, const char *tmp_summary,
                              cz_err *err)
{
    cz_status st = CZ_OK;
    if (*writer) {
        cJSON *echo = config_echo(cfg_json);
        char *cfg_text = cJSON_PrintUnformatted(echo);
        char *sum_text = cJSON_PrintUnformatted(summary);
        cJSON_Delete(echo);
        st = cz_results_close(*writer, m, cfg_text, sum_text, seed, err);
        *writer = NULL;
        cJSON_free(cfg_text);
        cJSON_free(sum_text);
    }
    if (st == CZ_OK && tmp_summary)
        st = cz_json_write_file(summary, tmp_summary, true, err);
    if (st == CZ_OK)
        st = cz_out_commit(err); /* the results and the summary land together */
    return st;
}

cJSON *cz_cli_summary(const cJSON *cfg_json, const cz_config *cfg, const cz_workload *wl,
                      const cz_metrics *m, const cz_summary *sum, const cz_run_stats *stats,
                      const char *date, const char *backend, const char *driver)
{
    /* vLLM's result JSON opens with the run's setup (benchmarks/serve.py, main_async) */
    cJSON *j = cJSON_CreateObject();
    CZ_ASSERT(j != NULL);
    if (date && date[0])
        cJSON_AddStringToObject(j, "date", date);
    else
        cJSON_AddNullToObject(j, "date");
    cJSON_AddStringToObject(j, "backend", backend);
    cJSON_AddStringToObject(j, "model_id", cfg->model.name);
    cJSON_AddNumberToObject(j, "num_prompts", (double)m->acct.requests);
    if (wl->live) {
        /* requests as clients sent them: no configured arrivals */
        cJSON_AddNullToObject(j, "request_rate");
        cJSON_AddNullToObject(j, "burstiness");
        cJSON_AddNullToObject(j, "max_concurrency");
    } else {
        add_arrival_keys(cfg_json, wl, j);
    }
    uint64_t peak_conc;
    double peak_tok;
    cz_metrics_peaks(m, &peak_conc, &peak_tok);
    cJSON_AddNumberToObject(j, "max_concurrent_requests", (double)peak_conc);
    cJSON_AddNumberToObject(j, "max_output_tokens_per_s", peak_tok);
    cJSON *body = cz_summary_json(sum);
    while (body->child) {
        cJSON *it = cJSON_DetachItemViaPointer(body, body->child);
        cJSON_AddItemToObject(j, it->string, it);
    }
    cJSON_Delete(body);
    cz_run_summary_json(cfg, m, stats, sum, j); /* with percentile_mode */
    cz_run_add_theory(cfg, cfg_json, sum, j);
    cJSON_AddStringToObject(j, "cadenza_version", cz_version());
    cJSON_AddStringToObject(j, "driver", driver);
    return j;
}

cz_status cz_cli_simulate(const cJSON *cfg_json, const char *where, const char *base_dir,
                          bool progress, const cz_pctset *pct, bool keep_records,
                          cz_config *cfg, cz_metrics *m, cz_summary *sum, cz_run_stats *stats,
                          cJSON **summary, double *wall_s, cz_err *err)
{
    bool partial;
    return run_config(cfg_json, where, base_dir, progress, NULL, NULL, NULL, NULL, pct,
                      keep_records,
                      false, NULL, NULL,
                      cfg, m, sum, stats, summary, wall_s, &partial, err);
}

cz_status cz_cli_run(const cJSON *cfg_json, const char *where, const char *base_dir,
                     bool progress, const cz_engine_opts *eng, const cz_pctset *pct,
                     cz_config *cfg, cz_metrics *m, cz_summary *sum, cz_run_stats *stats,
                     cJSON **summary, double *wall_s, bool *partial, cz_err *err)
{
    return run_config(cfg_json, where, base_dir, progress, NULL, eng, NULL, NULL, pct, true, false,
                      NULL, NULL,
                      cfg, m,
                      sum, stats, summary, wall_s, partial, err);
}

cz_status cz_cli_run_http(const cJSON *cfg_json, const char *where, const char *base_dir,
                          bool progress, const cz_hclient_opts *http, cz_hclient_stats *hs,
                          cz_config *cfg, cz_metrics *m, cz_summary *sum,
                          cz_run_stats *stats, cJSON **summary, double *wall_s,
                          bool *partial, cz_err *err)
{
    return run_config(cfg_json, where, base_dir, progress, NULL, NULL, http, hs, NULL, true, false,
                      NULL, NULL, cfg, m, sum, stats, summary, wall_s, partial, err);
}

int cz_cli_parse_percentiles(const char *cmd, const char *value, cz_pctset *out)
{
    memset(out, 0, sizeof *out);
    const char *p = value;
    if (!*p)
        return cz_cli_usage_error(cmd, "option '--percentiles': expected comma-separated "
                                       "percentiles in (0, 100], got an empty list");
    for (;;) {
        char *end;
        errno = 0;
        double q = strtod(p, &end);
        size_t len = strcspn(p, ",");
        if (end == p || end != p + len || errno || !isfinite(q) || !(q > 0.0 && q <= 100.0))
            return cz_cli_usage_error(cmd, "option '--percentiles': expected comma-separated "
                                           "percentiles in (0, 100], got '%.*s' in '%s'",
                                      (int)len, p, value);
        for (uint32_t i = 0; i < out->n; i++)
            if (out->q[i] == q)
                return cz_cli_usage_error(cmd, "option '--percentiles': %g is given twice in "
                                               "'%s'", q, value);
        if (out->n == CZ_PCT_MAX)
            return cz_cli_usage_error(cmd, "option '--percentiles': at most %d percentiles, "
                                           "got more in '%s'", CZ_PCT_MAX, value);
        out->q[out->n++] = q;
        if (!p[len])
            return CZ_EXIT_OK;
        p += len + 1;
    }
}

/* The input file a flag names, checked and made absolute (*abs: caller frees); errors
 * carry the flag. */
static cz_status flag_input(const char *flag, const char *path, char **abs, cz_err *err)
{
    if (cz_file_check_input(path, err) != CZ_OK)
        return cz_err_prefix(err, "%s: ", flag);
    *abs = realpath(path, NULL);
    if (!*abs) {
        cz_err_open(err, path, errno);
        return cz_err_prefix(err, "%s: ", flag);
    }
    return CZ_OK;
}

cz_status cz_cli_use_cost_file(cJSON *cfg_json, const char *path, cz_err *err)
{
    char *abs = NULL;
    if (flag_input("--cost", path, &abs, err) != CZ_OK)
        return err->status;
    cJSON *old = cJSON_GetObjectItemCaseSensitive(cfg_json, "cost");
    cJSON *cost = cJSON_CreateObject();
    static const char *const keep[] = {"tp", "bw_sat_sm_fraction"};
    for (size_t i = 0; cJSON_IsObject(old) && i < CZ_ARRAY_LEN(keep); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(old, keep[i]);
        if (v)
            cJSON_AddItemToObject(cost, keep[i], cJSON_Duplicate(v, 1));
    }
    cJSON_AddStringToObject(cost, "kind", "fitted");
    cJSON_AddStringToObject(cost, "file", abs);
    free(abs);
    if (old)
        cJSON_ReplaceItemInObjectCaseSensitive(cfg_json, "cost", cost);
    else
        cJSON_AddItemToObject(cfg_json, "cost", cost);
    return CZ_OK;
}

/* `v` made absolute against the working directory when it is a relative path; a new
 * string (caller frees) or NULL when it stays. */
static char *abs_path(const char *v)
{
    char cwd[4096];
    if (!v[0] || v[0] == '/' || !getcwd(cwd, sizeof cwd))
        return NULL;
    return cz_path_resolve(cwd, v);
}

/* Whether a string under key `key` is a path the working directory resolves. */
static bool path_key(const char *key, const char *v)
{
    if (strcmp(key, "path") == 0 || strcmp(key, "file") == 0)
        return true;
    if (strcmp(key, "weights") == 0)
        return strcmp(v, "random") != 0;
    if (strcmp(key, "model") == 0 || strcmp(key, "hardware") == 0)
        return cz_card_ref_is_path(v);
    return false;
}

/* Makes the paths under `node` (named `key`) absolute, in place. */
static void abs_paths(cJSON *node, const char *key)
{
    if (cJSON_IsString(node) && key && path_key(key, node->valuestring)) {
        char *a = abs_path(node->valuestring);
        if (a) {
            cJSON_SetValuestring(node, a);
            free(a);
        }
        return;
    }
    cJSON *it;
    if (cJSON_IsObject(node))
        cJSON_ArrayForEach(it, node) abs_paths(it, it->string);
    else if (cJSON_IsArray(node))
        cJSON_ArrayForEach(it, node) abs_paths(it, key);
}

cz_status cz_cli_set(cJSON *cfg_json, const char *assignment, cz_err *err)
{
    /* "router": "NAME" is the object {"policy": "NAME"}: a field of it can be set */
    const cJSON *router = cJSON_GetObjectItemCaseSensitive(cfg_json, "router");
    if (strncmp(assignment, "router.", 7) == 0 && cJSON_IsString(router)) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "policy", router->valuestring);
        cJSON_ReplaceItemInObjectCaseSensitive(cfg_json, "router", o);
    }
    cz_status st = cz_json_set_path(cfg_json, assignment, err);
    if (st != CZ_OK)
        return st;
    /* the node just set, named by the key path's last key */
    size_t klen = (size_t)(strchr(assignment, '=') - assignment);
    char *key = cz_xmalloc(klen + 1);
    memcpy(key, assignment, klen);
    key[klen] = '\0';
    const char *last = strrchr(key, '.');
    abs_paths((cJSON *)cz_json_get_path(cfg_json, key), last ? last + 1 : key);
    free(key);
    return CZ_OK;
}

cz_status cz_cli_use_trace(cJSON *cfg_json, const char *path, cz_err *err)
{
    char *abs = NULL;
    if (flag_input("--trace", path, &abs, err) != CZ_OK)
        return err->status;
    cJSON *wl = cJSON_GetObjectItemCaseSensitive(cfg_json, "workload");
    if (!cJSON_IsObject(wl)) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg_json, "workload");
        wl = cJSON_AddObjectToObject(cfg_json, "workload");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(wl, "synthetic");
    cJSON_DeleteItemFromObjectCaseSensitive(wl, "trace");
    cJSON *t = cJSON_AddObjectToObject(wl, "trace");
    cJSON_AddStringToObject(t, "path", abs);
    free(abs);
    return CZ_OK;
}

void cz_cli_use_model(cJSON *cfg_json, const char *model)
{
    struct stat sb;
    bool dir = stat(model, &sb) == 0 && S_ISDIR(sb.st_mode);
    char *a = path_key("model", model) || dir ? abs_path(model) : NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(cfg_json, "model");
    cJSON_AddStringToObject(cfg_json, "model", a ? a : model);
    free(a);
}

cz_status cz_cli_load_config(const char *path, const char *const *sets, int n_sets,
                             cJSON **cfg_json, char **base_dir, cz_err *err)
{
    *cfg_json = NULL;
    *base_dir = NULL;
    cJSON *j = NULL;
    cz_status st = CZ_OK;
    if (path && (st = cz_file_check_input(path, err)) != CZ_OK)
        return cz_err_prefix(err, "config argument: ");
    st = path ? cz_json_load(path, &j, err)
              : cz_json_parse(cz_default_config, "default config", &j, err);
    for (int i = 0; i < n_sets && st == CZ_OK; i++)
        st = cz_cli_set(j, sets[i], err);
    if (st != CZ_OK) {
        cJSON_Delete(j);
        return st;
    }
    *cfg_json = j;
    if (path) {
        *base_dir = cz_cli_dir_of(path);
    } else {
        char data[4096];
        cz_data_dir(data, sizeof data); /* the default names its trace from experiments/ */
        size_t n = strlen(data) + sizeof "/experiments";
        *base_dir = cz_xmalloc(n);
        snprintf(*base_dir, n, "%s/experiments", data);
    }
    return CZ_OK;
}

char *cz_cli_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return cz_xstrdup(".");
    size_t n = (size_t)(slash - path);
    char *d = cz_xmalloc(n + 2);
    memcpy(d, path, n ? n : 1);
    d[n ? n : 1] = '\0';
    return d;
}

/* `cadenza sim` (engine false) and `cadenza replay` (engine true): one command line, one
 * output path, two drivers. */
static int run_command(int argc, char **argv, bool engine)
{
    const char *cmd = engine ? "replay" : "sim";
    const char *config_path = NULL, *out_h5 = NULL, *out_summary = NULL, *cost_path = NULL;
    const char *trace_path = NULL, *model_ref = NULL;
    cz_engine_opts eopts = {.backend = "cpu"};
    cz_cli_http http = {.o = {.timeout_s = 21600.0}};
    cz_hclient_stats hstats;
    memset(&hstats, 0, sizeof hstats);
    bool engine_flag = false;
    cz_pctset pct = {0};
    const char **sets = cz_xcalloc((size_t)argc, sizeof *sets);
    int n_sets = 0;
    bool quiet = false, show_progress = true, whole = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(engine ? replay_usage : sim_usage, stdout);
            free(sets);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--set") == 0 || strcmp(a, "-o") == 0 ||
                   strcmp(a, "--output") == 0 || strcmp(a, "--summary") == 0 ||
                   strcmp(a, "--cost") == 0 || strcmp(a, "--percentiles") == 0 ||
                   strcmp(a, "--trace") == 0 || (!engine && strcmp(a, "--model") == 0) ||
                   (engine && (strcmp(a, "--backend") == 0 || strcmp(a, "--threads") == 0 ||
                               cz_cli_http_valued(a)))) {
            if (i + 1 >= argc) {
                free(sets);
                return cz_cli_usage_error(cmd, "option '%s' needs a value", a);
            }
            const char *v = argv[++i];
            if (strcmp(a, "--set") == 0) {
                sets[n_sets++] = v;
            } else if (strcmp(a, "--percentiles") == 0) {
                int prc = cz_cli_parse_percentiles(cmd, v, &pct);
                if (prc != CZ_EXIT_OK) {
                    free(sets);
                    return prc;
                }
            } else if (strcmp(a, "--cost") == 0) {
                cost_path = v;
            } else if (strcmp(a, "--trace") == 0) {
                trace_path = v;
            } else if (strcmp(a, "--model") == 0 && !engine) {
                model_ref = v;
            } else if (strcmp(a, "--summary") == 0) {
                out_summary = v;
            } else if (cz_cli_http_valued(a)) {
                int hrc = cz_cli_http_flag(cmd, &http, a, v);
                if (hrc != CZ_EXIT_OK) {
                    free(sets);
                    return hrc;
                }
            } else if (strcmp(a, "--backend") == 0) {
                engine_flag = true;
                if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                    free(sets);
                    return cz_cli_usage_error(cmd, "option '--backend': expected cpu or cuda, "
                                                   "got '%s'",
                                              v);
                }
                eopts.backend = v;
            } else if (strcmp(a, "--threads") == 0) {
                engine_flag = true;
                char *end;
                errno = 0;
                unsigned long t = strtoul(v, &end, 10);
                if (errno || end == v || *end || v[0] == '-' || t == 0 || t > 1024) {
                    free(sets);
                    return cz_cli_usage_error(
                        cmd, "option '--threads': expected a count from 1 to 1024, got '%s'", v);
                }
                eopts.threads = (uint32_t)t;
            } else {
                out_h5 = v;
            }
        } else if (strcmp(a, "--exact-percentiles") == 0) {
            sets[n_sets++] = "metrics.percentiles=exact";
        } else if (strcmp(a, "--no-events") == 0 && engine) {
            (void)cz_cli_http_flag(cmd, &http, a, NULL);
        } else if (strcmp(a, "--whole-workload") == 0 && !engine) {
            whole = true;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(a, "--no-progress") == 0) {
            show_progress = false;
        } else if (a[0] == '-') {
            free(sets);
            return cz_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!config_path) {
            config_path = a;
        } else {
            free(sets);
            return cz_cli_usage_error(cmd, "more than one config given ('%s', '%s')",
                                      config_path, a);
        }
    }
    if (engine && !config_path) {
        free(sets);
        return cz_cli_usage_error(cmd, "a config is required (e.g. experiments/engine/cpu.json)");
    }
    int hrc = cz_cli_http_finish(cmd, &http);
    if (hrc != CZ_EXIT_OK) {
        free(sets);
        return hrc;
    }
    if (http.o.endpoint && (engine_flag || cost_path)) {
        free(sets);
        return cz_cli_usage_error(cmd, "--backend, --threads and --cost are the engine's: "
                                       "with --endpoint the server runs the model");
    }
    /* Ctrl-C ends the run with what it has, marked partial, in every driver */
    volatile sig_atomic_t *sim_stop = cz_out_graceful_interrupt(false);
    if (engine)
        eopts.stop = http.o.stop = sim_stop;

    cz_err err;
    cz_err_clear(&err);
    cJSON *cfg_json = NULL;
    char *base_dir = NULL;
    const char *where = config_path ? config_path : "default config";
    cz_status st = cz_cli_load_config(config_path, sets, n_sets, &cfg_json, &base_dir, &err);
    if (st != CZ_OK) {
        free(sets);
        return cz_cli_fail(&err);
    }
    if (st == CZ_OK && trace_path)
        st = cz_cli_use_trace(cfg_json, trace_path, &err);
    if (st == CZ_OK && model_ref)
        cz_cli_use_model(cfg_json, model_ref);
    if (st == CZ_OK && cost_path)
        st = cz_cli_use_cost_file(cfg_json, cost_path, &err);
    /* every output gets its temporary now, so an unwritable one fails before the run */
    const char *tmp_h5 = NULL, *tmp_summary = NULL;
    if (st == CZ_OK && out_h5)
        st = cz_out_add("-o", out_h5, &tmp_h5, &err);
    if (st == CZ_OK && out_summary)
        st = cz_out_add("--summary", out_summary, &tmp_summary, &err);

    cz_config cfg;
    cz_metrics m;
    memset(&m, 0, sizeof m);
    cJSON *summary = NULL;
    int rc = CZ_EXIT_OK;
    cz_summary sum;
    cz_run_stats stats;
    double wall_s = 0;
    bool partial = false;
    cz_results_writer *writer = NULL;
    if (st == CZ_OK) {
        st = run_config(cfg_json, where, base_dir, show_progress && !quiet, sim_stop,
                        engine && !http.o.endpoint ? &eopts : NULL,
                        http.o.endpoint ? &http.o : NULL, &hstats, &pct, false, whole, tmp_h5,
                        &writer, &cfg, &m,
                        &sum,
                        &stats, &summary, &wall_s, &partial, &err);
        if (st != CZ_OK)
            cz_cli_blame_set(&err, where, sets, n_sets, n_sets);
    }
    if (st != CZ_OK) {
        rc = cz_cli_fail(&err);
        goto out;
    }

    st = cz_cli_land_outputs(&writer, &m, cfg_json, summary, cfg.seed,
                             out_summary ? tmp_summary : NULL, &err);
    if (st != CZ_OK) {
        rc = cz_cli_fail(&err);
        goto out;
    }
    if (!quiet) {
        printf("cadenza %s  experiment '%s'  seed %llu  model %s on %s  scheduler %s\n",
               cz_version(), cfg.name, (unsigned long long)cfg.seed, cfg.model.name, cfg.hw.name,
               cfg.scheduler);
        if (partial)
            printf("partial run: stopped at t = %.1f s; turns still open count as unfinished\n",
                   stats.sim_time_s);
        cz_summary_print(&sum, stdout);
        print_pipeline_lines(summary);
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(summary, "queueing_theory");
        if (th) {
            const cJSON *pred = cJSON_GetObjectItemCaseSensitive(th, "mean_queue_wait_ms");
            const cJSON *rel = cJSON_GetObjectItemCaseSensitive(th, "relative_error");
            const cJSON *model = cJSON_GetObjectItemCaseSensitive(th, "model");
            printf("queueing theory (%s): mean queue wait %.2f ms, simulated %.2f ms, "
                   "relative error %+.2f %%\n",
                   model->valuestring, pred->valuedouble, sum.queue_wait_ms.mean,
                   rel->valuedouble * 100);
        }
        fflush(stdout);
        if (http.o.endpoint)
            print_http_lines(&http.o, &hstats, &sum);
        else if (engine)
            print_engine_lines(&m, &cfg, &stats, wall_s);
        else
            fprintf(stderr,
                "run: %llu events in %.3f s wall = %.2f M events/s; %.1f simulated s per wall s; "
                "peak memory %.1f MB\n",
                (unsigned long long)stats.events, wall_s,
                wall_s > 0 ? (double)stats.events / wall_s / 1e6 : 0.0,
                wall_s > 0 ? stats.sim_time_s / wall_s : 0.0,
                (double)cz_proc_peak_rss_bytes() / (1024.0 * 1024.0));
    }
out:
    cz_results_discard(writer);
    cz_out_discard();
    free(sets);
    cJSON_Delete(summary);
    cJSON_Delete(cfg_json);
    cz_metrics_free(&m);
    free(base_dir);
    return rc;
}

int cz_cmd_sim(int argc, char **argv)
{
    return run_command(argc, argv, false);
}

int cz_cmd_replay(int argc, char **argv)
{
    return run_command(argc, argv, true);
}
