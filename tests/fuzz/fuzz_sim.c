/* fuzz_sim.c - libFuzzer harness for a short simulation: the input is parsed as an
 * experiment config (cz_json_parse, cz_config_parse) and, when its workload and its
 * servers are small enough to run in milliseconds, simulated by cz_sim_run and summarised.
 * A run that returns CZ_EINTERNAL (the simulator lost or stuck a request: a bug) aborts;
 * every other failure status is an expected rejection of bad input.
 *
 * Small enough: at most 8 sessions, 64 turns and 8 streams; at most 16,384 tokens of input
 * and output over every turn and frame; a stream lasts at most 20 frames and all streams
 * end within 64 of the shortest frame period; per stage at most 1,024 sequences, 1,024
 * tokens per KV block, 2^20 KV blocks and batches of 1,024 jobs. These bound the events
 * of a run, so its clock (sim.max_time_s) is left as the config sets it: a run cut by the
 * clock counts open requests as unfinished, while a run that drains its events must have
 * accounted for every request, which is the check that finds lost and stuck requests.
 * Half the mutations edit the parsed JSON (cz_fuzz_mutate_json), so most mutants stay
 * configs and reach the simulator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "fuzz_util.h"

#define CZ_FUZZ_SIM_SESSIONS 8
#define CZ_FUZZ_SIM_TURNS 64
#define CZ_FUZZ_SIM_STREAMS 8
#define CZ_FUZZ_SIM_TOKENS 16384.0
#define CZ_FUZZ_SIM_FRAMES 20.0
#define CZ_FUZZ_SIM_PERIODS 64.0
#define CZ_FUZZ_SIM_SEQS 1024
#define CZ_FUZZ_SIM_BLOCK_TOKENS 1024
#define CZ_FUZZ_SIM_KV_BLOCKS (1u << 20)
#define CZ_FUZZ_SIM_BATCH 1024

static bool small_workload(const cz_workload *w)
{
    if (w->n_sessions > CZ_FUZZ_SIM_SESSIONS || w->n_turns > CZ_FUZZ_SIM_TURNS ||
        w->n_streams > CZ_FUZZ_SIM_STREAMS)
        return false;
    double tokens = 0;
    for (uint32_t i = 0; i < w->n_turns; i++) {
        const cz_turn *t = &w->turns[i];
        tokens += (double)t->in_text_tokens + t->in_audio_tokens + t->in_image_tokens +
                  t->out_text_tokens + t->out_audio_tokens;
    }
    double min_period = INFINITY, end_s = 0;
    for (uint32_t j = 0; j < w->n_streams; j++) {
        const cz_stream *s = &w->streams[j];
        double frames = s->duration_s / s->frame_period_s;
        if (!(frames <= CZ_FUZZ_SIM_FRAMES))
            return false;
        tokens += (frames + 1) * ((double)s->tokens_in_per_frame + s->tokens_out_per_frame);
        if (s->frame_period_s < min_period)
            min_period = s->frame_period_s;
        if (s->start_s + s->duration_s > end_s)
            end_s = s->start_s + s->duration_s;
    }
    if (w->n_streams && !(end_s / min_period <= CZ_FUZZ_SIM_PERIODS))
        return false;
    return tokens <= CZ_FUZZ_SIM_TOKENS;
}

static bool small_servers(const cz_config *c)
{
    for (uint32_t p = 0; p < c->model.n_pipe; p++) {
        const cz_stage_place *pl = &c->place[p];
        if (pl->server.max_num_seqs > CZ_FUZZ_SIM_SEQS ||
            pl->server.block_tokens > CZ_FUZZ_SIM_BLOCK_TOKENS ||
            pl->server.kv_blocks > CZ_FUZZ_SIM_KV_BLOCKS || pl->max_batch > CZ_FUZZ_SIM_BATCH)
            return false;
    }
    return true;
}

static void simulate(const cz_config *cfg, cz_workload *wl)
{
    cz_metrics m;
    cz_metrics_init(&m, cfg->timeline_interval_s, wl->n_turns);
    cz_run_stats stats;
    memset(&stats, 0, sizeof stats);
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_sim_run(cfg, wl, &m, &stats, NULL, NULL, &err);
    if (st == CZ_EINTERNAL)
        cz_fuzz_fail("cz_sim_run returned CZ_EINTERNAL", err.msg);
    cz_fuzz_check_err("cz_sim_run", st, &err);
    if (st == CZ_OK) {
        cz_summary sum;
        cz_metrics_summarize(&m, &cfg->slo, &sum);
        cJSON *j = cz_summary_json(&sum);
        if (!j)
            cz_fuzz_fail("cz_summary_json", "returned NULL");
        cz_run_summary_json(cfg, &m, &stats, &sum, j);
        cJSON_Delete(j);
    }
    cz_metrics_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = cz_fuzz_text(data, size);
    cJSON *json = NULL;
    cz_err err;
    cz_err_clear(&err);
    if (cz_json_parse(text, "fuzz.json", &json, &err) == CZ_OK &&
        cz_fuzz_config_bounded(json, CZ_FUZZ_SIM_TURNS)) {
        cz_config cfg;
        cz_workload wl;
        cz_workload_init(&wl);
        if (cz_fuzz_config_parse(json, &cfg, &wl) == CZ_OK && small_workload(&wl) &&
            small_servers(&cfg))
            simulate(&cfg, &wl);
        cz_workload_free(&wl);
    }
    cJSON_Delete(json);
    free(text);
    return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return cz_fuzz_mutate_json(data, size, max_size, seed);
}
