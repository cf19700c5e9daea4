/* cz_sched_bros.c - BROS's hybrid real-time / best-effort scheduler
 * (003_4ea0224bc1b7e235.txt, "SLO-Aware Preemptive Scheduling" and "Adaptive Batch
 * Sizing").
 *
 * Real-time requests (class rt) are sorted by residual time to their SLO deadline — the
 * first token's (ready + rt_ttft) until it comes, then the next token's (last token +
 * rt_tpot) — and packed first; best-effort requests fill the rest in FCFS order, up to a
 * batch-size cap. The cap starts at base_batch (128), doubles while no real-time request
 * is urgent (residual below twice the predicted step time), and falls back to the base at
 * once when the predicted step time of the batch exceeds the most urgent residual. The
 * prediction is BROS's linear cost model, a + b x tokens, whose coefficients the driver
 * fits to the stage's cost model. */
#include <math.h>

#include "cz_policies.h"
#include "cz_policies_int.h"

static double residual_s(const cz_policy_params *p, const cz_seq *q, double now_s)
{
    double deadline = q->generated == q->turn_generated_base ? q->turn_ready_s + p->rt_ttft_s
                                                             : q->last_token_s + p->rt_tpot_s;
    return deadline - now_s;
}

/* Packs the ordered candidates up to `cap` sequences; returns the tokens taken. */
static uint64_t pack(const cz_sched_ctx *ctx, cz_cand *c, uint32_t n, uint32_t cap)
{
    cz__budget b;
    cz__budget_init(&b, ctx);
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < n; i++) {
        c[i].take = 0;
        if (b.seqs < cap && cz__take(ctx, &b, &c[i]))
            tokens += c[i].take;
    }
    return tokens;
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
    uint64_t tokens = pack(ctx, c, n, cap);
    double predicted = p->step_a_s + p->step_b_s * (double)tokens;
    if (predicted > most_urgent && cap > p->base_batch) {
        /* aggressive backoff: the batch would miss the most urgent deadline */
        cap = p->base_batch;
        pack(ctx, c, n, cap);
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
};
