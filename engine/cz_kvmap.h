/* cz_kvmap.h - the physical KV blocks of one decoder replica, kept equal to the serving
 * core's block accounting.
 *
 * The serving core (core/cz_server.h) counts blocks per sequence and never names one; the
 * engine needs names: the slot each new K/V row is written to and the block table each
 * query reads (vLLM V1's). This map gives every sequence a table from its logical blocks
 * (position / block_tokens) to physical blocks of the pool, and brings it up to date
 * with the core's counts on every sync (a free pass, then an allocation pass, so one
 * sequence's freed blocks serve another's growth in the same sync):
 *
 *  - without a window a sequence holds its logical blocks [0, n): n = its core count, or,
 *    for a member of the decode set while a step is in flight, the blocks of its context
 *    plus the token being decoded (what the core's pool count holds for it then);
 *  - with a window and sinks (Metronome, section 4.1) it holds
 *    the sink blocks and the blocks from the window's first to its last, the core's
 *    cz_kv_blocks_held; during a step, from the window's first block before the step to
 *    the last block after it, because the step's first queries still attend to positions
 *    the window leaves by its end. Those few blocks beyond the core's count come from a
 *    reserve past the core's pool (cz_kvmap_create) and return at the step's end.
 *
 * After every sync each sequence out of a step holds exactly its core count, and the
 * counts sum to the core's pool use (asserted: a divergence is a bug). Blocks a pending
 * copy to host memory still reads carry a fence (the copy's number): a step that writes
 * them waits for it.
 *
 * Memory: tables grow by doubling as contexts grow; a sync allocates nothing otherwise. */
#ifndef CZ_KVMAP_H
#define CZ_KVMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "cz_server.h"

typedef struct cz_kvmap cz_kvmap;

/* A map over `blocks` blocks of the core's pool plus `reserve` blocks for windowed steps
 * (0 without a window), for sequences with `sinks` sink tokens and a window of `window`
 * tokens (0: none), `block_tokens` tokens per block. */
cz_kvmap *cz_kvmap_create(uint32_t blocks, uint32_t reserve, uint32_t block_tokens,
                          uint32_t sinks, uint32_t window);
void cz_kvmap_free(cz_kvmap *m);

/* Sequence `seq` has `tokens` tokens in the step now in flight (0: none). Set by the
 * batch builder before the sync of the step, cleared (0) when the step ends. */
void cz_kvmap_set_inflight(cz_kvmap *m, uint32_t seq, uint32_t tokens);

/* Brings every sequence's table to the core's accounting (the rules above) and checks it.
 * `srv` is the replica's core. */
void cz_kvmap_sync(cz_kvmap *m, cz_server *srv);

/* Logical block j of `seq`: its physical block, or -1 when it does not hold it. */
int32_t cz_kvmap_block(const cz_kvmap *m, uint32_t seq, uint32_t j);
/* The table of `seq`: *n logical blocks, each a physical block or -1. Valid until the next
 * sync. */
const int32_t *cz_kvmap_table(const cz_kvmap *m, uint32_t seq, uint32_t *n);

/* Physical blocks in use, and in all (pool + reserve). */
uint32_t cz_kvmap_used(const cz_kvmap *m);
uint32_t cz_kvmap_capacity(const cz_kvmap *m);

/* A copy numbered `job` reads physical block b: a later writer waits for it. */
void cz_kvmap_fence(cz_kvmap *m, int32_t b, uint64_t job);
/* The copy a writer of physical block b waits for (0: none). */
uint64_t cz_kvmap_fence_of(const cz_kvmap *m, int32_t b);

#endif
