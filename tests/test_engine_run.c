/* test_engine_run.c - the engine end to end through its event-at-a-time interface
 * (engine/cz_engine.h) on the CPU backend: disaggregated prefill and decode against the
 * same workload on one colocated replica.
 *
 * tiny-llama with random float32 weights and a float32 KV cache, greedy: the ids a
 * disaggregated run samples must be those a colocated replica samples, position by
 * position, for single-turn and multi-turn sessions. The decode replica computes only each
 * turn's last prompt token and reads the rest of its context from the KV it pulled, so a
 * pull that copied the wrong rows (or none), a decode pool that synthesized other input ids,
 * or a prefill pool that read other ids for the replies the decode pool sampled all change
 * what it samples. Sessions arrive apart, so a step mostly holds one sequence in both runs:
 * the kernels agree across batch shapes to rounding only (docs/kernels.md), and a near tie
 * between two logits could flip a greedy id; these seeds have none. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_engine.h"
#include "cz_json.h"
#include "cz_results.h"
#include "test_util.h"

#define N_SES 4
#define MAX_POS 512

/* What a run sampled and how its turns ended. */
typedef struct ids_log {
    cz_deploy *d;
    bool pd;
    int32_t ids[N_SES][MAX_POS];     /* the decode pool's (colocated: the replica's) */
    int32_t pre_ids[N_SES][MAX_POS]; /* disaggregated: the prefill pool's one token a turn */
    uint32_t n_sampled, n_pre_sampled;
    uint32_t turns_ended, turns_completed;
} ids_log;

static void on_sampled(void *ctx, uint32_t rep, cz_server *srv, const uint32_t *seqs,
                       const int32_t *ids, uint32_t n, double now)
{
    (void)now;
    ids_log *l = ctx;
    bool prefill = l->pd && cz_deploy_replica_at(l->d, rep).p == CZ_PD_PREFILL;
    for (uint32_t i = 0; i < n; i++) {
        const cz_seq *q = cz_server_seq(srv, seqs[i]);
        uint32_t pos = q->tokens_in + q->generated; /* the position the id takes */
        cr_assert_lt(q->session, N_SES);
        cr_assert_lt(pos, MAX_POS);
        if (prefill) {
            l->pre_ids[q->session][pos] = ids[i];
            l->n_pre_sampled++;
        } else {
            l->ids[q->session][pos] = ids[i];
            l->n_sampled++;
        }
    }
}

static void on_turn_end(void *ctx, uint32_t session, uint32_t turn, uint32_t outcome,
                        uint32_t out_tokens, double now)
{
    (void)session;
    (void)turn;
    (void)out_tokens;
    (void)now;
    ids_log *l = ctx;
    l->turns_ended++;
    l->turns_completed += outcome == CZ_REQ_COMPLETED;
}

/* Two single-turn sessions and two of three turns (closed: a turn arrives 20 ms after the
 * reply before it ends), their first turns 0.25 s apart. Input lengths cross both pools'
 * block boundaries at different offsets. Returns the number of turns. */
static uint32_t write_trace(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    fprintf(f, "{\"format\":\"cadenza-sessions\",\"version\":1,\"arrivals_given\":true,"
               "\"think_given\":true}\n");
    static const uint32_t turns[N_SES] = {1, 3, 1, 3};
    static const uint32_t in[N_SES][3] = {{37, 0, 0}, {50, 21, 9}, {70, 0, 0}, {33, 5, 40}};
    uint32_t n = 0;
    for (uint32_t s = 0; s < N_SES; s++) {
        fprintf(f, "{\"session\":\"s%u\",\"class\":\"rt\",\"timing\":\"closed\",\"turns\":[",
                s);
        for (uint32_t t = 0; t < turns[s]; t++, n++)
            fprintf(f,
                    "%s{\"arrival_s\":%.2f,\"in_text_tokens\":%u,\"out_text_tokens\":%u,"
                    "\"think_s\":0.02}",
                    t ? "," : "", 0.25 * s, in[s][t], 6 + 3 * t);
        fprintf(f, "]}\n");
    }
    fclose(f);
    return n;
}

/* tiny-llama, float32 weights and KV, greedy; `extra` (may be empty) adds fields, such as
 * "disaggregation". `threads`: one CPU thread a device, so that both runs compute with the
 * same kernels. Caller frees. */
