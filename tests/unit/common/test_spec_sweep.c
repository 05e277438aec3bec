/* Unit tests for the spec's `sweep` section (src/common/spec_sweep.h):
 * what it takes, what it refuses and with which message, its canonical
 * form, and the params of each trial (grid order, random draws in their
 * domains and reproducible from the seed). */
#include "base/compat.h"
#include "base/strbuf.h"
#include "common/spec.h"
#include "common/spec_sweep.h"

#include <setjmp.h>
#include <cmocka.h>

#define BASE "{\"command\": [\"echo\", \"{params.lr}\"], \"tasks\": {\"main\": null}, "
#define OBJ "\"objective\": {\"metric\": \"acc\", \"mode\": \"max\"}"

static int parse(const char *tail, struct job_spec *spec, struct errbuf *eb)
{
	char text[2048];
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

static char *dump(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
}

static void assert_json(const json_t *v, const char *want)
{
	char *got = dump(v);
	assert_string_equal(got, want);
	free(got);
}

/* a grid: every combination, the last list fastest, the swept lr added to
 * params (the command names it), the defaults filled in */
static void test_grid(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	json_t *canon;
	static const char *const want[] = {
		"{\"lr\":0.1,\"bs\":16}", "{\"lr\":0.1,\"bs\":32}", "{\"lr\":0.3,\"bs\":16}",
		"{\"lr\":0.3,\"bs\":32}", "{\"lr\":1,\"bs\":16}", "{\"lr\":1,\"bs\":32}",
	};

	assert_int_equal(parse("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [0.1, 0.3, 1], "
			       "\"bs\": [16, 32]}, " OBJ "}", &spec, &eb), 0);
	assert_non_null(spec.sweep);
	assert_int_equal(spec.sweep->trials, 6);
	assert_int_equal(spec.sweep->max_parallel, SWEEP_PARALLEL_DEFAULT);
	assert_true(spec.sweep->maximize);
	assert_int_equal(spec.sweep->stop, SWEEP_STOP_NONE);
	assert_json(spec.params, "{\"lr\":0.1,\"bs\":16}");
	for (unsigned k = 0; k < 6; k++) {
		json_t *p = spec_sweep_trial_params(spec.sweep, k, 99);
		assert_json(p, want[k]);
		json_decref(p);
	}
	canon = spec_to_json(&spec);
	assert_json(json_object_get(canon, "sweep"),
		    "{\"method\":\"grid\",\"params\":{\"lr\":[0.1,0.3,1],\"bs\":[16,32]},\"trials\":6,"
		    "\"max_parallel\":4,\"objective\":{\"metric\":\"acc\",\"mode\":\"max\"}}");
	json_decref(canon);
	spec_release(&spec);
}

/* random: each draw in its domain, the same for the same seed and trial,
 * another for another seed; choice lists and ints included */
static void test_random_domains_and_seed(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	unsigned differ = 0, choices[3] = { 0 };

	assert_int_equal(parse("\"sweep\": {\"method\": \"random\", \"trials\": 200, \"max_parallel\": 3, "
			       "\"params\": {\"lr\": {\"log_uniform\": [0.0001, 0.1]}, \"d\": {\"uniform\": [0.1, 0.5]}, "
			       "\"n\": {\"int\": [2, 4]}, \"opt\": {\"choice\": [\"sgd\", \"adam\", \"lamb\"]}}, "
			       OBJ ", \"early_stop\": {\"method\": \"median\", \"min_trials\": 2}}", &spec, &eb), 0);
	assert_int_equal(spec.sweep->trials, 200);
	assert_int_equal(spec.sweep->stop, SWEEP_STOP_MEDIAN);
	assert_int_equal(spec.sweep->min_trials, 2);
	for (unsigned k = 0; k < 200; k++) {
		json_t *p = spec_sweep_trial_params(spec.sweep, k, 7), *q = spec_sweep_trial_params(spec.sweep, k, 7);
		json_t *r = spec_sweep_trial_params(spec.sweep, k, 8);
		double lr = json_number_value(json_object_get(p, "lr"));
		double d = json_number_value(json_object_get(p, "d"));
		json_int_t n = json_integer_value(json_object_get(p, "n"));
		const char *opt = json_string_value(json_object_get(p, "opt"));

		assert_true(json_equal(p, q));
		differ += !json_equal(p, r);
		assert_true(lr >= 0.0001 && lr <= 0.1);
		assert_true(d >= 0.1 && d <= 0.5);
		assert_true(json_is_integer(json_object_get(p, "n")) && n >= 2 && n <= 4);
		assert_non_null(opt);
		choices[!strcmp(opt, "sgd") ? 0 : !strcmp(opt, "adam") ? 1 : 2]++;
		json_decref(p);
		json_decref(q);
		json_decref(r);
	}
	assert_true(differ > 190);
	for (int i = 0; i < 3; i++)
		assert_true(choices[i] > 30);
	spec_release(&spec);
}

/* ASHA's defaults in the canonical form */
static void test_asha_canonical(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	json_t *canon;

	assert_int_equal(parse("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ
			       ", \"early_stop\": {\"method\": \"asha\", \"resource\": \"epoch\"}}", &spec, &eb), 0);
	canon = spec_to_json(&spec);
	assert_json(json_object_get(json_object_get(canon, "sweep"), "early_stop"),
		    "{\"method\":\"asha\",\"min_resource\":1.0,\"resource\":\"epoch\",\"max_resource\":1000.0,"
		    "\"reduction_factor\":3.0,\"pause\":false}");
	json_decref(canon);
	spec_release(&spec);
}

static void test_refusals(void **state)
{
	refused("\"sweep\": 3", "sweep", "sweep: expected a mapping (method, params, objective, ...), got 3");
	refused("\"sweep\": {\"method\": \"bayes\", \"params\": {\"lr\": [1]}, " OBJ "}", "sweep.method",
		"sweep.method: expected grid or random, got \"bayes\"");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"trails\": 3}",
		"sweep.trails", "sweep.trails: unknown field (did you mean 'trials'?)");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {}, " OBJ "}", "sweep.params",
		"sweep.params: expected a mapping of parameter names to their values, got {}");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": {\"uniform\": [0, 1]}}, " OBJ "}",
		"sweep.params.lr", "sweep.params.lr: expected a list of values (grid tries every value; a "
		"range is for method: random), got {\"uniform\":[0,1]}");
	refused("\"sweep\": {\"method\": \"random\", \"trials\": 3, \"params\": {\"lr\": {\"log_uniform\": [0, 1]}}, " OBJ "}",
		"sweep.params.lr", "sweep.params.lr: expected [lo, hi] with 0 < lo <= hi (log_uniform), got [0,1]");
	refused("\"sweep\": {\"method\": \"random\", \"trials\": 3, \"params\": {\"lr\": {\"normal\": [0, 1]}}, " OBJ "}",
		"sweep.params.lr", "sweep.params.lr: unknown domain 'normal' (expected uniform, log_uniform, int or choice)");
	refused("\"sweep\": {\"method\": \"random\", \"trials\": 3, \"params\": {\"n\": {\"int\": [1.5, 3]}}, " OBJ "}",
		"sweep.params.n", "sweep.params.n: expected [lo, hi], two integers, got [1.5,3]");
	refused("\"sweep\": {\"method\": \"random\", \"params\": {\"lr\": [1, 2]}, " OBJ "}", "sweep.trials",
		"sweep.trials: required for method: random");
	refused("\"sweep\": {\"method\": \"grid\", \"trials\": 5, \"params\": {\"lr\": [1, 2]}, " OBJ "}",
		"sweep.trials", "sweep.trials: expected an integer from 2 to 2, got 5");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, \"max_parallel\": 0, " OBJ "}",
		"sweep.max_parallel", "sweep.max_parallel: expected an integer from 1 to 10000, got 0");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}}", "sweep.objective",
		"sweep.objective: required: {metric: NAME, mode: min|max}, the series to rank the trials by");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, \"objective\": {\"metric\": \"a\", \"mode\": \"up\"}}",
		"sweep.objective.mode", "sweep.objective.mode: expected min or max, got \"up\"");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"early_stop\": {\"method\": \"median\", \"reduction_factor\": 2}}",
		"sweep.early_stop.reduction_factor", "sweep.early_stop.reduction_factor: only for method: asha");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"early_stop\": {\"method\": \"asha\", \"reduction_factor\": 1}}",
		"sweep.early_stop.reduction_factor", "sweep.early_stop.reduction_factor: expected a number > 1, got 1");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"early_stop\": {\"method\": \"asha\", \"min_resource\": 4, \"max_resource\": 2}}",
		"sweep.early_stop.max_resource", "sweep.early_stop.max_resource: expected more than min_resource (4), got 2");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"early_stop\": {\"method\": \"median\", \"pause\": true}}",
		"sweep.early_stop.pause", "sweep.early_stop.pause: only for method: asha");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [1]}, " OBJ ", \"early_stop\": {\"method\": \"asha\", \"pause\": 1}}",
		"sweep.early_stop.pause", "sweep.early_stop.pause: expected true or false, got 1");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"1lr\": [1]}, " OBJ "}", "sweep.params.1lr",
		"sweep.params.1lr: expected a parameter name of letters, digits and '_' (at most 64, not starting with a digit)");
	refused("\"sweep\": {\"method\": \"grid\", \"params\": {\"lr\": [[1]]}, " OBJ "}", "sweep.params.lr[0]",
		"sweep.params.lr[0]: expected a string, number or bool, got [1]");
}

