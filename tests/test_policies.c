/* test_policies.c - the schedulers on hand-built states whose right answer is computed by
 * hand: LiveServe's classes, order, utilities and budget stop (Algorithm 1); VoxServe's
 * urgency rule at its boundary, prefill cap and priorities; BROS's packing and each
 * batch-size transition. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cz_policies.h"

/* A running decode of a turn that has produced `gen` tokens and whose client has received
 * `received` s and played `played` s as of `report`, without a stall (its first chunk
 * arrived at report - played). */
static cz_seq playing(uint32_t gen, double received, double played, double report,
                      uint32_t blocks)
{
    cz_seq q;
    memset(&q, 0, sizeof q);
    q.state = CZ_SEQ_RUNNING;
    q.tokens_in = 1;
    q.generated = gen;
    q.budget = 1000;
    q.computed = q.tokens_in + gen - 1;
    uint32_t held = (q.computed + 15) / 16;
    q.blocks = blocks > held ? blocks : held;
    q.received_s = received;
    q.played_s = played;
    q.report_s = report;
    q.first_audio_s = received > 0 ? report - played : NAN; /* no stall so far */
    q.last_token_s = report;
    return q;
}

static cz_seq waiting(uint32_t in, double ready)
{
    cz_seq q;
    memset(&q, 0, sizeof q);
    q.state = CZ_SEQ_WAITING;
    q.tokens_in = in;
    q.budget = 10;
    q.turn_ready_s = ready;
    q.report_s = NAN;
    return q;
}

static cz_sched_ctx ctx_of(const cz_seq *seqs, double now)
{
    return (cz_sched_ctx){.now_s = now, .seqs = seqs, .token_budget = 20, .seq_cap = 8,
                          .running = 4, .kv_blocks = 100, .kv_used = 60,
                          .kv_available = 40, .block_tokens = 16, .chunked_prefill = true};
}

static void cands_of(const cz_seq *seqs, uint32_t n, cz_cand *c)
{
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = &seqs[i];
        uint32_t need = q->tokens_in + q->generated - q->computed;
        c[i] = (cz_cand){.seq = i, .need = need, .pos = i,
                         .running = q->state == CZ_SEQ_RUNNING, .decode = need == 1,
                         .wake_s = INFINITY};
    }
}

Test(policies, liveserve_algorithm_1)
{
    cz_policy_params p = cz_policy_params_default();
    p.audio_s_per_token = 0.08; /* P_safe 2 s, alpha = beta = 1 */
    p.pace_u2 = false; /* ordering only: pacing is tested on its own */
    cz_seq s[6];
    /* A: produced 50 x 0.08 = 4.0 s, played 2.0 + (10 - 9) = 3.0: P = 1.0 -> U0 */
    s[0] = playing(50, 4.0, 2.0, 9.0, 4);
    /* B: produced 6.4 s, played min(6.4, 1 + 1) = 2.0: P = 4.4 -> U2 with K = 0.30,
     * R_occ = 0.6: U = 0.18 - (4.4 - 2) / 2 = -1.02 */
    s[1] = playing(80, 6.4, 1.0, 9.0, 30);
    /* C: produced 3.2 s, played 1.6 now: P = 1.6 -> U0, after A */
    s[2] = playing(40, 3.2, 1.6, 10.0, 3);
    /* D: running, no audio yet, ready at 5 -> U1 */
    s[3] = playing(5, 0.0, 0.0, NAN, 1);
    s[3].turn_ready_s = 5.0;
    /* E: waiting, ready at 3 -> U1, before D; its 30-token prefill gets what is left */
    s[4] = waiting(30, 3.0);
    /* F: produced 8.0 s, played 3.0: P = 5.0 -> U2 with K = 0.5: U = 0.3 - 1.5 = -1.2 */
    s[5] = playing(100, 8.0, 2.0, 9.0, 50);
    cz_sched_ctx ctx = ctx_of(s, 10.0);
    cz_cand c[6];
    cands_of(s, 6, c);
    cz_sched_ops ops = cz_sched_liveserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 6);
    const uint32_t want_order[6] = {0, 2, 4, 3, 1, 5};
    const uint32_t want_group[6] = {0, 0, 1, 1, 2, 2};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(c[i].seq, want_order[i], "position %d", i);
        cr_assert_eq(c[i].group, want_group[i], "position %d", i);
    }
    cr_assert_float_eq(c[0].key, 1.0, 1e-12);
    cr_assert_float_eq(c[1].key, 1.6, 1e-12);
    cr_assert_float_eq(c[4].key, 1.02, 1e-12); /* key = -U */
    cr_assert_float_eq(c[5].key, 1.2, 1e-12);
    /* budget 20: A 1, C 1, E the remaining 18 of its 30; D finds no token left: the scan
     * stops there and nothing after it runs */
    const uint32_t want_take[6] = {1, 1, 18, 0, 0, 0};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(c[i].take, want_take[i], "position %d", i);
}

Test(policies, liveserve_stops_admitting_at_first_kv_misfit)
{
    cz_policy_params p = cz_policy_params_default();
    p.audio_s_per_token = 0.08;
    p.pace_u2 = false; /* ordering only: pacing is tested on its own */
    cz_seq s[3];
    s[0] = playing(50, 4.0, 2.0, 9.0, 4);   /* U0, fits */
    s[1] = waiting(40, 1.0);                /* U1, needs 3 blocks */
    s[2] = playing(100, 8.0, 2.0, 9.0, 50); /* U2, needs nothing new */
    s[0].computed = 160;                    /* a full last block: its token needs a block */
    s[0].tokens_in = 161 - 50;
    s[0].blocks = 10;
    cz_sched_ctx ctx = ctx_of(s, 10.0);
    ctx.token_budget = 100;
    ctx.kv_available = 3;
    cz_cand c[3];
    cands_of(s, 3, c);
    cz_sched_ops ops = cz_sched_liveserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 3);
    /* A takes 1 block; the waiting one then needs ceil(40 / 16) = 3 of the 2 left: admission
     * stops there, and U2, running, still gets its decode */
    cr_assert_eq(c[0].seq, 0);
    cr_assert_eq(c[0].take, 1);
    cr_assert_eq(c[1].seq, 1);
    cr_assert_eq(c[1].take, 0);
    cr_assert_eq(c[2].take, 1);
}

