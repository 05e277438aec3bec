/* Data from an earlier job (jobsource.h). */
#include "base/compat.h"
#include "master/jobsource.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/codeindex.h"
#include "master/core.h"
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

/* The archives of src that e reads (a new array, empty when none). */
static json_t *archives_of(const struct job *src, bool checkpoint)
{
	json_t *arr = json_array();

	if (checkpoint) {
		if (src->checkpoint)
			json_array_append_new(arr, json_pack("{s:s, s:s, s:i}", "dir", "", "digest",
							     src->checkpoint, "size", 0));
		return arr;
	}
	for (size_t i = 0; i < src->ntasks; i++) {
		const struct task *t = src->tasks[i];
		char dir[160];
		if (!t->outputs || !latest_outputs(src, t))
			continue;
		snprintf(dir, sizeof(dir), "%s-%u", t->role, t->index);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I}", "dir", dir, "digest", t->outputs, "size",
						     (json_int_t)t->outputs_size));
	}
	return arr;
}

/* Pins e to src's archives; -1 when src left none. */
static int pin(json_t *e, const struct job *src)
{
	const char *source = json_string_value(json_object_get(e, "source"));
	bool checkpoint = source && strstr(source, "/checkpoint");
	json_t *arr = archives_of(src, checkpoint), *a;
	json_int_t total = 0;
	size_t i;

	if (!json_array_size(arr)) {
		json_decref(arr);
		return -1;
	}
	json_array_foreach(arr, i, a)
		total += json_integer_value(json_object_get(a, "size"));
	json_object_set_new(e, "archives", arr);
	json_object_set_new(e, "size", json_integer(total));
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
	if (job_state_is_final(src->state)) {
		if (pin(e, src))
			return error_field(eb, YERR(INVALID_SPEC), field, "%s: job %" PRIu64 " left %s", field,
					   d->job, left_nothing(e));
		return 0;
	}
	for (size_t k = 0; k < spec->nafter; k++)
		waits |= spec->after[k] == d->job;
	if (!waits)
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
		struct job *src;
		if (!is_job_entry(e) || json_object_get(e, "archives"))
			continue;
		src = core_job(m, (uint64_t)json_integer_value(json_object_get(e, "job")));
		if (!src || !job_state_is_final(src->state))
			continue;
		if (pin(e, src)) {
			snprintf(msg, size, "data[%zu]: job %" PRIu64 " left %s", i, src->id, left_nothing(e));
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
	size_t i, k;
	json_t *e, *a;

	json_array_foreach(j->data, i, e) {
		if (!is_job_entry(e))
			continue;
		json_array_foreach(json_object_get(e, "archives"), k, a) {
			const char *dg = json_string_value(json_object_get(a, "digest"));
			if (dg && !strcmp(dg, digest))
				return true;
		}
	}
	return false;
}

void jobsource_index(struct master *m, const struct job *j)
{
	size_t i, k;
	json_t *e, *a;

	json_array_foreach(j->data, i, e)
		if (is_job_entry(e))
			json_array_foreach(json_object_get(e, "archives"), k, a)
				codeindex_add(&m->code_index, json_string_value(json_object_get(a, "digest")), j->id);
}
