/* cz_server.h - the serving core: one autoregressive stage (one replica) with continuous
 * batching, paged KV, multi-turn sequences and a host-memory KV tier.
 *
 * The core is reactive (docs/architecture.md): it never reads a clock. A driver tells it
 * what happened (a turn arrived, input was fed, a batch or a KV transfer finished, the
 * user barged in), each at a time the driver owns, and asks what to run next
 * (cz_server_schedule). The discrete-event simulator and a real engine are two drivers.
 *
 * Sequences and turns. A sequence is a session's resident token sequence at this stage;
 * it lives across turns (multi-turn KV reuse) or frames (periodic streams). A turn appends
 * input tokens and allows more output tokens; its KV prefix from earlier turns is reused
 * when still resident. Input may arrive in pieces (cz_server_feed: a talker fed by the
 * thinker's chunks). Each turn has a metrics record (cz_metrics.h).
 *
 * Scheduling follows vLLM's V1 scheduler: running sequences first, each given the tokens
 * it lacks within a per-step token budget (chunked prefill); when the pool is short, idle
 * sequences' KV is evicted in LRU order (dropped, or kept in host memory when the
 * offload tier is on) and then the scheduler policy picks running sequences to preempt by
 * recompute; waiting sequences are admitted only in steps with no preemption, up to the
 * sequence cap. A sequence whose KV is in host memory is loaded back over the host link
 * when it is admitted; the load is on the turn's critical path.
 *
 * Cost: a step is O(prefill chunks + sequences that finish, join or are preempted +
 * log n), not O(running sequences). Sequences past their input form a decode set that
 * advances one token per step in aggregate (counts, context sums, blocks due per block
 * phase, a heap of finish steps); a member's own counters are brought up to date only when
 * it leaves the set or is inspected. Under V1's rules this is exact: every decoding
 * sequence is scheduled in every step (max_num_batched_tokens >= max_num_seqs, as vLLM
 * requires) and decoding sequences precede prefilling ones in the running order
 * (docs/serving-core.md).
 *
 * Automatic prefix caching (cfg.prefix_caching; vLLM's "Automatic Prefix Caching" design,
 * docs.vllm.ai): full blocks are keyed by chained hashes (cz_server_turn_hashed), shared by
 * every sequence whose prefix has them (counted once in the pool) and kept cached when
 * freed, in a free queue evicted least recently freed first; an admitted sequence's
 * longest run of cached blocks needs no prefill (docs/serving-core.md).
 *
 * Memory: arrays are sized at creation or grow by doubling when sequences open (or, with
 * prefix caching, when a turn or a feed lengthens a context); scheduling and completing a
 * step allocate nothing. */
#ifndef CZ_SERVER_H
#define CZ_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_metrics.h"
#include "cz_pcache.h"

/* What happens to an idle sequence's KV when the pool needs its blocks. */
typedef enum cz_kv_idle {
    CZ_KV_IDLE_DROP = 0, /* freed; the next turn recomputes the context (vLLM-Omni without
                            offload: baseline A) */
    CZ_KV_IDLE_OFFLOAD   /* stored to host memory when the turn ends, freed from HBM in LRU
                            order, loaded back at the next turn (baseline B) */
} cz_kv_idle;

