/* cz_oai.h - the OpenAI-compatible HTTP protocol of `cadenza serve` (docs/serve-protocol.md):
 * request bodies of POST /v1/completions and POST /v1/chat/completions parsed into an owned
 * request struct with every field checked against what the server implements, and the
 * response bodies written byte for byte as vLLM writes them (streamed chunks as SSE events,
 * whole responses, error bodies, the model list), plus the Authorization and session-id
 * header rules. Pure functions: no I/O, no threads, no HTTP library, no global state.
 *
 * The shapes match vLLM main at commit 9aaf83ef5 (2026-05-19, the v0.21 development line):
 * vllm/entrypoints/openai/{completion,chat_completion,engine,models}/{protocol,serving}.py,
 * vllm/entrypoints/utils.py (create_error_response) and
 * vllm/entrypoints/openai/server_utils.py (the API-key middleware, the error handlers).
 * Where the parser is stricter than vLLM (JSON types, NaN, duplicate keys) the rule and the
 * reason are in docs/serve-protocol.md. */
#ifndef CZ_OAI_H
#define CZ_OAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of a request body. A larger body is refused with HTTP 413; the lists with 400. */
#define CZ_OAI_MAX_BODY_BYTES ((size_t)32 << 20)
#define CZ_OAI_MAX_PROMPTS 1024                 /* prompts of one completions request */
#define CZ_OAI_MAX_PROMPT_TOKEN_IDS (1u << 20)  /* token ids over all its prompts */
#define CZ_OAI_MAX_MESSAGES 100000              /* messages of one chat request */
#define CZ_OAI_MAX_STOP 4                       /* stop strings (OpenAI's limit) */
#define CZ_OAI_MAX_STOP_TOKEN_IDS 4096

typedef enum cz_oai_endpoint {
    CZ_OAI_COMPLETIONS, /* POST /v1/completions */
    CZ_OAI_CHAT         /* POST /v1/chat/completions */
} cz_oai_endpoint;

/* A chat message's role; "developer" is read as system, "tool" and "function" are refused. */
typedef enum cz_oai_role { CZ_OAI_ROLE_SYSTEM, CZ_OAI_ROLE_USER, CZ_OAI_ROLE_ASSISTANT } cz_oai_role;

/* One completions prompt: text (ids NULL) or token ids (text NULL). Never empty. */
typedef struct cz_oai_prompt {
    char *text;        /* UTF-8, NUL-terminated, text_len bytes (no NUL inside) */
    size_t text_len;
    int32_t *ids;      /* token ids, each in [0, INT32_MAX] */
    size_t n_ids;
} cz_oai_prompt;

/* One chat message. The content is the message's string, or its text parts joined with
 * "\n" as vLLM joins them for string-format chat templates; a null content is "". */
typedef struct cz_oai_message {
    cz_oai_role role;
    char *content;     /* UTF-8, NUL-terminated, content_len bytes (no NUL inside) */
    size_t content_len;
} cz_oai_message;

/* A parsed request; it owns every pointer in it (cz_oai_request_free). */
typedef struct cz_oai_request {
    cz_oai_endpoint endpoint;
    char *model;                 /* the body's "model", NULL when absent or null */
    cz_oai_prompt *prompts;      /* completions: n_prompts >= 1; chat: NULL, 0 */
    size_t n_prompts;
    cz_oai_message *messages;    /* chat: n_messages >= 1; completions: NULL, 0 */
    size_t n_messages;
    /* Output length, >= 1. Completions: "max_tokens", 16 when absent or null (vLLM's
     * default). Chat: "max_completion_tokens", else "max_tokens", else 0 meaning "up to the
     * context length", as vLLM. */
    int64_t max_tokens;
    int64_t min_tokens;          /* >= 0, <= max_tokens when max_tokens is set */
    bool ignore_eos;
    bool return_token_ids;       /* vLLM's: prompt_token_ids and token_ids in the output */
    /* Sampling; has_* says whether the body set it, so the server may apply the model's
     * generation-config defaults as vLLM does. Defaults: 1.0, 1.0, 0. */
    double temperature;          /* [0, 2] */
    double top_p;                /* (0, 1] */
    int32_t top_k;               /* 0 = no limit (the body's -1 and 0 both read as 0), else >= 1 */
    bool has_temperature, has_top_p, has_top_k;
    int64_t seed;                /* valid when has_seed; |seed| <= 2^53 */
    bool has_seed;
    int32_t *stop_token_ids;     /* each >= 0 */
    size_t n_stop_token_ids;
    char *stop[CZ_OAI_MAX_STOP]; /* non-empty stop strings, applied by the server on text */
    size_t n_stop;
    bool stream;
    bool include_usage;          /* stream_options.include_usage (stream only) */
    bool continuous_usage;       /* include_usage and stream_options.continuous_usage_stats */
    char *user;                  /* the body's "user", NULL when absent or null */
} cz_oai_request;

