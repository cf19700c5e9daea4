/* bench_sched.c - the time of one scheduling decision (a policy's select over the ready
 * set) at 1,000, 10,000 and 100,000 ready requests, for each ordering scheduler, and the
 * allocations it makes (counted by wrapping malloc, calloc and realloc at link time).
 * Target: at most 1 ms at 10,000. Run by `meson test -C build --benchmark -v`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_count.h"
#include "cz_policies.h"


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A ready set of n requests: a tenth waiting for admission, the rest decoding with audio
 * at the client in every state of playback (so every LiveServe class is populated). */
static void build(uint32_t n, cz_seq *seqs, cz_cand *tmpl)
{
    srand(42);
    for (uint32_t i = 0; i < n; i++) {
        cz_seq *q = &seqs[i];
        memset(q, 0, sizeof *q);
        bool wait = i % 10 == 0;
        q->state = wait ? CZ_SEQ_WAITING : CZ_SEQ_RUNNING;
        q->cls = (uint32_t)(rand() % 2);
        q->tokens_in = 1 + (uint32_t)(rand() % 500);
        q->generated = wait ? 0 : 1 + (uint32_t)(rand() % 400);
        q->budget = q->generated + 100;
        q->computed = wait ? 0 : q->tokens_in + q->generated - 1;
        q->blocks = (q->computed + 15) / 16;
        q->turn_ready_s = (double)(rand() % 1000) / 10.0;
        q->received_s = wait || rand() % 4 == 0 ? 0 : q->generated * 0.08;
        q->played_s = q->received_s * (double)(rand() % 100) / 100.0;
        q->report_s = 99.0;
        q->last_chunk_s = 2.0;
        q->last_token_s = 99.9;
        uint32_t need = q->tokens_in + q->generated - q->computed;
        tmpl[i] = (cz_cand){.seq = i, .need = need, .pos = i, .running = !wait,
                            .decode = need == 1};
    }
}

int main(void)
{
    static const uint32_t sizes[] = {1000, 10000, 100000};
    const cz_sched_ops *ops[] = {&cz_sched_liveserve, &cz_sched_voxserve, &cz_sched_bros,
                                 &cz_sched_fcfs_scan};
    cz_policy_params p = cz_policy_params_default();
    p.audio_s_per_token = 0.08;
    p.step_s[0] = 0.01;
    p.step_s[1] = 1e-5;
    p.step_s[2] = 1e-5;
    cz_seq *seqs = malloc(100000 * sizeof *seqs);
    cz_cand *tmpl = malloc(100000 * sizeof *tmpl), *c = malloc(100000 * sizeof *c);
    printf("%-10s %10s %14s %14s %12s\n", "scheduler", "ready", "decision_us", "per_req_ns",
           "allocations");
    int rc = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint32_t n = sizes[s];
        build(n, seqs, tmpl);
        cz_sched_ctx ctx = {.now_s = 100.0, .seqs = seqs, .token_budget = 8192,
                            .seq_cap = n, .running = n - n / 10, .kv_blocks = 4u * n * 40,
                            .kv_used = 2u * n * 40, .kv_available = 2u * n * 40,
                            .block_tokens = 16, .chunked_prefill = true};
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            cz_sched_ops op = *ops[o];
            op.state = &p;
            int reps = n >= 100000 ? 5 : n >= 10000 ? 30 : 200;
            double best = INFINITY;
            unsigned long allocs = 0;
            for (int r = 0; r < reps; r++) {
                memcpy(c, tmpl, n * sizeof *c);
                unsigned long a0 = cz_test_allocations();
                double t0 = now_s();
                op.select(op.state, &ctx, c, n);
                double dt = now_s() - t0;
                allocs += cz_test_allocations() - a0;
                if (dt < best)
                    best = dt;
            }
            printf("%-10s %10u %14.1f %14.1f %12lu\n", op.name, n, best * 1e6, best * 1e9 / n,
                   allocs);
            if (allocs)
                rc = 1;
        }
    }
    free(seqs);
    free(tmpl);
    free(c);
    return rc;
}
