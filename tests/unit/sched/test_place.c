/* Placement (src/sched/place.c): fragmentation, fewest nodes, islands,
 * constraints, gangs and the reasons a job waits. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/place.h"

#define MAXN 8
#define GIB ((uint64_t)1 << 30)

/* A small cluster: node i has ngpus GPUs, the first `busy` of them held. */
struct cluster {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][16];
	char names[MAXN][16];
	size_t n;
};

static struct sched_node *add(struct cluster *c, unsigned ngpus, unsigned busy, unsigned isl_size)
{
	size_t i = c->n++;
	struct sched_node *n = &c->nodes[i];

	memset(n, 0, sizeof(*n));
	snprintf(c->names[i], sizeof(c->names[i]), "gpu-%zu", i + 1);
	for (unsigned g = 0; g < ngpus; g++)
		c->gpus[i][g] = (struct sched_gpu){ .index = g, .model = "A100", .free = g >= busy,
						    .island = isl_size ? g / isl_size : g,
						    .memory = 80 * GIB };
	n->name = c->names[i];
	n->schedulable = true;
	n->gpus = c->gpus[i];
	n->ngpus = ngpus;
	n->cpus_milli = n->free_cpus_milli = 64000;
	n->memory = n->free_memory = 512 * GIB;
	return n;
}

/* One job of ntasks tasks of gpus GPUs each. */
struct onejob {
	struct sched_task t[64];
	struct sched_job j;
};

static struct sched_job *mkjob(struct onejob *o, size_t ntasks, unsigned gpus)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < ntasks; i++)
		o->t[i] = (struct sched_task){ "worker", (unsigned)i, gpus, 1000, GIB };
	o->j.id = 1;
	o->j.tasks = o->t;
	o->j.ntasks = ntasks;
	return &o->j;
}

/* Places j alone on c; returns whether it fitted; starts and reason out. */
static bool place1(struct cluster *c, const struct sched_job *j, struct sched_start *st,
		   struct sched_wait *why)
{
	struct sched_input in = { c->nodes, c->n, NULL, 0, 0 };
	struct place_state *s = place_state_new(&in);
	bool ok;

	memset(why, 0, sizeof(*why));
	ok = place_job(s, j, st, why);
	place_state_free(s);
	return ok;
}

static void free_starts(struct sched_start *st, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(st[i].gpus);
}

static void test_exact_fit_keeps_empty_node(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;

	add(&c, 8, 0, 4);
	add(&c, 8, 4, 4); /* exactly 4 free */
	add(&c, 8, 0, 4);
	assert_true(place1(&c, mkjob(&o, 1, 4), st, &why));
	assert_int_equal(st[0].node, 1);
	assert_int_equal(st[0].ngpus, 4);
	assert_int_equal(st[0].gpus[0], 4);
	free_starts(st, 1);
	(void)state;
}

static void test_best_fit_smallest_block(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;

	add(&c, 8, 2, 0); /* 6 free */
	add(&c, 8, 5, 0); /* 3 free */
	add(&c, 8, 6, 0); /* 2 free: too small */
	add(&c, 8, 0, 0); /* 8 free */
	assert_true(place1(&c, mkjob(&o, 1, 3), st, &why));
	assert_int_equal(st[0].node, 1);
	free_starts(st, 1);
	(void)state;
}

/* Locality: among nodes equal in fit, the one holding the job's data; never
 * a worse fit for it. */
static void test_data_locality_breaks_ties_only(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;
	static const char *const held[] = { "s3-aa", "yard-abc" };
	static const char *const keys[] = { "yard-abc" };

	add(&c, 8, 4, 0); /* 4 free */
	add(&c, 8, 4, 0)->cache = held; /* 4 free, holds the data */
	c.nodes[1].ncache = 2;
	add(&c, 8, 0, 0)->cache = held; /* 8 free, holds it too: a worse fit */
	c.nodes[2].ncache = 2;
	struct sched_job *j = mkjob(&o, 1, 4);
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 0); /* without data: the first of the equal fits */
	free_starts(st, 1);

	j->data_keys = keys;
	j->ndata_keys = 1;
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 1); /* the equal fit that holds the data */
	free_starts(st, 1);

	/* a job of 5 GPUs fits only the empty node: data elsewhere does not matter */
	j = mkjob(&o, 1, 5);
	j->data_keys = keys;
	j->ndata_keys = 1;
	c.nodes[2].ncache = 0;
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 2);
	free_starts(st, 1);
	(void)state;
}

