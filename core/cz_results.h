/* cz_results.h - the HDF5 results file both drivers write (docs/metrics.md):
 *   /requests   one row per request at one autoregressive stage (cz_req_record fields +
 *               derived ttft_s, tpot_s, e2el_s, queue_wait_s)
 *   /timeline   serving-state samples per stage replica (cz_timeline_row)
 *   /itl        inter-token gaps per autoregressive stage (cz_itl_record)
 *   /audio      one row per spoken turn (cz_audio_record)
 *   /frames     one row per periodic-stream frame (cz_frame_record)
 *   /turns      one row per turn of the workload (cz_turn_record)
 *   /steps      one row per batch a real engine executed (cz_step_record)
 *   /gateway    the streams' admission cap and live sessions at each change (cz_gateway_row)
 *   /sessions   one row per session: its id in the trace (cz_results_put_sessions)
 *   attributes on /: config (JSON text), summary (JSON text), cadenza_version, seed.
 * Every table is a cz_h5_table (cz_h5.h): `description` and `units` attributes, stage,
 * class and outcome columns as HDF5 enums named as the summary names them, chunked and
 * compressed. Each table stores its fields packed, without the C structs' padding, so the
 * bytes written are the fields' alone. The file is written at `path` and removed on an error,
 * so an error never leaves a half-written file; to replace a file atomically or survive a
 * kill, write to a temporary path and rename it (the CLI does, cli/cz_out.h). HDF5's own
 * error printing is switched off; its failures come back as CZ_EIO with the path and the
 * step that failed. */
#ifndef CZ_RESULTS_H
#define CZ_RESULTS_H

#include <stdint.h>

#include "cz_base.h"
#include "cz_metrics.h"

enum { CZ_RESULTS_MAX_STAGES = 8 };

/* The names of a run's stages, for the stage enums: the pipeline's stages in order (/steps'
 * `stage`) and its autoregressive stages in order (the `stage` of /requests, /timeline,
 * /itl and /turns: the ordinal among them). The strings are borrowed. */
typedef struct cz_results_stages {
    uint32_t n_pipe, n_ar;        /* 1 ..= CZ_RESULTS_MAX_STAGES each */
    const char *pipe[CZ_RESULTS_MAX_STAGES];
    const char *ar[CZ_RESULTS_MAX_STAGES];
} cz_results_stages;

/* A results file written while the run goes: cz_results_open creates it at `path` (CZ_EIO
 * naming it when HDF5 lacks the deflate or shuffle filter or cannot create it);
 * cz_results_sink is the rows sink a streaming recorder hands /requests, /turns, /itl and
 * /timeline to (cz_metrics_stream); cz_results_close writes what the recorder `m` still
 * holds (everything, when it did not stream), the other tables and the attributes, and
 * closes the file; cz_results_discard closes and removes it. Close and discard free the
 * writer; a failed close removes the file. The file is the same as cz_results_write_h5's
 * for the same run. */
typedef struct cz_results_writer cz_results_writer;
cz_status cz_results_open(const char *path, const cz_results_stages *stages,
                          cz_results_writer **out, cz_err *err);
cz_rows_sink cz_results_sink(cz_results_writer *w);
cz_status cz_results_close(cz_results_writer *w, const cz_metrics *m, const char *config_json,
                           const char *summary_json, uint64_t seed, cz_err *err);
void cz_results_discard(cz_results_writer *w);

/* A row of /sessions: a session of the workload and its id in the source trace. */
enum { CZ_RESULTS_NAME_MAX = 64 };
typedef struct cz_results_session {
    uint32_t session;                 /* the `session` of /requests and /turns */
    uint32_t turns;
    char name[CZ_RESULTS_NAME_MAX];   /* the trace's id, cut to 63 bytes, NUL-padded */
} cz_results_session;

/* Appends `n` rows to /sessions (created by the first call; a file no call wrote to has
 * none), between cz_results_open and cz_results_close. CZ_EIO naming the file on a
 * failure, after which close fails too. */
cz_status cz_results_put_sessions(cz_results_writer *w, const cz_results_session *rows,
                                  uint64_t n, cz_err *err);

/* Writes the results of the run recorded in `m`, whose stages `stages` names (every stage
 * code in `m` must be one of them: CZ_ASSERT), with the config and summary as JSON text.
 * CZ_EIO naming `path` when HDF5 lacks the deflate or shuffle filter or a step fails. */
cz_status cz_results_write_h5(const char *path, const cz_metrics *m,
                              const cz_results_stages *stages, const char *config_json,
                              const char *summary_json, uint64_t seed, cz_err *err);

#endif
