/* bench_evict.c - the time of one eviction decision of LiveServe's next-use eviction
 * (LiveServe, section 5.1, Table 1) at 1,000, 10,000 and 100,000 resident
 * sessions: the indexed heap (pick the farthest next use, then the session's key changes
 * as a playback report would) against the linear scan over the same candidates. Run by
 * `meson test -C build --benchmark -v`. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cz_evidx.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    const uint32_t sizes[] = {1000, 10000, 100000};
    printf("%10s %16s %16s %10s\n", "sessions", "heap (us)", "scan (us)", "speed-up");
    uint64_t check = 0;
    for (int k = 0; k < 3; k++) {
        uint32_t n = sizes[k];
        cz_evidx x;
        cz_evidx_init(&x);
        srand(1);
        for (uint32_t i = 0; i < n; i++)
            cz_evidx_set(&x, i, (double)rand() / RAND_MAX * 600.0);
        double t[2];
        for (int scan = 0; scan < 2; scan++) {
            uint32_t reps = scan ? (n >= 100000 ? 200 : 2000) : 200000;
            double t0 = now_s();
            for (uint32_t r = 0; r < reps; r++) {
                uint32_t v = scan ? cz_evidx_scan_top(&x) : cz_evidx_top(&x);
                check += v;
                /* the chosen session's blocks go and its key moves (a new report) */
                cz_evidx_set(&x, v, (double)(r % 600));
            }
            t[scan] = (now_s() - t0) / reps * 1e6;
        }
        printf("%10u %16.3f %16.3f %9.0fx\n", n, t[0], t[1], t[1] / t[0]);
        cz_evidx_free(&x);
    }
    return check == 0; /* keeps the loops */
}
