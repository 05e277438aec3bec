/*
 * `yard master`: its options, one table read from the command line and from
 * the config file (base/conf.h), and its signals: SIGTERM and SIGINT stop
 * it, SIGHUP reloads the config file (settings.h).
 */
#include "base/compat.h"
#include "master/master.h"

#include <pthread.h>

#include "base/conf.h"
#include "base/parse.h"
#include "common/spec_image.h"
#include "master/datasets.h"
#include "master/elastic.h"
#include "master/gitcred.h"
#include "master/gpuidle.h"
#include "master/interactive.h"
#include "master/leader.h"
#include "master/ratelimit.h"
#include "master/settings.h"
#include "master/tls.h"
#include "master/visibility.h"

/* A duration of at most max_ms, and more than 0. */
static int check_span(const char *what, const char *v, uint64_t max_ms, const char *range,
		      struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(v, &ms) || !ms || ms > max_ms)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration of %s", what, v, range);
	return 0;
}

static int check_lease(const char *what, const char *v, struct errbuf *eb)
{
	return check_span(what, v, 3600 * 1000, "1ms to 1h", eb);
}

static int check_store_retry(const char *what, const char *v, struct errbuf *eb)
{
	return check_span(what, v, 3600 * 1000, "1ms to 1h", eb);
}

static int check_leader_span(const char *what, const char *v, struct errbuf *eb)
{
	return check_span(what, v, 600 * 1000, "1ms to 10m", eb);
}

static int check_duration(const char *what, const char *v, struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(v, &ms))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration such as 2m (0: off)", what, v);
	return 0;
}

static int check_quota(const char *what, const char *v, struct errbuf *eb)
{
	struct data_quota q;
	int ret = datasets_parse_quota(what, v, &q, eb);

	if (!ret)
		free(q.team);
	return ret;
}

static int check_rate_limit(const char *what, const char *v, struct errbuf *eb)
{
	uint64_t rate, burst;

	return ratelimit_parse(what, v, &rate, &burst, eb);
}

static int check_visibility(const char *what, const char *v, struct errbuf *eb)
{
	bool open;

	return visibility_parse(what, v, &open, eb);
}

static int check_idle_threshold(const char *what, const char *v, struct errbuf *eb)
{
	unsigned pct;

	return gpuidle_parse_threshold(what, v, &pct, eb);
}

static int check_idle_action(const char *what, const char *v, struct errbuf *eb)
{
	bool stop;

	return gpuidle_parse_action(what, v, &stop, eb);
}

static int check_interactive_idle(const char *what, const char *v, struct errbuf *eb)
{
	uint64_t ms;

	return interactive_parse_idle(what, v, &ms, eb);
}

static int check_tls_san(const char *what, const char *v, struct errbuf *eb)
{
	if (!tls_san_valid(v))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a host name or an IP address", what, v);
	return 0;
}

static int check_url(const char *what, const char *v, struct errbuf *eb)
{
	if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected http://HOST:PORT or https://HOST:PORT",
			     what, v);
	if (v[strcspn(v, ", \t")])
		return error(eb, YERR(BAD_REQUEST), "%s '%s': one URL, without spaces or commas", what, v);
	return 0;
}

static int check_git_timeout(const char *what, const char *v, struct errbuf *eb)
{
	return check_span(what, v, 24 * 3600 * 1000, "1ms to 24h", eb);
}

static int check_registry(const char *what, const char *v, struct errbuf *eb)
{
	const char *why = spec_image_registry_problem(v);

	return why ? error(eb, YERR(BAD_REQUEST), "%s '%s': %s", what, v, why) : 0;
}

static int check_git_credential(const char *what, const char *v, struct errbuf *eb)
{
	struct gitcred c;
	int ret = gitcred_parse(what, v, &c, eb);

	gitcred_release(&c);
	return ret;
}

#define OPT(name, kind, flags, field, check, arg, help) \
	{ name, kind, flags, offsetof(struct master_config, field), check, arg, help }

