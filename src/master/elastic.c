/* Elastic pools in the master (elastic.h). */
#include "base/compat.h"
#include "master/elastic.h"

#include <uv.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/audit.h"
#include "master/jobs.h"
#include "master/master.h"
#include "master/prom.h"
#include "master/provision.h"
#include "sched/elastic.h"

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* ---- the model ---- */

/* One node a request asked for (a slot: its name may be learnt late). */
struct pslot {
	char *name;                 /* owned or NULL: not known yet (a recovered request's) */
	char *id;                   /* owned or NULL: its id at the provisioner ("4411_0") */
	enum pnode_state state;
	uint64_t since;             /* wall us: when it entered its state */
	uint64_t deadline;          /* wall us: pending: given up after; leaving: released after */
	/* in memory */
	bool busy;                  /* its down is under way */
	uint64_t retry_ms;          /* mono: its next down no sooner */
	unsigned tries;             /* downs that failed in a row */
	uint64_t idle_since_ms;     /* mono: ready and idle since; 0: busy (or not ready) */
};

struct preq {
	uint64_t id;
	char *pool;                 /* owned */
	char *provisioner;          /* owned: "KIND:ARG" that made it (kept through reloads) */
	char *external;             /* owned or NULL: its id at the provisioner ("4411") */
	char *why;                  /* owned: "demand", "min" or "adopted" */
	char *error;                /* owned or NULL: the provisioner's refusal */
	enum preq_state state;
	unsigned count;
	uint64_t created, updated;  /* wall us */
	uint64_t *jobs;             /* owned: the jobs it was asked for */
	size_t njobs;
	struct pslot *slots;        /* owned */
	size_t nslots;
	/* in memory */
	/* requesting: the master is about to ask (or asks) its provisioner;
	 * stored, and committed before the provisioner is asked, so that a
	 * master that finds it after a stop (itself restarted, or another
	 * taking over the store) recovers what was made, never asks again */
	bool asked;
	uint64_t asked_at;          /* wall us: when it was marked asked */
	/* in memory */
	bool saved;                 /* committed: the step it was saved for may be taken */
	bool interrupted;           /* loaded asked: recover what its up made */
	bool busy;                  /* its up (or recovery) is under way */
	uint64_t retry_ms;          /* mono: its next recovery no sooner */
};

/* What this master knows of a provisioned pool beyond its settings; kept
 * by name through reloads. */
struct epool {
	char *pool;                 /* owned */
	uint64_t last_up_ms;        /* mono: its last scale-up; 0: none */
	uint64_t backoff_until_ms;  /* mono: no scale-up before (a failure) */
	char *last_error;           /* owned or NULL */
	unsigned demand;            /* its waiting jobs new or pending nodes will run (last plan) */
	bool replan;                /* a plan left jobs waiting for room that time will give */
	bool has_learned;
	struct owned_shape learned; /* the shape of its last provisioned node to register */
};

/* One counter of GET /metrics: actions of a pool, by kind and outcome. */
struct ecounter {
	char *pool;
	const char *action, *outcome;
	uint64_t n;
};

struct prov_call;

struct elastic {
	struct elastic_conf conf;
	struct epool *pools;        /* owned */
	size_t npools, apools;
	struct preq **reqs;         /* owned */
	size_t nreqs, areqs;
	uint64_t next_id;
	char cluster[17];           /* this store's id among the provisioners' names */
	bool loaded;
	struct ecounter *counters;  /* owned */
	size_t ncounters, acounters;
	struct prov_call *calls;    /* under way (a list; owned by the worker until done) */
	volatile int stopping;      /* programs still running are killed */
};

static struct elastic *elastic_of(struct master *m)
{
	if (!m->elastic)
		m->elastic = xcalloc(1, sizeof(*m->elastic));
	return m->elastic;
}

static const char *pool_or_default(const char *p)
{
	return p ? p : "default";
}

static struct epool *epool_get(struct elastic *e, const char *pool)
{
	for (size_t i = 0; i < e->npools; i++)
		if (!strcmp(e->pools[i].pool, pool))
			return &e->pools[i];
	ALLOC_GROW(e->pools, e->npools + 1, e->apools);
	memset(&e->pools[e->npools], 0, sizeof(e->pools[0]));
	e->pools[e->npools].pool = xstrdup(pool);
	return &e->pools[e->npools++];
}

static void counter_add(struct elastic *e, const char *pool, const char *action, bool ok)
{
	const char *outcome = ok ? "ok" : "failed";

	for (size_t i = 0; i < e->ncounters; i++)
		if (!strcmp(e->counters[i].pool, pool) && !strcmp(e->counters[i].action, action) &&
		    !strcmp(e->counters[i].outcome, outcome)) {
			e->counters[i].n++;
			return;
		}
	ALLOC_GROW(e->counters, e->ncounters + 1, e->acounters);
	e->counters[e->ncounters++] = (struct ecounter){ xstrdup(pool), action, outcome, 1 };
}

/* An action of the master's and its outcome, in the audit log. */
static void audit_request(struct master *m, const struct preq *r, const char *code)
{
	char *path = xasprintf("/v1/provisioners/%s/requests/%" PRIu64, r->pool, r->id);
	audit_event(m, path, code);
	free(path);
}

static void audit_node(struct master *m, const char *name, const char *code)
{
	char *path = xasprintf("/v1/nodes/%s", name ? name : "(unnamed)");
	audit_event(m, path, code);
	free(path);
}

static void preq_free(struct preq *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nslots; i++) {
		free(r->slots[i].name);
		free(r->slots[i].id);
	}
	free(r->slots);
	free(r->pool);
	free(r->provisioner);
	free(r->external);
	free(r->why);
	free(r->error);
	free(r->jobs);
	free(r);
}

static struct preq *req_find(const struct elastic *e, uint64_t id)
{
	for (size_t i = 0; e && i < e->nreqs; i++)
		if (e->reqs[i]->id == id)
			return e->reqs[i];
	return NULL;
}

/* The slot named name, in a request that still tracks it: a live one
 * first (a name may come back in a later request once released). */
static struct pslot *slot_find(const struct elastic *e, const char *name, struct preq **req)
{
	struct pslot *gone = NULL;

	for (size_t i = 0; e && name && i < e->nreqs; i++)
		for (size_t k = 0; k < e->reqs[i]->nslots; k++) {
			struct pslot *s = &e->reqs[i]->slots[k];
			if (!s->name || strcmp(s->name, name))
				continue;
			if (req)
				*req = e->reqs[i];
			if (s->state != PNODE_GONE)
				return s;
			gone = s;
		}
	return gone;
}

static const char *req_kind_arg(const struct preq *r, const struct provisioner_ops **ops)
{
	const char *colon = strchr(r->provisioner, ':');

	*ops = colon ? provisioner_find(r->provisioner, (size_t)(colon - r->provisioner)) : NULL;
	return colon ? colon + 1 : "";
}

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

static void req_save(struct master *m, struct preq *r)
{
	json_t *slots = json_array(), *jobs = json_array(), *doc;
	char key[24];

	r->updated = wall_us();
	for (size_t i = 0; i < r->nslots; i++) {
		const struct pslot *s = &r->slots[i];
		json_array_append_new(slots, json_pack("{s:o, s:o, s:s, s:I, s:I}", "name", jstr(s->name), "id",
						       jstr(s->id), "state", pnode_state_name(s->state),
						       "since", (json_int_t)s->since, "deadline",
						       (json_int_t)s->deadline));
	}
	for (size_t i = 0; i < r->njobs; i++)
		json_array_append_new(jobs, json_integer((json_int_t)r->jobs[i]));
	snprintf(key, sizeof(key), "%" PRIu64, r->id);
	doc = json_pack("{s:I, s:s, s:s, s:o, s:s, s:o, s:s, s:b, s:i, s:I, s:I, s:o, s:o}", "id",
			(json_int_t)r->id, "pool", r->pool, "provisioner", r->provisioner, "external",
			jstr(r->external), "why", r->why, "error", jstr(r->error), "state",
			preq_state_name(r->state), "asked", r->asked, "count", (int)r->count,
			"created_at", (json_int_t)r->created, "updated_at", (json_int_t)r->updated,
			"jobs", jobs, "nodes", slots);
	json_object_set_new(doc, "asked_at", json_integer((json_int_t)r->asked_at));
	core_put_doc(m, STORE_PROVISION, key, doc);
}

