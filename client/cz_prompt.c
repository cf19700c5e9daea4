/* cz_prompt.c - see cz_prompt.h. */
#include "cz_prompt.h"

#include <stdlib.h>
#include <string.h>

/* Rounds of cutting and extending before the closest count is taken. */
#define ROUNDS 32

cz_status cz_prompt_pool_init(cz_prompt_pool *p, const cz_tokenizer *tok, cz_err *err)
{
    uint32_t v = cz_tokenizer_vocab(tok);
    p->ids = cz_xmalloc((v ? v : 1) * sizeof *p->ids);
    p->n = 0;
    for (uint32_t id = 0; id < v; id++) {
        if (cz_tokenizer_is_special(tok, (int32_t)id))
            continue;
        char *t = cz_tokenizer_decode_all(tok, (const int32_t *)&id, 1, true);
        bool ok = t[0] != '\0';
        for (const unsigned char *c = (const unsigned char *)t; ok && *c; c++)
            ok = *c >= 0x20 && *c != 0x7f &&
                 !(c[0] == 0xef && c[1] == 0xbf && c[2] == 0xbd); /* U+FFFD */
        free(t);
        if (ok)
            p->ids[p->n++] = (int32_t)id;
    }
    if (p->n == 0) {
        cz_prompt_pool_free(p);
        return cz_err_set(err, CZ_EINVAL,
                          "tokenizer: no token decodes to plain text on its own, so no prompt "
                          "text can be made from it");
    }
    return CZ_OK;
}

void cz_prompt_pool_free(cz_prompt_pool *p)
{
    free(p->ids);
    p->ids = NULL;
    p->n = 0;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The text of ids[0..n) with the whitespace at either end removed. */
static char *decode_trim(const cz_tokenizer *tok, const int32_t *ids, size_t n)
{
    char *t = cz_tokenizer_decode_all(tok, ids, n, true);
    size_t len = strlen(t), a = 0;
    while (a < len && (t[a] == ' ' || t[a] == '\t' || t[a] == '\n' || t[a] == '\r'))
        a++;
    while (len > a && (t[len - 1] == ' ' || t[len - 1] == '\t' || t[len - 1] == '\n' ||
                       t[len - 1] == '\r'))
        len--;
    memmove(t, t + a, len - a);
    t[len - a] = '\0';
    return t;
}

char *cz_prompt_text(const cz_tokenizer *tok, const cz_prompt_pool *pool, const uint64_t *keys,
                     uint32_t target, uint64_t salt, uint32_t *got)
{
    CZ_ASSERT(target >= 1 && pool->n > 0);
    cz_tok_ids ids = {0};
    cz_grow((void **)&ids.ids, &ids.cap, target, sizeof *ids.ids);
    for (uint32_t i = 0; i < target; i++)
        ids.ids[i] = pool->ids[keys[i] % pool->n];
    ids.n = target;
    char *text = decode_trim(tok, ids.ids, ids.n);
    char *best = NULL;
    uint32_t best_n = 0;
    for (int round = 0; round < ROUNDS; round++) {
        ids.n = 0;
        cz_err e;
        /* text decoded from a tokenizer's own ids is valid UTF-8 */
        cz_status st = cz_tokenizer_encode(tok, text, strlen(text), &ids, &e);
        CZ_ASSERT(st == CZ_OK);
        uint32_t n = (uint32_t)ids.n;
        if (!best || (n > target ? n - target : target - n) <
                         (best_n > target ? best_n - target : target - best_n)) {
            free(best);
            best = text;
            best_n = n;
            text = NULL;
        }
        if (n == target)
            break;
        if (n > target) {
            ids.n = target;
        } else {
            cz_grow((void **)&ids.ids, &ids.cap, target, sizeof *ids.ids);
            for (uint32_t i = n; i < target; i++)
                ids.ids[i] = pool->ids[mix(salt * 0x9e3779b97f4a7c15ull + (uint64_t)round * 7919u + i) %
                                       pool->n];
            ids.n = target;
        }
        free(text);
        text = decode_trim(tok, ids.ids, ids.n);
    }
    free(text);
    cz_tok_ids_free(&ids);
    *got = best_n;
    return best;
}
