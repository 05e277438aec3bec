/* The policies judged by placement (sched/fit.h, sched_policy_plan_fit):
 * fifo's head of line and backfill, fair's quotas. Each case also shows what
 * the count alone (the simulator's scheme) decides, which stays as it was. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/fit.h"

#define MAXN 4
#define MAXJ 8

/* Nodes of 4 GPUs (one island); jobs are policy jobs, placement jobs and
 * holds side by side, indexed alike. */
struct world {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][4];
	struct sched_label labels[MAXN][1];
	char names[MAXN][16];
	size_t nnodes;
	struct sched_pjob pj[MAXJ];
	struct sched_job sj[MAXJ];
	struct sched_task tasks[MAXJ][1];
	struct sched_label want[MAXJ][1];
	struct sched_hold holds[MAXJ][1];
	unsigned held_gpus[MAXJ][4];
	struct sched_fit_job fj[MAXJ];
	size_t njobs;
};

/* A node; its rack label is rack (may be NULL). */
static void node(struct world *w, const char *rack)
{
	size_t i = w->nnodes++;
	struct sched_node *n = &w->nodes[i];

	snprintf(w->names[i], sizeof(w->names[i]), "gpu-%zu", i + 1);
	for (unsigned g = 0; g < 4; g++)
		w->gpus[i][g] = (struct sched_gpu){ .index = g, .model = "A100", .free = true };
	*n = (struct sched_node){ .name = w->names[i], .schedulable = true, .gpus = w->gpus[i],
				  .ngpus = 4, .cpus_milli = 64000, .free_cpus_milli = 64000 };
	if (rack) {
		w->labels[i][0] = (struct sched_label){ "rack", rack };
		n->labels = w->labels[i];
		n->nlabels = 1;
	}
}

/* A waiting job of one task of gpus GPUs, on rack (NULL: anywhere). */
static size_t waiting(struct world *w, unsigned gpus, uint64_t submitted, uint64_t bound,
		      const char *rack)
{
	size_t i = w->njobs++;

	sched_policy_job_init(&w->pj[i], i + 1, gpus, submitted);
	w->pj[i].bound = bound;
	w->tasks[i][0] = (struct sched_task){ "worker", 0, gpus, 1000, 0 };
	w->sj[i] = (struct sched_job){ .id = i + 1, .tasks = w->tasks[i], .ntasks = 1 };
	if (rack) {
		w->want[i][0] = (struct sched_label){ "rack", rack };
		w->sj[i].labels = w->want[i];
		w->sj[i].nlabels = 1;
	}
	w->fj[i] = (struct sched_fit_job){ .job = &w->sj[i] };
	return i;
}

/* A running job holding the first gpus GPUs of node n since started. */
static size_t running(struct world *w, size_t n, unsigned gpus, uint64_t started, uint64_t bound)
{
	size_t i = w->njobs++;

	sched_policy_job_init(&w->pj[i], i + 1, gpus, started);
	sched_policy_started(&w->pj[i], started);
	w->pj[i].bound = bound;
	w->pj[i].preemptible = false;
	for (unsigned g = 0; g < gpus; g++) {
		w->gpus[n][g].free = false;
		w->held_gpus[i][g] = g;
	}
	w->nodes[n].free_cpus_milli -= 1000;
	w->holds[i][0] = (struct sched_hold){ .node = n, .gpus = w->held_gpus[i], .ngpus = gpus,
					      .cpus_milli = 1000 };
	w->fj[i] = (struct sched_fit_job){ .holds = w->holds[i], .nholds = 1 };
	return i;
}

/* The plan with the oracle over w (fit) or by count (!fit). */
static void plan(struct world *w, const struct sched_policy_conf *c, bool fit, uint64_t now,
		 struct sched_policy_plan *p)
{
	unsigned total = (unsigned)w->nnodes * 4;

	if (fit) {
		struct sched_fitter *f = sched_fitter_new(w->nodes, w->nnodes, w->fj, w->njobs);
		struct sched_fit o;
		sched_fitter_oracle(f, &o);
		sched_policy_plan_fit(c, w->pj, w->njobs, total, now, &o, p);
		sched_fitter_free(f);
	} else {
		sched_policy_plan(c, w->pj, w->njobs, total, now, p);
	}
}

static int wait_code(const struct sched_policy_plan *p, size_t job)
{
	for (size_t k = 0; k < p->nwaits; k++)
		if (p->waits[k].job == job)
			return (int)p->waits[k].code;
	return -1; /* not waiting */
}

static bool started(const struct sched_policy_plan *p, size_t job)
{
	for (size_t k = 0; k < p->nstarts; k++)
		if (p->starts[k] == job)
			return true;
	return false;
}

/* The head fits by count (4 GPUs free) but no node has 4 free: it is the
 * head, and its reservation is when rack a's running job ends. A backfill
 * that would hold part of rack a past then must wait; one that ends before
 * may start; one on rack b, which the head does not need, may start although
 * it has no bound (the count would have held it: no GPUs to spare). */
