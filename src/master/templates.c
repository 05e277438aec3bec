/* Job templates run again on each new version of a dataset (templates.h). */
#include "base/compat.h"
#include "master/templates.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <string.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/datasets.h"
#include "master/gitcode.h"
#include "master/githook.h"
#include "master/jobs.h"
#include "master/store.h"
#include "master/visibility.h"

/* a run is named NAME-vN, NAME-SHA7 or NAME-build-SHA7, and a job's name
 * has at most 63 bytes */
#define TEMPLATE_NAME_MAX 48
#define TEMPLATE_RUNS_KEPT 100
/* on_git: at most this many branch globs, each at most this long */
#define TEMPLATE_BRANCHES_MAX 32
#define TEMPLATE_BRANCH_LEN 255

struct jtemplate *templates_find(const struct master *m, const char *name)
{
	for (size_t i = 0; name && i < m->ntemplates; i++)
		if (!strcmp(m->templates[i]->name, name))
			return m->templates[i];
	return NULL;
}

static void template_free(struct jtemplate *t)
{
	if (!t)
		return;
	free(t->name);
	free(t->user);
	free(t->team);
	free(t->dataset);
	json_decref(t->on_git);
	json_decref(t->spec);
	free(t->code);
	json_decref(t->runs);
	free(t);
}

void templates_clear(struct master *m)
{
	for (size_t i = 0; i < m->ntemplates; i++)
		template_free(m->templates[i]);
	free(m->templates);
	m->templates = NULL;
	m->ntemplates = m->atemplates = 0;
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *json_or_null(json_t *v) { return v ? json_incref(v) : json_null(); }

static void template_save(struct master *m, const struct jtemplate *t)
{
	core_put_doc(m, STORE_TEMPLATE, t->name,
		     json_pack("{s:s, s:s, s:o, s:i, s:o, s:o, s:O, s:o, s:I, s:O}", "name", t->name, "user",
			       t->user, "team", str_or_null(t->team), "role", (int)t->role, "dataset",
			       str_or_null(t->dataset), "on_git", json_or_null(t->on_git), "spec", t->spec, "code",
			       str_or_null(t->code), "created_at", (json_int_t)t->created_at, "runs", t->runs));
}

json_t *templates_json(const struct jtemplate *t)
{
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:O, s:o, s:I, s:O}", "name", t->name, "user", t->user,
			 "team", str_or_null(t->team), "on_dataset", str_or_null(t->dataset), "on_git",
			 json_or_null(t->on_git), "spec", t->spec, "code", str_or_null(t->code), "created_at",
			 (json_int_t)t->created_at, "runs", t->runs);
}

/* Whether spec reads dataset name without a version (pinned to each new one). */
static bool reads_latest(const struct job_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->ndata; i++)
		if (spec->data[i].kind == DATA_YARD && !spec->data[i].version && !strcmp(spec->data[i].name, name))
			return true;
	return false;
}

/* The spec's code, from git: the spec is run at each commit pushed. */
static int check_git_spec(const struct job_spec *spec, const json_t *on_git, struct errbuf *eb)
{
	if (!spec->code)
		return error_field(eb, YERR(INVALID_SPEC), "code.git", "code.git: a template run by pushes "
				   "needs the repository they go to: the spec's code: {git: URL}");
	if (json_is_true(json_object_get(on_git, "build_only")) && !spec->image_build)
		return error_field(eb, YERR(INVALID_SPEC), "image.build", "image.build: on_git.build_only "
				   "builds the spec's image, and the spec builds none");
	return 0;
}

