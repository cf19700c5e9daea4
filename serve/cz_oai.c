/* cz_oai.c - the OpenAI-compatible protocol of `cadenza serve`: request parsing and
 * vLLM-identical response bodies (see cz_oai.h and docs/serve-protocol.md). The byte layouts
 * written here follow vLLM main at commit 9aaf83ef5 (2026-05-19); each writer names the
 * vLLM model and serialization call it mirrors. */
#include "cz_oai.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "cz_json.h"

/* Integers in a request must lie within +-2^53, where a double (cJSON's number) holds
 * them exactly. */
#define EXACT_INT_MAX 9007199254740992.0

/* cJSON refuses nesting deeper than this (cJSON.h's CJSON_NESTING_LIMIT). */
#ifndef CJSON_NESTING_LIMIT
#define CJSON_NESTING_LIMIT 1000
#endif

/* ---- errors --------------------------------------------------------------------------- */

static void copy_cut(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void cz_oai_error_set(cz_oai_error *e, int status, const char *type, const char *param,
                      const char *fmt, ...)
{
    CZ_ASSERT(e != NULL);
    e->status = status;
    copy_cut(e->type, sizeof e->type, type);
    copy_cut(e->param, sizeof e->param, param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* Records a refused request in *e (may be NULL): "<param>: <detail>" (or the detail alone
 * for no param), HTTP `http`, type "BadRequestError" (vLLM's create_error_response for
 * request errors). Returns `st`. */
static cz_status fail(cz_oai_error *e, cz_status st, int http, const char *param,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static cz_status fail(cz_oai_error *e, cz_status st, int http, const char *param,
                      const char *fmt, ...)
{
    if (!e)
        return st;
    char detail[CZ_OAI_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (param && *param)
        cz_oai_error_set(e, http, "BadRequestError", param, "%s: %s", param, detail);
    else
        cz_oai_error_set(e, http, "BadRequestError", NULL, "%s", detail);
    return st;
}

/* A number as Python's repr would show it: integers without a point, others in the
 * shortest form that reads back the same. */
static void fmt_num(double d, char *out, size_t cap)
{
    if (isnan(d)) {
        snprintf(out, cap, "nan");
    } else if (isinf(d)) {
        snprintf(out, cap, d < 0 ? "-inf" : "inf");
    } else if (d == floor(d) && fabs(d) < 1e16) {
        snprintf(out, cap, "%.0f", d);
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(out, cap, "%.*g", prec, d);
            if (strtod(out, NULL) == d)
                break;
        }
    }
}

/* What a value is, for "got ...": its value for null, booleans and numbers, its kind
 * otherwise. */
static const char *describe(const cJSON *v, char *buf, size_t cap)
{
    if (!v || cJSON_IsNull(v))
        return "null";
    if (cJSON_IsTrue(v))
        return "true";
    if (cJSON_IsFalse(v))
        return "false";
    if (cJSON_IsNumber(v)) {
        fmt_num(v->valuedouble, buf, cap);
        return buf;
    }
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    return "an object";
}

static cz_status type_error(cz_oai_error *e, const char *path, const char *expected,
                            const cJSON *v)
{
    char buf[40];
    return fail(e, CZ_EINVAL, 400, path, "expected %s, got %s", expected,
                describe(v, buf, sizeof buf));
}

static bool is_null(const cJSON *v)
{
    return v == NULL || cJSON_IsNull(v);
}

/* ---- typed values ---------------------------------------------------------------------- */

/* An integer in [min, max] (both within +-2^53). */
static cz_status get_int(cz_oai_error *e, const char *path, const cJSON *v, int64_t min,
                         int64_t max, int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return type_error(e, path, "an integer", v);
    double d = v->valuedouble;
    char num[40];
    fmt_num(d, num, sizeof num);
    if (!isfinite(d) || d != floor(d))
        return fail(e, CZ_EINVAL, 400, path, "expected an integer, got %s", num);
    if (d < (double)min)
        return fail(e, CZ_EINVAL, 400, path, "must be at least %" PRId64 ", got %s", min, num);
    if (d > (double)max)
        return fail(e, CZ_EINVAL, 400, path, "must be at most %" PRId64 ", got %s", max, num);
    *out = (int64_t)d;
    return CZ_OK;
}

static cz_status get_bool(cz_oai_error *e, const char *path, const cJSON *v, bool *out)
{
    if (is_null(v))
        return CZ_OK;
    if (!cJSON_IsBool(v))
        return type_error(e, path, "a boolean", v);
    *out = cJSON_IsTrue(v);
    return CZ_OK;
}

/* A finite number; `lo_open` excludes lo from the range. */
static cz_status get_num(cz_oai_error *e, const char *path, const cJSON *v, double lo,
                         bool lo_open, double hi, double *out)
{
    if (!cJSON_IsNumber(v))
        return type_error(e, path, "a number", v);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || (lo_open && d == lo) || d > hi) {
        char num[40], a[40], b[40];
        fmt_num(d, num, sizeof num);
        fmt_num(lo, a, sizeof a);
        fmt_num(hi, b, sizeof b);
        return fail(e, CZ_EINVAL, 400, path, "must be in %c%s, %s], got %s", lo_open ? '(' : '[',
                    a, b, num);
    }
    *out = d;
    return CZ_OK;
}

static char *dup_len(const char *s, size_t n)
{
    char *p = cz_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static size_t count_children(const cJSON *v)
{
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        n++;
    return n;
}

/* ---- the body before cJSON ------------------------------------------------------------- */

/* The well-formed UTF-8 sequence at s[0..n) (n >= 1, s[0] >= 0x80): its length (2..4) with
 * its code point in *cp, or 0 with the length of the maximal ill-formed subpart in *skip
 * (Unicode 15, section 3.9, table 3-7: what Python's errors="replace" replaces by one
 * U+FFFD). */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp, size_t *skip)
{
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* up to U+10FFFF */
    } else {
        *skip = 1;
        return 0;
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= n || s[k] < lo || s[k] > hi) {
            *skip = k;
            return 0;
        }
        v = (v << 6) | (s[k] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = v;
    return need;
}

/* What cJSON lets through or reports without a place: invalid UTF-8, raw control
 * characters and \u0000 inside strings (Python's json refuses the first two; cJSON would cut
 * a string at the third), nesting past cJSON's limit. Offsets count from `base`. Also says
 * whether the text holds anything but whitespace. */
static cz_status prescan(const char *base, size_t off, size_t len, bool *blank,
                         cz_oai_error *e)
{
    const unsigned char *s = (const unsigned char *)base;
    bool in_str = false;
    size_t depth = 0;
    *blank = true;
    for (size_t i = off; i < len; i++) {
        unsigned c = s[i];
        if (!in_str) {
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
                continue;
            *blank = false;
            if (c == '"') {
                in_str = true;
            } else if (c == '[' || c == '{') {
                if (++depth > CJSON_NESTING_LIMIT)
                    return fail(e, CZ_EFORMAT, 400, NULL,
                                "request body nests deeper than %d levels at byte %zu",
                                CJSON_NESTING_LIMIT, i);
            } else if ((c == ']' || c == '}') && depth > 0) {
                depth--;
            }
            continue;
        }
        if (c == '"') {
            in_str = false;
        } else if (c == '\\') {
            if (i + 5 < len && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
                return fail(e, CZ_EFORMAT, 400, NULL,
                            "request body has the escape \\u0000 (a NUL character) in a "
                            "string at byte %zu: NUL characters are not supported",
                            i);
            i++; /* the escaped character */
        } else if (c < 0x20) {
            return fail(e, CZ_EFORMAT, 400, NULL,
                        "request body has an unescaped control character 0x%02x in a string "
                        "at byte %zu",
                        c, i);
        } else if (c >= 0x80) {
            uint32_t cp;
            size_t skip, n = utf8_seq(s + i, len - i, &cp, &skip);
            if (n == 0)
                return fail(e, CZ_EFORMAT, 400, NULL,
                            "request body is not valid UTF-8 at byte %zu", i);
            i += n - 1;
        }
    }
    return CZ_OK;
}

/* ---- fields ------------------------------------------------------------------------------ */

enum { EP_COMPL = 1, EP_CHAT = 2, EP_BOTH = 3 };

/* How a field the server does not implement is checked: which values are its neutral ones
 * (accepted and ignored), anything else refused with the entry's reason. */
typedef enum neutral {
    N_NONE,      /* handled by the parser itself */
    N_NULL,      /* only null */
    N_FALSE,     /* null or false */
    N_TRUE,      /* null or true */
    N_NUM,       /* null or the number `value` */
    N_INT,       /* null or the integer `value` (an integer field) */
    N_NUM_OFF,   /* null or false; a number is a request for the feature */
    N_EMPTY,     /* null, [] or {} */
    N_STR_NONE,  /* null or "none" */
    N_TEXT_FMT   /* null or {"type": "text"} */
} neutral;

typedef enum field_id {
    F_MODEL,
    F_PROMPT,
    F_MESSAGES,
    F_MAX_TOKENS,
    F_MAX_COMPLETION_TOKENS,
    F_MIN_TOKENS,
    F_IGNORE_EOS,
    F_RETURN_TOKEN_IDS,
    F_TEMPERATURE,
    F_TOP_P,
    F_TOP_K,
    F_SEED,
    F_STOP_TOKEN_IDS,
    F_STOP,
    F_STREAM,
    F_STREAM_OPTIONS,
    F_USER,
    F_FIRST_NEUTRAL /* the table's entries from here on are neutral-value checks */
} field_id;

typedef struct field {
    const char *name;
    unsigned endpoints;
    neutral rule;
    double value;       /* N_NUM's neutral value */
    const char *reason; /* why another value is refused */
} field;

/* The fields read, in the order they are checked. The endpoints column follows vLLM's
 * CompletionRequest and ChatCompletionRequest: a field one of them lacks is unknown there,
 * and unknown fields are ignored (OpenAIBaseModel: extra="allow"). */
static const field fields[] = {
    [F_MODEL] = {"model", EP_BOTH, N_NONE, 0, NULL},
    [F_PROMPT] = {"prompt", EP_COMPL, N_NONE, 0, NULL},
    [F_MESSAGES] = {"messages", EP_CHAT, N_NONE, 0, NULL},
    [F_MAX_TOKENS] = {"max_tokens", EP_BOTH, N_NONE, 0, NULL},
    [F_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", EP_CHAT, N_NONE, 0, NULL},
    [F_MIN_TOKENS] = {"min_tokens", EP_BOTH, N_NONE, 0, NULL},
    [F_IGNORE_EOS] = {"ignore_eos", EP_BOTH, N_NONE, 0, NULL},
    [F_RETURN_TOKEN_IDS] = {"return_token_ids", EP_BOTH, N_NONE, 0, NULL},
    [F_TEMPERATURE] = {"temperature", EP_BOTH, N_NONE, 0, NULL},
    [F_TOP_P] = {"top_p", EP_BOTH, N_NONE, 0, NULL},
    [F_TOP_K] = {"top_k", EP_BOTH, N_NONE, 0, NULL},
    [F_SEED] = {"seed", EP_BOTH, N_NONE, 0, NULL},
    [F_STOP_TOKEN_IDS] = {"stop_token_ids", EP_BOTH, N_NONE, 0, NULL},
    [F_STOP] = {"stop", EP_BOTH, N_NONE, 0, NULL},
    [F_STREAM] = {"stream", EP_BOTH, N_NONE, 0, NULL},
    [F_STREAM_OPTIONS] = {"stream_options", EP_BOTH, N_NONE, 0, NULL},
    [F_USER] = {"user", EP_BOTH, N_NONE, 0, NULL},
    {"n", EP_BOTH, N_INT, 1, "only n = 1 is supported"},
    {"best_of", EP_BOTH, N_INT, 1, "only best_of = 1 is supported"},
    {"echo", EP_BOTH, N_FALSE, 0, "echoing the prompt is not supported"},
    {"logprobs", EP_COMPL, N_NUM_OFF, 0, "log probabilities are not supported"},
    {"logprobs", EP_CHAT, N_FALSE, 0, "log probabilities are not supported"},
    {"top_logprobs", EP_CHAT, N_INT, 0, "log probabilities are not supported"},
    {"prompt_logprobs", EP_BOTH, N_NUM_OFF, 0, "prompt log probabilities are not supported"},
    {"frequency_penalty", EP_BOTH, N_NUM, 0, "only 0 (no penalty) is supported"},
    {"presence_penalty", EP_BOTH, N_NUM, 0, "only 0 (no penalty) is supported"},
    {"repetition_penalty", EP_BOTH, N_NUM, 1, "only 1 (no penalty) is supported"},
    {"min_p", EP_BOTH, N_NUM, 0, "only 0 (no min-p filtering) is supported"},
    {"use_beam_search", EP_BOTH, N_FALSE, 0, "beam search is not supported"},
    {"tools", EP_BOTH, N_NULL, 0, "tool calling is not supported"},
    {"tool_choice", EP_BOTH, N_STR_NONE, 0, "tool calling is not supported"},
    {"functions", EP_BOTH, N_NULL, 0, "function calling is not supported"},
    {"function_call", EP_BOTH, N_STR_NONE, 0, "function calling is not supported"},
    {"response_format", EP_BOTH, N_TEXT_FMT, 0, "structured output is not supported"},
    {"structured_outputs", EP_BOTH, N_NULL, 0, "structured output is not supported"},
    {"logit_bias", EP_BOTH, N_EMPTY, 0, "logit bias is not supported"},
    {"allowed_token_ids", EP_BOTH, N_NULL, 0, "restricting the vocabulary is not supported"},
    {"bad_words", EP_BOTH, N_EMPTY, 0, "bad words are not supported"},
    {"suffix", EP_COMPL, N_NULL, 0, "suffixes (fill-in-the-middle) are not supported"},
    {"prompt_embeds", EP_COMPL, N_NULL, 0, "prompt embeddings are not supported"},
    {"include_stop_str_in_output", EP_BOTH, N_FALSE, 0,
     "keeping the stop string in the output is not supported"},
    {"skip_special_tokens", EP_BOTH, N_TRUE, 0, "special tokens are always skipped"},
    {"add_special_tokens", EP_COMPL, N_TRUE, 0,
     "prompts are always tokenized with the model's special tokens"},
    {"add_special_tokens", EP_CHAT, N_FALSE, 0,
     "the chat template adds the special tokens; adding more is not supported"},
    {"truncate_prompt_tokens", EP_BOTH, N_NULL, 0, "prompt truncation is not supported"},
    {"return_tokens_as_token_ids", EP_BOTH, N_FALSE, 0, "returning token ids is not supported"},
    {"kv_transfer_params", EP_BOTH, N_NULL, 0, "KV transfer is not supported"},
    {"thinking_token_budget", EP_BOTH, N_NULL, 0, "thinking budgets are not supported"},
    {"repetition_detection", EP_BOTH, N_NULL, 0, "repetition detection is not supported"},
    {"logprob_token_ids", EP_COMPL, N_NULL, 0, "log probabilities are not supported"},
    {"priority", EP_BOTH, N_INT, 0, "only priority 0 is supported"},
    {"continue_final_message", EP_CHAT, N_FALSE, 0,
     "continuing the final message is not supported"},
    {"add_generation_prompt", EP_CHAT, N_TRUE, 0,
     "the generation prompt is always added"},
    {"chat_template", EP_CHAT, N_NULL, 0, "only the model's own chat template is supported"},
    {"chat_template_kwargs", EP_CHAT, N_EMPTY, 0, "chat template arguments are not supported"},
    {"documents", EP_CHAT, N_NULL, 0, "documents for the chat template are not supported"},
    {"return_prompt_text", EP_CHAT, N_FALSE, 0, "returning the prompt text is not supported"},
};

#define N_FIELDS CZ_ARRAY_LEN(fields)

/* The neutral-value check of fields[i] on v (present). */
static cz_status check_neutral(const field *f, const cJSON *v, cz_oai_error *e)
{
    char buf[40];
    const char *got = describe(v, buf, sizeof buf);
    if (is_null(v))
        return CZ_OK;
    switch (f->rule) {
    case N_NULL:
        return fail(e, CZ_EINVAL, 400, f->name, "%s", f->reason);
    case N_FALSE:
    case N_TRUE:
        if (!cJSON_IsBool(v))
            return type_error(e, f->name, "a boolean", v);
        if (cJSON_IsTrue(v) == (f->rule == N_TRUE))
            return CZ_OK;
        return fail(e, CZ_EINVAL, 400, f->name, "%s, got %s", f->reason, got);
    case N_NUM:
    case N_INT:
        if (!cJSON_IsNumber(v))
            return type_error(e, f->name, f->rule == N_INT ? "an integer" : "a number", v);
        if (v->valuedouble == f->value)
            return CZ_OK;
        return fail(e, CZ_EINVAL, 400, f->name, "%s, got %s", f->reason, got);
    case N_NUM_OFF:
        if (cJSON_IsFalse(v))
            return CZ_OK;
        if (!cJSON_IsNumber(v) && !cJSON_IsTrue(v))
            return type_error(e, f->name, "an integer", v);
        return fail(e, CZ_EINVAL, 400, f->name, "%s, got %s", f->reason, got);
    case N_EMPTY:
        if ((cJSON_IsArray(v) || cJSON_IsObject(v)) && v->child == NULL)
            return CZ_OK;
        return fail(e, CZ_EINVAL, 400, f->name, "%s", f->reason);
    case N_STR_NONE:
        if (cJSON_IsString(v) && strcmp(v->valuestring, "none") == 0)
            return CZ_OK;
        return fail(e, CZ_EINVAL, 400, f->name, "%s", f->reason);
    case N_TEXT_FMT: {
        const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "type") : NULL;
        if (cJSON_IsString(t) && strcmp(t->valuestring, "text") == 0)
            return CZ_OK;
        return fail(e, CZ_EINVAL, 400, f->name, "%s (only {\"type\": \"text\"})", f->reason);
    }
    case N_NONE:
        break;
    }
    CZ_ASSERT(!"a field handled by the parser reached check_neutral");
    return CZ_EINTERNAL;
}

/* ---- prompts ----------------------------------------------------------------------------- */

static cz_oai_prompt *add_prompt(cz_oai_request *r, size_t *cap)
{
    cz_grow((void **)&r->prompts, cap, r->n_prompts + 1, sizeof *r->prompts);
    cz_oai_prompt *p = &r->prompts[r->n_prompts++];
    memset(p, 0, sizeof *p);
    return p;
}

/* The token ids of array `arr` (named `path`) as one prompt; *total counts ids over all
 * prompts against the bound. */
static cz_status read_ids(const cJSON *arr, const char *path, cz_oai_prompt *p, size_t *total,
                          cz_oai_error *e)
{
    size_t n = count_children(arr);
    if (n == 0)
        return fail(e, CZ_EINVAL, 400, path, "empty token id list");
    if (n > CZ_OAI_MAX_PROMPT_TOKEN_IDS - *total)
        return fail(e, CZ_ERANGE, 400, path,
                    "the request's prompts hold more than %u token ids, the most supported",
                    CZ_OAI_MAX_PROMPT_TOKEN_IDS);
    p->ids = cz_xmalloc(n * sizeof *p->ids);
    size_t i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        char ipath[CZ_OAI_PARAM_MAX];
        int64_t id = 0;
        snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
        if (!cJSON_IsNumber(c))
            return type_error(e, ipath, "a token id (an integer)", c);
        cz_status st = get_int(e, ipath, c, 0, INT32_MAX, &id);
        if (st != CZ_OK)
            return st;
        p->ids[p->n_ids++] = (int32_t)id;
    }
    *total += n;
    return CZ_OK;
}

/* "prompt": a string, an array of token ids, an array of strings or an array of arrays of
 * token ids (vLLM's CompletionRequest.prompt), each prompt non-empty. */
static cz_status parse_prompt(const cJSON *v, cz_oai_request *r, cz_oai_error *e)
{
    size_t cap = 0, total = 0;
    if (is_null(v))
        return fail(e, CZ_EINVAL, 400, "prompt",
                    "missing: expected a string, an array of token ids, an array of strings "
                    "or an array of arrays of token ids");
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        if (n == 0)
            return fail(e, CZ_EINVAL, 400, "prompt", "empty prompt");
        cz_oai_prompt *p = add_prompt(r, &cap);
        p->text = dup_len(v->valuestring, n);
        p->text_len = n;
        return CZ_OK;
    }
    if (!cJSON_IsArray(v))
        return type_error(e, "prompt", "a string or an array", v);
    const cJSON *first = v->child;
    if (!first)
        return fail(e, CZ_EINVAL, 400, "prompt", "empty array: expected at least one prompt");
    if (cJSON_IsNumber(first))
        return read_ids(v, "prompt", add_prompt(r, &cap), &total, e);
    if (!cJSON_IsString(first) && !cJSON_IsArray(first))
        return type_error(e, "prompt[0]", "a string, a token id or an array of token ids",
                          first);
    size_t n = count_children(v);
    if (n > CZ_OAI_MAX_PROMPTS)
        return fail(e, CZ_ERANGE, 400, "prompt",
                    "%zu prompts in one request, more than the %d supported", n,
                    CZ_OAI_MAX_PROMPTS);
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char path[40];
        snprintf(path, sizeof path, "prompt[%zu]", i);
        if (cJSON_IsString(first)) {
            if (!cJSON_IsString(c))
                return type_error(e, path, "a string (as prompt[0])", c);
            size_t len = strlen(c->valuestring);
            if (len == 0)
                return fail(e, CZ_EINVAL, 400, path, "empty prompt");
            cz_oai_prompt *p = add_prompt(r, &cap);
            p->text = dup_len(c->valuestring, len);
            p->text_len = len;
        } else {
            if (!cJSON_IsArray(c))
                return type_error(e, path, "an array of token ids (as prompt[0])", c);
            cz_status st = read_ids(c, path, add_prompt(r, &cap), &total, e);
            if (st != CZ_OK)
                return st;
        }
    }
    return CZ_OK;
}

/* ---- messages ---------------------------------------------------------------------------- */

/* The text of content part `part` (named `path`): a string, or an object of type "text"
 * (vLLM's synonyms "input_text" and "output_text" too) with a string "text". */
static cz_status part_text(const cJSON *part, const char *path, const char **text,
                           cz_oai_error *e)
{
    if (cJSON_IsString(part)) {
        *text = part->valuestring;
        return CZ_OK;
    }
    if (!cJSON_IsObject(part))
        return type_error(e, path, "a content part (an object or a string)", part);
    char sub[CZ_OAI_PARAM_MAX];
    const cJSON *type = NULL, *t = NULL;
    for (const cJSON *c = part->child; c; c = c->next) {
        if (strcmp(c->string, "type") == 0)
            type = c;
        else if (strcmp(c->string, "text") == 0)
            t = c;
    }
    snprintf(sub, sizeof sub, "%s.type", path);
    if (is_null(type))
        return fail(e, CZ_EINVAL, 400, sub, "missing: expected \"text\"");
    if (!cJSON_IsString(type))
        return type_error(e, sub, "a string", type);
    if (strcmp(type->valuestring, "text") != 0 && strcmp(type->valuestring, "input_text") != 0 &&
        strcmp(type->valuestring, "output_text") != 0) {
        char shown[48];
        snprintf(shown, sizeof shown, "%s", type->valuestring);
        return fail(e, CZ_EINVAL, 400, sub, "only text content parts are supported, got '%s'",
                    shown);
    }
    snprintf(sub, sizeof sub, "%s.text", path);
    if (!cJSON_IsString(t))
        return is_null(t) ? fail(e, CZ_EINVAL, 400, sub, "missing: expected a string")
                          : type_error(e, sub, "a string", t);
    *text = t->valuestring;
    return CZ_OK;
}

/* Message `msg` (named `path`) into *m. */
static cz_status parse_message(const cJSON *msg, const char *path, cz_oai_message *m,
                               cz_oai_error *e)
{
    char sub[64];
    if (!cJSON_IsObject(msg))
        return type_error(e, path, "a message (an object)", msg);
    const cJSON *role = NULL, *content = NULL, *tool_calls = NULL, *function_call = NULL;
    for (const cJSON *c = msg->child; c; c = c->next) { /* the last of a repeated key counts */
        if (strcmp(c->string, "role") == 0)
            role = c;
        else if (strcmp(c->string, "content") == 0)
            content = c;
        else if (strcmp(c->string, "tool_calls") == 0)
            tool_calls = c;
        else if (strcmp(c->string, "function_call") == 0)
            function_call = c;
    }
    snprintf(sub, sizeof sub, "%s.role", path);
    if (is_null(role))
        return fail(e, CZ_EINVAL, 400, sub, "missing: expected system, developer, user or "
                                            "assistant");
    if (!cJSON_IsString(role))
        return type_error(e, sub, "a string", role);
    const char *rs = role->valuestring;
    if (strcmp(rs, "system") == 0 || strcmp(rs, "developer") == 0) {
        m->role = CZ_OAI_ROLE_SYSTEM;
    } else if (strcmp(rs, "user") == 0) {
        m->role = CZ_OAI_ROLE_USER;
    } else if (strcmp(rs, "assistant") == 0) {
        m->role = CZ_OAI_ROLE_ASSISTANT;
    } else if (strcmp(rs, "tool") == 0 || strcmp(rs, "function") == 0) {
        return fail(e, CZ_EINVAL, 400, sub, "%s messages are not supported (no tool calling)",
                    rs);
    } else {
        char shown[48];
        snprintf(shown, sizeof shown, "%s", rs);
        return fail(e, CZ_EINVAL, 400, sub,
                    "unknown role '%s': expected system, developer, user or assistant", shown);
    }
    snprintf(sub, sizeof sub, "%s.tool_calls", path);
    if (!is_null(tool_calls) && !(cJSON_IsArray(tool_calls) && tool_calls->child == NULL))
        return fail(e, CZ_EINVAL, 400, sub, "tool calls are not supported");
    snprintf(sub, sizeof sub, "%s.function_call", path);
    if (!is_null(function_call))
        return fail(e, CZ_EINVAL, 400, sub, "function calls are not supported");

    snprintf(sub, sizeof sub, "%s.content", path);
    if (is_null(content)) { /* vLLM reads a missing or null content as no parts: "" */
        m->content = dup_len("", 0);
        return CZ_OK;
    }
    if (cJSON_IsString(content)) {
        m->content_len = strlen(content->valuestring);
        m->content = dup_len(content->valuestring, m->content_len);
        return CZ_OK;
    }
    if (!cJSON_IsArray(content))
        return type_error(e, sub, "a string or an array of content parts", content);
    /* two passes: check and measure, then join with "\n" */
    size_t total = 0, parts = 0, i = 0;
    for (const cJSON *c = content->child; c; c = c->next, i++) {
        char ppath[96];
        const char *t;
        snprintf(ppath, sizeof ppath, "%s[%zu]", sub, i);
        cz_status st = part_text(c, ppath, &t, e);
        if (st != CZ_OK)
            return st;
        total += strlen(t) + (parts++ ? 1 : 0);
    }
    m->content = cz_xmalloc(total + 1);
    size_t at = 0;
    for (const cJSON *c = content->child; c; c = c->next) {
        const char *t = NULL;
        part_text(c, "", &t, NULL);
        size_t n = strlen(t);
        if (at)
            m->content[at++] = '\n';
        memcpy(m->content + at, t, n);
        at += n;
    }
    m->content[at] = '\0';
    m->content_len = at;
    return CZ_OK;
}

static cz_status parse_messages(const cJSON *v, cz_oai_request *r, cz_oai_error *e)
{
    if (is_null(v))
        return fail(e, CZ_EINVAL, 400, "messages", "missing: expected a non-empty array of "
                                                   "messages");
    if (!cJSON_IsArray(v))
        return type_error(e, "messages", "an array of messages", v);
    size_t n = count_children(v);
    if (n == 0)
        return fail(e, CZ_EINVAL, 400, "messages", "empty array: expected at least one message");
    if (n > CZ_OAI_MAX_MESSAGES)
        return fail(e, CZ_ERANGE, 400, "messages",
                    "%zu messages in one request, more than the %d supported", n,
                    CZ_OAI_MAX_MESSAGES);
    r->messages = cz_xcalloc(n, sizeof *r->messages);
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char path[40];
        snprintf(path, sizeof path, "messages[%zu]", i);
        r->n_messages = i + 1; /* so a failure frees what this message holds */
        cz_status st = parse_message(c, path, &r->messages[i], e);
        if (st != CZ_OK)
            return st;
    }
    return CZ_OK;
}

