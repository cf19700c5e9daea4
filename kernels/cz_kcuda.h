/* cz_kcuda.h - internals of the CUDA backend shared by kernels/<op>.cu (CUDA C++): the
 * context, the check macros every CUDA, cuBLAS and driver call goes through, launch
 * helpers, and the `cz_cuda_<op>` functions of the table (contracts in cz_kernels.h).
 *
 * Errors: ops return nothing (the table's signatures are the CPU's), so a failed call
 * inside an op records the first failure in the context (call text, file, line, the
 * error's name and string) and later ops still run; cz_kctx_status returns it as
 * CZ_EDEVICE. Calls on a path that returns a cz_status (creation) turn the error into
 * that status at once (CZ_CUDA_TRY). Launches are checked with cudaGetLastError. */
#ifndef CZ_KCUDA_H
#define CZ_KCUDA_H

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cz_kctx_int.h"

/* The CUDA context. */
typedef struct cz__kcuda {
    cz__khead h;              /* first: ops, the CUDA backend table, threads = 1 */
    int dev;
    cudaStream_t stream;      /* the ops' stream */
    cudaStream_t copy;        /* cz_kmem_copy_async's stream (host-tier KV copies) */
    cublasHandle_t blas;      /* on `stream` */
    void *green;              /* the green context (CUgreenCtx) when sm_count > 0 */
    uint32_t sms;             /* SMs the streams run on */
    int sm_major, sm_minor;
    cz_kreserve res;          /* what the scratch serves */
    void *scratch;            /* device scratch, cz__cuda_scratch_bytes(&res) bytes */
    size_t scratch_bytes;
    void *hscratch;           /* pinned host scratch of the same size (MoE counts) */
    cz_err err;               /* the first failure (status CZ_OK: none) */
} cz__kcuda;

