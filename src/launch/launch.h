/*
 * Launchers: one pure function per framework that maps a placed job to each
 * task's argv and environment (docs/architecture.md "What every task sees"). This is
 * where "one spec, any framework" lives. No I/O, no clock, no globals: the
 * master calls it when it sends a task to its agent, unit tests call it with
 * hand-made placements and compare against golden environments.
 *
 * Ranks. A job's tasks are ordered by role, in the order the spec lists the
 * roles, then by index: that order is the rank order (RANK, JAX_PROCESS_ID,
 * MPI rank 0 = the first task). Nodes are numbered by the rank of the first
 * task placed on them (NODE_RANK, the MPI hostfile's order).
 *
 * What each framework adds (besides the YARD_* variables the master sets for
 * every task; "ADDR" is the advertised address of the task's node, "IF" the
 * interface that holds it, "PORT" the port reserved for the task on its node):
 *   every framework but command, caffe and jupyter:
 *     GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME = IF (when the agent reported it)
 *   pytorch: MASTER_ADDR, MASTER_PORT (rank 0's ADDR and PORT), WORLD_SIZE
 *     (tasks), RANK, LOCAL_RANK and LOCAL_WORLD_SIZE (among the job's tasks on
 *     the same node), NODE_RANK; for torchrun's static rendezvous, where every
 *     task is one torchrun agent: PET_NNODES (= tasks), PET_NODE_RANK (= RANK),
 *     PET_MASTER_ADDR, PET_MASTER_PORT, PET_NPROC_PER_NODE (the task's GPUs,
 *     at least 1)
 *   tensorflow: TF_CONFIG = {"cluster": {ROLE: ["ADDR:PORT", ...]}, "task":
 *     {"type": ROLE, "index": I}} with every role but evaluator in cluster
 *   mxnet: DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT (the scheduler's),
 *     DMLC_NUM_SERVER, DMLC_NUM_WORKER, and DMLC_WORKER_ID for workers
 *   jax: JAX_COORDINATOR_ADDRESS ("ADDR:PORT" of rank 0), JAX_NUM_PROCESSES,
 *     JAX_PROCESS_ID
 *   mpi (and its alias horovod): rank 0 runs ["yard", "mpirun", "--", argv...]
 *     with YARD_MPI_HOSTFILE = the hostfile text ("ADDR slots=N\n" per node, N
 *     the job's tasks there) and YARD_MPI_IFNAME = IF; every other task runs
 *     ["yard", "mpi-worker"] and hosts the ranks that mpirun starts on its
 *     node through the master and that task's agent (docs/design-notes.md).
 *     In a task's argv, "yard" is the agent's own binary.
 *   caffe: "{gpus}" in an argument becomes the task's GPUs as the task sees
 *     them through CUDA_VISIBLE_DEVICES: "0,1" for a task holding two
 *   jupyter (one task): the command (jupyter-notebook) gets --no-browser,
 *     --ip=127.0.0.1, --port=PORT, --NotebookApp.port_retries=0,
 *     --NotebookApp.base_url=/v1/jobs/ID/proxy/ROLE/INDEX/PORT/ (the
 *     master's proxy to it, docs/protocol.md "Proxy"),
 *     --NotebookApp.allow_remote_access=True and --NotebookApp.allow_root=True
 *   command: nothing
 */
#ifndef YARD_LAUNCH_H
#define YARD_LAUNCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "common/spec.h"

struct launch_node {
	const char *name;
	const char *addr;       /* advertised address */
	const char *iface;      /* interface holding addr, or NULL when unknown */
};

struct launch_task {
	const char *role;
	unsigned index;         /* within its role */
	size_t node;            /* index into launch_job.nodes */
	const unsigned *gpus;   /* the node's GPU indexes the task holds */
	unsigned ngpus;
	unsigned port;          /* reserved on its node; 0 when the framework needs none */
};

/* A placed job: every task of one attempt, in rank order. Borrowed. */
struct launch_job {
	const char *framework;
	const struct launch_node *nodes;
	size_t nnodes;
	const struct launch_task *tasks;
	size_t ntasks;
	uint64_t job_id;        /* jupyter: the proxy's path names it */
};

/* launch_validate checks what the framework demands of the spec's roles
 * (tensorflow: chief, worker, ps, evaluator, at most one chief and one
 * evaluator; mxnet: exactly one scheduler, at least one worker, servers;
 * mpi: one role and no image; caffe: one task, and GPUs when "{gpus}" is used;
 * jupyter: one task). Fails with
 * YERR(INVALID_SPEC) naming the field ("tasks.scheduler.replicas: ..."). */
int launch_validate(const struct job_spec *spec, struct errbuf *eb);

/* launch_needs_port: whether each task of the framework gets a port. */
bool launch_needs_port(const char *framework);

/* launch_decides: whether the task (role, index) decides the job's success.
 * A job succeeds once every deciding task has succeeded; the others are then
 * stopped. tensorflow: the chief (worker 0 without one); mxnet: the workers;
 * mpi: rank 0 (mpirun); every other framework: every task. */
bool launch_decides(const struct job_spec *spec, const char *role, unsigned index);

/* launch_task fills task i's framework environment into env (an object of
 * strings; existing keys are replaced) and replaces *argv (NULL-terminated,
 * owned: the old one is freed) when the framework wraps the command. Fails
 * only on a job that launch_validate would refuse or a missing address. */
int launch_task(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		struct errbuf *eb);

#endif
