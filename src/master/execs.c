/* Execs inside running tasks (execs.h). */
#include "base/compat.h"
#include "master/execs.h"

#include "base/clock.h"
#include "base/xalloc.h"

#define EXEC_ARGV_MAX 4096

static void exec_free(struct exec *e)
{
	argv_free(e->argv);
	free(e->message);
	free(e);
}

struct exec *execs_find(struct master *m, uint64_t id)
{
	for (size_t i = 0; i < m->nexecs; i++)
		if (m->execs[i]->id == id)
			return m->execs[i];
	return NULL;
}

static bool host_matches(struct master *m, const char *node_name, const char *host)
{
	const struct node *n = core_node(m, node_name);
	return !strcmp(node_name, host) || (n && n->addr && !strcmp(n->addr, host));
}

int execs_create(struct master *m, struct job *j, const char *host, const json_t *argv,
		 struct exec **out, struct errbuf *eb)
{
	struct task *target = NULL;
	struct exec *e;
	size_t i, n = json_array_size(argv);
	json_t *v;

	*out = NULL;
	if (!host || !*host)
		return error_field(eb, YERR(BAD_REQUEST), "host", "host: expected a node name or address");
	if (!json_is_array(argv) || !n || n > EXEC_ARGV_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "argv",
				   "argv: expected 1 to %d strings", EXEC_ARGV_MAX);
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || (!i && !*json_string_value(v)))
			return error_field(eb, YERR(BAD_REQUEST), "argv",
					   "argv[%zu]: expected a non-empty string", i);
	}
	if (j->state != JOB_STARTING && j->state != JOB_RUNNING)
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is %s, not running", j->id,
			     job_state_name(j->state));
	for (i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		if (t->attempt != j->attempt || !t->node || t->stop ||
		    (t->state != TASK_ASSIGNED && t->state != TASK_RUNNING))
			continue;
		if (host_matches(m, t->node, host)) {
			target = t;
			break;
		}
	}
	if (!target)
		return error_field(eb, YERR(NOT_FOUND), "host",
				   "host: no running task of job %" PRIu64 " is on '%s'", j->id, host);
	execs_prune(m);
	e = xcalloc(1, sizeof(*e));
	e->id = ++m->next_exec_id;
	e->job_id = j->id;
	e->task_id = target->id;
	e->argv = xcalloc(n + 1, sizeof(*e->argv));
	json_array_foreach(argv, i, v)
		e->argv[i] = xstrdup(json_string_value(v));
	ALLOC_GROW(m->execs, m->nexecs + 1, m->aexecs);
	m->execs[m->nexecs++] = e;
	/* the agent learns of it with its task's desired state */
	struct node *node = core_node(m, target->node);
	if (node)
		core_node_bump(m, node);
	*out = e;
	return 0;
}

static void exec_finish(struct exec *e, bool has_exit, int code, int sig, const char *msg)
{
	e->done = true;
	e->has_exit = has_exit;
	e->exit_code = code;
	e->signal = sig;
	free(e->message);
	e->message = msg ? xstrdup(msg) : NULL;
	e->done_ms = mono_ms();
}

bool execs_settle(struct master *m, struct exec *e)
{
	struct task *t = core_task(m, e->task_id);
	if (!e->done && (!t || task_state_is_final(t->state)))
		exec_finish(e, false, 0, 0, "the task it ran in has ended");
	return e->done;
}

void execs_reported(struct master *m, const struct node *n, const json_t *r)
{
	const json_t *jexit = json_object_get(r, "exit_code"), *jsig = json_object_get(r, "signal");
	struct exec *e = execs_find(m, (uint64_t)json_integer_value(json_object_get(r, "id")));
	struct task *t;

	if (!e || e->done || (uint64_t)json_integer_value(json_object_get(r, "task")) != e->task_id)
		return;
	t = core_task(m, e->task_id);
	if (!t || !t->node || strcmp(t->node, n->name))
		return;
	exec_finish(e, json_is_integer(jexit), (int)json_integer_value(jexit),
		    json_is_integer(jsig) ? (int)json_integer_value(jsig) : 0,
		    json_string_value(json_object_get(r, "message")));
	struct node *node = core_node(m, n->name);
	if (node)
		core_node_bump(m, node); /* no longer desired */
}

json_t *execs_work_json(struct master *m, const struct task *t)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < m->nexecs; i++) {
		const struct exec *e = m->execs[i];
		json_t *argv;
		if (e->task_id != t->id || e->done)
			continue;
		argv = json_array();
		for (size_t a = 0; e->argv[a]; a++)
			json_array_append_new(argv, json_string(e->argv[a]));
		json_array_append_new(arr, json_pack("{s:I, s:o}", "id", (json_int_t)e->id, "argv", argv));
	}
	return arr;
}

json_t *execs_json(const struct exec *e)
{
	return json_pack("{s:I, s:I, s:s, s:o, s:o, s:o}", "id", (json_int_t)e->id, "task",
			 (json_int_t)e->task_id, "state", e->done ? "exited" : "running", "exit_code",
			 e->has_exit ? json_integer(e->exit_code) : json_null(), "signal",
			 e->signal ? json_integer(e->signal) : json_null(), "message",
			 e->message ? json_string(e->message) : json_null());
}

void execs_prune(struct master *m)
{
	uint64_t now = mono_ms();
	size_t k = 0;
	for (size_t i = 0; i < m->nexecs; i++) {
		struct exec *e = m->execs[i];
		if (e->done && now - e->done_ms > EXEC_KEEP_MS)
			exec_free(e);
		else
			m->execs[k++] = e;
	}
	m->nexecs = k;
}

void execs_clear(struct master *m)
{
	for (size_t i = 0; i < m->nexecs; i++)
		exec_free(m->execs[i]);
	free(m->execs);
	m->execs = NULL;
	m->nexecs = m->aexecs = 0;
}
