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

/*
 * A tiny event-driven driver for the ageing tests: job 0, a long 4-GPU job,
 * is submitted at 0 on a 4-GPU pool; from t=1010 a 4-GPU job of 50 s arrives
 * every 50 s, so one short job is always running or waiting and, under plain
 * las, the long job (demoted at 813 s) never runs again. Runs to `until` and
 * returns when job 0 first resumed after its preemption (UINT64_MAX: never);
 * *next_change_at_3010 (OUT) is the plan's next_change at t=3010.
 */
#define AGE_SHORTS 100
static uint64_t run_stream(const struct sched_policy_conf *c, uint64_t until,
			   struct sched_pjob *lng, uint64_t *next_change_at_3010)
{
	struct sched_pjob j[AGE_SHORTS + 1], act[AGE_SHORTS + 1];
	uint64_t arrive[AGE_SHORTS + 1], left[AGE_SHORTS + 1];
	size_t map[AGE_SHORTS + 1];
	bool done[AGE_SHORTS + 1] = { false };
	struct sched_policy_plan p;
	uint64_t now = 0, next_change = 0, resumed = UINT64_MAX; /* first round at 0 */
	bool preempted = false;

	memset(&p, 0, sizeof(p));
	*next_change_at_3010 = 0;
	arrive[0] = 0;
	left[0] = 1000000;
	for (size_t k = 1; k <= AGE_SHORTS; k++) {
		arrive[k] = 1010 + 50 * (k - 1);
		left[k] = 50;
	}
	for (size_t k = 0; k <= AGE_SHORTS; k++)
		job(&j[k], k + 1, 4, arrive[k]);
	while (now < until) {
		uint64_t t = next_change;
		size_t n = 0;
		for (size_t k = 0; k <= AGE_SHORTS; k++) {
			if (done[k])
				continue;
			if (arrive[k] > now && arrive[k] < t)
				t = arrive[k];
			if (arrive[k] <= now && j[k].running && now + left[k] < t)
				t = now + left[k];
		}
		if (t == UINT64_MAX)
			break;
		for (size_t k = 0; k <= AGE_SHORTS; k++) {
			if (done[k] || arrive[k] > t)
				continue;
			if (j[k].running)
				left[k] -= t - now;
			sched_policy_account(c, &j[k], t);
			if (j[k].running && !left[k]) {
				done[k] = true;
				continue;
			}
			act[n] = j[k];
			map[n++] = k;
		}
		now = t;
		sched_policy_plan(c, act, n, 4, now, &p);
		next_change = p.next_change;
		if (now == 3010)
			*next_change_at_3010 = p.next_change;
		for (size_t x = 0; x < p.npreempts; x++) {
			sched_policy_requeue(&act[p.preempts[x]], now);
			preempted |= map[p.preempts[x]] == 0;
		}
		for (size_t x = 0; x < p.nstarts; x++) {
			sched_policy_started(&act[p.starts[x]], now);
			if (map[p.starts[x]] == 0 && preempted && resumed == UINT64_MAX)
				resumed = now;
		}
		for (size_t x = 0; x < n; x++)
			j[map[x]] = act[x];
	}
	*lng = j[0];
	sched_policy_plan_release(&p);
	return resumed;
}

/* Ageing: the long job, preempted at 1010 after running 1010 s, is promoted
 * to level 0 once it has waited K x 1010 s (at 3030 with K = 2, dated at that
 * second, and next_change tells the caller when), and runs as soon as the
 * short job then running ends. */
static void test_las_ageing_bounds_starvation(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob lng;
	uint64_t nc, resumed;

	sched_policy_conf_init(&c, SCHED_POLICY_LAS);
	c.age_pct = 200;
	resumed = run_stream(&c, 3100, &lng, &nc);
	assert_int_equal(nc, 3030);         /* the promotion is due before the next event */
	assert_int_equal(lng.promotions, 1);
	assert_int_equal(resumed, 3060);    /* the short job running at 3030 ends at 3060 */
	assert_true(lng.running);
	assert_int_equal(lng.level, 0);
	assert_int_equal(lng.level_since, 3030);
	assert_int_equal(lng.level_base, 4 * 1010);

	/* once promoted, its levels count from there: it demotes after another
	 * 3250 GPU-seconds (813 s), and is preempted */
	resumed = run_stream(&c, 3060 + 813 + 10, &lng, &nc);
	assert_int_equal(lng.level, 1);
	assert_false(lng.running);
	assert_int_equal(lng.served, 1010 + 813); /* preempted at the demotion */
	/* its next promotion waits twice all it has run, not twice the 813 s
	 * since the last one: a job promoted and demoted again at once would
	 * otherwise be promoted again at once, for ever */
	assert_int_equal(sched_policy_promotion_at(&c, &lng), 3060 + 813 + 2 * (1010 + 813));

	/* a batch caller that accounts late still sees the promotion dated
	 * at the second the limit was reached */
	struct sched_pjob w;
	job(&w, 9, 2, 0);
	sched_policy_started(&w, 0);
	sched_policy_account(&c, &w, 2000);  /* 4000 GPU-s: level 1 */
	sched_policy_requeue(&w, 2000);
	sched_policy_account(&c, &w, 9000);  /* waited 7000 s >= 2 x 2000 */
	assert_int_equal(w.level, 0);
	assert_int_equal(w.level_since, 6000);
	assert_int_equal(w.waited, 0);
	(void)state;
}

/* Ageing off (age_pct 0): today's las, the long job is never promoted and
 * never runs again while short jobs keep coming. The defaults are on. */
