/* cz_tokenizer.c - see cz_tokenizer.h. The encoding pipeline follows huggingface/tokenizers
 * (tokenizer/added_vocabulary.rs: added tokens split out of the raw text in two passes,
 * non-normalized then normalized tokens, leftmost-longest; pre_tokenizers/split.rs and
 * byte_level.rs: "Isolated" splits, the optional prefix space, GPT-2's bytes-to-unicode
 * table; models/bpe/model.rs and word.rs: ignore_merges, unknown characters, and the merge
 * loop that applies the lowest-ranked pair first, the leftmost on ties, skipping stale queue
 * entries; decoders/byte_level.rs: tokens back to bytes, then String::from_utf8_lossy).
 * The chat templates are the models' tokenizer_config.json "chat_template" strings
 * (Meta-Llama-3-8B-Instruct, Llama-3.1-8B-Instruct, Qwen2-7B-Instruct, Qwen2.5-7B-Instruct,
 * Qwen3-8B) written out for plain-text messages. */
#include "cz_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cz_json.h"

/* Largest token id accepted from a file: beyond any released vocabulary (Llama-3: 128256,
 * Qwen: 151936), small enough that the per-id table of a hostile file stays small. */
#define CZ_TOK_MAX_ID ((1 << 24) - 1)
/* Largest tokenizer.json read (Llama-3's is 9 MB). */
#define CZ_TOK_FILE_MAX ((size_t)1 << 30)
/* GPT-2's pre-tokenizer regex (ByteLevel with use_regex), as `tokenizers` writes it. */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum { TOK_PRESENT = 1, TOK_SPECIAL = 2 };

/* One token id: its decoded bytes arena[off..off+len) and flags. */
typedef struct tok_id {
    uint32_t off, len;
    uint8_t flags;
} tok_id;

/* A vocabulary entry in the string map: the string arena[off..off+len), id < 0 = empty. */
typedef struct tok_vslot {
    uint32_t hash, off, len;
    int32_t id;
} tok_vslot;

/* A merge: the pair (a, b) as key a << 32 | b (UINT64_MAX = empty), its rank, the id of
 * the merged token. */
typedef struct tok_mslot {
    uint64_t key;
    uint32_t rank;
    int32_t new_id;
} tok_mslot;

/* An added token: content arena[off..off+len). */
typedef struct tok_added {
    uint32_t off, len;
    int32_t id;
    bool special, normalized;
} tok_added;

struct cz_tokenizer {
    bool fallback;
    uint32_t n_ids;          /* ids are [0, n_ids) */
    int32_t bos, eos;
    bool add_bos;
    cz_chat_template chat;
    char describe[96];
    char *arena;             /* strings and decoded bytes */
    size_t arena_n, arena_cap;
    tok_id *ids;             /* [n_info]: decode table */
    uint32_t n_info;
    size_t max_token_bytes;
    /* model.vocab: string -> id, open addressing */
    tok_vslot *vocab;
    size_t vocab_mask;
    /* model.merges: pair -> (rank, new id) */
    tok_mslot *merges;
    size_t merges_mask;
    int32_t byte_id[256];    /* the vocabulary id of each byte's character, -1 when absent */
    bool ignore_merges, fuse_unk;
    int32_t unk_id;
    /* added tokens, and per pass (0: not normalized, 1: normalized) their indices ordered by
     * first byte, then longest first; pass_first[p][b]..pass_first[p][b+1] for byte b */
    tok_added *added;
    size_t n_added;
    uint32_t *pass_order[2];
    uint32_t pass_first[2][257];
    /* pre-tokenizer: Split stages, then ByteLevel */
    pcre2_code **splits;
    size_t n_splits;
    bool bl_prefix_space;
    pcre2_code *bl_regex;    /* GPT-2's when ByteLevel has use_regex, else NULL */
    uint16_t byte_cp[256];   /* GPT-2 bytes-to-unicode */
    int16_t cp_byte[324];    /* its inverse for code points < 324, -1 elsewhere */
    char *chat_text;         /* the chat template text, NULL when none */
};

/* ---- small helpers ---- */

void cz_tok_ids_free(cz_tok_ids *ids)
{
    if (!ids)
        return;
    free(ids->ids);
    ids->ids = NULL;
    ids->n = ids->cap = 0;
}

static void ids_push(cz_tok_ids *out, int32_t id)
{
    cz_grow((void **)&out->ids, &out->cap, out->n + 1, sizeof *out->ids);
    out->ids[out->n++] = id;
}

/* The length of the valid UTF-8 character at s[0..n), 0 when it is not one (overlong forms,
 * surrogates and code points past U+10FFFF are not); *cp its code point. */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    v = (v << 6) | (s[1] & 0x3F);
    for (size_t i = 2; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

/* The offset of the first byte of s[0..n) that is not valid UTF-8, or n. */
static size_t utf8_check(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = utf8_char(u + i, n - i, &cp);
        if (!l)
            return i;
        i += l;
    }
    return n;
}

static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 30; /* splitmix64's finaliser */
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* Appends s[0..n) to the arena; returns its offset. */
static uint32_t arena_add(cz_tokenizer *t, const char *s, size_t n)
{
    CZ_ASSERT(t->arena_n + n < UINT32_MAX);
    cz_grow((void **)&t->arena, &t->arena_cap, t->arena_n + n + 1, 1);
    uint32_t off = (uint32_t)t->arena_n;
    if (n)
        memcpy(t->arena + off, s, n);
    t->arena_n += n;
    return off;
}

static int32_t vocab_get(const cz_tokenizer *t, const char *s, size_t n)
{
    if (!t->vocab)
        return -1;
    uint32_t h = hash_str(s, n);
    for (size_t i = h & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const tok_vslot *v = &t->vocab[i];
        if (v->id < 0)
            return -1;
        if (v->hash == h && v->len == n && memcmp(t->arena + v->off, s, n) == 0)
            return v->id;
    }
}

/* Inserts (s, id); false when s is already there (*old_id its id). */
static bool vocab_put(cz_tokenizer *t, const char *s, size_t n, int32_t id, int32_t *old_id)
{
    uint32_t h = hash_str(s, n);
    size_t i = h & t->vocab_mask;
    for (;; i = (i + 1) & t->vocab_mask) {
        tok_vslot *v = &t->vocab[i];
        if (v->id < 0)
            break;
        if (v->hash == h && v->len == n && memcmp(t->arena + v->off, s, n) == 0) {
            *old_id = v->id;
            return false;
        }
    }
    uint32_t off = arena_add(t, s, n);
    t->vocab[i] = (tok_vslot){h, off, (uint32_t)n, id};
    return true;
}

static const tok_mslot *merge_get(const cz_tokenizer *t, int32_t a, int32_t b)
{
    if (!t->merges)
        return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = hash_u64(key) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
        const tok_mslot *m = &t->merges[i];
        if (m->key == UINT64_MAX)
            return NULL;
        if (m->key == key)
            return m;
    }
}

/* Sets the merge of (a, b); a later entry for the same pair replaces an earlier one, as the
 * hash map `tokenizers` builds from the list does. */
static void merge_put(cz_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t new_id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = hash_u64(key) & t->merges_mask;
    while (t->merges[i].key != UINT64_MAX && t->merges[i].key != key)
        i = (i + 1) & t->merges_mask;
    t->merges[i] = (tok_mslot){key, rank, new_id};
}

/* GPT-2's bytes-to-unicode: printable Latin-1 bytes stand for themselves, the others for
 * 256, 257, ... in byte order. */
static void byte_tables(cz_tokenizer *t)
{
    uint32_t next = 256;
    for (int i = 0; i < 324; i++)
        t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                         (b >= 0xAE && b <= 0xFF);
        t->byte_cp[b] = (uint16_t)(printable ? (uint32_t)b : next++);
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
    CZ_ASSERT(next == 324);
}

/* The bytes a token decodes to under the ByteLevel decoder: each character's byte when all
 * of its characters are in the table, else the token's own UTF-8 bytes. Appended to the
 * arena; *off and *len locate them. */
