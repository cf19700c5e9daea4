/* test_cuda_attn.c - attn_paged and attn_dense on CUDA against their CPU twins (the
 * harness of tests/cuda_cmp.h; exit 77, skipped, without a device).
 *
 * attn_paged: varlen batches mixing decodes, a chunked prefill over a cached prefix and
 * fresh prefills, over shuffled physical blocks of a pool laid out block by block over two
 * layers (the view is layer 1); GQA, MQA (a group wider than a tile too) and MHA; head_dim
 * 8 to 512 (64, 80, 128 and widths that are not a multiple of 32); F32, BF16 and F16 KV;
 * windows with and without sinks, where blocks holding no kept position are -1 in the
 * table and every position no query keeps (the tails of last blocks too) holds NaN, so a
 * read of one shows in the output. Decode-only batches of few long sequences take the
 * split-KV path (partitions and the merge): two and four decodes of up to 32768
 * positions, one with a window, one batch with a sequence that has no query row; a long
 * decode beside a prefill does not split (more rows than sequences). attn_dense: causal,
 * bidirectional and windowed, GQA, strided q, k, v and out.
 *
 * Tolerance: NMSE 1e-10 (docs/kernels.md's for the CPU twin against a double reference):
 * both backends run the online softmax in float32 but sum in different orders (the CPU
 * eight lanes and 64 keys at a time, CUDA a key per lane and 32 at a time, partitions
 * merged). A NumPy model of both orders puts them 1e-14 apart at 300 keys and 1e-13 at
 * 3000; at 32768 the CPU's own sequential float32 sum of the outputs is 1e-11 from the
 * exact result (the split CUDA one 2e-13), so the decodes of 20000 keys and more are
 * checked at 1e-9. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cmp.h"

#define TOL_ATTN 1e-10
#define TOL_ATTN_LONG 1e-9 /* contexts of 20000 keys and more */

typedef struct {
    uint32_t bt, kvh, heads, hd, window, sinks;
} pcfg;

static int kept(int64_t t, int64_t p, uint32_t window, uint32_t sinks)
{
    return t <= p && (!window || t > p - (int64_t)window || t < (int64_t)sinks);
}

/* n elements of NaN in dtype dt at element `at` of base. */
static void fill_nan(void *base, cz_dtype dt, size_t at, size_t n)
{
    if (dt == CZ_F32) {
        float *f = (float *)base + at;
        for (size_t i = 0; i < n; i++)
            f[i] = NAN;
        return;
    }
    uint16_t *h = (uint16_t *)base + at, nan = dt == CZ_BF16 ? 0x7fc0 : 0x7e00;
    for (size_t i = 0; i < n; i++)
        h[i] = nan;
}

static void reserve(cz_cmp *t, uint32_t rows, uint32_t ctx, uint32_t heads, uint32_t dim)
{
    cz_kreserve r = {.max_rows = rows, .max_ctx = ctx, .max_heads = heads, .max_dim = dim};
    cz_kctx_reserve(t->cpu, &r);
    cz_kctx_reserve(t->cu, &r);
}

/* One paged batch of ns sequences, sequence b with prefix[b] cached positions and nq[b]
 * new query rows, in a pool of `layers` interleaved layers; checked at `tol`. */
