/* test_prefix.c - automatic prefix caching (vLLM's APC, docs/serving-core.md): the cache of
 * hashed blocks on its own (table, free queue, eviction order), then the serving core on
 * scripted states computed by hand: shared prefixes counted once in the pool, hits in whole
 * blocks within ctx - 1 tokens, freed blocks hit again, LRU eviction of freed cached
 * blocks that forgets their hashes, a barge-in's cut, and the counters under preemption. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cz_kvindex.h"
#include "cz_pcache.h"
#include "cz_policies.h"
#include "cz_server.h"

/* ---- the cache alone ---- */

/* Under the sanitizers (CZ_TEST_SANITIZED=1, tests/meson.build) the randomized tests draw
 * fewer cases. */
static bool sanitized(void)
{
    const char *v = getenv("CZ_TEST_SANITIZED");
    return v && v[0] == '1';
}

static void pc_ok(const cz_pcache *c)
{
    cz_err err;
    cz_err_clear(&err);
    cr_assert(cz_pcache_check(c, &err), "%s", err.msg);
}

Test(pcache, free_queue_is_lru_and_eviction_forgets)
{
    cz_pcache c;
    cz_pcache_init(&c, 4);
    uint32_t a = cz_pcache_insert(&c, 101), b = cz_pcache_insert(&c, 202);
    uint32_t d = cz_pcache_insert(&c, 303);
    cr_assert_eq(cz_pcache_find(&c, 202), b);
    cr_assert_eq(cz_pcache_find(&c, 404), CZ_PCACHE_NONE);
    /* a second holder, then every holder gone: b, then a, then d queue in that order */
    cr_assert(!cz_pcache_hold(&c, a));
    cr_assert(cz_pcache_release(&c, b));
    cr_assert(!cz_pcache_release(&c, a));
    cr_assert(cz_pcache_release(&c, a));
    cr_assert(cz_pcache_release(&c, d));
    cr_assert_eq(c.n_free, 3);
    pc_ok(&c);
    /* a hit takes a out of the middle of the queue; it comes back at the tail */
    cr_assert(cz_pcache_hold(&c, a));
    cr_assert(cz_pcache_release(&c, a));
    cr_assert_eq(cz_pcache_evict(&c), b); /* least recently freed first */
    cr_assert_eq(cz_pcache_find(&c, 202), CZ_PCACHE_NONE);
    cr_assert_eq(cz_pcache_evict(&c), d);
    cr_assert_eq(cz_pcache_evict(&c), a);
    cr_assert_eq(c.n_live, 0);
    pc_ok(&c);
    cz_pcache_free(&c);
}

Test(pcache, colliding_hashes_survive_deletion)
{
    /* every hash below starts probing at slot 0 (low 32 bits 0, high bits multiples of
     * 2^8 beyond the 16-slot mask): deleting from the middle of the run must keep the
     * others findable (backward-shift deletion) */
    cz_pcache c;
    cz_pcache_init(&c, 8);
    uint64_t h[6];
    uint32_t e[6];
    for (int i = 0; i < 6; i++) {
        h[i] = (uint64_t)(i + 1) << 40;
        e[i] = cz_pcache_insert(&c, h[i]);
    }
    cz_pcache_forget(&c, e[1]);
    cz_pcache_forget(&c, e[3]);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(cz_pcache_find(&c, h[i]), i == 1 || i == 3 ? CZ_PCACHE_NONE : e[i]);
    pc_ok(&c);
    uint32_t again = cz_pcache_insert(&c, h[3]);
    cr_assert_eq(cz_pcache_find(&c, h[3]), again);
    pc_ok(&c);
    cz_pcache_free(&c);
}

/* ---- the serving core ---- */

static cz_server_config apc_cfg(uint32_t blocks)
{
    cz_server_config c = cz_server_config_default();
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 64;
    c.block_tokens = 4;
    c.kv_blocks = blocks;
    c.prefix_caching = true;
    return c;
}

static void check(const cz_server *s)
{
    cz_err err;
    cz_err_clear(&err);
    cr_assert(cz_server_check(s, &err), "%s", err.msg);
}

static void done(cz_server *s, double t, uint32_t expect_turns_done)
{
    cz_step_events ev;
    cz_server_on_batch_done(s, t, &ev);
    cr_assert_eq(ev.n_turn_done, expect_turns_done);
    check(s);
}

static void sched(cz_server *s, double t, cz_batch *b)
{
    cr_assert(cz_server_schedule(s, t, b));
    check(s);
}

