/* test_evidx.c - the eviction index (core/cz_evidx.h): hand cases, ties, and the heap
 * against the linear scan over random operations. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "cz_evidx.h"

Test(evidx, order_ties_updates)
{
    cz_evidx x;
    cz_evidx_init(&x);
    cr_assert_eq(cz_evidx_top(&x), UINT32_MAX);
    cz_evidx_set(&x, 5, 3.0);
    cz_evidx_set(&x, 2, 7.0);
    cz_evidx_set(&x, 9, 7.0); /* equal key, set later: after 2 */
    cz_evidx_set(&x, 300, -INFINITY);
    cr_assert_eq(cz_evidx_top(&x), 2);
    cz_evidx_set(&x, 5, 8.0); /* an update moves it up */
    cr_assert_eq(cz_evidx_top(&x), 5);
    cz_evidx_remove(&x, 5);
    cz_evidx_remove(&x, 5); /* absent: nothing */
    cr_assert_eq(cz_evidx_top(&x), 2);
    cz_evidx_remove(&x, 2);
    cr_assert_eq(cz_evidx_top(&x), 9);
    cz_evidx_remove(&x, 9);
    cr_assert_eq(cz_evidx_top(&x), 300);
    cr_assert_eq(cz_evidx_len(&x), 1);
    cr_assert(cz_evidx_has(&x, 300) && !cz_evidx_has(&x, 2) && !cz_evidx_has(&x, 100000));
    cz_evidx_free(&x);
}

Test(evidx, heap_matches_scan)
{
    cz_evidx x;
    cz_evidx_init(&x);
    srand(7);
    for (int i = 0; i < 20000; i++) {
        uint32_t id = (uint32_t)(rand() % 500);
        int op = rand() % 3;
        if (op < 2)
            cz_evidx_set(&x, id, (double)(rand() % 50)); /* many ties */
        else
            cz_evidx_remove(&x, id);
        cr_assert_eq(cz_evidx_top(&x), cz_evidx_scan_top(&x), "step %d", i);
    }
    cz_evidx_free(&x);
}
