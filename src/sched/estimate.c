/* Start estimates (estimate.h). */
#include "base/compat.h"
#include "sched/estimate.h"

#include "base/xalloc.h"
#include "sched/nodecopy.h"

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
	size_t k = tl->nh++;

	tl->h[k] = *h;
	if (!h->end)
		return;
	size_t at = tl->nends;
	while (at > tl->next && tl->h[tl->ends[at - 1]].end > h->end) {
		tl->ends[at] = tl->ends[at - 1];
		at--;
	}
	tl->ends[at] = k;
	tl->nends++;
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

void sched_estimate_starts(const struct sched_node *nodes, size_t nnodes,
			   const struct sched_est_running *run, size_t nrun,
			   const struct sched_est_waiting *wait, size_t nwait, uint64_t now,
			   size_t max_tries, struct sched_estimate *out)
{
	struct timeline tl = { 0 };
	struct sched_nodecopy cur, empty;
	uint64_t t = now;        /* the time looked at: no later job starts before it */
	size_t tries = 0;
	struct sched_estimate stop = { .code = SCHED_EST_OK }; /* what every later job gets */

	tl.h = xcalloc(nrun + nwait + 1, sizeof(*tl.h));
	tl.ends = xcalloc(nrun + nwait + 1, sizeof(*tl.ends));
	for (size_t r = 0; r < nrun; r++) {
		struct holder h = { .id = run[r].id, .holds = run[r].holds, .nholds = run[r].nholds,
				    .end = run[r].end && run[r].end < now ? now : run[r].end };
		timeline_add(&tl, &h);
	}
	sched_nodecopy_init(&cur, nodes, nnodes);
	sched_nodecopy_init(&empty, nodes, nnodes);
	sched_nodecopy_clear(&empty);
	for (size_t i = 0; i < nwait; i++) {
		const struct sched_job *job = wait[i].job;
		struct sched_estimate *e = &out[i];

		memset(e, 0, sizeof(*e));
		if (stop.code != SCHED_EST_OK) {
			*e = stop;
			continue;
		}
		if (tries >= max_tries) {
			e->code = stop.code = SCHED_EST_NOT_ESTIMATED;
			continue;
		}
		tries++;
		if (!sched_nodecopy_place(&empty, job, NULL)) {
			e->code = SCHED_EST_NEVER_FITS; /* holds nobody up */
			continue;
		}
		struct sched_hold *took = xcalloc(job->ntasks + 1, sizeof(*took));
		for (;;) {
			if (tries >= max_tries) {
				e->code = stop.code = SCHED_EST_NOT_ESTIMATED;
				break;
			}
			tries++;
			if (sched_nodecopy_place(&cur, job, took)) {
				struct holder h = { .id = job->id, .holds = took, .nholds = job->ntasks,
						    .end = wait[i].bound ? t + wait[i].bound : 0,
						    .waiting = true, .owned = took };
				sched_nodecopy_apply(&cur, took, job->ntasks, false);
				timeline_add(&tl, &h);
				e->code = SCHED_EST_OK;
				e->start = t;
				took = NULL;
				break;
			}
			if (tl.next == tl.nends) {
				/* everything with an end has ended: it waits for
				 * jobs that have none */
				if (!find_blockers(&tl, &cur, job, e))
					e->code = SCHED_EST_STOPPING;
				stop = (struct sched_estimate){ .code = SCHED_EST_BEHIND,
								.blocker = job->id };
				break;
			}
			t = tl.h[tl.ends[tl.next]].end;
			while (tl.next < tl.nends && tl.h[tl.ends[tl.next]].end <= t) {
				const struct holder *h = &tl.h[tl.ends[tl.next++]];
				sched_nodecopy_apply(&cur, h->holds, h->nholds, true);
			}
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
	sched_nodecopy_release(&cur);
	sched_nodecopy_release(&empty);
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
