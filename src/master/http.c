#include "base/compat.h"
#include "master/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <openssl/evp.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/utf8.h"
#include "base/xalloc.h"
#include "master/api.h"
#include "master/audit.h"
#include "master/leader.h"
#include "master/sessions.h"
#include "master/static.h"
#include "master/visibility.h"

void req_set_response(struct req *r, int status, struct MHD_Response *resp)
{
	if (r->resp)
		MHD_destroy_response(r->resp);
	r->status = status;
	r->resp = resp;
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff"); /* every answer */
}

void req_text(struct req *r, int status, const char *ctype, const char *data, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);

	MHD_add_response_header(resp, "Content-Type", ctype);
	req_set_response(r, status, resp);
}

json_t *http_json_text(const char *s)
{
	json_t *js = json_string(s);
	char *esc;

	if (js)
		return js;
	esc = utf8_escape_dup(s);
	js = json_string(esc);
	free(esc);
	return js;
}

void http_json_string(struct strbuf *out, const char *s)
{
	json_t *js = http_json_text(s);
	char *text = json_dumps(js, JSON_ENCODE_ANY);

	strbuf_addstr(out, text);
	free(text);
	json_decref(js);
}

void req_strbuf(struct req *r, int status, const char *ctype, struct strbuf *sb)
{
	size_t len;
	char *text = strbuf_detach(sb, &len);
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);

	MHD_add_response_header(resp, "Content-Type", ctype);
	req_set_response(r, status, resp);
}

struct shared_body *shared_body_new(const char *text, size_t len)
{
	struct shared_body *b = xmalloc(sizeof(*b) + len + 1);

	b->refs = 1;
	b->len = len;
	memcpy(b->text, text, len);
	b->text[len] = '\0';
	b->fd = len >= SHARED_BODY_FD_MIN ? memfd_create("yard-body", MFD_CLOEXEC) : -1;
	if (b->fd >= 0 && write_all(b->fd, text, len)) {
		close(b->fd);
		b->fd = -1;
	}
	return b;
}

void shared_body_unref(struct shared_body *b)
{
	if (b && --b->refs == 0) {
		if (b->fd >= 0)
			close(b->fd);
		free(b);
	}
}

static void shared_body_release(void *cls)
{
	shared_body_unref(cls);
}

/* An answer that sends b's memfd from offset 0 (sendfile keeps its own
 * offset per answer); NULL when the descriptor cannot be had. MHD closes
 * the duplicate with the answer. */
static struct MHD_Response *shared_body_fd_response(struct shared_body *b)
{
	struct MHD_Response *resp;
	int fd;

