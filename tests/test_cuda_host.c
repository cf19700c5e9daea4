/* test_cuda_host.c - the CUDA backend's host-side logic, which runs without a device:
 * rounding of SM partitions to what green contexts allow, the errors of a CUDA context
 * asked for where none can exist, and (CUDA builds) the check functions that turn CUDA,
 * cuBLAS and driver errors into a status naming the call, the file and the line. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cz_kernels.h"
#ifdef CZ_HAVE_CUDA
#include "cz_kcuda.h"
#endif

Test(cuda_host, sm_round_follows_the_partition_rules)
{
    /* sm_90: 132 SMs, partitions of at least 8 in steps of 8 */
    cr_expect_eq(cz_kcuda_sm_round(24, 132, 8, 8), 24u);
    cr_expect_eq(cz_kcuda_sm_round(30, 132, 8, 8), 32u, "nearest multiple, ties up");
    cr_expect_eq(cz_kcuda_sm_round(28, 132, 8, 8), 32u, "a tie goes up");
    cr_expect_eq(cz_kcuda_sm_round(27, 132, 8, 8), 24u);
    cr_expect_eq(cz_kcuda_sm_round(1, 132, 8, 8), 8u, "at least the minimum");
    cr_expect_eq(cz_kcuda_sm_round(0, 132, 8, 8), 8u);
    cr_expect_eq(cz_kcuda_sm_round(130, 132, 8, 8), 120u, "the rest must be a partition too");
    cr_expect_eq(cz_kcuda_sm_round(132, 132, 8, 8), 132u, "the whole device");
    cr_expect_eq(cz_kcuda_sm_round(500, 132, 8, 8), 132u);
    /* Nova's RTX A6000 (84 SMs, one TPC = 2 SMs): 24 and 30 are honoured as asked */
    cr_expect_eq(cz_kcuda_sm_round(24, 84, 2, 2), 24u);
    cr_expect_eq(cz_kcuda_sm_round(30, 84, 2, 2), 30u);
    cr_expect_eq(cz_kcuda_sm_round(13, 84, 2, 2), 14u);
    /* a minimum that is not a multiple of the step rounds up to one */
    cr_expect_eq(cz_kcuda_sm_round(4, 64, 6, 4), 8u);
    /* too small to split in two */
    cr_expect_eq(cz_kcuda_sm_round(8, 12, 8, 8), 12u);
    /* step 0 counts as 1 */
    cr_expect_eq(cz_kcuda_sm_round(5, 16, 1, 0), 5u);
    for (uint32_t want = 0; want < 200; want++) {
        uint32_t r = cz_kcuda_sm_round(want, 132, 8, 8);
        cr_assert(r == 132 || (r % 8 == 0 && r >= 8 && r <= 124), "want %u got %u", want, r);
    }
}

Test(cuda_host, a_cpu_context_has_no_sms)
{
    cz_kctx *k = NULL;
    cz_err err;
    cr_assert_eq(cz_kctx_cpu_create(1, &k, &err), CZ_OK);
    cr_expect_eq(cz_kctx_sms(k), 0u);
    cr_expect_eq(cz_kctx_threads(k), 1u);
    cz_kctx_free(k);
}

Test(cuda_host, a_missing_device_is_a_device_error)
{
    char why[CZ_ERR_MSG_MAX] = "";
    if (cz_kcuda_device_count(why) > 0)
        cr_skip_test("a CUDA device is present: the comparison tests cover it");
    cr_expect_neq(why[0], '\0', "the count says why it is 0");
    cz_kctx *k = (cz_kctx *)(uintptr_t)1;
    cz_err err;
    cr_assert_eq(cz_kctx_cuda_create(0, 0, NULL, &k, &err), CZ_EDEVICE);
    cr_expect_null(k);
    cr_expect(strstr(err.msg, "cuda") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, cz_kernels_cuda_built() ? "no CUDA device" : "without CUDA") != NULL,
              "%s", err.msg);
    uint32_t a, b, c;
    cr_expect_eq(cz_kcuda_sm_info(0, &a, &b, &c, &err), CZ_EDEVICE);
    cz_kctx *p1 = NULL, *p2 = NULL;
    cr_expect_eq(cz_kctx_cuda_split(0, 8, &p1, &p2, &err), CZ_EDEVICE);
    cr_expect(p1 == NULL && p2 == NULL);
    cz_kcuda_info info;
    cr_expect_neq(cz_kcuda_device_info(0, &info, &err), CZ_OK);
}

