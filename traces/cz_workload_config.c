/* cz_workload_config.c - builds a workload from an experiment config's "workload" object:
 * a trace or a synthetic length generator, an arrival process (trace, Poisson, Gamma,
 * closed loop) with think times, the transforms (time scale, window, request cap), audio
 * lengths, barge-in draws and periodic streams, in that order (docs/workload.md).
 *
 * Every draw comes from a per-entity GSL stream (cz_rng.h): CZ_RNG_LENGTHS with id =
 * request index for synthetic lengths, CZ_RNG_ARRIVALS (id 0) for inter-arrival gaps,
 * CZ_RNG_SESSION with id = session index for think times and CZ_RNG_BARGE_IN with id =
 * turn index for barge-in, so one config and seed always give the same workload. */
#include "cz_traces_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "cz_distspec.h"
#include "cz_json.h"
#include "cz_rng.h"

#define CZ_WHERE_MAX 256
#define CZ_MAX_TIME_CFG 1e12  /* bound on seconds in configs */

/* ---- length distributions ------------------------------------------------------------- */

/* A token-length distribution: a core distribution (cz_distspec.h) or a trace whose
 * turns are sampled. Draws are rounded to integers >= 1. */
typedef struct length_spec {
    bool from_trace;
    cz_distspec dist;       /* !from_trace */
    char *path;             /* from_trace: resolved path (owned) */
    cz_trace_format format; /* from_trace: its format */
    uint32_t max_tokens;    /* from_trace: lengths are clipped to this */
    cz_workload *trace;     /* from_trace: the loaded turns */
    bool owns_trace;        /* false when shared with the other length of a pair */
} length_spec;

static void length_free(length_spec *d)
{
    free(d->path);
    if (d->owns_trace && d->trace) {
        cz_workload_free(d->trace);
        free(d->trace);
    }
    memset(d, 0, sizeof *d);
}

static cz_status parse_format(const cJSON *obj, const char *where, cz_trace_format *fmt,
                              cz_err *err)
{
    const char *name = "auto";
    cz_status st = cz_json_str(obj, where, "format", false, &name, err);
    if (st == CZ_OK && (st = cz_trace_format_parse(name, fmt, err)) != CZ_OK) {
        cz_err_prefix(err, "%s: field 'format': ", where);
        cz_err_locate(err, where, "format");
    }
    return st;
}

static cz_status parse_class(const cJSON *obj, const char *where, cz_class *cls, cz_err *err)
{
    const char *name = NULL;
    cz_status st = cz_json_str(obj, where, "class", false, &name, err);
    if (st == CZ_OK && name && !cz__class_parse(name, cls))
        st = cz_err_field(err, CZ_EINVAL, where, "class", "expected \"rt\" or \"be\", got '%s'",
                          name);
    return st;
}

/* Parses the required length distribution `key` of `parent`: a core DIST, or
 * {"dist": "trace", "path", "format", "max_tokens"}. */
static cz_status parse_length(const cJSON *parent, const char *pwhere, const char *key,
                              const char *base_dir, length_spec *d, cz_err *err)
{
    static const char *const keys_trace[] = {"dist", "path", "format", "max_tokens"};
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(parent, key);
    if (!j)
        return cz_err_set(err, CZ_EINVAL, "%s: missing field '%s'", pwhere, key);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "dist");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "trace") != 0)
        return cz_distspec_parse(j, pwhere, key, &d->dist, err);
    char where[CZ_WHERE_MAX];
    snprintf(where, sizeof where, "%s.%s", pwhere, key);
    const char *path = NULL;
    uint64_t max_tokens = 4096;
    cz_status st;
    if ((st = cz_json_check_keys(j, where, keys_trace, 4, err)) != CZ_OK ||
        (st = cz_json_str(j, where, "path", true, &path, err)) != CZ_OK ||
        (st = parse_format(j, where, &d->format, err)) != CZ_OK ||
        (st = cz_json_u64(j, where, "max_tokens", false, 1, UINT32_MAX, &max_tokens, err)) !=
            CZ_OK)
        return st;
    d->from_trace = true;
    d->path = cz_path_resolve(base_dir, path);
    d->max_tokens = (uint32_t)max_tokens;
    return CZ_OK;
}

