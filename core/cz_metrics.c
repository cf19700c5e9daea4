/* cz_metrics.c - see cz_metrics.h. Metric definitions are in docs/metrics.md. */
#include "cz_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

static void acc_init(cz_metrics *m)
{
    for (size_t c = 0; c < CZ_ARRAY_LEN(m->acc); c++) {
        cz_req_acc *a = &m->acc[c];
        memset(a, 0, sizeof *a);
        a->first_arrival_s = INFINITY;
        a->last_finish_s = -INFINITY;
        cz_distacc_init(&a->ttft, m->pct_mode, false);
        cz_distacc_init(&a->tpot, m->pct_mode, false);
        cz_distacc_init(&a->e2el, m->pct_mode, false);
        cz_distacc_init(&a->qw, m->pct_mode, false);
        cz_distacc_init(&a->lag, m->pct_mode, false);
    }
}

static void acc_free(cz_metrics *m)
{
    for (size_t c = 0; c < CZ_ARRAY_LEN(m->acc); c++) {
        cz_distacc_free(&m->acc[c].ttft);
        cz_distacc_free(&m->acc[c].tpot);
        cz_distacc_free(&m->acc[c].e2el);
        cz_distacc_free(&m->acc[c].qw);
        cz_distacc_free(&m->acc[c].lag);
    }
    for (uint32_t i = 0; i < m->n_stage_acc; i++)
        cz_distacc_free(&m->stage_acc[i].kv_reload_ms);
    free(m->stage_acc);
    m->stage_acc = NULL;
    m->n_stage_acc = 0;
}

/* ---- vLLM's peaks counted as turns complete (cz_metrics_settled) ---- */

/* The one-second bucket of t_s from the origin t0 (t_s >= t0). */
static uint64_t peak_bucket(double t_s, double t0)
{
    double d = t_s - t0;
    CZ_ASSERT(d >= 0.0 && d < 9.0e18);
    return (uint64_t)d;
}

static int peak_cmp(const void *a, const void *b)
{
    uint64_t x = ((const cz_peak_cell *)a)->key, y = ((const cz_peak_cell *)b)->key;
    return x < y ? -1 : x > y;
}

/* The slot of `key` in a table of `cap` slots: where it is, or the empty slot for it. */
static size_t peak_slot(const cz_peak_cell *cells, size_t cap, uint64_t key)
{
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
    while (cells[h].key != 0 && cells[h].key != key)
        h = (h + 1) & (cap - 1);
    return h;
}

/* Folds the held buckets below the watermark into the running values, then rebuilds the
 * table with what is left, at a size that leaves it at most a quarter full (each rebuild
 * is paid for by the inserts since the last). */
static void peak_rebuild(cz_metrics *m)
{
    size_t n = 0, keep = 0;
    cz_peak_cell *folded = NULL;
    if (m->peak_w > m->peak_folded) {
        for (size_t i = 0; i < m->peak_cap; i++)
            if (m->peak_cells[i].key != 0 && m->peak_cells[i].key - 1 < m->peak_w)
                n++;
        folded = cz_xmalloc((n ? n : 1) * sizeof *folded);
        n = 0;
        for (size_t i = 0; i < m->peak_cap; i++)
            if (m->peak_cells[i].key != 0 && m->peak_cells[i].key - 1 < m->peak_w)
                folded[n++] = m->peak_cells[i];
        qsort(folded, n, sizeof *folded, peak_cmp);
        uint64_t tok_max = m->n_tok_max ? m->peak_tok_max[m->n_tok_max - 1].tok : 0;
        for (size_t i = 0; i < n; i++) {
            m->peak_run += folded[i].conc;
            if (m->peak_run > (int64_t)m->peak_conc_max)
                m->peak_conc_max = (uint64_t)m->peak_run;
            if (folded[i].tok > tok_max) {
                tok_max = folded[i].tok;
                cz_grow((void **)&m->peak_tok_max, &m->cap_tok_max, m->n_tok_max + 1,
                        sizeof *m->peak_tok_max);
                m->peak_tok_max[m->n_tok_max++] = (cz_peak_cell){folded[i].key, 0, tok_max};
            }
        }
        free(folded);
        m->peak_folded = m->peak_w;
    }
    keep = m->n_peak - n;
    size_t cap = m->peak_cap ? m->peak_cap : 64;
    while (4 * (keep + 1) > cap)
        cap *= 2;
    cz_peak_cell *cells = cz_xcalloc(cap, sizeof *cells);
    for (size_t i = 0; i < m->peak_cap; i++) {
        const cz_peak_cell *c = &m->peak_cells[i];
        if (c->key != 0 && c->key - 1 >= m->peak_folded)
            cells[peak_slot(cells, cap, c->key)] = *c;
    }
    free(m->peak_cells);
    m->peak_hot = NULL;
    m->peak_cells = cells;
    m->peak_cap = cap;
    m->n_peak = keep;
}

/* Bucket k's cell, added (zeroed) when it is not held. */
static cz_peak_cell *peak_cell(cz_metrics *m, uint64_t k)
{
    CZ_ASSERT(k >= m->peak_folded); /* a bucket settled as final changed */
    if (m->peak_hot && m->peak_hot->key == k + 1)
        return m->peak_hot;
    if (2 * (m->n_peak + 1) > m->peak_cap)
        peak_rebuild(m);
    size_t h = peak_slot(m->peak_cells, m->peak_cap, k + 1);
    if (m->peak_cells[h].key == 0) {
        m->peak_cells[h] = (cz_peak_cell){k + 1, 0, 0};
        m->n_peak++;
    }
    return m->peak_hot = &m->peak_cells[h];
}

/* A completed turn from start_s to end_s, in the buckets from the origin (as
 * cz_metrics_peaks counts it). */
static void peak_span(cz_metrics *m, double start_s, double end_s)
{
    CZ_ASSERT(start_s >= m->peaks_t0 && start_s <= end_s);
    peak_cell(m, peak_bucket(start_s, m->peaks_t0))->conc++;
    peak_cell(m, peak_bucket(end_s, m->peaks_t0) + 1)->conc--;
    if (end_s > m->peaks_t1)
        m->peaks_t1 = end_s;
}

/* `count` tokens at t_s (before the origin they do not count). */
static void peak_tokens(cz_metrics *m, double t_s, uint64_t count)
{
    if (t_s < m->peaks_t0)
        return;
    peak_cell(m, peak_bucket(t_s, m->peaks_t0))->tok += count;
}

