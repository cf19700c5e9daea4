/* cz_kctx_cuda.cu - the CUDA backend's context: device and streams, the cuBLAS handle,
 * memory (device, pinned host, async copies on the copy stream), scratch sized by the
 * reserve, the check functions behind CZ_CUDA_CHECK and friends, green contexts for SM
 * partitions, and the backend's table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "cz_kcuda.h"
#include "cz_kcuda_entry.h"

/* ---- errors ---- */

bool cz__cuda_fail(cz__kcuda *k, const char *what, const char *expr, const char *file, int line)
{
    if (k->err.status == CZ_OK)
        cz_err_set(&k->err, CZ_EDEVICE, "cuda: device %d: %s:%d: %s: %s", k->dev, file, line,
                   expr, what);
    return false;
}

static void describe_cuda(char *buf, size_t n, cudaError_t e)
{
    snprintf(buf, n, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
}

static void describe_cublas(char *buf, size_t n, cublasStatus_t s)
{
    snprintf(buf, n, "%s (%s)", cublasGetStatusName(s), cublasGetStatusString(s));
}

/* The driver's strings come through the runtime's entry point (no link to libcuda). */
static void describe_cu(char *buf, size_t n, CUresult r)
{
    const char *name = NULL, *str = NULL;
    PFN_cuGetErrorName_v6000 gn = NULL;
    PFN_cuGetErrorString_v6000 gs = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuGetErrorName", (void **)&gn, 6000, cudaEnableDefault, &q) == cudaSuccess && gn)
        gn(r, &name);
    if (cudaGetDriverEntryPointByVersion("cuGetErrorString", (void **)&gs, 6000, cudaEnableDefault, &q) == cudaSuccess && gs)
        gs(r, &str);
    snprintf(buf, n, "CUresult %d %s (%s)", (int)r, name ? name : "", str ? str : "no driver");
}

bool cz__cuda_ok(cz__kcuda *k, cudaError_t e, const char *expr, const char *file, int line)
{
    if (e == cudaSuccess)
        return true;
    char d[256];
    describe_cuda(d, sizeof d, e);
    return cz__cuda_fail(k, d, expr, file, line);
}

bool cz__cublas_ok(cz__kcuda *k, cublasStatus_t s, const char *expr, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return true;
    char d[256];
    describe_cublas(d, sizeof d, s);
    return cz__cuda_fail(k, d, expr, file, line);
}

bool cz__cu_ok(cz__kcuda *k, CUresult r, const char *expr, const char *file, int line)
{
    if (r == CUDA_SUCCESS)
        return true;
    char d[256];
    describe_cu(d, sizeof d, r);
    return cz__cuda_fail(k, d, expr, file, line);
}

cz_status cz__cuda_status(cudaError_t e, const char *expr, const char *file, int line, cz_err *err)
{
    if (e == cudaSuccess)
        return CZ_OK;
    char d[256];
    describe_cuda(d, sizeof d, e);
    return cz_err_set(err, CZ_EDEVICE, "cuda: %s:%d: %s: %s", file, line, expr, d);
}

cz_status cz__cublas_status(cublasStatus_t s, const char *expr, const char *file, int line,
                            cz_err *err)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return CZ_OK;
    char d[256];
    describe_cublas(d, sizeof d, s);
    return cz_err_set(err, CZ_EDEVICE, "cuda: %s:%d: %s: %s", file, line, expr, d);
}

cz_status cz__cu_status(CUresult r, const char *expr, const char *file, int line, cz_err *err)
{
    if (r == CUDA_SUCCESS)
        return CZ_OK;
    char d[256];
    describe_cu(d, sizeof d, r);
    return cz_err_set(err, CZ_EDEVICE, "cuda: %s:%d: %s: %s", file, line, expr, d);
}

/* ---- memory ---- */

static void oom(const cz__kcuda *c, const char *what, size_t bytes, cudaError_t e)
{
    fprintf(stderr, "cadenza: out of memory: cannot allocate %zu bytes of %s on CUDA device %d: %s\n",
            bytes, what, c->dev, cudaGetErrorString(e));
    exit(1);
}

