/*
 * The API client of the CLI: one function per endpoint of docs/protocol.md
 * that users call. Built on common/httpc.h. A struct client is used by one
 * thread at a time (open one per thread to run requests in parallel).
 *
 * Every function returns 0 or the negative YERR(...) code of the failure
 * with eb filled: the server's error (code, message, field) for an HTTP
 * error, YERR(UNAVAILABLE) when the master cannot be reached. JSON replies
 * come back as new references in *out (caller decrefs, also NULL on error).
 */
#ifndef YARD_CLI_CLIENT_H
#define YARD_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "common/chunks.h"
#include "common/httpc.h"

struct client {
	struct httpc http;
};

/* client_open prepares a client for the master at base_url ("http://h:p"
 * or https://), verified as tls says (may be NULL), with a bearer token (may
 * be NULL). No connection is made yet. */
void client_open(struct client *c, const char *base_url, const struct httpc_tls *tls,
		 const char *token);
void client_close(struct client *c);

/* GET /v1/whoami -> {"user", "admin"}. */
int client_whoami(struct client *c, json_t **out, struct errbuf *eb);

/* POST /v1/code with the tar.gz bytes. *digest gets "sha256:HEX" (caller
 * frees); *out the whole reply when out is not NULL. */
int client_code_upload(struct client *c, const void *data, size_t len, char **digest,
		       json_t **out, struct errbuf *eb);

/* POST /v1/jobs {"spec": spec, "code": code} (code omitted when NULL) -> the
 * job, with an idempotency key of its own: sent again with it for up to 30 s
 * while no master answers or none leads (a failover), it makes one job. A
 * spec with a sweep section goes to POST /v1/experiments instead: *out is
 * then the experiment. */
int client_submit(struct client *c, json_t *spec, const char *code, json_t **out,
		  struct errbuf *eb);
/* GET /v1/experiments -> {"experiments": [...]}; GET /v1/experiments/{id}
 * (POST .../cancel with cancel) -> the experiment with its trials. */
int client_experiments(struct client *c, json_t **out, struct errbuf *eb);
int client_experiment(struct client *c, uint64_t id, bool cancel, json_t **out, struct errbuf *eb);

/* GET /v1/jobs/{id} -> the job. */
int client_job_get(struct client *c, uint64_t id, json_t **out, struct errbuf *eb);
/* client_job_wait: GET /v1/jobs/{id}?state=STATE&wait=WAIT_S, the job once
 * its state is not STATE any more, or as it is after WAIT_S (<= 30) seconds
 * (the master holds the request meanwhile). */
int client_job_wait(struct client *c, uint64_t id, const char *state, unsigned wait_s, json_t **out,
		    struct errbuf *eb);

/* Filters of GET /v1/jobs; NULL or 0 fields are not sent. */
struct client_jobs_filter {
	const char *state;
	const char *user;
	uint64_t limit;
	bool summary;   /* each job as view=summary shows it (docs/protocol.md) */
};

/* GET /v1/jobs?state=&user=&limit=&view= -> {"jobs": [...]}. */
int client_jobs_list(struct client *c, const struct client_jobs_filter *f, json_t **out,
		     struct errbuf *eb);

/* POST /v1/jobs/{id}/cancel -> the job. */
int client_cancel(struct client *c, uint64_t id, json_t **out, struct errbuf *eb);
/* POST /v1/jobs/{id}/ACTION (ACTION "hold" or "release") -> the job. */
int client_job_action(struct client *c, uint64_t id, const char *action, json_t **out,
		      struct errbuf *eb);
/* POST /v1/jobs/{id} {"priority": priority} -> the job. */
int client_job_priority(struct client *c, uint64_t id, const char *priority, json_t **out,
			struct errbuf *eb);

/* POST /v1/jobs/{id}/exec {"host", "argv"} -> the exec {"id", "task", ...}. */
int client_exec_start(struct client *c, uint64_t id, const char *host, char *const *argv,
		      json_t **out, struct errbuf *eb);
/* GET /v1/jobs/{id}/exec/{exec}?wait=S -> {"state": "running"|"exited",
 * "exit_code", "signal", "message"}. */
int client_exec_get(struct client *c, uint64_t id, uint64_t exec, unsigned wait_s, json_t **out,
		    struct errbuf *eb);

/* What `yard exec` asks for: GET /v1/jobs/{id}/exec (docs/protocol.md,
 * "Sessions"). */
struct client_exec_req {
	const char *task;       /* "ROLE/INDEX" or NULL: the job's first task */
	char *const *argv;      /* NULL-terminated, at least one */
	bool tty, stdin_open;
	unsigned cols, rows;    /* the terminal's size (0: the master's default) */
};

/* The longest request path of an exec: the master reads a request's head
 * into 32 KiB of memory (the command travels in the query). */
#define CLIENT_EXEC_PATH_MAX (24 * 1024)

/* client_exec_path builds the request path of client_exec_open (exposed
 * for tests; caller frees). */
char *client_exec_path(uint64_t id, const struct client_exec_req *req);
/* client_exec_open opens an exec session's WebSocket (subprotocol
 * yard.exec.v1) into *s (the caller closes it with httpc_stream_close);
 * a refusal is the API's error; a command whose request path would be
 * over CLIENT_EXEC_PATH_MAX is YERR(TOO_LARGE), nothing sent. */
int client_exec_open(struct client *c, uint64_t id, const struct client_exec_req *req,
		     struct httpc_stream *s, struct errbuf *eb);
