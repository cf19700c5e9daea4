/* test_oai.c - the OpenAI protocol layer of `cadenza serve` (serve/cz_oai.h): every request
 * field's accepted and refused values with the error's message, param and status; the four
 * prompt shapes and both message content forms; malformed bodies with their byte offsets;
 * and the response bodies against golden bytes.
 *
 * Where the goldens come from: vLLM main at commit 9aaf83ef5 (2026-05-19). Its response
 * models (vllm/entrypoints/openai/{completion,chat_completion,engine}/protocol.py) were
 * declared field for field in pydantic 2.13 and built exactly as the serving generators
 * build them (completion/serving.py completion_stream_generator and
 * request_output_to_completion_response, chat_completion/serving.py
 * chat_completion_stream_generator and chat_completion_full_generator), then serialized the
 * way vLLM sends them: streamed chunks by model_dump_json(exclude_unset=True), the usage
 * chunk with exclude_none=True, whole responses and error bodies by Starlette's JSONResponse
 * (json.dumps(model_dump(), ensure_ascii=False, separators=(",", ":"))), mid-stream errors
 * by json.dumps with its defaults. Each golden below names its case. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cz_oai.h"

/* Under AddressSanitizer every test ends with a leak check that fails the test: Criterion
 * alone counts LeakSanitizer's report at a worker's exit as a warning, not a failure. */
#if defined(__SANITIZE_ADDRESS__)
#define OAI_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OAI_LSAN 1
#endif
#endif
#ifdef OAI_LSAN
#include <sanitizer/lsan_interface.h>
static void no_leaks(void)
{
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "the test leaked memory (see above)");
}
#else
static void no_leaks(void)
{
}
#endif
TestSuite(oai_parse, .fini = no_leaks);
TestSuite(oai_fields, .fini = no_leaks);
TestSuite(oai_body, .fini = no_leaks);
TestSuite(oai_headers, .fini = no_leaks);
TestSuite(oai_format, .fini = no_leaks);

/* ---- helpers ------------------------------------------------------------------------------ */

static cz_oai_request parse_ok(cz_oai_endpoint ep, const char *body)
{
    cz_oai_request r;
    cz_oai_error e;
    memset(&e, 0, sizeof e);
    cz_status st = cz_oai_parse(ep, body, strlen(body), &r, &e);
    cr_assert_eq(st, CZ_OK, "refused %s: %s", body, e.message);
    return r;
}

/* Parses `body`, which must fail with `status` (HTTP), a message holding `piece` and the
 * param `param` ("" for null); returns the cz_status. */
static cz_status parse_fail(cz_oai_endpoint ep, const char *body, int status, const char *param,
                            const char *piece)
{
    cz_oai_request r;
    cz_oai_error e;
    memset(&e, 0, sizeof e);
    cz_status st = cz_oai_parse(ep, body, strlen(body), &r, &e);
    cr_assert_neq(st, CZ_OK, "accepted %s", body);
    cr_assert_eq(e.status, status, "%s: status %d: %s", body, e.status, e.message);
    cr_assert(strstr(e.message, piece) != NULL, "%s: message '%s' lacks '%s'", body, e.message,
              piece);
    cr_assert_str_eq(e.param, param, "%s: param '%s'", body, e.param);
    cr_assert(e.message[0] != '\0');
    /* nothing is left to free: the struct is zeroed */
    cr_assert_null(r.prompts);
    cr_assert_null(r.messages);
    cr_assert_null(r.model);
    cr_assert_null(r.user);
    cr_assert_null(r.stop_token_ids);
    cr_assert_eq(r.n_stop, 0);
    cz_oai_request_free(&r);
    return st;
}

/* A completions body with the field `extra` ("\"n\": 3") after a minimal prompt. */
static char *compl_with(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "{\"model\": \"m\", \"prompt\": \"Hi\", %s}", extra);
    return buf;
}

static char *chat_with(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], %s}",
             extra);
    return buf;
}

static void field_ok(const char *extra)
{
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, compl_with(extra));
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, chat_with(extra));
    cz_oai_request_free(&r);
}

static void field_bad(const char *extra, const char *param, const char *piece)
{
    parse_fail(CZ_OAI_COMPLETIONS, compl_with(extra), 400, param, piece);
    parse_fail(CZ_OAI_CHAT, chat_with(extra), 400, param, piece);
}

/* ---- whole requests ----------------------------------------------------------------------- */

Test(oai_parse, vllm_bench_completions_request)
{
    /* what `vllm bench serve --backend vllm --ignore-eos --temperature 0` sends: the payload of
     * vllm/benchmarks/lib/endpoint_request_func.py async_request_openai_completions, with
     * ignore_eos and the sampling extra_body added by _update_payload_common */
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS,
        "{\"model\": \"meta-llama/Llama-3.2-1B\", \"prompt\": \"The capital of France is\", "
        "\"temperature\": 0.0, \"repetition_penalty\": 1.0, \"max_tokens\": 128, "
        "\"logprobs\": null, \"stream\": true, \"stream_options\": {\"include_usage\": true}, "
        "\"ignore_eos\": true}");
    cr_assert_eq(r.endpoint, CZ_OAI_COMPLETIONS);
    cr_assert_str_eq(r.model, "meta-llama/Llama-3.2-1B");
    cr_assert_eq(r.n_prompts, 1);
    cr_assert_str_eq(r.prompts[0].text, "The capital of France is");
    cr_assert_eq(r.prompts[0].text_len, 24);
    cr_assert_null(r.prompts[0].ids);
    cr_assert_eq(r.max_tokens, 128);
    cr_assert(r.has_temperature && r.temperature == 0.0);
    cr_assert(!r.has_top_p && r.top_p == 1.0);
    cr_assert(!r.has_top_k && r.top_k == 0);
    cr_assert(r.stream && r.include_usage && !r.continuous_usage && r.ignore_eos);
    cr_assert_null(r.messages);
    cz_oai_request_free(&r);
    cr_assert_null(r.prompts);
    cz_oai_request_free(&r); /* twice is harmless */
}

Test(oai_parse, vllm_bench_chat_request)
{
    /* async_request_openai_chat_completions (--backend openai-chat): one user message whose
     * content is a list with one text part */
    cz_oai_request r = parse_ok(CZ_OAI_CHAT,
        "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
        "\"text\", \"text\": \"Tell me a story\"}]}], \"max_completion_tokens\": 256, "
        "\"stream\": true, \"stream_options\": {\"include_usage\": true}, "
        "\"ignore_eos\": true}");
    cr_assert_eq(r.n_messages, 1);
    cr_assert_eq(r.messages[0].role, CZ_OAI_ROLE_USER);
    cr_assert_str_eq(r.messages[0].content, "Tell me a story");
    cr_assert_eq(r.max_tokens, 256);
    cr_assert(r.stream && r.include_usage && !r.continuous_usage && r.ignore_eos);
    cz_oai_request_free(&r);
}

Test(oai_parse, openai_client_chat_request)
{
    /* what the openai Python client sends for client.chat.completions.create(...) */
    cz_oai_request r = parse_ok(CZ_OAI_CHAT,
        "{\"messages\": [{\"role\": \"developer\", \"content\": \"Be brief.\"}, "
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hello\"}, "
        "{\"type\": \"text\", \"text\": \"there\"}]}, "
        "{\"role\": \"assistant\", \"content\": null}, "
        "{\"role\": \"system\", \"content\": \"\", \"name\": \"x\"}], "
        "\"model\": \"m\", \"max_completion_tokens\": 64, \"max_tokens\": 9, \"seed\": 7, "
        "\"stop\": [\"\\n\\n\", \"END\"], \"stream\": false, \"top_p\": 0.9, \"top_k\": -1, "
        "\"user\": \"alice\", \"n\": 1, \"parallel_tool_calls\": null, "
        "\"service_tier\": \"auto\", \"metadata\": {\"a\": \"b\"}, \"store\": false, "
        "\"reasoning_effort\": \"low\", \"some_future_field\": [1, {\"x\": 2}]}");
    cr_assert_eq(r.endpoint, CZ_OAI_CHAT);
    cr_assert_eq(r.n_messages, 4);
    cr_assert_eq(r.messages[0].role, CZ_OAI_ROLE_SYSTEM); /* developer -> system */
    cr_assert_str_eq(r.messages[0].content, "Be brief.");
    cr_assert_eq(r.messages[1].role, CZ_OAI_ROLE_USER);
    cr_assert_str_eq(r.messages[1].content, "Hello\nthere"); /* vLLM joins parts with \n */
    cr_assert_eq(r.messages[1].content_len, 11);
    cr_assert_eq(r.messages[2].role, CZ_OAI_ROLE_ASSISTANT);
    cr_assert_str_eq(r.messages[2].content, ""); /* null content: no parts */
    cr_assert_str_eq(r.messages[3].content, "");
    cr_assert_str_eq(cz_oai_role_name(r.messages[2].role), "assistant");
    cr_assert_str_eq(cz_oai_role_name(CZ_OAI_ROLE_SYSTEM), "system");
    cr_assert_eq(r.max_tokens, 64); /* max_completion_tokens wins */
    cr_assert(r.has_seed && r.seed == 7);
    cr_assert_eq(r.n_stop, 2);
    cr_assert_str_eq(r.stop[0], "\n\n");
    cr_assert_str_eq(r.stop[1], "END");
    cr_assert(r.has_top_p && fabs(r.top_p - 0.9) < 1e-15);
    cr_assert(r.has_top_k && r.top_k == 0);
    cr_assert_str_eq(r.user, "alice");
    cr_assert(!r.stream && !r.include_usage);
    cr_assert_null(r.prompts);
    cz_oai_request_free(&r);
}

