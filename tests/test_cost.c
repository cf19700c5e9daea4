/* test_cost.c - the roofline cost model against hand computations: every expected value is
 * written out from the formulas in docs/cost-model.md with the card's numbers as literals,
 * never by calling the function under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_models.h"
#include "cz_version.h"

static const char *root(void)
{
    const char *r = getenv("CZ_SOURCE_ROOT");
    return r && r[0] ? r : CZ_SOURCE_ROOT;
}

static cz_model_card model(const char *name_or_rel)
{
    char p[4096];
    const char *arg = name_or_rel;
    if (strchr(name_or_rel, '/')) {
        snprintf(p, sizeof p, "%s/%s", root(), name_or_rel);
        arg = p;
    }
    cz_model_card m;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_model_card_load(arg, &m, &err), CZ_OK, "%s", err.msg);
    return m;
}

static cz_hw_card hw(const char *name_or_rel)
{
    char p[4096];
    const char *arg = name_or_rel;
    if (strchr(name_or_rel, '/')) {
        snprintf(p, sizeof p, "%s/%s", root(), name_or_rel);
        arg = p;
    }
    cz_hw_card h;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_hw_card_load(arg, &h, &err), CZ_OK, "%s", err.msg);
    return h;
}

static const cz_stage_card *stage(const cz_model_card *m, const char *name)
{
    const cz_stage_card *s = cz_model_card_stage(m, name);
    cr_assert_not_null(s);
    return s;
}

#define REL_TOL 1e-12
#define assert_near(got, want)                                                                  \
    cr_assert(fabs((got) - (want)) <= REL_TOL * fabs(want) + 1e-300, "%s = %.17g, expected %.17g", \
              #got, (double)(got), (double)(want))

/* Llama-3-8B from its config: V = 128256, H = 4096, params 8,030,261,248, untied, so the
 * body is params - 2 V H. H100 SXM: 989e12 FLOP/s, 3.35e12 B/s, NVLink 450e9 B/s per
 * direction. Defaults: flops_eff 0.6, bw_eff 0.8, link_eff 0.7, 2 ms, 10 us. */
#define L3_PARAMS 8030261248.0
#define L3_VH (128256.0 * 4096.0)
#define L3_BODY (L3_PARAMS - 2.0 * L3_VH)
#define L3_KV 131072.0 /* 2 x 32 x 8 x 128 x 2 */
#define H100_FLOPS 989e12
#define H100_BW 3.35e12

Test(cost, defaults)
{
    cz_cost_params p = cz_cost_params_default();
    cr_assert_eq(p.flops_eff, 0.6);
    cr_assert_eq(p.bw_eff, 0.8);
    cr_assert_eq(p.link_eff, 0.7);
    cr_assert_eq(p.step_overhead_s, 2e-3);
    cr_assert_eq(p.allreduce_latency_s, 10e-6);
    cr_assert_eq(p.tp, 1);
}

Test(cost, decode_step_is_memory_bound)
{
    cz_model_card m = model("llama-3-8b");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    cz_batch_shape b = {.decode_seqs = 1, .decode_ctx_tokens = 1000};
    cz_step_cost c;
    cz_cost_step(stage(&m, "llm"), &h, &p, &b, &c);

    /* one token: body and LM head once, attention over 1000 positions */
    double flops = 2.0 * L3_BODY * 1 + 2.0 * L3_VH * 1 + 4.0 * 32 * 32 * 128 * 1000;
    /* weights once, KV of 1000 positions read and 1 written, 32 layers of activations */
    double weights = L3_PARAMS * 2.0;
    double bytes = weights + L3_KV * (1000 + 1) + 2.0 * 32 * 4096 * 1 * 2;
    assert_near(c.flops, flops);
    assert_near(c.bytes, bytes);
    assert_near(c.compute_s, flops / (H100_FLOPS * 0.6));
    assert_near(c.memory_s, bytes / (H100_BW * 0.8));
    cr_assert_eq(c.comm_s, 0.0);
    cr_assert(c.memory_s > 10.0 * c.compute_s);
    assert_near(c.total_s, bytes / (H100_BW * 0.8) + 2e-3);
    /* weights dominate: about 6.0 ms of reading plus 2 ms overhead */
    double weights_only = weights / (H100_BW * 0.8) + 2e-3;
    cr_assert(fabs(c.total_s - weights_only) / weights_only < 0.01, "%g vs %g", c.total_s,
              weights_only);
}

