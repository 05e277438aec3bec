/*
 * The in-process master that the API fuzz targets (fuzz_api, fuzz_http)
 * send requests to: one master opened once (a temp data dir, a real SQLite
 * store, libmicrohttpd with no listening socket), each request handed to it
 * over a socketpair with MHD_add_connection, so that MHD's parsing,
 * routing, the token check, the visibility rule, the body caps and the
 * handlers all run as they do for a client. Nothing is a copy of the API's
 * code.
 *
 * The state every input starts from (made once, through the same routes):
 * user alice of team vision, user bob of no team, node n1 (2 GPUs, process
 * and docker runtimes), one held chunk, dataset digits@1 made of it, and
 * job J of alice's using digits@1, whose task T runs on n1.
 *
 * After a request the batch is settled as the master's loop does it (a
 * scheduling pass, then the commit that held replies wait for), with two
 * differences: what the batch wrote is first loaded back into a fresh
 * model inside the open transaction (core_load must take whatever a
 * handler stored, or a restarted master would refuse its own store), and
 * then the batch is rolled back and the model reloaded, which is the
 * master's path after a failed commit; so every input starts from the
 * same state.
 */
#ifndef YARD_FUZZ_MASTER_H
#define YARD_FUZZ_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

/* The start state's names, made by fuzz_master_init. */
struct fuzz_world {
	char *admin, *join, *alice, *bob, *agent; /* tokens */
	char *job_token;        /* J's own token (YARD_JOB_TOKEN) */
	uint64_t job_id, task_id;
	const char *chunk_digest;
};

extern struct fuzz_world fuzz_world;

/* fuzz_master_init opens the master and makes the start state; name is
 * the target's, for messages. Aborts on any failure. */
void fuzz_master_init(const char *name);

/* fuzz_master_send writes the raw bytes of one request to a new
 * connection and runs the master until it hangs up. When nothing moves
 * for a while, held long polls have their deadline brought forward, and
 * then the client's side is shut for writing (a head that promised more
 * body than came). Returns the reply's status (0 when it is not HTTP), its headers in *head (may be NULL) and
 * body in *body; *wrote tells whether the request opened a batch. keep:
 * commit the batch (the start state is made so), else check it loads back
 * and roll it back. */
int fuzz_master_send(const void *bytes, size_t len, bool keep, struct strbuf *head,
		     struct strbuf *body, bool *wrote);

/* fuzz_master_request sends METHOD TARGET with token (NULL: none) and
 * body as fuzz_master_send does. */
int fuzz_master_request(const char *method, const char *target, const char *token, const void *body,
			size_t len, bool keep, struct strbuf *reply, bool *wrote);

/* fuzz_master_reset brings the master back to the start state. */
void fuzz_master_reset(void);

/* fuzz_master_check_error aborts unless body is {"error": {"code", "message"}}. */
void fuzz_master_check_error(int status, const char *what, const char *body);

/* fuzz_fail prints "NAME: what: detail" and aborts (a finding). */
void fuzz_fail(const char *what, const char *detail) __attribute__((noreturn));

#endif