/* Takes r out of the model and its row out of the store (a request that
 * failed, or whose nodes have all ended). */
static void req_delete(struct master *m, struct preq *r)
{
	struct elastic *e = m->elastic;
	char key[24];

	snprintf(key, sizeof(key), "%" PRIu64, r->id);
	core_delete_doc(m, STORE_PROVISION, key);
	for (size_t i = 0; i < e->nreqs; i++)
		if (e->reqs[i] == r) {
			memmove(&e->reqs[i], &e->reqs[i + 1], (e->nreqs - i - 1) * sizeof(*e->reqs));
			e->nreqs--;
			break;
		}
	preq_free(r);
	m->sched_needed = true;
}

/* Moves slot s with ev; false (nothing changed) when the table refuses. */
static bool slot_event(struct preq *r, struct pslot *s, enum pnode_event ev)
{
	int next = pnode_transition(s->state, ev);

	(void)r;
	if (next < 0)
		return false;
	if ((enum pnode_state)next != s->state) {
		s->state = (enum pnode_state)next;
		s->since = wall_us();
		s->retry_ms = 0;
		s->tries = 0;
	}
	return true;
}

static bool req_event(struct preq *r, enum preq_event ev)
{
	int next = preq_transition(r->state, ev);

	if (next < 0)
		return false;
	r->state = (enum preq_state)next;
	return true;
}

static void save_meta_u64(struct master *m, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	core_save_meta(m, key, buf);
}

/* A new request of count nodes of pool p, stored in the open batch; asked
 * of its provisioner once committed. */
static struct preq *req_new(struct master *m, const struct elastic_conf_pool *p, unsigned count,
			    const char *why)
{
	struct elastic *e = m->elastic;
	struct preq *r = xcalloc(1, sizeof(*r));

	if (!e->cluster[0]) {
		/* names this store's requests at the provisioners (Slurm job names) */
		random_hex(e->cluster, 8);
		core_save_meta(m, "cluster_id", e->cluster);
	}
	r->id = ++e->next_id;
	save_meta_u64(m, "next_provision_id", e->next_id);
	r->pool = xstrdup(p->pool);
	r->provisioner = xstrdup(p->provisioner);
	r->why = xstrdup(why);
	r->state = PREQ_REQUESTING;
	r->count = count;
	r->created = wall_us();
	ALLOC_GROW(e->reqs, e->nreqs + 1, e->areqs);
	e->reqs[e->nreqs++] = r;
	req_save(m, r);
	audit_request(m, r, "provision_requested");
	fprintf(stderr, "yard master: pool %s: asking %s for %u node%s (request %" PRIu64 ", %s)\n", r->pool,
		r->provisioner, count, count == 1 ? "" : "s", r->id, why);
	return r;
}

static void learn_shape(struct elastic *e, const char *pool, const struct node *n);

/* Fills r's slots from what an up (or a recovery) made. */
static void req_take_made(struct master *m, struct preq *r, struct prov_made *made)
{
	uint64_t now = wall_us();

	free(r->external);
	r->external = made->external;
	made->external = NULL;
	for (size_t i = 0; i < r->nslots; i++) {
		free(r->slots[i].name);
		free(r->slots[i].id);
	}
	free(r->slots);
	r->slots = xcalloc(made->n + 1, sizeof(*r->slots));
	r->nslots = 0;
	for (size_t i = 0; i < made->n; i++) {
		struct pslot *other = slot_find(m->elastic, made->names[i], NULL);
		if (other && other->state != PNODE_GONE) {
			/* one node, one record: the request that has it keeps it */
			fprintf(stderr, "yard master: request %" PRIu64 " of pool %s: node %s is another "
				"request's already; not tracked twice\n", r->id, r->pool, made->names[i]);
			continue;
		}
		struct node *n = core_node(m, made->names[i]);
		struct pslot *s = &r->slots[r->nslots++];
		*s = (struct pslot){ .name = made->names[i], .id = made->ids[i], .state = PNODE_PENDING,
				     .since = now, .deadline = now + m->elastic->conf.register_ms * 1000 };
		made->names[i] = made->ids[i] = NULL;
		if (n && node_state_is_live(n->state)) {
			/* its agent was quicker than the provisioner's answer */
			slot_event(r, s, PNODE_EV_REGISTERED);
			s->idle_since_ms = mono_ms();
			audit_node(m, s->name, "node_registered");
			learn_shape(m->elastic, r->pool, n);
		}
	}
	r->count = (unsigned)r->nslots;
}

/* ---- the provisioners' calls, on worker threads ---- */

enum call_kind { CALL_UP, CALL_RECOVER, CALL_DOWN };

struct prov_call {
	uv_work_t req;
	struct master *m;
	struct prov_call *next;
	enum call_kind kind;
	const struct provisioner_ops *ops;
	uint64_t request;
	char *slot_name;            /* CALL_DOWN: the slot's name (NULL: unnamed) */
	size_t slot;                /* CALL_DOWN: its index */
	unsigned count;
	/* the env's strings, the call's own */
	char *arg, *pool, *tag, *url, *pin, *token_file, *account, *qos, *work_dir, *yard, *id;
	char **agent_args;
	size_t nagent_args;
	uint64_t time_ms;
	const volatile int *cancel;
	/* the answer */
	int rc;
	struct errbuf eb;
	struct prov_made made;
	bool found;
};

static void call_free(struct prov_call *c)
{
	free(c->slot_name);
	free(c->arg);
	free(c->pool);
	free(c->tag);
	free(c->url);
	free(c->pin);
	free(c->token_file);
	free(c->account);
	free(c->qos);
	free(c->work_dir);
	free(c->yard);
	free(c->id);
	for (size_t i = 0; i < c->nagent_args; i++)
		free(c->agent_args[i]);
	free(c->agent_args);
	prov_made_release(&c->made);
	free(c);
}

static void call_work(uv_work_t *w)
{
	struct prov_call *c = w->data;
	struct prov_env env = { .arg = c->arg, .pool = c->pool, .tag = c->tag, .request = c->request,
				.master_url = c->url, .master_pin = c->pin, .join_token_file = c->token_file,
				.time_ms = c->time_ms, .account = c->account, .qos = c->qos,
				.work_dir = c->work_dir, .yard = c->yard,
				.agent_args = (const char *const *)c->agent_args,
				.nagent_args = c->nagent_args, .cancel = c->cancel };

	switch (c->kind) {
	case CALL_UP:
		c->rc = c->ops->up(&env, c->count, &c->made, &c->eb);
		break;
	case CALL_RECOVER:
		c->rc = c->ops->recover(&env, c->count, &c->made, &c->found, &c->eb);
		break;
	case CALL_DOWN:
		c->rc = c->ops->down(&env, c->slot_name, c->id, &c->eb);
		break;
	}
}

static void call_done(uv_work_t *w, int status);

/* Starts c (its kind, request and slot set) with a copy of everything the
 * provisioner needs. */