/* Opens a sequence and starts a complete turn whose input the trace names with `n` ids of
 * `hb` tokens each (ids NULL: no hashes); returns the sequence. */
static uint32_t hreq(cz_server *s, double t, uint32_t in, uint32_t out, uint64_t session,
                     const uint32_t *ids, uint32_t n, uint32_t hb)
{
    uint32_t q = cz_server_seq_open(s, session, 0, false);
    cz_turn_hashes h = {ids, n, hb};
    cz_server_turn_hashed(s, t, q, 0, 0, in, out, 0, true, ids ? &h : NULL);
    return q;
}

static cz_prefix_stats stats(const cz_server *s)
{
    cz_prefix_stats st;
    cz_server_prefix_stats(s, &st);
    return st;
}

/* Every record's outcome as the driver would record it, then the stage's summary. */
static void stage_summary(cz_metrics *m, cz_stage_summary *out)
{
    m->acct.requests = m->n_req;
    for (uint64_t i = 0; i < m->n_req; i++)
        cz_metrics_add_turn(m, &(cz_turn_record){.session = m->req[i].session, .req = i,
                                                 .turn = m->req[i].turn,
                                                 .outcome = m->req[i].outcome});
    cz_metrics_finish(m);
    cz_err err;
    cr_assert_eq(cz_metrics_check(m, &err), CZ_OK, "%s", err.msg);
    cz_stage_summarize(m, 0, out);
}

