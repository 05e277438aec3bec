/*
 * The spec's `code` field: a job whose code comes from a git repository
 * rather than from the directory `yard submit` uploads (docs/git.md).
 *
 *   code: {git: URL, ref: BRANCH|TAG|SHA, path: SUBDIR, sha: SHA}
 *
 *   git   the repository: https://, http://, ssh://, git:// or scp-like
 *         [USER@]HOST:PATH. Never a local path or file:// (it would read
 *         the master's own disk), and never credentials: userinfo with a
 *         password (or any userinfo but for ssh) is refused, for the
 *         master's git-credential option holds them.
 *   ref   a branch, a tag, a full ref name (refs/...), HEAD or a full
 *         40-hex commit SHA (default HEAD); a ref name as git
 *         check-ref-format takes one.
 *   path  a subdirectory of the repository: the job's code is that
 *         directory's tree (default: the whole tree). Relative, without
 *         "." or ".." components.
 *   sha   the commit the master resolved ref to at submit (40 lowercase
 *         hex digits). Given in a submission (yard rerun), the job runs
 *         that commit and ref is only its name.
 *
 * Absent or null: the code is the uploaded archive, as before.
 */
#ifndef YARD_COMMON_SPEC_CODE_H
#define YARD_COMMON_SPEC_CODE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"

#define SPEC_CODE_SHA_LEN 40

struct job_spec;

struct spec_code {
	char *git;             /* owned URL */
	char *ref;             /* owned, "HEAD" by default */
	char *path;            /* owned subdirectory without a trailing '/', or NULL: the whole tree */
	char *sha;             /* owned 40 lowercase hex digits, or NULL: not resolved yet */
};

/* The known fields of code (spec_fields.h's lists). */
extern const char *const spec_code_fields[];

/* spec_code_parse validates v (NULL: none) into spec->code (spec_release
 * frees it); errors name the field ("code.ref: ..."). */
int spec_code_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb);
/* spec_code_to_json sets doc's "code" to {git, ref, path, sha} (path and
 * sha null when absent); a spec without code leaves it absent, so that the
 * canonical form of specs from before the field reads the same. */
void spec_code_to_json(const struct job_spec *spec, json_t *doc);
void spec_code_free(struct spec_code *c);

/* The checks of each field, each NULL when s is fine, else why it is not. */
const char *spec_code_url_problem(const char *s);
const char *spec_code_ref_problem(const char *s);
const char *spec_code_path_problem(const char *s);
/* spec_code_is_sha: whether s is a full commit SHA (40 lowercase hex). */
bool spec_code_is_sha(const char *s);

/* spec_code_split_arg splits yard submit's --git URL[@REF] into *url and
 * *ref (both owned by the caller; *ref NULL when arg names no ref). The
 * ref follows the last '@' when what is before it is a URL and what is
 * after it a ref, so "git@host:repo" is a URL and "git@host:repo@main"
 * its branch main. Refused with YERR(BAD_REQUEST) naming --git and why. */
int spec_code_split_arg(const char *arg, char **url, char **ref, struct errbuf *eb);

#endif
