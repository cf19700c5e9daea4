/* test_sse.c - the HTTP client's reading of a streamed response (client/cz_sse.h): the
 * event-stream splitter on every line ending, comments, fields it ignores, multi-line data,
 * events split at every byte, its bound, the end of a body without its blank line; and
 * chunks as `vllm bench serve` reads them: completions and chat shapes, the usage chunk,
 * [DONE], error objects, and malformed chunks with the field named. The response bytes are
 * `cadenza serve`'s own (the vLLM goldens of test_oai.c), so the two ends agree. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_sse.h"

typedef struct got {
    char ev[16][256];
    size_t n;
    size_t stop_after; /* 0: never stop */
} got;

static bool collect(void *ctx, const char *data, size_t n)
{
    got *g = ctx;
    cr_assert_lt(g->n, 16);
    cr_assert_lt(n, 256);
    memcpy(g->ev[g->n], data, n);
    g->ev[g->n][n] = 0;
    g->n++;
    return !g->stop_after || g->n < g->stop_after;
}

/* Feeds `s` whole, then split at every byte boundary pair, and expects the same events. */
static void expect_events(const char *s, const char *const *want, size_t n_want)
{
    size_t len = strlen(s);
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b += (len > 40 ? 7 : 1)) {
            cz_sse sse;
            cz_sse_init(&sse, 0);
            got g = {0};
            cz_err e;
            cr_assert_eq(cz_sse_feed(&sse, s, a, collect, &g, &e), CZ_OK);
            cr_assert_eq(cz_sse_feed(&sse, s + a, b - a, collect, &g, &e), CZ_OK);
            cr_assert_eq(cz_sse_feed(&sse, s + b, len - b, collect, &g, &e), CZ_OK);
            cz_sse_end(&sse, collect, &g);
            cr_assert_eq(g.n, n_want, "split %zu/%zu of '%s': %zu events, expected %zu", a, b, s,
                         g.n, n_want);
            for (size_t i = 0; i < n_want; i++)
                cr_assert_str_eq(g.ev[i], want[i], "split %zu/%zu, event %zu", a, b, i);
            cz_sse_free(&sse);
        }
    }
}

Test(sse, events_on_every_line_ending)
{
    const char *want[] = {"{\"a\":1}", "[DONE]"};
    expect_events("data: {\"a\":1}\n\ndata: [DONE]\n\n", want, 2);
    expect_events("data: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n", want, 2);
    expect_events("data: {\"a\":1}\r\rdata: [DONE]\r\r", want, 2);
    expect_events("data:{\"a\":1}\n\ndata:[DONE]\n\n", want, 2); /* no space */
}

Test(sse, comments_fields_and_multiline_data)
{
    const char *want[] = {"line1\nline2", "  two spaces", ""};
    expect_events(": ping\n\nevent: message\nid: 7\nretry: 10\ndata: line1\ndata: line2\n\n"
                  ":another comment\ndata:   two spaces\n\ndata\n\n",
                  want, 3);
    /* blank lines with no data dispatch nothing */
    expect_events("\n\n\n: x\n\n", NULL, 0);
}

Test(sse, a_body_cut_without_its_blank_line)
{
    const char *want[] = {"{\"a\":1}", "[DONE]"};
    cz_sse sse;
    cz_sse_init(&sse, 0);
    got g = {0};
    cz_err e;
    const char *s = "data: {\"a\":1}\n\ndata: [DONE]";
    cr_assert_eq(cz_sse_feed(&sse, s, strlen(s), collect, &g, &e), CZ_OK);
    cr_assert_eq(g.n, 1);
    cr_assert(cz_sse_end(&sse, collect, &g), "a cut stream says so");
    cr_assert_eq(g.n, 2);
    cr_assert_str_eq(g.ev[0], want[0]);
    cr_assert_str_eq(g.ev[1], want[1]);
    cz_sse_free(&sse);
    /* a whole body ends clean */
    cz_sse_init(&sse, 0);
    g = (got){0};
    s = "data: [DONE]\n\n";
    cr_assert_eq(cz_sse_feed(&sse, s, strlen(s), collect, &g, &e), CZ_OK);
    cr_assert_not(cz_sse_end(&sse, collect, &g));
    cz_sse_free(&sse);
}

