/* Unit tests for the master's side of container runtimes on a real SQLite
 * store: what an agent's registration may say about its runtimes and engine,
 * that both survive a reload, that a job with an image waits for (and goes
 * to) a node with a container runtime, and that its assignment names the
 * image. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/jobs.h"
#include "master/logs.h"
#include "master/visibility.h"

struct fixture {
	char dir[32];
	struct master m;
};


/* the submitter of the tests' jobs */
/* jobs_submit's answer that a submission was one sent again (none here) */
static bool again_;

static const struct caller alice = { .role = ROLE_USER, .user = "alice" };
static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct errbuf eb = ERRBUF_INIT;
	int created;

	snprintf(f->dir, sizeof(f->dir), "/tmp/yard-nodes-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->m.data_dir = f->dir;
	f->m.job_key = xstrdup("0123456789abcdef");
	f->m.lease_ms = 15000;
	sched_policy_conf_init(&f->m.policy, SCHED_POLICY_DEFAULT);
	f->m.sops = &store_sqlite_ops;
	assert_int_equal(f->m.sops->open(f->dir, &f->m.store, &created, &eb), 0);
	*state = f;
	return 0;
}

static void commit(struct fixture *f)
{
	struct errbuf eb = ERRBUF_INIT;

	if (!f->m.txn_open)
		return;
	assert_int_equal(f->m.batch_err, 0);
	assert_int_equal(f->m.sops->commit(f->m.store, &eb), 0);
	f->m.txn_open = false;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	commit(f);
	core_clear(&f->m);
	prom_release(&f->m.prom);
	f->m.sops->close(f->m.store);
	free(f->m.job_key);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *doc = json_loads(text, 0, &jerr);

	if (!doc)
		fail_msg("bad test JSON: %s: %s", jerr.text, text);
	return doc;
}

/* Registers the body given as JSON text; returns what nodes_register did. */
static int reg(struct fixture *f, const char *body, struct node **n, struct errbuf *eb)
{
	json_t *doc = parse(body);
	char *tok = NULL;
	int ret = nodes_register(&f->m, doc, n, &tok, eb);

	free(tok);
	json_decref(doc);
	commit(f);
	return ret;
}

static void assert_json_text(json_t *v, const char *want)
{
	char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

	assert_string_equal(got, want);
	free(got);
}

static void test_register_runtimes(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct node *n;
	json_t *doc;

	/* an agent that says nothing has the process runtime alone */
	assert_int_equal(reg(f, "{\"name\": \"n1\", \"addr\": \"10.0.0.1\"}", &n, &eb), 0);
	assert_int_equal(n->runtimes, NODE_RT_PROCESS);
	assert_null(n->engine);
	doc = jobs_node_json(&f->m, n);
	assert_json_text(json_object_get(doc, "runtimes"), "[\"process\"]");
	assert_true(json_is_null(json_object_get(doc, "engine")));
	json_decref(doc);

	assert_int_equal(reg(f, "{\"name\": \"n2\", \"addr\": \"10.0.0.2\", "
				"\"runtimes\": [\"process\", \"docker\"], "
				"\"engine\": \"Docker 20.10.24\"}", &n, &eb), 0);
	assert_int_equal(n->runtimes, NODE_RT_PROCESS | NODE_RT_DOCKER);
	assert_string_equal(n->engine, "Docker 20.10.24");
	doc = jobs_node_json(&f->m, n);
	assert_json_text(json_object_get(doc, "runtimes"), "[\"process\",\"docker\"]");
	assert_json_text(json_object_get(doc, "engine"), "\"Docker 20.10.24\"");
	json_decref(doc);

	/* a re-registration says it all again: the engine is gone */
	assert_int_equal(reg(f, "{\"name\": \"n2\", \"addr\": \"10.0.0.2\", "
				"\"runtimes\": [\"docker\", \"docker\"]}", &n, &eb), 0);
	assert_int_equal(n->runtimes, NODE_RT_DOCKER);
	assert_null(n->engine);
	(void)state;
}