Test(cost, large_prefill_is_compute_bound)
{
    cz_model_card m = model("llama-3-8b");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    /* one 8192-token prompt: token i attends to i + 1 positions */
    double ctx = 8192.0 * 8193.0 / 2.0;
    cz_batch_shape b = {.prefill_tokens = 8192, .prefill_attn_ctx = (uint64_t)ctx,
                        .prefill_seqs = 1};
    cz_step_cost c;
    cz_cost_step(stage(&m, "llm"), &h, &p, &b, &c);

    double flops = 2.0 * L3_BODY * 8192 + 2.0 * L3_VH * 1 + 4.0 * 32 * 32 * 128 * ctx;
    double bytes = L3_PARAMS * 2.0 + L3_KV * (ctx / 8192.0 * 1 + 8192) + 2.0 * 32 * 4096 * 8192 * 2;
    assert_near(c.flops, flops);
    assert_near(c.bytes, bytes);
    cr_assert(c.compute_s > 5.0 * c.memory_s);
    assert_near(c.total_s, flops / (H100_FLOPS * 0.6) + 2e-3);
}

Test(cost, tensor_parallel_halves_weights_and_adds_allreduce)
{
    cz_model_card m = model("llama-3-8b");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p1 = cz_cost_params_default();
    cz_cost_params p2 = p1;
    p2.tp = 2;
    cz_batch_shape b = {.decode_seqs = 8, .decode_ctx_tokens = 8 * 512};
    cz_step_cost c1, c2;
    cz_cost_step(stage(&m, "llm"), &h, &p1, &b, &c1);
    cz_cost_step(stage(&m, "llm"), &h, &p2, &b, &c2);

    double act = 2.0 * 32 * 4096 * 8 * 2; /* replicated on every GPU */
    double weights1 = L3_PARAMS * 2.0, weights2 = L3_PARAMS * 2.0 / 2;
    double kv1 = L3_KV * (4096 + 8), kv2 = L3_KV / 2 * (4096 + 8);
    assert_near(c1.bytes, weights1 + kv1 + act);
    assert_near(c2.bytes, weights2 + kv2 + act);
    assert_near(c2.bytes - kv2 - act, (c1.bytes - kv1 - act) / 2);

    double flops1 = 2.0 * L3_BODY * 8 + 2.0 * L3_VH * 8 + 4.0 * 32 * 32 * 128 * 4096;
    assert_near(c2.flops, flops1 / 2);

    /* 2 all-reduces x 32 layers of 8 tokens x 4096 x 2 bytes, ring over 2 GPUs */
    double payload = 8.0 * 4096 * 2;
    double comm = 2.0 * 32 * (10e-6 + 2.0 * (2 - 1) / 2 * payload / (450e9 * 0.7));
    cr_assert_eq(c1.comm_s, 0.0);
    assert_near(c2.comm_s, comm);
    double mem2 = (weights2 + kv2 + act) / (H100_BW * 0.8);
    assert_near(c2.total_s, mem2 + comm + 2e-3);
}

Test(cost, empty_batch_costs_nothing)
{
    cz_model_card m = model("llama-3-8b");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    p.tp = 4;
    cz_batch_shape b = {.decode_ctx_tokens = 0};
    cz_step_cost c;
    memset(&c, 0xff, sizeof c);
    cz_cost_step(stage(&m, "llm"), &h, &p, &b, &c);
    cr_assert_eq(c.flops, 0.0);
    cr_assert_eq(c.bytes, 0.0);
    cr_assert_eq(c.compute_s, 0.0);
    cr_assert_eq(c.memory_s, 0.0);
    cr_assert_eq(c.comm_s, 0.0);
    cr_assert_eq(c.total_s, 0.0);
}

