/* The scheduler's one decision (decide.h). */
#include "base/compat.h"
#include "sched/decide.h"

#include "base/xalloc.h"
#include "sched/fit.h"
#include "sched/nodecopy.h"
#include "sched/place.h"

static const char *pool_or_default(const char *p)
{
	return p ? p : "default";
}

const struct sched_policy_conf *sched_world_pool_conf(const struct sched_world *w,
						       const char *pool)
{
	pool = pool_or_default(pool);
	for (size_t i = 0; i < w->npools; i++)
		if (!strcmp(pool_or_default(w->pools[i].pool), pool))
			return &w->pools[i].conf;
	return w->policy;
}

static const struct sched_policy_conf *job_conf(const struct sched_world *w, size_t i)
{
	return sched_world_pool_conf(w, w->jobs[i].job.pool);
}

bool sched_new_only_ok(const struct sched_world *w)
{
	for (size_t i = 0; i < w->njobs; i++) {
		enum sched_policy p = job_conf(w, i)->policy;
		if (!w->jobs[i].running && (p == SCHED_POLICY_FIFO || p == SCHED_POLICY_FAIR))
			return false;
	}
	return true;
}

/* A job held back because its pool preempted for a job ranked before it:
 * the GPUs being freed are that job's, not the first comer's. */
#define HELD_PREEMPTING 0xff

/* The decision being built, and what its steps share. */
struct decide {
	const struct sched_world *w;
	struct sched_decision *out;
	size_t alloc_starts, alloc_waits;
	struct sched_job *sj;       /* per world job: placement's view, ranked */
	unsigned char *held;        /* per world job: 1 + the sched_wait_code that holds it
	                             * back, or HELD_PREEMPTING */
	size_t *behind;             /* per world job held HELD_PREEMPTING: the job it lets go first */
	struct sched_victim *vs;    /* per world job: a running job as a victim */
};

static void add_preemption(struct decide *d, size_t job, size_t by, enum sched_preempt_cause cause,
			   const char *policy)
{
	static const char *const prio_names[] = { "low", "normal", "high" };
	const struct sched_world *w = d->w;
	struct sched_preemption *p;
	int prio = w->jobs[by].job.priority;

	ALLOC_GROW(d->out->preempts, d->out->npreempts + 1, d->out->alloc_preempts_);
	p = &d->out->preempts[d->out->npreempts++];
	*p = (struct sched_preemption){ .job = job, .by = by, .cause = cause };
	switch (cause) {
	case SCHED_CAUSE_PRIORITY:
		snprintf(p->reason, sizeof(p->reason), "preempted by job %" PRIu64 " of priority %s",
			 w->jobs[by].job.id,
			 prio >= 0 && (size_t)prio < ARRAY_SIZE(prio_names) ? prio_names[prio] : "?");
		break;
	case SCHED_CAUSE_SHORTER:
		snprintf(p->reason, sizeof(p->reason),
			 "preempted by job %" PRIu64 " (srtf: it has less time left)", w->jobs[by].job.id);
		break;
	case SCHED_CAUSE_SHARE:
		snprintf(p->reason, sizeof(p->reason),
			 "preempted by job %" PRIu64 " (fair: its team holds less of its share)",
			 w->jobs[by].job.id);
		break;
	case SCHED_CAUSE_SERVICE:
		snprintf(p->reason, sizeof(p->reason),
			 "preempted by job %" PRIu64 " (%s: it has had less GPU service)",
			 w->jobs[by].job.id, policy);
		break;
	case SCHED_CAUSE_PROMOTED:
		snprintf(p->reason, sizeof(p->reason),
			 "preempted by job %" PRIu64 " (%s: it waited long enough to be promoted)",
			 w->jobs[by].job.id, policy);
		break;
	}
}

