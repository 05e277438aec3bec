#include "base/compat.h"
#include "agent/shim.h"

#include <jansson.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/heartbeat.h"
#include "agent/taskdir.h"
#include "agent/taskproc.h"
#include "agent/termshare.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#define MAX_DEVS 64
/* How long attachers have to take a terminal task's last output and its
 * exit status before the shim writes exit.json. */
#define TERM_FINISH_MS 2000
/* The TERM of a terminal task whose assignment sets none. */
#define TERM_DEFAULT "xterm-256color"

struct shim {
	const char *dir;
	json_t *task;        /* task.json */
	json_t *conf;        /* shim.json */
	struct cgroup cg;
	bool have_cg;
	pid_t pid;           /* the task, also its process group */
	int notify_fd;       /* 1 until the start is reported, then -1 */
	struct fence_watch fence; /* its agent's heartbeat (heartbeat.h) */
	/* an interactive task's terminal (termshare.h), when has_term */
	struct termshare term;
	bool has_term;
};

static const char *conf_str(const struct shim *s, const char *key)
{
	return json_string_value(json_object_get(s->conf, key));
}

uint64_t shim_stop_grace(const char *dir, uint64_t grace)
{
	json_t *stop = NULL;
	if (taskdir_read_json(dir, "stop.json", &stop, NULL) == 0 &&
	    json_is_integer(json_object_get(stop, "grace_ms")))
		grace = (uint64_t)json_integer_value(json_object_get(stop, "grace_ms"));
	json_decref(stop);
	return grace;
}

static void notify_line(int fd, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_vaddf(&sb, fmt, ap);
	/* one write: a pipe's reader gets the whole line at once (PIPE_BUF) */
	write_all(fd, sb.buf, sb.len);
	strbuf_release(&sb);
}

void shim_notify_before(int fd, const char *fmt, ...)
{
	va_list ap;
	if (fd < 0)
		return;
	va_start(ap, fmt);
	notify_line(fd, fmt, ap);
	va_end(ap);
}

void shim_notify(int *fd, const char *fmt, ...)
{
	va_list ap;
	if (*fd < 0)
		return;
	va_start(ap, fmt);
	notify_line(*fd, fmt, ap);
	va_end(ap);
	/* the agent sees EOF; the task never holds this fd (close-on-exec) */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, *fd);
		close(null);
	}
	*fd = -1;
}

static void add_dev(struct cgroup_dev *devs, size_t *n, const char *path)
{
	struct stat st;
	if (*n < MAX_DEVS && stat(path, &st) == 0 && S_ISCHR(st.st_mode)) {
		devs[*n].major = (int)major(st.st_rdev);
		devs[*n].minor = (int)minor(st.st_rdev);
		(*n)++;
	}
}

