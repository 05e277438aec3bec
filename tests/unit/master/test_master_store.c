/*
 * The store's operations (master/store.h), the same cases on each backend:
 * SQLite in a temp dir, and PostgreSQL in the server whose URL YARD_TEST_PG
 * holds. meson test runs this program through tests/pg/pgtmp.sh run, which
 * starts a private server and sets it; without it every PostgreSQL case
 * fails (it is never skipped). Then the schema's version, and what only
 * one backend has: SQLite stores written before schema versions, and
 * PostgreSQL's foreign tables, lost connections and passwords kept out of
 * messages.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/store.h"

/* One backend under test; a test's state. */
struct backend {
	const struct store_ops *ops;
	char dir[64];      /* sqlite: the test's temp dir */
	const char *where; /* what open() takes: the dir, or the connection string */
	/* sql runs statements on the store behind the backend's back (the
	 * tests' own connection) and copies the first value of the last
	 * statement's first row into out (""), 0 or -1 */
	int (*sql)(struct backend *b, const char *sql, char *out, size_t len);
};

/* ---- raw SQL, per backend ---- */

static int sqlite_row(void *ctx, int n, char **vals, char **names)
{
	char **out = ctx;
	if (n > 0 && out[0] && !out[0][0])
		snprintf(out[0], (size_t)(uintptr_t)out[1], "%s", vals[0] ? vals[0] : "");
	(void)names;
	return 0;
}

static int sqlite_sql(struct backend *b, const char *sql, char *out, size_t len)
{
	char *path = xasprintf("%s/state.db", b->dir), *err = NULL, none[1] = "";
	char *ctx[2] = { out ? out : none, (char *)(uintptr_t)(out ? len : 1) };
	sqlite3 *db = NULL;
	int rc;

	if (out)
		out[0] = '\0';
	rc = sqlite3_open(path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, sqlite_row, ctx, &err);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sqlite: %s: %s\n", sql, err ? err : sqlite3_errmsg(db));
	sqlite3_free(err);
	sqlite3_close(db);
	free(path);
	return rc == SQLITE_OK ? 0 : -1;
}

static int pg_sql(struct backend *b, const char *sql, char *out, size_t len)
{
	PGconn *c = PQconnectdb(b->where);
	PGresult *res = NULL;
	int ret = -1;

	if (out)
		out[0] = '\0';
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "postgres: cannot connect: %s", PQerrorMessage(c));
		goto out;
	}
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		fprintf(stderr, "postgres: %s: %s", sql, PQresultErrorMessage(res));
		goto out;
	}
	if (out && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
		snprintf(out, len, "%s", PQgetvalue(res, 0, 0));
	ret = 0;
out:
	PQclear(res);
	PQfinish(c);
	return ret;
}

static struct backend sqlite_backend = {
	.ops = &store_sqlite_ops,
	.sql = sqlite_sql,
};
static struct backend pg_backend = {
	.ops = &store_pg_ops,
	.sql = pg_sql,
};

/* Each test starts with an empty store: a new temp dir, or an empty
 * database (its schema dropped). */
static int setup(void **state)
{
	struct backend *b = *state;

	if (b->ops == &store_sqlite_ops) {
		snprintf(b->dir, sizeof(b->dir), "/tmp/yard-store-XXXXXX");
		if (!mkdtemp(b->dir))
			return -1;
		b->where = b->dir;
		return 0;
	}
	b->where = getenv("YARD_TEST_PG");
	if (!b->where || !*b->where) {
		fprintf(stderr, "YARD_TEST_PG is not set: the PostgreSQL cases need a server; run this "
				"program as tests/pg/pgtmp.sh run PROGRAM (meson test does)\n");
		return -1;
	}
	return b->sql(b, "SET client_min_messages = warning; DROP SCHEMA public CASCADE;"
			 " CREATE SCHEMA public;", NULL, 0);
}

static int teardown(void **state)
{
	struct backend *b = *state;

	if (b->ops == &store_sqlite_ops)
		rm_rf(b->dir);
	return 0;
}

/* ---- the cases of every backend ---- */

struct seen {
	int n;
	char keys[8][32];
	char docs[8][64];
};

static int collect(void *ctx, const char *key, const char *doc)
{
	struct seen *s = ctx;
	if (s->n < 8) {
		snprintf(s->keys[s->n], 32, "%s", key);
		snprintf(s->docs[s->n], 64, "%s", doc);
	}
	s->n++;
	return 0;
}

