/* cz_admission.c - admission of full-duplex sessions: Metronome's AIMD gateway (Metronome:
 * Bound the Cache, Keep the Beat for Real-Time Interaction Model Serving, section 4.2, and
 * the values of its gateway: tick = the frame budget B, target 0.7 B, decrease to
 * floor(0.9 x live), increase by one a tick while live is within 2 of the cap, the cap
 * unbounded until the first decrease) and a static cap. */
#include <math.h>
#include <string.h>

#include "cz_json.h"
#include "cz_policies.h"

cz_status cz_admission_parse(const cJSON *j, const char *where, cz_admission *out, cz_err *err)
{
    memset(out, 0, sizeof *out);
    out->kind = CZ_ADMIT_ALL;
    out->cap = UINT32_MAX;
    out->target_fraction = 0.7;
    out->decrease = 0.9;
    out->margin = 2;
    if (!j)
        return CZ_OK;
    const char *policy = NULL;
    cz_status st = cz_json_str(j, where, "policy", true, &policy, err);
    if (st != CZ_OK)
        return st;
    if (strcmp(policy, "none") == 0) {
        static const char *const k[] = {"policy"};
        return cz_json_check_keys(j, where, k, 1, err);
    }
    if (strcmp(policy, "static") == 0) {
        static const char *const k[] = {"policy", "cap"};
        uint64_t cap = 0;
        if ((st = cz_json_check_keys(j, where, k, 2, err)) != CZ_OK ||
            (st = cz_json_u64(j, where, "cap", true, 1, UINT32_MAX - 1, &cap, err)) != CZ_OK)
            return st;
        out->kind = CZ_ADMIT_STATIC;
        out->cap = (uint32_t)cap;
        return CZ_OK;
    }
    if (strcmp(policy, "aimd") == 0) {
        static const char *const k[] = {"policy", "target_fraction", "decrease", "margin"};
        uint64_t margin = out->margin;
        if ((st = cz_json_check_keys(j, where, k, 4, err)) != CZ_OK ||
            (st = cz_json_num(j, where, "target_fraction", false, 1e-3, 1.0,
                              &out->target_fraction, err)) != CZ_OK ||
            (st = cz_json_num(j, where, "decrease", false, 1e-3, 0.999, &out->decrease, err)) !=
                CZ_OK ||
            (st = cz_json_u64(j, where, "margin", false, 0, 1u << 20, &margin, err)) != CZ_OK)
            return st;
        out->kind = CZ_ADMIT_AIMD;
        out->margin = (uint32_t)margin;
        return CZ_OK;
    }
    return cz_err_set(err, CZ_EINVAL,
                      "%s: field 'policy': expected none, static or aimd, got '%s'", where,
                      policy);
}

bool cz_admission_admit(const cz_admission *a, uint32_t live)
{
    return a->kind == CZ_ADMIT_ALL || live < a->cap;
}

void cz_admission_tick(cz_admission *a, double measured_s, double budget_s, uint32_t live)
{
    if (a->kind != CZ_ADMIT_AIMD || isnan(measured_s))
        return;
    if (measured_s > a->target_fraction * budget_s) {
        double c = floor(a->decrease * (double)live);
        a->cap = c < 1.0 ? 1 : (uint32_t)c;
    } else if (a->cap != UINT32_MAX && (uint64_t)live + a->margin >= a->cap) {
        a->cap++;
    }
}
