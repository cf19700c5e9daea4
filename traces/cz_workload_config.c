/* cz_workload_config.c - builds a workload from an experiment config's "workload" object:
 * a trace or a synthetic length generator, an arrival process (trace, Poisson, Gamma,
 * closed loop) with think times, the transforms (time scale, window, request cap), audio
 * lengths, barge-in draws and periodic streams, in that order (docs/workload.md).
 *
 * Every draw comes from a per-entity GSL stream (cz_rng.h): CZ_RNG_LENGTHS with id =
 * request index for synthetic lengths, CZ_RNG_ARRIVALS (id 0) for inter-arrival gaps,
 * CZ_RNG_SESSION with id = session index for think times and CZ_RNG_BARGE_IN with id =
 * turn index for barge-in, so one config and seed always give the same workload.
 *
 * Arrival, think time, transforms, audio and class are steps applied session by session
 * in workload order. A synthetic source makes its sessions one at a time in order of
 * arrival with every step applied (synth_gen): drained into a whole workload, or, when the
 * caller asks for a streamed one and no step needs the whole workload (barge-in draws from
 * every turn's audio), left to produce them as the run consumes them. */
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
    uint32_t *lens;         /* from_trace: each turn's (input, output) tokens, 2 per turn
                               (8 bytes a turn: draws stay in cache) */
    uint32_t n_lens;
    bool owns_trace;        /* false when shared with the other length of a pair */
} length_spec;

static void length_free(length_spec *d)
{
    free(d->path);
    if (d->owns_trace)
        free(d->lens);
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
    const uint32_t *t = &d->lens[2 * (size_t)gsl_rng_uniform_int(r, d->n_lens)];
    uint32_t in = t[0], out = t[1];
    *in_tokens = in < 1 ? 1 : in > d->max_tokens ? d->max_tokens : in;
    *out_tokens = out < 1 ? 1 : out > d->max_tokens ? d->max_tokens : out;
}

/* Vidur's total-length cap (trace_request_length_generator.py, TraceRequestLengthGenerator.
 * __init__): a request whose input + output tokens exceed `cap` loses the excess from both,
 * in proportion to each one's share of the total, each share rounded up, then each length is
 * raised back to at least 1. The arithmetic is Vidur's, in doubles as pandas does it, so the
 * same pair gives the same lengths. With cap >= 2 the result fits the cap. */
static void cap_total(uint32_t cap, uint32_t *in_tokens, uint32_t *out_tokens)
{
    uint64_t in = *in_tokens, out = *out_tokens, total = in + out;
    if (total <= cap)
        return;
    double diff = (double)(total - cap);
    double in_cut = ceil(diff * ((double)in / (double)total));
    double out_cut = ceil(diff * ((double)out / (double)total));
    /* each cut is at most its length: diff < total, so diff * share < the length */
    uint64_t in_left = in - (uint64_t)in_cut, out_left = out - (uint64_t)out_cut;
    *in_tokens = in_left < 1 ? 1 : (uint32_t)in_left;
    *out_tokens = out_left < 1 ? 1 : (uint32_t)out_left;
    CZ_ASSERT((uint64_t)*in_tokens + *out_tokens <= cap);
}

/* Appends the (input, output) lengths of every turn of `w` to d->lens. */
static void add_lengths(length_spec *d, const cz_workload *w, size_t *cap)
{
    cz_grow((void **)&d->lens, cap, 2 * ((size_t)d->n_lens + w->n_turns), sizeof *d->lens);
    for (uint32_t i = 0; i < w->n_turns; i++, d->n_lens++) {
        d->lens[2 * (size_t)d->n_lens] = cz_turn_in_tokens(&w->turns[i]);
        d->lens[2 * (size_t)d->n_lens + 1] = w->turns[i].out_text_tokens;
    }
}

/* Reads d's trace into its lengths, in the order of the workload the trace reads into
 * (a record at a time where that is the file's order); `where`.`key` names the length
 * field in messages. */
static cz_status load_trace_lengths(length_spec *d, const char *where, const char *key,
                                    cz_err *err)
{
    cz_trace_opts o = cz_trace_opts_default();
    o.format = d->format;
    cz_workload trace;
    cz_workload_init(&trace);
    size_t cap = 0;
    d->owns_trace = true;
    cz_status st = cz_file_check_input(d->path, err);
    if (st != CZ_OK)
        return cz_err_prefix(err, "%s.%s.path: ", where, key);
    if (o.format == CZ_FMT_AUTO)
        st = cz_trace_detect(d->path, &o.format, err);
    if (st == CZ_OK && o.format != CZ_FMT_BURSTGPT && o.format != CZ_FMT_SHAREGPT) {
        /* a record reader's file order is the whole read's order here (BurstGPT's whole
         * reader sorts its rows by time, so it is read whole: the same lengths drawn) */
        cz__rd r;
        bool whole_only, more = true;
        st = cz__rd_open(&r, d->path, &o, &trace, &whole_only, err);
        CZ_ASSERT(st != CZ_OK || !whole_only);
        while (st == CZ_OK && more) {
            cz__workload_clear_sessions(&trace);
            if ((st = cz__rd_next(&r, &trace, &more, err)) == CZ_OK)
                add_lengths(d, &trace, &cap);
        }
        cz__rd_close(&r);
    } else if (st == CZ_OK && (st = cz_trace_read(d->path, &o, &trace, err)) == CZ_OK) {
        add_lengths(d, &trace, &cap);
    }
    if (st == CZ_OK && d->n_lens == 0)
        st = cz_err_set(err, CZ_EINVAL, "%s: trace '%s' has no requests to sample lengths from",
                        where, d->path);
    cz_workload_free(&trace);
    return st;
}

