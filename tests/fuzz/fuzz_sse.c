/* fuzz_sse.c - libFuzzer harness for the HTTP client's reading of a streamed response
 * (client/cz_sse.h): the input is a response body. It is fed to the event-stream splitter
 * whole and again in pieces (cut where the input's own bytes say), with a small event bound,
 * and each event is read as a chunk. Checks: both feeds give the same events, byte for byte,
 * or the same refusal; no event passes the bound; every chunk read is one of [DONE], an
 * error, a token chunk or a usage chunk (never a token chunk and a usage chunk at once), its
 * text pointer inside its own JSON text and its counts -1 or non-negative; a refused chunk
 * leaves nothing to free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_sse.h"
#include "fuzz_util.h"

#define BOUND 4096u

typedef struct log {
    char *bytes;  /* every event's data, each followed by a NUL */
    size_t n, cap;
    size_t events;
} log_t;

static void check_chunk(const char *data, size_t n)
{
    cz_oai_chunk c;
    cz_err e;
    cz_status st = cz_oai_chunk_parse(data, n, &c, &e);
    if (st != CZ_OK) {
        if (st != CZ_EINVAL || e.msg[0] == '\0')
            cz_fuzz_fail("cz_oai_chunk_parse", "a refusal without CZ_EINVAL and a message");
        if (c.json_ || c.text)
            cz_fuzz_fail("cz_oai_chunk_parse", "a refused chunk kept memory");
        return;
    }
    int kinds = c.done + c.has_error + (c.has_choices || c.has_usage);
    if (kinds > 1 || (c.has_choices && c.has_usage))
        cz_fuzz_fail("cz_oai_chunk_parse", "a chunk of two kinds");
    if (c.completion_tokens < -1 || c.prompt_tokens < -1)
        cz_fuzz_fail("cz_oai_chunk_parse", "a count below -1");
    if (c.text && strlen(c.text) != c.text_len)
        cz_fuzz_fail("cz_oai_chunk_parse", "text_len is not the text's length");
    if (c.text && !c.has_choices)
        cz_fuzz_fail("cz_oai_chunk_parse", "text without choices");
    if (strnlen(c.finish_reason, sizeof c.finish_reason) == sizeof c.finish_reason ||
        strnlen(c.error, sizeof c.error) == sizeof c.error)
        cz_fuzz_fail("cz_oai_chunk_parse", "an unterminated string");
    if (c.n_token_ids < -1 || (c.n_token_ids >= 0 && !c.has_choices))
        cz_fuzz_fail("cz_oai_chunk_parse", "token ids without choices");
    if (c.n_token_ids > 0) {
        uint32_t *ids = malloc((size_t)c.n_token_ids * sizeof *ids);
        cz_oai_chunk_token_ids(&c, ids); /* asserts it finds exactly n_token_ids */
        free(ids);
    }
    cz_oai_chunk_free(&c);
}

static bool on_event(void *ctx, const char *data, size_t n)
{
    log_t *l = ctx;
    if (n > BOUND)
        cz_fuzz_fail("cz_sse_feed", "an event over the bound");
    if (l->n + n + 1 > l->cap) {
        l->cap = (l->n + n + 1) * 2;
        l->bytes = realloc(l->bytes, l->cap);
        if (!l->bytes)
            abort();
    }
    memcpy(l->bytes + l->n, data, n);
    l->bytes[l->n + n] = 0;
    l->n += n + 1;
    l->events++;
    check_chunk(data, n);
    return true;
}

/* Feeds data[0..size) in pieces ending at the cuts, then ends the body. */
static cz_status feed(const uint8_t *data, size_t size, const size_t *cuts, size_t n_cuts,
                      log_t *l, bool *cut_end)
{
    cz_sse s;
    cz_sse_init(&s, BOUND);
    cz_err e;
    size_t at = 0;
    cz_status st = CZ_OK;
    for (size_t i = 0; i <= n_cuts && st == CZ_OK; i++) {
        size_t to = i < n_cuts ? cuts[i] : size;
        st = cz_sse_feed(&s, (const char *)data + at, to - at, on_event, l, &e);
        at = to;
    }
    if (st == CZ_OK)
        *cut_end = cz_sse_end(&s, on_event, l);
    else if (e.msg[0] == '\0')
        cz_fuzz_fail("cz_sse_feed", "a refusal without a message");
    cz_sse_free(&s);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cuts[16], n_cuts = 0;
    /* cut after every byte whose low bits are 0x1f, and in the middle */
    for (size_t i = 0; i < size && n_cuts < 15; i++)
        if ((data[i] & 0x1f) == 0x1f)
            cuts[n_cuts++] = i + 1;
    if (n_cuts < 16 && size > 1 && (n_cuts == 0 || cuts[n_cuts - 1] < size / 2))
        cuts[n_cuts++] = size / 2;
    for (size_t i = 1; i < n_cuts; i++) /* sorted: the middle may come before a later cut */
        for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            size_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    log_t whole = {0}, pieces = {0};
    bool cut_w = false, cut_p = false;
    cz_status a = feed(data, size, NULL, 0, &whole, &cut_w);
    cz_status b = feed(data, size, cuts, n_cuts, &pieces, &cut_p);
    if (a != b)
        cz_fuzz_fail("cz_sse_feed", "whole and in pieces, one refused and one did not");
    if (a == CZ_OK && (whole.events != pieces.events || whole.n != pieces.n ||
                       (whole.n && memcmp(whole.bytes, pieces.bytes, whole.n) != 0) ||
                       cut_w != cut_p))
        cz_fuzz_fail("cz_sse_feed", "whole and in pieces, different events");
    free(whole.bytes);
    free(pieces.bytes);
    return 0;
}
