/* The API documents of jobs, nodes and a node's desired state (jobdocs.h),
 * built from the master's model. */
#include "base/compat.h"
#include "master/jobdocs.h"

#include <ctype.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec_image.h"
#include "master/control.h"
#include "launch/launch.h"
#include "master/auth.h"
#include "master/elastic.h"
#include "master/execs.h"
#include "master/interactive.h"
#include "master/jobs.h"
#include "master/logs.h"
#include "master/sessions.h"
#include "master/usage.h"
#include "master/visibility.h"

static json_t *reason_json(const char *code, const char *msg)
{
	if (!code)
		return json_null();
	return json_pack("{s:s, s:s}", "code", code, "message", msg ? msg : "");
}

static json_t *time_json(uint64_t us) { return us ? json_integer((json_int_t)us) : json_null(); }

static json_t *gpus_json(const unsigned *g, unsigned n)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < n; i++)
		json_array_append_new(a, json_integer(g[i]));
	return a;
}


json_t *jobs_ahead_json(const struct master *m, const struct job *j)
{
	uint64_t ids[JOBS_AHEAD_SHOWN] = { 0 };
	unsigned pos = j->state == JOB_QUEUED ? j->queue_position : 0;
	json_t *ahead = json_array();

	/* one pass over the queue: slot k holds the job at position pos-1-k */
	for (size_t i = 0; pos > 1 && i < m->nqueue; i++) {
		const struct job *q = m->queue[i];
		if (q && q->state == JOB_QUEUED && q->queue_position && q->queue_position < pos &&
		    pos - q->queue_position <= JOBS_AHEAD_SHOWN)
			ids[pos - q->queue_position - 1] = q->id;
	}
	for (size_t k = 0; k < JOBS_AHEAD_SHOWN; k++)
		if (ids[k])
			json_array_append_new(ahead, json_integer((json_int_t)ids[k]));
	return ahead;
}

/* Why j is in its state: held, waiting, or its end's reason. */
static json_t *job_reason_json(const struct job *j)
{
	if (j->state == JOB_QUEUED && j->held_by) {
		char held[160];
		control_held_reason(j, held, sizeof(held));
		return reason_json("held", held);
	}
	if (j->state == JOB_QUEUED && (j->blocked || (j->queue_position && !j->reason_code)))
		return reason_json(j->wait_code, j->wait_msg);
	return reason_json(j->reason_code, j->reason_msg);
}

static const char *priority_name(const struct job *j)
{
	return j->priority == PRIO_HIGH ? "high" : j->priority == PRIO_LOW ? "low" : "normal";
}

/* Reads once what j's spec asks for: GPUs (replicas x gpus over its
 * roles) and whether it is interactive; from its parsed spec while it has
 * one, else from its text. */
static void job_asked(struct job *j)
{
	uint64_t gpus = 0;

	if (j->asked_known)
		return;
	if (j->spec) {
		for (size_t i = 0; i < j->spec->nroles; i++)
			gpus += (uint64_t)j->spec->roles[i].replicas * j->spec->roles[i].gpus;
		j->asked_interactive = j->spec->interactive;
	} else {
		json_t *spec = json_loads(j->spec_text, 0, NULL), *r;
		const char *role;
		json_object_foreach(json_object_get(spec, "tasks"), role, r)
			gpus += (uint64_t)json_integer_value(json_object_get(r, "replicas")) *
				(uint64_t)json_integer_value(json_object_get(r, "gpus"));
		j->asked_interactive = json_is_object(json_object_get(spec, "interactive"));
		json_decref(spec);
	}
	j->asked_gpus = gpus;
	j->asked_known = true;
}

json_t *jobs_job_summary_json(struct job *j)
{
	job_asked(j);
	return json_pack("{s:I, s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:b}", "id", (json_int_t)j->id,
			 "name", j->name, "user", j->user, "state", job_state_name(j->state), "reason",
			 job_reason_json(j), "submitted_at", time_json(j->submitted_at), "task_count",
			 (json_int_t)j->ntasks, "gpus", (json_int_t)j->asked_gpus, "interactive",
			 j->asked_interactive);
}