#define CZ_OAI_MSG_MAX 1024
#define CZ_OAI_TYPE_MAX 48
#define CZ_OAI_PARAM_MAX 160

/* A request refused, as OpenAI's error object: HTTP status (also written as "code"), message
 * (a sentence naming the field: "n: only n = 1 is supported, got 3"), type, and param (the
 * field's path, "messages[2].content"; empty for none, written as null). */
typedef struct cz_oai_error {
    int status;
    char message[CZ_OAI_MSG_MAX];
    char type[CZ_OAI_TYPE_MAX];
    char param[CZ_OAI_PARAM_MAX];
} cz_oai_error;

/* Parses the request body body[0..len) for endpoint `ep` into *out (overwritten; free with
 * cz_oai_request_free). The body need not be NUL-terminated. Unknown fields are ignored (as
 * vLLM does); of a field given twice the last counts (as Python's json). Returns CZ_OK, or:
 * CZ_EFORMAT for a body that is not one JSON object (empty, malformed JSON at a byte offset,
 * invalid UTF-8, a control character or \u0000 in a string, nesting deeper than cJSON's
 * limit of 1000), CZ_EINVAL for a field of the wrong type or outside its range or a feature
 * the server does not implement, CZ_ERANGE for a body over CZ_OAI_MAX_BODY_BYTES (status
 * 413, type "Request Entity Too Large") or a list over its bound (400). On failure *e (which
 * may be NULL) says why, with status 400 and type "BadRequestError" unless said otherwise,
 * and *out holds nothing to free. */
cz_status cz_oai_parse(cz_oai_endpoint ep, const char *body, size_t len, cz_oai_request *out,
                       cz_oai_error *e);

/* Frees what *r owns and zeroes it. Safe on a zeroed or already freed request. */
void cz_oai_request_free(cz_oai_request *r);

/* The role's name as chat templates read it: "system", "user" or "assistant". */
const char *cz_oai_role_name(cz_oai_role role);

/* Fills *e (not NULL) with a printf-style message, HTTP `status`, `type` ("BadRequestError",
 * "NotFoundError", ...) and `param` (NULL or "" for none); each cut to fit. For errors the
 * server finds itself (an unknown model: 404 "NotFoundError", as vLLM). */