Test(oai_parse, defaults)
{
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, "{\"prompt\": \"x\"}");
    cr_assert_null(r.model);
    cr_assert_eq(r.max_tokens, 16); /* vLLM's CompletionRequest default */
    cr_assert_eq(r.min_tokens, 0);
    cr_assert(r.temperature == 1.0 && r.top_p == 1.0 && r.top_k == 0);
    cr_assert(!r.has_temperature && !r.has_seed && !r.stream && !r.ignore_eos);
    cr_assert_eq(r.n_stop, 0);
    cr_assert_eq(r.n_stop_token_ids, 0);
    cz_oai_request_free(&r);
    /* null means the default, max_tokens too (normalize_null_max_tokens) */
    r = parse_ok(CZ_OAI_COMPLETIONS,
                 "{\"prompt\": \"x\", \"max_tokens\": null, \"temperature\": null, "
                 "\"stop\": null, \"stream\": null, \"model\": null, \"user\": null}");
    cr_assert_eq(r.max_tokens, 16);
    cr_assert(!r.has_temperature);
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}");
    cr_assert_eq(r.max_tokens, 0); /* chat: up to the context length */
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, "{\"messages\": [{\"role\": \"user\"}], \"max_tokens\": 5}");
    cr_assert_eq(r.max_tokens, 5);
    cr_assert_str_eq(r.messages[0].content, "");
    cz_oai_request_free(&r);
}

/* ---- prompts ------------------------------------------------------------------------------ */

Test(oai_parse, four_prompt_shapes)
{
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, "{\"prompt\": \"caf\xc3\xa9\"}");
    cr_assert_eq(r.n_prompts, 1);
    cr_assert_eq(r.prompts[0].text_len, 5);
    cz_oai_request_free(&r);

    r = parse_ok(CZ_OAI_COMPLETIONS, "{\"prompt\": [1, 0, 2147483647]}");
    cr_assert_eq(r.n_prompts, 1);
    cr_assert_null(r.prompts[0].text);
    cr_assert_eq(r.prompts[0].n_ids, 3);
    cr_assert_eq(r.prompts[0].ids[0], 1);
    cr_assert_eq(r.prompts[0].ids[1], 0);
    cr_assert_eq(r.prompts[0].ids[2], 2147483647);
    cz_oai_request_free(&r);

    r = parse_ok(CZ_OAI_COMPLETIONS, "{\"prompt\": [\"a\", \"bc\", \"def\"]}");
    cr_assert_eq(r.n_prompts, 3);
    cr_assert_str_eq(r.prompts[2].text, "def");
    cr_assert_eq(r.prompts[1].text_len, 2);
    cz_oai_request_free(&r);

    r = parse_ok(CZ_OAI_COMPLETIONS, "{\"prompt\": [[5, 6], [7], [8, 9, 10.0]]}");
    cr_assert_eq(r.n_prompts, 3);
    cr_assert_eq(r.prompts[0].n_ids, 2);
    cr_assert_eq(r.prompts[1].ids[0], 7);
    cr_assert_eq(r.prompts[2].n_ids, 3);
    cr_assert_eq(r.prompts[2].ids[2], 10); /* 10.0 is the integer 10 */
    cz_oai_request_free(&r);
}

Test(oai_parse, bad_prompts)
{
    cz_oai_endpoint C = CZ_OAI_COMPLETIONS;
    parse_fail(C, "{\"model\": \"m\"}", 400, "prompt", "prompt: missing");
    parse_fail(C, "{\"prompt\": null}", 400, "prompt", "prompt: missing");
    parse_fail(C, "{\"prompt\": \"\"}", 400, "prompt", "prompt: empty prompt");
    parse_fail(C, "{\"prompt\": []}", 400, "prompt", "prompt: empty array");
    parse_fail(C, "{\"prompt\": [[]]}", 400, "prompt[0]", "prompt[0]: empty token id list");
    parse_fail(C, "{\"prompt\": [[1], []]}", 400, "prompt[1]", "empty token id list");
    parse_fail(C, "{\"prompt\": [\"a\", \"\"]}", 400, "prompt[1]", "prompt[1]: empty prompt");
    parse_fail(C, "{\"prompt\": 5}", 400, "prompt",
               "prompt: expected a string or an array, got 5");
    parse_fail(C, "{\"prompt\": {\"text\": \"a\"}}", 400, "prompt", "got an object");
    parse_fail(C, "{\"prompt\": [1, \"a\"]}", 400, "prompt[1]",
               "prompt[1]: expected a token id (an integer), got a string");
    parse_fail(C, "{\"prompt\": [\"a\", 1]}", 400, "prompt[1]",
               "prompt[1]: expected a string (as prompt[0]), got 1");
    parse_fail(C, "{\"prompt\": [[1], 2]}", 400, "prompt[1]", "expected an array of token ids");
    parse_fail(C, "{\"prompt\": [[1], [2, \"x\"]]}", 400, "prompt[1][1]",
               "prompt[1][1]: expected a token id");
    parse_fail(C, "{\"prompt\": [true]}", 400, "prompt[0]",
               "prompt[0]: expected a string, a token id or an array of token ids, got true");
    parse_fail(C, "{\"prompt\": [1, -1]}", 400, "prompt[1]", "must be at least 0, got -1");
    parse_fail(C, "{\"prompt\": [1.5]}", 400, "prompt[0]", "expected an integer, got 1.5");
    parse_fail(C, "{\"prompt\": [2147483648]}", 400, "prompt[0]",
               "must be at most 2147483647, got 2147483648");
    parse_fail(C, "{\"prompt\": [1e300]}", 400, "prompt[0]", "got 1e+300");
}

Test(oai_parse, list_bounds)
{
    /* more token ids than CZ_OAI_MAX_PROMPT_TOKEN_IDS, over two prompts */
    size_t half = CZ_OAI_MAX_PROMPT_TOKEN_IDS / 2 + 1;
    size_t cap = 64 + 2 * half * 2 + 16;
    char *body = malloc(cap);
    size_t n = (size_t)snprintf(body, cap, "{\"prompt\": [[");
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < half; i++) {
            body[n++] = '1';
            body[n++] = ',';
        }
        body[n - 1] = ']';
        if (k == 0) {
            memcpy(body + n, ",[", 2);
            n += 2;
        }
    }
    memcpy(body + n, "]}", 3);
    parse_fail(CZ_OAI_COMPLETIONS, body, 400, "prompt[1]", "more than 1048576 token ids");
    free(body);

    /* CZ_OAI_MAX_PROMPTS + 1 prompts; CZ_OAI_MAX_PROMPTS is fine */
    cap = 32 + 4 * (CZ_OAI_MAX_PROMPTS + 1);
    body = malloc(cap);
    for (int count = CZ_OAI_MAX_PROMPTS; count <= CZ_OAI_MAX_PROMPTS + 1; count++) {
        n = (size_t)snprintf(body, cap, "{\"prompt\": [");
        for (int i = 0; i < count; i++)
            n += (size_t)snprintf(body + n, cap - n, "%s\"a\"", i ? "," : "");
        snprintf(body + n, cap - n, "]}");
        if (count == CZ_OAI_MAX_PROMPTS) {
            cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, body);
            cr_assert_eq(r.n_prompts, CZ_OAI_MAX_PROMPTS);
            cz_oai_request_free(&r);
        } else {
            cr_assert_eq(parse_fail(CZ_OAI_COMPLETIONS, body, 400, "prompt", "1025 prompts"),
                         CZ_ERANGE);
        }
    }
    free(body);

    /* CZ_OAI_MAX_MESSAGES + 1 messages */
    const char *msg = "{\"role\":\"user\"},";
    cap = 32 + strlen(msg) * (CZ_OAI_MAX_MESSAGES + 1);
    body = malloc(cap);
    n = (size_t)snprintf(body, cap, "{\"messages\": [");
    for (int i = 0; i <= CZ_OAI_MAX_MESSAGES; i++) {
        memcpy(body + n, msg, strlen(msg));
        n += strlen(msg);
    }
    memcpy(body + n - 1, "]}", 3);
    parse_fail(CZ_OAI_CHAT, body, 400, "messages", "100001 messages");
    free(body);

    /* stop token ids */
    cap = 64 + 2 * (CZ_OAI_MAX_STOP_TOKEN_IDS + 1);
    body = malloc(cap);
    n = (size_t)snprintf(body, cap, "{\"prompt\": \"a\", \"stop_token_ids\": [");
    for (int i = 0; i <= CZ_OAI_MAX_STOP_TOKEN_IDS; i++) {
        body[n++] = '2';
        body[n++] = ',';
    }
    memcpy(body + n - 1, "]}", 3);
    parse_fail(CZ_OAI_COMPLETIONS, body, 400, "stop_token_ids", "4097 stop token ids");
    free(body);
}

Test(oai_parse, body_size_is_413)
{
    cz_oai_request r;
    cz_oai_error e;
    /* the length alone decides: nothing past the first bytes is read */
    const char *body = "{\"prompt\": \"a\"}";
    cr_assert_eq(cz_oai_parse(CZ_OAI_COMPLETIONS, body, CZ_OAI_MAX_BODY_BYTES + 1, &r, &e),
                 CZ_ERANGE);
    cr_assert_eq(e.status, 413);
    cr_assert_str_eq(e.type, "Request Entity Too Large");
    cr_assert(strstr(e.message, "33554433 bytes") != NULL, "%s", e.message);
    cr_assert_null(r.prompts);
}

/* ---- messages ----------------------------------------------------------------------------- */

