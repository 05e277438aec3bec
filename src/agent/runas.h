/*
 * Unprivileged tasks (`yard agent --run-as`). The agent and the shims stay
 * root (they write the logs and exit.json, run cgroups and containers); only
 * a task's own processes run as the user given here, with that user's gid
 * and no supplementary groups (spawn.h, SPAWN_SETUID).
 *
 *   --run-as USER          every task runs as USER (a passwd name or a
 *                          numeric uid; a name's primary gid, a uid without
 *                          a passwd entry gets gid = uid). The tasks share
 *                          one uid and can read each other's files.
 *   --run-as FIRST-LAST    a range of uids: the running tasks of one job on
 *                          this node share a uid of the range (gid = uid),
 *                          taken when its first task starts and given back
 *                          when its last one ends; two jobs never hold the
 *                          same uid at once. One uid per job, not per task,
 *                          because a job's tasks on a node share its
 *                          checkpoint dir and trust each other already (they
 *                          hold the same job token).
 *
 * uid 0 (root) is refused in both forms. The agent makes each task's dirs
 * its own (agent.c, task_own_dirs): the code dir (the working dir and HOME)
 * and the job's checkpoint dir belong to the task's uid with mode 0700; the
 * task dir is root:GID 0710 (the task reaches its own dir, no other uid
 * enters it); the dir of task dirs is 0711 (no task lists it). Staged data
 * and the cache stay root's and readable by all.
 */
#ifndef YARD_AGENT_RUNAS_H
#define YARD_AGENT_RUNAS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"

#define RUNAS_RANGE_MAX 65536 /* uids in one FIRST-LAST range */

struct runas {
	bool on;    /* --run-as was given */
	bool range; /* FIRST-LAST: a uid per job; else uid and gid for every task */
	uid_t uid;  /* one user: its uid */
	gid_t gid;  /* one user: its primary gid */
	uid_t first, last;
	int64_t *job;   /* owned, range only: job[i] holds uid first+i, 0: free */
	unsigned *refs; /* owned, range only: running tasks of job[i] on this node */
};

/* runas_parse reads a --run-as value into ra (OUT; runas_release frees it).
 * YERR(BAD_REQUEST) naming what (the flag, or the config file's line and
 * key), the value and why: an unknown user, root or uid 0, a range
 * backwards, too wide or past the largest uid. */
int runas_parse(const char *what, const char *text, struct runas *ra, struct errbuf *eb);
void runas_release(struct runas *ra);

/* runas_acquire: the uid and gid (OUT) a task of job runs as. In a range,
 * the uid job already holds, else a free one (taken); YERR(UNAVAILABLE)
 * when every uid of the range is held by other jobs. Each successful call
 * is matched by one runas_put. */
int runas_acquire(struct runas *ra, int64_t job, uid_t *uid, gid_t *gid, struct errbuf *eb);
/* runas_hold marks uid as job's again (a task found running after an agent
 * restart); false when uid is outside the range or held by another job. */
bool runas_hold(struct runas *ra, int64_t job, uid_t uid);
/* runas_put gives back one task's hold on uid; true when that was the
 * last one and the uid is free again (its dirs are then taken back). */
bool runas_put(struct runas *ra, uid_t uid);

/* runas_prepare_work_dir: with --run-as, the agent's work dir must be
 * reachable by the tasks' users (every dir above it searchable by others),
 * and its dirs of task dirs, checkpoints and outputs let a task reach its
 * own entry but list none (0711). 0, or why not. */
int runas_prepare_work_dir(const char *work_dir, struct errbuf *eb);

#endif
