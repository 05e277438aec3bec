/* The client end of a yard.exec.v1 session on the user's terminal
 * (termsess.h). */
#include "base/compat.h"
#include "cli/termsess.h"

#include <jansson.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "common/wsframe.h"

#define READER_MAX (1 << 20)
/* Stop reading stdin while this much waits for the master. */
#define OUT_HIGH (256 * 1024)
/* How long a detach waits for the server's close frame. */
#define DETACH_WAIT_MS 2000

/* The terminal's settings before raw mode, restored on every way out. */
static struct termios saved_tio;
static volatile sig_atomic_t raw_on;
/* The self-pipe the signal handlers write to (the loop reads it). */
static int sig_pipe[2] = { -1, -1 };

static void restore_terminal(void)
{
	if (raw_on) {
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
		raw_on = 0;
	}
}

/* SIGTERM, SIGHUP: the terminal back as it was, then die of the signal
 * (the connection closes with us: an attach detaches). */
static void on_fatal(int sig)
{
	restore_terminal(); /* tcsetattr is async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig);
}

/* SIGWINCH, SIGINT, SIGQUIT: for the loop. */
static void on_forward(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: the loop has signals to read already */
	}
	errno = saved;
}

static void set_handler(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static int raw_mode(void)
{
	static bool registered;
	struct termios tio;

	if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
		return -1;
	tio = saved_tio;
	cfmakeraw(&tio);
	raw_on = 1;
	if (!registered)
		atexit(restore_terminal);
	registered = true;
	return tcsetattr(STDIN_FILENO, TCSADRAIN, &tio);
}

void termsess_size(unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	*cols = 80;
	*rows = 24;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

/* The session as it runs. */
struct termsess {
	const struct termsess_opts *o;
	struct httpc_stream *st;
	struct strbuf out;      /* frames to send, from out_off */
	size_t out_off;
	struct ws_reader rd;
	bool stdin_on;          /* stdin is read and sent */
	bool closed;            /* the server's close frame came */
	bool eof;               /* the connection ended */
	bool more;              /* TLS may hold more than the socket shows */
	bool line_start;        /* escape: the next key starts a line */
	bool tilde;             /* escape: a '~' at a line's start is held back */
	bool detached;          /* the user typed ~.: our close frame is sent */
	uint64_t detach_deadline; /* mono_ms to stop waiting for the server's close */
	json_t *status;         /* owned: the status message, once it came */
	const char *error;      /* why the session broke, or NULL */
	char errmsg[1100];
};

static void send_pending(struct termsess *x)
{
	while (!x->eof && x->out_off < x->out.len) {
		size_t n = 0;
		struct errbuf eb = ERRBUF_INIT;
		int rc = httpc_stream_send(x->st, x->out.buf + x->out_off, x->out.len - x->out_off, &n, &eb);
		if (rc == HTTPC_STREAM_AGAIN)
			return;
		if (rc < 0) {
			x->eof = true;
			return;
		}
		x->out_off += n;
	}
	strbuf_reset(&x->out);
	x->out_off = 0;
}

static void send_json(struct termsess *x, unsigned ch, json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);

	ws_channel_append(&x->out, ch, text, strlen(text), true);
	free(text);
	json_decref(doc);
}

/* One whole message from the server. */
static void on_message(struct termsess *x)
{
	const char *msg = x->rd.msg;
	size_t len = x->rd.msg_len;

	switch (x->rd.opcode) {
	case WS_OP_PING:
		ws_frame_append(&x->out, WS_OP_PONG, msg, len, true);
		return;
	case WS_OP_CLOSE: {
		unsigned code;
		char reason[124];
		ws_close_parse(msg, len, &code, reason);
		if (!x->closed && !x->detached)
			ws_close_append(&x->out, code == 1005 ? WS_CLOSE_NORMAL : code, "", true);
		x->closed = true;
		if (code != WS_CLOSE_NORMAL && code != 1005 && reason[0] && !x->status) {
			snprintf(x->errmsg, sizeof(x->errmsg), "%s", reason);
			x->error = x->errmsg;
		}
		return;
	}
	case WS_OP_BINARY:
		break;
	default:
		return;
	}
	if (!len)
		return;
	switch ((unsigned char)msg[0]) {
	case WS_CH_STDOUT:
	case WS_CH_STDERR:
		/* blocking: a slow reader of ours slows the command down */
		if (write_all(msg[0] == WS_CH_STDOUT ? STDOUT_FILENO : STDERR_FILENO, msg + 1, len - 1) &&
		    msg[0] == WS_CH_STDOUT) {
			snprintf(x->errmsg, sizeof(x->errmsg), "cannot write the output: %s", strerror(errno));
			x->error = x->errmsg;
			x->eof = true;
		}
		return;
	case WS_CH_STATUS:
		json_decref(x->status);
		x->status = json_loadb(msg + 1, len - 1, 0, NULL);
		return;
	default:
		return;
	}
}

static void read_stream(struct termsess *x)
{
	char buf[65536];
	struct errbuf eb = ERRBUF_INIT;

	x->more = false;
	for (int rounds = 0; !x->eof && rounds < 64; rounds++) {
		size_t n = 0, used;
		int rc = httpc_stream_recv(x->st, buf, sizeof(buf), &n, &eb);
		if (rc == HTTPC_STREAM_AGAIN)
			return;
		if (rc) {
			x->eof = true;
			return;
		}
		for (size_t at = 0; at < n; at += used) {
			int r = ws_reader_feed(&x->rd, buf + at, n - at, &used, &eb);
			if (r < 0) {
				snprintf(x->errmsg, sizeof(x->errmsg), "the master broke the protocol: %.200s", eb.msg);
				x->error = x->errmsg;
				x->eof = true;
				return;
			}
			if (r == 1)
				on_message(x);
		}
	}
	x->more = true;
}

/* A signal the loop was told of. */
static void on_signal(struct termsess *x, int sig)
{
	if (sig == SIGWINCH) {
		unsigned cols, rows;
		termsess_size(&cols, &rows);
		send_json(x, WS_CH_RESIZE, json_pack("{s:i, s:i}", "cols", (int)cols, "rows", (int)rows));
	} else if (sig == SIGINT || sig == SIGQUIT) {
		send_json(x, WS_CH_SIGNAL, json_pack("{s:s}", "signal", sig == SIGINT ? "INT" : "QUIT"));
	}
}

static void detach(struct termsess *x)
{
	ws_close_append(&x->out, WS_CLOSE_NORMAL, "detached", true);
	x->detached = true;
	x->stdin_on = false;
	x->detach_deadline = mono_ms() + DETACH_WAIT_MS;
}

/* Keys typed: sent as stdin, but for the escape "~." at a line's start. */
static void on_keys(struct termsess *x, const char *buf, size_t n)
{
	struct strbuf keys = STRBUF_INIT;

	if (!x->o->escape) {
		ws_channel_append(&x->out, WS_CH_STDIN, buf, n, true);
		return;
	}
	for (size_t i = 0; i < n && !x->detached; i++) {
		char c = buf[i];
		if (x->tilde) {
			x->tilde = false;
			if (c == '.') {
				detach(x);
				break;
			}
			strbuf_addch(&keys, '~'); /* "~~" is one '~', "~x" both */
			if (c == '~') {
				x->line_start = false;
				continue;
			}
		} else if (x->line_start && c == '~') {
			x->tilde = true;
			continue;
		}
		strbuf_addch(&keys, c);
		x->line_start = c == '\r' || c == '\n';
	}
	if (keys.len)
		ws_channel_append(&x->out, WS_CH_STDIN, keys.buf, keys.len, true);
	strbuf_release(&keys);
}

/* Whether a read of stdin that gave n says a raw terminal hung up. */
static bool o_raw_hangup(const struct termsess *x, ssize_t n)
{
	return x->o->raw && (n == 0 || (errno != EINTR && errno != EAGAIN));
}

static void session_loop(struct termsess *x)
{
	while (!x->eof && !(x->closed && x->out_off == x->out.len)) {
		struct pollfd pf[3];
		int np = 0, is = -1, iin = -1, isig;
		int timeout = x->more ? 0 : -1;

		if (x->detached) {
			uint64_t now = mono_ms();
			if (now >= x->detach_deadline)
				break; /* the server did not answer our close: gone all the same */
			if (!x->more)
				timeout = (int)(x->detach_deadline - now);
		}
		isig = np;
		pf[np++] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
		is = np;
		pf[np++] = (struct pollfd){ .fd = x->st->fd, .events = (short)(POLLIN | (x->out.len > x->out_off ? POLLOUT : 0)) };
		if (x->stdin_on && x->out.len - x->out_off < OUT_HIGH && !x->closed) {
			iin = np;
			pf[np++] = (struct pollfd){ .fd = STDIN_FILENO, .events = POLLIN };
		}
		if (poll(pf, (nfds_t)np, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[isig].revents) {
			unsigned char sigs[16];
			ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));
			for (ssize_t i = 0; i < n; i++)
				on_signal(x, sigs[i]);
		}
		if (iin >= 0 && pf[iin].revents) {
			char buf[32768];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n > 0) {
				on_keys(x, buf, (size_t)n);
			} else if (o_raw_hangup(x, n)) {
				/* a raw terminal has no end of file (^D is a key):
				 * it hung up (closed), as a detach */
				detach(x);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				/* the end of stdin: an empty stdin message */
				ws_channel_append(&x->out, WS_CH_STDIN, "", 0, true);
				x->stdin_on = false;
			}
		}
		if (pf[is].revents || x->more)
			read_stream(x);
		send_pending(x);
	}
	send_pending(x);
}

