/* cz_server.c - see cz_server.h. The scheduling loop mirrors vLLM V1's Scheduler.schedule
 * (running first, then waiting; preemption by recompute; admission only in steps without
 * preemption); docs/serving-core.md spells out each rule. */
#include "cz_server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

/* Per-request bookkeeping of the decode set, beside the public cz_sreq. */
typedef struct dnode {
    uint32_t prev, next; /* decode-set list in admission order */
    uint32_t heap_pos;   /* position in the finish heap */
    uint32_t phase;      /* steps k with k % block_tokens == phase need a new block */
    uint64_t k0;         /* steps executed when the request joined the decode set */
    uint32_t c0, g0;     /* computed and generated when it joined */
    uint64_t finish_k;   /* steps executed when its last token is produced */
    uint64_t join_seq;   /* tie-break of the finish heap: join order */
} dnode;

struct cz_server {
    cz_server_config cfg;
    const cz_sched_ops *sched;
    cz_metrics *metrics;

    cz_sreq *reqs;
    dnode *dn;
    size_t n_reqs, cap_reqs;

    /* waiting queue: a ring buffer of request ids; preempted requests go to the front */
    uint32_t *wq;
    size_t wq_cap, wq_head, wq_len;

    /* running = decode set (list, admission order) followed by the prefilling requests
     * (array, admission order) */
    uint32_t d_head, d_tail, n_decode;
    uint32_t *pf;       /* prefilling running requests, capacity max_num_seqs */
    uint32_t n_pf;
    uint32_t *heap;     /* decode set by (finish_k, join_seq), capacity max_num_seqs */
    uint32_t n_heap;
    uint32_t *phase_cnt; /* decode members per block phase, block_tokens entries */
    uint64_t d_sum_computed; /* sum of the decode members' computed tokens */
    uint64_t join_seq;
    uint64_t steps;      /* steps completed (K) */
    double last_done_s;  /* time of the last step completion */

    cz_batch_item *items; /* prefill chunks of the batch in flight, capacity max_num_seqs */
    uint32_t n_items;
    uint32_t batch_decode; /* decode members in the batch in flight */
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
    /* vLLM's SchedulerConfig requires it; every decoding request then fits every step */
    CZ_ASSERT(cfg->max_num_batched_tokens >= cfg->max_num_seqs);
    CZ_ASSERT(sched && sched->pick_victim && metrics);
    cz_server *s = cz_xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->sched = sched;
    s->metrics = metrics;
    s->cap_reqs = expected_requests ? expected_requests : 1024;
    s->reqs = cz_xmalloc(s->cap_reqs * sizeof *s->reqs);
    s->dn = cz_xmalloc(s->cap_reqs * sizeof *s->dn);
    s->wq_cap = 1024;
    s->wq = cz_xmalloc(s->wq_cap * sizeof *s->wq);
    s->d_head = s->d_tail = NIL;
    s->pf = cz_xmalloc(cfg->max_num_seqs * sizeof *s->pf);
    s->heap = cz_xmalloc(cfg->max_num_seqs * sizeof *s->heap);
    s->phase_cnt = cz_xcalloc(cfg->block_tokens, sizeof *s->phase_cnt);
    s->items = cz_xmalloc(cfg->max_num_seqs * sizeof *s->items);
    s->finished = cz_xmalloc(cfg->max_num_seqs * sizeof *s->finished);
    s->last_done_s = NAN;
    return s;
}