	if (b->fd < 0 || (fd = fcntl(b->fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return NULL;
	resp = MHD_create_response_from_fd_at_offset64(b->len, fd, 0);
	if (!resp)
		close(fd);
	return resp;
}

void req_shared(struct req *r, int status, const char *ctype, struct shared_body *b)
{
	struct MHD_Response *resp = shared_body_fd_response(b);

	if (!resp) {
		b->refs++;
		resp = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->text,
									     shared_body_release, b);
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	req_set_response(r, status, resp);
}

/* What req_json answers when it has no document to send: a handler built
 * one from a string jansson refused (json_pack fails on bytes that are not
 * UTF-8). Fixed text: nothing of the request is in it. */
static const char encode_failed[] =
	"{\"error\":{\"code\":\"internal\",\"message\":\"the reply could not be encoded as "
	"JSON\"}}\n";

void req_json(struct req *r, int status, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	struct MHD_Response *resp;
	size_t len;

	if (!text) {
		struct strbuf where = STRBUF_INIT;
		utf8_escape_append(&where, r->method ? r->method : "?", strlen(r->method ? r->method : "?"));
		strbuf_addch(&where, ' ');
		utf8_escape_append(&where, r->url ? r->url : "?", strlen(r->url ? r->url : "?"));
		fprintf(stderr, "yard master: %s: a %d reply could not be encoded as JSON; answered 500\n",
			where.buf, status);
		strbuf_release(&where);
		req_text(r, 500, "application/json", encode_failed, sizeof(encode_failed) - 1);
		json_decref(doc);
		return;
	}
	len = strlen(text);

	/* newline-terminated for curl users */
	text = xrealloc(text, len + 2);
	text[len++] = '\n';
	text[len] = 0;
	resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	req_set_response(r, status, resp);
	json_decref(doc);
}

json_t *http_error_json(const struct errbuf *eb)
{
	int code = eb->code ? eb->code : YERR(INTERNAL);
	json_t *e = json_object();

	json_object_set_new(e, "code", json_string(yerr_code_str(code)));
	json_object_set_new(e, "message", http_json_text(eb->msg[0] ? eb->msg : yerr_default_message(code)));
	if (eb->field[0])
		json_object_set_new(e, "field", http_json_text(eb->field));
	return e;
}

void req_error(struct req *r, const struct errbuf *eb)
{
	int code = eb->code ? eb->code : YERR(INTERNAL);

	req_json(r, yerr_http_status(code), json_pack("{s:o}", "error", http_error_json(eb)));
	r->err_code = code;
}

const char *req_header(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *req_query(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* The held requests, by what they wait for (struct req's lists). */
struct held_index {
	struct req *commit;     /* WAIT_COMMIT: every one goes at the next wake */
	struct req *ready;      /* answered, waiting to be resumed (release_ready) */
	size_t nheld;           /* suspended requests, ready ones too */
	uint64_t release_after_us; /* mono_us before which none is resumed */
	struct req *scan;       /* WAIT_LOGS, WAIT_EXEC, WAIT_JOB: looked at on every wake */
	struct req **work;      /* WAIT_WORK, chained by the hash of the node's name */
	size_t nwork_buckets;   /* a power of two, or 0 */
	size_t nwork;
	struct req **heap;      /* long polls, earliest deadline first */
	size_t nheap, aheap;
};

static struct held_index *held_index(struct master *m)
{
	if (!m->held_ix)
		m->held_ix = xcalloc(1, sizeof(*m->held_ix));
	return m->held_ix;
}

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)h;
}

static void kind_link(struct req **head, struct req *r)
{
	r->next_kind = *head;
	if (*head)
		(*head)->pprev_kind = &r->next_kind;
	*head = r;
	r->pprev_kind = head;
}

static void kind_unlink(struct req *r)
{
	if (!r->pprev_kind)
		return;
	*r->pprev_kind = r->next_kind;
	if (r->next_kind)
		r->next_kind->pprev_kind = r->pprev_kind;
	r->next_kind = NULL;
	r->pprev_kind = NULL;
}

static void work_grow(struct held_index *ix)
{
	size_t n = ix->nwork_buckets ? 2 * ix->nwork_buckets : 1024;
	struct req **b = xcalloc(n, sizeof(*b));

	for (size_t i = 0; i < ix->nwork_buckets; i++)
		while (ix->work[i]) {
			struct req *r = ix->work[i];
			kind_unlink(r);
			kind_link(&b[name_hash(r->cap[0]) & (n - 1)], r);
		}
	free(ix->work);
	ix->work = b;
	ix->nwork_buckets = n;
}

static struct req **work_bucket(const struct held_index *ix, const char *name)
{
	return &ix->work[name_hash(name) & (ix->nwork_buckets - 1)];
}

static bool heap_before(const struct req *a, const struct req *b)
{
	return a->deadline_ms < b->deadline_ms;
}

static void heap_set(struct held_index *ix, size_t i, struct req *r)
{
	ix->heap[i] = r;
	r->heap_idx = i + 1;
}

static void heap_sift(struct held_index *ix, size_t i)
{
	struct req *r = ix->heap[i];

	while (i && heap_before(r, ix->heap[(i - 1) / 2])) {
		heap_set(ix, i, ix->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= ix->nheap)
			break;
		if (k + 1 < ix->nheap && heap_before(ix->heap[k + 1], ix->heap[k]))
			k++;
		if (!heap_before(ix->heap[k], r))
			break;
		heap_set(ix, i, ix->heap[k]);
		i = k;
	}
	heap_set(ix, i, r);
}

static void heap_push(struct held_index *ix, struct req *r)
{
	if (ix->nheap == ix->aheap) {
		ix->aheap = ix->aheap ? 2 * ix->aheap : 1024;
		ix->heap = xrealloc(ix->heap, ix->aheap * sizeof(*ix->heap));
	}
	ix->heap[ix->nheap++] = r;
	heap_sift(ix, ix->nheap - 1);
}

static void heap_remove(struct held_index *ix, struct req *r)
{
	size_t i = r->heap_idx - 1;
	struct req *last;

	if (!r->heap_idx)
		return;
	r->heap_idx = 0;
	last = ix->heap[--ix->nheap];
	if (last != r) {
		ix->heap[i] = last;
		heap_sift(ix, i);
	}
}

static void held_remove(struct master *m, struct req *r)
{
	if (r->pprev_held) {
		*r->pprev_held = r->next_held;
		if (r->next_held)
			r->next_held->pprev_held = r->pprev_held;
	}
	if (r->pprev_held && m->held_ix)
		m->held_ix->nheld--;
	r->next_held = NULL;
	r->pprev_held = NULL;
	if (r->wait == WAIT_WORK && r->pprev_kind)
		m->held_ix->nwork--;
	kind_unlink(r);
	if (m->held_ix)
		heap_remove(m->held_ix, r);
}

static void hold(struct req *r)
{
	struct master *m = r->m;
	struct held_index *ix = held_index(m);

	MHD_suspend_connection(r->conn);
	r->suspended = true;
	ix->nheld++;
	r->next_held = m->held;
	if (m->held)
		m->held->pprev_held = &r->next_held;
	m->held = r;
	r->pprev_held = &m->held;
	if (r->wait == WAIT_COMMIT) {
		kind_link(&ix->commit, r);
		return;
	}
	if (r->wait == WAIT_WORK) {
		if (ix->nwork >= ix->nwork_buckets)
			work_grow(ix);
		kind_link(work_bucket(ix, r->cap[0]), r);
		ix->nwork++;
	} else {
		kind_link(&ix->scan, r);
	}
	/* a proxied request has no deadline of its own here: its handler's
	 * ready() keeps its time, and the scan asks it every wake */
	if (r->wait != WAIT_HANDLER)
		heap_push(ix, r);
}

void req_hold(struct req *r, enum req_wait wait)
{
	r->wait = wait;
	if (!r->suspended)
		hold(r);
}

static void release(struct master *m, struct req *r)
{
	held_remove(m, r);
	r->wait = WAIT_NONE;
	r->suspended = false;
	MHD_resume_connection(r->conn);
}

bool http_polls_held(const struct master *m, const char *name)
{
	const struct held_index *ix = m->held_ix;

	if (!ix || !ix->nwork)
		return false;
	for (const struct req *r = *work_bucket(ix, name); r; r = r->next_kind)
		if (!strcmp(r->cap[0], name))
			return true;
	return false;
}

/* r, answered, waits in the ready list to be resumed (release_ready). */
static void make_ready(struct held_index *ix, struct req *r)
{
	kind_unlink(r);
	heap_remove(ix, r);
	r->wait = WAIT_READY;
	kind_link(&ix->ready, r);
}

/* Answers r if its condition holds (api_poll_ready); true when it did. */
static bool wake_one(struct master *m, struct req *r, uint64_t now)
{
	if (!api_poll_ready(r, now))
		return false;
	if (r->pprev_kind && r->wait == WAIT_WORK)
		m->held_ix->nwork--;
	make_ready(m->held_ix, r);
	return true;
}

static void on_release_timer(uv_timer_t *t)
{
	/* nothing: the loop turn it makes runs on_prepare, which wakes */
}

/*
 * Resumes the answered requests and lets MHD send them. MHD's resume walks
 * every suspended connection (libmicrohttpd 0.9.75's
 * resume_suspended_connections), and with 10,000 agents' polls held that
 * walk is a millisecond or more; resumed every loop turn, it was a fifth
 * of the master's CPU. So one resume waits for the last by
 * RELEASE_GAP_NS for each suspended connection (4 ms with 10,000): about
 * four times what the walk costs, so that at most a quarter of a busy
 * loop goes to it, and each resume takes what was answered meanwhile.
 * With a hundred held the wait is 40 us.
 */
#define RELEASE_GAP_NS 400

static void release_ready(struct master *m)
{
	struct held_index *ix = m->held_ix;
	uint64_t t0 = mono_us();
	size_t nheld = ix->nheld;

	if (!ix->ready)
		return;
	if (t0 < ix->release_after_us && m->release_timer.loop) {
		if (!uv_is_active((uv_handle_t *)&m->release_timer))
			uv_timer_start(&m->release_timer, on_release_timer,
				       (ix->release_after_us - t0 + 999) / 1000, 0);
		return;
	}
	while (ix->ready)
		release(m, ix->ready);
	/* a resumed connection needs MHD to run again before its reply goes out */
	http_run(m);
	ix->release_after_us = t0 + nheld * RELEASE_GAP_NS / 1000;
}

void http_wake(struct master *m, int commit_err, const struct errbuf *eb)
{
	uint64_t now = mono_ms();
	struct held_index *ix = m->held_ix;
	struct req *r, *next;
	bool released = false;

	if (!ix) {
		m->nbumped = 0;
		return;
	}
	for (r = ix->commit; r; r = next) {
		next = r->next_kind;
		if (commit_err)
			req_error(r, eb);
		make_ready(ix, r);
	}
	if (!leader_serving(m)) {
		/* a long poll held before this master's lease ran out is not
		 * answered from a model another master may have moved on */
		for (r = m->held; r; r = next) {
			next = r->next_held;
			if (r->wait != WAIT_READY)
				leader_refuse(r);
			release(m, r);
			released = true;
		}
		m->nbumped = 0;
		if (released)
			http_run(m);
		return;
	}
	/* the work polls of nodes whose desired state changed */
	for (size_t i = 0; i < m->nbumped; i++) {
		struct node *n = m->bumped[i];
		n->bumped = false;
		if (!ix->nwork)
			continue;
		for (r = *work_bucket(ix, n->name); r; r = next) {
			next = r->next_kind;
			if (!strcmp(r->cap[0], n->name))
				wake_one(m, r, now);
		}
	}
	m->nbumped = 0;
	for (r = ix->scan; r; r = next) {
		next = r->next_kind;
		wake_one(m, r, now);
	}
	/* long polls whose time is up */
	while (ix->nheap && ix->heap[0]->deadline_ms <= now) {
		r = ix->heap[0];
		if (!wake_one(m, r, now)) {
			/* not ready by its own word: look again a tick later */
			r->deadline_ms = now + 1;
			heap_sift(ix, r->heap_idx - 1);
			break;
		}
	}
	release_ready(m);
}

void http_release_all(struct master *m, const struct errbuf *why)
{
	struct errbuf eb = ERRBUF_INIT;

	error(&eb, YERR(UNAVAILABLE), "the master is shutting down");
	while (m->held) {
		struct req *r = m->held;
		if (r->wait != WAIT_READY) /* an answered one keeps its answer */
			req_error(r, why ? why : &eb);
		release(m, r);
	}
}

static void upload_cleanup(struct req *r)
{
	if (r->upload_fd >= 0)
		close(r->upload_fd);
	r->upload_fd = -1;
	if (r->upload_tmp)
		unlink(r->upload_tmp);
	free(r->upload_tmp);
	r->upload_tmp = NULL;
	if (r->sha)
		EVP_MD_CTX_free(r->sha);
	r->sha = NULL;
}

static void req_free(struct req *r)
{
	if (r->suspended)
		held_remove(r->m, r);
	if (r->session_id[0])
		sessions_req_gone(r->m, r);
	if (r->gone)
		r->gone(r);
	free(r->audit_path);
	upload_cleanup(r);
	if (r->resp)
		MHD_destroy_response(r->resp);
	strbuf_release(&r->body);
	free(r->method);
	free(r->url);
	free(r->target);
	free(r->cap[0]);
	free(r->cap[1]);
	free(r->user);
	free(r->team);
	free(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	if (*con_cls)
		req_free(*con_cls);
	*con_cls = NULL;
}

static enum MHD_Result queue(struct req *r)
{
	enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, r->resp);

	MHD_destroy_response(r->resp);
	r->resp = NULL;
	r->queued = true;
	return ret;
}

static const struct sockaddr *client_sockaddr(struct req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	return ci ? ci->client_addr : NULL;
}

const char *req_client_addr(struct req *r, char *buf, size_t len)
{
	const struct sockaddr *sa = client_sockaddr(r);

	if (sa && sa->sa_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len))
		return buf;
	if (sa && sa->sa_family == AF_INET6 &&
	    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len))
		return buf;
	return NULL;
}

/* The client's IPv4 address (host order), 0 when unknown. */
static uint32_t client_ipv4(struct req *r)
{
	const struct sockaddr *sa = client_sockaddr(r);

	if (sa && sa->sa_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	return 0;
}

/* The rate limit (ratelimit.h) of the caller: its token, its job (a job
 * token), or its address when it has no known token, so that a flood of
 * bad tokens is limited too. Agents are not limited: their requests grow
 * with the tasks they run (heartbeats, long polls, the logs and metrics of
 * every task), and a refused agent would lose its lease and its tasks; an
 * agent token is made by the admin for one node. Returns the milliseconds
 * to wait, 0 when the request may go on. */
static uint64_t rate_limited(struct req *r, const struct token *tok)
{
	uint64_t key;

	if (!r->m->ratelimit.rate || (tok && tok->role == ROLE_AGENT))
		return 0;
	if (tok && tok->role == ROLE_JOB) {
		key = ratelimit_key(RATELIMIT_JOB, tok->job_id);
	} else if (tok) {
		const char *p = tok->hash;
		uint64_t v = 0;
		for (int i = 0; i < 16 && p[i]; i++)
			v = v << 4 | (uint64_t)(p[i] <= '9' ? p[i] - '0' : p[i] - 'a' + 10);
		key = ratelimit_key(RATELIMIT_TOKEN, v);
	} else {
		key = ratelimit_key(RATELIMIT_ADDRESS, client_ipv4(r));
	}
	return ratelimit_take(&r->m->ratelimit, key, mono_ms());
}

/* Refuses a request over its caller's rate limit: 429, Retry-After, and an
 * error that names the caller, the limit and the wait. */
static void refuse_rate(struct req *r, const struct token *tok, uint64_t wait_ms)
{
	struct errbuf eb = ERRBUF_INIT;
	char who[300], secs[24];
	const struct ratelimit *rl = &r->m->ratelimit;

	if (tok && tok->role == ROLE_JOB)
		snprintf(who, sizeof(who), "the token of job %" PRIu64 " (user '%s')", tok->job_id, tok->user);
	else if (tok)
		snprintf(who, sizeof(who), "the token of user '%s'", tok->user);
	else {
		struct in_addr in = { htonl(client_ipv4(r)) };
		char addr[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &in, addr, sizeof(addr));
		snprintf(who, sizeof(who), "requests without a known token from %s", addr);
	}
	error(&eb, YERR(TOO_MANY),
	      "%s went over the rate limit of %" PRIu64 " requests per second (bursts of %" PRIu64
	      "): retry in %" PRIu64 " ms",
	      who, rl->rate, rl->burst, wait_ms);
	req_error(r, &eb);
	snprintf(secs, sizeof(secs), "%" PRIu64, (wait_ms + 999) / 1000);
	MHD_add_response_header(r->resp, "Retry-After", secs);
}

void req_caller(const struct req *r, struct caller *out)
{
	out->role = r->role;
	out->user = r->user;
	out->team = r->team;
	out->team_admin = r->team_admin;
	out->job = r->token_job;
}

/* Whether r comes from the master's own pages as far as a browser says:
 * no Origin header (not a browser's cross-site request), or one whose host
 * and port are r's Host. */
static bool same_origin(struct req *r)
{
	const char *origin = req_header(r, "Origin"), *host = req_header(r, "Host"), *p;

	if (!origin)
		return true;
	p = strstr(origin, "://");
	return p && host && !strcasecmp(p + 3, host);
}

/* First call of a request: route, auth, body set-up. Returns false when a
 * reply (an error) is already set. */
static bool req_begin(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT, refused = ERRBUF_INIT;
	const struct token *tok;
	const char *cl, *authz, *cookie = NULL;
	char *cookie_authz = NULL;
	bool path_known = false;
	uint64_t clen = 0, wait_ms;

	r->route = api_match(r->method, r->url, r->cap, &path_known);
	if (!r->route && !path_known && static_takes(r->method, r->url)) {
		/* the web app: no token, no body */
		static_serve(r, r->m->web_dir, r->target ? r->target : r->url);
		r->handled = true;
		return false;
	}
	if (!r->route) {
		if (path_known)
			error(&eb, YERR(METHOD), "'%s' does not take %s", r->url, r->method);
		else
			error(&eb, YERR(NOT_FOUND), "no route '%s'", r->url);
		goto fail;
	}
	/* a standby (or a leader unsure of its lease) answers for the leader
	 * nothing but its health (master/leader.h) */
	if (!(r->route->flags & ROUTE_ANY_ROLE) && !leader_serving(r->m)) {
		leader_refuse(r);
		r->handled = true;
		return false;
	}
	authz = req_header(r, "Authorization");
	if (!authz && (r->route->flags & ROUTE_COOKIE) &&
	    (cookie = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, "yard_token"))) {
		if (!same_origin(r)) {
			error(&eb, YERR(FORBIDDEN), "a session authenticated by its cookie must be opened "
			      "from the master's own pages: Origin '%.200s' is not this master (Host '%.200s')",
			      req_header(r, "Origin"), req_header(r, "Host") ? req_header(r, "Host") : "");
			goto fail;
		}
		authz = cookie_authz = xasprintf("Bearer %s", cookie);
	}
	/* a revoked or expired token names its caller (for the audit log) and
	 * is then no token at all; refused says why */
	tok = auth_lookup(r->m, authz, wall_us(), &refused);
	free(cookie_authz);
	if (tok) {
		r->has_token = !refused.code;
		r->role = tok->role;
		r->user = xstrdup(tok->user);
		r->team = tok->team ? xstrdup(tok->team) : NULL;
		r->team_admin = tok->team_admin;
		r->token_job = tok->job_id;
		if (tok->role != ROLE_JOB)
			snprintf(r->token_id, sizeof(r->token_id), "%.*s", TOKEN_ID_LEN, tok->hash);
	}
	if (refused.code)
		tok = NULL;
	if ((wait_ms = rate_limited(r, tok))) {
		refuse_rate(r, tok, wait_ms);
		r->handled = true;
		return false;
	}
	if (auth_needs_token(r->route->perm) && !tok) {
		if (refused.code)
			eb = refused;
		else
			error(&eb, YERR(UNAUTHORIZED), "missing or unknown bearer token");
		goto fail;
	}
	if (!auth_allows(r->route->perm, tok)) {
		error(&eb, YERR(FORBIDDEN), "a %s token may not %s '%s'", role_name(tok->role), r->method,
		      r->route->pattern);
		goto fail;
	}
	if (tok) {
		/* the visibility rule, for every route in this one place */
		struct caller c;
		req_caller(r, &c);
		if (visibility_check(r->m, r->route, &c, r->cap, &eb))
			goto fail;
	}
	switch (r->route->body) {
	case BODY_LOG:
		r->body_max = API_LOG_MAX;
		break;
	case BODY_CODE:
		r->body_max = API_CODE_MAX;
		break;
	case BODY_METRICS:
		r->body_max = API_METRICS_MAX;
		break;
	case BODY_BLOB:
		r->body_max = API_BLOB_MAX;
		break;
	case BODY_MANIFEST:
		r->body_max = API_MANIFEST_MAX;
		break;
	case BODY_STREAM:
		r->body_max = SIZE_MAX; /* it is not kept: the handler takes it as it comes */
		break;
	default:
		r->body_max = API_JSON_MAX;
	}
	cl = req_header(r, "Content-Length");
	if (cl && !parse_u64_str(cl, &clen) && clen > r->body_max) {
		error(&eb, YERR(TOO_LARGE), "request body of %" PRIu64 " bytes is over the %zu byte limit",
		      clen, r->body_max);
		goto fail;
	}
	if (r->route->body == BODY_CODE) {
		r->upload_tmp = xasprintf("%s/code/upload.XXXXXX", r->m->data_dir);
		r->upload_fd = mkostemp(r->upload_tmp, O_CLOEXEC);
		if (r->upload_fd < 0) {
			error(&eb, YERR(IO), "cannot create '%s': %s", r->upload_tmp, strerror(errno));
			free(r->upload_tmp);
			r->upload_tmp = NULL;
			goto fail;
		}
		r->sha = EVP_MD_CTX_new();
		EVP_DigestInit_ex(r->sha, EVP_sha256(), NULL);
	}
	return true;
fail:
	req_error(r, &eb);
	r->handled = true;
	return false;
}

static void req_sink(struct req *r, const char *data, size_t len)
{
	if (r->too_large)
		return;
	if (r->route->body == BODY_CODE) {
		if (r->upload_size + len > API_CODE_MAX) {
			r->too_large = true;
			upload_cleanup(r);
			return;
		}
		r->upload_size += len;
		EVP_DigestUpdate(r->sha, data, len);
		while (len) {
			ssize_t w = write(r->upload_fd, data, len);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				struct errbuf eb = ERRBUF_INIT;
				error(&eb, yerr_of_errno(errno),
				      "cannot write '%s': %s", r->upload_tmp, strerror(errno));
				req_error(r, &eb);
				r->handled = true;
				upload_cleanup(r);
				r->too_large = true; /* discard the rest */
				return;
			}
			data += w;
			len -= (size_t)w;
		}
		return;
	}
	if (strbuf_add_capped(&r->body, data, len, r->body_max))
		r->too_large = true;
}

static struct req *req_new(struct master *m, struct MHD_Connection *conn, const char *target)
{
	struct req *r = xcalloc(1, sizeof(*r));

