/*
 * The master's process: options, start-up (store, first tokens, listening
 * socket), the event loop (MHD under libuv, group commit before sleeping)
 * and shutdown.
 */
#include "base/compat.h"
#include "master/master.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <malloc.h>
#include <microhttpd.h>
#include <pthread.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "master/auth.h"
#include "master/core.h"
#include "master/outputs.h"
#include "master/datasets.h"
#include "master/execs.h"
#include "sched/decide.h"
#include "master/http.h"
#include "master/jobs.h"
#include "master/ratelimit.h"
#include "master/static.h"
#include "master/visibility.h"

#define TICK_MS 200

static int write_token_file(struct master *m, const char *name, const char *tok,
			    struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", m->data_dir, name);
	char *text = xasprintf("%s\n", tok);
	int ret = 0;

	if (write_file_atomic(path, text, strlen(text), 0600))
		ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	free(path);
	free(text);
	return ret;
}

/* A leader that learnt another master leads: every held request is
 * answered not_leader, and the model is dropped (a standby has none). */
static void step_down(struct master *m, const struct errbuf *why)
{
	struct errbuf eb = ERRBUF_INIT;

	fprintf(stderr, "yard master: stepping down: %s\n", why->msg);
	leader_deposed(m);
	error(&eb, YERR(NOT_LEADER), "this master stepped down: another master leads now; retry");
	http_release_all(m, &eb);
	execs_clear(m);
	core_clear(m);
}

/* Commits the open batch. On failure the model is reloaded from the store,
 * which holds exactly what was acknowledged; a commit the lease's fence
 * refused makes this master a standby. */
static int batch_commit(struct master *m, struct errbuf *eb)
{
	int rc = m->batch_err;
	bool unsure = m->leadership.state == LEADER_UNSURE;

	if (!m->txn_open)
		return 0;
	if (rc) {
		*eb = m->batch_eb;
		m->sops->rollback(m->store);
	} else {
		leader_committing(m);
		rc = m->sops->commit(m->store, eb);
		leader_committed(m, rc);
	}
	m->txn_open = false;
	m->batch_err = 0;
	datasets_collect_garbage(m, rc == 0);
	if (!rc && unsure && m->leadership.state == LEADER_LEADING)
		/* agents could not be answered while unsure: none is lost for it */
		jobs_restore_leases(m);
	if (rc == YERR(NOT_LEADER)) {
		step_down(m, eb);
		return rc;
	}
	if (rc) {
		struct errbuf leb = ERRBUF_INIT;
		fprintf(stderr, "yard master: commit failed: %s\n", eb->msg);
		/* A store that cannot be read now either (a PostgreSQL server
		 * restarting) is tried again for up to a minute, the loop waiting
		 * as no change could be stored meanwhile; then the master stops
		 * rather than serve a model it does not have. */
		for (unsigned ms = 50, waited = 0; !m->store_lost; waited += ms, ms = ms < 1000 ? 2 * ms : ms) {
			core_clear(m);
			if (!core_load(m, &leb))
				break;
			m->store_lost = waited >= 60000;
			if (!waited || m->store_lost)
				fprintf(stderr, "yard master: cannot reload the store%s: %s\n",
					m->store_lost ? ", stopping" : " (trying again for a minute)", leb.msg);
			if (m->store_lost)
				uv_stop(&m->loop);
			else
				usleep(ms * 1000);
			errbuf_reset(&leb);
		}
		jobs_restore_leases(m);
		m->sched_needed = true;
	}
	return rc;
}

/* A scheduling pass when one is due and this master leads, and a commit
 * of the open batch, each timed for GET /metrics (prom.h). */
static void schedule_timed(struct master *m)
{
	uint64_t t0;

	if (m->leadership.state == LEADER_STANDBY || (!m->sched_needed && !m->nfresh))
		return;
	t0 = mono_us();
	jobs_schedule(m);
	prom_sched_pass(m, mono_us() - t0);
}

static int commit_timed(struct master *m, struct errbuf *eb)
{
	bool open = m->txn_open;
	uint64_t t0 = mono_us();
	int rc = batch_commit(m, eb);

	if (open)
		prom_commit(m, mono_us() - t0);
	return rc;
}