/* jspec as a template runs it: from a dataset (its name) or on git. */
static int check_spec(const json_t *jspec, const char *dataset, const json_t *on_git, struct errbuf *eb)
{
	struct job_spec spec;
	int ret;

	if (!json_is_object(jspec))
		return error_field(eb, YERR(INVALID_SPEC), "spec", "spec: expected an object");
	ret = spec_from_json(jspec, &spec, eb); /* released after an error too */
	if (!ret && spec.sweep)
		ret = error_field(eb, YERR(INVALID_SPEC), "sweep", "sweep: a template runs a job, not a sweep");
	else if (!ret && on_git)
		ret = check_git_spec(&spec, on_git, eb);
	else if (!ret && !reads_latest(&spec, dataset))
		ret = error_field(eb, YERR(INVALID_SPEC), "data", "data: the spec must read yard://%s "
				  "without a version, so that each run reads the version that made it", dataset);
	spec_release(&spec);
	return ret;
}

/* on_git as POST /v1/templates takes it: {"branches": [GLOB, ...],
 * "build_only": bool}; a canonical copy in *out. */
static int parse_on_git(const json_t *v, json_t **out, struct errbuf *eb)
{
	const json_t *branches = json_object_get(v, "branches"), *b, *bo = json_object_get(v, "build_only");
	const char *key;
	json_t *val;
	size_t i;

	*out = NULL;
	if (!json_is_object(v))
		return error_field(eb, YERR(BAD_REQUEST), "on_git", "on_git: expected {branches: [GLOB, ...], "
				   "build_only: false}");
	json_object_foreach((json_t *)v, key, val)
		if (strcmp(key, "branches") && strcmp(key, "build_only"))
			return error_field(eb, YERR(BAD_REQUEST), "on_git", "on_git.%.40s: unknown field "
					   "(expected branches, build_only)", key);
	if (!json_is_array(branches) || !json_array_size(branches) ||
	    json_array_size(branches) > TEMPLATE_BRANCHES_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "on_git.branches", "on_git.branches: expected 1 to %d "
				   "branch names or globs (main, release/*)", TEMPLATE_BRANCHES_MAX);
	json_array_foreach(branches, i, b) {
		const char *g = json_string_value(b);
		bool bad = !g || !*g || strlen(g) > TEMPLATE_BRANCH_LEN;
		for (const char *c = g; !bad && *c; c++)
			bad = (unsigned char)*c <= ' ' || *c == 0x7f;
		if (bad)
			return error_field(eb, YERR(BAD_REQUEST), "on_git.branches", "on_git.branches[%zu]: "
					   "expected a branch name or a glob (at most %d bytes, no spaces)", i,
					   TEMPLATE_BRANCH_LEN);
	}
	if (bo && !json_is_boolean(bo))
		return error_field(eb, YERR(BAD_REQUEST), "on_git.build_only", "on_git.build_only: expected "
				   "true or false");
	*out = json_pack("{s:O, s:b}", "branches", branches, "build_only", json_is_true(bo));
	return 0;
}

