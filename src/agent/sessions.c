/* The agent's side of sessions (sessions.h). */
#include "base/compat.h"
#include "agent/sessions.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "agent/sessexec.h"
#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/xalloc.h"
#include "common/wsframe.h"

/* The most of one message from a client (a paste into a terminal). */
#define READER_MAX (1 << 20)
/* Stop reading the command's output while this much waits for the master;
 * stop reading the client while this much stdin waits for the command. */
#define OUT_HIGH (256 * 1024)
#define IN_HIGH (256 * 1024)
/* How long a command that was hung up on has before it is killed. */
#define HANGUP_GRACE_MS 2000
/* How long the last frames may take to go out, and the client's close
 * to come back. */
#define FLUSH_MS 30000
#define CLOSE_WAIT_MS 1000
#define DIAL_TIMEOUT_MS 15000
/* The most of a task's port read at once: one yard.port.v1 message. */
#define PORT_CHUNK (64 * 1024)

enum stop_req { STOP_NONE, STOP_TASK_ENDED, STOP_AGENT };

struct asession {
	struct agent_sessions *as;
	char *id;
	int64_t task;
	json_t *entry;          /* owned: the work reply's entry */
	struct asession_task t;
	char *node, *token;     /* owned */
	pthread_t thread;
	int wake;               /* eventfd: the loop's word to the thread */
	enum stop_req stop;     /* under as->lock */
	bool done;              /* under as->lock: the thread has finished */
	struct asession *next;
};

void agent_sessions_init(struct agent_sessions *as, const char *master_url,
			 const struct httpc_tls *tls, const char *docker_socket)
{
	memset(as, 0, sizeof(*as));
	pthread_mutex_init(&as->lock, NULL);
	as->master_url = xstrdup(master_url);
	as->tls.ca_file = tls && tls->ca_file ? xstrdup(tls->ca_file) : NULL;
	as->tls.pin = tls && tls->pin ? xstrdup(tls->pin) : NULL;
	as->docker_socket = docker_socket ? xstrdup(docker_socket) : NULL;
}

/* ---- the connection: a WebSocket's server end over the agent's leg ---- */

struct wsconn {
	struct httpc_stream *st;
	struct strbuf out;      /* frames to send, from out_off */
	size_t out_off;
	struct ws_reader rd;
	bool eof;               /* the leg ended (or broke) */
	bool more;              /* the last read stopped before the leg said AGAIN */
	bool close_got;         /* the client's close frame came */
	unsigned close_code;
};

/* Sends what the leg takes now; marks it ended when it broke. */
static void conn_flush(struct wsconn *c)
{
	while (!c->eof && c->out_off < c->out.len) {
		size_t n = 0;
		int rc = httpc_stream_send(c->st, c->out.buf + c->out_off, c->out.len - c->out_off, &n, NULL);
		if (rc == HTTPC_STREAM_AGAIN)
			break;
		if (rc < 0) {
			c->eof = true;
			break;
		}
		c->out_off += n;
	}
	if (c->out_off == c->out.len) {
		strbuf_reset(&c->out);
		c->out_off = 0;
	} else if (c->out_off > (c->out.len >> 1)) {
		memmove(c->out.buf, c->out.buf + c->out_off, c->out.len - c->out_off);
		strbuf_setlen(&c->out, c->out.len - c->out_off);
		c->out_off = 0;
	}
}

static size_t conn_pending(const struct wsconn *c)
{
	return c->out.len - c->out_off;
}

/* Sends everything queued, waiting up to FLUSH_MS. */
static void conn_flush_all(struct wsconn *c)
{
	uint64_t deadline = mono_ms() + FLUSH_MS;

	for (conn_flush(c); !c->eof && conn_pending(c) && mono_ms() < deadline; conn_flush(c)) {
		struct pollfd p = { .fd = c->st->fd, .events = POLLOUT };
		poll(&p, 1, 100);
	}
}

/* Waits a little for the client's answer to our close frame (reading and
 * dropping whatever comes before it). */
static void conn_await_close(struct wsconn *c)
{
	uint64_t deadline = mono_ms() + CLOSE_WAIT_MS;
	char buf[16384];

	while (!c->eof && !c->close_got && mono_ms() < deadline) {
		size_t n = 0, used;
		int rc = httpc_stream_recv(c->st, buf, sizeof(buf), &n, NULL);
		if (rc == HTTPC_STREAM_AGAIN) {
			struct pollfd p = { .fd = c->st->fd, .events = POLLIN };
			poll(&p, 1, 100);
			continue;
		}
		if (rc)
			break;
		for (size_t at = 0; at < n; at += used) {
			int r = ws_reader_feed(&c->rd, buf + at, n - at, &used, NULL);
			if (r < 0)
				return;
			if (r == 1 && c->rd.opcode == WS_OP_CLOSE)
				c->close_got = true;
		}
	}
}

