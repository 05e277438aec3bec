#include "base/compat.h"
#include "common/spec.h"

#include <math.h>
#include <yaml.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec_after.h"
#include "common/spec_code.h"
#include "common/spec_image.h"
#include "common/spec_data.h"
#include "common/spec_sweep.h"
#include "common/spec_fields.h"

/* Limits of a spec (see spec.h). */
#define SPEC_MAX_TEXT (1024 * 1024)
#define SPEC_MAX_DEPTH 32
#define SPEC_MAX_ARGS 1024
#define SPEC_MAX_ROLES 64
#define SPEC_MAX_TASKS 4096
#define SPEC_MAX_REPLICAS 1024
#define SPEC_MAX_GPUS 64
#define SPEC_MAX_CPUS 1024
#define SPEC_MIN_MEMORY (4ULL << 20)
#define SPEC_MIN_PIDS 16
#define SPEC_MAX_PIDS 1000000
#define SPEC_DEFAULT_PIDS 4096
#define SPEC_MAX_RESTARTS 100
#define SPEC_MAX_NODES 4096
/* A "got VALUE" in a message shows at most this much of the value. */

/* ------------------------------------------------------------------------ */
/* Scalars typed as the YAML 1.2 core schema types plain scalars. */

enum scalar_kind { SCALAR_STRING, SCALAR_NULL, SCALAR_BOOL, SCALAR_INT, SCALAR_REAL };

bool spec_is_one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (!strcmp(s, *words))
			return true;
	return false;
}

static bool all_digits(const char *s, const char *end)
{
	if (s == end)
		return false;
	for (; s < end; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool looks_real(const char *s)
{
	const char *p = s, *q;
	bool mant = false;
	if (*p == '-' || *p == '+')
		p++;
	for (q = p; *q >= '0' && *q <= '9'; q++)
		mant = true;
	p = q;
	if (*p == '.') {
		p++;
		for (q = p; *q >= '0' && *q <= '9'; q++)
			mant = true;
		p = q;
	}
	if (!mant)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		for (q = p; *q >= '0' && *q <= '9'; q++)
			;
		if (q == p)
			return false;
		p = q;
	}
	return *p == '\0';
}

/* classify_plain: the core schema type of plain scalar s (NUL-terminated). */
static enum scalar_kind classify_plain(const char *s)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const bools[] = { "true", "True", "TRUE", "false", "False", "FALSE", NULL };
	static const char *const specials[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
		"-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN", NULL };
	const char *digits = s + (*s == '-' || *s == '+');
	if (spec_is_one_of(s, nulls))
		return SCALAR_NULL;
	if (spec_is_one_of(s, bools))
		return SCALAR_BOOL;
	if (all_digits(digits, digits + strlen(digits)))
		return SCALAR_INT;
	if (looks_real(s) || spec_is_one_of(s, specials))
		return SCALAR_REAL;
	return SCALAR_STRING;
}

/*
 * resolve_plain makes the JSON value of a plain scalar. On failure it returns
 * NULL and *why says what is wrong with the text (an integer out of range, a
 * number JSON cannot hold).
 */
json_t *spec_resolve_plain(const char *s, const char **why)
{
	*why = NULL;
	switch (classify_plain(s)) {
	case SCALAR_NULL:
		return json_null();
	case SCALAR_BOOL:
		return json_boolean(s[0] == 't' || s[0] == 'T');
	case SCALAR_INT: {
		int64_t v;
		if (parse_i64_str(s + (*s == '+'), &v) < 0) {
			*why = "integer out of range";
			return NULL;
		}
		return json_integer(v);
	}
	case SCALAR_REAL: {
		/* .inf and .nan are reals to YAML but JSON has no such numbers. */
		double d = looks_real(s) ? strtod(s, NULL) : NAN;
		if (!isfinite(d)) {
			*why = "number out of range (only finite numbers are allowed)";
			return NULL;
		}
		return json_real(d);
	}
	case SCALAR_STRING:
		break;
	}
	json_t *str = json_string(s);
	if (!str)
		*why = "invalid UTF-8";
	return str;
}

/* ------------------------------------------------------------------------ */
/* YAML (and JSON, which is YAML) text into a JSON document. */

struct load_frame {
	json_t *node; /* borrowed: owned by its parent or by the loader's root */
	char *key;    /* owned: a mapping's key waiting for its value, or NULL */
};

struct loader {
	yaml_parser_t parser;
	struct load_frame stack[SPEC_MAX_DEPTH];
	size_t depth;
	json_t *root; /* owned */
	struct errbuf *eb;
};

