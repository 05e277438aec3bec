#include "base/compat.h"
#include "sched/sched.h"

#include "base/xalloc.h"

/* The free resources of one node while a plan is being built. */
struct work_node {
	bool *gpu_free;          /* per GPU of the node */
	uint64_t cpus;
	uint64_t memory;
	bool limit_memory;       /* false when the node's memory is unknown */
};

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

	if (p->priority != q->priority)
		return p->priority > q->priority ? -1 : 1;
	if (p->submitted_at != q->submitted_at)
		return p->submitted_at < q->submitted_at ? -1 : 1;
	if (p->id != q->id)
		return p->id < q->id ? -1 : 1;
	return 0;
}

static unsigned free_gpus_on(const struct sched_node *n, const struct work_node *w,
			     const char *model)
{
	unsigned k = 0;

	for (size_t g = 0; g < n->ngpus; g++)
		if (w->gpu_free[g] && model_matches(model, n->gpus[g].model))
			k++;
	return k;
}

static bool task_fits(const struct sched_node *n, const struct work_node *w,
		      const struct sched_task *t, const char *model)
{
	if (!n->schedulable)
		return false;
	if (free_gpus_on(n, w, model) < t->gpus)
		return false;
	if (t->cpus_milli > w->cpus)
		return false;
	if (w->limit_memory && t->memory > w->memory)
		return false;
	return true;
}

/* take the task's resources on node n; writes the GPU indexes into gpus */
static void task_take(const struct sched_node *n, struct work_node *w,
		      const struct sched_task *t, const char *model, unsigned *gpus)
{
	unsigned k = 0;

	for (size_t g = 0; g < n->ngpus && k < t->gpus; g++)
		if (w->gpu_free[g] && model_matches(model, n->gpus[g].model)) {
			w->gpu_free[g] = false;
			gpus[k++] = n->gpus[g].index;
		}
	w->cpus -= t->cpus_milli;
	if (w->limit_memory)
		w->memory -= t->memory;
}

static void snapshot_work(const struct sched_input *in, struct work_node *w,
			  struct work_node *save)
{
	for (size_t i = 0; i < in->nnodes; i++) {
		save[i].cpus = w[i].cpus;
		save[i].memory = w[i].memory;
		save[i].limit_memory = w[i].limit_memory;
		memcpy(save[i].gpu_free, w[i].gpu_free, in->nodes[i].ngpus * sizeof(bool));
	}
}

/* Why the task t of job j does not fit now: fills code and message. */
static void explain(const struct sched_input *in, const struct work_node *w,
		    const struct sched_job *j, const struct sched_task *t, bool max_nodes_hit,
		    struct sched_wait *out)
{
	size_t ready = 0, model_nodes = 0;
	unsigned best_gpus = 0;
	const char *best_gpus_node = NULL;
	uint64_t best_cpus = 0, best_mem = 0;
	bool gpus_ok = false, cpus_ok = false;

