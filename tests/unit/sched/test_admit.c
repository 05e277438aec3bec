/* Admission (sched_check_feasible, src/sched/sched.c): a job no state of the
 * cluster could run is refused with the field and what the cluster has; and
 * the reasons sched_plan gives a waiting job for drained nodes and for a job
 * admitted with wait_for_nodes that can never run. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/sched.h"

#define MAXN 8
#define GIB ((uint64_t)1 << 30)

struct cluster {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][16];
	char names[MAXN][16];
	size_t n;
};

/* Adds node "nI" of ngpus A100s, all free, ready. */
static struct sched_node *add(struct cluster *c, unsigned ngpus)
{
	size_t i = c->n++;
	struct sched_node *n = &c->nodes[i];

	memset(n, 0, sizeof(*n));
	snprintf(c->names[i], sizeof(c->names[i]), "n%zu", i + 1);
	for (unsigned g = 0; g < ngpus; g++)
		c->gpus[i][g] = (struct sched_gpu){ .index = g, .model = "A100", .free = true,
						    .island = g, .memory = 80 * GIB };
	n->name = c->names[i];
	n->schedulable = true;
	n->gpus = c->gpus[i];
	n->ngpus = ngpus;
	n->cpus_milli = n->free_cpus_milli = 64000;
	n->memory = n->free_memory = 512 * GIB;
	return n;
}

struct onejob {
	struct sched_task t[64];
	struct sched_job j;
};

/* A job of roles[i] x gpus[i] for each role, roles in order. */
static struct sched_job *mkjob(struct onejob *o, const char *const *names, const unsigned *replicas,
			       const unsigned *gpus, size_t nroles)
{
	size_t k = 0;

	memset(o, 0, sizeof(*o));
	for (size_t r = 0; r < nroles; r++)
		for (unsigned x = 0; x < replicas[r]; x++)
			o->t[k++] = (struct sched_task){ names[r], x, gpus[r], 1000, GIB };
	o->j.id = 1;
	o->j.tasks = o->t;
	o->j.ntasks = k;
	return &o->j;
}

static struct sched_job *workers(struct onejob *o, unsigned replicas, unsigned gpus)
{
	static const char *const worker[] = { "worker" };
	return mkjob(o, worker, &replicas, &gpus, 1);
}

static int check(struct cluster *c, const struct sched_job *j, char *field, char *msg)
{
	return sched_check_feasible(c->nodes, c->n, j, field, 160, msg, 512);
}

/* The case: 4 x 8 GPUs on a 12-GPU cluster (8 + 4). Each task fits
 * on the 8-GPU node, the gang does not fit on the cluster. */
static void test_gang_more_gpus_than_cluster(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	char field[160], msg[512];

	add(&c, 8);
	add(&c, 4);
	c.nodes[1].schedulable = false; /* lost nodes count: their capacity may come back */
	assert_int_equal(check(&c, workers(&o, 4, 8), field, msg), -1);
	assert_string_equal(field, "tasks.worker.replicas");
	assert_string_equal(msg, "tasks.worker.replicas: 4 x 8 GPUs = 32 GPUs, but the cluster has "
				 "12 GPUs on 2 nodes");
	/* what fits is admitted: 1 x 8 + 1 x 4 */
	static const char *const names[] = { "worker", "ps" };
	assert_int_equal(check(&c, mkjob(&o, names, (unsigned[]){ 1, 1 }, (unsigned[]){ 8, 4 }, 2),
			       field, msg), 0);
	/* several roles: the field is the gang's */
	assert_int_equal(check(&c, mkjob(&o, names, (unsigned[]){ 1, 2 }, (unsigned[]){ 8, 4 }, 2),
			       field, msg), -1);
	assert_string_equal(field, "tasks");
	assert_string_equal(msg, "tasks: 1 x 8 GPUs (worker) + 2 x 4 GPUs (ps) = 16 GPUs, but the "
				 "cluster has 12 GPUs on 2 nodes");
	/* a role without GPUs beside one with: that one is named */
	assert_int_equal(check(&c, mkjob(&o, names, (unsigned[]){ 2, 1 }, (unsigned[]){ 8, 0 }, 2),
			       field, msg), -1);
	assert_string_equal(field, "tasks.worker.replicas");
	(void)state;
}

