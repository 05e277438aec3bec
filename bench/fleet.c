/*
 * bench/fleet: one process that plays N agents over the real protocol
 * (docs/protocol.md, "Agents") against a real master it starts itself, like
 * kubemark's hollow nodes or Slurm's front-end slurmd. Every simulated
 * agent registers with the join token, long-polls its work (GET
 * /v1/agents/ID/work?rev=R&wait=S, which renews its lease), reports its
 * tasks running and exited, and ships each running task's log and metric
 * points at a set rate, over two keep-alive connections of its own as a
 * real agent does (its poll thread's and its shipper's). Tasks run nothing:
 * a task "runs" for --task-ms, or until stopped when its job's name starts
 * with "fleet-long".
 *
 * The run, with the master's CPU time and RSS read from /proc:
 *   1. register N agents and wait until every one long-polls;
 *   2. idle (--idle-s): nothing runs; the master's CPU is what leases and
 *      polls cost;
 *   3. flow: --jobs jobs submitted at --rate through --submitters
 *      keep-alive connections while one more lists GET /v1/jobs?limit=100
 *      every --list-ms; every job runs on a simulated node, ships its log
 *      and metrics and succeeds; latencies of both, the master's CPU, RSS
 *      and its scheduling passes (from its /metrics);
 *   4. restart: a long job on every node and a short one on every other,
 *      the master SIGKILLed while they run, down --down-ms (the short ones
 *      end meanwhile), started again on the same data dir and port: when it
 *      is ready, when every agent is back (its "node N is back" lines), and
 *      when its view is reconciled (every long job running, every short one
 *      succeeded).
 * Agents retry as the real agent does (100 ms doubling to 10 s, with
 * jitter; an answer on one of an agent's connections ends the other's
 * back-off). Nothing here asserts a time; it prints numbers.
 *
 * usage: fleet --yard PATH [--nodes N] [--jobs J] [--rate R] [...] (--help)
 */
#include "base/compat.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* ---- options ---- */

static struct {
	const char *yard;
	unsigned nodes, jobs, rate, submitters, task_ms, cpus, ship_ms, points, idle_s, list_ms,
		down_ms, ship_conns;
	uint64_t log_rate;
	bool no_restart, keep;
	const char *master_args[16];
	unsigned nmaster_args;
} opt = { .nodes = 1000, .jobs = 100000, .rate = 2000, .submitters = 32, .task_ms = 1000,
	  .cpus = 4, .ship_ms = 5000, .points = 2, .idle_s = 10, .list_ms = 100, .down_ms = 2000,
	  .log_rate = 1024 };

/* ---- the master ---- */

static struct {
	pid_t pid;
	int out;                /* its stdout and stderr, or -1 */
	FILE *log;              /* DIR/master.log: everything it printed */
	struct strbuf line;
	char url[128];
	unsigned short port;
	bool ready;
	unsigned back;          /* "node N is back" lines since its start */
	bool all_back;          /* "0 to come" seen */
	uint64_t ready_ms, all_back_ms;
	char dir[256];          /* the temp dir: data/, master.log */
	char *admin_token, *join_token;
} master = { .pid = -1, .out = -1 };

static uint64_t start_ms_of_master;

/* ---- connections: a minimal HTTP/1.1 client (keep-alive, Content-Length) ---- */

struct conn;
typedef void (*conn_done_fn)(struct conn *c, int status, const char *body, size_t len);

enum conn_state { C_IDLE, C_CONNECTING, C_BUSY };

struct conn {
	int fd;                 /* -1: not connected */
	enum conn_state st;
	uint32_t src;           /* source address (host order) */
	struct strbuf out, in;
	size_t out_off;
	bool have_hdr, close_after;
	size_t hdr_len, clen;
	int status;
	conn_done_fn done;
	void *owner;
	uint64_t sent_us;
};

static int ep = -1;
static struct sockaddr_in master_sa;
static unsigned nconns_open;

static void conn_init(struct conn *c, void *owner, uint32_t src)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->owner = owner;
	c->src = src;
	strbuf_init(&c->out, 0);
	strbuf_init(&c->in, 0);
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0) {
		close(c->fd);
		nconns_open--;
	}
	c->fd = -1;
	c->st = C_IDLE;
	strbuf_release(&c->in);
	strbuf_release(&c->out);
	c->out_off = 0;
	c->have_hdr = false;
}

static void conn_watch(struct conn *c, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0), .data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* The request fails: the connection closes and done hears -1. */
static void conn_fail(struct conn *c)
{
	conn_done_fn done = c->done;
	bool busy = c->st != C_IDLE;

	conn_close(c);
	if (busy && done)
		done(c, -1, NULL, 0);
}

static void conn_flush(struct conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t w = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			conn_watch(c, true);
			return;
		}
		if (w < 0) {
			conn_fail(c);
			return;
		}
		c->out_off += (size_t)w;
	}
	strbuf_reset(&c->out);
	c->out_off = 0;
	conn_watch(c, false);
}

static int conn_connect(struct conn *c)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(c->src) };
	int one = 1;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.ptr = c };

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		fprintf(stderr, "fleet: socket: %s\n", strerror(errno));
		return -1;
	}
	nconns_open++;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* many source addresses: 20,000 connections to one port without
	 * running out of ephemeral ports, the port chosen at connect */
	setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    (connect(c->fd, (struct sockaddr *)&master_sa, sizeof(master_sa)) < 0 &&
	     errno != EINPROGRESS)) {
		close(c->fd);
		nconns_open--;
		c->fd = -1;
		return -1;
	}
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->st = C_CONNECTING;
	return 0;
}

/* Sends one request on c (connecting first when it has no connection);
 * done hears its status and body, or -1 when it failed. c must be idle. */
