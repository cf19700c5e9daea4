/* cz_metrics.h - the metrics recorder both drivers fill, and the summary they share.
 *
 * Per request: arrival, first scheduled, first token, last token, finish, tokens in and
 * out, preemptions. Inter-token latencies are kept per autoregressive stage as (value,
 * multiplicity) samples, since every request decoding in one step sees the same gap, and
 * fed as they come into the stage's distribution (a quantile sketch by default, cz_stats.h).
 * Timelines sample the serving state (KV blocks in use, running and waiting counts, batch
 * tokens) at most once per interval of driver time. Definitions follow vLLM's benchmark
 * (docs/metrics.md). */
#ifndef CZ_METRICS_H
#define CZ_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_stats.h"

/* What happened to a request (a turn, or its part at one stage) by the end of a run.
 * Every turn of the workload ends in exactly one of the terminal outcomes; PENDING never
 * survives a finished run. */
typedef enum cz_req_outcome {
    CZ_REQ_PENDING = 0, /* not finished yet */
    CZ_REQ_COMPLETED,   /* every stage done (a spoken reply: generated in full) */
    CZ_REQ_REJECTED,    /* refused at arrival: its context can never fit the first stage */
    CZ_REQ_ABORTED,     /* cut by a barge-in */
    CZ_REQ_FAILED,      /* failed after it started: a later pipeline stage refused it */
    CZ_REQ_UNFINISHED,  /* still open when the clock stopped (sim.max_time_s) */
    CZ_REQ_N_OUTCOMES
} cz_req_outcome;

/* The outcome's name as the summary keys spell it ("completed", "unfinished", ...). */
const char *cz_req_outcome_name(uint32_t outcome);

/* One turn of one session at one stage. */
typedef struct cz_req_record {
    uint64_t session;        /* session index in the workload */
    uint32_t turn;           /* turn index within the session */
    uint32_t stage;          /* autoregressive stage ordinal (0 = the first) */
    uint32_t stream;         /* 1: a periodic stream's resident request, not a turn */
    uint32_t cls;            /* cz_class */
    uint32_t input_tokens;
    uint32_t output_tokens;  /* tokens generated (= requested when completed) */
    uint32_t preemptions;
    uint32_t outcome;        /* cz_req_outcome */
    uint32_t heard_tokens;   /* output tokens the user heard (= output_tokens unless cut) */
    uint32_t cached_tokens;  /* prompt tokens its first admission found in the prefix cache
                                (automatic prefix caching; vLLM's num_cached_tokens) */
    double kv_load_s;        /* time the turn waited for its KV to come back from host memory */
    double arrival_s;
    double first_sched_s;    /* first time the request was scheduled (NaN if never) */
    double first_token_s;    /* time the first output token was produced */
    double finish_s;         /* time the last output token was produced */
    double send_lag_s;       /* the client sent it this long after arrival_s: an HTTP
                                client's lag behind the workload's clock (0 for the
                                simulated client, which sends at arrival); TTFT, E2E and the
                                peaks count from the send, as vLLM's benchmark does */
    uint32_t held;           /* its creator may still change it (set by
                                cz_metrics_add_request, cleared by cz_metrics_release) */
    uint32_t turn_outcome;   /* a turn's record at the first autoregressive stage: the
                                turn's outcome once cz_metrics_add_turn decided it */
} cz_req_record;

/* One turn of the workload as its user sees it, whatever the pipeline: recorded once, when
 * its outcome is decided. */
typedef struct cz_turn_record {
    uint64_t session;        /* session index in the workload */
    uint64_t req;            /* its record at the first autoregressive stage (UINT64_MAX:
                                none: it never reached that stage) */
    double end_s;            /* when the outcome was decided */
    uint32_t turn;           /* turn index within the session */
    uint32_t cls;            /* cz_class */
    uint32_t outcome;        /* cz_req_outcome, terminal */
    uint32_t stage;          /* rejected or failed: the autoregressive stage that refused it */
} cz_turn_record;

/* One streamed chunk with choices an HTTP client received (a row of /chunks; `cadenza
 * replay --endpoint`): its request's row in /requests, its place in the stream, when it
 * arrived on the run's clock. */
typedef struct cz_chunk_record {
    uint64_t request;
    uint32_t index;
    double t_s;
} cz_chunk_record;

