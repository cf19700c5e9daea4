/* cz_server.c - see cz_server.h. The scheduling loop mirrors vLLM V1's Scheduler.schedule
 * (running first, then waiting; preemption by recompute; admission only in steps without
 * preemption); docs/serving-core.md spells out each rule. */
#include "cz_server.h"
#include "cz_evidx.h"
#include "cz_pcache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define NO_REC UINT64_MAX

/* Per-sequence bookkeeping beside the public cz_seq. */
typedef struct snode {
    uint32_t prev, next; /* decode-set list, or the idle LRU list (never both) */
    uint32_t heap_pos;   /* position in the finish heap (decode members) */
    uint32_t phase;      /* steps k with k % block_tokens == phase need a new block */
    uint64_t k0;         /* steps executed when the sequence joined the decode set */
    uint32_t c0, g0;     /* computed and generated when it joined */
    uint32_t store_to;   /* context length covered by the store in flight */
    uint32_t load_tokens; /* tokens the load in flight brings back */
    uint32_t remote;     /* the open turn's context prefix a peer computed (cz_server_import) */
    uint8_t in_decode, in_lru, in_pf;
    uint8_t ctx_counted; /* its context's growth counts in ctx_grown (cz_server_count_ctx) */
    uint8_t protect;     /* next-use eviction: speech started, the KV is about to be reused */
    uint8_t preloading;  /* a speech-triggered load is in flight (blocks already held) */
    uint8_t preloaded;   /* a preload landed for the coming turn */
    uint8_t ckpt;        /* BROS: its overwritten tail is being checkpointed to host memory;
                            it is admitted (loading the tail back) once that landed */
    uint8_t pl_cancelled; /* its preload was cancelled: the transfer in flight is void */
    uint32_t pl_prot;     /* blocks of warmed KV it holds protected (counted in the cap) */
    uint8_t pl_fell;      /* its coming turn falls back to a synchronous load */
    uint32_t tail_from;  /* BROS: its host copy holds only tokens from here on (0: all);
                            useless once the resident prefix below it is lost */
    double play_end_s;   /* when the client's playback of the last reply ends (NaN: unknown) */
    double reply_ema_s;  /* moving average of the user's reply time (NaN: none yet) */
    double speech_ema_s; /* moving average of the time from the user's speech start to the
                            turn reaching this stage (NaN: none yet) */
    uint8_t speech_open; /* a speech start was reported and its turn has not come yet */
    uint8_t in_idle;     /* its blocks count as idle (cached) KV: idle, or waiting and not
                            yet admitted */
    uint64_t run_stamp;  /* when it last joined the running list (admitted, or resumed) */
    uint8_t reusable;    /* closed, and its id is on the free list */
} snode;

/* Automatic prefix caching: a sequence's block hashes and the cached blocks it holds
 * (vLLM's "Automatic Prefix Caching" design, docs.vllm.ai; docs/serving-core.md). Both
 * arrays hold `cap` blocks, reserved when a turn or a feed sets how far the context can
 * grow, so scheduling never allocates. */
typedef struct pc_seq {
    uint64_t *hash;  /* hash of each full block of the context, [0, n_hash) known */
    uint32_t *ent;   /* the cache entry of each of its first n_reg blocks (NONE: its own
                        block, uncached: another block had its hash when it was filled) */
    uint32_t n_hash, n_reg, cap;
    uint32_t n_trace; /* its first n_trace hashes are a trace's (published to a cache
                         watcher, as other sequences can share them) */
    uint64_t salt;   /* its lineage: blocks past the trace's hashes chain it with their
                        position; renewed when the context is cut */
    uint8_t looked;  /* the lookup of this admission was made (cleared per turn and at a
                        preemption) */
} pc_seq;

/* A decode member's place in the finish heap, its keys beside it (the heap is walked
 * without touching the members' nodes). */
typedef struct hslot {
    uint64_t finish_k; /* steps executed when it reaches its budget or notify_at */
    uint64_t join_seq; /* tie-break: join order */
    uint32_t id;
} hslot;

struct cz_server {
    cz_server_config cfg;
    cz_sched_ops sched;
    cz_metrics *metrics;

    cz_seq *seqs;
    snode *sn;
    size_t n_seqs, cap_seqs; /* slots ever used; a closed one is reused (free_ids) */
    uint32_t *free_ids;      /* closed slots with no transfer outstanding, reused last in
                                first out */
    size_t n_free, cap_free;

    /* waiting queue: a ring buffer of ids; preempted sequences go to the front */
    uint32_t *wq;
    size_t wq_cap, wq_head, wq_len; /* wq_cap: a power of two */
    uint32_t bt_shift; /* log2 of block_tokens when a power of two, else 32 (divide) */

    /* running = decode set (list, admission order) followed by the prefilling sequences
     * (array, admission order); stalled and loading sequences hold running slots too */
    uint32_t d_head, d_tail, n_decode;
    uint32_t *pf; /* capacity max_num_seqs */
    uint32_t n_pf;
    uint32_t n_stalled, n_loading;
    hslot *heap;    /* decode set by (finish_k, join_seq), capacity max_num_seqs */
    uint32_t n_heap;
    uint32_t *phase_cnt; /* decode members per block phase, block_tokens entries */
    uint32_t *cc_phase_cnt; /* ... of them, those whose context growth is counted */
    uint64_t ctx_grown;  /* blocks the counted sequences' contexts grew into as they
                            generated (cz_server_ctx_grown) */
    uint64_t d_sum_computed;
    uint64_t join_seq;
    uint64_t run_clock; /* stamps of the running list, in joining order */
    uint64_t steps;     /* steps completed (K) */
    uint32_t due[4];    /* decode members due at the next step's end, as the last step left
                           them (a prefetch hint) */
    uint32_t n_due;
    double last_done_s; /* time of the last step completion */

    /* idle sequences whose KV may be evicted, least recently used first */
    uint32_t lru_head, lru_tail;
    uint64_t lru_blocks;  /* blocks held by the sequences in the idle LRU: what eviction
                             can free */
    uint32_t kv_idle_blocks;
    uint64_t host_tokens;
    uint64_t pulled_tokens; /* disaggregation: KV tokens loaded from peers (remote loads) */
    uint64_t sent_tokens;   /* ... and pulled from this replica by peers (cz_server_note_sent) */

    cz_cand *cands;       /* ordering policies: the ready set of a step */
    size_t cap_cands;
    bool ordered;         /* the policy orders every step (no aggregate decode set) */
    uint32_t batch_cap;   /* the ordering policy's batch-size cap (0: none) */
    double wake_s;        /* the earliest wake-up a policy asked for in the last step */
    cz_batch_item *items; /* prefill chunks of the batch in flight, capacity max_num_seqs */
    uint32_t n_items;
    uint32_t batch_decode;
    bool in_flight;
    bool run_hold;       /* cz_server_run_hold */

    uint32_t *turn_done;   /* capacity max_num_seqs */
    uint32_t n_turn_done;
    uint32_t *first_token; /* capacity max_num_seqs */
    uint32_t n_first_token;
    uint32_t *milestone;   /* capacity max_num_seqs */
    uint32_t n_milestone;
    uint32_t *stalled;     /* capacity max_num_seqs */
    uint32_t n_stalled_ev;
    double saturated_at_s;
    double tl_next_s;
    bool tl_idle;         /* the last timeline row showed the replica idle (or none yet) */
    cz_xfer *xfers;        /* requested transfers not yet taken */
    size_t n_xfers, cap_xfers;
    cz_xfer *xfers_out;    /* handed to the driver */
    size_t cap_xfers_out;
    uint32_t kv_used;
    cz_evidx evx;         /* next-use eviction: the evictable sessions by next use */
    double reply_sum_s;   /* reply times observed, for the workload-level prior */
    uint64_t reply_n;
    double speech_sum_s;  /* speech-start-to-turn times observed, likewise */
    uint64_t speech_n;
    cz_preload_stats pl;
    uint64_t pl_protected; /* warmed KV blocks protected, against the cap */
    uint32_t *pl_ids;     /* preloads in flight, not cancelled, in start order */
    size_t n_pl, cap_pl;
    uint64_t overwrites, overwrite_tokens;

    /* automatic prefix caching (cfg.prefix_caching): the pool's cached blocks, and each
     * sequence's hashes and cached blocks (pcs, beside seqs). kv_used counts every block
     * in use once: the sequences' own blocks plus the cached blocks some sequence holds;
     * cached blocks no sequence holds wait in the cache's free queue and count as free */
    bool apc;
    cz_pcache pc;
    pc_seq *pcs;
    uint64_t pc_lineage;
    cz_prefix_stats pcst;
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
        .kv_idle = CZ_KV_IDLE_DROP,
        .kv_evict = CZ_EVICT_LRU,
        .reply_prior_s = 2.0,
        .speech_prior_s = 2.0,
        .preload_protect_fraction = 0.1,
    };
}

cz_server *cz_server_create(const cz_server_config *cfg, const cz_sched_ops *sched,
                            cz_metrics *metrics, uint64_t expected_seqs)
{
    CZ_ASSERT(cfg->max_num_seqs > 0 && cfg->max_num_batched_tokens > 0);
    CZ_ASSERT(cfg->block_tokens > 0 && cfg->kv_blocks > 0);
    /* vLLM's SchedulerConfig requires it; every decoding sequence then fits every step */
    CZ_ASSERT(cfg->max_num_batched_tokens >= cfg->max_num_seqs);
    CZ_ASSERT(cfg->kv_idle == CZ_KV_IDLE_DROP || cfg->kv_idle == CZ_KV_IDLE_OFFLOAD);
    CZ_ASSERT(sched && (sched->pick_victim || sched->select) && metrics);
    cz_server *s = cz_xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    if (s->cfg.kv_evict_unit == CZ_EVICT_UNIT_DEFAULT)
        s->cfg.kv_evict_unit =
            cfg->kv_evict == CZ_EVICT_LRU ? CZ_EVICT_UNIT_SESSION : CZ_EVICT_UNIT_BLOCK;
    s->sched = *sched;
    s->metrics = metrics;
    /* slots follow the live sequences, not the sessions of the whole workload */
    s->cap_seqs = expected_seqs && expected_seqs < 1024 ? expected_seqs : 1024;
    s->seqs = cz_xmalloc(s->cap_seqs * sizeof *s->seqs);
    s->sn = cz_xmalloc(s->cap_seqs * sizeof *s->sn);
    s->wq_cap = 1024;
    s->bt_shift = 32;
    for (uint32_t k = 0; k < 32; k++)
        if (cfg->block_tokens == 1u << k)
            s->bt_shift = k;
    s->wq = cz_xmalloc(s->wq_cap * sizeof *s->wq);
    s->d_head = s->d_tail = NIL;
    s->lru_head = s->lru_tail = NIL;
    s->pf = cz_xmalloc(cfg->max_num_seqs * sizeof *s->pf);
    s->heap = cz_xmalloc(cfg->max_num_seqs * sizeof *s->heap);
    s->phase_cnt = cz_xcalloc(cfg->block_tokens, sizeof *s->phase_cnt);
    s->cc_phase_cnt = cz_xcalloc(cfg->block_tokens, sizeof *s->cc_phase_cnt);
    s->items = cz_xmalloc(cfg->max_num_seqs * sizeof *s->items);
    s->turn_done = cz_xmalloc(cfg->max_num_seqs * sizeof *s->turn_done);
    s->first_token = cz_xmalloc(cfg->max_num_seqs * sizeof *s->first_token);
    s->milestone = cz_xmalloc(cfg->max_num_seqs * sizeof *s->milestone);
    s->stalled = cz_xmalloc(cfg->max_num_seqs * sizeof *s->stalled);
    s->saturated_at_s = NAN;
    s->tl_next_s = -INFINITY;
    s->tl_idle = true;
    s->cap_xfers = s->cap_xfers_out = 64;
    s->xfers = cz_xmalloc(s->cap_xfers * sizeof *s->xfers);
    s->xfers_out = cz_xmalloc(s->cap_xfers_out * sizeof *s->xfers_out);
    s->last_done_s = NAN;
    s->wake_s = INFINITY;
    s->ordered = sched->select != NULL;
    cz_evidx_init(&s->evx);
    s->apc = cfg->prefix_caching;
    if (s->apc) {
        /* the pool's blocks bound the cached ones: the table is sized once */
        cz_pcache_init(&s->pc, cfg->kv_blocks);
        s->pcs = cz_xcalloc(s->cap_seqs, sizeof *s->pcs);
        cz_metrics_prefix_caching(metrics, cfg->timeline_stage);
        /* a window frees the blocks behind it: no prefix to share (vLLM keeps a sliding
         * window's cache apart) */
        CZ_ASSERT(cfg->kv_window_tokens == 0);
    }
    CZ_ASSERT(cfg->kv_evict <= CZ_EVICT_NEXT_USE_SCAN && cfg->kv_evict_unit <= CZ_EVICT_UNIT_BLOCK);
    /* partial (suffix) eviction keeps a prefix; a window keeps no prefix */
    CZ_ASSERT(s->cfg.kv_evict_unit == CZ_EVICT_UNIT_SESSION || cfg->kv_window_tokens == 0);
    CZ_ASSERT(!cfg->kv_bidirectional || (cfg->kv_window_tokens == 0 && s->ordered));
    /* the aggregate decode set assumes every member grows by whole blocks */
    CZ_ASSERT(cfg->kv_window_tokens == 0 || s->ordered);
    return s;
}

void cz_server_free(cz_server *s)
{
    if (!s)
        return;
    cz_evidx_free(&s->evx);
    if (s->apc) {
        for (size_t i = 0; i < s->n_seqs; i++) {
            free(s->pcs[i].hash);
            free(s->pcs[i].ent);
        }
        free(s->pcs);
        cz_pcache_free(&s->pc);
    }
    free(s->pl_ids);
    free(s->seqs);
    free(s->sn);
    free(s->free_ids);
    free(s->wq);
    free(s->pf);
    free(s->heap);
    free(s->phase_cnt);
    free(s->cc_phase_cnt);
    free(s->cands);
    free(s->items);
    free(s->turn_done);
    free(s->first_token);
    free(s->milestone);
    free(s->stalled);
    free(s->xfers);
    free(s->xfers_out);
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
        nq[i] = s->wq[(s->wq_head + i) & (s->wq_cap - 1)];
    free(s->wq);
    s->wq = nq;
    s->wq_cap = ncap;
    s->wq_head = 0;
}

static void wq_push_back(cz_server *s, uint32_t id)
{
    wq_reserve(s);
    s->wq[(s->wq_head + s->wq_len) & (s->wq_cap - 1)] = id;
    s->wq_len++;
}

static void wq_push_front(cz_server *s, uint32_t id)
{
    wq_reserve(s);
    s->wq_head = (s->wq_head + s->wq_cap - 1) & (s->wq_cap - 1);
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
    s->wq_head = (s->wq_head + 1) & (s->wq_cap - 1);
    s->wq_len--;
}

/* The sequences at the front of the waiting queue are admitted in the coming steps after
 * waiting since they arrived: their state is fetched towards the cache ahead of that. The
 * front's node is read, not only prefetched: in interleaved runs of
 * experiments/bench/sim_100k_1h.json the read made the simulator about 4 % faster, where
 * the prefetch alone left the admission's first read of the node as its costliest load. */
static void wq_prefetch(const cz_server *s)
{
    for (size_t k = 0; k < s->wq_len && k < 2; k++) {
        uint32_t id = s->wq[(s->wq_head + k) & (s->wq_cap - 1)];
        const char *d = (const char *)&s->sn[id], *q = (const char *)&s->seqs[id];
        CZ_PREFETCH(d); /* the fields read span two lines of each */
        CZ_PREFETCH(d + 64);
        CZ_PREFETCH(q);
        CZ_PREFETCH(q + 64);
        if (k == 0)
            (void)*(const volatile uint8_t *)&s->sn[id].ckpt;
    }
}

