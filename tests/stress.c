/* stress.c - the randomized stress suite: experiment configs generated from a seed across
 * what the simulator serves (text, omni and TTS pipelines, a text model whose replies the
 * client speaks, full-duplex streams, a vision-language model on one GPU; every scheduler; idle KV dropped or offloaded; LRU and
 * next-use eviction; preload; bidirectional blocks; windows and sinks; automatic prefix
 * caching; gateways; barge-in;
 * pools from a few blocks to the whole GPU; routers and replicas; open and closed loops;
 * synthetic conversations of several turns;
 * clocks that stop mid-run; workloads of thousands of requests, so that streamed windows
 * move; trace files written for the run with equal, far-apart and out-of-order timestamps,
 * byte-order marks and CRLF line ends), each run twice by the cadenza program: as the
 * simulator streams the workload, and with --whole-workload. A run passes when it exits 0
 * within the time bound, accounts for every request, frame and stream (completed +
 * aborted + rejected + failed + unfinished == requests, and likewise), and both runs write
 * byte-identical summaries (every other config runs a third time with sim.fast_forward
 * false, every step through the runtime's dispatch, and that summary must be byte-identical
 * too); or when it exits 2 with a message for a combination the config
 * loader refuses (at most a tenth of the runs may). A crash, an exit 3, a hang, a lost
 * request or a difference fails the run, and the config is printed so that it can be kept
 * as a regression test (tests/data/stress/).
 *
 * --replay N generates N configs for `cadenza replay` instead: tiny models on the CPU
 * engine (a text decoder, its replies spoken by the client with barge-in, the omni
 * pipeline with barge-in, the vision-language model under
 * the cross-stage schedulers) with the same server, workload and trace variety at a few
 * requests each, run once (wall-clock runs are not byte-reproducible) and held to the same
 * accounting.
 *
 * --fleet N adds N configs where the fast-forward does most steps (a text model's replicas
 * one to a GPU under FCFS, any router, pool, source and timeline), each also run with it off.
 *
 * usage: stress CADENZA SOURCE_ROOT [--seed S] [--count N] [--fleet N] [--replay N]
 *               [--timeout SEC] [--keep DIR] [--print] [--verbose] [CONFIG.json | DIR]...
 * With config files (or folders of them), runs those instead of generated ones (a config
 * whose name starts with "replay" through `cadenza replay`). Prints one line per failure
 * and ends with "N passed, N failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* ---- a small deterministic generator (splitmix64) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next_u64(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A generated config's fitted cost file, carried in the config until it is written. */
#define COST_BODY "_stress_cost_file"

static double unif(rng *r) { return (double)(next_u64(r) >> 11) * 0x1.0p-53; }
static uint32_t below(rng *r, uint32_t n) { return (uint32_t)(unif(r) * n); }
static bool chance(rng *r, double p) { return unif(r) < p; }
static uint32_t between(rng *r, uint32_t lo, uint32_t hi) { return lo + below(r, hi - lo + 1); }
static double log_between(rng *r, double lo, double hi)
{
    return exp(log(lo) + unif(r) * (log(hi) - log(lo)));
}
static const char *pick(rng *r, const char *const *v, uint32_t n) { return v[below(r, n)]; }
#define PICK_U(r, ...)                                                                        \
    ((const uint32_t[]){__VA_ARGS__})[below(r, sizeof((const uint32_t[]){__VA_ARGS__}) /         \
                                                    sizeof(uint32_t))]
#define PICK(r, ...)                                                                          \
    pick(r, (const char *const[]){__VA_ARGS__},                                             \
         sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* ---- the generator ---- */

static const char *root;
static bool verbose;
static const char *scratch; /* where generated trace files are written */

static char *data_path(const char *rel)
{
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}

static void add_path(cJSON *o, const char *key, const char *rel)
{
    char *p = data_path(rel);
    cJSON_AddStringToObject(o, key, p);
    free(p);
}

static cJSON *dist(rng *r, double lo, double hi)
{
    double mean = log_between(r, lo, hi);
    switch (below(r, 4)) {
    case 0: return cJSON_CreateNumber(round(mean));
    case 1: {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "dist", "uniform");
        cJSON_AddNumberToObject(d, "min", lo);
        cJSON_AddNumberToObject(d, "max", round(mean) > lo ? round(mean) : lo + 1);
        return d;
    }
    case 2: {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "dist", "lognormal");
        cJSON_AddNumberToObject(d, "mean", mean);
        cJSON_AddNumberToObject(d, "cv", 0.2 + unif(r));
        return d;
    }
    default: {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "dist", "exponential");
        cJSON_AddNumberToObject(d, "mean", mean);
        return d;
    }
    }
}

/* Writes a trace file of `rows` rows for config `seed` in the scratch folder, in the Azure
 * format (TIMESTAMP,ContextTokens,GeneratedTokens) or BurstGPT's v1 (Timestamp, Model,
 * Request tokens, Response tokens, Total tokens, Log Type), with what real exports hold:
 * timestamps all equal, years apart, or out of order; a UTF-8 byte-order mark; CRLF line
 * ends (no gaps of years for a `wall_clock` run). Stores its path in t["path"]. */
static void add_odd_trace(rng *r, cJSON *t, uint64_t seed, uint32_t rows, double in_hi,
                          double out_hi, bool wall_clock)
{
    bool azure = chance(r, 0.5);
    char path[700];
    snprintf(path, sizeof path, "%s/trace-%" PRIu64 ".csv", scratch, seed);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    const char *eol = chance(r, 0.4) ? "\r\n" : "\n";
    if (chance(r, 0.4))
        fputs("\xEF\xBB\xBF", f);
    fprintf(f, "%s%s",
            azure ? "TIMESTAMP,ContextTokens,GeneratedTokens"
                  : "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
            eol);
    uint32_t order = below(r, 4); /* 0 in order, 1 all equal, 2 years apart, 3 shuffled */
    if (order == 2 && wall_clock)
        order = 0; /* a replay waits out its gaps on the wall clock */
    double t_s = 0.0;
    for (uint32_t i = 0; i < rows; i++) {
        double gap = order == 1 ? 0.0 : order == 2 ? log_between(r, 1e5, 3e7) : log_between(r, 0.001, 20);
        t_s = order == 3 ? log_between(r, 1, 1e4) : t_s + gap;
        uint32_t in = (uint32_t)log_between(r, 1, in_hi), out = (uint32_t)log_between(r, 1, out_hi);
        if (azure) {
            /* seconds from 2023-01-01 as a date and time */
            long secs = (long)t_s, days = secs / 86400, rem = secs % 86400;
            int y = 2023;
            while (days >= 365) {
                days -= 365;
                y++;
            }
            static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
            int m = 0;
            while (days >= mdays[m]) {
                days -= mdays[m];
                m++;
            }
            fprintf(f, "%04d-%02d-%02ld %02ld:%02ld:%02ld.%07ld,%u,%u%s", y, m + 1, days + 1,
                    rem / 3600, rem % 3600 / 60, rem % 60,
                    (long)((t_s - (double)secs) * 1e7), in, out, eol);
        } else {
            fprintf(f, "%.3f,ChatGPT,%u,%u,%u,Conversation log%s", t_s, in, out, in + out, eol);
        }
    }
    fclose(f);
    cJSON_AddStringToObject(t, "path", path);
}