Test(cost, host_transfer)
{
    cz_hw_card h = hw("h100-sxm");
    /* 10 us + 1 GB at 50 GB/s */
    assert_near(cz_cost_host_transfer_s(&h, 1e9), 10e-6 + 1e9 / 50e9);
    cz_hw_card a = hw("a100-80gb");
    assert_near(cz_cost_host_transfer_s(&a, 2.5e6), 10e-6 + 2.5e6 / 25e9);
    cr_assert_eq(cz_cost_host_transfer_s(&h, 0.0), 0.0);
}

/* Qwen3-Omni thinker: 128 experts, 8 per token, each 3 x 2048 x 768 per layer x 48 layers. */
Test(cost, moe_reads_the_experts_it_routes_to)
{
    cz_model_card m = model("qwen3-omni");
    const cz_stage_card *s = stage(&m, "thinker");
    cz_hw_card h = hw("h200");
    cz_cost_params p = cz_cost_params_default();
    double e = 3.0 * 2048 * 768 * 48;
    double active = 3353556992.0, params = 30532646912.0;
    double dense = active - 8 * e;
    double kv = 98304.0; /* 2 x 48 x 4 x 128 x 2 */
    cz_step_cost c;

    /* one token: exactly its 8 experts */
    cz_batch_shape one = {.decode_seqs = 1};
    cz_cost_step(s, &h, &p, &one, &c);
    assert_near(c.bytes, active * 2 + kv * 1 + 2.0 * 48 * 2048 * 1 * 2);

    /* two tokens: expected distinct experts 128 (1 - (120/128)^2) = 15.5 */
    cz_batch_shape two = {.decode_seqs = 2};
    cz_cost_step(s, &h, &p, &two, &c);
    assert_near(c.bytes, (dense + 15.5 * e) * 2 + kv * 2 + 2.0 * 48 * 2048 * 2 * 2);

    /* a large batch touches every expert: the whole model */
    cz_batch_shape many = {.decode_seqs = 4096};
    cz_cost_step(s, &h, &p, &many, &c);
    double weights = c.bytes - kv * 4096 - 2.0 * 48 * 2048 * 4096 * 2;
    cr_assert(fabs(weights - params * 2) / (params * 2) < 1e-9, "%.17g", weights);

    /* FLOPs: body (active minus the embedding and the untied head) per token */
    double vh = 152064.0 * 2048;
    assert_near(c.flops, 2.0 * (active - 2 * vh) * 4096 + 2.0 * vh * 4096);
}

Test(cost, vocoder_uses_its_per_frame_cost)
{
    cz_model_card m = model("qwen3-omni");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    cz_batch_shape b = {.prefill_tokens = 10};
    cz_step_cost c;
    cz_cost_step(stage(&m, "code2wav"), &h, &p, &b, &c);
    assert_near(c.flops, 5.11e9 * 10);
    /* no KV cache, no LM head: weights + activations */
    assert_near(c.bytes, 216016577.0 * 2 + 2.0 * 8 * 1024 * 10 * 2);
}

Test(cost, encoder_has_no_head_and_no_kv)
{
    cz_model_card m = model("qwen3-omni");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    /* 100 audio tokens attending to each other */
    cz_batch_shape b = {.prefill_tokens = 100, .prefill_attn_ctx = 100 * 100, .prefill_seqs = 1};
    cz_step_cost c;
    cz_cost_step(stage(&m, "audio_encoder"), &h, &p, &b, &c);
    assert_near(c.flops, 2.0 * 647927168 * 100 + 4.0 * 32 * 20 * 64 * 10000);
    assert_near(c.bytes, 647927168.0 * 2 + 2.0 * 32 * 1280 * 100 * 2);
}

/* The tiny fixture: layers 2, hidden 64, heads 4 of 16, kv_heads 2, vocab 100, params 1e6;
 * embedding 6400 and untied head 6400, body 987,200; KV 2 x 2 x 2 x 16 x 2 = 256 B/token.
 * tiny-gpu: 1e14 FLOP/s, 1e12 B/s, host 1e10 B/s, interconnect 1e11 B/s. */
