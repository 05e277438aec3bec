#include "base/compat.h"
#include "sched/place.h"

#include "base/xalloc.h"

#define NONE UINT32_MAX

/* One node's free resources while a plan is built. */
struct pnode {
	uint32_t prev, next;  /* links in the bucket of nodes with nfree free GPUs */
	unsigned nfree;       /* free GPUs (of any model) */
	uint64_t cpus;        /* free millicpus */
	uint64_t memory;      /* free bytes */
	bool limit_memory;    /* false when the node's memory is unknown */
	bool listed;          /* schedulable, hence in a bucket of its pool */
	bool containers;      /* has a container runtime (input's, kept close) */
	uint32_t pool;        /* index into place_state.pools when listed */
	uint64_t mark;        /* == place_state.stamp: the job being placed uses it */
	size_t goff;          /* its GPUs' slots in gfree (input order) */
	size_t ioff;          /* its islands' starts in istart (nisl + 1 entries) */
	unsigned nisl;        /* islands */
};

/* A GPU taken by the job being placed, to give back if the gang fails. */
struct taken {
	uint32_t node;
	uint32_t gpu;         /* position in the node's input GPUs */
};

/* What an attempt ran into, for the reason when it fails. */
struct attempt {
	bool cpu_short;       /* a node had the GPUs but not the CPUs */
	bool mem_short;       /* ... or not the memory */
	uint64_t best_cpus;   /* most free CPUs on a node that had the GPUs */
	uint64_t best_mem;
};

/* The ready nodes of one pool, in buckets by free GPU count 0..maxg. */
struct pool {
	const char *name;     /* borrowed from a node */
	size_t ready;         /* schedulable nodes */
	uint64_t free;        /* their free GPUs */
	size_t ctr_ready;     /* of those, the nodes with a container runtime */
	uint64_t ctr_free;    /* and their free GPUs (what a job with an image can use) */
	uint32_t *head, *tail; /* maxg + 1 lists */
	uint32_t *count;      /* nodes in each list */
	unsigned maxg;        /* the lists are 0..maxg */
};

struct place_state {
	const struct sched_input *in;
	struct pnode *n;
	bool *gfree;          /* per GPU of every node, at n[i].goff */
	uint32_t *gorder;     /* per node at goff: its GPU positions, grouped by island */
	uint32_t *istart;     /* per node at ioff: where island k begins in gorder */
	unsigned maxg;
	size_t nlisted;       /* schedulable nodes */
	uint64_t stamp;
	struct pool *pools;   /* of the schedulable nodes */
	size_t npools, pools_alloc;
	struct pool *cur;     /* the pool of the job being placed */
	/* scratch for one job, grown as needed */
	size_t *order;        /* task indexes, most GPUs first */
	bool *placed;
	size_t tasks_alloc;
	struct taken *taken;
	size_t ntaken, taken_alloc;
	unsigned *isl_a, *isl_b, *isl_take; /* per island of one node */
	bool *isl_used;
	size_t isl_alloc;
	uint32_t *pick;       /* GPU positions chosen on one node */
	size_t pick_alloc;
	/* scratch for a uniform gang over several nodes (place_multi) */
	struct mcand *mc;
	size_t mc_alloc;
	size_t *hist;         /* candidates per capacity, 0..maxg */
	unsigned *misl;       /* per candidate: islands for x, x-1, ..., x-w tasks */
	size_t misl_alloc;
	uint64_t *dp;
	size_t dp_alloc;
	uint16_t *choice;     /* per candidate, nodes, deficit: the tasks it took (0: none) */
	size_t choice_alloc;
};

/* A node that can hold some tasks of a uniform gang. */
struct mcand {
	uint32_t node;
	unsigned x;           /* tasks it can hold (by GPUs, CPUs and memory), <= the gang's */
	unsigned u;           /* its usable free GPUs */
	size_t seq;           /* the order it was found in: ties go to the first */
};

static const char *pool_name(const char *p)
{
	return p && *p ? p : "default";
}

static bool model_matches(const char *want, const char *have)
{
	if (!want || !*want || !strcmp(want, "*"))
		return true;
	return have && !strcmp(want, have);
}

static bool gpu_constrained(const struct sched_job *j)
{
	return !model_matches(j->gpu_model, NULL) || j->gpu_memory;
}

static bool gpu_usable(const struct sched_job *j, const struct sched_gpu *g)
{
	return model_matches(j->gpu_model, g->model) && (!j->gpu_memory || g->memory >= j->gpu_memory);
}

bool place_labels_match(const struct sched_node *n, const struct sched_job *j)
{
	for (size_t k = 0; k < j->nlabels; k++) {
		bool ok = false;
		for (size_t l = 0; l < n->nlabels && !ok; l++)
			ok = !strcmp(n->labels[l].key, j->labels[k].key) &&
			     !strcmp(n->labels[l].value, j->labels[k].value);
		if (!ok)
			return false;
	}
	return true;
}

/* The node-level constraints but the pool (the buckets are per pool). */
static bool node_eligible(const struct sched_node *n, const struct sched_job *j)
{
	if (j->image && !n->containers)
		return false;
	return !j->nlabels || place_labels_match(n, j);
}

/* ---- buckets ---- */

static void bucket_add(struct place_state *s, uint32_t i)
{
	struct pnode *p = &s->n[i];
	struct pool *pl = &s->pools[p->pool];
	unsigned b = p->nfree;

	p->next = NONE;
	p->prev = pl->tail[b];
	if (p->prev != NONE)
		s->n[p->prev].next = i;
	else
		pl->head[b] = i;
	pl->tail[b] = i;
	pl->count[b]++;
}

