#include "base/compat.h"
#include "sim/sim.h"

#include <math.h>

#include "base/xalloc.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* numpy's default percentile: linear between closest ranks */
static double percentile(const uint64_t *sorted, size_t n, double q)
{
	if (!n)
		return 0;
	double pos = q / 100.0 * (double)(n - 1);
	size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
	return (double)sorted[lo] + (pos - (double)lo) * (double)(sorted[hi] - sorted[lo]);
}

static void stats_fill(const struct sim_trace *trace, const struct sim_result *res, size_t done,
		       uint64_t busy, unsigned total_gpus, struct sim_stats *st)
{
	uint64_t *jct = xmalloc((trace->njobs + 1) * sizeof(*jct));
	uint64_t last_end = 0, first_submit = trace->njobs ? trace->jobs[0].submit : 0;
	double sum = 0, sumq = 0;
	size_t n = 0;

	for (size_t i = 0; i < trace->njobs; i++) {
		if (res[i].end == UINT64_MAX)
			continue;
		jct[n++] = res[i].jct;
		sum += (double)res[i].jct;
		sumq += (double)res[i].queued;
		if (res[i].end > last_end)
			last_end = res[i].end;
		st->preemptions += res[i].preemptions;
	}
	(void)done;
	sort_array(jct, n, sizeof(*jct), cmp_u64);
	st->jobs = n;
	st->unfinished = trace->njobs - n;
	st->avg_jct = n ? sum / (double)n : 0;
	st->avg_queue = n ? sumq / (double)n : 0;
	st->median_jct = percentile(jct, n, 50);
	st->p95_jct = percentile(jct, n, 95);
	st->p99_jct = percentile(jct, n, 99);
	st->makespan = last_end > first_submit ? last_end - first_submit : 0;
	st->utilisation = st->makespan && total_gpus
				  ? (double)busy / ((double)total_gpus * (double)st->makespan)
				  : 0;
	free(jct);
}

/*
 * The replay's state. A full Philly replay on a small cluster keeps
 * thousands of jobs waiting through millions of events, so nothing here is
 * done per waiting job per event: waiting jobs are accounted only when they
 * are given to the plan or promoted, and the plan is given every running job
 * but only the first waiting jobs of each size, in policy order, that it
 * needs (sched_policy_wait_blocks).
 */
struct wclass {                 /* the waiting jobs that ask for `gpus` GPUs */
	unsigned gpus;
	/* their trace indexes in policy order (sched_policy_cmp): a treap
	 * (struct wnode, per trace job: a job waits in one class at most)
	 * threaded by a list in that order, from first */
	size_t root, first;
	size_t n;
	size_t want;             /* how many of the first the plan is given */
	size_t last;             /* OUT of decide_count: the last one's index in sub */
	struct sched_task *tasks; /* place: the tasks of such a job (owned) */
	size_t ntasks;
};

/* A waiting job's links in its class (struct wclass): a treap, a binary
 * search tree in policy order that is also a max-heap by prio (a hash of
 * the trace index, so a replay is the same every time), so that an insert
 * or a removal costs O(log n) expected; and the list of the class in that
 * order. NONE: no link. */
#define NONE SIZE_MAX

struct wnode {
	size_t left, right, up;
	size_t prev, next;
	uint64_t prio;
};

struct promo {                  /* a waiting job's promotion by ageing */
	uint64_t at;
	size_t tid;
};

/* place: what a running job's tasks hold (gpus owned). */
struct sim_hold {
	struct sched_hold *h;
	size_t n;
};