/* ---- sources -------------------------------------------------------------------------- */

/* The trace source's reader options and its resolved path (*path, owned by the caller). */
static cz_status trace_parse(const cJSON *t, const char *where, const char *base_dir,
                             cz_trace_opts *o, char **path_out, cz_err *err)
{
    static const char *const keys[] = {"path",          "format",          "multi_turn", "filter",
                                       "output_tokens", "chars_per_token", "class",
                                       "new_input_only"};
    *o = cz_trace_opts_default();
    *path_out = NULL;
    const char *path = NULL;
    uint64_t out_tokens = 0;
    cz_status st;
    if ((st = cz_json_check_keys(t, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_str(t, where, "path", true, &path, err)) != CZ_OK ||
        (st = parse_format(t, where, &o->format, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "multi_turn", false, &o->sharegpt_multi_turn, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "filter", false, &o->sharegpt_filter, err)) != CZ_OK ||
        (st = cz_json_u64(t, where, "output_tokens", false, 0, UINT32_MAX, &out_tokens, err)) !=
            CZ_OK ||
        (st = cz_json_num(t, where, "chars_per_token", false, 0.01, 1e6, &o->chars_per_token,
                          err)) != CZ_OK ||
        (st = parse_class(t, where, &o->cls, err)) != CZ_OK ||
        (st = cz_json_bool(t, where, "new_input_only", false, &o->burstgpt_new_input, err)) != CZ_OK)
        return st;
    o->default_output_tokens = (uint32_t)out_tokens;
    char *full = cz_path_resolve(base_dir, path);
    if ((st = cz_file_check_input(full, err)) != CZ_OK) {
        cz_err_prefix(err, "%s.path: ", where);
        free(full);
        return st;
    }
    *path_out = full;
    return CZ_OK;
}

/* ---- arrivals and think times ----------------------------------------------------------- */

typedef enum arr_kind { ARR_TRACE, ARR_POISSON, ARR_GAMMA, ARR_CLOSED } arr_kind;

/* The arrival process of the "arrivals" object, and its running state: sessions are timed
 * one at a time in workload order (arr_session), so a whole workload and one produced
 * session by session get the same times. */
typedef struct arr_spec {
    arr_kind kind;
    bool turns_closed;    /* "turns": "closed" */
    double rate_rps, burstiness;
    uint32_t concurrency; /* max_concurrency, or the closed loop's concurrency; 0 none */
    bool conc_set;        /* the arrivals object sets the workload's concurrency */
    uint64_t seed;
    gsl_rng *r;           /* CZ_RNG_ARRIVALS, id 0: the gaps, in session order */
    double t_s;
    uint64_t n;           /* sessions timed */
} arr_spec;

static cz_status arr_parse(const cJSON *a, const char *where, const cz_workload *src,
                           uint64_t seed, arr_spec *o, cz_err *err)
{
    static const char *const keys_trace[] = {"process", "think_s", "turns", "max_concurrency"};
    static const char *const keys_poisson[] = {"process", "rate_rps", "think_s", "turns",
                                               "max_concurrency"};
    static const char *const keys_gamma[] = {"process", "rate_rps", "burstiness", "think_s",
                                             "turns", "max_concurrency"};
    static const char *const keys_closed[] = {"process", "concurrency", "think_s"};
    memset(o, 0, sizeof *o);
    o->burstiness = 1.0;
    o->seed = seed;
    const char *process = NULL;
    cz_status st = a ? cz_json_str(a, where, "process", false, &process, err) : CZ_OK;
    if (st != CZ_OK)
        return st;
    if (!process && !src->arrivals_given)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'process': required because the source (%s) has no "
                          "timestamps; expected poisson, gamma or closed_loop",
                          where, src->source);
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
    o->turns_closed = strcmp(turns, "closed") == 0;
    uint64_t concurrency = 0;
    /* vLLM's benchmark --max-concurrency: an arriving session waits for one of this many
     * slots, and its latencies count from when it gets one */
    if (a && strcmp(process, "closed_loop") != 0) {
        if ((st = cz_json_u64(a, where, "max_concurrency", false, 1, UINT32_MAX, &concurrency,
                              err)) != CZ_OK)
            return st;
        o->concurrency = (uint32_t)concurrency;
        o->conc_set = true;
    }
    if (strcmp(process, "trace") == 0) {
        if (a && (st = cz_json_check_keys(a, where, keys_trace, 4, err)) != CZ_OK)
            return st;
        if (!src->arrivals_given)
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'process': \"trace\" replays the source's "
                              "timestamps, but %s has no timestamps; use poisson, gamma or "
                              "closed_loop",
                              where, src->source);
        o->kind = ARR_TRACE;
    } else if (strcmp(process, "poisson") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_poisson, 5, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "rate_rps", true, 1e-9, 1e9, &o->rate_rps, err)) != CZ_OK)
            return st;
        o->kind = ARR_POISSON;
    } else if (strcmp(process, "gamma") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_gamma, 6, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "rate_rps", true, 1e-9, 1e9, &o->rate_rps, err)) != CZ_OK ||
            (st = cz_json_num(a, where, "burstiness", false, 1e-6, 1e6, &o->burstiness, err)) !=
                CZ_OK)
            return st;
        o->kind = ARR_GAMMA;
    } else if (strcmp(process, "closed_loop") == 0) {
        if ((st = cz_json_check_keys(a, where, keys_closed, 3, err)) != CZ_OK ||
            (st = cz_json_u64(a, where, "concurrency", true, 1, UINT32_MAX, &concurrency, err)) !=
                CZ_OK)
            return st;
        o->concurrency = (uint32_t)concurrency;
        o->conc_set = true;
        o->kind = ARR_CLOSED;
    } else {
        return cz_err_field(err, CZ_EINVAL, where, "process",
                            "expected trace, poisson, gamma or closed_loop, got '%s'", process);
    }
    if (o->kind == ARR_POISSON || o->kind == ARR_GAMMA)
        o->r = cz_rng_new(seed, CZ_RNG_ARRIVALS, 0);
    return CZ_OK;
}

