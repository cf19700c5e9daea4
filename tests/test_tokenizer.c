/* test_tokenizer.c - the tokenizer module on tokenizer.json files written here in the real
 * format: a byte-level vocabulary (one token per byte, id = byte value) and a dozen merges,
 * special and plain added tokens, the Llama-3 and Qwen2 split regexes and GPT-2's ByteLevel
 * regex. The ids are computed by hand from the merge ranks (comments show how); decoding
 * round-trips, streams a character split over tokens, and skips special tokens; the chat
 * templates render the models' own strings; concurrent encodes agree; and every malformed
 * file fails naming the file and the field. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_tokenizer.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "%s/cz-tok-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* GPT-2's bytes-to-unicode, written independently of the module: the character (as UTF-8
 * in out) that byte b is spelled with in a byte-level vocabulary. */
static void byte_char(int b, char *out)
{
    int cp = b;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (!printable) {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE)))
                k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* The byte-level vocabulary "c": b for every byte, as JSON members, then the merged tokens
 * and one token no merge makes ("hel", for ignore_merges). Ids 256.. are:
 *   256 he  257 ll  258 hell  259 hello  260 Ġw  261 or  262 Ġwor  263 ld  264 Ġworld
 *   265 12  266 123  267 's  268 Ã© (é = C3 A9)  269 hÃ©  270 E4 B8  271 世 (E4 B8 96)
 *   272 hel */
static char *vocab_json(void)
{
    size_t cap = 1 << 14, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{");
    for (int b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        const char *esc = strcmp(c, "\"") == 0 ? "\\\"" : strcmp(c, "\\") == 0 ? "\\\\" : c;
        n += (size_t)snprintf(s + n, cap - n, "%s\"%s\": %d", b ? ", " : "", esc, b);
    }
    char e4[3], b8[3], x96[3];
    byte_char(0xE4, e4);
    byte_char(0xB8, b8);
    byte_char(0x96, x96);
    n += (size_t)snprintf(s + n, cap - n,
                          ", \"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259, \"Ġw\": 260, "
                          "\"or\": 261, \"Ġwor\": 262, \"ld\": 263, \"Ġworld\": 264, \"12\": 265, "
                          "\"123\": 266, \"'s\": 267, \"Ã©\": 268, \"hÃ©\": 269, \"%s%s\": 270, "
                          "\"%s%s%s\": 271, \"hel\": 272}",
                          e4, b8, e4, b8, x96);
    return s;
}

/* The merges in rank order, as pairs (true) or "a b" strings. */
static char *merges_json(bool pairs)
{
    char e4[3], b8[3], x96[3], e4b8[8];
    byte_char(0xE4, e4);
    byte_char(0xB8, b8);
    byte_char(0x96, x96);
    snprintf(e4b8, sizeof e4b8, "%s%s", e4, b8);
    const char *m[][2] = {{"h", "e"},   {"l", "l"},  {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"},
                          {"o", "r"},   {"Ġw", "or"}, {"l", "d"},  {"Ġwor", "ld"}, {"1", "2"},
                          {"12", "3"},  {"'", "s"},  {"Ã", "©"},  {"h", "Ã©"},  {e4, b8},
                          {e4b8, x96}};
    char *s = malloc(4096);
    size_t n = (size_t)snprintf(s, 4096, "[");
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        if (pairs)
            n += (size_t)snprintf(s + n, 4096 - n, "%s[\"%s\", \"%s\"]", i ? ", " : "", m[i][0],
                                  m[i][1]);
        else
            n += (size_t)snprintf(s + n, 4096 - n, "%s\"%s %s\"", i ? ", " : "", m[i][0],
                                  m[i][1]);
    }
    snprintf(s + n, 4096 - n, "]");
    return s;
}

static const char llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

static const char added_json[] =
    "[{\"id\": 300, \"content\": \"<|begin_of_text|>\", \"single_word\": false, \"lstrip\": false, "
    "\"rstrip\": false, \"normalized\": false, \"special\": true},"
    " {\"id\": 301, \"content\": \"<|eot_id|>\", \"special\": true, \"normalized\": false},"
    " {\"id\": 302, \"content\": \"<|start_header_id|>\", \"special\": true},"
    " {\"id\": 303, \"content\": \"<|end_header_id|>\", \"special\": true},"
    " {\"id\": 304, \"content\": \"<think>\", \"special\": false, \"normalized\": false},"
    " {\"id\": 305, \"content\": \"<|x|>\", \"special\": true},"
    " {\"id\": 306, \"content\": \"<|x|>y\", \"special\": true},"
    " {\"id\": 307, \"content\": \"y<|x\", \"special\": false}]";

/* A whole tokenizer.json: `pre` the pre_tokenizer object. */
static char *tokenizer_json(const char *pre, bool pairs, bool ignore_merges)
{
    char *v = vocab_json(), *m = merges_json(pairs);
    size_t cap = strlen(v) + strlen(m) + strlen(pre) + 4096;
    char *s = malloc(cap);
    snprintf(s, cap,
             "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": %s, "
             "\"normalizer\": null, \"pre_tokenizer\": %s, \"post_processor\": "
             "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", "
             "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, "
             "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
             "\"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": "
             "0}}], \"pair\": [], \"special_tokens\": {\"<|begin_of_text|>\": {\"id\": "
             "\"<|begin_of_text|>\", \"ids\": [300], \"tokens\": [\"<|begin_of_text|>\"]}}}]}, "
             "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
             "true, \"use_regex\": true}, \"model\": {\"type\": \"BPE\", \"dropout\": null, "
             "\"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
             "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": %s, \"vocab\": %s, "
             "\"merges\": %s}}",
             added_json, pre, ignore_merges ? "true" : "false", v, m);
    free(v);
    free(m);
    return s;
}

static char *split_pre(const char *regex)
{
    char *s = malloc(2048);
    snprintf(s, 2048,
             "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
             "{\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": "
             "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": "
             "false}]}",
             regex);
    return s;
}

/* Writes the Llama-3-style tokenizer (pairs, ignore_merges) and loads it. */
static cz_tokenizer *load_with(const char *pre, bool pairs, bool ignore_merges)
{
    char *j = tokenizer_json(pre, pairs, ignore_merges);
    write_file("tokenizer.json", j);
    free(j);
    cz_tokenizer *t = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_tokenizer_load(dir, &t, &err), CZ_OK, "%s", err.msg);
    return t;
}

