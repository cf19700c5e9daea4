/* cz_team_mpi.c - cz_team.h in a build with MPI. Under a launcher, the ranks of
 * MPI_COMM_WORLD: workers send the root point-to-point messages (tag CZ__TAG_UP: a header,
 * then the text), the root answers a request for an item with the item (CZ__TAG_ITEM) and
 * ends with one verdict per worker (CZ__TAG_VERDICT). On the root, a dispatcher thread
 * makes every MPI call from cz_team_start until all DONEs are in, so its main thread runs
 * items too (MPI_THREAD_SERIALIZED). Waits poll with short sleeps, so a waiting rank
 * leaves its core to the others. Started directly, a team of one that never initialises
 * MPI. */
#include "cz_team.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

enum { CZ__TAG_UP = 1, CZ__TAG_ITEM = 2, CZ__TAG_VERDICT = 3 };
enum { CZ__REQUEST = 4 };                      /* an up message asking for an item */
static const uint64_t cz__no_item = UINT64_MAX; /* the answer when none is left */

/* The header of a message to the root; the text follows it, without its NUL. */
typedef struct up_header {
    uint64_t item;
    double wall_s;
    int32_t kind; /* cz_team_kind or CZ__REQUEST */
    int32_t code;
} up_header;

struct cz_team {
    bool mpi; /* MPI was initialised (a launcher started this process) */
    int rank, size;
    /* the queue (the root's; guarded by mu): items next..n_items-1 are left */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t n_items, next;
    bool stopped;
    /* root: the dispatcher thread and the messages it hands over (a FIFO, guarded by mu) */
    pthread_t dispatcher;
    bool dispatching;
    cz_team_msg *inbox;
    size_t in_head, in_n, in_cap;
    int *verdict_code;
    MPI_Request *verdict_req;
    /* worker: the sends not yet known delivered */
    MPI_Request *req;
    char **buf;
    size_t n_req, cap_req;
};

/* An MPI call that failed (the communicator returns errors): a broken job, not bad
 * input; says where, and exits (the atexit handlers remove the temporaries, cz_out.h;
 * the launcher ends the other ranks). */
#define CZ__MPI_CHECK(call) cz__mpi_check((call), #call, __FILE__, __LINE__)
static void cz__mpi_check(int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    fprintf(stderr, "cadenza: %s:%d: %s failed: %s\n", file, line, call, msg);
    exit(1);
}

/* Waits for `req` polling every 100 us, so the waiting rank does not spin on a core. */
static void wait_gently(MPI_Request *req)
{
    for (;;) {
        int done = 0;
        CZ__MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

cz_status cz_team_open(const char *cmd, cz_team **team, cz_err *err)
{
    cz_team *t = cz_xcalloc(1, sizeof *t);
    t->size = 1;
    CZ_ASSERT(pthread_mutex_init(&t->mu, NULL) == 0);
    CZ_ASSERT(pthread_cond_init(&t->cv, NULL) == 0);
    bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
                    getenv("PMIX_RANK") || getenv("SLURM_STEP_NUM_TASKS");
    if (launched) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            cz_team_close(t);
            return cz_err_set(err, CZ_EIO, "%s: MPI_Init_thread failed (error %d)", cmd, rc);
        }
        t->mpi = true;
        if (provided < MPI_THREAD_SERIALIZED) {
            cz_team_close(t);
            return cz_err_set(err, CZ_EIO,
                              "%s: this MPI library does not allow calls from a second thread "
                              "(MPI_THREAD_SERIALIZED), which the root rank needs",
                              cmd);
        }
        CZ__MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CZ__MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &t->rank));
        CZ__MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &t->size));
    }
    int n = cz_team_launched_size();
    if (t->size == 1 && n > 1) {
        cz_team_close(t);
        return cz_err_set(err, CZ_EINVAL,
                          "%s: started as one of %d processes, but MPI sees this one alone "
                          "(a launcher without MPI support, such as srun --mpi=none?), so "
                          "each would run the whole %s alone",
                          cmd, n, cmd);
    }
    if (t->rank == 0) {
        t->verdict_code = cz_xcalloc((size_t)t->size, sizeof *t->verdict_code);
        t->verdict_req = cz_xcalloc((size_t)t->size, sizeof *t->verdict_req);
    }
    *team = t;
    return CZ_OK;
}

