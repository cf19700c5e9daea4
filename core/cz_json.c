/* cz_json.c - see cz_json.h. */
#include "cz_json.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

cz_status cz_file_read_all(const char *path, char **out, size_t *len_out, cz_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cz_err_open(err, path, errno);
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return cz_err_set(err, CZ_EINVAL, "%s: a folder, expected a file", path);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = cz_xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            buf = cz_xrealloc(buf, cap, 1);
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return cz_err_set(err, CZ_EIO, "%s: read error", path);
    }
    buf[len] = '\0';
    size_t bom = cz_text_bom(buf, len);
    if (bom) {
        memmove(buf, buf + bom, len - bom + 1);
        len -= bom;
    }
    cz_status st = cz_text_check(buf, len, path, err);
    if (st != CZ_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    if (len_out)
        *len_out = len;
    return CZ_OK;
}

size_t cz_text_bom(const char *text, size_t len)
{
    const unsigned char *u = (const unsigned char *)text;
    return len >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF ? 3 : 0;
}

cz_status cz_text_check(const char *text, size_t len, const char *name, cz_err *err)
{
    const char *nul = memchr(text, '\0', len);
    if (!nul)
        return CZ_OK;
    size_t line = 1, col = 1;
    for (const char *p = text; p < nul; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return cz_err_set(err, CZ_EFORMAT, "%s:%zu:%zu: found a NUL byte, expected text", name, line,
                      col);
}

/* The first key an object of `j` (depth first) names twice, its path written to path[cap]
 * as dotted keys with [i] for array elements; false when there is none. */
static bool find_duplicate(const cJSON *j, char *path, size_t len, size_t cap)
{
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
        return false;
    size_t i = 0;
    for (const cJSON *a = j->child; a; a = a->next, i++) {
        int n;
        if (cJSON_IsObject(j)) {
            n = snprintf(path + len, cap - len, "%s%s", len ? "." : "", a->string);
            for (const cJSON *b = j->child; b != a; b = b->next)
                if (strcmp(a->string, b->string) == 0)
                    return true;
        } else {
            n = snprintf(path + len, cap - len, "[%zu]", i);
        }
        size_t l = n < 0 ? len : len + (size_t)n < cap ? len + (size_t)n : cap - 1;
        if (find_duplicate(a, path, l, cap))
            return true;
        path[len] = '\0';
    }
    return false;
}

cz_status cz_json_parse(const char *text, const char *name, cJSON **out, cz_err *err)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        if (!at)
            at = end ? end : text;
        int line = 1, col = 1;
        for (const char *p = text; *p && p < at; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return cz_err_set(err, CZ_EFORMAT, "%s:%d:%d: not valid JSON", name, line, col);
    }
    char path[512] = "";
    if (find_duplicate(j, path, 0, sizeof path)) {
        cJSON_Delete(j);
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: key '%s' appears twice in one object (expected each key once)",
                          name, path);
    }
    *out = j;
    return CZ_OK;
}

cz_status cz_json_load(const char *path, cJSON **out, cz_err *err)
{
    char *text = NULL;
    cz_status st = cz_file_read_all(path, &text, NULL, err);
    if (st != CZ_OK)
        return st;
    st = cz_json_parse(text, path, out, err);
    free(text);
    return st;
}

static const char *type_name(const cJSON *it)
{
    if (cJSON_IsNumber(it)) return "a number";
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsNull(it)) return "null";
    if (cJSON_IsArray(it)) return "an array";
    if (cJSON_IsObject(it)) return "an object";
    return "an unknown value";
}

static cz_status lookup(const cJSON *obj, const char *where, const char *key, bool required,
                        const cJSON **it, cz_err *err)
{
    *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!*it && required)
        return cz_err_set(err, CZ_EINVAL, "%s: missing field '%s'", where, key);
    return CZ_OK;
}

cz_status cz_json_num(const cJSON *obj, const char *where, const char *key, bool required,
                      double min, double max, double *out, cz_err *err)
{
    const cJSON *it;
    cz_status st = lookup(obj, where, key, required, &it, err);
    if (st != CZ_OK || !it)
        return st;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < min ||
        it->valuedouble > max)
        return cz_err_field(err, CZ_EINVAL, where, key, "expected a number in [%g, %g], got %s",
                            min, max,
                            cJSON_IsNumber(it) ? "a number outside that range" : type_name(it));
    *out = it->valuedouble;
    return CZ_OK;
}

