/* fuzz_util.c - scratch files, the trace reader check and the config bounds shared by the
 * libFuzzer harnesses (fuzz_util.h). A harness is a process of its own, fed one input at a
 * time by libFuzzer; the scratch paths are its only process-wide state. */
#include "fuzz_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_version.h"

_Noreturn void cz_fuzz_fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, msg);
    fflush(stderr);
    abort();
}

#define CZ_FUZZ_MAX_SCRATCH 4

/* The scratch file paths of this process. */
static struct {
    char tag[32];
    char path[4096];
} scratch[CZ_FUZZ_MAX_SCRATCH];
static int n_scratch;

static const char *scratch_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp && tmp[0])
        return tmp;
    if (access("/dev/shm", W_OK | X_OK) == 0)
        return "/dev/shm";
    return "/tmp";
}

const char *cz_fuzz_scratch(const char *tag)
{
    for (int i = 0; i < n_scratch; i++)
        if (strcmp(scratch[i].tag, tag) == 0)
            return scratch[i].path;
    if (n_scratch == CZ_FUZZ_MAX_SCRATCH)
        cz_fuzz_fail("scratch", "too many scratch files");
    int i = n_scratch++;
    snprintf(scratch[i].tag, sizeof scratch[i].tag, "%s", tag);
    int n = snprintf(scratch[i].path, sizeof scratch[i].path, "%s/cz-fuzz-%s-%ld", scratch_dir(),
                     tag, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof scratch[i].path)
        cz_fuzz_fail("scratch", "TMPDIR is too long a path");
    return scratch[i].path;
}

void cz_fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        cz_fuzz_fail(path, strerror(errno));
    bool bad = size > 0 && fwrite(data, 1, size, f) != size;
    bad |= fclose(f) != 0;
    if (bad)
        cz_fuzz_fail(path, "cannot write the input");
}

char *cz_fuzz_text(const uint8_t *data, size_t size)
{
    char *s = cz_xmalloc(size + 1);
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Options for the second read: every non-default branch of the readers' options. */
static cz_trace_opts other_opts(cz_trace_format format)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.format = format;
    o.sharegpt_multi_turn = true;
    o.sharegpt_filter = false;
    o.default_output_tokens = 16;
    o.chars_per_token = 1.5;
    o.burstgpt_new_input = true;
    o.cls = CZ_CLASS_BE;
    return o;
}

/* The checks on a workload a reader accepted. */
static void check_accepted(cz_workload *w)
{
    cz_trace_info info;
    cz_trace_info_compute(w, &info);
    cJSON *j = cz_trace_info_json(&info);
    if (!j)
        cz_fuzz_fail("cz_trace_info_json", "returned NULL");
    cJSON_Delete(j);

    /* docs/workload.md: reading a written cadenza file back gives an equal workload */
    const char *rt = cz_fuzz_scratch("roundtrip");
    cz_err err;
    cz_err_clear(&err);
    if (cz_trace_write_cadenza(w, rt, &err) != CZ_OK)
        cz_fuzz_fail("cz_trace_write_cadenza", err.msg);
    cz_workload back;
    cz_workload_init(&back);
    cz_trace_opts o = cz_trace_opts_default();
    o.format = CZ_FMT_CADENZA;
    if (cz_trace_read(rt, &o, &back, &err) != CZ_OK)
        cz_fuzz_fail("round trip: the written cadenza file does not read back", err.msg);
    char why[512] = "";
    if (!cz_workload_equal(w, &back, why, sizeof why))
        cz_fuzz_fail("round trip: the cadenza file reads back different", why);
    cz_workload_free(&back);
    remove(rt);

    /* transforms on whatever the reader produced; the request cap must hold */
    uint32_t cap = w->n_turns / 2;
    cz_workload_scale_time(w, 0.5);
    cz_workload_window(w, 0.0, INFINITY);
    cz_workload_limit_requests(w, cap);
    if (w->n_turns > cap)
        cz_fuzz_fail("cz_workload_limit_requests", "kept more turns than the cap");
}

