/* Experiments: a sweep's trials as jobs, kept max_parallel at a time, and
 * early stopping on their objective's points (experiments.h). */
#include "base/compat.h"
#include "master/experiments.h"

#include <math.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_sweep.h"
#include "master/control.h"
#include "master/jobs.h"
#include "master/store.h"
#include "master/visibility.h"

#define SPEC_NAME_MAX 63

struct experiment *experiments_find(const struct master *m, uint64_t id)
{
	return id && id <= m->nexps ? m->exps[id - 1] : NULL;
}

static const struct spec_sweep *sweep_of(const struct experiment *e)
{
	return e->spec->sweep;
}

/* ---- the stored document ---- */

static void exp_save(struct master *m, const struct experiment *e)
{
	json_t *trials = json_array();
	char key[24];

	for (size_t k = 0; k < e->ntrials; k++) {
		const struct exp_trial *t = &e->trials[k];
		json_t *rungs = json_array();
		for (unsigned r = 0; r < ES_RUNGS_MAX; r++)
			if (t->es.recorded & (1u << r))
				json_array_append_new(rungs, json_pack("[i, f, b]", (int)r, t->es.rung_score[r],
								       (t->es.promoted >> r) & 1));
		json_array_append_new(trials, json_pack("{s:I, s:O, s:o, s:o, s:b}", "job", (json_int_t)t->job,
							"params", t->params, "reason",
							t->reason ? json_string(t->reason) : json_null(),
							"rungs", rungs, "paused", t->paused));
	}
	snprintf(key, sizeof(key), "%" PRIu64, e->id);
	core_put_doc(m, STORE_EXPERIMENT, key,
		     json_pack("{s:I, s:s, s:s, s:o, s:i, s:i, s:o, s:s, s:o, s:I, s:I, s:I, s:o}",
			       "id", (json_int_t)e->id, "name", e->name, "user", e->user, "team",
			       e->team ? json_string(e->team) : json_null(), "role", (int)e->role,
			       "state", (int)e->state, "reason",
			       e->reason ? json_string(e->reason) : json_null(), "spec", e->spec_text,
			       "code", e->code ? json_string(e->code) : json_null(), "seed",
			       (json_int_t)e->seed, "created_at", (json_int_t)e->created_at,
			       "finished_at", (json_int_t)e->finished_at, "trials", trials));
}

static void exp_free(struct experiment *e)
{
	if (!e)
		return;
	for (size_t k = 0; k < e->ntrials; k++) {
		json_decref(e->trials[k].params);
		free(e->trials[k].reason);
		es_trial_release(&e->trials[k].es);
	}
	free(e->trials);
	free(e->name);
	free(e->user);
	free(e->team);
	free(e->reason);
	free(e->spec_text);
	if (e->spec) {
		spec_release(e->spec);
		free(e->spec);
	}
	free(e->code);
	free(e);
}

void experiments_clear(struct master *m)
{
	for (size_t i = 0; i < m->nexps; i++)
		exp_free(m->exps[i]);
	free(m->exps);
	m->exps = NULL;
	m->nexps = m->aexps = 0;
}

static void exp_event(struct master *m, struct experiment *e, enum exp_event ev, const char *reason)
{
	int next = exp_transition(e->state, ev);

	if (next < 0)
		return;
	e->state = (enum exp_state)next;
	e->finished_at = wall_us();
	if (reason) {
		free(e->reason);
		e->reason = xstrdup(reason);
	}
	exp_save(m, e);
}

/* ---- trials ---- */

/* The job spec of trial k with params: the experiment's without its
 * sweep, the trial's values set, named NAME-tK. */
static json_t *trial_spec(const struct experiment *e, unsigned k, const json_t *params)
{
	json_t *doc = json_loads(e->spec_text, 0, NULL), *p;
	char name[SPEC_NAME_MAX + 1], suffix[16];

	json_object_del(doc, "sweep");
	p = json_object_get(doc, "params");
	if (!json_is_object(p)) {
		p = json_object();
		json_object_set_new(doc, "params", p);
	}
	json_object_update(p, (json_t *)params);
	snprintf(suffix, sizeof(suffix), "-t%u", k);
	snprintf(name, sizeof(name), "%.*s%s", (int)(SPEC_NAME_MAX - strlen(suffix)), e->name, suffix);
	json_object_set_new(doc, "name", json_string(name));
	return doc;
}