/* Enough GPUs in sum, but a task's GPUs are on one node: 3 x 6 on 8 + 8 + 4
 * (20 GPUs) fits only two tasks. */
static void test_gang_tasks_fit_whole(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	char field[160], msg[512];

	add(&c, 8);
	add(&c, 8);
	add(&c, 4);
	assert_int_equal(check(&c, workers(&o, 3, 6), field, msg), -1);
	assert_string_equal(field, "tasks.worker.replicas");
	assert_string_equal(msg, "tasks.worker.replicas: 3 tasks of 6 GPUs each, but at most 2 fit "
				 "whole on the nodes (a task's GPUs are on one node; the cluster "
				 "has 20 GPUs on 3 nodes)");
	assert_int_equal(check(&c, workers(&o, 2, 6), field, msg), 0);
	assert_int_equal(check(&c, workers(&o, 5, 4), field, msg), 0);
	(void)state;
}

/* max_nodes: what the best max_nodes nodes can hold. */
static void test_gang_max_nodes(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j;
	char field[160], msg[512];

	add(&c, 8);
	add(&c, 4);
	add(&c, 8);
	j = workers(&o, 4, 4);
	assert_int_equal(check(&c, j, field, msg), 0);
	j->max_nodes = 1;
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "placement.max_nodes");
	assert_string_equal(msg, "placement.max_nodes: 4 tasks of 4 GPUs (worker) on at most 1 node, "
				 "but at most 2 fit whole on any 1");
	j->max_nodes = 2;
	assert_int_equal(check(&c, j, field, msg), 0);
	/* 16 single-GPU tasks on 2 nodes: the two largest have 16 */
	j = workers(&o, 17, 1);
	j->max_nodes = 2;
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "placement.max_nodes");
	(void)state;
}

/* GPU model, labels and pool that no node has; an image where no node of
 * the pool has a container runtime; the gang counts only the nodes that may
 * hold it. */
static void test_constraints_no_node_has(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j;
	struct sched_label ib[] = { { "net", "ib" } };
	char field[160], msg[512];

	add(&c, 8)->labels = ib;
	c.nodes[0].nlabels = 1;
	add(&c, 8)->containers = true;
	c.nodes[1].pool = "batch";
	j = workers(&o, 1, 1);
	j->gpu_model = "H100";
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "placement.gpu_model");
	j->gpu_model = "A100";
	assert_int_equal(check(&c, j, field, msg), 0);
	j->pool = "nope";
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "pool");
	j->pool = NULL;
	j->image = "debian:bookworm";
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "image");
	j->pool = "batch"; /* its node runs containers */
	assert_int_equal(check(&c, j, field, msg), 0);
	j->image = NULL;
	j->pool = NULL;
	j->labels = (struct sched_label[]){ { "net", "eth" } };
	j->nlabels = 1;
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(field, "placement.labels");
	/* 2 x 8 in the default pool: the batch node's GPUs do not count */
	j = workers(&o, 2, 8);
	assert_int_equal(check(&c, j, field, msg), -1);
	assert_string_equal(msg, "tasks.worker.replicas: 2 x 8 GPUs = 16 GPUs, but the 1 node that "
				 "may hold it (pool 'default') has 8 such GPUs");
	(void)state;
}

/* No nodes at all: admitted (it waits for some to join). */
static void test_no_nodes_admits(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	char field[160], msg[512];

	assert_int_equal(check(&c, workers(&o, 64, 8), field, msg), 0);
	(void)state;
}

/* Plans a lone job on c; its wait (the plan must not start it). */
static struct sched_wait plan_wait(struct cluster *c, const struct sched_job *j)
{
	struct sched_input in = { c->nodes, c->n, j, 1, 0 };
	struct sched_plan p;
	struct sched_wait w;

	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 0);
	assert_int_equal(p.nwaits, 1);
	w = p.waits[0];
	sched_plan_release(&p);
	return w;
}

