/*
 * yard port-forward ID [--task ROLE/INDEX] [LOCAL:]REMOTE: a local TCP
 * port whose connections reach port REMOTE of a running task (127.0.0.1
 * in its node), each over a port-forward session of its own
 * (docs/protocol.md, "Sessions": the WebSocket client end, yard.port.v1).
 *
 * LOCAL:REMOTE listens on 127.0.0.1:LOCAL; REMOTE alone on the same port
 * number; :REMOTE (or 0:REMOTE) on a port the system picks. The line
 * "forwarding 127.0.0.1:LOCAL -> ..." on stdout says where, once it
 * listens. One thread: connections are relayed side by side from one
 * poll loop, each with bounded buffers both ways (a slow end slows the
 * other). A connection's end of data goes through as an empty message,
 * so half-closed connections work; a session cut off closes its local
 * connection and says why on stderr.
 *
 * It runs until SIGINT or SIGTERM (exit 0), or until a session is refused
 * because the job or task is gone or may not be reached (403, 404, 409:
 * exit 1, saying why).
 */
#include "base/compat.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/wsframe.h"

/* The most of one message the server may send (the agent sends 64 KiB). */
#define READER_MAX (1 << 20)
/* Stop reading one end while this much waits for the other. */
#define QUEUE_HIGH (256 * 1024)
/* The most read from a local connection at once: one message. */
#define CHUNK (64 * 1024)
/* Connections relayed at once. */
#define CONNS_MAX 256

/* One forwarded connection. */
struct fwd {
	unsigned n;             /* its number, for messages */
	int fd;                 /* the local connection, -1 once closed */
	struct httpc_stream st; /* its session */
	struct strbuf ws_out;   /* frames for the server, from ws_off */
	size_t ws_off;
	struct strbuf tcp_out;  /* bytes for the local connection, from tcp_off */
	size_t tcp_off;
	struct ws_reader rd;
	bool local_eof;         /* the local end sent its end: an empty message went */
	bool remote_eof;        /* the remote end's end came: shut the local write side once drained */
	bool shut;              /* the local write side is shut */
	bool close_sent;        /* our close frame is queued */
	bool close_got;         /* the server's close frame came */
	bool st_eof;            /* the session's connection ended */
	bool more;              /* TLS may hold more than the socket shows */
	bool done;
};

static int sig_pipe[2] = { -1, -1 };

static void on_stop(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: the loop knows already */
	}
	errno = saved;
}

/* LOCAL:REMOTE, REMOTE or :REMOTE. */
static int parse_ports(const char *arg, unsigned *local, unsigned *remote)
{
	const char *colon = strchr(arg, ':');
	uint64_t l = 0, r;
	char buf[16];

	if (colon) {
		size_t n = (size_t)(colon - arg);
		if (n >= sizeof(buf))
			return -1;
		memcpy(buf, arg, n);
		buf[n] = 0;
		if (n && (parse_u64_str(buf, &l) || l > 65535))
			return -1;
		arg = colon + 1;
	}
	if (parse_u64_str(arg, &r) || !r || r > 65535)
		return -1;
	*remote = (unsigned)r;
	*local = colon ? (unsigned)l : (unsigned)r;
	return 0;
}

/* A listening socket on 127.0.0.1:*port (0: any; OUT: the one had). */
static int listen_local(unsigned *port, struct errbuf *eb)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

	if (fd < 0)
		return error(eb, YERR(INTERNAL), "cannot make a socket: %s", strerror(errno)), -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		error(eb, YERR(IO), "cannot listen on 127.0.0.1:%u: %s", *port, strerror(errno));
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static void fwd_free(struct fwd *f)
{
	if (f->fd >= 0)
		close(f->fd);
	httpc_stream_close(&f->st);
	strbuf_release(&f->ws_out);
	strbuf_release(&f->tcp_out);
	ws_reader_release(&f->rd);
	free(f);
}

/* Sends what the session takes of ws_out. */
static void send_ws(struct fwd *f)
{
	while (!f->st_eof && f->ws_off < f->ws_out.len) {
		size_t n = 0;
		int rc = httpc_stream_send(&f->st, f->ws_out.buf + f->ws_off, f->ws_out.len - f->ws_off, &n, NULL);
		if (rc == HTTPC_STREAM_AGAIN)
			return;
		if (rc < 0) {
			f->st_eof = true;
			return;
		}
		f->ws_off += n;
	}
	strbuf_reset(&f->ws_out);
	f->ws_off = 0;
}

static size_t ws_pending(const struct fwd *f)
{
	return f->ws_out.len - f->ws_off;
}

static size_t tcp_pending(const struct fwd *f)
{
	return f->tcp_out.len - f->tcp_off;
}

/* Writes what the local connection takes of tcp_out; shuts its write side
 * once the remote end's end came and all is written. */
