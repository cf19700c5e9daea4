/* cz_kcuda_entry.h - the CUDA backend as a loadable module: the CUDA code, cuBLAS and the
 * CUDA runtime live in libcz_cuda.so (built with -Dcuda), which the kernels library opens
 * with dlopen the first time a program asks for a CUDA context or device (cz_kcuda_load.c).
 * Programs that never use CUDA never load the CUDA libraries (hundreds of MB of mappings:
 * `cadenza sim` starts in milliseconds and runs under a tight address-space limit), and a
 * machine without them gets a clear error, not a loader failure at start.
 *
 * The module exports one symbol, cz__kcuda_module_entry, returning this table; the public CUDA
 * functions of cz_kernels.h forward to it. */
#ifndef CZ_KCUDA_ENTRY_H
#define CZ_KCUDA_ENTRY_H

#include "cz_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the table or a contract it carries changes. */
#define CZ__KCUDA_ABI 1u

typedef struct cz__kcuda_entry {
    uint32_t abi;
    int (*device_count)(char *why);
    cz_status (*device_info)(int device, cz_kcuda_info *out, cz_err *err);
    cz_status (*sm_info)(int device, uint32_t *total, uint32_t *min_sms, uint32_t *step,
                         cz_err *err);
    cz_status (*create)(int device, uint32_t sm_count, uint32_t *sm_got, cz_kctx **out,
                        cz_err *err);
    cz_status (*split)(int device, uint32_t sm_count, cz_kctx **part, cz_kctx **rest,
                       cz_err *err);
} cz__kcuda_entry;

#define CZ__KCUDA_ENTRY_SYMBOL "cz__kcuda_module_entry"
const cz__kcuda_entry *cz__kcuda_module_entry(void);

#ifdef __cplusplus
}
#endif

#endif