/* ---- the other handled fields ----------------------------------------------------------- */

static cz_status parse_stop(const cJSON *v, cz_oai_request *r, cz_oai_error *e)
{
    if (is_null(v))
        return CZ_OK;
    if (cJSON_IsString(v)) {
        if (v->valuestring[0] == '\0')
            return fail(e, CZ_EINVAL, 400, "stop", "empty stop string");
        r->stop[r->n_stop++] = cz_xstrdup(v->valuestring);
        return CZ_OK;
    }
    if (!cJSON_IsArray(v))
        return type_error(e, "stop", "a string or an array of strings", v);
    size_t n = count_children(v), i = 0;
    if (n > CZ_OAI_MAX_STOP)
        return fail(e, CZ_EINVAL, 400, "stop", "at most %d stop strings are supported, got %zu",
                    CZ_OAI_MAX_STOP, n);
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char path[32];
        snprintf(path, sizeof path, "stop[%zu]", i);
        if (!cJSON_IsString(c))
            return type_error(e, path, "a string", c);
        if (c->valuestring[0] == '\0')
            return fail(e, CZ_EINVAL, 400, path, "empty stop string");
        r->stop[r->n_stop++] = cz_xstrdup(c->valuestring);
    }
    return CZ_OK;
}

static cz_status parse_stop_token_ids(const cJSON *v, cz_oai_request *r, cz_oai_error *e)
{
    if (is_null(v))
        return CZ_OK;
    if (!cJSON_IsArray(v))
        return type_error(e, "stop_token_ids", "an array of token ids", v);
    size_t n = count_children(v), i = 0;
    if (n > CZ_OAI_MAX_STOP_TOKEN_IDS)
        return fail(e, CZ_ERANGE, 400, "stop_token_ids",
                    "%zu stop token ids, more than the %d supported", n,
                    CZ_OAI_MAX_STOP_TOKEN_IDS);
    if (n)
        r->stop_token_ids = cz_xmalloc(n * sizeof *r->stop_token_ids);
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char path[40];
        int64_t id = 0;
        snprintf(path, sizeof path, "stop_token_ids[%zu]", i);
        cz_status st = get_int(e, path, c, 0, INT32_MAX, &id);
        if (st != CZ_OK)
            return st;
        r->stop_token_ids[r->n_stop_token_ids++] = (int32_t)id;
    }
    return CZ_OK;
}