json_t *jobs_job_json(struct master *m, const struct job *j, bool whole)
{
	json_t *d = json_object(), *tasks = json_array(), *spec;

	json_object_set_new(d, "id", json_integer((json_int_t)j->id));
	json_object_set_new(d, "name", json_string(j->name));
	json_object_set_new(d, "user", json_string(j->user));
	json_object_set_new(d, "team", j->team ? json_string(j->team) : json_null());
	json_object_set_new(d, "state", json_string(job_state_name(j->state)));
	json_object_set_new(d, "reason", job_reason_json(j));
	json_object_set_new(d, "exit_code", j->has_exit ? json_integer(j->exit_code) : json_null());
	json_object_set_new(d, "attempt", json_integer(j->attempt));
	json_object_set_new(d, "preemptions", json_integer(j->preemptions));
	json_object_set_new(d, "attained_gpu_seconds",
			    json_integer((json_int_t)jobs_attained_gpu_s(j, wall_us())));
	json_object_set_new(d, "priority", json_string(priority_name(j)));
	json_object_set_new(d, "submitted_at", time_json(j->submitted_at));
	json_object_set_new(d, "started_at", time_json(j->started_at));
	json_object_set_new(d, "running_at", time_json(j->running_at));
	json_object_set_new(d, "finished_at", time_json(j->finished_at));
	json_object_set_new(d, "code", j->code ? json_string(j->code) : json_null());
	json_object_set_new(d, "checkpoint", j->checkpoint ? json_string(j->checkpoint) : json_null());
	json_object_set_new(d, "data", j->data ? json_deep_copy(j->data) : json_array());
	json_object_set_new(d, "checkpoint_at", time_json(j->checkpoint_at));
	if (json_object_get(j->image_built, "how")) /* images.h */
		json_object_set_new(d, "image_built", json_pack("{s:O, s:O, s:O, s:b}", "tag",
				    json_object_get(j->image_built, "tag"), "size",
				    json_object_get(j->image_built, "size"), "how",
				    json_object_get(j->image_built, "how"), "stored",
				    json_is_string(json_object_get(j->image_built, "stored"))));
	json_object_set_new(d, "queue_position",
			    j->state == JOB_QUEUED && j->queue_position ? json_integer(j->queue_position)
									: json_null());
	if (j->experiment) {
		json_object_set_new(d, "experiment", json_integer((json_int_t)j->experiment));
		json_object_set_new(d, "trial", json_integer(j->trial));
	}

	spec = json_loads(j->spec_text, 0, NULL);
	json_object_set_new(d, "spec", spec ? spec : json_null());
	if (j->spec && j->spec->interactive) {
		/* its sessions, and since when it has had none (interactive.h) */
		json_object_set_new(d, "sessions", json_integer(j->sessions));
		json_object_set_new(d, "idle_since", time_json(interactive_idle_since(m, j)));
	}
	for (size_t i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		json_t *td = json_object();
		json_object_set_new(td, "id", json_integer((json_int_t)t->id));
		json_object_set_new(td, "role", json_string(t->role));
		json_object_set_new(td, "index", json_integer(t->index));
		json_object_set_new(td, "attempt", json_integer(t->attempt));
		json_object_set_new(td, "state", json_string(task_state_name(t->state)));
		json_object_set_new(td, "node", t->node ? json_string(t->node) : json_null());
		json_object_set_new(td, "gpus", gpus_json(t->gpus, t->ngpus));
		json_object_set_new(td, "port", t->port ? json_integer(t->port) : json_null());
		json_object_set_new(td, "exit_code", t->has_exit ? json_integer(t->exit_code) : json_null());
		json_object_set_new(td, "signal", t->has_signal ? json_integer(t->signal) : json_null());
		json_object_set_new(td, "reason", reason_json(t->reason_code, t->reason_msg));
		json_object_set_new(td, "started_at", time_json(t->started_at));
		json_object_set_new(td, "finished_at", time_json(t->finished_at));
		json_object_set_new(td, "log_size",
				    json_pack("{s:I, s:I}", "stdout",
					      (json_int_t)logs_size(m, t, LOG_STDOUT), "stderr",
					      (json_int_t)logs_size(m, t, LOG_STDERR)));
		if (whole)
			json_object_set_new(td, "usage", usage_task_json(t));
		json_array_append_new(tasks, td);
	}
	json_object_set_new(d, "tasks", tasks);
	if (!whole)
		visibility_redact_job(d);
	return d;
}

