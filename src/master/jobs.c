/* Job, task and node lifecycles of the master (their API documents are
 * jobdocs.c's). */
#include "base/compat.h"
#include "master/jobs.h"

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/xalloc.h"
#include "common/spec_image.h"
#include "launch/launch.h"
#include "master/admission.h"
#include "master/auth.h"
#include "master/codeindex.h"
#include "master/control.h"
#include "master/experiments.h"
#include "master/datasets.h"
#include "master/elastic.h"
#include "master/execs.h"
#include "master/gitcode.h"
#include "master/http.h"
#include "master/images.h"
#include "master/sessions.h"
#include "master/jobsource.h"
#include "master/logs.h"
#include "master/nodereport.h"
#include "master/nodeview.h"
#include "master/usage.h"
#include "master/visibility.h"
#include "sched/estimate.h"
#include "sched/decide.h"
#include "sched/policy.h"
#include "sched/sched.h"

/* Reasons and waits quote what agents and peers said: stored as valid
 * UTF-8 without control characters (base/utf8.h), so every one can be a
 * JSON string. */
static void set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = s ? utf8_escape_dup(s) : NULL;
}

/* Appends a state change to the job's history (the oldest goes past
 * JOB_EVENTS_MAX). */
static void job_note(struct job *j)
{
	if (!j->events)
		j->events = json_array();
	if (json_array_size(j->events) >= JOB_EVENTS_MAX)
		json_array_remove(j->events, 0);
	json_array_append_new(j->events, json_pack("{s:I, s:s, s:I}", "at", (json_int_t)wall_us(), "state",
						   job_state_name(j->state), "attempt", (json_int_t)j->attempt));
}

/* Notes a phase of a state in the job's history (its image built while it
 * starts), once per attempt. */
static void job_note_phase(struct job *j, const char *phase, const char *msg)
{
	json_t *e;
	size_t i;

	json_array_foreach(j->events, i, e) {
		const char *p = json_string_value(json_object_get(e, "phase"));
		if (p && !strcmp(p, phase) && json_integer_value(json_object_get(e, "attempt")) == (json_int_t)j->attempt)
			return;
	}
	job_note(j);
	e = json_array_get(j->events, json_array_size(j->events) - 1);
	json_object_set_new(e, "phase", json_string(phase));
	json_object_set_new(e, "reason", json_pack("{s:s, s:s}", "code", phase, "message", msg));
}

/* The job's reason; also the why of the state change just noted (set right
 * after the change on every path that has one). */
static void job_set_reason(struct job *j, const char *code, const char *msg)
{
	set_str(&j->reason_code, code);
	set_str(&j->reason_msg, msg);
	json_t *last = json_array_get(j->events, json_array_size(j->events) - 1);
	if (last && !json_object_get(last, "reason") && code &&
	    !strcmp(json_string_value(json_object_get(last, "state")), job_state_name(j->state))) {
		json_object_set_new(last, "reason", json_pack("{s:s, s:s}", "code", code, "message", msg ? msg : ""));
		json_object_set_new(last, "attempt", json_integer((json_int_t)j->attempt));
	}
}

static bool job_event(struct master *m, struct job *j, enum job_event ev)
{
	int next = job_transition(j->state, ev);

	if (next < 0)
		return false;
	prom_job_event(m, j, (enum job_state)next);
	j->state = (enum job_state)next;
	job_note(j);
	if (job_state_is_final(j->state)) {
		j->finished_at = wall_us();
		j->queue_position = 0;
		jobsource_release(m, j);
		core_job_drop_spec(j);
		free(j->wait_msg);
		j->wait_msg = NULL;
	}
	core_index_job(m, j);
	m->sched_needed = true;
	return true;
}

static bool task_event(struct master *m, struct task *t, enum task_event ev)
{
	int next = task_transition(t->state, ev);

	if (next < 0)
		return false;
	t->state = (enum task_state)next;
	if (task_state_is_final(t->state) && !t->finished_at)
		t->finished_at = wall_us();
	if (task_state_is_final(t->state))
		sessions_task_ended(m, t); /* what runs in it ends with it */
	if (t->state == TASK_STOPPING || task_state_is_final(t->state))
		t->stop = true;
	core_index_task(m, t);
	m->sched_needed = true;
	return true;
}

static void node_bump(struct master *m, const char *name)
{
	struct node *n = name ? core_node(m, name) : NULL;

	if (n) {
		core_node_bump(m, n);
		core_save_node(m, n);
	}
}

/* ---- creating jobs ---- */

static struct task *task_new(struct master *m, struct job *j, const struct spec_role *r,
			     unsigned index)
{
	struct task *t = xcalloc(1, sizeof(*t));

	t->id = m->ntasks + 1;
	t->job = j;
	t->role = xstrdup(r->name);
	t->index = index;
	t->attempt = j->attempt;
	t->state = TASK_PENDING;
	t->cpus_milli = r->cpus_milli;
	t->memory = r->memory;
	t->pids = r->pids;
	t->gpus = xcalloc(1, sizeof(unsigned));
	/* a new task has no log yet: its document need not ask the store */
	for (int s = 0; s < LOG_STREAM__COUNT; s++)
		t->log_size_known[s] = true;
	ALLOC_GROW(m->tasks, m->ntasks + 1, m->atasks);
	m->tasks[m->ntasks++] = t;
	ALLOC_GROW(j->tasks, j->ntasks + 1, j->atasks);
	j->tasks[j->ntasks++] = t;
	return t;
}

static void job_new_attempt_tasks(struct master *m, struct job *j)
{
	char buf[24];

	for (size_t r = 0; r < j->spec->nroles; r++)
		for (unsigned i = 0; i < j->spec->roles[r].replicas; i++)
			core_save_task(m, task_new(m, j, &j->spec->roles[r], i));
	snprintf(buf, sizeof(buf), "%zu", m->ntasks);
	core_save_meta(m, "next_task_id", buf);
}

/* The spec's placement labels as the scheduler takes them (caller frees the
 * array; the strings stay the spec's). */
static struct sched_label *spec_sched_labels(const struct job_spec *spec)
{
	struct sched_label *l = xcalloc(spec->nlabels + 1, sizeof(*l));

	for (size_t i = 0; i < spec->nlabels; i++)
		l[i] = (struct sched_label){ spec->labels[i].key, spec->labels[i].value };
	return l;
}

/* The pools of tasks[0..n) of spec's roles (tasks.ROLE.pool), as placement
 * takes them (sched_job task_pools), or NULL when every role runs in the
 * job's pool. Caller frees the array; the strings stay the spec's. */
static const char **spec_task_pools(const struct job_spec *spec, const struct sched_task *tasks, size_t n)
{
	const char **pools = NULL;

	for (size_t r = 0; r < spec->nroles && !pools; r++)
		if (spec->roles[r].pool)
			pools = xcalloc(n + 1, sizeof(*pools));
	for (size_t t = 0; pools && t < n; t++)
		for (size_t r = 0; r < spec->nroles; r++)
			if (!strcmp(spec->roles[r].name, tasks[t].role))
				pools[t] = spec->roles[r].pool;
	return pools;
}

/* Whether pred holds for a pool of spec: the job's, or a role's own. */
static bool spec_pools_any(const struct master *m, const struct job_spec *spec,
			   bool (*pred)(const struct master *, const char *))
{
	if (pred(m, spec->pool))
		return true;
	for (size_t r = 0; r < spec->nroles; r++)
		if (spec->roles[r].pool && pred(m, spec->roles[r].pool))
			return true;
	return false;
}