static void call_start(struct master *m, struct prov_call *c, const struct preq *r, const char *arg)
{
	struct elastic *e = m->elastic;
	const struct elastic_conf *cf = &e->conf;

	c->m = m;
	c->request = r->id;
	c->arg = xstrdup(arg);
	c->pool = xstrdup(r->pool);
	c->tag = xasprintf("yard-%s-%" PRIu64, e->cluster, r->id);
	c->url = xstrdup(cf->url ? cf->url : m->url);
	c->pin = m->tls.pin ? xstrdup(m->tls.pin) : NULL;
	c->token_file = xasprintf("%s/join-token", m->data_dir);
	c->account = cf->slurm_account ? xstrdup(cf->slurm_account) : NULL;
	c->qos = cf->slurm_qos ? xstrdup(cf->slurm_qos) : NULL;
	c->work_dir = xstrdup(cf->slurm_work_dir);
	c->yard = xstrdup(cf->slurm_yard);
	c->time_ms = cf->slurm_time_ms;
	c->agent_args = xcalloc(cf->nslurm_agent_args + 1, sizeof(*c->agent_args));
	for (size_t i = 0; i < cf->nslurm_agent_args; i++)
		c->agent_args[c->nagent_args++] = xstrdup(cf->slurm_agent_args[i]);
	c->cancel = &e->stopping;
	c->eb = (struct errbuf)ERRBUF_INIT;
	c->req.data = c;
	c->next = e->calls;
	e->calls = c;
	uv_queue_work(&m->loop, &c->req, call_work, call_done);
}

/* The next try after n failures in a row: 1 s doubling to 5 min. */
static uint64_t backoff_ms(unsigned n)
{
	uint64_t ms = 1000;
	while (n-- > 1 && ms < 300000)
		ms *= 2;
	return ms < 300000 ? ms : 300000;
}

/* Asks the provisioners what is due: ups of committed requests, the
 * recovery of interrupted ones, the release of ended nodes. */
static void dispatch(struct master *m)
{
	struct elastic *e = m->elastic;
	uint64_t now = mono_ms();

	if (!e || e->stopping || !e->loaded)
		return;
	for (size_t i = 0; i < e->nreqs; i++) {
		struct preq *r = e->reqs[i];
		const struct provisioner_ops *ops;
		const char *arg = req_kind_arg(r, &ops);

		if (!ops)
			continue; /* a kind this master does not have (a newer one's): left as it is */
		if (r->state == PREQ_REQUESTING && r->saved && !r->busy && now >= r->retry_ms) {
			struct prov_call *c = xcalloc(1, sizeof(*c));
			c->ops = ops;
			c->count = r->count;
			if (!r->asked) {
				/* first stored as asked: committed, the up goes */
				free(c);
				r->asked = true;
				r->asked_at = wall_us();
				r->saved = false;
				req_save(m, r);
				continue;
			} else if (!r->interrupted) {
				c->kind = CALL_UP;
			} else if (ops->recover) {
				c->kind = CALL_RECOVER;
			} else {
				/* the provisioner cannot say what it made: its nodes'
				 * registrations will, until the register timeout */
				uint64_t wall = wall_us();
				free(c);
				req_event(r, PREQ_EV_ANSWERED);
				free(r->slots);
				r->slots = xcalloc(r->count + 1, sizeof(*r->slots));
				r->nslots = r->count;
				for (size_t k = 0; k < r->nslots; k++)
					r->slots[k] = (struct pslot){ .state = PNODE_PENDING, .since = wall,
								      .deadline = wall + e->conf.register_ms * 1000 };
				req_save(m, r);
				audit_request(m, r, "provision_recovered");
				counter_add(e, r->pool, "recover", true);
				fprintf(stderr, "yard master: request %" PRIu64 " of pool %s was under way when the "
					"master stopped: %u node%s taken as its own when they register\n", r->id,
					r->pool, r->count, r->count == 1 ? "" : "s");
				m->sched_needed = true;
				continue;
			}
			r->busy = true;
			call_start(m, c, r, arg);
		}
		for (size_t k = 0; r->state == PREQ_OPEN && k < r->nslots; k++) {
			struct pslot *s = &r->slots[k];
			struct prov_call *c;
			if (s->state != PNODE_RELEASING || s->busy || now < s->retry_ms)
				continue;
			c = xcalloc(1, sizeof(*c));
			c->kind = CALL_DOWN;
			c->ops = ops;
			c->slot = k;
			c->slot_name = s->name ? xstrdup(s->name) : NULL;
			c->id = s->id ? xstrdup(s->id) : NULL;
			s->busy = true;
			call_start(m, c, r, arg);
		}
	}
}

static void pool_failed(struct master *m, const char *pool, const char *why)
{
	struct epool *p = epool_get(m->elastic, pool);

	p->backoff_until_ms = mono_ms() + m->elastic->conf.cooldown_ms;
	free(p->last_error);
	p->last_error = xstrdup(why);
	p->replan = true;
}

/* Applies an up's or a recovery's answer to r. */
static void up_done(struct master *m, struct preq *r, struct prov_call *c)
{
	struct elastic *e = m->elastic;
	bool recover = c->kind == CALL_RECOVER;

	r->busy = false;
	if (recover && c->rc) {
		/* the provisioner could not be asked: ask again later */
		r->retry_ms = mono_ms() + backoff_ms(2);
		counter_add(e, r->pool, "recover", false);
		fprintf(stderr, "yard master: cannot recover request %" PRIu64 " of pool %s: %s\n", r->id,
			r->pool, c->eb.msg);
		return;
	}
	if (c->made.n && (!recover || c->found)) {
		req_take_made(m, r, &c->made);
		req_event(r, PREQ_EV_ANSWERED);
		if (c->rc) {
			free(r->error);
			r->error = xstrdup(c->eb.msg);
			pool_failed(m, r->pool, c->eb.msg);
		}
		req_save(m, r);
		audit_request(m, r, recover ? "provision_recovered" : c->rc ? "provision_failed" : "provision_answered");
		counter_add(e, r->pool, recover ? "recover" : "up", !c->rc);
		fprintf(stderr, "yard master: request %" PRIu64 " of pool %s: %zu node%s on their way%s%s\n", r->id,
			r->pool, r->nslots, r->nslots == 1 ? "" : "s", c->rc ? "; but: " : "", c->rc ? c->eb.msg : "");
		m->sched_needed = true;
		return;
	}
	/* nothing was made, as far as the provisioner says now; but the program
	 * the stopped master started may still be running (it is in a session
	 * of its own, and may take PROV_RUN_TIMEOUT_MS): ask again until it
	 * cannot be */
	if (recover && wall_us() < r->asked_at + (PROV_RUN_TIMEOUT_MS + 10000) * 1000ull) {
		r->retry_ms = mono_ms() + 2000;
		return;
	}
	req_event(r, PREQ_EV_REFUSED);
	audit_request(m, r, recover ? "provision_recovered_nothing" : "provision_failed");
	counter_add(e, r->pool, recover ? "recover" : "up", recover);
	if (!recover) {
		fprintf(stderr, "yard master: request %" PRIu64 " of pool %s failed: %s\n", r->id, r->pool,
			c->eb.msg);
		pool_failed(m, r->pool, c->eb.msg);
	} else {
		fprintf(stderr, "yard master: request %" PRIu64 " of pool %s was under way when the master "
			"stopped: the provisioner made nothing of it\n", r->id, r->pool);
	}
	req_delete(m, r);
}