static void run_paged(cz_cmp *t, const pcfg *c, cz_dtype dt, uint32_t ns, const uint32_t *prefix,
                      const uint32_t *nq, uint32_t layers, double tol, const char *label)
{
    const uint32_t ld_q = c->heads * c->hd + 2 * c->kvh * c->hd, ld_o = c->heads * c->hd + 3;
    int32_t *qsl = calloc(ns + 1, sizeof *qsl), *lens = calloc(ns, sizeof *lens);
    uint32_t max_blocks = 1, total_blocks = 0, max_len = 1;
    for (uint32_t b = 0; b < ns; b++) {
        lens[b] = (int32_t)(prefix[b] + nq[b]);
        qsl[b + 1] = qsl[b] + (int32_t)nq[b];
        uint32_t nb = ((uint32_t)lens[b] + c->bt - 1) / c->bt;
        max_blocks = nb > max_blocks ? nb : max_blocks;
        max_len = (uint32_t)lens[b] > max_len ? (uint32_t)lens[b] : max_len;
        total_blocks += nb;
    }
    uint32_t rows = (uint32_t)qsl[ns], pool_blocks = total_blocks + 2;
    int32_t *perm = malloc(pool_blocks * sizeof *perm);
    int32_t *table = malloc((size_t)ns * max_blocks * sizeof *table);
    for (uint32_t i = 0; i < pool_blocks; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = pool_blocks - 1; i > 0; i--) {
        uint32_t j = cz_cmp_randu(t, i + 1);
        int32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (uint32_t b = 0, used = 0; b < ns; b++)
        for (uint32_t j = 0; j < max_blocks; j++)
            table[(size_t)b * max_blocks + j] =
                (uint64_t)j * c->bt < (uint64_t)lens[b] ? perm[used++] : -1;
    size_t row = (size_t)c->kvh * c->hd, stride = (size_t)layers * c->bt * row;
    size_t es = cz_dtype_size(dt), pool_el = (size_t)pool_blocks * stride;
    size_t layer_off = (size_t)(layers - 1) * c->bt * row; /* elements */
    uint8_t *pool_k = cz_cmp_rand_dt(t, dt, pool_el, 1.5f);
    uint8_t *pool_v = cz_cmp_rand_dt(t, dt, pool_el, 1.0f);

    /* NaN over every position no query keeps; -1 for blocks holding none */
    for (uint32_t b = 0; b < ns; b++) {
        uint32_t L = (uint32_t)lens[b];
        int32_t *tb = table + (size_t)b * max_blocks;
        char *any = calloc(L + 1, 1);
        for (int32_t r = qsl[b]; r < qsl[b + 1]; r++) {
            int64_t p = (int64_t)L - (qsl[b + 1] - qsl[b]) + (r - qsl[b]);
            for (uint32_t x = 0; x < L; x++)
                any[x] |= (char)kept(x, p, c->window, c->sinks);
        }
        for (uint32_t j = 0; j < max_blocks && tb[j] >= 0; j++) {
            int need = 0;
            for (uint32_t x = j * c->bt; x < (j + 1) * c->bt; x++) {
                if (x < L && any[x]) {
                    need = 1;
                    continue;
                }
                size_t at = (size_t)tb[j] * stride + layer_off + (size_t)(x % c->bt) * row;
                fill_nan(pool_k, dt, at, row);
                fill_nan(pool_v, dt, at, row);
            }
            if (!need)
                tb[j] = -1;
        }
        free(any);
    }

    float *q = cz_cmp_randf(t, (size_t)rows * ld_q, 1.0f);
    float scale = 1.0f / sqrtf((float)c->hd);
    size_t on = (size_t)rows * ld_o;
    float *ref = calloc(on ? on : 1, sizeof *ref);
    reserve(t, rows ? rows : 1, max_len, c->heads, c->heads * c->hd);

    cz_kv_layer kv = {.k = pool_k + layer_off * es, .v = pool_v + layer_off * es, .dt = dt,
                      .block_stride = stride, .block_tokens = c->bt, .kv_heads = c->kvh,
                      .head_dim = c->hd};
    t->C->attn_paged(t->cpu, ref, ld_o, q, ld_q, &kv, qsl, lens, table, max_blocks, ns, c->heads,
                     scale, c->window, c->sinks);

    uint8_t *dk = cz_cmp_up(t, pool_k, pool_el * es), *dv = cz_cmp_up(t, pool_v, pool_el * es);
    float *dq = cz_cmp_up(t, q, (size_t)rows * ld_q * sizeof(float));
    int32_t *dqsl = cz_cmp_up(t, qsl, (ns + 1) * sizeof *qsl);
    int32_t *dlens = cz_cmp_up(t, lens, ns * sizeof *lens);
    int32_t *dtable = cz_cmp_up(t, table, (size_t)ns * max_blocks * sizeof *table);
    /* the output starts as NaN where the op writes, zeros in the padding it must keep */
    float *init = calloc(on ? on : 1, sizeof *init);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < c->heads * c->hd; i++)
            init[(size_t)r * ld_o + i] = NAN;
    float *dout = cz_cmp_up(t, init, on * sizeof(float));
    free(init);
    cz_kv_layer dkv = kv;
    dkv.k = dk + layer_off * es;
    dkv.v = dv + layer_off * es;
    t->G->attn_paged(t->cu, dout, ld_o, dq, ld_q, &dkv, dqsl, dlens, dtable, max_blocks, ns,
                     c->heads, scale, c->window, c->sinks);
    float *got = cz_cmp_down(t, dout, on * sizeof(float));

    char what[160];
    snprintf(what, sizeof what, "attn_paged %s %s bt %u kvh %u heads %u hd %u w %u s %u", label,
             cz_dtype_name(dt), c->bt, c->kvh, c->heads, c->hd, c->window, c->sinks);
    cz_cmp_nmse(t, what, ref, got, on, tol);

    cz_kmem_free(t->cu, dk);
    cz_kmem_free(t->cu, dv);
    cz_kmem_free(t->cu, dq);
    cz_kmem_free(t->cu, dout);
    cz_kmem_free(t->cu, dqsl);
    cz_kmem_free(t->cu, dlens);
    cz_kmem_free(t->cu, dtable);
    free(got);
    free(ref);
    free(q);
    free(pool_k);
    free(pool_v);
    free(perm);
    free(table);
    free(qsl);
    free(lens);
}

