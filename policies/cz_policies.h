/* cz_policies.h - the policy library: pure scheduling decisions selected by name.
 *
 * Each scheduler is a table of functions over read-only views of the serving core's state
 * (cz_server.h); none does I/O, reads a clock or allocates per decision. A scheduler's
 * parameters live in a cz_policy, one per pipeline stage (per-stage values in the config),
 * and are what its `state` points to. docs/policies.md describes each with its sources. */
#ifndef CZ_POLICIES_H
#define CZ_POLICIES_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_server.h"

/* Parameters of the schedulers; each reads its own. */
typedef struct cz_policy_params {
    /* Stage-aware playback buffer telemetry (set by the driver, not the config): audio
     * seconds that one token of this stage becomes; 0 when the stage produces no audio
     * (then interaction-aware orderings fall back to FCFS order). */
    double audio_s_per_token;
    /* LiveServe (section 4.1, Eq. 1-3) */
    double p_safe_s;          /* P_safe: the minimum safe playback buffer (2.0 s) */
    double alpha;             /* weight of the barge-in exposure cost (1.0) */
    double beta;              /* weight of the KV-pressure benefit (1.0) */
    bool pace_u2;             /* defer U2 work whose utility is below zero until its buffer
                                 falls back (the reading of section 7.3 that reproduces
                                 Figure 15; on) */
    double pace_horizon_s;    /* ... and only above this buffer, so that a paced request
                                 keeps a margin over P_safe (docs/policies.md) */
    /* VoxServe (section 3.2.1, and its OnlineScheduler) */
    double urgent_window_s;   /* urgent within this of the playback deadline (1.0 s) */
    uint32_t max_new_prefills;/* new requests prefilled per step (1) */
    uint32_t prefill_step_cap;/* requests in a step that holds a prefill (8) */
    bool throughput_mode;     /* section 4.3.3: largest batches, no streaming priorities */
    /* The GPU execution model of the stages this policy runs (read by the simulator):
     * VoxServe's asynchronous pipeline (section 3.2.2) runs the LLM's and the
     * detokenizer's steps on their own device streams, co-running on one GPU; otherwise a
     * GPU runs one step at a time. On by default for voxserve, off for the others. */
    bool async_pipeline;
    double corun_slowdown;    /* co-running steps each take 1 + (k - 1)(c - 1) times their
                                 time alone with k in flight (sim/cz_streams.h; 2.0) */
    /* BROS (Efficient LLM Serving on Hybrid Real-time and Best-effort Requests) */
    uint32_t base_batch;      /* base batch size (128) */
    double rt_ttft_s;         /* real-time SLOs: first token, and each later token */
    double rt_tpot_s;
    /* BROS's iteration-latency model, linear in the batch's input and context lengths:
     * step_s[0] + step_s[1] x prefill tokens + step_s[2] x decoding sequences
     * + step_s[3] x context tokens the decodes read + step_s[4] x the prefill tokens'
     * attention context (sum over them of the positions each attends to). The driver fits
     * it to the stage's cost model (cz_bros_step_s). */
    double step_s[5];
} cz_policy_params;

typedef struct cz_policy {
    const cz_sched_ops *ops;  /* the scheduler's function table (state unset) */
    cz_policy_params params;
} cz_policy;

/* First-come-first-served, vLLM V1's default policy: requests are admitted in arrival
 * order and, when the KV pool runs out, the most recently admitted running request is
 * preempted (vLLM V1 Scheduler: `self.running.pop()` under SchedulingPolicy.FCFS). It runs
 * on the serving core's O(log n) path. */
extern const cz_sched_ops cz_sched_fcfs;

/* The same FCFS order on the ordering path (O(n) per step): a cross-check of that path. */
extern const cz_sched_ops cz_sched_fcfs_scan;

/* LiveServe's urgency scheduler (LiveServe, sections 4.1-4.2, Eq. 1-3,
 * Algorithm 1). */
extern const cz_sched_ops cz_sched_liveserve;

/* VoxServe's streaming scheduler and its throughput mode (VoxServe,
 * sections 3.2.1 and 4.3.3). */
extern const cz_sched_ops cz_sched_voxserve;

/* BROS's real-time / best-effort scheduler with adaptive batch size (the BROS paper). */
extern const cz_sched_ops cz_sched_bros;

