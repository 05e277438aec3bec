/*
 * The API documents of the master's model (new references): a job as
 * GET /v1/jobs shows it (whole, or redacted for those who may not see it),
 * a node as GET /v1/nodes shows it, and a node's desired state as its agent
 * polls it (GET /v1/agents/{id}/work: each task's argv and environment, from
 * the launchers).
 */
#ifndef YARD_MASTER_JOBDOCS_H
#define YARD_MASTER_JOBDOCS_H

#include <jansson.h>
#include <stdbool.h>

#include "master/core.h"

struct strbuf;

/* The API documents (new references). whole: j's document with its own
 * data (its spec's command and params, code, checkpoint); else as shown to
 * those who may not see the job whole (visibility_redact_job). */
json_t *jobs_job_json(struct master *m, const struct job *j, bool whole);
/* jobs_job_summary_json: what a listing's view=summary shows of j, the
 * columns of `yard ls` (and everyone's to see): id, name, user, state,
 * reason, submitted_at, task_count (its tasks, every attempt's), gpus
 * (asked for) and interactive. */
json_t *jobs_job_summary_json(struct job *j);
/* jobs_job_append appends jobs_job_json's document of j to out as compact
 * JSON text: a listing's cost per job is a copy. The text is kept in j
 * until j changes (core_job_changed), unless it reads the clock (a running
 * task that holds GPUs): then it is made anew each time and the function
 * returns false (what it appended is true only of this instant). */
bool jobs_job_append(struct master *m, struct job *j, bool whole, struct strbuf *out);
/* jobs_oom_message writes why t was killed out of memory into buf: the
 * limit that was hit and the spec field it came from ("worker/0 ran out of
 * memory: the task's limit of 2.0 GiB (tasks.worker.memory) was reached"). */
void jobs_oom_message(const struct task *t, char *buf, size_t len);
json_t *jobs_node_json(struct master *m, const struct node *n);
/* jobs_work_json: the node's whole desired state, {"rev", "tasks": [...]} */
json_t *jobs_work_json(struct master *m, const struct node *n);
/* jobs_ahead_json: the ids of the (at most JOBS_AHEAD_SHOWN) waiting jobs
 * just ahead of queued job j, nearest first; [] when it has no position. */
#define JOBS_AHEAD_SHOWN 10
json_t *jobs_ahead_json(const struct master *m, const struct job *j);

/* jobs_current_task: the task of job j's latest attempt named role/index
 * (role NULL: the first task), or NULL. */
struct task *jobs_current_task(const struct job *j, const char *role, unsigned index);

/* jobs_attained_gpu_s: the GPU-seconds j's tasks have held their GPUs, over
 * every attempt, up to now_us (wall clock) for the ones that still do: the
 * attained service of least-attained-service scheduling. */
uint64_t jobs_attained_gpu_s(const struct job *j, uint64_t now_us);

#endif
