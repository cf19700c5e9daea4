/* cz_sched_liveserve.c - LiveServe's urgency-aware scheduler (000_6fdb7821c3412586.txt,
 * section 4.1, Eq. 1-3; section 4.2, Algorithm 1; fallbacks of section 6).
 *
 * Every ready request (running or waiting) gets an urgency class from its stage-aware
 * playback buffer P (cz_policy_buffer_s): U0 has started playback with P <= P_safe (sorted
 * by P ascending: closest to underrun first), U1 has not produced its first audio yet
 * (oldest first), U2 has started with P > P_safe (sorted by the utility of Eq. 1
 * descending). Admission follows Algorithm 1's scan (lines 12-16): in that order, waiting
 * requests are admitted until the first that does not fit the token and KV budgets;
 * waiting requests that find no free running slot are not ready and are skipped; running
 * requests keep their step after the stop (they hold the KV the misfit waits for). Without
 * playback telemetry (a stage with no audio) the
 * order falls back to FCFS positions (section 6: "Missing playback-buffer telemetry
 * disables interaction-aware ordering"). The paper gives no values for P_safe, alpha and
 * beta (it tunes alpha / beta offline per stage); the defaults are documented in
 * docs/policies.md and configurable per stage. */
#include <math.h>

#include "cz_policies.h"
#include "cz_policies_int.h"

enum { U0 = 0, U1 = 1, U2 = 2 };

static uint32_t liveserve_select(const void *state, const cz_sched_ctx *ctx, cz_cand *c,
                                 uint32_t n)
{
    const cz_policy_params *p = state;
    bool telemetry = p->audio_s_per_token > 0;
    double r_occ = ctx->kv_blocks ? (double)ctx->kv_used / ctx->kv_blocks : 0.0;
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
            c[i].group = U2;
            c[i].key = -(p->beta * u_kv - p->alpha * c_barge);
        }
    }
    cz__cands_sort(c, n);
    cz__budget b;
    cz__budget_init(&b, ctx);
    bool admitting = true;
    for (uint32_t i = 0; i < n && b.tokens > 0; i++) {
        /* Algorithm 1, lines 13-14: stop admitting at the first request that does not fit
         * the token and KV budgets; a waiting request with no free running slot cannot make
         * progress in this round, so it is not in the ready set (section 4.2) and is passed
         * over. Running requests after the stop still get their step: they hold the blocks
         * a misfit waits for, and only their progress frees them (a stop that also held
         * them back would stall the stage for good). */
        if (!c[i].running && !admitting)
            continue;
        if (cz__take_why(ctx, &b, &c[i]) == CZ__NO_BUDGET && !c[i].running)
            admitting = false;
    }
    return 0;
}

const cz_sched_ops cz_sched_liveserve = {
    .name = "liveserve",
    .select = liveserve_select,
};