/* A token length: the value rounded to an integer, at least 1. */
static uint32_t to_tokens(double v)
{
    double t = round(v);
    if (!(t >= 1.0))
        return 1;
    return t > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* A turn of d's trace drawn uniformly, clipped to max_tokens (at least 1). */
static void trace_draw(const length_spec *d, gsl_rng *r, uint32_t *in_tokens,
                       uint32_t *out_tokens)
{
    const cz_turn *t = &d->trace->turns[gsl_rng_uniform_int(r, d->trace->n_turns)];
    uint32_t in = cz_turn_in_tokens(t), out = t->out_text_tokens;
    *in_tokens = in < 1 ? 1 : in > d->max_tokens ? d->max_tokens : in;
    *out_tokens = out < 1 ? 1 : out > d->max_tokens ? d->max_tokens : out;
}

/* Reads d's trace; `where`.`key` names the length field in messages. */
static cz_status load_trace_lengths(length_spec *d, const char *where, const char *key,
                                    cz_err *err)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.format = d->format;
    d->trace = cz_xmalloc(sizeof *d->trace);
    d->owns_trace = true;
    cz_workload_init(d->trace);
    cz_status st = cz_file_check_input(d->path, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "%s.%s.path: ", where, key);
    st = cz_trace_read(d->path, &o, d->trace, err);
    if (st == CZ_OK && d->trace->n_turns == 0)
        st = cz_err_set(err, CZ_EINVAL, "%s: trace '%s' has no requests to sample lengths from",
                        where, d->path);
    return st;
}

/* ---- sources -------------------------------------------------------------------------- */

