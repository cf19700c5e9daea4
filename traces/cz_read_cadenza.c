/* cz_read_cadenza.c - cadenza's own session JSONL format: reader and atomic writer.
 *
 * Line 1 is a header object {"format": "cadenza-sessions", "version": 1, "source", "concurrency",
 * "hash_block_tokens", "dropped_failed", "dropped_filtered", "arrivals_given",
 * "think_given"}; every further line is either a session
 * {"session": name, "class": "rt"|"be", "timing": "open"|"closed", "turns": [{...}]} whose
 * turns carry the cz_turn fields by name (hash_ids when the turn has hashes), or a stream
 * {"stream": {...}} with the cz_stream fields. Doubles are written with the fewest of
 * 15..17 significant digits that read back to the same value, so a file read back
 * reproduces the workload exactly (docs/workload.md has an example). Times are not
 * shifted on reading: the file holds them as they were. */
#include "cz_traces_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_json.h"

#define CZ_CADENZA_FORMAT "cadenza-sessions"
#define CZ_CADENZA_VERSION 1

static const char *const header_keys[] = {
    "format",          "version",          "source",         "concurrency", "hash_block_tokens",
    "dropped_failed",  "dropped_filtered", "arrivals_given", "think_given"};
static const char *const session_keys[] = {"session", "class", "timing", "turns"};
static const char *const turn_keys[] = {
    "arrival_s",       "speech_s",         "in_text_tokens", "in_audio_tokens",
    "in_image_tokens", "out_text_tokens",  "out_audio_tokens", "out_audio_s",
    "think_s",         "barge_in_s",       "hash_ids"};
static const char *const stream_keys[] = {"start_s",             "frame_period_s",
                                          "duration_s",          "tokens_in_per_frame",
                                          "tokens_out_per_frame", "class"};

/* ---- reading ------------------------------------------------------------------------ */

static cz_status read_u32(const cJSON *obj, const char *where, const char *key, bool required,
                          uint32_t *out, cz_err *err)
{
    uint64_t v = *out;
    cz_status st = cz_json_u64(obj, where, key, required, 0, UINT32_MAX, &v, err);
    *out = (uint32_t)v;
    return st;
}

/* A stream's tokens per frame: every frame appends input and decodes output, so both are
 * at least 1 (a frame with neither has nothing to serve or to return). */
static cz_status read_frame_tokens(const cJSON *obj, const char *where, const char *key,
                                   uint32_t *out, cz_err *err)
{
    uint64_t v = 0;
    cz_status st = cz_json_u64(obj, where, key, true, 1, UINT32_MAX, &v, err);
    *out = (uint32_t)v;
    return st;
}

static cz_status read_class(const cJSON *obj, const char *where, cz_class *cls, cz_err *err)
{
    const char *s = NULL;
    cz_status st = cz_json_str(obj, where, "class", false, &s, err);
    if (st != CZ_OK || !s)
        return st;
    if (!cz__class_parse(s, cls))
        return cz_err_set(err, CZ_EINVAL, "%s: field 'class': expected \"rt\" or \"be\", got '%s'",
                          where, s);
    return CZ_OK;
}

static cz_status read_header(const cJSON *h, const char *where, cz_workload *w, cz_err *err)
{
    const char *format = NULL, *source = "cadenza";
    uint64_t version = 0, concurrency = 0, block = 0;
    cz_status st;
    if (!cJSON_IsObject(h))
        return cz_err_set(err, CZ_EFORMAT, "%s: expected the header object", where);
    if ((st = cz_json_str(h, where, "format", true, &format, err)) != CZ_OK)
        return st;
    if (strcmp(format, CZ_CADENZA_FORMAT) != 0)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: field 'format': expected \"" CZ_CADENZA_FORMAT "\", got '%s'",
                          where, format);
    if ((st = cz_json_check_keys(h, where, header_keys, (int)CZ_ARRAY_LEN(header_keys), err)) !=
            CZ_OK ||
        (st = cz_json_u64(h, where, "version", true, 0, UINT32_MAX, &version, err)) != CZ_OK)
        return st;
    if (version != CZ_CADENZA_VERSION)
        return cz_err_set(err, CZ_EFORMAT, "%s: field 'version': expected %d, got %llu", where,
                          CZ_CADENZA_VERSION, (unsigned long long)version);
    if ((st = cz_json_str(h, where, "source", false, &source, err)) != CZ_OK ||
        (st = cz_json_u64(h, where, "concurrency", false, 0, UINT32_MAX, &concurrency, err)) !=
            CZ_OK ||
        (st = cz_json_u64(h, where, "hash_block_tokens", false, 0, UINT32_MAX, &block, err)) !=
            CZ_OK ||
        (st = cz_json_u64(h, where, "dropped_failed", false, 0, UINT64_MAX, &w->dropped_failed,
                          err)) != CZ_OK ||
        (st = cz_json_u64(h, where, "dropped_filtered", false, 0, UINT64_MAX,
                          &w->dropped_filtered, err)) != CZ_OK ||
        (st = cz_json_bool(h, where, "arrivals_given", false, &w->arrivals_given, err)) !=
            CZ_OK ||
        (st = cz_json_bool(h, where, "think_given", false, &w->think_given, err)) != CZ_OK)
        return st;
    snprintf(w->source, sizeof w->source, "%s", source);
    w->concurrency = (uint32_t)concurrency;
    w->hash_block_tokens = (uint32_t)block;
    return CZ_OK;
}