/* Whether j's document reads the clock: a task that holds GPUs and has not
 * finished adds to attained_gpu_seconds as time goes by. */
static bool job_doc_reads_clock(const struct job *j)
{
	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *t = j->tasks[i];
		if (t->started_at && t->ngpus && !t->finished_at)
			return true;
	}
	return false;
}

static char *job_doc_dump(struct master *m, const struct job *j, bool whole, size_t *len)
{
	json_t *d = jobs_job_json(m, j, whole);
	char *text = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(15));

	json_decref(d);
	*len = strlen(text);
	return text;
}

bool jobs_job_append(struct master *m, struct job *j, bool whole, struct strbuf *out)
{
	size_t len;
	char *text;

	if (j->doc[whole]) {
#ifdef __SANITIZE_ADDRESS__
		/* sanitizer builds (the e2e suite's) check that every change
		 * that shows dropped the cached text */
		text = job_doc_dump(m, j, whole, &len);
		if (len != j->doc_len[whole] || memcmp(text, j->doc[whole], len)) {
			fprintf(stderr, "yard master: job %" PRIu64 ": cached document is stale:\n"
				"cached %s\nfresh  %s\n", j->id, j->doc[whole], text);
			abort();
		}
		free(text);
#endif
		strbuf_add(out, j->doc[whole], j->doc_len[whole]);
		return true;
	}
	text = job_doc_dump(m, j, whole, &len);
	strbuf_add(out, text, len);
	if (job_doc_reads_clock(j)) {
		free(text);
		return false;
	}
	j->doc[whole] = text;
	j->doc_len[whole] = len;
	return true;
}

void jobs_oom_message(const struct task *t, char *buf, size_t len)
{
	char size[32];

	if (!t->memory) {
		snprintf(buf, len, "%s/%u ran out of memory: it had no limit of its own "
			 "(tasks.%s.memory), so its node's memory ran out", t->role, t->index, t->role);
		return;
	}
	format_size(t->memory, size, sizeof(size));
	/* "2.0GiB" -> "2.0 GiB" */
	size_t n = strcspn(size, "BKMGTP");
	snprintf(buf, len, "%s/%u ran out of memory: the task's limit of %.*s %s (tasks.%s.memory) "
		 "was reached", t->role, t->index, (int)n, size, size + n, t->role);
}

