/* Start estimates (estimate.h). */
#include "base/compat.h"
#include "sched/estimate.h"

#include "base/xalloc.h"
#include "sched/nodecopy.h"
#include "sched/place.h"

static const char *const est_names[] = {
#define X(name, str) str,
	SCHED_EST_CODES(X)
#undef X
};
static_assert(ARRAY_SIZE(est_names) == SCHED_EST__COUNT, "a name for every estimate code");

const char *sched_est_code_name(enum sched_est_code code)
{
	return code < SCHED_EST__COUNT ? est_names[code] : "unknown";
}

/* A job that holds resources on the timeline: running, or waiting and
 * estimated to start by the time being looked at. */
struct holder {
	uint64_t id;
	const struct sched_hold *holds;
	size_t nholds;
	uint64_t end;            /* 0 = never (no timeout) */
	bool waiting;
	struct sched_hold *owned; /* a waiting job's placement (with its gpus), or NULL */
};

struct timeline {
	struct holder *h;
	size_t nh;
	size_t *ends;            /* holders with an end, sorted by it */
	size_t nends, next;      /* ends[next..) have not ended yet */
};

static void timeline_add(struct timeline *tl, const struct holder *h)
{
	size_t k = tl->nh++, lo = tl->next, hi = tl->nends;

	tl->h[k] = *h;
	if (!h->end)
		return;
	while (lo < hi) { /* after every end <= this one */
		size_t mid = lo + (hi - lo) / 2;
		if (tl->h[tl->ends[mid]].end <= h->end)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&tl->ends[lo + 1], &tl->ends[lo], (tl->nends - lo) * sizeof(*tl->ends));
	tl->ends[lo] = k;
	tl->nends++;
}

/* qsort_r order of holder indexes by end (ctx: the holders). */
static int by_end(const void *a, const void *b, void *ctx)
{
	const struct holder *h = ctx;
	uint64_t x = h[*(const size_t *)a].end, y = h[*(const size_t *)b].end;
	return x < y ? -1 : x > y;
}

/* Which jobs without a timeout job waits for, on cur (where every job with
 * an end has ended): the first of an irredundant set of them, and how
 * many. False when giving them all back does not help (tasks that are
 * being stopped hold what it needs). */
static bool find_blockers(const struct timeline *tl, const struct sched_nodecopy *cur,
			  const struct sched_job *job, struct sched_estimate *e)
{
	struct sched_nodecopy tmp;
	bool *in = xcalloc(tl->nh + 1, sizeof(*in));
	bool ok = false;

	sched_nodecopy_init(&tmp, cur->nodes, cur->nnodes);
	for (size_t k = 0; k < tl->nh && !ok; k++)
		if (!tl->h[k].end) {
			sched_nodecopy_apply(&tmp, tl->h[k].holds, tl->h[k].nholds, true);
			in[k] = true;
			ok = sched_nodecopy_place(&tmp, job, NULL);
		}
	if (ok) {
		/* drop those it can do without, first to last */
		for (size_t k = 0; k < tl->nh; k++) {
			if (!in[k])
				continue;
			sched_nodecopy_apply(&tmp, tl->h[k].holds, tl->h[k].nholds, false);
			if (sched_nodecopy_place(&tmp, job, NULL))
				in[k] = false;
			else
				sched_nodecopy_apply(&tmp, tl->h[k].holds, tl->h[k].nholds, true);
		}
		e->code = SCHED_EST_NO_TIMEOUT;
		e->nblockers = 0;
		for (size_t k = 0; k < tl->nh; k++)
			if (in[k] && !e->nblockers++) {
				e->blocker = tl->h[k].id;
				e->blocker_waiting = tl->h[k].waiting;
			}
	}
	sched_nodecopy_release(&tmp);
	free(in);
	return ok;
}

/* GPUs the job asks for in all. */
static uint64_t job_gpus(const struct sched_job *job)
{
	uint64_t n = 0;
	for (size_t t = 0; t < job->ntasks; t++)
		n += job->tasks[t].gpus;
	return n;
}