static cz_status source_trace(const cJSON *t, const char *where, const char *base_dir,
                              cz_workload *w, cz_err *err)
{
    static const char *const keys[] = {"path",          "format",          "multi_turn", "filter",
                                       "output_tokens", "chars_per_token", "class",
                                       "new_input_only"};
    cz_trace_opts o = cz_trace_opts_default();
    const char *path = NULL;
    uint64_t out_tokens = 0;
    cz_status st;
    if ((st = cz_json_check_keys(t, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_str(t, where, "path", true, &path, err)) != CZ_OK ||
        (st = parse_format(t, where, &o.format, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "multi_turn", false, &o.sharegpt_multi_turn, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "filter", false, &o.sharegpt_filter, err)) != CZ_OK ||
        (st = cz_json_u64(t, where, "output_tokens", false, 0, UINT32_MAX, &out_tokens, err)) !=
            CZ_OK ||
        (st = cz_json_num(t, where, "chars_per_token", false, 0.01, 1e6, &o.chars_per_token,
                          err)) != CZ_OK ||
        (st = parse_class(t, where, &o.cls, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "new_input_only", false, &o.burstgpt_new_input, err)) != CZ_OK)
        return st;
    o.default_output_tokens = (uint32_t)out_tokens;
    char *full = cz_path_resolve(base_dir, path);
    if ((st = cz_file_check_input(full, err)) != CZ_OK)
        cz_err_prefix(err, "%s.path: ", where);
    else
        st = cz_trace_read(full, &o, w, err);
    free(full);
    return st;
}

static cz_status source_synthetic(const cJSON *s, const char *where, const char *base_dir,
                                  uint64_t seed, cz_workload *w, cz_err *err)
{
    static const char *const keys[] = {"requests", "input_tokens", "output_tokens", "class",
                                       "image_tokens"};
    length_spec in = {.from_trace = false}, out = {.from_trace = false};
    uint64_t requests = 0, image = 0;
    cz_class cls = CZ_CLASS_RT;
    cz_status st;
    if ((st = cz_json_check_keys(s, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_u64(s, where, "requests", true, 1, 100000000, &requests, err)) != CZ_OK ||
        (st = cz_json_u64(s, where, "image_tokens", false, 0, 1u << 24, &image, err)) != CZ_OK ||
        (st = parse_length(s, where, "input_tokens", base_dir, &in, err)) != CZ_OK ||
        (st = parse_length(s, where, "output_tokens", base_dir, &out, err)) != CZ_OK ||
        (st = parse_class(s, where, &cls, err)) != CZ_OK)
        goto done;
    /* Input and output from the same trace file are drawn as (input, output) pairs. */
    bool pairs = in.from_trace && out.from_trace && strcmp(in.path, out.path) == 0 &&
                 in.format == out.format;
    if (in.from_trace && (st = load_trace_lengths(&in, where, "input_tokens", err)) != CZ_OK)
        goto done;
    if (pairs) {
        out.trace = in.trace;
    } else if (out.from_trace && (st = load_trace_lengths(&out, where, "output_tokens", err)) != CZ_OK) {
        goto done;
    }
    snprintf(w->source, sizeof w->source, "synthetic");
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_LENGTHS, 0);
    for (uint64_t i = 0; i < requests; i++) {
        cz_rng_reseed(r, seed, CZ_RNG_LENGTHS, i);
        uint32_t in_tokens, out_tokens, unused;
        if (in.from_trace)
            trace_draw(&in, r, &in_tokens, pairs ? &out_tokens : &unused);
        else
            in_tokens = to_tokens(cz_distspec_draw(&in.dist, r));
        if (out.from_trace && !pairs)
            trace_draw(&out, r, &unused, &out_tokens);
        else if (!pairs)
            out_tokens = to_tokens(cz_distspec_draw(&out.dist, r));
        char name[32];
        snprintf(name, sizeof name, "syn-%llu", (unsigned long long)i);
        cz_workload_begin_session(w, name, cls, CZ_TIMING_OPEN);
        cz_turn *t = cz_workload_add_turn(w);
        t->in_text_tokens = in_tokens;
        t->in_image_tokens = (uint32_t)image;
        t->out_text_tokens = out_tokens;
    }
    gsl_rng_free(r);
done:
    length_free(&in);
    length_free(&out);
    return st;
}

/* ---- arrivals and think times ----------------------------------------------------------- */

/* Moves session si so that its first turn arrives at t_s; the other turns of an open
 * session keep their offsets from the first. */
static void retime_session(cz_workload *w, uint32_t si, double t_s)
{
    const cz_session *s = &w->sessions[si];
    double delta = t_s - cz__session_first_arrival(w, si);
    w->turns[s->turn_off].arrival_s = t_s;
    for (uint32_t k = 1; s->timing == CZ_TIMING_OPEN && k < s->n_turns; k++)
        w->turns[s->turn_off + k].arrival_s += delta;
}

static cz_status apply_arrivals(const cJSON *a, const char *where, uint64_t seed, cz_workload *w,
                                cz_err *err)
{
    static const char *const keys_trace[] = {"process", "think_s", "turns", "max_concurrency"};
    static const char *const keys_poisson[] = {"process", "rate_rps", "think_s", "turns",
                                               "max_concurrency"};
    static const char *const keys_gamma[] = {"process", "rate_rps", "burstiness", "think_s",
                                             "turns", "max_concurrency"};
    static const char *const keys_closed[] = {"process", "concurrency", "think_s"};
    const char *process = NULL;
    cz_status st = a ? cz_json_str(a, where, "process", false, &process, err) : CZ_OK;
    if (st != CZ_OK)
        return st;
    if (!process && !w->arrivals_given)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'process': required because the source (%s) has no "
                          "timestamps; expected poisson, gamma or closed_loop",
                          where, w->source);
    if (!process)
        process = "trace";
    /* "turns": "closed" keeps the sessions' start times and times every later turn from
     * the end of the reply before it (plus the think time) */
    const char *turns = "open";
    if (a && (st = cz_json_str(a, where, "turns", false, &turns, err)) != CZ_OK)
        return st;
    if (strcmp(turns, "open") != 0 && strcmp(turns, "closed") != 0)
        return cz_err_field(err, CZ_EINVAL, where, "turns", "expected open or closed, got '%s'",
                            turns);
    if (strcmp(turns, "closed") == 0)
        for (uint32_t i = 0; i < w->n_sessions; i++)
            w->sessions[i].timing = CZ_TIMING_CLOSED;
    double rate_rps = 0.0, burstiness = 1.0;
    uint64_t concurrency = 0;
    /* vLLM's benchmark --max-concurrency: an arriving session waits for one of this many
     * slots, and its latencies count from when it gets one */
    if (a && strcmp(process, "closed_loop") != 0) {
        if ((st = cz_json_u64(a, where, "max_concurrency", false, 1, UINT32_MAX, &concurrency,
                              err)) != CZ_OK)
            return st;
        w->concurrency = (uint32_t)concurrency;
        for (uint32_t i = 0; concurrency && i < w->n_sessions; i++)
            if (w->sessions[i].timing == CZ_TIMING_OPEN && w->sessions[i].n_turns > 1)
                return cz_err_field(err, CZ_EINVAL, where, "max_concurrency",
                                    "bounds sessions whose later turns follow their replies; "
                                    "session '%s' has %u open-timed turns (set \"turns\": "
                                    "\"closed\")",
                                    cz_workload_session_name(w, &w->sessions[i]),
                                    w->sessions[i].n_turns);
    }
    if (strcmp(process, "trace") == 0) {
        if (a && (st = cz_json_check_keys(a, where, keys_trace, 4, err)) != CZ_OK)
            return st;
        if (!w->arrivals_given)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'process': \"trace\" replays the source's "
                              "timestamps, but %s has no timestamps; use poisson, gamma or "
                              "closed_loop",
                              where, w->source);
        return CZ_OK;
    }
    if (strcmp(process, "poisson") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_poisson, 5, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "rate_rps", true, 1e-9, 1e9, &rate_rps, err)) != CZ_OK)
            return st;
    } else if (strcmp(process, "gamma") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_gamma, 6, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "rate_rps", true, 1e-9, 1e9, &rate_rps, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "burstiness", false, 1e-6, 1e6, &burstiness, err)) != CZ_OK)
            return st;
    } else if (strcmp(process, "closed_loop") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_closed, 3, err)) != CZ_OK ||
            (st = cz_json_u64(a, where, "concurrency", true, 1, UINT32_MAX, &concurrency, err)) !=
                CZ_OK)
            return st;
        for (uint32_t i = 0; i < w->n_sessions; i++) {
            w->sessions[i].timing = CZ_TIMING_CLOSED;
            w->turns[w->sessions[i].turn_off].arrival_s = 0.0;
        }
        w->concurrency = (uint32_t)concurrency;
        w->arrivals_given = true;
        return CZ_OK;
    } else {
        return cz_err_field(err, CZ_EINVAL, where, "process",
                            "expected trace, poisson, gamma or closed_loop, got '%s'", process);
    }
    /* Poisson: exponential gaps of mean 1/rate. Gamma (vLLM's burstiness): gaps of shape
     * b and scale 1/(rate b), same mean, squared CV 1/b. The first session starts at 0. */
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_ARRIVALS, 0);
    double t_s = 0.0;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        if (i > 0)
            t_s += strcmp(process, "poisson") == 0
                       ? gsl_ran_exponential(r, 1.0 / rate_rps)
                       : gsl_ran_gamma(r, burstiness, 1.0 / (rate_rps * burstiness));
        retime_session(w, i, t_s);
    }
    gsl_rng_free(r);
    w->arrivals_given = true;
    return CZ_OK;
}

