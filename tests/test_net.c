/* test_net.c - the engine's networks (engine/cz_net.h) and KV pool (engine/cz_kvpool.h) on
 * the CPU backend, with random weights: the varlen step's invariances (a prompt prefilled
 * in chunks gives what one prefill gives; scattered physical blocks give what contiguous
 * ones give, bit for bit; a batch gives what each sequence alone gives), windowed
 * attention with sinks, the encoder, vocoder and code-predictor paths with their counts,
 * every stage kind of the shipped speech cards, the RoPE frequencies, the pool's layout,
 * and that a step allocates nothing after the reserve (the executable is linked with
 * malloc, calloc and realloc wrapped). The forward pass against transformers is
 * tests/hf_reference.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "cz_net.h"
#include "cz_net_int.h"


/* Logits that went through different summation orders (a GEMV against a GEMM, a batch
 * against one sequence) agree to float32 rounding: max |a - b| within this fraction of
 * the RMS of b. */
#define TOL_REL 1e-4
#define BT 16u /* tokens per block */

static cz_kctx *mk(uint32_t threads)
{
    cz_kctx *k = NULL;
    cz_err e;
    cr_assert_eq(cz_kctx_cpu_create(threads, &k, &e), CZ_OK);
    return k;
}

static cz_model_card card_of(const char *name)
{
    cz_model_card m;
    cz_err e;
    cr_assert_eq(cz_model_card_load(name, &m, &e), CZ_OK, "%s", e.msg);
    return m;
}

static const cz_stage_card *stage(const cz_model_card *m, const char *name)
{
    const cz_stage_card *s = cz_model_card_stage(m, name);
    cr_assert_not_null(s, "stage %s", name);
    return s;
}

static cz_net *net_of(cz_kctx *k, const cz_stage_card *s, cz_dtype dt, uint64_t seed)
{
    cz_net *n = NULL;
    cz_err e;
    cz_net_source src = {.checkpoint = NULL, .seed = seed, .dtype = dt};
    cr_assert_eq(cz_net_create(k, s, &src, &n, &e), CZ_OK, "%s", e.msg);
    return n;
}

static cz_kv_pool *pool_of(cz_kctx *k, const cz_stage_card *s, uint32_t blocks, cz_dtype dt)
{
    cz_kv_pool *p = NULL;
    cz_err e;
    cr_assert_eq(cz_kv_pool_create(k, s, blocks, BT, dt, &p, &e), CZ_OK, "%s", e.msg);
    return p;
}

static void near(const float *a, const float *b, size_t n, const char *what)
{
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)b[i] * b[i];
        double d = fabs((double)a[i] - b[i]);
        mx = d > mx ? d : mx;
    }
    double rms = sqrt(ss / (double)n);
    cr_assert(rms > 0.1, "%s: logits RMS %g", what, rms);
    cr_assert(mx <= TOL_REL * rms, "%s: max |diff| %g, RMS %g", what, mx, rms);
}

/* ---- a varlen step built from per-sequence parts ---- */

#define MAXS 8
#define MAXT 512
#define MAXB 32

/* One step: sequence b has `cached[b]` positions in the cache and `q[b]` new tokens
 * toks[b][cached .. cached + q), its blocks bt[b]; the last row of each is sampled. */
typedef struct step {
    int32_t tokens[MAXT], positions[MAXT], qsl[MAXS + 1], seq_lens[MAXS], rows[MAXS];
    int32_t table[MAXS * MAXB];
    int64_t slots[MAXT];
    cz_step_batch b;
} step;

static const cz_step_batch *build(step *s, uint32_t n_seqs, const int32_t *const *toks,
                                  const uint32_t *cached, const uint32_t *q,
                                  const int32_t *const *bt, uint32_t window, uint32_t sinks)
{
    uint32_t t = 0;
    s->qsl[0] = 0;
    for (uint32_t b = 0; b < n_seqs; b++) {
        for (uint32_t i = 0; i < q[b]; i++, t++) {
            uint32_t p = cached[b] + i;
            s->tokens[t] = toks[b][p];
            s->positions[t] = (int32_t)p;
            s->slots[t] = (int64_t)bt[b][p / BT] * BT + p % BT;
        }
        s->qsl[b + 1] = (int32_t)t;
        s->seq_lens[b] = (int32_t)(cached[b] + q[b]);
        s->rows[b] = (int32_t)t - 1;
        for (uint32_t j = 0; j < MAXB; j++)
            s->table[b * MAXB + j] = bt[b][j];
    }
    s->b = (cz_step_batch){.n_seqs = n_seqs, .n_tokens = t, .max_blocks = MAXB,
                           .tokens = s->tokens, .positions = s->positions, .qsl = s->qsl,
                           .seq_lens = s->seq_lens, .block_table = s->table, .slots = s->slots,
                           .sample_rows = s->rows, .n_samples = n_seqs, .window = window,
                           .sinks = sinks};
    return &s->b;
}