/* `count` inter-token gaps of `gap_s` seconds at one autoregressive stage (a row of /itl). */
typedef struct cz_itl_record {
    double gap_s;
    uint64_t count;
    uint32_t stage;           /* autoregressive stage ordinal (0 = the first) */
} cz_itl_record;

typedef struct cz_timeline_row {
    double t_s;
    uint32_t stage;           /* autoregressive stage ordinal */
    uint32_t replica;
    uint32_t kv_blocks_used;
    uint32_t kv_blocks_idle;  /* held by idle sequences (multi-turn KV) */
    uint64_t host_kv_tokens;  /* KV tokens stored in host memory */
    uint32_t running;
    uint32_t waiting;
    uint32_t batch_tokens;
    /* running totals since the start (a rate is the difference of two rows): */
    uint64_t prefix_queries;   /* prefix-cache lookups, tokens (not after a preemption) */
    uint64_t prefix_hits;      /* of those, found in the cache */
    uint64_t kv_pulled_tokens; /* disaggregation: KV pulled into this replica */
    uint64_t kv_sent_tokens;   /* ... and out of it */
} cz_timeline_row;

/* The session gateway of periodic streams at a change: its admission cap (Metronome §4.2;
 * UINT32_MAX: unbounded) and the live sessions. */
typedef struct cz_gateway_row {
    double t_s;
    uint32_t cap;
    uint32_t live;
} cz_gateway_row;

/* What the client heard of one spoken turn (docs/playback.md). */
typedef struct cz_audio_record {
    uint64_t session;
    uint32_t turn;
    uint32_t barged;         /* the user barged in */
    uint32_t continuous;     /* vLLM-Omni's continuity verdict */
    uint32_t underruns;      /* vLLM-Omni's underrun event count: chunks with D_i > 0 */
    uint32_t chunks;         /* audio chunks received (of a completed turn) */
    double ready_s;          /* the client sent the turn: end of the user's speech */
    double speech_start_s;   /* the user started speaking */
    double first_audio_s;    /* first audio chunk at the client (NaN: none) */
    double last_audio_s;     /* last audio chunk at the client */
    double audio_s;          /* seconds of audio received */
    double heard_s;          /* seconds played before the reply ended or was cut */
    double max_underrun_s;   /* vLLM-Omni's underrun: worst playback deficit */
    double end_s;            /* playback end, or the barge-in */
} cz_audio_record;

/* One frame of a periodic stream (Metronome §2). */
typedef struct cz_frame_record {
    uint32_t stream;
    uint32_t frame;
    uint32_t empty;          /* returned without its tokens (not ready by the wait cap) */
    uint32_t missed;         /* returned after the frame budget */
    double tick_s;           /* the tick whose Step returns it: one period after its input
                                arrived (docs/pipeline.md, "Periodic streams") */
    double done_s;           /* its tokens were all generated (NaN: not by the run's end) */
    double latency_s;        /* the Step's wait at tick_s: min(max(done - tick, 0), cap) */
} cz_frame_record;

/* One batch a real engine executed (the `/steps` table: the shape the cost model sees and
 * the time it took, for calibration; the simulator records none). Times are seconds on the
 * run's clock. */
typedef struct cz_step_record {
    double start_s, end_s;      /* handed to its device, and reported done */
    double build_s;             /* host time building the batch (scheduling excluded) */
    double kernel_s;            /* time the device spent running it */
    double predicted_s;         /* the config's cost model for the same shape */
    uint64_t prefill_tokens;    /* encoder and vocoder steps: their input tokens */
    uint64_t prefill_attn_ctx;
    uint64_t decode_ctx_tokens;
    uint32_t replica, stage;    /* stage: the pipeline stage */
    uint32_t prefill_seqs;      /* encoder and vocoder steps: their jobs */
    uint32_t decode_seqs;
    uint32_t sampled;           /* tokens sampled */
    uint32_t device;
} cz_step_record;

/* Service-level objectives for goodput, in ms; 0 = not set (vLLM's --goodput). */
typedef struct cz_slo {
    double ttft_ms, tpot_ms, e2el_ms;
    double audio_ttfp_ms; /* effective request throughput: spoken turns with their first
                             audio within this (and continuous playback) */
} cz_slo;