int templates_create(struct master *m, const struct caller *c, const json_t *body,
		     struct jtemplate **out, struct errbuf *eb)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	const char *dataset = json_string_value(json_object_get(body, "on_dataset"));
	const json_t *code = json_object_get(body, "code"), *jgit = json_object_get(body, "on_git");
	json_t *on_git = NULL;
	struct dataset *ds;
	struct jtemplate *t;
	int ret;

	*out = NULL;
	if (!json_is_object(body))
		return error(eb, YERR(BAD_REQUEST), "request body: expected a JSON object");
	if (!spec_name_valid(name) || strlen(name) > TEMPLATE_NAME_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "name", "name: expected [a-z0-9][a-z0-9_.-]{0,%d}",
				   TEMPLATE_NAME_MAX - 1);
	if (templates_find(m, name))
		return error_field(eb, YERR(CONFLICT), "name", "name: a template '%s' exists", name);
	if (jgit && !json_is_null(jgit)) {
		if (dataset)
			return error_field(eb, YERR(BAD_REQUEST), "on_git", "on_git: a template runs on a "
					   "dataset's versions or on pushes, not both");
		if (code && !json_is_null(code))
			return error_field(eb, YERR(BAD_REQUEST), "code", "code: a template run by pushes "
					   "takes its code from git at each commit, not an upload");
		if ((ret = parse_on_git(jgit, &on_git, eb)))
			return ret;
	} else {
		ds = dataset ? datasets_find(m, dataset) : NULL;
		if (!ds || !visibility_dataset(m, c, ds))
			return error_field(eb, YERR(BAD_REQUEST), "on_dataset", "on_dataset: no dataset "
					   "'%.80s'", dataset ? dataset : "");
	}
	if (code && !json_is_null(code) && !json_is_string(code))
		ret = error_field(eb, YERR(BAD_REQUEST), "code", "code: expected \"sha256:\" and 64 hex digits");
	else
		ret = check_spec(json_object_get(body, "spec"), dataset, on_git, eb);
	if (ret) {
		json_decref(on_git);
		return ret;
	}
	t = xcalloc(1, sizeof(*t));
	t->name = xstrdup(name);
	t->user = xstrdup(c->user);
	t->team = c->team ? xstrdup(c->team) : NULL;
	t->role = c->role == ROLE_ADMIN ? ROLE_ADMIN : ROLE_USER;
	t->dataset = on_git ? NULL : xstrdup(dataset);
	t->on_git = on_git;
	t->spec = json_deep_copy(json_object_get(body, "spec"));
	t->code = json_is_string(code) ? xstrdup(json_string_value(code)) : NULL;
	t->created_at = wall_us();
	t->runs = json_array();
	ALLOC_GROW(m->templates, m->ntemplates + 1, m->atemplates);
	m->templates[m->ntemplates++] = t;
	template_save(m, t);
	*out = t;
	return 0;
}

void templates_delete(struct master *m, struct jtemplate *t)
{
	for (size_t i = 0; i < m->ntemplates; i++)
		if (m->templates[i] == t) {
			memmove(&m->templates[i], &m->templates[i + 1], (m->ntemplates - i - 1) * sizeof(*m->templates));
			m->ntemplates--;
			break;
		}
	core_delete_doc(m, STORE_TEMPLATE, t->name);
	template_free(t);
}

/* A run whose code is fetched (gitcode_run): its template, by name and
 * birth (deleted and made again under its name is another), and its record. */
struct pending_run {
	char *name;
	uint64_t created_at;
	json_t *rec;
};

/* rec of t's runs is submitted (j) or refused (eb). */
static void run_ended(struct master *m, struct jtemplate *t, json_t *rec, const struct errbuf *eb,
		      const struct job *j)
{
	if (eb) {
		json_object_set_new(rec, "error", json_string(eb->msg));
		fprintf(stderr, "yard master: template %s: its run %s was refused: %s\n", t->name,
			json_string_value(json_object_get(rec, "name")), eb->msg);
	} else {
		json_object_set_new(rec, "job", json_integer((json_int_t)j->id));
	}
	template_save(m, t);
}

static void git_run_done(struct master *m, void *arg, const struct errbuf *eb, const struct job *j)
{
	struct pending_run *p = arg;
	struct jtemplate *t = templates_find(m, p->name);

	if (t && t->created_at == p->created_at)
		run_ended(m, t, p->rec, eb, j);
	json_decref(p->rec);
	free(p->name);
	free(p);
}

/* Submits spec (owned) as t's run, recorded as rec (owned) among its runs;
 * a spec with code in git once that is fetched (gitcode_run). */