/* Runs before the loop sleeps (redis's beforeSleep): schedule, commit the
 * batch, then release the replies that waited for it. */
static void on_prepare(uv_prepare_t *h)
{
	struct master *m = h->data;
	struct errbuf eb = ERRBUF_INIT;
	int rc;

	schedule_timed(m);
	rc = commit_timed(m, &eb);
	http_wake(m, rc, &eb);
	http_run(m);
	/* MHD_run may have produced more changes (resumed requests): commit them too */
	schedule_timed(m);
	if (m->txn_open) {
		rc = commit_timed(m, &eb);
		http_wake(m, rc, &eb);
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	http_run(h->data);
}

static void on_tick(uv_timer_t *t)
{
	struct master *m = t->data;

	/* a master that may not answer agents now loses none of them */
	if (!leader_serving(m))
		return;
	jobs_tick(m);
	/* queue positions of jobs placed by fresh-only plans, and waiting
	 * reasons in general, are refreshed by a full plan at most every tick */
	if (m->positions_stale && mono_ms() - m->last_full_plan_ms >= 1000)
		m->sched_needed = true;
	/* A large listing builds and frees megabytes at once; glibc keeps freed
	 * heap that is not at its top. Give it back once a second. */
	if (++m->ticks % 5 == 0) {
		malloc_trim(0);
		/* tokens' last use: at most one store write a minute each */
		auth_tick(m, wall_us());
		outputs_expire(m, wall_us());
		if (m->ticks % 25 == 0) /* every 5 s, as agents sample */
			gpuidle_cluster_sample(m);
	}
}

static int master_lead(struct master *m, struct errbuf *eb);

/* The lease: a standby tries to take it, a leader renews it (an empty
 * batch when nothing else was committed for a renew_ms). */
static void on_lease_tick(uv_timer_t *t)
{
	struct master *m = t->data;
	struct errbuf eb = ERRBUF_INIT;

	if (m->leadership.state != LEADER_STANDBY) {
		if (leader_tick(m))
			core_batch_open(m);
		return;
	}
	if (!leader_try(m))
		return;
	if (master_lead(m, &eb)) {
		fprintf(stderr, "yard master: cannot take over: %s\n", eb.msg);
		step_down(m, &eb);
		return;
	}
	fprintf(stderr, "yard master: leading at epoch %" PRIu64 " with %zu nodes and %zu jobs\n",
		m->leadership.epoch, m->nnodes, m->njobs);
}

static void on_stop(uv_async_t *a)
{
	uv_stop(a->loop);
}

static int first_start(struct master *m, struct errbuf *eb)
{
	char *admin = auth_create_token(m, ROLE_ADMIN, "admin", NULL, 0);
	char *join = auth_create_token(m, ROLE_JOIN, "join", NULL, 0);
	int ret;

	core_save_meta(m, "created_at", "1");
	ret = write_token_file(m, "admin-token", admin, eb);
	if (!ret)
		ret = write_token_file(m, "join-token", join, eb);
	if (!ret)
		ret = batch_commit(m, eb);
	if (!ret)
		fprintf(stderr, "yard master: admin token %s\n", admin);
	free(admin);
	free(join);
	return ret;
}

/* Parses "T1,T2,..." into conf's thresholds. */
static int parse_thresholds(const char *text, struct sched_policy_conf *conf, struct errbuf *eb)
{
	const char *p = text;
	size_t n = 0;
	uint64_t v, last = 0;

	while (*p && n < ARRAY_SIZE(conf->thresholds)) {
		if (parse_u64(&p, &v) < 0 || v <= last || (*p && *p != ','))
			return error(eb, YERR(BAD_REQUEST),
				     "--thresholds '%s': expected ascending GPU-seconds such as 3250,7200,18000",
				     text);
		conf->thresholds[n++] = last = v;
		if (*p == ',')
			p++;
	}
	conf->nthresholds = n;
	return 0;
}

/* The policy of every pool (cfg->policies), the levels, the teams' shares,
 * the protection of running work. */
static int master_policies(struct master *m, const struct master_config *cfg, struct errbuf *eb)
{
	sched_policy_conf_init(&m->policy, SCHED_POLICY_DEFAULT);
	for (size_t i = 0; i < cfg->npolicies; i++) {
		const char *v = cfg->policies[i], *eq = strchr(v, '=');
		int p = sched_policy_parse(eq ? eq + 1 : v);
		char *pool = eq ? xstrndup(v, (size_t)(eq - v)) : NULL;
		bool ok = p >= 0 && (!pool || spec_name_valid(pool));
		free(pool);
		if (!ok)
			return error(eb, YERR(BAD_REQUEST),
				     "--policy '%s': expected [POOL=]glas|las|fifo|fair|srtf|greedy", v);
		if (!eq) {
			sched_policy_conf_init(&m->policy, (enum sched_policy)p);
			continue;
		}
		ALLOC_GROW(m->pool_policies, m->npool_policies + 1, m->apool_policies);
		struct pool_policy *pp = &m->pool_policies[m->npool_policies++];
		pp->pool = xstrndup(v, (size_t)(eq - v));
		sched_policy_conf_init(&pp->conf, (enum sched_policy)p);
	}
	if (cfg->thresholds) {
		int ret = parse_thresholds(cfg->thresholds, &m->policy, eb);
		for (size_t i = 0; !ret && i < m->npool_policies; i++)
			ret = parse_thresholds(cfg->thresholds, &m->pool_policies[i].conf, eb);
		if (ret)
			return ret;
	}
	{
		/* the protection of running work, the same in every pool */
		uint64_t min_run_ms = SCHED_PREEMPT_MIN_RUN_S * 1000,
			 max_lost_ms = SCHED_PREEMPT_MAX_LOST_S * 1000;
		if (cfg->preempt_min_run && parse_duration_str(cfg->preempt_min_run, &min_run_ms))
			return error(eb, YERR(BAD_REQUEST), "--preempt-min-run '%s': expected a duration",
				     cfg->preempt_min_run);
		if (cfg->preempt_max_lost && parse_duration_str(cfg->preempt_max_lost, &max_lost_ms))
			return error(eb, YERR(BAD_REQUEST), "--preempt-max-lost '%s': expected a duration",
				     cfg->preempt_max_lost);
		for (size_t i = 0; i <= m->npool_policies; i++) {
			struct sched_policy_conf *c = i < m->npool_policies ? &m->pool_policies[i].conf : &m->policy;
			c->min_run_s = min_run_ms / 1000;
			c->max_lost_s = max_lost_ms / 1000;
			c->need_checkpoint = max_lost_ms > 0;
		}
	}
	for (size_t i = 0; i < cfg->nteams; i++) {
		const char *v = cfg->teams[i], *eq = strchr(v, '='), *p;
		uint64_t w = 0, q = 0;
		p = eq ? eq + 1 : NULL;
		if (!eq || parse_u64(&p, &w) < 0 || !w || (*p && (*p != ':' || (p++, parse_u64(&p, &q) < 0) || *p)))
			return error(eb, YERR(BAD_REQUEST),
				     "--team '%s': expected TEAM=WEIGHT or TEAM=WEIGHT:QUOTA (integers)", v);
		ALLOC_GROW(m->teams, m->nteams + 1, m->ateams);
		m->teams[m->nteams++] = (struct team_share){ xstrndup(v, (size_t)(eq - v)), (double)w,
							     (unsigned)q };
	}
	return 0;
}

static void add_name(char ***names, size_t *n, size_t *alloc, const char *name, size_t len)
{
	for (size_t i = 0; i < *n; i++)
		if (strlen((*names)[i]) == len && !strncmp((*names)[i], name, len))
			return;
	ALLOC_GROW(*names, *n + 1, *alloc);
	(*names)[(*n)++] = xstrndup(name, len);
}

/* The names a self-signed certificate holds: this host's name, loopback,
 * the listen address (every interface's IPv4 address when it is all of
 * them) and --tls-san. Caller frees the array and its strings. */
static char **self_signed_names(const struct master_config *cfg, size_t *n)
{
	char **names = NULL, host[256] = "";
	size_t alloc = 0;
	const char *colon = strrchr(cfg->listen, ':');
	size_t hlen = colon ? (size_t)(colon - cfg->listen) : 0;

	*n = 0;
	if (gethostname(host, sizeof(host) - 1) == 0 && tls_san_valid(host))
		add_name(&names, n, &alloc, host, strlen(host));
	add_name(&names, n, &alloc, "localhost", 9);
	add_name(&names, n, &alloc, "127.0.0.1", 9);
	add_name(&names, n, &alloc, "::1", 3);
	if (!hlen || (hlen == 7 && !strncmp(cfg->listen, "0.0.0.0", 7))) {
		struct ifaddrs *ifs = NULL;
		char ip[INET_ADDRSTRLEN];
		if (getifaddrs(&ifs) == 0) {
			for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
				const struct sockaddr_in *sin = (const void *)i->ifa_addr;
				if (sin && sin->sin_family == AF_INET &&
				    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
					add_name(&names, n, &alloc, ip, strlen(ip));
			}
			freeifaddrs(ifs);
		}
	} else {
		add_name(&names, n, &alloc, cfg->listen, hlen);
	}
	for (size_t i = 0; i < cfg->ntls_sans; i++)
		add_name(&names, n, &alloc, cfg->tls_sans[i], strlen(cfg->tls_sans[i]));
	return names;
}

/* Reads (or first makes) the certificate and key the master serves. */
static int master_tls(struct master *m, const struct master_config *cfg, struct errbuf *eb)
{
	char *dir, *cert, *key, **names;
	size_t nnames;
	bool created = false;
	int ret;

	if (cfg->tls_cert || cfg->tls_key) {
		if (!cfg->tls_cert || !cfg->tls_key)
			return error(eb, YERR(BAD_REQUEST), "%s needs %s too",
				     cfg->tls_cert ? "--tls-cert" : "--tls-key",
				     cfg->tls_cert ? "--tls-key" : "--tls-cert");
		if (cfg->tls_self_signed)
			return error(eb, YERR(BAD_REQUEST),
				     "--tls-self-signed makes its own certificate: give it or "
				     "--tls-cert/--tls-key, not both");
		return tls_load(cfg->tls_cert, cfg->tls_key, "--tls-cert", "--tls-key", &m->tls, eb);
	}
	if (!cfg->tls_self_signed) {
		if (cfg->ntls_sans)
			return error(eb, YERR(BAD_REQUEST), "--tls-san '%s' needs --tls-self-signed",
				     cfg->tls_sans[0]);
		return 0;
	}
	for (size_t i = 0; i < cfg->ntls_sans; i++)
		if (!tls_san_valid(cfg->tls_sans[i]))
			return error(eb, YERR(BAD_REQUEST),
				     "--tls-san '%s': expected a host name or an IP address",
				     cfg->tls_sans[i]);
	names = self_signed_names(cfg, &nnames);
	dir = xasprintf("%s/tls", m->data_dir);
	cert = xasprintf("%s/cert.pem", dir);
	key = xasprintf("%s/key.pem", dir);
	ret = tls_self_signed(dir, (const char *const *)names, nnames, &created, eb);
	if (!ret)
		ret = tls_load(cert, key, "--tls-self-signed", "--tls-self-signed", &m->tls, eb);
	if (!ret && created)
		fprintf(stderr, "yard master: made a self-signed certificate '%s'\n", cert);
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(dir);
	free(cert);
	free(key);
	return ret;
}

/* Loads the model and starts serving as the leader: at start, or when a
 * standby takes over (every node then gets a fresh lease). */
static int master_lead(struct master *m, struct errbuf *eb)
{
	int ret;

	core_clear(m);
	free(m->job_key);
	m->job_key = NULL;
	ret = core_load(m, eb);
	if (!ret && !m->ntokens)
		ret = first_start(m, eb);
	if (!ret)
		ret = m->sops->get_meta(m->store, "job_token_key", &m->job_key, eb);
	if (!ret && !m->job_key) {
		/* the key of every job token (auth.h); made once, kept with the state */
		char key[65];
		random_hex(key, 32);
		m->job_key = xstrdup(key);
		core_save_meta(m, "job_token_key", key);
		ret = batch_commit(m, eb);
	}
	if (ret)
		return ret;
	jobs_restore_leases(m);
	nodes_await(m);
	m->sched_needed = true;
	return 0;
}

int master_open(const struct master_config *cfg, struct master **out, struct errbuf *eb)
{
	struct master *m = xcalloc(1, sizeof(*m));
	char *dir = NULL;
	int created = 0, ret = 0;

	*out = NULL;
	m->data_dir = xstrdup(cfg->data_dir);
	m->web_dir = cfg->web_dir ? xstrdup(cfg->web_dir) : static_default_dir();
	m->lease_ms = cfg->lease_ms ? cfg->lease_ms : 15000;
	m->outputs_retention_ms = cfg->outputs_retention_ms;
	m->started_wall_us = wall_us();
	prom_init(&m->prom);
	/* first: master_free closes the loop, whatever failed after this */
	uv_loop_init(&m->loop);
	ret = gpuidle_parse(&m->gpuidle, cfg->idle_gpu_threshold, cfg->idle_gpu_action, eb);
	m->gpuidle.timeout_ms = cfg->idle_gpu_timeout_ms;
	if (!ret)
		ret = master_policies(m, cfg, eb);
	for (size_t i = 0; !ret && i < cfg->ndata_quotas; i++)
		ret = datasets_add_quota(m, cfg->data_quotas[i], eb);
	if (ret)
		goto out;
	if (cfg->visibility && (ret = visibility_parse(cfg->visibility, &m->visibility_open, eb)))
		goto out;
	if (cfg->rate_limit) {
		uint64_t rate, burst;
		if ((ret = ratelimit_parse(cfg->rate_limit, &rate, &burst, eb)))
			goto out;
		ratelimit_init(&m->ratelimit, rate, burst);
	} else {
		ratelimit_init(&m->ratelimit, RATELIMIT_DEFAULT_RATE, RATELIMIT_DEFAULT_BURST);
	}
	m->sops = cfg->store ? &store_pg_ops : &store_sqlite_ops;
	for (int i = 0; i < 3; i++) {
		static const char *const sub[] = { "", "/logs", "/code" };
		free(dir);
		dir = xasprintf("%s%s", m->data_dir, sub[i]);
		if (mkdir_p(dir, 0700)) {
			ret = error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
			goto out;
		}
	}
	if (access(m->data_dir, W_OK)) {
		/* a read-only data dir would fail later, and less clearly */
		ret = error(eb, yerr_of_errno(errno), "--data-dir '%s': %s: the master writes its store there",
			    m->data_dir, strerror(errno));
		goto out;
	}
	ret = datasets_open(m, eb);
	if (ret)
		goto out;
	ret = m->sops->open(cfg->store ? cfg->store : m->data_dir, &m->store, &created, eb);
	if (!ret)
		ret = master_tls(m, cfg, eb);
	if (!ret)
		ret = http_start(m, cfg->listen, eb);
	if (ret)
		goto out;
	leader_init(m, cfg->advertise_url, cfg->leader_lease_ms, cfg->leader_renew_ms);
	/* a standby loads the model when it takes over */
	if (leader_try(m))
		ret = master_lead(m, eb);
out:
	free(dir);
	if (ret) {
		master_free(m);
		m = NULL;
	}
	*out = m;
	return ret;
}

const char *master_url(const struct master *m)
{
	return m->url;
}

const char *master_tls_pin(const struct master *m)
{
	return m->tls.pin;
}

int master_run(struct master *m)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);

	if (!info)
		return YERR(INTERNAL);
	uv_poll_init(&m->loop, &m->mhd_poll, info->epoll_fd);
	m->mhd_poll.data = m;
	uv_poll_start(&m->mhd_poll, UV_READABLE, on_poll);
	uv_timer_init(&m->loop, &m->mhd_timer);
	m->mhd_timer.data = m;
	uv_timer_init(&m->loop, &m->tick);
	m->tick.data = m;
	uv_timer_start(&m->tick, on_tick, TICK_MS, TICK_MS);
	uv_timer_init(&m->loop, &m->lease_tick);
	m->lease_tick.data = m;
	if (m->leadership.shared)
		uv_timer_start(&m->lease_tick, on_lease_tick, m->leadership.renew_ms / 2,
			       m->leadership.renew_ms / 2);
	uv_prepare_init(&m->loop, &m->prepare);
	m->prepare.data = m;
	uv_prepare_start(&m->prepare, on_prepare);
	uv_async_init(&m->loop, &m->stop_async, on_stop);
	m->stop_async.data = m;
	http_run(m);
	uv_run(&m->loop, UV_RUN_DEFAULT);

	/* answer whatever was held, let MHD send it, then close the handles */
	{
		struct errbuf eb = ERRBUF_INIT;
		batch_commit(m, &eb);
		leader_release_lease(m);
	}
	http_release_all(m, NULL);
	for (int i = 0; i < 3; i++)
		MHD_run(m->mhd);
	uv_close((uv_handle_t *)&m->mhd_poll, NULL);
	uv_close((uv_handle_t *)&m->mhd_timer, NULL);
	uv_close((uv_handle_t *)&m->tick, NULL);
	uv_close((uv_handle_t *)&m->lease_tick, NULL);
	uv_close((uv_handle_t *)&m->prepare, NULL);
	uv_close((uv_handle_t *)&m->stop_async, NULL);
	uv_run(&m->loop, UV_RUN_DEFAULT);
	return m->store_lost ? YERR(IO) : 0;
}