static void test_write_reopen_load(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct seen s = { 0 };
	int created;
	char *v;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(created, 1);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "10", "{\"id\":10}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "9", "{\"id\":9}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "100", "{\"id\":100}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "7", "{\"id\":7}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_META, "next_job_id", "{\"v\":\"10\"}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_NODE, "b", "{\"n\":\"b\"}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_NODE, "B", "{\"n\":\"B\"}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_NODE, "a", "{\"n\":\"a\"}", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	/* a replaced row and a deleted one */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "10", "{\"id\":10,\"v\":2}", &eb), 0);
	assert_int_equal(ops->del(st, STORE_JOB, "7", &eb), 0);
	assert_int_equal(ops->del(st, STORE_JOB, "12345", &eb), 0); /* absent: no error */
	assert_int_equal(ops->commit(st, &eb), 0);
	/* a rolled-back batch leaves nothing */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "11", "{\"id\":11}", &eb), 0);
	assert_int_equal(ops->del(st, STORE_JOB, "9", &eb), 0);
	ops->rollback(st);
	ops->close(st);

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.keys[0], "9"); /* numeric order */
	assert_string_equal(s.keys[1], "10");
	assert_string_equal(s.keys[2], "100");
	assert_string_equal(s.docs[1], "{\"id\":10,\"v\":2}");
	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->load(st, STORE_NODE, collect, &s, &eb), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.keys[0], "B"); /* byte order, whatever the collation */
	assert_string_equal(s.keys[1], "a");
	assert_string_equal(s.keys[2], "b");
	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->load(st, STORE_TOKEN, collect, &s, &eb), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(ops->get_meta(st, "next_job_id", &v, &eb), 0);
	assert_non_null(v);
	assert_string_equal(v, "{\"v\":\"10\"}");
	free(v);
	assert_int_equal(ops->get_meta(st, "absent", &v, &eb), 0);
	assert_null(v);
	ops->close(st);
}

/* Reads inside a transaction see its writes (the master reads a series'
 * last step and a stream's cursor in the batch that writes them), and a
 * batch of many writes commits whole. */
static void test_reads_see_the_transaction(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct store_metric pt = { "loss", 41, 0.5, 1 };
	struct seen s = { 0 };
	int64_t last;
	uint64_t off;
	int created;
	char key[16], *v;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_META, "k", "{\"v\":\"1\"}", &eb), 0);
	assert_int_equal(ops->get_meta(st, "k", &v, &eb), 0);
	assert_non_null(v);
	assert_string_equal(v, "{\"v\":\"1\"}");
	free(v);
	assert_int_equal(ops->metrics_append(st, 3, &pt, 1, &eb), 0);
	assert_int_equal(ops->metrics_cursor_set(st, 3, 1, 500, &eb), 0);
	assert_int_equal(ops->metrics_last_step(st, 3, "loss", &last, &eb), 0);
	assert_int_equal(last, 41);
	assert_int_equal(ops->metrics_cursor_get(st, 3, 1, &off, &eb), 0);
	assert_int_equal(off, 500);
	for (int i = 1; i <= 1000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		assert_int_equal(ops->put(st, STORE_TASK, key, "{}", &eb), 0);
		if (i % 2 == 0)
			assert_int_equal(ops->del(st, STORE_TASK, key, &eb), 0);
	}
	assert_int_equal(ops->load(st, STORE_TASK, collect, &s, &eb), 0);
	assert_int_equal(s.n, 500);
	assert_int_equal(ops->commit(st, &eb), 0);
	/* and a rolled-back one with as many leaves nothing of them */
	assert_int_equal(ops->begin(st, &eb), 0);
	for (int i = 2000; i < 3000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		assert_int_equal(ops->put(st, STORE_TASK, key, "{}", &eb), 0);
	}
	ops->rollback(st);
	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->load(st, STORE_TASK, collect, &s, &eb), 0);
	assert_int_equal(s.n, 500);
	assert_string_equal(s.keys[1], "3");
	ops->close(st);
}

/* A load stops at the code its callback returns. */
static int stop_at_second(void *ctx, const char *key, const char *doc)
{
	int *n = ctx;
	(void)key;
	(void)doc;
	return ++*n == 2 ? YERR(CONFLICT) : 0;
}

static void test_load_stops(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	int created, n = 0;
	char key[16];
	char *v;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	for (int i = 1; i <= 50; i++) {
		snprintf(key, sizeof(key), "%d", i);
		assert_int_equal(ops->put(st, STORE_TASK, key, "{}", &eb), 0);
	}
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->load(st, STORE_TASK, stop_at_second, &n, &eb), YERR(CONFLICT));
	assert_int_equal(n, 2);
	/* the store is usable after a stopped load */
	assert_int_equal(ops->get_meta(st, "x", &v, &eb), 0);
	assert_null(v);
	ops->close(st);
}

/* What a metrics query saw. */
struct metric_seen {
	int n;
	char name[16][32];
	int64_t step[16], time[16];
	double value[16];
};

static int metric_collect(void *ctx, const struct store_metric *pt)
{
	struct metric_seen *s = ctx;

	if (s->n < 16) {
		snprintf(s->name[s->n], 32, "%s", pt->name);
		s->step[s->n] = pt->step;
		s->value[s->n] = pt->value;
		s->time[s->n] = pt->time;
	}
	s->n++;
	return 0;
}

/* Metric points: stored in a batch (gone when it is rolled back), ordered
 * by name, step and arrival, values exact, names of any bytes; the cursors
 * of streams. */
static void test_metrics(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct metric_seen s = { 0 };
	const char *odd = "a \"q\" \\ {x,y} 'z'";
	struct store_metric pts[] = {
		{ "loss", 2, 0.5, 1000 },   { "acc", 1, 0.25, 1001 },   { "loss", 1, 0.1, 1002 },
		{ "loss", 2, 0.45, 1003 },  { odd, 0, -2.5e-300, 1004 }, { "acc", 3, 1e300, 1005 },
	};
	struct store_metric many[3000];
	int64_t last;
	uint64_t off;
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->metrics_append(st, 7, pts, ARRAY_SIZE(pts), &eb), 0);
	assert_int_equal(ops->metrics_append(st, 7, pts, 0, &eb), 0);
	assert_int_equal(ops->metrics_cursor_set(st, 7, 1, 4096, &eb), 0);
	assert_int_equal(ops->metrics_cursor_set(st, 7, 2, 10, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->metrics_append(st, 7, pts, 1, &eb), 0);
	assert_int_equal(ops->metrics_cursor_set(st, 7, 1, 9999, &eb), 0);
	ops->rollback(st);
	ops->close(st);

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->metrics_query(st, 7, NULL, metric_collect, &s, &eb), 0);
	assert_int_equal(s.n, 6);
	assert_string_equal(s.name[0], odd);
	assert_true(s.value[0] == -2.5e-300);
	assert_string_equal(s.name[1], "acc");
	assert_int_equal(s.step[1], 1);
	assert_true(s.value[2] == 1e300);
	assert_string_equal(s.name[3], "loss");
	assert_int_equal(s.step[3], 1);
	assert_true(s.value[3] == 0.1);
	/* equal steps in arrival order */
	assert_int_equal(s.step[4], 2);
	assert_true(s.value[4] == 0.5);
	assert_int_equal(s.time[4], 1000);
	assert_true(s.value[5] == 0.45);
	assert_int_equal(s.time[5], 1003);

	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->metrics_query(st, 7, "loss", metric_collect, &s, &eb), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.step[0], 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->metrics_query(st, 8, NULL, metric_collect, &s, &eb), 0);
	assert_int_equal(s.n, 0);

	assert_int_equal(ops->metrics_last_step(st, 7, "loss", &last, &eb), 0);
	assert_int_equal(last, 2);
	assert_int_equal(ops->metrics_last_step(st, 7, "none", &last, &eb), 0);
	assert_int_equal(last, -1);
	assert_int_equal(ops->metrics_cursor_get(st, 7, 1, &off, &eb), 0);
	assert_int_equal(off, 4096);
	assert_int_equal(ops->metrics_cursor_get(st, 7, 2, &off, &eb), 0);
	assert_int_equal(off, 10);
	assert_int_equal(ops->metrics_cursor_get(st, 9, 1, &off, &eb), 0);
	assert_int_equal(off, 0);

	/* a large batch, in one append */
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = (struct store_metric){ "big", (int64_t)i, (double)i / 3, (int64_t)i };
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->metrics_append(st, 9, many, ARRAY_SIZE(many), &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->metrics_last_step(st, 9, "big", &last, &eb), 0);
	assert_int_equal(last, (int64_t)ARRAY_SIZE(many) - 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(ops->metrics_query(st, 9, "big", metric_collect, &s, &eb), 0);
	assert_int_equal(s.n, ARRAY_SIZE(many));
	assert_true(s.value[10] == 10.0 / 3);
	ops->close(st);
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
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct audit_seen s = { 0 };
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
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

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
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
}