static int load_error(struct loader *ld, const yaml_mark_t *mark, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int load_error(struct loader *ld, const yaml_mark_t *mark, const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return error(ld->eb, YERR(INVALID_SPEC), "line %zu: %s", mark->line + 1, msg);
}

static int parser_error(struct loader *ld)
{
	const yaml_parser_t *p = &ld->parser;
	const char *problem = p->problem ? p->problem : "cannot parse the text";
	if (p->context)
		return error(ld->eb, YERR(INVALID_SPEC), "line %zu: %s (%s at line %zu)",
			p->problem_mark.line + 1, problem, p->context, p->context_mark.line + 1);
	return error(ld->eb, YERR(INVALID_SPEC), "line %zu: %s", p->problem_mark.line + 1, problem);
}

/* The tag of a node, or NULL when it has none or the non-specific "!". */
static const char *event_tag(const yaml_event_t *ev)
{
	const yaml_char_t *tag = NULL;
	if (ev->type == YAML_SCALAR_EVENT)
		tag = ev->data.scalar.tag;
	else if (ev->type == YAML_MAPPING_START_EVENT)
		tag = ev->data.mapping_start.tag;
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		tag = ev->data.sequence_start.tag;
	if (!tag || !strcmp((const char *)tag, "!"))
		return NULL;
	return (const char *)tag;
}

static const char *event_anchor(const yaml_event_t *ev)
{
	if (ev->type == YAML_SCALAR_EVENT)
		return (const char *)ev->data.scalar.anchor;
	if (ev->type == YAML_MAPPING_START_EVENT)
		return (const char *)ev->data.mapping_start.anchor;
	if (ev->type == YAML_SEQUENCE_START_EVENT)
		return (const char *)ev->data.sequence_start.anchor;
	return NULL;
}

/* Where the next node goes: true when the top of the stack is a mapping that
 * waits for a key. */
static bool wants_key(const struct loader *ld)
{
	const struct load_frame *top;
	if (!ld->depth)
		return false;
	top = &ld->stack[ld->depth - 1];
	return json_is_object(top->node) && !top->key;
}

/* place puts value (reference taken) at the current position. */
static int place(struct loader *ld, json_t *value, const yaml_mark_t *mark)
{
	struct load_frame *top;
	int ret = 0;
	if (!ld->depth) {
		ld->root = value;
		return 0;
	}
	top = &ld->stack[ld->depth - 1];
	if (json_is_array(top->node)) {
		if (json_array_append_new(top->node, value) < 0)
			ret = load_error(ld, mark, "cannot store the value");
		return ret;
	}
	if (json_object_set_new(top->node, top->key, value) < 0)
		ret = load_error(ld, mark, "cannot store the value of '%s'", top->key);
	free(top->key);
	top->key = NULL;
	return ret;
}

static int on_scalar(struct loader *ld, const yaml_event_t *ev)
{
	const char *value = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = event_tag(ev);
	const char *why = NULL;
	json_t *node;

	if (strlen(value) != len)
		return load_error(ld, &ev->start_mark, "NUL characters are not allowed");
	if (wants_key(ld)) {
		struct load_frame *top = &ld->stack[ld->depth - 1];
		if (tag && strcmp(tag, YAML_STR_TAG))
			return load_error(ld, &ev->start_mark, "keys must be strings, not '%s'", tag);
		if (json_object_get(top->node, value))
			return load_error(ld, &ev->start_mark, "duplicate key '%s'", value);
		top->key = xstrdup(value);
		return 0;
	}
	if (tag && strcmp(tag, YAML_STR_TAG))
		return load_error(ld, &ev->start_mark, "tag '%s' is not supported", tag);
	if (!tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
		node = spec_resolve_plain(value, &why);
	else if (!(node = json_string(value)))
		why = "invalid UTF-8";
	if (!node)
		return load_error(ld, &ev->start_mark, "'%.64s': %s", value, why);
	return place(ld, node, &ev->start_mark);
}

static int on_collection_start(struct loader *ld, const yaml_event_t *ev)
{
	bool is_map = ev->type == YAML_MAPPING_START_EVENT;
	const char *tag = event_tag(ev);
	json_t *node;
	int ret;

	if (wants_key(ld))
		return load_error(ld, &ev->start_mark, "keys must be scalars, not %s",
			is_map ? "mappings" : "sequences");
	if (tag && strcmp(tag, is_map ? YAML_MAP_TAG : YAML_SEQ_TAG))
		return load_error(ld, &ev->start_mark, "tag '%s' is not supported", tag);
	if (ld->depth == SPEC_MAX_DEPTH)
		return load_error(ld, &ev->start_mark, "nesting deeper than %d levels", SPEC_MAX_DEPTH);
	node = is_map ? json_object() : json_array();
	json_incref(node);
	ret = place(ld, node, &ev->start_mark);
	if (ret < 0) {
		json_decref(node);
		return ret;
	}
	ld->stack[ld->depth].node = node;
	ld->stack[ld->depth].key = NULL;
	ld->depth++;
	json_decref(node); /* the parent (or root) holds it now */
	return 0;
}

static void loader_release(struct loader *ld)
{
	for (size_t i = 0; i < ld->depth; i++)
		free(ld->stack[i].key);
	ld->depth = 0;
	json_decref(ld->root);
	ld->root = NULL;
	yaml_parser_delete(&ld->parser);
}

int spec_load_text(const char *text, size_t len, json_t **out, struct errbuf *eb)
{
	struct loader ld = { .depth = 0, .root = NULL, .eb = eb };
	bool done = false;
	unsigned docs = 0;
	int ret = 0;

	*out = NULL;
	if (len > SPEC_MAX_TEXT)
		return error(eb, YERR(INVALID_SPEC), "the spec is %zu bytes, more than the limit of 1 MiB",
			len);
	if (!yaml_parser_initialize(&ld.parser))
		return error(eb, YERR(INTERNAL), "cannot set up the YAML parser");
	yaml_parser_set_input_string(&ld.parser, (const unsigned char *)text, len);

	while (!done) {
		yaml_event_t ev;
		const char *anchor;
		if (!yaml_parser_parse(&ld.parser, &ev)) {
			ret = parser_error(&ld);
			goto out;
		}
		anchor = event_anchor(&ev);
		if (anchor) {
			ret = load_error(&ld, &ev.start_mark,
				"anchors and aliases are not allowed (anchor '&%s')", anchor);
			yaml_event_delete(&ev);
			goto out;
		}
		switch (ev.type) {
		case YAML_ALIAS_EVENT:
			ret = load_error(&ld, &ev.start_mark,
				"anchors and aliases are not allowed (alias '*%s')",
				(const char *)ev.data.alias.anchor);
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				ret = load_error(&ld, &ev.start_mark,
					"more than one document (a spec is one document)");
			break;
		case YAML_SCALAR_EVENT:
			ret = on_scalar(&ld, &ev);
			break;
		case YAML_MAPPING_START_EVENT:
		case YAML_SEQUENCE_START_EVENT:
			ret = on_collection_start(&ld, &ev);
			break;
		case YAML_MAPPING_END_EVENT:
		case YAML_SEQUENCE_END_EVENT:
			ld.depth--;
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (ret < 0)
			goto out;
	}
	if (!docs) {
		ret = error(eb, YERR(INVALID_SPEC), "line 1: the spec is empty");
		goto out;
	}
	*out = ld.root;
	ld.root = NULL;
out:
	loader_release(&ld);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Helpers for validation messages. */

void spec_show(const json_t *v, char *buf, size_t size)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!s) {
		snprintf(buf, size, "a value");
		return;
	}
	if (strlen(s) > SPEC_SHOW_MAX)
		snprintf(buf, size, "%.*s...", SPEC_SHOW_MAX, s);
	else
		snprintf(buf, size, "%s", s);
	free(s);
}

/* Every validation error: "PATH: MESSAGE", field PATH. */
int spec_bad(struct errbuf *eb, const char *path, const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return error_field(eb, YERR(INVALID_SPEC), path, "%s: %s", path, msg);
}

/* bad_got: "PATH: expected WHAT, got VALUE". */
int spec_bad_got(struct errbuf *eb, const char *path, const char *what, const json_t *v)
{
	char got[SPEC_SHOW_MAX + 8];
	spec_show(v, got, sizeof(got));
	return spec_bad(eb, path, "expected %s, got %s", what, got);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];
	if (la >= ARRAY_SIZE(row) || lb >= ARRAY_SIZE(row))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* closest: the name in names (NULL-terminated) within an edit distance of 2
 * of key, the nearest first in the list on a tie; NULL when none is. */
const char *spec_closest(const char *key, const char *const *names)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (const char *const *k = names; *k; k++) {
		size_t d = edit_distance(key, *k);
		if (d < best_d) {
			best_d = d;
			best = *k;
		}
	}
	return best;
}

/* unknown_field: "PATH: unknown field (did you mean 'NAME'?)" for key, one
 * of an object's keys that is not in known. */
int spec_unknown_field(struct errbuf *eb, const char *path, const char *key,
		       const char *const *known)
{
	const char *best = spec_closest(key, known);
	if (best)
		return spec_bad(eb, path, "unknown field (did you mean '%s'?)", best);
	return spec_bad(eb, path, "unknown field");
}

int spec_check_known(const json_t *obj, const char *const *known, const char *prefix,
	struct errbuf *eb)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v) {
		char path[256];
		if (spec_is_one_of(key, known))
			continue;
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", key);
		return spec_unknown_field(eb, path, key, known);
	}
	return 0;
}

