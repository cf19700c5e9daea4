/* conv1d.cu - the CUDA twin of conv1d.c: 1-D convolution of one channels-first sequence
 * (PyTorch's Conv1d with explicit left/right padding) on the context's stream.
 *
 * Wide channel groups (cout / groups >= 8 and (cin / groups) x ksize >= 16, as conv1d.c
 * chooses, when the scratch holds a tile of at least CZ__CONV_MIN_TILE positions): for
 * each group and tile of output positions, cz__k_conv_im2col lays the tile's inputs out
 * as cols (cig x ksize, nl) in the scratch (one thread per element, zeros outside the
 * sequence), and cublasSgemm (full float32) forms out_g[:, tile] (cog, nl) = w_g (cog,
 * cig x ksize) . cols, row-major through the column-major transpose (Sgemm(N, N, nl,
 * cog, kdim, cols, ld nl, w_g, ld kdim, out, ld lout)); cz__k_conv_bias adds the bias.
 * Narrow groups (depthwise, tiny kernels) run cz__k_conv_direct, one thread per output
 * element (cout x lout of them, blocks of CZ__CONV_THREADS), summing over the group's
 * input channels and the kernel taps in conv1d.c's order from the bias. */
#include <limits.h>
#include <stdint.h>

#include "cz_kcuda.h"

#define CZ__CONV_THREADS 256u
/* Fewest output positions a GEMM tile may have (else the direct kernel runs). */
#define CZ__CONV_MIN_TILE 32u
/* The im2col tiles' share of the reserve (the scratch may be larger: all of it is used). */
#define CZ__CONV_PANEL_BYTES ((size_t)4 << 20)

/* out (cout, lout), one thread per element: bias + sum over c < cig, kk < ks of
 * w[co][c][kk] x x[g cig + c][l stride + kk dil - pad_l] (terms outside the sequence
 * are zeros). */
static __global__ void cz__k_conv_direct(float *out, const float *x, const float *w,
                                         const float *bias, uint32_t cin, uint32_t cout,
                                         uint32_t len, uint32_t ks, uint32_t stride,
                                         uint32_t dil, uint32_t pad_l, uint32_t groups,
                                         uint32_t lout)
{
    size_t count = (size_t)cout * lout, step = (size_t)gridDim.x * blockDim.x;
    uint32_t cig = cin / groups, cog = cout / groups;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        uint32_t co = (uint32_t)(i / lout), l = (uint32_t)(i % lout), g = co / cog;
        int64_t base = (int64_t)l * stride - pad_l;
        float acc = bias ? bias[co] : 0.0f;
        for (uint32_t c = 0; c < cig; c++) {
            const float *xr = x + (size_t)(g * cig + c) * len;
            const float *wr = w + ((size_t)co * cig + c) * ks;
            for (uint32_t kk = 0; kk < ks; kk++) {
                int64_t at = base + (int64_t)kk * dil;
                if (at >= 0 && at < (int64_t)len)
                    acc = fmaf(wr[kk], xr[at], acc);
            }
        }
        out[i] = acc;
    }
}

/* cols (cig x ks, nl): row c x ks + kk, column l holds x[g cig + c][(l0 + l) stride +
 * kk dil - pad_l], zero outside the sequence; one thread per element. */
static __global__ void cz__k_conv_im2col(float *cols, const float *x, uint32_t cig,
                                         uint32_t len, uint32_t ks, uint32_t stride,
                                         uint32_t dil, uint32_t pad_l, uint32_t g, uint32_t l0,
                                         uint32_t nl)
{
    size_t count = (size_t)cig * ks * nl, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        size_t rr = i / nl;
        uint32_t l = (uint32_t)(i % nl), c = (uint32_t)(rr / ks), kk = (uint32_t)(rr % ks);
        int64_t at = (int64_t)(l0 + l) * stride + (int64_t)kk * dil - pad_l;
        cols[i] = at >= 0 && at < (int64_t)len ? x[(size_t)(g * cig + c) * len + at] : 0.0f;
    }
}

/* out (cout, lout) += bias[co] per row. */
static __global__ void cz__k_conv_bias(float *out, const float *bias, uint32_t lout,
                                       size_t count)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        out[i] += bias[i / lout];
}

extern "C" void cz_cuda_conv1d(cz_kctx *k, float *out, const float *x, const float *w,
                               const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                               uint32_t ksize, uint32_t stride, uint32_t dilation,
                               uint32_t pad_l, uint32_t pad_r, uint32_t groups)
{
    cz__kcuda *c = cz__cu(k);
    CZ_ASSERT(groups >= 1 && cin % groups == 0 && cout % groups == 0);
    CZ_ASSERT(ksize >= 1 && stride >= 1 && dilation >= 1);
    uint64_t span = (uint64_t)dilation * (ksize - 1) + 1, padded = (uint64_t)len + pad_l + pad_r;
    CZ_ASSERT(padded >= span);
    uint32_t lout = (uint32_t)((padded - span) / stride + 1);
    uint32_t cig = cin / groups, cog = cout / groups;
    size_t kdim = (size_t)cig * ksize, count = (size_t)cout * lout;
    size_t tile = kdim ? c->scratch_bytes / sizeof(float) / kdim : 0;
    if (!count)
        return;
    if (cog < 8 || kdim < 16 || tile < CZ__CONV_MIN_TILE || kdim > INT_MAX || lout > INT_MAX ||
        cout > INT_MAX) {
        cz__k_conv_direct<<<cz__cuda_blocks(count, CZ__CONV_THREADS), CZ__CONV_THREADS, 0,
                            c->stream>>>(out, x, w, bias, cin, cout, len, ksize, stride,
                                         dilation, pad_l, groups, lout);
        CZ_CUDA_LAUNCHED(c);
        return;
    }
    if (tile > lout)
        tile = lout;
    float *cols = (float *)c->scratch;
    const float one = 1.0f, zero = 0.0f;
    for (uint32_t g = 0; g < groups; g++)
        for (uint32_t l0 = 0; l0 < lout; l0 += (uint32_t)tile) {
            uint32_t nl = lout - l0 < tile ? lout - l0 : (uint32_t)tile;
            size_t n = kdim * nl;
            cz__k_conv_im2col<<<cz__cuda_blocks(n, CZ__CONV_THREADS), CZ__CONV_THREADS, 0,
                                c->stream>>>(cols, x, cig, len, ksize, stride, dilation, pad_l,
                                             g, l0, nl);
            CZ_CUDA_LAUNCHED(c);
            size_t co = (size_t)g * cog;
            CZ_CUBLAS_CHECK(c, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)nl, (int)cog,
                                           (int)kdim, &one, cols, (int)nl, w + co * kdim,
                                           (int)kdim, &zero, out + co * lout + l0, (int)lout));
        }
    if (bias) {
        cz__k_conv_bias<<<cz__cuda_blocks(count, CZ__CONV_THREADS), CZ__CONV_THREADS, 0,
                          c->stream>>>(out, bias, lout, count);
        CZ_CUDA_LAUNCHED(c);
    }
}

/* The im2col tiles of conv1d and the column tiles of conv_transpose1d: a fixed panel, as
 * the CPU's (a tile holds 4 MiB / (cig x ksize x 4) positions; more when other ops'
 * scratch is larger). */
size_t cz__cuda_conv_scratch_bytes(const cz_kreserve *r)
{
    (void)r;
    return CZ__CONV_PANEL_BYTES;
}
