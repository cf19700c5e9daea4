/* cz_json.h - cJSON helpers for configs, cards and JSON traces: loading with located
 * parse errors, typed field access whose errors name the file, the field path and
 * what was expected, unknown-key checks, and `--set key=value` overrides. */
#ifndef CZ_JSON_H
#define CZ_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cz_base.h"

/* Reads and parses the JSON file at `path` into *out (caller frees with cJSON_Delete).
 * On a syntax error the message gives the line and column. */
cz_status cz_json_load(const char *path, cJSON **out, cz_err *err);

/* Parses `text` (named `name` in messages) into *out. */
cz_status cz_json_parse(const char *text, const char *name, cJSON **out, cz_err *err);

/* Reads a whole file into a NUL-terminated buffer (caller frees); *len_out may be NULL. */
cz_status cz_file_read_all(const char *path, char **out, size_t *len_out, cz_err *err);

/* Writes a file atomically: `write(f, ctx)` fills a temporary file beside `path` (and
 * returns false on a write error), which is then renamed to `path`; on any failure the
 * temporary file is removed, so no half-written file is left. */
typedef bool (*cz_file_writer)(FILE *f, const void *ctx);
cz_status cz_file_write_atomic(const char *path, cz_file_writer write, const void *ctx,
                               cz_err *err);

/* Typed getters. `where` names the object in messages, e.g. "exp.json: workload".
 * If the key is absent: required -> CZ_EINVAL "missing field"; optional -> CZ_OK and
 * *out untouched (so callers preset defaults). Present with the wrong type or outside
 * [min, max] -> CZ_EINVAL naming the field and the expected range. */
cz_status cz_json_num(const cJSON *obj, const char *where, const char *key, bool required,
                      double min, double max, double *out, cz_err *err);
cz_status cz_json_u64(const cJSON *obj, const char *where, const char *key, bool required,
                      uint64_t min, uint64_t max, uint64_t *out, cz_err *err);
cz_status cz_json_bool(const cJSON *obj, const char *where, const char *key, bool required,
                       bool *out, cz_err *err);
/* *out points into the cJSON tree (valid while the tree lives). */
cz_status cz_json_str(const cJSON *obj, const char *where, const char *key, bool required,
                      const char **out, cz_err *err);
/* Optional or required child object; *out is NULL when optional and absent. */
cz_status cz_json_obj(const cJSON *obj, const char *where, const char *key, bool required,
                      const cJSON **out, cz_err *err);

/* Fails with CZ_EINVAL naming the first key of `obj` that is not in `allowed` (catches
 * typos in configs). */
cz_status cz_json_check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                             int n_allowed, cz_err *err);

/* Applies an override "a.b.c=value" to `root`: intermediate objects are created as
 * needed; the value is parsed as JSON when it is valid JSON (numbers, true, arrays) and
 * taken as a string otherwise. */
cz_status cz_json_set_path(cJSON *root, const char *assignment, cz_err *err);

/* Serialises `json` to `path` atomically: written to a temporary file beside it and
 * renamed, so a failure never leaves a half-written file. `formatted` selects
 * indentation. */
cz_status cz_json_write_file(const cJSON *json, const char *path, bool formatted, cz_err *err);

/* Adds a number rounded to 6 significant digits past the point when finite, null when
 * not (JSON has no NaN). Returns the added item. */
cJSON *cz_json_add_num(cJSON *obj, const char *key, double v);

#endif