/* stream_options (vLLM's StreamOptions: include_usage and continuous_usage_stats, both
 * default false at the matched commit); other keys ignored. Read after "stream". */
static cz_status parse_stream_options(const cJSON *v, cz_oai_request *r, cz_oai_error *e)
{
    if (is_null(v))
        return CZ_OK;
    if (!cJSON_IsObject(v))
        return type_error(e, "stream_options", "an object", v);
    /* vLLM: `if data.get("stream_options") and not data.get("stream")`: an empty object
     * passes */
    if (v->child && !r->stream)
        return fail(e, CZ_EINVAL, 400, "stream_options",
                    "stream options can only be given when stream is true");
    const cJSON *inc = NULL, *cont = NULL;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (strcmp(c->string, "include_usage") == 0)
            inc = c;
        else if (strcmp(c->string, "continuous_usage_stats") == 0)
            cont = c;
    }
    bool include = false, continuous = false;
    cz_status st = get_bool(e, "stream_options.include_usage", inc, &include);
    if (st == CZ_OK)
        st = get_bool(e, "stream_options.continuous_usage_stats", cont, &continuous);
    if (st != CZ_OK)
        return st;
    r->include_usage = include;
    r->continuous_usage = include && continuous; /* vLLM's should_include_usage */
    return CZ_OK;
}

