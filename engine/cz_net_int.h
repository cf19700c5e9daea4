/* cz_net_int.h - internals of a net shared inside engine/: its weights (one struct per
 * layer, every tensor in backend memory with its shape in a comment), its reserved
 * activations, and the functions the files of the net call across: weight sources
 * (cz_net_weights.c), the decoder (cz_net.c), encoders, vocoders and code predictors
 * (cz_net_aux.c). Shapes use H = hidden, Q = heads x head_dim, KV = kv_heads x head_dim,
 * I = intermediate (or the expert width), V = vocab, T = rows of a step. */
#ifndef CZ_NET_INT_H
#define CZ_NET_INT_H

#include "cz_net.h"
#include "cz_safetensors.h"

/* Longest context a net's private cache serves cz_net_inner with: cz_net_reserve
 * allocates it only for max_ctx at most this (an inner stage's steps per frame). */
#define CZ__NET_INNER_CTX_MAX 64u
/* Kernel width of the vocoder's and encoder's plain convolutions. */
#define CZ__NET_CONV_K 7u

/* A Linear's weight (out, in) of one dtype, in backend memory. */
typedef struct cz__mat {
    void *w;
    cz_dtype dt;
    uint32_t out, in;
} cz__mat;

/* One transformer layer. */
typedef struct cz__layer {
    float *norm1_w, *norm1_b; /* (H); the bias only with LayerNorm */
    cz__mat qkv;              /* (Q + 2 KV, H): q rows, then k, then v */
    float *qkv_b;             /* (Q + 2 KV) or NULL */
    float *q_norm, *k_norm;   /* (head_dim) or NULL (Qwen3's per-head RMSNorm) */
    cz__mat o;                /* (H, Q) */
    float *o_b;               /* (H) or NULL */
    float *norm2_w, *norm2_b; /* (H) */
    /* feed-forward, dense: gated (up = gate rows then up rows (2 I, H), down (H, I)) or
     * plain (up = fc1 (I, H) + up_b, down = fc2 (H, I) + down_b) */
    cz__mat up, down;
    float *up_b, *down_b;
    cz_moe_weights moe;       /* experts > 0: the routed (and shared) experts instead */
} cz__layer;

/* One upsampling stage of a vocoder's conv decoder: a transposed convolution by `rate`
 * (cin -> cout = cin / 2, kernel 2 x rate) and a residual unit (a same-length convolution
 * of kernel CZ__NET_CONV_K). */
typedef struct cz__up {
    uint32_t cin, cout, rate;
    float *up_w, *up_b;   /* (cin, cout, 2 rate), (cout) */
    float *res_w, *res_b; /* (cout, cout, K), (cout) */
} cz__up;

struct cz_net {
    cz_kctx *k;
    const cz_kernels *ops;
    cz_stage_card card;
    size_t weight_bytes;
    void **mem;               /* every backend allocation, freed with the net */
    size_t n_mem, cap_mem;
    const cz_net *owner;      /* a shared net (cz_net_share): whose weights and layers
                                 these are; NULL for the owner itself */

    uint32_t qd, kvd, qkv_w;  /* Q, KV, Q + 2 KV */
    cz__layer *layers;        /* (layers) */
    cz__mat embed;            /* (V, H) tokens; vocoders: (codebooks x codebook_size, H),
                                 each table pre-scaled by 1 / codebooks */
    cz__mat head;             /* (V, H); the embedding table's memory when tied */
    float *normf_w, *normf_b; /* (H) final norm */
    float *inv_freq;          /* (head_dim / 2) RoPE frequencies, theta and scaling applied */
    /* encoder */
    float *conv_in_w, *conv_in_b; /* (H, input_dim, downsample), (H) */
    cz__mat out_proj;         /* (output_dim, H) or w NULL */
    float *out_proj_b;
    /* vocoder conv decoder */
    float *dec_in_w, *dec_in_b;   /* (decoder_dim, H, K), (decoder_dim) */
    cz__up ups[CZ_UPSAMPLE_MAX];
    float *post_w, *post_b;       /* (1, last channels, K), (1) */

