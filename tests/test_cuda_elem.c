/* test_cuda_elem.c - the CUDA twins of the element-wise, normalisation, copy and sampling
 * ops (embed, rmsnorm, layernorm, rope, silu_mul, gelu, silu, add, transpose, gather_rows,
 * kv_write, copy_blocks, argmax, sample) against the CPU backend, on the same random
 * inputs (tests/cuda_cmp.h): by NMSE at docs/kernels.md's tolerances, exactly for lookups,
 * copies, conversions and ids. Shapes include rows narrower than a warp or not a multiple
 * of one, single rows, strided rope rows, negative KV slots, every dtype, special floats
 * in the KV conversions, and a 151936-entry vocabulary for argmax and sample. sample's ids
 * must match the CPU's in 98 % of draws, and a differing id must be one float rounding
 * could give (the draw, or the top-p mass, within rounding of a boundary), as
 * tests/test_kernels.c checks the CPU against its contract. Skips (77) without a device. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cmp.h"

#define TOL_ELEM 1e-12 /* rmsnorm, layernorm, silu, silu_mul, gelu */
#define TOL_ROPE 1e-11
#define BIG_VOCAB 151936u /* Qwen2/Qwen3 */

static const cz_dtype DTS[] = {CZ_F32, CZ_BF16, CZ_F16};

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Device copy of n elements of host array h. */
#define UP(t, h, n) cz_cmp_up((t), (h), (size_t)(n) * sizeof *(h))

static int32_t *rand_ids(cz_cmp *t, size_t n, uint32_t below)
{
    int32_t *a = malloc((n ? n : 1) * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = (int32_t)cz_cmp_randu(t, below);
    return a;
}

/* Runs a float op's CPU result `ref` against the device's `dev` (n floats). */
static void cmp_f(cz_cmp *t, const char *what, const float *ref, const float *dev, size_t n,
                  double tol)
{
    float *got = cz_cmp_down(t, dev, n * sizeof *got);
    if (tol == 0)
        cz_cmp_exact(t, what, ref, got, n * sizeof *got);
    else
        cz_cmp_nmse(t, what, ref, got, n, tol);
    free(got);
}

static void test_embed(cz_cmp *t)
{
    static const uint32_t sh[][3] = {{1, 1, 1}, {7, 33, 50}, {37, 1000, 300}, {5, 4099, 17}};
    for (size_t d = 0; d < LEN(DTS); d++)
        for (size_t s = 0; s < LEN(sh); s++) {
            uint32_t n = sh[s][0], dim = sh[s][1], vocab = sh[s][2];
            size_t tb = (size_t)vocab * dim * cz_dtype_size(DTS[d]);
            void *tab = cz_cmp_rand_dt(t, DTS[d], (size_t)vocab * dim, 2.0f);
            int32_t *ids = rand_ids(t, n, vocab);
            float *ref = malloc((size_t)n * dim * sizeof *ref);
            void *dt = cz_cmp_up(t, tab, tb);
            int32_t *di = UP(t, ids, n);
            float *dout = cz_kmem_alloc(t->cu, (size_t)n * dim * sizeof *ref);
            t->C->embed(t->cpu, ref, tab, DTS[d], ids, n, dim);
            t->G->embed(t->cu, dout, dt, DTS[d], di, n, dim);
            char what[96];
            snprintf(what, sizeof what, "embed %s n %u dim %u", cz_dtype_name(DTS[d]), n, dim);
            cmp_f(t, what, ref, dout, (size_t)n * dim, 0);
            cz_kmem_free(t->cu, dt);
            cz_kmem_free(t->cu, di);
            cz_kmem_free(t->cu, dout);
            free(tab);
            free(ids);
            free(ref);
        }
}

/* rmsnorm and layernorm (with and without bias), out of place and in place. */
static void test_norms(cz_cmp *t)
{
    static const uint32_t sh[][2] = {{1, 1}, {3, 31}, {17, 128}, {5, 4097}, {2, 8192}, {300, 64}};
    for (size_t s = 0; s < LEN(sh); s++) {
        uint32_t rows = sh[s][0], dim = sh[s][1];
        size_t n = (size_t)rows * dim;
        float *x = cz_cmp_randf(t, n, 3.0f), *w = cz_cmp_randf(t, dim, 1.5f);
        float *b = cz_cmp_randf(t, dim, 0.5f), *ref = malloc(n * sizeof *ref);
        for (size_t i = 0; i < n; i++)
            x[i] += 2.0f; /* a mean far from 0: the variance's second pass matters */
        float *dx = UP(t, x, n), *dw = UP(t, w, dim), *db = UP(t, b, dim);
        float *dout = cz_kmem_alloc(t->cu, n * sizeof *ref);
        char what[96];
        for (int op = 0; op < 3; op++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                float *o = inplace ? dx : dout;
                if (inplace)
                    cz_kmem_upload(t->cu, dx, x, n * sizeof *x);
                if (op == 0) {
                    t->C->rmsnorm(t->cpu, ref, x, w, 1e-6f, rows, dim);
                    t->G->rmsnorm(t->cu, o, dx, dw, 1e-6f, rows, dim);
                } else {
                    const float *bb = op == 2 ? b : NULL, *dbb = op == 2 ? db : NULL;
                    t->C->layernorm(t->cpu, ref, x, w, bb, 1e-5f, rows, dim);
                    t->G->layernorm(t->cu, o, dx, dw, dbb, 1e-5f, rows, dim);
                }
                snprintf(what, sizeof what, "%s rows %u dim %u%s",
                         op == 0 ? "rmsnorm" : op == 1 ? "layernorm" : "layernorm+bias", rows,
                         dim, inplace ? " in place" : "");
                cmp_f(t, what, ref, o, n, TOL_ELEM);
            }
            cz_kmem_upload(t->cu, dx, x, n * sizeof *x);
        }
        cz_kmem_free(t->cu, dx);
        cz_kmem_free(t->cu, dw);
        cz_kmem_free(t->cu, db);
        cz_kmem_free(t->cu, dout);
        free(x);
        free(w);
        free(b);
        free(ref);
    }
}