/* The last message of a session: its status, then a close frame. */
static void conn_status(struct wsconn *c, const struct exec_status *st)
{
	json_t *doc = json_pack("{s:o, s:o, s:o}", "exit_code",
				st->has_code ? json_integer(st->code) : json_null(), "signal",
				st->signal ? json_integer(st->signal) : json_null(), "message",
				st->message[0] ? json_string(st->message) : json_null());
	char *text = json_dumps(doc, JSON_COMPACT);

	ws_channel_append(&c->out, WS_CH_STATUS, text, strlen(text), false);
	ws_close_append(&c->out, WS_CLOSE_NORMAL, "", false);
	free(text);
	json_decref(doc);
}

/* Ends a session that cannot run with a status that says why. */
static void conn_refuse(struct wsconn *c, bool has_code, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void conn_refuse(struct wsconn *c, bool has_code, int code, const char *fmt, ...)
{
	struct exec_status st;
	va_list ap;

	memset(&st, 0, sizeof(st));
	st.has_code = has_code;
	st.code = code;
	va_start(ap, fmt);
	vsnprintf(st.message, sizeof(st.message), fmt, ap);
	va_end(ap);
	conn_status(c, &st);
	conn_flush_all(c);
	conn_await_close(c);
}

/* ---- exec ---- */

/* Everything a running exec session holds. */
struct exec_run {
	struct asession *s;
	struct wsconn *c;
	struct exec_proc p;
	struct strbuf in;       /* stdin for the command, from in_off */
	size_t in_off;
	bool stdin_open;
	bool stdin_eof;         /* the client closed stdin: close it once in is written */
	bool out_done[2];       /* that output has ended */
	bool hung_up;           /* the client left: the command was sent SIGHUP */
	uint64_t kill_at;       /* mono_ms to SIGKILL it, 0: none */
};

/* An integer member of doc in 1..max, or 0. */
static unsigned json_dim(const json_t *doc, const char *key, unsigned max)
{
	json_int_t v = json_integer_value(json_object_get(doc, key));

	return v >= 1 && v <= (json_int_t)max ? (unsigned)v : 0;
}

/* One whole message from the client. */
static void exec_message(struct exec_run *x)
{
	struct wsconn *c = x->c;
	const char *msg = c->rd.msg;
	size_t len = c->rd.msg_len;
	json_t *doc;

	switch (c->rd.opcode) {
	case WS_OP_PING:
		ws_frame_append(&c->out, WS_OP_PONG, msg, len, false);
		return;
	case WS_OP_CLOSE:
		c->close_got = true;
		c->close_code = len >= 2 ? (unsigned)((unsigned char)msg[0] << 8 | (unsigned char)msg[1])
					 : WS_CLOSE_NORMAL;
		return;
	case WS_OP_BINARY:
		break;
	default:
		return; /* text, pong: not part of yard.exec.v1 */
	}
	if (!len)
		return;
	switch ((unsigned char)msg[0]) {
	case WS_CH_STDIN:
		if (!x->stdin_open || x->stdin_eof)
			return;
		if (len == 1)
			x->stdin_eof = true;
		else
			strbuf_add(&x->in, msg + 1, len - 1);
		return;
	case WS_CH_RESIZE:
		doc = json_loadb(msg + 1, len - 1, 0, NULL);
		if (json_dim(doc, "cols", 10000) && json_dim(doc, "rows", 10000))
			x->p.ops->resize(&x->p, json_dim(doc, "cols", 10000), json_dim(doc, "rows", 10000));
		json_decref(doc);
		return;
	case WS_CH_SIGNAL: {
		doc = json_loadb(msg + 1, len - 1, 0, NULL);
		int sig = exec_signal_parse(json_string_value(json_object_get(doc, "signal")));
		if (sig)
			x->p.ops->signal(&x->p, sig);
		json_decref(doc);
		return;
	}
	default:
		return;
	}
}

/* Reads the leg until it has nothing more now (or stdin is full). */
static void exec_read_leg(struct exec_run *x)
{
	struct wsconn *c = x->c;
	char buf[65536];
	struct errbuf eb = ERRBUF_INIT;

	c->more = false;
	while (!c->eof && !c->close_got) {
		size_t n = 0, used;
		int rc;
		if (x->in.len - x->in_off >= IN_HIGH) {
			c->more = true; /* TLS may hold more than the socket shows */
			return;
		}
		rc = httpc_stream_recv(c->st, buf, sizeof(buf), &n, NULL);
		if (rc == HTTPC_STREAM_AGAIN)
			return;
		if (rc) {
			c->eof = true;
			return;
		}
		for (size_t at = 0; at < n && !c->close_got; at += used) {
			int r = ws_reader_feed(&c->rd, buf + at, n - at, &used, &eb);
			if (r < 0) {
				ws_close_append(&c->out, r == YERR(TOO_LARGE) ? WS_CLOSE_TOO_BIG : WS_CLOSE_PROTOCOL,
						eb.msg, false);
				c->close_got = true;
				c->close_code = 0; /* ours is sent already */
				return;
			}
			if (r == 1)
				exec_message(x);
		}
	}
}

static void exec_write_stdin(struct exec_run *x)
{
	while (x->in_off < x->in.len) {
		size_t done = 0;
		if (x->p.ops->write_stdin(&x->p, x->in.buf + x->in_off, x->in.len - x->in_off, &done) < 0) {
			/* the command closed its stdin: what is left goes nowhere */
			x->in_off = x->in.len;
			break;
		}
		if (!done)
			return;
		x->in_off += done;
	}
	strbuf_reset(&x->in);
	x->in_off = 0;
	if (x->stdin_eof) {
		x->p.ops->close_stdin(&x->p);
		x->stdin_eof = false;
		x->stdin_open = false;
	}
}

/* Reads the command's output while the leg's queue has room. */
static void exec_pump(struct exec_run *x)
{
	for (int i = 0; i < 2; i++) {
		if (x->out_done[i])
			continue;
		while (conn_pending(x->c) < OUT_HIGH) {
			int r = x->p.ops->pump(&x->p, i, &x->c->out);
			if (r < 0) {
				x->out_done[i] = true;
				break;
			}
			if (r == 0) {
				/* once the process has ended, what is not there now
				 * would come from what it left behind: not waited for */
				if (x->p.exit_fd >= 0 && x->p.exited)
					x->out_done[i] = true;
				break;
			}
		}
	}
}

static bool exec_finished(const struct exec_run *x)
{
	return x->out_done[0] && x->out_done[1] && (x->p.exit_fd < 0 || x->p.exited);
}

/* The session's loop, from a started command to its status. */
static void exec_loop(struct exec_run *x)
{
	struct asession *s = x->s;
	struct wsconn *c = x->c;
	enum stop_req stop = STOP_NONE, seen = STOP_NONE;

	for (int i = 0; i < 2; i++)
		x->out_done[i] = x->p.out_fd[i] < 0;
	for (;;) {
		struct pollfd pf[6];
		int np = 0, ileg = -1, iwake, iout[2] = { -1, -1 }, iexit = -1, timeout = -1;
		uint64_t now = mono_ms();

		if (c->close_got || c->eof) {
			if (!x->hung_up) {
				/* the client left: the command is hung up on, then killed */
				x->hung_up = true;
				x->p.ops->hangup(&x->p, false);
				x->kill_at = now + HANGUP_GRACE_MS;
			}
			if (x->p.exited)
				break;
			if (now >= x->kill_at) {
				x->p.ops->hangup(&x->p, true); /* (an engine's exec: no exit fd to wait on) */
				break;
			}
		}
		if (exec_finished(x))
			break;
		pthread_mutex_lock(&s->as->lock);
		stop = s->stop;
		pthread_mutex_unlock(&s->as->lock);
		if (stop == STOP_AGENT)
			return;
		if (stop == STOP_TASK_ENDED && seen != stop) {
			x->p.ops->hangup(&x->p, true); /* its status says how it ended */
			seen = stop;
		}
		iwake = np;
		pf[np++] = (struct pollfd){ .fd = s->wake, .events = POLLIN };
		short legev = (short)((c->close_got ? 0 : POLLIN) | (conn_pending(c) ? POLLOUT : 0));
		if (!c->eof && legev) {
			ileg = np;
			pf[np++] = (struct pollfd){ .fd = c->st->fd, .events = legev };
		}
		for (int i = 0; i < 2; i++)
			if (!x->out_done[i] && conn_pending(c) < OUT_HIGH && !c->close_got) {
				iout[i] = np;
				pf[np++] = (struct pollfd){ .fd = x->p.out_fd[i], .events = POLLIN };
			}
		if (x->in.len > x->in_off && x->p.in_fd >= 0)
			pf[np++] = (struct pollfd){ .fd = x->p.in_fd, .events = POLLOUT };
		if (x->p.exit_fd >= 0 && !x->p.exited) {
			iexit = np;
			pf[np++] = (struct pollfd){ .fd = x->p.exit_fd, .events = POLLIN };
		}
		if (x->kill_at)
			timeout = x->kill_at > now ? (int)(x->kill_at - now) : 0;
		if (c->more && x->in.len - x->in_off < IN_HIGH)
			timeout = 0; /* read the leg again: TLS may hold more */
		if (poll(pf, (nfds_t)np, timeout) < 0 && errno != EINTR)
			break;
		if (pf[iwake].revents) {
			uint64_t v;
			if (read(s->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		if (iexit >= 0 && pf[iexit].revents)
			x->p.ops->exited(&x->p);
		if (ileg >= 0 && (pf[ileg].revents || c->more))
			exec_read_leg(x);
		if (x->in.len > x->in_off || x->stdin_eof)
			exec_write_stdin(x);
		for (int i = 0; i < 2; i++)
			if (iout[i] >= 0 && pf[iout[i]].revents)
				exec_pump(x);
		if (x->p.exited)
			exec_pump(x); /* drain what it wrote before it ended */
		conn_flush(c);
		if (x->kill_at && mono_ms() >= x->kill_at && !x->p.exited)
			x->p.ops->hangup(&x->p, true);
	}
	if (c->close_got || c->eof) {
		/* the client left: answer its close, no status */
		if (c->close_got && c->close_code)
			ws_close_append(&c->out, c->close_code == 1005 ? WS_CLOSE_NORMAL : c->close_code, "", false);
		conn_flush_all(c);
		return;
	}
	{
		struct exec_status st;
		x->p.ops->reap(&x->p, &st);
		conn_status(c, &st);
		conn_flush_all(c);
		conn_await_close(c);
	}
}

/* Runs req with ops on the session's leg, from its start to its status; a
 * start that fails is refused with its message (and its exit code, unless
 * ops left it negative). */
static void serve(struct asession *s, struct wsconn *c, const struct exec_req *req,
		  const struct exec_proc_ops *ops)
{
	struct exec_run x = { .s = s, .c = c };
	struct errbuf eb = ERRBUF_INIT;
	int code = 126;

	exec_proc_init(&x.p, ops);
	strbuf_init(&x.in, 0);
	x.stdin_open = req->stdin_open || req->tty;
	if (x.p.ops->start(&x.p, req, &code, &eb))
		conn_refuse(c, code >= 0, code, "%s", eb.msg);
	else
		exec_loop(&x);
	x.p.ops->release(&x.p);
	strbuf_release(&x.in);
}

static void run_exec(struct asession *s, struct wsconn *c)
{
	const json_t *e = s->entry;
	struct exec_req req = {
		.argv = json_object_get(e, "argv"),
		.tty = json_is_true(json_object_get(e, "tty")),
		.stdin_open = json_is_true(json_object_get(e, "stdin")),
		.cols = json_dim(e, "cols", 10000) ? json_dim(e, "cols", 10000) : 80,
		.rows = json_dim(e, "rows", 10000) ? json_dim(e, "rows", 10000) : 24,
		.task_dir = s->t.dir,
		.docker_socket = s->as->docker_socket,
	};
	json_t *conf = NULL;

	if (!s->t.found || !s->t.running) {
		conn_refuse(c, false, 0, "task %" PRId64 " is not running on node '%s'", s->task, s->node);
		return;
	}
	if (!json_array_size(req.argv)) {
		conn_refuse(c, false, 0, "the session has no command");
		return;
	}
	if (s->t.container && !taskdir_read_json(s->t.dir, "shim.json", &conf, NULL))
		req.container = json_string_value(json_object_get(conf, "container"));
	serve(s, c, &req, s->t.container ? &exec_docker_ops : &exec_process_ops);
	json_decref(conf);
}

/* attach: the terminal of an interactive task, as its shim shares it
 * (sessexec.h's exec_attach_ops); the client leaving detaches. */
static void run_attach(struct asession *s, struct wsconn *c)
{
	const json_t *e = s->entry;
	struct exec_req req = {
		.tty = true,
		.stdin_open = true,
		.cols = json_dim(e, "cols", 10000) ? json_dim(e, "cols", 10000) : 80,
		.rows = json_dim(e, "rows", 10000) ? json_dim(e, "rows", 10000) : 24,
		.task_dir = s->t.dir,
	};

	if (!s->t.found || !s->t.running) {
		conn_refuse(c, false, 0, "task %" PRId64 " is not running on node '%s'", s->task, s->node);
		return;
	}
	serve(s, c, &req, &exec_attach_ops);
}

/* ---- port, http, ws: a TCP connection to the task's port ---- */

/* How the session's loop is told to stop: STOP_NONE to go on. */
static enum stop_req stop_asked(struct asession *s)
{
	enum stop_req stop;

	pthread_mutex_lock(&s->as->lock);
	stop = s->stop;
	pthread_mutex_unlock(&s->as->lock);
	return stop;
}

/* A connection to 127.0.0.1:port: process tasks run in the agent's
 * network namespace, and the docker runtime's containers on the host's
 * network, so the task's port is the node's loopback port. Non-blocking
 * and close-on-exec; -1 with eb saying why. */
static int upstream_connect(struct asession *s, unsigned port, struct errbuf *eb)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, rc;

	if (fd < 0)
		return error(eb, YERR(INTERNAL), "cannot make a socket: %s", strerror(errno)), -1;
	while ((rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EINTR)
		;
	if (rc < 0) {
		error(eb, YERR(BAD_GATEWAY), "cannot connect to port %u of node '%s' (127.0.0.1): %s", port,
		      s->node, strerror(errno));
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* The task's port of the session's entry, or 0. */
static unsigned entry_port(const struct asession *s)
{
	return json_dim(s->entry, "port", 65535);
}

/* Bytes waiting to be written to the upstream: buf from off. */
struct outq {
	struct strbuf buf;
	size_t off;
};

static size_t outq_len(const struct outq *q)
{
	return q->buf.len - q->off;
}

/* Writes what fd takes of q: 0, or -1 when the upstream is gone (EPIPE,
 * a reset). */
static int outq_write(struct outq *q, int fd)
{
	while (outq_len(q)) {
		ssize_t n = send(fd, q->buf.buf + q->off, outq_len(q), MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		q->off += (size_t)n;
	}
	strbuf_reset(&q->buf);
	q->off = 0;
	return 0;
}

/* Reads the upstream once into out (the leg's queue, as frames when
 * framed): 1 when bytes came, 0 when none are there now, -1 at its end,
 * -2 when it failed (errno set). */
static int upstream_read(int fd, struct strbuf *out, bool framed)
{
	char buf[PORT_CHUNK];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -2;
	if (!n)
		return -1;
	if (framed)
		ws_frame_append(out, WS_OP_BINARY, buf, (size_t)n, false);
	else
		strbuf_add(out, buf, (size_t)n);
	return 1;
}

/* http and ws: an answer the master reads as the upstream's, saying why
 * there is no upstream (the client gets it as a 502 with the API's error
 * document). */
static void raw_refuse(struct wsconn *c, const struct errbuf *eb)
{
	json_t *doc = json_pack("{s:{s:s, s:s}}", "error", "code", "bad_gateway", "message", eb->msg);
	char *text = json_dumps(doc, JSON_COMPACT);

	strbuf_addf(&c->out, "HTTP/1.0 502 Bad Gateway\r\nContent-Type: application/json\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(text), text);
	conn_flush_all(c);
	free(text);
	json_decref(doc);
}

/*
 * One wait of a splice of the leg c and the upstream fd (run_raw,
 * run_port), each side polled for what the buffers allow: the leg read
 * while up has room and written while c has output; the upstream read
 * while it has not ended and c's output has room, written while up holds
 * bytes. No wait when TLS holds more of the leg than its socket shows.
 * The session's wake is drained. *legrev, *uprev: what came on each side.
 */
static int splice_wait(struct asession *s, struct wsconn *c, int fd, const struct outq *up, bool up_eof,
		       short *legrev, short *uprev)
{
	struct pollfd pf[3];
	int np = 0, ileg = -1, iup = -1;
	short legev = (short)((outq_len(up) < IN_HIGH ? POLLIN : 0) | (conn_pending(c) ? POLLOUT : 0));
	short upev = (short)((!up_eof && conn_pending(c) < OUT_HIGH ? POLLIN : 0) | (outq_len(up) ? POLLOUT : 0));

	*legrev = *uprev = 0;
	pf[np++] = (struct pollfd){ .fd = s->wake, .events = POLLIN };
	if (legev) {
		ileg = np;
		pf[np++] = (struct pollfd){ .fd = c->st->fd, .events = legev };
	}
	if (upev) {
		iup = np;
		pf[np++] = (struct pollfd){ .fd = fd, .events = upev };
	}
	if (poll(pf, (nfds_t)np, c->more && outq_len(up) < IN_HIGH ? 0 : -1) < 0 && errno != EINTR)
		return -1;
	if (pf[0].revents) {
		uint64_t v;
		if (read(s->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -1;
	}
	*legrev = ileg >= 0 ? pf[ileg].revents : 0;
	*uprev = iup >= 0 ? pf[iup].revents : 0;
	return 0;
}

/*
 * http and ws: the leg and the upstream spliced, raw bytes both ways (the
 * master wrote the request, and reads the answer). The upstream's end
 * (it closed, or failed) ends the session once what it sent has gone to
 * the master; the leg's end (the client went away) ends it at once.
 */
static void run_raw(struct asession *s, struct wsconn *c)
{
	struct errbuf eb = ERRBUF_INIT;
	struct outq up = { STRBUF_INIT, 0 };
	bool up_eof = false;
	int fd;

	if (!s->t.found || !s->t.running) {
		error(&eb, YERR(BAD_GATEWAY), "task %" PRId64 " is not running on node '%s'", s->task, s->node);
		raw_refuse(c, &eb);
		return;
	}
	if ((fd = upstream_connect(s, entry_port(s), &eb)) < 0) {
		raw_refuse(c, &eb);
		return;
	}
	while (!c->eof && !(up_eof && !conn_pending(c))) {
		short legrev, uprev;
		if (stop_asked(s) != STOP_NONE)
			break;
		if (splice_wait(s, c, fd, &up, up_eof, &legrev, &uprev) < 0)
			break;
		if (legrev || c->more) {
			char buf[65536];
			c->more = false;
			while (!c->eof) {
				size_t n = 0;
				int rc;
				if (outq_len(&up) >= IN_HIGH) {
					c->more = true; /* TLS may hold more than the socket shows */
					break;
				}
				rc = httpc_stream_recv(c->st, buf, sizeof(buf), &n, NULL);
				if (rc == HTTPC_STREAM_AGAIN)
					break;
				if (rc)
					c->eof = true;
				else
					strbuf_add(&up.buf, buf, n);
			}
		}
		if (outq_len(&up) && outq_write(&up, fd) < 0)
			up_eof = true; /* the upstream is gone: what it sent goes on, then the end */
		if (uprev & (POLLIN | POLLHUP | POLLERR)) {
			int r = 0;
			while (conn_pending(c) < OUT_HIGH && (r = upstream_read(fd, &c->out, false)) > 0)
				;
			if (r < 0)
				up_eof = true;
		}
		conn_flush(c);
	}
	if (up_eof && !c->eof)
		conn_flush_all(c);
	close(fd);
	strbuf_release(&up.buf);
}

/* port: ends the session with a close frame (code, reason) and waits a
 * little for the client's. */
static void port_close(struct wsconn *c, unsigned code, const char *reason)
{
	ws_close_append(&c->out, code, reason, false);
	conn_flush_all(c);
	conn_await_close(c);
}

/*
 * port (yard.port.v1): the server end of the client's WebSocket, whose
 * binary messages are the bytes of a TCP connection to the task's port.
 * An empty binary message is the end of what its sender sends: from the
 * client it shuts the upstream's write side once the bytes before it are
 * written; the upstream's end goes to the client as one. Once both ways
 * have ended, a close frame (1000); the upstream's failure, the task's
 * end or a port nothing listens on: a close frame 1011 with the reason.
 */
static void run_port(struct asession *s, struct wsconn *c)
{
	struct errbuf eb = ERRBUF_INIT;
	struct outq up = { STRBUF_INIT, 0 };
	bool client_eof = false, shut = false, up_eof = false;
	char why[300] = "";
	unsigned port = entry_port(s);
	int fd;

	if (!s->t.found || !s->t.running) {
		snprintf(why, sizeof(why), "task %" PRId64 " is not running on node '%s'", s->task, s->node);
		port_close(c, WS_CLOSE_ERROR, why);
		return;
	}
	if ((fd = upstream_connect(s, port, &eb)) < 0) {
		port_close(c, WS_CLOSE_ERROR, eb.msg);
		return;
	}
	while (!c->eof && !c->close_got && !why[0] && !(up_eof && shut && !conn_pending(c))) {
		short legrev, uprev;
		enum stop_req stop = stop_asked(s);
		if (stop == STOP_AGENT)
			break;
		if (stop == STOP_TASK_ENDED) {
			snprintf(why, sizeof(why), "task %" PRId64 " has ended", s->task);
			break;
		}
		if (splice_wait(s, c, fd, &up, up_eof, &legrev, &uprev) < 0)
			break;
		if (legrev || c->more) {
			char buf[65536];
			c->more = false;
			while (!c->eof && !c->close_got) {
				size_t n = 0, used;
				int rc;
				if (outq_len(&up) >= IN_HIGH) {
					c->more = true;
					break;
				}
				rc = httpc_stream_recv(c->st, buf, sizeof(buf), &n, NULL);
				if (rc == HTTPC_STREAM_AGAIN)
					break;
				if (rc) {
					c->eof = true;
					break;
				}
				for (size_t at = 0; at < n && !c->close_got; at += used) {
					int r = ws_reader_feed(&c->rd, buf + at, n - at, &used, &eb);
					if (r < 0) {
						ws_close_append(&c->out, r == YERR(TOO_LARGE) ? WS_CLOSE_TOO_BIG
											: WS_CLOSE_PROTOCOL, eb.msg, false);
						c->close_got = true;
						c->close_code = 0; /* ours is on its way */
						break;
					}
					if (r != 1)
						continue;
					if (c->rd.opcode == WS_OP_PING) {
						ws_frame_append(&c->out, WS_OP_PONG, c->rd.msg, c->rd.msg_len, false);
					} else if (c->rd.opcode == WS_OP_CLOSE) {
						c->close_got = true;
						c->close_code = c->rd.msg_len >= 2
							? (unsigned)((unsigned char)c->rd.msg[0] << 8 | (unsigned char)c->rd.msg[1])
							: WS_CLOSE_NORMAL;
					} else if (c->rd.opcode == WS_OP_BINARY && !client_eof) {
						if (!c->rd.msg_len)
							client_eof = true;
						else
							strbuf_add(&up.buf, c->rd.msg, c->rd.msg_len);
					}
				}
			}
		}
		if (outq_len(&up) && outq_write(&up, fd) < 0)
			snprintf(why, sizeof(why), "the connection to port %u was reset", port);
		if (client_eof && !shut && !outq_len(&up)) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		if (!why[0] && (uprev & (POLLIN | POLLHUP | POLLERR))) {
			int r = 0;
			while (conn_pending(c) < OUT_HIGH && (r = upstream_read(fd, &c->out, true)) > 0)
				;
			if (r == -1) {
				up_eof = true;
				ws_frame_append(&c->out, WS_OP_BINARY, "", 0, false); /* its end */
			} else if (r == -2) {
				snprintf(why, sizeof(why), "the connection to port %u failed: %s", port,
					 strerror(errno));
			}
		}
		conn_flush(c);
	}
	close(fd);
	strbuf_release(&up.buf);
	if (stop_asked(s) == STOP_AGENT || c->eof)
		return;
	if (c->close_got) {
		/* the client closed: answer its close */
		if (c->close_code)
			ws_close_append(&c->out, c->close_code == 1005 ? WS_CLOSE_NORMAL : c->close_code, "", false);
		conn_flush_all(c);
		return;
	}
	port_close(c, why[0] ? WS_CLOSE_ERROR : WS_CLOSE_NORMAL, why);
}

/* The table of kinds: what the thread runs on a dialed leg. */
static const struct asession_kind {
	const char *name;
	void (*run)(struct asession *s, struct wsconn *c);
} kinds[] = {
	{ "exec", run_exec },
	{ "attach", run_attach },
	{ "port", run_port },
	{ "http", run_raw },
	{ "ws", run_raw },
};

/* ---- threads ---- */

static void *session_thread(void *arg)
{
	struct asession *s = arg;
	struct agent_sessions *as = s->as;
	const char *kind = json_string_value(json_object_get(s->entry, "kind"));
	struct errbuf eb = ERRBUF_INIT;
	struct httpc c;
	struct httpc_stream st;
	char *node = url_escape(s->node), *id = url_escape(s->id);
	char *path = xasprintf("/v1/agents/%s/sessions/%s", node, id);
	struct httpc_upgrade_req req = { .path = path, .protocol = "yard-session/1",
					 .timeout_ms = DIAL_TIMEOUT_MS };

	httpc_init(&c, as->master_url, &as->tls, s->token);
	if (httpc_upgrade(&c, &req, &st, NULL, &eb)) {
		fprintf(stderr, "yard agent: session %s: cannot open it: %s\n", s->id, eb.msg);
	} else {
		/* more: what came with the 101 (httpc_upgrade keeps it, and TLS may
		 * hold more) is read before the socket is polled, which would not
		 * say it is there */
		struct wsconn conn = { .st = &st, .more = true };
		const struct asession_kind *k = NULL;
		strbuf_init(&conn.out, 0);
		ws_reader_init(&conn.rd, READER_MAX, WS_MASK_REQUIRED);
		for (size_t i = 0; kind && i < ARRAY_SIZE(kinds); i++)
			if (!strcmp(kinds[i].name, kind))
				k = &kinds[i];
		if (k && k->run)
			k->run(s, &conn);
		else if (!k)
			conn_refuse(&conn, false, 0, "node '%s' does not know sessions of kind '%s'", s->node,
				    kind ? kind : "");
		ws_reader_release(&conn.rd);
		strbuf_release(&conn.out);
		httpc_stream_close(&st);
	}
	httpc_release(&c);
	free(path);
	free(node);
	free(id);
	pthread_mutex_lock(&as->lock);
	s->done = true;
	pthread_mutex_unlock(&as->lock);
	crypto_thread_done();
	return NULL;
}

static void asession_free(struct asession *s)
{
	if (s->wake >= 0)
		close(s->wake);
	json_decref(s->entry);
	free(s->t.dir);
	free(s->id);
	free(s->node);
	free(s->token);
	free(s);
}

static void wake(struct asession *s, enum stop_req why)
{
	uint64_t one = 1;

	if (s->stop < why)
		s->stop = why;
	if (write(s->wake, &one, sizeof(one)) < 0)
		return; /* the counter is full: it is awake already */
}

/* Joins and frees the sessions whose threads are done (all with all). */
static void reap(struct agent_sessions *as, bool all)
{
	for (;;) {
		struct asession **pp, *s = NULL;
		pthread_mutex_lock(&as->lock);
		for (pp = &as->list; *pp; pp = &(*pp)->next)
			if (all || (*pp)->done) {
				s = *pp;
				*pp = s->next;
				break;
			}
		pthread_mutex_unlock(&as->lock);
		if (!s)
			return;
		pthread_join(s->thread, NULL);
		asession_free(s);
	}
}

static bool started(const struct agent_sessions *as, const char *id)
{
	for (size_t i = 0; i < as->nstarted; i++)
		if (!strcmp(as->started[i], id))
			return true;
	return false;
}

static bool listed(const json_t *list, const char *id)
{
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e) {
		const char *eid = json_string_value(json_object_get(e, "id"));
		if (eid && !strcmp(eid, id))
			return true;
	}
	return false;
}

void agent_sessions_reconcile(struct agent_sessions *as, const json_t *list, const char *node,
			      const char *token, asession_lookup_fn lookup, void *arg)
{
	size_t i, k = 0;
	json_t *e;

	reap(as, false);
	/* an id the master no longer lists is never listed again */
	for (i = 0; i < as->nstarted; i++) {
		if (listed(list, as->started[i]))
			as->started[k++] = as->started[i];
		else
			free(as->started[i]);
	}
	as->nstarted = k;
	json_array_foreach(list, i, e) {
		const char *id = json_string_value(json_object_get(e, "id"));
		struct asession *s;
		if (!id || !*id || started(as, id))
			continue;
		ALLOC_GROW(as->started, as->nstarted + 1, as->astarted);
		as->started[as->nstarted++] = xstrdup(id);
		s = xcalloc(1, sizeof(*s));
		s->as = as;
		s->id = xstrdup(id);
		s->task = json_integer_value(json_object_get(e, "task"));
		s->entry = json_deep_copy(e);
		s->node = xstrdup(node);
		s->token = xstrdup(token);
		s->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		lookup(arg, s->task, &s->t);
		if (s->wake < 0 || pthread_create(&s->thread, NULL, session_thread, s)) {
			fprintf(stderr, "yard agent: session %s: cannot start its thread: %s\n", id,
				strerror(errno));
			asession_free(s);
			continue;
		}
		pthread_mutex_lock(&as->lock);
		s->next = as->list;
		as->list = s;
		pthread_mutex_unlock(&as->lock);
	}
}

void agent_sessions_task_ended(struct agent_sessions *as, int64_t task)
{
	pthread_mutex_lock(&as->lock);
	for (struct asession *s = as->list; s; s = s->next)
		if (s->task == task && !s->done)
			wake(s, STOP_TASK_ENDED);
	pthread_mutex_unlock(&as->lock);
}

void agent_sessions_stop(struct agent_sessions *as)
{
	pthread_mutex_lock(&as->lock);
	for (struct asession *s = as->list; s; s = s->next)
		wake(s, STOP_AGENT);
	pthread_mutex_unlock(&as->lock);
	reap(as, true);
	for (size_t i = 0; i < as->nstarted; i++)
		free(as->started[i]);
	free(as->started);
	free(as->master_url);
	free((char *)as->tls.ca_file);
	free((char *)as->tls.pin);
	free(as->docker_socket);
	pthread_mutex_destroy(&as->lock);
	memset(as, 0, sizeof(*as));
}