static void token_bytes(cz_tokenizer *t, const char *s, size_t n, uint32_t *off, uint32_t *len)
{
    char small[256] = {0};
    char *buf = n <= sizeof small ? small : cz_xmalloc(n);
    size_t m = 0;
    bool mapped = true;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = utf8_char((const unsigned char *)s + i, n - i, &cp);
        CZ_ASSERT(l > 0); /* token strings are checked at load */
        if (cp >= 324 || t->cp_byte[cp] < 0) {
            mapped = false;
            break;
        }
        buf[m++] = (char)t->cp_byte[cp];
        i += l;
    }
    if (!mapped)
        m = n;
    *off = arena_add(t, mapped ? buf : s, m);
    *len = (uint32_t)m;
    if (m > t->max_token_bytes)
        t->max_token_bytes = m;
    if (buf != small)
        free(buf);
}

/* ---- loading ---- */

/* A CZ_EFORMAT about field `field` of `file`: "<file>: field '<field>': <detail>". */
static cz_status bad(cz_err *err, const char *file, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static cz_status bad(cz_err *err, const char *file, const char *field, const char *fmt, ...)
{
    char detail[CZ_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return cz_err_field(err, CZ_EFORMAT, file, field, "%s", detail);
}

/* The child `key` of `obj`, NULL when absent or JSON null. */
static const cJSON *opt(const cJSON *obj, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(it) ? NULL : it;
}

/* An optional boolean `key` of `obj` (at path `where` in `file`); `def` when absent. */
static cz_status get_bool(const cJSON *obj, const char *file, const char *where, const char *key,
                          bool def, bool *out, cz_err *err)
{
    const cJSON *it = opt(obj, key);
    if (!it) {
        *out = def;
        return CZ_OK;
    }
    if (!cJSON_IsBool(it)) {
        char f[256];
        snprintf(f, sizeof f, "%s%s%s", where, *where ? "." : "", key);
        return bad(err, file, f, "expected true or false");
    }
    *out = cJSON_IsTrue(it);
    return CZ_OK;
}

/* A required string `key` of `obj`. */
static cz_status get_str(const cJSON *obj, const char *file, const char *where, const char *key,
                         const char **out, cz_err *err)
{
    const cJSON *it = opt(obj, key);
    char f[256];
    snprintf(f, sizeof f, "%s%s%s", where, *where ? "." : "", key);
    if (!it)
        return bad(err, file, f, "missing (expected a string)");
    if (!cJSON_IsString(it))
        return bad(err, file, f, "expected a string");
    *out = it->valuestring;
    return CZ_OK;
}

/* A token id: an integer in [0, CZ_TOK_MAX_ID]. */
static cz_status get_id(const cJSON *it, const char *file, const char *field, int32_t *out,
                        cz_err *err)
{
    double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
    if (!cJSON_IsNumber(it) || v != floor(v) || v < 0 || v > CZ_TOK_MAX_ID)
        return bad(err, file, field, "expected a token id, an integer in [0, %d]", CZ_TOK_MAX_ID);
    *out = (int32_t)v;
    return CZ_OK;
}

/* A string of the file must be valid UTF-8 (Rust's String is). */
static cz_status check_utf8(const char *s, const char *file, const char *field, cz_err *err)
{
    size_t n = strlen(s);
    size_t bad_at = utf8_check(s, n);
    if (bad_at < n)
        return bad(err, file, field, "invalid UTF-8 at byte %zu of the string", bad_at);
    return CZ_OK;
}

/* The pattern as PCRE2 must read it to match as Oniguruma reads it: `\s` and `\S` are
 * Unicode White_Space there (U+0085 in, U+180E out). Caller frees. */
static char *re_translate(const char *pat)
{
    size_t n = strlen(pat);
    char *out = cz_xmalloc(n * 8 + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (pat[i] == '\\' && i + 1 < n) {
            char c = pat[i + 1];
            if (c == 's' || c == 'S') {
                const char *r = c == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
                memcpy(out + m, r, strlen(r));
                m += strlen(r);
            } else {
                out[m++] = '\\';
                out[m++] = c;
            }
            i++;
            continue;
        }
        out[m++] = pat[i];
    }
    out[m] = '\0';
    return out;
}

/* Compiles a Split or ByteLevel pattern (a regex, or a literal string when `literal`). */
static cz_status compile_re(const char *pat, bool literal, const char *file, const char *field,
                            pcre2_code **out, cz_err *err)
{
    char *p = literal ? cz_xstrdup(pat) : re_translate(pat);
    int code;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK |
                    (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, strlen(p), opts, &code, &at, NULL);
    free(p);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return bad(err, file, field, "cannot compile the %s (at offset %zu: %s)",
                   literal ? "pattern" : "regex", (size_t)at, (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter runs it otherwise */
    *out = re;
    return CZ_OK;
}

static cz_status parse_bytelevel(cz_tokenizer *t, const cJSON *o, const char *file,
                                 const char *where, cz_err *err)
{
    bool use_regex = true;
    cz_status st;
    /* serde defaults of tokenizers' ByteLevel: add_prefix_space and use_regex true */
    if ((st = get_bool(o, file, where, "add_prefix_space", true, &t->bl_prefix_space, err)) ||
        (st = get_bool(o, file, where, "use_regex", true, &use_regex, err)))
        return st;
    if (use_regex) {
        char f[256];
        snprintf(f, sizeof f, "%s.use_regex", where);
        return compile_re(gpt2_regex, false, file, f, &t->bl_regex, err);
    }
    return CZ_OK;
}

static cz_status parse_split(cz_tokenizer *t, const cJSON *o, const char *file, const char *where,
                             cz_err *err)
{
    char f[256];
    const char *behavior = NULL;
    cz_status st = get_str(o, file, where, "behavior", &behavior, err);
    if (st)
        return st;
    if (strcmp(behavior, "Isolated") != 0) {
        snprintf(f, sizeof f, "%s.behavior", where);
        return bad(err, file, f, "expected \"Isolated\" (the only split behaviour supported), "
                   "got \"%.40s\"", behavior);
    }
    bool invert = false;
    if ((st = get_bool(o, file, where, "invert", false, &invert, err)))
        return st;
    if (invert) {
        snprintf(f, sizeof f, "%s.invert", where);
        return bad(err, file, f, "expected false (inverted splits are not supported)");
    }
    const cJSON *pat = opt(o, "pattern");
    snprintf(f, sizeof f, "%s.pattern", where);
    if (!cJSON_IsObject(pat))
        return bad(err, file, f, "expected an object {\"Regex\": ...} or {\"String\": ...}");
    const cJSON *re = opt(pat, "Regex"), *lit = opt(pat, "String");
    if ((re != NULL) == (lit != NULL) || !cJSON_IsString(re ? re : lit))
        return bad(err, file, f, "expected an object {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    snprintf(f, sizeof f, "%s.pattern.%s", where, re ? "Regex" : "String");
    if ((st = check_utf8((re ? re : lit)->valuestring, file, f, err)))
        return st;
    t->splits = cz_xrealloc(t->splits, t->n_splits + 1, sizeof *t->splits);
    t->splits[t->n_splits] = NULL;
    if ((st = compile_re((re ? re : lit)->valuestring, lit != NULL, file, f,
                         &t->splits[t->n_splits], err)))
        return st;
    t->n_splits++;
    return CZ_OK;
}

static cz_status parse_pre_tokenizer(cz_tokenizer *t, const cJSON *pre, const char *file,
                                     cz_err *err)
{
    if (!pre)
        return bad(err, file, "pre_tokenizer",
                   "missing (expected a ByteLevel pre-tokenizer: the vocabulary is byte-level)");
    const char *type = NULL;
    if (!cJSON_IsObject(pre))
        return bad(err, file, "pre_tokenizer", "expected an object");
    cz_status st = get_str(pre, file, "pre_tokenizer", "type", &type, err);
    if (st)
        return st;
    if (strcmp(type, "ByteLevel") == 0)
        return parse_bytelevel(t, pre, file, "pre_tokenizer", err);
    if (strcmp(type, "Sequence") != 0)
        return bad(err, file, "pre_tokenizer.type", "expected \"ByteLevel\" or \"Sequence\", got "
                   "\"%.40s\"", type);
    const cJSON *list = opt(pre, "pretokenizers");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return bad(err, file, "pre_tokenizer.pretokenizers", "expected a non-empty array");
    int n = cJSON_GetArraySize(list), i = 0;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        char where[64];
        snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", i);
        if (!cJSON_IsObject(e))
            return bad(err, file, where, "expected an object");
        if ((st = get_str(e, file, where, "type", &type, err)))
            return st;
        if (strcmp(type, "Split") == 0) {
            if ((st = parse_split(t, e, file, where, err)))
                return st;
        } else if (strcmp(type, "ByteLevel") == 0 && i == n - 1) {
            return parse_bytelevel(t, e, file, where, err);
        } else {
            char f[80];
            snprintf(f, sizeof f, "%s.type", where);
            return bad(err, file, f, "expected \"Split\" stages ending in one \"ByteLevel\", got "
                       "\"%.40s\"%s", type, strcmp(type, "ByteLevel") == 0 ? " before the end" : "");
        }
    }
    return bad(err, file, "pre_tokenizer.pretokenizers",
               "expected the last stage to be \"ByteLevel\" (the vocabulary is byte-level)");
}

/* model.vocab into the string map and the per-id table. */
static cz_status parse_vocab(cz_tokenizer *t, const cJSON *vocab, const char *file, cz_err *err)
{
    if (!cJSON_IsObject(vocab))
        return bad(err, file, "model.vocab", "expected an object mapping tokens to ids");
    size_t n = 0;
    int32_t max_id = -1;
    char f[96];
    for (const cJSON *e = vocab->child; e; e = e->next, n++) {
        int32_t id = 0;
        snprintf(f, sizeof f, "model.vocab.%.40s", e->string);
        cz_status st = get_id(e, file, f, &id, err);
        if (st)
            return st;
        if ((st = check_utf8(e->string, file, f, err)))
            return st;
        if (e->string[0] == '\0')
            return bad(err, file, "model.vocab", "expected non-empty tokens, got \"\" (id %d)", id);
        if (id > max_id)
            max_id = id;
    }
    t->vocab_mask = pow2_at_least(2 * n + 2) - 1;
    t->vocab = cz_xmalloc((t->vocab_mask + 1) * sizeof *t->vocab);
    for (size_t i = 0; i <= t->vocab_mask; i++)
        t->vocab[i].id = -1;
    t->n_ids = (uint32_t)(max_id + 1);
    t->n_info = t->n_ids;
    t->ids = cz_xcalloc(t->n_info ? t->n_info : 1, sizeof *t->ids);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = (int32_t)e->valuedouble, old;
        size_t len = strlen(e->string);
        if (!vocab_put(t, e->string, len, id, &old))
            return bad(err, file, "model.vocab", "token \"%.40s\" appears twice (expected each "
                       "token once)", e->string);
        if (t->ids[id].flags & TOK_PRESENT) {
            const char *other = "";
            for (const cJSON *o = vocab->child; o != e; o = o->next)
                if ((int32_t)o->valuedouble == id)
                    other = o->string;
            return bad(err, file, "model.vocab", "id %d is given to both \"%.40s\" and \"%.40s\" "
                       "(expected one token per id)", id, other, e->string);
        }
        token_bytes(t, e->string, len, &t->ids[id].off, &t->ids[id].len);
        t->ids[id].flags = TOK_PRESENT;
    }
    return CZ_OK;
}

/* model.merges in either format: "a b" strings or ["a", "b"] pairs. */
static cz_status parse_merges(cz_tokenizer *t, const cJSON *merges, const char *file,
                              cz_err *err)
{
    if (!cJSON_IsArray(merges))
        return bad(err, file, "model.merges", "expected an array of \"a b\" strings or "
                   "[\"a\", \"b\"] pairs");
    size_t n = (size_t)cJSON_GetArraySize(merges);
    t->merges_mask = pow2_at_least(2 * n + 2) - 1;
    t->merges = cz_xmalloc((t->merges_mask + 1) * sizeof *t->merges);
    for (size_t i = 0; i <= t->merges_mask; i++)
        t->merges[i].key = UINT64_MAX;
    bool pairs = merges->child && cJSON_IsArray(merges->child);
    char *cat = NULL;
    size_t cat_cap = 0;
    cz_status st = CZ_OK;
    uint32_t rank = 0;
    for (const cJSON *e = merges->child; e; e = e->next, rank++) {
        char f[64];
        snprintf(f, sizeof f, "model.merges[%u]", rank);
        const char *a, *b;
        size_t la, lb;
        if (pairs) {
            const cJSON *x = cJSON_IsArray(e) ? e->child : NULL;
            const cJSON *y = x ? x->next : NULL;
            if (!cJSON_IsString(x) || !cJSON_IsString(y) || y->next) {
                st = bad(err, file, f, "expected a pair [\"a\", \"b\"] like the first entry");
                break;
            }
            a = x->valuestring;
            b = y->valuestring;
            la = strlen(a);
            lb = strlen(b);
        } else {
            if (!cJSON_IsString(e)) {
                st = bad(err, file, f, "expected a string \"a b\" like the first entry");
                break;
            }
            const char *s = e->valuestring, *sp = strchr(s, ' ');
            if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' ')) {
                st = bad(err, file, f, "expected two tokens separated by one space, got \"%.60s\"",
                         s);
                break;
            }
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = strlen(b);
        }
        int32_t ia = vocab_get(t, a, la), ib = vocab_get(t, b, lb);
        if (ia < 0 || ib < 0) {
            st = bad(err, file, f, "token \"%.*s\" is not in model.vocab", (int)(ia < 0 ? la : lb),
                     ia < 0 ? a : b);
            break;
        }
        cz_grow((void **)&cat, &cat_cap, la + lb + 1, 1);
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t id = vocab_get(t, cat, la + lb);
        if (id < 0) {
            st = bad(err, file, f, "the merged token \"%.*s\" is not in model.vocab",
                     (int)(la + lb), cat);
            break;
        }
        merge_put(t, ia, ib, rank, id);
    }
    free(cat);
    return st;
}

static cz_status parse_model(cz_tokenizer *t, const cJSON *m, const char *file, cz_err *err)
{
    if (!cJSON_IsObject(m))
        return bad(err, file, "model", "missing or not an object (expected a BPE model)");
    const char *type = NULL;
    cz_status st = get_str(m, file, "model", "type", &type, err);
    if (st)
        return st;
    if (strcmp(type, "BPE") != 0)
        return bad(err, file, "model.type", "expected \"BPE\", got \"%.40s\"", type);
    if ((st = parse_vocab(t, opt(m, "vocab"), file, err)) ||
        (st = parse_merges(t, opt(m, "merges"), file, err)))
        return st;
    const cJSON *drop = opt(m, "dropout");
    if (drop && (!cJSON_IsNumber(drop) || drop->valuedouble != 0.0))
        return bad(err, file, "model.dropout", "expected null (BPE dropout is not supported)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < CZ_ARRAY_LEN(affixes); i++) {
        const cJSON *a = opt(m, affixes[i]);
        if (a && (!cJSON_IsString(a) || a->valuestring[0])) {
            char f[64];
            snprintf(f, sizeof f, "model.%s", affixes[i]);
            return bad(err, file, f, "expected null or \"\" (not used by byte-level BPE)");
        }
    }
    bool byte_fallback = false;
    if ((st = get_bool(m, file, "model", "byte_fallback", false, &byte_fallback, err)) ||
        (st = get_bool(m, file, "model", "fuse_unk", false, &t->fuse_unk, err)) ||
        (st = get_bool(m, file, "model", "ignore_merges", false, &t->ignore_merges, err)))
        return st;
    if (byte_fallback)
        return bad(err, file, "model.byte_fallback",
                   "expected false (<0xNN> byte tokens are not supported)");
    t->unk_id = -1;
    const cJSON *unk = opt(m, "unk_token");
    if (unk) {
        if (!cJSON_IsString(unk))
            return bad(err, file, "model.unk_token", "expected a string or null");
        t->unk_id = vocab_get(t, unk->valuestring, strlen(unk->valuestring));
        if (t->unk_id < 0)
            return bad(err, file, "model.unk_token", "\"%.40s\" is not in model.vocab",
                       unk->valuestring);
    }
    return CZ_OK;
}

/* An added token as a sort key: its content (valid while the arena does not grow), its id
 * and its index in added_tokens. */
typedef struct added_key {
    const char *s;
    uint32_t len, idx;
    int32_t id;
} added_key;

static int cmp_idx(const added_key *a, const added_key *b)
{
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_key_id(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    return a->id != b->id ? (a->id < b->id ? -1 : 1) : cmp_idx(a, b);
}

static int cmp_key_content(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    if (c || a->len != b->len)
        return c ? c : a->len < b->len ? -1 : 1;
    return cmp_idx(a, b);
}

/* The matching order of one pass: by first byte, then longest first. */
static int cmp_key_pass(const void *pa, const void *pb)
{
    const added_key *a = pa, *b = pb;
    unsigned char fa = (unsigned char)a->s[0], fb = (unsigned char)b->s[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return cmp_idx(a, b);
}

static added_key *added_keys(const cz_tokenizer *t)
{
    added_key *k = cz_xmalloc((t->n_added ? t->n_added : 1) * sizeof *k);
    for (size_t i = 0; i < t->n_added; i++)
        k[i] = (added_key){t->arena + t->added[i].off, t->added[i].len, (uint32_t)i,
                           t->added[i].id};
    return k;
}

/* The first added token (in file order) whose id (by_id) or content repeats an earlier one:
 * CZ_EFORMAT naming both, or CZ_OK. Sorting keeps this O(n log n) for long lists. */
static cz_status added_repeats(const cz_tokenizer *t, bool by_id, const char *file, cz_err *err)
{
    added_key *k = added_keys(t);
    qsort(k, t->n_added, sizeof *k, by_id ? cmp_key_id : cmp_key_content);
    size_t later = SIZE_MAX, earlier = 0;
    for (size_t i = 1; i < t->n_added; i++) {
        bool same = by_id ? k[i].id == k[i - 1].id
                          : k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0;
        if (same && k[i].idx < later) {
            later = k[i].idx;
            earlier = k[i - 1].idx;
        }
    }
    free(k);
    if (later == SIZE_MAX)
        return CZ_OK;
    const tok_added *a = &t->added[later];
    char where[48];
    snprintf(where, sizeof where, "added_tokens[%zu]", later);
    return bad(err, file, where, "token \"%.*s\" (id %d) repeats the %s of added_tokens[%zu]",
               (int)(a->len < 40 ? a->len : 40), t->arena + a->off, a->id,
               by_id ? "id" : "content", earlier);
}

static cz_status parse_added(cz_tokenizer *t, const cJSON *list, const char *file, cz_err *err)
{
    if (!list)
        return CZ_OK;
    if (!cJSON_IsArray(list))
        return bad(err, file, "added_tokens", "expected an array");
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    t->added = cz_xcalloc(n ? n : 1, sizeof *t->added);
    int32_t max_id = (int32_t)t->n_ids - 1;
    for (const cJSON *e = list->child; e; e = e->next, i++) {
        char where[48], f[80];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!cJSON_IsObject(e))
            return bad(err, file, where, "expected an object");
        const char *content = NULL;
        int32_t id = 0;
        bool special = false, normalized = false, flag = false;
        cz_status st = get_str(e, file, where, "content", &content, err);
        if (st)
            return st;
        snprintf(f, sizeof f, "%s.id", where);
        if (!opt(e, "id"))
            return bad(err, file, f, "missing (expected a token id)");
        if ((st = get_id(opt(e, "id"), file, f, &id, err)))
            return st;
        snprintf(f, sizeof f, "%s.content", where);
        if ((st = check_utf8(content, file, f, err)))
            return st;
        if (!content[0])
            return bad(err, file, f, "expected a non-empty string");
        if ((st = get_bool(e, file, where, "special", false, &special, err)) ||
            (st = get_bool(e, file, where, "normalized", !special, &normalized, err)))
            return st;
        static const char *const unsupported[] = {"single_word", "lstrip", "rstrip"};
        for (size_t k = 0; k < CZ_ARRAY_LEN(unsupported); k++) {
            if ((st = get_bool(e, file, where, unsupported[k], false, &flag, err)))
                return st;
            if (flag) {
                snprintf(f, sizeof f, "%s.%s", where, unsupported[k]);
                return bad(err, file, f, "expected false (not supported)");
            }
        }
        size_t len = strlen(content);
        int32_t vid = vocab_get(t, content, len);
        if (vid >= 0 && vid != id) {
            snprintf(f, sizeof f, "%s.id", where);
            return bad(err, file, f, "expected %d, the id of \"%.40s\" in model.vocab, got %d",
                       vid, content, id);
        }
        if (vid < 0 && id < (int32_t)t->n_info && (t->ids[id].flags & TOK_PRESENT)) {
            snprintf(f, sizeof f, "%s.id", where);
            return bad(err, file, f, "id %d of \"%.40s\" is another token's in model.vocab", id,
                       content);
        }
        tok_added *a = &t->added[t->n_added++];
        a->off = arena_add(t, content, len);
        a->len = (uint32_t)len;
        a->id = id;
        a->special = special;
        a->normalized = normalized;
        if (id > max_id)
            max_id = id;
    }
    cz_status st;
    if ((st = added_repeats(t, true, file, err)) || (st = added_repeats(t, false, file, err)))
        return st;
    /* grow the per-id table to the added ids, then fill their entries */
    if ((uint32_t)(max_id + 1) > t->n_info) {
        t->ids = cz_xrealloc(t->ids, (size_t)max_id + 1, sizeof *t->ids);
        memset(t->ids + t->n_info, 0, ((size_t)max_id + 1 - t->n_info) * sizeof *t->ids);
        t->n_info = t->n_ids = (uint32_t)(max_id + 1);
    }
    for (size_t k = 0; k < t->n_added; k++) {
        tok_added *a = &t->added[k];
        tok_id *d = &t->ids[a->id];
        char *copy = cz_xmalloc(a->len);
        memcpy(copy, t->arena + a->off, a->len); /* token_bytes grows the arena */
        token_bytes(t, copy, a->len, &d->off, &d->len);
        free(copy);
        d->flags = TOK_PRESENT | (a->special ? TOK_SPECIAL : 0);
    }
    for (int p = 0; p < 2; p++) { /* the arena is complete: the keys' pointers hold */
        added_key *keys = added_keys(t);
        size_t m = 0;
        for (size_t k = 0; k < t->n_added; k++)
            if (t->added[k].normalized == (p == 1))
                keys[m++] = keys[k];
        qsort(keys, m, sizeof *keys, cmp_key_pass);
        uint32_t *idx = cz_xmalloc((m ? m : 1) * sizeof *idx);
        for (size_t k = 0; k < m; k++)
            idx[k] = keys[k].idx;
        free(keys);
        size_t j = 0;
        for (int b = 0; b <= 256; b++) {
            while (j < m && (unsigned char)t->arena[t->added[idx[j]].off] < b)
                j++;
            t->pass_first[p][b] = (uint32_t)j;
        }
        t->pass_first[p][256] = (uint32_t)m;
        t->pass_order[p] = idx;
    }
    return CZ_OK;
}

/* The id of an added token or vocabulary entry spelled s, or -1. */
static int32_t token_lookup(const cz_tokenizer *t, const char *s)
{
    size_t n = strlen(s);
    for (size_t k = 0; k < t->n_added; k++)
        if (t->added[k].len == n && memcmp(t->arena + t->added[k].off, s, n) == 0)
            return t->added[k].id;
    return vocab_get(t, s, n);
}

static cz_status parse_decoder(const cJSON *d, const char *file, cz_err *err)
{
    const char *type = NULL;
    if (!cJSON_IsObject(d))
        return bad(err, file, "decoder", "expected a ByteLevel decoder");
    cz_status st = get_str(d, file, "decoder", "type", &type, err);
    if (st)
        return st;
    if (strcmp(type, "ByteLevel") != 0)
        return bad(err, file, "decoder.type", "expected \"ByteLevel\", got \"%.40s\"", type);
    return CZ_OK;
}

/* The special token a TemplateProcessing post-processor starts a single sequence with (the
 * BOS it adds), sought in `p` and, for a Sequence, its processors. *bos stays -1 when none. */
static cz_status parse_post(cz_tokenizer *t, const cJSON *p, const char *file, const char *where,
                            int32_t *bos, cz_err *err)
{
    if (!p)
        return CZ_OK;
    if (!cJSON_IsObject(p))
        return bad(err, file, where, "expected an object or null");
    const char *type = NULL;
    cz_status st = get_str(p, file, where, "type", &type, err);
    if (st)
        return st;
    char f[96];
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = opt(p, "processors");
        snprintf(f, sizeof f, "%s.processors", where);
        if (!cJSON_IsArray(list))
            return bad(err, file, f, "expected an array");
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            snprintf(f, sizeof f, "%s.processors[%d]", where, i);
            if ((st = parse_post(t, e, file, f, bos, err)))
                return st;
        }
        return CZ_OK;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return CZ_OK;
    const cJSON *single = opt(p, "single");
    snprintf(f, sizeof f, "%s.single", where);
    if (!cJSON_IsArray(single))
        return bad(err, file, f, "expected an array");
    const cJSON *first = single->child;
    const cJSON *sp = first ? opt(first, "SpecialToken") : NULL;
    if (!sp)
        return CZ_OK;
    const cJSON *name = opt(sp, "id");
    snprintf(f, sizeof f, "%s.single[0].SpecialToken.id", where);
    if (!cJSON_IsString(name))
        return bad(err, file, f, "expected a string");
    int32_t id = token_lookup(t, name->valuestring);
    const cJSON *sts = opt(p, "special_tokens");
    const cJSON *ent = sts ? opt(sts, name->valuestring) : NULL;
    const cJSON *ids = ent ? opt(ent, "ids") : NULL;
    if (ids && cJSON_IsArray(ids) && ids->child) {
        snprintf(f, sizeof f, "%s.special_tokens.%.40s.ids[0]", where, name->valuestring);
        if ((st = get_id(ids->child, file, f, &id, err)))
            return st;
    }
    if (id < 0 || (uint32_t)id >= t->n_ids)
        return bad(err, file, f, "token \"%.40s\" is not in the vocabulary", name->valuestring);
    *bos = id;
    return CZ_OK;
}

/* tokenizer.json's parts, into t. */
static cz_status parse_tokenizer(cz_tokenizer *t, const cJSON *j, const char *file, cz_err *err)
{
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EFORMAT, "%s: expected a JSON object (a tokenizers file)",
                          file);
    cz_status st;
    if ((st = parse_model(t, opt(j, "model"), file, err)) ||
        (st = parse_added(t, opt(j, "added_tokens"), file, err)))
        return st;
    const cJSON *norm = opt(j, "normalizer");
    if (norm) {
        const cJSON *type = cJSON_IsObject(norm) ? opt(norm, "type") : NULL;
        return bad(err, file, "normalizer", "expected null (normalizers are not supported), got %s%s%s",
                   cJSON_IsString(type) ? "a \"" : "a value", cJSON_IsString(type) ?
                   type->valuestring : "", cJSON_IsString(type) ? "\" normalizer" : "");
    }
    if ((st = parse_pre_tokenizer(t, opt(j, "pre_tokenizer"), file, err)) ||
        (st = parse_decoder(opt(j, "decoder"), file, err)))
        return st;
    int32_t bos = -1;
    if ((st = parse_post(t, opt(j, "post_processor"), file, "post_processor", &bos, err)))
        return st;
    t->bos = bos;
    t->add_bos = bos >= 0;
    for (int b = 0; b < 256; b++) {
        char ch[4];
        size_t l = utf8_put(ch, t->byte_cp[b]);
        t->byte_id[b] = vocab_get(t, ch, l);
    }
    return CZ_OK;
}