static void test_rope(cz_cmp *t)
{
    /* n, heads, head_dim, ld (beyond heads x head_dim: columns rope must not touch) */
    static const uint32_t sh[][4] = {
        {1, 1, 2, 2}, {5, 4, 64, 320}, {9, 3, 126, 400}, {3, 2, 512, 1100}, {70, 16, 128, 2048}};
    for (size_t s = 0; s < LEN(sh); s++) {
        uint32_t n = sh[s][0], heads = sh[s][1], hd = sh[s][2], ld = sh[s][3];
        size_t len = (size_t)n * ld;
        float *x = cz_cmp_randf(t, len, 2.0f), *inv = malloc(hd / 2 * sizeof *inv);
        int32_t *pos = rand_ids(t, n, 40000);
        for (uint32_t j = 0; j < hd / 2; j++)
            inv[j] = powf(1e6f, -2.0f * (float)j / (float)hd);
        float *dx = UP(t, x, len), *dinv = UP(t, inv, hd / 2);
        int32_t *dpos = UP(t, pos, n);
        t->C->rope(t->cpu, x, ld, pos, inv, n, heads, hd);
        t->G->rope(t->cu, dx, ld, dpos, dinv, n, heads, hd);
        char what[96];
        snprintf(what, sizeof what, "rope n %u heads %u head_dim %u ld %u", n, heads, hd, ld);
        cmp_f(t, what, x, dx, len, TOL_ROPE);
        cz_kmem_free(t->cu, dx);
        cz_kmem_free(t->cu, dinv);
        cz_kmem_free(t->cu, dpos);
        free(x);
        free(inv);
        free(pos);
    }
}