static char *config(const char *trace, const char *extra, uint32_t threads)
{
    char *buf = malloc(2048);
    snprintf(buf, 2048,
             "{\"model\": \"tiny-llama\", \"hardware\": \"cpu-host\", \"seed\": 5,"
             " \"server\": {\"kv_blocks\": 256, \"max_num_seqs\": 8,"
             "              \"max_num_batched_tokens\": 256},"
             " \"engine\": {\"weights\": \"random\", \"dtype\": \"f32\", \"kv_dtype\": \"f32\","
             "              \"threads\": %u, \"temperature\": 0}%s%s,"
             " \"workload\": {\"trace\": {\"path\": \"%s\"}}}",
             threads, *extra ? ", " : "", extra, trace);
    return buf;
}

/* Runs `json` on the CPU engine into `l`; the summary JSON (caller frees). */
/* A run's inputs from a config's JSON; free with parsed_free. */
typedef struct parsed {
    cJSON *j;
    cz_config cfg;
    cz_workload wl;
    cz_metrics m;
} parsed;

static void parse(parsed *p, const char *json)
{
    p->j = cJSON_Parse(json);
    cr_assert(p->j != NULL, "%s", json);
    cz_err err;
    cz_err_clear(&err);
    cz_workload_init(&p->wl);
    cr_assert_eq(cz_config_parse(p->j, "test", ".", &p->cfg, &p->wl, &err), CZ_OK, "%s", err.msg);
    cz_metrics_init(&p->m, 0.0, 0);
}

static void parsed_free(parsed *p)
{
    cz_metrics_free(&p->m);
    cz_workload_free(&p->wl);
    cJSON_Delete(p->j);
}

static cJSON *run_engine(const char *json, ids_log *l, bool pd)
{
    memset(l, 0, sizeof *l);
    memset(l->ids, 0xff, sizeof l->ids);
    memset(l->pre_ids, 0xff, sizeof l->pre_ids);
    l->pd = pd;
    parsed p;
    parse(&p, json);
    cr_assert_eq(p.cfg.pd, pd);
    cz_err err;
    cz_err_clear(&err);
    cz_engine_opts opts = {.backend = "cpu"};
    cz_engine_observer obs = {.ctx = l, .sampled = on_sampled, .turn_end = on_turn_end};
    cz_engine *e;
    cr_assert_eq(cz_engine_open(&p.cfg, &p.wl, &p.m, &opts, &obs, &e, &err), CZ_OK, "%s",
                 err.msg);
    l->d = cz_engine_deploy(e);
    cz_engine_state st;
    for (;;) {
        st = cz_engine_advance(e);
        if (st == CZ_ENGINE_RAN)
            continue;
        if (st != CZ_ENGINE_IDLE)
            break;
        cz_engine_wait(e, cz_engine_clock(e) + 0.05);
    }
    cr_assert_eq(st, CZ_ENGINE_DRAINED);
    cz_run_stats stats;
    cr_assert_eq(cz_engine_close(e, st, &stats, &err), CZ_OK, "%s", err.msg);
    cz_summary sum;
    cz_metrics_summarize(&p.m, &p.cfg.slo, &sum);
    cJSON *summary = cz_summary_json(&sum);
    cz_run_summary_json(&p.cfg, &p.m, &stats, &sum, summary);
    parsed_free(&p);
    return summary;
}

static double pd_num(const cJSON *summary, const char *key)
{
    const cJSON *pd = cJSON_GetObjectItem(summary, "disaggregation");
    cr_assert(pd != NULL, "no 'disaggregation' in the summary");
    const cJSON *it = cJSON_GetObjectItem(pd, key);
    cr_assert(cJSON_IsNumber(it), "no disaggregation.%s", key);
    return it->valuedouble;
}

/* The disaggregated run of `pools` against the colocated one: every turn completed, the
 * decode pool sampled at every position the colocated replica did and the same id there,
 * each prefill token is the colocated id at its position, and KV was pulled. */