void cz_server_free(cz_server *s)
{
    if (!s)
        return;
    free(s->reqs);
    free(s->dn);
    free(s->wq);
    free(s->pf);
    free(s->heap);
    free(s->phase_cnt);
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

/* ---- the decode set ---- */

static bool heap_before(const cz_server *s, uint32_t a, uint32_t b)
{
    const dnode *x = &s->dn[a], *y = &s->dn[b];
    return x->finish_k < y->finish_k || (x->finish_k == y->finish_k && x->join_seq < y->join_seq);
}

static void heap_set(cz_server *s, uint32_t pos, uint32_t id)
{
    s->heap[pos] = id;
    s->dn[id].heap_pos = pos;
}

static void heap_up(cz_server *s, uint32_t pos)
{
    uint32_t id = s->heap[pos];
    while (pos > 0) {
        uint32_t p = (pos - 1) / 2;
        if (!heap_before(s, id, s->heap[p]))
            break;
        heap_set(s, pos, s->heap[p]);
        pos = p;
    }
    heap_set(s, pos, id);
}

static void heap_down(cz_server *s, uint32_t pos)
{
    uint32_t id = s->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= s->n_heap)
            break;
        if (c + 1 < s->n_heap && heap_before(s, s->heap[c + 1], s->heap[c]))
            c++;
        if (!heap_before(s, s->heap[c], id))
            break;
        heap_set(s, pos, s->heap[c]);
        pos = c;
    }
    heap_set(s, pos, id);
}

static void heap_remove(cz_server *s, uint32_t id)
{
    uint32_t pos = s->dn[id].heap_pos;
    CZ_ASSERT(pos < s->n_heap && s->heap[pos] == id);
    uint32_t last = s->heap[--s->n_heap];
    if (pos == s->n_heap)
        return;
    heap_set(s, pos, last);
    heap_up(s, pos);
    heap_down(s, s->dn[last].heap_pos);
}

/* Brings a decode member's public counters up to date with the steps executed. */
static void d_sync(cz_server *s, uint32_t id)
{
    cz_sreq *r = &s->reqs[id];
    const dnode *d = &s->dn[id];
    uint64_t m = s->steps - d->k0;
    r->computed = d->c0 + (uint32_t)m;
    r->generated = d->g0 + (uint32_t)m;
    r->blocks = blocks_for(s, r->computed);
    if (m > 0)
        r->last_token_s = s->last_done_s;
}

/* A running request whose prompt is computed and whose last sampled token is not its
 * last joins the decode set (at its tail: it is the latest admitted member). */
static void d_join(cz_server *s, uint32_t id)
{
    cz_sreq *r = &s->reqs[id];
    dnode *d = &s->dn[id];
    CZ_ASSERT(r->computed == r->prompt_tokens + r->generated - 1 && r->generated < r->output_tokens);
    CZ_ASSERT(r->blocks == blocks_for(s, r->computed));
    uint32_t bt = s->cfg.block_tokens;
    d->k0 = s->steps;
    d->c0 = r->computed;
    d->g0 = r->generated;
    d->phase = (uint32_t)((s->steps % bt + bt - r->computed % bt) % bt);
    d->finish_k = s->steps + (r->output_tokens - r->generated);
    d->join_seq = s->join_seq++;
    d->prev = s->d_tail;
    d->next = NIL;
    if (s->d_tail != NIL)
        s->dn[s->d_tail].next = id;
    else
        s->d_head = id;
    s->d_tail = id;
    s->n_decode++;
    s->phase_cnt[d->phase]++;
    s->d_sum_computed += r->computed;
    s->heap[s->n_heap] = id;
    s->dn[id].heap_pos = s->n_heap++;
    heap_up(s, s->n_heap - 1);
}

/* Removes a member from the decode set, its counters brought up to date first. */
static void d_leave(cz_server *s, uint32_t id)
{
    d_sync(s, id);
    dnode *d = &s->dn[id];
    if (d->prev != NIL)
        s->dn[d->prev].next = d->next;
    else
        s->d_head = d->next;
    if (d->next != NIL)
        s->dn[d->next].prev = d->prev;
    else
        s->d_tail = d->prev;
    s->n_decode--;
    s->phase_cnt[d->phase]--;
    s->d_sum_computed -= s->reqs[id].computed;
    heap_remove(s, id);
}

uint32_t cz_server_decode_first(const cz_server *s)
{
    return s->d_head;
}

uint32_t cz_server_decode_next(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(id < s->n_reqs);
    return s->dn[id].next;
}

/* ---- arrivals ---- */

