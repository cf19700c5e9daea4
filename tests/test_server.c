/* test_server.c - the serving core driven by scripted sequences of events, with no event
 * queue and no simulator: proves the core is reactive and checks vLLM V1's scheduling
 * rules, multi-turn KV reuse, idle-KV eviction and offload, barge-in truncation and
 * streamed input on cases computed by hand (docs/serving-core.md). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "cz_policies.h"
#include "cz_server.h"

static cz_server_config small_cfg(void)
{
    cz_server_config c = cz_server_config_default();
    c.max_num_seqs = 2;
    c.max_num_batched_tokens = 8;
    c.block_tokens = 4;
    c.kv_blocks = 4;
    return c;
}

static void check(const cz_server *s)
{
    cz_err err;
    cz_err_clear(&err);
    cr_assert(cz_server_check(s, &err), "%s", err.msg);
}

static cz_step_events done(cz_server *s, double t, uint32_t expect_turns_done)
{
    cz_step_events ev;
    cz_server_on_batch_done(s, t, &ev);
    cr_assert_eq(ev.n_turn_done, expect_turns_done);
    check(s);
    return ev;
}

/* Opens a sequence and starts a complete turn on it; returns the sequence. */
static uint32_t request(cz_server *s, double t, uint32_t in, uint32_t out, uint64_t session)
{
    uint32_t q = cz_server_seq_open(s, session, 0, false);
    cz_server_turn(s, t, q, 0, 0, in, out, 0, true);
    return q;
}

Test(server, scripted_hand_computed)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;

    uint32_t a = request(s, 0.0, 6, 3, 0);
    cr_assert(cz_server_schedule(s, 0.0, &b));
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].seq, a);
    cr_assert_eq(b.items[0].tokens, 6);
    cr_assert_eq(b.prefill_tokens, 6);
    cr_assert_eq(b.prefill_attn_ctx, 21); /* 1 + 2 + ... + 6 */
    cr_assert_eq(cz_server_kv_used(s), 2);

    uint32_t bb = request(s, 1.0, 10, 2, 1); /* arrives mid-step */
    done(s, 1.5, 0);
    cr_assert_float_eq(m.req[0].first_token_s, 1.5, 1e-12);

    /* A decodes one token; B's prefill gets the remaining 7 of the 8-token budget */
    cr_assert(cz_server_schedule(s, 1.5, &b));
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(cz_server_decode_first(s), a);
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].seq, bb);
    cr_assert_eq(b.items[0].tokens, 7);
    cr_assert_eq(b.total_tokens, 8);
    cr_assert_eq(b.decode_ctx_tokens, 7);
    cr_assert_eq(cz_server_kv_used(s), 4);
    done(s, 2.0, 0);

    /* B needs a third block, the pool is full and nothing is idle: FCFS preempts the last
     * admitted (B itself), and nothing is admitted in a step with a preemption */
    cr_assert(cz_server_schedule(s, 2.0, &b));
    cr_assert_eq(b.n_items, 0);
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(b.decode_ctx_tokens, 8);
    cr_assert_eq(m.req[1].preemptions, 1);
    cr_assert_eq(cz_server_waiting(s), 1);
    cr_assert_eq(cz_server_seq(s, bb)->computed, 0);
    cr_assert_eq(cz_server_kv_used(s), 2);
    done(s, 2.5, 1); /* A's third token: its turn completes; A idles on its 2 blocks */
    cr_assert_eq(cz_server_kv_idle(s), 2);
    cz_server_seq_close(s, a);
    cr_assert_eq(cz_server_kv_used(s), 0);

    /* B recomputes: 8 then 2 prompt tokens, then one decode */
    cr_assert(cz_server_schedule(s, 2.5, &b));
    cr_assert_eq(b.items[0].tokens, 8);
    done(s, 3.0, 0);
    cr_assert(cz_server_schedule(s, 3.0, &b));
    cr_assert_eq(b.items[0].tokens, 2);
    cr_assert_eq(b.prefill_attn_ctx, 2 * 8 + 3);
    done(s, 3.5, 0);
    cr_assert(cz_server_schedule(s, 3.5, &b));
    cr_assert_eq(b.n_items, 0);
    cr_assert_eq(b.decode_seqs, 1);
    done(s, 4.0, 1);
    cr_assert(!cz_server_schedule(s, 4.0, &b));

    /* the driver's part: every turn's outcome (one stage: its record's), then the check */
    m.acct.requests = m.n_req;
    for (uint64_t i = 0; i < m.n_req; i++)
        cz_metrics_add_turn(&m, &(cz_turn_record){.session = m.req[i].session, .req = i,
                                                  .outcome = m.req[i].outcome});
    cz_metrics_finish(&m);
    cz_err err;
    cr_assert_eq(cz_metrics_check(&m, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&m, NULL, &sum);
    cr_assert_eq(sum.requests, 2);
    cr_assert_eq(sum.completed, 2);
    cr_assert_eq(sum.preemptions, 1);
    cr_assert_eq(sum.total_output_tokens, 5);
    cr_assert_float_eq(sum.ttft_ms.mean, (1500.0 + 2500.0) / 2, 1e-9); /* A 1.5 s, B 2.5 s */
    cr_assert_float_eq(sum.e2el_ms.max, 3000.0, 1e-9);                 /* A 2.5, B 3.0 */
    cr_assert_float_eq(sum.e2el_ms.min, 2500.0, 1e-9);
    cr_assert_float_eq(sum.tpot_ms.mean, 500.0, 1e-9);
    cr_assert_eq(sum.itl_ms.n, 3);
    cr_assert_float_eq(sum.itl_ms.p99, 500.0, 1e-9);
    cr_assert_float_eq(sum.queue_wait_ms.mean, (0.0 + 500.0) / 2, 1e-9);
    cr_assert_float_eq(sum.duration_s, 4.0, 1e-12);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, rejects_what_can_never_fit)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    /* 16 tokens = 4 blocks fit exactly; 17 do not */
    uint32_t ok = request(s, 0.0, 15, 1, 0);
    uint32_t no = request(s, 0.0, 16, 1, 1);
    cr_assert_eq(cz_server_seq(s, ok)->state, CZ_SEQ_WAITING);
    cr_assert_eq(cz_server_seq(s, no)->state, CZ_SEQ_IDLE);
    cr_assert_eq(m.req[1].outcome, CZ_REQ_REJECTED);
    cr_assert_eq(cz_server_waiting(s), 1);
    check(s);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, no_chunking_waits_for_budget)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.chunked_prefill = false;
    cfg.kv_blocks = 64;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    request(s, 0.0, 5, 2, 0);
    request(s, 0.0, 4, 2, 1);
    /* 5 fits the 8-token budget; the next 4 would exceed it unchunked: not admitted */
    cr_assert(cz_server_schedule(s, 0.0, &b));
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.total_tokens, 5);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* Runs steps until nothing can run; returns the time reached. */
static double drain(cz_server *s, double t)
{
    cz_batch b;
    while (cz_server_schedule(s, t, &b)) {
        t += 0.5;
        cz_step_events ev;
        cz_server_on_batch_done(s, t, &ev);
        check(s);
    }
    return t;
}

