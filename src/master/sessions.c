/* Sessions: the registry and the relay (sessions.h). */
#include "base/compat.h"
#include "master/sessions.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/xalloc.h"
#include "master/http.h"
#include "master/interactive.h"

/* The most plaintext of one TLS record: what a TLS leg reads at once. */
#define TLS_RECORD_MAX 16384

/* How the master ends a session of a kind by itself (the agent is gone,
 * the node was lost, ...): what it sends the client before it closes. */
enum end_style {
	END_STATUS, /* a yard.exec.v1 status message and a close frame */
	END_CLOSE,  /* a close frame (yard.port.v1) */
	END_NONE,   /* nothing: the connection closes (raw bytes: http, ws) */
};

/* The table of kinds: what differs between them on the master. */
static const struct session_kind_ops {
	const char *name;
	/* the agent leg carries the client's WebSocket frames: their
	 * boundaries are tracked, and a close frame from the agent is the end */
	bool frames;
	enum end_style end;
} kinds[] = {
	[SESSION_EXEC] = { "exec", true, END_STATUS },
	[SESSION_ATTACH] = { "attach", true, END_STATUS },
	[SESSION_PORT] = { "port", true, END_CLOSE },
	[SESSION_HTTP] = { "http", false, END_NONE },
	[SESSION_WS] = { "ws", false, END_NONE },
};
static_assert(ARRAY_SIZE(kinds) == SESSION_KIND__COUNT, "kinds must mirror enum session_kind");

const char *session_kind_name(enum session_kind k)
{
	return (unsigned)k < SESSION_KIND__COUNT ? kinds[k].name : "?";
}

static void session_step(struct session *s);
static void session_end(struct session *s, const char *why);

/* ---- the registry ---- */

/* The session of id, also one being ended (for its legs' upgrades). */
static struct session *find_any(struct master *m, const char *id)
{
	for (size_t i = 0; i < m->nsessions; i++)
		if (!strcmp(m->sessions[i]->id, id))
			return m->sessions[i];
	return NULL;
}

struct session *sessions_find(struct master *m, const char *id)
{
	struct session *s = find_any(m, id);

	return s && !s->ending ? s : NULL;
}

size_t sessions_count(const struct master *m)
{
	return m->nsessions;
}

static void session_free_now(struct session *s)
{
	for (size_t i = 0; s->spec.argv && s->spec.argv[i]; i++)
		free(s->spec.argv[i]);
	free(s->spec.argv);
	free(s->node);
	free(s->task_name);
	free(s->up.data);
	free(s->down.data);
	strbuf_release(&s->tail);
	free(s);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct session *s = h->data;

	if (h->type == UV_POLL)
		s = ((struct session_leg *)h->data)->s;
	if (--s->closing == 0)
		session_free_now(s);
}

/* Takes s out of the registry and frees it once its handles are closed
 * (both legs must be closed or never up). */
static void session_free(struct session *s)
{
	struct master *m = s->m;

	if (s->client_ops) {
		const struct session_client_ops *ops = s->client_ops;
		s->client_ops = NULL;
		ops->gone(s, s->client_arg);
	}

	for (size_t i = 0; i < m->nsessions; i++)
		if (m->sessions[i] == s) {
			m->sessions[i] = m->sessions[--m->nsessions];
			break;
		}
	interactive_session_closed(m, s->job_id);
	uv_close((uv_handle_t *)&s->timer, on_handle_closed); /* its count is the one it was made with */
}

static void on_timer(uv_timer_t *t);

