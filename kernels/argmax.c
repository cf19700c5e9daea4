/* argmax.c - greedy decoding: the first maximum of each logits row, -1 for a row holding
 * NaN or +inf. */
#include <math.h>

#include "cz_kernels_cpu.h"

typedef struct {
    int32_t *ids;
    const float *logits;
    uint32_t vocab;
} am_job;

static void am_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const am_job *j = p;
    for (size_t r = b; r < e; r++) {
        const float *l = j->logits + r * j->vocab;
        uint32_t best = 0;
        bool bad = !(l[0] < INFINITY);
        for (uint32_t i = 1; i < j->vocab; i++) {
            bad |= !(l[i] < INFINITY); /* NaN or +inf; -inf is a masked id */
            if (l[i] > l[best])
                best = i;
        }
        j->ids[r] = bad ? -1 : (int32_t)best;
    }
}

void cz_cpu_argmax(cz_kctx *k, int32_t *ids, const float *logits, uint32_t rows, uint32_t vocab)
{
    CZ_ASSERT(vocab > 0);
    am_job j = {ids, logits, vocab};
    cz__kpar(k, rows, 1, 1 + 65536 / vocab, am_rows, &j);
}