typedef struct cz_server_config {
    uint32_t max_num_seqs;           /* sequence cap (vLLM default 256) */
    uint32_t max_num_batched_tokens; /* token budget per step (vLLM default 8192) */
    bool chunked_prefill;            /* split long prompts over steps (default on) */
    uint32_t block_tokens;           /* tokens per KV block (16) */
    uint32_t kv_blocks;              /* blocks in the pool */
    uint32_t max_model_len;          /* context cap; 0 = only the pool bounds it */
    uint32_t kv_idle;                /* cz_kv_idle (default drop) */
    uint32_t kv_evict;               /* cz_kv_evict: which idle KV goes first (LRU) */
    uint32_t kv_evict_unit;          /* cz_kv_evict_unit: how much of it goes at a time */
    double reply_prior_s;            /* next-use eviction: the user's reply time before any
                                        is observed (2.0 s) */
    bool kv_preload;                 /* LiveServe section 5.2: speech starts may reload an
                                        idle session's offloaded KV (cz_server_preload) */
    double preload_protect_fraction; /* warmed KV protected from eviction until its turn,
                                        at most this fraction of the pool in all (0.1) */
    double speech_prior_s;           /* preload: the time from a speech start to the turn
                                        before any is observed (2.0 s) */
    bool preload_oracle;             /* read by the driver: admit preloads against the true
                                        end of the user's speech instead of the core's
                                        estimate (cz_server_speech_end_estimate) */
    bool kv_bidirectional;           /* BROS: a real-time sequence short of blocks takes a
                                        best-effort one's tail blocks, checkpointing just
                                        those tokens to host memory (ordering path) */
    uint32_t kv_sink_tokens;         /* windowed KV (Metronome section 4.1, App. A): a      */
    uint32_t kv_window_tokens;       /* sequence keeps [0, sinks) and the last `window`
                                        tokens, at block granularity; 0: keep everything.
                                        Needs an ordering scheduler (select) */
    bool prefix_caching;             /* automatic prefix caching (vLLM's APC): full blocks
                                        keyed by chained hashes are shared across
                                        sequences and kept cached when freed
                                        (cz_server_turn_hashed; docs/serving-core.md) */
    bool kv_import;                  /* disaggregated decode: turns may find their KV in a
                                        peer's pool (cz_server_import) */
    uint32_t timeline_stage;         /* its autoregressive stage ordinal: labels its timeline
                                        rows and its inter-token gaps */
    uint32_t timeline_replica;
} cz_server_config;

/* vLLM's defaults for the fields above (kv_blocks must still be set). */
cz_server_config cz_server_config_default(void);

/* Which idle (multi-turn) KV is evicted first when the pool runs short. */
/* How much of the chosen idle KV an eviction takes. */
typedef enum cz_kv_evict_unit {
    CZ_EVICT_UNIT_DEFAULT = 0, /* each order's own: whole sessions under LRU (vLLM-Omni's
                                  offloading), blocks under next-use (LiveServe section 5.1) */
    CZ_EVICT_UNIT_SESSION,     /* the whole session */
    CZ_EVICT_UNIT_BLOCK        /* only the blocks needed, from the session's tail (suffix
                                  first: its prefix stays resident and reusable) */
} cz_kv_evict_unit;

typedef enum cz_kv_evict {
    CZ_EVICT_LRU = 0,      /* the least recently used session, whole (vLLM-Omni) */
    CZ_EVICT_NEXT_USE,     /* LiveServe section 5.1: the session whose predicted next use
                              is farthest, suffix blocks first, from an indexed heap */
    CZ_EVICT_NEXT_USE_SCAN /* the same choices by a linear scan (the slow reference) */
} cz_kv_evict;

typedef enum cz_seq_state {
    CZ_SEQ_IDLE = 0, /* no open turn */
    CZ_SEQ_WAITING,  /* queued for admission */
    CZ_SEQ_LOADING,  /* admitted; its KV is coming back from host memory */
    CZ_SEQ_RUNNING,
    CZ_SEQ_STALLED,  /* open turn that has produced all the output its input allows so far;
                        keeps its KV and its running slot until fed */
    CZ_SEQ_CLOSED
} cz_seq_state;

/* Serving state of one sequence, readable by policies and drivers. Token counts are
 * totals over all turns: the context is tokens_in + generated. */
typedef struct cz_seq {
    uint64_t session;
    uint32_t cls;
    uint32_t state;         /* cz_seq_state */
    uint32_t tokens_in;     /* input tokens appended so far */
    uint32_t budget;        /* output tokens allowed so far */
    uint32_t computed;      /* tokens whose KV is in the pool */
    uint32_t generated;     /* output tokens sampled so far */
    uint32_t blocks;        /* KV blocks held in the pool */
    uint32_t sched_tokens;  /* tokens scheduled in the batch in flight */
    uint32_t host_tokens;   /* tokens of its KV stored in host memory */
    uint32_t turn_generated_base; /* generated when the open (or last) turn began */
    uint64_t turn_rec;      /* metrics record of the open (or last) turn; UINT64_MAX none */
    bool pinned;            /* resident request: idle KV is never evicted */
    bool turn_open;
    bool input_final;       /* the open turn's input is complete */
    bool storing;           /* a store to host memory is in flight */
    uint32_t notify_at;     /* report when generated reaches this (0: no report asked) */
    double speech_start_s;  /* latest voice activity the client reported (NaN: none) */
    double played_s;        /* the client's latest playback report: seconds of the current
                               reply played, and received, at report_s (NaN: none yet) */
    double received_s;
    double last_chunk_s;    /* seconds in the latest chunk received */
    double report_s;
    double first_audio_s;   /* the first report of the open turn: its first chunk reached
                               the client (NaN: none yet); the start of VoxServe's playback
                               clock, which never pauses (VoxServe, Eq. 2) */
    double turn_ready_s;    /* the open turn arrived (its input was ready) */
    double last_token_s;
    double load_start_s;
} cz_seq;

