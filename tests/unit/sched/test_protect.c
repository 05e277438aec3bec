/* Unit tests of the protection of running work (sched/policy.h: conf
 * min_run_s, max_lost_s, need_checkpoint): each states a world and the
 * exact decision the policy must take in it. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/policy.h"

/* glas as the master runs it: no preemption within 120 s of a start, none
 * that loses more than 600 s of work, none of a job without a checkpoint. */
static void conf_master(struct sched_policy_conf *c)
{
	sched_policy_conf_init(c, SCHED_POLICY_GLAS);
	c->min_run_s = 120;
	c->max_lost_s = 600;
	c->need_checkpoint = true;
}

/* Job id of gpus GPUs submitted at `submitted`; started at `started` unless
 * that is UINT64_MAX (waiting); accounted to now. */
static void job(const struct sched_policy_conf *c, struct sched_pjob *j, uint64_t id, unsigned gpus,
		uint64_t submitted, uint64_t started, uint64_t now)
{
	sched_policy_job_init(j, id, gpus, submitted);
	if (started != UINT64_MAX) {
		sched_policy_account(c, j, started);
		sched_policy_started(j, started);
	}
	sched_policy_account(c, j, now);
}

/* Issue 15: two equal 8-GPU jobs without checkpoints on 8 GPUs, then a
 * 1-GPU job. Plain glas swaps them (the running one has had more service);
 * with the master's protection the running one keeps its GPUs against both. */
static void test_thrash_no_checkpoint(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[3];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	job(&c, &j[0], 1, 8, 0, 0, 200);         /* running 200 s: level 3 */
	job(&c, &j[1], 2, 8, 1, UINT64_MAX, 200); /* waiting, level 0 */
	job(&c, &j[2], 3, 1, 150, UINT64_MAX, 200);
	assert_true(j[0].level > j[1].level);
	/* today's glas: job 1 is preempted for the newcomers */
	sched_policy_plan(&c, j, 3, 8, 200, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);

	conf_master(&c);
	assert_true(sched_policy_protected(&c, &j[0], 200));
	sched_policy_plan(&c, j, 3, 8, 200, &p);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 2);
	assert_int_equal(p.waits[0].job, 1);     /* level 0, the older in it */
	assert_int_equal(p.waits[0].code, SCHED_WAIT_GPUS);
	assert_int_equal(p.waits[1].job, 2);

	/* the 1-GPU newcomer alone does not displace it either */
	sched_policy_plan(&c, (struct sched_pjob[]){ j[0], j[2] }, 2, 8, 200, &p);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	sched_policy_plan_release(&p);
	(void)state;
}

/* A recent checkpoint makes a job cheap to preempt: the job with less
 * service takes its GPUs. Work since the checkpoint beyond max_lost_s
 * protects it again. */
static void test_checkpoint_aware(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[2];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	conf_master(&c);
	job(&c, &j[0], 1, 8, 0, 0, 1000);
	job(&c, &j[1], 2, 8, 900, UINT64_MAX, 1000);

	j[0].checkpointed_at = 990;              /* 10 s of work would be lost */
	assert_false(sched_policy_protected(&c, &j[0], 1000));
	assert_int_equal(sched_policy_lost_s(&j[0], 1000), 10);
	sched_policy_plan(&c, j, 2, 8, 1000, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 1);

	j[0].checkpointed_at = 300;              /* 700 s since: more than 600 */
	assert_int_equal(sched_policy_lost_s(&j[0], 1000), 700);
	assert_true(sched_policy_protected(&c, &j[0], 1000));
	sched_policy_plan(&c, j, 2, 8, 1000, &p);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 1);

	/* a checkpoint of an earlier run does not count for this one */
	j[0].checkpointed_at = 300;
	j[0].started_at = 800;
	assert_int_equal(sched_policy_lost_s(&j[0], 1000), 200);
	assert_true(sched_policy_protected(&c, &j[0], 1000));
	c.need_checkpoint = false;               /* 200 s lost is within 600 */
	assert_false(sched_policy_protected(&c, &j[0], 1000));
	sched_policy_plan_release(&p);
	(void)state;
}

/* A job started less than min_run_s ago is not preempted for an equal
 * priority; once the time is up it is, and the plan says when that is. */
