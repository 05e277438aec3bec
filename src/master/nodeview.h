#ifndef YARD_MASTER_NODEVIEW_H
#define YARD_MASTER_NODEVIEW_H
/*
 * The nodes as the scheduler sees them: every node of m->nodes whole and
 * free, in that order (a scheduling pass, admission, start estimates), and
 * what the tasks that hold resources use subtracted from it.
 */
#include "master/core.h"
#include "sched/sched.h"

/* Four allocations, not two a node (a pass over 10,000 nodes spent more in
 * calloc and free than in deciding). */
struct nodeview {
	struct sched_node *sn;
	struct sched_gpu **gp;      /* gp[i]: node i's GPUs, in gpus */
	struct sched_gpu *gpus;
	struct sched_label *labels;
};

/* Every node, whole and free; nodeview_release frees it. */
void nodeview_take(struct master *m, struct nodeview *s);
void nodeview_release(struct nodeview *s);

/* Subtracts what the tasks that hold resources use from sn (and gp, its
 * GPUs), a view of m->nodes in their order. */
void nodeview_account_use(struct master *m, struct sched_node *sn, struct sched_gpu **gp);

#endif