/* What the FCFS policy sees when the KV pool runs out. Read-only. */
typedef struct cz_sched_view {
    uint32_t n_running;
    uint32_t last_admitted; /* id of the running sequence admitted most recently */
    uint32_t free_blocks;
} cz_sched_view;

/* A sequence an ordering policy may schedule in this step. */
typedef struct cz_cand {
    double key;       /* scratch for the policy's ordering (within the class) */
    uint32_t group;   /* scratch for the policy's ordering (a class) */
    uint32_t pos;     /* FCFS position: running in admission order, then the waiting queue */
    uint32_t seq;
    uint32_t need;    /* tokens it lacks */
    uint32_t take;    /* set by the policy: tokens to compute now (0: not in this step) */
    uint8_t running;  /* holds a running slot (else it waits for admission) */
    uint8_t decode;   /* its need is one decode token */
    double wake_s;    /* set by the policy for a candidate it defers although the budgets
                         would fit it: when to look at it again (INFINITY: at the next step,
                         the default). The core reports the earliest (cz_server_wake_at) so
                         that a driver whose stage runs nothing calls it back then */
} cz_cand;

/* What an ordering policy sees at the start of a step. Read-only. */
typedef struct cz_sched_ctx {
    double now_s;
    const cz_seq *seqs;       /* every sequence by id, interaction signals included */
    uint32_t token_budget;    /* max_num_batched_tokens */
    uint32_t seq_cap;         /* max_num_seqs: running slots in all */
    uint32_t running;         /* slots held now */
    uint32_t kv_blocks;       /* the pool */
    uint32_t kv_used;
    uint32_t kv_available;    /* free blocks plus idle KV that may be evicted */
    uint32_t block_tokens;
    bool chunked_prefill;
    uint32_t batch_cap;       /* the policy's own batch-size cap from its last step (0: none) */
    uint32_t kv_sink_tokens;  /* the server's KV window (kv_window_tokens 0: none) */
    uint32_t kv_window_tokens;
} cz_sched_ctx;

/* Speech-triggered KV preload (LiveServe, section 5.2). */
typedef enum cz_preload_outcome {
    CZ_PRELOAD_NOTHING = 0, /* nothing offloaded to bring back (or not idle, or disabled) */
    CZ_PRELOAD_STARTED,     /* blocks allocated and the load requested */
    CZ_PRELOAD_SKIPPED      /* refused by the admission check, or no room without evicting
                               KV needed sooner */
} cz_preload_outcome;

typedef struct cz_preload_stats {
    uint64_t started;
    uint64_t hits;      /* landed before the turn started */
    uint64_t late;      /* landed after it: the turn waited for the rest (kv_load_s) */
    uint64_t skips;
    uint64_t cancels;   /* freed under pressure while in flight (background work yields) */
    uint64_t fallbacks; /* cancelled, or warmed and evicted before the turn: the turn loads
                           synchronously */
} cz_preload_stats;

/* KV blocks of `block_tokens` a sequence of `tokens` tokens holds: ceil(tokens / block)
 * without a window (window == 0); with one, the blocks that hold a token of
 * [0, sinks) or [tokens - window, tokens), the sink blocks pinned, the blocks behind the
 * window freed (Metronome section 4.1). Pure. */
uint32_t cz_kv_blocks_held(uint64_t tokens, uint32_t block_tokens, uint32_t sinks,
                           uint32_t window);
/* Tokens of context attention reads for the next token of a sequence of `tokens`:
 * min(tokens, sinks + window) with a window, `tokens` without. */
uint64_t cz_kv_attn_tokens(uint64_t tokens, uint32_t sinks, uint32_t window);

/* Blocks sequence `q` must add to compute `tokens` more (for a policy's budget checks). */
uint32_t cz_sched_blocks(const cz_sched_ctx *ctx, const cz_seq *q, uint32_t tokens);

/* A scheduler policy (policies/): pure decisions over read-only views. A policy either
 * keeps vLLM V1's FCFS order (select NULL: the core's O(log n) path, pick_victim chooses
 * preemption victims), or orders every ready sequence in each step (select set). */