static void bucket_remove(struct place_state *s, uint32_t i)
{
	struct pnode *p = &s->n[i];
	struct pool *pl = &s->pools[p->pool];
	unsigned b = p->nfree;

	if (p->prev != NONE)
		s->n[p->prev].next = p->next;
	else
		pl->head[b] = p->next;
	if (p->next != NONE)
		s->n[p->next].prev = p->prev;
	else
		pl->tail[b] = p->prev;
	pl->count[b]--;
}

static void set_gpu_free(struct place_state *s, uint32_t i, uint32_t g, bool fr)
{
	struct pnode *p = &s->n[i];

	if (s->gfree[p->goff + g] == fr)
		return;
	s->gfree[p->goff + g] = fr;
	if (p->listed)
		bucket_remove(s, i);
	p->nfree = fr ? p->nfree + 1 : p->nfree - 1;
	if (p->listed) {
		struct pool *pl = &s->pools[p->pool];
		bucket_add(s, i);
		if (fr)
			pl->free++;
		else
			pl->free--;
		if (p->containers)
			pl->ctr_free = fr ? pl->ctr_free + 1 : pl->ctr_free - 1;
	}
}

/* ---- state ---- */

struct place_state *place_state_new(const struct sched_input *in)
{
	struct place_state *s = xcalloc(1, sizeof(*s));
	size_t ngpus = 0, nisl_total = 0;

	s->in = in;
	s->n = xcalloc(in->nnodes + 1, sizeof(*s->n));
	for (size_t i = 0; i < in->nnodes; i++) {
		ngpus += in->nodes[i].ngpus;
		if (in->nodes[i].ngpus > s->maxg)
			s->maxg = (unsigned)in->nodes[i].ngpus;
	}
	s->gfree = xcalloc(ngpus + 1, sizeof(*s->gfree));
	s->gorder = xcalloc(ngpus + 1, sizeof(*s->gorder));
	s->istart = xcalloc(ngpus + in->nnodes + 1, sizeof(*s->istart));
	for (size_t i = 0; i < in->nnodes; i++) {
		const char *name = pool_name(in->nodes[i].pool);
		size_t k = 0;

		if (!in->nodes[i].schedulable)
			continue;
		while (k < s->npools && strcmp(s->pools[k].name, name))
			k++;
		if (k == s->npools) {
			struct pool *pl;
			ALLOC_GROW(s->pools, s->npools + 1, s->pools_alloc);
			pl = &s->pools[s->npools++];
			memset(pl, 0, sizeof(*pl));
			pl->name = name;
			pl->maxg = s->maxg;
			pl->head = xcalloc(s->maxg + 1, sizeof(*pl->head));
			pl->tail = xcalloc(s->maxg + 1, sizeof(*pl->tail));
			pl->count = xcalloc(s->maxg + 1, sizeof(*pl->count));
			for (unsigned b = 0; b <= s->maxg; b++)
				pl->head[b] = pl->tail[b] = NONE;
		}
		s->n[i].pool = (uint32_t)k;
	}

	ngpus = 0;
	for (size_t i = 0; i < in->nnodes; i++) {
		const struct sched_node *n = &in->nodes[i];
		struct pnode *p = &s->n[i];
		uint32_t *ord = &s->gorder[ngpus];

		p->goff = ngpus;
		p->ioff = nisl_total;
		p->cpus = n->free_cpus_milli;
		p->memory = n->free_memory;
		p->limit_memory = n->memory != 0;
		p->containers = n->containers;
		for (size_t g = 0; g < n->ngpus; g++) {
			s->gfree[ngpus + g] = n->gpus[g].free;
			p->nfree += n->gpus[g].free;
			ord[g] = (uint32_t)g;
		}
		/* group GPU positions by island (insertion sort: few GPUs, stable) */
		for (size_t a = 1; a < n->ngpus; a++) {
			uint32_t v = ord[a];
			size_t b = a;
			while (b > 0 && n->gpus[ord[b - 1]].island > n->gpus[v].island) {
				ord[b] = ord[b - 1];
				b--;
			}
			ord[b] = v;
		}
		for (size_t g = 0; g < n->ngpus; g++)
			if (!g || n->gpus[ord[g]].island != n->gpus[ord[g - 1]].island)
				s->istart[nisl_total + p->nisl++] = (uint32_t)g;
		s->istart[nisl_total + p->nisl] = (uint32_t)n->ngpus;
		nisl_total += p->nisl + 1;
		if (p->nisl > s->isl_alloc)
			s->isl_alloc = p->nisl;
		ngpus += n->ngpus;
		p->listed = n->schedulable;
		if (p->listed) {
			bucket_add(s, (uint32_t)i);
			s->nlisted++;
			s->pools[p->pool].ready++;
			s->pools[p->pool].free += p->nfree;
			if (n->containers) {
				s->pools[p->pool].ctr_ready++;
				s->pools[p->pool].ctr_free += p->nfree;
			}
		}
	}
	s->isl_alloc++;
	s->isl_a = xcalloc(s->isl_alloc, sizeof(unsigned));
	s->isl_b = xcalloc(s->isl_alloc, sizeof(unsigned));
	s->isl_take = xcalloc(s->isl_alloc, sizeof(unsigned));
	s->isl_used = xcalloc(s->isl_alloc, sizeof(bool));
	s->hist = xcalloc(s->maxg + 1, sizeof(*s->hist));
	return s;
}

