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

Test(json, duplicate_keys_are_errors_naming_the_path)
{
    cJSON *j = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_parse("{\"server\": {\"kv_blocks\": 4, \"kv_blocks\": 8}}", "c.json",
                               &j, &err),
                 CZ_EFORMAT);
    cr_assert_null(j);
    cr_assert(strstr(err.msg, "c.json") && strstr(err.msg, "'server.kv_blocks'"), "%s", err.msg);
    cz_err_clear(&err);
    cr_assert_eq(cz_json_parse("{\"a\": [{\"x\": 1}, {\"y\": 1, \"y\": 2}]}", "s.json", &j, &err),
                 CZ_EFORMAT);
    cr_assert(strstr(err.msg, "'a[1].y'"), "%s", err.msg);
    /* the same key in different objects is fine */
    cr_assert_eq(cz_json_parse("{\"a\": {\"x\": 1}, \"b\": {\"x\": 1}, \"x\": [1, 1]}", "ok.json",
                               &j, &err),
                 CZ_OK);
    cJSON_Delete(j);
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
    cJSON_Delete(j);
    /* 2^64 and above do not fit, though (double)UINT64_MAX == 2^64; nor do infinities */
    j = cJSON_Parse("{\"big\": 18446744073709551616, \"huge\": 1e300, \"top\": 9007199254740992}");
    cr_assert_eq(cz_json_u64(j, "w", "big", true, 0, UINT64_MAX, &u, &err), CZ_EINVAL);
    cr_assert(strstr(err.msg, "field 'big'") != NULL, "%s", err.msg);
    cr_assert_eq(cz_json_u64(j, "w", "huge", true, 0, UINT64_MAX, &u, &err), CZ_EINVAL);
    cr_assert_eq(cz_json_u64(j, "w", "top", true, 0, UINT64_MAX, &u, &err), CZ_OK);
    cr_assert_eq(u, 9007199254740992ull);
    cr_assert_eq(cz_json_u64(j, "w", "top", true, 0, 9007199254740991ull, &u, &err), CZ_EINVAL);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"n\": -3, \"s\": 5, \"f\": 2.5}");
    u = 9;
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

/* The whole value is JSON or it is a string: a valid JSON prefix ("64" of "64junk") used
 * to be taken as the value. */
Test(json, set_value_is_json_only_when_all_of_it_is)
{
    cJSON *j = cJSON_Parse("{\"server\": {\"max_num_seqs\": 256}}");
    cz_err err;
    cz_err_clear(&err);
    const struct {
        const char *asg, *key;
        int type;           /* cJSON type */
        double num;         /* cJSON_Number */
        const char *str;    /* cJSON_String */
    } cases[] = {
        {"server.max_num_seqs=64junk", "max_num_seqs", cJSON_String, 0, "64junk"},
        {"server.name=2024-run", "name", cJSON_String, 0, "2024-run"},
        {"server.a=1e3x", "a", cJSON_String, 0, "1e3x"},
        {"server.b=[1, 2]]", "b", cJSON_String, 0, "[1, 2]]"},
        {"server.c={\"x\": 1} {}", "c", cJSON_String, 0, "{\"x\": 1} {}"},
        {"server.d=truex", "d", cJSON_String, 0, "truex"},
        {"server.e=", "e", cJSON_String, 0, ""},
        {"server.f= 64 ", "f", cJSON_Number, 64, NULL},
        {"server.g=\t-2.5e1\n", "g", cJSON_Number, -25, NULL},
        {"server.h=\"quoted\"", "h", cJSON_String, 0, "quoted"},
        {"server.i=null", "i", cJSON_NULL, 0, NULL},
    };
    for (size_t i = 0; i < CZ_ARRAY_LEN(cases); i++) {
        cr_assert_eq(cz_json_set_path(j, cases[i].asg, &err), CZ_OK, "%s: %s", cases[i].asg,
                     err.msg);
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "server"), cases[i].key);
        cr_assert_not_null(v, "%s", cases[i].asg);
        cr_assert_eq(v->type & 0xFF, cases[i].type, "%s: type %d", cases[i].asg, v->type);
        if (cases[i].type == cJSON_Number)
            cr_assert_float_eq(v->valuedouble, cases[i].num, 0, "%s", cases[i].asg);
        if (cases[i].type == cJSON_String)
            cr_assert_str_eq(v->valuestring, cases[i].str, "%s", cases[i].asg);
    }
    cJSON_Delete(j);
}

