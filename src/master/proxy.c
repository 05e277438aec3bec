/* The HTTP proxy to a port of a task (proxy.h). */
#include "base/compat.h"
#include "master/proxy.h"

#include <microhttpd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "master/api.h"
#include "master/api_handlers.h"
#include "master/audit.h"
#include "master/jobs.h"
#include "master/sessions.h"

/* The most bytes of an answer's body MHD asks for at once. */
#define READ_BLOCK (32 * 1024)
/* A held request's body goes on once this much of the agent leg's buffer
 * is free (or its session ended). */
#define UP_ROOM_MIN (16 * 1024)
/* The longest head of an upstream's answer (the agent leg's buffer holds
 * twice that: a TLS leg reads while a whole record fits). */
#define PROXY_HEAD_MAX (32 * 1024)

/* ---- one proxied request ---- */

enum proxy_phase {
	PROXY_REQUEST,  /* the request (head, body) goes to the agent leg */
	PROXY_HEAD,     /* waiting for the upstream's answer's head */
	PROXY_BODY,     /* the answer's body goes to the client */
	PROXY_HANDED,   /* answered (a 101: the session relays; or an error) */
};

/*
 * A proxied request, held by its request (until it ends), its session
 * (until it is freed, or let go) and its answer's content reader (until
 * MHD destroys the answer): freed when the last lets go.
 */
struct proxy {
	struct master *m;
	struct req *r;          /* NULL once the request ended */
	struct session *s;      /* NULL once the session was freed or let go */
	unsigned refs;
	enum proxy_phase phase;
	bool ws;
	bool audit;             /* its answer goes into the audit log */
	bool body_done;         /* the request's body has all come from MHD */
	struct strbuf pending;  /* the request's head, from pending_off, not yet on the leg */
	size_t pending_off;
	bool ended;             /* the session ended: no more bytes will come */
	char *why;              /* owned: the master's reason it ended, NULL: the upstream closed */
	bool has_length;        /* the answer's body: length bytes */
	uint64_t length, sent;
	uint64_t deadline_ms;   /* mono_ms by which the answer's head must have come */
	char *what;             /* owned: "port 8888 of task worker/0 of job 7", for messages */
};

static void proxy_unref(struct proxy *p)
{
	if (--p->refs)
		return;
	strbuf_release(&p->pending);
	free(p->why);
	free(p->what);
	free(p);
}

/* Lets go of the session: it ends (if it has not) once its agent leg is
 * closed. Called for the request, whose reference outlives the call. */
static void proxy_drop_session(struct proxy *p)
{
	struct session *s = p->s;

	if (!s)
		return;
	p->s = NULL;
	sessions_client_done(s);
	p->refs--; /* the session's; the request's is still held */
}

static void on_session_ended(struct session *s, void *arg, const char *why)
{
	struct proxy *p = arg;

	(void)s;
	p->ended = true;
	if (why && !p->why)
		p->why = xstrdup(why);
}

static void on_session_gone(struct session *s, void *arg)
{
	struct proxy *p = arg;

	(void)s;
	p->ended = true;
	if (!p->why)
		p->why = xstrdup("the session ended before the answer was sent");
	p->s = NULL;
	proxy_unref(p);
}

static const struct session_client_ops client_ops = { on_session_ended, on_session_gone };

/* Moves what is pending of the request's head onto the agent leg: whether
 * all of it went. */
static bool flush_pending(struct proxy *p)
{
	if (p->s && p->pending_off < p->pending.len)
		p->pending_off += sessions_leg_write(p->s, SESSION_LEG_AGENT, p->pending.buf + p->pending_off,
						    p->pending.len - p->pending_off);
	return p->pending_off == p->pending.len;
}

/* Answers the client with an error (the request is then done with the
 * session). */