void cz_metrics_settled(cz_metrics *m, double t_s)
{
    if (m->peaks_fixed) {
        /* every bucket before t_s's is final */
        if (t_s > m->peaks_t0) {
            uint64_t w = peak_bucket(t_s, m->peaks_t0);
            if (w > m->peak_w)
                m->peak_w = w;
        }
        return;
    }
    if (m->n_spans == 0)
        return;
    if (t_s < m->peaks_t0)
        return;
    m->peaks_fixed = true;
    m->peaks_t1 = -INFINITY;
    for (uint64_t i = 0; i < m->n_spans; i++)
        peak_span(m, m->spans[i].start_s, m->spans[i].end_s);
    for (uint64_t i = 0; i < m->n_tokens; i++)
        peak_tokens(m, m->tokens[i].v, m->tokens[i].w);
    free(m->spans);
    free(m->tokens);
    m->spans = NULL;
    m->tokens = NULL;
    m->n_spans = m->cap_spans = m->n_tokens = m->cap_tokens = 0;
    cz_metrics_settled(m, t_s);
}

void cz_metrics_init(cz_metrics *m, double timeline_interval_s, uint64_t expected_requests)
{
    CZ_ASSERT(timeline_interval_s >= 0.0);
    memset(m, 0, sizeof *m);
    m->timeline_interval_s = timeline_interval_s;
    if (expected_requests) {
        m->req = cz_xcalloc(expected_requests, sizeof *m->req);
        m->cap_req = expected_requests;
    }
    acc_init(m);
    m->per_class = true;
}

void cz_metrics_track_classes(cz_metrics *m, bool per_class)
{
    CZ_ASSERT(m->n_req == 0 && m->turns_total == 0);
    m->per_class = per_class;
}

void cz_metrics_free(cz_metrics *m)
{
    free(m->turns);
    free(m->audio);
    free(m->frames);
    free(m->gateway);
    free(m->req);
    for (size_t k = 0; k < m->cap_chunks; k++)
        free(m->chunks[k]);
    free(m->chunks);
    free(m->spare);
    free(m->itl);
    free(m->chunk_rows);
    for (uint32_t i = 0; i < m->n_itl_ms; i++)
        cz_distacc_free(&m->itl_ms[i]);
    free(m->itl_ms);
    acc_free(m);
    free(m->spans);
    free(m->tokens);
    free(m->peak_cells);
    free(m->peak_tok_max);
    free(m->tl);
    free(m->step_rows);
    memset(m, 0, sizeof *m);
}

void cz_metrics_stream(cz_metrics *m, const cz_rows_sink *sink)
{
    CZ_ASSERT(!m->streaming && m->n_req == 0 && m->turns_total == 0 && m->n_itl == 0 &&
              m->n_tl == 0);
    m->streaming = true;
    if (sink)
        m->sink = *sink;
    free(m->req);
    m->req = NULL;
    m->cap_req = 0;
}

bool cz_metrics_rows_dropped(const cz_metrics *m)
{
    return m->streaming && !m->sink.put;
}

void cz_metrics_set_slo(cz_metrics *m, const cz_slo *slo)
{
    CZ_ASSERT(m->turns_total == 0);
    m->slo = *slo;
}

void cz_metrics_add_step(cz_metrics *m, const cz_step_record *r)
{
    size_t cap = m->cap_step_rows;
    cz_grow((void **)&m->step_rows, &cap, m->n_step_rows + 1, sizeof *m->step_rows);
    m->cap_step_rows = cap;
    m->step_rows[m->n_step_rows++] = *r;
}

static void put_rows(cz_metrics *m, cz_rows_kind kind, const void *rows, uint64_t n)
{
    if (n && m->sink.put)
        m->sink.put(m->sink.ctx, kind, rows, n);
}

static cz_stage_acc *stage_acc(cz_metrics *m, uint32_t stage)
{
    if (stage >= m->n_stage_acc) {
        /* once per stage of the run */
        m->stage_acc = cz_xrealloc(m->stage_acc, (size_t)stage + 1, sizeof *m->stage_acc);
        for (uint32_t i = m->n_stage_acc; i <= stage; i++) {
            memset(&m->stage_acc[i], 0, sizeof m->stage_acc[i]);
            cz_distacc_init(&m->stage_acc[i].kv_reload_ms, m->pct_mode, false);
        }
        m->n_stage_acc = stage + 1;
    }
    return &m->stage_acc[stage];
}

void cz_metrics_prefix_caching(cz_metrics *m, uint32_t stage)
{
    stage_acc(m, stage)->prefix_caching = true;
}

void cz_metrics_prefix_lookup(cz_metrics *m, uint32_t stage, uint64_t queries, uint64_t hits,
                              bool preempted)
{
    cz_stage_acc *sa = stage_acc(m, stage);
    CZ_ASSERT(sa->prefix_caching && hits <= queries);
    if (preempted) {
        sa->pc_preempted_queries += queries;
        sa->pc_preempted_hits += hits;
    } else {
        sa->pc_queries += queries;
        sa->pc_hits += hits;
    }
}

/* A record leaves the recorder: what the stage summaries, the queue wait and the
 * duration take from it (in request id order, as the summaries always read them). */
static void summarize_record(cz_metrics *m, const cz_req_record *r)
{
    if (r->outcome == CZ_REQ_PENDING) {
        if (m->pending_left++ == 0)
            m->first_pending = *r;
    }
    if (!r->stream && r->outcome != CZ_REQ_REJECTED) {
        cz_stage_acc *sa = stage_acc(m, r->stage);
        sa->turns++;
        sa->generated_tokens += r->output_tokens;
        sa->heard_tokens += r->outcome == CZ_REQ_ABORTED ? r->heard_tokens : r->output_tokens;
        sa->kv_reload_total_s += r->kv_load_s;
        cz_distacc_add(&sa->kv_reload_ms, r->kv_load_s * 1e3, 1);
    }
    if (r->stage != 0 || r->stream || r->cls >= 2)
        return;
    m->has_class[r->cls] = true;
    cz_req_acc *acc[2] = {&m->acc[2], &m->acc[r->cls]};
    for (size_t k = 0; k < (m->per_class ? 2u : 1u); k++) {
        if (r->arrival_s < acc[k]->first_arrival_s)
            acc[k]->first_arrival_s = r->arrival_s;
        if (!isnan(r->first_sched_s))
            cz_distacc_add(&acc[k]->qw, (r->first_sched_s - r->arrival_s) * 1e3, 1);
        if (m->send_lags && r->outcome != CZ_REQ_UNFINISHED)
            cz_distacc_add(&acc[k]->lag, r->send_lag_s * 1e3, 1);
    }
}

static bool retirable(const cz_req_record *r)
{
    return !r->held && r->outcome != CZ_REQ_PENDING &&
           (r->stage != 0 || r->stream || r->turn_outcome != CZ_REQ_PENDING);
}

/* Retires records in id order while the next one may go (every one when `all`): each is
 * summarized, and when streaming a chunk whose records have all retired is handed to the
 * sink and freed. */
