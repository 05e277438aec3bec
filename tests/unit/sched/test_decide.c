/* Unit tests of sched_decide() (sched/decide.h): each states a world (nodes,
 * queued and running jobs with their policy state, pools, the clock) and the
 * exact decision the scheduler must take in it. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/decide.h"

#define MAXN 4
#define MAXJ 8

/* A world under construction: nodes of GPUs, jobs of one task per GPU set. */
struct fx {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][8];
	struct sched_world_job jobs[MAXJ];
	struct sched_pjob pol[MAXJ];
	struct sched_task tasks[MAXJ][4];
	struct sched_hold holds[MAXJ][4];
	unsigned held_gpus[MAXJ][4][8];
	size_t nnodes, njobs;
	struct sched_policy_conf conf;
	struct sched_world w;
	struct sched_decision d;
};

static void add_node(struct fx *f, const char *name, unsigned ngpus)
{
	size_t i = f->nnodes++;
	for (unsigned g = 0; g < ngpus; g++)
		f->gpus[i][g] = (struct sched_gpu){ .index = g, .model = "A100", .free = true,
						    .memory = 40ull << 30 };
	f->nodes[i] = (struct sched_node){ .name = name, .schedulable = true, .gpus = f->gpus[i],
					   .ngpus = ngpus, .cpus_milli = 64000,
					   .memory = 256ull << 30, .free_cpus_milli = 64000,
					   .free_memory = 256ull << 30 };
}

/* A queued job of ntasks tasks of gpus GPUs each, submitted at `at`,
 * accounted to now. Returns its index. */
static size_t add_queued(struct fx *f, uint64_t id, int priority, unsigned ntasks, unsigned gpus,
			 uint64_t at, uint64_t now)
{
	size_t i = f->njobs++;
	for (unsigned t = 0; t < ntasks; t++)
		f->tasks[i][t] = (struct sched_task){ .role = "worker", .index = t, .gpus = gpus,
						      .cpus_milli = 1000 };
	f->jobs[i] = (struct sched_world_job){ .job = { .id = id, .priority = priority,
							.submitted_at = at, .tasks = f->tasks[i],
							.ntasks = ntasks } };
	sched_policy_job_init(&f->pol[i], id, ntasks * gpus, at);
	f->pol[i].priority = priority;
	sched_policy_account(&f->conf, &f->pol[i], now);
	return i;
}

/* A running job holding gpus GPUs of node `node` (its first free ones) since
 * `started` (submitted then too), checkpointed at ckpt (0: never),
 * accounted to now. */
static size_t add_running(struct fx *f, uint64_t id, int priority, size_t node, unsigned gpus,
			  uint64_t started, uint64_t ckpt, uint64_t now)
{
	size_t i = f->njobs++;
	struct sched_pjob *p = &f->pol[i];
	unsigned k = 0;

	for (size_t g = 0; g < f->nodes[node].ngpus && k < gpus; g++)
		if (f->gpus[node][g].free) {
			f->gpus[node][g].free = false;
			f->held_gpus[i][0][k++] = f->gpus[node][g].index;
		}
	assert_int_equal(k, gpus);
	f->nodes[node].free_cpus_milli -= 1000;
	f->holds[i][0] = (struct sched_hold){ .node = node, .gpus = f->held_gpus[i][0], .ngpus = gpus,
					      .cpus_milli = 1000 };
	f->jobs[i] = (struct sched_world_job){
		.job = { .id = id, .priority = priority, .submitted_at = started },
		.running = true, .preemptible = true, .holds = f->holds[i], .nholds = 1 };
	sched_policy_job_init(p, id, gpus, started);
	p->priority = priority;
	p->preemptible = true;
	sched_policy_account(&f->conf, p, started);
	sched_policy_started(p, started);
	sched_policy_account(&f->conf, p, now);
	p->checkpointed_at = ckpt;
	return i;
}

static void decide(struct fx *f, uint64_t now)
{
	f->w = (struct sched_world){ .nodes = f->nodes, .nnodes = f->nnodes, .jobs = f->jobs,
				     .pol = f->pol, .njobs = f->njobs, .policy = &f->conf,
				     .now = now };
	sched_decide(&f->w, &f->d);
}

static struct fx *fx_new(enum sched_policy p)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	sched_policy_conf_init(&f->conf, p);
	return f;
}

static void fx_free(struct fx *f)
{
	sched_decision_release(&f->d);
	free(f);
}

/* glas as the master runs it by default (master --preempt-min-run 2m,
 * --preempt-max-lost 10m). */
static void protect(struct fx *f)
{
	f->conf.min_run_s = 120;
	f->conf.max_lost_s = 600;
	f->conf.need_checkpoint = true;
}

/* The thrash of issue 15: two equal 8-GPU jobs without checkpoints and a
 * small one on 8 GPUs. Plain glas stops the running one for the newcomer,
 * whose reason names the real cause; with the master's protection the
 * running one keeps its GPUs, and both others wait with a reason. */