/* client_portforward_open opens a port-forward session's WebSocket
 * (GET /v1/jobs/{id}/portforward?task=&port=, subprotocol yard.port.v1)
 * to port of task ("ROLE/INDEX", NULL: the job's first) into *s (closed
 * by the caller with httpc_stream_close); a refusal is the API's error,
 * *status its HTTP status when status is not NULL. */
int client_portforward_open(struct client *c, uint64_t id, const char *task, unsigned port,
			    struct httpc_stream *s, long *status, struct errbuf *eb);

/* client_attach_open opens a WebSocket (yard.exec.v1) to the terminal of
 * interactive job id (GET /v1/jobs/{id}/attach; task "ROLE/INDEX" or NULL:
 * its task; cols x rows its size, 0: the master's default) into *s (the
 * caller closes it with httpc_stream_close); a refusal is the API's
 * error. */
int client_attach_open(struct client *c, uint64_t id, const char *task, unsigned cols, unsigned rows,
		       struct httpc_stream *s, struct errbuf *eb);

/* What to read of a task's log. */
struct client_log_req {
	const char *task;   /* "ROLE/INDEX" or NULL: the first task */
	const char *stream; /* "stdout" or "stderr" */
	uint64_t offset;
	bool follow;        /* long poll up to 20 s when nothing is new */
	uint64_t limit;     /* most bytes to return; 0: the server's default */
	bool has_attempt;   /* false: the job's latest attempt */
	unsigned attempt;   /* which attempt, numbered from 0 as the job's "attempt" */
};

/* One reply of the logs endpoint. */
struct client_log_chunk {
	struct strbuf data;   /* the bytes, as stored; owned */
	uint64_t next_offset; /* X-Yard-Offset: the offset just past data */
	uint64_t size;        /* X-Yard-Size: bytes the master holds */
	bool eof;             /* X-Yard-Eof: 1: the task is final and all is shipped */
};

void client_log_chunk_init(struct client_log_chunk *ch);
void client_log_chunk_release(struct client_log_chunk *ch);

/* GET /v1/jobs/{id}/logs?task=&attempt=&stream=&offset=&follow=1&limit= into ch
 * (its data is replaced). A missing X-Yard-Offset header counts as
 * offset + bytes received. */
int client_logs_read(struct client *c, uint64_t id, const struct client_log_req *req,
		     struct client_log_chunk *ch, struct errbuf *eb);

/* GET /v1/jobs/{id}/metrics?task=&name= -> {"job", "series": [...]}; task
 * ("ROLE/INDEX") and name may be NULL (every task, every series). */
int client_metrics(struct client *c, uint64_t id, const char *task, const char *name, json_t **out,
		   struct errbuf *eb);

/* GET /v1/nodes -> {"nodes": [...]}. */
int client_nodes(struct client *c, json_t **out, struct errbuf *eb);
/* POST /v1/nodes/{name}/drain with {"reason": reason} (reason may be NULL),
 * POST /v1/nodes/{name}/resume and DELETE /v1/nodes/{name}: the node (the
 * removal's {"name", "removed"}) into *out (caller frees). */
int client_node_drain(struct client *c, const char *name, const char *reason, json_t **out,
		      struct errbuf *eb);
int client_node_resume(struct client *c, const char *name, json_t **out, struct errbuf *eb);
int client_node_remove(struct client *c, const char *name, json_t **out, struct errbuf *eb);

/* GET /v1/provisioners -> {"pools": [...], "requests": [...]} (docs/elastic.md). */
int client_provisioners(struct client *c, json_t **out, struct errbuf *eb);
/* GET /v1/images (yard images ls) */
int client_images(struct client *c, json_t **out, struct errbuf *eb);
/* GET /v1/queue -> {"queue": [...]}. */
int client_queue(struct client *c, json_t **out, struct errbuf *eb);

/* POST /v1/tokens {"user", "admin", "team", "team_admin", "expires"} (team
 * and expires omitted when NULL, team_admin when false; expires a duration
 * such as "30d") -> the token's listing entry with "admin" and "token".
 * Admin only. */
int client_token_create(struct client *c, const char *user, bool admin, const char *team, bool team_admin,
			const char *expires, json_t **out, struct errbuf *eb);
/* GET /v1/tokens -> {"tokens": [...]}: the caller's own (all for admins). */
int client_tokens_list(struct client *c, json_t **out, struct errbuf *eb);
/* DELETE /v1/tokens/{id} -> the revoked token's listing entry. */
int client_token_revoke(struct client *c, const char *id, json_t **out, struct errbuf *eb);

/* Filters of GET /v1/audit; NULL or 0 fields are not sent. */
struct client_audit_filter {
	const char *user;
	const char *since;  /* a duration back from now: "1d" */
	uint64_t limit;
};

/* GET /v1/audit?user=&since=&limit= -> {"entries": [...]}. Admin only. */
int client_audit(struct client *c, const struct client_audit_filter *f, json_t **out,
		 struct errbuf *eb);

/* client_logs_path builds the request path of client_logs_read (exposed for
 * tests; caller frees). */
char *client_logs_path(uint64_t id, const struct client_log_req *req);

/* client_json: any JSON request (datasets); *status the HTTP status when
 * status is not NULL. */
int client_json(struct client *c, const char *method, const char *path, json_t *body, json_t **out,
		long *status, struct errbuf *eb);
/* client_chunks_push and client_chunks_fetch: chunks_push and chunks_fetch
 * (common/chunks.h) with the time an upload may take. */
int client_chunks_push(struct client *c, const struct chunks_set *set, json_t **manifest,
		       struct chunks_stats *st, struct errbuf *eb);
int client_chunks_fetch(struct client *c, const json_t *manifest, const char *dir, struct errbuf *eb);

#endif
