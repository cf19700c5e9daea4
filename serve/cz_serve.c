/* cz_serve.c - `cadenza serve` (cz_serve.h): the HTTP threads, the runtime thread, the
 * streams between them, and the Prometheus metrics. docs/serve.md has the design. */
#define _GNU_SOURCE
#include "cz_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cz_deploy.h"
#include "cz_engine.h"
#include "cz_oai.h"
#include "cz_sim.h"
#include "cz_tokenizer.h"
#include "cz_wall.h"

#define NONE UINT32_MAX
/* How long an HTTP thread waits for its stream before it looks at its client again. */
#define SV_POLL_S 0.25
/* The runtime thread looks at its stop flag, the sessions' idle time and the metrics at
 * least this often. */
#define SV_TICK_S 0.1
/* Bytes of one response body handed to libmicrohttpd at a time. */
#define SV_BLOCK 32768

/* ---- a small map: 64-bit keys, or strings, to pointers (chained; the runtime thread's) */

typedef struct sv_node {
    struct sv_node *next;
    uint64_t key;
    char *skey; /* owned; NULL for an integer key */
    void *val;
} sv_node;

typedef struct sv_map {
    sv_node **b;
    size_t cap, n;
} sv_map;

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static sv_node **map_slot(sv_map *m, uint64_t key, const char *skey)
{
    if (!m->cap)
        return NULL;
    sv_node **p = &m->b[mix64(key) & (m->cap - 1)];
    for (; *p; p = &(*p)->next)
        if ((*p)->key == key && (!skey || ((*p)->skey && strcmp((*p)->skey, skey) == 0)))
            return p;
    return p;
}

static void *map_get(sv_map *m, uint64_t key, const char *skey)
{
    sv_node **p = map_slot(m, key, skey);
    return p && *p ? (*p)->val : NULL;
}

static void map_put(sv_map *m, uint64_t key, const char *skey, void *val)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        sv_node **b = cz_xcalloc(cap, sizeof *b);
        for (size_t i = 0; i < m->cap; i++)
            for (sv_node *x = m->b[i], *nx; x; x = nx) {
                nx = x->next;
                sv_node **d = &b[mix64(x->key) & (cap - 1)];
                x->next = *d;
                *d = x;
            }
        free(m->b);
        m->b = b;
        m->cap = cap;
    }
    sv_node **p = map_slot(m, key, skey);
    if (*p) {
        (*p)->val = val;
        return;
    }
    sv_node *x = cz_xcalloc(1, sizeof *x);
    x->key = key;
    x->skey = skey ? cz_xstrdup(skey) : NULL;
    x->val = val;
    *p = x;
    m->n++;
}

static void map_del(sv_map *m, uint64_t key, const char *skey)
{
    sv_node **p = map_slot(m, key, skey);
    if (!p || !*p)
        return;
    sv_node *x = *p;
    *p = x->next;
    free(x->skey);
    free(x);
    m->n--;
}

static void map_free(sv_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        for (sv_node *x = m->b[i], *nx; x; x = nx) {
            nx = x->next;
            free(x->skey);
            free(x);
        }
    free(m->b);
    memset(m, 0, sizeof *m);
}

/* ---- Prometheus histograms (vLLM's buckets) ---- */

static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                 0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0,
                                 640.0, 2560.0};
static const double itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
static const double e2e_le[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,    10.0, 15.0, 20.0,
                                30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

#define SV_HMAX 24
typedef struct sv_hist {
    uint64_t cnt[SV_HMAX]; /* per bucket (not cumulative); the last: +Inf */
    double sum;
    uint64_t count;
} sv_hist;

static void hist_add(sv_hist *h, const double *le, size_t n, double v)
{
    size_t i = 0;
    while (i < n && v > le[i])
        i++;
    h->cnt[i]++;
    h->sum += v;
    h->count++;
}

/* What /metrics shows: the runtime thread's figures, published each turn of its loop. */
typedef struct sv_prom {
    uint64_t running, waiting;
    double kv_usage;
    uint64_t host_tokens;
    uint64_t prompt_tokens, generation_tokens, preemptions, cached_tokens;
    uint64_t finished[4]; /* by cz_oai_finish: -, stop, length, abort */
    uint64_t client_aborts, dropped;
    uint64_t events[4];   /* the interaction plane's, by cz_oai_event_type */
    uint64_t barge_ins;   /* barge-ins that cut a reply */
    cz_preload_stats preload;
    sv_hist ttft, itl, e2e, ttfp;
} sv_prom;

/* ---- streams: the channel from the runtime thread to an HTTP thread ---- */

typedef struct sv_chan {
    int32_t *ring;        /* ids appended and not yet sent (capacity: the server's bound) */
    uint32_t head, len;
    uint32_t produced;    /* ids appended so far */
    bool finished;
    cz_oai_finish finish;
    bool failed;          /* refused after it started */
    int64_t stop_token;   /* the stop token id that ended it (vLLM's stop_reason), or -1 */
    char *stop_str;       /* the stop string that ended it (owned), or NULL */
    int64_t text_cut;     /* bytes of text the reply keeps, or -1 (set as it finishes) */
    /* with stop strings, the text goes out through `pend`, its last `hold` characters held
     * back until the reply ends (vLLM's stop_buffer_length) */
    bool via_pend;
    uint32_t hold;
    cz_oai_buf pend;
    size_t pend_sent;
    int64_t pend_base;    /* the reply's text offset of pend.p[0] */
    int64_t prompt_tokens, cached_tokens;
    /* the HTTP thread's */
    cz_detok detok;
    cz_oai_buf text;      /* a whole (non-streamed) response's text */
    uint32_t sent;
    bool final_sent;
    /* return_token_ids: the prompt's ids, and a whole response's output ids */
    int32_t *prompt_ids;
    uint32_t n_prompt_ids;
    bool prompt_ids_sent;
    int32_t *out_ids;
    size_t n_out_ids, cap_out_ids;
} sv_chan;

typedef struct cz_serve sv;

/* One HTTP request's response: its HTTP thread and the runtime thread share it. */
typedef struct sv_resp {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;             /* the HTTP response, and each of its requests the runtime runs */
    sv *V;
    cz_oai_meta meta;
    char model[160];
    bool stream;
    bool token_ids;       /* return_token_ids */
    uint32_t n;
    sv_chan *ch;
    bool http_gone;       /* the client went away, or libmicrohttpd is done with it */
    bool role_sent, usage_sent, done_sent, body_made;
    cz_oai_buf out;
    size_t out_off;
    int fd;
    char *dec;            /* decode scratch */
} sv_resp;

/* One prompt of a response, as the runtime thread runs it. */
typedef struct sv_req {
    struct sv_req *next;  /* the inbox */
    sv_resp *resp;
    uint32_t idx;
    int32_t *prompt;
    uint32_t n_prompt;
    uint32_t max_tokens;
    char *session;        /* its session's key, or NULL */
    int32_t *stop_ids;
    size_t n_stop_ids;
    uint32_t min_tokens;  /* before these many, EOS and stop ids do not end the reply */
    bool ignore_eos;
    uint32_t si;          /* its session in the live workload */
    uint32_t emitted;
    /* the engine's execution: the ids sampled so far, and the stop that ended them */
    int32_t *out;
    uint32_t n_out, cap_out;
    bool stopped;
    int64_t stop_token;   /* the stop id, or -1 for the EOS */
    uint32_t heard;       /* a barge-in's heard tokens, or NONE */
    /* the request's sampling, where it set it (the engine's execution applies it) */
    float temperature, top_p;
    uint32_t top_k;
    bool has_temperature, has_top_p, has_top_k, has_seed;
    uint64_t seed;
    /* stop strings: the reply's text as the runtime decodes it, searched after each id */
    char *stops[CZ_OAI_MAX_STOP];
    size_t n_stops;
    cz_detok detok;
    char *text;
    size_t text_len, text_cap;
    int stop_str;         /* the stop string that ended the reply, or -1 */
    int64_t text_cut;     /* bytes of text the reply keeps (before its stop string), or -1 */
    double arrival_s, last_s;
} sv_req;

/* A session the runtime keeps: its latest request's workload session and its context,
 * and what its client reported (the interaction plane). */
typedef struct sv_sess {
    uint32_t si;          /* NONE before its first request */
    bool open;            /* its latest request has not ended */
    int32_t *ctx;         /* the prompt and reply of its latest request */
    uint32_t len, cap;
    uint32_t base;        /* the prompt's length in ctx: the reply follows */
    double idle_since;
    double speech_end_s;  /* the user's end of speech not yet followed by a request, or NaN */
    double ready_s;       /* the latest request's start: its speech end, else its arrival */
    bool first_audio;     /* the latest reply's first audio was reported */
    double played_s, received_s; /* the latest reply's playback, as last reported */
} sv_sess;

/* An event for a session: the HTTP thread waits until the runtime has applied it. */
typedef struct sv_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;             /* the HTTP thread and the inbox */
    bool done, refused;   /* applied; or not, the server stopping */
    char session[CZ_OAI_MAX_SESSION_ID];
    cz_oai_event ev;
    cz_oai_event_result res;
} sv_event;

typedef struct sv_msg {
    struct sv_msg *next;
    sv_req *req;          /* a submission */
    sv_resp *cancel;      /* or a response whose client went away (a reference held) */
    sv_event *event;      /* or a session's event (a reference held) */
} sv_msg;

struct cz_serve {
    const cz_config *cfg;
    cz_serve_opts o;
    cz_tokenizer *tok;
    cz_chat_template chat;
    char model_name[160];
    char model_root[512];
    uint32_t vocab;       /* ids the tokenizer and the model share */
    uint32_t in_vocab;    /* ids a prompt may hold: the model's vocabulary */
    uint32_t id_lo, id_hi; /* the modelled ids' range: the vocabulary, or printable ASCII for
                              the byte-level fallback */
    int32_t eos;
    uint32_t max_ctx;     /* prompt + output tokens a request may take */
    uint32_t max_pending;
    struct timespec t0;
    int64_t created;
    atomic_uint_fast64_t ids; /* response ids drawn */
    /* the inbox */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sv_msg *in_head, *in_tail;
    bool stopping;        /* no new requests; the runtime ends what is open */
    bool runtime_done;
    /* the runtime thread's */
    pthread_t rt;
    bool rt_started;
    cz_metrics *m;
    cz_workload wl;
    cz_sim *sim;          /* modelled execution */
    cz_sim_state how;
    double lead_s;        /* how early it wakes for the model's next time (wait_model_time) */
    cz_serve_clock clock; /* how late it came to the model's times */
    cz_engine *eng;       /* engine execution */
    cz_engine_state ehow;
    sv_map by_si, sessions;
    sv_req **cancels;
    size_t n_cancels, cap_cancels;
    sv_req **held;        /* requests waiting for their session to settle (a barge-in's cut) */
    char *rt_dec;         /* the runtime thread's decode scratch (stop strings) */
    size_t n_held, cap_held;
    sv_prom rp;           /* the runtime's figures */
    /* published */
    pthread_mutex_t prom_mu;
    sv_prom prom;
    /* the report */
    atomic_uint_fast64_t http_requests, errors_4xx;
    /* HTTP */
    struct MHD_Daemon *d;
    atomic_int open_resps;
};

