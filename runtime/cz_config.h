/* cz_config.h - an experiment config as both drivers read it (docs/config.md): the model
 * card's pipeline placed on GPUs (replicas, routers, the serving core's settings and the
 * scheduler of each stage), the hardware card, the cost model's parameters, the session
 * gateway, the client's thresholds and SLOs. The workload named by the config is built
 * while parsing it. The roofline helpers below are the cost model of a pipeline stage as
 * the config places it, shared by the simulator and by the policies the parser derives
 * from it (BROS's step model, Nova's split). */
#ifndef CZ_CONFIG_H
#define CZ_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_distspec.h"
#include "cz_jobq.h"
#include "cz_metrics.h"
#include "cz_models.h"
#include "cz_policies.h"
#include "cz_router.h"
#include "cz_server.h"
#include "cz_workload.h"

/* Replicas of a stage: bounded only by memory (about 10 KB each for a text model's idle
 * replica); an explicit `gpus` list names at most CZ_MAX_GPU_LIST of them, a larger
 * stage takes consecutive GPUs from `first_gpu`. */
#define CZ_MAX_STAGE_REPLICAS (1u << 24)
#define CZ_MAX_GPU_LIST 64

typedef enum cz_cost_kind {
    CZ_COST_ROOFLINE = 0, /* step time from the roofline of the model stage on the hardware */
    CZ_COST_SERVICE,      /* each request carries a service time drawn from a distribution;
                             a step costs the shares of the requests it advances (queueing
                             validation, docs/validation.md) */
    CZ_COST_FITTED        /* step time from coefficients fitted to a measured engine
                             (cadenza calibrate: a cost file, cz_costfile.h) */
} cz_cost_kind;

/* Placement of one pipeline stage. */
typedef struct cz_stage_place {
    cz_policy policy;               /* its scheduler (autoregressive stages) */
    uint32_t replicas;
    uint32_t first_gpu;             /* without a gpus list: replica r on GPU first_gpu + r */
    bool gpu_list;                  /* gpus[0 .. replicas) places them */
    uint32_t gpus[CZ_MAX_GPU_LIST]; /* GPU of each replica; stages on one GPU time-share it */
    cz_server_config server;        /* autoregressive stages */
    uint32_t max_batch, max_tokens; /* encoders and vocoders: jobs and tokens per step */
    uint32_t tp;                    /* GPUs of one replica's tensor-parallel group (0: the
                                       config's cost.tp) */
} cz_stage_place;

/* Element types the engine's weights and KV cache take (cz_dtype's values, kernels/). */
typedef enum cz_engine_dtype {
    CZ_ENGINE_F32 = 0,
    CZ_ENGINE_BF16,
    CZ_ENGINE_F16
} cz_engine_dtype;

/* The real engine's settings: the config's `engine` object (docs/engine.md). The
 * simulator reads none of them. */
typedef struct cz_engine_config {
    char weights[1024];     /* "random", or a Hugging Face checkpoint folder (a relative
                               path is resolved against the config's folder) */
    uint32_t dtype;         /* random weights' type (cz_engine_dtype; bf16) */
    uint32_t kv_dtype;      /* KV cache's type (bf16) */
    uint32_t threads;       /* CPU threads in all, split over the devices (0: every online
                               CPU) */
    double temperature;     /* sampling: 0 is greedy (default) */
    uint32_t top_k;         /* 0: all */
    double top_p;           /* 1: all */
    double max_kv_bytes;    /* largest KV pool the engine allocates for one replica (2 GiB):
                               a config sized for a GPU card fails with a clear message */
} cz_engine_config;

/* A parsed experiment config (docs/config.md). */
typedef struct cz_config {
    char name[128];
    uint64_t seed;
    cz_cost_kind cost_kind;
    cz_model_card model;      /* its pipeline is what runs */
    cz_hw_card hw;
    cz_cost_params cost;      /* the roofline's parameters; a fitted model reads tp and
                                 bw_sat_sm_fraction */
    cz_cost_fit fit[CZ_MAX_STAGES]; /* CZ_COST_FITTED: per model stage (card order) */
    char cost_file[1024];     /* CZ_COST_FITTED: the cost file, as resolved */
    double cost_scale;        /* CZ_COST_FITTED: every fitted step time times this (cost.scale,
                                 default 1: a machine that runs slower or faster than it
                                 did when profiled) */
    double ingest_s;          /* CZ_COST_FITTED: the cost file's request handling before
                                 scheduling (its "request": BLIS's alpha terms), ingest_s +
                                 ingest_per_token_s x input tokens after a turn arrives;
                                 a driver that models time applies it (0: none) */
    double ingest_per_token_s;
    cz_distspec service;      /* CZ_COST_SERVICE */
    cz_stage_place place[CZ_MAX_STAGES]; /* per pipeline stage */
    uint32_t n_gpus;
    cz_router_config router;
    double gpu_memory_utilization;
    char scheduler[32];       /* the scheduler's name (every stage runs the same one) */
    cz_admission admission;   /* the gateway for periodic sessions (streams) */
    bool cross_stage;         /* a cross-stage scheduler (cz_xs_policy) runs the GPU */
    cz_xs_policy xs;
    double xs_ideal_e2e_s;    /* Nova's partition: Eq. 1 at the split decode starts from
                                 (enumerated or given), co-run factor included (NaN: not
                                 a partitioned Nova run) */
    cz_xs_split xs_ideal_vision;  /* what Eq. 1 sees there for the workload's mean request:
                                     decode on sm_decode_vision SMs beside vision on the rest */
    cz_xs_split xs_ideal_prefill; /* ... decode on sm_decode_prefill SMs beside prefill */
    cz_slo slo;
    double continuity_threshold_s; /* client: largest playback deficit still continuous */
    double frame_wait_fraction;    /* streams: a tick returns empty when its tokens are not
                                      ready by this fraction of the frame period (0.8) */
    double max_time_s;        /* stop the clock here (requests in flight count as failed) */
    double timeline_interval_s;
    bool fast_forward;        /* sim.fast_forward: the simulator may start a decode-only batch
                                 again at a step's end without a dispatch (cz_driver) */
    cz_pct_mode pct_mode;     /* metrics.percentiles: the summary's percentiles */
    cz_engine_config engine;  /* the real engine's settings */
    /* disaggregated prefill and decode (the config's "disaggregation"; docs/pipeline.md):
     * the card's one autoregressive stage runs as two pipeline stages of the same model,
     * 0 its prefill pool and 1 its decode pool, the KV moving between them over each
     * device's network link (bandwidth per direction, latency per transfer) */
    bool pd;
    double pd_link_Bps, pd_link_latency_s;
} cz_config;