/* Removes `id` from anywhere in the waiting queue (barge-in); O(queue). */
static void wq_remove(cz_server *s, uint32_t id)
{
    size_t w = 0;
    for (size_t i = 0; i < s->wq_len; i++) {
        uint32_t x = s->wq[(s->wq_head + i) & (s->wq_cap - 1)];
        if (x != id)
            s->wq[(s->wq_head + w++) & (s->wq_cap - 1)] = x;
    }
    CZ_ASSERT(w + 1 == s->wq_len);
    s->wq_len = w;
}

/* ---- KV blocks ---- */

uint32_t cz_kv_blocks_held(uint64_t tokens, uint32_t block_tokens, uint32_t sinks,
                           uint32_t window)
{
    CZ_ASSERT(block_tokens > 0);
    uint64_t all = (tokens + block_tokens - 1) / block_tokens;
    if (window == 0 || tokens <= (uint64_t)sinks + window)
        return (uint32_t)all;
    uint64_t sink_blocks = ((uint64_t)sinks + block_tokens - 1) / block_tokens;
    uint64_t first = (tokens - window) / block_tokens; /* the window's first block */
    if (first < sink_blocks)
        return (uint32_t)all;
    return (uint32_t)(sink_blocks + all - first);
}

uint64_t cz_kv_attn_tokens(uint64_t tokens, uint32_t sinks, uint32_t window)
{
    if (window == 0 || tokens <= (uint64_t)sinks + window)
        return tokens;
    return (uint64_t)sinks + window;
}

static uint32_t blocks_for(const cz_server *s, uint64_t tokens)
{
    if (s->cfg.kv_window_tokens == 0 && s->bt_shift < 32) /* cz_kv_blocks_held, shifting */
        return (uint32_t)((tokens + s->cfg.block_tokens - 1) >> s->bt_shift);
    return cz_kv_blocks_held(tokens, s->cfg.block_tokens, s->cfg.kv_sink_tokens,
                             s->cfg.kv_window_tokens);
}

/* Blocks a sequence holding `blocks` blocks and `computed` tokens must add to hold `n`
 * more tokens. The free slots of its last block absorb small steps (decodes) with no
 * division. A windowed sequence may hold more than it needs (the window slid); it adds
 * none then, and gives them back when its step ends. */
static uint32_t extra_blocks_at(const cz_server *s, uint32_t blocks, uint32_t computed,
                                uint32_t n)
{
    if (s->cfg.kv_window_tokens) {
        uint32_t need = blocks_for(s, (uint64_t)computed + n);
        return need > blocks ? need - blocks : 0;
    }
    uint64_t slack = (uint64_t)blocks * s->cfg.block_tokens - computed;
    if (n <= slack)
        return 0;
    return blocks_for(s, n - slack);
}

static uint32_t extra_blocks(const cz_server *s, const cz_seq *q, uint32_t n)
{
    return extra_blocks_at(s, q->blocks, q->computed, n);
}

/* Free blocks: never used, or cached with no holder (automatic prefix caching counts
 * those as free, as vLLM's block pool does). */
static uint32_t kv_free(const cz_server *s)
{
    return s->cfg.kv_blocks - s->kv_used;
}

/* `n` more blocks go into use (n <= kv_free). With prefix caching they come from the
 * never-used blocks first, then from the cache's free queue, least recently freed first:
 * each such block's hash is forgotten (vLLM's BlockPool.get_new_blocks evicts the cached
 * block it pops). */
static void kv_take(cz_server *s, uint32_t n)
{
    CZ_ASSERT(n <= kv_free(s));
    s->kv_used += n;
    while (s->apc && s->kv_used + s->pc.n_free > s->cfg.kv_blocks) {
        cz_pcache_evict(&s->pc);
        s->pcst.evictions++;
    }
}

/* ---- automatic prefix caching (vLLM's APC; docs/serving-core.md) ---- */

#define PC_SEED_TRACE 0x6a09e667f3bcc909ull   /* chain start of blocks a trace names */
#define PC_SEED_SEQ 0xbb67ae8584caa73bull     /* chain start of a lineage's own blocks */
#define PC_GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t pc_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A fresh lineage for a sequence's own blocks (unique within the server). */
static uint64_t pc_new_salt(cz_server *s)
{
    return pc_mix(++s->pc_lineage * PC_GOLDEN);
}

/* Makes room in `id`'s hash and entry arrays for a context of `tokens` tokens. Called when
 * a turn or a feed sets how far the context can grow (never while scheduling). */
static void pc_reserve(cz_server *s, uint32_t id, uint64_t tokens)
{
    pc_seq *p = &s->pcs[id];
    uint64_t need = blocks_for(s, tokens) + 1;
    if (need <= p->cap)
        return;
    uint64_t cap = p->cap ? p->cap : 16;
    while (cap < need)
        cap *= 2;
    CZ_ASSERT(cap <= UINT32_MAX);
    p->hash = cz_xrealloc(p->hash, cap, sizeof *p->hash);
    p->ent = cz_xrealloc(p->ent, cap, sizeof *p->ent);
    p->cap = (uint32_t)cap;
}

/* The hash of full block j of `id`'s context: known, or chained now from the block before
 * it, the sequence's lineage and the position (j < cap). */
static uint64_t pc_hash(cz_server *s, uint32_t id, uint32_t j)
{
    pc_seq *p = &s->pcs[id];
    CZ_ASSERT(j < p->cap);
    while (p->n_hash <= j) {
        uint32_t k = p->n_hash;
        uint64_t prev = k ? p->hash[k - 1] : PC_SEED_SEQ;
        p->hash[k] = pc_mix(prev ^ pc_mix(p->salt + PC_GOLDEN * ((uint64_t)k + 1)));
        p->n_hash++;
    }
    return p->hash[j];
}

uint32_t cz_turn_block_count(uint32_t block_tokens, uint32_t in_tokens,
                             const cz_turn_hashes *h)
{
    CZ_ASSERT(block_tokens > 0);
    if (!h || !h->ids || h->n == 0 || h->block_tokens == 0)
        return 0;
    uint64_t covered = (uint64_t)h->n * h->block_tokens;
    if (covered > in_tokens)
        covered = in_tokens;
    return (uint32_t)(covered / block_tokens);
}

uint32_t cz_turn_block_hashes(uint32_t block_tokens, uint32_t in_tokens,
                              const cz_turn_hashes *h, uint64_t *out, uint32_t cap)
{
    uint32_t nb = cz_turn_block_count(block_tokens, in_tokens, h);
    if (nb > cap)
        nb = cap;
    uint64_t chain = PC_SEED_TRACE, next = 0;
    for (uint64_t j = 0; j < nb; j++) {
        uint64_t last = ((j + 1) * block_tokens - 1) / h->block_tokens;
        for (; next <= last; next++)
            chain = pc_mix(chain ^ pc_mix((uint64_t)h->ids[next] + PC_GOLDEN));
        chain = pc_mix(chain + PC_GOLDEN * (j + 1));
        out[j] = chain;
    }
    return nb;
}

/* The blocks of an empty context named by a trace's hashes (cz_server_turn_hashed,
 * cz_turn_block_hashes). */
static void pc_trace_hashes(cz_server *s, uint32_t id, uint32_t in_tokens,
                            const cz_turn_hashes *h)
{
    pc_seq *p = &s->pcs[id];
    CZ_ASSERT(cz_turn_block_count(s->cfg.block_tokens, in_tokens, h) <= p->cap);
    p->n_hash = cz_turn_block_hashes(s->cfg.block_tokens, in_tokens, h, p->hash, p->cap);
    p->n_trace = p->n_hash;
}

/* Registers the full blocks of `id` that lie within its first `tokens` tokens and are not
 * yet (as vLLM's cache_full_blocks): a block whose hash no cached block has becomes a
 * cached block the sequence holds; one whose hash another block already has stays the
 * sequence's own (vLLM keeps such duplicates apart too). The pool's use is unchanged. */
static void pc_register(cz_server *s, uint32_t id, uint64_t tokens)
{
    pc_seq *p = &s->pcs[id];
    uint64_t full = tokens / s->cfg.block_tokens;
    if (full > s->seqs[id].blocks)
        full = s->seqs[id].blocks;
    for (uint32_t j = p->n_reg; j < full; j++) {
        uint64_t h = pc_hash(s, id, j);
        p->ent[j] = cz_pcache_find(&s->pc, h) == CZ_PCACHE_NONE ? cz_pcache_insert(&s->pc, h)
                                                                : CZ_PCACHE_NONE;
        /* a trace's block can be another sequence's too: the watcher hears of it */
        if (p->ent[j] != CZ_PCACHE_NONE && j < p->n_trace)
            cz_pcache_publish(&s->pc, p->ent[j]);
    }
    if (full > p->n_reg)
        p->n_reg = (uint32_t)full;
}

/* Sequence `id` keeps its first `keep` blocks and gives back the rest, tail first: its own
 * blocks become free, cached ones lose a holder and, with none left, go to the cache's free
 * queue still cached (vLLM frees a request's blocks in reverse, so its tail is evicted
 * first). Its full computed blocks are registered before, so what it computed stays
 * cached. Returns the blocks that became free. */
static uint32_t blocks_trim(cz_server *s, uint32_t id, uint32_t keep)
{
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(keep <= q->blocks);
    uint32_t freed = q->blocks - keep;
    if (s->apc) {
        pc_seq *p = &s->pcs[id];
        pc_register(s, id, q->computed);
        freed = 0;
        for (uint32_t j = q->blocks; j-- > keep;) {
            if (j < p->n_reg && p->ent[j] != CZ_PCACHE_NONE)
                freed += cz_pcache_release(&s->pc, p->ent[j]);
            else
                freed++;
        }
        if (p->n_reg > keep)
            p->n_reg = keep;
    }
    CZ_ASSERT(s->kv_used >= freed);
    s->kv_used -= freed;
    q->blocks = keep;
    return freed;
}

static void kv_release(cz_server *s, uint32_t id)
{
    blocks_trim(s, id, 0);
}

/* The context of `id` was cut to `ctx` tokens (a barge-in, a truncation), after its blocks
 * were trimmed: a cached block it holds that now reaches past the cut would take new
 * tokens under its old hash, so it stops being cached (held by this sequence alone) or is
 * given back (shared: its KV below the cut is recomputed); hashes past the cut are dropped
 * and the lineage renewed, so the new tokens never match what was cut. */
static void pc_cut(cz_server *s, uint32_t id, uint32_t ctx)
{
    cz_seq *q = &s->seqs[id];
    pc_seq *p = &s->pcs[id];
    uint32_t bt = s->cfg.block_tokens;
    for (uint32_t j = p->n_reg; j-- > 0 && (uint64_t)(j + 1) * bt > ctx;) {
        uint32_t e = p->ent[j];
        if (e == CZ_PCACHE_NONE)
            continue;
        if (s->pc.blk[e].ref == 1) {
            cz_pcache_forget(&s->pc, e);
            p->ent[j] = CZ_PCACHE_NONE;
        } else {
            CZ_ASSERT(q->blocks == j + 1);
            blocks_trim(s, id, j);
            if (q->computed > j * bt)
                q->computed = j * bt;
        }
    }
    if (p->n_hash > ctx / bt) {
        p->n_hash = ctx / bt;
        p->salt = pc_new_salt(s);
    }
    if (p->n_trace > p->n_hash)
        p->n_trace = p->n_hash;
}

/* The cache's hit for waiting sequence `id`: the longest run of consecutive cached blocks
 * after its resident prefix (which must end on a block boundary), within its first
 * ctx - 1 tokens (vLLM's max_cache_hit_length = num_tokens - 1: at least one token is
 * computed, so a context that is all cached full blocks recomputes its last block). In
 * blocks; *queued: how many of them wait in the free queue. Takes nothing. */
static uint32_t pc_peek(cz_server *s, uint32_t id, uint32_t *queued)
{
    const cz_seq *q = &s->seqs[id];
    uint32_t bt = s->cfg.block_tokens;
    *queued = 0;
    if (!s->apc || s->pcs[id].looked || q->computed % bt != 0 || q->blocks != q->computed / bt)
        return 0;
    uint32_t ctx = q->tokens_in + q->generated;
    uint32_t max = ctx ? (ctx - 1) / bt : 0, n = 0;
    for (uint32_t j = q->blocks; j < max; j++) {
        uint32_t e = cz_pcache_find(&s->pc, pc_hash(s, id, j));
        if (e == CZ_PCACHE_NONE)
            break;
        *queued += s->pc.blk[e].ref == 0;
        n++;
    }
    return n;
}

/* Takes the `hit` blocks pc_peek found for `id`: each gains a holder (leaving the free
 * queue if it was there) and counts as computed. */
static void pc_take(cz_server *s, uint32_t id, uint32_t hit)
{
    cz_seq *q = &s->seqs[id];
    pc_seq *p = &s->pcs[id];
    pc_register(s, id, q->computed);
    CZ_ASSERT(p->n_reg == q->blocks);
    for (uint32_t k = 0; k < hit; k++) {
        uint32_t j = q->blocks, e = cz_pcache_find(&s->pc, pc_hash(s, id, j));
        CZ_ASSERT(e != CZ_PCACHE_NONE);
        s->kv_used += cz_pcache_hold(&s->pc, e);
        p->ent[j] = e;
        p->n_reg = ++q->blocks;
        q->computed += s->cfg.block_tokens;
    }
}

/* Counts the lookup of an admission of `id` whose resident prefix was `resident` tokens
 * and whose hit was `hit` blocks past it (vLLM's PrefixCacheStats: queries and hits in tokens, a
 * preempted request's apart); a turn's first sets its record's cached_tokens (vLLM's
 * num_cached_tokens). An admission after a load landed (from host memory or a peer) is
 * the same request's, already looked up: not counted again. */
static void pc_record(cz_server *s, uint32_t id, uint32_t resident, uint32_t hit)
{
    const cz_seq *q = &s->seqs[id];
    if (s->pcs[id].looked) {
        CZ_ASSERT(hit == 0);
        return;
    }
    s->pcs[id].looked = 1;
    cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
    /* as vLLM counts a follow-up turn, a new request whose prompt holds the conversation:
     * every prompt token is looked up, and the history this replica still holds (the
     * session's idle KV, cz_server's stand-in for its cached blocks) is hit */
    uint64_t queries = (uint64_t)q->tokens_in + q->generated;
    uint64_t hits = resident + (uint64_t)hit * s->cfg.block_tokens;
    bool preempted = rec->preemptions > 0;
    if (preempted) {
        s->pcst.preempted_lookups++;
        s->pcst.preempted_queries += queries;
        s->pcst.preempted_hits += hits;
    } else {
        s->pcst.lookups++;
        s->pcst.queries += queries;
        s->pcst.hits += hits;
        rec->cached_tokens = (uint32_t)hits;
    }
    cz_metrics_prefix_lookup(s->metrics, s->cfg.timeline_stage, queries, hits, preempted);
}

void cz_server_prefix_stats(const cz_server *s, cz_prefix_stats *out)
{
    *out = s->pcst;
    out->cached_blocks = s->apc ? s->pc.n_live : 0;
    out->free_cached_blocks = s->apc ? s->pc.n_free : 0;
}

void cz_server_watch_cache(cz_server *s, const cz_pcache_watch *w)
{
    CZ_ASSERT(!s->run_hold);
    if (s->apc)
        cz_pcache_set_watch(&s->pc, w);
}

