/* test_playback.c - the client's audio player on chunk sequences worked out by hand:
 * vLLM-Omni's continuity deficit (max_underrun_s, underruns, the inclusive 0.1 s
 * threshold), the pausing player's stalls and heard seconds, and the per-turn audio
 * metrics (docs/playback.md). Times are chosen to be exact in binary floating point
 * wherever an equality is asserted. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>

#include "cz_metrics.h"
#include "cz_playback.h"

static cz_player fed(const double (*chunks)[2], size_t n)
{
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    for (size_t i = 0; i < n; i++)
        cz_player_chunk(&p, chunks[i][0], chunks[i][1]);
    return p;
}

Test(playback, zero_chunks)
{
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    cr_assert_eq(p.chunks, 0);
    cr_assert(isnan(p.start_s) && isnan(p.last_arrival_s));
    cr_assert(isnan(cz_player_end_s(&p)));
    cr_assert_float_eq(cz_player_heard_s(&p, -1.0), 0.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 100.0), 0.0, 0);
    cr_assert_float_eq(cz_player_buffer_s(&p, 5.0), 0.0, 0);
    /* vLLM-Omni: no chunks -> ContinuityStats(0.0, 0, True). */
    cr_assert(cz_player_continuous(&p));
    cr_assert_float_eq(p.max_underrun_s, 0.0, 0);
    cr_assert_eq(p.underruns, 0);
    cr_assert(isnan(cz_player_ttfp_s(&p, 0.0)));
    cr_assert(isnan(cz_player_rtf(&p, 0.0)));
}

Test(playback, back_to_back_chunks_never_underrun)
{
    /* 0.5 s chunks at 0, 0.5, 1.0: D_2 = 0.5 - 0.5 = 0, D_3 = 1.0 - 1.0 = 0 (not > 0). */
    const double c[][2] = {{0.0, 0.5}, {0.5, 0.5}, {1.0, 0.5}};
    cz_player p = fed(c, 3);
    cr_assert_eq(p.chunks, 3);
    cr_assert_eq(p.underruns, 0);
    cr_assert_eq(p.stalls, 0);
    cr_assert_float_eq(p.max_underrun_s, 0.0, 0);
    cr_assert_float_eq(p.stall_s, 0.0, 0);
    cr_assert_float_eq(p.audio_s, 1.5, 0);
    cr_assert_float_eq(p.start_s, 0.0, 0);
    cr_assert_float_eq(cz_player_end_s(&p), 1.5, 0); /* 0 + 1.5 s of audio, no pause */
    cr_assert(cz_player_continuous(&p));
    cr_assert_float_eq(cz_player_heard_s(&p, 1.0), 1.0, 0); /* 1.5 - (1.5 - 1.0) */
    cr_assert_float_eq(cz_player_buffer_s(&p, 1.0), 0.5, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 2.0), 1.5, 0); /* all of it */
}

Test(playback, late_chunk_underrun)
{
    /* 1 s of audio at 0, runs dry at 1.0; next chunk at 1.25:
     * D_2 = (1.25 - 0) - 1.0 = 0.25 = the one stall; frontier = 1.25 + 1.0 = 2.25. */
    const double c[][2] = {{0.0, 1.0}, {1.25, 1.0}};
    cz_player p = fed(c, 2);
    cr_assert_float_eq(p.max_underrun_s, 0.25, 0);
    cr_assert_eq(p.underruns, 1);
    cr_assert_eq(p.stalls, 1);
    cr_assert_float_eq(p.stall_s, 0.25, 0);
    cr_assert_float_eq(p.max_stall_s, 0.25, 0);
    cr_assert_float_eq(cz_player_end_s(&p), 2.25, 0);
    cr_assert_not(cz_player_continuous(&p)); /* 0.25 > 0.1 */
}

