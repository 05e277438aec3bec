/*
 * Runtimes: how a task's process tree is started, watched and stopped. A
 * table of function pointers, chosen per task at run time: the process
 * runtime (runtime_process.c) and the docker runtime (runtime_docker.c),
 * both through a shim (`yard shim`, shim.h and shim_docker.h) that owns the
 * task and outlives the agent.
 *
 * Every runtime keeps its state in the task dir (docs/protocol.md) so that
 * an agent restarted after a crash can reattach to what still runs.
 */
#ifndef YARD_AGENT_RUNTIME_H
#define YARD_AGENT_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/gpu.h"
#include "agent/taskdir.h"
#include "base/error.h"

/* Node-local settings every runtime needs; borrowed, outlive the tasks. */
struct runtime_ctx {
	const char *work_dir;
	const char *agent_name;
	/* "yard/NAME-HASH": the agent's own cgroup subtree. HASH (of the work
	 * dir) keeps two agents that share a name on one host, or a reinstalled
	 * agent whose task ids start again at 1, out of each other's cgroups. */
	const char *cgroup_base;
	const char *dev_dir;       /* "/dev" */
	const char *shim_exe;      /* yard-shim, or the yard binary (both take "shim --dir D") */
	const char *yard_exe;      /* the yard binary: "yard" as a task's argv[0] */
	const char *master_url;    /* the master as this agent reaches it (YARD_MASTER) */
	const char *master_ca;     /* NULL or how tasks verify an https master: YARD_CA */
	const char *master_pin;    /* NULL or YARD_PIN (common/httpc.h) */
	const char *cgroup_root;   /* NULL: /sys/fs/cgroup */
	bool cgroups;              /* false: no usable cgroup hierarchy (no isolation) */
	bool shims_fence;          /* shim.json names WORK/heartbeat.json (heartbeat.h) */
	const struct gpu_list *gpus;
	/* the Docker Engine API socket (Docker's or Podman's); NULL: this agent
	 * runs no containers */
	const char *docker_socket;
};

/* One task as a runtime sees it. */
struct runtime_task {
	int64_t id;
	char *dir;        /* owned: WORK/tasks/ID */
	char *code;       /* owned or NULL: path of the job's code archive */
	pid_t pid;        /* the supervisor (shim) */
	bool child;       /* pid is our own child: it cannot be reused before we reap it */
	/* start_fd and exit_fd stay open until cleanup: the agent's event loop
	 * watches them, and an fd closed under a watcher would let the loop,
	 * when it stops watching, drop the registration of whatever file got
	 * that number next (another task's). */
	int start_fd;     /* readable once the start succeeded or failed; -1 if none */
	bool start_known; /* the start result was read */
	char building[128]; /* the image its shim builds before the start (imagebuild.h), or "" */
	int exit_fd;      /* a pidfd, readable once the supervisor exited; -1 if none */
	bool run_as;      /* the task runs as uid:gid (agent --run-as, runas.h) */
	uid_t uid;
	gid_t gid;
};

struct runtime_ops {
	const char *name;
	/* start launches the task described by TASKDIR/task.json (already
	 * written). On success start_fd and exit_fd are set (owned by t). */
	int (*start)(const struct runtime_ctx *ctx, struct runtime_task *t, struct errbuf *eb);
	/* started reads the start result once start_fd is readable: 1 and
	 * *task_pid when the task runs; 0 when it failed (exit.json says why);
	 * YERR(UNAVAILABLE) when the answer is not complete yet (t->building
	 * then names the image a shim builds first, once it said so). Once
	 * known, later calls return 0 (the start is reported once). */
	int (*started)(struct runtime_task *t, pid_t *task_pid);
	/* stop asks the task to stop (graceful, then forced by the supervisor). */
	int (*stop)(struct runtime_task *t);
	/* reattach finds the supervisor of an existing task dir after an agent
	 * restart: 1 when it still runs (exit_fd set), 0 when it is gone. */
	int (*reattach)(const struct runtime_ctx *ctx, struct runtime_task *t);
	/* wait: 0 and *out when the task has finished; YERR(NOT_FOUND) while
	 * it runs. A supervisor that died without a verdict yields a "lost" exit. */
	int (*wait)(struct runtime_task *t, struct task_exit *out);
	/* cleanup closes the fds and frees t's contents. */
	void (*cleanup)(struct runtime_task *t);
};

extern const struct runtime_ops runtime_process_ops;
extern const struct runtime_ops runtime_docker_ops;

/* ---- what both runtimes share (runtime_process.c): a task run by a shim ---- */

/* runtime_shim_conf: the shim.json every shim reads (shim.h), for TASK (the
 * task.json document). Returns a new reference. */
/* runtime_shim_exe: the shim to start: self_exe when given, else yard-shim
 * next to our own binary (it starts in a millisecond), else our own
 * binary's `shim` role. Caller frees. */
char *runtime_shim_exe(const char *self_exe);
json_t *runtime_shim_conf(const struct runtime_ctx *ctx, const struct runtime_task *t, const json_t *task);
/* runtime_shim_spawn starts `EXE shim --dir T->DIR` in a session of its own
 * (it outlives the agent) and sets t's pid, start_fd and exit_fd. */
int runtime_shim_spawn(struct runtime_task *t, const char *exe, struct errbuf *eb);
int runtime_shim_started(struct runtime_task *t, pid_t *task_pid);
int runtime_shim_stop(struct runtime_task *t);
int runtime_shim_reattach(const struct runtime_ctx *ctx, struct runtime_task *t);
int runtime_shim_wait(struct runtime_task *t, struct task_exit *out);
void runtime_shim_cleanup(struct runtime_task *t);

#endif