	for (size_t i = 0; i < in->nnodes; i++) {
		const struct sched_node *n = &in->nodes[i];
		unsigned fg;

		if (!n->schedulable)
			continue;
		ready++;
		bool has_model = !t->gpus || !j->gpu_model || !strcmp(j->gpu_model, "*");
		for (size_t g = 0; g < n->ngpus && !has_model; g++)
			if (model_matches(j->gpu_model, n->gpus[g].model))
				has_model = true;
		if (!has_model)
			continue;
		model_nodes++;
		fg = free_gpus_on(n, &w[i], j->gpu_model);
		if (!best_gpus_node || fg > best_gpus) {
			best_gpus = fg;
			best_gpus_node = n->name;
		}
		if (fg >= t->gpus) {
			gpus_ok = true;
			if (w[i].cpus > best_cpus)
				best_cpus = w[i].cpus;
			if (w[i].cpus >= t->cpus_milli) {
				cpus_ok = true;
				if (w[i].memory > best_mem)
					best_mem = w[i].memory;
			}
		}
	}
	if (!ready) {
		snprintf(out->code, sizeof(out->code), "no_nodes");
		snprintf(out->message, sizeof(out->message), "no ready nodes");
	} else if (!model_nodes) {
		snprintf(out->code, sizeof(out->code), "gpu_model");
		snprintf(out->message, sizeof(out->message),
			 "needs GPU model '%s' for %s/%u; no ready node has it", j->gpu_model,
			 t->role, t->index);
	} else if (max_nodes_hit && gpus_ok) {
		snprintf(out->code, sizeof(out->code), "too_many_nodes");
		snprintf(out->message, sizeof(out->message),
			 "needs %zu tasks on <=%u nodes; %s/%u does not fit on the nodes chosen",
			 j->ntasks, j->max_nodes, t->role, t->index);
	} else if (!gpus_ok) {
		snprintf(out->code, sizeof(out->code), "insufficient_gpus");
		snprintf(out->message, sizeof(out->message),
			 "needs %u GPUs on one node for %s/%u; most free on a node is %u (%s)",
			 t->gpus, t->role, t->index, best_gpus, best_gpus_node);
	} else if (!cpus_ok) {
		snprintf(out->code, sizeof(out->code), "insufficient_cpus");
		snprintf(out->message, sizeof(out->message),
			 "needs %" PRIu64 " millicpus on one node for %s/%u; most free is %" PRIu64,
			 t->cpus_milli, t->role, t->index, best_cpus);
	} else {
		snprintf(out->code, sizeof(out->code), "insufficient_memory");
		snprintf(out->message, sizeof(out->message),
			 "needs %" PRIu64 " bytes of memory on one node for %s/%u; most free is %" PRIu64,
			 t->memory, t->role, t->index, best_mem);
	}
}

/* Tries to place every task of job j. On success appends the starts and
 * returns true; on failure restores w from save and explains in wait. */
static bool place_job(const struct sched_input *in, size_t ji, struct work_node *w,
		      struct work_node *save, size_t *used, struct sched_plan *out,
		      size_t *starts_alloc, struct sched_wait *wait)
{
	const struct sched_job *j = &in->jobs[ji];
	size_t nused = 0, first_start = out->nstarts;

	snapshot_work(in, w, save);
	for (size_t ti = 0; ti < j->ntasks; ti++) {
		const struct sched_task *t = &j->tasks[ti];
		size_t pick = SIZE_MAX;
		bool max_hit = false;

		/* nodes this job already uses first, then any other */
		for (size_t u = 0; u < nused && pick == SIZE_MAX; u++)
			if (task_fits(&in->nodes[used[u]], &w[used[u]], t, j->gpu_model))
				pick = used[u];
		if (pick == SIZE_MAX) {
			if (j->max_nodes && nused >= j->max_nodes) {
				max_hit = true;
			} else {
				for (size_t i = 0; i < in->nnodes && pick == SIZE_MAX; i++) {
					bool seen = false;
					for (size_t u = 0; u < nused; u++)
						seen |= used[u] == i;
					if (!seen && task_fits(&in->nodes[i], &w[i], t, j->gpu_model))
						pick = i;
				}
			}
		}
		if (pick == SIZE_MAX) {
			/* explain against what the job's earlier tasks left, then restore */
			explain(in, w, j, t, max_hit, wait);
			for (size_t s = first_start; s < out->nstarts; s++)
				free(out->starts[s].gpus);
			out->nstarts = first_start;
			snapshot_work(in, save, w);
			return false;
		}
		bool seen = false;
		for (size_t u = 0; u < nused; u++)
			seen |= used[u] == pick;
		if (!seen)
			used[nused++] = pick;
		ALLOC_GROW(out->starts, out->nstarts + 1, *starts_alloc);
		struct sched_start *st = &out->starts[out->nstarts++];
		st->job = ji;
		st->task = ti;
		st->node = pick;
		st->ngpus = t->gpus;
		st->gpus = xcalloc(t->gpus ? t->gpus : 1, sizeof(unsigned));
		task_take(&in->nodes[pick], &w[pick], t, j->gpu_model, st->gpus);
	}
	return true;
}

