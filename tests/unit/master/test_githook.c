/* Push notifications (master/githook.h): signatures as GitHub and Gitea
 * compute them, push events read or refused naming the field, repository
 * URLs compared as the same repository. */
#include "base/compat.h"
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "base/crypto.h"
#include "master/githook.h"

static const char SECRET[] = "It's a Secret to Everybody";
static const char BODY[] = "Hello, World!";
/* GitHub's documented example: this secret, this payload */
static const char GITHUB_SIG[] = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

static void test_verify(void **state)
{
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(githook_verify(SECRET, GITHUB_SIG, NULL, BODY, strlen(BODY), &eb), 0);
	/* Gitea's header: the hex alone */
	assert_int_equal(githook_verify(SECRET, NULL, GITHUB_SIG + 7, BODY, strlen(BODY), &eb), 0);
	/* another body, another secret, no signature, a bad form: refused, 401 */
	assert_int_equal(githook_verify(SECRET, GITHUB_SIG, NULL, BODY, strlen(BODY) - 1, &eb), YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "does not match"));
	assert_null(strstr(eb.msg, GITHUB_SIG + 7));
	assert_int_equal(githook_verify("another secret entirely", GITHUB_SIG, NULL, BODY, strlen(BODY), &eb),
			 YERR(UNAUTHORIZED));
	assert_int_equal(githook_verify(SECRET, NULL, NULL, BODY, strlen(BODY), &eb), YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "not signed"));
	assert_int_equal(githook_verify(SECRET, GITHUB_SIG + 7, NULL, BODY, strlen(BODY), &eb), YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "sha256="));
	/* a prefix of the right signature, or more after it */
	assert_int_equal(githook_verify(SECRET, "sha256=757107ea", NULL, BODY, strlen(BODY), &eb), YERR(UNAUTHORIZED));
	char longer[128];
	snprintf(longer, sizeof(longer), "%s00", GITHUB_SIG);
	assert_int_equal(githook_verify(SECRET, longer, NULL, BODY, strlen(BODY), &eb), YERR(UNAUTHORIZED));
	(void)state;
}

static int parse(const char *text, struct git_push *p, struct errbuf *eb)
{
	json_t *doc = json_loads(text, 0, NULL);
	int rc;

	assert_non_null(doc);
	rc = githook_parse_push(doc, p, eb);
	json_decref(doc);
	return rc;
}

#define SHA "0123456789abcdef0123456789abcdef01234567"

static void test_parse_push(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct git_push p;

	assert_int_equal(parse("{\"ref\": \"refs/heads/feature/x\", \"after\": \"" SHA "\", \"repository\": "
			       "{\"clone_url\": \"https://git.example/t/m.git\", \"ssh_url\": \"git@git.example:t/m.git\", "
			       "\"html_url\": 7}}", &p, &eb), 0);
	assert_string_equal(p.branch, "feature/x");
	assert_string_equal(p.sha, SHA);
	assert_false(p.deleted);
	assert_int_equal(p.nurls, 2);
	assert_string_equal(p.urls[1], "git@git.example:t/m.git");
	git_push_release(&p);
	/* a tag: read, no branch */
	assert_int_equal(parse("{\"ref\": \"refs/tags/v1\", \"after\": \"" SHA "\", \"repository\": "
			       "{\"url\": \"git://h/r\"}}", &p, &eb), 0);
	assert_null(p.branch);
	git_push_release(&p);
	/* a deleted branch */
	assert_int_equal(parse("{\"ref\": \"refs/heads/old\", \"after\": \"0000000000000000000000000000000000000000\", "
			       "\"repository\": {\"url\": \"git://h/r\"}}", &p, &eb), 0);
	assert_true(p.deleted);
	git_push_release(&p);
	/* each refusal names its field */
	static const struct { const char *text, *field; } bad[] = {
		{ "{\"after\": \"" SHA "\", \"repository\": {\"url\": \"u\"}}", "ref" },
		{ "{\"ref\": \"main\", \"after\": \"" SHA "\", \"repository\": {\"url\": \"u\"}}", "ref" },
		{ "{\"ref\": \"refs/heads/m\", \"after\": \"0123\", \"repository\": {\"url\": \"u\"}}", "after" },
		{ "{\"ref\": \"refs/heads/m\", \"after\": \"0123456789ABCDEF0123456789ABCDEF01234567\", "
		  "\"repository\": {\"url\": \"u\"}}", "after" },
		{ "{\"ref\": \"refs/heads/m\", \"after\": \"" SHA "\"}", "repository" },
		{ "{\"ref\": \"refs/heads/m\", \"after\": \"" SHA "\", \"repository\": {\"name\": \"m\"}}", "repository" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i].text, &p, &eb), YERR(BAD_REQUEST));
		assert_string_equal(eb.field, bad[i].field);
		git_push_release(&p);
	}
	(void)state;
}

static void test_same_repo(void **state)
{
	assert_true(githook_same_repo("https://git.example/t/m.git", "https://git.example/t/m"));
	assert_true(githook_same_repo("https://git.example/t/m", "https://git.example/t/m.git/"));
	assert_true(githook_same_repo("git://h:9418/m.git", "git://h:9418/m.git"));
	assert_false(githook_same_repo("https://git.example/t/m.git", "https://git.example/t/m2.git"));
	assert_false(githook_same_repo("https://git.example/t/m.git", "https://git.example/t/"));
	assert_false(githook_same_repo("https://git.example/t/m.git", ".git"));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify),
		cmocka_unit_test(test_parse_push),
		cmocka_unit_test(test_same_repo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