/* A source of turns: synthetic lengths, a slice of a shipped trace, or a trace file written
 * for the run. `multi`: sessions of several turns are welcome; `big`: thousands of
 * synthetic requests may come (streamed windows then move); `wall_clock`: for a replay,
 * which waits out the trace's gaps and runs its prompts for real (no rows years apart, no
 * Mooncake contexts). Returns whether the source has timestamps. */
static bool add_source(rng *r, cJSON *w, bool multi, double in_hi, double out_hi, uint64_t seed,
                       bool big, bool wall_clock)
{
    uint32_t n = big && chance(r, 0.06) ? between(r, 1000, 4000) : between(r, 1, 48);
    if (chance(r, 0.12)) {
        cJSON *t = cJSON_AddObjectToObject(w, "trace");
        add_odd_trace(r, t, seed, n < 200 ? n : 200, in_hi, out_hi, wall_clock);
        return true;
    }
    uint32_t kind = below(r, multi ? 6 : 5);
    if (kind == 3 && wall_clock)
        kind = 2; /* Mooncake's contexts run to tens of thousands of tokens: not for replays */
    if (kind <= 1) {
        cJSON *s = cJSON_AddObjectToObject(w, "synthetic");
        cJSON_AddNumberToObject(s, "requests", n);
        cJSON_AddItemToObject(s, "input_tokens", dist(r, 1, in_hi));
        if (chance(r, 0.25)) {
            cJSON *d = cJSON_AddObjectToObject(s, "output_tokens");
            cJSON_AddStringToObject(d, "dist", "trace");
            add_path(d, "path", "traces/data/sharegpt/sharegpt_sample.json");
            cJSON_AddNumberToObject(d, "max_tokens", round(out_hi));
        } else {
            cJSON_AddItemToObject(s, "output_tokens", dist(r, 1, out_hi));
        }
        if (chance(r, 0.2))
            cJSON_AddStringToObject(s, "class", PICK(r, "rt", "be"));
        if (multi && chance(r, 0.25)) /* conversations: closed sessions of several turns */
            cJSON_AddItemToObject(s, "turns", dist(r, 1, 6));
        return false;
    }
    cJSON *t = cJSON_AddObjectToObject(w, "trace");
    bool timed = true;
    switch (kind) {
    case 2:
        add_path(t, "path", PICK(r, "traces/data/azure_llm_2023_conv/AzureLLMInferenceTrace_conv.csv",
                                 "traces/data/azure_llm_2023_code/AzureLLMInferenceTrace_code.csv"));
        /* prompts of thousands of tokens: an omni pipeline over 3,685 of them took 45 s
         * unsanitized, beyond the harness's timeout under the sanitizers */
        if (n > 800)
            n = 800;
        break;
    case 3:
        add_path(t, "path", "traces/data/mooncake_conversation/conversation_trace_head.jsonl");
        /* contexts of tens of thousands of tokens: a few hundred requests keep a run within
         * the harness's timeout under the sanitizers, ordering schedulers included */
        if (n > 300)
            n = 300;
        break;
    case 4:
        add_path(t, "path", "traces/data/sharegpt/sharegpt_sample.json");
        timed = false;
        break;
    default:
        /* BurstGPT's sessions keep their real think times (minutes): not for replays */
        if (chance(r, 0.5) || wall_clock) {
            add_path(t, "path", "traces/data/sharegpt/sharegpt_sample.json");
            cJSON_AddBoolToObject(t, "multi_turn", true);
            timed = false;
        } else {
            add_path(t, "path", PICK(r, "traces/data/burstgpt3/BurstGPT_3_head.csv",
                                     "traces/data/burstgpt/BurstGPT_1_head.csv"));
            cJSON_AddBoolToObject(t, "new_input_only", chance(r, 0.7));
        }
        break;
    }
    cJSON_AddNumberToObject(w, "max_requests", n);
    return timed;
}

static void add_arrivals(rng *r, cJSON *w, bool timed, bool closed_ok)
{
    cJSON *a = cJSON_AddObjectToObject(w, "arrivals");
    uint32_t k = below(r, timed ? 4 : 3);
    if (k == 0 || (k == 2 && !closed_ok)) {
        cJSON_AddStringToObject(a, "process", "poisson");
        cJSON_AddNumberToObject(a, "rate_rps", log_between(r, 0.05, 200));
    } else if (k == 1) {
        cJSON_AddStringToObject(a, "process", "gamma");
        cJSON_AddNumberToObject(a, "rate_rps", log_between(r, 0.05, 200));
        cJSON_AddNumberToObject(a, "burstiness", log_between(r, 0.1, 4));
    } else if (k == 2) {
        cJSON_AddStringToObject(a, "process", "closed_loop");
        cJSON_AddNumberToObject(a, "concurrency", between(r, 1, 16));
        if (chance(r, 0.5))
            cJSON_AddItemToObject(a, "think_s", dist(r, 0.01, 5));
    } else {
        cJSON_AddStringToObject(a, "process", "trace");
        if (chance(r, 0.5))
            cJSON_AddStringToObject(a, "turns", "closed");
        if (chance(r, 0.5))
            cJSON_AddNumberToObject(w, "time_scale", log_between(r, 0.001, 2));
    }
}

/* Server fields for one stage or for all: pools from a few blocks to derived. */
static void add_server(rng *r, cJSON *s, bool allow_window)
{
    static const uint32_t seq_v[] = {1, 2, 4, 8, 32, 256};
    uint32_t seqs = seq_v[below(r, 6)];
    static const uint32_t tok_v[] = {16, 64, 512, 2048, 8192};
    uint32_t tokens = tok_v[below(r, 5)];
    if (tokens < seqs)
        tokens = seqs;
    if (chance(r, 0.7)) {
        cJSON_AddNumberToObject(s, "max_num_seqs", seqs);
        cJSON_AddNumberToObject(s, "max_num_batched_tokens", chance(r, 0.7) ? tokens : 8192);
    }
    if (chance(r, 0.2))
        cJSON_AddBoolToObject(s, "chunked_prefill", false);
    static const uint32_t bt_v[] = {1, 4, 16, 16, 32};
    uint32_t bt = bt_v[below(r, 5)];
    cJSON_AddNumberToObject(s, "block_tokens", bt);
    switch (below(r, 4)) {
    /* a tiny pool: a few turns fit, longer ones are rejected (a pool no turn fits is a
     * config error) */
    case 0: cJSON_AddNumberToObject(s, "kv_blocks", between(r, 1, 8) + 2048 / bt); break;
    case 1: cJSON_AddNumberToObject(s, "kv_blocks", between(r, 9, 256) + 8192 / bt); break;
    case 2: cJSON_AddNumberToObject(s, "kv_blocks", between(r, 257, 8192)); break;
    default: break; /* derived from the GPU */
    }
    bool offload = chance(r, 0.5);
    cJSON_AddStringToObject(s, "kv_idle", offload ? "offload" : "drop");
    bool window = allow_window && chance(r, 0.15);
    bool bidi = !window && chance(r, 0.15);
    if (window) {
        cJSON_AddNumberToObject(s, "kv_window_tokens", between(r, 1, 1024));
        cJSON_AddNumberToObject(s, "kv_sink_tokens", between(r, 0, 32));
    }
    if (bidi)
        cJSON_AddBoolToObject(s, "kv_bidirectional", true);
    if (!window && chance(r, 0.5))
        cJSON_AddStringToObject(s, "kv_evict", PICK(r, "lru", "next_use", "next_use_scan"));
    if (!window && chance(r, 0.2))
        cJSON_AddStringToObject(s, "kv_evict_unit", PICK(r, "session", "block"));
    cJSON_AddBoolToObject(s, "kv_preload", offload && chance(r, 0.5));
    if (chance(r, 0.2))
        cJSON_AddNumberToObject(s, "preload_protect_fraction", unif(r));
    if (chance(r, 0.2))
        cJSON_AddNumberToObject(s, "reply_prior_s", log_between(r, 0.01, 20));
    if (chance(r, 0.1))
        cJSON_AddNumberToObject(s, "max_model_len", between(r, 16, 8192));
    /* automatic prefix caching (vLLM's APC), with every idle-KV and eviction setting above
     * but a window (which the loader refuses with it) */
    if (!window && chance(r, 0.3))
        cJSON_AddBoolToObject(s, "prefix_caching", true);
}

