/*
 * The scheduler's one decision: sched_decide() takes the whole world (nodes
 * with what is free, the queued and running jobs with their policy state,
 * the pools' policies, the teams, the clock) and returns what to do: jobs to
 * start with their placements, running jobs to preempt with the job each
 * makes room for and why, and the position and reason of every job left
 * waiting. The master builds a world from its records, calls it and applies
 * the decision; `yard sim` builds one from its virtual cluster at every event
 * and does the same, so a replay runs the scheduler the master runs.
 *
 * What it does, in order:
 *  1. Per pool with queued jobs, that pool's policy (policy.h) orders its
 *     queued jobs among its running ones. fifo and fair ask placement
 *     (a fit oracle, fit.h) where a count of GPUs would admit a job that
 *     cannot start; the others count GPUs. Jobs a policy holds back (fifo's
 *     head of line, a team at its quota) wait. A policy's preemptions (las,
 *     glas, srtf, fair) are kept only if, by placement, stopping those jobs
 *     lets the job they make room for run, and only when no preempted job
 *     is still stopping (world.stopping).
 *  2. Placement (sched.h) places the other queued jobs, in the policies'
 *     order, each as a gang, on what is free now: a preemption frees nothing
 *     until its tasks have stopped.
 *  3. For the pools whose policy does not preempt (greedy, fifo), priority
 *     preemption: the first waiting job that lower-priority preemptible jobs
 *     could make room for gets it (preempt.h), again one round at a time.
 *
 * With world.new_only (between full decisions) the queued jobs are new
 * arrivals: they are placed on what is free, in priority order, and nothing
 * is ordered by policy or preempted; their positions are left at 0. That
 * gives the same starts as a full decision, since every older job was found
 * not to fit and nothing has been freed since, except where a policy may
 * hold a new job back for older ones (fifo, fair): sched_new_only_ok() says
 * when the caller must decide in full instead.
 *
 * With world.count (the simulator's `--scheme count`, the Tiresias
 * simulator's count scheme) GPUs are counted, not placed: a pool is its
 * schedulable nodes' GPUs, starts carry no placement, every preemption the
 * policy chooses is taken, and there are no waits (a replay needs none, and
 * a reason for each of tens of thousands of waiting jobs at every event
 * would be most of its cost).
 *
 * Pure: no I/O, no globals, no clock of its own. The world is borrowed and
 * not modified; the decision owns its arrays (sched_decision_release).
 */
#ifndef YARD_SCHED_DECIDE_H
#define YARD_SCHED_DECIDE_H

#include "sched/policy.h"
#include "sched/preempt.h"
#include "sched/sched.h"

/* A pool whose policy is not the world's default. */
struct sched_pool_policy {
	const char *pool;                 /* borrowed */
	struct sched_policy_conf conf;    /* its teams are ignored: the world's count */
};

/* A team of the fair policy; a team not listed weighs 1, with no quota. */
struct sched_team_conf {
	const char *team;                 /* borrowed */
	double weight;
	unsigned quota;                   /* most GPUs it may hold; 0 = no limit */
};

/* One job of the world, queued or running. */
struct sched_world_job {
	/* What placement sees. A queued job: its pending tasks, pool, labels and
	 * so on (rank is ignored: the decision ranks). A running one: id,
	 * priority, submitted_at and pool are read; tasks may be empty. */
	struct sched_job job;
	const char *team;                 /* borrowed; NULL = "" (fair's teams) */
	bool running;                     /* holds resources: what holds[] says */
	bool preemptible;                 /* a running job that may be preempted */
	const struct sched_hold *holds;   /* running: what each of its tasks holds */
	size_t nholds;
};

struct sched_world {
	/* Every node that is not removed; free resources are what the running
	 * jobs (and any preempted ones still stopping) do not hold. */
	const struct sched_node *nodes;
	size_t nnodes;
	const struct sched_world_job *jobs;
	/* jobs[i]'s policy state, accounted to now (sched_policy_account), the
	 * caller's: it keeps them between decisions. pol[i].team is ignored. */
	const struct sched_pjob *pol;
	size_t njobs;
	const struct sched_policy_conf *policy;    /* every pool's but those below */
	const struct sched_pool_policy *pools;
	size_t npools;
	const struct sched_team_conf *teams;
	size_t nteams;
	uint64_t now;                     /* seconds, the clock of pol */
	bool stopping;                    /* preempted tasks are still stopping: preempt no more */
	bool new_only;                    /* see the top: place new arrivals only */
	bool count;                       /* see the top: count GPUs, place nothing */
	/* count: every node and job is in one pool (the simulator's), so the
	 * policy decides on jobs and pol as they are, with no copy or scan: a
	 * replay decides at every event */
	bool one_pool;
};

/* Why a running job is preempted. */
enum sched_preempt_cause {
	SCHED_CAUSE_PRIORITY = 0,         /* the job it makes room for has a higher priority */
	SCHED_CAUSE_SHORTER,              /* srtf: that job has less time left */
	SCHED_CAUSE_SHARE,                /* fair: that job's team holds less of its share */
	SCHED_CAUSE_SERVICE,              /* las, glas: that job has had less GPU service */
	SCHED_CAUSE_PROMOTED,             /* las, glas: that job waited long enough to be promoted */
};

struct sched_preemption {
	size_t job;                       /* index into world jobs: the running job to stop */
	size_t by;                        /* the queued job it makes room for */
	enum sched_preempt_cause cause;
	/* "preempted by job 7 of priority high", "preempted by job 7 (glas: it
	 * has had less GPU service)": the caller adds the work lost */
	char reason[160];
};

struct sched_decision {
	struct sched_start *starts;       /* .job indexes world jobs; grouped by job;
	                                   * count: one per job, node SIZE_MAX, no GPUs */
	size_t nstarts;
	struct sched_preemption *preempts;
	size_t npreempts;
	struct sched_wait *waits;         /* every queued job not started, by position
	                                   * (.job indexes world jobs; new_only: position 0;
	                                   * count: none) */
	size_t nwaits;
	/* The earliest time at which the decision may change with no arrival or
	 * end: a policy's next_change (sched_policy_plan); UINT64_MAX = none. */
	uint64_t next_change;
	/* count on one pool: the policy's plan this decision is (its waits
	 * tell a caller that gave only some waiting jobs whether the others
	 * could matter: sched_policy_wait_blocks); scratch otherwise, reused
	 * when a previous decision is passed again */
	struct sched_policy_plan policy_plan;
	size_t alloc_preempts_;           /* scratch: room in preempts, kept for the next */
};

/* sched_decide decides for w into *out, which is zeroed or holds a previous
 * decision (whose arrays it frees and whose scratch it reuses); free the
 * last one with sched_decision_release. It cannot fail. */
void sched_decide(const struct sched_world *w, struct sched_decision *out);
void sched_decision_release(struct sched_decision *d);

/* sched_new_only_ok: whether w's queued jobs, all new arrivals, may be
 * placed with new_only (no policy of theirs may hold them back for older
 * jobs), or the caller must decide in full. */
bool sched_new_only_ok(const struct sched_world *w);

/* The conf of a pool in w: its own, or w's default. */
const struct sched_policy_conf *sched_world_pool_conf(const struct sched_world *w,
						       const char *pool);

#endif