static int setup_cgroup(struct shim *s, struct errbuf *eb)
{
	const char *rel = conf_str(s, "cgroup_rel");
	const char *root = conf_str(s, "cgroup_root");
	const char *dev_dir = conf_str(s, "dev_dir");
	struct cgroup_dev devs[MAX_DEVS];
	struct cgroup_limits lim = { 0 };
	size_t n;
	json_t *v;
	size_t i;
	static const char *const control[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools" };

	if (!rel)
		return 0;
	const struct cgroup_ops *ops = cgroup_detect(root);
	if (!ops)
		return error(eb, YERR(IO), "no cgroup hierarchy under '%s'", root ? root : "/sys/fs/cgroup");
	n = cgroup_default_devs(devs, MAX_DEVS);
	json_array_foreach(json_object_get(s->conf, "gpu_devices"), i, v)
		if (json_is_string(v))
			add_dev(devs, &n, json_string_value(v));
	for (i = 0; i < ARRAY_SIZE(control); i++) {
		char *p = xasprintf("%s/%s", dev_dir ? dev_dir : "/dev", control[i]);
		add_dev(devs, &n, p);
		free(p);
	}
	lim.cpus_milli = (uint64_t)json_integer_value(json_object_get(s->task, "cpus_milli"));
	lim.memory = (uint64_t)json_integer_value(json_object_get(s->task, "memory"));
	lim.pids = (uint64_t)json_integer_value(json_object_get(s->task, "pids"));
	lim.devices = 1;
	lim.devs = devs;
	lim.ndevs = n;
	cgroup_init(&s->cg, ops, root, rel);
	s->have_cg = true;
	/* a group left over by an earlier shim of the same task would hold stale limits */
	cgroup_kill_all(&s->cg, 1000, NULL);
	cgroup_destroy(&s->cg, NULL);
	return cgroup_create(&s->cg, &lim, eb);
}

static int open_out(struct shim *s, const char *name, struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", s->dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		error(eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
	free(path);
	return fd;
}

/* Starts argv_j (a JSON array of strings) as s->pid in the task's
 * environment, working dir, cgroup (when set up) and stdio (in_fd -1:
 * /dev/null), in a new session, as its user (run_as) when the agent set
 * one; with SPAWN_CTTY in flags, in_fd (a terminal) is its controlling
 * terminal. An argv[0] of "yard" is the agent's own binary. */
static int spawn_in_task(struct shim *s, const json_t *argv_j, int in_fd, int out_fd, int err_fd,
			 unsigned flags, struct errbuf *eb)
{
	struct spawn_opts o;
	char **argv, **env;
	size_t i;
	json_t *v;
	int ret;

	argv = xcalloc(json_array_size(argv_j) + 1, sizeof(*argv));
	json_array_foreach(argv_j, i, v)
		argv[i] = xstrdup(json_is_string(v) ? json_string_value(v) : "");
	/* "yard" is the agent's own binary, whatever the task's PATH holds */
	if (!strcmp(argv[0], "yard") && conf_str(s, "yard_exe")) {
		free(argv[0]);
		argv[0] = xstrdup(conf_str(s, "yard_exe"));
	}
	env = taskproc_env(s->task, s->conf);
	if (s->has_term && !json_object_get(json_object_get(s->task, "env"), "TERM")) {
		size_t n = 0;
		while (env[n])
			n++;
		env = xrealloc(env, (n + 2) * sizeof(*env));
		env[n] = xstrdup("TERM=" TERM_DEFAULT);
		env[n + 1] = NULL;
	}
	/* execvpe looks argv[0] up in our PATH: make it the task's (the shim
	 * has one thread) */
	const char *path = json_string_value(json_object_get(json_object_get(s->task, "env"), "PATH"));
	setenv("PATH", path ? path : TASKPROC_DEFAULT_PATH, 1);
	spawn_opts_init(&o);
	o.argv = argv;
	o.env = env;
	o.cwd = conf_str(s, "cwd");
	o.stdin_fd = in_fd;
	o.stdout_fd = out_fd;
	o.stderr_fd = err_fd;
	o.flags = SPAWN_SETSID | SPAWN_SEARCH_PATH | flags;
	o.cgroup_procs = s->have_cg ? (const char *const *)s->cg.join : NULL;
	ret = taskproc_user(s->conf, &o, eb);
	if (!ret)
		ret = spawn_process(&o, &s->pid, NULL, eb);
	taskproc_strv_free(argv);
	taskproc_strv_free(env);
	return ret;
}

/* Signals are taken synchronously (sigtimedwait); children get a clean mask. */
static void block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigprocmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int shim_make_output_dir(const json_t *conf, struct errbuf *eb)
{
	const char *dir = json_string_value(json_object_get(conf, "output_dir"));
	json_t *ra = json_object_get(conf, "run_as");

	if (!dir)
		return 0;
	if (mkdir_p(dir, 0755) < 0)
		return error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
	if (ra && chown(dir, (uid_t)json_integer_value(json_object_get(ra, "uid")),
			(gid_t)json_integer_value(json_object_get(ra, "gid"))) < 0)
		return error(eb, YERR(IO), "cannot give '%s' to the task's user: %s", dir, strerror(errno));
	return 0;
}

/* The login shell of the task's user (run_as, else the shim's): its
 * passwd entry's shell, unless that one lets nobody in or is missing, then
 * /bin/bash, then /bin/sh; as a login shell (-l). New reference. */
static json_t *login_shell(const struct shim *s)
{
	json_t *ra = json_object_get(s->conf, "run_as");
	uid_t uid = ra ? (uid_t)json_integer_value(json_object_get(ra, "uid")) : geteuid();
	struct passwd pw, *res = NULL;
	char buf[4096];
	const char *sh = NULL;

	if (!getpwuid_r(uid, &pw, buf, sizeof(buf), &res) && res && res->pw_shell && *res->pw_shell &&
	    access(res->pw_shell, X_OK) == 0 && !strstr(res->pw_shell, "nologin") &&
	    strcmp(res->pw_shell, "/bin/false") && strcmp(res->pw_shell, "/usr/bin/false"))
		sh = res->pw_shell;
	else if (access("/bin/bash", X_OK) == 0)
		sh = "/bin/bash";
	else
		sh = "/bin/sh";
	return json_pack("[s, s]", sh, "-l");
}

/* An interactive task's start: the terminal (its log the task's stdout),
 * then the task on its slave. */
static int start_on_terminal(struct shim *s, const json_t *argv_j, int out_fd, struct errbuf *eb)
{
	struct spawn_opts user;
	json_t *shell = NULL;
	int pts = -1, ret;

	spawn_opts_init(&user);
	if ((ret = taskproc_user(s->conf, &user, eb))) {
		close(out_fd);
		return ret;
	}
	s->has_term = true;
	if ((ret = termshare_open(&s->term, s->dir, out_fd, &user, &pts, eb)))
		return ret;
	if (!json_array_size(argv_j))
		argv_j = shell = login_shell(s);
	ret = spawn_in_task(s, argv_j, pts, pts, pts, SPAWN_CTTY, eb);
	close(pts);
	json_decref(shell);
	return ret;
}

/* Everything up to a running task; on failure eb says why. */
static int start_task(struct shim *s, struct errbuf *eb)
{
	json_t *argv_j = json_object_get(s->task, "argv");
	bool terminal = json_is_true(json_object_get(s->task, "interactive"));
	int out_fd = -1, err_fd = -1, ret = 0;
	const char *dirs[] = { conf_str(s, "cwd"), conf_str(s, "checkpoint_dir"), conf_str(s, "data_dir") };
	size_t i;

	if (!json_array_size(argv_j) && !terminal)
		return error(eb, YERR(BAD_REQUEST), "the assignment has no argv");
	for (i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!dirs[i])
			return error(eb, YERR(BAD_REQUEST), "shim.json lacks a directory");
		if (mkdir_p(dirs[i], 0755) < 0)
			return error(eb, YERR(IO), "cannot create '%s': %s", dirs[i], strerror(errno));
	}
	if ((ret = shim_make_output_dir(s->conf, eb)))
		return ret;
	if ((ret = setup_cgroup(s, eb)))
		return ret;
	if ((out_fd = open_out(s, "stdout", eb)) < 0 || (err_fd = open_out(s, "stderr", eb)) < 0) {
		ret = YERR(IO);
		goto out;
	}
	if (terminal) {
		ret = start_on_terminal(s, argv_j, out_fd, eb); /* the terminal's log now */
		out_fd = -1;
	} else {
		ret = spawn_in_task(s, argv_j, -1, out_fd, err_fd, 0, eb);
	}
out:
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	return ret;
}

