#include "base/compat.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_after.h"
#include "common/spec_fields.h"

static const char *const after_fields[] = { "any", NULL };

int spec_after_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const char *path = "after";
	const json_t *ids = v;
	size_t i, k;
	json_t *id;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_object(v)) {
		const char *key;
		json_t *x;
		json_object_foreach((json_t *)v, key, x) {
			if (!spec_is_one_of(key, after_fields)) {
				char p[256];
				snprintf(p, sizeof(p), "after.%s", key);
				return spec_unknown_field(eb, p, key, after_fields);
			}
		}
		ids = json_object_get(v, "any");
		path = "after.any";
		spec->after_any = true;
		if (!ids || json_is_null(ids))
			return 0;
	}
	if (!json_is_array(ids))
		return spec_bad_got(eb, path, "a list of job ids or {any: [ids]}", ids);
	if (json_array_size(ids) > SPEC_AFTER_MAX)
		return spec_bad(eb, path, "at most %d jobs, got %zu", SPEC_AFTER_MAX,
				json_array_size(ids));
	spec->after = xcalloc(json_array_size(ids) + 1, sizeof(*spec->after));
	json_array_foreach(ids, i, id) {
		char p[64];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!json_is_integer(id) || json_integer_value(id) < 1)
			return spec_bad_got(eb, p, "a job id (an integer >= 1)", id);
		for (k = 0; k < spec->nafter; k++)
			if (spec->after[k] == (uint64_t)json_integer_value(id))
				return spec_bad(eb, p, "job %" JSON_INTEGER_FORMAT " is listed twice",
						json_integer_value(id));
		spec->after[spec->nafter++] = (uint64_t)json_integer_value(id);
	}
	return 0;
}

void spec_after_to_json(const struct job_spec *spec, json_t *doc)
{
	json_t *ids;

	if (!spec->nafter)
		return;
	ids = json_array();
	for (size_t i = 0; i < spec->nafter; i++)
		json_array_append_new(ids, json_integer((json_int_t)spec->after[i]));
	json_object_set_new(doc, "after", spec->after_any ? json_pack("{s:o}", "any", ids) : ids);
}