uint32_t cz_server_seq_cached_blocks(const cz_server *s, uint32_t id, uint32_t *held)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    *held = 0;
    if (!s->apc)
        return 0;
    const cz_seq *q = &s->seqs[id];
    const pc_seq *p = &s->pcs[id];
    uint32_t n = q->computed / s->cfg.block_tokens;
    if (n > q->blocks)
        n = q->blocks;
    bool in_use = true; /* its own blocks are in use; then while the cached ones are held */
    *held = n;
    for (uint32_t e; n < p->n_hash && (e = cz_pcache_find(&s->pc, p->hash[n])) != CZ_PCACHE_NONE;
         n++) {
        in_use = in_use && s->pc.blk[e].ref > 0;
        *held += in_use;
    }
    return n;
}

uint32_t cz_server_held_prefix(const cz_server *s, const uint64_t *hash, uint32_t n)
{
    /* under a run too: its steps change no block's holders (cz_server.h) */
    if (!s->apc)
        return 0;
    uint32_t k = 0, e;
    while (k < n && (e = cz_pcache_find(&s->pc, hash[k])) != CZ_PCACHE_NONE &&
           s->pc.blk[e].ref > 0)
        k++;
    return k;
}

bool cz_server_check_published(const cz_server *s, bool (*has)(void *ctx, uint64_t hash),
                               void *ctx, uint32_t *n_published, cz_err *err)
{
    CZ_ASSERT(!s->run_hold);
    *n_published = 0;
    if (!s->apc)
        return true;
    for (uint32_t e = 0; e < s->pc.cap; e++) {
        const cz_pcache_blk *b = &s->pc.blk[e];
        bool live = cz_pcache_find(&s->pc, b->hash) == e;
        if (!live || b->tag == CZ_PCACHE_NONE)
            continue;
        (*n_published)++;
        if (!has(ctx, b->hash)) {
            cz_err_set(err, CZ_EINVAL, "cached block %u (hash %016llx) is published but the "
                       "watcher does not hold it", e, (unsigned long long)b->hash);
            return false;
        }
    }
    /* every trace block a sequence holds under its hash is published */
    for (size_t i = 0; i < s->n_seqs; i++) {
        const pc_seq *p = &s->pcs[i];
        for (uint32_t j = 0; j < p->n_reg && j < p->n_trace; j++) {
            uint32_t e = p->ent[j];
            if (e != CZ_PCACHE_NONE && s->pc.watch.cached && s->pc.blk[e].tag == CZ_PCACHE_NONE) {
                cz_err_set(err, CZ_EINVAL, "sequence %zu's trace block %u (entry %u) is cached "
                           "but not published", i, j, e);
                return false;
            }
        }
    }
    return true;
}

/* ---- transfers ---- */

static void xfer_request(cz_server *s, uint32_t id, uint32_t first, uint32_t tokens,
                         bool to_host)
{
    cz_grow((void **)&s->xfers, &s->cap_xfers, s->n_xfers + 1, sizeof *s->xfers);
    s->xfers[s->n_xfers++] = (cz_xfer){id, tokens, to_host, first, false};
}

/* The load of admitted sequence `id`'s context up to `load` tokens, the part not resident:
 * from a peer when the turn imports it (loadable_at), else from host memory. */
static void load_request(cz_server *s, uint32_t id, uint32_t load)
{
    const cz_seq *q = &s->seqs[id];
    xfer_request(s, id, q->computed, load - q->computed, false);
    bool remote = s->sn[id].remote == load; /* loadable_at's choice */
    s->xfers[s->n_xfers - 1].remote = remote;
    if (remote)
        s->pulled_tokens += load - q->computed;
}

void cz_server_note_sent(cz_server *s, uint32_t tokens)
{
    CZ_ASSERT(!s->run_hold);
    s->sent_tokens += tokens;
}

void cz_server_import(cz_server *s, uint32_t id, uint32_t tokens)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs && s->cfg.kv_import);
    const cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->turn_open && q->state == CZ_SEQ_WAITING && tokens < q->tokens_in + q->generated);
    s->sn[id].remote = tokens;
}

const cz_xfer *cz_server_take_xfers(cz_server *s, uint32_t *n)
{
    CZ_ASSERT(!s->run_hold);
    if (s->n_xfers == 0) { /* the common case: nothing asked for */
        *n = 0;
        return s->xfers_out;
    }
    cz_grow((void **)&s->xfers_out, &s->cap_xfers_out, s->n_xfers, sizeof *s->xfers_out);
    memcpy(s->xfers_out, s->xfers, s->n_xfers * sizeof *s->xfers);
    *n = (uint32_t)s->n_xfers;
    s->n_xfers = 0;
    return s->xfers_out;
}

/* ---- the idle LRU ---- */

/* LiveServe's next-use estimate (section 5.1, Eq. 4) as an absolute time: the end of the
 * client's playback (the last use when there is no telemetry, which orders like LRU) plus
 * the user's expected reply time (this session's moving average, else the mean over the
 * sessions observed, else the prior). */
static double next_use_s(const cz_server *s, uint32_t id)
{
    const snode *d = &s->sn[id];
    if (s->seqs[id].turn_open)
        return -INFINITY; /* waiting for admission: needed now */
    double last = s->seqs[id].last_token_s;
    double base = !isnan(d->play_end_s) && !(d->play_end_s < last) ? d->play_end_s : last;
    if (isnan(base))
        base = 0.0;
    double reply = !isnan(d->reply_ema_s) ? d->reply_ema_s
                   : s->reply_n           ? s->reply_sum_s / (double)s->reply_n
                                          : s->cfg.reply_prior_s;
    return base + reply;
}

static void lru_push(cz_server *s, uint32_t id)
{
    snode *d = &s->sn[id];
    CZ_ASSERT(!d->in_lru && !d->in_decode);
    d->prev = s->lru_tail;
    d->next = NIL;
    if (s->lru_tail != NIL)
        s->sn[s->lru_tail].next = id;
    else
        s->lru_head = id;
    s->lru_tail = id;
    d->in_lru = 1;
    s->lru_blocks += s->seqs[id].blocks;
    if (s->cfg.kv_evict != CZ_EVICT_LRU && !d->protect)
        cz_evidx_set(&s->evx, id, next_use_s(s, id));
}

static void lru_remove(cz_server *s, uint32_t id)
{
    snode *d = &s->sn[id];
    CZ_ASSERT(d->in_lru);
    if (d->prev != NIL)
        s->sn[d->prev].next = d->next;
    else
        s->lru_head = d->next;
    if (d->next != NIL)
        s->sn[d->next].prev = d->prev;
    else
        s->lru_tail = d->prev;
    d->in_lru = 0;
    CZ_ASSERT(s->lru_blocks >= s->seqs[id].blocks);
    s->lru_blocks -= s->seqs[id].blocks;
    cz_evidx_remove(&s->evx, id);
}

/* An idle sequence holding KV becomes evictable: at once when its KV would be dropped,
 * once stored when it is kept in host memory. */
static void idle_settle(cz_server *s, uint32_t id)
{
    cz_seq *q = &s->seqs[id];
    if (!s->sn[id].in_idle || q->blocks == 0 || q->pinned || s->sn[id].in_lru ||
        s->sn[id].preloading)
        return;
    if (s->cfg.kv_idle == CZ_KV_IDLE_OFFLOAD && q->host_tokens < q->computed) {
        if (!q->storing) {
            q->storing = true;
            s->sn[id].store_to = q->computed;
            xfer_request(s, id, q->host_tokens, q->computed - q->host_tokens, true);
        }
        return;
    }
    lru_push(s, id);
}

static void tail_check(cz_server *s, uint32_t id);
static bool cancel_preload(cz_server *s);

/* Frees idle KV towards `need` blocks: the whole least recently used idle sequence, or
 * under next-use eviction up to `need` blocks from the tail of the session whose next use
 * is farthest (suffix blocks before prefix blocks, LiveServe section 5.1; the prefix stays
 * resident and counts as reusable context). False if there is nothing to evict. */
static bool evict_one(cz_server *s, uint32_t need, bool spare_waiting)
{
    uint32_t v = s->lru_head;
    if (s->cfg.kv_evict != CZ_EVICT_LRU) {
        v = s->cfg.kv_evict == CZ_EVICT_NEXT_USE ? cz_evidx_top(&s->evx)
                                                 : cz_evidx_scan_top(&s->evx);
        /* Protection yields when it is all that is left: LiveServe section 6 falls back to
         * LRU when next-use metadata cannot decide, so the least recently used idle KV
         * (a session whose user is speaking, or warmed by a preload) goes, suffix first,
         * rather than the pool filling with KV nobody may evict */
        if (v == UINT32_MAX || (spare_waiting && s->seqs[v].state == CZ_SEQ_WAITING))
            v = s->lru_head;
    }
    /* a KV load must not take the KV of a waiting sequence (one whose own load landed,
     * waiting to be admitted): loads would evict each other's landed KV for ever */
    while (spare_waiting && v != NIL && s->seqs[v].state == CZ_SEQ_WAITING)
        v = s->sn[v].next;
    if (v == NIL)
        return false;
    {
        cz_seq *q = &s->seqs[v];
        /* the unit: the blocks needed from the tail (suffix first), or the whole session;
         * the order and the unit are independent choices (LiveServe section 5.1 keeps
         * eviction block-level and changes only the order) */
        uint32_t k = s->cfg.kv_evict_unit == CZ_EVICT_UNIT_BLOCK && need < q->blocks
                         ? need
                         : q->blocks;
        CZ_ASSERT(k > 0 && s->sn[v].in_idle && s->kv_idle_blocks >= k && s->kv_used >= k);
        /* with prefix caching, its cached blocks stay cached (hittable) in the free
         * queue, and a block another sequence shares frees nothing */
        blocks_trim(s, v, q->blocks - k);
        s->kv_idle_blocks -= k;
        s->lru_blocks -= k;
        uint64_t keep = (uint64_t)q->blocks * s->cfg.block_tokens;
        if (q->computed > keep)
            q->computed = (uint32_t)keep;
        if (s->sn[v].pl_prot > q->blocks) {
            /* warmed KV evicted by the fallback no longer counts against the cap */
            s->pl_protected -= s->sn[v].pl_prot - q->blocks;
            s->sn[v].pl_prot = q->blocks;
        }
        if (q->blocks == 0)
            lru_remove(s, v);
        tail_check(s, v);
        return true;
    }
}

/* Blocks that cancelling every background preload in flight would free. O(preloads). */
static uint64_t preload_blocks(const cz_server *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->n_pl; i++) {
        const cz_seq *q = &s->seqs[s->pl_ids[i]];
        if (q->state != CZ_SEQ_CLOSED)
            n += q->blocks - blocks_for(s, q->computed);
    }
    return n;
}

/* Makes `need` blocks free by evicting idle KV, all or nothing: false, with nothing
 * evicted, when free, evictable and preloading blocks together fall short, which marks the
 * pool saturated at t_s the first time. vLLM's block pool likewise counts its evictable
 * cached blocks as free and refuses an allocation before it takes any: KV evicted for an
 * admission that then fails is work lost for nothing (a landed KV load evicted that way
 * loads again, and admissions that fail can evict each other's loads for ever). */
static bool make_room(cz_server *s, uint32_t need, double t_s)
{
    if (need <= kv_free(s))
        return true;
    if (need > kv_free(s) + s->lru_blocks + (s->n_pl ? preload_blocks(s) : 0)) {
        if (isnan(s->saturated_at_s))
            s->saturated_at_s = t_s;
        return false;
    }
    while (need > kv_free(s)) {
        /* idle KV first, then background preloads in flight (LiveServe section 5.2) */
        bool freed = evict_one(s, need - kv_free(s), false) || cancel_preload(s);
        /* the check above is exact unless prefix caching shares blocks between idle KV
         * and running work (evicting such KV frees nothing); the idle KV's cached blocks
         * stay in the free queue then, hittable, so little is lost */
        CZ_ASSERT(freed || s->apc);
        if (!freed) {
            if (isnan(s->saturated_at_s))
                s->saturated_at_s = t_s;
            return false;
        }
    }
    return true;
}

/* ---- the decode set ---- */

static bool heap_before(const hslot *x, const hslot *y)
{
    /* without short-circuits: the sift's child choice compiles to flags, not to a branch
     * that mispredicts half the time */
    return (x->finish_k < y->finish_k) |
           ((x->finish_k == y->finish_k) & (x->join_seq < y->join_seq));
}

static void heap_set(cz_server *s, uint32_t pos, hslot h)
{
    s->heap[pos] = h;
    s->sn[h.id].heap_pos = pos;
}

static void heap_up(cz_server *s, uint32_t pos)
{
    hslot h = s->heap[pos];
    while (pos > 0) {
        uint32_t p = (pos - 1) / 2;
        if (!heap_before(&h, &s->heap[p]))
            break;
        heap_set(s, pos, s->heap[p]);
        pos = p;
    }
    heap_set(s, pos, h);
}

static void heap_down(cz_server *s, uint32_t pos)
{
    hslot h = s->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= s->n_heap)
            break;
        c += c + 1 < s->n_heap && heap_before(&s->heap[c + 1], &s->heap[c]);
        if (!heap_before(&s->heap[c], &h))
            break;
        heap_set(s, pos, s->heap[c]);
        pos = c;
    }
    heap_set(s, pos, h);
}

static void heap_remove(cz_server *s, uint32_t id)
{
    uint32_t pos = s->sn[id].heap_pos;
    CZ_ASSERT(pos < s->n_heap && s->heap[pos].id == id);
    hslot last = s->heap[--s->n_heap];
    if (pos == s->n_heap)
        return;
    if (pos > 0 && heap_before(&last, &s->heap[(pos - 1) / 2])) {
        heap_set(s, pos, last);
        heap_up(s, pos);
        return;
    }
    /* `last` sinks: the hole goes down the smaller children to a leaf and `last` climbs
     * back from there (bottom-up deletion: one compare a level; a former leaf rarely
     * climbs far). The keys are distinct, so the heap ends as a sift-down leaves it. */
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= s->n_heap)
            break;
        c += c + 1 < s->n_heap && heap_before(&s->heap[c + 1], &s->heap[c]);
        heap_set(s, pos, s->heap[c]);
        pos = c;
    }
    s->heap[pos] = last;
    heap_up(s, pos);
}

/* x % block_tokens (a mask when block_tokens is a power of two). */
static uint64_t bt_mod(const cz_server *s, uint64_t x)
{
    return s->bt_shift < 32 ? x & (s->cfg.block_tokens - 1) : x % s->cfg.block_tokens;
}

/* Brings a decode member's public counters up to date with the steps executed. */
static void d_sync(cz_server *s, uint32_t id)
{
    cz_seq *q = &s->seqs[id];
    const snode *d = &s->sn[id];
    uint64_t m = s->steps - d->k0;
    q->computed = d->c0 + (uint32_t)m;
    q->generated = d->g0 + (uint32_t)m;
    q->blocks = blocks_for(s, q->computed);
    if (m > 0)
        q->last_token_s = s->last_done_s;
}

/* The generated count at which a decode member next needs attention: its budget, or an
 * earlier report the driver asked for. */
static uint32_t event_target(const cz_seq *q)
{
    return q->notify_at > q->generated && q->notify_at < q->budget ? q->notify_at : q->budget;
}

/* A running sequence whose input is computed and whose budget allows more output joins
 * the decode set (at its tail: it is the latest admitted member). */
static void d_join(cz_server *s, uint32_t id)
{
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    CZ_ASSERT(q->computed == q->tokens_in + q->generated - 1 && q->generated < q->budget);
    CZ_ASSERT(q->blocks == blocks_for(s, q->computed) && !d->in_decode && !d->in_lru);
    uint32_t bt = s->cfg.block_tokens;
    d->k0 = s->steps;
    d->c0 = q->computed;
    d->g0 = q->generated;
    d->phase = (uint32_t)bt_mod(s, bt_mod(s, s->steps) + bt - bt_mod(s, q->computed));
    d->prev = s->d_tail;
    d->next = NIL;
    if (s->d_tail != NIL)
        s->sn[s->d_tail].next = id;
    else
        s->d_head = id;
    s->d_tail = id;
    d->in_decode = 1;
    s->n_decode++;
    s->phase_cnt[d->phase]++;
    s->cc_phase_cnt[d->phase] += d->ctx_counted;
    s->d_sum_computed += q->computed;
    s->heap[s->n_heap] = (hslot){.finish_k = s->steps + (event_target(q) - q->generated),
                                 .join_seq = s->join_seq++,
                                 .id = id};
    d->heap_pos = s->n_heap++;
    heap_up(s, s->n_heap - 1);
}

