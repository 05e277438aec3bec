/* The master's Prometheus exposition (prom.h). */
#include "base/compat.h"
#include "master/prom.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/core.h"
#include "master/elastic.h"

#ifndef YARD_VERSION
#define YARD_VERSION "unknown"
#endif

/* Seconds: a job's wait runs from a second to days; a pass and a commit
 * from tens of microseconds to seconds. */
static const double wait_bounds[] = { 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400 };
static const double fast_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				      0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };

static void hist_init(struct prom_hist *h, const double *bounds, size_t n)
{
	h->bounds = bounds;
	h->nbounds = n;
	h->counts = xcalloc(n + 1, sizeof(*h->counts));
	h->sum = 0;
	h->count = 0;
}

static void hist_observe(struct prom_hist *h, double v)
{
	size_t i = 0;

	while (i < h->nbounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void prom_init(struct prom *p)
{
	memset(p, 0, sizeof(*p));
	hist_init(&p->sched_pass, fast_bounds, ARRAY_SIZE(fast_bounds));
	hist_init(&p->commit, fast_bounds, ARRAY_SIZE(fast_bounds));
}

void prom_release(struct prom *p)
{
	for (size_t i = 0; i < p->nwaits; i++) {
		free(p->waits[i].pool);
		free(p->waits[i].team);
		free(p->waits[i].h.counts);
	}
	free(p->waits);
	free(p->sched_pass.counts);
	free(p->commit.counts);
	memset(p, 0, sizeof(*p));
}

static const char *job_pool(const struct job *j)
{
	return j->pool ? j->pool : "default";
}

void prom_job_event(struct master *m, const struct job *j, enum job_state next)
{
	struct prom *p = &m->prom;
	const json_t *last = json_array_get(j->events, json_array_size(j->events) - 1);
	const char *pool = job_pool(j), *team = j->team ? j->team : "";
	json_int_t at = json_integer_value(json_object_get(last, "at"));
	uint64_t now = wall_us();
	struct prom_wait *w = NULL;

	if (j->state != JOB_QUEUED || next != JOB_STARTING || !last || strcmp(json_string_value(json_object_get(last, "state")), "queued") || at <= 0)
		return;
	for (size_t i = 0; i < p->nwaits && !w; i++)
		if (!strcmp(p->waits[i].pool, pool) && !strcmp(p->waits[i].team, team))
			w = &p->waits[i];
	if (!w) {
		ALLOC_GROW(p->waits, p->nwaits + 1, p->awaits);
		w = &p->waits[p->nwaits++];
		w->pool = xstrdup(pool);
		w->team = xstrdup(team);
		hist_init(&w->h, wait_bounds, ARRAY_SIZE(wait_bounds));
	}
	hist_observe(&w->h, now > (uint64_t)at ? (double)(now - (uint64_t)at) / 1e6 : 0);
}

void prom_sched_pass(struct master *m, uint64_t us)
{
	hist_observe(&m->prom.sched_pass, (double)us / 1e6);
}

void prom_commit(struct master *m, uint64_t us)
{
	hist_observe(&m->prom.commit, (double)us / 1e6);
}

/* ---- the text format ---- */

/* A label value, escaped as the text format says. */
static void add_value(struct strbuf *sb, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			strbuf_addch(sb, '\\');
		if (*v == '\n')
			strbuf_addstr(sb, "\\n");
		else
			strbuf_addch(sb, *v);
	}
}

void prom_head(struct strbuf *sb, const char *name, const char *type, const char *help)
{
	strbuf_addf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{k1="v1",k2="v2"} (labels: NULL-terminated pairs, or NULL). */
void prom_series(struct strbuf *sb, const char *name, const char *suffix, const char *const *labels,
		 const char *le)
{
	bool any = false;

	strbuf_addf(sb, "%s%s", name, suffix);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		strbuf_addf(sb, "%s%s=\"", any ? "," : "{", labels[i]);
		add_value(sb, labels[i + 1]);
		strbuf_addch(sb, '"');
		any = true;
	}
	if (le)
		strbuf_addf(sb, "%sle=\"%s\"", any ? "," : "{", le);
	if (any || le)
		strbuf_addch(sb, '}');
	strbuf_addch(sb, ' ');
}

static void hist_render(struct strbuf *sb, const char *name, const char *const *labels,
			const struct prom_hist *h)
{
	uint64_t cum = 0;
	char le[32];

	for (size_t i = 0; i < h->nbounds; i++) {
		cum += h->counts[i];
		snprintf(le, sizeof(le), "%g", h->bounds[i]);
		prom_series(sb, name, "_bucket", labels, le);
		strbuf_addf(sb, "%" PRIu64 "\n", cum);
	}
	prom_series(sb, name, "_bucket", labels, "+Inf");
	strbuf_addf(sb, "%" PRIu64 "\n", h->count);
	prom_series(sb, name, "_sum", labels, NULL);
	strbuf_addf(sb, "%.6f\n", h->sum);
	prom_series(sb, name, "_count", labels, NULL);
	strbuf_addf(sb, "%" PRIu64 "\n", h->count);
}

/* A sum by two labels (pool and something), gathered at scrape time. */
struct tally {
	struct { const char *a, *b; double n; } *v;
	size_t n, alloc;
};

static void tally_add(struct tally *t, const char *a, const char *b, double n)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].a, a) && !strcmp(t->v[i].b, b)) {
			t->v[i].n += n;
			return;
		}
	ALLOC_GROW(t->v, t->n + 1, t->alloc);
	t->v[t->n].a = a;
	t->v[t->n].b = b;
	t->v[t->n++].n = n;
}

