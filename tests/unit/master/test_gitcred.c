/* Unit tests for src/master/gitcred.h: the git-credential option, the
 * credential of a URL, token files, and the scrubbing of messages. */
#include "base/compat.h"
#include "master/gitcred.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/fsutil.h"
#include "base/xalloc.h"

static void bad(const char *v, const char *msg)
{
	struct errbuf eb = ERRBUF_INIT;
	struct gitcred c;

	assert_int_equal(gitcred_parse("--git-credential", v, &c, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, msg);
	assert_null(c.prefix);
	gitcred_release(&c);
}

static void test_parse(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct gitcred c;

	assert_int_equal(gitcred_parse("x", "https://git.example/team/=token-file:/etc/t", &c, &eb), 0);
	assert_string_equal(c.prefix, "https://git.example/team/");
	assert_int_equal(c.kind, GITCRED_TOKEN_FILE);
	assert_string_equal(c.path, "/etc/t");
	gitcred_release(&c);
	assert_int_equal(gitcred_parse("x", "git@git.example:team/=ssh-key:/k", &c, &eb), 0);
	assert_string_equal(c.prefix, "git@git.example:team/");
	assert_int_equal(c.kind, GITCRED_SSH_KEY);
	gitcred_release(&c);

	bad("https://git.example/", "--git-credential 'https://git.example/': expected "
	    "PREFIX=token-file:PATH or PREFIX=ssh-key:PATH");
	bad("https://git.example/=password:hunter2", "--git-credential "
	    "'https://git.example/=password:hunter2': the credential is token-file:PATH or "
	    "ssh-key:PATH, got 'password:hunter2'");
	bad("https://git.example/=token-file:etc/t", "--git-credential "
	    "'https://git.example/=token-file:etc/t': 'etc/t' is not an absolute path");
	bad("/srv/repos=token-file:/t", "--git-credential '/srv/repos=token-file:/t': the prefix "
	    "'/srv/repos' is not the start of a repository URL (https://, http://, ssh://, git:// "
	    "or USER@HOST:)");
	(void)state;
}

static void test_find_longest_prefix(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct gitcreds cs = { 0 };

	assert_int_equal(gitcreds_add(&cs, "x", "https://git.example/=token-file:/all", &eb), 0);
	assert_int_equal(gitcreds_add(&cs, "x", "https://git.example/team/=token-file:/team", &eb), 0);
	assert_string_equal(gitcreds_find(&cs, "https://git.example/team/r.git")->path, "/team");
	assert_string_equal(gitcreds_find(&cs, "https://git.example/other/r.git")->path, "/all");
	assert_null(gitcreds_find(&cs, "https://git.example.evil/r.git"));
	assert_null(gitcreds_find(&cs, "http://git.example/r.git"));
	gitcreds_release(&cs);
	(void)state;
}

static void test_read_token(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char dir[] = "/tmp/yard-test-gitcred-XXXXXX", *path;
	char *user, *token;

	assert_non_null(mkdtemp(dir));
	path = xasprintf("%s/t", dir);
	assert_int_equal(write_file_atomic(path, "s3cret\n", 7, 0600), 0);
	assert_int_equal(gitcred_read_token("git-credential", path, "x-access-token", &user, &token, &eb), 0);
	assert_string_equal(user, "x-access-token");
	assert_string_equal(token, "s3cret");
	free(user);
	free(token);
	assert_int_equal(write_file_atomic(path, "bob:s3:cret\r\nmore", 18, 0600), 0);
	assert_int_equal(gitcred_read_token("git-credential", path, "x-access-token", &user, &token, &eb), 0);
	assert_string_equal(user, "bob");
	assert_string_equal(token, "s3:cret");
	free(user);
	free(token);
	assert_int_equal(write_file_atomic(path, "\n", 1, 0600), 0);
	assert_int_equal(gitcred_read_token("git-credential", path, "x-access-token", &user, &token, &eb), YERR(IO));
	assert_null(token);
	assert_non_null(strstr(eb.msg, "is empty"));
	unlink(path);
	assert_int_equal(gitcred_read_token("git-credential", path, "x-access-token", &user, &token, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "git-credential: cannot read the token file"));
	/* a user required (the registry's): a bare token is refused */
	assert_int_equal(write_file_atomic(path, "s3cret\n", 7, 0600), 0);
	assert_int_equal(gitcred_read_token("registry-credential-file", path, NULL, &user, &token, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "no USER:PASSWORD"));
	assert_null(strstr(eb.msg, "s3cret"));
	unlink(path);
	rmdir(dir);
	free(path);
	(void)state;
}

static void scrub(const char *in, const char *secret, const char *want)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addstr(&sb, in);
	gitcred_scrub(&sb, secret);
	assert_string_equal(sb.buf, want);
	strbuf_release(&sb);
}

static void test_scrub(void **state)
{
	scrub("cannot fetch 'https://bob:hunter2@git.example/r.git': 401", NULL,
	      "cannot fetch 'https://***@git.example/r.git': 401");
	scrub("ssh://git@h/r and http://u:p@h2:8080/x?y#z, then https://h3/ok", NULL,
	      "ssh://***@h/r and http://***@h2:8080/x?y#z, then https://h3/ok");
	scrub("the token tok123 and again tok123.", "tok123", "the token *** and again ***.");
	scrub("nothing here", "", "nothing here");
	scrub("a://@", NULL, "a://***@");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_find_longest_prefix),
		cmocka_unit_test(test_read_token),
		cmocka_unit_test(test_scrub),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