json_t *jobs_node_json(struct master *m, const struct node *n)
{
	json_t *gpus = json_array(), *doc;
	uint64_t cpus = n->cpus_milli, mem = n->memory;
	unsigned free_gpus = 0;

	for (size_t g = 0; g < n->ngpus; g++) {
		json_t *job = json_null();
		/* the node's live list holds exactly its tasks that hold resources */
		for (size_t i = 0; i < n->nlive && json_is_null(job); i++) {
			const struct task *t = n->live[i];
			for (unsigned k = 0; k < t->ngpus; k++)
				if (t->gpus[k] == n->gpus[g].index)
					job = json_integer((json_int_t)t->job->id);
		}
		if (json_is_null(job))
			free_gpus++;
		json_array_append_new(gpus, json_pack("{s:i, s:o, s:I, s:o, s:o, s:i, s:o}", "index",
						      (int)n->gpus[g].index, "model",
						      n->gpus[g].model ? json_string(n->gpus[g].model) : json_null(),
						      "memory", (json_int_t)n->gpus[g].memory, "uuid",
						      n->gpus[g].uuid ? json_string(n->gpus[g].uuid) : json_null(),
						      "job", job, "island", (int)n->gpus[g].island, "util",
						      n->gpus[g].has_util ? json_integer(n->gpus[g].util)
									  : json_null()));
	}
	for (size_t i = 0; i < n->nlive; i++) {
		const struct task *t = n->live[i];
		cpus -= t->cpus_milli < cpus ? t->cpus_milli : cpus;
		mem -= t->memory < mem ? t->memory : mem;
	}
	doc = json_pack("{s:s, s:s, s:b, s:o, s:o, s:o, s:[i,i], s:f, s:I, s:o, s:{s:i, s:I, s:I}, "
			 "s:I, s:s, s:o, s:o, s:o}",
			 "name", n->name, "state", node_liveness_name(n->state), "drained",
			 node_state_is_drained(n->state), "drain",
			 node_state_is_drained(n->state)
				 ? json_pack("{s:o, s:o, s:I}", "reason",
					     n->drain_reason ? json_string(n->drain_reason) : json_null(),
					     "by", n->drain_by ? json_string(n->drain_by) : json_null(),
					     "at", (json_int_t)n->drain_at)
				 : json_null(),
			 "addr",
			 n->addr ? json_string(n->addr) : json_null(), "iface",
			 n->iface ? json_string(n->iface) : json_null(), "ports", (int)n->port_lo,
			 (int)n->port_hi, "cpus", n->cpus_milli / 1000.0,
			 "memory", (json_int_t)n->memory, "gpus", gpus, "free", "gpus", (int)free_gpus,
			 "cpus_milli", (json_int_t)cpus, "memory", (json_int_t)mem, "last_seen",
			 (json_int_t)n->last_seen, "pool", n->pool ? n->pool : "default", "labels",
			 core_node_labels_json(n), "runtimes", core_node_runtimes_json(n), "engine",
			 n->engine ? json_string(n->engine) : json_null());
	/* elastic pools (docs/elastic.md): whether its agent is ephemeral, the
	 * Slurm job it runs in, and the request of the provisioner that made it */
	json_object_set_new(doc, "ephemeral", json_boolean(n->ephemeral));
	json_object_set_new(doc, "slurm_job", n->slurm_job ? json_string(n->slurm_job) : json_null());
	json_object_set_new(doc, "provisioned", elastic_node_json(m, n));
	return doc;
}

static char *param_string(const json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
}