/* An empty key in the path is an error naming the argument, and changes nothing; it used
 * to be skipped ("a..b" set a.b) or ignored ("...=5"). */
Test(json, set_path_rejects_empty_keys)
{
    static const char *const bad[] = {"a..b=5", ".a=5", "a.=5", "...=5", ".=5", "=5",
                                      "server..max_num_seqs=5"};
    cJSON *j = cJSON_Parse("{\"server\": {\"max_num_seqs\": 256}}");
    char *before = cJSON_PrintUnformatted(j);
    for (size_t i = 0; i < CZ_ARRAY_LEN(bad); i++) {
        cz_err err;
        cz_err_clear(&err);
        cr_assert_eq(cz_json_set_path(j, bad[i], &err), CZ_EINVAL, "%s was accepted", bad[i]);
        char want[64];
        snprintf(want, sizeof want, "--set %s: ", bad[i]);
        cr_assert(strstr(err.msg, want) == err.msg, "%s: %s", bad[i], err.msg);
        char *after = cJSON_PrintUnformatted(j);
        cr_assert_str_eq(after, before, "%s changed the config", bad[i]);
        cJSON_free(after);
    }
    cJSON_free(before);
    cJSON_Delete(j);
}

Test(json, set_covers_the_field_and_below)
{
    cr_assert(cz_json_set_covers("server.max_num_seqs=64", "server.max_num_seqs"));
    cr_assert(cz_json_set_covers("server={\"max_num_seqs\": 0}", "server.max_num_seqs"));
    cr_assert(cz_json_set_covers("seed=x", "seed"));
    cr_assert(!cz_json_set_covers("server.max_num_seqs=64", "server.max_num_seqs_x"));
    cr_assert(!cz_json_set_covers("server.max_num_seqs=64", "server"));
    cr_assert(!cz_json_set_covers("server.max=64", "server.max_num_seqs"));
    cr_assert(!cz_json_set_covers("novalue", "novalue"));
}

/* Getter and key-check errors are located on their field, for the CLI to name a --set. */
Test(json, field_errors_are_located)
{
    cJSON *j = cJSON_Parse("{\"n\": \"x\", \"typo\": 1}");
    cz_err err;
    cz_err_clear(&err);
    uint64_t u = 0;
    cr_assert_eq(cz_json_u64(j, "c.json: server", "n", true, 0, 9, &u, &err), CZ_EINVAL);
    cr_assert_str_eq(err.field_where, "c.json: server");
    cr_assert_str_eq(err.field_key, "n");
    cr_assert_str_eq(err.msg,
                     "c.json: server: field 'n': expected an integer in [0, 9], got a string");
    static const char *const k[] = {"n"};
    cr_assert_eq(cz_json_check_keys(j, "c.json", k, 1, &err), CZ_EINVAL);
    cr_assert_str_eq(err.field_where, "c.json");
    cr_assert_str_eq(err.field_key, "typo");
    cr_assert_eq(cz_json_u64(j, "c.json", "absent", true, 0, 9, &u, &err), CZ_EINVAL);
    cr_assert_str_eq(err.field_key, "", "a missing field has no value to locate");
    cJSON_Delete(j);
}

/* A NUL byte in a config or card: before, cJSON stopped at it and reported the line of
 * the NUL as "not valid JSON", or (a NUL after a complete object) nothing at all. */
Test(json, load_reports_a_nul_byte)
{
    static const char text[] = "{\"a\": 1,\n \"b\": 2}\n\0{\"c\": 3}\n";
    char path[] = "/tmp/cz_test_json_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    cJSON *j = NULL;
    cz_err err;
    cz_err_clear(&err);
    cr_assert_eq(cz_json_load(path, &j, &err), CZ_EFORMAT, "%s", err.msg);
    cr_assert_null(j);
    char want[64];
    snprintf(want, sizeof want, "%s:3:1: found a NUL byte, expected text", path);
    cr_assert_str_eq(err.msg, want);
    remove(path);
}