/* Removes a member from the decode set, its counters brought up to date first. */
static void d_leave(cz_server *s, uint32_t id)
{
    d_sync(s, id);
    snode *d = &s->sn[id];
    CZ_ASSERT(d->in_decode);
    if (d->prev != NIL)
        s->sn[d->prev].next = d->next;
    else
        s->d_head = d->next;
    if (d->next != NIL)
        s->sn[d->next].prev = d->prev;
    else
        s->d_tail = d->prev;
    d->in_decode = 0;
    s->n_decode--;
    s->phase_cnt[d->phase]--;
    s->cc_phase_cnt[d->phase] -= d->ctx_counted;
    s->d_sum_computed -= s->seqs[id].computed;
    heap_remove(s, id);
}

/* The decode members due at the end of step `k` (budget or report), at most cap (<= 8):
 * the heap's subtree of finish_k == k from the root (every key left is >= k), breadth
 * first; their ids into ids[]. Returns how many. */
static uint32_t due_at(const cz_server *s, uint64_t k, uint32_t *ids, uint32_t cap)
{
    CZ_ASSERT(cap <= 8);
    uint32_t pos[18], head = 0, tail = 0, n = 0;
    if (s->n_heap > 0 && s->heap[0].finish_k == k)
        pos[tail++] = 0;
    while (head < tail && n < cap) {
        uint32_t p = pos[head++];
        ids[n++] = s->heap[p].id;
        for (uint32_t c = 2 * p + 1; c <= 2 * p + 2 && c < s->n_heap; c++)
            if (s->heap[c].finish_k == k)
                pos[tail++] = c;
    }
    return n;
}

uint32_t cz_server_due_next(const cz_server *s, uint64_t *sessions, uint32_t cap)
{
    CZ_ASSERT(!s->run_hold);
    uint32_t n = s->n_due < cap ? s->n_due : cap;
    for (uint32_t i = 0; i < n; i++)
        sessions[i] = s->seqs[s->due[i]].session;
    return n;
}

uint32_t cz_server_decode_first(const cz_server *s)
{
    CZ_ASSERT(!s->run_hold);
    return s->d_head;
}

uint32_t cz_server_decode_next(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    return s->sn[id].next;
}

/* ---- the prefilling list ---- */

static void pf_push(cz_server *s, uint32_t id)
{
    CZ_ASSERT(s->n_pf < s->cfg.max_num_seqs && !s->sn[id].in_pf);
    s->pf[s->n_pf++] = id;
    s->sn[id].in_pf = 1;
    s->sn[id].run_stamp = ++s->run_clock;
}

static void pf_remove(cz_server *s, uint32_t id)
{
    for (uint32_t i = 0; i < s->n_pf; i++) {
        if (s->pf[i] == id) {
            memmove(&s->pf[i], &s->pf[i + 1], (s->n_pf - i - 1) * sizeof *s->pf);
            s->n_pf--;
            s->sn[id].in_pf = 0;
            return;
        }
    }
    CZ_ASSERT(0 && "sequence not in the prefilling list");
}

static uint32_t n_running(const cz_server *s)
{
    return s->n_decode + s->n_pf + s->n_stalled + s->n_loading;
}

/* ---- sequences and turns ---- */

static void turn_complete(cz_server *s, uint32_t id, double t_s);
static void seq_recycle(cz_server *s, uint32_t id);

uint32_t cz_server_seq_open(cz_server *s, uint64_t session, uint32_t cls, bool pinned)
{
    CZ_ASSERT(!s->run_hold);
    uint32_t id;
    if (s->n_free > 0) {
        id = s->free_ids[--s->n_free];
        CZ_ASSERT(s->seqs[id].state == CZ_SEQ_CLOSED && s->sn[id].reusable);
    } else {
        CZ_ASSERT(s->n_seqs < UINT32_MAX);
        if (s->n_seqs + 1 > s->cap_seqs) {
            size_t cap = s->cap_seqs;
            cz_grow((void **)&s->seqs, &cap, s->n_seqs + 1, sizeof *s->seqs);
            cap = s->cap_seqs;
            cz_grow((void **)&s->sn, &cap, s->n_seqs + 1, sizeof *s->sn);
            if (s->apc) {
                size_t pcap = s->cap_seqs;
                cz_grow((void **)&s->pcs, &pcap, s->n_seqs + 1, sizeof *s->pcs);
                CZ_ASSERT(pcap == cap);
            }
            s->cap_seqs = cap;
        }
        id = (uint32_t)s->n_seqs++;
        if (s->apc)
            s->pcs[id] = (pc_seq){0};
    }
    s->seqs[id] = (cz_seq){
        .session = session,
        .cls = cls,
        .state = CZ_SEQ_IDLE,
        .turn_rec = NO_REC,
        .pinned = pinned,
        .speech_start_s = NAN,
        .report_s = NAN,
        .first_audio_s = NAN,
        .last_token_s = NAN,
        .load_start_s = NAN,
    };
    memset(&s->sn[id], 0, sizeof s->sn[id]);
    s->sn[id].prev = s->sn[id].next = NIL;
    s->sn[id].play_end_s = s->sn[id].reply_ema_s = s->sn[id].speech_ema_s = NAN;
    if (s->apc) {
        /* a reused slot keeps its arrays (no allocation per session) */
        pc_seq *p = &s->pcs[id];
        p->n_hash = p->n_reg = p->n_trace = 0;
        p->looked = 0;
        p->salt = pc_new_salt(s);
    }
    return id;
}

/* The sequence's KV stops being idle (it is admitted, or closed): no longer evictable. */
static void idle_leave(cz_server *s, uint32_t id)
{
    snode *d = &s->sn[id];
    if (d->in_lru)
        lru_remove(s, id);
    if (d->in_idle) {
        CZ_ASSERT(s->kv_idle_blocks >= s->seqs[id].blocks);
        s->kv_idle_blocks -= s->seqs[id].blocks;
        d->in_idle = 0;
    }
}

/* The sequence's KV becomes idle (cached): its turn ended, or an admission failed. */
static void idle_enter(cz_server *s, uint32_t id)
{
    snode *d = &s->sn[id];
    CZ_ASSERT(!d->in_idle);
    s->kv_idle_blocks += s->seqs[id].blocks;
    d->in_idle = 1;
    idle_settle(s, id);
}

/* The open turn ends: the sequence idles on its KV (with prefix caching, its full blocks,
 * the reply's included, are cached from now on). */
static void go_idle(cz_server *s, uint32_t id)
{
    s->seqs[id].state = CZ_SEQ_IDLE;
    if (s->apc)
        pc_register(s, id, s->seqs[id].computed);
    idle_enter(s, id);
}

/* The most blocks a sequence holds while it grows to `ctx` tokens. Without a window that is
 * its final count; with one the count rises until the window leaves the sinks, then repeats
 * with the period of a block (the window's alignment), so the maximum is over the rise and
 * the last block's worth of lengths. */
static uint32_t peak_blocks(const cz_server *s, uint64_t ctx)
{
    uint32_t bt = s->cfg.block_tokens, w = s->cfg.kv_window_tokens;
    if (w == 0)
        return blocks_for(s, ctx);
    uint64_t sink_blocks = ((uint64_t)s->cfg.kv_sink_tokens + bt - 1) / bt;
    uint64_t rise = (sink_blocks + 1) * bt + w - 1; /* the count rises up to this length */
    uint32_t m = blocks_for(s, ctx < rise ? ctx : rise);
    for (uint64_t t = ctx > bt ? ctx - bt : 0; t <= ctx; t++) {
        uint32_t b = blocks_for(s, t);
        if (b > m)
            m = b;
    }
    return m;
}

/* A context of `ctx` tokens can never be served: more blocks than the pool at some point
 * of its growth, longer than max_model_len, or, with chunked prefill off, more than one
 * step's budget to recompute. */
static bool never_fits(const cz_server *s, uint64_t ctx)
{
    return ctx >= UINT32_MAX || peak_blocks(s, ctx) > s->cfg.kv_blocks ||
           (s->cfg.max_model_len && ctx > s->cfg.max_model_len) ||
           (!s->cfg.chunked_prefill && ctx - 1 > s->cfg.max_num_batched_tokens);
}

uint64_t cz_server_turn(cz_server *s, double t_s, uint32_t id, uint32_t turn, uint32_t stage,
                        uint32_t in_tokens, uint32_t out_tokens, uint32_t out_total,
                        bool input_final)
{
    CZ_ASSERT(!s->run_hold);
    return cz_server_turn_hashed(s, t_s, id, turn, stage, in_tokens, out_tokens, out_total,
                                 input_final, NULL);
}

uint64_t cz_server_turn_hashed(cz_server *s, double t_s, uint32_t id, uint32_t turn,
                               uint32_t stage, uint32_t in_tokens, uint32_t out_tokens,
                               uint32_t out_total, bool input_final,
                               const cz_turn_hashes *hashes)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->state == CZ_SEQ_IDLE && !q->turn_open);
    CZ_ASSERT(!input_final || (in_tokens > 0 && out_tokens > 0));
    /* next-use eviction: the user's reply time since the last playback ended */
    snode *dn = &s->sn[id];
    if (!isnan(dn->play_end_s) && t_s >= dn->play_end_s) {
        double r = t_s - dn->play_end_s;
        dn->reply_ema_s = isnan(dn->reply_ema_s) ? r : 0.5 * dn->reply_ema_s + 0.5 * r;
        s->reply_sum_s += r;
        s->reply_n++;
    }
    /* the time from the user's speech start to this turn (LiveServe section 5.2's window
     * for a preload), per session and over the workload */
    if (dn->speech_open && t_s >= q->speech_start_s) {
        double sp = t_s - q->speech_start_s;
        dn->speech_ema_s = isnan(dn->speech_ema_s) ? sp : 0.5 * dn->speech_ema_s + 0.5 * sp;
        s->speech_sum_s += sp;
        s->speech_n++;
    }
    dn->speech_open = 0;
    dn->protect = 0;
    dn->remote = 0;
    s->pl_protected -= dn->pl_prot;
    dn->pl_prot = 0;
    if (dn->preloaded && q->host_tokens > q->computed)
        s->pl.fallbacks++; /* the warmed KV was evicted before the turn */
    dn->preloaded = 0;
    if (dn->pl_fell)
        s->pl.fallbacks++; /* its preload was cancelled */
    dn->pl_fell = 0;
    cz_req_record rec = {
        .session = q->session,
        .turn = turn,
        .stage = stage,
        .cls = q->cls,
        .input_tokens = in_tokens,
        .outcome = CZ_REQ_PENDING,
        .arrival_s = t_s,
        .first_sched_s = NAN,
        .first_token_s = NAN,
        .finish_s = NAN,
    };
    uint64_t ctx = (uint64_t)q->tokens_in + q->generated + in_tokens +
                   (out_total > out_tokens ? out_total : out_tokens);
    if (never_fits(s, ctx)) {
        rec.outcome = CZ_REQ_REJECTED;
        uint64_t r = cz_metrics_add_request(s->metrics, &rec);
        cz_metrics_release(s->metrics, r);
        return r;
    }
    uint64_t r = cz_metrics_add_request(s->metrics, &rec);
    /* the previous turn's record changes no more: the sequence holds its turn's record
     * until the next turn or its close (a barge-in during playback, or a KV load landing,
     * still changes it) */
    if (q->turn_rec != NO_REC)
        cz_metrics_release(s->metrics, q->turn_rec);
    if (s->apc) {
        /* room for the hashes of every block the turn can reach, and, on an empty context,
         * the blocks the trace names */
        pc_reserve(s, id, ctx);
        if (q->tokens_in + q->generated == 0)
            pc_trace_hashes(s, id, in_tokens, hashes);
        s->pcs[id].looked = 0;
    }
    /* a waiting turn's resident prefix stays cached (evictable) until it is admitted */
    q->turn_rec = r;
    q->turn_open = true;
    q->turn_ready_s = t_s;
    q->played_s = q->received_s = q->last_chunk_s = 0;
    q->report_s = q->first_audio_s = NAN;
    q->input_final = input_final;
    q->turn_generated_base = q->generated;
    q->tokens_in += in_tokens;
    q->budget += out_tokens;
    /* its speech-start protection ended with the wait for this turn: the resident prefix
     * is an eviction candidate again, the last one by next use (needed now) */
    if (dn->in_lru && s->cfg.kv_evict != CZ_EVICT_LRU)
        cz_evidx_set(&s->evx, id, next_use_s(s, id));
    if (q->tokens_in + q->generated > q->computed && q->generated < q->budget) {
        q->state = CZ_SEQ_WAITING;
        wq_push_back(s, id);
    } else {
        idle_leave(s, id);
        q->state = CZ_SEQ_STALLED;
        s->n_stalled++;
    }
    return r;
}

cz_feed_result cz_server_feed(cz_server *s, double t_s, uint32_t id, uint32_t in_tokens,
                              uint32_t out_tokens, bool input_final)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->turn_open && !q->input_final && !s->in_flight);
    snode *d = &s->sn[id];
    if (never_fits(s, (uint64_t)q->tokens_in + in_tokens + q->budget + out_tokens)) {
        /* the context outgrew what the stage can ever hold (a resident stream past the
         * pool): the turn fails and its KV goes, rather than being preempted and
         * recomputed for ever */
        uint32_t made = q->generated - q->turn_generated_base;
        cz_metrics_req(s->metrics, q->turn_rec)->input_tokens += in_tokens;
        cz_server_abort(s, t_s, id, made);
        cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
        rec->outcome = CZ_REQ_FAILED;
        rec->heard_tokens = rec->output_tokens;
        if (q->state == CZ_SEQ_IDLE) {
            idle_leave(s, id);
            kv_release(s, id);
            q->computed = 0;
            s->host_tokens -= q->host_tokens;
            q->host_tokens = 0;
            s->sn[id].tail_from = 0;
        }
        return CZ_FEED_FAILED;
    }
    bool was_decoding = d->in_decode;
    if (was_decoding)
        d_leave(s, id);
    if (s->apc)
        pc_reserve(s, id, (uint64_t)q->tokens_in + in_tokens + q->budget + out_tokens);
    q->tokens_in += in_tokens;
    q->budget += out_tokens;
    q->input_final = input_final;
    cz_metrics_req(s->metrics, q->turn_rec)->input_tokens += in_tokens;
    bool work = q->tokens_in + q->generated > q->computed && q->generated < q->budget;
    /* A sequence that resumes, or decodes with new input, continues as a prefill chunk
     * at the running tail (its own token gap is then recorded exactly); it rejoins the
     * decode set after that step. */
    if (q->state == CZ_SEQ_STALLED && work) {
        s->n_stalled--;
        q->state = CZ_SEQ_RUNNING;
        pf_push(s, id);
    } else if (q->state == CZ_SEQ_STALLED && input_final && q->generated == q->budget) {
        s->n_stalled--;
        s->n_turn_done = 0;
        turn_complete(s, id, t_s);
        s->n_turn_done = 0;
        return CZ_FEED_DONE;
    } else if (was_decoding) {
        pf_push(s, id);
    }
    return CZ_FEED_OK;
}

/* ---- scheduling ---- */

