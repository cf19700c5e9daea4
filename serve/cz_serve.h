/* cz_serve.h - `cadenza serve`: the deployment runtime behind an OpenAI-compatible HTTP
 * endpoint, a third driver beside the simulator and the engine (docs/serve.md).
 *
 * HTTP threads (libmicrohttpd, one thread per connection) read request bodies, check the
 * API key, parse them (serve/cz_oai.h), render chat messages and tokenize (models/
 * cz_tokenizer.h), and hand each prompt to one runtime thread through a queue. The runtime
 * thread owns the deployment runtime as llama.cpp's server's one inference thread owns its
 * slots: it submits each request as a session of a live workload (cz_deploy_submit), a
 * request of a known session following that session's last one so that the KV it kept
 * serves as the prompt's cached prefix, runs the steps, and appends each request's new
 * token ids to its stream. An HTTP thread turns a stream's ids into text and SSE chunks as
 * the client takes them; a stream's pending ids are bounded, and a client that falls that
 * far behind is dropped (its request aborted) and counted. A client that goes away aborts
 * its request at once.
 *
 * Execution "modelled": a step runs for the time the cost model predicts, waited out on the
 * wall clock (the simulator, cz_sim_open, advanced as the clock reaches each event), and the
 * ids it emits are drawn from the seed, never the EOS or a request's stop ids: a reply runs
 * to its max_tokens. The runtime's clock is the wall clock's seconds since the server
 * started; every request is stamped when the runtime takes it.
 *
 * Execution "engine": the engine (cz_engine_open) runs each step through the kernels with
 * the requests' prompt ids as input; the ids it samples are the replies, and a sampled EOS
 * (unless ignore_eos) or stop id, once min_tokens are out, is its reply's last
 * (cz_server_end_output, before the runtime schedules again). */
#ifndef CZ_SERVE_H
#define CZ_SERVE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cz_config.h"
#include "cz_metrics.h"
#include "cz_run.h"

typedef enum cz_serve_exec {
    CZ_SERVE_MODELLED = 0, /* the cost model's step times, waited out */
    CZ_SERVE_ENGINE        /* the engine's kernels */
} cz_serve_exec;

/* What `cadenza serve` takes from its command line. */
typedef struct cz_serve_opts {
    const char *host;           /* address to bind: "127.0.0.1" (loopback) by default */
    uint16_t port;              /* 0: any free port (cz_serve_run reports it) */
    const char *api_key;        /* NULL or "": none; else Authorization: Bearer KEY */
    const char *served_name;    /* the model's name in the API; NULL: the model card's */
    const char *model_dir;      /* a folder with tokenizer.json; NULL: the byte-level
                                   fallback */
    cz_serve_exec exec;
    const char *backend;        /* the engine's: "cpu" (NULL) or "cuda" */
    uint32_t threads;           /* the engine's CPU threads (0: the config's) */
    uint32_t max_pending_tokens;/* ids a stream may hold unsent before its client is
                                   dropped (0: 4096) */
    double session_idle_s;      /* a session's kept KV is released after this long idle
                                   (0: 600 s) */
    uint32_t max_connections;   /* 0: 4096 */
    bool quiet;                 /* no "listening on" line */
    const char *port_file;      /* NULL, or a file the bound port is written to (once
                                   listening) */
} cz_serve_opts;

/* How the modelled execution kept the model's times: each time the runtime thread came to
 * a step's end or another event the model timed, how far past that time it was (all zero
 * in the engine's execution, whose steps take what they take). */
typedef struct cz_serve_clock {
    uint64_t times;             /* model times come to */
    uint64_t over_1ms;          /* of them more than 1 ms late */
    double late_sum_s, late_max_s;
} cz_serve_clock;

/* What a server did, for its summary. */
typedef struct cz_serve_report {
    uint16_t port;              /* the port it listened on */
    uint64_t http_requests;     /* requests answered, errors included */
    uint64_t errors_4xx;        /* of them refused (400, 401, 404, 405, 413, 503) */
    uint64_t streams_dropped;   /* clients that fell too far behind */
    uint64_t client_aborts;     /* requests aborted because their client went away */
    uint64_t cached_tokens;     /* prompt tokens served from a session's kept KV */
    char tokenizer[160];        /* which tokenizer was in use */
    cz_serve_clock clock;       /* the modelled execution's timekeeping */
} cz_serve_report;

/* Serves config `cfg` (parsed with a live workload: cz_config_parse) until *stop is set
 * (a signal handler sets it), recording into `m` (initialised by the caller, streaming
 * or keeping its records as the caller chose). Then it stops accepting connections, ends
 * every open request aborted (its stream ends with finish_reason "abort"), lets the
 * streams flush, and closes the runtime: every request that reached it has exactly one
 * outcome, checked (cz_metrics_check). Fills *stats and *rep. CZ_EINVAL for a config it
 * cannot serve (a pipeline of more than one stage, a cross-stage scheduler), the engine's
 * load errors (cz_engine_open),
 * CZ_EIO naming the address when it cannot listen, the tokenizer's errors naming its
 * folder. */
cz_status cz_serve_run(const cz_config *cfg, const cz_serve_opts *o,
                       volatile sig_atomic_t *stop, cz_metrics *m, cz_run_stats *stats,
                       cz_serve_report *rep, cz_err *err);

#endif