static void conn_request(struct conn *c, const char *method, const char *path, const char *token,
			 const char *body, size_t blen, conn_done_fn done)
{
	assert(c->st == C_IDLE);
	c->done = done;
	strbuf_reset(&c->out);
	c->out_off = 0;
	strbuf_addf(&c->out, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, master.url + 7);
	if (token)
		strbuf_addf(&c->out, "Authorization: Bearer %s\r\n", token);
	if (body)
		strbuf_addf(&c->out, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
	strbuf_addstr(&c->out, "\r\n");
	if (body)
		strbuf_add(&c->out, body, blen);
	strbuf_reset(&c->in);
	c->have_hdr = false;
	c->sent_us = mono_us();
	if (c->fd < 0) {
		if (conn_connect(c)) {
			c->st = C_BUSY;
			conn_fail(c);
		}
		return; /* the request goes once connected */
	}
	c->st = C_BUSY;
	conn_flush(c);
}

static bool header_is(const char *p, const char *end, const char *name, const char **val)
{
	size_t n = strlen(name);
	if ((size_t)(end - p) < n + 1 || strncasecmp(p, name, n) || p[n] != ':')
		return false;
	p += n + 1;
	while (p < end && *p == ' ')
		p++;
	*val = p;
	return true;
}

/* Parses what came in; calls done once a whole reply is there. */
static void conn_parse(struct conn *c)
{
	if (!c->have_hdr) {
		char *e = memmem(c->in.buf, c->in.len, "\r\n\r\n", 4);
		if (!e)
			return;
		c->hdr_len = (size_t)(e - c->in.buf) + 4;
		c->clen = 0;
		c->close_after = false;
		if (c->in.len < 12 || strncmp(c->in.buf, "HTTP/1.", 7)) {
			conn_fail(c);
			return;
		}
		c->status = (int)strtol(c->in.buf + 9, NULL, 10);
		bool chunked = false;
		for (char *p = memchr(c->in.buf, '\n', c->hdr_len) + 1; p < e;) {
			char *nl = memchr(p, '\n', (size_t)(e + 2 - p));
			char *end = nl ? nl - 1 : e;
			const char *v;
			if (header_is(p, end, "Content-Length", &v))
				c->clen = strtoull(v, NULL, 10);
			else if (header_is(p, end, "Connection", &v) && !strncasecmp(v, "close", 5))
				c->close_after = true;
			else if (header_is(p, end, "Transfer-Encoding", &v))
				chunked = true;
			if (!nl)
				break;
			p = nl + 1;
		}
		if (chunked) {
			fprintf(stderr, "fleet: a chunked reply: not handled\n");
			conn_fail(c);
			return;
		}
		c->have_hdr = true;
	}
	if (c->in.len < c->hdr_len + c->clen)
		return;
	conn_done_fn done = c->done;
	int status = c->status;
	struct strbuf body = c->in;
	strbuf_init(&c->in, 0);
	c->have_hdr = false;
	c->st = C_IDLE;
	if (c->close_after)
		conn_close(c);
	if (done)
		done(c, status, body.buf + c->hdr_len, c->clen);
	strbuf_release(&body);
}

static void conn_event(struct conn *c, uint32_t events)
{
	if (c->st == C_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);
		if ((events & (EPOLLERR | EPOLLHUP)) ||
		    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
			conn_fail(c);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		c->st = C_BUSY;
		conn_flush(c);
		return;
	}
	if ((events & EPOLLOUT) && c->out.len)
		conn_flush(c);
	if (c->fd < 0 || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	for (;;) {
		strbuf_grow(&c->in, 16384);
		ssize_t r = recv(c->fd, c->in.buf + c->in.len, c->in.alloc - c->in.len - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0) {
			/* closed: a reply cut short, or an idle keep-alive ended */
			conn_fail(c);
			return;
		}
		strbuf_setlen(&c->in, c->in.len + (size_t)r);
		if (c->st != C_BUSY) {
			fprintf(stderr, "fleet: bytes on an idle connection\n");
			conn_fail(c);
			return;
		}
		conn_parse(c);
		if (c->fd < 0 || c->st != C_BUSY)
			return;
	}
}

/* ---- latencies ---- */

struct lat {
	uint64_t *us;
	size_t n, a;
	unsigned errors;
};

static void lat_add(struct lat *l, uint64_t us)
{
	if (l->n == l->a) {
		l->a = l->a ? 2 * l->a : 1024;
		l->us = xrealloc(l->us, l->a * sizeof(*l->us));
	}
	l->us[l->n++] = us;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double lat_pct(struct lat *l, unsigned p)
{
	if (!l->n)
		return 0;
	sort_array(l->us, l->n, sizeof(*l->us), cmp_u64);
	size_t i = l->n * p / 100;
	return (double)l->us[i < l->n ? i : l->n - 1] / 1000.0;
}

/* ---- timers: a heap of (when, agent, generation); stale entries skipped ---- */

struct due {
	uint64_t at;
	uint32_t agent, gen;
};

static struct due *heap;
static size_t nheap, aheap;

static void heap_push(uint64_t at, uint32_t agent, uint32_t gen)
{
	if (nheap == aheap) {
		aheap = aheap ? 2 * aheap : 4096;
		heap = xrealloc(heap, aheap * sizeof(*heap));
	}
	size_t i = nheap++;
	while (i && heap[(i - 1) / 2].at > at) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = (struct due){ at, agent, gen };
}

static struct due heap_pop(void)
{
	struct due top = heap[0], last = heap[--nheap];
	size_t i = 0;
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= nheap)
			break;
		if (k + 1 < nheap && heap[k + 1].at < heap[k].at)
			k++;
		if (heap[k].at >= last.at)
			break;
		heap[i] = heap[k];
		i = k;
	}
	if (nheap)
		heap[i] = last;
	return top;
}

/* ---- the simulated agents ---- */

enum task_phase { T_NEW, T_RUN, T_END };

struct ftask {
	int64_t id;
	enum task_phase phase;
	bool forever;           /* a fleet-long job's: runs until stopped */
	bool short_job;         /* a fleet-short job's: ends at short_end_ms */
	bool in_status;         /* in the status report on the wire */
	int sig;                /* ended by a stop: 15 */
	uint64_t start_ms, end_ms, next_ship_ms;
	uint64_t log_off, metric_off, final_off;
};

enum req_kind { R_NONE, R_REGISTER, R_STATUS, R_LOG, R_METRICS };

struct fagent {
	uint32_t idx, gen;
	char name[16];
	char *token;
	int64_t rev;
	bool registered;
	struct conn poll;
	struct shipconn *req;   /* its shipper's connection, maybe shared (--ship-conns) */
	bool queued;            /* waits in req's queue */
	enum req_kind req_kind;
	int64_t req_task;       /* R_LOG, R_METRICS: the task */
	uint64_t req_off;       /* the offset the request ships up to */
	uint64_t poll_at, req_at; /* mono_ms: no request before (back-off) */
	unsigned poll_backoff, req_backoff;
	struct ftask *t;
	size_t nt, at;
	int64_t done_ids[16];   /* tasks reported ended: never started again */
	unsigned done_pos;
};

static struct fagent *agents;
static unsigned nagents;

/* A shipper connection: an agent's own, or one that several share when
 * the file descriptors of this machine do not allow two per agent (the
 * master sees the same requests over fewer connections). Agents that
 * found it busy wait in its queue. */
struct shipconn {
	struct conn c;
	uint32_t *q;
	size_t head, n, cap;
};

static struct shipconn *ships;
static unsigned nships;
static uint64_t short_end_ms = UINT64_MAX; /* when fleet-short tasks end */
static unsigned wait_s = 5;   /* the long poll's wait: a third of the lease */
static struct strbuf log_fill;  /* the bytes a task "prints" */
static struct {
	uint64_t polls, statuses, logs, metrics, log_bytes, points, errors, conn_failures, registers;
} ctr;
static uint64_t tasks_started, tasks_finished;

static void agent_step(struct fagent *a, uint64_t now);

static unsigned backoff_next(unsigned *cur)
{
	unsigned base = *cur ? *cur : 100;
	*cur = base * 2 > 10000 ? 10000 : base * 2;
	unsigned r = (unsigned)((mono_us() * 2654435761u) >> 8) & 0xff;
	return base / 2 + (base / 2) * r / 255;
}

static void agent_wake(struct fagent *a, uint64_t at)
{
	heap_push(at, a->idx, ++a->gen);
}

/* An answer on one connection: the other's back-off ends (the agent's
 * session "back"). */
static void agent_answered(struct fagent *a)
{
	if (a->poll_backoff || a->req_backoff) {
		a->poll_backoff = a->req_backoff = 0;
		a->poll_at = a->req_at = 0;
	}
}

static struct ftask *agent_task(struct fagent *a, int64_t id)
{
	for (size_t i = 0; i < a->nt; i++)
		if (a->t[i].id == id)
			return &a->t[i];
	return NULL;
}

static bool agent_done(const struct fagent *a, int64_t id)
{
	for (unsigned i = 0; i < ARRAY_SIZE(a->done_ids); i++)
		if (a->done_ids[i] == id)
			return true;
	return false;
}

static void task_end(struct ftask *t, uint64_t now, int sig)
{
	uint64_t ms = now - t->start_ms;
	if (!t->forever && !t->short_job && ms > opt.task_ms)
		ms = opt.task_ms;
	t->phase = T_END;
	t->sig = sig;
	t->final_off = opt.log_rate * ms / 1000;
}

static void on_work(struct conn *c, int status, const char *body, size_t len)
{
	struct fagent *a = c->owner;
	uint64_t now = mono_ms();

	if (status == 200) {
		json_error_t jerr;
		json_t *doc = json_loadb(body, len, 0, &jerr), *tasks, *it;
		size_t i;
		ctr.polls++;
		agent_answered(a);
		a->poll_backoff = 0;
		a->rev = json_integer_value(json_object_get(doc, "rev"));
		tasks = json_object_get(doc, "tasks");
		json_array_foreach(tasks, i, it) {
			int64_t id = json_integer_value(json_object_get(it, "id"));
			const char *desired = json_string_value(json_object_get(it, "desired"));
			const char *jname = json_string_value(json_object_get(it, "job_name"));
			struct ftask *t = agent_task(a, id);
			if (desired && !strcmp(desired, "run") && !t && !agent_done(a, id)) {
				if (a->nt == a->at) {
					a->at = a->at ? 2 * a->at : 4;
					a->t = xrealloc(a->t, a->at * sizeof(*a->t));
				}
				t = &a->t[a->nt++];
				memset(t, 0, sizeof(*t));
				t->id = id;
				t->phase = T_NEW;
				t->forever = jname && !strncmp(jname, "fleet-long", 10);
				t->short_job = jname && !strncmp(jname, "fleet-short", 11);
				t->start_ms = now;
				t->end_ms = t->forever || t->short_job ? UINT64_MAX : now + opt.task_ms;
				t->next_ship_ms = now + opt.ship_ms;
				tasks_started++;
			} else if (desired && !strcmp(desired, "stop") && t && t->phase != T_END) {
				task_end(t, now, 15);
			}
		}
		json_decref(doc);
	} else if (status == 401 || status == 404) {
		a->registered = false;
	} else {
		if (status > 0) {
			agent_answered(a);
			ctr.errors++;
		} else {
			ctr.conn_failures++;
		}
		a->poll_at = now + backoff_next(&a->poll_backoff);
	}
	agent_step(a, now);
}

static void ship_next(struct shipconn *sc, uint64_t now);

static void ship_request(struct fagent *a, const char *method, const char *path, const char *token,
			 const char *body, size_t blen, conn_done_fn done)
{
	a->req->c.owner = a;
	conn_request(&a->req->c, method, path, token, body, blen, done);
}

/* Whether a may send on its shipper connection now; when another agent's
 * request holds it, a waits in its queue. */
static bool ship_free(struct fagent *a)
{
	struct shipconn *sc = a->req;

	if (a->req_kind != R_NONE)
		return false; /* its own request is on the wire */
	if (sc->c.st == C_IDLE)
		return true;
	if (!a->queued) {
		if (sc->n == sc->cap) {
			size_t ncap = sc->cap ? 2 * sc->cap : 8;
			uint32_t *q = xcalloc(ncap, sizeof(*q));
			for (size_t i = 0; i < sc->n; i++)
				q[i] = sc->q[(sc->head + i) % sc->cap];
			free(sc->q);
			sc->q = q;
			sc->cap = ncap;
			sc->head = 0;
		}
		sc->q[(sc->head + sc->n++) % sc->cap] = a->idx;
		a->queued = true;
	}
	return false;
}

static void on_req(struct conn *c, int status, const char *body, size_t len)
{
	struct fagent *a = c->owner;
	uint64_t now = mono_ms();
	enum req_kind kind = a->req_kind;
	struct ftask *t = a->req_task ? agent_task(a, a->req_task) : NULL;

	a->req_kind = R_NONE;
	if (status > 0)
		agent_answered(a);
	if (kind == R_REGISTER && status == 200) {
		json_t *doc = json_loadb(body, len, 0, NULL);
		const char *tok = json_string_value(json_object_get(doc, "token"));
		json_int_t lease = json_integer_value(json_object_get(doc, "lease_ms"));
		if (tok) {
			free(a->token);
			a->token = xstrdup(tok);
			a->registered = true;
			a->rev = 0;
			ctr.registers++;
			if (lease > 0) {
				wait_s = (unsigned)(lease / 3000);
				wait_s = wait_s < 1 ? 1 : wait_s > 10 ? 10 : wait_s;
			}
		}
		json_decref(doc);
	} else if (kind == R_STATUS && status == 200) {
		ctr.statuses++;
		for (size_t i = 0; i < a->nt;) {
			struct ftask *x = &a->t[i];
			if (!x->in_status) {
				i++;
				continue;
			}
			x->in_status = false;
			if (x->phase == T_NEW) {
				x->phase = T_RUN;
				i++;
			} else if (x->phase == T_END) {
				a->done_ids[a->done_pos++ % ARRAY_SIZE(a->done_ids)] = x->id;
				tasks_finished++;
				a->t[i] = a->t[--a->nt];
			} else {
				i++;
			}
		}
	} else if ((kind == R_LOG || kind == R_METRICS) && (status == 200 || status == 409)) {
		/* 409: the master holds another offset; it says which */
		json_t *doc = json_loadb(body, len, 0, NULL);
		if (t && kind == R_LOG) {
			json_int_t have = json_integer_value(json_object_get(doc, "size"));
			if (status == 200) {
				ctr.logs++;
				ctr.log_bytes += a->req_off - t->log_off;
			}
			t->log_off = status == 200 ? a->req_off : (uint64_t)have;
		} else if (t) {
			json_int_t have = json_integer_value(json_object_get(doc, "offset"));
			if (status == 200)
				ctr.metrics++;
			t->metric_off = status == 200 ? a->req_off : (uint64_t)have;
		}
		json_decref(doc);
	} else if (status == 401 || status == 404) {
		if (kind != R_REGISTER)
			a->registered = false;
		else
			ctr.errors++;
	} else {
		if (status > 0)
			ctr.errors++;
		else
			ctr.conn_failures++;
		for (size_t i = 0; i < a->nt; i++)
			a->t[i].in_status = false;
		a->req_at = now + backoff_next(&a->req_backoff);
	}
	if (status > 0 && status < 500)
		a->req_backoff = 0;
	a->req_task = 0;
	agent_step(a, now);
	ship_next(a->req, now);
}

/* The agents waiting for sc, while it is free. */
static void ship_next(struct shipconn *sc, uint64_t now)
{
	while (sc->c.st == C_IDLE && sc->n) {
		struct fagent *a = &agents[sc->q[sc->head]];
		sc->head = (sc->head + 1) % sc->cap;
		sc->n--;
		a->queued = false;
		agent_step(a, now);
	}
}

static void agent_register(struct fagent *a)
{
	char body[512];
	int n = snprintf(body, sizeof(body),
			 "{\"name\": \"%s\", \"addr\": \"10.%u.%u.%u\", \"ports\": [30000, 32000], "
			 "\"cpus\": %u, \"memory\": %llu, \"gpus\": [], \"tasks\": [], "
			 "\"runtimes\": [\"process\"], \"pool\": \"default\", \"labels\": {}}",
			 a->name, (a->idx >> 16) & 255, (a->idx >> 8) & 255, a->idx & 255, opt.cpus,
			 (unsigned long long)opt.cpus << 32);
	a->req_kind = R_REGISTER;
	ship_request(a, "POST", "/v1/agents", master.join_token, body, (size_t)n, on_req);
}

/* The next request on the agent's shipper connection: log bytes and
 * metric points of a task that has some due, else a status report of
 * every change. Returns false when there is nothing to send. */
static bool agent_ship(struct fagent *a, uint64_t now)
{
	struct strbuf sb = STRBUF_INIT;
	char path[128];

	for (size_t i = 0; i < a->nt; i++) {
		struct ftask *t = &a->t[i];
		uint64_t want;
		if (t->phase == T_NEW)
			continue;
		if (t->phase == T_END)
			want = t->final_off;
		else if (now >= t->next_ship_ms)
			want = opt.log_rate * (now - t->start_ms) / 1000;
		else
			continue;
		if (want > t->log_off) {
			uint64_t n = want - t->log_off;
			if (n > 1 << 20)
				n = 1 << 20;
			while (log_fill.len < n)
				strbuf_add(&log_fill, log_fill.buf, log_fill.len);
			snprintf(path, sizeof(path), "/v1/tasks/%" PRId64 "/log?stream=stdout&offset=%" PRIu64,
				 t->id, t->log_off);
			a->req_kind = R_LOG;
			a->req_task = t->id;
			a->req_off = t->log_off + n;
			ship_request(a, "POST", path, a->token, log_fill.buf, (size_t)n, on_req);
			return true;
		}
		if (opt.points && t->metric_off < t->log_off) {
			/* the points of the lines in [metric_off, log_off) */
			strbuf_addf(&sb, "{\"end\": %" PRIu64 ", \"points\": [", t->log_off);
			for (unsigned k = 0; k < opt.points; k++)
				strbuf_addf(&sb, "%s{\"name\": \"m%u\", \"value\": %u.5}", k ? ", " : "", k, k);
			strbuf_addstr(&sb, "]}");
			snprintf(path, sizeof(path),
				 "/v1/tasks/%" PRId64 "/metrics?stream=stdout&offset=%" PRIu64, t->id,
				 t->metric_off);
			a->req_kind = R_METRICS;
			a->req_task = t->id;
			a->req_off = t->log_off;
			ship_request(a, "POST", path, a->token, sb.buf, sb.len, on_req);
			ctr.points += opt.points;
			strbuf_release(&sb);
			return true;
		}
		if (t->phase == T_RUN && now >= t->next_ship_ms)
			t->next_ship_ms = now + opt.ship_ms;
	}
	/* status: tasks newly running, tasks ended with everything shipped */
	strbuf_addstr(&sb, "{\"tasks\": [");
	bool any = false;
	for (size_t i = 0; i < a->nt; i++) {
		struct ftask *t = &a->t[i];
		if (t->phase == T_NEW)
			strbuf_addf(&sb, "%s{\"id\": %" PRId64 ", \"state\": \"running\", \"pid\": %u}",
				    any ? ", " : "", t->id, 1000 + (unsigned)i);
		else if (t->phase == T_END && t->log_off >= t->final_off &&
			 (!opt.points || t->metric_off >= t->log_off))
			strbuf_addf(&sb, "%s{\"id\": %" PRId64 ", \"state\": \"exited\", \"exit_code\": %s, "
				    "\"signal\": %s, \"cpu_usec\": 1000, \"memory_peak\": 1048576}",
				    any ? ", " : "", t->id, t->sig ? "null" : "0", t->sig ? "15" : "null");
		else
			continue;
		t->in_status = true;
		any = true;
	}
	strbuf_addstr(&sb, "]}");
	if (any) {
		snprintf(path, sizeof(path), "/v1/agents/%s/status", a->name);
		a->req_kind = R_STATUS;
		ship_request(a, "POST", path, a->token, sb.buf, sb.len, on_req);
	}
	strbuf_release(&sb);
	return any;
}

static void agent_step(struct fagent *a, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (!a->registered) {
		if (ship_free(a)) {
			if (now >= a->req_at)
				agent_register(a);
			else
				agent_wake(a, a->req_at);
		}
		return;
	}
	for (size_t i = 0; i < a->nt; i++)
		if (a->t[i].phase == T_RUN &&
		    (now >= a->t[i].end_ms || (a->t[i].short_job && now >= short_end_ms)))
			task_end(&a->t[i], now, 0);
	if (a->poll.st == C_IDLE) {
		if (now >= a->poll_at) {
			char path[96];
			snprintf(path, sizeof(path), "/v1/agents/%s/work?rev=%" PRId64 "&wait=%u", a->name,
				 a->rev, a->poll_backoff ? 0 : wait_s);
			conn_request(&a->poll, "GET", path, a->token, NULL, 0, on_work);
		} else {
			next = a->poll_at;
		}
	}
	/* a request on the wire calls agent_step again when it is answered */
	if (ship_free(a)) {
		if (now < a->req_at)
			next = next < a->req_at ? next : a->req_at;
		else if (!agent_ship(a, now))
			for (size_t i = 0; i < a->nt; i++) {
				struct ftask *t = &a->t[i];
				if (t->phase != T_RUN)
					continue;
				next = next < t->end_ms ? next : t->end_ms;
				next = next < t->next_ship_ms ? next : t->next_ship_ms;
			}
	}
	if (next != UINT64_MAX)
		agent_wake(a, next > now ? next : now + 1);
}

/* ---- clients: submitters, a lister, a /metrics reader ---- */

struct client {
	struct conn c;
	int kind;               /* 0 submit, 1 list, 2 metrics */
	uint64_t next_ms;
};

static struct client *clients;
static unsigned nclients;
static struct lat lat_submit, lat_list;
static unsigned submitted, submit_target, submit_inflight, submit_ok;
static uint64_t submit_t0;
static const char *submit_prefix = "fleet";
static bool listing;
static unsigned list_ms;

/* What the master's /metrics said last. */
static struct {
	uint64_t succeeded, running, failed, queued;
	double pass_sum;
	uint64_t pass_count;
	uint64_t pass_le[32];   /* cumulative bucket counts */
	double pass_bound[32];
	unsigned nbuckets;
	uint64_t at_ms;
	bool pending;
} prom;
static unsigned metrics_ms = 1000;

static uint64_t prom_value(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	return p ? strtoull(p + strlen(name), NULL, 10) : 0;
}

static void on_metrics(struct conn *c, int status, const char *body, size_t len)
{
	prom.pending = false;
	if (status != 200)
		return;
	char *text = xstrndup(body, len);
	prom.succeeded = prom_value(text, "yard_jobs{state=\"succeeded\"} ");
	prom.running = prom_value(text, "yard_jobs{state=\"running\"} ");
	prom.failed = prom_value(text, "yard_jobs{state=\"failed\"} ");
	prom.queued = prom_value(text, "yard_jobs{state=\"queued\"} ");
	const char *s = strstr(text, "yard_scheduler_pass_duration_seconds_sum ");
	prom.pass_sum = s ? strtod(s + 41, NULL) : 0;
	prom.pass_count = prom_value(text, "yard_scheduler_pass_duration_seconds_count ");
	prom.nbuckets = 0;
	for (const char *b = text; (b = strstr(b, "yard_scheduler_pass_duration_seconds_bucket{le=\"")) &&
				   prom.nbuckets < ARRAY_SIZE(prom.pass_le);) {
		b += strlen("yard_scheduler_pass_duration_seconds_bucket{le=\"");
		prom.pass_bound[prom.nbuckets] = strncmp(b, "+Inf", 4) ? strtod(b, NULL) : 1e9;
		const char *v = strstr(b, "} ");
		prom.pass_le[prom.nbuckets++] = v ? strtoull(v + 2, NULL, 10) : 0;
	}
	prom.at_ms = mono_ms();
	free(text);
}

static void on_submit(struct conn *c, int status, const char *body, size_t len)
{
	struct client *cl = c->owner;
	submit_inflight--;
	if (status == 201) {
		lat_add(&lat_submit, mono_us() - c->sent_us);
		submit_ok++;
	} else {
		lat_submit.errors++;
		if (lat_submit.errors <= 5)
			fprintf(stderr, "fleet: submit answered %d: %.*s\n", status, (int)(len > 300 ? 300 : len),
				body ? body : "");
	}
	(void)cl;
}

static void on_list(struct conn *c, int status, const char *body, size_t len)
{
	if (status == 200)
		lat_add(&lat_list, mono_us() - c->sent_us);
	else
		lat_list.errors++;
}

static void clients_step(uint64_t now, uint64_t *next)
{
	for (unsigned i = 0; i < nclients; i++) {
		struct client *cl = &clients[i];
		if (cl->c.st != C_IDLE)
			continue;
		if (cl->kind == 0 && submitted < submit_target) {
			uint64_t due = submit_t0 + (uint64_t)submitted * 1000 / opt.rate;
			if (now < due) {
				*next = *next < due ? *next : due;
				continue;
			}
			char body[256];
			int n = snprintf(body, sizeof(body),
					 "{\"spec\": {\"name\": \"%s-%u\", \"command\": [\"/bin/true\"], "
					 "\"tasks\": {\"worker\": {\"cpus\": 1}}}}",
					 submit_prefix, submitted);
			submitted++;
			submit_inflight++;
			conn_request(&cl->c, "POST", "/v1/jobs", master.admin_token, body, (size_t)n, on_submit);
		} else if (cl->kind == 1 && listing) {
			if (now < cl->next_ms) {
				*next = *next < cl->next_ms ? *next : cl->next_ms;
				continue;
			}
			cl->next_ms = now + list_ms;
			conn_request(&cl->c, "GET", "/v1/jobs?limit=100", master.admin_token, NULL, 0, on_list);
		} else if (cl->kind == 2) {
			if (now < cl->next_ms) {
				*next = *next < cl->next_ms ? *next : cl->next_ms;
				continue;
			}
			cl->next_ms = now + metrics_ms;
			prom.pending = true;
			conn_request(&cl->c, "GET", "/metrics", master.admin_token, NULL, 0, on_metrics);
		}
	}
}

/* ---- the master process ---- */

static void master_line(const char *line)
{
	if (master.log)
		fprintf(master.log, "%s\n", line);
	const char *u = strstr(line, "yard master ready url=");
	if (u) {
		snprintf(master.url, sizeof(master.url), "%s", u + strlen("yard master ready url="));
		char *sp = strchr(master.url, ' ');
		if (sp)
			*sp = 0;
		master.port = (unsigned short)strtoul(strrchr(master.url, ':') + 1, NULL, 10);
		master.ready = true;
		master.ready_ms = mono_ms();
	}
	if (strstr(line, " is back after ")) {
		master.back++;
		if (strstr(line, "; 0 to come")) {
			master.all_back = true;
			master.all_back_ms = mono_ms();
		}
	}
}

static void master_read(void)
{
	char buf[65536];
	for (;;) {
		ssize_t r = read(master.out, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			epoll_ctl(ep, EPOLL_CTL_DEL, master.out, NULL);
			close(master.out);
			master.out = -1;
			return;
		}
		strbuf_add(&master.line, buf, (size_t)r);
		char *p = master.line.buf, *nl;
		while ((nl = memchr(p, '\n', master.line.len - (size_t)(p - master.line.buf)))) {
			*nl = 0;
			master_line(p);
			p = nl + 1;
		}
		size_t left = master.line.len - (size_t)(p - master.line.buf);
		memmove(master.line.buf, p, left);
		strbuf_setlen(&master.line, left);
	}
}

static int master_start(void)
{
	int pfd[2];
	char listen[64], data[300];
	const char *argv[40];
	unsigned n = 0;

	snprintf(listen, sizeof(listen), "127.0.0.1:%u", master.port);
	snprintf(data, sizeof(data), "%s/data", master.dir);
	argv[n++] = opt.yard;
	argv[n++] = "master";
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--data-dir";
	argv[n++] = data;
	argv[n++] = "--rate-limit";
	argv[n++] = "0";
	for (unsigned i = 0; i < opt.nmaster_args; i++)
		argv[n++] = opt.master_args[i];
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC))
		return -1;
	master.ready = master.all_back = false;
	master.back = 0;
	start_ms_of_master = mono_ms();
	master.pid = fork();
	if (master.pid < 0)
		return -1;
	if (master.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* no master left behind a killed fleet */
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execv(opt.yard, (char **)argv);
		_exit(127);
	}
	close(pfd[1]);
	master.out = pfd[0];
	fcntl(master.out, F_SETFL, O_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &master };
	epoll_ctl(ep, EPOLL_CTL_ADD, master.out, &ev);
	return 0;
}