Test(prefix, shared_prefix_counts_once_and_hits_whole_blocks)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(16);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {7, 8}; /* 8-token trace blocks: tokens [0, 16) named */

    uint32_t a = hreq(s, 0.0, 18, 2, 0, ids, 2, 8);
    sched(s, 0.0, &b);
    cr_assert_eq(b.items[0].tokens, 18);
    cr_assert_eq(cz_server_kv_used(s), 5);
    cr_assert_eq(stats(s).cached_blocks, 4); /* the 4 full blocks the trace names */

    uint32_t bb = hreq(s, 0.5, 18, 2, 1, ids, 2, 8);
    done(s, 1.0, 0);
    /* B finds A's 4 blocks (16 tokens, within 18 - 1) and computes its last 2 tokens in a
     * block of its own; the shared blocks count once: 5 + 1 */
    sched(s, 1.0, &b);
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(b.n_items, 1);
    cr_assert_eq(b.items[0].seq, bb);
    cr_assert_eq(b.items[0].tokens, 2);
    cr_assert_eq(b.items[0].ctx_before, 16);
    cr_assert_eq(cz_server_kv_used(s), 6);
    cr_assert_eq(m.req[cz_server_seq(s, bb)->turn_rec].cached_tokens, 16);
    cr_assert_eq(m.req[cz_server_seq(s, a)->turn_rec].cached_tokens, 0);
    cz_prefix_stats st = stats(s);
    cr_assert_eq(st.lookups, 2);
    cr_assert_eq(st.queries, 36);
    cr_assert_eq(st.hits, 16);
    done(s, 1.5, 1); /* A's second token ends its turn */

    /* A leaves: the blocks B still holds stay in use; only A's own block is freed */
    cz_server_seq_close(s, a);
    check(s);
    cr_assert_eq(cz_server_kv_used(s), 5);
    cr_assert_eq(stats(s).free_cached_blocks, 0);
    sched(s, 1.5, &b);
    done(s, 2.0, 1);
    /* B leaves too: the 4 cached blocks wait in the free queue, hittable; nothing is used */
    cz_server_seq_close(s, bb);
    check(s);
    cr_assert_eq(cz_server_kv_used(s), 0);
    cr_assert_eq(stats(s).free_cached_blocks, 4);
    cr_assert_eq(stats(s).cached_blocks, 4);

    cz_stage_summary ss;
    stage_summary(&m, &ss);
    cr_assert(ss.prefix_caching);
    cr_assert_eq(ss.pc_queries, 36);
    cr_assert_eq(ss.pc_hits, 16);
    cr_assert_float_eq(ss.pc_hit_rate, 16.0 / 36.0, 1e-12);
    cr_assert_eq(ss.prefill_tokens_saved, 16);
    cJSON *j = cz_stage_summary_json(&ss, "llm");
    cr_assert_float_eq(cJSON_GetObjectItem(j, "prefix_cache_hit_rate")->valuedouble, 16.0 / 36.0,
                       1e-12);
    cr_assert_eq(cJSON_GetObjectItem(j, "prefill_tokens_saved")->valuedouble, 16.0);
    cJSON_Delete(j);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, off_shares_nothing_and_reports_nothing)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(16);
    cfg.prefix_caching = false;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {7, 8};
    hreq(s, 0.0, 18, 1, 0, ids, 2, 8);
    hreq(s, 0.0, 18, 1, 1, ids, 2, 8);
    sched(s, 0.0, &b);
    cr_assert_eq(b.n_items, 2);
    cr_assert_eq(b.items[1].tokens, 18);
    cr_assert_eq(cz_server_kv_used(s), 10);
    done(s, 1.0, 2);
    cr_assert_eq(stats(s).lookups, 0);
    cz_stage_summary ss;
    stage_summary(&m, &ss);
    cr_assert(!ss.prefix_caching);
    cJSON *j = cz_stage_summary_json(&ss, "llm");
    cr_assert_null(cJSON_GetObjectItem(j, "prefix_cache_hit_rate"));
    cJSON_Delete(j);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, full_hit_still_computes)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(16);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {1, 2, 3, 4, 5}; /* 4-token trace blocks */

    uint32_t a = hreq(s, 0.0, 17, 1, 0, ids, 5, 4);
    sched(s, 0.0, &b);
    done(s, 1.0, 1);
    cz_server_seq_close(s, a);
    cr_assert_eq(stats(s).free_cached_blocks, 4);

    /* the same 17 tokens: all 4 full blocks hit, the one token past them is computed */
    uint32_t bb = hreq(s, 1.0, 17, 1, 1, ids, 5, 4);
    sched(s, 1.0, &b);
    cr_assert_eq(b.items[0].tokens, 1);
    cr_assert_eq(b.items[0].ctx_before, 16);
    cr_assert_eq(cz_server_kv_used(s), 5);
    cr_assert_eq(stats(s).free_cached_blocks, 0);
    cr_assert_eq(m.req[cz_server_seq(s, bb)->turn_rec].cached_tokens, 16);
    done(s, 2.0, 1);
    cz_server_seq_close(s, bb);

    /* 16 tokens, all cached: the hit stops at ctx - 1 = 15 tokens, 3 whole blocks, and the
     * last block is computed again (vLLM's max_cache_hit_length = num_tokens - 1) */
    uint32_t c = hreq(s, 2.0, 16, 1, 2, ids, 4, 4);
    sched(s, 2.0, &b);
    cr_assert_eq(b.items[0].tokens, 4);
    cr_assert_eq(b.items[0].ctx_before, 12);
    cr_assert_eq(m.req[cz_server_seq(s, c)->turn_rec].cached_tokens, 12);
    done(s, 3.0, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, freed_blocks_are_hit_again)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(8);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {5};

    uint32_t a = hreq(s, 0.0, 8, 1, 0, ids, 1, 8);
    sched(s, 0.0, &b);
    done(s, 1.0, 1);
    cz_server_seq_close(s, a); /* finished: its 2 blocks are free but still cached */
    cr_assert_eq(cz_server_kv_used(s), 0);
    cr_assert_eq(stats(s).free_cached_blocks, 2);

    uint32_t bb = hreq(s, 1.0, 9, 1, 1, ids, 1, 8);
    sched(s, 1.0, &b);
    /* both come out of the free queue into use, beside B's own block for its 9th token */
    cr_assert_eq(b.items[0].tokens, 1);
    cr_assert_eq(stats(s).free_cached_blocks, 0);
    cr_assert_eq(cz_server_kv_used(s), 3);
    cr_assert_eq(m.req[cz_server_seq(s, bb)->turn_rec].cached_tokens, 8);
    cr_assert_eq(stats(s).evictions, 0);
    done(s, 2.0, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, lru_eviction_of_freed_blocks)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(6);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ida[] = {10}, idb[] = {20};
    /* A, B and C (no hashes: its own) each fill 2 blocks and leave in that order: the free
     * queue holds A1 A0 B1 B0 C1 C0 (each sequence's tail first, vLLM's reverse free) */
    uint32_t q = hreq(s, 0.0, 8, 1, 0, ida, 1, 8);
    sched(s, 0.0, &b);
    done(s, 0.5, 1);
    cz_server_seq_close(s, q);
    q = hreq(s, 1.0, 8, 1, 1, idb, 1, 8);
    sched(s, 1.0, &b);
    done(s, 1.5, 1);
    cz_server_seq_close(s, q);
    q = hreq(s, 2.0, 8, 1, 2, NULL, 0, 0);
    sched(s, 2.0, &b);
    done(s, 2.5, 1);
    cz_server_seq_close(s, q);
    cr_assert_eq(stats(s).free_cached_blocks, 6);
    cr_assert_eq(stats(s).evictions, 0);

    /* D needs 3 blocks and no block was never used: A1, A0 and B1 are evicted */
    uint32_t d = hreq(s, 3.0, 12, 1, 3, NULL, 0, 0);
    sched(s, 3.0, &b);
    cr_assert_eq(stats(s).evictions, 3);
    done(s, 3.5, 1); /* D idles on its 3 blocks */

    /* B's prompt again: B0 is hit, B1 is gone (the run of hits stops there) */
    uint32_t e = hreq(s, 4.0, 9, 1, 4, idb, 1, 8);
    sched(s, 4.0, &b);
    cr_assert_eq(b.items[0].tokens, 5);
    cr_assert_eq(b.items[0].ctx_before, 4);
    cr_assert_eq(m.req[cz_server_seq(s, e)->turn_rec].cached_tokens, 4);
    cr_assert_eq(stats(s).evictions, 5); /* its 2 new blocks took C1 and C0 */
    done(s, 4.5, 1);
    cz_server_seq_close(s, e);

    /* A's prompt again: its hashes were forgotten, nothing is hit */
    uint32_t f = hreq(s, 5.0, 9, 1, 5, ida, 1, 8);
    sched(s, 5.0, &b);
    cr_assert_eq(b.items[0].tokens, 9);
    cr_assert_eq(m.req[cz_server_seq(s, f)->turn_rec].cached_tokens, 0);
    (void)d;
    done(s, 5.5, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, pressure_forgets_hashes)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(4);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {5};
    uint32_t a = hreq(s, 0.0, 8, 1, 0, ids, 1, 8);
    sched(s, 0.0, &b);
    done(s, 0.5, 1);
    cz_server_seq_close(s, a);
    cr_assert_eq(stats(s).cached_blocks, 2);

    /* B takes the whole pool: A's two cached blocks are evicted, their hashes forgotten */
    uint32_t bb = hreq(s, 1.0, 15, 1, 1, NULL, 0, 0);
    sched(s, 1.0, &b);
    cr_assert_eq(stats(s).evictions, 2);
    cr_assert_eq(stats(s).cached_blocks, 3); /* B's own 3 full blocks */
    done(s, 1.5, 1);
    cz_server_seq_close(s, bb);

    uint32_t c = hreq(s, 2.0, 9, 1, 2, ids, 1, 8);
    sched(s, 2.0, &b);
    cr_assert_eq(b.items[0].tokens, 9);
    cr_assert_eq(m.req[cz_server_seq(s, c)->turn_rec].cached_tokens, 0);
    cr_assert_eq(stats(s).evictions, 4); /* B's tail blocks went first */
    done(s, 2.5, 1);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* A router's index watching the server as replica 0 (cz_server_watch_cache). */