Test(oai_parse, message_content_forms)
{
    cz_oai_request r = parse_ok(CZ_OAI_CHAT,
        "{\"messages\": [{\"role\": \"user\", \"content\": [\"plain\", "
        "{\"type\": \"input_text\", \"text\": \"in\"}, {\"text\": \"out\", \"type\": "
        "\"output_text\"}, {\"type\": \"text\", \"text\": \"\"}]}, "
        "{\"role\": \"user\", \"content\": []}, "
        "{\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [], "
        "\"function_call\": null, \"role\": \"user\"}]}");
    cr_assert_eq(r.n_messages, 3);
    cr_assert_str_eq(r.messages[0].content, "plain\nin\nout\n");
    cr_assert_eq(r.messages[0].content_len, 13);
    cr_assert_str_eq(r.messages[1].content, "");
    cr_assert_eq(r.messages[2].role, CZ_OAI_ROLE_USER); /* the last "role" counts */
    cz_oai_request_free(&r);
}

Test(oai_parse, bad_messages)
{
    cz_oai_endpoint H = CZ_OAI_CHAT;
    parse_fail(H, "{\"model\": \"m\"}", 400, "messages", "messages: missing");
    parse_fail(H, "{\"messages\": []}", 400, "messages", "messages: empty array");
    parse_fail(H, "{\"messages\": {\"role\": \"user\"}}", 400, "messages",
               "messages: expected an array of messages, got an object");
    parse_fail(H, "{\"messages\": [\"hi\"]}", 400, "messages[0]",
               "messages[0]: expected a message (an object), got a string");
    parse_fail(H, "{\"messages\": [{\"content\": \"hi\"}]}", 400, "messages[0].role",
               "messages[0].role: missing");
    parse_fail(H, "{\"messages\": [{\"role\": 1}]}", 400, "messages[0].role",
               "expected a string, got 1");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"tool\", \"content\": "
                  "\"42\", \"tool_call_id\": \"c1\"}]}",
               400, "messages[1].role", "messages[1].role: tool messages are not supported");
    parse_fail(H, "{\"messages\": [{\"role\": \"function\"}]}", 400, "messages[0].role",
               "function messages are not supported");
    parse_fail(H, "{\"messages\": [{\"role\": \"robot\"}]}", 400, "messages[0].role",
               "unknown role 'robot': expected system, developer, user or assistant");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}", 400,
               "messages[0].content",
               "messages[0].content: expected a string or an array of content parts, got 3");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
                  "\"image_url\": {\"url\": \"http://x/y.png\"}}]}]}",
               400, "messages[0].content[0].type",
               "messages[0].content[0].type: only text content parts are supported, got "
               "'image_url'");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"a\"}]}]}", 400,
               "messages[0].content[0].type", "missing");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
               400, "messages[0].content[0].text", "messages[0].content[0].text: missing");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                  "\"text\": 5}]}]}",
               400, "messages[0].content[0].text", "expected a string, got 5");
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [7]}]}", 400,
               "messages[0].content[0]", "expected a content part (an object or a string)");
    parse_fail(H, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"1\", "
                  "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
                  "\"{}\"}}]}]}",
               400, "messages[0].tool_calls", "tool calls are not supported");
    parse_fail(H, "{\"messages\": [{\"role\": \"assistant\", \"function_call\": {}}]}", 400,
               "messages[0].function_call", "function calls are not supported");
    /* a failure after earlier messages were read frees them (ASan's leak check) */
    parse_fail(H, "{\"messages\": [{\"role\": \"user\", \"content\": [\"a\", \"b\"]}, "
                  "{\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"x\"}]}",
               400, "messages[2].role", "unknown role");
}

Test(oai_parse, endpoint_specific_fields_are_unknown_elsewhere)
{
    /* "messages" on /v1/completions and "prompt" on chat are ignored like any unknown field */
    parse_fail(CZ_OAI_COMPLETIONS, "{\"messages\": [{\"role\": \"user\"}]}", 400, "prompt",
               "missing");
    parse_fail(CZ_OAI_CHAT, "{\"prompt\": \"hi\"}", 400, "messages", "missing");
    /* max_completion_tokens is chat's; completions ignore it (and suffix is completions') */
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS,
                                "{\"prompt\": \"a\", \"max_completion_tokens\": \"x\"}");
    cr_assert_eq(r.max_tokens, 16);
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, "{\"messages\": [{\"role\": \"user\"}], \"suffix\": \"x\", "
                              "\"echo\": false, \"logprobs\": false, \"top_logprobs\": 0}");
    cz_oai_request_free(&r);
}

/* ---- fields ------------------------------------------------------------------------------- */

Test(oai_fields, model_and_user)
{
    field_ok("\"model\": \"org/name\", \"user\": \"u-1\"");
    field_bad("\"model\": 3", "model", "model: expected a string, got 3");
    field_bad("\"user\": [\"a\"]", "user", "user: expected a string, got an array");
}

Test(oai_fields, max_and_min_tokens)
{
    field_ok("\"max_tokens\": 1");
    field_ok("\"max_tokens\": 9007199254740992");
    field_ok("\"max_tokens\": 32, \"min_tokens\": 32");
    field_ok("\"min_tokens\": 0");
    field_bad("\"max_tokens\": 0", "max_tokens", "max_tokens: must be at least 1, got 0");
    field_bad("\"max_tokens\": -5", "max_tokens", "must be at least 1, got -5");
    field_bad("\"max_tokens\": 2.5", "max_tokens", "max_tokens: expected an integer, got 2.5");
    field_bad("\"max_tokens\": \"16\"", "max_tokens",
              "max_tokens: expected an integer, got a string");
    field_bad("\"max_tokens\": true", "max_tokens", "expected an integer, got true");
    field_bad("\"max_tokens\": 1e20", "max_tokens",
              "must be at most 9007199254740992, got 1e+20");
    field_bad("\"max_tokens\": 9007199254740994", "max_tokens", "must be at most");
    field_bad("\"max_tokens\": 1e999", "max_tokens", "expected an integer, got inf");
    field_bad("\"max_tokens\": -1e999", "max_tokens", "got -inf");
    field_bad("\"min_tokens\": -1", "min_tokens", "min_tokens: must be at least 0, got -1");
    field_bad("\"max_tokens\": 8, \"min_tokens\": 9", "min_tokens",
              "min_tokens: must be at most max_tokens (8), got 9");
    /* completions' default max_tokens (16) bounds min_tokens too */
    parse_fail(CZ_OAI_COMPLETIONS, compl_with("\"min_tokens\": 17"), 400, "min_tokens",
               "must be at most max_tokens (16), got 17");
    cz_oai_request r = parse_ok(CZ_OAI_CHAT, chat_with("\"min_tokens\": 17"));
    cr_assert_eq(r.min_tokens, 17); /* chat without a max: checked against the context later */
    cz_oai_request_free(&r);
    parse_fail(CZ_OAI_CHAT, chat_with("\"max_completion_tokens\": 4, \"min_tokens\": 5"), 400,
               "min_tokens", "must be at most max_completion_tokens (4), got 5");
    parse_fail(CZ_OAI_CHAT, chat_with("\"max_completion_tokens\": 0"), 400,
               "max_completion_tokens", "max_completion_tokens: must be at least 1, got 0");
    parse_fail(CZ_OAI_CHAT, chat_with("\"max_tokens\": 0, \"max_completion_tokens\": 3"), 400,
               "max_tokens", "must be at least 1");
}

Test(oai_fields, sampling)
{
    field_ok("\"temperature\": 0, \"top_p\": 1, \"top_k\": 1");
    field_ok("\"temperature\": 2, \"top_p\": 1e-9, \"top_k\": 0");
    field_ok("\"top_k\": -1, \"seed\": -9007199254740992");
    field_ok("\"seed\": 9007199254740992, \"ignore_eos\": false");
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS,
                                compl_with("\"temperature\": 0.7, \"top_k\": 50, \"seed\": -3"));
    cr_assert(r.has_temperature && fabs(r.temperature - 0.7) < 1e-15);
    cr_assert(r.has_top_k && r.top_k == 50);
    cr_assert(r.has_seed && r.seed == -3);
    cz_oai_request_free(&r);
    field_bad("\"temperature\": -0.1", "temperature", "temperature: must be in [0, 2], got -0.1");
    field_bad("\"temperature\": 2.5", "temperature", "must be in [0, 2], got 2.5");
    field_bad("\"temperature\": \"hot\"", "temperature", "expected a number, got a string");
    field_bad("\"temperature\": 1e999", "temperature", "got inf");
    field_bad("\"top_p\": 0", "top_p", "top_p: must be in (0, 1], got 0");
    field_bad("\"top_p\": 1.5", "top_p", "must be in (0, 1], got 1.5");
    field_bad("\"top_k\": -2", "top_k", "top_k: must be at least -1, got -2");
    field_bad("\"top_k\": 2.5", "top_k", "expected an integer, got 2.5");
    field_bad("\"seed\": 1.5", "seed", "seed: expected an integer, got 1.5");
    field_bad("\"seed\": 1e19", "seed", "seed: must be at most 9007199254740992, got 1e+19");
    field_bad("\"seed\": -1e19", "seed", "must be at least -9007199254740992");
    field_bad("\"seed\": \"7\"", "seed", "expected an integer, got a string");
    field_bad("\"ignore_eos\": 1", "ignore_eos", "ignore_eos: expected a boolean, got 1");
    field_bad("\"ignore_eos\": \"true\"", "ignore_eos", "expected a boolean, got a string");
}

