#include "base/compat.h"
#include "cli/options.h"

#include "base/error.h"
#include "base/xalloc.h"

void cli_list_release(struct cli_list *l)
{
	free(l->items);
	l->items = NULL;
	l->nr = l->alloc = 0;
}

static const struct cli_option *find_long(const struct cli_option *t, size_t n, const char *name,
					  size_t len)
{
	for (size_t i = 0; t && i < n; i++)
		if (strlen(t[i].name) == len && !strncmp(t[i].name, name, len))
			return &t[i];
	return NULL;
}

static const struct cli_option *find_short(const struct cli_option *t, size_t n, char c)
{
	for (size_t i = 0; t && i < n; i++)
		if (t[i].short_name && t[i].short_name == c)
			return &t[i];
	return NULL;
}

static void store(const struct cli_option *o, const char *arg)
{
	struct cli_list *l;

	switch (o->kind) {
	case CLI_OPT_FLAG:
		*(int *)o->value = 1;
		break;
	case CLI_OPT_STRING:
		*(const char **)o->value = arg;
		break;
	case CLI_OPT_LIST:
		l = o->value;
		ALLOC_GROW(l->items, l->nr + 1, l->alloc);
		l->items[l->nr++] = arg;
		break;
	}
}

int cli_options_parse(const struct cli_option *opts, size_t nopts,
		      const struct cli_option *common, size_t ncommon,
		      int argc, char **argv, int *npos, struct errbuf *eb)
{
	int pos = 1;
	bool only_args = false, failed = false;

	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		const struct cli_option *o = NULL;
		const char *inline_arg = NULL;

		if (only_args || a[0] != '-' || a[1] == '\0') {
			argv[pos++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			only_args = true;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return CLI_PARSE_HELP;
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			o = find_long(opts, nopts, name, len);
			if (!o)
				o = find_long(common, ncommon, name, len);
			if (eq)
				inline_arg = eq + 1;
		} else if (a[2] == '\0') {
			o = find_short(opts, nopts, a[1]);
			if (!o)
				o = find_short(common, ncommon, a[1]);
		}
		/* after an error, the rest is still parsed: --output json
		 * is then known when the error is reported */
		if (!o) {
			if (!failed)
				error(eb, YERR(BAD_REQUEST), "unknown option '%s'", a);
			failed = true;
			continue;
		}
		if (o->kind == CLI_OPT_FLAG) {
			if (inline_arg) {
				if (!failed)
					error(eb, YERR(BAD_REQUEST), "option '--%s' takes no value",
					      o->name);
				failed = true;
				continue;
			}
			store(o, NULL);
			continue;
		}
		if (!inline_arg) {
			if (i + 1 >= argc) {
				if (!failed)
					error(eb, YERR(BAD_REQUEST), "option '%s' needs a value", a);
				failed = true;
				break;
			}
			inline_arg = argv[++i];
		}
		store(o, inline_arg);
	}
	*npos = pos - 1;
	return failed ? CLI_PARSE_USAGE : 0;
}

static void print_table(FILE *out, const struct cli_option *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		char left[96];
		char shrt[8] = "    ";
		if (t[i].short_name)
			snprintf(shrt, sizeof(shrt), "-%c, ", t[i].short_name);
		snprintf(left, sizeof(left), "%s--%s%s%s", shrt, t[i].name,
			 t[i].argname ? " " : "", t[i].argname ? t[i].argname : "");
		fprintf(out, "  %-28s ", left);
		/* a help of several lines: each one under the first */
		for (const char *h = t[i].help; *h; h++) {
			if (*h == '\n')
				fprintf(out, "\n%31s", "");
			else
				fputc(*h, out);
		}
		fputc('\n', out);
	}
}

void cli_options_usage(FILE *out, const char *synopsis, const struct cli_option *opts,
		       size_t nopts, const struct cli_option *common, size_t ncommon)
{
	fprintf(out, "usage: yard %s\n\n", synopsis);
	print_table(out, opts, nopts);
	if (common && ncommon) {
		fprintf(out, "\ncommon options:\n");
		print_table(out, common, ncommon);
	}
}
