#include "base/compat.h"
#include "agent/runtime.h"

#include <limits.h>
#include <sys/wait.h>

#include "agent/heartbeat.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

json_t *runtime_shim_conf(const struct runtime_ctx *ctx, const struct runtime_task *t, const json_t *task)
{
	json_t *devs = json_array(), *v;
	size_t i;
	json_array_foreach(json_object_get(task, "gpus"), i, v) {
		char *p = xasprintf("%s/nvidia%d", ctx->dev_dir,
				    gpu_minor(ctx->gpus, (int)json_integer_value(v)));
		json_array_append_new(devs, json_string(p));
		free(p);
	}
	char *cwd = xasprintf("%s/code", t->dir);
	char *data = xasprintf("%s/data", t->dir), *outs = xasprintf("%s/outputs/%" PRId64, ctx->work_dir, t->id);
	char *ckpt = xasprintf("%s/checkpoints/%" JSON_INTEGER_FORMAT, ctx->work_dir,
			       json_integer_value(json_object_get(task, "job")));
	char *rel = xasprintf("%s/task-%" PRId64, ctx->cgroup_base, t->id);
	json_t *conf = json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:O, s:s, s:s?, s:s?, s:s?, s:s?}",
				 "cwd", cwd, "checkpoint_dir", ckpt, "data_dir", data,
				 "cgroup_root", ctx->cgroup_root, "cgroup_rel", ctx->cgroups ? rel : NULL,
				 "gpu_devices", devs, "dev_dir", ctx->dev_dir, "yard_exe", ctx->yard_exe,
				 "master_url", ctx->master_url, "master_ca", ctx->master_ca,
				 "master_pin", ctx->master_pin);
	/* staged data a container sees through binds of the cache's entries
	 * (agent/stage.h): [[host_path, container_path], ...] */
	if (t->run_as)
		json_object_set_new(conf, "run_as", json_pack("{s:I, s:I}", "uid", (json_int_t)t->uid,
							      "gid", (json_int_t)t->gid));
	/* the agent's heartbeat, from which the shim fences when the agent is gone */
	if (ctx->shims_fence) {
		char *hb = heartbeat_path(ctx->work_dir);
		json_object_set_new(conf, "heartbeat", json_string(hb));
		free(hb);
	}
	json_t *staged = NULL;
	if (taskdir_read_json(t->dir, "staged.json", &staged, NULL) == 0 &&
	    json_array_size(json_object_get(staged, "binds")))
		json_object_set(conf, "data_binds", json_object_get(staged, "binds"));
	json_decref(staged);
	json_object_set_new(conf, "output_dir", json_string(outs));
	free(cwd);
	free(data);
	free(outs);
	free(ckpt);
	free(rel);
	json_decref(devs);
	return conf;
}

int runtime_shim_spawn(struct runtime_task *t, const char *exe, struct errbuf *eb)
{
	int fds[2] = { -1, -1 }, log_fd = -1, ret;
	char *argv[] = { (char *)exe, "shim", "--dir", t->dir, NULL };
	struct spawn_opts o;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return error(eb, YERR(INTERNAL), "cannot create a pipe: %s", strerror(errno));
	char *log = xasprintf("%s/shim.log", t->dir);
	log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	free(log);
	spawn_opts_init(&o);
	o.argv = argv;
	o.stdout_fd = fds[1];
	o.stderr_fd = log_fd;
	/* The shim is our child (started without copying the agent, see
	 * spawn.h) but in its own session: it outlives us, and is then
	 * re-parented, when the agent is killed. We reap it in wait(). */
	o.flags = SPAWN_SETSID | SPAWN_FAST;
	ret = spawn_process(&o, &t->pid, NULL, eb);
	close(fds[1]);
	if (log_fd >= 0)
		close(log_fd);
	if (ret) {
		close(fds[0]);
		return ret;
	}
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	t->child = true;
	t->start_fd = fds[0];
	t->exit_fd = pidfd_open_pid(t->pid); /* -1 if it is already gone: wait() reads exit.json */
	return 0;
}

static int process_start(const struct runtime_ctx *ctx, struct runtime_task *t, struct errbuf *eb)
{
	json_t *task = NULL, *conf;
	int ret = taskdir_read_json(t->dir, "task.json", &task, eb);
	if (ret)
		return ret;
	conf = runtime_shim_conf(ctx, t, task);
	ret = taskdir_write_json(t->dir, "shim.json", conf, 0, eb);
	json_decref(conf);
	json_decref(task);
	return ret ? ret : runtime_shim_spawn(t, ctx->shim_exe, eb);
}

