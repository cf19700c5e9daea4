/* sample.cu - sampling the next token on CUDA (contract: cz_kernels.h, sample): softmax of
 * logits / temperature, top_k, then top_p over the top_k's renormalised mass, then the
 * first kept id, in increasing id order, whose cumulative probability exceeds u x the
 * kept total, u = cz_kernel_uniform(seed, counter[b]); temperature 0 is argmax.
 *
 * Launch: one block of up to 1024 threads per row; no scratch (the logits are re-read
 * instead of stored). Per row:
 * - the row's maximum m (a block reduction);
 * - each id's rank key: its logit's bits made orderable, then the complement of its id,
 *   so keys are distinct and a larger key ranks first, equal logits to the lower id (the
 *   order of probabilities exp((l - m) / T), which are monotone in the logit);
 * - top_k and top_p are thresholds on the key, found by a radix descent over its bytes
 *   (cz__sample_select): one pass over the row per byte, until the bin where the
 *   criterion is met holds one id;
 * - probabilities are exp((l - m) / T) as the CPU computes them, summed in fixed point
 *   (2^40 = 1, in 64 bits: exact integer sums, in any order, so the result is
 *   deterministic), and the draw is exact on them: target = floor(total x u), found by a
 *   scan of per-warp sums over contiguous id ranges, then within the one warp's range.
 * Against the CPU twin (float sums, glibc's expf) ids differ only where the draw, or the
 * top-p mass, lies within float rounding of a boundary. ids, logits and counter are device
 * memory. vocab is below 2^24 (the fixed-point sums' range; asserted). */
#include "cz_kcuda.h"
#include "cz_kcuda_reduce.h"

#define CZ__SAMPLE_THREADS 1024u
#define CZ__SAMPLE_ONE 0x1p40f /* probability 1 in fixed point */

typedef unsigned long long cz__u64;

/* One row's shared state. */
typedef struct cz__sample_sh {
    unsigned cnt[256];      /* select: ids in each bin of the current byte */
    cz__u64 mass[256];      /* select (top-p): their fixed-point mass */
    cz__u64 wsum[32];       /* draw: each warp's kept mass */
    float red[32];          /* cz__block_max's slots */
    cz__u64 prefix, tau;    /* select: the key bytes fixed so far; the threshold */
    cz__u64 base, target;   /* draw: mass before the chosen warp's range; the draw */
    int done, warp;         /* select: tau found; draw: the warp whose range holds it */
} cz__sample_sh;

/* Rank key of id i with logit l (-0 and +0 are one logit). */
__device__ static inline cz__u64 cz__sample_key(float l, uint32_t i)
{
    unsigned u = __float_as_uint(l + 0.0f);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((cz__u64)u << 32) | (uint32_t)~i;
}

/* exp((l - m) / temp) in fixed point (at most 2^40, as l <= m). */
__device__ static inline cz__u64 cz__sample_q(float l, float m, float temp)
{
    return __float2ull_rn(expf((l - m) / temp) * CZ__SAMPLE_ONE);
}