/* Server fields picked with no regard for what goes together (windows with next-use
 * eviction, preload without offload, a token budget below the sequence cap...): the
 * config loader must refuse what it cannot serve with exit 2, never crash. */
static void add_free_server(rng *r, cJSON *s)
{
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "max_num_seqs", between(r, 1, 300));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "max_num_batched_tokens", between(r, 1, 9000));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "block_tokens", between(r, 1, 64));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "kv_blocks", between(r, 0, 64));
    if (chance(r, 0.5))
        cJSON_AddStringToObject(s, "kv_idle", PICK(r, "drop", "offload"));
    if (chance(r, 0.5))
        cJSON_AddStringToObject(s, "kv_evict", PICK(r, "lru", "next_use", "next_use_scan"));
    if (chance(r, 0.5))
        cJSON_AddBoolToObject(s, "kv_preload", chance(r, 0.5));
    if (chance(r, 0.5))
        cJSON_AddBoolToObject(s, "kv_bidirectional", chance(r, 0.5));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "kv_window_tokens", between(r, 0, 64));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(s, "kv_sink_tokens", between(r, 0, 64));
    if (chance(r, 0.3))
        cJSON_AddBoolToObject(s, "chunked_prefill", chance(r, 0.5));
    if (chance(r, 0.3))
        cJSON_AddNumberToObject(s, "max_model_len", between(r, 0, 64));
    if (chance(r, 0.3))
        cJSON_AddBoolToObject(s, "prefix_caching", chance(r, 0.5));
}

static cJSON *scheduler(rng *r)
{
    const char *name = PICK(r, "fcfs", "fcfs_scan", "liveserve", "voxserve", "bros");
    if (!chance(r, 0.3))
        return cJSON_CreateString(name);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", name);
    if (strcmp(name, "liveserve") == 0) {
        cJSON_AddNumberToObject(s, "p_safe_s", log_between(r, 0.05, 10));
        cJSON_AddNumberToObject(s, "alpha", unif(r) * 2);
        cJSON_AddNumberToObject(s, "beta", unif(r) * 2);
    } else if (strcmp(name, "bros") == 0) {
        cJSON_AddNumberToObject(s, "base_batch", between(r, 1, 256));
        cJSON_AddNumberToObject(s, "rt_ttft_ms", log_between(r, 10, 5000));
    } else if (strcmp(name, "voxserve") == 0) {
        cJSON_AddBoolToObject(s, "throughput_mode", chance(r, 0.3));
        cJSON_AddNumberToObject(s, "urgent_window_s", unif(r) * 3);
    }
    /* the GPU execution model: any scheduler's stages may run on co-running streams */
    if (chance(r, 0.4)) {
        cJSON_AddBoolToObject(s, "async_pipeline", chance(r, 0.6));
        cJSON_AddNumberToObject(s, "corun_slowdown", 1.0 + unif(r) * 3);
    }
    return s;
}

static void add_pipeline_placement(rng *r, cJSON *c, const char *const *stages, uint32_t n,
                                   uint32_t gpus)
{
    cJSON *p = cJSON_AddObjectToObject(c, "pipeline");
    for (uint32_t i = 0; i < n; i++) {
        cJSON *st = cJSON_AddObjectToObject(p, stages[i]);
        uint32_t reps = between(r, 1, 3);
        cJSON_AddNumberToObject(st, "replicas", reps);
        cJSON *g = cJSON_AddArrayToObject(st, "gpus");
        for (uint32_t k = 0; k < reps; k++)
            cJSON_AddItemToArray(g, cJSON_CreateNumber(below(r, gpus)));
        if (chance(r, 0.3))
            add_server(r, st, false);
    }
}

/* The router: any policy by name, or as an object with late load signals, a bound on
 * session affinity, the prefix-aware routers' weights (zero ones included), and
 * kv_router's output-block tracking. */
