/* Preemption for priority (preempt.h). */
#include "base/compat.h"
#include "sched/preempt.h"

#include "base/xalloc.h"

/* A copy of the snapshot whose GPUs and capacity can be given back. */
struct trial {
	struct sched_node *nodes;
	struct sched_gpu **gpus;
	size_t nnodes;
};

static void trial_init(struct trial *t, const struct sched_node *nodes, size_t nnodes)
{
	t->nnodes = nnodes;
	t->nodes = xcalloc(nnodes + 1, sizeof(*t->nodes));
	t->gpus = xcalloc(nnodes + 1, sizeof(*t->gpus));
	for (size_t i = 0; i < nnodes; i++) {
		t->nodes[i] = nodes[i];
		t->gpus[i] = xcalloc(nodes[i].ngpus + 1, sizeof(**t->gpus));
		memcpy(t->gpus[i], nodes[i].gpus, nodes[i].ngpus * sizeof(**t->gpus));
		t->nodes[i].gpus = t->gpus[i];
	}
}

static void trial_release(struct trial *t)
{
	for (size_t i = 0; i < t->nnodes; i++)
		free(t->gpus[i]);
	free(t->gpus);
	free(t->nodes);
}

/* Gives back (sign > 0) or takes again (sign < 0) what v holds. */
static void trial_apply(struct trial *t, const struct sched_victim *v, int sign)
{
	for (size_t h = 0; h < v->nholds; h++) {
		const struct sched_hold *hold = &v->holds[h];
		struct sched_node *n;
		if (hold->node >= t->nnodes)
			continue;
		n = &t->nodes[hold->node];
		for (unsigned g = 0; g < hold->ngpus; g++)
			for (size_t x = 0; x < n->ngpus; x++)
				if (t->gpus[hold->node][x].index == hold->gpus[g])
					t->gpus[hold->node][x].free = sign > 0;
		if (sign > 0) {
			n->free_cpus_milli += hold->cpus_milli;
			n->free_memory += hold->memory;
		} else {
			n->free_cpus_milli -= hold->cpus_milli;
			n->free_memory -= hold->memory;
		}
	}
}

static bool trial_fits(const struct trial *t, const struct sched_job *job)
{
	struct sched_input in = { .nodes = t->nodes, .nnodes = t->nnodes, .jobs = job, .njobs = 1 };
	struct sched_plan plan;
	bool fits;
	sched_plan(&in, &plan);
	fits = plan.nstarts > 0;
	sched_plan_release(&plan);
	return fits;
}

/* A candidate with its sort keys (qsort takes no context). */
struct cand {
	size_t idx;
	int priority;
	uint64_t started_at, id;
};

/* Victim order: lowest priority, then the most recently started, then id. */
static int cmp_cands(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	if (x->started_at != y->started_at)
		return x->started_at > y->started_at ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* GPUs free on schedulable nodes, and the GPUs the job asks for. */
static unsigned free_gpus(const struct sched_node *nodes, size_t nnodes)
{
	unsigned n = 0;
	for (size_t i = 0; i < nnodes; i++)
		for (size_t g = 0; nodes[i].schedulable && g < nodes[i].ngpus; g++)
			n += nodes[i].gpus[g].free;
	return n;
}

static unsigned job_gpus(const struct sched_job *job)
{
	unsigned n = 0;
	for (size_t t = 0; t < job->ntasks; t++)
		n += job->tasks[t].gpus;
	return n;
}

static unsigned victim_gpus(const struct sched_victim *v)
{
	unsigned n = 0;
	for (size_t h = 0; h < v->nholds; h++)
		n += v->holds[h].ngpus;
	return n;
}

size_t sched_preempt_for(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, const struct sched_victim *running,
			 size_t nrunning, size_t *out)
{
	struct cand *cand = xcalloc(nrunning + 1, sizeof(*cand));
	size_t ncand = 0, nout = 0;
	unsigned need = job_gpus(job), have = free_gpus(nodes, nnodes), could = have;
	struct trial t;
	bool fits = false;

	for (size_t i = 0; i < nrunning; i++)
		if (running[i].preemptible && running[i].priority < job->priority) {
			cand[ncand++] = (struct cand){ i, running[i].priority, running[i].started_at,
						       running[i].id };
			could += victim_gpus(&running[i]);
		}
	/* placement is only asked once the GPUs could add up: a job that every
	 * candidate together cannot make room for costs no trial at all */
	if (!ncand || could < need) {
		free(cand);
		return 0;
	}
	sort_array(cand, ncand, sizeof(*cand), cmp_cands);
	trial_init(&t, nodes, nnodes);
	if (trial_fits(&t, job))
		goto out; /* it fits already: nothing to stop */
	for (size_t k = 0; k < ncand && !fits; k++) {
		trial_apply(&t, &running[cand[k].idx], +1);
		out[nout++] = cand[k].idx;
		have += victim_gpus(&running[cand[k].idx]);
		fits = have >= need && trial_fits(&t, job);
	}
	if (!fits) {
		nout = 0;
		goto out;
	}
	/* give back the victims the job does not need, latest first */
	for (size_t k = nout; k-- > 0;) {
		trial_apply(&t, &running[out[k]], -1);
		if (trial_fits(&t, job)) {
			memmove(&out[k], &out[k + 1], (nout - k - 1) * sizeof(*out));
			nout--;
		} else {
			trial_apply(&t, &running[out[k]], +1);
		}
	}
out:
	trial_release(&t);
	free(cand);
	return nout;
}

bool sched_victims_help(const struct sched_node *nodes, size_t nnodes, const struct sched_job *job,
			const struct sched_victim *victims, size_t nvictims)
{
	struct trial t;
	bool fits;

	trial_init(&t, nodes, nnodes);
	for (size_t i = 0; i < nvictims; i++)
		trial_apply(&t, &victims[i], +1);
	fits = trial_fits(&t, job);
	trial_release(&t);
	return fits;
}
