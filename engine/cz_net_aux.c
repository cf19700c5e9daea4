/* cz_net_aux.c - the stages that are not a decoder step over the paged cache:
 *
 * Encoder (an audio encoder like Qwen3-Omni's AuT or Whisper's; a vision encoder's patch
 * embedding is the same fold): per sequence, synthetic features (input_dim, frames) are
 * folded `downsample` frames to a token by one strided convolution to (hidden, tokens),
 * then every sequence's tokens go through the bidirectional transformer together
 * (attn_dense over cu), a final norm and the optional output projection.
 *
 * Vocoder (a codec decoder like Qwen3-Omni's code2wav or Mimi's): each frame's `codebooks`
 * codes are embedded and averaged, a causal sliding-window transformer (attn_dense,
 * causal, window) runs over every sequence, then per sequence a conv decoder: a causal
 * convolution to decoder_dim channels and, per upsampling stage, SiLU, a transposed
 * convolution by the rate (kernel 2 x rate, channels halved) and a causal residual unit
 * x + silu(conv(x)); a last convolution to one channel gives the samples.
 *
 * Code predictor (an inner stage: Qwen3-Omni's MTP, Moshi's depth transformer): `steps`
 * greedy decode steps for `rows` frames at once over the net's own dense cache, one block
 * of r_ctx positions per frame, through the decoder step of cz_net.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_net_int.h"

/* Streams of the synthetic inputs (apart from the weights' 0, 1, ...). */
#define CZ__STREAM_FEATURES 0x466561747572ull
#define CZ__STREAM_CODES 0x436f646573ull

/* ---- reserve ---------------------------------------------------------------------------- */

void cz__net_free_aux(cz_net *n)
{
    free(n->host);
    free(n->h_pos);
    free(n->h_cu);
    void *dev[] = {n->d_cu, n->conv_a, n->conv_b, n->conv_c, n->feat};
    for (size_t i = 0; i < CZ_ARRAY_LEN(dev); i++)
        if (dev[i])
            cz_kmem_free(n->k, dev[i]);
    cz_kv_pool_free(n->inner_kv);
    int32_t *host[] = {n->i_tokens, n->i_pos, n->i_qsl, n->i_seq_lens, n->i_bt, n->i_rows,
                       n->i_out};
    for (size_t i = 0; i < CZ_ARRAY_LEN(host); i++)
        free(host[i]);
    free(n->i_slots);
    n->host = NULL;
    n->h_pos = n->h_cu = n->d_cu = NULL;
    n->conv_a = n->conv_b = n->conv_c = n->feat = NULL;
    n->inner_kv = NULL;
    n->i_tokens = n->i_pos = n->i_qsl = n->i_seq_lens = n->i_bt = n->i_rows = n->i_out = NULL;
    n->i_slots = NULL;
}

static size_t max_sz(size_t a, size_t b)
{
    return a > b ? a : b;
}

void cz__net_reserve_aux(cz_net *n)
{
    cz__net_free_aux(n);
    const cz_stage_card *c = &n->card;
    const cz_stage_arch *a = &c->arch;
    size_t T = n->r_tokens, S = n->r_seqs, H = c->hidden;
    if (c->kind == CZ_STAGE_AR) {
        if (n->r_ctx > CZ__NET_INNER_CTX_MAX)
            return;
        cz_err err;
        cz_status st = cz_kv_pool_create(n->k, c, n->r_seqs, n->r_ctx, CZ_F32, &n->inner_kv,
                                         &err);
        CZ_ASSERT(st == CZ_OK);
        n->i_tokens = cz_xcalloc(S, sizeof(int32_t));
        n->i_pos = cz_xcalloc(S, sizeof(int32_t));
        n->i_qsl = cz_xcalloc(S + 1, sizeof(int32_t));
        n->i_seq_lens = cz_xcalloc(S, sizeof(int32_t));
        n->i_bt = cz_xcalloc(S, sizeof(int32_t));
        n->i_rows = cz_xcalloc(S, sizeof(int32_t));
        n->i_out = cz_xcalloc(S, sizeof(int32_t));
        n->i_slots = cz_xcalloc(S, sizeof(int64_t));
        return;
    }
    n->h_pos = cz_xcalloc(T, sizeof(int32_t));
    n->h_cu = cz_xcalloc(S + 1, sizeof(int32_t));
    n->d_cu = cz_kmem_alloc(n->k, (S + 1) * sizeof(int32_t));
    size_t len = H * T;
    if (c->kind == CZ_STAGE_ENCODER) {
        n->host = cz_xcalloc((size_t)a->input_dim * T, sizeof(float));
        n->feat = cz_kmem_alloc(n->k, (size_t)a->input_dim * T * sizeof(float));
        len = max_sz(len, (size_t)a->output_dim * T);
    } else {
        n->host = cz_xcalloc(T, sizeof(int32_t));
        size_t ch = a->decoder_dim, lt = T;
        len = max_sz(len, ch * lt);
        for (uint32_t i = 0; i < a->n_upsample; i++) {
            ch /= 2;
            lt *= a->upsample_rates[i];
            len = max_sz(len, ch * lt);
        }
    }
    n->conv_len = len;
    n->conv_a = cz_kmem_alloc(n->k, len * sizeof(float));
    n->conv_b = cz_kmem_alloc(n->k, len * sizeof(float));
    n->conv_c = cz_kmem_alloc(n->k, len * sizeof(float));
}