static void master_stop(int sig)
{
	if (master.pid <= 0)
		return;
	kill(master.pid, sig);
	waitpid(master.pid, NULL, 0);
	master.pid = -1;
	/* what it printed last */
	for (int i = 0; i < 50 && master.out >= 0; i++)
		master_read();
}

/* CPU seconds (user + system) the master has used. */
static double master_cpu_s(void)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)master.pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p)
		return 0;
	/* fields after the name: state(3) ... utime(14) stime(15) */
	p += 2;
	for (int field = 3; field < 14 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return 0;
	ut = strtoull(p, &p, 10);
	st = strtoull(p, NULL, 10);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* VmRSS (or VmHWM with hwm) of the master in MiB. */
static double master_rss(bool hwm)
{
	char path[64], line[256];
	double v = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)master.pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, hwm ? "VmHWM:" : "VmRSS:", 6))
			v = strtod(line + 6, NULL) / 1024.0;
	fclose(f);
	return v;
}

/* ---- the loop ---- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static void loop_once(unsigned max_ms)
{
	struct epoll_event evs[512];
	uint64_t now = mono_ms(), next = now + max_ms;

	clients_step(now, &next);
	while (nheap && heap[0].at <= now) {
		struct due d = heap_pop();
		struct fagent *a = &agents[d.agent];
		if (d.gen == a->gen)
			agent_step(a, now);
	}
	if (nheap && heap[0].at < next)
		next = heap[0].at;
	int timeout = next > now ? (int)(next - now) : 0;
	int n = epoll_wait(ep, evs, ARRAY_SIZE(evs), timeout);
	for (int i = 0; i < n; i++) {
		if (evs[i].data.ptr == &master)
			master_read();
		else
			conn_event(evs[i].data.ptr, evs[i].events);
	}
}

/* Runs the loop until done() holds or timeout_ms passes; false on timeout. */
static bool loop_until(bool (*done)(void), uint64_t timeout_ms)
{
	uint64_t end = mono_ms() + timeout_ms;
	while (!done()) {
		if (interrupted || mono_ms() > end)
			return false;
		loop_once(20);
	}
	return true;
}