static bool index_has(void *ctx, uint64_t hash)
{
    return cz_kvindex_has(ctx, 0, hash);
}

/* The index holds exactly the server's published blocks. */
static void index_ok(const cz_server *s, cz_kvindex *x)
{
    cz_err err;
    cz_err_clear(&err);
    uint32_t n = 0;
    cr_assert(cz_server_check_published(s, index_has, x, &n, &err), "%s", err.msg);
    cr_assert_eq(n, cz_kvindex_held(x, 0));
    cr_assert(cz_kvindex_check(x, &err), "%s", err.msg);
}

/* The longest prefix of a prompt of `in` tokens named by `ids` (8-token trace blocks) that
 * the index finds on replica 0, hashing it as a router does (cz_turn_block_hashes). */
static uint32_t index_match(cz_kvindex *x, uint32_t in, const uint32_t *ids, uint32_t n)
{
    cz_turn_hashes h = {ids, n, 8};
    uint64_t hash[16];
    uint32_t nb = cz_turn_block_hashes(4, in, &h, hash, 16);
    cr_assert_eq(nb, cz_turn_block_count(4, in, &h));
    uint32_t rep, len;
    return cz_kvindex_match(x, hash, nb, 0, 1, &rep, &len) ? len : 0;
}

/* The blocks a trace names are announced to a watcher when cached and when evicted, under
 * the hashes a router computes for the same ids; a sequence's own blocks (its output, a
 * prompt without hashes) are not. pressure_forgets_hashes's steps: A's 2 trace blocks are
 * cached, stay cached after A closes, are evicted by B's prompt (3 blocks of its own, not
 * announced), and come back with C. */
