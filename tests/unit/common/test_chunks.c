/* Unit tests for chunks_walk (src/common/chunks.h): what a dir's manifest
 * can hold, strict (yard data push) and lenient (what a task left). */
#include "base/compat.h"
#include "common/chunks.h"

#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/xalloc.h"

static int setup(void **state)
{
	char *tmp = xstrdup("/tmp/yard-test-chunks-XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	*state = tmp;
	return 0;
}

static int teardown(void **state)
{
	rm_rf(*state);
	free(*state);
	return 0;
}

static void put(const char *dir, const char *rel, const char *text, unsigned mode)
{
	char *path = xasprintf("%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_equal(mkdir_p(path, 0755), 0);
	*slash = '/';
	assert_int_equal(write_file_atomic(path, text, strlen(text), mode), 0);
	free(path);
}

/* The files of a walk, "path:size:mode" joined by spaces, in order. */
static char *listing(const struct chunks_set *set)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < set->n; i++)
		strbuf_addf(&sb, "%s%s:%" PRIu64 ":%o", i ? " " : "", set->files[i].rel, set->files[i].size,
			    set->files[i].mode);
	return strbuf_detach(&sb, NULL);
}

static void test_strict_and_lenient(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/out", tmp), *p, *got;
	struct chunks_set set;
	struct errbuf eb = ERRBUF_INIT;

	put(src, "model.pt", "weights", 0640);
	put(src, "sub/b.txt", "bee", 0644);
	put(src, "sub/a.txt", "a", 0600);
	put(tmp, "outside.txt", "outside", 0644);
	p = xasprintf("%s/latest.pt", src);
	assert_int_equal(symlink("model.pt", p), 0);
	free(p);
	/* plain files: both modes list them, sorted by path */
	assert_int_equal(chunks_walk(&set, src, false, NULL, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "latest.pt' is a symbolic link"));
	chunks_set_release(&set);
	assert_int_equal(chunks_walk(&set, src, true, NULL, &eb), 0);
	got = listing(&set);
	/* a link to a file is that file */
	assert_string_equal(got, "latest.pt:7:640 model.pt:7:640 sub/a.txt:1:600 sub/b.txt:3:644");
	assert_int_equal(set.skipped, 0);
	free(got);
	chunks_set_release(&set);
	/* a dangling link, a link to a dir and a fifo are left out and named */
	p = xasprintf("%s/gone", src);
	assert_int_equal(symlink("nowhere", p), 0);
	free(p);
	p = xasprintf("%s/subdir-link", src);
	assert_int_equal(symlink("sub", p), 0);
	free(p);
	p = xasprintf("%s/pipe", src);
	assert_int_equal(mkfifo(p, 0644), 0);
	free(p);
	assert_int_equal(chunks_walk(&set, src, true, NULL, &eb), 0);
	assert_int_equal(set.n, 4);
	assert_int_equal(set.skipped, 3);
	assert_non_null(strstr(set.skipped_names, "'gone' (a symbolic link to no regular file)"));
	assert_non_null(strstr(set.skipped_names, "'subdir-link' (a symbolic link to no regular file)"));
	assert_non_null(strstr(set.skipped_names, "'pipe' (is a special file"));
	chunks_set_release(&set);
	assert_int_equal(chunks_walk(&set, src, false, NULL, &eb), YERR(BAD_REQUEST));
	chunks_set_release(&set);
	free(src);
}

static void test_file_and_missing(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/one/data.csv", tmp), *missing = xasprintf("%s/none", tmp), *got;
	struct chunks_set set;
	struct errbuf eb = ERRBUF_INIT;

	put(tmp, "one/data.csv", "1,2\n", 0644);
	/* one file: named by its base name */
	assert_int_equal(chunks_walk(&set, src, false, NULL, &eb), 0);
	got = listing(&set);
	assert_string_equal(got, "data.csv:4:644");
	free(got);
	chunks_set_release(&set);
	/* missing: refused strict, an empty set lenient (a task that wrote nothing) */
	assert_int_equal(chunks_walk(&set, missing, false, NULL, &eb), YERR(NOT_FOUND));
	assert_non_null(strstr(eb.msg, "none': No such file or directory"));
	chunks_set_release(&set);
	assert_int_equal(chunks_walk(&set, missing, true, NULL, &eb), 0);
	assert_int_equal(set.n, 0);
	chunks_set_release(&set);
	free(src);
	free(missing);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_strict_and_lenient, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_and_missing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
