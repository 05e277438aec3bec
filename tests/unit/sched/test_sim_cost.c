/*
 * The simulator's cost model of the live master (sim/sim.h): checkpoints,
 * the work a preemption throws away, and the protections of running work
 * (sched/policy.h conf min_run_s, max_lost_s, need_checkpoint). Traces are
 * written here, tiny, and every number below is worked out by hand in the
 * comments, not copied from a run.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sim/sim.h"

/* Replays jobs[0..n) (id i, 1 GPU each) on a 1-GPU cluster. */
static void replay(struct sim_job *jobs, size_t n, const struct sim_opts *o,
		   struct sim_result *res, struct sim_stats *st)
{
	struct sim_trace t = { jobs, n, n };
	struct sim_opts opts = *o;

	opts.nodes = 1;
	opts.gpus_per_node = 1;
	sim_run(&t, &opts, res, st);
}

/*
 * srtf on one GPU: A (0 s, 100 s of work), B (30 s, 10 s), C (50 s, 10 s).
 * Each newcomer is shorter than what A has left, so it preempts A.
 *
 * Without checkpoints A keeps its work: A 0-30 (70 left), B 30-40, A 40-50
 * (60 left), C 50-60, A 60-120.
 *
 * Checkpoints every 20 s of a run: A's first run checkpoints at 20, so at 30
 * it loses 10 s (70 + 10 = 80 left); B 30-40; A resumes at 40, its next
 * checkpoint would be at 60, so at 50 it loses all 10 s of that run (80 - 10
 * + 10 = 80 left); C 50-60; A 60-140. Lost: 10 + 10 = 20 GPU-s.
 *
 * The same with a 5 s restart penalty: at 30 A loses 10 (80 left); it
 * resumes at 40 with 85 to do, 5 of them the penalty; at 50 it has done 10,
 * of which 5 were the penalty, and no checkpoint: it loses the 5 s of work
 * done after the penalty (85 - 10 + 5 = 80 left); resumes at 60 with 85,
 * ends at 145. Lost: 10 + 5 = 15 GPU-s.
 */
static void test_checkpoints_lose_work_since(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 100, 1 },
		{ 1, 30, 10, 1 },
		{ 2, 50, 10, 1 },
	};
	struct sim_opts o;
	struct sim_result res[3];
	struct sim_stats st;

	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_SRTF);

	replay(jobs, 3, &o, res, &st);
	assert_int_equal(res[0].end, 120);
	assert_int_equal(res[1].end, 40);
	assert_int_equal(res[2].end, 60);
	assert_int_equal(st.preemptions, 2);
	assert_int_equal(st.lost_gpu_s, 0);

	o.checkpoint_interval = 20;
	replay(jobs, 3, &o, res, &st);
	assert_int_equal(res[0].end, 140);
	assert_int_equal(res[0].jct, 140);
	assert_int_equal(res[0].queued, 20); /* waited 30-40 and 50-60 */
	assert_int_equal(res[1].jct, 10);
	assert_int_equal(res[2].jct, 10);
	assert_int_equal(res[0].preemptions, 2);
	assert_int_equal(st.lost_gpu_s, 20);
	assert_int_equal(st.makespan, 140);
	assert_true(st.avg_jct > 53.33 && st.avg_jct < 53.34); /* (140 + 10 + 10) / 3 */

	o.restart_penalty = 5;
	replay(jobs, 3, &o, res, &st);
	assert_int_equal(res[0].end, 145);
	assert_int_equal(st.lost_gpu_s, 15);
	assert_int_equal(st.preemptions, 2);
	(void)state;
}

/*
 * The issue-15 thrash: two equal 1-GPU jobs of 1,000 s, both submitted at
 * 0, on one GPU, under las with a level every 100 GPU-seconds (100, ...,
 * 900) and no ageing. Unprotected, each crossing hands the GPU to the
 * other job, which is a level lower:
 *   A 0-100 (A has 100), B 100-300 (200: it keeps the GPU when it reaches
 *   A's level, running jobs first), A 300-500 (300), B 500-700 (400),
 *   A 700-900 (500), B 900-1100 (600), A 1100-1300 (700), B 1300-1500
 *   (800), A 1500-1700 (900, the last level), B 1700-1900 (reaches 900 at
 *   1800, keeps the GPU, done at 1900), A 1900-2000.
 * Nine preemptions, JCTs 2,000 and 1,900. With the master's protections
 * (--live) and jobs that never checkpoint, A's run is protected throughout
 * (need_checkpoint: preempting it would throw all of it away): A 0-1000,
 * B 1000-2000, no preemption.
 */
