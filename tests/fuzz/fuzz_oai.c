/* fuzz_oai.c - libFuzzer harness for the OpenAI protocol layer of `cadenza serve`
 * (serve/cz_oai.h): the input is a request body, parsed for both endpoints
 * (/v1/completions and /v1/chat/completions) straight from libFuzzer's buffer, which is not
 * NUL-terminated, so a read past the body is an ASan report. Checks: a refused body carries a
 * status of 400 or 413 (413 only for a body over the size bound), a non-empty message and
 * type, and leaves nothing to free; an accepted one has at least one prompt (completions) or
 * message (chat), each within the documented ranges, and every response body formatted from
 * it (the chat role chunk, a delta chunk of the prompt's own text, a finishing chunk, the
 * usage chunk, the whole response, the error bodies) parses back with cJSON, the delta's
 * text reading back byte for byte. A chunk of the raw input bytes as text (invalid UTF-8,
 * control bytes) must parse back too. The same bytes are parsed as an interaction-plane event
 * body too (check_event). Half the mutations edit the parsed JSON
 * (cz_fuzz_mutate_json), half are libFuzzer's own byte mutations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cz_oai.h"
#include "fuzz_util.h"

/* The JSON of one body or one "data: <json>\n\n" event, parsed back (caller deletes). */
static cJSON *parse_back(const char *what, const cz_oai_buf *b)
{
    const char *s = b->p;
    size_t n = b->n;
    if (n >= 8 && strncmp(s, "data: ", 6) == 0) {
        if (strcmp(s + n - 2, "\n\n") != 0)
            cz_fuzz_fail(what, "event does not end with a blank line");
        s += 6;
        n -= 8;
    }
    if (strlen(b->p) != b->n)
        cz_fuzz_fail(what, "a NUL byte inside the formatted text");
    cJSON *j = cJSON_ParseWithLength(s, n);
    if (!j)
        cz_fuzz_fail(what, b->p);
    return j;
}

static void check_parses(const char *what, const cz_oai_buf *b)
{
    cJSON_Delete(parse_back(what, b));
}

static void check_error(cz_oai_endpoint ep, size_t size, cz_status st, const cz_oai_request *r,
                        const cz_oai_error *e)
{
    const char *what = ep == CZ_OAI_CHAT ? "cz_oai_parse(chat)" : "cz_oai_parse(completions)";
    if (st != CZ_EINVAL && st != CZ_EFORMAT && st != CZ_ERANGE)
        cz_fuzz_fail(what, "unexpected status");
    if (e->message[0] == '\0' || e->type[0] == '\0')
        cz_fuzz_fail(what, "an error without a message or a type");
    if (e->status != 400 && e->status != 413)
        cz_fuzz_fail(what, "an error status other than 400 and 413");
    if ((e->status == 413) != (size > CZ_OAI_MAX_BODY_BYTES))
        cz_fuzz_fail(what, "413 for a body within the size bound, or 400 past it");
    if (r->prompts || r->messages || r->model || r->user || r->stop_token_ids || r->n_stop)
        cz_fuzz_fail(what, "a refused request left memory in the struct");
    cz_oai_buf b = {0};
    cz_oai_error_body(&b, e);
    check_parses("cz_oai_error_body", &b);
    cz_oai_buf_clear(&b);
    cz_oai_chunk_error(&b, e);
    check_parses("cz_oai_chunk_error", &b);
    cz_oai_buf_free(&b);
}

