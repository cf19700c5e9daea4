/* cmd_trace.c - `cadenza trace info` and `cadenza trace convert`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_cli.h"
#include "cz_json.h"
#include "cz_out.h"
#include "cz_traces.h"

static const char trace_usage[] =
    "usage: cadenza trace info FILE [--format NAME] [--json] [reader options]\n"
    "       cadenza trace convert FILE -o OUT.jsonl [--format NAME] [reader options]\n"
    "\n"
    "info     prints requests, sessions, turns per session, duration, mean rate,\n"
    "         burstiness (index of dispersion of arrivals in 1 s bins) and token\n"
    "         percentiles; --json prints them as one JSON object.\n"
    "convert  writes the trace in cadenza's session JSONL format (docs/workload.md).\n"
    "\n"
    "  --format NAME        sharegpt, burstgpt, mooncake, azure or cadenza (default:\n"
    "                       detected from the file's content)\n"
    "  --multi-turn         ShareGPT: every exchange as one multi-turn session (default:\n"
    "                       the first exchange only, as vLLM does)\n"
    "  --no-filter          ShareGPT: keep what vLLM's length filters would prune\n"
    "  --output-tokens N    ShareGPT: output length for entries without a reply\n"
    "  -h, --help           this help\n";

int cz_cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        fputs(trace_usage, stderr);
        return CZ_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        fputs(trace_usage, stdout);
        return CZ_EXIT_OK;
    }
    bool info = strcmp(sub, "info") == 0, convert = strcmp(sub, "convert") == 0;
    if (!info && !convert)
        return cz_cli_usage_error("trace", "unknown subcommand '%s' (expected info or convert)",
                                  sub);
    const char *file = NULL, *out = NULL;
    bool as_json = false;
    cz_trace_opts opts = cz_trace_opts_default();
    cz_err err;
    cz_err_clear(&err);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(trace_usage, stdout);
            return CZ_EXIT_OK;
        } else if (strcmp(a, "--json") == 0 && info) {
            as_json = true;
        } else if (strcmp(a, "--multi-turn") == 0) {
            opts.sharegpt_multi_turn = true;
        } else if (strcmp(a, "--no-filter") == 0) {
            opts.sharegpt_filter = false;
        } else if (strcmp(a, "--format") == 0 || strcmp(a, "--output-tokens") == 0 ||
                   ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && convert)) {
            if (i + 1 >= argc)
                return cz_cli_usage_error("trace", "option '%s' needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--format") == 0) {
                if (cz_trace_format_parse(v, &opts.format, &err) != CZ_OK)
                    return cz_cli_usage_error("trace", "--format: %s", err.msg);
            } else if (strcmp(a, "--output-tokens") == 0) {
                char *end = NULL;
                unsigned long n = strtoul(v, &end, 10);
                if (!*v || *end || n == 0 || n > UINT32_MAX)
                    return cz_cli_usage_error("trace",
                                              "--output-tokens: expected a positive integer, "
                                              "got '%s'",
                                              v);
                opts.default_output_tokens = (uint32_t)n;
            } else {
                out = v;
            }
        } else if (a[0] == '-') {
            return cz_cli_usage_error("trace", "unknown option '%s' for '%s'", a, sub);
        } else if (!file) {
            file = a;
        } else {
            return cz_cli_usage_error("trace", "more than one input file given");
        }
    }
    if (!file)
        return cz_cli_usage_error("trace", "%s: missing the input FILE", sub);
    if (convert && !out)
        return cz_cli_usage_error("trace", "convert: missing -o OUT.jsonl");

    cz_workload wl;
    cz_workload_init(&wl);
    int rc = CZ_EXIT_OK;
    const char *tmp_out = NULL;
    cz_status st = convert ? cz_out_add("-o", out, &tmp_out, &err) : CZ_OK;
    if (st == CZ_OK && cz_file_check_input(file, &err) != CZ_OK)
        st = cz_err_prefix(&err, "trace argument: ");
    if (st == CZ_OK)
        st = cz_trace_read(file, &opts, &wl, &err);
    if (st == CZ_OK && convert)
        st = cz_trace_write_cadenza(&wl, tmp_out, &err);
    if (st == CZ_OK && convert)
        st = cz_out_commit(&err);
    cz_out_discard();
    if (st != CZ_OK) {
        rc = cz_cli_fail(&err);
    } else if (info) {
        cz_trace_info ti;
        cz_trace_info_compute(&wl, &ti);
        if (as_json) {
            cJSON *j = cz_trace_info_json(&ti);
            cJSON_AddStringToObject(j, "format", wl.source);
            char *text = cJSON_Print(j);
            puts(text);
            cJSON_free(text);
            cJSON_Delete(j);
        } else {
            printf("%s (%s)\n", file, wl.source);
            printf("  requests          %llu\n", (unsigned long long)ti.requests);
            printf("  sessions          %llu (turns per session: mean %.2f, max %llu)\n",
                   (unsigned long long)ti.sessions, ti.turns_mean,
                   (unsigned long long)ti.turns_max);
            if (ti.streams)
                printf("  streams           %llu\n", (unsigned long long)ti.streams);
            printf("  dropped (failed)  %llu\n", (unsigned long long)ti.dropped_failed);
            /* undefined without timestamps (ShareGPT) or with one arrival time */
            if (isnan(ti.duration_s) || isnan(ti.mean_rate_rps)) {
                printf("  duration          none (%s)\n",
                       wl.arrivals_given ? "one arrival time" : "the trace has no timestamps");
            } else {
                printf("  duration          %.1f s\n", ti.duration_s);
                printf("  mean rate         %.4f req/s\n", ti.mean_rate_rps);
            }
            if (!isnan(ti.burstiness_iod_1s))
                printf("  burstiness        %.3f (index of dispersion, 1 s bins)\n",
                       ti.burstiness_iod_1s);
            printf("  input tokens      mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f\n",
                   ti.input_tokens_mean, ti.input_tokens_p50, ti.input_tokens_p90,
                   ti.input_tokens_p99);
            printf("  output tokens     mean %.1f  p50 %.0f  p90 %.0f  p99 %.0f\n",
                   ti.output_tokens_mean, ti.output_tokens_p50, ti.output_tokens_p90,
                   ti.output_tokens_p99);
        }
    } else {
        printf("wrote %s: %u sessions, %u requests\n", out, wl.n_sessions, wl.n_turns);
    }
    cz_workload_free(&wl);
    return rc;
}
