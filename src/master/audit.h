/*
 * The audit log (docs/security.md): one entry for every request to a route
 * that changes state (ROUTE_AUDIT in api.c's table), whatever its outcome:
 * a refused attempt (401, 403, 429, a 4xx of the handler) is recorded like
 * a success. An entry says who (user, role, token id), when, from where
 * (the client's address), what (method and path) and how it ended (HTTP
 * status and error code).
 *
 * Entries are rows of the store (store_ops audit_append / audit_query),
 * written into the batch transaction of the change they record, so that a
 * change is never durable without its entry; never loaded into memory.
 */
#ifndef YARD_MASTER_AUDIT_H
#define YARD_MASTER_AUDIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

struct req;

/* The most entries one query returns, and what it returns unasked. */
#define AUDIT_LIMIT_MAX 10000
#define AUDIT_LIMIT_DEFAULT 100

/* audit_record appends r's entry to the open batch (opening it): call it
 * once r's reply is set. A write error is the batch's (m->batch_err), so
 * the replies that wait for the commit report it. */
void audit_record(struct req *r);

/* audit_event appends an entry of the master's own doing (role "master",
 * no user or token, method "EVENT"): what it did to path, as code (such as
 * "gpus_idle" on "/v1/jobs/7"). */
void audit_event(struct master *m, const char *path, const char *code);

/* audit_escape_path: path with every byte that is not part of a valid UTF-8
 * sequence, every control character and '%' itself written as %XX, so that
 * the result is valid UTF-8 and says which bytes came (caller frees). */
char *audit_escape_path(const char *path);

/* audit_list: the entries of user (NULL: everyone's) at or after since_us
 * (wall clock microseconds), newest first, at most limit, as GET /v1/audit
 * answers: {"entries": [{"id", "time", "user", "role", "token", "addr",
 * "method", "path", "status", "code"}]} into *out (new reference). */
int audit_list(struct master *m, const char *user, uint64_t since_us, size_t limit, json_t **out,
	       struct errbuf *eb);

#endif
