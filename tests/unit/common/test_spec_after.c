/* Unit tests for the spec's `after` field (src/common/spec_after.h): what it
 * takes, what it refuses and with which message, and its canonical form. */
#include "base/compat.h"
#include "common/spec.h"
#include "common/spec_after.h"

#include <setjmp.h>
#include <cmocka.h>

#define BASE "{\"command\": [\"true\"], \"tasks\": {\"main\": null}, "

/* parse: spec_from_json of BASE + tail; returns its result, eb filled. */
static int parse(const char *tail, struct job_spec *spec, struct errbuf *eb)
{
	char text[1024];
	json_t *doc;
	int ret;

	snprintf(text, sizeof(text), BASE "%s}", tail);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	ret = spec_from_json(doc, spec, eb);
	json_decref(doc);
	return ret;
}

static void refused(const char *tail, const char *field, const char *msg)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;

	assert_int_equal(parse(tail, &spec, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, field);
	assert_string_equal(eb.msg, msg);
	spec_release(&spec);
}

static void test_after_ok_list(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	(void)state;

	assert_int_equal(parse("\"after\": [12, 3]", &spec, &eb), 0);
	assert_int_equal(spec.nafter, 2);
	assert_int_equal(spec.after[0], 12);
	assert_int_equal(spec.after[1], 3);
	assert_false(spec.after_any);
	json_t *doc = spec_to_json(&spec);
	char *s = json_dumps(json_object_get(doc, "after"), JSON_COMPACT);
	assert_string_equal(s, "[12,3]");
	free(s);
	json_decref(doc);
	spec_release(&spec);
}

static void test_after_any(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	(void)state;

	assert_int_equal(parse("\"after\": {\"any\": [7]}", &spec, &eb), 0);
	assert_int_equal(spec.nafter, 1);
	assert_int_equal(spec.after[0], 7);
	assert_true(spec.after_any);
	json_t *doc = spec_to_json(&spec);
	char *s = json_dumps(json_object_get(doc, "after"), JSON_COMPACT);
	assert_string_equal(s, "{\"any\":[7]}");
	free(s);
	/* the canonical form reads back the same */
	struct job_spec again;
	assert_int_equal(spec_from_json(doc, &again, &eb), 0);
	assert_int_equal(again.nafter, 1);
	assert_true(again.after_any);
	spec_release(&again);
	json_decref(doc);
	spec_release(&spec);
}

static void test_after_absent(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	(void)state;

	assert_int_equal(parse("\"after\": null", &spec, &eb), 0);
	assert_int_equal(spec.nafter, 0);
	json_t *doc = spec_to_json(&spec);
	assert_null(json_object_get(doc, "after"));
	json_decref(doc);
	spec_release(&spec);
	assert_int_equal(parse("\"after\": []", &spec, &eb), 0);
	assert_int_equal(spec.nafter, 0);
	spec_release(&spec);
}

static void test_after_refused(void **state)
{
	(void)state;
	refused("\"after\": 12", "after",
		"after: expected a list of job ids or {any: [ids]}, got 12");
	refused("\"after\": [1, \"x\"]", "after[1]",
		"after[1]: expected a job id (an integer >= 1), got \"x\"");
	refused("\"after\": [0]", "after[0]", "after[0]: expected a job id (an integer >= 1), got 0");
	refused("\"after\": [4, 4]", "after[1]", "after[1]: job 4 is listed twice");
	refused("\"after\": {\"anyy\": [1]}", "after.anyy",
		"after.anyy: unknown field (did you mean 'any'?)");
	refused("\"after\": {\"any\": 3}", "after.any",
		"after.any: expected a list of job ids or {any: [ids]}, got 3");
}

static void test_after_limit(void **state)
{
	char tail[1024] = "\"after\": [";
	size_t n = strlen(tail);
	(void)state;

	for (int i = 1; i <= SPEC_AFTER_MAX + 1; i++)
		n += (size_t)snprintf(tail + n, sizeof(tail) - n, "%s%d", i > 1 ? "," : "", i);
	snprintf(tail + n, sizeof(tail) - n, "]");
	refused(tail, "after", "after: at most 64 jobs, got 65");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_after_ok_list),
		cmocka_unit_test(test_after_any),
		cmocka_unit_test(test_after_absent),
		cmocka_unit_test(test_after_refused),
		cmocka_unit_test(test_after_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
