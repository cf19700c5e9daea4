/* cz_kernels_cpu.h - internals of the CPU backend shared inside kernels/: the context
 * (thread pool and scratch), the parallel-for every op runs on, the 4-lane vector types
 * the inner loops are written in (GCC/clang vector extensions: SSE2 on x86-64 with the
 * default flags, scalar code elsewhere), and the `cz_cpu_<op>` functions of the table. */
#ifndef CZ_KERNELS_CPU_H
#define CZ_KERNELS_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cz_kctx_int.h"

typedef float cz__v4f __attribute__((vector_size(16)));
typedef uint32_t cz__v4u __attribute__((vector_size(16)));
typedef int32_t cz__v4i __attribute__((vector_size(16)));
typedef uint16_t cz__v8h __attribute__((vector_size(16)));

/* Attention tiles: at most CZ__ATT_QT (query row, head) pairs share one pass over a
 * sequence's keys, which are read CZ__ATT_KT at a time. */
#define CZ__ATT_QT 64u
#define CZ__ATT_KT 64u
/* The shared float32 panel: conv's im2col tiles and transposed conv's columns (floats;
 * 4 MiB). */
#define CZ__PANEL_FLOATS (1u << 20)
/* Each thread's float32 GEMM panel: bf16/f16 weights widened for sgemm (floats; 4 MiB). */
#define CZ__TPANEL_FLOATS (1u << 20)

/* A range [begin, end) of a parallel loop, run by thread `tid` (0 is the caller). */
typedef void (*cz__kfn)(void *arg, size_t begin, size_t end, uint32_t tid);

/* Scratch of one thread. */
typedef struct cz__kthread {
    /* attention tile, sized at creation */
    float *q;       /* (CZ__ATT_QT, CZ_KMAX_HEAD_DIM) queries, pre-scaled */
    float *acc;     /* (CZ__ATT_QT, CZ_KMAX_HEAD_DIM) unnormalised outputs */
    float *m, *l;   /* (CZ__ATT_QT) running max and sum of the online softmax */
    float *s;       /* (CZ__ATT_QT, CZ__ATT_KT) scores of one key chunk */
    float *kw, *vw; /* (CZ__ATT_KT, CZ_KMAX_HEAD_DIM) a key chunk widened to float32 */
    float *panel;   /* (CZ__TPANEL_FLOATS) rows of a 16-bit weight widened for sgemm */
    /* a vocabulary row for sampling, sized by the reserve's max_dim */
    float *row;     /* (max_dim) */
    int32_t *idx;   /* (max_dim) */
} cz__kthread;

struct cz_kctx {
    cz__khead h;               /* first: ops, the CPU backend table, threads */
    uint32_t threads;
    bool avx2;                 /* the CPU has AVX2 and FMA: attention, the decode GEMV and
                                  bf16 widening use them */
    pthread_t *workers;        /* (threads - 1) */
    struct cz__kworker *wargs; /* (threads - 1) */
    uint32_t started;          /* workers running */

    /* the job now running; written by the caller before `gen` moves */
    cz__kfn fn;
    void *arg;
    size_t n, chunk;
    uint32_t used;             /* threads that share a static job */
    bool dynamic;              /* chunks taken from `next` instead of a static split */
    atomic_size_t next;
    atomic_uint gen;           /* job generation: a worker runs each one once */
    atomic_uint pending;       /* workers that have not finished the job */
    atomic_uint sleepers;      /* workers blocked on `wake` */
    atomic_bool caller_sleeping;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;