/* A submission's idempotency_key: NULL when absent, else checked. */
static int submit_key(const json_t *body, const char **out, struct errbuf *eb)
{
	const json_t *k = json_object_get(body, "idempotency_key");
	const char *s = json_string_value(k);
	size_t n = s ? strlen(s) : 0;

	*out = NULL;
	if (!k || json_is_null(k))
		return 0;
	if (!n || n > 128 || s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")])
		return error_field(eb, YERR(BAD_REQUEST), "idempotency_key",
				   "idempotency_key: expected 1 to 128 of A-Z a-z 0-9 . _ : -");
	*out = s;
	return 0;
}

/* A submission sent again with the key of one that made job prev (its reply
 * was lost): the same spec and code answer prev, anything else is refused. */
static int submit_again(const struct job *prev, const struct job_spec *spec, const char *code,
			struct errbuf *eb)
{
	json_t *canon = spec_to_json(spec);
	char *text = json_dumps(canon, JSON_COMPACT | JSON_REAL_PRECISION(15));
	bool same = text && !strcmp(text, prev->spec_text) &&
		    !strcmp(code ? code : "", prev->code ? prev->code : "");

	free(text);
	json_decref(canon);
	if (same)
		return 0;
	return error_field(eb, YERR(CONFLICT), "idempotency_key",
			   "idempotency_key: it made job %" PRIu64 " of another spec or code; a new "
			   "submission needs a new key", prev->id);
}

int jobs_submit(struct master *m, const struct caller *c, const json_t *body, struct job **out,
		bool *again, struct errbuf *eb)
{
	struct job_spec *spec = xcalloc(1, sizeof(*spec));
	const json_t *jspec, *jcode;
	const char *code = NULL, *key = NULL;
	struct job *j = NULL;
	json_t *canon = NULL, *data = NULL;
	int ret = 0;

	*out = NULL;
	*again = false;
	if (!json_is_object(body)) {
		ret = error(eb, YERR(BAD_REQUEST), "request body: expected a JSON object");
		goto out;
	}
	if ((ret = submit_key(body, &key, eb)))
		goto out;
	jspec = json_object_get(body, "spec");
	if (!json_is_object(jspec)) {
		ret = error_field(eb, YERR(INVALID_SPEC), "spec", "spec: expected an object");
		goto out;
	}
	ret = spec_from_json(jspec, spec, eb);
	if (!ret && spec->sweep)
		ret = error_field(eb, YERR(INVALID_SPEC), "sweep", "sweep: a sweep is an experiment "
				  "(POST /v1/experiments, or yard submit)");
	if (!ret && !(ret = launch_validate(spec, eb)))
		ret = control_check_after(m, c, spec, eb);
	if (!ret && !visibility_team(c, spec->team))
		ret = error_field(eb, YERR(FORBIDDEN), "team", "team: '%s' may not submit to team '%s' "
				  "(its token names %s%s%s)", c->user, spec->team,
				  c->team ? "team '" : "no team", c->team ? c->team : "", c->team ? "'" : "");
	if (ret)
		goto out;
	jcode = json_object_get(body, "code");
	if (jcode && !json_is_null(jcode)) {
		const char *hex;
		char name[CODE_NAME_MAX];
		uint64_t size;
		bool ok = true;

		code = json_string_value(jcode);
		if (!code || strncmp(code, "sha256:", 7) || strlen(code) != 7 + 64) {
			ret = error_field(eb, YERR(BAD_REQUEST), "code",
					  "code: expected \"sha256:\" and 64 hex digits");
			goto out;
		}
		hex = code + 7;
		for (const char *p = hex; *p; p++)
			ok &= (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
		if (ok) {
			struct errbuf seb = ERRBUF_INIT;
			int rc;
			code_blob_name(name, hex);
			rc = m->sops->blob_size(m->store, name, &size, &seb);
			if (rc && rc != YERR(NOT_FOUND)) {
				ret = error(eb, rc, "%s", seb.msg);
				goto out;
			}
			ok = !rc;
		}
		if (!ok) {
			ret = error_field(eb, YERR(BAD_REQUEST), "code",
					  "code: '%s' was not uploaded (POST /v1/code first)", code);
			goto out;
		}
	}
	/* code from git: only as gitcode_submit fetched and packed it */
	if ((ret = gitcode_check(m, spec, code, eb)) || (ret = spec_image_check_code(spec, code != NULL, eb)))
		goto out;
	if (key && (j = core_find_submit_key(m, c->user, key))) {
		if (!(ret = submit_again(j, spec, code, eb))) {
			*out = j;
			*again = true;
		}
		goto out;
	}
	if ((m->nnodes || spec_pools_any(m, spec, elastic_pool_provisioned)) && !spec->wait_for_nodes &&
	    !spec_pools_any(m, spec, elastic_shape_unknown)) {
		/* admission: a job no state of the cluster could run is refused (with
		 * no nodes at all it waits for some to join; with wait_for_nodes it
		 * waits, and the plan gives this check's message as its reason).
		 * The cluster is every node the master knows, lost and drained ones
		 * too (they may come back, or be resumed), but not removed ones. */
		size_t ntasks = 0;
		struct sched_task *st;
		struct sched_job sj;
		char field[160], msg[512];
		int bad;

		/* every task of the gang, a role's together (the gang checks count them) */
		for (size_t r = 0; r < spec->nroles; r++)
			ntasks += spec->roles[r].replicas;
		st = xcalloc(ntasks + 1, sizeof(*st));
		ntasks = 0;
		for (size_t r = 0; r < spec->nroles; r++)
			for (unsigned x = 0; x < spec->roles[r].replicas; x++)
				st[ntasks++] = (struct sched_task){ .role = spec->roles[r].name, .index = x,
								    .gpus = spec->roles[r].gpus,
								    .cpus_milli = spec->roles[r].cpus_milli,
								    .memory = spec->roles[r].memory };
		sj = (struct sched_job){ .tasks = st, .ntasks = ntasks, .max_nodes = spec->max_nodes,
					 .gpu_model = spec->gpu_model, .gpu_memory = spec->gpu_memory,
					 .pool = spec->pool, .labels = spec_sched_labels(spec),
					 .nlabels = spec->nlabels, .image = spec_image_shown(spec),
					 .task_pools = spec_task_pools(spec, st, ntasks) };

		bad = admission_check(m, &sj, field, sizeof(field), msg, sizeof(msg));
		free((void *)sj.labels);
		free((void *)sj.task_pools);
		free(st);
		if (bad) {
			ret = error_field(eb, YERR(INVALID_SPEC), field,
					  "%s (set placement.wait_for_nodes: true to queue anyway)", msg);
			goto out;
		}
	}

	/* the data: yard sources resolved and pinned (after every other check) */
	if ((ret = datasets_resolve(m, c, spec, &data, eb)))
		goto out;

	j = xcalloc(1, sizeof(*j));
	j->id = m->njobs + 1;
	j->data = data;
	data = NULL;
	j->name = xstrdup(spec->name);
	j->user = xstrdup(c->user);
	j->team = spec->team ? xstrdup(spec->team) : c->team ? xstrdup(c->team) : NULL;
	j->code = code ? xstrdup(code) : NULL;
	j->pool = xstrdup(spec->pool ? spec->pool : "default");
	j->submit_key = key ? xstrdup(key) : NULL;
	codeindex_add(&m->code_index, j->code, j->id);
	jobsource_index(m, j);
	core_index_submit_key(m, j);
	canon = spec_to_json(spec);
	j->spec_text = json_dumps(canon, JSON_COMPACT | JSON_REAL_PRECISION(15));
	j->spec = spec;
	spec = NULL;
	j->state = JOB_QUEUED;
	j->priority = j->spec->priority;
	j->submitted_at = wall_us();
	job_note(j);
	ALLOC_GROW(m->jobs, m->njobs + 1, m->ajobs);
	m->jobs[m->njobs++] = j;
	core_save_job(m, j);
	job_new_attempt_tasks(m, j);
	{
		char buf[24];
		snprintf(buf, sizeof(buf), "%zu", m->njobs);
		core_save_meta(m, "next_job_id", buf);
	}
	/* only the new job needs placing: capacity has not changed */
	core_index_job(m, j);
	ALLOC_GROW(m->fresh, m->nfresh + 1, m->afresh);
	m->fresh[m->nfresh++] = j;
	*out = j;
out:
	json_decref(canon);
	json_decref(data);
	if (spec) {
		spec_release(spec);
		free(spec);
	}
	return ret;
}

/* ---- stopping, failing, restarting ---- */

/* The tasks of j's latest attempt. */
static bool task_current(const struct job *j, const struct task *t)
{
	return t->attempt == j->attempt;
}

/* Asks every non-final task of j (all attempts) to stop. */
static void job_stop_tasks(struct master *m, struct job *j, const struct task *except)
{
	for (size_t i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		if (t == except || task_state_is_final(t->state) || t->state == TASK_STOPPING)
			continue;
		if (task_event(m, t, TASK_EV_STOP)) {
			core_save_task(m, t);
			node_bump(m, t->node);
		}
	}
}

/* Whether a task of an earlier attempt still holds its node. A restart waits
 * for the whole previous gang to stop: its ports and GPUs are free then, and
 * its checkpoint has been handed to the master (see jobs_work_json). */
static bool job_previous_attempt_live(const struct job *j)
{
	for (size_t i = 0; i < j->ntasks; i++)
		if (!task_current(j, j->tasks[i]) && task_state_holds_resources(j->tasks[i]->state))
			return true;
	return false;
}

/* A task of j's current attempt failed or was lost: restart the gang if the
 * spec allows, else fail the job with code/msg. */
static void job_task_failed(struct master *m, struct job *j, const struct task *t,
			    const char *code, const char *msg, bool has_exit, int exit_code)
{
	if (job_state_is_final(j->state) || !task_current(j, t))
		return;
	job_stop_tasks(m, j, t);
	if (j->spec && j->attempt < j->spec->restart_max && job_event(m, j, JOB_EV_RESTART)) {
		j->attempt++;
		job_set_reason(j, code, msg);
		j->started_at = j->running_at = 0;
		job_new_attempt_tasks(m, j);
	} else if (job_event(m, j, JOB_EV_TASK_FAILED)) {
		job_set_reason(j, code, msg);
		j->has_exit = has_exit;
		j->exit_code = exit_code;
	}
	core_save_job(m, j);
}

/* After a task of the current attempt changed: all running? all done? */
static void job_check_progress(struct master *m, struct job *j)
{
	bool all_running = true, all_ok = true;

	if (job_state_is_final(j->state) || j->state == JOB_QUEUED)
		return;
	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *t = j->tasks[i];
		if (!task_current(j, t))
			continue;
		if (t->state != TASK_RUNNING && t->state != TASK_SUCCEEDED)
			all_running = false;
		/* the framework says which tasks decide (launch_decides) */
		if (t->state != TASK_SUCCEEDED && launch_decides(j->spec, t->role, t->index))
			all_ok = false;
	}
	if (all_ok && job_event(m, j, JOB_EV_ALL_SUCCEEDED)) {
		/* the rest (parameter servers, MPI's rank hosts) are done too */
		job_stop_tasks(m, j, NULL);
		j->has_exit = true;
		j->exit_code = 0;
		job_set_reason(j, NULL, NULL);
		if (!j->running_at) /* started and ended between two reports */
			j->running_at = j->finished_at;
		core_save_job(m, j);
	} else if (all_running && j->state == JOB_STARTING &&
		   job_event(m, j, JOB_EV_ALL_RUNNING)) {
		j->running_at = wall_us();
		core_save_job(m, j);
	}
}

int jobs_end(struct master *m, struct job *j, enum job_event ev, const char *code, const char *msg)
{
	if (!job_event(m, j, ev))
		return -1;
	job_set_reason(j, code, msg);
	job_stop_tasks(m, j, NULL);
	core_save_job(m, j);
	return 0;
}

int jobs_cancel(struct master *m, struct job *j, struct errbuf *eb)
{
	if (job_state_is_final(j->state))
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is already %s", j->id,
			     job_state_name(j->state));
	if (jobs_end(m, j, JOB_EV_CANCEL, "cancelled", "cancelled by request"))
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " cannot be cancelled", j->id);
	return 0;
}

