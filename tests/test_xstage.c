/* test_xstage.c - the cross-stage runtime (runtime/cz_xstage.h) and its
 * discrete-event driver (sim/cz_xstage.c) on hand-timed cases: one CogAgent-9B request on
 * an RTX A6000 under each cross-stage scheduler, cross-checked against the pipeline
 * runtime; two requests whose timelines follow Nova's stage order and SM partition
 * (Nova, section III-D) step by step, against PF-Limit's; and the
 * runtime driven from a script with no event queue, step by step (the steps it describes,
 * the token counts a driver builds batches from, the outcomes at the end). Expected step
 * times come from cz_cost_step and cz_cost_share_s, which test_cost checks against hand
 * computations. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_sim.h"
#include "cz_xstage.h"
#include "test_util.h"

typedef struct run {
    cz_config cfg;
    cz_workload wl;
    cz_metrics m;
    cz_run_stats st;
    cz_status status;
    cz_err err;
} run;

enum { TEXT = 100, IMAGE = 1602, IN = TEXT + IMAGE };

/* Parses the config (CogAgent-9B on an RTX A6000, `requests` Poisson requests of IMAGE
 * image tokens, TEXT text tokens and `out` output tokens) without running it. */
static cz_status parse_config(run *r, const char *scheduler, unsigned requests, unsigned out,
                              double rate)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model\": \"cogagent-9b\", \"hardware\": \"rtx-a6000\", \"seed\": 3,"
             " \"scheduler\": %s,"
             " \"workload\": {\"synthetic\": {\"requests\": %u, \"image_tokens\": %d,"
             " \"input_tokens\": %d, \"output_tokens\": %u},"
             " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": %g}}}",
             scheduler, requests, IMAGE, TEXT, out, rate);
    cJSON *j = cJSON_Parse(json);
    cr_assert(j != NULL);
    cz_err_clear(&r->err);
    cz_workload_init(&r->wl);
    cz_metrics_init(&r->m, 0.0, 0);
    r->status = cz_config_parse(j, "test", ".", &r->cfg, &r->wl, &r->err);
    cJSON_Delete(j);
    return r->status;
}

static cz_status run_config(run *r, const char *scheduler, unsigned requests, unsigned out,
                            double rate)
{
    if (parse_config(r, scheduler, requests, out, rate) == CZ_OK)
        r->status = cz_sim_run(&r->cfg, &r->wl, &r->m, &r->st, NULL, NULL, &r->err);
    return r->status;
}

static void run_free(run *r)
{
    cz_metrics_free(&r->m);
    cz_workload_free(&r->wl);
}

/* Time of a step of pipeline stage p with this shape on `share` of the SMs. */
static double step_s(const run *r, uint32_t p, cz_batch_shape b, double share)
{
    cz_step_cost c;
    cz_cost_step(&r->cfg.model.stages[r->cfg.model.pipe[p].stage], &r->cfg.hw, &r->cfg.cost, &b,
                 &c);
    return cz_cost_share_s(&c, &r->cfg.cost, share);
}

static double vision_s(const run *r, double share)
{
    cz_batch_shape b = {.prefill_tokens = 6401, .prefill_seqs = 1,
                        .prefill_attn_ctx = 6401ull * 6402 / 2};
    return step_s(r, 0, b, share);
}

static double prefill_s(const run *r, double share)
{
    cz_batch_shape b = {.prefill_tokens = IN, .prefill_seqs = 1,
                        .prefill_attn_ctx = (uint64_t)IN * (IN + 1) / 2};
    return step_s(r, 1, b, share);
}

/* A decode step of n requests that have generated `gen` tokens each. */
static double decode_s(const run *r, uint32_t n, uint32_t gen, double share)
{
    cz_batch_shape b = {.decode_seqs = n, .decode_ctx_tokens = (uint64_t)n * (IN + gen)};
    return step_s(r, 1, b, share);
}

#define NEAR(a, b) cr_assert(fabs((a) - (b)) < 1e-9, "%s = %.12f, expected %.12f", #a, (a), (b))