static void retire(cz_metrics *m, bool all)
{
    while (m->retired < m->n_req) {
        cz_req_record *r = m->streaming
                               ? &m->chunks[m->retired / CZ_METRICS_BATCH]
                                           [m->retired % CZ_METRICS_BATCH]
                               : &m->req[m->retired];
        if (!all && !retirable(r))
            break;
        summarize_record(m, r);
        m->retired++;
        if (m->streaming && m->retired % CZ_METRICS_BATCH == 0) {
            size_t k = m->retired / CZ_METRICS_BATCH - 1;
            put_rows(m, CZ_ROWS_REQUESTS, m->chunks[k], CZ_METRICS_BATCH);
            if (m->spare)
                free(m->chunks[k]);
            else
                m->spare = m->chunks[k];
            m->chunks[k] = NULL;
        }
    }
}

uint64_t cz_metrics_add_request(cz_metrics *m, const cz_req_record *r)
{
    CZ_ASSERT(!m->finished);
    retire(m, false);
    cz_req_record *w;
    if (!m->streaming) {
        size_t cap = m->cap_req;
        cz_grow((void **)&m->req, &cap, m->n_req + 1, sizeof *m->req);
        m->cap_req = cap;
        w = &m->req[m->n_req];
    } else {
        size_t k = m->n_req / CZ_METRICS_BATCH;
        if (k >= m->cap_chunks) {
            /* a pointer per chunk ever started: 8 bytes per CZ_METRICS_BATCH requests */
            size_t cap = m->cap_chunks;
            cz_grow((void **)&m->chunks, &cap, k + 1, sizeof *m->chunks);
            memset(m->chunks + m->cap_chunks, 0, (cap - m->cap_chunks) * sizeof *m->chunks);
            m->cap_chunks = cap;
        }
        if (!m->chunks[k]) {
            m->chunks[k] = m->spare ? m->spare
                                    : cz_xmalloc(CZ_METRICS_BATCH * sizeof *m->chunks[k]);
            m->spare = NULL;
        }
        w = &m->chunks[k][m->n_req % CZ_METRICS_BATCH];
    }
    *w = *r;
    w->held = 1;
    w->turn_outcome = CZ_REQ_PENDING;
    return m->n_req++;
}

void cz_metrics_release(cz_metrics *m, uint64_t id)
{
    cz_metrics_req(m, id)->held = 0;
    retire(m, false);
}

const char *cz_req_outcome_name(uint32_t outcome)
{
    static const char *const names[CZ_REQ_N_OUTCOMES] = {
        "pending", "completed", "rejected", "aborted", "failed", "unfinished"};
    return outcome < CZ_REQ_N_OUTCOMES ? names[outcome] : "unknown";
}

static bool meets_slo(const cz_slo *slo, double ttft_ms, double tpot_ms, double e2el_ms);

/* A turn's outcome is decided: its counts, and a completed turn's latencies from its
 * record at the first stage (final by now), in the order outcomes are decided. */
static void summarize_turn(cz_metrics *m, const cz_turn_record *t)
{
    CZ_ASSERT(t->cls < 2);
    cz_req_acc *acc[2] = {&m->acc[2], &m->acc[t->cls]};
    size_t n_acc = m->per_class ? 2 : 1;
    for (size_t k = 0; k < n_acc; k++) {
        acc[k]->turns++;
        acc[k]->by_outcome[t->outcome]++;
    }
    if (t->req == UINT64_MAX)
        return;
    cz_req_record *r = cz_metrics_req(m, t->req);
    CZ_ASSERT(r->turn_outcome == CZ_REQ_PENDING);
    r->turn_outcome = t->outcome;
    if (t->outcome != CZ_REQ_COMPLETED)
        return;
    const double sent = r->arrival_s + r->send_lag_s;
    double t_ms = (r->first_token_s - sent) * 1e3;
    double e_ms = (r->finish_s - sent) * 1e3;
    double p_ms = NAN;
    if (r->output_tokens > 1)
        p_ms = (e_ms - t_ms) / (double)(r->output_tokens - 1);
    bool good = meets_slo(&m->slo, t_ms, isnan(p_ms) ? 0.0 : p_ms, e_ms);
    for (size_t k = 0; k < n_acc; k++) {
        acc[k]->total_input_tokens += r->input_tokens;
        acc[k]->total_output_tokens += r->output_tokens;
        if (r->finish_s > acc[k]->last_finish_s)
            acc[k]->last_finish_s = r->finish_s;
        cz_distacc_add(&acc[k]->ttft, t_ms, 1);
        cz_distacc_add(&acc[k]->e2el, e_ms, 1);
        if (!isnan(p_ms))
            cz_distacc_add(&acc[k]->tpot, p_ms, 1);
        acc[k]->good += good;
    }
    if (m->peaks_fixed) {
        peak_span(m, sent, r->finish_s);
        return;
    }
    if (m->n_spans == 0 || sent < m->peaks_t0)
        m->peaks_t0 = sent; /* the earliest so far, until it is settled */
    size_t cap = m->cap_spans;
    cz_grow((void **)&m->spans, &cap, m->n_spans + 1, sizeof *m->spans);
    m->cap_spans = cap;
    m->spans[m->n_spans++] = (cz_span){sent, r->finish_s};
}

void cz_metrics_add_turn(cz_metrics *m, const cz_turn_record *t)
{
    CZ_ASSERT(t->outcome != CZ_REQ_PENDING && t->outcome < CZ_REQ_N_OUTCOMES);
    CZ_ASSERT(!m->finished);
    summarize_turn(m, t);
    if (m->streaming && m->n_turns == CZ_METRICS_BATCH) {
        put_rows(m, CZ_ROWS_TURNS, m->turns, m->n_turns);
        m->n_turns = 0;
    }
    size_t cap = m->cap_turns;
    cz_grow((void **)&m->turns, &cap, m->n_turns + 1, sizeof *m->turns);
    m->cap_turns = cap;
    m->turns[m->n_turns++] = *t;
    m->turns_total++;
    retire(m, false);
}

void cz_metrics_finish(cz_metrics *m)
{
    CZ_ASSERT(!m->finished);
    retire(m, true);
    m->finished = true;
    if (!m->streaming)
        return;
    if (m->n_req % CZ_METRICS_BATCH) {
        size_t k = m->n_req / CZ_METRICS_BATCH;
        put_rows(m, CZ_ROWS_REQUESTS, m->chunks[k], m->n_req % CZ_METRICS_BATCH);
        free(m->chunks[k]);
        m->chunks[k] = NULL;
    }
    put_rows(m, CZ_ROWS_TURNS, m->turns, m->n_turns);
    m->n_turns = 0;
    put_rows(m, CZ_ROWS_ITL, m->itl, m->n_itl);
    m->n_itl = 0;
    put_rows(m, CZ_ROWS_TIMELINE, m->tl, m->n_tl);
    m->n_tl = 0;
    put_rows(m, CZ_ROWS_CHUNKS, m->chunk_rows, m->n_chunk_rows);
    m->n_chunk_rows = 0;
}

