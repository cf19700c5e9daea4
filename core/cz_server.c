/* cz_server.c - see cz_server.h. The scheduling loop mirrors vLLM V1's Scheduler.schedule
 * (running first, then waiting; preemption by recompute; admission only in steps without
 * preemption); docs/serving-core.md spells out each rule. */
#include "cz_server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cz_server {
    cz_server_config cfg;
    const cz_sched_ops *sched;
    cz_metrics *metrics;

    cz_sreq *reqs;
    size_t n_reqs, cap_reqs;

    /* waiting queue: a ring buffer of request ids; preempted requests go to the front */
    uint32_t *wq;
    size_t wq_cap, wq_head, wq_len;

    uint32_t *running; /* admission order, capacity max_num_seqs */
    uint32_t n_running;

    cz_batch_item *items; /* capacity max_num_seqs */
    uint32_t n_items;
    bool in_flight;

    uint32_t *finished; /* capacity max_num_seqs */
    uint32_t kv_used;
};

cz_server_config cz_server_config_default(void)
{
    return (cz_server_config){
        .max_num_seqs = 256,
        .max_num_batched_tokens = 8192,
        .chunked_prefill = true,
        .block_tokens = 16,
        .kv_blocks = 0,
        .max_model_len = 0,
    };
}

cz_server *cz_server_create(const cz_server_config *cfg, const cz_sched_ops *sched,
                            cz_metrics *metrics, uint64_t expected_requests)
{
    CZ_ASSERT(cfg->max_num_seqs > 0 && cfg->max_num_batched_tokens > 0);
    CZ_ASSERT(cfg->block_tokens > 0 && cfg->kv_blocks > 0);
    CZ_ASSERT(sched && sched->pick_victim && metrics);
    cz_server *s = cz_xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->sched = sched;
    s->metrics = metrics;
    s->cap_reqs = expected_requests ? expected_requests : 1024;
    s->reqs = cz_xmalloc(s->cap_reqs * sizeof *s->reqs);
    s->wq_cap = 1024;
    s->wq = cz_xmalloc(s->wq_cap * sizeof *s->wq);
    s->running = cz_xmalloc(cfg->max_num_seqs * sizeof *s->running);
    s->items = cz_xmalloc(cfg->max_num_seqs * sizeof *s->items);
    s->finished = cz_xmalloc(cfg->max_num_seqs * sizeof *s->finished);
    return s;
}

void cz_server_free(cz_server *s)
{
    if (!s)
        return;
    free(s->reqs);
    free(s->wq);
    free(s->running);
    free(s->items);
    free(s->finished);
    free(s);
}

/* ---- waiting queue (ring buffer) ---- */

static void wq_reserve(cz_server *s)
{
    if (s->wq_len < s->wq_cap)
        return;
    size_t ncap = s->wq_cap * 2;
    uint32_t *nq = cz_xmalloc(ncap * sizeof *nq);
    for (size_t i = 0; i < s->wq_len; i++)
        nq[i] = s->wq[(s->wq_head + i) % s->wq_cap];
    free(s->wq);
    s->wq = nq;
    s->wq_cap = ncap;
    s->wq_head = 0;
}

static void wq_push_back(cz_server *s, uint32_t id)
{
    wq_reserve(s);
    s->wq[(s->wq_head + s->wq_len) % s->wq_cap] = id;
    s->wq_len++;
}

static void wq_push_front(cz_server *s, uint32_t id)
{
    wq_reserve(s);
    s->wq_head = (s->wq_head + s->wq_cap - 1) % s->wq_cap;
    s->wq[s->wq_head] = id;
    s->wq_len++;
}

static uint32_t wq_front(const cz_server *s)
{
    CZ_ASSERT(s->wq_len > 0);
    return s->wq[s->wq_head];
}

static void wq_pop_front(cz_server *s)
{
    CZ_ASSERT(s->wq_len > 0);
    s->wq_head = (s->wq_head + 1) % s->wq_cap;
    s->wq_len--;
}

