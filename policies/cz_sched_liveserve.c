/* cz_sched_liveserve.c - LiveServe's urgency-aware scheduler (LiveServe: Interaction-Aware
 * Serving for Real-Time Omni-Modal LLMs, section 4.1, Eq. 1-3; section 4.2, Algorithm 1;
 * fallbacks of section 6).
 *
 * Every ready request (running or waiting) gets an urgency class from its stage-aware
 * playback buffer P (cz_policy_buffer_s): U0 has started playback with P <= P_safe (sorted
 * by P ascending: closest to underrun first), U1 has not produced its first audio yet
 * (oldest first), U2 has started with P > P_safe (sorted by the utility of Eq. 1
 * descending). Admission follows Algorithm 1's scan (lines 12-16): in that order, waiting
 * requests are admitted until the first that does not fit the token and KV budgets;
 * waiting requests that find no free running slot are not ready and are skipped; running
 * requests keep their step after the stop (they hold the KV the misfit waits for). When no
 * budget binds, U2 work far ahead of playback is paced: deferred with a wake-up until its
 * buffer has played down (section 7.3, Figure 15; docs/policies.md). Without
 * playback telemetry (a stage with no audio) the
 * order falls back to FCFS positions (section 6: "Missing playback-buffer telemetry
 * disables interaction-aware ordering"). The paper gives no values for P_safe, alpha and
 * beta (it tunes alpha / beta offline per stage); the defaults are documented in
 * docs/policies.md and configurable per stage. */
#include <math.h>

#include "cz_policies.h"
#include "cz_policies_int.h"

enum { U0 = 0, U1 = 1, U2 = 2, DEFERRED = 3 };

/* Algorithm 1, lines 12-16, over the sorted candidates (deferred ones, last, take nothing):
 * admission stops at the first waiting request that does not fit the token and KV budgets;
 * a waiting request with no free running slot cannot make progress in this round, so it is
 * not in the ready set (section 4.2) and is passed over. Running requests after the stop
 * still get their step: they hold the blocks a misfit waits for, and only their progress
 * frees them (a stop that also held them back would stall the stage for good). Returns
 * whether a budget bound: a candidate got less than it needs, or nothing. */
static bool scan(const cz_sched_ctx *ctx, cz_cand *c, uint32_t n)
{
    cz__budget b;
    cz__budget_init(&b, ctx);
    bool admitting = true, bound = false;
    for (uint32_t i = 0; i < n && c[i].group != DEFERRED; i++) {
        if (b.tokens == 0 || (!c[i].running && !admitting)) {
            bound = true;
            continue;
        }
        cz__fit f = cz__take_why(ctx, &b, &c[i]);
        if (f == CZ__NO_BUDGET) {
            bound = true;
            if (!c[i].running)
                admitting = false;
        } else if (f == CZ__FIT && c[i].take < c[i].need) {
            bound = true;
        }
    }
    return bound;
}

static uint32_t liveserve_select(const void *state, const cz_sched_ctx *ctx, cz_cand *c,
                                 uint32_t n)
{
    const cz_policy_params *p = state;
    bool telemetry = p->audio_s_per_token > 0;
    double r_occ = ctx->kv_blocks ? (double)ctx->kv_used / ctx->kv_blocks : 0.0;
    uint32_t deferrable = 0;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = &ctx->seqs[c[i].seq];
        if (!telemetry) {
            c[i].group = 0;
            c[i].key = 0;
            continue;
        }
        if (!cz_policy_audio_started(q)) {
            /* U1: first-audio urgency, oldest ready first */
            c[i].group = U1;
            c[i].key = q->turn_ready_s;
            continue;
        }
        double buf = cz_policy_buffer_s(p, q, ctx->now_s);
        if (buf <= p->p_safe_s) {
            /* U0: playback urgency, closest to underrun first */
            c[i].group = U0;
            c[i].key = buf;
        } else {
            /* U2: Eq. 1 utility U = beta U_kv - alpha C_barge, descending. Eq. 3: U_kv =
             * K_i R_occ with K_i the request's share of the stage's pool (normalised so
             * that alpha and beta weigh comparable terms); Eq. 2: C_barge =
             * max(0, P - P_safe) / P_safe. */
            double k_i = ctx->kv_blocks ? (double)q->blocks / ctx->kv_blocks : 0.0;
            double u_kv = k_i * r_occ;
            double c_barge = (buf - p->p_safe_s) / p->p_safe_s;
            double utility = p->beta * u_kv - p->alpha * c_barge;
            c[i].group = U2;
            c[i].key = -utility;
            /* Pacing (section 4 and 7.3, Figure 15): U2 work far ahead of playback
             * yields decode capacity even when no budget binds. Algorithm 1 as printed only
             * orders; the reading that reproduces Figure 15 (the baseline generates a 65.9 s
             * reply in 8.2 s, LiveServe stretches it to 55.3 s) defers a U2 request whose
             * utility is below zero, until its buffer has played down to where the utility
             * is zero again: P* = P_safe (1 + beta U_kv / alpha), reached after P - P*
             * seconds of playback (docs/policies.md). */
            double slack = cz_policy_client_buffer_s(q, ctx->now_s);
            double p_star = p->alpha > 0 ? p->p_safe_s * (1.0 + p->beta * u_kv / p->alpha) : 0;
            double horizon = fmax(p_star, p->pace_horizon_s);
            if (p->pace_u2 && utility < 0 && p->alpha > 0 && buf > horizon &&
                slack > p->p_safe_s) {
                /* only while the client itself holds more than P_safe of playable audio:
                 * work made but not yet delivered (a talker's partial vocoder chunk, the
                 * thinker's text the talker has not voiced) protects no one from an
                 * underrun, and a stage deferring on it could wait for itself. It looks
                 * again when either buffer has played down to its bound (both fall at real
                 * time while the client plays); a delivery before that re-dispatches it. */
                c[i].wake_s = ctx->now_s + fmin(buf - horizon, slack - p->p_safe_s);
                deferrable++;
            }
        }
    }
    cz__cands_sort(c, n);
    /* Pacing applies when no budget binds: when everything ready fits the round, U2 work
     * far ahead of playback yields its step (section 7.3). When the budgets bind, Algorithm
     * 1's order and stop rule decide alone: a paced request would hold its KV and slot
     * longer while the requests the budgets refuse wait for them. */
    if (deferrable && !scan(ctx, c, n)) {
        for (uint32_t i = 0; i < n; i++) {
            c[i].take = 0;
            if (c[i].wake_s < INFINITY)
                c[i].group = DEFERRED;
        }
        cz__cands_sort(c, n);
        scan(ctx, c, n);
        return 0;
    }
    if (deferrable) { /* the budgets bind: the scan without pacing stands */
        for (uint32_t i = 0; i < n; i++)
            c[i].wake_s = INFINITY;
        return 0;
    }
    scan(ctx, c, n);
    return 0;
}

const cz_sched_ops cz_sched_liveserve = {
    .name = "liveserve",
    .select = liveserve_select,
};