static cz_status get_opt_str(const cJSON *v, const char *name, char **out, cz_oai_error *e)
{
    if (is_null(v))
        return CZ_OK;
    if (!cJSON_IsString(v))
        return type_error(e, name, "a string", v);
    *out = cz_xstrdup(v->valuestring);
    return CZ_OK;
}

/* The fields of the root object, each by its slot (NULL when absent). */
static cz_status read_fields(cz_oai_endpoint ep, const cJSON **slot, cz_oai_request *r,
                             cz_oai_error *e)
{
    cz_status st;
    int64_t i64 = 0;
    const int64_t max_len = (int64_t)EXACT_INT_MAX;

    st = get_opt_str(slot[F_MODEL], "model", &r->model, e);
    if (st == CZ_OK)
        st = ep == CZ_OAI_COMPLETIONS ? parse_prompt(slot[F_PROMPT], r, e)
                                      : parse_messages(slot[F_MESSAGES], r, e);
    if (st != CZ_OK)
        return st;

    /* output length: vLLM's CompletionRequest.max_tokens defaults to 16 (null too:
     * normalize_null_max_tokens); ChatCompletionRequest prefers max_completion_tokens */
    r->max_tokens = ep == CZ_OAI_COMPLETIONS ? 16 : 0;
    const char *max_name = "max_tokens";
    if (!is_null(slot[F_MAX_TOKENS])) {
        if ((st = get_int(e, "max_tokens", slot[F_MAX_TOKENS], 1, max_len, &i64)) != CZ_OK)
            return st;
        r->max_tokens = i64;
    }
    if (ep == CZ_OAI_CHAT && !is_null(slot[F_MAX_COMPLETION_TOKENS])) {
        st = get_int(e, "max_completion_tokens", slot[F_MAX_COMPLETION_TOKENS], 1, max_len, &i64);
        if (st != CZ_OK)
            return st;
        r->max_tokens = i64;
        max_name = "max_completion_tokens";
    }
    if (!is_null(slot[F_MIN_TOKENS])) {
        if ((st = get_int(e, "min_tokens", slot[F_MIN_TOKENS], 0, max_len, &i64)) != CZ_OK)
            return st;
        if (r->max_tokens > 0 && i64 > r->max_tokens)
            return fail(e, CZ_EINVAL, 400, "min_tokens",
                        "must be at most %s (%" PRId64 "), got %" PRId64, max_name,
                        r->max_tokens, i64);
        r->min_tokens = i64;
    }
    if ((st = get_bool(e, "ignore_eos", slot[F_IGNORE_EOS], &r->ignore_eos)) != CZ_OK)
        return st;
    if ((st = get_bool(e, "return_token_ids", slot[F_RETURN_TOKEN_IDS], &r->return_token_ids)) !=
        CZ_OK)
        return st;

    /* sampling: OpenAI's temperature range; vLLM's SamplingParams checks for the others */
    if (!is_null(slot[F_TEMPERATURE])) {
        st = get_num(e, "temperature", slot[F_TEMPERATURE], 0, false, 2, &r->temperature);
        if (st != CZ_OK)
            return st;
        r->has_temperature = true;
    }
    if (!is_null(slot[F_TOP_P])) {
        if ((st = get_num(e, "top_p", slot[F_TOP_P], 0, true, 1, &r->top_p)) != CZ_OK)
            return st;
        r->has_top_p = true;
    }
    if (!is_null(slot[F_TOP_K])) {
        /* vLLM: "top_k must be 0 (disable), or at least 1", and -1 disables too */
        if ((st = get_int(e, "top_k", slot[F_TOP_K], -1, INT32_MAX, &i64)) != CZ_OK)
            return st;
        r->top_k = i64 < 0 ? 0 : (int32_t)i64;
        r->has_top_k = true;
    }
    if (!is_null(slot[F_SEED])) {
        if ((st = get_int(e, "seed", slot[F_SEED], -max_len, max_len, &r->seed)) != CZ_OK)
            return st;
        r->has_seed = true;
    }
    if ((st = parse_stop_token_ids(slot[F_STOP_TOKEN_IDS], r, e)) != CZ_OK ||
        (st = parse_stop(slot[F_STOP], r, e)) != CZ_OK ||
        (st = get_bool(e, "stream", slot[F_STREAM], &r->stream)) != CZ_OK ||
        (st = parse_stream_options(slot[F_STREAM_OPTIONS], r, e)) != CZ_OK ||
        (st = get_opt_str(slot[F_USER], "user", &r->user, e)) != CZ_OK)
        return st;

    for (size_t i = F_FIRST_NEUTRAL; i < N_FIELDS; i++)
        if (slot[i] && (fields[i].endpoints & (ep == CZ_OAI_CHAT ? EP_CHAT : EP_COMPL)))
            if ((st = check_neutral(&fields[i], slot[i], e)) != CZ_OK)
                return st;
    return CZ_OK;
}

