/* cz_net_weights.c - a net's weights: drawn from a seed, or read from a Hugging Face
 * checkpoint, and its RoPE frequencies.
 *
 * Random weights are counter-based, so every value is a pure function of (seed, tensor
 * index, element index) whatever the chunking: SplitMix64's finalizer gives each tensor a
 * key and each element 64 bits, whose four 16-bit fields are summed (Irwin-Hall of 4,
 * variance 1 after centring and scaling: a normal to within 0.3 % in the body, bounded at
 * 3.46 sigma), scaled by 1 / sqrt(fan_in), narrowed to the dtype a chunk at a time in host
 * memory and uploaded. A 1B-parameter model takes a few seconds on one core.
 *
 * Checkpoints keep each tensor's dtype (F32, BF16 or F16): the projections of one fused
 * weight (q, k and v; gate and up; a MoE layer's experts and router) share it, or are all
 * widened to F32 when they differ (exact). Norm weights and biases become float32. Only
 * the tensors the architecture reads are looked up; others (a tied checkpoint's
 * lm_head.weight, rotary buffers) are ignored. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_net_int.h"

/* Elements generated or converted per host chunk. */
#define CZ__CHUNK (1u << 18)
#define CZ__NAME_MAX 160
/* Most threads drawing one tensor. */
#define CZ__GEN_THREADS 64u

static const uint64_t GOLDEN = 0x9E3779B97F4A7C15ull;

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- RoPE ------------------------------------------------------------------------------ */

void cz__net_inv_freq(const cz_stage_arch *a, uint32_t head_dim, float *inv)
{
    /* transformers' modeling_rope_utils: _compute_default_rope_parameters,
     * _compute_linear_scaling_rope_parameters, _compute_llama3_parameters */
    const double two_pi = 6.283185307179586476925;
    double lo_wl = a->rope_original_max_pos / a->rope_low_freq_factor;
    double hi_wl = a->rope_original_max_pos / a->rope_high_freq_factor;
    for (uint32_t j = 0; j < head_dim / 2; j++) {
        double f = 1.0 / pow(a->rope_theta, (double)(2 * j) / head_dim);
        if (a->rope_type == CZ_ROPE_LINEAR) {
            f /= a->rope_factor;
        } else if (a->rope_type == CZ_ROPE_LLAMA3) {
            double wl = two_pi / f;
            if (wl > lo_wl) {
                f /= a->rope_factor;
            } else if (!(wl < hi_wl)) {
                double smooth = (a->rope_original_max_pos / wl - a->rope_low_freq_factor) /
                                (a->rope_high_freq_factor - a->rope_low_freq_factor);
                f = (1.0 - smooth) * f / a->rope_factor + smooth * f;
            }
        }
        inv[j] = (float)f;
    }
}

/* ---- shared helpers --------------------------------------------------------------------- */

/* Host chunks for conversions (CZ__CHUNK elements each). */
typedef struct wctx {
    cz_net *n;
    float *f;      /* float32 chunk */
    void *b;       /* narrowed chunk */
    /* random */
    uint64_t seed, id;
    cz_dtype dt;
    /* checkpoint */
    const cz_safetensors *st;
    const cz_st_tensor **used; /* the tensors read, for the check of those left over */
    size_t n_used, cap_used;
} wctx;

