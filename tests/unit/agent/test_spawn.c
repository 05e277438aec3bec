/* spawn_process: exec failure reported, setsid, cwd, stdio, detach. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/spawn.h"
#include "base/xalloc.h"
#include "base/strbuf.h"

static void test_exec_failure(void **state)
{
	(void)state;
	char *argv[] = { "/nonexistent/prog", NULL };
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	pid_t pid = -1;
	int err;
	spawn_opts_init(&o);
	o.argv = argv;
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
	assert_int_equal(err, ENOENT);
	assert_string_equal(eb.msg, "cannot exec '/nonexistent/prog': No such file or directory");
	assert_int_equal(pid, -1);
	/* the failed child was reaped */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
}

static void test_bad_cwd(void **state)
{
	(void)state;
	char *argv[] = { "/bin/true", NULL };
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	pid_t pid;
	int err;
	spawn_opts_init(&o);
	o.argv = argv;
	o.cwd = "/nonexistent-dir";
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
	assert_int_equal(err, ENOENT);
	assert_string_equal(eb.msg, "cannot change to directory '/nonexistent-dir': No such file or directory");
}

/* Runs argv with stdout to a pipe; OUT out: what it printed; returns its pid. */
static pid_t run_capture(struct spawn_opts *o, struct strbuf *out)
{
	int fds[2];
	pid_t pid;
	struct errbuf eb = ERRBUF_INIT;
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	o->stdout_fd = fds[1];
	assert_int_equal(spawn_process(o, &pid, NULL, &eb), 0);
	close(fds[1]);
	assert_int_equal(strbuf_read_fd(out, fds[0]), 0);
	close(fds[0]);
	return pid;
}

static void test_setsid_env_cwd(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "echo $$ $(ps -o sid= -p $$) $FOO $(pwd)", NULL };
	char *env[] = { "FOO=bar", "PATH=/usr/bin:/bin", NULL };
	struct spawn_opts o;
	struct strbuf out = STRBUF_INIT;
	int status;
	spawn_opts_init(&o);
	o.argv = argv;
	o.env = env;
	o.cwd = "/tmp";
	o.flags = SPAWN_SETSID;
	pid_t pid = run_capture(&o, &out);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
	char expect[128];
	snprintf(expect, sizeof(expect), "%d %d bar /tmp\n", (int)pid, (int)pid);
	assert_string_equal(out.buf, expect);
	strbuf_release(&out);
}

/* SPAWN_SETUID: the program runs as the uid and gid given, with no
 * supplementary groups, and changes to its working dir as that user (a
 * root-only dir is refused). Not root, the drop itself is refused. */
static void test_setuid(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "id -u; id -g; id -G", NULL };
	char dir[] = "/tmp/yard-spawn-setuid-XXXXXX";
	struct spawn_opts o;
	struct strbuf out = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	pid_t pid;
	int status, err;

	spawn_opts_init(&o);
	o.argv = argv;
	o.flags = SPAWN_SETUID;
	o.uid = 61234;
	o.gid = 61235;
	if (geteuid() != 0) {
		assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
		assert_string_equal(eb.msg, "cannot drop the supplementary groups: Operation not permitted");
		return;
	}
	pid = run_capture(&o, &out);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_string_equal(out.buf, "61234\n61235\n61235\n");
	strbuf_release(&out);

	/* a dir only root may enter: refused to the task's user */
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0700), 0);
	o.cwd = dir;
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
	assert_int_equal(err, EACCES);
	char want[200];
	snprintf(want, sizeof(want), "cannot change to directory '%s' as the task's user: Permission denied", dir);
	assert_string_equal(eb.msg, want);
	/* SPAWN_FAST cannot drop privileges: refused, not ignored */
	o.cwd = NULL;
	o.flags = SPAWN_SETUID | SPAWN_FAST;
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(BAD_REQUEST));
	rmdir(dir);
}

static void test_signals_reset(void **state)
{
	(void)state;
	/* exec: grep itself reads its own mask; a shell waiting for a child
	 * blocks signals around the fork, so reading the shell's is racy */
	char *argv[] = { "/bin/sh", "-c", "exec grep -E '^(SigBlk|SigIgn)' /proc/self/status", NULL };
	struct spawn_opts o;
	struct strbuf out = STRBUF_INIT;
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	signal(SIGUSR1, SIG_IGN);
	spawn_opts_init(&o);
	o.argv = argv;
	pid_t pid = run_capture(&o, &out);
	waitpid(pid, NULL, 0);
	sigprocmask(SIG_SETMASK, &old, NULL);
	signal(SIGUSR1, SIG_DFL);
	assert_string_equal(out.buf, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
	strbuf_release(&out);
}

static void test_detach(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "echo $PPID", NULL };
	struct spawn_opts o;
	struct strbuf out = STRBUF_INIT;
	spawn_opts_init(&o);
	o.argv = argv;
	o.flags = SPAWN_DETACH | SPAWN_SETSID;
	pid_t pid = run_capture(&o, &out);
	assert_true(pid > 0);
	/* not our child: nothing to wait for */
	assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	char ours[32];
	snprintf(ours, sizeof(ours), "%d\n", (int)getpid());
	assert_string_not_equal(out.buf, ours);
	strbuf_release(&out);
}

static void test_detach_exec_failure(void **state)
{
	(void)state;
	char *argv[] = { "/nonexistent/prog", NULL };
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	pid_t pid;
	int err;
	spawn_opts_init(&o);
	o.argv = argv;
	o.flags = SPAWN_DETACH;
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
	assert_int_equal(err, ENOENT);
}

