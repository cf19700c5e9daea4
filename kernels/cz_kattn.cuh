/* cz_kattn.cuh - the CUDA core both attention ops share (attn_paged.cu, attn_dense.cu;
 * the CPU's is cz_attn.c): one kernel template running flash attention's online softmax
 * in float32 over a tile of queries that share a KV head, with flash-decoding's split of
 * the keys into partitions. Device code and its launch helpers, included by the two .cu
 * files only (static functions and templates: each translation unit gets its own copy,
 * the build having no relocatable device code).
 *
 * cz__ka_attend<NT, DCH, PAGED>: grid (tile slots, KV heads x head chunks, partitions),
 * NT threads (64 for head_dim <= 64, else 128), DCH = ceil(head_dim / NT) dimensions per
 * thread, CZ__KA_TK = 32 keys per step, about 27 KiB of static shared memory.
 *   - A work item is (tile, head chunk, partition). A tile is up to `rt` consecutive query
 *     rows of one sequence, a head chunk up to `hchunk` query heads of one GQA group, with
 *     rt x hchunk <= QMAX (16, 8 or 4 queries by head width), so every K and V row a block
 *     loads serves all of its queries (a decode reads each KV row once per KV head).
 *   - The host does not know qsl (device memory), so blocks walk tile slots x =
 *     blockIdx.x, x + gridDim.x, ... and find tile x by a block-wide scan of the sequences'
 *     tile counts (cz__ka_tile); any batch is served whatever the grid, which the host
 *     sizes from what it knows (n_seqs, the reserve, the SM count).
 *   - The keys a tile reads are the union of its queries' kept positions: the sinks
 *     [0, n_s) and the window [lo, hi], walked in "kept index" space (index i is position
 *     i below n_s, lo + i - n_s above). Every position read is kept by some query of the
 *     tile, so the blocks the contract lets be -1, and whatever the caller left in
 *     positions no query keeps, are never read.
 *   - A step of 32 keys: their row offsets (block table read once per key); K staged in
 *     shared memory NT dimensions at a time, widened to float32, each row padded by one
 *     float (lane t reads row t: no bank conflicts), by 16-byte loads, four in flight per
 *     thread, where the rows allow (kvec; else one element a load); lane t of warp w
 *     scores key t for queries w, w + NW, ... (queries pre-scaled); the warp owning a
 *     query folds its 32 scores into the running max m and sum l with shuffles and writes
 *     p = exp(s - m); then thread tid accumulates dimensions tid + NT i of every query's
 *     output over the 32 keys, reading V straight from global memory (coalesced along the
 *     row, widened; the loop unrolled so that 8 keys' loads, 4 for heads over 128, are
 *     issued together). A block runs 2 or 4 warps and a step is slow (28 to 50 us of an
 *     H100's SM time, docs/kernels.md), which is why the split below gives a partition
 *     few steps.
 *   - Split-KV (parts > 1, paged only): partition z of a work item covers kept indices
 *     [z part_len, (z + 1) part_len), the last one running to the end, and writes its
 *     unnormalised output, m and l per (row, head) to scratch; cz__ka_merge (attn_paged.cu)
 *     combines the partitions. Whether a launch splits is decided on the device: when the
 *     batch has at most `split_rows` query rows, the number the host sized the scratch
 *     for; otherwise partitions z > 0 exit and z = 0 walks all the keys. */
#ifndef CZ_KATTN_CUH
#define CZ_KATTN_CUH

#include <math.h>

#include "cz_kcuda.h"

#define CZ__KA_TK 32               /* keys per step: one per lane */
#define CZ__KA_FULL 0xffffffffu    /* every lane of a warp */
#define CZ__KA_BLOCKS_PER_SM 16u   /* tile slots per SM the grid offers (see cz__ka_grid_x) */

/* Queries a tile holds when each thread keeps `dch` dimensions of each (its registers:
 * QMAX x DCH accumulators). */
__host__ __device__ static constexpr int cz__ka_qmax(int dch)
{
    return dch == 1 ? 16 : dch == 2 ? 8 : 4;
}

