/* fuzz_tokenizer.c - libFuzzer harness of the tokenizer (models/cz_tokenizer.c): the input
 * is a tokenizer.json, optionally followed by a line "#config" and a tokenizer_config.json,
 * written into this process's scratch folder and loaded with cz_tokenizer_load. A rejection
 * must carry CZ_EFORMAT or CZ_EIO and a message. A tokenizer that loads must encode a few
 * fixed strings and the input's own text (when it is UTF-8) into ids below its vocabulary
 * size, failing on valid UTF-8 only with CZ_ERANGE (a regex over PCRE2's limits); decode
 * them, whole and id by id, to the same valid UTF-8; decode ids out of range to nothing; and
 * render its chat template. A bug is an abort (cz_fuzz_fail-style "fuzz: " line), a failed
 * CZ_ASSERT, a sanitizer report or a leak. Needs only the models library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Noreturn void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, msg);
    abort();
}

static char dir[512]; /* the scratch folder: the harness's only process-wide state */

static void remove_scratch(void)
{
    rmdir(dir);
}

/* This process's scratch folder (created once, removed at exit): $TMPDIR, else /dev/shm,
 * else /tmp. The input files in it are removed after each input, so only a crash leaves
 * them. */
static const char *scratch_dir(void)
{
    if (dir[0])
        return dir;
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    int n = snprintf(dir, sizeof dir, "%s/cz-fuzz-tokenizer-%ld", base, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof dir)
        fail("scratch", "TMPDIR is too long a path");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        fail("scratch", "cannot create the scratch folder");
    atexit(remove_scratch);
    return dir;
}

static void write_file(const char *name, const uint8_t *d, size_t n)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
        fail("scratch", "cannot write the input file");
}

static void remove_file(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", scratch_dir(), name);
    remove(path);
}

static bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n)
            return false;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
        else if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
        if (len > 1 && (u[i + 1] < lo || u[i + 1] > hi))
            return false;
        for (size_t k = 2; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

/* Encodes text and checks the ids and their decodings. */
static void check_text(const cz_tokenizer *t, const char *text, size_t len)
{
    cz_tok_ids ids = {0};
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_tokenizer_encode(t, text, len, &ids, &err);
    if (st != CZ_OK) {
        if (st != CZ_ERANGE || !err.msg[0])
            fail("cz_tokenizer_encode", err.msg[0] ? err.msg : "failed without a message");
        cz_tok_ids_free(&ids);
        return;
    }
    uint32_t vocab = cz_tokenizer_vocab(t);
    for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] < 0 || (uint32_t)ids.ids[i] >= vocab)
            fail("cz_tokenizer_encode", "an id outside the vocabulary");
    for (int skip = 0; skip < 2; skip++) {
        char *all = cz_tokenizer_decode_all(t, ids.ids, ids.n, skip);
        size_t n_all = strlen(all);
        if (!utf8_valid(all, n_all))
            fail("cz_tokenizer_decode_all", "decoded text is not valid UTF-8");
        size_t cap = cz_tokenizer_decode_max(t), got = 0;
        char *piece = malloc(cap);
        cz_detok d;
        cz_detok_init(&d, skip);
        for (size_t i = 0; i <= ids.n; i++) {
            size_t k = i < ids.n ? cz_tokenizer_decode(t, &d, ids.ids[i], piece, cap)
                                 : cz_tokenizer_decode_flush(t, &d, piece, cap);
            if (k >= cap || piece[k] != '\0' || got + k > n_all ||
                memcmp(all + got, piece, k) != 0)
                fail("cz_tokenizer_decode", "id by id differs from the whole decode");
            got += k;
        }
        if (got != n_all)
            fail("cz_tokenizer_decode", "id by id is shorter than the whole decode");
        free(piece);
        free(all);
    }
    cz_tok_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n#config\n";
    const uint8_t *cfg = NULL;
    size_t tok_n = size;
    for (size_t i = 0; i + sizeof sep - 1 <= size; i++) {
        if (memcmp(data + i, sep, sizeof sep - 1) == 0) {
            tok_n = i;
            cfg = data + i + sizeof sep - 1;
            break;
        }
    }
    write_file("tokenizer.json", data, tok_n);
    if (cfg)
        write_file("tokenizer_config.json", cfg, size - (size_t)(cfg - data));

    cz_tokenizer *t = NULL;
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_tokenizer_load(scratch_dir(), &t, &err);
    remove_file("tokenizer.json");
    remove_file("tokenizer_config.json");
    if (st != CZ_OK) {
        if (t)
            fail("cz_tokenizer_load", "failed but set *out");
        if ((st != CZ_EFORMAT && st != CZ_EIO) || !err.msg[0])
            fail("cz_tokenizer_load", err.msg[0] ? err.msg : "failed without a message");
        return 0;
    }
    static const char *const texts[] = {
        "Hello world, it's 2024! I'M here.\n", "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x8E\xB5",
        "<|eot_id|>x<|im_start|>user\n<think>", "   \t\n\n  a  ", "", "1234567890 3.14",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        check_text(t, texts[i], strlen(texts[i]));
    size_t own = tok_n < 512 ? tok_n : 512;
    if (utf8_valid((const char *)data, own))
        check_text(t, (const char *)data, own);
    /* ids out of range and skipped ids decode to nothing */
    size_t cap = cz_tokenizer_decode_max(t);
    char *out = malloc(cap);
    cz_detok d;
    cz_detok_init(&d, true);
    int32_t odd[] = {-1, INT32_MIN, (int32_t)cz_tokenizer_vocab(t), INT32_MAX};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        if (cz_tokenizer_decode(t, &d, odd[i], out, cap) != 0 || out[0])
            fail("cz_tokenizer_decode", "an id out of range decoded to text");
    free(out);
    cz_chat_msg msgs[] = {{"system", " s "}, {"user", "u"}, {"assistant", "<think>r</think>a"}};
    char *chat = NULL;
    if (cz_chat_render(cz_tokenizer_chat(t), msgs, 3, true, &chat, &err) != CZ_OK)
        fail("cz_chat_render", err.msg);
    free(chat);
    if (!cz_tokenizer_describe(t)[0])
        fail("cz_tokenizer_describe", "empty");
    cz_tokenizer_free(t);
    return 0;
}
