/*
 * One scheduling pass at scale: 10,000 nodes of 8 GPUs (islands of 4, a
 * third of the nodes partly used, a tenth in a second pool, two GPU models)
 * and 100,000 queued jobs of mixed gang sizes (1-64 GPUs, as one task per
 * GPU or one task per node; a few ask for a model, GPU memory, a label or the
 * other pool), and the partly used nodes' work as running jobs (started up
 * to a day ago, half of them checkpointed in the last 20 minutes). Times
 * one sched_decide() pass under the default policy with the master's
 * protections, beside its peer, placement alone (sched_plan(), the pass as
 * it was before sched_decide), and prints placements per second (jobs
 * decided, started or told why not, per second of the pass), the jobs and
 * GPUs started, the preemptions and the pass latency. Target: a pass under
 * 1 s (release build). Then times the start estimates of the
 * jobs left waiting (sched/estimate.h, with the master's work bound,
 * JOBS_ESTIMATE_WORK, unless ESTIMATE_WORK is given), with the started jobs
 * and the partly used nodes running to timeouts of 1-24 h, one in ten with
 * none.
 *
 * usage: sched [NODES] [JOBS] [SEED] [ESTIMATE_WORK]
 */
#include "base/compat.h"

#include "base/clock.h"
#include "base/xalloc.h"
#include "sched/decide.h"
#include "sched/estimate.h"

#define GPUS_PER_NODE 8
#define GIB ((uint64_t)1 << 30)

static uint64_t rng_state;

/* xorshift64*: deterministic for a seed */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static unsigned pick_gang(void)
{
	static const unsigned sizes[] = { 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4, 6, 8, 8, 8, 12,
					  16, 16, 24, 32, 48, 64 };
	return sizes[rnd() % ARRAY_SIZE(sizes)];
}

static size_t plan_started(const struct sched_plan *plan)
{
	size_t n = 0;
	for (size_t s = 0; s < plan->nstarts; s++)
		n += !s || plan->starts[s].job != plan->starts[s - 1].job;
	return n;
}

/* The bench's world for sched_decide: queued jobs first (world index =
 * jobs index), then one running job per partly used node holding its busy
 * GPUs (0..busy-1), started up to a day before now. */
struct world {
	struct sched_world w;
	struct sched_decision d;
	struct sched_world_job *wj;
	struct sched_pjob *pol;
	struct sched_hold *holds;
	struct sched_policy_conf conf;
	size_t nrunning;
};

static void world_new(struct world *b, const struct sched_node *nodes, size_t nnodes,
		      const struct sched_gpu *gpus, const struct sched_job *jobs, size_t njobs)
{
	static const unsigned first[GPUS_PER_NODE] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	const uint64_t now = 200000;
	size_t n = 0;

	memset(b, 0, sizeof(*b));
	sched_policy_conf_init(&b->conf, SCHED_POLICY_DEFAULT);
	b->conf.min_run_s = SCHED_PREEMPT_MIN_RUN_S;
	b->conf.max_lost_s = SCHED_PREEMPT_MAX_LOST_S;
	b->conf.need_checkpoint = true;
	b->wj = xcalloc(njobs + nnodes + 1, sizeof(*b->wj));
	b->pol = xcalloc(njobs + nnodes + 1, sizeof(*b->pol));
	b->holds = xcalloc(nnodes + 1, sizeof(*b->holds));
	for (size_t k = 0; k < njobs; k++, n++) {
		unsigned g = 0;
		for (size_t t = 0; t < jobs[k].ntasks; t++)
			g += jobs[k].tasks[t].gpus;
		b->wj[n].job = jobs[k];
		sched_policy_job_init(&b->pol[n], jobs[k].id, g, now - 100000 + jobs[k].submitted_at % 100000);
		b->pol[n].priority = jobs[k].priority;
		sched_policy_account(&b->conf, &b->pol[n], now);
	}
	for (size_t i = 0; i < nnodes; i++) {
		unsigned busy = 0;
		while (busy < GPUS_PER_NODE && !gpus[i * GPUS_PER_NODE + busy].free)
			busy++;
		if (!busy)
			continue;
		uint64_t started = now - 1 - rnd() % 86400;
		b->holds[b->nrunning] = (struct sched_hold){ i, first, busy, busy * 8000ULL, busy * 64 * GIB };
		b->wj[n] = (struct sched_world_job){
			.job = { .id = njobs + 1 + i, .priority = (int)(rnd() % 3), .pool = nodes[i].pool },
			.running = true, .preemptible = true, .holds = &b->holds[b->nrunning], .nholds = 1 };
		sched_policy_job_init(&b->pol[n], njobs + 1 + i, busy, started);
		b->pol[n].priority = b->wj[n].job.priority;
		b->pol[n].preemptible = true;
		sched_policy_started(&b->pol[n], started);
		b->pol[n].checkpointed_at = rnd() % 2 ? now - rnd() % 1200 : 0;
		sched_policy_account(&b->conf, &b->pol[n], now);
		b->nrunning++;
		n++;
	}
	b->w = (struct sched_world){ .nodes = nodes, .nnodes = nnodes, .jobs = b->wj, .pol = b->pol,
				     .njobs = n, .policy = &b->conf, .now = now };
}

