/* fuzz_trace_auto.c - libFuzzer harness: the input is a trace file of any format, written
 * to a scratch file and read by cz_trace_read with format auto (the format detected from
 * the content by cz_trace_detect), with the checks of cz_fuzz_trace (fuzz_util.h). */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return cz_fuzz_trace(data, size, CZ_FMT_AUTO);
}
