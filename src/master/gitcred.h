/*
 * The master's git credentials (the repeatable option git-credential,
 * docs/configuration.md), one per URL prefix:
 *
 *   git-credential = https://git.example/team/=token-file:/etc/yard/git-token
 *   git-credential = ssh://git@git.example/=ssh-key:/etc/yard/deploy_key
 *
 * A token file holds TOKEN or USER:TOKEN on its first line (the user
 * defaults to x-access-token): HTTP Basic authentication when the server
 * asks. An ssh-key file is a private key without a passphrase. The files
 * are read when a fetch needs them, never at start, so that a rotated
 * token takes effect at once. A repository's URL takes the credential of
 * the longest prefix it starts with. Credentials come from here only,
 * never from a spec, and no log line, reply or audit entry holds one:
 * gitcred_scrub cleans every message that may quote one.
 *
 * Pure functions: no I/O but gitcred_read_token.
 */
#ifndef YARD_MASTER_GITCRED_H
#define YARD_MASTER_GITCRED_H

#include <stddef.h>

#include "base/error.h"
#include "base/strbuf.h"

enum gitcred_kind { GITCRED_TOKEN_FILE, GITCRED_SSH_KEY };

struct gitcred {
	char *prefix;           /* owned URL prefix */
	enum gitcred_kind kind;
	char *path;             /* owned absolute path of the token file or the key */
};

struct gitcreds {
	struct gitcred *v;      /* owned */
	size_t n;
};

/* gitcred_parse reads one value "PREFIX=token-file:/PATH" or
 * "PREFIX=ssh-key:/PATH" into *out (caller frees with gitcred_release).
 * Errors (YERR(BAD_REQUEST)) name what ("--git-credential") and the value
 * and say why; the value holds paths, never secrets, so it may be quoted. */
int gitcred_parse(const char *what, const char *v, struct gitcred *out, struct errbuf *eb);
void gitcred_release(struct gitcred *c);
/* gitcreds_add parses v and appends it to cs. */
int gitcreds_add(struct gitcreds *cs, const char *what, const char *v, struct errbuf *eb);
void gitcreds_release(struct gitcreds *cs);
/* gitcreds_find: the credential of the longest prefix url starts with
 * (borrowed), or NULL. */
const struct gitcred *gitcreds_find(const struct gitcreds *cs, const char *url);

/* gitcred_read_token reads a token file, TOKEN or USER:TOKEN on its first
 * line (also the registry's credential, master.c): *user (default_user
 * when the file has none; NULL: one is required) and *token, both owned by
 * the caller and cleared on error. Refused when the file is missing,
 * empty or over 4 KiB (the message starts with what, names the file, never
 * its contents). */
int gitcred_read_token(const char *what, const char *path, const char *default_user, char **user, char **token,
		       struct errbuf *eb);

/* gitcred_scrub rewrites msg in place so that it holds no secret: the
 * userinfo of every URL in it (USER:PASS in https://USER:PASS@host)
 * becomes three stars, and so does every occurrence of secret (when not
 * NULL or empty). */
void gitcred_scrub(struct strbuf *msg, const char *secret);

#endif
