/* cz_jobq.h - a batching queue for the stages without KV: audio and vision encoders, and
 * vocoders invoked per chunk (docs/pipeline.md). Jobs are served first-come-first-served;
 * a step takes up to max_batch jobs and max_tokens tokens (at least one job). Reactive like
 * the serving core: the driver asks for a batch and reports when it finished. */
#ifndef CZ_JOBQ_H
#define CZ_JOBQ_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cz_job {
    uint32_t owner;  /* the driver's id for who asked (a session) */
    uint32_t tokens; /* tokens or frames to process */
    uint32_t tag;    /* the driver's id for the job (a turn, a chunk index) */
    double audio_s;  /* vocoders: seconds of audio the job produces */
} cz_job;

typedef struct cz_jobq {
    cz_job *ring;
    uint8_t *taken;  /* scratch for cz_jobq_schedule_picked, capacity cap */
    uint32_t cap, head, len;
    uint32_t max_batch, max_tokens;
    cz_job *batch; /* the batch in flight, capacity max_batch */
    uint32_t n_batch;
    bool in_flight;
} cz_jobq;

void cz_jobq_init(cz_jobq *q, uint32_t max_batch, uint32_t max_tokens);
void cz_jobq_free(cz_jobq *q);

/* Appends a job; amortised O(1). */
void cz_jobq_push(cz_jobq *q, const cz_job *job);

/* Forms the next batch: returns the number of jobs (0 when empty) and their total tokens
 * through *tokens. Must not be called while a batch is in flight. */
uint32_t cz_jobq_schedule(cz_jobq *q, uint64_t *tokens);

/* The job at queue position i (0 = oldest), i < cz_jobq_len. */
const cz_job *cz_jobq_peek(const cz_jobq *q, uint32_t i);

/* Forms the next batch from the queued jobs at positions pos[0..n) (distinct, each below
 * cz_jobq_len), in that order, up to max_batch jobs and max_tokens tokens (the first job
 * always fits); the other jobs keep their order. Returns the number of jobs and their
 * tokens through *tokens. O(queue), no allocation. Same precondition as cz_jobq_schedule. */
uint32_t cz_jobq_schedule_picked(cz_jobq *q, const uint32_t *pos, uint32_t n, uint64_t *tokens);

/* The batch in flight finished; returns its jobs (valid until the next schedule). */
const cz_job *cz_jobq_done(cz_jobq *q, uint32_t *n);

/* Drops the queued (not in-flight) jobs of `owner`; returns how many. O(queue). */
uint32_t cz_jobq_cancel(cz_jobq *q, uint32_t owner);

/* Jobs queued and not in flight. */
uint32_t cz_jobq_len(const cz_jobq *q);

#endif
