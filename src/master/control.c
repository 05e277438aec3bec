#include "base/compat.h"
#include "master/control.h"

#include "base/xalloc.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/jobs.h"
#include "master/jobsource.h"
#include "master/visibility.h"

int control_check_after(struct master *m, const struct caller *c, const struct job_spec *spec,
			struct errbuf *eb)
{
	for (size_t i = 0; i < spec->nafter; i++) {
		struct job *d = core_job(m, spec->after[i]);
		char field[32];

		if (d && visibility_job(m, c, d))
			continue;
		snprintf(field, sizeof(field), "after%s[%zu]", spec->after_any ? ".any" : "", i);
		return error_field(eb, YERR(INVALID_SPEC), field, "%s: no job %" PRIu64, field,
				   spec->after[i]);
	}
	return 0;
}

enum dep_verdict { DEP_MET, DEP_WAIT, DEP_FAILED };

/* dep_verdict: what j's dependencies say now; OUT: msg, the reason of a
 * wait or a failure. */
static enum dep_verdict dep_verdict(struct master *m, const struct job *j, char *msg, size_t size)
{
	const struct job_spec *s = j->spec;

	for (size_t i = 0; i < s->nafter; i++) {
		struct job *d = core_job(m, s->after[i]);
		uint64_t id = s->after[i];

		if (!d) {
			snprintf(msg, size, "dependency job %" PRIu64 " is gone", id);
			return DEP_FAILED;
		}
		if (!job_state_is_final(d->state)) {
			snprintf(msg, size, "waits for job %" PRIu64 " to %s", id,
				 s->after_any ? "finish" : "succeed");
			return DEP_WAIT;
		}
		if (!core_job_settled(d)) {
			snprintf(msg, size, "waits for the tasks of job %" PRIu64 " to stop", id);
			return DEP_WAIT;
		}
		if (!s->after_any && d->state != JOB_SUCCEEDED) {
			snprintf(msg, size, "dependency job %" PRIu64 " %s", id,
				 d->state == JOB_CANCELLED ? "was cancelled" : "failed");
			return DEP_FAILED;
		}
	}
	return DEP_MET;
}

/* verdict: dep_verdict, then, once the dependencies are met, j's data from
 * earlier jobs pinned (jobsource.h): a job that left nothing fails j. */
static enum dep_verdict verdict(struct master *m, struct job *j, char *msg, size_t size)
{
	enum dep_verdict v = j->spec->nafter ? dep_verdict(m, j, msg, size) : DEP_MET;

	int pinned = v == DEP_MET ? jobsource_pin(m, j, msg, size) : 0;

	return pinned < 0 ? DEP_FAILED : pinned ? DEP_WAIT : v;
}

/* sweep_once marks the queued jobs of jobs[0..n) and gathers (OUT: fail,
 * nfail) those to fail. */
static void sweep_once(struct master *m, struct job **jobs, size_t n, struct job **fail, size_t *nfail)
{
	char msg[160];

	*nfail = 0;
	for (size_t i = 0; i < n; i++) {
		struct job *j = jobs[i];
		enum dep_verdict v;

		if (!j || j->state != JOB_QUEUED || !j->spec)
			continue;
		v = verdict(m, j, msg, sizeof(msg));
		if (v == DEP_FAILED) {
			fail[(*nfail)++] = j;
			continue;
		}
		j->blocked = j->held_by || v == DEP_WAIT;
		if (j->held_by) {
			control_held_reason(j, msg, sizeof(msg));
			jobs_set_wait(m, j, 0, "held", msg);
		} else if (v == DEP_WAIT) {
			jobs_set_wait(m, j, 0, "dependency", msg);
		}
	}
}

void control_sweep(struct master *m, bool full)
{
	/* read again on each sweep: an ended job leaves the queue */
	struct job ***jobs = full ? &m->queue : &m->fresh;
	size_t *n = full ? &m->nqueue : &m->nfresh;
	struct job **fail;
	size_t nfail;
	char msg[160];

	if (!*n)
		return;
	fail = xcalloc(*n, sizeof(*fail));
	/* failing a job may fail the jobs after it: sweep until none fails */
	for (;;) {
		sweep_once(m, *jobs, *n, fail, &nfail);
		if (!nfail)
			break;
		for (size_t k = 0; k < nfail; k++) {
			verdict(m, fail[k], msg, sizeof(msg));
			fail[k]->blocked = false;
			jobs_end(m, fail[k], JOB_EV_DEPENDENCY_FAILED, "dependency", msg);
		}
	}
	free(fail);
}

void control_held_reason(const struct job *j, char *msg, size_t len)
{
	snprintf(msg, len, "held by %s", j->held_by);
}

int control_hold(struct master *m, struct job *j, const char *by, struct errbuf *eb)
{
	if (j->state != JOB_QUEUED)
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is %s: only a queued job can be held",
			     j->id, job_state_name(j->state));
	if (j->held_by)
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is already held by %s", j->id,
			     j->held_by);
	j->held_by = xstrdup(by);
	j->blocked = true;
	core_save_job(m, j);
	m->sched_needed = true;
	return 0;
}

int control_release(struct master *m, struct job *j, struct errbuf *eb)
{
	if (!j->held_by)
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is not held", j->id);
	free(j->held_by);
	j->held_by = NULL;
	j->blocked = false;
	core_save_job(m, j);
	m->sched_needed = true;
	return 0;
}

int control_pause(struct master *m, struct job *j, const char *by, const char *why)
{
	if (j->state != JOB_RUNNING && j->state != JOB_STARTING)
		return -1;
	jobs_preempt(m, j, why);
	free(j->held_by);
	j->held_by = xstrdup(by);
	j->blocked = true;
	core_save_job(m, j);
	m->sched_needed = true;
	return 0;
}

int control_set_priority(struct master *m, struct job *j, const char *name, struct errbuf *eb)
{
	static const char *const names[] = { "low", "normal", "high" };
	int p = -1;

	for (size_t i = 0; name && i < ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i]))
			p = (int)i;
	if (p < 0)
		return error_field(eb, YERR(BAD_REQUEST), "priority",
				   "priority: expected low, normal or high, got '%s'",
				   name ? name : "(not a string)");
	if (job_state_is_final(j->state))
		return error(eb, YERR(CONFLICT), "job %" PRIu64 " is already %s", j->id,
			     job_state_name(j->state));
	j->priority = (enum spec_priority)p;
	core_save_job(m, j);
	m->sched_needed = true;
	return 0;
}