/* The free GPUs of c's schedulable nodes: a bound no placement can beat. */
static uint64_t free_gpus(const struct sched_nodecopy *c)
{
	uint64_t n = 0;
	for (size_t i = 0; i < c->nnodes; i++)
		for (size_t g = 0; c->nodes[i].schedulable && g < c->nodes[i].ngpus; g++)
			n += c->gpus[i][g].free;
	return n;
}

/* How many GPUs of schedulable nodes holds stand for. */
static uint64_t held_gpus(const struct sched_nodecopy *c, const struct sched_hold *holds,
			  size_t nholds)
{
	uint64_t n = 0;
	for (size_t h = 0; h < nholds; h++)
		if (holds[h].node < c->nnodes && c->nodes[holds[h].node].schedulable)
			n += holds[h].ngpus;
	return n;
}

/* The sweep's state: cur is what is free at time t (placement's state of
 * it, ps, built when needed and dropped when something is given back). */
struct sweep {
	struct sched_nodecopy cur;
	struct sched_input in;
	struct place_state *ps;
	uint64_t t;
	uint64_t nfree;          /* free_gpus(&cur) */
	size_t work, max_work;   /* nodes visited building placement states, plus placements */
};

/* Places job on the sweep at its time, taking what it gets (OUT: took). */
static bool sweep_place(struct sweep *w, const struct sched_job *job, struct sched_hold *took)
{
	if (!w->ps) {
		w->ps = place_state_new(&w->in);
		w->work += w->cur.nnodes;
	}
	w->work += SCHED_EST_PLACE_WORK;
	if (!sched_place_holds(w->ps, job, took))
		return false;
	sched_nodecopy_apply(&w->cur, took, job->ntasks, false);
	w->nfree -= held_gpus(&w->cur, took, job->ntasks);
	return true;
}

/* Gives back (give) or takes again what holder h holds. */
static void sweep_apply(struct sweep *w, const struct holder *h, bool give)
{
	uint64_t n = held_gpus(&w->cur, h->holds, h->nholds);

	sched_nodecopy_apply(&w->cur, h->holds, h->nholds, give);
	w->nfree = give ? w->nfree + n : w->nfree - n;
	place_state_free(w->ps);
	w->ps = NULL;
}

