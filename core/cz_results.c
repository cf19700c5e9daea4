/* cz_results.c - see cz_results.h. */
#include "cz_results.h"

#include <math.h>
#include <stddef.h>
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
        outcome, cached_tokens;
    double arrival_s, sent_s, first_sched_s, first_token_s, finish_s, kv_load_s;
    double queue_wait_s, ttft_s, tpot_s, e2el_s;
} h5_req_row;

/* The enums the tables' code columns name. */
enum { E_AR_STAGE = 0, E_PIPE_STAGE, E_CLASS, E_OUTCOME, N_ENUMS };

#define COL(T, member, ctype, units) {#member, offsetof(T, member), ctype, 0, 0, units}
#define CODE(T, member, e) {#member, offsetof(T, member), CZ_H5_ENUM, 0, e, ""}
#define TABLE(name, desc, T, cols) {name, desc, sizeof(T), cols, CZ_ARRAY_LEN(cols)}

static const cz_h5_col req_cols[] = {
    COL(h5_req_row, session, CZ_H5_U64, ""),
    COL(h5_req_row, turn, CZ_H5_U32, ""),
    CODE(h5_req_row, stage, E_AR_STAGE),
    COL(h5_req_row, stream, CZ_H5_U32, ""),
    CODE(h5_req_row, cls, E_CLASS),
    COL(h5_req_row, input_tokens, CZ_H5_U32, "tokens"),
    COL(h5_req_row, output_tokens, CZ_H5_U32, "tokens"),
    COL(h5_req_row, heard_tokens, CZ_H5_U32, "tokens"),
    COL(h5_req_row, preemptions, CZ_H5_U32, "count"),
    CODE(h5_req_row, outcome, E_OUTCOME),
    COL(h5_req_row, cached_tokens, CZ_H5_U32, "tokens"),
    COL(h5_req_row, arrival_s, CZ_H5_F64, "s"),
    COL(h5_req_row, sent_s, CZ_H5_F64, "s"),
    COL(h5_req_row, first_sched_s, CZ_H5_F64, "s"),
    COL(h5_req_row, first_token_s, CZ_H5_F64, "s"),
    COL(h5_req_row, finish_s, CZ_H5_F64, "s"),
    COL(h5_req_row, kv_load_s, CZ_H5_F64, "s"),
    COL(h5_req_row, queue_wait_s, CZ_H5_F64, "s"),
    COL(h5_req_row, ttft_s, CZ_H5_F64, "s"),
    COL(h5_req_row, tpot_s, CZ_H5_F64, "s"),
    COL(h5_req_row, e2el_s, CZ_H5_F64, "s"),
};

static const cz_h5_col tl_cols[] = {
    COL(cz_timeline_row, t_s, CZ_H5_F64, "s"),
    CODE(cz_timeline_row, stage, E_AR_STAGE),
    COL(cz_timeline_row, replica, CZ_H5_U32, ""),
    COL(cz_timeline_row, kv_blocks_used, CZ_H5_U32, "blocks"),
    COL(cz_timeline_row, kv_blocks_idle, CZ_H5_U32, "blocks"),
    COL(cz_timeline_row, host_kv_tokens, CZ_H5_U64, "tokens"),
    COL(cz_timeline_row, running, CZ_H5_U32, "count"),
    COL(cz_timeline_row, waiting, CZ_H5_U32, "count"),
    COL(cz_timeline_row, batch_tokens, CZ_H5_U32, "tokens"),
    COL(cz_timeline_row, prefix_queries, CZ_H5_U64, "tokens"),
    COL(cz_timeline_row, prefix_hits, CZ_H5_U64, "tokens"),
    COL(cz_timeline_row, kv_pulled_tokens, CZ_H5_U64, "tokens"),
    COL(cz_timeline_row, kv_sent_tokens, CZ_H5_U64, "tokens"),
};

static const cz_h5_col itl_cols[] = {
    COL(cz_itl_record, gap_s, CZ_H5_F64, "s"),
    COL(cz_itl_record, count, CZ_H5_U64, "count"),
    CODE(cz_itl_record, stage, E_AR_STAGE),
};

static const cz_h5_col chunk_cols[] = {
    COL(cz_chunk_record, request, CZ_H5_U64, ""),
    COL(cz_chunk_record, index, CZ_H5_U32, ""),
    COL(cz_chunk_record, t_s, CZ_H5_F64, "s"),
};