static void test_thrash(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GLAS);
	(void)state;
	add_node(f, "n1", 8);
	add_running(f, 1, 1, 0, 8, 0, 0, 200);
	add_queued(f, 2, 1, 1, 8, 1, 200);
	add_queued(f, 3, 1, 1, 1, 150, 200);
	decide(f, 200);
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].job, 0);
	assert_int_equal(f->d.preempts[0].by, 1);
	assert_int_equal(f->d.preempts[0].cause, SCHED_CAUSE_SERVICE);
	assert_string_equal(f->d.preempts[0].reason,
			    "preempted by job 2 (glas: it has had less GPU service)");
	/* a preemption frees nothing until the job has stopped */
	assert_int_equal(f->d.nstarts, 0);
	assert_int_equal(f->d.nwaits, 2);
	sched_decision_release(&f->d);

	protect(f);
	decide(f, 200);
	assert_int_equal(f->d.npreempts, 0);
	assert_int_equal(f->d.nstarts, 0);
	assert_int_equal(f->d.nwaits, 2);
	assert_int_equal(f->d.waits[0].job, 1);
	assert_int_equal(f->d.waits[0].position, 1);
	assert_string_equal(f->d.waits[0].code, "insufficient_gpus");
	assert_int_equal(f->d.waits[1].job, 2);
	assert_int_equal(f->d.waits[1].position, 2);
	assert_string_equal(f->d.waits[1].code, "insufficient_gpus");
	fx_free(f);
}

/* Checkpoint-aware: a job that checkpointed 50 s ago may be demoted (it
 * loses 50 s, under the 600 s bound); one whose last checkpoint is 700 s
 * old may not (it would lose more than the bound). */
static void test_checkpoint_aware(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GLAS);
	(void)state;
	protect(f);
	add_node(f, "n1", 8);
	add_running(f, 1, 1, 0, 8, 0, 150, 200);
	add_queued(f, 2, 1, 1, 8, 1, 200);
	decide(f, 200);
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].job, 0);
	assert_int_equal(f->d.preempts[0].by, 1);
	fx_free(f);

	f = fx_new(SCHED_POLICY_GLAS);
	protect(f);
	add_node(f, "n1", 8);
	add_running(f, 1, 1, 0, 8, 0, 100, 800);
	add_queued(f, 2, 1, 1, 8, 700, 800);
	decide(f, 800);
	assert_int_equal(f->d.npreempts, 0);
	assert_int_equal(f->d.nwaits, 1);
	assert_int_equal(f->d.waits[0].job, 1);
	fx_free(f);
}

/* A job that never checkpointed is preempted only by a higher priority;
 * the reason says so. */
static void test_higher_priority_preempts_protected(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GLAS);
	(void)state;
	protect(f);
	add_node(f, "n1", 8);
	add_running(f, 1, 1, 0, 8, 0, 0, 1000);
	add_queued(f, 2, 2, 1, 8, 900, 1000);
	decide(f, 1000);
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].job, 0);
	assert_int_equal(f->d.preempts[0].cause, SCHED_CAUSE_PRIORITY);
	assert_string_equal(f->d.preempts[0].reason, "preempted by job 2 of priority high");
	fx_free(f);
}

/* greedy does not preempt by policy: priority preemption (preempt.h) stops
 * the lower-priority job whose GPUs the waiting one needs, and no other. */
static void test_greedy_priority_preemption(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	(void)state;
	add_node(f, "n1", 4);
	add_node(f, "n2", 4);
	add_running(f, 1, 0, 0, 4, 0, 0, 100);   /* low, on n1 */
	add_running(f, 2, 1, 1, 4, 10, 0, 100);  /* normal, on n2 */
	add_queued(f, 3, 1, 1, 4, 50, 100);      /* normal: waits, preempts no one */
	add_queued(f, 4, 2, 1, 4, 60, 100);      /* high */
	decide(f, 100);
	/* the high job comes first in line and takes the low job's GPUs: the
	 * most recently started of the lower priorities would be job 2, but one
	 * victim is enough and the lowest priority goes first */
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].job, 0);
	assert_int_equal(f->d.preempts[0].by, 3);
	assert_string_equal(f->d.preempts[0].reason, "preempted by job 4 of priority high");
	assert_int_equal(f->d.nwaits, 2);
	assert_int_equal(f->d.waits[0].job, 3);
	assert_int_equal(f->d.waits[1].job, 2);
	/* while a preempted job is still stopping, nothing more is preempted */
	sched_decision_release(&f->d);
	f->w.stopping = true;
	sched_decide(&f->w, &f->d);
	assert_int_equal(f->d.npreempts, 0);
	assert_int_equal(f->d.nwaits, 2);
	fx_free(f);
}

/* Starts carry their placement: a gang of two 4-GPU tasks on two empty
 * 4-GPU nodes gets one node each, every GPU of it. */