struct replay {
	const struct sched_policy_conf *conf;
	const struct sim_opts *opts;
	/* the cluster, for the world: nodes of per_node GPUs; with place, a
	 * GPU's free flag is what the running jobs' holds leave */
	struct sched_node *nodes;
	struct sched_gpu *gpus;
	char (*names)[24];
	struct sim_hold *hold;   /* place: per trace job, while it runs */
	struct sched_pjob *pj;   /* per trace job: the policy's view while it waits */
	struct wnode *wn;        /* per trace job: its links while it waits */
	uint64_t *left;          /* per trace job: seconds of work still needed */
	uint64_t *paid;          /* per trace job: the restart penalty of its current run */
	struct wclass *classes;
	size_t nclasses, alloc_classes, nwaiting;
	/* promotions due, a min-heap by time; an entry is stale once its job
	 * is no longer waiting with that promotion time (promo_at) */
	struct promo *heap;
	size_t nheap, alloc_heap;
	uint64_t *promo_at;      /* per trace job; UINT64_MAX: none */
	/* The plan's input, jobs given and their trace indexes: first the
	 * running jobs, whose state lives here while they run (pj[] holds it
	 * while they wait), then copies of the waiting jobs given to this
	 * plan. A running job keeps its index from plan to plan, so the plan
	 * sorts them from its last order in a pass. */
	struct sched_pjob *sub;
	struct sched_world_job *wj; /* the world's view of sub[k] */
	size_t alloc_wj;
	size_t *sub_tid;
	size_t nrunning, nsub, alloc_sub, alloc_sub_tid;
	int *sub_wait;           /* per sub job: its wait's index in the plan, -1 none */
	size_t alloc_sub_wait;
};

/* The first number of waiting jobs of a size the plan is given; doubled
 * while the plan shows it needs more. */
#define WANT_FIRST 2

/* place: a job of c->gpus GPUs as tasks, as the scheme says (sim.h): one
 * when it fits a node, else full nodes and the rest on one more. */
static void shape(const struct replay *r, struct wclass *c)
{
	unsigned per = r->opts->gpus_per_node ? r->opts->gpus_per_node : 1, left = c->gpus;

	c->tasks = xcalloc(c->gpus / per + 2, sizeof(*c->tasks));
	do {
		unsigned g = left < per ? left : per;
		c->tasks[c->ntasks] = (struct sched_task){ .role = "worker",
							   .index = (unsigned)c->ntasks, .gpus = g };
		c->ntasks++;
		left -= g;
	} while (left);
}

static struct wclass *class_of(struct replay *r, unsigned gpus)
{
	for (size_t c = 0; c < r->nclasses; c++)
		if (r->classes[c].gpus == gpus)
			return &r->classes[c];
	ALLOC_GROW(r->classes, r->nclasses + 1, r->alloc_classes);
	memset(&r->classes[r->nclasses], 0, sizeof(r->classes[0]));
	r->classes[r->nclasses].gpus = gpus;
	r->classes[r->nclasses].root = r->classes[r->nclasses].first = NONE;
	shape(r, &r->classes[r->nclasses]);
	return &r->classes[r->nclasses++];
}

/* splitmix64: the treap's priorities from the trace indexes */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The link that points at node x in c: its parent's child or c's root. */
static size_t *link_to(struct replay *r, struct wclass *c, size_t x)
{
	size_t up = r->wn[x].up;

	if (up == NONE)
		return &c->root;
	return r->wn[up].left == x ? &r->wn[up].left : &r->wn[up].right;
}

/* Turns x's child y (left or right) into x's parent, keeping the order. */
static void rotate_up(struct replay *r, struct wclass *c, size_t y)
{
	struct wnode *n = r->wn;
	size_t x = n[y].up, b;

	*link_to(r, c, x) = y;
	n[y].up = n[x].up;
	if (n[x].left == y) {
		b = n[y].right;
		n[x].left = b;
		n[y].right = x;
	} else {
		b = n[y].left;
		n[x].right = b;
		n[y].left = x;
	}
	if (b != NONE)
		n[b].up = x;
	n[x].up = y;
}

static void waiting_add(struct replay *r, size_t i)
{
	struct wclass *c = class_of(r, r->pj[i].gpus);
	struct wnode *n = r->wn;
	size_t up = NONE, *at = &c->root, pred = NONE, succ = NONE;

	/* down to where i goes, the first place whose job orders after it,
	 * noting its neighbours in the order on the way */
	while (*at != NONE) {
		up = *at;
		if (sched_policy_cmp(r->conf, &r->pj[up], &r->pj[i]) < 0) {
			pred = up;
			at = &n[up].right;
		} else {
			succ = up;
			at = &n[up].left;
		}
	}
	*at = i;
	n[i] = (struct wnode){ .left = NONE, .right = NONE, .up = up, .prev = pred, .next = succ,
			       .prio = n[i].prio };
	if (pred != NONE)
		n[pred].next = i;
	else
		c->first = i;
	if (succ != NONE)
		n[succ].prev = i;
	while (n[i].up != NONE && n[n[i].up].prio < n[i].prio)
		rotate_up(r, c, i);
	c->n++;
	r->nwaiting++;
}

