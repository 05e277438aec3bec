/* Unit tests for src/common/spec.h: loading, validation, the canonical form,
 * and placeholder expansion (--set: tests/unit/cli/test_set.c). */
#include "base/compat.h"
#include "common/spec.h"
#include "common/spec_image.h"
#include "common/spec_code.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

static json_t *load_ok(const char *text)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	int ret = spec_load_text(text, strlen(text), &doc, &eb);
	if (ret)
		print_message("load failed: %s\n", eb.msg);
	assert_int_equal(ret, 0);
	assert_non_null(doc);
	return doc;
}

/* load_fail checks that text is refused with YERR(INVALID_SPEC) and msg. */
static void load_fail(const char *text, size_t len, const char *msg)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = (json_t *)1;
	int ret = spec_load_text(text, len, &doc, &eb);
	if (ret != YERR(INVALID_SPEC) || strcmp(eb.msg, msg))
		print_message("text:\n%s\n", text);
	assert_int_equal(ret, YERR(INVALID_SPEC));
	assert_int_equal(eb.code, YERR(INVALID_SPEC));
	assert_null(doc);
	assert_string_equal(eb.msg, msg);
}

#define LOAD_FAIL(text, msg) load_fail((text), strlen(text), (msg))

/* parse_ok: text loaded and validated into spec (caller releases). */
static void parse_ok(const char *text, struct job_spec *spec)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = load_ok(text);
	int ret = spec_from_json(doc, spec, &eb);
	if (ret)
		print_message("spec refused: %s\n", eb.msg);
	assert_int_equal(ret, 0);
	json_decref(doc);
}

