/* cz_policies_int.h - helpers the ordering schedulers share inside policies/. */
#ifndef CZ_POLICIES_INT_H
#define CZ_POLICIES_INT_H

#include "cz_policies.h"

/* Sorts candidates by (group, key, pos) ascending: smaller is more urgent. */
void cz__cands_sort(cz_cand *c, uint32_t n);

/* Budgets of a step while a policy fills it. */
typedef struct cz__budget {
    uint32_t tokens;   /* token budget left */
    uint32_t slots;    /* running slots left for waiting candidates */
    uint32_t blocks;   /* KV blocks left (free + evictable idle) */
    uint32_t seqs;     /* sequences taken so far */
} cz__budget;

void cz__budget_init(cz__budget *b, const cz_sched_ctx *ctx);

/* Why a candidate did or did not fit. */
typedef enum cz__fit { CZ__FIT = 0, CZ__NO_SLOT, CZ__NO_BUDGET } cz__fit;

/* Gives candidate `c` as many tokens as the budgets allow (chunked prefill: at least one
 * token; unchunked: all it needs) and charges them. Takes nothing when it does not fit:
 * a waiting candidate with no free running slot (CZ__NO_SLOT), too few tokens left, or a
 * waiting candidate with too few KV blocks left (CZ__NO_BUDGET). A running candidate is
 * never refused for KV: the core preempts lower-priority running sequences for it. */
cz__fit cz__take_why(const cz_sched_ctx *ctx, cz__budget *b, cz_cand *c);
bool cz__take(const cz_sched_ctx *ctx, cz__budget *b, cz_cand *c);

#endif