Test(oai_fields, stop_and_stop_token_ids)
{
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, compl_with("\"stop\": \"###\", "
                                                               "\"stop_token_ids\": [0, 128009]"));
    cr_assert_eq(r.n_stop, 1);
    cr_assert_str_eq(r.stop[0], "###");
    cr_assert_eq(r.n_stop_token_ids, 2);
    cr_assert_eq(r.stop_token_ids[1], 128009);
    cz_oai_request_free(&r);
    field_ok("\"stop\": [], \"stop_token_ids\": []");
    field_ok("\"stop\": [\"a\", \"b\", \"c\", \"d\"]");
    field_bad("\"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]", "stop",
              "stop: at most 4 stop strings are supported, got 5");
    field_bad("\"stop\": \"\"", "stop", "stop: empty stop string");
    field_bad("\"stop\": [\"a\", \"\"]", "stop[1]", "stop[1]: empty stop string");
    field_bad("\"stop\": [\"a\", 3]", "stop[1]", "stop[1]: expected a string, got 3");
    field_bad("\"stop\": 3", "stop", "stop: expected a string or an array of strings, got 3");
    field_bad("\"stop_token_ids\": [1, -1]", "stop_token_ids[1]",
              "stop_token_ids[1]: must be at least 0, got -1");
    field_bad("\"stop_token_ids\": [\"1\"]", "stop_token_ids[0]", "expected an integer");
    field_bad("\"stop_token_ids\": 5", "stop_token_ids",
              "stop_token_ids: expected an array of token ids, got 5");
}

Test(oai_fields, return_token_ids)
{
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS, compl_with("\"return_token_ids\": true"));
    cr_assert(r.return_token_ids);
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, chat_with("\"return_token_ids\": null"));
    cr_assert(!r.return_token_ids);
    cz_oai_request_free(&r);
    field_bad("\"return_token_ids\": 1", "return_token_ids",
              "return_token_ids: expected a boolean, got 1");
}

Test(oai_fields, stream_and_stream_options)
{
    cz_oai_request r = parse_ok(CZ_OAI_CHAT, chat_with("\"stream\": true, \"stream_options\": "
                                                       "{\"include_usage\": true, "
                                                       "\"continuous_usage_stats\": true}"));
    cr_assert(r.stream && r.include_usage && r.continuous_usage);
    cz_oai_request_free(&r);
    /* continuous stats need include_usage (vLLM's should_include_usage) */
    r = parse_ok(CZ_OAI_CHAT, chat_with("\"stream\": true, \"stream_options\": "
                                        "{\"continuous_usage_stats\": true, \"x\": 1}"));
    cr_assert(r.stream && !r.include_usage && !r.continuous_usage);
    cz_oai_request_free(&r);
    /* include_usage defaults to false at the matched commit */
    r = parse_ok(CZ_OAI_COMPLETIONS, compl_with("\"stream\": true, \"stream_options\": {}"));
    cr_assert(r.stream && !r.include_usage);
    cz_oai_request_free(&r);
    /* an empty object or null passes without stream, as vLLM's truthiness check */
    field_ok("\"stream_options\": {}");
    field_ok("\"stream\": false, \"stream_options\": null");
    field_bad("\"stream_options\": {\"include_usage\": true}", "stream_options",
              "stream_options: stream options can only be given when stream is true");
    field_bad("\"stream\": false, \"stream_options\": {\"include_usage\": false}",
              "stream_options", "only be given when stream is true");
    field_bad("\"stream\": true, \"stream_options\": {\"include_usage\": 1}",
              "stream_options.include_usage",
              "stream_options.include_usage: expected a boolean, got 1");
    field_bad("\"stream\": true, \"stream_options\": {\"continuous_usage_stats\": \"y\"}",
              "stream_options.continuous_usage_stats", "expected a boolean, got a string");
    field_bad("\"stream\": true, \"stream_options\": true", "stream_options",
              "stream_options: expected an object, got true");
    field_bad("\"stream\": \"yes\"", "stream", "stream: expected a boolean, got a string");
}

Test(oai_fields, unsupported_features_name_their_field)
{
    field_ok("\"n\": 1, \"best_of\": 1, \"echo\": false, \"prompt_logprobs\": null");
    field_ok("\"frequency_penalty\": 0, \"presence_penalty\": 0.0, \"repetition_penalty\": 1");
    field_ok("\"tools\": null, \"tool_choice\": \"none\", \"functions\": null, "
             "\"function_call\": \"none\", \"response_format\": {\"type\": \"text\"}, "
             "\"logit_bias\": {}, \"guided_json\": null, \"min_p\": 0, \"bad_words\": [], "
             "\"use_beam_search\": false, \"skip_special_tokens\": true, \"priority\": 0, "
             "\"include_stop_str_in_output\": false, \"return_token_ids\": null, "
             "\"cache_salt\": \"abc\", \"vllm_xargs\": {\"a\": 1}, \"request_id\": \"r\"");
    field_bad("\"n\": 3", "n", "n: only n = 1 is supported, got 3");
    field_bad("\"n\": 1.5", "n", "only n = 1 is supported, got 1.5");
    field_bad("\"n\": \"2\"", "n", "n: expected an integer, got a string");
    field_bad("\"best_of\": 2", "best_of", "best_of: only best_of = 1 is supported, got 2");
    field_bad("\"echo\": true", "echo", "echo: echoing the prompt is not supported, got true");
    field_bad("\"echo\": 1", "echo", "echo: expected a boolean, got 1");
    field_bad("\"prompt_logprobs\": 0", "prompt_logprobs",
              "prompt_logprobs: prompt log probabilities are not supported, got 0");
    field_bad("\"frequency_penalty\": 0.5", "frequency_penalty",
              "frequency_penalty: only 0 (no penalty) is supported, got 0.5");
    field_bad("\"presence_penalty\": -1", "presence_penalty", "got -1");
    field_bad("\"repetition_penalty\": 1.1", "repetition_penalty",
              "only 1 (no penalty) is supported, got 1.1");
    field_bad("\"repetition_penalty\": \"1\"", "repetition_penalty",
              "expected a number, got a string");
    field_bad("\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", "tools",
              "tools: tool calling is not supported");
    field_bad("\"tools\": []", "tools", "tool calling is not supported");
    field_bad("\"tool_choice\": \"auto\"", "tool_choice", "tool_choice: tool calling");
    field_bad("\"functions\": [{}]", "functions", "function calling is not supported");
    field_bad("\"function_call\": \"auto\"", "function_call", "function calling");
    field_bad("\"response_format\": {\"type\": \"json_object\"}", "response_format",
              "response_format: structured output is not supported");
    field_bad("\"response_format\": \"text\"", "response_format", "structured output");
    field_bad("\"logit_bias\": {\"50256\": -100}", "logit_bias",
              "logit_bias: logit bias is not supported");
    field_bad("\"guided_json\": {\"type\": \"object\"}", "guided_json",
              "guided_json: guided decoding is not supported");
    field_bad("\"guided_choice\": [\"a\"]", "guided_choice", "guided decoding");
    field_bad("\"min_p\": 0.1", "min_p", "min_p: only 0");
    field_bad("\"use_beam_search\": true", "use_beam_search", "beam search is not supported");
    field_bad("\"bad_words\": [\"x\"]", "bad_words", "bad words are not supported");
    field_bad("\"allowed_token_ids\": [1]", "allowed_token_ids", "restricting the vocabulary");
    field_bad("\"skip_special_tokens\": false", "skip_special_tokens", "got false");
    field_bad("\"include_stop_str_in_output\": true", "include_stop_str_in_output",
              "keeping the stop string");
    field_bad("\"priority\": 5", "priority", "only priority 0 is supported, got 5");
    field_bad("\"truncate_prompt_tokens\": 5", "truncate_prompt_tokens", "truncation");
    field_bad("\"structured_outputs\": {\"regex\": \"a\"}", "structured_outputs",
              "structured output");
}

Test(oai_fields, logprobs_per_endpoint)
{
    cz_oai_endpoint C = CZ_OAI_COMPLETIONS, H = CZ_OAI_CHAT;
    cz_oai_request r = parse_ok(C, compl_with("\"logprobs\": null, \"suffix\": null"));
    cz_oai_request_free(&r);
    /* completions' logprobs is an integer: 0 still asks for the sampled token's logprob */
    parse_fail(C, compl_with("\"logprobs\": 0"), 400, "logprobs",
               "logprobs: log probabilities are not supported, got 0");
    parse_fail(C, compl_with("\"logprobs\": 5"), 400, "logprobs", "got 5");
    parse_fail(C, compl_with("\"logprobs\": \"5\""), 400, "logprobs",
               "expected an integer, got a string");
    parse_fail(C, compl_with("\"suffix\": \"end\""), 400, "suffix", "suffixes");
    parse_fail(C, compl_with("\"prompt_embeds\": \"AAAA\""), 400, "prompt_embeds", "embeddings");
    parse_fail(C, compl_with("\"add_special_tokens\": false"), 400, "add_special_tokens",
               "special tokens");
    /* chat's logprobs is a boolean with top_logprobs beside it */
    r = parse_ok(H, chat_with("\"logprobs\": false, \"top_logprobs\": 0, "
                              "\"add_special_tokens\": false, \"add_generation_prompt\": true, "
                              "\"continue_final_message\": false, \"chat_template_kwargs\": {}"));
    cz_oai_request_free(&r);
    parse_fail(H, chat_with("\"logprobs\": true"), 400, "logprobs",
               "logprobs: log probabilities are not supported, got true");
    parse_fail(H, chat_with("\"logprobs\": 1"), 400, "logprobs", "expected a boolean, got 1");
    parse_fail(H, chat_with("\"top_logprobs\": 5"), 400, "top_logprobs",
               "top_logprobs: log probabilities are not supported, got 5");
    parse_fail(H, chat_with("\"continue_final_message\": true"), 400, "continue_final_message",
               "continuing the final message");
    parse_fail(H, chat_with("\"add_generation_prompt\": false"), 400, "add_generation_prompt",
               "always added");
    parse_fail(H, chat_with("\"chat_template\": \"{{x}}\""), 400, "chat_template",
               "own chat template");
    parse_fail(H, chat_with("\"chat_template_kwargs\": {\"enable_thinking\": false}"), 400,
               "chat_template_kwargs", "chat template arguments are not supported");
}

