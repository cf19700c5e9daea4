/* test_obsfit.c - the pieces of `calibrate --observed` that need no server: the cost file's
 * request terms (read, refused, written back) and the --fit list. The fit itself is
 * checked end to end by tests/http_calibrate.sh (recovering a known cost from the
 * simulator's output and from a served run). */
#include <criterion/criterion.h>
#include <string.h>

#include "cz_costfile.h"
#include "cz_obsfit.h"

static cz_status parse(const char *text, cz_cost_file *f, cz_err *err)
{
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "bad test JSON: %s", text);
    cz_status st = cz_cost_file_parse(j, "cost.json", f, err);
    cJSON_Delete(j);
    return st;
}

#define STAGES "\"kind\":\"fitted\",\"model\":\"tiny-llama\",\"stages\":{\"llm\":{\"per_step_s\":1e-3}}"

Test(obsfit, request_terms_read_and_written_back)
{
    cz_cost_file f;
    cz_err err;
    cr_assert_eq(parse("{" STAGES ",\"request\":{\"ingest_s\":0.004,\"ingest_per_token_s\":2e-6}}",
                       &f, &err),
                 CZ_OK, "%s", err.msg);
    cr_assert(f.has_request);
    cr_assert_float_eq(f.ingest_s, 0.004, 1e-15);
    cr_assert_float_eq(f.ingest_per_token_s, 2e-6, 1e-18);
    cJSON *j = cz_cost_file_json(&f);
    cz_cost_file g;
    cr_assert_eq(cz_cost_file_parse(j, "again", &g, &err), CZ_OK, "%s", err.msg);
    cJSON_Delete(j);
    cr_assert(g.has_request && g.ingest_s == f.ingest_s &&
              g.ingest_per_token_s == f.ingest_per_token_s);
    /* without the object: none, and none written */
    cr_assert_eq(parse("{" STAGES "}", &f, &err), CZ_OK, "%s", err.msg);
    cr_assert(!f.has_request && f.ingest_s == 0 && f.ingest_per_token_s == 0);
    j = cz_cost_file_json(&f);
    cr_assert_null(cJSON_GetObjectItem(j, "request"));
    cJSON_Delete(j);
}

Test(obsfit, request_terms_refused_with_the_field)
{
    static const char *const bad[][2] = {
        {"{" STAGES ",\"request\":{\"ingest\":1}}", "ingest"},
        {"{" STAGES ",\"request\":{\"ingest_s\":-1}}", "ingest_s"},
        {"{" STAGES ",\"request\":{\"ingest_per_token_s\":\"x\"}}", "ingest_per_token_s"},
        {"{" STAGES ",\"request\":[]}", "request"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cz_cost_file f;
        cz_err err;
        cz_err_clear(&err);
        cr_assert_neq(parse(bad[i][0], &f, &err), CZ_OK, "accepted %s", bad[i][0]);
        cr_assert(strstr(err.msg, bad[i][1]) && strstr(err.msg, "cost.json"),
                  "'%s' does not name %s", err.msg, bad[i][1]);
    }
}

Test(obsfit, fit_lists)
{
    uint32_t m;
    cz_err err;
    cr_assert_eq(cz_obsfit_parse_mask("step,compute", &m, &err), CZ_OK);
    cr_assert_eq(m, (1u << CZ_OF_STEP) | (1u << CZ_OF_COMPUTE));
    cr_assert_eq(cz_obsfit_parse_mask("ingest_per_token,ingest,kv,seq", &m, &err), CZ_OK);
    cr_assert_eq(m, (1u << CZ_OF_INGEST_TOKEN) | (1u << CZ_OF_INGEST) | (1u << CZ_OF_KV) |
                        (1u << CZ_OF_SEQ));
    cr_assert_eq(cz_obsfit_parse_mask("step,step", &m, &err), CZ_OK);
    cr_assert_eq(m, 1u << CZ_OF_STEP);
    static const char *const bad[] = {"", ",", "steps", "step,,x", "ingest_per", "STEP"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_neq(cz_obsfit_parse_mask(bad[i], &m, &err), CZ_OK, "accepted '%s'", bad[i]);
    for (int p = 0; p < CZ_OF_N; p++) {
        cr_assert_eq(cz_obsfit_parse_mask(cz_obsfit_param_name((cz_obsfit_param)p), &m, &err),
                     CZ_OK);
        cr_assert_eq(m, 1u << p);
    }
    cr_assert_eq(CZ_OBSFIT_DEFAULT_MASK,
                 (1u << CZ_OF_STEP) | (1u << CZ_OF_COMPUTE) | (1u << CZ_OF_INGEST));
}