static void send_tcp(struct fwd *f)
{
	while (f->fd >= 0 && tcp_pending(f)) {
		ssize_t n = send(f->fd, f->tcp_out.buf + f->tcp_off, tcp_pending(f), MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			/* the local end is gone: so is the session */
			f->tcp_off = f->tcp_out.len;
			if (!f->close_sent) {
				ws_close_append(&f->ws_out, WS_CLOSE_NORMAL, "", true);
				f->close_sent = true;
			}
			break;
		}
		f->tcp_off += (size_t)n;
	}
	strbuf_reset(&f->tcp_out);
	f->tcp_off = 0;
	if (f->remote_eof && !f->shut && f->fd >= 0) {
		shutdown(f->fd, SHUT_WR);
		f->shut = true;
	}
}

/* One whole message from the server. */
static void on_message(struct fwd *f)
{
	const struct ws_reader *rd = &f->rd;

	switch (rd->opcode) {
	case WS_OP_PING:
		ws_frame_append(&f->ws_out, WS_OP_PONG, rd->msg, rd->msg_len, true);
		break;
	case WS_OP_CLOSE: {
		unsigned code;
		char reason[124];
		ws_close_parse(rd->msg, rd->msg_len, &code, reason);
		f->close_got = true;
		if (!f->close_sent) {
			ws_close_append(&f->ws_out, code == 1005 ? WS_CLOSE_NORMAL : code, "", true);
			f->close_sent = true;
		}
		if (code != WS_CLOSE_NORMAL && code != 1005)
			fprintf(stderr, "yard port-forward: connection %u: %s\n", f->n,
				reason[0] ? reason : "the session was cut off");
		break;
	}
	case WS_OP_BINARY:
		if (!rd->msg_len)
			f->remote_eof = true;
		else if (!f->remote_eof)
			strbuf_add(&f->tcp_out, rd->msg, rd->msg_len);
		break;
	default:
		break;
	}
}

/* Reads the session until it has nothing now, or the local queue is full. */
static void read_ws(struct fwd *f)
{
	char buf[65536];
	struct errbuf eb = ERRBUF_INIT;

	f->more = false;
	while (!f->st_eof && !f->close_got) {
		size_t n = 0, used;
		int rc;
		if (tcp_pending(f) >= QUEUE_HIGH) {
			f->more = true;
			return;
		}
		rc = httpc_stream_recv(&f->st, buf, sizeof(buf), &n, &eb);
		if (rc == HTTPC_STREAM_AGAIN)
			return;
		if (rc) {
			f->st_eof = true;
			return;
		}
		for (size_t at = 0; at < n && !f->close_got; at += used) {
			int r = ws_reader_feed(&f->rd, buf + at, n - at, &used, &eb);
			if (r < 0) {
				fprintf(stderr, "yard port-forward: connection %u: the master broke the protocol: %s\n",
					f->n, eb.msg);
				f->st_eof = true;
				return;
			}
			if (r == 1)
				on_message(f);
		}
	}
}

/* Reads the local connection while the session's queue has room. */
static void read_tcp(struct fwd *f)
{
	char buf[CHUNK];

	while (!f->local_eof && !f->close_sent && ws_pending(f) < QUEUE_HIGH) {
		ssize_t n = recv(f->fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n > 0) {
			ws_frame_append(&f->ws_out, WS_OP_BINARY, buf, (size_t)n, true);
			continue;
		}
		if (n == 0) {
			/* its end of data, the other way still open */
			f->local_eof = true;
			ws_frame_append(&f->ws_out, WS_OP_BINARY, "", 0, true);
		} else {
			/* reset: the whole connection is gone */
			ws_close_append(&f->ws_out, WS_CLOSE_NORMAL, "", true);
			f->close_sent = true;
		}
		return;
	}
}

/* A new local connection: its session, or NULL (said why; *fatal when
 * the job or task cannot be reached at all). */
