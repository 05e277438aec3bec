/*
 * Elastic capacity, decided: what the scheduler's decision could not place
 * is the demand of the pools that have a provisioner (docs/elastic.md), and
 * this module says, as pure functions, how many nodes of a pool's shape to
 * ask for and which idle nodes to give back. The master (master/elastic.h)
 * applies what they say; they do no I/O and keep no state.
 *
 * Scale-up (elastic_plan): a waiting job is demand when it waits for
 * resources (GPUs, CPUs, memory, a GPU model or memory, labels, a container
 * runtime, nodes at all), not when its policy holds it back (fifo's head of
 * line, a team at its quota, a preemption under way for another job) nor
 * when a preemption is being made for it. Per pool, its demand is placed,
 * in queue order and by placement itself (place.h), on what is free after
 * the decision's starts, plus the nodes asked for that have not registered
 * yet (each a free node of the shape), plus k new ones; the answer is the
 * fewest k, up to the pool's room, that places as many of them as the whole
 * room would. Each demand job is then covered by the pending nodes, by the
 * new ones, would be by more nodes than the pool may have (no room), or
 * by no number of nodes of the shape (never). A pool whose shape is not
 * known yet (none configured, no node registered) gets one node to learn
 * it from, when it has demand and nothing pending.
 *
 * Scale-down (elastic_scale_down): of a pool's provisioned nodes, those
 * idle (no task holding them) for at least the pool's idle time, the
 * longest idle first, as many as leave the pool at its minimum.
 */
#ifndef YARD_SCHED_ELASTIC_H
#define YARD_SCHED_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/decide.h"
#include "sched/sched.h"

/* What one node of a pool is: what a new one would bring. */
struct elastic_shape {
	unsigned gpus;
	const char *gpu_model;        /* borrowed; NULL: none said (meets no model demand) */
	uint64_t gpu_memory;          /* bytes per GPU; 0: unknown (meets no memory demand) */
	uint64_t cpus_milli;
	uint64_t memory;              /* bytes; 0: unknown (no limit) */
	const struct sched_label *labels; /* borrowed */
	size_t nlabels;
	bool containers;              /* has a container runtime */
};

/* One pool with a provisioner, as it stands now. */
struct elastic_pool {
	const char *pool;             /* borrowed; NULL: "default" */
	const struct elastic_shape *shape; /* borrowed; NULL: not known yet */
	unsigned pending;             /* asked for and not registered: free nodes of the shape */
	unsigned room;                /* the most new nodes it may ask for now (its maximum,
	                               * the pending limit, a cooldown: 0) */
	unsigned max;                 /* the most nodes it may ever have (tells no room from never) */
};

/* How a waiting job stands with respect to new nodes. */
enum elastic_cover {
	ELASTIC_NOT_DEMAND = 0,       /* not in a provisioned pool, or not waiting for resources */
	ELASTIC_PENDING,              /* the nodes asked for already will run it */
	ELASTIC_NEW,                  /* the nodes of this plan will */
	ELASTIC_NO_ROOM,              /* more nodes would, past what the pool may ask for now */
	ELASTIC_NEVER,                /* no number of nodes of the shape would */
	ELASTIC_NO_SHAPE,             /* the pool's shape is not known yet */
};

struct elastic_plan {
	unsigned *add;                /* per pool: nodes to ask for now */
	unsigned *demand;             /* per pool: its waiting jobs that nodes pending or new will run */
	enum elastic_cover *cover;    /* per wait of the decision (d->waits[i]) */
};

/* elastic_plan: the plan for pools[0..npools) after decision d of world w
 * (not new_only, not count: a full decision placed on nodes). *out is
 * overwritten (release it with elastic_plan_release). Cannot fail. */
void elastic_plan(const struct sched_world *w, const struct sched_decision *d,
		  const struct elastic_pool *pools, size_t npools, struct elastic_plan *out);
void elastic_plan_release(struct elastic_plan *p);

/* elastic_wait_is_demand: whether a wait code is a want of resources (what
 * nodes could answer), not a policy's hold. */
bool elastic_wait_is_demand(const char *code);

/* Whether job has tasks in pool (its own pool's or a role's). */
bool elastic_job_uses_pool(const struct sched_job *job, const char *pool);

/* One provisioned node of a pool, for scale-down. */
struct elastic_node {
	bool idle;                    /* ready, not drained, no task holds it */
	uint64_t idle_since;          /* when it became idle (any monotone clock) */
};

/* elastic_scale_down: which of nodes[0..n) (the pool's provisioned nodes
 * that count towards its size, busy ones included) to give back at now:
 * those idle for at least idle_for, the longest idle first, no more than
 * n - min. OUT out (room for n): their indexes; returns how many. */
size_t elastic_scale_down(const struct elastic_node *nodes, size_t n, unsigned min,
			  uint64_t idle_for, uint64_t now, size_t *out);

#endif