static void proxy_fail(struct proxy *p, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void proxy_fail(struct proxy *p, int code, const char *fmt, ...)
{
	struct errbuf eb = ERRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	verror_field(&eb, code, NULL, fmt, ap);
	va_end(ap);
	p->phase = PROXY_HANDED;
	if (p->r) {
		req_error(p->r, &eb);
		if (p->audit)
			audit_record(p->r);
	}
	proxy_drop_session(p);
}

/* Why no answer came, for a 502. */
static void fail_no_answer(struct proxy *p, const char *what)
{
	if (p->why)
		proxy_fail(p, YERR(BAD_GATEWAY), "%s %s: %s", what, p->what, p->why);
	else
		proxy_fail(p, YERR(BAD_GATEWAY), "%s %s: the upstream closed the connection without "
			   "an answer", what, p->what);
}

/* MHD's content reader of the answer's body. */
static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct proxy *p = cls;
	struct session *s = p->s;
	size_t n;

	(void)pos;
	if (p->has_length && p->sent >= p->length)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s && s->down.len) {
		n = s->down.len < max ? s->down.len : max;
		if (p->has_length && n > p->length - p->sent)
			n = (size_t)(p->length - p->sent);
		memcpy(buf, s->down.data + s->down.start, n);
		p->sent += n;
		sessions_down_take(s, n);
		return (ssize_t)n;
	}
	if (p->ended || !s) {
		/* cut off, or shorter than it said: the client must not take it whole */
		if (p->why || (p->has_length && p->sent < p->length))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	/* nothing now: the request waits (proxy_ready) for bytes or the end */
	if (p->r)
		req_hold(p->r, WAIT_HANDLER);
	return 0;
}

static void read_done(void *cls)
{
	proxy_unref(cls);
}

/* The client's answer from the upstream's head h (its length in the
 * buffer: end). */
static void answer(struct proxy *p, const struct http_head *h, size_t end)
{
	struct proxy_answer a;
	struct errbuf eb = ERRBUF_INIT;
	struct MHD_Response *resp;
	struct session *s = p->s;
	struct req *r = p->r;

	if (proxy_answer_plan(h, p->ws, &a, &eb)) {
		proxy_fail(p, eb.code, "%s: %s", p->what, eb.msg);
		return;
	}
	if (a.interim) {
		sessions_down_take(s, end);
		return;
	}
	if (a.status == 101) {
		/* the upstream took the upgrade: the master's 101, then the relay */
		resp = sessions_upgrade_response(r, s, SESSION_LEG_CLIENT);
		for (size_t i = 0; i < a.nfields; i++)
			MHD_add_response_header(resp, a.fields[i].name, a.fields[i].value);
		MHD_add_response_header(resp, "Upgrade", "websocket");
		MHD_add_response_header(resp, "Connection", "Upgrade");
		req_set_response(r, 101, resp);
		p->phase = PROXY_HANDED;
		sessions_down_take(s, end);
		sessions_set_client(s, NULL, NULL);
		p->s = NULL;
		proxy_unref(p);
	} else {
		bool bodiless = !strcmp(r->method, "HEAD") || a.status == 204 || a.status == 304;
		p->has_length = a.has_length || bodiless;
		p->length = bodiless ? 0 : a.length;
		resp = MHD_create_response_from_callback(
			a.has_length ? a.length : bodiless ? 0 : MHD_SIZE_UNKNOWN, READ_BLOCK, read_body, p,
			read_done);
		p->refs++;
		for (size_t i = 0; i < a.nfields; i++)
			MHD_add_response_header(resp, a.fields[i].name, a.fields[i].value);
		req_set_response(r, a.status, resp);
		p->phase = PROXY_BODY;
		sessions_down_take(s, end);
	}
	if (p->audit)
		audit_record(r);
	proxy_answer_release(&a);
}

/* Looks for the upstream's head in what the agent sent: whether the
 * request may go on (it has an answer). */
