/* cz_net.h - one stage's network on a kernel backend: the forward passes the engine runs.
 *
 * A net is built from a stage card (models/cz_models.h: dimensions and the optional
 * architecture fields) and a weight source: a Hugging Face checkpoint folder
 * (config.json + model.safetensors or its sharded index; models/cz_safetensors.h,
 * models/cz_hfconfig.h) or weights drawn from a seed, when only the time of the compute
 * matters. Every stage kind of the cards runs as real compute of its shape
 * (docs/models.md): decoders (dense and MoE, over the paged KV pool, cz_kvpool.h),
 * bidirectional encoders, a code predictor run inside each step of its outer stage, and
 * vocoders (a sliding-window causal transformer and upsampling convolutions).
 *
 * The model code is written once against the kernel table (kernels/cz_kernels.h), so the
 * same net runs on every backend. A net allocates its activations once, in
 * cz_net_reserve; the forward passes allocate nothing. A net is used by one thread at a
 * time. */
#ifndef CZ_NET_H
#define CZ_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_kernels.h"
#include "cz_kvpool.h"
#include "cz_models.h"

/* Where the weights come from. */
typedef struct cz_net_source {
    const char *checkpoint; /* a Hugging Face checkpoint folder; NULL: random weights */
    const char *named_by;   /* the flag or field that named the checkpoint ("--model"),
                               prefixed to errors opening it; NULL: none */
    uint64_t seed;          /* random weights: the stream they are drawn from */
    cz_dtype dtype;         /* random weights' element type (checkpoints keep theirs) */
} cz_net_source;

typedef struct cz_net cz_net;

/* Builds the net of `card` on context `k` (weights uploaded to its memory). Random weights
 * are drawn N(0, 1/fan_in) for projections and tables, norms' weights 1, biases 0, so
 * activations keep their scale through any depth; they are a pure function of the seed
 * (docs/models.md, "Engine"). A checkpoint's tensors must match the card's dimensions and
 * be F32, BF16 or F16: errors name the file, the tensor and what was expected (CZ_EINVAL /
 * CZ_ENOTFOUND / CZ_EFORMAT, CZ_EIO when a file cannot be read). Only autoregressive
 * stages load from checkpoints; encoders and vocoders take random weights (src->checkpoint
 * is not read for them). CZ_EINVAL, naming the stage, for a card the forward pass cannot
 * run (an odd head_dim or one above CZ_KMAX_HEAD_DIM, no feed-forward width). On failure
 * nothing is left allocated and *out is untouched. */
cz_status cz_net_create(cz_kctx *k, const cz_stage_card *card, const cz_net_source *src,
                        cz_net **out, cz_err *err);
void cz_net_free(cz_net *n);

/* A net on context `k` that uses the weights of `src` (built by cz_net_create on a context
 * of the same backend that shares memory with k: the CPU, or the same CUDA device, green
 * contexts included), with activations of its own (cz_net_reserve it). It owns no weight:
 * `src` must outlive it. The cross-stage engine runs one model on several partitions of a
 * device this way. */
cz_net *cz_net_share(const cz_net *src, cz_kctx *k);

/* The card it was built from, and the bytes of its weights in backend memory. */
const cz_stage_card *cz_net_card(const cz_net *n);
size_t cz_net_weight_bytes(const cz_net *n);

/* Largest step a net must run without allocating: tokens (rows) in one step, sequences in
 * one step, and the longest context one query attends over (all >= 1). For an encoder the
 * tokens are input frames (of one sequence and of the step), for a vocoder code frames.
 * A decoder reserved with max_ctx at most 64 also gets the dense cache cz_net_inner runs
 * over (an inner stage's reserve: frames per step, frames per step, steps per frame).
 * Idempotent; grows only (a growth reallocates the activations: call it at load, not
 * between steps). Also reserves the context's scratch (cz_kctx_reserve). */
void cz_net_reserve(cz_net *n, uint32_t max_tokens, uint32_t max_seqs, uint32_t max_ctx);

/* One step of a decoder over the paged cache, vLLM V1's flattened varlen batch: sequence b
 * has query rows [qsl[b], qsl[b+1]) (a prefill chunk or one decode token), the last rows of
 * its seq_lens[b] positions. */
