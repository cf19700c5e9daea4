/* cz_metrics.h - the metrics recorder both drivers fill, and the summary they share.
 *
 * Per request: arrival, first scheduled, first token, last token, finish, tokens in and
 * out, preemptions. Inter-token latencies are kept as (value, multiplicity) samples, since
 * every request decoding in one step sees the same gap. Timelines sample the serving
 * state (KV blocks in use, running and waiting counts, batch tokens) at most once per
 * interval of driver time. Definitions follow vLLM's benchmark (docs/metrics.md). */
#ifndef CZ_METRICS_H
#define CZ_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_stats.h"

/* What happened to a request by the end of a run. */
typedef enum cz_req_outcome {
    CZ_REQ_PENDING = 0, /* arrived, not finished when the run ended (counted as failed) */
    CZ_REQ_COMPLETED,
    CZ_REQ_REJECTED,    /* refused at arrival: its context can never fit */
    CZ_REQ_ABORTED      /* cut by a barge-in */
} cz_req_outcome;

/* One turn of one session at one stage. */
typedef struct cz_req_record {
    uint64_t session;        /* session index in the workload */
    uint32_t turn;           /* turn index within the session */
    uint32_t stage;          /* pipeline stage (0 = the first autoregressive stage) */
    uint32_t cls;            /* cz_class */
    uint32_t input_tokens;
    uint32_t output_tokens;  /* tokens generated (= requested when completed) */
    uint32_t preemptions;
    uint32_t outcome;        /* cz_req_outcome */
    uint32_t heard_tokens;   /* output tokens the user heard (= output_tokens unless cut) */
    double kv_load_s;        /* time the turn waited for its KV to come back from host memory */
    double arrival_s;
    double first_sched_s;    /* first time the request was scheduled (NaN if never) */
    double first_token_s;    /* time the first output token was produced */
    double finish_s;         /* time the last output token was produced */
} cz_req_record;

typedef struct cz_timeline_row {
    double t_s;
    uint32_t kv_blocks_used;
    uint32_t kv_blocks_idle;  /* held by idle sequences (multi-turn KV) */
    uint64_t host_kv_tokens;  /* KV tokens stored in host memory */
    uint32_t running;
    uint32_t waiting;
    uint32_t batch_tokens;
} cz_timeline_row;

/* Service-level objectives for goodput, in ms; 0 = not set (vLLM's --goodput). */
typedef struct cz_slo {
    double ttft_ms, tpot_ms, e2el_ms;
} cz_slo;

typedef struct cz_metrics {
    cz_req_record *req;
    uint64_t n_req, cap_req;
    cz_wsample *itl;          /* inter-token latencies, seconds, with multiplicities */
    uint64_t n_itl, cap_itl;
    cz_timeline_row *tl;
    uint64_t n_tl, cap_tl;
    double timeline_interval_s;
    double tl_next_s;
    uint64_t steps;           /* batches executed */
    uint64_t preemptions;
} cz_metrics;

/* Initialises an empty recorder. `timeline_interval_s` >= 0 (0 = a row per step).
 * `expected_requests` sizes the request table up front (it still grows if exceeded). */
void cz_metrics_init(cz_metrics *m, double timeline_interval_s, uint64_t expected_requests);
void cz_metrics_free(cz_metrics *m);

/* Appends a request record and returns its index (its request id). */
uint64_t cz_metrics_add_request(cz_metrics *m, const cz_req_record *r);

/* Records `count` inter-token gaps of `gap_s` seconds. Merges with the previous sample
 * when the value is equal, so a step costs one sample per distinct gap. */
void cz_metrics_add_itl(cz_metrics *m, double gap_s, uint64_t count);

/* Samples the serving state at driver time t_s when an interval has passed since the
 * last row (always records the first call). */
void cz_metrics_timeline(cz_metrics *m, double t_s, const cz_timeline_row *row);

/* The summary of a run (vLLM benchmark names, docs/metrics.md). */
typedef struct cz_summary {
    uint64_t completed, failed, rejected, aborted, total_input_tokens, total_output_tokens;
    uint64_t good;            /* completed requests meeting every SLO set */
    uint64_t preemptions, steps;
    double duration_s;        /* first arrival to last completion */
    double request_throughput, request_goodput, output_throughput, total_token_throughput;
    cz_dist ttft_ms, tpot_ms, itl_ms, e2el_ms, queue_wait_ms;
    cz_slo slo;
} cz_summary;

/* Computes the summary of the turns recorded for stage 0 in `m`. Does not modify m. */
void cz_metrics_summarize(const cz_metrics *m, const cz_slo *slo, cz_summary *out);

/* The summary as a JSON object with vLLM's key names (completed, request_throughput,
 * mean_ttft_ms, median_ttft_ms, std_ttft_ms, p90_ttft_ms, ...) and cadenza's own in the
 * same style (failed, rejected, mean_queue_wait_ms, ...). */
cJSON *cz_summary_json(const cz_summary *s);

/* Writes a readable table of the summary to `f`. */
void cz_summary_print(const cz_summary *s, FILE *f);

#endif