/* A concurrency bound holds sessions whose later turns follow their replies: an open
 * session of several turns under max_concurrency is an error. */
static cz_status arr_check_session(const arr_spec *a, const char *where, const cz_workload *w,
                                   uint32_t si, cz_err *err)
{
    const cz_session *s = &w->sessions[si];
    if (a->kind == ARR_CLOSED || !a->concurrency || a->turns_closed ||
        s->timing != CZ_TIMING_OPEN || s->n_turns < 2)
        return CZ_OK;
    return cz_err_field(err, CZ_EINVAL, where, "max_concurrency",
                        "bounds sessions whose later turns follow their replies; session '%s' "
                        "has %u open-timed turns (set \"turns\": \"closed\")",
                        cz_workload_session_name(w, s), s->n_turns);
}

static void arr_rewind(arr_spec *a)
{
    a->t_s = 0.0;
    a->n = 0;
    if (a->r)
        cz_rng_reseed(a->r, a->seed, CZ_RNG_ARRIVALS, 0);
}

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

/* Times the next session of the workload, si of `w`. Poisson: exponential gaps of mean
 * 1/rate. Gamma (vLLM's burstiness): gaps of shape b and scale 1/(rate b), same mean,
 * squared CV 1/b. The first session starts at 0. A closed loop starts every session at
 * 0 and times its turns from the replies. */
static void arr_session(arr_spec *a, cz_workload *w, uint32_t si)
{
    cz_session *s = &w->sessions[si];
    if (a->turns_closed || a->kind == ARR_CLOSED)
        s->timing = CZ_TIMING_CLOSED;
    if (a->kind == ARR_CLOSED) {
        w->turns[s->turn_off].arrival_s = 0.0;
    } else if (a->kind != ARR_TRACE) {
        if (a->n++ > 0)
            a->t_s += a->kind == ARR_POISSON
                          ? gsl_ran_exponential(a->r, 1.0 / a->rate_rps)
                          : gsl_ran_gamma(a->r, a->burstiness,
                                          1.0 / (a->rate_rps * a->burstiness));
        retime_session(w, si, a->t_s);
    }
}

static void arr_header(const arr_spec *a, cz_workload *w)
{
    if (a->conc_set)
        w->concurrency = a->concurrency;
    if (a->kind != ARR_TRACE)
        w->arrivals_given = true;
}

/* Think times drawn for the turns of closed sessions (all but each session's last) when
 * the source gave none: CZ_RNG_SESSION with id = the session's index before transforms. */
typedef struct think_spec {
    bool on;
    cz_distspec d;
    uint64_t seed;
    gsl_rng *r;
    bool any; /* a closed session was drawn for */
} think_spec;

static cz_status think_parse(const cJSON *a, const char *where, const cz_workload *src,
                             uint64_t seed, think_spec *o, cz_err *err)
{
    memset(o, 0, sizeof *o);
    o->d = (cz_distspec){.kind = CZ_DIST_FIXED, .a = 0.0};
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(a, "think_s");
    cz_status st = j ? cz_distspec_parse(j, where, "think_s", &o->d, err) : CZ_OK;
    if (st != CZ_OK || src->think_given)
        return st;
    o->on = true;
    o->seed = seed;
    o->r = cz_rng_new(seed, CZ_RNG_SESSION, 0);
    return CZ_OK;
}

static void think_session(think_spec *t, cz_workload *w, uint32_t si, uint64_t index)
{
    const cz_session *s = &w->sessions[si];
    if (!t->on || s->timing != CZ_TIMING_CLOSED)
        return;
    t->any = true;
    cz_rng_reseed(t->r, t->seed, CZ_RNG_SESSION, index);
    for (uint32_t k = 0; k + 1 < s->n_turns; k++) {
        double v = cz_distspec_draw(&t->d, t->r);
        w->turns[s->turn_off + k].think_s = v > 0.0 ? v : 0.0;
    }
}

