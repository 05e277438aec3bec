/* The master's model: lookups, store serialisation and loading. */
#include "base/compat.h"
#include "master/core.h"

#include "base/xalloc.h"
#include "master/codeindex.h"
#include "master/experiments.h"
#include "master/jobsource.h"
#include "master/elastic.h"
#include "master/templates.h"

static const char *const role_names[] = { "admin", "user", "agent", "join", "job" };
static_assert(ARRAY_SIZE(role_names) == ROLE__COUNT, "role names");
static const char *const runtime_names[] = { "process", "docker" };
static_assert(ARRAY_SIZE(runtime_names) == NODE_RT__COUNT, "runtime names");
static const char *const stream_names[] = { "stdout", "stderr" };
static_assert(ARRAY_SIZE(stream_names) == LOG_STREAM__COUNT, "stream names");

const char *role_name(enum role r) { return role_names[r]; }
const char *log_stream_name(enum log_stream s) { return stream_names[s]; }

struct job *core_job(struct master *m, uint64_t id)
{
	return id >= 1 && id <= m->njobs ? m->jobs[id - 1] : NULL;
}

struct task *core_task(struct master *m, uint64_t id)
{
	return id >= 1 && id <= m->ntasks ? m->tasks[id - 1] : NULL;
}

/* FNV-1a: node names are short, and every lookup by name lands here. */
static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)h;
}

static void node_hash_put(size_t *tab, size_t cap, const struct node *n)
{
	size_t i = name_hash(n->name) & (cap - 1);
	while (tab[i])
		i = (i + 1) & (cap - 1);
	tab[i] = n->slot + 1;
}

struct node *core_node(const struct master *m, const char *name)
{
	if (!name || !m->node_hash_cap)
		return NULL;
	for (size_t i = name_hash(name) & (m->node_hash_cap - 1); m->node_hash[i];
	     i = (i + 1) & (m->node_hash_cap - 1)) {
		struct node *n = m->nodes[m->node_hash[i] - 1];
		if (!strcmp(n->name, name))
			return n;
	}
	return NULL;
}

void core_add_node(struct master *m, struct node *n)
{
	m->nodes_gen++;
	ALLOC_GROW(m->nodes, m->nnodes + 1, m->anodes);
	n->slot = m->nnodes;
	m->nodes[m->nnodes++] = n;
	if (2 * m->nnodes > m->node_hash_cap) {
		size_t cap = m->node_hash_cap ? 2 * m->node_hash_cap : 64;
		free(m->node_hash);
		m->node_hash = xcalloc(cap, sizeof(*m->node_hash));
		m->node_hash_cap = cap;
		for (size_t i = 0; i < m->nnodes; i++)
			node_hash_put(m->node_hash, cap, m->nodes[i]);
	} else {
		node_hash_put(m->node_hash, m->node_hash_cap, n);
	}
}

static void node_free(struct node *n)
{
	for (size_t g = 0; g < n->ngpus; g++) {
		free(n->gpus[g].model);
		free(n->gpus[g].uuid);
	}
	free(n->gpus);
	free(n->name);
	free(n->addr);
	free(n->iface);
	core_node_set_labels(n, NULL);
	free(n->pool);
	free(n->engine);
	free(n->drain_reason);
	free(n->drain_by);
	free(n->slurm_job);
	for (size_t c = 0; c < n->ncache; c++)
		free(n->cache[c]);
	free(n->cache);
	for (size_t i = 0; i < n->nlive; i++) {
		n->live[i]->live_node = NULL;
		n->live[i]->node_slot = 0;
	}
	free(n->live);
	free(n);
}

void core_node_bump(struct master *m, struct node *n)
{
	n->rev++;
	if (n->bumped)
		return;
	n->bumped = true;
	ALLOC_GROW(m->bumped, m->nbumped + 1, m->abumped);
	m->bumped[m->nbumped++] = n;
}

void core_remove_node(struct master *m, struct node *n)
{
	size_t slot = n->slot;
	int rc;

	m->nodes_gen++;
	for (size_t i = 0; n->bumped && i < m->nbumped; i++)
		if (m->bumped[i] == n)
			m->bumped[i--] = m->bumped[--m->nbumped];
	if (!core_batch_open(m)) {
		rc = m->sops->del(m->store, STORE_NODE, n->name, &m->batch_eb);
		if (rc)
			m->batch_err = rc;
	}
	/* the last node takes the slot; the hash is rebuilt around the hole */
	m->nodes[slot] = m->nodes[--m->nnodes];
	m->nodes[slot]->slot = slot;
	m->nodes[m->nnodes] = NULL;
	memset(m->node_hash, 0, m->node_hash_cap * sizeof(*m->node_hash));
	for (size_t i = 0; i < m->nnodes; i++)
		node_hash_put(m->node_hash, m->node_hash_cap, m->nodes[i]);
	node_free(n);
}