static void *cu_alloc(cz_kctx *k, size_t bytes)
{
    cz__kcuda *c = cz__cu(k);
    void *p = NULL;
    cudaSetDevice(c->dev);
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess || !p)
        oom(c, "device memory", bytes, e);
    return p;
}

static void cu_free(cz_kctx *k, void *p)
{
    if (p)
        CZ_CUDA_CHECK(cz__cu(k), cudaFree(p));
}

static void cu_upload(cz_kctx *k, void *dst, const void *src, size_t bytes)
{
    cz__kcuda *c = cz__cu(k);
    if (!bytes)
        return;
    /* ordered after the ops already queued, done when it returns (src may be reused) */
    CZ_CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    CZ_CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

static void cu_download(cz_kctx *k, void *dst, const void *src, size_t bytes)
{
    cz__kcuda *c = cz__cu(k);
    if (!bytes)
        return;
    CZ_CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CZ_CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

static void *cu_host_alloc(cz_kctx *k, size_t bytes)
{
    cz__kcuda *c = cz__cu(k);
    void *p = NULL;
    cudaSetDevice(c->dev);
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocPortable);
    if (e != cudaSuccess || !p)
        oom(c, "pinned host memory", bytes, e);
    return p;
}

static void cu_host_free(cz_kctx *k, void *p)
{
    if (p)
        CZ_CUDA_CHECK(cz__cu(k), cudaFreeHost(p));
}

static void cu_copy_async(cz_kctx *k, void *dst, const void *src, size_t bytes, bool to_host)
{
    cz__kcuda *c = cz__cu(k);
    if (!bytes)
        return;
    cudaSetDevice(c->dev); /* the copy thread's first call on this device */
    CZ_CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes,
                                     to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                     c->copy));
}

static void cu_copy_wait(cz_kctx *k)
{
    cz__kcuda *c = cz__cu(k);
    CZ_CUDA_CHECK(c, cudaStreamSynchronize(c->copy));
}

