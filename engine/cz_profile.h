/* cz_profile.h - measuring the engine's step times over a grid of batch shapes, for
 * calibrating the cost model (docs/engine.md, "Profiling"; `cadenza profile`).
 *
 * Every pipeline stage of a config's model card is built as the engine builds it (the
 * same weight source, dtype and KV dtype; cz_engine_net_source) on one kernel context
 * (the CPU with the threads one device of a replay gets, or CUDA device 0), and real
 * forward passes are timed, one shape at a time, with nothing else running:
 *  - autoregressive stages, over a paged KV pool of their own: prefill chunks (chunk
 *    tokens after a cached prefix), decode batches (sequences x context per sequence),
 *    mixed batches (decodes plus one prefill chunk, vLLM's chunked prefill), each a real
 *    cz_step_batch (block tables over scattered physical blocks, slots, sampled rows); a
 *    stage with a code predictor also times it (rows x its steps per token);
 *  - encoder and vocoder stages: jobs x tokens per job (cz_net_encode, cz_net_vocode);
 *  - the host link: KV copies between a pool and host memory from cz_kmem_host_alloc
 *    (pinned on CUDA), contiguous ranges and whole blocks in the pool's layout (one copy
 *    per layer for K and for V, as the engine's copy thread does), both directions.
 * Each net first runs cz_net_warmup, as the engine's nets do before a replay's clock
 * starts. Passes run the engine's way: on a device thread, handed over and reported back
 * as the engine's device worker takes a step and posts its completion, and are timed from
 * the hand-over until the profiling thread runs again, as a replay's /steps count a batch
 * (the pass and cz_kctx_sync alone: device_median_s). A stage's shapes (and a set of
 * copies) are timed in `repeats` rounds, each round running every shape once, warm-up
 * passes and then one timed pass, so that a while in which something else has the machine
 * slows one pass of many shapes rather than every pass of a few (shapes whose median still
 * stands well above their fastest pass run another `repeats` rounds among themselves); the table keeps each
 * shape's median, 10th and 90th percentiles (linear interpolation between the sorted
 * samples) and extremes, beside the cost model's prediction for the shape.
 * The grid follows the config's limits (the step's token budget, the sequence cap, the
 * context cap) and is described in docs/engine.md. */
#ifndef CZ_PROFILE_H
#define CZ_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"
#include "cz_config.h"
#include "cz_models.h"

/* What a row of /shapes measured. */
typedef enum cz_profile_class {
    CZ_PROFILE_PREFILL = 0, /* one prefill chunk after a cached prefix */
    CZ_PROFILE_DECODE,      /* decode sequences, one token each */
    CZ_PROFILE_MIXED,       /* decodes and one prefill chunk in one step */
    CZ_PROFILE_ENCODER,     /* an encoder step of jobs x tokens */
    CZ_PROFILE_VOCODER,     /* a vocoder step of jobs x tokens */
    CZ_PROFILE_INNER,       /* a code predictor: rows x its sequential steps */
    CZ_PROFILE_N_CLASSES
} cz_profile_class;

/* "prefill", "decode", "mixed", "encoder", "vocoder", "inner". Never NULL. */
const char *cz_profile_class_name(cz_profile_class c);

/* Timing statistics of `repeats` passes, seconds. */
typedef struct cz_profile_times {
    uint32_t warmup;             /* untimed passes before each timed one (1 to 3; the
                                    first round's) */
    uint32_t repeats;            /* timed passes the statistics are of */
    uint32_t tries;              /* 1; 2 when the first rounds' median stood more than a
                                    quarter of it above their fastest pass and the shape
                                    was timed in as many rounds again (the set whose
                                    median stands nearer its fastest pass is kept) */
    double median_s, p10_s, p90_s, min_s, max_s; /* hand-over to report */
    double device_median_s;      /* the same passes' median on the device thread alone */
} cz_profile_times;

/* One measured shape: a row of /shapes. The five shape fields are cz_batch_shape's, as
 * the cost model and /steps read them (a prefill chunk's attention context as
 * cz_prefill_shape computes it; an encoder's or vocoder's jobs in prefill_seqs and their
 * tokens, a vocoder's re-read prompt included, in prefill_tokens). */
