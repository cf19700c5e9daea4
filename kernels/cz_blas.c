/* cz_blas.c - the CPU backend's one entry into OpenBLAS's GEMM.
 *
 * OpenBLAS is not linked: it is loaded with dlopen by the first CPU context, with its
 * thread server off, and its Fortran symbol sgemm_ is called through the handle (GSL keeps
 * its own reference CBLAS, libgslcblas, for the small fits it runs; a linked OpenBLAS and
 * libgslcblas would both export cblas_sgemm). A simulation never loads it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <f77blas.h>

#include "cz_kernels.h"
#include "cz_kernels_cpu.h"

/* OpenBLAS, loaded by the first CPU context (cz_blas_load) and never before: a program
 * that links it starts its worker threads from the library's constructor, and under an
 * address-space limit those spin for ever on their buffers. It is the process's, so its
 * handle and entry points are too (with the buffer count below, the kernels' only state
 * outside a context). */
typedef void (*sgemm_fn)(char *, char *, blasint *, blasint *, blasint *, float *, float *,
                         blasint *, float *, blasint *, float *, float *, blasint *);
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void *blas_lib;
static sgemm_fn blas_sgemm;
static char blas_why[256];

static void blas_open(void)
{
    /* before its constructor runs: no thread server (the contexts split GEMMs themselves) */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
    for (size_t i = 0; i < CZ_ARRAY_LEN(names) && !blas_lib; i++)
        blas_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!blas_lib) {
        const char *e = dlerror();
        snprintf(blas_why, sizeof blas_why, "%s", e ? e : "not found");
        return;
    }
    *(void **)&blas_sgemm = dlsym(blas_lib, "sgemm_");
    if (!blas_sgemm) {
        snprintf(blas_why, sizeof blas_why, "libopenblas has no sgemm_");
        return;
    }
    void (*set_threads)(int);
    *(void **)&set_threads = dlsym(blas_lib, "openblas_set_num_threads");
    if (set_threads)
        set_threads(1);
}

cz_status cz_blas_load(cz_err *err)
{
    pthread_once(&blas_once, blas_open);
    if (!blas_sgemm)
        return cz_err_set(err, CZ_ENOTFOUND,
                          "kernels: the CPU engine runs its matrix products on OpenBLAS, which "
                          "cannot be loaded (%s); install it (Debian: libopenblas0)",
                          blas_why);
    return CZ_OK;
}

/* One GEMM buffer of OpenBLAS's pool (its BUFFER_SIZE, 128 MiB on x86_64 builds, and a
 * page), with room to spare */
#define CZ_BLAS_BUFFER_BYTES ((size_t)130 << 20)
/* The most buffers asked for (the pool of a Debian build holds 2 x 64) */
#define CZ_BLAS_BUFFERS_MAX 64u

/* OpenBLAS's pool is the process's; so is the count of buffers made sure of in it. */
static pthread_mutex_t reserve_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t reserved;

cz_status cz_blas_reserve(uint32_t buffers, cz_err *err)
{
    if (buffers > CZ_BLAS_BUFFERS_MAX)
        buffers = CZ_BLAS_BUFFERS_MAX;
    cz_status ld = cz_blas_load(err);
    if (ld != CZ_OK)
        return ld;
    void *(*mem_alloc)(int);
    void (*mem_free)(void *);
    *(void **)&mem_alloc = dlsym(blas_lib, "blas_memory_alloc");
    *(void **)&mem_free = dlsym(blas_lib, "blas_memory_free");
    if (!mem_alloc || !mem_free)
        return CZ_OK; /* a build without the pool's entry points: nothing to make sure of */
    pthread_mutex_lock(&reserve_mu);
    cz_status st = CZ_OK;
    if (buffers > reserved) {
        /* the new buffers first from malloc, given back at once: OpenBLAS retries a
         * failed allocation for ever, so it is asked only for what is there */
        uint32_t n = buffers - reserved;
        void *probe[CZ_BLAS_BUFFERS_MAX];
        uint32_t got = 0;
        for (; got < n; got++)
            if (!(probe[got] = malloc(CZ_BLAS_BUFFER_BYTES)))
                break;
        for (uint32_t i = 0; i < got; i++)
            free(probe[i]);
        if (got < n) {
            st = cz_err_set(err, CZ_ENOMEM,
                            "kernels: out of memory: OpenBLAS's GEMMs need %u buffers of %zu "
                            "MiB (one per thread running them), and only %u more fit (an "
                            "address-space limit, ulimit -v?); use fewer --threads or allow "
                            "more memory",
                            buffers, CZ_BLAS_BUFFER_BYTES >> 20, reserved + got);
        } else {
            /* held together, the pool makes them all; given back, it keeps them */
            for (uint32_t i = 0; i < buffers; i++)
                probe[i] = mem_alloc(0);
            for (uint32_t i = 0; i < buffers; i++)
                if (probe[i])
                    mem_free(probe[i]);
            reserved = buffers;
        }
    }
    pthread_mutex_unlock(&reserve_mu);
    return st;
}

void cz__sgemm(bool ta, bool tb, uint32_t m, uint32_t n, uint32_t kd, const float *a,
               uint32_t lda, const float *b, uint32_t ldb, float beta, float *c, uint32_t ldc)
{
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
    char tra = ta ? 'T' : 'N', trb = tb ? 'T' : 'N';
    blasint M = (blasint)n, N = (blasint)m, K = (blasint)kd;
    blasint la = (blasint)lda, lb = (blasint)ldb, lc = (blasint)ldc;
    float one = 1.0f;
    if (!m || !n)
        return;
    CZ_ASSERT(blas_sgemm); /* loaded by every CPU context's creation */
    blas_sgemm(&trb, &tra, &M, &N, &K, &one, (float *)b, &lb, (float *)a, &la, &beta, c, &lc);
}
