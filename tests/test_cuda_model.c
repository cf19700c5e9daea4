/* test_cuda_model.c - whole networks on CUDA against the CPU backend: the same cards and
 * seeds build the same weights on both contexts, the same steps run on both (a varlen
 * batch of a fresh prefill, a chunked prefill over a cached prefix and decodes over
 * shuffled blocks, teacher-forced with the CPU's ids so both see the same tokens), and the
 * logits are compared by NMSE; the omni stages (MoE thinker, encoder, vocoder, code
 * predictor) run on CUDA and must record no device error. Skipped without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cmp.h"
#include "cz_kvpool.h"
#include "cz_models.h"
#include "cz_net.h"

#define BT 16u
#define BLOCKS 64u

static cz_net *net_of(cz_kctx *k, const cz_stage_card *s, cz_dtype dt, uint64_t seed)
{
    cz_net *n = NULL;
    cz_err e;
    cz_net_source src = {.checkpoint = NULL, .seed = seed, .dtype = dt};
    if (cz_net_create(k, s, &src, &n, &e) != CZ_OK) {
        fprintf(stderr, "FAIL: cz_net_create(%s): %s\n", s->name, e.msg);
        exit(1);
    }
    return n;
}

static cz_kv_pool *pool_of(cz_kctx *k, const cz_stage_card *s, cz_dtype dt)
{
    cz_kv_pool *p = NULL;
    cz_err e;
    if (cz_kv_pool_create(k, s, BLOCKS, BT, dt, &p, &e) != CZ_OK) {
        fprintf(stderr, "FAIL: cz_kv_pool_create(%s): %s\n", s->name, e.msg);
        exit(1);
    }
    return p;
}

/* Three sequences over shuffled blocks: step 0 prefills A (37 tokens) and B's first chunk
 * (20 tokens); step 1 decodes A and prefills B's second chunk (13 tokens over its cached
 * 20) beside C's fresh prefill (5 tokens); then decodes of all three. */