/* Takes trace job i out of its class (before sched_policy_started() or a
 * promotion changes its key: the tree is in key order). */
static void waiting_remove(struct replay *r, size_t i)
{
	struct wclass *c = class_of(r, r->pj[i].gpus);
	struct wnode *n = r->wn;
	size_t child;

	/* down to a node with one child at most, then spliced out */
	while (n[i].left != NONE && n[i].right != NONE)
		rotate_up(r, c, n[n[i].left].prio > n[n[i].right].prio ? n[i].left : n[i].right);
	child = n[i].left != NONE ? n[i].left : n[i].right;
	*link_to(r, c, i) = child;
	if (child != NONE)
		n[child].up = n[i].up;
	if (n[i].prev != NONE)
		n[n[i].prev].next = n[i].next;
	else
		c->first = n[i].next;
	if (n[i].next != NONE)
		n[n[i].next].prev = n[i].prev;
	c->n--;
	r->nwaiting--;
}

static bool promo_less(const struct promo *a, const struct promo *b)
{
	return a->at < b->at || (a->at == b->at && a->tid < b->tid);
}

static void heap_push(struct replay *r, uint64_t at, size_t tid)
{
	size_t k = r->nheap++;

	ALLOC_GROW(r->heap, r->nheap, r->alloc_heap);
	r->heap[k].at = at;
	r->heap[k].tid = tid;
	while (k && promo_less(&r->heap[k], &r->heap[(k - 1) / 2])) {
		struct promo tmp = r->heap[k];
		r->heap[k] = r->heap[(k - 1) / 2];
		r->heap[(k - 1) / 2] = tmp;
		k = (k - 1) / 2;
	}
}

static void heap_pop(struct replay *r)
{
	size_t k = 0;

	r->heap[0] = r->heap[--r->nheap];
	for (;;) {
		size_t l = 2 * k + 1, m = k;
		if (l < r->nheap && promo_less(&r->heap[l], &r->heap[m]))
			m = l;
		if (l + 1 < r->nheap && promo_less(&r->heap[l + 1], &r->heap[m]))
			m = l + 1;
		if (m == k)
			break;
		struct promo tmp = r->heap[k];
		r->heap[k] = r->heap[m];
		r->heap[m] = tmp;
		k = m;
	}
}

/* The earliest promotion still due, stale entries dropped; UINT64_MAX none. */
static uint64_t heap_top(struct replay *r)
{
	while (r->nheap) {
		const struct promo *p = &r->heap[0];
		if (r->promo_at[p->tid] == p->at)
			return p->at;
		heap_pop(r);
	}
	return UINT64_MAX;
}

/* Trace job i has just become waiting (arrived or preempted). */
static void wait_begin(struct replay *r, size_t i)
{
	waiting_add(r, i);
	r->promo_at[i] = sched_policy_promotion_at(r->conf, &r->pj[i]);
	if (r->promo_at[i] != UINT64_MAX)
		heap_push(r, r->promo_at[i], i);
}

/* Accounts the waiting jobs whose promotion is due by now, which moves them
 * in their class. Every other waiting job is accounted when it is given to
 * the plan: sched_policy_account() reaches the same state in one step as in
 * many. */
static void promote_due(struct replay *r, uint64_t now)
{
	uint64_t at;

	while ((at = heap_top(r)) <= now) {
		size_t i = r->heap[0].tid;
		heap_pop(r);
		waiting_remove(r, i);
		sched_policy_account(r->conf, &r->pj[i], now);
		wait_begin(r, i);
	}
}

static void sub_room(struct replay *r, size_t n)
{
	size_t had = r->alloc_wj;

	ALLOC_GROW(r->sub, n, r->alloc_sub);
	ALLOC_GROW(r->wj, n, r->alloc_wj);
	ALLOC_GROW(r->sub_tid, n, r->alloc_sub_tid);
	/* world_job sets only the fields it uses: the others stay zero */
	if (r->alloc_wj > had)
		memset(&r->wj[had], 0, (r->alloc_wj - had) * sizeof(r->wj[0]));
}

/* The world's view of job j (trace index i), waiting or running, in w, a
 * slot of r->wj (whose other fields are zero: sub_room). Field by field: a
 * replay sets millions of them. */