/* ---- transforms, audio, classes ---------------------------------------------------------- */

typedef struct xform_spec {
    double scale;
    bool window;
    double start_s, duration_s;
    uint64_t max_requests; /* 0: no cap */
} xform_spec;

static cz_status xform_parse(const cJSON *cfg, const char *where, xform_spec *o, cz_err *err)
{
    static const char *const keys_window[] = {"start_s", "duration_s"};
    memset(o, 0, sizeof *o);
    o->scale = 1.0;
    o->duration_s = INFINITY;
    const cJSON *win;
    cz_status st;
    if ((st = cz_json_num(cfg, where, "time_scale", false, 1e-9, 1e9, &o->scale, err)) != CZ_OK ||
        (st = cz_json_obj(cfg, where, "window", false, &win, err)) != CZ_OK ||
        (st = cz_json_u64(cfg, where, "max_requests", false, 1, UINT64_MAX, &o->max_requests,
                          err)) != CZ_OK)
        return st;
    if (win) {
        char wwhere[CZ_WHERE_MAX];
        snprintf(wwhere, sizeof wwhere, "%s.window", where);
        if ((st = cz_json_check_keys(win, wwhere, keys_window, 2, err)) != CZ_OK ||
            (st = cz_json_num(win, wwhere, "start_s", false, 0.0, CZ_MAX_TIME_CFG, &o->start_s,
                              err)) != CZ_OK ||
            (st = cz_json_num(win, wwhere, "duration_s", false, 0.0, CZ_MAX_TIME_CFG,
                              &o->duration_s, err)) != CZ_OK)
            return st;
        o->window = true;
    }
    return CZ_OK;
}

/* The transforms on a whole workload: time scale, window, request cap. */
static void xform_apply(const xform_spec *x, cz_workload *w)
{
    if (x->scale != 1.0)
        cz_workload_scale_time(w, x->scale);
    if (x->window)
        cz_workload_window(w, x->start_s, x->duration_s);
    if (x->max_requests > 0)
        cz_workload_limit_requests(w, x->max_requests);
}

typedef struct audio_spec {
    double ratio, s_per_audio, speech_per_in, in_audio_rate;
} audio_spec;

static cz_status audio_parse(const cJSON *au, const char *where, audio_spec *o, cz_err *err)
{
    static const char *const keys[] = {"tokens_per_text_token", "seconds_per_audio_token",
                                       "speech_s_per_input_token", "input_audio_tokens_per_s"};
    *o = (audio_spec){.s_per_audio = 0.08};
    cz_status st;
    if ((st = cz_json_check_keys(au, where, keys, 4, err)) != CZ_OK ||
        (st = cz_json_num(au, where, "input_audio_tokens_per_s", false, 0.0, 1e4,
                          &o->in_audio_rate, err)) != CZ_OK ||
        (st = cz_json_num(au, where, "tokens_per_text_token", false, 0.0, 1e3, &o->ratio, err)) !=
            CZ_OK ||
        (st = cz_json_num(au, where, "seconds_per_audio_token", false, 0.0, 1e3, &o->s_per_audio,
                          err)) != CZ_OK ||
        (st = cz_json_num(au, where, "speech_s_per_input_token", false, 0.0, 1e3,
                          &o->speech_per_in, err)) != CZ_OK)
        return st;
    return CZ_OK;
}

static void audio_turn(const audio_spec *o, cz_turn *t)
{
    double audio = round((double)t->out_text_tokens * o->ratio);
    t->out_audio_tokens = audio > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)audio;
    t->out_audio_s = t->out_audio_tokens * o->s_per_audio;
    t->speech_s = cz_turn_in_tokens(t) * o->speech_per_in;
    if (o->in_audio_rate > 0.0) {
        /* the prompt is spoken: the model hears speech_s of audio, encoded at this rate */
        double a = round(t->speech_s * o->in_audio_rate);
        t->in_audio_tokens = a < 1.0 ? 1u : a > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)a;
        t->in_text_tokens = 0;
    }
}

/* "best_effort_fraction": each session is best-effort with this probability (its own
 * draw, CZ_RNG_SESSION with id 2 i + 1 for the session's index i after transforms),
 * real-time otherwise: a mixed real-time / best-effort workload (BROS). */
typedef struct class_spec {
    double f; /* < 0: classes as the source gave them */
    uint64_t seed;
    gsl_rng *r;
} class_spec;

static cz_status class_parse(const cJSON *cfg, const char *where, uint64_t seed, class_spec *o,
                             cz_err *err)
{
    *o = (class_spec){.f = -1, .seed = seed};
    cz_status st = cz_json_num(cfg, where, "best_effort_fraction", false, 0.0, 1.0, &o->f, err);
    if (st == CZ_OK && o->f >= 0)
        o->r = cz_rng_new(seed, CZ_RNG_SESSION, 0);
    return st;
}

static void class_session(class_spec *c, cz_workload *w, uint32_t si, uint64_t index)
{
    if (c->f < 0)
        return;
    cz_rng_reseed(c->r, c->seed, CZ_RNG_SESSION, index * 2 + 1);
    w->sessions[si].cls = gsl_rng_uniform(c->r) < c->f ? CZ_CLASS_BE : CZ_CLASS_RT;
}

