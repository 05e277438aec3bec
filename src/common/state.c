#include "base/compat.h"
#include "common/state.h"

static const char *const job_state_names[] = {
#define X_(n, s) s,
	JOB_STATES(X_)
#undef X_
};
static const char *const job_event_names[] = {
#define X_(n, s) s,
	JOB_EVENTS(X_)
#undef X_
};
static const char *const task_state_names[] = {
#define X_(n, s) s,
	TASK_STATES(X_)
#undef X_
};
static const char *const task_event_names[] = {
#define X_(n, s) s,
	TASK_EVENTS(X_)
#undef X_
};
static const char *const node_state_names[] = {
#define X_(n, s) s,
	NODE_STATES(X_)
#undef X_
};
static const char *const node_event_names[] = {
#define X_(n, s) s,
	NODE_EVENTS(X_)
#undef X_
};
static_assert(ARRAY_SIZE(job_state_names) == JOB_STATE__COUNT, "job state names");
static_assert(ARRAY_SIZE(job_event_names) == JOB_EVENT__COUNT, "job event names");
static_assert(ARRAY_SIZE(task_state_names) == TASK_STATE__COUNT, "task state names");
static_assert(ARRAY_SIZE(task_event_names) == TASK_EVENT__COUNT, "task event names");
static_assert(ARRAY_SIZE(node_state_names) == NODE_STATE__COUNT, "node state names");
static_assert(ARRAY_SIZE(node_event_names) == NODE_EVENT__COUNT, "node event names");

/* 0 means "not allowed"; otherwise the next state + 1. */
#define J(s) (JOB_##s + 1)
static const signed char job_table[JOB_STATE__COUNT][JOB_EVENT__COUNT] = {
	[JOB_QUEUED] = {
		[JOB_EV_PLACED] = J(STARTING),
		[JOB_EV_CANCEL] = J(CANCELLED),
		[JOB_EV_TIMEOUT] = J(FAILED),
		[JOB_EV_DEPENDENCY_FAILED] = J(FAILED),
		[JOB_EV_EARLY_STOP] = J(STOPPED_EARLY),
	},
	[JOB_STARTING] = {
		[JOB_EV_ALL_RUNNING] = J(RUNNING),
		[JOB_EV_ALL_SUCCEEDED] = J(SUCCEEDED),
		[JOB_EV_TASK_FAILED] = J(FAILED),
		[JOB_EV_RESTART] = J(QUEUED),
		[JOB_EV_CANCEL] = J(CANCELLED),
		[JOB_EV_TIMEOUT] = J(FAILED),
		[JOB_EV_PREEMPT] = J(QUEUED),
		[JOB_EV_EARLY_STOP] = J(STOPPED_EARLY),
	},
	[JOB_RUNNING] = {
		[JOB_EV_ALL_SUCCEEDED] = J(SUCCEEDED),
		[JOB_EV_TASK_FAILED] = J(FAILED),
		[JOB_EV_RESTART] = J(QUEUED),
		[JOB_EV_CANCEL] = J(CANCELLED),
		[JOB_EV_TIMEOUT] = J(FAILED),
		[JOB_EV_PREEMPT] = J(QUEUED),
		[JOB_EV_EARLY_STOP] = J(STOPPED_EARLY),
	},
};
#undef J

#define T(s) (TASK_##s + 1)
static const signed char task_table[TASK_STATE__COUNT][TASK_EVENT__COUNT] = {
	[TASK_PENDING] = {
		[TASK_EV_ASSIGN] = T(ASSIGNED),
		[TASK_EV_STOP] = T(KILLED),
	},
	[TASK_ASSIGNED] = {
		[TASK_EV_STARTED] = T(RUNNING),
		[TASK_EV_EXITED_OK] = T(SUCCEEDED),
		[TASK_EV_EXITED_FAIL] = T(FAILED),
		[TASK_EV_STOP] = T(STOPPING),
		[TASK_EV_LOST] = T(LOST),
	},
	[TASK_RUNNING] = {
		[TASK_EV_EXITED_OK] = T(SUCCEEDED),
		[TASK_EV_EXITED_FAIL] = T(FAILED),
		[TASK_EV_STOP] = T(STOPPING),
		[TASK_EV_LOST] = T(LOST),
	},
	[TASK_STOPPING] = {
		[TASK_EV_EXITED_OK] = T(KILLED),
		[TASK_EV_EXITED_FAIL] = T(KILLED),
		[TASK_EV_LOST] = T(LOST),
	},
	[TASK_SUCCEEDED] = { [TASK_EV_REQUEUE] = T(PENDING) },
	[TASK_FAILED] = { [TASK_EV_REQUEUE] = T(PENDING) },
	[TASK_KILLED] = { [TASK_EV_REQUEUE] = T(PENDING) },
	[TASK_LOST] = { [TASK_EV_REQUEUE] = T(PENDING) },
};
#undef T

