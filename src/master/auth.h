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
	PERM_HOOK,   /* no token: its handler checks the body's signature (githook.h) */
};

/* A token's public id: the first TOKEN_ID_LEN hex digits of its sha256.
 * It names the token in listings, the audit log and DELETE /v1/tokens/{id};
 * it is no more use for authenticating than any other 48 bits of the hash. */
#define TOKEN_ID_LEN 12

/* auth_create_token makes a token, stores its hash (in the open batch) and
 * returns the token text (caller frees). user is copied; team may be NULL;
 * expires_at is wall clock microseconds, 0 for never. The token's id is
 * unique among the stored tokens (the random part is drawn again if not). */
char *auth_create_token(struct master *m, enum role role, const char *user, const char *team,
			uint64_t expires_at);
/* auth_token_id copies t's public id into id. */
void auth_token_id(const struct token *t, char id[TOKEN_ID_LEN + 1]);
/* auth_token_usable: 0 when t may authenticate at wall time now_us; else
 * YERR(UNAUTHORIZED) with a message that names the token and says that it
 * was revoked, or that it expired, and when. Revocation wins over expiry. */
int auth_token_usable(const struct token *t, uint64_t now_us, struct errbuf *eb);
/* auth_lookup: the token named by an Authorization header value
 * ("Bearer TOKEN"), or NULL when absent or unknown. A known token that is
 * revoked or expired is returned too, with eb set by auth_token_usable: the
 * caller may name it (in the audit log), never let it act. A usable stored
 * token's last_used becomes now_us (in memory only, see auth_tick). */
const struct token *auth_lookup(struct master *m, const char *authorization, uint64_t now_us,
				struct errbuf *eb);
/* auth_find_token: the stored token whose public id is id, or NULL. */
struct token *auth_find_token(struct master *m, const char *id);
/* auth_revoke marks t revoked at now_us and saves it (in the open batch);
 * revoking a revoked token changes nothing. It takes effect on t's next
 * request. */
void auth_revoke(struct master *m, struct token *t, uint64_t now_us);
/* auth_token_json: t as GET /v1/tokens shows it (new reference): id, user,
 * team, role, created_at, last_used, expires_at, revoked_at (null for 0). */
json_t *auth_token_json(const struct token *t);
/* auth_tick saves the tokens used since their last_used was saved, once
 * now_us is AUTH_USED_SAVE_US past the saved value: a busy token costs one
 * store write a minute, not one a request, and a use is stored within a
 * minute (and a tick). The master's housekeeping tick calls it every
 * second; a master that stops loses at most a minute of last uses. */
#define AUTH_USED_SAVE_US (60 * (uint64_t)1000000)
void auth_tick(struct master *m, uint64_t now_us);
/* auth_job_token: job j's token (caller frees). */
char *auth_job_token(const struct master *m, const struct job *j);
/* auth_allows: whether tok (may be NULL) may use a route of permission p. */
bool auth_allows(enum perm p, const struct token *tok);
/* auth_needs_token: whether a route of permission p refuses a request
 * without a token (public and hook routes take none). */
bool auth_needs_token(enum perm p);
const char *perm_name(enum perm p);

#endif
