#include "base/compat.h"
#include "base/spawn.h"

#include <grp.h>
#include <poll.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/strbuf.h"

extern char **environ;

/* What the child reports over the close-on-exec pipe. */
enum spawn_stage {
	STAGE_PID,      /* not a failure: the detached grandchild's pid */
	STAGE_FORK,
	STAGE_SETSID,
	STAGE_CGROUP,
	STAGE_STDIO,
	STAGE_CTTY,
	STAGE_SETGROUPS,
	STAGE_SETGID,
	STAGE_SETUID,
	STAGE_CHDIR,
	STAGE_EXEC,
};

struct spawn_report {
	int stage;  /* enum spawn_stage */
	int err;    /* errno */
	int value;  /* STAGE_PID: the pid; STAGE_CGROUP: the index of the file */
};

void spawn_opts_init(struct spawn_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->stdin_fd = -1;
	o->stdout_fd = -1;
	o->stderr_fd = -1;
}

static void child_report(int fd, int stage, int err, int value)
{
	struct spawn_report r = { stage, err, value };
	ssize_t n;
	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

static void child_fail(int fd, int stage, int value)
{
	child_report(fd, stage, errno, value);
	_exit(127);
}

/* glibc refuses sigaction() for the real-time signals it reserves for itself
 * (32 and 33), but an ignored disposition inherited from our own parent would
 * survive exec; reset those through the system call. */
static void reset_reserved_signal(int sig)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} ksa = { SIG_DFL, 0, NULL, 0 };
	syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
}

/* The child from fork to exec: async-signal-safe calls only. */
static void child_run(const struct spawn_opts *o, int report_fd)
{
	struct sigaction sa;
	sigset_t none;
	int src[3] = { o->stdin_fd, o->stdout_fd, o->stderr_fd };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (sigaction(sig, &sa, NULL) < 0)
			reset_reserved_signal(sig);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	if (o->flags & SPAWN_DETACH) {
		pid_t pid = fork();
		if (pid < 0)
			child_fail(report_fd, STAGE_FORK, 0);
		if (pid > 0) {
			child_report(report_fd, STAGE_PID, 0, (int)pid);
			_exit(0);
		}
	}
	if ((o->flags & SPAWN_SETSID) && setsid() < 0)
		child_fail(report_fd, STAGE_SETSID, 0);
	for (int i = 0; o->cgroup_procs && o->cgroup_procs[i]; i++) {
		int fd = open(o->cgroup_procs[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			child_fail(report_fd, STAGE_CGROUP, i);
		if (write(fd, "0", 1) != 1)
			child_fail(report_fd, STAGE_CGROUP, i);
		close(fd);
	}
	/* Move every source above 2 first so that dup2 cannot clobber one. */
	for (int i = 0; i < 3; i++) {
		if (src[i] < 0)
			src[i] = open("/dev/null", i == 0 ? O_RDONLY : O_RDWR);
		if (src[i] < 0)
			child_fail(report_fd, STAGE_STDIO, i);
		src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
		if (src[i] < 0)
			child_fail(report_fd, STAGE_STDIO, i);
	}
	for (int i = 0; i < 3; i++)
		if (dup2(src[i], i) < 0)
			child_fail(report_fd, STAGE_STDIO, i);
	if ((o->flags & SPAWN_CTTY) && ioctl(0, TIOCSCTTY, 0) < 0)
		child_fail(report_fd, STAGE_CTTY, 0);
	if (o->flags & SPAWN_SETUID) {
		if (setgroups(0, NULL) < 0)
			child_fail(report_fd, STAGE_SETGROUPS, 0);
		if (setresgid(o->gid, o->gid, o->gid) < 0)
			child_fail(report_fd, STAGE_SETGID, 0);
		if (setresuid(o->uid, o->uid, o->uid) < 0)
			child_fail(report_fd, STAGE_SETUID, 0);
	}
	if (o->cwd && chdir(o->cwd) < 0)
		child_fail(report_fd, STAGE_CHDIR, 0);
	char *const *env = o->env ? o->env : environ;
	if (o->flags & SPAWN_SEARCH_PATH)
		execvpe(o->argv[0], o->argv, env);
	else
		execve(o->argv[0], o->argv, env);
	child_fail(report_fd, STAGE_EXEC, 0);
}

static int report_error(const struct spawn_opts *o, const struct spawn_report *r, struct errbuf *eb)
{
	const char *what = strerror(r->err);
	switch (r->stage) {
	case STAGE_FORK:
		return error(eb, YERR(INTERNAL), "cannot fork: %s", what);
	case STAGE_SETSID:
		return error(eb, YERR(INTERNAL), "cannot start a session: %s", what);
	case STAGE_CGROUP:
		return error(eb, YERR(INTERNAL), "cannot join cgroup '%s': %s",
			     o->cgroup_procs[r->value], what);
	case STAGE_STDIO:
		return error(eb, YERR(INTERNAL), "cannot set up fd %d: %s", r->value, what);
	case STAGE_CTTY:
		return error(eb, YERR(INTERNAL), "cannot make the terminal the controlling one: %s", what);
	case STAGE_SETGROUPS:
		return error(eb, YERR(INTERNAL), "cannot drop the supplementary groups: %s", what);
	case STAGE_SETGID:
		return error(eb, YERR(INTERNAL), "cannot switch to gid %u: %s", (unsigned)o->gid, what);
	case STAGE_SETUID:
		return error(eb, YERR(INTERNAL), "cannot switch to uid %u: %s", (unsigned)o->uid, what);
	case STAGE_CHDIR:
		return error(eb, YERR(INTERNAL), "cannot change to directory '%s'%s: %s", o->cwd,
			     (o->flags & SPAWN_SETUID) ? " as the task's user" : "", what);
	default:
		return error(eb, YERR(INTERNAL), "cannot exec '%s': %s", o->argv[0], what);
	}
}

/* SPAWN_FAST: glibc's posix_spawn shares the parent's memory until the exec
 * (CLONE_VM | CLONE_VFORK), so nothing is copied, and it reports a failed
 * exec synchronously. */
static int spawn_posix(const struct spawn_opts *o, pid_t *pid_out, int *child_errno,
		       struct errbuf *eb)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
	char *const *env = o->env ? o->env : environ;
	int src[3] = { o->stdin_fd, o->stdout_fd, o->stderr_fd };
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 3; i++) {
		if (src[i] < 0)
			posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == 0 ? O_RDONLY : O_RDWR, 0);
		else
			posix_spawn_file_actions_adddup2(&fa, src[i], i);
	}
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	if (o->flags & SPAWN_SETSID)
		flags |= POSIX_SPAWN_SETSID;
	posix_spawnattr_setflags(&attr, flags);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	rc = (o->flags & SPAWN_SEARCH_PATH) ? posix_spawnp(&pid, o->argv[0], &fa, &attr, o->argv, env)
					     : posix_spawn(&pid, o->argv[0], &fa, &attr, o->argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		if (child_errno)
			*child_errno = rc;
		return error(eb, YERR(INTERNAL), "cannot exec '%s': %s", o->argv[0], strerror(rc));
	}
	*pid_out = pid;
	return 0;
}

