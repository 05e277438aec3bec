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

void sched_plan(const struct sched_input *in, struct sched_plan *out)
{
	struct place_state *ps = place_state_new(in);
	struct order_ctx *order = xcalloc(in->njobs + 1, sizeof(*order));
	size_t starts_alloc = 0, waits_alloc = 0;

	memset(out, 0, sizeof(*out));
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

int sched_check_feasible(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, char *field, size_t field_len,
			 char *msg, size_t msg_len)
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
	/* with no container runtime in the pool yet, the job waits for one
	 * (no_container_runtime): capacity is checked against every node */
	ctr_only = job->image && ctr;
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
	return 0;
}
