/* kv_write.c - stores a step's new K and V rows into their slots of the paged cache,
 * converted to the cache's dtype (vLLM's reshape_and_cache). */
#include "cz_kernels_cpu.h"

typedef struct {
    const cz_kv_layer *kv;
    const float *k, *v;
    uint32_t ld;
    const int64_t *slots;
} kvw_job;

static void kvw_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const kvw_job *j = p;
    const cz_kv_layer *kv = j->kv;
    size_t row = (size_t)kv->kv_heads * kv->head_dim, es = cz_dtype_size(kv->dt);
    for (size_t i = b; i < e; i++) {
        int64_t s = j->slots[i];
        if (s < 0)
            continue;
        size_t blk = (size_t)s / kv->block_tokens, off = (size_t)s % kv->block_tokens;
        size_t at = (blk * kv->block_stride + off * row) * es;
        cz__narrow((char *)kv->k + at, j->k + i * j->ld, kv->dt, row);
        cz__narrow((char *)kv->v + at, j->v + i * j->ld, kv->dt, row);
    }
}

void cz_cpu_kv_write(cz_kctx *k, const cz_kv_layer *kv, const float *knew, const float *vnew,
                     uint32_t ld, const int64_t *slots, uint32_t n)
{
    kvw_job j = {kv, knew, vnew, ld, slots};
    cz__kpar(k, n, 1, 1 + 16384 / ((size_t)kv->kv_heads * kv->head_dim + 1), kvw_range, &j);
}
