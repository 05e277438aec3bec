/* Elastic capacity, decided (elastic.h). */
#include "base/compat.h"
#include "sched/elastic.h"

#include "base/xalloc.h"
#include "sched/nodecopy.h"
#include "sched/place.h"

/* Virtual nodes past this many stand for "more than the pool may have":
 * the never-or-no-room test of a job places it on at most these. */
#define ELASTIC_VIRTUAL_MAX 4096
#define MIN_SZ(a, b) ((size_t)(a) < (size_t)(b) ? (size_t)(a) : (size_t)(b))

static const char *pool_or_default(const char *p)
{
	return p ? p : "default";
}

bool elastic_wait_is_demand(const char *code)
{
	/* the holds of decide.c: a policy's, not a want of resources */
	static const char *const holds[] = { "head", "quota", "behind_preemption" };

	for (size_t i = 0; i < ARRAY_SIZE(holds); i++)
		if (!strcmp(code, holds[i]))
			return false;
	return true;
}

/* The GPUs of one node of the shape, all free (shared by every virtual
 * node: placement copies what is free). Caller frees. */
static struct sched_gpu *shape_gpus(const struct elastic_shape *sh)
{
	struct sched_gpu *g = xcalloc(sh->gpus + 1, sizeof(*g));

	for (unsigned i = 0; i < sh->gpus; i++)
		g[i] = (struct sched_gpu){ .index = i, .model = sh->gpu_model, .free = true,
					   .island = 0, .memory = sh->gpu_memory };
	return g;
}

static struct sched_node shape_node(const struct elastic_pool *p, const struct sched_gpu *gpus)
{
	const struct elastic_shape *sh = p->shape;

	return (struct sched_node){ .name = "(new node)", .schedulable = true, .gpus = gpus,
				    .ngpus = sh->gpus, .cpus_milli = sh->cpus_milli,
				    .memory = sh->memory, .free_cpus_milli = sh->cpus_milli,
				    .free_memory = sh->memory, .pool = p->pool, .labels = sh->labels,
				    .nlabels = sh->nlabels, .containers = sh->containers };
}

/* The planning of one pool: every real node (as free as the decision
 * leaves them; placement keeps to each job's pools), then virtual nodes of
 * every pool with a shape: its pending ones, and new ones, k of this pool
 * and the whole room of each other (a job whose roles span pools is this
 * pool's demand only if the others can be had). */
struct pool_plan {
	const struct elastic_pool *pools;
	size_t npools, p;             /* all the pools, and this one's index */
	struct sched_node *nodes;     /* nreal real, then room for the virtual ones */
	size_t nreal;
	struct sched_gpu **gpus;      /* per pool with a shape: its GPUs, shared by its virtual nodes */
	const struct sched_job **jobs; /* this pool's demand, in queue order */
	size_t njobs;
	bool *placed;                 /* per demand job, by the last count() */
};

/* Appends n virtual nodes of pool q after the first *at of pp->nodes. */
static void add_virtual(struct pool_plan *pp, size_t q, size_t n, size_t *at)
{
	struct sched_node v;

	if (!pp->pools[q].shape)
		return;
	v = shape_node(&pp->pools[q], pp->gpus[q]);
	for (size_t i = 0; i < n; i++)
		pp->nodes[(*at)++] = v;
}

/* How many of the demand jobs place, in order, with k new nodes of this
 * pool; placed[] says which. */
static size_t count(struct pool_plan *pp, size_t k)
{
	struct sched_input in;
	struct place_state *s;
	size_t n = 0, at = pp->nreal;

	for (size_t q = 0; q < pp->npools; q++)
		add_virtual(pp, q, (size_t)pp->pools[q].pending + (q == pp->p ? k : pp->pools[q].room), &at);
	in = (struct sched_input){ .nodes = pp->nodes, .nnodes = at };
	s = place_state_new(&in);
	for (size_t j = 0; j < pp->njobs; j++) {
		pp->placed[j] = sched_place_holds(s, pp->jobs[j], NULL);
		n += pp->placed[j];
	}
	place_state_free(s);
	return n;
}

/* Whether job could run on what is free now plus, of every pool with a
 * shape, as many new nodes as it may ever have. */
