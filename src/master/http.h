/*
 * libmicrohttpd glue: one struct req per HTTP request, bodies collected with
 * caps (or streamed to a file for code uploads), replies built as MHD
 * responses, and requests held (suspended) until the batch that changed
 * state is committed or a long poll's condition is met.
 *
 * All of it runs on the master's loop thread; MHD runs with external
 * polling (its epoll fd watched by the loop).
 */
#ifndef YARD_MASTER_HTTP_H
#define YARD_MASTER_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "master/core.h"

struct MHD_Connection;
struct MHD_Response;
struct route;

/* What a held request waits for; WAIT_READY: answered while held, waiting
 * to be resumed (http.c); WAIT_HANDLER: what its handler's ready() says (a
 * proxied request, master/proxy.h). */
enum req_wait { WAIT_NONE, WAIT_COMMIT, WAIT_WORK, WAIT_LOGS, WAIT_EXEC, WAIT_JOB, WAIT_READY,
		WAIT_HANDLER };

struct req {
	struct master *m;
	struct MHD_Connection *conn;
	char *method, *url;         /* owned; url is the decoded path */
	char *target;               /* owned raw request target (path?query), or NULL */
	const struct route *route;  /* borrowed from the route table */
	char *cap[2];               /* owned path captures ({id}, {name}) */
	bool has_token;
	enum role role;             /* the caller, when has_token */
	char *user, *team;          /* owned */
	bool team_admin;            /* the token's (struct token) */
	uint64_t token_job;         /* ROLE_JOB: the job the token acts for */
	/* the public id of the caller's stored token (auth.h), "" when none;
	 * with a revoked or expired token, user, role and token_id name it
	 * (for the audit log) but has_token is false */
	char token_id[16];
	int err_code;               /* the YERR code of the error reply (req_error), 0 */

	struct strbuf body;         /* collected body (JSON, log chunk) */
	size_t body_max;
	bool too_large;
	int upload_fd;              /* code upload temp file, or -1 */
	char *upload_tmp;           /* owned path of the temp file */
	void *sha;                  /* EVP_MD_CTX of the upload */
	uint64_t upload_size;

	bool handled;               /* the handler ran */
	bool queued;                /* a response was queued to MHD */
	int status;
	struct MHD_Response *resp;  /* owned until queued */

	enum req_wait wait;
	bool suspended;
	uint64_t deadline_ms;       /* mono_ms end of a long poll */
	uint64_t rev, task_id, offset, limit; /* long poll arguments */
	int stream;
	/* While held: in m->held (every held request), and in one list of
	 * http.c's index by what it waits for (the commit, its node's
	 * revision, anything else); a long poll also in its heap of
	 * deadlines (heap_idx: 1 + its index there, 0: not in it). */
	struct req *next_held, **pprev_held;
	struct req *next_kind, **pprev_kind;
	size_t heap_idx;
	/* a session's leg (sessions.h): the session's id while its 101 has not
	 * handed the connection over, "" otherwise */
	char session_id[17];
	int session_leg;            /* enum session_leg_kind */
	/* owned or NULL: what the audit entry names instead of url (a session's
	 * path with its kind and task) */
	char *audit_path;
	/* A handler that answers later (a route of BODY_STREAM: the proxy)
	 * binds these to r. stream_body takes the request's body as it comes:
	 * the bytes it took of len (fewer: r is held, WAIT_HANDLER, and the
	 * rest comes again once ready() says so), then once len 0 at its end;
	 * not called once r has its reply. ready: whether a request held with
	 * WAIT_HANDLER may go on (it may set r's reply). gone: r ends (the
	 * client went away, or its reply was sent): what is bound to r lets
	 * go of it. */
	size_t (*stream_body)(struct req *r, const char *data, size_t len);
	bool (*ready)(struct req *r);
	void (*gone)(struct req *r);
	void *handler_data;         /* the handler's, for those three */
	bool body_ended;            /* stream_body had its end */
};

struct caller;
/* req_caller: the caller of r as the visibility rule sees it (fields
 * borrowed from r); only for a request with a token. */
void req_caller(const struct req *r, struct caller *out);

/* http_start binds listen ("HOST:PORT") and starts MHD (external polling),
 * serving https with m->tls when it holds a certificate. listen NULL: no
 * socket is bound; connections are handed to m->mhd with MHD_add_connection
 * (tests/fuzz/fuzz_api.c, over a socketpair). */