/* Runs one sequence: the prompt toks[0..np) in chunks of chunk[] (summing to np), then
 * `dec` greedy decode steps; logits (1 + dec, vocab) of the prompt's last position and of
 * each decode, ids (1 + dec). */
static void run_seq(cz_net *n, cz_kv_pool *kv, int32_t *toks, uint32_t np, const uint32_t *chunk,
                    uint32_t n_chunks, uint32_t dec, const int32_t *bt, float *logits,
                    int32_t *ids, uint32_t window, uint32_t sinks)
{
    uint32_t V = cz_net_card(n)->vocab, cached = 0;
    step s;
    for (uint32_t c = 0; c < n_chunks; c++) {
        const int32_t *tk[1] = {toks}, *b[1] = {bt};
        int32_t id;
        bool last = c + 1 == n_chunks;
        cz_net_decode(n, kv, build(&s, 1, tk, &cached, &chunk[c], b, window, sinks), NULL, &id,
                      last ? logits : NULL);
        cached += chunk[c];
        if (last)
            ids[0] = id;
    }
    cr_assert_eq(cached, np);
    for (uint32_t d = 0; d < dec; d++) {
        toks[np + d] = ids[d];
        const int32_t *tk[1] = {toks}, *b[1] = {bt};
        uint32_t one = 1;
        cz_net_decode(n, kv, build(&s, 1, tk, &cached, &one, b, window, sinks), NULL, &ids[d + 1],
                      logits + (size_t)(d + 1) * V);
        cached++;
    }
}

static void prompt_of(int32_t *toks, uint32_t n, uint32_t vocab, uint32_t salt)
{
    for (uint32_t i = 0; i < n; i++)
        toks[i] = (int32_t)((i * 2654435761u + salt * 40503u) % vocab);
}

static void contiguous(int32_t *bt, int32_t first)
{
    for (uint32_t j = 0; j < MAXB; j++)
        bt[j] = first + (int32_t)j;
}

/* ---- the decoder step ---- */

Test(net, chunked_prefill_equals_one_shot)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_F32, 1);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_F32);
    cz_net_reserve(n, 64, 4, MAXB * BT);
    uint32_t V = s->vocab, np = 45, dec = 6;
    int32_t toks[64], toks2[64], bt[MAXB], ids[8], ids2[8];
    prompt_of(toks, np, V, 1);
    memcpy(toks2, toks, sizeof toks);
    contiguous(bt, 0);
    size_t bytes = (size_t)(dec + 1) * V * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    uint32_t one[1] = {45}, chunks[4] = {13, 17, 1, 14};
    run_seq(n, kv, toks, np, one, 1, dec, bt, a, ids, 0, 0);
    run_seq(n, kv, toks2, np, chunks, 4, dec, bt, b, ids2, 0, 0);
    for (uint32_t i = 0; i <= dec; i++) {
        cr_assert_eq(ids[i], ids2[i], "step %u", i);
        near(b + (size_t)i * V, a + (size_t)i * V, V, "chunked prefill");
    }
    free(a);
    free(b);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