/* silu_mul, gelu, silu, add (add also in place on either input). */
static void test_elementwise(cz_cmp *t)
{
    static const uint32_t sm[][2] = {{1, 1}, {7, 33}, {16, 1000}, {3, 8960}};
    char what[96];
    for (size_t s = 0; s < LEN(sm); s++) {
        uint32_t n = sm[s][0], inter = sm[s][1];
        float *gu = cz_cmp_randf(t, (size_t)n * 2 * inter, 6.0f);
        float *ref = malloc((size_t)n * inter * sizeof *ref), *dgu = UP(t, gu, (size_t)n * 2 * inter);
        float *dout = cz_kmem_alloc(t->cu, (size_t)n * inter * sizeof *ref);
        t->C->silu_mul(t->cpu, ref, gu, n, inter);
        t->G->silu_mul(t->cu, dout, dgu, n, inter);
        snprintf(what, sizeof what, "silu_mul n %u inter %u", n, inter);
        cmp_f(t, what, ref, dout, (size_t)n * inter, TOL_ELEM);
        cz_kmem_free(t->cu, dgu);
        cz_kmem_free(t->cu, dout);
        free(gu);
        free(ref);
    }
    static const size_t lens[] = {1, 31, 100003, (1u << 20) + 3};
    for (size_t s = 0; s < LEN(lens); s++) {
        size_t n = lens[s];
        float *a = cz_cmp_randf(t, n, 8.0f), *b = cz_cmp_randf(t, n, 8.0f);
        float *ref = malloc(n * sizeof *ref);
        float *da = UP(t, a, n), *db = UP(t, b, n), *dout = cz_kmem_alloc(t->cu, n * sizeof *ref);
        for (int op = 0; op < 2; op++) {
            memcpy(ref, a, n * sizeof *ref);
            cz_kmem_upload(t->cu, dout, a, n * sizeof *a);
            (op ? t->C->silu : t->C->gelu)(t->cpu, ref, n);
            (op ? t->G->silu : t->G->gelu)(t->cu, dout, n);
            snprintf(what, sizeof what, "%s n %zu", op ? "silu" : "gelu", n);
            cmp_f(t, what, ref, dout, n, TOL_ELEM);
        }
        t->C->add(t->cpu, ref, a, b, n);
        t->G->add(t->cu, dout, da, db, n);
        snprintf(what, sizeof what, "add n %zu", n);
        cmp_f(t, what, ref, dout, n, 0);
        t->G->add(t->cu, da, da, db, n);
        snprintf(what, sizeof what, "add n %zu, out = a", n);
        cmp_f(t, what, ref, da, n, 0);
        cz_kmem_upload(t->cu, da, a, n * sizeof *a);
        t->G->add(t->cu, db, da, db, n);
        snprintf(what, sizeof what, "add n %zu, out = b", n);
        cmp_f(t, what, ref, db, n, 0);
        cz_kmem_free(t->cu, da);
        cz_kmem_free(t->cu, db);
        cz_kmem_free(t->cu, dout);
        free(a);
        free(b);
        free(ref);
    }
}

