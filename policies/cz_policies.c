/* cz_policies.c - the scheduler registry, parameters and shared helpers. */
#include "cz_policies.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_policies_int.h"

cz_policy_params cz_policy_params_default(void)
{
    return (cz_policy_params){
        .audio_s_per_token = 0.0,
        .p_safe_s = 2.0,
        .alpha = 1.0,
        .beta = 1.0,
        .pace_u2 = true,
        .pace_horizon_s = 6.0,
        .urgent_window_s = 1.0,
        .max_new_prefills = 1,
        .prefill_step_cap = 8,
        .throughput_mode = false,
        .async_pipeline = false,
        .corun_slowdown = 2.0,
        .base_batch = 128,
        .rt_ttft_s = 0.5,
        .rt_tpot_s = 0.1,
        .step_s = {0.0, 0.0, 0.0, 0.0, 0.0},
    };
}

static const cz_sched_ops *const schedulers[] = {&cz_sched_fcfs, &cz_sched_fcfs_scan,
                                                 &cz_sched_liveserve, &cz_sched_voxserve,
                                                 &cz_sched_bros};

cz_status cz_policy_make(const char *name, const cJSON *params, const char *where,
                         cz_policy *out, cz_err *err)
{
    memset(out, 0, sizeof *out);
    out->params = cz_policy_params_default();
    for (size_t i = 0; i < CZ_ARRAY_LEN(schedulers); i++)
        if (strcmp(schedulers[i]->name, name) == 0)
            out->ops = schedulers[i];
    if (!out->ops)
        return cz_err_set(err, CZ_ENOTFOUND,
                          "%s: unknown scheduler '%s' (known: fcfs, fcfs_scan, liveserve, "
                          "voxserve, bros; for vision-language models nova, nova_pf_limit, "
                          "nova_chunked_prefill)",
                          where, name);
    /* VoxServe (section 3.2.2) runs its LLM and detokenizer steps
     * as distinct GPU tasks on device streams; the baselines it is compared with run one
     * step at a time (docs/policies.md) */
    out->params.async_pipeline = out->ops == &cz_sched_voxserve;
    if (!params)
        return CZ_OK;
    static const char *const keys[] = {"name",           "stages",           "p_safe_s",
                                       "alpha",          "beta",             "pace_u2",
                                       "pace_horizon_s",
                                       "urgent_window_s",
                                       "max_new_prefills", "prefill_step_cap", "throughput_mode",
                                       "base_batch",     "rt_ttft_ms",       "rt_tpot_ms",
                                       "async_pipeline", "corun_slowdown"};
    cz_policy_params *p = &out->params;
    uint64_t v;
    double ms;
    cz_status st;
    if ((st = cz_json_check_keys(params, where, keys, (int)CZ_ARRAY_LEN(keys), err)) != CZ_OK ||
        (st = cz_json_num(params, where, "p_safe_s", false, 1e-6, 1e6, &p->p_safe_s, err)) !=
            CZ_OK ||
        (st = cz_json_num(params, where, "alpha", false, 0, 1e12, &p->alpha, err)) != CZ_OK ||
        (st = cz_json_num(params, where, "beta", false, 0, 1e12, &p->beta, err)) != CZ_OK ||
        (st = cz_json_bool(params, where, "pace_u2", false, &p->pace_u2, err)) != CZ_OK ||
        (st = cz_json_num(params, where, "pace_horizon_s", false, 0, 1e6, &p->pace_horizon_s,
                          err)) != CZ_OK ||
        (st = cz_json_num(params, where, "urgent_window_s", false, 0, 1e6, &p->urgent_window_s,
                          err)) != CZ_OK ||
        (st = cz_json_bool(params, where, "throughput_mode", false, &p->throughput_mode, err)) !=
            CZ_OK ||
        (st = cz_json_bool(params, where, "async_pipeline", false, &p->async_pipeline, err)) !=
            CZ_OK ||
        (st = cz_json_num(params, where, "corun_slowdown", false, 1.0, 100.0, &p->corun_slowdown,
                          err)) != CZ_OK)
        return st;
    v = p->max_new_prefills;
    if ((st = cz_json_u64(params, where, "max_new_prefills", false, 1, 1u << 20, &v, err)) !=
        CZ_OK)
        return st;
    p->max_new_prefills = (uint32_t)v;
    v = p->prefill_step_cap;
    if ((st = cz_json_u64(params, where, "prefill_step_cap", false, 1, 1u << 20, &v, err)) !=
        CZ_OK)
        return st;
    p->prefill_step_cap = (uint32_t)v;
    v = p->base_batch;
    if ((st = cz_json_u64(params, where, "base_batch", false, 1, 1u << 20, &v, err)) != CZ_OK)
        return st;
    p->base_batch = (uint32_t)v;
    ms = p->rt_ttft_s * 1e3;
    if ((st = cz_json_num(params, where, "rt_ttft_ms", false, 1e-3, 1e9, &ms, err)) != CZ_OK)
        return st;
    p->rt_ttft_s = ms / 1e3;
    ms = p->rt_tpot_s * 1e3;
    if ((st = cz_json_num(params, where, "rt_tpot_ms", false, 1e-3, 1e9, &ms, err)) != CZ_OK)
        return st;
    p->rt_tpot_s = ms / 1e3;
    return CZ_OK;
}

