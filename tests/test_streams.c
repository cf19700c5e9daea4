/* test_streams.c - steps sharing a GPU and its host thread (sim/cz_streams.h) on
 * hand-computed timelines: host phases share the host thread, kernels share the GPU under
 * the contention factor, boundaries move when a step starts or ends. */
#include <criterion/criterion.h>
#include <math.h>

#include "cz_streams.h"

#define EPS 1e-12

Test(streams, slowdown_of_k_corunning_steps)
{
    cz_streams s;
    cz_streams_init(&s, 3, 1.5);
    cr_assert_float_eq(cz_streams_slowdown(&s, 0), 1.0, EPS);
    cr_assert_float_eq(cz_streams_slowdown(&s, 1), 1.0, EPS);
    cr_assert_float_eq(cz_streams_slowdown(&s, 2), 1.5, EPS);
    cr_assert_float_eq(cz_streams_slowdown(&s, 3), 2.0, EPS);
    cz_streams_free(&s);
    /* c = 2: two co-running kernels time-share the GPU, no gain; c = 1: free overlap */
    cz_streams_init(&s, 2, 2.0);
    cr_assert_float_eq(cz_streams_slowdown(&s, 2), 2.0, EPS);
    cz_streams_free(&s);
    cz_streams_init(&s, 2, 1.0);
    cr_assert_float_eq(cz_streams_slowdown(&s, 2), 1.0, EPS);
    cz_streams_free(&s);
}

/* Contention 1.5. Stream 0 starts at 0 with 2 s on the host and 3 s of kernels; stream 1
 * at 0 with 6 s of kernels only.
 *   [0, 2]   stream 0 on the host, stream 1's kernels alone: 2 of its 6 s done;
 *   [2, 6.5] both kernels co-run at 1 / 1.5: stream 0's 3 s end at 2 + 4.5 = 6.5, stream 1
 *            does 3 more (1 left);
 *   [6.5, 7.5] stream 1 alone finishes. */
Test(streams, host_then_kernels_beside_a_corunning_step)
{
    cz_streams s;
    cz_streams_init(&s, 2, 1.5);
    cz_streams_start(&s, 0, 0.0, 2.0, 3.0);
    cz_streams_start(&s, 1, 0.0, 0.0, 6.0);
    cr_assert_eq(s.inflight, 2);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 2.0, EPS);
    cr_assert_float_eq(cz_streams_next_s(&s, 1), 6.0, EPS);
    uint64_t e = s.epoch;
    cr_assert(!cz_streams_boundary(&s, 0, 2.0), "stream 0 moves to its kernels");
    cr_assert_gt(s.epoch, e);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 6.5, EPS);
    cr_assert_float_eq(cz_streams_next_s(&s, 1), 8.0, EPS);
    cr_assert(cz_streams_boundary(&s, 0, 6.5));
    cr_assert_eq(s.inflight, 1);
    cr_assert_float_eq(cz_streams_next_s(&s, 1), 7.5, EPS);
    cr_assert(cz_streams_boundary(&s, 1, 7.5));
    cr_assert_eq(s.inflight, 0);
    cz_streams_free(&s);
}

/* Two host phases share the one host thread: 2 s each, started together, both end at 4;
 * then their 1 s of kernels co-run at contention 3 (each at 1 / 3): they would end at 7.
 * A third step starts at 5 on the host, which it has to itself (the others are on the
 * GPU), and reaches its 1 s of kernels at 5.5; the first two have 1 - 1.5 / 3 = 1/2 s left.
 * Three kernels co-run at 1 / 5: the first two end at 5.5 + 2.5 = 8, when the third has
 * done 0.5 s; alone, it ends at 8.5. */
Test(streams, host_thread_shared_then_three_kernels)
{
    cz_streams s;
    cz_streams_init(&s, 3, 3.0);
    cz_streams_start(&s, 0, 0.0, 2.0, 1.0);
    cz_streams_start(&s, 1, 0.0, 2.0, 1.0);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 4.0, EPS);
    cr_assert(!cz_streams_boundary(&s, 0, 4.0));
    cr_assert(!cz_streams_boundary(&s, 1, 4.0));
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 7.0, EPS);
    cz_streams_start(&s, 2, 5.0, 0.5, 1.0);
    cr_assert_float_eq(cz_streams_next_s(&s, 2), 5.5, EPS);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 7.0, EPS);
    cr_assert(!cz_streams_boundary(&s, 2, 5.5));
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 8.0, 1e-9);
    cr_assert_float_eq(cz_streams_next_s(&s, 1), 8.0, 1e-9);
    cr_assert_float_eq(cz_streams_next_s(&s, 2), 10.5, 1e-9);
    cr_assert(cz_streams_boundary(&s, 0, 8.0));
    cr_assert(cz_streams_boundary(&s, 1, 8.0));
    cr_assert_float_eq(cz_streams_next_s(&s, 2), 8.5, 1e-9);
    cr_assert(cz_streams_boundary(&s, 2, 8.5));
    cr_assert_eq(s.inflight, 0);
    cz_streams_free(&s);
}

/* A synchronous GPU runs one step at a time with no host part: its step ends after its
 * time alone, and a step of no work ends at once. */
Test(streams, one_step_alone_takes_its_time)
{
    cz_streams s;
    cz_streams_init(&s, 1, 2.0);
    cz_streams_start(&s, 0, 1.0, 0.0, 0.25);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 1.25, EPS);
    cr_assert(cz_streams_boundary(&s, 0, 1.25));
    cz_streams_start(&s, 0, 2.0, 0.0, 0.0);
    cr_assert_float_eq(cz_streams_next_s(&s, 0), 2.0, EPS);
    cr_assert(cz_streams_boundary(&s, 0, 2.0));
    cz_streams_free(&s);
}