Test(net, a_shared_net_computes_what_its_owner_does)
{
    /* the owner on 2 threads, a share on its own 2-thread context: same weights, same
     * shapes, so the same logits bit for bit; the share owns no weight bytes */
    cz_kctx *k = mk(2), *k2 = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_BF16, 5);
    cz_net *sh = cz_net_share(n, k2);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_BF16), *kv2 = pool_of(k2, s, MAXB, CZ_BF16);
    cz_net_reserve(n, 64, 4, MAXB * BT);
    cz_net_reserve(sh, 64, 4, MAXB * BT);
    uint32_t V = s->vocab, np = 30, dec = 5;
    int32_t toks[64], toks2[64], bt[MAXB], ids[8], ids2[8];
    prompt_of(toks, np, V, 3);
    memcpy(toks2, toks, sizeof toks);
    contiguous(bt, 0);
    size_t bytes = (size_t)(dec + 1) * V * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    uint32_t one[1] = {30};
    run_seq(n, kv, toks, np, one, 1, dec, bt, a, ids, 0, 0);
    run_seq(sh, kv2, toks2, np, one, 1, dec, bt, b, ids2, 0, 0);
    cr_expect_eq(memcmp(ids, ids2, (dec + 1) * sizeof *ids), 0);
    cr_expect_eq(memcmp(a, b, bytes), 0, "the share's logits differ from the owner's");
    cr_expect_eq(cz_net_weight_bytes(sh), cz_net_weight_bytes(n));
    free(a);
    free(b);
    cz_kv_pool_free(kv);
    cz_kv_pool_free(kv2);
    cz_net_free(sh); /* before its owner */
    cz_net_free(n);
    cz_kctx_free(k);
    cz_kctx_free(k2);
}

Test(net, scattered_blocks_equal_contiguous)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_BF16, 2);
    cz_kv_pool *kv = pool_of(k, s, 2 * MAXB, CZ_BF16);
    cz_net_reserve(n, 64, 4, MAXB * BT);
    uint32_t V = s->vocab, np = 50, dec = 20;
    int32_t toks[80], toks2[80], bt[MAXB], bt2[MAXB], ids[21] = {0}, ids2[21] = {0};
    prompt_of(toks, np, V, 2);
    memcpy(toks2, toks, sizeof toks);
    contiguous(bt, 0);
    /* physical blocks in another order, in the pool's other half */
    for (uint32_t j = 0; j < MAXB; j++)
        bt2[j] = (int32_t)(MAXB + (j * 7 + 3) % MAXB);
    size_t bytes = (size_t)(dec + 1) * V * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    uint32_t chunks[2] = {30, 20};
    run_seq(n, kv, toks, np, chunks, 2, dec, bt, a, ids, 0, 0);
    run_seq(n, kv, toks2, np, chunks, 2, dec, bt2, b, ids2, 0, 0);
    cr_assert_arr_eq(ids, ids2, sizeof ids);
    cr_assert_eq(memcmp(a, b, bytes), 0,
                 "the same values in the same order: bit-identical logits");
    free(a);
    free(b);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

/* A batch of sequences (prefills of different lengths, then decodes together) gives each
 * sequence's logits alone; run on the dense tiny-llama and the MoE thinker of tiny-omni. */
static void batch_equals_alone(const char *card, const char *stage_name)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of(card);
    const cz_stage_card *s = stage(&m, stage_name);
    cz_net *n = net_of(k, s, CZ_F32, 3);
    cz_kv_pool *kv = pool_of(k, s, 4 * MAXB, CZ_F32);
    cz_net_reserve(n, 256, 4, MAXB * BT);
    enum { NS = 3, DEC = 4 };
    uint32_t V = s->vocab, np[NS] = {33, 7, 60};
    int32_t toks[NS][96], bt[NS][MAXB];
    float *alone = malloc((size_t)NS * (DEC + 1) * V * sizeof(float));
    float *both = malloc((size_t)NS * (DEC + 1) * V * sizeof(float));
    int32_t ids_alone[NS][DEC + 1], ids_both[NS][DEC + 1];
    for (uint32_t b = 0; b < NS; b++) {
        prompt_of(toks[b], np[b], V, 10 + b);
        contiguous(bt[b], (int32_t)(b * MAXB));
        run_seq(n, kv, toks[b], np[b], &np[b], 1, DEC, bt[b], alone + (size_t)b * (DEC + 1) * V,
                ids_alone[b], 0, 0);
    }
    /* together: one step of the three prefills, then DEC steps of three decodes */
    step st;
    uint32_t cached[NS] = {0, 0, 0}, q[NS];
    const int32_t *tk[NS] = {toks[0], toks[1], toks[2]}, *tb[NS] = {bt[0], bt[1], bt[2]};
    float lg[NS * 4096];
    cr_assert(V <= 4096);
    for (uint32_t d = 0; d <= DEC; d++) {
        int32_t out[NS];
        for (uint32_t b = 0; b < NS; b++)
            q[b] = d ? 1 : np[b];
        cz_net_decode(n, kv, build(&st, NS, tk, cached, q, tb, 0, 0), NULL, out, lg);
        for (uint32_t b = 0; b < NS; b++) {
            ids_both[b][d] = out[b];
            memcpy(both + ((size_t)b * (DEC + 1) + d) * V, lg + (size_t)b * V, V * sizeof(float));
            cached[b] += q[b];
            /* feed what the sequence alone generated (the ids are compared below) */
            if (d < DEC)
                toks[b][np[b] + d] = ids_alone[b][d];
        }
    }
    for (uint32_t b = 0; b < NS; b++) {
        cr_assert_arr_eq(ids_alone[b], ids_both[b], sizeof ids_both[b], "sequence %u", b);
        near(both + (size_t)b * (DEC + 1) * V, alone + (size_t)b * (DEC + 1) * V,
             (size_t)(DEC + 1) * V, "batch against alone");
    }
    free(alone);
    free(both);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

