/*
 * The agent's session with its master, shared by agent.c's threads (the
 * main loop, the poll thread, the shipper, shipper.h): registration with
 * the join token, and registering again when the master refuses the
 * node's token or forgets the node; the current credentials; what the
 * last answers say of the master's lease on the node (fencing, heartbeat.h);
 * back-offs that wake early once another thread has had an answer; and
 * the poll thread, which long-polls the node's work and hands each reply
 * to the main loop. Reference counted: the poll thread may outlive
 * agent_run while its long poll finishes.
 */
#ifndef YARD_AGENT_SESSION_H
#define YARD_AGENT_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/agent.h"
#include "agent/gpu.h"
#include "common/httpc.h"

struct cache;

struct session {
	pthread_mutex_t lock;
	int refs;
	bool closed;            /* agent_run has finished: post nothing more */
	uv_async_t *wake;       /* the main loop's async, NULL once closed */
	json_t *work;           /* latest unhandled work reply (owned) */
	/* registration */
	char *master_url, *name, *addr, *join_token, *work_dir;
	struct httpc_tls tls;   /* strings owned: how an https master is verified */
	json_t *gpus;           /* owned */
	char *pool;             /* owned */
	json_t *labels;         /* owned object KEY -> VALUE */
	json_t *runtimes;       /* owned array: "process", "docker" */
	char *engine;           /* owned or NULL: what answers on the docker socket */
	struct cache *cache;    /* borrowed: the node's data cache (thread safe) */
	unsigned port_lo, port_hi;
	char *id, *token;       /* owned, from the last registration */
	uint64_t lease_ms;      /* the master's lease on this node (registration reply); 0: unknown */
	uint64_t last_ok_ms;    /* boot_ms of the last answer from the master */
	bool refused;           /* the last failed request found no master listening (not a partition) */
	bool failing;           /* the last request had no answer */
	unsigned back;          /* bumped by an answer after one that failed: the shipper retries at once */
	unsigned gen;           /* bumped by every registration */
	bool printed_ready;
	bool ephemeral;         /* --ephemeral: said at registration */
	char *slurm_job;        /* owned or NULL: the Slurm job it runs in ("4411_0") */
	volatile sig_atomic_t *stop;
};

/* session_new: the session of an agent of cfg with gpus, its docker
 * engine's name (or NULL), one reference; registered by session_register. */
struct session *session_new(const struct agent_config *cfg, const struct gpu_list *gpus, const char *engine,
			    volatile sig_atomic_t *stop);
void session_unref(struct session *s);

/* session_contact records how a request to the master went (ok: it
 * answered; c: the client, for whether anything listened). */
void session_contact(struct session *s, bool ok, const struct httpc *c);
/* sleep_backoff sleeps up to ms, waking early on stop or once another
 * thread has had an answer from the master again; non-zero when stopping. */
int sleep_backoff(struct session *s, unsigned ms);
/* backoff_next: the next wait of an exponential back-off with jitter (*cur
 * its state, 0 to start). */
unsigned backoff_next(unsigned *cur);

/* session_register registers with the join token unless another thread
 * did since seen_gen (the gen a request was made with); 0 once registered,
 * -1 when stopping. */
int session_register(struct session *s, unsigned seen_gen);
/* session_refused: a request of generation gen was answered 401/404 (the
 * master refused the node's token or forgot the node): says why, once,
 * and registers again. */
void session_refused(struct session *s, unsigned gen, long status, const char *why);
/* session_creds: the current credentials, *id (path part /v1/agents/ID)
 * and *token (caller frees both), and their generation. */
unsigned session_creds(struct session *s, char **id, char **token);

/* session_cache_keys: what the node's cache holds, for a status report
 * (new reference). */
json_t *session_cache_keys(struct session *s);

/* session_poll_thread (pthread_create with a reference of s, which it
 * drops as it ends): long-polls the node's work until the session closes. */
void *session_poll_thread(void *arg);

#endif
