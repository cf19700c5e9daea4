/* cz_hclient.c - see cz_hclient.h. */
#define _POSIX_C_SOURCE 200809L
#include "cz_hclient.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "cz_evq.h"
#include "cz_playback.h"
#include "cz_prompt.h"
#include "cz_sse.h"

/* Largest error body kept from a non-200 response. */
#define ERR_BODY_MAX 512u
/* The longest the loop waits for the network before looking at its clock again. */
#define POLL_MAX_MS 50
/* Ready sockets handled per wait, the sends checked after each. */
#define EPOLL_BATCH 32
/* The last stretch before a send is polled without sleeping: waking a sleeping thread
 * (an idle core, a virtual machine's) can take a millisecond or more. */
#define SPIN_S 0.001
/* A spoken reply's playback is reported to the server at most this often (and at its
 * first audio and its stream's end): the playback buffer a scheduler reads changes at the
 * player's rate, not the network's. */
#define PLAYBACK_EVERY_S 0.1
/* Interaction-plane events a session holds at most while one is in flight. */
#define EVQ_MAX 8
/* An interaction-plane event's whole time at most. */
#define EVENT_TIMEOUT_MS 10000L

const char *cz_hfail_name(cz_hfail k)
{
    static const char *const n[CZ_HFAIL_N] = {"transport", "http_status", "error_event",
                                              "bad_chunk", "no_chunk", "truncated",
                                              "server_abort"};
    CZ_ASSERT(k < CZ_HFAIL_N);
    return n[k];
}

/* One turn's request, from its send until the turn ends (a spoken reply outlives its
 * stream while it plays), or one interaction-plane event in flight. */
typedef struct hreq {
    struct hclient *C;
    bool event;              /* an interaction-plane event (POST .../events), not a turn */
    bool streaming;          /* its transfer is open: it counts in in_flight */
    CURL *easy;
    struct curl_slist *hdrs;
    char *body;
    cz_sse sse;
    uint32_t g;              /* global turn index */
    uint32_t session;
    uint32_t want_out;       /* max_tokens */
    uint32_t prompt_len;
    double intended_s, sent_s;
    double *chunk_t;         /* arrival times of the chunks with choices */
    size_t n_chunks, cap_chunks;
    uint32_t *reply;         /* the reply's token ids as the chunks carried them */
    size_t n_reply, cap_reply;
    bool ids_missing;        /* a chunk with choices carried no token_ids */
    uint32_t new_in;         /* the turn's own input tokens (the prompt's last ones) */
    int64_t usage_out, usage_in;
    bool done, finished;     /* [DONE] seen; a finish_reason seen */
    bool failed;
    cz_hfail why;
    char msg[200];
    long status;             /* HTTP status, once the body starts */
    char errbody[ERR_BODY_MAX];
    size_t errlen;
    /* a spoken turn: its reply played at the client in real time, each token a_tok
     * seconds of audio (the turn's out_audio_s over its output tokens) */
    bool spoken;
    bool barged;             /* cut by the user's barge-in */
    double a_tok;
    cz_player pl;
    uint32_t tokens;         /* reply tokens received: the chunks' ids, else one a chunk */
    /* a chat: the turn's own message, and the reply's text with, per chunk with content,
     * the tokens and the text's length so far (a cut reply is carried up to its heard
     * tokens) */
    char *own_text;
    char *text;
    size_t n_text, cap_text;
    uint32_t *tok_end;
    size_t *txt_end;
    size_t cap_ends;
    uint32_t heard;          /* barged: the tokens played before the cut */
    double heard_s;          /* barged: the audio played before the cut */
    struct hreq *next_free;  /* the free list */
    struct hreq *prev, *next;/* the live turns (C->active) or events (C->ev_active) */
} hreq;

/* An interaction-plane event waiting for its session's previous one to be answered. */
enum { HEV_SPEECH_START = 0, HEV_PLAYBACK, HEV_BARGE_IN };
typedef struct hev {
    uint8_t type;
    uint32_t heard;          /* barge_in: heard_tokens */
    double played_s, received_s;
} hev;

/* A turn due while its session's events are unanswered: sent once they are, so a
 * barge-in reaches the server before the request that follows it. */
typedef struct hheld {
    uint32_t g, next;
    double t;
} hheld;

/* A turn due to be sent: turn g of session si, intended at t. */
typedef struct hdue {
    uint32_t g, si;
    double t;
} hdue;

typedef struct hsess {
    uint32_t next;           /* closed loop: its next turn to send (index in the session) */
    uint32_t ended;          /* its turns ended */
    uint32_t *hist;          /* a closed-loop conversation so far: every earlier turn's
                                prompt ids and reply ids as received */
    size_t n_hist, cap_hist;
    char *chat;              /* a chat's conversation so far: its messages as JSON, each
                                followed by a comma */
    size_t n_chat, cap_chat;
    uint64_t chat_tokens;    /* the tokens of their contents, as the client counts them */
    hev evq[EVQ_MAX];        /* events not yet sent, in order */
    uint8_t ev_n;
    bool ev_busy;            /* one in flight */
    bool ev_dirty;           /* in C->ev_ready */
    double last_pb_s;        /* the latest playback report queued */
    uint32_t held_head, held_tail; /* turns held for the events (C->held), NONE if none */
} hsess;

#define NONE UINT32_MAX

/* The send queue's events, and the timers' (C->tq): a session's speech starts (turn
 * g), a reply's barge-in is due (g), a reply has played out (g). */
enum { EV_SEND = 1, EV_SPEECH, EV_BARGE, EV_PLAYED };

typedef struct hclient {
    const cz_config *cfg;
    cz_workload *wl;
    cz_metrics *m;
    const cz_hclient_opts *o;
    cz_hclient_stats *hs;
    CURLM *multi;
    char *url;
    char *model_json;        /* the model name as a JSON string */
    bool chat;               /* --api chat: /v1/chat/completions with text messages */
    cz_tokenizer *tok;       /* chat: the server's tokenizer */
    cz_prompt_pool pool;     /* chat: the ids prompt text is made of */
    uint32_t vocab;
    struct timespec t0;
    cz_evq q;                /* sends due (EV_SEND, turn g) */
    hdue *waiting;           /* turns due while max_concurrency is reached, FIFO */
    size_t w_head, w_tail, w_cap;
    hsess *ses;
    uint32_t *pending;       /* closed-loop workload: sessions not started, in order */
    uint32_t n_pending, pend_at;
    uint32_t in_flight;
    uint64_t ended;          /* turns ended */
    hreq *free_reqs;
    hreq *active;            /* the requests in flight, a doubly linked list */
    bool *turn_done;         /* per global turn */
    hreq **live;             /* per global turn: its request while the turn is open */
    cz_evq tq;               /* timers: speech starts, barge-ins, playback ends */
    bool events;             /* interaction-plane events are sent */
    bool events_seen_ok;     /* the server answered one with 200 */
    char *ev_base;           /* URL up to /v1/sessions/ */
    hreq *ev_active;         /* events in flight */
    uint32_t ev_out;         /* events queued or in flight, every session */
    uint32_t *ev_ready;      /* sessions with events to send and none in flight */
    size_t n_ev_ready, cap_ev_ready;
    hheld *held;             /* held turns' pool, free entries linked from held_free */
    size_t n_held, cap_held;
    uint32_t held_free;
    char *buf;               /* body scratch */
    size_t buf_cap;
    int ep;                  /* epoll over libcurl's sockets */
    double curl_due;         /* libcurl's timer (-1: none) */
    bool kick;               /* libcurl asked to be called at once */
} hclient;

static double now_s(const hclient *C)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - C->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - C->t0.tv_nsec);
}

/* The id session si goes by at the server (its X-Session-ID, its events' path): its
 * name when that is a plain token of letters, digits and ._:- (under 200 bytes), else
 * session-<index>, so a name from a trace never puts bytes of its own into a header or a
 * URL. */