/* SPAWN_FAST: exec failures come back, setsid and stdio work, and what it
 * cannot do is refused rather than done wrong. */
static void test_fast(void **state)
{
	(void)state;
	char *bad[] = { "/nonexistent/prog", NULL };
	char *argv[] = { "/bin/sh", "-c", "echo $$ $(cut -d' ' -f6 /proc/$$/stat)", NULL };
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf out = STRBUF_INIT;
	pid_t pid = -1;
	int err = 0;

	spawn_opts_init(&o);
	o.argv = bad;
	o.flags = SPAWN_FAST;
	assert_int_equal(spawn_process(&o, &pid, &err, &eb), YERR(INTERNAL));
	assert_string_equal(eb.msg, "cannot exec '/nonexistent/prog': No such file or directory");
	assert_int_equal(err, ENOENT);

	spawn_opts_init(&o);
	o.argv = argv;
	o.flags = SPAWN_FAST | SPAWN_SETSID;
	pid = run_capture(&o, &out);
	waitpid(pid, NULL, 0);
	/* "PID SID": a new session led by the child itself */
	char *want = xasprintf("%d %d\n", (int)pid, (int)pid);
	assert_string_equal(out.buf, want);
	free(want);
	strbuf_release(&out);

	spawn_opts_init(&o);
	o.argv = argv;
	o.cwd = "/";
	o.flags = SPAWN_FAST;
	assert_int_equal(spawn_process(&o, &pid, NULL, &eb), YERR(BAD_REQUEST));
}

/* spawn_run: stdin in, stdout and stderr out (capped), the exit status. */
static void test_run_collects(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "read a; echo \"got $a\"; echo oops >&2; exit 3", NULL };
	struct spawn_opts o;
	struct spawn_result r;
	struct errbuf eb = ERRBUF_INIT;

	spawn_opts_init(&o);
	o.argv = argv;
	assert_int_equal(spawn_run(&o, "hello\n", 6, 5000, NULL, 1024, &r, NULL, &eb), 0);
	assert_true(WIFEXITED(r.status));
	assert_int_equal(WEXITSTATUS(r.status), 3);
	assert_string_equal(r.out, "got hello\n");
	assert_string_equal(r.err, "oops\n");
	assert_false(r.timed_out);
	spawn_result_release(&r);

	/* only the first max bytes are kept */
	char *big[] = { "/bin/sh", "-c", "yes | head -c 100000", NULL };
	o.argv = big;
	assert_int_equal(spawn_run(&o, NULL, 0, 5000, NULL, 10, &r, NULL, &eb), 0);
	assert_int_equal(r.out_len, 10);
	assert_int_equal(WEXITSTATUS(r.status), 0);
	spawn_result_release(&r);

	/* a program that cannot be run is the spawn's error */
	char *none[] = { "/nonexistent/prog", NULL };
	int err = 0;
	o.argv = none;
	assert_int_equal(spawn_run(&o, NULL, 0, 5000, NULL, 10, &r, &err, &eb), YERR(INTERNAL));
	assert_int_equal(err, ENOENT);
	assert_null(r.out);
}

/* A program past its deadline is killed with its whole group; one that
 * leaves a child holding its output still ends the run when it exits. */
static void test_run_deadline(void **state)
{
	(void)state;
	char *argv[] = { "/bin/sh", "-c", "sleep 30 & echo started; wait", NULL };
	char *bg[] = { "/bin/sh", "-c", "sleep 30 & echo $!", NULL };
	struct spawn_opts o;
	struct spawn_result r;
	struct errbuf eb = ERRBUF_INIT;
	volatile int cancel = 0;
	uint64_t t0 = mono_ms();
	long child;

	spawn_opts_init(&o);
	o.argv = argv;
	assert_int_equal(spawn_run(&o, NULL, 0, 300, NULL, 1024, &r, NULL, &eb), 0);
	assert_true(r.timed_out);
	assert_true(WIFSIGNALED(r.status));
	assert_string_equal(r.out, "started\n");
	assert_true(mono_ms() - t0 < 5000);
	spawn_result_release(&r);

	o.argv = bg;
	t0 = mono_ms();
	assert_int_equal(spawn_run(&o, NULL, 0, 0, &cancel, 1024, &r, NULL, &eb), 0);
	assert_true(mono_ms() - t0 < 5000);
	assert_false(r.timed_out);
	assert_int_equal(WEXITSTATUS(r.status), 0);
	child = strtol(r.out, NULL, 10);
	assert_true(child > 0);
	kill((pid_t)child, SIGKILL);
	spawn_result_release(&r);

	/* cancelled */
	cancel = 1;
	o.argv = argv;
	assert_int_equal(spawn_run(&o, NULL, 0, 0, &cancel, 1024, &r, NULL, &eb), 0);
	assert_true(r.cancelled);
	spawn_result_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_failure),
		cmocka_unit_test(test_run_collects),
		cmocka_unit_test(test_run_deadline),
		cmocka_unit_test(test_bad_cwd),
		cmocka_unit_test(test_setsid_env_cwd),
		cmocka_unit_test(test_setuid),
		cmocka_unit_test(test_signals_reset),
		cmocka_unit_test(test_fast),
		cmocka_unit_test(test_detach),
		cmocka_unit_test(test_detach_exec_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