/* submit_trial submits e's next trial as a job of e's submitter. */
static int submit_trial(struct master *m, struct experiment *e, const json_t *key,
			struct errbuf *eb)
{
	unsigned k = (unsigned)e->ntrials;
	json_t *params = spec_sweep_trial_params(sweep_of(e), k, e->seed);
	json_t *body = json_pack("{s:o, s:o}", "spec", trial_spec(e, k, params), "code",
				 e->code ? json_string(e->code) : json_null());
	struct caller c = { .role = e->role, .user = e->user, .team = e->team };
	struct job *j;
	bool again;
	int ret;

	if (key)
		json_object_set(body, "idempotency_key", (json_t *)key);
	ret = jobs_submit(m, &c, body, &j, &again, eb);

	json_decref(body);
	if (ret) {
		json_decref(params);
		return ret;
	}
	j->experiment = e->id;
	j->trial = k;
	core_save_job(m, j);
	ALLOC_GROW(e->trials, e->ntrials + 1, e->atrials);
	memset(&e->trials[e->ntrials], 0, sizeof(e->trials[0]));
	e->trials[e->ntrials].job = j->id;
	e->trials[e->ntrials++].params = params;
	exp_save(m, e);
	return 0;
}

/* Whether trial t is queued or running (a paused one is neither). A
 * paused trial that someone released by hand (yard release) is live
 * again, and judged again at its next rung. */
static bool trial_live(struct master *m, struct exp_trial *t)
{
	struct job *j = core_job(m, t->job);

	if (t->paused && j && !j->held_by && !job_state_is_final(j->state))
		t->paused = false;
	return j && !job_state_is_final(j->state) && !t->paused;
}

int experiments_submit(struct master *m, const struct caller *c, const json_t *body,
		       struct experiment **out, bool *again, struct errbuf *eb)
{
	const json_t *jspec = json_is_object(body) ? json_object_get(body, "spec") : NULL;
	const json_t *code = json_is_object(body) ? json_object_get(body, "code") : NULL;
	const json_t *key = json_is_object(body) ? json_object_get(body, "idempotency_key") : NULL;
	struct experiment *e;
	struct job *prev;
	json_t *canon;
	int ret;

