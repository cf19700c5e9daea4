/* cz_safetensors.c - see cz_safetensors.h. */
#include "cz_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cz_json.h"

#define CZ_ST_PATH_MAX 4096
/* Offsets and dimensions above 2^53 cannot be told apart in a JSON number (a double). */
#define CZ_ST_INT_MAX 9007199254740992.0

/* One mapped file and the tensors its header lists. */
typedef struct st_file {
    char *path;
    uint8_t *map;          /* the mapping (NULL for an empty file) */
    size_t size;
    uint32_t n;
    cz_st_tensor *t;       /* in header order; names owned here */
    const cz_st_tensor **sorted; /* the same, by name */
} st_file;

struct cz_safetensors {
    char *path;            /* what was opened: a file or an index */
    st_file *files;
    uint32_t n_files;
    uint32_t n;
    const cz_st_tensor **by_name; /* visible tensors, sorted by name */
};

static const char *const dtype_names[] = {"F32", "BF16", "F16"};
static const size_t dtype_sizes[] = {4, 2, 2};

const char *cz_st_dtype_name(cz_st_dtype dt)
{
    return (unsigned)dt < CZ_ARRAY_LEN(dtype_names) ? dtype_names[dt] : "unknown";
}

size_t cz_st_dtype_size(cz_st_dtype dt)
{
    CZ_ASSERT((unsigned)dt < CZ_ARRAY_LEN(dtype_sizes));
    return dtype_sizes[dt];
}

/* ---- one file -------------------------------------------------------------------------- */

static void file_free(st_file *f)
{
    for (uint32_t i = 0; i < f->n; i++)
        free((char *)f->t[i].name);
    free(f->t);
    free(f->sorted);
    if (f->map)
        munmap(f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* "(64, 32)" into buf. */
static void shape_str(char *buf, size_t n, uint32_t ndim, const uint64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "(");
    for (uint32_t i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "%s)", ndim == 1 ? "," : "");
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return false;
    double v = it->valuedouble;
    if (!isfinite(v) || v < 0.0 || v > CZ_ST_INT_MAX || v != floor(v))
        return false;
    *out = (uint64_t)v;
    return true;
}

/* Parses one tensor entry `e` (named `tname`) of file `name` into *t; `data_size` is the
 * data section's length. */
static cz_status parse_entry(const cJSON *e, const char *name, const char *tname,
                             size_t data_size, cz_st_tensor *t, uint64_t *begin, cz_err *err)
{
    if (!cJSON_IsObject(e))
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': expected an object with dtype, shape and "
                          "data_offsets",
                          name, tname);
    const cJSON *it;
    cJSON_ArrayForEach(it, e)
    {
        if (strcmp(it->string, "dtype") != 0 && strcmp(it->string, "shape") != 0 &&
            strcmp(it->string, "data_offsets") != 0)
            return cz_err_set(err, CZ_EFORMAT,
                              "%s: tensor '%s': unexpected key '%s' (expected dtype, shape and "
                              "data_offsets)",
                              name, tname, it->string);
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt || !sh || !off)
        return cz_err_set(err, CZ_EFORMAT, "%s: tensor '%s': missing field '%s'", name, tname,
                          !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!cJSON_IsString(dt))
        return cz_err_set(err, CZ_EFORMAT, "%s: tensor '%s': field 'dtype': expected a string",
                          name, tname);
    bool known = false;
    for (size_t i = 0; i < CZ_ARRAY_LEN(dtype_names); i++) {
        if (strcmp(dt->valuestring, dtype_names[i]) == 0) {
            t->dtype = (cz_st_dtype)i;
            known = true;
        }
    }
    if (!known)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': dtype '%.32s' is not supported (expected F32, BF16 "
                          "or F16)",
                          name, tname, dt->valuestring);
    int nd = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : -1;
    if (nd < 0 || nd > CZ_ST_MAX_DIMS)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': field 'shape': expected an array of at most %d "
                          "non-negative integers",
                          name, tname, CZ_ST_MAX_DIMS);
    t->ndim = (uint32_t)nd;
    double elems = 1.0;
    uint64_t count = 1;
    uint32_t k = 0;
    cJSON_ArrayForEach(it, sh)
    {
        if (!json_uint(it, &t->shape[k]))
            return cz_err_set(err, CZ_EFORMAT,
                              "%s: tensor '%s': field 'shape': dimension %u: expected a "
                              "non-negative integer",
                              name, tname, k);
        elems *= (double)t->shape[k];
        count *= t->shape[k];
        k++;
    }
    int no = cJSON_IsArray(off) ? cJSON_GetArraySize(off) : -1;
    uint64_t b = 0, en = 0;
    if (no != 2 || !json_uint(cJSON_GetArrayItem(off, 0), &b) ||
        !json_uint(cJSON_GetArrayItem(off, 1), &en))
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': field 'data_offsets': expected [begin, end], two "
                          "non-negative integers",
                          name, tname);
    if (en < b)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': field 'data_offsets': end %llu is before begin %llu",
                          name, tname, (unsigned long long)en, (unsigned long long)b);
    if (en > data_size)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': field 'data_offsets': [%llu, %llu) runs past the "
                          "end of the data section (%zu bytes)",
                          name, tname, (unsigned long long)b, (unsigned long long)en,
                          data_size);
    double want = elems * (double)dtype_sizes[t->dtype];
    if (want != (double)(en - b) || want > CZ_ST_INT_MAX) {
        char s[256];
        shape_str(s, sizeof s, t->ndim, t->shape);
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu) hold %llu bytes, expected "
                          "%.0f (shape %s of %s)",
                          name, tname, (unsigned long long)b, (unsigned long long)en,
                          (unsigned long long)(en - b), want, s, dtype_names[t->dtype]);
    }
    t->nbytes = count * dtype_sizes[t->dtype];
    *begin = b;
    return CZ_OK;
}