Test(prefix, trace_blocks_are_announced_to_a_watcher)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(4);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_kvindex x;
    cz_kvindex_init(&x, 1);
    cz_pcache_watch w = cz_kvindex_watch(&x, 0);
    cz_server_watch_cache(s, &w);
    cz_batch b;
    static const uint32_t ids[] = {5}, other[] = {6};
    uint32_t a = hreq(s, 0.0, 8, 1, 0, ids, 1, 8);
    sched(s, 0.0, &b);
    cr_assert_eq(cz_kvindex_held(&x, 0), 2, "A's 2 trace blocks, cached as scheduled");
    index_ok(s, &x);
    done(s, 0.5, 1);
    uint32_t held;
    cr_assert_eq(cz_server_seq_cached_blocks(s, a, &held), 2, "its computed blocks");
    cr_assert_eq(held, 2, "idle, it still holds them");
    cr_assert_eq(index_match(&x, 8, ids, 1), 2);
    cr_assert_eq(index_match(&x, 7, ids, 1), 1, "7 tokens: one full block");
    cr_assert_eq(index_match(&x, 8, other, 1), 0);
    cz_turn_hashes th = {ids, 1, 8};
    uint64_t hash[2];
    cr_assert_eq(cz_turn_block_hashes(4, 8, &th, hash, 2), 2);
    cr_assert_eq(cz_server_held_prefix(s, hash, 2), 2, "in use by A");
    cz_server_seq_close(s, a);
    cr_assert_eq(cz_kvindex_held(&x, 0), 2, "freed but still cached");
    cr_assert_eq(cz_server_held_prefix(s, hash, 2), 0, "cached, in use by none");
    index_ok(s, &x);

    uint32_t bb = hreq(s, 1.0, 15, 1, 1, NULL, 0, 0);
    sched(s, 1.0, &b);
    cr_assert_eq(stats(s).cached_blocks, 3);
    cr_assert_eq(cz_kvindex_held(&x, 0), 0, "evicted; B's own blocks are not announced");
    index_ok(s, &x);
    done(s, 1.5, 1);
    cz_server_seq_close(s, bb);

    uint32_t c = hreq(s, 2.0, 9, 1, 2, ids, 1, 8);
    sched(s, 2.0, &b);
    cr_assert_eq(cz_kvindex_held(&x, 0), 2);
    index_ok(s, &x);
    done(s, 2.5, 1);
    cr_assert_eq(index_match(&x, 8, ids, 1), 2);
    cr_assert_eq(cz_server_seq_cached_blocks(s, c, &held), 2, "9 computed tokens: 2 full blocks");
    cz_server_free(s);
    cz_kvindex_free(&x);
    cz_metrics_free(&m);
}

/* Without prefix caching a watcher hears nothing and no context counts as cached. */
Test(prefix, off_announces_nothing)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(8);
    cfg.prefix_caching = false;
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_kvindex x;
    cz_kvindex_init(&x, 1);
    cz_pcache_watch w = cz_kvindex_watch(&x, 0);
    cz_server_watch_cache(s, &w);
    cz_batch b;
    static const uint32_t ids[] = {5};
    uint32_t a = hreq(s, 0.0, 8, 1, 0, ids, 1, 8);
    sched(s, 0.0, &b);
    done(s, 0.5, 1);
    cr_assert_eq(cz_kvindex_held(&x, 0), 0);
    uint32_t held;
    cr_assert_eq(cz_server_seq_cached_blocks(s, a, &held), 0);
    cr_assert_eq(held, 0);
    cz_server_free(s);
    cz_kvindex_free(&x);
    cz_metrics_free(&m);
}

Test(prefix, a_session_hits_its_own_history_up_to_a_cut)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(8);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    uint32_t a = hreq(s, 0.0, 6, 8, 0, NULL, 0, 0);
    sched(s, 0.0, &b);
    done(s, 0.5, 0);
    for (int k = 1; k < 8; k++) {
        sched(s, 0.5 * k, &b);
        done(s, 0.5 * (k + 1), k == 7 ? 1 : 0);
    }
    /* 14 tokens of context, 13 computed: 3 full blocks cached */
    cr_assert_eq(stats(s).cached_blocks, 3);
    /* the user heard 3 tokens: the context is cut to 9, so block 2 (tokens 8..11) would
     * take new tokens: it stops being cached */
    cz_server_abort(s, 4.5, a, 3);
    check(s);
    cr_assert_eq(stats(s).cached_blocks, 2);
    cr_assert_eq(cz_server_seq(s, a)->blocks, 3);

    /* another session's 6 blocks push A's idle KV out; its 2 cached blocks stay cached */
    uint32_t bb = hreq(s, 5.0, 24, 1, 1, NULL, 0, 0);
    sched(s, 5.0, &b);
    cr_assert_eq(cz_server_seq(s, a)->blocks, 0);
    cr_assert_eq(stats(s).free_cached_blocks, 2);
    done(s, 5.5, 1);

    /* A's next turn: 9 + 4 tokens; its first 8 (2 blocks) are hit, block 2 is new */
    cz_server_turn(s, 6.0, a, 1, 0, 4, 1, 0, true);
    sched(s, 6.0, &b);
    cr_assert_eq(b.items[0].seq, a);
    cr_assert_eq(b.items[0].ctx_before, 8);
    cr_assert_eq(b.items[0].tokens, 5);
    cr_assert_eq(m.req[cz_server_seq(s, a)->turn_rec].cached_tokens, 8);
    done(s, 6.5, 1);
    (void)bb;
    cz_server_free(s);
    cz_metrics_free(&m);
}

