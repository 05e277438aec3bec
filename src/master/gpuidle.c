/* GPU utilisation of jobs and idle GPUs (gpuidle.h). */
#include "base/compat.h"
#include "master/gpuidle.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "common/state.h"
#include "master/audit.h"
#include "master/core.h"
#include "master/jobs.h"

int gpuidle_parse_threshold(const char *what, const char *text, unsigned *pct, struct errbuf *eb)
{
	uint64_t v;

	if (parse_u64_str(text, &v) || v < 1 || v > 100)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a percentage of 1 to 100", what, text);
	*pct = (unsigned)v;
	return 0;
}

int gpuidle_parse_action(const char *what, const char *text, bool *stop, struct errbuf *eb)
{
	if (strcmp(text, "flag") && strcmp(text, "stop"))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected flag or stop", what, text);
	*stop = !strcmp(text, "stop");
	return 0;
}

/* Adds sample u at now: into the last point when it is within the step,
 * else as a new point; a full series first halves (neighbours averaged). */
static void series_add(struct gpu_series *s, uint64_t now, float u)
{
	s->last = u;
	if (s->n && now - s->t[s->n - 1] < s->step_us) {
		unsigned k = s->n - 1;
		s->util[k] = (s->util[k] * (float)s->count[k] + u) / (float)(s->count[k] + 1);
		s->count[k]++;
		return;
	}
	if (s->n == GPUIDLE_POINTS) {
		for (unsigned i = 0; i < GPUIDLE_POINTS / 2; i++) {
			unsigned a = 2 * i, b = a + 1, c = s->count[a] + s->count[b];
			s->util[i] = (s->util[a] * (float)s->count[a] + s->util[b] * (float)s->count[b]) / (float)c;
			s->t[i] = s->t[a];
			s->count[i] = c;
		}
		s->n = GPUIDLE_POINTS / 2;
		s->step_us = s->step_us ? 2 * s->step_us : s->t[1] - s->t[0];
	}
	s->t[s->n] = now;
	s->util[s->n] = u;
	s->count[s->n++] = 1;
}

static void set_reason(struct job *j, const char *code, const char *msg)
{
	free(j->reason_code);
	free(j->reason_msg);
	j->reason_code = code ? xstrdup(code) : NULL;
	j->reason_msg = msg ? xstrdup(msg) : NULL;
}

/* j's GPUs stayed idle for the policy's timeout: flag it (and stop it). */
static void flag(struct master *m, struct job *j, unsigned ngpus, uint64_t now)
{
	struct gpu_series *s = j->util;
	char msg[200], path[48], dur[32];
	uint64_t secs = (now - s->idle_since) / 1000000;

	s->flagged = true;
	if (secs >= 3600)
		snprintf(dur, sizeof(dur), "%" PRIu64 "h%02" PRIu64 "m", secs / 3600, secs / 60 % 60);
	else
		snprintf(dur, sizeof(dur), "%" PRIu64 "m%02" PRIu64 "s", secs / 60, secs % 60);
	snprintf(msg, sizeof(msg), "its %u GPU%s were under %u%% for %s (mean %.1f%%)%s", ngpus,
		 ngpus == 1 ? "" : "s", m->gpuidle.threshold, dur, s->idle_sum / s->idle_n,
		 m->gpuidle.stop ? "; stopped by the idle GPU policy" : "");
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64, j->id);
	audit_event(m, path, "gpus_idle");
	fprintf(stderr, "yard master: job %" PRIu64 ": %s\n", j->id, msg);
	if (m->gpuidle.stop && !jobs_end(m, j, JOB_EV_CANCEL, "gpus_idle", msg))
		return;
	set_reason(j, "gpus_idle", msg);
	core_save_job(m, j);
}

