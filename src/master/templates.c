/* Job templates run again on each new version of a dataset (templates.h). */
#include "base/compat.h"
#include "master/templates.h"

#include <inttypes.h>
#include <string.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/datasets.h"
#include "master/jobs.h"
#include "master/store.h"
#include "master/visibility.h"

/* a run is named NAME-vN, and a job's name has at most 63 bytes */
#define TEMPLATE_NAME_MAX 48
#define TEMPLATE_RUNS_KEPT 100

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

static void template_save(struct master *m, const struct jtemplate *t)
{
	core_put_doc(m, STORE_TEMPLATE, t->name,
		     json_pack("{s:s, s:s, s:o, s:i, s:s, s:O, s:o, s:I, s:O}", "name", t->name, "user", t->user,
			       "team", str_or_null(t->team), "role", (int)t->role, "dataset", t->dataset,
			       "spec", t->spec, "code", str_or_null(t->code), "created_at",
			       (json_int_t)t->created_at, "runs", t->runs));
}

json_t *templates_json(const struct jtemplate *t)
{
	return json_pack("{s:s, s:s, s:o, s:s, s:O, s:o, s:I, s:O}", "name", t->name, "user", t->user, "team",
			 str_or_null(t->team), "on_dataset", t->dataset, "spec", t->spec, "code",
			 str_or_null(t->code), "created_at", (json_int_t)t->created_at, "runs", t->runs);
}

/* Whether spec reads dataset name without a version (pinned to each new one). */
static bool reads_latest(const struct job_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->ndata; i++)
		if (spec->data[i].kind == DATA_YARD && !spec->data[i].version && !strcmp(spec->data[i].name, name))
			return true;
	return false;
}

static int check_spec(const json_t *jspec, const char *dataset, struct errbuf *eb)
{
	struct job_spec spec;
	int ret;

	if (!json_is_object(jspec))
		return error_field(eb, YERR(INVALID_SPEC), "spec", "spec: expected an object");
	ret = spec_from_json(jspec, &spec, eb); /* released after an error too */
	if (!ret && spec.sweep)
		ret = error_field(eb, YERR(INVALID_SPEC), "sweep", "sweep: a template runs a job, not a sweep");
	else if (!ret && !reads_latest(&spec, dataset))
		ret = error_field(eb, YERR(INVALID_SPEC), "data", "data: the spec must read yard://%s "
				  "without a version, so that each run reads the version that made it", dataset);
	spec_release(&spec);
	return ret;
}

int templates_create(struct master *m, const struct caller *c, const json_t *body,
		     struct jtemplate **out, struct errbuf *eb)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	const char *dataset = json_string_value(json_object_get(body, "on_dataset"));
	const json_t *code = json_object_get(body, "code");
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
	ds = dataset ? datasets_find(m, dataset) : NULL;
	if (!ds || !visibility_dataset(m, c, ds))
		return error_field(eb, YERR(BAD_REQUEST), "on_dataset", "on_dataset: no dataset '%.80s'",
				   dataset ? dataset : "");
	if (code && !json_is_null(code) && !json_is_string(code))
		return error_field(eb, YERR(BAD_REQUEST), "code", "code: expected \"sha256:\" and 64 hex digits");
	if ((ret = check_spec(json_object_get(body, "spec"), dataset, eb)))
		return ret;
	t = xcalloc(1, sizeof(*t));
	t->name = xstrdup(name);
	t->user = xstrdup(c->user);
	t->team = c->team ? xstrdup(c->team) : NULL;
	t->role = c->role == ROLE_ADMIN ? ROLE_ADMIN : ROLE_USER;
	t->dataset = xstrdup(dataset);
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

/* t's run for version: its spec named NAME-vN, told which version made it. */
static void run_one(struct master *m, struct jtemplate *t, unsigned version)
{
	json_t *spec = json_deep_copy(t->spec), *params = json_object_get(spec, "params"), *rec;
	struct caller c = { .role = t->role, .user = t->user, .team = t->team };
	struct errbuf eb = ERRBUF_INIT;
	char name[80];
	struct job *j;
	bool again;

	snprintf(name, sizeof(name), "%s-v%u", t->name, version);
	json_object_set_new(spec, "name", json_string(name));
	if (!json_is_object(params)) {
		params = json_object();
		json_object_set_new(spec, "params", params);
	}
	json_object_set_new(params, "template", json_string(t->name));
	json_object_set_new(params, "dataset_version", json_integer(version));
	json_t *body = json_pack("{s:o, s:o}", "spec", spec, "code", str_or_null(t->code));
	if (jobs_submit(m, &c, body, &j, &again, &eb)) {
		rec = json_pack("{s:i, s:s}", "version", (int)version, "error", eb.msg);
		fprintf(stderr, "yard master: template %s: the run for %s@%u was refused: %s\n", t->name,
			t->dataset, version, eb.msg);
	} else {
		rec = json_pack("{s:i, s:I}", "version", (int)version, "job", (json_int_t)j->id);
	}
	json_decref(body);
	json_array_append_new(t->runs, rec);
	while (json_array_size(t->runs) > TEMPLATE_RUNS_KEPT)
		json_array_remove(t->runs, 0);
	template_save(m, t);
}

void templates_on_version(struct master *m, const char *name, unsigned version)
{
	for (size_t i = 0; i < m->ntemplates; i++)
		if (!strcmp(m->templates[i]->dataset, name))
			run_one(m, m->templates[i], version);
}

static int load_one(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL);
	struct jtemplate *t;

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
	t->spec = json_incref(json_object_get(d, "spec"));
	t->code = json_is_string(json_object_get(d, "code")) ? xstrdup(json_string_value(json_object_get(d, "code")))
							       : NULL;
	t->created_at = (uint64_t)json_integer_value(json_object_get(d, "created_at"));
	t->runs = json_is_array(json_object_get(d, "runs")) ? json_incref(json_object_get(d, "runs")) : json_array();
	json_decref(d);
	if (!t->user || !t->dataset || !json_is_object(t->spec)) {
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
