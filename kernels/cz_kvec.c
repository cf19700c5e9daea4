/* cz_kvec.c - the float32 vector loops the ops share (dot product, axpy), written with
 * 4-lane vectors so they vectorise without -ffast-math (a plain float reduction loop does
 * not: the compiler may not reorder its additions). */
#include <string.h>

#include "cz_kernels_cpu.h"

float cz__dot(const float *a, const float *b, uint32_t n)
{
    cz__v4f s0 = {0}, s1 = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        cz__v4f a0, a1, b0, b1;
        memcpy(&a0, a + i, 16);
        memcpy(&a1, a + i + 4, 16);
        memcpy(&b0, b + i, 16);
        memcpy(&b1, b + i + 4, 16);
        s0 += a0 * b0;
        s1 += a1 * b1;
    }
    s0 += s1;
    float s = (s0[0] + s0[2]) + (s0[1] + s0[3]);
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void cz__axpy(float *y, float a, const float *x, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        cz__v4f xv, yv;
        memcpy(&xv, x + i, 16);
        memcpy(&yv, y + i, 16);
        yv += a * xv;
        memcpy(y + i, &yv, 16);
    }
    for (; i < n; i++)
        y[i] += a * x[i];
}