typedef struct cz_step_batch {
    uint32_t n_seqs, n_tokens, max_blocks;
    const int32_t *tokens;      /* (n_tokens) input ids, each below the vocabulary */
    const int32_t *positions;   /* (n_tokens) */
    const int32_t *qsl;         /* (n_seqs + 1) query_start_loc */
    const int32_t *seq_lens;    /* (n_seqs) positions after the step */
    const int32_t *block_table; /* (n_seqs, max_blocks); -1 for blocks not held */
    const int64_t *slots;       /* (n_tokens) where each new K/V row goes (-1: dropped) */
    const int32_t *sample_rows; /* (n_samples) rows whose next token is sampled */
    uint32_t n_samples;
    uint32_t window, sinks;     /* windowed attention with sinks (0: none) */
} cz_step_batch;

/* One sampled row's own parameters (a request's; cz_sampling.rows). */
typedef struct cz_row_sampling {
    float temperature;       /* 0: greedy */
    uint32_t top_k;          /* 0: all */
    float top_p;             /* 1: all */
    uint64_t seed;
} cz_row_sampling;

/* How the next token is chosen: temperature 0 is greedy (argmax). With `rows` each sampled
 * row i takes rows[i]'s parameters instead (consecutive rows alike are sampled in one
 * call); counter[i] is row i's draw counter. */
typedef struct cz_sampling {
    float temperature;
    uint32_t top_k;          /* 0: all */
    float top_p;             /* 1: all */
    uint64_t seed;
    const uint64_t *counter; /* (n_samples) per-row draw counters; NULL when greedy */
    const cz_row_sampling *rows; /* (n_samples) per-row parameters, or NULL */
} cz_sampling;

/* Runs step `b` of a decoder stage: embeds, runs every layer (writing the new K/V rows to
 * `kv` at the slots), and samples out_ids[i] for row b->sample_rows[i]. When `logits` is
 * not NULL the sampled rows' logits are copied to it (n_samples, vocab) in host memory.
 * b's arrays and out_ids are host memory, copied to and from the backend once a step.
 * `s` NULL or a temperature of 0 is greedy; the sampled rows go through the LM head
 * max_seqs at a time. The step must fit the reserve (n_tokens <= max_tokens, n_seqs <=
 * max_seqs, n_seqs x max_blocks <= max_seqs x max_ctx) and `kv` be a pool of this stage;
 * token ids at or above the vocabulary and a step beyond the reserve are CZ_ASSERT
 * failures. Allocates nothing. */
void cz_net_decode(cz_net *n, const cz_kv_pool *kv, const cz_step_batch *b,
                   const cz_sampling *s, int32_t *out_ids, float *logits);

/* An encoder step: sequences of lens[0..n_seqs) input frames each (synthetic features
 * drawn from `seed`), encoded bidirectionally. Returns the output tokens produced in all
 * (frames / downsample, per sequence rounded up). Each sequence's frames and the step's
 * tokens must fit max_tokens, n_seqs max_seqs (asserted). Allocates nothing. */
uint64_t cz_net_encode(cz_net *n, const uint32_t *lens, uint32_t n_seqs, uint64_t seed);

/* A vocoder step: sequences of lens[0..n_seqs) code frames each (ids drawn from `seed`),
 * through the sliding-window transformer and the upsampling stack. Returns the samples
 * produced in all (frames x cz_stage_samples_per_token). The step's frames must fit
 * max_tokens, n_seqs max_seqs (asserted). Allocates nothing. */
uint64_t cz_net_vocode(cz_net *n, const uint32_t *lens, uint32_t n_seqs, uint64_t seed);

/* A code predictor (an inner stage): for each of `rows` frames, `steps` sequential decode
 * steps over a context that grows from 1 to steps positions (its own small dense cache),
 * greedy, all rows in one batch a step. Needs a reserve with max_ctx at most 64, rows <=
 * max_seqs and max_tokens, steps <= max_ctx (asserted). Allocates nothing. */
void cz_net_inner(cz_net *n, uint32_t rows, uint32_t steps);

/* Runs forward passes before a timed run (vLLM's warm-up run), so that its first steps
 * find the activations' pages, the caches and the kernel context's threads as every later
 * step does: one pass of up to 256 rows (a decoder: one prefill chunk into `kv`), then the
 * shape most steps have (one decode token; a 16-frame job) until `min_s` seconds passed.
 * A decoder with a paged pool writes K/V rows into the pool's first blocks: call it before
 * the pool holds anything. `kv` is the decoder's pool, NULL for encoders, vocoders and
 * inner nets (reserved as such). Allocates host arrays for its batch (load time). */
void cz_net_warmup(cz_net *n, const cz_kv_pool *kv, double min_s);

/* The seconds each net warms for before a timed run (the engine's and the profiler's). */
#define CZ_NET_WARMUP_S 0.1

#endif