int core_batch_open(struct master *m)
{
	/* a standby writes nothing into the store it shares (leader.h) */
	if (m->leadership.state == LEADER_STANDBY)
		return YERR(NOT_LEADER);
	if (!m->txn_open) {
		errbuf_reset(&m->batch_eb);
		m->batch_err = m->sops->begin(m->store, &m->batch_eb);
		m->txn_open = true;
	}
	return m->batch_err;
}

void core_put_doc(struct master *m, enum store_kind kind, const char *key, json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15));
	int rc;

	json_decref(doc);
	if (!core_batch_open(m)) {
		rc = m->sops->put(m->store, kind, key, text, &m->batch_eb);
		if (rc)
			m->batch_err = rc;
	}
	free(text);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

void core_save_job(struct master *m, struct job *j)
{
	char key[24];

	core_job_changed(m, j);
	json_t *d = json_pack("{s:I, s:s, s:s, s:o, s:o, s:s, s:i, s:i, s:o, s:o, s:b, s:i, s:I, s:I, s:I, s:I}",
			      "id", (json_int_t)j->id, "name", j->name, "user", j->user,
			      "team", str_or_null(j->team), "code", str_or_null(j->code),
			      "spec", j->spec_text, "state", (int)j->state, "priority", (int)j->priority,
			      "reason_code", str_or_null(j->reason_code),
			      "reason_msg", str_or_null(j->reason_msg), "has_exit", j->has_exit,
			      "exit_code", j->exit_code, "attempt", (json_int_t)j->attempt,
			      "submitted_at", (json_int_t)j->submitted_at,
			      "started_at", (json_int_t)j->started_at,
			      "running_at", (json_int_t)j->running_at);
	json_object_set_new(d, "finished_at", json_integer((json_int_t)j->finished_at));
	json_object_set_new(d, "checkpoint", str_or_null(j->checkpoint));
	json_object_set_new(d, "pool", json_string(j->pool));
	if (j->submit_key)
		json_object_set_new(d, "submit_key", json_string(j->submit_key));
	json_object_set_new(d, "preemptions", json_integer(j->preemptions));
	if (j->held_by)
		json_object_set_new(d, "held_by", json_string(j->held_by));
	if (j->experiment)
		json_object_set_new(d, "experiment", json_pack("{s:I, s:i}", "id",
							       (json_int_t)j->experiment, "trial", (int)j->trial));
	json_object_set_new(d, "data", j->data ? json_deep_copy(j->data) : json_null());
	json_object_set_new(d, "events", j->events ? json_deep_copy(j->events) : json_array());
	if (j->image_built)
		json_object_set_new(d, "image_built", json_deep_copy(j->image_built));
	snprintf(key, sizeof(key), "%" PRIu64, j->id);
	core_put_doc(m, STORE_JOB, key, d);
}

void core_save_task(struct master *m, struct task *t)
{
	char key[24];
	json_t *gpus = json_array();
	json_t *d;

	core_job_changed(m, t->job);
	for (unsigned i = 0; i < t->ngpus; i++)
		json_array_append_new(gpus, json_integer(t->gpus[i]));
	d = json_pack("{s:I, s:I, s:s, s:i, s:i, s:i, s:b, s:o, s:o, s:I, s:I, s:I, s:b, s:b, s:i, s:i}",
		      "id", (json_int_t)t->id, "job", (json_int_t)t->job->id, "role", t->role,
		      "index", (int)t->index, "attempt", (int)t->attempt, "state", (int)t->state,
		      "stop", t->stop, "node", str_or_null(t->node), "gpus", gpus,
		      "cpus_milli", (json_int_t)t->cpus_milli, "memory", (json_int_t)t->memory,
		      "pids", (json_int_t)t->pids, "has_exit", t->has_exit,
		      "has_signal", t->has_signal, "exit_code", t->exit_code, "signal", t->signal);
	json_object_set_new(d, "port", json_integer(t->port));
	json_object_set_new(d, "grace_ms", json_integer((json_int_t)t->grace_ms));
	json_object_set_new(d, "preempted", json_boolean(t->preempted));
	json_object_set_new(d, "reason_code", str_or_null(t->reason_code));
	json_object_set_new(d, "reason_msg", str_or_null(t->reason_msg));
	json_object_set_new(d, "started_at", json_integer((json_int_t)t->started_at));
	json_object_set_new(d, "cpu_usec", t->has_cpu ? json_integer((json_int_t)t->cpu_usec) : json_null());
	json_object_set_new(d, "memory_peak",
			    t->has_memory_peak ? json_integer((json_int_t)t->memory_peak) : json_null());
	json_object_set_new(d, "finished_at", json_integer((json_int_t)t->finished_at));
	json_object_set_new(d, "stdout", json_integer((json_int_t)t->log_size[LOG_STDOUT]));
	json_object_set_new(d, "stderr", json_integer((json_int_t)t->log_size[LOG_STDERR]));
	if (t->outputs) {
		json_object_set_new(d, "outputs", json_string(t->outputs));
		json_object_set_new(d, "outputs_size", json_integer((json_int_t)t->outputs_size));
		if (t->outputs_files)
			json_object_set(d, "outputs_files", t->outputs_files);
	}
	snprintf(key, sizeof(key), "%" PRIu64, t->id);
	core_put_doc(m, STORE_TASK, key, d);
}

