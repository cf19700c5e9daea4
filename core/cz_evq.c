/* cz_evq.c - see cz_evq.h. */
#include "cz_evq.h"

#include <stdlib.h>

#include "cz_base.h"

static bool before(const cz_event *a, const cz_event *b)
{
    return a->t_s < b->t_s || (a->t_s == b->t_s && a->seq < b->seq);
}

void cz_evq_init(cz_evq *q, size_t capacity)
{
    q->cap = capacity ? capacity : 64;
    q->heap = cz_xmalloc(q->cap * sizeof *q->heap);
    q->n = 0;
    q->next_seq = 0;
}

void cz_evq_free(cz_evq *q)
{
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
}

void cz_evq_push(cz_evq *q, double t_s, uint32_t type, uint32_t arg, uint32_t arg2)
{
    CZ_ASSERT(t_s == t_s); /* not NaN */
    cz_grow((void **)&q->heap, &q->cap, q->n + 1, sizeof *q->heap);
    cz_event e = {t_s, q->next_seq++, type, arg, arg2};
    size_t i = q->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&e, &q->heap[p]))
            break;
        q->heap[i] = q->heap[p];
        i = p;
    }
    q->heap[i] = e;
}

bool cz_evq_pop(cz_evq *q, cz_event *out)
{
    if (q->n == 0)
        return false;
    *out = q->heap[0];
    cz_event last = q->heap[--q->n];
    size_t i = 0, n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(&q->heap[c + 1], &q->heap[c]))
            c++;
        if (!before(&q->heap[c], &last))
            break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (n > 0)
        q->heap[i] = last;
    return true;
}

const cz_event *cz_evq_peek(const cz_evq *q)
{
    return q->n ? &q->heap[0] : NULL;
}