static void assert_json_equal(const json_t *got, const char *want_text)
{
	json_error_t jerr;
	json_t *want = json_loads(want_text, 0, &jerr);
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

/* ---- loading ---------------------------------------------------------- */

static void test_yaml_typing(void **state)
{
	json_t *doc = load_ok("a: 3\n"
			      "b: \"3\"\n"
			      "c: 3.5\n"
			      "d: true\n"
			      "e: null\n"
			      "f: ~\n"
			      "g:\n"
			      "h: 'yes'\n"
			      "i: yes\n"
			      "j: -7\n"
			      "k: +7\n"
			      "l: 1e3\n"
			      "m: .5\n"
			      "n: 0x10\n"
			      "o: 1.2.3\n"
			      "p: False\n"
			      "q: 12abc\n"
			      "r: !!str 5\n"
			      "s: |\n  two\n  lines\n"
			      "t: [1, x, {u: 2}]\n"
			      "v: NULL\n");
	assert_json_equal(doc, "{\"a\": 3, \"b\": \"3\", \"c\": 3.5, \"d\": true, \"e\": null,"
			       " \"f\": null, \"g\": null, \"h\": \"yes\", \"i\": \"yes\", \"j\": -7,"
			       " \"k\": 7, \"l\": 1000.0, \"m\": 0.5, \"n\": \"0x10\", \"o\": \"1.2.3\","
			       " \"p\": false, \"q\": \"12abc\", \"r\": \"5\", \"s\": \"two\\nlines\\n\","
			       " \"t\": [1, \"x\", {\"u\": 2}], \"v\": null}");
	assert_true(json_is_integer(json_object_get(doc, "a")));
	assert_true(json_is_real(json_object_get(doc, "l")));
	json_decref(doc);
}

static void test_yaml_keeps_order(void **state)
{
	json_t *doc = load_ok("z: 1\na: 2\nm: 3\n");
	const char *key;
	json_t *v;
	const char *want[] = { "z", "a", "m" };
	size_t i = 0;
	json_object_foreach(doc, key, v) {
		assert_true(i < ARRAY_SIZE(want));
		assert_string_equal(key, want[i]);
		i++;
	}
	assert_int_equal(i, 3);
	json_decref(doc);
}

static void test_json_text(void **state)
{
	json_t *doc = load_ok("{\n\t\"command\": [\"x\", \"{params.n}\"],\n"
			      "\t\"tasks\": {\"w\": {\"gpus\": 2, \"cpus\": 0.5}},\n"
			      "\t\"params\": {\"n\": 5, \"s\": \"a\\u00e9\\/b\", \"f\": 1.5e2}\n}\n");
	assert_json_equal(doc, "{\"command\": [\"x\", \"{params.n}\"],"
			       " \"tasks\": {\"w\": {\"gpus\": 2, \"cpus\": 0.5}},"
			       " \"params\": {\"n\": 5, \"s\": \"a\\u00e9/b\", \"f\": 150.0}}");
	json_decref(doc);
}

static void test_load_refusals(void **state)
{
	const char *laughs = "a: &a [\"lol\", \"lol\"]\n"
			     "b: &b [*a, *a, *a]\n"
			     "c: [*b, *b, *b]\n";
	load_fail(laughs, strlen(laughs),
		"line 1: anchors and aliases are not allowed (anchor '&a')");
	LOAD_FAIL("a: 1\nb: *x\n", "line 2: anchors and aliases are not allowed (alias '*x')");
	LOAD_FAIL("command: [a]\ntasks:\n  worker:\n    gpus: 1\n    gpus: 2\n",
		"line 5: duplicate key 'gpus'");
	LOAD_FAIL("{\"a\": 1, \"a\": 2}", "line 1: duplicate key 'a'");
	LOAD_FAIL("x: 1\n? [a, b]\n: 1\n", "line 2: keys must be scalars, not sequences");
	LOAD_FAIL("? {a: 1}\n: 1\n", "line 1: keys must be scalars, not mappings");
	LOAD_FAIL("a: 1\n---\nb: 2\n",
		"line 2: more than one document (a spec is one document)");
	LOAD_FAIL("", "line 1: the spec is empty");
	LOAD_FAIL("a: 99999999999999999999\n",
		"line 1: '99999999999999999999': integer out of range");
	LOAD_FAIL("a: .inf\n",
		"line 1: '.inf': number out of range (only finite numbers are allowed)");
	LOAD_FAIL("a: !!binary aGk=\n", "line 1: tag 'tag:yaml.org,2002:binary' is not supported");
	LOAD_FAIL("a: \"x\\0y\"\n", "line 1: NUL characters are not allowed");
}

static void test_load_syntax_error_has_line(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	const char *text = "a: 1\nb: 2\nc: [1, 2\n";
	assert_int_equal(spec_load_text(text, strlen(text), &doc, &eb), YERR(INVALID_SPEC));
	assert_null(doc);
	assert_true(!strncmp(eb.msg, "line 4: ", 8) || !strncmp(eb.msg, "line 3: ", 8));
}

static void test_load_depth(void **state)
{
	struct strbuf ok = STRBUF_INIT, deep = STRBUF_INIT;
	json_t *doc;
	/* 32 levels are fine, the 33rd is refused. */
	for (int i = 0; i < 32; i++)
		strbuf_addch(&ok, '[');
	for (int i = 0; i < 32; i++)
		strbuf_addch(&ok, ']');
	doc = load_ok(ok.buf);
	json_decref(doc);
	strbuf_addstr(&deep, "a: ");
	for (int i = 0; i < 32; i++)
		strbuf_addch(&deep, '[');
	for (int i = 0; i < 32; i++)
		strbuf_addch(&deep, ']');
	load_fail(deep.buf, deep.len, "line 1: nesting deeper than 32 levels");
	strbuf_release(&ok);
	strbuf_release(&deep);
}

static void test_load_size_limit(void **state)
{
	size_t len = 1024 * 1024 + 1;
	char *text = xmalloc(len + 1);
	memset(text, '#', len);
	text[len] = '\0';
	load_fail(text, len, "the spec is 1048577 bytes, more than the limit of 1 MiB");
	/* A comment of exactly 1 MiB with a field after it is still too large,
	 * but 1 MiB in all is fine. */
	text[0] = 'a';
	text[1] = ':';
	text[2] = ' ';
	text[3] = '1';
	text[4] = '\n';
	text[len - 1] = '\0';
	json_decref(load_ok(text));
	free(text);
}

/* ---- validation ------------------------------------------------------- */

struct bad_case {
	const char *text;
	const char *field;
	const char *msg;
};

#define BASE "command: [run]\n"

static const struct bad_case bad_cases[] = {
	{ BASE "tasks: {worker: {gpus: two}}", "tasks.worker.gpus",
		"tasks.worker.gpus: expected an integer >= 0, got \"two\"" },
	{ BASE "tasks: {worker: {gpu: 1}}", "tasks.worker.gpu",
		"tasks.worker.gpu: unknown field (did you mean 'gpus'?)" },
	{ BASE "tasks: {worker: {frobnicate: 1}}", "tasks.worker.frobnicate",
		"tasks.worker.frobnicate: unknown field" },
	{ BASE "tasks: {ps: {pool: CPU Pool}}", "tasks.ps.pool",
		"tasks.ps.pool: expected a name of lowercase letters, digits, '-', '_' and '.' "
		"(at most 63, starting with a letter or digit), got \"CPU Pool\"" },
	{ BASE "tasks: {worker: {memory: lots}}", "tasks.worker.memory",
		"tasks.worker.memory: expected a size such as 2GiB, got \"lots\"" },
	{ BASE "tasks: {worker: {cpus: -1}}", "tasks.worker.cpus",
		"tasks.worker.cpus: expected a number > 0, got -1" },
	{ "name: Bad Name!\n" BASE "tasks: {worker: {}}", "name",
		"name: expected a name of lowercase letters, digits, '-', '_' and '.' "
		"(at most 63, starting with a letter or digit), got \"Bad Name!\"" },
	{ "command: []\ntasks: {worker: {}}", "command",
		"command: expected a non-empty array of strings" },
	{ "tasks: {worker: {}}", "command", "command: expected a non-empty array of strings" },
	{ "command: run\ntasks: {worker: {}}", "command",
		"command: expected a non-empty array of strings, got \"run\"" },
	{ "command: [run, 5]\ntasks: {worker: {}}", "command[1]",
		"command[1]: expected a string, got 5" },
	{ BASE "tasks: {}", "tasks", "tasks: expected at least one role" },
	{ BASE, "tasks", "tasks: expected at least one role" },
	{ BASE "tasks: {worker: {}}\npreemption: {grace: forever}", "preemption.grace",
		"preemption.grace: expected a duration such as 2h, 90m or 3600s, got \"forever\"" },
	{ BASE "tasks: {worker: {}}\npreemption: {grace: 2h}", "preemption.grace",
		"preemption.grace: expected a duration of at most 1h, got \"2h\"" },
	{ BASE "tasks: {worker: {}}\npreemption: {preemptible: yes please}", "preemption.preemptible",
		"preemption.preemptible: expected true or false, got \"yes please\"" },
	{ BASE "tasks: {worker: {}}\npreemption: {grase: 1s}", "preemption.grase",
		"preemption.grase: unknown field (did you mean 'grace'?)" },
	{ "framework: torch\n" BASE "tasks: {worker: {}}", "framework",
		"framework: unknown framework 'torch' (supported: command, pytorch, tensorflow, mxnet, "
		"mpi, horovod, jax, caffe, jupyter)" },
	{ "image: Ubuntu:22.04\n" BASE "tasks: {worker: {}}", "image",
		"image: \"Ubuntu:22.04\" is not a valid image reference: repository names must be "
		"lowercase" },
	{ "image: 5\n" BASE "tasks: {worker: {}}", "image",
		"image: expected an image reference such as debian:bookworm, or {build: {dockerfile, args}}, "
		"got 5" },
	{ BASE "tasks: {worker: {}}\ndata: {source: x}", "data",
		"data: expected a list of {source, mount}, got {\"source\":\"x\"}" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d'}, {mount: x}]", "data[1].source",
		"data[1].source: required" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://D@1'}]", "data[0].source",
		"data[0].source: expected yard://NAME[@VERSION], NAME [a-z0-9][a-z0-9_.-]{0,62}, got \"yard://D@1\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d@0'}]", "data[0].source",
		"data[0].source: expected yard://NAME[@VERSION], VERSION an integer >= 1, got \"yard://d@0\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d', mount: '../x'}]", "data[0].mount",
		"data[0].mount: expected a relative path of 1..8 components [A-Za-z0-9._-]+, no '.' or '..', got \"../x\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d', mount: /abs}]", "data[0].mount",
		"data[0].mount: expected a relative path of 1..8 components [A-Za-z0-9._-]+, no '.' or '..', got \"/abs\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d'}, {source: 'yard://e', mount: d}]",
		"data[1].mount", "data[1].mount: 'd' is the mount of data[0] too" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d', mount: a}, {source: 'yard://e', mount: a/b}]",
		"data[1].mount", "data[1].mount: 'a/b' and data[0]'s mount 'a' are inside one another" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'https://h/f.tar'}]", "data[0].sha256",
		"data[0].sha256: required for an https source (64 lowercase hex digits)" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'http://example.com/f', sha256: x}]", "data[0].source",
		"data[0].source: http:// is only for a loopback host; use https://, got \"http://example.com/f\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'file:///a/../etc'}]", "data[0].source",
		"data[0].source: the path may not have a '..' component, got \"file:///a/../etc\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard-job://12'}]", "data[0].source",
		"data[0].source: expected yard-job://ID/outputs or yard-job://ID/checkpoint, ID a job id, got "
		"\"yard-job://12\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard-job://0/outputs'}]", "data[0].source",
		"data[0].source: expected yard-job://ID/outputs or yard-job://ID/checkpoint, ID a job id, got "
		"\"yard-job://0/outputs\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard-job://7/logs'}]", "data[0].source",
		"data[0].source: expected yard-job://ID/outputs or yard-job://ID/checkpoint, ID a job id, got "
		"\"yard-job://7/logs\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 's3://B/p'}]", "data[0].source",
		"data[0].source: expected s3://BUCKET[/PREFIX], BUCKET [a-z0-9][a-z0-9.-]{1,62}, got \"s3://B/p\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'ftp://x/y'}]", "data[0].source",
		"data[0].source: expected yard://NAME[@N], yard-job://ID/outputs, s3://BUCKET/PREFIX, https://HOST/PATH or file:///PATH, got \"ftp://x/y\"" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d', sha256: x}]", "data[0].sha256",
		"data[0].sha256: only an https source takes a checksum" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'yard://d', mnt: x}]", "data[0].mnt",
		"data[0].mnt: unknown field (did you mean 'mount'?)" },
	{ BASE "tasks: {worker: {}}\ndata: [{source: 'https://h/'}]", "data[0].sha256",
		"data[0].sha256: required for an https source (64 lowercase hex digits)" },
	{ "command: [run, --epochs, \"{params.epochs}\"]\ntasks: {worker: {}}", "command",
		"command: \"{params.epochs}\" names a parameter that is not in params" },
	{ BASE "params: {n: 1}\ntasks: {worker: {command: [x, \"a{params.m}b\"]}}",
		"tasks.worker.command",
		"tasks.worker.command: \"{params.m}\" names a parameter that is not in params" },
	{ BASE "tasks: {worker: {replicas: 0}}", "tasks.worker.replicas",
		"tasks.worker.replicas: expected an integer >= 1, got 0" },
	{ BASE "tasks: {worker: {replicas: 1025}}", "tasks.worker.replicas",
		"tasks.worker.replicas: expected an integer <= 1024, got 1025" },
	{ BASE "tasks: {worker: {replicas: 2.0}}", "tasks.worker.replicas",
		"tasks.worker.replicas: expected an integer >= 1, got 2.0" },
	{ BASE "tasks: {worker: {gpus: 65}}", "tasks.worker.gpus",
		"tasks.worker.gpus: expected an integer <= 64, got 65" },
	{ BASE "tasks: {worker: {gpus: -1}}", "tasks.worker.gpus",
		"tasks.worker.gpus: expected an integer >= 0, got -1" },
	{ BASE "tasks: {worker: {cpus: 0}}", "tasks.worker.cpus",
		"tasks.worker.cpus: expected a number > 0, got 0" },
	{ BASE "tasks: {worker: {cpus: 1024.5}}", "tasks.worker.cpus",
		"tasks.worker.cpus: expected a number <= 1024, got 1024.5" },
	{ BASE "tasks: {worker: {cpus: \"2\"}}", "tasks.worker.cpus",
		"tasks.worker.cpus: expected a number > 0, got \"2\"" },
	{ BASE "tasks: {worker: {memory: 1MiB}}", "tasks.worker.memory",
		"tasks.worker.memory: expected a size of at least 4MiB, got \"1MiB\"" },
	{ BASE "tasks: {worker: {memory: -5}}", "tasks.worker.memory",
		"tasks.worker.memory: expected a size such as 2GiB, got -5" },
	{ BASE "tasks: {worker: {pids: 15}}", "tasks.worker.pids",
		"tasks.worker.pids: expected an integer >= 16, got 15" },
	{ BASE "tasks: {worker: {pids: 1000001}}", "tasks.worker.pids",
		"tasks.worker.pids: expected an integer <= 1000000, got 1000001" },
	{ BASE "tasks: {worker: {command: []}}", "tasks.worker.command",
		"tasks.worker.command: expected a non-empty array of strings" },
	{ BASE "tasks: {Worker: {}}", "tasks.Worker",
		"tasks.Worker: expected a role name of lowercase letters, digits, '-' and '_' "
		"(at most 32, starting with a letter)" },
	{ BASE "tasks: {worker: 3}", "tasks.worker",
		"tasks.worker: expected a mapping of replicas, gpus, cpus, memory, pids, command and pool, "
		"got 3" },
	{ BASE "tasks: [worker]", "tasks",
		"tasks: expected a mapping of roles such as {worker: {replicas: 2}}, got [\"worker\"]" },
	{ BASE "tasks: {worker: {}}\nrestart: {max: 101}", "restart.max",
		"restart.max: expected an integer <= 100, got 101" },
	{ BASE "tasks: {worker: {}}\nrestart: {maximum: 1}", "restart.maximum",
		"restart.maximum: unknown field" },
	{ BASE "tasks: {worker: {}}\ntimeout: 0", "timeout", "timeout: expected a duration > 0, got 0" },
	{ BASE "tasks: {worker: {}}\ntimeout: soon", "timeout",
		"timeout: expected a duration such as 2h, 90m or 3600s, got \"soon\"" },
	{ BASE "params: {bad-key: 1}\ntasks: {worker: {}}", "params.bad-key",
		"params.bad-key: expected a parameter name of letters, digits and '_' "
		"(at most 64, not starting with a digit)" },
	{ BASE "params: {xs: [1, 2]}\ntasks: {worker: {}}", "params.xs",
		"params.xs: expected a string, number or bool, got [1,2]" },
	{ BASE "params: {x: null}\ntasks: {worker: {}}", "params.x",
		"params.x: expected a string, number or bool, got null" },
	{ BASE "params: [1]\ntasks: {worker: {}}", "params",
		"params: expected a mapping of parameter names to values, got [1]" },
	{ BASE "env: {YARD_JOB_ID: 3}\ntasks: {worker: {}}", "env.YARD_JOB_ID",
		"env.YARD_JOB_ID: names starting with YARD_ are reserved for yard" },
	{ BASE "env: {1X: a}\ntasks: {worker: {}}", "env.1X",
		"env.1X: expected a variable name of letters, digits and '_' "
		"(at most 64, not starting with a digit)" },
	{ BASE "env: {A: {b: 1}}\ntasks: {worker: {}}", "env.A",
		"env.A: expected a string, number or bool, got {\"b\":1}" },
	{ BASE "tasks: {worker: {}}\npriority: urgent", "priority",
		"priority: expected low, normal or high, got \"urgent\"" },
	{ BASE "tasks: {worker: {}}\non_disconnect: pause", "on_disconnect",
		"on_disconnect: expected stop or keep, got \"pause\"" },
	{ BASE "tasks: {worker: {}}\nteam: Vision", "team",
		"team: expected a name of lowercase letters, digits, '-', '_' and '.' "
		"(at most 63, starting with a letter or digit), got \"Vision\"" },
	{ BASE "tasks: {worker: {}}\nplacement: {max_nodes: 0}", "placement.max_nodes",
		"placement.max_nodes: expected an integer >= 1, got 0" },
	{ BASE "tasks: {worker: {}}\nplacement: {wait_for_nodes: 'yes'}", "placement.wait_for_nodes",
		"placement.wait_for_nodes: expected true or false, got \"yes\"" },
	{ BASE "tasks: {worker: {}}\nplacement: {gpu: A100}", "placement.gpu",
		"placement.gpu: unknown field" },
	{ BASE "tasks: {worker: {}}\nplacement: {gpu_modl: A100}", "placement.gpu_modl",
		"placement.gpu_modl: unknown field (did you mean 'gpu_model'?)" },
	{ BASE "tasks: {worker: {}}\nplacement: {gpu_memory: lots}", "placement.gpu_memory",
		"placement.gpu_memory: expected a size such as 40GiB, got \"lots\"" },
	{ BASE "tasks: {worker: {}}\nplacement: {gpu_memory: 1024}", "placement.gpu_memory",
		"placement.gpu_memory: expected a size of at least 1MiB, got 1024" },
	{ BASE "tasks: {worker: {}}\nplacement: {gpu_memroy: 1GiB}", "placement.gpu_memroy",
		"placement.gpu_memroy: unknown field (did you mean 'gpu_memory'?)" },
	{ BASE "tasks: {worker: {}}\nplacement: {labels: [ib]}", "placement.labels",
		"placement.labels: expected a mapping of label names to values, got [\"ib\"]" },
	{ BASE "tasks: {worker: {}}\nplacement: {labels: {net: 'a b'}}", "placement.labels.net",
		"placement.labels.net: expected a value of letters, digits, '-', '_' and '.' "
		"(at most 63), got \"a b\"" },
	{ BASE "tasks: {worker: {}}\nplacement: {labels: {net: null}}", "placement.labels.net",
		"placement.labels.net: expected a value of letters, digits, '-', '_' and '.' "
		"(at most 63), got null" },
	{ BASE "tasks: {worker: {}}\nplacement: {labels: {-net: ib}}", "placement.labels",
		"placement.labels: label name \"-net\": expected letters, digits, '-', '_', '.' and '/' "
		"(at most 63, starting with a letter or digit)" },
	{ BASE "tasks: {worker: {}}\npool: Batch", "pool",
		"pool: expected a name of lowercase letters, digits, '-', '_' and '.' "
		"(at most 63, starting with a letter or digit), got \"Batch\"" },
	{ "nmae: x\n" BASE "tasks: {worker: {}}", "nmae",
		"nmae: unknown field (did you mean 'name'?)" },
	{ "zzzzzz: x\n" BASE "tasks: {worker: {}}", "zzzzzz", "zzzzzz: unknown field" },
	/* The first error in the header's field order wins. */
	{ "name: BAD\ncommand: []\ntasks: {}", "name",
		"name: expected a name of lowercase letters, digits, '-', '_' and '.' "
		"(at most 63, starting with a letter or digit), got \"BAD\"" },
	{ "[1, 2]", "", "spec: expected a mapping of fields, got [1,2]" },
	/* interactive jobs */
	{ "tasks: {shell: {}}\ninteractive: yes", "interactive",
		"interactive: expected a mapping such as {idle_timeout: 1h} ({} for the master's "
		"default), got \"yes\"" },
	{ "tasks: {shell: {}}\ninteractive: {idle_timout: 1h}", "interactive.idle_timout",
		"interactive.idle_timout: unknown field (did you mean 'idle_timeout'?)" },
	{ "tasks: {shell: {}}\ninteractive: {idle_timeout: 0}", "interactive.idle_timeout",
		"interactive.idle_timeout: expected a duration > 0, got 0" },
	{ "tasks: {shell: {}}\ninteractive: {idle_timeout: later}", "interactive.idle_timeout",
		"interactive.idle_timeout: expected a duration such as 2h, 90m or 3600s, got \"later\"" },
	{ "tasks: {shell: {replicas: 2}}\ninteractive: {}", "tasks",
		"tasks: an interactive job has one task (one role, replicas 1), got 2" },
	{ "tasks: {a: {}, b: {}}\ninteractive: {}", "tasks",
		"tasks: an interactive job has one task (one role, replicas 1), got 2" },
	{ "framework: pytorch\n" BASE "tasks: {worker: {}}\ninteractive: {}", "framework",
		"framework: an interactive job is a terminal (framework command) or a notebook "
		"(framework jupyter), got \"pytorch\"" },
	{ "framework: jupyter\ntasks: {notebook: {}}\ninteractive: {}", "command",
		"command: an interactive jupyter job names its server's command (only a terminal's "
		"may be left out: the login shell)" },
	{ BASE "params: {lr: 0.1}\ntasks: {worker: {}}\ninteractive: {}\n"
		"sweep: {method: grid, params: {lr: [0.1, 0.2]}, objective: {metric: acc, mode: max}}", "sweep",
		"sweep: an interactive job cannot be a sweep's trial" },
	/* a batch job still needs its command */
	{ "tasks: {shell: {}}\ninteractive: null", "command",
		"command: expected a non-empty array of strings" },
};

