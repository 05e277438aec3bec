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

/* What an audit query saw: each entry's user, path, status and code. */
struct audit_seen {
	int n;
	int64_t ids[8];
	char user[8][16], path[8][32], code[8][16];
	int status[8];
};

static int audit_collect(void *ctx, const struct store_audit *e)
{
	struct audit_seen *s = ctx;

	if (s->n < 8) {
		s->ids[s->n] = e->id;
		snprintf(s->user[s->n], 16, "%s", e->user ? e->user : "(null)");
		snprintf(s->path[s->n], 32, "%s", e->path);
		snprintf(s->code[s->n], 16, "%s", e->code ? e->code : "(null)");
		s->status[s->n] = e->status;
	}
	s->n++;
	return 0;
}

static void audit_add(const struct store_ops *ops, struct store *st, int64_t time, const char *user,
		      const char *path, int status, const char *code)
{
	struct errbuf eb = ERRBUF_INIT;
	struct store_audit e = { .time = time, .user = user, .role = user ? "user" : NULL,
				 .token = user ? "0123456789ab" : NULL, .addr = "::1",
				 .method = "POST", .path = path, .status = status, .code = code };

	assert_int_equal(ops->audit_append(st, &e, &eb), 0);
}

/* The audit log's rows: appended in a batch (gone when it is rolled back),
 * kept across a reopen, and queried newest first by user, time and limit. */
static void test_audit_append_query(void **state)
{
	char dir[] = "/tmp/yard-store-XXXXXX";
	const struct store_ops *ops = &store_sqlite_ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct audit_seen s = { 0 };
	int created;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(ops->open(dir, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	audit_add(ops, st, 100, "alice", "/v1/jobs", 201, NULL);
	audit_add(ops, st, 200, "bob", "/v1/jobs/1/cancel", 403, "forbidden");
	audit_add(ops, st, 300, NULL, "/v1/tokens", 401, "unauthorized");
	audit_add(ops, st, 400, "alice", "/v1/jobs/1/cancel", 200, NULL);
	assert_int_equal(ops->commit(st, &eb), 0);
	/* a rolled-back batch leaves no entry */
	assert_int_equal(ops->begin(st, &eb), 0);
	audit_add(ops, st, 500, "alice", "/v1/rolled-back", 201, NULL);
	ops->rollback(st);
	ops->close(st);

	assert_int_equal(ops->open(dir, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	assert_int_equal(ops->audit_query(st, NULL, 0, 100, audit_collect, &s, &eb), 0);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.path[0], "/v1/jobs/1/cancel"); /* newest first */
	assert_int_equal(s.status[0], 200);
	assert_string_equal(s.user[2], "bob");
	assert_string_equal(s.code[2], "forbidden");
	assert_int_equal(s.status[2], 403);
	assert_string_equal(s.user[1], "(null)");
	assert_true(s.ids[0] > s.ids[1] && s.ids[1] > s.ids[2]);

	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->audit_query(st, "alice", 0, 100, audit_collect, &s, &eb), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.path[0], "/v1/jobs/1/cancel");
	assert_string_equal(s.path[1], "/v1/jobs");

	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->audit_query(st, NULL, 200, 100, audit_collect, &s, &eb), 0);
	assert_int_equal(s.n, 3); /* since is inclusive */
	assert_string_equal(s.user[2], "bob");

	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->audit_query(st, NULL, 0, 1, audit_collect, &s, &eb), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.status[0], 200);

	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->audit_query(st, "carol", 0, 100, audit_collect, &s, &eb), 0);
	assert_int_equal(s.n, 0);
	ops->close(st);
	rm_rf(dir);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_write_reopen_load),
					    cmocka_unit_test(test_audit_append_query) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
