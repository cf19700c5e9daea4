/* alloc_count.h - counts the process's allocations, for tests and benchmarks that check a
 * hot path allocates nothing. The executable must be linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/meson.build's `wrap_alloc`) and
 * alloc_count.c. */
#ifndef CZ_ALLOC_COUNT_H
#define CZ_ALLOC_COUNT_H

/* Calls of malloc, calloc and realloc so far, from every thread. */
unsigned long cz_test_allocations(void);

#endif