/* Regression: a new U1 turn ranked ahead of the running sequences that hold the pool did
 * not fit, the scan stopped, and nothing was ever scheduled again. Running sequences after
 * the stop keep their step; waiting ones after it are not admitted, even when they fit. */
Test(policies, liveserve_never_starves_running_sequences)
{
    cz_policy_params p = cz_policy_params_default();
    p.audio_s_per_token = 0.08;
    p.pace_u2 = false; /* ordering only: pacing is tested on its own */
    cz_seq s[4];
    s[0] = waiting(64, 1.0);                 /* U1, needs 4 blocks: misfit */
    s[1] = playing(100, 8.0, 2.0, 9.0, 50);  /* U2, running */
    s[2] = waiting(8, 2.0);                  /* U1, would fit, but after the stop */
    s[3] = playing(50, 4.0, 2.0, 9.0, 4);    /* U0, running */
    cz_sched_ctx ctx = ctx_of(s, 10.0);
    ctx.token_budget = 100;
    ctx.kv_available = 1;
    cz_cand c[4];
    cands_of(s, 4, c);
    cz_sched_ops ops = cz_sched_liveserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 4);
    /* order: U0 (3), U1 (0, 2), U2 (1) */
    cr_assert(c[0].seq == 3 && c[0].take == 1);
    cr_assert(c[1].seq == 0 && c[1].take == 0);
    cr_assert(c[2].seq == 2 && c[2].take == 0);
    cr_assert(c[3].seq == 1 && c[3].take == 1);
}

/* Pacing (section 7.3, Figure 15): a U2 request whose utility is below zero and whose
 * buffer is above the horizon (6 s) yields its step while the client holds more than
 * P_safe, and asks to be looked at again when either has played down to its bound. */
Test(policies, liveserve_paces_well_buffered_u2)
{
    cz_policy_params p = cz_policy_params_default();
    p.audio_s_per_token = 0.08; /* P_safe 2 s, alpha = beta = 1, horizon 6 s */
    cz_seq s[4];
    /* D: produced 16 s, played 2 + (10 - 9) = 3: P = 13, client holds 12 - 3 = 9 s.
     * K = 0.3, R_occ = 0.6: U = 0.18 - (13 - 2) / 2 < 0; P* = 2.36 < horizon 6.
     * Deferred until min(13 - 6, 9 - 2) = 7 s from now */
    s[0] = playing(200, 12.0, 2.0, 9.0, 30);
    /* E: produced 8 s, played 1.6: P = 6.4, client 6.0 s: deferred for min(0.4, 4.0) */
    s[1] = playing(100, 7.6, 0.6, 9.0, 10);
    /* F: as D, but the client holds only 3.5 - 3 = 0.5 s: it runs */
    s[2] = playing(200, 3.5, 2.0, 9.0, 30);
    /* G: P = 4.8 - 1.8 = 3.0, U2 but below the horizon: it runs */
    s[3] = playing(60, 4.8, 0.8, 9.0, 4);
    for (int pace = 0; pace < 2; pace++) {
        p.pace_u2 = pace;
        cz_sched_ctx ctx = ctx_of(s, 10.0);
        cz_cand c[4];
        cands_of(s, 4, c);
        cz_sched_ops ops = cz_sched_liveserve;
        ops.state = &p;
        ops.select(ops.state, &ctx, c, 4);
        double wake[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
        uint32_t take[4] = {0, 0, 0, 0};
        for (uint32_t i = 0; i < 4; i++) {
            wake[c[i].seq] = c[i].wake_s;
            take[c[i].seq] = c[i].take;
        }
        if (!pace) {
            for (uint32_t i = 0; i < 4; i++)
                cr_assert(take[i] == 1 && isinf(wake[i]), "request %u", i);
            continue;
        }
        cr_assert(take[0] == 0 && take[1] == 0 && take[2] == 1 && take[3] == 1);
        cr_assert_float_eq(wake[0], 17.0, 1e-9);
        cr_assert_float_eq(wake[1], 10.4, 1e-9);
        cr_assert(isinf(wake[2]) && isinf(wake[3]));
    }
    /* when a budget binds (a new turn whose first 20 tokens need 2 blocks of the 1 free
     * waits) nothing is paced: Algorithm 1's order and stop rule decide alone */
    cz_seq t[5];
    memcpy(t, s, sizeof s);
    t[4] = waiting(40, 9.5);
    p.pace_u2 = true;
    cz_sched_ctx ctx = ctx_of(t, 10.0);
    ctx.kv_available = 1;
    cz_cand c[5];
    cands_of(t, 5, c);
    cz_sched_ops ops = cz_sched_liveserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 5);
    for (uint32_t i = 0; i < 5; i++) {
        cr_assert(isinf(c[i].wake_s));
        cr_assert_eq(c[i].take, c[i].seq == 4 ? 0u : 1u, "request %u", c[i].seq);
    }
}