Test(cost, mixed_batch_counts_prefill_sequences)
{
    cz_model_card m = model("tests/data/cards/override/cards/tiny.json");
    cz_hw_card h = hw("tests/data/cards/override/hw/tiny-gpu.json");
    cz_cost_params p = cz_cost_params_default();
    cz_batch_shape b = {.prefill_tokens = 30, .prefill_attn_ctx = 600, .prefill_seqs = 3,
                        .decode_seqs = 2, .decode_ctx_tokens = 50};
    cz_step_cost c;
    cz_cost_step(stage(&m, "llm"), &h, &p, &b, &c);
    /* 32 tokens; 5 sequences sample a token (2 decoding + 3 prefill chunks) */
    double flops = 2.0 * 987200 * 32 + 2.0 * 100 * 64 * 5 + 4.0 * 2 * 4 * 16 * (600 + 50);
    /* KV: 50 decode positions, 3 chunks x mean context 20, 32 new tokens */
    double bytes = 1e6 * 2 + 256.0 * (50 + 600.0 / 30 * 3 + 32) + 2.0 * 2 * 64 * 32 * 2;
    assert_near(c.flops, flops);
    assert_near(c.bytes, bytes);
    assert_near(c.total_s, fmax(flops / (1e14 * 0.6), bytes / (1e12 * 0.8)) + 2e-3);

    /* prefill_seqs 0 reads as one chunk */
    cz_batch_shape b0 = b;
    b0.prefill_seqs = 0;
    cz_cost_step(stage(&m, "llm"), &h, &p, &b0, &c);
    assert_near(c.flops, flops - 2.0 * 100 * 64 * 2);
    assert_near(c.bytes, bytes - 256.0 * 600.0 / 30 * 2);

    /* tp 4 over 2 KV heads: each GPU keeps one KV head (128 B/token) */
    cz_cost_params p4 = p;
    p4.tp = 4;
    cz_cost_step(stage(&m, "llm"), &h, &p4, &b, &c);
    assert_near(c.bytes, 1e6 * 2 / 4 + 128.0 * (50 + 60 + 32) + 2.0 * 2 * 64 * 32 * 2);
    double payload = 32.0 * 64 * 2;
    assert_near(c.comm_s, 2.0 * 2 * (10e-6 + 2.0 * 3 / 4 * payload / (1e11 * 0.7)));
}

Test(cost, more_context_costs_more)
{
    cz_model_card m = model("llama-2-70b");
    cz_hw_card h = hw("a100-80gb");
    cz_cost_params p = cz_cost_params_default();
    p.tp = 8;
    double prev = 0.0;
    for (uint64_t ctx = 0; ctx <= 1u << 20; ctx += 1u << 17) {
        cz_batch_shape b = {.decode_seqs = 64, .decode_ctx_tokens = ctx};
        cz_step_cost c;
        cz_cost_step(stage(&m, "llm"), &h, &p, &b, &c);
        cr_assert(c.total_s > prev);
        prev = c.total_s;
    }
}

/* ---- the config's "cost" object -------------------------------------------------------- */

static cz_status parse(const char *text, cz_cost_params *p, cz_err *err)
{
    cJSON *j = NULL;
    cr_assert_eq(cz_json_parse(text, "cfg", &j, err), CZ_OK, "%s", err->msg);
    cz_status st = cz_cost_params_parse(j, "exp.json: cost", p, err);
    cJSON_Delete(j);
    return st;
}

Test(cost, params_parse)
{
    cz_err err;
    cz_err_clear(&err);
    cz_cost_params p = cz_cost_params_default();
    cr_assert_eq(parse("{\"flops_eff\":0.5,\"tp\":4,\"step_overhead_s\":0}", &p, &err), CZ_OK,
                 "%s", err.msg);
    cr_assert_eq(p.flops_eff, 0.5);
    cr_assert_eq(p.tp, 4);
    cr_assert_eq(p.step_overhead_s, 0.0);
    cr_assert_eq(p.bw_eff, 0.8); /* untouched keys keep the preloaded defaults */
    cr_assert_eq(p.link_eff, 0.7);
    cr_assert_eq(p.allreduce_latency_s, 10e-6);

    cz_cost_params q = cz_cost_params_default();
    cr_assert_eq(parse("{\"bw_eff\":0.9,\"link_eff\":1,\"allreduce_latency_s\":5e-6}", &q, &err),
                 CZ_OK, "%s", err.msg);
    cr_assert_eq(q.bw_eff, 0.9);
    cr_assert_eq(q.link_eff, 1.0);
    cr_assert_eq(q.allreduce_latency_s, 5e-6);
}