/* transpose and gather_rows. */
static void test_copies(cz_cmp *t)
{
    static const uint32_t tr[][2] = {{1, 1}, {1, 77}, {77, 1}, {33, 65}, {257, 31}, {1000, 3},
                                     {512, 4096}};
    char what[96];
    for (size_t s = 0; s < LEN(tr); s++) {
        uint32_t rows = tr[s][0], cols = tr[s][1];
        size_t n = (size_t)rows * cols;
        float *x = cz_cmp_randf(t, n, 1.0f), *ref = malloc(n * sizeof *ref);
        float *dx = UP(t, x, n), *dout = cz_kmem_alloc(t->cu, n * sizeof *ref);
        t->C->transpose(t->cpu, ref, x, rows, cols);
        t->G->transpose(t->cu, dout, dx, rows, cols);
        snprintf(what, sizeof what, "transpose %u x %u", rows, cols);
        cmp_f(t, what, ref, dout, n, 0);
        cz_kmem_free(t->cu, dx);
        cz_kmem_free(t->cu, dout);
        free(x);
        free(ref);
    }
    static const uint32_t ga[][3] = {{1, 1, 1}, {17, 13, 50}, {100, 4097, 7}, {2, 2048, 300}};
    for (size_t s = 0; s < LEN(ga); s++) {
        uint32_t n = ga[s][0], dim = ga[s][1], rows = ga[s][2];
        float *x = cz_cmp_randf(t, (size_t)rows * dim, 1.0f);
        float *ref = malloc((size_t)n * dim * sizeof *ref);
        int32_t *idx = rand_ids(t, n, rows);
        float *dx = UP(t, x, (size_t)rows * dim), *dout = cz_kmem_alloc(t->cu, (size_t)n * dim * 4);
        int32_t *didx = UP(t, idx, n);
        t->C->gather_rows(t->cpu, ref, x, idx, n, dim);
        t->G->gather_rows(t->cu, dout, dx, didx, n, dim);
        snprintf(what, sizeof what, "gather_rows n %u dim %u", n, dim);
        cmp_f(t, what, ref, dout, (size_t)n * dim, 0);
        cz_kmem_free(t->cu, dx);
        cz_kmem_free(t->cu, dout);
        cz_kmem_free(t->cu, didx);
        free(x);
        free(ref);
        free(idx);
    }
}

/* kv_write into layer 1 of a 3-layer block-major pool, per dtype: K and V read from one
 * fused row (ld wider than a row), some slots negative, special floats among the values. */
static void test_kv_write(cz_cmp *t)
{
    const uint32_t bt = 16, kvh = 2, hd = 40, layers = 3, blocks = 9, n = 50;
    const uint32_t row = kvh * hd, ld = 3 * row + 5;
    const size_t stride = (size_t)layers * bt * row, pool = blocks * stride;
    static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 65520.0f, -65519.0f,
                                    1e-8f, -3e-39f, 0x1.01p0f, 0x1.03p0f, 0x1.002p0f,
                                    0x1.006p0f, -0.0f}; /* ties of bf16 and f16 rounding */
    float *x = cz_cmp_randf(t, (size_t)n * ld, 4.0f);
    for (size_t i = 0; i < LEN(special); i++)
        x[(size_t)(i % n) * ld + i] = x[(size_t)(i % n) * ld + row + i] = special[i];
    int64_t *slots = malloc(n * sizeof *slots);
    uint32_t *perm = malloc(blocks * bt * sizeof *perm);
    for (uint32_t i = 0; i < blocks * bt; i++)
        perm[i] = i;
    for (uint32_t i = blocks * bt - 1; i > 0; i--) { /* distinct slots */
        uint32_t j = cz_cmp_randu(t, i + 1), s = perm[i];
        perm[i] = perm[j];
        perm[j] = s;
    }
    for (uint32_t i = 0; i < n; i++)
        slots[i] = i % 7 == 3 ? -1 : (int64_t)perm[i];
    float *dx = UP(t, x, (size_t)n * ld);
    int64_t *dslots = UP(t, slots, n);
    char what[96];
    for (size_t d = 0; d < LEN(DTS); d++) {
        size_t es = cz_dtype_size(DTS[d]), bytes = pool * es;
        void *hk = cz_cmp_rand_dt(t, DTS[d], pool, 1.0f), *hv = cz_cmp_rand_dt(t, DTS[d], pool, 1.0f);
        void *dk = cz_cmp_up(t, hk, bytes), *dv = cz_cmp_up(t, hv, bytes);
        size_t layer1 = (size_t)bt * row * es;
        cz_kv_layer kc = {(char *)hk + layer1, (char *)hv + layer1, DTS[d], stride, bt, kvh, hd};
        cz_kv_layer kg = {(char *)dk + layer1, (char *)dv + layer1, DTS[d], stride, bt, kvh, hd};
        t->C->kv_write(t->cpu, &kc, x, x + row, ld, slots, n);
        t->G->kv_write(t->cu, &kg, dx, dx + row, ld, dslots, n);
        for (int kv = 0; kv < 2; kv++) {
            void *got = cz_cmp_down(t, kv ? dv : dk, bytes);
            snprintf(what, sizeof what, "kv_write %s %s pool", cz_dtype_name(DTS[d]), kv ? "V" : "K");
            cz_cmp_exact(t, what, kv ? hv : hk, got, bytes);
            free(got);
        }
        cz_kmem_free(t->cu, dk);
        cz_kmem_free(t->cu, dv);
        free(hk);
        free(hv);
    }
    cz_kmem_free(t->cu, dx);
    cz_kmem_free(t->cu, dslots);
    free(x);
    free(slots);
    free(perm);
}

