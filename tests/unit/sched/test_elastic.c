/* Unit tests of sched/elastic.h: each states a world, runs the scheduler's
 * decision on it (sched_decide), and checks how many nodes of a pool's
 * shape the plan asks for and how every waiting job stands; then the
 * choice of idle nodes to give back. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/elastic.h"

#define MAXN 4
#define MAXJ 8

struct fx {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][8];
	struct sched_world_job jobs[MAXJ];
	struct sched_pjob pol[MAXJ];
	struct sched_task tasks[MAXJ][4];
	size_t nnodes, njobs;
	struct sched_policy_conf conf;
	struct sched_world w;
	struct sched_decision d;
	struct elastic_plan plan;
};

static const struct elastic_shape two_v100 = { .gpus = 2, .gpu_model = "V100", .gpu_memory = 16ull << 30,
					       .cpus_milli = 8000, .memory = 64ull << 30 };

static void add_node(struct fx *f, const char *name, const char *pool, unsigned ngpus)
{
	size_t i = f->nnodes++;
	for (unsigned g = 0; g < ngpus; g++)
		f->gpus[i][g] = (struct sched_gpu){ .index = g, .model = "V100", .free = true,
						    .memory = 16ull << 30 };
	f->nodes[i] = (struct sched_node){ .name = name, .schedulable = true, .gpus = f->gpus[i],
					   .ngpus = ngpus, .cpus_milli = 8000, .memory = 64ull << 30,
					   .free_cpus_milli = 8000, .free_memory = 64ull << 30,
					   .pool = pool };
}

/* A queued job of pool, ntasks tasks of gpus GPUs each; returns its index. */
static size_t add_job(struct fx *f, const char *pool, unsigned ntasks, unsigned gpus)
{
	size_t i = f->njobs++;
	for (unsigned t = 0; t < ntasks; t++)
		f->tasks[i][t] = (struct sched_task){ .role = "worker", .index = t, .gpus = gpus,
						      .cpus_milli = 1000 };
	f->jobs[i] = (struct sched_world_job){ .job = { .id = i + 1, .priority = 1,
							.submitted_at = i + 1, .tasks = f->tasks[i],
							.ntasks = ntasks, .pool = pool } };
	sched_policy_job_init(&f->pol[i], i + 1, ntasks * gpus, i + 1);
	return i;
}

static struct fx *fx_new(enum sched_policy p)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	sched_policy_conf_init(&f->conf, p);
	return f;
}

static void plan(struct fx *f, const struct elastic_pool *pools, size_t npools)
{
	f->w = (struct sched_world){ .nodes = f->nodes, .nnodes = f->nnodes, .jobs = f->jobs,
				     .pol = f->pol, .njobs = f->njobs, .policy = &f->conf,
				     .now = 100 };
	sched_decide(&f->w, &f->d);
	elastic_plan(&f->w, &f->d, pools, npools, &f->plan);
}

/* How the decision's wait of world job j stands (fails when j did not wait). */
static enum elastic_cover cover_of(const struct fx *f, size_t j)
{
	for (size_t i = 0; i < f->d.nwaits; i++)
		if (f->d.waits[i].job == j)
			return f->plan.cover[i];
	fail_msg("job %zu did not wait", j);
	return ELASTIC_NOT_DEMAND;
}

static void fx_free(struct fx *f)
{
	elastic_plan_release(&f->plan);
	sched_decision_release(&f->d);
	free(f);
}

/* A pool with no node: one new node per job that needs a whole one. */
static void test_empty_pool(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	struct elastic_pool p = { .pool = "gpu", .shape = &two_v100, .room = 8, .max = 8 };
	size_t a, b;

	add_node(f, "cpu-1", NULL, 0); /* another pool's node helps no one */
	a = add_job(f, "gpu", 1, 2);
	b = add_job(f, "gpu", 1, 2);
	plan(f, &p, 1);
	assert_int_equal(f->d.nwaits, 2);
	assert_int_equal(f->plan.add[0], 2);
	assert_int_equal(f->plan.demand[0], 2);
	assert_int_equal(cover_of(f, a), ELASTIC_NEW);
	assert_int_equal(cover_of(f, b), ELASTIC_NEW);
	fx_free(f);
}

