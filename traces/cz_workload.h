/* cz_workload.h - the one workload type every reader and generator produces and both
 * drivers consume: sessions made of turns, and periodic frame streams.
 *
 * Storage is flat: a cz_workload owns arrays of sessions, turns (each session's turns
 * are contiguous), streams, a pool of Mooncake prefix-block hashes and a pool of session
 * names. Times are seconds from the start of the workload (the first arrival of a trace
 * is moved to 0 unless a window says otherwise). See docs/workload.md for the fields
 * and the JSONL format that stores them. */
#ifndef CZ_WORKLOAD_H
#define CZ_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_base.h"

typedef enum cz_class {
    CZ_CLASS_RT = 0, /* real-time (interactive) */
    CZ_CLASS_BE = 1  /* best-effort */
} cz_class;

/* How the turns of a session are timed. */
typedef enum cz_timing {
    CZ_TIMING_OPEN = 0,  /* every turn's arrival_s is fixed by the trace (open loop) */
    CZ_TIMING_CLOSED = 1 /* turn k+1 starts think_s after turn k's reply ends (closed loop);
                            only the first turn's arrival_s is meaningful */
} cz_timing;

/* One user turn and the model's reply to it. */
typedef struct cz_turn {
    double arrival_s;         /* input ready at the server (= user speech end); open loop */
    double speech_s;          /* user speech duration before arrival_s (0 for text input) */
    uint32_t in_text_tokens;  /* input tokens per modality */
    uint32_t in_audio_tokens;
    uint32_t in_image_tokens;
    uint32_t out_text_tokens;  /* tokens the text (thinker) stage generates */
    uint32_t out_audio_tokens; /* tokens the audio (talker) stage generates; 0 for text */
    double out_audio_s;        /* seconds of audio the reply plays for; 0 for text */
    double think_s;            /* user think time after the reply before the next turn */
    double barge_in_s;         /* < 0: no barge-in; else offset after the first audio at
                                  which the user interrupts the reply */
    uint32_t hash_off;         /* Mooncake prefix-block hashes: pool[hash_off .. +hash_len) */
    uint32_t hash_len;         /* 0 when the source has none */
} cz_turn;

typedef struct cz_session {
    uint32_t name_off;  /* offset of the NUL-terminated name in the name pool */
    uint32_t turn_off;  /* first turn in the turns array */
    uint32_t n_turns;
    cz_class cls;
    cz_timing timing;
} cz_session;

/* A periodic real-time stream (Metronome §2): every frame_period_s the
 * session appends tokens_in_per_frame tokens and decodes tokens_out_per_frame. */
typedef struct cz_stream {
    double start_s;
    double frame_period_s;
    double duration_s;
    uint32_t tokens_in_per_frame;
    uint32_t tokens_out_per_frame;
    cz_class cls;
} cz_stream;

/* A producer of sessions in order of first arrival, for a streamed workload
 * (cz_workload_stream). `next` appends the next session with its turns to `scratch` (a
 * whole workload the window empties before each call) and returns false when there is
 * none, having copied its header fields (source, dropped counters, flags), final by then,
 * into scratch.
 * `rewind` starts it again from the first session; `free` releases it. */
struct cz_workload;
typedef struct cz_wlgen_ops {
    bool (*next)(void *gen, struct cz_workload *scratch);
    void (*rewind)(void *gen);
    void (*free)(void *gen);
} cz_wlgen_ops;

typedef struct cz_workload {
    cz_session *sessions;
    uint32_t n_sessions;
    cz_turn *turns;
    uint32_t n_turns;
    cz_stream *streams;
    uint32_t n_streams;
    uint32_t *hash_pool; /* prefix-block hashes (512-token blocks, Mooncake) */
    uint32_t n_hash;
    uint32_t hash_block_tokens; /* tokens per hash block (512 for Mooncake), 0 if none */
    char *name_pool;     /* NUL-terminated session names */
    uint32_t name_len;
    uint32_t concurrency; /* closed loop: at most this many sessions active at once, the
                             next one starting when one ends (LiveServe's c-bound);
                             0 = every session starts at its first turn's arrival_s */
    uint64_t dropped_failed; /* records dropped as failed requests (BurstGPT 0/0 rows) */
    uint64_t dropped_filtered; /* records dropped by length filters or windows */
    char source[64];     /* format the workload came from ("burstgpt", "synthetic", ...) */
    bool arrivals_given; /* arrival_s holds real arrival times (from the source's timestamps
                            or from an arrival process); false for ShareGPT and synthetic
                            lengths until an arrival process fills them */
    bool think_given;    /* think_s holds real think times (BurstGPT sessions, a think_s
                            distribution applied, or a cadenza file that had them) */
    bool stream;         /* asked of cz_config_parse by its caller: produce the sessions as
                            the run consumes them when the source allows it */
    bool live;           /* sessions are pushed as requests come (cz_workload_live):
                            n_sessions and n_turns count those pushed so far */
    /* A streamed workload (gen set): n_sessions and n_turns are the totals; the window
     * holds sessions [ses_base, ses_end) and turns [turn_base, turn_end), sessions[0]
     * being session ses_base and turns[0] turn turn_base. A whole workload has gen NULL,
     * bases 0 and holds everything. Read sessions and turns through
     * cz_workload_session_at / cz_workload_turn_at, which serve both. */
    void *gen;
    const cz_wlgen_ops *gen_ops;
    uint32_t ses_base, ses_end, turn_base, turn_end;
    uint32_t min_text_in;  /* streamed: the fewest text input tokens of a turn */
    bool mixed;            /* streamed: sessions of both classes */
    struct cz_workload *scratch; /* streamed: where the producer writes the next session */
    /* capacities (internal to the builders) */
    size_t cap_sessions, cap_turns, cap_streams, cap_hash, cap_names;
} cz_workload;

