/* test_jobq.c - the batching queue of the stages without KV (core/cz_jobq.h): FIFO batches
 * under the job and token caps, growth, cancellation, and batches of picked positions. */
#include <criterion/criterion.h>

#include "cz_jobq.h"

static void push_n(cz_jobq *q, uint32_t n, uint32_t tokens)
{
    for (uint32_t i = 0; i < n; i++) {
        cz_job j = {.owner = i % 3, .tokens = tokens, .tag = i};
        cz_jobq_push(q, &j);
    }
}

Test(jobq, fifo_under_caps_and_growth)
{
    cz_jobq q;
    cz_jobq_init(&q, 4, 100);
    push_n(&q, 100, 30); /* grows past the initial 64 */
    uint64_t t;
    /* three jobs of 30 fit 100 tokens, a fourth would not */
    cr_assert_eq(cz_jobq_schedule(&q, &t), 3);
    cr_assert_eq(t, 90);
    uint32_t n;
    const cz_job *b = cz_jobq_done(&q, &n);
    cr_assert(n == 3 && b[0].tag == 0 && b[2].tag == 2);
    cr_assert_eq(cz_jobq_len(&q), 97);
    /* a job above the token cap still runs alone */
    cz_jobq r;
    cz_jobq_init(&r, 4, 10);
    push_n(&r, 2, 50);
    cr_assert_eq(cz_jobq_schedule(&r, &t), 1);
    cr_assert_eq(t, 50);
    cz_jobq_free(&r);
    /* cancel drops an owner's queued jobs and keeps the others in order */
    cr_assert_eq(cz_jobq_cancel(&q, 0), 33); /* tags 3, 6, ..., 99 */
    cr_assert_eq(cz_jobq_len(&q), 64);
    cr_assert_eq(cz_jobq_peek(&q, 0)->tag, 4);
    cr_assert_eq(cz_jobq_peek(&q, 1)->tag, 5);
    cr_assert_eq(cz_jobq_peek(&q, 2)->tag, 7);
    cz_jobq_free(&q);
}

Test(jobq, picked_positions)
{
    cz_jobq q;
    cz_jobq_init(&q, 3, 1000);
    push_n(&q, 70, 10);
    uint64_t t;
    /* positions 5, 0, 69 in that order; the fourth pick exceeds max_batch */
    const uint32_t pos[] = {5, 0, 69, 1};
    cr_assert_eq(cz_jobq_schedule_picked(&q, pos, 4, &t), 3);
    cr_assert_eq(t, 30);
    uint32_t n;
    const cz_job *b = cz_jobq_done(&q, &n);
    cr_assert(n == 3 && b[0].tag == 5 && b[1].tag == 0 && b[2].tag == 69);
    /* the rest keep their order */
    cr_assert_eq(cz_jobq_len(&q), 67);
    const uint32_t want[] = {1, 2, 3, 4, 6, 7};
    for (uint32_t i = 0; i < 6; i++)
        cr_assert_eq(cz_jobq_peek(&q, i)->tag, want[i]);
    cr_assert_eq(cz_jobq_peek(&q, 66)->tag, 68);
    /* picks stop at the token cap (the first always fits) */
    cz_jobq r;
    cz_jobq_init(&r, 8, 25);
    push_n(&r, 4, 10);
    const uint32_t p2[] = {3, 2, 1};
    cr_assert_eq(cz_jobq_schedule_picked(&r, p2, 3, &t), 2);
    cr_assert_eq(t, 20);
    cz_jobq_done(&r, &n);
    cr_assert_eq(cz_jobq_len(&r), 2);
    cr_assert(cz_jobq_peek(&r, 0)->tag == 0 && cz_jobq_peek(&r, 1)->tag == 1);
    cz_jobq_free(&r);
    cz_jobq_free(&q);
}