Test(xstage, single_request_hand_timed)
{
    const char *scheds[] = {"\"nova\"", "\"pf_limit\"", "\"fcfs\""};
    for (int k = 0; k < 3; k++) {
        run r;
        cr_assert_eq(run_config(&r, scheds[k], 1, 5, 1.0), CZ_OK, "%s", r.err.msg);
        cr_assert_eq(r.cfg.cross_stage, k < 2);
        const cz_req_record *q = &r.m.req[0];
        double tv = vision_s(&r, 1.0), tp = prefill_s(&r, 1.0), t = tv + tp;
        cr_assert_eq(q->outcome, CZ_REQ_COMPLETED);
        /* the LLM first runs the request when its vision encode ends */
        NEAR(q->first_sched_s, tv);
        NEAR(q->first_token_s, t);
        for (uint32_t g = 1; g < 5; g++)
            t += decode_s(&r, 1, g, 1.0);
        NEAR(q->finish_s, t);
        cr_assert_eq(q->output_tokens, 5);
        run_free(&r);
    }
    /* Nova's profile of CogAgent on an A6000 (Table I): vision 806.8 ms, prefill 324.1 ms,
     * one decode step 28.9 ms; the roofline is within 15 % of each */
    run r;
    cr_assert_eq(run_config(&r, "\"nova\"", 1, 5, 1.0), CZ_OK);
    cr_assert(fabs(vision_s(&r, 1.0) / 0.8068 - 1) < 0.15, "vision %f", vision_s(&r, 1.0));
    cr_assert(fabs(prefill_s(&r, 1.0) / 0.3241 - 1) < 0.15, "prefill %f", prefill_s(&r, 1.0));
    cr_assert(fabs(decode_s(&r, 1, 1, 1.0) / 0.0289 - 1) < 0.15, "decode %f",
              decode_s(&r, 1, 1, 1.0));
    run_free(&r);
}

Test(xstage, chunked_prefill_single_request)
{
    run r;
    cr_assert_eq(run_config(&r, "{\"name\": \"chunked_prefill\", \"token_budget\": 512}", 1, 3,
                            1.0),
                 CZ_OK, "%s", r.err.msg);
    double t = vision_s(&r, 1.0);
    NEAR(r.m.req[0].first_sched_s, t);
    /* 1,702 input tokens in chunks of 512: each attends to what came before it */
    for (uint64_t done = 0; done < IN;) {
        uint64_t c = IN - done < 512 ? IN - done : 512;
        cz_batch_shape b = {.prefill_tokens = c, .prefill_seqs = 1,
                            .prefill_attn_ctx = c * done + c * (c + 1) / 2};
        t += step_s(&r, 1, b, 1.0);
        done += c;
    }
    NEAR(r.m.req[0].first_token_s, t);
    t += decode_s(&r, 1, 1, 1.0) + decode_s(&r, 1, 2, 1.0);
    NEAR(r.m.req[0].finish_s, t);
    run_free(&r);
}

/* Two requests a microsecond apart, two output tokens each. */
Test(xstage, nova_stage_order_and_partition)
{
    run r;
    cr_assert_eq(run_config(&r, "\"nova\"", 2, 2, 1e6), CZ_OK, "%s", r.err.msg);
    const cz_req_record *a = &r.m.req[0], *b = &r.m.req[1];
    double a1 = b->arrival_s;
    cr_assert(a->arrival_s == 0 && a1 > 0 && a1 < 1e-3);
    /* request 0: vision, then its prefill before request 1's vision (prefill > vision),
     * both on the whole GPU (nothing decodes yet) */
    double t0 = vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    NEAR(a->first_token_s, t0);
    /* at t0 request 1's vision starts beside request 0's decode: one pending request, so
     * decode gets 24 of 84 SMs and vision the other 60 (section V-A5) */
    NEAR(a->finish_s, t0 + decode_s(&r, 1, 1, 24.0 / 84));
    double v1 = t0 + vision_s(&r, 60.0 / 84);
    /* request 1's prefill then runs alone (request 0 is done) on the whole GPU */
    NEAR(b->first_sched_s, v1);
    NEAR(b->first_token_s, v1 + prefill_s(&r, 1.0));
    NEAR(b->finish_s, v1 + prefill_s(&r, 1.0) + decode_s(&r, 1, 1, 1.0));
    /* the wait for the vision worker: request 1 waited t0 - a1 */
    NEAR(r.st.vision_wait_sum_s, t0 - a1);
    cr_assert_eq(r.st.vision_starts, 2);
    cr_assert_eq(r.st.decode_steps, 2);
    NEAR(r.st.decode_share_sum, 24.0 / 84 + 1.0);
    run_free(&r);
}