static void release_done(struct master *m, struct preq *r, struct prov_call *c)
{
	struct elastic *e = m->elastic;
	struct pslot *s = c->slot < r->nslots ? &r->slots[c->slot] : NULL;

	if (!s || s->state != PNODE_RELEASING)
		return;
	s->busy = false;
	if (c->rc) {
		s->tries++;
		s->retry_ms = mono_ms() + backoff_ms(s->tries);
		counter_add(e, r->pool, "down", false);
		audit_node(m, s->name, "node_release_failed");
		fprintf(stderr, "yard master: cannot release node %s of pool %s (try %u, again in %" PRIu64
			" s): %s\n", s->name ? s->name : "(unnamed)", r->pool, s->tries,
			backoff_ms(s->tries) / 1000, c->eb.msg);
		return;
	}
	slot_event(r, s, PNODE_EV_RELEASED);
	counter_add(e, r->pool, "down", true);
	audit_node(m, s->name, "node_released");
	req_save(m, r);
	m->sched_needed = true;
}

static void call_done(uv_work_t *w, int status)
{
	struct prov_call *c = w->data;
	struct master *m = c->m;
	struct elastic *e = m->elastic;
	struct preq *r;

	for (struct prov_call **pp = &e->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	/* a stopping master drops the answer (a restart recovers it); a model
	 * cleared meanwhile (a step-down) has no request to apply it to */
	r = e->stopping || status ? NULL : req_find(e, c->request);
	if (r && c->kind == CALL_DOWN)
		release_done(m, r, c);
	else if (r && r->state == PREQ_REQUESTING)
		up_done(m, r, c);
	call_free(c);
}

/* ---- the record: load, clear, commit ---- */

/* A copy of d's string member key, or NULL. */
static char *jdup(const json_t *d, const char *key)
{
	const char *v = json_string_value(json_object_get(d, key));
	return v ? xstrdup(v) : NULL;
}

static uint64_t jget_u64(const json_t *d, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(d, key));
	return v > 0 ? (uint64_t)v : 0;
}

static int load_req(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	struct elastic *e = m->elastic;
	json_t *d = json_loads(text, 0, NULL), *v;
	const char *state;
	struct preq *r;
	size_t i;
	int st;

	if (!d)
		return YERR(IO);
	r = xcalloc(1, sizeof(*r));
	r->id = jget_u64(d, "id");
	r->pool = jdup(d, "pool");
	r->provisioner = jdup(d, "provisioner");
	r->external = jdup(d, "external");
	r->why = jdup(d, "why");
	r->error = jdup(d, "error");
	state = json_string_value(json_object_get(d, "state"));
	st = state ? preq_state_parse(state) : -1;
	r->asked = json_is_true(json_object_get(d, "asked"));
	r->asked_at = jget_u64(d, "asked_at");
	r->count = (unsigned)jget_u64(d, "count");
	r->created = jget_u64(d, "created_at");
	r->updated = jget_u64(d, "updated_at");
	r->njobs = json_array_size(json_object_get(d, "jobs"));
	r->jobs = xcalloc(r->njobs + 1, sizeof(*r->jobs));
	json_array_foreach(json_object_get(d, "jobs"), i, v)
		r->jobs[i] = (uint64_t)json_integer_value(v);
	r->nslots = json_array_size(json_object_get(d, "nodes"));
	r->slots = xcalloc(r->nslots + 1, sizeof(*r->slots));
	json_array_foreach(json_object_get(d, "nodes"), i, v) {
		struct pslot *s = &r->slots[i];
		const char *ps_name = json_string_value(json_object_get(v, "state"));
		int ps = ps_name ? pnode_state_parse(ps_name) : -1;
		s->name = jdup(v, "name");
		s->id = jdup(v, "id");
		s->state = ps < 0 ? PNODE_RELEASING : (enum pnode_state)ps;
		s->since = jget_u64(v, "since");
		s->deadline = jget_u64(v, "deadline");
		if (ps < 0)
			st = -1;
	}
	json_decref(d);
	if (st < 0 || !r->id || !r->pool || !r->provisioner || !r->why) {
		preq_free(r);
		return YERR(IO);
	}
	r->state = (enum preq_state)st;
	r->saved = true;
	/* asked and not answered: its provisioner may have made something */
	r->interrupted = r->state == PREQ_REQUESTING && r->asked;
	ALLOC_GROW(e->reqs, e->nreqs + 1, e->areqs);
	e->reqs[e->nreqs++] = r;
	if (r->id > e->next_id)
		e->next_id = r->id;
	(void)key;
	return 0;
}

/* The value of meta row key (core_save_meta's {"v": VALUE}) into *out
 * (caller frees; NULL when there is none). */
static int meta_value(struct master *m, const char *key, char **out, struct errbuf *eb)
{
	char *doc = NULL;
	json_t *d;
	int rc;

	*out = NULL;
	if ((rc = m->sops->get_meta(m->store, key, &doc, eb)) || !doc)
		return rc;
	d = json_loads(doc, 0, NULL);
	free(doc);
	if (!d)
		return error(eb, YERR(IO), "store: the meta row '%s' is corrupt", key);
	*out = jdup(d, "v");
	json_decref(d);
	return 0;
}

int elastic_load(struct master *m, struct errbuf *eb)
{
	struct elastic *e;
	char *v = NULL;
	uint64_t n = 0;
	int rc;

	elastic_clear(m);
	e = elastic_of(m);
	if ((rc = meta_value(m, "cluster_id", &v, eb)))
		return rc;
	if (v && strlen(v) == 16)
		memcpy(e->cluster, v, 17);
	free(v);
	v = NULL;
	if ((rc = meta_value(m, "next_provision_id", &v, eb)))
		return rc;
	if (v && !parse_u64_str(v, &n))
		e->next_id = n;
	free(v);
	rc = m->sops->load(m->store, STORE_PROVISION, load_req, m, eb);
	if (rc) {
		if (!eb || !eb->code)
			error(eb, rc, "store: a stored provisioning request is corrupt");
		return rc;
	}
	/* answers still on their way (a reload of the model) apply to the requests loaded again */
	for (const struct prov_call *c = e->calls; c; c = c->next) {
		struct preq *r = req_find(e, c->request);
		if (r && c->kind != CALL_DOWN)
			r->busy = true;
		else if (r && c->slot < r->nslots)
			r->slots[c->slot].busy = true;
	}
	e->loaded = true;
	return 0;
}

void elastic_clear(struct master *m)
{
	struct elastic *e = m->elastic;

	if (!e)
		return;
	for (size_t i = 0; i < e->nreqs; i++)
		preq_free(e->reqs[i]);
	free(e->reqs);
	e->reqs = NULL;
	e->nreqs = e->areqs = 0;
	e->next_id = 0;
	e->loaded = false;
	if (!e->conf.npools && !e->npools && !e->calls && !e->ncounters) {
		/* no provisioner was ever set: nothing to keep beside the model */
		elastic_conf_release(&e->conf);
		free(e);
		m->elastic = NULL;
	}
}

void elastic_committed(struct master *m)
{
	struct elastic *e = m->elastic;

	if (!e)
		return;
	for (size_t i = 0; i < e->nreqs; i++)
		e->reqs[i]->saved = true;
	dispatch(m);
}

/* ---- settings installed, stopping ---- */

void elastic_install(struct master *m, struct elastic_conf *c)
{
	struct elastic *e = elastic_of(m);

	elastic_conf_release(&e->conf);
	e->conf = *c;
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < e->conf.npools; i++)
		epool_get(e, e->conf.pools[i].pool);
	m->sched_needed = true;
}

void elastic_stop(struct master *m)
{
	if (m->elastic)
		m->elastic->stopping = 1;
}

void elastic_free(struct master *m)
{
	struct elastic *e = m->elastic;

	if (!e)
		return;
	elastic_clear(m);
	elastic_conf_release(&e->conf);
	for (size_t i = 0; i < e->npools; i++) {
		free(e->pools[i].pool);
		free(e->pools[i].last_error);
		owned_shape_release(&e->pools[i].learned);
	}
	free(e->pools);
	for (size_t i = 0; i < e->ncounters; i++)
		free(e->counters[i].pool);
	free(e->counters);
	/* calls are done: the loop has run them all out */
	free(e);
	m->elastic = NULL;
}

