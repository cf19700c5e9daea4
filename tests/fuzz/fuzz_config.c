/* fuzz_config.c - libFuzzer harness for the experiment config loader: the input is parsed
 * as JSON (cz_json_parse) and then as an experiment config (cz_config_parse, relative
 * paths against the source tree's experiments/), which builds its workload. Configs asking
 * for more than 4,096 synthetic requests or streams are skipped (an allocation, not a bug).
 * Half the mutations edit the parsed JSON (cz_fuzz_mutate_json), half are libFuzzer's own
 * byte mutations, which also exercise the JSON parser. */
#include <stdlib.h>

#include "cz_json.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = cz_fuzz_text(data, size);
    cJSON *cfg = NULL;
    cz_err err;
    cz_err_clear(&err);
    cz_status st = cz_json_parse(text, "fuzz.json", &cfg, &err);
    cz_fuzz_check_err("cz_json_parse", st, &err);
    if (st == CZ_OK && cz_fuzz_config_bounded(cfg, 4096)) {
        cz_config c;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_fuzz_config_parse(cfg, &c, &wl);
        cz_workload_free(&wl);
    }
    cJSON_Delete(cfg);
    free(text);
    return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return cz_fuzz_mutate_json(data, size, max_size, seed);
}