/* copy_blocks: pool -> pinned host, host -> pool (runs of consecutive ids, strided blocks),
 * inside the pool, and through pageable host memory; ids are host arrays. */
static void test_copy_blocks(cz_cmp *t)
{
    const size_t bb = 96, ps = 128, pn = 16; /* block bytes, pool stride, pool blocks */
    static const int32_t out_ids[6] = {3, 0, 11, 12, 13, 3}, in_ids[6] = {4, 5, 6, 1, 9, 10};
    static const int32_t mv_src[4] = {2, 3, 4, 15}, mv_dst[4] = {5, 6, 7, 14};
    unsigned char *pool = (unsigned char *)cz_cmp_randf(t, pn * ps / 4, 1.0f);
    unsigned char *hpage = malloc(6 * bb), *hpin = cz_kmem_host_alloc(t->cu, 6 * bb);
    unsigned char *cpool = malloc(pn * ps), *chost = malloc(6 * bb);
    uint32_t nan = 0x7f812345;
    memcpy(pool + 3 * ps + 8, &nan, 4);
    memcpy(cpool, pool, pn * ps);
    void *dpool = cz_cmp_up(t, pool, pn * ps);
    /* pool -> packed host (pinned), then back into other blocks */
    t->C->copy_blocks(t->cpu, chost, bb, NULL, cpool, ps, out_ids, bb, 6);
    t->G->copy_blocks(t->cu, hpin, bb, NULL, dpool, ps, out_ids, bb, 6);
    cz_kctx_sync(t->cu);
    cz_cmp_exact(t, "copy_blocks pool -> pinned host", chost, hpin, 6 * bb);
    t->C->copy_blocks(t->cpu, cpool, ps, in_ids, chost, bb, NULL, bb, 6);
    t->G->copy_blocks(t->cu, dpool, ps, in_ids, hpin, bb, NULL, bb, 6);
    void *got = cz_cmp_down(t, dpool, pn * ps);
    cz_cmp_exact(t, "copy_blocks pinned host -> pool", cpool, got, pn * ps);
    free(got);
    /* inside the pool (runs of three, then one), then through pageable memory */
    t->C->copy_blocks(t->cpu, cpool, ps, mv_dst, cpool, ps, mv_src, bb, 4);
    t->G->copy_blocks(t->cu, dpool, ps, mv_dst, dpool, ps, mv_src, bb, 4);
    got = cz_cmp_down(t, dpool, pn * ps);
    cz_cmp_exact(t, "copy_blocks inside the pool", cpool, got, pn * ps);
    free(got);
    t->C->copy_blocks(t->cpu, chost, bb, NULL, cpool, ps, mv_dst, bb, 4);
    t->G->copy_blocks(t->cu, hpage, bb, NULL, dpool, ps, mv_dst, bb, 4);
    cz_kctx_sync(t->cu);
    cz_cmp_exact(t, "copy_blocks pool -> pageable host", chost, hpage, 4 * bb);
    t->C->copy_blocks(t->cpu, cpool, ps, NULL, chost, bb, NULL, bb, 4);
    t->G->copy_blocks(t->cu, dpool, ps, NULL, hpage, bb, NULL, bb, 4);
    got = cz_cmp_down(t, dpool, pn * ps);
    cz_cmp_exact(t, "copy_blocks pageable host -> pool, NULL ids", cpool, got, pn * ps);
    free(got);
    cz_kmem_free(t->cu, dpool);
    cz_kmem_host_free(t->cu, hpin);
    free(pool);
    free(hpage);
    free(cpool);
    free(chost);
}