    /* scratch */
    cz_kreserve res;           /* what the scratch serves */
    cz__kthread *ts;           /* (threads) */
    float *panel;              /* (CZ__PANEL_FLOATS) */
    int32_t *plan;             /* (max_rows, 4) attention tiles: sequence, first and end
                                  row, first work item */
    /* MoE routing and expert buffers (max_experts > 0) */
    float *moe_logits;         /* (max_rows, max_experts) router probabilities */
    int32_t *moe_ids;          /* (max_rows, max_experts) chosen experts per token */
    float *moe_w;              /* (max_rows, max_experts) their weights */
    int32_t *moe_count;        /* (max_experts + 1) tokens per expert, then offsets */
    int32_t *moe_tok;          /* (max_rows x max_experts) tokens grouped by expert */
    float *moe_tokw;           /* (max_rows x max_experts) their routing weights */
    float *moe_x, *moe_gu, *moe_act, *moe_y; /* (max_rows, max_moe_dim) each */
};

/* Whether the context may use AVX2 and FMA where it has code for them (set at creation
 * from the CPU; false forces the portable code, which the tests check too). Setting true
 * on a CPU without them is a caller bug (asserted). */
void cz__kctx_cpu_set_avx2(cz_kctx *k, bool on);

/* Runs fn over [0, n) split into contiguous ranges, one per thread, each a multiple of
 * `grain` items (the last may be short); fewer threads share it when n < 2 x min_items
 * (then the caller runs it alone). Returns when every range has run. Each output element
 * must depend only on its own item, so the result is the same for every split. */
void cz__kpar(cz_kctx *k, size_t n, size_t grain, size_t min_items, cz__kfn fn, void *arg);
/* Runs fn over [0, n) in chunks of `chunk` items handed out to the threads as they come
 * free (uneven work: attention tiles). */
void cz__kpar_dyn(cz_kctx *k, size_t n, size_t chunk, cz__kfn fn, void *arg);

/* Widens n elements of dtype dt to float32 / narrows float32 to dt (round to nearest
 * even). */
void cz__widen(float *dst, const void *src, cz_dtype dt, size_t n);
/* cz__widen, bfloat16 eight lanes at a time in AVX2 when avx2 (cz_kctx.avx2); the same
 * values. */
void cz__widen_fast(float *dst, const void *src, cz_dtype dt, size_t n, bool avx2);
void cz__narrow(void *dst, const float *src, cz_dtype dt, size_t n);
/* Row-major C (m, n) = op(A) . op(B) + beta x C with op(A) (m, kd), op(B) (kd, n) (ta,
 * tb: the operand is stored transposed), on the calling thread's OpenBLAS (cz_blas.c). */
void cz__sgemm(bool ta, bool tb, uint32_t m, uint32_t n, uint32_t kd, const float *a,
               uint32_t lda, const float *b, uint32_t ldb, float beta, float *c, uint32_t ldc);
/* Sum of a[i] x b[i] (4-lane partial sums). */
float cz__dot(const float *a, const float *b, uint32_t n);
/* y[i] += a x x[i]. */
void cz__axpy(float *y, float a, const float *x, uint32_t n);

/* The ops of the table (contracts in cz_kernels.h). */
void cz_cpu_embed(cz_kctx *k, float *out, const void *table, cz_dtype dt, const int32_t *ids,
                  uint32_t n, uint32_t dim);
void cz_cpu_rmsnorm(cz_kctx *k, float *out, const float *x, const float *w, float eps,
                    uint32_t rows, uint32_t dim);
void cz_cpu_layernorm(cz_kctx *k, float *out, const float *x, const float *w, const float *b,
                      float eps, uint32_t rows, uint32_t dim);
void cz_cpu_matmul(cz_kctx *k, float *out, const float *x, const void *w, cz_dtype dt,
                   const float *bias, uint32_t m, uint32_t n, uint32_t kd);
void cz_cpu_rope(cz_kctx *k, float *x, uint32_t ld, const int32_t *pos, const float *inv_freq,
                 uint32_t n, uint32_t heads, uint32_t head_dim);