/* Task t is lost with its node; why: how the node went ("left: ..."), or
 * NULL: its lease lapsed. */
static void task_lost(struct master *m, struct task *t, const char *node_name, const char *why)
{
	struct job *j = t->job;
	char msg[400];

	if (!task_event(m, t, TASK_EV_LOST))
		return;
	set_str(&t->reason_code, "node_lost");
	if (why)
		snprintf(msg, sizeof(msg), "node '%s' %s", node_name, why);
	else
		snprintf(msg, sizeof(msg), "node '%s' was lost", node_name);
	set_str(&t->reason_msg, msg);
	core_save_task(m, t);
	if (why)
		snprintf(msg, sizeof(msg), "%s/%u was lost: node '%s' %s", t->role, t->index, node_name, why);
	else
		snprintf(msg, sizeof(msg), "%s/%u was lost with node '%s'", t->role, t->index, node_name);
	job_task_failed(m, j, t, "node_lost", msg, false, 0);
}

/* The tasks of a node that stopped being live are lost, but those whose
 * job keeps them through a disconnect. */
/* A copy of n's live list (the tasks that hold its resources, a task on a
 * node is not final without holding them): task_lost changes the list. */
static struct task **node_live_copy(const struct node *n, size_t *count)
{
	struct task **live = xcalloc(n->nlive + 1, sizeof(*live));

	if (n->nlive)
		memcpy(live, n->live, n->nlive * sizeof(*live));
	*count = n->nlive;
	return live;
}

static void node_tasks_lost(struct master *m, struct node *n)
{
	size_t nlive;
	struct task **live = node_live_copy(n, &nlive);

	for (size_t i = 0; i < nlive; i++) {
		struct task *t = live[i];
		if (task_state_is_final(t->state))
			continue;
		/* on_disconnect: keep: its agent runs it on; wait for the node */
		if (t->job && t->job->spec && t->job->spec->keep_on_disconnect &&
		    (t->state == TASK_RUNNING || t->state == TASK_ASSIGNED))
			continue;
		task_lost(m, t, n->name, NULL);
	}
	free(live);
}

void nodes_leave(struct master *m, struct node *n, const char *why)
{
	char *what = xasprintf("left (%s)", why);

	sessions_node_lost(m, n->name); /* before its tasks, as for a lost node */
	/* nothing of the node comes back: whatever it still ran is lost */
	for (size_t i = 0; i < m->ntasks; i++) {
		struct task *t = m->tasks[i];
		if (t && t->node && !task_state_is_final(t->state) && !strcmp(t->node, n->name))
			task_lost(m, t, n->name, what);
	}
	for (size_t i = 0; i < m->ntokens; i++)
		if (m->tokens[i].role == ROLE_AGENT && !strcmp(m->tokens[i].user, n->name))
			auth_revoke(m, &m->tokens[i], wall_us());
	nodes_apply_event(m, n, NODE_EV_LEAVE);
	free(what);
}