/* Draws think_s for the turns of closed sessions (all but each session's last) when the
 * source gave none. */
static cz_status apply_think(const cJSON *a, const char *where, uint64_t seed, cz_workload *w,
                             cz_err *err)
{
    cz_distspec d = {.kind = CZ_DIST_FIXED, .a = 0.0};
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(a, "think_s");
    cz_status st = j ? cz_distspec_parse(j, where, "think_s", &d, err) : CZ_OK;
    if (st != CZ_OK || w->think_given)
        return st;
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_SESSION, 0);
    bool any = false;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const cz_session *s = &w->sessions[i];
        if (s->timing != CZ_TIMING_CLOSED)
            continue;
        any = true;
        cz_rng_reseed(r, seed, CZ_RNG_SESSION, i);
        for (uint32_t k = 0; k + 1 < s->n_turns; k++) {
            double v = cz_distspec_draw(&d, r);
            w->turns[s->turn_off + k].think_s = v > 0.0 ? v : 0.0;
        }
    }
    gsl_rng_free(r);
    w->think_given = any;
    return CZ_OK;
}

/* ---- transforms, audio, barge-in, streams ------------------------------------------------ */

static cz_status apply_transforms(const cJSON *cfg, const char *where, cz_workload *w,
                                  cz_err *err)
{
    static const char *const keys_window[] = {"start_s", "duration_s"};
    double scale = 1.0;
    uint64_t max_requests = 0;
    const cJSON *win;
    cz_status st;
    if ((st = cz_json_num(cfg, where, "time_scale", false, 1e-9, 1e9, &scale, err)) != CZ_OK ||
        (st = cz_json_obj(cfg, where, "window", false, &win, err)) != CZ_OK ||
        (st = cz_json_u64(cfg, where, "max_requests", false, 1, UINT64_MAX, &max_requests, err)) !=
            CZ_OK)
        return st;
    if (scale != 1.0)
        cz_workload_scale_time(w, scale);
    if (win) {
        char wwhere[CZ_WHERE_MAX];
        snprintf(wwhere, sizeof wwhere, "%s.window", where);
        double start_s = 0.0, duration_s = INFINITY;
        if ((st = cz_json_check_keys(win, wwhere, keys_window, 2, err)) != CZ_OK ||
            (st = cz_json_num(win, wwhere, "start_s", false, 0.0, CZ_MAX_TIME_CFG, &start_s,
                              err)) != CZ_OK ||
            (st = cz_json_num(win, wwhere, "duration_s", false, 0.0, CZ_MAX_TIME_CFG, &duration_s,
                              err)) != CZ_OK)
            return st;
        cz_workload_window(w, start_s, duration_s);
    }
    if (max_requests > 0)
        cz_workload_limit_requests(w, max_requests);
    return CZ_OK;
}