/* Logits on a grid of 97 values (ties), a few rows constant, spikes in every third row. */
static void grid_logits(cz_cmp *t, float *l, uint32_t rows, uint32_t v)
{
    for (uint32_t r = 0; r < rows; r++) {
        float *row = l + (size_t)r * v;
        for (uint32_t i = 0; i < v; i++)
            row[i] = r % 7 == 6 ? 0.5f : (float)((int)cz_cmp_randu(t, 97) - 48) / 8;
        if (r % 3 == 0)
            for (int j = 0; j < 3; j++)
                row[cz_cmp_randu(t, v)] += 6.0f;
    }
}

/* Row r of rows: grid logits for even r, continuous ones (3 x uniform) for odd r. */
static float *mixed_logits(cz_cmp *t, uint32_t rows, uint32_t v)
{
    float *l = malloc((size_t)rows * v * sizeof *l);
    grid_logits(t, l, rows, v);
    for (uint32_t r = 1; r < rows; r += 2) {
        float *c = cz_cmp_randf(t, v, 3.0f);
        memcpy(l + (size_t)r * v, c, v * sizeof *c);
        free(c);
    }
    return l;
}

static void test_argmax(cz_cmp *t)
{
    static const uint32_t sh[][2] = {{1, 1}, {5, 2}, {40, 9}, {40, 8192}, {300, 3},
                                     {8, BIG_VOCAB}};
    for (size_t s = 0; s < LEN(sh); s++) {
        uint32_t rows = sh[s][0], v = sh[s][1];
        float *l = mixed_logits(t, rows, v);
        if (rows > 5 && v > 2) {
            l[0 * (size_t)v + v - 1] = 100.0f; /* the maximum at the last id */
            l[1 * (size_t)v + 0] = 100.0f;     /* at id 0 */
            for (uint32_t i = 0; i < v; i++)   /* all -inf but a tie of two at the end */
                l[2 * (size_t)v + i] = i + 2 >= v ? -1.0f : -INFINITY;
            for (uint32_t i = 0; i < v; i++)   /* two ids one ulp apart, -0 and +0 ties */
                l[3 * (size_t)v + i] = i % 2 ? -0.0f : 0.0f;
            l[3 * (size_t)v + 1] = 7.0f;
            l[3 * (size_t)v + 2] = nextafterf(7.0f, 8.0f);
            l[4 * (size_t)v + 1] = NAN;        /* a NaN row gives -1 */
            l[5 * (size_t)v + 2] = INFINITY;   /* so does +inf */
        }
        int32_t ref[300], *got;
        float *dl = UP(t, l, (size_t)rows * v);
        int32_t *dids = cz_kmem_alloc(t->cu, rows * sizeof *ref);
        t->C->argmax(t->cpu, ref, l, rows, v);
        t->G->argmax(t->cu, dids, dl, rows, v);
        got = cz_cmp_down(t, dids, rows * sizeof *ref);
        char what[96];
        snprintf(what, sizeof what, "argmax rows %u vocab %u", rows, v);
        cz_cmp_exact(t, what, ref, got, rows * sizeof *ref);
        cz_kmem_free(t->cu, dl);
        cz_kmem_free(t->cu, dids);
        free(got);
        free(l);
    }
}

typedef struct {
    float temperature;
    uint32_t top_k;
    float top_p;
} sample_cfg;

typedef struct {
    float l;
    int32_t id;
} ranked;