Test(policies, liveserve_without_telemetry_is_fcfs)
{
    cz_policy_params p = cz_policy_params_default(); /* audio_s_per_token 0: text stage */
    cz_seq s[3] = {playing(5, 0, 0, NAN, 1), waiting(10, 0.0), playing(9, 0, 0, NAN, 1)};
    cz_sched_ctx ctx = ctx_of(s, 1.0);
    cz_cand c[3];
    cands_of(s, 3, c);
    cz_sched_ops ops = cz_sched_liveserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 3);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(c[i].seq, i);
}

Test(policies, voxserve_urgency_boundary_and_caps)
{
    cz_policy_params p = cz_policy_params_default(); /* window 1 s, 1 prefill, cap 8 */
    cz_seq s[14];
    /* steady state: received 10 s, the latest chunk 2 s; played 7 s at now: the latest
     * chunk starts in 10 - 7 - 2 = 1.0 s: urgent; played 6.999: 1.001 s: not urgent */
    s[0] = playing(200, 10.0, 7.0, 5.0, 1);
    s[0].last_chunk_s = 2.0;
    s[1] = playing(200, 10.0, 6.999, 5.0, 1);
    s[1].last_chunk_s = 2.0;
    /* startup: no audio yet, ready at 2 and 1 */
    s[2] = playing(3, 0, 0, NAN, 1);
    s[2].turn_ready_s = 2.0;
    s[3] = playing(3, 0, 0, NAN, 1);
    s[3].turn_ready_s = 1.0;
    /* three new requests, and nine more decodes far from their deadlines */
    s[4] = waiting(10, 0.5);
    s[5] = waiting(10, 0.6);
    s[6] = waiting(10, 0.7);
    for (int i = 7; i < 14; i++) {
        s[i] = playing(300, 30.0, 1.0, 5.0, 1);
        s[i].last_chunk_s = 2.0;
    }
    cz_sched_ctx ctx = ctx_of(s, 5.0);
    ctx.token_budget = 1000;
    ctx.running = 11;
    ctx.seq_cap = 64;
    cz_cand c[14];
    cands_of(s, 14, c);
    cz_sched_ops ops = cz_sched_voxserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 14);
    /* order: prefills (FCFS), startup decodes oldest first, the steady urgent one, others */
    cr_assert_eq(c[0].seq, 4);
    cr_assert_eq(c[3].seq, 3);
    cr_assert_eq(c[4].seq, 2);
    cr_assert_eq(c[5].seq, 0);
    cr_assert_eq(c[5].group, 2);
    cr_assert_eq(c[6].seq, 1);
    cr_assert_eq(c[6].group, 3, "1.001 s from its deadline: not urgent");
    /* one new prefill only, and a step holding it carries 8 requests in all */
    uint32_t taken = 0, prefills = 0;
    for (int i = 0; i < 14; i++) {
        taken += c[i].take > 0;
        prefills += c[i].take > 0 && !c[i].running;
    }
    cr_assert_eq(prefills, 1);
    cr_assert_eq(taken, 8);
    cr_assert(c[4].take && c[5].take && c[6].take, "urgent decodes are in");
    /* throughput mode: FCFS, as large as the budgets allow */
    p.throughput_mode = true;
    cands_of(s, 14, c);
    ops.select(ops.state, &ctx, c, 14);
    taken = 0;
    for (int i = 0; i < 14; i++)
        taken += c[i].take > 0;
    cr_assert_eq(taken, 14);
}

Test(policies, bros_packing_and_batch_size)
{
    cz_policy_params p = cz_policy_params_default(); /* base 128; TTFT 0.5 s, TPOT 0.1 s */
    p.base_batch = 2;
    p.step_s[0] = 0.01;  /* 10 ms a step */
    p.step_s[1] = 0.001; /* 1 ms a prefill token */
    p.step_s[2] = 0.001; /* 1 ms a decoding sequence */
    cz_seq s[5];
    /* real-time decodes: last tokens at 9.95 and 9.915 -> residuals 0.05 and 0.015 s */
    s[0] = playing(10, 0, 0, 9.95, 1);
    s[1] = playing(10, 0, 0, 9.915, 1);
    s[2] = playing(10, 0, 0, 9.0, 1); /* best-effort */
    s[2].cls = 1;
    s[3] = playing(10, 0, 0, 9.0, 1);
    s[3].cls = 1;
    s[4] = playing(10, 0, 0, 9.99, 1); /* real-time, residual 0.09 */
    cz_sched_ctx ctx = ctx_of(s, 10.0);
    ctx.token_budget = 1000;
    ctx.seq_cap = 64;
    ctx.running = 5;
    cz_cand c[5];
    cands_of(s, 5, c);
    cz_sched_ops ops = cz_sched_bros;
    ops.state = &p;
    /* cap 2: the two most urgent real-time requests; predicted 0.01 + 2 x 0.001 = 0.012 s
     * < 0.015 s: no threat; 0.015 < 2 x 0.012: an urgent request, so the cap stays 2 */
    uint32_t next = ops.select(ops.state, &ctx, c, 5);
    cr_assert_eq(c[0].seq, 1);
    cr_assert_eq(c[1].seq, 0);
    cr_assert_eq(c[2].seq, 4);
    cr_assert(c[0].take && c[1].take && !c[2].take && !c[3].take && !c[4].take);
    cr_assert_eq(next, 2);
    /* nothing urgent (the deadlines are far): the cap doubles */
    for (int i = 0; i < 5; i++)
        s[i].last_token_s = 10.0;
    cands_of(s, 5, c);
    next = ops.select(ops.state, &ctx, c, 5);
    cr_assert_eq(next, 4);
    /* with cap 4 the predicted step (0.01 + 4 x 0.001 = 0.014 s) exceeds the most urgent
     * residual (0.012 s): back to the base at once, packing only 2 */
    ctx.batch_cap = 4;
    s[1].last_token_s = 9.912;
    cands_of(s, 5, c);
    next = ops.select(ops.state, &ctx, c, 5);
    cr_assert_eq(next, 2);
    uint32_t taken = 0;
    for (int i = 0; i < 5; i++)
        taken += c[i].take > 0;
    cr_assert_eq(taken, 2);
    /* best-effort fills what real-time leaves */
    ctx.batch_cap = 8;
    for (int i = 0; i < 5; i++)
        s[i].last_token_s = 10.0;
    cands_of(s, 5, c);
    ops.select(ops.state, &ctx, c, 5);
    taken = 0;
    for (int i = 0; i < 5; i++)
        taken += c[i].take > 0;
    cr_assert_eq(taken, 5);
    cr_assert_eq(c[3].group, 1);
}

