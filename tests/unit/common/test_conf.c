/* base/conf.h: one table of options read from the command line and a
 * config file; the command line wins; every error names where it came from. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/conf.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

struct settings {
	const char *dir, *mode;
	struct conf_list tags;
	bool fast;
	uint64_t wait_ms;
};

static int check_mode(const char *what, const char *v, struct errbuf *eb)
{
	if (strcmp(v, "a") && strcmp(v, "b"))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a or b", what, v);
	return 0;
}

static const struct conf_option opts[] = {
	{ "dir", CONF_STRING, CONF_REQUIRED, offsetof(struct settings, dir), NULL, "DIR", "a dir" },
	{ "mode", CONF_STRING, CONF_RELOAD, offsetof(struct settings, mode), check_mode, "a|b", "a mode" },
	{ "tag", CONF_LIST, CONF_RELOAD, offsetof(struct settings, tags), NULL, "T", "a tag" },
	{ "fast", CONF_BOOL, 0, offsetof(struct settings, fast), NULL, NULL, "go fast" },
	{ "wait", CONF_DURATION, 0, offsetof(struct settings, wait_ms), NULL, "D", "how long" },
};

static void expect_file_error(const char *text, const char *msg)
{
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_file(&c, text, strlen(text), "/etc/t.conf", &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, msg);
	conf_release(&c);
}

static void test_file_every_kind(void **state)
{
	const char *text = "# comment\n"
			   "\n"
			   "  dir =  /var/lib/x  \n"
			   "mode=b\r\n"
			   "tag = one\n"
			   "tag = two=2 # not a comment\n"
			   "fast = yes\n"
			   "wait = 1h30m\n";
	struct settings s = { .mode = "default" };
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_file(&c, text, strlen(text), "t.conf", &eb), 0);
	assert_int_equal(conf_apply(&c, &s, &eb), 0);
	assert_string_equal(s.dir, "/var/lib/x");
	assert_string_equal(s.mode, "b");
	assert_int_equal(s.tags.n, 2);
	assert_string_equal(s.tags.items[0], "one");
	assert_string_equal(s.tags.items[1], "two=2 # not a comment");
	assert_true(s.fast);
	assert_int_equal(s.wait_ms, 5400000);
	conf_release(&c);
}

static void test_file_errors(void **state)
{
	expect_file_error("dir = x\ncolour = blue\n", "'/etc/t.conf' line 2: unknown key 'colour'");
	expect_file_error("dir = x\ndir = y\n", "'/etc/t.conf' line 2: key 'dir' is set on line 1 already");
	expect_file_error("\n\nmode = c\n", "'/etc/t.conf' line 3: mode 'c': expected a or b");
	expect_file_error("wait = soon\n",
			  "'/etc/t.conf' line 1: wait 'soon': expected a duration such as 500ms, 30s, 5m or 2h");
	expect_file_error("fast = maybe\n", "'/etc/t.conf' line 1: fast 'maybe': expected true or false");
	expect_file_error("dir =\n", "'/etc/t.conf' line 1: dir: expected a value");
	expect_file_error("just words\n", "'/etc/t.conf' line 1: expected 'key = value'");
	expect_file_error(" = x\n", "'/etc/t.conf' line 1: expected a key before '='");
	expect_file_error("config = /other\n",
			  "'/etc/t.conf' line 1: unknown key 'config' (a config file cannot name another)");
	expect_file_error("dir = a\tb\n", "'/etc/t.conf' line 1: expected text (UTF-8 without control characters)");
	expect_file_error("dir = \xff\n", "'/etc/t.conf' line 1: expected text (UTF-8 without control characters)");
}

static void test_args(void **state)
{
	char *argv[] = { "test", "--dir", "/d", "--mode=a", "--tag", "x", "--tag", "y", "--fast", "--wait", "2s",
			 NULL };
	struct settings s = { 0 };
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_args(&c, ARRAY_SIZE(argv) - 1, argv, &eb), 0);
	assert_int_equal(conf_apply(&c, &s, &eb), 0);
	assert_string_equal(s.dir, "/d");
	assert_string_equal(s.mode, "a");
	assert_int_equal(s.tags.n, 2);
	assert_true(s.fast);
	assert_int_equal(s.wait_ms, 2000);
	conf_release(&c);
}

static void expect_args_error(int argc, char **argv, const char *msg)
{
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_args(&c, argc, argv, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, msg);
	conf_release(&c);
}

static void test_args_errors(void **state)
{
	char *a1[] = { "test", "--colour", "blue" };
	char *a2[] = { "test", "--dir" };
	char *a3[] = { "test", "--mode", "c" };
	char *a4[] = { "test", "positional" };
	char *a5[] = { "test", "--config" };
	char *a6[] = { "test", "--fast=perhaps" };
	char *help[] = { "test", "--dir", "x", "-h" };
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	expect_args_error(3, a1, "unknown option '--colour'");
	expect_args_error(2, a2, "option '--dir' needs a value");
	expect_args_error(3, a3, "--mode 'c': expected a or b");
	expect_args_error(2, a4, "unexpected argument 'positional'");
	expect_args_error(2, a5, "option '--config' needs a file");
	expect_args_error(2, a6, "--fast 'perhaps': expected true or false");
	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_args(&c, 4, help, &eb), CONF_HELP);
	conf_release(&c);
}

static void test_required(void **state)
{
	struct settings s = { 0 };
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_apply(&c, &s, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "--dir is needed (or 'dir = ...' in the config file)");
	conf_release(&c);
}

/* A config file in a temp dir; returns its path (caller frees). */
static char *write_conf(char *tmpl, const char *text)
{
	char *dir = mkdtemp(tmpl);
	char *path;

	assert_non_null(dir);
	path = xasprintf("%s/t.conf", dir);
	assert_int_equal(write_file_replace(path, text, strlen(text), 0600), 0);
	return path;
}