/* A container task needs the container shim, which only the yard binary
 * has (shim_docker.h): never run its argv on the host. */
static int refuse_container(struct shim *s, struct errbuf *eb)
{
	if (json_is_string(json_object_get(s->conf, "image")))
		return error(eb, YERR(BAD_REQUEST), "this shim cannot run containers (image '%s'); "
			     "the agent starts `yard shim` for them", conf_str(s, "image"));
	return 0;
}

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Kill whatever is left of the task: its process group and its cgroup. */
static void kill_rest(struct shim *s)
{
	if (s->pid > 0)
		kill(-s->pid, SIGKILL);
	if (s->have_cg)
		cgroup_kill_all(&s->cg, 10000, reap_children);
	reap_children();
}

/* Waits up to ts for one of set's signals; a terminal task's terminal is
 * served meanwhile. */
static int wait_signal(struct shim *s, const sigset_t *set, const struct timespec *ts, siginfo_t *info)
{
	if (s->has_term)
		return termshare_wait(&s->term, set, (int)(ts->tv_sec * 1000 + ts->tv_nsec / 1000000), info);
	return sigtimedwait(set, info, ts);
}

/* The start of a stop: SIGTERM to the task's process group; a terminal
 * task's terminal hangs up first (SIGHUP: an interactive shell ignores
 * SIGTERM). */
