/* test_evq.c - the event queue orders by time, and ties by insertion. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "cz_evq.h"

Test(evq, ties_fire_in_insertion_order)
{
    cz_evq q;
    cz_evq_init(&q, 2);
    cz_evq_push(&q, 1.0, 0, 10, 0);
    cz_evq_push(&q, 0.5, 0, 20, 0);
    cz_evq_push(&q, 1.0, 0, 11, 0);
    cz_evq_push(&q, 1.0, 0, 12, 0);
    cz_evq_push(&q, 0.25, 0, 30, 0);
    unsigned want[] = {30, 20, 10, 11, 12};
    cz_event e;
    for (int i = 0; i < 5; i++) {
        cr_assert(cz_evq_pop(&q, &e));
        cr_assert_eq(e.arg, want[i]);
    }
    cr_assert(!cz_evq_pop(&q, &e));
    cz_evq_free(&q);
}

Test(evq, random_order_is_sorted)
{
    cz_evq q;
    cz_evq_init(&q, 16);
    srand(7);
    for (unsigned i = 0; i < 10000; i++)
        cz_evq_push(&q, (double)(rand() % 100), 0, i, 0);
    cz_event prev = {-1, 0, 0, 0, 0}, e;
    unsigned n = 0;
    while (cz_evq_pop(&q, &e)) {
        cr_assert(e.t_s > prev.t_s || (e.t_s == prev.t_s && e.seq > prev.seq));
        prev = e;
        n++;
    }
    cr_assert_eq(n, 10000);
    cz_evq_free(&q);
}
