/* cz_out.h - a command's output files, committed all together or not at all.
 *
 * A command registers each output file before it runs: cz_out_add() creates an empty
 * temporary file beside the final one ("results.h5.tmp<pid>"), so an unwritable
 * destination fails before a long run, and returns its path for the writer to fill.
 * cz_out_commit() renames every temporary to its final name with the signals below
 * blocked, so a results file and its summary land together; if a rename fails, the outputs
 * already renamed by that commit and the remaining temporaries are removed.
 * cz_out_discard() removes the temporaries (on any failure). Until the commit, the
 * temporaries never outlive the process: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ
 * and SIGABRT remove them and then take their default action (a signal ignored when the
 * program started stays ignored), and exit() removes them through an atexit handler
 * (cz_xmalloc's out-of-memory exit included). SIGKILL cannot be caught: it leaves the
 * temporaries, and between two renames of a commit it leaves some outputs without the
 * others.
 *
 * A signal may be handled on any thread (a library's worker threads do not block what the
 * committing thread blocks): a handler that finds a commit running waits for it to finish
 * before it ends the process, so the outputs still land together or not at all.
 *
 * The registered temporaries live in this module's one static table, the single global of
 * the program: a signal handler can reach nothing else. Only the CLI uses it, one command
 * per process. */
#ifndef CZ_OUT_H
#define CZ_OUT_H

#include <signal.h>
#include <stdbool.h>

#include "cz_base.h"

/* Most outputs one command registers. */
#define CZ_OUT_MAX 4

/* Registers `final_path`, given by `flag` ("-o", "--summary"), as an output and creates
 * its temporary; *tmp_path (valid until the commit or discard) is where the writer must
 * write. A path that exists and is not a
 * regular file (/dev/stdout, a pipe) is not registered: *tmp_path is `final_path` itself,
 * written in place, never renamed over or removed. The first call installs the
 * signal handlers and the atexit handler. CZ_EINVAL when the path is already registered
 * or too long, CZ_EIO "<flag>: cannot write '<final_path>' (<reason>)" when the path is a
 * folder or the temporary cannot be created (a missing or unwritable folder). Registering
 * more than CZ_OUT_MAX outputs is a bug (CZ_ASSERT). */
cz_status cz_out_add(const char *flag, const char *final_path, const char **tmp_path,
                     cz_err *err);

/* For a long run that can stop early with what it has (`cadenza replay`, `cadenza serve`):
 * the first SIGINT (and SIGTERM when `term`) only sets the returned flag (and says so on
 * stderr), and the run ends and commits its outputs; a second acts as above. Call before
 * cz_out_add. */
volatile sig_atomic_t *cz_out_graceful_interrupt(bool term);

/* Renames every registered temporary to its final path, with the signals blocked, and
 * forgets them. On a failed rename: CZ_EIO naming that output, and no output of this
 * commit is left (neither renamed nor temporary). */
cz_status cz_out_commit(cz_err *err);

/* Removes every registered temporary and forgets them. A no-op when none is registered. */
void cz_out_discard(void);

/* Removes the temporaries of `final_path` ("<final_path>.tmp<pid>") that runs killed by
 * SIGKILL left: regular files of this user whose process no longer exists. cz_out_add
 * calls it; so does a writer of temporaries of its own (the sweep's partial file). */
void cz_out_clean_stale(const char *final_path);

/* Rewrites, in the NUL-terminated message `msg` (`cap` bytes), each registered temporary's
 * path as its output's final path, so an error a writer reports names the file the user
 * asked for (cut to fit `cap`). */
void cz_out_final_names(char *msg, size_t cap);

#endif
