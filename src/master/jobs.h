/*
 * Job, task and node lifecycles in the master. Every state change goes
 * through job_transition()/task_transition() of src/common/state.h and is
 * saved into the open batch with core_save_*(). Functions that change
 * anything the scheduler looks at set m->sched_needed.
 */
#ifndef YARD_MASTER_JOBS_H
#define YARD_MASTER_JOBS_H

#include <jansson.h>

#include "master/core.h"
#include "master/jobdocs.h" /* the API documents of jobs and nodes */

struct strbuf;

struct caller;

/* jobs_submit validates body ({"spec": {...}, "code": "sha256:...",
 * "idempotency_key": K}) of caller c, checks the cluster can ever hold it,
 * and creates the job (queued) and its tasks, c's, of the spec's team
 * (which c's token must name, else YERR(FORBIDDEN)) or c's team. A key c
 * submitted with before answers the job it made (*again true) when spec and
 * code are the same, else YERR(CONFLICT): a client that lost the reply (a
 * master that failed over) sends it again without making a second job. On
 * error nothing is created and eb says why (field set for spec errors).
 * A spec whose code is in git is admitted only as gitcode_submit (gitcode.h)
 * submits it, with the archive it packed. */
int jobs_submit(struct master *m, const struct caller *c, const json_t *body,
		struct job **out, bool *again, struct errbuf *eb);
/* jobs_end ends job j with event ev (a final state in j's) for the reason
 * code/msg, stopping its tasks; -1 (nothing changed) when the state table
 * refuses ev in j's state. */
int jobs_end(struct master *m, struct job *j, enum job_event ev, const char *code, const char *msg);
/* jobs_preempt: job j gives its resources back, for the reason cause (the
 * scheduler's sched_preemption.reason, or a paused trial's): its tasks get
 * SIGTERM, then the spec's preemption.grace to checkpoint, then SIGKILL;
 * the job goes back to the queue as a new attempt (not counted against
 * restart.max) that starts once the old one has stopped, from the
 * checkpoint it left if it left one. Its reason names the cause and the
 * work lost: since its last checkpoint (its tasks' "@yard
 * {\"checkpoint\": N}" lines) or since its run began. */
void jobs_preempt(struct master *m, struct job *j, const char *cause);
/* jobs_set_wait sets queued job j's queue position (0: none) and waiting
 * reason code/msg as a listing shows them. */
void jobs_set_wait(struct master *m, struct job *j, unsigned position, const char *code,
		   const char *msg);
/* jobs_cancel: YERR(CONFLICT) when the job is already final. */
int jobs_cancel(struct master *m, struct job *j, struct errbuf *eb);
/* jobs_schedule runs the scheduler and starts what it placed. */
void jobs_schedule(struct master *m);
/* jobs_refresh_positions runs a full plan when jobs placed between full plans
 * still wait without a queue position, so that what a reader sees is exact. */
void jobs_refresh_positions(struct master *m);
/* A queued job's start estimate (docs/scheduler.md, "Start estimates"). */
struct job_start_estimate {
	uint64_t at_us;          /* wall clock, microseconds; 0 = unknown */
	char reason[200];        /* why it is unknown, "CODE: sentence"; "" with an estimate */
};
/* The work bound of one pass's estimates, per pool, in nodes visited
 * (sched/estimate.h): about 100 ms at 10,000 nodes and 100,000 queued jobs
 * (bench/sched: about half a scheduling pass there), some 5,000 jobs
 * estimated. */
#define JOBS_ESTIMATE_WORK 500000
/* jobs_start_estimates: OUT out[i] for queued job q[i], q in queue order:
 * the earliest start if running jobs end at their timeouts and the jobs ahead
 * start in that order (sched/estimate.h). Bounded by JOBS_ESTIMATE_WORK;
 * call it once per scheduling pass (h_queue's cache). */
void jobs_start_estimates(struct master *m, struct job *const *q, size_t n,
			  struct job_start_estimate *out);
/* jobs_tick expires leases and job timeouts (call every few hundred ms). */
void jobs_tick(struct master *m);
/* jobs_restore_leases gives every node a fresh lease (after a master start). */
void jobs_restore_leases(struct master *m);
/* nodes_await marks every stored node not lost as awaited: nodes_touch logs
 * each one's first contact with this master (after a master start). */
void nodes_await(struct master *m);

/* nodes_register handles POST /v1/agents; *token_out gets the new agent
 * token (caller frees). */
int nodes_register(struct master *m, const json_t *body, struct node **out, char **token_out,
		   struct errbuf *eb);
/* nodes_status applies POST /v1/agents/{id}/status; reply (the answer's
 * object) gets what the agent must do again (logs_settle). */
int nodes_status(struct master *m, struct node *n, const json_t *body, json_t *reply,
		 struct errbuf *eb);
/* nodes_touch renews the node's lease. */
void nodes_touch(struct master *m, struct node *n);
/* nodes_apply_event is the one way a node's state changes: the next state
 * from common/state.h's node table, or -1 (n unchanged) when the table
 * refuses ev in n's state. A change is saved, bumps n->rev and asks for a
 * plan; a node that stops being live loses the tasks it ran (but those of
 * on_disconnect: keep). NODE_EV_REMOVE deletes n from the store and frees
 * it. */
int nodes_apply_event(struct master *m, struct node *n, enum node_event ev);
/* nodes_drain drains n (again: the new reason and user replace the old),
 * reason and by may be NULL; nodes_resume undoes a drain (YERR(CONFLICT)
 * when n is not drained); nodes_remove removes a lost node that holds no
 * task's resources, revoking its agent tokens, else YERR(CONFLICT) saying
 * why. On success n is freed. */
int nodes_drain(struct master *m, struct node *n, const char *reason, const char *by);
/* nodes_leave ends n for good: its agent left (an ephemeral agent's last
 * status) or its provisioner removed it (elastic.h). Whatever it still
 * ran is lost, for the reason "left (why)" (the jobs restart as their
 * policy allows), its agent tokens are revoked and it is removed; n is
 * freed. */
void nodes_leave(struct master *m, struct node *n, const char *why);
int nodes_resume(struct master *m, struct node *n, struct errbuf *eb);
int nodes_remove(struct master *m, struct node *n, struct errbuf *eb);


#endif