/* Liveness moves along the rows, the drain across them: every row of a
 * drained state mirrors its undrained one, and only RESUME leaves it. A
 * heartbeat or register on a lost node makes it live again; the lapse of a
 * lost node's lease is nothing new (refused). REMOVE is refused while the
 * node is live: its agent would only register it again. LEAVE is the agent's
 * own goodbye (an ephemeral agent that exits): allowed in every state, as
 * no agent will register the node again. */
#define N(s) (NODE_##s + 1)
static const signed char node_table[NODE_STATE__COUNT][NODE_EVENT__COUNT] = {
	[NODE_READY] = {
		[NODE_EV_REGISTER] = N(READY),
		[NODE_EV_HEARTBEAT] = N(READY),
		[NODE_EV_LEASE_LAPSED] = N(LOST),
		[NODE_EV_DRAIN] = N(DRAINED),
		[NODE_EV_LEAVE] = N(REMOVED),
	},
	[NODE_LOST] = {
		[NODE_EV_REGISTER] = N(READY),
		[NODE_EV_HEARTBEAT] = N(READY),
		[NODE_EV_DRAIN] = N(DRAINED_LOST),
		[NODE_EV_REMOVE] = N(REMOVED),
		[NODE_EV_LEAVE] = N(REMOVED),
	},
	[NODE_DRAINED] = {
		[NODE_EV_REGISTER] = N(DRAINED),
		[NODE_EV_HEARTBEAT] = N(DRAINED),
		[NODE_EV_LEASE_LAPSED] = N(DRAINED_LOST),
		[NODE_EV_DRAIN] = N(DRAINED),
		[NODE_EV_RESUME] = N(READY),
		[NODE_EV_LEAVE] = N(REMOVED),
	},
	[NODE_DRAINED_LOST] = {
		[NODE_EV_REGISTER] = N(DRAINED),
		[NODE_EV_HEARTBEAT] = N(DRAINED),
		[NODE_EV_DRAIN] = N(DRAINED_LOST),
		[NODE_EV_RESUME] = N(LOST),
		[NODE_EV_REMOVE] = N(REMOVED),
		[NODE_EV_LEAVE] = N(REMOVED),
	},
	/* NODE_REMOVED: final, nothing is allowed */
};
#undef N

#define E(s) (EXP_##s + 1)
static const signed char exp_table[EXP_STATE__COUNT][EXP_EVENT__COUNT] = {
	[EXP_RUNNING] = {
		[EXP_EV_ALL_DONE] = E(COMPLETED),
		[EXP_EV_CANCEL] = E(CANCELLED),
		[EXP_EV_SUBMIT_FAILED] = E(FAILED),
	},
	/* the others are final */
};
#undef E

#define X_(n, s) s,
static const char *const exp_state_names[] = { EXP_STATES(X_) };
static const char *const preq_state_names[] = { PREQ_STATES(X_) };
static const char *const pnode_state_names[] = { PNODE_STATES(X_) };
static const char *const pnode_event_names[] = { PNODE_EVENTS(X_) };
#undef X_
static_assert(ARRAY_SIZE(preq_state_names) == PREQ_STATE__COUNT, "request state names");
static_assert(ARRAY_SIZE(pnode_state_names) == PNODE_STATE__COUNT, "provisioned node state names");
static_assert(ARRAY_SIZE(pnode_event_names) == PNODE_EVENT__COUNT, "provisioned node event names");

#define R(s) (PREQ_##s + 1)
static const signed char preq_table[PREQ_STATE__COUNT][PREQ_EVENT__COUNT] = {
	[PREQ_REQUESTING] = {
		[PREQ_EV_ANSWERED] = R(OPEN),
		[PREQ_EV_REFUSED] = R(FAILED),
	},
	[PREQ_OPEN] = {
		[PREQ_EV_ALL_ENDED] = R(CLOSED),
	},
	/* failed and closed are final */
};
#undef R

/* Every end goes through releasing: the provisioner is told, whatever the
 * cause, so that nothing it made is left behind; a lost or left node that
 * was leaving is released at once. */
#define P(s) (PNODE_##s + 1)
static const signed char pnode_table[PNODE_STATE__COUNT][PNODE_EVENT__COUNT] = {
	[PNODE_PENDING] = {
		[PNODE_EV_REGISTERED] = P(READY),
		[PNODE_EV_TIMEOUT] = P(RELEASING),
	},
	[PNODE_READY] = {
		[PNODE_EV_REGISTERED] = P(READY),
		[PNODE_EV_SCALE_DOWN] = P(LEAVING),
		[PNODE_EV_LEFT] = P(RELEASING),
		[PNODE_EV_LOST] = P(RELEASING),
	},
	[PNODE_LEAVING] = {
		[PNODE_EV_REGISTERED] = P(LEAVING),
		[PNODE_EV_LEFT] = P(RELEASING),
		[PNODE_EV_LOST] = P(RELEASING),
		[PNODE_EV_LEAVE_TIMEOUT] = P(RELEASING),
	},
	[PNODE_RELEASING] = {
		[PNODE_EV_RELEASED] = P(GONE),
	},
	/* gone is final */
};
#undef P