/* A token of tokenizer_config.json (`key`: a string, an AddedToken object with "content", or
 * null): its id into *id (-1 when null or absent). */
static cz_status config_token(const cz_tokenizer *t, const cJSON *cfg, const char *file,
                              const char *key, int32_t *id, cz_err *err)
{
    const cJSON *v = opt(cfg, key);
    if (!v)
        return CZ_OK;
    const char *s = NULL;
    if (cJSON_IsString(v))
        s = v->valuestring;
    else if (cJSON_IsObject(v) && cJSON_IsString(opt(v, "content")))
        s = opt(v, "content")->valuestring;
    if (!s)
        return bad(err, file, key, "expected a token string, an object with \"content\", or null");
    *id = token_lookup(t, s);
    if (*id < 0)
        return bad(err, file, key, "token \"%.40s\" is not in tokenizer.json", s);
    return CZ_OK;
}

static cz_status parse_config(cz_tokenizer *t, const cJSON *cfg, const char *file, cz_err *err)
{
    if (!cJSON_IsObject(cfg))
        return cz_err_set(err, CZ_EFORMAT, "%s: expected a JSON object", file);
    int32_t bos = t->bos, eos = -1;
    bool has_bos_key = cJSON_GetObjectItemCaseSensitive(cfg, "bos_token") != NULL;
    cz_status st;
    if ((st = config_token(t, cfg, file, "eos_token", &eos, err)))
        return st;
    if (has_bos_key) {
        bos = -1;
        if ((st = config_token(t, cfg, file, "bos_token", &bos, err)))
            return st;
    }
    t->eos = eos;
    t->bos = bos;
    const cJSON *add = opt(cfg, "add_bos_token");
    if (add) {
        if (!cJSON_IsBool(add))
            return bad(err, file, "add_bos_token", "expected true or false");
        t->add_bos = cJSON_IsTrue(add);
    }
    if (t->bos < 0)
        t->add_bos = false;
    const cJSON *tpl = opt(cfg, "chat_template");
    if (tpl) {
        const char *text = NULL;
        if (cJSON_IsString(tpl)) {
            text = tpl->valuestring;
        } else if (cJSON_IsArray(tpl)) { /* [{"name": ..., "template": ...}]: the default */
            int i = 0;
            for (const cJSON *e = tpl->child; e; e = e->next, i++) {
                const cJSON *name = cJSON_IsObject(e) ? opt(e, "name") : NULL;
                const cJSON *body = cJSON_IsObject(e) ? opt(e, "template") : NULL;
                if (!cJSON_IsString(name) || !cJSON_IsString(body)) {
                    char f[48];
                    snprintf(f, sizeof f, "chat_template[%d]", i);
                    return bad(err, file, f, "expected {\"name\": \"...\", \"template\": \"...\"}");
                }
                if (strcmp(name->valuestring, "default") == 0)
                    text = body->valuestring;
            }
        } else {
            return bad(err, file, "chat_template", "expected a string or a list of named templates");
        }
        if (text)
            t->chat_text = cz_xstrdup(text);
    }
    return CZ_OK;
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 || errno != ENOENT;
}