/* The two example sweeps parse: the same grid of 12, ASHA on the epoch. */
static void test_examples(void **state)
{
	static const char *const files[] = { "sweep.yaml", "sweep-asha.yaml", "sweep-asha-pause.yaml" };

	for (int i = 0; i < 3; i++) {
		struct strbuf sb = STRBUF_INIT;
		struct errbuf eb = ERRBUF_INIT;
		struct job_spec spec;
		json_t *doc = NULL, *p0, *p11;
		char path[512];

		snprintf(path, sizeof(path), SOURCE_ROOT "/examples/pytorch-ddp-digits/%s", files[i]);
		assert_int_equal(strbuf_read_file(&sb, path, 0), 0);
		assert_int_equal(spec_load_text(sb.buf, sb.len, &doc, &eb), 0);
		assert_int_equal(spec_from_json(doc, &spec, &eb), 0);
		assert_int_equal(spec.sweep->trials, 12);
		assert_int_equal(spec.sweep->max_parallel, 2);
		assert_string_equal(spec.sweep->metric, "test_acc");
		assert_int_equal(spec.sweep->stop, i ? SWEEP_STOP_ASHA : SWEEP_STOP_NONE);
		if (i)
			assert_string_equal(spec.sweep->resource, "epoch");
		assert_int_equal(spec.sweep->pause, i == 2);
		p0 = spec_sweep_trial_params(spec.sweep, 0, 1);
		p11 = spec_sweep_trial_params(spec.sweep, 11, 1);
		assert_json(p0, "{\"lr\":0.3,\"batch_size\":16}");
		assert_json(p11, "{\"lr\":0.03,\"batch_size\":64}");
		json_decref(p0);
		json_decref(p11);
		json_decref(doc);
		spec_release(&spec);
		strbuf_release(&sb);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grid),
		cmocka_unit_test(test_random_domains_and_seed),
		cmocka_unit_test(test_asha_canonical),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_examples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