/* ---- the transformer of encoders and vocoders ----------------------------------------- */

/* Every layer over rows (rows, H) in n->x, sequences n->d_cu, positions n->d_pos. */
static void dense_layers(cz_net *n, uint32_t rows, uint32_t n_seqs, bool causal,
                         uint32_t window)
{
    const cz_stage_card *c = &n->card;
    float scale = 1.0f / sqrtf((float)c->head_dim);
    for (uint32_t l = 0; l < c->layers; l++) {
        const cz__layer *L = &n->layers[l];
        cz__net_norm(n, n->h, n->x, L->norm1_w, L->norm1_b, rows);
        cz__net_qkv(n, L, n->d_pos, rows);
        n->ops->attn_dense(n->k, n->att, n->qd, n->qkv, n->qkv_w, n->qkv + n->qd,
                           n->qkv + n->qd + n->kvd, n->qkv_w, n->d_cu, n_seqs, c->heads,
                           c->kv_heads, c->head_dim, scale, causal, window);
        cz__net_finish_layer(n, L, rows);
    }
    cz__net_norm(n, n->h, n->x, n->normf_w, n->normf_b, rows);
}

/* Positions 0.. within each sequence and the sequences' bounds, to backend memory. */
static void upload_layout(cz_net *n, uint32_t rows, uint32_t n_seqs)
{
    cz_kmem_upload(n->k, n->d_pos, n->h_pos, (size_t)rows * sizeof(int32_t));
    cz_kmem_upload(n->k, n->d_cu, n->h_cu, ((size_t)n_seqs + 1) * sizeof(int32_t));
}

/* ---- encoder ------------------------------------------------------------------------------ */

uint64_t cz_net_encode(cz_net *n, const uint32_t *lens, uint32_t n_seqs, uint64_t seed)
{
    const cz_stage_card *c = &n->card;
    const cz_kernels *o = n->ops;
    CZ_ASSERT(c->kind == CZ_STAGE_ENCODER && n->feat != NULL);
    CZ_ASSERT(n_seqs <= n->r_seqs);
    uint32_t H = c->hidden, cin = c->arch.input_dim, ds = c->arch.downsample;
    uint64_t key = cz__net_key(seed, CZ__STREAM_FEATURES);
    uint32_t rows = 0;
    n->h_cu[0] = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        uint32_t len = lens[s], tok = (len + ds - 1) / ds;
        CZ_ASSERT(len <= n->r_tokens && rows + tok <= n->r_tokens);
        if (tok) {
            /* features (input_dim, len), channels first */
            cz__net_draw(n->host, (size_t)cin * len, key, (uint64_t)s << 40, 1.0f);
            cz_kmem_upload(n->k, n->feat, n->host, (size_t)cin * len * sizeof(float));
            o->conv1d(n->k, n->conv_a, n->feat, n->conv_in_w, n->conv_in_b, cin, H, len, ds, ds,
                      1, 0, tok * ds - len, 1);
            o->transpose(n->k, n->x + (size_t)rows * H, n->conv_a, H, tok);
        }
        for (uint32_t i = 0; i < tok; i++)
            n->h_pos[rows + i] = (int32_t)i;
        rows += tok;
        n->h_cu[s + 1] = (int32_t)rows;
    }
    if (!rows)
        return 0;
    upload_layout(n, rows, n_seqs);
    dense_layers(n, rows, n_seqs, false, 0);
    if (n->out_proj.w)
        o->matmul(n->k, n->conv_b, n->h, n->out_proj.w, n->out_proj.dt, n->out_proj_b, rows,
                  c->arch.output_dim, H);
    return rows;
}

/* ---- vocoder ------------------------------------------------------------------------------ */