    /* ---- reserved (cz_net_reserve); a shared net starts here with nothing ---- */
    uint32_t r_tokens, r_seqs, r_ctx;
    float *x, *t, *h;         /* (T, H) residual stream, block output, normed input */
    float *qkv;               /* (T, Q + 2 KV) */
    float *att;               /* (T, Q) */
    float *gu, *act;          /* (T, 2 I), (T, I) dense feed-forward */
    float *sel, *logits;      /* (S, H), (S, V), S = r_seqs rows sampled at a time */
    int32_t *ids;             /* (S) */
    /* a step's host arrays, copied to backend memory once per step */
    int32_t *d_tokens, *d_pos, *d_qsl, *d_seq_lens, *d_bt, *d_rows;
    int64_t *d_slots;
    uint64_t *d_counter;
    size_t bt_cap;            /* elements of d_bt: r_seqs x r_ctx (blocks of >= 1 token),
                                 doubled by a step whose block table is wider */
    /* encoders and vocoders */
    void *host;               /* host staging: one sequence's features (input_dim, r_tokens)
                                 floats, or one codebook's ids (r_tokens) */
    int32_t *h_pos, *h_cu;    /* (r_tokens), (r_seqs + 1) host */
    int32_t *d_cu;            /* (r_seqs + 1) */
    float *conv_a, *conv_b, *conv_c; /* conv decoder / front end buffers (conv_len floats) */
    size_t conv_len;
    float *feat;              /* (input_dim, r_tokens) one sequence's features */
    /* inner: a dense cache of r_seqs sequences x r_ctx positions, block per sequence */
    cz_kv_pool *inner_kv;
    int32_t *i_tokens, *i_pos, *i_qsl, *i_seq_lens, *i_bt, *i_rows, *i_out;
    int64_t *i_slots;
};

/* Backend memory owned by the net (freed with it), counted in its weight bytes when
 * `weights`. */
void *cz__net_alloc(cz_net *n, size_t bytes, bool weights);

/* Random weights: fills every weight of the net (allocated here) from src->seed. */
void cz__net_random(cz_net *n, const cz_net_source *src);
/* Checkpoint weights of a decoder stage from the open checkpoint `st`. */
cz_status cz__net_load(cz_net *n, const cz_safetensors *st, cz_err *err);

/* Counter-based draws (SplitMix64): a stream's key, 64 random bits of element i of a
 * stream, and count approximately normal draws N(0, std^2) of elements first.. of a
 * stream into host memory. Pure functions of their arguments. */
uint64_t cz__net_key(uint64_t seed, uint64_t stream);
uint64_t cz__net_u64(uint64_t key, uint64_t i);
void cz__net_draw(float *dst, size_t count, uint64_t key, uint64_t first, float std);

/* RoPE frequencies of head_dim and arch (default, linear, llama3) in double, rounded once
 * to float: inv[j] for j < head_dim / 2. */
void cz__net_inv_freq(const cz_stage_arch *a, uint32_t head_dim, float *inv);

/* Norm of rows (rows, H) by the stage's kind (RMSNorm or LayerNorm). */
void cz__net_norm(cz_net *n, float *out, const float *x, const float *w, const float *b,
                  uint32_t rows);
/* One layer's feed-forward block on h (rows, H) into out (rows, H). */
void cz__net_ffn(cz_net *n, const cz__layer *L, float *out, const float *h, uint32_t rows);
/* Projections, q/k norms and RoPE of one layer on n->h into n->qkv (rows, Q + 2 KV),
 * positions `pos` (backend memory). */
void cz__net_qkv(cz_net *n, const cz__layer *L, const int32_t *pos, uint32_t rows);
/* The output projection of n->att and the feed-forward block: x += o(att); x += ffn(norm
 * x). */
void cz__net_finish_layer(cz_net *n, const cz__layer *L, uint32_t rows);

/* Encoders', vocoders' and code predictors' reserves (cz_net_aux.c). */
void cz__net_reserve_aux(cz_net *n);
void cz__net_free_aux(cz_net *n);

#endif
