/* cz_rng.c - see cz_rng.h. */
#include "cz_rng.h"

#include "cz_base.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t cz_rng_derive(uint64_t seed, uint64_t kind, uint64_t id)
{
    uint64_t x = seed;
    uint64_t a = splitmix64(&x);
    x = a ^ (kind * 0xD6E8FEB86659FD93ULL);
    uint64_t b = splitmix64(&x);
    x = b ^ id;
    return splitmix64(&x);
}

void cz_rng_reseed(gsl_rng *r, uint64_t seed, uint64_t kind, uint64_t id)
{
    uint64_t s = cz_rng_derive(seed, kind, id);
    /* taus2 treats seed 0 as its default; fold to a non-zero unsigned long. */
    unsigned long ul = (unsigned long)(s ^ (s >> 32));
    gsl_rng_set(r, ul ? ul : 1UL);
}

gsl_rng *cz_rng_new(uint64_t seed, uint64_t kind, uint64_t id)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    CZ_ASSERT(r != NULL);
    cz_rng_reseed(r, seed, kind, id);
    return r;
}