	r->m = m;
	r->conn = conn;
	r->target = target ? xstrdup(target) : NULL;
	r->upload_fd = -1;
	strbuf_init(&r->body, 0);
	return r;
}

/* MHD calls this with the request target as it came, before it decodes the
 * path; the request's struct starts here so that the static server can see
 * an encoded "%2e%2e" or "%00" that decoding would hide. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	return req_new(cls, conn, uri);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct master *m = cls;
	struct req *r = *con_cls;

	if (!r)
		r = *con_cls = req_new(m, conn, NULL);
	if (!r->method) {
		r->method = xstrdup(method);
		r->url = xstrdup(url);
		if (req_begin(r)) {
			if (r->route->body != BODY_STREAM)
				return MHD_YES;
			/* the handler takes the body as it comes: it runs now */
			r->handled = true;
			r->route->handler(r);
			if (!r->resp)
				return MHD_YES;
		}
		/* refused before the handler (or by a streaming one): the audit
		 * entry goes into this loop turn's batch; the refusal does not
		 * wait for it */
		if (r->route && (r->route->flags & ROUTE_AUDIT) && r->err_code != YERR(NOT_LEADER))
			audit_record(r);
		return queue(r);
	}
	if (*upload_data_size) {
		if (r->stream_body && !r->resp && !r->queued) {
			size_t n = r->stream_body(r, upload_data, *upload_data_size);
			*upload_data_size -= n < *upload_data_size ? n : *upload_data_size;
			/* no room for the rest now: it comes again once there is */
			if (*upload_data_size && !r->resp)
				req_hold(r, WAIT_HANDLER);
			else if (r->resp)
				*upload_data_size = 0; /* answered: the rest goes nowhere */
			return MHD_YES;
		}
		if (!r->handled)
			req_sink(r, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->queued)
		return MHD_YES;
	if (r->route && r->route->body == BODY_STREAM && r->handled) {
		/* the body has ended: the reply comes when the handler has it */
		if (r->stream_body && !r->body_ended && !r->resp) {
			r->body_ended = true;
			r->stream_body(r, NULL, 0);
		}
		if (!r->resp) {
			req_hold(r, WAIT_HANDLER);
			return MHD_YES;
		}
		return queue(r);
	}
	if (!r->handled) {
		r->handled = true;
		if (r->too_large) {
			struct errbuf eb = ERRBUF_INIT;
			error(&eb, YERR(TOO_LARGE), "request body is over the %zu byte limit", r->body_max);
			req_error(r, &eb);
		} else {
			r->route->handler(r);
		}
		if (!r->resp && r->wait == WAIT_NONE) {
			struct errbuf eb = ERRBUF_INIT;
			error(&eb, YERR(INTERNAL), "'%s' gave no reply", r->route->pattern);
			req_error(r, &eb);
		}
		/* the audit entry of the reply, in the batch of the change it
		 * records: the reply then waits for the commit like the change's */
		if (r->resp && (r->route->flags & ROUTE_AUDIT))
			audit_record(r);
		if (r->resp && m->txn_open)
			r->wait = WAIT_COMMIT;
		if (r->wait != WAIT_NONE) {
			hold(r);
			return MHD_YES;
		}
	}
	if (!r->resp)
		return MHD_NO;
	return queue(r);
}

