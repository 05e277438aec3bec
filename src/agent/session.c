/* The agent's session with its master (session.h). */
#include "base/compat.h"
#include "agent/session.h"

#include <dirent.h>
#include <string.h>
#include <time.h>

#include "agent/cache.h"
#include "agent/ephemeral.h"
#include "agent/hostinfo.h"
#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#define POLL_WAIT_S 10
#define BACKOFF_MAX_MS 10000
void session_unref(struct session *s)
{
	pthread_mutex_lock(&s->lock);
	int left = --s->refs;
	pthread_mutex_unlock(&s->lock);
	if (left)
		return;
	pthread_mutex_destroy(&s->lock);
	json_decref(s->work);
	json_decref(s->gpus);
	json_decref(s->labels);
	json_decref(s->runtimes);
	free(s->engine);
	free(s->pool);
	free(s->master_url);
	free((char *)s->tls.ca_file);
	free((char *)s->tls.pin);
	free(s->name);
	free(s->addr);
	free(s->join_token);
	free(s->slurm_job);
	free(s->work_dir);
	free(s->id);
	free(s->token);
	free(s);
}

/* Records how a request to the master went, for fencing (on_tick): an
 * answer of the leader renews our view of the lease (a standby's does not:
 * httpc fails with not_leader, and callers pass no status); a failure says
 * whether anything listened (masters that are down are not a partition). */
