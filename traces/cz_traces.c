/* cz_traces.c - trace format names, content-based detection, reader options and the
 * cz_trace_read entry point (dispatch to the per-format readers, arrival shift, merge
 * into the caller's workload). */
#include "cz_traces_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

static const struct {
    const char *name;
    cz_trace_format fmt;
} format_names[] = {
    {"auto", CZ_FMT_AUTO},         {"sharegpt", CZ_FMT_SHAREGPT}, {"burstgpt", CZ_FMT_BURSTGPT},
    {"mooncake", CZ_FMT_MOONCAKE}, {"azure", CZ_FMT_AZURE},       {"cadenza", CZ_FMT_CADENZA},
};

cz_status cz_trace_format_parse(const char *name, cz_trace_format *out, cz_err *err)
{
    for (size_t i = 0; i < CZ_ARRAY_LEN(format_names); i++) {
        if (strcmp(name, format_names[i].name) == 0) {
            *out = format_names[i].fmt;
            return CZ_OK;
        }
    }
    return cz_err_set(err, CZ_ENOTFOUND,
                      "unknown trace format '%s' (expected one of: auto, sharegpt, burstgpt, "
                      "mooncake, azure, cadenza)",
                      name);
}

const char *cz_trace_format_name(cz_trace_format f)
{
    for (size_t i = 0; i < CZ_ARRAY_LEN(format_names); i++)
        if (format_names[i].fmt == f)
            return format_names[i].name;
    return "unknown";
}

const char *cz__class_name(cz_class c)
{
    return c == CZ_CLASS_BE ? "be" : "rt";
}

bool cz__class_parse(const char *s, cz_class *out)
{
    if (strcmp(s, "rt") == 0)
        *out = CZ_CLASS_RT;
    else if (strcmp(s, "be") == 0)
        *out = CZ_CLASS_BE;
    else
        return false;
    return true;
}

#define CZ_DETECT_BYTES 65536

cz_status cz_trace_detect(const char *path, cz_trace_format *out, cz_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cz_err_open(err, path, errno);
    char *buf = cz_xmalloc(CZ_DETECT_BYTES + 1);
    size_t n = fread(buf, 1, CZ_DETECT_BYTES, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(buf);
        return cz_err_set(err, CZ_EIO, "%s: read error", path);
    }
    buf[n] = '\0';
    cz_status st = cz_text_check(buf, n, path, err);
    if (st != CZ_OK) {
        free(buf);
        return st;
    }
    char *p = buf + cz_text_bom(buf, n);
    while (isspace((unsigned char)*p))
        p++;
    char *nl = strchr(p, '\n');
    if (nl)
        *nl = '\0';
    if (*p == '[')
        *out = CZ_FMT_SHAREGPT;
    else if (*p == '{' && strstr(p, "\"cadenza-sessions\""))
        *out = CZ_FMT_CADENZA;
    else if (*p == '{' && (strstr(p, "\"hash_ids\"") || strstr(p, "\"input_length\"")))
        *out = CZ_FMT_MOONCAKE;
    else if (*p != '{' && strstr(p, "Request tokens"))
        *out = CZ_FMT_BURSTGPT;
    else if (*p != '{' && strstr(p, "ContextTokens"))
        *out = CZ_FMT_AZURE;
    else {
        char excerpt[48];
        size_t k = 0;
        for (; p[k] && k + 1 < sizeof excerpt; k++)
            excerpt[k] = isprint((unsigned char)p[k]) ? p[k] : '?';
        excerpt[k] = '\0';
        st = cz_err_set(err, CZ_EFORMAT,
                        "%s:1: cannot tell the trace format from the start '%s'; expected one "
                        "of: sharegpt (a JSON array), cadenza (JSONL whose first line has "
                        "\"format\": \"cadenza-sessions\"), mooncake (JSONL with hash_ids and "
                        "input_length), burstgpt (CSV with a 'Request tokens' column), azure "
                        "(CSV with a 'ContextTokens' column); or name the format",
                        path, *p ? excerpt : "(empty file)");
    }
    free(buf);
    return st;
}