/* ---- migrations ---- */

/* Writes one row of each sort (documents, metrics, cursors, audit). */
static void fill(const struct store_ops *ops, struct store *st)
{
	struct errbuf eb = ERRBUF_INIT;
	struct store_metric pt = { "loss", 3, 0.75, 42 };

	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "1", "{\"id\":1}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_TOKEN, "h", "{\"t\":1}", &eb), 0);
	assert_int_equal(ops->put(st, STORE_DATASET, "ds", "{\"d\":1}", &eb), 0);
	assert_int_equal(ops->metrics_append(st, 5, &pt, 1, &eb), 0);
	assert_int_equal(ops->metrics_cursor_set(st, 5, 1, 77, &eb), 0);
	audit_add(ops, st, 100, "alice", "/v1/jobs", 201, NULL);
	assert_int_equal(ops->commit(st, &eb), 0);
}

/* Checks that every row fill() wrote is there. */
static void check_filled(const struct store_ops *ops, struct store *st)
{
	struct errbuf eb = ERRBUF_INIT;
	struct seen s = { 0 };
	struct metric_seen ms = { 0 };
	struct audit_seen as = { 0 };
	uint64_t off;

	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.docs[0], "{\"id\":1}");
	assert_int_equal(ops->load(st, STORE_TOKEN, collect, &s, &eb), 0);
	assert_int_equal(ops->load(st, STORE_DATASET, collect, &s, &eb), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.docs[2], "{\"d\":1}");
	assert_int_equal(ops->metrics_query(st, 5, NULL, metric_collect, &ms, &eb), 0);
	assert_int_equal(ms.n, 1);
	assert_true(ms.value[0] == 0.75);
	assert_int_equal(ops->metrics_cursor_get(st, 5, 1, &off, &eb), 0);
	assert_int_equal(off, 77);
	assert_int_equal(ops->audit_query(st, NULL, 0, 10, audit_collect, &as, &eb), 0);
	assert_int_equal(as.n, 1);
	assert_string_equal(as.user[0], "alice");
}

/* A store of a newer master is refused, naming both versions, and left
 * as it was. */
static void test_migrate_newer_refused(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char want[64], out[32];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);
	ops->close(st);
	/* a new store is at this master's version, in one row */
	assert_int_equal(b->sql(b, "SELECT version FROM schema_version", out, sizeof(out)), 0);
	assert_int_equal(strtol(out, NULL, 10), STORE_SCHEMA_VERSION);
	assert_int_equal(b->sql(b, "SELECT count(*) FROM schema_version", out, sizeof(out)), 0);
	assert_string_equal(out, "1");
	assert_int_equal(b->sql(b, "UPDATE schema_version SET version = 99", NULL, 0), 0);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), YERR(IO));
	assert_null(st);
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	assert_non_null(strstr(eb.msg, "schema version 99"));
	snprintf(want, sizeof(want), "this master's %d", STORE_SCHEMA_VERSION);
	assert_non_null(strstr(eb.msg, want));
	assert_int_equal(b->sql(b, "SELECT version FROM schema_version", out, sizeof(out)), 0);
	assert_string_equal(out, "99");
	/* back at this master's version, it opens with every row */
	snprintf(want, sizeof(want), "UPDATE schema_version SET version = %d", STORE_SCHEMA_VERSION);
	assert_int_equal(b->sql(b, want, NULL, 0), 0);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	check_filled(ops, st);
	ops->close(st);
}

/* SQLite only: a store as masters wrote it before schema versions (no
 * schema_version table: version 0) is upgraded and keeps every row; one of
 * a master from before the audit log gets the audit table. */
static void test_sqlite_unversioned(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct audit_seen as = { 0 };
	char out[32];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);
	ops->close(st);
	/* (nor, before versions, the tables of later steps) */
	assert_int_equal(b->sql(b, "DROP TABLE schema_version; DROP TABLE experiments; DROP TABLE templates;"
				" DROP TABLE provisions", NULL, 0), 0);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	check_filled(ops, st);
	ops->close(st);
	assert_int_equal(b->sql(b, "SELECT version FROM schema_version", out, sizeof(out)), 0);
	assert_int_equal(strtol(out, NULL, 10), STORE_SCHEMA_VERSION);

	assert_int_equal(b->sql(b, "DROP TABLE schema_version; DROP TABLE audit; DROP TABLE experiments;"
				" DROP TABLE templates; DROP TABLE provisions;", NULL, 0), 0);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->audit_query(st, NULL, 0, 10, audit_collect, &as, &eb), 0);
	assert_int_equal(as.n, 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	audit_add(ops, st, 100, "alice", "/v1/jobs", 201, NULL);
	assert_int_equal(ops->commit(st, &eb), 0);
	ops->close(st);
}

/* PostgreSQL only: a database holding a table of a store's name but no
 * store (no schema_version) is not taken over: open fails, naming it. */
static void test_pg_foreign_tables_refused(void **state)
{
	struct backend *b = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char out[32];
	int created;

	assert_int_equal(b->sql(b, "CREATE TABLE jobs (x integer)", NULL, 0), 0);
	assert_int_equal(b->ops->open(b->where, &st, &created, &eb), YERR(IO));
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	assert_non_null(strstr(eb.msg, "\"jobs\" already exists"));
	assert_int_equal(b->sql(b, "SELECT count(*) FROM pg_tables WHERE tablename = 'schema_version'", out,
				sizeof(out)), 0);
	assert_string_equal(out, "0"); /* rolled back whole */
}

/* ---- PostgreSQL only ---- */

