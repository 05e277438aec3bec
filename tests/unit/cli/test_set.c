/* Unit tests for `yard submit --set PATH=VALUE` (spec_set in
 * src/common/spec.h): which paths it takes, the errors and suggestions for
 * the ones it refuses, and how the value is typed. */
#include "base/compat.h"
#include "common/spec.h"

#include <setjmp.h>
#include <cmocka.h>

static json_t *load_ok(const char *text)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	int ret = spec_load_text(text, strlen(text), &doc, &eb);
	if (ret)
		print_message("load failed: %s\n", eb.msg);
	assert_int_equal(ret, 0);
	return doc;
}

static void assert_json_equal(const json_t *got, const char *want_text)
{
	json_error_t jerr;
	json_t *want = json_loads(want_text, JSON_DECODE_ANY, &jerr);
	char *a, *b;
	if (!want)
		print_message("bad expected JSON: %s\n", jerr.text);
	assert_non_null(want);
	a = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
	b = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
	assert_string_equal(a, b);
	free(a);
	free(b);
	json_decref(want);
}

static const char base_spec[] = "name: a\ncommand: [x]\nparams: {lr: 0.5}\n"
				"tasks: {worker: {gpus: 1}, ps: null}\n";

static void test_set(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = load_ok("params: {lr: 0.5}\ntasks: {worker: {}}\n");
	static const char *const sets[] = {
		"params.lr=0.1", "params.epochs=7", "params.tag=v2", "params.id='007'",
		"params.quiet=true", "params.expr=a=b", "tasks.worker.replicas=4",
		"placement.gpu_model=H100", "placement.labels.zone=eu", "env.MODE=fast",
		"restart.max=2", "preemption.grace=10s", "timeout=", "interactive.idle_timeout=2h",
	};
	for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
		if (spec_set(doc, sets[i], &eb))
			print_message("--set %s: %s\n", sets[i], eb.msg);
		assert_int_equal(eb.code, 0);
	}
	assert_json_equal(doc, "{\"params\": {\"lr\": 0.1, \"epochs\": 7, \"tag\": \"v2\","
			       " \"id\": \"007\", \"quiet\": true, \"expr\": \"a=b\"},"
			       " \"tasks\": {\"worker\": {\"replicas\": 4}},"
			       " \"placement\": {\"gpu_model\": \"H100\", \"labels\": {\"zone\": \"eu\"}},"
			       " \"env\": {\"MODE\": \"fast\"}, \"restart\": {\"max\": 2},"
			       " \"preemption\": {\"grace\": \"10s\"}, \"timeout\": null,"
			       " \"interactive\": {\"idle_timeout\": \"2h\"}}");
	json_decref(doc);
	(void)state;
}

/* The value is typed as the same text is in the YAML file; quotes make a
 * string of anything. */
static void test_set_typing(void **state)
{
	static const struct {
		const char *value;
		const char *json;
	} cases[] = {
		{ "7", "7" },
		{ "007", "7" },
		{ "-3", "-3" },
		{ "+3", "3" },
		{ "0.1", "0.1" },
		{ "1e3", "1000.0" },
		{ "true", "true" },
		{ "False", "false" },
		{ "null", "null" },
		{ "~", "null" },
		{ "", "null" },
		{ "0x1f", "\"0x1f\"" },
		{ "v2", "\"v2\"" },
		{ "yes", "\"yes\"" },
		{ "\"007\"", "\"007\"" },
		{ "'007'", "\"007\"" },
		{ "\"true\"", "\"true\"" },
		{ "'null'", "\"null\"" },
		{ "\"\"", "\"\"" },
		{ "''", "\"\"" },
		{ "\"a'b\"", "\"a'b\"" },
		{ "'say \"hi\"'", "\"say \\\"hi\\\"\"" },
		{ "\"\\n\"", "\"\\\\n\"" },
		{ "it's", "\"it's\"" },
		{ "a=b", "\"a=b\"" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok(base_spec);
		char set[128], want[160];
		snprintf(set, sizeof(set), "params.tag=%s", cases[i].value);
		snprintf(want, sizeof(want), "%s", cases[i].json);
		if (spec_set(doc, set, &eb))
			print_message("--set %s: %s\n", set, eb.msg);
		assert_int_equal(eb.code, 0);
		assert_json_equal(json_object_get(json_object_get(doc, "params"), "tag"), want);
		json_decref(doc);
	}
	(void)state;
}

/* A plain value is typed the same on the command line as in the file. */
static void test_set_types_like_yaml(void **state)
{
	static const char *const values[] = { "007", "1.50", "TRUE", "null", "0o17", "1_000",
		"-0", ".5", "x y" };
	for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
		struct errbuf eb = ERRBUF_INIT;
		char text[128], set[128];
		json_t *file, *doc = load_ok(base_spec);
		snprintf(text, sizeof(text), "tag: %s\n", values[i]);
		snprintf(set, sizeof(set), "params.tag=%s", values[i]);
		file = load_ok(text);
		assert_int_equal(spec_set(doc, set, &eb), 0);
		assert_true(json_equal(json_object_get(json_object_get(doc, "params"), "tag"),
				       json_object_get(file, "tag")));
		json_decref(file);
		json_decref(doc);
	}
	(void)state;
}