static void request_init(cz_oai_request *r, cz_oai_endpoint ep)
{
    memset(r, 0, sizeof *r);
    r->endpoint = ep;
    r->temperature = 1.0;
    r->top_p = 1.0;
}

/* The JSON object a body holds (at most `max` bytes, else 413), or a 400 naming what is
 * wrong with it: empty, nested too deep, not JSON, data after the value, not an object. */
static cz_status parse_root(const char *body, size_t len, size_t max, cJSON **out,
                            cz_oai_error *e)
{
    *out = NULL;
    if (len > max) {
        cz_status st = fail(e, CZ_ERANGE, 413, NULL,
                            "request body of %zu bytes is larger than the %zu bytes supported",
                            len, max);
        if (e)
            copy_cut(e->type, sizeof e->type, "Request Entity Too Large");
        return st;
    }
    size_t off = len ? cz_text_bom(body, len) : 0; /* Python's json.loads(bytes) skips it */
    bool blank;
    cz_status st = prescan(body, off, len, &blank, e);
    if (st != CZ_OK)
        return st;
    if (blank)
        return fail(e, CZ_EFORMAT, 400, NULL, "request body is empty: expected a JSON object");

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body + off, len - off, &end, false);
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : off;
        return fail(e, CZ_EFORMAT, 400, NULL,
                    "request body is not valid JSON: parsing failed at byte %zu", at);
    }
    size_t at = (size_t)(end - body);
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\n' ||
                        body[at] == '\r'))
        at++;
    if (at < len) {
        cJSON_Delete(root);
        return fail(e, CZ_EFORMAT, 400, NULL,
                    "request body is not valid JSON: unexpected data after the value at "
                    "byte %zu",
                    at);
    }
    if (!cJSON_IsObject(root)) {
        char buf[40];
        st = fail(e, CZ_EFORMAT, 400, NULL, "request body must be a JSON object, got %s",
                  describe(root, buf, sizeof buf));
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return CZ_OK;
}

cz_status cz_oai_parse(cz_oai_endpoint ep, const char *body, size_t len, cz_oai_request *out,
                       cz_oai_error *e)
{
    CZ_ASSERT(out != NULL && (body != NULL || len == 0));
    CZ_ASSERT(ep == CZ_OAI_COMPLETIONS || ep == CZ_OAI_CHAT);
    request_init(out, ep);
    cJSON *root;
    cz_status st = parse_root(body, len, CZ_OAI_MAX_BODY_BYTES, &root, e);
    if (st != CZ_OK)
        return st;

    /* each known field's last occurrence; guided decoding (vLLM's guided_*) refused */
    const cJSON *slot[N_FIELDS];
    memset(slot, 0, sizeof slot);
    unsigned mask = ep == CZ_OAI_CHAT ? EP_CHAT : EP_COMPL;
    for (const cJSON *c = root->child; c && st == CZ_OK; c = c->next) {
        if (strncmp(c->string, "guided_", 7) == 0 && !is_null(c)) {
            char name[64];
            snprintf(name, sizeof name, "%s", c->string);
            st = fail(e, CZ_EINVAL, 400, name, "guided decoding is not supported");
            break;
        }
        for (size_t i = 0; i < N_FIELDS; i++)
            if ((fields[i].endpoints & mask) && strcmp(c->string, fields[i].name) == 0) {
                slot[i] = c;
                break;
            }
    }
    if (st == CZ_OK)
        st = read_fields(ep, slot, out, e);
    cJSON_Delete(root);
    if (st != CZ_OK)
        cz_oai_request_free(out);
    return st;
}

void cz_oai_request_free(cz_oai_request *r)
{
    if (!r)
        return;
    cz_oai_endpoint ep = r->endpoint;
    free(r->model);
    for (size_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (size_t i = 0; i < r->n_messages; i++)
        free(r->messages[i].content);
    free(r->messages);
    free(r->stop_token_ids);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->user);
    memset(r, 0, sizeof *r);
    r->endpoint = ep;
}

const char *cz_oai_role_name(cz_oai_role role)
{
    switch (role) {
    case CZ_OAI_ROLE_SYSTEM: return "system";
    case CZ_OAI_ROLE_USER: return "user";
    case CZ_OAI_ROLE_ASSISTANT: return "assistant";
    }
    CZ_ASSERT(!"unknown cz_oai_role");
    return "";
}

/* ---- headers ----------------------------------------------------------------------------- */

