/*
 * The lifecycles of a job (in the master), of a task (as the master sees
 * it) and of a node (in the master), as explicit state x event tables. Every transition is listed in
 * state.c; anything not listed is refused with -1, and callers treat that as
 * "ignore the event" (a late or duplicate report), never as a crash.
 */
#ifndef YARD_STATE_H
#define YARD_STATE_H

#define JOB_STATES(X)        \
	X(QUEUED, "queued")       \
	X(STARTING, "starting")   \
	X(RUNNING, "running")     \
	X(SUCCEEDED, "succeeded") \
	X(FAILED, "failed")       \
	X(CANCELLED, "cancelled")   \
	X(STOPPED_EARLY, "stopped_early") /* a trial its sweep's early stopping ended */

enum job_state {
#define X_(n, s) JOB_##n,
	JOB_STATES(X_)
#undef X_
	JOB_STATE__COUNT
};

#define JOB_EVENTS(X)                                                             \
	X(PLACED, "placed")               /* the scheduler gave every task a node */ \
	X(ALL_RUNNING, "all_running")     /* every task reported running */          \
	X(ALL_SUCCEEDED, "all_succeeded") /* every task exited 0 */                   \
	X(TASK_FAILED, "task_failed")     /* a task failed, no restart left */       \
	X(RESTART, "restart")             /* a task failed or was lost, restart left */ \
	X(CANCEL, "cancel")               /* the owner or an admin cancelled */      \
	X(TIMEOUT, "timeout")             /* the spec's timeout passed */            \
	X(PREEMPT, "preempt")             /* the scheduler took its resources back */ \
	X(DEPENDENCY_FAILED, "dependency_failed") /* a job of its spec's after ended otherwise */ \
	X(EARLY_STOP, "early_stop")       /* its experiment's early stopping ended the trial */

enum job_event {
#define X_(n, s) JOB_EV_##n,
	JOB_EVENTS(X_)
#undef X_
	JOB_EVENT__COUNT
};

#define TASK_STATES(X)         \
	X(PENDING, "pending")       /* not placed yet (job queued) */ \
	X(ASSIGNED, "assigned")     /* placed; the agent has not started it */ \
	X(RUNNING, "running")       \
	X(STOPPING, "stopping")     /* asked to stop; holds its GPUs until it exits */ \
	X(SUCCEEDED, "succeeded")   \
	X(FAILED, "failed")         \
	X(KILLED, "killed")         /* stopped on request (cancel, gang stop) */ \
	X(LOST, "lost")             /* its node was lost */

enum task_state {
#define X_(n, s) TASK_##n,
	TASK_STATES(X_)
#undef X_
	TASK_STATE__COUNT
};

#define TASK_EVENTS(X)                                                              \
	X(ASSIGN, "assign")     /* placed on a node */                                 \
	X(STARTED, "started")   /* the agent reports the process running */            \
	X(EXITED_OK, "exited_ok")                                                      \
	X(EXITED_FAIL, "exited_fail") /* non-zero exit, signal, oom, start failure */  \
	X(STOP, "stop")         /* cancel or gang stop requested */                    \
	X(LOST, "lost")         /* the node's lease ran out */                         \
	X(REQUEUE, "requeue")   /* the job goes back to the queue for a restart */

enum task_event {
#define X_(n, s) TASK_EV_##n,
	TASK_EVENTS(X_)
#undef X_
	TASK_EVENT__COUNT
};

/*
 * A node's state is the product of two things kept apart: its liveness
 * (does its agent hold a lease: ready or lost) and an admin's intent (drained
 * or not). Liveness changes with the agent (register, heartbeat, a lapsed
 * lease); the intent only with an admin (drain, resume), so a drain survives
 * every lapse, reconnect and restart until it is resumed. Removal is an
 * admin's too, and only of a lost node. docs/design-notes.md says why.
 */
#define NODE_STATES(X)                                                                \
	X(READY, "ready")               /* live; takes new tasks */                   \
	X(LOST, "lost")                 /* its lease lapsed; its tasks were lost */   \
	X(DRAINED, "drained")           /* live, drained: keeps its tasks, gets no new ones */ \
	X(DRAINED_LOST, "drained_lost") /* drained, and its lease lapsed */           \
	X(REMOVED, "removed")           /* removed by an admin: gone from the model */

enum node_state {
#define X_(n, s) NODE_##n,
	NODE_STATES(X_)
#undef X_
	NODE_STATE__COUNT
};

#define NODE_EVENTS(X)                                                                \
	X(REGISTER, "register")         /* the agent registered (POST /v1/agents) */  \
	X(HEARTBEAT, "heartbeat")       /* the agent polled for work or reported */   \
	X(LEASE_LAPSED, "lease_lapsed") /* no word from the agent for --lease */      \
	X(DRAIN, "drain")               /* an admin drained it (again: a new reason) */ \
	X(RESUME, "resume")             /* an admin undid the drain */                \
	X(REMOVE, "remove")             /* an admin removed it (lost nodes only) */   \
	X(LEAVE, "leave")               /* its agent left for good (an ephemeral one) */

enum node_event {
#define X_(n, s) NODE_EV_##n,
	NODE_EVENTS(X_)
#undef X_
	NODE_EVENT__COUNT
};

/* An experiment (a sweep, master/experiments.h): running while it has
 * trials to make or live ones, then completed; or cancelled, or failed when
 * a trial could not be submitted. */