void session_contact(struct session *s, bool ok, const struct httpc *c)
{
	pthread_mutex_lock(&s->lock);
	if (ok) {
		s->last_ok_ms = boot_ms();
		s->refused = false;
		s->back += s->failing;
	} else {
		s->refused = c && c->refused;
	}
	s->failing = !ok;
	pthread_mutex_unlock(&s->lock);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static unsigned session_back(struct session *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned back = s->back;
	pthread_mutex_unlock(&s->lock);
	return back;
}

/* A back-off: sleeps up to ms, but wakes early on stop or once another
 * thread has had an answer from the master again; returns non-zero when
 * stopping. */
int sleep_backoff(struct session *s, unsigned ms)
{
	unsigned back = session_back(s);
	for (unsigned done = 0; done < ms && !*s->stop && session_back(s) == back; done += 50)
		sleep_ms(50);
	return *s->stop != 0;
}

unsigned backoff_next(unsigned *cur)
{
	unsigned base = *cur ? *cur : 100;
	*cur = base * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : base * 2;
	unsigned r = (unsigned)((mono_us() * 2654435761u) >> 8) & 0xff;
	return base / 2 + (base / 2) * r / 255; /* jitter: 50..100% */
}

static json_t *scan_task_ids(const char *work_dir)
{
	json_t *ids = json_array();
	char *dir = xasprintf("%s/tasks", work_dir);
	size_t n;
	uint64_t *id = dir_ids(dir, &n);

	for (size_t i = 0; i < n; i++)
		json_array_append_new(ids, json_integer((json_int_t)id[i]));
	free(id);
	free(dir);
	return ids;
}

/* The keys of the node's data cache, for registration and status reports:
 * none once agent_run let go of the cache (the poll thread may outlive it). */
json_t *session_cache_keys(struct session *s)
{
	pthread_mutex_lock(&s->lock);
	json_t *keys = s->cache ? cache_keys(s->cache, "") : json_array();
	pthread_mutex_unlock(&s->lock);
	return keys;
}

/* One registration attempt. */
static int register_once(struct session *s, struct errbuf *eb)
{
	struct httpc c;
	json_t *reply = NULL;
	long status = 0;
	int ret;

	httpc_init(&c, s->master_url, &s->tls, s->join_token);
	c.timeout_ms = 15000;
	if (!s->addr) {
		struct httpc_response res;
		httpc_response_init(&res);
		ret = httpc_request(&c, "GET", "/healthz", NULL, 0, NULL, &res, eb);
		httpc_response_release(&res);
		if (ret)
			goto out;
		s->addr = httpc_local_ip(&c);
		if (!s->addr)
			s->addr = xstrdup("127.0.0.1");
	}
	char *iface = host_iface_of(s->addr);
	json_t *body = json_pack("{s:s, s:s, s:s?, s:[i,i], s:i, s:I, s:O, s:O, s:s?, s:o, s:s, s:O}",
				 "name", s->name, "addr", s->addr, "iface", iface, "ports",
				 (int)s->port_lo, (int)s->port_hi, "cpus", (int)host_cpus(), "memory",
				 (json_int_t)host_memory(), "gpus", s->gpus, "runtimes", s->runtimes,
				 "engine", s->engine, "tasks", scan_task_ids(s->work_dir), "pool", s->pool,
				 "labels", s->labels);
	json_object_set_new(body, "cache", session_cache_keys(s));
	if (s->ephemeral)
		json_object_set_new(body, "ephemeral", json_true());
	if (s->slurm_job)
		json_object_set_new(body, "slurm_job", json_string(s->slurm_job));
	free(iface);
	ret = httpc_json(&c, "POST", "/v1/agents", body, &reply, &status, eb);
	json_decref(body);
	if (ret)
		goto out;
	const char *id = json_string_value(json_object_get(reply, "id"));
	const char *token = json_string_value(json_object_get(reply, "token"));
	if (!id || !token) {
		ret = error(eb, YERR(BAD_REQUEST), "registration reply lacks 'id' or 'token'");
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	free(s->id);
	free(s->token);
	s->id = xstrdup(id);
	s->token = xstrdup(token);
	s->gen++;
	if (json_integer_value(json_object_get(reply, "lease_ms")) > 0)
		s->lease_ms = (uint64_t)json_integer_value(json_object_get(reply, "lease_ms"));
	s->last_ok_ms = boot_ms();
	s->refused = false;
	pthread_mutex_unlock(&s->lock);
	json_t *aj = json_pack("{s:s, s:s}", "name", s->name, "id", id);
	taskdir_write_json(s->work_dir, "agent.json", aj, 0, NULL);
	json_decref(aj);
out:
	if (ret && status <= 0)
		session_contact(s, false, &c); /* nothing listens: a master that is down */
	json_decref(reply);
	httpc_release(&c);
	return ret;
}

/*
 * session_register registers until it works or the agent stops, unless
 * another thread already did since seen_gen. Returns 0 when registered.
 */
static pthread_mutex_t *reg_mutex(struct session *s);

int session_register(struct session *s, unsigned seen_gen)
{
	unsigned backoff = 0;
	struct errbuf eb = ERRBUF_INIT;
	pthread_mutex_lock(reg_mutex(s));
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool done = s->gen != seen_gen || s->closed;
		pthread_mutex_unlock(&s->lock);
		if (done || *s->stop)
			break;
		if (register_once(s, &eb) == 0) {
			if (!s->printed_ready) {
				s->printed_ready = true;
				printf("yard agent ready name=%s\n", s->name);
				fflush(stdout);
			}
			break;
		}
		fprintf(stderr, "yard agent: cannot register with '%s': %s\n", s->master_url, eb.msg);
		if (sleep_backoff(s, backoff_next(&backoff)))
			break;
	}
	pthread_mutex_unlock(reg_mutex(s));
	return *s->stop ? -1 : 0;
}

/* A request of generation gen answered 401/404: the master refused the
 * node's token (revoked or expired: the admin's doing) or forgot the node.
 * Says so with the master's reason, whichever thread met it first (the
 * poll, a log, metric or status report), and registers again with the
 * join token. */
void session_refused(struct session *s, unsigned gen, long status, const char *why)
{
	pthread_mutex_lock(&s->lock);
	bool current = s->gen == gen;
	pthread_mutex_unlock(&s->lock);
	if (current)
		fprintf(stderr, "yard agent: the master refused node '%s' (HTTP %ld: %s): "
			"registering again with the join token\n", s->name, status,
			why && *why ? why : "no reason given");
	session_register(s, gen);
}

/* Registrations are serialised by a second lock, so that s->lock is never
 * held across a request. It lives with the session. */
struct session_full {
	struct session s;
	pthread_mutex_t reg;
};

static pthread_mutex_t *reg_mutex(struct session *s)
{
	return &((struct session_full *)s)->reg;
}

/* The current credentials: OUT path prefix "/v1/agents/ID", token, gen. */
unsigned session_creds(struct session *s, char **id, char **token)
{
	pthread_mutex_lock(&s->lock);
	*id = xstrdup(s->id ? s->id : "");
	*token = xstrdup(s->token ? s->token : "");
	unsigned gen = s->gen;
	pthread_mutex_unlock(&s->lock);
	return gen;
}

/* ---- the poll thread ---- */

/* Whether the agent is closing its session or stopping (httpc's cancelled). */
static bool session_closing(void *arg)
{
	struct session *s = arg;
	bool closed;

	pthread_mutex_lock(&s->lock);
	closed = s->closed;
	pthread_mutex_unlock(&s->lock);
	return closed || *s->stop;
}

void *session_poll_thread(void *arg)
{
	struct session *s = arg;
	struct httpc c;
	json_int_t rev = 0;
	unsigned backoff = 0, gen = 0;
	char *id = NULL, *token = NULL;

	httpc_init(&c, s->master_url, &s->tls, NULL);
	/* the agent joins this thread as it exits: a long poll stops then */
	c.cancelled = session_closing;
	c.cancel_arg = s;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		bool closed = s->closed;
		pthread_mutex_unlock(&s->lock);
		if (closed || *s->stop)
			break;
		free(id);
		free(token);
		unsigned g = session_creds(s, &id, &token);
		if (g != gen) {
			gen = g;
			rev = 0; /* a new registration: take the whole state again */
		}
		httpc_set_token(&c, token);
		/* an answer at least every third of the lease: fencing (fence())
		 * counts from the last one. A poll that hangs past its wait by a
		 * sixth of the lease (1 to 5 s) is a connection lost without a
		 * reset (a partition, or a master whose machine vanished: the next
		 * poll then goes to the next master, in time to answer before the
		 * fence at two thirds). */
		pthread_mutex_lock(&s->lock);
		uint64_t lease_ms = s->lease_ms;
		pthread_mutex_unlock(&s->lock);
		unsigned wait_s = lease_ms ? (unsigned)(lease_ms / 3000) : POLL_WAIT_S;
		long slack_ms = lease_ms ? (long)(lease_ms / 6) : 5000;
		if (wait_s < 1)
			wait_s = 1;
		if (wait_s > POLL_WAIT_S)
			wait_s = POLL_WAIT_S;
		c.timeout_ms = wait_s * 1000L + (slack_ms < 1000 ? 1000 : slack_ms > 5000 ? 5000 : slack_ms);
		char *esc = url_escape(id);
		/* after a failure, the first answer comes at once: a master that
		 * took over (or came back) renews the lease view now, not a wait later */
		char *path = xasprintf("/v1/agents/%s/work?rev=%" JSON_INTEGER_FORMAT "&wait=%u", esc, rev,
				       backoff ? 0 : wait_s);
		free(esc);
		json_t *reply = NULL;
		long status = 0;
		struct errbuf eb = ERRBUF_INIT;
		int ret = httpc_json(&c, "GET", path, NULL, &reply, &status, &eb);
		free(path);
		session_contact(s, status > 0, &c);
		if (ret == 0 && json_is_object(reply)) {
			backoff = 0;
			rev = json_integer_value(json_object_get(reply, "rev"));
			pthread_mutex_lock(&s->lock);
			json_decref(s->work);
			s->work = reply;
			reply = NULL;
			if (s->wake)
				uv_async_send(s->wake);
			pthread_mutex_unlock(&s->lock);
		} else if (status == 401 || status == 404) {
			session_refused(s, gen, status, eb.msg);
		} else if (ret) {
			sleep_backoff(s, backoff_next(&backoff));
		}
		json_decref(reply);
	}
	free(id);
	free(token);
	httpc_release(&c);
	session_unref(s);
	crypto_thread_done();
	return NULL;
}

