/* sched_preempt_for: who gives way to a higher-priority job, and who never. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/preempt.h"

static struct sched_gpu g1[4], g2[4];
static struct sched_node nodes[2];

/* n1: 4 GPUs of model A; n2: 4 GPUs of model B. busy marks GPUs in use. */
static void setup_nodes(const bool busy1[4], const bool busy2[4])
{
	for (unsigned i = 0; i < 4; i++) {
		g1[i] = (struct sched_gpu){ .index = i, .model = "A", .free = !busy1[i] };
		g2[i] = (struct sched_gpu){ .index = i, .model = "B", .free = !busy2[i] };
	}
	for (int n = 0; n < 2; n++) {
		memset(&nodes[n], 0, sizeof(nodes[n]));
		nodes[n].name = n ? "n2" : "n1";
		nodes[n].schedulable = true;
		nodes[n].gpus = n ? g2 : g1;
		nodes[n].ngpus = 4;
		nodes[n].cpus_milli = nodes[n].free_cpus_milli = 64000;
	}
}

static const unsigned gp01[] = { 0, 1 }, gp23[] = { 2, 3 };

/* n1 fully used by two low jobs (A started first), n2 by a non-preemptible
 * low job and a normal one. */
static struct sched_hold holds[4] = {
	{ 0, gp01, 2, 0, 0 }, { 0, gp23, 2, 0, 0 }, { 1, gp01, 2, 0, 0 }, { 1, gp23, 2, 0, 0 },
};
static struct sched_victim running[4] = {
	{ .id = 1, .priority = 0, .preemptible = true, .started_at = 10, .holds = &holds[0], .nholds = 1 },
	{ .id = 2, .priority = 0, .preemptible = true, .started_at = 20, .holds = &holds[1], .nholds = 1 },
	{ .id = 3, .priority = 0, .preemptible = false, .started_at = 5, .holds = &holds[2], .nholds = 1 },
	{ .id = 4, .priority = 1, .preemptible = true, .started_at = 30, .holds = &holds[3], .nholds = 1 },
};

static size_t victims_for(unsigned gpus_per_task, unsigned ntasks, int priority, const char *model,
			  size_t *out)
{
	static struct sched_task t[4];
	for (unsigned i = 0; i < ntasks; i++)
		t[i] = (struct sched_task){ "worker", i, gpus_per_task, 1000, 0 };
	struct sched_job j = { .id = 9, .priority = priority, .tasks = t, .ntasks = ntasks,
			       .gpu_model = model };
	return sched_preempt_for(nodes, 2, &j, running, 4, out);
}

static void test_youngest_lowest_priority_goes_first(void **state)
{
	const bool all[4] = { true, true, true, true };
	size_t out[4];
	setup_nodes(all, all);
	/* 2 GPUs for a high job: job 2 (low, started last) is enough */
	assert_int_equal(victims_for(2, 1, 2, NULL, out), 1);
	assert_int_equal(running[out[0]].id, 2);
	/* 4 GPUs on one node of model A: both low jobs of n1 */
	assert_int_equal(victims_for(4, 1, 2, "A", out), 2);
	assert_int_equal(running[out[0]].id + running[out[1]].id, 3);
}

static void test_never_equal_priority_or_non_preemptible(void **state)
{
	const bool all[4] = { true, true, true, true };
	size_t out[4];
	setup_nodes(all, all);
	/* a low job preempts nobody: no one is lower */
	assert_int_equal(victims_for(1, 1, 0, NULL, out), 0);
	/* a normal job may only take low, preemptible jobs' GPUs (1 and 2), not 3 or 4 */
	assert_int_equal(victims_for(4, 1, 1, "B", out), 0);
	assert_int_equal(victims_for(2, 2, 1, NULL, out), 2);
	/* more than all victims together hold: none is stopped in vain */
	assert_int_equal(victims_for(4, 3, 2, NULL, out), 0);
}

static void test_nothing_when_it_fits(void **state)
{
	const bool busy1[4] = { true, true, false, false }, all[4] = { true, true, true, true };
	size_t out[4];
	setup_nodes(busy1, all);
	assert_int_equal(victims_for(2, 1, 2, NULL, out), 0);
}

/* Victims that do not help (on a node of the wrong model) are given back. */
static void test_useless_victims_are_spared(void **state)
{
	const bool all[4] = { true, true, true, true };
	size_t out[4];
	setup_nodes(all, all);
	running[3].priority = 0; /* job 4 on n2 (model B) becomes the youngest low job */
	assert_int_equal(victims_for(2, 1, 2, "A", out), 1);
	assert_int_equal(running[out[0]].id, 2);
	running[3].priority = 1;
}

/* A count-based policy's victims are checked by placement: stopping the
 * jobs of node n2 (model B) frees 4 GPUs but not for a job of model A. */
static void test_victims_help_by_placement(void **state)
{
	const bool all[4] = { true, true, true, true };
	struct sched_task t = { "worker", 0, 2, 1000, 0 };
	struct sched_job a = { .id = 9, .priority = 1, .tasks = &t, .ntasks = 1, .gpu_model = "A" };
	setup_nodes(all, all);
	assert_false(sched_victims_help(nodes, 2, &a, &running[2], 2)); /* jobs 3, 4 on n2 */
	assert_true(sched_victims_help(nodes, 2, &a, &running[1], 1));  /* job 2 on n1 */
	t.gpus = 4;
	assert_false(sched_victims_help(nodes, 2, &a, &running[1], 1));  /* half of n1 is not enough */
	assert_true(sched_victims_help(nodes, 2, &a, &running[0], 2));   /* all of n1 is */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_youngest_lowest_priority_goes_first),
		cmocka_unit_test(test_never_equal_priority_or_non_preemptible),
		cmocka_unit_test(test_nothing_when_it_fits),
		cmocka_unit_test(test_useless_victims_are_spared),
		cmocka_unit_test(test_victims_help_by_placement),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