/* ---- KV blocks ---- */

static uint32_t blocks_for(const cz_server *s, uint64_t tokens)
{
    return (uint32_t)((tokens + s->cfg.block_tokens - 1) / s->cfg.block_tokens);
}

/* Blocks a request holding `r->computed` tokens in `r->blocks` blocks must add to hold
 * `n` more. The free slots of its last block absorb small steps (decodes) with no
 * division. */
static uint32_t extra_blocks(const cz_server *s, const cz_sreq *r, uint32_t n)
{
    uint64_t slack = (uint64_t)r->blocks * s->cfg.block_tokens - r->computed;
    if (n <= slack)
        return 0;
    return blocks_for(s, n - slack);
}

static void kv_release(cz_server *s, cz_sreq *r)
{
    CZ_ASSERT(s->kv_used >= r->blocks);
    s->kv_used -= r->blocks;
    r->blocks = 0;
}

/* ---- arrivals ---- */

uint32_t cz_server_on_arrival(cz_server *s, double t_s, uint32_t prompt_tokens,
                              uint32_t output_tokens, uint64_t session, uint32_t turn,
                              uint32_t cls)
{
    CZ_ASSERT(prompt_tokens > 0 && output_tokens > 0);
    CZ_ASSERT(s->n_reqs < UINT32_MAX);
    cz_grow((void **)&s->reqs, &s->cap_reqs, s->n_reqs + 1, sizeof *s->reqs);
    uint32_t id = (uint32_t)s->n_reqs++;
    cz_sreq *r = &s->reqs[id];
    *r = (cz_sreq){
        .prompt_tokens = prompt_tokens,
        .output_tokens = output_tokens,
        .state = CZ_SREQ_WAITING,
        .arrival_s = t_s,
        .last_token_s = NAN,
    };
    uint64_t total = (uint64_t)prompt_tokens + output_tokens;
    bool too_long = s->cfg.max_model_len && total > s->cfg.max_model_len;
    bool never_fits = blocks_for(s, total) > s->cfg.kv_blocks;
    /* without chunking a (re)computation of prompt + generated tokens must fit one step */
    if (!s->cfg.chunked_prefill && total - 1 > s->cfg.max_num_batched_tokens)
        never_fits = true;
    cz_req_record rec = {
        .session = session,
        .turn = turn,
        .cls = cls,
        .input_tokens = prompt_tokens,
        .output_tokens = 0,
        .outcome = CZ_REQ_PENDING,
        .arrival_s = t_s,
        .first_sched_s = NAN,
        .first_token_s = NAN,
        .finish_s = NAN,
    };
    if (too_long || never_fits) {
        r->state = CZ_SREQ_REJECTED;
        rec.outcome = CZ_REQ_REJECTED;
    } else {
        wq_push_back(s, id);
    }
    uint64_t mid = cz_metrics_add_request(s->metrics, &rec);
    CZ_ASSERT(mid == id);
    return id;
}

/* ---- scheduling ---- */

static void add_item(cz_server *s, cz_batch *b, uint32_t id, uint32_t n)
{
    cz_sreq *r = &s->reqs[id];
    CZ_ASSERT(s->n_items < s->cfg.max_num_seqs);
    bool decode = r->computed >= r->prompt_tokens && n == 1;
    s->items[s->n_items++] = (cz_batch_item){id, n, r->computed, decode};
    r->sched_tokens = n;
    b->total_tokens += n;
    if (decode) {
        b->decode_seqs++;
        b->decode_ctx_tokens += (uint64_t)r->computed + 1;
    } else {
        b->prefill_tokens += n;
        b->prefill_seqs++;
        /* token i of the chunk attends to ctx_before + i + 1 positions */
        b->prefill_attn_ctx += (uint64_t)n * r->computed + (uint64_t)n * (n + 1) / 2;
    }
}