static const char *session_id(const hclient *C, uint32_t si, char *buf, size_t cap)
{
    const char *name = cz_workload_session_name(C->wl, cz_workload_session_at(C->wl, si));
    size_t n = strlen(name);
    bool plain = n > 0 && n < 200;
    for (const char *q = name; plain && *q; q++)
        plain = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                (*q >= '0' && *q <= '9') || *q == '.' || *q == '_' || *q == ':' || *q == '-';
    if (plain)
        return name;
    snprintf(buf, cap, "session-%u", si);
    return buf;
}

/* Whether turn t is spoken: its reply plays (audio), so it is timed by its playback. */
static bool spoken_turn(const cz_turn *t)
{
    return t->out_audio_s > 0;
}

/* ---- prompts ---- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The i-th prompt id of turn g: a prompt shares the ids of its Mooncake prefix blocks
 * with every turn that has the same block hash (so a server's prefix cache sees what the
 * trace's shared prefixes are), and is otherwise drawn from (seed, turn); ids lie in the
 * middle of the vocabulary, away from the special tokens at either end. */
static uint64_t prompt_key(const hclient *C, const cz_turn *t, uint32_t g, uint32_t i)
{
    uint64_t key;
    const uint32_t *h = cz_workload_turn_hashes(C->wl, t);
    uint32_t bt = C->wl->hash_block_tokens;
    if (h && bt && i / bt < t->hash_len)
        key = mix64(0x517cc1b727220a95ull ^ h[i / bt]) + i % bt;
    else
        key = mix64(C->cfg->seed * 0x9e3779b97f4a7c15ull + g) + i;
    return mix64(key);
}

static uint32_t prompt_id(const hclient *C, const cz_turn *t, uint32_t g, uint32_t i)
{
    uint32_t span = C->vocab - C->vocab / 4;
    return C->vocab / 8 + (uint32_t)(prompt_key(C, t, g, i) % span);
}

/* A JSON string of text[0..n) (caller frees with cJSON_free). */
static char *json_str(const char *text)
{
    cJSON *j = cJSON_CreateString(text);
    CZ_ASSERT(j != NULL);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    CZ_ASSERT(out != NULL);
    return out;
}

/* The user message of turn g for a chat endpoint: text of exactly its input tokens under
 * the tokenizer (cz_prompt_text; a miss is counted), its leading text shared with every
 * turn that shares its Mooncake prefix blocks. */
static char *chat_text(hclient *C, uint32_t g, const cz_turn *t, uint32_t in)
{
    uint64_t *keys = cz_xmalloc(in * sizeof *keys);
    for (uint32_t i = 0; i < in; i++)
        keys[i] = prompt_key(C, t, g, i);
    uint32_t got;
    char *text = cz_prompt_text(C->tok, &C->pool, keys, in, C->cfg->seed * 131u + g, &got);
    free(keys);
    if (got != in)
        C->hs->prompt_len_missed++;
    return text;
}

static void put(hclient *C, size_t *n, const char *s, size_t len)
{
    if (*n + len + 1 > C->buf_cap) {
        size_t cap = C->buf_cap ? C->buf_cap : 4096;
        while (cap < *n + len + 1)
            cap *= 2;
        C->buf = cz_xrealloc(C->buf, cap, 1);
        C->buf_cap = cap;
    }
    memcpy(C->buf + *n, s, len);
    *n += len;
    C->buf[*n] = 0;
}

/* Whether session s carries its conversation: a closed-loop session of several turns,
 * each turn's prompt the conversation so far (prompts and replies as received) and then
 * its own input, as a chat client sends it. */
static bool carries(const cz_session *s)
{
    return s->timing == CZ_TIMING_CLOSED && s->n_turns > 1;
}

/* The request body of turn g of session S (a fresh copy, the caller frees): *plen the
 * prompt's ids (a chat's: the tokens of its messages' contents), *own the turn's own input
 * among them (the last ones); a chat's own message text in *own_text (caller frees). */
static char *request_body(hclient *C, uint32_t g, const cz_turn *t, const hsess *S,
                          bool carry, uint32_t *plen, uint32_t *own, uint32_t *out,
                          char **own_text)
{
    size_t n = 0;
    char num[64];
    uint32_t in = cz_turn_in_tokens(t);
    if (in == 0)
        in = 1;
    uint32_t o = t->out_text_tokens ? t->out_text_tokens : 1;
    put(C, &n, "{\"model\":", 9);
    put(C, &n, C->model_json, strlen(C->model_json));
    if (C->chat) {
        /* the conversation so far, then the turn's own message */
        static const char msgs[] = ",\"messages\":[";
        put(C, &n, msgs, sizeof msgs - 1);
        if (carry && S->n_chat)
            put(C, &n, S->chat, S->n_chat);
        *own_text = chat_text(C, g, t, in);
        char *js = json_str(*own_text);
        static const char user[] = "{\"role\":\"user\",\"content\":";
        put(C, &n, user, sizeof user - 1);
        put(C, &n, js, strlen(js));
        cJSON_free(js);
        int k = snprintf(num, sizeof num, "}],\"max_tokens\":%u,\"min_tokens\":%u", o, o);
        put(C, &n, num, (size_t)k);
        static const char tail[] = ",\"ignore_eos\":true,\"stream\":true,"
                                   "\"stream_options\":{\"include_usage\":true}}";
        put(C, &n, tail, sizeof tail - 1);
        uint64_t total = (carry ? S->chat_tokens : 0) + in;
        *plen = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
        *own = in;
        *out = o;
        char *b = cz_xmalloc(n + 1);
        memcpy(b, C->buf, n + 1);
        return b;
    }
    put(C, &n, ",\"prompt\":[", 11);
    size_t hist = carry ? S->n_hist : 0;
    for (size_t i = 0; i < hist; i++) {
        int k = snprintf(num, sizeof num, i ? ",%u" : "%u", S->hist[i]);
        put(C, &n, num, (size_t)k);
    }
    for (uint32_t i = 0; i < in; i++) {
        int k = snprintf(num, sizeof num, i || hist ? ",%u" : "%u", prompt_id(C, t, g, i));
        put(C, &n, num, (size_t)k);
    }
    int k = snprintf(num, sizeof num, "],\"max_tokens\":%u,\"min_tokens\":%u", o, o);
    put(C, &n, num, (size_t)k);
    if (carry) /* the reply's ids, to carry into the next turn (vLLM's return_token_ids) */
        put(C, &n, ",\"return_token_ids\":true", 24);
    static const char tail[] = ",\"ignore_eos\":true,\"stream\":true,"
                               "\"stream_options\":{\"include_usage\":true}}";
    put(C, &n, tail, sizeof tail - 1);
    CZ_ASSERT(hist + in <= UINT32_MAX);
    *plen = (uint32_t)(hist + in);
    *own = in;
    *out = o;
    char *b = cz_xmalloc(n + 1);
    memcpy(b, C->buf, n + 1);
    return b;
}

/* ---- the interaction plane ---- */

static void ev_mark_ready(hclient *C, uint32_t si)
{
    hsess *S = &C->ses[si];
    if (S->ev_busy || S->ev_dirty || S->ev_n == 0)
        return;
    S->ev_dirty = true;
    cz_grow((void **)&C->ev_ready, &C->cap_ev_ready, C->n_ev_ready + 1, sizeof *C->ev_ready);
    C->ev_ready[C->n_ev_ready++] = si;
}

/* Queues an event for session si, sent once the one before it is answered (a session's
 * events reach the server in order). A playback report replaces one queued just before
 * it; a full queue gives up its oldest playback report, else the new report. */