int nodes_apply_event(struct master *m, struct node *n, enum node_event ev)
{
	int next = node_transition(n->state, ev);
	bool was_live = node_state_is_live(n->state);

	if (next < 0)
		return -1;
	if (next == NODE_REMOVED) {
		core_remove_node(m, n);
		m->sched_needed = true;
		return next;
	}
	if ((enum node_state)next == n->state)
		return next; /* a heartbeat, a registration or a drain again: nothing new */
	n->state = (enum node_state)next;
	if (!node_state_is_drained(n->state)) {
		free(n->drain_reason);
		free(n->drain_by);
		n->drain_reason = n->drain_by = NULL;
		n->drain_at = 0;
	}
	core_node_bump(m, n);
	core_save_node(m, n);
	if (was_live && !node_state_is_live(n->state)) {
		sessions_node_lost(m, n->name); /* before its tasks: they end for that reason */
		node_tasks_lost(m, n);
	}
	m->sched_needed = true;
	return next;
}

/* "1.5 s", "90 s": how a timeout is said in a reason. */
static const char *format_duration_ms(uint64_t ms, char *buf, size_t len)
{
	if (ms % 1000)
		snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 " s", ms / 1000, ms % 1000);
	else
		snprintf(buf, len, "%" PRIu64 " s", ms / 1000);
	return buf;
}

void jobs_tick(struct master *m)
{
	uint64_t now = mono_ms(), wall = wall_us();

	for (size_t i = 0; i < m->nnodes; i++) {
		struct node *n = m->nodes[i];
		if (!node_state_is_live(n->state) || !n->lease_until || n->lease_until >= now)
			continue;
		if (http_polls_held(m, n->name))
			nodes_touch(m, n); /* a held work poll is a live agent */
		else
			nodes_apply_event(m, n, NODE_EV_LEASE_LAPSED);
	}
	/* A job's timeout runs from its placement, and a placed job holds
	 * resources through its tasks: the live tasks lead to every job that
	 * can time out, without walking every job ever stored. The index may
	 * change under a timeout's stops, so walk a copy. */
	size_t nlive = m->nlive;
	struct task **live = xcalloc(nlive + 1, sizeof(*live));
	if (nlive)
		memcpy(live, m->live, nlive * sizeof(*live));
	for (size_t i = 0; i < nlive; i++) {
		struct job *j = live[i]->job;
		if (job_state_is_final(j->state) || !j->spec || !j->spec->timeout_ms || !j->started_at)
			continue;
		uint64_t timeout_ms = j->spec->timeout_ms; /* the event frees the spec */
		if (wall - j->started_at >= timeout_ms * 1000 && job_event(m, j, JOB_EV_TIMEOUT)) {
			char msg[128];
			snprintf(msg, sizeof(msg), "the job ran past its timeout of %s",
				 format_duration_ms(timeout_ms, (char[32]){ 0 }, 32));
			job_set_reason(j, "timeout", msg);
			job_stop_tasks(m, j, NULL);
			core_save_job(m, j);
		}
	}
	free(live);
}

void jobs_restore_leases(struct master *m)
{
	uint64_t until = mono_ms() + m->lease_ms;

	for (size_t i = 0; i < m->nnodes; i++)
		m->nodes[i]->lease_until = until;
}

void nodes_await(struct master *m)
{
	m->started_ms = mono_ms();
	m->nawaited = 0;
	for (size_t i = 0; i < m->nnodes; i++) {
		m->nodes[i]->awaited = node_state_is_live(m->nodes[i]->state);
		m->nawaited += m->nodes[i]->awaited;
	}
}

/* ---- scheduling ---- */

/* The node-cache keys of j's yard data ("yard-HEX", docs/datasets.md), for
 * locality; NULL when it has none. Caller frees the strings and the array. */
static char **job_data_keys(const struct job *j, size_t *n)
{
	char **keys = NULL;
	size_t i;
	json_t *d;
	*n = 0;
	json_array_foreach(j->data, i, d) {
		const char *digest = json_string_value(json_object_get(d, "digest"));
		if (!digest || strncmp(digest, "sha256:", 7))
			continue;
		if (!keys)
			keys = xcalloc(json_array_size(j->data) + 1, sizeof(*keys));
		keys[(*n)++] = xasprintf("yard-%s", digest + 7);
	}
	return keys;
}

/* The lowest port of n's range that no task holding n's resources has, or 0. */
static unsigned node_free_port(struct master *m, const struct node *n)
{
	unsigned lo = n->port_lo, hi = n->port_hi, port = 0;
	unsigned char *used;

	if (!lo || hi < lo)
		return 0;
	used = xcalloc(hi - lo + 1, 1);
	for (size_t i = 0; i < n->nlive; i++) {
		const struct task *t = n->live[i];
		if (t->port >= lo && t->port <= hi)
			used[t->port - lo] = 1;
	}
	for (unsigned p = lo; p <= hi && !port; p++)
		if (!used[p - lo])
			port = p;
	free(used);
	return port;
}

static void job_start(struct master *m, struct job *j, const struct sched_start *starts,
		      size_t count, const struct sched_node *nodes, struct task **ts)
{
	if (!job_event(m, j, JOB_EV_PLACED))
		return;
	j->started_at = wall_us();
	job_set_reason(j, NULL, NULL);
	j->queue_position = 0;
	free(j->wait_msg);
	j->wait_msg = NULL;
	for (size_t s = 0; s < count; s++) {
		const struct sched_start *st = &starts[s];
		struct task *t = ts[st->task];
		if (!task_event(m, t, TASK_EV_ASSIGN))
			continue;
		set_str(&t->node, nodes[st->node].name);
		free(t->gpus);
		t->gpus = xcalloc(st->ngpus + 1, sizeof(unsigned));
		if (st->ngpus)
			memcpy(t->gpus, st->gpus, st->ngpus * sizeof(unsigned));
		t->ngpus = st->ngpus;
		t->started_at = wall_us();
		t->port = 0;
		core_index_task(m, t);
		/* after indexing: the next task of the job on this node sees this port */
		if (launch_needs_port(j->spec->framework)) {
			const struct node *n = core_node(m, t->node);
			t->port = n ? node_free_port(m, n) : 0;
		}
		core_save_task(m, t);
		node_bump(m, t->node);
	}
	core_save_job(m, j);
}

static const char *job_pool(const struct job *j)
{
	return j->spec && j->spec->pool ? j->spec->pool : "default";
}

/* The policy of a pool: its own (--policy POOL=P) or the master's. */
static const struct sched_policy_conf *pool_conf(const struct master *m, const char *pool)
{
	for (size_t i = 0; i < m->npool_policies; i++)
		if (!strcmp(m->pool_policies[i].pool, pool))
			return &m->pool_policies[i].conf;
	return &m->policy;
}