Test(playback, deficit_accumulates_across_small_gaps)
{
    /* Three 0.5 s chunks, each 0.0625 s late on the physical player:
     * D_2 = 0.5625 - 0.5 = 0.0625, D_3 = 1.125 - 1.0 = 0.125. vLLM-Omni's max_underrun_s
     * is the cumulative lateness 0.125 > 0.1, although no single gap exceeds 0.0625. */
    const double c[][2] = {{0.0, 0.5}, {0.5625, 0.5}, {1.125, 0.5}};
    cz_player p = fed(c, 3);
    cr_assert_float_eq(p.max_underrun_s, 0.125, 0);
    cr_assert_eq(p.underruns, 2);
    cr_assert_eq(p.stalls, 2);
    cr_assert_float_eq(p.max_stall_s, 0.0625, 0);
    cr_assert_float_eq(p.stall_s, 0.125, 0); /* total stall = max_i D_i */
    cr_assert_float_eq(cz_player_end_s(&p), 1.625, 0);
    cr_assert_not(cz_player_continuous(&p));
}

Test(playback, underrun_events_count_chunks_behind_schedule_not_stalls)
{
    /* 1 s chunks at 0, 1.5, 2.25. D_2 = 1.5 - 1 = 0.5, D_3 = 2.25 - 2 = 0.25: two
     * vLLM-Omni underrun events. The physical player stalls once (1.0 -> 1.5), then
     * plays until 2.5, so the chunk at 2.25 arrives while it is playing. */
    const double c[][2] = {{0.0, 1.0}, {1.5, 1.0}, {2.25, 1.0}};
    cz_player p = fed(c, 3);
    cr_assert_eq(p.underruns, 2);
    cr_assert_float_eq(p.max_underrun_s, 0.5, 0);
    cr_assert_eq(p.stalls, 1);
    cr_assert_float_eq(p.stall_s, 0.5, 0);
    cr_assert_float_eq(cz_player_end_s(&p), 3.5, 0); /* 2.5 + 1.0 */
}

Test(playback, total_stall_equals_max_deficit)
{
    /* 1 s chunks at 0, 1.5, 2.6: D_2 = 0.5, D_3 = 0.6. Stalls 0.5 (1.0 -> 1.5) and
     * 0.1 (2.5 -> 2.6): total 0.6 = max D_i, longest 0.5. */
    const double c[][2] = {{0.0, 1.0}, {1.5, 1.0}, {2.6, 1.0}};
    cz_player p = fed(c, 3);
    cr_assert_float_eq(p.max_underrun_s, 0.6, 1e-12);
    cr_assert_float_eq(p.stall_s, 0.6, 1e-12);
    cr_assert_float_eq(p.max_stall_s, 0.5, 0);
    cr_assert_eq(p.stalls, 2);
    cr_assert_eq(p.underruns, 2);
    cr_assert_float_eq(cz_player_end_s(&p), 3.6, 1e-12);
}

Test(playback, threshold_is_inclusive)
{
    /* 0.125 s at 0, next at 0.225: D_2 = 0.225 - 0.125 = 0.1 exactly (in doubles too).
     * vLLM-Omni: is_continuous = max_underrun_s <= threshold_s. */
    const double on[][2] = {{0.0, 0.125}, {0.225, 1.0}};
    cz_player p = fed(on, 2);
    cr_assert_eq(p.max_underrun_s, 0.1);
    cr_assert(cz_player_continuous(&p));

    /* 0.1 us later: D_2 = 0.1000001 > 0.1. */
    const double off[][2] = {{0.0, 0.125}, {0.2250001, 1.0}};
    cz_player q = fed(off, 2);
    cr_assert_gt(q.max_underrun_s, 0.1);
    cr_assert_float_eq(q.max_underrun_s, 0.1000001, 1e-12);
    cr_assert_not(cz_player_continuous(&q));
}

Test(playback, threshold_is_configurable)
{
    /* The 0.25 s underrun of late_chunk_underrun passes a 0.25 s threshold, not 0.2. */
    cz_player p;
    cz_player_init(&p, 0.25);
    cz_player_chunk(&p, 0.0, 1.0);
    cz_player_chunk(&p, 1.25, 1.0);
    cr_assert(cz_player_continuous(&p));
    p.threshold_s = 0.2;
    cr_assert_not(cz_player_continuous(&p));
}

