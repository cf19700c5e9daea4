/* test_util.c - see test_util.h. */
#include "test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *cz_test_path(const char *rel)
{
    const char *root = getenv("CZ_SOURCE_ROOT");
    cr_assert(root != NULL, "CZ_SOURCE_ROOT not set (run the suites with meson test)");
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    cr_assert(p != NULL);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}