/* A failed read appended to a non-empty workload must fail and leave it unchanged. */
static void check_rejected(const char *path, const cz_trace_opts *o)
{
    cz_workload w, ref;
    cz_workload_init(&w);
    cz_workload_init(&ref);
    for (int k = 0; k < 2; k++) {
        cz_workload *x = k ? &ref : &w;
        cz_workload_begin_session(x, "before", CZ_CLASS_RT, CZ_TIMING_OPEN);
        cz_turn *t = cz_workload_add_turn(x);
        t->in_text_tokens = 7;
        t->out_text_tokens = 3;
        snprintf(x->source, sizeof x->source, "%s", "cadenza");
    }
    cz_err err;
    cz_err_clear(&err);
    char why[512] = "";
    cz_status st = cz_trace_read(path, o, &w, &err);
    if (st == CZ_OK)
        cz_fuzz_fail("cz_trace_read", "a trace that failed to read succeeds when appended");
    cz_fuzz_check_err("cz_trace_read", st, &err);
    if (!cz_workload_equal(&w, &ref, why, sizeof why))
        cz_fuzz_fail("cz_trace_read: a failed read changed the workload", why);
    cz_workload_free(&w);
    cz_workload_free(&ref);
}

static void read_one(const char *path, const cz_trace_opts *o)
{
    cz_workload w;
    cz_workload_init(&w);
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_trace_read(path, o, &w, &err);
    if (st == CZ_OK)
        check_accepted(&w);
    cz_workload_free(&w);
    if (st != CZ_OK)
        check_rejected(path, o);
}

int cz_fuzz_trace(const uint8_t *data, size_t size, cz_trace_format format)
{
    const char *path = cz_fuzz_scratch("trace");
    cz_fuzz_write_file(path, data, size);
    cz_trace_opts o = cz_trace_opts_default();
    o.format = format;
    read_one(path, &o);
    if (format == CZ_FMT_SHAREGPT || format == CZ_FMT_BURSTGPT || format == CZ_FMT_AUTO) {
        o = other_opts(format);
        read_one(path, &o);
    }
    remove(path);
    return 0;
}

static bool within(const cJSON *obj, const char *key, double max)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return !cJSON_IsNumber(it) || it->valuedouble <= max;
}

bool cz_fuzz_config_bounded(const cJSON *cfg, double max_generated)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cfg, "workload");
    return within(cJSON_GetObjectItemCaseSensitive(w, "synthetic"), "requests", max_generated) &&
           within(cJSON_GetObjectItemCaseSensitive(w, "streams"), "count", max_generated);
}

void cz_fuzz_check_err(const char *what, cz_status st, const cz_err *err)
{
    if (st == CZ_OK)
        return;
    if (st > CZ_EINTERNAL)
        cz_fuzz_fail(what, "returned a status outside cz_status");
    if (err->status != st)
        cz_fuzz_fail(what, "the error records another status than the one returned");
    if (err->msg[0] == '\0')
        cz_fuzz_fail(what, "failed without a message");
}

cz_status cz_fuzz_config_parse(const cJSON *cfg, cz_config *c, cz_workload *wl)
{
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_config_parse(cfg, "fuzz.json", cz_fuzz_base_dir(), c, wl, &err);
    cz_fuzz_check_err("cz_config_parse", st, &err);
    return st;
}

const char *cz_fuzz_base_dir(void)
{
    return CZ_SOURCE_ROOT "/experiments";
}

/* ---- structure-aware JSON mutation ------------------------------------------------------ */

