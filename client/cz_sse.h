/* cz_sse.h - the client's side of the OpenAI streaming protocol (docs/http-replay.md):
 * a server-sent-events splitter fed the response body as it arrives, and the reading of
 * one event's data as a completions or chat completions chunk, as `vllm bench serve`
 * reads it (vllm/benchmarks/lib/endpoint_request_func.py).
 *
 * Pure functions over bounded buffers: no I/O, no clock, no globals (cJSON's parser keeps
 * one error pointer per process; the client runs it on one thread). Fuzzed by
 * tests/fuzz/fuzz_sse.c. */
#ifndef CZ_SSE_H
#define CZ_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

/* Largest event (its data lines together) a splitter accepts by default. */
#define CZ_SSE_MAX_EVENT_BYTES ((size_t)1 << 20)

/* An event-stream splitter (the WHATWG event-stream format): lines end with LF, CRLF or
 * CR, a line beginning with ':' is a comment, "data:" lines (one leading space dropped)
 * accumulate with LF between them, other fields (event, id, retry) are ignored, and a blank
 * line dispatches the accumulated data. The buffer grows to the largest event seen, at
 * most `max_bytes`. */
typedef struct cz_sse {
    char *buf;            /* the current line, then the event's data after it */
    size_t line, len, cap;/* bytes of data before the current line; bytes in all; capacity */
    size_t max_bytes;
    bool data_seen;       /* a data line since the last dispatch */
    bool skip_lf;         /* the last byte fed was CR: an LF next ends nothing */
    uint64_t events;      /* events dispatched */
} cz_sse;

/* Called with each event's data (not NUL-terminated; `n` may be 0); returning false stops
 * the feed (cz_sse_feed then returns CZ_OK having consumed what came before). */
typedef bool (*cz_sse_event_fn)(void *ctx, const char *data, size_t n);

/* An empty splitter accepting events up to max_bytes (0: CZ_SSE_MAX_EVENT_BYTES). */
void cz_sse_init(cz_sse *s, size_t max_bytes);
void cz_sse_free(cz_sse *s);
/* Feeds `n` bytes of the body (any split), calling `fn` for each event completed.
 * CZ_EINVAL when an event or line would pass max_bytes (the stream is unusable after). */
cz_status cz_sse_feed(cz_sse *s, const char *p, size_t n, cz_sse_event_fn fn, void *ctx,
                      cz_err *err);
/* The body ended: data accumulated without its blank line is dispatched as an event (as
 * `vllm bench serve` takes a last "data:" message), and true is returned when that or a
 * partial line was left (the stream was cut after a complete line, or inside one). */
bool cz_sse_end(cz_sse *s, cz_sse_event_fn fn, void *ctx);

/* One streamed chunk read as `vllm bench serve` reads it. */
typedef struct cz_oai_chunk {
    bool done;              /* the data was "[DONE]" */
    bool has_choices;       /* a non-empty "choices" array: a token chunk (TTFT, ITL) */
    bool has_usage;         /* no choices and a "usage" object */
    bool has_error;         /* an "error" object or "object": "error" (message in error) */
    int64_t completion_tokens; /* usage's, -1 when absent */
    int64_t prompt_tokens;     /* usage's, -1 when absent */
    const char *text;       /* choices[0]'s "text" (completions) or delta "content" (chat),
                               inside the chunk's JSON (valid until cz_oai_chunk_free); NULL
                               when absent or null */
    size_t text_len;
    char finish_reason[32]; /* choices[0]'s, "" when null or absent (truncated) */
    int64_t n_token_ids;    /* choices[0]'s "token_ids" (vLLM's return_token_ids: the ids
                               this chunk carries), -1 when absent or null */
    char error[256];
    void *json_;            /* the parsed JSON, owned */
    const void *token_ids_; /* the token_ids array inside it */
} cz_oai_chunk;

/* Reads one event's data. CZ_EINVAL naming what is wrong when it is neither "[DONE]" nor
 * a JSON object, or a field has the wrong type (choices not an array, text not a string,
 * usage's counts not non-negative integers). On success the chunk holds the parsed JSON
 * until cz_oai_chunk_free (safe on a zeroed or failed chunk). */
cz_status cz_oai_chunk_parse(const char *data, size_t n, cz_oai_chunk *c, cz_err *err);
/* The n_token_ids (>= 0) token ids of a parsed chunk into out (checked by the parse:
 * integers in [0, 2^32)). */
void cz_oai_chunk_token_ids(const cz_oai_chunk *c, uint32_t *out);
void cz_oai_chunk_free(cz_oai_chunk *c);

#endif
