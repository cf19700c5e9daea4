/* cz_run.c - the pipeline-level keys of a run's summary (cz_run.h), for either driver. */
#include "cz_run.h"

#include <math.h>
#include <string.h>

#include "cz_json.h"

cz_status cz_run_clock_error(double t_s, cz_err *err)
{
    return cz_err_set(err, CZ_EINVAL,
                      "the simulated clock would pass %g s (at %g s), the latest time a run "
                      "represents (the limit of sim.max_time_s): the workload's arrivals "
                      "(trace timestamps, time_scale) or the cost model's step and transfer "
                      "times (cost.flops_eff, cost.bw_eff, cost.link_eff, the hardware "
                      "card's rates, a cost file's coefficients) reach beyond it",
                      CZ_CLOCK_MAX_S, t_s);
}

void cz_watchdog_init(cz_watchdog *w, uint64_t min_events, double min_s)
{
    *w = (cz_watchdog){.min_events = min_events, .min_s = min_s};
}

bool cz_watchdog_stalled(cz_watchdog *w, double now, uint64_t mark, bool busy)
{
    if (mark != w->mark || !busy) {
        w->mark = mark;
        w->quiet = 0;
        w->since_s = now;
        return false;
    }
    /* events that do not move the clock (a loop at one instant) count without it */
    ++w->quiet;
    return w->quiet >= w->min_events &&
           (now - w->since_s >= w->min_s || w->quiet >= CZ_WATCHDOG_SAME_TIME * w->min_events);
}

void cz_watchdog_report(const cz_watchdog *w, double now, const char *clock, cz_err *err)
{
    cz_err_prefix(err,
                  "no progress over %llu events and %.6g s of %s time (from %.6g s to %.6g "
                  "s: no turn or frame arrived or ended, no step completed) with work open: ",
                  (unsigned long long)w->quiet, now - w->since_s, clock, w->since_s, now);
}

/* A cross-stage run's keys (docs/pipeline.md, "Cross-stage execution"): Nova's queueing
 * figures (Table V), decode batch and SM share, the vision step, its offload stall and the
 * weights kept, and for Nova's partition the split and Eq. 1 there. */
