/* When and why an ephemeral agent leaves (agent/ephemeral.h), and the
 * Slurm job it says it runs in. */
#include "base/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "agent/ephemeral.h"

static void test_idle_then_leaves(void **state)
{
	struct ephemeral e;
	bool stop;

	ephemeral_init(&e, 1000, 100);
	assert_false(ephemeral_tick(&e, false, false, 900, &stop));
	/* a task resets the idle clock */
	assert_false(ephemeral_tick(&e, false, true, 1000, &stop));
	assert_false(ephemeral_tick(&e, false, false, 1999, &stop));
	assert_string_equal(e.why, "");
	assert_true(ephemeral_tick(&e, false, false, 2000, &stop));
	assert_false(stop);
	assert_string_equal(e.why, "idle for 1 s");
	(void)state;
}

static void test_told_leaves_once_its_tasks_are_gone(void **state)
{
	struct ephemeral e;
	bool stop;

	ephemeral_init(&e, 0, 0);
	e.told = true;
	assert_false(ephemeral_tick(&e, false, true, 10, &stop));
	assert_string_equal(e.why, "");
	assert_true(ephemeral_tick(&e, false, false, 20, &stop));
	assert_string_equal(e.why, "told to leave by the master");
	/* without --idle it never leaves for idleness */
	ephemeral_init(&e, 0, 0);
	assert_false(ephemeral_tick(&e, false, false, 1000000000, &stop));
	(void)state;
}

static void test_stopped_stops_its_tasks_then_waits_for_them(void **state)
{
	struct ephemeral e;
	bool stop;

	ephemeral_init(&e, 0, 0);
	assert_false(ephemeral_tick(&e, true, true, 100, &stop));
	assert_true(stop);
	assert_string_equal(e.why, "its agent was stopped");
	/* asked once; then it waits for them, at most AGENT_EPHEMERAL_STOP_MS */
	assert_false(ephemeral_tick(&e, true, true, 200, &stop));
	assert_false(stop);
	assert_true(ephemeral_tick(&e, true, true, 100 + AGENT_EPHEMERAL_STOP_MS, &stop));
	ephemeral_init(&e, 0, 0);
	assert_true(ephemeral_tick(&e, true, false, 5, &stop));
	(void)state;
}

static void test_slurm_job(void **state)
{
	char *j;

	unsetenv("SLURM_ARRAY_JOB_ID");
	unsetenv("SLURM_ARRAY_TASK_ID");
	unsetenv("SLURM_JOB_ID");
	assert_null(ephemeral_slurm_job());
	setenv("SLURM_JOB_ID", "4412", 1);
	assert_string_equal(j = ephemeral_slurm_job(), "4412");
	free(j);
	setenv("SLURM_ARRAY_JOB_ID", "4411", 1);
	setenv("SLURM_ARRAY_TASK_ID", "0", 1);
	assert_string_equal(j = ephemeral_slurm_job(), "4411_0");
	free(j);
	setenv("SLURM_ARRAY_TASK_ID", "0;rm", 1);
	assert_null(ephemeral_slurm_job());
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_then_leaves),
		cmocka_unit_test(test_told_leaves_once_its_tasks_are_gone),
		cmocka_unit_test(test_stopped_stops_its_tasks_then_waits_for_them),
		cmocka_unit_test(test_slurm_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