/* Fewest nodes: two 1-GPU jobs share one new 2-GPU node; a gang of 3 x 2
 * GPUs needs three; nodes asked for already count. */
static void test_fewest(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	struct elastic_pool p = { .pool = "gpu", .shape = &two_v100, .room = 8, .max = 8 };
	size_t a, b, g;

	a = add_job(f, "gpu", 1, 1);
	b = add_job(f, "gpu", 1, 1);
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 1);
	assert_int_equal(cover_of(f, a), ELASTIC_NEW);
	assert_int_equal(cover_of(f, b), ELASTIC_NEW);
	fx_free(f);

	f = fx_new(SCHED_POLICY_GREEDY);
	g = add_job(f, "gpu", 3, 2);
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 3);
	assert_int_equal(cover_of(f, g), ELASTIC_NEW);
	fx_free(f);

	/* two of the three are on their way: one more */
	f = fx_new(SCHED_POLICY_GREEDY);
	g = add_job(f, "gpu", 3, 2);
	p.pending = 2;
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 1);
	assert_int_equal(cover_of(f, g), ELASTIC_NEW);
	fx_free(f);

	/* all three: nothing more, and the job is covered by them */
	f = fx_new(SCHED_POLICY_GREEDY);
	g = add_job(f, "gpu", 3, 2);
	p.pending = 3;
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 0);
	assert_int_equal(f->plan.demand[0], 1);
	assert_int_equal(cover_of(f, g), ELASTIC_PENDING);
	fx_free(f);
}

/* What the pool has free counts: a gang of two 1-GPU tasks takes the free
 * GPU of a busy node and one new node; what the decision starts is not free
 * for the jobs that wait. */
static void test_uses_what_is_free(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	struct elastic_pool p = { .pool = "gpu", .shape = &two_v100, .room = 8, .max = 8 };
	size_t first, g;

	add_node(f, "gpu-1", "gpu", 2);
	first = add_job(f, "gpu", 1, 1); /* started by the decision: one GPU left */
	g = add_job(f, "gpu", 3, 1);     /* 3 x 1 GPU: the free one, and 2 on a new node */
	plan(f, &p, 1);
	assert_int_equal(f->d.nstarts, 1);
	assert_int_equal(f->d.starts[0].job, first);
	assert_int_equal(f->plan.add[0], 1);
	assert_int_equal(cover_of(f, g), ELASTIC_NEW);
	fx_free(f);

	/* the same gang alone, the node free: the decision starts it, no demand */
	f = fx_new(SCHED_POLICY_GREEDY);
	add_node(f, "gpu-1", "gpu", 2);
	add_job(f, "gpu", 2, 1);
	plan(f, &p, 1);
	assert_int_equal(f->d.nwaits, 0);
	assert_int_equal(f->plan.add[0], 0);
	fx_free(f);
}

/* The room caps the plan; the jobs past it have no room, those no node of
 * the shape could run never get any. */
static void test_room_and_never(void **state)
{
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	struct elastic_pool p = { .pool = "gpu", .shape = &two_v100, .room = 1, .max = 4 };
	size_t a, b, big, model;

	a = add_job(f, "gpu", 1, 2);
	b = add_job(f, "gpu", 1, 2);
	big = add_job(f, "gpu", 1, 4); /* 4 GPUs in one task: no 2-GPU node holds it */
	model = add_job(f, "gpu", 1, 1);
	f->jobs[model].job.gpu_model = "A100";
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 1);
	assert_int_equal(f->plan.demand[0], 1);
	assert_int_equal(cover_of(f, a), ELASTIC_NEW);
	assert_int_equal(cover_of(f, b), ELASTIC_NO_ROOM);
	assert_int_equal(cover_of(f, big), ELASTIC_NEVER);
	assert_int_equal(cover_of(f, model), ELASTIC_NEVER);
	fx_free(f);

	/* a cooldown (room 0): nothing asked, every job told why */
	f = fx_new(SCHED_POLICY_GREEDY);
	p.room = 0;
	a = add_job(f, "gpu", 1, 2);
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 0);
	assert_int_equal(cover_of(f, a), ELASTIC_NO_ROOM);
	fx_free(f);
}