/* ---- references ---- */

static void resp_unref_locked(sv_resp *r, bool *freed)
{
    *freed = --r->refs == 0;
}

static void resp_free(sv_resp *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        free(r->ch[i].ring);
        free(r->ch[i].prompt_ids);
        free(r->ch[i].out_ids);
        free(r->ch[i].stop_str);
        cz_oai_buf_free(&r->ch[i].pend);
        cz_oai_buf_free(&r->ch[i].text);
    }
    free(r->ch);
    cz_oai_buf_free(&r->out);
    free(r->dec);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    atomic_fetch_sub(&r->V->open_resps, 1);
    free(r);
}

static void resp_unref(sv_resp *r)
{
    bool freed;
    pthread_mutex_lock(&r->mu);
    resp_unref_locked(r, &freed);
    pthread_mutex_unlock(&r->mu);
    if (freed)
        resp_free(r);
}

static void req_free(sv_req *q)
{
    for (size_t i = 0; i < q->n_stops; i++)
        free(q->stops[i]);
    free(q->text);
    free(q->out);
    free(q->prompt);
    free(q->session);
    free(q->stop_ids);
    free(q);
}

static void event_unref(sv_event *x)
{
    pthread_mutex_lock(&x->mu);
    bool last = --x->refs == 0;
    pthread_mutex_unlock(&x->mu);
    if (last) {
        pthread_cond_destroy(&x->cv);
        pthread_mutex_destroy(&x->mu);
        free(x);
    }
}

/* The event's outcome reaches its HTTP thread: applied, or refused (the server stops). */
static void event_finish(sv_event *x, bool refused)
{
    pthread_mutex_lock(&x->mu);
    x->done = true;
    x->refused = refused;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    event_unref(x);
}

/* ---- the inbox ---- */

static void post(sv *V, sv_msg *msg)
{
    pthread_mutex_lock(&V->mu);
    if (V->in_tail)
        V->in_tail->next = msg;
    else
        V->in_head = msg;
    V->in_tail = msg;
    pthread_cond_signal(&V->cv);
    pthread_mutex_unlock(&V->mu);
    if (V->eng)
        cz_engine_kick(V->eng); /* the runtime thread may wait on the engine */
}

/* The client of `r` went away: the runtime aborts what it still runs (once). */
static void post_cancel(sv_resp *r)
{
    sv_msg *msg = cz_xcalloc(1, sizeof *msg);
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
    msg->cancel = r;
    post(r->V, msg);
}

/* ---- the runtime thread ---- */

static double now_s(const sv *V)
{
    return V->eng ? cz_engine_clock(V->eng) : cz_wall_since_s(&V->t0);
}

static cz_deploy *dep(sv *V)
{
    return V->eng ? cz_engine_deploy(V->eng) : cz_sim_deploy(V->sim);
}

/* The id the modelled execution emits at `pos` of session si's reply: drawn from the seed,
 * never the EOS or one of the request's stop ids. */
static int32_t modelled_id(const sv *V, const sv_req *q, uint32_t pos)
{
    /* a request's own seed gives the same reply wherever it runs */
    uint64_t who = q->has_seed ? mix64(q->seed) : (uint64_t)q->si << 32;
    uint64_t h = mix64(V->cfg->seed * 0x9E3779B97F4A7C15ull ^ who ^ pos);
    uint32_t span = V->id_hi - V->id_lo;
    uint32_t id = V->id_lo + (uint32_t)(h % span);
    for (uint32_t tries = 0; tries <= span; tries++) {
        bool bad = (int32_t)id == V->eos;
        for (size_t k = 0; k < q->n_stop_ids && !bad; k++)
            bad = q->stop_ids[k] == (int32_t)id;
        if (!bad)
            break;
        id = V->id_lo + (id - V->id_lo + 1) % span;
    }
    return (int32_t)id;
}

/* The id at `pos` of request q's reply: sampled by the engine, or the modelled one. */
static int32_t out_id(const sv *V, const sv_req *q, uint32_t pos)
{
    if (V->eng) {
        CZ_ASSERT(pos < q->n_out);
        return q->out[pos];
    }
    return modelled_id(V, q, pos);
}

/* Decodes id, the reply's next (its n_out-th, 1-based), onto q's text and looks for a stop
 * string in what it added (vLLM's check_stop_strings: from len(stop) - 1 bytes before the
 * new text, the stop strings in their order), once more than min_tokens ids are out. True
 * when one matched: q->stop_str and q->text_cut say which and where the text ends. */
static bool stop_scan(sv *V, sv_req *q, int32_t id, uint32_t n_out)
{
    size_t n = cz_tokenizer_decode(V->tok, &q->detok, id, V->rt_dec,
                                   cz_tokenizer_decode_max(V->tok));
    if (q->text_len + n + 1 > q->text_cap) {
        size_t cap = q->text_cap;
        cz_grow((void **)&q->text, &cap, q->text_len + n + 1, 1);
        q->text_cap = cap;
    }
    memcpy(q->text + q->text_len, V->rt_dec, n);
    q->text_len += n;
    if (n == 0 || n_out <= q->min_tokens)
        return false;
    for (size_t k = 0; k < q->n_stops; k++) {
        size_t sl = strlen(q->stops[k]);
        size_t from = q->text_len > n + sl - 1 ? q->text_len - n - (sl - 1) : 0;
        const char *at = memmem(q->text + from, q->text_len - from, q->stops[k], sl);
        if (at) {
            q->stop_str = (int)k;
            q->text_cut = at - q->text;
            return true;
        }
    }
    return false;
}

/* The modelled execution knows a reply's ids in advance: the length at which a stop
 * string ends it (its turn's output), else max_tokens. */
static uint32_t modelled_stop(sv *V, sv_req *q)
{
    for (uint32_t pos = 0; pos < q->max_tokens; pos++)
        if (stop_scan(V, q, modelled_id(V, q, pos), pos + 1)) {
            q->stopped = true;
            return pos + 1;
        }
    return q->max_tokens;
}

/* Appends request q's ids up to `upto` to its stream, at `now`, with r->mu held. False
 * when the stream holds as many unsent ids as it may: the client fell too far behind. */
static bool emit_locked(sv *V, sv_req *q, uint32_t upto, double now)
{
    sv_resp *r = q->resp;
    sv_chan *c = &r->ch[q->idx];
    if (upto > q->max_tokens)
        upto = q->max_tokens;
    uint32_t n = 0;
    while (q->emitted + n < upto && c->len < V->max_pending) {
        c->ring[(c->head + c->len) % V->max_pending] = out_id(V, q, q->emitted + n);
        c->len++;
        c->produced++;
        n++;
    }
    if (n == 0)
        return q->emitted >= upto;
    pthread_cond_signal(&r->cv);
    if (q->emitted == 0)
        hist_add(&V->rp.ttft, ttft_le, CZ_ARRAY_LEN(ttft_le), now - q->arrival_s);
    else
        hist_add(&V->rp.itl, itl_le, CZ_ARRAY_LEN(itl_le), now - q->last_s);
    for (uint32_t k = 1; k < n; k++)
        hist_add(&V->rp.itl, itl_le, CZ_ARRAY_LEN(itl_le), 0.0);
    V->rp.generation_tokens += n;
    q->emitted += n;
    q->last_s = now;
    return q->emitted >= upto;
}

static bool emit(sv *V, sv_req *q, uint32_t upto, double now)
{
    pthread_mutex_lock(&q->resp->mu);
    bool ok = emit_locked(V, q, upto, now);
    pthread_mutex_unlock(&q->resp->mu);
    return ok;
}

/* The runtime will cancel q when the event it is in has been handled. */
static void defer_cancel(sv *V, sv_req *q)
{
    for (size_t i = 0; i < V->n_cancels; i++)
        if (V->cancels[i] == q)
            return;
    cz_grow((void **)&V->cancels, &V->cap_cancels, V->n_cancels + 1, sizeof *V->cancels);
    V->cancels[V->n_cancels++] = q;
}

static void on_step_ended(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs,
                          uint32_t n, double now)
{
    sv *V = ctx;
    (void)rep;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *s = cz_server_seq(srv, seqs[i]);
        if (s->state == CZ_SEQ_CLOSED || s->session >= UINT32_MAX)
            continue;
        sv_req *q = map_get(&V->by_si, s->session, NULL);
        if (!q || !s->turn_open)
            continue;
        if (!emit(V, q, s->generated - s->turn_generated_base, now)) {
            V->rp.dropped++;
            defer_cancel(V, q);
        }
    }
}

/* Session q->session keeps the context of q: its prompt and the first `reply` tokens of
 * its reply (NONE: nothing follows from it). */
static void session_note(sv *V, sv_req *q, double now, uint32_t reply)
{
    if (!q->session)
        return;
    sv_sess *s = map_get(&V->sessions, str_hash(q->session), q->session);
    if (!s || s->si != q->si)
        return;
    s->open = false;
    s->idle_since = now;
    s->base = q->n_prompt;
    if (reply == NONE) {
        s->len = 0; /* nothing follows from a cut context */
        return;
    }
    uint32_t len = q->n_prompt + reply;
    if (len > s->cap) {
        s->cap = len;
        s->ctx = cz_xrealloc(s->ctx, s->cap, sizeof *s->ctx);
    }
    memcpy(s->ctx, q->prompt, q->n_prompt * sizeof *s->ctx);
    for (uint32_t pos = 0; pos < reply; pos++)
        s->ctx[q->n_prompt + pos] = out_id(V, q, pos);
    s->len = len;
}

static void on_turn_end(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                        uint32_t out_tokens, double now)
{
    sv *V = ctx;
    (void)turn;
    sv_req *q = map_get(&V->by_si, session, NULL);
    if (!q)
        return;
    map_del(&V->by_si, session, NULL);
    cz_oai_finish fin = CZ_OAI_FINISH_ABORT;
    bool failed = false;
    sv_resp *r = q->resp;
    sv_chan *c = &r->ch[q->idx];
    bool freed;
    /* the last ids and the finish together: a client sees the finish on the last token's
     * chunk, as vLLM sends it */
    pthread_mutex_lock(&r->mu);
    if (outcome == CZ_REQ_COMPLETED) {
        if (!emit_locked(V, q, out_tokens, now)) {
            V->rp.dropped++; /* the stream is full: it ends aborted */
        } else if (q->stopped) {
            fin = CZ_OAI_FINISH_STOP;
            c->stop_token = q->stop_token;
            if (q->stop_str >= 0) {
                c->stop_str = cz_xstrdup(q->stops[q->stop_str]);
                c->text_cut = q->text_cut;
            }
        } else {
            fin = CZ_OAI_FINISH_LENGTH;
        }
    } else if (outcome == CZ_REQ_REJECTED || outcome == CZ_REQ_FAILED) {
        failed = true;
    }
    c->finished = true;
    c->finish = fin;
    c->failed = failed;
    pthread_cond_signal(&r->cv);
    resp_unref_locked(r, &freed);
    pthread_mutex_unlock(&r->mu);
    V->rp.finished[fin]++;
    hist_add(&V->rp.e2e, e2e_le, CZ_ARRAY_LEN(e2e_le), now - q->arrival_s);
    /* what follows in the session: the whole reply, or what a barge-in kept of it */
    uint32_t keep = fin == CZ_OAI_FINISH_LENGTH ? q->emitted
                    : q->heard != NONE          ? (q->heard < q->emitted ? q->heard : q->emitted)
                                                : NONE;
    session_note(V, q, now, keep);
    if (freed)
        resp_free(r);
    /* a deferred cancel of this request has nothing left to do */
    for (size_t i = 0; i < V->n_cancels; i++)
        if (V->cancels[i] == q)
            V->cancels[i] = NULL;
    req_free(q);
}

