/* cuda_cmp.h - the harness of the CUDA-vs-CPU kernel tests (ggml's test-backend-ops): one
 * CPU and one CUDA context, random inputs, each op run on both with the same inputs and
 * compared by normalized mean squared error NMSE = sum (cuda - cpu)^2 / sum cpu^2 against
 * a per-op tolerance, or exactly. A machine without a CUDA device skips the whole program
 * (exit 77, meson's "skipped", with the reason printed). */
#ifndef CZ_CUDA_CMP_H
#define CZ_CUDA_CMP_H

#include <stddef.h>
#include <stdint.h>

#include "cz_kernels.h"

typedef struct cz_cmp {
    cz_kctx *cpu, *cu;
    const cz_kernels *C, *G;   /* their ops */
    uint64_t rng;
    unsigned run, failed;
} cz_cmp;

/* Opens both contexts (CPU on 2 threads, CUDA device 0 or $CZ_CUDA_DEVICE). Returns 0, or
 * 77 after printing why there is no device: the caller returns it from main. */
int cz_cmp_open(cz_cmp *t, uint64_t seed);
/* Prints the totals, frees both contexts; 0 when every check passed, 1 otherwise. */
int cz_cmp_close(cz_cmp *t);

/* Uniform floats in [-scale, scale) (host, caller frees). */
float *cz_cmp_randf(cz_cmp *t, size_t n, float scale);
/* A uniform integer in [0, n). */
uint32_t cz_cmp_randu(cz_cmp *t, uint32_t n);
/* n random values narrowed to dtype dt (host bytes, caller frees). */
void *cz_cmp_rand_dt(cz_cmp *t, cz_dtype dt, size_t n, float scale);
/* A device copy of `bytes` of host memory (cz_kmem_free(t->cu, p) frees it). */
void *cz_cmp_up(cz_cmp *t, const void *host, size_t bytes);
/* Host copy of device memory (caller frees); syncs first. */
void *cz_cmp_down(cz_cmp *t, const void *dev, size_t bytes);

/* Records one comparison: NMSE of `got` (CUDA, host copy) against `ref` (CPU) over n
 * floats at most `tol` (NaN anywhere fails); `what` names the op and shape. Also fails
 * when the CUDA context recorded an error. Returns whether it passed. */
int cz_cmp_nmse(cz_cmp *t, const char *what, const float *ref, const float *got, size_t n,
                double tol);
/* The same for bytes that must match exactly. */
int cz_cmp_exact(cz_cmp *t, const char *what, const void *ref, const void *got, size_t bytes);

#endif