void sched_plan(const struct sched_input *in, struct sched_plan *out)
{
	struct work_node *w = xcalloc(in->nnodes + 1, sizeof(*w));
	struct work_node *save = xcalloc(in->nnodes + 1, sizeof(*save));
	struct order_ctx *order = xcalloc(in->njobs + 1, sizeof(*order));
	size_t *used = xcalloc(in->nnodes + 1, sizeof(*used));
	size_t starts_alloc = 0, waits_alloc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < in->nnodes; i++) {
		const struct sched_node *n = &in->nodes[i];
		w[i].gpu_free = xcalloc(n->ngpus + 1, sizeof(bool));
		save[i].gpu_free = xcalloc(n->ngpus + 1, sizeof(bool));
		for (size_t g = 0; g < n->ngpus; g++)
			w[i].gpu_free[g] = n->gpus[g].free;
		w[i].cpus = n->free_cpus_milli;
		w[i].memory = n->free_memory;
		w[i].limit_memory = n->memory != 0;
	}
	for (size_t i = 0; i < in->njobs; i++) {
		order[i].jobs = in->jobs;
		order[i].idx = i;
	}
	qsort(order, in->njobs, sizeof(*order), cmp_jobs);

	for (size_t k = 0; k < in->njobs; k++) {
		struct sched_wait wait;

		memset(&wait, 0, sizeof(wait));
		if (place_job(in, order[k].idx, w, save, used, out, &starts_alloc, &wait))
			continue;
		wait.job = order[k].idx;
		wait.position = (unsigned)out->nwaits + 1;
		ALLOC_GROW(out->waits, out->nwaits + 1, waits_alloc);
		out->waits[out->nwaits++] = wait;
	}

	for (size_t i = 0; i < in->nnodes; i++) {
		free(w[i].gpu_free);
		free(save[i].gpu_free);
	}
	free(w);
	free(save);
	free(order);
	free(used);
}

void sched_plan_release(struct sched_plan *plan)
{
	for (size_t i = 0; i < plan->nstarts; i++)
		free(plan->starts[i].gpus);
	free(plan->starts);
	free(plan->waits);
	memset(plan, 0, sizeof(*plan));
}

int sched_check_feasible(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, char *field, size_t field_len,
			 char *msg, size_t msg_len)
{
	if (!nnodes)
		return 0;
	for (size_t ti = 0; ti < job->ntasks; ti++) {
		const struct sched_task *t = &job->tasks[ti];
		unsigned best_gpus = 0;
		uint64_t best_cpus = 0, best_mem = 0;
		bool model_seen = false, fits = false;

		for (size_t i = 0; i < nnodes; i++) {
			const struct sched_node *n = &nodes[i];
			unsigned k = 0;

			for (size_t g = 0; g < n->ngpus; g++)
				if (model_matches(job->gpu_model, n->gpus[g].model))
					k++;
			if (k)
				model_seen = true;
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
			snprintf(msg, msg_len, "placement.gpu_model: no node has GPUs of model '%s'",
				 job->gpu_model);
		} else if (best_gpus < t->gpus) {
			snprintf(field, field_len, "tasks.%s.gpus", t->role);
			snprintf(msg, msg_len, "tasks.%s.gpus: %u GPUs per task but the largest node has %u",
				 t->role, t->gpus, best_gpus);
		} else if (best_cpus < t->cpus_milli) {
			snprintf(field, field_len, "tasks.%s.cpus", t->role);
			snprintf(msg, msg_len,
				 "tasks.%s.cpus: %g CPUs per task but the largest node has %g", t->role,
				 t->cpus_milli / 1000.0, best_cpus / 1000.0);
		} else {
			snprintf(field, field_len, "tasks.%s.memory", t->role);
			snprintf(msg, msg_len,
				 "tasks.%s.memory: %" PRIu64 " bytes per task but the largest node has %" PRIu64,
				 t->role, t->memory, best_mem);
		}
		return -1;
	}
	return 0;
}
