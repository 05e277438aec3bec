/*
 * Scheduling policies: which jobs should run, in what order, and which
 * running jobs to preempt. Pure like sched.h: no I/O, no globals, no clock of
 * its own; the caller (the master, or the simulator) keeps each job's policy
 * state in a struct sched_pjob, advances it with sched_policy_account() and
 * asks for a decision with sched_policy_plan().
 *
 * sched_policy_plan() decides by GPU count only (the cluster is a pool of
 * GPUs, the "count" placement of the Tiresias simulator); placement onto
 * nodes and GPUs is sched.c's (and place.c's) business.
 * sched_policy_plan_fit() asks a fit oracle (placement) instead where a
 * count would admit a job placement cannot start (fifo, fair). The master
 * uses the order, the jobs held back and the preemption choices and then
 * places with sched_plan().
 *
 * Policies:
 *   fifo  priority, then age; strict head-of-line, with EASY backfill: a later
 *         job may start ahead of the head only if it cannot delay the head's
 *         reservation, judged by bounds (each job's `bound`, its spec's
 *         timeout). Jobs without a bound are never backfilled past the head,
 *         and running jobs without a bound make the reservation unknown.
 *         Never preempts.
 *   las   Tiresias-style discretised 2D least-attained-service: levels by
 *         attained GPU-seconds with thresholds (default 3250/7200/18000);
 *         within a level, running jobs keep their place, waiting jobs follow
 *         in the order they entered the level (arrival, demotion or
 *         preemption). Greedy: a job that does not fit is skipped. Needs no
 *         durations. Preempts running jobs that a higher level displaces.
 *         Ageing (conf age_pct, default 400 %): a waiting job below level 0
 *         that has waited there, since it last entered level 0, 4x as long
 *         as it has run in all is promoted to level 0 (Tiresias's
 *         starvation rule, against all its service), so a long job
 *         cannot starve behind a stream of short ones; 0 turns it off (the
 *         peer's dlas-gpu runs have it off).
 *   fair  per-team shares and quotas: progressive filling across teams by
 *         GPUs held over weight (DRF with one resource), las within a team;
 *         a team never exceeds its quota.
 *   srtf  shortest known remaining time first (needs durations; for the
 *         simulator's comparisons). Preemptive.
 *   glas  the default: las with ten geometric levels (from 64 GPU-seconds,
 *         x4 per level up to ~48 GPU-days), so short jobs escape quickly and
 *         long ones are ordered by what they have received, without any
 *         duration estimate; ageing at 2000 % (a smaller factor thrashes
 *         through its short first levels). See docs/scheduler.md,
 *         which also says where it loses to the peer's dlas-gpu.
 *
 * Ownership: every input is borrowed; the plan owns its arrays and is freed
 * with sched_policy_plan_release().
 */
#ifndef YARD_SCHED_POLICY_H
#define YARD_SCHED_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sched_policy {
	SCHED_POLICY_GREEDY = 0, /* today's sched_plan(): priority, age, skip what does not fit */
	SCHED_POLICY_FIFO,
	SCHED_POLICY_LAS,
	SCHED_POLICY_FAIR,
	SCHED_POLICY_SRTF,
	SCHED_POLICY_GLAS,
	SCHED_POLICY__COUNT
};

/* The policy that needs no durations and does best on the vc11cb48 replay.
 * On the per-VC Philly replays it misses the bar of beating the peer's
 * dlas-gpu and staying within 1.15x of srtf on most rows, as every
 * alternative tried did (docs/scheduler.md, "Per-VC replays"). */
#define SCHED_POLICY_DEFAULT SCHED_POLICY_GLAS

/* sched_policy_name: "fifo", ...; sched_policy_parse: the enum from a name,
 * or -1. */
const char *sched_policy_name(enum sched_policy p);
int sched_policy_parse(const char *name);

#define SCHED_LAS_MAX_LEVELS 32

/* A team of the fair policy. */
struct sched_team {
	double weight;           /* share; <= 0 counts as 1 */
	unsigned quota;          /* most GPUs the team may hold; 0 = no limit */
};