struct session *session_new(const struct agent_config *cfg, const struct gpu_list *gpus,
				   const char *engine, volatile sig_atomic_t *stop)
{
	struct session_full *f = xcalloc(1, sizeof(*f));
	struct session *s = &f->s;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&f->reg, NULL);
	s->refs = 1;
	s->master_url = xstrdup(cfg->master_url);
	s->tls.ca_file = cfg->master_ca ? xstrdup(cfg->master_ca) : NULL;
	s->tls.pin = cfg->master_pin ? xstrdup(cfg->master_pin) : NULL;
	s->name = xstrdup(cfg->name);
	s->addr = cfg->advertise_addr ? xstrdup(cfg->advertise_addr) : NULL;
	s->join_token = xstrdup(cfg->join_token ? cfg->join_token : "");
	s->work_dir = xstrdup(cfg->work_dir);
	s->gpus = gpu_list_to_json(gpus);
	s->pool = xstrdup(cfg->pool ? cfg->pool : "default");
	s->labels = json_object();
	for (size_t i = 0; i < cfg->nlabels; i++) {
		const char *eq = strchr(cfg->labels[i], '=');
		char *key = xstrndup(cfg->labels[i], eq ? (size_t)(eq - cfg->labels[i]) : 0);
		json_object_set_new(s->labels, key, json_string(eq ? eq + 1 : ""));
		free(key);
	}
	s->runtimes = cfg->docker ? json_pack("[s,s]", "process", "docker") : json_pack("[s]", "process");
	s->engine = engine ? xstrdup(engine) : NULL;
	s->port_lo = cfg->port_lo ? cfg->port_lo : 30000;
	s->port_hi = cfg->port_lo ? cfg->port_hi : 32000;
	s->ephemeral = cfg->ephemeral;
	s->slurm_job = ephemeral_slurm_job(); /* the master shows it on the node */
	s->stop = stop;
	return s;
}

