/* test_json.c - located parse errors, typed getters, --set overrides, atomic writes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cz_json.h"

Test(json, parse_error_has_line_and_column)
{
    cJSON *j = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_parse("{\n  \"a\": 1,\n  \"b\": ]\n}", "x.json", &j, &err), CZ_EFORMAT);
    cr_assert(strstr(err.msg, "x.json:3:") != NULL, "%s", err.msg);
}

Test(json, getters_name_field_and_range)
{
    cJSON *j = cJSON_Parse("{\"n\": -3, \"s\": 5, \"f\": 2.5}");
    cz_err err;
    double d = 7;
    uint64_t u = 9;
    const char *s = NULL;
    cr_assert_eq(cz_json_num(j, "c.json: server", "n", true, 0, 10, &d, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "c.json: server: field 'n'") != NULL, "%s", err.msg);
    cr_assert_eq(cz_json_u64(j, "w", "f", true, 0, 10, &u, &err), CZ_EINVAL);
    cr_assert_eq(cz_json_str(j, "w", "s", true, &s, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "expected a string") != NULL);
    cr_assert_eq(cz_json_num(j, "w", "absent", false, 0, 1, &d, &err), CZ_OK);
    cr_assert_float_eq(d, 7, 0); /* optional and absent: untouched */
    cr_assert_eq(cz_json_num(j, "w", "absent", true, 0, 1, &d, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "missing field 'absent'") != NULL);
    cJSON_Delete(j);
}

Test(json, unknown_keys_rejected)
{
    cJSON *j = cJSON_Parse("{\"seed\": 1, \"sead\": 2}");
    static const char *const k[] = {"seed", "model"};
    cz_err err;
    cr_assert_eq(cz_json_check_keys(j, "e.json", k, 2, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "unknown field 'sead'") != NULL, "%s", err.msg);
    cJSON_Delete(j);
}

Test(json, set_path_creates_and_types)
{
    cJSON *j = cJSON_Parse("{\"server\": {\"max_num_seqs\": 256}}");
    cz_err err;
    cr_assert_eq(cz_json_set_path(j, "server.max_num_seqs=64", &err), CZ_OK);
    cr_assert_eq(cz_json_set_path(j, "workload.trace.path=x.csv", &err), CZ_OK);
    cr_assert_eq(cz_json_set_path(j, "server.chunked_prefill=false", &err), CZ_OK);
    cJSON *srv = cJSON_GetObjectItem(j, "server");
    cr_assert_float_eq(cJSON_GetObjectItem(srv, "max_num_seqs")->valuedouble, 64, 0);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(srv, "chunked_prefill")));
    cJSON *tr = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "workload"), "trace");
    cr_assert_str_eq(cJSON_GetObjectItem(tr, "path")->valuestring, "x.csv");
    cr_assert_eq(cz_json_set_path(j, "server.max_num_seqs.x=1", &err), CZ_EINVAL);
    cr_assert_eq(cz_json_set_path(j, "novalue", &err), CZ_EINVAL);
    cJSON_Delete(j);
}

Test(json, write_failure_leaves_no_file)
{
    cJSON *j = cJSON_Parse("{\"a\": 1}");
    cz_err err;
    cr_assert_eq(cz_json_write_file(j, "/nonexistent-dir/out.json", true, &err), CZ_EIO);
    cr_assert(strstr(err.msg, "/nonexistent-dir/out.json") != NULL);
    char path[] = "/tmp/cz_test_json_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(cz_json_write_file(j, path, false, &err), CZ_OK);
    cJSON *back = NULL;
    cr_assert_eq(cz_json_load(path, &back, &err), CZ_OK);
    cr_assert_float_eq(cJSON_GetObjectItem(back, "a")->valuedouble, 1, 0);
    remove(path);
    cJSON_Delete(back);
    cJSON_Delete(j);
}