struct sched_policy_conf {
	enum sched_policy policy;
	/* las/glas/fair: level thresholds in attained GPU-seconds, ascending;
	 * nthresholds == 0 takes the policy's defaults. nthresholds thresholds
	 * make nthresholds + 1 levels. */
	uint64_t thresholds[SCHED_LAS_MAX_LEVELS - 1];
	size_t nthresholds;
	const struct sched_team *teams; /* fair: indexed by sched_pjob.team; borrowed */
	size_t nteams;
	/* las/glas/fair ageing, Tiresias's starvation rule: a waiting job below
	 * level 0 is promoted to level 0 once the time it has waited below
	 * level 0 since it last entered level 0 reaches age_pct % of all the
	 * time it has run (not just since then: a promoted job demoted again at
	 * once would be promoted again at once). 0 = off (no promotion). */
	unsigned age_pct;
	/* Protection of running work (all 0/false: none, the simulator's
	 * default). A running preemptible job is "protected" when
	 *   - it started or resumed less than min_run_s seconds ago, or
	 *   - need_checkpoint is set and it has not checkpointed in its current
	 *     run (checkpointed_at == 0 or < started_at): preempting it would
	 *     throw away all of that run, or
	 *   - max_lost_s > 0 and the work it would lose, now - max(checkpointed_at,
	 *     started_at), exceeds max_lost_s.
	 * A protected job is never preempted by a job of its own or a lower
	 * priority (las/glas/srtf demotion, fair shares), only by a higher one:
	 * the key-order scan reserves its GPUs when it reaches its priority,
	 * fair reserves them before filling unless a job of a higher priority
	 * waits. */
	uint64_t min_run_s;
	uint64_t max_lost_s;
	bool need_checkpoint;
};

/* The live master's protection of running work, its --preempt-min-run and
 * --preempt-max-lost defaults (need_checkpoint is set with max_lost_s), and
 * yard sim --live's: one source for both. */
#define SCHED_PREEMPT_MIN_RUN_S (2 * 60)
#define SCHED_PREEMPT_MAX_LOST_S (10 * 60)

/* sched_policy_conf_init: conf for policy p with its default thresholds. */
void sched_policy_conf_init(struct sched_policy_conf *conf, enum sched_policy p);

/* What a policy knows of one job (queued or running). The caller owns it and
 * keeps it between calls; sched_policy_account() updates the state fields. */
struct sched_pjob {
	uint64_t id;
	int priority;            /* larger first; every policy orders by it first */
	uint64_t submitted_at;   /* seconds, any monotone origin */
	unsigned gpus;           /* the gang: all or nothing */
	bool running;
	bool preemptible;        /* false: never chosen for preemption */
	unsigned team;           /* fair: index into conf teams */
	uint64_t remaining;      /* srtf: known remaining run time (s); ignored otherwise */
	uint64_t bound;          /* fifo backfill: the job's run time limit (s); 0 = none */
	uint64_t checkpointed_at; /* when it last checkpointed (s, the clock of now); 0 = never */
	/* State, kept by sched_policy_account() and sched_policy_requeue(): */
	uint64_t attained;       /* GPU-seconds received so far */
	uint64_t accounted_at;   /* when attained was last advanced */
	uint64_t started_at;     /* when the current run started (running jobs) */
	unsigned level;          /* las level (0 = highest) */
	uint64_t level_since;    /* when it entered its level or went back to waiting */
	/* Ageing state (conf age_pct): */
	uint64_t level_base;     /* attained GPU-seconds when it last entered level 0
				    (submission or promotion); levels count from it */
	uint64_t served;         /* seconds run, in all */
	uint64_t waited;         /* seconds waited below level 0 since it last
				    entered level 0, once it has run */
	unsigned promotions;     /* times promoted to level 0 */
};

/* sched_policy_job_init: a job submitted at `now` with these GPUs. */
void sched_policy_job_init(struct sched_pjob *j, uint64_t id, unsigned gpus, uint64_t now);

