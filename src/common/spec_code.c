#include "base/compat.h"
#include "common/spec_code.h"

#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_fields.h"

/* The longest URL, ref and path taken. */
#define URL_MAX 2048
#define REF_MAX 255
#define PATH_MAX_LEN 1024

const char *const spec_code_fields[] = { "git", "ref", "path", "sha", NULL };

static bool has_bad_char(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return true;
	return false;
}

bool spec_code_is_sha(const char *s)
{
	return strlen(s) == SPEC_CODE_SHA_LEN && strspn(s, "0123456789abcdef") == SPEC_CODE_SHA_LEN;
}

const char *spec_code_url_problem(const char *s)
{
	static const char *const schemes[] = { "https://", "http://", "ssh://", "git://" };
	const char *rest = NULL, *auth_end, *at;
	bool ssh = false;

	if (!*s)
		return "it is empty";
	if (strlen(s) > URL_MAX)
		return "it is longer than 2048 bytes";
	if (has_bad_char(s))
		return "it holds a space or a control character";
	if (s[0] == '-')
		return "it starts with '-'";
	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		if (!strncmp(s, schemes[i], strlen(schemes[i]))) {
			rest = s + strlen(schemes[i]);
			ssh = !strcmp(schemes[i], "ssh://");
		}
	if (!rest) {
		const char *colon = strchr(s, ':'), *slash = strchr(s, '/');
		if (strstr(s, "://"))
			return "the scheme must be https, http, ssh or git (never file: the "
			       "master's own disk)";
		/* scp-like [USER@]HOST:PATH: a colon before any slash */
		if (!colon || (slash && slash < colon))
			return "a local path is not a repository the master may read; expected "
			       "https://, http://, ssh://, git:// or [USER@]HOST:PATH";
		at = memchr(s, '@', (size_t)(colon - s));
		if (colon == s || (at && (at == s || at + 1 == colon)))
			return "expected [USER@]HOST:PATH with a host";
		if (!colon[1])
			return "expected [USER@]HOST:PATH with a path";
		return NULL;
	}
	auth_end = rest + strcspn(rest, "/?#");
	if (auth_end == rest)
		return "it names no host";
	at = memchr(rest, '@', (size_t)(auth_end - rest));
	if (at) {
		if (!ssh)
			return "credentials never go in the spec (the master's git-credential option "
			       "holds them): remove the USER@ part";
		if (memchr(rest, ':', (size_t)(at - rest)))
			return "credentials never go in the spec (the master's git-credential option "
			       "holds them): remove the password";
		if (at + 1 == auth_end)
			return "it names no host";
	}
	if (*auth_end != '/' || !auth_end[1])
		return "it names no repository path";
	return NULL;
}

const char *spec_code_ref_problem(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return "it is empty";
	if (n > REF_MAX)
		return "it is longer than 255 bytes";
	if (has_bad_char(s) || s[strcspn(s, "~^:?*[\\")])
		return "a ref holds no space, control character or any of ~^:?*[\\";
	if (s[0] == '-' || s[0] == '/' || s[n - 1] == '/' || s[n - 1] == '.')
		return "a ref does not start with '-' or '/', nor end with '/' or '.'";
	if (strstr(s, "..") || strstr(s, "//") || strstr(s, "@{") || strstr(s, "/.") || s[0] == '.')
		return "a ref holds no '..', '//', '@{' and no component that starts with '.'";
	if (n >= 5 && !strcmp(s + n - 5, ".lock"))
		return "a ref does not end with '.lock'";
	if (!strcmp(s, "@"))
		return "'@' alone is not a ref";
	return NULL;
}

const char *spec_code_path_problem(const char *s)
{
	const char *p = s;

	if (strlen(s) > PATH_MAX_LEN)
		return "it is longer than 1024 bytes";
	if (s[0] == '/')
		return "it is absolute (it must start at the top of the code)";
	for (; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return "it holds a control character";
	for (p = s; *p;) {
		size_t n = strcspn(p, "/");
		if (!n && p[n])
			return "it holds an empty component ('//')";
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return "it holds a '.' or '..' component";
		p += n;
		if (*p)
			p++;
	}
	return NULL;
}

static int get_string(const json_t *obj, const char *key, const char *path,
		      const char *(*problem)(const char *), char **out, struct errbuf *eb)
{
	const json_t *v = json_object_get(obj, key);
	const char *why;
	int ret;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return spec_bad_got(eb, path, "a string", v);
	if ((ret = spec_check_string(v, path, eb)) < 0)
		return ret;
	if ((why = problem(json_string_value(v))))
		return spec_bad(eb, path, "'%s' is not valid: %s", json_string_value(v), why);
	*out = xstrdup(json_string_value(v));
	return 0;
}

static const char *sha_problem(const char *s)
{
	return spec_code_is_sha(s) ? NULL : "expected a commit SHA, 40 lowercase hex digits";
}

int spec_code_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	struct spec_code *c;
	int ret;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "code", "a mapping such as {git: https://host/repo.git, ref: main}",
				    v);
	if ((ret = spec_check_known(v, spec_code_fields, "code", eb)) < 0)
		return ret;
	c = spec->code = xcalloc(1, sizeof(*c));
	if (!json_object_get(v, "git") || json_is_null(json_object_get(v, "git")))
		return spec_bad(eb, "code.git", "the repository's URL is required");
	if ((ret = get_string(v, "git", "code.git", spec_code_url_problem, &c->git, eb)) < 0 ||
	    (ret = get_string(v, "ref", "code.ref", spec_code_ref_problem, &c->ref, eb)) < 0 ||
	    (ret = get_string(v, "path", "code.path", spec_code_path_problem, &c->path, eb)) < 0 ||
	    (ret = get_string(v, "sha", "code.sha", sha_problem, &c->sha, eb)) < 0)
		return ret;
	if (!c->ref)
		c->ref = xstrdup("HEAD");
	if (c->path) {
		size_t n = strlen(c->path);
		while (n && c->path[n - 1] == '/')
			c->path[--n] = '\0';
		if (!n)
			free(c->path), c->path = NULL;
	}
	return 0;
}

void spec_code_to_json(const struct job_spec *spec, json_t *doc)
{
	const struct spec_code *c = spec->code;

	if (!c)
		return;
	json_object_set_new(doc, "code",
		json_pack("{s:s, s:s, s:o, s:o}", "git", c->git, "ref", c->ref ? c->ref : "HEAD",
			  "path", c->path ? json_string(c->path) : json_null(),
			  "sha", c->sha ? json_string(c->sha) : json_null()));
}

void spec_code_free(struct spec_code *c)
{
	if (!c)
		return;
	free(c->git);
	free(c->ref);
	free(c->path);
	free(c->sha);
	free(c);
}

int spec_code_split_arg(const char *arg, char **url, char **ref, struct errbuf *eb)
{
	const char *at = strrchr(arg, '@'), *why;

	*url = *ref = NULL;
	if (at && at[1] && !spec_code_ref_problem(at + 1)) {
		char *u = xstrndup(arg, (size_t)(at - arg));
		if (!spec_code_url_problem(u)) {
			*url = u;
			*ref = xstrdup(at + 1);
			return 0;
		}
		free(u);
	}
	if ((why = spec_code_url_problem(arg)))
		return error(eb, YERR(BAD_REQUEST), "--git '%s': expected URL[@REF]: %s", arg, why);
	*url = xstrdup(arg);
	return 0;
}