static const struct conf_option master_options[] = {
	OPT("listen", CONF_STRING, 0, listen, NULL, "HOST:PORT",
	    "where to serve the API and the web UI (default 127.0.0.1:7420)"),
	OPT("data-dir", CONF_STRING, CONF_REQUIRED, data_dir, NULL, "DIR",
	    "the master's state: its SQLite store, logs, code, tokens"),
	OPT("store", CONF_STRING, 0, store, NULL, "CONNINFO",
	    "keep the state in PostgreSQL (postgres://USER@HOST/DB or libpq\n"
	    "keywords; PG* variables for the rest); default: SQLite in DIR"),
	OPT("store-retry", CONF_DURATION, 0, store_retry_ms, check_store_retry, "DURATION",
	    "after a failed commit, how long to try to read the store again\n"
	    "before stopping (default 1m)"),
	OPT("web-dir", CONF_STRING, 0, web_dir, NULL, "DIR",
	    "the web UI's files (default: web/ beside the yard binary, else\n"
	    YARD_WEB_DIR ")"),
	OPT("lease", CONF_DURATION, 0, lease_ms, check_lease, "DURATION",
	    "an agent silent this long is lost (default 15s)"),
	OPT("policy", CONF_LIST, CONF_RELOAD, policies, settings_check_policy, "[POOL=]POLICY",
	    "glas|las|fifo|fair|srtf|greedy, for every pool or for POOL (default glas)"),
	OPT("thresholds", CONF_STRING, CONF_RELOAD, thresholds, settings_check_thresholds, "T1,T2,...",
	    "the levels of las, glas and fair, in GPU-seconds"),
	OPT("team", CONF_LIST, CONF_RELOAD, teams, settings_check_team, "TEAM=WEIGHT[:QUOTA]",
	    "a team's fair share and GPU quota"),
	OPT("preempt-min-run", CONF_STRING, CONF_RELOAD, preempt_min_run, check_duration, "DURATION",
	    "a job started or resumed this recently is preempted only by a\n"
	    "higher priority (default 2m; 0: off)"),
	OPT("preempt-max-lost", CONF_STRING, CONF_RELOAD, preempt_max_lost, check_duration, "DURATION",
	    "least-attained-service and fair preemption never cost more work than\n"
	    "this since a job's last checkpoint, nor touch a job that has not\n"
	    "checkpointed since it started (default 10m; 0: off)"),
	OPT("data-quota", CONF_LIST, CONF_RELOAD, data_quotas, check_quota, "TEAM=SIZE",
	    "the bytes a team's datasets may hold"),
	OPT("outputs-retention", CONF_DURATION, CONF_RELOAD, outputs_retention_ms, NULL, "DURATION",
	    "free the outputs of jobs final this long (default 0: kept)"),
	OPT("idle-gpu-timeout", CONF_DURATION, CONF_RELOAD, idle_gpu_timeout_ms, NULL, "DURATION",
	    "flag (or stop) a running job whose GPUs stay idle this long\n"
	    "(default 0: off)"),
	OPT("idle-gpu-threshold", CONF_STRING, CONF_RELOAD, idle_gpu_threshold, check_idle_threshold, "PCT",
	    "a GPU under PCT% busy is idle (default 5)"),
	OPT("idle-gpu-action", CONF_STRING, CONF_RELOAD, idle_gpu_action, check_idle_action, "flag|stop",
	    "what an idle job gets (default flag)"),
	OPT("interactive-idle-timeout", CONF_STRING, CONF_RELOAD, interactive_idle_timeout,
	    check_interactive_idle, "DURATION",
	    "cancel an interactive job (yard shell) with no session attached\n"
	    "this long (default 1h; 0: off; a spec's interactive.idle_timeout\n"
	    "wins)"),
	OPT("rate-limit", CONF_STRING, CONF_RELOAD, rate_limit, check_rate_limit, "RATE[:BURST]",
	    "requests per second per token (default 200:2000; 0: no limit;\n"
	    "agents are not limited)"),
	OPT("visibility", CONF_STRING, CONF_RELOAD, visibility, check_visibility, "team|open",
	    "team (default): a job's logs, metrics, code and params are its\n"
	    "owner's, its team's and the admins'; open: every user sees all"),
	OPT("tls-cert", CONF_STRING, 0, tls_cert, NULL, "FILE", "serve https with this certificate (PEM)"),
	OPT("tls-key", CONF_STRING, 0, tls_key, NULL, "FILE", "and this key (PEM)"),
	OPT("tls-self-signed", CONF_BOOL, 0, tls_self_signed, NULL, NULL,
	    "serve https with a certificate made once in DIR/tls; clients give\n"
	    "the pin it prints"),
	OPT("tls-san", CONF_LIST, 0, tls_sans, check_tls_san, "NAME|IP",
	    "another name the self-signed certificate holds"),
	OPT("advertise-url", CONF_STRING, 0, advertise_url, check_url, "URL",
	    "how other masters and clients reach this one (default: the\n"
	    "listening address)"),
	OPT("leader-lease", CONF_DURATION, 0, leader_lease_ms, check_leader_span, "DURATION",
	    "masters on one PostgreSQL store: one leads, the others take over\n"
	    "once its lease lapses (default 1500ms)"),
	OPT("leader-renew", CONF_DURATION, 0, leader_renew_ms, check_leader_span, "DURATION",
	    "how often the leader renews its lease (default 250ms; at most half\n"
	    "the lease)"),
	OPT("provisioner", CONF_LIST, CONF_RELOAD, provisioners, elastic_check_provisioner,
	    "POOL=command:PATH|POOL=slurm:PARTITION",
	    "POOL's nodes come and go with the queue: made by a script\n"
	    "(PATH up POOL COUNT, PATH down NODE) or as Slurm allocations"),
	OPT("provisioner-min", CONF_LIST, CONF_RELOAD, provisioner_mins, elastic_check_pool_count, "POOL=N",
	    "the fewest nodes a provisioned pool keeps (default 0)"),
	OPT("provisioner-max", CONF_LIST, CONF_RELOAD, provisioner_maxes, elastic_check_pool_count, "POOL=N",
	    "the most nodes it may have (default 10)"),
	OPT("provisioner-idle", CONF_LIST, CONF_RELOAD, provisioner_idles, elastic_check_pool_duration,
	    "POOL=DURATION", "a node of it idle this long is given back (default 10m)"),
	OPT("provisioner-shape", CONF_LIST, CONF_RELOAD, provisioner_shapes, elastic_check_pool_shape,
	    "POOL=gpus=N,cpus=N,...", "what one node of it has, until one registers (gpus, gpu-model,\n"
	    "gpu-memory, cpus, memory, runtime, label=KEY=VALUE)"),
	OPT("provisioner-max-pending", CONF_STRING, CONF_RELOAD, provisioner_max_pending, elastic_check_count,
	    "N", "the most nodes of a pool asked for and not registered at once\n(default 8)"),
	OPT("provisioner-cooldown", CONF_STRING, CONF_RELOAD, provisioner_cooldown, elastic_check_duration,
	    "DURATION", "no scale-down this long after a scale-up, no scale-up this long\n"
	    "after a failure (default 30s)"),
	OPT("provisioner-register-timeout", CONF_STRING, CONF_RELOAD, provisioner_register_timeout,
	    elastic_check_register_timeout, "DURATION",
	    "a node asked for that has not registered after this is given up\n(default 5m)"),
	OPT("provisioner-url", CONF_STRING, CONF_RELOAD, provisioner_url, check_url, "URL",
	    "where new nodes' agents reach this master (default: its URL)"),
	OPT("slurm-time", CONF_STRING, CONF_RELOAD, slurm_time, elastic_check_slurm_time, "DURATION",
	    "the time limit of Slurm allocations (default: the partition's)"),
	OPT("slurm-account", CONF_STRING, CONF_RELOAD, slurm_account, elastic_check_slurm_word, "NAME",
	    "the Slurm account they are charged to"),
	OPT("slurm-qos", CONF_STRING, CONF_RELOAD, slurm_qos, elastic_check_slurm_word, "NAME",
	    "their Slurm quality of service"),
	OPT("slurm-work-dir", CONF_STRING, CONF_RELOAD, slurm_work_dir, elastic_check_path, "DIR",
	    "where the ephemeral agents keep their work dirs and logs on the\n"
	    "Slurm nodes (default " ELASTIC_DEFAULT_SLURM_WORK_DIR ")"),
	OPT("slurm-yard", CONF_STRING, CONF_RELOAD, slurm_yard, elastic_check_path, "PATH",
	    "the yard binary on the Slurm nodes (default: this master's)"),
	OPT("slurm-agent-arg", CONF_LIST, CONF_RELOAD, slurm_agent_args, NULL, "ARG",
	    "one more argument of the ephemeral agents (--gpus=auto, ...)"),
	OPT("git-credential", CONF_LIST, 0, git_credentials, check_git_credential,
	    "PREFIX=token-file:PATH|PREFIX=ssh-key:PATH",
	    "the credential of the git repositories whose URL starts with\n"
	    "PREFIX (code: {git: ...}): a file of TOKEN or USER:TOKEN for\n"
	    "https, or an ssh private key; read when a fetch needs it"),
	OPT("git-timeout", CONF_DURATION, 0, git_timeout_ms, check_git_timeout, "DURATION",
	    "the git work of one submission (list the refs, fetch, pack) is\n"
	    "stopped after this, answered 504 (default 2m)"),
	OPT("git-hook-secret-file", CONF_STRING, CONF_RELOAD, git_hook_secret_file, NULL, "PATH",
	    "a file holding the secret (16 bytes or more) that git servers\n"
	    "sign push notifications with (POST /v1/hooks/git, docs/git.md);\n"
	    "read again at each reload; none: pushes are refused"),
	OPT("registry", CONF_STRING, 0, registry, check_registry, "HOST[:PORT]",
	    "the cluster's registry: images built from jobs' code are\n"
	    "pushed there by the node that built them, and pulled from\n"
	    "there by the others (docs/images.md)"),
	OPT("registry-credential-file", CONF_STRING, 0, registry_credential_file, NULL, "PATH",
	    "a file of USER:PASSWORD for the cluster's registry, given to\n"
	    "the agents with each task that builds an image (read at start)"),
	OPT("store-images", CONF_BOOL, 0, store_images, NULL, NULL,
	    "a cluster without a registry: images built from jobs' code are\n"
	    "kept in the master's store by the node that built them, and\n"
	    "loaded from there by the others (docs/images.md)"),
};