static void tally_render(struct strbuf *sb, const char *name, const char *ka, const char *kb,
			 struct tally *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const char *labels[] = { ka, t->v[i].a, kb, t->v[i].b, NULL };
		prom_series(sb, name, "", labels, NULL);
		strbuf_addf(sb, "%.15g\n", t->v[i].n);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static void render_jobs(struct master *m, struct strbuf *sb)
{
	unsigned jobs[JOB_STATE__COUNT] = { 0 };
	struct tally queued = { 0 }, idle = { 0 };

	for (size_t i = 0; i < m->njobs; i++)
		if (m->jobs[i])
			jobs[m->jobs[i]->state]++;
	prom_head(sb, "yard_jobs", "gauge", "Jobs by state.");
	for (int s = 0; s < JOB_STATE__COUNT; s++) {
		const char *labels[] = { "state", job_state_name(s), NULL };
		prom_series(sb, "yard_jobs", "", labels, NULL);
		strbuf_addf(sb, "%u\n", jobs[s]);
	}
	for (size_t i = 0; i < m->nnodes; i++) /* each pool has its series, 0 when none waits */
		tally_add(&queued, m->nodes[i]->pool, "", 0);
	for (size_t i = 0; i < m->nnodes; i++)
		tally_add(&idle, m->nodes[i]->pool, "", 0);
	for (size_t i = 0; i < m->nqueue; i++)
		if (!m->queue[i]->blocked) /* held or waiting for a job of its after: not for GPUs */
			tally_add(&queued, job_pool(m->queue[i]), m->queue[i]->team ? m->queue[i]->team : "", 1);
	prom_head(sb, "yard_jobs_queued", "gauge",
	     "Jobs waiting for resources, by pool and team (\"\": none); held ones and those waiting "
	     "for a job they come after are not counted.");
	tally_render(sb, "yard_jobs_queued", "pool", "team", &queued);
	for (size_t i = 0; i < m->njobs; i++) {
		const struct job *j = m->jobs[i];
		if (j && j->state == JOB_RUNNING && j->util && j->util->flagged)
			tally_add(&idle, job_pool(j), j->team ? j->team : "", 1);
	}
	prom_head(sb, "yard_jobs_gpus_idle", "gauge",
	     "Running jobs flagged for GPUs under --idle-gpu-threshold for --idle-gpu-timeout, by pool and team.");
	tally_render(sb, "yard_jobs_gpus_idle", "pool", "team", &idle);
	prom_head(sb, "yard_job_wait_seconds", "histogram",
	     "How long jobs waited from queued to placed, by pool and team, since the master started.");
	for (size_t i = 0; i < m->prom.nwaits; i++) {
		const char *labels[] = { "pool", m->prom.waits[i].pool, "team", m->prom.waits[i].team, NULL };
		hist_render(sb, "yard_job_wait_seconds", labels, &m->prom.waits[i].h);
	}
}

static void render_nodes(struct master *m, struct strbuf *sb)
{
	unsigned nodes[NODE_STATE__COUNT] = { 0 };
	struct tally gpus = { 0 }, held = { 0 }, busy = { 0 };

	for (size_t i = 0; i < m->nnodes; i++) {
		nodes[m->nodes[i]->state]++;
		tally_add(&gpus, m->nodes[i]->pool, node_state_name(m->nodes[i]->state), m->nodes[i]->ngpus);
		tally_add(&held, m->nodes[i]->pool, "", 0);
		tally_add(&busy, m->nodes[i]->pool, "", 0);
	}
	prom_head(sb, "yard_nodes", "gauge", "Nodes by state.");
	for (int s = 0; s < NODE_STATE__COUNT; s++) {
		const char *labels[] = { "state", node_state_name(s), NULL };
		if (s == NODE_REMOVED) /* never in the model */
			continue;
		prom_series(sb, "yard_nodes", "", labels, NULL);
		strbuf_addf(sb, "%u\n", nodes[s]);
	}
	prom_head(sb, "yard_gpus", "gauge", "GPUs of the nodes, by pool and node state.");
	tally_render(sb, "yard_gpus", "pool", "state", &gpus);
	for (size_t i = 0; i < m->nlive; i++) { /* the tasks that hold resources */
		const struct task *t = m->live[i];
		const struct node *n = core_node(m, t->node);
		const char *pool = n ? n->pool : "default", *team = t->job->team ? t->job->team : "";
		double b = 0;
		tally_add(&held, pool, team, t->ngpus);
		for (unsigned g = 0; n && g < t->ngpus; g++)
			for (size_t x = 0; x < n->ngpus; x++)
				if (n->gpus[x].index == t->gpus[g] && n->gpus[x].has_util)
					b += n->gpus[x].util / 100.0;
		tally_add(&busy, pool, team, b);
	}
	prom_head(sb, "yard_gpus_allocated", "gauge", "GPUs held by tasks, by the pool of their node and their job's team.");
	tally_render(sb, "yard_gpus_allocated", "pool", "team", &held);
	prom_head(sb, "yard_gpus_busy", "gauge",
	     "GPUs held by tasks weighted by their last utilisation (one at 50% counts 0.5), by pool and team.");
	tally_render(sb, "yard_gpus_busy", "pool", "team", &busy);
	prom_head(sb, "yard_node_last_seen_timestamp_seconds", "gauge",
	     "When each node's agent was last heard from (Unix time).");
	for (size_t i = 0; i < m->nnodes; i++) {
		const char *labels[] = { "node", m->nodes[i]->name, "pool", m->nodes[i]->pool, NULL };
		prom_series(sb, "yard_node_last_seen_timestamp_seconds", "", labels, NULL);
		strbuf_addf(sb, "%.3f\n", (double)m->nodes[i]->last_seen / 1e6);
	}
}

void prom_render(struct master *m, struct strbuf *sb)
{
	const char *build[] = { "version", YARD_VERSION, NULL };

	render_jobs(m, sb);
	render_nodes(m, sb);
	elastic_prom(m, sb);
	prom_head(sb, "yard_scheduler_pass_duration_seconds", "histogram", "How long each scheduling pass took.");
	hist_render(sb, "yard_scheduler_pass_duration_seconds", NULL, &m->prom.sched_pass);
	prom_head(sb, "yard_scheduler_passes_total", "counter", "Scheduling passes since the master started.");
	strbuf_addf(sb, "yard_scheduler_passes_total %" PRIu64 "\n", m->sched_passes);
	prom_head(sb, "yard_store_commit_duration_seconds", "histogram",
	     "How long each commit of a batch of changes to the store took.");
	hist_render(sb, "yard_store_commit_duration_seconds", NULL, &m->prom.commit);
	prom_head(sb, "yard_master_start_time_seconds", "gauge", "When this master started (Unix time).");
	strbuf_addf(sb, "yard_master_start_time_seconds %.3f\n", (double)m->started_wall_us / 1e6);
	prom_head(sb, "yard_build_info", "gauge", "The master's version, as a label; always 1.");
	prom_series(sb, "yard_build_info", "", build, NULL);
	strbuf_addstr(sb, "1\n");
}
