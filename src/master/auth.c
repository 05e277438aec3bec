#include "base/compat.h"
#include "master/auth.h"

#include "base/crypto.h"
#include "base/xalloc.h"

char *auth_create_token(struct master *m, enum role role, const char *user, const char *team)
{
	const char *prefix = role == ROLE_AGENT ? "yard_a_" : role == ROLE_JOIN ? "yard_j_" : "yard_u_";
	char rnd[65];
	char *tok;
	struct token *t;

	random_hex(rnd, 32);
	tok = xasprintf("%s%s", prefix, rnd);
	ALLOC_GROW(m->tokens, m->ntokens + 1, m->atokens);
	t = &m->tokens[m->ntokens++];
	memset(t, 0, sizeof(*t));
	sha256_hex(tok, strlen(tok), t->hash);
	t->user = xstrdup(user);
	t->role = role;
	t->team = team ? xstrdup(team) : NULL;
	core_save_token(m, t);
	return tok;
}

const struct token *auth_lookup(const struct master *m, const char *authorization)
{
	char hash[SHA256_HEX_LEN + 1];
	const char *p = authorization;
	size_t len;

	if (!p || strncasecmp(p, "Bearer ", 7))
		return NULL;
	p += 7;
	while (*p == ' ')
		p++;
	len = strlen(p);
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\r'))
		len--;
	if (len < 8 || len > 200)
		return NULL;
	sha256_hex(p, len, hash);
	/* compare hashes: a timing difference says nothing about the token */
	for (size_t i = 0; i < m->ntokens; i++)
		if (!strcmp(m->tokens[i].hash, hash))
			return &m->tokens[i];
	return NULL;
}

bool auth_allows(enum perm p, const struct token *tok)
{
	if (p == PERM_PUBLIC)
		return true;
	if (!tok)
		return false;
	switch (p) {
	case PERM_READ:
		return tok->role != ROLE_JOIN;
	case PERM_USER:
		return tok->role == ROLE_ADMIN || tok->role == ROLE_USER;
	case PERM_ADMIN:
		return tok->role == ROLE_ADMIN;
	case PERM_AGENT:
		return tok->role == ROLE_AGENT;
	case PERM_JOIN:
		return tok->role == ROLE_JOIN || tok->role == ROLE_ADMIN;
	case PERM_PUBLIC:
		break;
	}
	return true;
}

const char *perm_name(enum perm p)
{
	static const char *const names[] = { "public", "read", "user", "admin", "agent", "join" };
	return names[p];
}