Test(net, batch_equals_each_alone)
{
    batch_equals_alone("tiny-llama", "llm");
}

Test(net, moe_batch_equals_each_alone)
{
    batch_equals_alone("tiny-omni", "thinker");
}

Test(net, windowed_attention_with_sinks)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_F32, 4);
    cz_kv_pool *kv = pool_of(k, s, 3 * MAXB, CZ_F32);
    cz_net_reserve(n, 128, 4, MAXB * BT);
    uint32_t V = s->vocab, np = 100, window = 20, sinks = 4;
    int32_t toks[128], bt[MAXB], bt_holes[MAXB], ids[2];
    prompt_of(toks, np, V, 5);
    contiguous(bt, 0);
    float *full = malloc((size_t)2 * V * sizeof(float));
    float *win = malloc((size_t)2 * V * sizeof(float));
    float *holes = malloc((size_t)2 * V * sizeof(float));
    uint32_t all[1] = {100};
    run_seq(n, kv, toks, np, all, 1, 1, bt, full, ids, 0, 0);
    run_seq(n, kv, toks, np, all, 1, 1, bt, win, ids, window, sinks);
    /* the window changes what the last query sees */
    double diff = 0;
    for (uint32_t i = 0; i < V; i++)
        diff = fmax(diff, fabs((double)full[V + i] - win[V + i]));
    cr_assert(diff > 1e-3, "the window must matter (max diff %g)", diff);
    /* prefill the same prompt in the blocks of another range, then decode with the blocks
     * that hold no kept position dropped from the table (-1): the same logits */
    contiguous(bt_holes, MAXB);
    float *pre = malloc((size_t)2 * V * sizeof(float));
    int32_t ids2[2];
    step st;
    uint32_t cached = 0;
    const int32_t *tk[1] = {toks}, *tb[1] = {bt_holes};
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, all, tb, window, sinks), NULL, ids2, pre);
    cr_assert_eq(ids2[0], ids[0]);
    toks[np] = ids2[0];
    cached = np;
    uint32_t p = np; /* the decode's position: keeps (p - window, p] and [0, sinks) */
    for (uint32_t j = 0; j < MAXB; j++) {
        uint32_t lo = j * BT, hi = lo + BT - 1;
        bool kept = lo < sinks || (hi > p - window && lo <= p);
        if (!kept)
            bt_holes[j] = -1;
    }
    uint32_t one = 1;
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &one, tb, window, sinks), NULL, ids2,
                  holes);
    cr_assert_eq(memcmp(holes, win + V, V * sizeof(float)), 0);
    free(full);
    free(win);
    free(holes);
    free(pre);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