/* One launch's arguments (by value; pointers are device memory). */
typedef struct cz__ka_args {
    float *out;                 /* (rows, heads, head_dim), row stride ld_o */
    const float *q;             /* (rows, heads, head_dim), row stride ld_q */
    const void *k, *v;          /* paged: the layer's K and V pools; dense: (rows, kv_heads,
                                   head_dim) float32, row stride ld_kv */
    const int32_t *qsl;         /* (n_seqs + 1): sequence b's rows [qsl[b], qsl[b + 1]) */
    const int32_t *seq_lens;    /* (n_seqs) paged: positions in each sequence */
    const int32_t *bt;          /* (n_seqs, max_blocks) paged: physical blocks */
    float *pacc, *pm, *pl;      /* split partials: (split_rows, heads, parts, head_dim) and
                                   (split_rows, heads, parts) twice */
    size_t block_stride;        /* paged: elements between blocks */
    size_t ld_kv;               /* dense */
    uint32_t ld_o, ld_q;
    cz_dtype dt;                /* of k and v */
    uint32_t block_tokens, max_blocks;
    uint32_t n_seqs, heads, kv_heads, head_dim;
    uint32_t group, hchunk, nhc, rt; /* heads per KV head, per chunk, chunks, rows per tile */
    float scale;
    uint32_t window, sinks;
    bool causal;
    uint32_t parts, part_len, split_rows; /* split-KV: 1, 0, 0 when off */
    bool kvec;                  /* K and V rows load as 16-byte vectors (cz__ka_vec_ok) */
} cz__ka_args;

/* Whether every K and V row start is 16-byte aligned and the rows hold whole 16-byte
 * vectors: the base pointers aligned, head_dim and the strides between rows (paged: the
 * block stride and head_dim; dense: ld_kv and head_dim) multiples of the elements a
 * vector holds (4 float32, 8 of 16 bits). */
static inline bool cz__ka_vec_ok(const void *k, const void *v, cz_dtype dt, uint32_t head_dim,
                                 size_t stride)
{
    const size_t epv = dt == CZ_F32 ? 4 : 8;
    return (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0 && head_dim % epv == 0 &&
           stride % epv == 0;
}

/* The 16-byte vector q of K or V widened to float32: 4 values for CZ_F32, else 8. */
__device__ static inline void cz__ka_widen(uint4 q, cz_dtype dt, float *f)
{
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
    if (dt == CZ_F32) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            f[j] = __uint_as_float(w[j]);
    } else if (dt == CZ_BF16) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            f[2 * j] = __uint_as_float(w[j] << 16);
            f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            f[2 * j] = __half2float(__ushort_as_half((unsigned short)(w[j] & 0xffffu)));
            f[2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(w[j] >> 16)));
        }
    }
}

/* Whether key position t is kept for a query at position p (the contracts of attn_paged,
 * always causal, and attn_dense, whose sinks are 0). */
__device__ static inline bool cz__ka_kept(int64_t t, int64_t p, const cz__ka_args &a)
{
    if (a.causal && t > p)
        return false;
    if (!a.window)
        return true;
    int64_t w = a.window;
    return (t > p - w && t < p + w) || t < (int64_t)a.sinks;
}

__device__ static inline float cz__ka_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(CZ__KA_FULL, v, o));
    return v;
}

__device__ static inline float cz__ka_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(CZ__KA_FULL, v, o);
    return v;
}

/* Tiles of a sequence of n query rows. */
__device__ static inline uint32_t cz__ka_tiles(int32_t first, int32_t end, uint32_t rt)
{
    return end > first ? ((uint32_t)(end - first) + rt - 1) / rt : 0;
}

/* Finds tile x of the batch (sequences in order, each cut into tiles of rt rows): its
 * sequence *seq, its rows [*r0, *r1) and the sequence's rows [*first, *end). Every thread
 * of the block calls it with the same x; each sums the tiles of a contiguous run of
 * sequences, a block-wide exclusive scan places the runs, and the thread whose run holds
 * x walks it. False when x is past the last tile. The caller synchronises the block
 * before calling again (s_res is rewritten). */