void place_state_free(struct place_state *s)
{
	if (!s)
		return;
	free(s->n);
	free(s->gfree);
	free(s->gorder);
	free(s->istart);
	for (size_t k = 0; k < s->npools; k++) {
		free(s->pools[k].head);
		free(s->pools[k].tail);
		free(s->pools[k].count);
	}
	free(s->pools);
	free(s->order);
	free(s->placed);
	free(s->taken);
	free(s->isl_a);
	free(s->isl_b);
	free(s->isl_take);
	free(s->isl_used);
	free(s->pick);
	free(s->mc);
	free(s->hist);
	free(s->misl);
	free(s->dp);
	free(s->choice);
	free(s);
}

/* ---- one node ---- */

/* Usable free GPUs of node i for job j. */
static unsigned usable_free(const struct place_state *s, const struct sched_job *j, uint32_t i)
{
	const struct sched_node *n = &s->in->nodes[i];
	const struct pnode *p = &s->n[i];
	unsigned k = 0;

	if (!gpu_constrained(j))
		return p->nfree;
	for (size_t g = 0; g < n->ngpus; g++)
		if (s->gfree[p->goff + g] && gpu_usable(j, &n->gpus[g]))
			k++;
	return k;
}

/* Per island of node i: usable free GPUs into fr, usable GPUs (free or not)
 * into cap (either may be NULL). */
static void island_counts(const struct place_state *s, const struct sched_job *j, uint32_t i,
			  unsigned *fr, unsigned *cap)
{
	const struct sched_node *n = &s->in->nodes[i];
	const struct pnode *p = &s->n[i];
	const uint32_t *st = &s->istart[p->ioff];

	for (unsigned k = 0; k < p->nisl; k++) {
		unsigned a = 0, c = 0;
		for (uint32_t x = st[k]; x < st[k + 1]; x++) {
			uint32_t g = s->gorder[p->goff + x];
			if (!gpu_usable(j, &n->gpus[g]))
				continue;
			c++;
			a += s->gfree[p->goff + g];
		}
		if (fr)
			fr[k] = a;
		if (cap)
			cap[k] = c;
	}
}

/* How g GPUs are taken from islands with cnt[k] usable: the largest islands
 * whole while no single island holds the rest, then the smallest island that
 * does (the fewest islands, the last one a best fit). Writes how many to take
 * from each island into take (may be NULL) and returns the number of islands,
 * or UINT_MAX when the islands hold fewer than g. */
static unsigned island_plan(const unsigned *cnt, unsigned nisl, unsigned g, bool *used,
			    unsigned *take)
{
	unsigned nused = 0;

	for (unsigned k = 0; k < nisl; k++) {
		used[k] = false;
		if (take)
			take[k] = 0;
	}
	while (g) {
		unsigned fit = UINT_MAX, big = UINT_MAX;
		for (unsigned k = 0; k < nisl; k++) {
			if (used[k] || !cnt[k])
				continue;
			if (cnt[k] >= g && (fit == UINT_MAX || cnt[k] < cnt[fit]))
				fit = k;
			if (big == UINT_MAX || cnt[k] > cnt[big])
				big = k;
		}
		unsigned k = fit != UINT_MAX ? fit : big;
		if (k == UINT_MAX)
			return UINT_MAX;
		unsigned t = cnt[k] < g ? cnt[k] : g;
		used[k] = true;
		if (take)
			take[k] = t;
		g -= t;
		nused++;
	}
	return nused;
}

/* Takes the tasks sel[0..nsel-1] (indexes into j->tasks) onto node i, which
 * must hold them: GPUs by island_plan, handed out to the tasks in order. */
static void take_on_node(struct place_state *s, const struct sched_job *j, uint32_t i,
			 const size_t *sel, size_t nsel, struct sched_start *out)
{
	const struct sched_node *n = &s->in->nodes[i];
	struct pnode *p = &s->n[i];
	const uint32_t *st = &s->istart[p->ioff];
	unsigned g = 0, npick = 0, at = 0;

	for (size_t k = 0; k < nsel; k++)
		g += j->tasks[sel[k]].gpus;
	ALLOC_GROW(s->pick, g + 1, s->pick_alloc);
	if (g) {
		/* islands in the order island_plan chose them: largest whole first */
		island_counts(s, j, i, s->isl_a, NULL);
		island_plan(s->isl_a, p->nisl, g, s->isl_used, s->isl_take);
		for (unsigned round = 0; round < p->nisl && npick < g; round++) {
			unsigned best = UINT_MAX;
			for (unsigned k = 0; k < p->nisl; k++)
				if (s->isl_take[k] && (best == UINT_MAX || s->isl_take[k] > s->isl_take[best]))
					best = k;
			if (best == UINT_MAX)
				break;
			for (uint32_t x = st[best]; x < st[best + 1] && s->isl_take[best]; x++) {
				uint32_t gp = s->gorder[p->goff + x];
				if (s->gfree[p->goff + gp] && gpu_usable(j, &n->gpus[gp])) {
					s->pick[npick++] = gp;
					s->isl_take[best]--;
				}
			}
			s->isl_take[best] = 0;
		}
	}
	assert(npick == g);
	for (size_t k = 0; k < nsel; k++) {
		const struct sched_task *t = &j->tasks[sel[k]];
		struct sched_start *o = &out[sel[k]];

		o->task = sel[k];
		o->node = i;
		o->ngpus = t->gpus;
		o->gpus = xcalloc(t->gpus ? t->gpus : 1, sizeof(unsigned));
		for (unsigned x = 0; x < t->gpus; x++) {
			uint32_t gp = s->pick[at++];
			o->gpus[x] = n->gpus[gp].index;
			set_gpu_free(s, i, gp, false);
			ALLOC_GROW(s->taken, s->ntaken + 1, s->taken_alloc);
			s->taken[s->ntaken++] = (struct taken){ i, gp };
		}
		p->cpus -= t->cpus_milli;
		if (p->limit_memory)
			p->memory -= t->memory;
		s->placed[sel[k]] = true;
	}
}

