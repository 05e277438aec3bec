/*
 * Accounting (docs/api.md, "Usage"), as Slurm's sreport does it: what
 * tasks used over a window of time, grouped by user, team or pool.
 *
 * A task's run is [started_at, finished_at] (now for one still running).
 * Its GPU-seconds are its GPUs times the part of its run inside the window
 * (a run that began before the window counts from its start); its
 * CPU-seconds and peak memory are what its cgroup said when it ended
 * (usage_task_ended), the CPU-seconds prorated the same way. A task still
 * running, or one whose agent could not say (a container, a lost task),
 * adds GPU-seconds only.
 */
#ifndef YARD_MASTER_USAGE_H
#define YARD_MASTER_USAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct task;

/* usage_task_ended keeps what task t's end report r says its cgroup used
 * ("cpu_usec", "memory_peak": counts, or null). */
void usage_task_ended(struct task *t, const json_t *r);

/* usage_task_json: what t used, {"cpu_seconds", "memory_peak"}, each
 * null until its agent has said (at its end). */
json_t *usage_task_json(const struct task *t);

/* One task's run, as usage_report reads it. */
struct usage_run {
	const char *key;        /* borrowed: its group (a user, team or pool; "" for none) */
	uint64_t job;           /* the runs of one job are adjacent */
	unsigned ngpus;
	uint64_t start, end;    /* wall us */
	bool ended;             /* its end is known (else it runs until end = now) */
	bool has_cpu, has_memory_peak;
	uint64_t cpu_usec, memory_peak;
};

#define USAGE_BUCKETS_MAX 1000

/* usage_report: the rows of runs inside [since, until), one per key, most
 * GPU-seconds first: {"key", "jobs", "tasks", "gpu_seconds",
 * "cpu_seconds", "memory_peak"|null}; with step (us, > 0) also the
 * GPU-seconds of each key in each step from since, as
 * [{"start": us, "gpu_seconds": {key: s}}]. YERR(BAD_REQUEST) naming
 * "step" when that makes more than USAGE_BUCKETS_MAX buckets. */
int usage_report(const struct usage_run *runs, size_t n, uint64_t since, uint64_t until, uint64_t step,
		 json_t **rows, json_t **buckets, struct errbuf *eb);

#endif