Test(prefix, preemption_counts_apart)
{
    cz_metrics m;
    cz_metrics_init(&m, 0.0, 0);
    cz_server_config cfg = apc_cfg(5);
    cz_server *s = cz_server_create(&cfg, &cz_sched_fcfs, &m, 0);
    cz_batch b;
    static const uint32_t ids[] = {1};
    uint32_t a = hreq(s, 0.0, 8, 6, 0, ids, 1, 8);
    uint32_t bb = hreq(s, 0.0, 8, 6, 1, ids, 1, 8);
    /* one step: A's blocks are cached as it is scheduled, so B, admitted after it in the
     * same step, hits block 0 (its hit stops at 7 tokens: 1 block) and computes 4 tokens */
    sched(s, 0.0, &b);
    cr_assert_eq(b.n_items, 2);
    cr_assert_eq(b.items[1].seq, bb);
    cr_assert_eq(b.items[1].tokens, 4);
    cr_assert_eq(b.items[1].ctx_before, 4);
    cr_assert_eq(cz_server_kv_used(s), 3);
    done(s, 1.0, 0);
    /* decodes: at context 8 both open block 2 (pool 5 full), at context 12 both need block
     * 3 and B, admitted last, is preempted */
    for (int k = 1; k <= 4; k++) {
        sched(s, k, &b);
        cr_assert_eq(b.decode_seqs, 2);
        done(s, k + 1, 0);
    }
    cr_assert_eq(cz_server_kv_used(s), 5);
    sched(s, 5.0, &b);
    cr_assert_eq(b.decode_seqs, 1);
    cr_assert_eq(cz_server_waiting(s), 1);
    cr_assert_eq(m.req[cz_server_seq(s, bb)->turn_rec].preemptions, 1);
    cr_assert_eq(stats(s).free_cached_blocks, 1); /* B's block 2, its own, cached */
    done(s, 6.0, 1);                              /* A's sixth token ends its turn */

    /* B again: 13 tokens; blocks 0 and 1 (A's) and its own block 2 are hit, 1 token is
     * computed; A's idle KV is evicted for it */
    sched(s, 6.0, &b);
    cr_assert_eq(b.items[0].seq, bb);
    cr_assert_eq(b.items[0].ctx_before, 12);
    cr_assert_eq(b.items[0].tokens, 1);
    cr_assert_eq(cz_server_seq(s, a)->blocks, 0);
    done(s, 7.0, 1);

    cz_prefix_stats st = stats(s);
    cr_assert_eq(st.lookups, 2);
    cr_assert_eq(st.queries, 16);
    cr_assert_eq(st.hits, 4);
    cr_assert_eq(st.preempted_lookups, 1);
    cr_assert_eq(st.preempted_queries, 13);
    cr_assert_eq(st.preempted_hits, 12);
    cz_stage_summary ss;
    stage_summary(&m, &ss);
    cr_assert_eq(m.preemptions, 1);
    cr_assert_float_eq(ss.pc_hit_rate, 0.25, 1e-12);
    cr_assert_eq(ss.pc_preempted_hits, 12);
    cr_assert_eq(ss.prefill_tokens_saved, 16);
    cr_assert_eq(m.req[1].cached_tokens, 4); /* its first admission's, as vLLM keeps it */
    cr_assert_eq(m.req[1].outcome, CZ_REQ_COMPLETED);
    cz_server_free(s);
    cz_metrics_free(&m);
}

/* Prompts that share prefixes: variant v of 8 trace ids agrees with the others on its first
 * v % 8 ids. */
static const uint32_t *shared_ids(uint32_t v)
{
    static uint32_t ids[8][8];
    for (uint32_t a = 0; a < 8; a++)
        for (uint32_t k = 0; k < 8; k++)
            ids[a][k] = k < a ? k : 100 + 8 * a + k;
    return ids[v % 8];
}