static cz_tokenizer *load_llama3(void)
{
    char *pre = split_pre(llama3_regex);
    cz_tokenizer *t = load_with(pre, true, true);
    free(pre);
    return t;
}

/* Encodes `text` and checks the ids against the list ended by -1. */
static void expect_ids(const cz_tokenizer *t, const char *text, ...)
{
    cz_tok_ids ids = {0};
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_tokenizer_encode(t, text, strlen(text), &ids, &err), CZ_OK, "%s", err.msg);
    va_list ap;
    va_start(ap, text);
    char got[1024] = "", want[1024] = "";
    size_t i = 0;
    bool same = true;
    for (int v = va_arg(ap, int); v != -1; v = va_arg(ap, int), i++) {
        snprintf(want + strlen(want), sizeof want - strlen(want), " %d", v);
        if (i >= ids.n || ids.ids[i] != v)
            same = false;
    }
    va_end(ap);
    for (size_t k = 0; k < ids.n; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids.ids[k]);
    cr_assert(same && i == ids.n, "\"%s\": ids [%s ], expected [%s ]", text, got, want);
    /* and the ids decode back to the text */
    char *back = cz_tokenizer_decode_all(t, ids.ids, ids.n, false);
    cr_assert_str_eq(back, text);
    free(back);
    cz_tok_ids_free(&ids);
}