Test(net, sampling_is_seeded)
{
    cz_kctx *k = mk(1);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_BF16, 5);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_BF16);
    cz_net_reserve(n, 32, 2, MAXB * BT);
    int32_t toks[32], bt[MAXB], a[1], b[1], g[1];
    prompt_of(toks, 20, s->vocab, 6);
    contiguous(bt, 0);
    step st;
    uint32_t cached = 0, q = 20;
    const int32_t *tk[1] = {toks}, *tb[1] = {bt};
    uint64_t ctr[1] = {7};
    cz_sampling hot = {.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .seed = 99,
                       .counter = ctr};
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &q, tb, 0, 0), &hot, a, NULL);
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &q, tb, 0, 0), &hot, b, NULL);
    cz_sampling greedy = {.temperature = 0.0f, .top_p = 1.0f};
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &q, tb, 0, 0), &greedy, g, NULL);
    int32_t g2[1];
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &q, tb, 0, 0), NULL, g2, NULL);
    cr_assert_eq(a[0], b[0], "the same seed and counter draw the same id");
    cr_assert_eq(g[0], g2[0], "temperature 0 and no sampling are both greedy");
    cr_assert(a[0] >= 0 && (uint32_t)a[0] < s->vocab);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

/* More sampled rows than the reserve's sequences go through the head in chunks: the same
 * ids and logits as in one pass. */
Test(net, sampled_rows_beyond_max_seqs)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *one = net_of(k, s, CZ_F32, 13), *four = net_of(k, s, CZ_F32, 13);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_F32);
    cz_net_reserve(one, 32, 1, MAXB * BT);
    cz_net_reserve(four, 32, 4, MAXB * BT);
    int32_t toks[32], bt[MAXB], ids1[3], ids4[3], rows[3] = {3, 7, 19};
    prompt_of(toks, 20, s->vocab, 14);
    contiguous(bt, 0);
    step st;
    uint32_t cached = 0, q = 20, V = s->vocab;
    const int32_t *tk[1] = {toks}, *tb[1] = {bt};
    float *a = malloc((size_t)3 * V * sizeof(float)), *b = malloc((size_t)3 * V * sizeof(float));
    build(&st, 1, tk, &cached, &q, tb, 0, 0);
    st.b.sample_rows = rows;
    st.b.n_samples = 3;
    cz_net_decode(one, kv, &st.b, NULL, ids1, a);
    cz_net_decode(four, kv, &st.b, NULL, ids4, b);
    cr_assert_arr_eq(ids1, ids4, sizeof ids1);
    near(a, b, (size_t)3 * V, "chunks of one row against one pass");
    free(a);
    free(b);
    cz_kv_pool_free(kv);
    cz_net_free(one);
    cz_net_free(four);
    cz_kctx_free(k);
}

/* Per-row sampling (a request's own parameters): each row draws what a uniform call with
 * its parameters draws, greedy rows their argmax, with runs split across the head's
 * chunks (a reserve of 2 sequences, 5 rows). */
Test(net, per_row_sampling_equals_uniform_calls)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *n = net_of(k, s, CZ_F32, 21);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_F32);
    cz_net_reserve(n, 32, 2, MAXB * BT);
    int32_t toks[32], bt[MAXB], rows[5] = {2, 5, 9, 14, 19}, got[5], want[5];
    prompt_of(toks, 20, s->vocab, 8);
    contiguous(bt, 0);
    step st;
    uint32_t cached = 0, q = 20;
    const int32_t *tk[1] = {toks}, *tb[1] = {bt};
    cz_row_sampling rs[5] = {{0.0f, 0, 1.0f, 0},     {1.3f, 0, 1.0f, 5}, {1.3f, 0, 1.0f, 5},
                             {0.7f, 20, 0.8f, 11}, {0.0f, 0, 1.0f, 0}};
    uint64_t ctr[5] = {4, 9, 9, 2, 0};
    build(&st, 1, tk, &cached, &q, tb, 0, 0);
    st.b.sample_rows = rows;
    st.b.n_samples = 5;
    cz_sampling per = {.temperature = 0.0f, .top_p = 1.0f, .counter = ctr, .rows = rs};
    cz_net_decode(n, kv, &st.b, &per, got, NULL);
    for (int i = 0; i < 5; i++) {
        int32_t one_row[1] = {rows[i]}, id[1];
        st.b.sample_rows = one_row;
        st.b.n_samples = 1;
        cz_sampling u = {.temperature = rs[i].temperature, .top_k = rs[i].top_k,
                         .top_p = rs[i].top_p, .seed = rs[i].seed, .counter = &ctr[i]};
        cz_net_decode(n, kv, &st.b, &u, id, NULL);
        want[i] = id[0];
    }
    cr_assert_arr_eq(got, want, sizeof got, "per-row: %d %d %d %d %d, uniform: %d %d %d %d %d",
                     got[0], got[1], got[2], got[3], got[4], want[0], want[1], want[2], want[3],
                     want[4]);
    cz_kv_pool_free(kv);
    cz_net_free(n);
    cz_kctx_free(k);
}

