/* conv1d.c - 1-D convolution of one channels-first sequence (PyTorch's Conv1d with
 * explicit left/right padding). Wide channel groups go through im2col tiles in the
 * context's panel and sgemm (out_g = w_g (cout/g, cin/g x ksize) . cols, the output
 * channels split across the threads); narrow groups (depthwise, tiny kernels) run direct
 * loops, one output channel per item. */
#include <string.h>

#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const float *x, *w, *bias;
    uint32_t cin, cout, len, ks, stride, dil, pad_l, groups, lout;
    /* im2col tile */
    float *cols;
    uint32_t g, l0, nl;
} cv_job;

/* Output channels [b, e) by direct loops. */
static void direct_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const cv_job *j = p;
    uint32_t cig = j->cin / j->groups, cog = j->cout / j->groups;
    for (size_t co = b; co < e; co++) {
        float *o = j->out + co * j->lout;
        float bv = j->bias ? j->bias[co] : 0.0f;
        for (uint32_t l = 0; l < j->lout; l++)
            o[l] = bv;
        uint32_t g = (uint32_t)co / cog;
        for (uint32_t c = 0; c < cig; c++) {
            const float *x = j->x + (size_t)(g * cig + c) * j->len;
            const float *w = j->w + (co * cig + c) * j->ks;
            for (uint32_t kk = 0; kk < j->ks; kk++) {
                /* input index l x stride + off, off = kk x dil - pad_l, kept in [0, len) */
                int64_t off = (int64_t)kk * j->dil - j->pad_l, lo = 0;
                if (off < 0)
                    lo = (-off + j->stride - 1) / j->stride;
                int64_t hi = ((int64_t)j->len - 1 - off) / j->stride + 1;
                if ((int64_t)j->len - 1 - off < 0)
                    hi = 0;
                if (hi > j->lout)
                    hi = j->lout;
                for (int64_t l = lo; l < hi; l++)
                    o[l] += w[kk] * x[l * j->stride + off];
            }
        }
    }
}

/* Rows [b, e) of the im2col tile: row (c, kk) holds x[g x cig + c][(l0 + l) x stride +
 * kk x dil - pad_l], zero outside the sequence. */
static void im2col_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const cv_job *j = p;
    uint32_t cig = j->cin / j->groups;
    for (size_t rr = b; rr < e; rr++) {
        uint32_t c = (uint32_t)rr / j->ks, kk = (uint32_t)rr % j->ks;
        const float *x = j->x + (size_t)(j->g * cig + c) * j->len;
        float *dst = j->cols + rr * j->nl;
        for (uint32_t l = 0; l < j->nl; l++) {
            int64_t at = (int64_t)(j->l0 + l) * j->stride + (int64_t)kk * j->dil - j->pad_l;
            dst[l] = at >= 0 && at < j->len ? x[at] : 0.0f;
        }
    }
}

/* Output channels [b, e) of group g for the tile's positions: their weight rows times the
 * im2col tile, by sgemm. */
static void gemm_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const cv_job *j = p;
    uint32_t cig = j->cin / j->groups, cog = j->cout / j->groups, kdim = cig * j->ks;
    size_t co = (size_t)j->g * cog + b;
    cz__sgemm(false, false, (uint32_t)(e - b), j->nl, kdim, j->w + co * kdim, kdim, j->cols,
              j->nl, 0.0f, j->out + co * j->lout + j->l0, j->lout);
}

static void bias_range(void *p, size_t b, size_t e, uint32_t tid)
{
    const cv_job *j = p;
    for (size_t co = b; co < e; co++)
        for (uint32_t l = 0; l < j->lout; l++)
            j->out[co * j->lout + l] += j->bias[co];
}

void cz_cpu_conv1d(cz_kctx *k, float *out, const float *x, const float *w, const float *bias,
                   uint32_t cin, uint32_t cout, uint32_t len, uint32_t ksize, uint32_t stride,
                   uint32_t dilation, uint32_t pad_l, uint32_t pad_r, uint32_t groups)
{
    CZ_ASSERT(groups >= 1 && cin % groups == 0 && cout % groups == 0);
    CZ_ASSERT(ksize >= 1 && stride >= 1 && dilation >= 1);
    uint64_t span = (uint64_t)dilation * (ksize - 1) + 1, padded = (uint64_t)len + pad_l + pad_r;
    CZ_ASSERT(padded >= span);
    uint32_t lout = (uint32_t)((padded - span) / stride + 1);
    uint32_t cig = cin / groups, cog = cout / groups, kdim = cig * ksize;
    cv_job j = {out, x, w, bias, cin, cout, len, ksize, stride, dilation, pad_l, groups, lout,
                k->panel, 0, 0, 0};
    if (cog < 8 || kdim < 16) {
        cz__kpar(k, cout, 1, 1 + 16384 / ((size_t)lout * kdim + 1), direct_range, &j);
        return;
    }
    CZ_ASSERT(kdim <= CZ__PANEL_FLOATS);
    uint32_t tile = CZ__PANEL_FLOATS / kdim;
    for (uint32_t g = 0; g < groups; g++)
        for (uint32_t l0 = 0; l0 < lout; l0 += tile) {
            j.g = g;
            j.l0 = l0;
            j.nl = lout - l0 < tile ? lout - l0 : tile;
            cz__kpar(k, kdim, 1, 1 + 16384 / j.nl, im2col_range, &j);
            cz__kpar(k, cog, 8, 1 + 65536 / ((size_t)j.nl * kdim), gemm_range, &j);
        }
    if (bias)
        cz__kpar(k, cout, 1, 1 + 16384 / lout, bias_range, &j);
}