static void test_paged_mixed(cz_cmp *t)
{
    static const pcfg cfgs[] = {
        {16, 2, 8, 64, 0, 0},    /* GQA 4 */
        {16, 8, 8, 128, 0, 0},   /* MHA */
        {32, 1, 8, 80, 0, 0},    /* MQA, head_dim 80 */
        {5, 1, 72, 8, 0, 0},     /* MQA, a group wider than a tile */
        {4, 2, 4, 20, 7, 3},     /* window with sinks, unread blocks -1 */
        {16, 4, 16, 64, 10, 0},  /* window without sinks */
        {8, 2, 8, 128, 32, 4},   /* a window across blocks, sinks inside block 0 */
        {4, 1, 8, 16, 6, 9},     /* sinks over three blocks and wider than the window */
        {16, 2, 2, 8, 1, 0},     /* a window of one: each query sees only itself */
        {8, 1, 2, 38, 5, 2},     /* head_dim not a multiple of 4 */
        {16, 2, 4, 256, 0, 0},   /* two dimensions per thread */
        {16, 2, 4, 320, 20, 2},  /* three, a partial last one */
        {8, 1, 2, 512, 0, 0},    /* the widest head */
    };
    static const uint32_t prefix[] = {36, 30, 0, 199, 0}, nq[] = {1, 20, 9, 1, 70};
    static const cz_dtype dts[] = {CZ_F32, CZ_BF16, CZ_F16};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (size_t d = 0; d < 3; d++)
            run_paged(t, &cfgs[i], dts[d], 5, prefix, nq, 2, TOL_ATTN, "mixed");
}

/* Few long decodes: the split-KV path. */
static void test_paged_split(cz_cmp *t)
{
    {
        static const pcfg c = {16, 8, 32, 128, 0, 0};
        static const uint32_t prefix[] = {2999, 1199}, nq[] = {1, 1};
        run_paged(t, &c, CZ_BF16, 2, prefix, nq, 2, TOL_ATTN, "2 decodes");
    }
    {
        /* a sequence with no query row between two decodes */
        static const pcfg c = {16, 2, 8, 64, 0, 0};
        static const uint32_t prefix[] = {2499, 100, 899}, nq[] = {1, 0, 1};
        run_paged(t, &c, CZ_F16, 3, prefix, nq, 2, TOL_ATTN, "decodes, an empty seq");
    }
    {
        /* a window over a long context: partitions of the kept keys, blocks -1 */
        static const pcfg c = {16, 4, 16, 128, 2000, 4};
        static const uint32_t prefix[] = {4999}, nq[] = {1};
        run_paged(t, &c, CZ_F32, 1, prefix, nq, 2, TOL_ATTN, "windowed decode");
    }
    {
        /* MQA, head_dim 80, blocks of 32 */
        static const pcfg c = {32, 1, 8, 80, 0, 0};
        static const uint32_t prefix[] = {9999, 4321}, nq[] = {1, 1};
        run_paged(t, &c, CZ_BF16, 2, prefix, nq, 1, TOL_ATTN, "MQA decodes");
    }
    {
        /* a long decode beside a chunked prefill: more rows than sequences, no split */
        static const pcfg c = {16, 2, 8, 64, 0, 0};
        static const uint32_t prefix[] = {2999, 2000}, nq[] = {1, 40};
        run_paged(t, &c, CZ_BF16, 2, prefix, nq, 2, TOL_ATTN, "decode + prefill");
    }
    {
        static const pcfg c = {16, 8, 32, 128, 0, 0};
        static const uint32_t prefix[] = {32767}, nq[] = {1};
        run_paged(t, &c, CZ_BF16, 1, prefix, nq, 1, TOL_ATTN_LONG, "decode 32768");
    }
    {
        static const pcfg c = {16, 8, 32, 128, 4096, 4};
        static const uint32_t prefix[] = {32767}, nq[] = {1};
        run_paged(t, &c, CZ_BF16, 1, prefix, nq, 1, TOL_ATTN, "windowed decode 32768");
    }
    {
        /* four lengths: partitions past the short ones are empty */
        static const pcfg c = {16, 4, 16, 128, 0, 0};
        static const uint32_t prefix[] = {32767, 19999, 4999, 699}, nq[] = {1, 1, 1, 1};
        run_paged(t, &c, CZ_F16, 4, prefix, nq, 1, TOL_ATTN_LONG, "4 decodes to 32768");
    }
}

