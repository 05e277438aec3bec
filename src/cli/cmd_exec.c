/*
 * yard exec ID [--task ROLE/INDEX] [-i] [-t] -- CMD ARGS: a command run in
 * a running task of a job, its output here, over an exec session
 * (docs/protocol.md, "Sessions"; the WebSocket client end, yard.exec.v1).
 *
 * -t asks for a terminal: stdin must be one; with -i it is put in raw mode
 * (every key goes to the task's terminal, ^C and ^\ too) and restored on
 * every way out, also when SIGTERM or SIGHUP stops us. Window size changes
 * (SIGWINCH) go as resize messages. Without a raw terminal, SIGINT and
 * SIGQUIT go as signal messages. -i sends stdin, and its end as an empty
 * stdin message.
 *
 * The exit status is the command's, 128+N when a signal N killed it, 1
 * when the session was cut off (the message says why) or ended without a
 * status, 2 for a usage error.
 */
#include "base/compat.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/wsframe.h"

#define READER_MAX (1 << 20)
/* Stop reading stdin while this much waits for the master. */
#define OUT_HIGH (256 * 1024)

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

/* SIGTERM, SIGHUP: the terminal back as it was, then die of the signal. */
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
	struct termios tio;

	if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
		return -1;
	tio = saved_tio;
	cfmakeraw(&tio);
	raw_on = 1;
	atexit(restore_terminal);
	return tcsetattr(STDIN_FILENO, TCSADRAIN, &tio);
}

static void term_size(unsigned *cols, unsigned *rows)
{
	struct winsize ws;

	*cols = 80;
	*rows = 24;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

/* -it and -ti as -i -t (options before "--" only). */
static char **split_flags(int argc, char **argv, int *out_argc)
{
	char **out = xcalloc((size_t)argc * 2 + 1, sizeof(*out));
	int n = 0;
	bool args = false;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			args = true;
		if (!args && i > 0 && a[0] == '-' && a[1] && a[1] != '-' && a[2] &&
		    strspn(a + 1, "it") == strlen(a + 1)) {
			for (const char *p = a + 1; *p; p++)
				out[n++] = *p == 'i' ? "-i" : "-t";
			continue;
		}
		out[n++] = argv[i];
	}
	*out_argc = n;
	return out;
}

/* The session as it runs. */
struct exec_cli {
	struct httpc_stream st;
	struct strbuf out;      /* frames to send, from out_off */
	size_t out_off;
	struct ws_reader rd;
	bool stdin_on;          /* stdin is read and sent */
	bool closed;            /* the server's close frame came */
	bool eof;               /* the connection ended */
	bool more;              /* TLS may hold more than the socket shows */
	json_t *status;         /* owned: the status message, once it came */
	const char *error;      /* why the session broke, or NULL */
	char errmsg[1100];
};