int runtime_shim_started(struct runtime_task *t, pid_t *task_pid)
{
	char buf[1200];
	ssize_t n;
	if (t->start_known || t->start_fd < 0)
		return 0;
	n = read(t->start_fd, buf, sizeof(buf) - 1);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return YERR(UNAVAILABLE);
	if (n >= 9 && !strncmp(buf, "building ", 9)) {
		/* a line of its own before the result: the image being built */
		char *nl = memchr(buf, '\n', (size_t)n);
		size_t len = nl ? (size_t)(nl - buf) - 9 : 0;
		snprintf(t->building, sizeof(t->building), "%.*s", (int)len, buf + 9);
		if (!nl || nl + 1 == buf + n)
			return YERR(UNAVAILABLE);
		n -= nl + 1 - buf;
		memmove(buf, nl + 1, (size_t)n);
	}
	t->start_known = true; /* the fd is closed by cleanup(), after the loop let go of it */
	if (n <= 0)
		return 0; /* the shim died before it could say: wait() will tell */
	buf[n] = '\0';
	if (!strncmp(buf, "running ", 8)) {
		const char *p = buf + 8;
		uint64_t pid;
		*task_pid = parse_u64(&p, &pid) == 0 ? (pid_t)pid : 0;
		return 1;
	}
	return 0;
}

int runtime_shim_stop(struct runtime_task *t)
{
	if (t->pid > 0 && kill(t->pid, SIGTERM) < 0 && errno != ESRCH)
		return YERR(INTERNAL);
	return 0;
}

/* Is pid a `yard shim --dir DIR`? */
static int is_our_shim(pid_t pid, const char *dir)
{
	struct strbuf sb = STRBUF_INIT;
	char path[64];
	int ok = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (strbuf_read_file(&sb, path, 1 << 16) == 0 && sb.len) {
		const char *args[4] = { NULL, NULL, NULL, NULL };
		size_t k = 0;
		for (size_t off = 0; off < sb.len && k < 4; off += strlen(sb.buf + off) + 1)
			args[k++] = sb.buf + off;
		ok = k == 4 && !strcmp(args[1], "shim") && !strcmp(args[2], "--dir") && !strcmp(args[3], dir);
	}
	strbuf_release(&sb);
	return ok;
}

int runtime_shim_reattach(const struct runtime_ctx *ctx, struct runtime_task *t)
{
	struct strbuf sb = STRBUF_INIT;
	uint64_t pid = 0;
	char *path = xasprintf("%s/shim.pid", t->dir);
	int alive = 0;
	if (strbuf_read_file(&sb, path, 64) == 0) {
		strbuf_trim(&sb);
		if (parse_u64_str(sb.buf, &pid) == 0 && pid > 0 && pid < INT_MAX) {
			int fd = pidfd_open_pid((pid_t)pid);
			/* check the cmdline after the pidfd is held, so a reused pid cannot slip in */
			if (fd >= 0 && is_our_shim((pid_t)pid, t->dir)) {
				t->pid = (pid_t)pid;
				t->exit_fd = fd;
				alive = 1;
			} else if (fd >= 0) {
				close(fd);
			}
		}
	}
	strbuf_release(&sb);
	free(path);
	return alive;
}

int runtime_shim_wait(struct runtime_task *t, struct task_exit *out)
{
	int ret;
	/* a shim we started is our child: reap it once it is gone (a shim of an
	 * earlier agent is not, and waitpid says so) */
	bool gone = false;
	if (t->pid > 0 && waitpid(t->pid, NULL, WNOHANG) == t->pid) {
		gone = true;
		t->child = false;
	}
	ret = task_exit_read(t->dir, out, NULL);
	if (ret != YERR(NOT_FOUND))
		return ret ? ret : 0;
	/* a child of ours is alive until reaped; a shim of an earlier agent is
	 * checked by its command line (its pid could have been reused), which
	 * a shim of ours may not show yet while it starts */
	if (!gone && t->pid > 0 && kill(t->pid, 0) == 0 && (t->child || is_our_shim(t->pid, t->dir)))
		return YERR(NOT_FOUND);
	/* the exit.json may have landed between the two checks */
	if (task_exit_read(t->dir, out, NULL) == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	snprintf(out->reason, sizeof(out->reason), "lost: the shim of the task died without a verdict");
	task_exit_write(t->dir, out, NULL);
	return 0;
}

void runtime_shim_cleanup(struct runtime_task *t)
{
	if (t->start_fd >= 0)
		close(t->start_fd);
	if (t->exit_fd >= 0)
		close(t->exit_fd);
	t->start_fd = t->exit_fd = -1;
	free(t->dir);
	free(t->code);
	t->dir = t->code = NULL;
}

const struct runtime_ops runtime_process_ops = {
	.name = "process",
	.start = process_start,
	.started = runtime_shim_started,
	.stop = runtime_shim_stop,
	.reattach = runtime_shim_reattach,
	.wait = runtime_shim_wait,
	.cleanup = runtime_shim_cleanup,
};

/* The shim to start: yard-shim next to our own binary (it starts in a
 * millisecond), else our own binary's `shim` role. Caller frees. */
char *runtime_shim_exe(const char *self_exe)
{
	char *shim;

	if (self_exe)
		return xstrdup(self_exe);
	if ((shim = self_sibling("yard-shim")) && access(shim, X_OK) == 0)
		return shim;
	free(shim);
	return xstrdup("/proc/self/exe");
}