void cz_team_close(cz_team *team)
{
    if (!team)
        return;
    CZ_ASSERT(team->n_req == 0 && !team->dispatching);
    if (team->mpi)
        CZ__MPI_CHECK(MPI_Finalize());
    for (size_t i = 0; i < team->in_n; i++)
        free(team->inbox[(team->in_head + i) % team->in_cap].text);
    free(team->inbox);
    free(team->req);
    free(team->buf);
    free(team->verdict_code);
    free(team->verdict_req);
    pthread_mutex_destroy(&team->mu);
    pthread_cond_destroy(&team->cv);
    free(team);
}

int cz_team_rank(const cz_team *team)
{
    return team->rank;
}

int cz_team_size(const cz_team *team)
{
    return team->size;
}

int cz_team_agree(cz_team *team, int code, int *root_code)
{
    if (!team->mpi) {
        *root_code = code;
        return code;
    }
    int root = code, most = code;
    CZ__MPI_CHECK(MPI_Bcast(&root, 1, MPI_INT, 0, MPI_COMM_WORLD));
    CZ__MPI_CHECK(MPI_Allreduce(&code, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    *root_code = root;
    return most;
}

void cz_team_share(cz_team *team, void *buf, size_t bytes)
{
    if (!team->mpi || bytes == 0)
        return;
    CZ_ASSERT(bytes <= (size_t)INT32_MAX);
    CZ__MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
}

/* Root: receives the message `s` announces; *msg owns its text. */
static void recv_up(const MPI_Status *s, cz_team_msg *msg)
{
    int n = 0;
    CZ__MPI_CHECK(MPI_Get_count(s, MPI_BYTE, &n));
    CZ_ASSERT(n >= (int)sizeof(up_header));
    char *b = cz_xmalloc((size_t)n + 1);
    CZ__MPI_CHECK(MPI_Recv(b, n, MPI_BYTE, s->MPI_SOURCE, CZ__TAG_UP, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    up_header h;
    memcpy(&h, b, sizeof h);
    CZ_ASSERT(h.kind >= CZ_TEAM_ROW && h.kind <= CZ__REQUEST);
    memset(msg, 0, sizeof *msg);
    msg->kind = (cz_team_kind)h.kind;
    msg->from = s->MPI_SOURCE;
    msg->item = h.item;
    msg->code = h.code;
    msg->wall_s = h.wall_s;
    if (msg->kind == CZ_TEAM_ROW) {
        size_t len = (size_t)n - sizeof h;
        memmove(b, b + sizeof h, len);
        b[len] = '\0';
        msg->text = b;
    } else {
        free(b);
    }
}

/* Takes the next item under the lock: false when none is left or the run stopped. */
static bool take_item(cz_team *t, uint64_t *item)
{
    pthread_mutex_lock(&t->mu);
    bool ok = !t->stopped && t->next < t->n_items;
    if (ok)
        *item = t->next++;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

/* The root's dispatcher thread: answers requests for items and hands every other message
 * to the inbox, until each worker's DONE has been handed over. */
static void *dispatch(void *arg)
{
    cz_team *t = arg;
    int done = 0;
    while (done < t->size - 1) {
        int flag = 0;
        MPI_Status s;
        CZ__MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, CZ__TAG_UP, MPI_COMM_WORLD, &flag, &s));
        if (!flag) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        cz_team_msg msg;
        recv_up(&s, &msg);
        if ((int)msg.kind == CZ__REQUEST) {
            uint64_t item = cz__no_item;
            take_item(t, &item);
            CZ__MPI_CHECK(MPI_Send(&item, 1, MPI_UINT64_T, msg.from, CZ__TAG_ITEM,
                                   MPI_COMM_WORLD));
            continue;
        }
        done += msg.kind == CZ_TEAM_DONE;
        pthread_mutex_lock(&t->mu);
        if (t->in_n == t->in_cap) {
            size_t cap = t->in_cap ? 2 * t->in_cap : 16;
            cz_team_msg *q = cz_xcalloc(cap, sizeof *q);
            for (size_t i = 0; i < t->in_n; i++)
                q[i] = t->inbox[(t->in_head + i) % t->in_cap];
            free(t->inbox);
            t->inbox = q;
            t->in_cap = cap;
            t->in_head = 0;
        }
        t->inbox[(t->in_head + t->in_n++) % t->in_cap] = msg;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

void cz_team_start(cz_team *team, uint64_t n_items)
{
    team->n_items = n_items;
    team->next = 0;
    if (team->rank == 0 && team->size > 1) {
        CZ_ASSERT(pthread_create(&team->dispatcher, NULL, dispatch, team) == 0);
        team->dispatching = true;
    }
}

/* Worker: frees the sends that have completed (all of them, waiting, with `wait`). */
static void reap_sends(cz_team *t, bool wait)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n_req; i++) {
        int done = 0;
        if (wait)
            wait_gently(&t->req[i]);
        else
            CZ__MPI_CHECK(MPI_Test(&t->req[i], &done, MPI_STATUS_IGNORE));
        if (wait || done) {
            free(t->buf[i]);
        } else {
            t->req[k] = t->req[i];
            t->buf[k] = t->buf[i];
            k++;
        }
    }
    t->n_req = k;
}

static void send_up(cz_team *t, int kind, uint64_t item, int code, double wall_s,
                    const char *text)
{
    CZ_ASSERT(t->mpi && t->rank > 0);
    reap_sends(t, false);
    size_t len = text ? strlen(text) : 0;
    CZ_ASSERT(len <= (size_t)INT32_MAX - sizeof(up_header));
    char *b = cz_xmalloc(sizeof(up_header) + len);
    up_header h = {.item = item, .wall_s = wall_s, .kind = kind, .code = code};
    memcpy(b, &h, sizeof h);
    if (len)
        memcpy(b + sizeof h, text, len);
    if (t->n_req == t->cap_req) {
        t->cap_req = t->cap_req ? 2 * t->cap_req : 16;
        t->req = cz_xrealloc(t->req, t->cap_req, sizeof *t->req);
        t->buf = cz_xrealloc(t->buf, t->cap_req, sizeof *t->buf);
    }
    CZ__MPI_CHECK(MPI_Isend(b, (int)(sizeof h + len), MPI_BYTE, 0, CZ__TAG_UP, MPI_COMM_WORLD,
                            &t->req[t->n_req]));
    t->buf[t->n_req++] = b;
}

bool cz_team_next(cz_team *team, uint64_t *item)
{
    if (team->rank == 0)
        return take_item(team, item);
    uint64_t got = cz__no_item;
    MPI_Request r;
    CZ__MPI_CHECK(MPI_Irecv(&got, 1, MPI_UINT64_T, 0, CZ__TAG_ITEM, MPI_COMM_WORLD, &r));
    send_up(team, CZ__REQUEST, 0, 0, 0, NULL);
    wait_gently(&r);
    if (got == cz__no_item)
        return false;
    *item = got;
    return true;
}

void cz_team_send_row(cz_team *team, uint64_t item, double wall_s, const char *text)
{
    send_up(team, CZ_TEAM_ROW, item, 0, wall_s, text);
}

void cz_team_send_fail(cz_team *team, int code)
{
    CZ_ASSERT(code != 0);
    send_up(team, CZ_TEAM_FAIL, 0, code, 0, NULL);
}

int cz_team_finish_worker(cz_team *team)
{
    send_up(team, CZ_TEAM_DONE, 0, 0, 0, NULL);
    reap_sends(team, true);
    int verdict = 0;
    MPI_Request r;
    CZ__MPI_CHECK(MPI_Irecv(&verdict, 1, MPI_INT, 0, CZ__TAG_VERDICT, MPI_COMM_WORLD, &r));
    wait_gently(&r);
    return verdict;
}

bool cz_team_recv(cz_team *team, bool wait, cz_team_msg *msg)
{
    CZ_ASSERT(team->rank == 0);
    if (!team->dispatching)
        return false;
    pthread_mutex_lock(&team->mu);
    while (wait && team->in_n == 0)
        pthread_cond_wait(&team->cv, &team->mu);
    bool got = team->in_n > 0;
    if (got) {
        *msg = team->inbox[team->in_head];
        team->in_head = (team->in_head + 1) % team->in_cap;
        team->in_n--;
    }
    pthread_mutex_unlock(&team->mu);
    return got;
}

void cz_team_stop_all(cz_team *team)
{
    CZ_ASSERT(team->rank == 0);
    pthread_mutex_lock(&team->mu);
    team->stopped = true;
    pthread_mutex_unlock(&team->mu);
}

void cz_team_finish_root(cz_team *team, int code)
{
    CZ_ASSERT(team->rank == 0);
    if (!team->dispatching)
        return;
    CZ_ASSERT(pthread_join(team->dispatcher, NULL) == 0);
    team->dispatching = false;
    for (int r = 1; r < team->size; r++) {
        team->verdict_code[r] = code;
        CZ__MPI_CHECK(MPI_Isend(&team->verdict_code[r], 1, MPI_INT, r, CZ__TAG_VERDICT,
                                MPI_COMM_WORLD, &team->verdict_req[r]));
    }
    for (int r = 1; r < team->size; r++)
        wait_gently(&team->verdict_req[r]);
}
