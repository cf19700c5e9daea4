/* copy_blocks.c - whole KV blocks between the pool and host memory, or inside the pool
 * (offload, reload, copy-on-write). */
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    char *dst;
    size_t dst_stride;
    const int32_t *dst_ids;
    const char *src;
    size_t src_stride;
    const int32_t *src_ids;
    size_t bytes;
} cb_job;

static void cb_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const cb_job *j = p;
    for (size_t i = b; i < e; i++) {
        size_t d = j->dst_ids ? (size_t)j->dst_ids[i] : i, s = j->src_ids ? (size_t)j->src_ids[i] : i;
        CZ_ASSERT((!j->dst_ids || j->dst_ids[i] >= 0) && (!j->src_ids || j->src_ids[i] >= 0));
        memcpy(j->dst + d * j->dst_stride, j->src + s * j->src_stride, j->bytes);
    }
}

void cz_cpu_copy_blocks(cz_kctx *k, void *dst, size_t dst_stride, const int32_t *dst_ids,
                        const void *src, size_t src_stride, const int32_t *src_ids,
                        size_t block_bytes, uint32_t n)
{
    cb_job j = {dst, dst_stride, dst_ids, src, src_stride, src_ids, block_bytes};
    cz__kpar(k, n, 1, 1 + (1u << 18) / (block_bytes + 1), cb_range, &j);
}