const struct conf_option *master_conf_options(size_t *n)
{
	*n = ARRAY_SIZE(master_options);
	return master_options;
}

int master_config_check(const struct master_config *cfg, struct errbuf *eb)
{
	uint64_t lease = cfg->leader_lease_ms ? cfg->leader_lease_ms : LEADER_LEASE_MS;
	uint64_t renew = cfg->leader_renew_ms ? cfg->leader_renew_ms : LEADER_RENEW_MS;

	if (2 * renew > lease)
		return error(eb, YERR(BAD_REQUEST), "leader-renew %" PRIu64 "ms must be at most half of "
			     "leader-lease (%" PRIu64 "ms): the lease would lapse between renewals", renew, lease);
	if (cfg->registry && cfg->store_images)
		return error(eb, YERR(BAD_REQUEST), "registry '%s' and store-images: an image built is shared "
			     "through the cluster's registry or through the master's store, not both (give one)",
			     cfg->registry);
	if (cfg->registry_credential_file && !cfg->registry)
		return error(eb, YERR(BAD_REQUEST), "registry-credential-file: the credential of the cluster's "
			     "registry needs registry");
	return 0;
}

struct sig_waiter {
	struct master *m;
	sigset_t set;
};

/* Takes the signals in set: SIGHUP reloads, the others stop the master. */
static void *sig_thread(void *arg)
{
	struct sig_waiter *w = arg;
	int sig;

	while (!sigwait(&w->set, &sig)) {
		if (sig != SIGHUP) {
			master_stop(w->m);
			break;
		}
		master_reload(w->m);
	}
	return NULL;
}