/* Random events on random configurations with the cache on (idle KV dropped or offloaded,
 * LRU or next-use eviction by sessions or blocks, preloads, FCFS on either path, BROS's
 * bidirectional blocks; turns with shared trace hashes, feeds, barge-ins, truncations,
 * closed and reopened sessions): every invariant holds after every event, the cache's
 * holders included. */
Test(prefix, invariants_random)
{
    for (unsigned seed = 1; seed <= (sanitized() ? 12u : 48u); seed++) {
        srand(seed);
        cz_metrics m;
        cz_metrics_init(&m, 0.0, 0);
        cz_server_config cfg = apc_cfg(24 + (uint32_t)(rand() % 160));
        cfg.max_num_seqs = 1 + (uint32_t)(rand() % 12);
        cfg.max_num_batched_tokens = cfg.max_num_seqs + 8 + (uint32_t)(rand() % 128);
        cfg.block_tokens = 1 + (uint32_t)(rand() % 8);
        cfg.chunked_prefill = rand() % 4 != 0;
        cfg.kv_idle = seed % 2 ? CZ_KV_IDLE_OFFLOAD : CZ_KV_IDLE_DROP;
        cfg.kv_evict = (uint32_t)(rand() % 2);
        cfg.kv_evict_unit = (uint32_t)(rand() % 3);
        cfg.kv_preload = cfg.kv_idle == CZ_KV_IDLE_OFFLOAD && rand() % 2;
        cz_sched_ops ops = cz_sched_fcfs;
        cz_policy pol;
        cz_err err;
        switch (seed % 4) {
        case 1: ops = cz_sched_fcfs_scan; break;
        case 2:
            cr_assert_eq(cz_policy_make("bros", NULL, "t", &pol, &err), CZ_OK);
            ops = cz_policy_ops(&pol);
            cfg.kv_bidirectional = true;
            break;
        default: break;
        }
        cz_server *s = cz_server_create(&cfg, &ops, &m, 0);
        cz_kvindex kx;
        cz_kvindex_init(&kx, 1);
        cz_pcache_watch w = cz_kvindex_watch(&kx, 0);
        cz_server_watch_cache(s, &w);
        enum { N = 16 };
        uint32_t seq[N];
        int turns[N] = {0};
        for (uint32_t i = 0; i < N; i++)
            seq[i] = cz_server_seq_open(s, i, i % 2, false);
        cz_xfer pend[4096];
        uint32_t n_pend = 0;
        double t = 0;
        cz_batch b;
        for (int it = 0; it < 2500; it++) {
            uint32_t i = (uint32_t)(rand() % N);
            const cz_seq *q = cz_server_seq(s, seq[i]);
            int op = rand() % 12;
            if (op < 3 && q->state == CZ_SEQ_IDLE && turns[i] < 5) {
                bool final = rand() % 4 != 0;
                uint32_t in = 1 + (uint32_t)(rand() % 48);
                cz_turn_hashes h = {shared_ids((uint32_t)rand()), 8, 1 + (uint32_t)(rand() % 8)};
                cz_server_turn_hashed(s, t, seq[i], (uint32_t)turns[i]++, 0, in,
                                      1 + (uint32_t)(rand() % 24), 0, final, &h);
            } else if (op == 3 && q->turn_open && !q->input_final) {
                cz_server_feed(s, t, seq[i], (uint32_t)(rand() % 10), (uint32_t)(rand() % 10),
                               rand() % 2);
            } else if (op == 4 && (q->turn_open || (q->state == CZ_SEQ_IDLE &&
                                                     q->turn_rec != UINT64_MAX))) {
                cz_server_abort(s, t, seq[i], (uint32_t)(rand() % 8));
            } else if (op == 5 && n_pend > 0) {
                uint32_t k = (uint32_t)(rand() % n_pend);
                cz_xfer x = pend[k];
                pend[k] = pend[--n_pend];
                cz_server_on_xfer_done(s, t, x.seq, x.to_host);
            } else if (op == 6 && q->state == CZ_SEQ_IDLE && !q->turn_open &&
                       !cz_server_seq_moving(s, seq[i])) {
                if (rand() % 2) {
                    uint32_t ctx = q->tokens_in + q->generated;
                    cz_server_seq_truncate(s, seq[i], ctx ? (uint32_t)rand() % ctx : 0);
                } else {
                    cz_server_seq_close(s, seq[i]);
                    seq[i] = cz_server_seq_open(s, 100 + (uint64_t)it, i % 2, false);
                    turns[i] = 0;
                }
            } else if (op == 7 && q->state == CZ_SEQ_IDLE) {
                cz_server_preload(s, t, seq[i], rand() % 2, t + 0.05);
            } else if (op >= 8 && cz_server_schedule(s, t, &b)) {
                t += 0.01;
                cz_step_events ev;
                cz_server_on_batch_done(s, t, &ev);
            }
            uint32_t n;
            const cz_xfer *x = cz_server_take_xfers(s, &n);
            for (uint32_t k = 0; k < n; k++) {
                cr_assert(n_pend < 4096);
                pend[n_pend++] = x[k];
            }
            t += 0.001;
            check(s);
            /* the watcher's index equals the cache; a context's cached blocks lie inside it */
            index_ok(s, &kx);
            q = cz_server_seq(s, seq[i]);
            uint32_t held, cached = cz_server_seq_cached_blocks(s, seq[i], &held);
            cr_assert((uint64_t)cached * cfg.block_tokens <=
                          (uint64_t)q->tokens_in + q->generated &&
                      held <= cached);
        }
        cz_prefix_stats st = stats(s);
        cr_assert(st.hits <= st.queries && st.preempted_hits <= st.preempted_queries);
        cz_server_free(s);
        cz_kvindex_free(&kx);
        cz_metrics_free(&m);
    }
}