template <int NT>
__device__ static bool cz__ka_tile(const cz__ka_args &a, uint32_t x, uint32_t *s_warp,
                                   int32_t *s_res, uint32_t *seq, int32_t *r0, int32_t *r1,
                                   int32_t *first, int32_t *end)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t n = a.n_seqs, per = (n + NT - 1) / NT;
    const uint32_t sb = min(n, (uint32_t)tid * per), se = min(n, sb + per);
    uint32_t cnt = 0;
    if (sb < se) {
        int32_t prev = a.qsl[sb];
#pragma unroll 4
        for (uint32_t s = sb; s < se; s++) {
            int32_t nx = a.qsl[s + 1];
            cnt += cz__ka_tiles(prev, nx, a.rt);
            prev = nx;
        }
    }
    uint32_t inc = cnt;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t v = __shfl_up_sync(CZ__KA_FULL, inc, o);
        if (lane >= o)
            inc += v;
    }
    if (tid == 0)
        s_res[0] = -1;
    if (lane == 31)
        s_warp[warp] = inc;
    __syncthreads();
    uint32_t excl = inc - cnt;
    for (int w = 0; w < warp; w++)
        excl += s_warp[w];
    if (cnt && x >= excl && x - excl < cnt) {
        int32_t prev = a.qsl[sb];
        for (uint32_t s = sb; s < se; s++) {
            int32_t nx = a.qsl[s + 1];
            uint32_t c = cz__ka_tiles(prev, nx, a.rt);
            if (x - excl < c) {
                s_res[0] = (int32_t)s;
                s_res[1] = prev + (int32_t)((x - excl) * a.rt);
                s_res[2] = prev;
                s_res[3] = nx;
                break;
            }
            excl += c;
            prev = nx;
        }
    }
    __syncthreads();
    if (s_res[0] < 0)
        return false;
    *seq = (uint32_t)s_res[0];
    *r0 = s_res[1];
    *first = s_res[2];
    *end = s_res[3];
    *r1 = min(*r0 + (int32_t)a.rt, *end);
    return true;
}

