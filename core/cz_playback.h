/* cz_playback.h - the client's audio player and the per-turn audio metrics.
 *
 * A simulated client receives the audio chunks of one spoken reply, in order (each: the
 * time it reached the client, its playable duration), and plays them. The player keeps
 * O(1) state, allocates nothing, and answers two families of questions:
 *
 *  - vLLM-Omni's continuity metric, exactly as its serving benchmark computes it
 *    (vllm_omni/benchmarks/audio_continuity.py, compute_continuity_stats): a clock starts
 *    at the first chunk's arrival t_1 and consumes audio in real time without ever
 *    pausing; at the arrival t_i of every later chunk the deficit is
 *        D_i = (t_i - t_1) - (seconds of audio received before chunk i),
 *    `max_underrun_s` is the largest positive D_i (0 when none), `underruns` counts the
 *    chunks with D_i > 0, and the turn is continuous when max_underrun_s <= threshold_s
 *    (default 0.1 s). D_i <= 0 for all i is VoxServe's streaming viability (Eq. 2).
 *
 *  - A physical player for barge-in: it starts playing at the first chunk, plays received
 *    audio at real-time rate, and pauses whenever it runs dry (a stall), resuming when the
 *    next chunk arrives. `frontier_s` is when everything received so far finishes playing.
 *    Its total stall time equals vLLM-Omni's max_underrun_s (both are max(0, max_i D_i));
 *    its largest single stall (`max_stall_s`) is the "gap" LiveServe's prose describes.
 *
 * Definitions, sources and the summary keys: docs/playback.md. */
#ifndef CZ_PLAYBACK_H
#define CZ_PLAYBACK_H

#include <stdbool.h>
#include <stdint.h>

/* vLLM-Omni's default continuity threshold, defs.AUDIO_CONTINUITY_DEFAULT_THRESHOLD_S
 * (vllm_omni/metrics/definitions.py); LiveServe §7.1 uses the same 100 ms. */
#define CZ_PLAYER_THRESHOLD_S 0.1

/* One turn's player. Plain data: copy it freely. Times are driver seconds. */
typedef struct cz_player {
    double threshold_s;    /* continuity threshold (CZ_PLAYER_THRESHOLD_S by default) */
    double start_s;        /* arrival of the first chunk t_1 (NaN before any) */
    double last_arrival_s; /* arrival of the latest chunk (NaN before any) */
    double frontier_s;     /* when the audio received so far finishes playing, with the
                              pauses of the physical player (NaN before any chunk) */
    double audio_s;        /* seconds of audio received (vLLM-Omni's audio_duration) */
    double max_underrun_s; /* vLLM-Omni's max_underrun_s: max(0, max_i D_i) */
    double stall_s;        /* physical player: total time spent paused waiting for audio */
    double max_stall_s;    /* physical player: the longest single pause */
    uint32_t chunks;       /* chunks with a positive duration */
    uint32_t underruns;    /* vLLM-Omni's underrun_event_count: chunks with D_i > 0 */
    uint32_t stalls;       /* physical player: pauses of positive length */
} cz_player;

/* Resets `p` to a player that has received nothing, with continuity threshold
 * `threshold_s` (>= 0, finite; pass CZ_PLAYER_THRESHOLD_S for vLLM-Omni's default). */
void cz_player_init(cz_player *p, double threshold_s);

/* Feeds one chunk that reached the client at `arrival_s` carrying `duration_s` seconds of
 * playable audio. Chunks must come in arrival order (arrival_s >= the previous arrival,
 * asserted) with a finite duration_s >= 0. A chunk of zero duration is ignored entirely,
 * as vLLM-Omni skips empty reads. O(1), no allocation. */
void cz_player_chunk(cz_player *p, double arrival_s, double duration_s);

/* Seconds of audio the physical player has played by time `t_s`: 0 before the first
 * chunk, growing at real-time rate while audio is buffered, flat during stalls, and at
 * most audio_s. With chunks received, `t_s` must be >= the last chunk's arrival
 * (asserted): the answer then needs only the state after that chunk. On a barge-in at
 * t_s, everything beyond this point was generated but never heard. */
double cz_player_heard_s(const cz_player *p, double t_s);

/* Seconds of received audio not yet played at `t_s` (audio_s - heard_s): the playback
 * buffer LiveServe's scheduler protects (§4.1, U0). Same precondition on t_s as
 * cz_player_heard_s; 0 before the first chunk. */
double cz_player_buffer_s(const cz_player *p, double t_s);

/* vLLM-Omni's is_continuous: max_underrun_s <= threshold_s (inclusive). True for a
 * player that received nothing (vLLM-Omni returns ContinuityStats(0.0, 0, True)). */
bool cz_player_continuous(const cz_player *p);

/* When playback of everything received so far ends (frontier_s); NaN before any chunk. */
double cz_player_end_s(const cz_player *p);

/* Audio TTFP of one turn: first_chunk_s - request_start_s, where request_start_s is when
 * the client sent the turn (vLLM-Omni's `st`, taken just before the request is posted;
 * LiveServe: the end of the user's turn) and first_chunk_s the first audio chunk's
 * arrival at the client. NaN when first_chunk_s is NaN (no audio). Seconds; the summary
 * reports milliseconds. */
double cz_audio_ttfp_s(double request_start_s, double first_chunk_s);

/* Audio RTF of one turn: (last_chunk_s - request_start_s) / audio_s, vLLM-Omni's
 * compute_audio_rtf(audio_generate_time, audio_duration) with audio_generate_time = the
 * last audio chunk's arrival minus the request start. NaN when audio_s <= 0 or any input
 * is NaN (vLLM-Omni records 0.0 there; see docs/playback.md). */
double cz_audio_rtf(double request_start_s, double last_chunk_s, double audio_s);

/* cz_audio_ttfp_s and cz_audio_rtf applied to a player's first and last arrivals and
 * its received audio. */
double cz_player_ttfp_s(const cz_player *p, double request_start_s);
double cz_player_rtf(const cz_player *p, double request_start_s);

/* vLLM-Omni's audio_throughput: seconds of audio of all completed turns per second of
 * benchmark duration. NaN when duration_s <= 0. */
double cz_audio_throughput(double total_audio_s, double duration_s);

/* vLLM-Omni's audio_continuity_ok_rate: continuous / n, and 1.0 when n == 0 (vLLM-Omni's
 * default). `continuous` <= n. */
double cz_audio_continuity_ok_rate(uint64_t continuous, uint64_t n);

#endif
