/*
 * The REST API (docs/protocol.md): a table of routes
 * {method, pattern, handler, permission, body} and their handlers.
 * docs/api.md is checked against api_routes() by a unit test.
 */
#ifndef YARD_MASTER_API_H
#define YARD_MASTER_API_H

#include <stdbool.h>
#include <stddef.h>

#include "master/auth.h"
#include "master/http.h"

enum body_kind {
	BODY_NONE,  /* no body expected (one is read and ignored, capped like JSON) */
	BODY_JSON,  /* a JSON document, at most API_JSON_MAX */
	BODY_LOG,   /* a log chunk, at most API_LOG_MAX */
	BODY_CODE,  /* a code archive streamed to a file, at most API_CODE_MAX */
	BODY_METRICS, /* a JSON batch of metric points, at most API_METRICS_MAX */
	BODY_BLOB,  /* a dataset chunk, at most API_BLOB_MAX, collected in memory */
	BODY_MANIFEST, /* a JSON document holding a dataset manifest, at most API_MANIFEST_MAX */
	/* streamed to the handler as it comes, any length: the handler runs
	 * once the head is in (not after the body) and sets r->stream_body */
	BODY_STREAM,
};

#define API_JSON_MAX ((size_t)1 << 20)
#define API_LOG_MAX ((size_t)16 << 20)
#define API_CODE_MAX ((uint64_t)256 << 20)
#define API_METRICS_MAX ((size_t)4 << 20)
#define API_BLOB_MAX ((size_t)8 << 20)
/* about 135 bytes a file: some 450,000 files in one dataset version */
#define API_MANIFEST_MAX ((size_t)64 << 20)
#define API_JSON_DEPTH 64

/* Whose is what a route shows or changes: the visibility rule of
 * docs/security.md, applied by visibility_check() (master/visibility.h)
 * before the handler runs, after the permission has admitted the caller. */
enum scope {
	SCOPE_CLUSTER,  /* the cluster's: every caller its permission admits */
	SCOPE_JOB,      /* job {id}'s own: its owner, its team, admins, its job token */
	SCOPE_DATASET,  /* dataset {name}'s contents: its team (its maker when it has none), admins */
	SCOPE_CODE,     /* code or checkpoint {digest}: whoever may see a job of it, agents of its nodes */
	SCOPE_MANIFEST, /* manifest {digest}: whoever may see a dataset of it, agents */
	SCOPE_NODE,     /* node {id}: that node's own agent */
	SCOPE_TASK,     /* task {id}: the agent of the node it runs on */
	SCOPE_TOKEN,    /* token {id}: its own user's, admins' */
	SCOPE_EXPERIMENT, /* experiment {id}: its owner, its team, admins */
	SCOPE_TEMPLATE, /* template {name}: its owner, its team, admins */
	SCOPE__COUNT
};

enum route_flags {
	ROUTE_AUDIT = 1 << 0,    /* the request changes state: it goes into the audit log */
	ROUTE_ANY_ROLE = 1 << 1, /* a standby answers it too (master/leader.h) */
	/* a session's WebSocket: a browser (which cannot set headers on one)
	 * may send its token as the cookie yard_token, from the master's own
	 * pages only (the Origin header names the master's host) */
	ROUTE_COOKIE = 1 << 2,
};

struct route {
	const char *method;
	/* "/v1/jobs/{id}": a {x} matches one path segment; {path}, last,
	 * the rest of the path (one or more bytes, slashes too) */
	const char *pattern;
	void (*handler)(struct req *r);
	enum perm perm;
	enum scope scope;
	unsigned flags;             /* enum route_flags */
	enum body_kind body;
	const char *summary;        /* one line for docs/api.md */
};

/* scope_name: "cluster", "job", ... as docs/api.md names them. */
const char *scope_name(enum scope s);

/* api_routes: the route table (static storage), *n its length. */
const struct route *api_routes(size_t *n);
/* api_match finds the route for method and path; caps[0..1] get newly
 * allocated captures (caller frees). NULL when none; *path_known tells
 * whether the path matched with another method (405). */
const struct route *api_match(const char *method, const char *path, char *caps[2],
			      bool *path_known);
/* api_poll_ready: for a held long poll, builds the reply and returns true
 * when its condition holds or its deadline (now_ms) passed. */
bool api_poll_ready(struct req *r, uint64_t now_ms);

#endif