/* Whether node i (GPUs aside) has cpus and memory; notes a shortage in a. */
static bool room_for(const struct pnode *p, uint64_t cpus, uint64_t mem, struct attempt *a)
{
	if (p->cpus > a->best_cpus)
		a->best_cpus = p->cpus;
	if (cpus > p->cpus) {
		a->cpu_short = true;
		return false;
	}
	if (p->memory > a->best_mem)
		a->best_mem = p->memory;
	if (p->limit_memory && mem > p->memory) {
		a->mem_short = true;
		return false;
	}
	return true;
}

/* How many of the job's data keys the node holds (a few of each: a scan). */
static unsigned data_held(const struct sched_node *n, const struct sched_job *j)
{
	unsigned held = 0;
	for (size_t k = 0; k < j->ndata_keys; k++)
		for (size_t c = 0; c < n->ncache; c++)
			if (!strcmp(j->data_keys[k], n->cache[c])) {
				held++;
				break;
			}
	return held;
}

/* The node that best holds g GPUs, cpus and mem at once: fewest islands
 * (relative to the fewest that node could ever give), then fewest free GPUs;
 * among nodes equal in both, the one holding most of the job's data. */
static uint32_t find_single(struct place_state *s, const struct sched_job *j, unsigned g,
			    uint64_t cpus, uint64_t mem, struct attempt *a)
{
	uint32_t best = NONE;
	unsigned best_isl = UINT_MAX, best_extra = UINT_MAX, best_held = 0, best_b = 0, scanned = 0;

	for (unsigned b = g; b <= s->maxg; b++) {
		for (uint32_t i = s->cur->head[b]; i != NONE; i = s->n[i].next) {
			const struct pnode *p = &s->n[i];
			unsigned isl = 0, ideal = 0, held = 0;

			if (best != NONE && ++scanned > PLACE_SCAN_CAP)
				return best;
			if (p->mark == s->stamp || !node_eligible(&s->in->nodes[i], j))
				continue;
			if (g && usable_free(s, j, i) < g)
				continue;
			if (!room_for(p, cpus, mem, a))
				continue;
			if (g && p->nisl > 1) {
				island_counts(s, j, i, s->isl_a, s->isl_b);
				isl = island_plan(s->isl_a, p->nisl, g, s->isl_used, NULL);
				ideal = island_plan(s->isl_b, p->nisl, g, s->isl_used, NULL);
			}
			if (j->ndata_keys)
				held = data_held(&s->in->nodes[i], j);
			if (isl - ideal < best_extra || (isl - ideal == best_extra && isl < best_isl) ||
			    (isl - ideal == best_extra && isl == best_isl && b == best_b && held > best_held)) {
				best = i;
				best_isl = isl;
				best_extra = isl - ideal;
				best_held = held;
				best_b = b;
			}
			/* nothing better in this bucket, or above it, that costs nothing else */
			if (!best_extra && best_held == j->ndata_keys)
				return best;
		}
		if (best != NONE && !best_extra)
			return best;
	}
	return best;
}

/* The eligible node not yet used by the job with the most free GPUs on which
 * at least one unplaced task fits; NONE if there is none. */
static uint32_t find_largest(struct place_state *s, const struct sched_job *j, unsigned gmin,
			     struct attempt *a)
{
	for (unsigned b = s->maxg + 1; b-- > gmin;) {
		for (uint32_t i = s->cur->head[b]; i != NONE; i = s->n[i].next) {
			const struct pnode *p = &s->n[i];
			unsigned u;

			if (p->mark == s->stamp || !node_eligible(&s->in->nodes[i], j))
				continue;
			u = usable_free(s, j, i);
			if (u < gmin)
				continue;
			for (size_t k = 0; k < j->ntasks; k++) {
				const struct sched_task *t = &j->tasks[s->order[k]];
				if (!s->placed[s->order[k]] && t->gpus <= u &&
				    room_for(p, t->cpus_milli, t->memory, a))
					return i;
			}
		}
	}
	return NONE;
}

/* Gives back everything the job took. */
static void undo(struct place_state *s, const struct sched_job *j, struct sched_start *out)
{
	for (size_t k = 0; k < s->ntaken; k++)
		set_gpu_free(s, s->taken[k].node, s->taken[k].gpu, true);
	s->ntaken = 0;
	for (size_t t = 0; t < j->ntasks; t++) {
		if (!s->placed[t])
			continue;
		struct pnode *p = &s->n[out[t].node];
		p->cpus += j->tasks[t].cpus_milli;
		if (p->limit_memory)
			p->memory += j->tasks[t].memory;
		free(out[t].gpus);
		out[t].gpus = NULL;
		s->placed[t] = false;
	}
}

/* The free GPUs of pool pl that job j could use by runtime: a job with an
 * image only those of nodes with a container runtime. */
static uint64_t pool_free(const struct pool *pl, const struct sched_job *j)
{
	return j->image ? pl->ctr_free : pl->free;
}

/* ---- a uniform gang on several nodes ---- */

/* Whether every task of j asks the same GPUs (at least one), CPUs and
 * memory: the gangs place_multi() places exactly. */