static void send_pending(struct exec_cli *x)
{
	while (!x->eof && x->out_off < x->out.len) {
		size_t n = 0;
		struct errbuf eb = ERRBUF_INIT;
		int rc = httpc_stream_send(&x->st, x->out.buf + x->out_off, x->out.len - x->out_off, &n, &eb);
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

static void send_json(struct exec_cli *x, unsigned ch, json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);

	ws_channel_append(&x->out, ch, text, strlen(text), true);
	free(text);
	json_decref(doc);
}

/* One whole message from the server. */
static void on_message(struct exec_cli *x)
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
		if (!x->closed)
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

static void read_stream(struct exec_cli *x)
{
	char buf[65536];
	struct errbuf eb = ERRBUF_INIT;

	x->more = false;
	for (int rounds = 0; !x->eof && rounds < 64; rounds++) {
		size_t n = 0, used;
		int rc = httpc_stream_recv(&x->st, buf, sizeof(buf), &n, &eb);
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
static void on_signal(struct exec_cli *x, int sig)
{
	if (sig == SIGWINCH) {
		unsigned cols, rows;
		term_size(&cols, &rows);
		send_json(x, WS_CH_RESIZE, json_pack("{s:i, s:i}", "cols", (int)cols, "rows", (int)rows));
	} else if (sig == SIGINT || sig == SIGQUIT) {
		send_json(x, WS_CH_SIGNAL, json_pack("{s:s}", "signal", sig == SIGINT ? "INT" : "QUIT"));
	}
}

static void session_loop(struct exec_cli *x)
{
	while (!x->eof && !(x->closed && x->out_off == x->out.len)) {
		struct pollfd pf[3];
		int np = 0, is = -1, iin = -1, isig;
		int timeout = x->more ? 0 : -1;

		isig = np;
		pf[np++] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
		is = np;
		pf[np++] = (struct pollfd){ .fd = x->st.fd, .events = (short)(POLLIN | (x->out.len > x->out_off ? POLLOUT : 0)) };
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
				ws_channel_append(&x->out, WS_CH_STDIN, buf, (size_t)n, true);
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
static int exit_status(struct cli_ctx *ctx, struct exec_cli *x)
{
	const json_t *code = json_object_get(x->status, "exit_code");
	const json_t *sig = json_object_get(x->status, "signal");
	const char *msg = json_string_value(json_object_get(x->status, "message"));

	if (!x->status) {
		if (x->error)
			fprintf(stderr, "yard exec: the session was cut off: %s\n", x->error);
		else
			fprintf(stderr, "yard exec: the session ended: the master or the agent went away\n");
		return EXIT_FAIL;
	}
	if (msg && *msg)
		fprintf(stderr, "yard exec: %s\n", msg);
	if (json_is_integer(code))
		return (int)(json_integer_value(code) & 0xff);
	if (json_is_integer(sig))
		return 128 + (int)(json_integer_value(sig) & 0x7f);
	return EXIT_FAIL;
}

int cmd_exec(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL;
	int interactive = 0, tty = 0;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX",
		  "the task to run in (default: the job's first task)" },
		{ "interactive", 'i', CLI_OPT_FLAG, &interactive, NULL, "send stdin to the command" },
		{ "tty", 't', CLI_OPT_FLAG, &tty, NULL,
		  "run the command on a terminal (stdin must be one; with -i it is put in raw mode)" },
	};
	struct exec_cli x;
	struct errbuf eb = ERRBUF_INIT;
	struct client_exec_req req = { 0 };
	uint64_t id;
	int npos, rc, nargc;
	char **nargv = split_flags(argc, argv, &nargc);

	memset(&x, 0, sizeof(x));
	rc = cli_parse(ctx, "exec ID [--task ROLE/INDEX] [-i] [-t] -- CMD [ARG...]", opts, ARRAY_SIZE(opts),
		       nargc, nargv, &npos);
	if (rc >= 0)
		goto out;
	if (npos < 2) {
		rc = cli_usage_error(ctx, "expected a job id and a command (yard exec ID -- CMD ARGS)");
		goto out;
	}
	if (parse_u64_str(nargv[1], &id) < 0 || !id) {
		rc = cli_usage_error(ctx, "'%s' is not a job id", nargv[1]);
		goto out;
	}
	if (tty && !isatty(STDIN_FILENO)) {
		rc = cli_usage_error(ctx, "-t needs a terminal on stdin (leave -t out to run without one)");
		goto out;
	}
	nargv[npos + 1] = NULL; /* the command ends with the positional arguments */
	req.task = task;
	req.argv = nargv + 2;
	req.tty = tty;
	req.stdin_open = interactive;
	if (tty)
		term_size(&req.cols, &req.rows);
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		error(&eb, YERR(INTERNAL), "cannot make a pipe: %s", strerror(errno));
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	if (client_exec_open(&ctx->client, id, &req, &x.st, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	strbuf_init(&x.out, 0);
	ws_reader_init(&x.rd, READER_MAX, WS_MASK_FORBIDDEN);
	x.stdin_on = interactive;
	set_handler(SIGTERM, on_fatal);
	set_handler(SIGHUP, on_fatal);
	set_handler(SIGWINCH, on_forward);
	set_handler(SIGINT, on_forward);
	set_handler(SIGQUIT, on_forward);
	if (tty && interactive && raw_mode() < 0) {
		restore_terminal();
		error(&eb, YERR(INTERNAL), "cannot put the terminal in raw mode: %s", strerror(errno));
		rc = cli_fail(ctx, &eb);
		goto out_session;
	}
	session_loop(&x);
	restore_terminal();
	rc = exit_status(ctx, &x);
out_session:
	restore_terminal();
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	ws_reader_release(&x.rd);
	strbuf_release(&x.out);
	json_decref(x.status);
	httpc_stream_close(&x.st);
out:
	if (sig_pipe[0] >= 0) {
		close(sig_pipe[0]);
		close(sig_pipe[1]);
		sig_pipe[0] = sig_pipe[1] = -1;
	}
	free(nargv);
	return rc;
}