/* ---- what a pool has ---- */

struct pool_count {
	unsigned requesting;        /* asked for, not answered */
	unsigned pending;           /* answered, not registered */
	unsigned ready, leaving, releasing;
};

static struct pool_count pool_count(const struct elastic *e, const char *pool)
{
	struct pool_count pc = { 0 };

	for (size_t i = 0; i < e->nreqs; i++) {
		const struct preq *r = e->reqs[i];
		if (strcmp(r->pool, pool))
			continue;
		if (r->state == PREQ_REQUESTING)
			pc.requesting += r->count;
		for (size_t k = 0; r->state == PREQ_OPEN && k < r->nslots; k++)
			switch (r->slots[k].state) {
			case PNODE_PENDING: pc.pending++; break;
			case PNODE_READY: pc.ready++; break;
			case PNODE_LEAVING: pc.leaving++; break;
			case PNODE_RELEASING: pc.releasing++; break;
			default: break;
			}
	}
	return pc;
}

static const struct elastic_shape *pool_shape(struct elastic *e, const struct elastic_conf_pool *p)
{
	struct epool *rt = epool_get(e, p->pool);

	if (rt->has_learned)
		return &rt->learned.s;
	return p->has_shape ? &p->shape.s : NULL;
}

bool elastic_pool_provisioned(const struct master *m, const char *pool)
{
	return m->elastic && elastic_conf_pool(&m->elastic->conf, pool_or_default(pool));
}

bool elastic_shape_unknown(const struct master *m, const char *pool)
{
	struct elastic *e = m->elastic;
	const struct elastic_conf_pool *p = e ? elastic_conf_pool(&e->conf, pool_or_default(pool)) : NULL;

	return p && !pool_shape(e, p);
}

/* The room of a pool for new nodes now, and why it has none (OUT why, may
 * be NULL). */
static unsigned pool_room(struct elastic *e, const struct elastic_conf_pool *p, struct strbuf *why)
{
	struct pool_count pc = pool_count(e, p->pool);
	struct epool *rt = epool_get(e, p->pool);
	unsigned size = pc.requesting + pc.pending + pc.ready + pc.leaving + pc.releasing;
	unsigned waiting = pc.requesting + pc.pending;
	uint64_t now = mono_ms();

	if (now < rt->backoff_until_ms) {
		if (why)
			strbuf_addf(why, "its last request failed (%.200s); it asks again in %" PRIu64 " s",
				    rt->last_error ? rt->last_error : "?",
				    (rt->backoff_until_ms - now + 999) / 1000);
		return 0;
	}
	if (size >= p->max) {
		if (why)
			strbuf_addf(why, "it has %u node%s of its maximum of %u", size, size == 1 ? "" : "s", p->max);
		return 0;
	}
	if (waiting >= e->conf.max_pending) {
		if (why)
			strbuf_addf(why, "%u of its nodes are on their way already (provisioner-max-pending)",
				    waiting);
		return 0;
	}
	return MIN(p->max - size, e->conf.max_pending - waiting);
}

/* "2 nodes requested from slurm partition gpu (job 4411)": what a pool's
 * waiting jobs wait for; "" when nothing is on its way. */
static void pending_text(struct elastic *e, const char *pool, struct strbuf *sb)
{
	struct strbuf ext = STRBUF_INIT, names = STRBUF_INIT;
	const struct preq *first = NULL;
	unsigned requesting = 0, pending = 0;
	size_t next = 0, nnames = 0;

	for (size_t i = 0; i < e->nreqs; i++) {
		const struct preq *r = e->reqs[i];
		unsigned mine = 0;
		if (strcmp(r->pool, pool))
			continue;
		if (r->state == PREQ_REQUESTING) {
			requesting += r->count;
			mine = r->count;
		}
		for (size_t k = 0; r->state == PREQ_OPEN && k < r->nslots; k++)
			if (r->slots[k].state == PNODE_PENDING) {
				pending++;
				mine++;
				if (!r->external && r->slots[k].name && nnames++ < 4)
					strbuf_addf(&names, "%s%s", names.len ? ", " : "", r->slots[k].name);
			}
		if (!mine)
			continue;
		if (!first)
			first = r;
		if (r->external && r->state == PREQ_OPEN) {
			strbuf_addf(&ext, "%s%s", ext.len ? ", " : "", r->external);
			next++;
		}
	}
	if (first) {
		const struct provisioner_ops *ops;
		const char *arg = req_kind_arg(first, &ops);
		unsigned n = pending + requesting;
		strbuf_addf(sb, "%u node%s %s from ", n, n == 1 ? "" : "s",
			    pending ? "requested" : "being requested");
		if (ops)
			ops->describe(arg, NULL, sb);
		else
			strbuf_addstr(sb, first->provisioner);
		if (next)
			strbuf_addf(sb, " (job%s %s)", next == 1 ? "" : "s", ext.buf);
		else if (nnames)
			strbuf_addf(sb, " (node%s %s%s)", nnames == 1 ? "" : "s", names.buf, nnames > 4 ? ", ..." : "");
	}
	strbuf_release(&ext);
	strbuf_release(&names);
}

static void shape_text(const struct elastic_shape *s, struct strbuf *sb)
{
	char mem[32];

	if (s->gpus)
		strbuf_addf(sb, "%u GPU%s%s%s, ", s->gpus, s->gpus == 1 ? "" : "s", s->gpu_model ? " " : "",
			    s->gpu_model ? s->gpu_model : "");
	strbuf_addf(sb, "%" PRIu64 " CPU%s", s->cpus_milli / 1000, s->cpus_milli == 1000 ? "" : "s");
	if (s->memory) {
		format_size(s->memory, mem, sizeof(mem));
		strbuf_addf(sb, ", %s", mem);
	}
	for (size_t i = 0; i < s->nlabels; i++)
		strbuf_addf(sb, ", %s=%s", s->labels[i].key, s->labels[i].value);
	if (s->containers)
		strbuf_addstr(sb, ", docker");
}

/* ---- scale-up, after a decision ---- */