/* The attention of every work item of the launch (see the file's header). */
template <int NT, int DCH, bool PAGED>
static __global__ void __launch_bounds__(NT) cz__ka_attend(cz__ka_args a)
{
    constexpr int TK = CZ__KA_TK, NW = NT / 32, QMAX = cz__ka_qmax(DCH), QPT = QMAX / NW;
    static_assert(QMAX % NW == 0, "each warp owns QMAX / NW queries");
    __shared__ float sq[QMAX][DCH * NT]; /* the tile's queries, scaled */
    __shared__ float sk[TK][NT + 1];     /* one step's K rows, NT dimensions of them */
    __shared__ float sp[QMAX][TK];       /* the step's probabilities exp(s - m) */
    __shared__ float scorr[QMAX];        /* the step's rescaling of earlier sums */
    __shared__ float sm[QMAX], sl[QMAX]; /* the final max and sum */
    __shared__ size_t soff[TK];          /* element offset of each key's row in K and V */
    __shared__ int32_t spos[TK];         /* each key's position */
    __shared__ uint32_t s_warp[NW];
    __shared__ int32_t s_res[4];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint32_t hd = a.head_dim, z = blockIdx.z;
    const uint32_t g = blockIdx.y / a.nhc, hc = blockIdx.y % a.nhc * a.hchunk;
    const uint32_t nh = min(a.hchunk, a.group - hc), h0 = g * a.group + hc;
    const int32_t row_base = a.qsl[0];
    const uint32_t rows = (uint32_t)(a.qsl[a.n_seqs] - row_base);
    const bool split = a.split_rows && rows <= a.split_rows;
    if ((!split && z > 0) || blockIdx.x >= rows) /* a tile holds a row at least */
        return;

    for (uint32_t x = blockIdx.x; x < rows; x += gridDim.x) {
        uint32_t s;
        int32_t r0, r1, first, end;
        if (!cz__ka_tile<NT>(a, x, s_warp, s_res, &s, &r0, &r1, &first, &end))
            break;
        const uint32_t nr = (uint32_t)(r1 - r0), nq = nr * nh;
        /* the rows' positions p0 .. p0 + nr - 1 and the keys any of them keeps */
        int64_t p0, len;
        if constexpr (PAGED) {
            len = a.seq_lens[s];
            p0 = len - (end - first) + (r0 - first);
        } else {
            len = end - first;
            p0 = r0 - first;
        }
        const int64_t p1 = p0 + nr - 1, w = a.window;
        const int64_t lo = w && p0 - w + 1 > 0 ? p0 - w + 1 : 0;
        const int64_t hi = a.causal ? p1 : w && p1 + w - 1 < len - 1 ? p1 + w - 1 : len - 1;
        const int64_t n_s = w ? min((int64_t)a.sinks, lo) : 0;
        const int64_t nk = n_s + (hi >= lo ? hi - lo + 1 : 0);
        int64_t ib = 0, ie = nk;
        if (split) {
            ib = (int64_t)z * a.part_len;
            if (z + 1 < a.parts)
                ie = min(nk, ib + (int64_t)a.part_len);
        }

        for (uint32_t e = tid; e < nq * hd; e += NT) {
            uint32_t qi = e / hd, d = e - qi * hd, r = qi / nh, hl = qi - r * nh;
            sq[qi][d] = a.q[(size_t)(r0 + (int32_t)r) * a.ld_q + (size_t)(h0 + hl) * hd + d] *
                        a.scale;
        }
        /* warp w owns queries w + NW j, j < nj: their m and l live in its lanes */
        const uint32_t nj = (uint32_t)warp < nq ? (nq - warp + NW - 1) / NW : 0;
        float m[QPT], l[QPT], acc[QMAX][DCH];
#pragma unroll
        for (int j = 0; j < QPT; j++) {
            m[j] = -INFINITY;
            l[j] = 0.0f;
        }
#pragma unroll
        for (int qi = 0; qi < QMAX; qi++)
#pragma unroll
            for (int i = 0; i < DCH; i++)
                acc[qi][i] = 0.0f;
        __syncthreads();

        for (int64_t i0 = ib; i0 < ie; i0 += TK) {
            const int nt = (int)min((int64_t)TK, ie - i0);
            if (tid < nt) {
                int64_t i = i0 + tid, t = i < n_s ? i : lo + (i - n_s);
                size_t off;
                if constexpr (PAGED) {
                    int32_t phys = a.bt[(size_t)s * a.max_blocks + (size_t)(t / a.block_tokens)];
                    if (phys < 0) /* a kept position in a block the table calls unread */
                        __trap();
                    off = (size_t)phys * a.block_stride +
                          ((size_t)(t % a.block_tokens) * a.kv_heads + g) * hd;
                } else {
                    off = (size_t)(first + t) * a.ld_kv + (size_t)g * hd;
                }
                spos[tid] = (int32_t)t;
                soff[tid] = off;
            }
            __syncthreads();

            /* scores of key `lane` for this warp's queries */
            float sc[QPT];
#pragma unroll
            for (int j = 0; j < QPT; j++)
                sc[j] = 0.0f;
#pragma unroll
            for (int c = 0; c < DCH; c++) {
                const uint32_t d0 = (uint32_t)c * NT;
                if (d0 >= hd)
                    break;
                const uint32_t dw = min((uint32_t)NT, hd - d0);
                if (a.kvec) {
                    /* 16-byte loads, KA_U of them in flight per thread before any store */
                    constexpr int KA_U = 4;
                    const uint32_t epv = a.dt == CZ_F32 ? 4u : 8u, vpr = dw / epv;
                    const uint32_t total = (uint32_t)nt * vpr;
                    const size_t es = a.dt == CZ_F32 ? 4 : 2;
                    for (uint32_t base = tid; base < total; base += KA_U * NT) {
                        uint4 r[KA_U];
#pragma unroll
                        for (int u = 0; u < KA_U; u++) {
                            const uint32_t e = base + (uint32_t)(u * NT);
                            if (e < total) {
                                const uint32_t t = e / vpr, vi = e - t * vpr;
                                r[u] = *(const uint4 *)((const char *)a.k +
                                                        (soff[t] + d0 + vi * epv) * es);
                            }
                        }
#pragma unroll
                        for (int u = 0; u < KA_U; u++) {
                            const uint32_t e = base + (uint32_t)(u * NT);
                            if (e < total) {
                                const uint32_t t = e / vpr, vi = e - t * vpr;
                                float f[8];
                                cz__ka_widen(r[u], a.dt, f);
#pragma unroll
                                for (int j = 0; j < 8; j++)
                                    if ((uint32_t)j < epv)
                                        sk[t][vi * epv + (uint32_t)j] = f[j];
                            }
                        }
                    }
                } else {
                    for (uint32_t e = tid; e < (uint32_t)nt * dw; e += NT) {
                        uint32_t t = e / dw, dd = e - t * dw;
                        sk[t][dd] = cz__cuda_ld(a.k, a.dt, soff[t] + d0 + dd);
                    }
                }
                __syncthreads();
                if (lane < nt) {
                    for (uint32_t dd = 0; dd < dw; dd++) {
                        const float kv = sk[lane][dd];
#pragma unroll
                        for (int j = 0; j < QPT; j++)
                            if ((uint32_t)j < nj)
                                sc[j] = fmaf(sq[warp + NW * j][d0 + dd], kv, sc[j]);
                    }
                }
                if (c + 1 < DCH)
                    __syncthreads();
            }

            /* the online softmax: each warp its own queries, one key per lane */
#pragma unroll
            for (int j = 0; j < QPT; j++) {
                if ((uint32_t)j >= nj)
                    continue;
                const int qi = warp + NW * j;
                const int64_t pq = p0 + (int64_t)(qi / nh);
                float sv = -INFINITY;
                if (lane < nt && cz__ka_kept(spos[lane], pq, a))
                    sv = sc[j];
                const float mn = fmaxf(m[j], cz__ka_warp_max(sv));
                float p = 0.0f, corr = 1.0f;
                if (mn != -INFINITY) { /* some key kept so far */
                    p = expf(sv - mn);
                    corr = expf(m[j] - mn);
                }
                l[j] = l[j] * corr + cz__ka_warp_sum(p);
                m[j] = mn;
                sp[qi][lane] = p;
                if (lane == 0)
                    scorr[qi] = corr;
            }
            __syncthreads();

            /* acc = acc x corr + sum over the step's keys of p x v, dims tid + NT i */
#pragma unroll
            for (int qi = 0; qi < QMAX; qi++)
                if ((uint32_t)qi < nq) {
                    const float cr = scorr[qi];
#pragma unroll
                    for (int i = 0; i < DCH; i++)
                        acc[qi][i] *= cr;
                }
            /* unrolled over the step's keys, KA_VU at a time, so the V loads of later
             * keys are in flight while earlier ones accumulate */
            constexpr int KA_VU = DCH == 1 ? 8 : 4;
#pragma unroll
            for (int t0 = 0; t0 < TK; t0 += KA_VU) {
                if (t0 >= nt)
                    continue;
                float vv[KA_VU][DCH];
#pragma unroll
                for (int u = 0; u < KA_VU; u++)
#pragma unroll
                    for (int i = 0; i < DCH; i++) {
                        const uint32_t d = (uint32_t)tid + (uint32_t)(NT * i);
                        vv[u][i] = t0 + u < nt && d < hd
                                       ? cz__cuda_ld(a.v, a.dt, soff[t0 + u] + d)
                                       : 0.0f;
                    }
#pragma unroll
                for (int u = 0; u < KA_VU; u++) {
                    if (t0 + u >= nt)
                        continue;
#pragma unroll
                    for (int qi = 0; qi < QMAX; qi++)
                        if ((uint32_t)qi < nq) {
                            const float p = sp[qi][t0 + u];
#pragma unroll
                            for (int i = 0; i < DCH; i++)
                                acc[qi][i] = fmaf(p, vv[u][i], acc[qi][i]);
                        }
                }
            }
            __syncthreads();
        }

        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < QPT; j++)
                if ((uint32_t)j < nj) {
                    sm[warp + NW * j] = m[j];
                    sl[warp + NW * j] = l[j];
                }
        }
        __syncthreads();