Test(sse, the_bound_and_a_stop)
{
    cz_sse sse;
    cz_sse_init(&sse, 64);
    got g = {0};
    cz_err e;
    char big[200];
    memset(big, 'x', sizeof big);
    memcpy(big, "data: ", 6);
    cr_assert_eq(cz_sse_feed(&sse, big, sizeof big, collect, &g, &e), CZ_EINVAL);
    cr_assert(strstr(e.msg, "over 64 bytes"), "%s", e.msg);
    cz_sse_free(&sse);
    /* data lines that together pass the bound */
    cz_sse_init(&sse, 64);
    const char *s = "data: 0123456789012345678901234567890\ndata: 0123456789012345678901234567890\n";
    cr_assert_eq(cz_sse_feed(&sse, s, strlen(s), collect, &g, &e), CZ_EINVAL);
    cz_sse_free(&sse);
    /* the callback stops the feed */
    cz_sse_init(&sse, 0);
    g = (got){.stop_after = 1};
    s = "data: 1\n\ndata: 2\n\n";
    cr_assert_eq(cz_sse_feed(&sse, s, strlen(s), collect, &g, &e), CZ_OK);
    cr_assert_eq(g.n, 1);
    cz_sse_free(&sse);
}

static void chunk_ok(const char *data, cz_oai_chunk *c)
{
    cz_err e;
    cr_assert_eq(cz_oai_chunk_parse(data, strlen(data), c, &e), CZ_OK, "%s: %s", data, e.msg);
}

Test(sse, completions_and_chat_chunks)
{
    cz_oai_chunk c;
    /* cadenza serve's (vLLM's) completions chunk */
    chunk_ok("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
             "\"choices\":[{\"index\":0,\"text\":\" Hello\",\"logprobs\":null,"
             "\"finish_reason\":null,\"stop_reason\":null}]}",
             &c);
    cr_assert(c.has_choices && !c.has_usage && !c.done && !c.has_error);
    cr_assert_eq(c.text_len, 6);
    cr_assert_eq(memcmp(c.text, " Hello", 6), 0);
    cr_assert_str_eq(c.finish_reason, "");
    cz_oai_chunk_free(&c);
    /* the finishing chunk */
    chunk_ok("{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}", &c);
    cr_assert(c.has_choices);
    cr_assert_str_eq(c.finish_reason, "length");
    cr_assert_eq(c.text_len, 0);
    cz_oai_chunk_free(&c);
    /* the usage chunk: no choices */
    chunk_ok("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
             "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":12,"
             "\"completion_tokens\":7}}",
             &c);
    cr_assert(!c.has_choices && c.has_usage);
    cr_assert_eq(c.completion_tokens, 7);
    cr_assert_eq(c.prompt_tokens, 5);
    cz_oai_chunk_free(&c);
    /* chat: the role chunk (content ""), a delta, a null content */
    chunk_ok("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
             "\"logprobs\":null,\"finish_reason\":null}]}",
             &c);
    cr_assert(c.has_choices);
    cr_assert_eq(c.text_len, 0);
    cr_assert_not_null(c.text);
    cz_oai_chunk_free(&c);
    chunk_ok("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}",
             &c);
    cr_assert_eq(c.text_len, 2);
    cz_oai_chunk_free(&c);
    chunk_ok("{\"choices\":[{\"index\":0,\"delta\":{\"content\":null},\"finish_reason\":\"stop\"}]}",
             &c);
    cr_assert_null(c.text);
    cr_assert_str_eq(c.finish_reason, "stop");
    cz_oai_chunk_free(&c);
    /* [DONE], with vLLM's stripping */
    chunk_ok("[DONE]", &c);
    cr_assert(c.done);
    cz_oai_chunk_free(&c);
    chunk_ok(" [DONE]\r\n", &c);
    cr_assert(c.done);
    cz_oai_chunk_free(&c);
}

Test(sse, error_objects)
{
    cz_oai_chunk c;
    /* vLLM's mid-stream error */
    chunk_ok("{\"error\": {\"object\": \"error\", \"message\": \"out of KV\", \"type\": "
             "\"InternalServerError\", \"param\": null, \"code\": 500}}",
             &c);
    cr_assert(c.has_error);
    cr_assert_str_eq(c.error, "out of KV");
    cz_oai_chunk_free(&c);
    chunk_ok("{\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\"}", &c);
    cr_assert(c.has_error);
    cr_assert_str_eq(c.error, "bad");
    cz_oai_chunk_free(&c);
    chunk_ok("{\"error\":\"plain text\"}", &c);
    cr_assert(c.has_error);
    cr_assert_str_eq(c.error, "plain text");
    cz_oai_chunk_free(&c);
}