static void add_router(rng *r, cJSON *c)
{
    const char *policy = PICK(r, "session", "least_loaded", "random", "round_robin",
                              "power_of_two", "least_outstanding", "llm_d", "kv_router");
    if (!chance(r, 0.4)) {
        cJSON_AddStringToObject(c, "router", policy);
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(c, "router");
    cJSON_AddStringToObject(o, "policy", policy);
    if (chance(r, 0.6))
        cJSON_AddNumberToObject(o, "signal_delay_s", chance(r, 0.2) ? 0 : log_between(r, 1e-3, 5));
    if (chance(r, 0.5))
        cJSON_AddNumberToObject(o, "affinity_max_load", below(r, 40));
    static const char *const weights[] = {"prefix_weight", "queue_weight", "kv_weight",
                                          "overlap_score_weight"};
    for (uint32_t k = 0; k < 4; k++)
        if (chance(r, 0.15))
            cJSON_AddNumberToObject(o, weights[k], chance(r, 0.3) ? 0 : log_between(r, 0.01, 100));
    if (chance(r, strcmp(policy, "kv_router") == 0 ? 0.7 : 0.1))
        cJSON_AddBoolToObject(o, "track_output_blocks", !chance(r, 0.3));
}

/* A text model's fleet: from two replicas to a few hundred, on consecutive GPUs or a list. */
static void add_fleet(rng *r, cJSON *c)
{
    cJSON *llm = cJSON_AddObjectToObject(cJSON_AddObjectToObject(c, "pipeline"), "llm");
    uint32_t reps = chance(r, 0.7) ? between(r, 2, 8) : between(r, 9, 300);
    cJSON_AddNumberToObject(llm, "replicas", reps);
    if (reps <= 8 && chance(r, 0.5)) {
        cJSON *g = cJSON_AddArrayToObject(llm, "gpus");
        for (uint32_t k = 0; k < reps; k++)
            cJSON_AddItemToArray(g, cJSON_CreateNumber(below(r, reps)));
    } else if (chance(r, 0.5)) {
        cJSON_AddNumberToObject(llm, "first_gpu", below(r, 4));
    }
}

/* Disaggregated prefill and decode: pools of one to a few replicas on GPUs of their own or
 * shared, their own server settings and tensor parallelism, a slow or a fast KV link. */
static void add_pd(rng *r, cJSON *c)
{
    cJSON *pd = cJSON_AddObjectToObject(c, "disaggregation");
    static const char *const pools[] = {"prefill", "decode"};
    for (uint32_t i = 0; i < 2; i++) {
        if (chance(r, 0.2))
            continue;
        cJSON *o = cJSON_AddObjectToObject(pd, pools[i]);
        uint32_t reps = chance(r, 0.8) ? between(r, 1, 4) : between(r, 5, 40);
        cJSON_AddNumberToObject(o, "replicas", reps);
        if (chance(r, 0.3))
            cJSON_AddNumberToObject(o, "first_gpu", below(r, 3));
        if (chance(r, 0.2))
            cJSON_AddNumberToObject(o, "tp", PICK_U(r, 2, 4));
        if (chance(r, 0.3))
            add_server(r, o, false);
    }
    if (chance(r, 0.6))
        cJSON_AddNumberToObject(pd, "link_GBps", log_between(r, 0.01, 400));
    if (chance(r, 0.4))
        cJSON_AddNumberToObject(pd, "link_latency_s", chance(r, 0.3) ? 0 : log_between(r, 1e-6, 0.05));
}

/* `card_ratio`: the model's pipeline sets the audio lengths (a talker fed by a text
 * stage); otherwise the workload draws its own. */
static void add_audio(rng *r, cJSON *w, bool spoken_input, bool card_ratio)
{
    cJSON *a = cJSON_AddObjectToObject(w, "audio");
    if (!card_ratio) {
        cJSON_AddNumberToObject(a, "tokens_per_text_token", 0.5 + 3.5 * unif(r));
        if (chance(r, 0.5))
            cJSON_AddNumberToObject(a, "seconds_per_audio_token", 0.02 + 0.1 * unif(r));
    }
    if (chance(r, 0.6))
        cJSON_AddNumberToObject(a, "speech_s_per_input_token", 0.05 + 0.4 * unif(r));
    if (spoken_input && chance(r, 0.5))
        cJSON_AddNumberToObject(a, "input_audio_tokens_per_s", 12.5);
    if (chance(r, 0.5)) {
        cJSON *b = cJSON_AddObjectToObject(w, "barge_in");
        cJSON_AddNumberToObject(b, "p", chance(r, 0.5) ? 1.0 : 0.3);
    }
}

/* A config named "<kind>-<seed>" with its run's seed, and its workload and server objects. */
static cJSON *begin_config(rng *r, const char *kind, uint64_t seed, cJSON **w, cJSON **server)
{
    cJSON *c = cJSON_CreateObject();
    char name[64];
    snprintf(name, sizeof name, "%s-%" PRIu64, kind, seed);
    cJSON_AddStringToObject(c, "name", name);
    cJSON_AddNumberToObject(c, "seed", (double)between(r, 1, 1000000));
    if (chance(r, 0.3)) /* every percentile mode (auto, the default, switches past 2M) */
        cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "metrics"), "percentiles",
                                PICK(r, "auto", "sketch", "exact"));
    *w = cJSON_AddObjectToObject(c, "workload");
    *server = cJSON_AddObjectToObject(c, "server");
    return c;
}