cz_status cz_metrics_check(const cz_metrics *m, cz_err *err)
{
    CZ_ASSERT(m->finished);
    const cz_accounting *a = &m->acct;
    const uint64_t *by = m->acc[2].by_outcome;
    if (by[CZ_REQ_PENDING] != 0 || m->turns_total != a->requests)
        return cz_err_set(err, CZ_EINTERNAL,
                          "accounting: %llu requests in the workload, but completed %llu + "
                          "aborted %llu + rejected %llu + failed %llu + unfinished %llu = %llu",
                          (unsigned long long)a->requests, (unsigned long long)by[CZ_REQ_COMPLETED],
                          (unsigned long long)by[CZ_REQ_ABORTED],
                          (unsigned long long)by[CZ_REQ_REJECTED],
                          (unsigned long long)by[CZ_REQ_FAILED],
                          (unsigned long long)by[CZ_REQ_UNFINISHED],
                          (unsigned long long)m->turns_total);
    if (m->pending_left)
        return cz_err_set(err, CZ_EINTERNAL,
                          "accounting: the record of turn %u of session %llu at stage %u "
                          "is still pending after the run (%llu records in all)",
                          m->first_pending.turn, (unsigned long long)m->first_pending.session,
                          m->first_pending.stage, (unsigned long long)m->pending_left);
    uint64_t rows = m->n_frames;
    if (rows + a->frames_rejected + a->frames_unfinished != a->frames)
        return cz_err_set(err, CZ_EINTERNAL,
                          "accounting: %llu frames in the workload, but %llu returned + %llu "
                          "rejected + %llu unfinished = %llu",
                          (unsigned long long)a->frames, (unsigned long long)rows,
                          (unsigned long long)a->frames_rejected,
                          (unsigned long long)a->frames_unfinished,
                          (unsigned long long)(rows + a->frames_rejected + a->frames_unfinished));
    uint64_t ended = a->streams_completed + a->streams_rejected + a->streams_unfinished;
    if (ended != a->streams)
        return cz_err_set(err, CZ_EINTERNAL,
                          "accounting: %llu streams in the workload, but completed %llu + "
                          "rejected %llu + unfinished %llu = %llu",
                          (unsigned long long)a->streams,
                          (unsigned long long)a->streams_completed,
                          (unsigned long long)a->streams_rejected,
                          (unsigned long long)a->streams_unfinished, (unsigned long long)ended);
    return CZ_OK;
}

uint64_t cz_metrics_add_audio(cz_metrics *m, const cz_audio_record *r)
{
    size_t cap = m->cap_audio;
    cz_grow((void **)&m->audio, &cap, m->n_audio + 1, sizeof *m->audio);
    m->cap_audio = cap;
    m->audio[m->n_audio] = *r;
    return m->n_audio++;
}

void cz_metrics_gateway(cz_metrics *m, double t_s, uint32_t cap, uint32_t live)
{
    if (m->n_gateway > 0) {
        const cz_gateway_row *last = &m->gateway[m->n_gateway - 1];
        if (last->cap == cap && last->live == live)
            return;
    }
    size_t c = m->cap_gateway;
    cz_grow((void **)&m->gateway, &c, m->n_gateway + 1, sizeof *m->gateway);
    m->cap_gateway = c;
    m->gateway[m->n_gateway++] = (cz_gateway_row){.t_s = t_s, .cap = cap, .live = live};
}

uint64_t cz_metrics_add_frame(cz_metrics *m, const cz_frame_record *r)
{
    size_t cap = m->cap_frames;
    cz_grow((void **)&m->frames, &cap, m->n_frames + 1, sizeof *m->frames);
    m->cap_frames = cap;
    m->frames[m->n_frames] = *r;
    return m->n_frames++;
}

void cz_metrics_add_tokens(cz_metrics *m, double t_s, uint64_t count)
{
    if (count == 0)
        return;
    if (m->peaks_fixed) {
        peak_tokens(m, t_s, count);
        return;
    }
    if (m->n_tokens && m->tokens[m->n_tokens - 1].v == t_s) {
        m->tokens[m->n_tokens - 1].w += count;
        return;
    }
    size_t cap = m->cap_tokens;
    cz_grow((void **)&m->tokens, &cap, m->n_tokens + 1, sizeof *m->tokens);
    m->cap_tokens = cap;
    m->tokens[m->n_tokens++] = (cz_wsample){t_s, count};
}

void cz_metrics_add_tokens_steps(cz_metrics *m, const double *t_s, size_t n, uint64_t count)
{
    if (!m->peaks_fixed || count == 0) {
        for (size_t k = 0; k < n; k++)
            cz_metrics_add_tokens(m, t_s[k], count);
        return;
    }
    /* peak_tokens, one bucket at a time */
    uint64_t bucket = 0, held = 0;
    for (size_t k = 0; k < n; k++) {
        if (t_s[k] < m->peaks_t0)
            continue;
        uint64_t b = peak_bucket(t_s[k], m->peaks_t0);
        if (held && b != bucket) {
            peak_cell(m, bucket)->tok += held;
            held = 0;
        }
        bucket = b;
        held += count;
    }
    if (held)
        peak_cell(m, bucket)->tok += held;
}

/* Sweeps cells sorted by key (a key may repeat) from `run` turns in flight: the most in
 * flight after any bucket, and the most tokens of one bucket, over buckets below nb. */
static void peak_sweep(const cz_peak_cell *c, size_t n, uint64_t nb, int64_t run,
                       uint64_t *conc_max, uint64_t *tok_max)
{
    for (size_t i = 0; i < n;) {
        uint64_t key = c[i].key, tok = 0;
        if (key - 1 >= nb)
            break;
        for (; i < n && c[i].key == key; i++) {
            run += c[i].conc;
            tok += c[i].tok;
        }
        if (run > (int64_t)*conc_max)
            *conc_max = (uint64_t)run;
        if (tok > *tok_max)
            *tok_max = tok;
    }
}

/* vLLM's benchmarks/serve.py (calculate_metrics): buckets of one second from the earliest
 * start of a successful request, `int(t - min_start_time)`; a request counts in every
 * bucket from its start's to its end's, inclusive; the peaks are the largest bucket. A
 * simulated turn starts at its arrival and ends with its last token (its e2el). Only the
 * buckets something happens in are looked at (the count between them is constant), so the
 * work and memory follow the records, not the span of simulated time. */
