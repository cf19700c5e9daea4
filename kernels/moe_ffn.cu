/* moe_ffn.cu - the CUDA twin of moe_ffn.c: a mixture-of-experts feed-forward layer
 * (Qwen2-MoE / Qwen3-MoE) on the context's stream, with moe_ffn.c's semantics and order.
 *
 * 1. Router logits (n, experts) in float32: x . router^T through cz__cuda_gemm, whose
 *    16-bit path at n <= CZ__CUDA_GEMV_MAX_M keeps x in float32; for more tokens 16-bit
 *    router weights are first widened into scratch (cz__k_moe_widen) and go through
 *    Sgemm, so routing decisions never see bf16-rounded activations.
 * 2. cz__k_moe_route, one warp per token (blocks of CZ__MOE_ROUTE_WARPS warps): softmax
 *    over the experts, then top_k passes each taking the most probable expert not yet
 *    taken (equal probabilities: the lower id, as moe_ffn.c), weight p / sum, and with
 *    norm_topk_prob each weight divided by the kept sum (summed in slot order).
 * 3. cz__k_moe_group, one block per expert: counts the (token, slot) entries routed to
 *    it and those routed to lower experts (its list's start), then writes its entries in
 *    token order (a block-wide ordered compaction), so the lists are moe_ffn.c's.
 * 4. The experts' counts go to the pinned host scratch with one cudaMemcpyAsync and one
 *    cudaStreamSynchronize: the layer's one host sync, so the host can size each expert's
 *    GEMMs (no device-side grouped GEMM).
 * 5. out = 0; then for each expert with tokens, in increasing id: gather its tokens' rows
 *    (cz__k_moe_gather), gate_up GEMM, SwiGLU (cz__k_moe_swiglu), down GEMM, and
 *    out[token] += weight x y (cz__k_moe_scatter; a token appears at most once per
 *    expert, so no two threads add to one element and the sum runs in moe_ffn.c's order:
 *    experts in increasing id, deterministic without atomics).
 * 6. The shared expert: gate_up, SwiGLU and down GEMMs over all tokens, its gate logit
 *    x . shared_gate, and out += sigmoid(gate) x y (cz__k_moe_shared).
 * The element-wise kernels are grid-stride loops of CZ__MOE_THREADS threads a block.
 * Every buffer is the context's scratch, laid out by cz__moe_plan from the reserve. */
#include <math.h>
#include <stdint.h>

#include "cz_kcuda.h"

#define CZ__MOE_THREADS 256u
#define CZ__MOE_ROUTE_WARPS 4u
#define CZ__MOE_GROUP_THREADS 256u

/* Byte offsets into the scratch of the buffers of one layer. R = max_rows, E =
 * max_experts, D = max_moe_dim. */
typedef struct cz__moe_layout {
    size_t logits;  /* (R, E) float: router logits, then probabilities; shared gate (R) */
    size_t ids;     /* (R x E) int32: each token's experts, slot order (n x top_k used) */
    size_t wts;     /* (R x E) float: their routing weights */
    size_t list;    /* (R x E) int32: entries t x top_k + slot grouped by expert */
    size_t counts;  /* (E) int32: entries per expert */
    size_t rw;      /* (E, D) float: 16-bit router weights widened */
    size_t xg;      /* (R, D) float: an expert's gathered rows */
    size_t gu;      /* (R, D) float: gate/up projections */
    size_t act;     /* (R, D) float: SwiGLU */
    size_t y;       /* (R, D) float: down projection */
    size_t xs;      /* (R, D) 16-bit: cz__cuda_gemm's copy of x */
    size_t xs_bytes;
    size_t total;
} cz__moe_layout;

static size_t cz__moe_round(size_t b)
{
    return (b + 255) / 256 * 256;
}

/* The layout for reserve r (total 0 without MoE layers). */
static void cz__moe_plan(const cz_kreserve *r, cz__moe_layout *L)
{
    size_t R = r->max_rows, E = r->max_experts, D = r->max_moe_dim ? r->max_moe_dim : r->max_dim;
    size_t at = 0;
    L->logits = at;
    at += cz__moe_round(R * E * sizeof(float));
    L->ids = at;
    at += cz__moe_round(R * E * sizeof(int32_t));
    L->wts = at;
    at += cz__moe_round(R * E * sizeof(float));
    L->list = at;
    at += cz__moe_round(R * E * sizeof(int32_t));
    L->counts = at;
    at += cz__moe_round(E * sizeof(int32_t));
    L->rw = at;
    at += cz__moe_round(E * D * sizeof(float));
    L->xg = at;
    at += cz__moe_round(R * D * sizeof(float));
    L->gu = at;
    at += cz__moe_round(R * D * sizeof(float));
    L->act = at;
    at += cz__moe_round(R * D * sizeof(float));
    L->y = at;
    at += cz__moe_round(R * D * sizeof(float));
    L->xs = at;
    L->xs_bytes = cz__moe_round(R * D * 2);
    at += L->xs_bytes;
    L->total = E ? at : 0;
}