Test(oai_fields, duplicate_keys_last_wins)
{
    /* Python's json keeps the last value of a repeated key, so vLLM reads the last */
    cz_oai_request r = parse_ok(CZ_OAI_COMPLETIONS,
                                "{\"prompt\": \"a\", \"n\": 5, \"max_tokens\": 0, "
                                "\"max_tokens\": 7, \"n\": 1, \"prompt\": [3]}");
    cr_assert_eq(r.max_tokens, 7);
    cr_assert_eq(r.prompts[0].n_ids, 1);
    cz_oai_request_free(&r);
}

/* ---- malformed bodies --------------------------------------------------------------------- */

static void body_fail(const char *body, size_t len, const char *piece)
{
    cz_oai_request r;
    cz_oai_error e;
    memset(&e, 0, sizeof e);
    cz_status st = cz_oai_parse(CZ_OAI_COMPLETIONS, body, len, &r, &e);
    cr_assert_eq(st, CZ_EFORMAT, "%.*s: status %d", (int)len, body, (int)st);
    cr_assert_eq(e.status, 400);
    cr_assert_str_eq(e.type, "BadRequestError");
    cr_assert_str_eq(e.param, "");
    cr_assert(strstr(e.message, piece) != NULL, "'%s' lacks '%s'", e.message, piece);
}