/* What a workload holds, set by the driver before a run, and the outcomes that have no
 * row of their own: the denominators of the accounting check (cz_metrics_check). */
typedef struct cz_accounting {
    uint64_t requests;           /* turns in the workload, after its filters */
    uint64_t streams;            /* periodic sessions */
    uint64_t frames;             /* their frames: duration / period, rounded down, each */
    uint64_t streams_completed;  /* every frame returned (with its tokens or empty) */
    uint64_t streams_rejected;   /* refused: by the gateway, or their first frame cannot
                                    fit the KV pool */
    uint64_t streams_unfinished; /* still live when the clock stopped */
    uint64_t frames_rejected;    /* frames of refused streams (no row in `frames`) */
    uint64_t frames_unfinished;  /* frames not returned when the clock stopped (no row) */
} cz_accounting;

/* The rows a streaming recorder hands on instead of holding them (cz_metrics_stream): in
 * table order, in batches of at most CZ_METRICS_BATCH rows. */
typedef enum cz_rows_kind {
    CZ_ROWS_REQUESTS = 0, /* cz_req_record, by request id */
    CZ_ROWS_TURNS,        /* cz_turn_record, in the order the outcomes were decided */
    CZ_ROWS_ITL,          /* cz_itl_record */
    CZ_ROWS_TIMELINE,     /* cz_timeline_row */
    CZ_ROWS_CHUNKS,       /* cz_chunk_record (an HTTP client's runs only) */
    CZ_N_ROWS_KINDS
} cz_rows_kind;

typedef struct cz_rows_sink {
    void *ctx;
    void (*put)(void *ctx, cz_rows_kind kind, const void *rows, uint64_t n);
} cz_rows_sink;

enum { CZ_METRICS_BATCH = 4096 };

/* A completed turn's arrival and last token (vLLM's start and end of a request). */
typedef struct cz_span {
    double start_s, end_s;
} cz_span; /* rows per batch, and request records per chunk */

/* One one-second bucket of vLLM's peaks (cz_metrics_peaks): completed turns starting in it
 * minus those that ended before it, and the output tokens produced in it. */
typedef struct cz_peak_cell {
    uint64_t key; /* the bucket's index from the origin + 1 (0: an empty hash slot) */
    int64_t conc;
    uint64_t tok;
} cz_peak_cell;

/* What the summaries need of the records, accumulated as records retire (in request id
 * order) and as turns' outcomes are decided (in that order): one per class and one over
 * both (index 2). */
typedef struct cz_req_acc {
    uint64_t turns;           /* turn records */
    uint64_t by_outcome[CZ_REQ_N_OUTCOMES];
    uint64_t good, total_input_tokens, total_output_tokens;
    double first_arrival_s, last_finish_s;
    cz_distacc ttft, tpot, e2el, qw, lag;
} cz_req_acc;

typedef struct cz_stage_acc {
    uint64_t turns, generated_tokens, heard_tokens;
    double kv_reload_total_s;
    cz_distacc kv_reload_ms;
    bool prefix_caching;      /* a replica of the stage caches prefixes */
    uint64_t pc_queries, pc_hits; /* its lookups, in tokens (cz_metrics_prefix_lookup) */
    uint64_t pc_preempted_queries, pc_preempted_hits;
} cz_stage_acc;

