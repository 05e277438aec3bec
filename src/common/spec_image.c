#include "base/compat.h"
#include "common/spec_image.h"

#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_code.h"
#include "common/spec_fields.h"

const char *const spec_image_fields[] = { "build", NULL };
const char *const spec_image_build_fields[] = { "dockerfile", "args", NULL };

#define SPEC_MAX_IMAGE 255
#define SPEC_MAX_TAG 128

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alnum(char c)
{
	return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* One path component of a repository name, s[0..n): lowercase letters and
 * digits in runs separated by one '.', one or two '_', or any number of '-'. */
static bool image_component_valid(const char *s, size_t n, bool fold)
{
	size_t i = 0;

	for (;;) {
		size_t run = i;
		while (i < n && (lower_alnum(s[i]) || (fold && s[i] >= 'A' && s[i] <= 'Z')))
			i++;
		if (i == run)
			return false;
		if (i == n)
			return true;
		if (s[i] == '.')
			i++;
		else if (s[i] == '_')
			i += (i + 1 < n && s[i + 1] == '_') ? 2 : 1;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return false;
	}
}

/* A registry, s[0..n): HOST[:PORT], HOST dot-separated labels of letters,
 * digits and inner '-'. */
static bool image_registry_valid(const char *s, size_t n)
{
	const char *colon = memchr(s, ':', n);
	size_t hn = colon ? (size_t)(colon - s) : n, label = 0;

	for (size_t i = 0; i < hn; i++) {
		if (s[i] == '.') {
			if (!label || s[i - 1] == '-')
				return false;
			label = 0;
		} else if (alnum(s[i]) || (s[i] == '-' && label)) {
			label++;
		} else {
			return false;
		}
	}
	if (!label || s[hn - 1] == '-')
		return false;
	if (!colon)
		return true;
	size_t pn = n - hn - 1;
	return pn && pn <= 5 && strspn(colon + 1, "0123456789") >= pn;
}

/*
 * spec_image_ref_problem: why s is not a Docker image reference
 * [HOST[:PORT]/]PATH[:TAG][@sha256:HEX] (the grammar of Docker's
 * distribution/reference, the digest only sha256), or NULL when it is one.
 * The first of several path components may be the registry; a ':' after the
 * last '/' starts the tag.
 */
const char *spec_image_ref_problem(const char *s)
{
	static const char tag_rule[] = "the tag must be at most 128 letters, digits, '_', '.' "
				       "and '-', not starting with '.' or '-'";
	size_t len = strlen(s);
	const char *at = strchr(s, '@'), *end = at ? at : s + len;
	const char *slash = NULL, *colon = NULL, *p, *c;
	bool registry;

	if (len > SPEC_MAX_IMAGE)
		return "longer than 255 characters";
	if (at) {
		const char *d = at + 1;
		bool ok = !strncmp(d, "sha256:", 7) && strlen(d + 7) == 64;
		for (size_t i = 7; ok && i < 7 + 64; i++)
			ok = (d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f');
		if (!ok)
			return "the digest must be sha256: and 64 lowercase hex digits";
	}
	for (p = s; p < end; p++) {
		if (*p == '/')
			slash = p;
		else if (*p == ':')
			colon = p;
	}
	if (colon && (!slash || colon > slash)) {
		size_t tn = (size_t)(end - colon - 1);
		if (!tn || tn > SPEC_MAX_TAG || colon[1] == '.' || colon[1] == '-')
			return tag_rule;
		for (size_t i = 1; i <= tn; i++)
			if (!alnum(colon[i]) && !strchr("_.-", colon[i]))
				return tag_rule;
		end = colon;
	}
	if (end == s)
		return "the repository name is empty";
	/* the first component is the registry when a path follows and it is one */
	c = memchr(s, '/', (size_t)(end - s));
	registry = c && image_registry_valid(s, (size_t)(c - s));
	for (p = registry ? c + 1 : s; p <= end; p = c + 1) {
		c = memchr(p, '/', (size_t)(end - p));
		if (!c)
			c = end;
		if (c == p)
			return "a path component of the repository name is empty";
		if (image_component_valid(p, (size_t)(c - p), false))
			continue;
		if (image_component_valid(p, (size_t)(c - p), true))
			return "repository names must be lowercase";
		if (p == s && c != end && memchr(p, ':', (size_t)(c - p)))
			return "the registry must be HOST or HOST:PORT";
		return "the repository name must be lowercase letters and digits separated by "
		       "'.', '_', '__', '-' or '/'";
	}
	return NULL;
}

const char *spec_image_registry_problem(const char *registry)
{
	char name[SPEC_MAX_IMAGE + 1];

	if (strchr(registry, '/'))
		return "expected HOST or HOST:PORT, without a path";
	/* Docker's rule: a name's first part is its registry only so */
	if (!strchr(registry, '.') && !strchr(registry, ':') && strcmp(registry, "localhost"))
		return "a registry's name holds a '.' or a ':', or is localhost";
	if ((size_t)snprintf(name, sizeof(name), "%s/yard/build:x", registry) >= sizeof(name))
		return "longer than a registry's name can be";
	if (spec_image_ref_problem(name))
		return "expected HOST or HOST:PORT";
	return NULL;
}

static int get_ref(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const char *why;
	int ret;

	if (!json_string_length(v))
		return spec_bad_got(eb, "image", "an image reference such as debian:bookworm", v);
	if ((ret = spec_check_string(v, "image", eb)) < 0)
		return ret;
	if ((why = spec_image_ref_problem(json_string_value(v)))) {
		char got[SPEC_SHOW_MAX + 8];
		spec_show(v, got, sizeof(got));
		return spec_bad(eb, "image", "%s is not a valid image reference: %s", got, why);
	}
	spec->image = xstrdup(json_string_value(v));
	return 0;
}

static int get_build(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *df = json_object_get(v, "dockerfile");
	struct spec_image_build *b;
	const char *why;
	json_t *args = NULL;
	int ret;

	if (!json_is_object(v))
		return spec_bad_got(eb, "image.build", "a mapping with dockerfile and args", v);
	if ((ret = spec_check_known(v, spec_image_build_fields, "image.build", eb)) < 0)
		return ret;
	if (df && !json_is_null(df)) {
		if (!json_is_string(df))
			return spec_bad_got(eb, "image.build.dockerfile", "a path inside the job's code", df);
		if ((ret = spec_check_string(df, "image.build.dockerfile", eb)) < 0)
			return ret;
		/* a path in the code, as code.path is in a repository */
		if ((why = spec_code_path_problem(json_string_value(df))))
			return spec_bad(eb, "image.build.dockerfile", "'%.80s' is not a path inside the job's "
					"code: %s", json_string_value(df), why);
	}
	if ((ret = spec_vars_parse(json_object_get(v, "args"), "image.build.args", &args, eb)) < 0)
		return ret;
	b = xcalloc(1, sizeof(*b));
	b->dockerfile = xstrdup(json_is_string(df) ? json_string_value(df) : SPEC_IMAGE_DOCKERFILE);
	b->args = args;
	b->shown = xasprintf("build of %s", b->dockerfile);
	spec->image_build = b;
	return 0;
}

int spec_image_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	int ret;

	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v))
		return get_ref(v, spec, eb);
	if (!json_is_object(v))
		return spec_bad_got(eb, "image", "an image reference such as debian:bookworm, "
				    "or {build: {dockerfile, args}}", v);
	if ((ret = spec_check_known(v, spec_image_fields, "image", eb)) < 0)
		return ret;
	if (!json_object_get(v, "build"))
		return spec_bad(eb, "image", "expected build: {dockerfile, args} in a mapping");
	return get_build(json_object_get(v, "build"), spec, eb);
}

void spec_image_to_json(const struct job_spec *spec, json_t *doc)
{
	const struct spec_image_build *b = spec->image_build;

	if (b)
		json_object_set_new(doc, "image", json_pack("{s:{s:s, s:O}}", "build", "dockerfile",
							    b->dockerfile, "args", b->args));
	else
		json_object_set_new(doc, "image", spec->image ? json_string(spec->image) : json_null());
}

int spec_image_check_code(const struct job_spec *spec, bool has_code, struct errbuf *eb)
{
	if (!spec->image_build || has_code)
		return 0;
	return spec_bad(eb, "image.build", "the image is built from the job's code, and this job has "
			"none: submit it with yard submit (which uploads the spec file's directory), "
			"or give code.git");
}

const char *spec_image_shown(const struct job_spec *spec)
{
	return spec->image_build ? spec->image_build->shown : spec->image;
}

void spec_image_build_free(struct spec_image_build *b)
{
	if (!b)
		return;
	free(b->dockerfile);
	free(b->shown);
	json_decref(b->args);
	free(b);
}
