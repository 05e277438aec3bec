/* Unit tests for src/master/metrics.h on a real SQLite store: batches stored
 * once by offset, steps given to points without one, the job document. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/metrics.h"

struct fixture {
	char dir[32];
	struct master m;
	struct job job;
	struct task tasks[3];
	struct task *ptasks[3];
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct errbuf eb = ERRBUF_INIT;
	int created;
	static const char *const roles[] = { "worker", "worker", "worker" };
	static const unsigned idx[] = { 0, 1, 0 }, attempt[] = { 0, 0, 1 };

	snprintf(f->dir, sizeof(f->dir), "/tmp/yard-metrics-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->m.sops = &store_sqlite_ops;
	assert_int_equal(f->m.sops->open(f->dir, &f->m.store, &created, &eb), 0);
	f->job.id = 7;
	f->job.tasks = f->ptasks;
	f->job.ntasks = 3;
	for (int i = 0; i < 3; i++) {
		f->tasks[i].id = 40 + (uint64_t)i;
		f->tasks[i].job = &f->job;
		f->tasks[i].role = (char *)roles[i];
		f->tasks[i].index = idx[i];
		f->tasks[i].attempt = attempt[i];
		f->ptasks[i] = &f->tasks[i];
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->m.txn_open)
		f->m.sops->rollback(f->m.store);
	f->m.sops->close(f->m.store);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static void commit(struct fixture *f)
{
	struct errbuf eb = ERRBUF_INIT;

	if (!f->m.txn_open)
		return;
	assert_int_equal(f->m.batch_err, 0);
	assert_int_equal(f->m.sops->commit(f->m.store, &eb), 0);
	f->m.txn_open = false;
}

/* Posts a batch given as JSON text; OUT *stored. */
static int post(struct fixture *f, int task, enum log_stream s, uint64_t offset, const char *body,
		uint64_t *stored)
{
	struct errbuf eb = ERRBUF_INIT;
	json_error_t jerr;
	json_t *doc = json_loads(body, 0, &jerr);
	int rc;

	if (!doc)
		fail_msg("bad test JSON: %s: %s", jerr.text, body);
	rc = metrics_post(&f->m, &f->tasks[task], s, offset, doc, stored, &eb);
	json_decref(doc);
	return rc;
}

/* The job document, parsed. */
static json_t *job_doc(struct fixture *f, const char *role, unsigned index, const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	json_error_t jerr;
	json_t *doc;

	assert_int_equal(metrics_job_doc(&f->m, &f->job, role, index, name, &sb, &eb), 0);
	doc = json_loadb(sb.buf, sb.len, 0, &jerr);
	if (!doc)
		fail_msg("the document is not JSON (%s): %s", jerr.text, sb.buf);
	strbuf_release(&sb);
	return doc;
}

/* The steps (or values) of one series of the document, as text "0 1 2". */
static char *series_column(json_t *doc, size_t i, size_t col)
{
	struct strbuf sb = STRBUF_INIT;
	json_t *pts = json_object_get(json_array_get(json_object_get(doc, "series"), i), "points"), *p;
	size_t k;

	json_array_foreach(pts, k, p)
		strbuf_addf(&sb, "%s%g", k ? " " : "", json_number_value(json_array_get(p, col)));
	return strbuf_detach(&sb, NULL);
}

static void assert_column(json_t *doc, size_t i, size_t col, const char *want)
{
	char *got = series_column(doc, i, col);
	assert_string_equal(got, want);
	free(got);
}

/* A batch is stored once: a resend is acknowledged, an overlap or a gap is a
 * conflict that names the stored offset. */
static void test_offsets(void **state)
{
	struct fixture *f = *state;
	uint64_t stored;
	json_t *doc;

	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 100, \"points\": [{\"name\": \"loss\", "
			      "\"step\": 0, \"value\": 1.5, \"time\": 11}]}", &stored), 0);
	assert_int_equal(stored, 100);
	/* the same batch again, before and after the commit */
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 100, \"points\": [{\"name\": \"loss\", "
			      "\"step\": 0, \"value\": 1.5, \"time\": 11}]}", &stored), 0);
	assert_int_equal(stored, 100);
	commit(f);
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 60, \"points\": []}", &stored), 0);
	assert_int_equal(stored, 100);
	/* overlapping and leaving a gap */
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 200, \"points\": []}", &stored), YERR(CONFLICT));
	assert_int_equal(stored, 100);
	assert_int_equal(post(f, 0, LOG_STDOUT, 150, "{\"end\": 200, \"points\": []}", &stored), YERR(CONFLICT));
	assert_int_equal(stored, 100);
	/* the next batch; stderr has a cursor of its own */
	assert_int_equal(post(f, 0, LOG_STDOUT, 100, "{\"end\": 200, \"points\": [{\"name\": \"loss\", "
			      "\"step\": 1, \"value\": 0.5, \"time\": 12}]}", &stored), 0);
	assert_int_equal(stored, 200);
	assert_int_equal(post(f, 0, LOG_STDERR, 0, "{\"end\": 10, \"points\": [{\"name\": \"loss\", "
			      "\"step\": 2, \"value\": 0.25, \"time\": 13}]}", &stored), 0);
	assert_int_equal(stored, 10);
	commit(f);
	doc = job_doc(f, NULL, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 1);
	assert_column(doc, 0, 0, "0 1 2");
	assert_column(doc, 0, 1, "1.5 0.5 0.25");
	assert_column(doc, 0, 2, "11 12 13");
	json_decref(doc);
}