static void check_bad(const char *text, const char *field, const char *msg)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	json_t *doc = load_ok(text);
	int ret = spec_from_json(doc, &spec, &eb);
	if (ret != YERR(INVALID_SPEC) || strcmp(eb.field, field) || strcmp(eb.msg, msg))
		print_message("spec:\n%s\n", text);
	assert_int_equal(ret, YERR(INVALID_SPEC));
	assert_int_equal(eb.code, YERR(INVALID_SPEC));
	assert_string_equal(eb.field, field);
	assert_string_equal(eb.msg, msg);
	spec_release(&spec);
	json_decref(doc);
}

static void test_validation_errors(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++)
		check_bad(bad_cases[i].text, bad_cases[i].field, bad_cases[i].msg);
}

static void test_limits_generated(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	char *big = xmalloc(4098);

	/* A string of 4097 bytes. */
	memset(big, 'x', 4097);
	big[4097] = '\0';
	strbuf_addf(&sb, "command: [run, %s]\ntasks: {worker: {}}", big);
	check_bad(sb.buf, "command[1]", "command[1]: a string of 4097 bytes, more than 4096");
	strbuf_reset(&sb);
	big[4096] = '\0';
	strbuf_addf(&sb, "command: [run]\nparams: {s: %s}\ntasks: {worker: {}}", big);
	{
		struct job_spec spec;
		parse_ok(sb.buf, &spec);
		spec_release(&spec);
	}

	/* 1025 arguments. */
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "command: [run");
	for (int i = 1; i < 1025; i++)
		strbuf_addstr(&sb, ", a");
	strbuf_addstr(&sb, "]\ntasks: {worker: {}}");
	check_bad(sb.buf, "command", "command: 1025 arguments, more than 1024");

	/* 65 roles. */
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "command: [run]\ntasks:\n");
	for (int i = 0; i < 65; i++)
		strbuf_addf(&sb, "  r%d: {}\n", i);
	check_bad(sb.buf, "tasks", "tasks: 65 roles, more than 64");

	/* 4097 tasks in all. */
	strbuf_reset(&sb);
	strbuf_addstr(&sb, "command: [run]\ntasks:\n");
	for (int i = 0; i < 4; i++)
		strbuf_addf(&sb, "  r%d: {replicas: 1024}\n", i);
	strbuf_addstr(&sb, "  last: {}\n");
	check_bad(sb.buf, "tasks", "tasks: 4097 tasks in all, more than 4096");

	strbuf_release(&sb);
	free(big);
}

