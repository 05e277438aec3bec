/* The terminal of an interactive task, held by its shim (termshare.h). */
#include "base/compat.h"
#include "agent/termshare.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

/* Stop reading attachers while this much typed input waits for the terminal. */
#define IN_HIGH (64 * 1024)
/* The most attachers at once. */
#define ATTACHERS_MAX 64

struct termshare_attacher {
	int fd;
	struct strbuf q;        /* messages not sent yet: a u32 length (host order), then the message */
	size_t q_off;
	uint64_t full_since;    /* mono_ms its queue went over TERMSHARE_QUEUE_HIGH, 0: not full */
	bool gone;              /* its connection ended or broke: freed at the next turn */
	struct termshare_attacher *next;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int termshare_addr(const char *dir, struct sockaddr_un *sa, int *dirfd, struct errbuf *eb)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	*dirfd = -1;
	if (strlen(dir) + 1 + strlen(TERMSHARE_SOCK) < sizeof(sa->sun_path)) {
		snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, TERMSHARE_SOCK);
		return 0;
	}
	/* a long work dir: the same file through a short path */
	*dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0)
		return error(eb, YERR(IO), "cannot open '%s': %s", dir, strerror(errno));
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd, TERMSHARE_SOCK);
	return 0;
}

int termshare_open_pty(int *ptm, int *pts, unsigned cols, unsigned rows, const struct spawn_opts *user,
		       struct errbuf *eb)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	char name[128];

	*pts = -1;
	*ptm = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*ptm < 0)
		return error(eb, YERR(INTERNAL), "cannot open a pseudo-terminal: %s", strerror(errno));
	if (grantpt(*ptm) || unlockpt(*ptm) || ptsname_r(*ptm, name, sizeof(name)) ||
	    (*pts = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int ret = error(eb, YERR(INTERNAL), "cannot open a pseudo-terminal's slave: %s", strerror(errno));
		close_fd(ptm);
		return ret;
	}
	if (user && (user->flags & SPAWN_SETUID) && fchown(*pts, user->uid, user->gid) < 0) {
		int ret = error(eb, YERR(INTERNAL), "cannot give '%s' to uid %u: %s", name,
				(unsigned)user->uid, strerror(errno));
		close_fd(ptm);
		close_fd(pts);
		return ret;
	}
	ioctl(*ptm, TIOCSWINSZ, &ws);
	return 0;
}