static void test_register_refusals(void **state)
{
	static const struct {
		const char *body;
		const char *field, *msg;
	} cases[] = {
		{ "{\"name\": \"n1\", \"runtimes\": \"docker\"}", "runtimes",
			"runtimes: expected a non-empty array of runtime names (process, docker)" },
		{ "{\"name\": \"n1\", \"runtimes\": []}", "runtimes",
			"runtimes: expected a non-empty array of runtime names (process, docker)" },
		{ "{\"name\": \"n1\", \"runtimes\": [\"process\", \"kata\"]}", "runtimes",
			"runtimes[1]: expected one of process, docker, got \"kata\"" },
		{ "{\"name\": \"n1\", \"runtimes\": [7]}", "runtimes",
			"runtimes[0]: expected one of process, docker, got 7" },
		{ "{\"name\": \"n1\", \"engine\": 20}", "engine",
			"engine: expected a string of 1 to 128 printable characters" },
		{ "{\"name\": \"n1\", \"engine\": \"\"}", "engine",
			"engine: expected a string of 1 to 128 printable characters" },
		{ "{\"name\": \"n1\", \"engine\": \"Docker\\n20\"}", "engine",
			"engine: expected a string of 1 to 128 printable characters" },
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf eb = ERRBUF_INIT;
		struct node *n = (struct node *)1;

		assert_int_equal(reg(f, cases[i].body, &n, &eb), YERR(BAD_REQUEST));
		assert_null(n);
		assert_string_equal(eb.field, cases[i].field);
		assert_string_equal(eb.msg, cases[i].msg);
	}
	/* nothing was registered */
	assert_int_equal(f->m.nnodes, 0);
}

static void test_runtimes_survive_reload(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct node *n;

	assert_int_equal(reg(f, "{\"name\": \"n1\", \"addr\": \"10.0.0.1\"}", &n, &eb), 0);
	assert_int_equal(reg(f, "{\"name\": \"n2\", \"addr\": \"10.0.0.2\", "
				"\"runtimes\": [\"process\", \"docker\"], "
				"\"engine\": \"Podman Engine 4.3.1\"}", &n, &eb), 0);
	core_clear(&f->m);
	prom_release(&f->m.prom);
	assert_int_equal(core_load(&f->m, &eb), 0);
	assert_int_equal(f->m.nnodes, 2);
	n = core_node(&f->m, "n1");
	assert_non_null(n);
	assert_int_equal(n->runtimes, NODE_RT_PROCESS);
	assert_null(n->engine);
	n = core_node(&f->m, "n2");
	assert_non_null(n);
	assert_int_equal(n->runtimes, NODE_RT_PROCESS | NODE_RT_DOCKER);
	assert_string_equal(n->engine, "Podman Engine 4.3.1");
}

/* The first task of the node's work, or NULL. */
static json_t *first_work_task(struct fixture *f, const char *node, json_t **work)
{
	*work = jobs_work_json(&f->m, core_node(&f->m, node));
	return json_array_get(json_object_get(*work, "tasks"), 0);
}

