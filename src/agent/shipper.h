/*
 * The agent's shipper thread: every request to the master but the poll
 * (session.h) goes through it, retried until acknowledged. The main loop
 * posts events (a task to track, running, finished, an exec's end, how far
 * a task's start is); each round the shipper ships the tasks' stdout and
 * stderr from their files by offset (idempotent at the master), their
 * training metrics and checkpoints, GPU utilisation, and a status report
 * of what changed, which renews the node's lease.
 */
#ifndef YARD_AGENT_SHIPPER_H
#define YARD_AGENT_SHIPPER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/gpu.h"
#include "agent/runtime.h"
#include "agent/session.h"
#include "common/httpc.h"

enum ship_event_kind { SHIP_TRACK, SHIP_RUNNING, SHIP_FINISHED, SHIP_EXEC, SHIP_PROGRESS };

struct ship_event {
	enum ship_event_kind kind;
	int64_t id;
	pid_t pid;
	struct task_exit exit;
	json_t *report;         /* owned: SHIP_EXEC's exec report, SHIP_PROGRESS's task report */
	struct ship_event *next;
};

struct ship_task;

struct shipper {
	struct session *s;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ship_event *head, *tail; /* queued by the main loop */
	bool quit;
	/* the thread's own */
	struct ship_task *tasks;
	json_t *exec_reports;   /* exec exits not yet acknowledged */
	struct gpu_sampler *sampler; /* NULL without NVML; opened and freed by agent_run */
	uint64_t util_at;       /* mono_ms of the next utilisation report */
	struct httpc c;
	unsigned gen;
	unsigned back;          /* the session's back when last seen */
	unsigned status_backoff; /* ms: the next wait after a failed status report */
	bool backlog;            /* the last round left output to ship: no tick's wait */
	/* A task's metrics are parsed and shipped on a thread of their own,
	 * with a connection of its own, while this one ships its logs
	 * (shipper.c: metrics_start, metrics_join). */
	struct metrics_worker {
		pthread_t thread;
		bool started;           /* else each task's metrics run on the shipper's thread */
		struct httpc c;
		/* under the shipper's lock: */
		struct ship_task *task; /* the task to ship the metrics of; NULL: none */
		bool busy, quit;
		int result;             /* metric_ship_run's */
		long status;
		struct errbuf eb;
		pthread_cond_t cond;
	} mw;
};

/* shipper_start starts sh's thread for session s (it takes a reference)
 * with the GPU sampler (NULL without NVML; sh's from then on); -1 when the
 * thread cannot start. */
int shipper_start(struct shipper *sh, struct session *s, struct gpu_sampler *sampler);
/* shipper_stop: the thread finishes its events and ends; what is still
 * queued is dropped (the next agent ships it from the task files). */
void shipper_stop(struct shipper *sh);

/* shipper_post queues ev (taken) for the shipper. */
void shipper_post(struct shipper *sh, struct ship_event *ev);
/* ship_event queues an event of kind about task id (e: its exit, or NULL). */
void ship_event(struct shipper *sh, enum ship_event_kind kind, int64_t id, pid_t pid, const struct task_exit *e);
/* ship_progress: how far task id's start is, REPORT (owned: {state, ...}),
 * reported in place of any earlier one not sent yet. */
void ship_progress(struct shipper *sh, int64_t id, json_t *report);

#endif
