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

const char *cz_hfail_name(cz_hfail k)
{
    static const char *const n[CZ_HFAIL_N] = {"transport", "http_status", "error_event",
                                              "bad_chunk", "no_chunk", "truncated",
                                              "server_abort"};
    CZ_ASSERT(k < CZ_HFAIL_N);
    return n[k];
}

/* One request in flight. */
typedef struct hreq {
    struct hclient *C;
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
    struct hreq *next_free;  /* the free list */
    struct hreq *prev, *next;/* the requests in flight */
} hreq;

typedef struct hsess {
    uint32_t next;           /* closed loop: its next turn to send (index in the session) */
    uint32_t ended;          /* its turns ended */
    uint32_t *hist;          /* a closed-loop conversation so far: every earlier turn's
                                prompt ids and reply ids as received */
    size_t n_hist, cap_hist;
} hsess;

enum { EV_SEND = 1 };

typedef struct hclient {
    const cz_config *cfg;
    cz_workload *wl;
    cz_metrics *m;
    const cz_hclient_opts *o;
    cz_hclient_stats *hs;
    CURLM *multi;
    char *url;
    char *model_json;        /* the model name as a JSON string */
    uint32_t vocab;
    struct timespec t0;
    cz_evq q;                /* sends due (EV_SEND, turn g) */
    uint32_t *waiting;       /* turns due while max_concurrency is reached, FIFO */
    size_t w_head, w_tail, w_cap;
    hsess *ses;
    uint32_t *pending;       /* closed-loop workload: sessions not started, in order */
    uint32_t n_pending, pend_at;
    uint32_t in_flight;
    uint64_t ended;          /* turns ended */
    hreq *free_reqs;
    hreq *active;            /* the requests in flight, a doubly linked list */
    bool *turn_done;         /* per global turn */
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
static uint32_t prompt_id(const hclient *C, const cz_turn *t, uint32_t g, uint32_t i)
{
    uint64_t key;
    const uint32_t *h = cz_workload_turn_hashes(C->wl, t);
    uint32_t bt = C->wl->hash_block_tokens;
    if (h && bt && i / bt < t->hash_len)
        key = mix64(0x517cc1b727220a95ull ^ h[i / bt]) + i % bt;
    else
        key = mix64(C->cfg->seed * 0x9e3779b97f4a7c15ull + g) + i;
    uint32_t span = C->vocab - C->vocab / 4;
    return C->vocab / 8 + (uint32_t)(mix64(key) % span);
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
 * prompt's ids, *own the turn's own input among them (the last ones). */
static char *request_body(hclient *C, uint32_t g, const cz_turn *t, const hsess *S,
                          bool carry, uint32_t *plen, uint32_t *own, uint32_t *out)
{
    size_t n = 0;
    char num[64];
    uint32_t in = cz_turn_in_tokens(t);
    if (in == 0)
        in = 1;
    uint32_t o = t->out_text_tokens ? t->out_text_tokens : 1;
    put(C, &n, "{\"model\":", 9);
    put(C, &n, C->model_json, strlen(C->model_json));
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
        if (r->n_chunks == r->cap_chunks) {
            size_t cap = r->cap_chunks ? 2 * r->cap_chunks : 64;
            r->chunk_t = cz_xrealloc(r->chunk_t, cap, sizeof *r->chunk_t);
            r->cap_chunks = cap;
        }
        r->chunk_t[r->n_chunks++] = t;
        bool abort_ = strcmp(c.finish_reason, "abort") == 0;
        if (c.n_token_ids < 0) {
            /* a server's abort chunk ends the stream carrying no token */
            if (!abort_ || (c.text && c.text_len))
                r->ids_missing = true;
        } else if (c.n_token_ids > 0) {
            cz_grow((void **)&r->reply, &r->cap_reply, r->n_reply + (size_t)c.n_token_ids,
                    sizeof *r->reply);
            cz_oai_chunk_token_ids(&c, r->reply + r->n_reply);
            r->n_reply += (size_t)c.n_token_ids;
        }
        if (strcmp(c.finish_reason, "abort") == 0)
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

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    hreq *r = ud;
    size_t n = size * nmemb;
    if (r->failed)
        return n; /* drained: the turn's outcome is decided */
    if (r->status == 0)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status != 200) {
        size_t k = n < ERR_BODY_MAX - 1 - r->errlen ? n : ERR_BODY_MAX - 1 - r->errlen;
        memcpy(r->errbody + r->errlen, p, k);
        r->errlen += k;
        r->errbody[r->errlen] = 0;
        return n;
    }
    cz_err e;
    if (cz_sse_feed(&r->sse, p, n, on_event, r, &e) != CZ_OK)
        fail(r, CZ_HFAIL_BAD_CHUNK, "%s", e.msg);
    return n;
}

/* ---- turns ---- */

static void schedule_session(hclient *C, uint32_t si, double at);

/* Turn g of session si has ended with `outcome` at `now`: the session's next turn, and
 * the next session of a closed-loop workload. */
static void turn_ended(hclient *C, uint32_t si, uint32_t g, double now)
{
    C->turn_done[g] = true;
    C->ended++;
    hsess *S = &C->ses[si];
    S->ended++;
    const cz_session *s = cz_workload_session_at(C->wl, si);
    if (s->timing == CZ_TIMING_CLOSED && S->next < s->n_turns) {
        const cz_turn *t = cz_workload_turn_at(C->wl, s->turn_off + S->next - 1);
        cz_evq_push(&C->q, now + t->think_s, EV_SEND, s->turn_off + S->next, si);
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

/* Session si starts: its open-loop turns at their arrivals, or its first turn at `at`. */
static void schedule_session(hclient *C, uint32_t si, double at)
{
    const cz_session *s = cz_workload_session_at(C->wl, si);
    hsess *S = &C->ses[si];
    if (s->timing == CZ_TIMING_OPEN) {
        for (uint32_t k = 0; k < s->n_turns; k++) {
            const cz_turn *t = cz_workload_turn_at(C->wl, s->turn_off + k);
            double when = k == 0 ? at : t->arrival_s;
            cz_evq_push(&C->q, when > at ? when : at, EV_SEND, s->turn_off + k, si);
        }
        S->next = s->n_turns;
    } else {
        cz_evq_push(&C->q, at, EV_SEND, s->turn_off, si);
        S->next = 1;
    }
}

/* Turn g of session si ended with `received` reply tokens: the conversation grows by the
 * turn's own input and the reply as received, the server's ids when its chunks carried
 * them all (return_token_ids), else as many ids of the client's own (the count is what
 * the next prompt's length needs; a server's prefix cache then stops at the reply). */
static void carry(hclient *C, uint32_t si, uint32_t g, const hreq *r, uint32_t received)
{
    hsess *S = &C->ses[si];
    const cz_turn *t = cz_workload_turn_at(C->wl, g);
    bool ids = !r->ids_missing && r->n_reply == received;
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

/* Records turn g's end: its request record when it was sent (r), its turn record. */
static void record(hclient *C, uint32_t si, uint32_t g, hreq *r, uint32_t outcome, double now)
{
    const cz_session *s = cz_workload_session_at(C->wl, si);
    uint32_t turn = g - s->turn_off;
    uint64_t id = UINT64_MAX;
    if (r) {
        uint32_t out = (uint32_t)r->n_chunks;
        if (r->usage_out >= 0)
            out = r->usage_out > UINT32_MAX ? UINT32_MAX : (uint32_t)r->usage_out;
        uint32_t in = r->usage_in >= 0 && r->usage_in <= UINT32_MAX ? (uint32_t)r->usage_in
                                                                    : r->prompt_len;
        cz_req_record rec = {
            .session = si, .turn = turn, .stage = 0, .cls = (uint32_t)s->cls,
            .input_tokens = in, .output_tokens = outcome == CZ_REQ_COMPLETED ? out : 0,
            .outcome = outcome, .heard_tokens = outcome == CZ_REQ_COMPLETED ? out : 0,
            .arrival_s = r->intended_s, .send_lag_s = r->sent_s - r->intended_s,
            .first_sched_s = NAN,
            .first_token_s = r->n_chunks ? r->chunk_t[0] : NAN,
            .finish_s = r->n_chunks ? r->chunk_t[r->n_chunks - 1] : NAN,
        };
        id = cz_metrics_add_request(C->m, &rec);
        for (size_t i = 0; i < r->n_chunks; i++) /* every outcome's: what arrived */
            cz_metrics_add_chunk(C->m, id, (uint32_t)i, r->chunk_t[i]);
        if (carries(s) && turn + 1 < s->n_turns) /* a next turn to carry it into */
            carry(C, si, g, r,
                  outcome == CZ_REQ_COMPLETED ? out
                  : r->ids_missing            ? (uint32_t)r->n_chunks
                                              : (uint32_t)r->n_reply);
        if (outcome == CZ_REQ_COMPLETED) {
            for (size_t i = 1; i < r->n_chunks; i++)
                cz_metrics_add_itl(C->m, 0, r->chunk_t[i] - r->chunk_t[i - 1], 1);
            for (size_t i = 0; i < r->n_chunks; i++)
                cz_metrics_add_tokens(C->m, r->chunk_t[i], 1);
            C->hs->completed++;
            C->hs->with_usage += r->usage_out >= 0;
            C->hs->len_honoured += out == r->want_out;
        }
    }
    cz_turn_record tr = {.session = si, .req = id, .end_s = now, .turn = turn,
                         .cls = (uint32_t)s->cls, .outcome = outcome, .stage = 0};
    cz_metrics_add_turn(C->m, &tr);
    if (id != UINT64_MAX)
        cz_metrics_release(C->m, id);
}

static void req_free(hclient *C, hreq *r)
{
    curl_multi_remove_handle(C->multi, r->easy);
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->hdrs);
    free(r->body);
    cz_sse_free(&r->sse);
    r->easy = NULL;
    r->hdrs = NULL;
    r->body = NULL;
    r->n_chunks = 0;
    r->n_reply = 0;
    if (r->prev)
        r->prev->next = r->next;
    else
        C->active = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next_free = C->free_reqs; /* chunk_t kept for the next request */
    C->free_reqs = r;
    C->in_flight--;
}

/* Sends turn g of session si now (intended at `intended`). */
static cz_status send_turn(hclient *C, uint32_t g, uint32_t si, double intended, cz_err *err)
{
    hreq *r = C->free_reqs;
    if (r)
        C->free_reqs = r->next_free;
    else
        r = cz_xcalloc(1, sizeof *r);
    double *keep = r->chunk_t;
    size_t keep_cap = r->cap_chunks;
    uint32_t *keep_reply = r->reply;
    size_t keep_reply_cap = r->cap_reply;
    memset(r, 0, sizeof *r);
    r->chunk_t = keep;
    r->cap_chunks = keep_cap;
    r->reply = keep_reply;
    r->cap_reply = keep_reply_cap;
    r->C = C;
    r->g = g;
    r->session = si;
    r->usage_out = r->usage_in = -1;
    r->intended_s = intended;
    cz_sse_init(&r->sse, 0);
    const cz_turn *t = cz_workload_turn_at(C->wl, g);
    const cz_session *ses = cz_workload_session_at(C->wl, si);
    r->body = request_body(C, g, t, &C->ses[si], carries(ses), &r->prompt_len, &r->new_in,
                           &r->want_out);
    r->easy = curl_easy_init();
    if (!r->easy) {
        free(r->body);
        free(r->chunk_t);
        free(r->reply);
        free(r);
        return cz_err_set(err, CZ_ENOMEM, "http client: curl_easy_init failed");
    }
    r->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    r->hdrs = curl_slist_append(r->hdrs, "Accept: text/event-stream");
    if (C->o->api_key && C->o->api_key[0]) {
        char h[600];
        snprintf(h, sizeof h, "Authorization: Bearer %s", C->o->api_key);
        r->hdrs = curl_slist_append(r->hdrs, h);
    }
    const cz_session *s = cz_workload_session_at(C->wl, si);
    if (s->n_turns > 1) {
        /* the session's name when it is a plain token, else its index: a name from a
         * trace never puts bytes of its own into the request's headers */
        const char *name = cz_workload_session_name(C->wl, s);
        bool plain = name[0] != '\0' && strlen(name) < 200;
        for (const char *q = name; plain && *q; q++)
            plain = *q > ' ' && *q < 127;
        char h[300];
        if (plain)
            snprintf(h, sizeof h, "X-Session-ID: %s", name);
        else
            snprintf(h, sizeof h, "X-Session-ID: session-%u", si);
        r->hdrs = curl_slist_append(r->hdrs, h);
    }
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, C->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(C->o->timeout_s * 1e3));
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    r->sent_s = now_s(C);
    CURLMcode mc = curl_multi_add_handle(C->multi, e);
    if (mc != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(r->hdrs);
        free(r->body);
        free(r->chunk_t);
        free(r->reply);
        free(r);
        return cz_err_set(err, CZ_EINTERNAL, "http client: curl_multi_add_handle: %s",
                          curl_multi_strerror(mc));
    }
    r->next = C->active;
    if (C->active)
        C->active->prev = r;
    C->active = r;
    C->in_flight++;
    C->hs->sent++;
    return CZ_OK;
}

/* A transfer ended: the turn's outcome. */
static void transfer_done(hclient *C, hreq *r, CURLcode res)
{
    double now = now_s(C);
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
    if (r->failed) {
        C->hs->failed_by[r->why]++;
        if (!C->hs->first_error[r->why][0])
            snprintf(C->hs->first_error[r->why], sizeof C->hs->first_error[r->why], "%s",
                     r->msg);
    }
    C->hs->chunks += r->n_chunks;
    uint32_t si = r->session, g = r->g;
    record(C, si, g, r, r->failed ? CZ_REQ_FAILED : CZ_REQ_COMPLETED, now);
    req_free(C, r);
    turn_ended(C, si, g, now);
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
            size_t at = 2 * (C->w_head % C->w_cap);
            uint32_t g = C->waiting[at], si = C->waiting[at + 1];
            C->w_head++;
            st = send_turn(C, g, si, cz_workload_turn_at(C->wl, g)->arrival_s, err);
            continue;
        }
        const cz_event *ev = cz_evq_peek(&C->q);
        if (!ev || ev->t_s > now)
            break;
        cz_event e;
        cz_evq_pop(&C->q, &e);
        if (room) {
            st = send_turn(C, e.arg, e.arg2, e.t_s, err);
            continue;
        }
        if (C->w_tail - C->w_head == C->w_cap) { /* the ring is full: twice the room */
            size_t cap = C->w_cap ? 2 * C->w_cap : 256;
            uint32_t *w = cz_xmalloc(cap * 2 * sizeof *w);
            for (size_t i = C->w_head; i < C->w_tail; i++) {
                w[2 * (i - C->w_head)] = C->waiting[2 * (i % C->w_cap)];
                w[2 * (i - C->w_head) + 1] = C->waiting[2 * (i % C->w_cap) + 1];
            }
            free(C->waiting);
            C->waiting = w;
            C->w_tail -= C->w_head;
            C->w_head = 0;
            C->w_cap = cap;
        }
        size_t at = 2 * (C->w_tail % C->w_cap);
        C->waiting[at] = e.arg;
        C->waiting[at + 1] = e.arg2;
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
    for (uint32_t g = 0; g < wl->n_turns; g++) {
        const cz_turn *t = cz_workload_turn_at(wl, g);
        if (t->barge_in_s >= 0 || t->out_audio_tokens || t->speech_s > 0)
            return cz_err_set(err, CZ_EINVAL,
                              "workload: turn %u is spoken (speech, audio reply or barge-in); "
                              "the HTTP client sends text turns only", g);
    }
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
    snprintf(C->url, n + 32, "%.*s%s", (int)n, ep, v1 ? "/completions" : "/v1/completions");
    CURLU *u = curl_url();
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, C->url, 0) : CURLUE_OUT_OF_MEMORY;
    curl_url_cleanup(u);
    if (uc != CURLUE_OK)
        return cz_err_set(err, CZ_EINVAL, "--endpoint: '%s' is not a URL (%s)", ep,
                          curl_url_strerror(uc));
    return CZ_OK;
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
    if ((st = make_url(&C, err)) != CZ_OK) {
        free(C.url);
        return st;
    }
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
        free(C.url);
        cJSON_free(C.model_json);
        return cz_err_set(err, CZ_EINTERNAL, "http client: curl_global_init failed");
    }
    C.multi = curl_multi_init();
    CZ_ASSERT(C.multi != NULL);
    C.curl_due = -1;
    C.ep = epoll_create1(EPOLL_CLOEXEC);
    if (C.ep < 0) {
        curl_multi_cleanup(C.multi);
        curl_global_cleanup();
        free(C.url);
        cJSON_free(C.model_json);
        return cz_err_set(err, CZ_EINTERNAL, "http client: epoll_create1: %s", strerror(errno));
    }
    curl_multi_setopt(C.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(C.multi, CURLMOPT_SOCKETDATA, &C);
    curl_multi_setopt(C.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(C.multi, CURLMOPT_TIMERDATA, &C);
    cz_evq_init(&C.q, 1024);
    C.ses = cz_xcalloc(wl->n_sessions ? wl->n_sessions : 1, sizeof *C.ses);
    C.turn_done = cz_xcalloc(wl->n_turns ? wl->n_turns : 1, sizeof *C.turn_done);
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
    while (st == CZ_OK && C.ended < wl->n_turns) {
        if (opts->stop && *opts->stop) {
            *partial = true;
            break;
        }
        if ((st = send_due(&C, err)) != CZ_OK)
            break;
        /* the network: epoll on libcurl's sockets, at most until the next send or libcurl's
         * timer; a batch of ready sockets at a time, the sends checked after each */
        double now = now_s(&C);
        double wake = now + POLL_MAX_MS / 1e3;
        const cz_event *ev = cz_evq_peek(&C.q);
        bool can_send = !opts->max_concurrency || C.in_flight < opts->max_concurrency;
        if (ev && can_send && ev->t_s - SPIN_S < wake)
            wake = ev->t_s - SPIN_S; /* then a poll without sleep until it is due */
        if (C.curl_due >= 0 && C.curl_due < wake)
            wake = C.curl_due;
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
        req_free(&C, r);
        C.turn_done[g] = true;
        C.ended++;
    }
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
        free(r);
    }
    for (uint32_t si = 0; si < wl->n_sessions; si++)
        free(C.ses[si].hist);
    curl_multi_cleanup(C.multi);
    curl_global_cleanup();
    close(C.ep);
    cz_evq_free(&C.q);
    free(C.ses);
    free(C.turn_done);
    free(C.pending);
    free(C.waiting);
    free(C.buf);
    free(C.url);
    cJSON_free(C.model_json);
    return st;
}
