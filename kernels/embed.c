/* embed.c - token embedding lookup: rows of a (vocab, dim) table widened to float32. */
#include "cz_kernels_cpu.h"

typedef struct {
    float *out;
    const char *table;
    cz_dtype dt;
    const int32_t *ids;
    uint32_t dim;
} embed_job;

static void embed_rows(void *p, size_t b, size_t e, uint32_t tid)
{
    const embed_job *j = p;
    size_t row = (size_t)j->dim * cz_dtype_size(j->dt);
    for (size_t i = b; i < e; i++) {
        CZ_ASSERT(j->ids[i] >= 0);
        cz__widen(j->out + i * j->dim, j->table + (size_t)j->ids[i] * row, j->dt, j->dim);
    }
}

void cz_cpu_embed(cz_kctx *k, float *out, const void *table, cz_dtype dt, const int32_t *ids,
                  uint32_t n, uint32_t dim)
{
    embed_job j = {out, table, dt, ids, dim};
    cz__kpar(k, n, 1, 1 + 32768 / (dim + 1), embed_rows, &j);
}