typedef struct cz_sched_ops {
    const char *name;
    /* FCFS path: id of the running sequence to preempt when the KV pool is full; the core
     * keeps V1's invariant that sequences scheduled earlier in the step are never
     * victims: it accepts only the most recently admitted running sequence. */
    uint32_t (*pick_victim)(const cz_sched_view *view);
    /* Ordering path: sorts `cands` in priority order (highest first) and sets `take` for
     * the ones to run in this step within the token budget, the free slots and the
     * available KV; returns its batch-size cap for the next step (ctx.batch_cap then; 0:
     * none). `state` is the policy's parameters (read-only). The core applies the
     * selection in order; when what is selected cannot get KV it preempts the
     * lowest-priority running candidates by recompute (V1's fallback). */
    uint32_t (*select)(const void *state, const cz_sched_ctx *ctx, cz_cand *cands, uint32_t n);
    const void *state;
    /* The policy ranks real-time work (class 0) above best-effort work (BROS): a real-time
     * sequence may preempt best-effort ones, a waiting one for their running slot and
     * blocks too, while best-effort work never preempts real-time work. */
    bool class_priority;
} cz_sched_ops;

/* One prefill chunk of a batch. The decode set (sequences past their input, one token
 * each per step) is carried in aggregate and walked with cz_server_decode_first/_next. */
typedef struct cz_batch_item {
    uint32_t seq;
    uint32_t tokens;     /* tokens computed for it in this step */
    uint32_t ctx_before; /* tokens already in its KV before the step */
} cz_batch_item;

/* A batch handed to the driver; points into server-owned storage valid until the next
 * cz_server_on_batch_done. */
typedef struct cz_batch {
    const cz_batch_item *items;
    uint32_t n_items;
    uint32_t total_tokens;
    uint64_t prefill_tokens;    /* tokens of prefill chunks */
    uint32_t prefill_seqs;      /* sequences with a prefill chunk in the step */
    uint64_t prefill_attn_ctx;  /* sum over prefill tokens of the context each attends to */
    uint32_t decode_seqs;
    uint64_t decode_ctx_tokens; /* sum of decode sequences' context lengths */
} cz_batch;

/* A KV transfer over the host link that the driver must carry out and report with
 * cz_server_on_xfer_done. */
typedef struct cz_xfer {
    uint32_t seq;
    uint32_t tokens;  /* tokens of KV moved */
    bool to_host;     /* store (device to host) or load (host to device) */
    uint32_t first;   /* the first position moved: positions [first, first + tokens) */
    bool remote;      /* a load of KV a peer computed (cz_server_import): it comes over
                         the network from the peer's pool, not from host memory */
} cz_xfer;

/* What a batch completion changed, for the driver. Server-owned, valid until the next
 * call that returns one. */
typedef struct cz_step_events {
    const uint32_t *turn_done;   /* sequences whose open turn completed */
    uint32_t n_turn_done;
    const uint32_t *first_token; /* sequences that sampled the first token of a turn */
    uint32_t n_first_token;
    const uint32_t *milestone;   /* sequences whose generated count reached notify_at */
    uint32_t n_milestone;
    const uint32_t *stalled;     /* sequences that used all the output their input allows */
    uint32_t n_stalled;
} cz_step_events;

typedef struct cz_server cz_server;

/* A new server with `cfg` and the scheduler `sched` (copied; its state must outlive the
 * server), recording into `metrics` (not owned). `expected_seqs` presizes the
 * tables (at most 1024 slots; they grow with the sequences open at once). Invalid
 * configurations are caller bugs (validated by the config parser): asserted. */
cz_server *cz_server_create(const cz_server_config *cfg, const cz_sched_ops *sched,
                            cz_metrics *metrics, uint64_t expected_seqs);
void cz_server_free(cz_server *s);

/* Opens an idle sequence with no KV for `session`. `pinned`: a resident request whose
 * idle KV is never evicted (periodic streams). Returns its id. */
uint32_t cz_server_seq_open(cz_server *s, uint64_t session, uint32_t cls, bool pinned);

/* A turn arrives at t_s on idle sequence `seq`: `in_tokens` of input (more may follow with
 * cz_server_feed unless `input_final`) and up to `out_tokens` of output (>= 1 when the
 * input is final); `out_total` (0: out_tokens) is the output the turn is known to reach
 * through later feeds, so that a turn that cannot fit is refused now rather than stalled
 * later. Returns the turn's metrics record. A turn whose context could never
 * fit (more blocks than the pool, longer than max_model_len, or, with chunked prefill off,
 * more tokens to compute than one step's budget) is rejected at once: its record says so
 * and the sequence stays idle. */
