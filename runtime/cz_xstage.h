/* cz_xstage.h - the cross-stage runtime: one GPU serving a vision-language model as three
 * workers (vision encode, LLM prefill, LLM decode) under a cross-stage scheduler
 * (cz_xs_policy: Nova, section III-D, and its baselines of section
 * V-A7), shared by every driver (docs/architecture.md, docs/pipeline.md "Cross-stage
 * execution").
 *
 * It holds the requests of an open-loop workload, the vision and prefill queues, the
 * decode-ready set, the LLM's KV reservation, the scheduler's view (cz_xs_decide answers
 * what to start), each step's SM partition and the cost model's prediction of its time,
 * the vision encoder's weight streaming over the host link (section III-E), and the
 * accounting of every request. Like cz_deploy it is reactive: it never reads a clock and
 * owns no event queue. A driver supplies time and execution through a `cz_xs_driver`
 * table: it runs each step the runtime starts (on SM partitions: a discrete-event model,
 * CUDA green contexts, CPU thread partitions) and reports its end, and it fires the
 * arrival timers. The discrete-event simulator (sim/cz_xstage.c) takes each step's
 * predicted time as its duration.
 *
 * The GPU has an exclusive worker (one request's vision encode, the card's encoders one
 * after another; one request's whole prefill; or, for chunked prefill, a hybrid LLM step)
 * and a decode worker. A step's SM share is fixed when it starts, as Nova sets partitions
 * before each forward pass (section III-D, last paragraph): a decode step gets
 * cz_xs_decode_share of the SMs when requests are in the vision or prefill stages, and
 * all of them otherwise; a vision or prefill step gets the rest while any request
 * decodes, and all of them otherwise. The LLM's KV for a request's whole context (input
 * and output) is reserved when its prefill starts; a prefill that does not fit waits. The
 * prefill samples the first token; each decode step one more per request.
 *
 * Requests are named by their global turn index in the workload (0 .. wl->n_turns).
 *
 * Deterministic: everything follows from the calls the driver makes and their order. */
#ifndef CZ_XSTAGE_H
#define CZ_XSTAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_config.h"
#include "cz_run.h"

/* A step the runtime starts. VISION and PREFILL run request `req` alone (its image tokens
 * through every encoder / its input tokens through the LLM); DECODE runs one token of each
 * of reqs[0..n_reqs); HYBRID (chunked prefill) runs one token of each of reqs[0..n_reqs)
 * and chunk_tokens[k] input tokens of chunk_reqs[k], k < n_chunks, each chunk starting
 * where its request's prefill stands (cz_xstage_req). The arrays are the runtime's, valid
 * until the step's end is reported (NULL when their count is 0). */
typedef struct cz_xs_step {
    cz_xs_work work;       /* VISION, PREFILL, HYBRID or DECODE */
    double share;          /* fraction of the GPU's SMs it runs on, in (0, 1] */
    uint32_t sms;          /* the SMs it runs on: share x the hardware card's SMs */
    double factor;         /* the slowdown the model applies for what co-runs beside it
                              (Nova's corun_slowdown, or 1 / the multi-stream speed; 1.0:
                              none) */
    double predicted_s;    /* the model's duration: the roofline of its batch on `share`
                              (cz_config_stage_share_s) times `factor`; a vision step adds
                              its waits for streamed weights. The simulator runs it for
                              this long; a real driver records it beside what it measured */
    uint32_t tokens;       /* VISION: image tokens; PREFILL: input tokens; HYBRID: decodes
                              plus chunk tokens; DECODE: n_reqs */
    uint32_t req;          /* VISION, PREFILL: its request (UINT32_MAX otherwise) */
    const uint32_t *reqs;  /* DECODE, HYBRID: the requests decoding one token, by readiness */
    uint32_t n_reqs;
    const uint32_t *chunk_reqs;   /* HYBRID: the prefill chunks' requests, queue order */
    const uint32_t *chunk_tokens; /* ... and their input tokens */
    uint32_t n_chunks;
} cz_xs_step;

/* What a driver does for the runtime. Every callback is made from inside a cz_xstage_*
 * call, at that call's `now`. */