static void world_job(struct replay *r, const struct sched_pjob *j, size_t i,
		      struct sched_world_job *w)
{
	w->job.id = j->id;
	w->job.priority = j->priority;
	w->job.submitted_at = j->submitted_at;
	w->running = j->running;
	w->preemptible = true;
	w->holds = NULL;
	w->nholds = 0;
	w->job.tasks = NULL;
	w->job.ntasks = 0;
	if (r->opts->scheme != SIM_SCHEME_PLACE)
		return;
	if (j->running) {
		w->holds = r->hold[i].h;
		w->nholds = r->hold[i].n;
	} else {
		const struct wclass *c = class_of(r, j->gpus);
		w->job.tasks = c->tasks;
		w->job.ntasks = c->ntasks;
	}
}

/* Puts job j (trace index i) among the running jobs. Any waiting copies
 * after them are dropped (the next plan gives them again). */
static void running_add(struct replay *r, const struct sched_pjob *j, size_t i)
{
	sub_room(r, r->nrunning + 1);
	r->sub[r->nrunning] = *j;
	world_job(r, j, i, &r->wj[r->nrunning]);
	r->sub_tid[r->nrunning++] = i;
	r->nsub = r->nrunning;
}

/* Takes running job k out; OUT: *j, its state. The last running job takes
 * its index: one job out of place in the order the plan starts its sort
 * from (sched_policy_plan keeps the last order by index). */
static void running_take(struct replay *r, size_t k, struct sched_pjob *j)
{
	*j = r->sub[k];
	r->nrunning--;
	r->sub[k] = r->sub[r->nrunning];
	r->wj[k] = r->wj[r->nrunning];
	r->sub_tid[k] = r->sub_tid[r->nrunning];
	r->nsub = r->nrunning;
}

static void sub_add(struct replay *r, size_t i, uint64_t now)
{
	sched_policy_account(r->conf, &r->pj[i], now);
	sub_room(r, r->nsub + 1);
	r->sub[r->nsub] = r->pj[i];
	world_job(r, &r->pj[i], i, &r->wj[r->nsub]);
	r->sub_tid[r->nsub++] = i;
}

/* The world of the jobs in sub, at now. */
static struct sched_world world_of(const struct replay *r, uint64_t now)
{
	return (struct sched_world){ .nodes = r->nodes, .nnodes = r->opts->nodes, .jobs = r->wj,
				     .pol = r->sub, .njobs = r->nsub, .policy = r->conf,
				     .now = now, .count = r->opts->scheme == SIM_SCHEME_COUNT,
				     .one_pool = true };
}

/* count: decides over the running jobs and the first waiting jobs of each
 * size, giving a size more until the policy's plan shows that every job of
 * it left out would wait (sched_policy_wait_blocks): the decision is then
 * that of the whole queue. */
static void decide_count(struct replay *r, uint64_t now, struct sched_decision *d)
{
	const struct sched_policy_plan *plan = &d->policy_plan;

	for (size_t c = 0; c < r->nclasses; c++)
		r->classes[c].want = WANT_FIRST;
	for (;;) {
		bool enough = true;

		r->nsub = r->nrunning;
		for (size_t c = 0; c < r->nclasses; c++) {
			struct wclass *wc = &r->classes[c];
			size_t i = wc->first;
			for (size_t x = 0; i != NONE && x < wc->want; x++, i = r->wn[i].next) {
				wc->last = r->nsub;
				sub_add(r, i, now);
			}
		}
		struct sched_world world = world_of(r, now);
		sched_decide(&world, d);

		ALLOC_GROW(r->sub_wait, r->nsub + 1, r->alloc_sub_wait);
		for (size_t k = r->nrunning; k < r->nsub; k++)
			r->sub_wait[k] = -1;
		for (size_t w = 0; w < plan->nwaits; w++)
			r->sub_wait[plan->waits[w].job] = (int)w;
		for (size_t c = 0; c < r->nclasses; c++) {
			struct wclass *wc = &r->classes[c];
			int w;
			if (wc->n <= wc->want)
				continue; /* all of them given */
			w = r->sub_wait[wc->last];
			if (w >= 0 && sched_policy_wait_blocks(r->conf, r->sub, r->nsub,
							       &plan->waits[w]) <= wc->gpus)
				continue;
			wc->want *= 2;
			enough = false;
		}
		if (enough)
			return;
	}
}