/* rw[i] = router[i] widened to float32, i < count. */
static __global__ void cz__k_moe_widen(float *rw, const void *router, cz_dtype dt, size_t count)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        rw[i] = cz__cuda_ld(router, dt, i);
}

/* Routing, warp t%CZ__MOE_ROUTE_WARPS of block t/CZ__MOE_ROUTE_WARPS for token t: pr
 * (n, ne) holds the logits and is left holding exp(logit - max) with the taken experts
 * set to -1; ids and wts (n, top_k) receive the experts and their weights. Lane j owns
 * experts j, j + 32, ...; the sums meet in butterflies (the same value in every lane),
 * each pass's best (probability, then lower id) is lane 0's after its butterfly. */
static __global__ void cz__k_moe_route(float *pr, int32_t *ids, float *wts, uint32_t n,
                                       uint32_t ne, uint32_t top_k, bool norm)
{
    const unsigned full = 0xffffffffu;
    uint32_t t = blockIdx.x * CZ__MOE_ROUTE_WARPS + threadIdx.x / 32u, lane = threadIdx.x & 31u;
    if (t >= n)
        return;
    float *p = pr + (size_t)t * ne;
    int32_t *id = ids + (size_t)t * top_k;
    float *wt = wts + (size_t)t * top_k;
    float mx = -INFINITY, sum = 0.0f, kept = 0.0f;
    for (uint32_t i = lane; i < ne; i += 32)
        mx = fmaxf(mx, p[i]);
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(full, mx, off));
    for (uint32_t i = lane; i < ne; i += 32) {
        float v = expf(p[i] - mx);
        p[i] = v;
        sum += v;
    }
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(full, sum, off);
    for (uint32_t s = 0; s < top_k; s++) {
        /* the lane's best untaken expert (taken ones hold -1; probabilities are >= 0) */
        float bv = 0.0f;
        int32_t bi = -1;
        for (uint32_t i = lane; i < ne; i += 32) {
            float v = p[i];
            if (!(v < 0.0f) && (bi < 0 || v > bv)) {
                bv = v;
                bi = (int32_t)i;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ov = __shfl_xor_sync(full, bv, off);
            int32_t oi = __shfl_xor_sync(full, bi, off);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
                bv = ov;
                bi = oi;
            }
        }
        bv = __shfl_sync(full, bv, 0);
        bi = __shfl_sync(full, bi, 0);
        float wv = bv / sum;
        kept += wv;
        if (lane == 0) {
            id[s] = bi;
            wt[s] = wv;
        }
        if ((uint32_t)bi % 32u == lane)
            p[bi] = -1.0f;
        __syncwarp();
    }
    if (norm && lane == 0)
        for (uint32_t s = 0; s < top_k; s++)
            wt[s] /= kept;
}

/* Block e (CZ__MOE_GROUP_THREADS threads): counts[e] = entries i < total (i = token x
 * top_k + slot) with ids[i] == e, written to list[start ..) in increasing i, start being
 * the number of entries routed to lower experts. */
static __global__ void cz__k_moe_group(int32_t *counts, int32_t *list, const int32_t *ids,
                                       uint32_t total)
{
    __shared__ uint32_t warp_hits[CZ__MOE_GROUP_THREADS / 32];
    int32_t e = (int32_t)blockIdx.x;
    uint32_t tid = threadIdx.x, lane = tid & 31u, wid = tid / 32u;
    uint32_t below = 0, mine = 0;
    for (uint32_t b = 0; b < total; b += CZ__MOE_GROUP_THREADS) {
        uint32_t i = b + tid;
        int32_t v = i < total ? ids[i] : INT32_MAX;
        below += (uint32_t)__syncthreads_count(v < e);
        mine += (uint32_t)__syncthreads_count(v == e);
    }
    if (tid == 0)
        counts[e] = (int32_t)mine;
    uint32_t at = below;
    for (uint32_t b = 0; b < total; b += CZ__MOE_GROUP_THREADS) {
        uint32_t i = b + tid;
        bool hit = i < total && ids[i] == e;
        unsigned mask = __ballot_sync(0xffffffffu, hit);
        if (lane == 0)
            warp_hits[wid] = (uint32_t)__popc(mask);
        __syncthreads();
        uint32_t before = 0, all = 0;
        for (uint32_t q = 0; q < CZ__MOE_GROUP_THREADS / 32; q++) {
            before += q < wid ? warp_hits[q] : 0;
            all += warp_hits[q];
        }
        if (hit)
            list[at + before + (uint32_t)__popc(mask & ((1u << lane) - 1u))] = (int32_t)i;
        __syncthreads(); /* warp_hits is rewritten next round */
        at += all;
    }
}