static cz_status read_turn(const cJSON *jt, const char *where, cz_workload *w, uint32_t **hashes,
                           size_t *cap, cz_err *err)
{
    if (!cJSON_IsObject(jt))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a turn object", where);
    cz_status st = cz_json_check_keys(jt, where, turn_keys, (int)CZ_ARRAY_LEN(turn_keys), err);
    if (st != CZ_OK)
        return st;
    cz_turn t = {.barge_in_s = -1.0};
    if ((st = cz_json_num(jt, where, "arrival_s", true, 0.0, CZ_MAX_TIME_S, &t.arrival_s, err)) !=
            CZ_OK ||
        (st = cz_json_num(jt, where, "speech_s", false, 0.0, CZ_MAX_TIME_S, &t.speech_s, err)) !=
            CZ_OK ||
        (st = read_u32(jt, where, "in_text_tokens", true, &t.in_text_tokens, err)) != CZ_OK ||
        (st = read_u32(jt, where, "in_audio_tokens", false, &t.in_audio_tokens, err)) != CZ_OK ||
        (st = read_u32(jt, where, "in_image_tokens", false, &t.in_image_tokens, err)) != CZ_OK ||
        (st = read_u32(jt, where, "out_text_tokens", true, &t.out_text_tokens, err)) != CZ_OK ||
        (st = read_u32(jt, where, "out_audio_tokens", false, &t.out_audio_tokens, err)) !=
            CZ_OK ||
        (st = cz_json_num(jt, where, "out_audio_s", false, 0.0, CZ_MAX_TIME_S, &t.out_audio_s, err)) !=
            CZ_OK ||
        (st = cz_json_num(jt, where, "think_s", false, 0.0, CZ_MAX_TIME_S, &t.think_s, err)) != CZ_OK ||
        (st = cz_json_num(jt, where, "barge_in_s", false, -CZ_MAX_TIME_S, CZ_MAX_TIME_S, &t.barge_in_s,
                          err)) != CZ_OK)
        return st;
    uint32_t n = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(jt, "hash_ids");
    if (arr) {
        if (!cJSON_IsArray(arr))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'hash_ids': expected an array of integers", where);
        const cJSON *it;
        cJSON_ArrayForEach(it, arr)
        {
            double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
            if (!cJSON_IsNumber(it) || v < 0.0 || v > (double)UINT32_MAX || v != floor(v))
                return cz_err_set(err, CZ_EINVAL,
                                  "%s: field 'hash_ids[%u]': expected an integer in [0, %u]",
                                  where, n, UINT32_MAX);
            cz_grow((void **)hashes, cap, (size_t)n + 1, sizeof **hashes);
            (*hashes)[n++] = (uint32_t)v;
        }
    }
    cz_turn *dst = cz_workload_add_turn(w);
    *dst = t;
    cz_workload_add_hashes(w, dst, *hashes, n);
    return CZ_OK;
}

