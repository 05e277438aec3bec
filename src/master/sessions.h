/*
 * Sessions (docs/protocol.md, "Sessions"): a client's byte stream into a
 * running task — `yard exec` now; attach, port-forward and the HTTP proxy
 * on the same transport. Agents dial the master and the master never
 * dials an agent, so every session has two legs, both connections that
 * MHD upgraded (MHD_create_response_for_upgrade) and handed over:
 *
 *   client --(WebSocket, GET /v1/jobs/{id}/exec ...)--> master
 *   agent  --(GET /v1/agents/{node}/sessions/{S}, Upgrade: yard-session/1)--> master
 *
 * Once both are up the master is a byte pipe between them on its event
 * loop: a uv_poll per leg, non-blocking, with a buffer of SESSION_BUF bytes
 * per direction; a full buffer stops the reading of the leg that fills it,
 * so a slow reader at one end slows the writer at the other (the kernel's
 * socket buffers and then the process itself), never the master's memory.
 * For exec (and attach and port) the agent leg carries the client's
 * WebSocket frames unchanged: the agent is the WebSocket server. The
 * master tracks frame boundaries on the agent -> client bytes
 * (common/wsframe.h's tracker), so that when it ends a session itself
 * (the agent's connection dropped without a close frame, the node was
 * lost, the agent never dialed, the master stops) it can send the client a
 * status message naming why and a close frame (1011) where a frame ends.
 *
 * Sessions live in the master's memory only (as execs.h): none survives
 * the master, and the agent learns of each from its work reply (the node's
 * revision is bumped, so a held long poll answers at once).
 *
 * http and ws sessions (the HTTP proxy, master/proxy.h) carry raw bytes on
 * the agent leg: the agent splices them to 127.0.0.1:port in the task's
 * node. Their client is not a leg of the session's own: the proxy serves
 * the client's request through MHD as any reply (struct
 * session_client_ops), writes the request onto the agent leg with
 * sessions_leg_write and takes the upstream's answer off it with
 * sessions_down_take; a ws session gets a client leg once the proxy has
 * answered its client's upgrade with the upstream's 101. attach and port
 * are exec's WebSocket transport under another kind name.
 */
#ifndef YARD_MASTER_SESSIONS_H
#define YARD_MASTER_SESSIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "common/wsframe.h"
#include "master/core.h"

struct req;
struct MHD_Response;
struct MHD_UpgradeResponseHandle;

/* Bytes buffered per direction of a session. */
#define SESSION_BUF (64 * 1024)
/* How long an agent has to dial a session it was told of. */
#define SESSION_DIAL_MS 15000
/* How long an ending session's client has to take what is left for it. */
#define SESSION_DRAIN_MS 10000
/* How long a session of a task that ended may go on (its agent ends it
 * with the exit status of what it ran) before the master cuts it. */
#define SESSION_TASK_END_MS 5000
/* The most sessions a master holds at once. */
#define SESSIONS_MAX 1024
/* The most argv entries and bytes of a session's command. */
#define SESSION_ARGV_MAX 4096
#define SESSION_ARGV_BYTES (64 * 1024)

enum session_kind {
	SESSION_EXEC,   /* a command in the task (yard exec) */
	SESSION_ATTACH, /* the terminal of an interactive task */
	SESSION_PORT,   /* a TCP connection to 127.0.0.1:port in the task's node */
	SESSION_HTTP,   /* one proxied HTTP request to that port */
	SESSION_WS,     /* one proxied WebSocket to that port */
	SESSION_KIND__COUNT
};

/* session_kind_name: "exec", "attach", "port", "http", "ws". */
const char *session_kind_name(enum session_kind k);

/* What a session runs, as its client asked; the agent gets it in its work
 * reply. */
struct session_spec {
	enum session_kind kind;
	char **argv;            /* exec: NULL-terminated (owned by the session once created) */
	bool tty;               /* exec: a pseudo-terminal */
	bool stdin_open;        /* exec: the client sends stdin */
	unsigned cols, rows;    /* exec, attach: the terminal's size */
	unsigned port;          /* port, http, ws: 1..65535 */
};

enum session_leg_kind { SESSION_LEG_CLIENT, SESSION_LEG_AGENT };

/* One direction's bytes: [start, start + len) of data. */
struct session_buf {
	char *data;             /* owned, SESSION_BUF bytes */
	size_t start, len;
};

/* One leg: a connection MHD upgraded and handed over. */
struct session_leg {
	struct session *s;      /* back pointer */
	int fd;                 /* -1 until upgraded (and once closed) */
	struct MHD_UpgradeResponseHandle *urh;
	uv_poll_t poll;         /* fd's */
	int events;             /* UV_READABLE|UV_WRITABLE it is watched for */
	/* over TLS: MHD's GnuTLS session of the connection (gnutls_session_t,
	 * borrowed), which the master reads and writes itself on the TCP
	 * socket (sessions.c says why), and that socket's poll; NULL: plain */
	void *tls;
	uv_poll_t tcp_poll;
	size_t tls_pending;     /* bytes of a record GnuTLS holds back (EAGAIN), 0: none */
	bool up;                /* upgraded, its poll initialised */
	bool eof;               /* it was read to its end (or it failed) */
	bool shut;              /* its write side was shut down */
	bool closed;            /* handed back to MHD */
};

