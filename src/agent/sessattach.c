/* What an attach session runs (sessexec.h's exec_attach_ops): a
 * connection to the terminal an interactive task's shim shares on
 * TASKDIR/attach.sock (termshare.h), as an exec's ops, so that the
 * session's loop is exec's. */
#include "base/compat.h"
#include "agent/sessexec.h"

#include <poll.h>
#include <sys/socket.h>

#include "agent/termshare.h"
#include "base/xalloc.h"
#include "common/wsframe.h"

/* How long a resize or a signal may wait for room on the socket. */
#define CONTROL_WAIT_MS 1000

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Sends one message of type ty: 1 sent, 0 no room now, -1 the shim is gone. */
static int send_msg(struct exec_proc *p, char ty, const void *data, size_t len)
{
	char buf[TERMSHARE_MSG_MAX];
	ssize_t n;

	if (p->in_fd < 0)
		return -1;
	buf[0] = ty;
	memcpy(buf + 1, data, len);
	while ((n = send(p->in_fd, buf, len + 1, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	return 1;
}

/* A control message (resize, signal): waits a little for room, as they
 * are few and must not be lost. */
static void send_control(struct exec_proc *p, char ty, const void *data, size_t len)
{
	for (int tries = 0; tries < 2 && send_msg(p, ty, data, len) == 0; tries++) {
		struct pollfd pf = { .fd = p->in_fd, .events = POLLOUT };
		poll(&pf, 1, CONTROL_WAIT_MS);
	}
}

static void att_resize(struct exec_proc *p, unsigned cols, unsigned rows)
{
	unsigned char m[4] = { (unsigned char)(cols >> 8), (unsigned char)cols, (unsigned char)(rows >> 8),
			       (unsigned char)rows };

	send_control(p, TERMSHARE_RESIZE, m, sizeof(m));
}

static int att_start(struct exec_proc *p, const struct exec_req *req, int *code, struct errbuf *eb)
{
	struct sockaddr_un sa;
	int fd, dirfd = -1, ret;

	*code = -1; /* a refusal is no exit status of the task */
	p->tty = true;
	if ((ret = termshare_addr(req->task_dir, &sa, &dirfd, eb)))
		return ret;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = errno;
		if (err == ENOENT || err == ECONNREFUSED)
			ret = error(eb, YERR(CONFLICT), "the task has no terminal to attach to (it has ended, "
				    "or it is not interactive)");
		else
			ret = error(eb, YERR(IO), "cannot reach the task's terminal: %s", strerror(err));
		if (fd >= 0)
			close(fd);
		close_fd(&dirfd);
		return ret;
	}
	close_fd(&dirfd);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	p->in_fd = p->out_fd[0] = fd;
	att_resize(p, req->cols, req->rows); /* this attacher's size is the terminal's now */
	return 0;
}

static int att_exited(struct exec_proc *p)
{
	return 1; /* no exit fd: the end of the connection says it */
}

static int att_pump(struct exec_proc *p, int idx, struct strbuf *out)
{
	char buf[TERMSHARE_MSG_MAX + 1];
	ssize_t n;

	if (p->out_fd[idx] < 0)
		return -1;
	while ((n = recv(p->out_fd[idx], buf, sizeof(buf), MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0)
		return -1;
	if (buf[0] == TERMSHARE_OUTPUT) {
		ws_channel_append(out, WS_CH_STDOUT, buf + 1, (size_t)n - 1, false);
	} else if (buf[0] == TERMSHARE_EXIT) {
		json_decref(p->exit_doc);
		p->exit_doc = json_loadb(buf + 1, (size_t)n - 1, 0, NULL);
	}
	return 1;
}

static int att_write_stdin(struct exec_proc *p, const char *buf, size_t len, size_t *done)
{
	size_t n = len < TERMSHARE_DATA_MAX ? len : TERMSHARE_DATA_MAX;
	int r = send_msg(p, TERMSHARE_INPUT, buf, n);

	*done = r > 0 ? n : 0;
	return r < 0 ? -1 : 0;
}

static void att_close_stdin(struct exec_proc *p)
{
	send_control(p, TERMSHARE_INPUT, "\x04", 1); /* the terminal's end of file */
}

static void att_signal(struct exec_proc *p, int sig)
{
	unsigned char b = (unsigned char)sig;

	send_control(p, TERMSHARE_SIGNAL, &b, 1);
}

static void att_reap(struct exec_proc *p, struct exec_status *st)
{
	const json_t *code = json_object_get(p->exit_doc, "exit_code");
	const json_t *sig = json_object_get(p->exit_doc, "signal");
	const char *msg = json_string_value(json_object_get(p->exit_doc, "message"));

	memset(st, 0, sizeof(*st));
	if (!p->exit_doc) {
		snprintf(st->message, sizeof(st->message), "the task's terminal closed without its exit "
			 "status (its shim is gone)");
		return;
	}
	st->has_code = json_is_integer(code);
	st->code = (int)json_integer_value(code);
	st->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
	/* a status without a code or a signal says why (a start failure, a fencing) */
	if (!st->has_code && !st->signal && msg)
		snprintf(st->message, sizeof(st->message), "%s", msg);
}

/* The client left: it detaches, the task runs on (never a kill). */
static void att_hangup(struct exec_proc *p, bool kill_it)
{
	if (kill_it)
		return; /* the task ended: its shim sends the status and closes */
	p->in_fd = -1;
	close_fd(&p->out_fd[0]);
	p->exited = true;
}

static void att_release(struct exec_proc *p)
{
	p->in_fd = -1;
	close_fd(&p->out_fd[0]);
	json_decref(p->exit_doc);
	p->exit_doc = NULL;
	strbuf_release(&p->pending);
}

const struct exec_proc_ops exec_attach_ops = {
	.name = "attach",
	.start = att_start,
	.exited = att_exited,
	.pump = att_pump,
	.write_stdin = att_write_stdin,
	.close_stdin = att_close_stdin,
	.resize = att_resize,
	.signal = att_signal,
	.reap = att_reap,
	.hangup = att_hangup,
	.release = att_release,
};
