/* cz_sse.c - see cz_sse.h. */
#include "cz_sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void cz_sse_init(cz_sse *s, size_t max_bytes)
{
    memset(s, 0, sizeof *s);
    s->max_bytes = max_bytes ? max_bytes : CZ_SSE_MAX_EVENT_BYTES;
}

void cz_sse_free(cz_sse *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* Room for `more` bytes after len, within max_bytes. */
static cz_status reserve(cz_sse *s, size_t more, cz_err *err)
{
    if (more > s->max_bytes - s->len)
        return cz_err_set(err, CZ_EINVAL,
                          "event stream: an event or line over %zu bytes (after %llu events)",
                          s->max_bytes, (unsigned long long)s->events);
    if (s->len + more > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + more)
            cap *= 2;
        if (cap > s->max_bytes)
            cap = s->max_bytes;
        s->buf = cz_xrealloc(s->buf, cap, 1);
        s->cap = cap;
    }
    return CZ_OK;
}

/* The current line buf[line, len) is complete: a blank line dispatches, a data line
 * appends its value to the event's data, anything else is dropped. False when fn asked
 * to stop. */
static bool end_line(cz_sse *s, cz_sse_event_fn fn, void *ctx)
{
    size_t n = s->len - s->line;
    if (n == 0) {
        bool go = true;
        if (s->data_seen) {
            size_t dn = s->line ? s->line - 1 : 0; /* without the last LF */
            s->events++;
            go = fn(ctx, s->buf ? s->buf : "", dn);
        }
        s->line = s->len = 0;
        s->data_seen = false;
        return go;
    }
    char *l = s->buf + s->line; /* n > 0: the line is in buf */
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        size_t v = colon ? fl + 1 : n;
        if (v < n && l[v] == ' ')
            v++;
        /* the value moves down to the end of the data; its LF takes the place of the
         * bytes dropped before it (at least the 4 of "data"), so it fits */
        memmove(l, l + v, n - v);
        s->line += n - v;
        s->buf[s->line++] = '\n';
        s->data_seen = true;
    }
    s->len = s->line; /* comments (fl == 0) and other fields are dropped */
    return true;
}

cz_status cz_sse_feed(cz_sse *s, const char *p, size_t n, cz_sse_event_fn fn, void *ctx,
                      cz_err *err)
{
    size_t i = 0;
    while (i < n) {
        if (s->skip_lf) {
            s->skip_lf = false;
            if (p[i] == '\n') {
                i++;
                continue;
            }
        }
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        if (j > i) {
            cz_status st = reserve(s, j - i, err);
            if (st != CZ_OK)
                return st;
            memcpy(s->buf + s->len, p + i, j - i);
            s->len += j - i;
        }
        if (j == n)
            break;
        s->skip_lf = p[j] == '\r';
        i = j + 1;
        if (!end_line(s, fn, ctx))
            return CZ_OK;
    }
    return CZ_OK;
}

bool cz_sse_end(cz_sse *s, cz_sse_event_fn fn, void *ctx)
{
    bool cut = s->len > s->line || s->data_seen;
    if (s->len > s->line && !end_line(s, fn, ctx))
        return true;
    if (s->data_seen) {
        s->len = s->line; /* now a blank line */
        end_line(s, fn, ctx);
    }
    s->skip_lf = false;
    return cut;
}

/* ---- chunks ---- */

void cz_oai_chunk_free(cz_oai_chunk *c)
{
    if (c->json_)
        cJSON_Delete(c->json_);
    memset(c, 0, sizeof *c);
}

/* A usage count: absent or null is -1, else a non-negative integer. */
static cz_status usage_count(const cJSON *usage, const char *key, int64_t *out, cz_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, key);
    *out = -1;
    if (!v || cJSON_IsNull(v))
        return CZ_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9e15 ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return cz_err_set(err, CZ_EINVAL, "chunk: usage.%s: expected a non-negative integer",
                          key);
    *out = (int64_t)v->valuedouble;
    return CZ_OK;
}

/* The message of an error object (a string "message", else the object's text). */
static void error_message(const cJSON *e, char *out, size_t n)
{
    const cJSON *msg = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
    if (cJSON_IsString(msg) && msg->valuestring) {
        snprintf(out, n, "%s", msg->valuestring);
        return;
    }
    char *txt = cJSON_PrintUnformatted(e);
    snprintf(out, n, "%s", txt ? txt : "(an error without a message)");
    free(txt);
}