uint64_t cz_server_turn(cz_server *s, double t_s, uint32_t seq, uint32_t turn, uint32_t stage,
                        uint32_t in_tokens, uint32_t out_tokens, uint32_t out_total,
                        bool input_final);

/* The prefix-block hashes of a turn's input as a trace gives them (Mooncake's hash_ids):
 * ids[i] names the content of input tokens [i * block_tokens, (i + 1) * block_tokens), the
 * last block possibly partial, equal ids at equal positions meaning an equal prefix. */
typedef struct cz_turn_hashes {
    const uint32_t *ids;
    uint32_t n;
    uint32_t block_tokens; /* tokens per hashed block (Mooncake: 512); 0: no hashes */
} cz_turn_hashes;

/* cz_server_turn, with the turn's prefix-block hashes for automatic prefix caching
 * (cfg.prefix_caching; ignored when it is off). `hashes` (NULL: none) is read during the
 * call only. They name the blocks of a sequence whose context is empty when the turn
 * arrives (its first turn): each of the server's full blocks inside the hashed input takes
 * the chain of the trace's ids up to the one holding its last token, so two turns whose
 * ids agree up to there share the block. Every other block (a later turn's history and
 * input, the output, a turn without hashes) is named by the sequence and its position:
 * the session can hit its own blocks again after its KV was dropped, no other can. */
uint64_t cz_server_turn_hashed(cz_server *s, double t_s, uint32_t seq, uint32_t turn,
                               uint32_t stage, uint32_t in_tokens, uint32_t out_tokens,
                               uint32_t out_total, bool input_final,
                               const cz_turn_hashes *hashes);

/* The blocks of `block_tokens` tokens (> 0) of an empty context of `in_tokens` input
 * tokens that trace hashes `h` name (NULL or none: 0): its full blocks inside the first
 * min(in_tokens, h->n * h->block_tokens) tokens. */
uint32_t cz_turn_block_count(uint32_t block_tokens, uint32_t in_tokens,
                             const cz_turn_hashes *h);

/* The hashes a server of `block_tokens`-token blocks gives those blocks
 * (cz_server_turn_hashed): out[j] for block j < min(count, cap); returns how many were
 * written. Two servers, or a router, computing them agree: block j of two turns is the same
 * hash exactly when their trace ids agree up to the one holding the block's last token.
 * Allocates nothing. */
uint32_t cz_turn_block_hashes(uint32_t block_tokens, uint32_t in_tokens,
                              const cz_turn_hashes *h, uint64_t *out, uint32_t cap);

/* With prefix caching, `w` (NULL: none) hears of every cached block whose hash a trace
 * names (cz_turn_block_hashes: the blocks other sequences can share) when it is cached and
 * when its hash is forgotten (cz_pcache_watch); a sequence's own blocks (its lineage) are
 * not announced: no other sequence can hit them. Set before the first turn. Without
 * prefix caching, nothing. */
void cz_server_watch_cache(cz_server *s, const cz_pcache_watch *w);

/* The leading full blocks of sequence `seq`'s context that a turn would not compute: those
 * it holds computed, then those still cached under its hashes, in order, up to the first
 * that is neither; *held: how many of them lead in use (its own, then cached ones some
 * sequence holds). 0 without prefix caching (its resident KV is not a cache). O(blocks
 * found). */
uint32_t cz_server_seq_cached_blocks(const cz_server *s, uint32_t seq, uint32_t *held);

/* The leading blocks of hashes hash[0 .. n) that are cached here and held by some sequence
 * (in use, not waiting in the free queue). 0 without prefix caching. O(blocks found).
 * Callable under a decode run (cz_server_run_hold): a run's steps admit and finish no
 * sequence, and take free blocks only, so the blocks held stay as they are. */
uint32_t cz_server_held_prefix(const cz_server *s, const uint64_t *hash, uint32_t n);

/* For tests: every cached block the watcher heard of (published, hash live) is one the
 * watcher holds (`has`, with `ctx`), and every trace block a sequence holds cached was
 * published (when a watcher is set); *n_published counts the published blocks. False
 * with the first violation in err. O(blocks + sequences' blocks). */
bool cz_server_check_published(const cz_server *s, bool (*has)(void *ctx, uint64_t hash),
                               void *ctx, uint32_t *n_published, cz_err *err);

