/* cz_net.c - see cz_net.h: a net's creation, its reserve, the transformer layer every
 * stage kind shares, and the decoder step over the paged cache (vLLM V1's varlen batch).
 *
 * A decoder step, T rows (llm.c's forward, Hugging Face's LlamaModel / Qwen2Model /
 * Qwen3Model / Qwen3MoeModel):
 *   x (T, H) = embed(tokens)
 *   per layer: h = norm1(x); qkv = h . Wqkv^T + b; q, k per-head RMSNorm (Qwen3); RoPE on
 *     q and k; k, v written to the cache at the slots; att = attention(q, cache);
 *     x += att . Wo^T (+ b); h = norm2(x); x += ffn(h) (SwiGLU or the MoE layer)
 *   the sampled rows, at most r_seqs at a time: norm(x[rows]) . Whead^T -> logits -> ids.
 * The step's host arrays are copied to backend memory once (FlashInfer's plan-once); every
 * layer reuses them. */
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "cz_net_int.h"
#include "cz_wall.h"

void *cz__net_alloc(cz_net *n, size_t bytes, bool weights)
{
    void *p = cz_kmem_alloc(n->k, bytes ? bytes : 1);
    cz_grow((void **)&n->mem, &n->cap_mem, n->n_mem + 1, sizeof *n->mem);
    n->mem[n->n_mem++] = p;
    if (weights)
        n->weight_bytes += bytes;
    return p;
}

/* ---- creation --------------------------------------------------------------------------- */

/* What the forward passes need of a card beyond what the card parser checks. */
static cz_status check_card(const cz_stage_card *c, cz_err *err)
{
    if (c->head_dim % 2 != 0 || c->head_dim > CZ_KMAX_HEAD_DIM)
        return cz_err_set(err, CZ_EINVAL,
                          "stage '%s': head_dim %u: expected an even number at most %u (rotary "
                          "pairs, the kernels' widest head)",
                          c->name, c->head_dim, CZ_KMAX_HEAD_DIM);
    if (c->kind != CZ_STAGE_ENCODER && c->arch.act == CZ_ACT_SILU && !c->experts &&
        c->intermediate == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "stage '%s': intermediate 0: a dense stage needs a feed-forward width",
                          c->name);
    if (c->kind == CZ_STAGE_ENCODER && c->intermediate == 0)
        return cz_err_set(err, CZ_EINVAL,
                          "stage '%s': intermediate 0: an encoder needs a feed-forward width",
                          c->name);
    return CZ_OK;
}

cz_status cz_net_create(cz_kctx *k, const cz_stage_card *card, const cz_net_source *src,
                        cz_net **out, cz_err *err)
{
    CZ_ASSERT(k != NULL && card != NULL && src != NULL && out != NULL);
    CZ_ASSERT(src->dtype == CZ_F32 || src->dtype == CZ_BF16 || src->dtype == CZ_F16);
    cz_status s = check_card(card, err);
    if (s != CZ_OK)
        return s;
    cz_net *n = cz_xcalloc(1, sizeof *n);
    n->k = k;
    n->ops = cz_kctx_ops(k);
    n->card = *card;
    n->qd = card->heads * card->head_dim;
    n->kvd = card->kv_heads * card->head_dim;
    n->qkv_w = n->qd + 2 * n->kvd;
    n->layers = cz_xcalloc(card->layers, sizeof *n->layers);

    float inv[CZ_KMAX_HEAD_DIM / 2];
    cz__net_inv_freq(&card->arch, card->head_dim, inv);
    n->inv_freq = cz__net_alloc(n, card->head_dim / 2 * sizeof(float), false);
    cz_kmem_upload(k, n->inv_freq, inv, card->head_dim / 2 * sizeof(float));

    if (src->checkpoint && card->kind == CZ_STAGE_AR) {
        cz_safetensors *st = NULL;
        s = cz_st_open_dir(src->checkpoint, &st, err);
        if (s != CZ_OK && src->named_by)
            cz_err_prefix(err, "%s: ", src->named_by);
        if (s == CZ_OK)
            s = cz__net_load(n, st, err);
        cz_st_close(st);
        if (s != CZ_OK) {
            cz_net_free(n);
            return s;
        }
    } else {
        cz__net_random(n, src);
    }
    *out = n;
    return CZ_OK;
}