typedef struct span {
    uint64_t begin, end;
    uint32_t idx;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Checks that the tensors of f tile its data section [0, data_size) exactly. */
static cz_status check_tiling(const st_file *f, const uint64_t *begins, size_t data_size,
                              const char *name, cz_err *err)
{
    span *sp = cz_xcalloc(f->n ? f->n : 1, sizeof *sp);
    for (uint32_t i = 0; i < f->n; i++)
        sp[i] = (span){begins[i], begins[i] + f->t[i].nbytes, i};
    qsort(sp, f->n, sizeof *sp, span_cmp);
    uint64_t at = 0;
    cz_status st = CZ_OK;
    for (uint32_t i = 0; i < f->n && st == CZ_OK; i++) {
        if (sp[i].begin < at)
            st = cz_err_set(err, CZ_EFORMAT,
                            "%s: tensor '%s': bytes [%llu, %llu) overlap tensor '%s' (bytes "
                            "[%llu, %llu))",
                            name, f->t[sp[i].idx].name, (unsigned long long)sp[i].begin,
                            (unsigned long long)sp[i].end, f->t[sp[i - 1].idx].name,
                            (unsigned long long)sp[i - 1].begin,
                            (unsigned long long)sp[i - 1].end);
        else if (sp[i].begin > at)
            st = cz_err_set(err, CZ_EFORMAT,
                            "%s: bytes [%llu, %llu) of the data section belong to no tensor "
                            "(the next, '%s', begins at %llu)",
                            name, (unsigned long long)at, (unsigned long long)sp[i].begin,
                            f->t[sp[i].idx].name, (unsigned long long)sp[i].begin);
        at = sp[i].end > at ? sp[i].end : at;
    }
    if (st == CZ_OK && at != data_size)
        st = cz_err_set(err, CZ_EFORMAT,
                        "%s: the data section holds %zu bytes, but its tensors end at byte %llu",
                        name, data_size, (unsigned long long)at);
    free(sp);
    return st;
}

static int tensor_ptr_cmp(const void *a, const void *b)
{
    const cz_st_tensor *x = *(const cz_st_tensor *const *)a;
    const cz_st_tensor *y = *(const cz_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Parses and validates the image data[0..size) named `name` into *f (whose path and
 * mapping the caller sets). */
static cz_status parse_file(const uint8_t *data, size_t size, const char *name, st_file *f,
                            cz_err *err)
{
    if (size < 8)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: %zu bytes, too short for the 8-byte header length of a "
                          "safetensors file",
                          name, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | data[i];
    if (n > CZ_ST_HEADER_MAX)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: header length %llu: expected at most %u bytes (not a safetensors "
                          "file?)",
                          name, (unsigned long long)n, CZ_ST_HEADER_MAX);
    if (n > size - 8)
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: header length %llu runs past the end of the file (%zu bytes "
                          "after the length)",
                          name, (unsigned long long)n, size - 8);
    if (n < 2 || data[8] != '{')
        return cz_err_set(err, CZ_EFORMAT,
                          "%s: the header must be a JSON object starting with '{'", name);
    char *text = cz_xmalloc((size_t)n + 1);
    memcpy(text, data + 8, (size_t)n);
    text[n] = '\0';
    char where[CZ_ST_PATH_MAX + 16];
    snprintf(where, sizeof where, "%s: header", name);
    cJSON *j = NULL;
    cz_status st = cz_text_check(text, (size_t)n, where, err);
    if (st == CZ_OK)
        st = cz_json_parse(text, where, &j, err);
    free(text);
    if (st != CZ_OK)
        return st;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cz_err_set(err, CZ_EFORMAT, "%s: the header must be a JSON object", name);
    }
    size_t data_size = size - 8 - (size_t)n;
    uint32_t count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, j) count++;
    f->t = cz_xcalloc(count ? count : 1, sizeof *f->t);
    uint64_t *begins = cz_xcalloc(count ? count : 1, sizeof *begins);
    const uint8_t *base = data + 8 + n;
    cJSON_ArrayForEach(it, j)
    {
        if (strcmp(it->string, "__metadata__") == 0) {
            const cJSON *m;
            if (!cJSON_IsObject(it)) {
                st = cz_err_set(err, CZ_EFORMAT,
                                "%s: '__metadata__': expected an object of strings", name);
                break;
            }
            cJSON_ArrayForEach(m, it)
            {
                if (!cJSON_IsString(m)) {
                    st = cz_err_set(err, CZ_EFORMAT,
                                    "%s: '__metadata__': key '%s': expected a string", name,
                                    m->string);
                    break;
                }
            }
            if (st != CZ_OK)
                break;
            continue;
        }
        cz_st_tensor *t = &f->t[f->n];
        uint64_t b = 0;
        if ((st = parse_entry(it, name, it->string, data_size, t, &b, err)) != CZ_OK)
            break;
        t->name = cz_xstrdup(it->string);
        t->file = f->path ? f->path : name;
        t->data = base + b;
        begins[f->n] = b;
        f->n++;
    }
    cJSON_Delete(j);
    if (st == CZ_OK) {
        /* by name (a name listed twice was refused by the JSON parser) */
        const cz_st_tensor **s = cz_xcalloc(f->n ? f->n : 1, sizeof *s);
        for (uint32_t i = 0; i < f->n; i++)
            s[i] = &f->t[i];
        qsort(s, f->n, sizeof *s, tensor_ptr_cmp);
        f->sorted = s;
    }
    if (st == CZ_OK)
        st = check_tiling(f, begins, data_size, name, err);
    free(begins);
    return st;
}

cz_status cz_st_check(const uint8_t *data, size_t size, const char *name, cz_err *err)
{
    CZ_ASSERT(name != NULL && (data != NULL || size == 0));
    st_file f = {0};
    cz_status st = parse_file(data, size, name, &f, err);
    file_free(&f);
    return st;
}

/* Maps and validates the file at `path` into *f. */
static cz_status file_open(const char *path, st_file *f, cz_err *err)
{
    memset(f, 0, sizeof *f);
    /* not blocking: a FIFO under the name would wait for a writer for ever */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return cz_err_open(err, path, errno);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return cz_err_set(err, CZ_EIO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return cz_err_set(err, CZ_EINVAL, "%s: not a regular file (%s): expected a safetensors "
                          "file",
                          path, S_ISDIR(sb.st_mode)    ? "a folder"
                                : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                                       : "a device or socket");
    }
    f->path = cz_xstrdup(path);
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(f->path);
            f->path = NULL;
            return cz_err_set(err, CZ_EIO, "%s: cannot map: %s", path, strerror(e));
        }
        f->map = m;
    }
    close(fd);
    cz_status st = parse_file(f->map, f->size, path, f, err);
    if (st != CZ_OK)
        file_free(f);
    return st;
}

