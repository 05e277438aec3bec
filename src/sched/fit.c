/* The fit oracle (fit.h). */
#include "base/compat.h"
#include "sched/fit.h"

#include "base/xalloc.h"
#include "sched/place.h"

/* What a job took in this plan, as holds. */
struct took {
	struct sched_hold *holds; /* owned, with their gpus */
	size_t nholds;
};

/* A copy of the nodes whose GPUs and capacity can change. */
struct copy {
	struct sched_node *nodes;
	struct sched_gpu **gpus;
};

struct sched_fitter {
	const struct sched_node *src;
	size_t nnodes;
	const struct sched_fit_job *jobs;
	size_t njobs;
	struct copy now;          /* free now, less what the plan took */
	struct sched_input now_in;
	struct place_state *ps;   /* placement's state of now, while it is current */
	struct copy tmp;          /* scratch for fits_after */
	struct took *took;        /* per job */
};

static void copy_init(struct copy *c, const struct sched_node *nodes, size_t n)
{
	c->nodes = xcalloc(n + 1, sizeof(*c->nodes));
	c->gpus = xcalloc(n + 1, sizeof(*c->gpus));
	for (size_t i = 0; i < n; i++) {
		c->nodes[i] = nodes[i];
		c->gpus[i] = xcalloc(nodes[i].ngpus + 1, sizeof(**c->gpus));
		memcpy(c->gpus[i], nodes[i].gpus, nodes[i].ngpus * sizeof(**c->gpus));
		c->nodes[i].gpus = c->gpus[i];
	}
}

/* dst = src (both copies of the same n nodes). */
static void copy_set(struct copy *dst, const struct copy *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		memcpy(dst->gpus[i], src->gpus[i], src->nodes[i].ngpus * sizeof(**dst->gpus));
		dst->nodes[i].free_cpus_milli = src->nodes[i].free_cpus_milli;
		dst->nodes[i].free_memory = src->nodes[i].free_memory;
	}
}

static void copy_release(struct copy *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c->gpus[i]);
	free(c->gpus);
	free(c->nodes);
}

/* Gives back (give) or takes what holds[0..nholds) stand for on c. */
static void copy_apply(struct copy *c, size_t nnodes, const struct sched_hold *holds,
		       size_t nholds, bool give)
{
	for (size_t h = 0; h < nholds; h++) {
		const struct sched_hold *hold = &holds[h];
		struct sched_node *n;

		if (hold->node >= nnodes)
			continue;
		n = &c->nodes[hold->node];
		for (unsigned g = 0; g < hold->ngpus; g++)
			for (size_t x = 0; x < n->ngpus; x++)
				if (c->gpus[hold->node][x].index == hold->gpus[g])
					c->gpus[hold->node][x].free = give;
		if (give) {
			n->free_cpus_milli += hold->cpus_milli;
			n->free_memory += hold->memory;
		} else {
			n->free_cpus_milli -= hold->cpus_milli < n->free_cpus_milli ? hold->cpus_milli
										 : n->free_cpus_milli;
			n->free_memory -= hold->memory < n->free_memory ? hold->memory : n->free_memory;
		}
	}
}

/* Places job on s; with took, keeps what it was given there as holds (s
 * keeps it taken either way). */
static bool place_in(struct place_state *s, const struct sched_job *job, struct took *took)
{
	struct sched_start *st = xcalloc(job->ntasks + 1, sizeof(*st));
	struct sched_wait why;
	bool ok = place_job(s, job, st, &why);

	if (ok && took) {
		took->holds = xcalloc(job->ntasks + 1, sizeof(*took->holds));
		took->nholds = job->ntasks;
		for (size_t t = 0; t < job->ntasks; t++) {
			const struct sched_task *task = &job->tasks[st[t].task];
			took->holds[t] = (struct sched_hold){ .node = st[t].node, .gpus = st[t].gpus,
							      .ngpus = st[t].ngpus,
							      .cpus_milli = task->cpus_milli,
							      .memory = task->memory };
			st[t].gpus = NULL; /* now the hold's */
		}
	}
	for (size_t t = 0; ok && t < job->ntasks; t++)
		free(st[t].gpus);
	free(st);
	return ok;
}

