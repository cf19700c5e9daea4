/* alloc_count.c - see alloc_count.h. */
#include "alloc_count.h"

#include <stdatomic.h>
#include <stddef.h>

static atomic_ulong allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t s);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t s)
{
    atomic_fetch_add(&allocations, 1);
    return __real_calloc(n, s);
}

void *__wrap_realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_realloc(p, n);
}

unsigned long cz_test_allocations(void)
{
    return atomic_load(&allocations);
}