/* Pipeline stages of a disaggregated config. */
#define CZ_PD_PREFILL 0u
#define CZ_PD_DECODE 1u

/* Tensor-parallel GPUs per replica of pipeline stage p (>= 1). */
static inline uint32_t cz_config_tp(const cz_config *c, uint32_t p)
{
    return c->place[p].tp ? c->place[p].tp : c->cost.tp ? c->cost.tp : 1;
}

/* The autoregressive ordinal of pipeline stage p (its records' `stage`; the summary's
 * headline is ordinal 0): AR stages in pipeline order, but a disaggregated config's decode
 * pool is 0 (what its client sees) and its prefill pool 1. UINT32_MAX for an encoder or
 * vocoder. */
uint32_t cz_config_ar_ord(const cz_config *c, uint32_t p);
/* The name of pipeline stage p in results: its card stage's, or "prefill" and "decode". */
const char *cz_config_stage_name(const cz_config *c, uint32_t p);

/* The GPU of replica r of a stage placed by `pl` (r < pl->replicas). */
static inline uint32_t cz_stage_place_gpu(const cz_stage_place *pl, uint32_t r)
{
    return pl->gpu_list ? pl->gpus[r] : pl->first_gpu + r;
}

/* Parses an experiment config. `where` names it in messages (the file name),
 * `base_dir` resolves the workload's relative paths. The workload is built into *wl
 * (initialised by the caller; with wl->stream set, a synthetic workload may come back
 * streamed, cz_workload_stream, unless the config is cross-stage or uses the service-time
 * cost). A live *wl (cz_workload_live, requests as they come) is left as it is: the config's
 * workload is not read (nor required), and a config that cannot serve requests as they come
 * (a cross-stage scheduler, the service-time cost, a session gateway) is CZ_EINVAL. KV pools left unsized are derived per GPU from the
 * hardware card: (hbm_bytes x gpu_memory_utilization - weights placed on the GPU) shared
 * equally by the autoregressive replicas on it (docs/config.md). */
cz_status cz_config_parse(const cJSON *cfg, const char *where, const char *base_dir,
                              cz_config *out, cz_workload *wl, cz_err *err);

/* Pipeline stage p's decode-only steps under the roofline, planned once
 * (cz_cost_decode): true when cz_cost_decode_s(out, seqs, ctx) then equals
 * cz_config_roofline_step_s for every batch without prefill; false (a fitted or service
 * cost, or a stage with an inner stage) when it would not. The plan reads cfg's cards: it
 * must not outlive cfg. */
bool cz_config_decode_cost(const cz_config *cfg, uint32_t p, cz_cost_decode *out);

/* The cost model's time (the roofline, or the fitted model of CZ_COST_FITTED) of an
 * autoregressive batch of pipeline stage `p`, its inner stage (a code predictor)
 * included. */
double cz_config_roofline_step_s(const cz_config *cfg, uint32_t p, const cz_batch *b);

/* The cost model's time of one step of encoder or vocoder pipeline stage `p` over
 * jobs[0..n). A
 * vocoder conditioned on a reference clip re-reads its prompt_tokens in every call, beside
 * the job's own tokens (VoxServe, App. A: CosyVoice's detokenizer "at
 * each iteration receives both the reference audio tokens and the newly generated audio
 * tokens"). */
double cz_config_jobs_step_s(const cz_config *cfg, uint32_t p, const cz_job *jobs, uint32_t n);

/* The cost model's time of one step of pipeline stage p with shape b on a fraction `share`
 * of the GPU's SMs (cz_cost_step then cz_cost_share_s, or cz_cost_fit_s). */
/* The host part of a step of stage p (runs on the host thread beside the GPU's work in an
 * asynchronous pipeline): the roofline's step_overhead_s, or the fitted per-step
 * constant. */
double cz_config_step_overhead_s(const cz_config *cfg, uint32_t p);

double cz_config_stage_share_s(const cz_config *cfg, uint32_t p, const cz_batch_shape *b,
                               double share);

/* The shape of one prefill chunk of `tokens` after `start` tokens of context: its tokens
 * attend to everything before them and to each other. */
cz_batch_shape cz_prefill_shape(uint64_t start, uint64_t tokens);

/* The batch shapes BROS's step-latency model is fitted on; out holds CZ_STEP_FIT_SHAPES.
 * Returns how many. */
#define CZ_STEP_FIT_SHAPES 64
uint32_t cz_config_step_fit_shapes(cz_batch *out);

#endif
