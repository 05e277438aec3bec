#include "base/compat.h"
#include "master/gitcred.h"

#include "base/xalloc.h"

#define TOKEN_FILE_MAX 4096

int gitcred_parse(const char *what, const char *v, struct gitcred *out, struct errbuf *eb)
{
	static const struct { const char *word; enum gitcred_kind kind; } kinds[] = {
		{ "token-file:", GITCRED_TOKEN_FILE },
		{ "ssh-key:", GITCRED_SSH_KEY },
	};
	const char *eq = strrchr(v, '='), *rest, *path = NULL;

	memset(out, 0, sizeof(*out));
	if (!eq || eq == v)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected PREFIX=token-file:PATH or "
			     "PREFIX=ssh-key:PATH", what, v);
	rest = eq + 1;
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strncmp(rest, kinds[i].word, strlen(kinds[i].word))) {
			out->kind = kinds[i].kind;
			path = rest + strlen(kinds[i].word);
		}
	if (!path)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': the credential is token-file:PATH or "
			     "ssh-key:PATH, got '%s'", what, v, rest);
	if (path[0] != '/')
		return error(eb, YERR(BAD_REQUEST), "%s '%s': '%s' is not an absolute path", what, v,
			     path);
	if (v[strcspn(v, " \t")])
		return error(eb, YERR(BAD_REQUEST), "%s '%s': no spaces in a URL prefix or path", what, v);
	if (strncmp(v, "https://", 8) && strncmp(v, "http://", 7) && strncmp(v, "ssh://", 6) &&
	    strncmp(v, "git://", 6) && !memchr(v, ':', (size_t)(eq - v)))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': the prefix '%.*s' is not the start of a "
			     "repository URL (https://, http://, ssh://, git:// or USER@HOST:)", what, v,
			     (int)(eq - v), v);
	out->prefix = xstrndup(v, (size_t)(eq - v));
	out->path = xstrdup(path);
	return 0;
}

void gitcred_release(struct gitcred *c)
{
	free(c->prefix);
	free(c->path);
	memset(c, 0, sizeof(*c));
}

int gitcreds_add(struct gitcreds *cs, const char *what, const char *v, struct errbuf *eb)
{
	struct gitcred c;
	int ret = gitcred_parse(what, v, &c, eb);

	if (ret)
		return ret;
	cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof(*cs->v));
	cs->v[cs->n++] = c;
	return 0;
}

void gitcreds_release(struct gitcreds *cs)
{
	for (size_t i = 0; i < cs->n; i++)
		gitcred_release(&cs->v[i]);
	free(cs->v);
	cs->v = NULL;
	cs->n = 0;
}

const struct gitcred *gitcreds_find(const struct gitcreds *cs, const char *url)
{
	const struct gitcred *best = NULL;

	for (size_t i = 0; i < cs->n; i++) {
		size_t n = strlen(cs->v[i].prefix);
		if (!strncmp(url, cs->v[i].prefix, n) && (!best || n > strlen(best->prefix)))
			best = &cs->v[i];
	}
	return best;
}

int gitcred_read_token(const char *what, const char *path, const char *default_user, char **user, char **token,
		       struct errbuf *eb)
{
	struct strbuf sb = STRBUF_INIT;
	const char *colon;
	size_t n;
	int ret = 0;

	*user = *token = NULL;
	if (strbuf_read_file(&sb, path, TOKEN_FILE_MAX) < 0) {
		ret = error(eb, YERR(IO), "%s: cannot read the token file '%s': %s", what, path,
			    errno == EFBIG ? "over 4 KiB" : strerror(errno));
		goto out;
	}
	n = strcspn(sb.buf, "\r\n");
	sb.buf[n] = '\0';
	if (!n) {
		ret = error(eb, YERR(IO), "%s: the token file '%s' is empty", what, path);
		goto out;
	}
	colon = strchr(sb.buf, ':');
	if (colon && colon != sb.buf && colon[1]) {
		*user = xstrndup(sb.buf, (size_t)(colon - sb.buf));
		*token = xstrdup(colon + 1);
	} else if (default_user) {
		*user = xstrdup(default_user);
		*token = xstrdup(sb.buf);
	} else {
		ret = error(eb, YERR(IO), "%s: the file '%s' holds no USER:PASSWORD", what, path);
	}
out:
	explicit_bzero(sb.buf, sb.len);
	strbuf_release(&sb);
	return ret;
}

static void swap(struct strbuf *a, struct strbuf *b)
{
	struct strbuf t = *a;

	*a = *b;
	*b = t;
}

void gitcred_scrub(struct strbuf *msg, const char *secret)
{
	struct strbuf out = STRBUF_INIT;
	const char *p = msg->buf;

	while (*p) {
		const char *sep = strstr(p, "://"), *auth, *end, *at = NULL;
		if (!sep) {
			strbuf_addstr(&out, p);
			break;
		}
		auth = sep + 3;
		end = auth + strcspn(auth, "/?#\"' \t\r\n");
		for (const char *q = auth; q < end; q++)
			if (*q == '@')
				at = q;
		strbuf_add(&out, p, (size_t)(auth - p));
		if (at) {
			strbuf_addstr(&out, "***");
			p = at;
		} else {
			p = auth;
		}
	}
	if (secret && *secret) {
		struct strbuf clean = STRBUF_INIT;
		size_t n = strlen(secret);
		for (const char *q = out.buf; *q;) {
			if (!strncmp(q, secret, n)) {
				strbuf_addstr(&clean, "***");
				q += n;
			} else {
				strbuf_addch(&clean, *q++);
			}
		}
		swap(&out, &clean);
		strbuf_release(&clean);
	}
	swap(msg, &out);
	strbuf_release(&out);
}
