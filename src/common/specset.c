/* `--set PATH=VALUE` (spec_set in spec.h), checked against the spec's own
 * field lists (spec_fields.h). */
#include "base/compat.h"
#include "common/spec.h"

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec_code.h"
#include "common/spec_fields.h"

/* --set PATH=VALUE. The path is checked against the fields the validation
 * knows before anything is set; the value is typed as a YAML plain scalar,
 * except that one wrapped in matching single or double quotes is the string
 * inside. */

/* What a step of a --set path may be followed by. */
enum set_shape {
	SET_VALUE,  /* nothing: the field takes a value */
	SET_FIELDS, /* one of a list of known fields */
	SET_MAP,    /* any key (params, env, labels: their keys are checked later) */
	SET_ROLES,  /* a role the spec already has */
};

/* The fields that are not values, by the list they are one of; every other
 * known field is a SET_VALUE. */
static const struct set_step {
	const char *const *in;     /* the list the field is one of */
	const char *name;
	enum set_shape below;
	const char *const *fields; /* SET_FIELDS: the known names below it */
} set_steps[] = {
	{ spec_top_fields, "params", SET_MAP, NULL },
	{ spec_top_fields, "env", SET_MAP, NULL },
	{ spec_top_fields, "tasks", SET_ROLES, NULL },
	{ spec_top_fields, "placement", SET_FIELDS, spec_placement_fields },
	{ spec_top_fields, "restart", SET_FIELDS, spec_restart_fields },
	{ spec_top_fields, "preemption", SET_FIELDS, spec_preemption_fields },
	{ spec_top_fields, "interactive", SET_FIELDS, spec_interactive_fields },
	{ spec_top_fields, "code", SET_FIELDS, spec_code_fields },
	{ spec_placement_fields, "labels", SET_MAP, NULL },
};

static const struct set_step *set_step_of(const char *const *in, const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(set_steps); i++)
		if (set_steps[i].in == in && !strcmp(set_steps[i].name, name))
			return &set_steps[i];
	return NULL;
}

/*
 * no_role refuses a --set that would add a role: "tasks.wrker: no role 'wrker'
 * in the spec (roles: worker); did you mean 'worker'?". A role map is free in
 * a spec file, but a new role from --set is almost always a typo of one that
 * is there, and it would run with every default (no memory limit).
 */
static int no_role(struct errbuf *eb, const char *path, const char *role, const json_t *tasks)
{
	size_t n = json_is_object(tasks) ? json_object_size(tasks) : 0;
	const char **names = xcalloc(n + 1, sizeof(*names));
	struct strbuf list = STRBUF_INIT;
	const char *key, *best;
	json_t *v;
	size_t i = 0;
	int ret;

	if (n)
		json_object_foreach((json_t *)tasks, key, v) {
			strbuf_addf(&list, "%s%s", i ? ", " : "", key);
			names[i++] = key;
		}
	best = spec_closest(role, names);
	if (best)
		ret = spec_bad(eb, path, "no role '%s' in the spec (roles: %s); did you mean '%s'?", role,
			  n ? list.buf : "none", best);
	else
		ret = spec_bad(eb, path, "no role '%s' in the spec (roles: %s); roles are added in the "
				    "spec file, not with --set", role, n ? list.buf : "none");
	strbuf_release(&list);
	free(names);
	return ret;
}

/* set_check_path refuses a dotted path (its steps separated by NULs, nseg of
 * them) that names no field of the spec, as the validation would refuse the
 * same field in the file, or a role the document does not have. */
