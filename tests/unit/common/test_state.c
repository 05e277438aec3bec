/* Unit tests for src/common/state.h: the job, task and node lifecycles. */
#include "base/compat.h"
#include "common/state.h"

#include <setjmp.h>
#include <cmocka.h>

struct edge {
	int state;
	int event;
	int next;
};

/* The job lifecycle as docs/architecture.md ("Lifecycles") describes it; every pair not listed is refused. */
static const struct edge job_edges[] = {
	{ JOB_QUEUED, JOB_EV_PLACED, JOB_STARTING },
	{ JOB_QUEUED, JOB_EV_CANCEL, JOB_CANCELLED },
	{ JOB_QUEUED, JOB_EV_TIMEOUT, JOB_FAILED },
	{ JOB_QUEUED, JOB_EV_DEPENDENCY_FAILED, JOB_FAILED },
	{ JOB_STARTING, JOB_EV_ALL_RUNNING, JOB_RUNNING },
	{ JOB_STARTING, JOB_EV_ALL_SUCCEEDED, JOB_SUCCEEDED },
	{ JOB_STARTING, JOB_EV_TASK_FAILED, JOB_FAILED },
	{ JOB_STARTING, JOB_EV_RESTART, JOB_QUEUED },
	{ JOB_STARTING, JOB_EV_CANCEL, JOB_CANCELLED },
	{ JOB_STARTING, JOB_EV_TIMEOUT, JOB_FAILED },
	{ JOB_RUNNING, JOB_EV_ALL_SUCCEEDED, JOB_SUCCEEDED },
	{ JOB_RUNNING, JOB_EV_TASK_FAILED, JOB_FAILED },
	{ JOB_RUNNING, JOB_EV_RESTART, JOB_QUEUED },
	{ JOB_RUNNING, JOB_EV_PREEMPT, JOB_QUEUED },
	{ JOB_STARTING, JOB_EV_PREEMPT, JOB_QUEUED },
	{ JOB_RUNNING, JOB_EV_CANCEL, JOB_CANCELLED },
	{ JOB_RUNNING, JOB_EV_TIMEOUT, JOB_FAILED },
	{ JOB_QUEUED, JOB_EV_EARLY_STOP, JOB_STOPPED_EARLY },
	{ JOB_STARTING, JOB_EV_EARLY_STOP, JOB_STOPPED_EARLY },
	{ JOB_RUNNING, JOB_EV_EARLY_STOP, JOB_STOPPED_EARLY },
};

static const struct edge task_edges[] = {
	{ TASK_PENDING, TASK_EV_ASSIGN, TASK_ASSIGNED },
	{ TASK_PENDING, TASK_EV_STOP, TASK_KILLED },
	{ TASK_ASSIGNED, TASK_EV_STARTED, TASK_RUNNING },
	{ TASK_ASSIGNED, TASK_EV_EXITED_OK, TASK_SUCCEEDED },
	{ TASK_ASSIGNED, TASK_EV_EXITED_FAIL, TASK_FAILED },
	{ TASK_ASSIGNED, TASK_EV_STOP, TASK_STOPPING },
	{ TASK_ASSIGNED, TASK_EV_LOST, TASK_LOST },
	{ TASK_RUNNING, TASK_EV_EXITED_OK, TASK_SUCCEEDED },
	{ TASK_RUNNING, TASK_EV_EXITED_FAIL, TASK_FAILED },
	{ TASK_RUNNING, TASK_EV_STOP, TASK_STOPPING },
	{ TASK_RUNNING, TASK_EV_LOST, TASK_LOST },
	{ TASK_STOPPING, TASK_EV_EXITED_OK, TASK_KILLED },
	{ TASK_STOPPING, TASK_EV_EXITED_FAIL, TASK_KILLED },
	{ TASK_STOPPING, TASK_EV_LOST, TASK_LOST },
	{ TASK_SUCCEEDED, TASK_EV_REQUEUE, TASK_PENDING },
	{ TASK_FAILED, TASK_EV_REQUEUE, TASK_PENDING },
	{ TASK_KILLED, TASK_EV_REQUEUE, TASK_PENDING },
	{ TASK_LOST, TASK_EV_REQUEUE, TASK_PENDING },
};

