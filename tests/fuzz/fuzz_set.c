/* fuzz_set.c - libFuzzer harness for `--set key=value`: the input is split at newlines
 * into at most four assignments, applied in order with cz_json_set_path to a copy of the
 * built-in default experiment (experiments/default.json, read once) as `cadenza sim`
 * does, stopping at the first that fails; the result is then parsed as an experiment
 * config (cz_config_parse). Configs asking for more than 4,096 synthetic requests or
 * streams are skipped (an allocation, not a bug). */
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"
#include "cz_version.h"
#include "fuzz_util.h"

#define CZ_FUZZ_MAX_SETS 4

/* The base config, parsed at the first input and kept for the life of the process. */
static cJSON *base_config(void)
{
    static cJSON *base;
    if (!base) {
        cz_err err;
        cz_err_clear(&err);
        if (cz_json_load(CZ_SOURCE_ROOT "/experiments/default.json", &base, &err) != CZ_OK)
            cz_fuzz_fail("base config", err.msg);
    }
    return base;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *cfg = cJSON_Duplicate(base_config(), 1);
    if (!cfg)
        cz_fuzz_fail("cJSON_Duplicate", "out of memory");
    char *text = cz_fuzz_text(data, size);
    char *line = text;
    cz_status st = CZ_OK;
    for (int i = 0; i < CZ_FUZZ_MAX_SETS && line && st == CZ_OK; i++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        cz_err err;
        cz_err_clear(&err);
        st = cz_json_set_path(cfg, line, &err);
        cz_fuzz_check_err("cz_json_set_path", st, &err);
        line = nl ? nl + 1 : NULL;
    }
    if (st == CZ_OK && cz_fuzz_config_bounded(cfg, 4096)) {
        cz_config c;
        cz_workload wl;
        cz_workload_init(&wl);
        cz_fuzz_config_parse(cfg, &c, &wl);
        cz_workload_free(&wl);
    }
    free(text);
    cJSON_Delete(cfg);
    return 0;
}
