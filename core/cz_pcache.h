/* cz_pcache.h - the cached KV blocks of one pool, for automatic prefix caching (vLLM's
 * "Automatic Prefix Caching" design, docs.vllm.ai; vllm/v1/core/block_pool.py).
 *
 * A full KV block whose content is known carries a hash (its tokens chained with the hash
 * of the block before it); such a block is an entry here, named by an entry id in
 * [0, blocks). Entries are reference counted by the sequences that hold them; an entry no
 * sequence holds is not forgotten: it waits in the free queue (an intrusive doubly linked
 * list over entry ids, least recently freed first) and can still be hit, until an
 * allocation that finds no never-used block evicts the queue's head (its hash is
 * forgotten). The hash -> entry map is an open-addressing table (linear probing,
 * backward-shift deletion) sized at creation: a pool of `blocks` blocks holds at most
 * `blocks` cached ones, so nothing here allocates after cz_pcache_init.
 *
 * The module names cached blocks only; the serving core (cz_server.c) counts every other
 * block, and decides when a block is registered, hit, released or evicted.
 *
 * A watcher (cz_pcache_watch) hears of the blocks the caller publishes: when one is
 * published, and when its hash is forgotten (a router's index of the fleet's caches, as
 * the KV events of vLLM and Dynamo announce stored and removed blocks). */
#ifndef CZ_PCACHE_H
#define CZ_PCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_base.h"

#define CZ_PCACHE_NONE UINT32_MAX

typedef struct cz_pcache_blk {
    uint64_t hash;
    uint32_t ref;        /* sequences holding it; 0: in the free queue */
    uint32_t prev, next; /* free-queue links (ref 0), or the spare list (unused entry) */
    uint32_t tag;        /* published: the watcher's tag for it; CZ_PCACHE_NONE: not */
} cz_pcache_blk;

/* Who hears of published blocks: `cached` when a block is published (it returns a tag,
 * not CZ_PCACHE_NONE, kept with the block), `forgotten` with that tag when the block's
 * hash is forgotten (evicted, or forgotten by its holder). Both run inside the cache's
 * calls and must not call back into it. */
typedef struct cz_pcache_watch {
    void *ctx;
    uint32_t (*cached)(void *ctx, uint64_t hash);
    void (*forgotten)(void *ctx, uint64_t hash, uint32_t tag);
} cz_pcache_watch;

typedef struct cz_pcache {
    cz_pcache_blk *blk;  /* `cap` entries */
    uint32_t *slot;      /* hash table of entry ids, CZ_PCACHE_NONE when empty */
    uint32_t mask;       /* slots - 1 (slots: a power of two >= 2 cap) */
    uint32_t cap;
    uint32_t n_live;     /* entries with a hash (held or in the free queue) */
    uint32_t spare;      /* unused entries, linked through next */
    uint32_t fq_head, fq_tail, n_free; /* the free queue, least recently freed first */
    cz_pcache_watch watch;               /* cached NULL: none */
} cz_pcache;

/* An empty cache for a pool of `blocks` (> 0) blocks; cz_pcache_free releases it. */
void cz_pcache_init(cz_pcache *c, uint32_t blocks);
void cz_pcache_free(cz_pcache *c);

/* The entry whose hash is `hash`, or CZ_PCACHE_NONE. O(1) expected. */
uint32_t cz_pcache_find(const cz_pcache *c, uint64_t hash);

/* Registers a held block (reference count 1) under `hash`, which must not be cached yet;
 * returns its entry id. A spare entry must exist (the caller's accounting guarantees it:
 * held cached blocks and queued ones never exceed the pool). */
uint32_t cz_pcache_insert(cz_pcache *c, uint64_t hash);

/* One more sequence holds entry `e`; an entry in the free queue leaves it. Returns whether
 * it was in the free queue (the pool's used blocks grow by one then). */
bool cz_pcache_hold(cz_pcache *c, uint32_t e);

/* A sequence gives back entry `e`; at no holder it goes to the free queue's tail, still
 * cached. Returns whether it went to the queue (the pool's used blocks shrink by one). */
bool cz_pcache_release(cz_pcache *c, uint32_t e);

/* Evicts the free queue's head (least recently freed): its hash is forgotten and the
 * entry is spare again. The queue must not be empty. Returns the entry id. */
uint32_t cz_pcache_evict(cz_pcache *c);

/* Held entry `e` (reference count 1) stops being cached: its hash is forgotten, and its
 * block becomes its holder's own (an uncached block). */
void cz_pcache_forget(cz_pcache *c, uint32_t e);

/* From now on `w` (copied; NULL: none) hears of published blocks. Blocks published before
 * are not announced again: set it before the first publication. */
void cz_pcache_set_watch(cz_pcache *c, const cz_pcache_watch *w);

/* Entry `e` (cached) is published: the watcher hears of it now, unless it was published
 * already, and again when its hash is forgotten. Without a watcher, nothing. O(1) plus
 * the watcher's call. */
void cz_pcache_publish(cz_pcache *c, uint32_t e);

/* Checks the table, the free queue and the spare list against each other; false with the
 * first violation in err. For tests; O(blocks). */
bool cz_pcache_check(const cz_pcache *c, cz_err *err);

#endif