cz_net *cz_net_share(const cz_net *src, cz_kctx *k)
{
    CZ_ASSERT(src && k && !src->owner);
    CZ_ASSERT(strcmp(cz_kctx_ops(k)->name, src->ops->name) == 0);
    cz_net *n = cz_xmalloc(sizeof *n);
    *n = *src;
    /* nothing reserved yet, no memory of its own */
    size_t from = offsetof(cz_net, r_tokens);
    memset((char *)n + from, 0, sizeof *n - from);
    n->k = k;
    n->ops = cz_kctx_ops(k);
    n->mem = NULL;
    n->n_mem = n->cap_mem = 0;
    n->owner = src;
    return n;
}

static void free_act(cz_net *n, void *p)
{
    if (p)
        cz_kmem_free(n->k, p);
}

static void free_acts(cz_net *n)
{
    void *acts[] = {n->x,      n->t,     n->h,          n->qkv,         n->att,   n->gu,
                    n->act,    n->sel,   n->logits,     n->ids,         n->d_tokens, n->d_pos,
                    n->d_qsl,  n->d_seq_lens, n->d_bt,  n->d_rows,      n->d_slots,
                    n->d_counter};
    for (size_t i = 0; i < CZ_ARRAY_LEN(acts); i++)
        free_act(n, acts[i]);
}

void cz_net_free(cz_net *n)
{
    if (!n)
        return;
    free_acts(n);
    cz__net_free_aux(n);
    for (size_t i = 0; i < n->n_mem; i++)
        cz_kmem_free(n->k, n->mem[i]);
    free(n->mem);
    if (!n->owner)
        free(n->layers);
    free(n);
}

const cz_stage_card *cz_net_card(const cz_net *n)
{
    return &n->card;
}

size_t cz_net_weight_bytes(const cz_net *n)
{
    return n->weight_bytes;
}

/* ---- reserve ------------------------------------------------------------------------------ */

static void *act(cz_net *n, size_t bytes)
{
    return cz_kmem_alloc(n->k, bytes ? bytes : 1);
}

void cz_net_reserve(cz_net *n, uint32_t max_tokens, uint32_t max_seqs, uint32_t max_ctx)
{
    CZ_ASSERT(max_tokens >= 1 && max_seqs >= 1 && max_ctx >= 1);
    uint32_t T = max_tokens > n->r_tokens ? max_tokens : n->r_tokens;
    uint32_t S = max_seqs > n->r_seqs ? max_seqs : n->r_seqs;
    uint32_t C = max_ctx > n->r_ctx ? max_ctx : n->r_ctx;
    if (T == n->r_tokens && S == n->r_seqs && C == n->r_ctx)
        return;
    free_acts(n);
    n->r_tokens = T;
    n->r_seqs = S;
    n->r_ctx = C;
    const cz_stage_card *c = &n->card;
    uint32_t H = c->hidden, V = c->vocab;
    uint32_t ffn = c->experts ? 0 : c->arch.act == CZ_ACT_SILU ? 2 * c->intermediate
                                                                : c->intermediate;
    size_t f = sizeof(float);
    n->x = act(n, (size_t)T * H * f);
    n->t = act(n, (size_t)T * H * f);
    n->h = act(n, (size_t)T * H * f);
    n->qkv = act(n, (size_t)T * n->qkv_w * f);
    n->att = act(n, (size_t)T * n->qd * f);
    n->gu = act(n, (size_t)T * ffn * f);
    n->act = act(n, (size_t)T * (ffn / 2 + 1) * f);
    n->sel = act(n, (size_t)S * H * f);
    n->logits = act(n, (size_t)S * V * f);
    n->ids = act(n, (size_t)S * sizeof(int32_t));
    n->d_tokens = act(n, (size_t)T * sizeof(int32_t));
    n->d_pos = act(n, (size_t)T * sizeof(int32_t));
    n->d_rows = act(n, (size_t)T * sizeof(int32_t));
    n->d_slots = act(n, (size_t)T * sizeof(int64_t));
    n->d_counter = act(n, (size_t)T * sizeof(uint64_t));
    n->d_qsl = act(n, ((size_t)S + 1) * sizeof(int32_t));
    n->d_seq_lens = act(n, (size_t)S * sizeof(int32_t));
    n->bt_cap = (size_t)S * C;
    n->d_bt = act(n, n->bt_cap * sizeof(int32_t));

    uint32_t dim = H;
    if (n->qkv_w > dim)
        dim = n->qkv_w;
    if (ffn > dim)
        dim = ffn;
    if (V > dim)
        dim = V;
    cz_kreserve r = {.max_rows = T, .max_ctx = C, .max_heads = c->heads, .max_dim = dim};
    if (c->experts) {
        uint32_t md = H, ei = 2 * c->expert_intermediate,
                 si = 2 * c->arch.shared_expert_intermediate;
        md = ei > md ? ei : md;
        md = si > md ? si : md;
        r.max_experts = c->experts;
        r.max_moe_dim = md;
    }
    cz_kctx_reserve(n->k, &r);
    cz__net_reserve_aux(n);
}