static json_t *task_env(const struct task *t, const struct job *j)
{
	json_t *env = json_object();
	struct strbuf gl = STRBUF_INIT;
	char buf[32];
	const char *k;
	json_t *v;

	snprintf(buf, sizeof(buf), "%" PRIu64, j->id);
	json_object_set_new(env, "YARD_JOB_ID", json_string(buf));
	json_object_set_new(env, "YARD_JOB_NAME", json_string(j->name));
	json_object_set_new(env, "YARD_ROLE", json_string(t->role));
	snprintf(buf, sizeof(buf), "%u", t->index);
	json_object_set_new(env, "YARD_TASK_INDEX", json_string(buf));
	json_object_set_new(env, "YARD_NODE", json_string(t->node ? t->node : ""));
	for (unsigned i = 0; i < t->ngpus; i++)
		strbuf_addf(&gl, "%s%u", i ? "," : "", t->gpus[i]);
	json_object_set_new(env, "CUDA_VISIBLE_DEVICES", json_string(gl.buf));
	json_object_set_new(env, "NVIDIA_VISIBLE_DEVICES", json_string(t->ngpus ? gl.buf : "void"));
	json_object_set_new(env, "YARD_GPUS", json_string(gl.buf));
	snprintf(buf, sizeof(buf), "%u", t->attempt);
	json_object_set_new(env, "YARD_RESTART_COUNT", json_string(buf));
	if (t->port) { /* the port of its node reserved for it (its framework's) */
		snprintf(buf, sizeof(buf), "%u", t->port);
		json_object_set_new(env, "YARD_PORT", json_string(buf));
	}
	if (j->spec) {
		char *p = json_dumps(j->spec->params, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
		json_object_set_new(env, "YARD_PARAMS", json_string(p ? p : "{}"));
		free(p);
		json_object_foreach(j->spec->params, k, v) {
			struct strbuf name = STRBUF_INIT;
			char *val = param_string(v);
			strbuf_addstr(&name, "YARD_PARAM_");
			for (const char *c = k; *c; c++)
				strbuf_addch(&name, isalnum((unsigned char)*c) ? toupper((unsigned char)*c) : '_');
			json_object_set_new(env, name.buf, json_string(val ? val : ""));
			free(val);
			strbuf_release(&name);
		}
		json_object_foreach(j->spec->env, k, v) {
			char *val = param_string(v);
			json_object_set_new(env, k, json_string(val ? val : ""));
			free(val);
		}
	}
	strbuf_release(&gl);
	return env;
}

/* Whether t is the first task of its attempt: its node's checkpoint dir is
 * the one handed on to the job's restarts. */
static bool task_is_rank0(const struct job *j, const struct task *t)
{
	for (size_t i = 0; i < j->ntasks; i++)
		if (j->tasks[i]->attempt == t->attempt)
			return j->tasks[i] == t;
	return false;
}

/* Task t's framework argv and environment: the launcher sees every task of
 * t's attempt in rank order (the order they were created in) and their nodes. */
static int task_launch(struct master *m, const struct task *t, char ***argv, json_t *env,
		       struct errbuf *eb)
{
	const struct job *j = t->job;
	struct launch_task *lt = xcalloc(j->ntasks + 1, sizeof(*lt));
	struct launch_node *ln = xcalloc(j->ntasks + 1, sizeof(*ln));
	size_t nt = 0, nn = 0, me = 0;
	int ret;

	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *o = j->tasks[i];
		const char *name = o->node ? o->node : "";
		size_t k;
		if (o->attempt != t->attempt)
			continue;
		for (k = 0; k < nn && strcmp(ln[k].name, name); k++)
			;
		if (k == nn) {
			const struct node *node = core_node(m, name);
			ln[nn].name = name;
			ln[nn].addr = node ? node->addr : NULL;
			ln[nn].iface = node ? node->iface : NULL;
			nn++;
		}
		if (o == t)
			me = nt;
		lt[nt++] = (struct launch_task){ .role = o->role, .index = o->index, .node = k,
						 .gpus = o->gpus, .ngpus = o->ngpus, .port = o->port };
	}
	struct launch_job lj = { .framework = j->spec->framework, .nodes = ln, .nnodes = nn,
				 .tasks = lt, .ntasks = nt, .job_id = j->id };
	ret = launch_task(&lj, me, argv, env, eb);
	free(lt);
	free(ln);
	return ret;
}

static int cmp_task_ids(const void *a, const void *b)
{
	const struct task *x = *(struct task *const *)a, *y = *(struct task *const *)b;
	return (x->id > y->id) - (x->id < y->id);
}