__device__ static inline cz__u64 cz__sample_mix(cz__u64 z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* cz_kernel_uniform(seed, counter) x 2^24, with its bit arithmetic (kernels/sample.c). */
__device__ static inline uint32_t cz__sample_u24(cz__u64 seed, cz__u64 counter)
{
    const cz__u64 g = 0x9E3779B97F4A7C15ull;
    return (uint32_t)(cz__sample_mix(cz__sample_mix(seed + g) + g * (counter + 1)) >> 40);
}

/* The threshold tau >= lo whose keys {key >= tau} are the first ids of the ranking among
 * those with key >= lo: k of them (by_mass false), or the fewest whose mass reaches top_p
 * x the mass of all of them (by_mass true). Each pass histograms, by the key's byte at
 * `shift`, the ids whose higher bytes equal the prefix found so far (warp-aggregated
 * integer atomics); thread 0 walks the bins from the top to the one where the criterion
 * is met, which becomes the prefix, until that bin holds one id or (by count) completes k
 * exactly: tau is then its lower edge. Every thread of the block calls it. */
__device__ static cz__u64 cz__sample_select(cz__sample_sh *s, const float *l, uint32_t vocab,
                                            float m, float temp, cz__u64 lo, bool by_mass,
                                            uint32_t k, float top_p)
{
    unsigned lane = threadIdx.x % 32;
    cz__u64 prefix = 0, above_n = 0, above_q = 0; /* above_*: thread 0's */
    double target = k;
    for (int shift = 56;; shift -= 8) {
        for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) {
            s->cnt[b] = 0;
            s->mass[b] = 0;
        }
        __syncthreads();
        for (uint32_t i0 = 0; i0 < vocab; i0 += blockDim.x) {
            uint32_t i = i0 + threadIdx.x;
            unsigned d = 256; /* not counted */
            cz__u64 q = 0;
            if (i < vocab) {
                float li = l[i];
                cz__u64 key = cz__sample_key(li, i);
                if (key >= lo && (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))) {
                    d = (unsigned)(key >> shift) & 255u;
                    q = by_mass ? cz__sample_q(li, m, temp) : 0;
                }
            }
            unsigned grp = __match_any_sync(CZ__FULL_WARP, d);
            bool lead = d < 256 && lane == (unsigned)__ffs(grp) - 1;
            if (lead)
                atomicAdd(&s->cnt[d], (unsigned)__popc(grp));
            if (by_mass) { /* q <= 2^40: its 20-bit halves sum in 32 bits over a warp */
                unsigned hi = __reduce_add_sync(grp, (unsigned)(q >> 20));
                unsigned lo20 = __reduce_add_sync(grp, (unsigned)(q & 0xfffffu));
                if (lead)
                    atomicAdd(&s->mass[d], ((cz__u64)hi << 20) + lo20);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (shift == 56 && by_mass) {
                cz__u64 tot = 0;
                for (int b = 0; b < 256; b++)
                    tot += s->mass[b];
                target = (double)top_p * (double)tot;
            }
            int b = 255;
            for (; b >= 0; b--) {
                cz__u64 n2 = above_n + s->cnt[b], q2 = above_q + s->mass[b];
                if (s->cnt[b] && (by_mass ? (double)q2 >= target : n2 >= k))
                    break;
                above_n = n2;
                above_q = q2;
            }
            s->done = 1;
            if (b < 0) { /* unreachable: all ids >= lo meet the criterion */
                s->tau = lo;
            } else {
                cz__u64 edge = prefix | (cz__u64)b << shift;
                if (s->cnt[b] == 1 || shift == 0 || (!by_mass && above_n + s->cnt[b] == k))
                    s->tau = edge > lo ? edge : lo;
                else {
                    s->prefix = edge;
                    s->done = 0;
                }
            }
        }
        __syncthreads();
        if (s->done)
            return s->tau;
        prefix = s->prefix;
    }
}

/* *out = the first kept id (key >= tau) in increasing id order whose cumulative mass
 * exceeds floor(total x u24 / 2^24). Warp w sums the kept mass of ids [w x per, (w + 1) x
 * per); thread 0 finds the warp whose range holds the draw, which walks it 32 ids at a
 * time with a warp scan. Every thread of the block calls it. */