#include <stdlib.h>

#include "cz_policies_int.h"

/* The allocation-free candidate sort against a brute-force check on random keys. */
Test(policies, candidate_sort_orders_totally)
{
    srand(3);
    enum { N = 5000 };
    static cz_cand c[N];
    for (uint32_t rep = 0; rep < 20; rep++) {
        uint32_t n = 1 + (uint32_t)(rand() % N);
        for (uint32_t i = 0; i < n; i++)
            c[i] = (cz_cand){.seq = i, .pos = i, .group = (uint32_t)(rand() % 3),
                             .key = (double)(rand() % 50)};
        cz__cands_sort(c, n);
        bool seen[N] = {false};
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(!seen[c[i].seq]);
            seen[c[i].seq] = true;
            if (i == 0)
                continue;
            const cz_cand *a = &c[i - 1], *b = &c[i];
            bool ok = a->group < b->group ||
                      (a->group == b->group && (a->key < b->key ||
                                                (a->key == b->key && a->pos < b->pos)));
            cr_assert(ok, "out of order at %u", i);
        }
    }
}

/* ---- cross-stage schedulers (Nova, sections III-C2, III-D, V-A7) ---- */

static cz_xs_policy xs_make(const char *name, const char *params)
{
    cz_xs_policy p;
    cz_err err;
    cz_err_clear(&err);
    cJSON *j = params ? cJSON_Parse(params) : NULL;
    cr_assert_eq(cz_xs_policy_make(name, j, "test", &p, &err), CZ_OK, "%s", err.msg);
    cJSON_Delete(j);
    return p;
}

static cz_xs_decision xs_decide(const cz_xs_policy *p, cz_xs_view v)
{
    cz_xs_decision d;
    cz_xs_decide(p, &v, &d);
    return d;
}

Test(policies, nova_stage_order)
{
    cz_xs_policy p = xs_make("nova", NULL);
    /* decode first and beside the exclusive worker; prefill before vision */
    cz_xs_decision d = xs_decide(&p, (cz_xs_view){.vision_waiting = 2, .prefill_waiting = 1,
                                                   .decode_ready = 3});
    cr_assert(d.decode && d.excl == CZ_XS_PREFILL);
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .decode_ready = 2, .decoding = true});
    cr_assert(!d.decode && d.excl == CZ_XS_VISION);
    /* vision and prefill never run together: a busy exclusive worker starts nothing new;
     * decode still joins beside it */
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 3, .prefill_waiting = 1, .decode_ready = 1,
                                   .excl = CZ_XS_VISION});
    cr_assert(d.decode && d.excl == CZ_XS_IDLE);
    /* in-flight batching: ready requests wait for the running decode step */
    d = xs_decide(&p, (cz_xs_view){.decode_ready = 4, .decoding = true, .excl = CZ_XS_PREFILL});
    cr_assert(!d.decode && d.excl == CZ_XS_IDLE);
    d = xs_decide(&p, (cz_xs_view){0});
    cr_assert(!d.decode && d.excl == CZ_XS_IDLE);
}

Test(policies, pf_limit_threshold_boundary)
{
    cz_xs_policy p = xs_make("pf_limit", NULL);
    cr_assert_eq(p.decode_threshold, 5);
    /* 5 waiting decodes do not exceed the threshold: prefill, then vision, go first */
    cz_xs_decision d = xs_decide(&p, (cz_xs_view){.prefill_waiting = 1, .vision_waiting = 1,
                                                   .decode_ready = 5});
    cr_assert(!d.decode && d.excl == CZ_XS_PREFILL);
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .decode_ready = 5});
    cr_assert(!d.decode && d.excl == CZ_XS_VISION);
    /* 6 do */
    d = xs_decide(&p, (cz_xs_view){.prefill_waiting = 1, .vision_waiting = 1, .decode_ready = 6});
    cr_assert(d.decode && d.excl == CZ_XS_IDLE);
    /* with nothing else to run, decode runs below the threshold */
    d = xs_decide(&p, (cz_xs_view){.decode_ready = 1});
    cr_assert(d.decode);
    /* one worker at a time */
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .decode_ready = 9, .excl = CZ_XS_PREFILL});
    cr_assert(!d.decode && d.excl == CZ_XS_IDLE);
    d = xs_decide(&p, (cz_xs_view){.prefill_waiting = 1, .decoding = true});
    cr_assert(!d.decode && d.excl == CZ_XS_IDLE);
}

Test(policies, chunked_takes_turns_with_vision)
{
    cz_xs_policy p = xs_make("chunked_prefill", NULL);
    cr_assert_eq(p.token_budget, 128);
    cz_xs_decision d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .decode_ready = 1,
                                                   .last_excl = CZ_XS_VISION});
    cr_assert(!d.decode && d.excl == CZ_XS_HYBRID);
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .decode_ready = 1,
                                   .last_excl = CZ_XS_HYBRID});
    cr_assert(d.excl == CZ_XS_VISION);
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .last_excl = CZ_XS_VISION});
    cr_assert(d.excl == CZ_XS_VISION); /* no LLM work: vision again */
    d = xs_decide(&p, (cz_xs_view){.prefilling = 1, .last_excl = CZ_XS_HYBRID});
    cr_assert(d.excl == CZ_XS_HYBRID);
    d = xs_decide(&p, (cz_xs_view){.vision_waiting = 1, .excl = CZ_XS_HYBRID});
    cr_assert(d.excl == CZ_XS_IDLE);
}