	*out = NULL;
	*again = false;
	if (!json_is_object(body))
		return error(eb, YERR(BAD_REQUEST), "request body: expected a JSON object");
	/* sent again (its reply was lost): the experiment its first trial made */
	if (json_is_string(key) &&
	    (prev = core_find_submit_key(m, c->user, json_string_value(key))) &&
	    (*out = experiments_find(m, prev->experiment))) {
		*again = true;
		return 0;
	}
	if (!json_is_object(jspec))
		return error_field(eb, YERR(INVALID_SPEC), "spec", "spec: expected an object");
	if (code && !json_is_null(code) && !json_is_string(code))
		return error_field(eb, YERR(BAD_REQUEST), "code", "code: expected \"sha256:\" and 64 "
				   "hex digits");
	e = xcalloc(1, sizeof(*e));
	e->spec = xcalloc(1, sizeof(*e->spec));
	if ((ret = spec_from_json(jspec, e->spec, eb)))
		goto fail;
	if (!e->spec->sweep) {
		ret = error_field(eb, YERR(INVALID_SPEC), "sweep", "sweep: required (a spec without "
				  "one is a job: POST /v1/jobs)");
		goto fail;
	}
	e->id = m->nexps + 1;
	e->name = xstrdup(e->spec->name);
	e->user = xstrdup(c->user);
	e->team = e->spec->team ? xstrdup(e->spec->team) : c->team ? xstrdup(c->team) : NULL;
	e->role = c->role == ROLE_ADMIN ? ROLE_ADMIN : ROLE_USER;
	e->state = EXP_RUNNING;
	e->code = json_is_string(code) ? xstrdup(json_string_value(code)) : NULL;
	e->seed = sweep_of(e)->has_seed ? sweep_of(e)->seed : e->id;
	e->created_at = wall_us();
	canon = spec_to_json(e->spec);
	e->spec_text = json_dumps(canon, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(canon);
	/* the first trial now: a spec that cannot run is refused whole */
	if ((ret = submit_trial(m, e, key && !json_is_null(key) ? key : NULL, eb)))
		goto fail;
	ALLOC_GROW(m->exps, m->nexps + 1, m->aexps);
	m->exps[m->nexps++] = e;
	exp_save(m, e);
	*out = e;
	return 0;
fail:
	exp_free(e);
	return ret;
}

/* ---- ASHA's promotion form: paused trials resumed when promoted ---- */

/* Resumes the paused trial that ASHA promotes now; false when none. */
static bool promote_one(struct master *m, struct experiment *e, size_t live)
{
	struct es_trial **all = xcalloc(e->ntrials + 1, sizeof(*all));
	bool *paused = xcalloc(e->ntrials + 1, sizeof(*paused)), finished = false;
	struct errbuf eb = ERRBUF_INIT;
	long k;

	for (size_t i = 0; i < e->ntrials; i++) {
		struct job *j = core_job(m, e->trials[i].job);
		all[i] = &e->trials[i].es;
		paused[i] = e->trials[i].paused && j && j->state == JOB_QUEUED;
		finished |= j && j->state == JOB_SUCCEEDED;
	}
	k = earlystop_promotion(sweep_of(e), all, e->ntrials, paused,
				!live && e->ntrials >= sweep_of(e)->trials && !finished);
	free(all);
	free(paused);
	if (k < 0)
		return false;
	e->trials[k].paused = false;
	free(e->trials[k].reason);
	e->trials[k].reason = NULL;
	control_release(m, core_job(m, e->trials[k].job), &eb);
	exp_save(m, e);
	return true;
}

/* Ends e's paused trials: nothing will promote them now. */
static void end_paused(struct master *m, struct experiment *e)
{
	for (size_t k = 0; k < e->ntrials; k++) {
		struct exp_trial *t = &e->trials[k];
		struct job *j = core_job(m, t->job);
		if (!t->paused)
			continue;
		t->paused = false;
		if (j && !job_state_is_final(j->state))
			jobs_end(m, j, JOB_EV_EARLY_STOP, "stopped_early", t->reason ? t->reason : "asha: not promoted");
	}
	exp_save(m, e);
}

void experiments_sweep(struct master *m)
{
	for (size_t i = 0; i < m->nexps; i++) {
		struct experiment *e = m->exps[i];
		bool pause;
		size_t live = 0;

		if (!e || e->state != EXP_RUNNING)
			continue;
		pause = sweep_of(e)->stop == SWEEP_STOP_ASHA && sweep_of(e)->pause;
		for (size_t k = 0; k < e->ntrials; k++)
			live += trial_live(m, &e->trials[k]);
		/* a promotion comes before a new trial */
		while (pause && live < sweep_of(e)->max_parallel && promote_one(m, e, live))
			live++;
		while (live < sweep_of(e)->max_parallel && e->ntrials < sweep_of(e)->trials) {
			struct errbuf eb = ERRBUF_INIT;
			char why[sizeof(eb.msg) + 64];
			if (!submit_trial(m, e, NULL, &eb)) {
				live++;
				continue;
			}
			snprintf(why, sizeof(why), "trial %zu could not be submitted: %s", e->ntrials, eb.msg);
			exp_event(m, e, EXP_EV_SUBMIT_FAILED, why);
			break;
		}
		if (e->state == EXP_RUNNING && !live && e->ntrials >= sweep_of(e)->trials) {
			if (pause)
				end_paused(m, e);
			exp_event(m, e, EXP_EV_ALL_DONE, NULL);
		}
	}
}

int experiments_cancel(struct master *m, struct experiment *e, struct errbuf *eb)
{
	if (e->state != EXP_RUNNING)
		return error(eb, YERR(CONFLICT), "experiment %" PRIu64 " is already %s", e->id,
			     exp_state_name(e->state));
	for (size_t k = 0; k < e->ntrials; k++) {
		struct job *j = core_job(m, e->trials[k].job);
		if (j && !job_state_is_final(j->state))
			jobs_end(m, j, JOB_EV_CANCEL, "cancelled", "its experiment was cancelled");
	}
	exp_event(m, e, EXP_EV_CANCEL, NULL);
	return 0;
}

/* ---- the objective's points ---- */

/* Whether t is its job's first task (role of the spec's first, index 0),
 * whose points are the trial's. */
static bool first_task(const struct job *j, const struct task *t)
{
	return t->index == 0 && j->ntasks && !strcmp(t->role, j->tasks[0]->role);
}

static double score_of(const struct spec_sweep *s, double v)
{
	return s->maximize ? v : -v;
}

/* A point of the objective: last (by step) and best, and, when its
 * progress is known, a point for the early stopping rule. */
static bool trial_point(const struct spec_sweep *s, struct exp_trial *t, int64_t step, double v)
{
	if (!t->has_value || step >= t->step) {
		t->last = v;
		t->step = step;
	}
	t->best = !t->has_value ? v : s->maximize ? fmax(t->best, v) : fmin(t->best, v);
	t->has_value = true;
	if (s->resource && !t->has_res)
		return false;
	es_trial_add(&t->es, s->resource ? t->res : (double)step, score_of(s, v));
	return true;
}

void experiments_observe(struct master *m, const struct task *task, const struct store_metric *pts,
			 size_t n)
{
	struct job *j = task->job;
	struct experiment *e = j->experiment ? experiments_find(m, j->experiment) : NULL;
	const struct spec_sweep *s;
	struct exp_trial *t;
	bool changed = false;

	if (!e || j->trial >= e->ntrials || e->trials[j->trial].job != j->id || !first_task(j, task))
		return;
	s = sweep_of(e);
	t = &e->trials[j->trial];
	for (size_t i = 0; i < n; i++) {
		struct es_trial **all;
		uint32_t before = t->es.recorded;
		char why[400];
		bool stop;

		if (s->resource && !strcmp(pts[i].name, s->resource)) {
			t->res = pts[i].value;
			t->has_res = true;
			continue;
		}
		if (strcmp(pts[i].name, s->metric) || !trial_point(s, t, pts[i].step, pts[i].value) ||
		    t->paused)
			continue;
		all = xcalloc(e->ntrials, sizeof(*all));
		for (size_t k = 0; k < e->ntrials; k++)
			all[k] = &e->trials[k].es;
		if (s->pause) {
			bool pause = earlystop_arrive(s, all, e->ntrials, j->trial, why, sizeof(why)) == ES_PAUSE;
			free(all);
			changed |= t->es.recorded != before;
			if (pause && e->state == EXP_RUNNING && !control_pause(m, j, why, why)) {
				free(t->reason);
				t->reason = xstrdup(why);
				t->paused = true;
			}
			continue;
		}
		stop = earlystop_judge(s, all, e->ntrials, j->trial, why, sizeof(why));
		free(all);
		changed |= t->es.recorded != before;
		if (stop && !job_state_is_final(j->state) && e->state == EXP_RUNNING) {
			free(t->reason);
			t->reason = xstrdup(why);
			jobs_end(m, j, JOB_EV_EARLY_STOP, "stopped_early", why);
			changed = true;
		}
	}
	if (changed)
		exp_save(m, e);
}

/* ---- the API document ---- */

/* Trials with a value first, best first; then by trial number. */
static const struct experiment *sort_exp;
static int cmp_trials(const void *a, const void *b)
{
	const struct exp_trial *x = *(struct exp_trial *const *)a, *y = *(struct exp_trial *const *)b;
	bool max = sweep_of(sort_exp)->maximize;

	if (x->has_value != y->has_value)
		return x->has_value ? -1 : 1;
	if (x->has_value && x->best != y->best)
		return (max ? x->best > y->best : x->best < y->best) ? -1 : 1;
	return x < y ? -1 : x > y;
}

static json_t *trial_json(struct master *m, const struct experiment *e, const struct exp_trial *t)
{
	struct job *j = core_job(m, t->job);
	json_t *d = json_pack("{s:i, s:I, s:s, s:O}", "trial", (int)(t - e->trials), "job",
			      (json_int_t)t->job, "state", j ? job_state_name(j->state) : "unknown",
			      "params", t->params);

	json_object_set_new(d, "last", t->has_value ? json_real(t->last) : json_null());
	json_object_set_new(d, "best", t->has_value ? json_real(t->best) : json_null());
	json_object_set_new(d, "step", t->has_value ? json_integer((json_int_t)t->step) : json_null());
	if (t->reason)
		json_object_set_new(d, "reason", json_string(t->reason));
	return d;
}

json_t *experiments_json(struct master *m, const struct experiment *e, bool with_trials)
{
	const struct spec_sweep *s = sweep_of(e);
	json_t *counts = json_object(), *names = json_array(), *d, *sw, *best = json_null();
	const struct exp_trial **order = xcalloc(e->ntrials + 1, sizeof(*order));

	for (size_t k = 0; k < e->ntrials; k++) {
		struct job *j = core_job(m, e->trials[k].job);
		const char *st = j ? job_state_name(j->state) : "unknown";
		json_object_set_new(counts, st, json_integer(json_integer_value(json_object_get(counts, st)) + 1));
		order[k] = &e->trials[k];
	}
	sort_exp = e;
	sort_array(order, e->ntrials, sizeof(*order), cmp_trials);
	if (e->ntrials && order[0]->has_value)
		best = json_pack("{s:i, s:I, s:f}", "trial", (int)(order[0] - e->trials), "job",
				 (json_int_t)order[0]->job, "value", order[0]->best);
	for (size_t i = 0; i < s->nparams; i++)
		json_array_append_new(names, json_string(s->params[i].name));
	sw = spec_sweep_to_json(s);
	d = json_pack("{s:I, s:s, s:s, s:o, s:s, s:s, s:O, s:O, s:i, s:i, s:o, s:o, s:o, s:I, s:I}",
		      "id", (json_int_t)e->id, "name", e->name, "user", e->user, "team",
		      e->team ? json_string(e->team) : json_null(), "state", exp_state_name(e->state),
		      "method", s->method == SWEEP_GRID ? "grid" : "random", "objective",
		      json_object_get(sw, "objective"), "early_stop",
		      json_object_get(sw, "early_stop") ? json_object_get(sw, "early_stop") : json_null(),
		      "trials_total", (int)s->trials, "max_parallel", (int)s->max_parallel, "params", names,
		      "counts", counts, "best", best, "created_at", (json_int_t)e->created_at,
		      "finished_at", (json_int_t)e->finished_at);
	json_decref(sw);
	if (e->reason)
		json_object_set_new(d, "reason", json_string(e->reason));
	if (with_trials) {
		json_t *arr = json_array();
		for (size_t i = 0; i < e->ntrials; i++)
			json_array_append_new(arr, trial_json(m, e, order[i]));
		json_object_set_new(d, "trials", arr);
	}
	free(order);
	return d;
}

/* ---- loading ---- */

static char *dup_str(const json_t *d, const char *k)
{
	const char *s = json_string_value(json_object_get(d, k));
	return s ? xstrdup(s) : NULL;
}

static int64_t get_i64(const json_t *d, const char *k)
{
	return json_integer_value(json_object_get(d, k));
}

/* The points of one series of a task, as the query gives them. */
struct series {
	int64_t *step;
	double *value;
	size_t n, a;
};

static int collect(void *ctx, const struct store_metric *pt)
{
	struct series *s = ctx;
	if (s->n == s->a) {
		s->a = s->a ? 2 * s->a : 64;
		s->step = xrealloc(s->step, s->a * sizeof(*s->step));
		s->value = xrealloc(s->value, s->a * sizeof(*s->value));
	}
	s->step[s->n] = pt->step;
	s->value[s->n++] = pt->value;
	return 0;
}

/* Reads trial t's points again from the metrics store: every attempt of its
 * first task, the resource at a point the latest at or before its step. */
static int trial_reload(struct master *m, const struct experiment *e, struct exp_trial *t,
			struct errbuf *eb)
{
	const struct spec_sweep *s = sweep_of(e);
	struct job *j = core_job(m, t->job);
	int ret = 0;