/* ---- checkpoints ----------------------------------------------------------------------- */

static cz_safetensors *ckpt_new(const char *path)
{
    cz_safetensors *st = cz_xcalloc(1, sizeof *st);
    st->path = cz_xstrdup(path);
    return st;
}

cz_status cz_st_open(const char *path, cz_safetensors **out, cz_err *err)
{
    CZ_ASSERT(path != NULL && out != NULL);
    *out = NULL;
    cz_safetensors *st = ckpt_new(path);
    st->files = cz_xcalloc(1, sizeof *st->files);
    cz_status s = file_open(path, &st->files[0], err);
    if (s != CZ_OK) {
        cz_st_close(st);
        return s;
    }
    st->n_files = 1;
    st_file *f = &st->files[0];
    st->n = f->n;
    st->by_name = cz_xcalloc(f->n ? f->n : 1, sizeof *st->by_name);
    for (uint32_t i = 0; i < f->n; i++)
        st->by_name[i] = &f->t[i];
    qsort(st->by_name, st->n, sizeof *st->by_name, tensor_ptr_cmp);
    *out = st;
    return CZ_OK;
}

/* The folder of `path` with a trailing '/' ("" when it has none) into buf. */
static void dir_prefix(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) + 1 : 0;
    if (len >= n)
        len = n - 1;
    memcpy(buf, path, len);
    buf[len] = '\0';
}