typedef struct cz_metrics {
    /* request records: a flat array (the default: every record kept, m->req[id]), or,
     * once cz_metrics_stream was called, chunks of CZ_METRICS_BATCH records freed as
     * their records retire; reach a record through cz_metrics_req either way */
    cz_req_record *req;
    uint64_t n_req, cap_req;
    cz_req_record **chunks;   /* streaming: chunk k holds ids [k B, (k + 1) B); NULL once
                                 retired */
    size_t cap_chunks;
    cz_req_record *spare;     /* streaming: a freed chunk kept for the next */
    uint64_t retired;         /* records below this id are retired: summarized (and handed
                                 to the sink when streaming) */
    bool streaming;
    bool finished;            /* cz_metrics_finish ran */
    cz_rows_sink sink;        /* streaming: where the rows go (put NULL: dropped) */
    cz_turn_record *turns;    /* one per turn of the workload, in the order decided (when
                                 streaming: the batch not yet handed on) */
    uint64_t n_turns, cap_turns;
    uint64_t turns_total;     /* turn records, handed on or not */
    cz_accounting acct;
    cz_chunk_record *chunk_rows; /* an HTTP client's chunk arrivals (when streaming: the
                                    rows not yet handed on) */
    uint64_t n_chunk_rows, cap_chunk_rows;
    cz_itl_record *itl;       /* inter-token latencies with multiplicities, every stage
                                 (when streaming: the rows not yet handed on) */
    uint64_t n_itl, cap_itl;
    cz_slo slo;               /* the objectives goodput counts against (cz_metrics_set_slo) */
    cz_req_acc acc[3];        /* per class (cz_class), and over both */
    bool send_lags;           /* the records' send lags are an HTTP client's: the summary
                                 reports their distribution (cz_summary.send_lag_ms) */
    bool per_class;           /* the per-class accumulators are fed (the default; off
                                 for a single-class workload: cz_metrics_track_classes) */
    cz_stage_acc *stage_acc;  /* per autoregressive stage */
    uint32_t n_stage_acc;
    bool has_class[2];        /* a turn of the class reached the first stage */
    uint64_t pending_left;    /* records retired while still PENDING (cz_metrics_check) */
    cz_req_record first_pending;
    cz_span *spans;           /* completed turns' arrival and finish, for cz_metrics_peaks,
                                 until its origin is known (cz_metrics_settled) */
    uint64_t n_spans, cap_spans;
    bool peaks_fixed;         /* the peaks' origin is known: spans and tokens are counted in
                                 one-second buckets as they come */
    double peaks_t0, peaks_t1;/* the origin (before it is fixed: the earliest completed
                                 arrival so far), and the latest end of a completed turn */
    /* once fixed, only the buckets something happened in are held (a hash table of
     * cz_peak_cell, linear probing), so memory follows the turns and steps, not the
     * simulated span; the buckets below the settled watermark can no longer change and
     * are folded into running values when the table would grow */
    cz_peak_cell *peak_cells;
    size_t peak_cap, n_peak;  /* slots (a power of two, or 0), buckets held */
    cz_peak_cell *peak_hot;   /* the cell found last (NULL after a rebuild): steps of one
                                 replica come in runs within a bucket */
    uint64_t peak_w;          /* buckets below this index are final (cz_metrics_settled) */
    uint64_t peak_folded;     /* buckets below this index are folded */
    int64_t peak_run;         /* completed turns in flight after the folded buckets */
    uint64_t peak_conc_max;   /* ... and their largest count over the folded buckets */
    cz_peak_cell *peak_tok_max; /* folded buckets' tokens: (key, tok) at each bucket where
                                   the running maximum rose (ascending in both) */
    size_t n_tok_max, cap_tok_max;
    cz_pct_mode pct_mode;     /* how summaries compute percentiles (default: auto) */
    cz_distacc *itl_ms;       /* per autoregressive stage: its gaps in ms, fed as they are
                                 recorded */
    uint32_t n_itl_ms;
    cz_wsample *tokens;       /* output tokens of the first autoregressive stage: (time
                                 they were produced, s; how many), one per step */
    uint64_t n_tokens, cap_tokens;
    cz_pctset pct;            /* percentiles the summaries report (n = 0: the default) */
    cz_timeline_row *tl;      /* (when streaming: the rows not yet handed on) */
    uint64_t n_tl, cap_tl;
    double timeline_interval_s;
    cz_audio_record *audio;
    uint64_t n_audio, cap_audio;
    cz_frame_record *frames;
    uint64_t n_frames, cap_frames;
    cz_gateway_row *gateway;  /* one row per change of the cap or the live sessions */
    uint64_t n_gateway, cap_gateway;
    cz_step_record *step_rows; /* batches a real engine executed (driver's records) */
    uint64_t n_step_rows, cap_step_rows;
    uint64_t steps;           /* batches executed */
    uint64_t preemptions;
} cz_metrics;

/* Initialises an empty recorder. `timeline_interval_s` >= 0 (0 = a row per step).
 * `expected_requests` sizes the request table up front (it still grows if exceeded). */
void cz_metrics_init(cz_metrics *m, double timeline_interval_s, uint64_t expected_requests);
void cz_metrics_free(cz_metrics *m);