int spawn_process(const struct spawn_opts *o, pid_t *pid_out, int *child_errno, struct errbuf *eb)
{
	int fds[2];
	pid_t pid, status_pid;
	struct spawn_report r;
	int ret = 0, status;
	ssize_t n;

	if (child_errno)
		*child_errno = 0;
	if (!o->argv || !o->argv[0])
		return error(eb, YERR(BAD_REQUEST), "cannot spawn: empty argv");
	/* (stdio sources above 2 only, so that no dup2 can clobber another source) */
	if (o->flags & SPAWN_FAST) {
		if ((o->flags & (SPAWN_DETACH | SPAWN_SETUID | SPAWN_CTTY)) || o->cgroup_procs || o->cwd ||
		    (o->stdin_fd >= 0 && o->stdin_fd <= 2) || (o->stdout_fd >= 0 && o->stdout_fd <= 2) ||
		    (o->stderr_fd >= 0 && o->stderr_fd <= 2))
			return error(eb, YERR(BAD_REQUEST), "cannot spawn '%s' fast: it needs fork",
				     o->argv[0]);
		return spawn_posix(o, pid_out, child_errno, eb);
	}
	if (pipe2(fds, O_CLOEXEC) < 0)
		return error(eb, YERR(INTERNAL), "cannot create a pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		ret = error(eb, YERR(INTERNAL), "cannot fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	if (pid == 0) {
		close(fds[0]);
		child_run(o, fds[1]);
	}
	close(fds[1]);
	status_pid = pid;
	for (;;) {
		n = read(fds[0], &r, sizeof(r));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == (ssize_t)sizeof(r) && r.stage == STAGE_PID) {
			pid = r.value;
			continue;
		}
		break;
	}
	close(fds[0]);
	if (o->flags & SPAWN_DETACH) {
		/* the intermediate child exits at once; reap it */
		while (waitpid(status_pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (n == (ssize_t)sizeof(r)) {
		if (child_errno)
			*child_errno = r.err;
		ret = report_error(o, &r, eb);
		if (!(o->flags & SPAWN_DETACH))
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		return ret;
	}
	if ((o->flags & SPAWN_DETACH) && pid == status_pid)
		return error(eb, YERR(INTERNAL), "cannot spawn '%s': the intermediate child died", o->argv[0]);
	*pid_out = pid;
	return 0;
}

int pidfd_open_pid(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

void spawn_result_release(struct spawn_result *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Appends what fd has to read now to sb, keeping its first max bytes;
 * closes fd at its end. */
static void drain(int *fd, struct strbuf *sb, size_t max)
{
	char buf[4096];

	while (*fd >= 0) {
		ssize_t n = read(*fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close_fd(fd);
			return;
		}
		size_t room = sb->len < max ? max - sb->len : 0;
		strbuf_add(sb, buf, (size_t)n < room ? (size_t)n : room);
	}
}

int spawn_run(const struct spawn_opts *o, const char *input, size_t len, uint64_t timeout_ms,
	      const volatile int *cancel, size_t max, struct spawn_result *res, int *child_errno,
	      struct errbuf *eb)
{
	struct spawn_opts so = *o;
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;
	int in_p[2] = { -1, -1 }, out_p[2] = { -1, -1 }, err_p[2] = { -1, -1 };
	uint64_t deadline = timeout_ms ? mono_ms() + timeout_ms : 0;
	size_t written = 0;
	bool killed = false;
	pid_t pid;
	int ret;

	memset(res, 0, sizeof(*res));
	if (pipe2(in_p, O_CLOEXEC) || pipe2(out_p, O_CLOEXEC) || pipe2(err_p, O_CLOEXEC)) {
		ret = error(eb, YERR(INTERNAL), "cannot create a pipe: %s", strerror(errno));
		goto out;
	}
	so.stdin_fd = in_p[0];
	so.stdout_fd = out_p[1];
	so.stderr_fd = err_p[1];
	so.flags = (so.flags | SPAWN_SETSID) & ~(unsigned)(SPAWN_DETACH | SPAWN_FAST);
	if ((ret = spawn_process(&so, &pid, child_errno, eb)))
		goto out;
	close_fd(&in_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	fcntl(in_p[1], F_SETFL, O_NONBLOCK);
	fcntl(out_p[0], F_SETFL, O_NONBLOCK);
	fcntl(err_p[0], F_SETFL, O_NONBLOCK);
	if (!input || !len)
		close_fd(&in_p[1]);
	/* until the program itself has ended: what it started in the
	 * background may hold its output open for much longer */
	for (;;) {
		struct pollfd p[3] = { { out_p[0], POLLIN, 0 }, { err_p[0], POLLIN, 0 }, { in_p[1], POLLOUT, 0 } };
		pid_t w;

		if (poll(p, 3, 50) > 0 && in_p[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n = write(in_p[1], input + written, len - written);
			if (n > 0)
				written += (size_t)n;
			if ((n < 0 && errno != EINTR && errno != EAGAIN) || written == len)
				close_fd(&in_p[1]);
		}
		drain(&out_p[0], &out, max);
		drain(&err_p[0], &err, max);
		w = waitpid(pid, &res->status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if (!killed && ((cancel && *cancel) || (deadline && mono_ms() >= deadline))) {
			res->cancelled = cancel && *cancel;
			res->timed_out = !res->cancelled;
			kill(-pid, SIGKILL);
			killed = true;
			close_fd(&in_p[1]);
		}
	}
	drain(&out_p[0], &out, max);
	drain(&err_p[0], &err, max);
	res->out_len = out.len;
	res->out = strbuf_detach(&out, NULL);
	res->err_len = err.len;
	res->err = strbuf_detach(&err, NULL);
out:
	close_fd(&in_p[0]);
	close_fd(&in_p[1]);
	close_fd(&out_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[0]);
	close_fd(&err_p[1]);
	strbuf_release(&out);
	strbuf_release(&err);
	return ret;
}