/* The ordering path with FCFS order (fcfs_scan) takes the same decisions as the FCFS path
 * with the cache on, step by step, on prompts that share prefixes, where neither the pool
 * nor the token budget binds. (Where they bind the paths may differ: an ordering policy
 * sees each waiting sequence's hit as the step starts, before the step's allocations evict
 * cached blocks or its chunks cache new ones; the core then applies the hit it finds.) */
Test(prefix, ordering_path_matches_fcfs_path)
{
    for (unsigned seed = 1; seed <= (sanitized() ? 10u : 40u); seed++) {
        srand(seed);
        cz_server_config cfg = apc_cfg(65536);
        cfg.max_num_seqs = 8;
        cfg.max_num_batched_tokens = 4096;
        cz_metrics m1, m2;
        cz_metrics_init(&m1, 0, 0);
        cz_metrics_init(&m2, 0, 0);
        cz_server *a = cz_server_create(&cfg, &cz_sched_fcfs, &m1, 0);
        cz_server *b = cz_server_create(&cfg, &cz_sched_fcfs_scan, &m2, 0);
        double t = 0;
        for (int step = 0; step < 1200; step++) {
            if (rand() % 3 == 0) {
                uint32_t in = 1 + (uint32_t)(rand() % 40), out = 1 + (uint32_t)(rand() % 40);
                cz_turn_hashes h = {shared_ids((uint32_t)rand()), 8, 4};
                uint32_t qa = cz_server_seq_open(a, (uint64_t)step, 0, false);
                uint32_t qb = cz_server_seq_open(b, (uint64_t)step, 0, false);
                cz_server_turn_hashed(a, t, qa, 0, 0, in, out, 0, true, &h);
                cz_server_turn_hashed(b, t, qb, 0, 0, in, out, 0, true, &h);
            }
            cz_batch ba, bb;
            bool ra = cz_server_schedule(a, t, &ba), rb = cz_server_schedule(b, t, &bb);
            cr_assert_eq(ra, rb, "seed %u step %d", seed, step);
            cr_assert_eq(ba.decode_seqs, bb.decode_seqs, "seed %u step %d", seed, step);
            cr_assert_eq(ba.prefill_tokens, bb.prefill_tokens, "seed %u step %d", seed, step);
            cr_assert_eq(cz_server_kv_used(a), cz_server_kv_used(b), "seed %u step %d", seed,
                         step);
            cr_assert_eq(m1.preemptions, m2.preemptions, "seed %u step %d", seed, step);
            t += 0.01;
            cz_step_events e;
            if (ra) {
                cz_server_on_batch_done(a, t, &e);
                cz_server_on_batch_done(b, t, &e);
            }
            check(a);
            check(b);
        }
        cz_prefix_stats sa = stats(a), sb = stats(b);
        cr_assert_eq(sa.hits, sb.hits, "seed %u", seed);
        cr_assert_eq(sa.queries, sb.queries, "seed %u", seed);
        cr_assert(sa.hits > 0, "seed %u", seed);
        cz_server_free(a);
        cz_server_free(b);
        cz_metrics_free(&m1);
        cz_metrics_free(&m2);
    }
}
