/* tok_tool.c - the tokenizer module driven from files, for the cross-check against the
 * reference implementations (tests/tokenizer_check.mjs). Not part of the cadenza CLI.
 *
 *   tok_tool info DIR              one JSON object: vocab, bos, eos, add_bos, chat, describe
 *   tok_tool encode DIR STRINGS    STRINGS holds one JSON string per line; prints one JSON
 *                                  object per line: {"ids": [...], "text": the ids decoded,
 *                                  "text_skip": decoded without special tokens, "stream_ok":
 *                                  whether decoding id by id gave the same text}, or
 *                                  {"error": message}
 *   tok_tool chat TEMPLATE CONVS   CONVS is a JSON array of {"messages": [{"role",
 *                                  "content"}...], "add_generation_prompt": bool}; prints
 *                                  {"text": rendering} or {"error": message} per conversation
 *                                  (TEMPLATE: a cz_chat_template_name, or "auto:DIR")
 * Exits 0 when every input was handled (errors of single inputs are reported in their line),
 * 1 when a file or the tokenizer cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cz_json.h"
#include "cz_tokenizer.h"

static void print_json(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    puts(s);
    free(s);
    cJSON_Delete(o);
}

static int fail(const cz_err *err)
{
    fprintf(stderr, "tok_tool: %s\n", err->msg);
    return 1;
}

static cJSON *encode_line(const cz_tokenizer *t, const char *text)
{
    cJSON *o = cJSON_CreateObject();
    cz_tok_ids ids = {0};
    cz_err err;
    cz_err_clear(&err);
    if (cz_tokenizer_encode(t, text, strlen(text), &ids, &err) != CZ_OK) {
        cJSON_AddStringToObject(o, "error", err.msg);
        cz_tok_ids_free(&ids);
        return o;
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "ids");
    for (size_t i = 0; i < ids.n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids.ids[i]));
    char *all = cz_tokenizer_decode_all(t, ids.ids, ids.n, false);
    char *skip = cz_tokenizer_decode_all(t, ids.ids, ids.n, true);
    cJSON_AddStringToObject(o, "text", all);
    cJSON_AddStringToObject(o, "text_skip", skip);
    /* the same ids one at a time */
    size_t cap = cz_tokenizer_decode_max(t), len = 0, n_all = strlen(all);
    char *piece = malloc(cap), *stream = calloc(1, n_all + 1);
    cz_detok d;
    cz_detok_init(&d, false);
    bool ok = true;
    for (size_t i = 0; i <= ids.n && ok; i++) {
        size_t n = i < ids.n ? cz_tokenizer_decode(t, &d, ids.ids[i], piece, cap)
                             : cz_tokenizer_decode_flush(t, &d, piece, cap);
        if (len + n > n_all)
            ok = false;
        else
            memcpy(stream + len, piece, n);
        len += n;
    }
    cJSON_AddBoolToObject(o, "stream_ok", ok && len == n_all && memcmp(stream, all, len) == 0);
    free(piece);
    free(stream);
    free(all);
    free(skip);
    cz_tok_ids_free(&ids);
    return o;
}

static int cmd_encode(const char *dir, const char *file)
{
    cz_err err;
    cz_err_clear(&err);
    cz_tokenizer *t = NULL;
    if (cz_tokenizer_load(dir, &t, &err) != CZ_OK)
        return fail(&err);
    char *text = NULL;
    if (cz_file_read_all(file, &text, NULL, &err) != CZ_OK) {
        cz_tokenizer_free(t);
        return fail(&err);
    }
    int rc = 0, line = 0;
    for (char *p = text, *nl; *p; p = nl ? nl + 1 : p + strlen(p)) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        line++;
        if (!*p)
            continue;
        cJSON *s = cJSON_Parse(p);
        if (!cJSON_IsString(s)) {
            fprintf(stderr, "tok_tool: %s:%d: expected a JSON string\n", file, line);
            cJSON_Delete(s);
            rc = 1;
            break;
        }
        print_json(encode_line(t, s->valuestring));
        cJSON_Delete(s);
        if (!nl)
            break;
    }
    free(text);
    cz_tokenizer_free(t);
    return rc;
}

static int cmd_chat(const char *name, const char *file)
{
    cz_err err;
    cz_err_clear(&err);
    cz_chat_template kind;
    if (strncmp(name, "auto:", 5) == 0) {
        cz_tokenizer *t = NULL;
        if (cz_tokenizer_load(name + 5, &t, &err) != CZ_OK)
            return fail(&err);
        kind = cz_tokenizer_chat(t);
        cz_tokenizer_free(t);
    } else if (cz_chat_template_parse(name, &kind, &err) != CZ_OK) {
        return fail(&err);
    }
    cJSON *convs = NULL;
    if (cz_json_load(file, &convs, &err) != CZ_OK)
        return fail(&err);
    int rc = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, convs)
    {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(c, "messages");
        size_t n = (size_t)cJSON_GetArraySize(msgs), i = 0;
        cz_chat_msg *m = calloc(n ? n : 1, sizeof *m);
        const cJSON *e;
        cJSON_ArrayForEach(e, msgs)
        {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
            m[i].role = cJSON_IsString(role) ? role->valuestring : NULL;
            m[i].content = cJSON_IsString(content) ? content->valuestring : NULL;
            i++;
        }
        bool gen = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt"));
        char *out = NULL;
        cJSON *o = cJSON_CreateObject();
        cz_err_clear(&err);
        if (cz_chat_render(kind, m, n, gen, &out, &err) == CZ_OK)
            cJSON_AddStringToObject(o, "text", out);
        else
            cJSON_AddStringToObject(o, "error", err.msg);
        print_json(o);
        free(out);
        free(m);
    }
    cJSON_Delete(convs);
    return rc;
}

static int cmd_info(const char *dir)
{
    cz_err err;
    cz_err_clear(&err);
    cz_tokenizer *t = NULL;
    if (cz_tokenizer_load(dir, &t, &err) != CZ_OK)
        return fail(&err);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "vocab", cz_tokenizer_vocab(t));
    cJSON_AddNumberToObject(o, "bos", cz_tokenizer_bos(t));
    cJSON_AddNumberToObject(o, "eos", cz_tokenizer_eos(t));
    cJSON_AddBoolToObject(o, "add_bos", cz_tokenizer_add_bos(t));
    cJSON_AddStringToObject(o, "chat", cz_chat_template_name(cz_tokenizer_chat(t)));
    cJSON_AddStringToObject(o, "describe", cz_tokenizer_describe(t));
    print_json(o);
    cz_tokenizer_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "info") == 0)
        return cmd_info(argv[2]);
    if (argc == 4 && strcmp(argv[1], "encode") == 0)
        return cmd_encode(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "chat") == 0)
        return cmd_chat(argv[2], argv[3]);
    fprintf(stderr, "usage: tok_tool info DIR | encode DIR STRINGS.jsonl | chat TEMPLATE "
                    "CONVS.json\n");
    return 2;
}
