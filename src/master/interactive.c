/* Interactive jobs: their sessions and their idle timeout (interactive.h). */
#include "base/compat.h"
#include "master/interactive.h"

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/audit.h"
#include "master/core.h"
#include "master/jobs.h"

int interactive_parse_idle(const char *what, const char *v, uint64_t *ms, struct errbuf *eb)
{
	if (parse_duration_str(v, ms))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration such as 1h (0: off)", what, v);
	return 0;
}

/* The job of id while it is interactive and not final, else NULL. */
static struct job *live_interactive(struct master *m, uint64_t id)
{
	struct job *j = core_job(m, id);

	return j && j->spec && j->spec->interactive && !job_state_is_final(j->state) ? j : NULL;
}

void interactive_session_opened(struct master *m, uint64_t job_id)
{
	struct job *j = live_interactive(m, job_id);

	if (!j)
		return;
	j->sessions++;
	core_job_changed(m, j); /* its document shows the count */
}

void interactive_session_closed(struct master *m, uint64_t job_id)
{
	struct job *j = core_job(m, job_id);

	if (!j || !j->sessions)
		return;
	if (--j->sessions == 0)
		j->detached_at = wall_us();
	core_job_changed(m, j);
}

uint64_t interactive_idle_ms(const struct master *m, const struct job *j)
{
	if (!j->spec || !j->spec->interactive)
		return 0;
	return j->spec->idle_timeout_ms ? j->spec->idle_timeout_ms : m->interactive_idle_ms;
}

const char *interactive_format_ms(uint64_t ms, char *buf, size_t len)
{
	uint64_t s = ms / 1000;

	if (ms % 1000)
		snprintf(buf, len, "%" PRIu64 ".%03" PRIu64 "s", s, ms % 1000);
	else if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h%" PRIu64 "m", s / 3600, s / 60 % 60);
	else if (s >= 60 && s % 60)
		snprintf(buf, len, "%" PRIu64 "m%" PRIu64 "s", s / 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m", s / 60);
	else
		snprintf(buf, len, "%" PRIu64 "s", s);
	return buf;
}

uint64_t interactive_idle_since(const struct master *m, const struct job *j)
{
	uint64_t since = j->running_at;

	if (j->state != JOB_RUNNING || j->sessions)
		return 0;
	if (j->detached_at > since)
		since = j->detached_at;
	if (m->started_wall_us > since)
		since = m->started_wall_us;
	return since;
}

void interactive_tick(struct master *m)
{
	uint64_t now = wall_us();

	/* a running job holds its task in the live index; the index may
	 * change under a cancellation's stops, so walk a copy */
	size_t n = m->nlive;
	struct task **live = xcalloc(n + 1, sizeof(*live));

	if (n)
		memcpy(live, m->live, n * sizeof(*live));
	for (size_t i = 0; i < n; i++) {
		struct job *j = live[i]->job;
		uint64_t idle = j ? interactive_idle_ms(m, j) : 0, since;
		char msg[160], dur[32], path[48];
		if (!idle || j->state != JOB_RUNNING || j->sessions)
			continue;
		since = interactive_idle_since(m, j);
		if (now < since || now - since < idle * 1000)
			continue;
		snprintf(msg, sizeof(msg), "no session attached for %s",
			 interactive_format_ms(idle, dur, sizeof(dur)));
		if (jobs_end(m, j, JOB_EV_CANCEL, "idle_timeout", msg))
			continue;
		snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64, j->id);
		audit_event(m, path, "idle_timeout");
		fprintf(stderr, "yard master: job %" PRIu64 ": cancelled: %s\n", j->id, msg);
	}
	free(live);
}