#define EXP_STATES(X)             \
	X(RUNNING, "running")       \
	X(COMPLETED, "completed")   \
	X(CANCELLED, "cancelled")   \
	X(FAILED, "failed")

enum exp_state {
#define X_(n, s) EXP_##n,
	EXP_STATES(X_)
#undef X_
	EXP_STATE__COUNT
};

#define EXP_EVENTS(X)                                                            \
	X(ALL_DONE, "all_done")           /* every trial made and final */          \
	X(CANCEL, "cancel")               /* its owner, team or an admin cancelled */ \
	X(SUBMIT_FAILED, "submit_failed") /* a trial's job was refused */

enum exp_event {
#define X_(n, s) EXP_EV_##n,
	EXP_EVENTS(X_)
#undef X_
	EXP_EVENT__COUNT
};

/*
 * Elastic capacity (master/elastic.h): a provisioning request asks one
 * provisioner for COUNT nodes of a pool. It is stored before the
 * provisioner is asked (requesting), so that a master that stops while the
 * provisioner works finds it again and asks nobody twice: a restart
 * recovers it (what the provisioner made is found again, or nothing was
 * made). Open, it tracks its nodes (below) until every one has ended.
 */
#define PREQ_STATES(X)                                                             \
	X(REQUESTING, "requesting") /* stored; the provisioner is being asked */       \
	X(OPEN, "open")             /* the provisioner answered: its nodes are tracked */ \
	X(FAILED, "failed")         /* the provisioner refused or made nothing */     \
	X(CLOSED, "closed")         /* every node it made has ended */

enum preq_state {
#define X_(n, s) PREQ_##n,
	PREQ_STATES(X_)
#undef X_
	PREQ_STATE__COUNT
};

#define PREQ_EVENTS(X)                                                           \
	X(ANSWERED, "answered")   /* up (or a restart's recovery) named its nodes */ \
	X(REFUSED, "refused")     /* up failed, or a recovery found nothing made */ \
	X(ALL_ENDED, "all_ended") /* its last node ended */

enum preq_event {
#define X_(n, s) PREQ_EV_##n,
	PREQ_EVENTS(X_)
#undef X_
	PREQ_EVENT__COUNT
};

/* One node a provisioner made (a slot of a request): asked for until its
 * agent registers, then ready; a scale-down drains it and tells its agent
 * to leave; any end (it left, it was lost, it never registered) releases
 * it through the provisioner (`down`), and once that answered it is gone. */
#define PNODE_STATES(X)                                                          \
	X(PENDING, "pending")     /* asked for; its agent has not registered yet */   \
	X(READY, "ready")         /* registered: a node of its pool */                 \
	X(LEAVING, "leaving")     /* scaled down: drained, its agent told to leave */  \
	X(RELEASING, "releasing") /* ended: the provisioner is told to remove it */    \
	X(GONE, "gone")           /* released */

enum pnode_state {
#define X_(n, s) PNODE_##n,
	PNODE_STATES(X_)
#undef X_
	PNODE_STATE__COUNT
};

#define PNODE_EVENTS(X)                                                                 \
	X(REGISTERED, "registered")   /* its agent registered */                          \
	X(SCALE_DOWN, "scale_down")   /* idle for its pool's idle time, above the minimum */ \
	X(LEFT, "left")               /* its agent left (told to, idle, or stopped) */     \
	X(LOST, "lost")               /* its node was lost (preempted, timed out, died) */ \
	X(TIMEOUT, "timeout")         /* it did not register in time: given up */          \
	X(LEAVE_TIMEOUT, "leave_timeout") /* told to leave, it did not: released anyway */ \
	X(RELEASED, "released")       /* the provisioner removed it */

enum pnode_event {
#define X_(n, s) PNODE_EV_##n,
	PNODE_EVENTS(X_)
#undef X_
	PNODE_EVENT__COUNT
};

/* *_transition: the next state, or -1 when the event is not allowed in state. */
int job_transition(enum job_state state, enum job_event ev);
int task_transition(enum task_state state, enum task_event ev);
int node_transition(enum node_state state, enum node_event ev);
int exp_transition(enum exp_state state, enum exp_event ev);
const char *exp_state_name(enum exp_state s);
int preq_transition(enum preq_state state, enum preq_event ev);
int pnode_transition(enum pnode_state state, enum pnode_event ev);
const char *preq_state_name(enum preq_state s);
const char *pnode_state_name(enum pnode_state s);
const char *pnode_event_name(enum pnode_event e);
/* preq_state_parse, pnode_state_parse: the state named s, or -1. */
int preq_state_parse(const char *s);
int pnode_state_parse(const char *s);

const char *job_state_name(enum job_state s);
const char *job_event_name(enum job_event e);
const char *task_state_name(enum task_state s);
const char *task_event_name(enum task_event e);
const char *node_state_name(enum node_state s);
const char *node_event_name(enum node_event e);
/* *_state_parse: the state named s, or -1. */
int job_state_parse(const char *s);
int task_state_parse(const char *s);
int node_state_parse(const char *s);

/* A finished job or task never changes again. */
int job_state_is_final(enum job_state s);
int task_state_is_final(enum task_state s);
/* A task that holds its node's resources: assigned, running or stopping. */
int task_state_holds_resources(enum task_state s);
/* A live node's agent holds a lease (ready or drained); a drained node is
 * drained whether live or lost. */
int node_state_is_live(enum node_state s);
int node_state_is_drained(enum node_state s);
/* The liveness half of s: "ready", "lost" or "removed". */
const char *node_liveness_name(enum node_state s);

#endif
