/*
 * The shim run on a task dir, as the agent runs it: this test binary is also
 * `yard shim` (argv[1] == "shim"), started through spawn_process with its
 * stdout on a pipe.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "agent/agent.h"
#include "agent/taskdir.h"
#include "agent/termshare.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

struct fixture {
	char dir[64];
	pid_t shim;       /* a shim a test left running (it failed): killed by teardown */
	char *rel;        /* cgroup_rel, or NULL */
	const char *root; /* cgroup root */
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/yard-shimtest-XXXXXX");
	*state = f;
	return mkdtemp(f->dir) ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (f->shim > 0) {
		/* its task's process group too: the shim made it a session */
		char *pidfile = xasprintf("%s/task.pid", f->dir);
		struct strbuf sb = STRBUF_INIT;
		if (strbuf_read_file(&sb, pidfile, 0) == 0) {
			json_t *doc = json_loads(sb.buf, 0, NULL);
			pid_t pg = (pid_t)json_integer_value(json_object_get(doc, "pgid"));
			if (pg > 0)
				kill(-pg, SIGKILL);
			json_decref(doc);
		}
		strbuf_release(&sb);
		free(pidfile);
		kill(f->shim, SIGKILL);
		waitpid(f->shim, NULL, 0);
	}
	if (f->rel) {
		static const char *const hier[] = { "cpu", "cpuacct", "memory", "pids", "devices", "unified" };
		for (size_t i = 0; i < ARRAY_SIZE(hier); i++) {
			char *d = xasprintf("/sys/fs/cgroup/%s/%s", hier[i], f->rel);
			rmdir(d);
			for (int up = 0; up < 2; up++) {
				*strrchr(d, '/') = '\0';
				rmdir(d);
			}
			free(d);
		}
		free(f->rel);
	}
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* Writes task.json and shim.json; argv is NULL-terminated. */
static void write_task(struct fixture *f, const char *const *argv, json_t *env, json_int_t memory,
		       int cgroups, int grace_ms)
{
	json_t *a = json_array();
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	json_t *task = json_pack("{s:I, s:o, s:o, s:[], s:I, s:I, s:I}", "id", (json_int_t)1, "argv", a,
				 "env", env ? env : json_pack("{s:s}", "PATH", "/usr/bin:/bin"),
				 "gpus", "cpus_milli", (json_int_t)(cgroups ? 1000 : 0), "memory", memory,
				 "pids", (json_int_t)(cgroups ? 256 : 0));
	char *cwd = xasprintf("%s/code", f->dir), *ck = xasprintf("%s/ckpt", f->dir),
	     *data = xasprintf("%s/data", f->dir);
	if (cgroups) {
		f->rel = xasprintf("yard-test/%d/task-1", (int)getpid());
		f->root = "/sys/fs/cgroup";
	}
	json_t *conf = json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:[], s:s, s:i}", "cwd", cwd,
				 "checkpoint_dir", ck, "data_dir", data,
				 "cgroup_root", f->root, "cgroup_rel", f->rel, "gpu_devices",
				 "dev_dir", "/dev", "stop_grace_ms", grace_ms);
	assert_non_null(task);
	assert_non_null(conf);
	assert_int_equal(taskdir_write_json(f->dir, "task.json", task, 0, NULL), 0);
	assert_int_equal(taskdir_write_json(f->dir, "shim.json", conf, 0, NULL), 0);
	json_decref(task);
	json_decref(conf);
	free(cwd);
	free(ck);
	free(data);
}

/* Starts the shim; OUT *notify_fd: the read end of its report pipe. */
static pid_t start_shim(struct fixture *f, int *notify_fd)
{
	char *argv[] = { "/proc/self/exe", "shim", "--dir", f->dir, NULL };
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	int fds[2];
	pid_t pid;
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	spawn_opts_init(&o);
	o.argv = argv;
	o.stdout_fd = fds[1];
	o.stderr_fd = 2;
	o.flags = SPAWN_SETSID;
	assert_int_equal(spawn_process(&o, &pid, NULL, &eb), 0);
	close(fds[1]);
	*notify_fd = fds[0];
	return pid;
}