static cz_status read_session(const cJSON *js, const char *where, const cz_trace_opts *o,
                              cz_workload *w, uint32_t **hashes, size_t *cap, cz_err *err)
{
    const char *name = NULL, *timing_name = "open";
    cz_class cls = o->cls;
    const cJSON *turns;
    cz_status st;
    if ((st = cz_json_check_keys(js, where, session_keys, (int)CZ_ARRAY_LEN(session_keys),
                                 err)) != CZ_OK ||
        (st = cz_json_str(js, where, "session", true, &name, err)) != CZ_OK ||
        (st = read_class(js, where, &cls, err)) != CZ_OK ||
        (st = cz_json_str(js, where, "timing", false, &timing_name, err)) != CZ_OK)
        return st;
    cz_timing timing;
    if (strcmp(timing_name, "open") == 0)
        timing = CZ_TIMING_OPEN;
    else if (strcmp(timing_name, "closed") == 0)
        timing = CZ_TIMING_CLOSED;
    else
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'timing': expected \"open\" or \"closed\", got '%s'", where,
                          timing_name);
    turns = cJSON_GetObjectItemCaseSensitive(js, "turns");
    if (!cJSON_IsArray(turns) || cJSON_GetArraySize(turns) == 0)
        return cz_err_set(err, CZ_EINVAL, "%s: field 'turns': expected a non-empty array of turns",
                          where);
    cz_workload_begin_session(w, name, cls, timing);
    const cJSON *jt;
    int k = 0;
    cJSON_ArrayForEach(jt, turns)
    {
        char twhere[CZ_ERR_MSG_MAX];
        snprintf(twhere, sizeof twhere, "%s: turns[%d]", where, k++);
        if ((st = read_turn(jt, twhere, w, hashes, cap, err)) != CZ_OK)
            return st;
    }
    return CZ_OK;
}

static cz_status read_stream(const cJSON *js, const char *where, const cz_trace_opts *o,
                             cz_workload *w, cz_err *err)
{
    char swhere[CZ_ERR_MSG_MAX];
    snprintf(swhere, sizeof swhere, "%s: stream", where);
    if (!cJSON_IsObject(js))
        return cz_err_set(err, CZ_EINVAL, "%s: field 'stream': expected an object", where);
    cz_stream s = {.cls = o->cls};
    cz_status st;
    if ((st = cz_json_check_keys(js, swhere, stream_keys, (int)CZ_ARRAY_LEN(stream_keys),
                                 err)) != CZ_OK ||
        (st = cz_json_num(js, swhere, "start_s", true, 0.0, CZ_MAX_TIME_S, &s.start_s, err)) != CZ_OK ||
        (st = cz_json_num(js, swhere, "frame_period_s", true, 1e-9, CZ_MAX_TIME_S, &s.frame_period_s,
                          err)) != CZ_OK ||
        (st = cz_json_num(js, swhere, "duration_s", true, 0.0, CZ_MAX_TIME_S, &s.duration_s, err)) !=
            CZ_OK ||
        (st = read_frame_tokens(js, swhere, "tokens_in_per_frame", &s.tokens_in_per_frame,
                                err)) != CZ_OK ||
        (st = read_frame_tokens(js, swhere, "tokens_out_per_frame", &s.tokens_out_per_frame,
                                err)) != CZ_OK ||
        (st = read_class(js, swhere, &s.cls, err)) != CZ_OK)
        return st;
    *cz_workload_add_stream(w) = s;
    return CZ_OK;
}

/* The next line parsed, with its "file:line" in where[]; *rec NULL at the end. */
static cz_status next_record(cz__rd *r, cJSON **rec, char *where, size_t where_len, cz_err *err)
{
    char *line;
    *rec = NULL;
    cz_status st = cz__lines_next(&r->ls, &line, err);
    if (st != CZ_OK || !line)
        return st;
    snprintf(where, where_len, "%s:%zu", r->path, r->ls.line);
    return cz__jsonl_parse(line, where, rec, err);
}

cz_status cz__cadenza_open(cz__rd *r, cz_workload *hdr, cz_err *err)
{
    char where[CZ_ERR_MSG_MAX / 2];
    cJSON *rec = NULL;
    cz_status st = cz__lines_open(&r->ls, r->path, err);
    if (st == CZ_OK)
        st = next_record(r, &rec, where, sizeof where, err);
    if (st == CZ_OK && !rec)
        st = cz_err_set(err, CZ_EFORMAT,
                        "%s: empty file, expected a {\"format\": \"" CZ_CADENZA_FORMAT
                        "\"} header line",
                        r->path);
    if (st == CZ_OK)
        st = read_header(rec, where, hdr, err);
    cJSON_Delete(rec);
    return st;
}

