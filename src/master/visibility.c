#include "base/compat.h"
#include "master/visibility.h"

#include "base/parse.h"
#include "master/api.h"
#include "master/auth.h"
#include "master/codeindex.h"
#include "master/datasets.h"
#include "master/experiments.h"
#include "master/images.h"
#include "master/jobsource.h"
#include "master/templates.h"

int visibility_parse(const char *what, const char *s, bool *open_out, struct errbuf *eb)
{
	if (!strcmp(s, "team") || !strcmp(s, "open")) {
		*open_out = !strcmp(s, "open");
		return 0;
	}
	return error(eb, YERR(BAD_REQUEST), "%s '%s': expected team (each job and dataset "
		     "is its owner's, its team's and the admins') or open (every user sees all)", what, s);
}

static bool same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

bool visibility_job(const struct master *m, const struct caller *c, const struct job *j)
{
	switch (c->role) {
	case ROLE_ADMIN:
		return true;
	case ROLE_USER:
		return m->visibility_open || same(c->user, j->user) || same(c->team, j->team);
	case ROLE_JOB:
		return c->job == j->id;
	default:
		return false;
	}
}

bool visibility_experiment(const struct master *m, const struct caller *c,
			   const struct experiment *e)
{
	if (c->role == ROLE_ADMIN)
		return true;
	return c->role == ROLE_USER &&
	       (m->visibility_open || same(c->user, e->user) || same(c->team, e->team));
}

bool visibility_template(const struct master *m, const struct caller *c, const struct jtemplate *t)
{
	if (c->role == ROLE_ADMIN)
		return true;
	return c->role == ROLE_USER &&
	       (m->visibility_open || same(c->user, t->user) || same(c->team, t->team));
}

bool visibility_dataset(const struct master *m, const struct caller *c, const struct dataset *ds)
{
	if (c->role == ROLE_ADMIN)
		return true;
	if (c->role != ROLE_USER)
		return false;
	if (m->visibility_open)
		return true;
	if (ds->team)
		return same(c->team, ds->team);
	/* no team: its maker's; one made before makers were kept is everyone's */
	return !ds->owner || same(c->user, ds->owner);
}

bool visibility_token(const struct caller *c, const struct token *t)
{
	return c->role == ROLE_ADMIN ||
	       ((t->role == ROLE_USER || t->role == ROLE_ADMIN) && same(t->user, c->user) &&
		c->role == ROLE_USER);
}

int visibility_job_priority(const struct caller *c, const struct job *j, struct errbuf *eb)
{
	if (c->role == ROLE_ADMIN || same(c->user, j->user) || (c->team_admin && same(c->team, j->team)))
		return 0;
	if (j->team)
		return error(eb, YERR(FORBIDDEN), "job %" PRIu64 " belongs to '%s' (team '%s'): its priority "
			     "is changed by its owner, an admin or an admin of team '%s'", j->id, j->user,
			     j->team, j->team);
	return error(eb, YERR(FORBIDDEN), "job %" PRIu64 " belongs to '%s': its priority is changed by "
		     "its owner or an admin", j->id, j->user);
}

bool visibility_team(const struct caller *c, const char *team)
{
	return !team || c->role == ROLE_ADMIN || same(c->team, team);
}

void visibility_redact_job(json_t *doc)
{
	/* what everyone sees of a spec: the resources and the scheduling */
	static const char *const shown[] = { "name", "framework", "image", "tasks", "placement",
					     "pool", "priority", "team", "restart", "timeout",
					     "preemption", "on_disconnect", "interactive" };
	json_t *spec = json_object_get(doc, "spec"), *kept = json_object();

	for (size_t i = 0; i < ARRAY_SIZE(shown); i++) {
		json_t *v = json_object_get(spec, shown[i]);
		if (v)
			json_object_set(kept, shown[i], v);
	}
	json_object_set_new(doc, "spec", kept);
	json_object_del(doc, "code");
	json_object_del(doc, "checkpoint");
	json_object_del(doc, "data");
	json_object_set_new(doc, "redacted", json_true());
}

/* Whether a task that holds resources on the caller's node belongs to a
 * job for which want(job, digest) holds: what an agent needs is what its
 * tasks run with. */
static bool node_needs(const struct master *m, const char *node,
		       bool (*want)(const struct job *, const char *), const char *digest)
{
	for (size_t i = 0; i < m->nlive; i++) {
		const struct task *t = m->live[i];
		if (same(t->node, node) && want(t->job, digest))
			return true;
	}
	return false;
}

static bool job_has_code(const struct job *j, const char *digest)
{
	if (same(j->code, digest) || same(j->checkpoint, digest) || jobsource_has(j, digest))
		return true; /* its code, checkpoint or data from an earlier job */
	for (size_t i = 0; i < j->ntasks; i++)
		if (same(j->tasks[i]->outputs, digest))
			return true; /* a task's outputs (api_outputs.c) */
	return false;
}

/* A manifest j holds: a dataset version it reads, or what job_has_code
 * names (outputs, checkpoint, data from an earlier job). */
