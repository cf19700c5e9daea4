/* cz_sched_voxserve.c - VoxServe's streaming-centric scheduler (VoxServe: Streaming-Centric
 * Serving System for Speech Language Models, section 3.2.1) with the rules of its
 * OnlineScheduler, and its throughput-oriented mode (section 4.3.3) with the rules of its
 * OfflineScheduler.
 *
 * A request is urgent from arrival until its first audio chunk reaches the client
 * (startup phase), and in steady state when the latest chunk it delivered is due to
 * start playing within urgent_window_s (1.0 s). That start is on the clock of Eq. 2, which
 * starts at the first chunk's arrival t_1 and never pauses: t_1 + (seconds received) -
 * (the latest chunk's seconds), VoxServe's first send time + sum of chunk durations - last
 * chunk duration. At most max_new_prefills (1) request is prefilled per step; a step that
 * holds a prefill is capped at prefill_step_cap (8) requests; the rest of the batch is
 * urgent decodes (startup first, oldest first; then steady state, nearest deadline
 * first), then the other decodes in FCFS order.
 *
 * Throughput mode maximizes the batch sizes of the LLM and of the detokenizer: new
 * requests are prefilled first (as many as the budgets allow), then decodes fill the
 * batch in FCFS order; the detokenizer runs only on a full batch, or once the LLM has
 * nothing left to run. */
#include <math.h>

#include "cz_policies.h"
#include "cz_policies_int.h"

enum { PREFILL = 0, URGENT_START = 1, URGENT_STEADY = 2, OTHER = 3 };

/* Seconds until the latest delivered chunk starts playing (VoxServe's soft deadline),
 * section 3.2.1 and Eq. 2: on a clock started at the first chunk's arrival that never
 * pauses, that chunk starts at first_audio_s + received_s - last_chunk_s. A stall does not
 * move it later: a request that fell behind stays urgent until it has caught up. */
static double to_deadline_s(const cz_seq *q, double now_s)
{
    return q->first_audio_s + q->received_s - q->last_chunk_s - now_s;
}

static uint32_t voxserve_select(const void *state, const cz_sched_ctx *ctx, cz_cand *c,
                                uint32_t n)
{
    const cz_policy_params *p = state;
    cz__budget b;
    cz__budget_init(&b, ctx);
    if (p->throughput_mode) {
        /* section 4.3.3 ("maximizes the batch sizes of both the LLM backbone and the
         * detokenizer"), with its OfflineScheduler's order: new requests are prefilled
         * first, so that they join the decode batch at once, in FCFS order (admission stops
         * at the first that does not fit); decodes fill the rest of the budgets */
        for (uint32_t i = 0; i < n; i++) {
            c[i].group = !c[i].running || !c[i].decode ? PREFILL : OTHER;
            c[i].key = (double)c[i].pos;
        }
        cz__cands_sort(c, n);
        bool admitting = true;
        for (uint32_t i = 0; i < n; i++) {
            if (!c[i].running && !admitting)
                continue;
            if (!cz__take(ctx, &b, &c[i]) && !c[i].running)
                admitting = false;
        }
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = &ctx->seqs[c[i].seq];
        c[i].key = (double)c[i].pos;
        if (!c[i].running || !c[i].decode) {
            c[i].group = PREFILL;
        } else if (!cz_policy_audio_started(q)) {
            c[i].group = URGENT_START;
            c[i].key = q->turn_ready_s;
        } else {
            double d = to_deadline_s(q, ctx->now_s);
            c[i].group = d <= p->urgent_window_s ? URGENT_STEADY : OTHER;
            if (c[i].group == URGENT_STEADY)
                c[i].key = d;
        }
    }
    cz__cands_sort(c, n);
    uint32_t prefills = 0, cap = ctx->seq_cap;
    for (uint32_t i = 0; i < n && b.seqs < cap; i++) {
        if (c[i].group == PREFILL) {
            if (prefills == p->max_new_prefills)
                continue;
            if (cz__take(ctx, &b, &c[i])) {
                prefills++;
                cap = p->prefill_step_cap; /* a step with a prefill holds at most 8 */
            }
        } else {
            cz__take(ctx, &b, &c[i]);
        }
    }
    return 0;
}

uint32_t cz_voxserve_detok_pick(const cz_policy_params *p, const cz_detok_job *jobs, uint32_t n,
                                double now_s, uint32_t max_batch, bool upstream_idle,
                                cz_cand *scratch, uint32_t *pos_out, double *wake_s)
{
    *wake_s = INFINITY;
    uint32_t k = 0;
    if (p->throughput_mode) {
        /* section 4.3.3: the detokenizer's batch is as large as it can be: it runs on a
         * full batch, or when no more chunks can come because the LLM has nothing left to
         * run (its OfflineScheduler detokenizes only once no LLM request is ongoing), in
         * queue order */
        if (n < max_batch && !upstream_idle)
            return 0;
        for (uint32_t i = 0; i < n && k < max_batch; i++)
            pos_out[k++] = jobs[i].pos;
        return k;
    }
    bool urgent = false;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = jobs[i].q;
        cz_cand *c = &scratch[i];
        *c = (cz_cand){.seq = i, .pos = jobs[i].pos, .group = OTHER, .key = jobs[i].pos};
        if (!q) {
            c->group = OTHER + 1;
        } else if (!cz_policy_audio_started(q)) {
            c->group = URGENT_START;
            c->key = q->turn_ready_s;
        } else {
            double d = to_deadline_s(q, now_s);
            if (d <= p->urgent_window_s) {
                c->group = URGENT_STEADY;
                c->key = d;
            } else if (now_s + (d - p->urgent_window_s) < *wake_s) {
                *wake_s = now_s + (d - p->urgent_window_s);
            }
        }
        urgent = urgent || c->group == URGENT_START || c->group == URGENT_STEADY;
    }
    if (!urgent)
        return 0;
    *wake_s = INFINITY;
    cz__cands_sort(scratch, n);
    for (uint32_t i = 0; i < n && k < max_batch; i++)
        pos_out[k++] = scratch[i].pos;
    return k;
}

const cz_sched_ops cz_sched_voxserve = {
    .name = "voxserve",
    .select = voxserve_select,
};
