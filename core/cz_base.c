/* cz_base.c - status names, error formatting, assert failure, allocation helpers and the
 * data folder. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "cz_base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cz_version.h"

#define CZ_DATA_PATH_MAX 4096

const char *cz_strerror(cz_status status)
{
    switch (status) {
    case CZ_OK: return "ok";
    case CZ_EINVAL: return "invalid value";
    case CZ_EFORMAT: return "malformed input";
    case CZ_EIO: return "I/O error";
    case CZ_ENOMEM: return "out of memory";
    case CZ_ERANGE: return "value out of range";
    case CZ_ENOTFOUND: return "not found";
    case CZ_EINTERNAL: return "internal error";
    case CZ_EDEVICE: return "device error";
    }
    return "unknown status";
}

cz_status cz_err_set(cz_err *err, cz_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
        err->field_where[0] = '\0';
        err->field_key[0] = '\0';
    }
    return status;
}

void cz_err_locate(cz_err *err, const char *where, const char *key)
{
    if (!err)
        return;
    snprintf(err->field_where, sizeof err->field_where, "%s", where);
    snprintf(err->field_key, sizeof err->field_key, "%s", key);
}

cz_status cz_err_field(cz_err *err, cz_status status, const char *where, const char *key,
                       const char *fmt, ...)
{
    if (!err)
        return status;
    char detail[CZ_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    cz_err_set(err, status, "%s: field '%s': %s", where, key, detail);
    cz_err_locate(err, where, key);
    return status;
}

cz_status cz_err_open(cz_err *err, const char *path, int errnum)
{
    return cz_err_set(err, CZ_ENOTFOUND, "cannot open '%s' (%s)", path, strerror(errnum));
}

cz_status cz_file_check_input(const char *path, cz_err *err)
{
    struct stat sb; /* stat and access, not open: a pipe's one reader stays the real one */
    if (stat(path, &sb) != 0 || access(path, R_OK) != 0)
        return cz_err_open(err, path, errno);
    return S_ISDIR(sb.st_mode) ? cz_err_open(err, path, EISDIR) : CZ_OK;
}

cz_status cz_err_prefix(cz_err *err, const char *fmt, ...)
{
    CZ_ASSERT(err != NULL);
    char prefix[CZ_ERR_MSG_MAX];
    char old[CZ_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t pl = strnlen(prefix, sizeof err->msg - 1);
    memcpy(err->msg, prefix, pl);
    size_t ol = strnlen(old, sizeof err->msg - 1 - pl);
    memcpy(err->msg + pl, old, ol);
    err->msg[pl + ol] = '\0';
    return err->status;
}

void cz_err_clear(cz_err *err)
{
    if (err) {
        err->status = CZ_OK;
        err->msg[0] = '\0';
        err->field_where[0] = '\0';
        err->field_key[0] = '\0';
    }
}

_Noreturn void cz__assert_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

/* Out of memory for `n` elements of `size` bytes: says so on stderr and exits with status
 * 1, so the atexit handlers run. Allocates nothing (stderr is unbuffered). */
static _Noreturn void out_of_memory(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        fprintf(stderr, "cadenza: out of memory: cannot allocate %zu x %zu bytes\n", n, size);
    else
        fprintf(stderr, "cadenza: out of memory: cannot allocate %zu bytes\n", n * size);
    exit(1);
}

void *cz_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        out_of_memory(1, size);
    return p;
}

void *cz_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n, size);
    return p;
}

void *cz_xrealloc(void *ptr, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        out_of_memory(n, size);
    size_t bytes = n * size;
    void *p = realloc(ptr, bytes > 0 ? bytes : 1);
    if (!p)
        out_of_memory(n, size);
    return p;
}

char *cz_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = cz_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void cz__grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        CZ_ASSERT(ncap <= SIZE_MAX / 2);
        ncap *= 2;
    }
    *arr = cz_xrealloc(*arr, ncap, elem);
    *cap = ncap;
}

const char *cz_version(void)
{
    return CZ_VERSION;
}

void cz_data_dir(char *out, size_t n)
{
    CZ_ASSERT(out != NULL && n > 0);
    char dir[CZ_DATA_PATH_MAX] = "";
    if (CZ_DATA_FROM_BIN[0] == '/') {
        snprintf(dir, sizeof dir, "%s", CZ_DATA_FROM_BIN);
    } else {
        char exe[CZ_DATA_PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash = NULL;
        if (len > 0) {
            exe[len] = '\0';
            slash = strrchr(exe, '/');
        }
        if (slash) {
            *slash = '\0';
            if ((size_t)snprintf(dir, sizeof dir, "%s/%s", exe, CZ_DATA_FROM_BIN) >= sizeof dir)
                dir[0] = '\0';
        }
    }
    struct stat sb;
    char *canon = NULL; /* "/opt/x/share/cadenza", not "/opt/x/bin/../share/cadenza" */
    if (dir[0] && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        canon = realpath(dir, NULL);
    CZ_ASSERT((size_t)snprintf(out, n, "%s", canon ? canon : CZ_SOURCE_ROOT) < n);
    free(canon);
}

char *cz_path_resolve(const char *base_dir, const char *path)
{
    if (path[0] == '/' || !base_dir || !base_dir[0])
        return cz_xstrdup(path);
    while (path[0] == '.' && path[1] == '/')
        path += 2; /* "./x" is x */
    size_t b = strlen(base_dir);
    bool slash = base_dir[b - 1] == '/'; /* "/" or "dir/": no second slash */
    size_t n = b + strlen(path) + 2;
    char *out = cz_xmalloc(n);
    snprintf(out, n, "%s%s%s", base_dir, slash ? "" : "/", path);
    return out;
}
