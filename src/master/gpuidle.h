/*
 * GPU utilisation of jobs and idle GPUs (docs/api.md, "GPU utilisation"):
 * the seeds' "scarce yet idle" GPUs, measured.
 *
 * Each status report's per-GPU utilisation (agents sample NVML, or a
 * simulated GPU's file, every 5 s) gives each running task on the node a
 * sample: the mean over its GPUs that have a value. A job keeps the series
 * of its tasks' samples in memory, at a bounded resolution: at most
 * GPUIDLE_POINTS points, two neighbours averaged into one (and the step
 * between points doubled) when it fills, so a week-long job keeps its whole
 * history at a coarser grain.
 *
 * Under --idle-gpu-timeout T a running job whose every sample stays under
 * --idle-gpu-threshold P (percent, default 5) for T is flagged: its reason
 * becomes gpus_idle ("its 2 GPUs were under 5% for 10m (mean 0.0%)"),
 * yard_jobs_gpus_idle counts it, and the audit log has an EVENT entry; with
 * --idle-gpu-action stop the master stops it (cancelled, reason gpus_idle).
 * A sample at or over P clears the flag.
 */
#ifndef YARD_MASTER_GPUIDLE_H
#define YARD_MASTER_GPUIDLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

struct master;
struct node;
struct job;

#define GPUIDLE_POINTS 240

/* A job's utilisation series (struct job's util). */
struct gpu_series {
	uint64_t t[GPUIDLE_POINTS];  /* wall us of each point's first sample */
	float util[GPUIDLE_POINTS];  /* its mean */
	unsigned count[GPUIDLE_POINTS];
	unsigned n;
	uint64_t step_us;            /* samples closer than this to the last point join it */
	float last;                  /* the latest sample */
	uint64_t idle_since;         /* wall us of the first sample of the idle run, 0: busy */
	double idle_sum;             /* of the idle run's samples */
	unsigned idle_n;
	bool flagged;
};

/* The master's policy (its flags). */
/* --idle-gpu-threshold's default: a GPU under 5 % busy is idle */
#define GPUIDLE_DEFAULT_THRESHOLD 5

struct gpuidle_policy {
	uint64_t timeout_ms;  /* 0: no job is flagged */
	unsigned threshold;   /* percent */
	bool stop;            /* --idle-gpu-action stop */
};

/* gpuidle_parse_threshold (--idle-gpu-threshold, a percent) and
 * gpuidle_parse_action (--idle-gpu-action flag|stop: *stop); what names
 * the flag or the config file's line and key in a YERR(BAD_REQUEST). */
int gpuidle_parse_threshold(const char *what, const char *text, unsigned *pct, struct errbuf *eb);
int gpuidle_parse_action(const char *what, const char *text, bool *stop, struct errbuf *eb);

/* gpuidle_node_sampled: n's GPUs have new values: each running task on
 * it with GPUs adds a sample to its job, which is flagged (or stopped)
 * or cleared as the policy says. */
void gpuidle_node_sampled(struct master *m, struct node *n);

/* gpuidle_cluster_sample adds a point to m's cluster series: the mean
 * utilisation of every GPU of a ready node that has a value, and the
 * share of all GPUs that tasks hold (allocation), both percent. */
void gpuidle_cluster_sample(struct master *m);

/* gpuidle_cluster_json: {"util": [[unix s, %], ...], "allocated": [...]}
 * of m's cluster series (at most GPUIDLE_POINTS, halved as a job's). */
json_t *gpuidle_cluster_json(const struct master *m);

/* gpuidle_job_json: j's series for its document, {"last", "mean",
 * "idle_since", "flagged", "points": [[unix s, percent], ...]}, or null
 * before its first sample. */
json_t *gpuidle_job_json(const struct job *j);

#endif
