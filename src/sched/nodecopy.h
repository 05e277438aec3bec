/*
 * A working copy of a snapshot's nodes whose free GPUs, CPUs and memory can
 * change: what the fit oracle (fit.h) and the start estimates (estimate.h)
 * play "what if these jobs ended, or started" on. Pure, like sched.h.
 *
 * Ownership: the copy owns its nodes and GPU arrays (labels, names and the
 * rest stay borrowed from the snapshot, which must outlive it); freed with
 * sched_nodecopy_release().
 */
#ifndef YARD_SCHED_NODECOPY_H
#define YARD_SCHED_NODECOPY_H

#include "sched/preempt.h"
#include "sched/sched.h"

struct sched_nodecopy {
	struct sched_node *nodes; /* owned; nodes[i].gpus points into gpus[i] */
	struct sched_gpu **gpus;  /* owned */
	size_t nnodes;
};

/* sched_nodecopy_init: c becomes a copy of nodes[0..n). Cannot fail. */
void sched_nodecopy_init(struct sched_nodecopy *c, const struct sched_node *nodes, size_t n);
/* sched_nodecopy_set: dst = src, two copies of the same snapshot. */
void sched_nodecopy_set(struct sched_nodecopy *dst, const struct sched_nodecopy *src);
/* sched_nodecopy_clear: every GPU of c free, every CPU and byte of memory
 * free (as if no job ran). */
void sched_nodecopy_clear(struct sched_nodecopy *c);
void sched_nodecopy_release(struct sched_nodecopy *c);
/* sched_nodecopy_apply gives back (give) or takes what holds[0..nholds)
 * stand for on c; holds on nodes past c's are ignored. */
void sched_nodecopy_apply(struct sched_nodecopy *c, const struct sched_hold *holds, size_t nholds,
			  bool give);
/* sched_nodecopy_place: whether job would be placed on c as it is (c is
 * left as it was). With took (room for job->ntasks holds), OUT: what it
 * was given, as holds whose gpus arrays the caller frees. */
bool sched_nodecopy_place(const struct sched_nodecopy *c, const struct sched_job *job,
			  struct sched_hold *took);

struct place_state;
/* sched_place_holds places job on placement state s, which keeps it taken;
 * with took (room for job->ntasks holds), OUT: what it was given, as holds
 * whose gpus arrays the caller frees. On failure s and took are untouched. */
bool sched_place_holds(struct place_state *s, const struct sched_job *job,
		       struct sched_hold *took);

#endif