/* The checkpoint times of a run that started at `from`, every `every`
 * seconds: the last one by now (0: none yet), and the next after now. */
static uint64_t last_checkpoint(uint64_t from, uint64_t every, uint64_t now)
{
	return now - from >= every ? from + (now - from) / every * every : 0;
}

static uint64_t next_checkpoint(uint64_t from, uint64_t every, uint64_t now)
{
	return from + ((now - from) / every + 1) * every;
}

/* Job j (trace index i), stopped at now: the seconds of work it loses, those
 * since its last checkpoint of this run or, without one, since it resumed
 * and paid its restart penalty; none without checkpoints (the peer's
 * model: a preempted job keeps all its work). */
static uint64_t work_lost(const struct replay *r, const struct sim_opts *opts,
			  const struct sched_pjob *j, size_t i, uint64_t now)
{
	uint64_t from = j->started_at + r->paid[i];

	if (!opts->checkpoint_interval)
		return 0;
	if (j->checkpointed_at >= j->started_at && j->checkpointed_at > from)
		from = j->checkpointed_at;
	return now > from ? now - from : 0;
}

/* place: marks the GPUs of node `node` listed in gpus as free or not. */
static void mark_gpus(struct replay *r, size_t node, const unsigned *gpus, unsigned n, bool free)
{
	unsigned per = r->opts->gpus_per_node;
	for (unsigned g = 0; g < n; g++)
		r->gpus[node * per + gpus[g]].free = free;
}

/* place: trace job i gives back what it holds. */
static void hold_release(struct replay *r, size_t i)
{
	struct sim_hold *h = &r->hold[i];
	for (size_t k = 0; k < h->n; k++) {
		mark_gpus(r, h->h[k].node, h->h[k].gpus, h->h[k].ngpus, true);
		free((void *)h->h[k].gpus);
	}
	free(h->h);
	memset(h, 0, sizeof(*h));
}

/* place: trace job i takes the placement of starts[0..n). */
static void hold_take(struct replay *r, size_t i, const struct sched_start *starts, size_t n)
{
	struct sim_hold *h = &r->hold[i];
	h->h = xcalloc(n + 1, sizeof(*h->h));
	for (size_t k = 0; k < n; k++) {
		unsigned *g = xcalloc(starts[k].ngpus + 1, sizeof(*g));
		memcpy(g, starts[k].gpus, starts[k].ngpus * sizeof(*g));
		h->h[k] = (struct sched_hold){ .node = starts[k].node, .gpus = g,
					       .ngpus = starts[k].ngpus };
		mark_gpus(r, starts[k].node, g, starts[k].ngpus, false);
	}
	h->n = n;
}

/* Applies the decision made at now: preemptions, then starts. */
static void plan_apply(struct replay *r, const struct sched_decision *d, uint64_t now,
		       const struct sim_opts *opts, struct sim_result *res, struct sim_stats *st)
{
	size_t *stop = xmalloc((d->npreempts + d->nstarts + 1) * sizeof(*stop));
	size_t *go = stop + d->npreempts, *first = xmalloc((d->nstarts + 1) * sizeof(*first));
	size_t ngo = 0;

	/* trace indexes first: taking jobs out moves the others in sub */
	for (size_t p = 0; p < d->npreempts; p++)
		stop[p] = r->sub_tid[d->preempts[p].job];
	for (size_t s = 0; s < d->nstarts; s++)
		if (!s || d->starts[s].job != d->starts[s - 1].job) {
			first[ngo] = s;
			go[ngo++] = r->sub_tid[d->starts[s].job];
		}
	first[ngo] = d->nstarts;
	r->nsub = r->nrunning;
	for (size_t p = 0; p < d->npreempts; p++) {
		size_t i = stop[p], k = 0;
		uint64_t lost;
		while (r->sub_tid[k] != i)
			k++;
		running_take(r, k, &r->pj[i]);
		lost = work_lost(r, opts, &r->pj[i], i, now);
		r->left[i] += lost;
		r->pj[i].remaining = r->left[i];
		st->lost_gpu_s += lost * r->pj[i].gpus;
		sched_policy_requeue(&r->pj[i], now);
		res[i].preemptions++;
		if (opts->scheme == SIM_SCHEME_PLACE)
			hold_release(r, i);
		wait_begin(r, i);
	}
	for (size_t s = 0; s < ngo; s++) {
		size_t i = go[s];
		waiting_remove(r, i);
		r->promo_at[i] = UINT64_MAX;
		sched_policy_started(&r->pj[i], now);
		r->pj[i].checkpointed_at = 0; /* none yet in this run */
		r->paid[i] = 0;
		if (res[i].start == UINT64_MAX) {
			res[i].start = now;
		} else if (opts->restart_penalty) {
			r->left[i] += opts->restart_penalty;
			r->paid[i] = opts->restart_penalty;
		}
		if (opts->scheme == SIM_SCHEME_PLACE)
			hold_take(r, i, &d->starts[first[s]], first[s + 1] - first[s]);
		running_add(r, &r->pj[i], i);
	}
	free(stop);
	free(first);
}

