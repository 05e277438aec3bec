#include "base/compat.h"
#include "master/leader.h"

#include <microhttpd.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "master/core.h"
#include "master/http.h"
#include "master/store.h"

static const char *const state_names[] = {
#define X_(n, s) s,
	LEADER_STATES(X_)
#undef X_
};
static_assert(ARRAY_SIZE(state_names) == LEADER_STATE__COUNT, "leader state names");

/* A standby leads once it takes the lease; a leader renews it or, when it
 * could not in time, is unsure until it renews (nobody took it) or learns
 * it was deposed. A standby is never deposed: it holds nothing. */
#define S(s) (LEADER_##s + 1)
static const signed char table[LEADER_STATE__COUNT][LEADER_EVENT__COUNT] = {
	[LEADER_STANDBY] = {
		[LEADER_EV_ACQUIRE] = S(LEADING),
	},
	[LEADER_LEADING] = {
		[LEADER_EV_RENEW] = S(LEADING),
		[LEADER_EV_LAPSE] = S(UNSURE),
		[LEADER_EV_DEPOSED] = S(STANDBY),
	},
	[LEADER_UNSURE] = {
		[LEADER_EV_RENEW] = S(LEADING),
		[LEADER_EV_LAPSE] = S(UNSURE),
		[LEADER_EV_DEPOSED] = S(STANDBY),
	},
};
#undef S

int leader_transition(enum leader_state s, enum leader_event ev)
{
	if ((unsigned)s >= LEADER_STATE__COUNT || (unsigned)ev >= LEADER_EVENT__COUNT)
		return -1;
	return table[s][ev] - 1;
}

const char *leader_state_name(enum leader_state s)
{
	return (unsigned)s < LEADER_STATE__COUNT ? state_names[s] : "unknown";
}

/* Every change of role goes through here; an event the table refuses is a
 * bug, said and ignored. */
static void move(struct master *m, enum leader_event ev)
{
	struct leadership *l = &m->leadership;
	int next = leader_transition(l->state, ev);

	if (next < 0) {
		fprintf(stderr, "yard master: leadership: event %d refused in state %s\n", (int)ev,
			leader_state_name(l->state));
		return;
	}
	if ((enum leader_state)next != l->state)
		fprintf(stderr, "yard master: %s -> %s (epoch %" PRIu64 ")\n", leader_state_name(l->state),
			leader_state_name(next), l->epoch);
	l->state = next;
}

void leader_init(struct master *m, const char *advertise_url, unsigned lease_ms,
		 unsigned renew_ms)
{
	struct leadership *l = &m->leadership;
	char host[256] = "";

	l->shared = m->sops->lease_acquire != NULL;
	l->state = l->shared ? LEADER_STANDBY : LEADER_LEADING;
	if (advertise_url || m->url)
		l->url = xstrdup(advertise_url ? advertise_url : m->url);
	gethostname(host, sizeof(host) - 1);
	/* who this master is, across its restarts: its host and data dir */
	char *dir = realpath(m->data_dir, NULL);
	l->holder = xasprintf("%s:%s", host, dir ? dir : m->data_dir);
	free(dir);
	l->lease_ms = lease_ms ? lease_ms : LEADER_LEASE_MS;
	l->renew_ms = renew_ms ? renew_ms : LEADER_RENEW_MS;
}

void leader_release(struct leadership *l)
{
	free(l->url);
	free(l->holder);
	free(l->leader_url);
	memset(l, 0, sizeof(*l));
}