cz_trace_opts cz_trace_opts_default(void)
{
    return (cz_trace_opts){
        .format = CZ_FMT_AUTO,
        .sharegpt_multi_turn = false,
        .sharegpt_filter = true,
        .sharegpt_min_tokens = 4,
        .sharegpt_max_prompt = 1024,
        .sharegpt_max_total = 2048,
        .chars_per_token = 4.0,
        .default_output_tokens = 0,
        .cls = CZ_CLASS_RT,
    };
}

/* Moves the earliest meaningful arrival (every turn of an open session, the first turn
 * of a closed one) to 0. */
static void shift_to_zero(cz_workload *w)
{
    double first = INFINITY;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const cz_session *s = &w->sessions[i];
        uint32_t n = s->timing == CZ_TIMING_OPEN ? s->n_turns : 1;
        for (uint32_t k = 0; k < n; k++)
            first = fmin(first, w->turns[s->turn_off + k].arrival_s);
    }
    if (!isfinite(first) || first == 0.0)
        return;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const cz_session *s = &w->sessions[i];
        uint32_t n = s->timing == CZ_TIMING_OPEN ? s->n_turns : 1;
        for (uint32_t k = 0; k < n; k++)
            w->turns[s->turn_off + k].arrival_s -= first;
    }
}

cz_status cz__check_session_times(const cz_workload *w, uint32_t si, const char *path,
                                  cz_err *err)
{
    const cz_session *s = &w->sessions[si];
    for (uint32_t k = 0; k < s->n_turns; k++) {
        const cz_turn *t = &w->turns[s->turn_off + k];
        const char *field = !(t->arrival_s <= CZ_MAX_TIME_S)     ? "arrival"
                            : !(t->think_s <= CZ_MAX_TIME_S)     ? "think time"
                            : !(t->speech_s <= CZ_MAX_TIME_S)    ? "speech time"
                            : !(t->out_audio_s <= CZ_MAX_TIME_S) ? "audio length"
                                                                 : NULL;
        if (field)
            return cz_err_set(err, CZ_ERANGE,
                              "%s: session '%s' turn %u: its %s is beyond %g s after the "
                              "trace's first request (the most a workload can hold)",
                              path, cz_workload_session_name(w, s), k, field, CZ_MAX_TIME_S);
    }
    return CZ_OK;
}

cz_status cz__rd_open(cz__rd *r, const char *path, const cz_trace_opts *o, cz_workload *hdr,
                      bool *whole_only, cz_err *err)
{
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < CZ_ARRAY_LEN(r->col); i++)
        r->col[i] = -1;
    r->fmt = o->format;
    r->path = cz_xstrdup(path);
    r->o = *o;
    *whole_only = false;
    switch (r->fmt) {
    case CZ_FMT_AZURE: return cz__azure_open(r, hdr, err);
    case CZ_FMT_MOONCAKE: return cz__mooncake_open(r, hdr, err);
    case CZ_FMT_CADENZA: return cz__cadenza_open(r, hdr, err);
    case CZ_FMT_BURSTGPT: return cz__burstgpt_open(r, hdr, whole_only, err);
    case CZ_FMT_SHAREGPT: *whole_only = true; return CZ_OK;
    default: CZ_ASSERT(0 && "a resolved format");
    }
}

cz_status cz__rd_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err)
{
    switch (r->fmt) {
    case CZ_FMT_AZURE: return cz__azure_next(r, w, more, err);
    case CZ_FMT_MOONCAKE: return cz__mooncake_next(r, w, more, err);
    case CZ_FMT_CADENZA: return cz__cadenza_next(r, w, more, err);
    case CZ_FMT_BURSTGPT: return cz__burstgpt_next(r, w, more, err);
    default: CZ_ASSERT(0 && "a format read record by record");
    }
}

