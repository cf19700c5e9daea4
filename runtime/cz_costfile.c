/* cz_costfile.c - see cz_costfile.h. */
#include "cz_costfile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cz_json.h"

/* The largest coefficient of a fitted cost (seconds per step, sequence, token, FLOP or
 * byte): fits give microseconds and below */
#define CZ_COSTFILE_COEF_MAX 1e3

cz_status cz_cost_file_parse(const cJSON *j, const char *where, cz_cost_file *out, cz_err *err)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(j))
        return cz_err_set(err, CZ_EINVAL, "%s: expected a JSON object", where);
    const char *kind = NULL, *model = NULL;
    cz_status st;
    if ((st = cz_json_str(j, where, "kind", true, &kind, err)) != CZ_OK ||
        (st = cz_json_str(j, where, "model", true, &model, err)) != CZ_OK)
        return st;
    if (strcmp(kind, "fitted") != 0)
        return cz_err_field(err, CZ_EINVAL, where, "kind", "expected \"fitted\", got '%s'",
                            kind);
    snprintf(out->model, sizeof out->model, "%s", model);
    const char *hw = NULL;
    if ((st = cz_json_str(j, where, "hardware", false, &hw, err)) != CZ_OK)
        return st;
    snprintf(out->hardware, sizeof out->hardware, "%s", hw ? hw : "");
    const cJSON *stages = NULL;
    if ((st = cz_json_obj(j, where, "stages", true, &stages, err)) != CZ_OK)
        return st;
    const cJSON *s;
    cJSON_ArrayForEach(s, stages)
    {
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: stages.%s", where, s->string);
        if (out->n_stages == CZ_MAX_STAGES)
            return cz_err_set(err, CZ_EINVAL, "%s: more than %d stages", where, CZ_MAX_STAGES);
        if (!cJSON_IsObject(s))
            return cz_err_set(err, CZ_EINVAL, "%s: expected an object of coefficients", ctx);
        const char *keys[CZ_CF_N];
        for (int f = 0; f < CZ_CF_N; f++)
            keys[f] = cz_cost_feature_name((cz_cost_feature)f);
        if ((st = cz_json_check_keys(s, ctx, keys, CZ_CF_N, err)) != CZ_OK)
            return st;
        uint32_t i = out->n_stages++;
        snprintf(out->stage[i], sizeof out->stage[i], "%s", s->string);
        for (int f = 0; f < CZ_CF_N; f++) {
            double v = 0.0;
            /* seconds per unit: a step beyond what a clock can hold is refused here */
            if ((st = cz_json_num(s, ctx, keys[f], false, 0.0, CZ_COSTFILE_COEF_MAX, &v,
                                  err)) != CZ_OK)
                return st;
            out->fit[i].theta[f] = v;
        }
    }
    const cJSON *link = NULL;
    if ((st = cz_json_obj(j, where, "host_link", false, &link, err)) != CZ_OK)
        return st;
    if (link) {
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: host_link", where);
        out->has_link = true;
        if ((st = cz_json_num(link, ctx, "bandwidth_Bps", true, 1.0, HUGE_VAL, &out->link_Bps,
                              err)) != CZ_OK ||
            (st = cz_json_num(link, ctx, "latency_s", true, 0.0, 10.0, &out->link_latency_s,
                              err)) != CZ_OK)
            return st;
    }
    const cJSON *req = NULL;
    if ((st = cz_json_obj(j, where, "request", false, &req, err)) != CZ_OK)
        return st;
    if (req) {
        char ctx[256];
        snprintf(ctx, sizeof ctx, "%s: request", where);
        static const char *const keys[] = {"ingest_s", "ingest_per_token_s"};
        out->has_request = true;
        if ((st = cz_json_check_keys(req, ctx, keys, 2, err)) != CZ_OK ||
            (st = cz_json_num(req, ctx, "ingest_s", false, 0.0, 60.0, &out->ingest_s, err)) !=
                CZ_OK ||
            (st = cz_json_num(req, ctx, "ingest_per_token_s", false, 0.0, 1.0,
                              &out->ingest_per_token_s, err)) != CZ_OK)
            return st;
    }
    return CZ_OK;
}

cz_status cz_cost_file_load(const char *path, cz_cost_file *out, cz_err *err)
{
    cJSON *j = NULL;
    cz_status st = cz_json_load(path, &j, err);
    if (st != CZ_OK)
        return st;
    st = cz_cost_file_parse(j, path, out, err);
    cJSON_Delete(j);
    return st;
}

cJSON *cz_cost_file_json(const cz_cost_file *f)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "fitted");
    cJSON_AddStringToObject(j, "model", f->model);
    if (f->hardware[0])
        cJSON_AddStringToObject(j, "hardware", f->hardware);
    cJSON *stages = cJSON_AddObjectToObject(j, "stages");
    for (uint32_t i = 0; i < f->n_stages; i++) {
        cJSON *s = cJSON_AddObjectToObject(stages, f->stage[i]);
        for (int k = 0; k < CZ_CF_N; k++)
            cJSON_AddNumberToObject(s, cz_cost_feature_name((cz_cost_feature)k), f->fit[i].theta[k]);
    }
    if (f->has_link) {
        cJSON *l = cJSON_AddObjectToObject(j, "host_link");
        cJSON_AddNumberToObject(l, "bandwidth_Bps", f->link_Bps);
        cJSON_AddNumberToObject(l, "latency_s", f->link_latency_s);
    }
    if (f->has_request) {
        cJSON *r = cJSON_AddObjectToObject(j, "request");
        cJSON_AddNumberToObject(r, "ingest_s", f->ingest_s);
        cJSON_AddNumberToObject(r, "ingest_per_token_s", f->ingest_per_token_s);
    }
    return j;
}

const cz_cost_fit *cz_cost_file_stage(const cz_cost_file *f, const char *name)
{
    for (uint32_t i = 0; i < f->n_stages; i++)
        if (strcmp(f->stage[i], name) == 0)
            return &f->fit[i];
    return NULL;
}
