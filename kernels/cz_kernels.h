/* cz_kernels.h - the engine's compute kernels, one table of functions per backend.
 *
 * Every op is a plain-C function of the CPU backend (kernels/<op>.c, `cz_cpu_<op>`) whose
 * CUDA twin (kernels/<op>.cu, `cz_cuda_<op>`) has the same signature; a backend is the
 * table `cz_kernels` of them, reached through the context it runs on (`cz_kctx`), so the
 * model code (engine/) is written once for both. The CPU backend is the reference the CUDA
 * one is tested against (ggml's test-backend-ops: normalized mean squared error per op).
 *
 * Conventions (llm.c's): tensors are row-major, their shapes given in comments as
 * (dim0, dim1, ...); activations are float32; weights are float32, bfloat16 or float16
 * (`cz_dtype`), a Hugging Face Linear's weight being (out, in). Pointers are the
 * backend's memory (host memory for the CPU, device memory for CUDA), allocated with
 * cz_kmem_alloc. A `ld` is a row stride in elements, for operands that are column ranges
 * of a wider row (q, k and v inside one fused projection). Output buffers never alias
 * inputs unless the contract says so.
 *
 * Ops run on the context's thread pool (CPU) or stream (CUDA) and are synchronous on the
 * CPU. They allocate nothing per call once the context has seen the largest shapes
 * (`cz_kctx_reserve`); shapes beyond the reserve are caller bugs (asserted). Results are
 * deterministic for a given context (thread count) and inputs. */
#ifndef CZ_KERNELS_H
#define CZ_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cz_dtype {
    CZ_F32 = 0,
    CZ_BF16,
    CZ_F16
} cz_dtype;

/* Bytes per element. */
size_t cz_dtype_size(cz_dtype dt);
/* "F32", "BF16", "F16" (the safetensors spelling). Never NULL. */
const char *cz_dtype_name(cz_dtype dt);
/* Conversions, round to nearest even (NaN kept a NaN). */
float cz_bf16_to_f32(uint16_t h);
uint16_t cz_f32_to_bf16(float f);
float cz_f16_to_f32(uint16_t h);
uint16_t cz_f32_to_f16(float f);

/* One layer's view of a paged KV cache (vLLM's layout per block: (block_tokens, kv_heads,
 * head_dim) for K and the same for V). Block b's K rows for this layer start at
 * k + b * block_stride elements, its V rows at v + b * block_stride; a pool laid out block
 * by block over all layers (so one block's KV is one contiguous range, one copy to host
 * memory) and a pool laid out layer by layer are both views of this kind. */
typedef struct cz_kv_layer {
    void *k, *v;
    cz_dtype dt;              /* F32, BF16 or F16 */
    size_t block_stride;      /* elements between consecutive blocks */
    uint32_t block_tokens, kv_heads, head_dim;
} cz_kv_layer;

/* The experts of one MoE layer (Qwen2-MoE / Qwen3-MoE). */
typedef struct cz_moe_weights {
    uint32_t experts, top_k;
    uint32_t hidden, inter;       /* per expert: (hidden -> inter) gate and up, inter -> hidden */
    bool norm_topk_prob;          /* renormalise the top-k routing weights to sum to 1 */
    cz_dtype dt;                  /* of every weight below */
    const void *router;           /* (experts, hidden) */
    const void *gate_up;          /* (experts, 2 * inter, hidden): gate rows, then up rows */
    const void *down;             /* (experts, hidden, inter) */
    uint32_t shared_inter;        /* a shared expert (0: none): gate_up (2 * shared_inter, */
    const void *shared_gate_up;   /* hidden), down (hidden, shared_inter), and its sigmoid */
    const void *shared_down;      /* gate (1, hidden) */
    const void *shared_gate;
} cz_moe_weights;

typedef struct cz_kctx cz_kctx;