/* Why a policy preempts job for by. */
static enum sched_preempt_cause policy_cause(const struct sched_world *w,
					     const struct sched_policy_conf *conf, size_t job,
					     size_t by)
{
	const char *tj = w->jobs[job].team ? w->jobs[job].team : "";
	const char *tb = w->jobs[by].team ? w->jobs[by].team : "";

	if (w->jobs[by].job.priority > w->jobs[job].job.priority)
		return SCHED_CAUSE_PRIORITY;
	if (conf->policy == SCHED_POLICY_SRTF)
		return SCHED_CAUSE_SHORTER;
	if (conf->policy == SCHED_POLICY_FAIR && strcmp(tj, tb))
		return SCHED_CAUSE_SHARE;
	if (w->pol[by].attained < w->pol[job].attained)
		return SCHED_CAUSE_SERVICE;
	return SCHED_CAUSE_PROMOTED;
}

/* Team index of each job for fair (into teams, built here); OUT: nteams. */
static void pool_teams(const struct sched_world *w, const size_t *idx, size_t n,
		       struct sched_pjob *pj, struct sched_team *teams, const char **names,
		       size_t *nteams)
{
	*nteams = 0;
	for (size_t i = 0; i < n; i++) {
		const char *t = w->jobs[idx[i]].team ? w->jobs[idx[i]].team : "";
		size_t k;
		for (k = 0; k < *nteams && strcmp(names[k], t); k++)
			;
		if (k == *nteams) {
			names[k] = t;
			teams[k] = (struct sched_team){ .weight = 1, .quota = 0 };
			for (size_t x = 0; x < w->nteams; x++)
				if (!strcmp(w->teams[x].team, t))
					teams[k] = (struct sched_team){ w->teams[x].weight, w->teams[x].quota };
			(*nteams)++;
		}
		pj[i].team = (unsigned)k;
	}
}

/* The policy's plan for one pool: its queued jobs (then its running ones)
 * idx[0..n), nqueued of them queued. fifo and fair ask placement. */
static void pool_plan(struct decide *d, const struct sched_policy_conf *pconf, const size_t *idx,
		      size_t n, size_t nqueued, unsigned total, struct sched_policy_plan *plan)
{
	const struct sched_world *w = d->w;
	struct sched_policy_conf conf = *pconf;
	struct sched_pjob *pj = xcalloc(n + 1, sizeof(*pj));
	struct sched_team *teams = xcalloc(n + 1, sizeof(*teams));
	const char **names = xcalloc(n + 1, sizeof(*names));

	for (size_t i = 0; i < n; i++)
		pj[i] = w->pol[idx[i]];
	pool_teams(w, idx, n, pj, teams, names, &conf.nteams);
	conf.teams = teams;
	memset(plan, 0, sizeof(*plan));
	if (!w->count && (conf.policy == SCHED_POLICY_FIFO || conf.policy == SCHED_POLICY_FAIR)) {
		struct sched_fit_job *fj = xcalloc(n + 1, sizeof(*fj));
		struct sched_fitter *fitter;
		struct sched_fit fit;
		for (size_t i = 0; i < n; i++) {
			if (i < nqueued) {
				fj[i].job = &d->sj[idx[i]];
			} else {
				fj[i].holds = w->jobs[idx[i]].holds;
				fj[i].nholds = w->jobs[idx[i]].nholds;
			}
		}
		fitter = sched_fitter_new(w->nodes, w->nnodes, fj, n);
		sched_fitter_oracle(fitter, &fit);
		sched_policy_plan_fit(&conf, pj, n, total, w->now, &fit, plan);
		sched_fitter_free(fitter);
		free(fj);
	} else {
		sched_policy_plan(&conf, pj, n, total, w->now, plan);
	}
	free(pj);
	free(teams);
	free(names);
}

/* A running job as a victim for preempt.h. */
static void victim_of(const struct sched_world *w, size_t i, struct sched_victim *v)
{
	const struct sched_world_job *j = &w->jobs[i];
	*v = (struct sched_victim){ .id = j->job.id, .priority = j->job.priority,
				    .preemptible = j->preemptible, .started_at = w->pol[i].started_at,
				    .holds = j->holds, .nholds = j->nholds };
}

/* Whether, by placement, stopping victims[0..nv) lets the policy's starts
 * run: every one of them, in the policy's order, placed on what is free
 * plus what the victims hold (or, when it starts none, its first waiting
 * job). A count of GPUs may say so where fragmentation does not; then
 * nobody is stopped for nothing. */