/* The node lifecycle: liveness x drain, and removal of lost nodes only. */
static const struct edge node_edges[] = {
	{ NODE_READY, NODE_EV_REGISTER, NODE_READY },
	{ NODE_READY, NODE_EV_HEARTBEAT, NODE_READY },
	{ NODE_READY, NODE_EV_LEASE_LAPSED, NODE_LOST },
	{ NODE_READY, NODE_EV_DRAIN, NODE_DRAINED },
	{ NODE_LOST, NODE_EV_REGISTER, NODE_READY },
	{ NODE_LOST, NODE_EV_HEARTBEAT, NODE_READY },
	{ NODE_LOST, NODE_EV_DRAIN, NODE_DRAINED_LOST },
	{ NODE_LOST, NODE_EV_REMOVE, NODE_REMOVED },
	{ NODE_DRAINED, NODE_EV_REGISTER, NODE_DRAINED },
	{ NODE_DRAINED, NODE_EV_HEARTBEAT, NODE_DRAINED },
	{ NODE_DRAINED, NODE_EV_LEASE_LAPSED, NODE_DRAINED_LOST },
	{ NODE_DRAINED, NODE_EV_DRAIN, NODE_DRAINED },
	{ NODE_DRAINED, NODE_EV_RESUME, NODE_READY },
	{ NODE_DRAINED_LOST, NODE_EV_REGISTER, NODE_DRAINED },
	{ NODE_DRAINED_LOST, NODE_EV_HEARTBEAT, NODE_DRAINED },
	{ NODE_DRAINED_LOST, NODE_EV_DRAIN, NODE_DRAINED_LOST },
	{ NODE_DRAINED_LOST, NODE_EV_RESUME, NODE_LOST },
	{ NODE_DRAINED_LOST, NODE_EV_REMOVE, NODE_REMOVED },
	/* an agent that leaves for good (ephemeral) ends its node in any state */
	{ NODE_READY, NODE_EV_LEAVE, NODE_REMOVED },
	{ NODE_LOST, NODE_EV_LEAVE, NODE_REMOVED },
	{ NODE_DRAINED, NODE_EV_LEAVE, NODE_REMOVED },
	{ NODE_DRAINED_LOST, NODE_EV_LEAVE, NODE_REMOVED },
};

/* A provisioning request: stored, answered or refused, closed when its
 * nodes have all ended (docs/elastic.md). */
static const struct edge preq_edges[] = {
	{ PREQ_REQUESTING, PREQ_EV_ANSWERED, PREQ_OPEN },
	{ PREQ_REQUESTING, PREQ_EV_REFUSED, PREQ_FAILED },
	{ PREQ_OPEN, PREQ_EV_ALL_ENDED, PREQ_CLOSED },
};

/* A provisioned node: every end goes through releasing. */
static const struct edge pnode_edges[] = {
	{ PNODE_PENDING, PNODE_EV_REGISTERED, PNODE_READY },
	{ PNODE_PENDING, PNODE_EV_TIMEOUT, PNODE_RELEASING },
	{ PNODE_READY, PNODE_EV_REGISTERED, PNODE_READY },
	{ PNODE_READY, PNODE_EV_SCALE_DOWN, PNODE_LEAVING },
	{ PNODE_READY, PNODE_EV_LEFT, PNODE_RELEASING },
	{ PNODE_READY, PNODE_EV_LOST, PNODE_RELEASING },
	{ PNODE_LEAVING, PNODE_EV_REGISTERED, PNODE_LEAVING },
	{ PNODE_LEAVING, PNODE_EV_LEFT, PNODE_RELEASING },
	{ PNODE_LEAVING, PNODE_EV_LOST, PNODE_RELEASING },
	{ PNODE_LEAVING, PNODE_EV_LEAVE_TIMEOUT, PNODE_RELEASING },
	{ PNODE_RELEASING, PNODE_EV_RELEASED, PNODE_GONE },
};

static int expected_next(const struct edge *edges, size_t n, int state, int event)
{
	for (size_t i = 0; i < n; i++)
		if (edges[i].state == state && edges[i].event == event)
			return edges[i].next;
	return -1;
}

static void test_job_allowed(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(job_edges); i++) {
		const struct edge *e = &job_edges[i];
		int got = job_transition((enum job_state)e->state, (enum job_event)e->event);
		if (got != e->next)
			print_message("job %s + %s\n", job_state_name((enum job_state)e->state),
				job_event_name((enum job_event)e->event));
		assert_int_equal(got, e->next);
	}
}