const char *cz_oai_session_id(const char *x_session_id, const cz_oai_request *req)
{
    if (x_session_id && *x_session_id)
        return x_session_id;
    if (req && req->user && *req->user)
        return req->user;
    return NULL;
}

bool cz_oai_auth_ok(const char *authorization, const char *api_key)
{
    if (!api_key || !*api_key)
        return true;
    if (!authorization)
        return false;
    /* vLLM: scheme, _, param = value.partition(" "); scheme.lower() == "bearer" */
    const char *sp = strchr(authorization, ' ');
    if (!sp || sp - authorization != 6 || strncasecmp(authorization, "bearer", 6) != 0)
        return false;
    const unsigned char *tok = (const unsigned char *)sp + 1;
    const unsigned char *key = (const unsigned char *)api_key;
    size_t nk = strlen(api_key), nt = strlen((const char *)tok);
    /* every byte of the key is compared whatever the token, so the time depends on the
     * key's length only; a token shorter than the key is compared against NULs, which no
     * key byte equals */
    unsigned diff = nk != nt;
    for (size_t i = 0; i < nk; i++)
        diff |= key[i] ^ (i < nt ? tok[i] : 0u);
    return diff == 0;
}

/* ---- the buffer -------------------------------------------------------------------------- */

void cz_oai_buf_reserve(cz_oai_buf *b, size_t extra)
{
    CZ_ASSERT(b != NULL && extra < SIZE_MAX - b->n - 1);
    size_t need = b->n + extra + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        b->p = cz_xrealloc(b->p, cap, 1);
        b->cap = cap;
    }
}

void cz_oai_buf_clear(cz_oai_buf *b)
{
    b->n = 0;
    if (b->cap) /* memory is held exactly when cap > 0 */
        b->p[0] = '\0';
}

void cz_oai_buf_free(cz_oai_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static inline void put(cz_oai_buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap)
        cz_oai_buf_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

#define PUTS(b, lit) put((b), (lit), sizeof(lit) - 1)

static void put_i64(cz_oai_buf *b, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    put(b, tmp, (size_t)n);
}

static const char hex_digits[] = "0123456789abcdef";

static void put_u16_escape(cz_oai_buf *b, uint32_t u)
{
    char t[6] = {'\\', 'u', hex_digits[(u >> 12) & 15], hex_digits[(u >> 8) & 15],
                 hex_digits[(u >> 4) & 15], hex_digits[u & 15]};
    put(b, t, 6);
}

/* s[0..len) as a JSON string; `ascii` escapes everything past 0x7e as Python's json.dumps
 * with ensure_ascii=True (DEL as \u007f, others as \uXXXX, surrogate pairs past U+FFFF). */
static void put_json_str(cz_oai_buf *b, const char *str, size_t len, bool ascii)
{
    const unsigned char *s = (const unsigned char *)str;
    cz_oai_buf_reserve(b, len + 2);
    PUTS(b, "\"");
    size_t run = 0; /* start of the bytes not yet written */
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            i++;
            continue;
        }
        uint32_t cp = 0;
        size_t n = 1, skip = 1;
        bool bad = false;
        if (c >= 0x80) {
            n = utf8_seq(s + i, len - i, &cp, &skip);
            bad = n == 0;
            if (bad) {
                cp = 0xFFFD;
                n = skip;
            } else if (!ascii) { /* well-formed UTF-8 stays as it is */
                i += n;
                continue;
            }
        } else if (c == 0x7f && !ascii) {
            i++;
            continue;
        }
        put(b, (const char *)s + run, i - run);
        if (c < 0x80) {
            switch (c) {
            case '"': PUTS(b, "\\\""); break;
            case '\\': PUTS(b, "\\\\"); break;
            case '\b': PUTS(b, "\\b"); break;
            case '\t': PUTS(b, "\\t"); break;
            case '\n': PUTS(b, "\\n"); break;
            case '\f': PUTS(b, "\\f"); break;
            case '\r': PUTS(b, "\\r"); break;
            default: put_u16_escape(b, c); break; /* other controls, DEL in ASCII mode */
            }
        } else if (!ascii) {
            PUTS(b, "\xEF\xBF\xBD"); /* bad: U+FFFD */
        } else if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            put_u16_escape(b, 0xD800 + (v >> 10));
            put_u16_escape(b, 0xDC00 + (v & 0x3FF));
        } else {
            put_u16_escape(b, cp);
        }
        i += n;
        run = i;
    }
    put(b, (const char *)s + run, len - run);
    PUTS(b, "\"");
}

void cz_oai_buf_json_str(cz_oai_buf *b, const char *s, size_t len)
{
    CZ_ASSERT(b != NULL && (s != NULL || len == 0));
    put_json_str(b, s ? s : "", len, false);
}

static void put_cstr(cz_oai_buf *b, const char *s)
{
    put_json_str(b, s, strlen(s), false);
}

static void put_opt_cstr(cz_oai_buf *b, const char *s)
{
    if (s)
        put_cstr(b, s);
    else
        PUTS(b, "null");
}

static void put_id_hex(cz_oai_buf *b, cz_oai_id id)
{
    char t[33];
    snprintf(t, sizeof t, "%016" PRIx64 "%016" PRIx64, id.hi, id.lo);
    put(b, t, 32);
}

/* ---- response bodies ----------------------------------------------------------------------
 * Streamed chunks mirror `chunk.model_dump_json(exclude_unset=True)` (pydantic): the fields
 * a serving generator passed to the constructor, null ones included, in the model's field
 * order, no spaces. Whole responses and error bodies mirror Starlette's
 * JSONResponse(model.model_dump()): every field, json.dumps with separators (",", ":") and
 * ensure_ascii=False, the same bytes for these shapes. */

void cz_oai_meta_init(cz_oai_meta *m, cz_oai_endpoint ep, cz_oai_id id, int64_t created,
                      const char *model)
{
    CZ_ASSERT(m != NULL && model != NULL);
    memset(m, 0, sizeof *m);
    m->endpoint = ep;
    snprintf(m->id, sizeof m->id, "%s%016" PRIx64 "%016" PRIx64,
             ep == CZ_OAI_CHAT ? "chatcmpl-" : "cmpl-", id.hi, id.lo);
    m->created = created;
    m->model = model;
}

/* {"id":..,"object":..,"created":..,"model":.., (the open object) */
static void put_head(cz_oai_buf *b, const cz_oai_meta *m, bool chunk)
{
    PUTS(b, "{\"id\":");
    put_cstr(b, m->id);
    if (m->endpoint == CZ_OAI_CHAT) {
        if (chunk)
            PUTS(b, ",\"object\":\"chat.completion.chunk\",\"created\":");
        else
            PUTS(b, ",\"object\":\"chat.completion\",\"created\":");
    } else {
        PUTS(b, ",\"object\":\"text_completion\",\"created\":");
    }
    put_i64(b, m->created);
    PUTS(b, ",\"model\":");
    put_cstr(b, m->model);
}

/* vLLM's UsageInfo field order: prompt_tokens, total_tokens, completion_tokens. `details`:
 * 0 leaves prompt_tokens_details out, 1 writes it (null without cached tokens). */
static void put_usage(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_usage *u, int details)
{
    PUTS(b, "{\"prompt_tokens\":");
    put_i64(b, u->prompt_tokens);
    PUTS(b, ",\"total_tokens\":");
    put_i64(b, u->prompt_tokens + u->completion_tokens);
    PUTS(b, ",\"completion_tokens\":");
    put_i64(b, u->completion_tokens);
    bool cached = m->prompt_tokens_details && u->cached_tokens > 0;
    if (cached) {
        PUTS(b, ",\"prompt_tokens_details\":{\"cached_tokens\":");
        put_i64(b, u->cached_tokens);
        PUTS(b, "}");
    } else if (details) {
        PUTS(b, ",\"prompt_tokens_details\":null");
    }
    PUTS(b, "}");
}

static void put_finish(cz_oai_buf *b, cz_oai_finish f, bool chat)
{
    switch (f) {
    case CZ_OAI_FINISH_NONE:
        if (chat) /* vLLM's chat: `output.finish_reason if output.finish_reason else "stop"` */
            PUTS(b, "\"stop\"");
        else
            PUTS(b, "null");
        return;
    case CZ_OAI_FINISH_STOP: PUTS(b, "\"stop\""); return;
    case CZ_OAI_FINISH_LENGTH: PUTS(b, "\"length\""); return;
    case CZ_OAI_FINISH_ABORT: PUTS(b, "\"abort\""); return;
    }
    CZ_ASSERT(!"unknown cz_oai_finish");
}