static bool look_for_head(struct proxy *p)
{
	struct errbuf eb = ERRBUF_INIT;

	while (p->phase == PROXY_HEAD && p->s) {
		struct session *s = p->s;
		const char *buf = s->down.data + s->down.start;
		size_t end = http_head_end(buf, s->down.len);
		struct http_head h;
		if (!end) {
			if (s->down.len >= PROXY_HEAD_MAX) {
				proxy_fail(p, YERR(BAD_GATEWAY), "the head of the answer of %s is over %d bytes",
					   p->what, PROXY_HEAD_MAX);
				return true;
			}
			break;
		}
		memset(&h, 0, sizeof(h));
		if (http_response_head_parse(buf, end, &h, &eb)) {
			http_head_release(&h);
			proxy_fail(p, YERR(BAD_GATEWAY), "the answer of %s is not HTTP: %s", p->what, eb.msg);
			return true;
		}
		answer(p, &h, end);
		http_head_release(&h);
	}
	if (p->phase != PROXY_HEAD)
		return true;
	if (p->ended || !p->s) {
		fail_no_answer(p, "no answer from");
		return true;
	}
	if (mono_ms() >= p->deadline_ms) {
		proxy_fail(p, YERR(GATEWAY_TIMEOUT), "%s did not answer within %d s", p->what,
			   PROXY_HEAD_TIMEOUT_MS / 1000);
		return true;
	}
	return false;
}

/* Whether the upstream's whole answer head came while the request was
 * still going up (it answers early, an error say, without the rest of the
 * body): that answer is the client's, and the rest of the body goes
 * nowhere. */
static bool answered_early(struct proxy *p)
{
	struct session *s = p->s;

	if (!s || !http_head_end(s->down.data + s->down.start, s->down.len))
		return false;
	p->phase = PROXY_HEAD;
	if (look_for_head(p))
		return true;
	p->phase = PROXY_REQUEST; /* an interim answer, skipped: the body goes on */
	return false;
}

/* WAIT_HANDLER: whether the held request may go on. */
static bool proxy_ready(struct req *r)
{
	struct proxy *p = r->handler_data;

	switch (p->phase) {
	case PROXY_REQUEST:
		if (answered_early(p))
			return true;
		if (p->ended || !p->s) {
			fail_no_answer(p, "the request could not be sent to");
			return true;
		}
		if (!flush_pending(p))
			return false;
		if (!p->body_done)
			return SESSION_BUF - p->s->up.len >= UP_ROOM_MIN;
		p->phase = PROXY_HEAD;
		return look_for_head(p);
	case PROXY_HEAD:
		return look_for_head(p);
	case PROXY_BODY:
		return !p->s || p->ended || p->s->down.len;
	default:
		return true;
	}
}

/* BODY_STREAM: the request's body as MHD hands it over. */
static size_t proxy_body(struct req *r, const char *data, size_t len)
{
	struct proxy *p = r->handler_data;

	if (answered_early(p))
		return len;
	if (p->ended || !p->s) {
		fail_no_answer(p, "the request could not be sent to");
		return len;
	}
	if (!len)
		p->body_done = true;
	if (!flush_pending(p))
		return 0;
	if (!len) {
		p->phase = PROXY_HEAD;
		return 0;
	}
	return sessions_leg_write(p->s, SESSION_LEG_AGENT, data, len);
}

static void proxy_req_gone(struct req *r)
{
	struct proxy *p = r->handler_data;

	r->handler_data = NULL;
	p->r = NULL;
	proxy_drop_session(p);
	proxy_unref(p);
}

/* ---- the handler ---- */

struct field_list {
	struct proxy_field *f;
	size_t n, alloc;
};

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct field_list *l = cls;

	(void)kind;
	ALLOC_GROW(l->f, l->n + 1, l->alloc);
	l->f[l->n++] = (struct proxy_field){ key, value ? value : "" };
	return MHD_YES;
}

/* The raw target with a '/' after its path: where a target without the
 * slash after PORT is sent (as a directory's URL is). */
static void redirect_slash(struct req *r)
{
	const char *target = r->target ? r->target : r->url;
	size_t path_len = strcspn(target, "?");
	struct strbuf loc = STRBUF_INIT;
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);

	strbuf_add(&loc, target, path_len);
	strbuf_addch(&loc, '/');
	strbuf_addstr(&loc, target + path_len);
	MHD_add_response_header(resp, "Location", loc.buf);
	req_set_response(r, 308, resp);
	strbuf_release(&loc);
}