static void test_las_ageing_disabled(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob lng;
	uint64_t nc, resumed;

	sched_policy_conf_init(&c, SCHED_POLICY_LAS);
	assert_int_equal(c.age_pct, 400);
	c.age_pct = 0;
	resumed = run_stream(&c, 1010 + 50 * (AGE_SHORTS - 1), &lng, &nc);
	assert_true(resumed == UINT64_MAX);
	assert_int_equal(lng.promotions, 0);
	assert_int_equal(lng.level, 1);
	assert_true(nc != 3030);

	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	assert_int_equal(c.age_pct, 2000);
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	assert_int_equal(c.age_pct, 0);
	(void)state;
}

/* A small deterministic generator for the order test. */
static uint64_t order_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

/* Random policy state for one waiting job (field values collide often, so
 * that the later fields and the id decide). */
static void order_job(struct sched_pjob *j, uint64_t id, uint64_t *s)
{
	job(j, id, 1 + (unsigned)order_rand(s) % 4, order_rand(s) % 8);
	j->priority = (int)(order_rand(s) % 3);
	j->level = (unsigned)(order_rand(s) % 4);
	j->level_since = order_rand(s) % 8;
	j->remaining = order_rand(s) % 8;
}

/*
 * The plan's order is sched_policy_cmp's, however the jobs are laid out
 * and whatever the last plan's order was: a plan reused after a few jobs
 * changed (its sort starts from the last order and merges in the keys out
 * of place), after many changed (more out of place than it inserts one by
 * one), and after the jobs moved to other indexes.
 */
static void test_plan_order_any_layout(void **state)
{
	static const enum sched_policy pols[] = { SCHED_POLICY_LAS, SCHED_POLICY_GLAS,
						  SCHED_POLICY_SRTF, SCHED_POLICY_FIFO };
	enum { N = 150 };
	struct sched_pjob j[N];
	size_t ref[N];
	uint64_t seed = 42;

	for (size_t p = 0; p < ARRAY_SIZE(pols); p++) {
		struct sched_policy_conf c;
		struct sched_policy_plan plan;

		memset(&plan, 0, sizeof(plan));
		sched_policy_conf_init(&c, pols[p]);
		for (size_t i = 0; i < N; i++)
			order_job(&j[i], 1000 + i, &seed);
		for (int round = 0; round < 40; round++) {
			/* rounds 0-19 change 1-4 jobs, 20-29 up to 60, 30-39 swap
			 * jobs between indexes */
			size_t changes = round < 20 ? 1 + order_rand(&seed) % 4
					 : round < 30 ? order_rand(&seed) % 60 : 0;
			for (size_t k = 0; k < changes; k++) {
				size_t i = order_rand(&seed) % N;
				order_job(&j[i], j[i].id, &seed);
			}
			for (size_t k = 0; round >= 30 && k < 10; k++) {
				size_t a = order_rand(&seed) % N, b = order_rand(&seed) % N;
				struct sched_pjob t = j[a];
				j[a] = j[b];
				j[b] = t;
			}
			/* no GPUs: every job waits, listed in the policy's order */
			sched_policy_plan(&c, j, N, 0, 100, &plan);
			assert_int_equal(plan.nstarts, 0);
			assert_int_equal(plan.nwaits, N);
			for (size_t i = 0; i < N; i++) {
				size_t m = i;
				for (; m && sched_policy_cmp(&c, &j[i], &j[ref[m - 1]]) < 0; m--)
					ref[m] = ref[m - 1];
				ref[m] = i;
			}
			for (size_t k = 0; k < N; k++)
				assert_int_equal(plan.waits[k].job, ref[k]);
		}
		sched_policy_plan_release(&plan);
	}
	(void)state;
}

/* A job's own next change: a running job's next level (glas: 64 GPU-s
 * first), a waiting one's promotion, the end of a protection. */
static void test_next_change_of(void **state)
{
	struct sched_policy_conf c;
	struct sched_pjob r, w;

	sched_policy_conf_init(&c, SCHED_POLICY_GLAS);
	job(&r, 1, 2, 0);
	sched_policy_started(&r, 0);
	sched_policy_account(&c, &r, 5); /* 10 GPU-s: 54 to go on 2 GPUs */
	assert_int_equal(sched_policy_next_change_of(&c, &r, 5), 5 + 27);
	job(&w, 2, 1, 0);
	assert_true(sched_policy_next_change_of(&c, &w, 5) == UINT64_MAX); /* never ran */
	sched_policy_started(&w, 0);
	sched_policy_account(&c, &w, 100); /* 100 GPU-s: level 1 from 64 */
	sched_policy_requeue(&w, 100);
	assert_int_equal(w.level, 1);
	/* promoted after 20 x 100 s of waiting */
	assert_int_equal(sched_policy_next_change_of(&c, &w, 100), 2100);
	assert_int_equal(sched_policy_next_change_of(&c, &w, 100),
			 sched_policy_promotion_at(&c, &w));
	c.min_run_s = 10; /* r's minimum run ends first */
	assert_int_equal(sched_policy_next_change_of(&c, &r, 5), 10);
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	assert_true(sched_policy_next_change_of(&c, &r, 5) == UINT64_MAX);
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
		cmocka_unit_test(test_las_ageing_bounds_starvation),
		cmocka_unit_test(test_las_ageing_disabled),
		cmocka_unit_test(test_plan_order_any_layout),
		cmocka_unit_test(test_next_change_of),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