static void put_stop_reason(cz_oai_buf *b, const cz_oai_choice *c)
{
    if (c->finish != CZ_OAI_FINISH_NONE && c->stop_str)
        put_cstr(b, c->stop_str);
    else if (c->finish != CZ_OAI_FINISH_NONE && c->stop_token >= 0)
        put_i64(b, c->stop_token);
    else
        PUTS(b, "null");
}

/* A list of ids, or null when `ids` is NULL. */
static void put_ids(cz_oai_buf *b, const int32_t *ids, size_t n)
{
    if (!ids) {
        PUTS(b, "null");
        return;
    }
    PUTS(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            PUTS(b, ",");
        put_i64(b, ids[i]);
    }
    PUTS(b, "]");
}

static void put_text(cz_oai_buf *b, const cz_oai_choice *c)
{
    CZ_ASSERT(c->text != NULL || c->text_len == 0);
    put_json_str(b, c->text ? c->text : "", c->text_len, false);
}

void cz_oai_chunk_role(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_usage *u)
{
    CZ_ASSERT(b && m && m->endpoint == CZ_OAI_CHAT && (u || !m->continuous_usage));
    /* serving.py chat_completion_stream_generator, first_iteration: the choice's index,
     * delta(role, content=""), logprobs and finish_reason; the chunk's prompt_token_ids and
     * prompt_text (None) */
    PUTS(b, "data: ");
    put_head(b, m, true);
    PUTS(b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
            "\"logprobs\":null,\"finish_reason\":null}]");
    if (m->continuous_usage) {
        PUTS(b, ",\"usage\":");
        put_usage(b, m, u, 0);
    }
    PUTS(b, ",\"prompt_token_ids\":");
    put_ids(b, m->prompt_ids, m->n_prompt_ids);
    PUTS(b, ",\"prompt_text\":null}\n\n");
}

void cz_oai_chunk(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_choice *c,
                  const cz_oai_usage *u)
{
    CZ_ASSERT(b && m && c && (u || !m->continuous_usage));
    bool finished = c->finish != CZ_OAI_FINISH_NONE;
    PUTS(b, "data: ");
    put_head(b, m, true);
    PUTS(b, ",\"choices\":[{\"index\":");
    put_i64(b, c->index);
    if (m->endpoint == CZ_OAI_CHAT) {
        /* the choice has stop_reason only once finished; token_ids always (None) */
        PUTS(b, ",\"delta\":{\"content\":");
        put_text(b, c);
        PUTS(b, "},\"logprobs\":null,\"finish_reason\":");
        put_finish(b, c->finish, false);
        if (finished) {
            PUTS(b, ",\"stop_reason\":");
            put_stop_reason(b, c);
        }
        PUTS(b, ",\"token_ids\":");
        put_ids(b, c->token_ids, c->n_token_ids);
        PUTS(b, "}]");
    } else {
        /* completion serving.py: index, text, logprobs, finish_reason, stop_reason,
         * prompt_token_ids, token_ids all passed */
        PUTS(b, ",\"text\":");
        put_text(b, c);
        PUTS(b, ",\"logprobs\":null,\"finish_reason\":");
        put_finish(b, c->finish, false);
        PUTS(b, ",\"stop_reason\":");
        put_stop_reason(b, c);
        PUTS(b, ",\"prompt_token_ids\":");
        put_ids(b, c->prompt_ids, c->n_prompt_ids);
        PUTS(b, ",\"token_ids\":");
        put_ids(b, c->token_ids, c->n_token_ids);
        PUTS(b, "}]");
    }
    if (m->continuous_usage) {
        PUTS(b, ",\"usage\":");
        put_usage(b, m, u, 0);
    }
    if (finished && !m->include_usage && m->system_fingerprint) {
        PUTS(b, ",\"system_fingerprint\":");
        put_cstr(b, m->system_fingerprint);
    }
    PUTS(b, "}\n\n");
}

void cz_oai_chunk_usage(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_usage *u)
{
    CZ_ASSERT(b && m && u);
    /* model_dump_json(exclude_none=True): usage without a null prompt_tokens_details, the
     * fingerprint when there is one */
    PUTS(b, "data: ");
    put_head(b, m, true);
    PUTS(b, ",\"choices\":[],\"usage\":");
    put_usage(b, m, u, 0);
    if (m->system_fingerprint) {
        PUTS(b, ",\"system_fingerprint\":");
        put_cstr(b, m->system_fingerprint);
    }
    PUTS(b, "}\n\n");
}

void cz_oai_done(cz_oai_buf *b)
{
    PUTS(b, "data: [DONE]\n\n");
}