static void test_fewest_nodes(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[16];
	struct sched_wait why;

	add(&c, 8, 4, 0); /* 4 free */
	add(&c, 8, 0, 0); /* 8 free: the whole 8-task job goes here */
	add(&c, 8, 4, 0);
	assert_true(place1(&c, mkjob(&o, 8, 1), st, &why));
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(st[i].node, 1);
	free_starts(st, 8);

	/* 16 single-GPU tasks: two nodes, not four */
	c.n = 0;
	add(&c, 8, 4, 0);
	add(&c, 8, 0, 0);
	add(&c, 8, 4, 0);
	add(&c, 8, 0, 0);
	assert_true(place1(&c, mkjob(&o, 16, 1), st, &why));
	for (size_t i = 0; i < 16; i++)
		assert_true(st[i].node == 1 || st[i].node == 3);
	free_starts(st, 16);

	/* 12 GPUs: the full node, then the best-fit 4 for the rest */
	c.n = 0;
	add(&c, 8, 0, 0);
	add(&c, 8, 2, 0); /* 6 free */
	add(&c, 8, 4, 0); /* 4 free */
	assert_true(place1(&c, mkjob(&o, 12, 1), st, &why));
	for (size_t i = 0; i < 12; i++)
		assert_int_equal(st[i].node, i < 8 ? 0 : 2);
	free_starts(st, 12);
	(void)state;
}

/* asserts that the n starts put want[k] tasks on node k, for each of the
 * nwant nodes (nodes past them: none) */
static void assert_split(const struct sched_start *st, size_t n, const unsigned *want, size_t nwant)
{
	unsigned per[MAXN] = { 0 };

	for (size_t i = 0; i < n; i++)
		per[st[i].node]++;
	for (size_t k = 0; k < MAXN; k++)
		assert_int_equal(per[k], k < nwant ? want[k] : 0);
}
#define ASSERT_SPLIT(st, n, ...)                                                                 \
	assert_split(st, n, (const unsigned[]){ __VA_ARGS__ },                                   \
		     sizeof((const unsigned[]){ __VA_ARGS__ }) / sizeof(unsigned))

/* A job over several nodes: the fewest nodes, then the fewest islands,
 * then the set whose free GPUs it fills most tightly, not the fullest
 * node plus a best fit for the rest. */
static void test_multi_best_fit_set(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[16];
	struct sched_wait why;

	/* one island per node (islands decide nothing): free 8, 7, 7, 5. 12
	 * tasks fit on two nodes; 7 + 5 fills them exactly and leaves the 8
	 * whole (the fullest node first would take 8 + 4 of the 5) */
	add(&c, 8, 0, 8);
	add(&c, 8, 1, 8);
	add(&c, 8, 1, 8);
	add(&c, 8, 3, 8);
	assert_true(place1(&c, mkjob(&o, 12, 1), st, &why));
	ASSERT_SPLIT(st, 12, 0, 7, 0, 5);
	free_starts(st, 12);

	/* free 8, 8, 6, 6: 6 + 6 leaves both 8s whole */
	c.n = 0;
	add(&c, 8, 0, 8);
	add(&c, 8, 0, 8);
	add(&c, 8, 2, 8);
	add(&c, 8, 2, 8);
	assert_true(place1(&c, mkjob(&o, 12, 1), st, &why));
	ASSERT_SPLIT(st, 12, 0, 0, 6, 6);
	free_starts(st, 12);

	/* 12 on free 8, 8, 4, 6 (islands of 4): 8 + 4, not 8 + 6 nor 8 + 8 */
	c.n = 0;
	add(&c, 8, 0, 4);
	add(&c, 8, 0, 4);
	add(&c, 8, 4, 4);
	add(&c, 8, 2, 4);
	assert_true(place1(&c, mkjob(&o, 12, 1), st, &why));
	ASSERT_SPLIT(st, 12, 8, 0, 4, 0);
	free_starts(st, 12);

	/* the same in tasks of 2 GPUs: 6 tasks, 4 + 2 */
	assert_true(place1(&c, mkjob(&o, 6, 2), st, &why));
	ASSERT_SPLIT(st, 6, 4, 0, 2, 0);
	free_starts(st, 6);
	(void)state;
}