cz_status cz_json_u64(const cJSON *obj, const char *where, const char *key, bool required,
                      uint64_t min, uint64_t max, uint64_t *out, cz_err *err)
{
    const cJSON *it;
    cz_status st = lookup(obj, where, key, required, &it, err);
    if (st != CZ_OK || !it)
        return st;
    double v = cJSON_IsNumber(it) ? it->valuedouble : -1.0;
    /* (double)max rounds up to 2^64 for the largest maxima, so the range is checked on the
     * integer once v is known to fit one (v < 2^64; NaN and infinities fail v == floor(v) or
     * that bound) */
    if (!cJSON_IsNumber(it) || v != floor(v) || v < 0.0 || v >= 0x1p64 || (uint64_t)v < min ||
        (uint64_t)v > max)
        return cz_err_field(err, CZ_EINVAL, where, key,
                            "expected an integer in [%llu, %llu], got %s", (unsigned long long)min,
                            (unsigned long long)max,
                            cJSON_IsNumber(it) ? "a number outside that set" : type_name(it));
    *out = (uint64_t)v;
    return CZ_OK;
}

cz_status cz_json_bool(const cJSON *obj, const char *where, const char *key, bool required,
                       bool *out, cz_err *err)
{
    const cJSON *it;
    cz_status st = lookup(obj, where, key, required, &it, err);
    if (st != CZ_OK || !it)
        return st;
    if (!cJSON_IsBool(it))
        return cz_err_field(err, CZ_EINVAL, where, key, "expected true or false, got %s",
                            type_name(it));
    *out = cJSON_IsTrue(it);
    return CZ_OK;
}

cz_status cz_json_str(const cJSON *obj, const char *where, const char *key, bool required,
                      const char **out, cz_err *err)
{
    const cJSON *it;
    cz_status st = lookup(obj, where, key, required, &it, err);
    if (st != CZ_OK || !it)
        return st;
    if (!cJSON_IsString(it))
        return cz_err_field(err, CZ_EINVAL, where, key, "expected a string, got %s",
                            type_name(it));
    *out = it->valuestring;
    return CZ_OK;
}

cz_status cz_json_obj(const cJSON *obj, const char *where, const char *key, bool required,
                      const cJSON **out, cz_err *err)
{
    const cJSON *it;
    *out = NULL;
    cz_status st = lookup(obj, where, key, required, &it, err);
    if (st != CZ_OK || !it)
        return st;
    if (!cJSON_IsObject(it))
        return cz_err_field(err, CZ_EINVAL, where, key, "expected an object, got %s",
                            type_name(it));
    *out = it;
    return CZ_OK;
}

cz_status cz_json_check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                             int n_allowed, cz_err *err)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        bool ok = false;
        for (int i = 0; i < n_allowed && !ok; i++)
            ok = it->string && strcmp(it->string, allowed[i]) == 0;
        if (!ok) {
            char list[512] = "";
            size_t used = 0;
            for (int i = 0; i < n_allowed && used + 1 < sizeof list; i++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 allowed[i]);
                if (w < 0)
                    break;
                used += (size_t)w;
            }
            cz_err_set(err, CZ_EINVAL, "%s: unknown field '%s' (expected one of: %s)", where,
                       it->string ? it->string : "?", list);
            if (it->string)
                cz_err_locate(err, where, it->string);
            return CZ_EINVAL;
        }
    }
    return CZ_OK;
}

/* Whether the key path `path` (`len` bytes) has no empty key: not empty, no leading or
 * trailing dot, no two dots in a row. */
static bool set_path_ok(const char *path, size_t len)
{
    if (len == 0 || path[0] == '.' || path[len - 1] == '.')
        return false;
    for (size_t i = 1; i < len; i++)
        if (path[i] == '.' && path[i - 1] == '.')
            return false;
    return true;
}

/* The value of an override: the whole text parsed as JSON when it is one JSON value with
 * nothing but whitespace after it ("64", "false", "[1, 2]", "{\"name\": \"bros\"}"), the
 * text as a string otherwise ("64junk", "2024-run", "drop"). */
static cJSON *set_value(const char *text)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(text, &end, 1);
    if (v) {
        while (end && *end && isspace((unsigned char)*end))
            end++;
        if (!end || *end) {
            cJSON_Delete(v);
            v = NULL;
        }
    }
    if (!v)
        v = cJSON_CreateString(text);
    CZ_ASSERT(v != NULL);
    return v;
}