static int parse_listen(const char *listen, struct sockaddr_in *sa, struct errbuf *eb)
{
	const char *colon = strrchr(listen, ':');
	char host[64];
	uint64_t port;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || (size_t)(colon - listen) >= sizeof(host) || parse_u64_str(colon + 1, &port) ||
	    port > 65535)
		return error(eb, YERR(BAD_REQUEST), "--listen '%s': expected HOST:PORT", listen);
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = 0;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (!host[0])
		snprintf(host, sizeof(host), "0.0.0.0");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return error(eb, YERR(BAD_REQUEST), "--listen '%s': '%s' is not an IPv4 address", listen,
			     host);
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

unsigned http_connection_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 4000;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur <= HTTP_FD_RESERVE + 64)
		return 64;
	return rl.rlim_cur - HTTP_FD_RESERVE > UINT_MAX ? UINT_MAX
							  : (unsigned)(rl.rlim_cur - HTTP_FD_RESERVE);
}

int http_start(struct master *m, const char *listen, struct errbuf *eb)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	/* MHD_ALLOW_UPGRADE: sessions (sessions.h) take over their connections */
	unsigned flags = MHD_USE_EPOLL | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE;
	struct MHD_OptionItem opts[9];
	size_t n = 0;
	char host[64];
	int rc;

	if (listen) {
		rc = parse_listen(listen, &sa, eb);
		if (rc)
			return rc;
		if (m->tls.cert_pem && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
			return error(eb, YERR(INTERNAL), "this libmicrohttpd is built without TLS: "
					 "--tls-cert and --tls-self-signed cannot work");
		/* SIGPIPE is ignored (a reader that hangs up gets EPIPE, not a
		 * dead master), and MHD is told so: only then does it send file
		 * and memfd bodies with sendfile() instead of reading them into
		 * the connection's pool. */
		signal(SIGPIPE, SIG_IGN);
		flags |= MHD_USE_ERROR_LOG;
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &sa };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT,
						     (intptr_t)http_connection_limit(), NULL };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL };
		/* as deep as the kernel allows (net.core.somaxconn caps it): after
		 * a restart every agent connects at once, and a connection the
		 * full queue drops waits for its SYN's retries (1, 3, 7, 15 s...) */
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTEN_BACKLOG_SIZE, 65535, NULL };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL };
		if (m->tls.cert_pem) {
			flags |= MHD_USE_TLS;
			opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, m->tls.cert_pem };
			opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, m->tls.key_pem };
			opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, TLS_PRIORITIES };
		}
	} else {
		/* no socket of its own: connections come from MHD_add_connection
		 * (Unix sockets, on which MHD's log would say at every reply that
		 * TCP_NODELAY is not supported: no error log) */
		flags |= MHD_USE_NO_LISTEN_SOCKET;
	}
	opts[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	/* Each connection's memory (request line, headers, read buffer) is a
	 * pool that MHD zeroes again for every request on a kept-alive
	 * connection: 32 KiB (MHD's default) rather than 128 KiB cut that
	 * memset from a quarter of the master's CPU under 1,000 readers to a
	 * tenth, and their memory from 125 MiB to 31 MiB. Bodies do not live in
	 * it: JSON bodies are collected in r->body, code uploads go to a file.
	 *
	 * MHD_USE_TURBO: MHD reads, writes and accepts first and asks epoll
	 * after (the sockets are non-blocking): 45 us of the master's CPU per
	 * GET /v1/jobs?limit=50 under 1,000 wrk connections instead of 50. */
	m->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
				  MHD_OPTION_URI_LOG_CALLBACK, on_uri, m,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
				  MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!m->mhd && !listen)
		return error(eb, YERR(IO), "cannot start the HTTP server: %s", strerror(errno));
	if (!m->mhd && m->tls.cert_pem)
		return error(eb, YERR(IO), "cannot listen on '%s' over https: %s (libmicrohttpd "
				 "logs its reason above)", listen, strerror(errno));
	if (!m->mhd)
		return error(eb, YERR(IO), "cannot listen on '%s': %s", listen, strerror(errno));
	if (!listen) {
		m->url = xstrdup("http://unlisted");
		return 0;
	}
	info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : ntohs(sa.sin_port);
	inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
	if (!strcmp(host, "0.0.0.0"))
		snprintf(host, sizeof(host), "127.0.0.1");
	m->url = xasprintf("%s://%s:%u", m->tls.cert_pem ? "https" : "http", host,
			   (unsigned)m->port);
	return 0;
}