static void test_min_run(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[2];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	c.min_run_s = 120;
	job(&c, &j[0], 1, 8, 0, 100, 200);       /* resumed 100 s ago */
	job(&c, &j[1], 2, 8, 150, UINT64_MAX, 200);
	assert_true(j[0].level > j[1].level);
	sched_policy_plan(&c, j, 2, 8, 200, &p);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.nwaits, 1);
	assert_true(p.next_change > 200 && p.next_change <= 220);

	sched_policy_account(&c, &j[0], 230);
	sched_policy_account(&c, &j[1], 230);
	sched_policy_plan(&c, j, 2, 8, 230, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 1);
	sched_policy_plan_release(&p);
	(void)state;
}

/* A higher priority still preempts a protected job; a protected job of a
 * higher priority group keeps its GPUs while a lower one gives way. */
static void test_priority_beats_protection(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[2];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	conf_master(&c);
	job(&c, &j[0], 1, 8, 0, 0, 30);          /* protected twice: young, no checkpoint */
	job(&c, &j[1], 2, 8, 10, UINT64_MAX, 30);
	j[1].priority = 2;
	assert_true(sched_policy_protected(&c, &j[0], 30));
	sched_policy_plan(&c, j, 2, 8, 30, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 0);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 1);

	/* 8 GPUs: protected 4-GPU jobs of priority 2 (job 3) and 1 (job 4),
	 * two waiting 4-GPU jobs of priority 2 (jobs 2 and 5) with less
	 * service than job 3: job 3 keeps its GPUs, job 2 takes job 4's, job 5
	 * waits (plain glas would run jobs 2 and 5 and stop both) */
	struct sched_pjob w[4];
	job(&c, &w[0], 2, 4, 10, UINT64_MAX, 30);
	job(&c, &w[1], 5, 4, 20, UINT64_MAX, 30);
	job(&c, &w[2], 3, 4, 0, 0, 30);
	job(&c, &w[3], 4, 4, 0, 0, 30);
	w[0].priority = w[1].priority = w[2].priority = 2;
	assert_true(w[2].level > w[0].level);
	sched_policy_plan(&c, w, 4, 8, 30, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 3);      /* job 4 */
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 0);        /* job 2 */
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 1);     /* job 5 */
	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	sched_policy_plan(&c, w, 4, 8, 30, &p);
	assert_int_equal(p.npreempts, 2);
	assert_int_equal(p.nstarts, 2);
	sched_policy_plan_release(&p);
	(void)state;
}

/* fair: another team's job (its team holds nothing) takes a running job's
 * GPUs, unless that job is protected; a higher priority still takes them. */
static void test_fair(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j[2];
	struct sched_policy_plan p;

	memset(&p, 0, sizeof(p));
	struct sched_team teams[2] = { { 1, 0 }, { 1, 0 } };
	sched_policy_conf_init(&c, SCHED_POLICY_FAIR);
	c.teams = teams;
	c.nteams = 2;
	job(&c, &j[0], 1, 8, 0, UINT64_MAX, 30);  /* team 0, waiting */
	job(&c, &j[1], 2, 8, 0, 0, 30);           /* team 1, running, no checkpoint */
	j[1].team = 1;
	sched_policy_plan(&c, j, 2, 8, 30, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 1);
	assert_int_equal(p.nstarts, 1);

	c.min_run_s = 120;
	c.max_lost_s = 600;
	c.need_checkpoint = true;
	sched_policy_plan(&c, j, 2, 8, 30, &p);
	assert_int_equal(p.npreempts, 0);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 0);

	j[0].priority = 2;
	sched_policy_plan(&c, j, 2, 8, 30, &p);
	assert_int_equal(p.npreempts, 1);
	assert_int_equal(p.preempts[0], 1);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0], 0);
	sched_policy_plan_release(&p);
	(void)state;
}

/* All protection off is today's behaviour: nothing is protected. */
static void test_off_by_default(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob j;

	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	assert_int_equal(c.min_run_s, 0);
	assert_int_equal(c.max_lost_s, 0);
	assert_false(c.need_checkpoint);
	job(&c, &j, 1, 8, 0, 0, 5);
	assert_false(sched_policy_protected(&c, &j, 5));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thrash_no_checkpoint),
		cmocka_unit_test(test_checkpoint_aware),
		cmocka_unit_test(test_min_run),
		cmocka_unit_test(test_priority_beats_protection),
		cmocka_unit_test(test_fair),
		cmocka_unit_test(test_off_by_default),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