/* The per-session steps a config asks for, parsed before any session is made, and the
 * running state of one walk over the source's sessions (steps_rewind starts a walk). */
typedef struct steps {
    arr_spec arr;
    think_spec think;
    xform_spec xf;
    bool audio_on;
    audio_spec audio;
    class_spec classes;
    /* running state */
    uint64_t seen;       /* sessions of the source stepped */
    uint64_t kept, kept_turns;
    uint64_t dropped;    /* turns dropped by the window or the request cap */
    bool capped;         /* the request cap was reached */
    double last_s;       /* first arrival of the session stepped last */
    bool disorder;       /* a session arrived before the one stepped before it */
} steps;

/* Frees a step's generator (NULL when the step draws nothing). */
static void rng_free(gsl_rng **r)
{
    if (*r)
        gsl_rng_free(*r);
    *r = NULL;
}

static void steps_free(steps *p)
{
    rng_free(&p->arr.r);
    rng_free(&p->think.r);
    rng_free(&p->classes.r);
}

static void steps_rewind(steps *p)
{
    p->seen = p->kept = p->kept_turns = p->dropped = 0;
    p->capped = false;
    p->last_s = -INFINITY;
    p->disorder = false;
    p->think.any = false;
    arr_rewind(&p->arr);
}

/* The steps on session si of `w`, the last one (the source's next session, index
 * p->seen): arrival and think time, then the transforms (time scale, window, request
 * cap), as a whole workload's transforms would treat it when the sessions come in order
 * of arrival; a session they drop is removed from `w` (false). A kept one gets its audio
 * and its class (index = sessions kept before it). */
static bool steps_session(steps *p, cz_workload *w, uint32_t si)
{
    uint64_t index = p->seen++;
    arr_session(&p->arr, w, si);
    think_session(&p->think, w, si, index);
    const xform_spec *x = &p->xf;
    const cz_session *s = &w->sessions[si];
    for (uint32_t k = 0; x->scale != 1.0 && k < s->n_turns; k++)
        w->turns[s->turn_off + k].arrival_s *= x->scale;
    double first = cz__session_first_arrival(w, si);
    if (first < p->last_s)
        p->disorder = true;
    p->last_s = first;
    bool keep = !x->window || cz__session_in_window(w, si, x->start_s, x->start_s + x->duration_s);
    if (keep && x->window)
        cz__session_shift(w, si, -x->start_s);
    if (keep && x->max_requests > 0 &&
        (p->capped || p->kept_turns + s->n_turns > x->max_requests)) {
        p->capped = true;
        keep = false;
    }
    if (!keep) {
        p->dropped += s->n_turns;
        cz__workload_pop_session(w);
        return false;
    }
    for (uint32_t k = 0; p->audio_on && k < s->n_turns; k++)
        audio_turn(&p->audio, &w->turns[s->turn_off + k]);
    class_session(&p->classes, w, si, p->kept);
    p->kept++;
    p->kept_turns += s->n_turns;
    return true;
}

/* ---- the synthetic source: a producer of sessions in order of arrival -------------------- */

/* Synthetic requests with every per-session step applied as each session is made: lengths
 * (CZ_RNG_LENGTHS, id = request index), turns per session (`turns`, CZ_RNG_LENGTHS with id
 * = 2^63 + session index; sessions of several turns are closed conversations), arrival,
 * think time, transforms, audio and class. The same producer builds a whole workload (drained into it) and a
 * streamed one (cz_workload_stream), so both hold the same sessions. */
typedef struct synth_gen {
    length_spec in, out;
    bool pairs;
    uint64_t requests, image;
    uint32_t max_total;  /* `max_total_tokens`, Vidur's cap on input + output (0: none) */
    cz_distspec turns;   /* turns per session */
    bool multi;          /* `turns` given */
    uint64_t ses;        /* next session index */
    cz_class cls;
    uint64_t seed;
    gsl_rng *r;
    steps st;            /* the per-session steps, applied as each session is made */
    uint64_t i;          /* next request index */
} synth_gen;

static void synth_rewind(void *gp)
{
    synth_gen *g = gp;
    g->i = 0;
    g->ses = 0;
    steps_rewind(&g->st);
}

static void synth_free(void *gp)
{
    synth_gen *g = gp;
    length_free(&g->in);
    length_free(&g->out);
    rng_free(&g->r);
    steps_free(&g->st);
    free(g);
}

/* Writes the producer's header fields into w, once it has made its last session. */
static void synth_header(const synth_gen *g, cz_workload *w)
{
    snprintf(w->source, sizeof w->source, "synthetic");
    w->arrivals_given = false;
    arr_header(&g->st.arr, w);
    w->think_given = g->st.think.on && g->st.think.any;
    w->dropped_filtered = g->st.dropped;
}