/* ---- the layer ------------------------------------------------------------------------ */

void cz__net_norm(cz_net *n, float *out, const float *x, const float *w, const float *b,
                  uint32_t rows)
{
    const cz_stage_card *c = &n->card;
    if (c->arch.norm == CZ_NORM_RMS)
        n->ops->rmsnorm(n->k, out, x, w, (float)c->arch.norm_eps, rows, c->hidden);
    else
        n->ops->layernorm(n->k, out, x, w, b, (float)c->arch.norm_eps, rows, c->hidden);
}

void cz__net_qkv(cz_net *n, const cz__layer *L, const int32_t *pos, uint32_t rows)
{
    const cz_stage_card *c = &n->card;
    const cz_kernels *o = n->ops;
    uint32_t hd = c->head_dim, w = n->qkv_w;
    o->matmul(n->k, n->qkv, n->h, L->qkv.w, L->qkv.dt, L->qkv_b, rows, w, c->hidden);
    if (L->q_norm) {
        float eps = (float)c->arch.norm_eps;
        for (uint32_t i = 0; i < rows; i++) {
            float *q = n->qkv + (size_t)i * w;
            o->rmsnorm(n->k, q, q, L->q_norm, eps, c->heads, hd);
            o->rmsnorm(n->k, q + n->qd, q + n->qd, L->k_norm, eps, c->kv_heads, hd);
        }
    }
    o->rope(n->k, n->qkv, w, pos, n->inv_freq, rows, c->heads, hd);
    o->rope(n->k, n->qkv + n->qd, w, pos, n->inv_freq, rows, c->kv_heads, hd);
}

void cz__net_ffn(cz_net *n, const cz__layer *L, float *out, const float *h, uint32_t rows)
{
    const cz_stage_card *c = &n->card;
    const cz_kernels *o = n->ops;
    uint32_t H = c->hidden, I = c->intermediate;
    if (c->experts) {
        o->moe_ffn(n->k, out, h, &L->moe, rows);
    } else if (c->arch.act == CZ_ACT_SILU) {
        o->matmul(n->k, n->gu, h, L->up.w, L->up.dt, NULL, rows, 2 * I, H);
        o->silu_mul(n->k, n->act, n->gu, rows, I);
        o->matmul(n->k, out, n->act, L->down.w, L->down.dt, NULL, rows, H, I);
    } else {
        o->matmul(n->k, n->gu, h, L->up.w, L->up.dt, L->up_b, rows, I, H);
        o->gelu(n->k, n->gu, (size_t)rows * I);
        o->matmul(n->k, out, n->gu, L->down.w, L->down.dt, L->down_b, rows, H, I);
    }
}

void cz__net_finish_layer(cz_net *n, const cz__layer *L, uint32_t rows)
{
    const cz_kernels *o = n->ops;
    uint32_t H = n->card.hidden;
    size_t el = (size_t)rows * H;
    o->matmul(n->k, n->t, n->att, L->o.w, L->o.dt, L->o_b, rows, H, n->qd);
    o->add(n->k, n->x, n->x, n->t, el);
    cz__net_norm(n, n->h, n->x, L->norm2_w, L->norm2_b, rows);
    cz__net_ffn(n, L, n->t, n->h, rows);
    o->add(n->k, n->x, n->x, n->t, el);
}

/* ---- the decoder step ------------------------------------------------------------------- */

