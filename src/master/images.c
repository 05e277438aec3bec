#include "base/compat.h"
#include "master/images.h"

#include <string.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_code.h"
#include "common/spec_image.h"
#include "master/datasets.h"
#include "master/gitcred.h"
#include "master/nodereport.h"

/* The longest image name an agent may report: a registry and yard/build:HEX. */
#define IMAGE_NAME_MAX 300
/* What every built image's name holds (agent/imagebuild.h's IMAGEBUILD_REPO). */
#define IMAGEBUILD_REPO_TAG "yard/build:"

/* A name an agent may report: printable, bounded, a built image's. */
static bool tag_valid(const json_t *tag)
{
	return nodereport_printable(tag, IMAGE_NAME_MAX) && strstr(json_string_value(tag), IMAGEBUILD_REPO_TAG);
}

void images_reported(struct master *m, struct task *t, const json_t *image)
{
	struct job *j = t->job;
	const json_t *tag = json_object_get(image, "tag"), *size = json_object_get(image, "size");
	const char *how = json_string_value(json_object_get(image, "how"));
	const struct spec_code *code = j->spec ? j->spec->code : NULL;

	json_t *stored = NULL;

	if (!tag_valid(tag) || !json_is_integer(size) || json_integer_value(size) < 0 || !how ||
	    (strcmp(how, "built") && strcmp(how, "pulled") && strcmp(how, "loaded") && strcmp(how, "present")) ||
	    !j->spec || !j->spec->image_build)
		return;
	if (json_equal(json_object_get(j->image_built, "tag"), tag)) {
		if (json_object_get(j->image_built, "how"))
			return; /* the job's other tasks, its restarts: the same image */
		/* stored before the report came (images_store_put): kept */
		stored = json_incref(json_object_get(j->image_built, "stored"));
	}
	json_decref(j->image_built);
	j->image_built = json_pack("{s:O, s:O, s:s, s:s, s:I, s:s, s:o, s:o}", "tag", tag, "size", size, "how", how,
				   "node", t->node ? t->node : "", "at", (json_int_t)wall_us(), "dockerfile",
				   j->spec->image_build->dockerfile, "git",
				   code ? json_string(code->git) : json_null(), "sha",
				   code && code->sha ? json_string(code->sha) : json_null());
	if (stored)
		json_object_set_new(j->image_built, "stored", stored);
	core_save_job(m, j);
}

int images_store_put(struct master *m, struct task *t, const json_t *tag, const char *digest, struct errbuf *eb)
{
	struct job *j = t->job;
	const char *old;

	if (!tag_valid(tag))
		return error(eb, YERR(BAD_REQUEST), "tag '%.300s': expected the name of an image built from a "
			     "job's code ([REGISTRY/]" IMAGEBUILD_REPO_TAG "HEX)", json_is_string(tag)
			     ? json_string_value(tag) : "(not a string)");
	if (!j->image_built || !json_equal(json_object_get(j->image_built, "tag"), tag)) {
		/* before the task's running report (images_reported keeps it) */
		json_decref(j->image_built);
		j->image_built = json_pack("{s:O}", "tag", tag);
	}
	old = json_string_value(json_object_get(j->image_built, "stored"));
	if (old && strcmp(old, digest))
		datasets_drop_manifest(m, old); /* it copies old */
	json_object_set_new(j->image_built, "stored", json_string(digest));
	core_save_job(m, j);
	return 0;
}

/* The manifest job j stored of its image (images_store_put), or NULL. */
static const char *stored_of(const struct job *j)
{
	return j && j->image_built ? json_string_value(json_object_get(j->image_built, "stored")) : NULL;
}

const char *images_store_find(const struct master *m, const char *tag)
{
	const char *found = NULL;

	for (size_t k = 0; tag && k < m->njobs; k++) {
		const char *stored = stored_of(m->jobs[k]);
		if (stored && !strcmp(json_string_value(json_object_get(m->jobs[k]->image_built, "tag")), tag))
			found = stored; /* the latest job's: the jobs are in id order */
	}
	return found;
}

bool images_store_holds(const struct master *m, const char *digest)
{
	for (size_t k = 0; k < m->njobs; k++) {
		const char *stored = stored_of(m->jobs[k]);
		if (stored && !strcmp(stored, digest))
			return true;
	}
	return false;
}

/* One image's entry, made or updated from job j's image_built. */
static void add_use(json_t *by_tag, const struct job *j)
{
	const json_t *b = j->image_built;
	const char *tag = json_string_value(json_object_get(b, "tag"));
	const char *how = json_string_value(json_object_get(b, "how"));
	json_t *e = json_object_get(by_tag, tag);

	if (!e) {
		e = json_pack("{s:s, s:O, s:O, s:O, s:o, s:O, s:n, s:n, s:I, s:b}", "image", tag, "size",
			      json_object_get(b, "size"), "git", json_object_get(b, "git"), "sha",
			      json_object_get(b, "sha"), "code", j->code ? json_string(j->code) : json_null(),
			      "dockerfile", json_object_get(b, "dockerfile"), "built_by", "built_on", "jobs",
			      (json_int_t)0, "stored", 0);
		json_object_set_new(by_tag, tag, e);
	}
	json_object_set_new(e, "jobs", json_integer(json_integer_value(json_object_get(e, "jobs")) + 1));
	if (json_is_string(json_object_get(b, "stored")))
		json_object_set_new(e, "stored", json_true());
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
		/* (an image stored before its job's running report came is not listed yet) */
		if (j && json_object_get(j->image_built, "how") && visibility_job(m, c, j))
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

int images_registry_auth(const char *registry, const char *path, char **out, struct errbuf *eb)
{
	char *user, *password, *text, *b64;
	json_t *doc;
	size_t len;

	*out = NULL;
	if (gitcred_read_token("registry-credential-file", path, NULL, &user, &password, eb))
		return eb->code;
	doc = json_pack("{s:s, s:s, s:s}", "username", user, "password", password, "serveraddress", registry);
	text = json_dumps(doc, JSON_COMPACT);
	len = strlen(text);
	b64 = xmalloc(4 * ((len + 2) / 3) + 1);
	base64_encode(text, len, b64);
	/* base64url, as the engine reads the header */
	for (char *p = b64; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	explicit_bzero(text, len);
	explicit_bzero(password, strlen(password));
	free(text);
	free(user);
	free(password);
	json_decref(doc);
	*out = b64;
	return 0;
}
