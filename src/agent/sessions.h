/*
 * The agent's side of sessions (docs/protocol.md, "Sessions"). The work
 * reply lists the sessions the master wants of this node; each new one
 * gets a thread of its own, which dials the master
 * (GET /v1/agents/{node}/sessions/{S}, "Upgrade: yard-session/1", through
 * httpc_upgrade with the agent's token) and serves the session on that
 * connection until it ends.
 *
 * A thread per session, not the agent's loop: a session blocks on things
 * the loop must never wait for (a TLS handshake with the master, the
 * container engine's API over libcurl, fork in a large process), and its
 * relay is a poll() over a handful of fds of its own; a node holds few
 * sessions at once. The loop only starts sessions, tells them when their
 * task ended, and joins them when they are done.
 *
 * For exec the agent is the WebSocket server end of the client's
 * connection (the master relays the client's frames unchanged): it reads
 * masked frames, answers pings, writes the command's output as
 * yard.exec.v1 messages and, when the command has ended, its status and a
 * close frame. What the command runs in is sessexec.h's. An attach is
 * served the same way, its "command" the terminal an interactive task's
 * shim shares (sessexec.h's exec_attach_ops): the client leaving detaches.
 * For port (yard.port.v1) it is the WebSocket server end too, whose binary
 * messages are the bytes of a TCP connection to 127.0.0.1:port in the node
 * (the task's port: process tasks share the agent's network namespace, and
 * the docker runtime's containers run on the host's network). For the
 * proxy's http and ws the leg carries raw bytes: the agent splices it to
 * that connection (the master writes the request and reads the answer).
 */
#ifndef YARD_AGENT_SESSIONS_H
#define YARD_AGENT_SESSIONS_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/httpc.h"

/* What the agent knows of the task a session goes into. */
struct asession_task {
	bool found;             /* the agent runs it */
	bool running;           /* its shim said it runs */
	bool container;         /* it runs in a container (the docker runtime) */
	char *dir;              /* owned: TASKDIR */
};

/* The loop's answer for task id (asession_task's dir allocated). */
typedef void (*asession_lookup_fn)(void *arg, int64_t task, struct asession_task *out);

struct asession;

struct agent_sessions {
	pthread_mutex_t lock;
	struct asession *list;  /* every session whose thread is not joined yet */
	char **started;         /* ids started, kept while the master lists them */
	size_t nstarted, astarted;
	char *master_url;       /* owned */
	struct httpc_tls tls;   /* strings owned */
	char *docker_socket;    /* owned or NULL */
};

void agent_sessions_init(struct agent_sessions *as, const char *master_url,
			 const struct httpc_tls *tls, const char *docker_socket);
/* agent_sessions_reconcile starts a thread for each session of list (the
 * work reply's "sessions") not started before, dialing as node with
 * token; forgets the ids the master no longer lists, and joins the
 * threads that have finished. Called on the loop. */
void agent_sessions_reconcile(struct agent_sessions *as, const json_t *list, const char *node,
			      const char *token, asession_lookup_fn lookup, void *arg);
/* agent_sessions_task_ended: task has ended: what its sessions run is
 * killed (the status says how it ended). */
void agent_sessions_task_ended(struct agent_sessions *as, int64_t task);
/* agent_sessions_stop ends every session (what they run is killed, their
 * connections dropped: the master tells the clients the agent went away)
 * and joins the threads. */
void agent_sessions_stop(struct agent_sessions *as);

#endif
