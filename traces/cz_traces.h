/* cz_traces.h - trace readers, synthetic generators and workload transforms, all
 * producing a cz_workload (cz_workload.h). Readers go by column or field name, never by
 * position; every error names the file, the line or record, the field and what was
 * expected. See docs/workload.md. */
#ifndef CZ_TRACES_H
#define CZ_TRACES_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cz_base.h"
#include "cz_workload.h"

typedef enum cz_trace_format {
    CZ_FMT_AUTO = 0, /* detect from the file's content */
    CZ_FMT_SHAREGPT, /* vLLM benchmark JSON array of {"conversations": [...]} */
    CZ_FMT_BURSTGPT, /* BurstGPT CSV, 6 or 8 columns */
    CZ_FMT_MOONCAKE, /* Mooncake JSONL with timestamp/input_length/output_length/hash_ids */
    CZ_FMT_AZURE,    /* Azure LLM inference CSV TIMESTAMP,ContextTokens,GeneratedTokens */
    CZ_FMT_CADENZA   /* cadenza's own session JSONL (docs/workload.md) */
} cz_trace_format;

/* Parses a format name ("sharegpt", "burstgpt", "mooncake", "azure", "cadenza", "auto").
 * CZ_ENOTFOUND with the list of names otherwise. */
cz_status cz_trace_format_parse(const char *name, cz_trace_format *out, cz_err *err);
/* Name of format `f` as cz_trace_format_parse accepts it; "unknown" for other values. */
const char *cz_trace_format_name(cz_trace_format f);

/* Reads the first bytes of `path` and decides its format from the content: '[' ShareGPT;
 * a first line '{' with "cadenza-sessions" cadenza, with "hash_ids" or "input_length"
 * Mooncake; a CSV header with "Request tokens" BurstGPT, with "ContextTokens" Azure.
 * CZ_EIO when unreadable; CZ_EFORMAT naming the line and column of a NUL byte in those
 * bytes (cz_text_check), or naming the file and listing the formats otherwise. */
cz_status cz_trace_detect(const char *path, cz_trace_format *out, cz_err *err);

/* Options of the readers. cz_trace_opts_default() gives the defaults documented in
 * docs/workload.md. */
typedef struct cz_trace_opts {
    cz_trace_format format;
    /* ShareGPT */
    bool sharegpt_multi_turn;   /* every exchange of a conversation as one multi-turn session
                                   (default false: first exchange only, as vLLM does) */
    bool sharegpt_filter;       /* vLLM's length filters (default true) */
    uint32_t sharegpt_min_tokens;      /* prune prompt or output shorter than this (4) */
    uint32_t sharegpt_max_prompt;      /* prune prompt longer than this (1024) */
    uint32_t sharegpt_max_total;       /* prune prompt + output longer than this (2048) */
    double chars_per_token;     /* token estimator when the file has no counts (4.0) */
    uint32_t default_output_tokens; /* output length when the file has none (0 = error) */
    /* BurstGPT */
    bool burstgpt_new_input;    /* a later turn's input is what its request adds to the
                                   previous request and response (the trace re-sends the
                                   conversation), at least 1 token (default false) */
    /* every format */
    cz_class cls;               /* class given to the sessions read */
} cz_trace_opts;

cz_trace_opts cz_trace_opts_default(void);

/* Reads a trace file into `out` (which must be initialised and is appended to). `opts`
 * may be NULL for the defaults. Open-loop arrival times are shifted so the first record
 * arrives at 0 s (each file on its own; cadenza files keep their times as written).
 * Files without timestamps (ShareGPT) leave arrival_s = 0 for an arrival process to fill.
 * Appending to a non-empty workload adds the sessions, streams and dropped counters, sets
 * source to "mixed" when the formats differ and keeps the flags only if both have them;
 * differing hash block sizes or concurrencies are CZ_EINVAL. On failure `out` is left
 * as it was and `err` names the file, the line or record, the field and what was
 * expected (CZ_EIO, CZ_EFORMAT, CZ_EINVAL). */