/* The exit status from how the session ended. */
static int exit_status(struct termsess *x)
{
	const json_t *code = json_object_get(x->status, "exit_code");
	const json_t *sig = json_object_get(x->status, "signal");
	const char *msg = json_string_value(json_object_get(x->status, "message"));

	if (x->detached && !x->status)
		return TERMSESS_DETACHED;
	if (!x->status) {
		if (x->error)
			fprintf(stderr, "%s: the session was cut off: %s\n", x->o->who, x->error);
		else
			fprintf(stderr, "%s: the session ended: the master or the agent went away\n", x->o->who);
		return 1;
	}
	if (msg && *msg)
		fprintf(stderr, "%s: %s\n", x->o->who, msg);
	if (json_is_integer(code))
		return (int)(json_integer_value(code) & 0xff);
	if (json_is_integer(sig))
		return 128 + (int)(json_integer_value(sig) & 0x7f);
	return 1;
}

int termsess_run(struct httpc_stream *st, const struct termsess_opts *o, struct errbuf *eb)
{
	struct termsess x;
	int rc = -1;

	memset(&x, 0, sizeof(x));
	x.o = o;
	x.st = st;
	x.stdin_on = o->send_stdin;
	x.line_start = true;
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		error(eb, YERR(INTERNAL), "cannot make a pipe: %s", strerror(errno));
		return -1;
	}
	strbuf_init(&x.out, 0);
	ws_reader_init(&x.rd, READER_MAX, WS_MASK_FORBIDDEN);
	set_handler(SIGTERM, on_fatal);
	set_handler(SIGHUP, on_fatal);
	set_handler(SIGWINCH, on_forward);
	set_handler(SIGINT, on_forward);
	set_handler(SIGQUIT, on_forward);
	if (o->raw && raw_mode() < 0) {
		restore_terminal();
		error(eb, YERR(INTERNAL), "cannot put the terminal in raw mode: %s", strerror(errno));
		goto out;
	}
	session_loop(&x);
	restore_terminal();
	rc = exit_status(&x);
out:
	restore_terminal();
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGWINCH, SIG_DFL);
	ws_reader_release(&x.rd);
	strbuf_release(&x.out);
	json_decref(x.status);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	return rc;
}