Test(tokenizer, merges_by_rank, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* hello: (h,e) rank 0, (l,l) 1, (he,ll) 2, (hell,o) 3; " world": Ġw 4, or 5, ld 7,
     * Ġwor 6, Ġworld 8 */
    expect_ids(t, "hello world", 259, 264, -1);
    /* "hel" is in the vocabulary: with ignore_merges it is one token */
    expect_ids(t, "hel", 272, -1);
    /* "there": only (h,e) applies */
    expect_ids(t, "there", 116, 256, 114, 101, -1);
    /* an empty text encodes to nothing */
    expect_ids(t, "", -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, ignore_merges_off_uses_the_merges, .init = make_dir, .fini = remove_dir)
{
    char *pre = split_pre(llama3_regex);
    cz_tokenizer *t = load_with(pre, false, false); /* and merges as "a b" strings */
    free(pre);
    /* "hel" by the merges: (h,e) -> he, then no (he, l) merge */
    expect_ids(t, "hel", 256, 108, -1);
    expect_ids(t, "hello world", 259, 264, -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, multibyte_utf8, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* "héllo": h C3 A9 l l o; (l,l) rank 1, (Ã,©) 12, (h,Ã©) 13. " 世界": Ġ + 世 (merges 14,
     * 15) + 界 E7 95 8C unmerged. " 🎵": Ġ + F0 9F 8E B5, a run of non-letters */
    expect_ids(t, "héllo 世界 🎵", 269, 257, 111, 32, 271, 0xE7, 0x95, 0x8C, 32, 0xF0, 0x9F, 0x8E,
               0xB5, -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, numbers_in_groups_of_three, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* \p{N}{1,3}: "123" (merges 9, 10), "456", "7" */
    expect_ids(t, "1234567", 266, '4', '5', '6', '7', -1);
    cz_tokenizer_free(t);
    /* Qwen2's \p{N}: one digit per token */
    char *pre = split_pre(qwen2_regex);
    t = load_with(pre, false, false);
    free(pre);
    expect_ids(t, "1234", '1', '2', '3', '4', -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, contractions, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* (?i:'s|...): "'s" (merge 11) and "'S" (no merge) split off the word */
    expect_ids(t, "it's", 'i', 't', 267, -1);
    expect_ids(t, "IT'S", 'I', 'T', '\'', 'S', -1);
    /* "'x" is no contraction: ' joins the punctuation alternative, x a letter run */
    expect_ids(t, "'x", '\'', 'x', -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, whitespace_runs_and_newlines, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* "a   b": "a", "  " (\s+(?!\S) leaves the last space), " b" (Ġ b: no merge) */
    expect_ids(t, "a   b", 'a', ' ', ' ', ' ', 'b', -1);
    /* "a\n\nb": \s*[\r\n]+ takes "\n\n" */
    expect_ids(t, "a\n\nb", 'a', '\n', '\n', 'b', -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, added_and_special_tokens, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    expect_ids(t, "hi<|eot_id|>there", 'h', 'i', 301, 't', 256, 'r', 'e', -1);
    /* longest match first */
    expect_ids(t, "<|x|>yz", 306, 'z', -1);
    expect_ids(t, "<|x|>z", 305, 'z', -1);
    /* a non-special added token; a special token's prefix is plain text */
    expect_ids(t, "<think>hello", 304, 259, -1);
    expect_ids(t, "<|eot_id", '<', '|', 'e', 'o', 't', '_', 'i', 'd', -1);
    /* tokens with normalized false are split out first, those with it true (the default of
     * a plain token, here "y<|x") in what is left: "y<|x" starts earlier but loses */
    expect_ids(t, "ay<|x|>", 'a', 'y', 305, -1);
    expect_ids(t, "y<|x", 307, -1);
    cr_assert(cz_tokenizer_is_special(t, 301));
    cr_assert(!cz_tokenizer_is_special(t, 304));
    cr_assert(!cz_tokenizer_is_special(t, 100000));
    cr_assert_eq(cz_tokenizer_token_id(t, "<|eot_id|>"), 301);
    cr_assert_eq(cz_tokenizer_token_id(t, "Ġworld"), 264);
    cr_assert_eq(cz_tokenizer_token_id(t, "nope"), -1);
    cz_tokenizer_free(t);
}

Test(tokenizer, gpt2_bytelevel_regex_and_prefix_space, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_with("{\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
                                "\"trim_offsets\": true, \"use_regex\": true}",
                                false, false);
    /* a prefix space before each stretch between added tokens: " hello" is Ġ + hello's
     * merges (Ġ,h) has none, so Ġ h e l l o -> Ġ, hello; GPT-2 splits digits as one run */
    cz_tok_ids ids = {0};
    cz_err err;
    cr_assert_eq(cz_tokenizer_encode(t, "hello world", 11, &ids, &err), CZ_OK, "%s", err.msg);
    cr_assert(ids.n == 3 && ids.ids[0] == 32 && ids.ids[1] == 259 && ids.ids[2] == 264);
    /* the decoder keeps the prefix space, as the ByteLevel decoder does */
    char *back = cz_tokenizer_decode_all(t, ids.ids, ids.n, false);
    cr_assert_str_eq(back, " hello world");
    free(back);
    ids.n = 0;
    cr_assert_eq(cz_tokenizer_encode(t, "x<|eot_id|>y 1234", 17, &ids, &err), CZ_OK, "%s",
                 err.msg);
    int32_t want[] = {32, 'x', 301, 32, 'y', 32, 266, '4'};
    cr_assert_eq(ids.n, 8);
    for (size_t i = 0; i < 8; i++)
        cr_assert_eq(ids.ids[i], want[i], "id %zu: %d, expected %d", i, ids.ids[i], want[i]);
    cz_tok_ids_free(&ids);
    cz_tokenizer_free(t);
}

Test(tokenizer, appends_to_the_callers_buffer, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    cz_tok_ids ids = {0};
    cz_err err;
    cr_assert_eq(cz_tokenizer_encode(t, "hello", 5, &ids, &err), CZ_OK);
    cr_assert_eq(cz_tokenizer_encode(t, " world", 6, &ids, &err), CZ_OK);
    cr_assert_eq(ids.n, 2);
    cr_assert(ids.ids[0] == 259 && ids.ids[1] == 264);
    cz_tok_ids_free(&ids);
    cr_assert_null(ids.ids);
    cz_tokenizer_free(t);
}

Test(tokenizer, invalid_utf8_names_the_offset, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    cz_tok_ids ids = {0};
    cz_err err;
    /* a lone continuation byte, a truncated sequence, a surrogate, an overlong form */
    const char *bad[] = {"abc\x80", "ab\xE4\xB8", "a\xED\xA0\x80", "\xC0\xAF"};
    size_t at[] = {3, 2, 1, 0};
    for (size_t i = 0; i < 4; i++) {
        cz_err_clear(&err);
        cr_assert_eq(cz_tokenizer_encode(t, bad[i], strlen(bad[i]), &ids, &err), CZ_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", at[i]);
        cr_assert(strstr(err.msg, want), "%s", err.msg);
    }
    cr_assert_eq(ids.n, 0);
    cz_tok_ids_free(&ids);
    cz_tokenizer_free(t);
}

Test(tokenizer, streaming_decode_holds_a_split_character, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    size_t cap = cz_tokenizer_decode_max(t);
    char *out = malloc(cap);
    cz_detok d;
    cz_detok_init(&d, true);
    /* 世 = E4 B8 96: token 270 holds E4 B8, token 0x96 the last byte */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 'a', out, cap), 1);
    cr_assert_str_eq(out, "a");
    cr_assert_eq(cz_tokenizer_decode(t, &d, 270, out, cap), 0);
    cr_assert_str_eq(out, "");
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0x96, out, cap), 3);
    cr_assert_str_eq(out, "世");
    /* a byte at a time */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0xE4, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0xB8, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0x96, out, cap), 3);
    /* skipped special tokens and ids out of range decode to nothing and keep the state */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0xE4, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 301, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, -5, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 290, out, cap), 0); /* a hole in the ids */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 1 << 30, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0xB8, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0x96, out, cap), 3);
    cr_assert_str_eq(out, "世");
    /* an incomplete character then ASCII: U+FFFD, then the ASCII */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 270, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 'z', out, cap), 4);
    cr_assert_str_eq(out, "\xEF\xBF\xBDz");
    /* a lone continuation byte; an incomplete character at the end of the stream */
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0x96, out, cap), 3);
    cr_assert_str_eq(out, "\xEF\xBF\xBD");
    cr_assert_eq(cz_tokenizer_decode(t, &d, 0xE4, out, cap), 0);
    cr_assert_eq(cz_tokenizer_decode_flush(t, &d, out, cap), 3);
    cr_assert_str_eq(out, "\xEF\xBF\xBD");
    cr_assert_eq(cz_tokenizer_decode_flush(t, &d, out, cap), 0);
    /* a zeroed state skips special tokens too; they are kept when asked */
    cz_detok z = {0};
    cr_assert_eq(cz_tokenizer_decode(t, &z, 301, out, cap), 0);
    cz_detok_init(&d, false);
    cr_assert_eq(cz_tokenizer_decode(t, &d, 301, out, cap), 10);
    cr_assert_str_eq(out, "<|eot_id|>");
    free(out);
    int32_t ids[] = {259, 301, 264, 270};
    char *s = cz_tokenizer_decode_all(t, ids, 4, true);
    cr_assert_str_eq(s, "hello world\xEF\xBF\xBD");
    free(s);
    s = cz_tokenizer_decode_all(t, ids, 3, false);
    cr_assert_str_eq(s, "hello<|eot_id|> world");
    free(s);
    cz_tokenizer_free(t);
}

