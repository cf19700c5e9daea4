/* sample.c - sampling of the next token from logits with temperature, top-k and top-p,
 * drawn by a counter-based uniform (cz_kernel_uniform) so the CUDA twin draws the same
 * id. Per row, in the thread's reserved vocabulary buffers: p = exp((l - max) /
 * temperature); top-k by a k-entry min-heap; top-p by popping a max-heap of the kept ids
 * until their mass reaches top_p; then the inverse CDF over the kept ids in increasing id
 * order. */
#include <math.h>

#include "cz_kernels_cpu.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float cz_kernel_uniform(uint64_t seed, uint64_t counter)
{
    const uint64_t g = 0x9E3779B97F4A7C15ull;
    uint64_t x = mix64(mix64(seed + g) + g * (counter + 1));
    return (float)(x >> 40) * 0x1p-24f;
}

/* Whether id a ranks before id b: more likely, ties to the lower id. */
static bool before(const float *p, int32_t a, int32_t b)
{
    return p[a] > p[b] || (p[a] == p[b] && a < b);
}

/* Restores the heap property below node i of heap h (n entries); best_on_top: the root is
 * the id ranking first (a max-heap), else the one ranking last. */
static void sift(int32_t *h, size_t n, size_t i, const float *p, bool best_on_top)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && before(p, h[c + 1], h[c]) == best_on_top)
            c++;
        if (before(p, h[c], h[i]) != best_on_top)
            return;
        int32_t t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

/* Sorts ids increasingly (heapsort: no allocation). */
static void sort_ids(int32_t *a, size_t n)
{
    for (size_t s = n / 2; s-- > 0;)
        for (size_t i = s;;) {
            size_t c = 2 * i + 1;
            if (c >= n)
                break;
            if (c + 1 < n && a[c + 1] > a[c])
                c++;
            if (a[c] <= a[i])
                break;
            int32_t t = a[c];
            a[c] = a[i];
            a[i] = t;
            i = c;
        }
    for (size_t end = n; end > 1; end--) {
        int32_t t = a[0];
        a[0] = a[end - 1];
        a[end - 1] = t;
        for (size_t i = 0;;) {
            size_t c = 2 * i + 1;
            if (c >= end - 1)
                break;
            if (c + 1 < end - 1 && a[c + 1] > a[c])
                c++;
            if (a[c] <= a[i])
                break;
            int32_t u = a[c];
            a[c] = a[i];
            a[i] = u;
            i = c;
        }
    }
}

typedef struct {
    cz_kctx *k;
    int32_t *ids;
    const float *logits;
    uint32_t vocab;
    float temperature;
    uint32_t top_k;
    float top_p;
    uint64_t seed;
    const uint64_t *counter;
} sample_job;

static int32_t sample_row(const sample_job *j, const float *l, uint64_t counter, uint32_t tid)
{
    uint32_t v = j->vocab;
    float *p = j->k->ts[tid].row, mx = l[0];
    int32_t *idx = j->k->ts[tid].idx;
    bool bad = false;
    for (uint32_t i = 0; i < v; i++) {
        bad |= !(l[i] < INFINITY); /* NaN or +inf; -inf is a masked id */
        if (l[i] > mx)
            mx = l[i];
    }
    if (bad)
        return -1; /* a row holding NaN or +inf (cz_kernels.h) */
    for (uint32_t i = 0; i < v; i++)
        p[i] = expf((l[i] - mx) / j->temperature);

    /* the kept ids: idx[first, first + nk) */
    size_t first = 0, nk = v;
    bool all = true;
    if (j->top_k && j->top_k < v) {
        nk = j->top_k;
        for (size_t i = 0; i < nk; i++)
            idx[i] = (int32_t)i;
        for (size_t s = nk / 2; s-- > 0;)
            sift(idx, nk, s, p, false);
        for (uint32_t i = (uint32_t)nk; i < v; i++)
            if (before(p, (int32_t)i, idx[0])) {
                idx[0] = (int32_t)i;
                sift(idx, nk, 0, p, false);
            }
        all = false;
    } else {
        for (uint32_t i = 0; i < v; i++)
            idx[i] = (int32_t)i;
    }
    if (j->top_p < 1.0f) {
        float total = 0.0f, cum = 0.0f;
        for (size_t i = 0; i < nk; i++)
            total += p[idx[i]];
        for (size_t s = nk / 2; s-- > 0;)
            sift(idx, nk, s, p, true);
        /* pop the most likely to the end until the popped mass reaches top_p */
        size_t end = nk;
        while (end > 0) {
            int32_t best = idx[0];
            idx[0] = idx[end - 1];
            idx[end - 1] = best;
            end--;
            sift(idx, end, 0, p, true);
            cum += p[best];
            if (cum >= j->top_p * total)
                break;
        }
        first = end;
        nk -= end;
        all = false;
    }
    if (!all)
        sort_ids(idx + first, nk);

    float total = 0.0f;
    for (size_t i = 0; i < nk; i++)
        total += p[idx[first + i]];
    float target = cz_kernel_uniform(j->seed, counter) * total, cum = 0.0f;
    for (size_t i = 0; i < nk; i++) {
        cum += p[idx[first + i]];
        if (cum > target)
            return idx[first + i];
    }
    return idx[first + nk - 1];
}

static void sample_rows(void *pp, size_t b, size_t e, uint32_t tid)
{
    const sample_job *j = pp;
    for (size_t r = b; r < e; r++)
        j->ids[r] = sample_row(j, j->logits + r * j->vocab, j->counter[r], tid);
}

void cz_cpu_sample(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows,
                   uint32_t vocab, float temperature, uint32_t top_k, float top_p,
                   uint64_t seed, const uint64_t *counter)
{
    CZ_ASSERT(vocab > 0);
    if (temperature <= 0.0f) {
        cz_cpu_argmax(k, ids, logits, rows, vocab);
        return;
    }
    CZ_ASSERT(vocab <= k->res.max_dim);
    sample_job j = {k, ids, logits, vocab, temperature, top_k, top_p, seed, counter};
    cz__kpar(k, rows, 1, 1, sample_rows, &j);
}