/* One sample u of j (whose tasks hold ngpus GPUs) at now. */
static void job_sampled(struct master *m, struct job *j, float u, unsigned ngpus, uint64_t now)
{
	struct gpu_series *s;

	if (!j->util)
		j->util = xcalloc(1, sizeof(*j->util));
	s = j->util;
	series_add(s, now, u); /* shown by GET /v1/jobs/{id} only: no listing changes */
	if (u >= (float)m->gpuidle.threshold) {
		s->idle_since = 0;
		s->idle_sum = 0;
		s->idle_n = 0;
		if (s->flagged && j->reason_code && !strcmp(j->reason_code, "gpus_idle")) {
			set_reason(j, NULL, NULL);
			core_save_job(m, j);
		}
		s->flagged = false;
		return;
	}
	if (!s->idle_since)
		s->idle_since = now;
	s->idle_sum += u;
	s->idle_n++;
	if (m->gpuidle.timeout_ms && !s->flagged && now - s->idle_since >= m->gpuidle.timeout_ms * 1000)
		flag(m, j, ngpus, now);
}

void gpuidle_node_sampled(struct master *m, struct node *n)
{
	uint64_t now = wall_us();

	for (size_t i = 0; i < n->nlive; i++) {
		struct task *t = n->live[i];
		unsigned known = 0, ngpus = 0;
		float sum = 0;
		if (t->state != TASK_RUNNING || !t->ngpus || t->job->state != JOB_RUNNING)
			continue;
		for (unsigned g = 0; g < t->ngpus; g++)
			for (size_t k = 0; k < n->ngpus; k++)
				if (n->gpus[k].index == t->gpus[g] && n->gpus[k].has_util) {
					sum += (float)n->gpus[k].util;
					known++;
				}
		for (size_t k = 0; k < t->job->ntasks; k++)
			if (t->job->tasks[k]->attempt == t->job->attempt)
				ngpus += t->job->tasks[k]->ngpus;
		if (known)
			job_sampled(m, t->job, sum / (float)known, ngpus, now);
	}
}

/* [[unix s, value], ...] of s. */
static json_t *points_json(const struct gpu_series *s)
{
	json_t *points = json_array();

	for (unsigned i = 0; i < s->n; i++)
		json_array_append_new(points, json_pack("[f, f]", (double)s->t[i] / 1e6, (double)s->util[i]));
	return points;
}

json_t *gpuidle_job_json(const struct job *j)
{
	const struct gpu_series *s = j->util;
	json_t *points;
	double sum = 0;
	unsigned count = 0;

	if (!s)
		return json_null();
	points = points_json(s);
	for (unsigned i = 0; i < s->n; i++) {
		sum += (double)s->util[i] * s->count[i];
		count += s->count[i];
	}
	return json_pack("{s:f, s:f, s:o, s:b, s:o}", "last", (double)s->last, "mean", count ? sum / count : 0,
			 "idle_since", s->idle_since ? json_integer((json_int_t)s->idle_since) : json_null(),
			 "flagged", s->flagged, "points", points);
}

void gpuidle_cluster_sample(struct master *m)
{
	uint64_t now = wall_us(), total = 0, held = 0;
	double sum = 0;
	unsigned known = 0;

	for (size_t i = 0; i < m->nnodes; i++) {
		const struct node *n = m->nodes[i];
		if (n->state != NODE_READY)
			continue;
		total += n->ngpus;
		for (size_t k = 0; k < n->ngpus; k++)
			if (n->gpus[k].has_util) {
				sum += n->gpus[k].util;
				known++;
			}
	}
	for (size_t i = 0; i < m->nlive; i++)
		held += m->live[i]->ngpus;
	if (known)
		series_add(&m->cluster_util, now, (float)(sum / known));
	if (total)
		series_add(&m->cluster_alloc, now, (float)(100.0 * (double)held / (double)total));
}

json_t *gpuidle_cluster_json(const struct master *m)
{
	return json_pack("{s:o, s:o}", "util", points_json(&m->cluster_util), "allocated",
			 points_json(&m->cluster_alloc));
}
