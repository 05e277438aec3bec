#include "base/compat.h"
#include "sched/sched.h"

#include "base/xalloc.h"
#include "sched/place.h"

static bool model_matches(const char *want, const char *have)
{
	if (!want || !*want || !strcmp(want, "*"))
		return true;
	return have && !strcmp(want, have);
}

/* Orders job indexes by priority (high first), then age, then id. */
struct order_ctx {
	const struct sched_job *jobs;
	size_t idx;
};

static int cmp_jobs(const void *a, const void *b)
{
	const struct order_ctx *x = a, *y = b;
	const struct sched_job *p = &x->jobs[x->idx], *q = &y->jobs[y->idx];

	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	if (p->priority != q->priority)
		return p->priority > q->priority ? -1 : 1;
	if (p->submitted_at != q->submitted_at)
		return p->submitted_at < q->submitted_at ? -1 : 1;
	if (p->id != q->id)
		return p->id < q->id ? -1 : 1;
	return 0;
}

static bool feasible_node(const struct sched_node *n, const struct sched_job *job, bool ctr_only);

/* A job admitted with wait_for_nodes that no state of the cluster could
 * run: why, instead of what today's free resources lack. */
static void infeasible_reason(const struct sched_input *in, const struct sched_job *j,
			      struct sched_wait *why)
{
	char field[160], msg[512];

	if (!sched_check_feasible(in->nodes, in->nnodes, j, field, sizeof(field), msg, sizeof(msg)))
		return;
	snprintf(why->code, sizeof(why->code), "infeasible");
	snprintf(why->message, sizeof(why->message), "%.*s", (int)sizeof(why->message) - 1, msg);
}

/* Appends to a waiting job's message the drained nodes that could take it
 * (in its pool, with its labels, a container runtime for an image): an
 * admin's resume may be all it waits for. */
static void drained_note(const struct sched_input *in, const struct sched_job *j,
			 struct sched_wait *why)
{
	const struct sched_node *first = NULL;
	size_t more = 0, len = strlen(why->message);

	for (size_t i = 0; i < in->nnodes; i++) {
		const struct sched_node *n = &in->nodes[i];
		if (!n->drained || !feasible_node(n, j, j->image != NULL) || !place_labels_match(n, j))
			continue;
		if (first)
			more++;
		else
			first = n;
	}
	if (!first || len >= sizeof(why->message))
		return;
	len += (size_t)snprintf(why->message + len, sizeof(why->message) - len,
				"; node '%s' is drained%s%.100s%s", first->name,
				first->drain_reason ? " (" : "",
				first->drain_reason ? first->drain_reason : "",
				first->drain_reason ? ")" : "");
	if (more && len < sizeof(why->message))
		snprintf(why->message + len, sizeof(why->message) - len, ", and %zu more node%s",
			 more, more == 1 ? "" : "s");
}

void sched_plan(const struct sched_input *in, struct sched_plan *out)
{
	struct place_state *ps = place_state_new(in);
	struct order_ctx *order = xcalloc(in->njobs + 1, sizeof(*order));
	size_t starts_alloc = 0, waits_alloc = 0;

	bool any_drained = false;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < in->nnodes; i++)
		any_drained |= in->nodes[i].drained;
	for (size_t i = 0; i < in->njobs; i++) {
		order[i].jobs = in->jobs;
		order[i].idx = i;
	}
	sort_array(order, in->njobs, sizeof(*order), cmp_jobs);

	/* ---- placement: every job in order, as a gang (place.h) ---- */
	for (size_t k = 0; k < in->njobs; k++) {
		const struct sched_job *j = &in->jobs[order[k].idx];
		struct sched_wait wait;

		memset(&wait, 0, sizeof(wait));
		ALLOC_GROW(out->starts, out->nstarts + j->ntasks + 1, starts_alloc);
		if (place_job(ps, j, &out->starts[out->nstarts], &wait)) {
			for (size_t t = 0; t < j->ntasks; t++)
				out->starts[out->nstarts + t].job = order[k].idx;
			out->nstarts += j->ntasks;
			continue;
		}
		if (j->wait_for_nodes)
			infeasible_reason(in, j, &wait);
		if (any_drained && strcmp(wait.code, "infeasible"))
			drained_note(in, j, &wait);
		wait.job = order[k].idx;
		wait.position = (unsigned)out->nwaits + 1;
		ALLOC_GROW(out->waits, out->nwaits + 1, waits_alloc);
		out->waits[out->nwaits++] = wait;
	}
	/* ---- end of placement ---- */

	place_state_free(ps);
	free(order);
}

void sched_plan_release(struct sched_plan *plan)
{
	for (size_t i = 0; i < plan->nstarts; i++)
		free(plan->starts[i].gpus);
	free(plan->starts);
	free(plan->waits);
	memset(plan, 0, sizeof(*plan));
}

