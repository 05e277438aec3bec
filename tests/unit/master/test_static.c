/* The static server's path decoding (traversal refused, encoded or not) and
 * its Content-Types. Serving itself is tested end to end (test_web.py). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "master/static.h"

static void expect_path(const char *target, const char *want)
{
	char *got = NULL;

	if (static_resolve(target, &got)) {
		fprintf(stderr, "'%s' refused, expected '%s'\n", target, want);
		fail();
	}
	assert_string_equal(got, want);
	free(got);
}

static void expect_refused(const char *target)
{
	char *got = NULL;

	if (!static_resolve(target, &got)) {
		fprintf(stderr, "'%s' resolved to '%s', expected a refusal\n", target, got);
		free(got);
		fail();
	}
	assert_null(got);
}

static void test_resolve(void **state)
{
	expect_path("/", "");
	expect_path("/index.html", "index.html");
	expect_path("/assets/index-3f2a.js", "assets/index-3f2a.js");
	expect_path("/?token=abc", "");
	expect_path("/index.html?x=../../etc", "index.html");
	expect_path("/jobs/12#frag", "jobs/12");
	expect_path("/a%20b.png", "a b.png");
	expect_path("/assets/", "assets/");
	expect_path("/..x/a..b/...", "..x/a..b/...");
	expect_path("/.well-known/x", ".well-known/x");
	(void)state;
}

static void test_traversal_refused(void **state)
{
	expect_refused("/../etc/passwd");
	expect_refused("/..");
	expect_refused("/assets/../../x");
	expect_refused("/assets/..");
	expect_refused("/./index.html");
	expect_refused("/assets/.");
	expect_refused("/%2e%2e/etc/passwd");
	expect_refused("/%2E%2E/etc/passwd");
	expect_refused("/.%2e/x");
	expect_refused("/assets%2f..%2f..%2fx");
	expect_refused("/index.html%00.png");
	expect_refused("/%00");
	expect_refused("/..%5cx");
	expect_refused("/a\\b");
	expect_refused("/%zz");
	expect_refused("/%2");
	expect_refused("index.html");
	expect_refused("");
	(void)state;
}

static void test_mime(void **state)
{
	assert_string_equal(static_mime("index.html"), "text/html; charset=utf-8");
	assert_string_equal(static_mime("assets/index-1.js"), "text/javascript; charset=utf-8");
	assert_string_equal(static_mime("assets/index-1.css"), "text/css; charset=utf-8");
	assert_string_equal(static_mime("logo.svg"), "image/svg+xml");
	assert_string_equal(static_mime("a/b.PNG"), "image/png");
	assert_string_equal(static_mime("manifest.json"), "application/json");
	assert_string_equal(static_mime("assets/index-1.js.map"), "application/json");
	assert_string_equal(static_mime("assets/font.woff2"), "font/woff2");
	assert_string_equal(static_mime("README"), "application/octet-stream");
	assert_string_equal(static_mime(".html"), "application/octet-stream");
	assert_string_equal(static_mime("a.html/b"), "application/octet-stream");
	(void)state;
}

static void test_takes(void **state)
{
	assert_true(static_takes("GET", "/"));
	assert_true(static_takes("HEAD", "/assets/a.js"));
	assert_true(static_takes("GET", "/v1x"));
	assert_false(static_takes("GET", "/v1"));
	assert_false(static_takes("GET", "/v1/jobs"));
	assert_false(static_takes("POST", "/"));
	assert_false(static_takes("DELETE", "/index.html"));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_traversal_refused),
		cmocka_unit_test(test_mime),
		cmocka_unit_test(test_takes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
