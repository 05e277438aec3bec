/*
 * Placement: where one gang job goes on the cluster's current free state.
 * Pure (no I/O, no globals); sched_plan() uses it for every job it tries, in
 * the order its policy chooses, and a simulator can do the same.
 *
 * The rules, in order:
 *   1. Gang: every task of the job is placed, or none (the state is left
 *      exactly as it was).
 *   2. Eligibility: a node must be schedulable, in the job's pool (NULL is
 *      "default" on both sides), have a container runtime when the job has
 *      an image, and carry every label the job asks for; a GPU
 *      must be free, of the job's gpu_model (NULL or "*" = any) and have at
 *      least gpu_memory bytes. Each task needs its GPUs, CPUs and memory on
 *      one node (memory is not checked on nodes whose memory is unknown);
 *      max_nodes (0 = no limit) caps the nodes of the job.
 *   3. Fewest nodes: when the whole job fits on one node it goes on one.
 *      A gang whose tasks all ask the same (GPUs, CPUs, memory) goes on
 *      the fewest nodes that can hold it, chosen with 4-5 over the whole
 *      set of nodes (any split of the tasks among them, each node taking at
 *      least one). Other gangs are packed, largest task first, onto the
 *      nodes with the largest free blocks until the rest fits on one node,
 *      which is then chosen as in 4-5.
 *   4. Fewest islands: on one node, where the job spans the fewest
 *      NVLink/PCIe islands (as few as that node could ever give); over
 *      several nodes, the fewest islands in all.
 *   5. Best fit: on one node, the node with the fewest free GPUs that still
 *      fits, and within a node the smallest island block that fits, so that
 *      large free blocks stay whole for large jobs. Over several nodes, the
 *      set with the fewest free GPUs in all (the least left over on the
 *      nodes it touches), then the set of the smallest nodes with what is
 *      left over on them kept together (e.g. 12 GPUs on nodes with 8, 7, 7
 *      and 5 free take 7 + 5 and leave the 8 whole). A job with no GPUs goes
 *      where the fewest GPUs are free.
 * Free nodes are kept in buckets by free-GPU count, so a placement looks at
 * a handful of nodes, not all of them; the search for the best island
 * layout looks at most PLACE_SCAN_CAP nodes past the first that fits, and a
 * gang over several nodes takes, in each free-GPU bucket from the fullest
 * down, the first nodes it can use, as many as it could need of that size,
 * until smaller buckets cannot help.
 *
 * Ownership: the state borrows the input (which must outlive it and is never
 * modified) and owns its own working copy of what is free.
 */
#ifndef YARD_SCHED_PLACE_H
#define YARD_SCHED_PLACE_H

#include <stdbool.h>

#include "sched/sched.h"

#define PLACE_SCAN_CAP 64

struct place_state;

/* place_state_new: the free state of in's nodes (in->jobs is not used).
 * Freed with place_state_free. Cannot fail. */
struct place_state *place_state_new(const struct sched_input *in);
void place_state_free(struct place_state *s);

/* place_job tries to place every task of job on s. On success it takes the
 * resources from s, fills out[0..job->ntasks-1] (OUT: .task, .node, .gpus,
 * .ngpus; .gpus is allocated, the caller frees it; .job is left 0) and
 * returns true. On failure s is unchanged, nothing is allocated, and why
 * (OUT: .code and .message only) says why, e.g. code insufficient_gpus with
 * "needs 16 GPUs on <=2 nodes; largest free block is 6 on node gpu-3". */
bool place_job(struct place_state *s, const struct sched_job *job, struct sched_start *out,
	       struct sched_wait *why);

/* place_labels_match: whether node n carries every label job asks for. */
bool place_labels_match(const struct sched_node *n, const struct sched_job *job);

#endif