Test(tokenizer, config_bos_eos_and_chat_template, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    /* without tokenizer_config.json: the post-processor's BOS, no EOS, chat from tokens */
    cr_assert_eq(cz_tokenizer_bos(t), 300);
    cr_assert(cz_tokenizer_add_bos(t));
    cr_assert_eq(cz_tokenizer_eos(t), -1);
    cr_assert_eq(cz_tokenizer_vocab(t), 308);
    cr_assert_eq(cz_tokenizer_chat(t), CZ_CHAT_LLAMA3);
    cr_assert_str_eq(cz_tokenizer_describe(t), "tokenizer.json (byte-level BPE, 308 tokens)");
    cz_tokenizer_free(t);

    write_file("tokenizer_config.json",
               "{\"add_bos_token\": false, \"bos_token\": null, \"eos_token\": {\"__type\": "
               "\"AddedToken\", \"content\": \"<|eot_id|>\"}, \"chat_template\": \"{% for m in "
               "messages %}<|im_start|>{{ m.content }}{% endfor %}<think>\"}");
    t = load_llama3();
    cr_assert_eq(cz_tokenizer_bos(t), -1);
    cr_assert(!cz_tokenizer_add_bos(t));
    cr_assert_eq(cz_tokenizer_eos(t), 301);
    cr_assert_eq(cz_tokenizer_chat(t), CZ_CHAT_QWEN3);
    cz_tokenizer_free(t);

    write_file("tokenizer_config.json", "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": "
                                        "\"<|eot_id|>\", \"chat_template\": [{\"name\": "
                                        "\"default\", \"template\": \"<|start_header_id|> "
                                        "Cutting Knowledge Date\"}]}");
    t = load_llama3();
    cr_assert_eq(cz_tokenizer_bos(t), 300);
    cr_assert(cz_tokenizer_add_bos(t));
    cr_assert_eq(cz_tokenizer_chat(t), CZ_CHAT_LLAMA31);
    cz_tokenizer_free(t);

    /* a chat_template.jinja beside a config without a template */
    write_file("tokenizer_config.json", "{\"eos_token\": \"<|eot_id|>\"}");
    write_file("chat_template.jinja", "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.");
    t = load_llama3();
    cr_assert_eq(cz_tokenizer_chat(t), CZ_CHAT_CHATML);
    cz_tokenizer_free(t);
}

