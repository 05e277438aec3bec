/*
 * Execs: a process started inside a running task of a job, on request of
 * that job (its token) or its owner, the way `kubectl exec` reaches into a
 * pod. The MPI launcher uses it instead of ssh: mpirun, in rank 0's task,
 * asks for OpenMPI's daemon to be started in the job's task on each other
 * node; the master hands the request to that node's agent with the task's
 * desired state, the agent runs it in the task's cgroup with the task's
 * environment, GPUs and log files, and reports its exit.
 *
 * Execs live in the master's memory only: they are as short-lived as the
 * mpirun that asked for them (a master restart fails the mpirun, and the
 * job's restart policy takes over). Finished ones are forgotten after
 * EXEC_KEEP_MS.
 */
#ifndef YARD_MASTER_EXECS_H
#define YARD_MASTER_EXECS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

#define EXEC_KEEP_MS (10 * 60 * 1000)

struct exec {
	uint64_t id;
	uint64_t job_id, task_id;
	char **argv;            /* owned, NULL-terminated */
	bool done;
	bool has_exit;
	int exit_code, signal;
	char *message;          /* owned or NULL */
	uint64_t done_ms;       /* mono_ms when it finished */
};

/* execs_create starts argv in job j's current task on the node whose name or
 * advertised address is host (the lowest-ranked task there). Fails with
 * YERR(CONFLICT) when j is not starting or running, YERR(NOT_FOUND) when no
 * task of j is placed on host, YERR(BAD_REQUEST) for a bad argv. */
int execs_create(struct master *m, struct job *j, const char *host, const json_t *argv,
		 struct exec **out, struct errbuf *eb);
struct exec *execs_find(struct master *m, uint64_t id);
/* execs_settle marks e done when its task has ended without a report (the
 * task's end kills what ran in it). Returns e->done. */
bool execs_settle(struct master *m, struct exec *e);
/* execs_reported applies an agent's report {"task", "id", "exit_code",
 * "signal", "message"} from node n; unknown or foreign ids are ignored. */
void execs_reported(struct master *m, const struct node *n, const json_t *report);
/* execs_work_json: the pending execs of task t for its agent (new ref). */
json_t *execs_work_json(struct master *m, const struct task *t);
json_t *execs_json(const struct exec *e);
/* execs_prune forgets execs finished more than EXEC_KEEP_MS ago. */
void execs_prune(struct master *m);
void execs_clear(struct master *m);

#endif
