#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "cli/config.h"

static void test_parse(void **state)
{
	const char *text = "# where\n"
			   "\n"
			   "  master =  http://10.0.0.1:7420  \n"
			   "token=yard_u_abc\r\n"
			   "colour = blue\n";
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(cli_config_parse(text, strlen(text), "cfg", &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://10.0.0.1:7420");
	assert_string_equal(cfg.token, "yard_u_abc");
	cli_config_release(&cfg);
}

static void test_parse_bad_line(void **state)
{
	const char *text = "master = x\nthis is not a setting\n";
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(cli_config_parse(text, strlen(text), "cfg", &cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "'cfg' line 2: expected 'key = value'");
	cli_config_release(&cfg);
}

static void test_resolve_precedence(void **state)
{
	char tmpl[] = "/tmp/yard-config-XXXXXX";
	char *dir = mkdtemp(tmpl);
	char *ydir, *path;
	const char *text = "master = http://file:1\ntoken = file-token\n";
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	assert_non_null(dir);
	ydir = xasprintf("%s/yard", dir);
	path = xasprintf("%s/config", ydir);
	assert_int_equal(mkdir_p(ydir, 0700), 0);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
	setenv("XDG_CONFIG_HOME", dir, 1);
	unsetenv("YARD_MASTER");
	unsetenv("YARD_TOKEN");

	char *p = cli_config_path();
	assert_string_equal(p, path);
	free(p);

	/* the file alone */
	assert_int_equal(cli_config_resolve(NULL, NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://file:1");
	assert_string_equal(cfg.token, "file-token");
	cli_config_release(&cfg);

	/* the environment beats the file */
	setenv("YARD_MASTER", "http://env:2", 1);
	assert_int_equal(cli_config_resolve(NULL, NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://env:2");
	assert_string_equal(cfg.token, "file-token");
	cli_config_release(&cfg);

	/* options beat both */
	setenv("YARD_TOKEN", "env-token", 1);
	assert_int_equal(cli_config_resolve("http://opt:3", NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://opt:3");
	assert_string_equal(cfg.token, "env-token");
	cli_config_release(&cfg);
	assert_int_equal(cli_config_resolve(NULL, "opt-token", &cfg, &eb), 0);
	assert_string_equal(cfg.token, "opt-token");
	cli_config_release(&cfg);

	/* nothing anywhere: master stays NULL */
	unsetenv("YARD_MASTER");
	unsetenv("YARD_TOKEN");
	rm_rf(dir);
	assert_int_equal(cli_config_resolve(NULL, NULL, &cfg, &eb), 0);
	assert_null(cfg.master);
	assert_null(cfg.token);
	cli_config_release(&cfg);

	/* HOME when XDG_CONFIG_HOME is unset */
	unsetenv("XDG_CONFIG_HOME");
	setenv("HOME", "/home/someone", 1);
	p = cli_config_path();
	assert_string_equal(p, "/home/someone/.config/yard/config");
	free(p);

	free(ydir);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_bad_line),
		cmocka_unit_test(test_resolve_precedence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