static const cz_h5_col audio_cols[] = {
    COL(cz_audio_record, session, CZ_H5_U64, ""),
    COL(cz_audio_record, turn, CZ_H5_U32, ""),
    COL(cz_audio_record, barged, CZ_H5_U32, ""),
    COL(cz_audio_record, continuous, CZ_H5_U32, ""),
    COL(cz_audio_record, underruns, CZ_H5_U32, "count"),
    COL(cz_audio_record, chunks, CZ_H5_U32, "count"),
    COL(cz_audio_record, ready_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, speech_start_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, first_audio_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, last_audio_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, audio_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, heard_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, max_underrun_s, CZ_H5_F64, "s"),
    COL(cz_audio_record, end_s, CZ_H5_F64, "s"),
};

static const cz_h5_col frame_cols[] = {
    COL(cz_frame_record, stream, CZ_H5_U32, ""),
    COL(cz_frame_record, frame, CZ_H5_U32, ""),
    COL(cz_frame_record, empty, CZ_H5_U32, ""),
    COL(cz_frame_record, missed, CZ_H5_U32, ""),
    COL(cz_frame_record, tick_s, CZ_H5_F64, "s"),
    COL(cz_frame_record, done_s, CZ_H5_F64, "s"),
    COL(cz_frame_record, latency_s, CZ_H5_F64, "s"),
};

static const cz_h5_col gateway_cols[] = {
    COL(cz_gateway_row, t_s, CZ_H5_F64, "s"),
    COL(cz_gateway_row, cap, CZ_H5_U32, "count"),
    COL(cz_gateway_row, live, CZ_H5_U32, "count"),
};

static const cz_h5_col session_cols[] = {
    COL(cz_results_session, session, CZ_H5_U32, ""),
    COL(cz_results_session, turns, CZ_H5_U32, "count"),
    {"name", offsetof(cz_results_session, name), CZ_H5_STR, CZ_RESULTS_NAME_MAX, 0, ""},
};

static const cz_h5_col turn_cols[] = {
    COL(cz_turn_record, session, CZ_H5_U64, ""),
    COL(cz_turn_record, req, CZ_H5_U64, ""),
    COL(cz_turn_record, end_s, CZ_H5_F64, "s"),
    COL(cz_turn_record, turn, CZ_H5_U32, ""),
    CODE(cz_turn_record, cls, E_CLASS),
    CODE(cz_turn_record, outcome, E_OUTCOME),
    CODE(cz_turn_record, stage, E_AR_STAGE),
};

static const cz_h5_col step_cols[] = {
    COL(cz_step_record, start_s, CZ_H5_F64, "s"),
    COL(cz_step_record, end_s, CZ_H5_F64, "s"),
    COL(cz_step_record, build_s, CZ_H5_F64, "s"),
    COL(cz_step_record, kernel_s, CZ_H5_F64, "s"),
    COL(cz_step_record, predicted_s, CZ_H5_F64, "s"),
    COL(cz_step_record, prefill_tokens, CZ_H5_U64, "tokens"),
    COL(cz_step_record, prefill_attn_ctx, CZ_H5_U64, "tokens"),
    COL(cz_step_record, decode_ctx_tokens, CZ_H5_U64, "tokens"),
    COL(cz_step_record, replica, CZ_H5_U32, ""),
    CODE(cz_step_record, stage, E_PIPE_STAGE),
    COL(cz_step_record, prefill_seqs, CZ_H5_U32, "count"),
    COL(cz_step_record, decode_seqs, CZ_H5_U32, "count"),
    COL(cz_step_record, sampled, CZ_H5_U32, "tokens"),
    COL(cz_step_record, device, CZ_H5_U32, ""),
};

static const cz_h5_table req_table =
    TABLE("requests", "One turn (or a periodic stream's resident request) at one autoregressive "
                      "stage: its tokens, outcome, timestamps and latencies.",
          h5_req_row, req_cols);
static const cz_h5_table tl_table =
    TABLE("timeline", "The serving state of one stage replica at the start of a step: KV "
                      "blocks, host KV, running and waiting sequences, batch tokens; running "
                      "totals of prefix-cache queries and hits and of KV pulled and sent.",
          cz_timeline_row, tl_cols);
static const cz_h5_table itl_table =
    TABLE("itl", "`count` inter-token gaps of `gap_s` seconds at one autoregressive stage.",
          cz_itl_record, itl_cols);
static const cz_h5_table chunk_table =
    TABLE("chunks", "One streamed chunk with choices an HTTP client received: its request's "
                    "row in /requests, its place in the stream, its arrival time.",
          cz_chunk_record, chunk_cols);