void cz_metrics_peaks(const cz_metrics *m, uint64_t *max_concurrent_requests,
                      double *max_output_tokens_per_s)
{
    CZ_ASSERT(m->finished);
    *max_concurrent_requests = 0;
    *max_output_tokens_per_s = 0.0;
    uint64_t conc = 0, tok = 0;
    cz_peak_cell *c;
    size_t n = 0;
    if (m->peaks_fixed) {
        /* the buckets counted as turns completed, up to the last completed turn's end
         * (duration_seconds = int(ceil(max_end - min_start)) + 1) */
        uint64_t nb = (uint64_t)ceil(m->peaks_t1 - m->peaks_t0) + 1;
        conc = m->peak_conc_max;
        for (size_t i = m->n_tok_max; i-- > 0;)
            if (m->peak_tok_max[i].key - 1 < nb) {
                tok = m->peak_tok_max[i].tok;
                break;
            }
        c = cz_xmalloc((m->n_peak ? m->n_peak : 1) * sizeof *c);
        for (size_t i = 0; i < m->peak_cap; i++)
            if (m->peak_cells[i].key != 0)
                c[n++] = m->peak_cells[i];
        qsort(c, n, sizeof *c, peak_cmp);
        peak_sweep(c, n, nb, m->peak_run, &conc, &tok);
    } else {
        double t0 = INFINITY, t1 = -INFINITY;
        for (uint64_t i = 0; i < m->n_spans; i++) {
            t0 = fmin(t0, m->spans[i].start_s);
            t1 = fmax(t1, m->spans[i].end_s);
        }
        if (!(t0 <= t1))
            return;
        uint64_t nb = (uint64_t)ceil(t1 - t0) + 1;
        c = cz_xmalloc((2 * m->n_spans + m->n_tokens) * sizeof *c);
        for (uint64_t i = 0; i < m->n_spans; i++) {
            c[n++] = (cz_peak_cell){peak_bucket(m->spans[i].start_s, t0) + 1, 1, 0};
            c[n++] = (cz_peak_cell){peak_bucket(m->spans[i].end_s, t0) + 2, -1, 0};
        }
        /* tokens: `if 0 <= second_bucket < duration_seconds` */
        for (uint64_t i = 0; i < m->n_tokens; i++)
            if (m->tokens[i].v >= t0)
                c[n++] = (cz_peak_cell){peak_bucket(m->tokens[i].v, t0) + 1, 0, m->tokens[i].w};
        qsort(c, n, sizeof *c, peak_cmp);
        peak_sweep(c, n, nb, 0, &conc, &tok);
    }
    free(c);
    *max_concurrent_requests = conc;
    *max_output_tokens_per_s = (double)tok;
}

void cz_metrics_set_pct_mode(cz_metrics *m, cz_pct_mode mode)
{
    CZ_ASSERT(m->n_itl_ms == 0 && m->n_req == 0 && m->turns_total == 0);
    acc_free(m);
    m->pct_mode = mode;
    acc_init(m);
}

void cz_metrics_add_chunk(cz_metrics *m, uint64_t request, uint32_t index, double t_s)
{
    CZ_ASSERT(request < m->n_req);
    if (m->streaming && m->n_chunk_rows == CZ_METRICS_BATCH) {
        put_rows(m, CZ_ROWS_CHUNKS, m->chunk_rows, m->n_chunk_rows);
        m->n_chunk_rows = 0;
    }
    size_t cap = m->cap_chunk_rows;
    cz_grow((void **)&m->chunk_rows, &cap, m->n_chunk_rows + 1, sizeof *m->chunk_rows);
    m->cap_chunk_rows = cap;
    m->chunk_rows[m->n_chunk_rows++] =
        (cz_chunk_record){.request = request, .index = index, .t_s = t_s};
}

/* The gap distribution of `stage`, made on its first use. */
static cz_distacc *itl_acc(cz_metrics *m, uint32_t stage)
{
    if (stage >= m->n_itl_ms) {
        /* once per stage of the run */
        m->itl_ms = cz_xrealloc(m->itl_ms, (size_t)stage + 1, sizeof *m->itl_ms);
        for (uint32_t i = m->n_itl_ms; i <= stage; i++) {
            cz_distacc_init(&m->itl_ms[i], m->pct_mode, true);
            /* the gaps come in the order replicas report them, which the simulator's
             * decode runs change (docs/serving-core.md): exact sums */
            cz_distacc_order_free(&m->itl_ms[i]);
        }
        m->n_itl_ms = stage + 1;
    }
    return &m->itl_ms[stage];
}

void cz_metrics_add_itl_steps(cz_metrics *m, uint32_t stage, double prev_s, const double *end_s,
                              size_t n, uint64_t count)
{
    if (count == 0)
        return;
    if (!cz_metrics_rows_dropped(m)) {
        for (size_t k = 0; k < n; k++) {
            cz_metrics_add_itl(m, stage, end_s[k] - prev_s, count);
            prev_s = end_s[k];
        }
        return;
    }
    cz_distacc *a = itl_acc(m, stage);
    double gap_ms[256];
    for (size_t k0 = 0; k0 < n; k0 += CZ_ARRAY_LEN(gap_ms)) {
        size_t j = 0;
        for (size_t k = k0; k < n && j < CZ_ARRAY_LEN(gap_ms); k++, j++) {
            gap_ms[j] = (end_s[k] - prev_s) * 1e3;
            prev_s = end_s[k];
        }
        cz_distacc_add_many(a, gap_ms, j, count);
    }
}

void cz_metrics_add_itl(cz_metrics *m, uint32_t stage, double gap_s, uint64_t count)
{
    if (count == 0)
        return;
    cz_distacc_add(itl_acc(m, stage), gap_s * 1e3, count);
    cz_itl_record *last = m->n_itl ? &m->itl[m->n_itl - 1] : NULL;
    if (last && last->stage == stage && last->gap_s == gap_s) {
        last->count += count;
        return;
    }
    if (m->streaming && m->n_itl == CZ_METRICS_BATCH) {
        /* the last row stays: the next gap may merge with it */
        put_rows(m, CZ_ROWS_ITL, m->itl, m->n_itl - 1);
        m->itl[0] = m->itl[m->n_itl - 1];
        m->n_itl = 1;
    }
    size_t cap = m->cap_itl;
    cz_grow((void **)&m->itl, &cap, m->n_itl + 1, sizeof *m->itl);
    m->cap_itl = cap;
    m->itl[m->n_itl++] = (cz_itl_record){.gap_s = gap_s, .count = count, .stage = stage};
}

/* The distribution of the gaps recorded at `stage`, in ms. */
static void itl_dist(const cz_metrics *m, uint32_t stage, cz_dist *out)
{
    if (stage < m->n_itl_ms) {
        cz_distacc_summary(&m->itl_ms[stage], &m->pct, out);
        return;
    }
    cz_distacc none;
    cz_distacc_init(&none, m->pct_mode, true);
    cz_distacc_summary(&none, &m->pct, out);
    cz_distacc_free(&none);
}

void cz_metrics_timeline(cz_metrics *m, const cz_timeline_row *row)
{
    if (m->streaming && m->n_tl == CZ_METRICS_BATCH) {
        put_rows(m, CZ_ROWS_TIMELINE, m->tl, m->n_tl);
        m->n_tl = 0;
    }
    size_t cap = m->cap_tl;
    cz_grow((void **)&m->tl, &cap, m->n_tl + 1, sizeof *m->tl);
    m->cap_tl = cap;
    m->tl[m->n_tl++] = *row;
}