static bool uniform_gang(const struct sched_job *j)
{
	const struct sched_task *t0 = &j->tasks[0];

	if (j->ntasks < 2 || !t0->gpus)
		return false;
	for (size_t t = 1; t < j->ntasks; t++)
		if (j->tasks[t].gpus != t0->gpus || j->tasks[t].cpus_milli != t0->cpus_milli ||
		    j->tasks[t].memory != t0->memory)
			return false;
	return true;
}

/* How many tasks like t node i can hold with u usable free GPUs, at most T. */
static unsigned node_cap(const struct pnode *p, const struct sched_task *t, unsigned u, unsigned T)
{
	uint64_t x = u / t->gpus;

	if (t->cpus_milli && p->cpus / t->cpus_milli < x)
		x = p->cpus / t->cpus_milli;
	if (p->limit_memory && t->memory && p->memory / t->memory < x)
		x = p->memory / t->memory;
	return x < T ? (unsigned)x : T;
}

/* From hist (candidates per capacity, 1..xmax): the fewest nodes k whose
 * capacities reach T, the capacity ck of the k-th largest and the excess
 * w = (the k largest capacities) - T. False when all of them fall short. */
static bool fewest_nodes(const size_t *hist, unsigned xmax, unsigned T, unsigned *k,
			 unsigned *ck, unsigned *w)
{
	uint64_t sum = 0;
	unsigned n = 0;

	for (unsigned x = xmax; x >= 1; x--) {
		if (!hist[x])
			continue;
		if (sum + (uint64_t)hist[x] * x < T) {
			sum += (uint64_t)hist[x] * x;
			n += (unsigned)hist[x];
			continue;
		}
		unsigned more = (unsigned)((T - sum + x - 1) / x);
		*k = n + more;
		*ck = x;
		*w = (unsigned)(sum + (uint64_t)more * x - T);
		return true;
	}
	return false;
}