/* ---- encoders, vocoders, code predictors ---- */

Test(net, tiny_omni_stages_run_with_their_counts)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-omni");
    cz_net *enc = net_of(k, stage(&m, "audio_encoder"), CZ_BF16, 7);
    cz_net *voc = net_of(k, stage(&m, "code2wav"), CZ_BF16, 8);
    cz_net *cp = net_of(k, stage(&m, "code_predictor"), CZ_BF16, 9);
    cz_net_reserve(enc, 256, 4, 256);
    cz_net_reserve(voc, 64, 4, 64);
    cz_net_reserve(cp, 8, 8, 3);
    uint32_t frames[3] = {37, 8, 1}; /* downsample 4: 10 + 2 + 1 tokens */
    cr_assert_eq(cz_net_encode(enc, frames, 3, 1), 13);
    cr_assert_eq(cz_net_encode(enc, frames, 0, 1), 0);
    uint32_t codes[2] = {25, 3}; /* 8 x 5 x 4 x 3 = 480 samples a frame */
    cr_assert_eq(cz_stage_samples_per_token(stage(&m, "code2wav")), 480);
    cr_assert_eq(cz_net_vocode(voc, codes, 2, 1), 28 * 480);
    cz_net_inner(cp, 8, 3);
    cz_net_inner(cp, 1, 1);
    cz_net_free(enc);
    cz_net_free(voc);
    cz_net_free(cp);
    cz_kctx_free(k);
}

/* The engine builds exactly the tensors the tiny cards count. */
Test(net, tiny_cards_params_match_the_engine)
{
    cz_kctx *k = mk(1);
    const char *cards[] = {"tiny-llama", "tiny-omni"};
    for (size_t c = 0; c < 2; c++) {
        cz_model_card m = card_of(cards[c]);
        for (uint32_t i = 0; i < m.n_stages; i++) {
            cz_net *n = net_of(k, &m.stages[i], CZ_BF16, 1);
            double w = (double)cz_net_weight_bytes(n);
            /* norms, biases and conv weights are float32 (4 bytes), the rest bf16 */
            cr_assert(w >= 2.0 * m.stages[i].params && w < 4.0 * m.stages[i].params,
                      "%s/%s: %g bytes for %g params", cards[c], m.stages[i].name, w,
                      m.stages[i].params);
            cz_net_free(n);
            n = net_of(k, &m.stages[i], CZ_F32, 1);
            cr_assert_eq(cz_net_weight_bytes(n), (size_t)(4.0 * m.stages[i].params), "%s/%s",
                         cards[c], m.stages[i].name);
            cz_net_free(n);
        }
    }
    cz_kctx_free(k);
}

/* Every stage kind of the shipped speech cards runs at its real width (one layer of each,
 * to keep the test short; the MoE thinker of qwen3-omni is tiny-omni's). */
Test(net, speech_cards_stage_kinds_run, .timeout = 300)
{
    cz_kctx *k = mk(2);
    const char *cards[] = {"qwen3-omni", "moshi", "cosyvoice2"};
    for (size_t c = 0; c < 3; c++) {
        cz_model_card m = card_of(cards[c]);
        for (uint32_t i = 0; i < m.n_stages; i++) {
            cz_stage_card s = m.stages[i];
            if ((s.experts > 16 && s.hidden > 1024) || (s.kind == CZ_STAGE_AR && s.hidden > 2048))
                continue; /* the widest decoders: tiny-llama and tiny-omni's thinker cover them */
            s.layers = 1;
            if (s.experts > 16)
                s.experts = 16; /* the talker: its width, fewer experts */
            if (s.experts_active > s.experts)
                s.experts_active = s.experts;
            cz_net *n = net_of(k, &s, CZ_BF16, 3);
            uint32_t lens[2] = {12, 5};
            if (s.kind == CZ_STAGE_ENCODER) {
                cz_net_reserve(n, 32, 2, 32);
                cr_assert_eq(cz_net_encode(n, lens, 2, 1), 17, "%s/%s", cards[c], s.name);
            } else if (s.kind == CZ_STAGE_VOCODER) {
                cz_net_reserve(n, 32, 2, 32);
                cr_assert_eq(cz_net_vocode(n, lens, 2, 1), 17 * cz_stage_samples_per_token(&s));
            } else {
                cz_net_reserve(n, 4, 4, 8);
                cz_net_inner(n, 4, 8);
            }
            cz_net_free(n);
        }
    }
    cz_kctx_free(k);
}