/* Labels and a container runtime are the shape's to meet. */
static void test_labels_and_runtime(void **state)
{
	static const struct sched_label ib = { "net", "ib" };
	struct elastic_shape sh = two_v100;
	struct elastic_pool p = { .pool = "gpu", .shape = &sh, .room = 4, .max = 4 };
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	size_t lab, img;

	lab = add_job(f, "gpu", 1, 1);
	f->jobs[lab].job.labels = &ib;
	f->jobs[lab].job.nlabels = 1;
	img = add_job(f, "gpu", 1, 1);
	f->jobs[img].job.image = "debian:12";
	plan(f, &p, 1);
	assert_int_equal(cover_of(f, lab), ELASTIC_NEVER);
	assert_int_equal(cover_of(f, img), ELASTIC_NEVER);
	assert_int_equal(f->plan.add[0], 0);
	fx_free(f);

	sh.labels = &ib;
	sh.nlabels = 1;
	sh.containers = true;
	f = fx_new(SCHED_POLICY_GREEDY);
	lab = add_job(f, "gpu", 1, 1);
	f->jobs[lab].job.labels = &ib;
	f->jobs[lab].job.nlabels = 1;
	img = add_job(f, "gpu", 1, 1);
	f->jobs[img].job.image = "debian:12";
	plan(f, &p, 1);
	assert_int_equal(cover_of(f, lab), ELASTIC_NEW);
	assert_int_equal(cover_of(f, img), ELASTIC_NEW);
	assert_int_equal(f->plan.add[0], 1);
	fx_free(f);
}

/* Only provisioned pools plan; a job its policy holds back is no demand;
 * a CPU-only pool takes a 0-GPU role (the seeds' hybrid cluster). */
static void test_pools_and_holds(void **state)
{
	static const struct elastic_shape cpu = { .cpus_milli = 4000, .memory = 8ull << 30 };
	struct elastic_pool pools[] = {
		{ .pool = "gpu", .shape = &two_v100, .room = 4, .max = 4 },
		{ .pool = "cpu", .shape = &cpu, .room = 4, .max = 4 },
	};
	struct fx *f = fx_new(SCHED_POLICY_FIFO);
	size_t other, head, behind, ps;

	other = add_job(f, "static", 1, 1);   /* no provisioner */
	head = add_job(f, "gpu", 1, 2);
	behind = add_job(f, "gpu", 1, 2);     /* fifo: behind the head */
	ps = add_job(f, "cpu", 1, 0);
	plan(f, pools, 2);
	assert_int_equal(cover_of(f, other), ELASTIC_NOT_DEMAND);
	assert_int_equal(cover_of(f, head), ELASTIC_NEW);
	for (size_t i = 0; i < f->d.nwaits; i++)
		if (f->d.waits[i].job == behind && !elastic_wait_is_demand(f->d.waits[i].code))
			assert_int_equal(f->plan.cover[i], ELASTIC_NOT_DEMAND);
	assert_int_equal(cover_of(f, ps), ELASTIC_NEW);
	assert_int_equal(f->plan.add[1], 1);
	assert_true(f->plan.add[0] >= 1);
	fx_free(f);
	assert_false(elastic_wait_is_demand("head"));
	assert_false(elastic_wait_is_demand("quota"));
	assert_false(elastic_wait_is_demand("behind_preemption"));
	assert_true(elastic_wait_is_demand("insufficient_gpus"));
	assert_true(elastic_wait_is_demand("pool"));
}

/* The seeds' hybrid cluster: a job's parameter server (no GPU) on the
 * provisioned CPU pool, its two workers on the provisioned GPU pool: each
 * pool asks for what its part needs. */
