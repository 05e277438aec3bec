#include "base/compat.h"
#include "master/images.h"

#include "base/clock.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_code.h"
#include "common/spec_image.h"
#include "master/nodereport.h"

/* The longest image name an agent may report: a registry and yard/build:HEX. */
#define IMAGE_NAME_MAX 300

void images_reported(struct master *m, struct task *t, const json_t *image)
{
	struct job *j = t->job;
	const json_t *tag = json_object_get(image, "tag"), *size = json_object_get(image, "size");
	const char *how = json_string_value(json_object_get(image, "how"));
	const struct spec_code *code = j->spec ? j->spec->code : NULL;

	if (!nodereport_printable(tag, IMAGE_NAME_MAX) || !strstr(json_string_value(tag), "yard/build:") ||
	    !json_is_integer(size) || json_integer_value(size) < 0 || !how ||
	    (strcmp(how, "built") && strcmp(how, "pulled") && strcmp(how, "present")) || !j->spec ||
	    !j->spec->image_build)
		return;
	if (json_equal(json_object_get(j->image_built, "tag"), tag))
		return; /* the job's other tasks, its restarts: the same image */
	json_decref(j->image_built);
	j->image_built = json_pack("{s:O, s:O, s:s, s:s, s:I, s:s, s:o, s:o}", "tag", tag, "size", size, "how", how,
				   "node", t->node ? t->node : "", "at", (json_int_t)wall_us(), "dockerfile",
				   j->spec->image_build->dockerfile, "git",
				   code ? json_string(code->git) : json_null(), "sha",
				   code && code->sha ? json_string(code->sha) : json_null());
	core_save_job(m, j);
}

/* One image's entry, made or updated from job j's image_built. */
static void add_use(json_t *by_tag, const struct job *j)
{
	const json_t *b = j->image_built;
	const char *tag = json_string_value(json_object_get(b, "tag"));
	const char *how = json_string_value(json_object_get(b, "how"));
	json_t *e = json_object_get(by_tag, tag);

	if (!e) {
		e = json_pack("{s:s, s:O, s:O, s:O, s:o, s:O, s:n, s:n, s:I}", "image", tag, "size",
			      json_object_get(b, "size"), "git", json_object_get(b, "git"), "sha",
			      json_object_get(b, "sha"), "code", j->code ? json_string(j->code) : json_null(),
			      "dockerfile", json_object_get(b, "dockerfile"), "built_by", "built_on", "jobs",
			      (json_int_t)0);
		json_object_set_new(by_tag, tag, e);
	}
	json_object_set_new(e, "jobs", json_integer(json_integer_value(json_object_get(e, "jobs")) + 1));
	if (how && !strcmp(how, "built") && json_is_null(json_object_get(e, "built_by"))) {
		json_object_set_new(e, "built_by", json_integer((json_int_t)j->id));
		json_object_set(e, "built_on", json_object_get(b, "node"));
	}
	if (json_integer_value(json_object_get(b, "at")) >= json_integer_value(json_object_get(e, "last_at"))) {
		json_object_set_new(e, "last_job", json_integer((json_int_t)j->id));
		json_object_set(e, "last_at", json_object_get(b, "at"));
	}
}

static int newest_first(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "last_at"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "last_at"));

	return x < y ? 1 : x > y ? -1 : 0;
}

json_t *images_list(struct master *m, const struct caller *c)
{
	json_t *by_tag = json_object(), *e, *arr = json_array();
	const char *tag;
	json_t **v;
	size_t n = 0, i = 0;

	for (size_t k = 0; k < m->njobs; k++) {
		const struct job *j = m->jobs[k];
		if (j && j->image_built && visibility_job(m, c, j))
			add_use(by_tag, j);
	}
	v = xcalloc(json_object_size(by_tag) + 1, sizeof(*v));
	json_object_foreach(by_tag, tag, e)
		v[n++] = e;
	sort_array(v, n, sizeof(*v), newest_first);
	for (i = 0; i < n; i++)
		json_array_append(arr, v[i]);
	free(v);
	json_decref(by_tag);
	return json_pack("{s:o}", "images", arr);
}