/* One dense batch of sequences lens[0..ns). */
static void run_dense(cz_cmp *t, uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t ns,
                      const uint32_t *lens, int causal, uint32_t window)
{
    const uint32_t ld_q = heads * hd + 5, ld_kv = kvh * hd + 3, ld_o = heads * hd + 2;
    int32_t *cu = calloc(ns + 1, sizeof *cu);
    uint32_t max_len = 1;
    for (uint32_t b = 0; b < ns; b++) {
        cu[b + 1] = cu[b] + (int32_t)lens[b];
        max_len = lens[b] > max_len ? lens[b] : max_len;
    }
    uint32_t rows = (uint32_t)cu[ns];
    float *q = cz_cmp_randf(t, (size_t)rows * ld_q, 1.0f);
    float *kk = cz_cmp_randf(t, (size_t)rows * ld_kv, 1.5f);
    float *v = cz_cmp_randf(t, (size_t)rows * ld_kv, 1.0f);
    float scale = 1.0f / sqrtf((float)hd);
    size_t on = (size_t)rows * ld_o;
    float *ref = calloc(on, sizeof *ref);
    reserve(t, rows, max_len, heads, heads * hd);
    t->C->attn_dense(t->cpu, ref, ld_o, q, ld_q, kk, v, ld_kv, cu, ns, heads, kvh, hd, scale,
                     causal != 0, window);

    float *dq = cz_cmp_up(t, q, (size_t)rows * ld_q * sizeof(float));
    float *dk = cz_cmp_up(t, kk, (size_t)rows * ld_kv * sizeof(float));
    float *dv = cz_cmp_up(t, v, (size_t)rows * ld_kv * sizeof(float));
    int32_t *dcu = cz_cmp_up(t, cu, (ns + 1) * sizeof *cu);
    float *init = calloc(on, sizeof *init); /* NaN where the op writes */
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < heads * hd; i++)
            init[(size_t)r * ld_o + i] = NAN;
    float *dout = cz_cmp_up(t, init, on * sizeof(float));
    t->G->attn_dense(t->cu, dout, ld_o, dq, ld_q, dk, dv, ld_kv, dcu, ns, heads, kvh, hd, scale,
                     causal != 0, window);
    float *got = cz_cmp_down(t, dout, on * sizeof(float));
    char what[128];
    snprintf(what, sizeof what, "attn_dense %s window %u heads %u kvh %u hd %u",
             causal ? "causal" : "bidirectional", window, heads, kvh, hd);
    cz_cmp_nmse(t, what, ref, got, on, TOL_ATTN);
    cz_kmem_free(t->cu, dq);
    cz_kmem_free(t->cu, dk);
    cz_kmem_free(t->cu, dv);
    cz_kmem_free(t->cu, dcu);
    cz_kmem_free(t->cu, dout);
    free(got);
    free(init);
    free(ref);
    free(q);
    free(kk);
    free(v);
    free(cu);
}

static void test_dense(cz_cmp *t)
{
    static const struct {
        int causal;
        uint32_t window;
    } modes[] = {{1, 0}, {1, 5}, {0, 0}, {0, 4}, {1, 64}, {0, 100}};
    static const struct {
        uint32_t heads, kvh, hd;
    } shapes[] = {{6, 3, 16}, {8, 2, 64}, {4, 4, 80}, {16, 1, 128}, {2, 2, 200}};
    static const uint32_t lens[] = {1, 17, 70, 300};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
            run_dense(t, shapes[s].heads, shapes[s].kvh, shapes[s].hd, 4, lens, modes[m].causal,
                      modes[m].window);
}

int main(void)
{
    cz_cmp t;
    int rc = cz_cmp_open(&t, 11);
    if (rc)
        return rc;
    test_paged_mixed(&t);
    test_paged_split(&t);
    test_dense(&t);
    return cz_cmp_close(&t);
}
