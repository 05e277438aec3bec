/*
 * Bearer tokens. A token is a prefix (yard_u_ for users and admins, yard_a_
 * for agents, yard_j_ for the join token) and 32 random bytes in hex; the
 * master keeps only its sha256.
 *
 * A job token ("yard_t_ID_HMAC", HMAC-SHA256 of "job:ID" under the master's
 * job_key) lets the tasks of job ID act for that job alone (the MPI launch
 * helpers use it to start ranks in the job's other tasks). It is derived, not
 * stored, and is refused once the job has ended.
 */
#ifndef YARD_MASTER_AUTH_H
#define YARD_MASTER_AUTH_H

#include <stdbool.h>

#include "master/core.h"

/* Who may call a route. */
enum perm {
	PERM_PUBLIC, /* no token needed */
	PERM_READ,   /* admin, user or agent */
	PERM_USER,   /* admin or user */
	PERM_ADMIN,  /* admin only */
	PERM_AGENT,  /* an agent (handlers check it is the node's own) */
	PERM_JOIN,   /* the join token */
	PERM_JOB,    /* admin, user or job token (handlers check the job) */
};

/* auth_create_token makes a token, stores its hash (in the open batch) and
 * returns the token text (caller frees). user is copied; team may be NULL. */
char *auth_create_token(struct master *m, enum role role, const char *user, const char *team);
/* auth_lookup: the token named by an Authorization header value
 * ("Bearer TOKEN"), or NULL when absent or unknown. */
const struct token *auth_lookup(struct master *m, const char *authorization);
/* auth_job_token: job j's token (caller frees). */
char *auth_job_token(const struct master *m, const struct job *j);
/* auth_allows: whether tok (may be NULL) may use a route of permission p. */
bool auth_allows(enum perm p, const struct token *tok);
const char *perm_name(enum perm p);

#endif