/* Islands come before best fit, and the tasks may be split unevenly or
 * evenly, whichever spans fewer islands. */
static void test_multi_islands(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[16];
	struct sched_wait why;

	/* free 8, 8, 6, 6 in islands of 4 (a 6 is 2 + 4): 6 + 6 spans four
	 * islands, 8 + 4-of-a-6 three, and is the tighter of the three-island sets */
	add(&c, 8, 0, 4);
	add(&c, 8, 0, 4);
	add(&c, 8, 2, 4);
	add(&c, 8, 2, 4);
	assert_true(place1(&c, mkjob(&o, 12, 1), st, &why));
	ASSERT_SPLIT(st, 12, 8, 0, 4, 0);
	for (size_t i = 0; i < 12; i++)
		if (st[i].node == 2)
			assert_true(st[i].gpus[0] >= 4); /* the whole island {4-7} */
	free_starts(st, 12);

	/* 8 tasks on two nodes with 2 + 4 free each: 4 + 4 (two islands), not
	 * 6 + 2 (three) */
	c.n = 0;
	add(&c, 8, 2, 4);
	add(&c, 8, 2, 4);
	assert_true(place1(&c, mkjob(&o, 8, 1), st, &why));
	ASSERT_SPLIT(st, 8, 4, 4);
	for (size_t i = 0; i < 8; i++)
		assert_true(st[i].gpus[0] >= 4);
	free_starts(st, 8);
	(void)state;
}

/* Over several nodes, labels, pools, GPU models, CPUs and the node limit
 * still hold, and a gang that does not fit takes nothing. */
static void test_multi_constraints(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[16];
	struct sched_wait why;
	struct sched_label ib[] = { { "net", "ib" } };
	struct sched_node *n;
	struct sched_job *j;
	struct sched_input in;
	struct place_state *s;

	add(&c, 8, 0, 8);            /* 0: 8 free, no label */
	n = add(&c, 8, 1, 8);        /* 1: 7 free, net=ib */
	n->labels = ib;
	n->nlabels = 1;
	n = add(&c, 8, 0, 8);        /* 2: 8 free, net=ib, but pool research */
	n->labels = ib;
	n->nlabels = 1;
	n->pool = "research";
	n = add(&c, 8, 3, 8);        /* 3: 5 free, net=ib */
	n->labels = ib;
	n->nlabels = 1;
	n = add(&c, 8, 0, 8);        /* 4: 8 free, net=ib, but CPUs for 3 tasks */
	n->labels = ib;
	n->nlabels = 1;
	n->free_cpus_milli = 3000;
	n = add(&c, 8, 0, 8);        /* 5: 8 free, net=ib, H100 */
	n->labels = ib;
	n->nlabels = 1;
	for (unsigned g = 0; g < 8; g++)
		c.gpus[5][g].model = "H100";

	j = mkjob(&o, 12, 1);
	j->labels = ib;
	j->nlabels = 1;
	j->gpu_model = "A100";
	/* 7 + 5; node 4 holds only 3 tasks, node 5 has other GPUs */
	assert_true(place1(&c, j, st, &why));
	ASSERT_SPLIT(st, 12, 0, 7, 0, 5, 0, 0);
	free_starts(st, 12);

	/* 14 tasks need all three A100 nodes: 7 + 5 + 2 of node 4's 3 */
	j = mkjob(&o, 14, 1);
	j->labels = ib;
	j->nlabels = 1;
	j->gpu_model = "A100";
	assert_true(place1(&c, j, st, &why));
	ASSERT_SPLIT(st, 14, 0, 7, 0, 5, 2, 0);
	free_starts(st, 14);

	/* ... or, at most two nodes, none: too_many_nodes, and nothing kept */
	in = (struct sched_input){ c.nodes, c.n, NULL, 0, 0 };
	s = place_state_new(&in);
	j->max_nodes = 2;
	assert_false(place_job(s, j, st, &why));
	assert_string_equal(why.code, "too_many_nodes");
	j->max_nodes = 0;
	assert_true(place_job(s, j, st, &why));
	ASSERT_SPLIT(st, 14, 0, 7, 0, 5, 2, 0);
	free_starts(st, 14);
	/* two more do not fit: node 4 has 6 GPUs left but CPUs for one task */
	j = mkjob(&o, 2, 1);
	j->labels = ib;
	j->nlabels = 1;
	j->gpu_model = "A100";
	assert_false(place_job(s, j, st, &why));
	assert_string_equal(why.code, "insufficient_cpus");
	place_state_free(s);
	(void)state;
}