/* sched_policy_account advances j to now: a running job's attained service
 * grows by gpus x elapsed, and its las level follows the service attained
 * since level_base (demotion); a waiting job that has waited its age limit
 * is promoted to level 0 (conf age_pct). Level changes are dated at the
 * second they happen (level_since). Call it for every job before
 * sched_policy_plan(). */
void sched_policy_account(const struct sched_policy_conf *conf, struct sched_pjob *j,
			  uint64_t now);

/* sched_policy_started / sched_policy_requeue record that the caller applied
 * a start or a preemption at now (running, started_at, level_since). */
void sched_policy_started(struct sched_pjob *j, uint64_t now);
void sched_policy_requeue(struct sched_pjob *j, uint64_t now);

/* sched_policy_protected: whether running job j is protected at now by
 * conf's min_run_s, need_checkpoint and max_lost_s (see struct
 * sched_policy_conf); false for a job not running or not preemptible. */
bool sched_policy_protected(const struct sched_policy_conf *conf, const struct sched_pjob *j,
			    uint64_t now);

/* sched_policy_lost_s: the seconds of work running job j would lose if it
 * stopped at now: since its last checkpoint, or since it started when it
 * has not checkpointed in its current run. */
uint64_t sched_policy_lost_s(const struct sched_pjob *j, uint64_t now);

/* Why a job is left waiting. */
enum sched_wait_code {
	SCHED_WAIT_GPUS = 0,     /* not enough free GPUs for it */
	SCHED_WAIT_HEAD,         /* fifo: behind the head and cannot backfill */
	SCHED_WAIT_QUOTA,        /* fair: its team is at its quota */
	SCHED_WAIT_TOO_BIG,      /* more GPUs than the cluster has (with a fit
	                          * oracle: would not fit with every job gone) */
	SCHED_WAIT__COUNT
};
const char *sched_wait_code_name(enum sched_wait_code c);

struct sched_policy_wait {
	size_t job;              /* index into the jobs array */
	unsigned position;       /* 1 = next in line */
	enum sched_wait_code code;
};

struct sched_policy_plan {
	size_t *starts;          /* indexes of waiting jobs to start, in policy order */
	size_t nstarts;
	size_t *preempts;        /* indexes of running jobs to preempt */
	size_t npreempts;
	struct sched_policy_wait *waits; /* every job left waiting, in policy order */
	size_t nwaits;
	/* The earliest time at which the plan may change without any arrival or
	 * completion (a running job crossing a las threshold, a waiting job
	 * reaching its age limit, a running job's protection starting or
	 * ending); UINT64_MAX = none. */
	uint64_t next_change;
	/* scratch, reused across calls when the plan is passed again; last_ is
	 * the policy order of the jobs of the last call (indexes, and their
	 * ids in last_id_), where the next call starts its sort */
	size_t *order_, *last_;
	uint64_t *last_id_;
	size_t nlast_;
	size_t alloc_starts_, alloc_preempts_, alloc_waits_, alloc_order_, alloc_last_;
	size_t alloc_last_id_;
	struct sched_policy_key_ *keys_; /* the sort's keys and its room to merge */
	bool *selected_;
	size_t alloc_keys_, alloc_selected_;
};

/*
 * A fit oracle: placement's answer to "does this job fit", for a caller that
 * places jobs on nodes (the master; sched/fit.h builds one). Job indexes are
 * into the jobs array of sched_policy_plan_fit(). "Taken" jobs are the ones
 * fits() was asked to take during this plan.
 */
struct sched_fit {
	/* Whether waiting job i fits now, on what is free less what taken jobs
	 * hold; with take, it keeps what it is given for the rest of the plan
	 * (a job is taken at most once: false for one taken already). */
	bool (*fits)(void *ctx, size_t i, bool take);
	/* Gives back what taken job i holds. */
	void (*give_back)(void *ctx, size_t i);
	/* Whether waiting job i would fit once jobs ended[0..nended) (running or
	 * taken) had given back what they hold. */
	bool (*fits_after)(void *ctx, size_t i, const size_t *ended, size_t nended);
	void *ctx;
};