static void test_start_placement(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GLAS);
	bool used[2] = { false, false };
	(void)state;
	add_node(f, "n1", 4);
	add_node(f, "n2", 4);
	add_queued(f, 7, 1, 2, 4, 0, 10);
	decide(f, 10);
	assert_int_equal(f->d.nstarts, 2);
	assert_int_equal(f->d.nwaits, 0);
	for (size_t s = 0; s < 2; s++) {
		assert_int_equal(f->d.starts[s].job, 0);
		assert_int_equal(f->d.starts[s].ngpus, 4);
		assert_true(f->d.starts[s].node < 2);
		used[f->d.starts[s].node] = true;
	}
	assert_true(used[0] && used[1]);
	fx_free(f);
}

/* fifo holds a job that would fit behind a head that does not: its reason
 * says it waits behind the head, after the head's own. */
static void test_fifo_head_of_line(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_FIFO);
	(void)state;
	add_node(f, "n1", 5);
	add_running(f, 1, 1, 0, 4, 0, 0, 100);
	add_queued(f, 2, 1, 1, 4, 10, 100);
	add_queued(f, 3, 1, 1, 1, 20, 100);
	decide(f, 100);
	assert_int_equal(f->d.nstarts, 0);
	assert_int_equal(f->d.npreempts, 0);
	assert_int_equal(f->d.nwaits, 2);
	assert_int_equal(f->d.waits[0].job, 1);
	assert_string_equal(f->d.waits[0].code, "insufficient_gpus");
	assert_int_equal(f->d.waits[1].job, 2);
	assert_int_equal(f->d.waits[1].position, 2);
	assert_string_equal(f->d.waits[1].code, "behind_head");
	assert_non_null(strstr(f->d.waits[1].message, "behind the head"));
	/* and new arrivals under fifo need a full decision */
	f->w.new_only = true;
	assert_false(sched_new_only_ok(&f->w));
	fx_free(f);
}

/* new_only places new arrivals on what is free, with no positions and no
 * preemption, even where a full decision would preempt. */
static void test_new_only(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GLAS);
	(void)state;
	add_node(f, "n1", 8);
	add_running(f, 1, 1, 0, 6, 0, 0, 5000);
	add_queued(f, 2, 1, 1, 2, 4990, 5000);
	add_queued(f, 3, 1, 1, 4, 4995, 5000);
	decide(f, 5000);
	assert_int_equal(f->d.npreempts, 1); /* glas: job 3 has had less service */
	sched_decision_release(&f->d);
	f->w.new_only = true;
	assert_true(sched_new_only_ok(&f->w));
	sched_decide(&f->w, &f->d);
	assert_int_equal(f->d.npreempts, 0);
	assert_int_equal(f->d.nstarts, 1);
	assert_int_equal(f->d.starts[0].job, 1);
	assert_int_equal(f->d.nwaits, 1);
	assert_int_equal(f->d.waits[0].job, 2);
	assert_int_equal(f->d.waits[0].position, 0);
	fx_free(f);
}

/* The count scheme (yard sim --scheme count): GPUs counted, no placement,
 * the policy's preemptions taken as they are, no waits. */
static void test_count_scheme(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_LAS);
	(void)state;
	add_node(f, "n1", 4);
	add_node(f, "n2", 4);
	add_running(f, 1, 1, 0, 3, 0, 0, 10000); /* 30,000 GPU-s: level 3 */
	add_running(f, 2, 1, 1, 3, 0, 0, 10000);
	add_queued(f, 3, 1, 1, 4, 9000, 10000);
	f->w = (struct sched_world){ .nodes = f->nodes, .nnodes = 2, .jobs = f->jobs, .pol = f->pol,
				     .njobs = 3, .policy = &f->conf, .now = 10000, .count = true };
	sched_decide(&f->w, &f->d);
	/* by count, 2 GPUs are free: one victim (3 GPUs) makes room for 4 */
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].by, 2);
	assert_int_equal(f->d.nstarts, 1);
	assert_int_equal(f->d.starts[0].job, 2);
	assert_int_equal(f->d.starts[0].node, SIZE_MAX);
	assert_int_equal(f->d.nwaits, 0);
	/* one pool (the simulator's): the same decision, on the world's arrays,
	 * and the decision passed again reuses its scratch */
	size_t victim = f->d.preempts[0].job;
	f->w.one_pool = true;
	sched_decide(&f->w, &f->d);
	assert_int_equal(f->d.npreempts, 1);
	assert_int_equal(f->d.preempts[0].job, victim);
	assert_int_equal(f->d.preempts[0].by, 2);
	assert_string_equal(f->d.preempts[0].reason,
			    "preempted by job 3 (las: it has had less GPU service)");
	assert_int_equal(f->d.nstarts, 1);
	assert_int_equal(f->d.starts[0].job, 2);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thrash),
		cmocka_unit_test(test_checkpoint_aware),
		cmocka_unit_test(test_higher_priority_preempts_protected),
		cmocka_unit_test(test_greedy_priority_preemption),
		cmocka_unit_test(test_start_placement),
		cmocka_unit_test(test_fifo_head_of_line),
		cmocka_unit_test(test_new_only),
		cmocka_unit_test(test_count_scheme),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