cz_status cz_oai_chunk_parse(const char *data, size_t n, cz_oai_chunk *c, cz_err *err)
{
    memset(c, 0, sizeof *c);
    c->completion_tokens = c->prompt_tokens = -1;
    c->n_token_ids = -1;
    /* vLLM strips the message before comparing with [DONE] */
    size_t b = 0, e = n;
    while (b < e && (data[b] == ' ' || data[b] == '\t' || data[b] == '\n' || data[b] == '\r'))
        b++;
    while (e > b && (data[e - 1] == ' ' || data[e - 1] == '\t' || data[e - 1] == '\n' ||
                     data[e - 1] == '\r'))
        e--;
    if (e - b == 6 && memcmp(data + b, "[DONE]", 6) == 0) {
        c->done = true;
        return CZ_OK;
    }
    cJSON *j = cJSON_ParseWithLength(data + b, e - b);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cz_err_set(err, CZ_EINVAL, "chunk: expected a JSON object or [DONE], got '%.*s'",
                          (int)(e - b < 80 ? e - b : 80), data + b);
    }
    c->json_ = j;
    const cJSON *errobj = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *object = cJSON_GetObjectItemCaseSensitive(j, "object");
    if (errobj && !cJSON_IsNull(errobj)) {
        c->has_error = true;
        error_message(errobj, c->error, sizeof c->error);
        return CZ_OK;
    }
    if (cJSON_IsString(object) && strcmp(object->valuestring, "error") == 0) {
        c->has_error = true;
        error_message(j, c->error, sizeof c->error);
        return CZ_OK;
    }
    cz_status st = CZ_OK;
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    if (choices && !cJSON_IsNull(choices) && !cJSON_IsArray(choices))
        st = cz_err_set(err, CZ_EINVAL, "chunk: choices: expected an array");
    else if (cJSON_GetArraySize(choices) > 0) {
        c->has_choices = true;
        const cJSON *ch = cJSON_GetArrayItem(choices, 0);
        if (!cJSON_IsObject(ch))
            st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0]: expected an object");
        const cJSON *text = NULL;
        if (st == CZ_OK) {
            const cJSON *delta = cJSON_GetObjectItemCaseSensitive(ch, "delta");
            if (delta && !cJSON_IsNull(delta) && !cJSON_IsObject(delta))
                st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0].delta: expected an object");
            else
                text = delta ? cJSON_GetObjectItemCaseSensitive(delta, "content")
                             : cJSON_GetObjectItemCaseSensitive(ch, "text");
        }
        if (st == CZ_OK && text && !cJSON_IsNull(text)) {
            if (!cJSON_IsString(text))
                st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0]: %s: expected a string",
                                cJSON_GetObjectItemCaseSensitive(ch, "delta") ? "delta.content"
                                                                              : "text");
            else {
                c->text = text->valuestring;
                c->text_len = strlen(text->valuestring);
            }
        }
        const cJSON *ids = st == CZ_OK ? cJSON_GetObjectItemCaseSensitive(ch, "token_ids")
                                       : NULL;
        if (ids && !cJSON_IsNull(ids)) {
            if (!cJSON_IsArray(ids))
                st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0].token_ids: expected an array "
                                                "or null");
            int64_t k = 0;
            const cJSON *x = st == CZ_OK ? ids->child : NULL;
            for (; x; x = x->next) {
                double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
                if (!(v >= 0 && v < 4294967296.0 && v == (double)(uint64_t)v)) {
                    st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0].token_ids[%lld]: "
                                                    "expected a token id (an integer from 0)",
                                    (long long)k);
                    break;
                }
                k++;
            }
            if (st == CZ_OK)
                c->n_token_ids = k;
            c->token_ids_ = ids;
        }
        const cJSON *fr = st == CZ_OK ? cJSON_GetObjectItemCaseSensitive(ch, "finish_reason")
                                      : NULL;
        if (cJSON_IsString(fr))
            snprintf(c->finish_reason, sizeof c->finish_reason, "%s", fr->valuestring);
        else if (fr && !cJSON_IsNull(fr))
            st = cz_err_set(err, CZ_EINVAL, "chunk: choices[0].finish_reason: expected a "
                                            "string or null");
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (st == CZ_OK && usage && !cJSON_IsNull(usage)) {
        if (!cJSON_IsObject(usage))
            st = cz_err_set(err, CZ_EINVAL, "chunk: usage: expected an object");
        else if ((st = usage_count(usage, "completion_tokens", &c->completion_tokens, err)) ==
                 CZ_OK)
            st = usage_count(usage, "prompt_tokens", &c->prompt_tokens, err);
        /* vLLM reads usage only from a chunk without choices */
        c->has_usage = st == CZ_OK && !c->has_choices;
    }
    if (st != CZ_OK)
        cz_oai_chunk_free(c);
    return st;
}

void cz_oai_chunk_token_ids(const cz_oai_chunk *c, uint32_t *out)
{
    CZ_ASSERT(c->n_token_ids >= 0);
    size_t i = 0;
    for (const cJSON *x = c->n_token_ids > 0 ? ((const cJSON *)c->token_ids_)->child : NULL; x;
         x = x->next)
        out[i++] = (uint32_t)x->valuedouble;
    CZ_ASSERT(i == (size_t)c->n_token_ids);
}