/* Words of the config's vocabulary (docs/config.md, docs/workload.md): keys and values. */
static const char *const vocab[] = {
    "workload", "trace", "synthetic", "arrivals", "audio", "barge_in", "streams", "time_scale",
    "window", "max_requests", "best_effort_fraction", "path", "format", "multi_turn", "filter",
    "output_tokens", "input_tokens", "image_tokens", "max_total_tokens", "chars_per_token",
    "class", "requests", "new_input_only", "process", "rate_rps", "burstiness", "concurrency",
    "think_s", "turns",
    "p", "count", "frame_period_s", "tokens_in_per_frame", "tokens_out_per_frame",
    "duration_s", "stagger", "arrival_spacing_s", "start_s", "tokens_per_text_token",
    "seconds_per_audio_token", "speech_s_per_input_token", "input_audio_tokens_per_s",
    "model", "stage", "hardware", "weight_bytes", "scheduler", "cost", "server", "pipeline",
    "router", "admission", "client", "slo", "sim", "seed", "name", "stages", "max_num_seqs",
    "max_num_batched_tokens", "chunked_prefill", "block_tokens", "kv_blocks",
    "gpu_memory_utilization", "max_model_len", "kv_idle", "kv_evict", "kv_preload",
    "kv_bidirectional", "kv_sink_tokens", "kv_window_tokens", "reply_prior_s",
    "preload_protect_fraction", "prefix_caching", "replicas", "gpus", "max_batch", "max_tokens",
    "max_time_s",
    "timeline_interval_s", "continuity_threshold_s", "frame_wait_fraction", "ttft_ms",
    "tpot_ms", "e2el_ms", "audio_ttfp_ms", "policy", "cap", "target_fraction", "decrease",
    "margin", "kind", "tp", "service_s", "dist", "value", "min", "max", "mean", "cv",
    "fixed", "uniform", "exponential", "lognormal", "gamma", "poisson", "closed_loop",
    "closed", "open", "auto", "sharegpt", "burstgpt", "mooncake", "azure", "cadenza", "rt",
    "be", "random", "drop", "offload", "lru", "next_use", "next_use_scan", "session",
    "least_loaded", "aimd", "static", "none", "roofline", "service", "fcfs", "fcfs_scan",
    "liveserve", "voxserve", "bros", "nova", "pf_limit", "throughput_mode", "max_new_prefills",
    "urgent_window_s", "rt_ttft_ms", "rt_tpot_ms", "base_batch", "alpha", "beta",
    "p_safe_s", "prefill_step_cap", "sm_decode_vision", "sm_decode_prefill", "sm_floor",
    "pending_vision", "pending_prefill", "adaptive", "enumerate", "sm_granularity",
    "corun_slowdown", "multi_stream", "ms_excl_speed", "ms_decode_speed",
    "vision_resident_layers", "decode_threshold", "token_budget", "llama-3-8b",
    "llama-2-70b", "qwen3-omni", "cosyvoice2", "cogagent-9b", "cogagent", "moshi",
    "h100-sxm", "h200", "a100-80gb", "rtx-a6000", "rtx-pro-6000-blackwell", "thinker",
    "talker", "audio_encoder", "code2wav", "code_predictor", "llm", "token2wav", "vision",
    "vision_lowres", "vision_highres", "temporal", "depth", "mimi_encoder", "mimi_decoder",
};

static const double boundary[] = {0,    1,     -1,   2,      0.5,   1e-9,  1e-6, 3,    8,
                                  16,   64,    512,  4096,   8192,  65536, 1e6,  1e9,  1e12,
                                  1e15, 1e300, -1e9, 4294967295.0, 4294967296.0, 0.999999};

typedef struct mut_rng {
    uint64_t s;
} mut_rng;

static uint32_t mut_next(mut_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)(r->s >> 16);
}

static uint32_t mut_below(mut_rng *r, uint32_t n)
{
    return n ? mut_next(r) % n : 0;
}

/* A node of the tree and the array or object holding it (NULL for the root). */
typedef struct mut_node {
    cJSON *node, *parent;
} mut_node;

static void collect(cJSON *node, cJSON *parent, mut_node **out, size_t *n, size_t *cap)
{
    cz_grow((void **)out, cap, *n + 1, sizeof **out);
    (*out)[(*n)++] = (mut_node){node, parent};
    for (cJSON *c = node->child; c; c = c->next)
        collect(c, node, out, n, cap);
}

static double mutate_number(mut_rng *r, double v)
{
    switch (mut_below(r, 8)) {
    case 0: return v + 1;
    case 1: return v - 1;
    case 2: return v * 2;
    case 3: return v / 2;
    case 4: return v * 10;
    case 5: return floor(v / 10);
    case 6: return v * (double)mut_below(r, 1000) / 500.0;
    default: return boundary[mut_below(r, (uint32_t)CZ_ARRAY_LEN(boundary))];
    }
}