static void test_image_job_waits_then_runs(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct job *img, *plain;
	struct node *n;
	json_t *body, *work, *t;

	assert_int_equal(reg(f, "{\"name\": \"p1\", \"addr\": \"10.0.0.1\", \"cpus\": 4, "
				"\"gpus\": [{\"index\": 0}]}", &n, &eb), 0);
	/* refused on a cluster with no container runtime, but with wait_for_nodes */
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"image\": \"pytorch:1.13\","
		     " \"tasks\": {\"worker\": {\"gpus\": 1}}}}");
	assert_int_equal(jobs_submit(&f->m, &alice, body, &img, &again_, &eb), YERR(INVALID_SPEC));
	assert_string_equal(eb.field, "image");
	assert_string_equal(eb.msg, "image: 'pytorch:1.13' needs a node with a container runtime, "
				    "but none of the 1 node in pool 'default' has one (set "
				    "placement.wait_for_nodes: true to queue anyway)");
	json_decref(body);
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"image\": \"pytorch:1.13\","
		     " \"tasks\": {\"worker\": {\"gpus\": 1}}, \"placement\": {\"wait_for_nodes\": true}}}");
	assert_int_equal(jobs_submit(&f->m, &alice, body, &img, &again_, &eb), 0);
	json_decref(body);
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"tasks\": {\"worker\": {}}}}");
	assert_int_equal(jobs_submit(&f->m, &alice, body, &plain, &again_, &eb), 0);
	json_decref(body);
	commit(f);
	jobs_schedule(&f->m);
	commit(f);
	assert_int_equal(img->state, JOB_QUEUED);
	assert_string_equal(img->wait_code, "infeasible");
	assert_string_equal(img->wait_msg, "image: 'pytorch:1.13' needs a node with a container "
					   "runtime, but none of the 1 node in pool 'default' has one");
	/* the process job ran on the process node, without an image */
	assert_int_not_equal(plain->state, JOB_QUEUED);
	t = first_work_task(f, "p1", &work);
	assert_non_null(t);
	assert_int_equal(json_integer_value(json_object_get(t, "job")), (json_int_t)plain->id);
	assert_true(json_is_null(json_object_get(t, "image")));
	json_decref(work);

	/* a docker node joins: the image job goes there, and its task says so */
	assert_int_equal(reg(f, "{\"name\": \"d1\", \"addr\": \"10.0.0.2\", \"cpus\": 4, "
				"\"gpus\": [{\"index\": 0}], \"runtimes\": [\"process\", \"docker\"]}",
			     &n, &eb), 0);
	jobs_schedule(&f->m);
	commit(f);
	assert_int_not_equal(img->state, JOB_QUEUED);
	t = first_work_task(f, "d1", &work);
	assert_non_null(t);
	assert_int_equal(json_integer_value(json_object_get(t, "job")), (json_int_t)img->id);
	assert_json_text(json_object_get(t, "image"), "\"pytorch:1.13\"");
	json_decref(work);
}

/* Submits body for alice, committed: the job. */
static struct job *submit(struct fixture *f, const json_t *body)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j;

	assert_int_equal(jobs_submit(&f->m, &alice, body, &j, &again_, &eb), 0);
	commit(f);
	return j;
}

/* A scheduling pass, committed. */
static void plan(struct fixture *f)
{
	jobs_schedule(&f->m);
	commit(f);
}

/* A job's dependencies on passes of new arrivals alone: the new job is
 * swept (it waits, or fails at once when its dependency has failed), and
 * a dependency's end asks for a full pass, which fails the job waiting. */
static void test_dependencies_on_new_arrival_passes(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct job *x, *a, *b, *c;
	struct node *n;
	json_t *body, *after;
	char text[256];

	assert_int_equal(reg(f, "{\"name\": \"p1\", \"addr\": \"10.0.0.1\", \"cpus\": 1, \"gpus\": []}", &n,
			     &eb), 0);
	/* x holds the node's one CPU, so that a waits queued */
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"tasks\": {\"worker\": {\"cpus\": 1}}}}");
	x = submit(f, body);
	plan(f);
	assert_int_not_equal(x->state, JOB_QUEUED);
	a = submit(f, body);
	json_decref(body);
	plan(f);
	assert_int_equal(a->state, JOB_QUEUED);

	snprintf(text, sizeof(text), "{\"spec\": {\"command\": [\"/bin/true\"], \"after\": [%" PRIu64 "], "
		 "\"tasks\": {\"worker\": {\"cpus\": 1}}}}", a->id);
	after = parse(text);
	b = submit(f, after);
	assert_false(f->m.sched_needed); /* the next pass is of new arrivals alone */
	plan(f);
	assert_int_equal(b->state, JOB_QUEUED);
	assert_true(b->blocked);
	assert_string_equal(b->wait_code, "dependency");
	snprintf(text, sizeof(text), "waits for job %" PRIu64 " to succeed", a->id);
	assert_string_equal(b->wait_msg, text);

	/* its dependency cancelled (queued: no task to wait for): a full pass
	 * fails it */
	assert_int_equal(jobs_cancel(&f->m, a, &eb), 0);
	commit(f);
	assert_true(f->m.sched_needed);
	plan(f);
	assert_int_equal(b->state, JOB_FAILED);

	/* a new job after the cancelled one fails on a pass of new arrivals */
	c = submit(f, after);
	json_decref(after);
	assert_false(f->m.sched_needed);
	plan(f);
	assert_int_equal(c->state, JOB_FAILED);
}