Test(tokenizer, byte_fallback, .init = make_dir, .fini = remove_dir)
{
    cr_assert_null(cz_tokenizer_bytes(255));
    cz_tokenizer *t = cz_tokenizer_bytes(1000);
    cr_assert_not_null(t);
    cr_assert_eq(cz_tokenizer_vocab(t), 1000);
    cr_assert_eq(cz_tokenizer_eos(t), -1);
    cr_assert_eq(cz_tokenizer_bos(t), -1);
    cr_assert(!cz_tokenizer_add_bos(t));
    cr_assert_eq(cz_tokenizer_chat(t), CZ_CHAT_PLAIN);
    cr_assert_str_eq(cz_tokenizer_describe(t), "byte-level fallback (no tokenizer.json)");
    expect_ids(t, "hé", 'h', 0xC3, 0xA9, -1);
    int32_t ids[] = {'o', 999, 256, 'k', 5000, -1};
    char *s = cz_tokenizer_decode_all(t, ids, 6, true);
    cr_assert_str_eq(s, "ok");
    free(s);
    cz_tok_ids out = {0};
    cz_err err;
    cr_assert_eq(cz_tokenizer_encode(t, "\xFF", 1, &out, &err), CZ_EINVAL);
    cz_tok_ids_free(&out);
    cz_tokenizer_free(t);
}

