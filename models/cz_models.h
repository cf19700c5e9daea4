/* cz_models.h - model cards, hardware cards and the roofline cost model.
 *
 * Cards are JSON files in models/cards/ (models) and models/hw/ (hardware), with the
 * dimensions of public model configs and vendor datasheets, each citing its source.
 * The cost model turns the shape of one batch step of one stage into seconds: FLOPs and
 * bytes (weights read once per step, KV read per decode token, activations) against the
 * hardware's peak FLOP/s and HBM bandwidth scaled by efficiency factors, plus a fixed
 * per-step overhead; tensor parallelism splits weights and FLOPs over the degree and adds
 * two all-reduces per layer over the interconnect. See docs/cost-model.md. */
#ifndef CZ_MODELS_H
#define CZ_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"

#define CZ_NAME_MAX 64
#define CZ_MAX_STAGES 8

typedef enum cz_stage_kind {
    CZ_STAGE_AR = 0,     /* autoregressive decoder with a KV cache (thinker, talker, LLM) */
    CZ_STAGE_ENCODER,    /* audio or vision encoder: batchable, no KV */
    CZ_STAGE_VOCODER     /* codec / vocoder / detokenizer invoked per chunk */
} cz_stage_kind;

/* Rotary position embedding's frequency scaling (HF `rope_scaling.rope_type`). */
typedef enum cz_rope_type {
    CZ_ROPE_DEFAULT = 0, /* inv_freq = theta^(-2j / head_dim) */
    CZ_ROPE_LINEAR,      /* inv_freq / factor */
    CZ_ROPE_LLAMA3       /* Llama 3.1's: low frequencies / factor, high kept, smooth between */
} cz_rope_type;

/* Normalisation layers of a stage. */
typedef enum cz_norm_kind {
    CZ_NORM_RMS = 0, /* RMSNorm with a weight (Llama, Qwen) */
    CZ_NORM_LAYER    /* LayerNorm with a weight and a bias (Whisper-style encoders) */
} cz_norm_kind;

/* Feed-forward block of a stage. */
typedef enum cz_act_kind {
    CZ_ACT_SILU = 0, /* gated: down(silu(gate x) * up x) (SwiGLU; every MoE expert) */
    CZ_ACT_GELU      /* plain: fc2(gelu(fc1 x + b1)) + b2, with biases (encoders) */
} cz_act_kind;

/* Most upsampling stages of a vocoder's convolutional decoder. */
#define CZ_UPSAMPLE_MAX 8

/* What the forward pass of a stage needs beyond the roofline's dimensions: the optional
 * architecture fields of a stage card, each with a documented default (docs/models.md), so
 * a card written for the simulator alone still describes a network the engine can build.
 * The cost model reads none of them. */
typedef struct cz_stage_arch {
    double rope_theta;               /* RoPE base (default 10000) */
    cz_rope_type rope_type;          /* default CZ_ROPE_DEFAULT */
    double rope_factor;              /* linear and llama3 scaling factor (1 when none) */
    double rope_low_freq_factor;     /* llama3 (default 1) */
    double rope_high_freq_factor;    /* llama3 (default 4) */
    uint32_t rope_original_max_pos;  /* llama3 original_max_position_embeddings (8192) */
    cz_norm_kind norm;               /* default rms; layer for encoders */
    double norm_eps;                 /* default 1e-6 (rms) / 1e-5 (layer) */
    cz_act_kind act;                 /* default silu; gelu for encoders */
    bool qkv_bias;                   /* q, k and v projections have biases (Qwen2; encoders) */
    bool o_bias;                     /* the output projection has a bias (encoders) */
    bool qk_norm;                    /* RMSNorm per head on q and k before RoPE (Qwen3) */
    uint32_t shared_expert_intermediate; /* MoE: shared expert width, 0 = none; with a
                                      * sigmoid gate (Qwen2-MoE, Qwen3-Omni's talker) */
    bool norm_topk_prob;             /* MoE: renormalise the top-k routing weights (true) */
    /* vocoders */
    uint32_t window;                 /* sliding window of the causal transformer (0: none) */
    uint32_t codebooks;              /* code streams per frame, their embeddings averaged (1) */
    uint32_t codebook_size;          /* entries per codebook (1024) */
    uint32_t n_upsample;             /* upsampling stages of the conv decoder (0) */
    uint32_t upsample_rates[CZ_UPSAMPLE_MAX]; /* samples per input position of each stage */
    uint32_t decoder_dim;            /* conv decoder's input channels, halved by every stage
                                      * (default hidden) */
    /* encoders */
    uint32_t input_dim;              /* features per input frame (mel bins, patch values);
                                      * default hidden */
    uint32_t downsample;             /* input frames per token, folded by a strided conv (1) */
    uint32_t output_dim;             /* output projection width (0: none) */
} cz_stage_arch;