/* Makes the recorder stream (before anything is recorded): request records are freed once
 * retired, and the rows of /requests, /turns, /itl and /timeline are handed to `sink` in
 * batches (sink NULL: dropped) instead of held, so memory follows the requests in flight
 * rather than the trace (docs/metrics.md, "Streaming"). Summaries are the same either way. */
void cz_metrics_stream(cz_metrics *m, const cz_rows_sink *sink);

/* Whether the rows of /itl and /timeline are dropped (streaming with no sink): a driver
 * may then hand them over in an order other than time's. */
bool cz_metrics_rows_dropped(const cz_metrics *m);

/* The objectives goodput counts completed turns against (default: none); before any turn
 * is recorded. The deployment runtime sets its config's. */
void cz_metrics_set_slo(cz_metrics *m, const cz_slo *slo);

/* Whether the per-class summaries are needed (default true): false for a workload of one
 * class, so each turn feeds one set of accumulators instead of two; before any record. */
void cz_metrics_track_classes(cz_metrics *m, bool per_class);

/* Appends a request record, held by its creator, and returns its index (its request id).
 * The record stays reachable through cz_metrics_req until it retires: once released
 * (cz_metrics_release), out of PENDING, and, for a turn's record at the first
 * autoregressive stage that is not a stream's, once its turn's outcome is recorded. */
uint64_t cz_metrics_add_request(cz_metrics *m, const cz_req_record *r);

/* The creator of record `id` will not change it again. */
void cz_metrics_release(cz_metrics *m, uint64_t id);

/* Record `id`, which must not have retired from a streaming recorder (CZ_ASSERT). */
static inline cz_req_record *cz_metrics_req(const cz_metrics *m, uint64_t id)
{
    CZ_ASSERT(id < m->n_req);
    if (!m->streaming)
        return &m->req[id];
    CZ_ASSERT(id >= m->retired);
    return &m->chunks[id / CZ_METRICS_BATCH][id % CZ_METRICS_BATCH];
}

/* Records the outcome of one turn of the workload (terminal: not PENDING); its record at
 * the first autoregressive stage (t->req, if any) must not have retired. */
void cz_metrics_add_turn(cz_metrics *m, const cz_turn_record *t);

/* Ends the recording: retires every record left (held or not) and hands the last rows to
 * the sink. Once, after the run and before cz_metrics_check and the summaries. */
void cz_metrics_finish(cz_metrics *m);

/* The run's accounting: every turn of the workload has exactly one outcome (completed +
 * aborted + rejected + failed + unfinished == requests), every frame one (served + empty +
 * rejected + unfinished == frames) and every stream one; no request record is left
 * PENDING. CZ_EINTERNAL with the counts that disagree otherwise. After cz_metrics_finish. */
cz_status cz_metrics_check(const cz_metrics *m, cz_err *err);

/* Appends a record and returns its index; the pointer of cz_metrics_audio stays valid
 * until the next add. */
uint64_t cz_metrics_add_audio(cz_metrics *m, const cz_audio_record *r);
uint64_t cz_metrics_add_frame(cz_metrics *m, const cz_frame_record *r);

/* Records the gateway's cap and live sessions at `t_s` when either differs from the last
 * row (grows by doubling). */
void cz_metrics_gateway(cz_metrics *m, double t_s, uint32_t cap, uint32_t live);

/* Chooses how the summaries compute percentiles (the default is CZ_PCT_AUTO); before
 * any inter-token gap is recorded. */
void cz_metrics_set_pct_mode(cz_metrics *m, cz_pct_mode mode);

/* Records `count` inter-token gaps of `gap_s` seconds at autoregressive stage `stage`:
 * into the stage's distribution (m->itl_ms) and the /itl rows, merged with the previous
 * row when its stage and value are equal, so a step costs one row per distinct gap. */
void cz_metrics_add_itl(cz_metrics *m, uint32_t stage, double gap_s, uint64_t count);

/* The gaps of n consecutive steps of one replica ending at end_s[0..n) (increasing), the
 * step before them at prev_s, `count` gaps each: cz_metrics_add_itl(m, stage, end_s[k] -
 * end_s[k - 1], count) for each k in order, the same result; with the rows dropped
 * (cz_metrics_rows_dropped) the distribution takes them at once. No allocation then. */