/* A field that is absent or null takes its default. */
static const json_t *field(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

static bool name_char(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '-' || c == '_' || c == '.');
}

/* [a-z0-9][a-z0-9_.-]{0,62} */
static bool valid_name(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i], i == 0))
			return false;
	return true;
}

/* [a-z][a-z0-9_-]{0,31} */
static bool valid_role(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 32 || !(s[0] >= 'a' && s[0] <= 'z'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
			    s[i] == '_'))
			return false;
	return true;
}

/* [A-Za-z_][A-Za-z0-9_]{0,63} */
bool spec_ident_valid(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 64 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			    (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static const char name_rule[] = "a name of lowercase letters, digits, '-', '_' and '.' "
				"(at most 63, starting with a letter or digit)";

static int get_name(const json_t *v, const char *path, char **out, struct errbuf *eb)
{
	if (!json_is_string(v) || !valid_name(json_string_value(v)))
		return spec_bad_got(eb, path, name_rule, v);
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int get_uint(const json_t *v, const char *path, int64_t min, int64_t max, unsigned *out,
	struct errbuf *eb)
{
	char what[64];
	json_int_t i;
	if (!json_is_integer(v) || (i = json_integer_value(v)) < min) {
		snprintf(what, sizeof(what), "an integer >= %" PRId64, min);
		return spec_bad_got(eb, path, what, v);
	}
	if (i > max) {
		snprintf(what, sizeof(what), "an integer <= %" PRId64, max);
		return spec_bad_got(eb, path, what, v);
	}
	*out = (unsigned)i;
	return 0;
}

/* check_string: a string of at most SPEC_MAX_STRING bytes without NULs. */
int spec_check_string(const json_t *v, const char *path, struct errbuf *eb)
{
	size_t n = json_string_length(v);
	if (n > SPEC_MAX_STRING)
		return spec_bad(eb, path, "a string of %zu bytes, more than %d", n, SPEC_MAX_STRING);
	if (strlen(json_string_value(v)) != n)
		return spec_bad(eb, path, "NUL characters are not allowed");
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Placeholders: "{params.K}", "{{" and "}}". */

/*
 * next_placeholder finds the next "{params.K}" in s, skipping
 * "{{" and "}}". Returns a pointer to its brace and sets key and keylen, or NULL.
 */
static const char *next_placeholder(const char *s, const char **key, size_t *keylen)
{
	static const char pfx[] = "{params.";
	for (const char *p = s; *p; p++) {
		const char *end;
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			p++;
			continue;
		}
		if (strncmp(p, pfx, sizeof(pfx) - 1))
			continue;
		end = strchr(p + sizeof(pfx) - 1, '}');
		if (!end)
			return NULL;
		*key = p + sizeof(pfx) - 1;
		*keylen = (size_t)(end - *key);
		return p;
	}
	return NULL;
}

/* A real in the shortest form that reads back as the same number. */
static void format_real(double d, char *buf, size_t size)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		snprintf(buf + strlen(buf), size - strlen(buf), ".0");
}

/* scalar_text appends the text form of a scalar: strings verbatim, numbers
 * and bools as JSON writes them. */
static void scalar_text(struct strbuf *sb, const json_t *v)
{
	char num[40];
	switch (json_typeof(v)) {
	case JSON_STRING:
		strbuf_add(sb, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		strbuf_addf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		format_real(json_real_value(v), num, sizeof(num));
		strbuf_addstr(sb, num);
		break;
	case JSON_TRUE:
		strbuf_addstr(sb, "true");
		break;
	case JSON_FALSE:
		strbuf_addstr(sb, "false");
		break;
	default:
		strbuf_addstr(sb, "null");
		break;
	}
}

char *spec_scalar_str(const json_t *v)
{
	struct strbuf sb = STRBUF_INIT;
	scalar_text(&sb, v);
	return strbuf_detach(&sb, NULL);
}

/* check_placeholders: the first placeholder in argv naming a key absent from
 * params, as an error about path. */
static int check_placeholders(char *const *argv, const json_t *params, const char *path,
	struct errbuf *eb)
{
	for (size_t i = 0; argv && argv[i]; i++) {
		const char *p = argv[i], *key;
		size_t keylen;
		while ((p = next_placeholder(p, &key, &keylen))) {
			char *k = xstrndup(key, keylen);
			bool found = json_object_get(params, k) != NULL;
			free(k);
			if (!found)
				return spec_bad(eb, path, "\"%.*s\" names a parameter that is not in params",
					(int)(keylen + 9), p);
			p = key + keylen + 1;
		}
	}
	return 0;
}

char **spec_expand_argv(char *const *argv, const json_t *params, struct errbuf *eb)
{
	size_t n = argv_len(argv);
	char **out = xcalloc(n + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		struct strbuf sb = STRBUF_INIT;
		const char *p = argv[i];
		while (*p) {
			const char *key;
			size_t keylen;
			if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
				strbuf_addch(&sb, p[0]);
				p += 2;
				continue;
			}
			if (p[0] == '{' && next_placeholder(p, &key, &keylen) == p) {
				char *k = xstrndup(key, keylen);
				const json_t *v = json_object_get(params, k);
				free(k);
				if (!v) {
					spec_bad(eb, "command", "\"%.*s\" names a parameter that is not in params",
						(int)(keylen + 9), p);
					strbuf_release(&sb);
					argv_free(out);
					return NULL;
				}
				scalar_text(&sb, v);
				p = key + keylen + 1;
				continue;
			}
			strbuf_addch(&sb, *p++);
		}
		out[i] = strbuf_detach(&sb, NULL);
	}
	return out;
}

void argv_free(char **argv)
{
	if (!argv)
		return;
	for (size_t i = 0; argv[i]; i++)
		free(argv[i]);
	free(argv);
}

size_t argv_len(char *const *argv)
{
	size_t n = 0;
	while (argv && argv[n])
		n++;
	return n;
}

/* ------------------------------------------------------------------------ */
/* Validation. */

static int get_argv(const json_t *v, const char *path, char ***out, struct errbuf *eb)
{
	size_t n = json_array_size(v);
	char **argv;
	if (!json_is_array(v) || !n) {
		if (v && !json_is_array(v))
			return spec_bad_got(eb, path, "a non-empty array of strings", v);
		return spec_bad(eb, path, "expected a non-empty array of strings");
	}
	if (n > SPEC_MAX_ARGS)
		return spec_bad(eb, path, "%zu arguments, more than %d", n, SPEC_MAX_ARGS);
	for (size_t i = 0; i < n; i++) {
		const json_t *a = json_array_get(v, i);
		char ipath[256];
		int ret;
		snprintf(ipath, sizeof(ipath), "%s[%zu]", path, i);
		if (!json_is_string(a))
			return spec_bad_got(eb, ipath, "a string", a);
		if ((ret = spec_check_string(a, ipath, eb)) < 0)
			return ret;
		if (i == 0 && !json_string_length(a))
			return spec_bad(eb, ipath, "expected a program to run, got \"\"");
	}
	argv = xcalloc(n + 1, sizeof(*argv));
	for (size_t i = 0; i < n; i++)
		argv[i] = xstrdup(json_string_value(json_array_get(v, i)));
	*out = argv;
	return 0;
}

/* The frameworks with a launcher (src/launch/launch.h checks their roles;
 * horovod is the mpi launcher: horovodrun is mpirun underneath; jupyter a
 * notebook server behind the master's proxy). */
static const char *const frameworks[] = {
	"command", "pytorch", "tensorflow", "mxnet", "mpi", "horovod", "jax", "caffe", "jupyter",
};

static void supported_frameworks(char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(frameworks); i++) {
		len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
			frameworks[i]);
		if (len >= size)
			break;
	}
}