cz_sched_ops cz_policy_ops(const cz_policy *pol)
{
    cz_sched_ops ops = *pol->ops;
    ops.state = &pol->params;
    return ops;
}

bool cz_policy_audio_started(const cz_seq *q)
{
    return q->received_s > 0;
}

double cz_policy_client_buffer_s(const cz_seq *q, double now_s)
{
    if (isnan(q->report_s))
        return 0.0;
    double played = q->played_s + (now_s - q->report_s);
    return played < q->received_s ? q->received_s - played : 0.0;
}

double cz_policy_buffer_s(const cz_policy_params *p, const cz_seq *q, double now_s)
{
    if (!(p->audio_s_per_token > 0))
        return NAN;
    double produced = (double)(q->generated - q->turn_generated_base) * p->audio_s_per_token;
    double played = 0;
    if (!isnan(q->report_s)) {
        played = q->played_s + (now_s - q->report_s);
        if (played > q->received_s)
            played = q->received_s; /* the player ran dry: it waits for the next chunk */
    }
    return produced - played;
}

/* ---- shared helpers ---- */

/* (key, pos) order inside one group. */
static bool before(const cz_cand *x, const cz_cand *y)
{
    return x->key < y->key || (x->key == y->key && x->pos < y->pos);
}

static void swap(cz_cand *a, cz_cand *b)
{
    cz_cand t = *a;
    *a = *b;
    *b = t;
}

/* In place, allocation-free (glibc's qsort may allocate a merge buffer): quicksort with
 * a median-of-three pivot, insertion sort below 16, recursion on the smaller part only
 * (O(log n) stack). The keys are distinct (pos breaks ties), so the order is total. */
static void sort_by_key(cz_cand *c, uint32_t n)
{
    while (n > 16) {
        uint32_t m = n / 2;
        if (before(&c[m], &c[0]))
            swap(&c[m], &c[0]);
        if (before(&c[n - 1], &c[0]))
            swap(&c[n - 1], &c[0]);
        if (before(&c[n - 1], &c[m]))
            swap(&c[n - 1], &c[m]);
        cz_cand pivot = c[m];
        uint32_t i = 0, j = n - 1;
        for (;;) {
            while (before(&c[i], &pivot))
                i++;
            while (before(&pivot, &c[j]))
                j--;
            if (i >= j)
                break;
            swap(&c[i], &c[j]);
            i++;
            j--;
        }
        /* [0, j] and [j + 1, n) */
        if (j + 1 < n - j - 1) {
            sort_by_key(c, j + 1);
            c += j + 1;
            n -= j + 1;
        } else {
            sort_by_key(c + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        cz_cand x = c[i];
        uint32_t k = i;
        while (k > 0 && before(&x, &c[k - 1])) {
            c[k] = c[k - 1];
            k--;
        }
        c[k] = x;
    }
}

void cz__cands_sort(cz_cand *c, uint32_t n)
{
    /* groups are small integers: bring each group together in one stable pass per group
     * boundary (a partition), then sort every group by (key, pos) */
    uint32_t start = 0;
    while (start < n) {
        uint32_t g = UINT32_MAX;
        for (uint32_t i = start; i < n; i++)
            if (c[i].group < g)
                g = c[i].group;
        uint32_t w = start;
        for (uint32_t i = start; i < n; i++)
            if (c[i].group == g)
                swap(&c[w++], &c[i]);
        sort_by_key(c + start, w - start);
        start = w;
    }
}

void cz__budget_init(cz__budget *b, const cz_sched_ctx *ctx)
{
    b->tokens = ctx->token_budget;
    b->slots = ctx->seq_cap > ctx->running ? ctx->seq_cap - ctx->running : 0;
    b->blocks = ctx->kv_available;
    b->seqs = 0;
}

bool cz__take(const cz_sched_ctx *ctx, cz__budget *b, cz_cand *c)
{
    return cz__take_why(ctx, b, c) == CZ__FIT;
}

cz__fit cz__take_why(const cz_sched_ctx *ctx, cz__budget *b, cz_cand *c)
{
    if (!c->running && b->slots == 0)
        return CZ__NO_SLOT;
    if (b->tokens == 0)
        return CZ__NO_BUDGET;
    uint32_t n = c->need < b->tokens ? c->need : b->tokens;
    if (!ctx->chunked_prefill && n < c->need)
        return CZ__NO_BUDGET;
    uint32_t blocks = cz_sched_blocks(ctx, &ctx->seqs[c->seq], n);
    /* a running sequence is always given its step: when the pool is short the core makes
     * room by preempting lower-priority running sequences (vLLM V1); without this a full
     * pool whose running sequences all need a block would schedule nothing, for ever */
    if (blocks > b->blocks && !c->running)
        return CZ__NO_BUDGET;
    c->take = n;
    b->tokens -= n;
    b->blocks = blocks > b->blocks ? 0 : b->blocks - blocks;
    b->seqs++;
    if (!c->running)
        b->slots--;
    return CZ__FIT;
}

bool cz_preload_admit(double eta_s, double needed_at_s)
{
    return eta_s <= needed_at_s;
}
