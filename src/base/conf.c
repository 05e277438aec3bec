#include "base/compat.h"
#include "base/conf.h"

#include <ctype.h>

#include "base/error.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/xalloc.h"

/* A config file bigger than this is refused: it is not one. */
#define CONF_FILE_MAX (1u << 20)

static void values_release(struct conf_values *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->items[i]);
	free(v->items);
	memset(v, 0, sizeof(*v));
}

static void values_add(struct conf_values *v, const char *s, size_t len, unsigned line)
{
	ALLOC_GROW(v->items, v->n + 1, v->alloc);
	v->items[v->n++] = xstrndup(s, len);
	v->line = line;
}

static void all_release(struct conf_values *vals, size_t n)
{
	for (size_t i = 0; vals && i < n; i++)
		values_release(&vals[i]);
	free(vals);
}

void conf_init(struct conf *c, const char *role, const struct conf_option *opts, size_t nopts)
{
	memset(c, 0, sizeof(*c));
	c->role = role;
	c->opts = opts;
	c->nopts = nopts;
	c->args = xcalloc(nopts ? nopts : 1, sizeof(*c->args));
	c->keys = xcalloc(nopts ? nopts : 1, sizeof(*c->keys));
}

void conf_release(struct conf *c)
{
	all_release(c->args, c->nopts);
	all_release(c->keys, c->nopts);
	free(c->file);
	memset(c, 0, sizeof(*c));
}

static const struct conf_option *find(const struct conf *c, const char *name, size_t len)
{
	for (size_t i = 0; i < c->nopts; i++)
		if (strlen(c->opts[i].name) == len && !strncmp(c->opts[i].name, name, len))
			return &c->opts[i];
	return NULL;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" }, *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (!strcmp(s, yes[i]))
			return *out = true, 0;
		if (!strcmp(s, no[i]))
			return *out = false, 0;
	}
	return -1;
}

/* Checks one value of o: its kind's syntax, then the option's own check. */
static int check_value(const struct conf_option *o, const char *what, const char *value,
		       struct errbuf *eb)
{
	uint64_t ms;
	bool b;

	if (o->kind == CONF_BOOL && parse_bool(value, &b))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected true or false", what, value);
	if (o->kind == CONF_DURATION && parse_duration_str(value, &ms))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration such as 500ms, 30s, 5m or 2h",
			     what, value);
	if (o->kind != CONF_BOOL && !*value)
		return error(eb, YERR(BAD_REQUEST), "%s: expected a value", what);
	return o->check ? o->check(what, value, eb) : 0;
}

int conf_parse_args(struct conf *c, int argc, char **argv, struct errbuf *eb)
{
	const char *file = NULL;
	int ret;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *value = NULL;
		const struct conf_option *o;
		char what[96];
		size_t len;

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return CONF_HELP;
		if (strncmp(a, "--", 2) || !a[2])
			return error(eb, YERR(BAD_REQUEST), "unexpected argument '%s'", a);
		name = a + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		if (eq)
			value = eq + 1;
		if (len == 6 && !strncmp(name, "config", 6)) {
			if (!value && i + 1 >= argc)
				return error(eb, YERR(BAD_REQUEST), "option '--config' needs a file");
			file = value ? value : argv[++i];
			continue;
		}
		o = find(c, name, len);
		if (!o)
			return error(eb, YERR(BAD_REQUEST), "unknown option '%.*s'", (int)len + 2, a);
		snprintf(what, sizeof(what), "--%s", o->name);
		if (o->kind == CONF_BOOL && !value) {
			value = "true";
		} else if (!value) {
			if (i + 1 >= argc)
				return error(eb, YERR(BAD_REQUEST), "option '%s' needs a value", what);
			value = argv[++i];
		}
		if ((ret = check_value(o, what, value, eb)))
			return ret;
		values_add(&c->args[o - c->opts], value, strlen(value), 0);
	}
	if (!file)
		return 0;
	free(c->file);
	/* a reload reads the same file, wherever the daemon's cwd is then */
	c->file = realpath(file, NULL);
	if (!c->file)
		c->file = xstrdup(file);
	return conf_reload(c, eb);
}

