/* cz_results.h - the HDF5 results file both drivers write (docs/metrics.md):
 *   /requests   compound table, one row per request (cz_req_record fields + derived
 *               ttft_s, tpot_s, e2el_s, queue_wait_s)
 *   /timeline   compound table (t_s, kv_blocks_used, running, waiting, batch_tokens)
 *   /itl        compound table of inter-token gaps (gap_s, count)
 *   /audio      compound table, one row per spoken turn (cz_audio_record)
 *   /frames     compound table, one row per periodic-stream frame (cz_frame_record)
 *   attributes on /: config (JSON text), summary (JSON text), cadenza_version, seed.
 * Each table stores its fields packed, without the C structs' padding, so the bytes
 * written are the fields' alone. The file is written at `path` and removed on an error,
 * so an error never leaves a half-written file; to replace a file atomically or survive a
 * kill, write to a temporary path and rename it (the CLI does, cli/cz_out.h). HDF5's own
 * error printing is switched off; its failures come back as CZ_EIO with the path and the
 * step that failed. */
#ifndef CZ_RESULTS_H
#define CZ_RESULTS_H

#include <stdint.h>

#include "cz_base.h"
#include "cz_metrics.h"

cz_status cz_results_write_h5(const char *path, const cz_metrics *m, const char *config_json,
                              const char *summary_json, uint64_t seed, cz_err *err);

#endif