/* xg (cnt, h) = rows list[i] / top_k of x (*, h). */
static __global__ void cz__k_moe_gather(float *xg, const float *x, const int32_t *list,
                                        uint32_t top_k, uint32_t cnt, uint32_t h)
{
    size_t count = (size_t)cnt * h, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        size_t r = i / h, col = i % h;
        xg[i] = x[(size_t)(list[r] / (int32_t)top_k) * h + col];
    }
}

/* act (cnt, inter) = silu(gu[:, :inter]) * gu[:, inter:], gu (cnt, 2 inter); silu as
 * silu_mul.c writes it. */
static __global__ void cz__k_moe_swiglu(float *act, const float *gu, uint32_t cnt,
                                        uint32_t inter)
{
    size_t count = (size_t)cnt * inter, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        size_t r = i / inter, j = i % inter;
        float g = gu[r * 2 * inter + j], u = gu[r * 2 * inter + inter + j];
        act[i] = g / (1.0f + expf(-g)) * u;
    }
}

/* out[list[i] / top_k] += wts[list[i]] x y[i] over the cnt rows of y (cnt, h); the rows'
 * tokens are distinct. */
static __global__ void cz__k_moe_scatter(float *out, const float *y, const int32_t *list,
                                         const float *wts, uint32_t top_k, uint32_t cnt,
                                         uint32_t h)
{
    size_t count = (size_t)cnt * h, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        size_t r = i / h, col = i % h;
        int32_t ent = list[r];
        out[(size_t)(ent / (int32_t)top_k) * h + col] += wts[ent] * y[i];
    }
}

/* out (n, h) += sigmoid(gate[t]) x y[t] (the shared expert). */
static __global__ void cz__k_moe_shared(float *out, const float *y, const float *gate,
                                        uint32_t n, uint32_t h)
{
    size_t count = (size_t)n * h, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        float g = 1.0f / (1.0f + expf(-gate[i / h]));
        out[i] += g * y[i];
    }
}

static unsigned cz__moe_blocks(size_t count)
{
    return cz__cuda_blocks(count, CZ__MOE_THREADS);
}