typedef struct cz_profile_row {
    uint32_t stage;              /* pipeline stage (/steps' `stage`) */
    uint32_t card;               /* index into the model card's stages */
    uint32_t kind;               /* cz_stage_kind of that card */
    uint32_t cls;                /* cz_profile_class */
    char stage_name[CZ_NAME_MAX];
    /* the grid point */
    uint32_t chunk_tokens;       /* prefill and mixed: the chunk */
    uint32_t prefix_tokens;      /* prefill and mixed: the chunk's cached prefix */
    uint32_t ctx_tokens;         /* decode and mixed: each decode sequence's context after
                                    the step (its seq_len); inner: steps per row */
    uint32_t jobs;               /* encoder, vocoder: jobs; inner: rows */
    uint32_t job_tokens;         /* encoder, vocoder: tokens per job */
    uint32_t net_rows;           /* rows the forward pass ran (tokens of the step; encoder
                                    frames; vocoder frames with the prompt) */
    /* cz_batch_shape */
    uint64_t prefill_tokens, prefill_attn_ctx, decode_ctx_tokens;
    uint32_t prefill_seqs, decode_seqs;
    cz_profile_times t;
    double predicted_s;          /* the config's cost model for the shape */
} cz_profile_row;

/* One measured host-link copy: a row of /transfers. */
typedef struct cz_profile_xfer {
    uint32_t stage;              /* the pipeline stage whose pool layout whole blocks follow;
                                    UINT32_MAX for a contiguous range */
    uint32_t to_host;            /* 1: pool to host memory; 0: host memory to the pool */
    uint32_t copies;             /* cz_kmem_copy_async calls: 1 for a contiguous range;
                                    2 x layers x blocks for whole blocks */
    uint32_t blocks;             /* whole blocks moved (0: a contiguous range) */
    uint64_t bytes;
    cz_profile_times t;
    double predicted_s;          /* cz_cost_host_transfer_s of the bytes */
} cz_profile_xfer;

/* Progress: the stage being measured (pipeline index and name; UINT32_MAX and "host link"
 * for the contiguous copies), timed passes run so far and their total (shapes and copies
 * x repeats, plus the rounds timed again as they are decided). Called before every timed
 * pass and once at the end (done == total, UINT32_MAX, "done"). */
typedef void (*cz_profile_progress_fn)(void *ctx, uint32_t stage, const char *stage_name,
                                       uint32_t done, uint32_t total);

/* How to profile. */
typedef struct cz_profile_opts {
    const char *backend;         /* "cpu" (NULL too) or "cuda" (device 0) */
    uint32_t threads;            /* CPU threads; 0: what one device of a replay gets
                                    (cz_engine_device_threads) */
    bool quick;                  /* the small grid, 3 repeats by default */
    bool probe;                  /* the probe grid instead: a few shapes per stage (short
                                    contexts, no copies), to check a machine's speed
                                    against a fit (`validate`) */
    uint32_t repeats;            /* timed passes per shape; 0: 5 (quick 3) */
    cz_profile_progress_fn progress; /* may be NULL */
    void *progress_ctx;
} cz_profile_opts;

/* A profile: its rows and what it ran on. */
typedef struct cz_profile {
    cz_profile_row *rows;
    size_t n_rows;
    cz_profile_xfer *xfers;
    size_t n_xfers;
    char backend[8];             /* "cpu", "cuda" */
    uint32_t threads;            /* CPU threads of the context (1 on CUDA) */
    char device[256];            /* CUDA device name; "" on the CPU */
    uint32_t repeats;
    double wall_s;               /* the whole profile, building the nets included */
} cz_profile;

/* Profiles every pipeline stage of `cfg` (parsed by cz_config_parse) into *out (caller
 * frees with cz_profile_free). CZ_EINVAL for an unknown backend or a stage whose grid
 * does not fit engine.max_kv_bytes even at its smallest; CZ_EDEVICE when the CUDA backend
 * has no device or a device call fails during the profile; a checkpoint's errors as
 * cz_net_create's. On failure *out holds nothing. */
cz_status cz_profile_run(const cz_config *cfg, const cz_profile_opts *opts, cz_profile *out,
                         cz_err *err);
void cz_profile_free(cz_profile *p);

/* The machine's speed now against `cfg`'s cost model (a fitted one, typically): profiles
 * the probe grid (opts->probe implied; a few seconds for a tiny model) and sets *ratio to
 * the median over its shapes of measured / predicted step time (1: as fast as when the
 * fit was profiled; 1.2: 20 % slower). Errors as cz_profile_run's. */
cz_status cz_profile_probe(const cz_config *cfg, const cz_profile_opts *opts, double *ratio,
                           cz_err *err);

/* What the writer records beside the tables (root attributes). */
typedef struct cz_profile_meta {
    const char *config_path;     /* as given on the command line */
    const char *config_json;     /* the config after --set, as JSON text */
    bool quick;
} cz_profile_meta;

/* Writes `p` to an HDF5 file at `path` (docs/engine.md, "Profiling"): the tables /shapes
 * and /transfers (packed, cz_h5.h) and root attributes describing the machine, the model,
 * the config and cadenza's version. On an error the file is removed and CZ_EIO names the
 * path and the step. */
cz_status cz_profile_write_h5(const char *path, const cz_profile *p, const cz_config *cfg,
                              const cz_profile_meta *meta, cz_err *err);

#endif