/* The task of j's current attempt (its only role, index 0). */
static struct task *current_task(struct job *j)
{
	for (size_t i = j->ntasks; i-- > 0;)
		if (j->tasks[i] && j->tasks[i]->attempt == j->attempt)
			return j->tasks[i];
	return NULL;
}

/* A status report of task_id (fmt's one %PRIu64), committed: the answer. */
static json_t *report_answer(struct fixture *f, struct node *n, const char *fmt, uint64_t task_id)
{
	struct errbuf eb = ERRBUF_INIT;
	char text[512];
	snprintf(text, sizeof(text), fmt, task_id);
	json_t *body = parse(text), *reply = json_object();
	assert_int_equal(nodes_status(&f->m, n, body, reply, &eb), 0);
	json_decref(body);
	commit(f);
	return reply;
}

static void report(struct fixture *f, struct node *n, const char *fmt, uint64_t task_id)
{
	json_decref(report_answer(f, n, fmt, task_id));
}

/* GPU utilisation from status reports: per GPU in the node's JSON, null
 * until reported, null again when NVML cannot tell; junk is ignored. */
static void test_gpu_util(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct node *n;
	json_t *doc;

	assert_int_equal(reg(f, "{\"name\": \"g1\", \"addr\": \"10.0.0.9\", \"gpus\": ["
				"{\"index\": 0, \"model\": \"X\", \"memory\": 1}, "
				"{\"index\": 1, \"model\": \"X\", \"memory\": 1}]}", &n, &eb), 0);
	doc = jobs_node_json(&f->m, n);
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "util"), "null");
	json_decref(doc);
	report(f, n, "{\"tasks\": [], \"gpus\": [{\"index\": 1, \"util\": 73}, "
		     "{\"index\": 0, \"util\": null}, {\"index\": 7, \"util\": 5}, \"x\"]}", 0);
	doc = jobs_node_json(&f->m, n);
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "util"), "null");
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "gpus"), 1), "util"), "73");
	json_decref(doc);
	report(f, n, "{\"gpus\": [{\"index\": 1, \"util\": 101}, {\"index\": 0, \"util\": 0}]}", 0);
	doc = jobs_node_json(&f->m, n);
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "util"), "0");
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "gpus"), 1), "util"), "null");
	json_decref(doc);
}

/* Staging shows in a starting job's reason; a failed staging fails the
 * start, the restart policy gives it another attempt, and the job's reason
 * names the staging failure in the end. */
static void test_staging_progress_and_failure(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct job *j;
	struct node *n;
	struct task *t;
	json_t *body;

	assert_int_equal(reg(f, "{\"name\": \"s1\", \"addr\": \"10.0.0.1\", \"cpus\": 4, "
				"\"gpus\": [{\"index\": 0}]}", &n, &eb), 0);
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"restart\": {\"max\": 1},"
		     " \"tasks\": {\"worker\": {\"gpus\": 1}}}}");
	assert_int_equal(jobs_submit(&f->m, &alice, body, &j, &again_, &eb), 0);
	json_decref(body);
	commit(f);
	jobs_schedule(&f->m);
	commit(f);
	assert_int_equal(j->state, JOB_STARTING);
	t = current_task(j);
	assert_non_null(t);
	report(f, n, "{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"staging\", "
		     "\"staged\": 1610612736, \"stage_total\": 2147483648}]}", t->id);
	assert_int_equal(j->state, JOB_STARTING);
	assert_string_equal(j->reason_code, "staging");
	assert_string_equal(j->reason_msg, "staging: 1.5GiB of 2.0GiB");

	for (int attempt = 0; attempt < 2; attempt++) {
		t = current_task(j);
		assert_non_null(t);
		report(f, n, "{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"start_failed\", "
			     "\"exit_code\": null, \"signal\": null, \"message\": \"start_failed: "
			     "staging_failed: data[0] (s3://b/p): cannot reach the store\"}]}", t->id);
		if (attempt == 0) {
			/* the restart policy gives the job a second attempt */
			assert_int_equal(j->state, JOB_QUEUED);
			jobs_schedule(&f->m);
			commit(f);
			assert_int_equal(j->state, JOB_STARTING);
			assert_ptr_not_equal(current_task(j), t);
		}
	}
	assert_int_equal(j->state, JOB_FAILED);
	assert_string_equal(j->reason_code, "start_failed");
	/* the history: each state change, the restart with its reason */
	struct strbuf hist = STRBUF_INIT;
	size_t k;
	json_t *e;
	json_array_foreach(j->events, k, e) {
		json_t *why = json_object_get(e, "reason");
		strbuf_addf(&hist, "%s%s/%d%s%s", k ? " " : "", json_string_value(json_object_get(e, "state")),
			    (int)json_integer_value(json_object_get(e, "attempt")), why ? ":" : "",
			    why ? json_string_value(json_object_get(why, "code")) : "");
	}
	assert_string_equal(hist.buf, "queued/0 starting/0 queued/1:start_failed starting/1 failed/1:start_failed");
	strbuf_release(&hist);
	assert_non_null(strstr(j->reason_msg, "staging_failed: data[0] (s3://b/p): cannot reach the store"));
}