static void on_mhd_timer(uv_timer_t *t)
{
	http_run(t->data);
}

/* Whether a connection waits to be accepted on MHD's listening socket. */
static bool listen_pending(struct master *m)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_LISTEN_FD);
	struct pollfd p;

	if (!info || info->listen_fd == MHD_INVALID_SOCKET)
		return false;
	p = (struct pollfd){ .fd = info->listen_fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The most MHD_run calls one turn makes while connections wait. */
#define ACCEPT_RUNS_MAX 64

void http_run(struct master *m)
{
	MHD_UNSIGNED_LONG_LONG to = 0;

	/* One MHD_run accepts only a few connections (libmicrohttpd 0.9.75:
	 * ten). After a restart every agent connects at once, and a turn of
	 * the loop (a commit, a scheduling pass) is milliseconds: the queue
	 * overflowed, and a dropped connection waits for its SYN's retries (1,
	 * 3, 7, 15 s...), past its node's lease at 10,000 nodes. So a turn
	 * accepts while connections wait. */
	MHD_run(m->mhd);
	for (int i = 0; i < ACCEPT_RUNS_MAX && listen_pending(m); i++)
		MHD_run(m->mhd);
	if (MHD_get_timeout(m->mhd, &to) == MHD_YES) {
		m->mhd_timer.data = m;
		uv_timer_start(&m->mhd_timer, on_mhd_timer, to, 0);
	} else {
		uv_timer_stop(&m->mhd_timer);
	}
}

void http_stop(struct master *m)
{
	if (m->mhd)
		MHD_stop_daemon(m->mhd);
	m->mhd = NULL;
	if (m->held_ix) {
		free(m->held_ix->work);
		free(m->held_ix->heap);
		free(m->held_ix);
		m->held_ix = NULL;
	}
}