struct session;

/* What serves a session's client when the client is no leg of its own
 * (an http session's, a ws session's until its upgrade): the proxy. */
struct session_client_ops {
	/* s is ending (no more relaying; down keeps what the agent sent):
	 * why is the master's reason ("node 'n1' was lost"), NULL when the
	 * agent's leg ended (the upstream closed: the end of its answer) */
	void (*ended)(struct session *s, void *arg, const char *why);
	/* s is being freed: forget it */
	void (*gone)(struct session *s, void *arg);
};

struct session {
	char id[17];            /* 16 random hex digits */
	struct master *m;       /* borrowed */
	struct session_spec spec;
	uint64_t job_id, task_id;
	char *node;             /* owned: the node its task runs on */
	char *task_name;        /* owned: "ROLE/INDEX" */
	struct session_leg client, agent;
	struct session_buf up;  /* client -> agent */
	struct session_buf down; /* agent -> client */
	struct ws_tracker track; /* the frames of down as read from the agent (exec's kinds) */
	struct strbuf tail;     /* what the master adds for the client once down is sent */
	bool ending;            /* the master is ending it: no more relaying */
	bool listed;            /* in its node's work reply (not dialed yet) */
	bool client_gone;       /* its client leg will never come up (or is closed) */
	bool closing_started;   /* out of the registry, its handles closing */
	uint64_t task_end_ms;   /* mono_ms its task was seen ended, 0: running */
	uv_timer_t timer;       /* the dial, drain and task-end deadlines */
	unsigned closing;       /* uv handles not closed yet: its timer (always) and its legs' */
	const struct session_client_ops *client_ops; /* NULL: the client is a leg */
	void *client_arg;       /* borrowed, for client_ops */
};

/* sessions_create makes a session of spec (copied: argv too) into task t
 * of job j (running on its node), bumps the node's revision so that its
 * agent learns of it at once, and starts the dial deadline. YERR(UNAVAILABLE)
 * past SESSIONS_MAX. */
int sessions_create(struct master *m, const struct session_spec *spec, const struct job *j,
		    const struct task *t, struct session **out, struct errbuf *eb);
/* sessions_find: the live session of id (not one being ended), or NULL. */
struct session *sessions_find(struct master *m, const char *id);

/* sessions_upgrade_response: a 101 answer (headers are the caller's:
 * Upgrade, Connection, and for a WebSocket its accept key and protocol)
 * whose upgraded connection becomes leg of session s. r remembers the
 * session, so that a request that ends without its upgrade (the client
 * went away first) lets go of it (sessions_req_gone). */
struct MHD_Response *sessions_upgrade_response(struct req *r, struct session *s,
					       enum session_leg_kind leg);
/* sessions_req_gone: r (bound by sessions_upgrade_response) ended without
 * its upgrade: a client leg that never came up ends its session. */
void sessions_req_gone(struct master *m, struct req *r);

/* sessions_leg_write queues len bytes on a leg of s as if they came from
 * the other one (for the proxy: the client's request onto the agent leg);
 * the bytes that do not fit in the direction's buffer are refused:
 * returns the bytes taken (0 once s is ending). */
size_t sessions_leg_write(struct session *s, enum session_leg_kind to, const void *buf, size_t len);

/* sessions_set_client: ops (NULL: none; the client is, or will be, a leg)
 * serve s's client, with arg. */
void sessions_set_client(struct session *s, const struct session_client_ops *ops, void *arg);
/* sessions_down_take: the client's code took the first n bytes of what
 * the agent sent (s->down); the agent leg is read again. */
void sessions_down_take(struct session *s, size_t n);
/* sessions_client_done: the client's code is done with s (its client
 * has its answer, or went away): s ends, if it has not, without a word to
 * anyone, and is freed once its agent leg is closed; its ops are
 * forgotten (gone is not called). */
void sessions_client_done(struct session *s);

/* sessions_work_json: the sessions node n's agent has to open, as the work
 * reply lists them: [{"id", "task", "kind", "argv", "tty", "stdin",
 * "cols", "rows", "port"}] (new reference). */
json_t *sessions_work_json(struct master *m, const struct node *n);

/* sessions_node_lost ends every session of node with "node 'NAME' was
 * lost". */
void sessions_node_lost(struct master *m, const char *node);
/* sessions_task_ended: t reached a final state: its sessions not dialed yet
 * end now, the others get SESSION_TASK_END_MS to end with their status. */
void sessions_task_ended(struct master *m, const struct task *t);
/* sessions_end_all ends every session with why ("the master stopped"),
 * writes what it can of each client's status without waiting, and hands
 * every leg back to MHD (the master is stopping or stepping down). */
void sessions_end_all(struct master *m, const char *why);
/* sessions_count: the sessions held. */
size_t sessions_count(const struct master *m);

#endif