Test(playback, heard_before_during_after_underrun)
{
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&p, 0.0, 1.0);
    /* Playing the first second. */
    cr_assert_float_eq(cz_player_heard_s(&p, 0.0), 0.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 0.5), 0.5, 0);
    cr_assert_float_eq(cz_player_buffer_s(&p, 0.5), 0.5, 0);
    /* Ran dry at 1.0: heard stays at 1.0 during the underrun. */
    cr_assert_float_eq(cz_player_heard_s(&p, 1.0), 1.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 1.25), 1.0, 0);
    cr_assert_float_eq(cz_player_buffer_s(&p, 1.25), 0.0, 0);
    /* Next second arrives at 1.5 and resumes playback: frontier 2.5. */
    cz_player_chunk(&p, 1.5, 1.0);
    cr_assert_float_eq(cz_player_heard_s(&p, 1.5), 1.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 2.0), 1.5, 0);
    cr_assert_float_eq(cz_player_buffer_s(&p, 2.0), 0.5, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 2.5), 2.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 3.0), 2.0, 0);
    cr_assert_float_eq(cz_player_end_s(&p), 2.5, 0);
}

Test(playback, early_chunks_buffer_ahead)
{
    /* Three 1 s chunks by 0.5: D_2 = 0.25 - 1 < 0, D_3 = 0.5 - 2 < 0. Playback runs
     * 0 -> 3.0 without a pause; at 0.5 half a second is heard, 2.5 s are buffered. */
    const double c[][2] = {{0.0, 1.0}, {0.25, 1.0}, {0.5, 1.0}};
    cz_player p = fed(c, 3);
    cr_assert_eq(p.underruns, 0);
    cr_assert_eq(p.stalls, 0);
    cr_assert_float_eq(p.max_underrun_s, 0.0, 0);
    cr_assert_float_eq(cz_player_end_s(&p), 3.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 0.5), 0.5, 0);
    cr_assert_float_eq(cz_player_buffer_s(&p, 0.5), 2.5, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 2.0), 2.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 3.0), 3.0, 0);
    cr_assert_float_eq(cz_player_heard_s(&p, 10.0), 3.0, 0);
    cr_assert(cz_player_continuous(&p));
}

Test(playback, empty_chunks_are_ignored)
{
    /* vLLM-Omni skips empty reads: a zero-length chunk neither starts the clock nor
     * counts as an arrival. */
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&p, 0.5, 0.0);
    cr_assert_eq(p.chunks, 0);
    cr_assert(isnan(p.start_s));
    cz_player_chunk(&p, 1.0, 0.5);
    cz_player_chunk(&p, 1.75, 0.0); /* would be D = 0.25 if it counted */
    cz_player_chunk(&p, 2.0, 0.5);  /* D = (2.0 - 1.0) - 0.5 = 0.5 */
    cr_assert_eq(p.chunks, 2);
    cr_assert_float_eq(p.start_s, 1.0, 0);
    cr_assert_float_eq(p.last_arrival_s, 2.0, 0);
    cr_assert_eq(p.underruns, 1);
    cr_assert_float_eq(p.max_underrun_s, 0.5, 0);
}

Test(playback, ttfp_and_rtf)
{
    /* Turn sent at 10.0; audio 0.5 s at 10.25, 0.5 s at 10.75, 1.0 s at 11.5.
     * TTFP = 10.25 - 10.0 = 0.25 s; RTF = (11.5 - 10.0) / 2.0 = 0.75. */
    const double c[][2] = {{10.25, 0.5}, {10.75, 0.5}, {11.5, 1.0}};
    cz_player p = fed(c, 3);
    cr_assert_float_eq(cz_player_ttfp_s(&p, 10.0), 0.25, 0);
    cr_assert_float_eq(cz_player_rtf(&p, 10.0), 0.75, 0);
    cr_assert_float_eq(cz_audio_ttfp_s(10.0, 10.25), 0.25, 0);
    cr_assert_float_eq(cz_audio_rtf(10.0, 11.5, 2.0), 0.75, 0);
    cr_assert(isnan(cz_audio_rtf(0.0, 3.0, 0.0)));
    cr_assert(isnan(cz_audio_ttfp_s(0.0, NAN)));
}