void cz_metrics_add_itl_steps(cz_metrics *m, uint32_t stage, double prev_s, const double *end_s,
                              size_t n, uint64_t count);
/* Chunk `index` of request record `request` arrived at t_s (a row of /chunks). */
void cz_metrics_add_chunk(cz_metrics *m, uint64_t request, uint32_t index, double t_s);

/* Records `count` output tokens produced at `t_s` by the first autoregressive stage
 * (max_output_tokens_per_s). Merges with the previous sample at the same time. */
void cz_metrics_add_tokens(cz_metrics *m, double t_s, uint64_t count);

/* cz_metrics_add_tokens(m, t_s[k], count) for k = 0 .. n - 1 (t_s increasing), the same
 * result; with fixed peak buckets, one update per second bucket. */
void cz_metrics_add_tokens_steps(cz_metrics *m, const double *t_s, size_t n, uint64_t count);

/* vLLM's peaks (benchmarks/serve.py, calculate_metrics), over one-second buckets counted
 * from the earliest arrival of a completed turn: the most completed turns in flight
 * (arrival to last token) at any time within one bucket, and the most output tokens of
 * the first autoregressive stage produced within one bucket. 0 and 0 with no completed
 * turn. */
void cz_metrics_peaks(const cz_metrics *m, uint64_t *max_concurrent_requests,
                      double *max_output_tokens_per_s);

/* Every turn still undecided, and every turn still to come, has its first-stage record
 * arrive at or after t_s (a runtime that produces its workload in order of arrival knows
 * this). Once t_s reaches the earliest arrival of the completed turns, that is the peaks'
 * origin for good, and vLLM's peak buckets are counted as turns complete instead of from
 * every turn's span at the end: same peaks, memory per simulated second. */
void cz_metrics_settled(cz_metrics *m, double t_s);

/* Autoregressive stage `stage` caches prefixes (automatic prefix caching): its summary
 * reports the cache's keys (docs/metrics.md). A server with prefix caching calls it once. */
void cz_metrics_prefix_caching(cz_metrics *m, uint32_t stage);

/* A prefix-cache lookup at stage `stage`: `queries` prompt tokens looked up, `hits` found
 * (vLLM's PrefixCacheStats.record); `preempted`: the turn was preempted before, counted
 * apart as vLLM counts it. O(1). */
void cz_metrics_prefix_lookup(cz_metrics *m, uint32_t stage, uint64_t queries, uint64_t hits,
                              bool preempted);

/* Appends a step record (grows by doubling). */
void cz_metrics_add_step(cz_metrics *m, const cz_step_record *r);

/* Appends a timeline row (the serving core samples at most every timeline_interval_s). */
void cz_metrics_timeline(cz_metrics *m, const cz_timeline_row *row);

/* The summary of a run (vLLM benchmark names, docs/metrics.md). */
typedef struct cz_summary {
    uint64_t requests;        /* turns in the workload (cz_accounting.requests) */
    uint64_t completed, failed, rejected, aborted, unfinished;
    uint64_t total_input_tokens, total_output_tokens;
    uint64_t good;            /* completed requests meeting every SLO set */
    uint64_t preemptions, steps;
    double duration_s;        /* first arrival to last completion */
    double request_throughput, request_goodput, output_throughput, total_token_throughput;
    cz_dist ttft_ms, tpot_ms, itl_ms, e2el_ms, queue_wait_ms;
    cz_dist send_lag_ms;      /* the client's send lag (cz_req_record.send_lag_s), when
                                 has_send_lag */
    bool has_send_lag;
    cz_slo slo;
    cz_pct_mode pct_mode;     /* how the percentiles were computed: SKETCH or EXACT */
} cz_summary;