static void test_defaults(void **state)
{
	struct job_spec spec;
	json_t *canon;
	parse_ok("command: [/bin/echo, hi]\ntasks: {worker: }\n", &spec);
	assert_string_equal(spec.name, "job");
	assert_string_equal(spec.framework, "command");
	assert_int_equal(argv_len(spec.command), 2);
	assert_string_equal(spec.command[0], "/bin/echo");
	assert_string_equal(spec.command[1], "hi");
	assert_non_null(spec.params);
	assert_int_equal(json_object_size(spec.params), 0);
	assert_non_null(spec.env);
	assert_int_equal(spec.nroles, 1);
	assert_string_equal(spec.roles[0].name, "worker");
	assert_int_equal(spec.roles[0].replicas, 1);
	assert_int_equal(spec.roles[0].gpus, 0);
	assert_int_equal(spec.roles[0].cpus_milli, 1000);
	assert_int_equal(spec.roles[0].memory, 0);
	assert_int_equal(spec.roles[0].pids, 4096);
	assert_null(spec.roles[0].command);
	assert_null(spec.gpu_model);
	assert_int_equal(spec.max_nodes, 0);
	assert_false(spec.wait_for_nodes);
	assert_int_equal(spec.priority, PRIO_NORMAL);
	assert_null(spec.team);
	assert_int_equal(spec.restart_max, 0);
	assert_int_equal(spec.timeout_ms, 0);
	assert_int_equal(spec_total_tasks(&spec), 1);

	canon = spec_to_json(&spec);
	assert_json_equal(canon,
		"{\"name\": \"job\", \"framework\": \"command\", \"command\": [\"/bin/echo\", \"hi\"],"
		" \"image\": null, \"params\": {}, \"env\": {},"
		" \"tasks\": {\"worker\": {\"replicas\": 1, \"gpus\": 0, \"cpus\": 1, \"memory\": null,"
		" \"pids\": 4096, \"command\": null}},"
		" \"data\": null, \"placement\": {\"gpu_model\": \"*\", \"max_nodes\": null,"
		" \"wait_for_nodes\": false, \"gpu_memory\": null, \"labels\": {}},"
		" \"preemption\": {\"grace\": 30, \"preemptible\": true},"
		" \"pool\": \"default\", \"priority\": \"normal\", \"team\": null,"
		" \"restart\": {\"max\": 0}, \"timeout\": null, \"on_disconnect\": \"stop\"}");
	json_decref(canon);
	spec_release(&spec);
}

static const char full_spec[] =
	"name: digits-ddp\n"
	"framework: command\n"
	"command: [/usr/bin/python3, train.py, --epochs, \"{params.epochs}\"]\n"
	"image: null\n"
	"params: {epochs: 5, lr: 0.05, tag: v1, fast: true}\n"
	"env: {OMP_NUM_THREADS: 2, MODE: fast, RATIO: 0.25, ON: true}\n"
	"tasks:\n"
	"  worker: {replicas: 2, gpus: 1, cpus: 1.5, memory: 2GiB, pids: 512}\n"
	"  ps: {cpus: 0.25, memory: 104857600, command: [/usr/bin/python3, ps.py, \"{params.lr}\"]}\n"
	"placement: {gpu_model: A100, max_nodes: 2, wait_for_nodes: true}\n"
	"priority: high\n"
	"team: vision\n"
	"restart: {max: 2}\n"
	"timeout: 1h30m\n";

/* The example that README and the demo submit. */
static void test_example_hello(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	char **argv;
	assert_int_equal(strbuf_read_file(&sb, SOURCE_ROOT "/examples/hello/job.yaml", 0), 0);
	parse_ok(sb.buf, &spec);
	assert_string_equal(spec.name, "hello");
	assert_int_equal(spec_total_tasks(&spec), 2);
	argv = spec_expand_argv(spec.command, spec.params, &eb);
	assert_non_null(argv);
	assert_string_equal(argv[3], "200000");
	argv_free(argv);
	spec_release(&spec);
	strbuf_release(&sb);
}