/* Disaggregated prefill and decode (DistServe, Splitwise): the open turn of waiting sequence
 * `seq` finds positions [0, tokens) of its context computed in a peer's pool (a prefill
 * replica's); tokens must be less than its context (the last token is computed here, and
 * samples the turn's first output, as vLLM's disaggregated decode does). When the turn is
 * admitted, the part not resident (nor hit in the prefix cache) is loaded rather than
 * computed: a cz_xfer with `remote` set, on the turn's critical path (its record's
 * kv_load_s). Needs cfg.kv_import. O(1). */
void cz_server_import(cz_server *s, uint32_t seq, uint32_t tokens);

/* Disaggregation: a peer began pulling `tokens` of KV from this replica's pool. Only counts
 * them, for the /timeline's kv_sent_tokens (the source's sequence is the caller's to keep
 * until the pull lands). O(1). */
void cz_server_note_sent(cz_server *s, uint32_t tokens);

/* Automatic prefix caching's counters, in tokens (vLLM's PrefixCacheStats): a lookup is
 * made when a waiting turn is admitted, for the tokens it does not hold resident; lookups
 * of turns preempted before are counted apart, as vLLM counts them. */
typedef struct cz_prefix_stats {
    uint64_t lookups, queries, hits;       /* first lookups of a turn */
    uint64_t preempted_lookups, preempted_queries, preempted_hits;
    uint64_t evictions;                    /* cached blocks evicted (hashes forgotten) */
    uint32_t cached_blocks;                /* blocks with a hash now, held or free */
    uint32_t free_cached_blocks;           /* ... of them in the free queue */
} cz_prefix_stats;

/* The counters above (all zero when prefix caching is off). */
void cz_server_prefix_stats(const cz_server *s, cz_prefix_stats *out);

/* What a feed did to the open turn. */
typedef enum cz_feed_result {
    CZ_FEED_OK = 0,  /* the turn goes on (a stalled sequence resumes) */
    CZ_FEED_DONE,    /* completed it: a stalled sequence whose input became final with
                        nothing more to generate (handle it as a cz_step_events.turn_done) */
    CZ_FEED_FAILED   /* its context grew beyond what the stage can ever hold (more blocks
                        than the pool, or max_model_len): the turn failed (its record says
                        so) and the sequence is idle with no KV; feed it no more */
} cz_feed_result;

/* More input for the open turn of `seq`: `in_tokens` appended and `out_tokens` more output
 * allowed; `input_final` closes the turn's input. */
cz_feed_result cz_server_feed(cz_server *s, double t_s, uint32_t seq, uint32_t in_tokens,
                              uint32_t out_tokens, bool input_final);

/* Asks for a report (cz_step_events.milestone) when `seq`'s generated count reaches
 * `generated`, which must exceed the current count; one report at a time. O(log n). */
void cz_server_notify_at(cz_server *s, uint32_t seq, uint32_t generated);

/* The client reports its playback of the current reply of `seq`'s session at t_s:
 * `played_s` seconds heard of `received_s` received, the latest chunk holding
 * `last_chunk_s` (the interaction plane of LiveServe
 * §3; read by interaction-aware policies). */
void cz_server_on_playback(cz_server *s, double t_s, uint32_t seq, double played_s,
                           double received_s, double last_chunk_s);

/* The client saw the user start speaking in `seq`'s session (voice activity) at t_s. */
void cz_server_on_speech_start(cz_server *s, double t_s, uint32_t seq);
/* Tokens of idle sequence `seq`'s KV held in host memory and not resident: what a preload
 * would bring back (0 when it is not idle, or preload is off). */
uint32_t cz_server_preload_tokens(const cz_server *s, uint32_t seq);
/* When the turn whose speech started (cz_server_on_speech_start; else t_s) is expected to
 * reach this stage: the speech start plus the session's moving average (weight 0.5) of the
 * observed time from speech start to turn at this stage, else the mean over every session
 * observed, else speech_prior_s. What a deployment knows: it cannot see the end of speech
 * in advance (LiveServe section 5.2's admission window). */
double cz_server_speech_end_estimate(const cz_server *s, uint32_t seq, double t_s);
/* A speech start (or barge-in) for idle sequence `seq`, whose KV is needed by needed_at_s.
 * Protects its resident KV (as cz_server_on_speech_start); then, with preload on, KV to
 * bring back and `admitted` (the driver found the transfer fits before needed_at_s), it
 * allocates the blocks (evicting only idle KV whose predicted next use is later than
 * needed_at_s) and requests the load (cz_server_take_xfers). A turn that starts before the
 * load lands waits for it. */
