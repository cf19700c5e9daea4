/* copy_blocks.cu - whole KV blocks between the pool and host memory, or inside the pool,
 * on CUDA (contract: cz_kernels.h, copy_blocks; vLLM's swap_blocks). No kernel: the
 * copy engines move the blocks, queued on the ops' stream (cudaMemcpyDefault, so ordered
 * after the ops before it and before the ops after it, and block after block as the CPU
 * twin copies them): one cudaMemcpyAsync per run of blocks consecutive on both sides
 * whose source and destination do not overlap (a cudaMemcpy2DAsync, one row per block,
 * where a run's blocks are not adjacent in memory).
 *
 * Memory: dst and src are any memory the device addresses through unified addressing:
 * device memory (the pool), pinned host memory (cz_kmem_host_alloc: asynchronous copies)
 * or pageable host memory (copied through the runtime's staging, synchronously for the
 * host). dst_ids and src_ids are HOST arrays (or NULL), read before the call returns:
 * the offload and reload decisions are the host's, as the CPU twin's callers
 * (tests/test_kernels.c) pass them. Asynchronous: the caller keeps dst and src alive,
 * and a host side unchanged, until cz_kctx_sync. */
#include "cz_kcuda.h"

/* Queues `count` blocks from s (stride ss) to d (stride ds). */
static void cz__cb_run(cz__kcuda *c, char *d, size_t ds, const char *s, size_t ss,
                       size_t bytes, size_t count)
{
    if (count == 1 || (ds == bytes && ss == bytes)) {
        CZ_CUDA_CHECK(c, cudaMemcpyAsync(d, s, bytes * count, cudaMemcpyDefault, c->stream));
    } else if (ds >= bytes && ss >= bytes && ds <= INT32_MAX && ss <= INT32_MAX) {
        /* rows no wider than their pitches, pitches within any device's limit */
        CZ_CUDA_CHECK(c, cudaMemcpy2DAsync(d, ds, s, ss, bytes, count, cudaMemcpyDefault,
                                           c->stream));
    } else {
        for (size_t i = 0; i < count; i++)
            CZ_CUDA_CHECK(c, cudaMemcpyAsync(d + i * ds, s + i * ss, bytes, cudaMemcpyDefault,
                                             c->stream));
    }
}

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static bool cz__cb_overlap(const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bn && y < x + an;
}

extern "C" void cz_cuda_copy_blocks(cz_kctx *k, void *dst, size_t dst_stride,
                                    const int32_t *dst_ids, const void *src, size_t src_stride,
                                    const int32_t *src_ids, size_t block_bytes, uint32_t n)
{
    cz__kcuda *c = cz__cu(k);
    if (!n || !block_bytes)
        return;
    size_t run_d = 0, run_s = 0, run = 0;
    for (uint32_t i = 0; i < n; i++) {
        CZ_ASSERT((!dst_ids || dst_ids[i] >= 0) && (!src_ids || src_ids[i] >= 0));
        size_t d = dst_ids ? (size_t)dst_ids[i] : i, s = src_ids ? (size_t)src_ids[i] : i;
        if (run && d == run_d + run && s == run_s + run &&
            !cz__cb_overlap((char *)dst + run_d * dst_stride, run * dst_stride + block_bytes,
                            (const char *)src + run_s * src_stride,
                            run * src_stride + block_bytes)) {
            run++;
            continue;
        }
        if (run)
            cz__cb_run(c, (char *)dst + run_d * dst_stride, dst_stride,
                       (const char *)src + run_s * src_stride, src_stride, block_bytes, run);
        run_d = d;
        run_s = s;
        run = 1;
    }
    cz__cb_run(c, (char *)dst + run_d * dst_stride, dst_stride,
               (const char *)src + run_s * src_stride, src_stride, block_bytes, run);
}
