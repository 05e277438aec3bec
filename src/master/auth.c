#include "base/compat.h"
#include "master/auth.h"

#include "base/clock.h"
#include "base/crypto.h"
#include "base/parse.h"
#include "base/xalloc.h"

void auth_token_id(const struct token *t, char id[TOKEN_ID_LEN + 1])
{
	memcpy(id, t->hash, TOKEN_ID_LEN);
	id[TOKEN_ID_LEN] = '\0';
}

/* The tokens by the first TOKEN_ID_LEN hex digits of their hash (their
 * id, unique among the master's tokens): open addressing, index + 1 (0
 * empty). Tokens are only ever appended (a revoked one stays), so the
 * index catches up with m->tokens lazily; core_clear drops it. Without it
 * every request of 10,000 agents compared its hash with every token. */
static uint64_t token_key(const char *hex)
{
	uint64_t v = 0;
	for (int i = 0; i < TOKEN_ID_LEN && hex[i]; i++)
		v = v << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : (hex[i] | 0x20) - 'a' + 10);
	return v * 0x9e3779b97f4a7c15ull;
}

static void token_ix_put(struct master *m, size_t i)
{
	size_t mask = m->token_ix_cap - 1;
	for (size_t h = token_key(m->tokens[i].hash) & mask;; h = (h + 1) & mask)
		if (!m->token_ix[h]) {
			m->token_ix[h] = i + 1;
			return;
		}
}

static void token_ix_sync(struct master *m)
{
	if (m->token_ix_n == m->ntokens)
		return;
	if (m->token_ix_n > m->ntokens || 2 * m->ntokens > m->token_ix_cap) {
		size_t cap = 64;
		while (cap < 2 * m->ntokens)
			cap *= 2;
		free(m->token_ix);
		m->token_ix = xcalloc(cap, sizeof(*m->token_ix));
		m->token_ix_cap = cap;
		m->token_ix_n = 0;
	}
	for (; m->token_ix_n < m->ntokens; m->token_ix_n++)
		token_ix_put(m, m->token_ix_n);
}

/* The token whose hash starts with the TOKEN_ID_LEN digits of hex and,
 * when whole, is all of hex. */
static struct token *token_ix_find(struct master *m, const char *hex, bool whole)
{
	size_t mask;

	token_ix_sync(m);
	if (!m->token_ix_cap)
		return NULL;
	mask = m->token_ix_cap - 1;
	for (size_t h = token_key(hex) & mask; m->token_ix[h]; h = (h + 1) & mask) {
		struct token *t = &m->tokens[m->token_ix[h] - 1];
		if (whole ? !strcmp(t->hash, hex) : !strncmp(t->hash, hex, TOKEN_ID_LEN))
			return t;
	}
	return NULL;
}

struct token *auth_find_token(struct master *m, const char *id)
{
	if (!id || strlen(id) != TOKEN_ID_LEN)
		return NULL;
	return token_ix_find(m, id, false);
}

char *auth_create_token(struct master *m, enum role role, const char *user, const char *team,
			uint64_t expires_at)
{
	const char *prefix = role == ROLE_AGENT ? "yard_a_" : role == ROLE_JOIN ? "yard_j_" : "yard_u_";
	char rnd[65], hash[SHA256_HEX_LEN + 1], id[TOKEN_ID_LEN + 1];
	char *tok = NULL;
	struct token *t;

	/* the public id must name one token: draw again on the (2^-48) clash */
	do {
		free(tok);
		random_hex(rnd, 32);
		tok = xasprintf("%s%s", prefix, rnd);
		sha256_hex(tok, strlen(tok), hash);
		memcpy(id, hash, TOKEN_ID_LEN);
		id[TOKEN_ID_LEN] = '\0';
	} while (auth_find_token(m, id));
	ALLOC_GROW(m->tokens, m->ntokens + 1, m->atokens);
	t = &m->tokens[m->ntokens++];
	memset(t, 0, sizeof(*t));
	memcpy(t->hash, hash, sizeof(t->hash));
	t->user = xstrdup(user);
	t->role = role;
	t->team = team ? xstrdup(team) : NULL;
	t->created_at = wall_us();
	t->expires_at = expires_at;
	core_save_token(m, t);
	return tok;
}

int auth_token_usable(const struct token *t, uint64_t now_us, struct errbuf *eb)
{
	char id[TOKEN_ID_LEN + 1], when[32];

	auth_token_id(t, id);
	if (t->revoked_at) {
		format_time_utc(t->revoked_at, when, sizeof(when));
		return error(eb, YERR(UNAUTHORIZED), "token '%s' (user '%s') was revoked at %s", id,
			     t->user, when);
	}
	if (t->expires_at && now_us >= t->expires_at) {
		format_time_utc(t->expires_at, when, sizeof(when));
		return error(eb, YERR(UNAUTHORIZED), "token '%s' (user '%s') expired at %s", id, t->user,
			     when);
	}
	return 0;
}

void auth_revoke(struct master *m, struct token *t, uint64_t now_us)
{
	if (t->revoked_at)
		return;
	t->revoked_at = now_us ? now_us : 1;
	core_save_token(m, t);
}

static json_t *time_or_null(uint64_t us)
{
	return us ? json_integer((json_int_t)us) : json_null();
}

json_t *auth_token_json(const struct token *t)
{
	char id[TOKEN_ID_LEN + 1];

	auth_token_id(t, id);
	return json_pack("{s:s, s:s, s:o, s:s, s:b, s:o, s:o, s:o, s:o}", "id", id, "user", t->user, "team",
			 t->team ? json_string(t->team) : json_null(), "role", role_name(t->role),
			 "team_admin", t->team_admin,
			 "created_at", time_or_null(t->created_at), "last_used",
			 time_or_null(t->last_used), "expires_at", time_or_null(t->expires_at),
			 "revoked_at", time_or_null(t->revoked_at));
}

void auth_tick(struct master *m, uint64_t now_us)
{
	for (size_t i = 0; i < m->ntokens; i++) {
		struct token *t = &m->tokens[i];
		if (t->last_used > t->last_used_saved &&
		    now_us - t->last_used_saved >= AUTH_USED_SAVE_US) {
			t->last_used_saved = t->last_used;
			core_save_token(m, t);
		}
	}
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

const struct token *auth_lookup(struct master *m, const char *authorization, uint64_t now_us,
				struct errbuf *eb)
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
	/* look up and compare hashes: a timing difference says nothing about the token */
	struct token *t = token_ix_find(m, hash, true);
	if (t && !auth_token_usable(t, now_us, eb) && now_us > t->last_used)
		t->last_used = now_us;
	return t;
}

bool auth_needs_token(enum perm p)
{
	return p != PERM_PUBLIC && p != PERM_HOOK;
}

bool auth_allows(enum perm p, const struct token *tok)
{
	if (!auth_needs_token(p))
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
	case PERM_HOOK:
		break;
	}
	return true;
}

const char *perm_name(enum perm p)
{
	static const char *const names[] = { "public", "read", "user", "admin", "agent", "join", "job", "hook" };
	return names[p];
}
