/* cz_kcuda_load.c - the CUDA entry points of cz_kernels.h in every build: they open the
 * CUDA module (cz_kcuda_entry.h) on first use and forward to it, or say why there is no
 * CUDA: a build without it (meson -Dcuda=disabled, or no nvcc found), or a module that
 * cannot be found or loaded (the CUDA libraries missing at run time).
 *
 * The module's path (docs/install.md), the first of:
 *  1. $CZ_CUDA_MODULE when set and not empty, as is (no fallback when it does not load);
 *  2. <folder of the running program>/CZ_CUDA_MODULE_FROM_BIN (read through
 *     /proc/self/exe; ../<libdir>/cadenza/libcz_cuda.so, as meson was configured) when that
 *     file exists: the module installed beside an installed program, wherever the tree was
 *     moved or staged (DESTDIR);
 *  3. the one this build made (CZ_CUDA_MODULE_PATH, given by meson) when it exists: a
 *     program run from its build tree.
 * None found is CZ_EDEVICE naming the paths tried, on the first CUDA call only: the CPU
 * backend never loads the module. Every failure reported by a loaded module names the
 * module's path. The loaded module is the one process-wide state here (loaded once, under
 * pthread_once, never unloaded), like the dynamic loader's own. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cz_kcuda_entry.h"

#define KCUDA_PATH_MAX 4096

typedef struct kcuda_module {
    pthread_once_t once;
    const cz__kcuda_entry *entry; /* NULL when it could not be loaded */
    char path[KCUDA_PATH_MAX];    /* the module loaded or tried last */
    char why[CZ_ERR_MSG_MAX];     /* when not loaded, why */
} kcuda_module;

static kcuda_module module = {PTHREAD_ONCE_INIT, NULL, "", ""};

#ifdef CZ_CUDA_MODULE_PATH
/* The installed module's path relative to the running program, written to out[0..n): ""
 * when /proc/self/exe cannot be read or the path does not fit. */
static void beside_program(char *out, size_t n)
{
    out[0] = '\0';
    if (CZ_CUDA_MODULE_FROM_BIN[0] == '/') {
        snprintf(out, n, "%s", CZ_CUDA_MODULE_FROM_BIN);
        return;
    }
    char exe[KCUDA_PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    if ((size_t)snprintf(out, n, "%s/%s", exe, CZ_CUDA_MODULE_FROM_BIN) >= n)
        out[0] = '\0';
}
#endif

static void load(void)
{
#ifndef CZ_CUDA_MODULE_PATH
    snprintf(module.why, sizeof module.why,
             "this cadenza was built without CUDA: install the CUDA toolkit (nvcc on PATH) and "
             "configure with meson setup -Dcuda=enabled");
#else
    const char *env = getenv("CZ_CUDA_MODULE");
    if (env && *env) {
        snprintf(module.path, sizeof module.path, "%s", env);
    } else {
        char installed[KCUDA_PATH_MAX];
        beside_program(installed, sizeof installed);
        /* "/opt/x/lib/cadenza/libcz_cuda.so", not "/opt/x/bin/../lib/..." */
        char *canon = installed[0] ? realpath(installed, NULL) : NULL;
        if (canon) {
            snprintf(module.path, sizeof module.path, "%s", canon);
            free(canon);
        } else if (access(CZ_CUDA_MODULE_PATH, F_OK) == 0) {
            snprintf(module.path, sizeof module.path, "%s", CZ_CUDA_MODULE_PATH);
        } else {
            snprintf(module.why, sizeof module.why,
                     "cannot find the CUDA module: tried %s (beside the program) and %s (the "
                     "build tree); set $CZ_CUDA_MODULE to its path (docs/install.md)",
                     installed[0] ? installed : "(the program's folder is unknown)",
                     CZ_CUDA_MODULE_PATH);
            return;
        }
    }
    const char *path = module.path;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(module.why, sizeof module.why, "cannot load the CUDA module %s: %s", path,
                 dlerror());
        return;
    }
    const cz__kcuda_entry *(*get)(void);
    *(void **)&get = dlsym(h, CZ__KCUDA_ENTRY_SYMBOL);
    const cz__kcuda_entry *e = get ? get() : NULL;
    if (!e || e->abi != CZ__KCUDA_ABI) {
        snprintf(module.why, sizeof module.why,
                 "the CUDA module %s is not this build's (%s; expected ABI %u)", path,
                 get ? "another ABI" : "no entry point", CZ__KCUDA_ABI);
        dlclose(h);
        return;
    }
    module.entry = e;
#endif
}

static const cz__kcuda_entry *entry(void)
{
    pthread_once(&module.once, load);
    return module.entry;
}

static cz_status no_cuda(cz_err *err)
{
    return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", module.why);
}

/* Appends the loaded module's path to a failure message msg[0..CZ_ERR_MSG_MAX) (cut to
 * fit), so a failure says which module (and so which CUDA runtime) reported it. */
static void name_module(char *msg)
{
    size_t len = strnlen(msg, CZ_ERR_MSG_MAX - 1);
    snprintf(msg + len, CZ_ERR_MSG_MAX - len, "; CUDA module %s", module.path);
}

/* st, with the module named in err's message when st is a failure. */
static cz_status from_module(cz_status st, cz_err *err)
{
    if (st != CZ_OK && err)
        name_module(err->msg);
    return st;
}

bool cz_kernels_cuda_built(void)
{
#ifdef CZ_CUDA_MODULE_PATH
    return true;
#else
    return false;
#endif
}

int cz_kcuda_device_count(char *why)
{
    const cz__kcuda_entry *e = entry();
    if (e) {
        int n = e->device_count(why);
        if (n <= 0 && why)
            name_module(why);
        return n;
    }
    if (why)
        snprintf(why, CZ_ERR_MSG_MAX, "%s", module.why);
    return 0;
}

cz_status cz_kcuda_device_info(int device, cz_kcuda_info *out, cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    memset(out, 0, sizeof *out);
    return e ? from_module(e->device_info(device, out, err), err) : no_cuda(err);
}

cz_status cz_kcuda_sm_info(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                           cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *total = *min_sms = *step = 0;
    return e ? from_module(e->sm_info(device, total, min_sms, step, err), err) : no_cuda(err);
}

cz_status cz_kctx_cuda_create(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                              cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *out = NULL;
    if (sm_got)
        *sm_got = 0;
    return e ? from_module(e->create(device, sm_count, sm_got, out, err), err) : no_cuda(err);
}

cz_status cz_kctx_cuda_split(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                             cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *part = *rest = NULL;
    return e ? from_module(e->split(device, sm_count, part, rest, err), err) : no_cuda(err);
}