static void cu_sync(cz_kctx *k)
{
    cz__kcuda *c = cz__cu(k);
    CZ_CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

static void cu_bind(cz_kctx *k)
{
    cz__kcuda *c = cz__cu(k);
    CZ_CUDA_CHECK(c, cudaSetDevice(c->dev));
}

static size_t max_sz(size_t a, size_t b)
{
    return a > b ? a : b;
}

static void cu_reserve(cz_kctx *k, const cz_kreserve *r)
{
    cz__kcuda *c = cz__cu(k);
    cz_kreserve o = c->res, n = o;
#define CZ__MAXF(f) n.f = r->f > o.f ? r->f : o.f
    CZ__MAXF(max_rows);
    CZ__MAXF(max_ctx);
    CZ__MAXF(max_heads);
    CZ__MAXF(max_dim);
    CZ__MAXF(max_experts);
    CZ__MAXF(max_moe_dim);
#undef CZ__MAXF
    if (n.max_experts && !n.max_moe_dim)
        n.max_moe_dim = n.max_dim;
    size_t need = cz__cuda_gemm_scratch_bytes(&n);
    need = max_sz(need, cz__cuda_attn_scratch_bytes(&n));
    need = max_sz(need, cz__cuda_moe_scratch_bytes(&n));
    need = max_sz(need, cz__cuda_sample_scratch_bytes(&n));
    need = max_sz(need, cz__cuda_conv_scratch_bytes(&n));
    need = (need + 255) / 256 * 256;
    if (need > c->scratch_bytes) {
        CZ_CUDA_CHECK(c, cudaStreamSynchronize(c->stream)); /* ops may still read it */
        cu_free(k, c->scratch);
        cu_host_free(k, c->hscratch);
        c->scratch = cu_alloc(k, need);
        c->hscratch = cu_host_alloc(k, need);
        c->scratch_bytes = need;
    }
    c->res = n;
}

static cz_status cu_status(const cz_kctx *k, cz_err *err)
{
    const cz__kcuda *c = (const cz__kcuda *)(const void *)k;
    if (c->err.status == CZ_OK) {
        cz_err_clear(err);
        return CZ_OK;
    }
    if (err)
        *err = c->err;
    return c->err.status;
}

typedef struct green_api {
    PFN_cuDeviceGetDevResource_v12040 get_resource;
    PFN_cuDevSmResourceSplitByCount_v12040 split;
    PFN_cuDevResourceGenerateDesc_v12040 desc;
    PFN_cuGreenCtxCreate_v12040 create;
    PFN_cuGreenCtxDestroy_v12040 destroy;
    PFN_cuGreenCtxStreamCreate_v12050 stream;
    PFN_cuDeviceGet_v2000 device_get;
} green_api;

/* The driver functions green contexts need, through the runtime's entry points (the
 * program does not link libcuda, so it starts on machines without a driver). */
static cz_status green_load(green_api *g, cz_err *err)
{
    struct { const char *name; void **fn; unsigned version; } want[] = {
        {"cuDeviceGetDevResource", (void **)&g->get_resource, 12040},
        {"cuDevSmResourceSplitByCount", (void **)&g->split, 12040},
        {"cuDevResourceGenerateDesc", (void **)&g->desc, 12040},
        {"cuGreenCtxCreate", (void **)&g->create, 12040},
        {"cuGreenCtxDestroy", (void **)&g->destroy, 12040},
        {"cuGreenCtxStreamCreate", (void **)&g->stream, 12050},
        {"cuDeviceGet", (void **)&g->device_get, 2000},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        cudaError_t e = cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, want[i].version,
                                                         cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*want[i].fn)
            return cz_err_set(err, CZ_EDEVICE,
                              "cuda: the driver has no %s (green contexts need CUDA 12.5 or later): %s",
                              want[i].name, cudaGetErrorString(e));
    }
    return CZ_OK;
}

static void cu_destroy(cz_kctx *k)
{
    cz__kcuda *c = cz__cu(k);
    cudaSetDevice(c->dev);
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->copy)
        cudaStreamSynchronize(c->copy);
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->hscratch)
        cudaFreeHost(c->hscratch);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    if (c->copy)
        cudaStreamDestroy(c->copy);
    if (c->green) {
        green_api g;
        cz_err e;
        if (green_load(&g, &e) == CZ_OK)
            g.destroy((CUgreenCtx)c->green);
    }
    free(c);
}

static const cz__kbackend cuda_backend = {
    cu_alloc, cu_free, cu_upload, cu_download, cu_host_alloc, cu_host_free,
    cu_copy_async, cu_copy_wait, cu_sync, cu_bind, cu_reserve, cu_status, cu_destroy,
};

static const cz_kernels cuda_ops = {
    "cuda",
    cz_cuda_embed,
    cz_cuda_rmsnorm,
    cz_cuda_layernorm,
    cz_cuda_matmul,
    cz_cuda_rope,
    cz_cuda_silu_mul,
    cz_cuda_gelu,
    cz_cuda_silu,
    cz_cuda_add,
    cz_cuda_transpose,
    cz_cuda_gather_rows,
    cz_cuda_kv_write,
    cz_cuda_attn_paged,
    cz_cuda_attn_dense,
    cz_cuda_copy_blocks,
    cz_cuda_moe_ffn,
    cz_cuda_conv1d,
    cz_cuda_conv_transpose1d,
    cz_cuda_argmax,
    cz_cuda_sample,
};

/* ---- devices and contexts ---- */

static int mod_device_count(char *why)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (why)
            snprintf(why, CZ_ERR_MSG_MAX, "no CUDA device: cudaGetDeviceCount: %s (%s)",
                     cudaGetErrorName(e), cudaGetErrorString(e));
        return 0;
    }
    return n;
}

