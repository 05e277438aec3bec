/*
 * The terminal of an interactive task (docs/architecture.md, "Interactive
 * jobs"), held by its shim, which outlives the agent: a pseudo-terminal
 * whose slave is the task's controlling terminal and stdio, and whose
 * master side the shim keeps. Everything the terminal shows is appended to
 * the task's log (TASKDIR/stdout, shipped as any task's) and the last
 * TERMSHARE_REPLAY bytes are kept to replay to whoever attaches. Attachers
 * (the agent, one connection per attach session) connect to
 * TASKDIR/attach.sock, a unix socket of the shim's user only (0600);
 * several may share the terminal: each gets the output, each may type,
 * resize (the last size wins) and signal.
 *
 * The socket is SOCK_SEQPACKET: one message per send, whole or not at all,
 * its first byte its type:
 *   'o'  shim -> attacher: terminal output (the replay first)
 *   'x'  shim -> attacher: the task ended: JSON {"exit_code": N|null,
 *        "signal": N|null, "message": "..."} (task_exit_json's members);
 *        the last message, then the shim closes the connection
 *   'i'  attacher -> shim: bytes typed
 *   'r'  attacher -> shim: the terminal's size, u16 cols then u16 rows, big
 *        endian, each 1..10000 (TIOCSWINSZ: SIGWINCH in the task)
 *   's'  attacher -> shim: one byte, a signal number of SIGINT, SIGQUIT,
 *        SIGTERM, SIGHUP or SIGKILL, for the terminal's foreground process
 *        group
 * Anything else, or a message out of these shapes, ends that attacher's
 * connection. A message is at most TERMSHARE_MSG_MAX bytes.
 *
 * Backpressure: each attacher has a queue of what it has not taken yet;
 * while one holds more than TERMSHARE_QUEUE_HIGH the shim stops reading the
 * terminal (the task blocks on its writes, as a slow reader of an exec
 * slows the command down), and an attacher whose queue stays that full for
 * TERMSHARE_STALL_MS is dropped (its session ends; attaching again replays
 * the terminal), so that one stuck client never holds the task for ever.
 *
 * Part of the shim's library: libc, jansson and yard's base only.
 */
#ifndef YARD_AGENT_TERMSHARE_H
#define YARD_AGENT_TERMSHARE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/un.h>

#include "base/error.h"
#include "base/spawn.h"
#include "base/strbuf.h"

#define TERMSHARE_SOCK "attach.sock"
/* The most of one message: its type and 16 KiB. */
#define TERMSHARE_DATA_MAX (16 * 1024)
#define TERMSHARE_MSG_MAX (TERMSHARE_DATA_MAX + 1)
/* The output kept to replay to an attacher. */
#define TERMSHARE_REPLAY (16 * 1024)
#define TERMSHARE_QUEUE_HIGH (256 * 1024)
#define TERMSHARE_STALL_MS 30000
/* The largest terminal (as sessions take it). */
#define TERMSHARE_DIM_MAX 10000

enum termshare_msg {
	TERMSHARE_OUTPUT = 'o',
	TERMSHARE_EXIT = 'x',
	TERMSHARE_INPUT = 'i',
	TERMSHARE_RESIZE = 'r',
	TERMSHARE_SIGNAL = 's',
};

/* termshare_addr: the address of DIR's attach.sock. A path too long for
 * sun_path goes through /proc/self/fd/N/ of an O_PATH descriptor of dir,
 * *dirfd (OUT; -1 when not needed, else the caller closes it once the
 * address was used). */
int termshare_addr(const char *dir, struct sockaddr_un *sa, int *dirfd, struct errbuf *eb);

/* termshare_open_pty opens a pseudo-terminal of cols x rows: *ptm its
 * master side, *pts its slave (both close-on-exec, not the caller's
 * controlling terminal), the slave given to user's uid and gid when user
 * has SPAWN_SETUID. */
int termshare_open_pty(int *ptm, int *pts, unsigned cols, unsigned rows, const struct spawn_opts *user,
		       struct errbuf *eb);

struct termshare_attacher;

struct termshare {
	int ptm;                /* the terminal's master side, -1 once closed */
	int listen_fd;          /* TASKDIR/attach.sock, -1: none */
	char *sock_path;        /* owned: where it is bound (unlinked by termshare_close) */
	int log_fd;             /* owned: TASKDIR/stdout (appended), -1: none */
	int sig_fd;             /* signalfd of what termshare_wait waits for, -1: none yet */
	char replay[TERMSHARE_REPLAY]; /* a ring of the last output */
	size_t replay_start, replay_len;
	struct strbuf in;       /* typed bytes the terminal has not taken yet */
	struct termshare_attacher *att; /* owned list */
	bool pty_eof;           /* the terminal's last slave closed (EIO) */
};

/* termshare_open makes the terminal of task dir (80 x 24): t's pty, its
 * listening socket, and log_fd (taken: closed by termshare_close even on
 * error); *pts (OUT) is the slave for the task's stdio, the caller's to
 * close once the task holds it. Released by termshare_close, also on
 * error. */
int termshare_open(struct termshare *t, const char *dir, int log_fd, const struct spawn_opts *user,
		   int *pts, struct errbuf *eb);

/* termshare_wait serves the terminal until one of set's signals comes (it
 * must be blocked) or timeout_ms pass: like sigtimedwait, the signal's
 * number with *info filled, or -1 (errno EAGAIN) at the timeout. */
int termshare_wait(struct termshare *t, const sigset_t *set, int timeout_ms, siginfo_t *info);

/* termshare_signal sends sig to the terminal's foreground process group
 * (when it has one other than pgid) and to process group pgid. */
void termshare_signal(struct termshare *t, pid_t pgid, int sig);

/* termshare_finish: the task has ended (how: exit_json, a JSON object,
 * borrowed): what the terminal still holds goes to the log and the
 * attachers, each attacher gets the exit message and has up to grace_ms
 * to take what is queued for it, then every connection closes and no
 * more are taken. */
void termshare_finish(struct termshare *t, const char *exit_json, unsigned grace_ms);

/* termshare_close closes everything and unlinks the socket. */
void termshare_close(struct termshare *t);

#endif