int http_start(struct master *m, const char *listen, struct errbuf *eb);
/* http_connection_limit raises the soft limit on open files to the hard
 * one and returns how many connections MHD may hold: that limit less
 * HTTP_FD_RESERVE for the store, logs, blobs and uploads. Every agent
 * holds two (its long poll, its shipper's), so 10,000 nodes need a limit
 * past 20,000 (yard-master.service sets LimitNOFILE). */
#define HTTP_FD_RESERVE 256
unsigned http_connection_limit(void);
void http_stop(struct master *m);
/* http_run lets MHD do its work and re-arms its timer. */
void http_run(struct master *m);

/* Replies. req_json steals doc; a NULL doc (a json_pack that failed) or
 * one that cannot be dumped answers 500 with a JSON error and a line on
 * the master's stderr, never a crash. */
void req_json(struct req *r, int status, json_t *doc);
void req_error(struct req *r, const struct errbuf *eb);
/* http_error_json: the error object of eb as req_error sends it inside
 * {"error": ...}: code, message, and field when it has one (new reference). */
json_t *http_error_json(const struct errbuf *eb);
void req_text(struct req *r, int status, const char *ctype, const char *data, size_t len);
/* http_json_text: a JSON string of s (new reference, never NULL); bytes
 * of s that are not UTF-8 are escaped as \xHH (base/utf8.h), so a document
 * that quotes outside input can always be sent. Use it, not json_string,
 * for any string that did not come from a parsed JSON document. */
json_t *http_json_text(const char *s);
/* http_json_string appends s as a JSON string, escaped as jansson escapes
 * it in req_json's answers (for documents written straight into a strbuf);
 * bytes that are not UTF-8 as http_json_text escapes them. */
void http_json_string(struct strbuf *out, const char *s);
/* req_hold suspends r (its connection) until api_poll_ready says it may
 * go on: a long poll's wait, or WAIT_HANDLER (r->ready). It may be called
 * from the handler and from the content reader of r's reply (MHD's
 * MHD_ContentReaderCallback, which then returns 0). */
void req_hold(struct req *r, enum req_wait wait);
/* req_strbuf answers with sb's bytes, taking them (sb is left empty). */
void req_strbuf(struct req *r, int status, const char *ctype, struct strbuf *sb);
/* req_set_response: resp is the answer (taken); every answer gets nosniff. */
void req_set_response(struct req *r, int status, struct MHD_Response *resp);

/* A reply body shared by many answers without a copy each (a cached
 * listing sent to a thousand readers at once): reference counted, freed
 * when the last answer that sends it and its owner have let go. The master
 * thread alone sends answers, so the count needs no lock. */
struct shared_body {
	unsigned refs;
	int fd;                 /* a memfd that holds text too, or -1 (see shared_body_new) */
	size_t len;
	char text[];
};

/* shared_body_new copies len bytes of text into a body with one reference
 * (the caller's). A body of SHARED_BODY_FD_MIN bytes or more is also
 * written to a memfd, and answers send it from there with sendfile(): the
 * kernel then takes the pages without copying them (a queue of 2,000 jobs
 * is 370 KB an answer). Without a memfd (none can be made) answers send
 * text. */
#define SHARED_BODY_FD_MIN (64 * 1024)
struct shared_body *shared_body_new(const char *text, size_t len);
void shared_body_unref(struct shared_body *b);
/* req_shared answers with b (taking a reference until the answer is sent). */
void req_shared(struct req *r, int status, const char *ctype, struct shared_body *b);
const char *req_header(struct req *r, const char *name);
const char *req_query(struct req *r, const char *name);

/* http_wake releases, after a commit (commit_err 0 or the error, eb its
 * message; a failed commit turns waiting replies into errors), the held
 * requests whose condition holds or whose time is up. It looks only at
 * what may have changed: the replies that waited for the commit, the work
 * polls of nodes whose revision changed (m->bumped), the long polls whose
 * deadline passed, and the few others (logs, execs, jobs), so that 10,000
 * agents' held polls cost nothing while nothing changes for them. */
void http_wake(struct master *m, int commit_err, const struct errbuf *eb);
/* http_release_all answers every held request with why (NULL: 503, the
 * master is shutting down). */
void http_release_all(struct master *m, const struct errbuf *why);
/* http_stop frees the index of held requests too; http_polls_held: whether
 * a work poll of node name is held (its lease is renewed meanwhile). */
bool http_polls_held(const struct master *m, const char *name);

/* The client's address as text into buf, or NULL when it has none that is
 * IPv4 or IPv6 (a socketpair): the audit entry's, a proxy's X-Forwarded-For. */
const char *req_client_addr(struct req *r, char *buf, size_t len);

#endif