static cJSON *generate(uint64_t seed)
{
    rng r = {seed * 0x2545F4914F6CDD1DULL + 1};
    cJSON *w, *server;
    cJSON *c = begin_config(&r, "stress", seed, &w, &server);
    uint32_t family = below(&r, 20);
    if (family < 7) {
        /* a text model on one stage */
        bool big = chance(&r, 0.3);
        cJSON_AddStringToObject(c, "model", big ? "llama-2-70b" : "llama-3-8b");
        cJSON_AddStringToObject(c, "hardware", PICK(&r, "h100-sxm", "a100-80gb", "h200"));
        if (big || chance(&r, 0.2)) {
            cJSON *cost = cJSON_AddObjectToObject(c, "cost");
            static const uint32_t tp_v[] = {2, 4, 8};
            cJSON_AddNumberToObject(cost, "tp", tp_v[below(&r, 3)]);
        } else if (chance(&r, 0.1)) {
            cJSON *cost = cJSON_AddObjectToObject(c, "cost");
            cJSON_AddStringToObject(cost, "kind", "service");
            cJSON_AddItemToObject(cost, "service_s", dist(&r, 0.001, 1));
        } else if (chance(&r, 0.15)) {
            /* a fitted cost (as `calibrate` writes), with the request handling before
             * scheduling that `calibrate --observed` fits: the file is written beside the
             * config (COST_BODY, taken out by the caller) */
            char file[64];
            snprintf(file, sizeof file, "stress-cost-%" PRIu64 ".json", seed);
            cJSON *cost = cJSON_AddObjectToObject(c, "cost");
            cJSON_AddStringToObject(cost, "kind", "fitted");
            cJSON_AddStringToObject(cost, "file", file);
            cJSON *body = cJSON_AddObjectToObject(c, COST_BODY);
            cJSON_AddStringToObject(body, "kind", "fitted");
            cJSON_AddStringToObject(body, "model", cJSON_GetStringValue(
                                                       cJSON_GetObjectItem(c, "model")));
            cJSON *llm = cJSON_AddObjectToObject(cJSON_AddObjectToObject(body, "stages"), "llm");
            cJSON_AddNumberToObject(llm, "per_step_s", 1e-4 + 5e-3 * unif(&r));
            cJSON_AddNumberToObject(llm, "per_seq_s", 1e-4 * unif(&r));
            cJSON_AddNumberToObject(llm, "per_token_s", 1e-4 * unif(&r));
            cJSON_AddNumberToObject(llm, "per_weight_byte_s", 1e-12 * unif(&r));
            cJSON_AddNumberToObject(llm, "per_kv_byte_s", 1e-11 * unif(&r));
            if (chance(&r, 0.7)) {
                cJSON *req = cJSON_AddObjectToObject(body, "request");
                cJSON_AddNumberToObject(req, "ingest_s", chance(&r, 0.2) ? 0 : 0.02 * unif(&r));
                cJSON_AddNumberToObject(req, "ingest_per_token_s", 1e-5 * unif(&r));
            }
        }
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        bool service = cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(c, "cost"), "service_s") != NULL;
        bool pd = !service && chance(&r, 0.25);
        add_server(&r, server, !pd);
        if (pd) {
            add_pd(&r, c);
            if (chance(&r, 0.7))
                add_router(&r, c);
        } else if (chance(&r, 0.35)) {
            add_fleet(&r, c);
            add_router(&r, c);
        }
        bool timed = add_source(&r, w, true, 4000, 800, seed, true, false);
        add_arrivals(&r, w, timed, true);
        if (chance(&r, 0.2))
            cJSON_AddNumberToObject(w, "best_effort_fraction", unif(&r));
        if (chance(&r, 0.3)) {
            cJSON *slo = cJSON_AddObjectToObject(c, "slo");
            cJSON_AddNumberToObject(slo, "ttft_ms", log_between(&r, 10, 5000));
            cJSON_AddNumberToObject(slo, "tpot_ms", log_between(&r, 5, 500));
        }
        if (chance(&r, 0.15)) /* a cascaded voice assistant: the client speaks the text */
            add_audio(&r, w, false, false);
    } else if (family < 14) {
        /* Qwen3-Omni's spoken pipeline on an 8-GPU server */
        static const char *const stages[] = {"audio_encoder", "thinker", "talker", "code2wav"};
        cJSON_AddStringToObject(c, "model", "qwen3-omni");
        cJSON_AddStringToObject(c, "hardware", "h200");
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        uint32_t gpus = between(&r, 1, 8);
        add_pipeline_placement(&r, c, stages, 4, gpus);
        add_server(&r, server, false);
        if (gpus < 4 && !cJSON_GetObjectItemCaseSensitive(server, "kv_blocks"))
            cJSON_AddNumberToObject(server, "kv_blocks", between(&r, 1, 4096));
        add_router(&r, c);
        bool timed = add_source(&r, w, true, 600, 300, seed, true, false);
        add_arrivals(&r, w, timed, true);
        add_audio(&r, w, true, true);
        if (chance(&r, 0.3)) {
            cJSON *slo = cJSON_AddObjectToObject(c, "slo");
            cJSON_AddNumberToObject(slo, "audio_ttfp_ms", log_between(&r, 100, 5000));
        }
    } else if (family < 17) {
        /* full-duplex streams on the thinker, with a gateway */
        cJSON_AddStringToObject(c, "model", "qwen3-omni");
        cJSON_AddStringToObject(c, "stage", "thinker");
        cJSON_AddStringToObject(c, "hardware", PICK(&r, "rtx-pro-6000-blackwell", "h100-sxm"));
        if (chance(&r, 0.5))
            cJSON_AddNumberToObject(c, "weight_bytes", 1);
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        add_server(&r, server, true);
        cJSON *s = cJSON_AddObjectToObject(w, "streams");
        double period = log_between(&r, 0.08, 2.0);
        cJSON_AddNumberToObject(s, "count", between(&r, 1, 24));
        cJSON_AddNumberToObject(s, "frame_period_s", period);
        cJSON_AddNumberToObject(s, "tokens_in_per_frame", between(&r, 1, 50));
        cJSON_AddNumberToObject(s, "tokens_out_per_frame", between(&r, 1, 60));
        cJSON_AddNumberToObject(s, "duration_s", period * between(&r, 1, 30));
        switch (below(&r, 4)) {
        case 0: cJSON_AddBoolToObject(s, "stagger", false); break;
        case 1: cJSON_AddStringToObject(s, "stagger", "random"); break;
        case 2: cJSON_AddNumberToObject(s, "arrival_spacing_s", period * unif(&r)); break;
        default: break;
        }
        if (chance(&r, 0.5)) {
            cJSON *a = cJSON_AddObjectToObject(c, "admission");
            if (chance(&r, 0.6)) {
                cJSON_AddStringToObject(a, "policy", "aimd");
                cJSON_AddNumberToObject(a, "target_fraction", 0.1 + 0.8 * unif(&r));
            } else {
                cJSON_AddStringToObject(a, "policy", "static");
                cJSON_AddNumberToObject(a, "cap", between(&r, 1, 24));
            }
        }
        if (chance(&r, 0.5)) {
            cJSON *cl = cJSON_AddObjectToObject(c, "client");
            cJSON_AddNumberToObject(cl, "frame_wait_fraction", 0.3 + unif(&r));
        }
    } else if (family < 18) {
        /* a TTS pipeline (CosyVoice2) */
        static const char *const stages[] = {"llm", "token2wav"};
        cJSON_AddStringToObject(c, "model", "cosyvoice2");
        cJSON_AddStringToObject(c, "hardware", "h100-sxm");
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        add_pipeline_placement(&r, c, stages, 2, between(&r, 1, 2));
        add_server(&r, server, false);
        bool timed = add_source(&r, w, false, 200, 300, seed, false, false);
        add_arrivals(&r, w, timed, true);
        add_audio(&r, w, false, false);
    } else if (family < 19) {
        /* Moshi: encoder, temporal transformer with its depth stage, decoder */
        static const char *const stages[] = {"mimi_encoder", "temporal", "mimi_decoder"};
        cJSON_AddStringToObject(c, "model", "moshi");
        cJSON_AddStringToObject(c, "hardware", "h100-sxm");
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        add_pipeline_placement(&r, c, stages, 3, 1);
        add_server(&r, server, false);
        bool timed = add_source(&r, w, false, 200, 200, seed, false, false);
        add_arrivals(&r, w, timed, true);
        add_audio(&r, w, true, false);
    } else {
        /* a vision-language model on one GPU under a cross-stage scheduler */
        cJSON_AddStringToObject(c, "model", "cogagent-9b");
        cJSON_AddStringToObject(c, "hardware", "rtx-a6000");
        cJSON_AddStringToObject(c, "scheduler",
                                PICK(&r, "nova", "nova_pf_limit", "nova_chunked_prefill"));
        cJSON *s = cJSON_AddObjectToObject(w, "synthetic");
        cJSON_AddNumberToObject(s, "requests", between(&r, 1, 48));
        cJSON_AddItemToObject(s, "input_tokens", dist(&r, 1, 500));
        cJSON_AddItemToObject(s, "output_tokens", dist(&r, 1, 100));
        cJSON_AddNumberToObject(s, "image_tokens", chance(&r, 0.8) ? 6401 : 0);
        cJSON *a = cJSON_AddObjectToObject(w, "arrivals");
        cJSON_AddStringToObject(a, "process", "poisson");
        cJSON_AddNumberToObject(a, "rate_rps", log_between(&r, 0.05, 5));
        if (chance(&r, 0.5))
            cJSON_AddNumberToObject(server, "kv_blocks", between(&r, 1, 20000));
    }
    if (chance(&r, 0.06) && family < 19) {
        cJSON_DeleteItemFromObject(c, "server");
        server = cJSON_AddObjectToObject(c, "server");
        add_free_server(&r, server);
    }
    if (chance(&r, 0.2)) {
        cJSON *sim = cJSON_AddObjectToObject(c, "sim");
        cJSON_AddNumberToObject(sim, "max_time_s", log_between(&r, 0.01, 500));
    }
    if (cJSON_GetArraySize(server) == 0)
        cJSON_DeleteItemFromObject(c, "server");
    return c;
}

/* A config where the simulator's fast-forward (sim.fast_forward) does most of the steps: a
 * text model's replicas one to a GPU under FCFS (async or not), any router, any server
 * fields but a window (pools that run short, offload, prefix caching, small block sizes),
 * any source (multi-turn sessions among them), a timeline now and then and a clock that may
 * stop; now and then a few replicas sharing GPUs, where it never applies. */
