/* cz_evq.h - an event queue: a binary min-heap keyed on (time, sequence) (the simulator's
 * events, the engine's timers).
 *
 * The sequence number is assigned at push, so events at equal times fire in insertion
 * order and runs are deterministic (as libuv's timer heap does). Events are small values
 * stored in the heap array itself: pushing and popping allocate nothing once the array
 * has its capacity (sized at creation, doubled only if a run needs more). */
#ifndef CZ_EVQ_H
#define CZ_EVQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cz_event {
    double t_s;
    uint64_t seq;
    uint32_t type;
    uint32_t arg;
    uint32_t arg2;
} cz_event;

typedef struct cz_evq {
    cz_event *heap;
    size_t n, cap;
    uint64_t next_seq;
} cz_evq;

/* Initialises an empty queue with room for `capacity` events. */
void cz_evq_init(cz_evq *q, size_t capacity);
void cz_evq_free(cz_evq *q);

/* Schedules an event of `type` with arguments `arg`, `arg2` at time t_s. */
void cz_evq_push(cz_evq *q, double t_s, uint32_t type, uint32_t arg, uint32_t arg2);

/* Removes the earliest event (ties: earliest pushed) into *out; false when empty. */
bool cz_evq_pop(cz_evq *q, cz_event *out);

/* Earliest event without removing it, or NULL. */
const cz_event *cz_evq_peek(const cz_evq *q);

#endif
