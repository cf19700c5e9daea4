/* test_kvmap.c - the engine's physical KV blocks (engine/cz_kvmap.h) against the serving
 * core's accounting: a serving core is driven through random multi-turn work, with and
 * without the host tier, the way the engine drives it (sequences of a step marked before
 * the sync, stores named before the sync that frees their blocks, loads after it), and
 * after every sync each sequence's table must hold exactly its core count, every physical
 * block must have one owner, and every token a step computes or a transfer moves must have
 * a block. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cz_kvmap.h"
#include "cz_policies.h"
#include "cz_server.h"

#define NONE UINT32_MAX

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Every physical block has at most one owner and each table matches the core. */
static void check_tables(cz_kvmap *m, cz_server *srv, uint32_t cap, bool in_step)
{
    uint8_t *owned = calloc(cap, 1);
    uint32_t n = cz_server_n_seqs(srv), used = 0;
    for (uint32_t id = 0; id < n; id++) {
        uint32_t len;
        const int32_t *t = cz_kvmap_table(m, id, &len);
        uint32_t held = 0;
        for (uint32_t j = 0; j < len; j++) {
            if (t[j] < 0)
                continue;
            cr_assert_lt((uint32_t)t[j], cap);
            cr_assert_eq(owned[t[j]], 0, "block %d has two owners", t[j]);
            owned[t[j]] = 1;
            held++;
        }
        const cz_seq *q = cz_server_seq(srv, id);
        if (!in_step)
            cr_assert_eq(held, q->blocks, "seq %u holds %u blocks, the core counts %u", id,
                         held, q->blocks);
        used += held;
    }
    cr_assert_eq(used, cz_kvmap_used(m));
    if (!in_step)
        cr_assert_eq(used, cz_server_kv_used(srv));
    free(owned);
}

static uint64_t n_loads, n_stores;

static void xfers(cz_kvmap *m, cz_server *srv, uint32_t bt, cz_xfer *pend, uint32_t *n_pend)
{
    uint32_t n;
    const cz_xfer *x = cz_server_take_xfers(srv, &n);
    for (uint32_t i = 0; i < n; i++)
        *(x[i].to_host ? &n_stores : &n_loads) += 1;
    /* stores name their blocks before the sync */
    for (uint32_t i = 0; i < n; i++) {
        if (!x[i].to_host)
            continue;
        for (uint32_t p = x[i].first; p < x[i].first + x[i].tokens; p++)
            cr_assert_geq(cz_kvmap_block(m, x[i].seq, p / bt), 0,
                          "store of seq %u: position %u has no block", x[i].seq, p);
    }
    cz_kvmap_sync(m, srv);
    for (uint32_t i = 0; i < n; i++) {
        if (!x[i].to_host)
            for (uint32_t p = x[i].first; p < x[i].first + x[i].tokens; p++)
                cr_assert_geq(cz_kvmap_block(m, x[i].seq, p / bt), 0,
                              "load of seq %u: position %u has no block", x[i].seq, p);
        pend[(*n_pend)++] = x[i];
    }
}

static void drive(uint32_t kv_idle, uint64_t seed)
{
    cz_metrics met;
    cz_metrics_init(&met, 0.0, 0);
    cz_server_config cfg = cz_server_config_default();
    cfg.max_num_seqs = 6;
    cfg.max_num_batched_tokens = 24;
    cfg.block_tokens = 4;
    cfg.kv_blocks = 40;
    cfg.kv_idle = kv_idle;
    cz_server *srv = cz_server_create(&cfg, &cz_sched_fcfs, &met, 0);
    cz_kvmap *m = cz_kvmap_create(cfg.kv_blocks, 0, cfg.block_tokens, 0, 0);
    cz_xfer pend[4096];
    uint32_t n_pend = 0;
    uint32_t seqs[12];
    for (uint32_t i = 0; i < 12; i++)
        seqs[i] = cz_server_seq_open(srv, i, 0, false);
    uint64_t s = seed;
    double t = 0;
    uint32_t turn[12] = {0};
    for (int it = 0; it < 600; it++) {
        t += 0.01;
        /* new turns on idle sequences */
        for (uint32_t i = 0; i < 12; i++) {
            const cz_seq *q = cz_server_seq(srv, seqs[i]);
            if (q->state == CZ_SEQ_IDLE && rnd(&s) % 4 == 0)
                cz_server_turn(srv, t, seqs[i], turn[i]++, 0, 1 + (uint32_t)(rnd(&s) % 30),
                               1 + (uint32_t)(rnd(&s) % 12), 0, true);
        }
        xfers(m, srv, cfg.block_tokens, pend, &n_pend);
        /* half the transfers land now */
        uint32_t keep = 0;
        for (uint32_t i = 0; i < n_pend; i++) {
            if (rnd(&s) % 2) {
                cz_server_on_xfer_done(srv, t, pend[i].seq, pend[i].to_host);
                xfers(m, srv, cfg.block_tokens, pend + n_pend, &keep); /* none expected */
            } else {
                pend[keep++] = pend[i];
            }
        }
        n_pend = keep;
        check_tables(m, srv, cz_kvmap_capacity(m), false);
        cz_batch b;
        bool ran = cz_server_schedule(srv, t, &b);
        /* the engine marks the step's sequences before any sync */
        if (ran) {
            for (uint32_t id = cz_server_decode_first(srv); id != NONE;
                 id = cz_server_decode_next(srv, id))
                cz_kvmap_set_inflight(m, id, 1);
            for (uint32_t k = 0; k < b.n_items; k++)
                cz_kvmap_set_inflight(m, b.items[k].seq, b.items[k].tokens);
        }
        xfers(m, srv, cfg.block_tokens, pend, &n_pend);
        if (!ran)
            continue;
        check_tables(m, srv, cz_kvmap_capacity(m), true);
        /* every token the step computes has a block */
        for (uint32_t k = 0; k < b.n_items; k++)
            for (uint32_t p = b.items[k].ctx_before; p < b.items[k].ctx_before + b.items[k].tokens;
                 p++)
                cr_assert_geq(cz_kvmap_block(m, b.items[k].seq, p / cfg.block_tokens), 0);
        for (uint32_t id = cz_server_decode_first(srv); id != NONE;
             id = cz_server_decode_next(srv, id)) {
            const cz_seq *q = cz_server_seq(srv, id);
            cr_assert_geq(cz_kvmap_block(m, id, q->computed / cfg.block_tokens), 0);
        }
        for (uint32_t id = 0; id < cz_server_n_seqs(srv); id++)
            cz_kvmap_set_inflight(m, id, 0);
        cz_step_events ev;
        cz_server_on_batch_done(srv, t + 0.005, &ev);
        xfers(m, srv, cfg.block_tokens, pend, &n_pend);
        check_tables(m, srv, cz_kvmap_capacity(m), false);
        cr_assert_lt(n_pend, 4000);
    }
    cz_kvmap_free(m);
    cz_server_free(srv);
    cz_metrics_free(&met);
}

Test(kvmap, follows_the_core_dropping_idle_kv)
{
    for (uint64_t seed = 1; seed <= 5; seed++)
        drive(CZ_KV_IDLE_DROP, seed * 7919);
}

Test(kvmap, follows_the_core_with_the_host_tier)
{
    n_loads = n_stores = 0;
    for (uint64_t seed = 1; seed <= 5; seed++)
        drive(CZ_KV_IDLE_OFFLOAD, seed * 104729);
    cr_assert_gt(n_stores, 100);
    cr_assert_gt(n_loads, 20, "only %llu loads", (unsigned long long)n_loads);
}
