/* cz_wall.h - the engine's wall clock (CLOCK_MONOTONIC), shared by its two drivers and the
 * profiler: readings, a run's clock since its start, and timed waits on that clock. */
#ifndef CZ_WALL_H
#define CZ_WALL_H

#include <pthread.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
double cz_wall_s(void);
/* Seconds since t0 (a CLOCK_MONOTONIC reading). */
double cz_wall_since_s(const struct timespec *t0);
/* Initialises `cv` so that cz_wall_wait_until's timed waits use CLOCK_MONOTONIC. */
void cz_wall_cond_init(pthread_cond_t *cv);
/* With `mu` held: waits on `cv` until signalled or until `until_s` seconds after t0. */
void cz_wall_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *t0,
                        double until_s);

#endif
