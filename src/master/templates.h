/*
 * Job templates (docs/pipelines.md, "Templates"): a named job spec that the
 * master submits again whenever its dataset gets a new version, the
 * iterative loop in which a model is trained again as data is added, or
 * whenever a branch of its repository is pushed to (docs/git.md, "Push
 * hooks").
 *
 * POST /v1/templates {"name", "spec", "code", "on_dataset"} makes one, the
 * caller's (its team's, its role's), its spec validated as a submission's
 * is (spec_from_json; whether the cluster can hold it is asked at each
 * run): it must read yard://DATASET without a version, so that each run
 * reads the version that made it, and may not be a sweep. Each new version
 * of the dataset (datasets_create, and nothing else: an unchanged push
 * makes no version) submits the spec as a job named TEMPLATE-vN, as the
 * template's owner, its yard://DATASET pinned to version N, its params
 * holding template: NAME and dataset_version: N (YARD_PARAM_TEMPLATE,
 * YARD_PARAM_DATASET_VERSION, {params.dataset_version}). A run that is refused
 * (the cluster shrank, a token's team changed) is recorded with its
 * reason in the template; the next version tries again.
 *
 * Seen (and deleted) by its owner, its team's members and admins, as
 * On git, {"name", "spec", "on_git": {"branches": [GLOB, ...], "build_only"}}:
 * the spec's code is in git (code.git), and each push to a branch that a
 * glob matches (githook.h) submits it at the pushed commit as NAME-SHA7
 * (code.ref the branch, code.sha the commit), or with build_only a job
 * NAME-build-SHA7 that builds its image (image.build) and runs `true` in
 * it, so that the jobs of that commit find it built. A commit runs once
 * per template, however often it is pushed or notified.
 *
 * Seen (and deleted) by its owner, its team's members and admins, as
 * experiments are. Persisted: STORE_TEMPLATE, one document per template,
 * keyed by its name.
 */
#ifndef YARD_MASTER_TEMPLATES_H
#define YARD_MASTER_TEMPLATES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

struct caller;
struct git_push;

struct jtemplate {
	char *name, *user, *team;  /* owned; team may be NULL */
	enum role role;            /* the creator's, for the jobs it submits */
	/* what runs it: one of the two */
	char *dataset;             /* owned or NULL: the dataset whose versions run it */
	json_t *on_git;            /* owned or NULL: {"branches", "build_only"} */
	json_t *spec;              /* owned: the spec as given (validated) */
	char *code;                /* owned or NULL: the code digest of every run */
	uint64_t created_at;       /* wall us */
	/* owned array, oldest first: {"version"} or {"commit", "ref"}, then
	 * "job" once submitted or "error" once refused (neither while the
	 * commit is fetched) */
	json_t *runs;
};

/* templates_create: body from c; YERR(INVALID_SPEC) naming the field for
 * a spec that could not be submitted, YERR(CONFLICT) for a name in use. */
int templates_create(struct master *m, const struct caller *c, const json_t *body,
		     struct jtemplate **out, struct errbuf *eb);
/* templates_find: the template named name, or NULL. */
struct jtemplate *templates_find(const struct master *m, const char *name);
/* templates_delete removes t (its jobs stay) and frees it. */
void templates_delete(struct master *m, struct jtemplate *t);
/* templates_on_version: dataset name has a new version: every template on
 * it submits its run. */
void templates_on_version(struct master *m, const char *name, unsigned version);
/* templates_on_push: a signed push (githook.h): every template on git that
 * names its repository and branch runs (or builds) at its commit; one entry
 * for each in out ({"template", "job_name", "build_only"}, or "skipped"
 * saying why). */
void templates_on_push(struct master *m, const struct git_push *p, json_t *out);
/* templates_json: t's document (new reference). */
json_t *templates_json(const struct jtemplate *t);

int templates_load(struct master *m, struct errbuf *eb);
void templates_clear(struct master *m);

#endif