static cz_status mod_sm_info(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                           cz_err *err)
{
    cz_status st = CZ_OK;
    green_api g;
    CUdevice d;
    CUdevResource sm;
    CZ_CUDA_TRY(cudaSetDevice(device));
    CZ_CUDA_TRY(cudaFree(0)); /* the primary context exists from here */
    if ((st = green_load(&g, err)) != CZ_OK)
        goto fail;
    CZ_CU_TRY(g.device_get(&d, device));
    memset(&sm, 0, sizeof sm);
    CZ_CU_TRY(g.get_resource(d, &sm, CU_DEV_RESOURCE_TYPE_SM));
    *total = sm.sm.smCount;
    *min_sms = sm.sm.minSmPartitionSize;
    *step = sm.sm.smCoscheduledAlignment;
    return CZ_OK;
fail:
    return st;
}

static cz_status mod_device_info(int device, cz_kcuda_info *out, cz_err *err)
{
    cz_status st = CZ_OK;
    cudaDeviceProp prop;
    int clock_khz = 0, bus_bits = 0;
    memset(out, 0, sizeof *out);
    CZ_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    CZ_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
    CZ_CUDA_TRY(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->major = prop.major;
    out->minor = prop.minor;
    out->sms = (uint32_t)prop.multiProcessorCount;
    out->mem_bytes = prop.totalGlobalMem;
    out->peak_Bps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
    return CZ_OK;
fail:
    return st;
}

/* Splits `want` SMs (rounded, *got) off device `dev`'s SM resource: part[0] gets them,
 * part[1] the rest. *got is the whole device's count (and nothing is split) when the
 * rounding leaves no partition. */
static cz_status split_sms(int dev, uint32_t want, CUdevResource part[2], uint32_t *got,
                           cz_err *err)
{
    cz_status st = CZ_OK;
    green_api g;
    CUdevice d;
    CUdevResource sm;
    unsigned groups = 1;
    uint32_t total, minp, step;
    if ((st = mod_sm_info(dev, &total, &minp, &step, err)) != CZ_OK)
        return st;
    if ((st = green_load(&g, err)) != CZ_OK)
        return st;
    *got = cz_kcuda_sm_round(want, total, minp, step);
    if (*got >= total)
        return CZ_OK;
    CZ_CU_TRY(g.device_get(&d, dev));
    memset(&sm, 0, sizeof sm);
    memset(part, 0, 2 * sizeof *part);
    CZ_CU_TRY(g.get_resource(d, &sm, CU_DEV_RESOURCE_TYPE_SM));
    CZ_CU_TRY(g.split(&part[0], &groups, &sm, &part[1], 0, *got));
    if (groups != 1)
        return cz_err_set(err, CZ_EDEVICE, "cuda: device %d: cannot split %u of %u SMs off",
                          dev, *got, total);
    *got = part[0].sm.smCount;
    return CZ_OK;
fail:
    return st;
}

/* Puts context c on a green context made of SM resource `res`: its streams are created
 * there. */
static cz_status make_green(cz__kcuda *c, CUdevResource *res, cz_err *err)
{
    cz_status st = CZ_OK;
    green_api g;
    CUdevice d;
    CUdevResourceDesc desc;
    CUgreenCtx gc = NULL;
    CUstream s1 = NULL, s2 = NULL;
    if ((st = green_load(&g, err)) != CZ_OK)
        return st;
    CZ_CU_TRY(g.device_get(&d, c->dev));
    CZ_CU_TRY(g.desc(&desc, res, 1));
    CZ_CU_TRY(g.create(&gc, desc, d, CU_GREEN_CTX_DEFAULT_STREAM));
    c->green = gc;
    CZ_CU_TRY(g.stream(&s1, gc, CU_STREAM_NON_BLOCKING, 0));
    c->stream = (cudaStream_t)s1;
    CZ_CU_TRY(g.stream(&s2, gc, CU_STREAM_NON_BLOCKING, 0));
    c->copy = (cudaStream_t)s2;
    c->sms = res->sm.smCount;
    return CZ_OK;
fail:
    return st;
}

/* A context on device `device`, on SM resource `res` (NULL: the whole device). */
static cz_status create_on(int device, CUdevResource *res, cz_kctx **out, cz_err *err)
{
    *out = NULL;
    char why[CZ_ERR_MSG_MAX];
    int n = mod_device_count(why);
    if (n == 0)
        return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", why);
    if (device < 0 || device >= n)
        return cz_err_set(err, CZ_EINVAL, "kernels: CUDA device %d does not exist (%d found)",
                          device, n);
    cz__kcuda *c = (cz__kcuda *)calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "cadenza: out of memory: cannot allocate %zu bytes\n", sizeof *c);
        exit(1);
    }
    c->h.ops = &cuda_ops;
    c->h.be = &cuda_backend;
    c->h.threads = 1;
    c->dev = device;
    cz_status st = CZ_OK;
    cudaDeviceProp prop;
    CZ_CUDA_TRY(cudaSetDevice(device));
    CZ_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    c->sm_major = prop.major;
    c->sm_minor = prop.minor;
    c->sms = (uint32_t)prop.multiProcessorCount;
    if (res && (st = make_green(c, res, err)) != CZ_OK)
        goto fail;
    if (!c->stream) {
        CZ_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
        CZ_CUDA_TRY(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    }
    CZ_CUBLAS_TRY(cublasCreate(&c->blas));
    CZ_CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    /* float32 GEMMs in full float32 (no TF32): the CPU twin is the reference */
    CZ_CUBLAS_TRY(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    c->h.sms = c->sms;
    *out = (cz_kctx *)(void *)c;
    return CZ_OK;
fail:
    cu_destroy((cz_kctx *)(void *)c);
    return st;
}

static cz_status mod_create(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                              cz_err *err)
{
    *out = NULL;
    if (sm_got)
        *sm_got = 0;
    CUdevResource part[2];
    uint32_t got = 0;
    cz_status st = CZ_OK;
    if (sm_count) {
        if ((st = create_on(device, NULL, out, err)) != CZ_OK) /* checks the device */
            return st;
        uint32_t whole = cz__cu(*out)->sms;
        if (sm_count < whole) {
            cz_kctx_free(*out);
            *out = NULL;
            if ((st = split_sms(device, sm_count, part, &got, err)) != CZ_OK)
                return st;
            if (got < whole && (st = create_on(device, &part[0], out, err)) != CZ_OK)
                return st;
            if (!*out && (st = create_on(device, NULL, out, err)) != CZ_OK)
                return st;
        }
    } else if ((st = create_on(device, NULL, out, err)) != CZ_OK) {
        return st;
    }
    if (sm_got)
        *sm_got = cz__cu(*out)->sms;
    return CZ_OK;
}

static cz_status mod_split(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                             cz_err *err)
{
    *part = *rest = NULL;
    CUdevResource res[2];
    uint32_t got = 0;
    cz_kctx *probe = NULL;
    cz_status st = create_on(device, NULL, &probe, err); /* checks the device */
    if (st != CZ_OK)
        return st;
    uint32_t whole = cz__cu(probe)->sms;
    cz_kctx_free(probe);
    if ((st = split_sms(device, sm_count, res, &got, err)) != CZ_OK)
        return st;
    if (got >= whole)
        return cz_err_set(err, CZ_EINVAL,
                          "kernels: CUDA device %d (%u SMs) cannot be split at %u SMs: both "
                          "parts must hold its smallest partition",
                          device, whole, sm_count);
    if ((st = create_on(device, &res[0], part, err)) != CZ_OK)
        return st;
    if ((st = create_on(device, &res[1], rest, err)) != CZ_OK) {
        cz_kctx_free(*part);
        *part = NULL;
        return st;
    }
    return CZ_OK;
}

extern "C" __attribute__((visibility("default"))) const cz__kcuda_entry *cz__kcuda_module_entry(void)
{
    static const cz__kcuda_entry entry = {
        CZ__KCUDA_ABI, mod_device_count, mod_device_info, mod_sm_info, mod_create, mod_split,
    };
    return &entry;
}
