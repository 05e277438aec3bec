#include "base/compat.h"
#include "sim/sim.h"

#include <math.h>

#include "base/xalloc.h"

/* The jobs in the system (arrived, not finished), kept compact: pj[k] is the
 * policy's view of trace job tid[k]; left[k] the seconds of work it still
 * needs as of pj[k].accounted_at. */
struct active {
	struct sched_pjob *pj;
	size_t *tid;
	uint64_t *left;
	size_t n;
};

static void active_remove(struct active *a, size_t k)
{
	a->n--;
	a->pj[k] = a->pj[a->n];
	a->tid[k] = a->tid[a->n];
	a->left[k] = a->left[a->n];
}

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

void sim_run(const struct sim_trace *trace, const struct sim_opts *opts,
	     struct sim_result *res, struct sim_stats *st)
{
	const struct sched_policy_conf *conf = &opts->conf;
	unsigned total = opts->nodes * opts->gpus_per_node;
	struct sched_policy_plan plan;
	struct active a;
	uint64_t *ran = xcalloc(trace->njobs + 1, sizeof(*ran)); /* seconds run, per job */
	uint64_t now = 0, busy = 0, next_change = UINT64_MAX;
	size_t next = 0, done = 0;

	memset(st, 0, sizeof(*st));
	memset(&plan, 0, sizeof(plan));
	a.pj = xcalloc(trace->njobs + 1, sizeof(*a.pj));
	a.tid = xcalloc(trace->njobs + 1, sizeof(*a.tid));
	a.left = xcalloc(trace->njobs + 1, sizeof(*a.left));
	a.n = 0;
	for (size_t i = 0; i < trace->njobs; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].start = res[i].end = UINT64_MAX;
	}

	while (next < trace->njobs || a.n) {
		uint64_t t = UINT64_MAX;

		/* the next event: an arrival, a completion or a policy change */
		if (next < trace->njobs)
			t = trace->jobs[next].submit;
		for (size_t k = 0; k < a.n; k++)
			if (a.pj[k].running && now + a.left[k] < t)
				t = now + a.left[k];
		if (next_change < t)
			t = next_change;
		if (t == UINT64_MAX)
			break; /* only jobs that can never run are left */
		if (t < now)
			t = now;

		/* advance the clock: work, service and completions */
		for (size_t k = 0; k < a.n;) {
			struct sched_pjob *j = &a.pj[k];
			if (j->running) {
				uint64_t dt = t - now;
				a.left[k] -= dt;
				ran[a.tid[k]] += dt;
				busy += dt * j->gpus;
			}
			sched_policy_account(conf, j, t);
			if (j->running && !a.left[k]) {
				size_t i = a.tid[k];
				res[i].end = t;
				res[i].jct = t - trace->jobs[i].submit;
				res[i].queued = res[i].jct - ran[i];
				done++;
				active_remove(&a, k);
				continue;
			}
			j->remaining = a.left[k];
			k++;
		}
		now = t;
		while (next < trace->njobs && trace->jobs[next].submit <= now) {
			const struct sim_job *sj = &trace->jobs[next];
			struct sched_pjob *j = &a.pj[a.n];
			sched_policy_job_init(j, sj->id, sj->gpus, sj->submit);
			sched_policy_account(conf, j, now);
			j->remaining = sj->duration;
			a.tid[a.n] = next;
			a.left[a.n] = sj->duration;
			a.n++;
			next++;
		}

		sched_policy_plan(conf, a.pj, a.n, total, now, &plan);
		st->events++;
		next_change = plan.next_change;
		for (size_t p = 0; p < plan.npreempts; p++) {
			size_t k = plan.preempts[p];
			sched_policy_requeue(&a.pj[k], now);
			res[a.tid[k]].preemptions++;
		}
		for (size_t s = 0; s < plan.nstarts; s++) {
			size_t k = plan.starts[s], i = a.tid[k];
			sched_policy_started(&a.pj[k], now);
			if (res[i].start == UINT64_MAX)
				res[i].start = now;
			else if (opts->restart_penalty)
				a.left[k] += opts->restart_penalty;
		}
	}
	stats_fill(trace, res, done, busy, total, st);
	sched_policy_plan_release(&plan);
	free(a.pj);
	free(a.tid);
	free(a.left);
	free(ran);
}