cz_status cz__cadenza_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err)
{
    char where[CZ_ERR_MSG_MAX / 2];
    cJSON *rec = NULL;
    cz_status st = next_record(r, &rec, where, sizeof where, err);
    *more = st == CZ_OK && rec != NULL;
    if (!*more)
        return st;
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rec, "stream");
    if (!cJSON_IsObject(rec))
        st = cz_err_set(err, CZ_EINVAL, "%s: expected a session or stream object", where);
    else if (js && cJSON_GetArraySize(rec) != 1)
        st = cz_err_set(err, CZ_EINVAL, "%s: a stream line holds only the field 'stream'", where);
    else if (js)
        st = read_stream(js, where, &r->o, w, err);
    else
        st = read_session(rec, where, &r->o, w, &r->hashes, &r->cap_hashes, err);
    cJSON_Delete(rec);
    return st;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Writes `v` with the fewest significant digits (15..17) that read back exactly. */
static void put_double(FILE *f, double v)
{
    CZ_ASSERT(isfinite(v));
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

/* Writes `s` as a JSON string. */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void put_num_field(FILE *f, const char *key, double v, bool comma)
{
    fprintf(f, "%s\"%s\":", comma ? "," : "", key);
    put_double(f, v);
}

static void write_turn(FILE *f, const cz_workload *w, const cz_turn *t)
{
    fputc('{', f);
    put_num_field(f, "arrival_s", t->arrival_s, false);
    put_num_field(f, "speech_s", t->speech_s, true);
    fprintf(f,
            ",\"in_text_tokens\":%u,\"in_audio_tokens\":%u,\"in_image_tokens\":%u,"
            "\"out_text_tokens\":%u,\"out_audio_tokens\":%u",
            t->in_text_tokens, t->in_audio_tokens, t->in_image_tokens, t->out_text_tokens,
            t->out_audio_tokens);
    put_num_field(f, "out_audio_s", t->out_audio_s, true);
    put_num_field(f, "think_s", t->think_s, true);
    put_num_field(f, "barge_in_s", t->barge_in_s, true);
    if (t->hash_len > 0) {
        fputs(",\"hash_ids\":[", f);
        const uint32_t *h = cz_workload_turn_hashes(w, t);
        for (uint32_t i = 0; i < t->hash_len; i++)
            fprintf(f, "%s%u", i ? "," : "", h[i]);
        fputc(']', f);
    }
    fputc('}', f);
}

static void write_all(FILE *f, const cz_workload *w)
{
    fputs("{\"format\":\"" CZ_CADENZA_FORMAT "\",\"version\":1,\"source\":", f);
    put_string(f, w->source);
    fprintf(f,
            ",\"concurrency\":%u,\"hash_block_tokens\":%u,\"dropped_failed\":%llu,"
            "\"dropped_filtered\":%llu,\"arrivals_given\":%s,\"think_given\":%s}\n",
            w->concurrency, w->hash_block_tokens, (unsigned long long)w->dropped_failed,
            (unsigned long long)w->dropped_filtered, w->arrivals_given ? "true" : "false",
            w->think_given ? "true" : "false");
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const cz_session *s = &w->sessions[i];
        fputs("{\"session\":", f);
        put_string(f, cz_workload_session_name(w, s));
        fprintf(f, ",\"class\":\"%s\",\"timing\":\"%s\",\"turns\":[", cz__class_name(s->cls),
                s->timing == CZ_TIMING_CLOSED ? "closed" : "open");
        for (uint32_t k = 0; k < s->n_turns; k++) {
            if (k)
                fputc(',', f);
            write_turn(f, w, &w->turns[s->turn_off + k]);
        }
        fputs("]}\n", f);
    }
    for (uint32_t i = 0; i < w->n_streams; i++) {
        const cz_stream *s = &w->streams[i];
        fputs("{\"stream\":{", f);
        put_num_field(f, "start_s", s->start_s, false);
        put_num_field(f, "frame_period_s", s->frame_period_s, true);
        put_num_field(f, "duration_s", s->duration_s, true);
        fprintf(f, ",\"tokens_in_per_frame\":%u,\"tokens_out_per_frame\":%u,\"class\":\"%s\"}}\n",
                s->tokens_in_per_frame, s->tokens_out_per_frame, cz__class_name(s->cls));
    }
}

static bool write_workload(FILE *f, const void *w)
{
    write_all(f, w);
    return true;
}

cz_status cz_trace_write_cadenza(const cz_workload *w, const char *path, cz_err *err)
{
    return cz_file_write(path, write_workload, w, err);
}