Test(cost, params_parse_errors)
{
    cz_err err;
    cz_err_clear(&err);
    const cz_cost_params d = cz_cost_params_default();
    struct {
        const char *text;
        const char *field;
    } bad[] = {
        {"{\"flop_eff\":0.5}", "unknown field 'flop_eff'"},
        {"{\"flops_eff\":0}", "'flops_eff'"},
        {"{\"bw_eff\":1.5}", "'bw_eff'"},
        {"{\"link_eff\":\"high\"}", "'link_eff'"},
        {"{\"tp\":0}", "'tp'"},
        {"{\"tp\":1.5}", "'tp'"},
        {"{\"step_overhead_s\":-1}", "'step_overhead_s'"},
        {"{\"flops_eff\":0.5,\"allreduce_latency_s\":-1e-6}", "'allreduce_latency_s'"},
        {"[1]", "expected an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cz_cost_params p = d;
        cr_assert_eq(parse(bad[i].text, &p, &err), CZ_EINVAL, "%s", bad[i].text);
        cr_assert(strstr(err.msg, "exp.json: cost") && strstr(err.msg, bad[i].field), "%s",
                  err.msg);
        cr_assert(p.flops_eff == d.flops_eff && p.bw_eff == d.bw_eff && p.link_eff == d.link_eff &&
                      p.step_overhead_s == d.step_overhead_s &&
                      p.allreduce_latency_s == d.allreduce_latency_s && p.tp == d.tp,
                  "params changed on failure: %s", bad[i].text);
    }
}

/* A step on part of the SMs (cz_cost_share_s): compute slows by 1 / share, memory traffic
 * only below bw_sat_sm_fraction, by bw_sat / share; the overhead stays. */
Test(cost, sm_share_scales_compute_and_saturating_bandwidth)
{
    cz_cost_params p = cz_cost_params_default();
    cr_assert_float_eq(p.bw_sat_sm_fraction, 0.4, 1e-15);
    cz_step_cost c = {.compute_s = 0.030, .memory_s = 0.010, .comm_s = 0.001};
    c.total_s = 0.030 + 0.001 + 0.002;
    cr_assert_float_eq(cz_cost_share_s(&c, &p, 1.0), c.total_s, 1e-15);
    /* compute-bound: 0.030 / 0.5 = 0.060; memory 0.010 (0.5 >= 0.4, full bandwidth) */
    cr_assert_float_eq(cz_cost_share_s(&c, &p, 0.5), 0.060 + 0.001 + 0.002, 1e-15);
    /* memory-bound step at 12 of 84 SMs: memory 0.020 x 0.4 / (12/84) = 0.056, compute
     * 0.001 x 7 = 0.007 */
    cz_step_cost d = {.compute_s = 0.001, .memory_s = 0.020, .total_s = 0.022};
    cr_assert_float_eq(cz_cost_share_s(&d, &p, 12.0 / 84), 0.056 + 0.002, 1e-12);
    cz_step_cost empty = {0};
    cr_assert_eq(cz_cost_share_s(&empty, &p, 0.3), 0.0);
    cz_cost_params q = p;
    cz_err err;
    cJSON *j = cJSON_Parse("{\"bw_sat_sm_fraction\": 1.5}");
    cr_assert_eq(cz_cost_params_parse(j, "c", &q, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "bw_sat_sm_fraction"), "%s", err.msg);
    cJSON_Delete(j);
}

/* A stage that makes several passes over its tokens (cosyvoice2's token2wav: 10 Euler
 * steps of its flow-matching ODE) reads its weights and activations and pays the step
 * overhead in each pass; flops_per_token (6.7e9) already counts every pass, the attention
 * is computed in each. One call on 15 new tokens, 3 of lookahead and the 164-token
 * reference: 182 tokens attending causally, 182 x 183 / 2 = 16,653 positions. Vocoders
 * hold no KV. */
Test(cost, passes_of_a_flow_matching_detokenizer)
{
    cz_model_card m = model("cosyvoice2");
    cz_hw_card h = hw("h100-sxm");
    cz_cost_params p = cz_cost_params_default();
    const cz_stage_card *s = stage(&m, "token2wav");
    cr_assert_eq(s->passes, 10);
    cz_batch_shape b = {.prefill_tokens = 182, .prefill_seqs = 1, .prefill_attn_ctx = 16653};
    cz_step_cost c;
    cz_cost_step(s, &h, &p, &b, &c);
    double flops = 6.7e9 * 182 + 4.0 * 56 * 8 * 64 * 16653 * 10;
    double bytes = (1.3e8 * 2 + 2.0 * 56 * 256 * 182 * 2) * 10;
    assert_near(c.flops, flops);
    assert_near(c.bytes, bytes);
    assert_near(c.compute_s, flops / (H100_FLOPS * 0.6));
    assert_near(c.memory_s, bytes / (H100_BW * 0.8));
    cr_assert_eq(c.passes, 10);
    /* compute-bound: 2.09 ms of kernels and 10 x 2 ms of per-pass overhead */
    assert_near(c.total_s, flops / (H100_FLOPS * 0.6) + 10 * 2e-3);
    assert_near(cz_cost_share_s(&c, &p, 1.0), c.total_s);
    /* the same card with one pass pays the overhead once */
    cz_stage_card one = *s;
    one.passes = 1;
    cz_cost_step(&one, &h, &p, &b, &c);
    assert_near(c.total_s, (6.7e9 * 182 + 4.0 * 56 * 8 * 64 * 16653) / (H100_FLOPS * 0.6) + 2e-3);
}

Test(cost, fitted_features_are_the_rooflines_terms)
{
    cz_model_card m = model("llama-3-8b");
    cz_cost_params p = cz_cost_params_default();
    /* a mixed step: 3 decodes over 1000 positions each and a 100-token chunk after 50
     * cached positions */
    cz_batch_shape b = {.decode_seqs = 3, .decode_ctx_tokens = 3000, .prefill_tokens = 100,
                        .prefill_seqs = 1, .prefill_attn_ctx = 100 * 50 + 100 * 101 / 2};
    double x[CZ_CF_N];
    cz_cost_features(stage(&m, "llm"), &p, &b, x);
    double T = 103, ctx = 3000.0 + (100.0 * 50 + 5050);
    assert_near(x[CZ_CF_STEP], 1.0);
    assert_near(x[CZ_CF_SEQ], 4.0);
    assert_near(x[CZ_CF_TOKEN], T);
    /* 103 tokens: matrix products */
    assert_near(x[CZ_CF_LINEAR_FLOP], 2.0 * L3_BODY * T + 2.0 * L3_VH * 4);
    cr_expect_eq(x[CZ_CF_GEMV_FLOP], 0.0);
    assert_near(x[CZ_CF_ATTN_FLOP], 4.0 * 32 * 32 * 128 * ctx);
    assert_near(x[CZ_CF_GEMM_WEIGHT_BYTE], L3_PARAMS * 2.0);
    cr_expect_eq(x[CZ_CF_WEIGHT_BYTE], 0.0);
    /* KV: decode contexts, the chunk's mean context once, the 103 new tokens written */
    assert_near(x[CZ_CF_KV_BYTE], L3_KV * (3000.0 + (100.0 * 50 + 5050) / 100.0 + T));
    /* 3 decodes: matrix-vector kernels */
    cz_batch_shape dec = {.decode_seqs = 3, .decode_ctx_tokens = 3000};
    cz_cost_features(stage(&m, "llm"), &p, &dec, x);
    assert_near(x[CZ_CF_GEMV_FLOP], 2.0 * L3_BODY * 3 + 2.0 * L3_VH * 3);
    cr_expect_eq(x[CZ_CF_LINEAR_FLOP], 0.0);
    assert_near(x[CZ_CF_WEIGHT_BYTE], L3_PARAMS * 2.0);
    cr_expect_eq(x[CZ_CF_GEMM_WEIGHT_BYTE], 0.0);
    cz_batch_shape empty = {0};
    cz_cost_features(stage(&m, "llm"), &p, &empty, x);
    for (int i = 0; i < CZ_CF_N; i++)
        cr_expect_eq(x[i], 0.0);
    cr_expect_str_eq(cz_cost_feature_name(CZ_CF_KV_BYTE), "per_kv_byte_s");
}

Test(cost, fitted_time_scales_with_the_share_as_the_roofline_does)
{
    cz_cost_params p = cz_cost_params_default(); /* bw_sat_sm_fraction 0.4 */
    cz_cost_fit f = {{0}};
    f.theta[CZ_CF_STEP] = 1e-3;
    f.theta[CZ_CF_LINEAR_FLOP] = 1e-12;
    f.theta[CZ_CF_KV_BYTE] = 1e-11;
    double x[CZ_CF_N] = {0};
    x[CZ_CF_STEP] = 1;
    x[CZ_CF_LINEAR_FLOP] = 2e9;
    x[CZ_CF_KV_BYTE] = 1e8;
    assert_near(cz_cost_fit_s(&f, &p, x, 1.0), 1e-3 + 2e-3 + 1e-3);
    /* half the SMs: compute doubles, bandwidth is still saturated (0.5 > 0.4) */
    assert_near(cz_cost_fit_s(&f, &p, x, 0.5), 1e-3 + 4e-3 + 1e-3);
    /* a fifth: compute x5, bandwidth at 0.2 / 0.4 = half */
    assert_near(cz_cost_fit_s(&f, &p, x, 0.2), 1e-3 + 10e-3 + 2e-3);
}

/* The planned decode-only cost (cz_cost_decode_s, the simulator's fast path; and
 * cz_cost_decode_steps, a decode run's) is the roofline's total bit for bit: dense and mixture-of-experts stages, a stage with several
 * passes, tensor parallelism, batches from one sequence to thousands. */
Test(cost, planned_decode_cost_is_bit_identical)
{
    static const char *const models[] = {"llama-3-8b", "llama-2-70b", "qwen3-omni", "moshi",
                                         "cosyvoice2", "opt-13b"};
    static const char *const hws[] = {"h100-sxm", "a100-80gb", "h200"};
    static const uint32_t tps[] = {1, 2, 8};
    uint64_t checked = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        cz_model_card m = model(models[mi]);
        for (uint32_t si = 0; si < m.n_stages; si++) {
            const cz_stage_card *s = &m.stages[si];
            if (s->kind != CZ_STAGE_AR)
                continue;
            for (size_t hi = 0; hi < sizeof hws / sizeof *hws; hi++) {
                cz_hw_card h = hw(hws[hi]);
                for (size_t ti = 0; ti < sizeof tps / sizeof *tps; ti++) {
                    cz_cost_params p = cz_cost_params_default();
                    p.tp = tps[ti];
                    cz_cost_decode d;
                    cz_cost_decode_init(&d, s, &h, &p);
                    for (uint32_t n = 1; n <= 4096; n = n * 3 + 1) {
                        for (uint64_t ctx = n; ctx < (uint64_t)n * 40000; ctx = ctx * 5 + 7) {
                            cz_batch_shape b = {.decode_seqs = n, .decode_ctx_tokens = ctx};
                            cz_step_cost c;
                            cz_cost_step(s, &h, &p, &b, &c);
                            double got = cz_cost_decode_s(&d, n, ctx);
                            cr_assert(memcmp(&got, &c.total_s, sizeof got) == 0,
                                      "%s/%s tp %u, %u seqs, %llu ctx: %.17g != %.17g",
                                      models[mi], s->name, tps[ti], n,
                                      (unsigned long long)ctx, got, c.total_s);
                            checked++;
                        }
                        /* a decode run's steps, each reading n more tokens of KV */
                        double run[9];
                        cz_cost_decode_steps(&d, n, 3 * (uint64_t)n + 1, 9, run);
                        for (uint32_t k = 0; k < 9; k++) {
                            double one = cz_cost_decode_s(&d, n, 3 * (uint64_t)n + 1 + k * n);
                            cr_assert(memcmp(&one, &run[k], sizeof one) == 0);
                        }
                    }
                }
            }
        }
    }
    cr_assert_gt(checked, 1000);
}