static cz_status apply_audio(const cJSON *au, const char *where, cz_workload *w, cz_err *err)
{
    static const char *const keys[] = {"tokens_per_text_token", "seconds_per_audio_token",
                                       "speech_s_per_input_token", "input_audio_tokens_per_s"};
    double ratio = 0.0, s_per_audio = 0.08, speech_per_in = 0.0, in_audio_rate = 0.0;
    cz_status st;
    if ((st = cz_json_check_keys(au, where, keys, 4, err)) != CZ_OK ||
        (st = cz_json_num(au, where, "input_audio_tokens_per_s", false, 0.0, 1e4, &in_audio_rate,
                          err)) != CZ_OK ||
        (st = cz_json_num(au, where, "tokens_per_text_token", false, 0.0, 1e3, &ratio, err)) !=
            CZ_OK ||
        (st = cz_json_num(au, where, "seconds_per_audio_token", false, 0.0, 1e3, &s_per_audio,
                          err)) != CZ_OK ||
        (st = cz_json_num(au, where, "speech_s_per_input_token", false, 0.0, 1e3, &speech_per_in,
                          err)) != CZ_OK)
        return st;
    for (uint32_t i = 0; i < w->n_turns; i++) {
        cz_turn *t = &w->turns[i];
        double audio = round((double)t->out_text_tokens * ratio);
        t->out_audio_tokens = audio > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)audio;
        t->out_audio_s = t->out_audio_tokens * s_per_audio;
        t->speech_s = cz_turn_in_tokens(t) * speech_per_in;
        if (in_audio_rate > 0.0) {
            /* the prompt is spoken: the model hears speech_s of audio, encoded at this rate */
            double a = round(t->speech_s * in_audio_rate);
            t->in_audio_tokens = a < 1.0 ? 1u : a > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)a;
            t->in_text_tokens = 0;
        }
    }
    return CZ_OK;
}

/* Barge-in (LiveServe §7.1, 000_*.txt): each turn independently with probability p; the
 * cut offset after the first audio is drawn from the workload's own distribution of
 * output audio durations (uniform over the turns that have audio). */
static cz_status apply_barge_in(const cJSON *bi, const char *where, uint64_t seed,
                                cz_workload *w, cz_err *err)
{
    static const char *const keys[] = {"p"};
    double p = 0.0;
    cz_status st;
    if ((st = cz_json_check_keys(bi, where, keys, 1, err)) != CZ_OK ||
        (st = cz_json_num(bi, where, "p", true, 0.0, 1.0, &p, err)) != CZ_OK)
        return st;
    double *audio_s = cz_xmalloc(((size_t)w->n_turns + 1) * sizeof *audio_s);
    size_t n_audio = 0;
    for (uint32_t i = 0; i < w->n_turns; i++)
        if (w->turns[i].out_audio_s > 0.0)
            audio_s[n_audio++] = w->turns[i].out_audio_s;
    if (p > 0.0 && n_audio == 0) {
        free(audio_s);
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'p': barge-in with p = %g needs turns with output audio to "
                          "draw cut times from, but the workload has none; set "
                          "audio.tokens_per_text_token and audio.seconds_per_audio_token above 0",
                          where, p);
    }
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_BARGE_IN, 0);
    for (uint32_t i = 0; i < w->n_turns; i++) {
        w->turns[i].barge_in_s = -1.0;
        if (p == 0.0)
            continue;
        cz_rng_reseed(r, seed, CZ_RNG_BARGE_IN, i);
        if (gsl_rng_uniform(r) < p)
            w->turns[i].barge_in_s = audio_s[gsl_rng_uniform_int(r, n_audio)];
    }
    gsl_rng_free(r);
    free(audio_s);
    return CZ_OK;
}

