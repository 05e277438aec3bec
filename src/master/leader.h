/*
 * Leadership of masters that share one store (PostgreSQL): one leads, the
 * others stand by and take over when its lease expires.
 *
 * The lease is a row of the store with an epoch (store_ops.lease_acquire).
 * The leader renews it with every commit, and at least every renew_ms with
 * an empty one: each commit runs the fence (store_ops.lease_fence) inside
 * its own transaction, so a master that lost the lease, however long it was
 * paused or cut off, cannot commit anything, and steps down at its first
 * try. A leader that has not renewed within the lease (its own monotonic
 * clock, counted from before the renewal was sent, so never later than the
 * server's) answers nothing until it renews or learns it was deposed.
 *
 * A standby answers GET /healthz with its role and every other API or agent
 * request with 503 not_leader naming the leader's URL (the web app's files
 * too are served: the app then moves to the leader). docs/design-notes.md
 * says why it answers rather than proxies.
 *
 * With a store one master alone opens (SQLite) the master leads from the
 * start, for ever, and none of this costs anything.
 */
#ifndef YARD_LEADER_H
#define YARD_LEADER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

/* A master's role, as a state x event table (leader.c). */
/* LEADING first: a master zeroed by a test leads, as one on SQLite does */
#define LEADER_STATES(X)                                                              \
	X(LEADING, "leader")  /* holds the lease: serves */                           \
	X(STANDBY, "standby") /* another master leads, or none yet: answers not_leader */ \
	X(UNSURE, "unsure")   /* led, but could not renew in time: serves nothing */

enum leader_state {
#define X_(n, s) LEADER_##n,
	LEADER_STATES(X_)
#undef X_
	LEADER_STATE__COUNT
};

#define LEADER_EVENTS(X)                                                              \
	X(ACQUIRE, "acquire") /* took the lease (an expired or a new one) */          \
	X(RENEW, "renew")     /* a commit renewed it */                               \
	X(LAPSE, "lapse")     /* the lease ran out on this master's clock */          \
	X(DEPOSED, "deposed") /* a commit found another epoch: another master leads */

enum leader_event {
#define X_(n, s) LEADER_EV_##n,
	LEADER_EVENTS(X_)
#undef X_
	LEADER_EVENT__COUNT
};

/* leader_transition: the next state, or -1 when ev is not allowed in s. */
int leader_transition(enum leader_state s, enum leader_event ev);
const char *leader_state_name(enum leader_state s);

/* Defaults of yard master --leader-lease and --leader-renew. A standby
 * takes over within about lease + renew of the leader's loss. */
#define LEADER_LEASE_MS 1500
#define LEADER_RENEW_MS 250

struct leadership {
	bool shared;               /* the store has a lease (store_ops.lease_acquire) */
	enum leader_state state;
	uint64_t epoch;            /* the lease's epoch as last seen */
	char *url;                 /* this master's advertised URL (owned) */
	char *holder;              /* this master in the lease row: "HOST:DATA_DIR" (owned) */
	char *leader_url;          /* a standby's: the live leader's URL, or NULL (owned) */
	unsigned lease_ms, renew_ms;
	uint64_t valid_until_ms;   /* LEADING: mono_ms until which the lease is surely ours */
	uint64_t commit_start_ms;  /* mono_ms before the commit being made was sent */
	uint64_t try_ms;           /* mono_ms of the last lease_acquire (STANDBY) */
	bool store_error_said;     /* a standby's failing store was reported once */
	bool tried;                /* leader_try ran once (the first may reclaim) */
};

struct master;
struct req;

/* leader_init: what the master advertises and its lease timings. */
void leader_init(struct master *m, const char *advertise_url, unsigned lease_ms,
		 unsigned renew_ms);
void leader_release(struct leadership *l);

/* leader_try: a standby (or a master starting) takes the lease if it can;
 * true when it now leads (the caller then loads the model and serves). A
 * store without a lease always leads. */
bool leader_try(struct master *m);

/* leader_serving: this master may answer as the leader now. */
bool leader_serving(const struct master *m);

/* leader_committing / leader_committed bracket a commit: rc 0 renews the
 * lease; YERR(NOT_LEADER) deposes this master (the caller steps down). */
void leader_committing(struct master *m);
void leader_committed(struct master *m, int rc);

/* leader_tick: LEADING: a renewal is due (true: the caller opens an empty
 * batch, so the next commit renews), or the lease lapsed (UNSURE). */
bool leader_tick(struct master *m);

/* leader_release_lease: a leader stopping ends its lease at once, so a
 * standby takes over without waiting for it to expire. */
void leader_release_lease(struct master *m);

/* leader_deposed: the step down's bookkeeping (STANDBY, no fence). */
void leader_deposed(struct master *m);

/* leader_refuse answers r with 503 not_leader naming the leader's URL (in
 * the error's "leader" and the X-Yard-Leader header) when one is known. */
void leader_refuse(struct req *r);

/* leader_health: GET /healthz's fields of the role: role, leader, epoch. */
void leader_health(const struct master *m, json_t *doc);

#endif