static void add_item(cz_server *s, cz_batch *b, uint32_t id, uint32_t n)
{
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(s->n_items < s->cfg.max_num_seqs);
    s->items[s->n_items++] = (cz_batch_item){id, n, q->computed};
    q->sched_tokens = n;
    b->total_tokens += n;
    /* the blocks this step fills are cached now, as vLLM's allocate_slots caches them:
     * a sequence admitted later in the same step hits them (each layer writes the step's
     * KV before its attention reads it) */
    if (s->apc)
        pc_register(s, id, (uint64_t)q->computed + n);
    if (n == 1 && q->computed + 1 == q->tokens_in + q->generated && q->computed >= q->tokens_in) {
        /* a one-token step past the input is a decode (listed one by one when the policy
         * orders every step, or when it resumes) */
        b->decode_seqs++;
        b->decode_ctx_tokens += cz_kv_attn_tokens((uint64_t)q->computed + 1,
                                                  s->cfg.kv_sink_tokens, s->cfg.kv_window_tokens);
        return;
    }
    b->prefill_tokens += n;
    b->prefill_seqs++;
    /* token i of the chunk attends to ctx_before + i + 1 positions (at most sinks + window
     * with a window) */
    uint64_t c = q->computed, cap = (uint64_t)s->cfg.kv_sink_tokens + s->cfg.kv_window_tokens;
    if (s->cfg.kv_window_tokens == 0 || c + n <= cap) {
        b->prefill_attn_ctx += (uint64_t)n * c + (uint64_t)n * (n + 1) / 2;
    } else {
        uint64_t below = c < cap ? cap - c : 0; /* tokens whose context is below the cap */
        b->prefill_attn_ctx += below * c + below * (below + 1) / 2 + (n - below) * cap;
    }
}

static uint32_t last_admitted(const cz_server *s)
{
    return s->n_pf ? s->pf[s->n_pf - 1] : s->d_tail;
}

/* Preempts `id`, the most recently admitted running sequence, by recompute: its KV is
 * freed and it goes to the front of the waiting queue (vLLM V1: _preempt_request +
 * waiting.prepend_request). */
static void preempt(cz_server *s, uint32_t id)
{
    CZ_ASSERT(id == last_admitted(s));
    if (s->n_pf) {
        s->n_pf--;
        s->sn[id].in_pf = 0;
    } else {
        d_leave(s, id);
    }
    cz_seq *q = &s->seqs[id];
    kv_release(s, id);
    q->computed = 0;
    q->state = CZ_SEQ_WAITING;
    wq_push_front(s, id);
    cz_metrics_req(s->metrics, q->turn_rec)->preemptions++;
    s->metrics->preemptions++;
    if (s->apc)
        s->pcs[id].looked = 0; /* readmitted with a new lookup: its blocks may still be cached */
}

static uint32_t pick_victim(cz_server *s)
{
    cz_sched_view v = {s->n_decode + s->n_pf, last_admitted(s), kv_free(s)};
    uint32_t victim = s->sched.pick_victim(&v);
    CZ_ASSERT(victim == v.last_admitted); /* see cz_sched_ops.pick_victim */
    return victim;
}

/* Tokens of KV a waiting sequence can bring back from host memory instead of
 * recomputing. */
static uint32_t loadable_at(const cz_server *s, const cz_seq *q, uint32_t computed)
{
    uint32_t rem = s->sn[q - s->seqs].remote;
    if (rem > computed)
        return rem; /* a peer's KV (cz_server_import): all of it comes from there */
    if ((s->cfg.kv_idle != CZ_KV_IDLE_OFFLOAD && !s->cfg.kv_bidirectional) ||
        q->host_tokens <= computed)
        return 0;
    return q->host_tokens;
}

static uint32_t loadable(const cz_server *s, const cz_seq *q)
{
    return loadable_at(s, q, q->computed);
}

/* Gives back the prefix cache's hit taken for `id` (pc_take) when its admission fails:
 * it holds `blocks` blocks and `computed` tokens again. */
static void pc_untake(cz_server *s, uint32_t id, uint32_t blocks, uint32_t computed)
{
    blocks_trim(s, id, blocks);
    s->seqs[id].computed = computed;
}

/* Admission room on the FCFS path: takes `id`'s cache hit of `hit` blocks (`queued` of
 * them in the free queue, which the hit takes out of the free count) and makes `extra`
 * more blocks free, all or nothing as make_room (vLLM's allocate_slots counts the hit's
 * evictable blocks against the free ones before touching them). False, with nothing
 * taken, when the blocks cannot be found. */
/* Whether `need` blocks could be made free (free, evictable idle KV, preloads in flight),
 * make_room's check, taking nothing; marks the pool saturated at t_s when not. */
static bool room_possible(cz_server *s, uint64_t need, double t_s)
{
    if (need <= kv_free(s) ||
        need <= kv_free(s) + s->lru_blocks + (s->n_pl ? preload_blocks(s) : 0))
        return true;
    if (isnan(s->saturated_at_s))
        s->saturated_at_s = t_s;
    return false;
}

static bool admit_room(cz_server *s, uint32_t id, uint32_t hit, uint32_t queued,
                       uint32_t extra, double t_s)
{
    if (hit == 0)
        return make_room(s, extra, t_s);
    if (!room_possible(s, (uint64_t)queued + extra, t_s))
        return false;
    cz_seq *q = &s->seqs[id];
    uint32_t b0 = q->blocks, c0 = q->computed;
    pc_take(s, id, hit);
    if (make_room(s, extra, t_s))
        return true;
    pc_untake(s, id, b0, c0);
    return false;
}

/* A host copy of only a tail (BROS's checkpoint) cannot be loaded once the resident
 * prefix under it is gone: drop it (the sequence recomputes). */
static void tail_check(cz_server *s, uint32_t id)
{
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    if (d->tail_from && q->computed < d->tail_from && !q->storing) {
        s->host_tokens -= q->host_tokens;
        q->host_tokens = 0;
        d->tail_from = 0;
    }
}

/* BROS's bidirectional blocks: real-time sequences fill shared blocks from one end and
 * best-effort ones from the other, so a real-time sequence short of space overwrites the
 * tail of best-effort sequence `id` (not given work in this step) instead of preempting it
 * whole: `need` blocks (at most all it holds) leave its tail, just those tokens are
 * checkpointed to host memory, and it waits at the front of the queue with its prefix
 * resident until the checkpoint lands and the tail is loaded back. */
static void overwrite_tail(cz_server *s, uint32_t id, uint32_t need)
{
    pf_remove(s, id);
    cz_seq *q = &s->seqs[id];
    uint32_t k = need < q->blocks ? need : q->blocks;
    uint32_t c = q->computed;
    blocks_trim(s, id, q->blocks - k);
    if (s->apc)
        s->pcs[id].looked = 0;
    uint64_t keep = (uint64_t)q->blocks * s->cfg.block_tokens;
    if (q->computed > keep)
        q->computed = (uint32_t)keep;
    q->state = CZ_SEQ_WAITING;
    wq_push_front(s, id);
    if (c > q->computed && c > q->host_tokens && !q->storing) {
        q->storing = true;
        s->sn[id].store_to = c;
        s->sn[id].ckpt = 1;
        if (q->host_tokens < q->computed)
            s->sn[id].tail_from = q->computed; /* the host lacks the resident prefix */
        xfer_request(s, id, q->computed, c - q->computed, true);
        s->overwrite_tokens += c - q->computed;
    }
    /* its resident prefix is cached KV like any waiting sequence's: evictable under
     * pressure (which makes the checkpointed tail useless: tail_check) */
    idle_enter(s, id);
    s->overwrites++;
    cz_metrics_req(s->metrics, q->turn_rec)->preemptions++;
    s->metrics->preemptions++;
}

void cz_server_overwrites(const cz_server *s, uint64_t *overwrites, uint64_t *tokens)
{
    *overwrites = s->overwrites;
    *tokens = s->overwrite_tokens;
}

uint32_t cz_sched_blocks(const cz_sched_ctx *ctx, const cz_seq *q, uint32_t tokens)
{
    if (ctx->kv_window_tokens) {
        uint32_t need = cz_kv_blocks_held((uint64_t)q->computed + tokens, ctx->block_tokens,
                                          ctx->kv_sink_tokens, ctx->kv_window_tokens);
        return need > q->blocks ? need - q->blocks : 0;
    }
    uint64_t slack = (uint64_t)q->blocks * ctx->block_tokens - q->computed;
    if (tokens <= slack)
        return 0;
    return (uint32_t)((tokens - slack + ctx->block_tokens - 1) / ctx->block_tokens);
}

/* Preempts running sequence `id` by recompute wherever it is in the running order (the
 * ordering path's fallback when nothing selected can get KV). */
static void preempt_any(cz_server *s, uint32_t id)
{
    pf_remove(s, id);
    cz_seq *q = &s->seqs[id];
    kv_release(s, id);
    q->computed = 0;
    q->state = CZ_SEQ_WAITING;
    wq_push_front(s, id);
    cz_metrics_req(s->metrics, q->turn_rec)->preemptions++;
    s->metrics->preemptions++;
    if (s->apc)
        s->pcs[id].looked = 0; /* readmitted with a new lookup: its blocks may still be cached */
}

/* The lowest-priority running best-effort candidate after position k not yet given work
 * in this step; nc when none. */
static uint32_t best_effort_victim(const cz_server *s, uint32_t k, uint32_t nc)
{
    for (uint32_t j = nc; j-- > k + 1;) {
        const cz_cand *o = &s->cands[j];
        const cz_seq *oq = &s->seqs[o->seq];
        if (o->running && oq->cls != 0 && oq->state == CZ_SEQ_RUNNING && oq->sched_tokens == 0)
            return j;
    }
    return nc;
}

/* Drops from the waiting queue every sequence no longer waiting; O(queue). */
static void wq_compact(cz_server *s)
{
    size_t w = 0;
    for (size_t i = 0; i < s->wq_len; i++) {
        uint32_t x = s->wq[(s->wq_head + i) & (s->wq_cap - 1)];
        if (s->seqs[x].state == CZ_SEQ_WAITING)
            s->wq[(s->wq_head + w++) & (s->wq_cap - 1)] = x;
    }
    s->wq_len = w;
}

/* Drops from the running list every sequence no longer running; O(running). */
static void pf_compact(cz_server *s)
{
    uint32_t w = 0;
    for (uint32_t i = 0; i < s->n_pf; i++) {
        uint32_t x = s->pf[i];
        if (s->seqs[x].state == CZ_SEQ_RUNNING)
            s->pf[w++] = x;
        else
            s->sn[x].in_pf = 0;
    }
    s->n_pf = w;
}

static void timeline_sample(cz_server *s, double t_s, const cz_batch *out);
static bool ordered_pass(cz_server *s, double t_s, cz_batch *out, bool admit, bool *picked);

/* One step under an ordering policy (LiveServe Algorithm 1 and its kin): every running
 * and waiting sequence is a candidate, the policy orders them and picks what runs, and the
 * core applies the pick in order (LiveServe, section 4.2). */
static bool schedule_ordered(cz_server *s, double t_s, cz_batch *out)
{
    /* KV loads first, in queue order, as the FCFS path admits them */
    bool loads = false;
    for (size_t i = 0;
         (s->cfg.kv_idle == CZ_KV_IDLE_OFFLOAD || s->cfg.kv_bidirectional ||
          s->cfg.kv_import) && i < s->wq_len;
         i++) {
        uint32_t id = s->wq[(s->wq_head + i) & (s->wq_cap - 1)];
        cz_seq *q = &s->seqs[id];
        /* the prefix cache's hit first, then the host copy for what it leaves (vLLM asks
         * its connector only past the local hit) */
        if (!loadable(s, q) || n_running(s) >= s->cfg.max_num_seqs || s->sn[id].preloading ||
            s->sn[id].ckpt)
            continue;
        uint32_t queued, hit = pc_peek(s, id, &queued);
        uint32_t b0 = q->blocks, c0 = q->computed;
        uint32_t load = loadable_at(s, q, c0 + hit * s->cfg.block_tokens);
        if (!load)
            continue; /* the cache holds all of it: admitted as a prefill */
        bool was_cached = s->sn[id].in_idle;
        idle_leave(s, id);
        if (hit)
            pc_take(s, id, hit);
        uint32_t extra = blocks_for(s, load) - q->blocks;
        bool room = true;
        while (room && extra > kv_free(s))
            room = evict_one(s, extra - kv_free(s), true);
        if (!room) {
            if (hit)
                pc_untake(s, id, b0, c0);
            if (was_cached)
                idle_enter(s, id);
            break;
        }
        q->blocks += extra;
        kv_take(s, extra);
        if (s->apc)
            pc_record(s, id, c0, hit);
        q->state = CZ_SEQ_LOADING;
        q->load_start_s = t_s;
        s->sn[id].load_tokens = load;
        s->n_loading++;
        load_request(s, id, load); /* the part not resident */
        loads = true;
    }
    if (loads)
        wq_compact(s);

    /* A step never stands idle while something could run. A pass that runs nothing after
     * a preemption, or after the policy's picks could not get their KV, is followed by a
     * pass over the running sequences alone (V1 runs them before admitting anything);
     * after preemptions, when the running ones run nothing either, by a pass that admits
     * again (V1's next call). Every further admitting pass needs a preemption since the
     * last, and only passes that run something add running sequences, so the passes end. */
    bool admit = true, preempted_since = false;
    uint32_t cap = s->batch_cap; /* every pass of the step sees the cap the last step set */
    for (;;) {
        bool picked = false;
        s->batch_cap = cap;
        bool preempted = ordered_pass(s, t_s, out, admit, &picked);
        if (s->n_items > 0)
            break;
        if (preempted) {
            preempted_since = true;
            admit = false;
        } else if (admit) {
            if (!picked)
                break;
            admit = false;
        } else {
            if (!preempted_since)
                break;
            preempted_since = false;
            admit = true;
        }
    }
    out->items = s->items;
    out->n_items = s->n_items;
    s->in_flight = s->n_items > 0;
    timeline_sample(s, t_s, out);
    return s->in_flight;
}

/* One pass of an ordered step: the policy orders every running sequence, and every waiting
 * one when `admit`, and the core applies its pick in order. Returns whether it preempted;
 * *picked tells whether the policy picked anything. */