static bool fits_alone(const struct pool_plan *pp, const struct sched_job *job)
{
	size_t cap = pp->nreal + 1, at = pp->nreal;
	struct sched_node *nodes;
	struct pool_plan tmp = *pp;
	struct sched_input in;
	struct place_state *s;
	bool ok;

	for (size_t q = 0; q < pp->npools; q++)
		cap += MIN_SZ(pp->pools[q].max, ELASTIC_VIRTUAL_MAX);
	nodes = xcalloc(cap, sizeof(*nodes));
	memcpy(nodes, pp->nodes, pp->nreal * sizeof(*nodes));
	tmp.nodes = nodes;
	for (size_t q = 0; q < pp->npools; q++)
		add_virtual(&tmp, q, MIN_SZ(pp->pools[q].max, ELASTIC_VIRTUAL_MAX), &at);
	in = (struct sched_input){ .nodes = nodes, .nnodes = at };
	s = place_state_new(&in);
	ok = sched_place_holds(s, job, NULL);
	place_state_free(s);
	free(nodes);
	return ok;
}

static bool preempting_for(const struct sched_decision *d, size_t job)
{
	for (size_t k = 0; k < d->npreempts; k++)
		if (d->preempts[k].by == job)
			return true;
	return false;
}

bool elastic_job_uses_pool(const struct sched_job *job, const char *pool)
{
	if (!strcmp(pool_or_default(job->pool), pool))
		return true;
	for (size_t t = 0; job->task_pools && t < job->ntasks; t++)
		if (job->task_pools[t] && !strcmp(job->task_pools[t], pool))
			return true;
	return false;
}

/* How telling a cover is, when a job's roles span pools: the most. */
static int cover_rank(enum elastic_cover c)
{
	static const int rank[] = { [ELASTIC_NOT_DEMAND] = 0, [ELASTIC_NEVER] = 1, [ELASTIC_NO_SHAPE] = 2,
				    [ELASTIC_NO_ROOM] = 3, [ELASTIC_PENDING] = 4, [ELASTIC_NEW] = 5 };
	return rank[c];
}

static void set_cover(enum elastic_cover *cover, size_t i, enum elastic_cover c)
{
	if (cover_rank(c) > cover_rank(cover[i]))
		cover[i] = c;
}

static void plan_pool(const struct sched_world *w, const struct sched_decision *d,
		      const struct sched_nodecopy *c, const struct elastic_pool *pools, size_t npools,
		      size_t p, unsigned *add, unsigned *demand, enum elastic_cover *cover)
{
	const struct elastic_pool *ep = &pools[p];
	const char *pool = pool_or_default(ep->pool);
	size_t *wi = xcalloc(d->nwaits + 1, sizeof(*wi));
	struct pool_plan pp = { .pools = pools, .npools = npools, .p = p };
	size_t nvmax = 0, best, base;
	unsigned k;

	pp.jobs = xcalloc(d->nwaits + 1, sizeof(*pp.jobs));
	pp.placed = xcalloc(d->nwaits + 1, sizeof(*pp.placed));
	for (size_t i = 0; i < d->nwaits; i++) {
		const struct sched_wait *wt = &d->waits[i];
		const struct sched_job *job = &w->jobs[wt->job].job;
		if (!elastic_job_uses_pool(job, pool) || !elastic_wait_is_demand(wt->code) || preempting_for(d, wt->job))
			continue;
		wi[pp.njobs] = i;
		pp.jobs[pp.njobs++] = job;
	}
	*add = 0;
	*demand = 0;
	if (!pp.njobs)
		goto out;
	if (!ep->shape) {
		/* one node tells what the pool's nodes are */
		for (size_t j = 0; j < pp.njobs; j++)
			set_cover(cover, wi[j], ELASTIC_NO_SHAPE);
		*add = !ep->pending && ep->room ? 1 : 0;
		goto out;
	}
	pp.gpus = xcalloc(npools + 1, sizeof(*pp.gpus));
	for (size_t q = 0; q < npools; q++) {
		if (pools[q].shape)
			pp.gpus[q] = shape_gpus(pools[q].shape);
		nvmax += (size_t)pools[q].pending + pools[q].room;
	}
	pp.nodes = xcalloc(c->nnodes + nvmax + 1, sizeof(*pp.nodes));
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].schedulable)
			pp.nodes[pp.nreal++] = c->nodes[i];
	best = count(&pp, ep->room);
	base = count(&pp, 0);
	k = 0;
	if (best > base) {
		/* the fewest new nodes that place as many as the whole room does */
		unsigned lo = 1, hi = ep->room;
		while (lo < hi) {
			unsigned mid = lo + (hi - lo) / 2;
			if (count(&pp, mid) >= best)
				hi = mid;
			else
				lo = mid + 1;
		}
		k = lo;
	}
	{
		/* who the nodes on their way place, then who the new ones add */
		bool *pending = xcalloc(pp.njobs + 1, sizeof(*pending));
		count(&pp, 0);
		memcpy(pending, pp.placed, pp.njobs * sizeof(*pending));
		count(&pp, k);
		for (size_t j = 0; j < pp.njobs; j++) {
			enum elastic_cover cv;
			if (pending[j])
				cv = ep->pending ? ELASTIC_PENDING : ELASTIC_NOT_DEMAND;
			else if (pp.placed[j])
				cv = ELASTIC_NEW;
			else
				cv = fits_alone(&pp, pp.jobs[j]) ? ELASTIC_NO_ROOM : ELASTIC_NEVER;
			set_cover(cover, wi[j], cv);
			*demand += cv == ELASTIC_PENDING || cv == ELASTIC_NEW;
		}
		free(pending);
	}
	*add = k;
