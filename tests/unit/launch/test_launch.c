/*
 * The launchers against golden environments (tests/unit/launch/golden/):
 * each case places a job by hand, runs launch_task for every task and
 * renders what each task gets as text: its argv, then KEY=VALUE lines in
 * name order. A golden file holds the whole expected text, so a change to a
 * launcher shows up as a readable diff. With YARD_UPDATE_GOLDEN=1 the files
 * are rewritten instead (review the diff before committing).
 */
#include "base/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "launch/launch.h"

static const struct launch_node two_nodes[] = {
	{ "gpu-a", "10.0.0.1", "eth0" },
	{ "gpu-b", "10.0.0.2", "ens5" },
};

static void render(const struct launch_job *job, char *const *cmd, struct strbuf *out)
{
	for (size_t i = 0; i < job->ntasks; i++) {
		const struct launch_task *t = &job->tasks[i];
		struct errbuf eb = ERRBUF_INIT;
		json_t *env = json_object();
		size_t n = argv_len(cmd);
		char **argv = xcalloc(n + 1, sizeof(*argv));
		const char **keys;
		const char *k;
		json_t *v;
		size_t nk = 0;

		for (size_t a = 0; a < n; a++)
			argv[a] = xstrdup(cmd[a]);
		assert_int_equal(launch_task(job, i, &argv, env, &eb), 0);
		strbuf_addf(out, "== %s/%u on %s\nargv:", t->role, t->index, job->nodes[t->node].name);
		for (size_t a = 0; argv[a]; a++)
			strbuf_addf(out, " %s", argv[a]);
		strbuf_addch(out, '\n');
		keys = xcalloc(json_object_size(env) + 1, sizeof(*keys));
		json_object_foreach(env, k, v)
			keys[nk++] = k;
		for (size_t x = 1; x < nk; x++) /* insertion sort: a handful of keys */
			for (size_t y = x; y > 0 && strcmp(keys[y - 1], keys[y]) > 0; y--) {
				const char *tmp = keys[y];
				keys[y] = keys[y - 1];
				keys[y - 1] = tmp;
			}
		for (size_t x = 0; x < nk; x++)
			strbuf_addf(out, "%s=%s\n", keys[x], json_string_value(json_object_get(env, keys[x])));
		free(keys);
		argv_free(argv);
		json_decref(env);
	}
}

static void check_golden(const char *name, const struct strbuf *got)
{
	char *path = xasprintf("%s/tests/unit/launch/golden/%s.txt", SOURCE_ROOT, name);
	struct strbuf want = STRBUF_INIT;
	const char *update = getenv("YARD_UPDATE_GOLDEN");

	if (update && !strcmp(update, "1")) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fwrite(got->buf, 1, got->len, f);
		fclose(f);
	} else {
		if (strbuf_read_file(&want, path, 1 << 20))
			fail_msg("cannot read golden file '%s'", path);
		if (strcmp(want.buf, got->buf))
			fail_msg("%s differs from its golden file %s\n--- want\n%s--- got\n%s", name, path,
				 want.buf, got->buf);
	}
	strbuf_release(&want);
	free(path);
}

/* Renders one placed job and compares it with its golden file. */
static void run_case(const char *golden, const char *framework, size_t nnodes,
		     const struct launch_task *tasks, size_t ntasks, char *const *cmd)
{
	struct launch_job job = { framework, two_nodes, nnodes, tasks, ntasks, 7 };
	struct strbuf out = STRBUF_INIT;
	render(&job, cmd, &out);
	check_golden(golden, &out);
	strbuf_release(&out);
}

static const unsigned g0[] = { 0 }, g1[] = { 1 }, g01[] = { 0, 1 }, g23[] = { 2, 3 };
static char *const train[] = { "python3", "train.py", "--epochs", "5", NULL };

/* 2 nodes x 1 GPU: one worker on each. */
static void test_pytorch_2x1(void **state)
{
	const struct launch_task tasks[] = {
		{ "worker", 0, 0, g0, 1, 30000 },
		{ "worker", 1, 1, g1, 1, 30004 },
	};
	run_case("pytorch-2x1", "pytorch", 2, tasks, 2, train);
}

/* 1 node x 2 GPUs: two workers on one node. */
static void test_pytorch_1x2(void **state)
{
	const struct launch_task tasks[] = {
		{ "worker", 0, 0, g0, 1, 30000 },
		{ "worker", 1, 0, g1, 1, 30001 },
	};
	run_case("pytorch-1x2", "pytorch", 1, tasks, 2, train);
}

