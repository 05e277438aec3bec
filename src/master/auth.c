#include "base/compat.h"
#include "master/auth.h"

#include "base/crypto.h"
#include "base/parse.h"
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

#define JOB_TOKEN_PREFIX "yard_t_"

char *auth_job_token(const struct master *m, const struct job *j)
{
	char msg[40], mac[SHA256_HEX_LEN + 1];
	snprintf(msg, sizeof(msg), "job:%" PRIu64, j->id);
	hmac_sha256_hex(m->job_key, msg, strlen(msg), mac);
	return xasprintf(JOB_TOKEN_PREFIX "%" PRIu64 "_%s", j->id, mac);
}

/* The token of a job that has not ended, or NULL. */
static const struct token *job_token_lookup(struct master *m, const char *p, size_t len)
{
	char text[200];
	const char *q;
	uint64_t id;
	struct job *j;
	char *want;
	int ok;

	if (len >= sizeof(text) || !m->job_key)
		return NULL;
	memcpy(text, p, len);
	text[len] = '\0';
	q = text + strlen(JOB_TOKEN_PREFIX);
	if (parse_u64(&q, &id) < 0 || *q != '_' || !(j = core_job(m, id)) ||
	    job_state_is_final(j->state))
		return NULL;
	want = auth_job_token(m, j);
	ok = consttime_streq(want, text);
	free(want);
	if (!ok)
		return NULL;
	memset(&m->job_token, 0, sizeof(m->job_token));
	m->job_token.user = j->user;
	m->job_token.role = ROLE_JOB;
	m->job_token.job_id = j->id;
	return &m->job_token;
}

const struct token *auth_lookup(struct master *m, const char *authorization)
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
	if (!strncmp(p, JOB_TOKEN_PREFIX, strlen(JOB_TOKEN_PREFIX)))
		return job_token_lookup(m, p, len);
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
		return tok->role != ROLE_JOIN && tok->role != ROLE_JOB;
	case PERM_JOB:
		return tok->role == ROLE_ADMIN || tok->role == ROLE_USER || tok->role == ROLE_JOB;
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
	static const char *const names[] = { "public", "read", "user", "admin", "agent", "join", "job" };
	return names[p];
}