void sched_estimate_starts(const struct sched_node *nodes, size_t nnodes,
			   const struct sched_est_running *run, size_t nrun,
			   const struct sched_est_waiting *wait, size_t nwait, uint64_t now,
			   size_t max_work, struct sched_estimate *out)
{
	struct timeline tl = { 0 };
	struct sweep w = { .t = now, .max_work = max_work };
	struct sched_estimate stop = { .code = SCHED_EST_OK }; /* what every later job gets */

	tl.h = xcalloc(nrun + nwait + 1, sizeof(*tl.h));
	tl.ends = xcalloc(nrun + nwait + 1, sizeof(*tl.ends));
	for (size_t r = 0; r < nrun; r++) {
		tl.h[tl.nh] = (struct holder){ .id = run[r].id, .holds = run[r].holds,
					       .nholds = run[r].nholds,
					       .end = run[r].end && run[r].end < now ? now : run[r].end };
		if (tl.h[tl.nh].end)
			tl.ends[tl.nends++] = tl.nh;
		tl.nh++;
	}
	qsort_r(tl.ends, tl.nends, sizeof(*tl.ends), by_end, tl.h);
	sched_nodecopy_init(&w.cur, nodes, nnodes);
	w.in = (struct sched_input){ .nodes = w.cur.nodes, .nnodes = nnodes };
	w.nfree = free_gpus(&w.cur);
	for (size_t i = 0; i < nwait; i++) {
		const struct sched_job *job = wait[i].job;
		struct sched_estimate *e = &out[i];
		uint64_t need = job_gpus(job), t0 = w.t;
		size_t next0 = tl.next;

		memset(e, 0, sizeof(*e));
		if (stop.code == SCHED_EST_OK && w.work >= w.max_work)
			stop.code = SCHED_EST_NOT_ESTIMATED;
		if (stop.code != SCHED_EST_OK) {
			*e = stop;
			continue;
		}
		struct sched_hold *took = xcalloc(job->ntasks + 1, sizeof(*took));
		for (;;) {
			if (w.work >= w.max_work) {
				e->code = stop.code = SCHED_EST_NOT_ESTIMATED;
				break;
			}
			if (w.nfree >= need && sweep_place(&w, job, took)) {
				struct holder h = { .id = job->id, .holds = took, .nholds = job->ntasks,
						    .end = wait[i].bound ? w.t + wait[i].bound : 0,
						    .waiting = true, .owned = took };
				timeline_add(&tl, &h);
				e->code = SCHED_EST_OK;
				e->start = w.t;
				took = NULL;
				break;
			}
			if (tl.next < tl.nends) {
				/* on to the next end */
				w.t = tl.h[tl.ends[tl.next]].end;
				while (tl.next < tl.nends && tl.h[tl.ends[tl.next]].end <= w.t)
					sweep_apply(&w, &tl.h[tl.ends[tl.next++]], true);
				continue;
			}
			/* everything with an end has ended: it waits for jobs
			 * that have none, or fits nowhere at all */
			struct sched_nodecopy empty;
			sched_nodecopy_init(&empty, nodes, nnodes);
			sched_nodecopy_clear(&empty);
			w.work += nnodes;
			if (!sched_nodecopy_place(&empty, job, NULL)) {
				/* it holds nobody up: back to where it began */
				e->code = SCHED_EST_NEVER_FITS;
				while (tl.next > next0)
					sweep_apply(&w, &tl.h[tl.ends[--tl.next]], false);
				w.t = t0;
			} else {
				w.work += 2 * tl.nh * nnodes;
				if (!find_blockers(&tl, &w.cur, job, e))
					e->code = SCHED_EST_STOPPING;
				stop = (struct sched_estimate){ .code = SCHED_EST_BEHIND,
								.blocker = job->id };
			}
			sched_nodecopy_release(&empty);
			break;
		}
		free(took); /* NULL when it was placed */
	}
	for (size_t k = 0; k < tl.nh; k++) {
		for (size_t x = 0; tl.h[k].owned && x < tl.h[k].nholds; x++)
			free((void *)tl.h[k].owned[x].gpus);
		free(tl.h[k].owned);
	}
	free(tl.h);
	free(tl.ends);
	place_state_free(w.ps);
	sched_nodecopy_release(&w.cur);
}

void sched_estimate_reason(const struct sched_estimate *e, char *buf, size_t len)
{
	const char *name = sched_est_code_name(e->code);

	switch (e->code) {
	case SCHED_EST_OK:
		snprintf(buf, len, "%s", "");
		break;
	case SCHED_EST_NO_TIMEOUT:
		if (e->nblockers > 1)
			snprintf(buf, len,
				 "%s: job %" PRIu64 " and %u more hold the GPUs it needs and have no timeout",
				 name, e->blocker, e->nblockers - 1);
		else if (e->blocker_waiting)
			snprintf(buf, len,
				 "%s: job %" PRIu64 ", ahead of it, would hold the GPUs it needs and has no timeout",
				 name, e->blocker);
		else
			snprintf(buf, len, "%s: job %" PRIu64 " holds the GPUs it needs and has no timeout",
				 name, e->blocker);
		break;
	case SCHED_EST_BEHIND:
		snprintf(buf, len, "%s: job %" PRIu64 ", ahead of it, has no start estimate", name,
			 e->blocker);
		break;
	case SCHED_EST_NEVER_FITS:
		snprintf(buf, len, "%s: it does not fit on the ready nodes even with no job running",
			 name);
		break;
	case SCHED_EST_STOPPING:
		snprintf(buf, len, "%s: tasks that are being stopped hold the GPUs it needs", name);
		break;
	default:
		snprintf(buf, len, "%s: past the work bound of one scheduling pass's estimates", name);
		break;
	}
}