static const char *pool_or_default(const char *p)
{
	return p && *p ? p : "default";
}

/* Whether node n counts for job: in its pool, and with a container runtime
 * when only those count. */
static bool feasible_node(const struct sched_node *n, const struct sched_job *job, bool ctr_only)
{
	return !strcmp(pool_or_default(n->pool), pool_or_default(job->pool)) &&
	       (!ctr_only || n->containers);
}

/* The GPUs of n that job may use: of its model, with its memory. */
static unsigned usable_gpus(const struct sched_node *n, const struct sched_job *job)
{
	unsigned k = 0;

	for (size_t g = 0; g < n->ngpus; g++)
		k += model_matches(job->gpu_model, n->gpus[g].model) &&
		     (!job->gpu_memory || n->gpus[g].memory >= job->gpu_memory);
	return k;
}

static int cmp_unsigned_desc(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The sum of the first limit of k (sorted, largest first); limit 0: all. */
static uint64_t sum_best(const unsigned *k, size_t n, unsigned limit)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n && (!limit || i < limit); i++)
		sum += k[i];
	return sum;
}

/* The runs of job's tasks by role (the callers list a role's tasks
 * together; were they not, a run would only undercount, never refuse a job
 * that fits): *len tasks from first, all of role tasks[first].role. */
static size_t role_run(const struct sched_job *job, size_t first)
{
	size_t e = first + 1;

	while (e < job->ntasks && !strcmp(job->tasks[e].role, job->tasks[first].role))
		e++;
	return e - first;
}

/* The gang as a whole: its GPUs against the GPUs of the nodes that may hold
 * it (all of them, or the best max_nodes), and each role's tasks against how
 * many fit whole on those nodes. Every bound is necessary, so a job refused
 * here cannot run whatever the cluster does, short of new nodes. */
static int check_gang(const struct sched_node *nodes, size_t nnodes, const struct sched_job *job,
		      bool ctr_only, char *field, size_t field_len, char *msg, size_t msg_len)
{
	unsigned *k = xcalloc(nnodes + 1, sizeof(*k)), *fit = xcalloc(nnodes + 1, sizeof(*fit));
	char gang[200] = "", where[200];
	uint64_t need = 0, have, best;
	size_t ne = 0, len = 0, gpu_roles = 0, gpu_role = 0;
	bool filtered, multi;
	int ret = -1;

	for (size_t i = 0; i < nnodes; i++)
		if (feasible_node(&nodes[i], job, ctr_only) && place_labels_match(&nodes[i], job))
			k[ne++] = usable_gpus(&nodes[i], job);
	sort_array(k, ne, sizeof(*k), cmp_unsigned_desc);
	multi = job->ntasks && role_run(job, 0) < job->ntasks;
	for (size_t t = 0; t < job->ntasks; t += role_run(job, t)) {
		size_t c = role_run(job, t);
		unsigned g = job->tasks[t].gpus;
		need += (uint64_t)c * g;
		if (g) {
			gpu_roles++;
			gpu_role = t;
		}
		if (len < sizeof(gang))
			len += (size_t)snprintf(gang + len, sizeof(gang) - len, "%s%zu x %u GPUs%s%s%s",
						len ? " + " : "", c, g, multi ? " (" : "",
						multi ? job->tasks[t].role : "", multi ? ")" : "");
	}
	if (!need) {
		ret = 0;
		goto out;
	}
	have = sum_best(k, ne, 0);
	filtered = ne < nnodes || (job->gpu_model && strcmp(job->gpu_model, "*")) || job->gpu_memory;
	if (filtered)
		snprintf(where, sizeof(where), "the %zu node%s that may hold it (pool '%s'%s%s%s%.40s) "
			 "%s %" PRIu64 " such GPUs", ne, ne == 1 ? "" : "s", pool_or_default(job->pool),
			 job->nlabels ? ", its labels" : "", ctr_only ? ", a container runtime" : "",
			 job->gpu_model && strcmp(job->gpu_model, "*") ? ", GPU model " : "",
			 job->gpu_model && strcmp(job->gpu_model, "*") ? job->gpu_model : "",
			 ne == 1 ? "has" : "have", have);
	else
		snprintf(where, sizeof(where), "the cluster has %" PRIu64 " GPUs on %zu node%s", have, ne,
			 ne == 1 ? "" : "s");
	if (need > have) {
		if (gpu_roles == 1)
			snprintf(field, field_len, "tasks.%s.replicas", job->tasks[gpu_role].role);
		else
			snprintf(field, field_len, "tasks");
		snprintf(msg, msg_len, "%s: %s = %" PRIu64 " GPUs, but %s", field, gang, need, where);
		goto out;
	}
	/* each role alone: its tasks fit whole, floor(k / g) on a node */
	for (size_t t = 0; t < job->ntasks; t += role_run(job, t)) {
		size_t c = role_run(job, t);
		unsigned g = job->tasks[t].gpus;
		if (!g)
			continue;
		for (size_t i = 0; i < ne; i++)
			fit[i] = k[i] / g;
		if (sum_best(fit, ne, 0) < c) {
			snprintf(field, field_len, "tasks.%s.replicas", job->tasks[t].role);
			snprintf(msg, msg_len, "%s: %zu tasks of %u GPUs each, but at most %" PRIu64
				 " fit whole on the nodes (a task's GPUs are on one node; %s)", field, c,
				 g, sum_best(fit, ne, 0), where);
			goto out;
		}
		if (job->max_nodes && sum_best(fit, ne, job->max_nodes) < c) {
			snprintf(field, field_len, "placement.max_nodes");
			snprintf(msg, msg_len, "placement.max_nodes: %zu tasks of %u GPUs (%s) on at "
				 "most %u node%s, but at most %" PRIu64 " fit whole on any %u", c, g,
				 job->tasks[t].role, job->max_nodes, job->max_nodes == 1 ? "" : "s",
				 sum_best(fit, ne, job->max_nodes), job->max_nodes);
			goto out;
		}
	}
	best = sum_best(k, ne, job->max_nodes);
	if (job->max_nodes && need > best) {
		snprintf(field, field_len, "placement.max_nodes");
		snprintf(msg, msg_len, "placement.max_nodes: %s = %" PRIu64 " GPUs on at most %u "
			 "node%s, but the %u with the most GPUs have %" PRIu64, gang, need,
			 job->max_nodes, job->max_nodes == 1 ? "" : "s", job->max_nodes, best);
		goto out;
	}
	ret = 0;
out:
	free(k);
	free(fit);
	return ret;
}