typedef struct thread_arg {
    const cz_tokenizer *t;
    const char *text;
    size_t n;
    int32_t first, last;
    bool ok;
} thread_arg;

static void *encode_loop(void *p)
{
    thread_arg *a = p;
    a->ok = true;
    for (int i = 0; i < 200; i++) {
        cz_tok_ids ids = {0};
        cz_err err;
        if (cz_tokenizer_encode(a->t, a->text, strlen(a->text), &ids, &err) != CZ_OK ||
            ids.n != a->n || ids.ids[0] != a->first || ids.ids[ids.n - 1] != a->last)
            a->ok = false;
        cz_tok_ids_free(&ids);
    }
    return NULL;
}

Test(tokenizer, concurrent_encodes_on_one_tokenizer, .init = make_dir, .fini = remove_dir)
{
    cz_tokenizer *t = load_llama3();
    const char *texts[] = {"hello world 1234567 it's", "héllo 世界 🎵<|eot_id|>hel",
                           "<|x|>y there   \n\n b", "IT'S 12 hello<think>"};
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        cz_tok_ids ids = {0};
        cz_err err;
        cr_assert_eq(cz_tokenizer_encode(t, texts[i], strlen(texts[i]), &ids, &err), CZ_OK);
        args[i] = (thread_arg){t, texts[i], ids.n, ids.ids[0], ids.ids[ids.n - 1], false};
        cz_tok_ids_free(&ids);
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, encode_loop, &args[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert(args[i].ok, "thread %d encoded \"%s\" differently", i, texts[i]);
    }
    cz_tokenizer_free(t);
}

/* ---- chat templates ---- */

static char *render(cz_chat_template kind, const cz_chat_msg *m, size_t n, bool gen)
{
    char *out = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_chat_render(kind, m, n, gen, &out, &err), CZ_OK, "%s", err.msg);
    return out;
}