cz_status cz_st_open_index(const char *index_path, cz_safetensors **out, cz_err *err)
{
    CZ_ASSERT(index_path != NULL && out != NULL);
    *out = NULL;
    cJSON *j = NULL;
    cz_status s = cz_json_load(index_path, &j, err);
    if (s != CZ_OK)
        return s;
    cz_safetensors *st = ckpt_new(index_path);
    const cJSON *wm = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "weight_map")
                                        : NULL;
    if (!cJSON_IsObject(wm)) {
        s = cz_err_set(err, CZ_EFORMAT,
                       "%s: expected an object with a 'weight_map' object (tensor name -> shard "
                       "file)",
                       index_path);
        goto fail;
    }
    uint32_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) n++;
    if (n == 0) {
        s = cz_err_set(err, CZ_EFORMAT, "%s: 'weight_map' names no tensor", index_path);
        goto fail;
    }
    /* distinct shard names, in order of first appearance */
    const char **shards = cz_xcalloc(n, sizeof *shards);
    uint32_t *shard_of = cz_xcalloc(n, sizeof *shard_of);
    uint32_t n_shards = 0, k = 0;
    cJSON_ArrayForEach(it, wm)
    {
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0' || strchr(it->valuestring, '/')) {
            s = cz_err_set(err, CZ_EFORMAT,
                           "%s: weight_map: tensor '%s': expected the file name of a shard in "
                           "the index's folder",
                           index_path, it->string);
            break;
        }
        uint32_t f = 0;
        while (f < n_shards && strcmp(shards[f], it->valuestring) != 0)
            f++;
        if (f == n_shards)
            shards[n_shards++] = it->valuestring;
        shard_of[k++] = f;
    }
    if (s == CZ_OK) {
        char dir[CZ_ST_PATH_MAX];
        dir_prefix(index_path, dir, sizeof dir);
        st->files = cz_xcalloc(n_shards, sizeof *st->files);
        for (uint32_t f = 0; f < n_shards && s == CZ_OK; f++) {
            char path[CZ_ST_PATH_MAX * 2];
            snprintf(path, sizeof path, "%s%s", dir, shards[f]);
            s = file_open(path, &st->files[f], err);
            if (s == CZ_ENOTFOUND)
                cz_err_set(err, CZ_ENOTFOUND, "%s: weight_map: shard '%s' is missing (no file %s)",
                           index_path, shards[f], path);
            if (s == CZ_OK)
                st->n_files++;
        }
    }
    if (s == CZ_OK) {
        st->by_name = cz_xcalloc(n, sizeof *st->by_name);
        k = 0;
        cJSON_ArrayForEach(it, wm)
        {
            st_file *f = &st->files[shard_of[k++]];
            const cz_st_tensor key = {.name = it->string}, *kp = &key;
            const cz_st_tensor **hit =
                f->n ? bsearch(&kp, f->sorted, f->n, sizeof *f->sorted, tensor_ptr_cmp) : NULL;
            if (hit)
                st->by_name[st->n] = *hit;
            if (!hit) {
                s = cz_err_set(err, CZ_EFORMAT,
                               "%s: weight_map: tensor '%s' is not in its shard %s", index_path,
                               it->string, f->path);
                break;
            }
            st->n++;
        }
    }
    if (s == CZ_OK) /* names are distinct: the JSON parser refuses a key named twice */
        qsort(st->by_name, st->n, sizeof *st->by_name, tensor_ptr_cmp);
    free(shards);
    free(shard_of);
    if (s != CZ_OK)
        goto fail;
    cJSON_Delete(j);
    *out = st;
    return CZ_OK;
