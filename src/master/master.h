/*
 * The master: the control plane. One thread runs its event loop and owns all
 * cluster state; every change is committed to the store before it is
 * acknowledged.
 */
#ifndef YARD_MASTER_H
#define YARD_MASTER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct master_config {
	const char *listen;     /* "HOST:PORT"; port 0 picks a free one; NULL: none (http_start) */
	const char *data_dir;   /* created if missing */
	/* a PostgreSQL connection string (store.h's store_pg_ops) for the
	 * state; NULL: SQLite in data_dir (logs, code and tokens stay there) */
	const char *store;
	unsigned lease_ms;      /* an agent silent this long is lost; default 15000 */
	uint64_t outputs_retention_ms; /* outputs of jobs final this long are freed; 0: kept */
	/* --idle-gpu-timeout (0: off), --idle-gpu-threshold, --idle-gpu-action
	 * (NULL: the defaults; master/gpuidle.h) */
	uint64_t idle_gpu_timeout_ms;
	const char *idle_gpu_threshold, *idle_gpu_action;
	const char *web_dir;    /* static UI files served at /; NULL: static_default_dir() */
	/* Scheduling (sched/policy.h): "NAME" for every pool, "POOL=NAME" for
	 * one; NULL entries or none: the default policy. */
	const char *const *policies;
	size_t npolicies;
	const char *thresholds; /* las/glas/fair levels: "T1,T2,..." GPU-seconds; NULL: defaults */
	/* fair: "TEAM=WEIGHT" or "TEAM=WEIGHT:QUOTA" (GPUs); teams not listed weigh 1, no quota */
	const char *const *teams;
	size_t nteams;
	/* Protection of running work from least-attained-service and fair
	 * preemption (sched/policy.h conf min_run_s, max_lost_s,
	 * need_checkpoint), durations as parse_duration_str reads them:
	 * preempt_min_run, no preemption within this of a start or resume but
	 * by a higher priority (NULL: 2m; "0": off); preempt_max_lost, none
	 * that loses more than this much work nor any of a job without a
	 * checkpoint since it started (NULL: 10m; "0": both off). */
	const char *preempt_min_run, *preempt_max_lost;
	/* datasets: "TEAM=SIZE", the unique chunk bytes a team's datasets may hold */
	const char *const *data_quotas;
	size_t ndata_quotas;
	/* TLS (master/tls.h): serve https with the certificate and key of
	 * these files, or with a pair made once in DATA/tls (tls_self_signed,
	 * naming loopback, this host, the listen address and tls_sans).
	 * Neither: plain http. */
	const char *tls_cert, *tls_key;
	bool tls_self_signed;
	const char *const *tls_sans;
	size_t ntls_sans;
	/* "RATE[:BURST]" requests per second per token (ratelimit.h); "0": off;
	 * NULL: RATELIMIT_DEFAULT_RATE:RATELIMIT_DEFAULT_BURST */
	const char *rate_limit;
	/* "team" (NULL: the default) or "open" (master/visibility.h) */
	const char *visibility;
	/* Several masters on one store (master/leader.h): the URL others reach
	 * this one at (NULL: the bound one), and the leader's lease and how
	 * often it is renewed (0: LEADER_LEASE_MS, LEADER_RENEW_MS). */
	const char *advertise_url;
	unsigned leader_lease_ms, leader_renew_ms;
};

struct master;

/* master_open creates the data dir, opens the store, makes the first tokens
 * (printing the admin token once) and binds the listening socket. */
int master_open(const struct master_config *cfg, struct master **out, struct errbuf *eb);
/* master_url: "http://HOST:PORT" (or https://) of the bound socket (owned
 * by the master). */
const char *master_url(const struct master *m);
/* master_tls_pin: the pin clients give to trust this master
 * ("sha256//BASE64", owned by the master), or NULL without TLS. */
const char *master_tls_pin(const struct master *m);
/* master_run runs the event loop until master_stop(); returns 0 or an error. */
int master_run(struct master *m);
/* master_stop may be called from any thread or a signal-handling thread. */
void master_stop(struct master *m);
void master_free(struct master *m);

/* `yard master --listen ADDR --data-dir DIR [--lease S] [--policy [POOL=]P]...
 * [--thresholds T1,T2,...] [--team TEAM=WEIGHT[:QUOTA]]...
 * [--preempt-min-run DURATION] [--preempt-max-lost DURATION] [--store CONNINFO]
 * [--tls-cert FILE --tls-key FILE | --tls-self-signed [--tls-san NAME]...]` */
int cmd_master(int argc, char **argv);

#endif