void cz_oai_response(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_choice *c, size_t n,
                     const cz_oai_usage *u)
{
    CZ_ASSERT(b && m && u && (c || n == 0));
    bool chat = m->endpoint == CZ_OAI_CHAT;
    CZ_ASSERT(!chat || n == 1);
    put_head(b, m, false);
    PUTS(b, ",\"choices\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            PUTS(b, ",");
        if (chat) {
            /* ChatCompletionResponseChoice(index, message=ChatMessage(role, reasoning,
             * content), logprobs, finish_reason, stop_reason, token_ids) */
            PUTS(b, "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
            put_text(b, &c[i]);
            PUTS(b, ",\"refusal\":null,\"annotations\":null,\"audio\":null,"
                    "\"function_call\":null,\"tool_calls\":[],\"reasoning\":null},"
                    "\"logprobs\":null,\"finish_reason\":");
            put_finish(b, c[i].finish, true);
            PUTS(b, ",\"stop_reason\":");
            put_stop_reason(b, &c[i]);
            PUTS(b, ",\"token_ids\":");
            put_ids(b, c[i].token_ids, c[i].n_token_ids);
            PUTS(b, "}");
        } else {
            /* CompletionResponseChoice, index = its position (len(choices)) */
            PUTS(b, "{\"index\":");
            put_i64(b, (int64_t)i);
            PUTS(b, ",\"text\":");
            put_text(b, &c[i]);
            PUTS(b, ",\"logprobs\":null,\"finish_reason\":");
            put_finish(b, c[i].finish, false);
            PUTS(b, ",\"stop_reason\":");
            put_stop_reason(b, &c[i]);
            PUTS(b, ",\"token_ids\":");
            put_ids(b, c[i].token_ids, c[i].n_token_ids);
            PUTS(b, ",\"prompt_logprobs\":null,\"prompt_token_ids\":");
            put_ids(b, c[i].prompt_ids, c[i].n_prompt_ids);
            PUTS(b, "}");
        }
    }
    PUTS(b, "],\"service_tier\":null,\"system_fingerprint\":");
    put_opt_cstr(b, m->system_fingerprint);
    PUTS(b, ",\"usage\":");
    put_usage(b, m, u, 1);
    if (chat) {
        PUTS(b, ",\"prompt_logprobs\":null,\"prompt_token_ids\":");
        put_ids(b, m->prompt_ids, m->n_prompt_ids);
        PUTS(b, ",\"prompt_text\":null");
    }
    PUTS(b, ",\"kv_transfer_params\":null}");
}

/* ErrorResponse(error=ErrorInfo(message, type, param, code)); `py` writes it as Python's
 * json.dumps with its defaults, as vLLM's create_streaming_error_response does. */
static void put_error(cz_oai_buf *b, const cz_oai_error *e, bool py)
{
    const char *sep = py ? ", " : ",", *col = py ? ": " : ":";
    put(b, "{\"error\"", 8);
    put(b, col, strlen(col));
    put(b, "{\"message\"", 10);
    put(b, col, strlen(col));
    put_json_str(b, e->message, strlen(e->message), py);
    put(b, sep, strlen(sep));
    PUTS(b, "\"type\"");
    put(b, col, strlen(col));
    put_json_str(b, e->type, strlen(e->type), py);
    put(b, sep, strlen(sep));
    PUTS(b, "\"param\"");
    put(b, col, strlen(col));
    if (e->param[0])
        put_json_str(b, e->param, strlen(e->param), py);
    else
        PUTS(b, "null");
    put(b, sep, strlen(sep));
    PUTS(b, "\"code\"");
    put(b, col, strlen(col));
    put_i64(b, e->status);
    PUTS(b, "}}");
}

void cz_oai_error_body(cz_oai_buf *b, const cz_oai_error *e)
{
    CZ_ASSERT(b && e);
    put_error(b, e, false);
}

void cz_oai_chunk_error(cz_oai_buf *b, const cz_oai_error *e)
{
    CZ_ASSERT(b && e);
    PUTS(b, "data: ");
    put_error(b, e, true);
    PUTS(b, "\n\n");
}

void cz_oai_unauthorized_body(cz_oai_buf *b)
{
    /* server_utils.py AuthenticationMiddleware: JSONResponse({"error": "Unauthorized"}) */
    PUTS(b, "{\"error\":\"Unauthorized\"}");
}

void cz_oai_models_body(cz_oai_buf *b, const char *id, const char *root, int64_t created,
                        int64_t max_model_len, cz_oai_id perm_id)
{
    CZ_ASSERT(b && id);
    /* ModelList(data=[ModelCard(id, max_model_len, root, permission=[ModelPermission()])]),
     * owned_by ours instead of "vllm" */
    PUTS(b, "{\"object\":\"list\",\"data\":[{\"id\":");
    put_cstr(b, id);
    PUTS(b, ",\"object\":\"model\",\"created\":");
    put_i64(b, created);
    PUTS(b, ",\"owned_by\":\"cadenza\",\"root\":");
    put_opt_cstr(b, root);
    PUTS(b, ",\"parent\":null,\"max_model_len\":");
    put_i64(b, max_model_len);
    PUTS(b, ",\"permission\":[{\"id\":\"modelperm-");
    put_id_hex(b, perm_id);
    PUTS(b, "\",\"object\":\"model_permission\",\"created\":");
    put_i64(b, created);
    PUTS(b, ",\"allow_create_engine\":false,\"allow_sampling\":true,\"allow_logprobs\":true,"
            "\"allow_search_indices\":false,\"allow_view\":true,\"allow_fine_tuning\":false,"
            "\"organization\":\"*\",\"group\":null,\"is_blocking\":false}]}]}");
}

/* ---- the interaction plane: POST /v1/sessions/{id}/events ---------------------------- */

static const char *const event_names[] = {"speech_start", "speech_end", "playback", "barge_in"};

const char *cz_oai_event_name(cz_oai_event_type t)
{
    CZ_ASSERT((unsigned)t < CZ_ARRAY_LEN(event_names));
    return event_names[t];
}

cz_status cz_oai_parse_event(const char *body, size_t len, cz_oai_event *out, cz_oai_error *e)
{
    CZ_ASSERT(out != NULL && (body != NULL || len == 0));
    memset(out, 0, sizeof *out);
    out->heard_tokens = -1;
    cJSON *root;
    cz_status st = parse_root(body, len, CZ_OAI_MAX_EVENT_BYTES, &root, e);
    if (st != CZ_OK)
        return st;
    /* each field's last occurrence (as Python's json.loads keeps it) */
    const cJSON *type = NULL, *played = NULL, *received = NULL, *heard = NULL;
    for (const cJSON *c = root->child; c && st == CZ_OK; c = c->next) {
        if (strcmp(c->string, "type") == 0)
            type = c;
        else if (strcmp(c->string, "played_s") == 0)
            played = c;
        else if (strcmp(c->string, "received_s") == 0)
            received = c;
        else if (strcmp(c->string, "heard_tokens") == 0)
            heard = c;
        else {
            char name[64];
            snprintf(name, sizeof name, "%s", c->string);
            st = fail(e, CZ_EINVAL, 400, name,
                      "unknown field: an event has type, played_s, received_s and "
                      "heard_tokens");
        }
    }
    if (st == CZ_OK && !type)
        st = fail(e, CZ_EINVAL, 400, "type",
                  "missing: expected one of speech_start, speech_end, playback, barge_in");
    if (st == CZ_OK && !cJSON_IsString(type))
        st = type_error(e, "type", "a string", type);
    if (st == CZ_OK) {
        size_t k = 0;
        while (k < CZ_ARRAY_LEN(event_names) && strcmp(type->valuestring, event_names[k]) != 0)
            k++;
        if (k == CZ_ARRAY_LEN(event_names)) {
            char got[48];
            copy_cut(got, sizeof got, type->valuestring);
            st = fail(e, CZ_EINVAL, 400, "type",
                      "expected one of speech_start, speech_end, playback, barge_in, got "
                      "'%s'",
                      got);
        } else {
            out->type = (cz_oai_event_type)k;
        }
    }
    /* what each type takes */
    bool speech = out->type == CZ_OAI_EV_SPEECH_START || out->type == CZ_OAI_EV_SPEECH_END;
    const char *extra = NULL;
    if (st == CZ_OK && speech)
        extra = played ? "played_s" : received ? "received_s" : heard ? "heard_tokens" : NULL;
    else if (st == CZ_OK && out->type == CZ_OAI_EV_PLAYBACK)
        extra = heard ? "heard_tokens" : NULL;
    else if (st == CZ_OK && out->type == CZ_OAI_EV_BARGE_IN)
        extra = received ? "received_s" : NULL;
    if (extra)
        st = fail(e, CZ_EINVAL, 400, extra, "not a field of a %s event",
                  event_names[out->type]);
    if (st == CZ_OK && out->type == CZ_OAI_EV_PLAYBACK && (!played || !received))
        st = fail(e, CZ_EINVAL, 400, !played ? "played_s" : "received_s",
                  "missing: a playback event gives the seconds played and the seconds of "
                  "the reply's audio received");
    if (st == CZ_OK && played && !(out->type == CZ_OAI_EV_BARGE_IN && is_null(played))) {
        st = get_num(e, "played_s", played, 0.0, false, CZ_OAI_MAX_EVENT_S, &out->played_s);
        out->has_played = st == CZ_OK;
    }
    if (st == CZ_OK && received) {
        st = get_num(e, "received_s", received, 0.0, false, CZ_OAI_MAX_EVENT_S,
                     &out->received_s);
        if (st == CZ_OK && out->played_s > out->received_s) {
            char a[40], b[40];
            fmt_num(out->played_s, a, sizeof a);
            fmt_num(out->received_s, b, sizeof b);
            st = fail(e, CZ_EINVAL, 400, "played_s",
                      "must be at most received_s (%s), got %s: the client cannot play audio "
                      "it has not received",
                      b, a);
        }
    }
    if (st == CZ_OK && heard && !is_null(heard))
        st = get_int(e, "heard_tokens", heard, 0, INT32_MAX, &out->heard_tokens);
    cJSON_Delete(root);
    if (st != CZ_OK) {
        memset(out, 0, sizeof *out);
        out->heard_tokens = -1;
    }
    return st;
}

bool cz_oai_session_path(const char *url, char *id, size_t cap)
{
    static const char pre[] = "/v1/sessions/", post[] = "/events";
    size_t n = strlen(url), np = sizeof pre - 1, ns = sizeof post - 1;
    if (n <= np + ns || strncmp(url, pre, np) != 0 || strcmp(url + n - ns, post) != 0)
        return false;
    size_t k = n - np - ns;
    if (k >= cap || memchr(url + np, '/', k))
        return false;
    memcpy(id, url + np, k);
    id[k] = '\0';
    return true;
}

void cz_oai_event_body(cz_oai_buf *b, const char *session, const cz_oai_event_result *r)
{
    PUTS(b, "{\"object\":\"session.event\",\"session_id\":");
    put_json_str(b, session, strlen(session), true);
    PUTS(b, ",\"type\":\"");
    put(b, event_names[r->type], strlen(event_names[r->type]));
    PUTS(b, "\",\"applied\":");
    if (r->applied)
        PUTS(b, "true");
    else
        PUTS(b, "false");
    if (r->type == CZ_OAI_EV_SPEECH_START) {
        static const char *const pl[] = {"none", "started", "skipped"};
        PUTS(b, ",\"preload\":\"");
        put(b, pl[r->preload], strlen(pl[r->preload]));
        PUTS(b, "\"");
    }
    if (r->type == CZ_OAI_EV_BARGE_IN) {
        PUTS(b, ",\"heard_tokens\":");
        put_i64(b, r->heard_tokens);
        PUTS(b, ",\"context_tokens\":");
        put_i64(b, r->context_tokens);
    }
    PUTS(b, "}");
}