/* A task's end comes with the sizes of its logs as its agent shipped them:
 * a master that holds less (its machine lost what it had acknowledged but
 * not yet written to disk) does not take the end and answers what it holds,
 * from where the agent ships again; once it holds them all, it does. */
static void test_end_waits_for_lost_logs(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	uint64_t have = 0;
	struct job *j;
	struct node *n;
	struct task *t;
	json_t *body, *answer;

	assert_int_equal(reg(f, "{\"name\": \"l1\", \"addr\": \"10.0.0.1\", \"cpus\": 4, "
				"\"gpus\": []}", &n, &eb), 0);
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"tasks\": {\"worker\": {}}}}");
	assert_int_equal(jobs_submit(&f->m, &alice, body, &j, &again_, &eb), 0);
	json_decref(body);
	commit(f);
	jobs_schedule(&f->m);
	commit(f);
	t = current_task(j);
	assert_non_null(t);
	report(f, n, "{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"running\", \"pid\": 7}]}", t->id);
	assert_int_equal(j->state, JOB_RUNNING);
	assert_int_equal(logs_append(&f->m, t, LOG_STDOUT, 0, "0123456789", 10, &have, &eb), 0);
	commit(f);
	assert_int_equal(have, 10);

	answer = report_answer(f, n, "{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"exited\", "
			       "\"exit_code\": 0, \"log_size\": {\"stdout\": 25, \"stderr\": 0}}]}", t->id);
	char want[128];
	snprintf(want, sizeof(want), "[{\"id\":%" PRIu64 ",\"stdout\":10,\"stderr\":0}]", t->id);
	assert_json_text(json_object_get(answer, "logs"), want);
	json_decref(answer);
	assert_int_equal(j->state, JOB_RUNNING);

	assert_int_equal(logs_append(&f->m, t, LOG_STDOUT, 10, "abcdefghijklmno", 15, &have, &eb), 0);
	commit(f);
	answer = report_answer(f, n, "{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"exited\", "
			       "\"exit_code\": 0, \"log_size\": {\"stdout\": 25, \"stderr\": 0}}]}", t->id);
	assert_null(json_object_get(answer, "logs"));
	json_decref(answer);
	assert_int_equal(j->state, JOB_SUCCEEDED);
}

/* Reloads the model from the store, as a master restart does. */
static void reload(struct fixture *f)
{
	struct errbuf eb = ERRBUF_INIT;

	commit(f);
	core_clear(&f->m);
	prom_release(&f->m.prom);
	assert_int_equal(core_load(&f->m, &eb), 0);
}

/* Lapses n's lease now (jobs_tick finds it past due). */
static void lapse(struct fixture *f, const char *name)
{
	core_node(&f->m, name)->lease_until = 1;
	jobs_tick(&f->m);
	commit(f);
}

