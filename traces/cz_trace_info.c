/* cz_trace_info.c - the statistics of `cadenza trace info`: counts, duration, mean rate,
 * burstiness (index of dispersion of per-second arrival counts) and token percentiles
 * (cz_dist_compute, numpy's linear interpolation). */
#include "cz_traces_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_stats.h"

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Index of dispersion (variance / mean) of the counts of sorted[0..n) in 1 s bins
 * [first + k, first + k + 1) for k = 0 .. floor(last - first); empty bins count. */
static double iod_1s(const double *sorted, size_t n)
{
    double first = sorted[0];
    double bins = floor(sorted[n - 1] - first) + 1.0;
    double mean = (double)n / bins;
    double ss = 0.0, nonempty = 0.0;
    for (size_t i = 0; i < n;) {
        double bin = floor(sorted[i] - first);
        size_t j = i;
        while (j < n && floor(sorted[j] - first) == bin)
            j++;
        double d = (double)(j - i) - mean;
        ss += d * d;
        nonempty += 1.0;
        i = j;
    }
    ss += (bins - nonempty) * mean * mean;
    return ss / bins / mean;
}

void cz_trace_info_compute(const cz_workload *w, cz_trace_info *out)
{
    memset(out, 0, sizeof *out);
    out->requests = w->n_turns;
    out->sessions = w->n_sessions;
    out->streams = w->n_streams;
    out->dropped_failed = w->dropped_failed;
    out->dropped_filtered = w->dropped_filtered;
    out->turns_mean = w->n_sessions ? (double)w->n_turns / w->n_sessions : NAN;
    for (uint32_t i = 0; i < w->n_sessions; i++)
        if (w->sessions[i].n_turns > out->turns_max)
            out->turns_max = w->sessions[i].n_turns;

    /* Arrivals that the workload fixes: every turn of an open session, the first turn of
     * a closed one. */
    double *v = cz_xmalloc(((size_t)w->n_turns + 1) * sizeof *v);
    size_t n = 0;
    for (uint32_t i = 0; i < w->n_sessions; i++) {
        const cz_session *s = &w->sessions[i];
        uint32_t k_end = s->timing == CZ_TIMING_OPEN ? s->n_turns : (s->n_turns > 0);
        for (uint32_t k = 0; k < k_end; k++)
            v[n++] = w->turns[s->turn_off + k].arrival_s;
    }
    out->duration_s = out->mean_rate_rps = out->burstiness_iod_1s = NAN;
    if (n > 0) {
        qsort(v, n, sizeof *v, cmp_double);
        out->duration_s = v[n - 1] - v[0];
        if (out->duration_s > 0.0) {
            out->mean_rate_rps = (double)n / out->duration_s;
            out->burstiness_iod_1s = iod_1s(v, n);
        }
    }

    cz_dist d;
    for (uint32_t i = 0; i < w->n_turns; i++)
        v[i] = cz_turn_in_tokens(&w->turns[i]);
    cz_dist_compute(v, w->n_turns, &d);
    out->input_tokens_p50 = d.p50;
    out->input_tokens_p90 = d.p90;
    out->input_tokens_p99 = d.p99;
    out->input_tokens_mean = d.mean;
    for (uint32_t i = 0; i < w->n_turns; i++)
        v[i] = w->turns[i].out_text_tokens;
    cz_dist_compute(v, w->n_turns, &d);
    out->output_tokens_p50 = d.p50;
    out->output_tokens_p90 = d.p90;
    out->output_tokens_p99 = d.p99;
    out->output_tokens_mean = d.mean;
    free(v);
}

cJSON *cz_trace_info_json(const cz_trace_info *info)
{
    cJSON *o = cJSON_CreateObject();
    CZ_ASSERT(o != NULL);
    cz_json_add_num(o, "requests", (double)info->requests);
    cz_json_add_num(o, "sessions", (double)info->sessions);
    cz_json_add_num(o, "streams", (double)info->streams);
    cz_json_add_num(o, "turns_max", (double)info->turns_max);
    cz_json_add_num(o, "turns_mean", info->turns_mean);
    cz_json_add_num(o, "dropped_failed", (double)info->dropped_failed);
    cz_json_add_num(o, "dropped_filtered", (double)info->dropped_filtered);
    cz_json_add_num(o, "duration_s", info->duration_s);
    cz_json_add_num(o, "mean_rate_rps", info->mean_rate_rps);
    cz_json_add_num(o, "burstiness_iod_1s", info->burstiness_iod_1s);
    cz_json_add_num(o, "input_tokens_p50", info->input_tokens_p50);
    cz_json_add_num(o, "input_tokens_p90", info->input_tokens_p90);
    cz_json_add_num(o, "input_tokens_p99", info->input_tokens_p99);
    cz_json_add_num(o, "input_tokens_mean", info->input_tokens_mean);
    cz_json_add_num(o, "output_tokens_p50", info->output_tokens_p50);
    cz_json_add_num(o, "output_tokens_p90", info->output_tokens_p90);
    cz_json_add_num(o, "output_tokens_p99", info->output_tokens_p99);
    cz_json_add_num(o, "output_tokens_mean", info->output_tokens_mean);
    return o;
}