void cz_net_decode(cz_net *n, const cz_kv_pool *kv, const cz_step_batch *b,
                   const cz_sampling *s, int32_t *out_ids, float *logits)
{
    const cz_stage_card *c = &n->card;
    const cz_kernels *o = n->ops;
    cz_kctx *k = n->k;
    CZ_ASSERT(c->kind == CZ_STAGE_AR);
    CZ_ASSERT(kv->layers == c->layers && kv->kv_heads == c->kv_heads &&
              kv->head_dim == c->head_dim);
    uint32_t T = b->n_tokens, NS = b->n_seqs, H = c->hidden, V = c->vocab;
    CZ_ASSERT(T <= n->r_tokens && NS <= n->r_seqs && b->n_samples <= T);
    if ((size_t)NS * b->max_blocks > n->bt_cap) {
        /* a windowed sequence's table spans its positions, not the blocks it holds: it
         * outgrows the reserve as the context grows (doubling: amortised, rare) */
        size_t cap = n->bt_cap * 2 > (size_t)NS * b->max_blocks ? n->bt_cap * 2
                                                                 : (size_t)NS * b->max_blocks;
        free_act(n, n->d_bt);
        n->d_bt = act(n, cap * sizeof(int32_t));
        n->bt_cap = cap;
    }
    CZ_ASSERT(NS >= 1 && b->qsl[0] == 0 && (uint32_t)b->qsl[NS] == T);
    for (uint32_t i = 0; i < T; i++)
        CZ_ASSERT(b->tokens[i] >= 0 && (uint32_t)b->tokens[i] < V);
    for (uint32_t i = 0; i < b->n_samples; i++)
        CZ_ASSERT(b->sample_rows[i] >= 0 && (uint32_t)b->sample_rows[i] < T);
    bool greedy = !s || s->temperature <= 0.0f;
    if (s && s->rows) {
        greedy = true;
        for (uint32_t i = 0; i < b->n_samples && greedy; i++)
            greedy = s->rows[i].temperature <= 0.0f;
    }
    CZ_ASSERT(greedy || s->counter != NULL);

    /* the step's arrays, once */
    cz_kmem_upload(k, n->d_tokens, b->tokens, (size_t)T * sizeof(int32_t));
    cz_kmem_upload(k, n->d_pos, b->positions, (size_t)T * sizeof(int32_t));
    cz_kmem_upload(k, n->d_slots, b->slots, (size_t)T * sizeof(int64_t));
    cz_kmem_upload(k, n->d_qsl, b->qsl, ((size_t)NS + 1) * sizeof(int32_t));
    cz_kmem_upload(k, n->d_seq_lens, b->seq_lens, (size_t)NS * sizeof(int32_t));
    cz_kmem_upload(k, n->d_bt, b->block_table, (size_t)NS * b->max_blocks * sizeof(int32_t));
    cz_kmem_upload(k, n->d_rows, b->sample_rows, (size_t)b->n_samples * sizeof(int32_t));
    if (!greedy)
        cz_kmem_upload(k, n->d_counter, s->counter, (size_t)b->n_samples * sizeof(uint64_t));

    float scale = 1.0f / sqrtf((float)c->head_dim);
    o->embed(k, n->x, n->embed.w, n->embed.dt, n->d_tokens, T, H);
    for (uint32_t l = 0; l < c->layers; l++) {
        const cz__layer *L = &n->layers[l];
        cz_kv_layer kl = cz_kv_pool_layer(kv, l);
        cz__net_norm(n, n->h, n->x, L->norm1_w, L->norm1_b, T);
        cz__net_qkv(n, L, n->d_pos, T);
        o->kv_write(k, &kl, n->qkv + n->qd, n->qkv + n->qd + n->kvd, n->qkv_w, n->d_slots, T);
        o->attn_paged(k, n->att, n->qd, n->qkv, n->qkv_w, &kl, n->d_qsl, n->d_seq_lens, n->d_bt,
                      b->max_blocks, NS, c->heads, scale, b->window, b->sinks);
        cz__net_finish_layer(n, L, T);
    }

    /* the sampled rows, r_seqs at a time: each chunk reads the head once */
    for (uint32_t c0 = 0; c0 < b->n_samples; c0 += n->r_seqs) {
        uint32_t m = b->n_samples - c0 < n->r_seqs ? b->n_samples - c0 : n->r_seqs;
        o->gather_rows(k, n->sel, n->x, n->d_rows + c0, m, H);
        cz__net_norm(n, n->sel, n->sel, n->normf_w, n->normf_b, m);
        o->matmul(k, n->logits, n->sel, n->head.w, n->head.dt, NULL, m, V, H);
        if (greedy) {
            o->argmax(k, n->ids, n->logits, m, V);
        } else if (!s->rows) {
            o->sample(k, n->ids, n->logits, m, V, s->temperature, s->top_k, s->top_p, s->seed,
                      n->d_counter + c0);
        } else {
            /* runs of rows alike, each a call on its slice of the logits */
            for (uint32_t r0 = 0, r1; r0 < m; r0 = r1) {
                const cz_row_sampling *a = &s->rows[c0 + r0];
                for (r1 = r0 + 1; r1 < m; r1++) {
                    const cz_row_sampling *x = &s->rows[c0 + r1];
                    if (x->temperature != a->temperature || x->top_k != a->top_k ||
                        x->top_p != a->top_p || x->seed != a->seed)
                        break;
                }
                if (a->temperature <= 0.0f)
                    o->argmax(k, n->ids + r0, n->logits + (size_t)r0 * V, r1 - r0, V);
                else
                    o->sample(k, n->ids + r0, n->logits + (size_t)r0 * V, r1 - r0, V,
                              a->temperature, a->top_k, a->top_p, a->seed,
                              n->d_counter + c0 + r0);
            }
        }
        cz_kmem_download(k, out_ids + c0, n->ids, (size_t)m * sizeof(int32_t));
        if (logits)
            cz_kmem_download(k, logits + (size_t)c0 * V, n->logits, (size_t)m * V * sizeof(float));
    }
}