static void test_live_protections_stop_thrash(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 1000, 1 },
		{ 1, 0, 1000, 1 },
	};
	struct sim_opts o;
	struct sim_result res[2];
	struct sim_stats st;

	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_LAS);
	o.conf.nthresholds = 9;
	for (size_t i = 0; i < o.conf.nthresholds; i++)
		o.conf.thresholds[i] = 100 * (i + 1);
	o.conf.age_pct = 0;

	replay(jobs, 2, &o, res, &st);
	assert_int_equal(st.preemptions, 9);
	assert_int_equal(res[0].preemptions, 5);
	assert_int_equal(res[1].preemptions, 4);
	assert_int_equal(res[0].end, 2000);
	assert_int_equal(res[1].end, 1900);

	/* what yard sim --live sets */
	o.conf.min_run_s = SCHED_PREEMPT_MIN_RUN_S;
	o.conf.max_lost_s = SCHED_PREEMPT_MAX_LOST_S;
	o.conf.need_checkpoint = true;
	replay(jobs, 2, &o, res, &st);
	assert_int_equal(st.preemptions, 0);
	assert_int_equal(res[0].end, 1000);
	assert_int_equal(res[1].end, 2000);
	assert_int_equal(st.lost_gpu_s, 0);
	(void)state;
}

/*
 * The protections with checkpoints: the same two jobs under glas's default
 * levels (64, 256, 1,024, ... GPU-seconds; ageing cannot fire here: a job
 * would have to wait 20 times its 64-256 s of service), checkpoints every
 * 100 s, --live. A starts at 0 and reaches level 1 at 64, but is protected
 * (no checkpoint yet, and under its 120 s minimum run); it checkpoints at
 * 100, and at 120 its minimum run ends: B (level 0) preempts it, A loses
 * the 20 s since its checkpoint (900 left). B reaches level 1 at 184 and
 * keeps the GPU (running first), checkpoints at 220 and 320, reaches level
 * 2 (256) at 376: A (level 1) preempts it, B loses 56 s (1,000 - 256 + 56
 * = 800 left). A reaches level 2 at 512 and keeps the GPU to its end at
 * 376 + 900 = 1,276; B 1,276-2,076. Lost: 20 + 56 = 76 GPU-s.
 */
static void test_live_with_checkpoints(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 1000, 1 },
		{ 1, 0, 1000, 1 },
	};
	struct sim_opts o;
	struct sim_result res[2];
	struct sim_stats st;

	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_GLAS);
	o.conf.min_run_s = SCHED_PREEMPT_MIN_RUN_S;
	o.conf.max_lost_s = SCHED_PREEMPT_MAX_LOST_S;
	o.conf.need_checkpoint = true;
	o.checkpoint_interval = 100;
	replay(jobs, 2, &o, res, &st);
	assert_int_equal(st.preemptions, 2);
	assert_int_equal(st.lost_gpu_s, 76);
	assert_int_equal(res[0].end, 1276);
	assert_int_equal(res[1].end, 2076);
	(void)state;
}

/*
 * The place scheme places on nodes, as the master does; the count scheme
 * only counts GPUs. On 2 nodes of 4 GPUs under fifo: A and B (3 GPUs each,
 * 100 s) arrive at 0 and C (2 GPUs, 10 s) at 1. By count 2 GPUs are free
 * at 1, so C runs 1-11 (JCT 10). Placed, A holds 3 of n1 and B 3 of n2:
 * the 2 free GPUs are on two nodes, and C, one task of 2 GPUs, waits until
 * A and B end at 100 and runs 100-110 (JCT 109).
 */