static bool victims_let_run(const struct decide *d, const struct sched_policy_plan *plan,
			    const size_t *idx, size_t nqueued, const struct sched_victim *vs,
			    size_t nv)
{
	const struct sched_world *w = d->w;
	struct sched_nodecopy c;
	struct sched_input in;
	struct place_state *ps;
	bool ok = true;

	if (!plan->nstarts)
		return plan->nwaits && plan->waits[0].job < nqueued &&
		       sched_victims_help(w->nodes, w->nnodes, &d->sj[idx[plan->waits[0].job]], vs, nv);
	sched_nodecopy_init(&c, w->nodes, w->nnodes);
	for (size_t k = 0; k < nv; k++)
		sched_nodecopy_apply(&c, vs[k].holds, vs[k].nholds, true);
	in = (struct sched_input){ .nodes = c.nodes, .nnodes = c.nnodes };
	ps = place_state_new(&in);
	for (size_t s = 0; s < plan->nstarts && ok; s++)
		ok = plan->starts[s] < nqueued &&
		     sched_place_holds(ps, &d->sj[idx[plan->starts[s]]], NULL);
	place_state_free(ps);
	sched_nodecopy_release(&c);
	return ok;
}

/* The job the pool's victims are stopped for: the first of the policy's
 * starts, in its order, that placement cannot start on what is free now (or
 * its first waiting job when it starts none). Index into the pool's jobs. */
static size_t beneficiary(const struct decide *d, const struct sched_policy_plan *plan,
			  const size_t *idx)
{
	const struct sched_world *w = d->w;
	struct sched_input in = { .nodes = w->nodes, .nnodes = w->nnodes };
	struct place_state *ps = place_state_new(&in);
	size_t b = plan->nwaits ? plan->waits[0].job : SIZE_MAX;

	for (size_t s = 0; s < plan->nstarts; s++)
		if (!sched_place_holds(ps, &d->sj[idx[plan->starts[s]]], NULL)) {
			b = plan->starts[s];
			break;
		}
	place_state_free(ps);
	return b;
}

/* After its pool preempted for job b (world index), the pool's queued jobs
 * ranked after b wait this time: placement would otherwise give them the
 * GPUs the victims leave (or free GPUs b counts on), and the policy would
 * preempt again for b, over and over. */
static void hold_behind(struct decide *d, const size_t *idx, size_t nqueued, size_t b)
{
	for (size_t k = 0; k < nqueued; k++) {
		size_t q = idx[k];
		if (q != b && !d->held[q] && d->sj[q].rank > d->sj[b].rank) {
			d->held[q] = HELD_PREEMPTING;
			d->behind[q] = b;
		}
	}
}

/* Step 1 for one pool: ranks its queued jobs (ranks count from 1 per pool),
 * marks the ones its policy holds back, keeps its preemptions if they help. */