static int cmp_job_ids(const void *a, const void *b)
{
	const struct job *x = *(struct job *const *)a, *y = *(struct job *const *)b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The jobs whose current gang holds resources (starting or running), each
 * once, by id, of one pool (NULL: every pool). OUT run: room for m->nlive. */
static size_t running_jobs(const struct master *m, const char *pool, struct job **run)
{
	size_t n = 0, k = 0;
	for (size_t i = 0; i < m->nlive; i++) {
		struct job *j = m->live[i]->job;
		if ((j->state == JOB_RUNNING || j->state == JOB_STARTING) && j->spec &&
		    (!pool || !strcmp(job_pool(j), pool)))
			run[n++] = j;
	}
	sort_array(run, n, sizeof(*run), cmp_job_ids);
	for (size_t i = 0; i < n; i++)
		if (!k || run[k - 1] != run[i])
			run[k++] = run[i];
	return k;
}

/* What the current tasks of running job j hold, appended to holds (nh
 * entries used so far, OUT: updated; one per task at most); returns how
 * many it appended. */
static size_t job_holds(const struct master *m, const struct job *j, struct sched_hold *holds,
			size_t *nh)
{
	size_t first = *nh;
	for (size_t x = 0; x < j->ntasks; x++) {
		const struct task *t = j->tasks[x];
		if (!task_current(j, t) || !task_state_holds_resources(t->state) || !t->node)
			continue;
		const struct node *n = core_node(m, t->node);
		if (n)
			holds[(*nh)++] = (struct sched_hold){ .node = n->slot, .gpus = t->gpus,
							      .ngpus = t->ngpus, .cpus_milli = t->cpus_milli,
							      .memory = t->memory };
	}
	return *nh - first;
}

void jobs_preempt(struct master *m, struct job *j, const char *cause)
{
	char lost[32], at[32], msg[400];
	uint64_t grace = j->spec ? j->spec->preempt_grace_ms : 0;
	uint64_t now = wall_us(), began = j->started_at; /* placed: what the policy counts from */
	bool ckpt = j->checkpoint_at && j->checkpoint_at >= began;
	uint64_t from = ckpt ? j->checkpoint_at : began;

	for (size_t i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		if (task_current(j, t) && !task_state_is_final(t->state)) {
			t->grace_ms = grace;
			t->preempted = true;
		}
	}
	if (!job_event(m, j, JOB_EV_PREEMPT))
		return;
	job_stop_tasks(m, j, NULL);
	j->attempt++;
	j->preemptions++;
	/* whole seconds: what the reason needs */
	format_duration_ms(from && now > from ? (now - from) / 1000000 * 1000 : 0, lost, sizeof(lost));
	if (ckpt) {
		format_time_utc(j->checkpoint_at, at, sizeof(at));
		snprintf(msg, sizeof(msg), "%s; resumes from its checkpoint of %s, %s of work lost", cause, at,
			 lost);
	} else {
		snprintf(msg, sizeof(msg), "%s; lost %s of work: no checkpoint since it started", cause, lost);
	}
	job_set_reason(j, "preempted", msg);
	j->started_at = j->running_at = 0;
	job_new_attempt_tasks(m, j);
	core_save_job(m, j);
}

/* The GPUs of j's gang. */
static unsigned job_gpus(const struct job *j)
{
	unsigned n = 0;
	for (size_t r = 0; j->spec && r < j->spec->nroles; r++)
		n += j->spec->roles[r].replicas * j->spec->roles[r].gpus;
	return n;
}

/* Brings j's policy state up to now (accounting the service it got while
 * it ran, then the start or preemption seen since the last plan) and copies
 * it to *out for the plan. The first time, it is built from the task records. */
static void pjob_sync(const struct sched_policy_conf *conf, struct job *j, bool running,
		      uint64_t now_s, struct sched_pjob *out)
{
	struct sched_pjob *p = &j->pol;

	if (!j->pol_valid) {
		sched_policy_job_init(p, j->id, job_gpus(j), j->submitted_at / 1000000);
		p->attained = jobs_attained_gpu_s(j, now_s * 1000000);
		p->accounted_at = now_s;
		p->running = running;
		p->started_at = running ? j->started_at / 1000000 : 0;
		while (p->level < conf->nthresholds && p->attained >= conf->thresholds[p->level])
			p->level++;
		p->level_since = running ? p->started_at : p->submitted_at;
		j->pol_valid = true;
	} else {
		sched_policy_account(conf, p, now_s);
		if (running && !p->running)
			sched_policy_started(p, now_s);
		else if (!running && p->running)
			sched_policy_requeue(p, now_s);
	}
	p->priority = (int)j->priority;
	p->gpus = job_gpus(j);
	p->preemptible = j->spec && j->spec->preemptible;
	p->bound = j->spec ? j->spec->timeout_ms / 1000 : 0;
	/* its run counts from its placement, as its checkpoints do (a task
	 * may checkpoint before the master hears that it runs) */
	if (running && j->started_at)
		p->started_at = j->started_at / 1000000;
	p->checkpointed_at = j->checkpoint_at / 1000000;
	*out = *p;
}

/* Sets a waiting job's queue position and waiting reason. A full plan sets
 * them for every queued job; the job's cached document goes only when one
 * of them changes, so a listing after a plan that moved nothing costs no
 * rebuilds. */
void jobs_set_wait(struct master *m, struct job *j, unsigned position, const char *code,
		   const char *msg)
{
	char c[sizeof(j->wait_code)];

	snprintf(c, sizeof(c), "%s", code);
	if (j->queue_position == position && !strcmp(j->wait_code, c) && j->wait_msg &&
	    !strcmp(j->wait_msg, msg))
		return;
	j->queue_position = position;
	memcpy(j->wait_code, c, sizeof(c));
	if (!j->wait_msg || strcmp(j->wait_msg, msg))
		set_str(&j->wait_msg, msg);
	core_job_changed(m, j);
}

/* What placement sees of queued job j (spec'd): its pending current tasks,
 * OUT: *sj (its arrays owned, freed with queued_sched_job_release) and, with
 * jt (room for j->ntasks), the task of each of sj's tasks. */
static void queued_sched_job(const struct job *j, struct sched_job *sj, struct task **jt)
{
	struct sched_task *tasks = xcalloc(j->ntasks + 1, sizeof(*tasks));
	size_t k = 0;

	for (size_t x = 0; x < j->ntasks; x++) {
		struct task *t = j->tasks[x];
		if (!task_current(j, t) || t->state != TASK_PENDING)
			continue;
		tasks[k].role = t->role;
		tasks[k].index = t->index;
		tasks[k].gpus = 0;
		for (size_t r = 0; r < j->spec->nroles; r++)
			if (!strcmp(j->spec->roles[r].name, t->role))
				tasks[k].gpus = j->spec->roles[r].gpus;
		tasks[k].cpus_milli = t->cpus_milli;
		tasks[k].memory = t->memory;
		if (jt)
			jt[k] = t;
		k++;
	}
	*sj = (struct sched_job){ .id = j->id, .priority = (int)j->priority,
				  .submitted_at = j->submitted_at, .tasks = tasks, .ntasks = k,
				  .max_nodes = j->spec->max_nodes, .gpu_model = j->spec->gpu_model,
				  .gpu_memory = j->spec->gpu_memory, .pool = j->spec->pool,
				  .labels = spec_sched_labels(j->spec), .nlabels = j->spec->nlabels,
				  .image = spec_image_shown(j->spec), .wait_for_nodes = j->spec->wait_for_nodes };
	sj->data_keys = (const char *const *)job_data_keys(j, &sj->ndata_keys);
	sj->task_pools = spec_task_pools(j->spec, tasks, k);
}

static void queued_sched_job_release(struct sched_job *sj)
{
	free((void *)sj->tasks);
	free((void *)sj->labels);
	free((void *)sj->task_pools);
	for (size_t k = 0; k < sj->ndata_keys; k++)
		free((void *)sj->data_keys[k]);
	free((void *)sj->data_keys);
}

/* The world the scheduler decides on (sched/decide.h), built from the
 * master's records, and what it takes to apply the decision. */
struct world_build {
	struct sched_world w;
	struct nodeview snap;
	struct sched_node *sn;      /* snap's */
	struct sched_world_job *wj;
	struct sched_pjob *pol;
	struct job **jobs;          /* per world job */
	struct task ***jt;          /* per queued world job: the task of each of its sched tasks */
	struct sched_hold *holds;
	struct sched_pool_policy *pools;
	struct sched_team_conf *teams;
};

static void world_nodes(struct master *m, struct world_build *b)
{
	nodeview_take(m, &b->snap);
	b->sn = b->snap.sn;
	nodeview_account_use(m, b->sn, b->snap.gp);
}

/* cand: the queued jobs to decide on (the queue, or the new arrivals with
 * new_only); a full decision also sees the running jobs and the policies'
 * state. */
static void world_build(struct master *m, struct world_build *b, struct job *const *cand,
			size_t ncand, bool new_only)
{
	size_t cap = ncand + m->nlive + 1, n = 0, nh = 0;
	uint64_t now_s = wall_us() / 1000000;
	bool stopping = false;

	memset(b, 0, sizeof(*b));
	world_nodes(m, b);
	b->wj = xcalloc(cap, sizeof(*b->wj));
	b->pol = xcalloc(cap, sizeof(*b->pol));
	b->jobs = xcalloc(cap, sizeof(*b->jobs));
	b->jt = xcalloc(cap, sizeof(*b->jt));
	b->holds = xcalloc(m->nlive + 1, sizeof(*b->holds));
	for (size_t i = 0; i < ncand; i++) {
		struct job *j = cand[i];
		if (!j || j->state != JOB_QUEUED || !j->spec || j->blocked || /* control.h */
		    job_previous_attempt_live(j))
			continue;
		b->jt[n] = xcalloc(j->ntasks + 1, sizeof(struct task *));
		queued_sched_job(j, &b->wj[n].job, b->jt[n]);
		b->wj[n].team = j->team;
		if (!new_only)
			pjob_sync(pool_conf(m, job_pool(j)), j, false, now_s, &b->pol[n]);
		b->jobs[n++] = j;
	}
	if (!new_only) {
		size_t nrun = running_jobs(m, NULL, b->jobs + n);
		for (size_t k = 0; k < nrun; k++, n++) {
			struct job *j = b->jobs[n];
			struct sched_world_job *w = &b->wj[n];
			*w = (struct sched_world_job){
				.job = { .id = j->id, .priority = (int)j->priority,
					 .submitted_at = j->submitted_at, .pool = j->spec->pool },
				.team = j->team, .running = true, .preemptible = j->spec->preemptible,
				.holds = b->holds + nh };
			w->nholds = job_holds(m, j, b->holds, &nh);
			pjob_sync(pool_conf(m, job_pool(j)), j, true, now_s, &b->pol[n]);
		}
	}
	b->pools = xcalloc(m->npool_policies + 1, sizeof(*b->pools));
	for (size_t i = 0; i < m->npool_policies; i++)
		b->pools[i] = (struct sched_pool_policy){ m->pool_policies[i].pool,
							  m->pool_policies[i].conf };
	b->teams = xcalloc(m->nteams + 1, sizeof(*b->teams));
	for (size_t i = 0; i < m->nteams; i++)
		b->teams[i] = (struct sched_team_conf){ m->teams[i].team, m->teams[i].weight,
							m->teams[i].quota };
	for (size_t i = 0; i < m->nlive; i++)
		stopping |= m->live[i]->preempted;
	b->w = (struct sched_world){ .nodes = b->sn, .nnodes = m->nnodes, .jobs = b->wj,
				     .pol = b->pol, .njobs = n, .policy = &m->policy,
				     .pools = b->pools, .npools = m->npool_policies,
				     .teams = b->teams, .nteams = m->nteams, .now = now_s,
				     .stopping = stopping, .new_only = new_only };
}

static void world_release(struct master *m, struct world_build *b)
{
	for (size_t i = 0; i < b->w.njobs; i++) {
		if (!b->wj[i].running)
			queued_sched_job_release(&b->wj[i].job);
		free(b->jt[i]);
	}
	nodeview_release(&b->snap);
	free(b->wj);
	free(b->pol);
	free(b->jobs);
	free(b->jt);
	free(b->holds);
	free(b->pools);
	free(b->teams);
}

/* Applies what the scheduler decided: preemptions, starts, waits. */
static void apply_decision(struct master *m, const struct world_build *b,
			   const struct sched_decision *d)
{
	for (size_t k = 0; k < d->npreempts; k++)
		jobs_preempt(m, b->jobs[d->preempts[k].job], d->preempts[k].reason);
	for (size_t s = 0; s < d->nstarts;) {
		size_t e = s, job = d->starts[s].job;
		while (e < d->nstarts && d->starts[e].job == job)
			e++;
		job_start(m, b->jobs[job], d->starts + s, e - s, b->sn, b->jt[job]);
		s = e;
	}
	for (size_t k = 0; k < d->nwaits; k++)
		jobs_set_wait(m, b->jobs[d->waits[k].job], d->waits[k].position, d->waits[k].code,
			      d->waits[k].message);
}

/* A full decision looks at the whole queue; between full decisions, jobs
 * submitted since the last one are placed against the free capacity alone
 * (new_only, sched/decide.h), unless the scheduler says a policy of theirs
 * needs the full queue. Anything that frees or adds capacity sets
 * sched_needed. Their queue positions wait for the next full decision. */
void jobs_schedule(struct master *m)
{
	struct world_build b;
	struct sched_decision d = { 0 };
	bool full = m->sched_needed, elastic_full = false;

	m->sched_passes++;
	m->sched_needed = false;
	experiments_sweep(m);
	control_sweep(m, full);
	world_build(m, &b, full ? m->queue : m->fresh, full ? m->nqueue : m->nfresh, !full);
	if (!full && !sched_new_only_ok(&b.w)) {
		world_release(m, &b);
		full = true;
		world_build(m, &b, m->queue, m->nqueue, false);
	}
	sched_decide(&b.w, &d);
	apply_decision(m, &b, &d);
	if (full)
		elastic_after_decision(m, &b.w, &d, b.jobs);
	if (!full && d.nwaits)
		m->positions_stale = true;
	/* new arrivals waiting in a provisioned pool: a full decision next,
	 * which may ask for nodes for them (elastic.h) */
	for (size_t k = 0; !full && k < d.nwaits && !elastic_full; k++)
		elastic_full = elastic_pool_provisioned(m, b.wj[d.waits[k].job].job.pool);
	if (full) {
		m->positions_stale = false;
		m->last_full_plan_ms = mono_ms();
	}
	sched_decision_release(&d);
	world_release(m, &b);
	/* a decision can make nothing new schedulable: do not loop */
	m->sched_needed = elastic_full;
	m->nfresh = 0;
}

void jobs_refresh_positions(struct master *m)
{
	if (!m->positions_stale)
		return;
	m->sched_needed = true;
	jobs_schedule(m);
}

/* ---- start estimates ---- */

/* Start estimates of the queued jobs q[0..n) (in queue order) of one
 * pool, into out (the same indexes; entries of other pools untouched). */
static void pool_start_estimates(struct master *m, const char *pool, const struct sched_node *sn,
				 struct job *const *q, size_t n, uint64_t now,
				 struct job_start_estimate *out)
{
	struct job **run = xcalloc(m->nlive + 1, sizeof(*run));
	struct sched_hold *holds = xcalloc(m->nlive + 1, sizeof(*holds));
	struct sched_est_running *er = xcalloc(m->nlive + 1, sizeof(*er));
	struct sched_est_waiting *ew = xcalloc(n + 1, sizeof(*ew));
	struct sched_job *sj = xcalloc(n + 1, sizeof(*sj));
	struct sched_estimate *est = xcalloc(n + 1, sizeof(*est));
	size_t *idx = xcalloc(n + 1, sizeof(*idx));
	size_t nrun, nh = 0, nw = 0;

	nrun = running_jobs(m, pool, run);
	for (size_t k = 0; k < nrun; k++) {
		const struct job *j = run[k];
		const struct sched_hold *first = holds + nh;
		size_t nholds = job_holds(m, j, holds, &nh);
		er[k] = (struct sched_est_running){
			.id = j->id, .holds = first, .nholds = nholds,
			.end = j->spec->timeout_ms && j->started_at
				       ? j->started_at + j->spec->timeout_ms * 1000
				       : 0 };
	}
	for (size_t i = 0; i < n; i++)
		if (q[i]->state == JOB_QUEUED && q[i]->spec && !strcmp(job_pool(q[i]), pool)) {
			if (nw == JOBS_ESTIMATE_WORK / SCHED_EST_PLACE_WORK) {
				/* each job costs a placement at least: the rest would not be reached */
				struct sched_estimate past = { .code = SCHED_EST_NOT_ESTIMATED };
				sched_estimate_reason(&past, out[i].reason, sizeof(out[i].reason));
				continue;
			}
			queued_sched_job(q[i], &sj[nw], NULL);
			ew[nw] = (struct sched_est_waiting){ .job = &sj[nw],
							     .bound = q[i]->spec->timeout_ms * 1000 };
			idx[nw++] = i;
		}
	sched_estimate_starts(sn, m->nnodes, er, nrun, ew, nw, now, JOBS_ESTIMATE_WORK, est);
	for (size_t w = 0; w < nw; w++) {
		struct job_start_estimate *o = &out[idx[w]];
		o->at_us = est[w].code == SCHED_EST_OK ? est[w].start : 0;
		sched_estimate_reason(&est[w], o->reason, sizeof(o->reason));
		queued_sched_job_release(&sj[w]);
	}
	free(run);
	free(holds);
	free(er);
	free(ew);
	free(sj);
	free(est);
	free(idx);
}

void jobs_start_estimates(struct master *m, struct job *const *q, size_t n,
			  struct job_start_estimate *out)
{
	struct nodeview snap;
	const char **pools = xcalloc(n + 1, sizeof(*pools));
	size_t npools = 0;
	uint64_t now = wall_us();

	for (size_t i = 0; i < n; i++) {
		out[i].at_us = 0;
		snprintf(out[i].reason, sizeof(out[i].reason), "%s",
			 "not_estimated: the job has no tasks to place yet");
	}
	nodeview_take(m, &snap);
	nodeview_account_use(m, snap.sn, snap.gp);
	for (size_t i = 0; i < n; i++) {
		const char *p = job_pool(q[i]);
		size_t k;
		for (k = 0; k < npools && strcmp(pools[k], p); k++)
			;
		if (k == npools)
			pools[npools++] = p;
	}
	for (size_t k = 0; k < npools; k++)
		pool_start_estimates(m, pools[k], snap.sn, q, n, now, out);
	nodeview_release(&snap);
	free(pools);
}

/* ---- nodes ---- */

void nodes_touch(struct master *m, struct node *n)
{
	n->lease_until = mono_ms() + m->lease_ms;
	n->last_seen = wall_us();
	if (n->awaited) {
		/* an operator (and bench/restart.py) can see when the agents
		 * of a restarted master are all back */
		n->awaited = false;
		m->nawaited--;
		fprintf(stderr, "yard master: node %s is back after %" PRIu64 " ms; %zu to come\n", n->name,
			mono_ms() - m->started_ms, m->nawaited);
	}
}

static bool id_listed(const json_t *arr, uint64_t id)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) {
		if (json_is_integer(v) && (uint64_t)json_integer_value(v) == id)
			return true;
		if (json_is_object(v) && nodereport_u64(v, "id") == id)
			return true;
	}
	return false;
}

