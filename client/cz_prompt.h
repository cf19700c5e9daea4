/* cz_prompt.h - prompt text of an exact token count under a tokenizer, for chat endpoints
 * that take text (`cadenza replay --endpoint --api chat`, docs/http-replay.md).
 *
 * A trace gives a request's input as a count of tokens; a chat request carries text, and
 * the server tokenizes it. Text that tokenizes to exactly the count under the server's
 * tokenizer.json is made as vLLM's benchmark makes its random prompts
 * (gen_prompt_decode_to_target_len): token ids decoded to text, the text encoded again, and
 * the ids cut or extended and decoded again until the count holds. */
#ifndef CZ_PROMPT_H
#define CZ_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_tokenizer.h"

/* The ids prompts are drawn from: every id of the tokenizer that is not special and
 * decodes on its own to printable UTF-8 (no control characters, no replacement
 * character), so that decoded prompts are plain text. */
typedef struct cz_prompt_pool {
    int32_t *ids;
    uint32_t n;
} cz_prompt_pool;

/* Builds the pool of `tok`. CZ_EINVAL when no id qualifies (a tokenizer of special tokens
 * only). */
cz_status cz_prompt_pool_init(cz_prompt_pool *p, const cz_tokenizer *tok, cz_err *err);
void cz_prompt_pool_free(cz_prompt_pool *p);

/* Text of exactly `target` tokens under `tok` (encoded without special tokens or BOS, as
 * a chat message's content is before its template), starting from the ids
 * pool->ids[keys[i] % pool->n] for i < target (so prompts with the same leading keys share
 * their leading text), with no whitespace at either end (chat templates that trim content
 * keep the count). `salt` varies the ids added when the text comes out short. Returns the
 * text (caller frees) and sets *got to its count: `target` unless 32 rounds of cutting and
 * extending did not reach it (then the closest count seen). `target` >= 1. */
char *cz_prompt_text(const cz_tokenizer *tok, const cz_prompt_pool *pool, const uint64_t *keys,
                     uint32_t target, uint64_t salt, uint32_t *got);

#endif