	for (size_t i = 0; j && !ret && i < j->ntasks; i++) {
		struct series obj = { 0 }, res = { 0 };
		size_t r = 0;
		if (!first_task(j, j->tasks[i]))
			continue;
		ret = m->sops->metrics_query(m->store, j->tasks[i]->id, s->metric, collect, &obj, eb);
		if (!ret && s->resource)
			ret = m->sops->metrics_query(m->store, j->tasks[i]->id, s->resource, collect, &res,
						     eb);
		for (size_t k = 0; !ret && k < obj.n; k++) {
			while (r < res.n && res.step[r] <= obj.step[k]) {
				t->res = res.value[r++];
				t->has_res = true;
			}
			trial_point(s, t, obj.step[k], obj.value[k]);
		}
		free(obj.step);
		free(obj.value);
		free(res.step);
		free(res.value);
	}
	return ret;
}

static int load_one(void *ctx, const char *key, const char *text)
{
	struct master *m = ctx;
	json_t *d = json_loads(text, 0, NULL), *tr;
	struct errbuf eb = ERRBUF_INIT;
	struct experiment *e;
	json_t *sd;
	size_t k;

	if (!d)
		return YERR(IO);
	e = xcalloc(1, sizeof(*e));
	e->id = (uint64_t)get_i64(d, "id");
	e->name = dup_str(d, "name");
	e->user = dup_str(d, "user");
	e->team = dup_str(d, "team");
	e->role = get_i64(d, "role") == ROLE_ADMIN ? ROLE_ADMIN : ROLE_USER;
	e->state = (enum exp_state)get_i64(d, "state");
	e->reason = dup_str(d, "reason");
	e->spec_text = dup_str(d, "spec");
	e->code = dup_str(d, "code");
	e->seed = (uint64_t)get_i64(d, "seed");
	e->created_at = (uint64_t)get_i64(d, "created_at");
	e->finished_at = (uint64_t)get_i64(d, "finished_at");
	e->spec = xcalloc(1, sizeof(*e->spec));
	sd = e->spec_text ? json_loads(e->spec_text, 0, NULL) : NULL;
	if (!e->name || !e->user || !sd || spec_from_json(sd, e->spec, &eb) || !e->spec->sweep ||
	    (unsigned)e->state >= EXP_STATE__COUNT || e->id != m->nexps + 1) {
		json_decref(sd);
		json_decref(d);
		exp_free(e);
		return YERR(IO);
	}
	json_decref(sd);
	json_array_foreach(json_object_get(d, "trials"), k, tr) {
		struct exp_trial *t;
		size_t r;
		json_t *rung;
		ALLOC_GROW(e->trials, e->ntrials + 1, e->atrials);
		t = &e->trials[e->ntrials++];
		memset(t, 0, sizeof(*t));
		t->job = (uint64_t)get_i64(tr, "job");
		t->params = json_object_get(tr, "params") ? json_incref(json_object_get(tr, "params"))
							   : json_object();
		t->reason = dup_str(tr, "reason");
		t->paused = json_is_true(json_object_get(tr, "paused"));
		json_array_foreach(json_object_get(tr, "rungs"), r, rung) {
			json_int_t at = json_integer_value(json_array_get(rung, 0));
			if (at < 0 || at >= ES_RUNGS_MAX)
				continue;
			t->es.recorded |= 1u << at;
			t->es.rung_score[at] = json_number_value(json_array_get(rung, 1));
			if (json_is_true(json_array_get(rung, 2)))
				t->es.promoted |= 1u << at;
		}
	}
	json_decref(d);
	ALLOC_GROW(m->exps, m->nexps + 1, m->aexps);
	m->exps[m->nexps++] = e;
	(void)key;
	return 0;
}

int experiments_load(struct master *m, struct errbuf *eb)
{
	int rc = m->sops->load(m->store, STORE_EXPERIMENT, load_one, m, eb);

	if (rc) {
		if (!eb || !eb->code)
			error(eb, rc, "store: a stored experiment is corrupt");
		return rc;
	}
	/* the points, after the load: a query may not run inside another */
	for (size_t i = 0; i < m->nexps; i++)
		for (size_t k = 0; k < m->exps[i]->ntrials; k++)
			if ((rc = trial_reload(m, m->exps[i], &m->exps[i]->trials[k], eb)))
				return rc;
	return 0;
}
