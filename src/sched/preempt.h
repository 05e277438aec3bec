/*
 * Preemption for priority: which running jobs to stop so that a waiting job
 * of a higher priority fits. Pure, like sched.h: a snapshot in, victims out.
 *
 * Victims are running jobs of a strictly lower priority that are
 * preemptible; they are taken lowest priority first, then the most recently
 * started (the least work lost), until the waiting job fits in what is free
 * plus what they hold. sched_plan itself is the oracle of "fits". Jobs that
 * would not help (on nodes the job cannot use) are given back, so no more
 * is stopped than needed.
 */
#ifndef YARD_SCHED_PREEMPT_H
#define YARD_SCHED_PREEMPT_H

#include "sched/sched.h"

/* What one task of a running job holds on one node. */
struct sched_hold {
	size_t node;             /* index into the snapshot's nodes */
	const unsigned *gpus;    /* node GPU indexes, ngpus entries */
	unsigned ngpus;
	uint64_t cpus_milli, memory;
};

struct sched_victim {
	uint64_t id;
	int priority;
	bool preemptible;
	uint64_t started_at;     /* any monotone time */
	const struct sched_hold *holds;
	size_t nholds;
};

/* sched_preempt_for: the victims (indexes into running, written to out,
 * which holds nrunning entries) that make job fit on nodes; returns how many
 * (0 when none is needed or no set of victims helps). nodes is the snapshot
 * with the running jobs' resources in use, as sched_plan takes it. */
size_t sched_preempt_for(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, const struct sched_victim *running,
			 size_t nrunning, size_t *out);

/* sched_victims_help: whether stopping every job of victims (all of them)
 * would make job fit on nodes, by placement: the check a count-based policy
 * (las) needs before it stops anyone on a fragmented cluster. */
bool sched_victims_help(const struct sched_node *nodes, size_t nnodes, const struct sched_job *job,
			const struct sched_victim *victims, size_t nvictims);

#endif