static bool synth_next(void *gp, cz_workload *w)
{
    synth_gen *g = gp;
    while (g->i < g->requests) {
        uint64_t si = g->ses++;
        uint64_t n = 1;
        if (g->multi) {
            cz_rng_reseed(g->r, g->seed, CZ_RNG_LENGTHS, (1ull << 63) | si);
            n = to_tokens(cz_distspec_draw(&g->turns, g->r));
            if (n > g->requests - g->i)
                n = g->requests - g->i; /* the last session: the requests left */
        }
        /* "syn-<i>", written without printf (this runs once a session) */
        char name[32] = "syn-", digits[24];
        size_t nd = 0;
        for (uint64_t v = g->multi ? si : g->i; nd == 0 || v > 0; v /= 10)
            digits[nd++] = (char)('0' + v % 10);
        for (size_t k = 0; k < nd; k++)
            name[4 + k] = digits[nd - 1 - k];
        name[4 + nd] = '\0';
        cz_workload_begin_session(w, name, g->cls, g->multi ? CZ_TIMING_CLOSED : CZ_TIMING_OPEN);
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = g->i++;
            cz_rng_reseed(g->r, g->seed, CZ_RNG_LENGTHS, i);
            uint32_t in_tokens, out_tokens, unused;
            if (g->in.from_trace)
                trace_draw(&g->in, g->r, &in_tokens, g->pairs ? &out_tokens : &unused);
            else
                in_tokens = to_tokens(cz_distspec_draw(&g->in.dist, g->r));
            if (g->out.from_trace && !g->pairs)
                trace_draw(&g->out, g->r, &unused, &out_tokens);
            else if (!g->pairs)
                out_tokens = to_tokens(cz_distspec_draw(&g->out.dist, g->r));
            if (g->max_total > 0)
                cap_total(g->max_total, &in_tokens, &out_tokens);
            cz_turn *t = cz_workload_add_turn(w);
            t->in_text_tokens = in_tokens;
            t->in_image_tokens = (uint32_t)g->image;
            t->out_text_tokens = out_tokens;
        }
        bool kept = steps_session(&g->st, w, w->n_sessions - 1);
        CZ_ASSERT(!g->st.disorder); /* arrival processes time sessions in order */
        if (kept)
            return true;
    }
    synth_header(g, w);
    return false;
}

static const cz_wlgen_ops synth_ops = {synth_next, synth_rewind, synth_free};

/* Parses the synthetic source into a producer (*out, owned by the caller). */
static cz_status synth_parse(const cJSON *s, const char *where, const char *base_dir,
                             uint64_t seed, synth_gen **out, cz_err *err)
{
    static const char *const keys[] = {"requests",     "input_tokens", "output_tokens",
                                       "class",        "image_tokens", "turns",
                                       "max_total_tokens"};
    synth_gen *g = cz_xcalloc(1, sizeof *g);
    g->cls = CZ_CLASS_RT;
    g->seed = seed;
    cz_status st;
    if ((st = cz_json_check_keys(s, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_u64(s, where, "requests", true, 1, 100000000, &g->requests, err)) != CZ_OK ||
        (st = cz_json_u64(s, where, "image_tokens", false, 0, 1u << 24, &g->image, err)) != CZ_OK ||
        (st = parse_length(s, where, "input_tokens", base_dir, &g->in, err)) != CZ_OK ||
        (st = parse_length(s, where, "output_tokens", base_dir, &g->out, err)) != CZ_OK ||
        (st = parse_class(s, where, &g->cls, err)) != CZ_OK)
        goto fail;
    uint64_t max_total = 0;
    if ((st = cz_json_u64(s, where, "max_total_tokens", false, 0, UINT32_MAX, &max_total,
                          err)) != CZ_OK)
        goto fail;
    if (cJSON_GetObjectItemCaseSensitive(s, "max_total_tokens") && max_total < 2) {
        st = cz_err_field(err, CZ_EINVAL, where, "max_total_tokens",
                          "expected at least 2 (a request keeps 1 input and 1 output token), "
                          "got %llu", (unsigned long long)max_total);
        goto fail;
    }
    g->max_total = (uint32_t)max_total;
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(s, "turns");
    if (turns) {
        if ((st = cz_distspec_parse(turns, where, "turns", &g->turns, err)) != CZ_OK)
            goto fail;
        g->multi = true;
    }
    /* Input and output from the same trace file are drawn as (input, output) pairs. */
    g->pairs = g->in.from_trace && g->out.from_trace && strcmp(g->in.path, g->out.path) == 0 &&
               g->in.format == g->out.format;
    if (g->in.from_trace && (st = load_trace_lengths(&g->in, where, "input_tokens", err)) != CZ_OK)
        goto fail;
    if (g->pairs) {
        g->out.lens = g->in.lens;
        g->out.n_lens = g->in.n_lens;
    } else if (g->out.from_trace &&
               (st = load_trace_lengths(&g->out, where, "output_tokens", err)) != CZ_OK) {
        goto fail;
    }
    g->r = cz_rng_new(seed, CZ_RNG_LENGTHS, 0);
    *out = g;
    return CZ_OK;
fail:
    synth_free(g);
    return st;
}

/* ---- transforms, audio, barge-in, streams ------------------------------------------------ */

/* Barge-in (LiveServe §7.1): each turn independently with probability p; the
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

/* Periodic streams (Metronome §2): N sessions that each ingest and decode a
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

/* Parses the steps for a source whose header is `src` (source name and flags). */
static cz_status steps_parse(const cJSON *cfg, const char *where, const cfg_child *arr,
                             const cfg_child *audio, uint64_t seed, const cz_workload *src,
                             steps *p, cz_err *err)
{
    cz_status st;
    memset(p, 0, sizeof *p);
    p->classes.f = -1;
    if ((st = arr_parse(arr->obj, arr->where, src, seed, &p->arr, err)) != CZ_OK ||
        (st = think_parse(arr->obj, arr->where, src, seed, &p->think, err)) != CZ_OK ||
        (st = xform_parse(cfg, where, &p->xf, err)) != CZ_OK ||
        (audio->obj && (st = audio_parse(audio->obj, audio->where, &p->audio, err)) != CZ_OK) ||
        (st = class_parse(cfg, where, seed, &p->classes, err)) != CZ_OK)
        return st;
    p->audio_on = audio->obj != NULL;
    return CZ_OK;
}

/* The steps on a whole workload read from a trace, in the producer's order: arrival and
 * think time per session, the transforms, audio per turn, class per session. */
static cz_status steps_apply(steps *p, const char *arr_where, cz_workload *w, cz_err *err)
{
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        cz_status st = arr_check_session(&p->arr, arr_where, w, i, err);
        if (st != CZ_OK)
            return st;
    }
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        arr_session(&p->arr, w, i);
        think_session(&p->think, w, i, i);
    }
    arr_header(&p->arr, w);
    if (p->think.on)
        w->think_given = p->think.any;
    xform_apply(&p->xf, w);
    for (uint32_t i = 0; p->audio_on && i < w->n_turns; i++)
        audio_turn(&p->audio, &w->turns[i]);
    for (uint32_t i = 0; i < w->n_sessions; i++)
        class_session(&p->classes, w, i, i);
    return CZ_OK;
}