/* One stage of a model pipeline. Transformer dimensions follow the HF config names. */
typedef struct cz_stage_card {
    char name[CZ_NAME_MAX];
    cz_stage_kind kind;
    uint32_t layers;             /* num_hidden_layers */
    uint32_t hidden;             /* hidden_size */
    uint32_t heads;              /* num_attention_heads */
    uint32_t kv_heads;           /* num_key_value_heads */
    uint32_t head_dim;           /* head_dim (hidden / heads when the config omits it) */
    uint32_t intermediate;       /* intermediate_size (dense MLP) */
    uint32_t vocab;              /* vocab_size */
    uint32_t experts;            /* MoE: routed experts (0 = dense) */
    uint32_t experts_active;     /* MoE: experts per token */
    uint32_t expert_intermediate;/* MoE: moe_intermediate_size */
    double params;               /* total parameters (weights read per step derive from it) */
    double active_params;        /* parameters touched per token (= params when dense), counting
                                  * the embedding tables and the LM head in full */
    uint32_t weight_bytes;       /* bytes per weight (2 for bf16) */
    uint32_t kv_bytes;           /* bytes per KV element (2 for bf16) */
    double embed_params;         /* parameters in input lookup tables (no FLOPs): vocab x hidden
                                  * for an AR stage unless the card says otherwise; 0 = none */
    bool tied_embeddings;        /* the LM head shares the embedding table (not counted twice) */
    double flops_per_token;      /* FLOPs per input token or frame when the stage's compute is not
                                  * 2 x its weights (conv vocoders, multi-step flow matching);
                                  * 0 = derive from active_params */
    double nonlayer_params;      /* parameters outside the `layers` repeated layers (lookup
                                  * tables, position tables, patch embedding, final norms,
                                  * adapters): what stays on the GPU when the layers are
                                  * offloaded (Nova section III-E); 0 = none (default) */
    uint32_t passes;             /* sequential forward passes one step makes over its tokens
                                  * (a flow-matching detokenizer's ODE steps), each reading
                                  * the weights and paying the step overhead; 1 = one pass.
                                  * flops_per_token counts every pass */
    uint32_t max_position_embeddings; /* AR stages: the longest context the model was made
                                  * for (its config.json's max_position_embeddings), the
                                  * default server.max_model_len as in vLLM; 0 = not known */
    cz_stage_arch arch;          /* the forward pass's details (optional card fields) */
} cz_stage_card;

/* What a pipeline stage consumes or produces. */
typedef enum cz_pipe_io {
    CZ_IO_NONE = 0,
    CZ_IO_TEXT,  /* the turn's text (thinker) output */
    CZ_IO_AUDIO, /* the turn's audio input (encoders) or audio tokens output (talker, TTS LLM) */
    CZ_IO_IMAGE  /* the turn's image input (vision encoders) */
} cz_pipe_io;

