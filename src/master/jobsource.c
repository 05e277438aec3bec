/* Data from an earlier job (jobsource.h). */
#include "base/compat.h"
#include "master/jobsource.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/dataset.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/codeindex.h"
#include "master/core.h"
#include "master/datasets.h"
#include "master/visibility.h"

static bool is_job_entry(const json_t *e)
{
	const char *kind = json_string_value(json_object_get(e, "kind"));
	return kind && !strcmp(kind, "job");
}

/* Whether tk is the latest attempt of its role and index that left outputs. */
static bool latest_outputs(const struct job *j, const struct task *tk)
{
	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *o = j->tasks[i];
		if (o->outputs && o->index == tk->index && o->attempt > tk->attempt && !strcmp(o->role, tk->role))
			return false;
	}
	return true;
}

/* The manifest of what e reads of src into *out (new reference, NULL
 * when src left nothing): its checkpoint's, or one of the outputs of each
 * task's latest attempt that left any, under ROLE-INDEX/. */
static int left_by(struct master *m, const struct job *src, bool checkpoint, json_t **out, struct errbuf *eb)
{
	json_t *parts[64];
	char dirs[64][160];
	const char *names[64];
	size_t n = 0;
	int ret = 0;

	*out = NULL;
	if (checkpoint) {
		if (src->checkpoint && !(*out = datasets_manifest(m, src->checkpoint)))
			return error(eb, YERR(UNAVAILABLE), "the checkpoint of job %" PRIu64 " cannot be read",
				     src->id);
		return 0;
	}
	for (size_t i = 0; i < src->ntasks && !ret; i++) {
		const struct task *t = src->tasks[i];
		if (!t->outputs || !latest_outputs(src, t))
			continue;
		if (n == ARRAY_SIZE(parts))
			ret = error(eb, YERR(TOO_LARGE), "job %" PRIu64 " left the outputs of more than %zu tasks",
				    src->id, ARRAY_SIZE(parts));
		else if (!(parts[n] = datasets_manifest(m, t->outputs)))
			ret = error(eb, YERR(UNAVAILABLE), "the outputs of task %" PRIu64 " cannot be read", t->id);
		if (ret)
			break;
		snprintf(dirs[n], sizeof(dirs[n]), "%s-%u", t->role, t->index);
		names[n] = dirs[n];
		n++;
	}
	if (!ret && n)
		*out = manifest_merge(names, parts, n);
	for (size_t i = 0; i < n; i++)
		json_decref(parts[i]);
	return ret;
}

/* Pins e to what src left, as one manifest (datasets.h): 1 when src left
 * nothing, else 0 or an error. */
static int pin(struct master *m, json_t *e, const struct job *src, struct errbuf *eb)
{
	const char *source = json_string_value(json_object_get(e, "source"));
	json_t *man, *reply = NULL;
	char digest[72];
	uint64_t size = 0;
	unsigned files;
	int ret = left_by(m, src, source && strstr(source, "/checkpoint"), &man, eb);

	if (ret || !man)
		return ret ? ret : 1;
	ret = datasets_manifest_put(m, man, digest, &size, &files, &reply, eb);
	json_decref(reply);
	json_decref(man);
	if (ret)
		return ret;
	json_object_set_new(e, "digest", json_string(digest));
	json_object_set_new(e, "size", json_integer((json_int_t)size));
	return 0;
}

static const char *left_nothing(const json_t *e)
{
	const char *source = json_string_value(json_object_get(e, "source"));
	return source && strstr(source, "/checkpoint") ? "no checkpoint" : "no outputs";
}

int jobsource_resolve(struct master *m, const struct caller *c, const struct job_spec *spec, size_t i,
		      json_t *e, struct errbuf *eb)
{
	const struct spec_data *d = &spec->data[i];
	struct job *src = core_job(m, d->job);
	bool waits = false;
	char field[48];

	snprintf(field, sizeof(field), "data[%zu].source", i);
	if (!src || !visibility_job(m, c, src))
		return error_field(eb, YERR(INVALID_SPEC), field, "%s: no job %" PRIu64, field, d->job);
	json_object_set_new(e, "job", json_integer((json_int_t)d->job));
	if (core_job_settled(src)) {
		int ret = pin(m, e, src, eb);
		if (ret == 1)
			return error_field(eb, YERR(INVALID_SPEC), field, "%s: job %" PRIu64 " left %s", field,
					   d->job, left_nothing(e));
		return ret;
	}
	for (size_t k = 0; k < spec->nafter; k++)
		waits |= spec->after[k] == d->job;
	if (!waits && !job_state_is_final(src->state))
		return error_field(eb, YERR(INVALID_SPEC), field, "%s: job %" PRIu64 " is %s: list it in "
				   "after: so that this job waits for what it leaves", field, d->job,
				   job_state_name(src->state));
	return 0;
}

int jobsource_pin(struct master *m, struct job *j, char *msg, size_t size)
{
	bool changed = false;
	size_t i;
	json_t *e;
	int ret = 0;

	json_array_foreach(j->data, i, e) {
		struct errbuf eb = ERRBUF_INIT;
		struct job *src;
		int rc;
		if (!is_job_entry(e) || json_object_get(e, "digest"))
			continue;
		src = core_job(m, (uint64_t)json_integer_value(json_object_get(e, "job")));
		if (!src)
			continue;
		if (!core_job_settled(src)) {
			snprintf(msg, size, "waits for the tasks of job %" PRIu64 " to stop", src->id);
			ret = 1;
			continue;
		}
		if ((rc = pin(m, e, src, &eb))) {
			if (rc == 1)
				snprintf(msg, size, "data[%zu]: job %" PRIu64 " left %s", i, src->id, left_nothing(e));
			else
				snprintf(msg, size, "data[%zu]: %s", i, eb.msg);
			ret = -1;
			break;
		}
		changed = true;
	}
	if (changed) {
		jobsource_index(m, j);
		core_save_job(m, j);
	}
	return ret;
}

bool jobsource_has(const struct job *j, const char *digest)
{
	size_t i;
	json_t *e;

	json_array_foreach(j->data, i, e) {
		const char *dg = json_string_value(json_object_get(e, "digest"));
		if (is_job_entry(e) && dg && !strcmp(dg, digest))
			return true;
	}
	return false;
}

void jobsource_index(struct master *m, const struct job *j)
{
	size_t i;
	json_t *e;

	json_array_foreach(j->data, i, e)
		if (is_job_entry(e) && json_string_value(json_object_get(e, "digest")))
			codeindex_add(&m->code_index, json_string_value(json_object_get(e, "digest")), j->id);
}

void jobsource_release(struct master *m, const struct job *j)
{
	size_t i;
	json_t *e;

	json_array_foreach(j->data, i, e)
		if (is_job_entry(e) && json_string_value(json_object_get(e, "digest")))
			datasets_drop_manifest(m, json_string_value(json_object_get(e, "digest")));
}
