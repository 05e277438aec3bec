/*
 * The master: the control plane. One thread runs its event loop and owns all
 * cluster state; every change is committed to the store before it is
 * acknowledged.
 */
#ifndef YARD_MASTER_H
#define YARD_MASTER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/conf.h"
#include "base/error.h"

/* What a master is started with: the values of its options (the table in
 * master_main.c, from the command line and the config file), or set by
 * hand (yard up, tests). Strings and lists are borrowed for master_open's
 * call; the master copies what it keeps. */
struct master_config {
	const char *listen;     /* "HOST:PORT"; port 0 picks a free one; NULL: none (http_start) */
	const char *data_dir;   /* created if missing */
	/* a PostgreSQL connection string (store.h's store_pg_ops) for the
	 * state; NULL: SQLite in data_dir (logs, code and tokens stay there) */
	const char *store;
	/* after a failed commit, how long the master tries to read its store
	 * again before it stops (exit 1); 0: a minute */
	uint64_t store_retry_ms;
	uint64_t lease_ms;      /* an agent silent this long is lost; 0: 15000 */
	uint64_t outputs_retention_ms; /* outputs of jobs final this long are freed; 0: kept */
	/* --idle-gpu-timeout (0: off), --idle-gpu-threshold, --idle-gpu-action
	 * (NULL: the defaults; master/gpuidle.h) */
	uint64_t idle_gpu_timeout_ms;
	const char *idle_gpu_threshold, *idle_gpu_action;
	/* --interactive-idle-timeout: a duration, "0" off; NULL: 1h
	 * (master/interactive.h) */
	const char *interactive_idle_timeout;
	const char *web_dir;    /* static UI files served at /; NULL: static_default_dir() */
	/* Scheduling (sched/policy.h): "NAME" for every pool, "POOL=NAME" for
	 * one; none: the default policy. */
	struct conf_list policies;
	const char *thresholds; /* las/glas/fair levels: "T1,T2,..." GPU-seconds; NULL: defaults */
	/* fair: "TEAM=WEIGHT" or "TEAM=WEIGHT:QUOTA" (GPUs); teams not listed weigh 1, no quota */
	struct conf_list teams;
	/* Protection of running work from least-attained-service and fair
	 * preemption (sched/policy.h conf min_run_s, max_lost_s,
	 * need_checkpoint), durations as parse_duration_str reads them:
	 * preempt_min_run, no preemption within this of a start or resume but
	 * by a higher priority (NULL: 2m; "0": off); preempt_max_lost, none
	 * that loses more than this much work nor any of a job without a
	 * checkpoint since it started (NULL: 10m; "0": both off). */
	const char *preempt_min_run, *preempt_max_lost;
	/* datasets: "TEAM=SIZE", the unique chunk bytes a team's datasets may hold */
	struct conf_list data_quotas;
	/* TLS (master/tls.h): serve https with the certificate and key of
	 * these files, or with a pair made once in DATA/tls (tls_self_signed,
	 * naming loopback, this host, the listen address and tls_sans).
	 * Neither: plain http. */
	const char *tls_cert, *tls_key;
	bool tls_self_signed;
	struct conf_list tls_sans;
	/* "RATE[:BURST]" requests per second per token (ratelimit.h); "0": off;
	 * NULL: RATELIMIT_DEFAULT_RATE:RATELIMIT_DEFAULT_BURST */
	const char *rate_limit;
	/* "team" (NULL: the default) or "open" (master/visibility.h) */
	const char *visibility;
	/* Several masters on one store (master/leader.h): the URL others reach
	 * this one at (NULL: the bound one), and the leader's lease and how
	 * often it is renewed (0: LEADER_LEASE_MS, LEADER_RENEW_MS). */
	const char *advertise_url;
	uint64_t leader_lease_ms, leader_renew_ms;
	/* Elastic pools (master/elastic.h, docs/elastic.md): "POOL=KIND:ARG"
	 * each, and per pool "POOL=N" bounds, "POOL=DURATION" idle times and
	 * "POOL=SHAPE" shapes; the other strings NULL for their defaults. */
	struct conf_list provisioners, provisioner_mins, provisioner_maxes, provisioner_idles,
		provisioner_shapes;
	const char *provisioner_max_pending, *provisioner_cooldown, *provisioner_register_timeout;
	const char *provisioner_url;
	/* "PREFIX=token-file:PATH" or "PREFIX=ssh-key:PATH" each: the
	 * credentials of git repositories (master/gitcred.h) */
	struct conf_list git_credentials;
	/* a git-worker (master/gitworker.h) is killed after this (0:
	 * GITCODE_TIMEOUT_MS) */
	uint64_t git_timeout_ms;
	/* a file holding the secret that signs git servers' push
	 * notifications (master/githook.h); NULL: none are taken */
	const char *git_hook_secret_file;
	/* HOST[:PORT]: images built from jobs' code are pushed there and
	 * pulled from there (docs/images.md); NULL: none */
	const char *registry;
	/* keep images built from jobs' code in the master's chunk store, and
	 * the nodes load them from there (docs/images.md); not with registry */
	bool store_images;
	/* a file of USER:PASSWORD for it (master/images.h); NULL: none */
	const char *registry_credential_file;
	/* the Slurm provisioner's: --time, --account, --qos of its
	 * allocations, the ephemeral agents' work dirs, the yard binary on the
	 * Slurm nodes and more arguments of theirs */
	const char *slurm_time, *slurm_account, *slurm_qos, *slurm_work_dir, *slurm_yard;
	struct conf_list slurm_agent_args;
	/* The options the master was started with, which a reload reads
	 * again (settings.h); borrowed for the master's life; NULL: it has no
	 * config file to reload. */
	struct conf *conf;
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
/* master_reload asks the loop to read the config file again (SIGHUP;
 * settings.h's settings_reload); any thread. */
void master_reload(struct master *m);
void master_free(struct master *m);

/* master_conf_options: the table of the master's options (n OUT), each a
 * flag and a key of the config file. */
const struct conf_option *master_conf_options(size_t *n);

/* master_config_check: what no one option's check can see, the options
 * together (leader-renew against leader-lease, registry and store-images
 * not both): 0, or an error naming the keys and why. */
int master_config_check(const struct master_config *cfg, struct errbuf *eb);

/* `yard master [--config FILE] [options]`: the options are the table in
 * master_main.c, each also a key of the config file; SIGHUP reloads it. */
int cmd_master(int argc, char **argv);

#endif