/* VoxServe's detokenizer rule (VoxServe, section 3.2.1, and its
 * OnlineScheduler): the detokenizer (a vocoder fed by an audio-producing stage) runs only
 * when a request with a full chunk waiting is urgent, and its batch serves urgent requests
 * first (startup, oldest first; then steady state, nearest deadline first), then the others
 * in queue order. Urgency is the scheduler's (cz_sched_voxserve), read from the playback
 * telemetry of each job's request at the stage feeding the detokenizer. */
typedef struct cz_detok_job {
    const cz_seq *q; /* the job's request at the feeding stage; NULL: none (served last) */
    uint32_t pos;    /* the job's queue position (0 = oldest) */
} cz_detok_job;
/* Orders jobs[0..n) for a detokenizer step: writes the queue positions to run, in order, to
 * pos_out (capacity n) and returns how many, at most max_batch; 0 when no job is urgent,
 * with *wake_s the earliest time one becomes urgent (INFINITY: never without new
 * telemetry). Throughput mode (section 4.3.3): every job in queue order up to max_batch,
 * but only once max_batch jobs wait or `upstream_idle` (the stage feeding the detokenizer
 * has nothing left to run); otherwise 0 with *wake_s INFINITY. `scratch` holds n
 * candidates. Pure; no allocation. */
uint32_t cz_voxserve_detok_pick(const cz_policy_params *p, const cz_detok_job *jobs, uint32_t n,
                                double now_s, uint32_t max_batch, bool upstream_idle,
                                cz_cand *scratch, uint32_t *pos_out, double *wake_s);

/* BROS's predicted step time of a batch with these features (step_s above). Pure. */
double cz_bros_step_s(const cz_policy_params *p, double prefill_tokens, double decode_seqs,
                      double decode_ctx_tokens, double prefill_attn_ctx);

/* The defaults of every parameter (documented above). */
cz_policy_params cz_policy_params_default(void);

/* Looks a scheduler up by name and reads its parameters from `params` (an object of the
 * config, or NULL for the defaults); unknown names and keys are errors naming `where`. */
cz_status cz_policy_make(const char *name, const cJSON *params, const char *where,
                         cz_policy *out, cz_err *err);

/* The function table with its state pointing at `pol`'s parameters (which must outlive
 * every server it is given to). */
cz_sched_ops cz_policy_ops(const cz_policy *pol);

/* Stage-aware playback buffer of sequence `q` at now_s (LiveServe section 4.1): audio
 * seconds its produced tokens become, less what the client has played (extrapolated at
 * real time from its last report); NaN without telemetry. */
double cz_policy_buffer_s(const cz_policy_params *p, const cz_seq *q, double now_s);

/* Seconds of audio the client holds and has not played at now_s: received less played,
 * played extrapolated at real time from the last report (0 when the player ran dry or
 * nothing was reported). */
double cz_policy_client_buffer_s(const cz_seq *q, double now_s);

/* True once the current turn of `q` has delivered audio to the client. */
bool cz_policy_audio_started(const cz_seq *q);

/* LiveServe's preload admission (LiveServe, section 5.2): a
 * speech-triggered reload of offloaded KV runs as background work only when it would land
 * (eta_s, behind the transfers already queued on the link) by the time the LLM stage needs
 * the KV (needed_at_s, the end of the user's speech); otherwise it is skipped and the turn
 * loads synchronously. */
bool cz_preload_admit(double eta_s, double needed_at_s);

/* ---- Admission of full-duplex sessions (Metronome) ----
 *
 * A gateway decides whether a new periodic session may start; live sessions are never
 * evicted. */
typedef enum cz_admit_kind {
    CZ_ADMIT_ALL = 0, /* no gateway */
    CZ_ADMIT_STATIC,  /* a fixed cap on live sessions (the baseline) */
    CZ_ADMIT_AIMD     /* Metronome section 4.2 and its gateway */
} cz_admit_kind;

typedef struct cz_admission {
    cz_admit_kind kind;
    uint32_t cap;            /* live sessions allowed; UINT32_MAX: unbounded (AIMD's start) */
    double target_fraction;  /* AIMD: target batch time as a fraction of the frame budget
                                (0.7) */
    double decrease;         /* AIMD: on a tick above target, cap = max(1, floor(decrease x
                                live)) (0.9) */
    uint32_t margin;         /* AIMD: while live >= cap - margin, cap += 1 a tick (2) */
} cz_admission;