json_t *jobs_work_json(struct master *m, const struct node *n)
{
	json_t *tasks = json_array();

	/* the tasks that hold resources are exactly those a node must run or
	 * stop, in the order they took them */
	struct task **live = xcalloc(n->nlive + 1, sizeof(*live));
	if (n->nlive)
		memcpy(live, n->live, n->nlive * sizeof(*live));
	sort_array(live, n->nlive, sizeof(*live), cmp_task_ids);
	for (size_t i = 0; i < n->nlive; i++) {
		const struct task *t = live[i];
		const struct job *j;
		json_t *argv = json_array(), *td;

		j = t->job;
		json_t *env = task_env(t, j);
		struct errbuf eb = ERRBUF_INIT;
		int lret = 0;
		if (j->spec) {
			char *const *cmd = j->spec->command;
			char **ex;
			char *tok = auth_job_token(m, j);
			json_object_set_new(env, "YARD_JOB_TOKEN", json_string(tok));
			free(tok);
			for (size_t r = 0; r < j->spec->nroles; r++)
				if (!strcmp(j->spec->roles[r].name, t->role) && j->spec->roles[r].command)
					cmd = j->spec->roles[r].command;
			ex = cmd ? spec_expand_argv(cmd, j->spec->params, &eb) : NULL;
			if (ex)
				lret = task_launch(m, t, &ex, env, &eb);
			for (size_t a = 0; ex && ex[a]; a++)
				json_array_append_new(argv, json_string(ex[a]));
			argv_free(ex);
		}
		td = json_pack("{s:I, s:I, s:s, s:s, s:i, s:i, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:o, s:I}",
			       "id", (json_int_t)t->id, "job", (json_int_t)j->id, "job_name", j->name,
			       "role", t->role, "index", (int)t->index, "attempt", (int)t->attempt,
			       "desired", (t->stop || t->state == TASK_STOPPING) ? "stop" : "run",
			       "argv", argv, "env", env, "gpus", gpus_json(t->gpus, t->ngpus),
			       "cpus_milli", (json_int_t)t->cpus_milli, "memory", (json_int_t)t->memory,
			       "pids", (json_int_t)t->pids, "code",
			       j->code ? json_string(j->code) : json_null(), "timeout_ms",
			       (json_int_t)(j->spec ? j->spec->timeout_ms : 0));
		json_object_set_new(td, "execs", execs_work_json(m, t));
		json_object_set_new(td, "on_disconnect", json_string(j->spec && j->spec->keep_on_disconnect
									  ? "keep" : "stop"));
		if (t->grace_ms)
			json_object_set_new(td, "stop_grace_ms", json_integer((json_int_t)t->grace_ms));
		json_object_set_new(td, "checkpoint", j->checkpoint ? json_string(j->checkpoint) : json_null());
		json_object_set_new(td, "checkpoint_owner", json_boolean(task_is_rank0(j, t)));
		/* the container image the task runs in; null: the process runtime */
		json_object_set_new(td, "image", j->spec && j->spec->image
							 ? json_string(j->spec->image) : json_null());
		/* or the image the agent builds from the code (agent/imagebuild.h),
		 * shared through the cluster's registry or the master's store */
		if (j->spec && j->spec->image_build)
			json_object_set_new(td, "image_build", json_pack("{s:s, s:O, s:o, s:b, s:s?}", "dockerfile",
									 j->spec->image_build->dockerfile,
									 "args", j->spec->image_build->args,
									 "registry", m->registry ? json_string(m->registry)
												 : json_null(),
									 "store", m->store_images,
									 "registry_auth", m->registry_auth));
		/* the job's data entries, resolved (docs/datasets.md) */
		json_object_set_new(td, "data", j->data ? json_deep_copy(j->data) : json_array());
		/* on a terminal (the shim's); an empty argv: the user's login shell */
		if (j->spec && j->spec->interactive)
			json_object_set_new(td, "interactive", json_true());
		if (lret) /* the agent fails the start with this message */
			json_object_set_new(td, "error", json_string(eb.msg));
		json_array_append_new(tasks, td);
	}
	free(live);
	json_t *doc = json_pack("{s:I, s:o, s:o}", "rev", (json_int_t)n->rev, "tasks", tasks, "sessions",
				sessions_work_json(m, n));
	if (elastic_node_leaving(m, n)) /* scaled down: an ephemeral agent leaves */
		json_object_set_new(doc, "leave", json_true());
	return doc;
}

uint64_t jobs_attained_gpu_s(const struct job *j, uint64_t now_us)
{
	uint64_t us = 0;
	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *t = j->tasks[i];
		uint64_t end = t->finished_at ? t->finished_at : now_us;
		if (t->started_at && t->ngpus && end > t->started_at)
			us += (end - t->started_at) * t->ngpus;
	}
	return us / 1000000;
}

struct task *jobs_current_task(const struct job *j, const char *role, unsigned index)
{
	for (size_t i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		if (t->attempt != j->attempt)
			continue;
		if (!role || (!strcmp(t->role, role) && t->index == index))
			return t;
	}
	return NULL;
}