static void narrow(void *dst, const float *src, cz_dtype dt, size_t n)
{
    if (dt == CZ_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    if (dt == CZ_BF16)
        for (size_t i = 0; i < n; i++)
            d[i] = cz_f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            d[i] = cz_f32_to_f16(src[i]);
}

static float *vec(wctx *w, size_t count)
{
    return cz__net_alloc(w->n, count * sizeof(float), true);
}

/* ---- random weights --------------------------------------------------------------------- */

uint64_t cz__net_key(uint64_t seed, uint64_t stream)
{
    return mix64(seed + GOLDEN * (stream + 1));
}

uint64_t cz__net_u64(uint64_t key, uint64_t i)
{
    return mix64(key + GOLDEN * (i + 1));
}

void cz__net_draw(float *dst, size_t count, uint64_t key, uint64_t first, float std)
{
    const float scale = std / 37837.2273f; /* 65536 / sqrt(3): the sum's deviation */
    for (size_t i = 0; i < count; i++) {
        uint64_t u = mix64(key + GOLDEN * (first + i + 1));
        uint32_t s = (uint32_t)(u & 0xffff) + (uint32_t)((u >> 16) & 0xffff) +
                     (uint32_t)((u >> 32) & 0xffff) + (uint32_t)(u >> 48);
        dst[i] = ((float)s - 131070.0f) * scale;
    }
}

/* Float32 to bfloat16, round to nearest even, for finite values (the draws). */
static inline uint16_t bf16_finite(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* One range of a tensor's draws: elements [first, first + count) of stream `key` to dst
 * (backend memory, already offset to `first`), through the host chunks f and b. */
typedef struct gen_job {
    cz_kctx *k;
    void *dst;
    cz_dtype dt;
    uint64_t key, first;
    size_t count;
    float std;
    float *f;
    void *b;
} gen_job;

static void gen_range(const gen_job *j)
{
    size_t es = cz_dtype_size(j->dt);
    for (size_t at = 0; at < j->count; at += CZ__CHUNK) {
        size_t m = j->count - at < CZ__CHUNK ? j->count - at : CZ__CHUNK;
        cz__net_draw(j->f, m, j->key, j->first + at, j->std);
        if (j->dt == CZ_BF16) {
            uint16_t *h = j->b;
            for (size_t i = 0; i < m; i++)
                h[i] = bf16_finite(j->f[i]);
        } else {
            narrow(j->b, j->f, j->dt, m);
        }
        cz_kmem_upload(j->k, (char *)j->dst + at * es, j->b, m * es);
    }
}

static void *gen_thread(void *p)
{
    gen_range(p);
    return NULL;
}

/* Fills count elements of dt at dst (backend memory) with N(0, std^2) draws of the next
 * tensor's stream; a large tensor is split over the context's thread count (each range a
 * whole number of chunks, so the values do not depend on the split). */
static void fill_normal(wctx *w, void *dst, cz_dtype dt, size_t count, float std)
{
    uint64_t key = cz__net_key(w->seed, w->id++);
    size_t chunks = (count + CZ__CHUNK - 1) / CZ__CHUNK;
    uint32_t nt = cz_kctx_threads(w->n->k);
    if (nt > CZ__GEN_THREADS)
        nt = CZ__GEN_THREADS;
    if (nt > chunks / 4)
        nt = (uint32_t)(chunks / 4);
    gen_job jobs[CZ__GEN_THREADS];
    pthread_t tids[CZ__GEN_THREADS];
    bool started[CZ__GEN_THREADS] = {false};
    if (nt < 2) {
        gen_job j = {w->n->k, dst, dt, key, 0, count, std, w->f, w->b};
        gen_range(&j);
        return;
    }
    size_t es = cz_dtype_size(dt);
    for (uint32_t t = 0; t < nt; t++) {
        size_t c0 = chunks * t / nt, c1 = chunks * (t + 1) / nt;
        size_t first = c0 * CZ__CHUNK, end = c1 * CZ__CHUNK < count ? c1 * CZ__CHUNK : count;
        jobs[t] = (gen_job){w->n->k, (char *)dst + first * es, dt, key, first, end - first, std,
                            t ? cz_xmalloc(CZ__CHUNK * sizeof(float)) : w->f,
                            t ? cz_xmalloc(CZ__CHUNK * sizeof(float)) : w->b};
        if (t)
            started[t] = pthread_create(&tids[t], NULL, gen_thread, &jobs[t]) == 0;
    }
    gen_range(&jobs[0]);
    for (uint32_t t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            gen_range(&jobs[t]); /* a thread that could not start: its range here */
        free(jobs[t].f);
        free(jobs[t].b);
    }
}

static void fill_const(wctx *w, float *dst, size_t count, float v)
{
    for (size_t i = 0; i < CZ__CHUNK; i++)
        w->f[i] = v;
    for (size_t at = 0; at < count; at += CZ__CHUNK) {
        size_t m = count - at < CZ__CHUNK ? count - at : CZ__CHUNK;
        cz_kmem_upload(w->n->k, dst + at, w->f, m * sizeof(float));
    }
}

static cz__mat rand_mat(wctx *w, uint32_t out, uint32_t in)
{
    cz__mat m = {NULL, w->dt, out, in};
    size_t count = (size_t)out * in;
    m.w = cz__net_alloc(w->n, count * cz_dtype_size(w->dt), true);
    fill_normal(w, m.w, w->dt, count, 1.0f / sqrtf((float)in));
    return m;
}

/* A float32 tensor of count draws with deviation 1 / sqrt(fan_in) (conv weights). */
static float *rand_f32(wctx *w, size_t count, uint32_t fan_in)
{
    float *p = vec(w, count);
    fill_normal(w, p, CZ_F32, count, 1.0f / sqrtf((float)fan_in));
    return p;
}

static float *const_f32(wctx *w, size_t count, float v)
{
    float *p = vec(w, count);
    fill_const(w, p, count, v);
    return p;
}

/* The norm weight (ones) and, for LayerNorm, bias (zeros). */
static void rand_norm(wctx *w, float **wt, float **b, uint32_t dim)
{
    *wt = const_f32(w, dim, 1.0f);
    *b = w->n->card.arch.norm == CZ_NORM_LAYER ? const_f32(w, dim, 0.0f) : NULL;
}

static void rand_layer(wctx *w, cz__layer *L)
{
    cz_net *n = w->n;
    const cz_stage_card *c = &n->card;
    const cz_stage_arch *a = &c->arch;
    uint32_t H = c->hidden;
    rand_norm(w, &L->norm1_w, &L->norm1_b, H);
    L->qkv = rand_mat(w, n->qkv_w, H);
    L->qkv_b = a->qkv_bias ? const_f32(w, n->qkv_w, 0.0f) : NULL;
    if (a->qk_norm) {
        L->q_norm = const_f32(w, c->head_dim, 1.0f);
        L->k_norm = const_f32(w, c->head_dim, 1.0f);
    }
    L->o = rand_mat(w, H, n->qd);
    L->o_b = a->o_bias ? const_f32(w, H, 0.0f) : NULL;
    rand_norm(w, &L->norm2_w, &L->norm2_b, H);
    if (c->experts > 0) {
        cz_moe_weights *m = &L->moe;
        uint32_t E = c->experts, I = c->expert_intermediate, S = a->shared_expert_intermediate;
        size_t es = cz_dtype_size(w->dt);
        *m = (cz_moe_weights){.experts = E, .top_k = c->experts_active, .hidden = H,
                              .inter = I, .norm_topk_prob = a->norm_topk_prob, .dt = w->dt,
                              .shared_inter = S};
        void *router = cz__net_alloc(n, (size_t)E * H * es, true);
        void *gate_up = cz__net_alloc(n, (size_t)E * 2 * I * H * es, true);
        void *down = cz__net_alloc(n, (size_t)E * H * I * es, true);
        fill_normal(w, router, w->dt, (size_t)E * H, 1.0f / sqrtf((float)H));
        fill_normal(w, gate_up, w->dt, (size_t)E * 2 * I * H, 1.0f / sqrtf((float)H));
        fill_normal(w, down, w->dt, (size_t)E * H * I, 1.0f / sqrtf((float)I));
        m->router = router;
        m->gate_up = gate_up;
        m->down = down;
        if (S) {
            cz__mat sgu = rand_mat(w, 2 * S, H), sd = rand_mat(w, H, S), sg = rand_mat(w, 1, H);
            m->shared_gate_up = sgu.w;
            m->shared_down = sd.w;
            m->shared_gate = sg.w;
        }
    } else if (a->act == CZ_ACT_SILU) {
        L->up = rand_mat(w, 2 * c->intermediate, H);
        L->down = rand_mat(w, H, c->intermediate);
    } else {
        L->up = rand_mat(w, c->intermediate, H);
        L->up_b = const_f32(w, c->intermediate, 0.0f);
        L->down = rand_mat(w, H, c->intermediate);
        L->down_b = const_f32(w, H, 0.0f);
    }
}

void cz__net_random(cz_net *n, const cz_net_source *src)
{
    wctx w = {.n = n, .seed = src->seed, .dt = src->dtype};
    w.f = cz_xmalloc(CZ__CHUNK * sizeof(float));
    w.b = cz_xmalloc(CZ__CHUNK * sizeof(float));
    const cz_stage_card *c = &n->card;
    const cz_stage_arch *a = &c->arch;
    uint32_t H = c->hidden;
    if (c->kind == CZ_STAGE_AR) {
        n->embed = rand_mat(&w, c->vocab, H);
    } else if (c->kind == CZ_STAGE_VOCODER) {
        /* the codebooks' tables, each scaled by 1 / codebooks so their sum is the mean */
        uint32_t rows = a->codebooks * a->codebook_size;
        n->embed = (cz__mat){cz__net_alloc(n, (size_t)rows * H * cz_dtype_size(w.dt), true),
                             w.dt, rows, H};
        fill_normal(&w, n->embed.w, w.dt, (size_t)rows * H, 1.0f / a->codebooks);
    } else {
        uint32_t cin = a->input_dim, ds = a->downsample;
        n->conv_in_w = rand_f32(&w, (size_t)H * cin * ds, cin * ds);
        n->conv_in_b = const_f32(&w, H, 0.0f);
    }
    for (uint32_t l = 0; l < c->layers; l++)
        rand_layer(&w, &n->layers[l]);
    rand_norm(&w, &n->normf_w, &n->normf_b, H);
    if (c->kind == CZ_STAGE_AR)
        n->head = c->tied_embeddings ? n->embed : rand_mat(&w, c->vocab, H);
    if (c->kind == CZ_STAGE_ENCODER && a->output_dim) {
        n->out_proj = rand_mat(&w, a->output_dim, H);
        n->out_proj_b = const_f32(&w, a->output_dim, 0.0f);
    }
    if (c->kind == CZ_STAGE_VOCODER) {
        const uint32_t K = CZ__NET_CONV_K;
        uint32_t ch = a->decoder_dim;
        n->dec_in_w = rand_f32(&w, (size_t)ch * H * K, H * K);
        n->dec_in_b = const_f32(&w, ch, 0.0f);
        for (uint32_t i = 0; i < a->n_upsample; i++) {
            cz__up *u = &n->ups[i];
            u->cin = ch;
            u->cout = ch / 2;
            u->rate = a->upsample_rates[i];
            /* each output position sums cin x 2 inputs of the transposed kernel */
            u->up_w = rand_f32(&w, (size_t)u->cin * u->cout * 2 * u->rate, 2 * u->cin);
            u->up_b = const_f32(&w, u->cout, 0.0f);
            u->res_w = rand_f32(&w, (size_t)u->cout * u->cout * K, u->cout * K);
            u->res_b = const_f32(&w, u->cout, 0.0f);
            ch /= 2;
        }
        n->post_w = rand_f32(&w, (size_t)ch * K, ch * K);
        n->post_b = const_f32(&w, 1, 0.0f);
    }
    free(w.f);
    free(w.b);
}

/* ---- checkpoints ------------------------------------------------------------------------ */

static cz_dtype dt_of(cz_st_dtype d)
{
    return d == CZ_ST_F32 ? CZ_F32 : d == CZ_ST_BF16 ? CZ_BF16 : CZ_F16;
}

/* Element i of a tensor's bytes (not necessarily aligned) as float. */
static float elem(const uint8_t *p, cz_st_dtype d, size_t i)
{
    if (d == CZ_ST_F32) {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + i * 2, 2);
    return d == CZ_ST_BF16 ? cz_bf16_to_f32(h) : cz_f16_to_f32(h);
}

/* Copies tensor t's elements to dst (backend memory) as dtype dt: the bytes as they are
 * when dt is the tensor's, else widened (and narrowed) a chunk at a time. */
static void upload_as(wctx *w, void *dst, cz_dtype dt, const cz_st_tensor *t)
{
    if (dt_of(t->dtype) == dt) {
        cz_kmem_upload(w->n->k, dst, t->data, t->nbytes);
        return;
    }
    size_t count = t->nbytes / cz_st_dtype_size(t->dtype), es = cz_dtype_size(dt);
    for (size_t at = 0; at < count; at += CZ__CHUNK) {
        size_t m = count - at < CZ__CHUNK ? count - at : CZ__CHUNK;
        for (size_t i = 0; i < m; i++)
            w->f[i] = elem(t->data, t->dtype, at + i);
        narrow(w->b, w->f, dt, m);
        cz_kmem_upload(w->n->k, (char *)dst + at * es, w->b, m * es);
    }
}

/* Looks up a tensor of shape (d0) or (d0, d1) by a printf-formatted name. */
/* No element of t is NaN or infinite (the exponent bits all set). */
static bool all_finite(const cz_st_tensor *t)
{
    size_t es = cz_st_dtype_size(t->dtype), n = t->nbytes / es;
    const uint8_t *p = t->data;
    if (t->dtype == CZ_ST_F32) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            if ((u & 0x7F800000u) == 0x7F800000u)
                return false;
        }
        return true;
    }
    uint16_t mask = t->dtype == CZ_ST_BF16 ? 0x7F80u : 0x7C00u;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        if ((h & mask) == mask)
            return false;
    }
    return true;
}