Test(server, multi_turn_reuses_prefix)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 16;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t q = request(s, 0.0, 10, 3, 0);
    double t = drain(s, 0.0);
    /* idle with the context minus the last sampled token: 10 + 3 - 1 = 12 tokens */
    cr_assert_eq(cz_server_seq(s, q)->computed, 12);
    cr_assert_eq(cz_server_kv_idle(s), 3);
    cz_server_turn(s, t, q, 1, 0, 5, 2, 0, true);
    cz_batch b;
    cr_assert(cz_server_schedule(s, t, &b));
    /* only the new input and the previous turn's last token are computed */
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].tokens, 6);
    cr_assert_eq(b.items[0].ctx_before, 12);
    cr_assert_eq(cz_server_kv_idle(s), 0);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, idle_kv_dropped_lru_first)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 8;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 7, 2, 0); /* 8 tokens of KV: 2 blocks idle after its turn */
    double t = drain(s, 0.0);
    uint32_t bq = request(s, t, 7, 2, 1);
    t = drain(s, t);
    cr_assert_eq(cz_server_kv_idle(s), 4);
    /* a 19-token prompt fills 5 blocks with 4 free: in its third chunk A (least recently
     * used) loses its KV, B keeps its */
    uint32_t c = request(s, t, 19, 1, 2);
    t = drain(s, t);
    cr_assert_eq(cz_server_seq(s, a)->blocks, 0);
    cr_assert_eq(cz_server_seq(s, a)->computed, 0);
    cr_assert_eq(cz_server_seq(s, bq)->blocks, 2);
    cr_assert_eq(cz_server_seq(s, c)->blocks, 5);
    /* A's next turn recomputes its whole context: 7 + 2 + 3 new = 12 tokens; admitting its
     * first 8 evicts B, the next least recently used */
    cz_server_turn(s, t, a, 1, 0, 3, 1, 0, true);
    cz_batch b;
    cr_assert(cz_server_schedule(s, t, &b));
    check(s);
    cr_assert_eq(b.items[0].seq, a);
    cr_assert_eq(b.items[0].tokens, 8);
    cr_assert_eq(b.items[0].ctx_before, 0);
    cr_assert_eq(cz_server_seq(s, bq)->blocks, 0);
    cr_assert_eq(cz_server_seq(s, c)->blocks, 5);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, offload_stores_then_loads_on_the_critical_path)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 6;
    cfg.max_num_batched_tokens = 32;
    cfg.kv_idle = CZ_KV_IDLE_OFFLOAD;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 7, 2, 0);
    double t = drain(s, 0.0);
    uint32_t n;
    const cz_xfer *x = cz_server_take_xfers(s, &n);
    cr_assert_eq(n, 1); /* the turn ended: its 8 tokens of KV are stored */
    cr_assert(x[0].to_host);
    cr_assert_eq(x[0].seq, a);
    cr_assert_eq(x[0].tokens, 8);
    /* until the store lands A's KV cannot be evicted: a 20-token turn (5 blocks, 4 free)
     * waits */
    uint32_t bq = request(s, t, 19, 1, 1);
    cz_batch b;
    cr_assert(!cz_server_schedule(s, t, &b));
    cz_server_on_xfer_done(s, t + 0.25, a, true);
    check(s);
    cr_assert_eq(cz_server_host_tokens(s), 8);
    cr_assert(cz_server_schedule(s, t + 0.25, &b)); /* A evicted, B admitted */
    cr_assert_eq(cz_server_seq(s, a)->blocks, 0);
    cr_assert_eq(b.items[0].seq, bq);
    done(s, t + 0.5, 1); /* B's only output token ends its turn */
    t = drain(s, t + 0.5);
    cz_server_take_xfers(s, &n);
    cz_server_on_xfer_done(s, t, bq, true);
    /* A's next turn: admission starts a load of its 8 stored tokens */
    cz_server_turn(s, t, a, 1, 0, 3, 1, 0, true);
    cr_assert(!cz_server_schedule(s, t, &b));
    x = cz_server_take_xfers(s, &n);
    cr_assert_eq(n, 1);
    cr_assert(!x[0].to_host);
    cr_assert_eq(x[0].tokens, 8);
    cr_assert_eq(cz_server_seq(s, a)->state, CZ_SEQ_LOADING);
    check(s);
    cz_server_on_xfer_done(s, t + 0.75, a, false);
    check(s);
    cr_assert(cz_server_schedule(s, t + 0.75, &b));
    /* only the new input and the last token are computed */
    cr_assert_eq(b.items[0].tokens, 4);
    cr_assert_eq(b.items[0].ctx_before, 8);
    cr_assert_float_eq(m.req[cz_server_seq(s, a)->turn_rec].kv_load_s, 0.75, 1e-12);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, barge_in_keeps_what_was_heard)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 16;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 6, 20, 0);
    cz_batch b;
    double t = 0;
    for (int i = 0; i < 6; i++) { /* prefill + 5 decodes: 6 tokens generated */
        cr_assert(cz_server_schedule(s, t, &b));
        t += 0.5;
        done(s, t, 0);
    }
    cr_assert_eq(cz_server_seq(s, a)->generated, 6);
    cr_assert_eq(cz_server_abort(s, t, a, 2), 6);
    check(s);
    const cz_seq *q = cz_server_seq(s, a);
    cr_assert_eq(q->state, CZ_SEQ_IDLE);
    cr_assert_eq(q->generated, 2);
    cr_assert_eq(q->computed, 8);                /* 6 input + 2 heard */
    cr_assert_eq(q->blocks, 2);
    cr_assert_eq(m.req[0].outcome, CZ_REQ_ABORTED);
    cr_assert_eq(m.req[0].output_tokens, 6);
    cr_assert_eq(m.req[0].heard_tokens, 2);
    /* the next turn continues from the heard context */
    cz_server_turn(s, t, a, 1, 0, 4, 1, 0, true);
    cr_assert(cz_server_schedule(s, t, &b));
    cr_assert_eq(b.items[0].ctx_before, 8);
    cr_assert_eq(b.items[0].tokens, 4);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, streamed_input_stalls_and_resumes)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 16;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = cz_server_seq_open(s, 0, 0, false);
    cz_server_turn(s, 0.0, a, 0, 0, 4, 2, 0, false); /* a first chunk: 4 in, 2 out allowed */
    double t = drain(s, 0.0);
    cr_assert_eq(cz_server_seq(s, a)->state, CZ_SEQ_STALLED);
    cr_assert_eq(cz_server_running(s), 1); /* it keeps its slot */
    cr_assert(isnan(m.req[0].finish_s));
    cz_server_feed(s, t, a, 3, 2, true);
    cz_batch b;
    cr_assert(cz_server_schedule(s, t, &b));
    cr_assert_eq(b.items[0].tokens, 4); /* 3 new + the last sampled token */
    t += 0.5;
    done(s, t, 0);
    cr_assert(cz_server_schedule(s, t, &b));
    cr_assert_eq(b.decode_seqs, 1);
    done(s, t + 0.5, 1);
    cr_assert_eq(m.req[0].output_tokens, 4);
    cr_assert_eq(m.req[0].input_tokens, 7);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(server, milestones_and_saturation)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 3;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 4, 8, 0); /* 12 tokens: exactly the 3-block pool */
    request(s, 0.0, 4, 8, 1);
    cz_server_notify_at(s, a, 3);
    cz_batch b;
    double t = 0;
    uint32_t reported_at = 0;
    for (int i = 0; i < 9; i++) {
        cr_assert(cz_server_schedule(s, t, &b));
        t += 1;
        cz_step_events ev;
        cz_server_on_batch_done(s, t, &ev);
        check(s);
        if (ev.n_milestone) {
            cr_assert_eq(ev.milestone[0], a);
            cr_assert_eq(cz_server_seq(s, a)->generated, (uint32_t)t);
            reported_at = (uint32_t)t;
            if (reported_at == 3)
                cz_server_notify_at(s, a, 7);
        }
    }
    /* token k of A comes at the end of step k; B, preempted at the start of step 2 when
     * both needed a second block and one was free, waits until A's turn ends at t = 8 */
    cr_assert_eq(reported_at, 7);
    cr_assert_float_eq(cz_server_saturated_at(s), 1.0, 0);
    cr_assert_eq(m.req[1].preemptions, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* Random multi-turn workloads across seeds, with streamed input, barge-ins, closes and
 * transfers landing late, in both idle-KV modes: after every event no KV block or host
 * token is lost or counted twice, and the queues agree with the states. */
Test(server, kv_accounting_random)
{
    for (unsigned seed = 1; seed <= 40; seed++) {
        srand(seed);
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = cz_server_config_default();
        cfg.max_num_seqs = 1 + (uint32_t)(rand() % 16);
        cfg.max_num_batched_tokens = cfg.max_num_seqs + 16 + (uint32_t)(rand() % 256);
        cfg.block_tokens = 1 + (uint32_t)(rand() % 16);
        cfg.kv_blocks = 64 + (uint32_t)(rand() % 256);
        cfg.chunked_prefill = rand() % 2;
        cfg.kv_idle = seed % 2 ? CZ_KV_IDLE_OFFLOAD : CZ_KV_IDLE_DROP;
        cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
        enum { N = 24 };
        uint32_t seq[N];
        int turns[N] = {0};
        for (uint32_t i = 0; i < N; i++)
            seq[i] = cz_server_seq_open(s, i, 0, rand() % 8 == 0);
        cz_xfer pend[4096];
        uint32_t n_pend = 0;
        double t = 0;
        cz_batch b;
        for (int it = 0; it < 3000; it++) {
            uint32_t i = (uint32_t)(rand() % N);
            const cz_seq *q = cz_server_seq(s, seq[i]);
            int op = rand() % 10;
            if (op < 3 && q->state == CZ_SEQ_IDLE && turns[i] < 6) {
                bool final = rand() % 3 != 0;
                uint32_t in = 1 + (uint32_t)(rand() % 40);
                cz_server_turn(s, t, seq[i], (uint32_t)turns[i]++, 0, in,
                               1 + (uint32_t)(rand() % 30), 0, final);
            } else if (op == 3 && q->turn_open && !q->input_final) {
                cz_server_feed(s, t, seq[i], (uint32_t)(rand() % 10), (uint32_t)(rand() % 10),
                               rand() % 2);
            } else if (op == 4 && (q->turn_open || (q->state == CZ_SEQ_IDLE &&
                                                     q->turn_rec != UINT64_MAX))) {
                cz_server_abort(s, t, seq[i], (uint32_t)(rand() % 8));
            } else if (op == 5 && q->turn_open && rand() % 2) {
                cz_server_notify_at(s, seq[i], q->generated + 1 + (uint32_t)(rand() % 5));
            } else if (op == 5 && n_pend > 0) {
                uint32_t k = (uint32_t)(rand() % n_pend);
                cz_xfer x = pend[k];
                pend[k] = pend[--n_pend];
                cz_server_on_xfer_done(s, t, x.seq, x.to_host);
            } else if (op >= 6 && cz_server_schedule(s, t, &b)) {
                t += 0.01;
                cz_step_events ev;
                cz_server_on_batch_done(s, t, &ev);
            }
            uint32_t n;
            const cz_xfer *x = cz_server_take_xfers(s, &n);
            for (uint32_t k = 0; k < n; k++) {
                cr_assert(n_pend < 4096);
                pend[n_pend++] = x[k];
            }
            t += 0.001;
            check(s);
        }
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* The ordering path with FCFS order (fcfs_scan) takes the same decisions as the O(log n)
 * FCFS path, step by step, on random workloads under KV pressure across seeds. */
Test(server, ordering_path_matches_fcfs_path)
{
    for (unsigned seed = 1; seed <= 60; seed++) {
        srand(seed);
        cz_server_config cfg = cz_server_config_default();
        cfg.max_num_seqs = 8;
        cfg.max_num_batched_tokens = 64;
        cfg.block_tokens = 4;
        cfg.kv_blocks = 40;
        cz_metrics m1, m2;
        cz_metrics_init(&m1, 0, 0);
        cz_metrics_init(&m2, 0, 0);
        cz_server *a = cz_server_create(&cfg, &cz_sched_fcfs, &m1, 0);
        cz_server *b = cz_server_create(&cfg, &cz_sched_fcfs_scan, &m2, 0);
        double t = 0;
        for (int step = 0; step < 1500; step++) {
            if (rand() % 3 == 0) {
                uint32_t in = 1 + (uint32_t)(rand() % 40), out = 1 + (uint32_t)(rand() % 40);
                uint32_t qa = cz_server_seq_open(a, (uint64_t)step, 0, false);
                uint32_t qb = cz_server_seq_open(b, (uint64_t)step, 0, false);
                cz_server_turn(a, t, qa, 0, 0, in, out, 0, true);
                cz_server_turn(b, t, qb, 0, 0, in, out, 0, true);
            }
            cz_batch ba, bb;
            bool ra = cz_server_schedule(a, t, &ba), rb = cz_server_schedule(b, t, &bb);
            cr_assert_eq(ra, rb, "seed %u step %d", seed, step);
            cr_assert_eq(ba.decode_seqs, bb.decode_seqs, "seed %u step %d", seed, step);
            cr_assert_eq(ba.prefill_tokens, bb.prefill_tokens, "seed %u step %d", seed, step);
            cr_assert_eq(ba.decode_ctx_tokens, bb.decode_ctx_tokens, "seed %u step %d", seed,
                         step);
            cr_assert_eq(m1.preemptions, m2.preemptions, "seed %u step %d", seed, step);
            t += 0.01;
            cz_step_events e;
            if (ra) {
                cz_server_on_batch_done(a, t, &e);
                cz_server_on_batch_done(b, t, &e);
            }
            check(b);
        }
        cz_server_free(a);
        cz_server_free(b);
        cz_metrics_free(&m1);
        cz_metrics_free(&m2);
    }
}

/* Windowed KV with sinks (Metronome section 4.1, App. A): block arithmetic by hand, then a
 * long stream whose blocks plateau at the sink and window blocks while the pool stays far
 * from full, and whose decode steps read at most sinks + window tokens. */
Test(server, windowed_kv_with_sinks)
{
    /* block 16, sinks 16, window 1024 */
    cr_assert_eq(cz_kv_blocks_held(1040, 16, 16, 1024), 65);   /* within S + W: all */
    cr_assert_eq(cz_kv_blocks_held(1041, 16, 16, 1024), 66);   /* block 0 + blocks 1..65 */
    cr_assert_eq(cz_kv_blocks_held(2000, 16, 16, 1024), 65);   /* block 0 + 61..124 */
    cr_assert_eq(cz_kv_blocks_held(2001, 16, 16, 1024), 66);   /* block 0 + 61..125 */
    cr_assert_eq(cz_kv_blocks_held(2001, 16, 0, 1024), 65);    /* no sinks: 61..125 */
    cr_assert_eq(cz_kv_blocks_held(2001, 16, 0, 0), 126);      /* no window: everything */
    cr_assert_eq(cz_kv_blocks_held(100, 16, 40, 50), 7);       /* blocks 0..2 and 3..6 meet */
    cr_assert_eq(cz_kv_attn_tokens(5000, 16, 1024), 1040);
    cr_assert_eq(cz_kv_attn_tokens(500, 16, 1024), 500);

    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 64;
    cfg.kv_blocks = 64;
    cfg.kv_sink_tokens = 4;   /* one block */
    cfg.kv_window_tokens = 16; /* four or five blocks */
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs_scan, &m, 0);
    uint32_t a = cz_server_seq_open(s, 0, 0, true);
    cz_server_turn(s, 0.0, a, 0, 0, 8, 4, 0, false);
    double t = drain(s, 0.0);
    uint32_t peak = 0;
    for (int frame = 0; frame < 60; frame++) {
        /* every frame appends 8 tokens and allows 4 more out (the stream of 1,000 tokens
         * would need 63 blocks unwindowed) */
        cz_server_feed(s, t, a, 8, 4, false);
        cz_batch b;
        while (cz_server_schedule(s, t, &b)) {
            uint64_t ctx = b.decode_ctx_tokens;
            cr_assert(ctx <= 20, "a decode read %llu tokens", (unsigned long long)ctx);
            t += 0.01;
            cz_step_events ev;
            cz_server_on_batch_done(s, t, &ev);
            check(s);
            const cz_seq *q = cz_server_seq(s, a);
            cr_assert_eq(q->blocks, cz_kv_blocks_held(q->computed, 4, 4, 16));
            cr_assert_eq(cz_server_kv_used(s), q->blocks);
            if (q->blocks > peak)
                peak = q->blocks;
        }
    }
    const cz_seq *q = cz_server_seq(s, a);
    cr_assert(q->computed > 700);
    cr_assert(peak <= 6, "peak %u blocks", peak); /* 1 sink + at most 5 window blocks */
    cr_assert(isnan(cz_server_saturated_at(s)));
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* LiveServe's next-use eviction (LiveServe, section 5.1) on a hand-built
 * state: three idle sessions of 8 tokens (2 blocks of 4) in a 12-block pool; A's reply
 * plays until t = 11, B's until t = 2, C's until t = 101 but C's user started speaking
 * (immediate reuse). With the 2 s reply prior their next uses are 13, 4 and (protected)
 * 103. A new request needing 7 blocks (6 are free) takes one: the farthest next use is A,
 * and from A its suffix block goes, its prefix stays. LRU instead drops the least recently
 * used session whole. */
Test(server, next_use_eviction_order_suffix_first_exclusions)
{
    for (int lru = 0; lru < 2; lru++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = small_cfg();
        cfg.max_num_seqs = 4;
        cfg.max_num_batched_tokens = 64;
        cfg.kv_blocks = 12;
        cfg.kv_evict = lru ? CZ_EVICT_LRU : CZ_EVICT_NEXT_USE;
        cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
        uint32_t id[3];
        double t = 0.0;
        for (int k = 0; k < 3; k++) {
            id[k] = request(s, t, 8, 1, (uint64_t)k);
            t = drain(s, t);
        }
        for (int k = 0; k < 3; k++)
            cr_assert_eq(cz_server_seq(s, id[k])->blocks, 2);
        cz_server_on_playback(s, 1.0, id[0], 0.0, 10.0, 1.0);
        cz_server_on_playback(s, 1.0, id[1], 0.0, 1.0, 1.0);
        cz_server_on_playback(s, 1.0, id[2], 0.0, 100.0, 1.0);
        cz_server_on_speech_start(s, 1.5, id[2]);
        request(s, 2.0, 28, 1, 9);
        cz_batch b;
        cr_assert(cz_server_schedule(s, 2.0, &b));
        check(s);
        const cz_seq *a = cz_server_seq(s, id[0]), *bb = cz_server_seq(s, id[1]),
                     *c = cz_server_seq(s, id[2]);
        if (!lru) {
            cr_assert(a->blocks == 1 && a->computed == 4, "A %u blocks %u tokens", a->blocks,
                      a->computed);
            cr_assert(bb->blocks == 2 && c->blocks == 2);
        } else {
            cr_assert(a->blocks == 0 && a->computed == 0); /* the oldest, whole */
            cr_assert(bb->blocks == 2 && c->blocks == 2);
        }
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* LiveServe's speech-triggered preload (section 5.2) from the state of the offload test:
 * A's 8 tokens are in host memory only. A preload admitted at A's speech start brings them
 * back before the turn (a hit: the turn computes only its new input, with no load on its
 * critical path); one that lands after the turn started makes the turn wait for the rest
 * (late: kv_load_s from the turn's arrival); a refused one is a skip and the turn loads
 * synchronously. */
static cz_server *offloaded_a_cfg(cz_metrics *m, uint32_t *a, double *t, uint32_t evict,
                                  double protect_fraction)
{
    cz_server_config cfg = small_cfg();
    cfg.kv_evict = evict;
    cfg.preload_protect_fraction = protect_fraction;
    cfg.kv_blocks = 6;
    cfg.max_num_batched_tokens = 32;
    cfg.kv_idle = CZ_KV_IDLE_OFFLOAD;
    cfg.kv_preload = true;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, m, 0);
    *a = request(s, 0.0, 7, 2, 0);
    *t = drain(s, 0.0);
    uint32_t n;
    cz_server_take_xfers(s, &n);
    cz_server_on_xfer_done(s, *t, *a, true);
    uint32_t bq = request(s, *t, 19, 1, 1); /* evicts A, runs, stores, goes idle */
    *t = drain(s, *t);
    cz_server_take_xfers(s, &n);
    cz_server_on_xfer_done(s, *t, bq, true);
    /* LRU evicts A whole; next-use takes only the block B lacks, from A's tail */
    const cz_seq *qa = cz_server_seq(s, *a);
    cr_assert_eq(qa->blocks, evict == CZ_EVICT_LRU ? 0 : 1);
    cr_assert_eq(cz_server_preload_tokens(s, *a), 8 - qa->computed);
    return s;
}

static cz_server *offloaded_a(cz_metrics *m, uint32_t *a, double *t)
{
    return offloaded_a_cfg(m, a, t, CZ_EVICT_LRU, 0.1);
}

Test(server, speech_triggered_preload)
{
    cr_assert(cz_preload_admit(5.0, 5.0) && !cz_preload_admit(5.000001, 5.0));
    for (int kase = 0; kase < 3; kase++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        uint32_t a, n;
        double t;
        cz_server *s = offloaded_a(&m, &a, &t);
        cz_preload_outcome o = cz_server_preload(s, t, a, kase != 2, t + 1.0);
        cz_preload_stats st;
        cz_batch b;
        if (kase == 2) {
            cr_assert_eq(o, CZ_PRELOAD_SKIPPED);
            cz_server_take_xfers(s, &n);
            cr_assert_eq(n, 0);
        } else {
            cr_assert_eq(o, CZ_PRELOAD_STARTED);
            const cz_xfer *x = cz_server_take_xfers(s, &n);
            cr_assert(n == 1 && !x[0].to_host && x[0].tokens == 8);
            cr_assert_eq(cz_server_seq(s, a)->blocks, 2); /* held while the load runs */
            check(s);
        }
        if (kase == 0) {
            cz_server_on_xfer_done(s, t + 0.5, a, false); /* lands during the speech */
            check(s);
            cz_server_turn(s, t + 1.0, a, 1, 0, 3, 1, 0, true);
            cr_assert(cz_server_schedule(s, t + 1.0, &b));
            cr_assert(b.items[0].tokens == 4 && b.items[0].ctx_before == 8);
            cr_assert_float_eq(m.req[cz_server_seq(s, a)->turn_rec].kv_load_s, 0.0, 0);
        } else if (kase == 1) {
            cz_server_turn(s, t + 1.0, a, 1, 0, 3, 1, 0, true);
            cr_assert(!cz_server_schedule(s, t + 1.0, &b)); /* waits for the preload */
            cz_server_take_xfers(s, &n);
            cr_assert_eq(n, 0); /* and starts no second load */
            cz_server_on_xfer_done(s, t + 1.25, a, false);
            check(s);
            cr_assert(cz_server_schedule(s, t + 1.25, &b));
            cr_assert(b.items[0].tokens == 4 && b.items[0].ctx_before == 8);
            cr_assert_float_eq(m.req[cz_server_seq(s, a)->turn_rec].kv_load_s, 0.25, 1e-12);
        } else {
            cz_server_turn(s, t + 1.0, a, 1, 0, 3, 1, 0, true);
            cr_assert(!cz_server_schedule(s, t + 1.0, &b)); /* the synchronous load */
            cr_assert_eq(cz_server_seq(s, a)->state, CZ_SEQ_LOADING);
        }
        cz_server_preload_stats(s, &st);
        cr_assert_eq(st.started, kase != 2);
        cr_assert_eq(st.hits, kase == 0);
        cr_assert_eq(st.late, kase == 1);
        cr_assert_eq(st.skips, kase == 2);
        cr_assert_eq(st.fallbacks, 0);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
    /* a preload in flight yields to foreground work short of blocks: cancelled, its
     * transfer lands void, and the turn loads synchronously (a fallback) */
    {
        cz_metrics m2;
        cz_metrics_init(&m2, 0.0, 0);
        uint32_t a2, n2;
        double t2;
        cz_server *s2 = offloaded_a(&m2, &a2, &t2);
        cr_assert_eq(cz_server_preload(s2, t2, a2, true, t2 + 1.0), CZ_PRELOAD_STARTED);
        cz_server_take_xfers(s2, &n2);
        uint32_t c2 = request(s2, t2 + 0.1, 19, 1, 3); /* 5 blocks: only the preload's */
        cz_batch b2;
        cr_assert(cz_server_schedule(s2, t2 + 0.1, &b2));
        check(s2);
        cr_assert_eq(cz_server_seq(s2, a2)->blocks, 0);
        cz_step_events ev2;
        cz_server_on_batch_done(s2, t2 + 0.2, &ev2);
        cz_server_on_xfer_done(s2, t2 + 0.3, a2, false); /* void */
        check(s2);
        cr_assert_eq(cz_server_seq(s2, a2)->computed, 0);
        t2 = drain(s2, t2 + 0.3);
        cz_server_take_xfers(s2, &n2);
        cz_server_on_xfer_done(s2, t2, c2, true); /* C's KV stored: evictable */
        cz_server_turn(s2, t2, a2, 1, 0, 3, 1, 0, true);
        cz_preload_stats st2;
        cz_server_preload_stats(s2, &st2);
        cr_assert(st2.cancels == 1 && st2.fallbacks == 1 && st2.hits == 0 && st2.late == 0);
        cr_assert(!cz_server_schedule(s2, t2, &b2));
        cr_assert_eq(cz_server_seq(s2, a2)->state, CZ_SEQ_LOADING); /* synchronous load */
        cz_server_free(s2);
        cz_metrics_free(&m2);
    }
    /* warmed KV evicted before the turn (LRU does not protect it): a fallback */
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    uint32_t a, n;
    double t;
    cz_server *s = offloaded_a(&m, &a, &t);
    cr_assert_eq(cz_server_preload(s, t, a, true, t + 1.0), CZ_PRELOAD_STARTED);
    cz_server_take_xfers(s, &n);
    cz_server_on_xfer_done(s, t + 0.5, a, false);
    request(s, t + 0.5, 19, 1, 2); /* 5 blocks: A's 2 go */
    cz_batch b;
    cr_assert(cz_server_schedule(s, t + 0.5, &b));
    cr_assert_eq(cz_server_seq(s, a)->blocks, 0);
    cz_step_events ev;
    cz_server_on_batch_done(s, t + 1.0, &ev);
    t = drain(s, t + 1.0);
    cz_server_turn(s, t, a, 1, 0, 3, 1, 0, true);
    cz_preload_stats st;
    cz_server_preload_stats(s, &st);
    cr_assert(st.hits == 1 && st.fallbacks == 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* BROS's bidirectional blocks on a hand-built state (block 4, 6 blocks): a real-time
 * request of 8 tokens and a best-effort one of 16 fill the pool in their first step. The
 * real-time decode then needs a third block: BROS orders it first, and it takes the block
 * from the best-effort tail, whose 4 tokens there are checkpointed to host memory while its
 * 12-token prefix stays; the best-effort request waits until the checkpoint lands and
 * loads just those 4 tokens back. Without the layout it is preempted whole (recompute). */
Test(server, bidirectional_blocks_overwrite_tail)
{
    for (int bidi = 0; bidi < 2; bidi++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = small_cfg();
        cfg.max_num_seqs = 4;
        cfg.max_num_batched_tokens = 64;
        cfg.kv_blocks = 6;
        cfg.kv_bidirectional = bidi;
        cz_policy_params p = cz_policy_params_default();
        cz_sched_ops ops = cz_sched_bros;
        ops.state = &p;
        cz_server *s = cz_server_create(&cfg, &ops, &m, 0);
        uint32_t rt = cz_server_seq_open(s, 0, 0, false);
        cz_server_turn(s, 0.0, rt, 0, 0, 8, 4, 0, true);
        uint32_t be = cz_server_seq_open(s, 1, 1, false);
        cz_server_turn(s, 0.0, be, 0, 0, 16, 6, 0, true);
        cz_batch b;
        cr_assert(cz_server_schedule(s, 0.0, &b));
        done(s, 0.1, 0);
        cr_assert_eq(cz_server_kv_used(s), 6);
        cr_assert(cz_server_schedule(s, 0.1, &b));
        check(s);
        cr_assert(b.n_items == 1 && b.items[0].seq == rt, "the real-time decode runs alone");
        const cz_seq *q = cz_server_seq(s, be);
        cr_assert_eq(q->state, CZ_SEQ_WAITING);
        uint32_t n;
        const cz_xfer *x = cz_server_take_xfers(s, &n);
        uint64_t ow, owt;
        cz_server_overwrites(s, &ow, &owt);
        if (bidi) {
            cr_assert(q->blocks == 3 && q->computed == 12, "%u blocks, %u tokens", q->blocks,
                      q->computed);
            cr_assert(n == 1 && x[0].seq == be && x[0].to_host && x[0].tokens == 4);
            cr_assert(ow == 1 && owt == 4);
            done(s, 0.2, 0);
            cz_server_on_xfer_done(s, 0.25, be, true);
            check(s);
            cr_assert_eq(cz_server_seq(s, be)->host_tokens, 16);
            /* once the real-time request is done with the space, the tail comes back */
            double t = 0.25;
            bool loaded = false;
            for (int i = 0; i < 20 && !loaded; i++) {
                bool ran = cz_server_schedule(s, t, &b);
                x = cz_server_take_xfers(s, &n);
                for (uint32_t k = 0; k < n; k++) {
                    if (x[k].seq == be && !x[k].to_host) {
                        cr_assert_eq(x[k].tokens, 4);
                        loaded = true;
                    }
                }
                t += 0.1;
                if (ran) {
                    cz_step_events ev;
                    cz_server_on_batch_done(s, t, &ev);
                    check(s);
                }
            }
            cr_assert(loaded);
        } else {
            cr_assert(q->blocks == 0 && q->computed == 0);
            cr_assert(n == 0 && ow == 0);
        }
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* Warmed KV is protected from next-use eviction until its turn, under a cap on all of it:
 * with the cap at the whole pool A's 2 preloaded blocks cannot be taken by a request that
 * needs them; with no cap room they can. */
Test(server, preload_protection_cap)
{
    for (int capped = 0; capped < 2; capped++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        uint32_t a, n;
        double t;
        cz_server *s = offloaded_a_cfg(&m, &a, &t, CZ_EVICT_NEXT_USE, capped ? 0.0 : 1.0);
        /* B's next use (its last use + the 2 s prior) is later than A's need at t + 1: the
         * preload may take a block from B */
        cr_assert_eq(cz_server_preload(s, t, a, true, t + 1.0), CZ_PRELOAD_STARTED);
        cz_server_take_xfers(s, &n);
        cz_server_on_xfer_done(s, t + 0.1, a, false);
        check(s);
        /* A's reply still has 100 s to play: by next use A goes before B, unless its warmed
         * KV is protected */
        cz_server_on_playback(s, t + 0.15, a, 0.0, 100.0, 1.0);
        request(s, t + 0.2, 15, 1, 3); /* 4 blocks */
        cz_batch b;
        cr_assert(cz_server_schedule(s, t + 0.2, &b));
        check(s);
        cr_assert_eq(cz_server_seq(s, a)->blocks, capped ? 0 : 2);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* Protection yields when nothing else is left (LiveServe section 6: LRU fallback): a
 * request that needs the protected blocks gets them, in LRU order, suffix first, instead
 * of waiting for ever on a pool that nobody may evict. */
Test(server, protection_yields_when_nothing_else_is_left)
{
    for (int evict = CZ_EVICT_NEXT_USE; evict <= CZ_EVICT_NEXT_USE_SCAN; evict++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        uint32_t a, n;
        double t;
        cz_server *s = offloaded_a_cfg(&m, &a, &t, (uint32_t)evict, 1.0);
        cr_assert_eq(cz_server_preload(s, t, a, true, t + 1.0), CZ_PRELOAD_STARTED);
        cz_server_take_xfers(s, &n);
        cz_server_on_xfer_done(s, t + 0.1, a, false);
        request(s, t + 0.2, 19, 1, 3); /* 5 blocks: B's 4, then one of A's protected 2 */
        cz_batch b;
        cr_assert(cz_server_schedule(s, t + 0.2, &b));
        check(s);
        cr_assert_eq(cz_server_seq(s, a)->blocks, 1);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* A user who starts speaking protects the session's KV; once the turn arrives and waits,
 * the KV is an eviction candidate again (it was left out of the index for good, and the
 * pool filled with KV nobody could evict). */
Test(server, speech_protection_ends_with_the_turn)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_evict = CZ_EVICT_NEXT_USE;
    cfg.max_num_seqs = 1;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 7, 2, 0); /* 8 tokens: 2 blocks, idle after its turn */
    double t = drain(s, 0.0);
    uint32_t bq = request(s, t, 7, 2, 1);  /* B idles on the other 2 */
    t = drain(s, t);
    cz_server_on_speech_start(s, t, a);
    cz_server_on_speech_start(s, t, bq);
    /* both turns arrive; one slot: A runs and needs a block, B's waiting prefix is the only
     * candidate once its protection ended */
    cz_server_turn(s, t + 1.0, a, 1, 0, 2, 1, 0, true);
    cz_server_turn(s, t + 1.0, bq, 1, 0, 2, 1, 0, true);
    cz_batch b;
    cr_assert(cz_server_schedule(s, t + 1.0, &b));
    check(s);
    cr_assert_eq(b.items[0].seq, a);
    cr_assert_eq(cz_server_seq(s, bq)->blocks, 1); /* one block from B's tail */
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* Regression: a barge-in cut the context of a session whose preload was in flight; the
 * load then landed with more tokens than the blocks the abort had left (an assertion). The
 * load now brings back only what the shortened context uses. */
Test(server, barge_in_during_a_preload)
{
    for (uint32_t keep = 0; keep <= 2; keep++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        uint32_t a, n;
        double t;
        cz_server *s = offloaded_a_cfg(&m, &a, &t, CZ_EVICT_LRU, 0.1);
        cr_assert_eq(cz_server_preload(s, t, a, true, t + 1.0), CZ_PRELOAD_STARTED);
        cz_server_take_xfers(s, &n);
        /* A's last turn (7 in, 2 out) is cut: `keep` of its 2 tokens were heard */
        cr_assert_eq(cz_server_abort(s, t + 0.05, a, keep), 2);
        check(s);
        cz_server_on_xfer_done(s, t + 0.1, a, false);
        check(s);
        const cz_seq *q = cz_server_seq(s, a);
        cr_assert_eq(q->computed, keep < 1 ? 7 : 8); /* the context, capped by the 8 stored */
        uint64_t rec = cz_server_turn(s, t + 1.0, a, 1, 0, 3, 1, 0, true);
        drain(s, t + 1.0);
        cr_assert_eq(m.req[rec].outcome, CZ_REQ_COMPLETED);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* A windowed sequence holds the most blocks not at its final length but where the window
 * straddles one more block: a turn is refused when that peak exceeds the pool (it was
 * admitted on its final count, then failed mid-way). */
Test(server, windowed_turn_refused_on_its_peak)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.block_tokens = 16;
    cfg.kv_sink_tokens = 40;
    cfg.kv_window_tokens = 35;
    cfg.kv_blocks = 6;
    cfg.max_num_batched_tokens = 64;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs_scan, &m, 0);
    /* 425 tokens: 3 sink blocks + 3 window blocks at the end; at 417 the window straddles 4 */
    cr_assert_eq(cz_kv_blocks_held(425, 16, 40, 35), 6);
    cr_assert_eq(cz_kv_blocks_held(417, 16, 40, 35), 7);
    uint32_t q = cz_server_seq_open(s, 0, 0, false);
    uint64_t r = cz_server_turn(s, 0.0, q, 0, 0, 10, 415, 0, true);
    cr_assert_eq(m.req[r].outcome, CZ_REQ_REJECTED);
    uint32_t q2 = cz_server_seq_open(s, 1, 0, false);
    r = cz_server_turn(s, 0.0, q2, 0, 0, 10, 60, 0, true); /* 70 tokens: 5 blocks at most */
    cr_assert_eq(m.req[r].outcome, CZ_REQ_PENDING);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* The order (LRU, next use) and the unit (whole session, tail blocks) of idle-KV eviction
 * are independent: with two idle sessions of 2 blocks in a full 4-block pool, a request
 * for 1 block takes A (least recent) or B (farthest next use: it was used last, and both
 * reply within the same prior), whole or only its last block. */
Test(server, eviction_order_and_unit_apart)
{
    static const uint32_t order[4] = {CZ_EVICT_LRU, CZ_EVICT_LRU, CZ_EVICT_NEXT_USE,
                                      CZ_EVICT_NEXT_USE};
    static const uint32_t unit[4] = {CZ_EVICT_UNIT_SESSION, CZ_EVICT_UNIT_BLOCK,
                                     CZ_EVICT_UNIT_SESSION, CZ_EVICT_UNIT_BLOCK};
    /* blocks left to A and B after the eviction */
    static const uint32_t left_a[4] = {0, 1, 2, 2}, left_b[4] = {2, 2, 0, 1};
    for (int k = 0; k < 4; k++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = small_cfg();
        cfg.kv_evict = order[k];
        cfg.kv_evict_unit = unit[k];
        cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
        uint32_t a = request(s, 0.0, 7, 2, 0); /* 8 tokens of KV: 2 blocks, then idle */
        double t = drain(s, 0.0);
        uint32_t b = request(s, t, 7, 2, 1);
        t = drain(s, t);
        cr_assert_eq(cz_server_kv_used(s), 4);
        request(s, t, 3, 1, 2); /* 1 block */
        cz_batch bt;
        cr_assert(cz_server_schedule(s, t, &bt));
        check(s);
        cr_assert_eq(cz_server_seq(s, a)->blocks, left_a[k], "case %d", k);
        cr_assert_eq(cz_server_seq(s, b)->blocks, left_b[k], "case %d", k);
        /* a partly evicted session keeps the prefix its blocks hold */
        if (left_a[k] == 1)
            cr_assert_eq(cz_server_seq(s, a)->computed, 4);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* A policy that defers everything until t + 1.5 s: the step runs nothing and the core
 * reports the wake-up the driver must honour. */
static uint32_t defer_all(const void *state, const cz_sched_ctx *ctx, cz_cand *c, uint32_t n)
{
    (void)state;
    for (uint32_t i = 0; i < n; i++)
        c[i].wake_s = ctx->now_s + 1.5 + i;
    return 0;
}

Test(server, deferral_reports_a_wake_up)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cz_sched_ops ops = {.name = "defer", .select = defer_all};
    cz_server *s = cz_server_create(&cfg, &ops, &m, 0);
    cr_assert(isinf(cz_server_wake_at(s)));
    request(s, 2.0, 3, 1, 0);
    request(s, 2.0, 3, 1, 1);
    cz_batch b;
    cr_assert(!cz_server_schedule(s, 2.0, &b));
    cr_assert_float_eq(cz_server_wake_at(s), 3.5, 1e-12); /* the earliest of 3.5 and 4.5 */
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* The end of a speech is not known in advance: the core estimates when the turn reaches
 * the stage from the session's observed speech-to-turn times (moving average, weight 0.5),
 * else the mean over sessions, else the prior. */
Test(server, speech_end_estimate)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 64;
    cfg.speech_prior_s = 2.0;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = cz_server_seq_open(s, 0, 0, false);
    uint32_t b = cz_server_seq_open(s, 1, 0, false);
    cr_assert_float_eq(cz_server_speech_end_estimate(s, a, 1.0), 3.0, 1e-12); /* the prior */
    cz_server_on_speech_start(s, 1.0, a);
    cz_server_turn(s, 5.0, a, 0, 0, 3, 1, 0, true); /* 4 s of speech */
    double t = drain(s, 5.0);
    cr_assert_float_eq(cz_server_speech_end_estimate(s, b, 10.0), 14.0, 1e-12); /* the mean */
    cz_server_on_speech_start(s, t + 1.0, a);
    cz_server_turn(s, t + 3.0, a, 1, 0, 3, 1, 0, true); /* 2 s: the average is 3 s */
    drain(s, t + 3.0);
    cz_server_on_speech_start(s, 100.0, a);
    cr_assert_float_eq(cz_server_speech_end_estimate(s, a, 100.5), 103.0, 1e-12);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* BROS's SLO-aware preemptive scheduling (class priority): a waiting real-time request
 * takes a running best-effort request's slot and blocks in the step it arrives, and
 * best-effort work never preempts real-time work (the two could otherwise take turns
 * preempting each other for ever). */
Test(server, real_time_preempts_best_effort)
{
    cz_policy pol;
    cz_err err;
    cr_assert_eq(cz_policy_make("bros", NULL, "t", &pol, &err), CZ_OK);
    cz_sched_ops ops = cz_policy_ops(&pol);
    cr_assert(ops.class_priority);
    for (int slots = 0; slots < 2; slots++) {
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = small_cfg();
        cfg.kv_blocks = 5;
        cfg.max_num_seqs = slots ? 1 : 2; /* 1: the slot binds; 2: the blocks bind */
        cfg.max_num_batched_tokens = 16;
        cz_server *s = cz_server_create(&cfg, &ops, &m, 0);
        /* a best-effort request with 12 tokens of prompt: 3 blocks, running */
        uint32_t be = cz_server_seq_open(s, 0, 1, false);
        cz_server_turn(s, 0.0, be, 0, 0, 12, 8, 0, true);
        cz_batch b;
        cr_assert(cz_server_schedule(s, 0.0, &b));
        cz_step_events ev;
        cz_server_on_batch_done(s, 0.1, &ev);
        check(s);
        cr_assert_eq(cz_server_seq(s, be)->blocks, 3);
        /* a real-time request with 12 tokens of prompt (3 blocks): only 2 are free */
        uint32_t rt = cz_server_seq_open(s, 1, 0, false);
        cz_server_turn(s, 0.1, rt, 0, 0, 12, 2, 0, true);
        cr_assert(cz_server_schedule(s, 0.1, &b));
        check(s);
        cr_assert_eq(cz_server_seq(s, rt)->state, CZ_SEQ_RUNNING, "case %d", slots);
        cr_assert_eq(cz_server_seq(s, be)->state, CZ_SEQ_WAITING, "case %d", slots);
        cr_assert_eq(cz_server_seq(s, be)->blocks, 0);
        cr_assert_eq(b.n_items, 1);
        cr_assert_eq(b.items[0].seq, rt);
        /* the best-effort request comes back and waits: it cannot take the real-time
         * request's blocks even though the real-time one was admitted after it */
        cz_server_on_batch_done(s, 0.2, &ev);
        cr_assert(cz_server_schedule(s, 0.2, &b));
        check(s);
        cr_assert_eq(cz_server_seq(s, rt)->state, CZ_SEQ_RUNNING);
        cr_assert_eq(cz_server_seq(s, be)->state, CZ_SEQ_WAITING);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}

/* Regression (BROS with bidirectional blocks under pressure): on the ordering path every
 * waiting sequence with KV in host memory is loaded at the start of a step, and a load made
 * room by evicting the KV another load had just brought back for a waiting sequence; the
 * two reloaded each other for ever. A load now spares waiting sequences' KV. */
Test(server, loads_do_not_evict_each_other)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg(); /* 4-token blocks */
    cfg.kv_blocks = 3;
    cfg.kv_idle = CZ_KV_IDLE_OFFLOAD;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs_scan, &m, 0);
    uint32_t seq[2], n;
    double t = 0.0;
    for (int k = 0; k < 2; k++) { /* each ends idle with 6 tokens (2 blocks) in host memory */
        seq[k] = request(s, t, 5, 2, (uint64_t)k);
        t = drain(s, t);
        const cz_xfer *x = cz_server_take_xfers(s, &n);
        for (uint32_t i = 0; i < n; i++)
            cz_server_on_xfer_done(s, t, x[i].seq, x[i].to_host);
    }
    uint64_t rec[2];
    for (int k = 0; k < 2; k++) /* both come back: one token of input, one of output */
        rec[k] = cz_server_turn(s, t, seq[k], 1, 0, 1, 1, 0, true);
    for (int step = 0; step < 40; step++) {
        cz_batch b;
        bool ran = cz_server_schedule(s, t, &b);
        const cz_xfer *x = cz_server_take_xfers(s, &n);
        uint32_t ids[4];
        bool to_host[4];
        for (uint32_t i = 0; i < n && i < 4; i++) {
            ids[i] = x[i].seq;
            to_host[i] = x[i].to_host;
        }
        t += 0.1;
        if (ran) {
            cz_step_events ev;
            cz_server_on_batch_done(s, t, &ev);
        }
        for (uint32_t i = 0; i < n && i < 4; i++)
            cz_server_on_xfer_done(s, t, ids[i], to_host[i]);
        check(s);
    }
    cr_assert_eq(m.req[rec[0]].outcome, CZ_REQ_COMPLETED);
    cr_assert_eq(m.req[rec[1]].outcome, CZ_REQ_COMPLETED);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* A stop token: the id the batch in flight samples is the turn's last, for a decode member
 * (its heap key falls to this step) and for a prefill that samples its first token; the
 * other member of the decode set goes on to its budget. */
Test(server, end_output_stops_a_turn_at_the_batch_in_flight)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 16;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    uint32_t a = request(s, 0.0, 3, 10, 0);
    uint32_t b = request(s, 0.0, 3, 10, 1);
    cz_batch bt;
    cr_assert(cz_server_schedule(s, 0.0, &bt)); /* both prefills: one token each */
    done(s, 1.0, 0);
    cr_assert(cz_server_schedule(s, 1.0, &bt)); /* decode: a and b sample their second */
    done(s, 2.0, 0);
    cr_assert(cz_server_schedule(s, 2.0, &bt)); /* a's third is its last */
    cz_server_end_output(s, a);
    cz_step_events ev = done(s, 3.0, 1);
    cr_assert_eq(ev.turn_done[0], a);
    const cz_req_record *ra = cz_metrics_req(&m, cz_server_seq(s, a)->turn_rec);
    cr_assert_eq(ra->output_tokens, 3);
    cr_assert_eq(ra->outcome, CZ_REQ_COMPLETED);
    cr_assert_eq(cz_server_seq(s, a)->state, CZ_SEQ_IDLE);
    cr_assert_eq(cz_server_running(s), 1);
    drain(s, 3.0);
    cr_assert_eq(cz_metrics_req(&m, cz_server_seq(s, b)->turn_rec)->output_tokens, 10);
    /* the next turn of a stops at its first token: the prefill that samples it */
    cz_server_turn(s, 20.0, a, 1, 0, 2, 5, 0, true);
    cr_assert(cz_server_schedule(s, 20.0, &bt));
    cz_server_end_output(s, a);
    ev = done(s, 21.0, 1);
    cr_assert_eq(cz_metrics_req(&m, cz_server_seq(s, a)->turn_rec)->output_tokens, 1);
    /* no effect on the token the budget ends anyway */
    cz_server_turn(s, 30.0, a, 2, 0, 2, 1, 0, true);
    cr_assert(cz_server_schedule(s, 30.0, &bt));
    cz_server_end_output(s, a);
    done(s, 31.0, 1);
    cr_assert_eq(cz_metrics_req(&m, cz_server_seq(s, a)->turn_rec)->output_tokens, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* The fast-forward step (cz_server_step_again) against the ordinary pair: a twin server
 * driven by cz_server_on_batch_done and cz_server_schedule only. Two decoding sequences of
 * 1 + 9 and 3 + 7 tokens in blocks of 4, a pool of 4 (they need 6 at their peaks): it runs
 * the decode set again while nothing is due and the block phase fits, and declines when a
 * member's budget ends the step, when a block phase needs more than the free blocks (the
 * ordinary path preempts there), and when a turn waits. Every count and gap comes out the
 * same, the growth of the first one's counted context too (cz_server_ctx_grown: from 1
 * token to 10, blocks 1 to 3, through its preemption; the other's is not counted). */
Test(server, step_again_matches_the_ordinary_step)
{
    cz_metrics m1, m2;
    cz_metrics_init(&m1, 0.0, 0);
    cz_metrics_init(&m2, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cfg.kv_blocks = 4;
    cz_server *s1 = cz_server_create(&cfg, &cz_sched_fcfs, &m1, 0);
    cz_server *s2 = cz_server_create(&cfg, &cz_sched_fcfs, &m2, 0);
    cz_batch b1, b2;
    cz_server *ss[2] = {s1, s2};
    for (int k = 0; k < 2; k++) {
        cz_server_count_ctx(ss[k], request(ss[k], 0.0, 1, 9, 0), true);
        request(ss[k], 0.0, 3, 7, 1);
        cr_assert(cz_server_schedule(ss[k], 0.0, k ? &b2 : &b1));
        done(ss[k], 0.25, 0); /* both prefilled: each sampled its first token */
        cr_assert(cz_server_schedule(ss[k], 0.25, k ? &b2 : &b1));
    }
    cr_assert_eq(b1.decode_seqs, 2);
    cr_assert_eq(b1.n_items, 0);
    uint32_t again = 0, declined = 0;
    double t = 0.25;
    for (int step = 0; step < 60; step++) {
        t += 0.125 + 0.001 * step;
        bool a = cz_server_busy(s1) && cz_server_step_again(s1, t, &b1);
        if (a) {
            again++;
        } else {
            declined++;
            cz_step_events ev;
            cz_server_on_batch_done(s1, t, &ev);
            cz_server_schedule(s1, t, &b1);
        }
        cz_step_events ev;
        if (cz_server_busy(s2)) {
            cz_server_on_batch_done(s2, t, &ev);
            cz_server_schedule(s2, t, &b2);
        }
        check(s1);
        cr_assert_eq(cz_server_busy(s1), cz_server_busy(s2));
        cr_assert_eq(b1.decode_seqs, b2.decode_seqs, "step %d", step);
        cr_assert_eq(b1.decode_ctx_tokens, b2.decode_ctx_tokens, "step %d", step);
        cr_assert_eq(b1.n_items, b2.n_items, "step %d", step);
        cr_assert_eq(cz_server_kv_used(s1), cz_server_kv_used(s2), "step %d", step);
        cr_assert_eq(cz_server_waiting(s1), cz_server_waiting(s2), "step %d", step);
        cr_assert_eq(cz_server_ctx_grown(s1), cz_server_ctx_grown(s2), "step %d", step);
        if (step == 1) {
            for (int k = 0; k < 2; k++)
                request(ss[k], t, 2, 2, 2); /* waits behind the decode set */
        }
        if (!cz_server_busy(s1))
            break;
    }
    cr_assert_gt(again, 0);
    cr_assert_gt(declined, 0);
    cr_assert_eq(m1.steps, m2.steps);
    cr_assert_eq(m1.itl_ms[0].n, m2.itl_ms[0].n);
    cr_assert(m1.itl_ms[0].sum == m2.itl_ms[0].sum && m1.itl_ms[0].m2 == m2.itl_ms[0].m2);
    cr_assert(!cz_server_busy(s1));
    cr_assert_eq(m1.n_req, 3, "%zu requests", (size_t)m1.n_req);
    uint32_t preempted = 0;
    for (size_t i = 0; i < m2.n_req; i++)
        preempted += m2.req[i].preemptions;
    cr_assert_gt(preempted, 0); /* the pool ran short */
    cr_assert_eq(cz_server_ctx_grown(s1), 2);
    for (size_t i = 0; i < m1.n_req; i++) {
        cr_assert(m1.req[i].finish_s == m2.req[i].finish_s ||
                  (isnan(m1.req[i].finish_s) && isnan(m2.req[i].finish_s)));
        cr_assert_eq(m1.req[i].preemptions, m2.req[i].preemptions);
    }
    cz_server_free(s1);
    cz_server_free(s2);
    cz_metrics_free(&m1);
    cz_metrics_free(&m2);
}