static bool master_ready(void)
{
	return master.ready;
}

static unsigned nregistered;
static bool all_registered(void)
{
	nregistered = 0;
	for (unsigned i = 0; i < nagents; i++)
		nregistered += agents[i].registered && agents[i].poll.st == C_BUSY;
	return nregistered == nagents;
}

static bool never(void)
{
	return false;
}

static bool submissions_done(void)
{
	return submitted == submit_target && !submit_inflight;
}

static uint64_t want_succeeded, want_running;
static bool prom_fresh(void)
{
	return !prom.pending;
}
static bool jobs_settled(void)
{
	return submissions_done() && prom.succeeded + prom.failed >= want_succeeded &&
	       prom.running == want_running && !prom.pending;
}

static void poll_metrics_now(void)
{
	for (unsigned i = 0; i < nclients; i++)
		if (clients[i].kind == 2)
			clients[i].next_ms = 0;
	prom.pending = true;
	loop_once(0);
	loop_until(prom_fresh, 30000);
}

/* The scheduling passes since a previous reading: mean and the p99's
 * bucket bound, in ms. */
static void print_passes(uint64_t count0, double sum0, const uint64_t *le0)
{
	uint64_t n = prom.pass_count - count0;
	double p99 = 0;
	for (unsigned b = 0; b < prom.nbuckets && n; b++)
		if ((prom.pass_le[b] - le0[b]) * 100 >= n * 99) {
			p99 = prom.pass_bound[b] * 1000;
			break;
		}
	printf("  scheduling passes: %" PRIu64 ", mean %.2f ms, p99 <= %.1f ms (the master's "
	       "yard_scheduler_pass_duration_seconds)\n",
	       n, n ? (prom.pass_sum - sum0) * 1000 / (double)n : 0.0, p99);
}