/* The connection strings messages show, without their passwords. */
static void test_pg_display(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "postgres://yard:s3cret@db.example:5433/yard", "postgres://yard@db.example:5433/yard" },
		{ "postgresql://yard@db/yard", "postgresql://yard@db/yard" },
		{ "postgresql://u:p@h/d?sslmode=require&password=s3cret&application_name=x",
		  "postgresql://u@h/d?sslmode=require&application_name=x" },
		{ "postgresql:///yard?host=/tmp/sock&password=s3cret", "postgresql:///yard?host=/tmp/sock" },
		{ "postgres://h", "postgres://h" },
		{ "postgres://u:p%40x@h/d", "postgres://u@h/d" },
		{ "host=db dbname=yard user=u password=s3cret", "user=u dbname=yard host=db" },
		{ "host=db password='a b' sslpassword=k", "host=db" },
		{ "dbname='my db'", "dbname='my db'" },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = store_pg_display(cases[i].in);
		if (strcmp(got, cases[i].out))
			fprintf(stderr, "store_pg_display('%s'): '%s', expected '%s'\n", cases[i].in, got,
				cases[i].out);
		assert_string_equal(got, cases[i].out);
		assert_null(strstr(got, "s3cret"));
		free(got);
	}
}

/* A wrong password: the error names the store, never the password. */
static void test_pg_error_hides_password(void **state)
{
	struct backend *b = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	const char *at = strchr(b->where + strlen("postgres://"), '@');
	char *url, *shown;
	int created;

	assert_non_null(at);
	url = xasprintf("postgres://yard:not-the-password%s", at);
	shown = xasprintf("'postgres://yard%s'", at);
	assert_int_equal(store_pg_ops.open(url, &st, &created, &eb), YERR(IO));
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	assert_null(strstr(eb.msg, "not-the-password"));
	assert_non_null(strstr(eb.msg, shown));
	assert_non_null(strstr(eb.msg, "password authentication failed"));
	free(url);
	free(shown);
	/* a string libpq cannot parse */
	assert_int_equal(store_pg_ops.open("host=db password=x nosuchkeyword=1", &st, &created, &eb),
			 YERR(BAD_REQUEST));
	assert_null(strstr(eb.msg, "password=x"));
}

/* Ends the store's connection from the server's side, as a restart does. */
static void terminate_store_connections(struct backend *b)
{
	char out[16];

	assert_int_equal(b->sql(b, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
				   " WHERE application_name = 'yard-master'", out, sizeof(out)), 0);
	assert_true(strtol(out, NULL, 10) >= 1);
}

/* A lost connection: ops fail with an error naming the store, a
 * transaction in flight is not stored, and the next begin() connects
 * again. */
static void test_pg_connection_lost(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct seen s = { 0 };
	char *v, *name = store_pg_display(b->where);
	char *named = xasprintf("store '%s'", name);
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);

	/* outside a transaction: the op fails, the next begin reconnects */
	terminate_store_connections(b);
	assert_int_equal(ops->get_meta(st, "x", &v, &eb), YERR(IO));
	fprintf(stderr, "failed as expected: %s\n", eb.msg);
	assert_non_null(strstr(eb.msg, named));
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "2", "{\"id\":2}", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);

	/* an idle connection whose server went away: begin() reconnects */
	terminate_store_connections(b);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "3", "{\"id\":3}", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);

	/* inside a transaction: the transaction is lost, commit fails */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "4", "{\"id\":4}", &eb), 0);
	terminate_store_connections(b);
	errbuf_reset(&eb);
	ops->put(st, STORE_JOB, "5", "{\"id\":5}", &eb);
	assert_int_equal(ops->commit(st, &eb), YERR(IO));
	fprintf(stderr, "failed as expected: %s\n", eb.msg);
	assert_non_null(strstr(eb.msg, named));
	ops->rollback(st);

	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.keys[2], "3"); /* 1 (fill), 2 and 3; not 4 nor 5 */
	ops->close(st);
	free(name);
	free(named);
}

/* A statement that fails inside a transaction dooms it: commit reports
 * the failure, and nothing of the transaction is stored. */
static void test_pg_failed_statement_fails_commit(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	struct seen s = { 0 };
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "1", "{}", &eb), 0);
	/* a write's failure is seen at once or, sent in the pipeline, later */
	ops->put(st, STORE_JOB, "not-a-number", "{}", &eb);
	ops->put(st, STORE_JOB, "2", "{}", &eb);
	errbuf_reset(&eb);
	assert_int_equal(ops->commit(st, &eb), YERR(IO));
	fprintf(stderr, "failed as expected: %s\n", eb.msg);
	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	assert_int_equal(s.n, 0);
	/* and the store goes on */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "1", "{}", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	ops->close(st);
}

/* ---- blobs ---- */

/* Reads [off, off + len) of a blob whole, through as many reads as it
 * takes, into out (len bytes); returns the bytes read (fewer at its end). */
static uint64_t blob_read_all(const struct store_ops *ops, struct store *st, const char *name,
			      uint64_t off, uint64_t len, char *out)
{
	struct errbuf eb = ERRBUF_INIT;
	uint64_t got = 0;

	while (got < len) {
		struct store_blob_range br;
		assert_int_equal(ops->blob_read(st, name, off + got, len - got, &br, &eb), 0);
		if (br.fd >= 0) {
			assert_null(br.buf);
			assert_int_equal(pread(br.fd, out + got, br.len, (off_t)(off + got)), (ssize_t)br.len);
			close(br.fd);
		} else {
			assert_true(br.len <= STORE_BLOB_READ_MAX);
			if (br.len)
				memcpy(out + got, br.buf, br.len);
			free(br.buf);
		}
		assert_true(br.len <= len - got);
		if (!br.len)
			break;
		got += br.len;
	}
	return got;
}

/* The size of a blob, or -1 when there is none. */
static int64_t blob_size_or_none(const struct store_ops *ops, struct store *st, const char *name)
{
	struct errbuf eb = ERRBUF_INIT;
	uint64_t size = 99;
	int rc = ops->blob_size(st, name, &size, &eb);

	if (rc == YERR(NOT_FOUND)) {
		assert_int_equal(size, 0);
		return -1;
	}
	assert_int_equal(rc, 0);
	return (int64_t)size;
}

/* Appends by offset, as logs.c ships them: a gap is refused with the size
 * held, bytes held already are skipped, and reads give any range. */
