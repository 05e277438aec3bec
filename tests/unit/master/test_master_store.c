#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/store.h"

struct seen {
	int n;
	char keys[4][32];
	char docs[4][64];
};

static int collect(void *ctx, const char *key, const char *doc)
{
	struct seen *s = ctx;
	if (s->n < 4) {
		snprintf(s->keys[s->n], 32, "%s", key);
		snprintf(s->docs[s->n], 64, "%s", doc);
	}
	s->n++;
	return 0;
}

static void test_write_reopen_load(void **state)
{
	char dir[] = "/tmp/yard-store-XXXXXX";
	const struct store_ops *ops = &store_sqlite_ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct seen s = { 0 };
	int created;
	char *v;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(ops->open(dir, &st, &created, &eb), 0);
	assert_int_equal(created, 1);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "10", "{\"id\":10}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "9", "{\"id\":9}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_META, "next_job_id", "{\"v\":\"10\"}", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	/* a rolled-back batch leaves nothing */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "11", "{\"id\":11}", &eb), 0);
	ops->rollback(st);
	ops->close(st);

	assert_int_equal(ops->open(dir, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.keys[0], "9"); /* numeric order */
	assert_string_equal(s.docs[1], "{\"id\":10}");
	assert_int_equal(ops->get_meta(st, "next_job_id", &v, &eb), 0);
	assert_non_null(v);
	assert_string_equal(v, "{\"v\":\"10\"}");
	free(v);
	ops->close(st);
	rm_rf(dir);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_write_reopen_load) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