/* Explicit nulls count as absent; data: [] and a null role pass. */
static void test_nulls_are_absent(void **state)
{
	struct job_spec spec;
	parse_ok("name: null\nframework: ~\ncommand: [run]\nimage: null\nparams:\nenv:\n"
		 "tasks: {worker: {gpus: null, memory: null}, ps: }\ndata: []\nplacement:\n"
		 "priority: null\nteam: null\nrestart: {max: null}\ntimeout: null\n",
		&spec);
	assert_string_equal(spec.name, "job");
	assert_string_equal(spec.framework, "command");
	assert_int_equal(spec.nroles, 2);
	assert_int_equal(spec.roles[0].gpus, 0);
	assert_int_equal(spec.roles[1].replicas, 1);
	assert_int_equal(spec.priority, PRIO_NORMAL);
	assert_int_equal(spec.timeout_ms, 0);
	spec_release(&spec);
	spec_release(&spec); /* twice is fine */
}

/* A document from an API client may hold NULs (JSON "\u0000"): refused. */
static void test_nul_in_json_strings(void **state)
{
	static const struct bad_case cases[] = {
		{ "{\"command\": [\"a\\u0000b\"], \"tasks\": {\"w\": {}}}", "command[0]",
			"command[0]: NUL characters are not allowed" },
		{ "{\"command\": [\"a\"], \"params\": {\"p\": \"x\\u0000\"}, \"tasks\": {\"w\": {}}}",
			"params.p", "params.p: NUL characters are not allowed" },
		{ "{\"command\": [\"a\"], \"env\": {\"E\": \"x\\u0000\"}, \"tasks\": {\"w\": {}}}",
			"env.E", "env.E: NUL characters are not allowed" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf eb = ERRBUF_INIT;
		struct job_spec spec;
		json_error_t jerr;
		json_t *doc = json_loads(cases[i].text, JSON_ALLOW_NUL, &jerr);
		assert_non_null(doc);
		assert_int_equal(spec_from_json(doc, &spec, &eb), YERR(INVALID_SPEC));
		assert_string_equal(eb.field, cases[i].field);
		assert_string_equal(eb.msg, cases[i].msg);
		spec_release(&spec);
		json_decref(doc);
	}
}

static void test_full_spec(void **state)
{
	struct job_spec spec;
	parse_ok(full_spec, &spec);
	assert_string_equal(spec.name, "digits-ddp");
	assert_int_equal(argv_len(spec.command), 4);
	assert_string_equal(spec.command[3], "{params.epochs}");
	assert_int_equal(spec.nroles, 2);
	assert_string_equal(spec.roles[0].name, "worker");
	assert_string_equal(spec.roles[1].name, "ps");
	assert_int_equal(spec.roles[0].replicas, 2);
	assert_int_equal(spec.roles[0].gpus, 1);
	assert_int_equal(spec.roles[0].cpus_milli, 1500);
	assert_int_equal(spec.roles[0].memory, 2ULL << 30);
	assert_int_equal(spec.roles[0].pids, 512);
	assert_int_equal(spec.roles[1].cpus_milli, 250);
	assert_int_equal(spec.roles[1].memory, 104857600);
	assert_int_equal(argv_len(spec.roles[1].command), 3);
	assert_string_equal(spec.gpu_model, "A100");
	assert_int_equal(spec.max_nodes, 2);
	assert_true(spec.wait_for_nodes);
	assert_int_equal(spec.priority, PRIO_HIGH);
	assert_string_equal(spec.team, "vision");
	assert_int_equal(spec.restart_max, 2);
	assert_int_equal(spec.timeout_ms, 5400000);
	assert_int_equal(spec_total_tasks(&spec), 3);
	/* env values are all strings. */
	assert_json_equal(spec.env, "{\"OMP_NUM_THREADS\": \"2\", \"MODE\": \"fast\","
				    " \"RATIO\": \"0.25\", \"ON\": \"true\"}");
	spec_release(&spec);
}

static void test_placement_fields(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec, again;
	json_t *canon;

	parse_ok(BASE "tasks: {w: {gpus: 2}}\npool: research\n"
		 "placement: {gpu_memory: 40GiB, labels: {net: ib, rack: 3, nvlink: true}}\n",
		 &spec);
	assert_string_equal(spec.pool, "research");
	assert_int_equal(spec.gpu_memory, 40ULL << 30);
	assert_int_equal(spec.nlabels, 3);
	assert_string_equal(spec.labels[0].key, "net");
	assert_string_equal(spec.labels[0].value, "ib");
	assert_string_equal(spec.labels[1].value, "3");
	assert_string_equal(spec.labels[2].value, "true");
	canon = spec_to_json(&spec);
	assert_json_equal(json_object_get(canon, "placement"),
			  "{\"gpu_model\": \"*\", \"max_nodes\": null, \"wait_for_nodes\": false,"
			  " \"gpu_memory\": 42949672960,"
			  " \"labels\": {\"net\": \"ib\", \"rack\": \"3\", \"nvlink\": \"true\"}}");
	assert_string_equal(json_string_value(json_object_get(canon, "pool")), "research");
	assert_int_equal(spec_from_json(canon, &again, &eb), 0);
	assert_int_equal(again.gpu_memory, spec.gpu_memory);
	assert_int_equal(again.nlabels, 3);
	assert_string_equal(again.pool, "research");
	json_decref(canon);
	spec_release(&again);
	spec_release(&spec);

	/* the default pool by name is the same as none */
	parse_ok(BASE "tasks: {w: }\npool: default\n", &spec);
	assert_null(spec.pool);
	spec_release(&spec);

	/* a role of its own pool (the seeds' hybrid cluster), in the canonical
	 * form only when it has one; a role in the job's pool has none */
	parse_ok(BASE "tasks: {ps: {pool: cpu}, worker: {gpus: 1, pool: gpu}}\npool: gpu\n", &spec);
	assert_string_equal(spec.roles[0].pool, "cpu");
	assert_null(spec.roles[1].pool);
	canon = spec_to_json(&spec);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(canon, "tasks"),
									       "ps"), "pool")), "cpu");
	assert_null(json_object_get(json_object_get(json_object_get(canon, "tasks"), "worker"), "pool"));
	assert_int_equal(spec_from_json(canon, &again, &eb), 0);
	assert_string_equal(again.roles[0].pool, "cpu");
	json_decref(canon);
	spec_release(&again);
	spec_release(&spec);

	assert_true(spec_label_valid("topology.kubernetes.io/zone", "eu-1a"));
	assert_true(spec_label_valid("gpu", ""));
	assert_false(spec_label_valid("", "x"));
	assert_false(spec_label_valid("a", "b/c"));
	assert_false(spec_label_valid("a=b", "c"));
	(void)state;
}

static void test_round_trip(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec a, b;
	json_t *ja, *jb;
	char *sa, *sb;

	parse_ok(full_spec, &a);
	ja = spec_to_json(&a);
	assert_int_equal(spec_from_json(ja, &b, &eb), 0);
	jb = spec_to_json(&b);
	sa = json_dumps(ja, JSON_COMPACT);
	sb = json_dumps(jb, JSON_COMPACT);
	assert_string_equal(sa, sb);
	assert_true(strstr(sa, "\"timeout\":5400") != NULL);
	assert_true(strstr(sa, "\"cpus\":1.5") != NULL);
	assert_int_equal(b.roles[1].cpus_milli, 250);
	assert_int_equal(b.timeout_ms, a.timeout_ms);
	assert_int_equal(b.roles[0].memory, a.roles[0].memory);
	assert_string_equal(b.gpu_model, "A100");
	free(sa);
	free(sb);
	json_decref(ja);
	json_decref(jb);
	spec_release(&a);
	spec_release(&b);

	/* Milliseconds survive as a duration string. */
	parse_ok(BASE "tasks: {w: {cpus: 0.001}}\ntimeout: 1500ms\n", &a);
	ja = spec_to_json(&a);
	assert_string_equal(json_string_value(json_object_get(ja, "timeout")), "1500ms");
	assert_int_equal(spec_from_json(ja, &b, &eb), 0);
	assert_int_equal(b.timeout_ms, 1500);
	assert_int_equal(b.roles[0].cpus_milli, 1);
	json_decref(ja);
	spec_release(&a);
	spec_release(&b);
}

/* An interactive job: its command may be left out (the login shell), its
 * idle timeout is its own or the master's; the canonical form has it, and
 * reads back the same; a batch job's canonical form has no interactive. */