Test(policies, nova_sm_partition_eq5)
{
    cz_xs_policy p = xs_make("nova", NULL);
    /* beside vision: 24 SMs at one pending request, linearly to 12 at 4 (section V-A5) */
    const double vis[] = {24, 20, 16, 12, 12, 12};
    for (uint32_t n = 1; n <= 6; n++)
        cr_assert_float_eq(cz_xs_decode_share(&p, CZ_XS_VISION, n, 84), vis[n - 1] / 84, 1e-12,
                           "vision, %u pending", n);
    /* beside prefill: 30 at one, to 12 at 6, in units of 2 SMs (30, 26.4, 22.8, 19.2,
     * 15.6, 12 rounded down to even) */
    const double pf[] = {30, 26, 22, 18, 14, 12, 12};
    for (uint32_t n = 1; n <= 7; n++)
        cr_assert_float_eq(cz_xs_decode_share(&p, CZ_XS_PREFILL, n, 84), pf[n - 1] / 84, 1e-12,
                           "prefill, %u pending", n);
    /* nothing pending: decode alone on the whole GPU */
    cr_assert_eq(cz_xs_decode_share(&p, CZ_XS_VISION, 0, 84), 1.0);
    cz_xs_policy fixed = xs_make("nova", "{\"adaptive\": false}");
    cr_assert_float_eq(cz_xs_decode_share(&fixed, CZ_XS_VISION, 4, 84), 24.0 / 84, 1e-12);
    cz_xs_policy pfl = xs_make("pf_limit", NULL);
    cr_assert_eq(cz_xs_decode_share(&pfl, CZ_XS_VISION, 3, 84), 1.0);
    cz_xs_policy x;
    cz_err err;
    cr_assert_eq(cz_xs_policy_make("fcfs", NULL, "t", &x, &err), CZ_ENOTFOUND);
}

Test(policies, voxserve_detokenizer_rule)
{
    cz_policy_params p = cz_policy_params_default(); /* window 1 s */
    cz_seq s[4];
    /* at now = 5: s0's latest chunk starts playing in 10 - 7 - 2 = 1.0 s (urgent at the
     * boundary); s1's in 1.5 s (urgent from 5.5); s2 in startup, ready at 4; s3 in
     * startup, ready at 3 */
    s[0] = playing(200, 10.0, 7.0, 5.0, 1);
    s[0].last_chunk_s = 2.0;
    s[1] = playing(200, 10.5, 7.0, 5.0, 1);
    s[1].last_chunk_s = 2.0;
    s[2] = playing(3, 0, 0, NAN, 1);
    s[2].turn_ready_s = 4.0;
    s[3] = playing(3, 0, 0, NAN, 1);
    s[3].turn_ready_s = 3.0;
    cz_cand scratch[6];
    uint32_t pos[6];
    double wake;
    /* queue: s1, none (a cut turn), s0, s2, s3 */
    cz_detok_job jobs[] = {{&s[1], 0}, {NULL, 1}, {&s[0], 2}, {&s[2], 3}, {&s[3], 4}};
    uint32_t k = cz_voxserve_detok_pick(&p, jobs, 5, 5.0, 64, false, scratch, pos, &wake);
    /* startup oldest first (s3, s2), then steady nearest deadline (s0), then the others in
     * queue order (s1), the job without a request last */
    cr_assert_eq(k, 5);
    const uint32_t want[] = {4, 3, 2, 0, 1};
    for (uint32_t i = 0; i < 5; i++)
        cr_assert_eq(pos[i], want[i], "position %u: %u", i, pos[i]);
    cr_assert(isinf(wake));
    /* the batch cap */
    cr_assert_eq(cz_voxserve_detok_pick(&p, jobs, 5, 5.0, 2, false, scratch, pos, &wake), 2);
    cr_assert(pos[0] == 4 && pos[1] == 3);
    /* nothing urgent: the detokenizer waits, and is woken when s1's chunk becomes urgent */
    cz_detok_job calm[] = {{&s[1], 0}, {NULL, 1}};
    cr_assert_eq(cz_voxserve_detok_pick(&p, calm, 2, 5.0, 64, false, scratch, pos, &wake), 0);
    cr_assert_float_eq(wake, 5.5, 1e-12);
    cr_assert_eq(cz_voxserve_detok_pick(&p, calm, 2, 5.5, 64, false, scratch, pos, &wake), 2);
    cr_assert(pos[0] == 0 && pos[1] == 1);
    /* throughput mode (section 4.3.3): the largest batch, in queue order: two chunks of a
     * possible 64 wait while the LLM still runs; they go once it has nothing left, or
     * when they fill the batch */
    p.throughput_mode = true;
    cr_assert_eq(cz_voxserve_detok_pick(&p, calm, 2, 5.0, 64, false, scratch, pos, &wake), 0);
    cr_assert(isinf(wake));
    cr_assert_eq(cz_voxserve_detok_pick(&p, calm, 2, 5.0, 64, true, scratch, pos, &wake), 2);
    cr_assert(pos[0] == 0 && pos[1] == 1);
    cr_assert_eq(cz_voxserve_detok_pick(&p, jobs, 5, 5.0, 3, false, scratch, pos, &wake), 3);
    cr_assert(pos[0] == 0 && pos[1] == 1 && pos[2] == 2);
}

