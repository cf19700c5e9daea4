/* cz_out.c - see cz_out.h. */
#include "cz_out.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define CZ_OUT_PATH_MAX PATH_MAX

/* The signals that remove the temporaries before they take their default action. */
static const int out_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ, SIGABRT};

/* The program's one global (cz_out.h): the registered outputs. `tmp` and `n` are what the
 * signal handler reads; entries change only with the signals blocked, and `n` counts the
 * complete ones. */
static struct {
    char tmp[CZ_OUT_MAX][CZ_OUT_PATH_MAX];
    char *final[CZ_OUT_MAX];
    volatile sig_atomic_t n;
    volatile sig_atomic_t stop; /* a graceful interrupt was asked for (cz_out_graceful_interrupt) */
    /* Commit against a signal handled on another thread (the libraries' worker threads do
     * not block the signals the committing thread blocks): OUT_OPEN, OUT_COMMITTING while
     * the renames run, OUT_DYING once a handler removes the temporaries to end the
     * process. Whichever moves it from OUT_OPEN first goes ahead; a handler that finds a
     * commit running waits for it (its outputs have then all landed), a commit that finds
     * a handler running leaves the temporaries to it. */
    atomic_int state;
    bool hooked;
    bool graceful;
    bool graceful_term; /* SIGTERM too */
} out_table;

/* Unlinks every registered temporary (async-signal-safe: unlink only). */
static void unlink_temps(void)
{
    for (int i = 0; i < out_table.n; i++)
        unlink(out_table.tmp[i]);
}

enum { OUT_OPEN = 0, OUT_COMMITTING, OUT_DYING };
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the handlers' atomics must be lock-free");

/* Before a handler removes the temporaries: claims them, or waits out a commit running on
 * another thread (async-signal-safe: lock-free atomics). */
static void claim_for_signal(void)
{
    int expect = OUT_OPEN;
    if (atomic_compare_exchange_strong(&out_table.state, &expect, OUT_DYING))
        return;
    while (atomic_load(&out_table.state) == OUT_COMMITTING) {
    }
}

/* Installed with SA_RESETHAND | SA_NODEFER: the default action is back and the signal not
 * blocked, so raising it again ends the process as the signal would have. */
static void on_signal(int sig)
{
    int saved = errno;
    claim_for_signal();
    unlink_temps();
    errno = saved;
    raise(sig);
}

/* SIGINT under cz_out_graceful_interrupt: the first asks the run to stop; the second ends
 * the process as on_signal does. */
static void on_interrupt(int sig)
{
    int saved = errno;
    if (!out_table.stop) {
        static const char msg[] = "\ncadenza: interrupted: stopping (the signal again "
                                  "aborts)\n";
        out_table.stop = 1;
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        errno = saved;
        return;
    }
    claim_for_signal();
    unlink_temps();
    signal(sig, SIG_DFL);
    errno = saved;
    raise(sig);
}

static void on_exit_cleanup(void)
{
    unlink_temps();
    out_table.n = 0;
}

static void block_signals(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < CZ_ARRAY_LEN(out_signals); i++)
        sigaddset(&set, out_signals[i]);
    sigprocmask(SIG_BLOCK, &set, old);
}