static void test_hybrid_pools(void **state)
{
	static const struct elastic_shape cpu = { .cpus_milli = 4000, .memory = 8ull << 30 };
	static const char *const task_pools[] = { "cpu", NULL, NULL };
	struct elastic_pool pools[] = {
		{ .pool = "gpu", .shape = &two_v100, .room = 4, .max = 4 },
		{ .pool = "cpu", .shape = &cpu, .room = 4, .max = 4 },
	};
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	size_t j;

	j = add_job(f, "gpu", 3, 2);
	f->tasks[j][0].gpus = 0; /* the ps */
	f->jobs[j].job.task_pools = task_pools;
	plan(f, pools, 2);
	assert_int_equal(f->plan.add[0], 2); /* two 2-GPU workers: two nodes */
	assert_int_equal(f->plan.add[1], 1); /* the ps: one CPU node */
	assert_int_equal(cover_of(f, j), ELASTIC_NEW);
	fx_free(f);

	/* no CPU node can ever be had: the GPU pool asks for nothing either */
	pools[1].max = pools[1].room = 0;
	f = fx_new(SCHED_POLICY_GREEDY);
	j = add_job(f, "gpu", 3, 2);
	f->tasks[j][0].gpus = 0;
	f->jobs[j].job.task_pools = task_pools;
	plan(f, pools, 2);
	assert_int_equal(f->plan.add[0], 0);
	assert_int_equal(f->plan.add[1], 0);
	assert_int_equal(cover_of(f, j), ELASTIC_NEVER);
	fx_free(f);
}

/* A pool whose shape is unknown asks for one node to learn it, once. */
static void test_no_shape(void **state)
{
	struct elastic_pool p = { .pool = "gpu", .room = 4, .max = 4 };
	struct fx *f = fx_new(SCHED_POLICY_GREEDY);
	size_t a;

	a = add_job(f, "gpu", 2, 2);
	add_job(f, "gpu", 1, 1);
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 1);
	assert_int_equal(cover_of(f, a), ELASTIC_NO_SHAPE);
	fx_free(f);
	f = fx_new(SCHED_POLICY_GREEDY);
	p.pending = 1;
	add_job(f, "gpu", 2, 2);
	plan(f, &p, 1);
	assert_int_equal(f->plan.add[0], 0);
	fx_free(f);
}

/* Scale-down: the idle ones past the idle time, longest idle first, down to
 * the minimum; busy nodes count towards the size and are never chosen. */
static void test_scale_down(void **state)
{
	struct elastic_node n[8];
	size_t out[8], k;

	for (size_t i = 0; i < 8; i++)
		n[i] = (struct elastic_node){ .idle = true, .idle_since = 100 + i };
	k = elastic_scale_down(n, 8, 2, 50, 200, out);
	assert_int_equal(k, 6);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(out[i], i); /* the longest idle first */
	/* not idle long enough yet: only those past it */
	k = elastic_scale_down(n, 8, 0, 50, 152, out);
	assert_int_equal(k, 3);
	/* busy nodes: never chosen, but they count towards the minimum */
	n[0].idle = n[1].idle = false;
	k = elastic_scale_down(n, 8, 7, 0, 200, out);
	assert_int_equal(k, 1);
	assert_int_equal(out[0], 2);
	k = elastic_scale_down(n, 8, 8, 0, 200, out);
	assert_int_equal(k, 0);
	k = elastic_scale_down(n, 2, 0, 0, 200, out);
	assert_int_equal(k, 0);
	/* a clock before idle_since (a restart) is not idle time */
	n[2].idle_since = 500;
	k = elastic_scale_down(n + 2, 1, 0, 0, 200, out);
	assert_int_equal(k, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_pool),
		cmocka_unit_test(test_fewest),
		cmocka_unit_test(test_uses_what_is_free),
		cmocka_unit_test(test_room_and_never),
		cmocka_unit_test(test_labels_and_runtime),
		cmocka_unit_test(test_pools_and_holds),
		cmocka_unit_test(test_no_shape),
		cmocka_unit_test(test_hybrid_pools),
		cmocka_unit_test(test_scale_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
