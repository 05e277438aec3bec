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

/* Writes text as the config file of a new XDG_CONFIG_HOME in tmpl (a
 * mkdtemp template) and clears the environment the CLI reads; returns the
 * file's path (the caller frees it). */
static char *config_home(char *tmpl, const char *text)
{
	char *dir = mkdtemp(tmpl);
	assert_non_null(dir);
	char *ydir = xasprintf("%s/yard", dir);
	char *path = xasprintf("%s/config", ydir);
	assert_int_equal(mkdir_p(ydir, 0700), 0);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
	free(ydir);
	setenv("XDG_CONFIG_HOME", dir, 1);
	static const char *const vars[] = { "YARD_MASTER", "YARD_TOKEN", "YARD_CA", "YARD_PIN" };
	for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
		unsetenv(vars[i]);
	return path;
}

static void test_resolve_precedence(void **state)
{
	char dir[] = "/tmp/yard-config-XXXXXX";
	char *path = config_home(dir, "master = http://file:1\ntoken = file-token\n");
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	char *p = cli_config_path();
	assert_string_equal(p, path);
	free(p);

	/* the file alone */
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://file:1");
	assert_string_equal(cfg.token, "file-token");
	cli_config_release(&cfg);

	/* the environment beats the file */
	setenv("YARD_MASTER", "http://env:2", 1);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://env:2");
	assert_string_equal(cfg.token, "file-token");
	cli_config_release(&cfg);

	/* options beat both */
	setenv("YARD_TOKEN", "env-token", 1);
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .master = "http://opt:3" },
					    &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://opt:3");
	assert_string_equal(cfg.token, "env-token");
	cli_config_release(&cfg);
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .token = "opt-token" },
					    &cfg, &eb), 0);
	assert_string_equal(cfg.token, "opt-token");
	cli_config_release(&cfg);

	/* nothing anywhere: master stays NULL */
	unsetenv("YARD_MASTER");
	unsetenv("YARD_TOKEN");
	rm_rf(dir);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_null(cfg.master);
	assert_null(cfg.token);
	cli_config_release(&cfg);

	/* HOME when XDG_CONFIG_HOME is unset */
	unsetenv("XDG_CONFIG_HOME");
	setenv("HOME", "/home/someone", 1);
	p = cli_config_path();
	assert_string_equal(p, "/home/someone/.config/yard/config");
	free(p);

	free(path);
}

#define PIN_A "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
#define PIN_B "sha256//BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="

/* The file's ca and pin go with the file's master; the environment and
 * options beat them; a bad pin or a missing CA file is named. */
static void test_resolve_trust(void **state)
{
	char dir[] = "/tmp/yard-cfg-XXXXXX";
	char *path = config_home(dir, "master = https://file:1\ntoken = t\npin = " PIN_A "\n");
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "https://file:1");
	assert_string_equal(cfg.pin, PIN_A);
	assert_null(cfg.ca);
	cli_config_release(&cfg);

	/* another master: the file's pin is not for it */
	setenv("YARD_MASTER", "https://env:2", 1);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "https://env:2");
	assert_null(cfg.pin);
	cli_config_release(&cfg);

	/* the environment's pin, then the option's */
	setenv("YARD_PIN", PIN_B, 1);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.pin, PIN_B);
	cli_config_release(&cfg);
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .pin = PIN_A }, &cfg, &eb),
			 0);
	assert_string_equal(cfg.pin, PIN_A);
	cli_config_release(&cfg);

	/* CA files: a readable one is kept, a missing one is named */
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .ca = path }, &cfg, &eb), 0);
	assert_string_equal(cfg.ca, path);
	cli_config_release(&cfg);
	setenv("YARD_CA", "/nonexistent/ca.pem", 1);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "YARD_CA '/nonexistent/ca.pem': No such file or directory");
	cli_config_release(&cfg);
	unsetenv("YARD_CA");

	/* pins that are not sha256// and 32 bytes of base64 */
	const char *bad[] = { "AAAA", "sha256//short=",
			      "sha1//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", PIN_A ";nope",
			      "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA!=" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errbuf_reset(&eb);
		assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .pin = bad[i] }, &cfg,
						    &eb), YERR(BAD_REQUEST));
		assert_non_null(strstr(eb.msg, "--pin '"));
		assert_non_null(strstr(eb.msg, bad[i]));
		cli_config_release(&cfg);
	}
	/* several pins, for a key being replaced */
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .pin = PIN_A ";" PIN_B },
					    &cfg, &eb), 0);
	cli_config_release(&cfg);

	unsetenv("YARD_MASTER");
	unsetenv("YARD_PIN");
	rm_rf(dir);
	free(path);
}

/* A master may be a list wherever it comes from; an entry that is not an
 * http(s) URL is named, with where the list came from. */
static void test_resolve_lists(void **state)
{
	char dir[] = "/tmp/yard-cfg-XXXXXX";
	char *path = config_home(dir, "master = http://m1:7420, http://m2:7420\ntoken = t\n");
	struct cli_config cfg = CLI_CONFIG_INIT;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://m1:7420, http://m2:7420");
	cli_config_release(&cfg);

	setenv("YARD_MASTER", "https://e1:1,https://e2:2/", 1);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), 0);
	assert_string_equal(cfg.master, "https://e1:1,https://e2:2/");
	cli_config_release(&cfg);

	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .master = "http://o1,http://o2" },
					    &cfg, &eb), 0);
	assert_string_equal(cfg.master, "http://o1,http://o2");
	cli_config_release(&cfg);

	/* bad entries, named with their origin */
	errbuf_reset(&eb);
	assert_int_equal(cli_config_resolve(&(struct cli_config_opts){ .master = "http://o1,o2:7420" },
					    &cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "--master 'http://o1,o2:7420': 'o2:7420' is not an http:// or "
				    "https:// URL");
	cli_config_release(&cfg);
	setenv("YARD_MASTER", "http://e1,,http://e2", 1);
	errbuf_reset(&eb);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "YARD_MASTER 'http://e1,,http://e2': '' is not an http:// or "
				    "https:// URL");
	cli_config_release(&cfg);
	unsetenv("YARD_MASTER");
	rm_rf(dir);
	free(path);

	char dir2[] = "/tmp/yard-cfg-XXXXXX";
	path = config_home(dir2, "master = http://m1:7420,ftp://m2\ntoken = t\n");
	errbuf_reset(&eb);
	assert_int_equal(cli_config_resolve(NULL, &cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "the config file's master 'http://m1:7420,ftp://m2': 'ftp://m2' "
				    "is not an http:// or https:// URL");
	cli_config_release(&cfg);
	rm_rf(dir2);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parse_bad_line),
		cmocka_unit_test(test_resolve_precedence),
		cmocka_unit_test(test_resolve_trust),
		cmocka_unit_test(test_resolve_lists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