static int get_framework(const json_t *v, char **out, struct errbuf *eb)
{
	char supported[128];
	const char *s;
	supported_frameworks(supported, sizeof(supported));
	if (!v) {
		*out = xstrdup("command");
		return 0;
	}
	if (!json_is_string(v))
		return spec_bad_got(eb, "framework", "a framework name such as command", v);
	s = json_string_value(v);
	for (size_t i = 0; i < ARRAY_SIZE(frameworks); i++) {
		if (strcmp(s, frameworks[i]))
			continue;
		*out = xstrdup(s);
		return 0;
	}
	return spec_bad(eb, "framework", "unknown framework '%.64s' (supported: %s)", s, supported);
}

static int get_params(const json_t *v, json_t **out, struct errbuf *eb)
{
	const char *key;
	json_t *val;
	if (!v) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(v))
		return spec_bad_got(eb, "params", "a mapping of parameter names to values", v);
	json_object_foreach((json_t *)v, key, val) {
		char path[256];
		int ret;
		snprintf(path, sizeof(path), "params.%s", key);
		if (!spec_ident_valid(key))
			return spec_bad(eb, path, "expected a parameter name of letters, digits and '_' "
					     "(at most 64, not starting with a digit)");
		if (!json_is_string(val) && !json_is_number(val) && !json_is_boolean(val))
			return spec_bad_got(eb, path, "a string, number or bool", val);
		if (json_is_string(val) && (ret = spec_check_string(val, path, eb)) < 0)
			return ret;
	}
	*out = json_deep_copy(v);
	return 0;
}

int spec_vars_parse(const json_t *v, const char *path, json_t **out, struct errbuf *eb)
{
	const char *key;
	json_t *val;
	json_t *vars;
	if (!v) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(v))
		return spec_bad_got(eb, path, "a mapping of variable names to values", v);
	json_object_foreach((json_t *)v, key, val) {
		char at[256];
		int ret;
		snprintf(at, sizeof(at), "%s.%s", path, key);
		if (!spec_ident_valid(key))
			return spec_bad(eb, at, "expected a variable name of letters, digits and '_' "
					     "(at most 64, not starting with a digit)");
		if (!strncmp(key, "YARD_", 5))
			return spec_bad(eb, at, "names starting with YARD_ are reserved for yard");
		if (!json_is_string(val) && !json_is_number(val) && !json_is_boolean(val))
			return spec_bad_got(eb, at, "a string, number or bool", val);
		if (json_is_string(val) && (ret = spec_check_string(val, at, eb)) < 0)
			return ret;
	}
	vars = json_object();
	json_object_foreach((json_t *)v, key, val) {
		struct strbuf sb = STRBUF_INIT;
		scalar_text(&sb, val);
		json_object_set_new(vars, key, json_stringn(sb.buf, sb.len));
		strbuf_release(&sb);
	}
	*out = vars;
	return 0;
}

