/* cz_team_solo.c - cz_team.h in a build without MPI: a team of this process alone, its
 * queue a counter. */
#include "cz_team.h"

#include <stdlib.h>

struct cz_team {
    uint64_t n_items, next; /* the queue: items next..n_items-1 are left */
    bool stopped;
};

cz_status cz_team_open(const char *cmd, cz_team **team, cz_err *err)
{
    int n = cz_team_launched_size();
    if (n > 1)
        return cz_err_set(err, CZ_EINVAL,
                          "%s: started as one of %d processes (mpirun or srun), but this "
                          "cadenza was built without MPI, so each would run the whole %s "
                          "alone: run it as one process, or build with MPI (meson setup "
                          "-Dmpi=enabled; docs/config.md)",
                          cmd, n, cmd);
    *team = cz_xcalloc(1, sizeof **team);
    return CZ_OK;
}

void cz_team_close(cz_team *team)
{
    free(team);
}

int cz_team_rank(const cz_team *team)
{
    return 0;
}

int cz_team_size(const cz_team *team)
{
    return 1;
}

int cz_team_agree(cz_team *team, int code, int *root_code)
{
    *root_code = code;
    return code;
}

void cz_team_share(cz_team *team, void *buf, size_t bytes)
{
}

void cz_team_start(cz_team *team, uint64_t n_items)
{
    team->n_items = n_items;
    team->next = 0;
}

bool cz_team_next(cz_team *team, uint64_t *item)
{
    if (team->stopped || team->next >= team->n_items)
        return false;
    *item = team->next++;
    return true;
}

/* A team of one has no worker: the workers' calls are never made, and no message comes. */
void cz_team_send_row(cz_team *team, uint64_t item, double wall_s, const char *text)
{
    CZ_ASSERT(!"cz_team_send_row: no worker in a team of one");
}

void cz_team_send_fail(cz_team *team, int code)
{
    CZ_ASSERT(!"cz_team_send_fail: no worker in a team of one");
}

int cz_team_finish_worker(cz_team *team)
{
    CZ_ASSERT(!"cz_team_finish_worker: no worker in a team of one");
    return 0;
}

bool cz_team_recv(cz_team *team, bool wait, cz_team_msg *msg)
{
    CZ_ASSERT(!wait);
    return false;
}

void cz_team_stop_all(cz_team *team)
{
    team->stopped = true;
}

void cz_team_finish_root(cz_team *team, int code)
{
}