void elastic_after_decision(struct master *m, const struct sched_world *w,
			    const struct sched_decision *d, struct job *const *jobs)
{
	struct elastic *e = m->elastic;
	struct elastic_pool *ep;
	struct strbuf *norooms;
	struct elastic_plan plan;
	size_t np;

	if (!e || !e->conf.npools || !e->loaded)
		return;
	np = e->conf.npools;
	ep = xcalloc(np + 1, sizeof(*ep));
	norooms = xcalloc(np + 1, sizeof(*norooms));
	for (size_t i = 0; i < np; i++) {
		const struct elastic_conf_pool *p = &e->conf.pools[i];
		struct pool_count pc = pool_count(e, p->pool);
		strbuf_init(&norooms[i], 0);
		ep[i] = (struct elastic_pool){ .pool = p->pool, .shape = pool_shape(e, p),
					       .pending = pc.requesting + pc.pending,
					       .room = pool_room(e, p, &norooms[i]), .max = p->max };
	}
	elastic_plan(w, d, ep, np, &plan);
	for (size_t i = 0; i < np; i++) {
		const struct elastic_conf_pool *p = &e->conf.pools[i];
		struct epool *rt = epool_get(e, p->pool);
		rt->demand = plan.demand[i];
		rt->replan = false;
		if (plan.add[i]) {
			struct preq *r = req_new(m, p, plan.add[i], "demand");
			for (size_t k = 0; k < d->nwaits; k++) {
				const struct sched_world_job *wj = &w->jobs[d->waits[k].job];
				if (plan.cover[k] == ELASTIC_NEW || plan.cover[k] == ELASTIC_NO_SHAPE) {
					if (!elastic_job_uses_pool(&wj->job, p->pool))
						continue;
					r->jobs = xrealloc(r->jobs, (r->njobs + 1) * sizeof(*r->jobs));
					r->jobs[r->njobs++] = wj->job.id;
				}
			}
			req_save(m, r);
			rt->last_up_ms = mono_ms();
			rt->demand += !plan.demand[i]; /* (a shape to learn) */
		}
	}
	/* the reasons of the waiting jobs of provisioned pools (each pool of a
	 * job whose roles span several says its part) */
	for (size_t k = 0; k < d->nwaits; k++) {
		const struct sched_wait *wt = &d->waits[k];
		const struct sched_job *sj = &w->jobs[wt->job].job;
		struct strbuf msg = STRBUF_INIT, tail = STRBUF_INIT;
		const char *code = wt->code;

		if (plan.cover[k] == ELASTIC_NOT_DEMAND)
			continue;
		for (size_t i = 0; i < np; i++) {
			const char *pool = e->conf.pools[i].pool;
			struct strbuf pt = STRBUF_INIT;
			if (!elastic_job_uses_pool(sj, pool))
				continue;
			switch (plan.cover[k]) {
			case ELASTIC_PENDING:
			case ELASTIC_NEW:
			case ELASTIC_NO_SHAPE:
				pending_text(e, pool, &pt);
				if (pt.len) {
					code = "provisioning";
					strbuf_addf(&msg, "%s%s%s", msg.len ? "; " : "", pt.buf,
						    plan.cover[k] == ELASTIC_NO_SHAPE ? ", to learn what the pool's nodes are" : "");
				} else if (plan.cover[k] == ELASTIC_NO_SHAPE) {
					strbuf_addf(&tail, "; pool '%s' will ask for nodes once it knows what they are "
						    "(provisioner-shape)", pool);
				}
				break;
			case ELASTIC_NO_ROOM:
				if (norooms[i].len)
					strbuf_addf(&tail, "; pool '%s' may not ask for more nodes now: %s", pool,
						    norooms[i].buf);
				epool_get(e, pool)->replan = true;
				break;
			case ELASTIC_NEVER:
				strbuf_addf(&tail, "; no number of nodes of pool '%s' (", pool);
				if (ep[i].shape)
					shape_text(ep[i].shape, &tail);
				strbuf_addstr(&tail, " each) could run it");
				break;
			default:
				break;
			}
			strbuf_release(&pt);
		}
		if (strcmp(code, "provisioning")) {
			strbuf_reset(&msg);
			strbuf_addf(&msg, "%s%s", wt->message,
				    tail.len ? tail.buf : "; the nodes its pool may ask for would not be enough");
		}
		jobs_set_wait(m, jobs[wt->job], wt->position, code, msg.buf);
		strbuf_release(&msg);
		strbuf_release(&tail);
	}
	elastic_plan_release(&plan);
	for (size_t i = 0; i < np; i++)
		strbuf_release(&norooms[i]);
	free(norooms);
	free(ep);
}

/* ---- the tick: timeouts, losses, ends, the minimum, scale-down ---- */

static bool node_busy(const struct master *m, const char *name)
{
	for (size_t i = 0; i < m->nlive; i++)
		if (m->live[i]->node && !strcmp(m->live[i]->node, name))
			return true;
	return false;
}

/* Moves r's slots along with what their nodes did; true when r changed. */
static bool track_slots(struct master *m, struct preq *r, uint64_t now_ms, uint64_t wall)
{
	struct elastic *e = m->elastic;
	bool changed = false;

	for (size_t k = 0; k < r->nslots; k++) {
		struct pslot *s = &r->slots[k];
		struct node *n = s->name ? core_node(m, s->name) : NULL;
		bool live = n && node_state_is_live(n->state);

		switch (s->state) {
		case PNODE_PENDING:
			if (live) {
				changed |= slot_event(r, s, PNODE_EV_REGISTERED);
				s->idle_since_ms = now_ms;
				audit_node(m, s->name, "node_registered");
				learn_shape(e, r->pool, n);
			} else if (wall >= s->deadline) {
				changed |= slot_event(r, s, PNODE_EV_TIMEOUT);
				audit_node(m, s->name, "node_given_up");
				counter_add(e, r->pool, "give_up", true);
				fprintf(stderr, "yard master: node %s of pool %s did not register within %" PRIu64
					" s: given up, released\n", s->name ? s->name : "(unnamed)", r->pool,
					e->conf.register_ms / 1000);
				pool_failed(m, r->pool, "a node it asked for never registered");
			}
			break;
		case PNODE_READY:
		case PNODE_LEAVING:
			if (!live) {
				changed |= slot_event(r, s, PNODE_EV_LOST);
				audit_node(m, s->name, "node_lost");
				counter_add(e, r->pool, "lost", true);
				fprintf(stderr, "yard master: node %s of pool %s is %s: released\n", s->name, r->pool,
					n ? "lost" : "gone");
			} else if (s->state == PNODE_LEAVING && wall >= s->deadline) {
				changed |= slot_event(r, s, PNODE_EV_LEAVE_TIMEOUT);
			} else if (s->state == PNODE_READY) {
				if (node_busy(m, s->name))
					s->idle_since_ms = 0;
				else if (!s->idle_since_ms)
					s->idle_since_ms = now_ms;
			}
			break;
		case PNODE_GONE:
			/* released: the node the master still has of it ends once
			 * its agent is silent (all it ran is lost) */
			if (n && !live)
				nodes_leave(m, n, "released by its provisioner");
			break;
		default:
			break;
		}
	}
	return changed;
}

static bool req_ended(const struct master *m, const struct preq *r)
{
	for (size_t k = 0; k < r->nslots; k++)
		if (r->slots[k].state != PNODE_GONE || (r->slots[k].name && core_node(m, r->slots[k].name)))
			return false;
	return true;
}

/* The pool's idle provisioned nodes past its idle time, above its minimum
 * and outside the cooldown of a scale-up, while nothing of its queue needs
 * them: drained, told to leave (docs/elastic.md). */
static void scale_down(struct master *m, const struct elastic_conf_pool *p, uint64_t now_ms, uint64_t wall)
{
	struct elastic *e = m->elastic;
	struct epool *rt = epool_get(e, p->pool);
	struct elastic_node *nodes;
	struct pslot **slots;
	struct preq **reqs;
	size_t n = 0, cap = 1, *out, k;
	struct pool_count pc = pool_count(e, p->pool);

	if (rt->demand || (rt->last_up_ms && now_ms < rt->last_up_ms + e->conf.cooldown_ms))
		return;
	for (size_t i = 0; i < e->nreqs; i++)
		cap += e->reqs[i]->nslots;
	nodes = xcalloc(cap + pc.requesting, sizeof(*nodes));
	slots = xcalloc(cap, sizeof(*slots));
	reqs = xcalloc(cap, sizeof(*reqs));
	out = xcalloc(cap + pc.requesting, sizeof(*out));
	for (size_t i = 0; i < e->nreqs; i++) {
		struct preq *r = e->reqs[i];
		if (strcmp(r->pool, p->pool) || r->state != PREQ_OPEN)
			continue;
		for (size_t s = 0; s < r->nslots; s++) {
			struct pslot *sl = &r->slots[s];
			struct node *nd = sl->name ? core_node(m, sl->name) : NULL;
			if (sl->state != PNODE_READY && sl->state != PNODE_PENDING)
				continue;
			slots[n] = sl;
			reqs[n] = r;
			nodes[n++] = (struct elastic_node){
				.idle = sl->state == PNODE_READY && nd && nd->state == NODE_READY && sl->idle_since_ms,
				.idle_since = sl->idle_since_ms };
		}
	}
	/* nodes asked for and not answered count towards the size, never idle */
	k = elastic_scale_down(nodes, n + pc.requesting, p->min, p->idle_ms, now_ms, out);
	for (size_t i = 0; i < k; i++) {
		struct pslot *sl = slots[out[i]];
		struct preq *r = reqs[out[i]];
		struct node *nd = core_node(m, sl->name);
		char reason[160];
		if (!nd)
			continue;
		snprintf(reason, sizeof(reason), "scale-down: idle for %" PRIu64 " s (pool %s keeps at least %u)",
			 (now_ms - sl->idle_since_ms) / 1000, p->pool, p->min);
		nodes_drain(m, nd, reason, "provisioner");
		slot_event(r, sl, PNODE_EV_SCALE_DOWN);
		/* an ephemeral agent leaves when told; another is removed now */
		sl->deadline = nd->ephemeral ? wall + (uint64_t)(m->lease_ms > 5000 ? 2 * m->lease_ms : 10000) * 1000
					     : wall;
		core_node_bump(m, nd); /* its work reply says leave */
		req_save(m, r);
		audit_node(m, sl->name, "node_scaled_down");
		counter_add(e, p->pool, "scale_down", true);
		fprintf(stderr, "yard master: node %s of pool %s: %s\n", sl->name, p->pool, reason);
	}
	free(nodes);
	free(slots);
	free(reqs);
	free(out);
}