out:
	for (size_t q = 0; pp.gpus && q < npools; q++)
		free(pp.gpus[q]);
	free(pp.gpus);
	free(wi);
	free(pp.jobs);
	free(pp.placed);
	free(pp.nodes);
}

void elastic_plan(const struct sched_world *w, const struct sched_decision *d,
		  const struct elastic_pool *pools, size_t npools, struct elastic_plan *out)
{
	struct sched_nodecopy c;
	struct sched_hold *holds = xcalloc(d->nstarts + 1, sizeof(*holds));

	out->add = xcalloc(npools + 1, sizeof(*out->add));
	out->demand = xcalloc(npools + 1, sizeof(*out->demand));
	out->cover = xcalloc(d->nwaits + 1, sizeof(*out->cover));
	/* what the decision's starts take is not free for anyone else */
	for (size_t s = 0; s < d->nstarts; s++) {
		const struct sched_start *st = &d->starts[s];
		const struct sched_task *t = &w->jobs[st->job].job.tasks[st->task];
		holds[s] = (struct sched_hold){ .node = st->node, .gpus = st->gpus, .ngpus = st->ngpus,
						.cpus_milli = t->cpus_milli, .memory = t->memory };
	}
	sched_nodecopy_init(&c, w->nodes, w->nnodes);
	sched_nodecopy_apply(&c, holds, d->nstarts, false);
	for (size_t p = 0; p < npools; p++)
		plan_pool(w, d, &c, pools, npools, p, &out->add[p], &out->demand[p], out->cover);
	sched_nodecopy_release(&c);
	free(holds);
}

void elastic_plan_release(struct elastic_plan *p)
{
	free(p->add);
	free(p->demand);
	free(p->cover);
	memset(p, 0, sizeof(*p));
}

struct idle_rank {
	uint64_t since;
	size_t idx;
};

static int cmp_idle(const void *a, const void *b)
{
	const struct idle_rank *x = a, *y = b;
	if (x->since != y->since)
		return x->since < y->since ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

size_t elastic_scale_down(const struct elastic_node *nodes, size_t n, unsigned min,
			  uint64_t idle_for, uint64_t now, size_t *out)
{
	struct idle_rank *r;
	size_t nr = 0, take;

	if (n <= min)
		return 0;
	r = xcalloc(n + 1, sizeof(*r));
	for (size_t i = 0; i < n; i++)
		if (nodes[i].idle && nodes[i].idle_since <= now && now - nodes[i].idle_since >= idle_for)
			r[nr++] = (struct idle_rank){ nodes[i].idle_since, i };
	sort_array(r, nr, sizeof(*r), cmp_idle);
	take = nr < n - min ? nr : n - min;
	for (size_t i = 0; i < take; i++)
		out[i] = r[i].idx;
	free(r);
	return take;
}