static bool ordered_pass(cz_server *s, double t_s, cz_batch *out, bool admit, bool *picked)
{
    memset(out, 0, sizeof *out);
    s->n_items = 0;
    s->wake_s = INFINITY;
    size_t n = (size_t)s->n_pf + (admit ? s->wq_len : 0);
    cz_grow((void **)&s->cands, &s->cap_cands, n ? n : 1, sizeof *s->cands);
    uint32_t nc = 0;
    for (uint32_t i = 0; i < s->n_pf; i++) {
        uint32_t id = s->pf[i];
        const cz_seq *q = &s->seqs[id];
        uint32_t need = q->tokens_in + q->generated - q->computed;
        s->cands[nc] = (cz_cand){.seq = id, .need = need, .pos = nc, .running = 1,
                                 .decode = need == 1 && q->computed >= q->tokens_in,
                                 .wake_s = INFINITY};
        nc++;
    }
    for (size_t i = 0; admit && i < s->wq_len; i++) {
        uint32_t id = s->wq[(s->wq_head + i) & (s->wq_cap - 1)];
        if (s->sn[id].preloading || s->sn[id].ckpt)
            continue; /* admitted once its preload, or its checkpoint, lands */
        const cz_seq *q = &s->seqs[id];
        /* what the prefix cache holds needs no computing (its lookup, taking nothing) */
        uint32_t queued, hit = pc_peek(s, id, &queued);
        uint32_t need = q->tokens_in + q->generated - q->computed - hit * s->cfg.block_tokens;
        s->cands[nc] = (cz_cand){.seq = id, .need = need, .pos = nc, .wake_s = INFINITY};
        nc++;
    }
    cz_sched_ctx ctx = {
        .now_s = t_s,
        .seqs = s->seqs,
        .token_budget = s->cfg.max_num_batched_tokens,
        .seq_cap = s->cfg.max_num_seqs,
        .running = n_running(s),
        .kv_blocks = s->cfg.kv_blocks,
        .kv_used = s->kv_used,
        .kv_available = kv_free(s) + s->kv_idle_blocks,
        .block_tokens = s->cfg.block_tokens,
        .chunked_prefill = s->cfg.chunked_prefill,
        .batch_cap = s->batch_cap,
        .kv_sink_tokens = s->cfg.kv_sink_tokens,
        .kv_window_tokens = s->cfg.kv_window_tokens,
    };
    if (nc)
        s->batch_cap = s->sched.select(s->sched.state, &ctx, s->cands, nc);

    uint32_t budget = s->cfg.max_num_batched_tokens;
    bool admitted = false, preempted = false, closed = false;
    for (uint32_t k = 0; k < nc; k++) {
        cz_cand *c = &s->cands[k];
        if (c->take == 0) {
            if (c->wake_s < s->wake_s)
                s->wake_s = c->wake_s;
            continue;
        }
        *picked = true;
        cz_seq *q = &s->seqs[c->seq];
        if (q->state != CZ_SEQ_RUNNING && q->state != CZ_SEQ_WAITING)
            continue; /* preempted in this step */
        CZ_ASSERT(c->take <= c->need && c->take <= budget);
        /* with chunked prefill off only admission is whole: a running sequence's step
         * takes what the budget leaves, as on the fast path (1b) and in vLLM V1 */
        CZ_ASSERT(s->cfg.chunked_prefill || c->running || c->take == c->need);
        bool waiting = q->state == CZ_SEQ_WAITING;
        /* under class priority a waiting real-time sequence takes what it needs from
         * best-effort work (BROS's SLO-aware preemptive scheduling) */
        bool rt_first = s->sched.class_priority && q->cls == 0;
        /* V1 admits nothing in a step that had to preempt, nor beyond the sequence cap,
         * nor after the first waiting sequence that could not get its KV */
        if (waiting && (closed || (preempted && !rt_first)))
            continue;
        if (waiting && n_running(s) >= s->cfg.max_num_seqs) {
            uint32_t v = rt_first ? best_effort_victim(s, k, nc) : nc;
            if (v == nc)
                continue;
            preempt_any(s, s->cands[v].seq); /* its running slot goes to the real-time one */
            preempted = true;
        }
        bool was_cached = s->sn[c->seq].in_idle;
        if (waiting)
            idle_leave(s, c->seq);
        uint32_t take = c->take, hit = 0, b0 = q->blocks, c0 = q->computed;
        if (waiting && s->apc) {
            /* the cache's hit now: blocks registered or evicted earlier in this step may
             * have changed it since the policy saw its need */
            uint32_t queued;
            hit = pc_peek(s, c->seq, &queued);
            uint32_t bt = s->cfg.block_tokens;
            uint32_t need = q->tokens_in + q->generated - c0 - hit * bt;
            if (take > need || !s->cfg.chunked_prefill)
                take = need;
            /* as on the FCFS path, nothing is taken when the room cannot be found, unless
             * the sequence may preempt others for it */
            bool may_preempt =
                q->cls == 0 && (s->sched.class_priority || s->cfg.kv_bidirectional);
            if (take > budget ||
                (hit && !may_preempt &&
                 !room_possible(s, (uint64_t)queued + extra_blocks_at(s, b0 + hit, c0 + hit * bt,
                                                                      take),
                                t_s))) {
                if (was_cached)
                    idle_enter(s, c->seq);
                closed = true;
                continue;
            }
            if (hit)
                pc_take(s, c->seq, hit);
        }
        uint32_t extra = extra_blocks(s, q, take);
        bool blocked = false;
        while (!make_room(s, extra, t_s)) {
            /* V1's fallback: preempt the lowest-priority running candidate not yet given
             * work in this step, among those that joined the running list after this one
             * (V1's victim is always the latest admitted). Liveness: the sequence running
             * longest is never preempted, so some turn always finishes; a victim chosen by
             * priority alone comes back as a prefill that some policies rank first
             * (VoxServe), and the two preempt each other for ever. BROS's bidirectional
             * blocks add one exception: a real-time sequence takes a best-effort tail. */
            uint32_t v = nc;
            for (uint32_t j = nc; j-- > k + 1;) {
                const cz_cand *o = &s->cands[j];
                const cz_seq *oq = &s->seqs[o->seq];
                if (!o->running || oq->state != CZ_SEQ_RUNNING || oq->sched_tokens != 0)
                    continue;
                bool later = !waiting && s->sn[o->seq].run_stamp > s->sn[c->seq].run_stamp;
                bool tail = s->cfg.kv_bidirectional && q->cls == 0 && oq->cls != 0 &&
                            oq->blocks > 0;
                if (s->sched.class_priority) {
                    /* classes first: real-time work never yields to best-effort work,
                     * best-effort work always yields to real-time work; within a class,
                     * V1's rule. A victim that could come back and preempt its preemptor
                     * would let the two take turns for ever. */
                    if (oq->cls != q->cls)
                        later = q->cls == 0;
                }
                if (later || tail) {
                    v = j;
                    break;
                }
            }
            if (v == nc) {
                /* no victim: a running candidate preempts itself (V1), a waiting one stays
                 * waiting */
                if (!waiting) {
                    preempt_any(s, c->seq);
                    preempted = true;
                }
                blocked = true;
                break;
            }
            const cz_seq *vq = &s->seqs[s->cands[v].seq];
            if (s->cfg.kv_bidirectional && q->cls == 0 && vq->cls != 0 && vq->blocks > 0)
                overwrite_tail(s, s->cands[v].seq, extra - kv_free(s)); /* 0: real-time */
            else
                preempt_any(s, s->cands[v].seq);
            preempted = true;
        }
        if (blocked) {
            /* admission stops there; running sequences after it keep their step (they
             * hold the KV it waits for, and only their progress frees it) */
            if (hit)
                pc_untake(s, c->seq, b0, c0);
            if (waiting && was_cached)
                idle_enter(s, c->seq);
            closed = closed || waiting;
            continue;
        }
        q->blocks += extra;
        kv_take(s, extra);
        if (waiting) {
            q->state = CZ_SEQ_RUNNING;
            s->sn[c->seq].remote = 0; /* computed here rather than pulled */
            pf_push(s, c->seq);
            admitted = true;
            cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
            if (isnan(rec->first_sched_s))
                rec->first_sched_s = t_s;
            if (s->apc)
                pc_record(s, c->seq, c0, hit);
        }
        add_item(s, out, c->seq, take);
        budget -= take;
    }
    if (admitted || preempted)
        wq_compact(s);
    return preempted;
}

double cz_server_wake_at(const cz_server *s)
{
    return s->wake_s;
}

bool cz_server_schedule(cz_server *s, double t_s, cz_batch *out)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(!s->in_flight);
    s->wake_s = INFINITY;
    memset(out, 0, sizeof *out);
    s->n_items = 0;
    if (s->ordered)
        return schedule_ordered(s, t_s, out);
    uint32_t budget = s->cfg.max_num_batched_tokens;
    bool preempted = false;

    /* 1a. the decode set: one token each; members whose next token opens a block need
     * one. When the pool is short, idle KV is evicted first, then the most recently
     * admitted running sequences are preempted (prefilling ones first: they follow the
     * decode set in running order). */
    uint32_t phase = (uint32_t)bt_mod(s, s->steps);
    while (s->n_decode > 0 && !make_room(s, s->phase_cnt[phase], t_s)) {
        preempt(s, pick_victim(s));
        preempted = true;
    }
    kv_take(s, s->phase_cnt[phase]);
    s->batch_decode = s->n_decode;
    out->decode_seqs = s->n_decode;
    out->decode_ctx_tokens = s->d_sum_computed + s->n_decode;
    out->total_tokens = s->n_decode;
    CZ_ASSERT(s->n_decode <= budget);
    budget -= s->n_decode;

    /* 1b. prefilling running sequences, in admission order */
    for (uint32_t i = 0; i < s->n_pf && budget > 0;) {
        uint32_t id = s->pf[i];
        cz_seq *q = &s->seqs[id];
        uint32_t need = q->tokens_in + q->generated - q->computed;
        CZ_ASSERT(need > 0);
        uint32_t n = need < budget ? need : budget;
        uint32_t extra = extra_blocks(s, q, n);
        bool self_preempted = false;
        while (!make_room(s, extra, t_s)) {
            uint32_t victim = pick_victim(s);
            preempted = true;
            self_preempted = victim == id;
            preempt(s, victim);
            if (self_preempted)
                break;
        }
        if (self_preempted)
            break;
        q->blocks += extra;
        kv_take(s, extra);
        add_item(s, out, id, n);
        budget -= n;
        i++;
    }

    /* 2. waiting sequences, only when nothing was preempted in this step; only these can
     * be scheduled for the first time in their turn. A sequence with KV in host memory
     * is admitted into a load instead (vLLM's offloading connector: blocks allocated,
     * the load runs, the sequence is scheduled once it lands). */
    uint32_t first_admitted = s->n_items;
    /* a step whose preemptions left nothing running admits at once, as V1's next call
     * would: otherwise it would run nothing and stand idle with work waiting */
    if (preempted && s->n_items == 0 && s->batch_decode == 0)
        preempted = false;
    while (!preempted && s->wq_len > 0 && budget > 0 && n_running(s) < s->cfg.max_num_seqs) {
        uint32_t id = wq_front(s);
        if (s->sn[id].preloading || s->sn[id].ckpt)
            break; /* its preload (or checkpoint) is landing: admitted once it has */
        cz_seq *q = &s->seqs[id];
        bool was_cached = s->sn[id].in_idle;
        idle_leave(s, id);
        /* automatic prefix caching: the longest cached run after its resident prefix
         * needs no computing (vLLM's get_computed_blocks); hb and hc are its blocks and
         * computed tokens once that hit is taken */
        uint32_t queued, hit = pc_peek(s, id, &queued);
        uint32_t c0 = q->computed, hb = q->blocks + hit;
        uint32_t hc = c0 + hit * s->cfg.block_tokens;
        uint32_t load = loadable_at(s, q, hc);
        if (load) {
            uint32_t extra = blocks_for(s, load) - hb;
            if (!admit_room(s, id, hit, queued, extra, t_s)) {
                if (was_cached)
                    idle_enter(s, id);
                break;
            }
            wq_pop_front(s);
            q->blocks += extra;
            kv_take(s, extra);
            if (s->apc)
                pc_record(s, id, c0, hit);
            q->state = CZ_SEQ_LOADING;
            q->load_start_s = t_s;
            s->sn[id].load_tokens = load;
            s->n_loading++;
            load_request(s, id, load); /* the part not resident */
            continue;
        }
        uint32_t need = q->tokens_in + q->generated - hc;
        uint32_t n = need < budget ? need : budget;
        uint32_t extra = extra_blocks_at(s, hb, hc, n);
        if ((!s->cfg.chunked_prefill && need > budget) ||
            !admit_room(s, id, hit, queued, extra, t_s)) {
            if (was_cached)
                idle_enter(s, id);
            break;
        }
        wq_pop_front(s);
        q->state = CZ_SEQ_RUNNING;
        s->sn[id].remote = 0; /* its cache held what a peer would have sent */
        pf_push(s, id);
        q->blocks += extra;
        kv_take(s, extra);
        if (s->apc)
            pc_record(s, id, c0, hit);
        add_item(s, out, id, n);
        budget -= n;
    }

    for (uint32_t k = first_admitted; k < s->n_items; k++) {
        cz_req_record *rec = cz_metrics_req(s->metrics, s->seqs[s->items[k].seq].turn_rec);
        if (isnan(rec->first_sched_s))
            rec->first_sched_s = t_s;
    }
    wq_prefetch(s);
    out->items = s->items;
    out->n_items = s->n_items;
    s->in_flight = s->n_items > 0 || s->batch_decode > 0;
    timeline_sample(s, t_s, out);
    return s->in_flight;
}

/* A timeline row at the start of a step, at most every timeline_interval_s; one when the
 * replica falls idle (nothing running, waiting or scheduled), whenever that is, and then
 * the first when it has work again, so that neither a quiet replica keeps its last busy row
 * nor a busy one its idle row. At most one row per interval and two per idle period. */
static void timeline_sample(cz_server *s, double t_s, const cz_batch *out)
{
    bool idle = out->total_tokens == 0 && n_running(s) == 0 && s->wq_len == 0;
    if (idle ? !s->tl_idle : t_s >= s->tl_next_s || s->tl_idle) {
        cz_timeline_row row = {
            .t_s = t_s,
            .stage = s->cfg.timeline_stage,
            .replica = s->cfg.timeline_replica,
            .kv_blocks_used = s->kv_used,
            .kv_blocks_idle = s->kv_idle_blocks,
            .host_kv_tokens = s->host_tokens,
            .running = n_running(s),
            .waiting = (uint32_t)s->wq_len,
            .batch_tokens = out->total_tokens,
            .prefix_queries = s->pcst.queries,
            .prefix_hits = s->pcst.hits,
            .kv_pulled_tokens = s->pulled_tokens,
            .kv_sent_tokens = s->sent_tokens,
        };
        cz_metrics_timeline(s->metrics, &row);
        if (!idle)
            s->tl_next_s = t_s + s->metrics->timeline_interval_s;
        s->tl_idle = idle;
    }
}

/* The open turn of `id` reached its budget at t_s with its input complete. */
static void turn_complete(cz_server *s, uint32_t id, double t_s)
{
    cz_seq *q = &s->seqs[id];
    cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
    rec->output_tokens = q->generated - q->turn_generated_base;
    rec->heard_tokens = rec->output_tokens;
    rec->finish_s = t_s;
    rec->outcome = CZ_REQ_COMPLETED;
    q->turn_open = false;
    s->turn_done[s->n_turn_done++] = id;
    go_idle(s, id);
}

/* A sequence that sampled its token at t_s and reached its budget: the turn is complete,
 * or it stalls until fed. */
static void budget_reached(cz_server *s, uint32_t id, double t_s)
{
    cz_seq *q = &s->seqs[id];
    if (q->input_final) {
        turn_complete(s, id, t_s);
    } else {
        q->state = CZ_SEQ_STALLED;
        s->n_stalled++;
        s->stalled[s->n_stalled_ev++] = id;
    }
}