/* 2 nodes x 2 GPUs: four workers, ranks interleaved over the nodes, plus a
 * master role listed first (PyTorchJob's layout). */
static void test_pytorch_2x2(void **state)
{
	const struct launch_task tasks[] = {
		{ "master", 0, 1, g23, 2, 30010 },
		{ "worker", 0, 0, g01, 2, 30000 },
		{ "worker", 1, 1, g01, 2, 30011 },
		{ "worker", 2, 0, g23, 2, 30001 },
	};
	run_case("pytorch-2x2", "pytorch", 2, tasks, 4, train);
}

static void test_tensorflow_chief_workers_ps(void **state)
{
	const struct launch_task tasks[] = {
		{ "chief", 0, 0, g0, 1, 30000 },
		{ "worker", 0, 0, g1, 1, 30001 },
		{ "worker", 1, 1, g0, 1, 30000 },
		{ "ps", 0, 1, NULL, 0, 30001 },
		{ "evaluator", 0, 1, g1, 1, 30002 },
	};
	run_case("tensorflow-chief-2workers-ps", "tensorflow", 2, tasks, 5, train);
}

static void test_mxnet_scheduler_server_workers(void **state)
{
	const struct launch_task tasks[] = {
		{ "scheduler", 0, 0, NULL, 0, 30000 },
		{ "server", 0, 1, NULL, 0, 30000 },
		{ "worker", 0, 0, g0, 1, 30001 },
		{ "worker", 1, 1, g0, 1, 30001 },
	};
	run_case("mxnet-scheduler-server-2workers", "mxnet", 2, tasks, 4, train);
}

/* Three ranks on node b, two on node a, rank 0 on b: b comes first. */
static void test_mpi_hostfile(void **state)
{
	char *const prog[] = { "./allreduce", "--size", "1024", NULL };
	const struct launch_task tasks[] = {
		{ "worker", 0, 1, g0, 1, 0 },
		{ "worker", 1, 0, g0, 1, 0 },
		{ "worker", 2, 1, g1, 1, 0 },
		{ "worker", 3, 0, g1, 1, 0 },
		{ "worker", 4, 1, NULL, 0, 0 },
	};
	run_case("mpi-hostfile", "mpi", 2, tasks, 5, prog);
}

static void test_jax_caffe_command(void **state)
{
	char *const caffe[] = { "caffe", "train", "-solver", "s.prototxt", "-gpu", "{gpus}", NULL };
	const struct launch_task jt[] = { { "worker", 0, 0, g0, 1, 30000 }, { "worker", 1, 1, g0, 1, 30002 } };
	const struct launch_task ct[] = { { "worker", 0, 1, g23, 2, 0 } };
	struct launch_job jax = { "jax", two_nodes, 2, jt, 2, 7 };
	struct launch_job cf = { "caffe", two_nodes, 2, ct, 1, 7 }; /* holds GPUs 2,3: sees 0,1 */
	struct launch_job cmd = { "command", two_nodes, 2, jt, 2, 7 };
	struct strbuf out = STRBUF_INIT;
	render(&jax, train, &out);
	render(&cf, caffe, &out);
	render(&cmd, caffe, &out);
	check_golden("jax-caffe-command", &out);
	strbuf_release(&out);
}