int termshare_open(struct termshare *t, const char *dir, int log_fd, const struct spawn_opts *user,
		   int *pts, struct errbuf *eb)
{
	struct sockaddr_un sa;
	int dirfd = -1, ret;
	mode_t old;

	memset(t, 0, sizeof(*t));
	t->ptm = t->listen_fd = t->sig_fd = -1;
	t->log_fd = log_fd;
	strbuf_init(&t->in, 0);
	*pts = -1;
	if ((ret = termshare_open_pty(&t->ptm, pts, 80, 24, user, eb)))
		return ret;
	fcntl(t->ptm, F_SETFL, fcntl(t->ptm, F_GETFL) | O_NONBLOCK);
	if ((ret = termshare_addr(dir, &sa, &dirfd, eb)))
		goto fail;
	t->sock_path = xasprintf("%s/%s", dir, TERMSHARE_SOCK);
	unlink(t->sock_path); /* an earlier shim's */
	t->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	old = umask(0177); /* 0600 from the start: only the shim's user connects */
	ret = t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	      listen(t->listen_fd, 16) < 0;
	umask(old);
	close_fd(&dirfd);
	if (ret) {
		ret = error(eb, YERR(IO), "cannot listen on '%s': %s", t->sock_path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	close_fd(pts);
	return ret;
}

/* ---- attachers ---- */

/* Queues one message of type ty for a (whole, or not at all: it is dropped). */
static void queue_msg(struct termshare_attacher *a, char ty, const void *data, size_t len)
{
	uint32_t n = (uint32_t)len + 1;

	if (a->gone)
		return;
	strbuf_add(&a->q, &n, sizeof(n));
	strbuf_add(&a->q, &ty, 1);
	strbuf_add(&a->q, data, len);
}

static size_t queued(const struct termshare_attacher *a)
{
	return a->q.len - a->q_off;
}

/* Sends what a's socket takes now. */
static void flush_attacher(struct termshare_attacher *a)
{
	while (!a->gone && queued(a)) {
		uint32_t n;
		ssize_t w;
		memcpy(&n, a->q.buf + a->q_off, sizeof(n));
		while ((w = send(a->fd, a->q.buf + a->q_off + sizeof(n), n, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 &&
		       errno == EINTR)
			;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w < 0) {
			a->gone = true;
			break;
		}
		a->q_off += sizeof(n) + n;
	}
	if (a->q_off == a->q.len) {
		strbuf_reset(&a->q);
		a->q_off = 0;
	} else if (a->q_off > a->q.len / 2) {
		memmove(a->q.buf, a->q.buf + a->q_off, a->q.len - a->q_off);
		strbuf_setlen(&a->q, a->q.len - a->q_off);
		a->q_off = 0;
	}
}

/* Queues the replay ring for a new attacher. */
static void queue_replay(struct termshare *t, struct termshare_attacher *a)
{
	size_t done = 0;

	while (done < t->replay_len) {
		size_t at = (t->replay_start + done) % TERMSHARE_REPLAY;
		size_t n = t->replay_len - done;
		if (n > TERMSHARE_REPLAY - at)
			n = TERMSHARE_REPLAY - at; /* up to the ring's end, then from its start */
		queue_msg(a, TERMSHARE_OUTPUT, t->replay + at, n);
		done += n;
	}
}

static void accept_attachers(struct termshare *t)
{
	for (;;) {
		struct termshare_attacher *a;
		size_t n = 0;
		int fd = accept4(t->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		for (a = t->att; a; a = a->next)
			n++;
		if (n >= ATTACHERS_MAX) {
			close(fd);
			continue;
		}
		a = xcalloc(1, sizeof(*a));
		a->fd = fd;
		strbuf_init(&a->q, 0);
		queue_replay(t, a);
		a->next = t->att;
		t->att = a;
		flush_attacher(a);
	}
}

/* One message from attacher a. */
static void attacher_msg(struct termshare *t, struct termshare_attacher *a, const unsigned char *m, size_t n)
{
	switch (m[0]) {
	case TERMSHARE_INPUT:
		strbuf_add(&t->in, m + 1, n - 1);
		return;
	case TERMSHARE_RESIZE: {
		unsigned cols = (unsigned)m[1] << 8 | m[2], rows = (unsigned)m[3] << 8 | m[4];
		struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
		if (n != 5 || !cols || !rows || cols > TERMSHARE_DIM_MAX || rows > TERMSHARE_DIM_MAX)
			break;
		if (t->ptm >= 0)
			ioctl(t->ptm, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH */
		return;
	}
	case TERMSHARE_SIGNAL:
		if (n != 2 || (m[1] != SIGINT && m[1] != SIGQUIT && m[1] != SIGTERM && m[1] != SIGHUP &&
			       m[1] != SIGKILL))
			break;
		termshare_signal(t, 0, m[1]);
		return;
	default:
		break;
	}
	a->gone = true; /* not the protocol */
}

/* Reads what attacher a sent, while the terminal takes input. */
static void read_attacher(struct termshare *t, struct termshare_attacher *a)
{
	unsigned char buf[TERMSHARE_MSG_MAX + 1];

	while (!a->gone && t->in.len < IN_HIGH) {
		ssize_t n = recv(a->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0 || (size_t)n > TERMSHARE_MSG_MAX) {
			a->gone = true; /* closed, broken, or a message too large */
			return;
		}
		attacher_msg(t, a, buf, (size_t)n);
	}
}

static void drop_gone(struct termshare *t)
{
	struct termshare_attacher **pp = &t->att;

	while (*pp) {
		struct termshare_attacher *a = *pp;
		if (!a->gone) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		close(a->fd);
		strbuf_release(&a->q);
		free(a);
	}
}

/* ---- the terminal ---- */

static void replay_add(struct termshare *t, const char *buf, size_t n)
{
	if (n >= TERMSHARE_REPLAY) {
		memcpy(t->replay, buf + n - TERMSHARE_REPLAY, TERMSHARE_REPLAY);
		t->replay_start = 0;
		t->replay_len = TERMSHARE_REPLAY;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		t->replay[(t->replay_start + t->replay_len) % TERMSHARE_REPLAY] = buf[i];
		if (t->replay_len < TERMSHARE_REPLAY)
			t->replay_len++;
		else
			t->replay_start = (t->replay_start + 1) % TERMSHARE_REPLAY;
	}
}

/* Reads the terminal once: to the log, the ring and every attacher. 1
 * when bytes came, 0 when none are there now, -1 at its end. */
static int read_pty(struct termshare *t)
{
	char buf[TERMSHARE_DATA_MAX];
	ssize_t n;

	while ((n = read(t->ptm, buf, sizeof(buf))) < 0 && errno == EINTR)
		;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0) {
		t->pty_eof = true; /* EIO: no slave is open any more */
		return -1;
	}
	if (t->log_fd >= 0 && write_all(t->log_fd, buf, (size_t)n) < 0)
		fprintf(stderr, "yard shim: cannot write the task's log: %s\n", strerror(errno));
	replay_add(t, buf, (size_t)n);
	for (struct termshare_attacher *a = t->att; a; a = a->next)
		queue_msg(a, TERMSHARE_OUTPUT, buf, (size_t)n);
	return 1;
}

static void write_input(struct termshare *t)
{
	ssize_t n;

	if (!t->in.len)
		return;
	while ((n = write(t->ptm, t->in.buf, t->in.len)) < 0 && errno == EINTR)
		;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n < 0) {
		strbuf_reset(&t->in); /* the terminal takes none any more */
		return;
	}
	memmove(t->in.buf, t->in.buf + n, t->in.len - (size_t)n);
	strbuf_setlen(&t->in, t->in.len - (size_t)n);
}

/* Whether some attacher holds too much: the terminal is not read. Drops
 * those that held too much for too long. */
static bool attachers_full(struct termshare *t, uint64_t now)
{
	bool full = false;

	for (struct termshare_attacher *a = t->att; a; a = a->next) {
		if (a->gone || queued(a) <= TERMSHARE_QUEUE_HIGH) {
			a->full_since = 0;
			continue;
		}
		if (!a->full_since)
			a->full_since = now;
		if (now - a->full_since >= TERMSHARE_STALL_MS) {
			fprintf(stderr, "yard shim: an attacher took nothing for %d s: dropped\n",
				TERMSHARE_STALL_MS / 1000);
			a->gone = true;
			continue;
		}
		full = true;
	}
	return full;
}

int termshare_wait(struct termshare *t, const sigset_t *set, int timeout_ms, siginfo_t *info)
{
	uint64_t deadline = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	if (t->sig_fd < 0)
		t->sig_fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (t->sig_fd < 0) /* cannot happen; the shim's loop still turns */
		return sigtimedwait(set, info, &(struct timespec){ 0, (long)timeout_ms * 1000000L });
	for (;;) {
		struct pollfd pf[2 + ATTACHERS_MAX + 1];
		struct termshare_attacher *who[ATTACHERS_MAX + 1];
		int np = 0, ipty = -1, ilisten = -1, first_att;
		uint64_t now = mono_ms();
		bool full = attachers_full(t, now);
		struct signalfd_siginfo si;

		drop_gone(t);
		pf[np++] = (struct pollfd){ .fd = t->sig_fd, .events = POLLIN };
		if (t->ptm >= 0 && !t->pty_eof && (!full || t->in.len)) {
			ipty = np;
			pf[np++] = (struct pollfd){ .fd = t->ptm,
						    .events = (short)((full ? 0 : POLLIN) | (t->in.len ? POLLOUT : 0)) };
		}
		if (t->listen_fd >= 0) {
			ilisten = np;
			pf[np++] = (struct pollfd){ .fd = t->listen_fd, .events = POLLIN };
		}
		first_att = np;
		for (struct termshare_attacher *a = t->att; a && np - first_att < ATTACHERS_MAX; a = a->next) {
			short ev = (short)((t->in.len < IN_HIGH ? POLLIN : 0) | (queued(a) ? POLLOUT : 0));
			if (!ev)
				continue; /* (its hang-up would wake the poll while it cannot be read) */
			who[np - first_att] = a;
			pf[np++] = (struct pollfd){ .fd = a->fd, .events = ev };
		}
		if (poll(pf, (nfds_t)np, now < deadline ? (int)(deadline - now) : 0) < 0 && errno != EINTR)
			break;
		if (pf[0].revents && read(t->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			memset(info, 0, sizeof(*info));
			info->si_signo = (int)si.ssi_signo;
			info->si_pid = (pid_t)si.ssi_pid;
			return (int)si.ssi_signo;
		}
		if (ipty >= 0 && (pf[ipty].revents & POLLOUT))
			write_input(t);
		if (ipty >= 0 && (pf[ipty].revents & (POLLIN | POLLHUP | POLLERR)) && !full)
			for (int i = 0; i < 8 && read_pty(t) > 0; i++)
				;
		if (ilisten >= 0 && pf[ilisten].revents)
			accept_attachers(t);
		for (int i = first_att; i < np; i++) {
			struct termshare_attacher *a = who[i - first_att];
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
				read_attacher(t, a);
		}
		write_input(t);
		for (struct termshare_attacher *a = t->att; a; a = a->next)
			flush_attacher(a);
		if (mono_ms() >= deadline)
			break;
	}
	errno = EAGAIN;
	return -1;
}

void termshare_signal(struct termshare *t, pid_t pgid, int sig)
{
	pid_t fg = t->ptm >= 0 ? tcgetpgrp(t->ptm) : -1;

	if (fg > 0 && fg != pgid)
		kill(-fg, sig);
	if (pgid > 0)
		kill(-pgid, sig);
}

void termshare_finish(struct termshare *t, const char *exit_json, unsigned grace_ms)
{
	uint64_t deadline = mono_ms() + grace_ms;

	/* what the terminal still holds (its writers are gone: no waiting) */
	while (t->ptm >= 0 && !t->pty_eof && read_pty(t) > 0)
		;
	close_fd(&t->listen_fd);
	for (struct termshare_attacher *a = t->att; a; a = a->next)
		queue_msg(a, TERMSHARE_EXIT, exit_json, strlen(exit_json));
	for (;;) {
		struct pollfd pf[ATTACHERS_MAX];
		int np = 0;
		uint64_t now = mono_ms();
		for (struct termshare_attacher *a = t->att; a; a = a->next) {
			flush_attacher(a);
			if (!a->gone && queued(a) && np < ATTACHERS_MAX)
				pf[np++] = (struct pollfd){ .fd = a->fd, .events = POLLOUT };
		}
		if (!np || now >= deadline)
			break;
		poll(pf, (nfds_t)np, (int)(deadline - now));
	}
	for (struct termshare_attacher *a = t->att; a; a = a->next)
		a->gone = true;
	drop_gone(t);
}

void termshare_close(struct termshare *t)
{
	for (struct termshare_attacher *a = t->att; a; a = a->next)
		a->gone = true;
	drop_gone(t);
	close_fd(&t->ptm);
	close_fd(&t->listen_fd);
	close_fd(&t->log_fd);
	close_fd(&t->sig_fd);
	if (t->sock_path)
		unlink(t->sock_path);
	free(t->sock_path);
	t->sock_path = NULL;
	strbuf_release(&t->in);
}