static cz_chat_template detect_chat(const cz_tokenizer *t)
{
    const char *s = t->chat_text;
    if (s) {
        if (strstr(s, "<|start_header_id|>"))
            return strstr(s, "Cutting Knowledge Date") ? CZ_CHAT_LLAMA31 : CZ_CHAT_LLAMA3;
        if (strstr(s, "<|im_start|>")) {
            if (strstr(s, "You are Qwen, created by Alibaba Cloud"))
                return CZ_CHAT_CHATML;
            if (strstr(s, "<think>"))
                return CZ_CHAT_QWEN3;
            if (strstr(s, "You are a helpful assistant."))
                return CZ_CHAT_QWEN2;
            return CZ_CHAT_CHATML;
        }
    }
    if (token_lookup(t, "<|start_header_id|>") >= 0)
        return CZ_CHAT_LLAMA3;
    if (token_lookup(t, "<|im_start|>") >= 0)
        return CZ_CHAT_CHATML;
    return CZ_CHAT_PLAIN;
}

static void tok_init(cz_tokenizer *t)
{
    t->bos = t->eos = t->unk_id = -1;
    byte_tables(t);
}

cz_status cz_tokenizer_load(const char *dir, cz_tokenizer **out, cz_err *err)
{
    size_t dl = strlen(dir);
    char *path = cz_xmalloc(dl + 32), *text = NULL;
    cJSON *j = NULL, *cfg = NULL;
    cz_tokenizer *t = NULL;
    size_t len = 0;
    snprintf(path, dl + 32, "%s/tokenizer.json", dir);
    cz_status st = cz_file_read_all(path, &text, &len, err);
    if (st != CZ_OK)
        goto fail;
    if (len > CZ_TOK_FILE_MAX) {
        st = cz_err_set(err, CZ_EFORMAT, "%s: %zu bytes, expected at most %zu", path, len,
                        CZ_TOK_FILE_MAX);
        goto fail;
    }
    const char *end = NULL;
    j = cJSON_ParseWithOpts(text, &end, 1);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        if (!at || at < text || at > text + len)
            at = end ? end : text;
        size_t line = 1, col = 1;
        for (const char *p = text; p < at; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        st = cz_err_set(err, CZ_EFORMAT, "%s:%zu:%zu: not valid JSON", path, line, col);
        goto fail;
    }
    free(text);
    text = NULL;
    t = cz_xcalloc(1, sizeof *t);
    tok_init(t);
    if ((st = parse_tokenizer(t, j, path, err)) != CZ_OK)
        goto fail;
    cJSON_Delete(j);
    j = NULL;

    snprintf(path, dl + 32, "%s/tokenizer_config.json", dir);
    if (file_exists(path)) {
        if ((st = cz_json_load(path, &cfg, err)) != CZ_OK ||
            (st = parse_config(t, cfg, path, err)) != CZ_OK)
            goto fail;
    }
    snprintf(path, dl + 32, "%s/chat_template.jinja", dir);
    if (!t->chat_text && file_exists(path)) {
        if ((st = cz_file_read_all(path, &t->chat_text, NULL, err)) != CZ_OK)
            goto fail;
    }
    t->chat = detect_chat(t);
    snprintf(t->describe, sizeof t->describe, "tokenizer.json (byte-level BPE, %u tokens)",
             t->n_ids);
    cJSON_Delete(cfg);
    free(path);
    *out = t;
    return CZ_OK;
fail:
    free(text);
    cJSON_Delete(j);
    cJSON_Delete(cfg);
    free(path);
    cz_tokenizer_free(t);
    return st;
}