static cJSON *generate_fleet(uint64_t seed)
{
    rng r = {seed * 0x2545F4914F6CDD1DULL + 1};
    cJSON *w, *server;
    cJSON *c = begin_config(&r, "fleet", seed, &w, &server);
    cJSON_AddStringToObject(c, "model", "llama-3-8b");
    cJSON_AddStringToObject(c, "hardware", PICK(&r, "h100-sxm", "a100-80gb", "h200"));
    if (chance(&r, 0.2)) {
        cJSON *s = cJSON_AddObjectToObject(c, "scheduler");
        cJSON_AddStringToObject(s, "name", "fcfs");
        cJSON_AddBoolToObject(s, "async_pipeline", chance(&r, 0.6));
        cJSON_AddNumberToObject(s, "corun_slowdown", 1.0 + unif(&r) * 3);
    }
    add_server(&r, server, false);
    if (chance(&r, 0.8)) {
        cJSON *llm = cJSON_AddObjectToObject(cJSON_AddObjectToObject(c, "pipeline"), "llm");
        cJSON_AddNumberToObject(llm, "replicas", chance(&r, 0.7) ? between(&r, 1, 8)
                                                                 : between(&r, 9, 64));
        if (chance(&r, 0.5))
            cJSON_AddNumberToObject(llm, "first_gpu", below(&r, 4));
    } else {
        add_fleet(&r, c);
    }
    add_router(&r, c);
    bool timed = add_source(&r, w, true, 4000, 800, seed, true, false);
    add_arrivals(&r, w, timed, true);
    cJSON *sim = cJSON_AddObjectToObject(c, "sim");
    if (chance(&r, 0.5))
        cJSON_AddNumberToObject(sim, "timeline_interval_s",
                                chance(&r, 0.5) ? 0 : log_between(&r, 1e-3, 5));
    if (chance(&r, 0.2))
        cJSON_AddNumberToObject(sim, "max_time_s", log_between(&r, 0.01, 500));
    if (cJSON_GetArraySize(sim) == 0)
        cJSON_DeleteItemFromObject(c, "sim");
    if (cJSON_GetArraySize(server) == 0)
        cJSON_DeleteItemFromObject(c, "server");
    return c;
}

/* A config for `cadenza replay`: a tiny model on the CPU engine, a few requests. */
static cJSON *generate_replay(uint64_t seed)
{
    rng r = {seed * 0x9E3779B97F4A7C15ULL + 7};
    cJSON *w, *server;
    cJSON *c = begin_config(&r, "replay", seed, &w, &server);
    cJSON *eng = cJSON_AddObjectToObject(c, "engine");
    cJSON_AddStringToObject(eng, "weights", "random");
    cJSON_AddStringToObject(eng, "dtype", PICK(&r, "bf16", "f32"));
    uint32_t family = below(&r, 10);
    if (family < 6) {
        cJSON_AddStringToObject(c, "model", "tiny-llama");
        cJSON_AddStringToObject(c, "hardware", "cpu-host");
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        bool pd = chance(&r, 0.25);
        add_server(&r, server, !pd);
        bool timed = add_source(&r, w, true, 300, 60, seed, false, true);
        add_arrivals(&r, w, timed, true);
        if (pd) {
            /* disaggregated on the CPU engine: the decode pool pulls KV rows and ids from
             * the prefill pool's (docs/engine.md), pools of their own block sizes */
            cJSON *pdo = cJSON_AddObjectToObject(c, "disaggregation");
            static const char *const pools[] = {"prefill", "decode"};
            for (uint32_t i = 0; i < 2; i++) {
                cJSON *o = cJSON_AddObjectToObject(pdo, pools[i]);
                cJSON_AddNumberToObject(o, "replicas", between(&r, 1, 2));
                if (chance(&r, 0.5))
                    cJSON_AddNumberToObject(o, "block_tokens", PICK_U(&r, 1, 4, 16, 32));
            }
        } else if (chance(&r, 0.3)) {
            /* the client speaks the reply as it streams (short: this runs in real time) */
            cJSON *a = cJSON_AddObjectToObject(w, "audio");
            cJSON_AddNumberToObject(a, "tokens_per_text_token", 1);
            cJSON_AddNumberToObject(a, "seconds_per_audio_token", log_between(&r, 0.001, 0.01));
            if (chance(&r, 0.5))
                cJSON_AddNumberToObject(a, "speech_s_per_input_token", log_between(&r, 1e-4, 2e-3));
            if (chance(&r, 0.6)) {
                cJSON *b = cJSON_AddObjectToObject(w, "barge_in");
                cJSON_AddNumberToObject(b, "p", chance(&r, 0.5) ? 1.0 : 0.4);
            }
        }
    } else if (family < 8) {
        /* replies are played, and questions spoken, in real time: short ones */
        cJSON_AddStringToObject(c, "model", "tiny-omni");
        cJSON_AddStringToObject(c, "hardware", "cpu-host");
        cJSON_AddItemToObject(c, "scheduler", scheduler(&r));
        add_server(&r, server, false);
        cJSON *s = cJSON_AddObjectToObject(w, "synthetic");
        cJSON_AddNumberToObject(s, "requests", between(&r, 1, 8));
        cJSON_AddItemToObject(s, "input_tokens", dist(&r, 1, 60));
        cJSON_AddItemToObject(s, "output_tokens", dist(&r, 1, 12));
        add_arrivals(&r, w, false, true);
        add_audio(&r, w, true, true);
        cJSON *a = cJSON_GetObjectItemCaseSensitive(w, "audio");
        cJSON_DeleteItemFromObject(a, "speech_s_per_input_token");
        cJSON_AddNumberToObject(a, "speech_s_per_input_token", log_between(&r, 0.0001, 0.005));
    } else {
        cJSON_AddStringToObject(c, "model", "tiny-vlm");
        cJSON_AddStringToObject(c, "hardware", "cpu-2core");
        cJSON *sc = cJSON_AddObjectToObject(c, "scheduler");
        cJSON_AddStringToObject(sc, "name",
                                PICK(&r, "nova", "nova_pf_limit", "nova_chunked_prefill"));
        /* the card's two "SMs" are the two cores (experiments/engine/nova_cpu.json) */
        cJSON_AddNumberToObject(sc, "sm_decode_vision", 1);
        cJSON_AddNumberToObject(sc, "sm_decode_prefill", 1);
        cJSON_AddNumberToObject(sc, "sm_floor", 1);
        cJSON_AddNumberToObject(sc, "sm_granularity", 1);
        cJSON *s = cJSON_AddObjectToObject(w, "synthetic");
        cJSON_AddNumberToObject(s, "requests", between(&r, 1, 12));
        cJSON_AddNumberToObject(s, "image_tokens", 64);
        cJSON_AddItemToObject(s, "input_tokens", dist(&r, 1, 48));
        cJSON_AddItemToObject(s, "output_tokens", dist(&r, 1, 24));
        cJSON *a = cJSON_AddObjectToObject(w, "arrivals");
        cJSON_AddStringToObject(a, "process", "poisson");
        cJSON_AddNumberToObject(a, "rate_rps", log_between(&r, 1, 50));
        cJSON_AddNumberToObject(server, "kv_blocks", between(&r, 8, 512));
        cJSON_AddNumberToObject(server, "block_tokens", PICK_U(&r, 1, 4, 16));
    }
    /* a few requests, replayed fast: the engine runs in wall-clock time */
    cJSON *wk = w->child;
    for (; wk; wk = wk->next) {
        if (strcmp(wk->string, "synthetic") == 0) {
            cJSON *n = cJSON_GetObjectItemCaseSensitive(wk, "requests");
            if (cJSON_IsNumber(n) && n->valuedouble > 8)
                cJSON_SetNumberValue(n, between(&r, 1, 8));
        }
    }
    cJSON *mr = cJSON_GetObjectItemCaseSensitive(w, "max_requests");
    if (cJSON_IsNumber(mr) && mr->valuedouble > 6)
        cJSON_SetNumberValue(mr, between(&r, 1, 6));
    else if (!mr && cJSON_GetObjectItemCaseSensitive(w, "trace"))
        cJSON_AddNumberToObject(w, "max_requests", between(&r, 1, 6));
    cJSON_DeleteItemFromObject(w, "time_scale");
    cJSON_AddNumberToObject(w, "time_scale", log_between(&r, 1e-6, 0.01));
    /* the engine refuses prefix caching (docs/engine.md): only simulated runs draw it */
    cJSON_DeleteItemFromObject(server, "prefix_caching");
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(w, "arrivals");
    cJSON *think = cJSON_GetObjectItemCaseSensitive(arr, "think_s");
    if (think)
        cJSON_ReplaceItemInObject(arr, "think_s", cJSON_CreateNumber(log_between(&r, 0.001, 0.2)));
    cJSON *rate = cJSON_GetObjectItemCaseSensitive(arr, "rate_rps");
    if (cJSON_IsNumber(rate) && rate->valuedouble < 5)
        cJSON_SetNumberValue(rate, log_between(&r, 5, 100));
    if (chance(&r, 0.2)) {
        cJSON *sim = cJSON_AddObjectToObject(c, "sim");
        cJSON_AddNumberToObject(sim, "max_time_s", log_between(&r, 0.05, 5));
    }
    if (cJSON_GetArraySize(server) == 0)
        cJSON_DeleteItemFromObject(c, "server");
    return c;
}