static void world_free(struct world *b)
{
	sched_decision_release(&b->d);
	free(b->wj);
	free(b->pol);
	free(b->holds);
}

int main(int argc, char **argv)
{
	size_t nnodes = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	size_t njobs = argc > 2 ? strtoul(argv[2], NULL, 10) : 100000;
	struct sched_node *nodes = xcalloc(nnodes + 1, sizeof(*nodes));
	struct sched_gpu *gpus = xcalloc(nnodes * GPUS_PER_NODE + 1, sizeof(*gpus));
	struct sched_job *jobs = xcalloc(njobs + 1, sizeof(*jobs));
	struct sched_task *tasks;
	char (*names)[32] = xcalloc(nnodes + 1, sizeof(*names));
	static const struct sched_label fast[] = { { "net", "ib" } };
	size_t ntasks = 0, tasks_alloc = njobs * 2, busy_gpus = 0;
	uint64_t asked_gpus = 0, started_gpus = 0;
	struct sched_input in;
	struct sched_plan plan;
	uint64_t t0, t1;

	rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 42;
	if (!rng_state)
		rng_state = 42;
	tasks = xcalloc(tasks_alloc, sizeof(*tasks));
	for (size_t i = 0; i < nnodes; i++) {
		struct sched_node *n = &nodes[i];
		struct sched_gpu *g = &gpus[i * GPUS_PER_NODE];
		unsigned busy = rnd() % 3 == 0 ? (unsigned)(rnd() % GPUS_PER_NODE) : 0;
		bool h100 = i % 4 == 3;

		snprintf(names[i], sizeof(names[i]), "gpu-%zu", i + 1);
		for (unsigned k = 0; k < GPUS_PER_NODE; k++)
			g[k] = (struct sched_gpu){ .index = k, .model = h100 ? "H100" : "A100",
						   .free = k >= busy, .island = k / 4,
						   .memory = (h100 ? 80 : 40) * GIB };
		busy_gpus += busy;
		n->name = names[i];
		n->schedulable = i % 500 != 7; /* a few draining */
		n->gpus = g;
		n->ngpus = GPUS_PER_NODE;
		n->cpus_milli = 128000;
		n->memory = 1024 * GIB;
		n->free_cpus_milli = n->cpus_milli - busy * 8000;
		n->free_memory = n->memory - busy * 64 * GIB;
		n->pool = i % 10 == 9 ? "batch" : NULL;
		if (i % 2) {
			n->labels = fast;
			n->nlabels = 1;
		}
	}
	for (size_t k = 0; k < njobs; k++) {
		struct sched_job *j = &jobs[k];
		unsigned gang = pick_gang();
		bool per_gpu = rnd() % 2; /* one task per GPU, or per node of 8 */
		unsigned nt = per_gpu ? gang : (gang + GPUS_PER_NODE - 1) / GPUS_PER_NODE;
		unsigned r = (unsigned)(rnd() % 100);

		ALLOC_GROW(tasks, ntasks + nt, tasks_alloc);
		j->id = k + 1;
		j->priority = (int)(rnd() % 3);
		j->submitted_at = k;
		j->ntasks = nt;
		for (unsigned t = 0, left = gang; t < nt; t++) {
			unsigned g = per_gpu ? 1 : (left < GPUS_PER_NODE ? left : GPUS_PER_NODE);
			tasks[ntasks + t] = (struct sched_task){ "worker", t, g, 4000ULL * g, 32 * GIB * g };
			left -= g;
		}
		j->tasks = (const struct sched_task *)(uintptr_t)ntasks; /* fixed up below */
		ntasks += nt;
		asked_gpus += gang;
		if (r < 10)
			j->pool = "batch";
		else if (r < 15)
			j->gpu_model = "H100";
		else if (r < 18)
			j->gpu_memory = 48 * GIB;
		else if (r < 21) {
			j->labels = fast;
			j->nlabels = 1;
		} else if (r < 25)
			j->max_nodes = (gang + GPUS_PER_NODE - 1) / GPUS_PER_NODE;
	}
	for (size_t k = 0; k < njobs; k++)
		jobs[k].tasks = tasks + (uintptr_t)jobs[k].tasks;

	/* the peer: placement alone (sched_plan), the pass before sched_decide */
	in = (struct sched_input){ .nodes = nodes, .nnodes = nnodes, .jobs = jobs, .njobs = njobs };
	t0 = mono_us();
	sched_plan(&in, &plan);
	t1 = mono_us();
	double place_secs = (double)(t1 - t0) / 1e6;
	size_t place_started = plan_started(&plan);
	sched_plan_release(&plan);

	/* the decision: the queue, and the partly used nodes' work as running
	 * jobs, under the default policy with the master's protections */
	struct world wd;
	world_new(&wd, nodes, nnodes, gpus, jobs, njobs);
	t0 = mono_us();
	sched_decide(&wd.w, &wd.d);
	t1 = mono_us();
	double secs = (double)(t1 - t0) / 1e6;
	size_t started = 0;
	for (size_t s = 0; s < wd.d.nstarts; s++) {
		started_gpus += wd.d.starts[s].ngpus;
		if (!s || wd.d.starts[s].job != wd.d.starts[s - 1].job)
			started++;
	}
	printf("sched nodes=%zu gpus=%zu busy_gpus=%zu jobs=%zu tasks=%zu asked_gpus=%" PRIu64
	       " running=%zu\n",
	       nnodes, nnodes * GPUS_PER_NODE, busy_gpus, njobs, ntasks, asked_gpus, wd.nrunning);
	printf("sched started_jobs=%zu started_gpus=%" PRIu64 " waiting=%zu preempted=%zu\n",
	       started, started_gpus, wd.d.nwaits, wd.d.npreempts);
	printf("sched decide (%s, master protections) pass_ms=%.1f placements_per_s=%.0f "
	       "(target: pass < 1000 ms)\n",
	       sched_policy_name(SCHED_POLICY_DEFAULT), secs * 1e3, (double)njobs / secs);
	printf("sched peer: placement alone (sched_plan) pass_ms=%.1f placements_per_s=%.0f "
	       "started_jobs=%zu; decide/placement = %.2fx\n",
	       place_secs * 1e3, (double)njobs / place_secs, place_started, secs / place_secs);
	if (wd.d.nwaits)
		printf("sched first wait: job %" PRIu64 " %s: %s\n", jobs[wd.d.waits[0].job].id,
		       wd.d.waits[0].code, wd.d.waits[0].message);
	{
		static const unsigned first[GPUS_PER_NODE] = { 0, 1, 2, 3, 4, 5, 6, 7 };
		struct sched_hold *holds = xcalloc(wd.d.nstarts + nnodes + 1, sizeof(*holds));
		struct sched_est_running *run = xcalloc(started + nnodes + 1, sizeof(*run));
		struct sched_est_waiting *wait = xcalloc(wd.d.nwaits + 1, sizeof(*wait));
		struct sched_estimate *est = xcalloc(wd.d.nwaits + 1, sizeof(*est));
		size_t nh = 0, nr = 0, ok = 0, codes[SCHED_EST__COUNT] = { 0 };
		size_t work = argc > 4 ? strtoul(argv[4], NULL, 10) : 500000; /* JOBS_ESTIMATE_WORK */

		for (size_t i = 0; i < nnodes; i++) {
			unsigned busy = 0;
			while (busy < GPUS_PER_NODE && !gpus[i * GPUS_PER_NODE + busy].free)
				busy++;
			if (!busy)
				continue;
			holds[nh] = (struct sched_hold){ i, first, busy, busy * 8000ULL, busy * 64 * GIB };
			run[nr++] = (struct sched_est_running){
				.id = njobs + 1 + i, .holds = &holds[nh++], .nholds = 1,
				.end = rnd() % 10 ? (1 + rnd() % 24) * 3600000000ULL : 0 };
		}
		for (size_t st = 0; st < wd.d.nstarts; st++) {
			const struct sched_start *x = &wd.d.starts[st];
			const struct sched_task *t = &jobs[x->job].tasks[x->task];
			if (!st || x->job != wd.d.starts[st - 1].job)
				run[nr++] = (struct sched_est_running){
					.id = jobs[x->job].id, .holds = &holds[nh],
					.end = rnd() % 10 ? (1 + rnd() % 24) * 3600000000ULL : 0 };
			holds[nh++] = (struct sched_hold){ x->node, x->gpus, x->ngpus, t->cpus_milli,
							   t->memory };
			run[nr - 1].nholds++;
			for (unsigned g = 0; g < x->ngpus; g++)
				gpus[x->node * GPUS_PER_NODE + x->gpus[g]].free = false;
			nodes[x->node].free_cpus_milli -= t->cpus_milli;
			nodes[x->node].free_memory -= t->memory;
		}
		for (size_t w = 0; w < wd.d.nwaits; w++)
			wait[w] = (struct sched_est_waiting){ &jobs[wd.d.waits[w].job],
							      (1 + rnd() % 24) * 3600000000ULL };
		t0 = mono_us();
		sched_estimate_starts(nodes, nnodes, run, nr, wait, wd.d.nwaits, 0, work, est);
		t1 = mono_us();
		for (size_t w = 0; w < wd.d.nwaits; w++) {
			ok += est[w].code == SCHED_EST_OK;
			codes[est[w].code]++;
		}
		printf("estimate running=%zu waiting=%zu ms=%.1f estimated=%zu", nr, wd.d.nwaits,
		       (double)(t1 - t0) / 1e3, ok);
		for (size_t c = 1; c < SCHED_EST__COUNT; c++)
			printf(" %s=%zu", sched_est_code_name((enum sched_est_code)c), codes[c]);
		printf("\n");
		free(holds);
		free(run);
		free(wait);
		free(est);
	}
	world_free(&wd);
	free(tasks);
	free(jobs);
	free(gpus);
	free(nodes);
	free(names);
	return 0;
}