/* Preempts running[idx] by recompute: its KV is freed and it goes to the front of the
 * waiting queue (vLLM V1: _preempt_request + waiting.prepend_request). */
static void preempt(cz_server *s, uint32_t idx)
{
    CZ_ASSERT(idx < s->n_running);
    uint32_t id = s->running[idx];
    cz_sreq *r = &s->reqs[id];
    kv_release(s, r);
    r->computed = 0;
    r->state = CZ_SREQ_WAITING;
    memmove(&s->running[idx], &s->running[idx + 1], (s->n_running - idx - 1) * sizeof(uint32_t));
    s->n_running--;
    wq_push_front(s, id);
    s->metrics->req[id].preemptions++;
    s->metrics->preemptions++;
}

bool cz_server_schedule(cz_server *s, double t_s, cz_batch *out)
{
    CZ_ASSERT(!s->in_flight);
    memset(out, 0, sizeof *out);
    s->n_items = 0;
    uint32_t budget = s->cfg.max_num_batched_tokens;
    bool preempted = false;

    /* 1. running requests, in admission order */
    for (uint32_t i = 0; i < s->n_running && budget > 0;) {
        uint32_t id = s->running[i];
        cz_sreq *r = &s->reqs[id];
        uint32_t need = r->prompt_tokens + r->generated - r->computed;
        CZ_ASSERT(need > 0);
        uint32_t n = need < budget ? need : budget;
        uint32_t extra = extra_blocks(s, r, n);
        bool self_preempted = false;
        while (extra > s->cfg.kv_blocks - s->kv_used) {
            cz_sched_view v = {s->reqs, s->running, s->n_running, s->cfg.kv_blocks - s->kv_used};
            uint32_t victim = s->sched->pick_victim(&v);
            CZ_ASSERT(victim < s->n_running);
            preempted = true;
            if (victim == i) {
                preempt(s, i);
                self_preempted = true;
                break;
            }
            CZ_ASSERT(victim > i); /* already-scheduled requests are never victims */
            preempt(s, victim);
        }
        if (self_preempted)
            break;
        r->blocks += extra;
        s->kv_used += extra;
        add_item(s, out, id, n);
        budget -= n;
        i++;
    }

    /* 2. waiting requests, only when nothing was preempted in this step; only these can
     * be scheduled for the first time */
    uint32_t first_admitted = s->n_items;
    while (!preempted && s->wq_len > 0 && budget > 0 && s->n_running < s->cfg.max_num_seqs) {
        uint32_t id = wq_front(s);
        cz_sreq *r = &s->reqs[id];
        uint32_t need = r->prompt_tokens + r->generated - r->computed;
        if (!s->cfg.chunked_prefill && need > budget)
            break;
        uint32_t n = need < budget ? need : budget;
        uint32_t extra = extra_blocks(s, r, n);
        if (extra > s->cfg.kv_blocks - s->kv_used)
            break;
        wq_pop_front(s);
        r->state = CZ_SREQ_RUNNING;
        s->running[s->n_running++] = id;
        r->blocks += extra;
        s->kv_used += extra;
        add_item(s, out, id, n);
        budget -= n;
    }

    for (uint32_t k = first_admitted; k < s->n_items; k++) {
        cz_req_record *rec = &s->metrics->req[s->items[k].req];
        if (isnan(rec->first_sched_s))
            rec->first_sched_s = t_s;
    }
    out->items = s->items;
    out->n_items = s->n_items;
    s->in_flight = s->n_items > 0;
    cz_metrics_timeline(s->metrics, t_s, s->kv_used, s->n_running, (uint32_t)s->wq_len,
                        out->total_tokens);
    return s->in_flight;
}