static void check_request(const cz_oai_request *r)
{
    const char *what = "cz_oai_parse accepted";
    if (r->endpoint == CZ_OAI_COMPLETIONS) {
        if (r->n_prompts == 0 || r->n_messages != 0 || r->n_prompts > CZ_OAI_MAX_PROMPTS)
            cz_fuzz_fail(what, "a completions request without prompts");
        for (size_t i = 0; i < r->n_prompts; i++) {
            const cz_oai_prompt *p = &r->prompts[i];
            if (p->text ? p->text_len == 0 || strlen(p->text) != p->text_len || p->ids
                        : p->n_ids == 0 || !p->ids)
                cz_fuzz_fail(what, "an empty or malformed prompt");
            for (size_t k = 0; k < p->n_ids; k++)
                if (p->ids[k] < 0)
                    cz_fuzz_fail(what, "a negative token id");
        }
    } else {
        if (r->n_messages == 0 || r->n_prompts != 0 || r->n_messages > CZ_OAI_MAX_MESSAGES)
            cz_fuzz_fail(what, "a chat request without messages");
        for (size_t i = 0; i < r->n_messages; i++)
            if (!r->messages[i].content ||
                strlen(r->messages[i].content) != r->messages[i].content_len)
                cz_fuzz_fail(what, "a message whose content length is wrong");
    }
    if (r->max_tokens < (r->endpoint == CZ_OAI_CHAT ? 0 : 1) || r->min_tokens < 0 ||
        (r->max_tokens > 0 && r->min_tokens > r->max_tokens))
        cz_fuzz_fail(what, "max_tokens or min_tokens out of range");
    if (!(r->temperature >= 0 && r->temperature <= 2) || !(r->top_p > 0 && r->top_p <= 1) ||
        r->top_k < 0)
        cz_fuzz_fail(what, "a sampling parameter out of range");
    if (r->n_stop > CZ_OAI_MAX_STOP || (r->continuous_usage && !r->include_usage) ||
        (r->include_usage && !r->stream))
        cz_fuzz_fail(what, "stop strings or stream options out of range");
    for (size_t i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0])
            cz_fuzz_fail(what, "an empty stop string");
}

/* Formats every body from an accepted request and checks them. */
static void check_format(const cz_oai_request *r, const uint8_t *data, size_t size)
{
    cz_oai_meta m;
    cz_oai_id id = {size, size ? data[0] : 0};
    cz_oai_meta_init(&m, r->endpoint, id, (int64_t)size, r->model ? r->model : "m");
    m.include_usage = r->include_usage;
    m.continuous_usage = r->continuous_usage;
    m.prompt_tokens_details = size & 1;
    m.system_fingerprint = r->user; /* any string the body gave */

    const char *text = r->endpoint == CZ_OAI_CHAT ? r->messages[0].content
                                                  : (r->prompts[0].text ? r->prompts[0].text
                                                                        : "");
    size_t len = strlen(text);
    cz_oai_usage u = {(int64_t)r->n_prompts + (int64_t)r->n_messages, r->max_tokens,
                      r->min_tokens};
    cz_oai_choice c = {.text = text, .text_len = len, .stop_token = -1};
    cz_oai_buf b = {0};

    if (r->endpoint == CZ_OAI_CHAT) {
        cz_oai_chunk_role(&b, &m, &u);
        check_parses("cz_oai_chunk_role", &b);
        cz_oai_buf_clear(&b);
    }
    /* a delta of valid UTF-8 without NULs reads back as the same bytes */
    cz_oai_chunk(&b, &m, &c, &u);
    cJSON *j = parse_back("cz_oai_chunk", &b);
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *t = r->endpoint == CZ_OAI_CHAT
                         ? cJSON_GetObjectItemCaseSensitive(
                               cJSON_GetObjectItemCaseSensitive(ch, "delta"), "content")
                         : cJSON_GetObjectItemCaseSensitive(ch, "text");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, text) != 0)
        cz_fuzz_fail("cz_oai_chunk", "the delta's text does not read back");
    cJSON_Delete(j);

    /* the finishing chunk, with the input's raw bytes as its text and a stop string */
    cz_oai_buf_clear(&b);
    c = (cz_oai_choice){.index = (uint32_t)(size % 7),
                        .text = (const char *)data,
                        .text_len = size,
                        .finish = (cz_oai_finish)(1 + size % 3),
                        .stop_str = r->n_stop ? r->stop[0] : NULL,
                        .stop_token = r->n_stop_token_ids ? r->stop_token_ids[0] : -1};
    cz_oai_chunk(&b, &m, &c, &u);
    check_parses("cz_oai_chunk (finished, raw bytes)", &b);
    cz_oai_buf_clear(&b);
    cz_oai_chunk_usage(&b, &m, &u);
    check_parses("cz_oai_chunk_usage", &b);
    cz_oai_buf_clear(&b);
    cz_oai_response(&b, &m, &c, 1, &u);
    check_parses("cz_oai_response", &b);
    cz_oai_buf_clear(&b);
    cz_oai_models_body(&b, m.model, r->user, m.created, r->max_tokens, id);
    check_parses("cz_oai_models_body", &b);
    cz_oai_buf_free(&b);

    /* the session id is the body's user when no header names one */
    if (cz_oai_session_id(NULL, r) != (r->user && *r->user ? r->user : NULL))
        cz_fuzz_fail("cz_oai_session_id", "not the body's user");
}