static int set_check_path(const json_t *doc, const char *path, size_t nseg, struct errbuf *eb)
{
	struct strbuf at = STRBUF_INIT;
	enum set_shape shape = SET_FIELDS;
	const char *const *fields = spec_top_fields;
	const json_t *tasks = json_object_get(doc, "tasks");
	const char *seg = path;
	int ret = 0;

	for (size_t i = 0; i < nseg; i++, seg += strlen(seg) + 1) {
		const struct set_step *step;
		size_t parent_len = at.len;

		strbuf_addf(&at, "%s%s", i ? "." : "", seg);
		switch (shape) {
		case SET_VALUE:
			ret = spec_bad(eb, at.buf, "unknown field ('%.*s' takes a value, not fields)",
				  (int)parent_len, at.buf);
			goto out;
		case SET_MAP:
			shape = SET_VALUE;
			break;
		case SET_ROLES:
			if (!json_is_object(tasks) || !json_object_get(tasks, seg)) {
				ret = no_role(eb, at.buf, seg, tasks);
				goto out;
			}
			shape = SET_FIELDS;
			fields = spec_role_fields;
			break;
		case SET_FIELDS:
			if (!spec_is_one_of(seg, fields)) {
				ret = spec_unknown_field(eb, at.buf, seg, fields);
				goto out;
			}
			step = set_step_of(fields, seg);
			shape = step ? step->below : SET_VALUE;
			fields = step ? step->fields : NULL;
			break;
		}
	}
out:
	strbuf_release(&at);
	return ret;
}

/* set_value: the JSON value of a --set's text (see spec_set), or NULL with
 * eb set about path. */
static json_t *set_value(const char *text, const char *path, struct errbuf *eb)
{
	size_t len = strlen(text);
	const char *why = NULL;
	json_t *value;

	if (text[0] == '\'' || text[0] == '"') {
		if (len < 2 || text[len - 1] != text[0]) {
			spec_bad(eb, path, "a quote that is not closed, got %s", text);
			return NULL;
		}
		value = json_stringn(text + 1, len - 2);
	} else {
		value = spec_resolve_plain(text, &why);
	}
	if (!value)
		spec_bad(eb, path, "%s, got %s", why ? why : "invalid UTF-8", text);
	return value;
}

int spec_set(json_t *doc, const char *assignment, struct errbuf *eb)
{
	const char *eq = strchr(assignment, '=');
	char *path = NULL;
	char *seg, *dot;
	size_t nseg = 1;
	json_t *node = doc;
	json_t *value = NULL;
	int ret = 0;

	if (!eq || eq == assignment || !json_is_object(doc))
		return error(eb, YERR(BAD_REQUEST), "--set '%s': expected PATH=VALUE", assignment);
	path = xstrndup(assignment, (size_t)(eq - assignment));
	if (path[0] == '.' || path[strlen(path) - 1] == '.' || strstr(path, "..")) {
		ret = error(eb, YERR(BAD_REQUEST), "--set '%s': expected PATH=VALUE", assignment);
		goto out;
	}
	/* the steps, NUL-separated, for the check; then the dots again */
	for (dot = path; (dot = strchr(dot, '.')); nseg++)
		*dot++ = '\0';
	ret = set_check_path(doc, path, nseg, eb);
	for (size_t i = 0; i < (size_t)(eq - assignment); i++)
		if (!path[i])
			path[i] = '.';
	if (ret)
		goto out;
	value = set_value(eq + 1, path, eb);
	if (!value) {
		ret = YERR(INVALID_SPEC);
		goto out;
	}
	for (seg = path; (dot = strchr(seg, '.')); seg = dot + 1) {
		json_t *child;
		*dot = '\0';
		child = json_object_get(node, seg);
		if (!child || json_is_null(child)) {
			child = json_object();
			json_object_set_new(node, seg, child);
		} else if (!json_is_object(child)) {
			ret = spec_bad_got(eb, path, "a mapping to set a field in", child);
			goto out;
		}
		*dot = '.';
		node = child;
	}
	if (json_object_set(node, seg, value) < 0)
		ret = error(eb, YERR(BAD_REQUEST), "--set '%s': invalid key", assignment);
out:
	json_decref(value);
	free(path);
	return ret;
}