/* ---- the engine's execution ---- */

/* The prompt id at `pos` of the request that session `session` runs. */
static int32_t on_input_id(void *ctx, uint64_t session, uint32_t pos)
{
    sv *V = ctx;
    sv_req *q = session < NONE ? map_get(&V->by_si, (uint32_t)session, NULL) : NULL;
    CZ_ASSERT(q && pos < q->n_prompt); /* only an open request's prompt is computed */
    return q->prompt[pos];
}

/* The sampling of the id the engine samples at `pos` for the request `session` runs: the
 * request's own temperature, top_k, top_p and seed where it set them. */
static void on_sampling(void *ctx, uint64_t session, uint32_t pos, cz_row_sampling *out,
                        bool *seeded)
{
    sv *V = ctx;
    (void)pos;
    sv_req *q = session < NONE ? map_get(&V->by_si, (uint32_t)session, NULL) : NULL;
    if (!q)
        return;
    if (q->has_temperature)
        out->temperature = q->temperature;
    if (q->has_top_p)
        out->top_p = q->top_p;
    if (q->has_top_k)
        out->top_k = q->top_k;
    if (q->has_seed) {
        out->seed = mix64(q->seed);
        *seeded = true;
    }
}

/* The ids a step sampled: each extends its request's reply and its stream; an EOS (unless
 * ignore_eos) or one of the request's stop ids, once min_tokens are out, is the reply's
 * last (vLLM's order of checks: the stop before the length). */
static void on_sampled(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs,
                       const int32_t *ids, uint32_t n, double now)
{
    sv *V = ctx;
    (void)rep;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *s = cz_server_seq(srv, seqs[i]);
        if (s->session >= NONE || !s->turn_open)
            continue;
        sv_req *q = map_get(&V->by_si, (uint32_t)s->session, NULL);
        if (!q || q->stopped || q->n_out >= q->max_tokens)
            continue;
        if (q->n_out == q->cap_out) {
            size_t cap = q->cap_out;
            cz_grow((void **)&q->out, &cap, (size_t)q->n_out + 1, sizeof *q->out);
            q->cap_out = (uint32_t)cap;
        }
        int32_t id = ids[i];
        q->out[q->n_out++] = id;
        if (q->n_out >= q->min_tokens) {
            bool eos = !q->ignore_eos && V->eos >= 0 && id == V->eos;
            bool stop = false;
            for (size_t k = 0; k < q->n_stop_ids && !eos && !stop; k++)
                stop = q->stop_ids[k] == id;
            if (eos || stop) {
                q->stopped = true;
                q->stop_token = stop ? id : -1;
                cz_server_end_output(srv, seqs[i]);
            }
        }
        /* a stop string (the text is decoded whatever min_tokens says) */
        if (!q->stopped && q->n_stops && stop_scan(V, q, id, q->n_out)) {
            q->stopped = true;
            cz_server_end_output(srv, seqs[i]);
        }
        /* the last id goes out with the finish, when the turn ends at this step's end (as
         * vLLM sends the finish on the last token's chunk) */
        if (!q->stopped && q->n_out < q->max_tokens && !emit(V, q, q->n_out, now)) {
            V->rp.dropped++;
            defer_cancel(V, q);
        }
    }
}

/* The session named `key`, created idle when the runtime does not know it. */
static sv_sess *session_get(sv *V, const char *key, double now)
{
    sv_sess *s = map_get(&V->sessions, str_hash(key), key);
    if (!s) {
        s = cz_xcalloc(1, sizeof *s);
        s->si = NONE;
        s->idle_since = now;
        s->speech_end_s = s->ready_s = NAN;
        map_put(&V->sessions, str_hash(key), key, s);
    }
    return s;
}

/* Submits request q at `now`: a session of its own in the live workload, following its
 * session's last request when its prompt extends that context. A session still settling
 * (a barge-in's cut waits for the batch in flight) holds q until it has settled. */