static void order_pool(struct decide *d, const char *pool, size_t *idx)
{
	const struct sched_world *w = d->w;
	const struct sched_policy_conf *conf = sched_world_pool_conf(w, pool);
	struct sched_policy_plan plan;
	size_t n = 0, nqueued;
	unsigned total = 0;
	uint64_t rank = 1;

	if (conf->policy == SCHED_POLICY_GREEDY && !w->count)
		return; /* placement's own order: priority, then age */
	for (size_t i = 0; i < w->nnodes; i++)
		if (w->nodes[i].schedulable && !strcmp(pool_or_default(w->nodes[i].pool), pool))
			total += (unsigned)w->nodes[i].ngpus;
	for (size_t i = 0; i < w->njobs; i++)
		if (!w->jobs[i].running && !strcmp(pool_or_default(w->jobs[i].job.pool), pool))
			idx[n++] = i;
	nqueued = n;
	for (size_t i = 0; i < w->njobs; i++)
		if (w->jobs[i].running && !strcmp(pool_or_default(w->jobs[i].job.pool), pool))
			idx[n++] = i;
	pool_plan(d, conf, idx, n, nqueued, total, &plan);
	for (size_t s = 0; s < plan.nstarts; s++)
		if (plan.starts[s] < nqueued)
			d->sj[idx[plan.starts[s]]].rank = rank++;
	for (size_t k = 0; k < plan.nwaits; k++) {
		const struct sched_policy_wait *pw = &plan.waits[k];
		if (pw->job >= nqueued)
			continue;
		d->sj[idx[pw->job]].rank = rank++;
		/* held back by the policy itself, not for want of room */
		if (pw->code == SCHED_WAIT_HEAD || pw->code == SCHED_WAIT_QUOTA)
			d->held[idx[pw->job]] = (unsigned char)(pw->code + 1);
	}
	if (plan.next_change < d->out->next_change)
		d->out->next_change = plan.next_change;
	if (w->count) {
		/* counted, not placed: the plan's starts and preemptions stand */
		size_t by = plan.nstarts ? idx[plan.starts[0]]
				: plan.nwaits ? idx[plan.waits[0].job] : SIZE_MAX;
		for (size_t s = 0; s < plan.nstarts; s++) {
			ALLOC_GROW(d->out->starts, d->out->nstarts + 1, d->alloc_starts);
			d->out->starts[d->out->nstarts++] =
				(struct sched_start){ .job = idx[plan.starts[s]], .node = SIZE_MAX };
		}
		for (size_t k = 0; k < plan.npreempts && by != SIZE_MAX; k++) {
			size_t v = idx[plan.preempts[k]];
			add_preemption(d, v, by, policy_cause(w, conf, v, by), sched_policy_name(conf->policy));
		}
	} else if (!w->stopping && plan.npreempts && (plan.nstarts || plan.nwaits)) {
		/* the policy counts GPUs: stop its victims only if, by placement,
		 * that lets the jobs it makes room for run */
		size_t first = plan.nstarts ? plan.starts[0] : plan.waits[0].job;
		struct sched_victim *vs = xcalloc(plan.npreempts + 1, sizeof(*vs));
		size_t *vi = xcalloc(plan.npreempts + 1, sizeof(*vi));
		size_t nv = 0;
		for (size_t k = 0; k < plan.npreempts; k++)
			if (plan.preempts[k] >= nqueued) {
				vi[nv] = idx[plan.preempts[k]];
				victim_of(w, vi[nv], &vs[nv]);
				nv++;
			}
		if (first < nqueued && nv && victims_let_run(d, &plan, idx, nqueued, vs, nv)) {
			size_t b = beneficiary(d, &plan, idx);
			for (size_t k = 0; k < nv; k++)
				add_preemption(d, vi[k], idx[first], policy_cause(w, conf, vi[k], idx[first]),
					       sched_policy_name(conf->policy));
			if (b < nqueued)
				hold_behind(d, idx, nqueued, idx[b]);
		}
		free(vs);
		free(vi);
	}
	sched_policy_plan_release(&plan);
}

/* Step 1: every pool with queued jobs, by its own policy. */
static void order_pools(struct decide *d)
{
	const struct sched_world *w = d->w;
	const char **pools = xcalloc(w->njobs + 1, sizeof(*pools));
	size_t *idx = xcalloc(w->njobs + 1, sizeof(*idx));
	size_t npools = 0;

	for (size_t i = 0; i < w->njobs; i++) {
		const char *p = pool_or_default(w->jobs[i].job.pool);
		size_t k;
		if (w->jobs[i].running)
			continue;
		for (k = 0; k < npools && strcmp(pools[k], p); k++)
			;
		if (k == npools)
			pools[npools++] = p;
	}
	for (size_t k = 0; k < npools; k++)
		order_pool(d, pools[k], idx);
	free(pools);
	free(idx);
}

static struct sched_wait *add_wait(struct decide *d)
{
	ALLOC_GROW(d->out->waits, d->out->nwaits + 1, d->alloc_waits);
	return memset(&d->out->waits[d->out->nwaits++], 0, sizeof(struct sched_wait));
}