/* ---- no allocation after the reserve ---- */

Test(net, no_allocation_after_reserve)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-omni");
    cz_model_card l = card_of("tiny-llama");
    const cz_stage_card *s = &l.stages[0], *th = stage(&m, "thinker");
    cz_net *n = net_of(k, s, CZ_BF16, 1), *moe = net_of(k, th, CZ_BF16, 1);
    cz_net *enc = net_of(k, stage(&m, "audio_encoder"), CZ_BF16, 2);
    cz_net *voc = net_of(k, stage(&m, "code2wav"), CZ_BF16, 3);
    cz_net *cp = net_of(k, stage(&m, "code_predictor"), CZ_BF16, 4);
    cz_kv_pool *kv = pool_of(k, s, MAXB, CZ_BF16), *kv2 = pool_of(k, th, MAXB, CZ_BF16);
    cz_net_reserve(n, 64, 2, MAXB * BT);
    cz_net_reserve(moe, 64, 2, MAXB * BT);
    cz_net_reserve(enc, 128, 2, 128);
    cz_net_reserve(voc, 32, 2, 32);
    cz_net_reserve(cp, 4, 4, 3);
    int32_t toks[64], bt[MAXB], ids[2];
    prompt_of(toks, 40, s->vocab, 9);
    contiguous(bt, 0);
    step st;
    uint32_t cached = 0, q = 40, one = 1;
    const int32_t *tk[1] = {toks}, *tb[1] = {bt};
    float lg[4096];
    uint64_t ctr[1] = {1};
    cz_sampling hot = {.temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .seed = 3, .counter = ctr};
    uint32_t frames[2] = {100, 17}, codes[2] = {25, 5};
    unsigned long before = cz_test_allocations();
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &q, tb, 0, 0), NULL, ids, lg);
    cached = 40;
    toks[40] = ids[0];
    cz_net_decode(n, kv, build(&st, 1, tk, &cached, &one, tb, 8, 2), &hot, ids, NULL);
    cached = 0;
    cz_net_decode(moe, kv2, build(&st, 1, tk, &cached, &q, tb, 0, 0), NULL, ids, NULL);
    cz_net_encode(enc, frames, 2, 5);
    cz_net_vocode(voc, codes, 2, 5);
    cz_net_inner(cp, 4, 3);
    cr_assert_eq(cz_test_allocations(), before, "a step allocated %lu times",
                 cz_test_allocations() - before);
    cz_kv_pool_free(kv);
    cz_kv_pool_free(kv2);
    cz_net_free(n);
    cz_net_free(moe);
    cz_net_free(enc);
    cz_net_free(voc);
    cz_net_free(cp);
    cz_kctx_free(k);
}

/* ---- pieces ---- */

Test(net, rope_frequencies)
{
    cz_model_card m = card_of("llama-3.2-1b");
    const cz_stage_arch *a = &m.stages[0].arch;
    float inv[32];
    cz__net_inv_freq(a, 64, inv);
    /* transformers' _compute_llama3_parameters for theta 500000, factor 32, low 1, high 4,
     * original 8192: wavelengths below 2048 kept, above 8192 divided by 32, smooth between */
    for (uint32_t j = 0; j < 32; j++) {
        double f = pow(500000.0, -(double)(2 * j) / 64), wl = 6.283185307179586477 / f, want = f;
        if (wl > 8192.0)
            want = f / 32;
        else if (wl >= 2048.0) {
            double sm = (8192.0 / wl - 1.0) / 3.0;
            want = (1 - sm) * f / 32 + sm * f;
        }
        cr_assert_float_eq(inv[j], (float)want, 1e-12, "j %u", j);
    }
    cr_assert_eq(inv[0], 1.0f);
    cr_assert_float_eq(inv[31], (float)(pow(500000.0, -62.0 / 64) / 32), 1e-15);
    cz_stage_arch lin = cz_stage_arch_default(CZ_STAGE_AR, 64, 128, 0);
    lin.rope_type = CZ_ROPE_LINEAR;
    lin.rope_factor = 4.0;
    cz__net_inv_freq(&lin, 8, inv);
    cr_assert_eq(inv[1], (float)(pow(10000.0, -0.25) / 4.0));
}