static void submit(sv *V, sv_req *q, double now)
{
    cz_deploy *d = dep(V);
    uint32_t follows = NONE, keep = 0;
    sv_sess *s = NULL;
    if (isnan(q->arrival_s))
        q->arrival_s = now;
    if (q->session) {
        s = session_get(V, q->session, now);
        if (s->si != NONE && !s->open && s->len > 0) {
            /* the prefix this prompt shares with the session's context; at least one
             * prompt token is computed, as vLLM computes the last one */
            uint32_t lcp = 0, most = q->n_prompt - 1;
            while (lcp < s->len && lcp < most && s->ctx[lcp] == q->prompt[lcp])
                lcp++;
            uint32_t held = cz_deploy_kv_tokens(d, s->si);
            bool can = lcp > 0 && cz_deploy_can_follow(d, s->si, lcp);
            if (lcp > 0 && !can && cz_deploy_settling(d, s->si)) {
                /* it may follow once the session has settled: held until then */
                cz_grow((void **)&V->held, &V->cap_held, V->n_held + 1, sizeof *V->held);
                V->held[V->n_held++] = q;
                return;
            }
            if (can) {
                follows = s->si;
                keep = lcp;
                q->resp->ch[q->idx].cached_tokens = lcp < held ? lcp : held;
            }
        }
        if (follows == NONE && s->si != NONE)
            cz_deploy_release(d, s->si, now);
    }
    cz_workload one;
    cz_workload_init(&one);
    char name[32];
    snprintf(name, sizeof name, "req-%llu", (unsigned long long)V->wl.n_sessions);
    cz_workload_begin_session(&one, name, CZ_CLASS_RT, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(&one);
    t->arrival_s = now;
    t->in_text_tokens = q->n_prompt - keep;
    t->out_text_tokens = q->max_tokens;
    q->last_s = now;
    /* the map before the submission: a turn refused at once ends inside it */
    uint32_t si = V->wl.n_sessions;
    q->si = si;
    if (!V->eng && q->n_stops) {
        t->out_text_tokens = modelled_stop(V, q); /* the ids depend on si */
        if (q->stop_str >= 0) {
            /* the stream cuts its text there from the start: the id that completes the
             * stop string goes out as it is generated, before the finish */
            pthread_mutex_lock(&q->resp->mu);
            q->resp->ch[q->idx].text_cut = q->text_cut;
            pthread_mutex_unlock(&q->resp->mu);
        }
    }
    map_put(&V->by_si, si, NULL, q);
    if (s) {
        s->si = si;
        s->open = true;
        /* the reply's audio TTFP counts from the user's end of speech when it was reported */
        s->ready_s = isnan(s->speech_end_s) ? now : s->speech_end_s;
        s->speech_end_s = NAN;
        s->first_audio = false;
        s->played_s = s->received_s = 0.0;
    }
    V->rp.prompt_tokens += q->n_prompt;
    V->rp.cached_tokens += (uint64_t)q->resp->ch[q->idx].cached_tokens;
    bool took = false;
    uint32_t got = cz_deploy_submit(d, &one, follows, follows == NONE ? UINT32_MAX : keep,
                                    q->session != NULL, now, &took);
    CZ_ASSERT(got == si && took == (follows != NONE));
    cz_workload_free(&one);
}

/* Request q never reached the runtime: its stream ends aborted, with no outcome to count. */
static void never_ran(sv_req *q)
{
    sv_resp *r = q->resp;
    bool freed;
    pthread_mutex_lock(&r->mu);
    r->ch[q->idx].finished = true;
    r->ch[q->idx].finish = CZ_OAI_FINISH_ABORT;
    pthread_cond_signal(&r->cv);
    resp_unref_locked(r, &freed);
    pthread_mutex_unlock(&r->mu);
    if (freed)
        resp_free(r);
    req_free(q);
}

/* Submits the held requests whose sessions have settled (in the order they came); those
 * whose client went away, or all of them when the server stops, end aborted without
 * reaching the runtime. */
static void retry_held(sv *V, double now, bool stopping)
{
    if (V->n_held == 0)
        return;
    size_t n = V->n_held;
    sv_req **list = cz_xmalloc(n * sizeof *list);
    memcpy(list, V->held, n * sizeof *list);
    V->n_held = 0;
    for (size_t i = 0; i < n; i++) {
        sv_resp *r = list[i]->resp;
        pthread_mutex_lock(&r->mu);
        bool gone = r->http_gone || stopping;
        pthread_mutex_unlock(&r->mu);
        if (gone)
            never_ran(list[i]);
        else
            submit(V, list[i], now); /* held again while its session settles */
    }
    free(list);
}

/* Cancels every request of response r the runtime still runs. */
static void cancel_resp(sv *V, sv_resp *r, double now)
{
    cz_deploy *d = dep(V);
    /* the requests of r still open: the map names them by session */
    uint32_t *open = cz_xmalloc((r->n ? r->n : 1) * sizeof *open);
    uint32_t n = 0;
    for (size_t i = 0; i < V->by_si.cap; i++)
        for (sv_node *x = V->by_si.b[i]; x; x = x->next)
            if (((sv_req *)x->val)->resp == r)
                open[n++] = ((sv_req *)x->val)->si;
    for (uint32_t k = 0; k < n; k++) {
        V->rp.client_aborts++;
        cz_deploy_cancel(d, open[k], now);
    }
    free(open);
}

static void run_cancels(sv *V, double now)
{
    cz_deploy *d = dep(V);
    for (size_t i = 0; i < V->n_cancels; i++)
        if (V->cancels[i])
            cz_deploy_cancel(d, V->cancels[i]->si, now); /* ends it: on_turn_end */
    V->n_cancels = 0;
}

/* Publishes the runtime's figures for /metrics. */
static void publish(sv *V)
{
    const cz_config *cfg = V->cfg;
    cz_deploy *d = dep(V);
    uint64_t run = 0, wait = 0, used = 0, blocks = 0, host = 0;
    memset(&V->rp.preload, 0, sizeof V->rp.preload);
    for (uint32_t ri = 0; ri < cz_deploy_replicas(d); ri++) {
        cz_deploy_replica r = cz_deploy_replica_at(d, ri);
        if (!r.srv)
            continue;
        cz_preload_stats pl;
        cz_server_preload_stats(r.srv, &pl);
        V->rp.preload.started += pl.started;
        V->rp.preload.hits += pl.hits;
        V->rp.preload.late += pl.late;
        V->rp.preload.skips += pl.skips;
        V->rp.preload.cancels += pl.cancels;
        V->rp.preload.fallbacks += pl.fallbacks;
        run += cz_server_running(r.srv);
        wait += cz_server_waiting(r.srv);
        used += cz_server_kv_used(r.srv);
        blocks += cfg->place[r.p].server.kv_blocks;
        host += cz_server_host_tokens(r.srv);
    }
    V->rp.running = run;
    V->rp.waiting = wait;
    V->rp.kv_usage = blocks ? (double)used / (double)blocks : 0.0;
    V->rp.host_tokens = host;
    V->rp.preemptions = V->m->preemptions;
    pthread_mutex_lock(&V->prom_mu);
    V->prom = V->rp;
    pthread_mutex_unlock(&V->prom_mu);
}

/* Releases sessions idle past the option's time. O(sessions), a few times a second. */
static void expire_sessions(sv *V, double now)
{
    cz_deploy *d = dep(V);
    for (size_t i = 0; i < V->sessions.cap; i++) {
        sv_node **p = &V->sessions.b[i];
        while (*p) {
            sv_sess *s = (*p)->val;
            if (!s->open && now - s->idle_since > V->o.session_idle_s) {
                if (s->si != NONE)
                    cz_deploy_release(d, s->si, now);
                sv_node *x = *p;
                *p = x->next;
                free(x->skey);
                free(x);
                V->sessions.n--;
                free(s->ctx);
                free(s);
            } else {
                p = &(*p)->next;
            }
        }
    }
}

/* Applies a client's event for its session at `now`: the interaction plane (LiveServe
 * section 3; docs/serve.md says what each event does). */
static void apply_event(sv *V, sv_event *x, double now)
{
    cz_deploy *d = dep(V);
    sv_sess *s = session_get(V, x->session, now);
    const cz_oai_event *ev = &x->ev;
    cz_oai_event_result *res = &x->res;
    memset(res, 0, sizeof *res);
    res->type = ev->type;
    V->rp.events[ev->type]++;
    sv_req *q = s->open && s->si != NONE ? map_get(&V->by_si, s->si, NULL) : NULL;
    /* a session whose context a next request may follow: its turn ended, its reply kept */
    bool idle = s->si != NONE && !s->open && s->len > 0;
    switch (ev->type) {
    case CZ_OAI_EV_SPEECH_START:
        if (idle) {
            res->preload = (int)cz_deploy_speech_start(d, s->si, now);
            res->applied = true;
        }
        break;
    case CZ_OAI_EV_SPEECH_END:
        s->speech_end_s = now;
        res->applied = true;
        break;
    case CZ_OAI_EV_PLAYBACK:
        if (s->si == NONE)
            break;
        cz_deploy_playback(d, s->si, ev->played_s, ev->received_s,
                           ev->received_s > s->received_s ? ev->received_s - s->received_s : 0.0,
                           now);
        if (!s->first_audio && ev->received_s > 0 && !isnan(s->ready_s)) {
            hist_add(&V->rp.ttfp, ttft_le, CZ_ARRAY_LEN(ttft_le), now - s->ready_s);
            s->first_audio = true;
        }
        s->played_s = ev->played_s;
        s->received_s = ev->received_s;
        res->applied = true;
        break;
    case CZ_OAI_EV_BARGE_IN: {
        /* the reply's tokens the user heard: as the client says, else the share of the
         * audio it received that it played, else all it was sent */
        uint32_t reply = q ? q->emitted : idle && s->len > s->base ? s->len - s->base : 0;
        double played = ev->has_played ? ev->played_s : s->played_s;
        uint64_t heard = reply;
        if (ev->heard_tokens >= 0)
            heard = (uint64_t)ev->heard_tokens;
        else if (s->received_s > 0)
            heard = (uint64_t)floor(reply * fmin(1.0, played / s->received_s) + 1e-9);
        if (heard > reply)
            heard = reply;
        res->heard_tokens = (int64_t)heard;
        if (q) {
            q->heard = (uint32_t)heard;
            /* the turn ends aborted inside (on_turn_end keeps the heard context) */
            res->applied = cz_deploy_barge_in(d, q->si, (uint32_t)heard, now);
        } else if (idle && heard < reply) {
            s->len = s->base + (uint32_t)heard; /* a reply still playing: cut back */
            res->applied = true;
        }
        if (res->applied)
            V->rp.barge_ins++;
        res->context_tokens = s->len;
        /* the user goes on speaking: the next turn's speech started (LiveServe section 5.2
         * preloads on a barge-in too) */
        if (s->si != NONE && !s->open && s->len > 0)
            (void)cz_deploy_speech_start(d, s->si, now);
        break;
    }
    }
}

/* `stopping`: the server stops; nothing new reaches the runtime. */
static void handle_msg(sv *V, sv_msg *msg, double now, bool stopping)
{
    if (msg->event) {
        if (!stopping)
            apply_event(V, msg->event, now);
        event_finish(msg->event, stopping);
    } else if (msg->req) {
        sv_req *q = msg->req;
        sv_resp *r = q->resp;
        pthread_mutex_lock(&r->mu);
        bool gone = r->http_gone || stopping;
        pthread_mutex_unlock(&r->mu);
        if (gone) {
            never_ran(q);
        } else {
            submit(V, q, now);
        }
    } else {
        cancel_resp(V, msg->cancel, now);
        resp_unref(msg->cancel);
    }
    free(msg);
}

/* Cancels every open request (the server stops). */
static void cancel_all(sv *V, double now)
{
    cz_deploy *d = dep(V);
    uint32_t *open = cz_xmalloc((V->by_si.n ? V->by_si.n : 1) * sizeof *open);
    uint32_t n = 0;
    for (size_t i = 0; i < V->by_si.cap; i++)
        for (sv_node *x = V->by_si.b[i]; x; x = x->next)
            open[n++] = ((sv_req *)x->val)->si;
    for (uint32_t k = 0; k < n; k++)
        cz_deploy_cancel(d, open[k], now);
    free(open);
}

/* Takes the inbox's messages and hands them to the runtime at `t`; whether the server
 * stops. */
static bool take_inbox(sv *V, double t)
{
    pthread_mutex_lock(&V->mu);
    sv_msg *msgs = V->in_head;
    V->in_head = V->in_tail = NULL;
    bool stopping = V->stopping;
    pthread_mutex_unlock(&V->mu);
    retry_held(V, t, stopping);
    while (msgs) {
        sv_msg *nx = msgs->next;
        handle_msg(V, msgs, t, stopping);
        msgs = nx;
    }
    run_cancels(V, t);
    return stopping;
}

/* The engine's execution: the engine's completions and timers as they come, requests
 * between them. */
static void runtime_engine(sv *V)
{
    cz_engine *E = V->eng;
    double last_tick = -1.0;
    for (;;) {
        cz_engine_state how = cz_engine_advance(E);
        if (how == CZ_ENGINE_RAN) {
            run_cancels(V, now_s(V));
            continue;
        }
        if (how != CZ_ENGINE_IDLE && how != CZ_ENGINE_DRAINED) {
            V->ehow = how; /* a device failed, the watchdog, or sim.max_time_s */
            return;
        }
        double t = now_s(V);
        if (take_inbox(V, t)) {
            cancel_all(V, t);
            /* the steps in flight end; what the cancels left (stores) happens; 10 s at most */
            double deadline = now_s(V) + 10.0;
            for (;;) {
                how = cz_engine_advance(E);
                if (how == CZ_ENGINE_RAN) {
                    run_cancels(V, now_s(V));
                    continue;
                }
                if (how != CZ_ENGINE_IDLE || now_s(V) >= deadline)
                    break;
                cz_engine_wait(E, now_s(V) + 0.05);
            }
            V->ehow = how == CZ_ENGINE_IDLE ? CZ_ENGINE_CUT : how;
            publish(V);
            return;
        }
        if (t - last_tick >= SV_TICK_S) {
            expire_sessions(V, t);
            publish(V);
            last_tick = t;
        }
        pthread_mutex_lock(&V->mu);
        bool more = V->in_head || V->stopping;
        pthread_mutex_unlock(&V->mu);
        if (!more)
            cz_engine_wait(E, now_s(V) + SV_TICK_S); /* a post kicks it */
    }
}

/* With V->mu held: waits until `until` (seconds on the run's clock), a message in the
 * inbox, or the stop. The modelled runtime keeps the model's times to microseconds: a
 * timed wait alone wakes late by the timer's slack and by the core's way out of idle, 0.1
 * to 0.5 ms on a virtual machine and the more the longer it slept, so a long prefill's end
 * went out later than a decode step's and a client measured long prompts as costing more
 * per token than the model made them. So it sleeps until lead_s before the time, then
 * yields the core until the time comes; lead_s follows 1.5 times how late its timed waits
 * wake (a running mean over about ten), within [20 us, 2 ms]. */
static void wait_model_time(sv *V, double until)
{
    double wake = until - V->lead_s;
    if (!V->in_head && !V->stopping && wake > now_s(V)) {
        cz_wall_wait_until(&V->cv, &V->mu, &V->t0, wake);
        double late = now_s(V) - wake;
        if (late >= 0 && late < 0.01) /* timed out (not signalled, not stalled) */
            V->lead_s = fmin(2e-3, fmax(20e-6, 0.9 * V->lead_s + 0.15 * late));
    }
    while (!V->in_head && !V->stopping && now_s(V) < until) {
        pthread_mutex_unlock(&V->mu);
        sched_yield();
        pthread_mutex_lock(&V->mu);
    }
}

static void *runtime_main(void *arg)
{
    sv *V = arg;
    if (V->eng) {
        runtime_engine(V);
        pthread_mutex_lock(&V->mu);
        V->runtime_done = true;
        pthread_mutex_unlock(&V->mu);
        return NULL;
    }
    /* its timed waits end within a microsecond of their time, not the default 50 (Linux;
     * where refused, wait_model_time's lead takes the slack in) */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    V->lead_s = 200e-6;
    double last_tick = -1.0;
    for (;;) {
        double now = now_s(V);
        double due = V->how == CZ_SIM_RAN ? cz_sim_next_s(V->sim) : INFINITY;
        if (due <= now) {
            double late = now - due;
            V->clock.times++;
            V->clock.late_sum_s += late;
            V->clock.late_max_s = fmax(V->clock.late_max_s, late);
            V->clock.over_1ms += late > 1e-3;
        }
        /* what is due by now, at the times the model gives */
        while (V->how == CZ_SIM_RAN && cz_sim_next_s(V->sim) <= now) {
            V->how = cz_sim_advance(V->sim);
            run_cancels(V, cz_sim_now(V->sim));
        }
        if (V->how != CZ_SIM_RAN && V->how != CZ_SIM_DRAINED)
            break; /* the watchdog, or a clock past its limit: the run ends with its report */
        V->how = CZ_SIM_RAN;
        double t = fmax(now, cz_sim_now(V->sim));
        if (take_inbox(V, t)) {
            cancel_all(V, t);
            /* what the cancels left to happen (stores, loads) happens now */
            while ((V->how = cz_sim_advance(V->sim)) == CZ_SIM_RAN)
                run_cancels(V, cz_sim_now(V->sim));
            publish(V);
            break;
        }
        if (t - last_tick >= SV_TICK_S) {
            expire_sessions(V, t);
            publish(V);
            last_tick = t;
        }
        double next = cz_sim_next_s(V->sim);
        pthread_mutex_lock(&V->mu);
        if (next <= now_s(V) + SV_TICK_S)
            wait_model_time(V, next);
        else if (!V->in_head && !V->stopping)
            cz_wall_wait_until(&V->cv, &V->mu, &V->t0, now_s(V) + SV_TICK_S);
        pthread_mutex_unlock(&V->mu);
    }
    pthread_mutex_lock(&V->mu);
    V->runtime_done = true;
    pthread_mutex_unlock(&V->mu);
    return NULL;
}

/* ---- the HTTP side: formatting a stream ---- */

static cz_oai_usage usage_of(const sv_resp *r)
{
    cz_oai_usage u = {0, 0, 0};
    for (uint32_t i = 0; i < r->n; i++) {
        u.prompt_tokens += r->ch[i].prompt_tokens;
        u.completion_tokens += r->ch[i].produced;
        u.cached_tokens += r->ch[i].cached_tokens;
    }
    return u;
}

/* A reply with stop strings: appends the `n` decoded bytes at `add` to the channel's
 * pending text and returns the part that may go out now (at *out, valid until the next
 * call): all of it when `final`, else all but the last `hold` characters, which could
 * begin a stop string the next id completes; never past the stop string's cut. */
static size_t pend_take(sv_chan *c, const char *add, size_t n, bool final, const char **out)
{
    if (c->pend_sent >= 4096) { /* what went out is dropped */
        memmove(c->pend.p, c->pend.p + c->pend_sent, c->pend.n - c->pend_sent);
        c->pend.n -= c->pend_sent;
        c->pend_base += (int64_t)c->pend_sent;
        c->pend_sent = 0;
    }
    cz_oai_buf_reserve(&c->pend, n);
    memcpy(c->pend.p + c->pend.n, add, n);
    c->pend.n += n;
    c->pend.p[c->pend.n] = '\0';
    size_t end = c->pend.n;
    if (!final)
        for (uint32_t k = 0; k < c->hold && end > 0; k++)
            do
                end--;
            while (end > 0 && ((unsigned char)c->pend.p[end] & 0xC0) == 0x80);
    /* never past the cut, once known (a modelled reply's from its start: the id that
     * completes the stop string may go out before the reply's finish) */
    if (c->text_cut >= 0 && c->text_cut - c->pend_base < (int64_t)end)
        end = c->text_cut > c->pend_base ? (size_t)(c->text_cut - c->pend_base) : 0;
    if (end < c->pend_sent)
        end = c->pend_sent;
    *out = c->pend.p + c->pend_sent;
    size_t k = end - c->pend_sent;
    c->pend_sent = end;
    return k;
}

/* Turns what the runtime has appended into bytes of the response (r->mu held). Returns
 * whether it wrote anything. */
static bool produce(sv_resp *r)
{
    const sv *V = r->V;
    size_t before = r->out.n;
    bool all_final = true;
    for (uint32_t i = 0; i < r->n; i++) {
        sv_chan *c = &r->ch[i];
        /* the ids appended so far, each a chunk of its text (vLLM sends one a token) */
        while (c->len > 0) {
            int32_t id = c->ring[c->head];
            c->head = (c->head + 1) % V->max_pending;
            c->len--;
            size_t dmax = cz_tokenizer_decode_max(V->tok);
            size_t n = cz_tokenizer_decode(V->tok, &c->detok, id, r->dec, dmax);
            c->sent++;
            /* the last id carries the finish (and what the decoder still held) */
            bool last = c->len == 0 && c->finished && !c->failed;
            if (last) {
                n += cz_tokenizer_decode_flush(V->tok, &c->detok, r->dec + n, dmax);
                c->final_sent = true;
            }
            const char *txt = r->dec;
            if (c->via_pend)
                n = pend_take(c, r->dec, n, last, &txt);
            if (!r->stream) {
                cz_oai_buf_reserve(&c->text, n);
                memcpy(c->text.p + c->text.n, txt, n);
                c->text.n += n;
                c->text.p[c->text.n] = '\0';
                if (r->token_ids) {
                    cz_grow((void **)&c->out_ids, &c->cap_out_ids, c->n_out_ids + 1,
                            sizeof *c->out_ids);
                    c->out_ids[c->n_out_ids++] = id;
                }
                continue;
            }
            if (r->meta.endpoint == CZ_OAI_CHAT && !r->role_sent) {
                cz_oai_usage u = usage_of(r);
                cz_oai_chunk_role(&r->out, &r->meta, &u);
                r->role_sent = true;
            }
            cz_oai_choice ch = {.index = i, .text = txt, .text_len = n,
                                .finish = last ? c->finish : CZ_OAI_FINISH_NONE,
                                .stop_token = last ? c->stop_token : -1,
                                .stop_str = last ? c->stop_str : NULL};
            if (r->token_ids) {
                ch.token_ids = &id;
                ch.n_token_ids = 1;
                if (r->meta.endpoint != CZ_OAI_CHAT && !c->prompt_ids_sent) {
                    ch.prompt_ids = c->prompt_ids;
                    ch.n_prompt_ids = c->n_prompt_ids;
                    c->prompt_ids_sent = true;
                }
            }
            cz_oai_usage u = {c->prompt_tokens, c->sent, c->cached_tokens};
            cz_oai_chunk(&r->out, &r->meta, &ch, &u);
        }
        if (!c->finished) {
            all_final = false;
            continue;
        }
        if (c->final_sent)
            continue;
        /* the end of this choice: what the decoder still holds, and its finish reason */
        size_t n = cz_tokenizer_decode_flush(V->tok, &c->detok, r->dec,
                                             cz_tokenizer_decode_max(V->tok));
        c->final_sent = true;
        const char *txt = r->dec;
        if (c->via_pend)
            n = pend_take(c, r->dec, n, true, &txt);
        if (!r->stream) {
            cz_oai_buf_reserve(&c->text, n);
            memcpy(c->text.p + c->text.n, txt, n);
            c->text.n += n;
            c->text.p[c->text.n] = '\0';
            continue;
        }
        if (c->failed) {
            cz_oai_error e;
            cz_oai_error_set(&e, 400, "BadRequestError", NULL,
                             "the request cannot be served: its context outgrew the "
                             "server's KV cache");
            cz_oai_chunk_error(&r->out, &e);
            continue;
        }
        if (r->meta.endpoint == CZ_OAI_CHAT && !r->role_sent) {
            cz_oai_usage u = usage_of(r);
            cz_oai_chunk_role(&r->out, &r->meta, &u);
            r->role_sent = true;
        }
        cz_oai_choice ch = {.index = i, .text = txt, .text_len = n, .finish = c->finish,
                            .stop_token = c->stop_token, .stop_str = c->stop_str};
        if (r->token_ids) {
            ch.token_ids = c->prompt_ids; /* an empty delta: any non-NULL pointer */
            ch.n_token_ids = 0;
            if (r->meta.endpoint != CZ_OAI_CHAT && !c->prompt_ids_sent) {
                ch.prompt_ids = c->prompt_ids;
                ch.n_prompt_ids = c->n_prompt_ids;
                c->prompt_ids_sent = true;
            }
        }
        cz_oai_usage u = {c->prompt_tokens, c->sent, c->cached_tokens};
        cz_oai_chunk(&r->out, &r->meta, &ch, &u);
    }
    if (all_final && !r->done_sent) {
        if (r->stream) {
            if (r->meta.include_usage) {
                cz_oai_usage u = usage_of(r);
                cz_oai_chunk_usage(&r->out, &r->meta, &u);
            }
            cz_oai_done(&r->out);
        } else {
            cz_oai_choice *cs = cz_xcalloc(r->n, sizeof *cs);
            for (uint32_t i = 0; i < r->n; i++) {
                cs[i] = (cz_oai_choice){.index = i, .text = r->ch[i].text.p,
                                        .text_len = r->ch[i].text.n,
                                        .finish = r->ch[i].finish,
                                        .stop_token = r->ch[i].stop_token,
                                        .stop_str = r->ch[i].stop_str};
                if (r->token_ids) {
                    cs[i].token_ids = r->ch[i].out_ids ? r->ch[i].out_ids : r->ch[i].prompt_ids;
                    cs[i].n_token_ids = r->ch[i].n_out_ids;
                    cs[i].prompt_ids = r->ch[i].prompt_ids;
                    cs[i].n_prompt_ids = r->ch[i].n_prompt_ids;
                }
            }
            cz_oai_usage u = usage_of(r);
            cz_oai_response(&r->out, &r->meta, cs, r->n, &u);
            free(cs);
        }
        r->done_sent = true;
    }
    return r->out.n > before;
}

/* Whether the client of socket fd has closed its end. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    sv_resp *r = cls;
    (void)pos;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->out_off < r->out.n) {
            size_t n = r->out.n - r->out_off;
            if (n > max)
                n = max;
            memcpy(buf, r->out.p + r->out_off, n);
            r->out_off += n;
            if (r->out_off == r->out.n) {
                cz_oai_buf_clear(&r->out);
                r->out_off = 0;
            }
            pthread_mutex_unlock(&r->mu);
            return (ssize_t)n;
        }
        if (produce(r))
            continue;
        if (r->done_sent) {
            pthread_mutex_unlock(&r->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)(SV_POLL_S * 1e9);
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT && client_gone(r->fd)) {
            r->http_gone = true;
            pthread_mutex_unlock(&r->mu);
            post_cancel(r);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

/* libmicrohttpd is done with the response: the client took it all, or went away. */
static void reader_done(void *cls)
{
    sv_resp *r = cls;
    pthread_mutex_lock(&r->mu);
    bool open = false;
    for (uint32_t i = 0; i < r->n; i++)
        open = open || !r->ch[i].finished;
    bool first = !r->http_gone;
    r->http_gone = true;
    pthread_mutex_unlock(&r->mu);
    if (open && first)
        post_cancel(r);
    resp_unref(r);
}

/* ---- the HTTP side: requests ---- */

typedef struct sv_conn {
    cz_oai_buf body;
    bool too_big;
} sv_conn;

static enum MHD_Result send_bytes(struct MHD_Connection *c, unsigned status, const char *type,
                                  const char *body, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result send_error(sv *V, struct MHD_Connection *c, const cz_oai_error *e)
{
    cz_oai_buf b = {0};
    cz_oai_error_body(&b, e);
    atomic_fetch_add(&V->errors_4xx, 1);
    enum MHD_Result ok = send_bytes(c, (unsigned)e->status, "application/json", b.p, b.n);
    cz_oai_buf_free(&b);
    return ok;
}

static enum MHD_Result send_detail(sv *V, struct MHD_Connection *c, unsigned status,
                                   const char *detail)
{
    char body[128];
    int n = snprintf(body, sizeof body, "{\"detail\":\"%s\"}", detail);
    atomic_fetch_add(&V->errors_4xx, 1);
    return send_bytes(c, status, "application/json", body, (size_t)n);
}

static void hist_text(cz_oai_buf *b, const char *name, const char *help, const sv_hist *h,
                      const double *le, size_t n, const char *model)
{
    char line[512];
    int k = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    cz_oai_buf_reserve(b, (size_t)k);
    memcpy(b->p + b->n, line, (size_t)k);
    b->n += (size_t)k;
    uint64_t run = 0;
    for (size_t i = 0; i <= n; i++) {
        run += h->cnt[i];
        char le_s[32];
        if (i < n)
            snprintf(le_s, sizeof le_s, "%g", le[i]);
        else
            snprintf(le_s, sizeof le_s, "+Inf");
        k = snprintf(line, sizeof line, "%s_bucket{le=\"%s\",model_name=\"%s\"} %llu\n", name,
                     le_s, model, (unsigned long long)run);
        cz_oai_buf_reserve(b, (size_t)k);
        memcpy(b->p + b->n, line, (size_t)k);
        b->n += (size_t)k;
    }
    k = snprintf(line, sizeof line, "%s_sum{model_name=\"%s\"} %.9g\n%s_count{model_name=\"%s\"} %llu\n",
                 name, model, h->sum, name, model, (unsigned long long)h->count);
    cz_oai_buf_reserve(b, (size_t)k);
    memcpy(b->p + b->n, line, (size_t)k);
    b->n += (size_t)k;
    b->p[b->n] = '\0';
}

static void buf_text(cz_oai_buf *b, const char *line, int k)
{
    cz_oai_buf_reserve(b, (size_t)k);
    memcpy(b->p + b->n, line, (size_t)k);
    b->n += (size_t)k;
    b->p[b->n] = '\0';
}

/* A metric family's HELP and TYPE lines (once a family, as the text format requires). */
static void metric_family(cz_oai_buf *b, const char *name, const char *type, const char *help)
{
    char line[512];
    int k = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    buf_text(b, line, k);
}

static void metric_sample(cz_oai_buf *b, const char *name, const char *labels, double v)
{
    char line[512];
    int k = snprintf(line, sizeof line, "%s{%s} %.17g\n", name, labels, v);
    buf_text(b, line, k);
}

static void metric_line(cz_oai_buf *b, const char *name, const char *type, const char *help,
                        const char *labels, double v)
{
    metric_family(b, name, type, help);
    metric_sample(b, name, labels, v);
}

/* GET /metrics: Prometheus' text format, vLLM's names where vLLM has the figure. */
static enum MHD_Result send_metrics(sv *V, struct MHD_Connection *c)
{
    sv_prom p;
    pthread_mutex_lock(&V->prom_mu);
    p = V->prom;
    pthread_mutex_unlock(&V->prom_mu);
    cz_oai_buf b = {0};
    char lab[256];
    snprintf(lab, sizeof lab, "model_name=\"%s\"", V->model_name);
    metric_line(&b, "vllm:num_requests_running", "gauge",
                "Number of requests in model execution batches.", lab, (double)p.running);
    metric_line(&b, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                lab, (double)p.waiting);
    metric_line(&b, "vllm:kv_cache_usage_perc", "gauge",
                "KV-cache usage. 1 means 100 percent usage.", lab, p.kv_usage);
    metric_line(&b, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                lab, (double)p.prompt_tokens);
    metric_line(&b, "vllm:generation_tokens_total", "counter",
                "Number of generation tokens processed.", lab, (double)p.generation_tokens);
    metric_line(&b, "vllm:num_preemptions_total", "counter",
                "Cumulative number of preemption from the engine.", lab, (double)p.preemptions);
    metric_line(&b, "vllm:prefix_cache_hits_total", "counter",
                "Prefix cache hits, in terms of number of cached tokens.", lab,
                (double)p.cached_tokens);
    static const char *const reasons[] = {NULL, "stop", "length", "abort"};
    metric_family(&b, "vllm:request_success_total", "counter",
                  "Count of successfully processed requests.");
    for (int i = 1; i < 4; i++) {
        char l2[320];
        snprintf(l2, sizeof l2, "finished_reason=\"%s\",%s", reasons[i], lab);
        metric_sample(&b, "vllm:request_success_total", l2, (double)p.finished[i]);
    }
    hist_text(&b, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              &p.ttft, ttft_le, CZ_ARRAY_LEN(ttft_le), V->model_name);
    hist_text(&b, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              &p.itl, itl_le, CZ_ARRAY_LEN(itl_le), V->model_name);
    hist_text(&b, "vllm:e2e_request_latency_seconds",
              "Histogram of e2e request latency in seconds.", &p.e2e, e2e_le,
              CZ_ARRAY_LEN(e2e_le), V->model_name);
    metric_line(&b, "cadenza:kv_host_tokens", "gauge",
                "Tokens of KV held in host memory (offloaded).", lab, (double)p.host_tokens);
    metric_line(&b, "cadenza:client_aborts_total", "counter",
                "Requests aborted because their client went away (a barge-in or a disconnect).",
                lab, (double)p.client_aborts);
    metric_line(&b, "cadenza:streams_dropped_total", "counter",
                "Streams whose client fell too far behind and was dropped.", lab, (double)p.dropped);
    metric_family(&b, "cadenza:session_events_total", "counter",
                  "Interaction-plane events received (POST /v1/sessions/{id}/events).");
    for (int i = 0; i < 4; i++) {
        char l2[320];
        snprintf(l2, sizeof l2, "type=\"%s\",%s", cz_oai_event_name((cz_oai_event_type)i), lab);
        metric_sample(&b, "cadenza:session_events_total", l2, (double)p.events[i]);
    }
    metric_line(&b, "cadenza:barge_ins_total", "counter",
                "Barge-ins that cut a reply (its unheard tokens discarded).", lab,
                (double)p.barge_ins);
    static const char *const pl_names[] = {"started", "hit", "late", "skipped", "cancelled",
                                           "fallback"};
    const uint64_t pl_vals[] = {p.preload.started, p.preload.hits,    p.preload.late,
                                p.preload.skips,   p.preload.cancels, p.preload.fallbacks};
    metric_family(&b, "cadenza:kv_preloads_total", "counter",
                  "Speech-triggered KV preloads (LiveServe section 5.2), by outcome.");
    for (int i = 0; i < 6; i++) {
        char l2[320];
        snprintf(l2, sizeof l2, "outcome=\"%s\",%s", pl_names[i], lab);
        metric_sample(&b, "cadenza:kv_preloads_total", l2, (double)pl_vals[i]);
    }
    hist_text(&b, "cadenza:audio_ttfp_seconds",
              "Histogram of time to first playable audio: from the user's end of speech (else "
              "the request) to the client's first playback report with audio.",
              &p.ttfp, ttft_le, CZ_ARRAY_LEN(ttft_le), V->model_name);
    enum MHD_Result ok = send_bytes(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.n);
    cz_oai_buf_free(&b);
    return ok;
}

/* Turns a parsed request into prompts of token ids; fills *e and returns false when one is
 * refused. */
static bool make_prompts(sv *V, const cz_oai_request *req, int32_t ***prompts, uint32_t **lens,
                         uint32_t *n, cz_oai_error *e)
{
    cz_err err;
    cz_err_clear(&err);
    uint32_t np = req->endpoint == CZ_OAI_CHAT ? 1 : (uint32_t)req->n_prompts;
    *prompts = cz_xcalloc(np, sizeof **prompts);
    *lens = cz_xcalloc(np, sizeof **lens);
    *n = np;
    for (uint32_t i = 0; i < np; i++) {
        cz_tok_ids ids = {0};
        cz_status st = CZ_OK;
        if (req->endpoint == CZ_OAI_CHAT) {
            cz_chat_msg *msgs = cz_xcalloc(req->n_messages, sizeof *msgs);
            for (size_t k = 0; k < req->n_messages; k++)
                msgs[k] = (cz_chat_msg){cz_oai_role_name(req->messages[k].role),
                                        req->messages[k].content};
            char *text = NULL;
            st = cz_chat_render(V->chat, msgs, req->n_messages, true, &text, &err);
            free(msgs);
            if (st == CZ_OK)
                st = cz_tokenizer_encode(V->tok, text, strlen(text), &ids, &err);
            free(text);
        } else if (req->prompts[i].ids) {
            for (size_t k = 0; k < req->prompts[i].n_ids; k++)
                if ((uint32_t)req->prompts[i].ids[k] >= V->in_vocab) {
                    cz_oai_error_set(e, 400, "BadRequestError", "prompt",
                                     "prompt[%u]: token id %d is out of vocabulary (size %u)",
                                     i, req->prompts[i].ids[k], V->in_vocab);
                    return false;
                }
            ids.ids = cz_xmalloc(req->prompts[i].n_ids * sizeof *ids.ids);
            memcpy(ids.ids, req->prompts[i].ids, req->prompts[i].n_ids * sizeof *ids.ids);
            ids.n = ids.cap = req->prompts[i].n_ids;
        } else {
            if (cz_tokenizer_add_bos(V->tok)) {
                ids.ids = cz_xmalloc(sizeof *ids.ids);
                ids.ids[0] = cz_tokenizer_bos(V->tok);
                ids.n = ids.cap = 1;
            }
            st = cz_tokenizer_encode(V->tok, req->prompts[i].text, req->prompts[i].text_len,
                                     &ids, &err);
        }
        if (st != CZ_OK) {
            cz_oai_error_set(e, 400, "BadRequestError",
                             req->endpoint == CZ_OAI_CHAT ? "messages" : "prompt", "%s",
                             err.msg);
            cz_tok_ids_free(&ids);
            return false;
        }
        if (ids.n == 0) {
            cz_oai_error_set(e, 400, "BadRequestError", "prompt",
                             "prompt[%u]: the prompt is empty once tokenized", i);
            return false;
        }
        (*prompts)[i] = ids.ids;
        (*lens)[i] = (uint32_t)ids.n;
    }
    return true;
}

static void free_prompts(int32_t **prompts, uint32_t *lens, uint32_t n)
{
    for (uint32_t i = 0; prompts && i < n; i++)
        free(prompts[i]);
    free(prompts);
    free(lens);
}

static enum MHD_Result handle_generate(sv *V, struct MHD_Connection *c, cz_oai_endpoint ep,
                                       const sv_conn *cc)
{
    cz_oai_error e;
    if (cc->too_big) {
        cz_oai_error_set(&e, 413, "Request Entity Too Large", NULL,
                         "the request body is larger than %zu bytes", CZ_OAI_MAX_BODY_BYTES);
        return send_error(V, c, &e);
    }
    cz_oai_request req;
    if (cz_oai_parse(ep, cc->body.p ? cc->body.p : "", cc->body.n, &req, &e) != CZ_OK)
        return send_error(V, c, &e);
    if (req.model && strcmp(req.model, V->model_name) != 0) {
        cz_oai_error_set(&e, 404, "NotFoundError", "model", "The model `%s` does not exist.",
                         req.model);
        cz_oai_request_free(&req);
        return send_error(V, c, &e);
    }
    int32_t **prompts = NULL;
    uint32_t *lens = NULL, np = 0;
    if (!make_prompts(V, &req, &prompts, &lens, &np, &e)) {
        free_prompts(prompts, lens, np);
        cz_oai_request_free(&req);
        return send_error(V, c, &e);
    }
    /* the context length: vLLM's message */
    uint32_t most = 0;
    for (uint32_t i = 0; i < np; i++)
        most = lens[i] > most ? lens[i] : most;
    int64_t max_tokens = req.max_tokens;
    if (max_tokens == 0) /* chat without a limit: up to the context length */
        max_tokens = most < V->max_ctx ? (int64_t)V->max_ctx - most : 0;
    if ((int64_t)most + max_tokens > (int64_t)V->max_ctx || max_tokens < 1) {
        cz_oai_error_set(&e, 400, "BadRequestError", NULL,
                         "This model's maximum context length is %u tokens. However, you "
                         "requested %lld tokens (%u in the %s, %lld in the completion). Please "
                         "reduce the length of the %s or completion.",
                         V->max_ctx, (long long)(most + max_tokens), most,
                         ep == CZ_OAI_CHAT ? "messages" : "prompt", (long long)max_tokens,
                         ep == CZ_OAI_CHAT ? "messages" : "prompt");
        free_prompts(prompts, lens, np);
        cz_oai_request_free(&req);
        return send_error(V, c, &e);
    }
    const char *xs = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Session-ID");
    const char *session = cz_oai_session_id(xs, &req);
    /* the response and its channels */
    sv_resp *r = cz_xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    cz_wall_cond_init(&r->cv);
    r->V = V;
    r->n = np;
    r->refs = 1 + (int)np;
    r->stream = req.stream;
    r->ch = cz_xcalloc(np, sizeof *r->ch);
    r->dec = cz_xmalloc(2 * cz_tokenizer_decode_max(V->tok)); /* a token and the flush */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->fd = ci ? ci->connect_fd : -1;
    uint64_t k = atomic_fetch_add(&V->ids, 1);
    cz_oai_id id = {mix64(V->cfg->seed ^ (k << 1)), mix64(V->cfg->seed ^ ((k << 1) | 1))};
    cz_oai_meta_init(&r->meta, ep, id, V->created, V->model_name);
    r->meta.include_usage = req.include_usage;
    r->meta.continuous_usage = req.continuous_usage;
    r->meta.prompt_tokens_details = true;
    r->token_ids = req.return_token_ids;
    for (uint32_t i = 0; i < np; i++) {
        r->ch[i].ring = cz_xmalloc(V->max_pending * sizeof *r->ch[i].ring);
        r->ch[i].prompt_tokens = lens[i];
        r->ch[i].stop_token = -1;
        r->ch[i].text_cut = -1;
        for (size_t j = 0; j < req.n_stop; j++) {
            /* characters held back: the longest stop string's, less one */
            uint32_t chars = 0;
            for (const unsigned char *p = (const unsigned char *)req.stop[j]; *p; p++)
                chars += (*p & 0xC0) != 0x80;
            if (chars > r->ch[i].hold + 1)
                r->ch[i].hold = chars - 1;
            r->ch[i].via_pend = true;
        }
        if (req.return_token_ids) {
            r->ch[i].prompt_ids = cz_xmalloc((lens[i] ? lens[i] : 1) * sizeof(int32_t));
            memcpy(r->ch[i].prompt_ids, prompts[i], lens[i] * sizeof(int32_t));
            r->ch[i].n_prompt_ids = lens[i];
        }
        cz_detok_init(&r->ch[i].detok, true);
    }
    if (r->token_ids && ep == CZ_OAI_CHAT) {
        r->meta.prompt_ids = r->ch[0].prompt_ids;
        r->meta.n_prompt_ids = r->ch[0].n_prompt_ids;
    }
    atomic_fetch_add(&V->open_resps, 1);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SV_BLOCK, reader, r, reader_done);
    if (!resp) {
        /* nothing reached the runtime */
        r->refs = 1;
        resp_unref(r);
        free_prompts(prompts, lens, np);
        cz_oai_request_free(&req);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type",
                            req.stream ? "text/event-stream; charset=utf-8" : "application/json");
    if (req.stream)
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    /* each prompt to the runtime */
    for (uint32_t i = 0; i < np; i++) {
        sv_req *q = cz_xcalloc(1, sizeof *q);
        q->resp = r;
        q->idx = i;
        q->prompt = prompts[i];
        q->n_prompt = lens[i];
        prompts[i] = NULL;
        q->max_tokens = (uint32_t)max_tokens;
        q->min_tokens = (uint32_t)req.min_tokens;
        q->ignore_eos = req.ignore_eos;
        q->stop_token = -1;
        q->stop_str = -1;
        q->text_cut = -1;
        cz_detok_init(&q->detok, true);
        for (size_t j = 0; j < req.n_stop; j++)
            q->stops[q->n_stops++] = cz_xstrdup(req.stop[j]);
        q->heard = NONE;
        q->has_temperature = req.has_temperature;
        q->temperature = (float)req.temperature;
        q->has_top_p = req.has_top_p;
        q->top_p = (float)req.top_p;
        /* a limit at or past the vocabulary is no limit */
        q->has_top_k = req.has_top_k;
        q->top_k = req.top_k > 0 && (uint32_t)req.top_k < V->in_vocab ? (uint32_t)req.top_k : 0;
        q->has_seed = req.has_seed;
        q->seed = (uint64_t)req.seed;
        q->arrival_s = NAN;
        /* a session is one conversation: with several prompts each is a request of its own */
        q->session = session && np == 1 ? cz_xstrdup(session) : NULL;
        if (req.n_stop_token_ids) {
            q->stop_ids = cz_xmalloc(req.n_stop_token_ids * sizeof *q->stop_ids);
            memcpy(q->stop_ids, req.stop_token_ids, req.n_stop_token_ids * sizeof *q->stop_ids);
            q->n_stop_ids = req.n_stop_token_ids;
        }
        sv_msg *msg = cz_xcalloc(1, sizeof *msg);
        msg->req = q;
        post(V, msg);
    }
    free_prompts(prompts, lens, np);
    cz_oai_request_free(&req);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* POST /v1/sessions/{id}/events: the event reaches the runtime thread, and the response
 * says what it did once it has been applied. */
static enum MHD_Result handle_event(sv *V, struct MHD_Connection *c, const char *session,
                                    const sv_conn *cc)
{
    cz_oai_error e;
    if (cc->too_big) {
        cz_oai_error_set(&e, 413, "Request Entity Too Large", NULL,
                         "the request body is larger than %zu bytes", CZ_OAI_MAX_EVENT_BYTES);
        return send_error(V, c, &e);
    }
    sv_event *x = cz_xcalloc(1, sizeof *x);
    if (cz_oai_parse_event(cc->body.p ? cc->body.p : "", cc->body.n, &x->ev, &e) != CZ_OK) {
        free(x);
        return send_error(V, c, &e);
    }
    pthread_mutex_init(&x->mu, NULL);
    cz_wall_cond_init(&x->cv);
    x->refs = 2;
    snprintf(x->session, sizeof x->session, "%s", session);
    sv_msg *msg = cz_xcalloc(1, sizeof *msg);
    msg->event = x;
    post(V, msg);
    pthread_mutex_lock(&x->mu);
    while (!x->done) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)(SV_POLL_S * 1e9);
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&x->cv, &x->mu, &ts) != ETIMEDOUT || x->done)
            continue;
        pthread_mutex_unlock(&x->mu);
        pthread_mutex_lock(&V->mu);
        bool ended = V->runtime_done; /* it will never be applied */
        pthread_mutex_unlock(&V->mu);
        pthread_mutex_lock(&x->mu);
        if (ended && !x->done) {
            x->refused = true;
            break;
        }
    }
    bool refused = x->refused;
    cz_oai_event_result res = x->res;
    pthread_mutex_unlock(&x->mu);
    event_unref(x);
    if (refused) {
        cz_oai_error_set(&e, 503, "ServiceUnavailableError", NULL, "the server is shutting down");
        return send_error(V, c, &e);
    }
    cz_oai_buf b = {0};
    cz_oai_event_body(&b, session, &res);
    enum MHD_Result ok = send_bytes(c, 200, "application/json", b.p, b.n);
    cz_oai_buf_free(&b);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    sv *V = cls;
    (void)version;
    if (!*con_cls) {
        *con_cls = cz_xcalloc(1, sizeof(sv_conn));
        return MHD_YES;
    }
    sv_conn *cc = *con_cls;
    if (*upload_data_size) {
        if (!cc->too_big && cc->body.n + *upload_data_size <= CZ_OAI_MAX_BODY_BYTES) {
            cz_oai_buf_reserve(&cc->body, *upload_data_size);
            memcpy(cc->body.p + cc->body.n, upload_data, *upload_data_size);
            cc->body.n += *upload_data_size;
            cc->body.p[cc->body.n] = '\0';
        } else {
            cc->too_big = true; /* the rest is read and dropped; 413 at the end */
            cz_oai_buf_free(&cc->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    atomic_fetch_add(&V->http_requests, 1);
    bool get = strcmp(method, "GET") == 0, postm = strcmp(method, "POST") == 0;
    if (strcmp(url, "/health") == 0)
        return get ? send_bytes(c, 200, "application/json", "", 0)
                   : send_detail(V, c, 405, "Method Not Allowed");
    if (strcmp(url, "/metrics") == 0)
        return get ? send_metrics(V, c) : send_detail(V, c, 405, "Method Not Allowed");
    char sid[CZ_OAI_MAX_SESSION_ID];
    bool event = cz_oai_session_path(url, sid, sizeof sid);
    bool known = event || strcmp(url, "/v1/models") == 0 ||
                 strcmp(url, "/v1/completions") == 0 || strcmp(url, "/v1/chat/completions") == 0;
    if (!known)
        return send_detail(V, c, 404, "Not Found");
    if (V->o.api_key && V->o.api_key[0] &&
        !cz_oai_auth_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                        V->o.api_key)) {
        cz_oai_buf b = {0};
        cz_oai_unauthorized_body(&b);
        atomic_fetch_add(&V->errors_4xx, 1);
        enum MHD_Result ok = send_bytes(c, 401, "application/json", b.p, b.n);
        cz_oai_buf_free(&b);
        return ok;
    }
    if (strcmp(url, "/v1/models") == 0) {
        if (!get)
            return send_detail(V, c, 405, "Method Not Allowed");
        cz_oai_buf b = {0};
        cz_oai_id perm = {mix64(V->cfg->seed + 17), mix64(V->cfg->seed + 18)};
        cz_oai_models_body(&b, V->model_name, V->model_root, V->created, V->max_ctx, perm);
        enum MHD_Result ok = send_bytes(c, 200, "application/json", b.p, b.n);
        cz_oai_buf_free(&b);
        return ok;
    }
    if (!postm)
        return send_detail(V, c, 405, "Method Not Allowed");
    pthread_mutex_lock(&V->mu);
    bool stopping = V->stopping;
    pthread_mutex_unlock(&V->mu);
    if (stopping) {
        cz_oai_error e;
        cz_oai_error_set(&e, 503, "ServiceUnavailableError", NULL, "the server is shutting down");
        return send_error(V, c, &e);
    }
    if (event)
        return handle_event(V, c, sid, cc);
    return handle_generate(V, c,
                           strcmp(url, "/v1/completions") == 0 ? CZ_OAI_COMPLETIONS : CZ_OAI_CHAT,
                           cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    sv_conn *cc = *con_cls;
    if (cc) {
        cz_oai_buf_free(&cc->body);
        free(cc);
    }
    *con_cls = NULL;
}

/* ---- the run ---- */

static cz_status load_tokenizer(sv *V, cz_err *err)
{
    const cz_stage_card *card = &V->cfg->model.stages[V->cfg->model.pipe[0].stage];
    if (V->o.model_dir) {
        cz_status st = cz_tokenizer_load(V->o.model_dir, &V->tok, err);
        if (st != CZ_OK)
            return cz_err_prefix(err, "--model-dir: ");
    } else {
        V->tok = cz_tokenizer_bytes(card->vocab);
        if (!V->tok)
            return cz_err_set(err, CZ_EINVAL,
                              "model '%s': a vocabulary of %u tokens is too small for the "
                              "byte-level tokenizer (256); give --model-dir with a "
                              "tokenizer.json",
                              V->cfg->model.name, card->vocab);
    }
    V->chat = cz_tokenizer_chat(V->tok);
    V->vocab = card->vocab < cz_tokenizer_vocab(V->tok) ? card->vocab : cz_tokenizer_vocab(V->tok);
    if (V->vocab == 0)
        V->vocab = cz_tokenizer_vocab(V->tok);
    V->in_vocab = card->vocab ? card->vocab : cz_tokenizer_vocab(V->tok);
    if (V->o.exec == CZ_SERVE_ENGINE && cz_tokenizer_vocab(V->tok) > V->in_vocab &&
        V->o.model_dir)
        return cz_err_set(err, CZ_EINVAL,
                          "--model-dir %s: its tokenizer has %u tokens, more than model '%s' "
                          "has (vocab %u): the engine could not embed its ids",
                          V->o.model_dir, cz_tokenizer_vocab(V->tok), V->cfg->model.name,
                          V->in_vocab);
    V->eos = cz_tokenizer_eos(V->tok);
    V->id_lo = 0;
    V->id_hi = V->vocab;
    if (!V->o.model_dir) {
        V->id_lo = 32; /* the fallback's ids are bytes: a reply of printable ASCII */
        V->id_hi = 127;
    }
    return CZ_OK;
}

static cz_status start_daemon(sv *V, cz_err *err)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *sa;
    /* poll(), not select(): select's FD_SETSIZE (1,024) would refuse the connections past
     * that descriptor number */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ITC | MHD_USE_POLL;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    /* a connection is a descriptor: the soft limit raised toward what --max-connections
     * needs (as vLLM raises RLIMIT_NOFILE), never past the hard one */
    struct rlimit nf;
    rlim_t want = (rlim_t)V->o.max_connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur != RLIM_INFINITY &&
        nf.rlim_cur < want) {
        nf.rlim_cur = nf.rlim_max == RLIM_INFINITY || nf.rlim_max > want ? want : nf.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &nf);
    }
    if (inet_pton(AF_INET, V->o.host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons(V->o.port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, V->o.host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons(V->o.port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return cz_err_set(err, CZ_EINVAL,
                          "--host: expected an IPv4 or IPv6 address (127.0.0.1, ::1, 0.0.0.0), "
                          "got '%s'",
                          V->o.host);
    }
    V->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, V, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, V,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)V->o.max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, 600u,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)256 << 10,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!V->d)
        return cz_err_set(err, CZ_EIO, "cannot listen on %s port %u: %s", V->o.host,
                          V->o.port, errno ? strerror(errno) : "libmicrohttpd refused");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(V->d, MHD_DAEMON_INFO_BIND_PORT);
    if (di)
        V->o.port = di->port;
    return CZ_OK;
}

