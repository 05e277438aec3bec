/* Push notifications from git servers (githook.h). */
#include "base/compat.h"
#include "master/githook.h"

#include <errno.h>
#include <string.h>

#include "base/crypto.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* a secret file larger than this is not a secret */
#define SECRET_FILE_MAX 4096
/* more URLs than a push names for its repository are not read */
#define PUSH_URLS_MAX 8

int githook_read_secret(const char *what, const char *path, char **out, struct errbuf *eb)
{
	struct strbuf sb = STRBUF_INIT;
	size_t n;
	int ret = 0;

	*out = NULL;
	if (strbuf_read_file(&sb, path, SECRET_FILE_MAX) < 0) {
		ret = error(eb, YERR(BAD_REQUEST), "%s: cannot read '%s': %s", what, path,
			    errno == EFBIG ? "over 4 KiB" : strerror(errno));
		goto out;
	}
	n = strcspn(sb.buf, "\r\n");
	sb.buf[n] = '\0';
	if (n < GITHOOK_SECRET_MIN) {
		ret = error(eb, YERR(BAD_REQUEST), "%s: the secret in '%s' has %zu bytes: expected at least "
			    "%d (openssl rand -hex 32 makes one)", what, path, n, GITHOOK_SECRET_MIN);
		goto out;
	}
	*out = xstrdup(sb.buf);
out:
	/* the secret's bytes go with the buffer */
	if (sb.buf)
		memset(sb.buf, 0, sb.alloc);
	strbuf_release(&sb);
	return ret;
}

void githook_secret_free(char *secret)
{
	if (secret)
		memset(secret, 0, strlen(secret));
	free(secret);
}

int githook_verify(const char *secret, const char *sig256, const char *sig, const void *body, size_t len,
		   struct errbuf *eb)
{
	char want[SHA256_HEX_LEN + 1], got[SHA256_HEX_LEN + 1];
	const char *hex;

	if (sig256) {
		if (strncmp(sig256, "sha256=", 7))
			return error(eb, YERR(UNAUTHORIZED), "X-Hub-Signature-256: expected \"sha256=\" and the "
				     "HMAC-SHA256 of the body in hex");
		hex = sig256 + 7;
	} else if (sig) {
		hex = sig;
	} else {
		return error(eb, YERR(UNAUTHORIZED), "the push is not signed: X-Hub-Signature-256 (or "
			     "X-Gitea-Signature) must hold the HMAC-SHA256 of the body under the master's "
			     "git-hook-secret");
	}
	/* lowercase, as every sender writes it; anything else does not match */
	snprintf(got, sizeof(got), "%s", hex);
	hmac_sha256_hex(secret, body, len, want);
	if (strlen(hex) != SHA256_HEX_LEN || !consttime_streq(want, got))
		return error(eb, YERR(UNAUTHORIZED), "the push's signature does not match its body under the "
			     "master's git-hook-secret");
	return 0;
}

void git_push_release(struct git_push *p)
{
	free(p->branch);
	for (size_t i = 0; i < p->nurls; i++)
		free(p->urls[i]);
	free(p->urls);
	memset(p, 0, sizeof(*p));
}

static bool all_zeros(const char *s)
{
	return s[strspn(s, "0")] == '\0';
}

int githook_parse_push(const json_t *body, struct git_push *out, struct errbuf *eb)
{
	/* the members a repository's URLs are sent in (GitHub, Gitea, Gogs) */
	static const char *const url_keys[] = { "clone_url", "git_url", "ssh_url", "url", "html_url" };
	const char *ref = json_string_value(json_object_get(body, "ref"));
	const char *after = json_string_value(json_object_get(body, "after"));
	const json_t *repo = json_object_get(body, "repository");

	memset(out, 0, sizeof(*out));
	if (!json_is_object(body))
		return error(eb, YERR(BAD_REQUEST), "request body: expected a push event, a JSON object");
	if (!ref || strncmp(ref, "refs/", 5) || strlen(ref) > 255)
		return error_field(eb, YERR(BAD_REQUEST), "ref", "ref: expected the ref pushed, "
				   "\"refs/heads/BRANCH\"");
	if (!after || strlen(after) != SPEC_CODE_SHA_LEN ||
	    (!all_zeros(after) && !spec_code_is_sha(after)))
		return error_field(eb, YERR(BAD_REQUEST), "after", "after: expected the commit pushed, 40 "
				   "lowercase hex digits");
	if (!json_is_object(repo))
		return error_field(eb, YERR(BAD_REQUEST), "repository", "repository: expected an object with "
				   "the repository's URLs (clone_url, ssh_url, ...)");
	for (size_t i = 0; i < ARRAY_SIZE(url_keys) && out->nurls < PUSH_URLS_MAX; i++) {
		const char *u = json_string_value(json_object_get(repo, url_keys[i]));
		if (u && *u && strlen(u) <= 1024) {
			if (!out->urls)
				out->urls = xcalloc(PUSH_URLS_MAX, sizeof(*out->urls));
			out->urls[out->nurls++] = xstrdup(u);
		}
	}
	if (!out->nurls)
		return error_field(eb, YERR(BAD_REQUEST), "repository", "repository: none of clone_url, "
				   "git_url, ssh_url, url or html_url is a URL");
	if (!strncmp(ref, "refs/heads/", 11) && ref[11])
		out->branch = xstrdup(ref + 11);
	out->deleted = all_zeros(after);
	memcpy(out->sha, after, sizeof(out->sha));
	return 0;
}

/* the length of url without a trailing "/" and ".git" */
static size_t repo_len(const char *url)
{
	size_t n = strlen(url);

	while (n && url[n - 1] == '/')
		n--;
	if (n >= 4 && !memcmp(url + n - 4, ".git", 4))
		n -= 4;
	return n;
}

bool githook_same_repo(const char *url, const char *push_url)
{
	size_t n = repo_len(url);

	return n && n == repo_len(push_url) && !memcmp(url, push_url, n);
}