#pragma unroll
        for (int qi = 0; qi < QMAX; qi++) {
            if ((uint32_t)qi >= nq)
                continue;
            const uint32_t r = (uint32_t)qi / nh, h = h0 + (uint32_t)qi - r * nh;
            if (split) {
                const size_t slot = ((size_t)(r0 + (int32_t)r - row_base) * a.heads + h) * a.parts + z;
#pragma unroll
                for (int i = 0; i < DCH; i++) {
                    const uint32_t d = (uint32_t)tid + (uint32_t)(NT * i);
                    if (d < hd)
                        a.pacc[slot * hd + d] = acc[qi][i];
                }
                if (tid == 0) {
                    a.pm[slot] = sm[qi];
                    a.pl[slot] = sl[qi];
                }
            } else {
                const float inv = sl[qi] > 0.0f ? 1.0f / sl[qi] : 0.0f;
                float *o = a.out + (size_t)(r0 + (int32_t)r) * a.ld_o + (size_t)h * hd;
#pragma unroll
                for (int i = 0; i < DCH; i++) {
                    const uint32_t d = (uint32_t)tid + (uint32_t)(NT * i);
                    if (d < hd)
                        o[d] = acc[qi][i] * inv;
                }
            }
        }
        __syncthreads(); /* sq, sm, sl and s_res are rewritten by the next tile */
    }
}

