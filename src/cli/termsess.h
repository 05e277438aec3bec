/*
 * The client end of a yard.exec.v1 session (docs/protocol.md, "Sessions")
 * on the user's own stdin, stdout and terminal: what yard exec, yard
 * attach and yard shell share. Internal to src/cli/.
 *
 * The session's output goes to stdout and stderr as it comes (blocking
 * writes: a slow reader of ours slows the task down). With raw, stdin (a
 * terminal) is put in raw mode, every key going to the task's terminal,
 * ^C and ^\ too, and restored on every way out, also when SIGTERM or
 * SIGHUP stops us. The terminal's size goes as a resize message at every
 * SIGWINCH. Without raw, SIGINT and SIGQUIT go as signal messages. With
 * send_stdin, stdin is sent, and its end as an empty stdin message. With
 * escape (raw only), "~." typed at the start of a line (after Enter, or
 * first) detaches, as in ssh: a close frame, the task runs on; "~~"
 * sends one "~". A raw terminal that hangs up (it was closed: a read
 * gives its end) detaches the same way, never as an end of stdin (that
 * would be a ^D to the task).
 */
#ifndef YARD_CLI_TERMSESS_H
#define YARD_CLI_TERMSESS_H

#include <stdbool.h>

#include "base/error.h"
#include "common/httpc.h"

struct termsess_opts {
	const char *who;        /* "yard exec": what messages start with */
	bool send_stdin;
	bool raw;
	bool escape;
};

/* termsess_run's answer when the user detached. */
#define TERMSESS_DETACHED (-2)

/* termsess_size: the size of the terminal on stdin (80 x 24 when it is
 * none). */
void termsess_size(unsigned *cols, unsigned *rows);

/* termsess_run serves the session open on st (the caller's, closed by the
 * caller) until it ends. Returns the exit status it stands for: the
 * command's, 128+N when signal N killed it, 1 when the session was cut off
 * (the why printed on stderr) or ended without a status; TERMSESS_DETACHED
 * when the user detached (or the raw terminal hung up); -1 with eb when it could not start (a pipe, raw
 * mode). A status's message is printed on stderr. */
int termsess_run(struct httpc_stream *st, const struct termsess_opts *o, struct errbuf *eb);

#endif
