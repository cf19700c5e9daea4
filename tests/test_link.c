/* test_link.c - the host link: first-come-first-served per direction, latency plus
 * bytes / bandwidth per transfer, one queue for both directions when half duplex. */
#include <criterion/criterion.h>

#include "cz_link.h"

Test(link, full_duplex_directions_independent)
{
    cz_link l;
    cz_link_init(&l, 1e9, 1e-3, true);
    /* 1 GB takes 1 s + 1 ms; a second load queues behind the first; a store does not */
    {
        double t = cz_link_submit(&l, 0.0, 1e9, false);
        cr_assert_float_eq(t, 1.001, 1e-12);
    }
    {
        double t = cz_link_submit(&l, 0.5, 5e8, false);
        cr_assert_float_eq(t, 1.502, 1e-12);
    }
    {
        double t = cz_link_submit(&l, 0.5, 5e8, true);
        cr_assert_float_eq(t, 1.001, 1e-12);
    }
    /* an idle direction starts at once */
    {
        double t = cz_link_submit(&l, 10.0, 0, true);
        cr_assert_float_eq(t, 10.001, 1e-12);
    }
    cr_assert_float_eq(l.bytes[0], 1.5e9, 0);
}

Test(link, half_duplex_shares_one_queue)
{
    cz_link l;
    cz_link_init(&l, 2e9, 0.0, false);
    {
        double t = cz_link_submit(&l, 0.0, 2e9, false);
        cr_assert_float_eq(t, 1.0, 1e-12);
    }
    {
        double t = cz_link_submit(&l, 0.0, 1e9, true);
        cr_assert_float_eq(t, 1.5, 1e-12); /* waits for the load */
    }
    {
        double t = cz_link_submit(&l, 0.2, 1e9, false);
        cr_assert_float_eq(t, 2.0, 1e-12);
    }
}
