/*
 * The master's process: start-up (store, first tokens, listening socket),
 * the event loop (MHD under libuv, group commit before sleeping) and
 * shutdown. Its options and signals are master_main.c's.
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
#include "master/audit.h"
#include "master/auth.h"
#include "master/backup.h"
#include "master/core.h"
#include "master/outputs.h"
#include "master/datasets.h"
#include "master/elastic.h"
#include "master/execs.h"
#include "master/gitcode.h"
#include "master/images.h"
#include "sched/decide.h"
#include "master/http.h"
#include "master/interactive.h"
#include "master/jobs.h"
#include "master/sessions.h"
#include "master/settings.h"
#include "master/static.h"

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
	sessions_end_all(m, "this master stepped down: another master leads now");
	execs_clear(m);
	datasets_gc_release(m);
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
	if (!rc)
		elastic_committed(m); /* what a provisioner is asked for is stored first */
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
		 * restarting) is tried again for up to --store-retry (a minute),
		 * the loop waiting as no change could be stored meanwhile; then
		 * the master stops rather than serve a model it does not have. */
		for (unsigned ms = 50, waited = 0; !m->store_lost; waited += ms, ms = ms < 1000 ? 2 * ms : ms) {
			core_clear(m);
			if (!core_load(m, &leb))
				break;
			m->store_lost = waited >= m->store_retry_ms;
			if (!waited || m->store_lost)
				fprintf(stderr, "yard master: cannot reload the store%s: %s\n",
					m->store_lost ? ", stopping" : " (trying again for --store-retry)", leb.msg);
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
static void on_sched_timer(uv_timer_t *t)
{
	/* nothing: the loop turn it makes runs on_prepare, which schedules */
}

/* A pass waits until as long after the last one as that one took: with
 * 10,000 nodes a pass takes milliseconds, and passes one after another
 * left the loop no time for the requests that feed them; so passes take
 * at most about half of the loop, and each takes in what came meanwhile.
 * On an idle master a pass runs at once. */
static void schedule_timed(struct master *m)
{
	uint64_t t0, dt;

	if (m->leadership.state == LEADER_STANDBY || (!m->sched_needed && !m->nfresh))
		return;
	t0 = mono_us();
	if (t0 < m->sched_after_us) {
		if (!uv_is_active((uv_handle_t *)&m->sched_timer))
			uv_timer_start(&m->sched_timer, on_sched_timer,
				       (m->sched_after_us - t0 + 999) / 1000, 0);
		return;
	}
	jobs_schedule(m);
	dt = mono_us() - t0;
	m->sched_after_us = t0 + 2 * dt;
	prom_sched_pass(m, dt);
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
	interactive_tick(m);
	elastic_tick(m);
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
		datasets_collect_pending(m); /* what waited for a backup to end */
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

/* SIGHUP: the config file again (settings.h); a bad one changes nothing. */
static void on_reload(uv_async_t *a)
{
	struct master *m = a->data;
	struct errbuf eb = ERRBUF_INIT;
	json_t *res = NULL;

	if (settings_reload(m, &res, &eb))
		fprintf(stderr, "yard master: reload refused, nothing changed: %s\n", eb.msg);
	/* the audit log has every reload, as it has the API's (a standby's: none) */
	if (leader_serving(m))
		audit_event(m, "/v1/admin/reload", res ? NULL : yerr_code_str(eb.code));
	json_decref(res);
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
	/* the tokens themselves never go to the log (a journal many may read) */
	if (!ret)
		fprintf(stderr, "yard master: made the first tokens: the admin token is in '%s/admin-token', "
			"the join token in '%s/join-token' (mode 0600)\n", m->data_dir, m->data_dir);
	free(admin);
	free(join);
	return ret;
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
	for (size_t i = 0; i < cfg->tls_sans.n; i++)
		add_name(&names, n, &alloc, cfg->tls_sans.items[i], strlen(cfg->tls_sans.items[i]));
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
		if (cfg->tls_sans.n)
			return error(eb, YERR(BAD_REQUEST), "--tls-san '%s' needs --tls-self-signed",
				     cfg->tls_sans.items[0]);
		return 0;
	}
	for (size_t i = 0; i < cfg->tls_sans.n; i++)
		if (!tls_san_valid(cfg->tls_sans.items[i]))
			return error(eb, YERR(BAD_REQUEST),
				     "--tls-san '%s': expected a host name or an IP address",
				     cfg->tls_sans.items[i]);
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
	struct master_settings settings = { 0 };
	char *dir = NULL;
	int created = 0, ret = 0;

	*out = NULL;
	m->data_dir_lock = -1;
	m->data_dir = xstrdup(cfg->data_dir);
	m->web_dir = cfg->web_dir ? xstrdup(cfg->web_dir) : static_default_dir();
	m->registry = cfg->registry ? xstrdup(cfg->registry) : NULL;
	m->store_images = cfg->store_images;
	m->lease_ms = cfg->lease_ms ? (unsigned)cfg->lease_ms : 15000;
	m->store_retry_ms = cfg->store_retry_ms ? cfg->store_retry_ms : 60000;
	m->conf = cfg->conf;
	m->started_wall_us = wall_us();
	prom_init(&m->prom);
	/* first: master_free closes the loop, whatever failed after this */
	uv_loop_init(&m->loop);
	ret = settings_build(cfg, &settings, eb);
	if (ret)
		goto out;
	settings_install(m, &settings);
	m->sops = cfg->store ? &store_pg_ops : &store_sqlite_ops;
	if (mkdir_p(m->data_dir, 0700)) {
		ret = error(eb, YERR(IO), "cannot create '%s': %s", m->data_dir, strerror(errno));
		goto out;
	}
	if (access(m->data_dir, W_OK)) {
		/* a read-only data dir would fail later, and less clearly */
		ret = error(eb, yerr_of_errno(errno), "--data-dir '%s': %s: the master writes its store there",
			    m->data_dir, strerror(errno));
		goto out;
	}
	/* one master per data dir, and none while a restore writes it: locked
	 * before anything in it is made */
	if ((ret = backup_lock_datadir(m->data_dir, &m->data_dir_lock, eb)))
		goto out;
	for (int i = 0; i < 2; i++) {
		static const char *const sub[] = { "/logs", "/code" };
		free(dir);
		dir = xasprintf("%s%s", m->data_dir, sub[i]);
		if (mkdir_p(dir, 0700)) {
			ret = error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
			goto out;
		}
	}
	ret = datasets_open(m, eb);
	/* the file's presence without registry: master_config_check */
	if (!ret && cfg->registry_credential_file && cfg->registry)
		ret = images_registry_auth(cfg->registry, cfg->registry_credential_file, &m->registry_auth, eb);
	if (!ret)
		ret = gitcode_open(m, &cfg->git_credentials, cfg->git_timeout_ms, eb);
	if (ret)
		goto out;
	ret = m->sops->open(cfg->store ? cfg->store : m->data_dir, &m->store, &created, eb);
	if (!ret)
		ret = master_tls(m, cfg, eb);
	if (!ret)
		ret = http_start(m, cfg->listen, eb);
	if (ret)
		goto out;
	leader_init(m, cfg->advertise_url, (unsigned)cfg->leader_lease_ms, (unsigned)cfg->leader_renew_ms);
	/* a standby loads the model when it takes over */
	if (leader_try(m))
		ret = master_lead(m, eb);
out:
	free(dir);
	settings_release(&settings);
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
	uv_timer_init(&m->loop, &m->sched_timer);
	uv_timer_init(&m->loop, &m->release_timer);
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
	uv_async_init(&m->loop, &m->reload_async, on_reload);
	m->reload_async.data = m;
	atomic_store(&m->running, 1);
	if (atomic_load(&m->stop_requested))
		uv_stop(&m->loop); /* stopped before it ran */
	http_run(m);
	uv_run(&m->loop, UV_RUN_DEFAULT);
	atomic_store(&m->running, 0);
	/* provisioners' programs still running are stopped: the last uv_run
	 * below waits for their threads, and a restart recovers their requests */
	elastic_stop(m);
	gitcode_stop(m); /* and fetches give up: the last uv_run waits for them too */

	/* answer whatever was held, let MHD send it, then close the handles */
	{
		struct errbuf eb = ERRBUF_INIT;
		batch_commit(m, &eb);
		leader_release_lease(m);
	}
	sessions_end_all(m, "the master stopped");
	http_release_all(m, NULL);
	for (int i = 0; i < 3; i++)
		MHD_run(m->mhd);
	uv_close((uv_handle_t *)&m->mhd_poll, NULL);
	uv_close((uv_handle_t *)&m->mhd_timer, NULL);
	uv_close((uv_handle_t *)&m->tick, NULL);
	uv_close((uv_handle_t *)&m->lease_tick, NULL);
	uv_close((uv_handle_t *)&m->sched_timer, NULL);
	uv_close((uv_handle_t *)&m->release_timer, NULL);
	uv_close((uv_handle_t *)&m->prepare, NULL);
	uv_close((uv_handle_t *)&m->stop_async, NULL);
	uv_close((uv_handle_t *)&m->reload_async, NULL);
	uv_run(&m->loop, UV_RUN_DEFAULT);
	return m->store_lost ? YERR(IO) : 0;
}

void master_stop(struct master *m)
{
	atomic_store(&m->stop_requested, 1);
	if (atomic_load(&m->running))
		uv_async_send(&m->stop_async);
}

void master_reload(struct master *m)
{
	/* a reload before the loop runs has nothing to change yet */
	if (atomic_load(&m->running))
		uv_async_send(&m->reload_async);
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
	datasets_gc_release(m);
	core_clear(m);
	prom_release(&m->prom);
	uv_loop_close(&m->loop);
	shared_body_unref(m->queue_cache);
	shared_body_unref(m->jobs_list);
	free(m->jobs_list_user);
	free(m->jobs_list_viewer);
	if (m->data_dir_lock >= 0)
		close(m->data_dir_lock);
	free(m->data_dir);
	free(m->job_key);
	settings_clear(m);
	elastic_free(m);
	gitcode_free(m);
	execs_clear(m);
	free(m->sessions); /* empty: sessions_end_all ended them, the loop freed them */
	ratelimit_release(&m->ratelimit);
	free(m->web_dir);
	free(m->registry);
	if (m->registry_auth)
		explicit_bzero(m->registry_auth, strlen(m->registry_auth));
	free(m->registry_auth);
	free(m->url);
	tls_identity_release(&m->tls);
	leader_release(&m->leadership);
	free(m);
}

