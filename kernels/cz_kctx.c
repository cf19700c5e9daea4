/* cz_kctx.c - the backend-neutral context calls: each dispatches through the backend table
 * every context starts with (cz_kctx_int.h). */
#include "cz_kctx_int.h"

static const cz__khead *head(const cz_kctx *k)
{
    CZ_ASSERT(k);
    return (const cz__khead *)(const void *)k;
}

const cz_kernels *cz_kctx_ops(const cz_kctx *k) { return head(k)->ops; }
uint32_t cz_kctx_threads(const cz_kctx *k) { return head(k)->threads; }
uint32_t cz_kctx_sms(const cz_kctx *k) { return head(k)->sms; }
void *cz_kmem_alloc(cz_kctx *k, size_t bytes) { return head(k)->be->alloc(k, bytes); }
void cz_kmem_free(cz_kctx *k, void *p) { head(k)->be->free(k, p); }
void cz_kctx_sync(cz_kctx *k) { head(k)->be->sync(k); }
void cz_kctx_bind(cz_kctx *k) { head(k)->be->bind(k); }
void *cz_kmem_host_alloc(cz_kctx *k, size_t bytes) { return head(k)->be->host_alloc(k, bytes); }
void cz_kmem_host_free(cz_kctx *k, void *p) { head(k)->be->host_free(k, p); }
void cz_kmem_copy_wait(cz_kctx *k) { head(k)->be->copy_wait(k); }
void cz_kctx_reserve(cz_kctx *k, const cz_kreserve *r) { head(k)->be->reserve(k, r); }
cz_status cz_kctx_status(const cz_kctx *k, cz_err *err) { return head(k)->be->status(k, err); }

void cz_kmem_upload(cz_kctx *k, void *dst, const void *src, size_t bytes)
{
    head(k)->be->upload(k, dst, src, bytes);
}

void cz_kmem_download(cz_kctx *k, void *dst, const void *src, size_t bytes)
{
    head(k)->be->download(k, dst, src, bytes);
}

void cz_kmem_copy_async(cz_kctx *k, void *dst, const void *src, size_t bytes, bool to_host)
{
    head(k)->be->copy_async(k, dst, src, bytes, to_host);
}

void cz_kctx_free(cz_kctx *k)
{
    if (k)
        head(k)->be->destroy(k);
}

uint32_t cz_kcuda_sm_round(uint32_t want, uint32_t total, uint32_t min_sms, uint32_t step)
{
    if (step == 0)
        step = 1;
    uint32_t lo = (min_sms + step - 1) / step * step;
    if (lo == 0)
        lo = step;
    if (want >= total || total < 2 * lo)
        return total;
    uint32_t hi = (total - lo) / step * step; /* the rest is at least lo too */
    uint32_t r = (want + step / 2) / step * step; /* nearest, ties up */
    if (r < lo)
        r = lo;
    if (r > hi)
        r = hi;
    return r;
}