/* Every pair of the whole table: exactly the listed edges are allowed. */
static void test_job_whole_table(void **state)
{
	for (int s = 0; s < JOB_STATE__COUNT; s++) {
		for (int ev = 0; ev < JOB_EVENT__COUNT; ev++) {
			int want = expected_next(job_edges, ARRAY_SIZE(job_edges), s, ev);
			int got = job_transition((enum job_state)s, (enum job_event)ev);
			if (got != want)
				print_message("job %s + %s\n", job_state_name((enum job_state)s),
					job_event_name((enum job_event)ev));
			assert_int_equal(got, want);
		}
	}
}

static void test_job_final_accepts_nothing(void **state)
{
	int finals = 0;
	for (int s = 0; s < JOB_STATE__COUNT; s++) {
		if (!job_state_is_final((enum job_state)s))
			continue;
		finals++;
		for (int ev = 0; ev < JOB_EVENT__COUNT; ev++)
			assert_int_equal(job_transition((enum job_state)s, (enum job_event)ev), -1);
	}
	assert_int_equal(finals, 4);
	assert_true(job_state_is_final(JOB_STOPPED_EARLY));
	assert_true(job_state_is_final(JOB_SUCCEEDED));
	assert_true(job_state_is_final(JOB_FAILED));
	assert_true(job_state_is_final(JOB_CANCELLED));
	assert_false(job_state_is_final(JOB_QUEUED));
	assert_false(job_state_is_final(JOB_STARTING));
	assert_false(job_state_is_final(JOB_RUNNING));
}

static void test_job_refused_sample(void **state)
{
	assert_int_equal(job_transition(JOB_QUEUED, JOB_EV_ALL_RUNNING), -1);
	assert_int_equal(job_transition(JOB_QUEUED, JOB_EV_ALL_SUCCEEDED), -1);
	assert_int_equal(job_transition(JOB_QUEUED, JOB_EV_RESTART), -1);
	/* only a queued job fails for its dependency: one that started never does */
	assert_int_equal(job_transition(JOB_STARTING, JOB_EV_DEPENDENCY_FAILED), -1);
	assert_int_equal(job_transition(JOB_RUNNING, JOB_EV_DEPENDENCY_FAILED), -1);
	assert_int_equal(job_transition(JOB_RUNNING, JOB_EV_PLACED), -1);
	assert_int_equal(job_transition(JOB_RUNNING, JOB_EV_ALL_RUNNING), -1);
	assert_int_equal(job_transition(JOB_CANCELLED, JOB_EV_CANCEL), -1);
	assert_int_equal(job_transition(JOB_SUCCEEDED, JOB_EV_RESTART), -1);
	/* Out-of-range input is refused, not a crash. */
	assert_int_equal(job_transition((enum job_state)JOB_STATE__COUNT, JOB_EV_PLACED), -1);
	assert_int_equal(job_transition(JOB_QUEUED, (enum job_event)JOB_EVENT__COUNT), -1);
	assert_int_equal(job_transition((enum job_state)-1, JOB_EV_PLACED), -1);
}

static void test_task_allowed(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(task_edges); i++) {
		const struct edge *e = &task_edges[i];
		int got = task_transition((enum task_state)e->state, (enum task_event)e->event);
		if (got != e->next)
			print_message("task %s + %s\n", task_state_name((enum task_state)e->state),
				task_event_name((enum task_event)e->event));
		assert_int_equal(got, e->next);
	}
}

static void test_task_whole_table(void **state)
{
	for (int s = 0; s < TASK_STATE__COUNT; s++) {
		for (int ev = 0; ev < TASK_EVENT__COUNT; ev++) {
			int want = expected_next(task_edges, ARRAY_SIZE(task_edges), s, ev);
			int got = task_transition((enum task_state)s, (enum task_event)ev);
			if (got != want)
				print_message("task %s + %s\n", task_state_name((enum task_state)s),
					task_event_name((enum task_event)ev));
			assert_int_equal(got, want);
		}
	}
}