static void ev_queue(hclient *C, uint32_t si, const hev *e)
{
    if (!C->events)
        return;
    hsess *S = &C->ses[si];
    if (e->type == HEV_PLAYBACK && S->ev_n && S->evq[S->ev_n - 1].type == HEV_PLAYBACK) {
        S->evq[S->ev_n - 1] = *e;
        return;
    }
    if (S->ev_n == EVQ_MAX) {
        uint32_t k = 0;
        while (k < S->ev_n && S->evq[k].type != HEV_PLAYBACK)
            k++;
        C->hs->events_dropped++;
        if (k == S->ev_n && e->type == HEV_PLAYBACK)
            return;
        CZ_ASSERT(k < S->ev_n && "a session's queue holds no playback report to give up");
        memmove(&S->evq[k], &S->evq[k + 1], (S->ev_n - k - 1) * sizeof *S->evq);
        S->ev_n--;
        C->ev_out--;
    }
    S->evq[S->ev_n++] = *e;
    C->ev_out++;
    ev_mark_ready(C, si);
}

/* Turns of session si held for its events go to the send queue at their own times. */
static void release_held(hclient *C, uint32_t si)
{
    hsess *S = &C->ses[si];
    while (S->held_head != NONE) {
        uint32_t k = S->held_head;
        hheld h = C->held[k];
        S->held_head = h.next;
        C->held[k].next = C->held_free;
        C->held_free = k;
        cz_evq_push(&C->q, h.t, EV_SEND, h.g, si);
    }
    S->held_tail = NONE;
}

/* Whether turn g of session si, due at t, waits for its session's events to be
 * answered (held, then sent by release_held). */
static bool hold(hclient *C, uint32_t g, uint32_t si, double t)
{
    hsess *S = &C->ses[si];
    if (!C->events || (!S->ev_busy && S->ev_n == 0))
        return false;
    uint32_t k;
    if (C->held_free != NONE) {
        k = C->held_free;
        C->held_free = C->held[k].next;
    } else {
        cz_grow((void **)&C->held, &C->cap_held, C->n_held + 1, sizeof *C->held);
        k = (uint32_t)C->n_held++;
    }
    C->held[k] = (hheld){g, NONE, t};
    if (S->held_tail == NONE)
        S->held_head = k;
    else
        C->held[S->held_tail].next = k;
    S->held_tail = k;
    return true;
}

/* The server takes no events (404, 405 or 501 before any was answered): none are sent
 * for the rest of the run, the queued ones dropped, the turns held for them sent. */
static void events_off(hclient *C)
{
    C->events = false;
    C->hs->events_unsupported = true;
    for (uint32_t si = 0; si < C->wl->n_sessions; si++) {
        hsess *S = &C->ses[si];
        C->ev_out -= S->ev_n;
        S->ev_n = 0;
        release_held(C, si);
    }
}

static hreq *req_alloc(hclient *C);
static void req_free(hclient *C, hreq *r);
static cz_status post(hclient *C, hreq *r, const char *url, const char *header, long timeout_ms,
                      cz_err *err);

/* Sends session si's first queued event. */
static cz_status ev_send(hclient *C, uint32_t si, cz_err *err)
{
    hsess *S = &C->ses[si];
    CZ_ASSERT(!S->ev_busy && S->ev_n > 0);
    hev e = S->evq[0];
    memmove(&S->evq[0], &S->evq[1], (S->ev_n - 1) * sizeof *S->evq);
    S->ev_n--;
    char body[160], url_id[32];
    switch (e.type) {
    case HEV_SPEECH_START: snprintf(body, sizeof body, "{\"type\":\"speech_start\"}"); break;
    case HEV_PLAYBACK:
        snprintf(body, sizeof body, "{\"type\":\"playback\",\"played_s\":%.17g,\"received_s\":%.17g}",
                 e.played_s < e.received_s ? e.played_s : e.received_s, e.received_s);
        break;
    default:
        snprintf(body, sizeof body, "{\"type\":\"barge_in\",\"heard_tokens\":%u,\"played_s\":%.17g}",
                 e.heard, e.played_s);
        break;
    }
    const char *id = session_id(C, si, url_id, sizeof url_id);
    size_t ulen = strlen(C->ev_base) + strlen(id) + 16;
    char *url = cz_xmalloc(ulen);
    snprintf(url, ulen, "%s%s/events", C->ev_base, id);
    hreq *r = req_alloc(C);
    r->event = true;
    r->session = si;
    r->body = cz_xmalloc(strlen(body) + 1);
    memcpy(r->body, body, strlen(body) + 1);
    cz_status st = post(C, r, url, NULL, EVENT_TIMEOUT_MS, err);
    free(url); /* libcurl keeps its own copy */
    if (st != CZ_OK)
        return st;
    r->next = C->ev_active;
    if (C->ev_active)
        C->ev_active->prev = r;
    C->ev_active = r;
    S->ev_busy = true;
    C->hs->events_sent++;
    return CZ_OK;
}

/* Sends the first queued event of every session that has none in flight. */
static cz_status ev_pump(hclient *C, cz_err *err)
{
    cz_status st = CZ_OK;
    for (size_t i = 0; i < C->n_ev_ready && st == CZ_OK; i++) {
        uint32_t si = C->ev_ready[i];
        hsess *S = &C->ses[si];
        S->ev_dirty = false;
        if (C->events && !S->ev_busy && S->ev_n)
            st = ev_send(C, si, err);
    }
    C->n_ev_ready = 0;
    return st;
}

/* An event's answer: counted; the session's next event, or its held turns. */
static void event_done(hclient *C, hreq *r, CURLcode res)
{
    uint32_t si = r->session;
    hsess *S = &C->ses[si];
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    S->ev_busy = false;
    C->ev_out--;
    cz_hclient_stats *hs = C->hs;
    if (res == CURLE_OK && status == 200) {
        hs->events_ok++;
        C->events_seen_ok = true;
        cJSON *j = cJSON_ParseWithLength(r->errbody, r->errlen);
        hs->events_applied += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "applied"));
        cJSON_Delete(j);
    } else if (!C->events_seen_ok && res == CURLE_OK &&
               (status == 404 || status == 405 || status == 501)) {
        if (C->events) { /* the first refusal; those already in flight are the same */
            snprintf(hs->first_event_error, sizeof hs->first_event_error, "HTTP %ld", status);
            events_off(C);
        }
    } else {
        hs->events_failed++;
        if (!hs->first_event_error[0]) {
            if (res != CURLE_OK)
                snprintf(hs->first_event_error, sizeof hs->first_event_error, "%s",
                         curl_easy_strerror(res));
            else
                snprintf(hs->first_event_error, sizeof hs->first_event_error, "HTTP %ld: %.150s",
                         status, r->errbody);
        }
    }
    req_free(C, r);
    if (C->events && S->ev_n)
        ev_mark_ready(C, si);
    else
        release_held(C, si);
}

/* The reply's playback so far, reported (LiveServe's playback signal). */
static void report_playback(hclient *C, hreq *r, double t)
{
    hev e = {.type = HEV_PLAYBACK, .played_s = cz_player_heard_s(&r->pl, t),
             .received_s = r->pl.audio_s};
    C->ses[r->session].last_pb_s = t;
    ev_queue(C, r->session, &e);
}

/* k reply tokens of spoken turn r reached the client at t: its player takes their audio;
 * the first audio starts the barge-in's clock. */
static void play_chunk(hclient *C, hreq *r, double t, uint32_t k)
{
    bool first = r->pl.chunks == 0;
    cz_player_chunk(&r->pl, t, k * r->a_tok);
    const cz_turn *tu = cz_workload_turn_at(C->wl, r->g);
    if (first && tu->barge_in_s >= 0)
        cz_evq_push(&C->tq, t + tu->barge_in_s, EV_BARGE, r->g, r->session);
    if (first || t - C->ses[r->session].last_pb_s >= PLAYBACK_EVERY_S)
        report_playback(C, r, t);
}

/* ---- the response ---- */

