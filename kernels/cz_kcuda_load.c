/* cz_kcuda_load.c - the CUDA entry points of cz_kernels.h in every build: they open the
 * CUDA module (cz_kcuda_entry.h) on first use and forward to it, or say why there is no
 * CUDA: a build without it (meson -Dcuda=disabled, or no nvcc found), or a module that
 * cannot be loaded (the CUDA libraries missing at run time).
 *
 * The module's path: $CZ_CUDA_MODULE when set, else the one this build made
 * (CZ_CUDA_MODULE_PATH, given by meson). The loaded module is the one process-wide state
 * here (loaded once, under pthread_once, never unloaded), like the dynamic loader's own. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cz_kcuda_entry.h"

typedef struct kcuda_module {
    pthread_once_t once;
    const cz__kcuda_entry *entry; /* NULL when it could not be loaded */
    char why[CZ_ERR_MSG_MAX];     /* ... and why */
} kcuda_module;

static kcuda_module module = {PTHREAD_ONCE_INIT, NULL, ""};

static void load(void)
{
#ifndef CZ_CUDA_MODULE_PATH
    snprintf(module.why, sizeof module.why,
             "this cadenza was built without CUDA: install the CUDA toolkit (nvcc on PATH) and "
             "configure with meson setup -Dcuda=enabled");
#else
    const char *path = getenv("CZ_CUDA_MODULE");
    if (!path || !*path)
        path = CZ_CUDA_MODULE_PATH;
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
    if (e)
        return e->device_count(why);
    if (why)
        snprintf(why, CZ_ERR_MSG_MAX, "%s", module.why);
    return 0;
}

cz_status cz_kcuda_device_info(int device, cz_kcuda_info *out, cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    memset(out, 0, sizeof *out);
    return e ? e->device_info(device, out, err) : no_cuda(err);
}

cz_status cz_kcuda_sm_info(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                           cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *total = *min_sms = *step = 0;
    return e ? e->sm_info(device, total, min_sms, step, err) : no_cuda(err);
}

cz_status cz_kctx_cuda_create(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                              cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *out = NULL;
    if (sm_got)
        *sm_got = 0;
    return e ? e->create(device, sm_count, sm_got, out, err) : no_cuda(err);
}

cz_status cz_kctx_cuda_split(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                             cz_err *err)
{
    const cz__kcuda_entry *e = entry();
    *part = *rest = NULL;
    return e ? e->split(device, sm_count, part, rest, err) : no_cuda(err);
}
