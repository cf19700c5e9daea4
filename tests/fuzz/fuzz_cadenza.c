/* fuzz_cadenza.c - libFuzzer harness: the input is cadenza's session JSONL, written to a
 * scratch file and read by cz_trace_read with format cadenza, with the checks of
 * cz_fuzz_trace (fuzz_util.h). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return cz_fuzz_trace(data, size, CZ_FMT_CADENZA);
}
