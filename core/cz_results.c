/* cz_results.c - see cz_results.h. */
#include "cz_results.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cz_h5.h"

/* Row of /requests: the record plus the derived latencies, in seconds. */
typedef struct h5_req_row {
    uint64_t session;
    uint32_t turn, stage, stream, cls, input_tokens, output_tokens, heard_tokens, preemptions,
        outcome;
    double arrival_s, first_sched_s, first_token_s, finish_s, kv_load_s;
    double queue_wait_s, ttft_s, tpot_s, e2el_s;
} h5_req_row;

static hid_t req_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(h5_req_row));
#define F(name, ht) H5Tinsert(t, #name, HOFFSET(h5_req_row, name), ht)
    F(session, H5T_NATIVE_UINT64);
    F(turn, H5T_NATIVE_UINT32);
    F(stage, H5T_NATIVE_UINT32);
    F(stream, H5T_NATIVE_UINT32);
    F(cls, H5T_NATIVE_UINT32);
    F(input_tokens, H5T_NATIVE_UINT32);
    F(output_tokens, H5T_NATIVE_UINT32);
    F(heard_tokens, H5T_NATIVE_UINT32);
    F(preemptions, H5T_NATIVE_UINT32);
    F(outcome, H5T_NATIVE_UINT32);
    F(arrival_s, H5T_NATIVE_DOUBLE);
    F(first_sched_s, H5T_NATIVE_DOUBLE);
    F(first_token_s, H5T_NATIVE_DOUBLE);
    F(finish_s, H5T_NATIVE_DOUBLE);
    F(kv_load_s, H5T_NATIVE_DOUBLE);
    F(queue_wait_s, H5T_NATIVE_DOUBLE);
    F(ttft_s, H5T_NATIVE_DOUBLE);
    F(tpot_s, H5T_NATIVE_DOUBLE);
    F(e2el_s, H5T_NATIVE_DOUBLE);
#undef F
    return t;
}

static hid_t tl_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_timeline_row));
    H5Tinsert(t, "t_s", HOFFSET(cz_timeline_row, t_s), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "stage", HOFFSET(cz_timeline_row, stage), H5T_NATIVE_UINT32);
    H5Tinsert(t, "replica", HOFFSET(cz_timeline_row, replica), H5T_NATIVE_UINT32);
    H5Tinsert(t, "kv_blocks_used", HOFFSET(cz_timeline_row, kv_blocks_used), H5T_NATIVE_UINT32);
    H5Tinsert(t, "kv_blocks_idle", HOFFSET(cz_timeline_row, kv_blocks_idle), H5T_NATIVE_UINT32);
    H5Tinsert(t, "host_kv_tokens", HOFFSET(cz_timeline_row, host_kv_tokens), H5T_NATIVE_UINT64);
    H5Tinsert(t, "running", HOFFSET(cz_timeline_row, running), H5T_NATIVE_UINT32);
    H5Tinsert(t, "waiting", HOFFSET(cz_timeline_row, waiting), H5T_NATIVE_UINT32);
    H5Tinsert(t, "batch_tokens", HOFFSET(cz_timeline_row, batch_tokens), H5T_NATIVE_UINT32);
    return t;
}

static hid_t audio_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_audio_record));
#define F(name, ht) H5Tinsert(t, #name, HOFFSET(cz_audio_record, name), ht)
    F(session, H5T_NATIVE_UINT64);
    F(turn, H5T_NATIVE_UINT32);
    F(barged, H5T_NATIVE_UINT32);
    F(continuous, H5T_NATIVE_UINT32);
    F(underruns, H5T_NATIVE_UINT32);
    F(chunks, H5T_NATIVE_UINT32);
    F(ready_s, H5T_NATIVE_DOUBLE);
    F(speech_start_s, H5T_NATIVE_DOUBLE);
    F(first_audio_s, H5T_NATIVE_DOUBLE);
    F(last_audio_s, H5T_NATIVE_DOUBLE);
    F(audio_s, H5T_NATIVE_DOUBLE);
    F(heard_s, H5T_NATIVE_DOUBLE);
    F(max_underrun_s, H5T_NATIVE_DOUBLE);
    F(end_s, H5T_NATIVE_DOUBLE);
#undef F
    return t;
}

static hid_t turn_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_turn_record));
#define F(name, ht) H5Tinsert(t, #name, HOFFSET(cz_turn_record, name), ht)
    F(session, H5T_NATIVE_UINT64);
    F(req, H5T_NATIVE_UINT64);
    F(end_s, H5T_NATIVE_DOUBLE);
    F(turn, H5T_NATIVE_UINT32);
    F(cls, H5T_NATIVE_UINT32);
    F(outcome, H5T_NATIVE_UINT32);
    F(stage, H5T_NATIVE_UINT32);
#undef F
    return t;
}