/* A drain is kept through a lease lapse, a heartbeat, a new registration
 * (an agent restart) and a reload (a master restart), with its reason and
 * who; a resume undoes it, and a second resume is refused. */
static void test_drain_survives(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct node *n;
	const char *body = "{\"name\": \"n1\", \"addr\": \"10.0.0.1\", \"gpus\": [{\"index\": 0}]}";

	assert_int_equal(reg(f, body, &n, &eb), 0);
	assert_int_equal(n->state, NODE_READY);
	assert_int_equal(nodes_drain(&f->m, n, "disk swap", "root"), 0);
	commit(f);
	assert_int_equal(n->state, NODE_DRAINED);
	lapse(f, "n1");
	n = core_node(&f->m, "n1");
	assert_int_equal(n->state, NODE_DRAINED_LOST);
	reload(f);
	n = core_node(&f->m, "n1");
	assert_int_equal(n->state, NODE_DRAINED_LOST);
	assert_string_equal(n->drain_reason, "disk swap");
	assert_string_equal(n->drain_by, "root");
	assert_true(n->drain_at > 0);
	assert_int_equal(nodes_apply_event(&f->m, n, NODE_EV_HEARTBEAT), NODE_DRAINED);
	assert_int_equal(reg(f, body, &n, &eb), 0);
	assert_int_equal(n->state, NODE_DRAINED);
	reload(f);
	n = core_node(&f->m, "n1");
	assert_int_equal(n->state, NODE_DRAINED);
	assert_string_equal(n->drain_reason, "disk swap");
	/* the document shows liveness and drain apart */
	json_t *doc = jobs_node_json(&f->m, n);
	assert_string_equal(json_string_value(json_object_get(doc, "state")), "ready");
	assert_true(json_is_true(json_object_get(doc, "drained")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "drain"), "reason")),
			    "disk swap");
	json_decref(doc);
	assert_int_equal(nodes_resume(&f->m, n, &eb), 0);
	assert_int_equal(n->state, NODE_READY);
	assert_null(n->drain_reason);
	assert_int_equal(nodes_resume(&f->m, n, &eb), YERR(CONFLICT));
	assert_string_equal(eb.msg, "node 'n1' is not drained");
	reload(f);
	assert_int_equal(core_node(&f->m, "n1")->state, NODE_READY);
}

/* A store written before the node table: 1 was "draining". */
static void test_old_state_loads(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(core_batch_open(&f->m), 0);
	assert_int_equal(f->m.sops->put(f->m.store, STORE_NODE, "old",
					"{\"name\": \"old\", \"state\": 1, \"gpus\": []}", &eb), 0);
	assert_int_equal(f->m.sops->put(f->m.store, STORE_NODE, "gone",
					"{\"name\": \"gone\", \"state\": 2, \"gpus\": []}", &eb), 0);
	reload(f);
	assert_int_equal(core_node(&f->m, "old")->state, NODE_DRAINED);
	assert_int_equal(core_node(&f->m, "gone")->state, NODE_LOST);
}

/* Removal: refused while the node is live or holds a task, durable, and the
 * name may register again (a new node, not drained). */