static void compare_decoder(cz_cmp *t, const cz_stage_card *s, cz_dtype wdt, cz_dtype kvdt,
                            double tol)
{
    cz_net *nc = net_of(t->cpu, s, wdt, 7), *ng = net_of(t->cu, s, wdt, 7);
    cz_kv_pool *pc = pool_of(t->cpu, s, kvdt), *pg = pool_of(t->cu, s, kvdt);
    cz_net_reserve(nc, 64, 3, 256);
    cz_net_reserve(ng, 64, 3, 256);
    const uint32_t V = s->vocab, MB = 8;
    int32_t perm[BLOCKS];
    for (uint32_t i = 0; i < BLOCKS; i++)
        perm[i] = (int32_t)i;
    for (uint32_t i = BLOCKS - 1; i > 0; i--) {
        uint32_t j = cz_cmp_randu(t, i + 1);
        int32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    int32_t bt[3 * 8];
    for (uint32_t i = 0; i < 3 * MB; i++)
        bt[i] = perm[i];
    int32_t len[3] = {0, 0, 0};
    int32_t tok[64], pos[64], qsl[4], sl[3], rows[3], ids_c[3], ids_g[3];
    int64_t slots[64];
    float *lc = malloc((size_t)3 * V * sizeof(float)), *lg = malloc((size_t)3 * V * sizeof(float));
    int32_t next[3] = {-1, -1, -1};
    for (int step = 0; step < 6; step++) {
        uint32_t want[3];
        if (step == 0) {
            want[0] = 37, want[1] = 20, want[2] = 0;
        } else if (step == 1) {
            want[0] = 1, want[1] = 13, want[2] = 5;
        } else {
            want[0] = want[1] = want[2] = 1;
        }
        uint32_t n = 0, ns = 0, nsamp = 0;
        int32_t btb[3 * 8];
        qsl[0] = 0;
        for (uint32_t q = 0; q < 3; q++) {
            if (!want[q])
                continue;
            for (uint32_t i = 0; i < want[q]; i++) {
                int32_t p = len[q] + (int32_t)i;
                tok[n] = next[q] >= 0 && i == 0 ? next[q] : (int32_t)cz_cmp_randu(t, V);
                pos[n] = p;
                slots[n] = (int64_t)bt[q * MB + (uint32_t)p / BT] * BT + (uint32_t)p % BT;
                n++;
            }
            len[q] += (int32_t)want[q];
            memcpy(btb + ns * MB, bt + q * MB, MB * sizeof(int32_t));
            sl[ns] = len[q];
            qsl[ns + 1] = (int32_t)n;
            rows[nsamp++] = (int32_t)n - 1;
            ns++;
        }
        cz_step_batch b = {.n_seqs = ns, .n_tokens = n, .max_blocks = MB, .tokens = tok,
                           .positions = pos, .qsl = qsl, .seq_lens = sl, .block_table = btb,
                           .slots = slots, .sample_rows = rows, .n_samples = nsamp};
        cz_net_decode(nc, pc, &b, NULL, ids_c, lc);
        cz_net_decode(ng, pg, &b, NULL, ids_g, lg);
        char what[384];
        snprintf(what, sizeof what, "%s %s/%s KV step %d logits", s->name, cz_dtype_name(wdt),
                 cz_dtype_name(kvdt), step);
        cz_cmp_nmse(t, what, lc, lg, (size_t)nsamp * V, tol);
        uint32_t si = 0;
        for (uint32_t q = 0; q < 3; q++)
            if (want[q])
                next[q] = ids_c[si++]; /* teacher-forced: both continue with the CPU's id */
    }
    free(lc);
    free(lg);
    cz_kv_pool_free(pc);
    cz_kv_pool_free(pg);
    cz_net_free(nc);
    cz_net_free(ng);
}

static cz_model_card card_of(const char *name)
{
    cz_model_card m;
    cz_err e;
    if (cz_model_card_load(name, &m, &e) != CZ_OK) {
        fprintf(stderr, "FAIL: %s\n", e.msg);
        exit(1);
    }
    return m;
}

/* The omni pipeline's other stages run on CUDA (sizes as the engine reserves them) and the
 * context records no error; the encoder's and vocoder's outputs are counts, compared. */
static void omni_stages(cz_cmp *t)
{
    cz_model_card m = card_of("tiny-omni");
    for (uint32_t i = 0; i < m.n_stages; i++) {
        const cz_stage_card *s = &m.stages[i];
        if (s->kind == CZ_STAGE_AR) {
            compare_decoder(t, s, CZ_F32, CZ_F32, 1e-8);
            continue;
        }
        cz_net *nc = net_of(t->cpu, s, CZ_F32, 3), *ng = net_of(t->cu, s, CZ_F32, 3);
        cz_net_reserve(nc, 256, 2, 256);
        cz_net_reserve(ng, 256, 2, 256);
        uint32_t lens[2] = {100, 37};
        uint64_t a, b;
        if (s->kind == CZ_STAGE_ENCODER) {
            a = cz_net_encode(nc, lens, 2, 11);
            b = cz_net_encode(ng, lens, 2, 11);
        } else {
            lens[0] = 50;
            a = cz_net_vocode(nc, lens, 2, 11);
            b = cz_net_vocode(ng, lens, 2, 11);
        }
        char what[384];
        snprintf(what, sizeof what, "%s %s outputs", m.name, s->name);
        cz_cmp_exact(t, what, &a, &b, sizeof a);
        cz_net_free(nc);
        cz_net_free(ng);
    }
}

int main(void)
{
    cz_cmp t;
    int rc = cz_cmp_open(&t, 2024);
    if (rc)
        return rc;
    cz_model_card m = card_of("tiny-llama");
    compare_decoder(&t, &m.stages[0], CZ_F32, CZ_F32, 1e-8);
    compare_decoder(&t, &m.stages[0], CZ_F32, CZ_BF16, 1e-8);
    /* bf16 weights: cuBLAS multiplies bf16 activations (the CPU keeps them float32) */
    compare_decoder(&t, &m.stages[0], CZ_BF16, CZ_BF16, 1e-3);
    omni_stages(&t);
    return cz_cmp_close(&t);
}