/* Fills the work split of *a from heads, kv_heads and head_dim (the queries a tile holds
 * for the variant cz__ka_launch picks); returns the grid's y extent, kv_heads x nhc. */
static inline uint32_t cz__ka_plan(cz__ka_args *a)
{
    uint32_t hd = a->head_dim;
    uint32_t qmax = (uint32_t)cz__ka_qmax(hd <= 128 ? 1 : (int)((hd + 127) / 128));
    a->group = a->heads / a->kv_heads;
    a->hchunk = a->group < qmax ? a->group : qmax;
    a->nhc = (a->group + a->hchunk - 1) / a->hchunk;
    a->rt = qmax / a->hchunk;
    return a->kv_heads * a->nhc;
}

/* The grid's x extent (tile slots): enough slots for CZ__KA_BLOCKS_PER_SM blocks per SM
 * over the y extent, or one per sequence if more, but no more than a batch within the
 * reserve can have tiles (max_rows / rt + n_seqs, at most max_rows); slots past the
 * batch's tiles exit at once, tiles past the slots are walked by the blocks in turn. */
static inline unsigned cz__ka_grid_x(const cz__kcuda *c, uint32_t n_seqs, uint32_t y, uint32_t rt)
{
    uint64_t want = ((uint64_t)CZ__KA_BLOCKS_PER_SM * (c->sms ? c->sms : 1) + y - 1) / y;
    if (want < n_seqs)
        want = n_seqs;
    uint64_t bound = (uint64_t)c->res.max_rows / rt + n_seqs;
    if (bound > c->res.max_rows && c->res.max_rows >= n_seqs) /* tiles <= rows <= max_rows */
        bound = c->res.max_rows;
    if (want > bound)
        want = bound;
    if (want < 1)
        want = 1;
    return (unsigned)(want < 0x7fffffffu ? want : 0x7fffffffu);
}

/* Launches cz__ka_attend on the context's stream in the variant for head_dim. */
template <bool PAGED>
static void cz__ka_launch(cz__kcuda *c, dim3 grid, const cz__ka_args *a)
{
    uint32_t hd = a->head_dim;
    if (hd <= 64)
        cz__ka_attend<64, 1, PAGED><<<grid, 64, 0, c->stream>>>(*a);
    else if (hd <= 128)
        cz__ka_attend<128, 1, PAGED><<<grid, 128, 0, c->stream>>>(*a);
    else if (hd <= 256)
        cz__ka_attend<128, 2, PAGED><<<grid, 128, 0, c->stream>>>(*a);
    else if (hd <= 384)
        cz__ka_attend<128, 3, PAGED><<<grid, 128, 0, c->stream>>>(*a);
    else
        cz__ka_attend<128, 4, PAGED><<<grid, 128, 0, c->stream>>>(*a);
    CZ_CUDA_LAUNCHED(c);
}

#endif