static bool meets_slo(const cz_slo *slo, double ttft_ms, double tpot_ms, double e2el_ms)
{
    if (slo->ttft_ms > 0 && !(ttft_ms <= slo->ttft_ms))
        return false;
    if (slo->tpot_ms > 0 && !(tpot_ms <= slo->tpot_ms))
        return false;
    if (slo->e2el_ms > 0 && !(e2el_ms <= slo->e2el_ms))
        return false;
    return true;
}

static void summarize(const cz_metrics *m, const cz_slo *slo, int64_t cls, cz_summary *o);

void cz_metrics_summarize(const cz_metrics *m, const cz_slo *slo, cz_summary *o)
{
    summarize(m, slo, -1, o);
}

void cz_metrics_summarize_class(const cz_metrics *m, const cz_slo *slo, uint32_t cls,
                                cz_summary *o)
{
    summarize(m, slo, cls, o);
}

static void summarize(const cz_metrics *m, const cz_slo *slo, int64_t cls, cz_summary *o)
{
    CZ_ASSERT(m->finished);
    /* goodput was counted as turns ended, against the recorder's objectives */
    CZ_ASSERT(!slo || memcmp(slo, &m->slo, sizeof *slo) == 0);
    memset(o, 0, sizeof *o);
    o->slo = m->slo;
    o->steps = m->steps;
    o->preemptions = m->preemptions;
    o->pct_mode = m->pct_mode;
    /* outcomes are the turns' (a pipeline's turn completes with its last stage); latencies
     * are those of the first autoregressive stage, over the completed turns */
    CZ_ASSERT(cls < 0 || m->per_class);
    const cz_req_acc *a = &m->acc[cls < 0 ? 2 : cls];
    o->requests = cls < 0 ? m->acct.requests : a->turns;
    o->completed = a->by_outcome[CZ_REQ_COMPLETED];
    o->rejected = a->by_outcome[CZ_REQ_REJECTED];
    o->aborted = a->by_outcome[CZ_REQ_ABORTED];
    o->failed = a->by_outcome[CZ_REQ_FAILED];
    o->unfinished = a->by_outcome[CZ_REQ_UNFINISHED];
    o->good = a->good;
    o->total_input_tokens = a->total_input_tokens;
    o->total_output_tokens = a->total_output_tokens;
    o->duration_s = o->completed ? a->last_finish_s - a->first_arrival_s : 0.0;
    if (o->duration_s > 0) {
        o->request_throughput = (double)o->completed / o->duration_s;
        o->request_goodput = (double)o->good / o->duration_s;
        o->output_throughput = (double)o->total_output_tokens / o->duration_s;
        o->total_token_throughput =
            (double)(o->total_input_tokens + o->total_output_tokens) / o->duration_s;
    }
    const cz_distacc *acc[] = {&a->ttft, &a->tpot, &a->e2el, &a->qw, &a->lag};
    cz_dist *out[] = {&o->ttft_ms, &o->tpot_ms, &o->e2el_ms, &o->queue_wait_ms, &o->send_lag_ms};
    o->has_send_lag = m->send_lags;
    for (size_t i = 0; i < CZ_ARRAY_LEN(acc); i++)
        cz_distacc_summary(acc[i], &m->pct, out[i]);
    itl_dist(m, 0, &o->itl_ms);
    /* auto: exact unless some distribution outgrew its budget */
    if (o->pct_mode == CZ_PCT_AUTO) {
        bool sk = o->itl_ms.sketched;
        for (size_t i = 0; i < CZ_ARRAY_LEN(out); i++)
            sk = sk || out[i]->sketched;
        o->pct_mode = sk ? CZ_PCT_SKETCH : CZ_PCT_EXACT;
    }
}

static void add_dist_unit(cJSON *j, const char *name, const char *unit, const cz_dist *d);

cJSON *cz_summary_json(const cz_summary *s)
{
    cJSON *j = cJSON_CreateObject();
    CZ_ASSERT(j != NULL);
    cJSON_AddNumberToObject(j, "requests", (double)s->requests);
    cJSON_AddNumberToObject(j, "completed", (double)s->completed);
    cJSON_AddNumberToObject(j, "aborted", (double)s->aborted);
    cJSON_AddNumberToObject(j, "rejected", (double)s->rejected);
    cJSON_AddNumberToObject(j, "failed", (double)s->failed);
    cJSON_AddNumberToObject(j, "unfinished", (double)s->unfinished);
    cJSON_AddNumberToObject(j, "total_input_tokens", (double)s->total_input_tokens);
    cJSON_AddNumberToObject(j, "total_output_tokens", (double)s->total_output_tokens);
    cz_json_add_num(j, "duration", s->duration_s);
    cz_json_add_num(j, "request_throughput", s->request_throughput);
    if (s->slo.ttft_ms > 0 || s->slo.tpot_ms > 0 || s->slo.e2el_ms > 0) {
        cz_json_add_num(j, "request_goodput", s->request_goodput);
        cz_json_add_num(j, "slo_attainment",
                        s->completed ? (double)s->good / (double)s->completed : NAN);
    } else {
        cJSON_AddNullToObject(j, "request_goodput");
    }
    cz_json_add_num(j, "output_throughput", s->output_throughput);
    cz_json_add_num(j, "total_token_throughput", s->total_token_throughput);
    add_dist_unit(j, "ttft", "_ms", &s->ttft_ms);
    add_dist_unit(j, "tpot", "_ms", &s->tpot_ms);
    add_dist_unit(j, "itl", "_ms", &s->itl_ms);
    add_dist_unit(j, "e2el", "_ms", &s->e2el_ms);
    add_dist_unit(j, "queue_wait", "_ms", &s->queue_wait_ms);
    if (s->has_send_lag)
        add_dist_unit(j, "send_lag", "_ms", &s->send_lag_ms);
    cJSON_AddNumberToObject(j, "preemptions", (double)s->preemptions);
    cJSON_AddNumberToObject(j, "steps", (double)s->steps);
    return j;
}

static void print_dist(FILE *f, const char *label, const cz_dist *d)
{
    fprintf(f, "  %-16s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", label, d->mean, d->std,
            d->median, d->p90, d->p95, d->p99);
}