static void restore_signals(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

static void install_handlers(void)
{
    for (size_t i = 0; i < CZ_ARRAY_LEN(out_signals); i++) {
        struct sigaction old;
        if (sigaction(out_signals[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        bool soft = (out_signals[i] == SIGINT && out_table.graceful) ||
                    (out_signals[i] == SIGTERM && out_table.graceful_term);
        sa.sa_handler = soft ? on_interrupt : on_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t k = 0; k < CZ_ARRAY_LEN(out_signals); k++)
            if (k != i)
                sigaddset(&sa.sa_mask, out_signals[k]);
        sa.sa_flags = soft ? SA_RESTART : SA_RESETHAND | SA_NODEFER;
        sigaction(out_signals[i], &sa, NULL);
    }
    CZ_ASSERT(atexit(on_exit_cleanup) == 0);
}

volatile sig_atomic_t *cz_out_graceful_interrupt(bool term)
{
    CZ_ASSERT(!out_table.hooked);
    out_table.graceful = true;
    out_table.graceful_term = term;
    install_handlers();
    out_table.hooked = true;
    return &out_table.stop;
}

/* Frees the final paths and empties the table; call with the signals blocked. */
static void forget(void)
{
    int n = out_table.n;
    out_table.n = 0;
    for (int i = 0; i < n; i++) {
        free(out_table.final[i]);
        out_table.final[i] = NULL;
    }
}

void cz_out_clean_stale(const char *final_path)
{
    char dir[CZ_OUT_PATH_MAX];
    const char *slash = strrchr(final_path, '/');
    const char *base = slash ? slash + 1 : final_path;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == final_path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - final_path), final_path);
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp", 4) != 0)
            continue;
        const char *digits = nm + bl + 4;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (digits[0] < '1' || digits[0] > '9' || *end != '\0' || errno || pid <= 0 ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its writer lives (or is not ours to ask about) */
        char path[CZ_OUT_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid())
            unlink(path);
    }
    closedir(d);
}

cz_status cz_out_add(const char *flag, const char *final_path, const char **tmp_path,
                     cz_err *err)
{
    CZ_ASSERT(flag != NULL && final_path != NULL);
    struct stat sb;
    if (stat(final_path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cz_err_set(err, CZ_EIO, "%s: cannot write '%s' (a folder: expected a file name)",
                          flag, final_path);
    if (stat(final_path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        *tmp_path = final_path; /* a device or pipe (/dev/stdout): written in place */
        return CZ_OK;
    }
    cz_out_clean_stale(final_path);
    int n = out_table.n;
    CZ_ASSERT(n < CZ_OUT_MAX);
    for (int i = 0; i < n; i++)
        if (strcmp(out_table.final[i], final_path) == 0)
            return cz_err_set(err, CZ_EINVAL, "%s: '%s' is also given for another output",
                              flag, final_path);
    char tmp[CZ_OUT_PATH_MAX];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp%ld", final_path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp)
        return cz_err_set(err, CZ_EINVAL, "%s: output path '%s' too long", flag, final_path);
    if (!out_table.hooked) {
        install_handlers();
        out_table.hooked = true;
    }
    char *final_copy = cz_xstrdup(final_path);
    sigset_t old;
    block_signals(&old);
    /* O_EXCL: never write through a link planted at the temporary's name; a stale file of
     * the same name (a killed run with this pid) is replaced. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
        int e = errno;
        restore_signals(&old);
        free(final_copy);
        return cz_err_set(err, CZ_EIO, "%s: cannot write '%s' (%s)", flag, final_path,
                          strerror(e));
    }
    close(fd);
    memcpy(out_table.tmp[n], tmp, (size_t)len + 1);
    out_table.final[n] = final_copy;
    out_table.n = n + 1;
    restore_signals(&old);
    *tmp_path = out_table.tmp[n];
    return CZ_OK;
}

cz_status cz_out_commit(cz_err *err)
{
    sigset_t old;
    block_signals(&old);
    int expect = OUT_OPEN;
    if (!atomic_compare_exchange_strong(&out_table.state, &expect, OUT_COMMITTING)) {
        /* a signal on another thread is removing the temporaries and ending the process */
        for (;;)
            pause();
    }
    int n = out_table.n, k = 0, e = 0;
    for (; k < n; k++) {
        if (rename(out_table.tmp[k], out_table.final[k]) != 0) {
            e = errno;
            break;
        }
    }
    cz_status st = CZ_OK;
    if (k < n) {
        st = cz_err_set(err, CZ_EIO, "%s: cannot move the finished file into place: %s",
                        out_table.final[k], strerror(e));
        for (int i = 0; i < k; i++)
            unlink(out_table.final[i]);
        unlink_temps();
    }
    forget();
    atomic_store(&out_table.state, OUT_OPEN);
    restore_signals(&old);
    return st;
}

void cz_out_final_names(char *msg, size_t cap)
{
    CZ_ASSERT(cap > 0 && memchr(msg, '\0', cap));
    for (int k = 0; k < out_table.n; k++) {
        const char *tmp = out_table.tmp[k], *fin = out_table.final[k];
        size_t tl = strlen(tmp), fl = strlen(fin);
        char *p;
        while ((p = strstr(msg, tmp)) != NULL) {
            /* the final path is the temporary's prefix: the message only shrinks */
            memmove(p + fl, p + tl, strlen(p + tl) + 1);
            memcpy(p, fin, fl);
        }
    }
}

void cz_out_discard(void)
{
    sigset_t old;
    block_signals(&old);
    unlink_temps();
    forget();
    restore_signals(&old);
}