static void read_notify(int fd, struct strbuf *out)
{
	assert_int_equal(strbuf_read_fd(out, fd), 0);
	close(fd);
}

static void wait_shim(pid_t pid)
{
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void read_file(struct fixture *f, const char *name, struct strbuf *sb)
{
	char *p = xasprintf("%s/%s", f->dir, name);
	assert_int_equal(strbuf_read_file(sb, p, 0), 0);
	free(p);
}

static void run_simple(struct fixture *f, const char *const *argv, struct task_exit *e, struct strbuf *notify)
{
	int nfd;
	write_task(f, argv, NULL, 0, 0, 10000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, notify);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, e, NULL), 0);
}

static void test_exit_code_and_output(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/bin/sh", "-c", "printf 'out\\nline2'; printf 'e\\0rr' >&2; exit 3", NULL };
	struct task_exit e;
	struct strbuf n = STRBUF_INIT, out = STRBUF_INIT, err = STRBUF_INIT;
	run_simple(f, argv, &e, &n);
	assert_memory_equal(n.buf, "running ", 8);
	assert_true(e.has_code);
	assert_int_equal(e.exit_code, 3);
	assert_int_equal(e.signal, 0);
	assert_false(e.oom_killed);
	assert_string_equal(e.reason, "exited with status 3");
	read_file(f, "stdout", &out);
	read_file(f, "stderr", &err);
	assert_string_equal(out.buf, "out\nline2");
	assert_int_equal(err.len, 4);
	assert_memory_equal(err.buf, "e\0rr", 4);
	char *p = xasprintf("%s/task.pid", f->dir);
	assert_true(path_exists(p));
	free(p);
	strbuf_release(&n);
	strbuf_release(&out);
	strbuf_release(&err);
}

static void test_signal(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/bin/sh", "-c", "kill -9 $$", NULL };
	struct task_exit e;
	struct strbuf n = STRBUF_INIT;
	run_simple(f, argv, &e, &n);
	assert_false(e.has_code);
	assert_int_equal(e.signal, 9);
	assert_false(e.oom_killed);
	strbuf_release(&n);
}

static void test_exec_failure(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/nonexistent/train", NULL };
	struct task_exit e;
	struct strbuf n = STRBUF_INIT;
	run_simple(f, argv, &e, &n);
	assert_string_equal(n.buf, "start_failed: cannot exec '/nonexistent/train': No such file or directory\n");
	assert_true(e.start_failed);
	assert_false(e.has_code);
	assert_string_equal(e.reason, "start_failed: cannot exec '/nonexistent/train': No such file or directory");
	strbuf_release(&n);
}

static void test_env_exact(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "env", NULL };
	struct strbuf n = STRBUF_INIT, out = STRBUF_INIT;
	struct task_exit e;
	int nfd;
	write_task(f, argv, json_pack("{s:s, s:s}", "PATH", "/usr/bin:/bin", "FOO", "a b"), 0, 0, 1000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.exit_code, 0);
	read_file(f, "stdout", &out);
	char *expect = xasprintf("PATH=/usr/bin:/bin\nFOO=a b\nYARD_CHECKPOINT_DIR=%s/ckpt\nYARD_DATA_DIR=%s/data\n"
				 "HOME=%s/code\n", f->dir, f->dir, f->dir);
	assert_string_equal(out.buf, expect);
	free(expect);
	strbuf_release(&n);
	strbuf_release(&out);
}

/* Without PATH and HOME in the assignment the task gets the usual ones, and
 * argv[0] is looked up in that PATH. */
static void test_env_defaults(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "env", NULL };
	struct strbuf n = STRBUF_INIT, out = STRBUF_INIT;
	struct task_exit e;
	int nfd;
	write_task(f, argv, json_pack("{s:s}", "FOO", "x"), 0, 0, 1000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.exit_code, 0);
	read_file(f, "stdout", &out);
	char *expect = xasprintf("FOO=x\nYARD_CHECKPOINT_DIR=%s/ckpt\nYARD_DATA_DIR=%s/data\n"
				 "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
				 "HOME=%s/code\n", f->dir, f->dir, f->dir);
	assert_string_equal(out.buf, expect);
	free(expect);
	strbuf_release(&n);
	strbuf_release(&out);
}