/* ---- running ---- */

typedef struct run_result {
    int status;        /* exit status, or 128 + signal */
    bool timed_out;
    char *summary;     /* the summary file's bytes (NULL when none) */
    char err[600];     /* the tail of stderr */
} run_result;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

/* RUN_SIM_SINGLE: streamed with the fast-forward off (sim.fast_forward false: every step
 * through the runtime's dispatch) */
typedef enum run_mode { RUN_SIM, RUN_SIM_WHOLE, RUN_SIM_SINGLE, RUN_REPLAY } run_mode;

static void run_once(const char *cadenza, const char *cfg, const char *dir, int idx,
                     run_mode mode, unsigned timeout_s, run_result *out)
{
    char sum[512], errf[512];
    snprintf(sum, sizeof sum, "%s/summary%d.json", dir, idx);
    snprintf(errf, sizeof errf, "%s/stderr%d.txt", dir, idx);
    unlink(sum);
    memset(out, 0, sizeof *out);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit cpu = {timeout_s, timeout_s + 1};
        setrlimit(RLIMIT_CPU, &cpu);
        alarm(2 * timeout_s); /* a wall-clock bound too: a run that sleeps or waits */
        FILE *e = freopen(errf, "w", stderr);
        FILE *o = freopen("/dev/null", "w", stdout);
        (void)e;
        (void)o;
        if (mode == RUN_REPLAY)
            execl(cadenza, cadenza, "replay", cfg, "--quiet", "--no-progress", "--threads", "1",
                  "--summary", sum, (char *)NULL);
        else if (mode == RUN_SIM_WHOLE)
            execl(cadenza, cadenza, "sim", cfg, "--quiet", "--no-progress", "--whole-workload",
                  "--summary", sum, (char *)NULL);
        else if (mode == RUN_SIM_SINGLE)
            execl(cadenza, cadenza, "sim", cfg, "--quiet", "--no-progress", "--set",
                  "sim.fast_forward=false", "--summary", sum, (char *)NULL);
        else
            execl(cadenza, cadenza, "sim", cfg, "--quiet", "--no-progress", "--summary", sum,
                  (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(ws)) {
        out->status = 128 + WTERMSIG(ws);
        out->timed_out =
            WTERMSIG(ws) == SIGXCPU || WTERMSIG(ws) == SIGKILL || WTERMSIG(ws) == SIGALRM;
    } else {
        out->status = WEXITSTATUS(ws);
    }
    out->summary = slurp(sum);
    char *e = slurp(errf);
    if (e) {
        size_t n = strlen(e);
        snprintf(out->err, sizeof out->err, "%s", n > 580 ? e + n - 580 : e);
        free(e);
    }
}

static double num(const cJSON *j, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

/* The summary's accounting: NULL when it holds, else what does not. */
static const char *check_summary(const char *text, char *why, size_t n)
{
    cJSON *j = cJSON_Parse(text);
    if (!j)
        return "the summary is not valid JSON";
    const char *bad = NULL;
    double req = num(j, "requests");
    double sum = num(j, "completed") + num(j, "aborted") + num(j, "rejected") +
                 num(j, "failed") + num(j, "unfinished");
    if (!(req == sum)) {
        snprintf(why, n, "requests %g != completed + aborted + rejected + failed + unfinished %g",
                 req, sum);
        bad = why;
    }
    if (!bad && cJSON_GetObjectItemCaseSensitive(j, "frames")) {
        double fr = num(j, "frames");
        double fs = num(j, "served_frames") + num(j, "empty_frames") + num(j, "rejected_frames") +
                    num(j, "unfinished_frames");
        double st = num(j, "streams");
        double ss = num(j, "streams_completed") + num(j, "streams_rejected") +
                    num(j, "streams_unfinished");
        if (!(fr == fs) || !(st == ss)) {
            snprintf(why, n, "frames %g vs outcomes %g; streams %g vs outcomes %g", fr, fs, st, ss);
            bad = why;
        }
    }
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(j, "config");
    const cJSON *sim = cJSON_GetObjectItemCaseSensitive(cfg, "sim");
    if (!bad && !cJSON_GetObjectItemCaseSensitive(sim, "max_time_s") &&
        (num(j, "unfinished") > 0 || num(j, "unfinished_frames") > 0)) {
        snprintf(why, n, "unfinished work in a run whose clock never stopped");
        bad = why;
    }
    cJSON_Delete(j);
    return bad;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A config file for `cadenza replay`: its name starts with "replay". */
static bool is_replay(const char *path)
{
    const char *b = strrchr(path, '/');
    return strncmp(b ? b + 1 : path, "replay", 6) == 0;
}

typedef struct totals {
    unsigned passed, failed, refused;
} totals;

/* Runs one config file and judges it: a simulation twice, streamed and whole, and with
 * `single` a third time with the fast-forward off (its summary must be byte-identical
 * too); a replay once. */
static void judge(const char *cadenza, const char *cfg_path, const char *label, const char *dir,
                  bool replay, bool single, unsigned timeout_s, bool print_cfg, totals *t)
{
    run_result a, b;
    run_once(cadenza, cfg_path, dir, 0, replay ? RUN_REPLAY : RUN_SIM, timeout_s, &a);
    char why[800] = "";
    const char *bad = NULL;
    if (a.timed_out) {
        snprintf(why, sizeof why, "no result within %u s (a hang?)", timeout_s);
        bad = why;
    } else if (a.status == 2 && a.err[0]) {
        if (verbose)
            printf("refused %s: %s", label, a.err);
        t->refused++;
        t->passed++;
        free(a.summary);
        return;
    } else if (a.status != 0) {
        snprintf(why, sizeof why, "exit status %d: %s", a.status, a.err);
        bad = why;
    } else if (!a.summary) {
        bad = "no summary written";
    } else {
        bad = check_summary(a.summary, why, sizeof why);
    }
    if (!bad && !replay) {
        run_once(cadenza, cfg_path, dir, 1, RUN_SIM_WHOLE, timeout_s, &b);
        if (b.status != 0 || !b.summary || strcmp(a.summary, b.summary) != 0) {
            snprintf(why, sizeof why,
                     "the run with --whole-workload differs from the streamed one (exit %d%s%s)",
                     b.status, b.status ? ": " : "", b.status ? b.err : "");
            bad = why;
        }
        free(b.summary);
    }
    if (!bad && !replay && single) {
        run_once(cadenza, cfg_path, dir, 2, RUN_SIM_SINGLE, timeout_s, &b);
        if (b.status != 0 || !b.summary || strcmp(a.summary, b.summary) != 0) {
            snprintf(why, sizeof why,
                     "the run with sim.fast_forward false differs from the fast-forwarded one "
                     "(exit %d%s%s)",
                     b.status, b.status ? ": " : "", b.status ? b.err : "");
            bad = why;
        }
        free(b.summary);
    }
    free(a.summary);
    if (!bad) {
        t->passed++;
        return;
    }
    t->failed++;
    printf("FAIL %s: %s\n", label, bad);
    if (print_cfg) {
        char *text = slurp(cfg_path);
        printf("  config: %s\n", text ? text : "?");
        free(text);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: stress CADENZA SOURCE_ROOT [--seed S] [--count N] "
                        "[--fleet N] [--replay N] [--timeout SEC] [--keep DIR] [--print] "
                        "[CONFIG.json...]\n");
        return 2;
    }
    /* absolute paths: the configs are written, and the runs started, in a scratch folder */
    char *cadenza = realpath(argv[1], NULL), *abs_root = realpath(argv[2], NULL);
    if (!cadenza || !abs_root) {
        fprintf(stderr, "stress: cannot find %s\n", cadenza ? argv[2] : argv[1]);
        return 2;
    }
    root = abs_root;
    uint64_t seed = 1;
    unsigned count = 200, replays = 0, fleets = 0, timeout_s = 60;
    const char *keep = NULL;
    bool print_all = false;
    const char **files = calloc((size_t)argc, sizeof *files);
    int n_files = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
            replays = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--fleet") == 0 && i + 1 < argc)
            fleets = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout_s = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
            keep = argv[++i];
        else if (strcmp(argv[i], "--print") == 0)
            print_all = true;
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = true;
        else
            files[n_files++] = argv[i];
    }
    char dir[] = "/tmp/cz-stress-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    scratch = keep ? keep : dir;
    totals t = {0, 0, 0};
    char cfg_path[600];
    if (n_files) {
        for (int i = 0; i < n_files; i++) {
            DIR *d = opendir(files[i]);
            if (!d) {
                judge(cadenza, files[i], files[i], dir, is_replay(files[i]), true, timeout_s,
                      false, &t);
                continue;
            }
            /* a folder: its .json files in name order */
            char **names = NULL;
            size_t n = 0;
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                size_t l = strlen(e->d_name);
                if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
                    names = realloc(names, (n + 1) * sizeof *names);
                    size_t pl = strlen(files[i]) + l + 2;
                    names[n] = malloc(pl);
                    snprintf(names[n++], pl, "%s/%s", files[i], e->d_name);
                }
            }
            closedir(d);
            qsort(names, n, sizeof *names, cmp_names);
            for (size_t k = 0; k < n; k++) {
                judge(cadenza, names[k], names[k], dir, is_replay(names[k]), true, timeout_s,
                      false, &t);
                free(names[k]);
            }
            free(names);
        }
    } else {
        for (unsigned k = 0; k < count + fleets + replays; k++) {
            bool fleet = k >= count && k < count + fleets, replay = k >= count + fleets;
            uint64_t s = seed * 1000003ULL + (replay  ? 500000 + k - count - fleets
                                              : fleet ? 700000 + k - count
                                                      : k);
            cJSON *c = replay ? generate_replay(s) : fleet ? generate_fleet(s) : generate(s);
            cJSON *cost_body = cJSON_DetachItemFromObject(c, COST_BODY);
            char cost_path[1200] = "";
            if (cost_body) {
                snprintf(cost_path, sizeof cost_path, "%s/%s", keep ? keep : dir,
                         cJSON_GetStringValue(cJSON_GetObjectItem(
                             cJSON_GetObjectItem(c, "cost"), "file")));
                char *body = cJSON_PrintUnformatted(cost_body);
                FILE *cf = fopen(cost_path, "w");
                if (!cf) {
                    perror(cost_path);
                    return 1;
                }
                fputs(body, cf);
                fclose(cf);
                cJSON_free(body);
                cJSON_Delete(cost_body);
            }
            char *text = cJSON_PrintUnformatted(c);
            snprintf(cfg_path, sizeof cfg_path, "%s/%s-%" PRIu64 ".json", keep ? keep : dir,
                     replay ? "replay" : fleet ? "fleet" : "stress", s);
            FILE *f = fopen(cfg_path, "w");
            if (!f) {
                perror(cfg_path);
                return 1;
            }
            fputs(text, f);
            fclose(f);
            if (print_all)
                printf("%s\n", text);
            char label[64];
            snprintf(label, sizeof label, "%s config %" PRIu64,
                     replay ? "replay" : fleet ? "fleet" : "sim", s);
            unsigned before = t.failed;
            /* every other simulation, and every fleet, also runs with the fast-forward off */
            judge(cadenza, cfg_path, label, dir, replay, fleet || k % 2 == 0, timeout_s, true,
                  &t);
            if (!keep || t.failed == before) {
                unlink(cfg_path); /* --keep DIR keeps the failing ones */
                if (cost_path[0])
                    unlink(cost_path);
                char trace[700];
                snprintf(trace, sizeof trace, "%s/trace-%" PRIu64 ".csv", scratch, s);
                unlink(trace);
            }
            cJSON_free(text);
            cJSON_Delete(c);
        }
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "stress: could not remove %s\n", dir);
    free(files);
    free(cadenza);
    free(abs_root);
    printf("stress: %u runs, %u refused by the config loader (exit 2)\n", t.passed + t.failed,
           t.refused);
    if (t.refused * 10 > t.passed + t.failed) {
        printf("FAIL: more than a tenth of the generated configs were refused\n");
        t.failed++;
    }
    printf("%u passed, %u failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