/* The ops of one backend. Each field's comment is the op's contract. */
typedef struct cz_kernels {
    const char *name; /* "cpu", "cuda" */

    /* out (n, dim) = table[ids[i]] widened to float32; table (vocab, dim). Every id must be
     * below vocab (asserted by the caller, who knows vocab). */
    void (*embed)(cz_kctx *k, float *out, const void *table, cz_dtype dt, const int32_t *ids,
                  uint32_t n, uint32_t dim);

    /* RMSNorm over rows: out (rows, dim) = x / sqrt(mean(x^2) + eps) * w, w (dim) float32.
     * out may equal x. Qwen3's q/k norms are rows = tokens x heads, dim = head_dim. */
    void (*rmsnorm)(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                    uint32_t rows, uint32_t dim);

    /* LayerNorm over rows: out = (x - mean) / sqrt(var + eps) * w + b; w, b (dim) float32
     * (b may be NULL). out may equal x. */
    void (*layernorm)(cz_kctx *k, float *out, const float *x, const float *w, const float *b,
                      float eps, uint32_t rows, uint32_t dim);

    /* out (m, n) = x (m, kd) . w^T + bias, w (n, kd) of dtype dt, bias (n) float32 or NULL.
     * Float32 weights go to OpenBLAS's sgemm; bf16 and f16 weights are widened (Debian's
     * OpenBLAS has no bf16 GEMM). */
    void (*matmul)(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                   const float *bias, uint32_t m, uint32_t n, uint32_t kd);

    /* Rotary embedding in place, Hugging Face's rotate-half layout: for each row i and
     * head h, the pairs (x[j], x[j + d/2]) of x + i * ld + h * head_dim rotate by
     * pos[i] * inv_freq[j], j < head_dim / 2. inv_freq (head_dim / 2) carries the theta
     * and any Llama-3 scaling. */
    void (*rope)(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos,
                 const float *inv_freq, uint32_t n, uint32_t heads, uint32_t head_dim);

    /* SwiGLU: out (n, inter) = silu(gu[:, :inter]) * gu[:, inter:], gu (n, 2 * inter). */
    void (*silu_mul)(cz_kctx *k, float *out, const float *gu, uint32_t n, uint32_t inter);

    /* GELU (erf form) in place over n elements. */
    void (*gelu)(cz_kctx *k, float *x, size_t n);

    /* SiLU in place over n elements. */
    void (*silu)(cz_kctx *k, float *x, size_t n);

    /* out = a + b over n elements; out may equal a or b. */
    void (*add)(cz_kctx *k, float *out, const float *a, const float *b, size_t n);

    /* out (cols, rows) = x (rows, cols) transposed. */
    void (*transpose)(cz_kctx *k, float *out, const float *x, uint32_t rows, uint32_t cols);

    /* out (n, dim) = x[idx[i]] (rows of x (*, dim)). */
    void (*gather_rows)(cz_kctx *k, float *out, const float *x, const int32_t *idx,
                        uint32_t n, uint32_t dim);

    /* Writes the step's new K and V rows into the paged cache: token i's rows k + i * ld
     * and v + i * ld, each (kv_heads, head_dim), go to slot slots[i] = block * block_tokens
     * + offset (converted to the cache's dtype); a negative slot is skipped. */
    void (*kv_write)(cz_kctx *k, const cz_kv_layer *kv, const float *knew, const float *vnew,
                     uint32_t ld, const int64_t *slots, uint32_t n);

    /* Paged attention over a varlen batch (vLLM V1): sequence b owns query rows
     * [qsl[b], qsl[b+1]) of q (rows, heads, head_dim; row stride ld_q), the last of its
     * seq_lens[b] positions (its new tokens, already written to the cache), so query row
     * i of it sits at position seq_lens[b] - (qsl[b+1] - qsl[b]) + (i - qsl[b]). Its
     * logical block j is physical block block_table[b * max_blocks + j]. A query at
     * position p attends causally to the positions t <= p that are kept: all of them when
     * window is 0, else t > p - window or t < sinks (Metronome's window with attention
     * sinks); blocks holding no kept position may be -1 in the table and are not read.
     * GQA: query head h reads KV head h / (heads / kv_heads). out (rows, heads, head_dim),
     * row stride ld_o; softmax(q.k * scale). A decode is a sequence with one query row. */
    void (*attn_paged)(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const cz_kv_layer *kv, const int32_t *qsl, const int32_t *seq_lens,
                       const int32_t *block_table, uint32_t max_blocks, uint32_t n_seqs,
                       uint32_t heads, float scale, uint32_t window, uint32_t sinks);

    /* Attention without a cache over a varlen batch: sequence b is rows [cu[b], cu[b+1])
     * of q (rows, heads, head_dim), k and v (rows, kv_heads, head_dim), row strides ld_q
     * and ld_kv. Bidirectional (causal false: encoders) or causal, optionally within a
     * window of `window` positions (0: none; a vocoder's sliding-window transformer):
     * query i of a sequence attends to its keys j with i - window < j <= i when causal,
     * |i - j| < window when not. out (rows, heads, head_dim), row stride ld_o. */
    void (*attn_dense)(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const float *kk, const float *v, uint32_t ld_kv, const int32_t *cu,
                       uint32_t n_seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                       float scale, bool causal, uint32_t window);

    /* Copies n whole blocks of `block_bytes` each: block src_ids[i] of src (blocks
     * `src_stride` bytes apart) to block dst_ids[i] of dst (`dst_stride` bytes apart); a
     * NULL id array means 0, 1, ..., n - 1 (a packed host buffer). Moves KV between the
     * pool and host memory (offload, reload) and inside the pool. */
    void (*copy_blocks)(cz_kctx *k, void *dst, size_t dst_stride, const int32_t *dst_ids,
                        const void *src, size_t src_stride, const int32_t *src_ids,
                        size_t block_bytes, uint32_t n);

    /* A mixture-of-experts feed-forward layer: out (n, hidden) = sum over the top_k
     * experts e of softmax(router . x) (renormalised when norm_topk_prob) x
     * down_e(silu(gate_e x) * up_e x), plus, with a shared expert,
     * sigmoid(shared_gate . x) x shared(x). Experts with equal router logits rank by
     * id, the lower first. out must not alias x. */
    void (*moe_ffn)(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                    uint32_t n);

    /* 1-D convolution of one sequence, channels first: out (cout, lout) from x (cin, len),
     * w (cout, cin / groups, ksize) float32, bias (cout) or NULL; x is padded with pad_l
     * zeros on the left and pad_r on the right; lout = (len + pad_l + pad_r - dilation x
     * (ksize - 1) - 1) / stride + 1. groups divides cin and cout (cin = cout = groups is a
     * depthwise convolution). */
    void (*conv1d)(cz_kctx *k, float *out, const float *x, const float *w, const float *bias,
                   uint32_t cin, uint32_t cout, uint32_t len, uint32_t ksize, uint32_t stride,
                   uint32_t dilation, uint32_t pad_l, uint32_t pad_r, uint32_t groups);

    /* Transposed 1-D convolution of one sequence (PyTorch's ConvTranspose1d, no output
     * padding): out (cout, (len - 1) x stride + ksize - pad_l - pad_r) from x (cin, len),
     * w (cin, cout, ksize) float32, bias (cout) or NULL; the first pad_l and last pad_r
     * output positions of the full result are cut. */
    void (*conv_transpose1d)(cz_kctx *k, float *out, const float *x, const float *w,
                             const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                             uint32_t ksize, uint32_t stride, uint32_t pad_l, uint32_t pad_r);

    /* ids[b] = argmax of logits row b (rows, vocab); ties go to the lowest id. A row holding
     * NaN or +inf gives -1, here and in sample (-inf is a masked id, not an error): the
     * caller stops with its message rather than read an id out of it. */
    void (*argmax)(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                   uint32_t vocab);

    /* Samples ids[b] from softmax(logits row b / temperature) restricted to the top_k most
     * likely ids (0: all) and then to the smallest set of them whose probability,
     * renormalised over the top_k, reaches top_p (1: all; Hugging Face's order of the two
     * warpers); "most likely" orders by probability, ties to the lower id. The kept ids
     * are then walked in increasing id order and the first whose cumulative probability
     * exceeds u x (their total) is drawn, u = cz_kernel_uniform(seed, counter[b]), so both
     * backends sample the same id (up to float rounding at the boundaries). temperature 0
     * is argmax. logits are not modified; vocab is at most the reserve's max_dim. -1 for
     * a row holding NaN or +inf. */
    void (*sample)(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                   uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                   uint64_t seed, const uint64_t *counter);
} cz_kernels;