int nodes_register(struct master *m, const json_t *body, struct node **out, char **token_out,
		   struct errbuf *eb)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	const char *addr = json_string_value(json_object_get(body, "addr"));
	const json_t *gpus = json_object_get(body, "gpus"), *tasks = json_object_get(body, "tasks");
	const json_t *cpus = json_object_get(body, "cpus");
	const char *iface = json_string_value(json_object_get(body, "iface"));
	const json_t *pool = json_object_get(body, "pool"), *labels = json_object_get(body, "labels");
	const json_t *engine = json_object_get(body, "engine");
	const json_t *ephemeral = json_object_get(body, "ephemeral"), *slurm_job = json_object_get(body, "slurm_job");
	json_int_t port_lo = 30000, port_hi = 32000;
	unsigned runtimes;
	struct node *n;
	int ret;

	*out = NULL;
	*token_out = NULL;
	if ((ret = nodereport_check_registration(body, &runtimes, &port_lo, &port_hi, eb)))
		return ret;
	n = core_node(m, name);
	if (!n) {
		n = xcalloc(1, sizeof(*n));
		n->name = xstrdup(name);
		n->state = NODE_LOST; /* not heard from yet: the registration makes it ready */
		core_add_node(m, n);
	}
	set_str(&n->addr, addr);
	set_str(&n->iface, iface);
	n->port_lo = (unsigned)port_lo;
	n->port_hi = (unsigned)port_hi;
	if (json_is_number(cpus))
		n->cpus_milli = (uint64_t)(json_number_value(cpus) * 1000.0 + 0.5);
	if (!n->cpus_milli)
		n->cpus_milli = 1000;
	n->memory = nodereport_u64(body, "memory");
	nodereport_set_gpus(n, gpus);
	set_str(&n->pool, json_is_string(pool) ? json_string_value(pool) : "default");
	core_node_set_labels(n, labels);
	n->runtimes = runtimes;
	m->nodes_gen++; /* what admission reads of it may have changed */
	set_str(&n->engine, json_string_value(engine));
	n->ephemeral = json_is_true(ephemeral);
	set_str(&n->slurm_job, json_string_value(slurm_job));
	nodereport_set_cache(n, json_object_get(body, "cache"));
	nodes_apply_event(m, n, NODE_EV_REGISTER);
	core_node_bump(m, n);
	nodes_touch(m, n);
	core_save_node(m, n);
	/* tasks we think run there but the agent has never heard of are lost */
	size_t nlive;
	struct task **live = node_live_copy(n, &nlive);
	for (size_t k = 0; k < nlive; k++) {
		struct task *t = live[k];
		if ((t->state == TASK_RUNNING || t->state == TASK_STOPPING) && !id_listed(tasks, t->id))
			task_lost(m, t, n->name, NULL);
	}
	free(live);
	elastic_node_registered(m, n);
	*token_out = auth_create_token(m, ROLE_AGENT, n->name, NULL, 0);
	m->sched_needed = true;
	*out = n;
	return 0;
}

