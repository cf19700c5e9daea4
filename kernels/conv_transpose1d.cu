/* conv_transpose1d.cu - the CUDA twin of conv_transpose1d.c: transposed 1-D convolution
 * of one channels-first sequence (PyTorch's ConvTranspose1d, no output padding) on the
 * context's stream. Output position o is full position p = o + pad_l of the uncut
 * result, which sums x[ci][l] w[ci][co][kk] over the (l, kk) with l stride + kk = p.
 *
 * cin >= 16 and a scratch holding cout x ksize x min(len, CZ__CONVT_MIN_TILE) floats
 * (conv_transpose1d.c's method): out = bias (cz__k_convt_init), then for each tile of
 * input positions cublasSgemm (full float32) forms cols (cout x ksize, nl) = w^T . x[:,
 * tile] in the scratch, row-major through the column-major transpose (Sgemm(N, T, nl,
 * cout x ksize, cin, x + l0, ld len, w, ld cout x ksize, cols, ld nl)), and
 * cz__k_convt_col2im adds to each output the columns landing on it (one thread per output
 * element the tile reaches, taps in increasing order). Otherwise cz__k_convt_direct, one
 * thread per output element (cout x lout, blocks of CZ__CONVT_THREADS), sums over the
 * taps kk = p mod stride, p mod stride + stride, ... and the input channels from the
 * bias. */
#include <limits.h>
#include <stdint.h>

#include "cz_kcuda.h"

#define CZ__CONVT_THREADS 256u
/* Fewest input positions a GEMM tile may have (else the direct kernel runs). */
#define CZ__CONVT_MIN_TILE 32u

/* out (cout, lout), one thread per element (see the file's comment). */
static __global__ void cz__k_convt_direct(float *out, const float *x, const float *w,
                                          const float *bias, uint32_t cin, uint32_t cout,
                                          uint32_t len, uint32_t ks, uint32_t stride,
                                          uint32_t pad_l, uint32_t lout)
{
    size_t count = (size_t)cout * lout, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        uint32_t co = (uint32_t)(i / lout);
        int64_t p = (int64_t)(i % lout) + pad_l;
        /* taps with l = (p - kk) / stride in [0, len), kk = p mod stride */
        int64_t lo = p % stride, first = p - (int64_t)(len - 1) * stride;
        int64_t hi = p < (int64_t)ks - 1 ? p : (int64_t)ks - 1;
        if (first > lo)
            lo = first;
        float acc = bias ? bias[co] : 0.0f;
        for (int64_t kk = lo; kk <= hi; kk += stride) {
            size_t l = (size_t)((p - kk) / stride);
            for (uint32_t ci = 0; ci < cin; ci++)
                acc = fmaf(x[(size_t)ci * len + l], w[((size_t)ci * cout + co) * ks + kk], acc);
        }
        out[i] = acc;
    }
}

/* out (cout, lout) = bias[co] (or 0) per row. */
static __global__ void cz__k_convt_init(float *out, const float *bias, uint32_t lout,
                                        size_t count)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        out[i] = bias ? bias[i / lout] : 0.0f;
}

/* Outputs o in [o_lo, o_lo + span) of every channel: out[co][o] += the columns of the tile
 * (input positions [l0, l0 + nl)) landing on p = o + pad_l, cols (cout x ks, nl). */
static __global__ void cz__k_convt_col2im(float *out, const float *cols, uint32_t cout,
                                          uint32_t ks, uint32_t stride, uint32_t pad_l,
                                          uint32_t lout, uint32_t l0, uint32_t nl,
                                          uint32_t o_lo, uint32_t span)
{
    size_t count = (size_t)cout * span, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        uint32_t co = (uint32_t)(i / span), o = o_lo + (uint32_t)(i % span);
        int64_t p = (int64_t)o + pad_l;
        /* taps with l = (p - kk) / stride in [l0, l0 + nl), kk = p mod stride */
        int64_t lo = p % stride, first = p - (int64_t)(l0 + nl - 1) * stride;
        int64_t hi = p - (int64_t)l0 * stride;
        if (first > lo)
            lo = first;
        if (hi > (int64_t)ks - 1)
            hi = (int64_t)ks - 1;
        float acc = 0.0f;
        for (int64_t kk = lo; kk <= hi; kk += stride) {
            size_t l = (size_t)((p - kk) / stride) - l0;
            acc += cols[((size_t)co * ks + kk) * nl + l];
        }
        out[(size_t)co * lout + o] += acc;
    }
}

extern "C" void cz_cuda_conv_transpose1d(cz_kctx *k, float *out, const float *x, const float *w,
                                         const float *bias, uint32_t cin, uint32_t cout,
                                         uint32_t len, uint32_t ksize, uint32_t stride,
                                         uint32_t pad_l, uint32_t pad_r)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(ksize >= 1 && stride >= 1 && len >= 1);
    uint64_t full = (uint64_t)(len - 1) * stride + ksize;
    CZ_ASSERT(full > (uint64_t)pad_l + pad_r);
    CZ_ASSERT(full - pad_l - pad_r <= UINT32_MAX);
    uint32_t lout = (uint32_t)(full - pad_l - pad_r);
    size_t rows = (size_t)cout * ksize, count = (size_t)cout * lout;
    size_t tile = rows ? c->scratch_bytes / sizeof(float) / rows : 0;
    if (!count)
        return;
    if (cin < 16 || tile < (len < CZ__CONVT_MIN_TILE ? len : CZ__CONVT_MIN_TILE) ||
        rows > INT_MAX || len > INT_MAX || cin > INT_MAX) {
        cz__k_convt_direct<<<cz__cuda_blocks(count, CZ__CONVT_THREADS), CZ__CONVT_THREADS, 0,
                             c->stream>>>(out, x, w, bias, cin, cout, len, ksize, stride, pad_l,
                                          lout);
        CZ_CUDA_LAUNCHED(c);
        return;
    }
    if (tile > len)
        tile = len;
    float *cols = (float *)c->scratch;
    const float one = 1.0f, zero = 0.0f;
    cz__k_convt_init<<<cz__cuda_blocks(count, CZ__CONVT_THREADS), CZ__CONVT_THREADS, 0,
                       c->stream>>>(out, bias, lout, count);
    CZ_CUDA_LAUNCHED(c);
    for (uint32_t l0 = 0; l0 < len; l0 += (uint32_t)tile) {
        uint32_t nl = len - l0 < tile ? len - l0 : (uint32_t)tile;
        /* the outputs the tile reaches: full positions [l0 stride, (l0 + nl - 1) stride +
         * ksize), less pad_l, inside [0, lout) */
        int64_t o_lo = (int64_t)l0 * stride - pad_l;
        int64_t o_hi = (int64_t)(l0 + nl - 1) * stride + ksize - pad_l;
        if (o_lo < 0)
            o_lo = 0;
        if (o_hi > (int64_t)lout)
            o_hi = lout;
        if (o_hi <= o_lo)
            continue;
        CZ_CUBLAS_CHECK(c, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)nl, (int)rows,
                                       (int)cin, &one, x + l0, (int)len, w, (int)rows, &zero,
                                       cols, (int)nl));
        uint32_t span = (uint32_t)(o_hi - o_lo);
        cz__k_convt_col2im<<<cz__cuda_blocks((size_t)cout * span, CZ__CONVT_THREADS),
                             CZ__CONVT_THREADS, 0, c->stream>>>(out, cols, cout, ksize, stride,
                                                                pad_l, lout, l0, nl,
                                                                (uint32_t)o_lo, span);
        CZ_CUDA_LAUNCHED(c);
    }
}
