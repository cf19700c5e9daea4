/* cz_workload.c - the workload builders (amortised growth of the flat session, turn,
 * stream, hash and name arrays) and the workload comparison used by round-trip checks. */
#include "cz_workload.h"

#include "cz_traces_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cz_workload_init(cz_workload *w)
{
    memset(w, 0, sizeof *w);
}

void cz_workload_free(cz_workload *w)
{
    if (w->gen)
        w->gen_ops->free(w->gen);
    if (w->scratch) {
        cz_workload_free(w->scratch);
        free(w->scratch);
    }
    free(w->sessions);
    free(w->turns);
    free(w->streams);
    free(w->hash_pool);
    free(w->name_pool);
    cz_workload_init(w);
}

cz_session *cz_workload_begin_session(cz_workload *w, const char *name, cz_class cls,
                                      cz_timing timing)
{
    size_t len = strlen(name) + 1;
    CZ_ASSERT(w->n_sessions < UINT32_MAX && (size_t)w->name_len + len <= UINT32_MAX);
    cz_grow((void **)&w->name_pool, &w->cap_names, (size_t)w->name_len + len, 1);
    memcpy(w->name_pool + w->name_len, name, len);
    cz_grow((void **)&w->sessions, &w->cap_sessions, (size_t)w->n_sessions + 1,
            sizeof *w->sessions);
    cz_session *s = &w->sessions[w->n_sessions++];
    s->name_off = w->name_len;
    s->turn_off = w->n_turns;
    s->n_turns = 0;
    s->cls = cls;
    s->timing = timing;
    w->name_len += (uint32_t)len;
    return s;
}

cz_turn *cz_workload_add_turn(cz_workload *w)
{
    CZ_ASSERT(w->n_sessions > 0 && w->n_turns < UINT32_MAX);
    cz_session *s = &w->sessions[w->n_sessions - 1];
    CZ_ASSERT(s->turn_off + s->n_turns == w->n_turns);
    cz_grow((void **)&w->turns, &w->cap_turns, (size_t)w->n_turns + 1, sizeof *w->turns);
    cz_turn *t = &w->turns[w->n_turns++];
    memset(t, 0, sizeof *t);
    t->barge_in_s = -1.0;
    s->n_turns++;
    return t;
}

void cz_workload_add_hashes(cz_workload *w, cz_turn *turn, const uint32_t *hashes, uint32_t n)
{
    CZ_ASSERT(turn >= w->turns && turn < w->turns + w->n_turns);
    CZ_ASSERT((uint64_t)w->n_hash + n <= UINT32_MAX);
    cz_grow((void **)&w->hash_pool, &w->cap_hash, (size_t)w->n_hash + n, sizeof *w->hash_pool);
    if (n > 0)
        memcpy(w->hash_pool + w->n_hash, hashes, (size_t)n * sizeof *hashes);
    turn->hash_off = w->n_hash;
    turn->hash_len = n;
    w->n_hash += n;
}

cz_stream *cz_workload_add_stream(cz_workload *w)
{
    CZ_ASSERT(w->n_streams < UINT32_MAX);
    cz_grow((void **)&w->streams, &w->cap_streams, (size_t)w->n_streams + 1,
            sizeof *w->streams);
    cz_stream *st = &w->streams[w->n_streams++];
    memset(st, 0, sizeof *st);
    st->cls = CZ_CLASS_RT;
    return st;
}

const uint32_t *cz_workload_turn_hashes(const cz_workload *w, const cz_turn *t)
{
    if (t->hash_len == 0)
        return NULL;
    CZ_ASSERT((uint64_t)t->hash_off + t->hash_len <= w->n_hash);
    return w->hash_pool + t->hash_off;
}

const char *cz_workload_session_name(const cz_workload *w, const cz_session *s)
{
    CZ_ASSERT(s->name_off < w->name_len);
    return w->name_pool + s->name_off;
}

