/* cz_metrics.c - see cz_metrics.h. Metric definitions are in docs/metrics.md. */
#include "cz_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

void cz_metrics_init(cz_metrics *m, double timeline_interval_s, uint64_t expected_requests)
{
    CZ_ASSERT(timeline_interval_s >= 0.0);
    memset(m, 0, sizeof *m);
    m->timeline_interval_s = timeline_interval_s;
    m->tl_next_s = -INFINITY;
    if (expected_requests) {
        m->req = cz_xcalloc(expected_requests, sizeof *m->req);
        m->cap_req = expected_requests;
    }
}

void cz_metrics_free(cz_metrics *m)
{
    free(m->req);
    free(m->itl);
    free(m->tl);
    memset(m, 0, sizeof *m);
}

uint64_t cz_metrics_add_request(cz_metrics *m, const cz_req_record *r)
{
    size_t cap = m->cap_req;
    cz_grow((void **)&m->req, &cap, m->n_req + 1, sizeof *m->req);
    m->cap_req = cap;
    m->req[m->n_req] = *r;
    return m->n_req++;
}

void cz_metrics_add_itl(cz_metrics *m, double gap_s, uint64_t count)
{
    if (count == 0)
        return;
    if (m->n_itl && m->itl[m->n_itl - 1].v == gap_s) {
        m->itl[m->n_itl - 1].w += count;
        return;
    }
    size_t cap = m->cap_itl;
    cz_grow((void **)&m->itl, &cap, m->n_itl + 1, sizeof *m->itl);
    m->cap_itl = cap;
    m->itl[m->n_itl++] = (cz_wsample){.v = gap_s, .w = count};
}

void cz_metrics_timeline(cz_metrics *m, double t_s, const cz_timeline_row *row)
{
    if (t_s < m->tl_next_s)
        return;
    size_t cap = m->cap_tl;
    cz_grow((void **)&m->tl, &cap, m->n_tl + 1, sizeof *m->tl);
    m->cap_tl = cap;
    m->tl[m->n_tl] = *row;
    m->tl[m->n_tl++].t_s = t_s;
    m->tl_next_s = t_s + m->timeline_interval_s;
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

void cz_metrics_summarize(const cz_metrics *m, const cz_slo *slo, cz_summary *o)
{
    static const cz_slo no_slo = {0, 0, 0};
    memset(o, 0, sizeof *o);
    o->slo = slo ? *slo : no_slo;
    o->steps = m->steps;
    o->preemptions = m->preemptions;
    uint64_t n = m->n_req;
    double *ttft = cz_xmalloc((n ? n : 1) * sizeof(double));
    double *tpot = cz_xmalloc((n ? n : 1) * sizeof(double));
    double *e2el = cz_xmalloc((n ? n : 1) * sizeof(double));
    double *qw = cz_xmalloc((n ? n : 1) * sizeof(double));
    size_t n_ok = 0, n_tpot = 0, n_qw = 0;
    double first_arrival = INFINITY, last_finish = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        const cz_req_record *r = &m->req[i];
        if (r->stage != 0)
            continue;
        if (r->arrival_s < first_arrival)
            first_arrival = r->arrival_s;
        if (!isnan(r->first_sched_s))
            qw[n_qw++] = (r->first_sched_s - r->arrival_s) * 1e3;
        if (r->outcome == CZ_REQ_REJECTED) {
            o->rejected++;
            continue;
        }
        if (r->outcome == CZ_REQ_ABORTED) {
            o->aborted++;
            continue;
        }
        if (r->outcome != CZ_REQ_COMPLETED) {
            o->failed++;
            continue;
        }
        o->completed++;
        o->total_input_tokens += r->input_tokens;
        o->total_output_tokens += r->output_tokens;
        if (r->finish_s > last_finish)
            last_finish = r->finish_s;
        double t_ms = (r->first_token_s - r->arrival_s) * 1e3;
        double e_ms = (r->finish_s - r->arrival_s) * 1e3;
        double p_ms = NAN;
        ttft[n_ok] = t_ms;
        e2el[n_ok] = e_ms;
        n_ok++;
        if (r->output_tokens > 1) {
            p_ms = (e_ms - t_ms) / (double)(r->output_tokens - 1);
            tpot[n_tpot++] = p_ms;
        }
        if (meets_slo(&o->slo, t_ms, isnan(p_ms) ? 0.0 : p_ms, e_ms))
            o->good++;
    }
    o->duration_s = o->completed ? last_finish - first_arrival : 0.0;
    if (o->duration_s > 0) {
        o->request_throughput = (double)o->completed / o->duration_s;
        o->request_goodput = (double)o->good / o->duration_s;
        o->output_throughput = (double)o->total_output_tokens / o->duration_s;
        o->total_token_throughput =
            (double)(o->total_input_tokens + o->total_output_tokens) / o->duration_s;
    }
    cz_dist_compute(ttft, n_ok, &o->ttft_ms);
    cz_dist_compute(tpot, n_tpot, &o->tpot_ms);
    cz_dist_compute(e2el, n_ok, &o->e2el_ms);
    cz_dist_compute(qw, n_qw, &o->queue_wait_ms);
    cz_wsample *itl = cz_xmalloc((m->n_itl ? m->n_itl : 1) * sizeof *itl);
    for (uint64_t i = 0; i < m->n_itl; i++)
        itl[i] = (cz_wsample){m->itl[i].v * 1e3, m->itl[i].w};
    cz_wdist_compute(itl, m->n_itl, &o->itl_ms);
    free(itl);
    free(ttft);
    free(tpot);
    free(e2el);
    free(qw);
}