int sessions_create(struct master *m, const struct session_spec *spec, const struct job *j,
		    const struct task *t, struct session **out, struct errbuf *eb)
{
	struct session *s;
	struct node *n = t->node ? core_node(m, t->node) : NULL;
	size_t argc = 0;

	*out = NULL;
	if (!n)
		return error(eb, YERR(CONFLICT), "task %s/%u of job %" PRIu64 " is on no node", t->role,
			     t->index, j->id);
	if (m->nsessions >= SESSIONS_MAX)
		return error(eb, YERR(UNAVAILABLE), "the master holds %d sessions, its most; try again "
			     "once one has ended", SESSIONS_MAX);
	s = xcalloc(1, sizeof(*s));
	do
		random_hex(s->id, 8);
	while (find_any(m, s->id));
	s->m = m;
	s->spec = *spec;
	while (spec->argv && spec->argv[argc])
		argc++;
	s->spec.argv = xcalloc(argc + 1, sizeof(*s->spec.argv));
	for (size_t i = 0; i < argc; i++)
		s->spec.argv[i] = xstrdup(spec->argv[i]);
	s->job_id = j->id;
	s->task_id = t->id;
	s->node = xstrdup(t->node);
	s->task_name = xasprintf("%s/%u", t->role, t->index);
	s->client.s = s->agent.s = s;
	s->client.fd = s->agent.fd = -1;
	s->up.data = xmalloc(SESSION_BUF);
	s->down.data = xmalloc(SESSION_BUF);
	strbuf_init(&s->tail, 0);
	s->listed = true;
	s->closing = 1; /* the timer's, closed last (session_free) */
	uv_timer_init(&m->loop, &s->timer);
	s->timer.data = s;
	uv_timer_start(&s->timer, on_timer, SESSION_DIAL_MS, 0);
	ALLOC_GROW(m->sessions, m->nsessions + 1, m->asessions);
	m->sessions[m->nsessions++] = s;
	/* an interactive job counts its sessions (its idle timeout) */
	interactive_session_opened(m, j->id);
	/* its agent learns of it now: a held work poll answers */
	core_node_bump(m, n);
	*out = s;
	return 0;
}

json_t *sessions_work_json(struct master *m, const struct node *n)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < m->nsessions; i++) {
		const struct session *s = m->sessions[i];
		json_t *argv = json_array();
		if (!s->listed || s->ending || strcmp(s->node, n->name)) {
			json_decref(argv);
			continue;
		}
		for (size_t a = 0; s->spec.argv[a]; a++)
			json_array_append_new(argv, json_string(s->spec.argv[a]));
		json_array_append_new(arr, json_pack("{s:s, s:I, s:s, s:o, s:b, s:b, s:i, s:i, s:i}",
						     "id", s->id, "task", (json_int_t)s->task_id,
						     "kind", session_kind_name(s->spec.kind), "argv", argv,
						     "tty", s->spec.tty, "stdin", s->spec.stdin_open,
						     "cols", (int)s->spec.cols, "rows", (int)s->spec.rows,
						     "port", (int)s->spec.port));
	}
	return arr;
}

/* ---- the relay ---- */

static size_t buf_room(struct session_buf *b)
{
	/* a TLS leg reads whole records (TLS_RECORD_MAX): room at the end */
	if (b->start && SESSION_BUF - b->start - b->len < TLS_RECORD_MAX) {
		memmove(b->data, b->data + b->start, b->len);
		b->start = 0;
	}
	return SESSION_BUF - b->start - b->len;
}

static void buf_take(struct session_buf *b, size_t n)
{
	b->start += n;
	b->len -= n;
	if (!b->len)
		b->start = 0;
}

/*
 * A leg's bytes: recv and send on the socket MHD handed over, or, over
 * TLS, on MHD's own TLS session. libmicrohttpd 0.9.75 (Debian 12's)
 * forwards an upgraded TLS connection through a socketpair with what is
 * left of the connection's memory pool, and its reply head has taken all
 * of it: an 8-byte emergency buffer, 4 bytes a turn of its loop, the loop
 * spinning (libmicrohttpd 1.0 frees the reply's buffer first). So the
 * master reads and writes the connection's GnuTLS session itself, on the
 * connection's TCP socket, and
 * keeps MHD from reading it: the session's pull function lets bytes
 * through only while the master reads (tls_reading), so MHD's reads find
 * nothing (EAGAIN) and its socketpair stays empty; and the master reads a
 * whole record each time (TLS_RECORD_MAX), so GnuTLS never holds
 * decrypted bytes that MHD's next read could take. MHD never has anything
 * to send. A leg handed back to MHD gets the plain pull function again.
 *
 * recv and send: bytes moved (> 0), 0 at the end (recv), LEG_AGAIN when
 * nothing can move now, LEG_BROKEN when the connection failed.
 */
#define LEG_AGAIN (-1)
#define LEG_BROKEN (-2)

static bool tls_reading; /* the master reads a session now (one thread) */

static ssize_t tls_pull_gated(gnutls_transport_ptr_t fd, void *buf, size_t len)
{
	if (!tls_reading) {
		errno = EAGAIN;
		return -1;
	}
	return recv((int)(intptr_t)fd, buf, len, 0);
}