Test(oai_body, malformed_json_names_the_byte_offset)
{
    body_fail("{\"prompt\": \"a\",}", 16, "not valid JSON: parsing failed at byte 15");
    body_fail("{\"prompt\" \"a\"}", 14, "at byte 10");
    body_fail("{\"prompt\": [1, 2", 16, "parsing failed at byte");
    body_fail("{\"temperature\": NaN, \"prompt\": \"a\"}", 35, "at byte 16");
    body_fail("{\"temperature\": Infinity}", 25, "at byte 16");
    body_fail("{\"prompt\": \"a\"} x", 17, "unexpected data after the value at byte 16");
    body_fail("{\"prompt\": \"a\"}{}", 17, "at byte 15");
    body_fail("{'prompt': 'a'}", 15, "at byte 2"); /* cJSON: past the quote */
    body_fail("", 0, "request body is empty");
    body_fail(" \n\t ", 4, "request body is empty");
    body_fail("[{\"prompt\": \"a\"}]", 17, "request body must be a JSON object, got an array");
    body_fail("\"text\"", 6, "must be a JSON object, got a string");
    body_fail("42", 2, "must be a JSON object, got 42");
    body_fail("null", 4, "must be a JSON object, got null");
    body_fail("{\"prompt\": \"a\tb\"}", 17, "unescaped control character 0x09 in a string at "
                                            "byte 13");
    body_fail("{\"prompt\": \"a\\u0000b\"}", 22, "\\u0000 (a NUL character) in a string at byte "
                                                 "13");
    body_fail("{\"prompt\": \"a\xff\"}", 16, "not valid UTF-8 at byte 13");
    body_fail("{\"prompt\": \"\xe2\x82\"}", 16, "not valid UTF-8 at byte 12");
    body_fail("{\"prompt\": \"\xed\xa0\x80\"}", 17, "not valid UTF-8 at byte 12");
    /* a NUL byte ends nothing: the length decides */
    body_fail("{\"prompt\": \"a\"}\0", 16, "unexpected data after the value at byte 15");
    /* nesting: the object and 999 arrays are cJSON's 1000 levels; one more array is refused
     * where it opens */
    for (size_t depth = 999; depth <= 1000; depth++) {
        size_t n = 0;
        char *deep = malloc(2 * depth + 32);
        n += (size_t)sprintf(deep, "{\"x\": ");
        for (size_t i = 0; i < depth; i++)
            deep[n++] = '[';
        for (size_t i = 0; i < depth; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = '\0';
        if (depth == 999)
            parse_fail(CZ_OAI_COMPLETIONS, deep, 400, "prompt", "prompt: missing");
        else
            body_fail(deep, n, "nests deeper than 1000 levels at byte 1005");
        free(deep);
    }
}

Test(oai_body, byte_order_mark_and_escapes_are_read)
{
    const char *body = "\xef\xbb\xbf{\"prompt\": \"\\u00e9\\ud83d\\ude00 \\\" \\\\ \\n\"}";
    cz_oai_request r;
    cz_oai_error e;
    cr_assert_eq(cz_oai_parse(CZ_OAI_COMPLETIONS, body, strlen(body), &r, &e), CZ_OK, "%s",
                 e.message);
    cr_assert_str_eq(r.prompts[0].text, "\xc3\xa9\xf0\x9f\x98\x80 \" \\ \n");
    cz_oai_request_free(&r);
    /* the body need not be NUL-terminated: only len bytes are read */
    char exact[15];
    memcpy(exact, "{\"prompt\":\"a\"}", 14);
    exact[14] = '!';
    cr_assert_eq(cz_oai_parse(CZ_OAI_COMPLETIONS, exact, 14, &r, &e), CZ_OK, "%s", e.message);
    cz_oai_request_free(&r);
    /* the error pointer may be NULL */
    cr_assert_eq(cz_oai_parse(CZ_OAI_COMPLETIONS, "{", 1, &r, NULL), CZ_EFORMAT);
}

/* ---- headers ------------------------------------------------------------------------------ */

Test(oai_headers, auth)
{
    cr_assert(cz_oai_auth_ok(NULL, NULL));
    cr_assert(cz_oai_auth_ok(NULL, ""));
    cr_assert(cz_oai_auth_ok("garbage", NULL));
    cr_assert(cz_oai_auth_ok("Bearer sk-123", "sk-123"));
    cr_assert(cz_oai_auth_ok("bearer sk-123", "sk-123"));
    cr_assert(cz_oai_auth_ok("BEARER sk-123", "sk-123"));
    cr_assert(!cz_oai_auth_ok(NULL, "sk-123"));
    cr_assert(!cz_oai_auth_ok("", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer ", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer sk-12", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer sk-1234", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer sk-124", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearer  sk-123", "sk-123")); /* partition at the first space */
    cr_assert(!cz_oai_auth_ok("Basic sk-123", "sk-123"));
    cr_assert(!cz_oai_auth_ok("Bearers sk-123", "sk-123"));
    cr_assert(!cz_oai_auth_ok("sk-123", "sk-123"));
    cr_assert(cz_oai_auth_ok("Bearer a b", "a b")); /* the token is the rest of the value */
}

Test(oai_headers, session_id)
{
    cz_oai_request r = parse_ok(CZ_OAI_CHAT, chat_with("\"user\": \"from-body\""));
    cr_assert_str_eq(cz_oai_session_id("from-header", &r), "from-header");
    cr_assert_str_eq(cz_oai_session_id(NULL, &r), "from-body");
    cr_assert_str_eq(cz_oai_session_id("", &r), "from-body");
    cz_oai_request_free(&r);
    r = parse_ok(CZ_OAI_CHAT, chat_with("\"user\": \"\""));
    cr_assert_null(cz_oai_session_id(NULL, &r));
    cr_assert_null(cz_oai_session_id(NULL, NULL));
    cz_oai_request_free(&r);
}

/* ---- response bodies ---------------------------------------------------------------------- */

static const cz_oai_id ID = {0x0123456789abcdefull, 0x0123456789abcdefull};
#define MODEL "llama-3.2-1b"
#define CREATED 1700000000

static cz_oai_meta meta(cz_oai_endpoint ep)
{
    cz_oai_meta m;
    cz_oai_meta_init(&m, ep, ID, CREATED, MODEL);
    return m;
}

static void assert_bytes(const cz_oai_buf *b, const char *golden)
{
    cr_assert_eq(b->n, strlen(golden), "length %zu, golden %zu:\n%s\n%s", b->n, strlen(golden),
                 b->p, golden);
    cr_assert(memcmp(b->p, golden, b->n) == 0, "bytes differ:\n%s\n%s", b->p, golden);
    cr_assert_eq(b->p[b->n], '\0');
}

/* The JSON inside one "data: ...\n\n" event (or a whole body) parses back. */
static void assert_parses(const cz_oai_buf *b)
{
    const char *s = b->p;
    size_t n = b->n;
    if (strncmp(s, "data: ", 6) == 0) {
        s += 6;
        n -= 8;
        cr_assert(strcmp(b->p + b->n - 2, "\n\n") == 0);
    }
    cJSON *j = cJSON_ParseWithLength(s, n);
    cr_assert_not_null(j, "does not parse: %s", b->p);
    cJSON_Delete(j);
}

Test(oai_format, ids)
{
    cz_oai_meta m;
    cz_oai_meta_init(&m, CZ_OAI_COMPLETIONS, (cz_oai_id){0, 1}, 0, "m");
    cr_assert_str_eq(m.id, "cmpl-00000000000000000000000000000001");
    cz_oai_meta_init(&m, CZ_OAI_CHAT, (cz_oai_id){UINT64_MAX, 0xa}, 0, "m");
    cr_assert_str_eq(m.id, "chatcmpl-ffffffffffffffff000000000000000a");
    cr_assert(!m.include_usage && !m.continuous_usage && !m.prompt_tokens_details);
    cr_assert_null(m.system_fingerprint);
}

Test(oai_format, completion_chunks)
{
    cz_oai_buf b = {0};
    cz_oai_meta m = meta(CZ_OAI_COMPLETIONS);
    /* golden: completion_stream_generator, a delta " Hello" still generating */
    cz_oai_choice c = {.index = 0, .text = " Hello", .text_len = 6, .stop_token = -1};
    cz_oai_chunk(&b, &m, &c, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"cmpl-0123456789abcdef0123456789abcdef\",\"object\":\"text_completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[{\"index\":0,\"text\":"
        "\" Hello\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null,"
        "\"prompt_token_ids\":null,\"token_ids\":null}]}\n\n");
    assert_parses(&b);

    /* golden: prompt 1 finished by the stop string "\n\n", continuous usage stats on
     * (chunk.usage = UsageInfo(prompt, completion, total): field order prompt, total,
     * completion) */
    cz_oai_buf_clear(&b);
    m.include_usage = m.continuous_usage = true;
    c = (cz_oai_choice){.index = 1, .text = "!", .text_len = 1, .finish = CZ_OAI_FINISH_STOP,
                        .stop_str = "\n\n", .stop_token = -1};
    cz_oai_usage u = {.prompt_tokens = 12, .completion_tokens = 5, .cached_tokens = 8};
    cz_oai_chunk(&b, &m, &c, &u);
    assert_bytes(&b,
        "data: {\"id\":\"cmpl-0123456789abcdef0123456789abcdef\",\"object\":\"text_completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[{\"index\":1,\"text\":"
        "\"!\",\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":\"\\n\\n\","
        "\"prompt_token_ids\":null,\"token_ids\":null}],\"usage\":{\"prompt_tokens\":12,"
        "\"total_tokens\":17,\"completion_tokens\":5}}\n\n");

    /* golden: the last chunk, stopped by token 128009, no usage chunk to follow, so it
     * carries the fingerprint (chunk.system_fingerprint on the terminal chunk) */
    cz_oai_buf_clear(&b);
    m.include_usage = m.continuous_usage = false;
    m.system_fingerprint = "vllm-0.21.0-1a2b3c4d";
    c = (cz_oai_choice){.finish = CZ_OAI_FINISH_STOP, .stop_token = 128009};
    cz_oai_chunk(&b, &m, &c, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"cmpl-0123456789abcdef0123456789abcdef\",\"object\":\"text_completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[{\"index\":0,\"text\":"
        "\"\",\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":128009,"
        "\"prompt_token_ids\":null,\"token_ids\":null}],\"system_fingerprint\":"
        "\"vllm-0.21.0-1a2b3c4d\"}\n\n");
    /* with a usage chunk to follow, the usage chunk carries it instead */
    cz_oai_buf_clear(&b);
    m.include_usage = true;
    c.finish = CZ_OAI_FINISH_LENGTH;
    c.stop_token = -1;
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_null(strstr(b.p, "system_fingerprint"));
    cr_assert_not_null(strstr(b.p, "\"finish_reason\":\"length\",\"stop_reason\":null"));

    /* golden: the usage-only chunk with cached tokens reported
     * (model_dump_json(exclude_unset=False, exclude_none=True)) */
    cz_oai_buf_clear(&b);
    m.system_fingerprint = NULL;
    m.prompt_tokens_details = true;
    cz_oai_chunk_usage(&b, &m, &u);
    assert_bytes(&b,
        "data: {\"id\":\"cmpl-0123456789abcdef0123456789abcdef\",\"object\":\"text_completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[],\"usage\":"
        "{\"prompt_tokens\":12,\"total_tokens\":17,\"completion_tokens\":5,"
        "\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n");
    assert_parses(&b);
    /* no cached tokens, or details off: no prompt_tokens_details (exclude_none) */
    cz_oai_buf_clear(&b);
    u.cached_tokens = 0;
    cz_oai_chunk_usage(&b, &m, &u);
    cr_assert_null(strstr(b.p, "prompt_tokens_details"));
    cz_oai_buf_clear(&b);
    u.cached_tokens = 8;
    m.prompt_tokens_details = false;
    cz_oai_chunk_usage(&b, &m, &u);
    cr_assert_null(strstr(b.p, "prompt_tokens_details"));
    /* the abort reason */
    cz_oai_buf_clear(&b);
    c.finish = CZ_OAI_FINISH_ABORT;
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_not_null(strstr(b.p, "\"finish_reason\":\"abort\",\"stop_reason\":null"));

    cz_oai_buf_clear(&b);
    cz_oai_done(&b);
    assert_bytes(&b, "data: [DONE]\n\n");
    cz_oai_buf_free(&b);
    cr_assert_null(b.p);
}

Test(oai_format, chat_chunks)
{
    cz_oai_buf b = {0};
    cz_oai_meta m = meta(CZ_OAI_CHAT);
    /* golden: the first chunk, role and empty content (first_iteration); the chunk's
     * prompt_token_ids and prompt_text were passed as None, so they appear as null */
    cz_oai_chunk_role(&b, &m, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
        "\"finish_reason\":null}],\"prompt_token_ids\":null,\"prompt_text\":null}\n\n");
    assert_parses(&b);
    /* golden: the same with continuous usage (completion_tokens 0) */
    cz_oai_buf_clear(&b);
    m.include_usage = m.continuous_usage = true;
    cz_oai_usage u = {.prompt_tokens = 12};
    cz_oai_chunk_role(&b, &m, &u);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,"
        "\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":12,"
        "\"completion_tokens\":0},\"prompt_token_ids\":null,\"prompt_text\":null}\n\n");

    /* golden: a content delta (DeltaMessage(content=...)): no stop_reason before the end,
     * token_ids passed as None */
    cz_oai_buf_clear(&b);
    m.include_usage = m.continuous_usage = false;
    const char *t = "Hi \"there\"\n";
    cz_oai_choice c = {.text = t, .text_len = strlen(t), .stop_token = -1};
    cz_oai_chunk(&b, &m, &c, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[{\"index\":0,\"delta\":{\"content\":\"Hi \\\"there\\\"\\n\"},\"logprobs\":null,"
        "\"finish_reason\":null,\"token_ids\":null}]}\n\n");
    assert_parses(&b);

    /* golden: the finishing chunk, finish_reason "length", stop_reason null */
    cz_oai_buf_clear(&b);
    c = (cz_oai_choice){.text = ".", .text_len = 1, .finish = CZ_OAI_FINISH_LENGTH,
                        .stop_token = -1};
    cz_oai_chunk(&b, &m, &c, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[{\"index\":0,\"delta\":{\"content\":\".\"},\"logprobs\":null,\"finish_reason\":"
        "\"length\",\"stop_reason\":null,\"token_ids\":null}]}\n\n");
    /* golden: the same with a fingerprint and no usage chunk to follow */
    cz_oai_buf_clear(&b);
    m.system_fingerprint = "fp";
    cz_oai_chunk(&b, &m, &c, NULL);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[{\"index\":0,\"delta\":{\"content\":\".\"},\"logprobs\":null,\"finish_reason\":"
        "\"length\",\"stop_reason\":null,\"token_ids\":null}],\"system_fingerprint\":\"fp\"}\n\n");

    /* golden: the usage chunk (exclude_unset=True, exclude_none=True) */
    cz_oai_buf_clear(&b);
    m.system_fingerprint = NULL;
    u = (cz_oai_usage){.prompt_tokens = 3, .completion_tokens = 4};
    cz_oai_chunk_usage(&b, &m, &u);
    assert_bytes(&b,
        "data: {\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":"
        "\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":"
        "[],\"usage\":{\"prompt_tokens\":3,\"total_tokens\":7,\"completion_tokens\":4}}\n\n");
    /* stop string and stop token in a finishing chat chunk */
    cz_oai_buf_clear(&b);
    c = (cz_oai_choice){.finish = CZ_OAI_FINISH_STOP, .stop_str = "</s>", .stop_token = 2};
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_not_null(strstr(b.p, "\"delta\":{\"content\":\"\"},\"logprobs\":null,"
                                   "\"finish_reason\":\"stop\",\"stop_reason\":\"</s>\","));
    cz_oai_buf_free(&b);
}

Test(oai_format, whole_responses)
{
    cz_oai_buf b = {0};
    cz_oai_meta m = meta(CZ_OAI_COMPLETIONS);
    /* golden: request_output_to_completion_response for two prompts, through
     * JSONResponse(response.model_dump()) */
    const char *t2 = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    cz_oai_choice c[2] = {
        {.index = 7, .text = "a\tb", .text_len = 3, .finish = CZ_OAI_FINISH_LENGTH,
         .stop_token = -1},
        {.index = 9, .text = t2, .text_len = strlen(t2), .finish = CZ_OAI_FINISH_STOP,
         .stop_str = "END", .stop_token = -1},
    };
    cz_oai_usage u = {.prompt_tokens = 10, .completion_tokens = 20, .cached_tokens = 6};
    cz_oai_response(&b, &m, c, 2, &u);
    assert_bytes(&b,
        "{\"id\":\"cmpl-0123456789abcdef0123456789abcdef\",\"object\":\"text_completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[{\"index\":0,\"text\":"
        "\"a\\tb\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
        "\"token_ids\":null,\"prompt_logprobs\":null,\"prompt_token_ids\":null},{\"index\":1,"
        "\"text\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"logprobs\":null,\"finish_reason\":"
        "\"stop\",\"stop_reason\":\"END\",\"token_ids\":null,\"prompt_logprobs\":null,"
        "\"prompt_token_ids\":null}],\"service_tier\":null,\"system_fingerprint\":null,\"usage\":"
        "{\"prompt_tokens\":10,\"total_tokens\":30,\"completion_tokens\":20,"
        "\"prompt_tokens_details\":null},\"kv_transfer_params\":null}");
    assert_parses(&b);

    /* golden: chat_completion_full_generator, cached tokens reported, a fingerprint */
    cz_oai_buf_clear(&b);
    m = meta(CZ_OAI_CHAT);
    m.system_fingerprint = "fp";
    m.prompt_tokens_details = true;
    cz_oai_choice one = {.text = "ok\x01", .text_len = 3, .finish = CZ_OAI_FINISH_STOP,
                         .stop_token = -1};
    u = (cz_oai_usage){.prompt_tokens = 10, .completion_tokens = 2, .cached_tokens = 4};
    cz_oai_response(&b, &m, &one, 1, &u);
    assert_bytes(&b,
        "{\"id\":\"chatcmpl-0123456789abcdef0123456789abcdef\",\"object\":\"chat.completion\","
        "\"created\":1700000000,\"model\":\"llama-3.2-1b\",\"choices\":[{\"index\":0,\"message\":"
        "{\"role\":\"assistant\",\"content\":\"ok\\u0001\",\"refusal\":null,\"annotations\":null,"
        "\"audio\":null,\"function_call\":null,\"tool_calls\":[],\"reasoning\":null},\"logprobs\":"
        "null,\"finish_reason\":\"stop\",\"stop_reason\":null,\"token_ids\":null}],"
        "\"service_tier\":null,\"system_fingerprint\":\"fp\",\"usage\":{\"prompt_tokens\":10,"
        "\"total_tokens\":12,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":"
        "4}},\"prompt_logprobs\":null,\"prompt_token_ids\":null,\"prompt_text\":null,"
        "\"kv_transfer_params\":null}");
    assert_parses(&b);
    /* an unfinished choice reads "stop" in chat and null in a completion, as vLLM */
    cz_oai_buf_clear(&b);
    one.finish = CZ_OAI_FINISH_NONE;
    cz_oai_response(&b, &m, &one, 1, &u);
    cr_assert_not_null(strstr(b.p, "\"finish_reason\":\"stop\",\"stop_reason\":null"));
    cz_oai_buf_clear(&b);
    m = meta(CZ_OAI_COMPLETIONS);
    cz_oai_response(&b, &m, &one, 1, &u);
    cr_assert_not_null(strstr(b.p, "\"finish_reason\":null,\"stop_reason\":null"));
    cz_oai_buf_free(&b);
}

Test(oai_format, error_bodies_and_model_list)
{
    cz_oai_buf b = {0};
    cz_oai_request r;
    cz_oai_error e;
    cr_assert_eq(cz_oai_parse(CZ_OAI_CHAT, chat_with("\"n\": 3"), strlen(chat_with("\"n\": 3")),
                              &r, &e),
                 CZ_EINVAL);
    /* golden: JSONResponse(ErrorResponse(error=ErrorInfo(message, type, param, code))) */
    cz_oai_error_body(&b, &e);
    assert_bytes(&b, "{\"error\":{\"message\":\"n: only n = 1 is supported, got 3\",\"type\":"
                     "\"BadRequestError\",\"param\":\"n\",\"code\":400}}");
    assert_parses(&b);

    /* golden: create_streaming_error_response (json.dumps defaults: spaces, ASCII escapes) */
    cz_oai_buf_clear(&b);
    cz_oai_error_set(&e, 400, "BadRequestError", NULL, "bad \"x\" \xc3\xa9");
    cz_oai_chunk_error(&b, &e);
    assert_bytes(&b, "data: {\"error\": {\"message\": \"bad \\\"x\\\" \\u00e9\", \"type\": "
                     "\"BadRequestError\", \"param\": null, \"code\": 400}}\n\n");
    assert_parses(&b);
    /* ASCII mode: astral characters as surrogate pairs, DEL escaped, bad bytes as U+FFFD */
    cz_oai_buf_clear(&b);
    cz_oai_error_set(&e, 500, "InternalServerError", "p", "\xf0\x9f\x98\x80\x7f\xff");
    cz_oai_chunk_error(&b, &e);
    assert_bytes(&b, "data: {\"error\": {\"message\": \"\\ud83d\\ude00\\u007f\\ufffd\", "
                     "\"type\": \"InternalServerError\", \"param\": \"p\", \"code\": 500}}\n\n");

    /* golden: AuthenticationMiddleware's 401 */
    cz_oai_buf_clear(&b);
    cz_oai_unauthorized_body(&b);
    assert_bytes(&b, "{\"error\":\"Unauthorized\"}");

    /* golden: show_available_models, ModelList of one ModelCard with one ModelPermission */
    cz_oai_buf_clear(&b);
    cz_oai_models_body(&b, MODEL, "/models/llama", CREATED, 8192, ID);
    assert_bytes(&b,
        "{\"object\":\"list\",\"data\":[{\"id\":\"llama-3.2-1b\",\"object\":\"model\",\"created\":"
        "1700000000,\"owned_by\":\"cadenza\",\"root\":\"/models/llama\",\"parent\":null,"
        "\"max_model_len\":8192,\"permission\":[{\"id\":"
        "\"modelperm-0123456789abcdef0123456789abcdef\",\"object\":\"model_permission\","
        "\"created\":1700000000,\"allow_create_engine\":false,\"allow_sampling\":true,"
        "\"allow_logprobs\":true,\"allow_search_indices\":false,\"allow_view\":true,"
        "\"allow_fine_tuning\":false,\"organization\":\"*\",\"group\":null,"
        "\"is_blocking\":false}]}]}");
    assert_parses(&b);
    cz_oai_buf_clear(&b);
    cz_oai_models_body(&b, "m", NULL, 0, 1, ID);
    cr_assert_not_null(strstr(b.p, "\"root\":null,\"parent\":null"));

    /* a server-made error: an unknown model, as vLLM's 404 */
    cz_oai_buf_clear(&b);
    cz_oai_error_set(&e, 404, "NotFoundError", "model", "The model `%s` does not exist.", "x");
    cz_oai_error_body(&b, &e);
    assert_bytes(&b, "{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":"
                     "\"NotFoundError\",\"param\":\"model\",\"code\":404}}");
    cz_oai_buf_free(&b);
}

/* ---- escaping ----------------------------------------------------------------------------- */

static void assert_escaped(const char *in, size_t len, const char *golden)
{
    cz_oai_buf b = {0};
    cz_oai_buf_json_str(&b, in, len);
    assert_bytes(&b, golden);
    cz_oai_buf_free(&b);
}

Test(oai_format, json_escaping)
{
    /* golden: ChatMessage(content=...).model_dump_json() and json.dumps(ensure_ascii=False)
     * agree: quotes, backslash, short escapes, other controls as \u00XX, DEL and non-ASCII
     * as they are */
    const char in[] = "q\"b\\n\nt\tr\rf\fb\b\x01\x1f\x7f \xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80";
    assert_escaped(in, sizeof in - 1,
                   "\"q\\\"b\\\\n\\nt\\tr\\rf\\fb\\b\\u0001\\u001f\x7f \xc3\xa9 \xe2\x98\x83 "
                   "\xf0\x9f\x98\x80\"");
    assert_escaped("", 0, "\"\"");
    assert_escaped(NULL, 0, "\"\"");
    /* a NUL byte inside the text (the length decides) */
    assert_escaped("a\0b", 3, "\"a\\u0000b\"");
    /* invalid UTF-8: one U+FFFD per maximal ill-formed subpart, as Python's
     * bytes.decode("utf-8", "replace") */
    assert_escaped("a\x80" "b", 3, "\"a\xef\xbf\xbd" "b\"");
    assert_escaped("\xe2\x82", 2, "\"\xef\xbf\xbd\"");
    assert_escaped("\xe2\x82x", 3, "\"\xef\xbf\xbdx\"");
    assert_escaped("\xf0\x80\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    assert_escaped("\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    assert_escaped("\xf4\x90\x80\x80", 4,
                   "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    assert_escaped("\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    assert_escaped("\xff", 1, "\"\xef\xbf\xbd\"");
    assert_escaped("\xf0\x9f\x98", 3, "\"\xef\xbf\xbd\"");
    assert_escaped("ok\xe2\x82\xac", 5, "\"ok\xe2\x82\xac\"");
    assert_escaped("\xef\xbf\xbd", 3, "\"\xef\xbf\xbd\""); /* a real U+FFFD stays */
}

Test(oai_format, no_allocation_once_warm)
{
    /* once the buffer holds a chunk, clearing and writing another of the same size keeps
     * its memory: the hot path writes, it does not allocate */
    cz_oai_buf b = {0};
    cz_oai_meta m = meta(CZ_OAI_CHAT);
    cz_oai_choice c = {.text = "tok", .text_len = 3, .stop_token = -1};
    cz_oai_chunk(&b, &m, &c, NULL);
    char *p = b.p;
    size_t cap = b.cap;
    for (int i = 0; i < 1000; i++) {
        cz_oai_buf_clear(&b);
        cz_oai_chunk(&b, &m, &c, NULL);
        cr_assert_eq(b.p, p);
        cr_assert_eq(b.cap, cap);
    }
    /* a long text grows it once; appending without clearing keeps every event */
    cz_oai_buf_clear(&b);
    char big[5000];
    memset(big, 'x', sizeof big);
    c.text = big;
    c.text_len = sizeof big;
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_gt(b.cap, cap);
    size_t one = b.n;
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_eq(b.n, 2 * one);
    cz_oai_buf_reserve(&b, 1 << 20);
    cr_assert_geq(b.cap, b.n + (1 << 20) + 1);
    cz_oai_buf_free(&b);
}

Test(oai_format, token_ids)
{
    cz_oai_buf b = {0};
    cz_oai_meta m = meta(CZ_OAI_COMPLETIONS);
    static const int32_t prompt[] = {128000, 9906}, out[] = {1917};
    /* a completion stream's first chunk: its own ids and the prompt's */
    cz_oai_choice c = {.index = 0, .text = " world", .text_len = 6, .stop_token = -1,
                       .token_ids = out, .n_token_ids = 1, .prompt_ids = prompt,
                       .n_prompt_ids = 2};
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_not_null(strstr(b.p, "\"prompt_token_ids\":[128000,9906],\"token_ids\":[1917]}]"),
                       "%s", b.p);
    assert_parses(&b);
    /* an empty delta's list is [], not null */
    cz_oai_buf_clear(&b);
    c.n_token_ids = 0;
    c.prompt_ids = NULL;
    cz_oai_chunk(&b, &m, &c, NULL);
    cr_assert_not_null(strstr(b.p, "\"prompt_token_ids\":null,\"token_ids\":[]}]"), "%s", b.p);
    /* a chat: the prompt's ids on the role chunk and the whole response */
    cz_oai_buf_clear(&b);
    m = meta(CZ_OAI_CHAT);
    m.prompt_ids = prompt;
    m.n_prompt_ids = 2;
    cz_oai_chunk_role(&b, &m, NULL);
    cr_assert_not_null(strstr(b.p, "\"prompt_token_ids\":[128000,9906],\"prompt_text\":null}"),
                       "%s", b.p);
    assert_parses(&b);
    cz_oai_buf_clear(&b);
    c = (cz_oai_choice){.text = "hi", .text_len = 2, .finish = CZ_OAI_FINISH_LENGTH,
                        .stop_token = -1, .token_ids = out, .n_token_ids = 1};
    cz_oai_usage u = {2, 1, 0};
    cz_oai_response(&b, &m, &c, 1, &u);
    cr_assert_not_null(strstr(b.p, "\"stop_reason\":null,\"token_ids\":[1917]}"), "%s", b.p);
    cr_assert_not_null(strstr(b.p, "\"prompt_token_ids\":[128000,9906],\"prompt_text\":null"),
                       "%s", b.p);
    assert_parses(&b);
    cz_oai_buf_free(&b);
}

/* ---- the interaction plane's events ---- */

static cz_oai_event event_ok(const char *body)
{
    cz_oai_event ev;
    cz_oai_error e;
    cr_assert_eq(cz_oai_parse_event(body, strlen(body), &ev, &e), CZ_OK, "%s: %s", body,
                 e.message);
    return ev;
}

static void event_bad(const char *body, int status, const char *param, const char *words)
{
    cz_oai_event ev;
    cz_oai_error e;
    cr_assert_neq(cz_oai_parse_event(body, strlen(body), &ev, &e), CZ_OK, "%s", body);
    cr_assert_eq(e.status, status, "%s: %d", body, e.status);
    cr_assert_str_eq(e.param, param ? param : "", "%s: param %s", body, e.param);
    cr_assert(strstr(e.message, words), "%s: '%s' lacks '%s'", body, e.message, words);
    cr_assert(!ev.has_played && ev.heard_tokens == -1);
}

Test(oai_event, each_type_and_its_fields)
{
    cz_oai_event ev = event_ok("{\"type\": \"speech_start\"}");
    cr_assert_eq(ev.type, CZ_OAI_EV_SPEECH_START);
    cr_assert_eq(ev.heard_tokens, -1);
    cr_assert_eq(event_ok("{\"type\": \"speech_end\"}").type, CZ_OAI_EV_SPEECH_END);
    ev = event_ok("{\"type\": \"playback\", \"played_s\": 1.5, \"received_s\": 4}");
    cr_assert(ev.type == CZ_OAI_EV_PLAYBACK && ev.has_played && ev.played_s == 1.5 &&
              ev.received_s == 4.0);
    ev = event_ok("{\"type\": \"barge_in\"}");
    cr_assert(ev.type == CZ_OAI_EV_BARGE_IN && !ev.has_played && ev.heard_tokens == -1);
    ev = event_ok("{\"type\": \"barge_in\", \"played_s\": 2, \"heard_tokens\": 7}");
    cr_assert(ev.has_played && ev.played_s == 2.0 && ev.heard_tokens == 7);
    ev = event_ok("{\"type\": \"barge_in\", \"played_s\": null, \"heard_tokens\": null}");
    cr_assert(!ev.has_played && ev.heard_tokens == -1);
    /* the last of a repeated key, as Python's json.loads keeps it */
    cr_assert_eq(event_ok("{\"type\": \"speak\", \"type\": \"speech_end\"}").type,
                 CZ_OAI_EV_SPEECH_END);
    cr_assert_str_eq(cz_oai_event_name(CZ_OAI_EV_BARGE_IN), "barge_in");
}

Test(oai_event, refusals_name_the_field)
{
    event_bad("", 400, NULL, "empty");
    event_bad("[1]", 400, NULL, "must be a JSON object");
    event_bad("{\"type\": \"speech_start\"", 400, NULL, "not valid JSON");
    event_bad("{}", 400, "type", "missing");
    event_bad("{\"type\": 1}", 400, "type", "expected a string, got 1");
    event_bad("{\"type\": \"speak\"}", 400, "type", "got 'speak'");
    event_bad("{\"type\": \"speech_start\", \"loud\": true}", 400, "loud", "unknown field");
    event_bad("{\"type\": \"speech_end\", \"played_s\": 1}", 400, "played_s",
              "not a field of a speech_end event");
    event_bad("{\"type\": \"playback\", \"played_s\": 1, \"heard_tokens\": 1, \"received_s\": 2}",
              400, "heard_tokens", "not a field of a playback event");
    event_bad("{\"type\": \"barge_in\", \"received_s\": 1}", 400, "received_s",
              "not a field of a barge_in event");
    event_bad("{\"type\": \"playback\", \"played_s\": 1}", 400, "received_s", "missing");
    event_bad("{\"type\": \"playback\", \"received_s\": 1}", 400, "played_s", "missing");
    event_bad("{\"type\": \"playback\", \"played_s\": -1, \"received_s\": 1}", 400, "played_s",
              "must be in [0,");
    event_bad("{\"type\": \"playback\", \"played_s\": 3, \"received_s\": 2}", 400, "played_s",
              "must be at most received_s (2), got 3");
    event_bad("{\"type\": \"playback\", \"played_s\": \"1\", \"received_s\": 2}", 400,
              "played_s", "expected a number");
    event_bad("{\"type\": \"barge_in\", \"heard_tokens\": 1.5}", 400, "heard_tokens",
              "expected an integer, got 1.5");
    event_bad("{\"type\": \"barge_in\", \"heard_tokens\": -2}", 400, "heard_tokens",
              "at least 0");
    char big[CZ_OAI_MAX_EVENT_BYTES + 64];
    int n = snprintf(big, sizeof big, "{\"type\": \"speech_end\", \"x\": \"");
    memset(big + n, 'a', sizeof big - (size_t)n - 3);
    memcpy(big + sizeof big - 3, "\"}", 3);
    event_bad(big, 413, NULL, "larger than");
}

Test(oai_event, session_path)
{
    char id[CZ_OAI_MAX_SESSION_ID];
    cr_assert(cz_oai_session_path("/v1/sessions/conv-7/events", id, sizeof id));
    cr_assert_str_eq(id, "conv-7");
    cr_assert(!cz_oai_session_path("/v1/sessions//events", id, sizeof id));
    cr_assert(!cz_oai_session_path("/v1/sessions/a/b/events", id, sizeof id));
    cr_assert(!cz_oai_session_path("/v1/sessions/a/event", id, sizeof id));
    cr_assert(!cz_oai_session_path("/v1/sessions/events", id, sizeof id));
    char url[CZ_OAI_MAX_SESSION_ID + 40];
    snprintf(url, sizeof url, "/v1/sessions/%0*d/events", CZ_OAI_MAX_SESSION_ID, 0);
    cr_assert(!cz_oai_session_path(url, id, sizeof id)); /* an id too long */
}

Test(oai_event, response_bodies)
{
    cz_oai_buf b = {0};
    cz_oai_event_result r = {.type = CZ_OAI_EV_SPEECH_START, .applied = true, .preload = 1};
    cz_oai_event_body(&b, "s\"1", &r);
    cr_assert_str_eq(b.p, "{\"object\":\"session.event\",\"session_id\":\"s\\\"1\","
                          "\"type\":\"speech_start\",\"applied\":true,\"preload\":\"started\"}");
    cz_oai_buf_clear(&b);
    r = (cz_oai_event_result){.type = CZ_OAI_EV_BARGE_IN, .heard_tokens = 4,
                              .context_tokens = 64};
    cz_oai_event_body(&b, "a", &r);
    cr_assert_str_eq(b.p, "{\"object\":\"session.event\",\"session_id\":\"a\","
                          "\"type\":\"barge_in\",\"applied\":false,\"heard_tokens\":4,"
                          "\"context_tokens\":64}");
    cz_oai_buf_free(&b);
}