Test(tokenizer, chat_llama3)
{
    cz_chat_msg m[] = {{"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello!"},
                       {"user", "2+2?"}};
    char *s = render(CZ_CHAT_LLAMA3, m, 4, true);
    cr_assert_str_eq(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                        "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
    s = render(CZ_CHAT_LLAMA31, m + 1, 1, false);
    cr_assert_str_eq(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                        "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    free(s);
    s = render(CZ_CHAT_LLAMA31, m, 2, true);
    cr_assert_str_eq(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                        "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi"
                        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
}

Test(tokenizer, chat_qwen)
{
    cz_chat_msg m[] = {{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Why?"}};
    char *s = render(CZ_CHAT_CHATML, m, 3, true);
    cr_assert_str_eq(s, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                        "helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nWhy?"
                        "<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    cz_chat_msg sys[] = {{"system", "S"}, {"user", "U"}};
    s = render(CZ_CHAT_CHATML, sys, 2, false);
    cr_assert_str_eq(s, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
    free(s);
    s = render(CZ_CHAT_QWEN2, m, 1, true);
    cr_assert_str_eq(s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    /* Qwen3: no default system; earlier reasoning dropped; a final assistant turn after the
     * last query keeps (or gets) its think block */
    cz_chat_msg q3[] = {{"user", "a"}, {"assistant", "<think>\nr1\n</think>\n\nx"}, {"user", "b"},
                        {"assistant", "\n\ny"}};
    s = render(CZ_CHAT_QWEN3, q3, 4, false);
    cr_assert_str_eq(s, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n"
                        "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                        "</think>\n\ny<|im_end|>\n");
    free(s);
    s = render(CZ_CHAT_QWEN3, q3, 3, true);
    cr_assert_str_eq(s, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n"
                        "<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n");
    free(s);
}

Test(tokenizer, chat_plain_and_errors)
{
    cz_chat_msg m[] = {{"user", "Hi"}, {"tool", "x"}};
    char *s = render(CZ_CHAT_PLAIN, m, 1, true);
    cr_assert_str_eq(s, "user: Hi\n\nassistant: ");
    free(s);
    char *out = NULL;
    cz_err err;
    cr_assert_eq(cz_chat_render(CZ_CHAT_CHATML, m, 2, true, &out, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "messages[1]") && strstr(err.msg, "'tool'"), "%s", err.msg);
    cr_assert_null(out);
    cr_assert_eq(cz_chat_render(CZ_CHAT_CHATML, m, 0, true, &out, &err), CZ_EINVAL);
    cz_chat_template k;
    cr_assert_eq(cz_chat_template_parse("qwen3", &k, &err), CZ_OK);
    cr_assert_eq(k, CZ_CHAT_QWEN3);
    cr_assert_str_eq(cz_chat_template_name(CZ_CHAT_LLAMA31), "llama31");
    cr_assert_eq(cz_chat_template_parse("jinja", &k, &err), CZ_EINVAL);
}

/* ---- malformed files ---- */

/* Loads DIR expecting `want`; the message must name `file` and hold `field`. */
static void expect_fail(cz_status want, const char *file, const char *field)
{
    cz_tokenizer *t = NULL;
    cz_err err;
    cz_err_clear(&err);
    cz_status s = cz_tokenizer_load(dir, &t, &err);
    cr_assert_eq(s, want, "status %d, expected %d: %s", s, want, err.msg);
    cr_assert_null(t);
    cr_assert(strstr(err.msg, file), "message does not name %s: %s", file, err.msg);
    cr_assert(strstr(err.msg, field), "message does not name '%s': %s", field, err.msg);
}

/* The Llama-3 tokenizer.json with `from` replaced by `to` (once). */
static void write_edited(const char *from, const char *to)
{
    char *pre = split_pre(llama3_regex);
    char *j = tokenizer_json(pre, true, true);
    free(pre);
    char *at = strstr(j, from);
    cr_assert_not_null(at, "'%s' not in the file", from);
    size_t n = strlen(j) - strlen(from) + strlen(to) + 1;
    char *e = malloc(n);
    snprintf(e, n, "%.*s%s%s", (int)(at - j), j, to, at + strlen(from));
    write_file("tokenizer.json", e);
    free(e);
    free(j);
}

Test(tokenizer, missing_and_unparsable_files, .init = make_dir, .fini = remove_dir)
{
    expect_fail(CZ_ENOTFOUND, "tokenizer.json", "cannot open");
    write_file("tokenizer.json", "{\"model\": \n  [1, 2,,]}");
    expect_fail(CZ_EFORMAT, "tokenizer.json:2:", "not valid JSON");
    write_file("tokenizer.json", "[]");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "expected a JSON object");
}

Test(tokenizer, malformed_model, .init = make_dir, .fini = remove_dir)
{
    write_edited("\"type\": \"BPE\"", "\"type\": \"WordPiece\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.type");
    write_edited("\"he\": 256", "\"he\": -1");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.vocab.he");
    write_edited("\"he\": 256", "\"he\": 256, \"he\": 257");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.vocab");
    write_edited("\"ll\": 257", "\"ll\": 256");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "id 256");
    write_edited("[\"he\", \"ll\"]", "[\"he\", \"zz\"]");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.merges[2]");
    write_edited("[\"hell\", \"o\"]", "\"hell o\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.merges[3]");
    write_edited("\"merges\": [", "\"merges\": [[\"q\", \"q\"], ");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.merges[0]");
    write_edited("\"byte_fallback\": false", "\"byte_fallback\": true");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.byte_fallback");
    write_edited("\"unk_token\": null", "\"unk_token\": \"<unk>\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.unk_token");
    write_edited("\"dropout\": null", "\"dropout\": 0.1");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.dropout");
    write_edited("\"ignore_merges\": true", "\"ignore_merges\": 1");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.ignore_merges");
}

Test(tokenizer, malformed_merges_strings, .init = make_dir, .fini = remove_dir)
{
    char *pre = split_pre(llama3_regex);
    char *j = tokenizer_json(pre, false, true);
    free(pre);
    char *at = strstr(j, "\"hell o\"");
    cr_assert_not_null(at);
    memcpy(at, "\"hello \"", 8);
    write_file("tokenizer.json", j);
    free(j);
    expect_fail(CZ_EFORMAT, "tokenizer.json", "model.merges[3]");
}

Test(tokenizer, unsupported_parts, .init = make_dir, .fini = remove_dir)
{
    write_edited("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "normalizer");
    write_edited("\"Isolated\"", "\"Removed\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "pre_tokenizer.pretokenizers[0].behavior");
    write_edited("\"invert\": false", "\"invert\": true");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "pre_tokenizer.pretokenizers[0].invert");
    write_edited("{\"Regex\": \"", "{\"Regex\": \"(");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "pre_tokenizer.pretokenizers[0].pattern.Regex");
    write_edited("\"type\": \"Split\"", "\"type\": \"Digits\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "pre_tokenizer.pretokenizers[0].type");
    write_edited("\"pre_tokenizer\": {", "\"pre_tokenizer\": null, \"x\": {");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "pre_tokenizer");
    write_edited("\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"Metaspace\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "decoder.type");
    write_edited("\"lstrip\": false", "\"lstrip\": true");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "added_tokens[0].lstrip");
    write_edited("\"id\": 301", "\"id\": 300");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "added_tokens[1]");
    write_edited("\"content\": \"<|x|>y\"", "\"content\": \"<|x|>\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "added_tokens[6]");
    write_edited("\"id\": 304", "\"id\": 259");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "added_tokens[4].id");
    write_edited("\"content\": \"<think>\"", "\"content\": \"\"");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "added_tokens[4].content");
    write_edited("\"ids\": [300]", "\"ids\": [\"x\"]");
    expect_fail(CZ_EFORMAT, "tokenizer.json", "post_processor.processors[1].special_tokens");
}

Test(tokenizer, malformed_config, .init = make_dir, .fini = remove_dir)
{
    char *pre = split_pre(llama3_regex);
    char *j = tokenizer_json(pre, true, true);
    free(pre);
    write_file("tokenizer.json", j);
    free(j);
    write_file("tokenizer_config.json", "{\"eos_token\": \"<|nope|>\"}");
    expect_fail(CZ_EFORMAT, "tokenizer_config.json", "eos_token");
    write_file("tokenizer_config.json", "{\"bos_token\": 7}");
    expect_fail(CZ_EFORMAT, "tokenizer_config.json", "bos_token");
    write_file("tokenizer_config.json", "{\"add_bos_token\": \"yes\"}");
    expect_fail(CZ_EFORMAT, "tokenizer_config.json", "add_bos_token");
    write_file("tokenizer_config.json", "{\"chat_template\": 3}");
    expect_fail(CZ_EFORMAT, "tokenizer_config.json", "chat_template");
    write_file("tokenizer_config.json", "{\"eos_token\": ");
    expect_fail(CZ_EFORMAT, "tokenizer_config.json", "not valid JSON");
}