static ssize_t tls_pull_plain(gnutls_transport_ptr_t fd, void *buf, size_t len)
{
	return recv((int)(intptr_t)fd, buf, len, 0);
}

static ssize_t plain_recv(struct session_leg *l, void *buf, size_t len)
{
	ssize_t n;

	while ((n = recv(l->fd, buf, len, 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? LEG_AGAIN : LEG_BROKEN;
	return n;
}

static ssize_t plain_send(struct session_leg *l, const void *buf, size_t len)
{
	ssize_t n;

	while ((n = send(l->fd, buf, len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? LEG_AGAIN : LEG_BROKEN;
	return n;
}

/* Reads one record (len must hold one: TLS_RECORD_MAX). */
static ssize_t tls_recv(struct session_leg *l, void *buf, size_t len)
{
	ssize_t n = plain_recv(l, buf, len); /* nothing, unless MHD read before the gate shut */

	if (n != LEG_AGAIN)
		return n;
	if (len < TLS_RECORD_MAX)
		return LEG_AGAIN; /* no room for a whole record: later */
	tls_reading = true;
	do
		n = gnutls_record_recv(l->tls, buf, len);
	while (n == GNUTLS_E_INTERRUPTED);
	tls_reading = false;
	if (n == GNUTLS_E_AGAIN)
		return LEG_AGAIN;
	if (n == GNUTLS_E_PREMATURE_TERMINATION)
		return 0; /* the peer closed without a close_notify: the end all the same */
	return n < 0 ? LEG_BROKEN : n;
}

static ssize_t tls_send(struct session_leg *l, const void *buf, size_t len)
{
	ssize_t n;

	/* one record at a time; a record GnuTLS could not send yet is sent
	 * again by a call without data (it keeps it encrypted) */
	if (len > TLS_RECORD_MAX)
		len = TLS_RECORD_MAX;
	do
		n = l->tls_pending ? gnutls_record_send(l->tls, NULL, 0) : gnutls_record_send(l->tls, buf, len);
	while (n == GNUTLS_E_INTERRUPTED);
	if (n == GNUTLS_E_AGAIN) {
		if (!l->tls_pending)
			l->tls_pending = len;
		return LEG_AGAIN;
	}
	l->tls_pending = 0;
	return n < 0 ? LEG_BROKEN : n;
}

static bool tls_buffered(struct session_leg *l)
{
	return l->tls && gnutls_record_check_pending(l->tls) > 0;
}

static ssize_t leg_recv(struct session_leg *l, void *buf, size_t len)
{
	return l->tls ? tls_recv(l, buf, len) : plain_recv(l, buf, len);
}

static ssize_t leg_send(struct session_leg *l, const void *buf, size_t len)
{
	return l->tls ? tls_send(l, buf, len) : plain_send(l, buf, len);
}

/* Hands l back to MHD, which closes it. */
static void leg_close(struct session *s, struct session_leg *l)
{
	if (!l->up || l->closed)
		return;
	l->closed = true;
	l->eof = true;
	s->closing++;
	uv_close((uv_handle_t *)&l->poll, on_handle_closed);
	if (l->tls) {
		s->closing++;
		uv_close((uv_handle_t *)&l->tcp_poll, on_handle_closed);
	}
	if (l->tls)
		gnutls_transport_set_pull_function(l->tls, tls_pull_plain); /* MHD's again */
	MHD_upgrade_action(l->urh, MHD_UPGRADE_ACTION_CLOSE);
	l->fd = -1;
	l->tls = NULL;
}

/* Reads what l has into the buffer of its direction, while there is room. */
static void leg_read(struct session *s, struct session_leg *l)
{
	struct session_buf *b = l == &s->client ? &s->up : &s->down;
	bool track = l == &s->agent && kinds[s->spec.kind].frames;

	for (int rounds = 0; rounds < 8 && !l->eof; rounds++) {
		size_t room = buf_room(b);
		ssize_t n;
		if (!room)
			return;
		n = leg_recv(l, b->data + b->start + b->len, room);
		if (n == LEG_AGAIN)
			return;
		if (n <= 0) {
			l->eof = true; /* closed, or failed (reset): gone either way */
			return;
		}
		if (track)
			ws_tracker_feed(&s->track, b->data + b->start + b->len, (size_t)n);
		b->len += (size_t)n;
	}
}

/* Writes what is buffered for l (for a client: then the master's tail). */
static void leg_write(struct session *s, struct session_leg *l)
{
	struct session_buf *b = l == &s->client ? &s->down : &s->up;

	for (int rounds = 0; rounds < 8; rounds++) {
		const char *p;
		size_t len;
		ssize_t n;
		if (b->len) {
			p = b->data + b->start;
			len = b->len;
		} else if (l == &s->client && s->ending && s->tail.len) {
			p = s->tail.buf;
			len = s->tail.len;
		} else {
			return;
		}
		n = leg_send(l, p, len);
		if (n == LEG_AGAIN)
			return;
		if (n <= 0) {
			/* the reader is gone: what is left for it goes too */
			l->eof = true;
			b->len = b->start = 0;
			strbuf_reset(&s->tail);
			return;
		}
		if (b->len) {
			buf_take(b, (size_t)n < b->len ? (size_t)n : b->len);
		} else {
			memmove(s->tail.buf, s->tail.buf + n, s->tail.len - (size_t)n);
			strbuf_setlen(&s->tail, s->tail.len - (size_t)n);
		}
	}
}

static void on_leg(uv_poll_t *h, int status, int events)
{
	struct session_leg *l = h->data;
	struct session *s = l->s;

	if (status < 0)
		events = UV_READABLE | UV_WRITABLE; /* the calls say what failed */
	if ((events & UV_WRITABLE) && !l->closed)
		leg_write(s, l);
	if ((events & UV_READABLE) && !l->closed && !s->ending)
		leg_read(s, l);
	/* what one leg read, the other may take at once */
	if (l == &s->client && s->agent.up && !s->agent.closed)
		leg_write(s, &s->agent);
	else if (l == &s->agent && s->client.up && !s->client.closed)
		leg_write(s, &s->client);
	session_step(s);
}

/* Watches l for want (UV_READABLE, UV_WRITABLE). Over TLS the socketpair
 * is watched for reading (what MHD took), the TCP socket for both. */
static void poll_set(uv_poll_t *p, int want)
{
	if (want)
		uv_poll_start(p, want, on_leg);
	else
		uv_poll_stop(p);
}

static void leg_watch(struct session_leg *l, int want)
{
	if (!l->up || l->closed || want == l->events)
		return;
	l->events = want;
	if (!l->tls) {
		poll_set(&l->poll, want);
		return;
	}
	poll_set(&l->poll, want & UV_READABLE);
	/* a record GnuTLS holds back goes once the socket takes it */
	poll_set(&l->tcp_poll, want | (l->tls_pending ? UV_WRITABLE : 0));
}

/* The status message and close frame the master sends a client when it
 * ends the session itself, where a frame ends in what the client gets. */
static void session_tail(struct session *s, const char *why)
{
	enum end_style style = kinds[s->spec.kind].end;
	uint64_t first = s->track.fed - s->down.len; /* the agent's offset of down's first byte */
	json_t *st;
	char *text;

	if (style == END_NONE || s->client.eof)
		return;
	/* a record GnuTLS holds back is as good as sent */
	if (s->track.broken || s->track.boundary < first + s->client.tls_pending)
		return; /* a frame was cut in what the client already has: only a close is honest */
	/* what the client has not been sent of a frame cut short goes */
	s->down.len = (size_t)(s->track.boundary - first);
	if (!s->down.len)
		s->down.start = 0;
	if (style == END_STATUS) {
		st = json_pack("{s:n, s:n, s:o}", "exit_code", "signal", "message", http_json_text(why));
		text = json_dumps(st, JSON_COMPACT);
		ws_channel_append(&s->tail, WS_CH_STATUS, text, strlen(text), false);
		free(text);
		json_decref(st);
	}
	ws_close_append(&s->tail, WS_CLOSE_ERROR, why, false);
}

/* Ends s: no more relaying; the agent's leg closes now, the client's once
 * it has what is buffered for it and, when why is not NULL, the master's
 * word on why (session_tail). */
static void session_end(struct session *s, const char *why)
{
	if (s->ending)
		return;
	s->ending = true;
	s->listed = false;
	leg_close(s, &s->agent);
	s->up.len = s->up.start = 0;
	if (why) {
		session_tail(s, why);
		fprintf(stderr, "yard master: session %s (%s of job %" PRIu64 " task %s): %s\n", s->id,
			session_kind_name(s->spec.kind), s->job_id, s->task_name, why);
	}
	uv_timer_start(&s->timer, on_timer, SESSION_DRAIN_MS, 0);
	if (s->client_ops)
		s->client_ops->ended(s, s->client_arg, why);
}

/* What happens next to s, after anything moved. */
static void session_step(struct session *s)
{
	struct session_leg *c = &s->client, *a = &s->agent;
	char why[300];

	if (!s->ending && c->up && c->eof)
		session_end(s, NULL); /* the client went away: nobody to tell */
	if (!s->ending && a->up && a->eof) {
		if (!kinds[s->spec.kind].frames || s->track.closed) {
			session_end(s, NULL); /* the agent ended it, status and all */
		} else {
			snprintf(why, sizeof(why), "the agent of node '%s' went away", s->node);
			session_end(s, why);
		}
	}
	if (s->ending && c->up && !c->closed && (c->eof || (!s->down.len && !s->tail.len)))
		leg_close(s, c);
	if (!s->ending) {
		/* plaintext GnuTLS decrypted but nobody took (a buffer was full):
		 * no socket will say it is there */
		if (c->up && !c->closed && tls_buffered(c) && buf_room(&s->up) >= TLS_RECORD_MAX)
			leg_read(s, c);
		if (a->up && !a->closed && tls_buffered(a) && buf_room(&s->down) >= TLS_RECORD_MAX)
			leg_read(s, a);
		leg_watch(c, (!c->eof && buf_room(&s->up) ? UV_READABLE : 0) | (s->down.len ? UV_WRITABLE : 0));
		leg_watch(a, (!a->eof && buf_room(&s->down) ? UV_READABLE : 0) | (s->up.len ? UV_WRITABLE : 0));
	} else {
		leg_watch(c, s->down.len || s->tail.len ? UV_WRITABLE : 0);
	}
	/* done: no leg left open, and no client leg still on its way */
	if (s->ending && !s->closing_started && (!a->up || a->closed) && (c->closed || (!c->up && s->client_gone))) {
		s->closing_started = true;
		session_free(s);
	}
}

static void on_timer(uv_timer_t *t)
{
	struct session *s = t->data;
	char why[300];

	if (s->ending) {
		/* the client did not take the rest in time (or never came up) */
		leg_close(s, &s->client);
		s->client_gone = true;
	} else if (!s->agent.up) {
		snprintf(why, sizeof(why), "the agent of node '%s' did not open the session within %d s",
			 s->node, SESSION_DIAL_MS / 1000);
		session_end(s, why);
	} else if (s->task_end_ms) {
		snprintf(why, sizeof(why), "task %s of job %" PRIu64 " has ended", s->task_name, s->job_id);
		session_end(s, why);
	}
	session_step(s);
}

/* ---- legs: upgrades ---- */

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
		       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct master *m = cls;
	struct req *r = con_cls;
	struct session *s = r && r->session_id[0] ? find_any(m, r->session_id) : NULL;
	bool client = r && r->session_leg == SESSION_LEG_CLIENT;
	const union MHD_ConnectionInfo *ci;
	struct session_leg *l;
	struct session_buf *b;
	int tcp, one = 1;

	if (r)
		r->session_id[0] = 0; /* handed over: its end is no longer the session's */
	l = s ? (client ? &s->client : &s->agent) : NULL;
	/* a session that ended meanwhile takes a client (to tell it why), never an agent */
	if (!s || s->closing_started || l->up || (!client && s->ending) ||
	    uv_poll_init(&m->loop, &l->poll, sock) != 0) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		return;
	}
	/* MHD turned Nagle's algorithm back on for the upgrade; a keystroke
	 * must not wait for the peer's delayed ACK (40 ms). Over TLS this is
	 * the socket of the TLS session, not sock. */
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	tcp = ci ? ci->connect_fd : sock;
	setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* over TLS the leg is the session (see tls_recv) */
	ci = tcp != sock ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION) : NULL;
	if (ci && ci->tls_session) {
		if (uv_poll_init(&m->loop, &l->tcp_poll, tcp) != 0) {
			s->closing++;
			uv_close((uv_handle_t *)&l->poll, on_handle_closed);
			MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
			return;
		}
		l->tls = ci->tls_session;
		l->tcp_poll.data = l;
		gnutls_transport_set_pull_function(l->tls, tls_pull_gated);
	}
	l->fd = sock;
	l->urh = urh;
	l->up = true;
	l->poll.data = l;
	/* bytes that came with the request are the stream's first */
	b = client ? &s->up : &s->down;
	if (extra_in_size && !s->ending) {
		size_t n = extra_in_size < SESSION_BUF - b->len ? extra_in_size : SESSION_BUF - b->len;
		memcpy(b->data + b->start + b->len, extra_in, n);
		if (!client && kinds[s->spec.kind].frames)
			ws_tracker_feed(&s->track, extra_in, n);
		b->len += n;
	}
	if (!client) {
		s->listed = false;
		uv_timer_stop(&s->timer);
		if (s->task_end_ms) /* its task ended while it dialed */
			uv_timer_start(&s->timer, on_timer, SESSION_TASK_END_MS, 0);
	}
	session_step(s);
}

struct MHD_Response *sessions_upgrade_response(struct req *r, struct session *s,
					       enum session_leg_kind leg)
{
	snprintf(r->session_id, sizeof(r->session_id), "%s", s->id);
	r->session_leg = leg;
	return MHD_create_response_for_upgrade(on_upgrade, r->m);
}

void sessions_req_gone(struct master *m, struct req *r)
{
	struct session *s = find_any(m, r->session_id);

	r->session_id[0] = 0;
	if (!s || r->session_leg != SESSION_LEG_CLIENT || s->client.up)
		return;
	s->client_gone = true;
	session_end(s, NULL);
	session_step(s);
}

size_t sessions_leg_write(struct session *s, enum session_leg_kind to, const void *buf, size_t len)
{
	struct session_buf *b = to == SESSION_LEG_AGENT ? &s->up : &s->down;
	size_t room, n;

	if (s->ending)
		return 0;
	room = buf_room(b);
	n = len < room ? len : room;
	memcpy(b->data + b->start + b->len, buf, n);
	b->len += n;
	session_step(s);
	return n;
}

void sessions_set_client(struct session *s, const struct session_client_ops *ops, void *arg)
{
	s->client_ops = ops;
	s->client_arg = arg;
}

void sessions_down_take(struct session *s, size_t n)
{
	buf_take(&s->down, n < s->down.len ? n : s->down.len);
	session_step(s);
}

void sessions_client_done(struct session *s)
{
	s->client_ops = NULL;
	s->client_arg = NULL;
	s->client_gone = true;
	session_end(s, NULL);
	session_step(s);
}

/* ---- events of the model ---- */

void sessions_node_lost(struct master *m, const char *node)
{
	char why[300];

	snprintf(why, sizeof(why), "node '%s' was lost", node);
	for (size_t i = 0; i < m->nsessions; i++) {
		struct session *s = m->sessions[i];
		if (!s->ending && !strcmp(s->node, node)) {
			session_end(s, why);
			session_step(s);
			if (i < m->nsessions && m->sessions[i] != s)
				i--; /* it was freed: another took its slot */
		}
	}
}

void sessions_task_ended(struct master *m, const struct task *t)
{
	char why[300];

	for (size_t i = 0; i < m->nsessions; i++) {
		struct session *s = m->sessions[i];
		if (s->ending || s->task_id != t->id || s->task_end_ms)
			continue;
		s->task_end_ms = mono_ms();
		if (s->agent.up) {
			uv_timer_start(&s->timer, on_timer, SESSION_TASK_END_MS, 0);
			continue;
		}
		snprintf(why, sizeof(why), "task %s of job %" PRIu64 " has ended", s->task_name, s->job_id);
		session_end(s, why);
		session_step(s);
		if (i < m->nsessions && m->sessions[i] != s)
			i--;
	}
}

void sessions_end_all(struct master *m, const char *why)
{
	while (m->nsessions) {
		struct session *s = m->sessions[0];
		session_end(s, why);
		/* what the client's socket takes now; nothing is waited for */
		if (s->client.up && !s->client.closed && !s->client.eof)
			leg_write(s, &s->client);
		leg_close(s, &s->client);
		s->client_gone = true;
		session_step(s);
		if (m->nsessions && m->sessions[0] == s)
			session_free(s); /* cannot happen: both legs are closed */
	}
}