cz_status cz_serve_run(const cz_config *cfg, const cz_serve_opts *o,
                       volatile sig_atomic_t *stop, cz_metrics *m, cz_run_stats *stats,
                       cz_serve_report *rep, cz_err *err)
{
    memset(stats, 0, sizeof *stats);
    memset(rep, 0, sizeof *rep);
    if (cfg->model.n_pipe != 1)
        return cz_err_set(err, CZ_EINVAL,
                          "model '%s' has a %u-stage pipeline: `cadenza serve` serves one "
                          "autoregressive stage (set \"stage\" in the config)",
                          cfg->model.name, cfg->model.n_pipe);
    sv *V = cz_xcalloc(1, sizeof *V);
    V->cfg = cfg;
    V->o = *o;
    if (!V->o.host)
        V->o.host = "127.0.0.1";
    if (!V->o.max_pending_tokens)
        V->o.max_pending_tokens = 4096;
    if (!(V->o.session_idle_s > 0))
        V->o.session_idle_s = 600.0;
    if (!V->o.max_connections)
        V->o.max_connections = 4096;
    V->max_pending = V->o.max_pending_tokens;
    V->m = m;
    snprintf(V->model_name, sizeof V->model_name, "%s",
             o->served_name ? o->served_name : cfg->model.name);
    snprintf(V->model_root, sizeof V->model_root, "%s",
             o->model_dir ? o->model_dir : cfg->model.name);
    const cz_server_config *sc = &cfg->place[0].server;
    uint64_t pool = (uint64_t)sc->kv_blocks * sc->block_tokens;
    V->max_ctx = (uint32_t)(pool < UINT32_MAX ? pool : UINT32_MAX);
    if (sc->max_model_len && sc->max_model_len < V->max_ctx)
        V->max_ctx = sc->max_model_len; /* max_model_len within what the pool holds */
    V->created = (int64_t)time(NULL);
    pthread_mutex_init(&V->mu, NULL);
    cz_wall_cond_init(&V->cv);
    pthread_mutex_init(&V->prom_mu, NULL);
    cz_status st = load_tokenizer(V, err);
    if (st == CZ_OK)
        V->rt_dec = cz_xmalloc(cz_tokenizer_decode_max(V->tok));
    cz_workload_init(&V->wl);
    cz_workload_live(&V->wl);
    V->ehow = CZ_ENGINE_DRAINED;
    if (st == CZ_OK && o->exec == CZ_SERVE_ENGINE) {
        cz_engine_observer eobs = {.ctx = V, .input_id = on_input_id, .sampled = on_sampled,
                                   .turn_end = on_turn_end, .sampling = on_sampling};
        cz_engine_opts eo = {.backend = o->backend, .threads = o->threads};
        st = cz_engine_open(cfg, &V->wl, m, &eo, &eobs, &V->eng, err);
    } else if (st == CZ_OK) {
        cz_sim_observer obs = {.ctx = V, .step_ended = on_step_ended,
                               .turn_end = on_turn_end};
        st = cz_sim_open(cfg, &V->wl, m, &obs, &V->sim, err);
    }
    if (st == CZ_OK)
        st = start_daemon(V, err);
    if (st == CZ_OK) {
        snprintf(rep->tokenizer, sizeof rep->tokenizer, "%s", cz_tokenizer_describe(V->tok));
        clock_gettime(CLOCK_MONOTONIC, &V->t0);
        V->how = CZ_SIM_RAN;
        if (pthread_create(&V->rt, NULL, runtime_main, V) != 0)
            st = cz_err_set(err, CZ_ENOMEM, "cannot start the runtime thread");
        else
            V->rt_started = true;
    }
    if (st == CZ_OK) {
        rep->port = V->o.port;
        if (o->port_file) {
            FILE *f = fopen(o->port_file, "w");
            if (f) {
                fprintf(f, "%u\n", V->o.port);
                fclose(f);
            }
        }
        if (!o->quiet)
            fprintf(stderr, "cadenza serve: %s on http://%s:%u (execution %s, tokenizer %s, "
                            "chat template %s); Ctrl-C stops it\n",
                    V->model_name, V->o.host, V->o.port,
                    V->eng ? "engine" : "modelled",
                    cz_tokenizer_describe(V->tok), cz_chat_template_name(V->chat));
        /* until a signal, or the runtime ends on its own (a stall) */
        for (;;) {
            pthread_mutex_lock(&V->mu);
            bool done = V->runtime_done;
            if (*stop)
                V->stopping = true;
            bool stopping = V->stopping;
            pthread_cond_signal(&V->cv);
            pthread_mutex_unlock(&V->mu);
            if (stopping && V->eng)
                cz_engine_kick(V->eng);
            if (stopping || done)
                break;
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        MHD_quiesce_daemon(V->d);
        pthread_join(V->rt, NULL);
        V->rt_started = false;
        /* the streams flush: their channels have all ended; a client that reads no more
         * is cut when the daemon stops */
        for (int i = 0; i < 100 && atomic_load(&V->open_resps) > 0; i++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (V->d)
        MHD_stop_daemon(V->d);
    rep->http_requests = atomic_load(&V->http_requests);
    rep->errors_4xx = atomic_load(&V->errors_4xx);
    rep->streams_dropped = V->rp.dropped;
    rep->client_aborts = V->rp.client_aborts;
    rep->cached_tokens = V->rp.cached_tokens;
    rep->clock = V->clock;
    if (V->eng) {
        if (st == CZ_OK)
            st = cz_engine_close(V->eng, V->ehow, stats, err);
        else {
            cz_err ignore;
            cz_engine_close(V->eng, V->ehow, stats, &ignore);
        }
    }
    if (V->sim) {
        cz_sim_state how = V->how == CZ_SIM_RAN ? CZ_SIM_DRAINED : V->how;
        if (st == CZ_OK)
            st = cz_sim_close(V->sim, how, stats, err);
        else {
            cz_err ignore;
            cz_sim_close(V->sim, how, stats, &ignore);
        }
    }
    /* what the queue still holds never reached the runtime */
    for (sv_msg *msg = V->in_head, *nx; msg; msg = nx) {
        nx = msg->next;
        if (msg->event) {
            event_finish(msg->event, true);
        } else if (msg->req) {
            resp_unref(msg->req->resp);
            req_free(msg->req);
        } else {
            resp_unref(msg->cancel);
        }
        free(msg);
    }
    for (size_t i = 0; i < V->n_held; i++)
        never_ran(V->held[i]);
    free(V->held);
    for (size_t i = 0; i < V->sessions.cap; i++)
        for (sv_node *x = V->sessions.b[i]; x; x = x->next) {
            free(((sv_sess *)x->val)->ctx);
            free(x->val);
        }
    map_free(&V->sessions);
    map_free(&V->by_si);
    free(V->cancels);
    cz_workload_free(&V->wl);
    free(V->rt_dec);
    cz_tokenizer_free(V->tok);
    pthread_cond_destroy(&V->cv);
    pthread_mutex_destroy(&V->mu);
    pthread_mutex_destroy(&V->prom_mu);
    free(V);
    return st;
}