static void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: fleet --yard PATH [--nodes N] [--jobs J] [--rate JOBS_PER_S] [--submitters K]\n"
		"             [--task-ms MS] [--cpus N] [--log-rate BYTES_PER_S] [--ship-ms MS]\n"
		"             [--points N] [--idle-s S] [--list-ms MS] [--down-ms MS] [--no-restart]\n"
		"             [--ship-conns K] [--keep] [--master-arg ARG ...]\n"
		"--ship-conns K: the agents' status, log and metric requests share K connections\n"
		"(default: one per agent, or as many as the file descriptor limit allows)\n");
	exit(code);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned *u = NULL;
		if (!strcmp(a, "--help"))
			usage(0);
		if (!strcmp(a, "--no-restart")) {
			opt.no_restart = true;
			continue;
		}
		if (!strcmp(a, "--keep")) {
			opt.keep = true;
			continue;
		}
		if (!v)
			usage(2);
		i++;
		if (!strcmp(a, "--yard"))
			opt.yard = v;
		else if (!strcmp(a, "--master-arg") && opt.nmaster_args < ARRAY_SIZE(opt.master_args))
			opt.master_args[opt.nmaster_args++] = v;
		else if (!strcmp(a, "--log-rate"))
			opt.log_rate = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--nodes"))
			u = &opt.nodes;
		else if (!strcmp(a, "--jobs"))
			u = &opt.jobs;
		else if (!strcmp(a, "--rate"))
			u = &opt.rate;
		else if (!strcmp(a, "--submitters"))
			u = &opt.submitters;
		else if (!strcmp(a, "--task-ms"))
			u = &opt.task_ms;
		else if (!strcmp(a, "--cpus"))
			u = &opt.cpus;
		else if (!strcmp(a, "--ship-ms"))
			u = &opt.ship_ms;
		else if (!strcmp(a, "--points"))
			u = &opt.points;
		else if (!strcmp(a, "--idle-s"))
			u = &opt.idle_s;
		else if (!strcmp(a, "--list-ms"))
			u = &opt.list_ms;
		else if (!strcmp(a, "--down-ms"))
			u = &opt.down_ms;
		else if (!strcmp(a, "--ship-conns"))
			u = &opt.ship_conns;
		else
			usage(2);
		if (u) {
			char *end;
			unsigned long x = strtoul(v, &end, 10);
			if (*end || x > UINT_MAX) {
				fprintf(stderr, "fleet: %s: expected a number, got '%s'\n", a, v);
				exit(2);
			}
			*u = (unsigned)x;
		}
	}
	if (!opt.yard || !opt.nodes || !opt.rate || !opt.submitters || !opt.ship_ms || !opt.list_ms)
		usage(2);
}

