/* cz_sched_bros.c - BROS's hybrid real-time / best-effort scheduler (Efficient LLM Serving
 * on Hybrid Real-time and Best-effort Requests, "SLO-Aware Preemptive Scheduling" and
 * "Adaptive Batch Sizing").
 *
 * Real-time requests (class rt) are sorted by residual time to their SLO deadline — the
 * first token's (ready + rt_ttft) until it comes, then the next token's (last token +
 * rt_tpot) — and packed first; best-effort requests fill the rest in FCFS order, up to a
 * batch-size cap. The cap starts at base_batch (128), doubles while no real-time request
 * is urgent (residual below twice the predicted step time), and falls back to the base at
 * once when the predicted step time of the batch exceeds the most urgent residual. The
 * prediction is BROS's linear cost model over the batch's input and context lengths
 * (cz_bros_step_s), whose coefficients the driver fits to the stage's cost model. A waiting
 * real-time request may take a running best-effort request's slot and blocks: the core
 * preempts best-effort work for it (class_priority), and never the other way round. */
#include <math.h>

#include "cz_policies.h"
#include "cz_policies_int.h"

static double residual_s(const cz_policy_params *p, const cz_seq *q, double now_s)
{
    double deadline = q->generated == q->turn_generated_base ? q->turn_ready_s + p->rt_ttft_s
                                                             : q->last_token_s + p->rt_tpot_s;
    return deadline - now_s;
}

double cz_bros_step_s(const cz_policy_params *p, double prefill_tokens, double decode_seqs,
                      double decode_ctx_tokens, double prefill_attn_ctx)
{
    return p->step_s[0] + p->step_s[1] * prefill_tokens + p->step_s[2] * decode_seqs +
           p->step_s[3] * decode_ctx_tokens + p->step_s[4] * prefill_attn_ctx;
}

/* Packs the ordered candidates up to `cap` sequences: real-time ones first, which may count
 * the running slots and blocks of best-effort candidates as theirs (SLO-aware preemptive
 * scheduling: the core preempts best-effort work for them), then best-effort ones in what
 * is left. Returns the packed batch's predicted step time. */
static double pack(const cz_policy_params *p, const cz_sched_ctx *ctx, cz_cand *c, uint32_t n,
                   uint32_t cap)
{
    cz__budget b;
    cz__budget_init(&b, ctx);
    uint32_t be_slots = 0, be_blocks = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (c[i].group == 1 && c[i].running) {
            be_slots++;
            be_blocks += ctx->seqs[c[i].seq].blocks;
        }
    }
    double prefill = 0, decodes = 0, dctx = 0, pctx = 0;
    for (uint32_t i = 0; i < n; i++) {
        c[i].take = 0;
        if (b.seqs >= cap)
            continue;
        bool took;
        if (c[i].group == 0 && !c[i].running) {
            /* a waiting real-time request: best-effort slots and blocks are its budget too */
            cz__budget aug = b;
            aug.slots += be_slots;
            aug.blocks += be_blocks;
            took = cz__take(ctx, &aug, &c[i]);
            if (took) {
                uint32_t slots_used = b.slots + be_slots - aug.slots;
                uint32_t blocks_used = b.blocks + be_blocks - aug.blocks;
                uint32_t from_slots = slots_used < b.slots ? slots_used : b.slots;
                uint32_t from_blocks = blocks_used < b.blocks ? blocks_used : b.blocks;
                be_slots -= slots_used - from_slots;
                be_blocks -= blocks_used - from_blocks;
                b.slots -= from_slots;
                b.blocks -= from_blocks;
                b.tokens = aug.tokens;
                b.seqs = aug.seqs;
            }
        } else {
            took = cz__take(ctx, &b, &c[i]);
        }
        if (!took)
            continue;
        const cz_seq *q = &ctx->seqs[c[i].seq];
        double pos = (double)q->computed;
        if (c[i].decode && c[i].running) {
            decodes += 1;
            dctx += pos + 1;
        } else {
            double t = (double)c[i].take;
            prefill += t;
            pctx += t * pos + t * (t + 1) / 2;
        }
    }
    return cz_bros_step_s(p, prefill, decodes, dctx, pctx);
}

static uint32_t bros_select(const void *state, const cz_sched_ctx *ctx, cz_cand *c, uint32_t n)
{
    const cz_policy_params *p = state;
    double most_urgent = INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = &ctx->seqs[c[i].seq];
        if (q->cls == 0) { /* real-time */
            c[i].group = 0;
            c[i].key = residual_s(p, q, ctx->now_s);
            if (c[i].key < most_urgent)
                most_urgent = c[i].key;
        } else {
            c[i].group = 1;
            c[i].key = 0;
        }
    }
    cz__cands_sort(c, n);
    uint32_t cap = ctx->batch_cap ? ctx->batch_cap : p->base_batch;
    double predicted = pack(p, ctx, c, n, cap);
    if (predicted > most_urgent && cap > p->base_batch) {
        /* aggressive backoff: the batch would miss the most urgent deadline */
        cap = p->base_batch;
        pack(p, ctx, c, n, cap);
        return cap;
    }
    if (!(most_urgent < 2.0 * predicted)) {
        /* gradual expansion while nothing real-time is urgent */
        uint32_t next = cap * 2;
        return next < ctx->seq_cap ? next : ctx->seq_cap;
    }
    return cap;
}

const cz_sched_ops cz_sched_bros = {
    .name = "bros",
    .select = bros_select,
    .class_priority = true,
};