static cJSON *random_value(mut_rng *r)
{
    switch (mut_below(r, 5)) {
    case 0: return cJSON_CreateNumber(boundary[mut_below(r, (uint32_t)CZ_ARRAY_LEN(boundary))]);
    case 1: return cJSON_CreateBool(mut_below(r, 2));
    case 2: return cJSON_CreateString(vocab[mut_below(r, (uint32_t)CZ_ARRAY_LEN(vocab))]);
    case 3: return cJSON_CreateObject();
    default: return cJSON_CreateNull();
    }
}

/* A string byte-mutated by libFuzzer (a NUL it inserts ends it); "x" for an empty one. */
static cJSON *mutate_string(const char *s)
{
    size_t n = strlen(s), max = n + 16;
    if (n == 0)
        return cJSON_CreateString("x");
    uint8_t *buf = cz_xmalloc(max + 1);
    memcpy(buf, s, n);
    n = LLVMFuzzerMutate(buf, n, max);
    buf[n] = '\0';
    cJSON *v = cJSON_CreateString((const char *)buf);
    free(buf);
    return v;
}

/* One change to the tree; false when it made none. */
static bool mutate_tree(cJSON *root, mut_rng *r)
{
    mut_node *nodes = NULL;
    size_t n = 0, cap = 0;
    collect(root, NULL, &nodes, &n, &cap);
    mut_node pick = nodes[mut_below(r, (uint32_t)n)];
    free(nodes);
    cJSON *node = pick.node, *repl = NULL;
    uint32_t what = mut_below(r, 10);
    if (what == 0 && pick.parent) {
        repl = random_value(r); /* another type */
    } else if (what == 1 && pick.parent) {
        cJSON_DetachItemViaPointer(pick.parent, node); /* removed */
        cJSON_Delete(node);
        return true;
    } else if (what == 2 && pick.parent && cJSON_IsArray(pick.parent)) {
        cJSON *dup = cJSON_Duplicate(node, 1); /* an element twice */
        if (!dup)
            return false;
        cJSON_AddItemToArray(pick.parent, dup);
        return true;
    } else if (cJSON_IsNumber(node)) {
        repl = cJSON_CreateNumber(mutate_number(r, node->valuedouble));
    } else if (cJSON_IsBool(node)) {
        repl = cJSON_CreateBool(!cJSON_IsTrue(node));
    } else if (cJSON_IsString(node)) {
        repl = mut_below(r, 2)
                   ? cJSON_CreateString(vocab[mut_below(r, (uint32_t)CZ_ARRAY_LEN(vocab))])
                   : mutate_string(node->valuestring);
    } else if (cJSON_IsObject(node)) {
        const char *key = vocab[mut_below(r, (uint32_t)CZ_ARRAY_LEN(vocab))];
        cJSON *v = random_value(r);
        if (!v)
            return false;
        cJSON_DeleteItemFromObjectCaseSensitive(node, key);
        cJSON_AddItemToObject(node, key, v);
        return true;
    } else if (cJSON_IsArray(node)) {
        cJSON *v = random_value(r);
        if (!v)
            return false;
        cJSON_AddItemToArray(node, v);
        return true;
    }
    if (!repl)
        return false;
    if (!pick.parent) {
        cJSON_Delete(repl);
        return false;
    }
    return cJSON_ReplaceItemViaPointer(pick.parent, node, repl) != 0;
}

size_t cz_fuzz_mutate_json(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    mut_rng r = {((uint64_t)seed << 1) | 1};
    if (mut_below(&r, 2) == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    char *text = cz_fuzz_text(data, size);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        return LLVMFuzzerMutate(data, size, max_size);
    size_t out = 0;
    bool changed = false;
    for (uint32_t i = 0, n = 1 + mut_below(&r, 3); i < n; i++)
        changed |= mutate_tree(root, &r);
    char *printed = changed ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (printed && strlen(printed) <= max_size) {
        out = strlen(printed);
        memcpy(data, printed, out);
    }
    cJSON_free(printed);
    return out ? out : LLVMFuzzerMutate(data, size, max_size);
}
