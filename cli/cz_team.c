/* cz_team.c - what both team implementations share (cz_team.h): the launcher's count. */
#include "cz_team.h"

#include <errno.h>
#include <stdlib.h>

/* A positive count in the environment variable `name`, or 0 (unset or not a count). */
static long env_count(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno || *end || n < 1 ? 0 : n;
}

int cz_team_launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < CZ_ARRAY_LEN(vars); i++) {
        long n = env_count(vars[i]);
        if (n > 0)
            return n > 1000000 ? 1000000 : (int)n;
    }
    return 1;
}