void cz__rd_close(cz__rd *r)
{
    cz__csv_close(&r->csv);
    cz__lines_close(&r->ls);
    free(r->hashes);
    free(r->path);
    memset(r, 0, sizeof *r);
}

/* Reads `path` whole into the empty workload `w`: a whole reader, or a record reader
 * drained. */
static cz_status read_whole(const char *path, const cz_trace_opts *o, cz_workload *w,
                            cz_err *err)
{
    if (o->format == CZ_FMT_SHAREGPT)
        return cz__read_sharegpt(path, o, w, err);
    cz__rd r;
    bool whole_only, more = true;
    cz_status st = cz__rd_open(&r, path, o, w, &whole_only, err);
    if (st == CZ_OK && whole_only) {
        cz__rd_close(&r);
        return cz__read_burstgpt(path, o, w, err);
    }
    while (st == CZ_OK && more)
        st = cz__rd_next(&r, w, &more, err);
    w->dropped_failed += r.dropped_failed;
    cz__rd_close(&r);
    return st;
}

/* Appends `src` to the non-empty workload `dst`; see cz_trace_read. */
static cz_status merge(cz_workload *dst, const cz_workload *src, const char *path, cz_err *err)
{
    if (dst->hash_block_tokens && src->hash_block_tokens &&
        dst->hash_block_tokens != src->hash_block_tokens)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: hash blocks of %u tokens cannot join a workload whose hash "
                          "blocks have %u tokens",
                          path, src->hash_block_tokens, dst->hash_block_tokens);
    if (dst->concurrency && src->concurrency && dst->concurrency != src->concurrency)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: concurrency %u conflicts with the workload's concurrency %u", path,
                          src->concurrency, dst->concurrency);
    for (uint32_t i = 0; i < src->n_sessions; i++)
        cz__workload_copy_session(dst, src, i);
    for (uint32_t i = 0; i < src->n_streams; i++)
        *cz_workload_add_stream(dst) = src->streams[i];
    if (!dst->hash_block_tokens)
        dst->hash_block_tokens = src->hash_block_tokens;
    if (!dst->concurrency)
        dst->concurrency = src->concurrency;
    if (strcmp(dst->source, src->source) != 0)
        snprintf(dst->source, sizeof dst->source, "mixed");
    dst->arrivals_given = dst->arrivals_given && src->arrivals_given;
    dst->think_given = dst->think_given && src->think_given;
    dst->dropped_failed += src->dropped_failed;
    dst->dropped_filtered += src->dropped_filtered;
    return CZ_OK;
}

cz_status cz_trace_read(const char *path, const cz_trace_opts *opts, cz_workload *out,
                        cz_err *err)
{
    cz_trace_opts o = opts ? *opts : cz_trace_opts_default();
    if (!(o.chars_per_token > 0.0) || !isfinite(o.chars_per_token))
        return cz_err_set(err, CZ_EINVAL, "%s: chars_per_token must be a positive number, got %g",
                          path, o.chars_per_token);
    cz_status st = CZ_OK;
    if (o.format == CZ_FMT_AUTO && (st = cz_trace_detect(path, &o.format, err)) != CZ_OK)
        return st;
    cz_workload tmp;
    cz_workload_init(&tmp);
    st = read_whole(path, &o, &tmp, err);
    if (st == CZ_OK && o.format != CZ_FMT_CADENZA && tmp.arrivals_given)
        shift_to_zero(&tmp);
    for (uint32_t i = 0; st == CZ_OK && o.format != CZ_FMT_CADENZA && i < tmp.n_sessions; i++)
        st = cz__check_session_times(&tmp, i, path, err);
    if (st == CZ_OK && (out->n_sessions > 0 || out->n_streams > 0)) {
        st = merge(out, &tmp, path, err);
    } else if (st == CZ_OK) {
        tmp.dropped_failed += out->dropped_failed;
        tmp.dropped_filtered += out->dropped_filtered;
        cz_workload_free(out);
        *out = tmp;
        return CZ_OK;
    }
    cz_workload_free(&tmp);
    return st;
}