void cz_server_end_output(cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(s->in_flight && id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    CZ_ASSERT(q->turn_open);
    if (d->in_decode)
        d_sync(s, id); /* its counts before this batch */
    uint32_t last = q->generated + 1;
    if (last >= q->budget)
        return;
    q->budget = last;
    if (d->in_decode) {
        /* due at this batch's end: its heap key only falls */
        s->heap[d->heap_pos].finish_k = s->steps + 1;
        heap_up(s, d->heap_pos);
    }
}

/* Reports `id` when its generated count reached the count the driver asked about. */
static void check_milestone(cz_server *s, uint32_t id)
{
    cz_seq *q = &s->seqs[id];
    if (q->notify_at && q->generated == q->notify_at) {
        q->notify_at = 0;
        s->milestone[s->n_milestone++] = id;
    }
}

void cz_server_on_batch_done(cz_server *s, double t_s, cz_step_events *ev)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(s->in_flight);
    s->in_flight = false;
    s->metrics->steps++;
    s->n_turn_done = 0;
    s->n_first_token = 0;
    s->n_milestone = 0;
    s->n_stalled_ev = 0;

    /* the decode set: every member computed one token and sampled the next; all of them
     * had their previous token at the previous step's end */
    uint64_t tokens = 0; /* output tokens this step produced */
    if (s->batch_decode) {
        CZ_ASSERT(s->batch_decode == s->n_decode);
        tokens += s->n_decode;
        cz_metrics_add_itl(s->metrics, s->cfg.timeline_stage, t_s - s->last_done_s,
                           s->n_decode);
        s->d_sum_computed += s->n_decode;
    }
    s->steps++;
    s->last_done_s = t_s;
    /* the counted members whose context entered a new block with the token they sampled */
    s->ctx_grown += s->cc_phase_cnt[bt_mod(s, s->steps)];
    while (s->n_heap > 0 && s->heap[0].finish_k == s->steps) {
        uint32_t id = s->heap[0].id;
        cz_seq *q = &s->seqs[id];
        d_sync(s, id);
        check_milestone(s, id);
        if (q->generated == q->budget) {
            d_leave(s, id);
            q->last_token_s = t_s;
            budget_reached(s, id, t_s);
        } else {
            /* a report only: wait for the budget (or the next report asked for) */
            s->heap[0].finish_k = s->steps + (event_target(q) - q->generated);
            heap_down(s, 0);
        }
    }

    /* prefill chunks: a chunk that reaches the end of the input samples a token */
    for (uint32_t k = 0; k < s->n_items; k++) {
        uint32_t id = s->items[k].seq;
        cz_seq *q = &s->seqs[id];
        q->computed += s->items[k].tokens;
        q->sched_tokens = 0;
        if (s->cfg.kv_window_tokens) {
            /* the blocks behind the window are freed */
            uint32_t keep = blocks_for(s, q->computed);
            if (q->blocks > keep) {
                s->kv_used -= q->blocks - keep;
                q->blocks = keep;
            }
        }
        if (q->computed != q->tokens_in + q->generated)
            continue;
        if (!s->ordered)
            pf_remove(s, id);
        q->generated++;
        tokens++;
        if (s->sn[id].ctx_counted && bt_mod(s, (uint64_t)q->tokens_in + q->generated - 1) == 0)
            s->ctx_grown++;
        cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
        if (q->generated == q->turn_generated_base + 1) {
            rec->first_token_s = t_s;
            rec->output_tokens = 1;
            s->first_token[s->n_first_token++] = id;
        } else {
            cz_metrics_add_itl(s->metrics, s->cfg.timeline_stage, t_s - q->last_token_s, 1);
        }
        q->last_token_s = t_s;
        check_milestone(s, id);
        if (q->generated == q->budget)
            budget_reached(s, id, t_s);
        else if (!s->ordered)
            d_join(s, id);
    }
    if (s->ordered)
        pf_compact(s);
    /* the members due at the next step's end were last touched when they joined */
    s->n_due = due_at(s, s->steps + 1, s->due, CZ_ARRAY_LEN(s->due));
    for (uint32_t i = 0; i < s->n_due; i++) {
        CZ_PREFETCH(&s->seqs[s->due[i]]);
        CZ_PREFETCH(&s->sn[s->due[i]]);
    }
    if (s->cfg.timeline_stage == 0)
        cz_metrics_add_tokens(s->metrics, t_s, tokens);
    s->n_items = 0;
    s->batch_decode = 0;
    ev->turn_done = s->turn_done;
    ev->n_turn_done = s->n_turn_done;
    ev->first_token = s->first_token;
    ev->n_first_token = s->n_first_token;
    ev->milestone = s->milestone;
    ev->n_milestone = s->n_milestone;
    ev->stalled = s->stalled;
    ev->n_stalled = s->n_stalled_ev;
}

bool cz_server_step_again(cz_server *s, double t_s, cz_batch *out)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(s->in_flight);
    /* the next step is the same decode set when nothing ends, joins or waits and its
     * block phase fits in the free blocks (make_room would evict nothing) */
    uint64_t next = s->steps + 1;
    if (s->ordered || s->n_items > 0 || s->batch_decode == 0 || s->wq_len > 0 ||
        s->n_pf > 0 || s->n_stalled > 0 || s->n_loading > 0 || s->n_xfers > 0 ||
        (s->n_heap > 0 && s->heap[0].finish_k <= next) ||
        s->phase_cnt[bt_mod(s, next)] > kv_free(s))
        return false;
    /* cz_server_on_batch_done (every member computed one token and sampled the next),
     * then cz_server_schedule (the decode set again, its block phase taken) */
    cz_server_run_apply(s, &t_s, 1);
    memset(out, 0, sizeof *out);
    out->decode_seqs = s->n_decode;
    out->decode_ctx_tokens = s->d_sum_computed + s->n_decode;
    out->total_tokens = s->n_decode;
    out->items = s->items;
    return true;
}

void cz_server_run_apply(cz_server *s, const double *end_s, uint32_t n)
{
    CZ_ASSERT(!s->run_hold && s->in_flight && n > 0);
    CZ_ASSERT(s->n_items == 0 && s->batch_decode == s->n_decode && s->n_heap == s->n_decode &&
              (s->n_heap == 0 || s->heap[0].finish_k > s->steps + n));
    /* cz_server_on_batch_done and cz_server_schedule, n times over: every member computed
     * one token and sampled the next, and the decode set runs again; the metrics' part
     * at once */
    uint32_t d = s->n_decode;
    s->metrics->steps += n;
    s->n_turn_done = s->n_first_token = s->n_milestone = s->n_stalled_ev = 0;
    cz_metrics_add_itl_steps(s->metrics, s->cfg.timeline_stage, s->last_done_s, end_s, n, d);
    if (s->cfg.timeline_stage == 0)
        cz_metrics_add_tokens_steps(s->metrics, end_s, n, d);
    /* then each step's blocks, counted growth and timeline sample; the batch as
     * step_again returns it */
    cz_batch b = {.decode_seqs = d, .total_tokens = d, .items = s->items};
    for (uint32_t k = 0; k < n; k++) {
        s->d_sum_computed += d;
        s->steps++;
        uint64_t ph = bt_mod(s, s->steps);
        s->ctx_grown += s->cc_phase_cnt[ph];
        kv_take(s, s->phase_cnt[ph]);
        b.decode_ctx_tokens = s->d_sum_computed + d;
        timeline_sample(s, end_s[k], &b);
    }
    s->last_done_s = end_s[n - 1];
    s->n_due = 0;
    s->wake_s = INFINITY;
}

uint32_t cz_server_run_room(const cz_server *s, uint32_t cap)
{
    CZ_ASSERT(s->in_flight && s->n_items == 0 && s->n_decode > 0 && !s->run_hold);
    uint32_t free = kv_free(s), m = 0;
    /* a watched cache hears of each eviction as it happens: a run's steps take only the
     * blocks never used (kv_take evicts once those run out) */
    if (s->apc && s->pc.watch.cached)
        free = free > s->pc.n_free ? free - s->pc.n_free : 0;
    uint64_t due = s->n_heap > 0 ? s->heap[0].finish_k : UINT64_MAX;
    while (m < cap) {
        uint64_t next = s->steps + m + 1; /* the step whose end the call would see */
        uint32_t need = s->phase_cnt[bt_mod(s, next)];
        if (due <= next || need > free)
            break;
        free -= need;
        m++;
    }
    return m;
}

void cz_server_run_hold(cz_server *s, bool on)
{
    CZ_ASSERT(s->run_hold != on);
    s->run_hold = on;
}

void cz_server_notify_at(cz_server *s, uint32_t id, uint32_t generated)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    if (d->in_decode)
        d_sync(s, id);
    CZ_ASSERT(generated > q->generated);
    q->notify_at = generated;
    if (d->in_decode) {
        s->heap[d->heap_pos].finish_k = s->steps + (event_target(q) - q->generated);
        heap_up(s, d->heap_pos);
        heap_down(s, d->heap_pos);
    }
}

void cz_server_on_playback(cz_server *s, double t_s, uint32_t id, double played_s,
                           double received_s, double last_chunk_s)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs && played_s <= received_s + 1e-9);
    cz_seq *q = &s->seqs[id];
    if (isnan(q->first_audio_s))
        q->first_audio_s = t_s;
    q->played_s = played_s;
    q->received_s = received_s;
    q->last_chunk_s = last_chunk_s;
    q->report_s = t_s;
    /* the remaining playback horizon, as an end time (Eq. 4's T_play) */
    s->sn[id].play_end_s = t_s + (received_s - played_s);
    if (cz_evidx_has(&s->evx, id))
        cz_evidx_set(&s->evx, id, next_use_s(s, id));
}

void cz_server_on_speech_start(cz_server *s, double t_s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    s->seqs[id].speech_start_s = t_s;
    s->sn[id].speech_open = 1;
    /* next-use eviction: the session is about to be reused; its KV leaves the candidates
     * until its turn starts */
    s->sn[id].protect = 1;
    cz_evidx_remove(&s->evx, id);
}

double cz_server_speech_end_estimate(const cz_server *s, uint32_t id, double t_s)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    const snode *d = &s->sn[id];
    double start = d->speech_open ? s->seqs[id].speech_start_s : t_s;
    double dur = !isnan(d->speech_ema_s) ? d->speech_ema_s
                 : s->speech_n           ? s->speech_sum_s / (double)s->speech_n
                                         : s->cfg.speech_prior_s;
    return start + dur;
}

uint32_t cz_server_preload_tokens(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    const cz_seq *q = &s->seqs[id];
    const snode *d = &s->sn[id];
    if (!s->cfg.kv_preload || s->cfg.kv_idle != CZ_KV_IDLE_OFFLOAD || q->state != CZ_SEQ_IDLE ||
        d->preloading || q->storing || q->host_tokens <= q->computed)
        return 0;
    return q->host_tokens - q->computed;
}

cz_preload_outcome cz_server_preload(cz_server *s, double t_s, uint32_t id, bool admitted,
                                     double needed_at_s)
{
    CZ_ASSERT(!s->run_hold);
    cz_server_on_speech_start(s, t_s, id);
    if (cz_server_preload_tokens(s, id) == 0)
        return CZ_PRELOAD_NOTHING;
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    if (!admitted) {
        s->pl.skips++;
        return CZ_PRELOAD_SKIPPED;
    }
    /* room from free blocks, then idle KV whose next use is later than this one's (under
     * LRU eviction: any idle KV); never running KV, never marking the pool saturated */
    bool was_idle = d->in_idle;
    idle_leave(s, id);
    uint32_t extra = blocks_for(s, q->host_tokens) - q->blocks;
    while (extra > kv_free(s)) {
        if (s->cfg.kv_evict != CZ_EVICT_LRU) {
            uint32_t v = cz_evidx_top(&s->evx);
            if (v == UINT32_MAX || !(s->evx.key[v] > needed_at_s))
                break;
        }
        if (!evict_one(s, extra - kv_free(s), true))
            break;
    }
    if (extra > kv_free(s)) {
        if (was_idle)
            idle_enter(s, id);
        s->pl.skips++;
        return CZ_PRELOAD_SKIPPED;
    }
    q->blocks += extra;
    kv_take(s, extra);
    d->preloading = 1;
    d->load_tokens = q->host_tokens;
    cz_grow((void **)&s->pl_ids, &s->cap_pl, s->n_pl + 1, sizeof *s->pl_ids);
    s->pl_ids[s->n_pl++] = id;
    xfer_request(s, id, q->computed, q->host_tokens - q->computed, false);
    if (was_idle) {
        /* its blocks stay accounted as idle (cached) KV, though not evictable */
        d->in_idle = 1;
        s->kv_idle_blocks += q->blocks;
    }
    s->pl.started++;
    return CZ_PRELOAD_STARTED;
}

static void pl_list_remove(cz_server *s, uint32_t id)
{
    for (size_t i = 0; i < s->n_pl; i++) {
        if (s->pl_ids[i] == id) {
            memmove(&s->pl_ids[i], &s->pl_ids[i + 1], (s->n_pl - i - 1) * sizeof *s->pl_ids);
            s->n_pl--;
            return;
        }
    }
}

/* Cancels the most recent preload in flight: its blocks beyond the resident prefix are
 * freed now; its transfer lands void, and its turn loads synchronously. */
static bool cancel_preload(cz_server *s)
{
    while (s->n_pl > 0 && s->seqs[s->pl_ids[s->n_pl - 1]].state == CZ_SEQ_CLOSED)
        s->n_pl--; /* closed while loading: nothing to free */
    if (s->n_pl == 0)
        return false;
    uint32_t id = s->pl_ids[--s->n_pl];
    cz_seq *q = &s->seqs[id];
    snode *d = &s->sn[id];
    uint32_t keep = blocks_for(s, q->computed);
    uint32_t freed = q->blocks - keep;
    blocks_trim(s, id, keep);
    if (d->in_idle)
        s->kv_idle_blocks -= freed;
    d->pl_cancelled = 1;
    d->pl_fell = 1;
    s->pl.cancels++;
    return true;
}

void cz_server_preload_stats(const cz_server *s, cz_preload_stats *out)
{
    *out = s->pl;
}

double cz_server_saturated_at(const cz_server *s)
{
    return s->saturated_at_s;
}

void cz_server_on_xfer_done(cz_server *s, double t_s, uint32_t id, bool to_host)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    if (to_host) {
        CZ_ASSERT(q->storing);
        q->storing = false;
        if (q->state == CZ_SEQ_CLOSED) {
            seq_recycle(s, id);
            return;
        }
        /* the store copied the context prefix the sequence held when it was issued;
         * a barge-in since may have cut the context shorter */
        uint32_t ctx = q->tokens_in + q->generated;
        uint32_t stored = s->sn[id].store_to < ctx ? s->sn[id].store_to : ctx;
        if (stored < q->host_tokens)
            stored = q->host_tokens;
        s->host_tokens += stored - q->host_tokens;
        q->host_tokens = stored;
        s->sn[id].ckpt = 0;
        tail_check(s, id);
        idle_settle(s, id);
        return;
    }
    if (s->sn[id].preloading) {
        snode *d = &s->sn[id];
        d->preloading = 0;
        if (d->pl_cancelled) {
            d->pl_cancelled = 0;
            if (q->state == CZ_SEQ_CLOSED) {
                seq_recycle(s, id);
                return;
            }
            if (q->turn_open) {
                s->pl.fallbacks += d->pl_fell; /* the waiting turn now loads itself */
                d->pl_fell = 0;
            }
            if (d->in_idle)
                idle_settle(s, id);
            else
                idle_enter(s, id);
            return;
        }
        pl_list_remove(s, id);
        if (q->state == CZ_SEQ_CLOSED) {
            seq_recycle(s, id);
            return;
        }
        q->computed = d->load_tokens;
        CZ_ASSERT(q->blocks == blocks_for(s, q->computed));
        if (q->turn_open) {
            /* the turn started first: it waited for the rest of the load */
            s->pl.late++;
            cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
            rec->kv_load_s += t_s - rec->arrival_s;
        } else {
            s->pl.hits++;
            d->preloaded = 1;
            /* warmed KV stays protected until its turn, under a cap on all of it */
            double cap = s->cfg.preload_protect_fraction * s->cfg.kv_blocks;
            if ((double)(s->pl_protected + q->blocks) <= cap) {
                d->pl_prot = q->blocks;
                s->pl_protected += q->blocks;
            } else {
                d->protect = 0;
            }
        }
        if (d->in_idle)
            idle_settle(s, id);
        else
            idle_enter(s, id);
        return;
    }
    CZ_ASSERT(q->state == CZ_SEQ_LOADING);
    s->n_loading--;
    q->computed = s->sn[id].load_tokens;
    s->sn[id].remote = 0;
    CZ_ASSERT(q->blocks == blocks_for(s, q->computed));
    cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
    rec->kv_load_s += t_s - q->load_start_s;
    if (!q->turn_open) {
        /* aborted while loading: keep what the shortened context still uses */
        uint32_t ctx = q->tokens_in + q->generated;
        if (q->host_tokens > ctx) {
            s->host_tokens -= q->host_tokens - ctx;
            q->host_tokens = ctx;
        }
        if (q->computed > ctx) {
            q->computed = ctx;
            blocks_trim(s, id, blocks_for(s, ctx));
        }
        if (s->apc)
            pc_cut(s, id, ctx);
        go_idle(s, id);
        return;
    }
    /* back at the front of the queue; until it is admitted its KV counts as cached,
     * evictable under pressure like a resident prefix (it is also in host memory), so
     * loaded sequences can never hold the pool against each other */
    q->state = CZ_SEQ_WAITING;
    wq_push_front(s, id);
    idle_enter(s, id);
}

