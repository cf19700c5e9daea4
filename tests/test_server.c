/* test_server.c - the serving core driven by a scripted sequence of events, with no
 * event queue and no simulator: proves the core is reactive and checks vLLM V1's
 * scheduling rules on a case computed by hand (docs/serving-core.md). */
#include <criterion/criterion.h>
#include <math.h>

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

static void done(cz_server *s, double t, uint32_t expect_finished)
{
    const uint32_t *fin;
    uint32_t nf;
    cz_server_on_batch_done(s, t, &fin, &nf);
    cr_assert_eq(nf, expect_finished);
    check(s);
}

Test(server, scripted_hand_computed)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = small_cfg();
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;

    uint32_t a = cz_server_on_arrival(s, 0.0, 6, 3, 0, 0, 0);
    cr_assert(cz_server_schedule(s, 0.0, &b));
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].req, a);
    cr_assert_eq(b.items[0].tokens, 6);
    cr_assert_eq(b.prefill_tokens, 6);
    cr_assert_eq(b.prefill_attn_ctx, 21); /* 1 + 2 + ... + 6 */
    cr_assert_eq(cz_server_kv_used(s), 2);

    uint32_t bb = cz_server_on_arrival(s, 1.0, 10, 2, 1, 0, 0); /* arrives mid-step */
    done(s, 1.5, 0);
    cr_assert_float_eq(m.req[a].first_token_s, 1.5, 1e-12);

    /* A decodes one token; B's prefill gets the remaining 7 of the 8-token budget */
    cr_assert(cz_server_schedule(s, 1.5, &b));
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(cz_server_decode_first(s), a);
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].req, bb);
    cr_assert_eq(b.items[0].tokens, 7);
    cr_assert_eq(b.total_tokens, 8);
    cr_assert_eq(b.decode_ctx_tokens, 7);
    cr_assert_eq(cz_server_kv_used(s), 4);
    done(s, 2.0, 0);

    /* B needs a third block, the pool is full: FCFS preempts the last admitted (B
     * itself), and nothing is admitted in a step with a preemption */
    cr_assert(cz_server_schedule(s, 2.0, &b));
    cr_assert_eq(b.n_items, 0);
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(b.decode_ctx_tokens, 8);
    cr_assert_eq(m.req[bb].preemptions, 1);
    cr_assert_eq(cz_server_waiting(s), 1);
    cr_assert_eq(cz_server_request(s, bb)->computed, 0);
    cr_assert_eq(cz_server_kv_used(s), 2);
    done(s, 2.5, 1); /* A's third token: A finishes, frees its 2 blocks */
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

    cz_summary sum;
    cz_metrics_summarize(&m, NULL, &sum);
    cr_assert_eq(sum.completed, 2);
    cr_assert_eq(sum.preemptions, 1);
    cr_assert_eq(sum.total_output_tokens, 5);
    cr_assert_float_eq(sum.ttft_ms.mean, (1500.0 + 2500.0) / 2, 1e-9);  /* A 1.5 s, B 2.5 s */
    cr_assert_float_eq(sum.e2el_ms.max, 3000.0, 1e-9);                  /* A 2.5, B 3.0 */
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
    uint32_t ok = cz_server_on_arrival(s, 0.0, 15, 1, 0, 0, 0);
    uint32_t no = cz_server_on_arrival(s, 0.0, 16, 1, 1, 0, 0);
    cr_assert_eq(cz_server_request(s, ok)->state, CZ_SREQ_WAITING);
    cr_assert_eq(cz_server_request(s, no)->state, CZ_SREQ_REJECTED);
    cr_assert_eq(m.req[no].outcome, CZ_REQ_REJECTED);
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
    cz_server_on_arrival(s, 0.0, 5, 2, 0, 0, 0);
    cz_server_on_arrival(s, 0.0, 4, 2, 1, 0, 0);
    /* 5 fits the 8-token budget; the next 4 would exceed it unchunked: not admitted */
    cr_assert(cz_server_schedule(s, 0.0, &b));
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.total_tokens, 5);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* Random workloads across seeds: after every step no KV block is lost or counted twice,
 * and every request completes with exactly its output tokens. */
Test(server, kv_accounting_random)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        srand(seed);
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = cz_server_config_default();
        cfg.max_num_seqs = 1 + (uint32_t)(rand() % 16);
        cfg.max_num_batched_tokens = 16 + (uint32_t)(rand() % 256);
        cfg.block_tokens = 1 + (uint32_t)(rand() % 16);
        cfg.kv_blocks = 64 + (uint32_t)(rand() % 256);
        cfg.chunked_prefill = rand() % 2;
        cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
        double t = 0;
        uint32_t n = 0, finished = 0, rejected = 0;
        uint64_t want_out = 0;
        cz_batch b;
        while (n < 200 || cz_server_running(s) || cz_server_waiting(s)) {
            if (n < 200 && rand() % 3 == 0) {
                uint32_t p = 1 + (uint32_t)(rand() % 300), o = 1 + (uint32_t)(rand() % 100);
                uint32_t id = cz_server_on_arrival(s, t, p, o, n, 0, 0);
                if (cz_server_request(s, id)->state == CZ_SREQ_REJECTED)
                    rejected++;
                else
                    want_out += o;
                n++;
            }
            if (cz_server_schedule(s, t, &b)) {
                t += 0.01;
                const uint32_t *fin;
                uint32_t nf;
                cz_server_on_batch_done(s, t, &fin, &nf);
                finished += nf;
            } else {
                t += 0.01;
            }
            check(s);
        }
        cz_summary sum;
        cz_metrics_summarize(&m, NULL, &sum);
        cr_assert_eq(finished + rejected, 200, "seed %u", seed);
        cr_assert_eq(sum.total_output_tokens, want_out, "seed %u", seed);
        cr_assert_eq(cz_server_kv_used(s), 0);
        cz_server_free(s);
        cz_metrics_free(&m);
    }
}
