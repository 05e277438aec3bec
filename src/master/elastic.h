/*
 * Elastic pools in the master (docs/elastic.md): nodes that come and go
 * with the queue, made and removed by a pool's provisioner (provision.h).
 * What to do is decided by sched/elastic.h (pure); this module applies it
 * on the master's loop and keeps the record:
 *
 *  - scale-up: after every full scheduling decision, what it could not
 *    place becomes, per provisioned pool, a request for the fewest nodes of
 *    the pool's shape that would run it, within the pool's maximum, the
 *    limit of nodes pending at once and a cooldown after a failure; the
 *    waiting jobs' reasons say so ("provisioning: 2 nodes requested from
 *    slurm partition gpu (job 4411)"). A pool is also kept at its minimum.
 *  - scale-down: a provisioned node idle for its pool's idle time, above
 *    the pool's minimum and not within the cooldown after a scale-up, is
 *    drained first (no task is ever stopped), then its agent is told to
 *    leave; once it has (or was lost, or never registered in time) the
 *    provisioner is told to remove it.
 *  - the record: every request, with the state of each node it made, is a
 *    row of the store (STORE_PROVISION), written before the provisioner is
 *    asked. A restarted master finds what was asked: a request whose answer
 *    was lost is recovered (the provisioner says what it made, or the
 *    nodes' registrations do) and never asked again; nodes that do not come
 *    back are lost and released. Every action and its outcome goes to the
 *    audit log and to GET /metrics.
 *
 * Provisioners' programs run on worker threads (uv_queue_work); their
 * answers are applied on the loop. Everything else here is the loop's.
 */
#ifndef YARD_MASTER_ELASTIC_H
#define YARD_MASTER_ELASTIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"
#include "master/elastic_conf.h"
#include "sched/decide.h"

struct master_config;
struct strbuf;
struct elastic;

/* elastic_install makes c the master's provisioner settings (taking its
 * contents; c is left empty); requests under way keep the provisioner
 * that made them. Makes m->elastic on first use. */
void elastic_install(struct master *m, struct elastic_conf *c);
/* elastic_stop: the master is stopping: programs still running are killed
 * and their answers dropped (a restart recovers them). */
void elastic_stop(struct master *m);
/* elastic_free frees m->elastic (master_free, after the loop has closed). */
void elastic_free(struct master *m);

/* The record, loaded with the model (core_load) and cleared with it. */
int elastic_load(struct master *m, struct errbuf *eb);
void elastic_clear(struct master *m);
/* elastic_committed: the open batch was committed; requests it holds may
 * be asked of their provisioner now. */
void elastic_committed(struct master *m);

/* elastic_after_decision applies the scale-up plan of full decision d of
 * world w (jobs[i] the master's job of w's job i) and sets the reasons of
 * the waiting jobs of provisioned pools. */
void elastic_after_decision(struct master *m, const struct sched_world *w,
			    const struct sched_decision *d, struct job *const *jobs);
/* elastic_pool_provisioned: whether pool (NULL: "default") has a
 * provisioner; a decision of new arrivals only that leaves one of its jobs
 * waiting asks for a full one. */
bool elastic_pool_provisioned(const struct master *m, const char *pool);
/* elastic_tick: timeouts, losses, releases, the minimum and scale-down
 * (every few hundred ms, when this master leads). */
void elastic_tick(struct master *m);

/* Whether any provisioned pool is configured (admission keeps no answers
 * then: what the pools could add is not a node's change). */
bool elastic_any_pool(const struct master *m);

/* Admission (jobs_submit): the nodes the provisioned pools could have, as
 * many as each pool's maximum of its shape, appended to *nodes (an array
 * of *n, grown; gpus arrays allocated into *gpus, one per node added):
 * what a job may wait for. Free *gpus' arrays, *gpus and the labels the
 * caller's fill made, as for the real ones (the added nodes' labels are
 * the shapes', not to be freed). Returns how many were added. */
size_t elastic_admission_nodes(const struct master *m, struct sched_node **nodes, size_t *n,
			       struct sched_gpu ***gpus);
/* elastic_shape_unknown: pool has a provisioner but no shape yet: a job for
 * it cannot be checked, and is admitted. */
bool elastic_shape_unknown(const struct master *m, const char *pool);

/* A node registered (nodes_register): a node asked for is ready, the
 * pool's shape is learnt from it, an ephemeral node of a provisioned pool
 * that no request names is adopted (so that it is scaled down too). */
void elastic_node_registered(struct master *m, struct node *n);
/* n's agent left for good (its last status said so), with its reason:
 * its node is released; call before n is removed. */
void elastic_node_left(struct master *m, struct node *n, const char *reason);
/* elastic_node_leaving: whether n's agent is told to leave (its work reply). */
bool elastic_node_leaving(const struct master *m, const struct node *n);
/* elastic_node_json: {"pool", "provisioner", "request", "id", "state"} of
 * the node a provisioner made, or null (new reference). */
json_t *elastic_node_json(const struct master *m, const struct node *n);
/* elastic_json: GET /v1/provisioners's answer (new reference). */
json_t *elastic_json(const struct master *m);
/* elastic_prom appends the provisioners' series to GET /metrics. */
void elastic_prom(const struct master *m, struct strbuf *sb);

#endif