cz_preload_outcome cz_server_preload(cz_server *s, double t_s, uint32_t seq, bool admitted,
                                     double needed_at_s);
void cz_server_preload_stats(const cz_server *s, cz_preload_stats *out);

/* Barge-in: the open turn of `seq` ends now, or its last turn, already complete, is cut
 * back. Of the tokens the turn generated, the first `keep_generated` (what the user heard)
 * stay in the context and the rest are discarded with their KV; queued work is dropped;
 * the turn's record becomes aborted. Returns how many tokens the turn had generated.
 * Must not be called while a batch is in flight. */
uint32_t cz_server_abort(cz_server *s, double t_s, uint32_t seq, uint32_t keep_generated);

/* The session is over: the sequence's KV is freed in both tiers. It must be idle. Its id
 * is no longer the caller's: a later cz_server_seq_open may return it. */
void cz_server_seq_close(cz_server *s, uint32_t seq);

/* Forms the next batch at time t_s. Returns false (and leaves *out empty) when nothing
 * can run. Must not be called while a batch is in flight. */
bool cz_server_schedule(cz_server *s, double t_s, cz_batch *out);

/* The token the batch in flight samples for `seq` (a decode member, or a chunk that ends
 * its input) is its open turn's last: the turn completes when the batch is done, as vLLM
 * ends a request on a stop token (a driver that sees sampled ids: the engine's live
 * drivers). Called while the batch is in flight, before cz_server_on_batch_done. No
 * effect when that token is the last the turn allows anyway. O(log n). */
void cz_server_end_output(cz_server *s, uint32_t seq);

/* The batch in flight finished at time t_s: KV and token counts advance, tokens are
 * stamped, completed turns are reported through *ev. */
void cz_server_on_batch_done(cz_server *s, double t_s, cz_step_events *ev);

/* The fast-forward step (docs/serving-core.md, "Fast-forward"): the batch in flight
 * finished at t_s and, when nothing a scheduling step reads changed, the same decode set
 * runs again at once. It applies when the batch was decode only (no prefill chunk), no
 * member is due at its end (budget or report), nothing waits, prefills, stalls or loads,
 * no transfer is requested, and the blocks the next step's block phase needs are free
 * without evicting. Then it does what cz_server_on_batch_done (which would report no
 * event) and cz_server_schedule would do, in the same order and with the same metrics
 * calls: returns true with the next batch in *out (decode only, the same members). Else it
 * changes nothing and returns false: the driver calls cz_server_on_batch_done and
 * cz_server_schedule. O(1); allocates nothing. */
bool cz_server_step_again(cz_server *s, double t_s, cz_batch *out);

/* Decode runs (docs/serving-core.md, "Decode runs"): right after cz_server_step_again
 * returned true, how many more of its calls, one at the end of each step from the one in
 * flight, are bound to return true if nothing else reaches the serving core in between
 * (no member is due, the block phases fit in the free blocks; with a watcher on the prefix
 * cache, cz_server_watch_cache, in the blocks never used, so that no step evicts a cached
 * block the watcher would have to hear of when it happens), at most `cap`. The k-th of
 * them runs step steps + k + 1 with decode_ctx_tokens k x decode_seqs past the batch just
 * returned. O(the answer). */
uint32_t cz_server_run_room(const cz_server *s, uint32_t cap);

/* Applies n >= 1 of the steps cz_server_run_room promised, in one call: what n calls of
 * cz_server_step_again at end_s[0..n) (increasing) would do, bit for bit, but for the batch
 * each returns (the decode set again, which a run's driver already timed). The inter-token
 * gaps and the output tokens go to the metrics at once (cz_metrics_add_itl_steps,
 * cz_metrics_add_tokens_steps). O(n); allocates nothing. */
void cz_server_run_apply(cz_server *s, const double *end_s, uint32_t n);

/* A driver holding a decode run over the serving core (on: the steps cz_server_run_room
 * promised are not applied yet) makes every other call a bug until it lets go: each
 * asserts so. */
void cz_server_run_hold(cz_server *s, bool on);

/* After cz_server_schedule: the earliest time a policy asked to look again at a sequence
 * it deferred (INFINITY: none). When the step ran nothing, the driver must call
 * cz_server_schedule again by then, or the deferred work would wait for ever. */