static hid_t step_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_step_record));
#define F(name, ht) H5Tinsert(t, #name, HOFFSET(cz_step_record, name), ht)
    F(start_s, H5T_NATIVE_DOUBLE);
    F(end_s, H5T_NATIVE_DOUBLE);
    F(build_s, H5T_NATIVE_DOUBLE);
    F(kernel_s, H5T_NATIVE_DOUBLE);
    F(predicted_s, H5T_NATIVE_DOUBLE);
    F(prefill_tokens, H5T_NATIVE_UINT64);
    F(prefill_attn_ctx, H5T_NATIVE_UINT64);
    F(decode_ctx_tokens, H5T_NATIVE_UINT64);
    F(replica, H5T_NATIVE_UINT32);
    F(stage, H5T_NATIVE_UINT32);
    F(prefill_seqs, H5T_NATIVE_UINT32);
    F(decode_seqs, H5T_NATIVE_UINT32);
    F(sampled, H5T_NATIVE_UINT32);
    F(device, H5T_NATIVE_UINT32);
#undef F
    return t;
}

static hid_t frame_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_frame_record));
#define F(name, ht) H5Tinsert(t, #name, HOFFSET(cz_frame_record, name), ht)
    F(stream, H5T_NATIVE_UINT32);
    F(frame, H5T_NATIVE_UINT32);
    F(empty, H5T_NATIVE_UINT32);
    F(missed, H5T_NATIVE_UINT32);
    F(tick_s, H5T_NATIVE_DOUBLE);
    F(done_s, H5T_NATIVE_DOUBLE);
    F(latency_s, H5T_NATIVE_DOUBLE);
#undef F
    return t;
}

static hid_t itl_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(cz_wsample));
    H5Tinsert(t, "gap_s", HOFFSET(cz_wsample, v), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "count", HOFFSET(cz_wsample, w), H5T_NATIVE_UINT64);
    return t;
}

cz_status cz_results_write_h5(const char *path, const cz_metrics *m, const char *config_json,
                              const char *summary_json, uint64_t seed, cz_err *err)
{
    cz_status st = CZ_OK;
    bool created = false;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t rt = req_type(), tt = tl_type(), it = itl_type(), at = audio_type(), ft = frame_type();
    hid_t ut = turn_type(), st_t = step_type();
    h5_req_row *rows = cz_xmalloc((m->n_req ? m->n_req : 1) * sizeof *rows);
    for (uint64_t i = 0; i < m->n_req; i++) {
        const cz_req_record *r = &m->req[i];
        h5_req_row *w = &rows[i];
        memset(w, 0, sizeof *w);
        w->session = r->session;
        w->turn = r->turn;
        w->stage = r->stage;
        w->stream = r->stream;
        w->heard_tokens = r->heard_tokens;
        w->kv_load_s = r->kv_load_s;
        w->cls = r->cls;
        w->input_tokens = r->input_tokens;
        w->output_tokens = r->output_tokens;
        w->preemptions = r->preemptions;
        w->outcome = r->outcome;
        w->arrival_s = r->arrival_s;
        w->first_sched_s = r->first_sched_s;
        w->first_token_s = r->first_token_s;
        w->finish_s = r->finish_s;
        w->queue_wait_s = r->first_sched_s - r->arrival_s;
        w->ttft_s = r->first_token_s - r->arrival_s;
        w->e2el_s = r->finish_s - r->arrival_s;
        w->tpot_s = r->output_tokens > 1 && r->outcome == CZ_REQ_COMPLETED
                        ? (r->finish_s - r->first_token_s) / (double)(r->output_tokens - 1)
                        : NAN;
    }
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CZ_H5_CHECK(file, "create the file");
    created = true;
    CZ_H5_CHECK(cz_h5_write_table(file, "requests", rt, m->n_req, rows), "write /requests");
    CZ_H5_CHECK(cz_h5_write_table(file, "timeline", tt, m->n_tl, m->tl), "write /timeline");
    CZ_H5_CHECK(cz_h5_write_table(file, "itl", it, m->n_itl, m->itl), "write /itl");
    CZ_H5_CHECK(cz_h5_write_table(file, "audio", at, m->n_audio, m->audio), "write /audio");
    CZ_H5_CHECK(cz_h5_write_table(file, "frames", ft, m->n_frames, m->frames), "write /frames");
    CZ_H5_CHECK(cz_h5_write_table(file, "turns", ut, m->n_turns, m->turns), "write /turns");
    CZ_H5_CHECK(cz_h5_write_table(file, "steps", st_t, m->n_step_rows, m->step_rows),
                "write /steps");
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "config", config_json), "write the config attribute");
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "summary", summary_json), "write the summary attribute");
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "cadenza_version", cz_version()), "write the version");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "seed", seed), "write the seed");
    herr_t closed = H5Fclose(file);
    file = -1;
    CZ_H5_CHECK(closed, "close the file");
fail:
    if (file >= 0)
        H5Fclose(file);
    struct stat sb;
    if (st != CZ_OK && created && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        remove(path);
    H5Tclose(rt);
    H5Tclose(tt);
    H5Tclose(it);
    H5Tclose(at);
    H5Tclose(ft);
    H5Tclose(ut);
    H5Tclose(st_t);
    free(rows);
    return st;
}