uint64_t cz_net_vocode(cz_net *n, const uint32_t *lens, uint32_t n_seqs, uint64_t seed)
{
    const cz_stage_card *c = &n->card;
    const cz_stage_arch *a = &c->arch;
    const cz_kernels *o = n->ops;
    cz_kctx *k = n->k;
    CZ_ASSERT(c->kind == CZ_STAGE_VOCODER && n->conv_a != NULL);
    CZ_ASSERT(n_seqs <= n->r_seqs);
    const uint32_t K = CZ__NET_CONV_K;
    uint32_t H = c->hidden;
    uint32_t rows = 0;
    n->h_cu[0] = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        CZ_ASSERT(lens[s] <= n->r_tokens && rows + lens[s] <= n->r_tokens);
        for (uint32_t i = 0; i < lens[s]; i++)
            n->h_pos[rows + i] = (int32_t)i;
        rows += lens[s];
        n->h_cu[s + 1] = (int32_t)rows;
    }
    if (!rows)
        return 0;
    upload_layout(n, rows, n_seqs);

    /* the mean of each frame's codebook embeddings (tables pre-scaled by 1 / codebooks) */
    uint64_t key = cz__net_key(seed, CZ__STREAM_CODES);
    int32_t *ids = n->host;
    for (uint32_t cb = 0; cb < a->codebooks; cb++) {
        for (uint32_t i = 0; i < rows; i++)
            ids[i] = (int32_t)(cb * a->codebook_size +
                               cz__net_u64(key, (uint64_t)cb * rows + i) % a->codebook_size);
        cz_kmem_upload(k, n->d_tokens, ids, (size_t)rows * sizeof(int32_t));
        o->embed(k, cb ? n->t : n->x, n->embed.w, n->embed.dt, n->d_tokens, rows, H);
        if (cb)
            o->add(k, n->x, n->x, n->t, (size_t)rows * H);
    }
    dense_layers(n, rows, n_seqs, true, a->window);

    uint64_t samples = 0;
    for (uint32_t s = 0; s < n_seqs; s++) {
        uint32_t len = lens[s], ch = a->decoder_dim;
        if (!len)
            continue;
        float *p = n->conv_b, *q = n->conv_a, *r = n->conv_c;
        o->transpose(k, q, n->h + (size_t)n->h_cu[s] * H, len, H);
        o->conv1d(k, p, q, n->dec_in_w, n->dec_in_b, H, ch, len, K, 1, 1, K - 1, 0, 1);
        size_t L = len;
        for (uint32_t i = 0; i < a->n_upsample; i++) {
            const cz__up *u = &n->ups[i];
            o->silu(k, p, (size_t)u->cin * L);
            o->conv_transpose1d(k, q, p, u->up_w, u->up_b, u->cin, u->cout, (uint32_t)L,
                                2 * u->rate, u->rate, u->rate / 2, u->rate - u->rate / 2);
            L *= u->rate;
            o->conv1d(k, r, q, u->res_w, u->res_b, u->cout, u->cout, (uint32_t)L, K, 1, 1, K - 1,
                      0, 1);
            o->silu(k, r, (size_t)u->cout * L);
            o->add(k, q, q, r, (size_t)u->cout * L);
            float *sw = p;
            p = q;
            q = sw;
            ch = u->cout;
        }
        o->conv1d(k, r, p, n->post_w, n->post_b, ch, 1, (uint32_t)L, K, 1, 1, K - 1, 0, 1);
        samples += L;
    }
    return samples;
}

/* ---- code predictor ------------------------------------------------------------------------ */

void cz_net_inner(cz_net *n, uint32_t rows, uint32_t steps)
{
    CZ_ASSERT(n->card.kind == CZ_STAGE_AR && n->inner_kv != NULL);
    CZ_ASSERT(rows <= n->r_seqs && rows <= n->r_tokens && steps <= n->r_ctx);
    if (!rows)
        return;
    uint32_t C = n->inner_kv->block_tokens;
    for (uint32_t i = 0; i < rows; i++) {
        n->i_tokens[i] = 0;
        n->i_qsl[i] = (int32_t)i;
        n->i_bt[i] = (int32_t)i;
        n->i_rows[i] = (int32_t)i;
    }
    n->i_qsl[rows] = (int32_t)rows;
    for (uint32_t t = 0; t < steps; t++) {
        for (uint32_t i = 0; i < rows; i++) {
            n->i_pos[i] = (int32_t)t;
            n->i_seq_lens[i] = (int32_t)t + 1;
            n->i_slots[i] = (int64_t)i * C + t;
        }
        cz_step_batch b = {.n_seqs = rows, .n_tokens = rows, .max_blocks = 1,
                           .tokens = n->i_tokens, .positions = n->i_pos, .qsl = n->i_qsl,
                           .seq_lens = n->i_seq_lens, .block_table = n->i_bt,
                           .slots = n->i_slots, .sample_rows = n->i_rows, .n_samples = rows};
        cz_net_decode(n, n->inner_kv, &b, NULL, n->i_out, NULL);
        int32_t *sw = n->i_tokens;
        n->i_tokens = n->i_out;
        n->i_out = sw;
    }
}
