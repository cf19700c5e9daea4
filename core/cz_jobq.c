/* cz_jobq.c - see cz_jobq.h. */
#include "cz_jobq.h"

#include <stdlib.h>
#include <string.h>

#include "cz_base.h"

void cz_jobq_init(cz_jobq *q, uint32_t max_batch, uint32_t max_tokens)
{
    CZ_ASSERT(max_batch > 0 && max_tokens > 0);
    memset(q, 0, sizeof *q);
    q->cap = 64;
    q->ring = cz_xmalloc(q->cap * sizeof *q->ring);
    q->taken = cz_xcalloc(q->cap, sizeof *q->taken);
    q->max_batch = max_batch;
    q->max_tokens = max_tokens;
    q->batch = cz_xmalloc(max_batch * sizeof *q->batch);
}

void cz_jobq_free(cz_jobq *q)
{
    free(q->ring);
    free(q->taken);
    free(q->batch);
    memset(q, 0, sizeof *q);
}

void cz_jobq_push(cz_jobq *q, const cz_job *job)
{
    if (q->len == q->cap) {
        cz_job *n = cz_xmalloc(2 * (size_t)q->cap * sizeof *n);
        for (uint32_t i = 0; i < q->len; i++)
            n[i] = q->ring[(q->head + i) % q->cap];
        free(q->ring);
        q->ring = n;
        q->head = 0;
        q->cap *= 2;
        free(q->taken);
        q->taken = cz_xcalloc(q->cap, sizeof *q->taken);
    }
    q->ring[(q->head + q->len) % q->cap] = *job;
    q->len++;
}

uint32_t cz_jobq_schedule(cz_jobq *q, uint64_t *tokens)
{
    CZ_ASSERT(!q->in_flight);
    q->n_batch = 0;
    uint64_t t = 0;
    while (q->len > 0 && q->n_batch < q->max_batch) {
        const cz_job *j = &q->ring[q->head];
        if (q->n_batch > 0 && t + j->tokens > q->max_tokens)
            break;
        t += j->tokens;
        q->batch[q->n_batch++] = *j;
        q->head = (q->head + 1) % q->cap;
        q->len--;
    }
    q->in_flight = q->n_batch > 0;
    *tokens = t;
    return q->n_batch;
}

const cz_job *cz_jobq_peek(const cz_jobq *q, uint32_t i)
{
    CZ_ASSERT(i < q->len);
    return &q->ring[(q->head + i) % q->cap];
}

uint32_t cz_jobq_schedule_picked(cz_jobq *q, const uint32_t *pos, uint32_t n, uint64_t *tokens)
{
    CZ_ASSERT(!q->in_flight);
    q->n_batch = 0;
    uint64_t t = 0;
    for (uint32_t k = 0; k < n && q->n_batch < q->max_batch; k++) {
        CZ_ASSERT(pos[k] < q->len && !q->taken[pos[k]]);
        const cz_job *j = &q->ring[(q->head + pos[k]) % q->cap];
        if (q->n_batch > 0 && t + j->tokens > q->max_tokens)
            break;
        t += j->tokens;
        q->batch[q->n_batch++] = *j;
        q->taken[pos[k]] = 1;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < q->len; i++) {
        if (q->taken[i]) {
            q->taken[i] = 0;
            continue;
        }
        q->ring[(q->head + w++) % q->cap] = q->ring[(q->head + i) % q->cap];
    }
    q->len = w;
    q->in_flight = q->n_batch > 0;
    *tokens = t;
    return q->n_batch;
}

const cz_job *cz_jobq_done(cz_jobq *q, uint32_t *n)
{
    CZ_ASSERT(q->in_flight);
    q->in_flight = false;
    *n = q->n_batch;
    return q->batch;
}

uint32_t cz_jobq_cancel(cz_jobq *q, uint32_t owner)
{
    uint32_t w = 0, dropped = 0;
    for (uint32_t i = 0; i < q->len; i++) {
        cz_job j = q->ring[(q->head + i) % q->cap];
        if (j.owner == owner)
            dropped++;
        else
            q->ring[(q->head + w++) % q->cap] = j;
    }
    q->len = w;
    return dropped;
}

uint32_t cz_jobq_len(const cz_jobq *q)
{
    return q->len;
}