static char *read_token(const char *name)
{
	char path[400];
	struct strbuf sb = STRBUF_INIT;
	snprintf(path, sizeof(path), "%s/data/%s", master.dir, name);
	if (strbuf_read_file(&sb, path, 4096) < 0) {
		fprintf(stderr, "fleet: cannot read '%s': %s\n", path, strerror(errno));
		exit(1);
	}
	strbuf_trim(&sb);
	return strbuf_detach(&sb, NULL);
}

static void cleanup(void)
{
	master_stop(SIGTERM);
	if (master.log)
		fclose(master.log);
	master.log = NULL;
	if (!opt.keep && master.dir[0]) {
		pid_t p = fork();
		if (p == 0) {
			execl("/bin/rm", "rm", "-rf", master.dir, (char *)NULL);
			_exit(127);
		}
		if (p > 0)
			waitpid(p, NULL, 0);
	} else if (master.dir[0]) {
		printf("kept %s\n", master.dir);
	}
}

int main(int argc, char **argv)
{
	struct rlimit rl;
	rlim_t want;
	double cpu0, secs;
	uint64_t t0;
	int rc = 1;

	parse_args(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* two connections an agent, here and at the master (which inherits
	 * the limit); where the hard limit does not allow that, the shipper
	 * requests share connections */
	getrlimit(RLIMIT_NOFILE, &rl);
	want = (rlim_t)opt.nodes * 2 + opt.submitters + 256;
	if (rl.rlim_max < want) {
		struct rlimit more = { want, want };
		if (!setrlimit(RLIMIT_NOFILE, &more))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want && !opt.ship_conns) {
		if (rl.rlim_cur < (rlim_t)opt.nodes + 2048) {
			fprintf(stderr, "fleet: %u agents need at least %u file descriptors; the limit is %llu\n",
				opt.nodes, opt.nodes + 2048, (unsigned long long)rl.rlim_cur);
			return 1;
		}
		opt.ship_conns = (unsigned)(rl.rlim_cur - opt.nodes - 1024) / 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	snprintf(master.dir, sizeof(master.dir), "%s/yard-fleet-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(master.dir)) {
		fprintf(stderr, "fleet: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	char logpath[400];
	snprintf(logpath, sizeof(logpath), "%s/master.log", master.dir);
	master.log = fopen(logpath, "w");
	ep = epoll_create1(EPOLL_CLOEXEC);
	strbuf_init(&master.line, 0);
	for (unsigned i = 0; i < 64; i++)
		strbuf_addf(&log_fill, "@yard {\"step\": %u, \"loss\": 0.%04u} padding padding pad\n", i, i);

	if (master_start() || !loop_until(master_ready, 30000)) {
		fprintf(stderr, "fleet: the master did not start (its log: %s)\n", logpath);
		goto out;
	}
	master.admin_token = read_token("admin-token");
	master.join_token = read_token("join-token");
	master_sa = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(master.port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	printf("fleet: %u agents, master pid %d at %s (--rate-limit 0: limits off), %s\n", opt.nodes,
	       (int)master.pid, master.url, master.dir);

	nagents = opt.nodes;
	agents = xcalloc(nagents, sizeof(*agents));
	nships = opt.ship_conns ? opt.ship_conns : nagents;
	ships = xcalloc(nships, sizeof(*ships));
	if (opt.ship_conns)
		printf("fleet: the agents' status, log and metric requests share %u connections "
		       "(--ship-conns); their long polls have one each\n", nships);
	for (unsigned i = 0; i < nagents; i++) {
		struct fagent *a = &agents[i];
		a->idx = i;
		snprintf(a->name, sizeof(a->name), "f%05u", i);
		/* 127.0.0.2 .. 127.0.0.201 */
		conn_init(&a->poll, a, 0x7f000002u + i % 200);
		a->req = &ships[i % nships];
	}
	for (unsigned i = 0; i < nships; i++)
		conn_init(&ships[i].c, NULL, 0x7f000002u + (i + 100) % 200);
	nclients = opt.submitters + 2;
	clients = xcalloc(nclients, sizeof(*clients));
	for (unsigned i = 0; i < nclients; i++) {
		clients[i].kind = i < opt.submitters ? 0 : i == opt.submitters ? 1 : 2;
		conn_init(&clients[i].c, &clients[i], 0x7f000001u);
	}

	/* 1. registration */
	t0 = mono_ms();
	cpu0 = master_cpu_s();
	for (unsigned i = 0; i < nagents; i++)
		agent_wake(&agents[i], t0 + (uint64_t)i * 1000 / 2000); /* 2,000 joins a second */
	if (!loop_until(all_registered, 120000 + (uint64_t)nagents * 2)) {
		fprintf(stderr, "fleet: only %u of %u agents registered and polling\n", nregistered, nagents);
		goto out;
	}
	secs = (double)(mono_ms() - t0) / 1000;
	printf("registered: %u agents polling in %.1f s (paced at 2,000 a second); master CPU %.1f s; "
	       "RSS %.1f MiB\n",
	       nagents, secs, master_cpu_s() - cpu0, master_rss(false));

	/* 2. idle: only leases and polls */
	loop_until(never, 2000);
	uint64_t polls0 = ctr.polls;
	cpu0 = master_cpu_s();
	t0 = mono_ms();
	loop_until(never, (uint64_t)opt.idle_s * 1000);
	secs = (double)(mono_ms() - t0) / 1000;
	printf("idle (%u s, long polls of %u s): master CPU %.1f %% of one core on leases and polls; "
	       "%.0f polls answered a second; RSS %.1f MiB\n",
	       opt.idle_s, wait_s, 100 * (master_cpu_s() - cpu0) / secs,
	       (double)(ctr.polls - polls0) / secs, master_rss(false));
	if (interrupted)
		goto out;

	/* 3. flow */
	poll_metrics_now();
	uint64_t pc0 = prom.pass_count, le0[32];
	double ps0 = prom.pass_sum;
	memcpy(le0, prom.pass_le, sizeof(le0));
	uint64_t ok0 = prom.succeeded;
	struct { uint64_t logs, bytes, metrics, statuses; } c0 = { ctr.logs, ctr.log_bytes, ctr.metrics,
								    ctr.statuses };
	submit_target = opt.jobs;
	submit_t0 = mono_ms();
	listing = true;
	list_ms = opt.list_ms;
	want_succeeded = ok0 + opt.jobs;
	want_running = 0;
	cpu0 = master_cpu_s();
	t0 = mono_ms();
	double rss_max = 0;
	uint64_t last_rss = 0;
	while (!jobs_settled() && !interrupted) {
		loop_once(20);
		if (mono_ms() - last_rss >= 500) {
			last_rss = mono_ms();
			double r = master_rss(false);
			rss_max = r > rss_max ? r : rss_max;
		}
		if (mono_ms() - t0 > 600000 + (uint64_t)opt.jobs * 20) {
			fprintf(stderr, "fleet: the flow did not settle: %" PRIu64 " of %u jobs ended\n",
				prom.succeeded + prom.failed - ok0, opt.jobs);
			break;
		}
	}
	listing = false;
	secs = (double)(mono_ms() - t0) / 1000;
	double flow_cpu = master_cpu_s() - cpu0;
	poll_metrics_now();
	printf("flow: %u jobs submitted at %u/s, %" PRIu64 " succeeded, %" PRIu64 " failed, in %.1f s "
	       "(%.0f jobs/s end to end); master CPU %.1f %% of one core; RSS peak %.1f MiB, now %.1f MiB\n",
	       submit_ok, opt.rate, prom.succeeded - ok0, prom.failed, secs,
	       (double)(prom.succeeded - ok0) / secs, 100 * flow_cpu / secs, rss_max, master_rss(false));
	printf("  POST /v1/jobs: p50 %.2f ms, p99 %.2f ms over %zu (%u errors)\n", lat_pct(&lat_submit, 50),
	       lat_pct(&lat_submit, 99), lat_submit.n, lat_submit.errors);
	printf("  GET /v1/jobs?limit=100 (every %u ms): p50 %.2f ms, p99 %.2f ms over %zu (%u errors)\n",
	       opt.list_ms, lat_pct(&lat_list, 50), lat_pct(&lat_list, 99), lat_list.n, lat_list.errors);
	print_passes(pc0, ps0, le0);
	printf("  agents: %" PRIu64 " status reports, %" PRIu64 " log posts (%.1f MiB), %" PRIu64
	       " metric posts; %" PRIu64 " error replies, %" PRIu64 " connections lost\n",
	       ctr.statuses - c0.statuses, ctr.logs - c0.logs, (double)(ctr.log_bytes - c0.bytes) / 1048576,
	       ctr.metrics - c0.metrics, ctr.errors, ctr.conn_failures);
	if (interrupted)
		goto out;

	/* 4. a restart with every node busy */
	if (!opt.no_restart) {
		unsigned nshort = nagents / 2;
		submit_prefix = "fleet-long";
		submitted = 0;
		submit_target = nagents;
		submit_t0 = mono_ms();
		poll_metrics_now();
		want_succeeded = 0;
		want_running = nagents;
		metrics_ms = 200;
		if (!loop_until(jobs_settled, 120000 + (uint64_t)nagents * 20)) {
			fprintf(stderr, "fleet: %" PRIu64 " of %u long jobs running\n", prom.running, nagents);
			goto out;
		}
		submit_prefix = "fleet-short";
		submitted = 0;
		submit_target = nshort;
		submit_t0 = mono_ms();
		want_running = nagents + nshort;
		if (!loop_until(jobs_settled, 120000 + (uint64_t)nagents * 20)) {
			fprintf(stderr, "fleet: %" PRIu64 " of %u jobs running\n", prom.running,
				nagents + nshort);
			goto out;
		}
		uint64_t ok_before = prom.succeeded;
		master_stop(SIGKILL);
		printf("restart: master SIGKILLed with %u long and %u short jobs running; down %u ms\n",
		       nagents, nshort, opt.down_ms);
		for (unsigned i = 0; i < nclients; i++)
			conn_close(&clients[i].c);
		prom.pending = false;
		/* the short jobs end while no master listens */
		short_end_ms = mono_ms() + opt.down_ms / 2;
		for (unsigned i = 0; i < nagents; i++)
			agent_wake(&agents[i], short_end_ms);
		loop_until(never, opt.down_ms);
		if (master_start() || !loop_until(master_ready, 120000)) {
			fprintf(stderr, "fleet: the master did not start again\n");
			goto out;
		}
		uint64_t ready = master.ready_ms - start_ms_of_master;
		metrics_ms = 50;
		want_succeeded = ok_before + nshort;
		want_running = nagents;
		bool rec = loop_until(jobs_settled, 120000) && !interrupted;
		uint64_t rec_ms = mono_ms() - start_ms_of_master;
		loop_until(never, 0);
		if (!master.all_back)
			loop_until(never, 5000);
		printf("  after its start: ready %" PRIu64 " ms; every agent back %s%" PRIu64 " ms (%u of %u "
		       "'is back' lines); reconciled (%u long jobs running, %u short ones succeeded) %s%" PRIu64
		       " ms; RSS %.1f MiB\n",
		       ready, master.all_back ? "" : "NOT, ",
		       master.all_back ? master.all_back_ms - start_ms_of_master : 0, master.back, nagents,
		       nagents, nshort, rec ? "" : "NOT, ", rec_ms, master_rss(false));
	}
	rc = 0;
out:
	if (interrupted)
		fprintf(stderr, "fleet: interrupted\n");
	cleanup();
	return rc;
}
