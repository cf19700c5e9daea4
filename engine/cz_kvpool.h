/* cz_kvpool.h - a decoder stage's paged KV cache in backend memory.
 *
 * Blocks of `block_tokens` tokens laid out block by block over all layers (FlashInfer's
 * and vLLM's per-block page, widened over layers): block b holds, for each layer l, the K
 * rows (block_tokens, kv_heads, head_dim) and then the V rows, so one block's KV is one
 * contiguous range (one copy to host memory) and a layer sees the pool as a cz_kv_layer
 * view with a block stride. Which block belongs to whom is the engine's (cz_kvmap.h),
 * following the serving core's accounting. */
#ifndef CZ_KVPOOL_H
#define CZ_KVPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_kernels.h"
#include "cz_models.h"

typedef struct cz_kv_pool {
    cz_kctx *k;
    void *base;              /* blocks x block_bytes of backend memory */
    cz_dtype dt;
    uint32_t layers, blocks, block_tokens, kv_heads, head_dim;
    size_t block_bytes;      /* one block over all layers, K and V */
} cz_kv_pool;

/* Allocates `blocks` blocks for decoder stage `card` on context `k`, elements of `dt`.
 * CZ_EINVAL (naming the stage) for a stage that is not autoregressive, zero blocks or
 * block_tokens. The pool's bytes start unset. */
cz_status cz_kv_pool_create(cz_kctx *k, const cz_stage_card *card, uint32_t blocks,
                            uint32_t block_tokens, cz_dtype dt, cz_kv_pool **out, cz_err *err);
void cz_kv_pool_free(cz_kv_pool *p);

/* Layer l's view (cz_kernels.h). */
cz_kv_layer cz_kv_pool_layer(const cz_kv_pool *p, uint32_t l);

/* Bytes of `tokens` tokens of KV over all layers (K and V). */
size_t cz_kv_pool_token_bytes(const cz_kv_pool *p, uint64_t tokens);

#endif
