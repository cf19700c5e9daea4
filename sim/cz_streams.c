/* cz_streams.c - see cz_streams.h. */
#include "cz_streams.h"

#include <math.h>
#include <stdlib.h>

#include "cz_base.h"

enum { IDLE = 0, HOST = 1, GPU = 2 };

void cz_streams_init(cz_streams *s, uint32_t n, double corun_slowdown)
{
    CZ_ASSERT(n >= 1 && isfinite(corun_slowdown) && corun_slowdown >= 1.0);
    s->n = n;
    s->corun = corun_slowdown;
    s->host_left_s = cz_xcalloc(n, sizeof *s->host_left_s);
    s->gpu_left_s = cz_xcalloc(n, sizeof *s->gpu_left_s);
    s->phase = cz_xcalloc(n, sizeof *s->phase);
    s->on_host = s->on_gpu = s->inflight = 0;
    s->at_s = 0.0;
    s->epoch = 0;
}

void cz_streams_free(cz_streams *s)
{
    free(s->host_left_s);
    free(s->gpu_left_s);
    free(s->phase);
    s->host_left_s = s->gpu_left_s = NULL;
    s->phase = NULL;
}

double cz_streams_slowdown(const cz_streams *s, uint32_t k)
{
    return k <= 1 ? 1.0 : 1.0 + (double)(k - 1) * (s->corun - 1.0);
}

/* Every step in flight progresses from at_s to now_s at the current rates. */
static void advance(cz_streams *s, double now_s)
{
    CZ_ASSERT(now_s >= s->at_s);
    double dt = now_s - s->at_s;
    /* a lone step (the common case) progresses at full rate: dt / 1 is dt exactly */
    double host = s->on_host > 1 ? dt / s->on_host : s->on_host ? dt : 0.0;
    double gpu = s->on_gpu > 1 ? dt / cz_streams_slowdown(s, s->on_gpu) : dt;
    for (uint32_t i = 0; i < s->n; i++) {
        double *left = s->phase[i] == HOST ? &s->host_left_s[i]
                       : s->phase[i] == GPU ? &s->gpu_left_s[i]
                                            : NULL;
        if (!left)
            continue;
        *left -= s->phase[i] == HOST ? host : gpu;
        if (*left < 0.0)
            *left = 0.0; /* rounding at a boundary */
    }
    s->at_s = now_s;
}

void cz_streams_start(cz_streams *s, uint32_t i, double now_s, double host_s, double gpu_s)
{
    CZ_ASSERT(i < s->n && s->phase[i] == IDLE && host_s >= 0.0 && gpu_s >= 0.0);
    advance(s, now_s);
    s->host_left_s[i] = host_s;
    s->gpu_left_s[i] = gpu_s;
    if (host_s > 0.0) {
        s->phase[i] = HOST;
        s->on_host++;
    } else {
        s->phase[i] = GPU;
        s->on_gpu++;
    }
    s->inflight++;
    s->epoch++;
}

double cz_streams_next_s(const cz_streams *s, uint32_t i)
{
    CZ_ASSERT(i < s->n && s->phase[i] != IDLE);
    if (s->phase[i] == HOST)
        return s->at_s + s->host_left_s[i] * s->on_host;
    return s->at_s + s->gpu_left_s[i] * cz_streams_slowdown(s, s->on_gpu);
}

bool cz_streams_boundary(cz_streams *s, uint32_t i, double now_s)
{
    CZ_ASSERT(i < s->n && s->phase[i] != IDLE);
    advance(s, now_s);
    s->epoch++;
    if (s->phase[i] == HOST) {
        s->host_left_s[i] = 0.0;
        s->on_host--;
        s->phase[i] = GPU;
        s->on_gpu++;
        if (s->gpu_left_s[i] > 0.0)
            return false;
    }
    s->gpu_left_s[i] = 0.0;
    s->on_gpu--;
    s->phase[i] = IDLE;
    s->inflight--;
    return true;
}