cz_tokenizer *cz_tokenizer_bytes(uint32_t vocab)
{
    if (vocab < 256)
        return NULL;
    cz_tokenizer *t = cz_xcalloc(1, sizeof *t);
    tok_init(t);
    t->fallback = true;
    t->n_ids = vocab;
    t->n_info = 256;
    t->ids = cz_xcalloc(256, sizeof *t->ids);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->ids[b].off = arena_add(t, &c, 1);
        t->ids[b].len = 1;
        t->ids[b].flags = TOK_PRESENT;
    }
    t->max_token_bytes = 1;
    t->chat = CZ_CHAT_PLAIN;
    snprintf(t->describe, sizeof t->describe, "byte-level fallback (no tokenizer.json)");
    return t;
}

void cz_tokenizer_free(cz_tokenizer *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_splits; i++)
        pcre2_code_free(t->splits[i]);
    free(t->splits);
    pcre2_code_free(t->bl_regex);
    free(t->arena);
    free(t->ids);
    free(t->vocab);
    free(t->merges);
    free(t->added);
    free(t->pass_order[0]);
    free(t->pass_order[1]);
    free(t->chat_text);
    free(t);
}

int32_t cz_tokenizer_eos(const cz_tokenizer *t) { return t->eos; }
int32_t cz_tokenizer_bos(const cz_tokenizer *t) { return t->bos; }
bool cz_tokenizer_add_bos(const cz_tokenizer *t) { return t->add_bos && t->bos >= 0; }
uint32_t cz_tokenizer_vocab(const cz_tokenizer *t) { return t->n_ids; }
const char *cz_tokenizer_describe(const cz_tokenizer *t) { return t->describe; }
cz_chat_template cz_tokenizer_chat(const cz_tokenizer *t) { return t->chat; }

