/*
 * Start estimates: when each waiting job is expected to start (`yard queue`'s
 * START, GET /v1/queue's start_estimate), as `squeue --start` says it. Pure,
 * like sched.h: a snapshot, the running jobs, the waiting ones and a clock in,
 * one estimate per waiting job out.
 *
 * The estimate of a job is the earliest time at which placement (place.h)
 * would take it if every running job ran until its bound (its start plus
 * its timeout) and the jobs ahead of it started, in queue order, at their own
 * estimates and then ran until theirs. So no estimate is earlier than that
 * of a job ahead. It is an estimate, not a promise: jobs that end before
 * their timeouts make it sooner; a job of a higher priority submitted
 * later, a preemption or a lost node can make it later. A job whose start needs GPUs that a job without a timeout holds
 * (running, or ahead of it and estimated) has no estimate, and nor has any
 * job behind it.
 *
 * One sweep serves the whole queue: the times looked at only move forward
 * (now, then the ends of the jobs that hold resources, in order), and
 * placement's state of what is free is built again only after something
 * was given back. A job that does not have enough free GPUs in all is not
 * even tried at a time.
 *
 * Work is bounded by max_work, counted in nodes visited: building
 * placement's state costs the number of nodes, one placement
 * SCHED_EST_PLACE_WORK; naming whom the first job without an estimate waits
 * for may cost up to twice the nodes per job that holds resources. Once the
 * work done reaches max_work the remaining jobs are SCHED_EST_NOT_ESTIMATED.
 *
 * Ownership: everything passed in is borrowed; out is the caller's.
 */
#ifndef YARD_SCHED_ESTIMATE_H
#define YARD_SCHED_ESTIMATE_H

#include "sched/preempt.h"
#include "sched/sched.h"

/* A running job: what it holds and when it ends at the latest. */
struct sched_est_running {
	uint64_t id;
	const struct sched_hold *holds; /* borrowed */
	size_t nholds;
	uint64_t end;            /* its start + its timeout; 0 = no timeout (a time
	                          * before now is taken as now: it is being stopped) */
};

/* A waiting job, in queue order. */
struct sched_est_waiting {
	const struct sched_job *job; /* borrowed */
	uint64_t bound;          /* how long it runs at the most (its timeout); 0 = none */
};

/* What one placement counts for in max_work (about the nodes it looks at,
 * place.h's PLACE_SCAN_CAP). */
#define SCHED_EST_PLACE_WORK 64

#define SCHED_EST_CODES(X)                                                              \
	X(OK, "ok")                                                                     \
	X(NO_TIMEOUT, "no_timeout")       /* needs what a job without a timeout holds */ \
	X(BEHIND, "behind")               /* a job ahead of it has no estimate */       \
	X(NEVER_FITS, "never_fits")       /* not even on the ready nodes, all free */   \
	X(STOPPING, "stopping")           /* needs what tasks being stopped hold */     \
	X(NOT_ESTIMATED, "not_estimated") /* past the work bound */

enum sched_est_code {
#define X(name, str) SCHED_EST_##name,
	SCHED_EST_CODES(X)
#undef X
	SCHED_EST__COUNT
};

struct sched_estimate {
	enum sched_est_code code;
	uint64_t start;          /* OK: when it would start (>= now), in the clock's units */
	uint64_t blocker;        /* NO_TIMEOUT: the first job it waits for that has no
	                          * timeout; BEHIND: the job ahead with no estimate */
	bool blocker_waiting;    /* NO_TIMEOUT: blocker is a waiting job ahead of it */
	unsigned nblockers;      /* NO_TIMEOUT: how many jobs without a timeout it needs gone */
};

/* sched_estimate_starts writes out[i] for wait[i] (nwait entries, in queue
 * order). nodes is the snapshot with the running jobs' resources in use, as
 * sched_plan takes it; run[0..nrun) are the running jobs of the nodes the
 * waiting jobs may use; now and every end and bound share one unit
 * (the master's: microseconds). Cannot fail. */
void sched_estimate_starts(const struct sched_node *nodes, size_t nnodes,
			   const struct sched_est_running *run, size_t nrun,
			   const struct sched_est_waiting *wait, size_t nwait, uint64_t now,
			   size_t max_work, struct sched_estimate *out);

/* sched_est_code_name: "no_timeout" and so on. */
const char *sched_est_code_name(enum sched_est_code code);

/* sched_estimate_reason writes why e has no start into buf (len bytes), as
 * "CODE: sentence", e.g. "no_timeout: job 12 holds the GPUs it needs and has
 * no timeout"; "" for SCHED_EST_OK. */
void sched_estimate_reason(const struct sched_estimate *e, char *buf, size_t len);

#endif