/* Nodes that can take a gang may be far down a long bucket: all are looked
 * at, not the first few. */
static void test_multi_rare_label(void **state)
{
	enum { N = 200 };
	static struct sched_node nodes[N];
	static struct sched_gpu gpus[N][8];
	static char names[N][16];
	struct sched_label ib[] = { { "net", "ib" } };
	struct onejob o;
	struct sched_start st[16];
	struct sched_wait why;
	struct sched_input in = { nodes, N, NULL, 0, 0 };
	struct place_state *s;
	struct sched_job *j;

	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "gpu-%zu", i + 1);
		for (unsigned g = 0; g < 8; g++)
			gpus[i][g] = (struct sched_gpu){ .index = g, .model = "A100", .free = true,
							 .memory = 80 * GIB };
		nodes[i] = (struct sched_node){ .name = names[i], .schedulable = true,
						.gpus = gpus[i], .ngpus = 8, .cpus_milli = 64000,
						.free_cpus_milli = 64000 };
		if (i >= N - 2) {
			nodes[i].labels = ib;
			nodes[i].nlabels = 1;
		}
	}
	j = mkjob(&o, 16, 1);
	j->labels = ib;
	j->nlabels = 1;
	s = place_state_new(&in);
	assert_true(place_job(s, j, st, &why));
	for (size_t i = 0; i < 16; i++)
		assert_true(st[i].node >= N - 2);
	free_starts(st, 16);
	place_state_free(s);
	(void)state;
}

static void test_no_gpu_twice(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[4];
	struct sched_wait why;
	int seen[8] = { 0 };

	add(&c, 8, 1, 4);
	assert_true(place1(&c, mkjob(&o, 4, 1), st, &why));
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(st[i].task, i);
		assert_int_not_equal(st[i].gpus[0], 0);
		assert_int_equal(++seen[st[i].gpus[0]], 1);
	}
	free_starts(st, 4);
	(void)state;
}

static void test_islands_within_node(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;

	/* islands {0-3} and {4-7}; GPUs 0 and 1 held: island 0 has 2 free */
	add(&c, 8, 2, 4);
	assert_true(place1(&c, mkjob(&o, 1, 2), st, &why));
	assert_int_equal(st[0].gpus[0], 2); /* the 2-block, leaving island 1 whole */
	assert_int_equal(st[0].gpus[1], 3);
	free_starts(st, 1);
	assert_true(place1(&c, mkjob(&o, 1, 4), st, &why));
	for (unsigned g = 0; g < 4; g++)
		assert_int_equal(st[0].gpus[g], 4 + g); /* one island, not 2 + 2 */
	free_starts(st, 1);
	(void)state;
}

static void test_islands_across_nodes(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;

	/* node 1: 4 free, but 2 in each island; node 2: a whole island free */
	add(&c, 8, 0, 4);
	c.gpus[0][0].free = c.gpus[0][1].free = false;
	c.gpus[0][4].free = c.gpus[0][5].free = false;
	add(&c, 8, 4, 4); /* GPUs 4-7 free: island 1 whole */
	add(&c, 8, 0, 4);
	assert_true(place1(&c, mkjob(&o, 1, 4), st, &why));
	assert_int_equal(st[0].node, 1);
	assert_int_equal(st[0].gpus[0], 4);
	free_starts(st, 1);

	/* a node whose islands are 2 GPUs: 4 GPUs can only take 2 islands there,
	 * which is as few as it could ever give: best fit still applies */
	c.n = 0;
	add(&c, 8, 4, 2); /* 4 free: islands {4,5} {6,7} */
	add(&c, 8, 0, 4);
	assert_true(place1(&c, mkjob(&o, 1, 4), st, &why));
	assert_int_equal(st[0].node, 0);
	free_starts(st, 1);
	(void)state;
}