uint32_t cz_server_abort(cz_server *s, double t_s, uint32_t id, uint32_t keep_generated)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs && !s->in_flight);
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->turn_rec != NO_REC && (q->turn_open || q->state == CZ_SEQ_IDLE));
    snode *d = &s->sn[id];
    d->remote = 0; /* a peer's KV not loaded yet is not needed any more */
    if (d->in_decode)
        d_leave(s, id);
    uint32_t made = q->generated - q->turn_generated_base;
    if (keep_generated > made)
        keep_generated = made;
    cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
    rec->output_tokens = made;
    rec->heard_tokens = keep_generated;
    if (q->turn_open)
        rec->finish_s = t_s;
    rec->outcome = CZ_REQ_ABORTED;
    bool was_open = q->turn_open;
    q->turn_open = false;
    /* the context keeps the turn's input and the heard output */
    q->generated = q->turn_generated_base + keep_generated;
    q->budget = q->generated;
    q->notify_at = 0;
    uint32_t ctx = q->tokens_in + q->generated;
    if (q->state == CZ_SEQ_LOADING)
        return made; /* trimmed and idled when the load lands */
    idle_leave(s, id);
    if (q->computed > ctx)
        q->computed = ctx;
    if (q->host_tokens > ctx) {
        s->host_tokens -= q->host_tokens - ctx;
        q->host_tokens = ctx;
    }
    if (was_open) {
        switch (q->state) {
        case CZ_SEQ_WAITING: wq_remove(s, id); break;
        case CZ_SEQ_RUNNING:
            if (d->in_pf)
                pf_remove(s, id);
            break;
        case CZ_SEQ_STALLED: s->n_stalled--; break;
        default: CZ_ASSERT(0 && "open turn in an unexpected state");
        }
    }
    /* a preload in flight brings back only what the shortened context still uses; its
     * blocks stay allocated for that much */
    uint32_t keep_tokens = q->computed;
    if (d->preloading && !d->pl_cancelled) {
        if (d->load_tokens > ctx)
            d->load_tokens = ctx;
        if (d->load_tokens > keep_tokens)
            keep_tokens = d->load_tokens;
    }
    uint32_t keep_blocks = blocks_for(s, keep_tokens);
    if (q->blocks > keep_blocks)
        blocks_trim(s, id, keep_blocks);
    if (s->apc)
        pc_cut(s, id, ctx);
    q->sched_tokens = 0;
    go_idle(s, id);
    return made;
}

/* A closed sequence's slot goes back to the free list once no transfer of its KV is
 * outstanding (a store or a preload lands on its id) and no preload list names it. */
static void seq_recycle(cz_server *s, uint32_t id)
{
    const cz_seq *q = &s->seqs[id];
    const snode *d = &s->sn[id];
    if (q->state != CZ_SEQ_CLOSED || q->storing || d->preloading || d->reusable)
        return;
    for (size_t i = 0; i < s->n_pl; i++)
        if (s->pl_ids[i] == id)
            return;
    cz_grow((void **)&s->free_ids, &s->cap_free, s->n_free + 1, sizeof *s->free_ids);
    s->free_ids[s->n_free++] = id;
    s->sn[id].reusable = 1;
}

void cz_server_seq_rebind(cz_server *s, uint32_t id, uint64_t session)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs && s->seqs[id].state != CZ_SEQ_CLOSED);
    s->seqs[id].session = session;
}

bool cz_server_seq_moving(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    return s->seqs[id].storing || s->sn[id].preloading;
}

void cz_server_seq_truncate(cz_server *s, uint32_t id, uint32_t tokens)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->state == CZ_SEQ_IDLE && !q->turn_open);
    uint32_t ctx = q->tokens_in + q->generated;
    if (tokens >= ctx)
        return; /* nothing to cut: its KV may still be moving (a store, a preload) */
    CZ_ASSERT(!cz_server_seq_moving(s, id));
    idle_leave(s, id);
    uint32_t cut = ctx - tokens, from_gen = cut < q->generated ? cut : q->generated;
    q->generated -= from_gen;
    q->tokens_in -= cut - from_gen;
    if (q->turn_generated_base > q->generated)
        q->turn_generated_base = q->generated;
    if (q->budget > q->generated)
        q->budget = q->generated;
    if (q->computed > tokens)
        q->computed = tokens;
    if (q->host_tokens > tokens) {
        s->host_tokens -= q->host_tokens - tokens;
        q->host_tokens = tokens;
    }
    uint32_t keep = blocks_for(s, q->computed);
    if (q->blocks > keep)
        blocks_trim(s, id, keep);
    if (s->apc)
        pc_cut(s, id, tokens);
    if (s->sn[id].pl_prot > q->blocks) {
        s->pl_protected -= s->sn[id].pl_prot - q->blocks;
        s->sn[id].pl_prot = q->blocks;
    }
    tail_check(s, id);
    idle_enter(s, id);
}

void cz_server_seq_close(cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    cz_seq *q = &s->seqs[id];
    CZ_ASSERT(q->state == CZ_SEQ_IDLE && !q->turn_open && !s->sn[id].ctx_counted);
    idle_leave(s, id);
    s->pl_protected -= s->sn[id].pl_prot;
    s->sn[id].pl_prot = 0;
    kv_release(s, id);
    s->host_tokens -= q->host_tokens;
    q->host_tokens = 0;
    q->computed = 0;
    q->state = CZ_SEQ_CLOSED;
    if (q->turn_rec != NO_REC)
        cz_metrics_release(s->metrics, q->turn_rec);
    q->turn_rec = NO_REC;
    seq_recycle(s, id);
}

void cz_server_finalize(cz_server *s)
{
    CZ_ASSERT(!s->run_hold);
    for (uint32_t id = s->d_head; id != NIL; id = s->sn[id].next)
        d_sync(s, id);
    for (size_t i = 0; i < s->n_seqs; i++) {
        const cz_seq *q = &s->seqs[i];
        if (q->turn_open) {
            cz_req_record *rec = cz_metrics_req(s->metrics, q->turn_rec);
            rec->output_tokens = q->generated - q->turn_generated_base;
            rec->heard_tokens = rec->output_tokens;
            rec->outcome = CZ_REQ_UNFINISHED;
        }
    }
}

bool cz_server_busy(const cz_server *s) { return s->in_flight; }
uint32_t cz_server_running(const cz_server *s) { return n_running(s); }
uint32_t cz_server_waiting(const cz_server *s) { return (uint32_t)s->wq_len; }
uint32_t cz_server_kv_used(const cz_server *s)
{
    CZ_ASSERT(!s->run_hold);
    return s->kv_used;
}

uint64_t cz_server_ctx_grown(const cz_server *s)
{
    CZ_ASSERT(!s->run_hold);
    return s->ctx_grown;
}

void cz_server_count_ctx(cz_server *s, uint32_t id, bool on)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs && s->seqs[id].state != CZ_SEQ_CLOSED);
    snode *d = &s->sn[id];
    if (d->ctx_counted == on)
        return;
    d->ctx_counted = on;
    if (d->in_decode) {
        if (on)
            s->cc_phase_cnt[d->phase]++;
        else
            s->cc_phase_cnt[d->phase]--;
    }
}
uint32_t cz_server_kv_idle(const cz_server *s) { return s->kv_idle_blocks; }
uint64_t cz_server_host_tokens(const cz_server *s) { return s->host_tokens; }

uint32_t cz_server_n_seqs(const cz_server *s)
{
    return (uint32_t)s->n_seqs;
}

bool cz_server_seq_decoding(const cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    return s->sn[id].in_decode;
}

const cz_seq *cz_server_seq(cz_server *s, uint32_t id)
{
    CZ_ASSERT(!s->run_hold);
    CZ_ASSERT(id < s->n_seqs);
    if (s->sn[id].in_decode)
        d_sync(s, id);
    return &s->seqs[id];
}

bool cz_server_check(const cz_server *s, cz_err *err)
{
    uint64_t blocks = 0, idle_blocks = 0, lru_blocks = 0, host = 0, in_decode = 0, sum_c = 0;
    uint64_t n_wait = 0, n_run = 0, n_stall = 0, n_load = 0, n_pf = 0;
    uint32_t *phase = cz_xcalloc(s->cfg.block_tokens, sizeof *phase);
    uint32_t *cphase = cz_xcalloc(s->cfg.block_tokens, sizeof *cphase);
    uint32_t *refs = s->apc ? cz_xcalloc(s->cfg.kv_blocks, sizeof *refs) : NULL;
    bool ok = false;
    for (uint32_t id = s->d_head; id != NIL; id = s->sn[id].next) {
        const snode *d = &s->sn[id];
        uint32_t c = d->c0 + (uint32_t)(s->steps - d->k0);
        sum_c += c;
        phase[d->phase]++;
        cphase[d->phase] += d->ctx_counted;
        in_decode++;
        if (!d->in_decode || s->heap[d->heap_pos].id != id) {
            cz_err_set(err, CZ_EINVAL, "decode member %u is not at its heap position", id);
            goto out;
        }
    }
    for (size_t i = 0; i < s->n_seqs; i++) {
        const cz_seq *q = &s->seqs[i];
        const snode *d = &s->sn[i];
        uint32_t held = q->blocks, c = q->computed;
        if (d->in_decode) {
            c = d->c0 + (uint32_t)(s->steps - d->k0);
            /* a step in flight has already been given its blocks */
            held = blocks_for(s, (uint64_t)c + (s->in_flight ? 1 : 0));
        }
        blocks += held;
        host += q->host_tokens;
        if (d->in_idle)
            idle_blocks += held;
        if (d->in_lru)
            lru_blocks += held;
        switch (q->state) {
        case CZ_SEQ_IDLE: break;
        case CZ_SEQ_WAITING: n_wait++; break;
        case CZ_SEQ_RUNNING: n_run++; break;
        case CZ_SEQ_STALLED: n_stall++; break;
        case CZ_SEQ_LOADING: n_load++; break;
        default: break;
        }
        n_pf += d->in_pf;
        if (held != 0 && q->state == CZ_SEQ_CLOSED) {
            cz_err_set(err, CZ_EINVAL, "sequence %zu holds %u blocks in state %u", i, held,
                       q->state);
            goto out;
        }
        if (d->in_idle && q->state != CZ_SEQ_IDLE && q->state != CZ_SEQ_WAITING) {
            cz_err_set(err, CZ_EINVAL, "sequence %zu counts as idle in state %u", i, q->state);
            goto out;
        }
        if (d->in_pf && q->blocks < blocks_for(s, (uint64_t)c + q->sched_tokens)) {
            cz_err_set(err, CZ_EINVAL, "sequence %zu has %u tokens of KV in %u blocks", i,
                       c + q->sched_tokens, q->blocks);
            goto out;
        }
        if (q->state != CZ_SEQ_LOADING && !d->preloading && !d->in_pf && !d->in_decode &&
            held != blocks_for(s, c)) {
            cz_err_set(err, CZ_EINVAL, "sequence %zu holds %u blocks for %u tokens", i, held, c);
            goto out;
        }
        if (d->in_lru && (!d->in_idle || q->pinned)) {
            cz_err_set(err, CZ_EINVAL, "sequence %zu is evictable in state %u", i, q->state);
            goto out;
        }
        if (s->apc) {
            /* its cached blocks: within what it holds, under the hashes of its blocks */
            const pc_seq *p = &s->pcs[i];
            if (p->n_reg > held || p->n_hash > p->cap) {
                cz_err_set(err, CZ_EINVAL, "sequence %zu registers %u of its %u blocks", i,
                           p->n_reg, held);
                goto out;
            }
            for (uint32_t j = 0; j < p->n_reg; j++) {
                uint32_t e = p->ent[j];
                if (e == CZ_PCACHE_NONE)
                    continue;
                if (e >= s->cfg.kv_blocks || j >= p->n_hash || s->pc.blk[e].ref == 0 ||
                    s->pc.blk[e].hash != p->hash[j]) {
                    cz_err_set(err, CZ_EINVAL,
                               "sequence %zu: its block %u names cached block %u, which is "
                               "not held under its hash",
                               i, j, e);
                    goto out;
                }
                refs[e]++;
            }
        }
    }
    if (s->apc) {
        /* each cached block's holders counted once; a shared block is one block in use */
        for (uint32_t e = 0; e < s->cfg.kv_blocks; e++) {
            if (refs[e] != s->pc.blk[e].ref) {
                cz_err_set(err, CZ_EINVAL, "cached block %u: %u holders, counted %u", e,
                           refs[e], s->pc.blk[e].ref);
                goto out;
            }
            if (refs[e] > 1)
                blocks -= refs[e] - 1;
        }
        if (!cz_pcache_check(&s->pc, err))
            goto out;
        if ((uint64_t)s->kv_used + s->pc.n_free > s->cfg.kv_blocks) {
            cz_err_set(err, CZ_EINVAL, "pool: %u used and %u cached free of %u", s->kv_used,
                       s->pc.n_free, s->cfg.kv_blocks);
            goto out;
        }
    }
    if (in_decode != s->n_decode || in_decode != s->n_heap || sum_c != s->d_sum_computed) {
        cz_err_set(err, CZ_EINVAL, "decode set: %llu listed, %u counted, %u in the heap",
                   (unsigned long long)in_decode, s->n_decode, s->n_heap);
        goto out;
    }
    for (uint32_t p = 0; p < s->cfg.block_tokens; p++) {
        if (phase[p] != s->phase_cnt[p] || cphase[p] != s->cc_phase_cnt[p]) {
            cz_err_set(err, CZ_EINVAL,
                       "decode set: phase %u counts %u (%u counted contexts), members %u (%u)",
                       p, s->phase_cnt[p], s->cc_phase_cnt[p], phase[p], cphase[p]);
            goto out;
        }
    }
    if (blocks != s->kv_used || s->kv_used > s->cfg.kv_blocks || idle_blocks != s->kv_idle_blocks) {
        cz_err_set(err, CZ_EINVAL, "blocks held %llu (idle %llu), pool used %u (idle %u) of %u",
                   (unsigned long long)blocks, (unsigned long long)idle_blocks, s->kv_used,
                   s->kv_idle_blocks, s->cfg.kv_blocks);
        goto out;
    }
    if (lru_blocks != s->lru_blocks) {
        cz_err_set(err, CZ_EINVAL, "evictable sequences hold %llu blocks, counted %llu",
                   (unsigned long long)lru_blocks, (unsigned long long)s->lru_blocks);
        goto out;
    }
    if (host != s->host_tokens) {
        cz_err_set(err, CZ_EINVAL, "host tier holds %llu tokens, counted %llu",
                   (unsigned long long)host, (unsigned long long)s->host_tokens);
        goto out;
    }
    if (n_wait != s->wq_len || n_run != (uint64_t)s->n_decode + s->n_pf || n_pf != s->n_pf ||
        n_stall != s->n_stalled || n_load != s->n_loading) {
        cz_err_set(err, CZ_EINVAL,
                   "queues: %zu waiting, %u decoding + %u prefilling, %u stalled, %u loading; "
                   "states say %llu, %llu, %llu, %llu",
                   s->wq_len, s->n_decode, s->n_pf, s->n_stalled, s->n_loading,
                   (unsigned long long)n_wait, (unsigned long long)n_run,
                   (unsigned long long)n_stall, (unsigned long long)n_load);
        goto out;
    }
    ok = true;
out:
    free(phase);
    free(cphase);
    free(refs);
    return ok;
}