void cz_summary_print(const cz_summary *s, FILE *f)
{
    if (s->requests == 0) {
        fprintf(f, "steps %llu  preemptions %llu\n",
                (unsigned long long)s->steps, (unsigned long long)s->preemptions);
        return;
    }
    fprintf(f, "requests %llu: completed %llu  aborted %llu  rejected %llu  failed %llu  "
               "unfinished %llu\n",
            (unsigned long long)s->requests, (unsigned long long)s->completed,
            (unsigned long long)s->aborted, (unsigned long long)s->rejected,
            (unsigned long long)s->failed, (unsigned long long)s->unfinished);
    fprintf(f, "duration %.2f s  steps %llu  preemptions %llu\n", s->duration_s,
            (unsigned long long)s->steps, (unsigned long long)s->preemptions);
    fprintf(f, "throughput %.4f req/s  output %.1f tok/s  total %.1f tok/s", s->request_throughput,
            s->output_throughput, s->total_token_throughput);
    if (s->slo.ttft_ms > 0 || s->slo.tpot_ms > 0 || s->slo.e2el_ms > 0)
        fprintf(f, "  goodput %.4f req/s (%llu good)", s->request_goodput,
                (unsigned long long)s->good);
    fprintf(f, "\n  %-16s %10s %10s %10s %10s %10s %10s\n", "metric (ms)", "mean", "std",
            "median", "p90", "p95", "p99");
    print_dist(f, "TTFT", &s->ttft_ms);
    print_dist(f, "TPOT", &s->tpot_ms);
    print_dist(f, "ITL", &s->itl_ms);
    print_dist(f, "E2E latency", &s->e2el_ms);
    print_dist(f, "queue wait", &s->queue_wait_ms);
    if (s->has_send_lag)
        print_dist(f, "send lag", &s->send_lag_ms);
}

void cz_audio_summarize(const cz_metrics *m, const cz_slo *slo, double duration_s,
                        double sample_rate_hz, cz_audio_summary *o)
{
    CZ_ASSERT(sample_rate_hz > 0);
    memset(o, 0, sizeof *o);
    cz_distacc ttfp, rtf, dur, und;
    cz_distacc_init(&ttfp, m->pct_mode, false);
    cz_distacc_init(&rtf, m->pct_mode, false);
    cz_distacc_init(&dur, m->pct_mode, false);
    cz_distacc_init(&und, m->pct_mode, false);
    double first_sent = INFINITY, last_chunk = -INFINITY;
    for (uint64_t i = 0; i < m->n_audio; i++) {
        const cz_audio_record *a = &m->audio[i];
        o->turns++;
        if (isnan(a->first_audio_s))
            continue; /* cut before any audio arrived */
        /* TTFP counts every turn that got audio, cut or not (docs/playback.md) */
        double t_ms = (a->first_audio_s - a->ready_s) * 1e3;
        cz_distacc_add(&ttfp, t_ms, 1);
        bool fast = !(slo && slo->audio_ttfp_ms > 0) || t_ms <= slo->audio_ttfp_ms;
        if (a->barged) {
            /* a cut reply is not completed work: never effective (LiveServe section 7.1's
             * effective RPS counts completed requests that meet the SLOs) */
            o->barged++;
            continue;
        }
        o->completed++;
        o->total_audio_s += a->audio_s;
        /* vLLM-Omni's audio_frames: len(pcm) // frame_width, the samples per channel;
         * total_audio_frames sums them over successful requests (metrics.py) */
        o->total_audio_frames += (uint64_t)llround(a->audio_s * sample_rate_hz);
        o->underrun_events += a->underruns;
        double gen_s = a->last_audio_s - a->ready_s;
        o->mean_generation_s += gen_s;
        if (a->audio_s > o->longest_playback_s) {
            o->longest_playback_s = a->audio_s;
            o->longest_generation_s = gen_s;
        }
        /* VoxServe's Eq. 2 binds every chunk after the first; a late one is an underrun
         * event (D_i > 0, threshold 0) */
        o->paced_chunks += a->chunks > 0 ? a->chunks - 1 : 0;
        first_sent = fmin(first_sent, a->ready_s);
        last_chunk = fmax(last_chunk, a->last_audio_s);
        cz_distacc_add(&rtf, a->audio_s > 0 ? (a->last_audio_s - a->ready_s) / a->audio_s : NAN,
                       1);
        cz_distacc_add(&dur, a->audio_s, 1);
        cz_distacc_add(&und, a->max_underrun_s, 1);
        if (a->continuous) {
            o->continuous++;
            if (fast)
                o->effective++;
        }
    }
    o->mean_generation_s = o->completed ? o->mean_generation_s / o->completed : NAN;
    o->mean_playback_s = o->completed ? o->total_audio_s / o->completed : NAN;
    if (!o->completed)
        o->longest_generation_s = o->longest_playback_s = NAN;
    o->audio_throughput = duration_s > 0 ? o->total_audio_s / duration_s : 0.0;
    o->effective_request_throughput = duration_s > 0 ? (double)o->effective / duration_s : 0.0;
    o->continuity_ok_rate = o->completed ? (double)o->continuous / (double)o->completed : 1.0;
    CZ_ASSERT(o->underrun_events <= o->paced_chunks);
    o->streaming_viability = o->paced_chunks ? 1.0 - (double)o->underrun_events /
                                                         (double)o->paced_chunks
                                             : NAN;
    o->audio_span_s = o->completed ? last_chunk - first_sent : NAN;
    o->inverse_rtf = o->audio_span_s > 0 ? o->total_audio_s / o->audio_span_s : NAN;
    cz_distacc *acc[] = {&ttfp, &rtf, &dur, &und};
    cz_dist *out[] = {&o->ttfp_ms, &o->rtf, &o->duration_s, &o->underrun_s};
    for (size_t i = 0; i < CZ_ARRAY_LEN(acc); i++) {
        cz_distacc_summary(acc[i], &m->pct, out[i]);
        cz_distacc_free(acc[i]);
    }
}

void cz_frame_summarize(const cz_metrics *m, cz_frame_summary *o)
{
    memset(o, 0, sizeof *o);
    const cz_accounting *a = &m->acct;
    o->frames = a->frames;
    o->rejected = a->frames_rejected;
    o->unfinished = a->frames_unfinished;
    o->streams = a->streams;
    o->streams_completed = a->streams_completed;
    o->streams_rejected = a->streams_rejected;
    o->streams_unfinished = a->streams_unfinished;
    o->first_empty_s = NAN;
    cz_distacc lat;
    cz_distacc_init(&lat, m->pct_mode, false);
    for (uint64_t i = 0; i < m->n_frames; i++) {
        const cz_frame_record *f = &m->frames[i];
        o->empty += f->empty;
        o->served += !f->empty;
        o->missed += f->missed;
        cz_distacc_add(&lat, f->latency_s * 1e3, 1);
        double back = f->tick_s + f->latency_s;
        if (f->empty && !(back >= o->first_empty_s))
            o->first_empty_s = back;
    }
    cz_distacc_summary(&lat, &m->pct, &o->latency_ms);
    cz_distacc_free(&lat);
}