/* The counter-based uniform draw in [0, 1) both backends use for sampling: with mix()
 * SplitMix64's finalizer and g = 0x9E3779B97F4A7C15, x = mix(mix(seed + g) + g x
 * (counter + 1)) and u = (x >> 40) x 2^-24 (24 bits of mantissa). Pure. */
float cz_kernel_uniform(uint64_t seed, uint64_t counter);

/* The CPU backend's table. */
const cz_kernels *cz_kernels_cpu(void);

/* Largest shapes a context must serve without allocating (the engine reserves once, at
 * load). */
typedef struct cz_kreserve {
    uint32_t max_rows;     /* query rows (tokens) in one call */
    uint32_t max_ctx;      /* positions one query attends over */
    uint32_t max_heads;    /* query heads */
    uint32_t max_dim;      /* widest row (hidden, 2 x intermediate, vocab, conv length) */
    uint32_t max_experts;  /* routed experts of a MoE layer (0: no MoE layer) */
    uint32_t max_moe_dim;  /* widest row inside a MoE layer: max(hidden, 2 x inter,
                              2 x shared_inter) (0: max_dim) */
} cz_kreserve;

/* Widest head rope, attn_paged and attn_dense serve (their per-thread tiles are sized at
 * creation; a wider head is asserted). */