static void compare(const char *pools)
{
    char path[] = "/tmp/cz-engine-pd-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    uint32_t turns = write_trace(path);
    char *col_cfg = config(path, "", 1), *pd_cfg = config(path, pools, 2);
    static ids_log col, pd;
    cJSON *cs = run_engine(col_cfg, &col, false);
    cJSON *ps = run_engine(pd_cfg, &pd, true);

    cr_assert_eq(col.turns_ended, turns);
    cr_assert_eq(col.turns_completed, turns);
    cr_assert_eq(pd.turns_ended, turns, "%u of %u turns ended", pd.turns_ended, turns);
    cr_assert_eq(pd.turns_completed, turns, "%u of %u turns completed", pd.turns_completed,
                 turns);
    /* 6, 9 and 12 tokens a turn: 2 x 6 + 2 x 27 */
    cr_assert_eq(col.n_sampled, 66);
    cr_assert_eq(pd.n_sampled, 66);
    cr_assert_eq(pd.n_pre_sampled, turns);
    uint32_t same = 0;
    for (uint32_t s = 0; s < N_SES; s++)
        for (uint32_t p = 0; p < MAX_POS; p++) {
            cr_assert_eq(pd.ids[s][p], col.ids[s][p],
                         "session %u position %u: the decode pool sampled %d, the colocated "
                         "replica %d",
                         s, p, pd.ids[s][p], col.ids[s][p]);
            same += col.ids[s][p] >= 0;
            if (pd.pre_ids[s][p] >= 0)
                cr_assert_eq(pd.pre_ids[s][p], col.ids[s][p],
                             "session %u position %u: the prefill pool sampled %d, the "
                             "colocated replica %d",
                             s, p, pd.pre_ids[s][p], col.ids[s][p]);
        }
    cr_assert_eq(same, 66);
    /* a pull a turn: a turn's new input is never all in the decode replica's pool */
    cr_assert_eq(pd_num(ps, "kv_transfers"), turns);
    cr_assert_gt(pd_num(ps, "kv_transfer_bytes"), 0);
    cr_assert_null(cJSON_GetObjectItem(cs, "disaggregation"));
    cJSON_Delete(cs);
    cJSON_Delete(ps);
    free(col_cfg);
    free(pd_cfg);
    unlink(path);
}

/* Pools of different block sizes: a pulled run of rows crosses blocks on either side at
 * different positions. */
Test(engine_run, disaggregated_matches_colocated)
{
    compare("\"disaggregation\": {\"prefill\": {\"replicas\": 1, \"block_tokens\": 16},"
            " \"decode\": {\"replicas\": 1, \"block_tokens\": 8, \"kv_blocks\": 512}}");
}

Test(engine_run, disaggregated_matches_colocated_larger_decode_blocks)
{
    compare("\"disaggregation\": {\"prefill\": {\"replicas\": 1, \"block_tokens\": 8,"
            " \"kv_blocks\": 512}, \"decode\": {\"replicas\": 1, \"block_tokens\": 32,"
            " \"kv_blocks\": 128}}");
}

/* The CUDA backend has no copy between two replicas' pools: refused before any device is
 * opened, naming the field. */
Test(engine_run, disaggregation_refused_on_cuda)
{
    const char *json =
        "{\"model\": \"tiny-llama\", \"hardware\": \"cpu-host\","
        " \"server\": {\"kv_blocks\": 64},"
        " \"disaggregation\": {\"prefill\": {\"replicas\": 1}, \"decode\": {\"replicas\": 1}},"
        " \"workload\": {\"synthetic\": {\"requests\": 2,"
        " \"input_tokens\": {\"dist\": \"fixed\", \"value\": 8},"
        " \"output_tokens\": {\"dist\": \"fixed\", \"value\": 4}},"
        " \"arrivals\": {\"process\": \"poisson\", \"rate_rps\": 10}}}";
    parsed p;
    parse(&p, json);
    cz_err err;
    cz_err_clear(&err);
    cz_engine_opts opts = {.backend = "cuda"};
    cz_engine *e = NULL;
    cr_assert_eq(cz_engine_open(&p.cfg, &p.wl, &p.m, &opts, NULL, &e, &err), CZ_EINVAL);
    cr_assert_null(e);
    cr_assert(strstr(err.msg, "'disaggregation'") && strstr(err.msg, "cuda"), "%s", err.msg);
    parsed_free(&p);
}