void cz_stage_summarize(const cz_metrics *m, uint32_t stage, cz_stage_summary *o)
{
    CZ_ASSERT(m->finished);
    memset(o, 0, sizeof *o);
    if (stage < m->n_stage_acc) {
        const cz_stage_acc *sa = &m->stage_acc[stage];
        o->turns = sa->turns;
        o->generated_tokens = sa->generated_tokens;
        o->heard_tokens = sa->heard_tokens;
        o->kv_reload_total_s = sa->kv_reload_total_s;
        cz_distacc_summary(&sa->kv_reload_ms, &m->pct, &o->kv_reload_ms);
        o->prefix_caching = sa->prefix_caching;
        o->pc_queries = sa->pc_queries;
        o->pc_hits = sa->pc_hits;
        o->pc_preempted_queries = sa->pc_preempted_queries;
        o->pc_preempted_hits = sa->pc_preempted_hits;
    } else {
        cz_distacc none;
        cz_distacc_init(&none, m->pct_mode, false);
        cz_distacc_summary(&none, &m->pct, &o->kv_reload_ms);
        cz_distacc_free(&none);
    }
    o->waste_ratio =
        o->generated_tokens ? 1.0 - (double)o->heard_tokens / (double)o->generated_tokens : 0.0;
    o->pc_hit_rate = o->pc_queries ? (double)o->pc_hits / (double)o->pc_queries : NAN;
    o->prefill_tokens_saved = o->pc_hits + o->pc_preempted_hits;
    itl_dist(m, stage, &o->itl_ms);
}

/* Adds mean, median, std, each percentile of d's set and max of `d` as
 * "<stat>_<name><unit>"; a percentile's stat is "p" and its vLLM label (cz_pct_label:
 * p99_ttft_ms, p99.9_ttft_ms; vLLM's benchmarks/serve.py, process_one_metric). */
static void add_dist_unit(cJSON *j, const char *name, const char *unit, const cz_dist *d)
{
    char key[128], label[32];
    static const char *const stat[] = {"mean", "median", "std"};
    const double val[] = {d->mean, d->median, d->std};
    for (size_t i = 0; i < CZ_ARRAY_LEN(stat); i++) {
        snprintf(key, sizeof key, "%s_%s%s", stat[i], name, unit);
        cz_json_add_num(j, key, val[i]);
    }
    for (uint32_t i = 0; i < d->n_pct; i++) {
        cz_pct_label(d->pct_q[i], label, sizeof label);
        snprintf(key, sizeof key, "p%s_%s%s", label, name, unit);
        cz_json_add_num(j, key, d->pct_v[i]);
    }
    snprintf(key, sizeof key, "max_%s%s", name, unit);
    cz_json_add_num(j, key, d->max);
}

void cz_audio_summary_json(cJSON *j, const cz_audio_summary *a)
{
    add_dist_unit(j, "audio_ttfp", "_ms", &a->ttfp_ms);
    add_dist_unit(j, "audio_rtf", "", &a->rtf);
    add_dist_unit(j, "audio_duration", "_s", &a->duration_s);
    add_dist_unit(j, "audio_underrun", "_s", &a->underrun_s);
    /* vLLM-Omni's names (vllm_omni/metrics/definitions.py, filled by calculate_metrics in
     * vllm_omni/benchmarks/metrics/metrics.py) */
    cz_json_add_num(j, "total_audio_duration_s", a->total_audio_s);
    cJSON_AddNumberToObject(j, "total_audio_frames", (double)a->total_audio_frames);
    cz_json_add_num(j, "audio_throughput", a->audio_throughput);
    cz_json_add_num(j, "audio_continuity_ok_rate", a->continuity_ok_rate);
    cz_json_add_num(j, "streaming_viability", a->streaming_viability);
    cJSON_AddNumberToObject(j, "paced_chunks", (double)a->paced_chunks);
    cz_json_add_num(j, "audio_span_s", a->audio_span_s);
    cz_json_add_num(j, "inverse_rtf", a->inverse_rtf);
    cJSON_AddNumberToObject(j, "audio_underrun_events", (double)a->underrun_events);
    cJSON_AddNumberToObject(j, "spoken_turns", (double)a->turns);
    cJSON_AddNumberToObject(j, "barged_turns", (double)a->barged);
    cz_json_add_num(j, "effective_request_throughput", a->effective_request_throughput);
    cz_json_add_num(j, "mean_generation_s", a->mean_generation_s);
    cz_json_add_num(j, "mean_playback_s", a->mean_playback_s);
    cz_json_add_num(j, "longest_reply_generation_s", a->longest_generation_s);
    cz_json_add_num(j, "longest_reply_playback_s", a->longest_playback_s);
}

void cz_frame_summary_json(cJSON *j, const cz_frame_summary *f)
{
    add_dist_unit(j, "frame_latency", "_ms", &f->latency_ms);
    cJSON_AddNumberToObject(j, "streams", (double)f->streams);
    cJSON_AddNumberToObject(j, "streams_completed", (double)f->streams_completed);
    cJSON_AddNumberToObject(j, "streams_rejected", (double)f->streams_rejected);
    cJSON_AddNumberToObject(j, "streams_unfinished", (double)f->streams_unfinished);
    cJSON_AddNumberToObject(j, "frames", (double)f->frames);
    cJSON_AddNumberToObject(j, "served_frames", (double)f->served);
    cJSON_AddNumberToObject(j, "empty_frames", (double)f->empty);
    cJSON_AddNumberToObject(j, "rejected_frames", (double)f->rejected);
    cJSON_AddNumberToObject(j, "unfinished_frames", (double)f->unfinished);
    cJSON_AddNumberToObject(j, "deadline_misses", (double)f->missed);
    cz_json_add_num(j, "first_empty_frame_s", f->first_empty_s);
}

cJSON *cz_stage_summary_json(const cz_stage_summary *st, const char *name)
{
    cJSON *j = cJSON_CreateObject();
    CZ_ASSERT(j != NULL);
    cJSON_AddStringToObject(j, "stage", name);
    cJSON_AddNumberToObject(j, "turns", (double)st->turns);
    cJSON_AddNumberToObject(j, "generated_tokens", (double)st->generated_tokens);
    cJSON_AddNumberToObject(j, "heard_tokens", (double)st->heard_tokens);
    cz_json_add_num(j, "waste_ratio", st->waste_ratio);
    cz_json_add_num(j, "total_kv_reload_s", st->kv_reload_total_s);
    add_dist_unit(j, "kv_reload", "_ms", &st->kv_reload_ms);
    add_dist_unit(j, "itl", "_ms", &st->itl_ms);
    if (st->prefix_caching) {
        /* vLLM's prefix cache metrics (vllm:prefix_cache_queries and _hits, in tokens) */
        cJSON_AddNumberToObject(j, "prefix_cache_queries", (double)st->pc_queries);
        cJSON_AddNumberToObject(j, "prefix_cache_hits", (double)st->pc_hits);
        cz_json_add_num(j, "prefix_cache_hit_rate", st->pc_hit_rate);
        cJSON_AddNumberToObject(j, "prefix_cache_preempted_queries",
                                (double)st->pc_preempted_queries);
        cJSON_AddNumberToObject(j, "prefix_cache_preempted_hits", (double)st->pc_preempted_hits);
        cJSON_AddNumberToObject(j, "prefill_tokens_saved", (double)st->prefill_tokens_saved);
    }
    return j;
}