/* Section 3.2.1 and Eq. 2: the steady-state deadline runs on a clock started at the first
 * chunk's arrival that never pauses. The client got its first chunk at 1.0, has received
 * 10 s, the latest chunk 2 s: that chunk starts at 1 + 10 - 2 = 9 on that clock. At 8.1 it
 * is 0.9 s away: urgent. The player stalled 0.5 s on the way, so it has played only
 * 8.1 - 1 - 0.5 = 6.6 s: a pausing clock would put the start 10 - 6.6 - 2 = 1.4 s away,
 * not urgent, and let a request that fell behind fall further. */
Test(policies, voxserve_deadline_does_not_pause_at_a_stall)
{
    cz_policy_params p = cz_policy_params_default(); /* window 1 s */
    cz_seq s[2];
    s[0] = playing(250, 10.0, 6.6, 8.1, 1);
    s[0].last_chunk_s = 2.0;
    s[0].first_audio_s = 1.0; /* played 6.6 of the 7.1 s since: a 0.5 s stall */
    s[1] = playing(250, 10.0, 6.6, 8.1, 1); /* no stall: first chunk at 1.5, start 9.5 */
    s[1].last_chunk_s = 2.0;
    cz_sched_ctx ctx = ctx_of(s, 8.1);
    ctx.running = 2;
    cz_cand c[2];
    cands_of(s, 2, c);
    cz_sched_ops ops = cz_sched_voxserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 2);
    cr_assert_eq(c[0].seq, 0);
    cr_assert_eq(c[0].group, 2, "0.9 s from its deadline: urgent");
    cr_assert_float_eq(c[0].key, 0.9, 1e-12);
    cr_assert_eq(c[1].group, 3, "1.4 s from its deadline: not urgent");
    /* the detokenizer sees the same deadline: only s0's chunk is urgent, and s1's becomes
     * urgent at 9.5 - 1 = 8.5 */
    cz_cand scratch[2];
    uint32_t pos[2];
    double wake;
    cz_detok_job jobs[] = {{&s[1], 0}, {&s[0], 1}};
    cr_assert_eq(cz_voxserve_detok_pick(&p, jobs, 2, 8.1, 64, false, scratch, pos, &wake), 2);
    cr_assert(pos[0] == 1 && pos[1] == 0);
    cz_detok_job calm[] = {{&s[1], 0}};
    cr_assert_eq(cz_voxserve_detok_pick(&p, calm, 1, 8.1, 64, false, scratch, pos, &wake), 0);
    cr_assert_float_eq(wake, 8.5, 1e-12);
}

/* Throughput mode (section 4.3.3) fills the largest batch, new requests first (its
 * OfflineScheduler prefills before it decodes): two waiting requests of 6 and 8 tokens
 * and three decodes under a budget of 16 tokens and 5 slots (2 free): both prefills
 * (14 tokens), then two of the decodes in FCFS order; the third finds no budget. */
Test(policies, voxserve_throughput_mode_prefills_first)
{
    cz_policy_params p = cz_policy_params_default();
    p.throughput_mode = true;
    cz_seq s[5];
    for (int i = 0; i < 3; i++)
        s[i] = playing(20, 0.0, 0.0, NAN, 2);
    s[3] = waiting(6, 1.0);
    s[4] = waiting(8, 2.0);
    cz_sched_ctx ctx = ctx_of(s, 5.0);
    ctx.token_budget = 16;
    ctx.seq_cap = 5;
    ctx.running = 3;
    cz_cand c[5];
    cands_of(s, 5, c);
    cz_sched_ops ops = cz_sched_voxserve;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 5);
    const uint32_t order[] = {3, 4, 0, 1, 2};
    const uint32_t take[] = {6, 8, 1, 1, 0};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(c[i].seq, order[i], "position %d: %u", i, c[i].seq);
        cr_assert_eq(c[i].take, take[i], "position %d takes %u", i, c[i].take);
    }
}

/* VoxServe's stages run its asynchronous pipeline unless told otherwise (section 3.2.2);
 * the other schedulers run one step at a time; the contention factor is at least 1. */
Test(policies, async_pipeline_parameters)
{
    cz_policy pol;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_policy_make("voxserve", NULL, "t", &pol, &err), CZ_OK);
    cr_assert(pol.params.async_pipeline);
    cr_assert_float_eq(pol.params.corun_slowdown, 2.0, 0);
    cr_assert_eq(cz_policy_make("fcfs", NULL, "t", &pol, &err), CZ_OK);
    cr_assert(!pol.params.async_pipeline);
    cJSON *j = cJSON_Parse("{\"name\": \"voxserve\", \"async_pipeline\": false, "
                           "\"corun_slowdown\": 1.25}");
    cr_assert_eq(cz_policy_make("voxserve", j, "t", &pol, &err), CZ_OK, "%s", err.msg);
    cr_assert(!pol.params.async_pipeline);
    cr_assert_float_eq(pol.params.corun_slowdown, 1.25, 0);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"name\": \"fcfs\", \"corun_slowdown\": 0.5}");
    cr_assert_eq(cz_policy_make("fcfs", j, "cfg.json: scheduler", &pol, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "cfg.json: scheduler") && strstr(err.msg, "corun_slowdown"), "%s",
              err.msg);
    cJSON_Delete(j);
}

