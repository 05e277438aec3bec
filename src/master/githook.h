/*
 * Push notifications from git servers (docs/git.md, "Push hooks"):
 * POST /v1/hooks/git with a push event as GitHub, Gitea, Gogs and Forgejo
 * send it ({"ref": "refs/heads/BRANCH", "after": SHA, "repository":
 * {"clone_url", ...}}), signed with the master's git-hook-secret: the
 * HMAC-SHA256 of the body's bytes, in hex, in X-Hub-Signature-256
 * ("sha256=HEX") or X-Gitea-Signature / X-Gogs-Signature ("HEX"). The
 * signature is the sender's proof; no bearer token. Each template that
 * pushes trigger (templates.h, on_git) on that repository and branch then
 * runs, or builds its image, at the pushed commit.
 */
#ifndef YARD_MASTER_GITHOOK_H
#define YARD_MASTER_GITHOOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "common/spec_code.h"

struct master;

/* The shortest secret taken: a guessable one would let anyone run jobs. */
#define GITHOOK_SECRET_MIN 16

/* githook_read_secret: the secret in the file at path (a trailing newline
 * dropped) into *out (caller frees); an error naming what (the option),
 * the path and why: unreadable, empty, shorter than GITHOOK_SECRET_MIN. */
int githook_read_secret(const char *what, const char *path, char **out, struct errbuf *eb);
/* githook_secret_free wipes and frees a secret (NULL: nothing). */
void githook_secret_free(char *secret);

/* githook_verify: 0 when sig256 (X-Hub-Signature-256, "sha256=HEX") or
 * else sig (X-Gitea-Signature or X-Gogs-Signature, "HEX") is the
 * HMAC-SHA256 of body under secret; YERR(UNAUTHORIZED) saying which is
 * missing or that it does not match, never echoing what was sent. */
int githook_verify(const char *secret, const char *sig256, const char *sig, const void *body, size_t len,
		   struct errbuf *eb);

/* A push, as githook_parse_push reads it. */
struct git_push {
	char *branch;                     /* owned: BRANCH of refs/heads/BRANCH */
	char sha[SPEC_CODE_SHA_LEN + 1];  /* the commit the branch is at now */
	bool deleted;                     /* the branch was deleted (sha all zeros) */
	char **urls;                      /* owned: the repository's URLs, as sent */
	size_t nurls;
};

/* githook_parse_push reads a push event's body; YERR(BAD_REQUEST) naming
 * the field (ref, after, repository) otherwise. A push of a tag or any
 * ref but a branch is read with branch NULL (it runs nothing). */
int githook_parse_push(const json_t *body, struct git_push *out, struct errbuf *eb);
void git_push_release(struct git_push *p);

/* githook_same_repo: whether a push's URL names the repository url (a
 * template spec's code.git): equal once a trailing "/" and ".git" are
 * dropped from each. */
bool githook_same_repo(const char *url, const char *push_url);

#endif
