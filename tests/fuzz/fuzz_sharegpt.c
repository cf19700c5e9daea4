/* fuzz_sharegpt.c - libFuzzer harness: the input is a ShareGPT JSON array, written to a
 * scratch file and read by cz_trace_read with format sharegpt, with the checks of
 * cz_fuzz_trace (fuzz_util.h). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return cz_fuzz_trace(data, size, CZ_FMT_SHAREGPT);
}