/* One stage of the serving pipeline, in order (docs/pipeline.md). Encoders come first
 * and encode the turn's audio or image input; the first autoregressive stage takes the
 * whole input; a later autoregressive stage is fed by the one before it: it starts with
 * the turn's input embeddings and may produce `out_per_in` tokens per upstream token
 * received, the rest once its upstream finishes (a talker); a vocoder turns every
 * `chunk_tokens` tokens of its upstream into audio, re-reading `overlap_tokens` of left
 * context. */
typedef struct cz_pipe_stage {
    uint32_t stage;           /* index into cz_model_card.stages */
    int32_t from;             /* pipeline index of the feeding stage; -1 for the first */
    uint32_t io;              /* cz_pipe_io: encoders' input, autoregressive stages' output */
    uint32_t chunk_tokens;    /* upstream tokens per hand-off (default 1; vocoders 25) */
    uint32_t overlap_tokens;  /* vocoder left context re-read per call */
    uint32_t prompt_tokens;   /* vocoder: tokens of a reference clip every call re-reads
                                 (zero-shot voice conditioning); 0 none */
    double out_per_in;        /* fed AR stage: tokens it may produce per upstream token (1) */
    double audio_s_per_token; /* vocoder: seconds of audio per input token */
    double sample_rate_hz;    /* vocoder: PCM frames (samples per channel) per second of its
                                 audio (default 24000) */
    int32_t inner;            /* stage run inside every step of this one (a code predictor),
                                 -1 for none */
    uint32_t inner_steps;     /* sequential inner steps per token */
    uint32_t input_tokens;    /* encoder: tokens it encodes per input when the model fixes
                                 them (a fixed-resolution image: patches); 0: the turn's
                                 token count of its modality */
} cz_pipe_stage;

typedef struct cz_model_card {
    char name[CZ_NAME_MAX];
    uint32_t n_stages;
    cz_stage_card stages[CZ_MAX_STAGES];
    uint32_t n_pipe;          /* pipeline; a card without one serves its first AR stage */
    cz_pipe_stage pipe[CZ_MAX_STAGES];
} cz_model_card;

typedef struct cz_hw_card {
    char name[CZ_NAME_MAX];
    uint32_t sms;                /* streaming multiprocessors */
    double hbm_bytes;            /* device memory */
    double hbm_bw_Bps;           /* device memory bandwidth, bytes/s */
    double bf16_flops;           /* dense bf16 tensor FLOP/s (no sparsity) */
    double host_link_Bps;        /* host link bandwidth per direction, bytes/s */
    bool host_link_full_duplex;  /* both directions at once */
    double host_link_latency_s;
    double interconnect_Bps;     /* GPU-to-GPU bandwidth per GPU per direction, bytes/s */
} cz_hw_card;

/* Loads a card by name ("llama-3-8b", "h100-sxm") from the built-in card folder or from a
 * path ending in ".json". The built-in folder is $CZ_CARDS_DIR when that variable is set and
 * not empty, else <source root>/models; model cards are <folder>/cards/<name>.json and
 * hardware cards <folder>/hw/<name>.json, and a card loaded by name must carry that name.
 * Fails with CZ_ENOTFOUND when no such file exists, CZ_EIO / CZ_EFORMAT when it cannot be
 * read or parsed, CZ_EINVAL (message naming the file and field) when a field is wrong.
 * *out is fully written on success and unspecified on failure. */
cz_status cz_model_card_load(const char *name_or_path, cz_model_card *out, cz_err *err);
cz_status cz_hw_card_load(const char *name_or_path, cz_hw_card *out, cz_err *err);
/* Whether a card reference names a file or folder (it holds a '/' or ends in ".json")
 * rather than a built-in card: paths resolve against a config's folder or the working
 * directory, names against the card folder. */
bool cz_card_ref_is_path(const char *ref);

/* The names of the built-in model cards (hardware false) or hardware cards, sorted
 * (*names: an array of *n strings; the caller frees each and the array), and the folder
 * they are in (into dir). CZ_EIO / CZ_ENOTFOUND naming the folder when it cannot be read. */
