/* cz_read_sharegpt.c - ShareGPT JSON reader in vLLM's benchmark schema (see
 * traces/data/sharegpt/README.md and docs/workload.md).
 *
 * The file is an array of {"id"?, "conversations": [{"from", "value"}, ...]}, optionally
 * with "prompt_tokens"/"response_tokens" counts for the first exchange (the superset
 * written by some tools). Default: the first exchange only, as vLLM's benchmark does
 * (message 0 is the prompt, message 1 the reply), giving one single-turn session per
 * entry. With sharegpt_multi_turn, each "human" message and the "gpt" message right after
 * it form one turn, and a conversation with several turns becomes one closed-loop session
 * (the input of turn k is that human message alone: context reuse comes from the KV
 * cache, not from re-sent text). Token counts come from the file when present and from
 * ceil(code points / chars_per_token), at least 1, otherwise. ShareGPT has no timestamps:
 * arrival_s stays 0 for an arrival process to fill. */
#include "cz_traces_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

/* One prompt and its reply, before filtering. */
typedef struct sg_exchange {
    uint32_t in_tokens, out_tokens;
} sg_exchange;

/* Token estimate of a UTF-8 text: ceil(code points / chars_per_token), at least 1. */
static uint32_t estimate_tokens(const char *text, double chars_per_token)
{
    size_t cps = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        cps += (*p & 0xC0) != 0x80;
    double t = ceil((double)cps / chars_per_token);
    if (t < 1.0)
        return 1;
    return t > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* The "value" text of message `k` of `conv` (and its "from" role when `role` is not
 * NULL); errors name the record and the message. */
static cz_status message(const cJSON *conv, int k, const char *where, const char **value,
                         const char **role, cz_err *err)
{
    const cJSON *m = cJSON_GetArrayItem(conv, k);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "value");
    if (!cJSON_IsObject(m) || !cJSON_IsString(v))
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'conversations[%d].value': expected a message object with "
                          "a string 'value'",
                          where, k);
    *value = v->valuestring;
    if (role) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(m, "from");
        if (!cJSON_IsString(f))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'conversations[%d].from': expected a string such as "
                              "\"human\" or \"gpt\"",
                              where, k);
        *role = f->valuestring;
    }
    return CZ_OK;
}

/* Output tokens of an exchange without a reply. */
static cz_status missing_reply(const cz_trace_opts *o, const char *where, int k, uint32_t *out,
                               cz_err *err)
{
    if (o->default_output_tokens == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'conversations[%d]': the prompt has no gpt reply to take "
                          "the output length from; set a default output length (the "
                          "'output_tokens' field of the workload's trace object)",
                          where, k);
    *out = o->default_output_tokens;
    return CZ_OK;
}