Test(policies, nova_static_split_enumeration)
{
    /* decode on 2, 4 or 6 SMs; the co-running stage on the rest */
    const cz_xs_split t[] = {
        {.sms = 2, .vision_s = 1.0, .prefill_s = 0.4, .decode_s = 0.10},
        {.sms = 4, .vision_s = 1.2, .prefill_s = 0.5, .decode_s = 0.05},
        {.sms = 6, .vision_s = 2.0, .prefill_s = 0.8, .decode_s = 0.04},
    };
    /* L = 10: E(i, j) = Tv_i + Tp_j + 10 (Tv_i Tdv_i + Tp_j Tdp_j) / (Tv_i + Tp_j);
     * by hand: E(1, 1) = 1.7 + 10 (0.06 + 0.025) / 1.7 = 2.2; E(0, 0) = 1.4 + 10 (0.1 +
     * 0.04) / 1.4 = 2.4; E(1, 0) = 1.6 + 10 (0.06 + 0.04) / 1.6 = 2.225; E(0, 1) = 1.5 +
     * 10 (0.1 + 0.025) / 1.5 = 2.3333; E(2, 2) = 2.8 + 10 (0.08 + 0.032) / 2.8 = 3.2;
     * E(1, 2) = 2.0 + 10 (0.06 + 0.032) / 2.0 = 2.46; every other pair is larger */
    uint32_t v = 0, p = 0;
    double e = cz_xs_enumerate_split(t, 3, 10, 1.0, &v, &p);
    cr_assert_float_eq(e, 2.2, 1e-12);
    cr_assert(v == 4 && p == 4, "%u %u", v, p);
    /* long replies favour fast decode beside the long stage: L = 100 */
    e = cz_xs_enumerate_split(t, 3, 100, 1.0, &v, &p);
    /* E(1, 2) = 2.0 + 100 (0.06 + 0.032) / 2.0 = 6.6, below E(1, 1) = E(2, 1) = 6.7 and
     * E(2, 2) = 2.8 + 11.2 / 2.8 = 6.8: decode takes 6 SMs beside prefill */
    cr_assert_float_eq(e, 6.6, 1e-12);
    cr_assert(v == 4 && p == 6, "%u %u", v, p);
    /* ties go to the pair listed first */
    const cz_xs_split same[] = {{.sms = 2, .vision_s = 1.0, .prefill_s = 0.4, .decode_s = 0.1},
                                {.sms = 4, .vision_s = 1.0, .prefill_s = 0.4, .decode_s = 0.1}};
    e = cz_xs_enumerate_split(same, 2, 10, 1.0, &v, &p);
    cr_assert_float_eq(e, 2.4, 1e-12);
    cr_assert(v == 2 && p == 2, "%u %u", v, p);
    /* no reply: the fastest vision and prefill */
    e = cz_xs_enumerate_split(t, 3, 0, 1.0, &v, &p);
    cr_assert_float_eq(e, 1.4, 1e-12);
    cr_assert(v == 2 && p == 2);
}

/* The executor stretches every co-running step by corun_slowdown, and in Eq. 1's ideal
 * pipeline every step co-runs: the enumeration sees the same table times 1.5, so each
 * pair's latency is 1.5 times what it was and the best pair does not move. */
Test(policies, nova_split_with_corun_factor)
{
    const cz_xs_split t[] = {
        {.sms = 2, .vision_s = 1.0, .prefill_s = 0.4, .decode_s = 0.10},
        {.sms = 4, .vision_s = 1.2, .prefill_s = 0.5, .decode_s = 0.05},
        {.sms = 6, .vision_s = 2.0, .prefill_s = 0.8, .decode_s = 0.04},
    };
    /* E(1, 2) at L = 100, alone: 2.0 + 100 (1.2 x 0.05 + 0.8 x 0.04) / 2.0 = 6.6; at 1.5:
     * 1.5 x 2.0 + 100 (1.8 x 0.075 + 1.2 x 0.06) / 3.0 = 3.0 + 6.9 = 9.9 */
    cr_assert_float_eq(cz_xs_ideal_e2e_s(&t[1], &t[2], 100, 1.0), 6.6, 1e-12);
    cr_assert_float_eq(cz_xs_ideal_e2e_s(&t[1], &t[2], 100, 1.5), 9.9, 1e-12);
    uint32_t v = 0, p = 0;
    cr_assert_float_eq(cz_xs_enumerate_split(t, 3, 10, 1.5, &v, &p), 3.3, 1e-12); /* 1.5 x 2.2 */
    cr_assert(v == 4 && p == 4, "%u %u", v, p);
    cr_assert_float_eq(cz_xs_enumerate_split(t, 3, 100, 1.5, &v, &p), 9.9, 1e-12);
    cr_assert(v == 4 && p == 6, "%u %u", v, p);
}

/* Eq. 6 (section III-D) and Table V. M/D/1 by hand: lambda 0.25 req/s, S = 2 s, rho 0.5:
 * W = 0.25 x 4 / (2 x 0.5) = 1 s; exponential service (E[S^2] = 2 S^2, M/M/1: rho / (mu -
 * lambda) = 0.5 / 0.25) doubles it. Table V's "predicted" row is the M/D/1 value
 * rho S / (2 (1 - rho)) of its own utilisation and processing-time rows: each printed
 * prediction lies between the formula at the rounded rows' lower and upper ends (+-0.005),
 * and the M/M/1 value (twice that) lies outside. */