void core_node_set_labels(struct node *n, const json_t *obj)
{
	const char *key;
	json_t *v;

	for (size_t i = 0; i < n->nlabels; i++) {
		free(n->labels[i].key);
		free(n->labels[i].value);
	}
	free(n->labels);
	n->labels = NULL;
	n->nlabels = 0;
	if (!json_is_object(obj))
		return;
	n->labels = xcalloc(json_object_size(obj) + 1, sizeof(*n->labels));
	json_object_foreach((json_t *)obj, key, v) {
		if (!json_is_string(v))
			continue;
		n->labels[n->nlabels].key = xstrdup(key);
		n->labels[n->nlabels++].value = xstrdup(json_string_value(v));
	}
}

json_t *core_node_labels_json(const struct node *n)
{
	json_t *o = json_object();

	for (size_t i = 0; i < n->nlabels; i++)
		json_object_set_new(o, n->labels[i].key, json_string(n->labels[i].value));
	return o;
}

/* Agents send a handful at most; this bounds what a bad one makes us read. */
#define MAX_RUNTIMES 16

int core_runtimes_from_json(const json_t *arr, unsigned *out, struct errbuf *eb)
{
	char known[64] = "";
	size_t i, len = 0;
	json_t *v;

	*out = NODE_RT_PROCESS;
	if (!arr || json_is_null(arr))
		return 0;
	for (size_t k = 0; k < NODE_RT__COUNT; k++)
		len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", k ? ", " : "",
					runtime_names[k]);
	if (!json_is_array(arr) || !json_array_size(arr) || json_array_size(arr) > MAX_RUNTIMES)
		return error_field(eb, YERR(BAD_REQUEST), "runtimes",
				   "runtimes: expected a non-empty array of runtime names (%s)", known);
	*out = 0;
	json_array_foreach(arr, i, v) {
		unsigned bit = 0;
		for (size_t k = 0; k < NODE_RT__COUNT && json_is_string(v); k++)
			if (!strcmp(json_string_value(v), runtime_names[k]))
				bit = 1u << k;
		if (!bit) {
			char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			int ret = error_field(eb, YERR(BAD_REQUEST), "runtimes",
					      "runtimes[%zu]: expected one of %s, got %.64s", i, known,
					      got ? got : "a value");
			free(got);
			*out = NODE_RT_PROCESS;
			return ret;
		}
		*out |= bit;
	}
	return 0;
}

json_t *core_node_runtimes_json(const struct node *n)
{
	json_t *a = json_array();

	for (size_t k = 0; k < NODE_RT__COUNT; k++)
		if (n->runtimes & (1u << k))
			json_array_append_new(a, json_string(runtime_names[k]));
	return a;
}

void core_save_node(struct master *m, struct node *n)
{
	json_t *gpus = json_array(), *doc;

	for (size_t i = 0; i < n->ngpus; i++)
		json_array_append_new(gpus, json_pack("{s:i, s:o, s:o, s:I, s:i}", "index",
						      (int)n->gpus[i].index, "model",
						      str_or_null(n->gpus[i].model), "uuid",
						      str_or_null(n->gpus[i].uuid), "memory",
						      (json_int_t)n->gpus[i].memory, "island",
						      (int)n->gpus[i].island));
	doc = json_pack("{s:s, s:o, s:o, s:[i,i], s:s, s:I, s:I, s:o, s:I, s:I, s:s, s:o, s:o, "
			  "s:o, s:o}", "name",
			  n->name, "addr", str_or_null(n->addr), "iface", str_or_null(n->iface),
			  "ports", (int)n->port_lo, (int)n->port_hi, "state", node_state_name(n->state),
			  "cpus_milli", (json_int_t)n->cpus_milli, "memory", (json_int_t)n->memory,
			  "gpus", gpus, "last_seen", (json_int_t)n->last_seen, "rev",
			  (json_int_t)n->rev, "pool", n->pool ? n->pool : "default", "labels",
			  core_node_labels_json(n), "runtimes", core_node_runtimes_json(n),
			  "engine", str_or_null(n->engine), "drain",
			  node_state_is_drained(n->state)
				  ? json_pack("{s:o, s:o, s:I}", "reason", str_or_null(n->drain_reason),
					      "by", str_or_null(n->drain_by), "at",
					      (json_int_t)n->drain_at)
				  : json_null());
	json_object_set_new(doc, "ephemeral", json_boolean(n->ephemeral));
	json_object_set_new(doc, "slurm_job", str_or_null(n->slurm_job));
	core_put_doc(m, STORE_NODE, n->name, doc);
}

