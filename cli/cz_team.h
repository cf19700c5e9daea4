/* cz_team.h - the processes one command runs on: this process alone, or the ranks of an
 * MPI job (`mpirun -n N cadenza sweep ...`, docs/config.md). Rank 0 is the root: it writes
 * the outputs and prints; every rank, the root included, takes items (the sweep's points)
 * from one queue the root keeps, so a rank that drew short items takes more; the other
 * ranks (workers) send each result to the root as text.
 *
 * Two implementations: cz_team_mpi.c (a build with MPI, meson -Dmpi) and cz_team_solo.c
 * (without: always one process). Either way a team is one process unless a launcher
 * started this one (cz_team_launched_size): a build with MPI started directly never
 * initialises MPI.
 *
 * The protocol: between cz_team_start and the end of the items, a thread of the root
 * answers the workers' requests for items and hands their messages to the root's
 * cz_team_recv. Each worker sends one message per item it ran (a row, or a failure that
 * ends its share), then DONE; the root receives until it has each worker's DONE, then
 * sends each worker the verdict (the job's exit code), which cz_team_finish_worker
 * returns. After a failure (cz_team_stop_all) no rank is given another item. Messages
 * from one worker arrive in the order it sent them. */
#ifndef CZ_TEAM_H
#define CZ_TEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cz_base.h"

typedef struct cz_team cz_team;

typedef enum { CZ_TEAM_ROW = 1, CZ_TEAM_FAIL = 2, CZ_TEAM_DONE = 3 } cz_team_kind;

/* A message from a worker to the root. */
typedef struct cz_team_msg {
    cz_team_kind kind;
    int from;      /* the sender's rank */
    uint64_t item; /* ROW: the item it is the result of */
    int code;      /* FAIL: the worker's exit code */
    double wall_s; /* ROW: the item's wall time */
    char *text;    /* ROW: the result (caller frees); NULL otherwise */
} cz_team_msg;

/* The number of processes a launcher says it started: OMPI_COMM_WORLD_SIZE (Open MPI's
 * mpirun), else PMI_SIZE (MPICH's mpiexec, Slurm's srun with PMI-2), else
 * SLURM_STEP_NUM_TASKS (srun); 1 when none is set. A value that is not a positive count
 * counts as 1. */
int cz_team_launched_size(void);

/* Joins the team: under a launcher, MPI_Init and the world communicator (with MPI); this
 * process alone otherwise. `cmd` names the command in messages. Fails with CZ_EINVAL when
 * the launcher started more than one process and this build cannot join them (no MPI, or
 * MPI sees a single rank), and CZ_EIO when MPI fails to start. *team is set on success;
 * close it with cz_team_close on every rank. */
cz_status cz_team_open(const char *cmd, cz_team **team, cz_err *err);

/* Leaves the team (MPI_Finalize with MPI) and frees it. NULL is a no-op. */
void cz_team_close(cz_team *team);

int cz_team_rank(const cz_team *team);
int cz_team_size(const cz_team *team);

/* Collective: every rank passes its exit code; returns the largest, and *root_code is the
 * root's. */
int cz_team_agree(cz_team *team, int code, int *root_code);

/* Collective: the root's `bytes` bytes at `buf` copied into every rank's `buf`. */
void cz_team_share(cz_team *team, void *buf, size_t bytes);

/* Collective: the items 0..n_items-1 go into the queue (the same n_items on every
 * rank); the root starts answering the workers. */
void cz_team_start(cz_team *team, uint64_t n_items);

/* Any rank: takes the next item from the queue into *item; false when none is left or
 * the run was stopped. A worker waits for the root's answer. */
bool cz_team_next(cz_team *team, uint64_t *item);

/* Worker: sends the result of `item` (text copied; the send completes in the background,
 * by cz_team_finish_worker at the latest). */
void cz_team_send_row(cz_team *team, uint64_t item, double wall_s, const char *text);

/* Worker: reports that its share failed with exit code `code` (it has printed why). */
void cz_team_send_fail(cz_team *team, int code);

/* Worker: ends its share: sends DONE, waits for its sends to be delivered and for the
 * root's verdict, and returns the verdict. */
int cz_team_finish_worker(cz_team *team);

/* Root: the next message from a worker into *msg. With `wait`, blocks until one comes
 * (the caller must still expect one: a worker without its DONE); without, returns false
 * when none has arrived. */
bool cz_team_recv(cz_team *team, bool wait, cz_team_msg *msg);

/* Root: the run failed: no rank is given another item. */
void cz_team_stop_all(cz_team *team);

/* Root, once every worker's DONE is in: sends every worker the verdict `code` and waits
 * until they are delivered. */
void cz_team_finish_root(cz_team *team, int code);

#endif
