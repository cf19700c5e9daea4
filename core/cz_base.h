/* cz_base.h - status codes, error messages with context, and the always-on assert.
 *
 * Two tiers of errors (docs/design.md): recoverable failures (bad config, bad trace,
 * I/O) return a cz_status and fill a caller-supplied cz_err with a message that names
 * the file, the line or record, the field and what was expected; broken invariants
 * (bugs) hit CZ_ASSERT, which prints file:line and the expression and aborts in every
 * build. Only main() prints errors and exits. */
#ifndef CZ_BASE_H
#define CZ_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus /* the CUDA backend's .cu files include the C headers */
extern "C" {
#define CZ__NORETURN [[noreturn]]
#else
#define CZ__NORETURN _Noreturn
#endif

typedef enum cz_status {
    CZ_OK = 0,
    CZ_EINVAL,   /* bad value in a config, a flag or a trace record */
    CZ_EFORMAT,  /* malformed file: not JSON, wrong columns, unparsable number */
    CZ_EIO,      /* cannot open, read or write a file */
    CZ_ENOMEM,   /* an allocation failed */
    CZ_ERANGE,   /* a value is out of the representable or supported range */
    CZ_ENOTFOUND,/* a named thing (model card, policy, format) does not exist, or an input
                    file a flag or field names cannot be opened */
    CZ_EINTERNAL,/* a run broke its own accounting (a request lost or stuck): a bug in
                    cadenza, reported with the state that shows it, never a silent count */
    CZ_EDEVICE   /* a device, its runtime or a library on it failed (CUDA, cuBLAS, the
                    driver; no device where one was asked for) */
} cz_status;

#define CZ_ERR_MSG_MAX 1024

#define CZ_ERR_WHERE_MAX 512
#define CZ_ERR_KEY_MAX 128

/* Error context filled by the function that fails. `msg` is a full sentence such as
 * "trace.csv:17: field 'Request tokens': expected a non-negative integer, got 'abc'".
 * When the error is about one field of a JSON object (a wrong type or range, an unknown
 * key), `field_where` and `field_key` locate it: the object as its parser named it
 * ("exp.json: server", by the convention "<file>: <dotted.path>") and the key
 * ("max_num_seqs"); both are empty otherwise. The CLI uses them to name the --set
 * argument a bad value came from. */
typedef struct cz_err {
    cz_status status;
    char msg[CZ_ERR_MSG_MAX];
    char field_where[CZ_ERR_WHERE_MAX];
    char field_key[CZ_ERR_KEY_MAX];
} cz_err;

/* Short name of a status ("invalid value", "I/O error", ...). Never NULL. */
const char *cz_strerror(cz_status status);

/* Records `status` and a printf-style message in `err` (which may be NULL) and returns
 * `status`, so failures read `return cz_err_set(err, CZ_EINVAL, "...", ...);`. Clears the
 * field location. */
cz_status cz_err_set(cz_err *err, cz_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records, on the error just set in `err` (which may be NULL), that it is about field `key`
 * of the JSON object named `where` (both copied, cut to fit). */
void cz_err_locate(cz_err *err, const char *where, const char *key);

/* A bad value of field `key` of the JSON object named `where`: records `status` and
 * "<where>: field '<key>': <printf-style detail>" located on (where, key), and returns
 * `status`. Config parsers report every bad field value through it (or cz_json's getters,
 * which do), so the CLI can name the --set argument the value came from. */
cz_status cz_err_field(cz_err *err, cz_status status, const char *where, const char *key,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Prefixes the message already in `err` with a printf-style context ("config.json: ").
 * Keeps the field location. Returns err->status. `err` must not be NULL. */
cz_status cz_err_prefix(cz_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An input file that cannot be opened (errno `errnum`): records CZ_ENOTFOUND and
 * "cannot open '<path>' (<strerror(errnum)>)" and returns CZ_ENOTFOUND. The caller
 * prefixes the flag or field that named the file ("exp.json: workload.trace.path: "). */
cz_status cz_err_open(cz_err *err, const char *path, int errnum);

/* Checks that the input file at `path` exists, is readable and is not a folder: CZ_OK,
 * or cz_err_open's CZ_ENOTFOUND (the caller prefixes the flag or field that named the
 * file). Opens nothing, so a pipe (`<(...)`) is left for its reader. */
cz_status cz_file_check_input(const char *path, cz_err *err);

/* Clears `err` to CZ_OK with an empty message. */
void cz_err_clear(cz_err *err);

/* Called by CZ_ASSERT: prints "file:line: assertion failed: expr" to stderr and aborts. */
CZ__NORETURN void cz__assert_fail(const char *file, int line, const char *expr);

/* Checks an invariant in every build type (never compiled out, unlike assert()). */
#define CZ_ASSERT(cond) \
    ((cond) ? (void)0 : cz__assert_fail(__FILE__, __LINE__, #cond))

/* Allocation helpers. They never return NULL, and they do not return at all when memory
 * is exhausted: the toolkit treats OOM as unrecoverable, so they print "cadenza: out of
 * memory: cannot allocate N bytes" to stderr and call exit(1), which runs the atexit
 * handlers (the CLI's removes its temporary output files, cli/cz_out.h). cz_xcalloc and
 * cz_xrealloc take an array of `n` elements of `size` bytes, a product that overflows
 * counting as exhausted memory. */
void *cz_xmalloc(size_t size);
void *cz_xcalloc(size_t n, size_t size);
void *cz_xrealloc(void *ptr, size_t n, size_t size);
char *cz_xstrdup(const char *s);

/* Grows *arr (of elements of `elem` bytes, capacity *cap) so that it holds at least
 * `need` elements, doubling. Amortised O(1); the check that it fits is inline (appends on
 * hot paths pay a compare), the growth is cz__grow. */
void cz__grow(void **arr, size_t *cap, size_t need, size_t elem);
static inline void cz_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need > *cap)
        cz__grow(arr, cap, need, elem);
}

#define CZ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A hint that the memory at p is read soon: its cache line is fetched ahead of the use
 * (state that waited long, e.g. a request admitted after queueing, is rarely cached).
 * No effect on results. */
#if defined(__GNUC__) || defined(__clang__)
#define CZ_PREFETCH(p) __builtin_prefetch(p)
#else
#define CZ_PREFETCH(p) ((void)(p))
#endif

/* The toolkit's version string (from meson's project version). */
const char *cz_version(void);

/* The folder holding the shipped data (models/, experiments/, traces/data/), written to
 * out[0..n): the installed data folder <folder of the running program>/CZ_DATA_FROM_BIN
 * (../share/cadenza for the default layout, so an installed tree can be moved) when it
 * exists (its canonical path), else the source root compiled in (a program run from its
 * build tree). Reads /proc/self/exe on every call; keeps no state. A result longer than
 * n is a bug. */
void cz_data_dir(char *out, size_t n);

/* `path` resolved against base_dir (absolute paths and a NULL or empty base_dir leave it as
 * is); caller frees. */
char *cz_path_resolve(const char *base_dir, const char *path);

#ifdef __cplusplus
}
#endif

#endif
