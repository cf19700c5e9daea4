/* test_util.h - helpers shared by the Criterion suites. */
#ifndef CZ_TEST_UTIL_H
#define CZ_TEST_UTIL_H

/* `rel` under the source tree ($CZ_SOURCE_ROOT, set by meson test); caller frees. */
char *cz_test_path(const char *rel);

#endif