#define CZ_KMAX_HEAD_DIM 512u

/* A CPU context running ops on `threads` threads (>= 1: the calling thread and threads - 1
 * workers, created here, once). The pool splits each op's work (a GEMM's output columns)
 * and each thread calls OpenBLAS on its own share, so OpenBLAS runs with one thread (its
 * thread server off, a process-wide setting) and never competes with the pool for the
 * cores. Each thread gets 4 MiB of scratch (GEMM panels, attention tiles, sampling
 * candidates); cz_kctx_reserve grows it. Fails with CZ_EINVAL on threads == 0 or a thread
 * that cannot start, CZ_ENOTFOUND when OpenBLAS cannot be loaded, CZ_ENOMEM when its
 * buffers do not fit (cz_blas_reserve). */
cz_status cz_kctx_cpu_create(uint32_t threads, cz_kctx **out, cz_err *err);
/* Loads OpenBLAS (once per process; later calls return the first's answer): dlopen with
 * OPENBLAS_NUM_THREADS=1 set before its constructor, so it starts no worker threads (they
 * would spin beside every run, and for ever on their buffers under an address-space
 * limit); nothing before a CPU context touches it, so a simulation never loads it.
 * CZ_ENOTFOUND naming the library when it is missing. cz_kctx_cpu_create calls it. */
cz_status cz_blas_load(cz_err *err);
/* Makes sure OpenBLAS's buffer pool holds `buffers` GEMM buffers (one per thread that may
 * run a GEMM at once), made now while memory is checked to be there: OpenBLAS allocates a
 * buffer at a thread's first GEMM and, when that fails, retries for ever (a hang under an
 * address-space limit). CZ_ENOMEM, saying so, when they do not fit. cz_kctx_cpu_create
 * calls it. */
cz_status cz_blas_reserve(uint32_t buffers, cz_err *err);
/* The number of online CPUs (at least 1): the default thread count. */
uint32_t cz_kctx_cpu_default_threads(void);

/* Whether this build has the CUDA backend (meson -Dcuda; kernels/<op>.cu). The CUDA
 * functions below open its module, libcz_cuda.so, on first use (kernels/cz_kcuda_load.c;
 * docs/install.md): $CZ_CUDA_MODULE when set, else the one installed beside the running
 * program (<libdir>/cadenza/, found from its folder), else the build tree's. None found, or
 * one that does not load, is CZ_EDEVICE naming the paths tried; failures a loaded module
 * reports end with "; CUDA module <path>". */
bool cz_kernels_cuda_built(void);
/* A CUDA context on device `device` (kernels/cz_kctx_cuda.cu): a compute stream for the
 * ops, a copy stream for cz_kmem_copy_async, a cuBLAS handle on the compute stream.
 * `sm_count` 0 runs on the whole device; otherwise the context's streams run on a green
 * context of that many SMs (rounded to what the device can honour, cz_kcuda_sm_split;
 * *sm_got, when not NULL, receives the count granted, the whole device's for 0).
 * CZ_EDEVICE naming the cause when the build has no CUDA, no device is present, or a
 * runtime call fails; CZ_EINVAL for a device index out of range. */
cz_status cz_kctx_cuda_create(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                              cz_err *err);
/* Two contexts on disjoint SM partitions of device `device`, from one split: `part` on
 * `sm_count` SMs rounded as cz_kcuda_sm_round (cz_kctx_sms says what it got), `rest` on
 * the others; both see the device's memory. CZ_EINVAL when the device is too small to
 * split there; CZ_EDEVICE as cz_kctx_cuda_create. */
