/* cz_xstage.c - the discrete-event driver of the cross-stage runtime
 * (runtime/cz_xstage.h): time is an event queue, a step ends its predicted time after
 * it starts, an arrival timer is an event. Nothing else: the workers, queues, partitions,
 * step costs and accounting are the runtime's. */

#include "cz_evq.h"
#include "cz_sim_int.h"
#include "cz_xstage.h"

enum { XE_ARRIVAL = 1, XE_EXCL_DONE, XE_DECODE_DONE };

static void drv_start(void *ctx, const cz_xs_step *s, double now)
{
    cz_evq *q = ctx;
    cz_evq_push(q, now + s->predicted_s, s->work == CZ_XS_DECODE ? XE_DECODE_DONE : XE_EXCL_DONE,
                0, 0);
}

static void drv_timer(void *ctx, double t)
{
    cz_evq_push(ctx, t, XE_ARRIVAL, 0, 0);
}

cz_status cz__xstage_run(const cz_config *cfg, const cz_workload *wl, cz_metrics *m,
                         volatile sig_atomic_t *stop, bool *partial, cz_run_stats *stats,
                         cz_run_progress_fn progress, void *progress_ctx, cz_err *err)
{
    cz_evq q;
    cz_xs_driver drv = {.ctx = &q, .start = drv_start, .timer = drv_timer};
    cz_xstage *x;
    cz_status st = cz_xstage_create(cfg, wl, m, stats, &drv, &x, err);
    if (st != CZ_OK)
        return st;
    cz_evq_init(&q, 16);
    cz_xstage_start(x);
    cz_event ev;
    double now = 0.0;
    bool cut = false; /* the clock stopped at sim.max_time_s with events still due */
    uint64_t arrived, finished;
    /* every event here is an arrival or a completed step, progress by itself: a stuck
     * request shows as a drained queue (cz_xstage_finish), and no watchdog is needed */
    while (cz_evq_pop(&q, &ev)) {
        if (ev.t_s > cfg->max_time_s || (stop && *stop)) {
            *partial = stop && *stop;
            cut = true;
            break;
        }
        if (ev.t_s > CZ_CLOCK_MAX_S) {
            cz_evq_free(&q);
            cz_xstage_free(x);
            return cz_run_clock_error(ev.t_s, err);
        }
        now = ev.t_s;
        stats->events++;
        switch (ev.type) {
        case XE_ARRIVAL: cz_xstage_arrival(x, now); break;
        case XE_EXCL_DONE: cz_xstage_excl_done(x, now); break;
        case XE_DECODE_DONE: cz_xstage_decode_done(x, now); break;
        default: CZ_ASSERT(0 && "unknown event");
        }
        if (progress && (stats->events & 0xFFFF) == 0) {
            cz_xstage_counts(x, &arrived, &finished);
            cz_run_progress pr = {now, stats->events, arrived, finished, wl->n_turns, false};
            progress(progress_ctx, &pr);
        }
    }
    st = cz_xstage_finish(x, cut, now, err);
    stats->sim_time_s = now;
    if (progress) {
        cz_xstage_counts(x, &arrived, &finished);
        cz_run_progress pr = {now, stats->events, arrived, finished, wl->n_turns, true};
        progress(progress_ctx, &pr);
    }
    cz_evq_free(&q);
    cz_xstage_free(x);
    cz_metrics_finish(m);
    if (st == CZ_OK)
        st = cz_metrics_check(m, err);
    return st;
}
