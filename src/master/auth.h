/*
 * Bearer tokens. A token is a prefix (yard_u_ for users and admins, yard_a_
 * for agents, yard_j_ for the join token) and 32 random bytes in hex; the
 * master keeps only its sha256.
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
};

/* auth_create_token makes a token, stores its hash (in the open batch) and
 * returns the token text (caller frees). user is copied; team may be NULL. */
char *auth_create_token(struct master *m, enum role role, const char *user, const char *team);
/* auth_lookup: the token named by an Authorization header value
 * ("Bearer TOKEN"), or NULL when absent or unknown. */
const struct token *auth_lookup(const struct master *m, const char *authorization);
/* auth_allows: whether tok (may be NULL) may use a route of permission p. */
bool auth_allows(enum perm p, const struct token *tok);
const char *perm_name(enum perm p);

#endif
