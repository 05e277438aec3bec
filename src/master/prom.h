/*
 * The master's Prometheus exposition, GET /metrics (docs/api.md,
 * "Prometheus"): what a GPU cluster's operators watch, named as
 * Prometheus' conventions say (base units, _total only on counters,
 * histograms as _bucket/_sum/_count) and checked by `promtool check
 * metrics` in the tests.
 *
 * Gauges are read off the model when scraped (jobs and nodes by state, the
 * queue and the GPUs held by pool and team, each node's last contact).
 * Histograms are observed as things happen (a job's wait from queued to
 * placed, a scheduling pass, a store commit) and kept in memory: a restarted
 * master starts them again from zero, which Prometheus' rate() takes as a
 * counter reset.
 */
#ifndef YARD_MASTER_PROM_H
#define YARD_MASTER_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "common/state.h"

struct master;
struct job;
struct strbuf;

/* One histogram: counts[i] of observations <= bounds[i] and above the
 * bound before it; counts[nbounds] of those above the last. */
struct prom_hist {
	const double *bounds;
	size_t nbounds;
	uint64_t *counts;       /* owned, nbounds + 1 */
	double sum;
	uint64_t count;
};

/* The wait histogram of one pool and team ("" when a job has none). */
struct prom_wait {
	char *pool, *team;      /* owned */
	struct prom_hist h;
};

struct prom {
	struct prom_wait *waits; /* owned */
	size_t nwaits, awaits;
	struct prom_hist sched_pass, commit;
};

void prom_init(struct prom *p);
void prom_release(struct prom *p);

/* prom_job_event, as j goes to state next: when it leaves the queue for its
 * nodes, observes how long it waited since it was last queued (its last
 * event, jobs.c's job_note). */
void prom_job_event(struct master *m, const struct job *j, enum job_state next);
/* A scheduling pass and a store commit took us microseconds. */
void prom_sched_pass(struct master *m, uint64_t us);
void prom_commit(struct master *m, uint64_t us);

/* prom_head: the HELP and TYPE lines of a metric; prom_series: the start
 * of one sample's line, name and suffix ("_bucket") with labels (NULL-
 * terminated pairs, or NULL) and le (a histogram's bound, or NULL), up to
 * the value the caller appends. */
void prom_head(struct strbuf *sb, const char *name, const char *type, const char *help);
void prom_series(struct strbuf *sb, const char *name, const char *suffix, const char *const *labels,
		 const char *le);

/* prom_render appends the exposition (text format 0.0.4) of m to sb. */
void prom_render(struct master *m, struct strbuf *sb);

#endif
