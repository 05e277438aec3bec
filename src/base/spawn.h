/*
 * Starting a child process: the one spawn API of yard, after libuv's
 * src/unix/process.c. Everything the child does between fork and exec is
 * prepared by the parent first, so the child only calls async-signal-safe
 * functions. A failure in the child before or at exec (cannot join a
 * cgroup, cannot chdir, cannot exec) comes back to spawn_process() over a
 * close-on-exec pipe, so the caller learns it synchronously: when
 * spawn_process() returns 0 the program has been exec'd.
 *
 * In the child: signal dispositions are reset to their defaults, the signal
 * mask is cleared, optionally a new session is made (setsid), the process
 * moves itself into each listed cgroup (writes "0" to each listed file:
 * cgroup.procs, or a v1 "tasks" file, which for the single-threaded child
 * is the same and cheaper), stdio is set up (stdin becomes the controlling
 * terminal with SPAWN_CTTY), with SPAWN_SETUID the
 * privileges are dropped (setgroups to none, setresgid, setresuid, in that
 * order), the working directory changed (as the new user), and then argv is
 * exec'd with env.
 */
#ifndef YARD_SPAWN_H
#define YARD_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

enum spawn_flags {
	SPAWN_SETSID = 1 << 0, /* new session and process group (pgid == pid) */
	SPAWN_DETACH = 1 << 1, /* double fork: the program is not our child; the
				  intermediate child is reaped by spawn_process() */
	SPAWN_SEARCH_PATH = 1 << 2, /* execvpe: look argv[0] up in PATH */
	/* Start with posix_spawn, which does not copy the parent's page tables:
	 * well under a millisecond where fork takes milliseconds in a large
	 * threaded parent such as the agent. Only for children that need no
	 * cgroup, no cwd, no detaching, and stdio sources above 2; and glibc
	 * leaves its two internal real-time signals (32, 33) ignored in the
	 * child, so use it for yard's own programs, not for tasks. */
	SPAWN_FAST = 1 << 3,
	/* Run as uid and gid (struct spawn_opts) with no supplementary groups;
	 * the parent must be root. A failure is reported like a failed exec. */
	SPAWN_SETUID = 1 << 4,
	/* With SPAWN_SETSID: make stdin, the slave of a pseudo-terminal, the
	 * new session's controlling terminal (TIOCSCTTY): ^C and ^\ typed
	 * into it signal the program's foreground process group. */
	SPAWN_CTTY = 1 << 5,
};

struct spawn_opts {
	char *const *argv;          /* NULL-terminated; argv[0] is the program */
	char *const *env;           /* NULL-terminated; NULL: inherit environ */
	const char *cwd;            /* NULL: inherit */
	int stdin_fd;               /* -1: /dev/null */
	int stdout_fd;              /* -1: /dev/null */
	int stderr_fd;              /* -1: /dev/null */
	const char *const *cgroup_procs; /* NULL-terminated files to write "0" to (cgroup.procs or v1 tasks), or NULL */
	unsigned flags;             /* enum spawn_flags */
	uid_t uid;                  /* SPAWN_SETUID: the user the program runs as */
	gid_t gid;                  /* SPAWN_SETUID: its group */
};

/* spawn_opts_init: no argv, inherit env and cwd, stdio to /dev/null, no flags. */
void spawn_opts_init(struct spawn_opts *o);

/*
 * spawn_process starts o->argv. On success returns 0 and *pid (OUT) is the
 * pid of the program (with SPAWN_DETACH: of the grandchild, which is not our
 * child and must not be waited for). The stdio fds are not closed; every
 * other fd marked close-on-exec is closed by the exec. On failure returns
 * YERR(INTERNAL) with a message naming what failed ("cannot exec '/x': No
 * such file or directory"); the failed child has been reaped. The caller's
 * errno-level cause is also stored in *child_errno when it is not NULL.
 */
int spawn_process(const struct spawn_opts *o, pid_t *pid, int *child_errno, struct errbuf *eb);

/* What spawn_run gives back of a program it ran to its end. */
struct spawn_result {
	int status;            /* its waitpid status */
	bool timed_out;        /* killed at the deadline */
	bool cancelled;        /* killed because *cancel became non-zero */
	char *out, *err;       /* owned, NUL-terminated: the first max bytes of its stdout, stderr */
	size_t out_len, err_len;
};

void spawn_result_release(struct spawn_result *r);

/*
 * spawn_run runs o->argv to its end, for a worker thread (it blocks):
 * input (len bytes; NULL: none) is its stdin, its stdout and stderr are
 * collected (the first max bytes of each kept), and o's stdio fds are
 * ignored. It runs in a session of its own (SPAWN_SETSID is added), so that
 * what it started goes with it: at timeout_ms (0: none), or once *cancel
 * (may be NULL) is non-zero, checked ten times a second, its whole process
 * group is killed (SIGKILL). Returns 0 with *res filled whatever the
 * program's status (res->status, timed_out, cancelled say how it ended),
 * or spawn_process's error, *res then empty.
 */
int spawn_run(const struct spawn_opts *o, const char *input, size_t len, uint64_t timeout_ms,
	      const volatile int *cancel, size_t max, struct spawn_result *res, int *child_errno,
	      struct errbuf *eb);

/* pidfd_open_pid: a pidfd for pid (readable once it has exited), or -1 with
 * errno (ENOSYS on kernels before 5.3, ESRCH when it is gone). */
int pidfd_open_pid(pid_t pid);

#endif
