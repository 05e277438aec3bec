/* Unit tests of the scheduling policies (sched/policy.h). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/policy.h"

static void job(struct sched_pjob *j, uint64_t id, unsigned gpus, uint64_t submitted)
{
	sched_policy_job_init(j, id, gpus, submitted);
}

static bool in_list(const size_t *a, size_t n, size_t v)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] == v)
			return true;
	return false;
}

/* fifo: strict priority then age; the head blocks jobs without bounds. */
static void test_fifo_order_and_head(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[4];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	job(&j[0], 1, 2, 10);
	job(&j[1], 2, 4, 20);            /* head: does not fit in 3 left */
	job(&j[2], 3, 1, 30);            /* would fit, but no bound: must wait */
	job(&j[3], 4, 1, 40);
	j[3].priority = 2;               /* high priority goes first */
	sched_policy_plan(&c, j, 4, 4, 100, &p);
	assert_int_equal(p.nstarts, 2);
	assert_int_equal(p.starts[0], 3);
	assert_int_equal(p.starts[1], 0);
	assert_int_equal(p.nwaits, 2);
	assert_int_equal(p.waits[0].job, 1);
	assert_int_equal(p.waits[0].code, SCHED_WAIT_GPUS);
	assert_int_equal(p.waits[1].job, 2);
	assert_int_equal(p.waits[1].code, SCHED_WAIT_HEAD);
	assert_int_equal(p.npreempts, 0);
	sched_policy_plan_release(&p);
	(void)state;
}

/* EASY backfill: a job may start ahead of the head only if it ends (by its
 * bound) before the head's reservation or uses GPUs the head will not need. */
static void test_fifo_backfill_no_delay(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[5];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	/* 8 GPUs: a running 6-GPU job bounded to end at t=1000 */
	job(&j[0], 1, 6, 0);
	j[0].bound = 1000;
	sched_policy_started(&j[0], 0);
	job(&j[1], 2, 8, 10);            /* head: reserved at t=1000, all 8 GPUs */
	job(&j[2], 3, 2, 20);            /* bound 2000: would delay the head */
	j[2].bound = 2000;
	job(&j[3], 4, 2, 30);            /* bound 500: ends at 600 < 1000, may go */
	j[3].bound = 500;
	job(&j[4], 5, 1, 40);            /* no bound */
	sched_policy_plan(&c, j, 5, 8, 100, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 3);
	assert_int_equal(p.waits[0].job, 1);
	assert_int_equal(p.waits[1].code, SCHED_WAIT_HEAD);

	/* with a 7-GPU head, 1 GPU is extra at the reservation: an unbounded
	 * 1-GPU job may take it, a second may not */
	j[1].gpus = 7;
	j[2].gpus = 1;
	j[2].bound = 0;
	j[3].bound = 0;
	j[3].gpus = 1;
	sched_policy_plan(&c, j, 5, 8, 100, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 2);

	/* a running job without a bound: the reservation is unknown, no backfill */
	j[0].bound = 0;
	j[3].bound = 10;
	sched_policy_plan(&c, j, 5, 8, 100, &p);
	assert_int_equal(p.nstarts, 0);
	sched_policy_plan_release(&p);
	(void)state;
}

/* las: levels by attained GPU-seconds; a job demotes when it crosses a
 * threshold, dated at the crossing, and a fresh job preempts it. */
static void test_las_demotion_and_preemption(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[2];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_LAS);
	assert_int_equal(c.nthresholds, 3);
	assert_int_equal(c.thresholds[0], 3250);
	job(&j[0], 1, 4, 0);
	sched_policy_plan(&c, j, 1, 4, 0, &p);
	assert_int_equal(p.nstarts, 1);
	assert_true(p.next_change == UINT64_MAX); /* everything fits: nothing to revisit */
	sched_policy_started(&j[0], 0);
	sched_policy_account(&c, &j[0], 1000);
	assert_int_equal(j[0].attained, 4000);
	assert_int_equal(j[0].level, 1);
	assert_int_equal(j[0].level_since, 813);

	job(&j[1], 2, 2, 1000);          /* a fresh job: level 0, ahead of the demoted one */
	sched_policy_plan(&c, j, 2, 4, 1000, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 1);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);
	assert_true(sched_policy_cmp(&c, &j[1], &j[0]) < 0);
	assert_int_equal(p.next_change, 1000 + 1625); /* ceil(3250 / 2) */

	/* not preemptible: it keeps its GPUs and the fresh job waits */
	j[0].preemptible = false;
	sched_policy_plan(&c, j, 2, 4, 1000, &p);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.waits[0].job, 1);
	sched_policy_plan_release(&p);
	(void)state;
}

/* srtf: shortest known remaining time first, preemptive. */
static void test_srtf_order(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[3];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_SRTF);
	job(&j[0], 1, 2, 0);
	j[0].remaining = 500;
	sched_policy_started(&j[0], 0);
	job(&j[1], 2, 2, 10);
	j[1].remaining = 100;
	job(&j[2], 3, 2, 20);
	j[2].remaining = 50;
	sched_policy_plan(&c, j, 3, 4, 20, &p);
	assert_int_equal(p.nstarts, 2);
	assert_int_equal(p.starts[0], 2);
	assert_int_equal(p.starts[1], 1);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);
	sched_policy_plan_release(&p);
	(void)state;
}

/* fair: teams fill in turn by GPUs over weight; quotas cap a team. */
static void test_fair_shares_and_quota(void **state)
{
	struct sched_team teams[2] = { { 1.0, 0 }, { 1.0, 2 } };
	struct sched_policy_conf c;
	struct sched_pjob j[6];
	struct sched_policy_plan p;
	unsigned held[2] = { 0, 0 };

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FAIR);
	c.teams = teams;
	c.nteams = 2;
	for (unsigned i = 0; i < 6; i++) {
		job(&j[i], i + 1, 1, i);
		j[i].team = i < 4 ? 0 : 1; /* team 0 submitted first */
	}
	sched_policy_plan(&c, j, 6, 4, 10, &p);
	for (size_t s = 0; s < p.nstarts; s++)
		held[j[p.starts[s]].team]++;
	assert_int_equal(held[0], 2);
	assert_int_equal(held[1], 2);

	/* team 1 at its quota of 2: its third job waits with team_quota */
	job(&j[5], 6, 1, 5);
	j[5].team = 1;
	j[3].team = 1;
	teams[0].weight = 10;
	sched_policy_plan(&c, j, 6, 6, 10, &p);
	bool quota_seen = false;
	for (size_t w = 0; w < p.nwaits; w++)
		quota_seen |= p.waits[w].code == SCHED_WAIT_QUOTA;
	assert_true(quota_seen);
	assert_false(in_list(p.starts, p.nstarts, 5) && in_list(p.starts, p.nstarts, 4) &&
		     in_list(p.starts, p.nstarts, 3));
	sched_policy_plan_release(&p);
	(void)state;
}

static void test_names(void **state)
{
	for (int i = 0; i < SCHED_POLICY__COUNT; i++)
		assert_int_equal(sched_policy_parse(sched_policy_name((enum sched_policy)i)), i);
	assert_int_equal(sched_policy_parse("nope"), -1);
	assert_int_equal(SCHED_POLICY_DEFAULT, SCHED_POLICY_GLAS);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_order_and_head),
		cmocka_unit_test(test_fifo_backfill_no_delay),
		cmocka_unit_test(test_las_demotion_and_preemption),
		cmocka_unit_test(test_srtf_order),
		cmocka_unit_test(test_fair_shares_and_quota),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