int cmd_master(int argc, char **argv)
{
	struct master_config cfg = { .listen = "127.0.0.1:7420" };
	struct errbuf eb = ERRBUF_INIT;
	struct sig_waiter w;
	struct master *m;
	struct conf conf;
	pthread_t th;
	int rc;

	conf_init(&conf, "master", master_options, ARRAY_SIZE(master_options));
	rc = conf_load(&conf, argc, argv, &cfg, &eb);
	if (rc == CONF_HELP) {
		rc = 0;
		goto out;
	}
	if (!rc)
		rc = master_config_check(&cfg, &eb);
	if (rc) {
		fprintf(stderr, "yard master: %s\n", eb.msg);
		if (!conf.file || !strstr(eb.msg, conf.file))
			fprintf(stderr, "(yard master --help lists the options)\n");
		rc = 2;
		goto out;
	}
	cfg.conf = conf.file ? &conf : NULL;
	/* signals go to one waiting thread that asks the loop to stop or reload */
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGTERM);
	sigaddset(&w.set, SIGINT);
	sigaddset(&w.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &w.set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (master_open(&cfg, &m, &eb)) {
		fprintf(stderr, "yard master: %s\n", eb.msg);
		rc = 1;
		goto out;
	}
	w.m = m;
	pthread_create(&th, NULL, sig_thread, &w);
	if (master_tls_pin(m)) {
		fprintf(stderr, "yard master: serving https; clients trust it with --pin %s\n",
			master_tls_pin(m));
		printf("yard master ready url=%s pin=%s\n", master_url(m), master_tls_pin(m));
	} else {
		printf("yard master ready url=%s\n", master_url(m));
	}
	fflush(stdout);
	rc = master_run(m) ? 1 : 0;
	pthread_cancel(th);
	pthread_join(th, NULL);
	master_free(m);
out:
	conf_release(&conf);
	return rc;
}
