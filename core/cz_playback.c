/* cz_playback.c - see cz_playback.h; definitions and sources in docs/playback.md. */
#include "cz_playback.h"

#include <math.h>

#include "cz_base.h"

void cz_player_init(cz_player *p, double threshold_s)
{
    CZ_ASSERT(p != NULL);
    CZ_ASSERT(isfinite(threshold_s) && threshold_s >= 0.0);
    p->threshold_s = threshold_s;
    p->start_s = NAN;
    p->last_arrival_s = NAN;
    p->frontier_s = NAN;
    p->audio_s = 0.0;
    p->max_underrun_s = 0.0;
    p->stall_s = 0.0;
    p->max_stall_s = 0.0;
    p->chunks = 0;
    p->underruns = 0;
    p->stalls = 0;
}

void cz_player_chunk(cz_player *p, double arrival_s, double duration_s)
{
    CZ_ASSERT(isfinite(arrival_s));
    CZ_ASSERT(isfinite(duration_s) && duration_s >= 0.0);
    CZ_ASSERT(p->chunks == 0 || arrival_s >= p->last_arrival_s);
    /* vLLM-Omni's benchmark skips empty reads before stamping an arrival
     * (vllm_omni/benchmarks/patch/patch.py, async_request_openai_audio_speech). */
    if (duration_s == 0.0)
        return;
    if (p->chunks == 0) {
        p->start_s = arrival_s;
        p->frontier_s = arrival_s;
    } else {
        /* vLLM-Omni compute_continuity_stats: deficit of a never-pausing clock started at
         * the first arrival, against the audio received before this chunk. */
        double deficit_s = (arrival_s - p->start_s) - p->audio_s;
        if (deficit_s > 0.0) {
            p->underruns++;
            if (deficit_s > p->max_underrun_s)
                p->max_underrun_s = deficit_s;
        }
        /* Physical player: it ran dry at frontier_s and waited until this arrival. */
        double gap_s = arrival_s - p->frontier_s;
        if (gap_s > 0.0) {
            p->stalls++;
            p->stall_s += gap_s;
            if (gap_s > p->max_stall_s)
                p->max_stall_s = gap_s;
            p->frontier_s = arrival_s;
        }
    }
    p->frontier_s += duration_s;
    p->audio_s += duration_s;
    p->last_arrival_s = arrival_s;
    p->chunks++;
}

double cz_player_heard_s(const cz_player *p, double t_s)
{
    if (p->chunks == 0)
        return 0.0;
    CZ_ASSERT(t_s >= p->last_arrival_s);
    /* From the last arrival on, the player never stalls before frontier_s, so what is
     * left to play at t_s is frontier_s - t_s. */
    double left_s = p->frontier_s - t_s;
    if (left_s <= 0.0)
        return p->audio_s;
    double heard_s = p->audio_s - left_s;
    return heard_s > 0.0 ? heard_s : 0.0;
}

double cz_player_buffer_s(const cz_player *p, double t_s)
{
    return p->audio_s - cz_player_heard_s(p, t_s);
}

bool cz_player_continuous(const cz_player *p)
{
    return p->max_underrun_s <= p->threshold_s;
}

double cz_player_end_s(const cz_player *p)
{
    return p->frontier_s;
}

double cz_audio_ttfp_s(double request_start_s, double first_chunk_s)
{
    return first_chunk_s - request_start_s;
}

double cz_audio_rtf(double request_start_s, double last_chunk_s, double audio_s)
{
    if (!(audio_s > 0.0))
        return NAN;
    return (last_chunk_s - request_start_s) / audio_s;
}

double cz_player_ttfp_s(const cz_player *p, double request_start_s)
{
    return cz_audio_ttfp_s(request_start_s, p->start_s);
}

double cz_player_rtf(const cz_player *p, double request_start_s)
{
    return cz_audio_rtf(request_start_s, p->last_arrival_s, p->audio_s);
}

double cz_audio_throughput(double total_audio_s, double duration_s)
{
    if (!(duration_s > 0.0))
        return NAN;
    return total_audio_s / duration_s;
}

double cz_audio_continuity_ok_rate(uint64_t continuous, uint64_t n)
{
    CZ_ASSERT(continuous <= n);
    if (n == 0)
        return 1.0;
    return (double)continuous / (double)n;
}
