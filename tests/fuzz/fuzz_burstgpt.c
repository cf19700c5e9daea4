/* fuzz_burstgpt.c - libFuzzer harness: the input is a BurstGPT CSV (6 or 8 columns),
 * written to a scratch file and read by cz_trace_read with format burstgpt, with the
 * checks of cz_fuzz_trace (fuzz_util.h). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return cz_fuzz_trace(data, size, CZ_FMT_BURSTGPT);
}