/* Spoken-turn and frame summaries (docs/playback.md, docs/metrics.md). */
typedef struct cz_audio_summary {
    uint64_t turns, completed, barged, continuous, effective, underrun_events;
    uint64_t paced_chunks;    /* chunks Eq. 2 constrains: every chunk after a turn's first */
    uint64_t total_audio_frames; /* vLLM-Omni's: PCM frames (samples per channel) of the
                                    completed turns' audio, round(audio_s x rate) each */
    double total_audio_s, audio_throughput, continuity_ok_rate, effective_request_throughput;
    double streaming_viability; /* VoxServe's Eq. 2 per chunk (threshold 0): the share of
                                   paced chunks that arrived by the end of the audio before
                                   them on the never-pausing clock; NaN with none */
    double audio_span_s;        /* first turn sent to last chunk received, completed turns */
    double inverse_rtf;         /* total audio / audio_span_s (VoxServe section 4.3.3's
                                   throughput: generated audio over execution latency) */
    cz_dist ttfp_ms, rtf, duration_s, underrun_s;
    /* generation against playback (LiveServe Figure 15): over completed spoken turns, the
     * seconds from the turn's end of speech to its last audio chunk (generation) and the
     * seconds of audio (playback); and the same two for the longest reply */
    double mean_generation_s, mean_playback_s;
    double longest_generation_s, longest_playback_s;
} cz_audio_summary;

typedef struct cz_frame_summary {
    uint64_t frames;          /* in the workload */
    uint64_t served, empty, rejected, unfinished; /* their outcomes */
    uint64_t missed;          /* returned after the frame period (served or empty) */
    uint64_t streams, streams_completed, streams_rejected, streams_unfinished;
    cz_dist latency_ms;       /* over the frames returned (served or empty) */
    double first_empty_s;     /* when the first empty frame came back (its tick + the
                                 wait); NaN when none did */
} cz_frame_summary;

/* Tokens each stage generated and the user heard, and the KV reload on the critical
 * path, over the turns recorded for `stage`; its inter-token gaps. */
typedef struct cz_stage_summary {
    uint64_t turns, generated_tokens, heard_tokens;
    double waste_ratio;     /* 1 - heard / generated (0 when nothing was generated) */
    double kv_reload_total_s;
    cz_dist kv_reload_ms;
    cz_dist itl_ms;         /* every gap recorded at the stage (stage 0's: cz_summary's) */
    /* automatic prefix caching (when the stage has it): vLLM's queries and hits in
     * tokens, the hit rate hits / queries (NaN with no query), lookups of preempted turns
     * apart, and the prefill tokens every hit saved */
    bool prefix_caching;
    uint64_t pc_queries, pc_hits, pc_preempted_queries, pc_preempted_hits;
    double pc_hit_rate;
    uint64_t prefill_tokens_saved;
} cz_stage_summary;

/* `duration_s` is the run's duration (cz_summary.duration_s); `sample_rate_hz` the audio's
 * sample rate (the vocoder's, > 0), for total_audio_frames. */
void cz_audio_summarize(const cz_metrics *m, const cz_slo *slo, double duration_s,
                        double sample_rate_hz, cz_audio_summary *out);
void cz_frame_summarize(const cz_metrics *m, cz_frame_summary *out);
void cz_stage_summarize(const cz_metrics *m, uint32_t stage, cz_stage_summary *out);

/* Adds the summaries' keys to a summary object (docs/metrics.md). */
void cz_audio_summary_json(cJSON *j, const cz_audio_summary *a);
void cz_frame_summary_json(cJSON *j, const cz_frame_summary *f);
cJSON *cz_stage_summary_json(const cz_stage_summary *st, const char *name);

/* Computes the summary of the turns recorded for stage 0 in `m` (its ITL: the gaps
 * recorded at stage 0). Does not modify m. */
void cz_metrics_summarize(const cz_metrics *m, const cz_slo *slo, cz_summary *out);

/* The same over the turns of class `cls` (cz_class) only; the duration is the class's.
 * Needs the per-class accumulators (cz_metrics_track_classes). */
void cz_metrics_summarize_class(const cz_metrics *m, const cz_slo *slo, uint32_t cls,
                                cz_summary *out);

/* The summary as a JSON object with vLLM's key names (completed, request_throughput,
 * mean_ttft_ms, median_ttft_ms, std_ttft_ms, p90_ttft_ms, ...) and cadenza's own in the
 * same style (failed, rejected, mean_queue_wait_ms, ...). Each metric's percentile keys
 * are those of its cz_dist (m->pct when summarized from m). */
cJSON *cz_summary_json(const cz_summary *s);

/* Writes a readable table of the summary to `f`. */
void cz_summary_print(const cz_summary *s, FILE *f);

#endif
