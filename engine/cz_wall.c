/* cz_wall.c - see cz_wall.h. */
#include "cz_wall.h"

#include <math.h>

double cz_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cz_wall_since_s(const struct timespec *t0)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)(ts.tv_sec - t0->tv_sec) + (double)(ts.tv_nsec - t0->tv_nsec) * 1e-9;
}

void cz_wall_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

void cz_wall_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *t0,
                        double until_s)
{
    double abs_t = (double)t0->tv_sec + (double)t0->tv_nsec * 1e-9 + until_s;
    struct timespec ts = {.tv_sec = (time_t)abs_t,
                          .tv_nsec = (long)((abs_t - floor(abs_t)) * 1e9)};
    pthread_cond_timedwait(cv, mu, &ts);
}