static int cmp_mcand(const void *a, const void *b)
{
	const struct mcand *x = a, *y = b;

	if (x->x != y->x)
		return x->x > y->x ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The nodes that could hold tasks of the uniform gang j, into s->mc: the
 * first eligible nodes of each free-GPU bucket, from the fullest down, as
 * many of each as the gang could need of nodes that size, until no smaller
 * bucket could be part of a set of the fewest nodes. */
static size_t multi_candidates(struct place_state *s, const struct sched_job *j, unsigned T,
			       unsigned limit, struct attempt *a)
{
	const struct sched_task *t = &j->tasks[0];
	unsigned sg = t->gpus, xmax = s->maxg / sg;
	size_t n = 0;

	memset(s->hist, 0, (s->maxg + 1) * sizeof(*s->hist));
	for (unsigned b = s->maxg; b >= sg; b--) {
		unsigned k, ck, w, bx = b / sg, need = (T + bx - 1) / bx, got = 0;

		/* a node of b free GPUs holds at most bx tasks: useless once the
		 * fewest nodes are known and bx cannot stand in for the smallest */
		if (fewest_nodes(s->hist, xmax, T, &k, &ck, &w) && bx + w < ck)
			break;
		if (need > limit)
			need = limit;
		for (uint32_t i = s->cur->head[b]; i != NONE && got < need; i = s->n[i].next) {
			const struct pnode *p = &s->n[i];
			unsigned u, x;

			if (!node_eligible(&s->in->nodes[i], j))
				continue;
			u = usable_free(s, j, i);
			if (u < sg || !room_for(p, t->cpus_milli, t->memory, a))
				continue;
			x = node_cap(p, t, u, T);
			ALLOC_GROW(s->mc, n + 1, s->mc_alloc);
			s->mc[n] = (struct mcand){ i, x, u, n };
			n++;
			s->hist[x]++;
			got++;
		}
	}
	return n;
}

/*
 * Places the uniform gang j (uniform_gang) on the fewest nodes, then the
 * fewest islands, then the best fit over the whole set of nodes: the
 * smallest free GPUs of the set in all (the least left over on the nodes it
 * touches), then the set of the smallest nodes, with what is left over kept
 * together. Every node of the set takes at least one task and at most what
 * it can hold; any split of the tasks is considered.
 *
 * A dynamic program over the candidates, largest capacity first: with c the
 * capacities sorted, P(n) the sum of the n largest and k the fewest nodes
 * (P(k-1) < T <= P(k)), a set of n nodes holding t tasks has a deficit
 * P(n) - t that only grows as nodes are added, and must end at exactly
 * w = P(k) - T (< c[k-1] <= the most tasks a node holds). So the states are
 * (nodes, deficit): at most k x (w + 1).
 *
 * On success the tasks are taken and true returned; else s is unchanged and
 * *max_hit says whether the node limit was what failed.
 */
static bool place_multi(struct place_state *s, const struct sched_job *j, unsigned limit,
			struct sched_start *out, struct attempt *a, bool *max_hit)
{
	const unsigned T = (unsigned)j->ntasks, sg = j->tasks[0].gpus, xmax = s->maxg / sg;
	const uint64_t INF = UINT64_MAX;
	unsigned k, ck, w, W;
	size_t n = multi_candidates(s, j, T, limit, a), N;
	uint64_t w1, w2, mg2 = (uint64_t)s->maxg * s->maxg;
	size_t at = 0;

	*max_hit = false;
	if (!fewest_nodes(s->hist, xmax, T, &k, &ck, &w))
		return false;
	if (k > limit) {
		*max_hit = j->max_nodes && limit == j->max_nodes;
		return false;
	}
	sort_array(s->mc, n, sizeof(*s->mc), cmp_mcand);
	/* a candidate that holds fewer than ck - w tasks fits in no set */
	for (N = 0; N < n && s->mc[N].x + w >= ck; N++)
		;
	W = w + 1;
	w2 = 2 * k * mg2 + 1;
	w1 = ((uint64_t)k * s->maxg + 1) * w2;

	/* islands of each candidate for x - d tasks, d = 0..w */
	ALLOC_GROW(s->misl, N * W + 1, s->misl_alloc);
	for (size_t i = 0; i < N; i++) {
		const struct mcand *m = &s->mc[i];
		unsigned nisl = s->n[m->node].nisl;
		island_counts(s, j, m->node, s->isl_a, NULL);
		for (unsigned d = 0; d < W; d++)
			s->misl[i * W + d] = m->x > d ? island_plan(s->isl_a, nisl, (m->x - d) * sg,
								     s->isl_used, NULL)
						      : UINT_MAX;
	}

	ALLOC_GROW(s->dp, (size_t)(k + 1) * W + 1, s->dp_alloc);
	ALLOC_GROW(s->choice, N * (k + 1) * W + 1, s->choice_alloc);
	for (size_t x = 0; x < (size_t)(k + 1) * W; x++)
		s->dp[x] = INF;
	memset(s->choice, 0, N * (k + 1) * W * sizeof(*s->choice));
	s->dp[0] = 0;
#define DP(nn, dd) s->dp[(size_t)(nn) * W + (dd)]
#define CH(ii, nn, dd) s->choice[((ii) * (k + 1) + (nn)) * W + (dd)]
	for (size_t i = 0; i < N; i++) {
		const struct mcand *m = &s->mc[i];
		unsigned top = (unsigned)(i < k - 1 ? i : k - 1);

		for (unsigned nn = top + 1; nn-- > 0;) {
			unsigned cn = s->mc[nn].x; /* the (nn+1)-th largest capacity */
			for (unsigned d = 0; d < W; d++) {
				if (DP(nn, d) == INF)
					continue;
				unsigned ymin = cn > w - d ? cn - (w - d) : 1;
				for (unsigned y = ymin; y <= m->x; y++) {
					unsigned nd = d + cn - y, isl = s->misl[i * W + (m->x - y)];
					uint64_t left = m->u - y * sg;
					uint64_t cost = DP(nn, d) + isl * w1 + m->u * w2 +
							((uint64_t)m->u * m->u - left * left + mg2);
					if (cost < DP(nn + 1, nd)) {
						DP(nn + 1, nd) = cost;
						CH(i, nn + 1, nd) = (uint16_t)y;
					}
				}
			}
		}
	}
	if (DP(k, w) == INF)
		return false;
	/* back from the last candidate: which ones the best set took, and how
	 * many (into x, which is no longer needed); then the tasks go to them in
	 * candidate order, the fullest first */
	for (size_t i = N, nn = k, d = w; i-- > 0;) {
		unsigned y = nn ? CH(i, nn, d) : 0;
		if (y) {
			nn--;
			d -= s->mc[nn].x - y;
		}
		s->mc[i].x = y;
	}
#undef DP
#undef CH
	for (size_t i = 0; i < N; i++) {
		unsigned y = s->mc[i].x;
		if (!y)
			continue;
		take_on_node(s, j, s->mc[i].node, &s->order[at], y, out);
		s->n[s->mc[i].node].mark = s->stamp;
		at += y;
	}
	assert(at == T);
	return true;
}

/* ---- reasons ---- */

/* Which node-level constraint no ready node meets ("" when some node meets
 * them all), with the message. */
static bool unmet_constraint(struct place_state *s, const struct sched_job *j, unsigned g,
			     struct sched_wait *why)
{
	bool labels = false, model = false, memory = false;

	if (!s->nlisted) {
		snprintf(why->code, sizeof(why->code), "no_nodes");
		snprintf(why->message, sizeof(why->message), "no ready nodes");
		return true;
	}
	if (!s->cur) {
		snprintf(why->code, sizeof(why->code), "pool");
		snprintf(why->message, sizeof(why->message), "no ready node in pool '%s'",
			 pool_name(j->pool));
		return true;
	}
	if (j->image && !s->cur->ctr_ready) {
		snprintf(why->code, sizeof(why->code), "no_container_runtime");
		snprintf(why->message, sizeof(why->message),
			 "needs a node with a container runtime for image '%.120s'; "
			 "no ready node in pool '%s' has one", j->image, pool_name(j->pool));
		return true;
	}
	if (!j->nlabels && !(g && gpu_constrained(j)))
		return false;
	for (size_t i = 0; i < s->in->nnodes && !(labels && model && memory); i++) {
		const struct sched_node *n = &s->in->nodes[i];
		bool has_model = !g, has_mem = !g;

		if (!s->n[i].listed || &s->pools[s->n[i].pool] != s->cur || !node_eligible(n, j))
			continue;
		labels = true;
		for (size_t x = 0; x < n->ngpus; x++) {
			if (!model_matches(j->gpu_model, n->gpus[x].model))
				continue;
			has_model = true;
			has_mem |= !j->gpu_memory || n->gpus[x].memory >= j->gpu_memory;
		}
		model |= has_model;
		memory |= has_model && has_mem;
	}
	if (!labels) {
		char buf[160] = "";
		size_t len = 0;
		for (size_t k = 0; k < j->nlabels && len < sizeof(buf); k++)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s=%s", k ? ", " : "",
						j->labels[k].key, j->labels[k].value);
		snprintf(why->code, sizeof(why->code), "labels");
		snprintf(why->message, sizeof(why->message),
			 "no ready node in pool '%s'%s has labels %s", pool_name(j->pool),
			 j->image ? " with a container runtime" : "", buf);
	} else if (!model) {
		snprintf(why->code, sizeof(why->code), "gpu_model");
		snprintf(why->message, sizeof(why->message),
			 "needs GPU model '%s'; no ready node has it", j->gpu_model);
	} else if (!memory) {
		snprintf(why->code, sizeof(why->code), "gpu_memory");
		snprintf(why->message, sizeof(why->message),
			 "needs GPUs with >= %" PRIu64 " MiB each; no ready node has them",
			 j->gpu_memory >> 20);
	} else {
		return false;
	}
	return true;
}