static void task_exited(struct master *m, struct task *t, const json_t *r, bool start_failed)
{
	const json_t *jexit = json_object_get(r, "exit_code"), *jsig = json_object_get(r, "signal");
	const char *message = json_string_value(json_object_get(r, "message"));
	bool oom = json_is_true(json_object_get(r, "oom_killed"));
	bool has_exit = json_is_integer(jexit), has_sig = json_is_integer(jsig) && json_integer_value(jsig) > 0;
	int code = has_exit ? (int)json_integer_value(jexit) : 0;
	int sig = has_sig ? (int)json_integer_value(jsig) : 0;
	bool ok = !start_failed && !oom && !has_sig && has_exit && code == 0;
	char msg[600];
	const char *rcode;

	if (!task_event(m, t, ok ? TASK_EV_EXITED_OK : TASK_EV_EXITED_FAIL))
		return;
	usage_task_ended(t, r);
	t->has_exit = has_exit;
	t->exit_code = code;
	t->has_signal = has_sig;
	t->signal = sig;
	if (start_failed) {
		rcode = "start_failed";
		snprintf(msg, sizeof(msg), "%s/%u failed to start: %s", t->role, t->index,
			 message ? message : "unknown error");
	} else if (oom) {
		rcode = "oom_killed";
		jobs_oom_message(t, msg, sizeof(msg));
	} else if (has_sig) {
		rcode = "signal";
		snprintf(msg, sizeof(msg), "%s/%u was killed by signal %d", t->role, t->index, sig);
	} else if (!ok && !has_exit) {
		/* no status at all: the agent lost the task (its shim died without a verdict) */
		rcode = "task_lost";
		snprintf(msg, sizeof(msg), "%s/%u ended without an exit status: %s", t->role, t->index,
			 message ? message : "unknown");
	} else if (!ok) {
		rcode = "task_failed";
		snprintf(msg, sizeof(msg), "%s/%u exited with status %d", t->role, t->index, code);
	} else {
		rcode = NULL;
	}
	if (t->state == TASK_FAILED) {
		set_str(&t->reason_code, rcode);
		set_str(&t->reason_msg, msg);
	}
	core_save_task(m, t);
	node_bump(m, t->node);
	if (t->state == TASK_FAILED)
		job_task_failed(m, t->job, t, rcode, msg, has_exit, has_exit ? code : (has_sig ? 128 + sig : 1));
	else
		job_check_progress(m, t->job);
}