__device__ static void cz__sample_draw(cz__sample_sh *s, const float *l, uint32_t vocab,
                                       float m, float temp, cz__u64 tau, uint32_t u24,
                                       int32_t *out)
{
    unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    uint32_t per = ((vocab + nw - 1) / nw + 31) / 32 * 32;
    uint32_t b0 = w * per < vocab ? w * per : vocab, b1 = vocab - b0 < per ? vocab : b0 + per;
    cz__u64 ws = 0;
    for (uint32_t i = b0 + lane; i < b1; i += 32)
        if (cz__sample_key(l[i], i) >= tau)
            ws += cz__sample_q(l[i], m, temp);
    for (int o = 16; o > 0; o /= 2)
        ws += __shfl_xor_sync(CZ__FULL_WARP, ws, o);
    if (lane == 0)
        s->wsum[w] = ws;
    __syncthreads();
    if (threadIdx.x == 0) {
        cz__u64 total = 0, acc = 0;
        for (unsigned j = 0; j < nw; j++)
            total += s->wsum[j];
        s->target = __umul64hi(total, (cz__u64)u24 << 40);
        s->warp = -1;
        for (unsigned j = 0; j < nw && s->warp < 0; acc += s->wsum[j], j++)
            if (s->target < acc + s->wsum[j]) {
                s->warp = (int)j;
                s->base = acc;
            }
        if (s->warp < 0) /* no mass at all: logits that are not numbers */
            *out = 0;
    }
    __syncthreads();
    if ((int)w != s->warp)
        return;
    cz__u64 cum = s->base, target = s->target;
    int32_t last = -1;
    for (uint32_t i0 = b0; i0 < b1; i0 += 32) {
        uint32_t i = i0 + lane;
        cz__u64 q = i < b1 && cz__sample_key(l[i], i) >= tau ? cz__sample_q(l[i], m, temp) : 0;
        cz__u64 x = q; /* inclusive scan over the lanes */
        for (int o = 1; o < 32; o *= 2) {
            cz__u64 y = __shfl_up_sync(CZ__FULL_WARP, x, o);
            if ((int)lane >= o)
                x += y;
        }
        unsigned hit = __ballot_sync(CZ__FULL_WARP, cum + x > target);
        if (hit) {
            if (lane == (unsigned)__ffs(hit) - 1)
                *out = (int32_t)i;
            return;
        }
        unsigned any = __ballot_sync(CZ__FULL_WARP, q > 0);
        if (any)
            last = (int32_t)(i0 + 31 - __clz(any));
        cum += __shfl_sync(CZ__FULL_WARP, x, 31);
    }
    if (lane == 0) /* unreachable: the warp's sum held the draw */
        *out = last >= 0 ? last : 0;
}

static __global__ void __launch_bounds__(CZ__SAMPLE_THREADS)
cz__k_sample(int32_t *ids, const float *logits, uint32_t vocab, float temp, uint32_t top_k,
             float top_p, cz__u64 seed, const uint64_t *counter)
{
    __shared__ cz__sample_sh s;
    const float *l = logits + (size_t)blockIdx.x * vocab;
    float m = -INFINITY;
    int bad = 0;
    for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        bad |= !(l[i] < INFINITY); /* NaN or +inf; -inf is a masked id */
        m = fmaxf(m, l[i]);
    }
    if (__syncthreads_or(bad)) { /* the whole block leaves: -1, as the CPU twin */
        if (threadIdx.x == 0)
            ids[blockIdx.x] = -1;
        return;
    }
    m = cz__block_max(m, s.red);
    cz__u64 tau = 0;
    if (top_k && top_k < vocab)
        tau = cz__sample_select(&s, l, vocab, m, temp, 0, false, top_k, 1.0f);
    if (top_p < 1.0f)
        tau = cz__sample_select(&s, l, vocab, m, temp, tau, true, 0, top_p);
    cz__sample_draw(&s, l, vocab, m, temp, tau, cz__sample_u24(seed, counter[blockIdx.x]),
                    ids + blockIdx.x);
}

extern "C" void cz_cuda_sample(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                               uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                               uint64_t seed, const uint64_t *counter)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(vocab > 0);
    if (temperature <= 0.0f) {
        cz_cuda_argmax(k, ids, logits, rows, vocab);
        return;
    }
    CZ_ASSERT(vocab <= c->res.max_dim && vocab < (1u << 24));
    if (!rows)
        return;
    cz__k_sample<<<rows, cz__cuda_row_threads(vocab, CZ__SAMPLE_THREADS), 0, c->stream>>>(
        ids, logits, vocab, temperature, top_k, top_p, seed, counter);
    CZ_CUDA_LAUNCHED(c);
}

/* sample keeps its state in shared memory and re-reads the logits: no device scratch. */
size_t cz__cuda_sample_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return 0;
}