/* ---- a trace read as the run consumes it ------------------------------------------------ */

/* A trace read record by record for a streamed workload: each record's session is shifted
 * to the trace's first arrival (as cz_trace_read shifts a whole trace), checked, and
 * stepped as a synthetic session is. Streaming needs the sessions in order of first
 * arrival, before the steps and after them, each either single-turn or closed, and no
 * streams in the file; the first pass (cz_workload_stream's count) finds out. A trace
 * that breaks this, or an error in the file, ends that pass with `whole` or `status` set:
 * the trace is then read whole, or the error reported. */
typedef struct trace_gen {
    cz__rd rd;
    cz_workload hdr;     /* the reader's header fields */
    steps st;
    bool shift_on;       /* arrivals from timestamps (not a cadenza file): shifted to 0 */
    double shift_s;      /* the first record's first arrival */
    double raw_last_s;   /* the record before's first arrival, before the steps
                            (-INFINITY before the first record) */
    const char *arr_where;
    uint32_t pass;       /* 1 while cz_workload_stream counts */
    bool reopen;         /* rewound: the file is opened again at the next call */
    bool whole;          /* the trace cannot be streamed */
    cz_status status;
    cz_err err;
} trace_gen;

static void trace_header(const trace_gen *g, cz_workload *w)
{
    cz__workload_copy_header(w, &g->hdr);
    w->dropped_failed = g->hdr.dropped_failed + g->rd.dropped_failed;
    w->dropped_filtered = g->hdr.dropped_filtered + g->st.dropped;
    arr_header(&g->st.arr, w);
    if (g->st.think.on)
        w->think_given = g->st.think.any;
}

static void trace_free(void *gp)
{
    trace_gen *g = gp;
    cz__rd_close(&g->rd);
    cz_workload_free(&g->hdr);
    steps_free(&g->st);
    free(g);
}

static void trace_rewind(void *gp)
{
    trace_gen *g = gp;
    /* the reader opened for the first pass still stands at its first record */
    g->reopen = g->pass++ > 0;
    g->raw_last_s = -INFINITY;
    steps_rewind(&g->st);
}

/* The file read by a later pass is not the one the first pass read: the run cannot go
 * on, and a status cannot reach the caller from inside the run. */
static CZ__NORETURN void trace_changed(const trace_gen *g)
{
    fprintf(stderr, "cadenza: %s: the trace changed while the run was reading it%s%s\n",
            g->rd.path, g->status != CZ_OK ? ": " : "", g->status != CZ_OK ? g->err.msg : "");
    exit(2);
}

/* Reads and steps the next record into w; false at the end, or when the pass stops. */
static bool trace_step(trace_gen *g, cz_workload *w)
{
    if (g->reopen) {
        cz__rd old = g->rd;
        cz_workload hdr;
        cz_workload_init(&hdr);
        bool whole_only;
        g->status = cz__rd_open(&g->rd, old.path, &old.o, &hdr, &whole_only, &g->err);
        cz_workload_free(&hdr);
        cz__rd_close(&old);
        g->reopen = false;
        g->whole = whole_only;
        if (g->status != CZ_OK || whole_only)
            return false;
    }
    for (;;) {
        bool more;
        g->status = cz__rd_next(&g->rd, w, &more, &g->err);
        if (g->status != CZ_OK || !more)
            return false;
        if (w->n_streams > 0) {
            g->whole = true; /* streams are part of a workload's header */
            return false;
        }
        uint32_t si = w->n_sessions - 1;
        if (g->shift_on) {
            double first = cz__session_first_arrival(w, si);
            if (first < g->raw_last_s) {
                g->whole = true;
                return false;
            }
            if (g->raw_last_s == -INFINITY)
                g->shift_s = first;
            g->raw_last_s = first;
            if (g->shift_s != 0.0)
                cz__session_shift(w, si, -g->shift_s);
        }
        if ((g->shift_on && (g->status = cz__check_session_times(w, si, g->rd.path, &g->err)) !=
                                CZ_OK) ||
            (g->status = arr_check_session(&g->st.arr, g->arr_where, w, si, &g->err)) != CZ_OK)
            return false;
        if (!steps_session(&g->st, w, si))
            continue;
        const cz_session *s = &w->sessions[si];
        if (g->st.disorder || (s->timing == CZ_TIMING_OPEN && s->n_turns > 1)) {
            g->whole = true;
            return false;
        }
        return true;
    }
}