/* place: decides over every job, each waiting one accounted to now. True
 * when the jobs ask for more GPUs than the cluster has. */
static bool decide_place(struct replay *r, uint64_t now, struct sched_decision *d)
{
	struct sched_world w;
	uint64_t demand = 0;

	r->nsub = r->nrunning;
	for (size_t c = 0; c < r->nclasses; c++)
		for (size_t i = r->classes[c].first; i != NONE; i = r->wn[i].next)
			sub_add(r, i, now);
	for (size_t k = 0; k < r->nsub; k++)
		demand += r->sub[k].gpus;
	w = world_of(r, now);
	sched_decide(&w, d);
	return demand > (uint64_t)r->opts->nodes * r->opts->gpus_per_node;
}

/*
 * place: when the decision just applied may next change with no arrival,
 * end or promotion (those are events of their own): the next change of a
 * running job (sched_policy_next_change_of: its next level, its protection
 * beginning or ending). Not the decision's next_change: the policy counts
 * GPUs, and its next_change also counts the next level of a job it would
 * start that placement leaves waiting (fragmentation, gangs on whole
 * nodes), which never comes while the job waits. The replay woke there for
 * nothing, and the next plan set the same wake-up again as many seconds
 * later, over and over while the job waited: every 8 s for an 8-GPU job in
 * glas's first level (docs/scheduler.md, Replay speed).
 */
static uint64_t running_next_change(const struct replay *r, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (size_t k = 0; k < r->nrunning; k++) {
		uint64_t at = sched_policy_next_change_of(r->conf, &r->sub[k], now);
		if (at < next)
			next = at;
	}
	return next;
}

/* The cluster: nodes n1, n2, ... of gpus_per_node GPUs, every GPU free. */
static void cluster_new(struct replay *r)
{
	unsigned per = r->opts->gpus_per_node;

	r->nodes = xcalloc(r->opts->nodes + 1, sizeof(*r->nodes));
	r->gpus = xcalloc((size_t)r->opts->nodes * per + 1, sizeof(*r->gpus));
	r->names = xcalloc(r->opts->nodes + 1, sizeof(*r->names));
	for (size_t n = 0; n < r->opts->nodes; n++) {
		snprintf(r->names[n], sizeof(r->names[n]), "n%zu", n + 1);
		for (unsigned g = 0; g < per; g++)
			r->gpus[n * per + g] = (struct sched_gpu){ .index = g, .free = true };
		r->nodes[n] = (struct sched_node){ .name = r->names[n], .schedulable = true,
						   .gpus = &r->gpus[n * per], .ngpus = per };
	}
}

void sim_run(const struct sim_trace *trace, const struct sim_opts *opts,
	     struct sim_result *res, struct sim_stats *st)
{
	const struct sched_policy_conf *conf = &opts->conf;
	unsigned total = opts->nodes * opts->gpus_per_node;
	struct sched_decision d = { 0 };
	struct replay r;
	uint64_t *ran = xcalloc(trace->njobs + 1, sizeof(*ran)); /* seconds run, per job */
	uint64_t now = 0, busy = 0, next_change = UINT64_MAX, every = opts->checkpoint_interval;
	size_t next = 0, done = 0;
	/* checkpoints change plans only where they end a protection */
	bool ckpt_events = every && (conf->need_checkpoint || conf->max_lost_s);

