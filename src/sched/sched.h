/*
 * The scheduler: a pure function of a cluster snapshot, a queue and a clock.
 * No I/O, no globals, no knowledge of the master: the master and the
 * simulator build a struct sched_input and apply the struct sched_plan that
 * comes back.
 *
 * Policy (for now): jobs in order of priority (high first), then age
 * (submitted_at, then id); each job is placed as a gang (every task or none)
 * by place.h: whole GPUs, fewest nodes, then fewest NVLink/PCIe islands, then
 * best fit, within the job's pool and labels, GPU model and GPU memory, and
 * for a job with an image on nodes with a container runtime only. A job
 * that does not fit is skipped (later jobs may still start) and gets a reason
 * {code, message} and its position among the waiting jobs. Nodes that are not
 * schedulable (drained, lost) get nothing; a waiting job's message names the
 * drained nodes that could have taken it. A job admitted with wait_for_nodes
 * that no cluster state could ever run waits with code "infeasible" and
 * sched_check_feasible's message. Two tasks never share a GPU.
 *
 * Ownership: the input is borrowed and not modified; the plan owns its arrays
 * and is freed with sched_plan_release().
 */
#ifndef YARD_SCHED_H
#define YARD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched_gpu {
	unsigned index;      /* the node's GPU index (CUDA order) */
	const char *model;   /* borrowed; may be NULL */
	bool free;           /* not held by any task */
	/* placement: */
	unsigned island;     /* NVLink/PCIe island id within the node (GPUs that share
	                      * one talk fastest); any numbering, equal = same island */
	uint64_t memory;     /* bytes; 0 = unknown (meets no gpu_memory demand) */
};

/* A label: key=value, as an agent's --label or a job's placement.labels. */
struct sched_label {
	const char *key;     /* borrowed */
	const char *value;   /* borrowed */
};

struct sched_node {
	const char *name;        /* borrowed */
	bool schedulable;        /* ready: not drained, not lost */
	bool drained;            /* an admin drained it (live or lost): a waiting
	                          * job's reason names it, since a resume would help */
	const char *drain_reason; /* borrowed or NULL: the admin's reason */
	const struct sched_gpu *gpus; /* borrowed */
	size_t ngpus;
	uint64_t cpus_milli;     /* capacity */
	uint64_t memory;         /* capacity in bytes; 0 = unknown (no limit) */
	uint64_t free_cpus_milli;
	uint64_t free_memory;
	/* placement: */
	const char *pool;        /* borrowed; NULL = "default" */
	const struct sched_label *labels; /* borrowed */
	size_t nlabels;
	bool containers;         /* has a container runtime: may run jobs with an image */
	const char *const *cache; /* borrowed: content keys of the data the node holds */
	size_t ncache;
};

/* One task of a job: what it needs on one node. */
struct sched_task {
	const char *role;        /* borrowed */
	unsigned index;
	unsigned gpus;
	uint64_t cpus_milli;
	uint64_t memory;         /* bytes; 0 = none asked */
};

struct sched_job {
	uint64_t id;
	/* The order of a scheduling policy (policy.h), smaller first; 0 (no
	 * policy's order) goes before any ranked job, by priority then age. */
	uint64_t rank;
	int priority;            /* larger runs first (low 0, normal 1, high 2) */
	uint64_t submitted_at;   /* any monotone time: older first */
	const struct sched_task *tasks; /* borrowed */
	size_t ntasks;
	unsigned max_nodes;      /* 0 = no limit */
	const char *gpu_model;   /* NULL or "*" = any model */
	/* placement: */
	uint64_t gpu_memory;     /* minimum bytes per GPU; 0 = any */
	const char *pool;        /* NULL = "default"; only nodes of this pool */
	const struct sched_label *labels; /* borrowed; every one must be on the node */
	size_t nlabels;
	const char *image;       /* borrowed; the job's container image, or NULL: it
	                          * runs on any node, else only on nodes with
	                          * containers */
	/* borrowed: content keys of the job's data (docs/datasets.md); among
	 * placements that are otherwise equal, nodes holding more of them win */
	const char *const *data_keys;
	size_t ndata_keys;
	bool wait_for_nodes;     /* admitted without the cluster check: while it
	                          * waits, sched_check_feasible gives its reason */
	/* borrowed or NULL: per task, the pool its role runs in when it is not
	 * the job's (tasks.ROLE.pool; NULL entries: the job's). A job's roles
	 * may span pools (its parameter servers on CPU nodes, its workers on
	 * GPU nodes): each pool's part is placed in its pool, all or none. */
	const char *const *task_pools;
};