/* The command line wins option by option; a list given there replaces the
 * file's; what the command line leaves out comes from the file. */
static void test_flags_win_over_keys(void **state)
{
	char tmpl[] = "/tmp/yard-conf-XXXXXX";
	char *path = write_conf(tmpl, "dir = /from/file\nmode = a\ntag = f1\ntag = f2\nwait = 5s\n");
	char *argv[] = { "test", "--mode", "b", "--config", path, "--tag", "c1", NULL };
	struct settings s = { 0 };
	struct conf c;
	struct errbuf eb = ERRBUF_INIT;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_args(&c, ARRAY_SIZE(argv) - 1, argv, &eb), 0);
	assert_int_equal(conf_apply(&c, &s, &eb), 0);
	assert_string_equal(s.dir, "/from/file");
	assert_string_equal(s.mode, "b");
	assert_int_equal(s.tags.n, 1);
	assert_string_equal(s.tags.items[0], "c1");
	assert_int_equal(s.wait_ms, 5000);
	assert_false(s.fast);
	conf_release(&c);
	unlink(path);
	rmdir(tmpl);
	free(path);
}

/* A reload reads the file again; a bad file leaves the values as they were;
 * conf_clone and conf_take_keys take only some of a reload's keys. */
static void test_reload(void **state)
{
	char tmpl[] = "/tmp/yard-conf-XXXXXX";
	char *path = write_conf(tmpl, "dir = /d1\nmode = a\n");
	char *argv[] = { "test", "--config", path, NULL };
	const char *bad = "dir = /d2\nmode = z\n", *good = "dir = /d2\nmode = b\ntag = t\n";
	struct conf c, next;
	struct errbuf eb = ERRBUF_INIT;
	char *text;

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_parse_args(&c, ARRAY_SIZE(argv) - 1, argv, &eb), 0);
	assert_int_equal(write_file_replace(path, bad, strlen(bad), 0600), 0);
	assert_int_equal(conf_reload(&c, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "line 2: mode 'z': expected a or b"));
	text = conf_value_text(&c, 1);
	assert_string_equal(text, "a");
	free(text);

	assert_int_equal(write_file_replace(path, good, strlen(good), 0600), 0);
	conf_clone(&next, &c);
	assert_int_equal(conf_reload(&next, &eb), 0);
	conf_take_keys(&c, &next, 1); /* mode, not dir */
	conf_take_keys(&c, &next, 2);
	text = conf_value_text(&c, 0);
	assert_string_equal(text, "/d1");
	free(text);
	text = conf_value_text(&c, 1);
	assert_string_equal(text, "b");
	free(text);
	text = conf_value_text(&c, 2);
	assert_string_equal(text, "t");
	free(text);
	conf_release(&next);
	conf_release(&c);

	conf_init(&c, "test", opts, ARRAY_SIZE(opts));
	assert_int_equal(conf_reload(&c, &eb), YERR(CONFLICT));
	conf_release(&c);
	unlink(path);
	rmdir(tmpl);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_every_kind),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_args_errors),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_flags_win_over_keys),
		cmocka_unit_test(test_reload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