static void test_gpu_model_and_memory(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;
	struct sched_job *j;

	add(&c, 4, 0, 0);
	add(&c, 8, 0, 0);
	for (unsigned g = 0; g < 8; g++) {
		c.gpus[1][g].model = "H100";
		c.gpus[1][g].memory = 40 * GIB;
	}
	j = mkjob(&o, 1, 2);
	j->gpu_model = "H100";
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 1);
	free_starts(st, 1);

	j->gpu_memory = 80 * GIB;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "gpu_memory");
	assert_string_equal(why.message, "needs GPUs with >= 81920 MiB each; no ready node has them");

	j->gpu_model = "*";
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 0);
	free_starts(st, 1);

	j->gpu_model = "B200";
	j->gpu_memory = 0;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "gpu_model");
	assert_string_equal(why.message, "needs GPU model 'B200'; no ready node has it");
	(void)state;
}

static void test_labels_and_pools(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;
	struct sched_label ib[] = { { "net", "ib" } }, rack[] = { { "net", "ib" }, { "rack", "r2" } };
	struct sched_label want[] = { { "net", "ib" }, { "rack", "r2" } };
	struct sched_node *n;
	struct sched_job *j = mkjob(&o, 1, 1);

	add(&c, 8, 0, 0); /* pool default, no labels */
	n = add(&c, 8, 0, 0);
	n->labels = ib;
	n->nlabels = 1;
	n = add(&c, 8, 0, 0);
	n->labels = rack;
	n->nlabels = 2;
	n->pool = "research";

	j->labels = want;
	j->nlabels = 1; /* net=ib */
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 1);
	free_starts(st, 1);

	j->nlabels = 2; /* net=ib, rack=r2: only on the research node */
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "labels");
	assert_string_equal(why.message, "no ready node in pool 'default' has labels net=ib, rack=r2");

	j->pool = "research";
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 2);
	free_starts(st, 1);

	j->nlabels = 0;
	j->pool = "batch";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "pool");
	assert_string_equal(why.message, "no ready node in pool 'batch'");

	/* the default pool never spills into another pool */
	c.nodes[0].schedulable = c.nodes[1].schedulable = false;
	j->pool = NULL;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "pool");
	(void)state;
}

/* A job with an image goes only to nodes with a container runtime; a job
 * without one goes anywhere. */