/* The largest usable free block on an eligible node: its size and node. */
static unsigned largest_block(struct place_state *s, const struct sched_job *j, uint32_t *node)
{
	unsigned best = 0;

	*node = NONE;
	for (unsigned b = s->maxg + 1; b-- > 0 && b > best;)
		for (uint32_t i = s->cur->head[b]; i != NONE; i = s->n[i].next) {
			unsigned u;
			if (!node_eligible(&s->in->nodes[i], j))
				continue;
			u = usable_free(s, j, i);
			if (u > best) {
				best = u;
				*node = i;
			}
			if (u == b)
				break;
		}
	return best;
}

static void explain(struct place_state *s, const struct sched_job *j, unsigned g,
		    unsigned limit, bool max_hit, const struct attempt *a, struct sched_wait *why)
{
	unsigned maxtask = 0, block;
	size_t big_cpu = 0, big_mem = 0;
	uint32_t at;
	char where[96];
	int len;

	if (unmet_constraint(s, j, g, why))
		return;
	for (size_t t = 0; t < j->ntasks; t++) {
		if (j->tasks[t].gpus > maxtask)
			maxtask = j->tasks[t].gpus;
		if (j->tasks[t].cpus_milli > j->tasks[big_cpu].cpus_milli)
			big_cpu = t;
		if (j->tasks[t].memory > j->tasks[big_mem].memory)
			big_mem = t;
	}
	block = largest_block(s, j, &at);
	if (block >= maxtask && a->cpu_short) {
		const struct sched_task *t = &j->tasks[big_cpu];
		snprintf(why->code, sizeof(why->code), "insufficient_cpus");
		snprintf(why->message, sizeof(why->message),
			 "needs %" PRIu64 " millicpus on one node for %s/%u; most free is %" PRIu64,
			 t->cpus_milli, t->role, t->index, a->best_cpus);
		return;
	}
	if (block >= maxtask && a->mem_short) {
		const struct sched_task *t = &j->tasks[big_mem];
		snprintf(why->code, sizeof(why->code), "insufficient_memory");
		snprintf(why->message, sizeof(why->message),
			 "needs %" PRIu64 " bytes of memory on one node for %s/%u; most free is %" PRIu64,
			 t->memory, t->role, t->index, a->best_mem);
		return;
	}
	snprintf(why->code, sizeof(why->code), "%s",
		 max_hit && block >= maxtask && pool_free(s->cur, j) >= g ? "too_many_nodes"
									  : "insufficient_gpus");
	if (limit <= 1)
		len = snprintf(why->message, sizeof(why->message), "needs %u GPUs on one node", g);
	else
		len = snprintf(why->message, sizeof(why->message), "needs %u GPUs on <=%u nodes", g,
			       limit);
	if (at != NONE)
		snprintf(where, sizeof(where), "%u on node %s", block, s->in->nodes[at].name);
	else
		snprintf(where, sizeof(where), "0");
	snprintf(why->message + len, sizeof(why->message) - (size_t)len,
		 "; largest free block is %s", where);
}

/* ---- a job ---- */

/* A quick bound: whether the limit nodes of pl with the most free GPUs have
 * g free GPUs between them (a job that fails it cannot fit). */
static bool enough_gpus(const struct pool *pl, const struct sched_job *j, unsigned g,
			unsigned limit)
{
	uint64_t sum = 0;

	if (pool_free(pl, j) < g)
		return false;
	for (unsigned b = (unsigned)pl->maxg + 1; b-- > 0 && limit && sum < g;) {
		uint32_t k = pl->count[b] < limit ? pl->count[b] : limit;
		sum += (uint64_t)k * b;
		limit -= k;
	}
	return sum >= g;
}