static void add_dist(cJSON *j, const char *name, const cz_dist *d)
{
    char key[64];
    static const char *const stat[] = {"mean", "median", "std", "p50", "p90", "p95", "p99"};
    const double val[] = {d->mean, d->median, d->std, d->p50, d->p90, d->p95, d->p99};
    for (size_t i = 0; i < CZ_ARRAY_LEN(stat); i++) {
        snprintf(key, sizeof key, "%s_%s_ms", stat[i], name);
        cz_json_add_num(j, key, val[i]);
    }
}

cJSON *cz_summary_json(const cz_summary *s)
{
    cJSON *j = cJSON_CreateObject();
    CZ_ASSERT(j != NULL);
    cJSON_AddNumberToObject(j, "completed", (double)s->completed);
    cJSON_AddNumberToObject(j, "failed", (double)s->failed);
    cJSON_AddNumberToObject(j, "rejected", (double)s->rejected);
    cJSON_AddNumberToObject(j, "aborted", (double)s->aborted);
    cJSON_AddNumberToObject(j, "total_input_tokens", (double)s->total_input_tokens);
    cJSON_AddNumberToObject(j, "total_output_tokens", (double)s->total_output_tokens);
    cz_json_add_num(j, "duration", s->duration_s);
    cz_json_add_num(j, "request_throughput", s->request_throughput);
    if (s->slo.ttft_ms > 0 || s->slo.tpot_ms > 0 || s->slo.e2el_ms > 0)
        cz_json_add_num(j, "request_goodput", s->request_goodput);
    else
        cJSON_AddNullToObject(j, "request_goodput");
    cz_json_add_num(j, "output_throughput", s->output_throughput);
    cz_json_add_num(j, "total_token_throughput", s->total_token_throughput);
    add_dist(j, "ttft", &s->ttft_ms);
    add_dist(j, "tpot", &s->tpot_ms);
    add_dist(j, "itl", &s->itl_ms);
    add_dist(j, "e2el", &s->e2el_ms);
    add_dist(j, "queue_wait", &s->queue_wait_ms);
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
    fprintf(f, "completed %llu  failed %llu  rejected %llu  duration %.2f s  steps %llu  "
               "preemptions %llu\n",
            (unsigned long long)s->completed, (unsigned long long)s->failed,
            (unsigned long long)s->rejected, s->duration_s, (unsigned long long)s->steps,
            (unsigned long long)s->preemptions);
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
}