/* Most likely first, ties to the lower id. */
static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Whether `got` is an id the contract allows for row l where float rounding could move
 * the draw (tests/test_kernels.c's check): the kept set in double, then got's cumulative
 * interval must hold the draw within delta, a bound on float sums' error; true outright
 * when the top-p set itself is within rounding. */
static bool sample_allowed(const float *l, uint32_t v, const sample_cfg *c, uint64_t seed,
                           uint64_t counter, int32_t got)
{
    ranked *rl = malloc(v * sizeof *rl);
    int32_t *rk = malloc(v * sizeof *rk);
    float mx = l[0];
    for (uint32_t i = 0; i < v; i++) {
        rl[i] = (ranked){l[i], (int32_t)i};
        mx = l[i] > mx ? l[i] : mx;
    }
    qsort(rl, v, sizeof *rl, by_rank);
    for (uint32_t i = 0; i < v; i++)
        rk[i] = rl[i].id;
    free(rl);
    uint32_t nk = c->top_k && c->top_k < v ? c->top_k : v, ntop = nk;
    double pm = INFINITY, total = 0, cum = 0;
    if (c->top_p < 1.0f) {
        double tot = 0;
        for (uint32_t i = 0; i < nk; i++)
            tot += exp(((double)l[rk[i]] - mx) / c->temperature);
        for (uint32_t i = 0; i < nk; i++) {
            cum += exp(((double)l[rk[i]] - mx) / c->temperature);
            pm = fmin(pm, fabs(cum - c->top_p * tot) / tot);
            if (cum >= c->top_p * tot) {
                nk = i + 1;
                break;
            }
        }
    }
    qsort(rk, nk, sizeof *rk, by_id);
    for (uint32_t i = 0; i < nk; i++)
        total += exp(((double)l[rk[i]] - mx) / c->temperature);
    double delta = (ntop + 64.0) * 0x1p-23 * total;
    bool ok = pm * total < delta;
    double target = cz_kernel_uniform(seed, counter) * total;
    cum = 0;
    for (uint32_t i = 0; i < nk && !ok; i++) {
        double lo = cum;
        cum += exp(((double)l[rk[i]] - mx) / c->temperature);
        ok = rk[i] == got && target >= lo - delta && target < cum + delta;
    }
    free(rk);
    return ok;
}

static void test_sample(cz_cmp *t)
{
    static const uint32_t vocabs[] = {1, 7, 64, 1000, 8192, BIG_VOCAB};
    static const sample_cfg cfgs[] = {
        {0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}, {0.7f, 40, 1.0f}, {1.3f, 0, 0.9f}, {0.5f, 5, 0.5f},
        {1.0f, 1, 1.0f}, {1.0f, 0, 0.0f}, {2.0f, 3, 0.999f}, {1.0f, 100000, 1.0f},
        {0.8f, 50, 0.9f}, {1.0f, 2000, 0.95f}};
    unsigned checked = 0, exact = 0, bad = 0;
    char what[128];
    for (size_t vi = 0; vi < LEN(vocabs); vi++) {
        uint32_t v = vocabs[vi], rows = v > 10000 ? 6 : v > 1000 ? 12 : 40;
        float *l = mixed_logits(t, rows, v), *dl = UP(t, l, (size_t)rows * v);
        uint64_t ctr[40];
        int32_t ref[40];
        uint64_t *dctr = cz_kmem_alloc(t->cu, sizeof ctr);
        int32_t *dids = cz_kmem_alloc(t->cu, sizeof ref);
        for (size_t c = 0; c < LEN(cfgs); c++) {
            const sample_cfg *sc = &cfgs[c];
            uint64_t seed = ((uint64_t)cz_cmp_randu(t, ~0u) << 32) | cz_cmp_randu(t, ~0u);
            for (uint32_t r = 0; r < rows; r++)
                ctr[r] = r % 2 ? ((uint64_t)cz_cmp_randu(t, ~0u) << 20) ^ cz_cmp_randu(t, ~0u) : r;
            cz_kmem_upload(t->cu, dctr, ctr, rows * sizeof *ctr);
            t->C->sample(t->cpu, ref, l, rows, v, sc->temperature, sc->top_k, sc->top_p, seed, ctr);
            t->G->sample(t->cu, dids, dl, rows, v, sc->temperature, sc->top_k, sc->top_p, seed,
                         dctr);
            int32_t *got = cz_cmp_down(t, dids, rows * sizeof *ref);
            snprintf(what, sizeof what, "sample vocab %u T %g top_k %u top_p %g", v,
                     sc->temperature, sc->top_k, sc->top_p);
            if (sc->temperature == 0.0f) {
                cz_cmp_exact(t, what, ref, got, rows * sizeof *ref);
            } else {
                for (uint32_t r = 0; r < rows; r++) {
                    checked++;
                    if (got[r] == ref[r]) {
                        exact++;
                    } else if (got[r] < 0 || (uint32_t)got[r] >= v ||
                               !sample_allowed(l + (size_t)r * v, v, sc, seed, ctr[r], got[r])) {
                        printf("FAIL %s row %u: id %d, the CPU's %d\n", what, r, got[r], ref[r]);
                        bad++;
                    }
                }
            }
            free(got);
        }
        float *back = cz_cmp_down(t, dl, (size_t)rows * v * sizeof *back);
        snprintf(what, sizeof what, "sample vocab %u leaves the logits", v);
        cz_cmp_exact(t, what, l, back, (size_t)rows * v * sizeof *l);
        cz_kmem_free(t->cu, dl);
        cz_kmem_free(t->cu, dctr);
        cz_kmem_free(t->cu, dids);
        free(back);
        free(l);
    }
    t->run++;
    bool ok = bad == 0 && checked > 1000 && exact >= checked - checked / 50;
    t->failed += !ok;
    printf("%s sample: %u of %u draws as the CPU's, %u not allowed by the contract\n",
           ok ? "ok  " : "FAIL", exact, checked, bad);

    /* flat logits: sums exact on both backends, so every id must match the CPU's */
    const uint32_t n = 2000;
    static const sample_cfg edges[] = {{1.0f, 0, 0.5f}, {0.9f, 3, 1.0f}, {1.0f, 6, 0.5f}};
    float *flat = malloc((size_t)n * 8 * sizeof *flat);
    uint64_t *ctr = malloc(n * sizeof *ctr);
    int32_t *ref = malloc(n * sizeof *ref);
    for (uint32_t i = 0; i < n * 8; i++)
        flat[i] = 1.25f;
    for (uint32_t r = 0; r < n; r++)
        ctr[r] = r;
    float *dl = UP(t, flat, (size_t)n * 8);
    uint64_t *dctr = UP(t, ctr, n);
    int32_t *dids = cz_kmem_alloc(t->cu, n * sizeof *ref);
    for (size_t c = 0; c < LEN(edges); c++) {
        t->C->sample(t->cpu, ref, flat, n, 8, edges[c].temperature, edges[c].top_k,
                     edges[c].top_p, 5, ctr);
        t->G->sample(t->cu, dids, dl, n, 8, edges[c].temperature, edges[c].top_k,
                     edges[c].top_p, 5, dctr);
        int32_t *got = cz_cmp_down(t, dids, n * sizeof *ref);
        snprintf(what, sizeof what, "sample flat logits, top_k %u top_p %g", edges[c].top_k,
                 edges[c].top_p);
        cz_cmp_exact(t, what, ref, got, n * sizeof *ref);
        free(got);
    }
    cz_kmem_free(t->cu, dl);
    cz_kmem_free(t->cu, dctr);
    cz_kmem_free(t->cu, dids);
    free(flat);
    free(ctr);
    free(ref);
}

int main(void)
{
    cz_cmp t;
    int rc = cz_cmp_open(&t, 11);
    if (rc)
        return rc;
    const cz_kreserve res = {.max_rows = 2048, .max_ctx = 4096, .max_heads = 64,
                             .max_dim = BIG_VOCAB};
    cz_kctx_reserve(t.cpu, &res);
    cz_kctx_reserve(t.cu, &res);
    test_embed(&t);
    test_norms(&t);
    test_rope(&t);
    test_elementwise(&t);
    test_copies(&t);
    test_kv_write(&t);
    test_copy_blocks(&t);
    test_argmax(&t);
    test_sample(&t);
    return cz_cmp_close(&t);
}