static const cz_h5_table audio_table =
    TABLE("audio", "One spoken turn as the client heard it: when it was sent, its first and "
                   "last audio, the audio received and heard, underruns and barge-in.",
          cz_audio_record, audio_cols);
static const cz_h5_table frame_table =
    TABLE("frames", "One returned frame of a periodic stream: its tick, when its tokens were "
                    "done, the Step's wait, and whether it came back empty or late.",
          cz_frame_record, frame_cols);
static const cz_h5_table gateway_table =
    TABLE("gateway", "The session gateway of periodic streams whenever its admission cap "
                     "(4294967295: unbounded) or its live sessions changed.",
          cz_gateway_row, gateway_cols);
static const cz_h5_table session_table =
    TABLE("sessions", "One session of the workload: its index (the `session` of /requests "
                      "and /turns), its turns, and its id in the trace it came from (a "
                      "request's own id for traces of single requests).",
          cz_results_session, session_cols);
static const cz_h5_table turn_table =
    TABLE("turns", "One turn of the workload, in the order outcomes were decided: its class, "
                   "outcome, the stage that refused it and its row in /requests.",
          cz_turn_record, turn_cols);
static const cz_h5_table step_table =
    TABLE("steps", "One batch a real engine executed: its stage, shape, times on the run's "
                   "clock and the cost model's prediction.",
          cz_step_record, step_cols);

/* The tables a run streams (in cz_rows_kind order) and those written at the end. */
static const cz_h5_table *const streamed[CZ_N_ROWS_KINDS] = {
    [CZ_ROWS_REQUESTS] = &req_table,
    [CZ_ROWS_TURNS] = &turn_table,
    [CZ_ROWS_ITL] = &itl_table,
    [CZ_ROWS_TIMELINE] = &tl_table,
    [CZ_ROWS_CHUNKS] = &chunk_table,
};

struct cz_results_writer {
    char *path;
    hid_t file;
    const char *outcomes[CZ_REQ_N_OUTCOMES];
    cz_h5_enum enums[N_ENUMS];
    cz_results_stages stages;
    cz_h5_appender tab[CZ_N_ROWS_KINDS]; /* ds < 0: not created yet */
    h5_req_row *rows;                    /* CZ_METRICS_BATCH converted /requests rows */
    cz_h5_appender sessions;             /* /sessions once written to; ds < 0 before */
    cz_status st;                        /* the first failure of a put */
    cz_err err;
};

/* Every stage code names a stage (a bug otherwise). */
static void check_codes(const cz_results_writer *w, cz_rows_kind kind, const void *rows,
                        uint64_t n)
{
    const cz_results_stages *s = &w->stages;
    for (uint64_t i = 0; i < n; i++) {
        switch (kind) {
        case CZ_ROWS_REQUESTS: {
            const cz_req_record *r = (const cz_req_record *)rows + i;
            CZ_ASSERT(r->stage < s->n_ar && r->cls < 2 && r->outcome < CZ_REQ_N_OUTCOMES);
            break;
        }
        case CZ_ROWS_TURNS: {
            const cz_turn_record *t = (const cz_turn_record *)rows + i;
            CZ_ASSERT(t->stage < s->n_ar && t->cls < 2 && t->outcome < CZ_REQ_N_OUTCOMES);
            break;
        }
        case CZ_ROWS_ITL: CZ_ASSERT(((const cz_itl_record *)rows)[i].stage < s->n_ar); break;
        case CZ_ROWS_TIMELINE:
            CZ_ASSERT(((const cz_timeline_row *)rows)[i].stage < s->n_ar);
            break;
        case CZ_ROWS_CHUNKS: break;
        default: CZ_ASSERT(false);
        }
    }
}

static void req_row(const cz_req_record *r, h5_req_row *w)
{
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
    w->cached_tokens = r->cached_tokens;
    w->arrival_s = r->arrival_s;
    w->sent_s = r->arrival_s + r->send_lag_s;
    w->first_sched_s = r->first_sched_s;
    w->first_token_s = r->first_token_s;
    w->finish_s = r->finish_s;
    w->queue_wait_s = r->first_sched_s - r->arrival_s;
    w->ttft_s = r->first_token_s - w->sent_s;
    w->e2el_s = r->finish_s - w->sent_s;
    w->tpot_s = r->output_tokens > 1 && r->outcome == CZ_REQ_COMPLETED
                    ? (r->finish_s - r->first_token_s) / (double)(r->output_tokens - 1)
                    : NAN;
}