/* A final task accepts only REQUEUE (a restart of its job), back to pending. */
static void test_task_final_accepts_only_requeue(void **state)
{
	int finals = 0;
	for (int s = 0; s < TASK_STATE__COUNT; s++) {
		if (!task_state_is_final((enum task_state)s))
			continue;
		finals++;
		for (int ev = 0; ev < TASK_EVENT__COUNT; ev++) {
			int got = task_transition((enum task_state)s, (enum task_event)ev);
			assert_int_equal(got, ev == TASK_EV_REQUEUE ? TASK_PENDING : -1);
		}
	}
	assert_int_equal(finals, 4);
	/* Only final tasks are requeued. */
	assert_int_equal(task_transition(TASK_RUNNING, TASK_EV_REQUEUE), -1);
	assert_int_equal(task_transition(TASK_PENDING, TASK_EV_REQUEUE), -1);
}

static void test_task_refused_sample(void **state)
{
	assert_int_equal(task_transition(TASK_PENDING, TASK_EV_STARTED), -1);
	assert_int_equal(task_transition(TASK_PENDING, TASK_EV_EXITED_OK), -1);
	assert_int_equal(task_transition(TASK_PENDING, TASK_EV_LOST), -1);
	assert_int_equal(task_transition(TASK_RUNNING, TASK_EV_ASSIGN), -1);
	assert_int_equal(task_transition(TASK_RUNNING, TASK_EV_STARTED), -1);
	assert_int_equal(task_transition(TASK_STOPPING, TASK_EV_STOP), -1);
	assert_int_equal(task_transition(TASK_STOPPING, TASK_EV_STARTED), -1);
	assert_int_equal(task_transition(TASK_SUCCEEDED, TASK_EV_EXITED_FAIL), -1);
	assert_int_equal(task_transition(TASK_LOST, TASK_EV_STARTED), -1);
	assert_int_equal(task_transition((enum task_state)TASK_STATE__COUNT, TASK_EV_ASSIGN), -1);
	assert_int_equal(task_transition(TASK_PENDING, (enum task_event)TASK_EVENT__COUNT), -1);
}

static void test_task_holds_resources(void **state)
{
	for (int s = 0; s < TASK_STATE__COUNT; s++) {
		int want = s == TASK_ASSIGNED || s == TASK_RUNNING || s == TASK_STOPPING;
		assert_int_equal(!!task_state_holds_resources((enum task_state)s), want);
	}
}

static void test_names(void **state)
{
	static const char *const job_states[] = { "queued", "starting", "running", "succeeded",
		"failed", "cancelled", "stopped_early" };
	static const char *const job_events[] = { "placed", "all_running", "all_succeeded",
		"task_failed", "restart", "cancel", "timeout", "preempt", "dependency_failed",
		"early_stop" };
	static const char *const task_states[] = { "pending", "assigned", "running", "stopping",
		"succeeded", "failed", "killed", "lost" };
	static const char *const task_events[] = { "assign", "started", "exited_ok", "exited_fail",
		"stop", "lost", "requeue" };

	assert_int_equal(ARRAY_SIZE(job_states), JOB_STATE__COUNT);
	assert_int_equal(ARRAY_SIZE(job_events), JOB_EVENT__COUNT);
	assert_int_equal(ARRAY_SIZE(task_states), TASK_STATE__COUNT);
	assert_int_equal(ARRAY_SIZE(task_events), TASK_EVENT__COUNT);
	for (int i = 0; i < JOB_STATE__COUNT; i++) {
		assert_string_equal(job_state_name((enum job_state)i), job_states[i]);
		assert_int_equal(job_state_parse(job_states[i]), i);
	}
	for (int i = 0; i < JOB_EVENT__COUNT; i++)
		assert_string_equal(job_event_name((enum job_event)i), job_events[i]);
	for (int i = 0; i < TASK_STATE__COUNT; i++) {
		assert_string_equal(task_state_name((enum task_state)i), task_states[i]);
		assert_int_equal(task_state_parse(task_states[i]), i);
	}
	for (int i = 0; i < TASK_EVENT__COUNT; i++)
		assert_string_equal(task_event_name((enum task_event)i), task_events[i]);

	assert_string_equal(job_state_name((enum job_state)JOB_STATE__COUNT), "unknown");
	assert_string_equal(job_event_name((enum job_event)JOB_EVENT__COUNT), "unknown");
	assert_string_equal(task_state_name((enum task_state)TASK_STATE__COUNT), "unknown");
	assert_string_equal(task_event_name((enum task_event)TASK_EVENT__COUNT), "unknown");
}