static void test_interactive(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec a, b;
	json_t *ja;

	parse_ok("name: shell\ntasks: {shell: {gpus: 1}}\ninteractive: {}\n", &a);
	assert_true(a.interactive);
	assert_int_equal(a.idle_timeout_ms, 0);
	assert_null(a.command);
	ja = spec_to_json(&a);
	assert_json_equal(json_object_get(ja, "interactive"), "{\"idle_timeout\": null}");
	assert_true(json_is_null(json_object_get(ja, "command")));
	assert_int_equal(spec_from_json(ja, &b, &eb), 0);
	assert_true(b.interactive);
	assert_null(b.command);
	json_decref(ja);
	spec_release(&a);
	spec_release(&b);

	parse_ok(BASE "tasks: {shell: {}}\ninteractive: {idle_timeout: 90m}\n", &a);
	assert_true(a.interactive);
	assert_int_equal(a.idle_timeout_ms, 90 * 60 * 1000);
	assert_string_equal(a.command[0], "run");
	ja = spec_to_json(&a);
	assert_json_equal(json_object_get(ja, "interactive"), "{\"idle_timeout\": 5400}");
	assert_int_equal(spec_from_json(ja, &b, &eb), 0);
	assert_int_equal(b.idle_timeout_ms, 90 * 60 * 1000);
	json_decref(ja);
	spec_release(&a);
	spec_release(&b);

	/* milliseconds survive as a duration string */
	parse_ok("tasks: {shell: {}}\ninteractive: {idle_timeout: 1500ms}\n", &a);
	ja = spec_to_json(&a);
	assert_json_equal(json_object_get(ja, "interactive"), "{\"idle_timeout\": \"1500ms\"}");
	json_decref(ja);
	spec_release(&a);

	parse_ok(BASE "tasks: {worker: {}}\n", &a);
	assert_false(a.interactive);
	ja = spec_to_json(&a);
	assert_null(json_object_get(ja, "interactive"));
	json_decref(ja);
	spec_release(&a);
	(void)state;
}

/* ---- --set ------------------------------------------------------------ */

/* ---- image references ------------------------------------------------ */

static void test_image_refs_good(void **state)
{
	static const char *const good[] = {
		"debian",
		"debian:bookworm",
		"pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime",
		"nvcr.io/nvidia/pytorch:23.10-py3",
		"localhost:5000/team/train:v1",
		"registry.example.com:443/a/b/c",
		"10.0.0.2:5000/x",
		"Registry.Example.com/x",
		"my_org/my__img/a-b---c/x.y",
		"ubuntu:_latest",
		"debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"debian:12@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"a:A_b.c-d",
	};
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct strbuf sb = STRBUF_INIT;
		struct job_spec spec;
		json_t *canon;

		strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: '%s'\n", good[i]);
		parse_ok(sb.buf, &spec);
		assert_string_equal(spec.image, good[i]);
		canon = spec_to_json(&spec);
		assert_string_equal(json_string_value(json_object_get(canon, "image")), good[i]);
		json_decref(canon);
		spec_release(&spec);
		strbuf_release(&sb);
	}
	(void)state;
}

static void test_image_refs_bad(void **state)
{
	static const struct {
		const char *ref;
		const char *why;
	} cases[] = {
		{ "Ubuntu:22.04", "repository names must be lowercase" },
		{ "pytorch/PyTorch", "repository names must be lowercase" },
		{ "debian:", "the tag must be at most 128 letters, digits, '_', '.' and '-', "
			     "not starting with '.' or '-'" },
		{ "debian:-x", "the tag must be at most 128 letters, digits, '_', '.' and '-', "
			       "not starting with '.' or '-'" },
		{ "debian:a+b", "the tag must be at most 128 letters, digits, '_', '.' and '-', "
				"not starting with '.' or '-'" },
		{ "debian@sha256:abc", "the digest must be sha256: and 64 lowercase hex digits" },
		{ "debian@md5:0123456789abcdef0123456789abcdef",
			"the digest must be sha256: and 64 lowercase hex digits" },
		{ "debian@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
			"the digest must be sha256: and 64 lowercase hex digits" },
		{ ":tag", "the repository name is empty" },
		{ "/debian", "a path component of the repository name is empty" },
		{ "library//debian", "a path component of the repository name is empty" },
		{ "debian/", "a path component of the repository name is empty" },
		{ "host:port/x", "the registry must be HOST or HOST:PORT" },
		{ "deb..ian", "the repository name must be lowercase letters and digits separated by "
			      "'.', '_', '__', '-' or '/'" },
		{ "deb___ian", "the repository name must be lowercase letters and digits separated by "
			       "'.', '_', '__', '-' or '/'" },
		{ "-debian", "the repository name must be lowercase letters and digits separated by "
			     "'.', '_', '__', '-' or '/'" },
		{ "debian-", "the repository name must be lowercase letters and digits separated by "
			     "'.', '_', '__', '-' or '/'" },
		{ "deb ian", "the repository name must be lowercase letters and digits separated by "
			     "'.', '_', '__', '-' or '/'" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct strbuf sb = STRBUF_INIT, msg = STRBUF_INIT;

		strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: '%s'\n", cases[i].ref);
		strbuf_addf(&msg, "image: \"%s\" is not a valid image reference: %s", cases[i].ref,
			    cases[i].why);
		check_bad(sb.buf, "image", msg.buf);
		strbuf_release(&sb);
		strbuf_release(&msg);
	}
	(void)state;
}

/* The length limits: 255 characters in all, a tag of at most 128. */
static void test_image_ref_limits(void **state)
{
	struct strbuf sb = STRBUF_INIT, ref = STRBUF_INIT;
	struct job_spec spec;

	strbuf_addstr(&ref, "a:");
	for (int i = 0; i < 128; i++)
		strbuf_addch(&ref, 't');
	strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: %s\n", ref.buf);
	parse_ok(sb.buf, &spec);
	spec_release(&spec);
	strbuf_addch(&ref, 't');
	strbuf_reset(&sb);
	strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: %s\n", ref.buf);
	{
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok(sb.buf);
		assert_int_equal(spec_from_json(doc, &spec, &eb), YERR(INVALID_SPEC));
		assert_string_equal(eb.field, "image");
		assert_non_null(strstr(eb.msg, "the tag must be at most 128"));
		spec_release(&spec);
		json_decref(doc);
	}

	strbuf_reset(&ref);
	for (int i = 0; i < 255; i++)
		strbuf_addch(&ref, i % 2 ? '/' : 'a');
	strbuf_reset(&sb);
	strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: %s\n", ref.buf);
	parse_ok(sb.buf, &spec);
	spec_release(&spec);
	strbuf_addch(&ref, 'a');
	strbuf_reset(&sb);
	strbuf_addf(&sb, BASE "tasks: {worker: {}}\nimage: %s\n", ref.buf);
	{
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = load_ok(sb.buf);
		assert_int_equal(spec_from_json(doc, &spec, &eb), YERR(INVALID_SPEC));
		assert_string_equal(eb.field, "image");
		assert_non_null(strstr(eb.msg, "is not a valid image reference: longer than 255 characters"));
		spec_release(&spec);
		json_decref(doc);
	}
	strbuf_release(&sb);
	strbuf_release(&ref);
	(void)state;
}

/* data: sources, default mounts and the canonical form. */
static void test_data(void **state)
{
	struct job_spec spec;
	json_t *canon;

	parse_ok(BASE "tasks: {worker: {}}\ndata:\n"
		 "  - {source: yard://digits@2}\n"
		 "  - {source: yard://digits, mount: latest}\n"
		 "  - {source: s3://bucket/some/prefix/}\n"
		 "  - {source: \"https://host/f.tar?x=1\", sha256: "
		 "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}\n"
		 "  - {source: file:///shared/imagenet}\n"
		 "  - {source: s3://bucket2, mount: a/b/c}\n"
		 "  - {source: yard-job://42/outputs}\n"
		 "  - {source: yard-job://42/checkpoint}\n", &spec);
	assert_int_equal(spec.ndata, 8);
	assert_int_equal(spec.data[6].kind, DATA_JOB);
	assert_int_equal(spec.data[6].job, 42);
	assert_false(spec.data[6].checkpoint);
	assert_string_equal(spec.data[6].mount, "job-42");
	assert_true(spec.data[7].checkpoint);
	assert_string_equal(spec.data[7].mount, "job-42-checkpoint");
	assert_int_equal(spec.data[0].kind, DATA_YARD);
	assert_string_equal(spec.data[0].name, "digits");
	assert_int_equal(spec.data[0].version, 2);
	assert_string_equal(spec.data[0].mount, "digits");
	assert_int_equal(spec.data[1].version, 0);
	assert_string_equal(spec.data[1].mount, "latest");
	assert_int_equal(spec.data[2].kind, DATA_S3);
	assert_string_equal(spec.data[2].mount, "prefix");
	assert_int_equal(spec.data[3].kind, DATA_HTTPS);
	assert_string_equal(spec.data[3].mount, "f.tar");
	assert_int_equal(spec.data[4].kind, DATA_FILE);
	assert_string_equal(spec.data[4].mount, "imagenet");
	assert_string_equal(spec.data[5].mount, "a/b/c");
	canon = spec_to_json(&spec);
	assert_json_equal(json_object_get(canon, "data"),
		"[{\"source\": \"yard://digits@2\", \"mount\": \"digits\", \"sha256\": null},"
		" {\"source\": \"yard://digits\", \"mount\": \"latest\", \"sha256\": null},"
		" {\"source\": \"s3://bucket/some/prefix/\", \"mount\": \"prefix\", \"sha256\": null},"
		" {\"source\": \"https://host/f.tar?x=1\", \"mount\": \"f.tar\", \"sha256\":"
		" \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"},"
		" {\"source\": \"file:///shared/imagenet\", \"mount\": \"imagenet\", \"sha256\": null},"
		" {\"source\": \"s3://bucket2\", \"mount\": \"a/b/c\", \"sha256\": null},"
		" {\"source\": \"yard-job://42/outputs\", \"mount\": \"job-42\", \"sha256\": null},"
		" {\"source\": \"yard-job://42/checkpoint\", \"mount\": \"job-42-checkpoint\", \"sha256\": null}]");
	{
		/* the canonical form parses back to the same */
		struct job_spec again;
		struct errbuf eb = ERRBUF_INIT;
		json_t *c2;
		assert_int_equal(spec_from_json(canon, &again, &eb), 0);
		c2 = spec_to_json(&again);
		assert_true(json_equal(canon, c2));
		json_decref(c2);
		spec_release(&again);
	}
	json_decref(canon);
	spec_release(&spec);
	(void)state;
}