static int get_cpus(const json_t *v, const char *path, uint64_t *milli, struct errbuf *eb)
{
	double d;
	if (!json_is_number(v) || (d = json_number_value(v)) <= 0)
		return spec_bad_got(eb, path, "a number > 0", v);
	if (d > SPEC_MAX_CPUS)
		return spec_bad_got(eb, path, "a number <= 1024", v);
	if (json_is_integer(v)) {
		*milli = (uint64_t)json_integer_value(v) * 1000;
		return 0;
	}
	*milli = (uint64_t)(d * 1000 + 0.5);
	if (!*milli)
		return spec_bad_got(eb, path, "a number >= 0.001", v);
	return 0;
}

static int get_memory(const json_t *v, const char *path, uint64_t *bytes, struct errbuf *eb)
{
	uint64_t n;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		n = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v) || parse_size_str(json_string_value(v), &n) < 0)
		return spec_bad_got(eb, path, "a size such as 2GiB", v);
	if (n < SPEC_MIN_MEMORY)
		return spec_bad_got(eb, path, "a size of at least 4MiB", v);
	*bytes = n;
	return 0;
}

const char *const spec_role_fields[] = { "replicas", "gpus", "cpus", "memory", "pids", "command",
	"pool", NULL };

static int get_role(const char *name, const json_t *v, struct spec_role *role, struct errbuf *eb)
{
	char path[256];
	char fpath[300];
	const json_t *f;
	unsigned pids = SPEC_DEFAULT_PIDS;
	int ret;

	snprintf(path, sizeof(path), "tasks.%s", name);
	role->name = xstrdup(name);
	role->replicas = 1;
	role->gpus = 0;
	role->cpus_milli = 1000;
	role->memory = 0;
	role->pids = SPEC_DEFAULT_PIDS;
	role->command = NULL;
	if (!valid_role(name))
		return spec_bad(eb, path, "expected a role name of lowercase letters, digits, '-' and '_' "
				     "(at most 32, starting with a letter)");
	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, path, "a mapping of replicas, gpus, cpus, memory, pids, command and pool",
			v);
	if ((ret = spec_check_known(v, spec_role_fields, path, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.replicas", path);
	if ((f = field(v, "replicas")) &&
		(ret = get_uint(f, fpath, 1, SPEC_MAX_REPLICAS, &role->replicas, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.gpus", path);
	if ((f = field(v, "gpus")) && (ret = get_uint(f, fpath, 0, SPEC_MAX_GPUS, &role->gpus, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.cpus", path);
	if ((f = field(v, "cpus")) && (ret = get_cpus(f, fpath, &role->cpus_milli, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.memory", path);
	if ((f = field(v, "memory")) && (ret = get_memory(f, fpath, &role->memory, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.pids", path);
	if ((f = field(v, "pids")) &&
		(ret = get_uint(f, fpath, SPEC_MIN_PIDS, SPEC_MAX_PIDS, &pids, eb)) < 0)
		return ret;
	role->pids = pids;
	snprintf(fpath, sizeof(fpath), "%s.command", path);
	if ((f = field(v, "command")) && (ret = get_argv(f, fpath, &role->command, eb)) < 0)
		return ret;
	snprintf(fpath, sizeof(fpath), "%s.pool", path);
	if ((f = field(v, "pool")) && !json_is_null(f) && (ret = get_name(f, fpath, &role->pool, eb)) < 0)
		return ret;
	return 0;
}

static int get_tasks(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const char *key;
	json_t *val;
	size_t n;
	uint64_t total = 0;
	int ret;

	if (v && !json_is_object(v))
		return spec_bad_got(eb, "tasks", "a mapping of roles such as {worker: {replicas: 2}}", v);
	n = json_object_size(v);
	if (!n)
		return spec_bad(eb, "tasks", "expected at least one role");
	if (n > SPEC_MAX_ROLES)
		return spec_bad(eb, "tasks", "%zu roles, more than %d", n, SPEC_MAX_ROLES);
	spec->roles = xcalloc(n, sizeof(*spec->roles));
	json_object_foreach((json_t *)v, key, val) {
		struct spec_role *role = &spec->roles[spec->nroles++];
		if ((ret = get_role(key, json_is_null(val) ? NULL : val, role, eb)) < 0)
			return ret;
		total += role->replicas;
	}
	if (total > SPEC_MAX_TASKS)
		return spec_bad(eb, "tasks", "%" PRIu64 " tasks in all, more than %d", total, SPEC_MAX_TASKS);
	return 0;
}

const char *const spec_placement_fields[] = { "gpu_model", "max_nodes", "wait_for_nodes",
	"gpu_memory", "labels", NULL };

static bool label_char(char c, bool first, bool key)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '-' || c == '_' || c == '.' || (key && c == '/'));
}

bool spec_name_valid(const char *s)
{
	return s && valid_name(s);
}

bool spec_label_valid(const char *key, const char *value)
{
	size_t nk = strlen(key), nv = strlen(value);
	if (!nk || nk > 63 || nv > 63)
		return false;
	for (size_t i = 0; i < nk; i++)
		if (!label_char(key[i], i == 0, true))
			return false;
	for (size_t i = 0; i < nv; i++)
		if (!label_char(value[i], false, false))
			return false;
	return true;
}

static int get_labels(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const char *key;
	json_t *val;

	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "placement.labels", "a mapping of label names to values", v);
	if (json_object_size(v) > SPEC_MAX_LABELS)
		return spec_bad(eb, "placement.labels", "%zu labels, more than %d", json_object_size(v),
			   SPEC_MAX_LABELS);
	spec->labels = xcalloc(json_object_size(v) + 1, sizeof(*spec->labels));
	json_object_foreach((json_t *)v, key, val) {
		char path[128];
		char *text = NULL;

		snprintf(path, sizeof(path), "placement.labels.%.60s", key);
		if (!spec_label_valid(key, "")) {
			char kq[SPEC_SHOW_MAX + 8];
			json_t *k = json_string(key);
			spec_show(k, kq, sizeof(kq));
			json_decref(k);
			return spec_bad(eb, "placement.labels",
				   "label name %s: expected letters, digits, '-', '_', '.' and '/' "
				   "(at most 63, starting with a letter or digit)", kq);
		}
		if (json_is_string(val) || json_is_integer(val) || json_is_boolean(val))
			text = spec_scalar_str(val);
		if (!text || !spec_label_valid(key, text)) {
			free(text);
			return spec_bad_got(eb, path,
				       "a value of letters, digits, '-', '_' and '.' (at most 63)", val);
		}
		spec->labels[spec->nlabels].key = xstrdup(key);
		spec->labels[spec->nlabels++].value = text;
	}
	return 0;
}

static int get_placement(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *f;
	int ret;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "placement",
			"a mapping of gpu_model, gpu_memory, labels, max_nodes and wait_for_nodes", v);
	if ((ret = spec_check_known(v, spec_placement_fields, "placement", eb)) < 0)
		return ret;
	if ((f = field(v, "gpu_model"))) {
		if (!json_is_string(f) || !json_string_length(f))
			return spec_bad_got(eb, "placement.gpu_model", "a GPU model name or \"*\"", f);
		if ((ret = spec_check_string(f, "placement.gpu_model", eb)) < 0)
			return ret;
		if (strcmp(json_string_value(f), "*"))
			spec->gpu_model = xstrdup(json_string_value(f));
	}
	if ((f = field(v, "max_nodes")) &&
		(ret = get_uint(f, "placement.max_nodes", 1, SPEC_MAX_NODES, &spec->max_nodes, eb)) < 0)
		return ret;
	if ((f = field(v, "wait_for_nodes"))) {
		if (!json_is_boolean(f))
			return spec_bad_got(eb, "placement.wait_for_nodes", "true or false", f);
		spec->wait_for_nodes = json_is_true(f);
	}
	if ((f = field(v, "gpu_memory"))) {
		uint64_t n;
		if (json_is_integer(f) && json_integer_value(f) >= 0)
			n = (uint64_t)json_integer_value(f);
		else if (!json_is_string(f) || parse_size_str(json_string_value(f), &n) < 0)
			return spec_bad_got(eb, "placement.gpu_memory", "a size such as 40GiB", f);
		if (n < (1u << 20))
			return spec_bad_got(eb, "placement.gpu_memory", "a size of at least 1MiB", f);
		spec->gpu_memory = n;
	}
	if ((ret = get_labels(field(v, "labels"), spec, eb)) < 0)
		return ret;
	return 0;
}

/* A field that is one of a few words: *out gets the index of v among
 * names (untouched when v is absent); anything else is refused, the
 * expected words listed in `expected`. */
static int get_choice(const json_t *v, const char *field, const char *const *names, size_t n,
		      const char *expected, unsigned *out, struct errbuf *eb)
{
	if (!v)
		return 0;
	for (size_t i = 0; json_is_string(v) && i < n; i++) {
		if (!strcmp(json_string_value(v), names[i])) {
			*out = (unsigned)i;
			return 0;
		}
	}
	return spec_bad_got(eb, field, expected, v);
}

static int get_priority(const json_t *v, enum spec_priority *out, struct errbuf *eb)
{
	static const char *const names[] = { "low", "normal", "high" };
	unsigned i = (unsigned)*out;
	int ret = get_choice(v, "priority", names, ARRAY_SIZE(names), "low, normal or high", &i, eb);
	*out = (enum spec_priority)i;
	return ret;
}

/* on_disconnect: what an agent cut off from the master does with the job's
 * tasks once its lease is near its end: stop them (the master will start
 * the job elsewhere; it never runs twice) or keep them (the master waits
 * for the node instead). */
static int get_on_disconnect(const json_t *v, bool *keep, struct errbuf *eb)
{
	static const char *const names[] = { "stop", "keep" };
	unsigned i = *keep;
	int ret = get_choice(v, "on_disconnect", names, ARRAY_SIZE(names), "stop or keep", &i, eb);
	*keep = i == 1;
	return ret;
}

const char *const spec_restart_fields[] = { "max", NULL };

static int get_restart(const json_t *v, unsigned *max, struct errbuf *eb)
{
	const json_t *f;
	int ret;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "restart", "a mapping such as {max: 2}", v);
	if ((ret = spec_check_known(v, spec_restart_fields, "restart", eb)) < 0)
		return ret;
	if ((f = field(v, "max")))
		return get_uint(f, "restart.max", 0, SPEC_MAX_RESTARTS, max, eb);
	return 0;
}

/* A duration (integer seconds or "90s", "2h", ...) into *ms, at least min_ms. */
static int get_duration(const json_t *v, const char *path, uint64_t min_ms, uint64_t *ms,
			struct errbuf *eb)
{
	uint64_t n;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		if ((uint64_t)json_integer_value(v) > UINT64_MAX / 1000)
			return spec_bad_got(eb, path, "a duration such as 2h, 90m or 3600s", v);
		n = (uint64_t)json_integer_value(v) * 1000;
	} else if (!json_is_string(v) || parse_duration_str(json_string_value(v), &n) < 0) {
		return spec_bad_got(eb, path, "a duration such as 2h, 90m or 3600s", v);
	}
	if (n < min_ms)
		return spec_bad_got(eb, path, min_ms ? "a duration > 0" : "a duration >= 0", v);
	*ms = n;
	return 0;
}

const char *const spec_preemption_fields[] = { "grace", "preemptible", NULL };

#define SPEC_DEFAULT_GRACE_MS 30000
#define SPEC_MAX_GRACE_MS (3600 * 1000)

static int get_preemption(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *f;
	int ret;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "preemption", "a mapping such as {grace: 30s, preemptible: true}", v);
	if ((ret = spec_check_known(v, spec_preemption_fields, "preemption", eb)) < 0)
		return ret;
	if ((f = field(v, "grace"))) {
		if ((ret = get_duration(f, "preemption.grace", 0, &spec->preempt_grace_ms, eb)) < 0)
			return ret;
		if (spec->preempt_grace_ms > SPEC_MAX_GRACE_MS)
			return spec_bad_got(eb, "preemption.grace", "a duration of at most 1h", f);
	}
	if ((f = field(v, "preemptible"))) {
		if (!json_is_boolean(f))
			return spec_bad_got(eb, "preemption.preemptible", "true or false", f);
		spec->preemptible = json_is_true(f);
	}
	return 0;
}

static int get_timeout(const json_t *v, uint64_t *ms, struct errbuf *eb)
{
	if (!v)
		return 0;
	return get_duration(v, "timeout", 1, ms, eb);
}

const char *const spec_interactive_fields[] = { "idle_timeout", NULL };

/* interactive: the job is one task on a terminal that users attach to
 * (yard shell, yard attach; docs/architecture.md "Interactive jobs"). Its
 * command may be left out: the login shell of the task's user. */
static int get_interactive(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *f;
	unsigned total = spec_total_tasks(spec);
	int ret;

	if (!v)
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "interactive", "a mapping such as {idle_timeout: 1h} ({} for the "
				    "master's default)", v);
	if ((ret = spec_check_known(v, spec_interactive_fields, "interactive", eb)) < 0)
		return ret;
	if ((f = field(v, "idle_timeout")) &&
	    (ret = get_duration(f, "interactive.idle_timeout", 1, &spec->idle_timeout_ms, eb)) < 0)
		return ret;
	if (total != 1)
		return spec_bad(eb, "tasks", "an interactive job has one task (one role, replicas 1), "
				"got %u", total);
	/* a terminal (command) or a notebook server (jupyter): nothing that
	 * rendezvouses with peers */
	if (strcmp(spec->framework, "command") && strcmp(spec->framework, "jupyter"))
		return spec_bad(eb, "framework", "an interactive job is a terminal (framework command) "
				"or a notebook (framework jupyter), got \"%s\"", spec->framework);
	if (!spec->command && strcmp(spec->framework, "command"))
		return spec_bad(eb, "command", "an interactive %s job names its server's command (only "
				"a terminal's may be left out: the login shell)", spec->framework);
	if (spec->sweep)
		return spec_bad(eb, "sweep", "an interactive job cannot be a sweep's trial");
	spec->interactive = true;
	return 0;
}

const char *const spec_top_fields[] = { "name", "framework", "command", "image", "params", "env",
	"tasks", "data", "placement", "pool", "priority", "team", "restart", "timeout", "preemption",
	"on_disconnect", "after", "sweep", "interactive", "code", NULL };

static void spec_init(struct job_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->priority = PRIO_NORMAL;
	spec->preempt_grace_ms = SPEC_DEFAULT_GRACE_MS;
	spec->preemptible = true;
}

int spec_from_json(const json_t *doc, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *v;
	int ret;

	spec_init(spec);
	if (!json_is_object(doc)) {
		char got[SPEC_SHOW_MAX + 8];
		spec_show(doc, got, sizeof(got));
		return error(eb, YERR(INVALID_SPEC), "spec: expected a mapping of fields, got %s",
			got);
	}
	if ((ret = spec_check_known(doc, spec_top_fields, "", eb)) < 0)
		goto out;

	if ((v = field(doc, "name")))
		ret = get_name(v, "name", &spec->name, eb);
	else
		spec->name = xstrdup("job");
	if (ret < 0)
		goto out;
	if ((ret = get_framework(field(doc, "framework"), &spec->framework, eb)) < 0)
		goto out;
	/* an interactive job may leave its command out: the login shell */
	if ((field(doc, "command") || !field(doc, "interactive")) &&
	    (ret = get_argv(field(doc, "command"), "command", &spec->command, eb)) < 0)
		goto out;
	if ((ret = spec_image_parse(field(doc, "image"), spec, eb)) < 0)
		goto out;
	if ((ret = get_params(field(doc, "params"), &spec->params, eb)) < 0 ||
	    (ret = spec_sweep_parse(field(doc, "sweep"), spec->params, &spec->sweep, eb)) < 0)
		goto out;
	if ((ret = check_placeholders(spec->command, spec->params, "command", eb)) < 0)
		goto out;
	if ((ret = spec_vars_parse(field(doc, "env"), "env", &spec->env, eb)) < 0)
		goto out;
	if ((ret = get_tasks(field(doc, "tasks"), spec, eb)) < 0)
		goto out;
	for (size_t i = 0; i < spec->nroles; i++) {
		char path[256];
		snprintf(path, sizeof(path), "tasks.%s.command", spec->roles[i].name);
		if ((ret = check_placeholders(spec->roles[i].command, spec->params, path, eb)) < 0)
			goto out;
	}
	if ((ret = spec_get_data(field(doc, "data"), spec, eb)) < 0)
		goto out;
	if ((ret = get_placement(field(doc, "placement"), spec, eb)) < 0)
		goto out;
	if ((v = field(doc, "pool")) && (ret = get_name(v, "pool", &spec->pool, eb)) < 0)
		goto out;
	if (spec->pool && !strcmp(spec->pool, "default"))
		free(spec->pool), spec->pool = NULL;
	/* a role in the job's own pool is in no pool of its own */
	for (size_t i = 0; i < spec->nroles; i++)
		if (spec->roles[i].pool && !strcmp(spec->roles[i].pool, spec->pool ? spec->pool : "default"))
			free(spec->roles[i].pool), spec->roles[i].pool = NULL;
	if ((ret = get_priority(field(doc, "priority"), &spec->priority, eb)) < 0)
		goto out;
	if ((ret = get_on_disconnect(field(doc, "on_disconnect"), &spec->keep_on_disconnect, eb)) < 0)
		goto out;
	if ((v = field(doc, "team")) && (ret = get_name(v, "team", &spec->team, eb)) < 0)
		goto out;
	if ((ret = get_restart(field(doc, "restart"), &spec->restart_max, eb)) < 0)
		goto out;
	if ((ret = get_timeout(field(doc, "timeout"), &spec->timeout_ms, eb)) < 0)
		goto out;
	if ((ret = get_preemption(field(doc, "preemption"), spec, eb)) < 0 ||
	    (ret = spec_after_parse(field(doc, "after"), spec, eb)) < 0)
		goto out;
	if ((ret = get_interactive(field(doc, "interactive"), spec, eb)) < 0)
		goto out;
	ret = spec_code_parse(field(doc, "code"), spec, eb);
out:
	return ret;
}

/* ------------------------------------------------------------------------ */
/* The canonical form. */

static json_t *argv_to_json(char *const *argv)
{
	json_t *a;
	if (!argv)
		return json_null();
	a = json_array();
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

static json_t *cpus_to_json(uint64_t milli)
{
	if (milli % 1000 == 0)
		return json_integer((json_int_t)(milli / 1000));
	return json_real((double)milli / 1000.0);
}

/* A duration as the canonical form has it: integer seconds, "1500ms" when
 * not whole seconds, null for 0 (none). */
static json_t *duration_to_json(uint64_t ms)
{
	if (!ms)
		return json_null();
	if (ms % 1000 == 0)
		return json_integer((json_int_t)(ms / 1000));
	return json_sprintf("%" PRIu64 "ms", ms);
}

json_t *spec_to_json(const struct job_spec *spec)
{
	static const char *const prio[] = { "low", "normal", "high" };
	json_t *doc = json_object();
	json_t *tasks = json_object();
	json_t *timeout;

	for (size_t i = 0; i < spec->nroles; i++) {
		const struct spec_role *r = &spec->roles[i];
		json_object_set_new(tasks, r->name,
			json_pack("{s:I, s:I, s:o, s:o, s:I, s:o}",
				"replicas", (json_int_t)r->replicas,
				"gpus", (json_int_t)r->gpus,
				"cpus", cpus_to_json(r->cpus_milli),
				"memory", r->memory ? json_integer((json_int_t)r->memory) : json_null(),
				"pids", (json_int_t)r->pids,
				"command", argv_to_json(r->command)));
		if (r->pool) /* (absent otherwise: the canonical form of every other spec is as it was) */
			json_object_set_new(json_object_get(tasks, r->name), "pool", json_string(r->pool));
	}
	timeout = duration_to_json(spec->timeout_ms);

	json_object_set_new(doc, "name", json_string(spec->name ? spec->name : "job"));
	json_object_set_new(doc, "framework",
		json_string(spec->framework ? spec->framework : "command"));
	json_object_set_new(doc, "command", argv_to_json(spec->command));
	spec_image_to_json(spec, doc);
	json_object_set_new(doc, "params", spec->params ? json_deep_copy(spec->params) : json_object());
	json_object_set_new(doc, "env", spec->env ? json_deep_copy(spec->env) : json_object());
	json_object_set_new(doc, "tasks", tasks);
	json_object_set_new(doc, "data", spec_data_to_json(spec));
	json_t *labels = json_object();
	for (size_t i = 0; i < spec->nlabels; i++)
		json_object_set_new(labels, spec->labels[i].key, json_string(spec->labels[i].value));
	json_object_set_new(doc, "placement",
		json_pack("{s:s, s:o, s:b, s:o, s:o}",
			"gpu_model", spec->gpu_model ? spec->gpu_model : "*",
			"max_nodes", spec->max_nodes ? json_integer(spec->max_nodes) : json_null(),
			"wait_for_nodes", (int)spec->wait_for_nodes,
			"gpu_memory", spec->gpu_memory ? json_integer((json_int_t)spec->gpu_memory)
						       : json_null(),
			"labels", labels));
	json_object_set_new(doc, "pool", json_string(spec->pool ? spec->pool : "default"));
	json_object_set_new(doc, "priority",
		json_string((unsigned)spec->priority < ARRAY_SIZE(prio) ? prio[spec->priority] : "normal"));
	json_object_set_new(doc, "team", spec->team ? json_string(spec->team) : json_null());
	json_object_set_new(doc, "restart", json_pack("{s:I}", "max", (json_int_t)spec->restart_max));
	json_object_set_new(doc, "timeout", timeout);
	json_object_set_new(doc, "preemption",
		json_pack("{s:o, s:b}", "grace",
			spec->preempt_grace_ms % 1000
				? json_sprintf("%" PRIu64 "ms", spec->preempt_grace_ms)
				: json_integer((json_int_t)(spec->preempt_grace_ms / 1000)),
			"preemptible", (int)spec->preemptible));
	json_object_set_new(doc, "on_disconnect", json_string(spec->keep_on_disconnect ? "keep" : "stop"));
	spec_after_to_json(spec, doc);
	if (spec->sweep)
		json_object_set_new(doc, "sweep", spec_sweep_to_json(spec->sweep));
	if (spec->interactive)
		json_object_set_new(doc, "interactive",
			json_pack("{s:o}", "idle_timeout", duration_to_json(spec->idle_timeout_ms)));
	spec_code_to_json(spec, doc);
	return doc;
}

void spec_release(struct job_spec *spec)
{
	free(spec->name);
	free(spec->framework);
	argv_free(spec->command);
	free(spec->image);
	spec_image_build_free(spec->image_build);
	json_decref(spec->params);
	json_decref(spec->env);
	for (size_t i = 0; i < spec->nroles; i++) {
		free(spec->roles[i].name);
		free(spec->roles[i].pool);
		argv_free(spec->roles[i].command);
	}
	free(spec->roles);
	free(spec->gpu_model);
	for (size_t i = 0; i < spec->nlabels; i++) {
		free(spec->labels[i].key);
		free(spec->labels[i].value);
	}
	free(spec->labels);
	free(spec->pool);
	free(spec->team);
	spec_data_release(spec);
	free(spec->after);
	spec_sweep_free(spec->sweep);
	spec_code_free(spec->code);
	spec_init(spec);
}

unsigned spec_total_tasks(const struct job_spec *spec)
{
	unsigned total = 0;
	for (size_t i = 0; i < spec->nroles; i++)
		total += spec->roles[i].replicas;
	return total;
}