uint32_t cz_server_on_arrival(cz_server *s, double t_s, uint32_t prompt_tokens,
                              uint32_t output_tokens, uint64_t session, uint32_t turn,
                              uint32_t cls)
{
    CZ_ASSERT(prompt_tokens > 0 && output_tokens > 0);
    CZ_ASSERT(s->n_reqs < UINT32_MAX);
    if (s->n_reqs + 1 > s->cap_reqs) {
        size_t cap = s->cap_reqs;
        cz_grow((void **)&s->reqs, &cap, s->n_reqs + 1, sizeof *s->reqs);
        cap = s->cap_reqs;
        cz_grow((void **)&s->dn, &cap, s->n_reqs + 1, sizeof *s->dn);
        s->cap_reqs = cap;
    }
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
    s->items[s->n_items++] = (cz_batch_item){id, n, r->computed, false};
    r->sched_tokens = n;
    b->total_tokens += n;
    b->prefill_tokens += n;
    b->prefill_seqs++;
    /* token i of the chunk attends to ctx_before + i + 1 positions */
    b->prefill_attn_ctx += (uint64_t)n * r->computed + (uint64_t)n * (n + 1) / 2;
}

static uint32_t last_admitted(const cz_server *s)
{
    return s->n_pf ? s->pf[s->n_pf - 1] : s->d_tail;
}

/* Preempts request `id`, the most recently admitted running one, by recompute: its KV is
 * freed and it goes to the front of the waiting queue (vLLM V1: _preempt_request +
 * waiting.prepend_request). */
static void preempt(cz_server *s, uint32_t id)
{
    CZ_ASSERT(id == last_admitted(s));
    if (s->n_pf) {
        s->n_pf--;
    } else {
        d_leave(s, id);
    }
    cz_sreq *r = &s->reqs[id];
    kv_release(s, r);
    r->computed = 0;
    r->state = CZ_SREQ_WAITING;
    wq_push_front(s, id);
    s->metrics->req[id].preemptions++;
    s->metrics->preemptions++;
}

/* Asks the policy for a victim while `need` blocks exceed the free pool; returns whether
 * anything was preempted. */
static uint32_t pick_victim(cz_server *s)
{
    cz_sched_view v = {s->n_decode + s->n_pf, last_admitted(s), s->cfg.kv_blocks - s->kv_used};
    uint32_t victim = s->sched->pick_victim(&v);
    CZ_ASSERT(victim == v.last_admitted); /* see cz_sched_ops.pick_victim */
    return victim;
}