int32_t cz_tokenizer_token_id(const cz_tokenizer *t, const char *token)
{
    if (t->fallback) {
        size_t n = strlen(token);
        return n == 1 ? (unsigned char)token[0] : -1;
    }
    return token_lookup(t, token);
}

bool cz_tokenizer_is_special(const cz_tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_info && (t->ids[id].flags & TOK_SPECIAL);
}

/* ---- encoding ---- */

/* A BPE symbol: a token id over len bytes, linked to its neighbours (-1: none); len 0 once
 * merged into its left neighbour. */
typedef struct enc_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
} enc_sym;

/* A queued merge of the pair starting at symbol pos. */
typedef struct enc_merge {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} enc_merge;

/* One encode call's working memory (freed when it returns). */
typedef struct enc_ctx {
    const cz_tokenizer *t;
    cz_tok_ids *out;
    cz_err *err;
    pcre2_match_data *md;
    char *map;               /* a pre-token in its byte-level spelling */
    size_t map_cap;
    char *pre;               /* a piece with its prefix space */
    size_t pre_cap;
    enc_sym *sym;
    size_t sym_cap;
    enc_merge *heap;
    size_t heap_n, heap_cap;
} enc_ctx;

static bool merge_less(const enc_merge *a, const enc_merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(enc_ctx *c, enc_merge m)
{
    cz_grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap);
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!merge_less(&m, &c->heap[p]))
            break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = m;
}

static enc_merge heap_pop(enc_ctx *c)
{
    enc_merge top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const enc_merge *best = &last;
        if (l < n && merge_less(&c->heap[l], best)) {
            m = l;
            best = &c->heap[l];
        }
        if (r < n && merge_less(&c->heap[r], best))
            m = r;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n)
        c->heap[i] = last;
    return top;
}

static void push_pair(enc_ctx *c, int32_t pos)
{
    const enc_sym *s = &c->sym[pos];
    if (s->next < 0)
        return;
    const tok_mslot *m = merge_get(c->t, s->id, c->sym[s->next].id);
    if (m)
        heap_push(c, (enc_merge){m->rank, (uint32_t)pos, m->new_id});
}

/* BPE on one pre-token s[0..n) (its raw bytes); appends the ids. */
static void bpe_word(enc_ctx *c, const char *s, size_t n)
{
    const cz_tokenizer *t = c->t;
    if (t->ignore_merges) { /* a whole pre-token in the vocabulary is one token */
        cz_grow((void **)&c->map, &c->map_cap, 2 * n, 1);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += utf8_put(c->map + m, t->byte_cp[(unsigned char)s[i]]);
        int32_t id = vocab_get(t, c->map, m);
        if (id >= 0) {
            ids_push(c->out, id);
            return;
        }
    }
    cz_grow((void **)&c->sym, &c->sym_cap, n, sizeof *c->sym);
    int32_t ns = 0;
    bool prev_unk = false;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(unsigned char)s[i]];
        if (id < 0) { /* a byte whose character the vocabulary lacks */
            if (t->unk_id < 0)
                continue;
            if (t->fuse_unk && prev_unk) {
                c->sym[ns - 1].len++;
                continue;
            }
            id = t->unk_id;
            prev_unk = true;
        } else {
            prev_unk = false;
        }
        c->sym[ns] = (enc_sym){id, ns - 1, -1, 1};
        if (ns > 0)
            c->sym[ns - 1].next = ns;
        ns++;
    }
    if (ns == 0)
        return;
    c->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        push_pair(c, i);
    while (c->heap_n) {
        enc_merge top = heap_pop(c);
        enc_sym *a = &c->sym[top.pos];
        if (a->len == 0 || a->next < 0)
            continue;
        enc_sym *b = &c->sym[a->next];
        const tok_mslot *m = merge_get(t, a->id, b->id);
        if (!m || m->new_id != top.new_id) /* a stale entry */
            continue;
        a->id = top.new_id;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0)
            c->sym[a->next].prev = (int32_t)top.pos;
        if (a->prev >= 0)
            push_pair(c, a->prev);
        push_pair(c, (int32_t)top.pos);
    }
    for (int32_t i = 0; i >= 0; i = c->sym[i].next)
        ids_push(c->out, c->sym[i].id);
}

/* Runs regex `re` over s[0..n) from byte `pos`: CZ_OK with *ms, *me the match, CZ_OK with
 * *ms = SIZE_MAX when none, or CZ_ERANGE naming the text offset (off + pos). */