static void test_stop_term(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/bin/sleep", "100", NULL };
	struct strbuf n = STRBUF_INIT;
	struct task_exit e;
	int nfd;
	write_task(f, argv, NULL, 0, 0, 10000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_memory_equal(n.buf, "running ", 8);
	kill(pid, SIGTERM);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.signal, SIGTERM);
	strbuf_release(&n);
}

/* A task that ignores SIGTERM and has a child that escaped with setsid:
 * after the grace period everything in the cgroup is killed. */
static void test_stop_kills_cgroup(void **state)
{
	struct fixture *f = *state;
	char *script = xasprintf("trap '' TERM; setsid sleep 100 & echo $! > %s/escaped; "
				 "while :; do sleep 0.05; done", f->dir);
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct strbuf n = STRBUF_INIT, esc = STRBUF_INIT;
	struct task_exit e;
	int nfd;
	write_task(f, argv, NULL, 0, 1, 300);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_memory_equal(n.buf, "running ", 8);
	char *escaped = xasprintf("%s/escaped", f->dir);
	for (int i = 0; i < 2000 && !path_exists(escaped); i++)
		usleep(1000);
	usleep(50000);
	assert_int_equal(strbuf_read_file(&esc, escaped, 0), 0);
	kill(pid, SIGTERM);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.signal, SIGKILL);
	assert_false(e.oom_killed);
	/* the escaped sleep is gone, and so are the cgroups */
	char *procs = xasprintf("/proc/%s", esc.buf);
	procs[strcspn(procs, "\n")] = '\0';
	assert_false(path_exists(procs));
	char *cg = xasprintf("/sys/fs/cgroup/memory/%s", f->rel);
	assert_false(path_exists(cg));
	free(cg);
	free(procs);
	free(escaped);
	free(script);
	strbuf_release(&n);
	strbuf_release(&esc);
}

/* A preemption's grace (stop.json, written by the agent before the stop)
 * replaces the shim's default: SIGTERM first, that long to checkpoint, then
 * SIGKILL. The default here is 10 minutes, so only stop.json ends the task. */
static void test_stop_grace_from_stop_json(void **state)
{
	struct fixture *f = *state;
	char *script = xasprintf("trap 'echo term > %s/got-term' TERM; touch %s/trapped; "
				 "while :; do sleep 0.05; done", f->dir, f->dir);
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct strbuf n = STRBUF_INIT;
	struct task_exit e;
	json_t *stop = json_pack("{s:i}", "grace_ms", 300);
	int nfd;
	write_task(f, argv, NULL, 0, 0, 600000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_memory_equal(n.buf, "running ", 8);
	char *trapped = xasprintf("%s/trapped", f->dir);
	for (int i = 0; i < 5000 && !path_exists(trapped); i++)
		usleep(1000); /* the shell has set its trap */
	free(trapped);
	assert_int_equal(taskdir_write_json(f->dir, "stop.json", stop, 0, NULL), 0);
	kill(pid, SIGTERM);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.signal, SIGKILL);
	char *got = xasprintf("%s/got-term", f->dir);
	assert_true(path_exists(got)); /* it had its SIGTERM and its grace */
	free(got);
	json_decref(stop);
	free(script);
	strbuf_release(&n);
}

static void test_oom(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/usr/bin/python3", "-c", "x = b'a' * (400 << 20)\nprint(len(x))", NULL };
	struct strbuf n = STRBUF_INIT;
	struct task_exit e;
	int nfd;
	write_task(f, argv, NULL, 64 << 20, 1, 1000);
	pid_t pid = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_memory_equal(n.buf, "running ", 8);
	wait_shim(pid);
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_int_equal(e.signal, SIGKILL);
	assert_true(e.oom_killed);
	char *cg = xasprintf("/sys/fs/cgroup/memory/%s", f->rel);
	assert_false(path_exists(cg));
	free(cg);
	strbuf_release(&n);
}