void core_save_token(struct master *m, const struct token *t)
{
	/* last_used is what auth_tick decided to store (last_used_saved), so
	 * that a save for another reason does not reset its minute */
	core_put_doc(m, STORE_TOKEN, t->hash,
		json_pack("{s:s, s:i, s:o, s:b, s:I, s:I, s:I, s:I}", "user", t->user, "role", (int)t->role,
			  "team", str_or_null(t->team), "team_admin", t->team_admin,
			  "created_at", (json_int_t)t->created_at,
			  "expires_at", (json_int_t)t->expires_at, "revoked_at",
			  (json_int_t)t->revoked_at, "last_used", (json_int_t)t->last_used_saved));
}

void core_save_meta(struct master *m, const char *key, const char *value)
{
	core_put_doc(m, STORE_META, key, json_pack("{s:s}", "v", value));
}

/* ---- loading ---- */

static uint64_t get_u64(json_t *d, const char *k)
{
	json_t *v = json_object_get(d, k);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

void core_save_dataset(struct master *m, const struct dataset *ds)
{
	json_t *vs = json_array();

	for (size_t i = 0; i < ds->nv; i++) {
		const struct dataset_version *v = &ds->v[i];
		json_array_append_new(vs, json_pack("{s:i, s:s, s:I, s:i, s:I}", "version", (int)v->version,
						    "digest", v->digest, "size", (json_int_t)v->size,
						    "files", (int)v->files, "created_at",
						    (json_int_t)v->created_at));
	}
	core_put_doc(m, STORE_DATASET, ds->name,
		json_pack("{s:s, s:o, s:o, s:i, s:o}", "name", ds->name, "team", str_or_null(ds->team),
			  "owner", str_or_null(ds->owner), "last_version", (int)ds->last_version,
			  "versions", vs));
}

void core_delete_doc(struct master *m, enum store_kind kind, const char *key)
{
	int rc;

	if (!core_batch_open(m)) {
		rc = m->sops->del(m->store, kind, key, &m->batch_eb);
		if (rc)
			m->batch_err = rc;
	}
}

void core_delete_dataset(struct master *m, const char *name)
{
	core_delete_doc(m, STORE_DATASET, name);
}

void core_dataset_free(struct dataset *ds)
{
	if (!ds)
		return;
	free(ds->name);
	free(ds->team);
	free(ds->owner);
	free(ds->v);
	free(ds);
}

static int get_int(json_t *d, const char *k)
{
	return (int)json_integer_value(json_object_get(d, k));
}

static char *get_str(json_t *d, const char *k)
{
	const char *s = json_string_value(json_object_get(d, k));
	return s ? xstrdup(s) : NULL;
}

static void job_free(struct job *j);
static void task_free(struct task *t);

static char *submit_key_of(const char *user, const char *key)
{
	return xasprintf("%s\n%s", user, key);
}

void core_index_submit_key(struct master *m, const struct job *j)
{
	if (j->submit_key && j->user) {
		char *k = submit_key_of(j->user, j->submit_key);
		codeindex_add(&m->submit_keys, k, j->id);
		free(k);
	}
}

struct job *core_find_submit_key(const struct master *m, const char *user, const char *key)
{
	char *k = submit_key_of(user, key);
	size_t n = 0;
	const uint64_t *ids = codeindex_find(m->submit_keys, k, &n);
	struct job *j = ids && n && ids[0] <= m->njobs ? m->jobs[ids[0] - 1] : NULL;

	free(k);
	return j;
}

/* Jobs and tasks are indexed by id (id N is arr[N - 1]); ids are loaded in
 * increasing order, and one missing from the store leaves a NULL hole. */
#define DENSE_PUT(arr, n, alloc, id, item)                      \
	do {                                                    \
		while ((n) < (id) - 1) {                        \
			ALLOC_GROW(arr, (n) + 1, alloc);        \
			(arr)[(n)++] = NULL;                    \
		}                                               \
		ALLOC_GROW(arr, (n) + 1, alloc);                \
		(arr)[(n)++] = (item);                          \
	} while (0)

/* The pool a canonical spec names ("default" when it names none), or NULL
 * when it is not JSON. Caller frees. */
static char *spec_text_pool(const char *text)
{
	json_t *sd = json_loads(text, 0, NULL);
	const char *pool = json_string_value(json_object_get(sd, "pool"));
	char *out = sd ? xstrdup(pool ? pool : "default") : NULL;

	json_decref(sd);
	return out;
}

static int load_job(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL);
	struct job *j;

	if (!d)
		return YERR(IO);
	j = xcalloc(1, sizeof(*j));
	j->id = get_u64(d, "id");
	j->name = get_str(d, "name");
	j->user = get_str(d, "user");
	j->team = get_str(d, "team");
	j->code = get_str(d, "code");
	j->spec_text = get_str(d, "spec");
	j->pool = get_str(d, "pool");
	j->state = get_int(d, "state");
	j->priority = get_int(d, "priority");
	j->reason_code = get_str(d, "reason_code");
	j->reason_msg = get_str(d, "reason_msg");
	j->has_exit = json_is_true(json_object_get(d, "has_exit"));
	j->exit_code = get_int(d, "exit_code");
	j->attempt = (unsigned)get_u64(d, "attempt");
	j->submitted_at = get_u64(d, "submitted_at");
	j->started_at = get_u64(d, "started_at");
	j->running_at = get_u64(d, "running_at");
	j->finished_at = get_u64(d, "finished_at");
	j->checkpoint = get_str(d, "checkpoint");
	j->submit_key = get_str(d, "submit_key");
	j->preemptions = (unsigned)get_u64(d, "preemptions");
	j->held_by = get_str(d, "held_by");
	j->experiment = get_u64(json_object_get(d, "experiment"), "id");
	j->trial = (unsigned)get_u64(json_object_get(d, "experiment"), "trial");
	if (json_is_array(json_object_get(d, "data")))
		j->data = json_incref(json_object_get(d, "data"));
	if (json_is_array(json_object_get(d, "events")))
		j->events = json_incref(json_object_get(d, "events"));
	if (json_is_object(json_object_get(d, "image_built")))
		j->image_built = json_incref(json_object_get(d, "image_built"));
	json_decref(d);
	codeindex_add(&m->code_index, j->code, j->id);
	codeindex_add(&m->code_index, j->checkpoint, j->id);
	jobsource_index(m, j);
	core_index_submit_key(m, j);
	if (!j->pool && j->spec_text) /* a record of an earlier build: its spec says */
		j->pool = spec_text_pool(j->spec_text);
	if (!j->id || !j->name || !j->user || !j->spec_text || !j->pool || (unsigned)j->state >= JOB_STATE__COUNT ||
	    (unsigned)j->priority > PRIO_HIGH || (m->njobs && j->id <= m->njobs)) {
		job_free(j);
		return YERR(IO);
	}
	if (!job_state_is_final(j->state)) {
		json_t *sd = json_loads(j->spec_text, 0, NULL);
		struct errbuf eb = ERRBUF_INIT;
		j->spec = xcalloc(1, sizeof(*j->spec));
		if (!sd || spec_from_json(sd, j->spec, &eb)) {
			json_decref(sd);
			job_free(j);
			return YERR(IO);
		}
		json_decref(sd);
	}
	DENSE_PUT(m->jobs, m->njobs, m->ajobs, j->id, j);
	(void)key;
	return 0;
}