void cz_server_on_batch_done(cz_server *s, double t_s, const uint32_t **finished,
                             uint32_t *n_finished)
{
    CZ_ASSERT(s->in_flight);
    s->in_flight = false;
    s->metrics->steps++;
    uint32_t nf = 0;
    /* Gaps are recorded run-length: consecutive items usually share last_token_s. */
    double gap = NAN;
    uint64_t gap_n = 0;
    for (uint32_t k = 0; k < s->n_items; k++) {
        uint32_t id = s->items[k].req;
        cz_sreq *r = &s->reqs[id];
        r->computed += s->items[k].tokens;
        r->sched_tokens = 0;
        if (r->computed != r->prompt_tokens + r->generated)
            continue; /* a prefill chunk that has not reached the end of the prompt */
        r->generated++;
        cz_req_record *rec = &s->metrics->req[id];
        if (r->generated == 1) {
            rec->first_token_s = t_s;
            rec->output_tokens = 1;
        } else {
            double g = t_s - r->last_token_s;
            if (g != gap) {
                cz_metrics_add_itl(s->metrics, gap, gap_n);
                gap = g;
                gap_n = 0;
            }
            gap_n++;
        }
        r->last_token_s = t_s;
        if (r->generated == r->output_tokens) {
            rec->output_tokens = r->generated;
            r->state = CZ_SREQ_DONE;
            kv_release(s, r);
            rec->finish_s = t_s;
            rec->outcome = CZ_REQ_COMPLETED;
            s->finished[nf++] = id;
        }
    }
    if (gap_n)
        cz_metrics_add_itl(s->metrics, gap, gap_n);
    if (nf) {
        uint32_t w = 0;
        for (uint32_t i = 0; i < s->n_running; i++)
            if (s->reqs[s->running[i]].state == CZ_SREQ_RUNNING)
                s->running[w++] = s->running[i];
        s->n_running = w;
    }
    s->n_items = 0;
    *finished = s->finished;
    *n_finished = nf;
}

void cz_server_finalize(cz_server *s)
{
    for (size_t i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].state == CZ_SREQ_RUNNING || s->reqs[i].state == CZ_SREQ_WAITING)
            s->metrics->req[i].output_tokens = s->reqs[i].generated;
}

bool cz_server_busy(const cz_server *s) { return s->in_flight; }
uint32_t cz_server_running(const cz_server *s) { return s->n_running; }
uint32_t cz_server_waiting(const cz_server *s) { return (uint32_t)s->wq_len; }
uint32_t cz_server_kv_used(const cz_server *s) { return s->kv_used; }

const cz_sreq *cz_server_request(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(id < s->n_reqs);
    return &s->reqs[id];
}

bool cz_server_check(const cz_server *s, cz_err *err)
{
    uint64_t blocks = 0, n_wait = 0, n_run = 0;
    for (size_t i = 0; i < s->n_reqs; i++) {
        const cz_sreq *r = &s->reqs[i];
        blocks += r->blocks;
        if (r->state == CZ_SREQ_WAITING)
            n_wait++;
        if (r->state == CZ_SREQ_RUNNING)
            n_run++;
        if (r->state != CZ_SREQ_RUNNING && r->blocks != 0) {
            cz_err_set(err, CZ_EINVAL, "request %zu holds %u blocks but is not running", i,
                       r->blocks);
            return false;
        }
        if (r->state == CZ_SREQ_RUNNING && r->blocks < blocks_for(s, r->computed)) {
            cz_err_set(err, CZ_EINVAL, "request %zu has %u tokens of KV in %u blocks", i,
                       r->computed, r->blocks);
            return false;
        }
    }
    if (blocks != s->kv_used || s->kv_used > s->cfg.kv_blocks) {
        cz_err_set(err, CZ_EINVAL, "blocks held %llu, pool used %u of %u",
                   (unsigned long long)blocks, s->kv_used, s->cfg.kv_blocks);
        return false;
    }
    if (n_wait != s->wq_len || n_run != s->n_running) {
        cz_err_set(err, CZ_EINVAL, "queues hold %zu waiting and %u running, states say %llu/%llu",
                   s->wq_len, s->n_running, (unsigned long long)n_wait, (unsigned long long)n_run);
        return false;
    }
    return true;
}