Test(xstage, pf_limit_runs_one_worker_at_a_time)
{
    run r;
    cr_assert_eq(run_config(&r, "\"pf_limit\"", 2, 2, 1e6), CZ_OK, "%s", r.err.msg);
    const cz_req_record *a = &r.m.req[0], *b = &r.m.req[1];
    double t0 = vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    NEAR(a->first_token_s, t0);
    /* one decode waits (not more than 5): request 1's vision and prefill go first, then
     * both decode in one batch */
    double t1 = t0 + vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    NEAR(b->first_sched_s, t0 + vision_s(&r, 1.0));
    NEAR(b->first_token_s, t1);
    NEAR(a->finish_s, t1 + decode_s(&r, 2, 1, 1.0));
    NEAR(b->finish_s, a->finish_s);
    run_free(&r);
}

Test(xstage, config_and_workload_errors)
{
    cz_err err;
    cz_config cfg;
    cz_workload wl;
    const char *bad[][2] = {
        {"{\"model\": \"qwen3-omni\", \"scheduler\": \"nova\","
         " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 8,"
         " \"output_tokens\": 8}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}}",
         "model 'qwen3-omni' has no vision encoder stage"},
        {"{\"model\": \"cogagent-9b\", \"scheduler\": {\"name\": \"nova\", \"sm_flor\": 2},"
         " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 8,"
         " \"output_tokens\": 8}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}}",
         "sm_flor"},
        {"{\"model\": \"cogagent-9b\", \"scheduler\": {\"name\": \"nova\", \"sm_floor\": 40},"
         " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 8,"
         " \"output_tokens\": 8}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}}",
         "field 'sm_floor'"},
        {"{\"model\": \"cogagent-9b\", \"hardware\": \"rtx-a6000\","
         " \"scheduler\": {\"name\": \"nova\", \"sm_decode_prefill\": 84},"
         " \"workload\": {\"synthetic\": {\"requests\": 1, \"input_tokens\": 8,"
         " \"output_tokens\": 8}, \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}}",
         "'scheduler.sm_decode_prefill': expected fewer SMs than the GPU's 84"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = cJSON_Parse(bad[i][0]);
        cr_assert(j != NULL);
        cz_err_clear(&err);
        cz_workload_init(&wl);
        cr_assert_eq(cz_config_parse(j, "bad.json", ".", &cfg, &wl, &err), CZ_EINVAL,
                     "case %zu", i);
        cr_assert(strstr(err.msg, "bad.json") && strstr(err.msg, bad[i][1]), "case %zu: %s", i,
                  err.msg);
        cz_workload_free(&wl);
        cJSON_Delete(j);
    }
    /* closed-loop conversations are not open-loop requests */
    cJSON *j = cJSON_Parse("{\"model\": \"cogagent-9b\", \"scheduler\": \"nova\","
                           " \"workload\": {\"synthetic\": {\"requests\": 2, \"input_tokens\": 8,"
                           " \"output_tokens\": 8},"
                           " \"arrivals\": {\"process\": \"closed_loop\", \"concurrency\": 1}}}");
    cz_err_clear(&err);
    cz_workload_init(&wl);
    cr_assert_eq(cz_config_parse(j, "c.json", ".", &cfg, &wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_run_stats st;
    cr_assert_eq(cz_sim_run(&cfg, &wl, &m, &st, NULL, NULL, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "open-loop"), "%s", err.msg);
    cz_metrics_free(&m);
    cz_workload_free(&wl);
    cJSON_Delete(j);
}

/* Eq. 3 on the cost model: the driver's split is the best pair over every split in units of
 * 2 SMs, for the workload's mean request (here every request: 1,702 input tokens, 40
 * output tokens, a decode step at 20 tokens into the reply). Every step of Eq. 1's ideal
 * pipeline co-runs, so the executor's co-run factor (1.5 here) stretches them all: the
 * ideal latency is 1.5 times the one alone, and the pair is the same. */
Test(xstage, enumerated_split_is_the_best_pair)
{
    run r;
    cr_assert_eq(run_config(&r,
                            "{\"name\": \"nova\", \"enumerate\": true, \"sm_floor\": 20,"
                            " \"corun_slowdown\": 1.5}",
                            1, 40, 1.0),
                 CZ_OK, "%s", r.err.msg);
    uint32_t S = r.cfg.hw.sms;
    double best = INFINITY;
    uint32_t bv = 0, bp = 0;
    for (uint32_t v = 2; v < S; v += 2) {
        for (uint32_t p = 2; p < S; p += 2) {
            double tv = vision_s(&r, 1.0 - (double)v / S), tp = prefill_s(&r, 1.0 - (double)p / S);
            double dv = decode_s(&r, 1, 20, (double)v / S), dp = decode_s(&r, 1, 20, (double)p / S);
            double e = tv + tp + 40 * (tv * dv + tp * dp) / (tv + tp);
            if (e < best) {
                best = e;
                bv = v;
                bp = p;
            }
        }
    }
    cr_assert_eq(r.cfg.xs.sm_decode_vision, bv);
    cr_assert_eq(r.cfg.xs.sm_decode_prefill, bp);
    cr_assert_float_eq(r.cfg.xs_ideal_e2e_s, 1.5 * best, 1e-12);
    /* what Eq. 1 saw at the pair, on the SMs alone */
    NEAR(r.cfg.xs_ideal_vision.vision_s, vision_s(&r, 1.0 - (double)bv / S));
    NEAR(r.cfg.xs_ideal_prefill.prefill_s, prefill_s(&r, 1.0 - (double)bp / S));
    NEAR(r.cfg.xs_ideal_vision.decode_s, decode_s(&r, 1, 20, (double)bv / S));
    /* the floor never exceeds the split */
    cr_assert(r.cfg.xs.sm_floor <= bv && r.cfg.xs.sm_floor <= bp);
    run_free(&r);
    /* without the factor: the same pair */
    cr_assert_eq(run_config(&r, "{\"name\": \"nova\", \"enumerate\": true, \"sm_floor\": 20}", 1,
                            40, 1.0),
                 CZ_OK, "%s", r.err.msg);
    cr_assert(r.cfg.xs.sm_decode_vision == bv && r.cfg.xs.sm_decode_prefill == bp);
    cr_assert_float_eq(r.cfg.xs_ideal_e2e_s, best, 1e-12);
    run_free(&r);
    /* the paper's split as given: Eq. 1 at 24 / 30 */
    cr_assert_eq(run_config(&r, "\"nova\"", 1, 40, 1.0), CZ_OK, "%s", r.err.msg);
    double tv = vision_s(&r, 60.0 / 84), tp = prefill_s(&r, 54.0 / 84);
    double e = tv + tp + 40 * (tv * decode_s(&r, 1, 20, 24.0 / 84) +
                               tp * decode_s(&r, 1, 20, 30.0 / 84)) / (tv + tp);
    cr_assert_float_eq(r.cfg.xs_ideal_e2e_s, e, 1e-12);
    cr_assert(e > best); /* worse than the enumerated pair on this cost model */
    run_free(&r);
}

/* Section III-E: with one physical layer every later layer waits for its weights (the
 * slot is busy until the layer before it ends), so the encode takes T_v + (L - 1) c with c
 * a layer's weights over the link; with two, each load overlaps the layer before it and
 * the encode takes T_v (c is below a layer's compute here). What stays on the GPU is K
 * layers of 67,926,784 bf16 parameters and the 226,980,352 outside the layers (Table VI:
 * 692.1 MiB with K = 2). */
Test(xstage, vision_weight_offload)
{
    for (uint32_t K = 1; K <= 2; K++) {
        run r;
        char sched[96];
        snprintf(sched, sizeof sched, "{\"name\": \"nova\", \"vision_resident_layers\": %u}", K);
        cr_assert_eq(run_config(&r, sched, 1, 2, 1.0), CZ_OK, "%s", r.err.msg);
        const cz_stage_card *v = &r.cfg.model.stages[r.cfg.model.pipe[0].stage];
        double c = 67926784.0 * 2 / r.cfg.hw.host_link_Bps;
        double tv = vision_s(&r, 1.0);
        cr_assert(c < tv / v->layers);
        double want = K == 1 ? tv + (v->layers - 1) * c : tv;
        cr_assert_float_eq(r.m.req[0].first_sched_s, want, 1e-9, "K %u: %.9f vs %.9f", K,
                           r.m.req[0].first_sched_s, want);
        cr_assert_float_eq(r.st.vision_stall_sum_s, want - tv, 1e-9);
        cr_assert_float_eq(r.st.vision_resident_bytes, (226980352.0 + K * 67926784.0) * 2, 1e-3);
        run_free(&r);
    }
}

/* The Multi-Stream baseline: Nova's order with no partition; co-running steps run at the
 * speeds Table IV implies (vision 0.864, decode 0.204 of alone). */
Test(xstage, multi_stream_corun_speeds)
{
    run r;
    cr_assert_eq(run_config(&r, "{\"name\": \"nova\", \"multi_stream\": true}", 2, 2, 1e6), CZ_OK,
                 "%s", r.err.msg);
    const cz_req_record *a = &r.m.req[0], *b = &r.m.req[1];
    double t0 = vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    NEAR(a->first_token_s, t0);
    NEAR(a->finish_s, t0 + decode_s(&r, 1, 1, 1.0) / r.cfg.xs.ms_decode_speed);
    NEAR(b->first_sched_s, t0 + vision_s(&r, 1.0) / r.cfg.xs.ms_excl_speed);
    cr_assert_float_eq(r.cfg.xs.ms_excl_speed, 588.3 / 680.6, 1e-12);
    cr_assert_float_eq(r.cfg.xs.ms_decode_speed, 138.6 / 680.6, 1e-9);
    run_free(&r);
}

/* The co-run contention factor stretches both partitioned steps that run side by side. */
Test(xstage, corun_slowdown)
{
    run r;
    cr_assert_eq(run_config(&r, "{\"name\": \"nova\", \"corun_slowdown\": 1.5}", 2, 2, 1e6),
                 CZ_OK, "%s", r.err.msg);
    double t0 = vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    NEAR(r.m.req[0].finish_s, t0 + 1.5 * decode_s(&r, 1, 1, 24.0 / 84));
    NEAR(r.m.req[1].first_sched_s, t0 + 1.5 * vision_s(&r, 60.0 / 84));
    run_free(&r);
}

/* The weights offload frees go to the LLM's KV: with K = 62 of 63 layers resident, one
 * layer, 135,853,568 bytes, is 3,316 tokens of 40,960 bytes. With one 16-token block a
 * request of 3,332 tokens (1,602 image, 1,728 text, 2 out) fits and one of 3,333 does not;
 * without offload neither does. */
Test(xstage, offload_frees_kv_for_the_llm)
{
    const char *scheds[] = {"{\"name\": \"nova\", \"vision_resident_layers\": 62}",
                            "\"nova\""};
    for (int k = 0; k < 2; k++) {
        for (unsigned text = 1728; text <= 1729; text++) {
            char json[640];
            snprintf(json, sizeof json,
                     "{\"model\": \"cogagent-9b\", \"hardware\": \"rtx-a6000\","
                     " \"scheduler\": %s, \"server\": {\"kv_blocks\": 1},"
                     " \"workload\": {\"synthetic\": {\"requests\": 1, \"image_tokens\": 1602,"
                     " \"input_tokens\": %u, \"output_tokens\": 2},"
                     " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 1}}}",
                     scheds[k], text);
            run r;
            cJSON *j = cJSON_Parse(json);
            cr_assert(j != NULL);
            cz_err_clear(&r.err);
            cz_workload_init(&r.wl);
            cz_metrics_init(&r.m, 0.0, 0);
            cr_assert_eq(cz_config_parse(j, "t", ".", &r.cfg, &r.wl, &r.err), CZ_OK, "%s",
                         r.err.msg);
            cJSON_Delete(j);
            cr_assert_eq(cz_sim_run(&r.cfg, &r.wl, &r.m, &r.st, NULL, NULL, &r.err), CZ_OK, "%s",
                         r.err.msg);
            uint32_t want = k == 0 && text == 1728 ? CZ_REQ_COMPLETED : CZ_REQ_REJECTED;
            cr_assert_eq(r.m.req[0].outcome, want, "%s, %u text tokens", scheds[k], text);
            run_free(&r);
        }
    }
}

/* Table V's quantities on a hand-timed run: requests at 0, 0.5 and 10 s, two output tokens
 * each. Request 0 runs alone (vision, then prefill: S0 = Tv + Tp on all 84 SMs); request 1
 * waits for it until t0 = S0 and encodes beside request 0's decode (vision on 60 SMs), then
 * prefills alone (S1 = Tv(60) + Tp); request 2 finds the GPU idle (S2 = S0). The wait for
 * the vision worker is (t0 - 0.5) / 3 on average; the arrival rate 2 / 10 s; Eq. 6 on the
 * mean service, M/D/1 and with the second moment. */
Test(xstage, vision_queue_service_and_md1)
{
    run r;
    cr_assert_eq(parse_config(&r, "\"nova\"", 3, 2, 1.0), CZ_OK, "%s", r.err.msg);
    const double at[3] = {0.0, 0.5, 10.0};
    for (int i = 0; i < 3; i++)
        r.wl.turns[i].arrival_s = at[i];
    cr_assert_eq(cz_sim_run(&r.cfg, &r.wl, &r.m, &r.st, NULL, NULL, &r.err), CZ_OK, "%s",
                 r.err.msg);
    double s0 = vision_s(&r, 1.0) + prefill_s(&r, 1.0);
    double s1 = vision_s(&r, 60.0 / 84) + prefill_s(&r, 1.0);
    NEAR(r.m.req[1].first_sched_s, s0 + vision_s(&r, 60.0 / 84));
    NEAR(r.st.vision_wait_sum_s, s0 - 0.5);
    cr_assert_eq(r.st.service_n, 3);
    NEAR(r.st.service_sum_s, 2 * s0 + s1);
    NEAR(r.st.service_sq_sum_s2, 2 * s0 * s0 + s1 * s1);
    NEAR(r.st.arrival_rate_rps, 0.2);
    /* the summary */
    cz_summary sum;
    cz_metrics_summarize(&r.m, &r.cfg.slo, &sum);
    cJSON *j = cz_summary_json(&sum);
    cz_run_summary_json(&r.cfg, &r.m, &r.st, &sum, j);
    double mean = (2 * s0 + s1) / 3, second = (2 * s0 * s0 + s1 * s1) / 3, rho = 0.2 * mean;
#define KEY(k) cJSON_GetObjectItemCaseSensitive(j, k)->valuedouble
    NEAR(KEY("mean_vision_queue_ms"), 1e3 * (s0 - 0.5) / 3);
    NEAR(KEY("mean_vision_service_ms"), 1e3 * mean);
    NEAR(KEY("vision_utilization"), rho);
    NEAR(KEY("md1_vision_queue_ms"), 1e3 * rho * mean / (2 * (1 - rho)));
    NEAR(KEY("mg1_vision_queue_ms"), 1e3 * 0.2 * second / (2 * (1 - rho)));
#undef KEY
    cr_assert(0.2 < rho && rho < 0.25, "rho %f", rho);
    cJSON_Delete(j);
    run_free(&r);
}

/* ---- the runtime driven from a script ---- */

/* What the runtime asked of the script's driver: the steps it started (copied), the
 * arrival timers it set. */
typedef struct seen_step {
    cz_xs_step s; /* its arrays point into the copies below */
    uint32_t reqs[8], chunk_reqs[8], chunk_tokens[8];
    double now;
} seen_step;

typedef struct script {
    seen_step steps[64];
    uint32_t n_steps, next_step; /* next_step: the first not yet checked */
    double timers[8];
    uint32_t n_timers;
} script;

static void script_start(void *ctx, const cz_xs_step *s, double now)
{
    script *sc = ctx;
    cr_assert(sc->n_steps < 64 && s->n_reqs <= 8 && s->n_chunks <= 8);
    seen_step *k = &sc->steps[sc->n_steps++];
    k->s = *s;
    k->now = now;
    if (s->n_reqs)
        memcpy(k->reqs, s->reqs, s->n_reqs * sizeof *s->reqs);
    if (s->n_chunks) {
        memcpy(k->chunk_reqs, s->chunk_reqs, s->n_chunks * sizeof *s->chunk_reqs);
        memcpy(k->chunk_tokens, s->chunk_tokens, s->n_chunks * sizeof *s->chunk_tokens);
    }
    k->s.reqs = k->reqs;
    k->s.chunk_reqs = k->chunk_reqs;
    k->s.chunk_tokens = k->chunk_tokens;
}

static void script_timer(void *ctx, double t)
{
    script *sc = ctx;
    cr_assert(sc->n_timers < 8);
    sc->timers[sc->n_timers++] = t;
}

/* The next step the runtime started: of work `w` on `sms` of the 84 SMs for `pred_s`. */
static const cz_xs_step *next_step(script *sc, cz_xs_work w, uint32_t sms, double pred_s)
{
    cr_assert(sc->next_step < sc->n_steps, "no step %u was started", sc->next_step);
    const cz_xs_step *s = &sc->steps[sc->next_step++].s;
    cr_assert_eq(s->work, w, "step %u: work %d, expected %d", sc->next_step - 1, s->work, w);
    cr_assert_eq(s->sms, sms, "step %u: %u SMs, expected %u", sc->next_step - 1, s->sms, sms);
    NEAR(s->share, sms / 84.0);
    NEAR(s->predicted_s, pred_s);
    return s;
}

static cz_xstage *script_create(run *r, script *sc)
{
    memset(sc, 0, sizeof *sc);
    cz_xs_driver drv = {.ctx = sc, .start = script_start, .timer = script_timer};
    cz_xstage *x;
    cr_assert_eq(cz_xstage_create(&r->cfg, &r->wl, &r->m, &r->st, &drv, &x, &r->err), CZ_OK,
                 "%s", r->err.msg);
    return x;
}

/* Nova with two requests a microsecond apart, two output tokens each, the script playing
 * the driver: each step's end is reported at its start plus its predicted time, as the
 * simulator does, and the records match nova_stage_order_and_partition's. */
Test(xstage, runtime_scripted_nova)
{
    run r;
    cr_assert_eq(parse_config(&r, "\"nova\"", 2, 2, 1e6), CZ_OK, "%s", r.err.msg);
    script sc;
    cz_xstage *x = script_create(&r, &sc);
    cr_assert_eq(cz_xstage_requests(x), 2);
    cz_xstage_start(x);
    cr_assert_eq(sc.n_timers, 1);
    cr_assert_eq(sc.n_steps, 0);
    double a0 = sc.timers[0];
    cz_xstage_arrival(x, a0);
    /* request 0 encodes on the whole GPU; the next arrival is a timer */
    const cz_xs_step *s = next_step(&sc, CZ_XS_VISION, 84, vision_s(&r, 1.0));
    cr_assert_eq(s->req, 0);
    cr_assert_eq(s->tokens, IMAGE);
    NEAR(s->factor, 1.0);
    cr_assert_eq(sc.n_timers, 2);
    double a1 = sc.timers[1];
    cr_assert(a1 > a0);
    cz_xs_req_info q = cz_xstage_req(x, 0);
    cr_assert(q.in_tokens == IN && q.out_tokens == 2 && q.image_tokens == IMAGE);
    cr_assert(q.prefilled == 0 && q.generated == 0 && q.rec == 0 && !q.ended);
    cr_assert_eq(cz_xstage_req(x, 1).rec, UINT64_MAX);
    /* request 1 arrives while vision is busy: nothing starts, no timer is left */
    cz_xstage_arrival(x, a1);
    cr_assert_eq(sc.n_steps, 1);
    cr_assert_eq(sc.n_timers, 2);
    /* prefill above vision: request 0's prefill, alone on the GPU */
    double t = a0 + vision_s(&r, 1.0);
    cz_xstage_excl_done(x, t);
    s = next_step(&sc, CZ_XS_PREFILL, 84, prefill_s(&r, 1.0));
    cr_assert(s->req == 0 && s->tokens == IN);
    t += prefill_s(&r, 1.0);
    cz_xstage_excl_done(x, t);
    /* its first token: request 1's vision on 60 SMs, then request 0's decode on 24 beside
     * it (one request pending) */
    q = cz_xstage_req(x, 0);
    cr_assert(q.prefilled == IN && q.generated == 1 && q.context_tokens == IN + 1);
    s = next_step(&sc, CZ_XS_VISION, 60, vision_s(&r, 60.0 / 84));
    cr_assert_eq(s->req, 1);
    double v_end = t + s->predicted_s;
    s = next_step(&sc, CZ_XS_DECODE, 24, decode_s(&r, 1, 1, 24.0 / 84));
    cr_assert(s->n_reqs == 1 && s->reqs[0] == 0 && s->tokens == 1 && s->req == UINT32_MAX);
    cz_xstage_decode_done(x, t + s->predicted_s);
    uint64_t arrived, finished;
    cz_xstage_counts(x, &arrived, &finished);
    cr_assert(arrived == 2 && finished == 1);
    cr_assert(cz_xstage_req(x, 0).ended);
    cr_assert_eq(sc.n_steps, 4); /* nothing to decode, vision busy */
    cz_xstage_excl_done(x, v_end);
    s = next_step(&sc, CZ_XS_PREFILL, 84, prefill_s(&r, 1.0));
    cz_xstage_excl_done(x, v_end + s->predicted_s);
    t = v_end + s->predicted_s;
    s = next_step(&sc, CZ_XS_DECODE, 84, decode_s(&r, 1, 1, 1.0));
    cz_xstage_decode_done(x, t + s->predicted_s);
    cr_assert_eq(sc.n_steps, 6);
    cr_assert_eq(cz_xstage_finish(x, false, t + s->predicted_s, &r.err), CZ_OK, "%s", r.err.msg);
    cz_metrics_finish(&r.m);
    cr_assert_eq(cz_metrics_check(&r.m, &r.err), CZ_OK, "%s", r.err.msg);
    cz_xstage_free(x);
    /* the simulator gives the same records */
    run d;
    cr_assert_eq(run_config(&d, "\"nova\"", 2, 2, 1e6), CZ_OK, "%s", d.err.msg);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(r.m.req[i].outcome, CZ_REQ_COMPLETED);
        cr_assert(r.m.req[i].first_sched_s == d.m.req[i].first_sched_s &&
                  r.m.req[i].first_token_s == d.m.req[i].first_token_s &&
                  r.m.req[i].finish_s == d.m.req[i].finish_s, "request %d", i);
    }
    cr_assert(r.st.decode_steps == d.st.decode_steps && r.st.vision_starts == d.st.vision_starts);
    NEAR(r.st.decode_share_sum, d.st.decode_share_sum);
    run_free(&d);
    run_free(&r);
}

/* Chunked prefill from a script: each hybrid step carries the request's next chunk of at
 * most the budget, starting where its prefill stands, and then its decodes. */
Test(xstage, runtime_scripted_chunked)
{
    run r;
    cr_assert_eq(parse_config(&r, "{\"name\": \"chunked_prefill\", \"token_budget\": 512}", 1,
                              3, 1.0),
                 CZ_OK, "%s", r.err.msg);
    script sc;
    cz_xstage *x = script_create(&r, &sc);
    cz_xstage_start(x);
    double t = sc.timers[0];
    cz_xstage_arrival(x, t);
    const cz_xs_step *s = next_step(&sc, CZ_XS_VISION, 84, vision_s(&r, 1.0));
    t += s->predicted_s;
    cz_xstage_excl_done(x, t);
    for (uint32_t done = 0; done < IN;) {
        uint32_t c = IN - done < 512 ? IN - done : 512;
        cr_assert_eq(cz_xstage_req(x, 0).prefilled, done);
        cz_batch_shape b = {.prefill_tokens = c, .prefill_seqs = 1,
                            .prefill_attn_ctx = (uint64_t)c * done + (uint64_t)c * (c + 1) / 2};
        s = next_step(&sc, CZ_XS_HYBRID, 84, step_s(&r, 1, b, 1.0));
        cr_assert(s->n_reqs == 0 && s->n_chunks == 1 && s->chunk_reqs[0] == 0);
        cr_assert(s->chunk_tokens[0] == c && s->tokens == c);
        t += s->predicted_s;
        cz_xstage_excl_done(x, t);
        done += c;
    }
    for (uint32_t g = 1; g < 3; g++) {
        cz_xs_req_info q = cz_xstage_req(x, 0);
        cr_assert(q.prefilled == IN && q.generated == g && q.context_tokens == IN + g);
        s = next_step(&sc, CZ_XS_HYBRID, 84, decode_s(&r, 1, g, 1.0));
        cr_assert(s->n_reqs == 1 && s->reqs[0] == 0 && s->n_chunks == 0 && s->tokens == 1);
        t += s->predicted_s;
        cz_xstage_excl_done(x, t);
    }
    cr_assert_eq(sc.n_steps, sc.next_step);
    cr_assert(cz_xstage_req(x, 0).ended);
    cr_assert_eq(cz_xstage_finish(x, false, t, &r.err), CZ_OK, "%s", r.err.msg);
    NEAR(r.m.req[0].finish_s, t);
    cz_xstage_free(x);
    run_free(&r);
}

/* Every request ends in one outcome: a run that drained with one open is a bug named by
 * the request and where it stands; cut by the clock, what is open (arrived or not) is
 * unfinished at max_time_s. */
Test(xstage, runtime_finish_outcomes)
{
    for (int cut = 0; cut < 2; cut++) {
        run r;
        cr_assert_eq(parse_config(&r, "\"nova\"", 2, 2, 1.0), CZ_OK, "%s", r.err.msg);
        r.cfg.max_time_s = 0.5;
        script sc;
        cz_xstage *x = script_create(&r, &sc);
        cz_xstage_start(x);
        cz_xstage_arrival(x, sc.timers[0]);
        cr_assert_eq(sc.n_steps, 1);
        cz_status st = cz_xstage_finish(x, cut, sc.timers[0], &r.err);
        if (!cut) {
            cr_assert_eq(st, CZ_EINTERNAL);
            cr_assert(strstr(r.err.msg, "request 0 open (arrived, prefilled 0 of 1702"), "%s",
                      r.err.msg);
        } else {
            cr_assert_eq(st, CZ_OK, "%s", r.err.msg);
            cr_assert_eq(r.m.req[0].outcome, CZ_REQ_UNFINISHED);
            cr_assert_eq(r.st.arrivals, 1);
            cz_metrics_finish(&r.m);
            cr_assert_eq(cz_metrics_check(&r.m, &r.err), CZ_OK, "%s", r.err.msg);
        }
        cz_xstage_free(x);
        run_free(&r);
    }
}