static int load_dataset(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL), *v;
	struct dataset *ds;
	size_t i;

	if (!d)
		return YERR(IO);
	ds = xcalloc(1, sizeof(*ds));
	ds->name = get_str(d, "name");
	ds->team = get_str(d, "team");
	ds->owner = get_str(d, "owner");
	ds->last_version = (unsigned)get_u64(d, "last_version");
	json_array_foreach(json_object_get(d, "versions"), i, v) {
		struct dataset_version *dv;
		const char *dg = json_string_value(json_object_get(v, "digest"));
		ALLOC_GROW(ds->v, ds->nv + 1, ds->av);
		dv = &ds->v[ds->nv++];
		dv->version = (unsigned)get_u64(v, "version");
		snprintf(dv->digest, sizeof(dv->digest), "%s", dg ? dg : "");
		dv->size = get_u64(v, "size");
		dv->files = (unsigned)get_u64(v, "files");
		dv->created_at = get_u64(v, "created_at");
	}
	json_decref(d);
	if (!ds->name) {
		core_dataset_free(ds);
		return YERR(IO);
	}
	ALLOC_GROW(m->datasets, m->ndatasets + 1, m->adatasets);
	m->datasets[m->ndatasets++] = ds;
	(void)key;
	return 0;
}

static int load_task(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL);
	json_t *gpus, *v;
	struct task *t;
	size_t i;

	if (!d)
		return YERR(IO);
	t = xcalloc(1, sizeof(*t));
	t->id = get_u64(d, "id");
	t->job = core_job(m, get_u64(d, "job"));
	t->role = get_str(d, "role");
	t->index = (unsigned)get_int(d, "index");
	t->attempt = (unsigned)get_int(d, "attempt");
	t->state = get_int(d, "state");
	t->stop = json_is_true(json_object_get(d, "stop"));
	t->node = get_str(d, "node");
	gpus = json_object_get(d, "gpus");
	t->ngpus = (unsigned)json_array_size(gpus);
	t->gpus = xcalloc(t->ngpus + 1, sizeof(unsigned));
	json_array_foreach(gpus, i, v)
		t->gpus[i] = (unsigned)json_integer_value(v);
	t->cpus_milli = get_u64(d, "cpus_milli");
	t->memory = get_u64(d, "memory");
	t->pids = get_u64(d, "pids");
	t->has_exit = json_is_true(json_object_get(d, "has_exit"));
	t->has_signal = json_is_true(json_object_get(d, "has_signal"));
	t->exit_code = get_int(d, "exit_code");
	t->signal = get_int(d, "signal");
	t->reason_code = get_str(d, "reason_code");
	t->reason_msg = get_str(d, "reason_msg");
	t->started_at = get_u64(d, "started_at");
	t->finished_at = get_u64(d, "finished_at");
	t->has_cpu = json_is_integer(json_object_get(d, "cpu_usec"));
	t->cpu_usec = get_u64(d, "cpu_usec");
	t->has_memory_peak = json_is_integer(json_object_get(d, "memory_peak"));
	t->memory_peak = get_u64(d, "memory_peak");
	t->port = (unsigned)get_u64(d, "port");
	t->grace_ms = get_u64(d, "grace_ms");
	t->preempted = json_is_true(json_object_get(d, "preempted"));
	t->log_size[LOG_STDOUT] = get_u64(d, "stdout");
	t->log_size[LOG_STDERR] = get_u64(d, "stderr");
	t->outputs = get_str(d, "outputs");
	t->outputs_size = get_u64(d, "outputs_size");
	if (json_is_object(json_object_get(d, "outputs_files")))
		t->outputs_files = json_incref(json_object_get(d, "outputs_files"));
	json_decref(d);
	if (!t->id || !t->job || !t->role || (unsigned)t->state >= TASK_STATE__COUNT ||
	    (m->ntasks && t->id <= m->ntasks)) {
		task_free(t);
		return YERR(IO);
	}
	DENSE_PUT(m->tasks, m->ntasks, m->atasks, t->id, t);
	ALLOC_GROW(t->job->tasks, t->job->ntasks + 1, t->job->atasks);
	t->job->tasks[t->job->ntasks++] = t;
	codeindex_add(&m->code_index, t->outputs, t->job->id);
	(void)key;
	return 0;
}

