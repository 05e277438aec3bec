/*
 * The fit oracle: placement's answer, for a scheduling policy (policy.h),
 * to "does this job fit", on a snapshot of nodes whose running jobs hold
 * what they hold. The master builds one per pool and plan so that fifo's
 * head of line and backfill, and fair's quotas, are judged by where jobs
 * can really go (nodes, islands, labels, models) and not by a count of GPUs;
 * the simulator's count scheme passes no oracle. Pure, like sched.h.
 *
 * Ownership: the fitter borrows nodes and jobs (they must outlive it) and
 * owns its copies of what is free.
 */
#ifndef YARD_SCHED_FIT_H
#define YARD_SCHED_FIT_H

#include "sched/policy.h"
#include "sched/preempt.h"
#include "sched/sched.h"

/* One job of the policy's jobs array, as placement sees it. */
struct sched_fit_job {
	const struct sched_job *job;    /* a waiting job: what is placed; NULL for a running one */
	const struct sched_hold *holds; /* a running job: what it holds (borrowed) */
	size_t nholds;
};

struct sched_fitter;

/* sched_fitter_new: an oracle over nodes (free as the snapshot says) for
 * jobs[0..njobs), indexed as the policy's jobs. Freed with
 * sched_fitter_free. Cannot fail. */
struct sched_fitter *sched_fitter_new(const struct sched_node *nodes, size_t nnodes,
				      const struct sched_fit_job *jobs, size_t njobs);
void sched_fitter_free(struct sched_fitter *f);

/* sched_fitter_oracle: the oracle for sched_policy_plan_fit(), valid while f
 * lives. What the plan takes is kept in f. */
void sched_fitter_oracle(struct sched_fitter *f, struct sched_fit *out);

#endif
