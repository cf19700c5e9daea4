/* cz_hclient.h - `cadenza replay CONFIG --endpoint URL`: a config's workload sent as
 * streamed requests to an OpenAI-compatible server (vLLM, SGLang, llama.cpp, `cadenza
 * serve`), timed by the workload, measured as `vllm bench serve` measures, recorded into
 * the same metrics as the simulator's (docs/http-replay.md).
 *
 * One thread drives every stream through libcurl's multi interface. A turn is sent at its
 * time in the workload: an open-loop turn at its arrival; a closed-loop session's next
 * turn think_s (and its speech_s) after its reply has ended; a closed-loop workload
 * (workload.concurrency c) starts a session when one of its c ends. Each turn is a
 * request: a prompt of the turn's input tokens as token ids on /v1/completions,
 * max_tokens (and min_tokens, ignore_eos) its output tokens, streamed with usage; a
 * closed-loop session of several turns carries its conversation, each prompt the earlier
 * turns' prompts and replies as received (the server's ids, asked for with
 * return_token_ids) and then its own input. Its record: arrival_s the time the workload
 * gave it, send_lag_s how late the client sent it, first_token_s the first chunk with
 * choices, finish_s the last, output_tokens usage's completion_tokens (the count of such
 * chunks when the server sends no usage), one ITL per chunk gap. Transport errors, HTTP
 * errors, error events, malformed or truncated streams end a turn failed, with the reason
 * counted.
 *
 * A spoken turn (out_audio_s > 0) is the simulator's interactive client over HTTP: its
 * reply is played as it arrives, each token out_audio_s / max_tokens seconds of audio, by
 * the shared player (cz_player), and the turn ends when the player has played it; the
 * user's barge-in (barge_in_s after the first audio) stops the player, cancels the stream
 * if still open and ends the turn aborted with the tokens played as heard. Speech starts,
 * playback and barge-ins go to the server's interaction plane (POST
 * /v1/sessions/{id}/events, docs/serve.md), a session's in order and before its next
 * request; a server that answers the first with 404, 405 or 501 gets none after it. */
#ifndef CZ_HCLIENT_H
#define CZ_HCLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "cz_config.h"
#include "cz_metrics.h"
#include "cz_run.h"
#include "cz_workload.h"

/* The API a replay's requests use. */
typedef enum cz_hapi {
    CZ_HAPI_COMPLETIONS = 0, /* /v1/completions, prompts of token ids */
    CZ_HAPI_CHAT             /* /v1/chat/completions, text messages of the counts under a
                                tokenizer (cz_prompt.h) */
} cz_hapi;

typedef struct cz_hclient_opts {
    const char *endpoint;        /* the server's base URL (http://host:port[/prefix]); the
                                    API path /v1/completions is appended */
    const char *model;           /* the request's "model" (NULL: the config's model card) */
    const char *api_key;         /* NULL: no Authorization header */
    uint32_t max_concurrency;    /* requests in flight at most (0: no bound), as vLLM's
                                    --max-concurrency: a turn due while it is reached waits,
                                    its wait in its send lag */
    double timeout_s;            /* a request's whole time at most (> 0): past it the turn
                                    fails (transport), so a server that stops sending never
                                    holds the run */
    bool no_events;              /* send no interaction-plane events (--no-events) */
    cz_hapi api;
    const char *tokenizer;       /* chat: the folder of the server's tokenizer.json */
    volatile sig_atomic_t *stop; /* NULL, or a flag set asynchronously (Ctrl-C): open
                                    streams are cancelled and the run ends partial */
} cz_hclient_opts;

/* Why turns failed, and what the server honoured. */
typedef enum cz_hfail {
    CZ_HFAIL_TRANSPORT = 0, /* connection refused, reset, timed out (libcurl's error) */
    CZ_HFAIL_HTTP,          /* a status other than 200 */
    CZ_HFAIL_ERROR_EVENT,   /* an error object in the stream */
    CZ_HFAIL_BAD_CHUNK,     /* an event that is not a chunk (cz_oai_chunk_parse) */
    CZ_HFAIL_NO_CHUNK,      /* the stream ended without a chunk with choices */
    CZ_HFAIL_TRUNCATED,     /* the stream ended without [DONE] or a finish_reason */
    CZ_HFAIL_SERVER_ABORT,  /* finish_reason "abort": the server gave the request up */
    CZ_HFAIL_N
} cz_hfail;

typedef struct cz_hclient_stats {
    uint64_t sent;                    /* requests sent */
    uint64_t failed_by[CZ_HFAIL_N];
    char first_error[CZ_HFAIL_N][200];/* the first message of each kind */
    uint64_t with_usage;              /* completed turns whose stream reported usage */
    uint64_t len_honoured;            /* completed turns that generated exactly max_tokens */
    uint64_t completed;
    uint64_t chunks;                  /* chunks with choices received, every turn */
    uint64_t replies_as_ids;          /* closed-loop replies carried into the next prompt as
                                         the server's token ids (return_token_ids) */
    uint64_t replies_as_count;        /* ... as as many ids of the client's own (a server
                                         that returns no ids) */
    uint64_t replies_as_text;         /* chat: replies carried as the text received */
    uint64_t prompt_len_missed;       /* chat: messages whose text missed their count */
    uint64_t barge_ins;               /* spoken replies cut by the user */
    uint64_t barge_ins_streaming;     /* ... of them while their stream was open (cancelled) */
    uint64_t events_sent;             /* interaction-plane events sent */
    uint64_t events_ok;               /* ... answered 200 */
    uint64_t events_applied;          /* ... that the server says it applied */
    uint64_t events_failed;           /* ... answered otherwise, or lost in transport */
    uint64_t events_dropped;          /* playback reports given up behind a full queue */
    bool events_unsupported;          /* the server answered 404/405/501 to the first:
                                         no more were sent */
    char first_event_error[200];
    double wall_s;                    /* the run's span on the client's clock */
} cz_hclient_stats;

/* The name of a failure kind ("transport", "http_status", ...). */
const char *cz_hfail_name(cz_hfail k);

/* Replays `wl` (whole, not streamed; no periodic streams) under `cfg`
 * against opts->endpoint, recording into `m` (initialised by the caller; its send_lags
 * set here). Runs until every turn has ended or *opts->stop is set (*partial then true:
 * turns not ended are unfinished, open streams cancelled). `progress` (may be NULL) is
 * called about twice a second and at the end. CZ_EINVAL (exit 2) for a workload the client
 * cannot send or a malformed endpoint; a server that refuses or fails requests is not an
 * error of the run: those turns fail, counted in `hs`. */
cz_status cz_hclient_run(const cz_config *cfg, cz_workload *wl, cz_metrics *m,
                         const cz_hclient_opts *opts, cz_run_stats *stats,
                         cz_hclient_stats *hs, bool *partial, cz_run_progress_fn progress,
                         void *pctx, cz_err *err);

#endif
