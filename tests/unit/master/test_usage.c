/*
 * Accounting's arithmetic (src/master/usage.h): GPU-seconds of the part of
 * each run inside the window, CPU-seconds prorated the same way, the
 * largest peak, jobs counted once, rows by GPU-seconds, steps that add up
 * to the window, and a step too fine refused by name. Worked out by hand.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "master/usage.h"

#define S 1000000ull /* a second in us */

static const json_t *row(const json_t *rows, const char *key)
{
	size_t i;
	json_t *r;

	json_array_foreach(rows, i, r)
		if (!strcmp(json_string_value(json_object_get(r, "key")), key))
			return r;
	fail_msg("no row %s", key);
	return NULL;
}

static double num(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

static void test_window_proration_and_rows(void **state)
{
	/* window [100 s, 200 s) */
	const struct usage_run runs[] = {
		/* alice, job 1: 2 GPUs 50..150 (50 s inside: 100 GPU-s), 10 CPU-s over 100 s: 5 inside */
		{ "alice", 1, 2, 50 * S, 150 * S, true, true, false, 10 * S, 0 },
		/* alice, job 1 again (a second task): 1 GPU 120..130 (10), peak 4 GiB */
		{ "alice", 1, 1, 120 * S, 130 * S, true, true, true, 3 * S, 4ull << 30 },
		/* alice, job 2: running since 190, 4 GPUs until now = 200: 40, no CPU yet */
		{ "alice", 2, 4, 190 * S, 200 * S, false, false, false, 0, 0 },
		/* bob: 8 GPUs 150..400 (50 inside: 400), peak 1 GiB */
		{ "bob", 3, 8, 150 * S, 400 * S, true, true, true, 25 * S, 1ull << 30 },
		/* carol: ended before the window */
		{ "carol", 4, 8, 10 * S, 99 * S, true, true, true, 1 * S, 1 },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *rows, *buckets;

	assert_int_equal(usage_report(runs, ARRAY_SIZE(runs), 100 * S, 200 * S, 0, &rows, &buckets, &eb), 0);
	assert_null(buckets);
	assert_int_equal(json_array_size(rows), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "key")), "bob");
	const json_t *a = row(rows, "alice"), *b = row(rows, "bob");
	assert_float_equal(num(a, "gpu_seconds"), 150, 1e-9);
	assert_float_equal(num(a, "cpu_seconds"), 5 + 3, 1e-9);
	assert_int_equal(num(a, "jobs"), 2);
	assert_int_equal(num(a, "tasks"), 3);
	assert_int_equal(json_integer_value(json_object_get(a, "memory_peak")), 4ll << 30);
	assert_float_equal(num(b, "gpu_seconds"), 400, 1e-9);
	assert_float_equal(num(b, "cpu_seconds"), 25.0 * 50 / 250, 1e-9);
	assert_int_equal(json_integer_value(json_object_get(b, "memory_peak")), 1ll << 30);
	json_decref(rows);
}

static void test_steps_add_up_and_a_fine_step_is_refused(void **state)
{
	const struct usage_run runs[] = {
		{ "", 1, 2, 30 * S, 90 * S, true, false, false, 0, 0 },   /* no team: key "" */
		{ "nlp", 2, 1, 0, 45 * S, true, false, false, 0, 0 },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *rows, *buckets;

	/* [0, 100) in steps of 40: [0,40) [40,80) [80,100) */
	assert_int_equal(usage_report(runs, 2, 0, 100 * S, 40 * S, &rows, &buckets, &eb), 0);
	assert_int_equal(json_array_size(buckets), 3);
	const double want_none[] = { 20, 80, 20 }, want_nlp[] = { 40, 5, 0 };
	for (size_t i = 0; i < 3; i++) {
		const json_t *b = json_array_get(buckets, i), *v = json_object_get(b, "gpu_seconds");
		assert_int_equal(json_integer_value(json_object_get(b, "start")), (json_int_t)(i * 40 * S));
		assert_float_equal(json_number_value(json_object_get(v, "")), want_none[i], 1e-9);
		assert_float_equal(json_number_value(json_object_get(v, "nlp")), want_nlp[i], 1e-9);
	}
	assert_float_equal(num(row(rows, ""), "gpu_seconds"), 120, 1e-9);
	assert_true(json_is_null(json_object_get(row(rows, ""), "memory_peak")));
	json_decref(rows);
	json_decref(buckets);
	assert_int_equal(usage_report(runs, 2, 0, 2000 * S, 1 * S, &rows, &buckets, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.field, "step");
	assert_non_null(strstr(eb.msg, "more than 1000 buckets"));
	assert_null(rows);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_proration_and_rows),
		cmocka_unit_test(test_steps_add_up_and_a_fine_step_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