void master_stop(struct master *m)
{
	uv_async_send(&m->stop_async);
}

void master_free(struct master *m)
{
	if (!m)
		return;
	http_stop(m);
	if (m->store) {
		if (m->txn_open)
			m->sops->rollback(m->store);
		m->sops->close(m->store);
	}
	datasets_collect_garbage(m, false);
	core_clear(m);
	prom_release(&m->prom);
	uv_loop_close(&m->loop);
	shared_body_unref(m->queue_cache);
	shared_body_unref(m->jobs_list);
	free(m->jobs_list_user);
	free(m->jobs_list_viewer);
	free(m->data_dir);
	free(m->job_key);
	for (size_t i = 0; i < m->npool_policies; i++)
		free(m->pool_policies[i].pool);
	free(m->pool_policies);
	for (size_t i = 0; i < m->nteams; i++)
		free(m->teams[i].team);
	free(m->teams);
	for (size_t i = 0; i < m->ndata_quotas; i++)
		free(m->data_quotas[i].team);
	free(m->data_quotas);
	execs_clear(m);
	ratelimit_release(&m->ratelimit);
	free(m->web_dir);
	free(m->url);
	tls_identity_release(&m->tls);
	leader_release(&m->leadership);
	free(m);
}

/* ---- yard master ---- */