static void test_blob_append_read(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store_blob_range br;
	struct store *st;
	uint64_t have = 0;
	char out[64];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/7.stdout"), -1);
	assert_int_equal(ops->blob_read(st, "logs/7.stdout", 0, 10, &br, &eb), YERR(NOT_FOUND));
	errbuf_reset(&eb);
	assert_int_equal(ops->begin(st, &eb), 0);
	/* a first chunk that does not start at 0 leaves a hole: refused */
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 3, "abc", 3, &have, &eb), YERR(CONFLICT));
	assert_int_equal(have, 0);
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	errbuf_reset(&eb);
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 0, "hello", 5, &have, &eb), 0);
	assert_int_equal(have, 5);
	/* overlapping: "lo" is held, " wor" is new */
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 3, "lo wor", 6, &have, &eb), 0);
	assert_int_equal(have, 9);
	/* a resend of held bytes: nothing */
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 1, "ell", 3, &have, &eb), 0);
	assert_int_equal(have, 9);
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 20, "xyz", 3, &have, &eb), YERR(CONFLICT));
	assert_int_equal(have, 9);
	errbuf_reset(&eb);
	/* inside the transaction its reads see it */
	assert_int_equal(blob_size_or_none(ops, st, "logs/7.stdout"), 9);
	assert_int_equal(ops->blob_append(st, "logs/7.stderr", 0, "e", 1, &have, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 9, "ld\n", 3, &have, &eb), 0);
	assert_int_equal(have, 12);
	assert_int_equal(ops->commit(st, &eb), 0);
	ops->close(st);

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/7.stdout"), 12);
	assert_int_equal(blob_size_or_none(ops, st, "logs/7.stderr"), 1);
	memset(out, 0, sizeof(out));
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 0, 100, out), 12);
	assert_string_equal(out, "hello world\n");
	/* ranges inside one append, across appends, at and past the end */
	memset(out, 0, sizeof(out));
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 3, 4, out), 4);
	assert_string_equal(out, "lo w");
	memset(out, 0, sizeof(out));
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 8, 3, out), 3);
	assert_string_equal(out, "rld");
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 12, 5, out), 0);
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 50, 5, out), 0);
	/* and it goes on from where it is */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/7.stdout", 10, "d\nmore", 6, &have, &eb), 0);
	assert_int_equal(have, 16);
	assert_int_equal(ops->commit(st, &eb), 0);
	memset(out, 0, sizeof(out));
	assert_int_equal(blob_read_all(ops, st, "logs/7.stdout", 0, 100, out), 16);
	assert_string_equal(out, "hello world\nmore");
	ops->close(st);
}

/* Many logs appended in one batch, each more than once (the batch finds
 * each file again among hundreds), then a batch rolled back: every log is
 * cut back to what the last commit held. */
static void test_blob_append_many_in_a_batch(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	uint64_t have;
	char name[64];
	int created;
	enum { N = 300 };

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "logs/%d.stdout", 1000 + i);
			assert_int_equal(ops->blob_append(st, name, (uint64_t)round * 3, "ab\n", 3, &have, &eb), 0);
			assert_int_equal(have, (uint64_t)(round + 1) * 3);
		}
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "logs/%d.stdout", 1000 + i);
		assert_int_equal(ops->blob_append(st, name, 6, "lost", 4, &have, &eb), 0);
		/* sent again in the same batch: already held */
		assert_int_equal(ops->blob_append(st, name, 6, "lost", 4, &have, &eb), 0);
		assert_int_equal(have, 10);
	}
	ops->rollback(st);
	for (int i = 0; i < N; i += 37) {
		snprintf(name, sizeof(name), "logs/%d.stdout", 1000 + i);
		assert_int_equal(blob_size_or_none(ops, st, name), 6);
	}
	ops->close(st);
}

/* blob_sync, in a transaction and outside one: a missing blob is nothing
 * to do; a blob synced in a batch that is rolled back keeps what an earlier
 * commit held, and what the batch appended is cut back. */
static void test_blob_sync(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	uint64_t have;
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->blob_sync(st, "logs/9.stdout", &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_sync(st, "logs/9.stdout", &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/9.stdout", 0, "abc", 3, &have, &eb), 0);
	assert_int_equal(ops->blob_sync(st, "logs/9.stdout", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/9.stdout"), 3);

	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_sync(st, "logs/9.stdout", &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/9.stdout", 3, "def", 3, &have, &eb), 0);
	assert_int_equal(have, 6);
	ops->rollback(st);
	assert_int_equal(blob_size_or_none(ops, st, "logs/9.stdout"), 3);

	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/9.stdout", 3, "def", 3, &have, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->blob_sync(st, "logs/9.stdout", &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/9.stdout"), 6);
	ops->close(st);
}

/* A temp file of n bytes, a pattern that seed changes, on the store's
 * filesystem (SQLite renames it into its dir). Caller frees the path. */
static char *temp_file(struct backend *b, size_t n, unsigned seed)
{
	char *path = xasprintf("%s/put.XXXXXX", b->ops == &store_sqlite_ops ? b->dir : "/tmp");
	int fd = mkstemp(path);
	char *data = xmalloc(n ? n : 1);

	assert_true(fd >= 0);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)((i * 131 + seed) % 251);
	assert_int_equal(write_all(fd, data, n), 0);
	close(fd);
	free(data);
	return path;
}

/* Archives put whole from a file (more than one piece of PostgreSQL's),
 * idempotently by name, read back in any range; an empty one exists. */
static void test_blob_put_file(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	const size_t n = (3 << 20) + 17;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char *path, *out = xmalloc(n + 10), small[16];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	path = temp_file(b, n, 1);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_put_file(st, "code/aa.tar.gz", path, &eb), 0);
	assert_int_equal(path_exists(path), 0); /* taken */
	free(path);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "code/aa.tar.gz"), (int64_t)n);
	/* the same name again (the same digest): kept as it is */
	path = temp_file(b, 100, 2);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_put_file(st, "code/aa.tar.gz", path, &eb), 0);
	assert_int_equal(path_exists(path), 0);
	free(path);
	/* an empty one */
	path = temp_file(b, 0, 0);
	assert_int_equal(ops->blob_put_file(st, "code/empty.tar.gz", path, &eb), 0);
	free(path);
	assert_int_equal(ops->commit(st, &eb), 0);
	ops->close(st);

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "code/aa.tar.gz"), (int64_t)n);
	assert_int_equal(blob_size_or_none(ops, st, "code/empty.tar.gz"), 0);
	assert_int_equal(blob_size_or_none(ops, st, "code/bb.tar.gz"), -1);
	assert_int_equal(blob_read_all(ops, st, "code/aa.tar.gz", 0, n + 10, out), n);
	for (size_t i = 0; i < n; i++)
		if (out[i] != (char)((i * 131 + 1) % 251))
			fail_msg("byte %zu of the archive: %d, expected %d", i, out[i], (char)((i * 131 + 1) % 251));
	/* a range across the boundary of two pieces */
	assert_int_equal(blob_read_all(ops, st, "code/aa.tar.gz", (1 << 20) - 3, 10, small), 10);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(small[i], (char)((((1 << 20) - 3 + i) * 131 + 1) % 251));
	assert_int_equal(blob_read_all(ops, st, "code/empty.tar.gz", 0, 10, small), 0);
	ops->close(st);
	free(out);
}

