/* test_kvindex.c - the router's index of cached blocks (core/cz_kvindex.h): a hand-built
 * fleet's longest cached prefixes, removal by tag, growth past the first table, and the
 * index against a plain list of (replica, hash) pairs over random adds and removals. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "cz_kvindex.h"

static void ok(const cz_kvindex *x)
{
    cz_err err;
    cz_err_clear(&err);
    cr_assert(cz_kvindex_check(x, &err), "%s", err.msg);
}

/* The candidate `rep` of a match, its length; 0 when absent. */
static uint32_t len_of(const uint32_t *reps, const uint32_t *lens, uint32_t m, uint32_t rep)
{
    for (uint32_t i = 0; i < m; i++)
        if (reps[i] == rep)
            return lens[i];
    return 0;
}

/* A request of blocks a, b, c, d on five replicas:
 *   r0 holds a b c d -> 4;   r1 holds a b . d -> 2 (d after a gap does not count);
 *   r2 holds . b c d -> not a candidate;   r3 holds a -> 1;   r4 holds a b c d but lies
 *   outside the range asked (replicas 0..3). */
Test(kvindex, longest_prefix_per_replica)
{
    cz_kvindex x;
    cz_kvindex_init(&x, 5);
    enum { A = 0x11, B = 0x22, C = 0x33, D = 0x44 };
    uint32_t tag_r0_c = 0;
    uint64_t req[4] = {A, B, C, D};
    for (int k = 0; k < 4; k++) {
        uint32_t t = cz_kvindex_add(&x, 0, req[k]);
        if (req[k] == C)
            tag_r0_c = t;
        cz_kvindex_add(&x, 4, req[k]);
    }
    cz_kvindex_add(&x, 1, A);
    cz_kvindex_add(&x, 1, B);
    cz_kvindex_add(&x, 1, D);
    cz_kvindex_add(&x, 2, B);
    cz_kvindex_add(&x, 2, C);
    cz_kvindex_add(&x, 2, D);
    cz_kvindex_add(&x, 3, A);
    ok(&x);
    uint32_t reps[5], lens[5];
    uint32_t m = cz_kvindex_match(&x, req, 4, 0, 4, reps, lens);
    cr_assert_eq(m, 3);
    cr_assert_eq(len_of(reps, lens, m, 0), 4);
    cr_assert_eq(len_of(reps, lens, m, 1), 2);
    cr_assert_eq(len_of(reps, lens, m, 2), 0);
    cr_assert_eq(len_of(reps, lens, m, 3), 1);
    /* r0 forgets c: its prefix stops at b */
    cz_kvindex_remove(&x, C, tag_r0_c);
    ok(&x);
    m = cz_kvindex_match(&x, req, 4, 0, 4, reps, lens);
    cr_assert_eq(len_of(reps, lens, m, 0), 2);
    /* a range that starts at replica 2: r2 lacks a, r3 and r4 hold it */
    m = cz_kvindex_match(&x, req, 4, 2, 3, reps, lens);
    cr_assert_eq(m, 2);
    cr_assert_eq(len_of(reps, lens, m, 3), 1);
    cr_assert_eq(len_of(reps, lens, m, 4), 4);
    cr_assert(cz_kvindex_has(&x, 2, B) && !cz_kvindex_has(&x, 2, A));
    cr_assert_eq(cz_kvindex_held(&x, 0), 3);
    cr_assert_eq(cz_kvindex_match(&x, req, 0, 0, 5, reps, lens), 0, "no blocks: nothing");
    cz_kvindex_free(&x);
}

/* The watcher a cache reports to adds and removes under its replica. */
Test(kvindex, watcher_reports_to_its_replica)
{
    cz_kvindex x;
    cz_kvindex_init(&x, 3);
    cz_pcache_watch w = cz_kvindex_watch(&x, 2);
    uint32_t t = w.cached(w.ctx, 77);
    cr_assert(cz_kvindex_has(&x, 2, 77) && !cz_kvindex_has(&x, 0, 77));
    w.forgotten(w.ctx, 77, t);
    cr_assert(!cz_kvindex_has(&x, 2, 77));
    cr_assert_eq(cz_kvindex_held(&x, 2), 0);
    ok(&x);
    cz_kvindex_free(&x);
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random adds and removals (hashes from a small pool, so lists share and empty, and some
 * collide in the table's low bits) against a list of the pairs held: membership, counts,
 * and every request's prefixes by brute force; the table grows past thousands of hashes. */
Test(kvindex, matches_a_plain_list)
{
    enum { R = 7, POOL = 3000, MAXP = 12000 };
    cz_kvindex x;
    cz_kvindex_init(&x, R);
    static uint32_t prep[MAXP], ptag[MAXP];
    static uint64_t phash[MAXP];
    static uint8_t held[R][POOL];
    uint32_t np = 0;
    srand(5);
    for (int it = 0; it < 40000; it++) {
        if (np < MAXP && (rand() % 3 != 0 || np == 0)) {
            uint32_t r = (uint32_t)rand() % R, h = (uint32_t)rand() % (it < 20000 ? 40 : POOL);
            if (held[r][h])
                continue;
            held[r][h] = 1;
            prep[np] = r;
            phash[np] = it % 2 ? mix(h + 1) : ((uint64_t)(h + 1) << 32); /* low bits equal */
            ptag[np] = cz_kvindex_add(&x, r, phash[np]);
            np++;
        } else {
            uint32_t k = (uint32_t)rand() % np;
            uint32_t h = 0;
            while (mix(h + 1) != phash[k] && ((uint64_t)(h + 1) << 32) != phash[k])
                h++;
            held[prep[k]][h] = 0;
            cz_kvindex_remove(&x, phash[k], ptag[k]);
            np--;
            prep[k] = prep[np];
            phash[k] = phash[np];
            ptag[k] = ptag[np];
        }
        if (it % 997 == 0) {
            ok(&x);
            for (uint32_t k = 0; k < np; k++)
                cr_assert(cz_kvindex_has(&x, prep[k], phash[k]));
            uint32_t per[R] = {0};
            for (uint32_t k = 0; k < np; k++)
                per[prep[k]]++;
            for (uint32_t r = 0; r < R; r++)
                cr_assert_eq(cz_kvindex_held(&x, r), per[r]);
            /* a request of the first pairs' hashes: each replica's prefix by brute force */
            uint64_t req[6];
            for (int j = 0; j < 6; j++)
                req[j] = np ? phash[(uint32_t)rand() % np] : 1;
            uint32_t reps[R], lens[R];
            uint32_t m = cz_kvindex_match(&x, req, 6, 0, R, reps, lens);
            for (uint32_t r = 0; r < R; r++) {
                uint32_t want = 0;
                while (want < 6 && cz_kvindex_has(&x, r, req[want]))
                    want++;
                cr_assert_eq(len_of(reps, lens, m, r), want, "it %d replica %u", it, r);
            }
        }
    }
    cz_kvindex_free(&x);
}