/* The experiment lifecycle: running until every trial is made and final,
 * cancelled or failed; the three ends accept nothing. */
static void test_exp_table(void **state)
{
	static const struct edge exp_edges[] = {
		{ EXP_RUNNING, EXP_EV_ALL_DONE, EXP_COMPLETED },
		{ EXP_RUNNING, EXP_EV_CANCEL, EXP_CANCELLED },
		{ EXP_RUNNING, EXP_EV_SUBMIT_FAILED, EXP_FAILED },
	};
	static const char *const names[] = { "running", "completed", "cancelled", "failed" };

	for (int st = 0; st < EXP_STATE__COUNT; st++)
		for (int ev = 0; ev < EXP_EVENT__COUNT; ev++)
			assert_int_equal(exp_transition((enum exp_state)st, (enum exp_event)ev),
					 expected_next(exp_edges, ARRAY_SIZE(exp_edges), st, ev));
	assert_int_equal(ARRAY_SIZE(names), EXP_STATE__COUNT);
	for (int st = 0; st < EXP_STATE__COUNT; st++)
		assert_string_equal(exp_state_name((enum exp_state)st), names[st]);
	assert_int_equal(exp_transition(EXP_STATE__COUNT, EXP_EV_CANCEL), -1);
}

static void test_parse_refuses(void **state)
{
	assert_int_equal(job_state_parse("bogus"), -1);
	assert_int_equal(job_state_parse(""), -1);
	assert_int_equal(job_state_parse("Queued"), -1);
	assert_int_equal(job_state_parse("queued "), -1);
	assert_int_equal(job_state_parse("pending"), -1); /* a task state, not a job state */
	assert_int_equal(task_state_parse("queued"), -1);
	assert_int_equal(task_state_parse("RUNNING"), -1);
	assert_int_equal(task_state_parse(""), -1);
}

static void test_node_whole_table(void **state)
{
	for (int s = 0; s < NODE_STATE__COUNT; s++) {
		for (int ev = 0; ev < NODE_EVENT__COUNT; ev++) {
			int want = expected_next(node_edges, ARRAY_SIZE(node_edges), s, ev);
			int got = node_transition((enum node_state)s, (enum node_event)ev);
			if (got != want)
				print_message("node %s + %s: got %d, want %d\n",
					      node_state_name((enum node_state)s),
					      node_event_name((enum node_event)ev), got, want);
			assert_int_equal(got, want);
		}
	}
	assert_int_equal(node_transition(NODE_STATE__COUNT, NODE_EV_DRAIN), -1);
	assert_int_equal(node_transition(NODE_READY, NODE_EVENT__COUNT), -1);
}

/* Runs evs from s; -1 as soon as one is refused. */
static int node_run(int s, const enum node_event *evs, size_t n)
{
	for (size_t i = 0; i < n && s >= 0; i++)
		s = node_transition((enum node_state)s, evs[i]);
	return s;
}

/* The drain is an admin's intent: no lapse, reconnect or registration (an
 * agent restart) forgets it, and a master restart loads the state it saved
 * (core.c stores the state's name; node_state_parse reads it back). */
static void test_node_drain_survives(void **state)
{
	static const enum node_event life[] = {
		NODE_EV_DRAIN, NODE_EV_LEASE_LAPSED, NODE_EV_HEARTBEAT, NODE_EV_LEASE_LAPSED,
		NODE_EV_REGISTER, NODE_EV_HEARTBEAT, NODE_EV_LEASE_LAPSED, NODE_EV_HEARTBEAT,
	};
	int s = NODE_READY;

	for (size_t i = 0; i < ARRAY_SIZE(life); i++) {
		s = node_transition((enum node_state)s, life[i]);
		assert_true(s >= 0);
		assert_true(node_state_is_drained((enum node_state)s));
		/* a restart in between: the stored name loads as the same state */
		assert_int_equal(node_state_parse(node_state_name((enum node_state)s)), s);
	}
	assert_int_equal(s, NODE_DRAINED);
	assert_string_equal(node_liveness_name((enum node_state)s), "ready");
	s = node_transition((enum node_state)s, NODE_EV_LEASE_LAPSED);
	assert_int_equal(s, NODE_DRAINED_LOST);
	assert_string_equal(node_liveness_name((enum node_state)s), "lost");
	/* resuming a lost node leaves it lost, and no longer drained */
	s = node_transition((enum node_state)s, NODE_EV_RESUME);
	assert_int_equal(s, NODE_LOST);
	assert_false(node_state_is_drained((enum node_state)s));
	assert_int_equal(node_transition((enum node_state)s, NODE_EV_HEARTBEAT), NODE_READY);
}