static void xstage_summary_json(const cz_config *cfg, const cz_run_stats *st, cJSON *summary)
{
    /* Nova's figures: the wait for the vision worker (its queueing delay, Table V), the
     * mean decode batch (Figure 12) and decode's mean SM share */
    cz_json_add_num(summary, "mean_vision_queue_ms",
                    st->vision_starts ? 1e3 * st->vision_wait_sum_s / st->vision_starts : NAN);
    /* Table V's other rows, measured the same way: the processing time S (a request's
     * vision step and whole prefill step), the utilisation lambda S, and Eq. 6's
     * prediction from them, deterministic (M/D/1, as Table V's "predicted" row) and with
     * the measured second moment of S (M/G/1); lambda is the run's arrival rate. The
     * baselines' service is reported too; their vision queue also waits for decode steps
     * (PF-Limit) or hybrid steps (chunked prefill, whose prefill is not one step: no S),
     * so Eq. 6 is Nova's only */
    double n = st->service_n ? (double)st->service_n : NAN;
    double s1 = st->service_sum_s / n, s2 = st->service_sq_sum_s2 / n;
    double lambda = st->arrival_rate_rps;
    cz_json_add_num(summary, "arrival_rate_rps", lambda);
    cz_json_add_num(summary, "mean_vision_service_ms", 1e3 * s1);
    cz_json_add_num(summary, "vision_utilization", lambda * s1);
    bool nova = cfg->xs.kind == CZ_XS_NOVA; /* Eq. 6 models Nova's vision queue */
    cz_json_add_num(summary, "md1_vision_queue_ms",
                    nova ? 1e3 * cz_xs_mg1_wait_s(lambda, s1, s1 * s1) : NAN);
    cz_json_add_num(summary, "mg1_vision_queue_ms",
                    nova ? 1e3 * cz_xs_mg1_wait_s(lambda, s1, s2) : NAN);
    cz_json_add_num(summary, "mean_decode_batch",
                    st->decode_steps ? (double)st->decode_seq_steps / st->decode_steps : NAN);
    cz_json_add_num(summary, "mean_decode_sm_share",
                    st->decode_steps ? st->decode_share_sum / st->decode_steps : NAN);
    double nv = st->vision_starts ? (double)st->vision_starts : NAN;
    cz_json_add_num(summary, "mean_vision_step_ms", 1e3 * st->vision_step_sum_s / nv);
    cz_json_add_num(summary, "mean_vision_stall_ms", 1e3 * st->vision_stall_sum_s / nv);
    cz_json_add_num(summary, "vision_weights_resident_gb", st->vision_resident_bytes / 1e9);
    if (nova) {
        /* the split decode starts from beside each stage (Eq. 3 when enumerated), Eq. 1
         * there, and the latencies Eq. 1 saw (co-run factor included) */
        cJSON_AddNumberToObject(summary, "sm_decode_vision", cfg->xs.sm_decode_vision);
        cJSON_AddNumberToObject(summary, "sm_decode_prefill", cfg->xs.sm_decode_prefill);
        cz_json_add_num(summary, "ideal_e2e_ms", 1e3 * cfg->xs_ideal_e2e_s);
        bool ideal = !isnan(cfg->xs_ideal_e2e_s);
        double k = 1e3 * cfg->xs.corun_slowdown;
        cz_json_add_num(summary, "ideal_vision_ms", ideal ? k * cfg->xs_ideal_vision.vision_s : NAN);
        cz_json_add_num(summary, "ideal_prefill_ms",
                        ideal ? k * cfg->xs_ideal_prefill.prefill_s : NAN);
        cz_json_add_num(summary, "ideal_decode_beside_vision_ms",
                        ideal ? k * cfg->xs_ideal_vision.decode_s : NAN);
        cz_json_add_num(summary, "ideal_decode_beside_prefill_ms",
                        ideal ? k * cfg->xs_ideal_prefill.decode_s : NAN);
    }
}