	memset(st, 0, sizeof(*st));
	memset(&r, 0, sizeof(r));
	r.conf = conf;
	r.opts = opts;
	r.hold = xcalloc(trace->njobs + 1, sizeof(*r.hold));
	cluster_new(&r);
	r.pj = xcalloc(trace->njobs + 1, sizeof(*r.pj));
	r.wn = xcalloc(trace->njobs + 1, sizeof(*r.wn));
	for (size_t i = 0; i < trace->njobs; i++)
		r.wn[i].prio = mix(i);
	r.left = xcalloc(trace->njobs + 1, sizeof(*r.left));
	r.paid = xcalloc(trace->njobs + 1, sizeof(*r.paid));
	r.promo_at = xcalloc(trace->njobs + 1, sizeof(*r.promo_at));
	for (size_t i = 0; i < trace->njobs; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].start = res[i].end = UINT64_MAX;
	}

	while (next < trace->njobs || r.nrunning || r.nwaiting) {
		uint64_t t = UINT64_MAX, due;
		bool contended = false;

		/* the next event: an arrival, a completion, a policy change or
		 * a promotion */
		if (next < trace->njobs)
			t = trace->jobs[next].submit;
		for (size_t k = 0; k < r.nrunning; k++)
			if (now + r.left[r.sub_tid[k]] < t)
				t = now + r.left[r.sub_tid[k]];
		if (next_change < t)
			t = next_change;
		for (size_t k = 0; ckpt_events && k < r.nrunning; k++) {
			uint64_t c = next_checkpoint(r.sub[k].started_at, every, now);
			if (c < t)
				t = c;
		}
		if ((due = heap_top(&r)) < t)
			t = due;
		if (t == UINT64_MAX)
			break; /* only jobs that can never run are left */
		if (t < now)
			t = now;

		/* advance the clock: work, service and completions */
		for (size_t k = 0; k < r.nrunning;) {
			size_t i = r.sub_tid[k];
			struct sched_pjob *j = &r.sub[k];
			uint64_t dt = t - now;
			r.left[i] -= dt;
			ran[i] += dt;
			busy += dt * j->gpus;
			sched_policy_account(conf, j, t);
			if (!r.left[i]) {
				res[i].end = t;
				res[i].jct = t - trace->jobs[i].submit;
				res[i].queued = res[i].jct - ran[i];
				done++;
				running_take(&r, k, &r.pj[i]);
				hold_release(&r, i);
				r.pj[i].running = false;
				continue;
			}
			j->remaining = r.left[i];
			if (every)
				j->checkpointed_at = last_checkpoint(j->started_at, every, t);
			k++;
		}
		now = t;
		promote_due(&r, now);
		while (next < trace->njobs && trace->jobs[next].submit <= now) {
			const struct sim_job *sj = &trace->jobs[next];
			struct sched_pjob *j = &r.pj[next];
			sched_policy_job_init(j, sj->id, sj->gpus, sj->submit);
			sched_policy_account(conf, j, now);
			j->remaining = sj->duration;
			r.left[next] = sj->duration;
			wait_begin(&r, next);
			next++;
		}

		if (opts->scheme == SIM_SCHEME_PLACE)
			contended = decide_place(&r, now, &d);
		else
			decide_count(&r, now, &d);
		st->events++;
		next_change = d.next_change;
		/* place: a preemption frees its GPUs now, for a decision now */
		if (opts->scheme == SIM_SCHEME_PLACE && d.npreempts)
			next_change = now;
		plan_apply(&r, &d, now, opts, res, st);
		/* place: the next change of the jobs that do run; when all fit
		 * by count, the decision's own (no level matters then: the plan
		 * says none, and fair, which asks placement, counts no job it
		 * cannot place) */
		if (opts->scheme == SIM_SCHEME_PLACE && !d.npreempts && contended)
			next_change = running_next_change(&r, now);
		if (r.nwaiting > st->peak_queue)
			st->peak_queue = r.nwaiting;
	}
	stats_fill(trace, res, done, busy, total, st);
	sched_decision_release(&d);
	for (size_t i = 0; i < trace->njobs; i++)
		hold_release(&r, i);
	for (size_t c = 0; c < r.nclasses; c++)
		free(r.classes[c].tasks);
	free(r.nodes);
	free(r.gpus);
	free(r.names);
	free(r.hold);
	free(r.wj);
	free(r.classes);
	free(r.heap);
	free(r.sub);
	free(r.sub_tid);
	free(r.sub_wait);
	free(r.pj);
	free(r.wn);
	free(r.left);
	free(r.paid);
	free(r.promo_at);
	free(ran);
}