/* ---- placeholders ----------------------------------------------------- */

static void test_expand_argv(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char *argv[] = { "python", "--lr={params.lr}", "{params.name}", "{{literal}}",
		"{params.flag}", "n={params.n}/{params.n}", "}}{{params.n}}", "{gpus}", "{", NULL };
	json_t *params = json_pack("{s:f, s:s, s:b, s:I}", "lr", 0.05, "name", "x y", "flag", 1,
		"n", (json_int_t)5);
	char **out = spec_expand_argv(argv, params, &eb);
	const char *want[] = { "python", "--lr=0.05", "x y", "{literal}", "true", "n=5/5",
		"}{params.n}", "{gpus}", "{" };
	assert_non_null(out);
	assert_int_equal(argv_len(out), ARRAY_SIZE(want));
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		assert_string_equal(out[i], want[i]);
	argv_free(out);

	argv[1] = "{params.missing}";
	out = spec_expand_argv(argv, params, &eb);
	assert_null(out);
	assert_int_equal(eb.code, YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "command");
	assert_string_equal(eb.msg,
		"command: \"{params.missing}\" names a parameter that is not in params");
	json_decref(params);

	assert_int_equal(argv_len(NULL), 0);
	argv_free(NULL);
}

static void test_expand_reals(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char *argv[] = { "{params.a}", "{params.b}", "{params.c}", NULL };
	json_t *params = json_pack("{s:f, s:f, s:f}", "a", 0.1, "b", 2.0, "c", 1e-7);
	char **out = spec_expand_argv(argv, params, &eb);
	assert_non_null(out);
	assert_string_equal(out[0], "0.1");
	assert_string_equal(out[1], "2.0");
	assert_string_equal(out[2], "1e-07");
	argv_free(out);
	json_decref(params);
}

static void test_scalar_str(void **state)
{
	static const struct {
		const char *json;
		const char *text;
	} cases[] = {
		{ "\"a b\"", "a b" }, { "5", "5" }, { "-12", "-12" }, { "0.1", "0.1" },
		{ "2.0", "2.0" }, { "1e300", "1e+300" }, { "true", "true" }, { "false", "false" },
		{ "0.3", "0.3" }, { "3.14159", "3.14159" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);
		char *s;
		assert_non_null(v);
		s = spec_scalar_str(v);
		assert_string_equal(s, cases[i].text);
		free(s);
		json_decref(v);
	}
}

/* ---- code from git (common/spec_code.h) -------------------------------- */

static void test_code_git(void **state)
{
	struct job_spec spec;
	json_t *canon;

	parse_ok("command: [x]\ntasks: {w: {}}\n"
		 "code: {git: 'https://git.example/team/repo.git', ref: feature/x, path: src/train/}\n",
		 &spec);
	assert_non_null(spec.code);
	assert_string_equal(spec.code->git, "https://git.example/team/repo.git");
	assert_string_equal(spec.code->ref, "feature/x");
	assert_string_equal(spec.code->path, "src/train");
	assert_null(spec.code->sha);
	canon = spec_to_json(&spec);
	assert_json_equal(json_object_get(canon, "code"),
			  "{\"git\": \"https://git.example/team/repo.git\", \"ref\": \"feature/x\", "
			  "\"path\": \"src/train\", \"sha\": null}");
	spec_release(&spec);
	/* the canonical form reads back the same */
	assert_int_equal(spec_from_json(canon, &spec, &(struct errbuf)ERRBUF_INIT), 0);
	assert_string_equal(spec.code->path, "src/train");
	spec_release(&spec);
	json_decref(canon);

	/* defaults: ref HEAD, the whole tree; scp-like and git:// URLs; a sha */
	parse_ok("command: [x]\ntasks: {w: {}}\ncode: {git: 'git@git.example:team/repo.git', "
		 "sha: 0123456789abcdef0123456789abcdef01234567}\n", &spec);
	assert_string_equal(spec.code->ref, "HEAD");
	assert_null(spec.code->path);
	assert_string_equal(spec.code->sha, "0123456789abcdef0123456789abcdef01234567");
	spec_release(&spec);
	parse_ok("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://127.0.0.1:9418/repo', path: 'a/'}\n",
		 &spec);
	assert_string_equal(spec.code->path, "a");
	spec_release(&spec);

	/* no code: no field in the canonical form (specs from before read the same) */
	parse_ok("command: [x]\ntasks: {w: {}}\n", &spec);
	assert_null(spec.code);
	canon = spec_to_json(&spec);
	assert_null(json_object_get(canon, "code"));
	json_decref(canon);
	spec_release(&spec);
	(void)state;
}

