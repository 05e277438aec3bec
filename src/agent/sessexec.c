/* What an exec session runs: the process and docker runtimes (sessexec.h). */
#include "base/compat.h"
#include "agent/sessexec.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>

#include "agent/taskproc.h"
#include "agent/termshare.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/spawn.h"
#include "base/xalloc.h"
#include "common/httphead.h"
#include "common/wsframe.h"

/* The most output read at once: one stdout or stderr frame. */
#define PUMP_CHUNK (32 * 1024)
/* How long the engine has to answer an exec start, and to say the exec ended. */
#define ENGINE_ANSWER_MS 10000
#define ENGINE_EXIT_MS 3000

void exec_proc_init(struct exec_proc *p, const struct exec_proc_ops *ops)
{
	memset(p, 0, sizeof(*p));
	p->ops = ops;
	p->in_fd = p->out_fd[0] = p->out_fd[1] = p->exit_fd = -1;
	strbuf_init(&p->pending, 0);
}

int exec_signal_parse(const char *name)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = { { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "TERM", SIGTERM }, { "HUP", SIGHUP },
		     { "KILL", SIGKILL } };

	for (size_t i = 0; name && i < ARRAY_SIZE(sigs); i++)
		if (!strcmp(name, sigs[i].name))
			return sigs[i].sig;
	return 0;
}

static void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Reads fd once into a frame of channel ch on out: as pump's. */
static int pump_fd(int fd, unsigned ch, struct strbuf *out)
{
	char buf[PUMP_CHUNK];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			ws_channel_append(out, ch, buf, (size_t)n, false);
			return 1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return -1; /* the end; EIO from a pty whose last slave closed */
	}
}

/* ---- the process runtime ---- */

static int proc_start(struct exec_proc *p, const struct exec_req *req, int *code, struct errbuf *eb)
{
	struct taskproc tp;
	struct spawn_opts o;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, pts = -1, child_errno = 0;
	int ret;

	*code = 126;
	p->tty = req->tty;
	if ((ret = taskproc_prepare(&tp, req->task_dir, req->argv, eb))) {
		if (ret == YERR(NOT_FOUND))
			*code = 127;
		goto out;
	}
	spawn_opts_init(&o);
	taskproc_spawn_opts(&tp, &o);
	o.flags |= SPAWN_SETSID;
	if (req->tty) {
		if ((ret = termshare_open_pty(&p->out_fd[0], &pts, req->cols, req->rows, &tp.user, eb)))
			goto out;
		p->in_fd = p->out_fd[0];
		o.stdin_fd = o.stdout_fd = o.stderr_fd = pts;
		o.flags |= SPAWN_CTTY;
	} else {
		if ((req->stdin_open && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
			ret = error(eb, YERR(INTERNAL), "cannot make a pipe: %s", strerror(errno));
			goto out;
		}
		o.stdin_fd = in[0];
		o.stdout_fd = out[1];
		o.stderr_fd = err[1];
		p->in_fd = in[1];
		p->out_fd[0] = out[0];
		p->out_fd[1] = err[0];
		in[1] = out[0] = err[0] = -1;
	}
	if ((ret = spawn_process(&o, &p->pid, &child_errno, eb))) {
		if (child_errno == ENOENT)
			*code = 127;
		p->pid = 0;
		goto out;
	}
	p->exit_fd = pidfd_open_pid(p->pid);
	if (p->exit_fd < 0) {
		ret = error(eb, YERR(INTERNAL), "cannot watch process %d: %s", (int)p->pid, strerror(errno));
		goto out;
	}
	for (int i = 0; i < 2; i++)
		if (p->out_fd[i] >= 0)
			set_nonblock(p->out_fd[i]);
	if (p->in_fd >= 0)
		set_nonblock(p->in_fd);
out:
	close_fd(&pts);
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&err[0]);
	close_fd(&err[1]);
	taskproc_release(&tp);
	return ret;
}