static int cmp_gpus_desc(const void *a, const void *b, void *ctx)
{
	const struct sched_job *j = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (j->tasks[x].gpus != j->tasks[y].gpus)
		return j->tasks[x].gpus > j->tasks[y].gpus ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* place_job of a job whose tasks are all in its pool. */
static bool place_one(struct place_state *s, const struct sched_job *j, struct sched_start *out,
		      struct sched_wait *why)
{
	struct attempt a = { 0 };
	size_t nleft = j->ntasks, nused = 0;
	unsigned limit = j->ntasks > UINT_MAX ? UINT_MAX : (unsigned)j->ntasks, g_all = 0;
	bool max_hit = false;

	if (j->max_nodes && j->max_nodes < limit)
		limit = j->max_nodes;
	if (j->ntasks > s->tasks_alloc) {
		s->tasks_alloc = j->ntasks;
		s->order = xrealloc(s->order, s->tasks_alloc * sizeof(*s->order));
		s->placed = xrealloc(s->placed, s->tasks_alloc * sizeof(*s->placed));
	}
	for (size_t t = 0; t < j->ntasks; t++) {
		s->order[t] = t;
		s->placed[t] = false;
		g_all += j->tasks[t].gpus;
		out[t].gpus = NULL;
	}
	s->stamp++;
	s->ntaken = 0;
	s->cur = NULL;
	for (size_t k = 0; k < s->npools && !s->cur; k++)
		if (!strcmp(s->pools[k].name, pool_name(j->pool)))
			s->cur = &s->pools[k];
	/* a job with an image where no node can run one would scan every node */
	if (!s->cur || (j->image && !s->cur->ctr_ready) || !enough_gpus(s->cur, j, g_all, limit)) {
		max_hit = s->cur && j->max_nodes && limit == j->max_nodes;
		goto fail;
	}
	qsort_r(s->order, j->ntasks, sizeof(*s->order), cmp_gpus_desc, (void *)j);

	while (nleft) {
		unsigned g = 0, gmin = UINT_MAX;
		uint64_t cpus = 0, mem = 0;
		uint32_t i;

		for (size_t t = 0; t < j->ntasks; t++) {
			if (s->placed[t])
				continue;
			g += j->tasks[t].gpus;
			cpus += j->tasks[t].cpus_milli;
			mem += j->tasks[t].memory;
			if (j->tasks[t].gpus < gmin)
				gmin = j->tasks[t].gpus;
		}
		i = find_single(s, j, g, cpus, mem, &a);
		if (i != NONE) {
			size_t n = 0;
			for (size_t k = 0; k < j->ntasks; k++)
				if (!s->placed[s->order[k]])
					s->order[n++] = s->order[k];
			take_on_node(s, j, i, s->order, n, out);
			nleft = 0;
			break;
		}
		if (!nused && limit > 1 && uniform_gang(j)) {
			if (place_multi(s, j, limit, out, &a, &max_hit))
				break;
			goto fail;
		}
		if (nused + 1 >= limit) {
			max_hit = j->max_nodes && limit == j->max_nodes;
			goto fail;
		}
		i = find_largest(s, j, gmin, &a);
		if (i == NONE)
			goto fail;
		/* pack, most GPUs first, what fits on i */
		{
			const struct pnode *p = &s->n[i];
			unsigned u = usable_free(s, j, i);
			uint64_t c = p->cpus, m = p->memory;
			size_t n = 0, *picked = xcalloc(nleft, sizeof(size_t));

			for (size_t k = 0; k < j->ntasks; k++) {
				const struct sched_task *t = &j->tasks[s->order[k]];
				if (s->placed[s->order[k]] || t->gpus > u || t->cpus_milli > c ||
				    (p->limit_memory && t->memory > m))
					continue;
				u -= t->gpus;
				c -= t->cpus_milli;
				m -= p->limit_memory ? t->memory : 0;
				picked[n++] = s->order[k];
			}
			take_on_node(s, j, i, picked, n, out);
			s->n[i].mark = s->stamp;
			nleft -= n;
			free(picked);
		}
		nused++;
	}
	s->ntaken = 0;
	return true;

fail:
	undo(s, j, out);
	explain(s, j, g_all, limit, max_hit, &a, why);
	return false;
}

#define MIN_SIZE(a, b) ((a) < (b) ? (a) : (b))

/* Gives back what the placed tasks out[0..n) of j took (GPUs by their
 * index on the node, CPUs, memory), and frees their GPU arrays. */
static void give_back(struct place_state *s, const struct sched_job *j, struct sched_start *out, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const struct sched_task *t = &j->tasks[out[k].task];
		const struct sched_node *node = &s->in->nodes[out[k].node];
		struct pnode *p = &s->n[out[k].node];
		for (unsigned x = 0; x < out[k].ngpus; x++)
			for (size_t g = 0; g < node->ngpus; g++)
				if (node->gpus[g].index == out[k].gpus[x])
					set_gpu_free(s, (uint32_t)out[k].node, (uint32_t)g, true);
		p->cpus += t->cpus_milli;
		if (p->limit_memory)
			p->memory += t->memory;
		free(out[k].gpus);
		out[k].gpus = NULL;
	}
}

/* A job whose roles span pools: each pool's part placed in its pool, all
 * of them or none (the parts placed are given back when one fails). */
bool place_job(struct place_state *s, const struct sched_job *j, struct sched_start *out,
	       struct sched_wait *why)
{
	struct sched_job_part *parts;
	struct sched_start *part_out;
	size_t n, done = 0;
	bool ok = true;

	if (!sched_job_multi_pool(j))
		return place_one(s, j, out, why);
	n = sched_job_split(j, &parts);
	part_out = xcalloc(j->ntasks + 1, sizeof(*part_out));
	for (size_t k = 0; k < n && ok; k++) {
		const struct sched_job *pj = &parts[k].job;
		ok = place_one(s, pj, part_out, why);
		if (!ok) {
			if (k) {
				/* say which role's pool is short */
				char m[sizeof(why->message)];
				int w = snprintf(m, sizeof(m), "role %.40s in pool '%.40s': ", pj->tasks[0].role,
						 pj->pool);
				if (w > 0 && (size_t)w < sizeof(m))
					memcpy(m + w, why->message, MIN_SIZE(strlen(why->message) + 1, sizeof(m) - (size_t)w));
				m[sizeof(m) - 1] = 0;
				memcpy(why->message, m, sizeof(m));
			}
			break;
		}
		for (size_t t = 0; t < pj->ntasks; t++) {
			out[done] = part_out[t];
			out[done++].task = parts[k].task[part_out[t].task];
		}
	}
	if (!ok)
		give_back(s, j, out, done);
	free(part_out);
	sched_job_parts_free(parts, n);
	return ok;
}