/* A task its agent prepares (stages its data, builds its image): the job,
 * still starting, says how far in its reason. Staging is progress (in
 * memory only: the next report repeats it); a build is a phase of the
 * job's history, noted once per attempt. */
static void task_progress(struct master *m, struct task *t, const char *state, const json_t *r)
{
	struct job *j = t->job;
	char a[32], b[32], msg[200];

	if (j->state != JOB_STARTING || t->state != TASK_ASSIGNED)
		return;
	if (!strcmp(state, "building")) {
		const char *image = json_string_value(json_object_get(r, "image"));
		snprintf(msg, sizeof(msg), "%s/%u: building image %.120s", t->role, t->index,
			 image ? image : "");
		job_note_phase(j, "building", msg);
		core_save_job(m, j);
	} else {
		format_size(nodereport_u64(r, "staged"), a, sizeof(a));
		format_size(nodereport_u64(r, "stage_total"), b, sizeof(b));
		snprintf(msg, sizeof(msg), "staging: %s of %s", a, b);
	}
	set_str(&j->reason_code, state);
	set_str(&j->reason_msg, msg);
}

/* Takes a status report's "checkpoint_at" of task t (wall us, 0: none
 * reported): the latest of t and of its job, never later than now (an
 * agent's clock ahead of ours). */
static void task_checkpointed(struct master *m, struct task *t, uint64_t at)
{
	uint64_t now = wall_us();

	at = at < now ? at : now;
	if (at > t->checkpoint_at)
		t->checkpoint_at = at;
	if (at > t->job->checkpoint_at) {
		t->job->checkpoint_at = at;
		core_job_changed(m, t->job); /* its document shows it */
	}
}

int nodes_status(struct master *m, struct node *n, const json_t *body, json_t *reply,
		 struct errbuf *eb)
{
	const json_t *tasks = json_object_get(body, "tasks"), *left = json_object_get(body, "left");
	size_t i;
	json_t *r;

	if (!json_is_object(body))
		return error(eb, YERR(BAD_REQUEST), "request body: expected a JSON object");
	if (tasks && !json_is_array(tasks))
		return error_field(eb, YERR(BAD_REQUEST), "tasks", "tasks: expected an array");
	if (left && !json_is_null(left) && !nodereport_printable(left, 200))
		return error_field(eb, YERR(BAD_REQUEST), "left",
				   "left: expected why the agent leaves, 1 to 200 printable characters");
	if (json_is_string(left)) {
		/* its agent leaves for good (an ephemeral one): the node ends */
		elastic_node_left(m, n, json_string_value(left));
		nodes_leave(m, n, json_string_value(left));
		return 0;
	}
	nodes_touch(m, n);
	nodereport_set_cache(n, json_object_get(body, "cache"));
	if (nodereport_set_util(n, json_object_get(body, "gpus")))
		gpuidle_node_sampled(m, n);
	json_array_foreach(json_object_get(body, "execs"), i, r)
		execs_reported(m, n, r);
	json_array_foreach(tasks, i, r) {
		struct task *t = core_task(m, nodereport_u64(r, "id"));
		const char *state = json_string_value(json_object_get(r, "state"));


		if (!t || !state || !t->node || strcmp(t->node, n->name))
			continue;
		/* an end is taken once its logs are held: its agent then drops them */
		int settled = strcmp(state, "exited") && strcmp(state, "start_failed")
				      ? 1 : logs_settle(m, t, json_object_get(r, "log_size"), reply, eb);
		if (settled < 0)
			return YERR(IO);
		if (!settled)
			continue;
		task_checkpointed(m, t, nodereport_u64(r, "checkpoint_at"));
		if (task_state_is_final(t->state)) {
			/* the agent runs something we consider done: make it stop */
			if (!strcmp(state, "running"))
				core_node_bump(m, n);
			continue;
		}
		if (!strcmp(state, "running")) {
			if (json_object_get(r, "image"))
				images_reported(m, t, json_object_get(r, "image"));
			if (task_event(m, t, TASK_EV_STARTED)) {
				core_save_task(m, t);
				job_check_progress(m, t->job);
			}
		} else if (!strcmp(state, "exited")) {
			task_exited(m, t, r, false);
		} else if (!strcmp(state, "start_failed")) {
			task_exited(m, t, r, true);
		} else if (!strcmp(state, "staging") || !strcmp(state, "building")) {
			task_progress(m, t, state, r);
		}
	}
	return 0;
}

int nodes_drain(struct master *m, struct node *n, const char *reason, const char *by)
{
	if (nodes_apply_event(m, n, NODE_EV_DRAIN) < 0)
		return YERR(CONFLICT); /* only a removed node, which no caller holds */
	set_str(&n->drain_reason, reason && *reason ? reason : NULL);
	set_str(&n->drain_by, by);
	n->drain_at = wall_us();
	core_save_node(m, n);
	return 0;
}

int nodes_resume(struct master *m, struct node *n, struct errbuf *eb)
{
	if (nodes_apply_event(m, n, NODE_EV_RESUME) < 0)
		return error(eb, YERR(CONFLICT), "node '%s' is not drained", n->name);
	return 0;
}

int nodes_remove(struct master *m, struct node *n, struct errbuf *eb)
{
	size_t held = 0;

	for (size_t i = 0; i < m->nlive; i++)
		held += m->live[i]->node && !strcmp(m->live[i]->node, n->name);
	if (held)
		return error(eb, YERR(CONFLICT), "node '%s' still has %zu live task%s; cancel %s or "
			     "wait for %s to end first", n->name, held, held == 1 ? "" : "s",
			     held == 1 ? "it" : "them", held == 1 ? "it" : "them");
	if (node_transition(n->state, NODE_EV_REMOVE) < 0)
		return error(eb, YERR(CONFLICT), "node '%s' is %s: its agent holds a lease and would "
			     "register it again; only a lost node can be removed (stop its agent, "
			     "or drain it to keep jobs off it)", n->name, node_liveness_name(n->state));
	/* its agent tokens go with it: an agent that comes back is told 401 and
	 * registers anew with the join token, as a new node */
	for (size_t i = 0; i < m->ntokens; i++)
		if (m->tokens[i].role == ROLE_AGENT && !strcmp(m->tokens[i].user, n->name))
			auth_revoke(m, &m->tokens[i], wall_us());
	nodes_apply_event(m, n, NODE_EV_REMOVE);
	return 0;
}
