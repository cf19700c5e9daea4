/* cz_kvpool.c - see cz_kvpool.h. One allocation of backend memory; block b, layer l's K
 * rows start at element (b x layers + l) x 2 x per_layer of it and its V rows per_layer
 * elements later, per_layer = block_tokens x kv_heads x head_dim. */
#include "cz_kvpool.h"

#include <stdlib.h>

cz_status cz_kv_pool_create(cz_kctx *k, const cz_stage_card *card, uint32_t blocks,
                            uint32_t block_tokens, cz_dtype dt, cz_kv_pool **out, cz_err *err)
{
    CZ_ASSERT(k != NULL && card != NULL && out != NULL);
    if (card->kind != CZ_STAGE_AR)
        return cz_err_set(err, CZ_EINVAL,
                          "stage '%s': a KV pool needs an autoregressive (\"ar\") stage, not %s "
                          "\"%s\" one",
                          card->name, card->kind == CZ_STAGE_ENCODER ? "an" : "a",
                          cz_stage_kind_name(card->kind));
    if (blocks == 0 || block_tokens == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "stage '%s': a KV pool needs at least one block of at least one "
                          "token, got %u blocks of %u tokens",
                          card->name, blocks, block_tokens);
    CZ_ASSERT(card->layers > 0 && card->kv_heads > 0 && card->head_dim > 0);
    cz_kv_pool *p = cz_xcalloc(1, sizeof *p);
    p->k = k;
    p->dt = dt;
    p->layers = card->layers;
    p->blocks = blocks;
    p->block_tokens = block_tokens;
    p->kv_heads = card->kv_heads;
    p->head_dim = card->head_dim;
    size_t per = (size_t)block_tokens * card->kv_heads * card->head_dim;
    p->block_bytes = per * 2 * card->layers * cz_dtype_size(dt);
    p->base = cz_kmem_alloc(k, p->block_bytes * blocks);
    *out = p;
    return CZ_OK;
}

void cz_kv_pool_free(cz_kv_pool *p)
{
    if (!p)
        return;
    cz_kmem_free(p->k, p->base);
    free(p);
}

cz_kv_layer cz_kv_pool_layer(const cz_kv_pool *p, uint32_t l)
{
    CZ_ASSERT(l < p->layers);
    size_t es = cz_dtype_size(p->dt);
    size_t per = (size_t)p->block_tokens * p->kv_heads * p->head_dim;
    char *k = (char *)p->base + (size_t)l * 2 * per * es;
    cz_kv_layer v = {
        .k = k,
        .v = k + per * es,
        .dt = p->dt,
        .block_stride = p->block_bytes / es,
        .block_tokens = p->block_tokens,
        .kv_heads = p->kv_heads,
        .head_dim = p->head_dim,
    };
    return v;
}

size_t cz_kv_pool_token_bytes(const cz_kv_pool *p, uint64_t tokens)
{
    return (size_t)tokens * 2 * p->layers * p->kv_heads * p->head_dim * cz_dtype_size(p->dt);
}