static void run_spec(struct master *m, struct jtemplate *t, json_t *spec, json_t *rec)
{
	struct caller c = { .role = t->role, .user = t->user, .team = t->team };
	struct errbuf eb = ERRBUF_INIT;
	json_t *code = json_object_get(spec, "code");
	json_t *body = json_pack("{s:o, s:o}", "spec", spec, "code", str_or_null(code ? NULL : t->code));
	struct job *j;
	bool again;
	int rc;

	json_object_set_new(rec, "name", json_incref(json_object_get(spec, "name")));
	json_array_append(t->runs, rec);
	while (json_array_size(t->runs) > TEMPLATE_RUNS_KEPT)
		json_array_remove(t->runs, 0);
	if (code && !json_is_null(code)) {
		struct pending_run *p = xcalloc(1, sizeof(*p));
		p->name = xstrdup(t->name);
		p->created_at = t->created_at;
		p->rec = json_incref(rec);
		if (!(rc = gitcode_run(m, &c, body, git_run_done, p, &eb))) {
			template_save(m, t);
			goto out;
		}
		json_decref(p->rec);
		free(p->name);
		free(p);
	} else {
		rc = jobs_submit(m, &c, body, &j, &again, &eb);
	}
	run_ended(m, t, rec, rc ? &eb : NULL, rc ? NULL : j);
out:
	json_decref(body);
	json_decref(rec);
}

/* t's spec (a copy) named name, its params telling the template. */
static json_t *run_spec_named(const struct jtemplate *t, const char *name)
{
	json_t *spec = json_deep_copy(t->spec), *params = json_object_get(spec, "params");

	json_object_set_new(spec, "name", json_string(name));
	if (!json_is_object(params)) {
		params = json_object();
		json_object_set_new(spec, "params", params);
	}
	json_object_set_new(params, "template", json_string(t->name));
	return spec;
}

/* t's run for version: its spec named NAME-vN, told which version made it. */
static void run_version(struct master *m, struct jtemplate *t, unsigned version)
{
	char name[80];
	json_t *spec;

	snprintf(name, sizeof(name), "%s-v%u", t->name, version);
	spec = run_spec_named(t, name);
	json_object_set_new(json_object_get(spec, "params"), "dataset_version", json_integer(version));
	run_spec(m, t, spec, json_pack("{s:i}", "version", (int)version));
}

void templates_on_version(struct master *m, const char *name, unsigned version)
{
	for (size_t i = 0; i < m->ntemplates; i++)
		if (m->templates[i]->dataset && !strcmp(m->templates[i]->dataset, name))
			run_version(m, m->templates[i], version);
}

/* The job that builds the image of spec and runs `true` in it: one task,
 * no GPU, in the spec's pool, with its code and image. */
static json_t *build_only_spec(const json_t *spec)
{
	static const char *const kept[] = { "name", "code", "image", "pool", "team", "priority", "params" };
	json_t *b = json_pack("{s:[s], s:{s:{s:i, s:i}}}", "command", "true", "tasks", "build", "replicas", 1,
			      "gpus", 0);

	for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
		if (json_object_get(spec, kept[i]))
			json_object_set(b, kept[i], json_object_get(spec, kept[i]));
	return b;
}

/* Whether t runs on pushes to branch of the repository of one of urls. */
static bool runs_on_push(const struct jtemplate *t, const struct git_push *p)
{
	const char *url = json_string_value(json_object_get(json_object_get(t->spec, "code"), "git"));
	const json_t *g;
	bool repo = false;
	size_t i;

	if (!t->on_git || !url || !p->branch)
		return false;
	for (i = 0; i < p->nurls && !repo; i++)
		repo = githook_same_repo(url, p->urls[i]);
	json_array_foreach(json_object_get(t->on_git, "branches"), i, g)
		if (repo && !fnmatch(json_string_value(g), p->branch, 0))
			return true;
	return false;
}

/* t's record of commit sha, or NULL. */
static const json_t *run_of_commit(const struct jtemplate *t, const char *sha)
{
	const json_t *r;
	size_t i;

	json_array_foreach(t->runs, i, r)
		if (json_is_string(json_object_get(r, "commit")) &&
		    !strcmp(json_string_value(json_object_get(r, "commit")), sha))
			return r;
	return NULL;
}