static cz_status get(wctx *w, const cz_st_tensor **t, cz_err *err, uint32_t ndim, uint64_t d0,
                     uint64_t d1, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static cz_status get(wctx *w, const cz_st_tensor **t, cz_err *err, uint32_t ndim, uint64_t d0,
                     uint64_t d1, const char *fmt, ...)
{
    char name[CZ__NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    uint64_t shape[2] = {d0, d1};
    cz_status s = cz_st_get(w->st, name, ndim, shape, t, err);
    if (s != CZ_OK)
        return s;
    if (!all_finite(*t))
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': holds NaN or infinite values (a damaged or "
                          "overflowed checkpoint)",
                          (*t)->file, name);
    cz_grow((void **)&w->used, &w->cap_used, w->n_used + 1, sizeof *w->used);
    w->used[w->n_used++] = *t;
    return CZ_OK;
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* The checkpoint holds no tensor the model does not read: a layer past config.json's
 * count (the two disagree) or a weight of another architecture is refused, naming it;
 * rotary tables (HF recomputes them) and an lm_head beside tied embeddings are let be. */
static cz_status check_left_over(wctx *w, cz_err *err)
{
    const cz_stage_card *c = &w->n->card;
    qsort(w->used, w->n_used, sizeof *w->used, ptr_cmp);
    uint32_t n = cz_st_count(w->st);
    for (uint32_t i = 0; i < n; i++) {
        const cz_st_tensor *t = cz_st_at(w->st, i);
        if (bsearch(&t, w->used, w->n_used, sizeof *w->used, ptr_cmp))
            continue;
        size_t len = strlen(t->name);
        const char *rot = ".rotary_emb.inv_freq";
        if ((len >= strlen(rot) && strcmp(t->name + len - strlen(rot), rot) == 0) ||
            (c->tied_embeddings && strcmp(t->name, "lm_head.weight") == 0))
            continue;
        unsigned layer;
        int at = 0;
        if (sscanf(t->name, "model.layers.%u.%n", &layer, &at) == 1 && at > 0 &&
            layer >= c->layers)
            return cz_err_set(err, CZ_EFORMAT,
                              "%s: tensor '%s': layer %u, but config.json declares %u layers "
                              "(num_hidden_layers): the checkpoint and its config disagree",
                              t->file, t->name, layer, c->layers);
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s' is not a weight of the model config.json "
                          "describes (%u layers, %s): a checkpoint of another architecture?",
                          t->file, t->name, c->layers,
                          c->experts ? "mixture of experts" : "dense");
    }
    return CZ_OK;
}

/* The common dtype of ts[0..n), or F32 when they differ. */
static cz_dtype common_dt(const cz_st_tensor *const *ts, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (ts[i]->dtype != ts[0]->dtype)
            return CZ_F32;
    return dt_of(ts[0]->dtype);
}

/* A Linear weight stacked from parts ts[0..np) (each (rows_i, in)), rows in order. */
static cz__mat stack(wctx *w, const cz_st_tensor *const *ts, size_t np)
{
    cz__mat m = {NULL, common_dt(ts, np), 0, (uint32_t)ts[0]->shape[1]};
    for (size_t i = 0; i < np; i++)
        m.out += (uint32_t)ts[i]->shape[0];
    size_t es = cz_dtype_size(m.dt);
    m.w = cz__net_alloc(w->n, (size_t)m.out * m.in * es, true);
    size_t at = 0;
    for (size_t i = 0; i < np; i++) {
        upload_as(w, (char *)m.w + at * es, m.dt, ts[i]);
        at += (size_t)ts[i]->shape[0] * m.in;
    }
    return m;
}

/* A float32 vector from tensors ts[0..np) concatenated. */
static float *fvec(wctx *w, const cz_st_tensor *const *ts, size_t np)
{
    size_t count = 0;
    for (size_t i = 0; i < np; i++)
        count += ts[i]->shape[0];
    float *p = vec(w, count), *at = p;
    for (size_t i = 0; i < np; i++) {
        upload_as(w, at, CZ_F32, ts[i]);
        at += ts[i]->shape[0];
    }
    return p;
}

static cz_status load_moe(wctx *w, uint32_t l, cz__layer *L, cz_err *err)
{
    const cz_stage_card *c = &w->n->card;
    uint32_t H = c->hidden, E = c->experts, I = c->expert_intermediate;
    uint32_t S = c->arch.shared_expert_intermediate;
    const char *p = "model.layers";
    size_t nt = 1 + 3 * (size_t)E;
    const cz_st_tensor **ts = cz_xcalloc(nt + 4, sizeof *ts);
    cz_status s = get(w, &ts[0], err, 2, E, H, "%s.%u.mlp.gate.weight", p, l);
    for (uint32_t e = 0; e < E && s == CZ_OK; e++) {
        if ((s = get(w, &ts[1 + 3 * e], err, 2, I, H, "%s.%u.mlp.experts.%u.gate_proj.weight",
                     p, l, e)) != CZ_OK ||
            (s = get(w, &ts[2 + 3 * e], err, 2, I, H, "%s.%u.mlp.experts.%u.up_proj.weight", p,
                     l, e)) != CZ_OK)
            break;
        s = get(w, &ts[3 + 3 * e], err, 2, H, I, "%s.%u.mlp.experts.%u.down_proj.weight", p, l,
                e);
    }
    if (s == CZ_OK && S &&
        ((s = get(w, &ts[nt], err, 2, S, H, "%s.%u.mlp.shared_expert.gate_proj.weight", p,
                  l)) != CZ_OK ||
         (s = get(w, &ts[nt + 1], err, 2, S, H, "%s.%u.mlp.shared_expert.up_proj.weight", p,
                  l)) != CZ_OK ||
         (s = get(w, &ts[nt + 2], err, 2, H, S, "%s.%u.mlp.shared_expert.down_proj.weight", p,
                  l)) != CZ_OK ||
         (s = get(w, &ts[nt + 3], err, 2, 1, H, "%s.%u.mlp.shared_expert_gate.weight", p, l)) !=
             CZ_OK))
        S = 0;
    if (s != CZ_OK) {
        free(ts);
        return s;
    }
    cz_dtype dt = common_dt(ts, S ? nt + 4 : nt);
    size_t es = cz_dtype_size(dt);
    cz_moe_weights *m = &L->moe;
    *m = (cz_moe_weights){.experts = E, .top_k = c->experts_active, .hidden = H, .inter = I,
                          .norm_topk_prob = c->arch.norm_topk_prob, .dt = dt,
                          .shared_inter = S};
    char *router = cz__net_alloc(w->n, (size_t)E * H * es, true);
    char *gate_up = cz__net_alloc(w->n, (size_t)E * 2 * I * H * es, true);
    char *down = cz__net_alloc(w->n, (size_t)E * H * I * es, true);
    upload_as(w, router, dt, ts[0]);
    size_t xs = (size_t)I * H * es;
    for (uint32_t e = 0; e < E; e++) {
        upload_as(w, gate_up + 2 * e * xs, dt, ts[1 + 3 * e]);
        upload_as(w, gate_up + (2 * e + 1) * xs, dt, ts[2 + 3 * e]);
        upload_as(w, down + e * xs, dt, ts[3 + 3 * e]);
    }
    m->router = router;
    m->gate_up = gate_up;
    m->down = down;
    if (S) {
        char *sgu = cz__net_alloc(w->n, (size_t)2 * S * H * es, true);
        char *sd = cz__net_alloc(w->n, (size_t)H * S * es, true);
        char *sg = cz__net_alloc(w->n, (size_t)H * es, true);
        upload_as(w, sgu, dt, ts[nt]);
        upload_as(w, sgu + (size_t)S * H * es, dt, ts[nt + 1]);
        upload_as(w, sd, dt, ts[nt + 2]);
        upload_as(w, sg, dt, ts[nt + 3]);
        m->shared_gate_up = sgu;
        m->shared_down = sd;
        m->shared_gate = sg;
    }
    free(ts);
    return CZ_OK;
}

static cz_status load_layer(wctx *w, uint32_t l, cz__layer *L, cz_err *err)
{
    cz_net *n = w->n;
    const cz_stage_card *c = &n->card;
    const cz_stage_arch *a = &c->arch;
    uint32_t H = c->hidden, hd = c->head_dim;
    const char *p = "model.layers";
    const cz_st_tensor *n1, *n2, *qkv[3], *o, *b[3], *ob, *qn, *kn;
    cz_status s;
    if ((s = get(w, &n1, err, 1, H, 0, "%s.%u.input_layernorm.weight", p, l)) != CZ_OK ||
        (s = get(w, &n2, err, 1, H, 0, "%s.%u.post_attention_layernorm.weight", p, l)) !=
            CZ_OK ||
        (s = get(w, &qkv[0], err, 2, n->qd, H, "%s.%u.self_attn.q_proj.weight", p, l)) !=
            CZ_OK ||
        (s = get(w, &qkv[1], err, 2, n->kvd, H, "%s.%u.self_attn.k_proj.weight", p, l)) !=
            CZ_OK ||
        (s = get(w, &qkv[2], err, 2, n->kvd, H, "%s.%u.self_attn.v_proj.weight", p, l)) !=
            CZ_OK ||
        (s = get(w, &o, err, 2, H, n->qd, "%s.%u.self_attn.o_proj.weight", p, l)) != CZ_OK)
        return s;
    if (a->qkv_bias &&
        ((s = get(w, &b[0], err, 1, n->qd, 0, "%s.%u.self_attn.q_proj.bias", p, l)) != CZ_OK ||
         (s = get(w, &b[1], err, 1, n->kvd, 0, "%s.%u.self_attn.k_proj.bias", p, l)) != CZ_OK ||
         (s = get(w, &b[2], err, 1, n->kvd, 0, "%s.%u.self_attn.v_proj.bias", p, l)) != CZ_OK))
        return s;
    if (a->o_bias && (s = get(w, &ob, err, 1, H, 0, "%s.%u.self_attn.o_proj.bias", p, l)) != CZ_OK)
        return s;
    if (a->qk_norm &&
        ((s = get(w, &qn, err, 1, hd, 0, "%s.%u.self_attn.q_norm.weight", p, l)) != CZ_OK ||
         (s = get(w, &kn, err, 1, hd, 0, "%s.%u.self_attn.k_norm.weight", p, l)) != CZ_OK))
        return s;
    const cz_st_tensor *gu[2] = {NULL, NULL}, *dn = NULL;
    if (!c->experts &&
        ((s = get(w, &gu[0], err, 2, c->intermediate, H, "%s.%u.mlp.gate_proj.weight", p, l)) !=
             CZ_OK ||
         (s = get(w, &gu[1], err, 2, c->intermediate, H, "%s.%u.mlp.up_proj.weight", p, l)) !=
             CZ_OK ||
         (s = get(w, &dn, err, 2, H, c->intermediate, "%s.%u.mlp.down_proj.weight", p, l)) !=
             CZ_OK))
        return s;
    if (c->experts && (s = load_moe(w, l, L, err)) != CZ_OK)
        return s;

    L->norm1_w = fvec(w, &n1, 1);
    L->norm2_w = fvec(w, &n2, 1);
    L->qkv = stack(w, qkv, 3);
    L->qkv_b = a->qkv_bias ? fvec(w, b, 3) : NULL;
    L->o = stack(w, &o, 1);
    L->o_b = a->o_bias ? fvec(w, &ob, 1) : NULL;
    if (a->qk_norm) {
        L->q_norm = fvec(w, &qn, 1);
        L->k_norm = fvec(w, &kn, 1);
    }
    if (!c->experts) {
        L->up = stack(w, gu, 2);
        L->down = stack(w, &dn, 1);
    }
    return CZ_OK;
}

cz_status cz__net_load(cz_net *n, const cz_safetensors *st, cz_err *err)
{
    const cz_stage_card *c = &n->card;
    CZ_ASSERT(c->kind == CZ_STAGE_AR);
    if (c->arch.norm != CZ_NORM_RMS || c->arch.act != CZ_ACT_SILU)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: stage '%s': checkpoints are read for RMSNorm decoders with gated "
                          "SiLU MLPs (Llama, Qwen2, Qwen3, Qwen3-MoE), not norm \"%s\" / "
                          "activation \"%s\"",
                          cz_st_path(st), c->name, c->arch.norm == CZ_NORM_RMS ? "rms" : "layer",
                          c->arch.act == CZ_ACT_SILU ? "silu" : "gelu");
    wctx w = {.n = n, .st = st};
    w.f = cz_xmalloc(CZ__CHUNK * sizeof(float));
    w.b = cz_xmalloc(CZ__CHUNK * sizeof(float));
    uint32_t H = c->hidden;
    const cz_st_tensor *emb, *nf, *head = NULL;
    cz_status s;
    if ((s = get(&w, &emb, err, 2, c->vocab, H, "model.embed_tokens.weight")) != CZ_OK ||
        (s = get(&w, &nf, err, 1, H, 0, "model.norm.weight")) != CZ_OK ||
        (!c->tied_embeddings &&
         (s = get(&w, &head, err, 2, c->vocab, H, "lm_head.weight")) != CZ_OK))
        goto done;
    for (uint32_t l = 0; l < c->layers; l++)
        if ((s = load_layer(&w, l, &n->layers[l], err)) != CZ_OK)
            goto done;
    if ((s = check_left_over(&w, err)) != CZ_OK)
        goto done;
    n->embed = stack(&w, &emb, 1);
    n->normf_w = fvec(&w, &nf, 1);
    n->head = head ? stack(&w, &head, 1) : n->embed;
done:
    free(w.f);
    free(w.b);
    free(w.used);
    return s;
}