void cz_run_summary_json(const cz_config *cfg, const cz_metrics *m, const cz_run_stats *st,
                         const cz_summary *sum, cJSON *summary)
{
    bool sketched = sum->pct_mode == CZ_PCT_SKETCH; /* any percentile from a sketch */
    if (m->n_audio) {
        /* the audio's sample rate: the (last) vocoder's */
        double rate_hz = 24000.0;
        for (uint32_t p = 0; p < cfg->model.n_pipe; p++)
            if (cfg->model.stages[cfg->model.pipe[p].stage].kind == CZ_STAGE_VOCODER)
                rate_hz = cfg->model.pipe[p].sample_rate_hz;
        cz_audio_summary a;
        cz_audio_summarize(m, &cfg->slo, sum->duration_s, rate_hz, &a);
        cz_audio_summary_json(summary, &a);
        sketched = sketched || a.ttfp_ms.sketched || a.rtf.sketched || a.duration_s.sketched ||
                   a.underrun_s.sketched;
    }
    if (m->acct.streams) {
        cz_frame_summary f;
        cz_frame_summarize(m, &f);
        cz_frame_summary_json(summary, &f);
        sketched = sketched || f.latency_ms.sketched;
    }
    if (m->acct.streams)
        cz_json_add_num(summary, "mean_stream_kv_blocks", st->stream_end_blocks);
    if (st->replicas > 1) {
        /* how evenly the router spread the turns (docs/metrics.md) */
        cJSON *rt = cJSON_AddObjectToObject(summary, "replica_turns");
        cJSON_AddNumberToObject(rt, "replicas", st->replicas);
        cJSON_AddNumberToObject(rt, "min", st->replica_turns_min);
        cJSON_AddNumberToObject(rt, "mean", st->replica_turns_mean);
        cJSON_AddNumberToObject(rt, "max", st->replica_turns_max);
        cJSON_AddNumberToObject(rt, "cv", st->replica_turns_cv);
    }
    {
        /* the GPUs the deployment holds: each device its replicas' tensor-parallel group */
        uint32_t *tp = cz_xcalloc(cfg->n_gpus ? cfg->n_gpus : 1, sizeof *tp);
        for (uint32_t p = 0; p < cfg->model.n_pipe; p++)
            for (uint32_t r = 0; r < cfg->place[p].replicas; r++) {
                uint32_t g = cz_stage_place_gpu(&cfg->place[p], r);
                if (g < cfg->n_gpus && cz_config_tp(cfg, p) > tp[g])
                    tp[g] = cz_config_tp(cfg, p);
            }
        double gpus = 0;
        for (uint32_t g = 0; g < cfg->n_gpus; g++)
            gpus += tp[g];
        free(tp);
        cJSON_AddNumberToObject(summary, "gpus", gpus);
    }
    if (cfg->pd) {
        /* the KV the decode pool pulled from the prefill pool (docs/metrics.md) */
        cJSON *pd = cJSON_AddObjectToObject(summary, "disaggregation");
        cJSON_AddNumberToObject(pd, "prefill_replicas", cfg->place[CZ_PD_PREFILL].replicas);
        cJSON_AddNumberToObject(pd, "decode_replicas", cfg->place[CZ_PD_DECODE].replicas);
        cJSON_AddNumberToObject(pd, "kv_transfers", (double)st->kv_pulls);
        cJSON_AddNumberToObject(pd, "kv_transfer_bytes", st->kv_pull_bytes);
    }
    bool preload = false, bidi = false;
    for (uint32_t p = 0; p < cfg->model.n_pipe; p++) {
        preload = preload || cfg->place[p].server.kv_preload;
        bidi = bidi || cfg->place[p].server.kv_bidirectional;
    }
    if (bidi) {
        cJSON_AddNumberToObject(summary, "kv_overwrites", (double)st->overwrites);
        cJSON_AddNumberToObject(summary, "kv_checkpointed_tokens", (double)st->overwrite_tokens);
    }
    if (preload) {
        /* LiveServe section 5.2's counters, over every autoregressive replica */
        cJSON *pl = cJSON_AddObjectToObject(summary, "kv_preload");
        CZ_ASSERT(pl != NULL);
        cJSON_AddNumberToObject(pl, "started", (double)st->preload.started);
        cJSON_AddNumberToObject(pl, "hits", (double)st->preload.hits);
        cJSON_AddNumberToObject(pl, "late", (double)st->preload.late);
        cJSON_AddNumberToObject(pl, "skips", (double)st->preload.skips);
        cJSON_AddNumberToObject(pl, "cancels", (double)st->preload.cancels);
        cJSON_AddNumberToObject(pl, "fallbacks", (double)st->preload.fallbacks);
    }
    if (cfg->admission.kind != CZ_ADMIT_ALL) {
        /* the gateway: refused sessions got "server_overloaded" */
        cJSON_AddNumberToObject(summary, "sessions_admitted", (double)st->streams_admitted);
        cJSON_AddNumberToObject(summary, "sessions_rejected", (double)st->streams_rejected);
        cz_json_add_num(summary, "admission_cap",
                        st->admission_cap == UINT32_MAX ? NAN : (double)st->admission_cap);
        cz_json_add_num(summary, "mean_live_sessions", st->live_streams_mean);
    }
    uint64_t gen = 0, heard = 0;
    cJSON *stages = cJSON_CreateArray();
    CZ_ASSERT(stages != NULL);
    for (uint32_t ord = 0;; ord++) {
        uint32_t p = 0;
        while (p < cfg->model.n_pipe && cz_config_ar_ord(cfg, p) != ord)
            p++;
        if (p == cfg->model.n_pipe)
            break;
        cz_stage_summary ss;
        cz_stage_summarize(m, ord, &ss);
        sketched = sketched || ss.kv_reload_ms.sketched || ss.itl_ms.sketched;
        if (!(cfg->pd && p == CZ_PD_PREFILL)) {
            /* a prefill pool's token is the decode pool's first again (vLLM's
             * disaggregated prefill runs with max_tokens 1) */
            gen += ss.generated_tokens;
            heard += ss.heard_tokens;
        }
        cJSON_AddItemToArray(stages, cz_stage_summary_json(&ss, cz_config_stage_name(cfg, p)));
    }
    cJSON_AddNumberToObject(summary, "generated_tokens", (double)gen);
    cJSON_AddNumberToObject(summary, "heard_tokens", (double)heard);
    cz_json_add_num(summary, "waste_ratio", gen ? 1.0 - (double)heard / (double)gen : 0.0);
    cz_json_add_num(summary, "kv_pool_saturated_at_s", st->kv_saturated_at_s);
    cJSON_AddItemToObject(summary, "stages", stages);
    if (cfg->cross_stage)
        xstage_summary_json(cfg, st, summary);
    /* a mixed real-time / best-effort run: the request metrics of each class */
    if (m->has_class[0] && m->has_class[1]) {
        cJSON *classes = cJSON_AddObjectToObject(summary, "classes");
        static const char *const names[2] = {"rt", "be"};
        for (uint32_t c = 0; c < 2; c++) {
            cz_summary cs;
            cz_metrics_summarize_class(m, &cfg->slo, c, &cs);
            sketched = sketched || cs.pct_mode == CZ_PCT_SKETCH;
            cJSON_AddItemToObject(classes, names[c], cz_summary_json(&cs));
        }
    }
    /* which percentiles the summary holds: every one exact, or some within the sketch's
     * bound (docs/metrics.md) */
    cJSON_AddStringToObject(summary, "percentile_mode", sketched ? "sketch" : "exact");
    cJSON_AddNumberToObject(summary, "percentile_rel_error", sketched ? CZ_SKETCH_ALPHA : 0.0);
}