static void stop_task(struct shim *s)
{
	if (s->has_term)
		termshare_signal(&s->term, s->pid, SIGHUP);
	kill(-s->pid, SIGTERM);
}

/* Wait for the task, forwarding a stop; OUT *status: its wait status. */
static void wait_task(struct shim *s, int *status)
{
	sigset_t set;
	uint64_t grace = 10000, deadline = 0;
	bool stopping = false, killed = false;
	json_t *g = json_object_get(s->conf, "stop_grace_ms");
	if (json_is_integer(g))
		grace = (uint64_t)json_integer_value(g);

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	for (;;) {
		pid_t r;
		while ((r = waitpid(-1, status, WNOHANG)) > 0)
			if (r == s->pid)
				return;
		if (r < 0 && errno == ECHILD) {
			*status = W_EXITCODE(255, 0); /* cannot happen: the task is our child */
			return;
		}
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		if (stopping && !killed) {
			uint64_t now = mono_ms();
			uint64_t left = deadline > now ? deadline - now : 0;
			if (left < 200) {
				ts.tv_sec = 0;
				ts.tv_nsec = (long)left * 1000000L;
			}
			if (!left) {
				killed = true;
				if (s->have_cg)
					cgroup_signal_all(&s->cg, SIGKILL);
				kill(-s->pid, SIGKILL);
				continue;
			}
		}
		siginfo_t info;
		int sig = wait_signal(s, &set, &ts, &info);
		if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
			grace = shim_stop_grace(s->dir, grace);
			stopping = true;
			deadline = mono_ms() + grace;
			stop_task(s);
		}
		/* its agent gone: stopped, or a stop under way cut short (heartbeat.h) */
		if (fence_watch_step(&s->fence, &stopping, &deadline))
			stop_task(s);
	}
}

static void describe_exit(struct shim *s, int status, struct task_exit *e)
{
	if (WIFEXITED(status)) {
		e->has_code = true;
		e->exit_code = WEXITSTATUS(status);
		snprintf(e->reason, sizeof(e->reason), "exited with status %d", e->exit_code);
	} else if (WIFSIGNALED(status)) {
		e->signal = WTERMSIG(status);
		if (e->signal == SIGKILL && s->have_cg && cgroup_oom_kills(&s->cg) > 0) {
			e->oom_killed = true;
			snprintf(e->reason, sizeof(e->reason), "oom_killed: killed by the kernel out of memory");
		} else {
			snprintf(e->reason, sizeof(e->reason), "killed by signal %d (%s)", e->signal,
				 strsignal(e->signal));
		}
	}
}

int shim_main(const char *dir)
{
	struct shim s = { .dir = dir, .pid = -1, .notify_fd = 1 };
	struct errbuf eb = ERRBUF_INIT;
	struct task_exit e;
	sigset_t set;
	char buf[64];
	int status = 0, ret;

	memset(&e, 0, sizeof(e));
	block_signals(&set);
	signal(SIGHUP, SIG_IGN);
	/* orphans of the task are re-parented to us, so we can reap them */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	char *shim_pid = xasprintf("%s/shim.pid", dir);
	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	write_file_replace(shim_pid, buf, strlen(buf), 0644);
	free(shim_pid);

	if ((ret = taskdir_read_json(dir, "task.json", &s.task, &eb)) ||
	    (ret = taskdir_read_json(dir, "shim.json", &s.conf, &eb)) ||
	    (ret = refuse_container(&s, &eb)) || (ret = start_task(&s, &eb))) {
		snprintf(e.reason, sizeof(e.reason), "start_failed: %s", eb.msg);
		e.start_failed = true;
		shim_notify(&s.notify_fd, "%s\n", e.reason);
		kill_rest(&s);
		if (s.has_term)
			termshare_close(&s.term);
		goto out_write;
	}
	json_t *pidj = json_pack("{s:i, s:i}", "pid", (int)s.pid, "pgid", (int)s.pid);
	taskdir_write_json(dir, "task.pid", pidj, 0, NULL);
	json_decref(pidj);
	shim_notify(&s.notify_fd, "running %d\n", (int)s.pid);

	fence_watch_init(&s.fence, s.conf, s.task);
	wait_task(&s, &status);
	describe_exit(&s, status, &e);
	fence_watch_mark_exit(&s.fence, &e);
	fence_watch_release(&s.fence);
	kill_rest(&s);
	if (s.has_term) {
		/* its attachers learn how it ended before the agent does */
		json_t *ej = task_exit_json(&e);
		char *text = json_dumps(ej, JSON_COMPACT);
		termshare_finish(&s.term, text, TERM_FINISH_MS);
		termshare_close(&s.term);
		free(text);
		json_decref(ej);
	}
out_write:
	if (s.have_cg) {
		if (!e.oom_killed && e.signal == SIGKILL && cgroup_oom_kills(&s.cg) > 0) {
			e.oom_killed = true;
			snprintf(e.reason, sizeof(e.reason), "oom_killed: killed by the kernel out of memory");
		}
		cgroup_usage(&s.cg, &e.usage); /* everything in it has exited (kill_rest) */
		if (cgroup_destroy(&s.cg, &eb))
			fprintf(stderr, "yard shim: %s\n", eb.msg);
		cgroup_release(&s.cg);
	}
	json_decref(s.task);
	json_decref(s.conf);
	if (task_exit_write(dir, &e, &eb)) {
		fprintf(stderr, "yard shim: %s\n", eb.msg);
		return 1;
	}
	return 0;
}