static void test_containers(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[2];
	struct sched_wait why;
	struct sched_job *j = mkjob(&o, 1, 2);

	add(&c, 8, 6, 0);                   /* gpu-1: 2 free, process only: the best fit */
	add(&c, 8, 0, 0);                   /* gpu-2: 8 free, process only */
	add(&c, 8, 5, 0)->containers = true; /* gpu-3: 3 free, docker */

	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 0);
	free_starts(st, 1);

	j->image = "pytorch/pytorch:2.1.0";
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 2);
	free_starts(st, 1);

	/* the GPUs of nodes that cannot run an image do not count */
	j = mkjob(&o, 1, 4);
	j->image = "pytorch/pytorch:2.1.0";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "insufficient_gpus");
	assert_string_equal(why.message, "needs 4 GPUs on one node; largest free block is 3 on node gpu-3");
	j = mkjob(&o, 2, 2);
	j->image = "pytorch/pytorch:2.1.0";
	j->max_nodes = 1;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "insufficient_gpus");

	/* no node of the pool has a container runtime */
	c.nodes[2].containers = false;
	j = mkjob(&o, 1, 1);
	j->image = "pytorch:1.13";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "no_container_runtime");
	assert_string_equal(why.message, "needs a node with a container runtime for image "
					 "'pytorch:1.13'; no ready node in pool 'default' has one");
	/* ... also for a job without GPUs, and one in another pool */
	j = mkjob(&o, 1, 0);
	j->image = "debian:bookworm";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "no_container_runtime");
	c.nodes[2].containers = true;
	c.nodes[2].pool = "batch";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.message, "needs a node with a container runtime for image "
					 "'debian:bookworm'; no ready node in pool 'default' has one");
	j->pool = "batch";
	assert_true(place1(&c, j, st, &why));
	assert_int_equal(st[0].node, 2);
	free_starts(st, 1);
	/* a draining container node does not count */
	c.nodes[2].schedulable = false;
	c.nodes[1].pool = "batch";
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "no_container_runtime");
	assert_string_equal(why.message, "needs a node with a container runtime for image "
					 "'debian:bookworm'; no ready node in pool 'batch' has one");

	/* labels are looked for among the nodes that can run the image */
	{
		struct sched_label ib[] = { { "net", "ib" } };
		c.n = 0;
		add(&c, 8, 0, 0)->labels = ib;
		c.nodes[0].nlabels = 1;
		add(&c, 8, 0, 0)->containers = true;
		j = mkjob(&o, 1, 1);
		j->image = "debian:bookworm";
		j->labels = ib;
		j->nlabels = 1;
		assert_false(place1(&c, j, st, &why));
		assert_string_equal(why.code, "labels");
		assert_string_equal(why.message, "no ready node in pool 'default' with a container "
						 "runtime has labels net=ib");
	}
	(void)state;
}

/* sched_plan with a mix: process jobs fill the process nodes, the image job
 * takes the docker node even though it comes last. */
static void test_plan_containers(void **state)
{
	struct cluster c = { 0 };
	struct onejob o[3];
	struct sched_job jobs[3];
	struct sched_input in;
	struct sched_plan p;

	add(&c, 4, 0, 0);
	add(&c, 4, 0, 0)->containers = true;
	for (int k = 0; k < 3; k++) {
		jobs[k] = *mkjob(&o[k], 1, 4);
		jobs[k].id = (uint64_t)k + 1;
		jobs[k].submitted_at = (uint64_t)k;
	}
	jobs[1].image = "debian:bookworm";
	jobs[2].image = "debian:bookworm";
	in = (struct sched_input){ c.nodes, c.n, jobs, 3, 0 };
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 2);
	assert_int_equal(p.starts[0].job, 0);
	assert_int_equal(p.starts[0].node, 0);
	assert_int_equal(p.starts[1].job, 1);
	assert_int_equal(p.starts[1].node, 1);
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 2);
	assert_string_equal(p.waits[0].code, "insufficient_gpus");
	assert_string_equal(p.waits[0].message, "needs 4 GPUs on one node; largest free block is 0");
	sched_plan_release(&p);
	(void)state;
}

static void test_gang_leaves_state_unchanged(void **state)
{
	struct cluster c = { 0 };
	struct onejob big, small;
	struct sched_start st[8];
	struct sched_wait why;
	struct sched_input in;
	struct place_state *s;

	add(&c, 8, 2, 0); /* 6 free */
	add(&c, 8, 2, 0); /* 6 free */
	add(&c, 8, 4, 0); /* 4 free */
	in = (struct sched_input){ c.nodes, c.n, NULL, 0, 0 };
	s = place_state_new(&in);
	/* 12 GPUs in 3 tasks of 4 on at most 2 nodes: every node holds one */
	mkjob(&big, 3, 4);
	big.j.max_nodes = 2;
	assert_false(place_job(s, &big.j, st, &why));
	assert_string_equal(why.code, "too_many_nodes");
	/* either 6-block may be named: ties go to whichever the buckets list first */
	assert_memory_equal(why.message, "needs 12 GPUs on <=2 nodes; largest free block is 6 on node gpu-",
			    strlen("needs 12 GPUs on <=2 nodes; largest free block is 6 on node gpu-"));
	/* nothing was kept: 6, 6 and 4 still fit */
	assert_true(place_job(s, mkjob(&small, 1, 6), st, &why));
	free_starts(st, 1);
	assert_true(place_job(s, mkjob(&small, 1, 6), st, &why));
	free_starts(st, 1);
	assert_true(place_job(s, mkjob(&small, 1, 4), st, &why));
	free_starts(st, 1);
	assert_false(place_job(s, mkjob(&small, 1, 1), st, &why));
	assert_string_equal(why.code, "insufficient_gpus");
	assert_string_equal(why.message, "needs 1 GPUs on one node; largest free block is 0");
	place_state_free(s);
	(void)state;
}

