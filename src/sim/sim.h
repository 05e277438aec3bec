/*
 * The simulator: an event-driven replay of a job trace on a cluster of
 * nodes, with a virtual clock in whole seconds, through the scheduler's own
 * decision (sched/decide.h, sched_decide(), as the master calls it). It
 * re-implements no policy: at every event (an arrival, a completion, the
 * decision's next_change or a waiting job's promotion) it accounts the jobs
 * to the clock, builds the world, asks sched_decide() and applies the starts
 * and preemptions.
 *
 * Two schemes (enum sim_scheme). place: the live scheduler on nodes and
 * GPUs; a preemption frees its GPUs at once and the next decision, at the
 * same second, places on them; the decision's next_change is taken over the
 * jobs that placement runs (sched_policy_next_change_of), not over those the
 * policy would run by count, some of which wait. count: GPUs counted, not placed (the peer's
 * scheme); so that an event costs the running jobs and not the queue
 * (thousands wait in a full Philly replay on a small cluster), waiting jobs
 * are accounted only when the decision needs them, and it is given every
 * running job but only the waiting jobs that sched_policy_wait_blocks()
 * shows can matter: the outcome is that of a decision over every job
 * (docs/scheduler.md, Replay speed).
 *
 * Model: a job runs on all of its GPUs or waits; a preempted job keeps its
 * progress and, with restart_penalty > 0, pays that many seconds again each
 * time it resumes after a preemption.
 *
 * The live master's cost model, optional: with checkpoint_interval S > 0,
 * a job checkpoints every S seconds of each run (counted from each start or
 * resume), the policy sees it (sched_pjob.checkpointed_at, 0 before the
 * first checkpoint of a run), and a preempted job keeps only the work up to
 * its last checkpoint of that run: the work since (or since it resumed and
 * paid its restart penalty, without a checkpoint) is lost, to be done
 * again, and counted in sim_stats.lost_gpu_s. The protections of running
 * work (conf min_run_s, max_lost_s, need_checkpoint) act as in the master;
 * with need_checkpoint or max_lost_s the clock also stops at checkpoints,
 * where a job's protection may end.
 */
#ifndef YARD_SIM_H
#define YARD_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "sched/decide.h"

enum sim_format { SIM_FORMAT_TIRESIAS, SIM_FORMAT_PHILLY, SIM_FORMAT_POLLUX };

struct sim_job {
	uint64_t id;
	uint64_t submit;         /* seconds */
	uint64_t duration;       /* run time in seconds */
	unsigned gpus;
};

struct sim_trace {
	struct sim_job *jobs;    /* owned; sorted by submit, then file order */
	size_t njobs, alloc;
};

/* sim_trace_load reads path in format fmt. 0, or -1 with eb set ("'PATH'
 * line N: ..."). pollux traces carry no durations: refused with
 * SIM_POLLUX_NEEDS_PROFILES (sim_trace_load_pollux reads them). */
int sim_trace_load(const char *path, enum sim_format fmt, struct sim_trace *out,
		   struct errbuf *eb);

#define SIM_POLLUX_NEEDS_PROFILES                                                        \
	"pollux workloads carry no durations: a job's length comes from the Pollux "     \
	"artifact's per-application profiles, so give --profiles DIR, a directory laid " \
	"out as simulator/traces in github.com/petuum/adaptdl (branch osdi21-artifact): " \
	"a folder per application with placements.csv, scalability.csv and "              \
	"validation-BATCHSIZE.csv"

/* sim_trace_load_pollux reads a Pollux workload (columns name, time,
 * application, num_replicas, batch_size) and gives each job the duration
 * pollux_duration() (sim/pollux.h) computes from the profiles in the
 * directory profiles, its GPUs packed on nodes of gpus_per_node, under model
 * (enum pollux_model). 0, or negative with eb set ("'PATH' line N: ..." and
 * why the profiles cannot give that job a duration). */
int sim_trace_load_pollux(const char *path, const char *profiles, unsigned gpus_per_node,
			  int model, struct sim_trace *out, struct errbuf *eb);
void sim_trace_release(struct sim_trace *t);
/* sim_format_parse: "tiresias", "philly", "pollux"; -1 otherwise. */
int sim_format_parse(const char *name);

/* How the replay's cluster is modelled. */
enum sim_scheme {
	/* GPUs are counted, not placed: the Tiresias simulator's count scheme,
	 * for comparisons with it (and fast on any trace) */
	SIM_SCHEME_COUNT = 0,
	/* nodes and GPUs, placed by the live scheduler (sched_decide, as the
	 * master calls it): a job of g GPUs on nodes of G is one task when g <=
	 * G, else full nodes and the rest on one more; each event decides over
	 * the whole queue */
	SIM_SCHEME_PLACE,
};

struct sim_opts {
	struct sched_policy_conf conf;
	enum sim_scheme scheme;
	unsigned nodes, gpus_per_node;
	uint64_t restart_penalty; /* seconds paid on each resume after a preemption */
	uint64_t checkpoint_interval; /* seconds of a run between checkpoints; 0: a
				       * preempted job keeps all its work */
};

/* The outcome of one job. */
struct sim_result {
	uint64_t start;          /* first start */
	uint64_t end;
	uint64_t jct;            /* end - submit */
	uint64_t queued;         /* time not running between submit and end */
	unsigned preemptions;
};

struct sim_stats {
	size_t jobs;
	size_t unfinished;       /* jobs larger than the cluster: never run */
	double avg_jct, median_jct, p95_jct, p99_jct;
	double avg_queue;
	uint64_t makespan;       /* last end - first submit */
	double utilisation;      /* GPU-seconds used / (GPUs x makespan) */
	uint64_t preemptions;
	uint64_t events;         /* scheduling rounds */
	size_t peak_queue;       /* the most jobs waiting (arrived, not running) at once */
	uint64_t lost_gpu_s;     /* GPU-seconds of work preemptions threw away
				  * (checkpoint_interval) */
};

/* sim_run replays trace under opts; results[i] (OUT, njobs entries, caller
 * allocates) is trace job i. Cannot fail. */
void sim_run(const struct sim_trace *trace, const struct sim_opts *opts,
	     struct sim_result *results, struct sim_stats *stats);

#endif
