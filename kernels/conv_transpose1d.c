/* conv_transpose1d.c - transposed 1-D convolution of one channels-first sequence
 * (PyTorch's ConvTranspose1d, vocoders' upsampling): for a tile of input positions,
 * cols (cout x ksize, L) = w^T . x[:, tile] by sgemm into the context's panel (its rows
 * split across the threads), then col2im adds each column into the outputs it lands on
 * (one output channel per item, so the sums' order is fixed). */
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *x, *w, *bias;
    uint32_t cin, len, cout, ks, stride, pad_l, lout;
    float *cols;
    uint32_t l0, nl;
} ct_job;

/* Rows [b, e) of the tile's columns: cols (cout x ksize, nl) = w^T . x[:, l0 .. l0 + nl),
 * by sgemm. */
static void gemm_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const ct_job *j = p;
    uint32_t rows = j->cout * j->ks;
    cz__sgemm(true, false, (uint32_t)(e - b), j->nl, j->cin, j->w + b, rows, j->x + j->l0, j->len,
              0.0f, j->cols + b * j->nl, j->nl);
}

static void init_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const ct_job *j = p;
    for (size_t co = b; co < e; co++)
        for (uint32_t l = 0; l < j->lout; l++)
            j->out[co * j->lout + l] = j->bias ? j->bias[co] : 0.0f;
}

static void col2im_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const ct_job *j = p;
    for (size_t co = b; co < e; co++) {
        float *o = j->out + co * j->lout;
        for (uint32_t kk = 0; kk < j->ks; kk++) {
            const float *c = j->cols + (co * j->ks + kk) * j->nl;
            for (uint32_t l = 0; l < j->nl; l++) {
                int64_t at = (int64_t)(j->l0 + l) * j->stride + kk - j->pad_l;
                if (at >= 0 && at < j->lout)
                    o[at] += c[l];
            }
        }
    }
}

void cz_cpu_conv_transpose1d(cz_kctx *k, float *out, const float *x, const float *w,
                             const float *bias, uint32_t cin, uint32_t cout, uint32_t len,
                             uint32_t ksize, uint32_t stride, uint32_t pad_l, uint32_t pad_r)
{
    CZ_ASSERT(ksize >= 1 && stride >= 1 && len >= 1);
    uint64_t full = (uint64_t)(len - 1) * stride + ksize;
    CZ_ASSERT(full > (uint64_t)pad_l + pad_r);
    uint32_t lout = (uint32_t)(full - pad_l - pad_r), rows = cout * ksize;
    CZ_ASSERT(rows <= CZ__PANEL_FLOATS);
    ct_job j = {out, x, w, bias, cin, len, cout, ksize, stride, pad_l, lout, k->panel, 0, 0};
    cz__kpar(k, cout, 1, 1 + 16384 / lout, init_range, &j);
    uint32_t tile = CZ__PANEL_FLOATS / rows;
    for (uint32_t l0 = 0; l0 < len; l0 += tile) {
        j.l0 = l0;
        j.nl = len - l0 < tile ? len - l0 : tile;
        cz__kpar(k, rows, 16, 1 + 65536 / ((size_t)j.nl * cin + 1), gemm_range, &j);
        cz__kpar(k, cout, 1, 1 + 16384 / ((size_t)j.nl * ksize), col2im_range, &j);
    }
}