static bool job_has_manifest(const struct job *j, const char *digest)
{
	size_t i;
	json_t *d;

	json_array_foreach(j->data, i, d)
		if (same(json_string_value(json_object_get(d, "digest")), digest))
			return true;
	return job_has_code(j, digest);
}

static bool sees_code(const struct master *m, const struct caller *c, const char *digest)
{
	const uint64_t *ids;
	size_t n;

	if (c->role == ROLE_AGENT)
		return node_needs(m, c->user, job_has_code, digest);
	ids = codeindex_find(m->code_index, digest, &n);
	for (size_t i = 0; i < n; i++) {
		const struct job *j = core_job((struct master *)m, ids[i]);
		/* a job listed under an old checkpoint has moved on: asked again */
		if (j && job_has_code(j, digest) && visibility_job(m, c, j))
			return true;
	}
	return false;
}

static bool sees_manifest(const struct master *m, const struct caller *c, const char *digest)
{
	if (c->role == ROLE_AGENT) /* and any image kept for the nodes to load */
		return node_needs(m, c->user, job_has_manifest, digest) || images_store_holds(m, digest);
	if (sees_code(m, c, digest))
		return true; /* a job's outputs or checkpoint, or what it reads of another */
	for (size_t i = 0; i < m->ndatasets; i++) {
		const struct dataset *ds = m->datasets[i];
		for (size_t k = 0; k < ds->nv; k++)
			if (!strcmp(ds->v[k].digest, digest) && visibility_dataset(m, c, ds))
				return true;
	}
	return false;
}

int visibility_check(const struct master *m, const struct route *route, const struct caller *c,
		     char *const caps[2], struct errbuf *eb)
{
	const char *who = c->role == ROLE_JOB ? "this job token" : c->user;
	struct master *mm = (struct master *)m; /* lookups only */
	uint64_t id;

	if (c->role == ROLE_ADMIN)
		return 0;
	switch (route->scope) {
	case SCOPE_CLUSTER:
		return 0;
	case SCOPE_JOB: {
		struct job *j = parse_u64_str(caps[0], &id) ? NULL : core_job(mm, id);
		if (!j || visibility_job(m, c, j))
			return 0;
		return error(eb, YERR(FORBIDDEN), "job %" PRIu64 " belongs to '%s'%s%s%s: '%s' may not see its "
			     "logs, metrics, code or execs", j->id, j->user, j->team ? " (team '" : "",
			     j->team ? j->team : "", j->team ? "')" : "", who);
	}
	case SCOPE_DATASET: {
		const struct dataset *ds = datasets_find(m, caps[0]);
		if (!ds || visibility_dataset(m, c, ds))
			return 0;
		if (ds->team)
			return error(eb, YERR(FORBIDDEN), "dataset '%s' belongs to team '%s': '%s' may not "
				     "see its contents", ds->name, ds->team, who);
		return error(eb, YERR(FORBIDDEN), "dataset '%s' belongs to '%s': '%s' may not see its "
			     "contents", ds->name, ds->owner, who);
	}
	case SCOPE_CODE:
		if (sees_code(m, c, caps[0]))
			return 0;
		return error(eb, YERR(FORBIDDEN), "'%s' may not read '%s': it is not the code or a "
			     "checkpoint of a job that '%s' may see", who, caps[0], who);
	case SCOPE_MANIFEST:
		if (sees_manifest(m, c, caps[0]))
			return 0;
		return error(eb, YERR(FORBIDDEN), "'%s' may not read manifest '%s': it is not of a "
			     "dataset or a job that '%s' may see", who, caps[0], who);
	case SCOPE_NODE:
		if (c->role == ROLE_AGENT && same(c->user, caps[0]))
			return 0;
		return error(eb, YERR(FORBIDDEN), "the token of node '%s' may not act for '%s'", c->user,
			     caps[0]);
	case SCOPE_TASK: {
		struct task *t = parse_u64_str(caps[0], &id) ? NULL : core_task(mm, id);
		if (!t || (c->role == ROLE_AGENT && same(t->node, c->user)))
			return 0;
		return error(eb, YERR(FORBIDDEN), "task %" PRIu64 " does not run on node '%s'", t->id,
			     c->user);
	}
	case SCOPE_EXPERIMENT: {
		const struct experiment *e = parse_u64_str(caps[0], &id) ? NULL
					     : experiments_find(m, id);
		if (!e || visibility_experiment(m, c, e))
			return 0;
		return error(eb, YERR(NOT_FOUND), "no experiment '%s'", caps[0]);
	}
	case SCOPE_TEMPLATE: {
		const struct jtemplate *t = templates_find(m, caps[0]);
		if (!t || visibility_template(m, c, t))
			return 0;
		return error(eb, YERR(NOT_FOUND), "no template '%s'", caps[0]);
	}
	case SCOPE_TOKEN: {
		const struct token *t = auth_find_token(mm, caps[0]);
		if (!t || visibility_token(c, t))
			return 0;
		return error(eb, YERR(NOT_FOUND), "no token '%s'", caps[0]);
	}
	case SCOPE__COUNT:
		break;
	}
	return error(eb, YERR(INTERNAL), "route '%s' has no known scope", route->pattern);
}