/* ---- warm-up ------------------------------------------------------------------------------ */

/* Tokens of the warm-up's first, largest pass: enough rows for the matrix-product paths
 * (every kernel's multi-row code), few enough to stay a fraction of a second on a large
 * model on a CPU. */
#define CZ__NET_WARM_ROWS 256u

static void warm_decoder(cz_net *n, const cz_kv_pool *kv, double min_s)
{
    uint32_t bt = kv->block_tokens;
    uint32_t T = n->r_tokens < CZ__NET_WARM_ROWS ? n->r_tokens : CZ__NET_WARM_ROWS;
    if (T > n->r_ctx)
        T = n->r_ctx;
    if ((uint64_t)T > (uint64_t)kv->blocks * bt)
        T = kv->blocks * bt;
    uint32_t nb = (T + bt - 1) / bt;
    int32_t *tok = cz_xmalloc((size_t)T * sizeof *tok), *pos = cz_xmalloc((size_t)T * sizeof *pos);
    int32_t *bt_row = cz_xmalloc((size_t)nb * sizeof *bt_row);
    int64_t *slots = cz_xmalloc((size_t)T * sizeof *slots);
    for (uint32_t i = 0; i < T; i++) {
        tok[i] = (int32_t)(i % n->card.vocab);
        pos[i] = (int32_t)i;
        slots[i] = i;
    }
    for (uint32_t b = 0; b < nb; b++)
        bt_row[b] = (int32_t)b;
    int32_t qsl[2] = {0, (int32_t)T}, len = (int32_t)T, row = (int32_t)T - 1, out = 0;
    cz_step_batch b = {.n_seqs = 1, .n_tokens = T, .max_blocks = nb, .tokens = tok,
                       .positions = pos, .qsl = qsl, .seq_lens = &len, .block_table = bt_row,
                       .slots = slots, .sample_rows = &row, .n_samples = 1};
    double t0 = cz_wall_s();
    cz_net_decode(n, kv, &b, NULL, &out, NULL);
    /* then the shape most steps have: one decode token at the end of that sequence */
    qsl[1] = 1;
    row = 0;
    b.n_tokens = 1;
    b.tokens = tok + T - 1;
    b.positions = pos + T - 1;
    b.slots = slots + T - 1;
    do {
        cz_net_decode(n, kv, &b, NULL, &out, NULL);
        cz_kctx_sync(n->k);
    } while (cz_wall_s() - t0 < min_s);
    free(tok);
    free(pos);
    free(bt_row);
    free(slots);
}

void cz_net_warmup(cz_net *n, const cz_kv_pool *kv, double min_s)
{
    const cz_stage_card *c = &n->card;
    double t0 = cz_wall_s();
    if (c->kind == CZ_STAGE_AR && kv) {
        warm_decoder(n, kv, min_s);
        return;
    }
    if (c->kind == CZ_STAGE_AR) {
        CZ_ASSERT(n->inner_kv != NULL);
        uint32_t steps = n->r_ctx < 2 ? n->r_ctx : n->r_ctx - 1;
        do {
            cz_net_inner(n, 1, steps);
            cz_kctx_sync(n->k);
        } while (cz_wall_s() - t0 < min_s);
        return;
    }
    uint32_t big = n->r_tokens < CZ__NET_WARM_ROWS ? n->r_tokens : CZ__NET_WARM_ROWS;
    uint32_t small = big < 16 ? big : 16;
    for (uint32_t i = 0;; i++) {
        uint32_t len = i == 0 ? big : small;
        if (c->kind == CZ_STAGE_ENCODER)
            cz_net_encode(n, &len, 1, i);
        else
            cz_net_vocode(n, &len, 1, i);
        cz_kctx_sync(n->k);
        if (cz_wall_s() - t0 >= min_s)
            break;
    }
}