Test(policies, nova_queueing_md1_table_v)
{
    cr_assert_float_eq(cz_xs_mg1_wait_s(0.25, 2.0, 4.0), 1.0, 1e-12);
    cr_assert_float_eq(cz_xs_mg1_wait_s(0.25, 2.0, 8.0), 2.0, 1e-12);
    cr_assert(isnan(cz_xs_mg1_wait_s(0.5, 2.0, 4.0)));  /* rho = 1 */
    cr_assert(isnan(cz_xs_mg1_wait_s(0.6, 2.0, 4.0)));  /* overloaded */
    cr_assert(isnan(cz_xs_mg1_wait_s(0.0, 2.0, 4.0)));
    /* Table V at 0.3 to 0.7 req/s: utilisation, processing time (s), predicted delay (s) */
    const double tab[][3] = {{0.42, 1.39, 0.51}, {0.58, 1.44, 1.00}, {0.72, 1.43, 1.86},
                             {0.86, 1.42, 4.32}, {0.97, 1.38, 20.99}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        double lo_rho = tab[i][0] - 0.005, lo_s = tab[i][1] - 0.005;
        double hi_rho = tab[i][0] + 0.005, hi_s = tab[i][1] + 0.005;
        double lo = cz_xs_mg1_wait_s(lo_rho / lo_s, lo_s, lo_s * lo_s);
        double hi = cz_xs_mg1_wait_s(hi_rho / hi_s, hi_s, hi_s * hi_s);
        cr_assert(lo <= tab[i][2] && tab[i][2] <= hi, "row %zu: %.3f not in [%.3f, %.3f]", i,
                  tab[i][2], lo, hi);
        cr_assert(2 * lo > tab[i][2], "row %zu: M/M/1 would match", i);
    }
}

/* Metronome's AIMD gateway (Metronome, section 4.2) on a scripted series of
 * tick measurements, B = 2 s, target 0.7 B = 1.4 s. */
Test(policies, aimd_cap_trajectory)
{
    cz_admission a;
    cz_err err;
    cz_err_clear(&err);
    cJSON *j = cJSON_Parse("{\"policy\": \"aimd\"}");
    cr_assert_eq(cz_admission_parse(j, "a", &a, &err), CZ_OK, "%s", err.msg);
    cJSON_Delete(j);
    cr_assert_eq(a.cap, UINT32_MAX); /* unbounded until the first slow tick */
    cr_assert(cz_admission_admit(&a, 100000));
    cz_admission_tick(&a, 1.0, 2.0, 10);
    cr_assert_eq(a.cap, UINT32_MAX); /* no increase while unbounded */
    cz_admission_tick(&a, 1.5, 2.0, 10);
    cr_assert_eq(a.cap, 9); /* floor(0.9 x 10) */
    cr_assert(cz_admission_admit(&a, 8) && !cz_admission_admit(&a, 9));
    cz_admission_tick(&a, 1.0, 2.0, 9);
    cr_assert_eq(a.cap, 10); /* 9 + 2 >= 9 */
    cz_admission_tick(&a, 1.0, 2.0, 7);
    cr_assert_eq(a.cap, 10); /* 7 + 2 < 10: hold */
    cz_admission_tick(&a, 1.4, 2.0, 8);
    cr_assert_eq(a.cap, 11); /* at the target is not above it; 8 + 2 >= 10 */
    cz_admission_tick(&a, 1.41, 2.0, 11);
    cr_assert_eq(a.cap, 9); /* floor(9.9) */
    cz_admission_tick(&a, NAN, 2.0, 11);
    cr_assert_eq(a.cap, 9); /* no measurement: no change */
    cz_admission_tick(&a, 2.0, 2.0, 1);
    cr_assert_eq(a.cap, 1); /* never below one */

    j = cJSON_Parse("{\"policy\": \"static\", \"cap\": 84}");
    cr_assert_eq(cz_admission_parse(j, "a", &a, &err), CZ_OK, "%s", err.msg);
    cJSON_Delete(j);
    cr_assert(cz_admission_admit(&a, 83) && !cz_admission_admit(&a, 84));
    cz_admission_tick(&a, 5.0, 2.0, 84);
    cr_assert_eq(a.cap, 84);

    const char *bad[][2] = {{"{\"policy\": \"fifo\"}", "field 'policy'"},
                            {"{\"policy\": \"static\"}", "cap"},
                            {"{\"policy\": \"aimd\", \"decrease\": 1.5}", "decrease"},
                            {"{\"policy\": \"aimd\", \"cap\": 3}", "cap"}};
    for (size_t i = 0; i < 4; i++) {
        j = cJSON_Parse(bad[i][0]);
        cr_assert_eq(cz_admission_parse(j, "cfg.json: admission", &a, &err), CZ_EINVAL);
        cr_assert(strstr(err.msg, "cfg.json: admission") && strstr(err.msg, bad[i][1]), "%s",
                  err.msg);
        cJSON_Delete(j);
    }
}

/* A full pool whose running sequences all need a new block: the policy still gives them
 * their steps (the core then preempts lower-priority running sequences, as vLLM V1 does);
 * before this rule BROS scheduled nothing and the run stalled for ever. Waiting sequences
 * stay bounded by the free KV. */
Test(policies, running_candidates_are_not_refused_for_kv)
{
    cz_seq s[3];
    /* two running decodes at a block boundary (16 computed tokens in 1 block: the next
     * token needs a second block), one waiting request */
    s[0] = playing(16, 0, 0, NAN, 1);
    s[0].tokens_in = 1;
    s[0].computed = 16;
    s[0].generated = 16;
    s[0].cls = 0;
    s[1] = s[0];
    s[1].cls = 1;
    s[2] = waiting(10, 0.5);
    s[2].cls = 1;
    cz_sched_ctx ctx = ctx_of(s, 1.0);
    ctx.kv_available = 0;
    ctx.kv_used = ctx.kv_blocks;
    cz_cand c[3];
    cands_of(s, 3, c);
    cr_assert(c[0].running && c[0].decode && cz_sched_blocks(&ctx, &s[0], 1) == 1);
    cz_policy_params p = cz_policy_params_default();
    cz_sched_ops ops = cz_sched_bros;
    ops.state = &p;
    ops.select(ops.state, &ctx, c, 3);
    uint32_t taken = 0;
    for (int i = 0; i < 3; i++) {
        if (c[i].seq == 2)
            cr_assert_eq(c[i].take, 0); /* the waiting request does not fit */
        else
            taken += c[i].take;
    }
    cr_assert_eq(taken, 2);
}
