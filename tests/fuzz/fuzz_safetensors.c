/* fuzz_safetensors.c - libFuzzer harness: the input is a whole safetensors file image (the
 * 8-byte header length, the JSON header, the data section), validated by cz_st_check as
 * cz_st_open validates a mapped file; it is also written to a scratch file and opened with
 * cz_st_open, whose answer must agree. A rejection must carry its status and a message. */
#include <stdio.h>
#include <stdlib.h>

#include "cz_safetensors.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_st_check(data, size, "fuzz.safetensors", &err);
    cz_fuzz_check_err("cz_st_check", st, &err);

    const char *path = cz_fuzz_scratch("safetensors");
    cz_fuzz_write_file(path, data, size);
    cz_safetensors *ck = NULL;
    cz_err err2;
    cz_err_clear(&err2);
    cz_status st2 = cz_st_open(path, &ck, &err2);
    cz_fuzz_check_err("cz_st_open", st2, &err2);
    if ((st == CZ_OK) != (st2 == CZ_OK))
        cz_fuzz_fail("cz_st_open", "disagrees with cz_st_check on the same bytes");
    if (st2 == CZ_OK) {
        /* every tensor found by name, its bytes inside the image */
        for (uint32_t i = 0; i < cz_st_count(ck); i++) {
            const cz_st_tensor *t = cz_st_at(ck, i);
            if (cz_st_find(ck, t->name) != t)
                cz_fuzz_fail("cz_st_find", "a listed tensor is not found by its name");
            volatile uint8_t sum = 0;
            for (uint64_t b = 0; b < t->nbytes; b++)
                sum ^= t->data[b];
            (void)sum;
        }
    }
    cz_st_close(ck);
    remove(path);
    return 0;
}