static bool trace_next(void *gp, cz_workload *w)
{
    trace_gen *g = gp;
    bool got = trace_step(g, w);
    if (g->pass > 1 && (g->status != CZ_OK || g->whole))
        trace_changed(g);
    trace_header(g, w);
    return got;
}

static const cz_wlgen_ops trace_ops = {trace_next, trace_rewind, trace_free};

/* Makes `w` a streamed workload over the trace at `path` when the trace allows it
 * (*streamed); otherwise leaves `w` as it was for the trace to be read whole. */
static cz_status trace_stream(const char *path, const cz_trace_opts *opts, const cJSON *cfg,
                              const char *where, const cfg_child *arr, const cfg_child *audio,
                              uint64_t seed, cz_workload *w, bool *streamed, cz_err *err)
{
    *streamed = false;
    cz_trace_opts o = *opts;
    cz_status st = CZ_OK;
    if (o.format == CZ_FMT_AUTO && (st = cz_trace_detect(path, &o.format, err)) != CZ_OK)
        return st;
    trace_gen *g = cz_xcalloc(1, sizeof *g);
    cz_workload_init(&g->hdr);
    bool whole_only;
    st = cz__rd_open(&g->rd, path, &o, &g->hdr, &whole_only, err);
    if (st == CZ_OK && !whole_only)
        st = steps_parse(cfg, where, arr, audio, seed, &g->hdr, &g->st, err);
    if (st != CZ_OK || whole_only) {
        trace_free(g);
        return st;
    }
    g->shift_on = g->hdr.arrivals_given && o.format != CZ_FMT_CADENZA;
    g->arr_where = arr->where;
    trace_rewind(g); /* pass 1 */
    bool keep_stream = w->stream;
    cz_workload_stream(w, &trace_ops, g);
    if (g->status == CZ_OK && !g->whole) {
        *streamed = true;
        return CZ_OK;
    }
    st = g->status;
    if (st != CZ_OK && err)
        *err = g->err;
    cz_workload_free(w); /* and the producer with it */
    cz_workload_init(w);
    w->stream = keep_stream;
    return st;
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
    steps p;
    memset(&p, 0, sizeof p);
    if (trace.obj) {
        cz_trace_opts o;
        char *path = NULL;
        bool streamed = false;
        st = trace_parse(trace.obj, trace.where, base_dir, &o, &path, err);
        /* barge-in draws its cut times from the whole workload's audio durations */
        if (st == CZ_OK && w->stream && !barge.obj)
            st = trace_stream(path, &o, cfg, where, &arr, &audio, seed, w, &streamed, err);
        if (st == CZ_OK && !streamed && (st = cz_trace_read(path, &o, w, err)) == CZ_OK &&
            (st = steps_parse(cfg, where, &arr, &audio, seed, w, &p, err)) == CZ_OK)
            st = steps_apply(&p, arr.where, w, err);
        steps_free(&p);
        free(path);
    } else if (synth.obj) {
        synth_gen *g = NULL;
        cz_workload hdr;
        cz_workload_init(&hdr);
        snprintf(hdr.source, sizeof hdr.source, "synthetic");
        if ((st = synth_parse(synth.obj, synth.where, base_dir, seed, &g, err)) == CZ_OK &&
            (st = steps_parse(cfg, where, &arr, &audio, seed, &hdr, &p, err)) != CZ_OK)
            steps_free(&p);
        if (st == CZ_OK) {
            g->st = p; /* the producer takes the steps */
            synth_rewind(g);
            /* barge-in draws its cut times from the whole workload's audio durations */
            if (w->stream && !barge.obj) {
                cz_workload_stream(w, &synth_ops, g);
            } else {
                while (synth_next(g, w))
                    ;
                synth_free(g);
            }
        } else if (g) {
            synth_free(g);
        }
    } else {
        snprintf(w->source, sizeof w->source, "streams");
    }
    if (st == CZ_OK && barge.obj)
        st = apply_barge_in(barge.obj, barge.where, seed, w, err);
    if (st == CZ_OK && streams.obj)
        st = add_streams(streams.obj, streams.where, seed, w, err);
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
    w.stream = out->stream;
    cz_status st = build(wcfg, where, base_dir, seed, &w, err);
    if (st != CZ_OK) {
        cz_workload_free(&w);
        return st;
    }
    cz_workload_free(out);
    *out = w;
    return CZ_OK;
}