/* "stagger": true (even phases), false (all at 0) or "random" (phases drawn from the
 * seed, one stream each). */
static cz_status parse_stagger(const cJSON *so, const char *where, bool *stagger, bool *random,
                               cz_err *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(so, "stagger");
    if (!j)
        return CZ_OK;
    if (cJSON_IsBool(j)) {
        *stagger = cJSON_IsTrue(j);
        return CZ_OK;
    }
    if (cJSON_IsString(j) && strcmp(j->valuestring, "random") == 0) {
        *random = true;
        return CZ_OK;
    }
    return cz_err_field(err, CZ_EINVAL, where, "stagger", "expected true, false or \"random\"");
}

/* Periodic streams (Metronome §2, 002_*.txt): N sessions that each ingest and decode a
 * few tokens every frame period; staggered starts spread them over one period. */
static cz_status add_streams(const cJSON *so, const char *where, uint64_t seed, cz_workload *w,
                             cz_err *err)
{
    static const char *const keys[] = {"count",      "frame_period_s", "tokens_in_per_frame",
                                       "tokens_out_per_frame", "duration_s", "stagger",
                                       "class", "arrival_spacing_s"};
    uint64_t count = 0, in = 0, out = 0;
    double period_s = 0.0, duration_s = 0.0, spacing_s = 0.0;
    bool stagger = true, random_phase = false;
    cz_class cls = CZ_CLASS_RT;
    cz_status st;
    if ((st = cz_json_check_keys(so, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_u64(so, where, "count", true, 1, 10000000, &count, err)) != CZ_OK ||
        (st = cz_json_num(so, where, "frame_period_s", true, 1e-6, 1e6, &period_s, err)) !=
            CZ_OK ||
        (st = cz_json_u64(so, where, "tokens_in_per_frame", true, 1, UINT32_MAX, &in, err)) !=
            CZ_OK ||
        (st = cz_json_u64(so, where, "tokens_out_per_frame", true, 1, UINT32_MAX, &out, err)) !=
            CZ_OK ||
        (st = cz_json_num(so, where, "duration_s", true, 1e-6, CZ_MAX_TIME_CFG, &duration_s,
                          err)) != CZ_OK ||
        (st = parse_stagger(so, where, &stagger, &random_phase, err)) != CZ_OK ||
        (st = cz_json_num(so, where, "arrival_spacing_s", false, 0, 1e6, &spacing_s, err)) !=
            CZ_OK ||
        (st = parse_class(so, where, &cls, err)) != CZ_OK)
        return st;
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_STREAMS, 0);
    for (uint64_t i = 0; i < count; i++) {
        cz_stream *s = cz_workload_add_stream(w);
        /* sessions arriving one after another, or all within the first period */
        if (random_phase)
            cz_rng_reseed(r, seed, CZ_RNG_STREAMS, i);
        s->start_s = spacing_s > 0    ? (double)i * spacing_s
                     : random_phase ? gsl_rng_uniform(r) * period_s
                     : stagger      ? (double)i * period_s / (double)count
                                    : 0.0;
        s->frame_period_s = period_s;
        s->duration_s = duration_s;
        s->tokens_in_per_frame = (uint32_t)in;
        s->tokens_out_per_frame = (uint32_t)out;
        s->cls = cls;
    }
    gsl_rng_free(r);
    return CZ_OK;
}

/* ---- entry point ------------------------------------------------------------------------- */

/* An optional child object of the workload config and its location for messages. */
/* "best_effort_fraction": each session is best-effort with this probability (its own
 * draw), real-time otherwise: a mixed real-time / best-effort workload (BROS). */
static cz_status apply_classes(const cJSON *cfg, const char *where, uint64_t seed,
                               cz_workload *w, cz_err *err)
{
    double f = -1;
    cz_status st = cz_json_num(cfg, where, "best_effort_fraction", false, 0.0, 1.0, &f, err);
    if (st != CZ_OK || f < 0)
        return st;
    gsl_rng *r = cz_rng_new(seed, CZ_RNG_SESSION, 0);
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        cz_rng_reseed(r, seed, CZ_RNG_SESSION, (uint64_t)i * 2 + 1);
        w->sessions[i].cls = gsl_rng_uniform(r) < f ? CZ_CLASS_BE : CZ_CLASS_RT;
    }
    gsl_rng_free(r);
    return CZ_OK;
}