/* image: {build: ...}: an image built from the job's code (spec_image.h) */
static void test_image_build(void **state)
{
	struct job_spec spec;
	json_t *canon;

	parse_ok(BASE "tasks: {worker: {}}\nimage: {build: {dockerfile: docker/train.Dockerfile, "
		 "args: {EPOCHS: 3, FAST: true, TAG: v1}}}\n", &spec);
	assert_null(spec.image);
	assert_non_null(spec.image_build);
	assert_string_equal(spec.image_build->dockerfile, "docker/train.Dockerfile");
	assert_string_equal(spec_image_shown(&spec), "build of docker/train.Dockerfile");
	canon = spec_to_json(&spec);
	/* args are texts, as env's values */
	assert_json_equal(json_object_get(canon, "image"),
			  "{\"build\": {\"dockerfile\": \"docker/train.Dockerfile\", "
			  "\"args\": {\"EPOCHS\": \"3\", \"FAST\": \"true\", \"TAG\": \"v1\"}}}");
	spec_release(&spec);
	/* the canonical form reads back the same */
	assert_int_equal(spec_from_json(canon, &spec, &(struct errbuf)ERRBUF_INIT), 0);
	assert_string_equal(spec.image_build->dockerfile, "docker/train.Dockerfile");
	assert_string_equal(json_string_value(json_object_get(spec.image_build->args, "EPOCHS")), "3");
	spec_release(&spec);
	json_decref(canon);

	/* defaults: ./Dockerfile, no args */
	parse_ok(BASE "tasks: {worker: {}}\nimage: {build: {}}\n", &spec);
	assert_string_equal(spec.image_build->dockerfile, "Dockerfile");
	assert_int_equal(json_object_size(spec.image_build->args), 0);
	/* built from the code: a job without any is refused by its submission */
	struct errbuf eb = ERRBUF_INIT;
	assert_int_equal(spec_image_check_code(&spec, true, &eb), 0);
	assert_int_equal(spec_image_check_code(&spec, false, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "image.build");
	spec_release(&spec);

	check_bad(BASE "tasks: {worker: {}}\nimage: {build: {dockerfile: ../Dockerfile}}\n",
		  "image.build.dockerfile", "image.build.dockerfile: '../Dockerfile' is not a path inside "
		  "the job's code: it holds a '.' or '..' component");
	check_bad(BASE "tasks: {worker: {}}\nimage: {build: {dockerfile: /etc/Dockerfile}}\n",
		  "image.build.dockerfile", "image.build.dockerfile: '/etc/Dockerfile' is not a path inside "
		  "the job's code: it is absolute (it must start at the top of the code)");
	check_bad(BASE "tasks: {worker: {}}\nimage: {build: {args: {1X: a}}}\n", "image.build.args.1X",
		  "image.build.args.1X: expected a variable name of letters, digits and '_' (at most 64, "
		  "not starting with a digit)");
	check_bad(BASE "tasks: {worker: {}}\nimage: {build: {args: {A: [1]}}}\n", "image.build.args.A",
		  "image.build.args.A: expected a string, number or bool, got [1]");
	check_bad(BASE "tasks: {worker: {}}\nimage: {build: {dockerfle: D}}\n", "image.build.dockerfle",
		  "image.build.dockerfle: unknown field (did you mean 'dockerfile'?)");
	check_bad(BASE "tasks: {worker: {}}\nimage: {}\n", "image",
		  "image: expected build: {dockerfile, args} in a mapping");
	check_bad(BASE "tasks: {worker: {}}\nimage: {build: x}\n", "image.build",
		  "image.build: expected a mapping with dockerfile and args, got \"x\"");
	(void)state;
}

static void test_code_git_refused(void **state)
{
	check_bad("command: [x]\ntasks: {w: {}}\ncode: https://git.example/r.git\n", "code",
		  "code: expected a mapping such as {git: https://host/repo.git, ref: main}, got "
		  "\"https://git.example/r.git\"");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {ref: main}\n", "code.git",
		  "code.git: the repository's URL is required");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: x, branch: main}\n", "code.branch",
		  "code.branch: unknown field");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'https://bob:s3cret@git.example/r.git'}\n",
		  "code.git", "code.git: 'https://bob:s3cret@git.example/r.git' is not valid: credentials "
		  "never go in the spec (the master's git-credential option holds them): remove the "
		  "USER@ part");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'ssh://git:pw@git.example/r.git'}\n",
		  "code.git", "code.git: 'ssh://git:pw@git.example/r.git' is not valid: credentials "
		  "never go in the spec (the master's git-credential option holds them): remove the "
		  "password");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'file:///etc'}\n", "code.git",
		  "code.git: 'file:///etc' is not valid: the scheme must be https, http, ssh or git "
		  "(never file: the master's own disk)");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: /srv/repo}\n", "code.git",
		  "code.git: '/srv/repo' is not valid: a local path is not a repository the master may "
		  "read; expected https://, http://, ssh://, git:// or [USER@]HOST:PATH");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'https://git.example'}\n", "code.git",
		  "code.git: 'https://git.example' is not valid: it names no repository path");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', ref: 'a..b'}\n", "code.ref",
		  "code.ref: 'a..b' is not valid: a ref holds no '..', '//', '@{' and no component "
		  "that starts with '.'");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', ref: '-x'}\n", "code.ref",
		  "code.ref: '-x' is not valid: a ref does not start with '-' or '/', nor end with '/' "
		  "or '.'");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', ref: 'a b'}\n", "code.ref",
		  "code.ref: 'a b' is not valid: a ref holds no space, control character or any of "
		  "~^:?*[\\");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', path: '../etc'}\n",
		  "code.path", "code.path: '../etc' is not valid: it holds a '.' or '..' component");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', path: '/etc'}\n",
		  "code.path", "code.path: '/etc' is not valid: it is absolute (it must start at the "
		  "top of the code)");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', sha: ABC}\n", "code.sha",
		  "code.sha: 'ABC' is not valid: expected a commit SHA, 40 lowercase hex digits");
	check_bad("command: [x]\ntasks: {w: {}}\ncode: {git: 'git://h/r', ref: 7}\n", "code.ref",
		  "code.ref: expected a string, got 7");
	(void)state;
}

static void split_ok(const char *arg, const char *url, const char *ref)
{
	struct errbuf eb = ERRBUF_INIT;
	char *u, *r;

	if (spec_code_split_arg(arg, &u, &r, &eb))
		print_message("%s: %s\n", arg, eb.msg);
	assert_string_equal(u, url);
	if (ref)
		assert_string_equal(r, ref);
	else
		assert_null(r);
	free(u);
	free(r);
}

static void test_code_split_arg(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char *u, *r;

	split_ok("https://git.example/r.git@main", "https://git.example/r.git", "main");
	split_ok("https://git.example/r.git", "https://git.example/r.git", NULL);
	split_ok("git@git.example:team/r.git", "git@git.example:team/r.git", NULL);
	split_ok("git@git.example:team/r.git@feature/x", "git@git.example:team/r.git", "feature/x");
	split_ok("ssh://git@git.example/r", "ssh://git@git.example/r", NULL);
	split_ok("ssh://git@git.example/r@v1.2", "ssh://git@git.example/r", "v1.2");
	split_ok("git://127.0.0.1:9418/r@0123456789abcdef0123456789abcdef01234567",
		 "git://127.0.0.1:9418/r", "0123456789abcdef0123456789abcdef01234567");
	assert_int_equal(spec_code_split_arg("/srv/r@main", &u, &r, &eb), YERR(BAD_REQUEST));
	assert_null(u);
	assert_string_equal(eb.msg, "--git '/srv/r@main': expected URL[@REF]: a local path is not a "
			    "repository the master may read; expected https://, http://, ssh://, "
			    "git:// or [USER@]HOST:PATH");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yaml_typing),
		cmocka_unit_test(test_yaml_keeps_order),
		cmocka_unit_test(test_json_text),
		cmocka_unit_test(test_load_refusals),
		cmocka_unit_test(test_load_syntax_error_has_line),
		cmocka_unit_test(test_load_depth),
		cmocka_unit_test(test_load_size_limit),
		cmocka_unit_test(test_validation_errors),
		cmocka_unit_test(test_limits_generated),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_example_hello),
		cmocka_unit_test(test_nulls_are_absent),
		cmocka_unit_test(test_nul_in_json_strings),
		cmocka_unit_test(test_full_spec),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_interactive),
		cmocka_unit_test(test_code_git),
		cmocka_unit_test(test_code_git_refused),
		cmocka_unit_test(test_image_build),
		cmocka_unit_test(test_code_split_arg),
		cmocka_unit_test(test_placement_fields),
		cmocka_unit_test(test_image_refs_good),
		cmocka_unit_test(test_image_refs_bad),
		cmocka_unit_test(test_image_ref_limits),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_expand_argv),
		cmocka_unit_test(test_expand_reals),
		cmocka_unit_test(test_scalar_str),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