void proxy_handle(struct req *r)
{
	struct job *j = path_job(r);
	struct proxy_target t;
	struct errbuf eb = ERRBUF_INIT;
	struct session_spec spec = { 0 };
	struct field_list fl = { 0 };
	struct proxy_request up = { 0 };
	struct session *s;
	struct task *task;
	struct proxy *p;
	const char *cl = req_header(r, "Content-Length"), *te = req_header(r, "Transfer-Encoding");
	char addr[INET6_ADDRSTRLEN], *prefix = NULL;
	uint64_t body_len = 0;

	memset(&t, 0, sizeof(t));
	if (!j)
		goto out;
	if (proxy_target_parse(r->cap[1], &t, &eb)) {
		req_error(r, &eb);
		goto out;
	}
	if (!t.slash) {
		redirect_slash(r);
		goto out;
	}
	if (te) {
		reply_err(r, YERR(LENGTH_REQUIRED), "a proxied request's body must come with a "
			  "Content-Length (Transfer-Encoding '%.100s' is not passed on)", te);
		goto out;
	}
	if (cl && parse_u64_str(cl, &body_len)) {
		error_field(&eb, YERR(BAD_REQUEST), "Content-Length", "Content-Length '%.40s': expected "
			    "a number", cl);
		req_error(r, &eb);
		goto out;
	}
	if (j->state != JOB_RUNNING) {
		reply_err(r, YERR(CONFLICT), "job %" PRIu64 " is %s, not running", j->id,
			  job_state_name(j->state));
		goto out;
	}
	task = jobs_current_task(j, t.role, t.index);
	if (!task) {
		reply_err(r, YERR(NOT_FOUND), "job %" PRIu64 " has no task %s/%u in its attempt %u", j->id,
			  t.role, t.index, j->attempt);
		goto out;
	}
	if (task->state != TASK_RUNNING || !task->node || task->stop) {
		reply_err(r, YERR(CONFLICT), "task %s/%u of job %" PRIu64 " is %s, not running", t.role,
			  t.index, j->id, task->stop && task->state == TASK_RUNNING
						  ? "stopping" : task_state_name(task->state));
		goto out;
	}
	spec.kind = !strcmp(r->method, "GET") && http_list_has_token(req_header(r, "Upgrade"), "websocket") &&
			    http_list_has_token(req_header(r, "Connection"), "upgrade")
		? SESSION_WS : SESSION_HTTP;
	spec.port = t.port;
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_field, &fl);
	prefix = xasprintf("/v1/jobs/%" PRIu64 "/proxy/%s/%u/%u", j->id, t.role, t.index, t.port);
	up.method = r->method;
	up.target = r->target ? r->target : r->url;
	up.ws = spec.kind == SESSION_WS;
	up.fields = fl.f;
	up.nfields = fl.n;
	up.client_addr = req_client_addr(r, addr, sizeof(addr));
	up.https = r->m->tls.cert_pem != NULL;
	up.prefix = prefix;
	up.has_body = cl || !strcmp(r->method, "POST") || !strcmp(r->method, "PUT") ||
		      !strcmp(r->method, "PATCH");
	up.body_len = body_len;
	if (proxy_request_check(&up, &eb)) {
		req_error(r, &eb);
		goto out;
	}
	if (sessions_create(r->m, &spec, j, task, &s, &eb)) {
		req_error(r, &eb);
		goto out;
	}
	p = xcalloc(1, sizeof(*p));
	p->m = r->m;
	p->r = r;
	p->s = s;
	p->refs = 2; /* the request's and the session's */
	p->ws = spec.kind == SESSION_WS;
	/* reads that reach the task are not recorded (a notebook's page is a
	 * hundred of them); a WebSocket and every other method are (and
	 * every refusal of the master's, by the route's flag) */
	p->audit = p->ws || (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"));
	p->phase = PROXY_REQUEST;
	p->deadline_ms = mono_ms() + PROXY_HEAD_TIMEOUT_MS;
	p->what = xasprintf("port %u of task %s/%u of job %" PRIu64, t.port, t.role, t.index, j->id);
	strbuf_init(&p->pending, 0);
	sessions_set_client(s, &client_ops, p);
	proxy_request_head(&up, &p->pending);
	flush_pending(p);

	r->handler_data = p;
	r->stream_body = proxy_body;
	r->ready = proxy_ready;
	r->gone = proxy_req_gone;
out:
	free(fl.f);
	free(prefix);
	proxy_target_release(&t);
}