Test(sse, malformed_chunks_name_the_field)
{
    static const struct {
        const char *data, *want;
    } bad[] = {
        {"", "expected a JSON object or [DONE]"},
        {"{\"choices\":", "expected a JSON object or [DONE]"},
        {"[1,2]", "expected a JSON object or [DONE]"},
        {"{\"choices\":{}}", "choices: expected an array"},
        {"{\"choices\":[1]}", "choices[0]: expected an object"},
        {"{\"choices\":[{\"text\":5}]}", "choices[0]: text: expected a string"},
        {"{\"choices\":[{\"delta\":[]}]}", "choices[0].delta: expected an object"},
        {"{\"choices\":[{\"delta\":{\"content\":1}}]}", "delta.content: expected a string"},
        {"{\"choices\":[{\"text\":\"a\",\"finish_reason\":3}]}", "finish_reason: expected a string"},
        {"{\"choices\":[],\"usage\":[]}", "usage: expected an object"},
        {"{\"choices\":[],\"usage\":{\"completion_tokens\":-1}}", "usage.completion_tokens"},
        {"{\"choices\":[],\"usage\":{\"completion_tokens\":1.5}}", "usage.completion_tokens"},
        {"{\"choices\":[],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":\"x\"}}",
         "usage.prompt_tokens"},
        {"{\"choices\":[{\"text\":\"a\",\"token_ids\":7}]}", "token_ids: expected an array"},
        {"{\"choices\":[{\"text\":\"a\",\"token_ids\":[1,-2]}]}", "token_ids[1]: expected a token id"},
        {"{\"choices\":[{\"text\":\"a\",\"token_ids\":[1.5]}]}", "token_ids[0]"},
        {"{\"choices\":[{\"text\":\"a\",\"token_ids\":[4294967296]}]}", "token_ids[0]"},
        {"{\"choices\":[{\"text\":\"a\",\"token_ids\":[\"3\"]}]}", "token_ids[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cz_oai_chunk c;
        cz_err e;
        cr_assert_eq(cz_oai_chunk_parse(bad[i].data, strlen(bad[i].data), &c, &e), CZ_EINVAL,
                     "%s", bad[i].data);
        cr_assert(strstr(e.msg, bad[i].want), "%s: '%s'", bad[i].data, e.msg);
        cz_oai_chunk_free(&c); /* safe on a failed chunk */
    }
}

Test(sse, token_ids_as_vllm_returns_them)
{
    static const char ok[] =
        "{\"choices\":[{\"index\":0,\"text\":\"ab\",\"token_ids\":[17,4294967295,0]}]}";
    cz_oai_chunk c;
    cz_err e;
    cr_assert_eq(cz_oai_chunk_parse(ok, strlen(ok), &c, &e), CZ_OK, "%s", e.msg);
    cr_assert_eq(c.n_token_ids, 3);
    uint32_t ids[3];
    cz_oai_chunk_token_ids(&c, ids);
    cr_assert(ids[0] == 17 && ids[1] == 4294967295u && ids[2] == 0);
    cz_oai_chunk_free(&c);
    static const char *const none[] = {"{\"choices\":[{\"text\":\"a\"}]}",
                                       "{\"choices\":[{\"text\":\"a\",\"token_ids\":null}]}"};
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(cz_oai_chunk_parse(none[i], strlen(none[i]), &c, &e), CZ_OK, "%s", e.msg);
        cr_assert_eq(c.n_token_ids, -1, "%s", none[i]);
        cz_oai_chunk_free(&c);
    }
    static const char empty[] = "{\"choices\":[{\"text\":\"\",\"token_ids\":[]}]}";
    cr_assert_eq(cz_oai_chunk_parse(empty, strlen(empty), &c, &e), CZ_OK, "%s", e.msg);
    cr_assert_eq(c.n_token_ids, 0);
    cz_oai_chunk_token_ids(&c, ids);
    cz_oai_chunk_free(&c);
}