static const char *task_pool(const struct sched_job *j, size_t t)
{
	return pool_or_default(j->task_pools && j->task_pools[t] ? j->task_pools[t] : j->pool);
}

bool sched_job_multi_pool(const struct sched_job *j)
{
	for (size_t t = 0; j->task_pools && t < j->ntasks; t++)
		if (strcmp(task_pool(j, t), pool_or_default(j->pool)))
			return true;
	return false;
}

size_t sched_job_split(const struct sched_job *j, struct sched_job_part **parts)
{
	struct sched_job_part *p = xcalloc(j->ntasks + 1, sizeof(*p));
	const char **names = xcalloc(j->ntasks + 1, sizeof(*names));
	size_t n = 1;

	names[0] = pool_or_default(j->pool);
	for (size_t t = 0; t < j->ntasks; t++) {
		const char *pool = task_pool(j, t);
		size_t k;
		for (k = 0; k < n && strcmp(names[k], pool); k++)
			;
		if (k == n)
			names[n++] = pool;
	}
	for (size_t k = 0; k < n; k++) {
		struct sched_task *tasks = xcalloc(j->ntasks + 1, sizeof(*tasks));
		p[k].task = xcalloc(j->ntasks + 1, sizeof(*p[k].task));
		p[k].job = *j;
		p[k].job.pool = names[k];
		p[k].job.ntasks = 0;
		p[k].job.task_pools = NULL;
		if (k)
			p[k].job.max_nodes = 0;
		for (size_t t = 0; t < j->ntasks; t++)
			if (!strcmp(task_pool(j, t), names[k])) {
				p[k].task[p[k].job.ntasks] = t;
				tasks[p[k].job.ntasks++] = j->tasks[t];
			}
		p[k].job.tasks = tasks;
	}
	free(names);
	*parts = p;
	return n;
}

void sched_job_parts_free(struct sched_job_part *parts, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free((void *)parts[k].job.tasks);
		free(parts[k].task);
	}
	free(parts);
}

static int check_one_pool(const struct sched_node *nodes, size_t nnodes, const struct sched_job *job,
			  char *field, size_t field_len, char *msg, size_t msg_len);

int sched_check_feasible(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, char *field, size_t field_len,
			 char *msg, size_t msg_len)
{
	struct sched_job_part *parts;
	size_t n;
	int ret = 0;

	if (!sched_job_multi_pool(job))
		return check_one_pool(nodes, nnodes, job, field, field_len, msg, msg_len);
	n = sched_job_split(job, &parts);
	for (size_t k = 0; k < n && !ret; k++) {
		ret = check_one_pool(nodes, nnodes, &parts[k].job, field, field_len, msg, msg_len);
		if (ret && k && !strcmp(field, "pool")) {
			/* the pool of a role: name the role's field */
			const char *role = parts[k].job.tasks[0].role;
			snprintf(field, field_len, "tasks.%s.pool", role);
			snprintf(msg, msg_len, "tasks.%s.pool: no node is in pool '%s'", role, parts[k].job.pool);
		}
	}
	sched_job_parts_free(parts, n);
	return ret;
}

