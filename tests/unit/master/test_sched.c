#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/sched.h"

static struct sched_gpu gpus_a[4], gpus_b[4];

static void mk_node(struct sched_node *n, const char *name, struct sched_gpu *g, size_t ng,
		    const char *model)
{
	memset(n, 0, sizeof(*n));
	for (size_t i = 0; i < ng; i++)
		g[i] = (struct sched_gpu){ .index = (unsigned)i, .model = model, .free = true };
	n->name = name;
	n->schedulable = true;
	n->gpus = g;
	n->ngpus = ng;
	n->cpus_milli = n->free_cpus_milli = 64000;
	n->memory = n->free_memory = (uint64_t)64 << 30;
}

static void test_gang_all_or_nothing(void **state)
{
	struct sched_node nodes[2];
	struct sched_task t[3] = { { "worker", 0, 2, 1000, 0 }, { "worker", 1, 2, 1000, 0 },
				   { "worker", 2, 2, 1000, 0 } };
	struct sched_job j = { .id = 1, .priority = 1, .tasks = t, .ntasks = 3 };
	struct sched_input in = { nodes, 2, &j, 1, 0 };
	struct sched_plan p;

	mk_node(&nodes[0], "n1", gpus_a, 2, "A");
	mk_node(&nodes[1], "n2", gpus_b, 2, "A");
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	assert_string_equal(p.waits[0].code, "insufficient_gpus");
	assert_string_equal(p.waits[0].message,
			    "needs 6 GPUs on <=3 nodes; largest free block is 2 on node n1");
	sched_plan_release(&p);
	(void)state;
}

static void test_no_gpu_shared(void **state)
{
	struct sched_node nodes[1];
	struct sched_task t[4] = { { "w", 0, 1, 100, 0 }, { "w", 1, 1, 100, 0 },
				   { "w", 2, 1, 100, 0 }, { "w", 3, 1, 100, 0 } };
	struct sched_job jobs[2] = { { .id = 1, .tasks = t, .ntasks = 2 },
				     { .id = 2, .tasks = t + 2, .ntasks = 2 } };
	struct sched_input in = { nodes, 1, jobs, 2, 0 };
	struct sched_plan p;
	int used[4] = { 0 };

	mk_node(&nodes[0], "n1", gpus_a, 4, NULL);
	gpus_a[1].free = false; /* held by someone already */
	sched_plan(&in, &p);
	/* 3 free GPUs: job 1 fits, job 2 does not */
	assert_int_equal(p.nstarts, 2);
	for (size_t i = 0; i < p.nstarts; i++) {
		assert_int_equal(p.starts[i].ngpus, 1);
		assert_int_not_equal(p.starts[i].gpus[0], 1);
		used[p.starts[i].gpus[0]]++;
		assert_int_equal(used[p.starts[i].gpus[0]], 1);
	}
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 1);
	assert_int_equal(p.waits[0].position, 1);
	sched_plan_release(&p);
	(void)state;
}

static void test_priority_order(void **state)
{
	struct sched_node nodes[1];
	struct sched_task t[3] = { { "w", 0, 2, 100, 0 }, { "w", 0, 2, 100, 0 }, { "w", 0, 2, 100, 0 } };
	struct sched_job jobs[3] = {
		{ .id = 1, .priority = 1, .submitted_at = 10, .tasks = &t[0], .ntasks = 1 },
		{ .id = 2, .priority = 2, .submitted_at = 20, .tasks = &t[1], .ntasks = 1 },
		{ .id = 3, .priority = 0, .submitted_at = 5, .tasks = &t[2], .ntasks = 1 },
	};
	struct sched_input in = { nodes, 1, jobs, 3, 0 };
	struct sched_plan p;

	mk_node(&nodes[0], "n1", gpus_a, 2, NULL);
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0].job, 1); /* the high-priority job 2 */
	assert_int_equal(p.nwaits, 2);
	assert_int_equal(p.waits[0].job, 0); /* normal before low */
	assert_int_equal(p.waits[0].position, 1);
	assert_int_equal(p.waits[1].job, 2);
	assert_int_equal(p.waits[1].position, 2);
	sched_plan_release(&p);
	(void)state;
}

static void test_max_nodes(void **state)
{
	struct sched_node nodes[2];
	struct sched_task t[2] = { { "w", 0, 2, 100, 0 }, { "w", 1, 2, 100, 0 } };
	struct sched_job j = { .id = 1, .tasks = t, .ntasks = 2, .max_nodes = 1 };
	struct sched_input in = { nodes, 2, &j, 1, 0 };
	struct sched_plan p;

	mk_node(&nodes[0], "n1", gpus_a, 2, NULL);
	mk_node(&nodes[1], "n2", gpus_b, 2, NULL);
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	assert_string_equal(p.waits[0].code, "too_many_nodes");
	sched_plan_release(&p);

	j.max_nodes = 2;
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 2);
	assert_int_not_equal(p.starts[0].node, p.starts[1].node);
	sched_plan_release(&p);
	(void)state;
}

static void test_gpu_model_and_draining(void **state)
{
	struct sched_node nodes[2];
	struct sched_task t[1] = { { "w", 0, 1, 100, 0 } };
	struct sched_job j = { .id = 1, .tasks = t, .ntasks = 1, .gpu_model = "H100" };
	struct sched_input in = { nodes, 2, &j, 1, 0 };
	struct sched_plan p;

	mk_node(&nodes[0], "n1", gpus_a, 2, "A100");
	mk_node(&nodes[1], "n2", gpus_b, 2, "H100");
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0].node, 1);
	sched_plan_release(&p);

	nodes[1].schedulable = false; /* draining */
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 0);
	assert_string_equal(p.waits[0].code, "gpu_model");
	sched_plan_release(&p);

	nodes[0].schedulable = false;
	sched_plan(&in, &p);
	assert_string_equal(p.waits[0].code, "no_nodes");
	sched_plan_release(&p);
	(void)state;
}

static void test_feasible(void **state)
{
	struct sched_node nodes[1];
	struct sched_task t[1] = { { "worker", 0, 16, 1000, 0 } };
	struct sched_job j = { .id = 1, .tasks = t, .ntasks = 1 };
	char field[64], msg[256];

	mk_node(&nodes[0], "n1", gpus_a, 4, NULL);
	assert_int_equal(sched_check_feasible(nodes, 1, &j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "tasks.worker.gpus");
	assert_string_equal(msg, "tasks.worker.gpus: 16 GPUs per task but the largest node has 4");
	t[0].gpus = 4;
	assert_int_equal(sched_check_feasible(nodes, 1, &j, field, sizeof(field), msg, sizeof(msg)), 0);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_all_or_nothing), cmocka_unit_test(test_no_gpu_shared),
		cmocka_unit_test(test_priority_order),      cmocka_unit_test(test_max_nodes),
		cmocka_unit_test(test_gpu_model_and_draining), cmocka_unit_test(test_feasible),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