static struct fwd *fwd_open(struct cli_ctx *ctx, int fd, unsigned n, uint64_t id, const char *task,
			    unsigned remote, bool *fatal)
{
	struct fwd *f = xcalloc(1, sizeof(*f));
	struct errbuf eb = ERRBUF_INIT;
	long status = 0;
	int one = 1;

	f->n = n;
	f->fd = fd;
	if (client_portforward_open(&ctx->client, id, task, remote, &f->st, &status, &eb)) {
		fprintf(stderr, "yard port-forward: connection %u: %s\n", n, eb.msg);
		*fatal = status == 403 || status == 404 || status == 409;
		close(fd);
		free(f);
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	strbuf_init(&f->ws_out, 0);
	strbuf_init(&f->tcp_out, 0);
	ws_reader_init(&f->rd, READER_MAX, WS_MASK_FORBIDDEN);
	f->more = true; /* whatever came with the 101 */
	return f;
}

/* Moves what can move on f; marks it done when it is over. */
static void fwd_step(struct fwd *f, short tcp_ev, short ws_ev)
{
	if (ws_ev || f->more)
		read_ws(f);
	if (tcp_ev & (POLLIN | POLLHUP | POLLERR))
		read_tcp(f);
	send_tcp(f);
	send_ws(f);
	/* over: the server closed (or the connection ended), and what it sent
	 * has gone to the local end, or that end is gone (send_tcp drops what
	 * it cannot write then): never with bytes still to write to it, which
	 * a local end slower than the session would lose */
	if (!tcp_pending(f) && (f->st_eof || (f->close_got && !ws_pending(f))))
		f->done = true;
}

static int forward(struct cli_ctx *ctx, int lfd, uint64_t id, const char *task, unsigned remote)
{
	struct fwd **conns = xcalloc(CONNS_MAX, sizeof(*conns));
	struct pollfd *pf = xcalloc(2 + 2 * CONNS_MAX, sizeof(*pf));
	size_t nconns = 0;
	unsigned count = 0;
	int rc = EXIT_OK;
	bool fatal = false;

	for (;;) {
		nfds_t np = 0;
		int timeout = -1;
		pf[np++] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
		pf[np++] = (struct pollfd){ .fd = lfd, .events = nconns < CONNS_MAX ? POLLIN : 0 };
		for (size_t i = 0; i < nconns; i++) {
			struct fwd *f = conns[i];
			short tev = (short)((!f->local_eof && !f->close_sent && ws_pending(f) < QUEUE_HIGH ? POLLIN : 0) |
					    (tcp_pending(f) ? POLLOUT : 0));
			short wev = (short)((tcp_pending(f) < QUEUE_HIGH ? POLLIN : 0) | (ws_pending(f) ? POLLOUT : 0));
			pf[np++] = (struct pollfd){ .fd = tev ? f->fd : -1, .events = tev };
			/* an ended session has nothing more to read: not polled (it
			 * would wake every turn while the local end drains) */
			pf[np++] = (struct pollfd){ .fd = f->st_eof ? -1 : f->st.fd, .events = wev };
			if (f->more && tcp_pending(f) < QUEUE_HIGH)
				timeout = 0;
		}
		if (poll(pf, np, timeout) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break; /* SIGINT, SIGTERM */
		for (size_t i = 0; i < nconns; i++) {
			fwd_step(conns[i], pf[2 + 2 * i].revents, pf[3 + 2 * i].revents);
		}
		for (size_t i = 0; i < nconns;) {
			if (conns[i]->done) {
				fwd_free(conns[i]);
				conns[i] = conns[--nconns];
				/* its poll entries are stale now: the next turn rebuilds them */
				continue;
			}
			i++;
		}
		if (pf[1].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			struct fwd *f;
			if (fd < 0)
				continue;
			f = fwd_open(ctx, fd, ++count, id, task, remote, &fatal);
			if (f) {
				conns[nconns++] = f;
				fwd_step(f, 0, 0);
			} else if (fatal) {
				rc = EXIT_FAIL;
				break;
			}
		}
	}
	for (size_t i = 0; i < nconns; i++)
		fwd_free(conns[i]);
	free(conns);
	free(pf);
	return rc;
}

int cmd_portforward(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX",
		  "the task whose port it is (default: the job's first task)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	uint64_t id;
	unsigned local, remote;
	int npos, rc, lfd = -1;
	struct sigaction sa;

	rc = cli_parse(ctx, "port-forward ID [--task ROLE/INDEX] [LOCAL:]REMOTE", opts, ARRAY_SIZE(opts),
		       argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 2)
		return cli_usage_error(ctx, "expected a job id and the ports (yard port-forward ID LOCAL:REMOTE)");
	if (parse_u64_str(argv[1], &id) < 0 || !id)
		return cli_usage_error(ctx, "'%s' is not a job id", argv[1]);
	if (parse_ports(argv[2], &local, &remote))
		return cli_usage_error(ctx, "'%s': expected LOCAL:REMOTE, REMOTE or :REMOTE, ports of 1 to "
				       "65535 (LOCAL 0 or left out: any free port)", argv[2]);
	/* the job is checked first: a job that is not running is said now, not
	 * at the first connection */
	if (client_job_get(&ctx->client, id, &job, &eb))
		return cli_fail(ctx, &eb);
	if (strcmp(cli_jstr(job, "state"), "running")) {
		error(&eb, YERR(CONFLICT), "job %" PRIu64 " is %s, not running", id, cli_jstr(job, "state"));
		json_decref(job);
		return cli_fail(ctx, &eb);
	}
	json_decref(job);
	if ((lfd = listen_local(&local, &eb)) < 0)
		return cli_fail(ctx, &eb);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		close(lfd);
		error(&eb, YERR(INTERNAL), "cannot make a pipe: %s", strerror(errno));
		return cli_fail(ctx, &eb);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	printf("forwarding 127.0.0.1:%u -> port %u of %s%s%sjob %" PRIu64 "\n", local, remote,
	       task ? "task " : "", task ? task : "", task ? " of " : "", id);
	fflush(stdout);
	rc = forward(ctx, lfd, id, task, remote);
	close(lfd);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	return rc;
}