/* A pool below its minimum asks for the rest. */
static void keep_min(struct master *m, const struct elastic_conf_pool *p)
{
	struct elastic *e = m->elastic;
	struct pool_count pc = pool_count(e, p->pool);
	unsigned have = pc.requesting + pc.pending + pc.ready, room;

	if (have >= p->min || !(room = pool_room(e, p, NULL)))
		return;
	req_new(m, p, MIN(p->min - have, room), "min");
	epool_get(e, p->pool)->last_up_ms = mono_ms();
}

static void claim(struct master *m, struct node *n);

void elastic_tick(struct master *m)
{
	struct elastic *e = m->elastic;
	uint64_t now_ms = mono_ms(), wall = wall_us();

	if (!e || !e->loaded || e->stopping)
		return;
	for (size_t i = 0; i < e->nreqs;) {
		struct preq *r = e->reqs[i];
		if (r->state == PREQ_OPEN && track_slots(m, r, now_ms, wall)) {
			req_save(m, r);
			m->sched_needed = true; /* the waiting jobs' reasons follow */
		}
		if (r->state == PREQ_OPEN && req_ended(m, r)) {
			req_event(r, PREQ_EV_ALL_ENDED);
			audit_request(m, r, "provision_closed");
			req_delete(m, r);
			continue;
		}
		i++;
	}
	for (size_t i = 0; i < m->nnodes; i++) {
		struct node *n = m->nodes[i];
		if (n->ephemeral && node_state_is_live(n->state) && !slot_find(e, n->name, NULL))
			claim(m, n);
	}
	for (size_t i = 0; i < e->conf.npools; i++) {
		const struct elastic_conf_pool *p = &e->conf.pools[i];
		struct epool *rt = epool_get(e, p->pool);
		keep_min(m, p);
		scale_down(m, p, now_ms, wall);
		/* jobs left waiting for room: plan again once a cooldown ends */
		if (rt->replan && now_ms >= rt->backoff_until_ms && m->nqueue) {
			rt->replan = false;
			m->sched_needed = true;
		}
	}
	dispatch(m);
}

/* ---- nodes ---- */

static void learn_shape(struct elastic *e, const char *pool, const struct node *n)
{
	struct epool *rt = epool_get(e, pool);
	struct owned_shape *o = &rt->learned;

	owned_shape_release(o);
	o->s.gpus = (unsigned)n->ngpus;
	o->model = n->ngpus && n->gpus[0].model ? xstrdup(n->gpus[0].model) : NULL;
	o->s.gpu_model = o->model;
	o->s.gpu_memory = n->ngpus ? n->gpus[0].memory : 0;
	o->s.cpus_milli = n->cpus_milli;
	o->s.memory = n->memory;
	o->s.containers = (n->runtimes & NODE_RT_DOCKER) != 0;
	for (size_t i = 0; i < n->nlabels; i++)
		owned_shape_add_label(o, n->labels[i].key, strlen(n->labels[i].key), n->labels[i].value);
	rt->has_learned = true;
}

void elastic_node_registered(struct master *m, struct node *n)
{
	struct elastic *e = m->elastic;
	struct preq *r = NULL;
	struct pslot *s;

	if (!e || !e->loaded)
		return;
	s = slot_find(e, n->name, &r);
	if (s && s->state == PNODE_PENDING) {
		slot_event(r, s, PNODE_EV_REGISTERED);
		s->idle_since_ms = mono_ms();
		req_save(m, r);
		audit_node(m, n->name, "node_registered");
		learn_shape(e, r->pool, n);
	} else if (s && (s->state == PNODE_READY || s->state == PNODE_LEAVING)) {
		learn_shape(e, r->pool, n);
	}
	/* an ephemeral node no request names is claimed by the tick */
}

/* An ephemeral node of a provisioned pool that no request names: one a
 * request under way will name (wait for it), one of a request recovered
 * after a restart (whose names come as its nodes register), or one to
 * adopt, so that it is scaled down and released like the others. */
static void claim(struct master *m, struct node *n)
{
	struct elastic *e = m->elastic;
	const struct elastic_conf_pool *p = elastic_conf_pool(&e->conf, n->pool);
	struct preq *r;

	if (!p)
		return;
	for (size_t i = 0; i < e->nreqs; i++)
		if (e->reqs[i]->state == PREQ_REQUESTING && !strcmp(e->reqs[i]->pool, n->pool))
			return;
	for (size_t i = 0; i < e->nreqs; i++) {
		struct preq *q = e->reqs[i];
		if (strcmp(q->pool, n->pool) || q->state != PREQ_OPEN)
			continue;
		for (size_t k = 0; k < q->nslots; k++)
			if (!q->slots[k].name && q->slots[k].state == PNODE_PENDING) {
				q->slots[k].name = xstrdup(n->name);
				q->slots[k].id = n->slurm_job ? xstrdup(n->slurm_job) : NULL;
				slot_event(q, &q->slots[k], PNODE_EV_REGISTERED);
				q->slots[k].idle_since_ms = mono_ms();
				req_save(m, q);
				audit_node(m, n->name, "node_registered");
				learn_shape(e, n->pool, n);
				return;
			}
	}
	r = req_new(m, p, 1, "adopted");
	req_event(r, PREQ_EV_ANSWERED);
	r->slots = xcalloc(2, sizeof(*r->slots));
	r->nslots = 1;
	r->slots[0] = (struct pslot){ .name = xstrdup(n->name), .id = n->slurm_job ? xstrdup(n->slurm_job) : NULL,
				      .state = PNODE_READY, .since = wall_us(), .idle_since_ms = mono_ms() };
	if (n->slurm_job)
		r->external = xstrndup(n->slurm_job, strcspn(n->slurm_job, "_"));
	req_save(m, r);
	audit_node(m, n->name, "node_adopted");
	counter_add(e, n->pool, "adopt", true);
	learn_shape(e, n->pool, n);
	fprintf(stderr, "yard master: ephemeral node %s of pool %s was asked for by no request: adopted "
		"(request %" PRIu64 ")\n", n->name, n->pool, r->id);
}