void templates_on_push(struct master *m, const struct git_push *p, json_t *out)
{
	for (size_t i = 0; i < m->ntemplates; i++) {
		struct jtemplate *t = m->templates[i];
		bool build_only = json_is_true(json_object_get(t->on_git, "build_only"));
		const json_t *ran;
		json_t *spec, *code;
		char name[80];

		if (!runs_on_push(t, p))
			continue;
		if ((ran = run_of_commit(t, p->sha))) {
			const json_t *job = json_object_get(ran, "job");
			char why[96];
			if (job)
				snprintf(why, sizeof(why), "it ran commit %.7s already: job %" JSON_INTEGER_FORMAT,
					 p->sha, json_integer_value(job));
			else
				snprintf(why, sizeof(why), "it ran commit %.7s already%s", p->sha,
					 json_object_get(ran, "error") ? ", and was refused" : " (being fetched)");
			json_array_append_new(out, json_pack("{s:s, s:s}", "template", t->name, "skipped", why));
			continue;
		}
		snprintf(name, sizeof(name), "%s-%s%.7s", t->name, build_only ? "build-" : "", p->sha);
		spec = run_spec_named(t, name);
		json_object_set_new(json_object_get(spec, "params"), "commit", json_string(p->sha));
		code = json_object_get(spec, "code");
		json_object_set_new(code, "ref", json_string(p->branch));
		json_object_set_new(code, "sha", json_string(p->sha));
		if (build_only) {
			json_t *b = build_only_spec(spec);
			json_decref(spec);
			spec = b;
		}
		json_array_append_new(out, json_pack("{s:s, s:s, s:b}", "template", t->name, "job_name", name,
						     "build_only", build_only));
		run_spec(m, t, spec, json_pack("{s:s, s:s, s:b}", "commit", p->sha, "ref", p->branch,
					       "build_only", build_only));
	}
}

static int load_one(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL), *r;
	struct jtemplate *t;
	size_t i;

	if (!d)
		return YERR(IO);
	t = xcalloc(1, sizeof(*t));
	t->name = xstrdup(key);
	t->user = json_is_string(json_object_get(d, "user")) ? xstrdup(json_string_value(json_object_get(d, "user")))
							       : NULL;
	t->team = json_is_string(json_object_get(d, "team")) ? xstrdup(json_string_value(json_object_get(d, "team")))
							       : NULL;
	t->role = json_integer_value(json_object_get(d, "role")) == ROLE_ADMIN ? ROLE_ADMIN : ROLE_USER;
	t->dataset = json_is_string(json_object_get(d, "dataset")) ?
		     xstrdup(json_string_value(json_object_get(d, "dataset"))) : NULL;
	t->on_git = json_is_object(json_object_get(d, "on_git")) ? json_incref(json_object_get(d, "on_git")) : NULL;
	t->spec = json_incref(json_object_get(d, "spec"));
	t->code = json_is_string(json_object_get(d, "code")) ? xstrdup(json_string_value(json_object_get(d, "code")))
							       : NULL;
	t->created_at = (uint64_t)json_integer_value(json_object_get(d, "created_at"));
	t->runs = json_is_array(json_object_get(d, "runs")) ? json_incref(json_object_get(d, "runs")) : json_array();
	json_decref(d);
	/* a run whose code was being fetched when the master stopped */
	json_array_foreach(t->runs, i, r)
		if (!json_object_get(r, "job") && !json_object_get(r, "error"))
			json_object_set_new(r, "error", json_string("the master stopped before the run's code "
								    "was fetched"));
	if (!t->user || !(t->dataset || t->on_git) || !json_is_object(t->spec)) {
		template_free(t);
		return YERR(IO);
	}
	ALLOC_GROW(m->templates, m->ntemplates + 1, m->atemplates);
	m->templates[m->ntemplates++] = t;
	return 0;
}

int templates_load(struct master *m, struct errbuf *eb)
{
	int rc = m->sops->load(m->store, STORE_TEMPLATE, load_one, m, eb);

	if (rc && (!eb || !eb->code))
		error(eb, rc, "store: a stored template is corrupt");
	return rc;
}
