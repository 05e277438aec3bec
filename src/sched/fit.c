/* The fit oracle (fit.h). */
#include "base/compat.h"
#include "sched/fit.h"

#include "base/xalloc.h"
#include "sched/nodecopy.h"
#include "sched/place.h"

/* What a job took in this plan, as holds. */
struct took {
	struct sched_hold *holds; /* owned, with their gpus */
	size_t nholds;
};

struct sched_fitter {
	const struct sched_node *src;
	size_t nnodes;
	const struct sched_fit_job *jobs;
	size_t njobs;
	struct sched_nodecopy now; /* free now, less what the plan took */
	struct sched_input now_in;
	struct place_state *ps;   /* placement's state of now, while it is current */
	struct sched_nodecopy tmp; /* scratch for fits_after */
	struct took *took;        /* per job */
};

/* Places job on s; with took, keeps what it was given there as holds (s
 * keeps it taken either way). */
static bool place_in(struct place_state *s, const struct sched_job *job, struct took *took)
{
	struct sched_hold *holds = took ? xcalloc(job->ntasks + 1, sizeof(*holds)) : NULL;

	if (!sched_place_holds(s, job, holds)) {
		free(holds);
		return false;
	}
	if (took) {
		took->holds = holds;
		took->nholds = job->ntasks;
	}
	return true;
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
		return sched_nodecopy_place(&f->now, job, NULL);
	/* one state for every take: a job that does not fit costs little */
	if (!f->ps)
		f->ps = place_state_new(&f->now_in);
	if (f->took[i].nholds)
		return false; /* taken already: not twice */
	if (!place_in(f->ps, job, &f->took[i]))
		return false;
	sched_nodecopy_apply(&f->now, f->took[i].holds, f->took[i].nholds, false);
	return true;
}

static void op_give_back(void *ctx, size_t i)
{
	struct sched_fitter *f = ctx;

	if (i >= f->njobs)
		return;
	sched_nodecopy_apply(&f->now, f->took[i].holds, f->took[i].nholds, true);
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
	sched_nodecopy_set(&f->tmp, &f->now);
	for (size_t k = 0; k < nended; k++) {
		size_t e = ended[k];
		if (e >= f->njobs)
			continue;
		if (f->took[e].nholds)
			sched_nodecopy_apply(&f->tmp, f->took[e].holds, f->took[e].nholds, true);
		else
			sched_nodecopy_apply(&f->tmp, f->jobs[e].holds, f->jobs[e].nholds, true);
	}
	return sched_nodecopy_place(&f->tmp, job, NULL);
}

struct sched_fitter *sched_fitter_new(const struct sched_node *nodes, size_t nnodes,
				      const struct sched_fit_job *jobs, size_t njobs)
{
	struct sched_fitter *f = xcalloc(1, sizeof(*f));

	f->src = nodes;
	f->nnodes = nnodes;
	f->jobs = jobs;
	f->njobs = njobs;
	sched_nodecopy_init(&f->now, nodes, nnodes);
	f->now_in = (struct sched_input){ .nodes = f->now.nodes, .nnodes = nnodes };
	sched_nodecopy_init(&f->tmp, nodes, nnodes);
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
	sched_nodecopy_release(&f->now);
	sched_nodecopy_release(&f->tmp);
	free(f);
}

void sched_fitter_oracle(struct sched_fitter *f, struct sched_fit *out)
{
	*out = (struct sched_fit){ .fits = op_fits, .give_back = op_give_back,
				   .fits_after = op_fits_after, .ctx = f };
}