/* Appends rows of a streamed table, creating it on the first (`last`: no more will come,
 * so a table that starts here is chunked by its row count, as one written at once). */
static cz_status put(cz_results_writer *w, cz_rows_kind kind, const void *rows, uint64_t n,
                     bool last)
{
    cz_status st = CZ_OK;
    cz_err *err = &w->err;
    const char *path = w->path;
    if (w->st != CZ_OK)
        return w->st;
    check_codes(w, kind, rows, n);
    char what[64];
    snprintf(what, sizeof what, "write /%s", streamed[kind]->name);
    cz_h5_appender *a = &w->tab[kind];
    if (a->ds < 0)
        CZ_H5_CHECK(cz_h5_table_open(w->file, streamed[kind], w->enums, N_ENUMS,
                                     last ? cz_h5_chunk_rows(n) : CZ_H5_CHUNK_ROWS, a),
                    what);
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done;
        const void *src = (const char *)rows + done * streamed[kind]->row_size;
        if (kind == CZ_ROWS_REQUESTS) {
            if (k > CZ_METRICS_BATCH)
                k = CZ_METRICS_BATCH;
            for (uint64_t i = 0; i < k; i++)
                req_row((const cz_req_record *)rows + done + i, &w->rows[i]);
            src = w->rows;
        }
        CZ_H5_CHECK(cz_h5_table_append(a, k, src), what);
        done += k;
    }
fail:
    if (st != CZ_OK)
        w->st = st;
    return st;
}

static void sink_put(void *ctx, cz_rows_kind kind, const void *rows, uint64_t n)
{
    (void)put(ctx, kind, rows, n, false);
}

cz_status cz_results_open(const char *path, const cz_results_stages *stages,
                          cz_results_writer **out, cz_err *err)
{
    CZ_ASSERT(stages->n_pipe >= 1 && stages->n_pipe <= CZ_RESULTS_MAX_STAGES);
    CZ_ASSERT(stages->n_ar >= 1 && stages->n_ar <= CZ_RESULTS_MAX_STAGES);
    *out = NULL;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    cz_status st = cz_h5_check_filters(path, err);
    if (st != CZ_OK)
        return st;
    cz_results_writer *w = cz_xcalloc(1, sizeof *w);
    w->path = cz_xstrdup(path);
    w->stages = *stages;
    for (uint32_t o = 0; o < CZ_REQ_N_OUTCOMES; o++)
        w->outcomes[o] = cz_req_outcome_name(o);
    static const char *const classes[] = {"rt", "be"};
    w->enums[E_AR_STAGE] = (cz_h5_enum){w->stages.ar, NULL, w->stages.n_ar};
    w->enums[E_PIPE_STAGE] = (cz_h5_enum){w->stages.pipe, NULL, w->stages.n_pipe};
    w->enums[E_CLASS] = (cz_h5_enum){classes, NULL, 2};
    w->enums[E_OUTCOME] = (cz_h5_enum){w->outcomes, NULL, CZ_REQ_N_OUTCOMES};
    for (size_t k = 0; k < CZ_N_ROWS_KINDS; k++)
        w->tab[k].ds = w->tab[k].type = -1;
    w->sessions.ds = w->sessions.type = -1;
    w->rows = cz_xmalloc(CZ_METRICS_BATCH * sizeof *w->rows);
    w->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (w->file < 0) {
        st = cz_err_set(err, CZ_EIO, "%s: HDF5 failed to create the file (%s:%d)", path,
                        __FILE__, __LINE__);
        cz_results_discard(w);
        return st;
    }
    *out = w;
    return CZ_OK;
}

cz_status cz_results_put_sessions(cz_results_writer *w, const cz_results_session *rows,
                                  uint64_t n, cz_err *err)
{
    const char *path = w->path;
    cz_status st = w->st;
    if (st != CZ_OK) {
        *err = w->err;
        return st;
    }
    if (w->sessions.ds < 0)
        CZ_H5_CHECK(cz_h5_table_open(w->file, &session_table, w->enums, N_ENUMS,
                                     CZ_H5_CHUNK_ROWS, &w->sessions),
                    "write /sessions");
    CZ_H5_CHECK(cz_h5_table_append(&w->sessions, n, rows), "write /sessions");
    return CZ_OK;
fail:
    w->st = st;
    if (err)
        w->err = *err;
    return st;
}

cz_rows_sink cz_results_sink(cz_results_writer *w)
{
    return (cz_rows_sink){.ctx = w, .put = sink_put};
}