fail:
    cJSON_Delete(j);
    cz_st_close(st);
    return s;
}

cz_status cz_st_open_dir(const char *dir, cz_safetensors **out, cz_err *err)
{
    CZ_ASSERT(dir != NULL && out != NULL);
    char path[CZ_ST_PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir) >=
        sizeof path)
        return cz_err_set(err, CZ_ERANGE, "%s: path too long", dir);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return cz_err_open(err, dir, errno);
    if (!S_ISDIR(sb.st_mode))
        return cz_err_open(err, dir, ENOTDIR);
    if (access(path, F_OK) == 0)
        return cz_st_open_index(path, out, err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) == 0)
        return cz_st_open(path, out, err);
    return cz_err_set(err, CZ_ENOTFOUND,
                      "%s: no model.safetensors or model.safetensors.index.json in the folder",
                      dir);
}

const cz_st_tensor *cz_st_find(const cz_safetensors *st, const char *name)
{
    CZ_ASSERT(st != NULL && name != NULL);
    uint32_t lo = 0, hi = st->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid]->name, name);
        if (c == 0)
            return st->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

cz_status cz_st_get(const cz_safetensors *st, const char *name, uint32_t ndim,
                    const uint64_t *shape, const cz_st_tensor **out, cz_err *err)
{
    CZ_ASSERT(st != NULL && name != NULL && out != NULL && ndim <= CZ_ST_MAX_DIMS);
    char want[256];
    shape_str(want, sizeof want, ndim, shape);
    const cz_st_tensor *t = cz_st_find(st, name);
    *out = NULL;
    if (!t)
        return cz_err_set(err, CZ_ENOTFOUND, "%s: no tensor '%s' (expected shape %s)", st->path,
                          name, want);
    bool same = t->ndim == ndim;
    for (uint32_t i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char got[256];
        shape_str(got, sizeof got, t->ndim, t->shape);
        return cz_err_set(err, CZ_EINVAL, "%s: tensor '%s': expected shape %s, got %s", t->file,
                          name, want, got);
    }
    *out = t;
    return CZ_OK;
}

uint32_t cz_st_count(const cz_safetensors *st)
{
    CZ_ASSERT(st != NULL);
    return st->n;
}

const cz_st_tensor *cz_st_at(const cz_safetensors *st, uint32_t i)
{
    CZ_ASSERT(st != NULL && i < st->n);
    return st->by_name[i];
}

const char *cz_st_path(const cz_safetensors *st)
{
    CZ_ASSERT(st != NULL);
    return st->path;
}

void cz_st_close(cz_safetensors *st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < st->n_files; i++)
        file_free(&st->files[i]);
    /* a shard that failed to open is freed by file_open itself */
    free(st->files);
    free(st->by_name);
    free(st->path);
    free(st);
}
