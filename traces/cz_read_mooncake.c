/* cz_read_mooncake.c - Mooncake FAST'25 JSONL reader (kvcache-ai/Mooncake; see
 * traces/data/mooncake_conversation/README.md).
 *
 * One request per line: {"timestamp": ms, "input_length": tokens, "output_length": tokens,
 * "hash_ids": [...]}, fields by name (other fields are ignored). Each line becomes a single-turn open-loop session
 * named "req-<line>"; hash_ids go to the workload's hash pool (512-token blocks) and must
 * number ceil(input_length / 512). */
#include "cz_traces_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_json.h"

#define CZ_MOONCAKE_BLOCK_TOKENS 512u

/* Converts the hash_ids array of one line into hashes[0..n), growing it. */
static cz_status read_hashes(const cJSON *arr, const char *where, uint32_t **hashes,
                             size_t *cap, uint32_t *n, cz_err *err)
{
    if (!cJSON_IsArray(arr))
        return cz_err_set(err, CZ_EINVAL, "%s: field 'hash_ids': expected an array of integers",
                          where);
    *n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
        if (!cJSON_IsNumber(it) || v < 0.0 || v > (double)UINT32_MAX || v != floor(v))
            return cz_err_set(err, CZ_EINVAL,
                              "%s: field 'hash_ids[%u]': expected an integer in [0, %u]", where,
                              *n, UINT32_MAX);
        cz_grow((void **)hashes, cap, (size_t)*n + 1, sizeof **hashes);
        (*hashes)[(*n)++] = (uint32_t)v;
    }
    return CZ_OK;
}

cz_status cz__mooncake_open(cz__rd *r, cz_workload *hdr, cz_err *err)
{
    snprintf(hdr->source, sizeof hdr->source, "mooncake");
    hdr->arrivals_given = true;
    hdr->hash_block_tokens = CZ_MOONCAKE_BLOCK_TOKENS;
    return cz__lines_open(&r->ls, r->path, err);
}

cz_status cz__mooncake_next(cz__rd *r, cz_workload *w, bool *more, cz_err *err)
{
    char *line;
    cz_status st = cz__lines_next(&r->ls, &line, err);
    *more = st == CZ_OK && line != NULL;
    if (!*more)
        return st;
    char where[CZ_ERR_MSG_MAX / 2];
    snprintf(where, sizeof where, "%s:%zu", r->path, r->ls.line);
    cJSON *rec = NULL;
    if ((st = cz__jsonl_parse(line, where, &rec, err)) != CZ_OK)
        return st;
    double ts_ms = 0.0;
    uint64_t in_tokens = 0, out_tokens = 0;
    uint32_t n_hash = 0;
    if (!cJSON_IsObject(rec))
        st = cz_err_set(err, CZ_EFORMAT, "%s: expected a JSON object per line", where);
    if (st == CZ_OK)
        st = cz_json_num(rec, where, "timestamp", true, 0.0, 1e15, &ts_ms, err);
    if (st == CZ_OK)
        st = cz_json_u64(rec, where, "input_length", true, 0, UINT32_MAX, &in_tokens, err);
    if (st == CZ_OK)
        st = cz_json_u64(rec, where, "output_length", true, 0, UINT32_MAX, &out_tokens, err);
    if (st == CZ_OK) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(rec, "hash_ids");
        st = arr ? read_hashes(arr, where, &r->hashes, &r->cap_hashes, &n_hash, err)
                 : cz_err_set(err, CZ_EINVAL, "%s: missing field 'hash_ids'", where);
    }
    uint64_t want = (in_tokens + CZ_MOONCAKE_BLOCK_TOKENS - 1) / CZ_MOONCAKE_BLOCK_TOKENS;
    if (st == CZ_OK && n_hash != want)
        st = cz_err_set(err, CZ_EINVAL,
                        "%s: field 'hash_ids': expected ceil(input_length / %u) = %llu "
                        "block hashes for input_length %llu, got %u",
                        where, CZ_MOONCAKE_BLOCK_TOKENS, (unsigned long long)want,
                        (unsigned long long)in_tokens, n_hash);
    cJSON_Delete(rec);
    if (st != CZ_OK)
        return st;
    char name[32];
    snprintf(name, sizeof name, "req-%zu", r->ls.line);
    cz_workload_begin_session(w, name, r->o.cls, CZ_TIMING_OPEN);
    cz_turn *t = cz_workload_add_turn(w);
    t->arrival_s = ts_ms / 1000.0;
    t->in_text_tokens = (uint32_t)in_tokens;
    t->out_text_tokens = (uint32_t)out_tokens;
    cz_workload_add_hashes(w, t, r->hashes, n_hash);
    return CZ_OK;
}