cz_status cz_json_set_path(cJSON *root, const char *assignment, cz_err *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return cz_err_set(err, CZ_EINVAL, "--set %s: expected key.path=value", assignment);
    size_t klen = (size_t)(eq - assignment);
    if (!set_path_ok(assignment, klen))
        return cz_err_set(err, CZ_EINVAL,
                          "--set %s: empty key in the path '%.*s' (expected keys separated by "
                          "single dots, such as server.max_num_seqs)",
                          assignment, (int)klen, assignment);
    if (!cJSON_IsObject(root))
        return cz_err_set(err, CZ_EINVAL, "--set %s: the config is not a JSON object",
                          assignment);
    char *path = cz_xmalloc(klen + 1);
    memcpy(path, assignment, klen);
    path[klen] = '\0';

    cJSON *node = root;
    cz_status st = CZ_OK;
    char *key = path;
    for (;;) {
        char *dot = strchr(key, '.');
        if (!dot) {
            cJSON *v = set_value(eq + 1);
            if (cJSON_GetObjectItemCaseSensitive(node, key))
                cJSON_ReplaceItemInObjectCaseSensitive(node, key, v);
            else
                cJSON_AddItemToObject(node, key, v);
            break;
        }
        *dot = '\0';
        cJSON *child = cJSON_GetObjectItemCaseSensitive(node, key);
        if (!child) {
            child = cJSON_AddObjectToObject(node, key);
            CZ_ASSERT(child != NULL);
        } else if (!cJSON_IsObject(child)) {
            st = cz_err_set(err, CZ_EINVAL, "--set %s: '%s' is not an object in the config",
                            assignment, key);
            break;
        }
        node = child;
        key = dot + 1;
    }
    free(path);
    return st;
}

bool cz_json_set_covers(const char *assignment, const char *field_path)
{
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return false;
    size_t klen = (size_t)(eq - assignment);
    return strncmp(assignment, field_path, klen) == 0 &&
           (field_path[klen] == '\0' || field_path[klen] == '.');
}

cz_status cz_file_write(const char *path, cz_file_writer write, const void *ctx, cz_err *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return cz_err_set(err, CZ_EIO, "%s: cannot write: %s", path, strerror(errno));
    struct stat sb;
    bool regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    errno = 0;
    bool bad = !write(f, ctx) || ferror(f) != 0;
    int saved = errno;
    bad |= fclose(f) != 0;
    if (!bad)
        return CZ_OK;
    if (saved == 0)
        saved = errno;
    if (regular) /* never a device such as /dev/stdout */
        remove(path);
    return cz_err_set(err, CZ_EIO, "%s: cannot write: %s", path,
                      saved ? strerror(saved) : "write error");
}

static bool write_text_line(FILE *f, const void *text)
{
    return fputs(text, f) >= 0 && fputc('\n', f) != EOF;
}

cz_status cz_json_write_file(const cJSON *json, const char *path, bool formatted, cz_err *err)
{
    char *text = formatted ? cJSON_Print(json) : cJSON_PrintUnformatted(json);
    CZ_ASSERT(text != NULL);
    cz_status st = cz_file_write(path, write_text_line, text, err);
    cJSON_free(text);
    return st;
}

cJSON *cz_json_add_num(cJSON *obj, const char *key, double v)
{
    if (!isfinite(v))
        return cJSON_AddNullToObject(obj, key);
    return cJSON_AddNumberToObject(obj, key, v);
}

const cJSON *cz_json_get_path(const cJSON *j, const char *path)
{
    char key[256];
    while (j && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        if (cJSON_IsArray(j)) {
            char *end;
            long i = strtol(key, &end, 10);
            j = *key && !*end && i >= 0 && i < INT32_MAX ? cJSON_GetArrayItem(j, (int)i) : NULL;
        } else {
            j = cJSON_GetObjectItemCaseSensitive(j, key);
        }
        path += n + (dot ? 1 : 0);
    }
    return j;
}

char *cz_json_value_label(const cJSON *v)
{
    const cJSON *name = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "name") : NULL;
    if (!v || cJSON_IsNull(v))
        return cz_xstrdup("null");
    if (cJSON_IsNumber(v)) {
        char b[64];
        snprintf(b, sizeof b, "%g", v->valuedouble);
        return cz_xstrdup(b);
    }
    if (cJSON_IsString(v))
        return cz_xstrdup(v->valuestring);
    if (!cJSON_IsString(name)) {
        char *t = cJSON_PrintUnformatted(v);
        char *b = cz_xstrdup(t ? t : "");
        cJSON_free(t);
        return b;
    }
    size_t len = strlen(name->valuestring), cap = len + 1;
    char *b = cz_xmalloc(cap);
    memcpy(b, name->valuestring, len + 1);
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (it == name)
            continue;
        char *t = cJSON_PrintUnformatted(it);
        size_t add = 2 + strlen(it->string) + strlen(t ? t : "");
        b = cz_xrealloc(b, len + add + 1, 1);
        len += (size_t)snprintf(b + len, add + 1, " %s=%s", it->string, t ? t : "");
        cJSON_free(t);
    }
    return b;
}