typedef struct cz_xs_driver {
    void *ctx;
    /* Runs step `s` from `now`; the driver reports its end with cz_xstage_decode_done
     * (DECODE) or cz_xstage_excl_done (the others). At most one exclusive step and one
     * decode step are in flight; a decode and an exclusive step started by one call are
     * handed over in the order they were decided. `s` itself is valid only during the
     * call. */
    void (*start)(void *ctx, const cz_xs_step *s, double now);
    /* Calls cz_xstage_arrival at time t (>= now). One arrival timer is pending at a time. */
    void (*timer)(void *ctx, double t);
    /* Optional (NULL: none). Request `req` ended and its KV reservation is released now,
     * inside the report of the step that sampled its last token and before anything that
     * report starts: a driver holding real KV blocks frees them here, so a step the
     * runtime starts on the released reservation finds them free. */
    void (*released)(void *ctx, uint32_t req);
} cz_xs_driver;

typedef struct cz_xstage cz_xstage;

/* A request's token counts, for drivers building real batches. Counts move when a step's
 * end is reported, so during a step they are those it started from. */
typedef struct cz_xs_req_info {
    uint32_t in_tokens;      /* LLM input tokens (text and image tokens; at least 1) */
    uint32_t out_tokens;     /* output tokens it generates (at least 1) */
    uint32_t image_tokens;   /* the vision encoders' input (0: no vision step) */
    uint32_t prefilled;      /* input tokens prefilled so far */
    uint32_t generated;      /* output tokens sampled so far */
    uint32_t context_tokens; /* prefilled + generated: what a decode step of it attends
                                over (its KV and the token it feeds) */
    uint64_t rec;            /* its metrics record (UINT64_MAX before it arrives) */
    bool ended;              /* its outcome is recorded */
} cz_xs_req_info;

/* Builds the runtime of `cfg` (cfg->cross_stage, asserted) for workload `wl` (both must
 * outlive it), recording into `m` (initialised by the caller) and `stats` (zeroed here; the
 * driver's counters, events and sim_time_s, are the driver's to set afterwards), driven by
 * `drv` (copied). Reserves the vision weights that stay on the GPU and gives the LLM's KV
 * what offload frees (section III-E, stats->vision_resident_bytes). Allocates everything
 * the run needs. Fails with CZ_EINVAL, *out NULL, when the workload is not open-loop
 * requests (periodic streams, a concurrency bound, a closed-loop conversation). */
cz_status cz_xstage_create(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                           cz_run_stats *stats, const cz_xs_driver *drv, cz_xstage **out,
                           cz_err *err);
void cz_xstage_free(cz_xstage *x);

/* Starts the run: the first arrival becomes a timer (none for an empty workload). */
void cz_xstage_start(cz_xstage *x);

/* The driver's reports, each at its time `now` (non-decreasing over calls): the arrival
 * timer fired, the exclusive step ended, the decode step ended. Each records what follows
 * (the request's arrival or rejection, its next stage, its tokens) and then starts what
 * the scheduler decides. */
void cz_xstage_arrival(cz_xstage *x, double now);
void cz_xstage_excl_done(cz_xstage *x, double now);
void cz_xstage_decode_done(cz_xstage *x, double now);

/* Ends the run at `now`: `cut` when the driver stopped its clock (max_time_s) with work
 * left. Gives every request exactly one outcome: cut, what is open is unfinished (ending at
 * max_time_s, as cz_deploy_finish does); drained, a request still open is CZ_EINTERNAL
 * naming where it stands. Fills stats' arrivals, arrival rate and kv_saturated_at_s (the
 * runtime's counters are filled as the run goes). */
cz_status cz_xstage_finish(cz_xstage *x, bool cut, double now, cz_err *err);

/* Requests arrived and completed so far (progress lines). */
void cz_xstage_counts(const cz_xstage *x, uint64_t *arrived, uint64_t *finished);
/* Requests of the workload, and the token counts of request `req` (< that). */
uint32_t cz_xstage_requests(const cz_xstage *x);
cz_xs_req_info cz_xstage_req(const cz_xstage *x, uint32_t req);

#endif
