/* cuda_cmp.c - see cuda_cmp.h. */
#include "cuda_cmp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(cz_cmp *t)
{
    uint64_t z = (t->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int cz_cmp_open(cz_cmp *t, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->rng = seed;
    char why[CZ_ERR_MSG_MAX];
    if (!cz_kernels_cuda_built() || cz_kcuda_device_count(why) == 0) {
        if (!cz_kernels_cuda_built())
            snprintf(why, sizeof why, "built without CUDA");
        printf("SKIP: no CUDA device to compare against the CPU: %s\n", why);
        return 77;
    }
    const char *d = getenv("CZ_CUDA_DEVICE");
    cz_err err;
    if (cz_kctx_cpu_create(2, &t->cpu, &err) != CZ_OK ||
        cz_kctx_cuda_create(d ? atoi(d) : 0, 0, NULL, &t->cu, &err) != CZ_OK) {
        fprintf(stderr, "FAIL: cannot open the contexts: %s\n", err.msg);
        exit(1);
    }
    t->C = cz_kctx_ops(t->cpu);
    t->G = cz_kctx_ops(t->cu);
    return 0;
}

int cz_cmp_close(cz_cmp *t)
{
    cz_err err;
    if (cz_kctx_status(t->cu, &err) != CZ_OK) {
        printf("FAIL: the CUDA context recorded: %s\n", err.msg);
        t->failed++;
    }
    printf("%u checks, %u failed\n", t->run, t->failed);
    cz_kctx_free(t->cu);
    cz_kctx_free(t->cpu);
    return t->failed ? 1 : 0;
}

float *cz_cmp_randf(cz_cmp *t, size_t n, float scale)
{
    float *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = scale * (float)((double)(next(t) >> 11) * 0x1p-52 - 1.0);
    return a;
}

uint32_t cz_cmp_randu(cz_cmp *t, uint32_t n)
{
    return n ? (uint32_t)(next(t) % n) : 0;
}

void *cz_cmp_rand_dt(cz_cmp *t, cz_dtype dt, size_t n, float scale)
{
    float *f = cz_cmp_randf(t, n, scale);
    if (dt == CZ_F32)
        return f;
    uint16_t *h = malloc((n ? n : 1) * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = dt == CZ_BF16 ? cz_f32_to_bf16(f[i]) : cz_f32_to_f16(f[i]);
    free(f);
    return h;
}

void *cz_cmp_up(cz_cmp *t, const void *host, size_t bytes)
{
    void *p = cz_kmem_alloc(t->cu, bytes);
    cz_kmem_upload(t->cu, p, host, bytes);
    return p;
}

void *cz_cmp_down(cz_cmp *t, const void *dev, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    cz_kctx_sync(t->cu);
    cz_kmem_download(t->cu, h, dev, bytes);
    return h;
}

static int device_ok(cz_cmp *t, const char *what)
{
    cz_err err;
    if (cz_kctx_status(t->cu, &err) == CZ_OK)
        return 1;
    printf("FAIL %s: %s\n", what, err.msg);
    return 0;
}

int cz_cmp_nmse(cz_cmp *t, const char *what, const float *ref, const float *got, size_t n,
                double tol)
{
    double num = 0, den = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(ref[i]))
            nan = 1;
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    double e = den > 0 ? num / den : num;
    int ok = !nan && e <= tol && device_ok(t, what);
    t->run++;
    if (!ok)
        t->failed++;
    printf("%s %-48s nmse %.3e (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, e, tol,
           nan ? " NaN" : "");
    return ok;
}

int cz_cmp_exact(cz_cmp *t, const char *what, const void *ref, const void *got, size_t bytes)
{
    int ok = memcmp(ref, got, bytes) == 0 && device_ok(t, what);
    t->run++;
    if (!ok)
        t->failed++;
    printf("%s %-48s exact\n", ok ? "ok  " : "FAIL", what);
    return ok;
}