bool leader_try(struct master *m)
{
	struct leadership *l = &m->leadership;
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease lease;
	uint64_t start = mono_ms();

	if (!l->shared)
		return true;
	l->try_ms = start;
	l->tried = true;
	/* the first try takes back a lease this master held before a restart */
	if (m->sops->lease_acquire(m->store, l->holder, l->url, !l->tried, l->lease_ms, &lease, &eb)) {
		if (!l->store_error_said)
			fprintf(stderr, "yard master: standby: %s (trying again every %u ms)\n", eb.msg,
				l->renew_ms);
		l->store_error_said = true;
		free(l->leader_url);
		l->leader_url = NULL;
		return false;
	}
	l->store_error_said = false;
	l->epoch = lease.epoch;
	free(l->leader_url);
	l->leader_url = lease.live ? lease.url : NULL;
	if (!lease.live)
		free(lease.url);
	if (!lease.mine)
		return false;
	l->valid_until_ms = start + l->lease_ms;
	m->sops->lease_fence(m->store, l->epoch, l->lease_ms);
	move(m, LEADER_EV_ACQUIRE);
	return true;
}

bool leader_serving(const struct master *m)
{
	const struct leadership *l = &m->leadership;

	return l->state == LEADER_LEADING && (!l->shared || mono_ms() < l->valid_until_ms);
}

void leader_committing(struct master *m)
{
	m->leadership.commit_start_ms = mono_ms();
}

void leader_committed(struct master *m, int rc)
{
	struct leadership *l = &m->leadership;

	if (!l->shared || l->state == LEADER_STANDBY)
		return;
	if (!rc) {
		l->valid_until_ms = l->commit_start_ms + l->lease_ms;
		move(m, LEADER_EV_RENEW);
	}
}

void leader_release_lease(struct master *m)
{
	struct leadership *l = &m->leadership;
	struct errbuf eb = ERRBUF_INIT;

	if (!l->shared || l->state == LEADER_STANDBY)
		return;
	m->sops->lease_fence(m->store, 0, 0);
	if (m->sops->lease_release(m->store, l->epoch, &eb))
		fprintf(stderr, "yard master: cannot release the lease: %s\n", eb.msg);
}

void leader_deposed(struct master *m)
{
	struct leadership *l = &m->leadership;

	move(m, LEADER_EV_DEPOSED);
	m->sops->lease_fence(m->store, 0, 0);
	free(l->leader_url);
	l->leader_url = NULL;
	l->try_ms = 0;
}

bool leader_tick(struct master *m)
{
	struct leadership *l = &m->leadership;
	uint64_t now = mono_ms();

	if (!l->shared || l->state == LEADER_STANDBY)
		return false;
	if (l->state == LEADER_LEADING && now >= l->valid_until_ms)
		move(m, LEADER_EV_LAPSE);
	/* renew once a renew_ms has passed since the last commit began */
	return now >= l->commit_start_ms + l->renew_ms;
}

void leader_refuse(struct req *r)
{
	const struct leadership *l = &r->m->leadership;
	struct errbuf eb = ERRBUF_INIT;
	json_t *e;

	if (l->leader_url)
		error(&eb, YERR(NOT_LEADER), "this master is a standby; the leader is at %s", l->leader_url);
	else if (l->state == LEADER_STANDBY)
		error(&eb, YERR(NOT_LEADER), "this master is a standby and no master leads now; retry");
	else
		error(&eb, YERR(NOT_LEADER), "this master could not renew its lease in time; retry");
	e = http_error_json(&eb);
	json_object_set_new(e, "leader", l->leader_url ? http_json_text(l->leader_url) : json_null());
	req_json(r, 503, json_pack("{s:o}", "error", e));
	r->err_code = YERR(NOT_LEADER);
	if (r->resp && l->leader_url)
		MHD_add_response_header(r->resp, "X-Yard-Leader", l->leader_url);
}

void leader_health(const struct master *m, json_t *doc)
{
	const struct leadership *l = &m->leadership;
	bool serving = leader_serving(m);
	const char *leader = serving ? l->url : l->leader_url;
	const char *role = serving			   ? "leader"
			   : l->state == LEADER_STANDBY ? "standby"
							: leader_state_name(LEADER_UNSURE);

	json_object_set_new(doc, "role", json_string(role));
	json_object_set_new(doc, "leader", leader ? http_json_text(leader) : json_null());
	json_object_set_new(doc, "epoch", json_integer((json_int_t)l->epoch));
}