static void fail(hreq *r, cz_hfail why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(hreq *r, cz_hfail why, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = true;
    r->why = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* A chunk with choices reached r at t: its time, its tokens (its ids, else one, as vLLM's
 * benchmark counts a chunk a token; none for a server's abort chunk or a finishing chunk
 * with no text), a chat's text, the reply's ids, a spoken reply's audio. */
static void took_chunk(hclient *C, hreq *r, const cz_oai_chunk *c, double t, bool abort_,
                       bool empty)
{
    if (r->n_chunks == r->cap_chunks) {
        size_t cap = r->cap_chunks ? 2 * r->cap_chunks : 64;
        r->chunk_t = cz_xrealloc(r->chunk_t, cap, sizeof *r->chunk_t);
        r->cap_chunks = cap;
    }
    r->chunk_t[r->n_chunks++] = t;
    uint32_t k = c->n_token_ids >= 0 ? (uint32_t)c->n_token_ids
                 : abort_ || (c->finish_reason[0] && empty) ? 0u
                                                            : 1u;
    r->tokens += k;
    if (C->chat) {
        cz_grow((void **)&r->text, &r->cap_text, r->n_text + c->text_len + 1, 1);
        if (c->text_len)
            memcpy(r->text + r->n_text, c->text, c->text_len);
        r->n_text += c->text_len;
        r->text[r->n_text] = '\0';
        size_t cap = r->cap_ends;
        cz_grow((void **)&r->tok_end, &cap, r->n_chunks, sizeof *r->tok_end);
        cap = r->cap_ends;
        cz_grow((void **)&r->txt_end, &cap, r->n_chunks, sizeof *r->txt_end);
        r->cap_ends = cap;
        r->tok_end[r->n_chunks - 1] = r->tokens;
        r->txt_end[r->n_chunks - 1] = r->n_text;
    }
    if (r->spoken && k && !r->failed)
        play_chunk(C, r, t, k);
    if (c->n_token_ids < 0) {
        /* a server's abort chunk ends the stream carrying no token */
        if (!abort_ || !empty)
            r->ids_missing = true;
    } else if (c->n_token_ids > 0) {
        cz_grow((void **)&r->reply, &r->cap_reply, r->n_reply + (size_t)c->n_token_ids,
                sizeof *r->reply);
        cz_oai_chunk_token_ids(c, r->reply + r->n_reply);
        r->n_reply += (size_t)c->n_token_ids;
    }
}

static bool on_event(void *ctx, const char *data, size_t n)
{
    hreq *r = ctx;
    hclient *C = r->C;
    double t = now_s(C);
    cz_oai_chunk c;
    cz_err e;
    if (cz_oai_chunk_parse(data, n, &c, &e) != CZ_OK) {
        fail(r, CZ_HFAIL_BAD_CHUNK, "%s", e.msg);
        return false;
    }
    if (c.has_error) {
        fail(r, CZ_HFAIL_ERROR_EVENT, "%s", c.error);
    } else if (c.done) {
        r->done = true;
    } else if (c.has_choices) {
        bool abort_ = strcmp(c.finish_reason, "abort") == 0;
        bool empty = !c.text || !c.text_len;
        /* a chat chunk without content (the role's, a finishing one) is not a token: vLLM's
         * benchmark times a chat stream by its chunks with content */
        if (!(C->chat && empty && c.n_token_ids <= 0))
            took_chunk(C, r, &c, t, abort_, empty);
        if (abort_)
            fail(r, CZ_HFAIL_SERVER_ABORT, "the server aborted the stream after %zu chunks",
                 r->n_chunks);
        else if (c.finish_reason[0])
            r->finished = true;
        if (c.completion_tokens >= 0) /* a server that puts usage on every chunk */
            r->usage_out = c.completion_tokens;
    } else if (c.has_usage) {
        r->usage_out = c.completion_tokens;
        r->usage_in = c.prompt_tokens;
    }
    cz_oai_chunk_free(&c);
    return !r->failed;
}

/* Keeps the first ERR_BODY_MAX - 1 bytes of a body (an error's, an event's answer). */
static size_t keep_body(hreq *r, const char *p, size_t n)
{
    size_t k = n < ERR_BODY_MAX - 1 - r->errlen ? n : ERR_BODY_MAX - 1 - r->errlen;
    memcpy(r->errbody + r->errlen, p, k);
    r->errlen += k;
    r->errbody[r->errlen] = 0;
    return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    hreq *r = ud;
    size_t n = size * nmemb;
    if (r->event)
        return keep_body(r, p, n);
    if (r->failed)
        return n; /* drained: the turn's outcome is decided */
    if (r->status == 0)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status != 200)
        return keep_body(r, p, n);
    cz_err e;
    if (cz_sse_feed(&r->sse, p, n, on_event, r, &e) != CZ_OK)
        fail(r, CZ_HFAIL_BAD_CHUNK, "%s", e.msg);
    return n;
}

/* ---- turns ---- */

static void schedule_session(hclient *C, uint32_t si, double at);

/* Turn g of session si has ended at `now` (cut by a barge-in when `barged`): the
 * session's next turn, and the next session of a closed-loop workload. A closed session's
 * next utterance starts think_s after the reply has ended (played out, for a spoken one),
 * or at once after a barge-in (the interruption is the next turn's start), and is sent
 * its speech_s later, when the user stops speaking. */
static void turn_ended(hclient *C, uint32_t si, uint32_t g, double now, bool barged)
{
    C->turn_done[g] = true;
    C->ended++;
    hsess *S = &C->ses[si];
    S->ended++;
    const cz_session *s = cz_workload_session_at(C->wl, si);
    if (s->timing == CZ_TIMING_CLOSED && S->next < s->n_turns) {
        const cz_turn *t = cz_workload_turn_at(C->wl, s->turn_off + S->next - 1);
        uint32_t ng = s->turn_off + S->next;
        const cz_turn *nx = cz_workload_turn_at(C->wl, ng);
        double speech = barged ? now : now + t->think_s;
        if (nx->speech_s > 0 && !barged) /* a barge-in is itself the speech's start */
            cz_evq_push(&C->tq, speech, EV_SPEECH, ng, si);
        cz_evq_push(&C->q, speech + nx->speech_s, EV_SEND, ng, si);
        S->next++;
        return;
    }
    if (S->ended == s->n_turns && C->wl->concurrency) {
        if (C->pend_at < C->n_pending) {
            uint32_t nx = C->pending[C->pend_at++];
            const cz_turn *t0 = cz_workload_turn_at(C->wl, cz_workload_session_at(C->wl, nx)->turn_off);
            schedule_session(C, nx, t0->arrival_s > now ? t0->arrival_s : now);
        }
    }
}

/* Session si starts: its open-loop turns at their arrivals (a later turn's speech start
 * its speech_s before), or its first turn at `at`. */
static void schedule_session(hclient *C, uint32_t si, double at)
{
    const cz_session *s = cz_workload_session_at(C->wl, si);
    hsess *S = &C->ses[si];
    if (s->timing == CZ_TIMING_OPEN) {
        for (uint32_t k = 0; k < s->n_turns; k++) {
            const cz_turn *t = cz_workload_turn_at(C->wl, s->turn_off + k);
            double when = k == 0 ? at : t->arrival_s;
            if (when < at)
                when = at;
            if (k > 0 && t->speech_s > 0)
                cz_evq_push(&C->tq, when - t->speech_s > at ? when - t->speech_s : at, EV_SPEECH,
                            s->turn_off + k, si);
            cz_evq_push(&C->q, when, EV_SEND, s->turn_off + k, si);
        }
        S->next = s->n_turns;
    } else {
        cz_evq_push(&C->q, at, EV_SEND, s->turn_off, si);
        S->next = 1;
    }
}

/* Turn g of session si ended with `received` reply tokens to carry (a barged reply's: the
 * ones heard): the conversation grows by the turn's own input and that reply, the
 * server's ids when its chunks carried them all (return_token_ids), else as many ids of
 * the client's own (the count is what the next prompt's length needs; a server's prefix
 * cache then stops at the reply). */
static void carry(hclient *C, uint32_t si, uint32_t g, const hreq *r, uint32_t received)
{
    hsess *S = &C->ses[si];
    if (C->chat) {
        /* the user's message and the reply as received: its text up to the last chunk
         * within `received` tokens */
        size_t len = 0;
        for (size_t i = 0; i < r->n_chunks && r->tok_end[i] <= received; i++)
            len = r->txt_end[i];
        char *reply = cz_xmalloc(len + 1);
        if (len)
            memcpy(reply, r->text, len);
        reply[len] = '\0';
        char *u = json_str(r->own_text ? r->own_text : ""), *a = json_str(reply);
        free(reply);
        size_t need = strlen(u) + strlen(a) + 80;
        cz_grow((void **)&S->chat, &S->cap_chat, S->n_chat + need, 1);
        int k = snprintf(S->chat + S->n_chat, S->cap_chat - S->n_chat,
                         "{\"role\":\"user\",\"content\":%s},"
                         "{\"role\":\"assistant\",\"content\":%s},", u, a);
        CZ_ASSERT(k > 0 && (size_t)k < S->cap_chat - S->n_chat);
        S->n_chat += (size_t)k;
        S->chat_tokens += r->new_in + received;
        cJSON_free(u);
        cJSON_free(a);
        C->hs->replies_as_text += received > 0;
        return;
    }
    const cz_turn *t = cz_workload_turn_at(C->wl, g);
    bool ids = !r->ids_missing && r->n_reply >= received;
    cz_grow((void **)&S->hist, &S->cap_hist, S->n_hist + r->new_in + received, sizeof *S->hist);
    for (uint32_t i = 0; i < r->new_in; i++)
        S->hist[S->n_hist++] = prompt_id(C, t, g, i);
    for (uint32_t i = 0; i < received; i++)
        S->hist[S->n_hist++] = ids ? r->reply[i] : prompt_id(C, t, g, r->new_in + i);
    if (received && ids)
        C->hs->replies_as_ids++;
    else if (received)
        C->hs->replies_as_count++;
}

/* Records turn g's end: its request record when it was sent (r), its audio record when
 * spoken, its turn record. A barged turn's request is aborted, its tokens those received
 * and its heard tokens those played, as the simulator records a cut reply. */
static void record(hclient *C, uint32_t si, uint32_t g, hreq *r, uint32_t outcome, double now)
{
    const cz_session *s = cz_workload_session_at(C->wl, si);
    uint32_t turn = g - s->turn_off;
    uint64_t id = UINT64_MAX;
    if (r) {
        bool done = outcome == CZ_REQ_COMPLETED, cut = outcome == CZ_REQ_ABORTED;
        uint32_t out = (uint32_t)r->n_chunks;
        if (r->usage_out >= 0)
            out = r->usage_out > UINT32_MAX ? UINT32_MAX : (uint32_t)r->usage_out;
        if (cut)
            out = r->tokens;
        uint32_t in = r->usage_in >= 0 && r->usage_in <= UINT32_MAX ? (uint32_t)r->usage_in
                                                                    : r->prompt_len;
        cz_req_record rec = {
            .session = si, .turn = turn, .stage = 0, .cls = (uint32_t)s->cls,
            .input_tokens = in, .output_tokens = done || cut ? out : 0,
            .outcome = outcome, .heard_tokens = done ? out : cut ? r->heard : 0,
            .arrival_s = r->intended_s, .send_lag_s = r->sent_s - r->intended_s,
            .first_sched_s = NAN,
            .first_token_s = r->n_chunks ? r->chunk_t[0] : NAN,
            .finish_s = r->n_chunks ? r->chunk_t[r->n_chunks - 1] : NAN,
        };
        id = cz_metrics_add_request(C->m, &rec);
        for (size_t i = 0; i < r->n_chunks; i++) /* every outcome's: what arrived */
            cz_metrics_add_chunk(C->m, id, (uint32_t)i, r->chunk_t[i]);
        C->hs->chunks += r->n_chunks;
        if (carries(s) && turn + 1 < s->n_turns) /* a next turn to carry it into */
            carry(C, si, g, r,
                  done            ? out
                  : cut           ? r->heard
                  : r->ids_missing ? (uint32_t)r->n_chunks
                                   : (uint32_t)r->n_reply);
        if (done || cut) { /* what arrived of a cut reply was served as any other */
            for (size_t i = 1; i < r->n_chunks; i++)
                cz_metrics_add_itl(C->m, 0, r->chunk_t[i] - r->chunk_t[i - 1], 1);
            for (size_t i = 0; i < r->n_chunks; i++)
                cz_metrics_add_tokens(C->m, r->chunk_t[i], 1);
        }
        if (done) {
            C->hs->completed++;
            C->hs->with_usage += r->usage_out >= 0;
            C->hs->len_honoured += out == r->want_out;
        }
        if (r->spoken) {
            /* as the simulator's client records a reply it played (docs/playback.md):
             * audio TTFP from the send, the end of the user's speech */
            const cz_turn *t = cz_workload_turn_at(C->wl, g);
            const cz_player *pl = &r->pl;
            bool got = (done || cut) && pl->chunks > 0;
            cz_audio_record a = {
                .session = si, .turn = turn, .barged = cut, .ready_s = r->sent_s,
                .speech_start_s = r->intended_s - t->speech_s,
                .first_audio_s = got ? pl->start_s : NAN,
                .last_audio_s = got ? pl->last_arrival_s : NAN,
                .audio_s = got ? pl->audio_s : 0.0,
                .heard_s = cut ? r->heard_s : got ? pl->audio_s : 0.0, .end_s = now};
            if (done) {
                a.max_underrun_s = pl->max_underrun_s;
                a.underruns = pl->underruns;
                a.chunks = pl->chunks;
                a.continuous = cz_player_continuous(pl);
            }
            cz_metrics_add_audio(C->m, &a);
        }
    }
    cz_turn_record tr = {.session = si, .req = id, .end_s = now, .turn = turn,
                         .cls = (uint32_t)s->cls, .outcome = outcome, .stage = 0};
    cz_metrics_add_turn(C->m, &tr);
    if (id != UINT64_MAX)
        cz_metrics_release(C->m, id);
}

/* A request or event leaves libcurl: its transfer (cancelled if open) and its buffers. */
static void detach(hclient *C, hreq *r)
{
    if (r->easy) {
        curl_multi_remove_handle(C->multi, r->easy);
        curl_easy_cleanup(r->easy);
    }
    curl_slist_free_all(r->hdrs);
    free(r->body);
    cz_sse_free(&r->sse);
    r->easy = NULL;
    r->hdrs = NULL;
    r->body = NULL;
    if (r->streaming) {
        r->streaming = false;
        C->in_flight--;
    }
}

/* A zeroed request from the free list (its chunk and reply buffers kept), or a new one. */
static hreq *req_alloc(hclient *C)
{
    hreq *r = C->free_reqs;
    if (r)
        C->free_reqs = r->next_free;
    else
        r = cz_xcalloc(1, sizeof *r);
    hreq keep = *r; /* the buffers, kept for the next request */
    memset(r, 0, sizeof *r);
    r->chunk_t = keep.chunk_t;
    r->cap_chunks = keep.cap_chunks;
    r->reply = keep.reply;
    r->cap_reply = keep.cap_reply;
    r->text = keep.text;
    r->cap_text = keep.cap_text;
    r->tok_end = keep.tok_end;
    r->txt_end = keep.txt_end;
    r->cap_ends = keep.cap_ends;
    r->C = C;
    r->usage_out = r->usage_in = -1;
    cz_sse_init(&r->sse, 0);
    return r;
}

/* Returns r to the free list, unlinked from its live list if it was on one. */
static void req_free(hclient *C, hreq *r)
{
    detach(C, r);
    hreq **head = r->event ? &C->ev_active : &C->active;
    if (r->prev)
        r->prev->next = r->next;
    else if (*head == r)
        *head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    r->n_chunks = 0;
    r->n_reply = 0;
    r->n_text = 0;
    free(r->own_text);
    r->own_text = NULL;
    r->next_free = C->free_reqs; /* chunk_t kept for the next request */
    C->free_reqs = r;
}

/* Starts POSTing r->body (JSON) to `url` on the multi handle: the API key's header, and
 * `header` when not NULL; r is the transfer's private data and its body's reader (r->event
 * keeps the answer, a turn reads the event stream); its whole time at most timeout_ms; its
 * send time taken just before. On failure r is freed. */
static cz_status post(hclient *C, hreq *r, const char *url, const char *header, long timeout_ms,
                      cz_err *err)
{
    r->easy = curl_easy_init();
    if (!r->easy) {
        req_free(C, r);
        return cz_err_set(err, CZ_ENOMEM, "http client: curl_easy_init failed");
    }
    r->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (!r->event)
        r->hdrs = curl_slist_append(r->hdrs, "Accept: text/event-stream");
    if (C->o->api_key && C->o->api_key[0]) {
        char h[600];
        snprintf(h, sizeof h, "Authorization: Bearer %s", C->o->api_key);
        r->hdrs = curl_slist_append(r->hdrs, h);
    }
    if (header)
        r->hdrs = curl_slist_append(r->hdrs, header);
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    r->sent_s = now_s(C);
    CURLMcode mc = curl_multi_add_handle(C->multi, e);
    if (mc != CURLM_OK) {
        req_free(C, r);
        return cz_err_set(err, CZ_EINTERNAL, "http client: curl_multi_add_handle: %s",
                          curl_multi_strerror(mc));
    }
    return CZ_OK;
}

/* Turn r ends with `outcome` at `now`: recorded, its request freed, what follows it
 * scheduled. */
static void finish_turn(hclient *C, hreq *r, uint32_t outcome, double now)
{
    uint32_t si = r->session, g = r->g;
    C->live[g] = NULL;
    record(C, si, g, r, outcome, now);
    req_free(C, r);
    turn_ended(C, si, g, now, outcome == CZ_REQ_ABORTED);
}

/* Sends turn g of session si now (intended at `intended`). */
static cz_status send_turn(hclient *C, uint32_t g, uint32_t si, double intended, cz_err *err)
{
    hreq *r = req_alloc(C);
    r->g = g;
    r->session = si;
    r->intended_s = intended;
    const cz_turn *t = cz_workload_turn_at(C->wl, g);
    const cz_session *ses = cz_workload_session_at(C->wl, si);
    r->body = request_body(C, g, t, &C->ses[si], carries(ses), &r->prompt_len, &r->new_in,
                           &r->want_out, &r->own_text);
    if (spoken_turn(t)) {
        r->spoken = true;
        r->a_tok = t->out_audio_s / r->want_out;
        cz_player_init(&r->pl, C->cfg->continuity_threshold_s);
    }
    const cz_session *s = cz_workload_session_at(C->wl, si);
    char h[300] = "", b[32];
    if (s->n_turns > 1 || r->spoken)
        snprintf(h, sizeof h, "X-Session-ID: %s", session_id(C, si, b, sizeof b));
    cz_status st = post(C, r, C->url, h[0] ? h : NULL, (long)(C->o->timeout_s * 1e3), err);
    if (st != CZ_OK)
        return st;
    r->streaming = true;
    r->next = C->active;
    if (C->active)
        C->active->prev = r;
    C->active = r;
    C->live[g] = r;
    C->in_flight++;
    C->hs->sent++;
    return CZ_OK;
}

/* A transfer ended: an event's answer, or the turn's stream. A spoken reply that arrived
 * plays on: its turn ends when the player has played it (EV_PLAYED), or at a barge-in. */
static void transfer_done(hclient *C, hreq *r, CURLcode res)
{
    if (r->event) {
        event_done(C, r, res);
        return;
    }
    if (!r->failed) {
        long status = r->status;
        if (res == CURLE_OK && status == 0)
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        if (res != CURLE_OK) {
            fail(r, CZ_HFAIL_TRANSPORT, "%s", curl_easy_strerror(res));
        } else if (status != 200) {
            /* the OpenAI error object's message when there is one */
            char msg[200] = "";
            cJSON *j = cJSON_ParseWithLength(r->errbody, r->errlen);
            const cJSON *eo = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
            const cJSON *mm = cJSON_IsObject(eo) ? cJSON_GetObjectItemCaseSensitive(eo, "message")
                                                 : cJSON_GetObjectItemCaseSensitive(j, "message");
            if (cJSON_IsString(mm))
                snprintf(msg, sizeof msg, "%s", mm->valuestring);
            else if (cJSON_IsString(eo)) /* {"error": "Unauthorized"}, vLLM's 401 */
                snprintf(msg, sizeof msg, "%s", eo->valuestring);
            cJSON_Delete(j);
            fail(r, CZ_HFAIL_HTTP, "HTTP %ld%s%s", status, msg[0] ? ": " : "", msg);
        } else {
            cz_sse_end(&r->sse, on_event, r);
            if (!r->failed && r->n_chunks == 0)
                fail(r, CZ_HFAIL_NO_CHUNK, "the stream ended without a chunk with choices");
            else if (!r->failed && !r->done && !r->finished)
                fail(r, CZ_HFAIL_TRUNCATED,
                     "the stream ended after %zu chunks without [DONE] or a finish_reason",
                     r->n_chunks);
        }
    }
    double now = now_s(C); /* after the last event's chunk */
    if (r->failed) {
        C->hs->failed_by[r->why]++;
        if (!C->hs->first_error[r->why][0])
            snprintf(C->hs->first_error[r->why], sizeof C->hs->first_error[r->why], "%s",
                     r->msg);
    }
    if (!r->failed && r->spoken && r->pl.chunks > 0) {
        detach(C, r);
        report_playback(C, r, now); /* all of it received */
        double end = cz_player_end_s(&r->pl);
        cz_evq_push(&C->tq, end > now ? end : now, EV_PLAYED, r->g, r->session);
        return;
    }
    finish_turn(C, r, r->failed ? CZ_REQ_FAILED : CZ_REQ_COMPLETED, now);
}

/* The user barges in on turn g's reply at `now` (its first audio + barge_in_s): the
 * player stops where it is, the stream is cancelled if still open, the server told what
 * was heard (the interaction plane), and the turn ends aborted. Nothing happens when the
 * reply has already played out or its stream failed. */
static void barge(hclient *C, uint32_t g, double now)
{
    hreq *r = C->live[g];
    if (!r || r->failed)
        return;
    double heard_s = cz_player_heard_s(&r->pl, now);
    if (!r->streaming && heard_s >= r->pl.audio_s)
        return; /* played out: its EV_PLAYED ends it */
    r->barged = true;
    r->heard_s = heard_s;
    double h = floor(heard_s / r->a_tok + 1e-9);
    r->heard = h >= (double)r->tokens ? r->tokens : (uint32_t)h;
    C->hs->barge_ins++;
    C->hs->barge_ins_streaming += r->streaming;
    hev e = {.type = HEV_BARGE_IN, .heard = r->heard, .played_s = heard_s};
    ev_queue(C, r->session, &e);
    finish_turn(C, r, CZ_REQ_ABORTED, now); /* its stream, if open, cancelled */
}

/* Fires the timers due by now. */
static void fire_timers(hclient *C)
{
    for (;;) {
        const cz_event *ev = cz_evq_peek(&C->tq);
        double now = now_s(C);
        if (!ev || ev->t_s > now)
            return;
        cz_event e;
        cz_evq_pop(&C->tq, &e);
        switch (e.type) {
        case EV_SPEECH: {
            hev x = {.type = HEV_SPEECH_START};
            ev_queue(C, e.arg2, &x);
            break;
        }
        case EV_BARGE: barge(C, e.arg, now); break;
        case EV_PLAYED: {
            hreq *r = C->live[e.arg];
            if (r && !r->streaming && !r->barged)
                finish_turn(C, r, CZ_REQ_COMPLETED, now);
            break;
        }
        default: CZ_ASSERT(0 && "unknown timer");
        }
    }
}

static void drain_messages(hclient *C)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(C->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        hreq *r = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        transfer_done(C, r, msg->data.result);
    }
}