struct sched_input {
	const struct sched_node *nodes;
	size_t nnodes;
	const struct sched_job *jobs; /* the queue, in any order */
	size_t njobs;
	uint64_t now;            /* the clock (unused by the current policy) */
};

/* One task placed: input indexes, and the GPU indexes it gets on the node. */
struct sched_start {
	size_t job;              /* index into input jobs */
	size_t task;             /* index into that job's tasks */
	size_t node;             /* index into input nodes */
	unsigned *gpus;          /* owned by the plan; ngpus entries (node GPU indexes) */
	unsigned ngpus;
};

/* A job left waiting, with why. */
struct sched_wait {
	size_t job;              /* index into input jobs */
	unsigned position;       /* 1 = next in line */
	char code[32];           /* insufficient_gpus, insufficient_cpus, insufficient_memory,
	                          * no_nodes, too_many_nodes, gpu_model, gpu_memory, pool,
	                          * no_container_runtime, labels, infeasible */
	char message[256];
};

struct sched_plan {
	struct sched_start *starts; /* grouped by job, every task of a started job */
	size_t nstarts;
	struct sched_wait *waits;   /* in queue order */
	size_t nwaits;
};

/* One pool's part of a job whose roles run in several pools: the job with
 * only the tasks of that pool, as placement and the feasibility check take
 * it. A part of a role's own pool keeps the job's constraints (labels, GPU
 * model, image) but not its max_nodes, which counts the job's own pool. */
struct sched_job_part {
	struct sched_job job;    /* job.tasks owned; job.pool the part's pool */
	size_t *task;            /* owned: job.tasks[k] is the whole job's task[k] */
};

/* sched_job_multi_pool: whether some task of j runs in a pool of its own. */
bool sched_job_multi_pool(const struct sched_job *j);
/* sched_job_split: j's tasks by pool (a task's own, else j's), the part of
 * j's pool first; OUT *parts (free with sched_job_parts_free). Returns how
 * many (1 when every task is in j's pool). */
size_t sched_job_split(const struct sched_job *j, struct sched_job_part **parts);
void sched_job_parts_free(struct sched_job_part *parts, size_t n);

/* sched_plan computes a plan for in into *out (overwritten; release it with
 * sched_plan_release). It cannot fail. */
void sched_plan(const struct sched_input *in, struct sched_plan *out);
void sched_plan_release(struct sched_plan *plan);

/* sched_check_feasible tells whether some state of the cluster could ever
 * run job: nodes is the whole cluster (every node, whatever its state; the
 * caller leaves out only removed ones) and what is in use does not count.
 * Refused, with the field named:
 *  - "pool": no node is in the job's pool;
 *  - "image": the job has an image and no node of its pool has a container
 *    runtime (then only such nodes count for the rest);
 *  - "placement.labels": no node of the pool has every label;
 *  - "placement.gpu_model", "placement.gpu_memory": no such GPU;
 *  - "tasks.ROLE.gpus", ".cpus", ".memory": a task bigger than every node;
 *  - "tasks.ROLE.replicas" (or "tasks" for several roles): the gang needs more
 *    GPUs than the nodes that may hold it have, or more tasks of a role than
 *    fit whole on them;
 *  - "placement.max_nodes": the max_nodes nodes with the most such GPUs hold
 *    fewer than the gang needs.
 * Returns 0 when the job could run or there are no nodes at all; else -1 with
 * field and a message such as "tasks.worker.replicas: 4 x 8 GPUs = 32 GPUs,
 * but the cluster has 12 GPUs on 2 nodes" written into the caller's buffers.
 * A job whose roles span pools is checked part by part (sched_job_split);
 * a part of a role's own pool that has no node is refused with field
 * "tasks.ROLE.pool". */
int sched_check_feasible(const struct sched_node *nodes, size_t nnodes,
			 const struct sched_job *job, char *field, size_t field_len,
			 char *msg, size_t msg_len);

#endif
