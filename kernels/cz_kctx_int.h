/* cz_kctx_int.h - what every backend's context starts with: its ops and the table of its
 * memory and lifetime functions, which the public cz_kmem_* and cz_kctx_* calls
 * (cz_kctx.c) dispatch through. C and CUDA C++ alike include it. */
#ifndef CZ_KCTX_INT_H
#define CZ_KCTX_INT_H

#include "cz_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend's memory and lifetime functions; contracts as the public calls'. */
typedef struct cz__kbackend {
    void *(*alloc)(cz_kctx *k, size_t bytes);
    void (*free)(cz_kctx *k, void *p);
    void (*upload)(cz_kctx *k, void *dst, const void *src, size_t bytes);
    void (*download)(cz_kctx *k, void *dst, const void *src, size_t bytes);
    void *(*host_alloc)(cz_kctx *k, size_t bytes);
    void (*host_free)(cz_kctx *k, void *p);
    void (*copy_async)(cz_kctx *k, void *dst, const void *src, size_t bytes, bool to_host);
    void (*copy_wait)(cz_kctx *k);
    void (*sync)(cz_kctx *k);
    void (*bind)(cz_kctx *k);
    void (*reserve)(cz_kctx *k, const cz_kreserve *r);
    cz_status (*status)(const cz_kctx *k, cz_err *err);
    void (*destroy)(cz_kctx *k);
} cz__kbackend;

/* The first member of every backend's context struct: a cz_kctx * points at it. */
typedef struct cz__khead {
    const cz_kernels *ops;
    const cz__kbackend *be;
    uint32_t threads;     /* host threads it computes with */
    uint32_t sms;         /* SMs its streams run on (CUDA; 0 on the CPU) */
} cz__khead;

#ifdef __cplusplus
}
#endif

#endif
