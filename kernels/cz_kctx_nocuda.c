/* cz_kctx_nocuda.c - the CUDA entry points of a build without CUDA (meson -Dcuda=disabled,
 * or no nvcc found): they say so. */
#include <stdio.h>
#include <string.h>

#include "cz_kernels.h"

static const char no_cuda[] =
    "this cadenza was built without CUDA: install the CUDA toolkit (nvcc on PATH) and "
    "configure with meson setup -Dcuda=enabled";

bool cz_kernels_cuda_built(void)
{
    return false;
}

int cz_kcuda_device_count(char *why)
{
    if (why)
        snprintf(why, CZ_ERR_MSG_MAX, "%s", no_cuda);
    return 0;
}

cz_status cz_kctx_cuda_create(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                              cz_err *err)
{
    (void)device;
    (void)sm_count;
    if (sm_got)
        *sm_got = 0;
    *out = NULL;
    return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", no_cuda);
}

cz_status cz_kcuda_sm_info(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                           cz_err *err)
{
    (void)device;
    *total = *min_sms = *step = 0;
    return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", no_cuda);
}

cz_status cz_kcuda_device_info(int device, cz_kcuda_info *out, cz_err *err)
{
    (void)device;
    memset(out, 0, sizeof *out);
    return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", no_cuda);
}

cz_status cz_kctx_cuda_split(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                             cz_err *err)
{
    (void)device;
    (void)sm_count;
    *part = *rest = NULL;
    return cz_err_set(err, CZ_EDEVICE, "kernels: backend 'cuda': %s", no_cuda);
}
