/* moe_ffn.c - a mixture-of-experts feed-forward layer (Qwen2-MoE / Qwen3-MoE): router,
 * softmax over all experts then top-k (renormalised when norm_topk_prob), tokens grouped
 * by expert (in token order), one gathered GEMM chain per expert (gate/up, SwiGLU, down)
 * through cz_cpu_matmul, and a weighted scatter-add back to the tokens, experts in
 * increasing order (so the sum's order, and the result, is fixed); then the shared
 * expert scaled by its sigmoid gate. Every buffer is the context's reserved scratch. */
#include <math.h>
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    cz_kctx *k;
    float *out;
    const float *x;
    const cz_moe_weights *w;
    uint32_t dim;            /* row width for gather and scatter */
    const int32_t *tok;      /* expert's tokens */
    const float *tokw;       /* their weights */
    const float *y;          /* expert's outputs (c, hidden) */
} moe_job;

/* Routing of tokens [b, e): softmax over experts, top-k, optional renormalisation. */
static void route_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const moe_job *j = p;
    const cz_moe_weights *w = j->w;
    uint32_t ne = w->experts;
    for (size_t t = b; t < e; t++) {
        float *pr = j->k->moe_logits + t * ne;
        float mx = pr[0], sum = 0.0f;
        for (uint32_t i = 1; i < ne; i++)
            if (pr[i] > mx)
                mx = pr[i];
        for (uint32_t i = 0; i < ne; i++) {
            pr[i] = expf(pr[i] - mx);
            sum += pr[i];
        }
        int32_t *ids = j->k->moe_ids + t * w->top_k;
        float *wt = j->k->moe_w + t * w->top_k, kept = 0.0f;
        for (uint32_t c = 0; c < w->top_k; c++) {
            int32_t best = -1;
            for (uint32_t i = 0; i < ne; i++) {
                bool taken = false;
                for (uint32_t d = 0; d < c && !taken; d++)
                    taken = ids[d] == (int32_t)i;
                if (!taken && (best < 0 || pr[i] > pr[best]))
                    best = (int32_t)i;
            }
            ids[c] = best;
            wt[c] = pr[best] / sum;
            kept += wt[c];
        }
        if (w->norm_topk_prob)
            for (uint32_t c = 0; c < w->top_k; c++)
                wt[c] /= kept;
    }
}

static void gather_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const moe_job *j = p;
    for (size_t i = b; i < e; i++)
        memcpy(j->k->moe_x + i * j->dim, j->x + (size_t)j->tok[i] * j->dim,
               j->dim * sizeof(float));
}

static void scatter_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const moe_job *j = p;
    for (size_t i = b; i < e; i++)
        cz__axpy(j->out + (size_t)j->tok[i] * j->dim, j->tokw[i], j->y + i * j->dim, j->dim);
}

/* out[t] += sigmoid(gate[t]) x y[t] over tokens [b, e) (the shared expert). */
static void shared_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const moe_job *j = p;
    for (size_t t = b; t < e; t++) {
        float g = 1.0f / (1.0f + expf(-j->k->moe_logits[t]));
        cz__axpy(j->out + t * j->dim, g, j->y + t * j->dim, j->dim);
    }
}

void cz_cpu_moe_ffn(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                    uint32_t n)
{
    uint32_t ne = w->experts, h = w->hidden, in = w->inter, si = w->shared_inter;
    const cz_kreserve *r = &k->res;
    CZ_ASSERT(n <= r->max_rows && ne <= r->max_experts && w->top_k >= 1 && w->top_k <= ne);
    CZ_ASSERT(h <= r->max_moe_dim && 2 * in <= r->max_moe_dim && 2 * si <= r->max_moe_dim);
    if (!n)
        return;
    size_t es = cz_dtype_size(w->dt);
    moe_job j = {k, out, x, w, h, k->moe_tok, k->moe_tokw, k->moe_y};

    cz_cpu_matmul(k, k->moe_logits, x, w->router, w->dt, NULL, n, ne, h);
    cz__kpar(k, n, 1, 1 + 4096 / ((size_t)ne * w->top_k + 1), route_range, &j);

    /* group by expert: counts, then start offsets, then the lists in token order; after
     * the fill, moe_count[e] is where expert e's list ends */
    int32_t *cnt = k->moe_count;
    memset(cnt, 0, ((size_t)ne + 1) * sizeof *cnt);
    for (size_t i = 0; i < (size_t)n * w->top_k; i++)
        cnt[k->moe_ids[i]]++;
    for (uint32_t e = 0, at = 0; e < ne; e++) {
        uint32_t c = (uint32_t)cnt[e];
        cnt[e] = (int32_t)at;
        at += c;
    }
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t c = 0; c < w->top_k; c++) {
            int32_t e = k->moe_ids[(size_t)t * w->top_k + c];
            k->moe_tok[cnt[e]] = (int32_t)t;
            k->moe_tokw[cnt[e]] = k->moe_w[(size_t)t * w->top_k + c];
            cnt[e]++;
        }

    memset(out, 0, (size_t)n * h * sizeof(float));
    for (uint32_t e = 0; e < ne; e++) {
        uint32_t start = e ? (uint32_t)cnt[e - 1] : 0, c = (uint32_t)cnt[e] - start;
        if (!c)
            continue;
        j.tok = k->moe_tok + start;
        j.tokw = k->moe_tokw + start;
        cz__kpar(k, c, 1, 1 + 16384 / h, gather_range, &j);
        const char *gu = (const char *)w->gate_up + (size_t)e * 2 * in * h * es;
        const char *dn = (const char *)w->down + (size_t)e * h * in * es;
        cz_cpu_matmul(k, k->moe_gu, k->moe_x, gu, w->dt, NULL, c, 2 * in, h);
        cz_cpu_silu_mul(k, k->moe_act, k->moe_gu, c, in);
        cz_cpu_matmul(k, k->moe_y, k->moe_act, dn, w->dt, NULL, c, h, in);
        cz__kpar(k, c, 1, 1 + 16384 / h, scatter_range, &j);
    }

    if (si) {
        cz_cpu_matmul(k, k->moe_gu, x, w->shared_gate_up, w->dt, NULL, n, 2 * si, h);
        cz_cpu_silu_mul(k, k->moe_act, k->moe_gu, n, si);
        cz_cpu_matmul(k, k->moe_y, k->moe_act, w->shared_down, w->dt, NULL, n, h, si);
        cz_cpu_matmul(k, k->moe_logits, x, w->shared_gate, w->dt, NULL, n, 1, h);
        cz__kpar(k, n, 1, 1 + 16384 / h, shared_range, &j);
    }
}