/* An exec inside a running task: the task's environment, working dir,
 * cgroup and log files, its own process group. */
int shim_exec_main(const char *dir, const char *exec_id)
{
	struct taskproc tp;
	struct spawn_opts o;
	struct errbuf eb = ERRBUF_INIT;
	struct task_exit e;
	json_t *ex = NULL;
	int out_fd = -1, err_fd = -1, status = 0;
	pid_t pid = -1;
	char *edir = xasprintf("%s/execs/%s", dir, exec_id);
	struct shim s = { .dir = dir, .pid = -1, .notify_fd = -1 };
	sigset_t set;

	memset(&e, 0, sizeof(e));
	memset(&tp, 0, sizeof(tp));
	block_signals(&set);
	if (taskdir_read_json(edir, "exec.json", &ex, &eb) ||
	    taskproc_prepare(&tp, dir, json_object_get(ex, "argv"), &eb))
		goto fail;
	/* borrowed for describe_exit's OOM check; released with tp */
	s.cg = tp.cg;
	s.have_cg = tp.have_cg;
	if ((out_fd = open_out(&s, "stdout", &eb)) < 0 || (err_fd = open_out(&s, "stderr", &eb)) < 0)
		goto fail;
	spawn_opts_init(&o);
	taskproc_spawn_opts(&tp, &o);
	o.stdout_fd = out_fd;
	o.stderr_fd = err_fd;
	o.flags |= SPAWN_SETSID;
	if (spawn_process(&o, &pid, NULL, &eb))
		goto fail;
	for (;;) {
		siginfo_t info;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		int sig = sigtimedwait(&set, &info, &ts);
		if (sig == SIGTERM || sig == SIGINT)
			kill(-pid, SIGKILL);
	}
	describe_exit(&s, status, &e);
	goto out;
fail:
	e.start_failed = true;
	snprintf(e.reason, sizeof(e.reason), "start_failed: %s", eb.msg);
	fprintf(stderr, "yard shim: exec %s: %s\n", exec_id, eb.msg);
out:
	if (out_fd >= 0)
		close(out_fd);
	if (err_fd >= 0)
		close(err_fd);
	taskproc_release(&tp);
	json_decref(ex);
	int ret = task_exit_write(edir, &e, NULL) ? 1 : 0;
	free(edir);
	return ret;
}

int cmd_shim(int argc, char **argv)
{
	const char *dir = NULL, *exec_id = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strncmp(argv[i], "--dir=", 6))
			dir = argv[i] + 6;
		else if (!strcmp(argv[i], "--exec") && i + 1 < argc)
			exec_id = argv[++i];
		else {
			fprintf(stderr, "usage: yard shim --dir TASKDIR [--exec ID]\n");
			return 2;
		}
	}
	if (!dir || (exec_id && strspn(exec_id, "0123456789") != strlen(exec_id))) {
		fprintf(stderr, "usage: yard shim --dir TASKDIR [--exec ID]\n");
		return 2;
	}
	return exec_id ? shim_exec_main(dir, exec_id) : shim_main(dir);
}