/* Session si and turn g of `w`, whole or streamed (held in the window: a bug otherwise). */
static inline const cz_session *cz_workload_session_at(const cz_workload *w, uint32_t si)
{
    CZ_ASSERT(si >= w->ses_base && si < (w->gen ? w->ses_end : w->n_sessions));
    return &w->sessions[si - w->ses_base];
}
static inline const cz_turn *cz_workload_turn_at(const cz_workload *w, uint32_t g)
{
    CZ_ASSERT(g >= w->turn_base && g < (w->gen ? w->turn_end : w->n_turns));
    return &w->turns[g - w->turn_base];
}

/* Makes `w` (initialised, empty of sessions and turns; streams and header fields may be
 * set) a streamed workload over producer `gen`, which it then owns: one pass over the
 * producer counts the sessions and turns and takes the header fields and statistics the
 * checks need (min_text_in, mixed), and the producer is rewound. Memory then follows the
 * window, not the workload. */
void cz_workload_stream(cz_workload *w, const cz_wlgen_ops *ops, void *gen);

/* Makes sure session si of a streamed workload has been produced (its turns with it).
 * False when the workload has fewer sessions. Pointers into the window are invalidated.
 * For a whole workload: si < n_sessions. */
bool cz_workload_fill(cz_workload *w, uint32_t si);

/* The caller is done with every session below si (and its turns) of a streamed workload:
 * they may be dropped (the window moves once the dropped part is at least half of it,
 * invalidating pointers into it). No effect on a whole workload. */
void cz_workload_release(cz_workload *w, uint32_t si);

/* Makes `w` (initialised, empty of sessions and turns) a live workload: sessions are
 * pushed one at a time as requests come (cz_workload_live_push), held in a window that
 * cz_workload_release moves, read like a streamed workload's. n_sessions and n_turns count
 * what has been pushed. */
void cz_workload_live(cz_workload *w);

/* Appends the one session of `one` (built with the builders below, its turns with it) to
 * live workload `w`; returns its index. Pointers into the window are invalidated. */
uint32_t cz_workload_live_push(cz_workload *w, const cz_workload *one);

/* Calls fn(ctx, si, name, n_turns) for every session of `w` in order: a whole workload's
 * from memory; a streamed one's by a second pass over its producer (rewound after), so the
 * run must be over. Not for live workloads. */
void cz_workload_each_session(cz_workload *w,
                              void (*fn)(void *ctx, uint32_t si, const char *name,
                                         uint32_t n_turns),
                              void *ctx);

/* The fewest text input tokens of any turn (UINT32_MAX with none). */
uint32_t cz_workload_min_text_in(const cz_workload *w);

/* Initialises an empty workload. */
void cz_workload_init(cz_workload *w);
/* Frees everything the workload owns and leaves it empty. */
void cz_workload_free(cz_workload *w);

/* Builders used by readers and generators. cz_workload_begin_session starts a session
 * named `name` (copied); cz_workload_add_turn appends a turn to the session begun last
 * and returns it (valid until the next add), zeroed with barge_in_s = -1.
 * cz_workload_add_hashes appends `n` hashes to the pool and stores their range in `turn`
 * (a turn of `w`); `hashes` may be NULL when `n` is 0. cz_workload_add_stream appends a
 * zeroed stream of class RT. Arrays grow by doubling (amortised O(1)); running out of
 * memory ends the program (cz_base.h). Calling add_turn before any begin_session is a bug
 * (CZ_ASSERT). */
cz_session *cz_workload_begin_session(cz_workload *w, const char *name, cz_class cls,
                                      cz_timing timing);
cz_turn *cz_workload_add_turn(cz_workload *w);
void cz_workload_add_hashes(cz_workload *w, cz_turn *turn, const uint32_t *hashes, uint32_t n);
cz_stream *cz_workload_add_stream(cz_workload *w);

/* The hashes of turn `t` of `w` (hash_len of them, inside the pool), or NULL when the turn
 * has none (the pool itself may then be NULL, and NULL + 0 is undefined in C). */
const uint32_t *cz_workload_turn_hashes(const cz_workload *w, const cz_turn *t);

/* Name of session `s` (inside the name pool). */
const char *cz_workload_session_name(const cz_workload *w, const cz_session *s);

/* True when the workload has sessions of both classes (real-time and best-effort). */
bool cz_workload_mixed_classes(const cz_workload *w);

/* Total input tokens of a turn over all modalities. */
uint32_t cz_turn_in_tokens(const cz_turn *t);

/* True when `a` and `b` hold the same sessions (names, classes, timings), turns (every
 * field, hashes compared by value), streams and header fields (concurrency, counters,
 * source, flags); capacities are ignored. On a difference, writes a description of the
 * first one into why[0..why_len) (why may be NULL). Used for round-trip checks. */
bool cz_workload_equal(const cz_workload *a, const cz_workload *b, char *why, size_t why_len);


#endif