/* Fills ex[0..*n) with the exchanges of one entry, growing ex. */
static cz_status entry_exchanges(const cJSON *entry, const char *where, const cz_trace_opts *o,
                                 sg_exchange **ex, size_t *cap, size_t *n, cz_err *err)
{
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(entry, "conversations");
    if (!cJSON_IsArray(conv))
        return cz_err_set(err, CZ_EINVAL,
                          "%s: field 'conversations': expected an array of {from, value} "
                          "messages",
                          where);
    uint64_t prompt_tokens = 0, response_tokens = 0;
    cz_status st;
    if ((st = cz_json_u64(entry, where, "prompt_tokens", false, 0, UINT32_MAX, &prompt_tokens,
                          err)) != CZ_OK ||
        (st = cz_json_u64(entry, where, "response_tokens", false, 0, UINT32_MAX,
                          &response_tokens, err)) != CZ_OK)
        return st;
    bool has_prompt_tokens = cJSON_HasObjectItem(entry, "prompt_tokens");
    bool has_response_tokens = cJSON_HasObjectItem(entry, "response_tokens");
    int n_msgs = cJSON_GetArraySize(conv);
    *n = 0;
    for (int k = 0; k < n_msgs;) {
        const char *prompt, *reply = NULL, *role = NULL, *next_role = NULL;
        int next = k + 1;
        if (!o->sharegpt_multi_turn) {
            if ((st = message(conv, k, where, &prompt, NULL, err)) != CZ_OK)
                return st;
            if (n_msgs > 1 && (st = message(conv, 1, where, &reply, NULL, err)) != CZ_OK)
                return st;
            next = n_msgs;
        } else {
            if ((st = message(conv, k, where, &prompt, &role, err)) != CZ_OK)
                return st;
            if (strcmp(role, "human") != 0) {
                k++;
                continue;
            }
            const char *text;
            if (k + 1 < n_msgs) {
                if ((st = message(conv, k + 1, where, &text, &next_role, err)) != CZ_OK)
                    return st;
                if (strcmp(next_role, "gpt") == 0) {
                    reply = text;
                    next = k + 2;
                }
            }
        }
        sg_exchange e;
        bool first = *n == 0;
        e.in_tokens = first && has_prompt_tokens ? (uint32_t)prompt_tokens
                                                 : estimate_tokens(prompt, o->chars_per_token);
        if (reply)
            e.out_tokens = first && has_response_tokens
                               ? (uint32_t)response_tokens
                               : estimate_tokens(reply, o->chars_per_token);
        else if ((st = missing_reply(o, where, k, &e.out_tokens, err)) != CZ_OK)
            return st;
        cz_grow((void **)ex, cap, *n + 1, sizeof **ex);
        (*ex)[(*n)++] = e;
        k = next;
    }
    return CZ_OK;
}

/* vLLM's benchmark filter: keep exchanges with prompt and output of at least min tokens,
 * prompt at most max_prompt and prompt + output at most max_total. */
static bool keep_exchange(const cz_trace_opts *o, const sg_exchange *e)
{
    if (!o->sharegpt_filter)
        return true;
    return e->in_tokens >= o->sharegpt_min_tokens && e->out_tokens >= o->sharegpt_min_tokens &&
           e->in_tokens <= o->sharegpt_max_prompt &&
           (uint64_t)e->in_tokens + e->out_tokens <= o->sharegpt_max_total;
}

cz_status cz__read_sharegpt(const char *path, const cz_trace_opts *o, cz_workload *w,
                            cz_err *err)
{
    cJSON *root = NULL;
    cz_status st = cz_json_load(path, &root, err);
    if (st != CZ_OK)
        return st;
    snprintf(w->source, sizeof w->source, "sharegpt");
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: expected a JSON array of {\"conversations\": [...]} entries", path);
    }
    sg_exchange *ex = NULL;
    size_t cap = 0, n = 0, index = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, root)
    {
        char where[CZ_ERR_MSG_MAX / 2];
        snprintf(where, sizeof where, "%s: record %zu", path, index);
        if (!cJSON_IsObject(entry)) {
            st = cz_err_set(err, CZ_EINVAL, "%s: expected an object with 'conversations'", where);
            break;
        }
        if ((st = entry_exchanges(entry, where, o, &ex, &cap, &n, err)) != CZ_OK)
            break;
        size_t kept = 0;
        while (kept < n && keep_exchange(o, &ex[kept]))
            kept++;
        w->dropped_filtered += n - kept;
        if (n == 0)
            w->dropped_filtered++;
        if (kept > 0) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(entry, "id");
            if (!cJSON_IsString(id))
                id = cJSON_GetObjectItemCaseSensitive(entry, "conversation_id");
            char name[32];
            snprintf(name, sizeof name, "record-%zu", index);
            cz_workload_begin_session(w, cJSON_IsString(id) ? id->valuestring : name, o->cls,
                                      kept > 1 ? CZ_TIMING_CLOSED : CZ_TIMING_OPEN);
            for (size_t k = 0; k < kept; k++) {
                cz_turn *t = cz_workload_add_turn(w);
                t->in_text_tokens = ex[k].in_tokens;
                t->out_text_tokens = ex[k].out_tokens;
            }
        }
        index++;
    }
    free(ex);
    cJSON_Delete(root);
    return st;
}