void cz_run_stages(const cz_config *cfg, cz_results_stages *out)
{
    _Static_assert(CZ_MAX_STAGES <= CZ_RESULTS_MAX_STAGES, "a results file names every stage");
    memset(out, 0, sizeof *out);
    for (uint32_t p = 0; p < cfg->model.n_pipe; p++) {
        out->pipe[out->n_pipe++] = cz_config_stage_name(cfg, p);
        uint32_t ord = cz_config_ar_ord(cfg, p);
        if (ord != UINT32_MAX) {
            out->ar[ord] = cz_config_stage_name(cfg, p);
            out->n_ar++;
        }
    }
    CZ_ASSERT(out->n_pipe >= 1 && out->n_ar >= 1);
}

bool cz_run_add_theory(const cz_config *cfg, const cJSON *cfg_json, const cz_summary *sum,
                       cJSON *summary)
{
    if (cfg->cost_kind != CZ_COST_SERVICE || cfg->place[0].server.max_num_seqs != 1)
        return false;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cfg_json, "workload");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(w, "arrivals");
    const cJSON *proc = cJSON_GetObjectItemCaseSensitive(a, "process");
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(a, "rate_rps");
    if (!cJSON_IsString(proc) || strcmp(proc->valuestring, "poisson") != 0 ||
        !cJSON_IsNumber(rate))
        return false;
    double lambda = rate->valuedouble;
    double rho = lambda * cz_distspec_mean(&cfg->service);
    if (!(rho < 1.0))
        return false;
    double wq_s = lambda * cz_distspec_second_moment(&cfg->service) / (2.0 * (1.0 - rho));
    cJSON *th = cJSON_AddObjectToObject(summary, "queueing_theory");
    cJSON_AddStringToObject(th, "model",
                            cfg->service.kind == CZ_DIST_EXPONENTIAL ? "M/M/1" : "M/G/1");
    cz_json_add_num(th, "rho", rho);
    cz_json_add_num(th, "mean_queue_wait_ms", wq_s * 1e3);
    cz_json_add_num(th, "relative_error", (sum->queue_wait_ms.mean - wq_s * 1e3) / (wq_s * 1e3));
    return true;
}