/* A job waiting while the only node that could take it is drained says so,
 * with the admin's reason; resumed, it starts there. */
static void test_wait_names_drained_node(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j = workers(&o, 1, 2);
	struct sched_wait w;
	struct sched_input in;
	struct sched_plan p;

	add(&c, 4);
	add(&c, 1);
	c.nodes[0].schedulable = false;
	c.nodes[0].drained = true;
	c.nodes[0].drain_reason = "disk swap";
	w = plan_wait(&c, j);
	assert_string_equal(w.code, "insufficient_gpus");
	assert_non_null(strstr(w.message, "; node 'n1' is drained (disk swap)"));
	c.nodes[1].drained = true; /* a second drained node, no reason */
	c.nodes[1].schedulable = false;
	w = plan_wait(&c, j);
	assert_string_equal(w.code, "no_nodes");
	assert_string_equal(w.message, "no ready nodes; node 'n1' is drained (disk swap), and 1 more node");
	c.nodes[0].drained = false;
	c.nodes[0].schedulable = true;
	in = (struct sched_input){ c.nodes, c.n, j, 1, 0 };
	sched_plan(&in, &p);
	assert_int_equal(p.nstarts, 1);
	assert_int_equal(p.starts[0].node, 0);
	sched_plan_release(&p);
	(void)state;
}

/* wait_for_nodes: a job that can never run waits with the admission check's
 * reason, code infeasible; once a node that could hold it joins, the usual
 * reasons again. */
static void test_wait_for_nodes_reason(void **state)
{
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j = workers(&o, 4, 8);
	struct sched_wait w;

	add(&c, 8);
	add(&c, 4);
	j->wait_for_nodes = true;
	w = plan_wait(&c, j);
	assert_string_equal(w.code, "infeasible");
	assert_string_equal(w.message, "tasks.worker.replicas: 4 x 8 GPUs = 32 GPUs, but the cluster "
				       "has 12 GPUs on 2 nodes");
	add(&c, 8);
	add(&c, 8);
	add(&c, 8);
	c.nodes[2].schedulable = false;
	w = plan_wait(&c, j);
	assert_string_equal(w.code, "insufficient_gpus");
	(void)state;
}

/* A job whose roles span pools is checked part by part: a role's pool
 * with no node is refused naming the role's pool field. */
static void test_roles_span_pools(void **state)
{
	static const char *const names[] = { "ps", "worker" };
	static const unsigned replicas[] = { 1, 2 }, gpus[] = { 0, 1 };
	const char *pools[3] = { "cpu", NULL, NULL };
	struct cluster c = { 0 };
	struct onejob o;
	struct sched_job *j = mkjob(&o, names, replicas, gpus, 2);
	char field[160], msg[512];

	add(&c, 2)->pool = "gpu";
	j->pool = "gpu";
	j->task_pools = pools;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "tasks.ps.pool");
	assert_string_equal(msg, "tasks.ps.pool: no node is in pool 'cpu'");
	add(&c, 0)->pool = "cpu";
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), 0);
	/* each part on its own: the workers' GPUs are the GPU pool's to hold */
	o.t[1].gpus = o.t[2].gpus = 2;
	assert_int_equal(sched_check_feasible(c.nodes, c.n, j, field, sizeof(field), msg, sizeof(msg)), -1);
	assert_string_equal(field, "tasks.worker.replicas");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_more_gpus_than_cluster),
		cmocka_unit_test(test_gang_tasks_fit_whole),
		cmocka_unit_test(test_gang_max_nodes),
		cmocka_unit_test(test_constraints_no_node_has),
		cmocka_unit_test(test_no_nodes_admits),
		cmocka_unit_test(test_wait_names_drained_node),
		cmocka_unit_test(test_wait_for_nodes_reason),
		cmocka_unit_test(test_roles_span_pools),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