cz_status cz_cards_list(bool hardware, char ***names, size_t *n, char *dir, size_t dir_n,
                        cz_err *err);

/* Parses a card from a JSON object (`where` names it in messages). Unknown keys, missing
 * required fields, values out of range and inconsistent dimensions fail with CZ_EINVAL and a
 * message "<where>: <field path>: <what was expected>". Optional fields get their documented
 * defaults (docs/cost-model.md), so every field of *out is concrete on success. */
cz_status cz_model_card_parse(const cJSON *j, const char *where, cz_model_card *out, cz_err *err);
cz_status cz_hw_card_parse(const cJSON *j, const char *where, cz_hw_card *out, cz_err *err);
/* Stage by name, or NULL. */
const cz_stage_card *cz_model_card_stage(const cz_model_card *m, const char *stage);
/* The architecture defaults of a stage of `kind` with `hidden` and `intermediate` (and
 * `experts`: a MoE stage's shared expert defaults to its intermediate), as
 * docs/models.md lists them: what a card that names no architecture field gets. */
cz_stage_arch cz_stage_arch_default(cz_stage_kind kind, uint32_t hidden, uint32_t intermediate,
                                    uint32_t experts);
/* Samples (or output frames) a vocoder stage produces per input token: the product of its
 * upsampling rates (1 without upsampling). 0 for other stages. */
uint32_t cz_stage_samples_per_token(const cz_stage_card *s);
/* "ar", "encoder" or "vocoder" (the card's spelling). Never NULL. */
const char *cz_stage_kind_name(cz_stage_kind kind);

/* KV cache bytes per token of an AR stage: 2 (K and V) x layers x kv_heads x head_dim x
 * kv_bytes (on one GPU: divide by tp yourself when sharded). 0 for encoders and vocoders,
 * which keep no KV cache across steps. */
double cz_stage_kv_bytes_per_token(const cz_stage_card *s);
/* KV cache bytes per token held by one GPU of a tensor-parallel group of `tp` (>= 1): the
 * KV heads are split over the GPUs and replicated when there are fewer heads than GPUs, so
 * it is 2 x layers x ceil(kv_heads / tp) x head_dim x kv_bytes. */
double cz_stage_kv_bytes_per_token_gpu(const cz_stage_card *s, uint32_t tp);
/* Bytes of weights of the stage (params x weight_bytes). */
double cz_stage_weight_bytes(const cz_stage_card *s);
/* Bytes of weights of one of the stage's repeated layers: (params - nonlayer_params) x
 * weight_bytes / layers. */
double cz_stage_layer_weight_bytes(const cz_stage_card *s);
/* Bytes of the weights outside the repeated layers (nonlayer_params x weight_bytes). */
double cz_stage_nonlayer_weight_bytes(const cz_stage_card *s);

/* Efficiency factors and overheads of the roofline (docs/cost-model.md). */
typedef struct cz_cost_params {
    double flops_eff;        /* achieved fraction of peak FLOP/s (default 0.6) */
    double bw_eff;           /* achieved fraction of HBM bandwidth (default 0.8) */
    double link_eff;         /* achieved fraction of interconnect bandwidth (default 0.7) */
    double step_overhead_s;  /* fixed per-step cost: launch, scheduling (default 2 ms) */
    double allreduce_latency_s; /* per all-reduce latency (default 10 us) */
    uint32_t tp;             /* tensor-parallel degree (default 1) */
    double bw_sat_sm_fraction; /* fraction of the SMs that saturates HBM bandwidth (0.4):
                                  below it a step's memory traffic slows in proportion */
} cz_cost_params;

/* The uncalibrated defaults listed above (docs/cost-model.md says where they come from). */
cz_cost_params cz_cost_params_default(void);
/* Reads a config's "cost" object (keys flops_eff, bw_eff, link_eff, step_overhead_s,
 * allreduce_latency_s, tp, bw_sat_sm_fraction; all optional) over *out, which the caller
 * preloads with defaults. Unknown keys and out-of-range values fail with CZ_EINVAL naming `where` and the field;
 * *out is left untouched on failure. */
