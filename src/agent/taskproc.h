/*
 * A process started inside a running task of the process runtime, the way
 * its shim started the task itself (shim.h): the task's environment
 * (task.json's env and shim.json's node-local dirs), working dir, cgroups
 * and user. The shim starts the task and its MPI execs with it; the
 * agent's exec sessions (agent/sessions.h) start what a user runs with
 * `yard exec` with it. Part of the shim's library: libc, jansson and
 * yard's base only.
 */
#ifndef YARD_AGENT_TASKPROC_H
#define YARD_AGENT_TASKPROC_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agent/cgroup.h"
#include "base/error.h"
#include "base/spawn.h"

/* The PATH of a task whose assignment sets none. */
#define TASKPROC_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* taskproc_env: the task's environment, NULL-terminated "KEY=VALUE"
 * strings (caller frees with taskproc_strv_free): the assignment's env
 * exactly, the node-local YARD_CHECKPOINT_DIR, YARD_DATA_DIR and
 * YARD_OUTPUT_DIR, and where the assignment has none, the PATH, HOME (the
 * working dir), YARD_MASTER, YARD_CA and YARD_PIN every task gets. */
char **taskproc_env(const json_t *task, const json_t *conf);
void taskproc_strv_free(char **v);

/* taskproc_user: the user the task runs as (shim.json's run_as) set into
 * o (SPAWN_SETUID, uid, gid); nothing when none is set. YERR(BAD_REQUEST)
 * for a run_as that names root or is out of range. */
int taskproc_user(const json_t *conf, struct spawn_opts *o, struct errbuf *eb);

/* What a process in a running task is started with. */
struct taskproc {
	char **argv;            /* owned: argv[0] resolved (below) */
	char **env;             /* owned (taskproc_env) */
	char *cwd;              /* owned: the task's working dir */
	struct cgroup cg;       /* the task's groups, joined (never created) */
	bool have_cg;
	struct spawn_opts user; /* only flags (SPAWN_SETUID), uid and gid are set */
};

/* taskproc_prepare reads TASK_DIR/task.json and TASK_DIR/shim.json and
 * fills p for argv (a JSON array of 1 or more strings). argv[0] of "yard"
 * is the agent's own binary; one without a '/' is looked up in the task's
 * PATH here, not in the caller's (YERR(NOT_FOUND) naming the PATH when no
 * directory of it holds an executable of that name), so that no
 * environment variable of the caller changes. Released by
 * taskproc_release, also on error. */
int taskproc_prepare(struct taskproc *p, const char *task_dir, const json_t *argv, struct errbuf *eb);
/* taskproc_spawn_opts points o's argv, env, cwd, cgroups and user at p's
 * (o's stdio and other flags are the caller's). */
void taskproc_spawn_opts(const struct taskproc *p, struct spawn_opts *o);
void taskproc_release(struct taskproc *p);

#endif
