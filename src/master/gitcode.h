/*
 * A job's code from git (docs/git.md): POST /v1/jobs with a spec whose
 * `code` names a repository (common/spec_code.h). The master resolves the
 * ref to a commit, fetches it into a bare mirror of the repository under
 * DATA/git/mirrors (one per URL), packs the tree at that commit (only
 * code.path when given) into the same content-addressed archive an upload
 * makes (common/codepack.h, blob code/HEX.tar.gz), and submits the job with
 * the commit in its spec (code.sha) and the archive as its code: agents see
 * no difference.
 *
 * All of the git work runs in a process of its own, `yard git-worker`
 * (gitworker.h), which a worker thread (uv_queue_work) starts and waits
 * for, never on the loop: the request is held (http.h, WAIT_HANDLER) until
 * it is done, then answered like any submission, after the commit. The
 * process is killed at the master's git-timeout (504 naming the URL) and
 * when the master stops: libgit2 has no network timeout, and runs only in
 * it. A mirror is used by one git-worker at a time (a flock). The archive of a commit and path is cached by
 * (URL, SHA, path) in DATA/git/packed: the same commit submitted again is
 * neither fetched nor packed (a branch is still resolved, by listing the
 * remote's refs).
 *
 * Credentials come from the master's git-credential option (gitcred.h).
 */
#ifndef YARD_MASTER_GITCODE_H
#define YARD_MASTER_GITCODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/conf.h"
#include "base/error.h"

struct master;
struct req;
struct job;
struct job_spec;
struct caller;

/* What a submission the master makes itself (gitcode_run) comes to,
 * called on the loop: eb NULL and the job submitted, or eb saying why not
 * (j NULL). */
typedef void (*gitcode_done_fn)(struct master *m, void *arg, const struct errbuf *eb, const struct job *j);

/* The git-timeout when none is given */
#define GITCODE_TIMEOUT_MS (2 * 60 * 1000)

/* gitcode_open makes DATA/git and reads the credentials (each value as
 * gitcred_parse takes it); a git-worker is killed after timeout_ms (0:
 * GITCODE_TIMEOUT_MS); m->gitcode. */
int gitcode_open(struct master *m, const struct conf_list *creds, uint64_t timeout_ms,
		 struct errbuf *eb);
/* gitcode_stop: git-workers in flight are killed (the master is stopping). */
void gitcode_stop(struct master *m);
/* gitcode_free frees m->gitcode and sets it NULL: the master then refuses
 * code from git (400 on code.git). The fuzz harness's master does so: its
 * loop does not run, and inputs must not reach the network. */
void gitcode_free(struct master *m);

/* gitcode_wanted: whether the body of POST /v1/jobs has a spec whose
 * code names a repository: gitcode_submit takes it then. */
bool gitcode_wanted(const json_t *body);
/* gitcode_submit answers POST /v1/jobs (r, its parsed body; body is not
 * kept) for a spec whose code is in git: the answer of jobs_submit once
 * the code is packed, or an error (400 naming code.ref for a ref that does
 * not exist, 502 for a repository that cannot be read, 504 when the
 * git-worker ran past the git-timeout). */
void gitcode_submit(struct req *r, const json_t *body);
/* gitcode_run: as gitcode_submit, for a submission the master makes itself
 * (a template's run, templates.h): body as POST /v1/jobs takes it,
 * submitted as c (copied) once its code is packed, then done(m, arg, ...)
 * exactly once, also when the fetch fails or the master stops first. An
 * error (the spec's own, named as POST /v1/jobs names it) before any work
 * is returned instead, and done is never called. */
int gitcode_run(struct master *m, const struct caller *c, const json_t *body, gitcode_done_fn done, void *arg,
		struct errbuf *eb);
/* gitcode_check (jobs_submit): a spec with code in git is admitted only as
 * gitcode_submit submits it, with its commit and the archive packed from
 * it (code, "sha256:HEX"); anything else is refused naming the field. */
int gitcode_check(struct master *m, const struct job_spec *spec, const char *code,
		  struct errbuf *eb);

#endif