extern "C" void cz_cuda_moe_ffn(cz_kctx *k, float *out, const float *x, const cz_moe_weights *w,
                                uint32_t n)
{
    cz__kcuda *c = cz__cu(k);
    const cz_kreserve *r = &c->res;
    uint32_t ne = w->experts, top_k = w->top_k, h = w->hidden, in = w->inter;
    uint32_t si = w->shared_inter;
    uint32_t dmax = r->max_moe_dim ? r->max_moe_dim : r->max_dim;
    CZ_ASSERT(n <= r->max_rows && ne <= r->max_experts && top_k >= 1 && top_k <= ne);
    CZ_ASSERT(h <= dmax && 2 * (size_t)in <= dmax && 2 * (size_t)si <= dmax);
    if (!n)
        return;
    cz__moe_layout L;
    cz__moe_plan(r, &L);
    CZ_ASSERT(L.total <= c->scratch_bytes);
    char *s = (char *)c->scratch;
    float *logits = (float *)(s + L.logits), *wts = (float *)(s + L.wts);
    int32_t *ids = (int32_t *)(s + L.ids), *list = (int32_t *)(s + L.list);
    int32_t *counts = (int32_t *)(s + L.counts);
    float *rw = (float *)(s + L.rw), *xg = (float *)(s + L.xg), *gu = (float *)(s + L.gu);
    float *act = (float *)(s + L.act), *y = (float *)(s + L.y);
    void *xs = s + L.xs;
    cudaStream_t st = c->stream;
    cz_dtype dt = w->dt;
    size_t es = cz_dtype_size(dt);
    CZ_ASSERT((uint64_t)n * top_k <= UINT32_MAX);
    uint32_t total = n * top_k;

    /* 1-3: route and group */
    if (dt == CZ_F32 || n <= CZ__CUDA_GEMV_MAX_M) {
        cz__cuda_gemm(c, logits, x, w->router, dt, NULL, n, ne, h, xs, L.xs_bytes);
    } else {
        cz__k_moe_widen<<<cz__moe_blocks((size_t)ne * h), CZ__MOE_THREADS, 0, st>>>(
            rw, w->router, dt, (size_t)ne * h);
        CZ_CUDA_LAUNCHED(c);
        cz__cuda_gemm(c, logits, x, rw, CZ_F32, NULL, n, ne, h, NULL, 0);
    }
    cz__k_moe_route<<<(n + CZ__MOE_ROUTE_WARPS - 1) / CZ__MOE_ROUTE_WARPS,
                      CZ__MOE_ROUTE_WARPS * 32, 0, st>>>(logits, ids, wts, n, ne, top_k,
                                                         w->norm_topk_prob);
    CZ_CUDA_LAUNCHED(c);
    cz__k_moe_group<<<ne, CZ__MOE_GROUP_THREADS, 0, st>>>(counts, list, ids, total);
    CZ_CUDA_LAUNCHED(c);
    CZ_CUDA_CHECK(c, cudaMemsetAsync(out, 0, (size_t)n * h * sizeof(float), st));

    /* 4: the one host sync of the layer */
    int32_t *hc = (int32_t *)c->hscratch;
    if (!CZ_CUDA_CHECK(c, cudaMemcpyAsync(hc, counts, ne * sizeof(int32_t),
                                          cudaMemcpyDeviceToHost, st)) ||
        !CZ_CUDA_CHECK(c, cudaStreamSynchronize(st)) || c->err.status != CZ_OK)
        return; /* a failure is recorded: the counts cannot be trusted */
    {
        uint64_t sum = 0;
        for (uint32_t e = 0; e < ne; e++) {
            CZ_ASSERT(hc[e] >= 0 && (uint32_t)hc[e] <= n);
            sum += (uint32_t)hc[e];
        }
        CZ_ASSERT(sum == total);
    }

    /* 5: the routed experts, in increasing id */
    uint32_t start = 0;
    for (uint32_t e = 0; e < ne; e++) {
        uint32_t cnt = (uint32_t)hc[e];
        if (!cnt)
            continue;
        const int32_t *le = list + start;
        const char *wgu = (const char *)w->gate_up + (size_t)e * 2 * in * h * es;
        const char *wdn = (const char *)w->down + (size_t)e * h * in * es;
        cz__k_moe_gather<<<cz__moe_blocks((size_t)cnt * h), CZ__MOE_THREADS, 0, st>>>(
            xg, x, le, top_k, cnt, h);
        CZ_CUDA_LAUNCHED(c);
        cz__cuda_gemm(c, gu, xg, wgu, dt, NULL, cnt, 2 * in, h, xs, L.xs_bytes);
        cz__k_moe_swiglu<<<cz__moe_blocks((size_t)cnt * in), CZ__MOE_THREADS, 0, st>>>(
            act, gu, cnt, in);
        CZ_CUDA_LAUNCHED(c);
        cz__cuda_gemm(c, y, act, wdn, dt, NULL, cnt, h, in, xs, L.xs_bytes);
        cz__k_moe_scatter<<<cz__moe_blocks((size_t)cnt * h), CZ__MOE_THREADS, 0, st>>>(
            out, y, le, wts, top_k, cnt, h);
        CZ_CUDA_LAUNCHED(c);
        start += cnt;
    }

    /* 6: the shared expert */
    if (si) {
        cz__cuda_gemm(c, gu, x, w->shared_gate_up, dt, NULL, n, 2 * si, h, xs, L.xs_bytes);
        cz__k_moe_swiglu<<<cz__moe_blocks((size_t)n * si), CZ__MOE_THREADS, 0, st>>>(act, gu, n,
                                                                                     si);
        CZ_CUDA_LAUNCHED(c);
        cz__cuda_gemm(c, y, act, w->shared_down, dt, NULL, n, h, si, xs, L.xs_bytes);
        cz__cuda_gemm(c, logits, x, w->shared_gate, dt, NULL, n, 1, h, xs, L.xs_bytes);
        cz__k_moe_shared<<<cz__moe_blocks((size_t)n * h), CZ__MOE_THREADS, 0, st>>>(out, y,
                                                                                    logits, n, h);
        CZ_CUDA_LAUNCHED(c);
    }
}

/* The layer's buffers at the reserve's shapes (cz__moe_plan). */
size_t cz__cuda_moe_scratch_bytes(const cz_kreserve *r)
{
    cz__moe_layout L;
    cz__moe_plan(r, &L);
    return L.total;
}