/* The reason of a job its policy holds back. */
static void held_wait(struct decide *d, size_t i, unsigned position)
{
	const struct sched_world *w = d->w;
	struct sched_wait *wt = add_wait(d);
	enum sched_wait_code code = (enum sched_wait_code)(d->held[i] - 1);
	const char *team = w->jobs[i].team ? w->jobs[i].team : "";
	unsigned quota = 0;

	wt->job = i;
	wt->position = position;
	if (d->held[i] == HELD_PREEMPTING) {
		snprintf(wt->code, sizeof(wt->code), "behind_preemption");
		snprintf(wt->message, sizeof(wt->message),
			 "jobs are being preempted for job %" PRIu64 ", ahead of it in the queue: "
			 "it goes first",
			 w->jobs[d->behind[i]].job.id);
		return;
	}
	snprintf(wt->code, sizeof(wt->code), "%s", sched_wait_code_name(code));
	if (code == SCHED_WAIT_HEAD) {
		snprintf(wt->message, sizeof(wt->message),
			 "fifo: waits behind the head of the queue (it may only backfill within "
			 "its timeout, and cannot without delaying the head)");
		return;
	}
	for (size_t x = 0; x < w->nteams; x++)
		if (!strcmp(w->teams[x].team, team))
			quota = w->teams[x].quota;
	snprintf(wt->message, sizeof(wt->message), "team '%.100s' holds its quota of %u GPUs", team,
		 quota);
}

struct held_rank {
	uint64_t rank;
	size_t idx;
};