/* A stored node's state: its name, or in a store written before the node
 * table the number of the old enum (0 ready, 1 draining, 2 lost). A name
 * this master does not know, or "removed" (never stored), loads as lost: the
 * agent's next word makes it ready. */
static enum node_state load_node_state(json_t *d)
{
	static const enum node_state old[] = { NODE_READY, NODE_DRAINED, NODE_LOST };
	json_t *v = json_object_get(d, "state");
	int s;

	if (json_is_integer(v))
		return json_integer_value(v) >= 0 && json_integer_value(v) < 3
			       ? old[json_integer_value(v)] : NODE_LOST;
	s = json_is_string(v) ? node_state_parse(json_string_value(v)) : -1;
	return s < 0 || s == NODE_REMOVED ? NODE_LOST : (enum node_state)s;
}

static int load_node(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL);
	json_t *gpus, *v;
	struct node *n;
	size_t i;

	if (!d)
		return YERR(IO);
	n = xcalloc(1, sizeof(*n));
	n->name = get_str(d, "name");
	n->addr = get_str(d, "addr");
	n->iface = get_str(d, "iface");
	n->port_lo = (unsigned)json_integer_value(json_array_get(json_object_get(d, "ports"), 0));
	n->port_hi = (unsigned)json_integer_value(json_array_get(json_object_get(d, "ports"), 1));
	n->state = load_node_state(d);
	if (node_state_is_drained(n->state)) {
		json_t *drain = json_object_get(d, "drain");
		n->drain_reason = get_str(drain, "reason");
		n->drain_by = get_str(drain, "by");
		n->drain_at = get_u64(drain, "at");
	}
	n->cpus_milli = get_u64(d, "cpus_milli");
	n->memory = get_u64(d, "memory");
	n->last_seen = get_u64(d, "last_seen");
	n->rev = get_u64(d, "rev");
	gpus = json_object_get(d, "gpus");
	n->ngpus = json_array_size(gpus);
	n->gpus = xcalloc(n->ngpus + 1, sizeof(*n->gpus));
	json_array_foreach(gpus, i, v) {
		n->gpus[i].index = (unsigned)get_int(v, "index");
		n->gpus[i].model = get_str(v, "model");
		n->gpus[i].uuid = get_str(v, "uuid");
		n->gpus[i].memory = get_u64(v, "memory");
		/* nodes stored before islands: each GPU its own */
		n->gpus[i].island = json_is_integer(json_object_get(v, "island"))
					    ? (unsigned)get_int(v, "island")
					    : n->gpus[i].index;
	}
	n->pool = get_str(d, "pool");
	if (!n->pool)
		n->pool = xstrdup("default");
	core_node_set_labels(n, json_object_get(d, "labels"));
	/* nodes stored before runtimes: the process runtime alone */
	{
		struct errbuf ignored = ERRBUF_INIT;
		core_runtimes_from_json(json_object_get(d, "runtimes"), &n->runtimes, &ignored);
	}
	n->engine = get_str(d, "engine");
	n->ephemeral = json_is_true(json_object_get(d, "ephemeral"));
	n->slurm_job = get_str(d, "slurm_job");
	json_decref(d);
	if (!n->name)
		return YERR(IO);
	core_add_node(m, n);
	(void)key;
	return 0;
}