void elastic_node_left(struct master *m, struct node *n, const char *reason)
{
	struct elastic *e = m->elastic;
	struct preq *r = NULL;
	struct pslot *s = e ? slot_find(e, n->name, &r) : NULL;

	if (!s || !slot_event(r, s, PNODE_EV_LEFT))
		return;
	req_save(m, r);
	audit_node(m, n->name, "node_left");
	counter_add(e, r->pool, "left", true);
	fprintf(stderr, "yard master: node %s of pool %s left (%s): released\n", n->name, r->pool, reason);
	dispatch(m);
}

bool elastic_node_leaving(const struct master *m, const struct node *n)
{
	struct pslot *s = m->elastic ? slot_find(m->elastic, n->name, NULL) : NULL;

	return s && s->state == PNODE_LEAVING;
}

json_t *elastic_node_json(const struct master *m, const struct node *n)
{
	struct preq *r = NULL;
	struct pslot *s = m->elastic ? slot_find(m->elastic, n->name, &r) : NULL;

	if (!s)
		return json_null();
	return json_pack("{s:s, s:s, s:I, s:o, s:o, s:s}", "pool", r->pool, "provisioner", r->provisioner,
			 "request", (json_int_t)r->id, "id", jstr(s->id), "external", jstr(r->external),
			 "state", pnode_state_name(s->state));
}

json_t *elastic_json(const struct master *m)
{
	struct elastic *e = m->elastic;
	json_t *pools = json_array(), *reqs = json_array();
	uint64_t now = mono_ms();

	for (size_t i = 0; e && i < e->conf.npools; i++) {
		const struct elastic_conf_pool *p = &e->conf.pools[i];
		struct pool_count pc = pool_count(e, p->pool);
		struct epool *rt = epool_get(e, p->pool);
		const struct elastic_shape *sh = pool_shape(e, p);
		json_t *shape = json_null();
		if (sh) {
			json_t *labels = json_object();
			for (size_t k = 0; k < sh->nlabels; k++)
				json_object_set_new(labels, sh->labels[k].key, json_string(sh->labels[k].value));
			shape = json_pack("{s:i, s:o, s:I, s:f, s:I, s:o, s:b, s:s}", "gpus", (int)sh->gpus,
					  "gpu_model", jstr(sh->gpu_model), "gpu_memory",
					  (json_int_t)sh->gpu_memory, "cpus", sh->cpus_milli / 1000.0, "memory",
					  (json_int_t)sh->memory, "labels", labels, "containers", sh->containers,
					  "from", rt->has_learned ? "node" : "provisioner-shape");
		}
		json_array_append_new(pools, json_pack(
			"{s:s, s:s, s:i, s:i, s:I, s:o, s:{s:i, s:i, s:i, s:i, s:i}, s:i, s:I, s:o}",
			"pool", p->pool, "provisioner", p->provisioner, "min", (int)p->min, "max", (int)p->max,
			"idle_ms", (json_int_t)p->idle_ms, "shape", shape, "nodes", "requesting",
			(int)pc.requesting, "pending", (int)pc.pending, "ready", (int)pc.ready, "leaving",
			(int)pc.leaving, "releasing", (int)pc.releasing, "demand", (int)rt->demand,
			"backoff_ms", (json_int_t)(rt->backoff_until_ms > now ? rt->backoff_until_ms - now : 0),
			"last_error", jstr(rt->last_error)));
	}
	for (size_t i = 0; e && i < e->nreqs; i++) {
		const struct preq *r = e->reqs[i];
		json_t *nodes = json_array(), *jobs = json_array();
		for (size_t k = 0; k < r->nslots; k++)
			json_array_append_new(nodes, json_pack("{s:o, s:o, s:s, s:I}", "name",
							       jstr(r->slots[k].name), "id", jstr(r->slots[k].id),
							       "state", pnode_state_name(r->slots[k].state),
							       "since", (json_int_t)r->slots[k].since));
		for (size_t k = 0; k < r->njobs; k++)
			json_array_append_new(jobs, json_integer((json_int_t)r->jobs[k]));
		char tag[48];
		snprintf(tag, sizeof(tag), "yard-%s-%" PRIu64, e->cluster, r->id);
		json_array_append_new(reqs, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:o, s:I, s:o, s:o}",
						      "id", (json_int_t)r->id, "name", tag, "pool", r->pool, "provisioner",
						      r->provisioner, "state", preq_state_name(r->state), "why",
						      r->why, "count", (int)r->count, "external", jstr(r->external),
						      "error", jstr(r->error), "created_at", (json_int_t)r->created,
						      "jobs", jobs, "nodes", nodes));
	}
	return json_pack("{s:o, s:o}", "pools", pools, "requests", reqs);
}

void elastic_prom(const struct master *m, struct strbuf *sb)
{
	struct elastic *e = m->elastic;
	static const char *const states[] = { "requesting", "pending", "ready", "leaving", "releasing" };

	prom_head(sb, "yard_provisioner_nodes", "gauge",
		  "Nodes of provisioned pools, by pool and state: requesting (asked, not answered), "
		  "pending (not registered), ready, leaving (scaled down), releasing.");
	for (size_t i = 0; e && i < e->conf.npools; i++) {
		struct pool_count pc = pool_count(e, e->conf.pools[i].pool);
		const unsigned v[] = { pc.requesting, pc.pending, pc.ready, pc.leaving, pc.releasing };
		for (size_t s = 0; s < ARRAY_SIZE(states); s++) {
			const char *labels[] = { "pool", e->conf.pools[i].pool, "state", states[s], NULL };
			prom_series(sb, "yard_provisioner_nodes", "", labels, NULL);
			strbuf_addf(sb, "%u\n", v[s]);
		}
	}
	prom_head(sb, "yard_provisioner_actions_total", "counter",
		  "What the master did with provisioned pools since it started, by pool, action (up, "
		  "recover, down, scale_down, give_up, lost, left, adopt) and outcome (ok, failed).");
	for (size_t i = 0; e && i < e->ncounters; i++) {
		const char *labels[] = { "pool", e->counters[i].pool, "action", e->counters[i].action, "outcome",
					 e->counters[i].outcome, NULL };
		prom_series(sb, "yard_provisioner_actions_total", "", labels, NULL);
		strbuf_addf(sb, "%" PRIu64 "\n", e->counters[i].n);
	}
}

/* ---- admission ---- */

bool elastic_any_pool(const struct master *m)
{
	return m->elastic && m->elastic->conf.npools > 0;
}

size_t elastic_admission_nodes(const struct master *m, struct sched_node **nodes, size_t *n,
			       struct sched_gpu ***gpus)
{
	struct elastic *e = m->elastic;
	size_t added = 0;

	for (size_t i = 0; e && i < e->conf.npools; i++) {
		const struct elastic_conf_pool *p = &e->conf.pools[i];
		const struct elastic_shape *sh = pool_shape(e, p);
		unsigned count = MIN(p->max, 1024);
		if (!sh)
			continue;
		*nodes = xrealloc(*nodes, (*n + count + 1) * sizeof(**nodes));
		*gpus = xrealloc(*gpus, (*n + count + 1) * sizeof(**gpus));
		for (unsigned k = 0; k < count; k++) {
			struct sched_gpu *g = xcalloc(sh->gpus + 1, sizeof(*g));
			for (unsigned x = 0; x < sh->gpus; x++)
				g[x] = (struct sched_gpu){ .index = x, .model = sh->gpu_model, .free = true,
							   .memory = sh->gpu_memory };
			(*gpus)[*n] = g;
			(*nodes)[(*n)++] = (struct sched_node){
				.name = "(provisioned)", .schedulable = true, .gpus = g, .ngpus = sh->gpus,
				.cpus_milli = sh->cpus_milli, .memory = sh->memory,
				.free_cpus_milli = sh->cpus_milli, .free_memory = sh->memory, .pool = p->pool,
				.labels = sh->labels, .nlabels = sh->nlabels, .containers = sh->containers };
			added++;
		}
	}
	return added;
}