/* Places job on a fresh state of c (which is left as it was). */
static bool place_on(const struct copy *c, size_t nnodes, const struct sched_job *job)
{
	struct sched_input in = { .nodes = c->nodes, .nnodes = nnodes, .jobs = job, .njobs = 1 };
	struct place_state *s = place_state_new(&in);
	bool ok = place_in(s, job, NULL);

	place_state_free(s);
	return ok;
}

static void took_release(struct took *t)
{
	for (size_t h = 0; h < t->nholds; h++)
		free((void *)t->holds[h].gpus);
	free(t->holds);
	t->holds = NULL;
	t->nholds = 0;
}

static bool op_fits(void *ctx, size_t i, bool take)
{
	struct sched_fitter *f = ctx;
	const struct sched_job *job = i < f->njobs ? f->jobs[i].job : NULL;

	if (!job)
		return false;
	if (!take)
		return place_on(&f->now, f->nnodes, job);
	/* one state for every take: a job that does not fit costs little */
	if (!f->ps)
		f->ps = place_state_new(&f->now_in);
	if (f->took[i].nholds)
		return false; /* taken already: not twice */
	if (!place_in(f->ps, job, &f->took[i]))
		return false;
	copy_apply(&f->now, f->nnodes, f->took[i].holds, f->took[i].nholds, false);
	return true;
}

static void op_give_back(void *ctx, size_t i)
{
	struct sched_fitter *f = ctx;

	if (i >= f->njobs)
		return;
	copy_apply(&f->now, f->nnodes, f->took[i].holds, f->took[i].nholds, true);
	took_release(&f->took[i]);
	/* placement's state cannot give back: it is built again when needed */
	place_state_free(f->ps);
	f->ps = NULL;
}

static bool op_fits_after(void *ctx, size_t i, const size_t *ended, size_t nended)
{
	struct sched_fitter *f = ctx;
	const struct sched_job *job = i < f->njobs ? f->jobs[i].job : NULL;

	if (!job)
		return false;
	copy_set(&f->tmp, &f->now, f->nnodes);
	for (size_t k = 0; k < nended; k++) {
		size_t e = ended[k];
		if (e >= f->njobs)
			continue;
		if (f->took[e].nholds)
			copy_apply(&f->tmp, f->nnodes, f->took[e].holds, f->took[e].nholds, true);
		else
			copy_apply(&f->tmp, f->nnodes, f->jobs[e].holds, f->jobs[e].nholds, true);
	}
	return place_on(&f->tmp, f->nnodes, job);
}

struct sched_fitter *sched_fitter_new(const struct sched_node *nodes, size_t nnodes,
				      const struct sched_fit_job *jobs, size_t njobs)
{
	struct sched_fitter *f = xcalloc(1, sizeof(*f));

	f->src = nodes;
	f->nnodes = nnodes;
	f->jobs = jobs;
	f->njobs = njobs;
	copy_init(&f->now, nodes, nnodes);
	f->now_in = (struct sched_input){ .nodes = f->now.nodes, .nnodes = nnodes };
	copy_init(&f->tmp, nodes, nnodes);
	f->took = xcalloc(njobs + 1, sizeof(*f->took));
	return f;
}

void sched_fitter_free(struct sched_fitter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->njobs; i++)
		took_release(&f->took[i]);
	free(f->took);
	place_state_free(f->ps);
	copy_release(&f->now, f->nnodes);
	copy_release(&f->tmp, f->nnodes);
	free(f);
}

void sched_fitter_oracle(struct sched_fitter *f, struct sched_fit *out)
{
	*out = (struct sched_fit){ .fits = op_fits, .give_back = op_give_back,
				   .fits_after = op_fits_after, .ctx = f };
}