static void test_place_scheme_places(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 100, 3 },
		{ 1, 0, 100, 3 },
		{ 2, 1, 10, 2 },
	};
	struct sim_trace t = { jobs, 3, 3 };
	struct sim_opts o;
	struct sim_result res[3];
	struct sim_stats st;

	(void)state;
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_FIFO);
	o.nodes = 2;
	o.gpus_per_node = 4;
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[2].start, 1);
	assert_int_equal(res[2].jct, 10);

	o.scheme = SIM_SCHEME_PLACE;
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[0].end, 100);
	assert_int_equal(res[1].end, 100);
	assert_int_equal(res[2].start, 100);
	assert_int_equal(res[2].jct, 109);
}

/*
 * A preemption by placement: on 1 node of 2 GPUs under las (one level
 * below 100 GPU-s), A (1 GPU, 1000 s) runs from 0; at 100, having had 100
 * GPU-s, it is in the lower level; X and Y never get there (20 and 10). X (2 GPUs, 10 s) arrives at 100 and Y
 * (1 GPU, 10 s) at 100 too, after X. By count X needs A's GPU: A is
 * preempted for X, X runs 100-110; Y must not take the GPU that is free at
 * 100 (X counts on it), so it waits behind X, then runs (with A back in
 * the lower level after it) 110-120; A resumes at 110 alongside Y and ends
 * at 110 + 900 = 1010.
 */
static void test_place_preempts_for_the_first(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 1000, 1 },
		{ 1, 100, 10, 2 },
		{ 2, 100, 10, 1 },
	};
	struct sim_trace t = { jobs, 3, 3 };
	struct sim_opts o;
	struct sim_result res[3];
	struct sim_stats st;

	(void)state;
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_LAS);
	o.conf.thresholds[0] = 100;
	o.conf.nthresholds = 1;
	o.conf.age_pct = 0;
	o.nodes = 1;
	o.gpus_per_node = 2;
	o.scheme = SIM_SCHEME_PLACE;
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[1].start, 100);
	assert_int_equal(res[1].end, 110);
	assert_int_equal(res[2].start, 110);
	assert_int_equal(res[2].end, 120);
	assert_int_equal(res[0].preemptions, 1);
	assert_int_equal(res[0].end, 1010);
}

/*
 * The place scheme wakes for the jobs that run, not for the next level of
 * a job the policy would start that placement leaves waiting. On 2 nodes
 * of 4 GPUs under las (one level below 40 GPU-s, no ageing): A and B (3
 * GPUs, 1000 s each) arrive at 0 and take 3 GPUs of each node; D (9 GPUs)
 * never fits; C (2 GPUs, 10 s) arrives at 1. By count C fits (2 GPUs are
 * free), but no node has 2 free: it waits until A and B end at 1000 and
 * runs 1000-1010. A and B reach 40 GPU-s at 14 (ceil(40 / 3)) and nothing
 * changes: C still goes first by count and is still not placed. C, were it
 * running, would reach 40 GPU-s 20 s later; it is not, and a replay that
 * took the policy's next_change woke every 20 s from 14 to 994 for
 * nothing (54 events in all). Events: 0, 1, 14, 1000 and 1010.
 */
static void test_place_wakes_for_running_jobs(void **state)
{
	struct sim_job jobs[] = {
		{ 0, 0, 1000, 3 },
		{ 1, 0, 1000, 3 },
		{ 2, 0, 10, 9 },
		{ 3, 1, 10, 2 },
	};
	struct sim_trace t = { jobs, 4, 4 };
	struct sim_opts o;
	struct sim_result res[4];
	struct sim_stats st;

	(void)state;
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_LAS);
	o.conf.thresholds[0] = 40;
	o.conf.nthresholds = 1;
	o.conf.age_pct = 0;
	o.nodes = 2;
	o.gpus_per_node = 4;
	o.scheme = SIM_SCHEME_PLACE;
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[3].start, 1000);
	assert_int_equal(res[3].end, 1010);
	assert_int_equal(st.unfinished, 1);
	assert_int_equal(st.preemptions, 0);
	assert_int_equal(st.events, 5);

	o.scheme = SIM_SCHEME_COUNT; /* counted, C runs at once */
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[3].start, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_place_scheme_places),
		cmocka_unit_test(test_place_preempts_for_the_first),
		cmocka_unit_test(test_place_wakes_for_running_jobs),
		cmocka_unit_test(test_checkpoints_lose_work_since),
		cmocka_unit_test(test_live_protections_stop_thrash),
		cmocka_unit_test(test_live_with_checkpoints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