/* ---- the run ---- */

/* Sends what is due now, as max_concurrency allows: the turns waiting for room first, in
 * order; a due turn with no room joins them. */
static cz_status send_due(hclient *C, cz_err *err)
{
    const uint32_t maxc = C->o->max_concurrency;
    cz_status st = CZ_OK;
    double now = now_s(C);
    while (st == CZ_OK) {
        bool room = !maxc || C->in_flight < maxc;
        if (room && C->w_head < C->w_tail) {
            hdue w = C->waiting[C->w_head % C->w_cap];
            C->w_head++;
            if (!hold(C, w.g, w.si, w.t))
                st = send_turn(C, w.g, w.si, w.t, err);
            continue;
        }
        const cz_event *ev = cz_evq_peek(&C->q);
        if (!ev || ev->t_s > now)
            break;
        cz_event e;
        cz_evq_pop(&C->q, &e);
        if (hold(C, e.arg, e.arg2, e.t_s))
            continue;
        if (room) {
            st = send_turn(C, e.arg, e.arg2, e.t_s, err);
            continue;
        }
        if (C->w_tail - C->w_head == C->w_cap) { /* the ring is full: twice the room */
            size_t cap = C->w_cap ? 2 * C->w_cap : 256;
            hdue *w = cz_xmalloc(cap * sizeof *w);
            for (size_t i = C->w_head; i < C->w_tail; i++)
                w[i - C->w_head] = C->waiting[i % C->w_cap];
            free(C->waiting);
            C->waiting = w;
            C->w_tail -= C->w_head;
            C->w_head = 0;
            C->w_cap = cap;
        }
        /* its intended time kept: its wait for room is part of its send lag */
        C->waiting[C->w_tail % C->w_cap] = (hdue){e.arg, e.arg2, e.t_s};
        C->w_tail++;
    }
    if (st == CZ_OK && C->kick) {
        /* a transfer was added: let libcurl start it now (its timer asked for 0 ms) */
        C->kick = false;
        int running;
        C->curl_due = -1;
        curl_multi_socket_action(C->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        drain_messages(C);
    }
    return st;
}

/* libcurl's socket callback: watch the socket for what it asks (CURLMOPT_SOCKETFUNCTION). */
static int on_socket(CURL *e, curl_socket_t s, int what, void *ud, void *sp)
{
    (void)e;
    hclient *C = ud;
    struct epoll_event ev = {0};
    ev.data.fd = s;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(C->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN | EPOLLRDHUP : 0u) |
                (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    if (!sp) {
        if (epoll_ctl(C->ep, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST)
            epoll_ctl(C->ep, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(C->multi, s, C); /* seen: later calls modify */
    } else if (epoll_ctl(C->ep, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(C->ep, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
}

/* libcurl's timer callback: when to call it with CURL_SOCKET_TIMEOUT (-1: never). */
static int on_timer(CURLM *multi, long timeout_ms, void *ud)
{
    (void)multi;
    hclient *C = ud;
    if (timeout_ms < 0) {
        C->curl_due = -1;
    } else if (timeout_ms == 0) {
        C->kick = true;
        C->curl_due = now_s(C);
    } else {
        C->curl_due = now_s(C) + (double)timeout_ms / 1e3;
    }
    return 0;
}

static cz_status check_workload(const cz_workload *wl, cz_err *err)
{
    if (wl->n_streams)
        return cz_err_set(err, CZ_EINVAL,
                          "workload.streams: periodic streams cannot be replayed over HTTP "
                          "(an OpenAI server has no frame interface)");
    return CZ_OK;
}

static cz_status make_url(hclient *C, cz_err *err)
{
    const char *ep = C->o->endpoint;
    if (!ep || (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) ||
        strlen(ep) > 2000)
        return cz_err_set(err, CZ_EINVAL,
                          "--endpoint: expected an http:// or https:// base URL (such as "
                          "http://127.0.0.1:8000), got '%s'", ep ? ep : "");
    size_t n = strlen(ep);
    while (n > 0 && ep[n - 1] == '/')
        n--;
    /* a base that already names /v1 (OpenAI clients' base_url) */
    bool v1 = n >= 3 && strncmp(ep + n - 3, "/v1", 3) == 0;
    C->url = cz_xmalloc(n + 32);
    const char *api = C->chat ? "/chat/completions" : "/completions";
    snprintf(C->url, n + 32, "%.*s%s%s", (int)n, ep, v1 ? "" : "/v1", api);
    C->ev_base = cz_xmalloc(n + 32);
    snprintf(C->ev_base, n + 32, "%.*s%s", (int)n, ep, v1 ? "/sessions/" : "/v1/sessions/");
    CURLU *u = curl_url();
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, C->url, 0) : CURLUE_OUT_OF_MEMORY;
    curl_url_cleanup(u);
    if (uc != CURLUE_OK)
        return cz_err_set(err, CZ_EINVAL, "--endpoint: '%s' is not a URL (%s)", ep,
                          curl_url_strerror(uc));
    return CZ_OK;
}

/* Frees what the run holds from its start: the URLs, the model's name, the tokenizer. */
static void early_free(hclient *C)
{
    free(C->url);
    free(C->ev_base);
    cJSON_free(C->model_json);
    cz_prompt_pool_free(&C->pool);
    cz_tokenizer_free(C->tok);
}

cz_status cz_hclient_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                         const cz_hclient_opts *opts, cz_run_stats *stats,
                         cz_hclient_stats *hs, bool *partial, cz_run_progress_fn progress,
                         void *pctx, cz_err *err)
{
    CZ_ASSERT(!wl->gen && !wl->live);
    CZ_ASSERT(opts->timeout_s > 0 && opts->timeout_s * 1e3 < (double)LONG_MAX);
    memset(hs, 0, sizeof *hs);
    memset(stats, 0, sizeof *stats);
    stats->kv_saturated_at_s = NAN;
    stats->arrival_rate_rps = NAN;
    stats->stream_end_blocks = NAN;
    *partial = false;
    cz_status st = check_workload(wl, err);
    if (st != CZ_OK)
        return st;
    hclient C;
    memset(&C, 0, sizeof C);
    C.cfg = cfg;
    C.wl = wl;
    C.m = m;
    C.o = opts;
    C.hs = hs;
    C.chat = opts->api == CZ_HAPI_CHAT;
    CZ_ASSERT(!C.chat || (opts->tokenizer && opts->tokenizer[0]));
    if ((st = make_url(&C, err)) != CZ_OK) {
        early_free(&C);
        return st;
    }
    if (C.chat) {
        /* text messages: the server's tokenizer makes their lengths exact */
        if ((st = cz_tokenizer_load(opts->tokenizer, &C.tok, err)) != CZ_OK ||
            (st = cz_prompt_pool_init(&C.pool, C.tok, err)) != CZ_OK) {
            early_free(&C);
            return cz_err_prefix(err, "--tokenizer %s: ", opts->tokenizer);
        }
    }
    C.events = !opts->no_events;
    C.held_free = NONE;
    C.vocab = 0;
    for (uint32_t i = 0; i < cfg->model.n_stages && !C.vocab; i++)
        if (cfg->model.stages[i].kind == CZ_STAGE_AR)
            C.vocab = cfg->model.stages[i].vocab;
    if (C.vocab < 64)
        C.vocab = 64;
    cJSON *mj = cJSON_CreateString(opts->model && opts->model[0] ? opts->model : cfg->model.name);
    C.model_json = cJSON_PrintUnformatted(mj);
    cJSON_Delete(mj);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        early_free(&C);
        return cz_err_set(err, CZ_EINTERNAL, "http client: curl_global_init failed");
    }
    C.multi = curl_multi_init();
    CZ_ASSERT(C.multi != NULL);
    C.curl_due = -1;
    C.ep = epoll_create1(EPOLL_CLOEXEC);
    if (C.ep < 0) {
        curl_multi_cleanup(C.multi);
        curl_global_cleanup();
        early_free(&C);
        return cz_err_set(err, CZ_EINTERNAL, "http client: epoll_create1: %s", strerror(errno));
    }
    curl_multi_setopt(C.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(C.multi, CURLMOPT_SOCKETDATA, &C);
    curl_multi_setopt(C.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(C.multi, CURLMOPT_TIMERDATA, &C);
    cz_evq_init(&C.q, 1024);
    cz_evq_init(&C.tq, 256);
    C.ses = cz_xcalloc(wl->n_sessions ? wl->n_sessions : 1, sizeof *C.ses);
    for (uint32_t si = 0; si < wl->n_sessions; si++)
        C.ses[si].held_head = C.ses[si].held_tail = NONE;
    C.turn_done = cz_xcalloc(wl->n_turns ? wl->n_turns : 1, sizeof *C.turn_done);
    C.live = cz_xcalloc(wl->n_turns ? wl->n_turns : 1, sizeof *C.live);
    m->acct.requests = wl->n_turns;
    m->send_lags = true;
    cz_metrics_set_slo(m, &cfg->slo);
    cz_metrics_track_classes(m, cz_workload_mixed_classes(wl));

    /* sessions: all at their first arrivals, or the first c of a closed-loop workload */
    if (wl->concurrency) {
        C.pending = cz_xmalloc((wl->n_sessions ? wl->n_sessions : 1) * sizeof *C.pending);
        for (uint32_t si = 0; si < wl->n_sessions; si++)
            C.pending[C.n_pending++] = si;
    }
    clock_gettime(CLOCK_MONOTONIC, &C.t0);
    for (uint32_t si = 0; si < wl->n_sessions; si++) {
        if (wl->concurrency && si >= wl->concurrency)
            break;
        const cz_session *s = cz_workload_session_at(wl, si);
        if (s->n_turns == 0)
            continue;
        schedule_session(&C, si, cz_workload_turn_at(wl, s->turn_off)->arrival_s);
        if (wl->concurrency)
            C.pend_at = si + 1;
    }
    double next_progress = 0.5;
    /* until every turn has ended and the server has had every event */
    while (st == CZ_OK && (C.ended < wl->n_turns || C.ev_out > 0)) {
        if (opts->stop && *opts->stop) {
            *partial = C.ended < wl->n_turns;
            break;
        }
        fire_timers(&C);
        if ((st = ev_pump(&C, err)) != CZ_OK || (st = send_due(&C, err)) != CZ_OK)
            break;
        /* the network: epoll on libcurl's sockets, at most until the next send or libcurl's
         * timer; a batch of ready sockets at a time, the sends checked after each */
        double now = now_s(&C);
        double wake = now + POLL_MAX_MS / 1e3;
        const cz_event *ev = cz_evq_peek(&C.q);
        bool can_send = !opts->max_concurrency || C.in_flight < opts->max_concurrency;
        if (ev && can_send && ev->t_s - SPIN_S < wake)
            wake = ev->t_s - SPIN_S; /* then a poll without sleep until it is due */
        const cz_event *tv = cz_evq_peek(&C.tq);
        if (tv && tv->t_s - SPIN_S < wake)
            wake = tv->t_s - SPIN_S;
        if (C.curl_due >= 0 && C.curl_due < wake)
            wake = C.curl_due;
        if (C.n_ev_ready)
            wake = now; /* events queued by the sockets' callbacks */
        double wait = wake - now;
        if (wait < 0)
            wait = 0;
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        struct epoll_event evs[EPOLL_BATCH];
        int n = epoll_pwait2(C.ep, evs, EPOLL_BATCH, &ts, NULL);
        if (n < 0 && errno != EINTR) {
            st = cz_err_set(err, CZ_EINTERNAL, "http client: epoll_pwait2: %s", strerror(errno));
            break;
        }
        int running;
        for (int i = 0; i < n && st == CZ_OK; i++) {
            int flags = 0;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
                flags |= CURL_CSELECT_IN;
            if (evs[i].events & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
            if (evs[i].events & EPOLLERR)
                flags |= CURL_CSELECT_ERR;
            CURLMcode mc = curl_multi_socket_action(C.multi, evs[i].data.fd, flags, &running);
            if (mc != CURLM_OK)
                st = cz_err_set(err, CZ_EINTERNAL, "http client: curl_multi_socket_action: %s",
                                curl_multi_strerror(mc));
            drain_messages(&C);
            if (st == CZ_OK)
                st = send_due(&C, err);
        }
        fire_timers(&C);
        if (st == CZ_OK && C.curl_due >= 0 && now_s(&C) >= C.curl_due) {
            C.curl_due = -1;
            CURLMcode mc = curl_multi_socket_action(C.multi, CURL_SOCKET_TIMEOUT, 0, &running);
            if (mc != CURLM_OK)
                st = cz_err_set(err, CZ_EINTERNAL, "http client: curl_multi_socket_action: %s",
                                curl_multi_strerror(mc));
            drain_messages(&C);
        }
        if (progress && now_s(&C) >= next_progress) {
            next_progress = now_s(&C) + 0.5;
            cz_run_progress p = {now_s(&C), hs->sent, hs->sent, C.ended, wl->n_turns, false};
            progress(pctx, &p);
        }
    }
    double end = now_s(&C);
    /* what did not end: open streams cancelled, turns not sent */
    while (C.active) {
        hreq *r = C.active;
        uint32_t si = r->session, g = r->g;
        record(&C, si, g, r, CZ_REQ_UNFINISHED, end);
        C.live[g] = NULL;
        req_free(&C, r);
        C.turn_done[g] = true;
        C.ended++;
    }
    while (C.ev_active) /* events still in flight (a stop): cancelled */
        req_free(&C, C.ev_active);
    for (uint32_t g = 0; g < wl->n_turns; g++) {
        if (C.turn_done[g])
            continue;
        uint32_t si = 0;
        /* the session of turn g: sessions' turns are contiguous and in order */
        uint32_t lo = 0, hi = wl->n_sessions;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cz_workload_session_at(wl, mid)->turn_off <= g)
                lo = mid;
            else
                hi = mid;
        }
        si = lo;
        record(&C, si, g, NULL, CZ_REQ_UNFINISHED, end);
    }
    /* every turn has its outcome: the run's accounting holds, as in `sim` */
    cz_metrics_finish(m);
    if (st == CZ_OK)
        st = cz_metrics_check(m, err);
    hs->wall_s = end;
    stats->sim_time_s = end;
    stats->arrivals = hs->sent;
    stats->events = hs->chunks;
    if (progress) {
        cz_run_progress p = {end, hs->sent, hs->sent, C.ended, wl->n_turns, true};
        progress(pctx, &p);
    }
    while (C.free_reqs) {
        hreq *r = C.free_reqs;
        C.free_reqs = r->next_free;
        free(r->chunk_t);
        free(r->reply);
        free(r->text);
        free(r->tok_end);
        free(r->txt_end);
        free(r);
    }
    for (uint32_t si = 0; si < wl->n_sessions; si++) {
        free(C.ses[si].hist);
        free(C.ses[si].chat);
    }
    curl_multi_cleanup(C.multi);
    curl_global_cleanup();
    close(C.ep);
    cz_evq_free(&C.q);
    cz_evq_free(&C.tq);
    free(C.ses);
    free(C.turn_done);
    free(C.live);
    free(C.ev_ready);
    free(C.held);
    free(C.pending);
    free(C.waiting);
    free(C.buf);
    early_free(&C);
    return st;
}