static int check_one_pool(const struct sched_node *nodes, size_t nnodes, const struct sched_job *job,
			  char *field, size_t field_len, char *msg, size_t msg_len)
{
	size_t in_pool = 0, labelled = 0, ctr = 0;
	const char *kind;
	bool ctr_only;

	if (!nnodes)
		return 0;
	/* placement: the node-level constraints first (pool, runtime, labels) */
	for (size_t i = 0; i < nnodes; i++)
		if (feasible_node(&nodes[i], job, false)) {
			in_pool++;
			ctr += nodes[i].containers;
		}
	if (!in_pool) {
		snprintf(field, field_len, "pool");
		snprintf(msg, msg_len, "pool: no node is in pool '%s'", pool_or_default(job->pool));
		return -1;
	}
	if (job->image && !ctr) {
		snprintf(field, field_len, "image");
		snprintf(msg, msg_len, "image: '%.200s' needs a node with a container runtime, but "
			 "none of the %zu node%s in pool '%s' has one", job->image, in_pool,
			 in_pool == 1 ? "" : "s", pool_or_default(job->pool));
		return -1;
	}
	/* an image runs only where there is a container runtime: only those count */
	ctr_only = job->image != NULL;
	kind = ctr_only ? " with a container runtime" : "";
	for (size_t i = 0; i < nnodes; i++)
		labelled += feasible_node(&nodes[i], job, ctr_only) &&
			    place_labels_match(&nodes[i], job);
	if (!labelled) {
		snprintf(field, field_len, "placement.labels");
		snprintf(msg, msg_len, "placement.labels: no node in pool '%s'%s has them all",
			 pool_or_default(job->pool), kind);
		return -1;
	}
	for (size_t ti = 0; ti < job->ntasks; ti++) {
		const struct sched_task *t = &job->tasks[ti];
		unsigned best_gpus = 0;
		uint64_t best_cpus = 0, best_mem = 0;
		bool model_seen = false, memory_seen = false, fits = false;

		for (size_t i = 0; i < nnodes; i++) {
			const struct sched_node *n = &nodes[i];
			unsigned k = 0;

			if (!feasible_node(n, job, ctr_only) || !place_labels_match(n, job))
				continue;
			for (size_t g = 0; g < n->ngpus; g++) {
				if (!model_matches(job->gpu_model, n->gpus[g].model))
					continue;
				model_seen = true;
				if (job->gpu_memory && n->gpus[g].memory < job->gpu_memory)
					continue;
				memory_seen = true;
				k++;
			}
			if (k > best_gpus)
				best_gpus = k;
			if (k >= t->gpus && n->cpus_milli > best_cpus)
				best_cpus = n->cpus_milli;
			if (k >= t->gpus && n->cpus_milli >= t->cpus_milli &&
			    (!n->memory || n->memory > best_mem))
				best_mem = n->memory ? n->memory : UINT64_MAX;
			if (k >= t->gpus && n->cpus_milli >= t->cpus_milli &&
			    (!n->memory || !t->memory || n->memory >= t->memory))
				fits = true;
		}
		if (fits)
			continue;
		if (t->gpus && !model_seen && job->gpu_model && strcmp(job->gpu_model, "*")) {
			snprintf(field, field_len, "placement.gpu_model");
			snprintf(msg, msg_len, "placement.gpu_model: no node%s has GPUs of model '%s'",
				 kind, job->gpu_model);
		} else if (t->gpus && !memory_seen && job->gpu_memory) {
			snprintf(field, field_len, "placement.gpu_memory");
			snprintf(msg, msg_len,
				 "placement.gpu_memory: no node%s has GPUs with >= %" PRIu64 " MiB",
				 kind, job->gpu_memory >> 20);
		} else if (best_gpus < t->gpus) {
			snprintf(field, field_len, "tasks.%s.gpus", t->role);
			snprintf(msg, msg_len,
				 "tasks.%s.gpus: %u GPUs per task but the largest node%s has %u",
				 t->role, t->gpus, kind, best_gpus);
		} else if (best_cpus < t->cpus_milli) {
			snprintf(field, field_len, "tasks.%s.cpus", t->role);
			snprintf(msg, msg_len,
				 "tasks.%s.cpus: %g CPUs per task but the largest node%s has %g", t->role,
				 t->cpus_milli / 1000.0, kind, best_cpus / 1000.0);
		} else {
			snprintf(field, field_len, "tasks.%s.memory", t->role);
			snprintf(msg, msg_len,
				 "tasks.%s.memory: %" PRIu64 " bytes per task but the largest "
				 "node%s has %" PRIu64, t->role, t->memory, kind, best_mem);
		}
		return -1;
	}
	return check_gang(nodes, nnodes, job, ctr_only, field, field_len, msg, msg_len);
}
