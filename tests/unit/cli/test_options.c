#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "cli/options.h"

struct vals {
	int follow;
	const char *name;
	const char *master;
	struct cli_list sets;
};

static int run(struct vals *v, int argc, char **argv, int *npos, char *err, size_t errlen)
{
	const struct cli_option opts[] = {
		{ "follow", 'f', CLI_OPT_FLAG, &v->follow, NULL, "follow" },
		{ "name", 0, CLI_OPT_STRING, &v->name, "N", "name" },
		{ "set", 0, CLI_OPT_LIST, &v->sets, "P=V", "set" },
	};
	const struct cli_option common[] = {
		{ "master", 0, CLI_OPT_STRING, &v->master, "URL", "master" },
	};
	struct errbuf eb = ERRBUF_INIT;
	int rc = cli_options_parse(opts, ARRAY_SIZE(opts), common, ARRAY_SIZE(common),
				   argc, argv, npos, &eb);
	if (eb.code) {
		/* the message, cut to the test's buffer (strbuf: no truncation warning) */
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "yard submit: %s\n", eb.msg);
		snprintf(err, errlen, "%.*s", (int)(errlen - 1), sb.buf);
		strbuf_release(&sb);
	}
	return rc;
}

static void test_forms(void **state)
{
	char *argv[] = { "submit", "job.yaml", "-f", "--name", "n1", "--set=params.a=1",
			 "--set", "params.b=2", "--master=http://m:1", "--", "--literal", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos = -1;

	assert_int_equal(run(&v, 11, argv, &npos, err, sizeof(err)), 0);
	assert_int_equal(npos, 2);
	assert_string_equal(argv[1], "job.yaml");
	assert_string_equal(argv[2], "--literal");
	assert_int_equal(v.follow, 1);
	assert_string_equal(v.name, "n1");
	assert_string_equal(v.master, "http://m:1");
	assert_int_equal(v.sets.nr, 2);
	assert_string_equal(v.sets.items[0], "params.a=1");
	assert_string_equal(v.sets.items[1], "params.b=2");
	assert_string_equal(err, "");
	cli_list_release(&v.sets);
}

static void test_unknown_option(void **state)
{
	char *argv[] = { "submit", "job.yaml", "--foo", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 3, argv, &npos, err, sizeof(err)), CLI_PARSE_USAGE);
	assert_non_null(strstr(err, "yard submit: unknown option '--foo'\n"));
}

/* After an error the rest is parsed: the first error is the one reported,
 * and the options after it (--output json of the caller) are still set. */
static void test_parse_goes_on_after_error(void **state)
{
	char *argv[] = { "submit", "--foo", "--bar", "--master", "http://m:1", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 5, argv, &npos, err, sizeof(err)), CLI_PARSE_USAGE);
	assert_string_equal(err, "yard submit: unknown option '--foo'\n");
	assert_non_null(v.master);
	assert_string_equal(v.master, "http://m:1");
	(void)state;
}

static void test_missing_value(void **state)
{
	char *argv[] = { "submit", "--name", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 2, argv, &npos, err, sizeof(err)), CLI_PARSE_USAGE);
	assert_non_null(strstr(err, "yard submit: option '--name' needs a value"));
}

static void test_flag_with_value(void **state)
{
	char *argv[] = { "submit", "--follow=yes", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 2, argv, &npos, err, sizeof(err)), CLI_PARSE_USAGE);
	assert_int_equal(v.follow, 0);
}

static void test_help(void **state)
{
	char *argv[] = { "submit", "x", "--help", NULL };
	char *argv2[] = { "submit", "-h", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 3, argv, &npos, err, sizeof(err)), CLI_PARSE_HELP);
	assert_int_equal(run(&v, 2, argv2, &npos, err, sizeof(err)), CLI_PARSE_HELP);
}

static void test_dash_is_positional(void **state)
{
	char *argv[] = { "submit", "-", NULL };
	struct vals v = { 0, NULL, NULL, { NULL, 0, 0 } };
	char err[256] = "";
	int npos;

	assert_int_equal(run(&v, 2, argv, &npos, err, sizeof(err)), 0);
	assert_int_equal(npos, 1);
	assert_string_equal(argv[1], "-");
}

static void test_usage_lists_options(void **state)
{
	int follow;
	const struct cli_option opts[] = {
		{ "follow", 'f', CLI_OPT_FLAG, &follow, NULL, "keep following" },
	};
	char out[512] = "";
	FILE *f = fmemopen(out, sizeof(out), "w");
	cli_options_usage(f, "logs [-f] ID", opts, 1, NULL, 0);
	fclose(f);
	assert_non_null(strstr(out, "usage: yard logs [-f] ID\n"));
	assert_non_null(strstr(out, "-f, --follow"));
	assert_non_null(strstr(out, "keep following"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_unknown_option),
		cmocka_unit_test(test_parse_goes_on_after_error),
		cmocka_unit_test(test_missing_value),
		cmocka_unit_test(test_flag_with_value),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_dash_is_positional),
		cmocka_unit_test(test_usage_lists_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
