/*
 * Job lengths for the Pollux (OSDI'21) workloads. Their traces name an
 * application, a GPU count and a batch size but no duration; the length of
 * a job follows from per-application profiles measured by the Pollux
 * authors, a directory laid out as simulator/traces in their artifact
 * (github.com/petuum/adaptdl, branch osdi21-artifact), one folder per
 * application holding:
 *
 *   placements.csv     placement,local_bsz,step_time,sync_time: the seconds
 *                      per step (and the part spent synchronising) with a
 *                      local batch size on a placement, a digit a node
 *                      ("124": one node with 1 GPU, one with 2, one with 4)
 *   scalability.csv    num_nodes,num_replicas,local_bsz,step_time,sync_time:
 *                      the same for spreads placements.csv does not list
 *   validation-B.csv   a row an epoch, training with batch size B: the
 *                      iterations done by its end (iteration) and, read
 *                      where present, progress, grad_sqr and grad_var
 *
 * The model is that of a fixed allocation (the artifact's Tiresias and
 * Optimus baselines with "TunedJobs": the trace's GPUs and batch size, never
 * changed): the job trains for the application's epochs; its iterations are
 * the validation curve's at the last epoch for its batch size, linear
 * between the two validated batch sizes around it; each iteration takes the
 * step time of its placement and local batch size (linear between profiled
 * local batch sizes), plus one more step without synchronisation per
 * gradient accumulation step when the local batch exceeds the largest
 * profiled one. The artifact's simulator itself advances a job by progress
 * over statistical efficiency instead of iterations (struct pollux_run's
 * progress_seconds, POLLUX_MODEL_PROGRESS); docs/scheduler.md compares the
 * two and says where both differ from the artifact.
 */
#ifndef YARD_SIM_POLLUX_H
#define YARD_SIM_POLLUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* One validation curve: iterations[e] is the count by the end of epoch e. */
struct pollux_curve {
	uint64_t batch_size;
	double *iterations;      /* owned, n entries */
	/* owned, n entries each, or all NULL when the file lacks the columns:
	 * training progress by the end of epoch e (in iterations at the
	 * smallest validated batch size) and the gradient's squared norm and
	 * variance during it */
	double *progress, *grad_sqr, *grad_var;
	size_t n;
};

/* One profiled step time. placement is "" for scalability.csv rows. */
struct pollux_step {
	char placement[24];      /* digits, a node each, as in placements.csv */
	unsigned nodes, replicas;
	double local_bsz, step_time, sync_time;
};

/* The profiles of one application, as read from DIR/NAME. */
struct pollux_app {
	char *name;                     /* owned */
	struct pollux_curve *curves;    /* owned, sorted by batch size */
	size_t ncurves;
	struct pollux_step *steps;      /* owned: placements.csv then scalability.csv */
	size_t nsteps, nplacements;     /* steps[0..nplacements) are placements.csv's */
	uint64_t init_batch_size;       /* the smallest validated batch size */
	uint64_t max_batch_size;        /* the largest validated batch size */
	double min_local_bsz, max_local_bsz; /* over placements.csv (max may be set per app) */
	size_t max_epochs;              /* the shortest validation curve's rows */
	bool stats;                     /* every curve has progress, grad_sqr, grad_var */
};

/* The profile directory; applications are read on first use. */
struct pollux_profiles {
	char *dir;                      /* owned */
	struct pollux_app **apps;       /* owned */
	size_t napps, alloc;
};

void pollux_profiles_init(struct pollux_profiles *p, const char *dir);
void pollux_profiles_release(struct pollux_profiles *p);

/* pollux_profiles_app reads DIR/NAME on first use and sets *out (owned by
 * p) to it. 0, or negative with eb naming the file, line and field at
 * fault (a name with '/' or a leading '.' is refused before any file is
 * opened). */
int pollux_profiles_app(struct pollux_profiles *p, const char *name,
			const struct pollux_app **out, struct errbuf *eb);

/* How one job runs under the model. */
struct pollux_run {
	unsigned nodes;          /* of the packed placement */
	char placement[24];      /* its digits, rotated as looked up ("" past 23 nodes) */
	unsigned accum_steps;    /* extra steps per iteration (gradient accumulation) */
	uint64_t atomic_bsz;     /* examples per GPU per step */
	uint64_t batch_size;     /* replicas x atomic_bsz x (accum_steps + 1) */
	double step_time;        /* seconds per iteration, accumulation included */
	double iterations;       /* to the end of the last epoch */
	double seconds;          /* iterations x step_time */
	/* The artifact's own stepping (its Job.step), where app->stats: each
	 * epoch's progress over the statistical efficiency of batch_size then,
	 * (var + sqr) / (var / scale + sqr) with scale = batch_size / the
	 * smallest validated batch size; 0 otherwise. */
	double progress_iterations;
	double progress_seconds; /* progress_iterations x step_time */
};

/* Which length the trace loader gives a job: seconds (the default) or
 * progress_seconds of struct pollux_run. */
enum pollux_model { POLLUX_MODEL_ITERATIONS, POLLUX_MODEL_PROGRESS };

/* pollux_duration: how long app trains with batch_size on replicas GPUs
 * placed packed onto nodes of gpus_per_node (full nodes first, the rest on
 * one more). 0 with *out set, or negative with eb saying why the profiles
 * cannot answer (no step time for that spread or local batch size, a batch
 * size outside the validated ones). */
int pollux_duration(const struct pollux_app *app, unsigned replicas, unsigned gpus_per_node,
		    uint64_t batch_size, struct pollux_run *out, struct errbuf *eb);

#endif