int preq_transition(enum preq_state state, enum preq_event ev)
{
	if ((unsigned)state >= PREQ_STATE__COUNT || (unsigned)ev >= PREQ_EVENT__COUNT)
		return -1;
	return preq_table[state][ev] - 1;
}

int pnode_transition(enum pnode_state state, enum pnode_event ev)
{
	if ((unsigned)state >= PNODE_STATE__COUNT || (unsigned)ev >= PNODE_EVENT__COUNT)
		return -1;
	return pnode_table[state][ev] - 1;
}

const char *preq_state_name(enum preq_state s)
{
	return (unsigned)s < PREQ_STATE__COUNT ? preq_state_names[s] : "unknown";
}

const char *pnode_state_name(enum pnode_state s)
{
	return (unsigned)s < PNODE_STATE__COUNT ? pnode_state_names[s] : "unknown";
}

const char *pnode_event_name(enum pnode_event e)
{
	return (unsigned)e < PNODE_EVENT__COUNT ? pnode_event_names[e] : "unknown";
}

int preq_state_parse(const char *s)
{
	for (int i = 0; i < PREQ_STATE__COUNT; i++)
		if (!strcmp(s, preq_state_names[i]))
			return i;
	return -1;
}

int pnode_state_parse(const char *s)
{
	for (int i = 0; i < PNODE_STATE__COUNT; i++)
		if (!strcmp(s, pnode_state_names[i]))
			return i;
	return -1;
}
static_assert(ARRAY_SIZE(exp_state_names) == EXP_STATE__COUNT, "experiment state names");

int exp_transition(enum exp_state state, enum exp_event ev)
{
	if ((unsigned)state >= EXP_STATE__COUNT || (unsigned)ev >= EXP_EVENT__COUNT)
		return -1;
	return exp_table[state][ev] - 1;
}

const char *exp_state_name(enum exp_state s)
{
	return (unsigned)s < EXP_STATE__COUNT ? exp_state_names[s] : "unknown";
}

int job_transition(enum job_state state, enum job_event ev)
{
	if ((unsigned)state >= JOB_STATE__COUNT || (unsigned)ev >= JOB_EVENT__COUNT)
		return -1;
	return job_table[state][ev] - 1;
}

int task_transition(enum task_state state, enum task_event ev)
{
	if ((unsigned)state >= TASK_STATE__COUNT || (unsigned)ev >= TASK_EVENT__COUNT)
		return -1;
	return task_table[state][ev] - 1;
}

int node_transition(enum node_state state, enum node_event ev)
{
	if ((unsigned)state >= NODE_STATE__COUNT || (unsigned)ev >= NODE_EVENT__COUNT)
		return -1;
	return node_table[state][ev] - 1;
}

const char *job_state_name(enum job_state s)
{
	return (unsigned)s < JOB_STATE__COUNT ? job_state_names[s] : "unknown";
}

const char *job_event_name(enum job_event e)
{
	return (unsigned)e < JOB_EVENT__COUNT ? job_event_names[e] : "unknown";
}

const char *task_state_name(enum task_state s)
{
	return (unsigned)s < TASK_STATE__COUNT ? task_state_names[s] : "unknown";
}

const char *task_event_name(enum task_event e)
{
	return (unsigned)e < TASK_EVENT__COUNT ? task_event_names[e] : "unknown";
}

const char *node_state_name(enum node_state s)
{
	return (unsigned)s < NODE_STATE__COUNT ? node_state_names[s] : "unknown";
}

const char *node_event_name(enum node_event e)
{
	return (unsigned)e < NODE_EVENT__COUNT ? node_event_names[e] : "unknown";
}

int job_state_parse(const char *s)
{
	for (int i = 0; i < JOB_STATE__COUNT; i++)
		if (!strcmp(s, job_state_names[i]))
			return i;
	return -1;
}

int task_state_parse(const char *s)
{
	for (int i = 0; i < TASK_STATE__COUNT; i++)
		if (!strcmp(s, task_state_names[i]))
			return i;
	return -1;
}

int node_state_parse(const char *s)
{
	for (int i = 0; i < NODE_STATE__COUNT; i++)
		if (!strcmp(s, node_state_names[i]))
			return i;
	return -1;
}

int job_state_is_final(enum job_state s)
{
	return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED || s == JOB_STOPPED_EARLY;
}

int task_state_is_final(enum task_state s)
{
	return s == TASK_SUCCEEDED || s == TASK_FAILED || s == TASK_KILLED || s == TASK_LOST;
}

int task_state_holds_resources(enum task_state s)
{
	return s == TASK_ASSIGNED || s == TASK_RUNNING || s == TASK_STOPPING;
}

int node_state_is_live(enum node_state s)
{
	return s == NODE_READY || s == NODE_DRAINED;
}

int node_state_is_drained(enum node_state s)
{
	return s == NODE_DRAINED || s == NODE_DRAINED_LOST;
}

const char *node_liveness_name(enum node_state s)
{
	if (s == NODE_REMOVED)
		return "removed";
	return node_state_is_live(s) ? "ready" : "lost";
}