/* Reads a config's "admission" object: {"policy": "aimd", "target_fraction",
 * "decrease", "margin"} or {"policy": "static", "cap"} or {"policy": "none"}; NULL: none.
 * Errors name `where` and the field. */
cz_status cz_admission_parse(const cJSON *j, const char *where, cz_admission *out,
                             cz_err *err);
/* Whether a new session may start with `live` sessions live. Pure. */
bool cz_admission_admit(const cz_admission *a, uint32_t live);
/* One gateway tick (every frame budget budget_s): `measured_s` is the previous tick's
 * batch time. AIMD: above target_fraction x budget_s, multiplicative decrease from the
 * live count; otherwise, while live is within `margin` of the cap, additive increase by
 * one. Other kinds: nothing. */
void cz_admission_tick(cz_admission *a, double measured_s, double budget_s, uint32_t live);

/* ---- Cross-stage schedulers (Nova) ----
 *
 * One GPU serves a vision-language model as three workers: vision encode, LLM prefill and
 * LLM decode. These schedulers decide, from counts of what waits at each worker, what to
 * start next; the cross-stage runtime (runtime/cz_xstage.h) starts it. A step started
 * on the "exclusive" worker is one request's vision encode or prefill (never batched), or,
 * for the chunked baseline, a hybrid LLM step; a decode step batches every request ready
 * to decode. */
typedef enum cz_xs_kind {
    CZ_XS_NOVA = 0,  /* section III-D: decode > prefill > vision, decode co-runs beside
                        either on its own SM partition */
    CZ_XS_PF_LIMIT,  /* section V-A7: prefill-first, decode once more than a threshold wait;
                        one worker at a time */
    CZ_XS_CHUNKED    /* section V-A7: chunked prefill (hybrid LLM steps under a token
                        budget), vision encode time-shared with the LLM */
} cz_xs_kind;

typedef enum cz_xs_work {
    CZ_XS_IDLE = 0,
    CZ_XS_VISION,    /* one request's vision encode */
    CZ_XS_PREFILL,   /* one request's whole prefill */
    CZ_XS_HYBRID,    /* chunked: decodes plus prefill chunks under the token budget */
    CZ_XS_DECODE     /* a decode step of every request ready to decode */
} cz_xs_work;

typedef struct cz_xs_policy {
    cz_xs_kind kind;
    /* Nova's SM partition (section III-C2, Eq. 5; values of section V-A5 for an RTX A6000
     * with 84 SMs): decode's SMs beside vision / prefill when one request is pending,
     * falling linearly to sm_floor as pending requests reach pending_vision /
     * pending_prefill; adaptive false keeps the one-pending values. */
    uint32_t sm_decode_vision;   /* 24 */
    uint32_t sm_decode_prefill;  /* 30 */
    uint32_t sm_floor;           /* 12 */
    uint32_t pending_vision;     /* 4 */
    uint32_t pending_prefill;    /* 6 */
    bool adaptive;               /* true */
    bool enumerate;              /* false: sm_decode_vision / sm_decode_prefill as given;
                                    true: the driver sets them by Eq. 3's enumeration
                                    (cz_xs_enumerate_split) over splits in units of
                                    sm_granularity */
    uint32_t sm_granularity;     /* 2 (libsmctrl: one TPC) */
    double corun_slowdown;       /* co-running partitioned steps take this many times their
                                    time on their SMs alone (memory contention, section
                                    III-B2; 1.0: none, set it from measurements) */
    bool multi_stream;           /* the Multi-Stream baseline (section V-A7): Nova's order,
                                    co-running with no partition; CUDA's block scheduler
                                    favours the larger kernel */
    double ms_excl_speed;        /* multi-stream: speed of a co-running vision or prefill
                                    step relative to alone (0.864) */
    double ms_decode_speed;      /* ... and of a co-running decode step (0.204) */
    uint32_t vision_resident_layers; /* section III-E: K physical vision-encoder layers
                                    cycling through the encoder's layers (0: all resident) */
    uint32_t decode_threshold;   /* PF-Limit: decode once more than this wait (5) */
    uint32_t token_budget;       /* chunked: tokens per hybrid step (128) */
} cz_xs_policy;