uint32_t cz_turn_in_tokens(const cz_turn *t)
{
    uint64_t n = (uint64_t)t->in_text_tokens + t->in_audio_tokens + t->in_image_tokens;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* Writes a printf-style description into why (when given) and returns false. */
static bool differ(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool differ(char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Compares two turns field by field; on a difference names the field in why. */
static bool turn_equal(const cz_workload *a, const cz_turn *x, const cz_workload *b,
                       const cz_turn *y, const char **field)
{
#define CZ__CMP(f)          \
    if (x->f != y->f) {     \
        *field = #f;        \
        return false;       \
    }
    CZ__CMP(arrival_s)
    CZ__CMP(speech_s)
    CZ__CMP(in_text_tokens)
    CZ__CMP(in_audio_tokens)
    CZ__CMP(in_image_tokens)
    CZ__CMP(out_text_tokens)
    CZ__CMP(out_audio_tokens)
    CZ__CMP(out_audio_s)
    CZ__CMP(think_s)
    CZ__CMP(barge_in_s)
    CZ__CMP(hash_len)
#undef CZ__CMP
    if (x->hash_len > 0 &&
        memcmp(cz_workload_turn_hashes(a, x), cz_workload_turn_hashes(b, y),
               (size_t)x->hash_len * sizeof *a->hash_pool) != 0) {
        *field = "hash_ids";
        return false;
    }
    return true;
}

bool cz_workload_equal(const cz_workload *a, const cz_workload *b, char *why, size_t why_len)
{
    if (strcmp(a->source, b->source) != 0 || a->concurrency != b->concurrency ||
        a->hash_block_tokens != b->hash_block_tokens || a->dropped_failed != b->dropped_failed ||
        a->dropped_filtered != b->dropped_filtered || a->arrivals_given != b->arrivals_given ||
        a->think_given != b->think_given)
        return differ(why, why_len,
                      "header fields differ (source, concurrency, hash_block_tokens, dropped "
                      "counters or flags)");
    if (a->n_sessions != b->n_sessions)
        return differ(why, why_len, "%u sessions against %u", a->n_sessions, b->n_sessions);
    if (a->n_turns != b->n_turns)
        return differ(why, why_len, "%u turns against %u", a->n_turns, b->n_turns);
    if (a->n_streams != b->n_streams)
        return differ(why, why_len, "%u streams against %u", a->n_streams, b->n_streams);
    for (uint32_t i = 0; i < a->n_sessions; i++) {
        const cz_session *s = &a->sessions[i], *t = &b->sessions[i];
        if (s->n_turns != t->n_turns || s->cls != t->cls || s->timing != t->timing ||
            s->turn_off != t->turn_off ||
            strcmp(cz_workload_session_name(a, s), cz_workload_session_name(b, t)) != 0)
            return differ(why, why_len, "session %u differs (name, class, timing or turns)",
                          i);
    }
    for (uint32_t i = 0; i < a->n_turns; i++) {
        const char *field = NULL;
        if (!turn_equal(a, &a->turns[i], b, &b->turns[i], &field)) {
            return differ(why, why_len, "turn %u: field '%s' differs", i, field);
        }
    }
    for (uint32_t i = 0; i < a->n_streams; i++) {
        const cz_stream *s = &a->streams[i], *t = &b->streams[i];
        if (s->start_s != t->start_s || s->frame_period_s != t->frame_period_s ||
            s->duration_s != t->duration_s || s->tokens_in_per_frame != t->tokens_in_per_frame ||
            s->tokens_out_per_frame != t->tokens_out_per_frame || s->cls != t->cls)
            return differ(why, why_len, "stream %u differs", i);
    }
    return true;
}

bool cz_workload_mixed_classes(const cz_workload *w)
{
    if (w->gen)
        return w->mixed;
    bool seen[2] = {false, false};
    for (uint32_t si = 0; si < w->n_sessions; si++)
        seen[w->sessions[si].cls == CZ_CLASS_BE] = true;
    return seen[0] && seen[1];
}

uint32_t cz_workload_min_text_in(const cz_workload *w)
{
    if (w->gen)
        return w->min_text_in;
    uint32_t least = UINT32_MAX;
    for (uint32_t t = 0; t < w->n_turns; t++)
        if (w->turns[t].in_text_tokens < least)
            least = w->turns[t].in_text_tokens;
    return least;
}

void cz__workload_clear_sessions(cz_workload *s)
{
    s->n_sessions = s->n_turns = s->n_hash = s->name_len = 0;
}

void cz_workload_stream(cz_workload *w, const cz_wlgen_ops *ops, void *gen)
{
    CZ_ASSERT(!w->gen && w->n_sessions == 0 && w->n_turns == 0 && w->n_hash == 0);
    cz_workload scratch;
    cz_workload_init(&scratch);
    uint64_t n_ses = 0, n_turns = 0;
    uint32_t least = UINT32_MAX;
    bool seen[2] = {false, false};
    for (;;) {
        cz__workload_clear_sessions(&scratch);
        if (!ops->next(gen, &scratch))
            break;
        CZ_ASSERT(scratch.n_sessions == 1);
        n_ses++;
        n_turns += scratch.n_turns;
        CZ_ASSERT(n_ses < UINT32_MAX && n_turns < UINT32_MAX);
        seen[scratch.sessions[0].cls == CZ_CLASS_BE] = true;
        for (uint32_t t = 0; t < scratch.n_turns; t++)
            if (scratch.turns[t].in_text_tokens < least)
                least = scratch.turns[t].in_text_tokens;
    }
    cz__workload_copy_header(w, &scratch); /* the producer keeps its header there */
    ops->rewind(gen);
    w->scratch = cz_xmalloc(sizeof *w->scratch);
    *w->scratch = scratch; /* kept for the sessions produced during the run */
    w->n_sessions = (uint32_t)n_ses;
    w->n_turns = (uint32_t)n_turns;
    w->min_text_in = least;
    w->mixed = seen[0] && seen[1];
    w->gen = gen;
    w->gen_ops = ops;
    w->ses_base = w->ses_end = w->turn_base = w->turn_end = 0;
}

void cz_workload_each_session(cz_workload *w,
                              void (*fn)(void *ctx, uint32_t si, const char *name,
                                         uint32_t n_turns),
                              void *ctx)
{
    CZ_ASSERT(!w->live);
    if (!w->gen) {
        for (uint32_t si = 0; si < w->n_sessions; si++)
            fn(ctx, si, cz_workload_session_name(w, &w->sessions[si]), w->sessions[si].n_turns);
        return;
    }
    w->gen_ops->rewind(w->gen);
    cz_workload one;
    cz_workload_init(&one);
    for (uint32_t si = 0;; si++) {
        cz__workload_clear_sessions(&one);
        if (!w->gen_ops->next(w->gen, &one))
            break;
        CZ_ASSERT(one.n_sessions == 1 && si < w->n_sessions);
        fn(ctx, si, cz_workload_session_name(&one, &one.sessions[0]), one.sessions[0].n_turns);
    }
    cz_workload_free(&one);
    w->gen_ops->rewind(w->gen);
}

/* Appends the one session of `s` to the window of `w`. */
static void window_append(cz_workload *w, const cz_workload *s)
{
    const cz_session *src = &s->sessions[0];
    size_t hs = w->ses_end - w->ses_base, ht = w->turn_end - w->turn_base;
    const char *name = cz_workload_session_name(s, src);
    size_t len = s->name_len - src->name_off; /* its one name, the NUL included */
    CZ_ASSERT(len >= 1 && name[len - 1] == '\0');
    CZ_ASSERT((size_t)w->name_len + len <= UINT32_MAX &&
              (uint64_t)w->n_hash + s->n_hash <= UINT32_MAX);
    cz_grow((void **)&w->sessions, &w->cap_sessions, hs + 1, sizeof *w->sessions);
    cz_grow((void **)&w->turns, &w->cap_turns, ht + s->n_turns, sizeof *w->turns);
    cz_grow((void **)&w->name_pool, &w->cap_names, (size_t)w->name_len + len, 1);
    cz_grow((void **)&w->hash_pool, &w->cap_hash, (size_t)w->n_hash + s->n_hash,
            sizeof *w->hash_pool);
    cz_session *d = &w->sessions[hs];
    *d = *src;
    d->turn_off = w->turn_end;
    d->name_off = w->name_len;
    memcpy(w->name_pool + w->name_len, name, len);
    w->name_len += (uint32_t)len;
    for (uint32_t k = 0; k < s->n_turns; k++) {
        cz_turn *t = &w->turns[ht + k];
        *t = s->turns[k];
        t->hash_off = w->n_hash + t->hash_off;
    }
    if (s->n_hash > 0)
        memcpy(w->hash_pool + w->n_hash, s->hash_pool, (size_t)s->n_hash * sizeof *s->hash_pool);
    w->n_hash += s->n_hash;
    w->ses_end++;
    w->turn_end += s->n_turns;
}

/* A live workload's producer: sessions are pushed, never pulled. */
static bool live_next(void *gen, cz_workload *scratch)
{
    (void)gen;
    (void)scratch;
    return false;
}

static void live_nothing(void *gen)
{
    (void)gen;
}

static const cz_wlgen_ops live_ops = {live_next, live_nothing, live_nothing};

void cz_workload_live(cz_workload *w)
{
    CZ_ASSERT(!w->gen && w->n_sessions == 0 && w->n_turns == 0 && w->n_hash == 0);
    w->gen = w; /* a window like a streamed workload's; nothing to produce */
    w->gen_ops = &live_ops;
    w->live = true;
    w->min_text_in = 1;
    w->ses_base = w->ses_end = w->turn_base = w->turn_end = 0;
}

uint32_t cz_workload_live_push(cz_workload *w, const cz_workload *one)
{
    CZ_ASSERT(w->live && one->n_sessions == 1 && w->ses_end == w->n_sessions);
    CZ_ASSERT(w->n_sessions < UINT32_MAX - 1 && (uint64_t)w->n_turns + one->n_turns < UINT32_MAX);
    window_append(w, one);
    w->n_sessions++;
    w->n_turns += one->n_turns;
    return w->n_sessions - 1;
}

bool cz_workload_fill(cz_workload *w, uint32_t si)
{
    if (!w->gen)
        return si < w->n_sessions;
    if (si < w->ses_end)
        return true;
    if (si >= w->n_sessions)
        return false;
    while (w->ses_end <= si) {
        cz__workload_clear_sessions(w->scratch);
        bool more = w->gen_ops->next(w->gen, w->scratch);
        CZ_ASSERT(more && w->scratch->n_sessions == 1); /* the first pass counted them */
        window_append(w, w->scratch);
    }
    return true;
}

void cz_workload_release(cz_workload *w, uint32_t si)
{
    if (!w->gen)
        return;
    CZ_ASSERT(si >= w->ses_base && si <= w->ses_end);
    uint32_t drop = si - w->ses_base, held = w->ses_end - w->ses_base;
    /* moved once the dropped part is half the window: amortised O(1) per session */
    if (drop == 0 || drop < held - drop || drop < 64)
        return;
    uint32_t t0 = si < w->ses_end ? w->sessions[drop].turn_off : w->turn_end;
    uint32_t tdrop = t0 - w->turn_base;
    uint32_t name0 = si < w->ses_end ? w->sessions[drop].name_off : w->name_len;
    /* the first hashes still in use: the lowest offset of a held turn that has any */
    uint32_t hash0 = w->n_hash;
    for (uint32_t k = tdrop; k < w->turn_end - w->turn_base; k++)
        if (w->turns[k].hash_len > 0 && w->turns[k].hash_off < hash0)
            hash0 = w->turns[k].hash_off;
    memmove(w->sessions, w->sessions + drop, (size_t)(held - drop) * sizeof *w->sessions);
    memmove(w->turns, w->turns + tdrop,
            (size_t)(w->turn_end - t0) * sizeof *w->turns);
    memmove(w->name_pool, w->name_pool + name0, w->name_len - name0);
    if (w->n_hash > hash0)
        memmove(w->hash_pool, w->hash_pool + hash0,
                (size_t)(w->n_hash - hash0) * sizeof *w->hash_pool);
    for (uint32_t k = 0; k < held - drop; k++)
        w->sessions[k].name_off -= name0;
    for (uint32_t k = 0; k < w->turn_end - t0; k++)
        if (w->turns[k].hash_len > 0)
            w->turns[k].hash_off -= hash0;
    w->name_len -= name0;
    w->n_hash -= hash0;
    w->ses_base = si;
    w->turn_base = t0;
}