static int proc_exited(struct exec_proc *p)
{
	pid_t r;

	if (p->exited)
		return 1;
	while ((r = waitpid(p->pid, &p->wait_status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == p->pid || (r < 0 && errno == ECHILD))
		p->exited = true;
	return p->exited;
}

static int proc_pump(struct exec_proc *p, int idx, struct strbuf *out)
{
	return pump_fd(p->out_fd[idx], idx ? WS_CH_STDERR : WS_CH_STDOUT, out);
}

static int fd_write(int fd, const char *buf, size_t len, size_t *done)
{
	ssize_t n;

	*done = 0;
	if (fd < 0)
		return -1;
	while ((n = write(fd, buf, len)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	*done = (size_t)n;
	return 0;
}

static int proc_write_stdin(struct exec_proc *p, const char *buf, size_t len, size_t *done)
{
	return fd_write(p->in_fd, buf, len, done);
}

static void proc_close_stdin(struct exec_proc *p)
{
	size_t done;

	if (p->tty)
		fd_write(p->in_fd, "\x04", 1, &done); /* the terminal's end of file */
	else
		close_fd(&p->in_fd);
}

static void proc_resize(struct exec_proc *p, unsigned cols, unsigned rows)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

	if (p->tty)
		ioctl(p->out_fd[0], TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH */
}

static void proc_signal(struct exec_proc *p, int sig)
{
	pid_t fg = p->tty ? tcgetpgrp(p->out_fd[0]) : -1;

	if (p->exited || p->pid <= 0)
		return;
	/* with a terminal, the job in its foreground (a shell's child) */
	kill(fg > 0 ? -fg : -p->pid, sig);
}

static void proc_reap(struct exec_proc *p, struct exec_status *st)
{
	memset(st, 0, sizeof(*st));
	if (WIFEXITED(p->wait_status)) {
		st->has_code = true;
		st->code = WEXITSTATUS(p->wait_status);
	} else if (WIFSIGNALED(p->wait_status)) {
		st->signal = WTERMSIG(p->wait_status);
	}
}

static void proc_hangup(struct exec_proc *p, bool kill_it)
{
	int sig = kill_it ? SIGKILL : SIGHUP;

	if (p->exited || p->pid <= 0)
		return;
	if (p->tty) {
		pid_t fg = tcgetpgrp(p->out_fd[0]);
		if (fg > 0 && fg != p->pid)
			kill(-fg, sig);
	}
	kill(-p->pid, sig);
}

static void proc_release(struct exec_proc *p)
{
	if (p->pid > 0 && !p->exited) {
		kill(-p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (p->in_fd == p->out_fd[0])
		p->in_fd = -1;
	close_fd(&p->in_fd);
	close_fd(&p->out_fd[0]);
	close_fd(&p->out_fd[1]);
	close_fd(&p->exit_fd);
	strbuf_release(&p->pending);
}

const struct exec_proc_ops exec_process_ops = {
	.name = "process",
	.start = proc_start,
	.exited = proc_exited,
	.pump = proc_pump,
	.write_stdin = proc_write_stdin,
	.close_stdin = proc_close_stdin,
	.resize = proc_resize,
	.signal = proc_signal,
	.reap = proc_reap,
	.hangup = proc_hangup,
	.release = proc_release,
};

/* ---- the docker runtime ---- */

/* Opens the hijacked stream of exec p->exec_id: POST /exec/{id}/start with
 * "Upgrade: tcp", the engine's answer read by hand (101, or 200 from an
 * engine that streams without switching). */
static int docker_hijack(struct exec_proc *p, const char *socket_path, bool tty, struct errbuf *eb)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct strbuf req = STRBUF_INIT, got = STRBUF_INIT;
	struct http_head h;
	uint64_t deadline = mono_ms() + ENGINE_ANSWER_MS;
	char body[64];
	size_t head_len = 0;
	int fd, ret = 0;

	memset(&h, 0, sizeof(h));
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return error(eb, YERR(BAD_REQUEST), "docker socket '%s': path too long", socket_path);
	memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach the container engine at '%s': %s",
			    socket_path, strerror(errno));
		goto out;
	}
	snprintf(body, sizeof(body), "{\"Detach\":false,\"Tty\":%s}", tty ? "true" : "false");
	strbuf_addf(&req, "POST /v1.41/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
		    "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
		    "Content-Length: %zu\r\n\r\n%s", p->exec_id, strlen(body), body);
	if (write_all(fd, req.buf, req.len)) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot send the exec start: %s", strerror(errno));
		goto out;
	}
	while (!(head_len = http_head_end(got.buf, got.len))) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		char buf[4096];
		uint64_t now = mono_ms();
		ssize_t n;
		if (got.len > HTTP_HEAD_MAX || now >= deadline ||
		    poll(&pf, 1, (int)(deadline - now)) <= 0 || (n = read(fd, buf, sizeof(buf))) <= 0) {
			ret = error(eb, YERR(UNAVAILABLE), "the container engine gave no answer to the exec "
				    "start");
			goto out;
		}
		strbuf_add(&got, buf, (size_t)n);
	}
	if ((ret = http_response_head_parse(got.buf, head_len, &h, eb)))
		goto out;
	if (h.status != 101 && h.status != 200) {
		json_t *doc = json_loadb(got.buf + head_len, got.len - head_len, 0, NULL);
		const char *msg = json_string_value(json_object_get(doc, "message"));
		ret = error(eb, YERR(UNAVAILABLE), "the container engine refused the exec start (HTTP %d): "
			    "%s", h.status, msg ? msg : h.reason);
		json_decref(doc);
		goto out;
	}
	strbuf_add(&p->pending, got.buf + head_len, got.len - head_len);
	set_nonblock(fd);
	p->out_fd[0] = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	http_head_release(&h);
	strbuf_release(&req);
	strbuf_release(&got);
	return ret;
}

static int dock_start(struct exec_proc *p, const struct exec_req *req, int *code, struct errbuf *eb)
{
	json_t *body, *out = NULL;
	char *path;
	long status = 0;
	int ret;

	*code = 126;
	p->tty = req->tty;
	if (!req->docker_socket || !req->container)
		return error(eb, YERR(INTERNAL), "the task runs in a container this agent cannot reach");
	docker_init(&p->d, req->docker_socket);
	p->has_docker = true;
	body = json_pack("{s:b, s:b, s:b, s:b, s:O}", "AttachStdin", req->stdin_open, "AttachStdout", 1,
			 "AttachStderr", 1, "Tty", req->tty, "Cmd", req->argv);
	path = xasprintf("/containers/%s/exec", req->container);
	ret = docker_call(&p->d, "POST", path, body, &status, &out, eb);
	free(path);
	json_decref(body);
	if (ret)
		goto out;
	if (status == 404 || status == 409) {
		char *why = xstrdup(eb->msg);
		ret = error(eb, YERR(CONFLICT), "the task's container '%s' %s: %s", req->container,
			    status == 404 ? "is gone" : "is not running", why);
		free(why);
		goto out;
	}
	if (status >= 400) {
		ret = YERR(UNAVAILABLE);
		goto out;
	}
	const char *id = json_string_value(json_object_get(out, "Id"));
	if (!id || strlen(id) >= sizeof(p->exec_id)) {
		ret = error(eb, YERR(UNAVAILABLE), "the container engine's exec has no id");
		goto out;
	}
	snprintf(p->exec_id, sizeof(p->exec_id), "%s", id);
	if ((ret = docker_hijack(p, req->docker_socket, req->tty, eb)))
		goto out;
	if (req->stdin_open || req->tty)
		p->in_fd = p->out_fd[0];
	if (req->tty)
		p->ops->resize(p, req->cols, req->rows);
out:
	json_decref(out);
	return ret;
}

static int dock_exited(struct exec_proc *p)
{
	return 1; /* no exit fd: the end of the stream says it */
}

struct demux_sink {
	struct strbuf *out;
};

static int demux_frame(void *arg, int stream, const char *buf, size_t len)
{
	struct demux_sink *d = arg;

	ws_channel_append(d->out, stream == 2 ? WS_CH_STDERR : WS_CH_STDOUT, buf, len, false);
	return 0;
}

static int dock_pump(struct exec_proc *p, int idx, struct strbuf *out)
{
	struct demux_sink sink = { out };
	char buf[PUMP_CHUNK];
	const char *data = buf;
	ssize_t n;

	if (p->pending.len) {
		n = (ssize_t)(p->pending.len < sizeof(buf) ? p->pending.len : sizeof(buf));
		memcpy(buf, p->pending.buf, (size_t)n);
		memmove(p->pending.buf, p->pending.buf + n, p->pending.len - (size_t)n);
		strbuf_setlen(&p->pending, p->pending.len - (size_t)n);
	} else {
		while ((n = read(p->out_fd[idx], buf, sizeof(buf))) < 0 && errno == EINTR)
			;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
	}
	if (p->tty)
		ws_channel_append(out, WS_CH_STDOUT, data, (size_t)n, false);
	else
		docker_demux_feed(&p->dm, data, (size_t)n, demux_frame, &sink);
	return 1;
}

static int dock_write_stdin(struct exec_proc *p, const char *buf, size_t len, size_t *done)
{
	return fd_write(p->stdin_shut ? -1 : p->in_fd, buf, len, done);
}

static void dock_close_stdin(struct exec_proc *p)
{
	size_t done;

	if (p->tty) {
		fd_write(p->in_fd, "\x04", 1, &done);
	} else if (p->in_fd >= 0 && !p->stdin_shut) {
		shutdown(p->in_fd, SHUT_WR); /* the engine closes the command's stdin */
		p->stdin_shut = true;
	}
}

static void dock_resize(struct exec_proc *p, unsigned cols, unsigned rows)
{
	struct errbuf eb = ERRBUF_INIT;
	long status;
	char *path;

	if (!p->tty)
		return;
	path = xasprintf("/exec/%s/resize?h=%u&w=%u", p->exec_id, rows, cols);
	docker_call(&p->d, "POST", path, NULL, &status, NULL, &eb);
	free(path);
}

/* The exec's inspect document (new reference), or NULL. */
static json_t *dock_inspect(struct exec_proc *p)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	long status = 0;
	char *path = xasprintf("/exec/%s/json", p->exec_id);

	if (docker_call(&p->d, "GET", path, NULL, &status, &doc, &eb) || status != 200) {
		json_decref(doc);
		doc = NULL;
	}
	free(path);
	return doc;
}