cz_status cz_trace_read(const char *path, const cz_trace_opts *opts, cz_workload *out,
                        cz_err *err);

/* Writes `w` in cadenza's session JSONL format (docs/workload.md) to `path` with
 * cz_file_write: removed on failure (CZ_EIO naming `path`); the CLI writes to a temporary
 * path and renames it (cli/cz_out.h). Reading the file back gives a workload equal to `w`
 * (cz_workload_equal). */
cz_status cz_trace_write_cadenza(const cz_workload *w, const char *path, cz_err *err);

/* Statistics printed by `cadenza trace info`. */
typedef struct cz_trace_info {
    uint64_t requests, sessions, streams, turns_max, dropped_failed;
    uint64_t dropped_filtered;
    double turns_mean;
    double duration_s, mean_rate_rps;
    double burstiness_iod_1s; /* index of dispersion of counts in 1 s bins (var/mean) */
    double input_tokens_p50, input_tokens_p90, input_tokens_p99, input_tokens_mean;
    double output_tokens_p50, output_tokens_p90, output_tokens_p99, output_tokens_mean;
} cz_trace_info;

/* Fills `out` from `w`: requests = turns; duration, rate and burstiness over the arrivals
 * the workload fixes (every turn of an open session, the first turn of a closed one);
 * input tokens over all modalities, output = out_text_tokens. Values that are undefined
 * (no turns, zero duration) are NaN, which cz_trace_info_json writes as null. */
void cz_trace_info_compute(const cz_workload *w, cz_trace_info *out);
/* JSON object with the keys of docs/workload.md (requests, sessions, turns_max,
 * dropped_failed, duration_s, mean_rate_rps, input_tokens_p50, output_tokens_p50, ...). */
cJSON *cz_trace_info_json(const cz_trace_info *info);

/* Workload transforms (docs/workload.md, "Transforms"). Streams are left as they are.
 *
 * cz_workload_scale_time multiplies every turn's arrival_s by `factor` (> 0): 2 stretches
 * the workload over twice the time, i.e. half the request rate; 0.5 doubles the rate.
 * Think, speech and audio times are not scaled. */
void cz_workload_scale_time(cz_workload *w, double factor);
/* Keeps the sessions whose first arrival lies in [start_s, start_s + duration_s) and
 * moves start_s to 0 (every turn of an open session, the first turn of a closed one);
 * the turns of dropped sessions are counted in dropped_filtered. Kept sessions keep
 * their order. start_s >= 0, duration_s >= 0 (may be INFINITY). */
void cz_workload_window(cz_workload *w, double start_s, double duration_s);
/* Keeps whole sessions in order of first arrival (ties in workload order) while their
 * turns add up to at most `max_turns`, stopping at the first session that does not fit;
 * dropped turns are counted in dropped_filtered. Kept sessions keep their order. */
void cz_workload_limit_requests(cz_workload *w, uint64_t max_turns);

/* Builds a workload from the "workload" object of an experiment config: a trace or a
 * synthetic generator, an arrival process, audio and barge-in options, and the
 * transforms (time scale, window, request cap). Relative paths are resolved against
 * `base_dir`. `where` prefixes messages (e.g. "exp.json: workload"). Draws come from
 * GSL streams seeded from `seed`, so the same config and seed give the same workload.
 * On success *out (initialised) is freed and replaced; on failure it is untouched and
 * `err` names the config field (or the trace file and line) and what was expected. With
 * out->stream set, a synthetic source without barge-in gives a streamed workload
 * (cz_workload_stream: same sessions, produced as the run asks for them). */
cz_status cz_workload_from_config(const cJSON *wcfg, const char *where, const char *base_dir,
                                  uint64_t seed, cz_workload *out, cz_err *err);

#endif