int conf_load(struct conf *c, int argc, char **argv, void *target, struct errbuf *eb)
{
	int ret = conf_parse_args(c, argc, argv, eb);

	if (ret == CONF_HELP)
		conf_usage(c, stdout);
	return ret ? ret : conf_apply(c, target, eb);
}

int conf_next_line(const char *text, size_t len, size_t *pos, unsigned *lineno,
		   const char *origin, struct conf_line *out, struct errbuf *eb)
{
	const char *end = text + len;

	while (text + *pos < end) {
		const char *p = text + *pos, *eol = memchr(p, '\n', (size_t)(end - p));
		const char *s = p, *e = eol ? eol : end, *eq, *ke, *v;

		*pos = (size_t)((eol ? eol + 1 : end) - text);
		++*lineno;
		while (s < e && isspace((unsigned char)*s))
			s++;
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		if (s == e || *s == '#')
			continue;
		eq = memchr(s, '=', (size_t)(e - s));
		if (!eq)
			return error(eb, YERR(BAD_REQUEST), "'%s' line %u: expected 'key = value'", origin,
				     *lineno);
		ke = eq;
		while (ke > s && isspace((unsigned char)ke[-1]))
			ke--;
		if (ke == s)
			return error(eb, YERR(BAD_REQUEST), "'%s' line %u: expected a key before '='", origin,
				     *lineno);
		v = eq + 1;
		while (v < e && isspace((unsigned char)*v))
			v++;
		*out = (struct conf_line){ s, v, (size_t)(ke - s), (size_t)(e - v), *lineno };
		return 1;
	}
	return 0;
}

/* A value of a file is text: valid UTF-8 without control characters. */
static bool text_ok(const char *s, size_t len)
{
	if (!utf8_valid(s, len))
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

int conf_parse_file(struct conf *c, const char *text, size_t len, const char *origin,
		    struct errbuf *eb)
{
	struct conf_values *keys = xcalloc(c->nopts ? c->nopts : 1, sizeof(*keys));
	struct conf_line l;
	size_t pos = 0;
	unsigned lineno = 0;
	int ret;

	while ((ret = conf_next_line(text, len, &pos, &lineno, origin, &l, eb)) == 1) {
		const struct conf_option *o;
		struct conf_values *v;
		char what[512], *value;

		if (!text_ok(l.key, l.keylen) || !text_ok(l.value, l.valuelen)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s' line %u: expected text (UTF-8 without control "
				    "characters)", origin, l.lineno);
			break;
		}
		o = find(c, l.key, l.keylen);
		if (!o) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s' line %u: unknown key '%.*s'%s", origin, l.lineno,
				    (int)l.keylen, l.key,
				    l.keylen == 6 && !strncmp(l.key, "config", 6)
					    ? " (a config file cannot name another)" : "");
			break;
		}
		v = &keys[o - c->opts];
		if (v->n && o->kind != CONF_LIST) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s' line %u: key '%s' is set on line %u already",
				    origin, l.lineno, o->name, v->line);
			break;
		}
		snprintf(what, sizeof(what), "'%s' line %u: %s", origin, l.lineno, o->name);
		value = xstrndup(l.value, l.valuelen);
		ret = check_value(o, what, value, eb);
		free(value);
		if (ret)
			break;
		values_add(v, l.value, l.valuelen, l.lineno);
	}
	if (ret) {
		all_release(keys, c->nopts);
		return ret;
	}
	all_release(c->keys, c->nopts);
	c->keys = keys;
	return 0;
}

