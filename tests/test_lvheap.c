/* test_lvheap.c - ids bucketed by level, each level a heap (core/cz_lvheap.h): a hand case
 * and the structure against a scan over random moves. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "cz_lvheap.h"

Test(lvheap, levels_tops_and_walk)
{
    cz_lvheap h;
    cz_lvheap_init(&h, 6);
    cr_assert_eq(cz_lvheap_lo(&h), UINT32_MAX);
    cz_lvheap_set(&h, 4, 3, 0.5);
    cz_lvheap_set(&h, 1, 3, 0.5); /* equal key: the lower id first */
    cz_lvheap_set(&h, 2, 3, 0.7);
    cz_lvheap_set(&h, 5, 9, 0.1);
    cz_lvheap_set(&h, 0, 6, 0.0);
    cr_assert_eq(cz_lvheap_lo(&h), 3);
    cr_assert_eq(cz_lvheap_hi(&h), 9);
    cr_assert_eq(cz_lvheap_top(&h, 3), 1);
    cr_assert_eq(cz_lvheap_next(&h, 3), 6);
    cr_assert_eq(cz_lvheap_next(&h, 6), 9);
    cr_assert_eq(cz_lvheap_next(&h, 9), UINT32_MAX);
    cz_lvheap_set(&h, 1, 3, 0.9); /* a new key moves it down its level */
    cr_assert_eq(cz_lvheap_top(&h, 3), 4);
    cz_lvheap_set(&h, 5, 2, 0.1); /* the highest level empties: hi falls to 6 */
    cr_assert_eq(cz_lvheap_lo(&h), 2);
    cr_assert_eq(cz_lvheap_hi(&h), 6);
    cr_assert_eq(cz_lvheap_level(&h, 5), 2);
    cr_assert_eq(cz_lvheap_key(&h, 5), 0.1);
    cr_assert_eq(cz_lvheap_level(&h, 3), UINT32_MAX, "never set");
    cz_lvheap_free(&h);
}

Test(lvheap, matches_a_scan)
{
    enum { N = 50 };
    cz_lvheap h;
    cz_lvheap_init(&h, N);
    uint32_t lv[N];
    double key[N];
    for (uint32_t i = 0; i < N; i++)
        lv[i] = UINT32_MAX;
    srand(3);
    for (int it = 0; it < 20000; it++) {
        uint32_t id = (uint32_t)rand() % N;
        lv[id] = (uint32_t)rand() % (it < 10000 ? 5 : 40);
        key[id] = (double)(rand() % 6);
        cz_lvheap_set(&h, id, lv[id], key[id]);
        uint32_t lo = UINT32_MAX, hi = 0;
        for (uint32_t i = 0; i < N; i++)
            if (lv[i] != UINT32_MAX) {
                lo = lv[i] < lo ? lv[i] : lo;
                hi = lv[i] > hi ? lv[i] : hi;
            }
        cr_assert_eq(cz_lvheap_lo(&h), lo);
        cr_assert_eq(cz_lvheap_hi(&h), hi);
        /* every non-empty level in order, each with its least (key, id) on top */
        uint32_t l = lo;
        for (uint32_t want = lo; want <= hi; want++) {
            uint32_t best = UINT32_MAX;
            for (uint32_t i = 0; i < N; i++)
                if (lv[i] == want && (best == UINT32_MAX || key[i] < key[best]))
                    best = i;
            if (best == UINT32_MAX)
                continue;
            cr_assert_eq(l, want, "it %d", it);
            cr_assert_eq(cz_lvheap_top(&h, l), best, "it %d level %u", it, l);
            l = cz_lvheap_next(&h, l);
        }
        cr_assert_eq(l, UINT32_MAX);
    }
    cz_lvheap_free(&h);
}