static void test_fifo_head_by_placement(void **state)
{
	static struct world w;
	struct sched_policy_conf c;
	struct sched_policy_plan p;
	size_t h, jb, k, l;

	memset(&w, 0, sizeof(w));
	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	node(&w, "a");
	node(&w, "b");
	h = waiting(&w, 4, 10, 0, NULL);
	jb = waiting(&w, 2, 20, 5000, "a"); /* ends long after the reservation */
	k = waiting(&w, 1, 30, 500, "a");   /* ends before it */
	l = waiting(&w, 2, 40, 0, "b");     /* no bound, off the head's node */
	running(&w, 0, 2, 0, 1000);         /* rack a: 2 GPUs until t=1000 */
	running(&w, 1, 2, 0, 2000);         /* rack b: 2 GPUs until t=2000 */

	plan(&w, &c, true, 100, &p);
	assert_int_equal(wait_code(&p, h), SCHED_WAIT_GPUS);
	assert_int_equal(p.waits[0].job, h);
	assert_int_equal(wait_code(&p, jb), SCHED_WAIT_HEAD);
	assert_true(started(&p, k));
	assert_true(started(&p, l));
	assert_int_equal(p.nstarts, 2);

	/* by count the head "starts" (4 <= 4 free), and the job behind it becomes
	 * the head the master would then place ahead of the real one */
	plan(&w, &c, false, 100, &p);
	assert_true(started(&p, h));
	assert_int_equal(wait_code(&p, jb), SCHED_WAIT_GPUS);
	sched_policy_plan_release(&p);
	(void)state;
}

/* Without bounds fifo is strict head of line, with the head found by
 * placement; a job that would not fit even with every job gone heads
 * nothing. */
static void test_fifo_strict_and_never_fits(void **state)
{
	static struct world w;
	struct sched_policy_conf c;
	struct sched_policy_plan p;
	size_t h, jb, k;

	memset(&w, 0, sizeof(w));
	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FIFO);
	node(&w, "a");
	node(&w, "b");
	h = waiting(&w, 4, 10, 0, NULL); /* 6 free by count, 3 + 3 by node */
	jb = waiting(&w, 2, 20, 0, NULL);
	k = waiting(&w, 1, 30, 0, NULL);
	running(&w, 0, 1, 0, 0);
	running(&w, 1, 1, 0, 0);

	plan(&w, &c, true, 100, &p);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(wait_code(&p, h), SCHED_WAIT_GPUS);
	assert_int_equal(wait_code(&p, jb), SCHED_WAIT_HEAD);
	assert_int_equal(wait_code(&p, k), SCHED_WAIT_HEAD);
	plan(&w, &c, false, 100, &p);
	assert_true(started(&p, h));
	assert_true(started(&p, jb)); /* the count admits what placement cannot start */

	/* the head asks for a rack no node has: too_big, and the line moves */
	w.want[h][0] = (struct sched_label){ "rack", "c" };
	w.sj[h].labels = w.want[h];
	w.sj[h].nlabels = 1;
	plan(&w, &c, true, 100, &p);
	assert_int_equal(wait_code(&p, h), SCHED_WAIT_TOO_BIG);
	assert_true(started(&p, jb));
	assert_true(started(&p, k));
	sched_policy_plan_release(&p);
	(void)state;
}

/* fair: a job its team's quota admits by count but no node can take now
 * does not use the quota up; the team's next job, which fits, starts. */
static void test_fair_quota_by_placement(void **state)
{
	static struct world w;
	struct sched_policy_conf c;
	struct sched_policy_plan p;
	struct sched_team teams[2] = { { 1, 4 }, { 1, 0 } };
	size_t a1, a2;

	memset(&w, 0, sizeof(w));
	memset(&p, 0, sizeof(p));
	sched_policy_conf_init(&c, SCHED_POLICY_FAIR);
	c.teams = teams;
	c.nteams = 2;
	node(&w, NULL);
	node(&w, NULL);
	node(&w, NULL);
	a1 = waiting(&w, 4, 10, 0, NULL); /* team 0, quota 4: 6 free, 2 + 2 + 2 by node */
	a2 = waiting(&w, 2, 20, 0, NULL);
	for (size_t n = 0; n < 3; n++)
		w.pj[running(&w, n, 2, 0, 0)].team = 1;

	plan(&w, &c, true, 100, &p);
	assert_int_equal(wait_code(&p, a1), SCHED_WAIT_GPUS);
	assert_true(started(&p, a2));
	assert_int_equal(p.nstarts, 1);

	plan(&w, &c, false, 100, &p);
	assert_true(started(&p, a1));
	assert_int_equal(wait_code(&p, a2), SCHED_WAIT_QUOTA); /* held by a job that cannot start */
	sched_policy_plan_release(&p);
	(void)state;
}

/* The oracle itself: take, give back, and what fits once jobs end. */
static void test_fitter(void **state)
{
	static struct world w;
	struct sched_fitter *f;
	struct sched_fit o;
	size_t r, a, b;

	memset(&w, 0, sizeof(w));
	node(&w, NULL);
	r = running(&w, 0, 2, 0, 0);
	a = waiting(&w, 2, 10, 0, NULL);
	b = waiting(&w, 4, 20, 0, NULL);
	f = sched_fitter_new(w.nodes, w.nnodes, w.fj, w.njobs);
	sched_fitter_oracle(f, &o);
	assert_false(o.fits(o.ctx, b, false));
	assert_true(o.fits_after(o.ctx, b, &r, 1));
	assert_true(o.fits(o.ctx, a, true));
	assert_false(o.fits(o.ctx, a, false)); /* a took the last 2 */
	assert_false(o.fits_after(o.ctx, b, &r, 1));
	size_t both[] = { r, a };
	assert_true(o.fits_after(o.ctx, b, both, 2));
	o.give_back(o.ctx, a);
	assert_true(o.fits(o.ctx, a, false));
	assert_true(o.fits(o.ctx, a, true)); /* taken again after the give-back */
	assert_false(o.fits(o.ctx, a, true)); /* not twice */
	assert_false(o.fits_after(o.ctx, b, &r, 1));
	assert_true(o.fits_after(o.ctx, b, both, 2));
	assert_false(o.fits(o.ctx, r, false)); /* a running job is not placed */
	sched_fitter_free(f);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_head_by_placement),
		cmocka_unit_test(test_fifo_strict_and_never_fits),
		cmocka_unit_test(test_fair_quota_by_placement),
		cmocka_unit_test(test_fitter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