/* A notebook server on its port, under the proxy's path to it. */
static void test_jupyter(void **state)
{
	char *const nb[] = { "jupyter-notebook", "--notebook-dir=.", NULL };
	const struct launch_task tasks[] = { { "notebook", 0, 1, g0, 1, 30007 } };
	struct launch_job job = { "jupyter", two_nodes, 2, tasks, 1, 42 };
	struct strbuf out = STRBUF_INIT;
	struct spec_role one[] = { { .name = "notebook", .replicas = 1 } };
	struct spec_role two[] = { { .name = "notebook", .replicas = 2 } };
	struct job_spec s = { .framework = "jupyter", .roles = one, .nroles = 1 };
	struct errbuf eb = ERRBUF_INIT;

	render(&job, nb, &out);
	check_golden("jupyter", &out);
	strbuf_release(&out);
	assert_true(launch_needs_port("jupyter"));
	assert_int_equal(launch_validate(&s, &eb), 0);
	s.roles = two;
	assert_int_equal(launch_validate(&s, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "tasks.notebook.replicas");
	(void)state;
}

/* A framework that needs ports refuses a task without one, and an unknown
 * framework is refused: errors, not crashes. */
static void test_refusals(void **state)
{
	const struct launch_task tasks[] = { { "worker", 0, 0, g0, 1, 0 } };
	struct launch_job job = { "pytorch", two_nodes, 1, tasks, 1, 7 };
	struct errbuf eb = ERRBUF_INIT;
	char **argv = xcalloc(2, sizeof(*argv));
	json_t *env = json_object();

	argv[0] = xstrdup("x");
	assert_int_not_equal(launch_task(&job, 0, &argv, env, &eb), 0);
	assert_non_null(strstr(eb.msg, "no port"));
	job.framework = "jupyter";
	assert_int_not_equal(launch_task(&job, 0, &argv, env, &eb), 0);
	assert_non_null(strstr(eb.msg, "has no port left"));
	job.framework = "theano";
	assert_int_not_equal(launch_task(&job, 0, &argv, env, &eb), 0);
	job.framework = "pytorch";
	assert_int_not_equal(launch_task(&job, 5, &argv, env, &eb), 0);
	argv_free(argv);
	json_decref(env);
}

/* What launch_validate refuses: an mpi job in an image (its ranks run yard's
 * own helpers, which images do not have). */
static void test_validate_image(void **state)
{
	struct spec_role worker[] = { { .name = "worker", .replicas = 2 } };
	struct job_spec s = { .framework = "mpi", .roles = worker, .nroles = 1 };
	static char *const ok[] = { "command", "pytorch", "jax" };
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(launch_validate(&s, &eb), 0);
	s.image = "horovod/horovod:0.28.1";
	assert_int_equal(launch_validate(&s, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "image");
	assert_string_equal(eb.msg,
			    "image: framework mpi cannot run in an image yet: rank 0 runs "
			    "'yard mpirun' and the other ranks 'yard mpi-worker', helpers that an "
			    "image does not have (leave image out to use the process runtime)");
	s.framework = "horovod";
	assert_int_equal(launch_validate(&s, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "image");
	assert_non_null(strstr(eb.msg, "framework horovod cannot run in an image"));
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		s.framework = ok[i];
		assert_int_equal(launch_validate(&s, &eb), 0);
	}
	(void)state;
}

/* Who decides a job's success. */
static void test_decides(void **state)
{
	struct spec_role tf_roles[] = { { .name = "chief" }, { .name = "worker" }, { .name = "ps" } };
	struct spec_role tf_nochief[] = { { .name = "worker" }, { .name = "ps" } };
	struct spec_role mx[] = { { .name = "scheduler" }, { .name = "server" }, { .name = "worker" } };
	struct job_spec s = { .framework = "tensorflow", .roles = tf_roles, .nroles = 3 };

	assert_true(launch_decides(&s, "chief", 0));
	assert_false(launch_decides(&s, "worker", 0));
	assert_false(launch_decides(&s, "ps", 0));
	s.roles = tf_nochief;
	s.nroles = 2;
	assert_true(launch_decides(&s, "worker", 0));
	assert_false(launch_decides(&s, "worker", 1));
	s = (struct job_spec){ .framework = "mxnet", .roles = mx, .nroles = 3 };
	assert_true(launch_decides(&s, "worker", 1));
	assert_false(launch_decides(&s, "server", 0));
	assert_false(launch_decides(&s, "scheduler", 0));
	s = (struct job_spec){ .framework = "mpi", .roles = tf_nochief, .nroles = 1 };
	assert_true(launch_decides(&s, "worker", 0));
	assert_false(launch_decides(&s, "worker", 1));
	s.framework = "pytorch";
	assert_true(launch_decides(&s, "worker", 7));
	assert_true(launch_needs_port("pytorch"));
	assert_false(launch_needs_port("mpi"));
	assert_false(launch_needs_port("command"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pytorch_2x1),
		cmocka_unit_test(test_pytorch_1x2),
		cmocka_unit_test(test_pytorch_2x2),
		cmocka_unit_test(test_tensorflow_chief_workers_ps),
		cmocka_unit_test(test_mxnet_scheduler_server_workers),
		cmocka_unit_test(test_mpi_hostfile),
		cmocka_unit_test(test_jax_caffe_command),
		cmocka_unit_test(test_jupyter),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_validate_image),
		cmocka_unit_test(test_decides),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