double cz_server_wake_at(const cz_server *s);

/* Transfers requested since the last call (server-owned, valid until the next call that
 * can request one). The driver carries each out and reports it. */
const cz_xfer *cz_server_take_xfers(cz_server *s, uint32_t *n);

/* A transfer finished at t_s. */
void cz_server_on_xfer_done(cz_server *s, double t_s, uint32_t seq, bool to_host);

/* The run is over: records of turns still open get their generated counts and the
 * outcome unfinished (CZ_REQ_UNFINISHED). */
void cz_server_finalize(cz_server *s);

bool cz_server_busy(const cz_server *s);
uint32_t cz_server_running(const cz_server *s);
uint32_t cz_server_waiting(const cz_server *s);
uint32_t cz_server_kv_used(const cz_server *s);
/* Whether the growth of sequence `seq`'s context counts in cz_server_ctx_grown (on from
 * now, or off), for a router that keeps its own count of a worker's blocks (Dynamo's
 * active blocks). Any state but closed; a counted sequence must be uncounted before it
 * closes. O(1). */
void cz_server_count_ctx(cz_server *s, uint32_t seq, bool on);
/* The blocks the counted sequences' contexts (input plus generated tokens) grew into as
 * they generated: a count that rises by one each time a counted sequence's token starts a
 * new block of block_tokens tokens (its context reaches k * block_tokens + 1), as of the
 * steps completed (the fast-forward's included). Monotone; O(1). */
uint64_t cz_server_ctx_grown(const cz_server *s);
uint32_t cz_server_kv_idle(const cz_server *s);  /* blocks held by idle sequences */
uint64_t cz_server_host_tokens(const cz_server *s); /* KV tokens stored in host memory */
/* First time the scheduler needed KV blocks that neither the free pool nor idle KV could
 * supply (running work preempted, or admission held back); NaN if it never happened. */
double cz_server_saturated_at(const cz_server *s);
/* Sequence `seq` now belongs to session `session` (a live session continuing another's
 * context, cz_deploy_submit). It must not be closed. */
void cz_server_seq_rebind(cz_server *s, uint32_t seq, uint64_t session);
/* Cuts idle sequence `seq`'s context to its first `tokens` tokens (no effect when it holds
 * no more): the KV past them is freed in both tiers, as vLLM keeps only the blocks of a
 * prompt's cached prefix. The context keeps no order of input and output tokens, so the cut
 * comes off the output tokens first. It must be idle, and with no KV transfer in flight
 * (cz_server_seq_moving) when there is something to cut. */
void cz_server_seq_truncate(cz_server *s, uint32_t seq, uint32_t tokens);
/* Whether a KV transfer of idle sequence `seq` is in flight (a store, or a preload). */
bool cz_server_seq_moving(const cz_server *s, uint32_t seq);
/* Current state of sequence `seq` (brought up to date on access). */
const cz_seq *cz_server_seq(cz_server *s, uint32_t seq);

/* Sequence slots in use or closed: ids are 0 .. cz_server_n_seqs - 1. A closed sequence's
 * id is given to a later cz_server_seq_open once no transfer of its KV is outstanding, so
 * this follows the most sequences open at once, not all ever opened. */
uint32_t cz_server_n_seqs(const cz_server *s);
/* Whether `seq` belongs to the decode set (in a step in flight it decodes one token). */
bool cz_server_seq_decoding(const cz_server *s, uint32_t seq);

/* The sessions of (up to 4 of) the decode members whose budget or report asked for comes
 * at the end of the next step, as the last completed step left them, at most `cap` of
 * them, in sessions[]; returns how many. O(result). A hint: the caller may fetch their
 * state towards the cache ahead of that step. */
uint32_t cz_server_due_next(const cz_server *s, uint64_t *sessions, uint32_t cap);

/* The decode set in admission order: the first member, and the member after `seq`;
 * UINT32_MAX at the end. O(1) each. */
uint32_t cz_server_decode_first(const cz_server *s);
uint32_t cz_server_decode_next(const cz_server *s, uint32_t seq);

/* Checks every KV and queue invariant (each block counted once, counts match states);
 * returns false and fills err with the first violation. For tests; O(sequences). */
bool cz_server_check(const cz_server *s, cz_err *err);

/* BROS's bidirectional blocks: tail overwrites done and tokens checkpointed by them. */
void cz_server_overwrites(const cz_server *s, uint64_t *overwrites, uint64_t *tokens);

#endif