Test(playback, run_level_helpers)
{
    cr_assert_float_eq(cz_audio_throughput(30.0, 10.0), 3.0, 0);
    cr_assert(isnan(cz_audio_throughput(30.0, 0.0)));
    cr_assert_float_eq(cz_audio_continuity_ok_rate(2, 3), 2.0 / 3.0, 1e-15);
    cr_assert_float_eq(cz_audio_continuity_ok_rate(0, 0), 1.0, 0); /* vLLM-Omni default */
}

Test(playback, out_of_order_chunk_aborts, .signal = SIGABRT)
{
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&p, 1.0, 0.5);
    cz_player_chunk(&p, 0.5, 0.5);
}

Test(playback, heard_before_last_arrival_aborts, .signal = SIGABRT)
{
    cz_player p;
    cz_player_init(&p, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&p, 1.0, 0.5);
    (void)cz_player_heard_s(&p, 0.5);
}

/* A completed turn's record as the simulator fills it at the reply's end. */
static cz_audio_record record_of(const cz_player *p, double ready_s, uint32_t barged)
{
    return (cz_audio_record){.barged = barged, .continuous = cz_player_continuous(p),
                             .underruns = p->underruns, .chunks = p->chunks,
                             .ready_s = ready_s, .first_audio_s = p->start_s,
                             .last_audio_s = p->last_arrival_s, .audio_s = p->audio_s,
                             .max_underrun_s = p->max_underrun_s};
}

/* VoxServe's streaming viability (Eq. 2) per chunk with threshold 0, beside vLLM-Omni's
 * continuity (0.1 s): turn A's third chunk arrives 0.1 s behind the never-pausing clock
 * (2.3 - 1.0 against 1.2 s received): late for Eq. 2, continuous for vLLM-Omni; turn B's
 * second chunk arrives exactly when the first ends (D = 0): in time; turn D has one chunk,
 * which Eq. 2 does not constrain; the barged turn is left out, as for continuity. 2 of 3
 * paced chunks in time. Throughput: 3.8 s of audio from the first turn sent (0) to the
 * last chunk (2.5). */
Test(playback, streaming_viability_per_chunk_and_inverse_rtf)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_player a, b, c, d;
    cz_player_init(&a, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&a, 1.0, 0.6);
    cz_player_chunk(&a, 1.5, 0.6);
    cz_player_chunk(&a, 2.3, 0.6);
    cz_player_init(&b, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&b, 2.0, 0.5);
    cz_player_chunk(&b, 2.5, 0.5);
    cz_player_init(&c, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&c, 1.0, 0.1);
    cz_player_chunk(&c, 3.0, 0.1);
    cz_player_init(&d, CZ_PLAYER_THRESHOLD_S);
    cz_player_chunk(&d, 0.4, 1.0);
    cr_assert_eq(a.underruns, 1);
    cr_assert(cz_player_continuous(&a));
    cr_assert_eq(b.underruns, 0);
    cz_audio_record r[] = {record_of(&a, 0.5, 0), record_of(&b, 1.5, 0),
                           record_of(&c, 0.8, 1), record_of(&d, 0.0, 0)};
    for (int i = 0; i < 4; i++)
        cz_metrics_add_audio(&m, &r[i]);
    cz_audio_summary s;
    cz_audio_summarize(&m, NULL, 10.0, 24000.0, &s);
    cr_assert_eq(s.completed, 3);
    cr_assert_float_eq(s.continuity_ok_rate, 1.0, 0);
    cr_assert_eq(s.paced_chunks, 3);
    cr_assert_eq(s.underrun_events, 1);
    cr_assert_float_eq(s.streaming_viability, 2.0 / 3.0, 1e-15);
    cr_assert_float_eq(s.total_audio_s, 3.8, 1e-12);
    cr_assert_float_eq(s.audio_span_s, 2.5, 1e-15);
    cr_assert_float_eq(s.inverse_rtf, 3.8 / 2.5, 1e-12);
    cz_metrics_free(&m);
    /* no chunk after a first: nothing for Eq. 2 to judge */
    cz_metrics_init(&m, 0.0, 0);
    cz_metrics_add_audio(&m, &r[3]);
    cz_audio_summarize(&m, NULL, 10.0, 24000.0, &s);
    cr_assert_eq(s.paced_chunks, 0);
    cr_assert(isnan(s.streaming_viability));
    cz_metrics_free(&m);
}