void cz_cpu_silu_mul(cz_kctx *k, float *out, const float *gu, uint32_t n, uint32_t inter);
void cz_cpu_gelu(cz_kctx *k, float *x, size_t n);
void cz_cpu_silu(cz_kctx *k, float *x, size_t n);
void cz_cpu_add(cz_kctx *k, float *out, const float *a, const float *b, size_t n);
void cz_cpu_transpose(cz_kctx *k, float *out, const float *x, uint32_t rows, uint32_t cols);
void cz_cpu_gather_rows(cz_kctx *k, float *out, const float *x, const int32_t *idx, uint32_t n,
                        uint32_t dim);
void cz_cpu_kv_write(cz_kctx *k, const cz_kv_layer *kv, const float *knew, const float *vnew,
                     uint32_t ld, const int64_t *slots, uint32_t n);
void cz_cpu_attn_paged(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const cz_kv_layer *kv, const int32_t *qsl, const int32_t *seq_lens,
                       const int32_t *block_table, uint32_t max_blocks, uint32_t n_seqs,
                       uint32_t heads, float scale, uint32_t window, uint32_t sinks);
void cz_cpu_attn_dense(cz_kctx *k, float *out, uint32_t ld_o, const float *q, uint32_t ld_q,
                       const float *kk, const float *v, uint32_t ld_kv, const int32_t *cu,
                       uint32_t n_seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_dim,
                       float scale, bool causal, uint32_t window);
void cz_cpu_copy_blocks(cz_kctx *k, void *dst, size_t dst_stride, const int32_t *dst_ids,
                        const void *src, size_t src_stride, const int32_t *src_ids,
                        size_t block_bytes, uint32_t n);
void cz_cpu_moe_ffn(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                    uint32_t n);
void cz_cpu_conv1d(cz_kctx *k, float *out, const float *x, const float *w, const float *bias,
                   uint32_t cin, uint32_t cout, uint32_t len, uint32_t ksize, uint32_t stride,
                   uint32_t dilation, uint32_t pad_l, uint32_t pad_r, uint32_t groups);
void cz_cpu_conv_transpose1d(cz_kctx *k, float *out, const float *x, const float *w,
                             const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                             uint32_t ksize, uint32_t stride, uint32_t pad_l, uint32_t pad_r);
void cz_cpu_argmax(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                   uint32_t vocab);
void cz_cpu_sample(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                   uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                   uint64_t seed, const uint64_t *counter);

/* Attention over one tile of queries (cz_attn.c, shared by attn_paged and attn_dense):
 * nq = rows x heads queries, query (r, h) at position pos[r]; keys come in chunks. The
 * tile's heads are consecutive query heads, the first `hoff` heads into its KV head's
 * group of `group`; a chunk's rows hold the KV heads they read side by side, query head h
 * reading the one (hoff + h) / group heads along. */
typedef struct cz__attn_tile {
    cz__kthread *t;        /* whose q, acc, m, l, s hold the tile */
    uint32_t rows, heads, hd;
    uint32_t group, hoff;
    const int64_t *pos;    /* (rows) */
    bool causal;
    uint32_t window, sinks;
    bool avx2;             /* the inner loops in AVX2 and FMA (cz_kctx.avx2) */
} cz__attn_tile;
/* Loads the tile's queries: query (r, h) from q + r * ld_q + h * hd, times scale. */
void cz__attn_begin(cz__attn_tile *a, const float *q, size_t ld_q, float scale);
/* Folds keys t0 .. t0 + nt - 1 (nt <= CZ__ATT_KT) into the tile: key i's row k + i * ld,
 * value row v + i * ld (float32; query head h's KV head at (hoff + h) / group x hd along
 * the row). Only keys kept for a query count for it. */
void cz__attn_chunk(cz__attn_tile *a, const float *kc, const float *vc, size_t ld, int64_t t0,
                    uint32_t nt);
/* Writes query (r, h)'s output to out + r * ld_o + h * hd. */
void cz__attn_end(cz__attn_tile *a, float *out, size_t ld_o);

#endif