static void test_reason_texts(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[2];
	struct sched_wait why;
	struct sched_job *j = mkjob(&o, 2, 8);

	add(&c, 8, 4, 0);
	add(&c, 8, 6, 0);
	add(&c, 8, 2, 0); /* gpu-3: 6 free */
	j->max_nodes = 2;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "insufficient_gpus");
	assert_string_equal(why.message, "needs 16 GPUs on <=2 nodes; largest free block is 6 on node gpu-3");

	/* the GPUs are there, the CPUs are not */
	c.n = 0;
	add(&c, 8, 0, 0)->free_cpus_milli = 500;
	j = mkjob(&o, 1, 4);
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "insufficient_cpus");
	assert_string_equal(why.message, "needs 1000 millicpus on one node for worker/0; most free is 500");

	c.nodes[0].free_cpus_milli = 64000;
	c.nodes[0].free_memory = GIB / 2;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "insufficient_memory");

	c.nodes[0].schedulable = false;
	assert_false(place1(&c, j, st, &why));
	assert_string_equal(why.code, "no_nodes");
	(void)state;
}

static void test_cpu_only_keeps_gpus_free(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_start st[1];
	struct sched_wait why;

	add(&c, 8, 0, 0);
	add(&c, 8, 7, 0); /* 1 free */
	add(&c, 0, 0, 0); /* a CPU node */
	assert_true(place1(&c, mkjob(&o, 1, 0), st, &why));
	assert_int_equal(st[0].node, 2);
	assert_int_equal(st[0].ngpus, 0);
	free_starts(st, 1);
	(void)state;
}

/* Many jobs through sched_plan: every GPU used at most once, the starts
 * grouped by job and in task order. */
static void test_plan_many(void **state)
{
	struct cluster c = { 0 };
	struct onejob o[6];
	struct sched_job jobs[6];
	struct sched_input in;
	struct sched_plan p;
	int used[MAXN][16] = { { 0 } };
	unsigned sizes[6][2] = { { 2, 8 }, { 1, 4 }, { 4, 1 }, { 3, 2 }, { 1, 8 }, { 1, 2 } };

	for (int i = 0; i < 4; i++)
		add(&c, 8, 0, 4);
	for (int k = 0; k < 6; k++) {
		jobs[k] = *mkjob(&o[k], sizes[k][0], sizes[k][1]);
		jobs[k].id = (uint64_t)k + 1;
	}
	in = (struct sched_input){ c.nodes, c.n, jobs, 6, 0 };
	sched_plan(&in, &p);
	/* 16 + 4 + 4 + 6 = 30 of 32; then 8 does not fit, 2 does */
	assert_int_equal(p.nwaits, 1);
	assert_int_equal(p.waits[0].job, 4);
	for (size_t s = 0; s < p.nstarts; s++) {
		if (s && p.starts[s].job == p.starts[s - 1].job)
			assert_int_equal(p.starts[s].task, p.starts[s - 1].task + 1);
		for (unsigned g = 0; g < p.starts[s].ngpus; g++)
			assert_int_equal(++used[p.starts[s].node][p.starts[s].gpus[g]], 1);
	}
	sched_plan_release(&p);
	(void)state;
}