void cz_results_discard(cz_results_writer *w)
{
    if (!w)
        return;
    for (size_t k = 0; k < CZ_N_ROWS_KINDS; k++)
        cz_h5_table_close(&w->tab[k]);
    cz_h5_table_close(&w->sessions);
    if (w->file >= 0) {
        H5Fclose(w->file);
        struct stat sb;
        if (stat(w->path, &sb) == 0 && S_ISREG(sb.st_mode))
            remove(w->path);
    }
    free(w->rows);
    free(w->path);
    free(w);
}

cz_status cz_results_close(cz_results_writer *w, const cz_metrics *m, const char *config_json,
                           const char *summary_json, uint64_t seed, cz_err *err)
{
    CZ_ASSERT(m->finished);
    const char *path = w->path;
    cz_status st = w->st;
    if (st != CZ_OK) {
        *err = w->err;
        goto fail;
    }
    if (!m->streaming) {
        /* a recorder that held everything: its rows now, each table at once */
        const struct {
            cz_rows_kind kind;
            uint64_t n;
            const void *rows;
        } held[] = {
            {CZ_ROWS_REQUESTS, m->n_req, m->req},
            {CZ_ROWS_TIMELINE, m->n_tl, m->tl},
            {CZ_ROWS_ITL, m->n_itl, m->itl},
            {CZ_ROWS_TURNS, m->n_turns, m->turns},
            {CZ_ROWS_CHUNKS, m->n_chunk_rows, m->chunk_rows},
        };
        for (size_t i = 0; i < CZ_ARRAY_LEN(held); i++)
            if ((held[i].n || held[i].kind != CZ_ROWS_CHUNKS) &&
                (st = put(w, held[i].kind, held[i].rows, held[i].n, true)) != CZ_OK) {
                *err = w->err;
                goto fail;
            }
    }
    /* every table, empty or not, but /chunks, which only an HTTP client's runs have */
    for (size_t k = 0; k < CZ_N_ROWS_KINDS; k++)
        if (w->tab[k].ds < 0 && k != CZ_ROWS_CHUNKS &&
            (st = put(w, (cz_rows_kind)k, NULL, 0, true)) != CZ_OK) {
            *err = w->err;
            goto fail;
        }
    for (size_t k = 0; k < CZ_N_ROWS_KINDS; k++)
        CZ_H5_CHECK(cz_h5_table_close(&w->tab[k]), "close a table");
    CZ_H5_CHECK(cz_h5_table_close(&w->sessions), "close /sessions");
    for (uint64_t i = 0; i < m->n_step_rows; i++)
        CZ_ASSERT(m->step_rows[i].stage < w->stages.n_pipe);
    const struct {
        const cz_h5_table *t;
        uint64_t n;
        const void *rows;
    } tables[] = {
        {&audio_table, m->n_audio, m->audio},
        {&frame_table, m->n_frames, m->frames},
        {&step_table, m->n_step_rows, m->step_rows},
        {&gateway_table, m->n_gateway, m->gateway},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(tables); i++) {
        char what[64];
        snprintf(what, sizeof what, "write /%s", tables[i].t->name);
        CZ_H5_CHECK(cz_h5_write_table(w->file, tables[i].t, w->enums, N_ENUMS, tables[i].n,
                                      tables[i].rows),
                    what);
    }
    hid_t file = w->file;
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "config", config_json), "write the config attribute");
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "summary", summary_json), "write the summary attribute");
    CZ_H5_CHECK(cz_h5_write_str_attr(file, "cadenza_version", cz_version()), "write the version");
    CZ_H5_CHECK(cz_h5_write_u64_attr(file, "seed", seed), "write the seed");
    herr_t closed = H5Fclose(w->file);
    w->file = -1;
    CZ_H5_CHECK(closed, "close the file");
    cz_results_discard(w);
    return CZ_OK;
fail:
    if (w->file < 0) {
        /* the close itself failed: the file is half-written */
        struct stat sb;
        if (stat(w->path, &sb) == 0 && S_ISREG(sb.st_mode))
            remove(w->path);
    }
    cz_results_discard(w);
    return st;
}

cz_status cz_results_write_h5(const char *path, const cz_metrics *m,
                              const cz_results_stages *stages, const char *config_json,
                              const char *summary_json, uint64_t seed, cz_err *err)
{
    cz_results_writer *w;
    cz_status st = cz_results_open(path, stages, &w, err);
    if (st != CZ_OK)
        return st;
    return cz_results_close(w, m, config_json, summary_json, seed, err);
}