static void dock_signal(struct exec_proc *p, int sig)
{
	json_t *doc;

	if (!p->pid && (doc = dock_inspect(p))) {
		p->pid = (pid_t)json_integer_value(json_object_get(doc, "Pid"));
		json_decref(doc);
	}
	if (p->pid > 0)
		kill(p->pid, sig);
}

static void dock_reap(struct exec_proc *p, struct exec_status *st)
{
	uint64_t deadline = mono_ms() + ENGINE_EXIT_MS;

	memset(st, 0, sizeof(*st));
	for (;;) {
		json_t *doc = dock_inspect(p);
		json_t *code = json_object_get(doc, "ExitCode");
		if (doc && !json_is_true(json_object_get(doc, "Running")) && json_is_integer(code)) {
			st->has_code = true;
			st->code = (int)json_integer_value(code);
			json_decref(doc);
			return;
		}
		json_decref(doc);
		if (mono_ms() >= deadline)
			break;
		usleep(50 * 1000);
	}
	snprintf(st->message, sizeof(st->message), "the container engine did not say how exec %.12s "
		 "ended", p->exec_id);
}

static void dock_hangup(struct exec_proc *p, bool kill_it)
{
	dock_signal(p, kill_it ? SIGKILL : SIGHUP);
}

static void dock_release(struct exec_proc *p)
{
	p->in_fd = -1;
	close_fd(&p->out_fd[0]);
	if (p->has_docker)
		docker_release(&p->d);
	p->has_docker = false;
	strbuf_release(&p->pending);
}

const struct exec_proc_ops exec_docker_ops = {
	.name = "docker",
	.start = dock_start,
	.exited = dock_exited,
	.pump = dock_pump,
	.write_stdin = dock_write_stdin,
	.close_stdin = dock_close_stdin,
	.resize = dock_resize,
	.signal = dock_signal,
	.reap = dock_reap,
	.hangup = dock_hangup,
	.release = dock_release,
};