static int cmp_held(const void *a, const void *b)
{
	const struct held_rank *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Step 3: priority preemption for the first waiting job of a pool whose
 * policy does not preempt. waits: placement's, place[k] the world index of
 * its job k. */
static void priority_preemption(struct decide *d, const struct sched_plan *plan,
				const size_t *place)
{
	const struct sched_world *w = d->w;
	size_t nv = 0, *vi = xcalloc(w->njobs + 1, sizeof(*vi)), *out;

	for (size_t i = 0; i < w->njobs; i++)
		if (w->jobs[i].running)
			victim_of(w, i, &d->vs[nv]), vi[nv++] = i;
	out = xcalloc(nv + 1, sizeof(*out));
	for (size_t k = 0; k < plan->nwaits && nv; k++) {
		size_t j = place[plan->waits[k].job];
		enum sched_policy pol = job_conf(w, j)->policy;
		if (pol != SCHED_POLICY_GREEDY && pol != SCHED_POLICY_FIFO)
			continue; /* its pool's policy chooses its victims */
		size_t n = sched_preempt_for(w->nodes, w->nnodes, &d->sj[j], d->vs, nv, out);
		for (size_t v = 0; v < n; v++)
			add_preemption(d, vi[out[v]], j, SCHED_CAUSE_PRIORITY, NULL);
		if (n)
			break;
	}
	free(vi);
	free(out);
}

/* Steps 2 and 3: placement of what the policies did not hold back, then
 * the held jobs' reasons, then priority preemption. */
static void place_queue(struct decide *d)
{
	const struct sched_world *w = d->w;
	struct sched_job *psj = xcalloc(w->njobs + 1, sizeof(*psj));
	size_t *place = xcalloc(w->njobs + 1, sizeof(*place));
	struct held_rank *hr = xcalloc(w->njobs + 1, sizeof(*hr));
	size_t np = 0, nheld = 0;
	struct sched_input in;
	struct sched_plan plan;

	for (size_t i = 0; i < w->njobs; i++) {
		if (w->jobs[i].running)
			continue;
		if (d->held[i]) {
			hr[nheld++] = (struct held_rank){ d->sj[i].rank, i };
		} else {
			place[np] = i;
			psj[np++] = d->sj[i];
		}
	}
	in = (struct sched_input){ .nodes = w->nodes, .nnodes = w->nnodes, .jobs = psj,
				   .njobs = np, .now = w->now };
	sched_plan(&in, &plan);
	/* the plan's starts become the decision's: their GPU arrays move */
	d->out->starts = plan.starts;
	d->out->nstarts = plan.nstarts;
	for (size_t s = 0; s < plan.nstarts; s++)
		d->out->starts[s].job = place[plan.starts[s].job];
	plan.starts = NULL;
	plan.nstarts = 0;
	for (size_t k = 0; k < plan.nwaits; k++) {
		struct sched_wait *wt = add_wait(d);
		*wt = plan.waits[k];
		wt->job = place[plan.waits[k].job];
		if (w->new_only)
			wt->position = 0;
	}
	/* held jobs wait after the others, in their policy's order */
	sort_array(hr, nheld, sizeof(*hr), cmp_held);
	for (size_t k = 0; k < nheld; k++)
		held_wait(d, hr[k].idx, (unsigned)(plan.nwaits + k + 1));
	if (!w->new_only && !w->stopping && !d->out->npreempts && plan.nwaits)
		priority_preemption(d, &plan, place);
	sched_plan_release(&plan);
	free(psj);
	free(place);
	free(hr);
}

/* Frees what a previous decision holds but its scratch and its preempts
 * array, kept empty for the next (a replay preempts at most events). */
static void decision_clear(struct sched_decision *d)
{
	struct sched_policy_plan scratch = d->policy_plan;
	struct sched_preemption *preempts = d->preempts;
	size_t alloc_preempts = d->alloc_preempts_;

	for (size_t i = 0; i < d->nstarts; i++)
		free(d->starts[i].gpus);
	free(d->starts);
	free(d->waits);
	memset(d, 0, sizeof(*d));
	d->policy_plan = scratch;
	d->preempts = preempts;
	d->alloc_preempts_ = alloc_preempts;
	d->next_change = UINT64_MAX;
}

/* The count scheme on one pool: the policy's plan on the world's own
 * arrays (its indexes are the world's), its scratch kept for the next. */
static void count_one_pool(struct decide *d)
{
	const struct sched_world *w = d->w;
	const struct sched_policy_conf *conf = w->policy;
	struct sched_policy_plan *plan = &d->out->policy_plan;
	unsigned total = 0;
	size_t by;

	for (size_t i = 0; i < w->nnodes; i++)
		if (w->nodes[i].schedulable)
			total += (unsigned)w->nodes[i].ngpus;
	sched_policy_plan(conf, w->pol, w->njobs, total, w->now, plan);
	d->out->next_change = plan->next_change;
	d->out->starts = xcalloc(plan->nstarts + 1, sizeof(*d->out->starts));
	for (size_t s = 0; s < plan->nstarts; s++)
		d->out->starts[s] = (struct sched_start){ .job = plan->starts[s], .node = SIZE_MAX };
	d->out->nstarts = plan->nstarts;
	by = plan->nstarts ? plan->starts[0] : plan->nwaits ? plan->waits[0].job : SIZE_MAX;
	for (size_t k = 0; k < plan->npreempts && by != SIZE_MAX; k++)
		add_preemption(d, plan->preempts[k], by, policy_cause(w, conf, plan->preempts[k], by),
			       sched_policy_name(conf->policy));
}

void sched_decide(const struct sched_world *w, struct sched_decision *out)
{
	struct decide d = { .w = w, .out = out };

	decision_clear(out);
	if (w->count && w->one_pool && w->policy->policy != SCHED_POLICY_FAIR) {
		count_one_pool(&d);
		return;
	}
	d.sj = xcalloc(w->njobs + 1, sizeof(*d.sj));
	d.held = xcalloc(w->njobs + 1, 1);
	d.behind = xcalloc(w->njobs + 1, sizeof(*d.behind));
	d.vs = xcalloc(w->njobs + 1, sizeof(*d.vs));
	for (size_t i = 0; i < w->njobs; i++) {
		d.sj[i] = w->jobs[i].job;
		d.sj[i].rank = 0;
	}
	if (!w->new_only)
		order_pools(&d);
	if (!w->count)
		place_queue(&d);
	free(d.sj);
	free(d.held);
	free(d.behind);
	free(d.vs);
}

void sched_decision_release(struct sched_decision *d)
{
	decision_clear(d);
	free(d->preempts);
	sched_policy_plan_release(&d->policy_plan);
	memset(d, 0, sizeof(*d));
}