bool cz_server_schedule(cz_server *s, double t_s, cz_batch *out)
{
    CZ_ASSERT(!s->in_flight);
    memset(out, 0, sizeof *out);
    s->n_items = 0;
    uint32_t budget = s->cfg.max_num_batched_tokens;
    bool preempted = false;

    /* 1a. the decode set: one token each; members whose next token opens a block need
     * one. When the pool is short, the most recently admitted running requests are
     * preempted (prefilling ones first: they follow the decode set in running order). */
    uint32_t phase = (uint32_t)(s->steps % s->cfg.block_tokens);
    while (s->n_decode > 0 && s->phase_cnt[phase] > s->cfg.kv_blocks - s->kv_used) {
        preempt(s, pick_victim(s));
        preempted = true;
    }
    s->kv_used += s->phase_cnt[phase];
    s->batch_decode = s->n_decode;
    out->decode_seqs = s->n_decode;
    out->decode_ctx_tokens = s->d_sum_computed + s->n_decode;
    out->total_tokens = s->n_decode;
    CZ_ASSERT(s->n_decode <= budget);
    budget -= s->n_decode;

    /* 1b. prefilling running requests, in admission order */
    for (uint32_t i = 0; i < s->n_pf && budget > 0;) {
        uint32_t id = s->pf[i];
        cz_sreq *r = &s->reqs[id];
        uint32_t need = r->prompt_tokens + r->generated - r->computed;
        CZ_ASSERT(need > 0);
        uint32_t n = need < budget ? need : budget;
        uint32_t extra = extra_blocks(s, r, n);
        bool self_preempted = false;
        while (extra > s->cfg.kv_blocks - s->kv_used) {
            uint32_t victim = pick_victim(s);
            preempted = true;
            self_preempted = victim == id;
            preempt(s, victim);
            if (self_preempted)
                break;
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
    while (!preempted && s->wq_len > 0 && budget > 0 &&
           s->n_decode + s->n_pf < s->cfg.max_num_seqs) {
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
        s->pf[s->n_pf++] = id;
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
    s->in_flight = s->n_items > 0 || s->batch_decode > 0;
    cz_metrics_timeline(s->metrics, t_s, s->kv_used, s->n_decode + s->n_pf, (uint32_t)s->wq_len,
                        out->total_tokens);
    return s->in_flight;
}

static void finish(cz_server *s, uint32_t id, double t_s, uint32_t *nf)
{
    cz_sreq *r = &s->reqs[id];
    cz_req_record *rec = &s->metrics->req[id];
    r->state = CZ_SREQ_DONE;
    kv_release(s, r);
    rec->output_tokens = r->generated;
    rec->finish_s = t_s;
    rec->outcome = CZ_REQ_COMPLETED;
    s->finished[(*nf)++] = id;
}

void cz_server_on_batch_done(cz_server *s, double t_s, const uint32_t **finished,
                             uint32_t *n_finished)
{
    CZ_ASSERT(s->in_flight);
    s->in_flight = false;
    s->metrics->steps++;
    uint32_t nf = 0;

    /* the decode set: every member computed one token and sampled the next; all of them
     * had their previous token at the previous step's end */
    if (s->batch_decode) {
        CZ_ASSERT(s->batch_decode == s->n_decode);
        cz_metrics_add_itl(s->metrics, t_s - s->last_done_s, s->n_decode);
        s->d_sum_computed += s->n_decode;
    }
    s->steps++;
    s->last_done_s = t_s;
    while (s->n_heap > 0 && s->dn[s->heap[0]].finish_k == s->steps) {
        uint32_t id = s->heap[0];
        d_leave(s, id);
        s->reqs[id].last_token_s = t_s;
        finish(s, id, t_s, &nf);
    }

    /* prefill chunks: a chunk that reaches the end of the prompt samples a token; the
     * requests that complete their prompt are a prefix of the prefilling list */
    uint32_t joined = 0;
    for (uint32_t k = 0; k < s->n_items; k++) {
        uint32_t id = s->items[k].req;
        cz_sreq *r = &s->reqs[id];
        r->computed += s->items[k].tokens;
        r->sched_tokens = 0;
        if (r->computed != r->prompt_tokens + r->generated)
            continue;
        CZ_ASSERT(s->pf[joined] == id);
        joined++;
        r->generated++;
        cz_req_record *rec = &s->metrics->req[id];
        if (r->generated == 1) {
            rec->first_token_s = t_s;
            rec->output_tokens = 1;
        } else {
            cz_metrics_add_itl(s->metrics, t_s - r->last_token_s, 1);
        }
        r->last_token_s = t_s;
        if (r->generated == r->output_tokens)
            finish(s, id, t_s, &nf);
        else
            d_join(s, id);
    }
    if (joined) {
        memmove(s->pf, s->pf + joined, (s->n_pf - joined) * sizeof *s->pf);
        s->n_pf -= joined;
    }
    s->n_items = 0;
    s->batch_decode = 0;
    *finished = s->finished;
    *n_finished = nf;
}

void cz_server_finalize(cz_server *s)
{
    for (uint32_t id = s->d_head; id != NIL; id = s->dn[id].next)
        d_sync(s, id);
    for (size_t i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].state == CZ_SREQ_RUNNING || s->reqs[i].state == CZ_SREQ_WAITING)
            s->metrics->req[i].output_tokens = s->reqs[i].generated;
}

bool cz_server_busy(const cz_server *s) { return s->in_flight; }
uint32_t cz_server_running(const cz_server *s) { return s->n_decode + s->n_pf; }
uint32_t cz_server_waiting(const cz_server *s) { return (uint32_t)s->wq_len; }
uint32_t cz_server_kv_used(const cz_server *s) { return s->kv_used; }

const cz_sreq *cz_server_request(cz_server *s, uint32_t id)
{
    CZ_ASSERT(id < s->n_reqs);
    if (s->reqs[id].state == CZ_SREQ_RUNNING && s->dn[id].heap_pos < s->n_heap &&
        s->heap[s->dn[id].heap_pos] == id)
        d_sync(s, id);
    return &s->reqs[id];
}

bool cz_server_check(const cz_server *s, cz_err *err)
{
    uint64_t blocks = 0, n_wait = 0, n_run = 0, in_decode = 0, sum_c = 0;
    uint32_t *phase = cz_xcalloc(s->cfg.block_tokens, sizeof *phase);
    bool ok = false;
    for (uint32_t id = s->d_head; id != NIL; id = s->dn[id].next) {
        const dnode *d = &s->dn[id];
        uint32_t c = d->c0 + (uint32_t)(s->steps - d->k0);
        /* a step in flight has already been given its blocks */
        uint32_t held = blocks_for(s, (uint64_t)c + (s->in_flight ? 1 : 0));
        blocks += held;
        sum_c += c;
        phase[d->phase]++;
        in_decode++;
        if (s->heap[d->heap_pos] != id) {
            cz_err_set(err, CZ_EINVAL, "decode member %u is not at its heap position", id);
            goto out;
        }
    }
    for (uint32_t i = 0; i < s->n_pf; i++)
        blocks += s->reqs[s->pf[i]].blocks;
    for (size_t i = 0; i < s->n_reqs; i++) {
        const cz_sreq *r = &s->reqs[i];
        if (r->state == CZ_SREQ_WAITING)
            n_wait++;
        if (r->state == CZ_SREQ_RUNNING)
            n_run++;
        if (r->state != CZ_SREQ_RUNNING && r->blocks != 0) {
            cz_err_set(err, CZ_EINVAL, "request %zu holds %u blocks but is not running", i,
                       r->blocks);
            goto out;
        }
    }
    for (uint32_t i = 0; i < s->n_pf; i++) {
        const cz_sreq *r = &s->reqs[s->pf[i]];
        if (r->blocks < blocks_for(s, (uint64_t)r->computed + r->sched_tokens)) {
            cz_err_set(err, CZ_EINVAL, "request %u has %u tokens of KV in %u blocks", s->pf[i],
                       r->computed + r->sched_tokens, r->blocks);
            goto out;
        }
    }
    if (in_decode != s->n_decode || in_decode != s->n_heap || sum_c != s->d_sum_computed) {
        cz_err_set(err, CZ_EINVAL, "decode set: %llu listed, %u counted, %u in the heap",
                   (unsigned long long)in_decode, s->n_decode, s->n_heap);
        goto out;
    }
    for (uint32_t p = 0; p < s->cfg.block_tokens; p++) {
        if (phase[p] != s->phase_cnt[p]) {
            cz_err_set(err, CZ_EINVAL, "decode set: phase %u counts %u, members %u", p,
                       s->phase_cnt[p], phase[p]);
            goto out;
        }
    }
    if (blocks != s->kv_used || s->kv_used > s->cfg.kv_blocks) {
        cz_err_set(err, CZ_EINVAL, "blocks held %llu, pool used %u of %u",
                   (unsigned long long)blocks, s->kv_used, s->cfg.kv_blocks);
        goto out;
    }
    if (n_wait != s->wq_len || n_run != (uint64_t)s->n_decode + s->n_pf) {
        cz_err_set(err, CZ_EINVAL, "queues hold %zu waiting and %u running, states say %llu/%llu",
                   s->wq_len, s->n_decode + s->n_pf, (unsigned long long)n_wait,
                   (unsigned long long)n_run);
        goto out;
    }
    ok = true;
out:
    free(phase);
    return ok;
}