Test(net, kv_pool_layout)
{
    cz_kctx *k = mk(1);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_kv_pool *p = pool_of(k, s, 5, CZ_BF16);
    size_t per = (size_t)BT * s->kv_heads * s->head_dim; /* elements of K (or V) per layer */
    cr_assert_eq(p->block_bytes, per * 2 * s->layers * 2);
    cr_assert_eq(cz_kv_pool_token_bytes(p, 3),
                 (size_t)3 * 2 * s->layers * s->kv_heads * s->head_dim * 2);
    cr_assert_eq(cz_kv_pool_token_bytes(p, BT) * 1, p->block_bytes);
    for (uint32_t l = 0; l < s->layers; l++) {
        cz_kv_layer v = cz_kv_pool_layer(p, l);
        cr_assert_eq((char *)v.k - (char *)p->base, (ptrdiff_t)(l * 2 * per * 2));
        cr_assert_eq((char *)v.v - (char *)v.k, (ptrdiff_t)(per * 2));
        cr_assert_eq(v.block_stride * 2, p->block_bytes);
        cr_assert(v.block_tokens == BT && v.kv_heads == s->kv_heads && v.dt == CZ_BF16);
    }
    cz_kv_pool_free(p);

    cz_err e;
    cz_kv_pool *q = NULL;
    cz_model_card o = card_of("tiny-omni");
    cr_assert_eq(cz_kv_pool_create(k, stage(&o, "code2wav"), 4, BT, CZ_BF16, &q, &e), CZ_EINVAL);
    cr_assert(strstr(e.msg, "code2wav") != NULL, "%s", e.msg);
    cr_assert_eq(cz_kv_pool_create(k, s, 0, BT, CZ_BF16, &q, &e), CZ_EINVAL);
    cr_assert_eq(cz_kv_pool_create(k, s, 4, 0, CZ_BF16, &q, &e), CZ_EINVAL);
    cz_kctx_free(k);
}

Test(net, random_weights_are_seeded)
{
    cz_kctx *k = mk(2);
    cz_model_card m = card_of("tiny-llama");
    const cz_stage_card *s = &m.stages[0];
    cz_net *a = net_of(k, s, CZ_BF16, 11), *b = net_of(k, s, CZ_BF16, 11),
           *c = net_of(k, s, CZ_BF16, 12);
    size_t bytes = (size_t)s->vocab * s->hidden * 2;
    cr_assert_eq(memcmp(a->embed.w, b->embed.w, bytes), 0);
    cr_assert_neq(memcmp(a->embed.w, c->embed.w, bytes), 0);
    cr_assert_eq(a->head.w, a->embed.w, "tied: the head is the table");
    /* the draws are N(0, 1/fan_in): the table's rows have RMS 1 / sqrt(hidden) */
    double ss = 0;
    const uint16_t *e = a->embed.w;
    size_t cnt = (size_t)s->vocab * s->hidden;
    for (size_t i = 0; i < cnt; i++) {
        double v = cz_bf16_to_f32(e[i]);
        ss += v * v;
    }
    cr_assert_float_eq(ss / cnt * s->hidden, 1.0, 0.01);
    cz_net_free(a);
    cz_net_free(b);
    cz_net_free(c);
    cz_kctx_free(k);
}

Test(net, missing_checkpoint_is_an_error)
{
    cz_kctx *k = mk(1);
    cz_model_card m = card_of("tiny-llama");
    cz_net *n = NULL;
    cz_err e;
    cz_net_source src = {.checkpoint = "/nonexistent/ckpt", .named_by = "engine.weights",
                         .dtype = CZ_BF16};
    cr_assert_eq(cz_net_create(k, &m.stages[0], &src, &n, &e), CZ_ENOTFOUND);
    cr_assert_str_eq(e.msg, "engine.weights: cannot open '/nonexistent/ckpt' (No such file or "
                            "directory)");
    cr_assert_null(n);
    cz_kctx_free(k);
}
