/* cz_server.h - the serving core: one autoregressive stage with continuous batching.
 *
 * The core is reactive (docs/architecture.md): it never reads a clock. A driver tells
 * it that a request arrived (cz_server_on_arrival) or that the batch it handed out has
 * finished (cz_server_on_batch_done), each at a time the driver owns, and asks what to
 * run next (cz_server_schedule). The discrete-event simulator and a real engine are two
 * such drivers. Scheduling follows vLLM's V1 scheduler: running requests first, each
 * given the tokens it lacks within a per-step token budget (chunked prefill); on KV
 * exhaustion the scheduler policy picks a running request to preempt by recompute; new
 * requests are admitted from the waiting queue only in steps with no preemption, up to
 * the sequence cap. KV lives in a paged block pool (block_tokens per block).
 *
 * Cost: a step is O(prefill chunks + requests that finish, join or are preempted + log n),
 * not O(running requests). Requests past their prompt form a decode set that advances
 * one token per step in aggregate (counts, context sums, blocks due per block phase, a
 * heap of finish steps); a member's own counters are brought up to date only when it
 * leaves the set or is inspected. This is exact, not an approximation: under vLLM V1's
 * rules every decoding request is scheduled in every step (max_num_batched_tokens >=
 * max_num_seqs, as vLLM requires) and decoding requests precede prefilling ones in the
 * running order (docs/serving-core.md).
 *
 * Memory: every array is sized at creation or grows by doubling when requests arrive;
 * scheduling and completing a step allocate nothing. */
#ifndef CZ_SERVER_H
#define CZ_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_metrics.h"

typedef struct cz_server_config {
    uint32_t max_num_seqs;           /* sequence cap (vLLM default 256) */
    uint32_t max_num_batched_tokens; /* token budget per step (vLLM default 8192) */
    bool chunked_prefill;            /* split long prompts over steps (default on) */
    uint32_t block_tokens;           /* tokens per KV block (16) */
    uint32_t kv_blocks;              /* blocks in the pool */
    uint32_t max_model_len;          /* prompt + output cap; 0 = only the pool bounds it */
} cz_server_config;

/* vLLM's defaults for the fields above (kv_blocks must still be set). */
cz_server_config cz_server_config_default(void);

typedef enum cz_sreq_state {
    CZ_SREQ_WAITING = 0,
    CZ_SREQ_RUNNING,
    CZ_SREQ_DONE,
    CZ_SREQ_REJECTED
} cz_sreq_state;

/* Serving state of one request, readable by policies. */
typedef struct cz_sreq {
    uint32_t prompt_tokens;
    uint32_t output_tokens;
    uint32_t computed;      /* tokens whose KV is in the pool */
    uint32_t generated;     /* output tokens sampled so far */
    uint32_t blocks;        /* KV blocks held */
    uint32_t sched_tokens;  /* tokens scheduled in the batch in flight */
    uint32_t state;         /* cz_sreq_state */
    double arrival_s;
    double last_token_s;
} cz_sreq;

/* What a scheduler policy sees when the KV pool runs out. Read-only. */
typedef struct cz_sched_view {
    uint32_t n_running;
    uint32_t last_admitted; /* id of the running request admitted most recently */
    uint32_t free_blocks;
} cz_sched_view;

/* A scheduler policy (policies/): pure decisions over a read-only view. */
typedef struct cz_sched_ops {
    const char *name;
    /* Id of the running request to preempt when the KV pool is full. The serving core
     * keeps vLLM V1's invariant that requests scheduled earlier in the step are never
     * victims: it accepts only the most recently admitted running request. */
    uint32_t (*pick_victim)(const cz_sched_view *view);
} cz_sched_ops;

/* One request's share of a batch. Batches list prefill chunks item by item; the decode
 * set (requests past their prompt, one token each per step) is carried in aggregate and
 * walked with cz_server_decode_first / cz_server_decode_next. */
typedef struct cz_batch_item {
    uint32_t req;        /* request id */
    uint32_t tokens;     /* tokens computed for it in this step */
    uint32_t ctx_before; /* tokens already in its KV before the step */
    bool decode;         /* a one-token decode (its whole prompt was already computed) */
} cz_batch_item;

/* A batch handed to the driver; points into server-owned storage that stays valid until
 * the next cz_server_on_batch_done. `items` are the prefill chunks; the decode_seqs
 * decoding requests each compute one token. */
typedef struct cz_batch {
    const cz_batch_item *items;
    uint32_t n_items;
    uint32_t total_tokens;
    uint64_t prefill_tokens;    /* tokens of prefill chunks */
    uint32_t prefill_seqs;      /* requests with a prefill chunk in the step */
    uint64_t prefill_attn_ctx;  /* sum over prefill tokens of the context each attends to */
    uint32_t decode_seqs;
    uint64_t decode_ctx_tokens; /* sum of decode sequences' context lengths */
} cz_batch;

typedef struct cz_server cz_server;

/* A new server with `cfg` and the scheduler `sched` (not owned; must outlive the
 * server), recording into `metrics` (not owned). `expected_requests` presizes the request
 * table. Invalid configurations are bugs of the caller (validated by the config parser):
 * asserted. */
cz_server *cz_server_create(const cz_server_config *cfg, const cz_sched_ops *sched,
                            cz_metrics *metrics, uint64_t expected_requests);
void cz_server_free(cz_server *s);

/* A request arrived at time t_s. Returns its id (= its row in the metrics). A request
 * that can never fit (more KV blocks than the pool, longer than max_model_len, or, with
 * chunked prefill off, more tokens to recompute than one step's budget) is rejected at
 * once and recorded as such. `session`, `turn` and `cls` are carried into
 * the metrics. */
uint32_t cz_server_on_arrival(cz_server *s, double t_s, uint32_t prompt_tokens,
                              uint32_t output_tokens, uint64_t session, uint32_t turn,
                              uint32_t cls);

/* Forms the next batch at time t_s. Returns false (and leaves *out empty) when nothing
 * can run. Must not be called while a batch is in flight. */
bool cz_server_schedule(cz_server *s, double t_s, cz_batch *out);

/* The batch in flight finished at time t_s: KV and token counts advance, tokens are
 * stamped, finished requests release their KV. The ids of requests that finished are
 * returned through *finished (server-owned, valid until the next call). */
void cz_server_on_batch_done(cz_server *s, double t_s, const uint32_t **finished,
                             uint32_t *n_finished);

/* The run is over: copies the output tokens generated so far into the metrics records of
 * requests that did not complete (the records of running requests are otherwise only
 * updated at their first and last token). */
void cz_server_finalize(cz_server *s);

bool cz_server_busy(const cz_server *s);
uint32_t cz_server_running(const cz_server *s);
uint32_t cz_server_waiting(const cz_server *s);
uint32_t cz_server_kv_used(const cz_server *s);
/* Current state of request `id` (brought up to date on access). */
const cz_sreq *cz_server_request(cz_server *s, uint32_t id);

/* The decode set in admission order: the first member, and the member after `id`;
 * UINT32_MAX at the end. O(1) each. */
uint32_t cz_server_decode_first(const cz_server *s);
uint32_t cz_server_decode_next(const cz_server *s, uint32_t id);

/* Checks every KV and queue invariant (each block counted once, counts match states);
 * returns false and fills err with the first violation. For tests; O(requests). */
bool cz_server_check(const cz_server *s, cz_err *err);

#endif