void cz_oai_error_set(cz_oai_error *e, int status, const char *type, const char *param,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Which session a request belongs to: the X-Session-ID header when present and non-empty,
 * else the body's "user" when non-empty, else NULL. The pointer is into the arguments. */
const char *cz_oai_session_id(const char *x_session_id, const cz_oai_request *req);

/* Whether the request may proceed under API key `api_key` (NULL or "": no key configured,
 * always true). As vLLM's middleware: the Authorization header must read "<scheme> <token>"
 * with the scheme "Bearer" in any case, split at the first space, and the token must equal
 * the key. The comparison takes a time that depends only on the key's length. */
bool cz_oai_auth_ok(const char *authorization, const char *api_key);

/* ---- response bodies --------------------------------------------------------------------
 * Every writer appends to a caller-owned growable buffer (start from a zeroed one; the text
 * stays NUL-terminated past n). A buffer is grown only when the text does not fit, so once a
 * stream's buffer has reached its working size (cz_oai_buf_clear keeps the memory) writing a
 * chunk allocates nothing. Growth that cannot be had exits as cz_xrealloc does. */
typedef struct cz_oai_buf {
    char *p;
    size_t n, cap;
} cz_oai_buf;

/* Makes room for `extra` more bytes (and the NUL) past b->n. */
void cz_oai_buf_reserve(cz_oai_buf *b, size_t extra);

/* Empties the buffer, keeping its memory. */
void cz_oai_buf_clear(cz_oai_buf *b);

/* Frees the buffer's memory and zeroes it. */
void cz_oai_buf_free(cz_oai_buf *b);

/* Appends s[0..len) as a JSON string with its quotes, escaped as vLLM's serializers escape
 * it (pydantic's model_dump_json and Python's json.dumps with ensure_ascii=False agree):
 * '"' and '\' by a backslash, \b \t \n \f \r by their short forms, other bytes below 0x20 as
 * \u00XX (lower-case hex), everything else as it is (UTF-8 unescaped, DEL included). Bytes
 * that are not well-formed UTF-8 are replaced by U+FFFD, one per maximal ill-formed
 * subsequence (as Python's bytes.decode(errors="replace")); Python strings never hold such
 * bytes, so vLLM never writes them, and its detokenizer already emits U+FFFD for them. */
void cz_oai_buf_json_str(cz_oai_buf *b, const char *s, size_t len);

/* A 128-bit value from the caller (the server draws it from its seeded generator, so ids
 * are deterministic per seed); written as 32 lower-case hex digits, hi first. */
typedef struct cz_oai_id {
    uint64_t hi, lo;
} cz_oai_id;

typedef enum cz_oai_finish {
    CZ_OAI_FINISH_NONE = 0, /* still generating: finish_reason null */
    CZ_OAI_FINISH_STOP,     /* EOS, a stop token or a stop string: "stop" */
    CZ_OAI_FINISH_LENGTH,   /* max_tokens or the context length: "length" */
    CZ_OAI_FINISH_ABORT     /* cancelled (client gone, server shutting down): "abort" */
} cz_oai_finish;

/* Token counts of a request. cached_tokens: prompt tokens served from the prefix cache,
 * reported as prompt_tokens_details only when cz_oai_meta.prompt_tokens_details is set and
 * cached_tokens > 0 (vLLM's --enable-prompt-tokens-details and its `if num_cached_tokens`). */
typedef struct cz_oai_usage {
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
} cz_oai_usage;

/* One choice: a streamed delta or a whole output. */
typedef struct cz_oai_choice {
    uint32_t index;         /* completions: the prompt's index; chat: 0 */
    const char *text;       /* the text (delta) generated, text_len bytes; NULL when 0 */
    size_t text_len;
    cz_oai_finish finish;
    /* vLLM's stop_reason once finished: the stop string matched (stop_str), else the stop
     * token id matched (stop_token >= 0), else null (EOS, length, abort). */
    const char *stop_str;
    int64_t stop_token;
    /* return_token_ids: the ids of this delta or output (token_ids), and a completion's
     * prompt ids (prompt_token_ids: on a stream's first chunk of the choice, in a whole
     * response); NULL writes null. Borrowed. */
    const int32_t *token_ids;
    size_t n_token_ids;
    const int32_t *prompt_ids;
    size_t n_prompt_ids;
} cz_oai_choice;

/* What every body of one response shares. Set by cz_oai_meta_init; the caller then sets the
 * stream flags from the request and the server's options. The strings are borrowed. */
typedef struct cz_oai_meta {
    cz_oai_endpoint endpoint;
    char id[48];                    /* "cmpl-<32 hex>" or "chatcmpl-<32 hex>" */
    int64_t created;                /* unix seconds */
    const char *model;              /* the served model's name */
    const char *system_fingerprint; /* NULL: vLLM's --fingerprint-mode none (default NULL) */
    bool include_usage;             /* cz_oai_request.include_usage */
    bool continuous_usage;          /* cz_oai_request.continuous_usage */
    bool prompt_tokens_details;     /* report cached_tokens (default false) */
    /* a chat's prompt ids (return_token_ids): on the role chunk and the whole response;
     * NULL writes null. Borrowed. */
    const int32_t *prompt_ids;
    size_t n_prompt_ids;
} cz_oai_meta;

/* Initialises *m for a response of endpoint `ep` with id `id`, time `created` and the
 * served model name `model` (borrowed, not NULL); the flags false, no fingerprint. */
void cz_oai_meta_init(cz_oai_meta *m, cz_oai_endpoint ep, cz_oai_id id, int64_t created,
                      const char *model);

/* Appends the chat stream's first event, the assistant role with empty content, as vLLM
 * sends it before the first token's chunk:
 *   data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,"choices":[{"index":0,
 *   "delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],
 *   "prompt_token_ids":null,"prompt_text":null}\n\n
 * with "usage" (u's counts; not NULL then) after "choices" when m->continuous_usage. */
void cz_oai_chunk_role(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_usage *u);

/* Appends one streamed event "data: <chunk>\n\n" carrying choice c (its text a delta): a
 * text_completion chunk or a chat.completion.chunk as m->endpoint says. When
 * m->continuous_usage it carries "usage" from *u (not NULL then: the prompt's tokens and the
 * completion tokens so far, this chunk's included); when the choice is finished, no usage
 * chunk follows (!m->include_usage) and m has a fingerprint, it carries that. */
void cz_oai_chunk(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_choice *c,
                  const cz_oai_usage *u);

/* Appends the usage-only event that ends a stream asked for with include_usage ("choices":[]
 * and the totals; the caller sends it only then, after the last choice's chunk). */
void cz_oai_chunk_usage(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_usage *u);

/* Appends an error raised mid-stream as vLLM sends it: "data: {"error": {...}}\n\n" written
 * by Python's json.dumps defaults (", " and ": " separators, non-ASCII as \uXXXX escapes). */
void cz_oai_chunk_error(cz_oai_buf *b, const cz_oai_error *e);

/* Appends the stream's terminator "data: [DONE]\n\n". */
void cz_oai_done(cz_oai_buf *b);

/* Appends the whole (non-streamed) response body: a text_completion with choices[n] (one per
 * prompt) or a chat.completion (n must be 1) whose message is the assistant's text, with the
 * usage. A choice still at CZ_OAI_FINISH_NONE reads null in a completion and "stop" in a chat
 * completion, as vLLM. */
void cz_oai_response(cz_oai_buf *b, const cz_oai_meta *m, const cz_oai_choice *c, size_t n,
                     const cz_oai_usage *u);

/* Appends the body of an error response: {"error":{"message":..,"type":..,"param":..,"code":N}}
 * (send it with HTTP status e->status). */
void cz_oai_error_body(cz_oai_buf *b, const cz_oai_error *e);

/* Appends the body vLLM answers a missing or wrong API key with (HTTP 401):
 * {"error":"Unauthorized"}. */
void cz_oai_unauthorized_body(cz_oai_buf *b);

/* Appends the body of GET /v1/models listing one model: its name `id`, `root` (the path it
 * was loaded from), `created`, owned_by "cadenza", parent null, `max_model_len` and one
 * permission object with id "modelperm-<perm_id as 32 hex>", as vLLM's ModelList. */
void cz_oai_models_body(cz_oai_buf *b, const char *id, const char *root, int64_t created,
                        int64_t max_model_len, cz_oai_id perm_id);

/* ---- the interaction plane: POST /v1/sessions/{id}/events (docs/serve-protocol.md) ---- */

#define CZ_OAI_MAX_EVENT_BYTES ((size_t)4096) /* an event body; larger is refused with 413 */
#define CZ_OAI_MAX_EVENT_S 1e7       /* seconds of audio an event may name */
#define CZ_OAI_MAX_SESSION_ID 256    /* bytes of a session id in the path */

/* A client's signal for a session (LiveServe section 3's interaction plane). */
typedef enum cz_oai_event_type {
    CZ_OAI_EV_SPEECH_START, /* the user started speaking the next turn (voice activity) */
    CZ_OAI_EV_SPEECH_END,   /* the user stopped speaking it */
    CZ_OAI_EV_PLAYBACK,     /* played_s of the received_s seconds of the reply's audio */
    CZ_OAI_EV_BARGE_IN      /* the user interrupted the reply */
} cz_oai_event_type;

/* A parsed event body: {"type": ..., "played_s": s, "received_s": s, "heard_tokens": n}.
 * playback requires played_s and received_s (played_s <= received_s); barge_in takes an
 * optional played_s and heard_tokens; the speech events take nothing else. Unknown fields
 * are refused. */
typedef struct cz_oai_event {
    cz_oai_event_type type;
    double played_s, received_s;  /* [0, CZ_OAI_MAX_EVENT_S] */
    bool has_played;
    int64_t heard_tokens;         /* -1 when absent */
} cz_oai_event;

/* Parses an event body, as cz_oai_parse: CZ_OK, or the 400 (413 past
 * CZ_OAI_MAX_EVENT_BYTES) naming the field in *e. */
cz_status cz_oai_parse_event(const char *body, size_t len, cz_oai_event *out, cz_oai_error *e);
/* "speech_start", ...: the type's spelling. */
const char *cz_oai_event_name(cz_oai_event_type t);
/* Whether `url` is /v1/sessions/{id}/events with an id of 1 to cap-1 bytes and no '/';
 * the id is copied to id[0..cap). */
bool cz_oai_session_path(const char *url, char *id, size_t cap);

/* What an event did, for its response body. */
typedef struct cz_oai_event_result {
    cz_oai_event_type type;
    bool applied;            /* it changed what the runtime does */
    int preload;             /* speech_start: 0 none, 1 started, 2 skipped (cz_preload_outcome) */
    int64_t heard_tokens;    /* barge_in: tokens of the reply kept as heard */
    int64_t context_tokens;  /* barge_in: tokens of the session's context kept */
} cz_oai_event_result;

/* {"object":"session.event","session_id":...,"type":...,"applied":...} and, for speech_start,
 * "preload"; for barge_in, "heard_tokens" and "context_tokens". */
void cz_oai_event_body(cz_oai_buf *b, const char *session, const cz_oai_event_result *r);

#ifdef __cplusplus
}
#endif

#endif
