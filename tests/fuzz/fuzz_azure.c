/* fuzz_azure.c - libFuzzer harness: the input is an Azure LLM inference CSV, written to a
 * scratch file and read by cz_trace_read with format azure, with the checks of
 * cz_fuzz_trace (fuzz_util.h). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return cz_fuzz_trace(data, size, CZ_FMT_AZURE);
}