/* What is refused: a resume that undoes nothing, removing a live node,
 * a second lapse, anything of a removed node. */
static void test_node_refused(void **state)
{
	static const enum node_event resume_ready[] = { NODE_EV_RESUME };
	static const enum node_event rm_live[] = { NODE_EV_DRAIN, NODE_EV_REMOVE };
	static const enum node_event lapse_twice[] = { NODE_EV_LEASE_LAPSED, NODE_EV_LEASE_LAPSED };
	static const enum node_event rm_then[] = { NODE_EV_LEASE_LAPSED, NODE_EV_REMOVE, NODE_EV_REGISTER };

	assert_int_equal(node_run(NODE_READY, resume_ready, 1), -1);
	assert_int_equal(node_run(NODE_READY, rm_live, 2), -1);
	assert_int_equal(node_run(NODE_READY, lapse_twice, 2), -1);
	assert_int_equal(node_run(NODE_READY, rm_then, 2), NODE_REMOVED);
	assert_int_equal(node_run(NODE_READY, rm_then, 3), -1);
	for (int ev = 0; ev < NODE_EVENT__COUNT; ev++)
		assert_int_equal(node_transition(NODE_REMOVED, (enum node_event)ev), -1);
	assert_false(node_state_is_live(NODE_REMOVED));
	assert_string_equal(node_liveness_name(NODE_REMOVED), "removed");
	assert_int_equal(node_state_parse("draining"), -1);
}

/* The provisioning tables: exactly the listed edges, every state's name
 * parses back (a restarted master loads the stored names), and no end of a
 * provisioned node skips the release. */
static void test_provision_tables(void **state)
{
	for (int s = 0; s < PREQ_STATE__COUNT; s++) {
		assert_int_equal(preq_state_parse(preq_state_name((enum preq_state)s)), s);
		for (int ev = 0; ev < PREQ_EVENT__COUNT; ev++)
			assert_int_equal(preq_transition((enum preq_state)s, (enum preq_event)ev),
					 expected_next(preq_edges, ARRAY_SIZE(preq_edges), s, ev));
	}
	for (int s = 0; s < PNODE_STATE__COUNT; s++) {
		assert_int_equal(pnode_state_parse(pnode_state_name((enum pnode_state)s)), s);
		for (int ev = 0; ev < PNODE_EVENT__COUNT; ev++) {
			int want = expected_next(pnode_edges, ARRAY_SIZE(pnode_edges), s, ev);
			int got = pnode_transition((enum pnode_state)s, (enum pnode_event)ev);
			if (got != want)
				print_message("provisioned node %s + %s: got %d, want %d\n",
					      pnode_state_name((enum pnode_state)s),
					      pnode_event_name((enum pnode_event)ev), got, want);
			assert_int_equal(got, want);
			/* only a release makes a node gone */
			if (got == PNODE_GONE)
				assert_int_equal(ev, PNODE_EV_RELEASED);
		}
	}
	assert_int_equal(preq_transition(PREQ_STATE__COUNT, PREQ_EV_ANSWERED), -1);
	assert_int_equal(pnode_transition(PNODE_READY, PNODE_EVENT__COUNT), -1);
	assert_int_equal(pnode_state_parse("up"), -1);
	assert_string_equal(pnode_state_name(PNODE_STATE__COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_allowed),
		cmocka_unit_test(test_job_whole_table),
		cmocka_unit_test(test_job_final_accepts_nothing),
		cmocka_unit_test(test_job_refused_sample),
		cmocka_unit_test(test_task_allowed),
		cmocka_unit_test(test_task_whole_table),
		cmocka_unit_test(test_task_final_accepts_only_requeue),
		cmocka_unit_test(test_task_refused_sample),
		cmocka_unit_test(test_task_holds_resources),
		cmocka_unit_test(test_node_whole_table),
		cmocka_unit_test(test_node_drain_survives),
		cmocka_unit_test(test_node_refused),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_parse_refuses),
		cmocka_unit_test(test_exp_table),
		cmocka_unit_test(test_provision_tables),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