#ifdef CZ_HAVE_CUDA
Test(cuda_host, a_module_that_cannot_load_is_a_device_error)
{
    /* Criterion runs each test in its own process: the module is not loaded yet */
    setenv("CZ_CUDA_MODULE", "/nonexistent/libcz_cuda.so", 1);
    cz_kctx *k = NULL;
    cz_err err;
    cr_assert_eq(cz_kctx_cuda_create(0, 0, NULL, &k, &err), CZ_EDEVICE);
    cr_expect(strstr(err.msg, "cannot load the CUDA module /nonexistent/libcz_cuda.so"), "%s",
              err.msg);
    char why[CZ_ERR_MSG_MAX];
    cr_expect_eq(cz_kcuda_device_count(why), 0);
    cr_expect(strstr(why, "cannot load"), "%s", why);
}

Test(cuda_host, check_functions_name_the_call_file_and_line)
{
    cz_err err;
    cr_expect_eq(cz__cuda_status(cudaSuccess, "cudaFree(p)", "x.cu", 7, &err), CZ_OK);
    cr_assert_eq(cz__cuda_status(cudaErrorInvalidValue, "cudaMemcpy(a, b, n)", "x.cu", 12, &err),
                 CZ_EDEVICE);
    cr_expect(strstr(err.msg, "x.cu:12") && strstr(err.msg, "cudaMemcpy(a, b, n)") &&
              strstr(err.msg, "cudaErrorInvalidValue"), "%s", err.msg);
    cr_assert_eq(cz__cublas_status(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate(&h)", "y.cu", 3,
                                   &err), CZ_EDEVICE);
    cr_expect(strstr(err.msg, "y.cu:3") && strstr(err.msg, "CUBLAS_STATUS_NOT_INITIALIZED"), "%s",
              err.msg);
    cr_assert_eq(cz__cu_status(CUDA_ERROR_INVALID_VALUE, "cuGreenCtxCreate(...)", "z.cu", 9, &err),
                 CZ_EDEVICE);
    cr_expect(strstr(err.msg, "z.cu:9") && strstr(err.msg, "CUresult 1"), "%s", err.msg);

    /* inside an op: the first failure is kept, later ones do not overwrite it */
    cz__kcuda c;
    memset(&c, 0, sizeof c);
    c.dev = 3;
    cr_expect(CZ_CUDA_CHECK(&c, cudaSuccess));
    cr_expect(!CZ_CUDA_CHECK(&c, cudaErrorMemoryAllocation));
    cr_expect(!CZ_CUBLAS_CHECK(&c, CUBLAS_STATUS_EXECUTION_FAILED));
    cr_expect_eq(c.err.status, CZ_EDEVICE);
    cr_expect(strstr(c.err.msg, "device 3") && strstr(c.err.msg, "cudaErrorMemoryAllocation") &&
              strstr(c.err.msg, "test_cuda_host.c:"), "%s", c.err.msg);
    cr_expect(!strstr(c.err.msg, "EXECUTION_FAILED"), "%s", c.err.msg);
}
#endif

#ifdef CZ_HAVE_CUDA
Test(cuda_host, attn_partitions_fill_the_device_from_host_bounds)
{
    /* H100: 132 SMs, 4 items per SM wanted (528) */
    cr_expect_eq(cz__attn_partitions(32768, 8, 132), 66u, "one decode, 8 KV heads: ceil(528 / 8)");
    cr_expect_eq(cz__attn_partitions(32768, 32, 132), 17u, "ceil(528 / 32)");
    cr_expect_eq(cz__attn_partitions(32768, 128, 132), 5u);
    cr_expect_eq(cz__attn_partitions(32768, 527, 132), 2u);
    cr_expect_eq(cz__attn_partitions(32768, 528, 132), 1u, "enough items: no split");
    cr_expect_eq(cz__attn_partitions(32768, 4096, 132), 1u);
    cr_expect_eq(cz__attn_partitions(3000, 16, 132), 23u, "no partition under 128 keys");
    cr_expect_eq(cz__attn_partitions(1024, 1, 132), 8u);
    cr_expect_eq(cz__attn_partitions(1023, 1, 132), 7u);
    cr_expect_eq(cz__attn_partitions(255, 1, 132), 1u, "too short to split");
    cr_expect_eq(cz__attn_partitions(0, 1, 132), 1u);
    cr_expect_eq(cz__attn_partitions(32768, 0, 132), 1u, "no work");
    cr_expect_eq(cz__attn_partitions(1u << 30, 1, 132), 256u, "at most 256");
    cr_expect_eq(cz__attn_partitions(32768, 1, 0), 4u, "sms 0 counts as 1");
    cr_expect_eq(cz__attn_partitions(32768, 2, 8), 16u, "a green context of 8 SMs");
    for (uint32_t items = 1; items < 2000; items += 7) {
        uint32_t p = cz__attn_partitions(20000, items, 132);
        cr_assert(p >= 1 && p <= 20000 / 128, "items %u: %u", items, p);
        cr_assert(p == 1 || (uint64_t)(p - 1) * items < 528, "items %u: %u more than needed", items, p);
        cr_assert(cz__attn_partitions(20000, items + 1, 132) <= p, "items %u: not monotone", items);
    }
}
#endif