/* The same bytes as an event body (POST /v1/sessions/{id}/events): refused with 400 (413
 * past its bound) and a message naming what is wrong, leaving nothing set; or accepted
 * within the documented ranges, its response body parsing back with cJSON. */
static void check_event(const uint8_t *data, size_t size)
{
    cz_oai_event ev;
    cz_oai_error e;
    memset(&e, 0, sizeof e);
    cz_status st = cz_oai_parse_event((const char *)data, size, &ev, &e);
    if (st != CZ_OK) {
        if (e.message[0] == '\0' || (e.status != 400 && e.status != 413))
            cz_fuzz_fail("cz_oai_parse_event", "a refusal without a message, or not 400/413");
        if ((e.status == 413) != (size > CZ_OAI_MAX_EVENT_BYTES))
            cz_fuzz_fail("cz_oai_parse_event", "413 within the bound, or 400 past it");
        if (ev.has_played || ev.heard_tokens != -1)
            cz_fuzz_fail("cz_oai_parse_event", "a refused event left fields set");
        return;
    }
    if ((unsigned)ev.type > CZ_OAI_EV_BARGE_IN || ev.heard_tokens < -1 ||
        ev.heard_tokens > INT32_MAX || !(ev.played_s >= 0 && ev.played_s <= CZ_OAI_MAX_EVENT_S) ||
        !(ev.received_s >= 0 && ev.received_s <= CZ_OAI_MAX_EVENT_S))
        cz_fuzz_fail("cz_oai_parse_event", "a field out of its range");
    if (ev.type == CZ_OAI_EV_PLAYBACK && !(ev.has_played && ev.played_s <= ev.received_s))
        cz_fuzz_fail("cz_oai_parse_event", "a playback without played_s <= received_s");
    if (ev.type != CZ_OAI_EV_BARGE_IN && ev.heard_tokens != -1)
        cz_fuzz_fail("cz_oai_parse_event", "heard_tokens outside a barge_in");
    cz_oai_event_result r = {.type = ev.type, .applied = true, .preload = 2,
                             .heard_tokens = ev.heard_tokens, .context_tokens = 1};
    cz_oai_buf b = {0};
    char id[CZ_OAI_MAX_SESSION_ID];
    size_t n = size < sizeof id - 1 ? size : sizeof id - 1;
    memcpy(id, data, n);
    id[n] = '\0'; /* raw bytes as a session id: escaped, whatever they are */
    cz_oai_event_body(&b, id, &r);
    check_parses("cz_oai_event_body", &b);
    cz_oai_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_event(data, size);
    for (int k = 0; k < 2; k++) {
        cz_oai_endpoint ep = k ? CZ_OAI_CHAT : CZ_OAI_COMPLETIONS;
        cz_oai_request r;
        cz_oai_error e;
        memset(&e, 0, sizeof e);
        cz_status st = cz_oai_parse(ep, (const char *)data, size, &r, &e);
        if (st != CZ_OK) {
            check_error(ep, size, st, &r, &e);
        } else {
            if (r.endpoint != ep)
                cz_fuzz_fail("cz_oai_parse", "the request names another endpoint");
            check_request(&r);
            check_format(&r, data, size);
        }
        cz_oai_request_free(&r);
    }
    return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return cz_fuzz_mutate_json(data, size, max_size, seed);
}