#ifdef __cplusplus
extern "C" {
#endif

static inline cz__kcuda *cz__cu(cz_kctx *k)
{
    return (cz__kcuda *)(void *)k;
}

/* Records a failure in the context (the first one is kept). Returns `ok`. */
bool cz__cuda_fail(cz__kcuda *k, const char *what, const char *expr, const char *file,
                   int line);
/* Checks a runtime / cuBLAS / driver result: false (and recorded) on failure. */
bool cz__cuda_ok(cz__kcuda *k, cudaError_t e, const char *expr, const char *file, int line);
bool cz__cublas_ok(cz__kcuda *k, cublasStatus_t s, const char *expr, const char *file, int line);
bool cz__cu_ok(cz__kcuda *k, CUresult r, const char *expr, const char *file, int line);
/* The same, into a cz_err (creation paths): CZ_OK or CZ_EDEVICE with the message. */
cz_status cz__cuda_status(cudaError_t e, const char *expr, const char *file, int line,
                          cz_err *err);
cz_status cz__cublas_status(cublasStatus_t s, const char *expr, const char *file, int line,
                            cz_err *err);
cz_status cz__cu_status(CUresult r, const char *expr, const char *file, int line, cz_err *err);

/* Inside an op (k a cz__kcuda *): records a failure and goes on. */
#define CZ_CUDA_CHECK(k, call) cz__cuda_ok((k), (call), #call, __FILE__, __LINE__)
#define CZ_CUBLAS_CHECK(k, call) cz__cublas_ok((k), (call), #call, __FILE__, __LINE__)
#define CZ_CU_CHECK(k, call) cz__cu_ok((k), (call), #call, __FILE__, __LINE__)
/* After a <<<>>> launch. */
#define CZ_CUDA_LAUNCHED(k) cz__cuda_ok((k), cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
/* On a creation path with a `cz_err *err` and a `cz_status st` in scope: on failure,
 * sets st and jumps to `fail`. */
#define CZ_CUDA_TRY(call) \
    do { if ((st = cz__cuda_status((call), #call, __FILE__, __LINE__, err)) != CZ_OK) goto fail; } while (0)
#define CZ_CUBLAS_TRY(call) \
    do { if ((st = cz__cublas_status((call), #call, __FILE__, __LINE__, err)) != CZ_OK) goto fail; } while (0)
#define CZ_CU_TRY(call) \
    do { if ((st = cz__cu_status((call), #call, __FILE__, __LINE__, err)) != CZ_OK) goto fail; } while (0)

/* Blocks of `threads` covering n items. */
static inline unsigned cz__cuda_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? (b < 0x7fffffffu ? b : 0x7fffffffu) : 1);
}

#ifdef __CUDACC__
/* Loads element i of a weight of dtype dt as float32 (device code). */
__device__ static inline float cz__cuda_ld(const void *p, cz_dtype dt, size_t i)
{
    if (dt == CZ_F32)
        return ((const float *)p)[i];
    unsigned short h = ((const unsigned short *)p)[i];
    if (dt == CZ_BF16)
        return __uint_as_float((unsigned)h << 16);
    return __half2float(__ushort_as_half(h));
}
#endif

#ifdef __cplusplus
}
#endif

/* Device scratch every op may use between its launches (ops run in order on one stream,
 * so one buffer serves them all): the largest need of any op at the reserve's shapes,
 * each op family saying its own (matmul.cu, attn_paged.cu, moe_ffn.cu, sample.cu,
 * conv1d.cu). */
size_t cz__cuda_gemm_scratch_bytes(const cz_kreserve *r);
size_t cz__cuda_attn_scratch_bytes(const cz_kreserve *r);
size_t cz__cuda_moe_scratch_bytes(const cz_kreserve *r);
size_t cz__cuda_sample_scratch_bytes(const cz_kreserve *r);
size_t cz__cuda_conv_scratch_bytes(const cz_kreserve *r);

#ifdef __cplusplus
extern "C" {
#endif

/* matmul.cu's GEMM, for ops that chain GEMMs on their own scratch (moe_ffn.cu):
 * cz_cuda_matmul's contract, with `xs` (xs_bytes bytes of device memory) for the 16-bit
 * copy of x that 16-bit weights need when m > CZ__CUDA_GEMV_MAX_M (converted and
 * multiplied a chunk of rows at a time: xs_bytes >= 2 x kd; unused otherwise). With
 * 16-bit weights and m <= CZ__CUDA_GEMV_MAX_M, x stays float32 (a GEMV kernel). */
#define CZ__CUDA_GEMV_MAX_M 8u
void cz__cuda_gemm(cz__kcuda *c, float *out, const float *x, const void *w, cz_dtype dt,
                   const float *bias, uint32_t m, uint32_t n, uint32_t kd, void *xs,
                   size_t xs_bytes);

/* Split-KV for attn_paged (attn_paged.cu, flash-decoding): the partitions each work item
 * (a sequence's query rows x a KV head's group of query heads) splits its keys into, from
 * what the host knows: `max_ctx` bounds the keys a query keeps (max_blocks x
 * block_tokens, or window + sinks), `n_items` the work items without a split (n_seqs x
 * KV heads x head chunks), `sms` the SMs the stream runs on (0 counts as 1). 1 when the
 * items already give every SM 4, or max_ctx is under 1024; otherwise enough partitions
 * for 4 items per SM, ceil(4 x sms / n_items), but no more than keep each at least 512
 * keys (max_ctx / 512) and at most 256. Pure. */
uint32_t cz__attn_partitions(uint32_t max_ctx, uint32_t n_items, uint32_t sms);

void cz_cuda_embed(cz_kctx *k, float *out, const void *table, cz_dtype dt, const int32_t *ids,
                   uint32_t n, uint32_t dim);
void cz_cuda_rmsnorm(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                     uint32_t rows, uint32_t dim);
void cz_cuda_layernorm(cz_kctx *k, float *out, const float *x, const float *w, const float *b,
                       float eps, uint32_t rows, uint32_t dim);
void cz_cuda_matmul(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                    const float *bias, uint32_t m, uint32_t n, uint32_t kd);
void cz_cuda_rope(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos, const float *inv_freq,
                  uint32_t n, uint32_t heads, uint32_t head_dim);
void cz_cuda_silu_mul(cz_kctx *k, float *out, const float *gu, uint32_t n, uint32_t inter);
void cz_cuda_gelu(cz_kctx *k, float *x, size_t n);
void cz_cuda_silu(cz_kctx *k, float *x, size_t n);
void cz_cuda_add(cz_kctx *k, float *out, const float *a, const float *b, size_t n);
void cz_cuda_transpose(cz_kctx *k, float *out, const float *x, uint32_t rows, uint32_t cols);
void cz_cuda_gather_rows(cz_kctx *k, float *out, const float *x, const int32_t *idx, uint32_t n,
                         uint32_t dim);
void cz_cuda_kv_write(cz_kctx *k, const cz_kv_layer *kv, const float *knew, const float *vnew,
                      uint32_t ld, const int64_t *slots, uint32_t n);
void cz_cuda_attn_paged(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                        const cz_kv_layer *kv, const int32_t *qsl, const int32_t *seq_lens,
                        const int32_t *block_table, uint32_t max_blocks, uint32_t n_seqs,
                        uint32_t heads, float scale, uint32_t window, uint32_t sinks);
void cz_cuda_attn_dense(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                        const float *kk, const float *v, uint32_t ld_kv, const int32_t *cu,
                        uint32_t n_seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                        float scale, bool causal, uint32_t window);
void cz_cuda_copy_blocks(cz_kctx *k, void *dst, size_t dst_stride, const int32_t *dst_ids,
                         const void *src, size_t src_stride, const int32_t *src_ids,
                         size_t block_bytes, uint32_t n);
void cz_cuda_moe_ffn(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                     uint32_t n);
void cz_cuda_conv1d(cz_kctx *k, float *out, const float *x, const float *w, const float *bias,
                    uint32_t cin, uint32_t cout, uint32_t len, uint32_t ksize, uint32_t stride,
                    uint32_t dilation, uint32_t pad_l, uint32_t pad_r, uint32_t groups);
void cz_cuda_conv_transpose1d(cz_kctx *k, float *out, const float *x, const float *w,
                              const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                              uint32_t ksize, uint32_t stride, uint32_t pad_l, uint32_t pad_r);
void cz_cuda_argmax(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                    uint32_t vocab);
void cz_cuda_sample(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                    uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                    uint64_t seed, const uint64_t *counter);

#ifdef __cplusplus
}
#endif

#endif
