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
 * On a syntax error the message gives the line and column; a NUL byte in the file is
 * CZ_EFORMAT naming its line and column (cz_file_read_all). */
cz_status cz_json_load(const char *path, cJSON **out, cz_err *err);

/* Parses `text` (named `name` in messages) into *out. An object that names a key twice is
 * CZ_EFORMAT naming the key's path (cJSON would keep both and lookups see the first, so a
 * later override would be silently ignored). */
cz_status cz_json_parse(const char *text, const char *name, cJSON **out, cz_err *err);

/* Reads a whole text file into a NUL-terminated buffer (caller frees); *len_out may be
 * NULL. Every reader of configs, cards and traces goes through it. A UTF-8 byte-order
 * mark at its start (a spreadsheet's or an editor's export writes one) is dropped. A NUL
 * byte inside the
 * file (binary data, or a corrupted text file that the C string functions would cut short)
 * fails with CZ_EFORMAT: "FILE:LINE:COL: found a NUL byte, expected text". */
cz_status cz_file_read_all(const char *path, char **out, size_t *len_out, cz_err *err);

/* Fails with CZ_EFORMAT, naming `name`, the line and the column, when the `len` bytes of
 * `text` hold a NUL byte; CZ_OK otherwise. */
cz_status cz_text_check(const char *text, size_t len, const char *name, cz_err *err);

/* The length of the UTF-8 byte-order mark `text` starts with: 3, or 0 when it has none.
 * `text` holds at least `len` bytes. Every text reader skips it at the start of a file. */
size_t cz_text_bom(const char *text, size_t len);

/* Writes the file at `path` (created or truncated): `write(f, ctx)` fills it and returns
 * false on a write error. On any failure the file is removed (when it is a regular file,
 * not a device such as /dev/stdout), so a failure leaves no half-written file. It is written in place: to replace an existing file atomically, or to
 * leave nothing behind when the process is killed, write to a temporary path and rename it
 * (the CLI does both through cli/cz_out.h). */
typedef bool (*cz_file_writer)(FILE *f, const void *ctx);
cz_status cz_file_write(const char *path, cz_file_writer write, const void *ctx, cz_err *err);

/* Typed getters. `where` names the object in messages, by the convention
 * "<file>: <dotted.path>" ("exp.json: workload.synthetic") or "<file>" for the top level.
 * If the key is absent: required -> CZ_EINVAL "missing field"; optional -> CZ_OK and
 * *out untouched (so callers preset defaults). Present with the wrong type or outside
 * [min, max] -> CZ_EINVAL "<where>: field '<key>': expected ..." with the error located
 * on (where, key) (cz_err_locate). */
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
 * typos in configs), the error located on (where, that key). */
cz_status cz_json_check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                             int n_allowed, cz_err *err);

/* Applies an override "a.b.c=value" to the object `root`: intermediate objects are
 * created as needed. The value is parsed as JSON when the whole of it is one JSON value
 * (whitespace around it allowed): "64", "true", "[1, 2]", "\"text\""; anything else is
 * taken as a string ("64junk", "2024-run", "drop"). Fails with CZ_EINVAL, naming the
 * assignment, on a missing '=', an empty key in the path ("a..b", ".a", "a."), or a key
 * on the path that holds a value other than an object. */
cz_status cz_json_set_path(cJSON *root, const char *assignment, cz_err *err);

/* Whether the config field at the dotted path `field_path` ("server.max_num_seqs") is at or
 * under the key path of `assignment` ("server.max_num_seqs=64", "server={...}"). */
bool cz_json_set_covers(const char *assignment, const char *field_path);

/* Serialises `json` to `path` with cz_file_write (removed on a failure). `formatted`
 * selects indentation. */
cz_status cz_json_write_file(const cJSON *json, const char *path, bool formatted, cz_err *err);

/* Adds a number rounded to 6 significant digits past the point when finite, null when
 * not (JSON has no NaN). Returns the added item. */
cJSON *cz_json_add_num(cJSON *obj, const char *key, double v);

/* The value at a dotted path ("classes.rt.p90_ttft_ms"; an array element by its index:
 * "stages.0.total_kv_reload_s"), or NULL. */
const cJSON *cz_json_get_path(const cJSON *j, const char *path);

/* A value as a label (caller frees): numbers (%g) and strings as they are, an object with
 * a "name" as the name followed by its other members as key=value, null or NULL as
 * "null", anything else as compact JSON. */
char *cz_json_value_label(const cJSON *v);

#endif
