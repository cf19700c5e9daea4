/* cz_sched_fcfs.c - FCFS, vLLM V1's default. On the core's fast path the order is kept by
 * the core (running in admission order, then the waiting queue) and the policy's one
 * decision is the preemption victim: the running request admitted last. fcfs_scan is the
 * same order on the ordering path, used to cross-check that path. */
#include "cz_policies.h"
#include "cz_policies_int.h"

static uint32_t fcfs_pick_victim(const cz_sched_view *v)
{
    CZ_ASSERT(v->n_running > 0);
    return v->last_admitted;
}

const cz_sched_ops cz_sched_fcfs = {
    .name = "fcfs",
    .pick_victim = fcfs_pick_victim,
};

/* V1's passes in FCFS position order: running requests take what the token budget
 * allows (the core preempts the last of them if KV runs out); waiting ones are admitted
 * until the first that does not fit. */
static uint32_t fcfs_scan_select(const void *state, const cz_sched_ctx *ctx, cz_cand *c,
                                 uint32_t n)
{
    (void)state;
    cz__budget b;
    cz__budget_init(&b, ctx);
    for (uint32_t i = 0; i < n && b.tokens > 0; i++) {
        if (c[i].running) {
            uint32_t t = c[i].need < b.tokens ? c[i].need : b.tokens;
            uint32_t blocks = cz_sched_blocks(ctx, &ctx->seqs[c[i].seq], t);
            c[i].take = t;
            b.tokens -= t;
            b.blocks = blocks < b.blocks ? b.blocks - blocks : 0;
        } else if (!cz__take(ctx, &b, &c[i])) {
            break;
        }
    }
    return 0;
}

const cz_sched_ops cz_sched_fcfs_scan = {
    .name = "fcfs_scan",
    .select = fcfs_scan_select,
};
