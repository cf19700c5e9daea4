/* cz_transform.c - workload transforms (time scale, window, request cap) and the
 * session copy helpers they and cz_trace_read share. A transform that drops sessions
 * rebuilds the workload's arrays with the kept sessions, in their original order. */
#include "cz_traces_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cz__workload_copy_header(cz_workload *dst, const cz_workload *src)
{
    memcpy(dst->source, src->source, sizeof dst->source);
    dst->arrivals_given = src->arrivals_given;
    dst->think_given = src->think_given;
    dst->concurrency = src->concurrency;
    dst->hash_block_tokens = src->hash_block_tokens;
    dst->dropped_failed = src->dropped_failed;
    dst->dropped_filtered = src->dropped_filtered;
}

void cz__workload_pop_session(cz_workload *w)
{
    CZ_ASSERT(w->n_sessions > 0 && !w->gen);
    const cz_session *s = &w->sessions[w->n_sessions - 1];
    CZ_ASSERT(s->turn_off + s->n_turns == w->n_turns);
    if (s->n_turns > 0 && w->turns[s->turn_off].hash_len > 0)
        w->n_hash = w->turns[s->turn_off].hash_off;
    w->n_turns = s->turn_off;
    w->name_len = s->name_off;
    w->n_sessions--;
}

void cz__workload_copy_session(cz_workload *dst, const cz_workload *src, uint32_t si)
{
    CZ_ASSERT(si < src->n_sessions);
    const cz_session *s = &src->sessions[si];
    cz_workload_begin_session(dst, cz_workload_session_name(src, s), s->cls, s->timing);
    for (uint32_t k = 0; k < s->n_turns; k++) {
        const cz_turn *from = &src->turns[s->turn_off + k];
        cz_turn *t = cz_workload_add_turn(dst);
        *t = *from;
        cz_workload_add_hashes(dst, t, cz_workload_turn_hashes(src, from), from->hash_len);
    }
}

double cz__session_first_arrival(const cz_workload *w, uint32_t si)
{
    CZ_ASSERT(si < w->n_sessions && w->sessions[si].n_turns > 0);
    return w->turns[w->sessions[si].turn_off].arrival_s;
}

/* Stable merge sort of order[0, n) by first arrival; tmp has room for n indices. */
static void sort_by_arrival(const cz_workload *w, uint32_t *order, uint32_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t mid = n / 2;
    sort_by_arrival(w, order, tmp, mid);
    sort_by_arrival(w, order + mid, tmp, n - mid);
    size_t i = 0, j = mid, k = 0;
    while (i < mid && j < n) {
        if (cz__session_first_arrival(w, order[j]) < cz__session_first_arrival(w, order[i]))
            tmp[k++] = order[j++];
        else
            tmp[k++] = order[i++];
    }
    while (i < mid)
        tmp[k++] = order[i++];
    while (j < n)
        tmp[k++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
}

void cz__sessions_by_arrival(const cz_workload *w, uint32_t *order)
{
    uint32_t *tmp = cz_xmalloc((size_t)w->n_sessions * sizeof *tmp);
    for (uint32_t i = 0; i < w->n_sessions; i++)
        order[i] = i;
    sort_by_arrival(w, order, tmp, w->n_sessions);
    free(tmp);
}

/* Replaces w by the sessions whose keep[i] is set (and all of w's streams), counting the
 * turns of the others in dropped_filtered. */
static void keep_sessions(cz_workload *w, const bool *keep)
{
    cz_workload out;
    cz_workload_init(&out);
    cz__workload_copy_header(&out, w);
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        if (keep[i])
            cz__workload_copy_session(&out, w, i);
        else
            out.dropped_filtered += w->sessions[i].n_turns;
    }
    for (uint32_t i = 0; i < w->n_streams; i++)
        *cz_workload_add_stream(&out) = w->streams[i];
    cz_workload_free(w);
    *w = out;
}

void cz_workload_scale_time(cz_workload *w, double factor)
{
    CZ_ASSERT(factor > 0.0 && isfinite(factor));
    for (uint32_t i = 0; i < w->n_turns; i++)
        w->turns[i].arrival_s *= factor;
}

bool cz__session_in_window(const cz_workload *w, uint32_t si, double start_s, double end_s)
{
    double t = cz__session_first_arrival(w, si);
    return t >= start_s && t < end_s;
}

void cz__session_shift(cz_workload *w, uint32_t si, double by_s)
{
    const cz_session *s = &w->sessions[si];
    uint32_t n = s->timing == CZ_TIMING_OPEN ? s->n_turns : 1;
    for (uint32_t k = 0; k < n; k++)
        w->turns[s->turn_off + k].arrival_s += by_s;
}

void cz_workload_window(cz_workload *w, double start_s, double duration_s)
{
    CZ_ASSERT(start_s >= 0.0 && duration_s >= 0.0);
    bool *keep = cz_xcalloc(w->n_sessions, sizeof *keep);
    for (uint32_t i = 0; i < w->n_sessions; i++)
        keep[i] = cz__session_in_window(w, i, start_s, start_s + duration_s);
    keep_sessions(w, keep);
    free(keep);
    for (uint32_t i = 0; i < w->n_sessions; i++)
        cz__session_shift(w, i, -start_s);
}

void cz_workload_limit_requests(cz_workload *w, uint64_t max_turns)
{
    uint32_t *order = cz_xmalloc((size_t)w->n_sessions * sizeof *order);
    bool *keep = cz_xcalloc(w->n_sessions, sizeof *keep);
    cz__sessions_by_arrival(w, order);
    uint64_t total = 0;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        uint32_t n = w->sessions[order[i]].n_turns;
        if (total + n > max_turns)
            break;
        total += n;
        keep[order[i]] = true;
    }
    keep_sessions(w, keep);
    free(keep);
    free(order);
}