struct sig_waiter {
	struct master *m;
	sigset_t set;
};

static void *sig_thread(void *arg)
{
	struct sig_waiter *w = arg;
	int sig;

	if (!sigwait(&w->set, &sig))
		master_stop(w->m);
	return NULL;
}

static void master_usage(FILE *out)
{
	fprintf(out, "usage: yard master --listen ADDR --data-dir DIR [--lease SECONDS]\n"
		     "                   [--policy [POOL=]glas|las|fifo|fair|srtf|greedy]...   (default glas)\n"
		     "                   [--thresholds T1,T2,...]   (las levels, in GPU-seconds)\n"
		     "                   [--team TEAM=WEIGHT[:QUOTA]]...   (fair shares and GPU quotas)\n"
		     "                   [--preempt-min-run DURATION]   (default 2m: a job started or\n"
		     "                    resumed this recently is preempted only by a higher priority;\n"
		     "                    0: off)\n"
		     "                   [--preempt-max-lost DURATION]   (default 10m: least-attained-\n"
		     "                    service and fair preemption never cost more work than this\n"
		     "                    since a job's last checkpoint, nor touch a job that has not\n"
		     "                    checkpointed since it started; 0: off)\n"
		     "                   [--data-quota TEAM=SIZE]...   (bytes of a team's datasets)\n"
		     "                   [--outputs-retention DURATION] (free outputs of jobs final this long)\n"
		     "                   [--idle-gpu-timeout DURATION [--idle-gpu-threshold PCT]\n"
		     "                    [--idle-gpu-action flag|stop]]   (flag, or stop, a running job\n"
		     "                    whose GPUs stay under PCT%% busy, default 5, that long)\n"
		     "                   [--store postgres://USER@HOST/DB]   (keep the state in\n"
		     "                    PostgreSQL, a URI or libpq keywords, PG* variables for the\n"
		     "                    rest; default: SQLite in DIR/state.db)\n"
		     "                   [--advertise-url URL]   (how other masters and clients reach\n"
		     "                    this one; default: the listening address)\n"
		     "                   [--leader-lease DURATION] [--leader-renew DURATION]   (masters\n"
		     "                    on one PostgreSQL store: one leads, the others stand by and\n"
		     "                    take over once its lease lapses; defaults %dms and %dms)\n"
		     "                   [--web-dir DIR]   (the web UI; default: web/ beside the yard\n"
		     "                    binary if there, else " YARD_WEB_DIR ")\n"
		     "                   [--tls-cert FILE --tls-key FILE]   (serve https)\n"
		     "                   [--tls-self-signed [--tls-san NAME|IP]...]   (https with a\n"
		     "                    certificate made once in DIR/tls; clients give its pin)\n"

		     "                   [--rate-limit RATE[:BURST]]   (requests per second per token;\n"
		     "                    default %d:%d, 0: no limit; agents are not limited)\n"
		     "                   [--visibility team|open]   (team, the default: a job's logs,\n"
		     "                    metrics, code and params are its owner's, its team's and the\n"
		     "                    admins'; open: every user sees all)\n",
		LEADER_LEASE_MS, LEADER_RENEW_MS, RATELIMIT_DEFAULT_RATE, RATELIMIT_DEFAULT_BURST);
}