/* Paths that name no field: the error the file would get, with the field. */
static void test_set_path_errors(void **state)
{
	static const struct {
		const char *assignment;
		const char *field;
		const char *msg;
	} cases[] = {
		{ "tasks.wrker.gpus=1", "tasks.wrker",
			"tasks.wrker: no role 'wrker' in the spec (roles: worker, ps); did you mean "
			"'worker'?" },
		{ "tasks.p=1", "tasks.p",
			"tasks.p: no role 'p' in the spec (roles: worker, ps); did you mean 'ps'?" },
		{ "tasks.evaluator=null", "tasks.evaluator",
			"tasks.evaluator: no role 'evaluator' in the spec (roles: worker, ps); roles "
			"are added in the spec file, not with --set" },
		{ "tasks.worker.gpu=1", "tasks.worker.gpu",
			"tasks.worker.gpu: unknown field (did you mean 'gpus'?)" },
		{ "tasks.ps.memroy=1G", "tasks.ps.memroy",
			"tasks.ps.memroy: unknown field (did you mean 'memory'?)" },
		{ "placment.max_nodes=2", "placment",
			"placment: unknown field (did you mean 'placement'?)" },
		{ "placement.max_node=2", "placement.max_node",
			"placement.max_node: unknown field (did you mean 'max_nodes'?)" },
		{ "restart.maximum=2", "restart.maximum", "restart.maximum: unknown field" },
		{ "preemption.grce=1s", "preemption.grce",
			"preemption.grce: unknown field (did you mean 'grace'?)" },
		{ "interactive.idle_timout=1h", "interactive.idle_timout",
			"interactive.idle_timout: unknown field (did you mean 'idle_timeout'?)" },
		{ "xyzzy=1", "xyzzy", "xyzzy: unknown field" },
		{ "name.x=1", "name.x", "name.x: unknown field ('name' takes a value, not fields)" },
		{ "tasks.worker.gpus.x=1", "tasks.worker.gpus.x",
			"tasks.worker.gpus.x: unknown field ('tasks.worker.gpus' takes a value, not "
			"fields)" },
		{ "params.lr.x=1", "params.lr.x",
			"params.lr.x: unknown field ('params.lr' takes a value, not fields)" },
		{ "params.n=1e999", "params.n",
			"params.n: number out of range (only finite numbers are allowed), got 1e999" },
		{ "params.n=99999999999999999999", "params.n",
			"params.n: integer out of range, got 99999999999999999999" },
		{ "params.tag=\"007", "params.tag",
			"params.tag: a quote that is not closed, got \"007" },
		{ "params.tag='", "params.tag", "params.tag: a quote that is not closed, got '" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok(base_spec);
		json_t *before = json_deep_copy(doc);
		assert_int_equal(spec_set(doc, cases[i].assignment, &eb), YERR(INVALID_SPEC));
		assert_int_equal(eb.code, YERR(INVALID_SPEC));
		assert_string_equal(eb.field, cases[i].field);
		assert_string_equal(eb.msg, cases[i].msg);
		/* nothing was set */
		assert_true(json_equal(doc, before));
		json_decref(before);
		json_decref(doc);
	}
	(void)state;
}

/* The same typos in the file get the same message from the validation. */
static void test_set_errors_match_file(void **state)
{
	static const struct {
		const char *assignment;
		const char *file;
	} cases[] = {
		{ "tasks.worker.gpu=1", "command: [x]\ntasks: {worker: {gpu: 1}}\n" },
		{ "placment.max_nodes=2", "command: [x]\ntasks: {worker: {}}\nplacment: {max_nodes: 2}\n" },
		{ "placement.wait_for_node=true",
			"command: [x]\ntasks: {worker: {}}\nplacement: {wait_for_node: true}\n" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf set_eb = ERRBUF_INIT, file_eb = ERRBUF_INIT;
		struct job_spec spec;
		json_t *doc = load_ok("command: [x]\ntasks: {worker: {}}\n");
		json_t *file = load_ok(cases[i].file);
		assert_int_equal(spec_set(doc, cases[i].assignment, &set_eb), YERR(INVALID_SPEC));
		assert_int_equal(spec_from_json(file, &spec, &file_eb), YERR(INVALID_SPEC));
		assert_string_equal(set_eb.msg, file_eb.msg);
		assert_string_equal(set_eb.field, file_eb.field);
		spec_release(&spec);
		json_decref(file);
		json_decref(doc);
	}
	(void)state;
}

/* What is not PATH=VALUE at all is a usage error (YERR(BAD_REQUEST)); a step
 * that holds a scalar in the file is the spec's error. */
static void test_set_syntax_errors(void **state)
{
	static const struct {
		const char *assignment;
		const char *msg;
	} cases[] = {
		{ "x", "--set 'x': expected PATH=VALUE" },
		{ "=3", "--set '=3': expected PATH=VALUE" },
		{ "a..b=1", "--set 'a..b=1': expected PATH=VALUE" },
		{ ".a=1", "--set '.a=1': expected PATH=VALUE" },
		{ "a.=1", "--set 'a.=1': expected PATH=VALUE" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok(base_spec);
		assert_int_equal(spec_set(doc, cases[i].assignment, &eb), YERR(BAD_REQUEST));
		assert_string_equal(eb.msg, cases[i].msg);
		json_decref(doc);
	}
	{
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok("params: 3\ntasks: {worker: {}}\n");
		assert_int_equal(spec_set(doc, "params.x=1", &eb), YERR(INVALID_SPEC));
		assert_string_equal(eb.field, "params");
		assert_string_equal(eb.msg, "params: expected a mapping to set a field in, got 3");
		json_decref(doc);
	}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_set_typing),
		cmocka_unit_test(test_set_types_like_yaml),
		cmocka_unit_test(test_set_path_errors),
		cmocka_unit_test(test_set_errors_match_file),
		cmocka_unit_test(test_set_syntax_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