/* What waits and runs now, as the driver sees it. */
typedef struct cz_xs_view {
    uint32_t vision_waiting;   /* arrived, not yet encoding */
    uint32_t prefill_waiting;  /* encoded, prefill not started */
    uint32_t prefilling;       /* chunked: prefill started, not finished */
    uint32_t decode_ready;     /* decoding requests not in a step now */
    cz_xs_work excl;           /* the exclusive worker's step (IDLE, VISION, PREFILL, HYBRID) */
    bool decoding;             /* a decode step is in flight */
    cz_xs_work last_excl;      /* the last step the exclusive worker started (chunked:
                                  vision and the LLM take turns) */
} cz_xs_view;

typedef struct cz_xs_decision {
    cz_xs_work excl;           /* start on the exclusive worker (IDLE: nothing) */
    bool decode;               /* start a decode step */
} cz_xs_decision;

/* Looks a cross-stage scheduler up by name ("nova", "pf_limit", "chunked_prefill") and
 * reads its parameters from `params` (NULL: defaults). Returns CZ_ENOTFOUND without a
 * message when `name` is not a cross-stage scheduler, CZ_EINVAL naming `where` and the
 * field when a parameter is wrong. */
cz_status cz_xs_policy_make(const char *name, const cJSON *params, const char *where,
                            cz_xs_policy *out, cz_err *err);
/* The next starts given `v`: never starts a worker that is busy; a policy without
 * co-running starts nothing while anything runs. Pure. */
void cz_xs_decide(const cz_xs_policy *pol, const cz_xs_view *v, cz_xs_decision *out);
/* One candidate split for Nova's static partition (section III-C1): decode on `sms` SMs,
 * the co-running stage on the rest, with the step times profiled (or modelled) there. */
typedef struct cz_xs_split {
    uint32_t sms;       /* decode's SMs */
    double vision_s;    /* vision encode on the other SMs */
    double prefill_s;   /* prefill on the other SMs */
    double decode_s;    /* one decode step on `sms` SMs */
} cz_xs_split;
/* Eq. 1-2 (section III-C1), as we read them: in the ideal pipeline the exclusive worker
 * alternates vision and prefill without bubbles, so a request's decode iterations co-run
 * with vision for the share r_v = T_v / (T_v + T_p) of the time and with prefill for
 * r_p = T_p / (T_v + T_p); the expected end-to-end latency of a request generating L
 * tokens is T_v + T_p + L (r_v T_dv + r_p T_dp), where T_v, T_dv come from the split `v`
 * decode gets beside vision and T_p, T_dp from the split `p` beside prefill. Every one of
 * these steps co-runs, so each takes `corun` (the executor's corun_slowdown, >= 1) times
 * its time on its SMs alone (the times in `v` and `p`). Pure. */
double cz_xs_ideal_e2e_s(const cz_xs_split *v, const cz_xs_split *p, double out_tokens,
                         double corun);
/* Eq. 3: enumerates every pair of the n splits (O(n^2)) under cz_xs_ideal_e2e_s, writes
 * the decode SMs of the best pair, and returns its latency; ties go to the pair listed
 * first. A co-run factor stretches every pair's latency by the same factor, so it changes
 * the latency returned, never the pair. n >= 1. Pure. */
double cz_xs_enumerate_split(const cz_xs_split *splits, uint32_t n, double out_tokens,
                             double corun, uint32_t *sm_vision, uint32_t *sm_prefill);
/* Eq. 6 (section III-D, "Queueing Behavior"): the mean wait for the vision worker as an
 * M/G/1 queue whose service is a request's vision encode and prefill, Pollaczek-Khinchine
 * W = lambda E[S^2] / (2 (1 - rho)) with rho = lambda E[S]. Table V's "predicted" row is
 * its deterministic case, E[S^2] = E[S]^2 (M/D/1: W = rho S / (2 (1 - rho))). Seconds;
 * NaN when rho >= 1 (no steady state) or an argument is not positive. Pure. */
double cz_xs_mg1_wait_s(double rate_rps, double mean_service_s, double service_second_moment_s2);

/* Fraction of `total_sms` that decode gets while it co-runs beside `beside` (VISION or
 * PREFILL) with `pending` requests in the vision and prefill stages (Eq. 5); the
 * co-running step gets the rest. 1.0 for policies that do not co-run. */
double cz_xs_decode_share(const cz_xs_policy *pol, cz_xs_work beside, uint32_t pending,
                          uint32_t total_sms);

#endif