cz_status cz_cost_params_parse(const cJSON *j, const char *where, cz_cost_params *out, cz_err *err);

/* Shape of one batch step of one stage. Encoder and vocoder steps put their input tokens
 * or frames in prefill_tokens. */
typedef struct cz_batch_shape {
    uint64_t prefill_tokens;    /* new prompt tokens processed this step (all chunks) */
    uint64_t prefill_attn_ctx;  /* sum over prefill tokens of the context each attends to */
    uint32_t decode_seqs;       /* sequences decoding one token each */
    uint64_t decode_ctx_tokens; /* sum of the decode sequences' context lengths (KV read) */
    uint32_t prefill_seqs;      /* sequences with a prefill chunk this step (0 is read as 1
                                 * when prefill_tokens > 0) */
} cz_batch_shape;

/* Breakdown of a step's time; total_s is what a driver uses. */
typedef struct cz_step_cost {
    double flops;         /* per GPU */
    double bytes;         /* per GPU: weights + KV + activations */
    double compute_s;
    double memory_s;
    double comm_s;        /* tensor-parallel all-reduces */
    double total_s;       /* passes x (max(compute, memory) + comm) / passes + overhead):
                             max(compute, memory) + comm + overhead for one pass */
    uint32_t passes;      /* the stage's sequential passes (0 for an empty step; 0 reads as
                             1 in cz_cost_share_s) */
} cz_step_cost;

/* Roofline time of one step on one GPU of a tensor-parallel group of p->tp (formulas in
 * docs/cost-model.md). An empty batch (no prefill tokens, no decode sequences) costs 0 in
 * every field. Pure; no allocation. Asserts on a malformed card or params (tp == 0,
 * efficiencies outside (0, 1], non-positive hardware rates). */
void cz_cost_step(const cz_stage_card *s, const cz_hw_card *hw, const cz_cost_params *p,
                  const cz_batch_shape *b, cz_step_cost *out);

/* A decode-only step's roofline time, planned once per stage: what cz_cost_step computes
 * for a batch of `seqs` decoding sequences reading `ctx_tokens` of KV and no prefill, the
 * same operations in the same order (the same doubles), with the terms that do not depend
 * on the batch computed once. The card and hardware must outlive the plan. */
typedef struct cz_cost_decode {
    const cz_stage_card *s;
    cz_cost_params p;
    double tp, passes;
    double body2, head2;      /* 2 x body parameters; 2 x vocab x hidden */
    double attn_k, act_k;     /* 4 x layers x heads x head_dim; 2 x layers x hidden */
    double kv_token;          /* KV bytes per token per GPU */
    double flops_Bps, mem_Bps, link_Bps; /* achieved FLOP/s, HBM and interconnect B/s */
    double ring_k;            /* 2 (tp - 1) / tp */
} cz_cost_decode;

void cz_cost_decode_init(cz_cost_decode *d, const cz_stage_card *s, const cz_hw_card *hw,
                         const cz_cost_params *p);
/* cz_cost_step(...)->total_s of a batch of `seqs` > 0 decoding sequences (no prefill)
 * reading `ctx_tokens` tokens of KV, bit for bit. Pure; O(1). */
double cz_cost_decode_s(const cz_cost_decode *d, uint32_t seqs, uint64_t ctx_tokens);
/* out_s[k] = cz_cost_decode_s(d, seqs, ctx_tokens + k x seqs), k = 0 .. n - 1, bit for bit
 * (a decode run's steps: each reads the KV the one before wrote). Pure; O(n). */
void cz_cost_decode_steps(const cz_cost_decode *d, uint32_t seqs, uint64_t ctx_tokens, uint32_t n,
                          double *out_s);