static void test_remove(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	struct node *n;
	struct job *j;
	json_t *body;

	assert_int_equal(reg(f, "{\"name\": \"n1\", \"addr\": \"10.0.0.1\", \"gpus\": [{\"index\": 0}]}",
			     &n, &eb), 0);
	assert_int_equal(reg(f, "{\"name\": \"n2\", \"addr\": \"10.0.0.2\", \"gpus\": [{\"index\": 0}]}",
			     &n, &eb), 0);
	assert_int_equal(nodes_remove(&f->m, n, &eb), YERR(CONFLICT));
	assert_non_null(strstr(eb.msg, "node 'n2' is ready"));
	/* a task on n1 that keeps running through a disconnect holds it */
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"tasks\": {\"worker\": {\"gpus\": 1}}, "
		     "\"on_disconnect\": \"keep\", \"placement\": {\"labels\": {}}}}");
	if (jobs_submit(&f->m, &alice, body, &j, &again_, &eb))
		fail_msg("submit: %s", eb.msg);
	json_decref(body);
	commit(f);
	assert_int_equal(nodes_drain(&f->m, core_node(&f->m, "n2"), NULL, "root"), 0);
	jobs_schedule(&f->m);
	commit(f);
	assert_int_not_equal(j->state, JOB_QUEUED);
	lapse(f, "n1");
	n = core_node(&f->m, "n1");
	assert_int_equal(n->state, NODE_LOST);
	assert_int_equal(nodes_remove(&f->m, n, &eb), YERR(CONFLICT));
	assert_string_equal(eb.msg, "node 'n1' still has 1 live task; cancel it or wait for it to "
				    "end first");
	/* the drained, lost n2 holds nothing: removed, for good */
	lapse(f, "n2");
	n = core_node(&f->m, "n2");
	assert_int_equal(n->state, NODE_DRAINED_LOST);
	assert_int_equal(nodes_remove(&f->m, n, &eb), 0);
	commit(f);
	assert_null(core_node(&f->m, "n2"));
	assert_non_null(core_node(&f->m, "n1"));
	assert_int_equal(f->m.nnodes, 1);
	/* its agent tokens are revoked (its agent, back, registers anew) */
	size_t agent_tokens = 0;
	for (size_t i = 0; i < f->m.ntokens; i++)
		if (f->m.tokens[i].role == ROLE_AGENT && !strcmp(f->m.tokens[i].user, "n2")) {
			agent_tokens++;
			assert_true(f->m.tokens[i].revoked_at > 0);
		}
	assert_int_equal(agent_tokens, 1);
	reload(f);
	assert_null(core_node(&f->m, "n2"));
	assert_int_equal(f->m.nnodes, 1);
	assert_int_equal(reg(f, "{\"name\": \"n2\", \"addr\": \"10.0.0.9\"}", &n, &eb), 0);
	assert_int_equal(n->state, NODE_READY);
	assert_null(n->drain_reason);
	assert_int_equal(f->m.nnodes, 2);
}

/* The store's blob_size, counting its calls (test_new_job_doc_asks_no_log). */
static int blob_size_calls;
static int counted_blob_size(struct store *st, const char *name, uint64_t *out, struct errbuf *eb)
{
	blob_size_calls++;
	return store_sqlite_ops.blob_size(st, name, out, eb);
}

/* A new job's document shows its tasks' logs empty without asking the
 * store (a new task has none); a task loaded from the store asks once. */
static void test_new_job_doc_asks_no_log(void **state)
{
	struct fixture *f = *state;
	struct store_ops counting = store_sqlite_ops;
	struct job *j;
	json_t *body, *doc;

	counting.blob_size = counted_blob_size;
	f->m.sops = &counting;
	body = parse("{\"spec\": {\"command\": [\"/bin/true\"], \"tasks\": {\"worker\": {\"replicas\": 2}}}}");
	j = submit(f, body);
	json_decref(body);
	blob_size_calls = 0;
	doc = jobs_job_json(&f->m, j, true);
	assert_int_equal(blob_size_calls, 0);
	assert_json_text(json_object_get(json_array_get(json_object_get(doc, "tasks"), 1), "log_size"),
			 "{\"stdout\":0,\"stderr\":0}");
	json_decref(doc);

	/* loaded back, the sizes are the store's to say: asked once each */
	uint64_t id = j->id;
	reload(f);
	j = core_job(&f->m, id);
	assert_non_null(j);
	doc = jobs_job_json(&f->m, j, true);
	assert_int_equal(blob_size_calls, 4);
	json_decref(doc);
	doc = jobs_job_json(&f->m, j, true);
	assert_int_equal(blob_size_calls, 4);
	json_decref(doc);
	f->m.sops = &store_sqlite_ops;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register_runtimes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_register_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runtimes_survive_reload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_job_waits_then_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_staging_progress_and_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gpu_util, setup, teardown),
		cmocka_unit_test_setup_teardown(test_end_waits_for_lost_logs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_survives, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_state_loads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dependencies_on_new_arrival_passes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_job_doc_asks_no_log, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