static int load_token(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL);
	struct token *t;

	if (!d || strlen(key) != 64) {
		json_decref(d);
		return YERR(IO);
	}
	ALLOC_GROW(m->tokens, m->ntokens + 1, m->atokens);
	t = &m->tokens[m->ntokens++];
	memset(t, 0, sizeof(*t));
	memcpy(t->hash, key, 65);
	t->user = get_str(d, "user");
	t->role = get_int(d, "role");
	t->team = get_str(d, "team");
	t->team_admin = t->team && json_is_true(json_object_get(d, "team_admin"));
	t->created_at = get_u64(d, "created_at");
	t->expires_at = get_u64(d, "expires_at");
	t->revoked_at = get_u64(d, "revoked_at");
	t->last_used = t->last_used_saved = get_u64(d, "last_used");
	json_decref(d);
	if (!t->user || (int)t->role < 0 || t->role >= ROLE__COUNT)
		return YERR(IO);
	return 0;
}

/* Sets of pointers with O(1) insert and remove: each member remembers
 * 1 + its index in its slot field. */
#define SET_PUT(arr, n, a, item, slot)                  \
	do {                                            \
		if (!(item)->slot) {                    \
			ALLOC_GROW(arr, (n) + 1, a);    \
			(arr)[(n)++] = (item);          \
			(item)->slot = (n);             \
		}                                       \
	} while (0)
#define SET_DEL(arr, n, item, slot)                             \
	do {                                                    \
		if ((item)->slot) {                             \
			size_t set_i_ = (item)->slot - 1;       \
			(arr)[set_i_] = (arr)[--(n)];           \
			(arr)[set_i_]->slot = set_i_ + 1;       \
			(item)->slot = 0;                       \
		}                                               \
	} while (0)

void core_job_changed(struct master *m, struct job *j)
{
	m->jobs_gen++;
	if (!j)
		return;
	for (int w = 0; w < 2; w++) {
		free(j->doc[w]);
		j->doc[w] = NULL;
		j->doc_len[w] = 0;
	}
}

void core_index_job(struct master *m, struct job *j)
{
	core_job_changed(m, j);
	if (j->state == JOB_QUEUED)
		SET_PUT(m->queue, m->nqueue, m->aqueue, j, queue_slot);
	else
		SET_DEL(m->queue, m->nqueue, j, queue_slot);
}

void core_index_task(struct master *m, struct task *t)
{
	bool holds = t->node && task_state_holds_resources(t->state);
	struct node *n = holds ? core_node(m, t->node) : NULL;

	core_job_changed(m, t->job);
	if (holds)
		SET_PUT(m->live, m->nlive, m->alive, t, live_slot);
	else
		SET_DEL(m->live, m->nlive, t, live_slot);
	if (t->live_node && t->live_node != n) {
		struct node *was = t->live_node;
		SET_DEL(was->live, was->nlive, t, node_slot);
		t->live_node = NULL;
	}
	if (n && !t->live_node) {
		SET_PUT(n->live, n->nlive, n->alive, t, node_slot);
		t->live_node = n;
	}
}

void core_job_drop_spec(struct job *j)
{
	if (j->spec)
		spec_release(j->spec);
	free(j->spec);
	j->spec = NULL;
}

bool core_job_settled(const struct job *j)
{
	if (!job_state_is_final(j->state))
		return false;
	for (size_t i = 0; i < j->ntasks; i++)
		if (task_state_holds_resources(j->tasks[i]->state))
			return false;
	return true;
}