/* A rolled-back batch stores neither the points nor the cursor. */
static void test_rollback(void **state)
{
	struct fixture *f = *state;
	uint64_t stored;
	json_t *doc;

	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 5, \"points\": [{\"name\": \"a\", "
			      "\"value\": 1, \"time\": 1}]}", &stored), 0);
	f->m.sops->rollback(f->m.store);
	f->m.txn_open = false;
	doc = job_doc(f, NULL, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 0);
	json_decref(doc);
	assert_int_equal(post(f, 0, LOG_STDOUT, 5, "{\"end\": 9, \"points\": []}", &stored), YERR(CONFLICT));
	assert_int_equal(stored, 0);
}

/* Points without a step continue their series: largest step + 1. */
static void test_assigned_steps(void **state)
{
	struct fixture *f = *state;
	uint64_t stored;
	json_t *doc;

	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 10, \"points\": ["
			      "{\"name\": \"loss\", \"value\": 1, \"time\": 1},"
			      "{\"name\": \"acc\", \"step\": null, \"value\": 2, \"time\": 1},"
			      "{\"name\": \"loss\", \"value\": 3, \"time\": 1},"
			      "{\"name\": \"acc\", \"step\": 10, \"value\": 4, \"time\": 1},"
			      "{\"name\": \"acc\", \"value\": 5, \"time\": 1}]}", &stored), 0);
	commit(f);
	/* the next batch continues from the store; another task starts at 0 */
	assert_int_equal(post(f, 0, LOG_STDERR, 0, "{\"end\": 10, \"points\": ["
			      "{\"name\": \"loss\", \"value\": 6, \"time\": 2},"
			      "{\"name\": \"acc\", \"value\": 7, \"time\": 2}]}", &stored), 0);
	assert_int_equal(post(f, 1, LOG_STDOUT, 0, "{\"end\": 10, \"points\": ["
			      "{\"name\": \"loss\", \"value\": 8}]}", &stored), 0);
	commit(f);
	doc = job_doc(f, "worker", 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(doc, "series"), 0), "name")), "acc");
	assert_column(doc, 0, 0, "0 10 11 12");
	assert_column(doc, 0, 1, "2 4 5 7");
	assert_column(doc, 1, 0, "0 1 2");
	assert_column(doc, 1, 1, "1 3 6");
	json_decref(doc);
	doc = job_doc(f, "worker", 1, NULL);
	assert_column(doc, 0, 0, "0");
	/* no "time": the master's clock */
	assert_true(json_integer_value(json_array_get(json_array_get(json_object_get(
		json_array_get(json_object_get(doc, "series"), 0), "points"), 0), 2)) > 1700000000000000LL);
	json_decref(doc);
}

/* Bad batches are refused whole. */
static void test_bad_batches(void **state)
{
	static const char *const bad[] = {
		"{\"points\": []}",
		"{\"end\": 0, \"points\": []}",
		"{\"end\": -5, \"points\": []}",
		"{\"end\": \"9\", \"points\": []}",
		"{\"end\": 9}",
		"{\"end\": 9, \"points\": {}}",
		"{\"end\": 9, \"points\": [1]}",
		"{\"end\": 9, \"points\": [{\"name\": \"ok\", \"value\": 1}, {\"value\": 1}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"\", \"value\": 1}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\\nb\", \"value\": 1}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\", \"value\": \"1\"}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\", \"value\": true}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\", \"value\": 1, \"step\": -1}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\", \"value\": 1, \"step\": 1.5}]}",
		"{\"end\": 9, \"points\": [{\"name\": \"a\", \"value\": 1, \"time\": -1}]}",
	};
	struct fixture *f = *state;
	struct strbuf many = STRBUF_INIT;
	uint64_t stored;
	json_t *doc;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int rc = post(f, 0, LOG_STDOUT, 0, bad[i], &stored);
		if (rc != YERR(BAD_REQUEST))
			print_message("accepted: %s\n", bad[i]);
		assert_int_equal(rc, YERR(BAD_REQUEST));
	}
	strbuf_addstr(&many, "{\"end\": 9, \"points\": [");
	for (int i = 0; i <= METRICS_POST_MAX; i++)
		strbuf_addf(&many, "%s{\"name\": \"a\", \"value\": %d}", i ? "," : "", i);
	strbuf_addstr(&many, "]}");
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, many.buf, &stored), YERR(BAD_REQUEST));
	strbuf_release(&many);
	commit(f);
	doc = job_doc(f, NULL, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 0);
	json_decref(doc);
	/* the cursor did not move either */
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 9, \"points\": []}", &stored), 0);
	assert_int_equal(stored, 9);
}