/* The submit-time check (sched.c) knows pools, labels and GPU memory too. */
static void test_feasible_constraints(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j = mkjob(&o, 1, 2);
	struct sched_label ib[] = { { "net", "ib" } };
	char field[64], msg[256];

	add(&c, 8, 8, 0)->labels = ib; /* all busy: capacity is what counts */
	c.nodes[0].nlabels = 1;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), 0);
	j->pool = "batch";
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "pool");
	assert_string_equal(msg, "pool: no node is in pool 'batch'");
	j->pool = NULL;
	j->labels = (struct sched_label[]){ { "net", "eth" } };
	j->nlabels = 1;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "placement.labels");
	j->labels = ib;
	j->gpu_memory = 100 * GIB;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "placement.gpu_memory");
	assert_string_equal(msg, "placement.gpu_memory: no node has GPUs with >= 102400 MiB");
	(void)state;
}

/* A job with an image: capacity counts the nodes with a container runtime;
 * with none in its pool the job is refused, naming the image. */
static void test_feasible_containers(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j = mkjob(&o, 1, 8);
	char field[64], msg[256];

	add(&c, 8, 8, 0);
	j->image = "debian:bookworm";
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "image");
	assert_string_equal(msg, "image: 'debian:bookworm' needs a node with a container runtime, "
				 "but none of the 1 node in pool 'default' has one");
	add(&c, 4, 0, 0)->containers = true;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "tasks.worker.gpus");
	assert_string_equal(msg, "tasks.worker.gpus: 8 GPUs per task but the largest node with a "
				 "container runtime has 4");
	j->image = NULL;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), 0);
	(void)state;
}

/* A job whose roles span pools (tasks.ROLE.pool): its parameter server on
 * the CPU pool, its workers on the GPU pool; all or nothing: with no room
 * in one pool, nothing is taken in the other, and the reason names the
 * role's pool. */
static void test_roles_span_pools(void **state)
{
	static const char *const pools[] = { "cpu", NULL, NULL };
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j;
	struct sched_start st[3];
	struct sched_wait why;
	struct sched_input in;
	struct place_state *s;

	add(&c, 2, 0, 0)->pool = "gpu";
	add(&c, 0, 0, 0)->pool = "cpu";
	j = mkjob(&o, 3, 1);
	o.t[0] = (struct sched_task){ "ps", 0, 0, 1000, GIB };
	j->pool = "gpu";
	j->task_pools = pools;
	assert_true(sched_job_multi_pool(j));
	assert_true(place1(&c, j, st, &why));
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(st[i].node, st[i].task == 0 ? 1 : 0);
	free_starts(st, 3);

	/* the CPU pool has no room: nothing is taken of the GPU pool */
	c.nodes[1].free_cpus_milli = 0;
	in = (struct sched_input){ c.nodes, c.n, NULL, 0, 0 };
	s = place_state_new(&in);
	memset(&why, 0, sizeof(why));
	assert_false(place_job(s, j, st, &why));
	assert_non_null(strstr(why.message, "role ps in pool 'cpu'"));
	/* the GPUs are all free still: a 2-GPU job of the GPU pool fits */
	{
		struct onejob o2;
		struct sched_job *g = mkjob(&o2, 1, 2);
		g->pool = "gpu";
		assert_true(place_job(s, g, st, &why));
		free_starts(st, 1);
	}
	place_state_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_fit_keeps_empty_node),
		cmocka_unit_test(test_best_fit_smallest_block),
		cmocka_unit_test(test_data_locality_breaks_ties_only),
		cmocka_unit_test(test_fewest_nodes),
		cmocka_unit_test(test_multi_best_fit_set),
		cmocka_unit_test(test_multi_islands),
		cmocka_unit_test(test_multi_constraints),
		cmocka_unit_test(test_multi_rare_label),
		cmocka_unit_test(test_no_gpu_twice),
		cmocka_unit_test(test_islands_within_node),
		cmocka_unit_test(test_islands_across_nodes),
		cmocka_unit_test(test_gpu_model_and_memory),
		cmocka_unit_test(test_labels_and_pools),
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_plan_containers),
		cmocka_unit_test(test_gang_leaves_state_unchanged),
		cmocka_unit_test(test_reason_texts),
		cmocka_unit_test(test_cpu_only_keeps_gpus_free),
		cmocka_unit_test(test_plan_many),
		cmocka_unit_test(test_feasible_constraints),
		cmocka_unit_test(test_feasible_containers),
		cmocka_unit_test(test_roles_span_pools),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