/* ---- an interactive task's terminal (termshare.h) ---- */

/* Marks the task of f interactive (its task.json). */
static void make_interactive(struct fixture *f)
{
	json_t *task = NULL;

	assert_int_equal(taskdir_read_json(f->dir, "task.json", &task, NULL), 0);
	json_object_set_new(task, "interactive", json_true());
	assert_int_equal(taskdir_write_json(f->dir, "task.json", task, 0, NULL), 0);
	json_decref(task);
}

static int attach(struct fixture *f)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", f->dir, TERMSHARE_SOCK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_msg(int fd, char ty, const void *data, size_t len)
{
	char buf[TERMSHARE_MSG_MAX];

	buf[0] = ty;
	memcpy(buf + 1, data, len);
	assert_int_equal(send(fd, buf, len + 1, MSG_NOSIGNAL), (ssize_t)len + 1);
}

static void type(int fd, const char *text)
{
	send_msg(fd, TERMSHARE_INPUT, text, strlen(text));
}

/* Reads fd's messages into out (the output's bytes) until out holds want;
 * *exit_doc (when not NULL) gets an exit message's JSON. Fails after 10 s. */
static void read_until(int fd, struct strbuf *out, const char *want, json_t **exit_doc)
{
	uint64_t deadline = mono_ms() + 10000;

	while (!strstr(out->buf, want)) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		char buf[TERMSHARE_MSG_MAX + 1];
		ssize_t n;
		if (mono_ms() > deadline)
			fail_msg("no '%s' in what the terminal showed: '%s'", want, out->buf);
		if (poll(&pf, 1, 100) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			fail_msg("the connection ended before '%s' came: '%s'", want, out->buf);
		if (buf[0] == TERMSHARE_OUTPUT)
			strbuf_add(out, buf + 1, (size_t)n - 1);
		else if (buf[0] == TERMSHARE_EXIT && exit_doc) {
			*exit_doc = json_loadb(buf + 1, (size_t)n - 1, 0, NULL);
			strbuf_addstr(out, "<exit>");
		} else
			fail_msg("a message of type '%c'", buf[0]);
	}
}

/* Whether fd's connection ends (no message but an exit first) within 10 s. */
static bool ends(int fd)
{
	uint64_t deadline = mono_ms() + 10000;
	char buf[TERMSHARE_MSG_MAX + 1];

	while (mono_ms() < deadline) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return true;
	}
	return false;
}

/* The terminal as its attachers see it: the socket only the shim's user
 * reaches, a resize, typed input and its echo, a signal for the
 * foreground job, the replay for a second attacher, a message out of the
 * protocol refused, then the task's end with its status to both and its
 * output in the log. */