cz_status cz_kctx_cuda_split(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                             cz_err *err);
/* The SMs a CUDA context runs on (0 for a CPU context). */
uint32_t cz_kctx_sms(const cz_kctx *k);
/* The number of CUDA devices (0 without a driver, a device or the CUDA build); `why`
 * (may be NULL, CZ_ERR_MSG_MAX bytes) receives the reason when 0. */
int cz_kcuda_device_count(char *why);

/* What a CUDA device is. */
typedef struct cz_kcuda_info {
    char name[256];
    int major, minor;        /* compute capability */
    uint32_t sms;
    size_t mem_bytes;
    double peak_Bps;         /* DRAM peak: 2 x memory clock x bus width */
} cz_kcuda_info;
/* Describes device `device`; CZ_EDEVICE without the CUDA build or the device. */
cz_status cz_kcuda_device_info(int device, cz_kcuda_info *out, cz_err *err);
/* The SM resources of CUDA device `device` (cuDeviceGetDevResource): its SM count, the
 * smallest partition a green context may have and the partitions' granularity.
 * CZ_EDEVICE without the CUDA build, a device, or a driver with green contexts. */
cz_status cz_kcuda_sm_info(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                           cz_err *err);
/* The SM partition a green context can have when `want` SMs are asked for on a device of
 * `total` SMs whose partitions are at least `min_sms` and a multiple of `step`
 * (cuDevSmResourceSplitByCount's rules, queried from the device: 8 and 8 on sm_90):
 * `want` rounded to the nearest multiple of `step` (ties up), then clamped to
 * [min_sms rounded up to step, total - that], so the SMs left over form a partition too;
 * `total` itself when want >= total or the device is too small to split. Pure. */
uint32_t cz_kcuda_sm_round(uint32_t want, uint32_t total, uint32_t min_sms, uint32_t step);

/* Grows the context's scratch to serve shapes up to *r (idempotent; the only place ops'
 * scratch is allocated). */
void cz_kctx_reserve(cz_kctx *k, const cz_kreserve *r);
void cz_kctx_free(cz_kctx *k);
/* Its backend's ops. */
const cz_kernels *cz_kctx_ops(const cz_kctx *k);
/* Makes the context current on the calling thread (CUDA: its device); a thread calls it
 * before its first op or copy on the context (a no-op on the CPU). */
void cz_kctx_bind(cz_kctx *k);
/* Host threads the context computes with (the CPU pool's size; 1 for CUDA). */
uint32_t cz_kctx_threads(const cz_kctx *k);

/* Backend memory: aligned to 64 bytes at least (256 on CUDA); NULL never (out of memory
 * exits like cz_xmalloc, naming the backend). Upload and download copy between host memory
 * and the backend's, synchronously; on the CPU both are memcpy. cz_kctx_sync waits for
 * every op issued (a no-op on the CPU). */
void *cz_kmem_alloc(cz_kctx *k, size_t bytes);
void cz_kmem_free(cz_kctx *k, void *p);
void cz_kmem_upload(cz_kctx *k, void *dst, const void *src, size_t bytes);
void cz_kmem_download(cz_kctx *k, void *dst, const void *src, size_t bytes);
void cz_kctx_sync(cz_kctx *k);

/* Host memory the backend copies to and from at full speed (pinned on CUDA, plain
 * aligned memory on the CPU), for the KV offload tier. NULL never, like cz_kmem_alloc. */
void *cz_kmem_host_alloc(cz_kctx *k, size_t bytes);
void cz_kmem_host_free(cz_kctx *k, void *p);
/* Queues a copy between backend memory and host memory from cz_kmem_host_alloc
 * (to_host: dst is the host side) on the context's copy stream, which runs beside the
 * ops (on the CPU: copies at once). cz_kmem_copy_wait waits for every copy queued. Both
 * may be called from a thread other than the one issuing ops (the engine's copy thread),
 * but copies are queued from one thread at a time. */
void cz_kmem_copy_async(cz_kctx *k, void *dst, const void *src, size_t bytes, bool to_host);
void cz_kmem_copy_wait(cz_kctx *k);

/* The first failure any op, copy or sync of the context met since creation (CUDA errors
 * are sticky: ops return nothing, so they record it with the call, file and line), as a
 * status with its message in `err`; CZ_OK when none. Always CZ_OK on the CPU. */
cz_status cz_kctx_status(const cz_kctx *k, cz_err *err);

#ifdef __cplusplus
}
#endif

#endif