static cz_status re_next(enc_ctx *c, const pcre2_code *re, const char *s, size_t n, size_t pos,
                         size_t off, size_t *ms, size_t *me)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md,
                         NULL);
    if (rc == PCRE2_ERROR_NOMATCH) {
        *ms = SIZE_MAX;
        return CZ_OK;
    }
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return cz_err_set(c->err, CZ_ERANGE,
                          "text: the pre-tokenizer regex failed at byte offset %zu (%s)",
                          off + pos, (const char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    *ms = ov[0];
    *me = ov[1] < ov[0] ? ov[0] : ov[1];
    if (*ms < pos || *me > n) /* \K can move a match outside the subject: take none */
        *ms = SIZE_MAX;
    return CZ_OK;
}

static cz_status pre_stage(enc_ctx *c, size_t stage, const char *s, size_t n, size_t off);

/* Splits s[0..n) by `re` with behaviour Isolated (each match and each stretch between
 * matches is a piece; an empty match splits there) and passes each piece on to `stage`,
 * or to BPE when stage is SIZE_MAX. */
static cz_status split_isolated(enc_ctx *c, const pcre2_code *re, size_t stage, const char *s,
                                size_t n, size_t off)
{
    size_t prev = 0, pos = 0;
    cz_status st;
    while (pos < n) {
        size_t ms, me;
        if ((st = re_next(c, re, s, n, pos, off, &ms, &me)))
            return st;
        if (ms == SIZE_MAX)
            break;
        if (ms > prev && (st = pre_stage(c, stage, s + prev, ms - prev, off + prev)))
            return st;
        if (me > ms && (st = pre_stage(c, stage, s + ms, me - ms, off + ms)))
            return st;
        prev = me;
        if (me > ms) {
            pos = me;
        } else { /* an empty match: search on from the next character */
            uint32_t cp;
            size_t l = me < n ? utf8_char((const unsigned char *)s + me, n - me, &cp) : 1;
            pos = me + (l ? l : 1);
        }
    }
    if (prev < n)
        return pre_stage(c, stage, s + prev, n - prev, off + prev);
    return CZ_OK;
}

/* Stage `stage` of the pre-tokenizer on piece s[0..n) at text offset `off`: Split stages
 * 0..n_splits-1, then ByteLevel (prefix space, GPT-2 regex), then BPE (stage SIZE_MAX). */
static cz_status pre_stage(enc_ctx *c, size_t stage, const char *s, size_t n, size_t off)
{
    const cz_tokenizer *t = c->t;
    if (stage == SIZE_MAX) {
        bpe_word(c, s, n);
        return CZ_OK;
    }
    if (stage < t->n_splits)
        return split_isolated(c, t->splits[stage], stage + 1, s, n, off);
    if (t->bl_prefix_space && s[0] != ' ') {
        cz_grow((void **)&c->pre, &c->pre_cap, n + 1, 1);
        c->pre[0] = ' ';
        memcpy(c->pre + 1, s, n);
        s = c->pre;
        n++;
    }
    if (t->bl_regex)
        return split_isolated(c, t->bl_regex, SIZE_MAX, s, n, off);
    bpe_word(c, s, n);
    return CZ_OK;
}

/* Added tokens of pass `pass` split out of s[0..n); the stretches between them go to the
 * next pass, then to the pre-tokenizer. */
static cz_status added_pass(enc_ctx *c, int pass, const char *s, size_t n, size_t off)
{
    const cz_tokenizer *t = c->t;
    if (pass == 2)
        return pre_stage(c, 0, s, n, off);
    size_t prev = 0;
    cz_status st;
    for (size_t i = 0; i < n;) {
        unsigned char b = (unsigned char)s[i];
        const tok_added *hit = NULL;
        for (uint32_t k = t->pass_first[pass][b]; k < t->pass_first[pass][b + 1]; k++) {
            const tok_added *a = &t->added[t->pass_order[pass][k]];
            if (a->len <= n - i && memcmp(t->arena + a->off, s + i, a->len) == 0) {
                hit = a; /* the longest, as they are ordered longest first */
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        if (i > prev && (st = added_pass(c, pass + 1, s + prev, i - prev, off + prev)))
            return st;
        ids_push(c->out, hit->id);
        i += hit->len;
        prev = i;
    }
    if (prev < n)
        return added_pass(c, pass + 1, s + prev, n - prev, off + prev);
    return CZ_OK;
}

cz_status cz_tokenizer_encode(const cz_tokenizer *t, const char *text, size_t len,
                              cz_tok_ids *out, cz_err *err)
{
    size_t bad_at = utf8_check(text, len);
    if (bad_at < len)
        return cz_err_set(err, CZ_EINVAL, "text: invalid UTF-8 at byte offset %zu (byte 0x%02X)",
                          bad_at, (unsigned char)text[bad_at]);
    if (t->fallback) {
        for (size_t i = 0; i < len; i++)
            ids_push(out, (unsigned char)text[i]);
        return CZ_OK;
    }
    if (len == 0)
        return CZ_OK;
    enc_ctx c = {.t = t, .out = out, .err = err};
    c.md = pcre2_match_data_create(1, NULL);
    if (!c.md)
        return cz_err_set(err, CZ_ENOMEM, "text: cannot allocate PCRE2 match data");
    cz_status st = added_pass(&c, 0, text, len, 0);
    pcre2_match_data_free(c.md);
    free(c.map);
    free(c.pre);
    free(c.sym);
    free(c.heap);
    return st;
}

/* ---- decoding ---- */

void cz_detok_init(cz_detok *d, bool skip_special)
{
    memset(d, 0, sizeof *d);
    d->keep_special = !skip_special;
}

size_t cz_tokenizer_decode_max(const cz_tokenizer *t)
{
    return 3 * (t->max_token_bytes + 3) + 1;
}

static const char replacement[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

/* The length a UTF-8 sequence starting with `lead` has (0: `lead` cannot start one). */
static size_t utf8_need(unsigned char lead)
{
    return lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
           : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
}

/* Feeds one byte to the stream: completed characters and U+FFFD for each maximal invalid
 * subsequence (from_utf8_lossy's rule) go to out[*n...]. */
static void feed(cz_detok *d, unsigned char b, char *out, size_t *n)
{
    if (d->n_pend) {
        unsigned char lead = d->pend[0], lo = 0x80, hi = 0xBF;
        if (d->n_pend == 1) {
            if (lead == 0xE0)
                lo = 0xA0;
            else if (lead == 0xED)
                hi = 0x9F;
            else if (lead == 0xF0)
                lo = 0x90;
            else if (lead == 0xF4)
                hi = 0x8F;
        }
        if (b >= lo && b <= hi) {
            d->pend[d->n_pend++] = b;
            if (d->n_pend == utf8_need(lead)) {
                memcpy(out + *n, d->pend, d->n_pend);
                *n += d->n_pend;
                d->n_pend = 0;
            }
            return;
        }
        memcpy(out + *n, replacement, 3); /* the incomplete character ends here */
        *n += 3;
        d->n_pend = 0;
    }
    if (b < 0x80) {
        out[(*n)++] = (char)b;
    } else if (utf8_need(b)) {
        d->pend[0] = b;
        d->n_pend = 1;
    } else {
        memcpy(out + *n, replacement, 3);
        *n += 3;
    }
}

size_t cz_tokenizer_decode(const cz_tokenizer *t, cz_detok *d, int32_t id, char *out, size_t cap)
{
    CZ_ASSERT(cap >= cz_tokenizer_decode_max(t));
    size_t n = 0;
    if (id >= 0 && (uint32_t)id < t->n_info && (t->ids[id].flags & TOK_PRESENT) &&
        (d->keep_special || !(t->ids[id].flags & TOK_SPECIAL))) {
        const unsigned char *b = (const unsigned char *)t->arena + t->ids[id].off;
        for (uint32_t i = 0; i < t->ids[id].len; i++)
            feed(d, b[i], out, &n);
    }
    out[n] = '\0';
    return n;
}

size_t cz_tokenizer_decode_flush(const cz_tokenizer *t, cz_detok *d, char *out, size_t cap)
{
    CZ_ASSERT(cap >= cz_tokenizer_decode_max(t));
    size_t n = 0;
    if (d->n_pend) {
        memcpy(out, replacement, 3);
        n = 3;
        d->n_pend = 0;
    }
    out[n] = '\0';
    return n;
}

char *cz_tokenizer_decode_all(const cz_tokenizer *t, const int32_t *ids, size_t n,
                              bool skip_special)
{
    size_t step = cz_tokenizer_decode_max(t), len = 0, cap = 64;
    char *s = cz_xmalloc(cap);
    cz_detok d;
    cz_detok_init(&d, skip_special);
    for (size_t i = 0; i <= n; i++) {
        cz_grow((void **)&s, &cap, len + step, 1);
        len += i < n ? cz_tokenizer_decode(t, &d, ids[i], s + len, step)
                     : cz_tokenizer_decode_flush(t, &d, s + len, step);
    }
    s[len] = '\0';
    return s;
}

/* ---- chat templates ---- */

static const char *const chat_names[] = {"plain", "llama3", "llama31", "chatml", "qwen2",
                                         "qwen3"};

const char *cz_chat_template_name(cz_chat_template kind)
{
    return (unsigned)kind < CZ_ARRAY_LEN(chat_names) ? chat_names[kind] : "unknown";
}

cz_status cz_chat_template_parse(const char *name, cz_chat_template *out, cz_err *err)
{
    for (size_t i = 0; i < CZ_ARRAY_LEN(chat_names); i++) {
        if (strcmp(name, chat_names[i]) == 0) {
            *out = (cz_chat_template)i;
            return CZ_OK;
        }
    }
    return cz_err_set(err, CZ_EINVAL, "chat template '%.40s': expected plain, llama3, llama31, "
                      "chatml, qwen2 or qwen3", name);
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n)
{
    cz_grow((void **)&b->s, &b->cap, b->n + n + 1, 1);
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_add(sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

/* Python's str.isspace() for one code point (what Jinja's trim strips). */
static bool py_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* s with Python's whitespace stripped from both ends (`| trim`): *start, *len. */
static void py_trim(const char *s, size_t *start, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), a = 0, z = n;
    while (a < z) {
        uint32_t cp;
        size_t l = utf8_char(u + a, z - a, &cp);
        if (!l || !py_space(cp))
            break;
        a += l;
    }
    while (z > a) {
        size_t b = z - 1;
        while (b > a && (u[b] & 0xC0) == 0x80 && z - b < 4)
            b--;
        uint32_t cp;
        size_t l = utf8_char(u + b, z - b, &cp);
        if (l != z - b || !py_space(cp))
            break;
        z = b;
    }
    *start = a;
    *len = z - a;
}

static void sb_trimmed(sbuf *b, const char *s)
{
    size_t a, l;
    py_trim(s, &a, &l);
    sb_addn(b, s + a, l);
}

/* s[*a..*z) with `ch` stripped from the left (lstrip) or the right (rstrip). */
static void strip_ch(const char *s, size_t *a, size_t *z, bool left, bool right)
{
    while (left && *a < *z && s[*a] == '\n')
        (*a)++;
    while (right && *z > *a && s[*z - 1] == '\n')
        (*z)--;
}

/* Finds `needle` in s[a..z) from the left or the right; SIZE_MAX when absent. */
static size_t find_in(const char *s, size_t a, size_t z, const char *needle, bool last)
{
    size_t nl = strlen(needle), found = SIZE_MAX;
    for (size_t i = a; i + nl <= z; i++) {
        if (memcmp(s + i, needle, nl) == 0) {
            found = i;
            if (!last)
                break;
        }
    }
    return found;
}

/* Qwen3's assistant turn at index i (last_query: the index of the last user query). */
static void qwen3_assistant(sbuf *b, const char *content, size_t i, size_t n, size_t last_query)
{
    size_t cl = strlen(content);
    size_t ra = 0, rz = 0, ca = 0, cz = cl; /* reasoning_content, content */
    bool has_reasoning = false;
    size_t close = find_in(content, 0, cl, "</think>", false);
    if (close != SIZE_MAX) {
        /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        ra = 0;
        rz = close;
        strip_ch(content, &ra, &rz, false, true);
        size_t open = find_in(content, ra, rz, "<think>", true);
        if (open != SIZE_MAX)
            ra = open + strlen("<think>");
        strip_ch(content, &ra, &rz, true, false);
        has_reasoning = rz > ra;
        /* content.split('</think>')[-1].lstrip('\n') */
        ca = find_in(content, 0, cl, "</think>", true) + strlen("</think>");
        strip_ch(content, &ca, &cz, true, false);
    }
    sb_add(b, "<|im_start|>assistant\n");
    if (i > last_query && (i == n - 1 || has_reasoning)) {
        size_t a2 = ra, z2 = rz, c2 = ca, e2 = cz;
        strip_ch(content, &a2, &z2, true, true);
        strip_ch(content, &c2, &e2, true, false);
        sb_add(b, "<think>\n");
        sb_addn(b, content + a2, z2 - a2);
        sb_add(b, "\n</think>\n\n");
        sb_addn(b, content + c2, e2 - c2);
    } else {
        sb_addn(b, content + ca, cz - ca);
    }
    sb_add(b, "<|im_end|>\n");
}

static bool starts_ends(const char *s, const char *head, const char *tail)
{
    size_t n = strlen(s), h = strlen(head), t = strlen(tail);
    return n >= h && n >= t && memcmp(s, head, h) == 0 && memcmp(s + n - t, tail, t) == 0;
}

cz_status cz_chat_render(cz_chat_template kind, const cz_chat_msg *msgs, size_t n,
                         bool add_generation_prompt, char **out, cz_err *err)
{
    if (n == 0)
        return cz_err_set(err, CZ_EINVAL, "messages: empty, expected at least one message");
    if ((unsigned)kind >= CZ_ARRAY_LEN(chat_names))
        return cz_err_set(err, CZ_EINVAL, "chat template %d: unknown", (int)kind);
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r || (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 &&
                   strcmp(r, "assistant") != 0))
            return cz_err_set(err, CZ_EINVAL,
                              "messages[%zu]: role '%.40s': expected system, user or assistant",
                              i, r ? r : "(null)");
    }
#define CONTENT(i) (msgs[i].content ? msgs[i].content : "")
    sbuf b = {0};
    sb_add(&b, "");
    bool first_system = strcmp(msgs[0].role, "system") == 0;
    switch (kind) {
    case CZ_CHAT_PLAIN:
        for (size_t i = 0; i < n; i++) {
            sb_add(&b, msgs[i].role);
            sb_add(&b, ": ");
            sb_add(&b, CONTENT(i));
            sb_add(&b, "\n\n");
        }
        if (add_generation_prompt)
            sb_add(&b, "assistant: ");
        break;
    case CZ_CHAT_LLAMA3:
        sb_add(&b, "<|begin_of_text|>");
        for (size_t i = 0; i < n; i++) {
            sb_add(&b, "<|start_header_id|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "<|end_header_id|>\n\n");
            sb_trimmed(&b, CONTENT(i));
            sb_add(&b, "<|eot_id|>");
        }
        if (add_generation_prompt)
            sb_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CZ_CHAT_LLAMA31:
        sb_add(&b, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                   "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
        if (first_system)
            sb_trimmed(&b, CONTENT(0));
        sb_add(&b, "<|eot_id|>");
        for (size_t i = first_system ? 1 : 0; i < n; i++) {
            sb_add(&b, "<|start_header_id|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "<|end_header_id|>\n\n");
            sb_trimmed(&b, CONTENT(i));
            sb_add(&b, "<|eot_id|>");
        }
        if (add_generation_prompt)
            sb_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CZ_CHAT_CHATML:
    case CZ_CHAT_QWEN2:
        if (!first_system)
            sb_add(&b, kind == CZ_CHAT_CHATML
                           ? "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are "
                             "a helpful assistant.<|im_end|>\n"
                           : "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n");
        for (size_t i = 0; i < n; i++) {
            sb_add(&b, "<|im_start|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "\n");
            sb_add(&b, CONTENT(i));
            sb_add(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt)
            sb_add(&b, "<|im_start|>assistant\n");
        break;
    case CZ_CHAT_QWEN3: {
        size_t last_query = n - 1;
        for (size_t k = n; k-- > 0;) {
            if (strcmp(msgs[k].role, "user") == 0 &&
                !starts_ends(CONTENT(k), "<tool_response>", "</tool_response>")) {
                last_query = k;
                break;
            }
        }
        for (size_t i = 0; i < n; i++) {
            if (strcmp(msgs[i].role, "assistant") == 0) {
                qwen3_assistant(&b, CONTENT(i), i, n, last_query);
                continue;
            }
            sb_add(&b, "<|im_start|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "\n");
            sb_add(&b, CONTENT(i));
            sb_add(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt)
            sb_add(&b, "<|im_start|>assistant\n");
        break;
    }
    }
#undef CONTENT
    *out = b.s;
    return CZ_OK;
}
