/* cz_rng.h - per-entity random streams derived from one run seed.
 *
 * Every random quantity of a run comes from a GSL generator owned by the entity that
 * draws it (an arrival process, a session, a request), seeded from (run seed, stream
 * kind, entity id) by splitmix64. Adding an entity or drawing more for one entity never
 * shifts another entity's draws, so runs stay comparable across policies. */
#ifndef CZ_RNG_H
#define CZ_RNG_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

/* Stream kinds: keep values stable, they are part of the seed derivation. */
enum {
    CZ_RNG_ARRIVALS = 1,
    CZ_RNG_LENGTHS = 2,
    CZ_RNG_SESSION = 3,
    CZ_RNG_SERVICE = 4,
    CZ_RNG_BARGE_IN = 5,
    CZ_RNG_ROUTER = 6,
    CZ_RNG_STREAMS = 7,
    CZ_RNG_FIT_CV = 8     /* cz_fit_cv's fold assignment */
};

/* splitmix64 mix of (seed, kind, id): a well-spread 64-bit value. Pure. */
uint64_t cz_rng_derive(uint64_t seed, uint64_t kind, uint64_t id);

/* New GSL generator (taus2: 24 bytes of state, fast) for (seed, kind, id). Caller frees
 * with gsl_rng_free. */
gsl_rng *cz_rng_new(uint64_t seed, uint64_t kind, uint64_t id);

/* Re-seeds an existing generator for (seed, kind, id) without allocating. */
void cz_rng_reseed(gsl_rng *r, uint64_t seed, uint64_t kind, uint64_t id);

#endif