/* Chunks put from memory, idempotently by name, and deleted: in a
 * transaction or, as the garbage collection after a commit does, outside
 * one. */
static void test_blob_put_delete(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	const size_t n = (2 << 20) + 5;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char *data = xmalloc(n), *out = xmalloc(n);
	int created;

	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i % 253);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_put(st, "blobs/c1", data, n, &eb), 0);
	assert_int_equal(ops->blob_put(st, "blobs/c1", "other", 5, &eb), 0); /* held: kept */
	assert_int_equal(ops->blob_put(st, "manifests/m1.json", "{}", 2, &eb), 0);
	assert_int_equal(ops->blob_put(st, "blobs/empty", "", 0, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/c1"), (int64_t)n);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/empty"), 0);
	assert_int_equal(blob_read_all(ops, st, "blobs/c1", 0, n, out), n);
	assert_memory_equal(out, data, n);
	assert_int_equal(blob_read_all(ops, st, "manifests/m1.json", 0, 10, out), 2);
	assert_memory_equal(out, "{}", 2);
	/* deleted in a transaction, and outside one; an absent one is no error */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_delete(st, "blobs/c1", &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(ops->blob_delete(st, "manifests/m1.json", &eb), 0);
	assert_int_equal(ops->blob_delete(st, "blobs/absent", &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/c1"), -1);
	assert_int_equal(blob_size_or_none(ops, st, "manifests/m1.json"), -1);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/empty"), 0);
	ops->close(st);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/c1"), -1);
	/* and put again once gone */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_put(st, "blobs/c1", data, 100, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/c1"), 100);
	ops->close(st);
	free(data);
	free(out);
}

/* PostgreSQL: blobs are rows of the transaction, so a rolled-back batch and
 * one whose commit fails leave none of its appends, archives and chunks,
 * and remove none it deleted. */
static void test_pg_blob_rollback(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	uint64_t have;
	char *path, out[16];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/1.stdout", 0, "kept", 4, &have, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);

	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/1.stdout", 4, " lost", 5, &have, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/2.stdout", 0, "lost", 4, &have, &eb), 0);
	path = temp_file(b, 5000, 3);
	assert_int_equal(ops->blob_put_file(st, "code/cc.tar.gz", path, &eb), 0);
	free(path);
	assert_int_equal(ops->blob_put(st, "blobs/dd", "chunk", 5, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "code/cc.tar.gz"), 5000);
	ops->rollback(st);
	assert_int_equal(blob_size_or_none(ops, st, "blobs/dd"), -1);
	/* nor is a delete of a rolled-back batch done */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_delete(st, "logs/1.stdout", &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/1.stdout"), -1);
	ops->rollback(st);
	assert_int_equal(blob_size_or_none(ops, st, "logs/1.stdout"), 4);
	assert_int_equal(blob_size_or_none(ops, st, "logs/2.stdout"), -1);
	assert_int_equal(blob_size_or_none(ops, st, "code/cc.tar.gz"), -1);

	/* a failed statement in the batch: its commit fails, with its blobs */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/1.stdout", 4, " lost", 5, &have, &eb), 0);
	ops->put(st, STORE_JOB, "not-a-number", "{}", &eb);
	errbuf_reset(&eb);
	assert_int_not_equal(ops->commit(st, &eb), 0);
	errbuf_reset(&eb);
	assert_int_equal(blob_size_or_none(ops, st, "logs/1.stdout"), 4);
	memset(out, 0, sizeof(out));
	assert_int_equal(blob_read_all(ops, st, "logs/1.stdout", 0, 10, out), 4);
	assert_string_equal(out, "kept");
	assert_int_equal(b->sql(b, "SELECT count(*) FROM blobs", out, sizeof(out)), 0);
	assert_string_equal(out, "1");
	ops->close(st);
}

/* PostgreSQL: the pieces' TOAST is compressed with lz4 where the server
 * has it (the test's server does: Debian builds it with lz4). */
static void test_pg_blobs_lz4(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char out[16];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	ops->close(st);
	assert_int_equal(b->sql(b, "SELECT 'lz4' = ANY (enumvals) FROM pg_settings"
				   " WHERE name = 'default_toast_compression'", out, sizeof(out)), 0);
	assert_string_equal(out, "t");
	assert_int_equal(b->sql(b, "SELECT attcompression FROM pg_attribute WHERE attrelid ="
				   " 'blobs'::regclass AND attname = 'data'", out, sizeof(out)), 0);
	assert_string_equal(out, "l");
}

/* A store at schema version 1 (before blobs) is upgraded to this master's,
 * keeping its rows, and then takes blobs. */
static void test_upgrade_from_v1(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	uint64_t have;
	char out[32];
	int created;

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);
	ops->close(st);
	if (b->ops == &store_pg_ops)
		assert_int_equal(b->sql(b, "DROP TABLE blobs; DROP TABLE leader;"
					" DROP FUNCTION yard_fence(bigint, bigint)", NULL, 0), 0);
	assert_int_equal(b->sql(b, "DROP TABLE experiments; DROP TABLE templates; DROP TABLE provisions", NULL, 0), 0);
	assert_int_equal(b->sql(b, "UPDATE schema_version SET version = 1", NULL, 0), 0);
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	assert_int_equal(b->sql(b, "SELECT version FROM schema_version", out, sizeof(out)), 0);
	assert_int_equal(strtol(out, NULL, 10), STORE_SCHEMA_VERSION);
	check_filled(ops, st);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/5.stderr", 0, "x", 1, &have, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	assert_int_equal(blob_size_or_none(ops, st, "logs/5.stderr"), 1);
	/* and version 4's experiments, numeric keys loaded in order */
	{
		struct seen s = { 0 };
		assert_int_equal(ops->begin(st, &eb), 0);
		assert_int_equal(ops->put(st, STORE_EXPERIMENT, "10", "{\"e\":10}", &eb), 0);
		assert_int_equal(ops->put(st, STORE_EXPERIMENT, "9", "{\"e\":9}", &eb), 0);
		assert_int_equal(ops->commit(st, &eb), 0);
		assert_int_equal(ops->load(st, STORE_EXPERIMENT, collect, &s, &eb), 0);
		assert_int_equal(s.n, 2);
		assert_string_equal(s.keys[0], "9");
		assert_string_equal(s.docs[1], "{\"e\":10}");
	}
	/* and version 5's templates, named */
	{
		struct seen s = { 0 };
		assert_int_equal(ops->begin(st, &eb), 0);
		assert_int_equal(ops->put(st, STORE_TEMPLATE, "retrain", "{\"t\":1}", &eb), 0);
		assert_int_equal(ops->commit(st, &eb), 0);
		assert_int_equal(ops->load(st, STORE_TEMPLATE, collect, &s, &eb), 0);
		assert_int_equal(s.n, 1);
		assert_string_equal(s.keys[0], "retrain");
	}
	/* and version 6's provisioning requests, by number */
	{
		struct seen s = { 0 };
		assert_int_equal(ops->begin(st, &eb), 0);
		assert_int_equal(ops->put(st, STORE_PROVISION, "10", "{\"r\":10}", &eb), 0);
		assert_int_equal(ops->put(st, STORE_PROVISION, "9", "{\"r\":9}", &eb), 0);
		assert_int_equal(ops->commit(st, &eb), 0);
		assert_int_equal(ops->load(st, STORE_PROVISION, collect, &s, &eb), 0);
		assert_int_equal(s.n, 2);
		assert_string_equal(s.keys[0], "9");
		assert_string_equal(s.docs[1], "{\"r\":10}");
	}
	ops->close(st);
}

/* ---- backups: snapshot, held, restore ---- */

/* The job rows' keys of the store at where, joined by ','. */
static void job_keys(const struct store_ops *ops, const char *where, char *out, size_t len)
{
	struct errbuf eb = ERRBUF_INIT;
	struct seen s = { 0 };
	struct store *st;
	int created;

	assert_int_equal(ops->open(where, &st, &created, &eb), 0);
	assert_int_equal(ops->load(st, STORE_JOB, collect, &s, &eb), 0);
	out[0] = 0;
	for (int i = 0; i < s.n && i < 8; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", s.keys[i]);
	ops->close(st);
}

/* A snapshot is the store as of one moment: taken while a master has it
 * open and another connection's transaction is in flight, it holds what
 * was committed before and nothing after (with PostgreSQL, blobs too). A
 * restore over a store is refused and touches nothing unless told where
 * to keep the old one; a damaged snapshot is refused before anything is
 * touched. */
static void test_snapshot_restore(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char tmp[64] = "/tmp/yard-snap-XXXXXX", *snap, *bad, out[64];
	int64_t version = -1;
	uint64_t have;
	bool held = true;
	int created;

	assert_non_null(mkdtemp(tmp));
	snap = xasprintf("%s/snapshot", tmp);
	bad = xasprintf("%s/bad", tmp);
	/* nothing to snapshot yet */
	assert_int_equal(ops->held(b->where, &held, &eb), 0);
	assert_false(held);
	assert_int_equal(ops->snapshot(b->where, snap, &version, &eb), YERR(NOT_FOUND));
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	errbuf_reset(&eb);

	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->blob_append(st, "logs/1.stdout", 0, "hello\n", 6, &have, &eb), 0);
	assert_int_equal(ops->commit(st, &eb), 0);
	/* in flight while the snapshot is taken: not in it */
	assert_int_equal(ops->begin(st, &eb), 0);
	assert_int_equal(ops->put(st, STORE_JOB, "2", "{\"id\":2}", &eb), 0);
	assert_int_equal(ops->get_meta(st, "x", &(char *){ NULL }, &eb), 0); /* the writes reach the server */
	assert_int_equal(ops->snapshot(b->where, snap, &version, &eb), 0);
	assert_int_equal(version, STORE_SCHEMA_VERSION);
	assert_int_equal(ops->commit(st, &eb), 0);
	ops->close(st);

	assert_int_equal(ops->held(b->where, &held, &eb), 0);
	assert_true(held);
	assert_int_equal(ops->restore(b->where, snap, NULL, &eb), YERR(CONFLICT));
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	errbuf_reset(&eb);
	job_keys(ops, b->where, out, sizeof(out));
	assert_string_equal(out, "1,2");
	/* a damaged snapshot: refused, nothing moved */
	assert_int_equal(write_file_atomic(bad, "SQLite format 3\0 and then garbage", 34, 0600), 0);
	assert_int_not_equal(ops->restore(b->where, bad, "aside-bad", &eb), 0);
	fprintf(stderr, "refused as expected: %s\n", eb.msg);
	errbuf_reset(&eb);
	job_keys(ops, b->where, out, sizeof(out));
	assert_string_equal(out, "1,2");

	assert_int_equal(ops->restore(b->where, snap, "aside-1", &eb), 0);
	job_keys(ops, b->where, out, sizeof(out));
	assert_string_equal(out, "1");
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	assert_int_equal(created, 0);
	check_filled(ops, st);
	if (!ops->blobs_are_files) { /* the log is in the snapshot */
		char text[16];
		assert_int_equal(blob_read_all(ops, st, "logs/1.stdout", 0, sizeof(text), text), 6);
		assert_memory_equal(text, "hello\n", 6);
	}
	ops->close(st);
	/* the store it replaced, kept aside whole */
	if (ops == &store_pg_ops) {
		assert_int_equal(b->sql(b, "SELECT string_agg(k::text, ',' ORDER BY k) FROM \"aside-1\".jobs", out,
					sizeof(out)), 0);
		assert_string_equal(out, "1,2");
		assert_int_equal(b->sql(b, "SET client_min_messages = warning; DROP SCHEMA \"aside-1\" CASCADE", NULL, 0),
				 0);
	} else {
		char *aside = xasprintf("%s/aside-1", b->where);
		job_keys(ops, aside, out, sizeof(out));
		assert_string_equal(out, "1,2");
		assert_false(path_exists(snap)); /* renamed into place */
		free(aside);
	}
	rm_rf(tmp);
	free(snap);
	free(bad);
}

/* SQLite: a snapshot made by root beside a master run as a service user
 * leaves no -wal or -shm file the master could not open (SQLite gives
 * those it makes as root to the database's owner). */
static void test_sqlite_snapshot_owner(void **state)
{
	struct backend *b = *state;
	const struct store_ops *ops = b->ops;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char *db = xasprintf("%s/state.db", b->dir), *snap = xasprintf("%s/snap", b->dir);
	int64_t version;
	int created;

	if (geteuid() != 0) {
		fprintf(stderr, "runs as uid %u: the case needs root to own files as another user\n",
			(unsigned)geteuid());
		fail();
	}
	assert_int_equal(ops->open(b->where, &st, &created, &eb), 0);
	fill(ops, st);
	ops->close(st); /* closed: the -wal and -shm are gone */
	assert_int_equal(chown_tree(b->dir, 65534, 65534), 0);
	assert_int_equal(ops->snapshot(b->where, snap, &version, &eb), 0);
	for (int i = 0; i < 2; i++) {
		char *p = xasprintf("%s%s", db, i ? "-shm" : "-wal");
		struct stat sb;
		/* SQLite makes them for a reader of a WAL store, and leaves them */
		assert_int_equal(lstat(p, &sb), 0);
		assert_int_equal(sb.st_uid, 65534);
		assert_int_equal(sb.st_gid, 65534);
		free(p);
	}
	free(db);
	free(snap);
}

/* PostgreSQL: pg_dump gets the password by its environment, never in its
 * argv (which ps shows to every user); a failing pg_dump's message is in
 * the error, without the password. A wrapper first on PATH records what
 * the real pg_dump is run with. */
static void test_pg_tools_hide_password(void **state)
{
	struct backend *b = *state;
	const char *at = strchr(b->where + strlen("postgres://"), '@'), *colon;
	struct errbuf eb = ERRBUF_INIT;
	struct store *st;
	char tmp[64] = "/tmp/yard-pgtool-XXXXXX", *wrapper, *script, *path, *old_path, *password, *file;
	struct strbuf got = STRBUF_INIT;
	int64_t version;
	int created;

	assert_non_null(at);
	colon = strchr(b->where + strlen("postgres://"), ':');
	assert_true(colon && colon < at);
	password = xstrndup(colon + 1, (size_t)(at - colon - 1));
	assert_non_null(mkdtemp(tmp));
	wrapper = xasprintf("%s/pg_dump", tmp);
	script = xasprintf("#!/bin/sh\nprintf '%%s\\n' \"$0\" \"$@\" >%s/argv\nprintf '%%s' \"$PGPASSWORD\" >%s/env\n"
			   "exec /usr/bin/pg_dump \"$@\"\n", tmp, tmp);
	assert_int_equal(write_file_atomic(wrapper, script, strlen(script), 0755), 0);
	old_path = xstrdup(getenv("PATH"));
	path = xasprintf("%s:%s", tmp, old_path);
	setenv("PATH", path, 1);
	assert_int_equal(store_pg_ops.open(b->where, &st, &created, &eb), 0);
	store_pg_ops.close(st);
	file = xasprintf("%s/dump", tmp);
	assert_int_equal(store_pg_ops.snapshot(b->where, file, &version, &eb), 0);
	free(file);
	file = xasprintf("%s/argv", tmp);
	assert_int_equal(strbuf_read_file(&got, file, 65536), (int)got.len);
	fprintf(stderr, "pg_dump ran with:\n%s", got.buf);
	assert_null(strstr(got.buf, password));
	assert_non_null(strstr(got.buf, "\n-d\npostgres://yard@"));
	strbuf_setlen(&got, 0);
	free(file);
	file = xasprintf("%s/env", tmp);
	assert_true(strbuf_read_file(&got, file, 65536) >= 0);
	assert_string_equal(got.buf, password);
	/* and a failing one: its message, no password */
	free(file);
	file = xasprintf("%s/no-such-dir/dump", tmp);
	assert_int_equal(store_pg_ops.snapshot(b->where, file, &version, &eb), YERR(IO));
	fprintf(stderr, "failed as expected: %s\n", eb.msg);
	assert_non_null(strstr(eb.msg, "pg_dump of store 'postgres://yard@"));
	assert_non_null(strstr(eb.msg, "no-such-dir"));
	assert_null(strstr(eb.msg, password));
	setenv("PATH", old_path, 1);
	rm_rf(tmp);
	strbuf_release(&got);
	free(file);
	free(old_path);
	free(path);
	free(script);
	free(wrapper);
	free(password);
}

/* a case on one backend, named after both */
#define ON(b, f) { #b ": " #f, f, setup, teardown, &b }
#define BOTH(f) ON(sqlite_backend, f), ON(pg_backend, f)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_write_reopen_load),
		BOTH(test_load_stops),
		BOTH(test_reads_see_the_transaction),
		BOTH(test_metrics),
		BOTH(test_audit_append_query),
		BOTH(test_migrate_newer_refused),
		BOTH(test_blob_append_read),
		BOTH(test_blob_append_many_in_a_batch),
		BOTH(test_blob_sync),
		BOTH(test_blob_put_file),
		BOTH(test_blob_put_delete),
		ON(pg_backend, test_pg_blob_rollback),
		ON(pg_backend, test_pg_blobs_lz4),
		BOTH(test_upgrade_from_v1),
		ON(sqlite_backend, test_sqlite_unversioned),
		ON(pg_backend, test_pg_foreign_tables_refused),
		cmocka_unit_test(test_pg_display),
		ON(pg_backend, test_pg_error_hides_password),
		ON(pg_backend, test_pg_connection_lost),
		ON(pg_backend, test_pg_failed_statement_fails_commit),
		BOTH(test_snapshot_restore),
		ON(sqlite_backend, test_sqlite_snapshot_owner),
		ON(pg_backend, test_pg_tools_hide_password),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
