/* cz_blas.c - the CPU backend's one entry into OpenBLAS's GEMM.
 *
 * The ops call OpenBLAS's Fortran symbol sgemm_, not cblas_sgemm. The project links GSL
 * against OpenBLAS as its CBLAS (meson.build builds gsl_dep so), but GSL's pkg-config file
 * names its reference CBLAS (libgslcblas, a plain triple loop), and a program that links
 * both binds cblas_sgemm to whichever comes first on its link line: GEMMs then run tens of
 * times slower. libgslcblas has no sgemm_, so this call reaches OpenBLAS whatever a link
 * line holds. */
#include <dlfcn.h>

#include <cblas.h>
#include <f77blas.h>

#include "cz_kernels.h"
#include "cz_kernels_cpu.h"

void cz_blas_single_thread(void)
{
    openblas_set_num_threads(1);
    /* Debian's pthread and OpenMP builds export their thread server's shutdown (the fork
     * handler's); a serial build has no server and no symbol */
    int (*shutdown)(void);
    *(void **)&shutdown = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    if (shutdown)
        shutdown();
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
    sgemm_(&trb, &tra, &M, &N, &K, &one, (float *)b, &lb, (float *)a, &la, &beta, c, &lc);
}
