/* The content names of images built from a job's code (agent/imagebuild.h):
 * one per code, Dockerfile path, Dockerfile bytes and args, whatever the
 * args' order; a Dockerfile the code lacks is named in the error. */
#include "base/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/imagebuild.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

static char dir[] = "/tmp/yard-imagebuild-XXXXXX";

static void put(const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
	free(path);
}

static char *tag_of(const char *code, const char *dockerfile, const char *args)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *a = json_loads(args, 0, NULL);
	char *tag = NULL;

	assert_non_null(a);
	if (imagebuild_tag(NULL, code, dir, dockerfile, a, &tag, &eb))
		fail_msg("imagebuild_tag: %s", eb.msg);
	json_decref(a);
	return tag;
}

static void test_named_by_content(void **state)
{
	char *base, *t;

	(void)state;
	put("Dockerfile", "FROM debian\n");
	put("Other", "FROM debian\n");
	base = tag_of("sha256:aa", "Dockerfile", "{\"A\": \"1\", \"B\": \"2\"}");
	assert_int_equal(strlen(base), strlen(IMAGEBUILD_REPO) + 1 + 64);
	assert_int_equal(strncmp(base, IMAGEBUILD_REPO ":", strlen(IMAGEBUILD_REPO) + 1), 0);
	/* the same content, the args in another order: the same name */
	t = tag_of("sha256:aa", "Dockerfile", "{\"B\": \"2\", \"A\": \"1\"}");
	assert_string_equal(t, base);
	free(t);
	/* each part changes it */
	const char *const others[][3] = {
		{ "sha256:ab", "Dockerfile", "{\"A\": \"1\", \"B\": \"2\"}" },
		{ "sha256:aa", "Other", "{\"A\": \"1\", \"B\": \"2\"}" },
		{ "sha256:aa", "Dockerfile", "{\"A\": \"1\", \"B\": \"3\"}" },
		{ "sha256:aa", "Dockerfile", "{\"A\": \"1\"}" },
		{ "sha256:aa", "Dockerfile", "{\"A\": \"1B\", \"\": \"2\"}" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
		t = tag_of(others[i][0], others[i][1], others[i][2]);
		assert_string_not_equal(t, base);
		free(t);
	}
	/* under the cluster's registry: the same name there */
	struct errbuf eb = ERRBUF_INIT;
	json_t *a = json_loads("{\"A\": \"1\", \"B\": \"2\"}", 0, NULL);
	assert_int_equal(imagebuild_tag("127.0.0.1:5000", "sha256:aa", dir, "Dockerfile", a, &t, &eb), 0);
	assert_string_equal(t + strlen("127.0.0.1:5000/"), base);
	assert_int_equal(strncmp(t, "127.0.0.1:5000/", 15), 0);
	json_decref(a);
	free(t);
	/* the Dockerfile's bytes, not only its name */
	put("Dockerfile", "FROM debian\nRUN true\n");
	t = tag_of("sha256:aa", "Dockerfile", "{\"A\": \"1\", \"B\": \"2\"}");
	assert_string_not_equal(t, base);
	free(t);
	free(base);
}

static void test_missing_dockerfile(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *args = json_object();
	char *tag = (char *)"untouched";

	(void)state;
	assert_int_not_equal(imagebuild_tag(NULL, "sha256:aa", dir, "docker/Nosuch", args, &tag, &eb), 0);
	assert_null(tag);
	assert_non_null(strstr(eb.msg, "image_build_failed: the job's code has no Dockerfile "
				       "'docker/Nosuch' (image.build.dockerfile)"));
	json_decref(args);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_named_by_content),
		cmocka_unit_test(test_missing_dockerfile),
	};
	if (!mkdtemp(dir))
		return 1;
	int ret = cmocka_run_group_tests(tests, NULL, NULL);
	if (rm_rf(dir))
		ret = 1;
	return ret;
}