/* sched_policy_plan decides for jobs[0..njobs) (queued and running, each
 * already accounted to now) on a pool of total_gpus GPUs, by GPU count (the
 * simulator's count scheme). out may hold a previous plan: its arrays are
 * reused. Cannot fail. */
void sched_policy_plan(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		       size_t njobs, unsigned total_gpus, uint64_t now,
		       struct sched_policy_plan *out);

/* sched_policy_plan_fit is sched_policy_plan where fit (NULL: by count)
 * judges what fits. With it:
 *   fifo  a waiting job starts only if it is placed (taken) in turn; the
 *         head is the first that cannot be, its reservation the earliest
 *         bound by which it would be placed with the running jobs that end
 *         by then gone, and a later job backfills only if it is placed now
 *         and ends before the reservation or leaves the head placeable then;
 *         a job that would not fit even with every job gone waits as too_big
 *         and is no head.
 *   fair  a waiting job starts only if it is placed now; one that has the
 *         GPUs by count but is not placed waits (insufficient_gpus) and
 *         does not count against its team's quota (it still counts for the
 *         count's preemptions).
 *   las, glas, srtf, greedy: unchanged (they only order the master's queue;
 *         placement starts what fits in that order).
 */
void sched_policy_plan_fit(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
			   size_t njobs, unsigned total_gpus, uint64_t now,
			   const struct sched_fit *fit, struct sched_policy_plan *out);
void sched_policy_plan_release(struct sched_policy_plan *plan);

/*
 * For a caller whose queue is long (the simulator's replays, where tens of
 * thousands of jobs wait) and that keeps its waiting jobs in policy order
 * (sched_policy_cmp): it may give sched_policy_plan() every running job and
 * only the first waiting jobs, as long as every job it leaves out would wait
 * and so change nothing else in the plan.
 *
 * sched_policy_wait_blocks: in a plan by count (sched_policy_plan) of conf
 * over jobs[0..njobs), the fewest GPUs a waiting job ordered after w's job
 * must ask for to be sure to wait as well, whatever waiting jobs after w's
 * are added to jobs; 0 when every such job waits (fifo behind its head),
 * UINT_MAX when none is sure to (fair). A plan without the jobs so sure to
 * wait has the same starts, preemptions and, but for those jobs' own ageing
 * (sched_policy_promotion_at), next_change as the plan with them.
 *
 * sched_policy_promotion_at: when waiting job j (accounted to its
 * accounted_at) is promoted by ageing if it keeps waiting, as the plan's
 * next_change would count it; UINT64_MAX when it cannot be.
 */
unsigned sched_policy_wait_blocks(const struct sched_policy_conf *conf,
				  const struct sched_pjob *jobs, size_t njobs,
				  const struct sched_policy_wait *w);
uint64_t sched_policy_promotion_at(const struct sched_policy_conf *conf, const struct sched_pjob *j);

/* sched_policy_next_change_of: job j's own part of a plan's next_change at
 * now (j accounted to now), were it to run if j->running and wait
 * otherwise: a running job's next las level (las, glas, fair) or the start
 * or end of its protection (not greedy, fifo); a waiting job's promotion;
 * UINT64_MAX for none. A caller whose placement starts other jobs than the
 * count (the simulator's place scheme) takes it over the jobs that do run
 * and wait: a plan's next_change also counts the next level of a job it
 * would start that placement leaves waiting, which never comes while it
 * waits. */
uint64_t sched_policy_next_change_of(const struct sched_policy_conf *conf,
				     const struct sched_pjob *j, uint64_t now);

/* sched_policy_cmp orders two jobs as the policy would (before team fairness
 * and fit): < 0 when a goes first. For sched.c's ordering of its queue. */
int sched_policy_cmp(const struct sched_policy_conf *conf, const struct sched_pjob *a,
		     const struct sched_pjob *b);

#endif