int cmd_master(int argc, char **argv)
{
	struct master_config cfg = { .listen = "127.0.0.1:7420", .data_dir = NULL };
	const char *policies[64], *teams[256], *quotas[256], *sans[64];
	struct errbuf eb = ERRBUF_INIT;
	struct sig_waiter w;
	struct master *m;
	pthread_t th;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			master_usage(stdout);
			return 0;
		} else if (!strcmp(a, "--listen") && v) {
			cfg.listen = v;
			i++;
		} else if (!strcmp(a, "--data-dir") && v) {
			cfg.data_dir = v;
			i++;
		} else if (!strcmp(a, "--store") && v) {
			cfg.store = v;
			i++;
		} else if (!strcmp(a, "--web-dir") && v) {
			cfg.web_dir = v;
			i++;
		} else if (!strcmp(a, "--policy") && v && cfg.npolicies < ARRAY_SIZE(policies)) {
			policies[cfg.npolicies++] = v;
			i++;
		} else if (!strcmp(a, "--team") && v && cfg.nteams < ARRAY_SIZE(teams)) {
			teams[cfg.nteams++] = v;
			i++;
		} else if (!strcmp(a, "--data-quota") && v && cfg.ndata_quotas < ARRAY_SIZE(quotas)) {
			quotas[cfg.ndata_quotas++] = v;
			i++;
		} else if (!strcmp(a, "--tls-cert") && v) {
			cfg.tls_cert = v;
			i++;
		} else if (!strcmp(a, "--tls-key") && v) {
			cfg.tls_key = v;
			i++;
		} else if (!strcmp(a, "--tls-self-signed")) {
			cfg.tls_self_signed = true;
		} else if (!strcmp(a, "--tls-san") && v && cfg.ntls_sans < ARRAY_SIZE(sans)) {
			sans[cfg.ntls_sans++] = v;
			i++;
		} else if (!strcmp(a, "--rate-limit") && v) {
			cfg.rate_limit = v;
			i++;
		} else if (!strcmp(a, "--visibility") && v) {
			cfg.visibility = v;
			i++;
		} else if (!strcmp(a, "--preempt-min-run") && v) {
			cfg.preempt_min_run = v;
			i++;
		} else if (!strcmp(a, "--preempt-max-lost") && v) {
			cfg.preempt_max_lost = v;
			i++;
		} else if (!strcmp(a, "--thresholds") && v) {
			cfg.thresholds = v;
			i++;
		} else if (!strcmp(a, "--advertise-url") && v) {
			cfg.advertise_url = v;
			i++;
		} else if ((!strcmp(a, "--leader-lease") || !strcmp(a, "--leader-renew")) && v) {
			uint64_t ms;
			if (parse_duration_str(v, &ms) || !ms || ms > 600 * 1000) {
				fprintf(stderr, "yard master: %s '%s': expected a duration of 1ms to 10m\n", a, v);
				return 2;
			}
			*(!strcmp(a, "--leader-lease") ? &cfg.leader_lease_ms : &cfg.leader_renew_ms) = (unsigned)ms;
			i++;
		} else if ((!strcmp(a, "--outputs-retention") || !strcmp(a, "--idle-gpu-timeout")) && v) {
			uint64_t *ms = a[2] == 'o' ? &cfg.outputs_retention_ms : &cfg.idle_gpu_timeout_ms;
			if (parse_duration_str(v, ms) || !*ms) {
				fprintf(stderr, "yard master: %s '%s': expected a duration such as %s\n", a, v,
					a[2] == 'o' ? "30d" : "30m");
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--idle-gpu-threshold") && v) {
			cfg.idle_gpu_threshold = v;
			i++;
		} else if (!strcmp(a, "--idle-gpu-action") && v) {
			cfg.idle_gpu_action = v;
			i++;
		} else if (!strcmp(a, "--lease") && v) {
			uint64_t ms;
			if (parse_duration_str(v, &ms) || !ms || ms > 3600 * 1000) {
				fprintf(stderr, "yard master: --lease '%s': expected a duration\n", v);
				return 2;
			}
			cfg.lease_ms = (unsigned)ms;
			i++;
		} else {
			fprintf(stderr, "yard master: unknown option '%s'\n", a);
			master_usage(stderr);
			return 2;
		}
	}
	if (!cfg.data_dir) {
		master_usage(stderr);
		return 2;
	}
	if (cfg.advertise_url && strncmp(cfg.advertise_url, "http://", 7) &&
	    strncmp(cfg.advertise_url, "https://", 8)) {
		fprintf(stderr, "yard master: --advertise-url '%s': expected http://HOST:PORT or https://HOST:PORT\n",
			cfg.advertise_url);
		return 2;
	}
	if (cfg.advertise_url && cfg.advertise_url[strcspn(cfg.advertise_url, ", \t\r\n")]) {
		fprintf(stderr, "yard master: --advertise-url '%s': one URL, without spaces or commas\n",
			cfg.advertise_url);
		return 2;
	}
	{
		unsigned lease = cfg.leader_lease_ms ? cfg.leader_lease_ms : LEADER_LEASE_MS;
		unsigned renew = cfg.leader_renew_ms ? cfg.leader_renew_ms : LEADER_RENEW_MS;
		if (2 * renew > lease) {
			fprintf(stderr, "yard master: --leader-renew %u ms must be at most half of --leader-lease"
				" (%u ms): the lease would lapse between renewals\n", renew, lease);
			return 2;
		}
	}
	cfg.policies = policies;
	cfg.teams = teams;
	cfg.data_quotas = quotas;
	cfg.tls_sans = sans;
	/* signals go to one waiting thread that asks the loop to stop */
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGTERM);
	sigaddset(&w.set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &w.set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (master_open(&cfg, &m, &eb)) {
		fprintf(stderr, "yard master: %s\n", eb.msg);
		return 1;
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
	rc = master_run(m);
	pthread_cancel(th);
	pthread_join(th, NULL);
	master_free(m);
	return rc ? 1 : 0;
}