int conf_reload(struct conf *c, struct errbuf *eb)
{
	struct strbuf text = STRBUF_INIT;
	int ret;

	if (!c->file)
		return error(eb, YERR(CONFLICT), "the %s was started without --config: there is no file to read",
			     c->role);
	if (strbuf_read_file(&text, c->file, CONF_FILE_MAX) < 0) {
		ret = error(eb, errno == EFBIG ? YERR(BAD_REQUEST) : yerr_of_errno(errno),
			    "cannot read config file '%s': %s", c->file,
			    errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
		goto out;
	}
	ret = conf_parse_file(c, text.buf, text.len, c->file, eb);
out:
	strbuf_release(&text);
	return ret;
}

void conf_clone(struct conf *dst, const struct conf *src)
{
	conf_init(dst, src->role, src->opts, src->nopts);
	dst->file = src->file ? xstrdup(src->file) : NULL;
	for (size_t i = 0; i < src->nopts; i++)
		for (size_t k = 0; k < src->args[i].n; k++)
			values_add(&dst->args[i], src->args[i].items[k], strlen(src->args[i].items[k]), 0);
}

void conf_take_keys(struct conf *c, struct conf *src, size_t opt)
{
	values_release(&c->keys[opt]);
	c->keys[opt] = src->keys[opt];
	memset(&src->keys[opt], 0, sizeof(src->keys[opt]));
}

/* The values in force for option i: the command line's, else the file's. */
static const struct conf_values *in_force(const struct conf *c, size_t i)
{
	return c->args[i].n ? &c->args[i] : &c->keys[i];
}

int conf_apply(const struct conf *c, void *target, struct errbuf *eb)
{
	for (size_t i = 0; i < c->nopts; i++) {
		const struct conf_option *o = &c->opts[i];
		const struct conf_values *v = in_force(c, i);
		char *slot = (char *)target + o->offset;
		const char *last;

		if (!v->n) {
			if (o->flags & CONF_REQUIRED)
				return error(eb, YERR(BAD_REQUEST), "--%s is needed (or '%s = ...' in the config file)",
					     o->name, o->name);
			continue;
		}
		last = v->items[v->n - 1];
		switch (o->kind) {
		case CONF_STRING:
			*(const char **)(void *)slot = last;
			break;
		case CONF_LIST:
			*(struct conf_list *)(void *)slot = (struct conf_list){ (const char *const *)v->items, v->n };
			break;
		case CONF_BOOL:
			parse_bool(last, (bool *)(void *)slot);
			break;
		case CONF_DURATION:
			parse_duration_str(last, (uint64_t *)(void *)slot);
			break;
		}
	}
	return 0;
}

static char *values_text(const struct conf_values *v)
{
	struct strbuf sb = STRBUF_INIT;

	for (size_t i = 0; i < v->n; i++) {
		if (i)
			strbuf_addstr(&sb, ", ");
		strbuf_addstr(&sb, v->items[i]);
	}
	return strbuf_detach(&sb, NULL);
}

char *conf_value_text(const struct conf *c, size_t opt)
{
	return values_text(in_force(c, opt));
}

char *conf_key_text(const struct conf *c, size_t opt)
{
	return values_text(&c->keys[opt]);
}

void conf_usage(const struct conf *c, FILE *out)
{
	bool reload = false;

	for (size_t i = 0; i < c->nopts; i++)
		reload |= (c->opts[i].flags & CONF_RELOAD) != 0;
	fprintf(out, "usage: yard %s [--config FILE] [options]\n\n"
		     "Every option is also a key of the config file: the line 'KEY = VALUE' is\n"
		     "--KEY VALUE. An option on the command line wins over its key.%s\n\n",
		c->role, reload ? " A reload\n(SIGHUP) reads the file again and applies the keys marked reloadable."
				: "\nChanges to the file take effect when it starts again.");
	fprintf(out, "  %-26s %s\n", "--config FILE", "read settings from FILE");
	for (size_t i = 0; i < c->nopts; i++) {
		const struct conf_option *o = &c->opts[i];
		char left[96];
		const char *marks[3];
		size_t nmarks = 0;

		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->argname ? " " : "",
			 o->argname ? o->argname : "");
		if (strlen(left) > 26)
			fprintf(out, "  %s\n%29s", left, "");
		else
			fprintf(out, "  %-26s ", left);
		for (const char *h = o->help; *h; h++) {
			if (*h == '\n')
				fprintf(out, "\n%29s", "");
			else
				fputc(*h, out);
		}
		if (o->kind == CONF_LIST)
			marks[nmarks++] = "repeatable";
		if (o->flags & CONF_REQUIRED)
			marks[nmarks++] = "required";
		if (o->flags & CONF_RELOAD)
			marks[nmarks++] = "reloadable";
		for (size_t k = 0; k < nmarks; k++)
			fprintf(out, "%s%s", k ? ", " : "\n                             [", marks[k]);
		fputs(nmarks ? "]\n" : "\n", out);
	}
}
