/*
 * What `yard logs` makes of what the master holds: every task's lines with
 * its [ROLE/INDEX] prefix (never a line split between two tasks), the tasks
 * of one attempt, and why an attempt ended.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "cli/cmd.h"

static void test_prefix_whole_lines(void **state)
{
	struct strbuf out = STRBUF_INIT, pending = STRBUF_INIT;

	cli_log_prefix(&out, &pending, "[worker/1] ", "a\nb", 3, false);
	assert_string_equal(out.buf, "[worker/1] a\n");
	assert_string_equal(pending.buf, "b");
	/* the line ends in the next chunk: it comes out once, whole */
	cli_log_prefix(&out, &pending, "[worker/1] ", "c\n\nd", 4, false);
	assert_string_equal(out.buf, "[worker/1] a\n[worker/1] bc\n[worker/1] \n");
	assert_string_equal(pending.buf, "d");
	/* at the stream's end the unended line is ended */
	cli_log_prefix(&out, &pending, "[worker/1] ", "", 0, true);
	assert_string_equal(out.buf, "[worker/1] a\n[worker/1] bc\n[worker/1] \n[worker/1] d\n");
	assert_int_equal(pending.len, 0);
	/* nothing left: nothing more */
	cli_log_prefix(&out, &pending, "[worker/1] ", "", 0, true);
	assert_string_equal(out.buf, "[worker/1] a\n[worker/1] bc\n[worker/1] \n[worker/1] d\n");
	/* bytes that are not text pass as they are */
	strbuf_reset(&out);
	cli_log_prefix(&out, &pending, "[ps/0] ", "\xff\0x\n", 4, false);
	assert_int_equal(out.len, 11);
	assert_memory_equal(out.buf, "[ps/0] \xff\0x\n", 11);
	strbuf_release(&out);
	strbuf_release(&pending);
}

static const char JOB[] =
	"{\"attempt\": 1, \"reason\": null, \"tasks\": ["
	"{\"role\": \"worker\", \"index\": 0, \"attempt\": 0, \"state\": \"killed\","
	" \"reason\": {\"code\": \"stopped\", \"message\": \"the gang stopped\"}},"
	"{\"role\": \"worker\", \"index\": 1, \"attempt\": 0, \"state\": \"failed\","
	" \"reason\": {\"code\": \"task_failed\", \"message\": \"worker/1 exited with status 3\"}},"
	"{\"role\": \"worker\", \"index\": 0, \"attempt\": 1, \"state\": \"running\", \"reason\": null},"
	"{\"role\": \"worker\", \"index\": 1, \"attempt\": 1, \"state\": \"running\", \"reason\": null}]}";

static void test_attempt_tasks(void **state)
{
	json_t *job = json_loads(JOB, 0, NULL);
	size_t n;
	char **names;

	assert_non_null(job);
	names = cli_attempt_tasks(job, 1, NULL, &n);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "worker/0");
	assert_string_equal(names[1], "worker/1");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	names = cli_attempt_tasks(job, 0, "worker/1", &n);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "worker/1");
	free(names[0]);
	free(names);
	names = cli_attempt_tasks(job, 2, NULL, &n);
	assert_int_equal(n, 0);
	free(names);
	json_decref(job);
}

static void test_attempt_cause(void **state)
{
	json_t *job = json_loads(JOB, 0, NULL);
	char *cause = cli_attempt_cause(job, 0);

	/* the task that failed, not the one stopped with it */
	assert_string_equal(cause, "task_failed: worker/1 exited with status 3");
	free(cause);
	/* an attempt no task of which has a reason: the job's */
	cause = cli_attempt_cause(job, 1);
	assert_string_equal(cause, "-");
	free(cause);
	json_decref(job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_whole_lines),
		cmocka_unit_test(test_attempt_tasks),
		cmocka_unit_test(test_attempt_cause),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