typedef struct cfg_child {
    const cJSON *obj; /* NULL when absent */
    char where[CZ_WHERE_MAX];
} cfg_child;

static cz_status get_child(const cJSON *cfg, const char *where, const char *key, cfg_child *c,
                           cz_err *err)
{
    snprintf(c->where, sizeof c->where, "%s.%s", where, key);
    return cz_json_obj(cfg, where, key, false, &c->obj, err);
}

static cz_status build(const cJSON *cfg, const char *where, const char *base_dir, uint64_t seed,
                       cz_workload *w, cz_err *err)
{
    static const char *const keys[] = {"trace",    "synthetic", "arrivals",   "audio",
                                       "barge_in", "streams",   "time_scale", "window",
                                       "max_requests", "best_effort_fraction"};
    cfg_child trace, synth, arr, audio, barge, streams;
    cz_status st;
    if ((st = cz_json_check_keys(cfg, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = get_child(cfg, where, "trace", &trace, err)) != CZ_OK ||
        (st = get_child(cfg, where, "synthetic", &synth, err)) != CZ_OK ||
        (st = get_child(cfg, where, "arrivals", &arr, err)) != CZ_OK ||
        (st = get_child(cfg, where, "audio", &audio, err)) != CZ_OK ||
        (st = get_child(cfg, where, "barge_in", &barge, err)) != CZ_OK ||
        (st = get_child(cfg, where, "streams", &streams, err)) != CZ_OK)
        return st;
    bool has_requests = trace.obj || synth.obj;
    if (trace.obj && synth.obj)
        return cz_err_set(err, CZ_EINVAL, "%s: give either 'trace' or 'synthetic', not both",
                          where);
    if (!has_requests && !streams.obj)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: expected a request source ('trace' or 'synthetic') or 'streams'",
                          where);
    if (!has_requests && (arr.obj || audio.obj || barge.obj ||
                          cJSON_HasObjectItem(cfg, "time_scale") ||
                          cJSON_HasObjectItem(cfg, "window") ||
                          cJSON_HasObjectItem(cfg, "max_requests")))
        return cz_err_set(err, CZ_EINVAL,
                          "%s: arrivals, audio, barge_in and the transforms need a request "
                          "source ('trace' or 'synthetic'); this workload has only streams",
                          where);
    if (trace.obj)
        st = source_trace(trace.obj, trace.where, base_dir, w, err);
    else if (synth.obj)
        st = source_synthetic(synth.obj, synth.where, base_dir, seed, w, err);
    else
        snprintf(w->source, sizeof w->source, "streams");
    if (st == CZ_OK && has_requests)
        st = apply_arrivals(arr.obj, arr.where, seed, w, err);
    if (st == CZ_OK && has_requests)
        st = apply_think(arr.obj, arr.where, seed, w, err);
    if (st == CZ_OK && has_requests)
        st = apply_transforms(cfg, where, w, err);
    if (st == CZ_OK && audio.obj)
        st = apply_audio(audio.obj, audio.where, w, err);
    if (st == CZ_OK && barge.obj)
        st = apply_barge_in(barge.obj, barge.where, seed, w, err);
    if (st == CZ_OK && streams.obj)
        st = add_streams(streams.obj, streams.where, seed, w, err);
    if (st == CZ_OK && has_requests)
        st = apply_classes(cfg, where, seed, w, err);
    return st;
}

cz_status cz_workload_from_config(const cJSON *wcfg, const char *where, const char *base_dir,
                                  uint64_t seed, cz_workload *out, cz_err *err)
{
    if (!where)
        where = "workload";
    if (!cJSON_IsObject(wcfg))
        return cz_err_set(err, CZ_EINVAL, "%s: expected an object", where);
    cz_workload w;
    cz_workload_init(&w);
    cz_status st = build(wcfg, where, base_dir, seed, &w, err);
    if (st != CZ_OK) {
        cz_workload_free(&w);
        return st;
    }
    cz_workload_free(out);
    *out = w;
    return CZ_OK;
}