/* Time of a step of cost `c` (from cz_cost_step with the same params) run on a fraction
 * `share` in (0, 1] of the GPU's SMs, as spatial sharing gives it (Nova,
 * section III-C): compute scales with the share, memory bandwidth
 * with share / bw_sat_sm_fraction up to the full bandwidth; all-reduces and the per-step
 * overhead are unchanged. share = 1 gives c->total_s; an empty step costs 0. */
double cz_cost_share_s(const cz_step_cost *c, const cz_cost_params *p, double share);

/* ---- A fitted cost model (cadenza calibrate; docs/validation.md) ----
 *
 * A step's time as a non-negative combination of what the roofline reads of it: a
 * constant per pass, per sequence (sequences sampling, or an encoder's jobs), per token,
 * per FLOP of the linear layers and of attention, per byte of weights and of KV read and
 * written (the roofline's quantities, per GPU of a tensor-parallel group; docs/
 * cost-model.md). Fitted stage by stage, so a per-layer constant is part of the per-pass
 * one. */
typedef enum cz_cost_feature {
    CZ_CF_STEP = 0,     /* passes (1 for most stages): the fixed cost per step */
    CZ_CF_SEQ,          /* sequences that sample a token; an encoder's or vocoder's jobs */
    CZ_CF_TOKEN,        /* tokens x passes */
    CZ_CF_LINEAR_FLOP,  /* FLOPs of the linear layers and the LM head, steps of more than
                           CZ_COST_GEMV_TOKENS tokens (matrix products) */
    CZ_CF_GEMV_FLOP,    /* ... steps of at most CZ_COST_GEMV_TOKENS (matrix-vector kernels) */
    CZ_CF_ATTN_FLOP,    /* FLOPs of attention */
    CZ_CF_WEIGHT_BYTE,  /* weight bytes read x passes (MoE: the experts the tokens reach),
                           steps of at most CZ_COST_GEMV_TOKENS tokens */
    CZ_CF_GEMM_WEIGHT_BYTE, /* ... steps of more (a matrix product's per-weight work:
                           widening, packing) */
    CZ_CF_KV_BYTE,      /* KV bytes read and written x passes */
    CZ_CF_N
} cz_cost_feature;

/* The tokens up to which the engine's linear layers run matrix-vector kernels (its CPU and
 * CUDA matmuls switch to matrix products above 8 rows): the fitted model gives the two
 * regimes their own FLOP and weight-byte coefficients. */
#define CZ_COST_GEMV_TOKENS 8u

/* The cost file's key of each coefficient ("per_step_s", "per_seq_s", "per_token_s",
 * "per_linear_flop_s", "per_gemv_flop_s", "per_attn_flop_s", "per_weight_byte_s",
 * "per_gemm_weight_byte_s", "per_kv_byte_s"). */
const char *cz_cost_feature_name(cz_cost_feature f);

/* The features of step `b` of stage `s` (p->tp GPUs): all 0 for an empty step. Pure. */
void cz_cost_features(const cz_stage_card *s, const cz_cost_params *p, const cz_batch_shape *b,
                      double x[CZ_CF_N]);

/* One stage's fitted coefficients, seconds per unit of each feature (all >= 0). */
typedef struct cz_cost_fit {
    double theta[CZ_CF_N];
} cz_cost_fit;

/* The fitted time of a step with features x on a fraction `share` in (0, 1] of the SMs:
 * sum of theta x, the FLOP terms over share and the byte terms over the bandwidth that
 * share reaches (min(1, share / bw_sat_sm_fraction)), as cz_cost_share_s scales the
 * roofline's. Pure. */
double cz_cost_fit_s(const cz_cost_fit *f, const cz_cost_params *p, const double x[CZ_CF_N],
                     double share);

/* Seconds to move `bytes` (>= 0) over the host link (latency + bytes / bandwidth); 0 bytes
 * cost 0 s (nothing is sent). The card's host_link_Bps is an achievable rate, so no
 * efficiency factor applies. */
double cz_cost_host_transfer_s(const cz_hw_card *hw, double bytes);

#endif