/* Series by task (spec order, then attempt) and name; points by step, then
 * arrival; values exactly as sent; filters. */
static void test_document(void **state)
{
	struct fixture *f = *state;
	json_t *doc, *series;
	uint64_t stored;

	assert_int_equal(post(f, 2, LOG_STDOUT, 0, "{\"end\": 1, \"points\": [{\"name\": \"z\", \"step\": 1, \"value\": 1}]}", &stored), 0);
	assert_int_equal(post(f, 1, LOG_STDOUT, 0, "{\"end\": 1, \"points\": [{\"name\": \"b\", \"step\": 1, \"value\": 1}]}", &stored), 0);
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 1, \"points\": ["
			      "{\"name\": \"b\", \"step\": 5, \"value\": 0.1},"
			      "{\"name\": \"b\", \"step\": 3, \"value\": 1e-300},"
			      "{\"name\": \"b\", \"step\": 3, \"value\": -2.5e+300},"
			      "{\"name\": \"a/\\u00e9\\\"q\", \"step\": 0, \"value\": 0.30000000000000004}]}", &stored), 0);
	commit(f);
	doc = job_doc(f, NULL, 0, NULL);
	series = json_object_get(doc, "series");
	assert_int_equal(json_object_get(doc, "job") ? json_integer_value(json_object_get(doc, "job")) : 0, 7);
	assert_int_equal(json_array_size(series), 4);
	{
		static const char *const want[][3] = {
			{ "worker/0", "0", "a/\xc3\xa9\"q" }, { "worker/0", "0", "b" },
			{ "worker/0", "1", "z" }, { "worker/1", "0", "b" },
		};
		for (size_t i = 0; i < 4; i++) {
			json_t *s = json_array_get(series, i);
			char attempt[8];
			snprintf(attempt, sizeof(attempt), "%" JSON_INTEGER_FORMAT,
				 json_integer_value(json_object_get(s, "attempt")));
			assert_string_equal(json_string_value(json_object_get(s, "task")), want[i][0]);
			assert_string_equal(attempt, want[i][1]);
			assert_string_equal(json_string_value(json_object_get(s, "name")), want[i][2]);
		}
	}
	assert_int_equal(json_integer_value(json_object_get(json_array_get(series, 2), "task_id")), 42);
	assert_column(doc, 1, 0, "3 3 5");
	{
		json_t *pts = json_object_get(json_array_get(series, 1), "points");
		assert_true(json_real_value(json_array_get(json_array_get(pts, 0), 1)) == 1e-300);
		assert_true(json_real_value(json_array_get(json_array_get(pts, 1), 1)) == -2.5e+300);
		assert_true(json_real_value(json_array_get(json_array_get(pts, 2), 1)) == 0.1);
		pts = json_object_get(json_array_get(series, 0), "points");
		assert_true(json_real_value(json_array_get(json_array_get(pts, 0), 1)) == 0.30000000000000004);
	}
	json_decref(doc);
	doc = job_doc(f, NULL, 0, "b");
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 2);
	json_decref(doc);
	doc = job_doc(f, "worker", 0, "b");
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 1);
	json_decref(doc);
	doc = job_doc(f, "worker", 0, "nope");
	assert_int_equal(json_array_size(json_object_get(doc, "series")), 0);
	json_decref(doc);
}

/* What was committed is there after the store is reopened. */
static void test_durable(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	uint64_t stored;
	int created;
	json_t *doc;

	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 3, \"points\": [{\"name\": \"x\", \"value\": 4}]}", &stored), 0);
	commit(f);
	f->m.sops->close(f->m.store);
	assert_int_equal(f->m.sops->open(f->dir, &f->m.store, &created, &eb), 0);
	assert_int_equal(created, 0);
	doc = job_doc(f, NULL, 0, NULL);
	assert_column(doc, 0, 1, "4");
	json_decref(doc);
	assert_int_equal(post(f, 0, LOG_STDOUT, 0, "{\"end\": 3, \"points\": [{\"name\": \"x\", \"value\": 4}]}", &stored), 0);
	assert_int_equal(stored, 3);
	assert_false(f->m.txn_open); /* a duplicate writes nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_offsets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_assigned_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_document, setup, teardown),
		cmocka_unit_test_setup_teardown(test_durable, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