static void test_terminal(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { "/bin/sh", NULL };
	struct strbuf n = STRBUF_INIT, a_out = STRBUF_INIT, b_out = STRBUF_INIT, log = STRBUF_INIT;
	unsigned char size[4] = { 0, 100, 0, 30 };
	unsigned char sigint = SIGINT;
	json_t *a_exit = NULL, *b_exit = NULL;
	struct task_exit e;
	struct stat st;
	int nfd, a, b, c;

	write_task(f, argv, NULL, 0, 0, 10000);
	make_interactive(f);
	pid_t pid = f->shim = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_true(!strncmp(n.buf, "running ", 8));
	char *sock = xasprintf("%s/%s", f->dir, TERMSHARE_SOCK);
	assert_int_equal(stat(sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	free(sock);

	a = attach(f);
	send_msg(a, TERMSHARE_RESIZE, size, sizeof(size));
	type(a, "stty size; tty\n");
	read_until(a, &a_out, "30 100", NULL);
	read_until(a, &a_out, "/dev/pts/", NULL);
	/* a signal message for the foreground job: the shell is back */
	type(a, "sh -c 'echo ar''med; exec sleep 30'\n");
	read_until(a, &a_out, "armed", NULL);
	send_msg(a, TERMSHARE_SIGNAL, &sigint, 1);
	type(a, "echo after=$?\n");
	read_until(a, &a_out, "after=130", NULL);

	/* a second attacher gets what the terminal showed, then what comes */
	b = attach(f);
	read_until(b, &b_out, "after=130", NULL);
	type(a, "echo shared-$((6*7))\n");
	read_until(b, &b_out, "shared-42", NULL);
	/* a message out of the protocol ends that connection only */
	c = attach(f);
	send_msg(c, 'z', "x", 1);
	assert_true(ends(c));
	close(c);
	unsigned char big[4] = { 0xff, 0xff, 0, 30 }; /* 65535 columns */
	c = attach(f);
	send_msg(c, TERMSHARE_RESIZE, big, sizeof(big));
	assert_true(ends(c));
	close(c);

	type(b, "exit 3\n");
	read_until(a, &a_out, "<exit>", &a_exit);
	read_until(b, &b_out, "<exit>", &b_exit);
	assert_int_equal(json_integer_value(json_object_get(a_exit, "exit_code")), 3);
	assert_int_equal(json_integer_value(json_object_get(b_exit, "exit_code")), 3);
	assert_true(ends(a));
	assert_true(ends(b));
	wait_shim(pid);
	f->shim = 0;
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_true(e.has_code);
	assert_int_equal(e.exit_code, 3);
	read_file(f, "stdout", &log);
	assert_non_null(strstr(log.buf, "30 100"));
	assert_non_null(strstr(log.buf, "shared-42"));
	/* the socket went with the terminal */
	sock = xasprintf("%s/%s", f->dir, TERMSHARE_SOCK);
	assert_false(path_exists(sock));
	free(sock);
	close(a);
	close(b);
	json_decref(a_exit);
	json_decref(b_exit);
	strbuf_release(&n);
	strbuf_release(&a_out);
	strbuf_release(&b_out);
	strbuf_release(&log);
}

/* An empty argv on a terminal: the login shell of the task's user (the
 * shim's: root here), as a login shell; a stop hangs the terminal up, and
 * the shell (which ignores SIGTERM) ends at once, not after the grace. */
static void test_terminal_login_shell_and_stop(void **state)
{
	struct fixture *f = *state;
	const char *argv[] = { NULL };
	struct strbuf n = STRBUF_INIT, out = STRBUF_INIT;
	struct passwd *pw = getpwuid(geteuid());
	struct task_exit e;
	char want[300];
	int nfd, a;

	assert_non_null(pw);
	write_task(f, argv, NULL, 0, 0, 30000);
	make_interactive(f);
	pid_t pid = f->shim = start_shim(f, &nfd);
	read_notify(nfd, &n);
	assert_true(!strncmp(n.buf, "running ", 8));
	a = attach(f);
	type(a, "echo \"shell=$0 login=$(shopt -q login_shell 2>/dev/null && echo yes) term=$TERM\"\n");
	snprintf(want, sizeof(want), "shell=%s login=yes term=xterm-256color", pw->pw_shell);
	if (!strstr(pw->pw_shell, "bash"))
		snprintf(want, sizeof(want), "term=xterm-256color"); /* (not bash: no shopt) */
	read_until(a, &out, want, NULL);
	uint64_t t0 = mono_ms();
	kill(pid, SIGTERM);
	wait_shim(pid);
	f->shim = 0;
	assert_true(mono_ms() - t0 < 10000); /* the grace is 30 s */
	assert_int_equal(task_exit_read(f->dir, &e, NULL), 0);
	assert_false(e.start_failed);
	close(a);
	strbuf_release(&n);
	strbuf_release(&out);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "shim"))
		return cmd_shim(argc - 1, argv + 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exit_code_and_output, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_term, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_kills_cgroup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_grace_from_stop_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom, setup, teardown),
		cmocka_unit_test_setup_teardown(test_terminal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_terminal_login_shell_and_stop, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