int core_load(struct master *m, struct errbuf *eb)
{
	static const store_load_fn fns[] = { load_job, load_task, load_node, load_token };
	static const char *const what[] = { "job", "task", "node", "token" };

	for (size_t k = 0; k < ARRAY_SIZE(fns); k++) {
		int rc = m->sops->load(m->store, (enum store_kind)k, fns[k], m, eb);
		if (rc) {
			if (!eb || !eb->code)
				error(eb, rc, "store: a stored %s is corrupt", what[k]);
			return rc;
		}
	}
	{
		int rc = m->sops->load(m->store, STORE_DATASET, load_dataset, m, eb);
		if (rc) {
			if (!eb || !eb->code)
				error(eb, rc, "store: a stored dataset is corrupt");
			return rc;
		}
	}
	for (size_t i = 0; i < m->njobs; i++)
		if (m->jobs[i])
			core_index_job(m, m->jobs[i]);
	for (size_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i])
			core_index_task(m, m->tasks[i]);
	/* work polls held across a reload (a failed commit) compare their
	 * revision with the stored one at the next wake */
	m->nbumped = 0;
	for (size_t i = 0; i < m->nnodes; i++) {
		ALLOC_GROW(m->bumped, m->nbumped + 1, m->abumped);
		m->bumped[m->nbumped++] = m->nodes[i];
		m->nodes[i]->bumped = true;
	}
	m->sched_needed = true;
	int rc = experiments_load(m, eb);
	if (!rc)
		rc = templates_load(m, eb);
	return rc ? rc : elastic_load(m, eb);
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->name);
	free(j->user);
	free(j->team);
	free(j->code);
	free(j->checkpoint);
	free(j->pool);
	free(j->util);
	free(j->submit_key);
	free(j->spec_text);
	core_job_drop_spec(j);
	free(j->reason_code);
	free(j->reason_msg);
	free(j->tasks);
	free(j->wait_msg);
	free(j->held_by);
	json_decref(j->data);
	json_decref(j->events);
	json_decref(j->image_built);
	free(j->doc[0]);
	free(j->doc[1]);
	free(j);
}

static void task_free(struct task *t)
{
	if (!t)
		return;
	free(t->role);
	free(t->node);
	free(t->gpus);
	free(t->reason_code);
	free(t->reason_msg);
	free(t->outputs);
	json_decref(t->outputs_files);
	free(t);
}

void core_set_checkpoint(struct master *m, struct job *j, const char *digest)
{
	free(j->checkpoint);
	j->checkpoint = xstrdup(digest);
	codeindex_add(&m->code_index, digest, j->id);
	core_save_job(m, j);
}

void core_clear(struct master *m)
{
	experiments_clear(m);
	templates_clear(m);
	elastic_clear(m);
	codeindex_free(&m->code_index);
	codeindex_free(&m->submit_keys);
	/* nodes first: node_free lets go of their tasks */
	for (size_t i = 0; i < m->nnodes; i++)
		node_free(m->nodes[i]);
	for (size_t i = 0; i < m->njobs; i++)
		job_free(m->jobs[i]);
	for (size_t i = 0; i < m->ntasks; i++)
		task_free(m->tasks[i]);
	for (size_t i = 0; i < m->ntokens; i++) {
		free(m->tokens[i].user);
		free(m->tokens[i].team);
	}
	free(m->jobs);
	free(m->tasks);
	free(m->queue);
	free(m->live);
	free(m->fresh);
	m->queue = m->fresh = NULL;
	m->live = NULL;
	m->nqueue = m->aqueue = m->nlive = m->alive = m->nfresh = m->afresh = 0;
	for (size_t i = 0; i < m->ndatasets; i++)
		core_dataset_free(m->datasets[i]);
	free(m->datasets);
	m->datasets = NULL;
	m->ndatasets = m->adatasets = 0;
	free(m->nodes);
	free(m->tokens);
	free(m->bumped); /* the nodes it named are gone */
	m->bumped = NULL;
	m->nbumped = m->abumped = 0;
	m->nodes_gen++;
	for (size_t i = 0; i < ADMIT_MEMO_MAX; i++) {
		free(m->admit[i].shape);
		m->admit[i].shape = NULL;
	}
	free(m->token_ix);
	m->token_ix = NULL;
	m->token_ix_cap = m->token_ix_n = 0;
	m->jobs = NULL;
	m->tasks = NULL;
	m->nodes = NULL;
	free(m->node_hash);
	m->node_hash = NULL;
	m->node_hash_cap = 0;
	m->tokens = NULL;
	m->njobs = m->ajobs = m->ntasks = m->atasks = 0;
	m->jobs_gen++; /* no listing of the old model is sent again */
	m->nnodes = m->anodes = m->ntokens = m->atokens = 0;
}
