/* The API's route of task logs as users read them: GET /v1/jobs/{id}/logs,
 * of any attempt of the job, and its long poll (the route table is
 * api.c's). */
#include "base/compat.h"
#include "master/api_handlers.h"

#include <microhttpd.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "master/blobreply.h"
#include "master/logs.h"

/* How long a follow request is held when nothing is new. */
#define LOG_FOLLOW_MS 20000

/* Replies with log bytes of t from r->offset (headers included). */
static void logs_reply(struct req *r, struct task *t)
{
	uint64_t size = logs_size(r->m, t, r->stream), off = r->offset, n = 0;
	struct MHD_Response *resp = NULL;
	char buf[32];

	if (off < size) {
		struct errbuf eb = ERRBUF_INIT;
		char name[LOGS_NAME_MAX];
		uint64_t want = size - off;
		if (r->limit && want > r->limit)
			want = r->limit;
		logs_name(name, t->id, r->stream);
		resp = blob_response(r->m, name, off, want, &n, &eb);
		if (!resp) {
			req_error(r, &eb);
			return;
		}
	}
	if (!resp) {
		n = 0;
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	snprintf(buf, sizeof(buf), "%" PRIu64, off + n);
	MHD_add_response_header(resp, "X-Yard-Offset", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, size);
	MHD_add_response_header(resp, "X-Yard-Size", buf);
	snprintf(buf, sizeof(buf), "%u", t->attempt);
	MHD_add_response_header(resp, "X-Yard-Attempt", buf);
	if (task_state_is_final(t->state) && off + n >= size)
		MHD_add_response_header(resp, "X-Yard-Eof", "1");
	req_set_response(r, 200, resp);
}

void h_job_logs(struct req *r)
{
	const char *task = req_query(r, "task"), *stream = req_query(r, "stream");
	const char *off = req_query(r, "offset"), *lim = req_query(r, "limit");
	const char *follow = req_query(r, "follow"), *att = req_query(r, "attempt");
	struct job *j = path_job(r);
	struct task *t = NULL;
	char *role = NULL;
	uint64_t idx = 0, attempt;

	if (!j)
		return;
	attempt = j->attempt;
	r->stream = logs_stream_parse(stream);
	if (r->stream < 0) {
		reply_err(r, YERR(BAD_REQUEST), "stream: expected stdout or stderr, got '%.64s'", stream);
		return;
	}
	if ((off && parse_u64_str(off, &r->offset)) || (lim && parse_u64_str(lim, &r->limit))) {
		reply_err(r, YERR(BAD_REQUEST), "offset and limit: expected integers >= 0");
		return;
	}
	/* attempts are numbered from 0, as the job's and its tasks' "attempt" */
	if (att && (parse_u64_str(att, &attempt) || attempt > j->attempt)) {
		reply_err(r, YERR(BAD_REQUEST), "attempt: expected an attempt of job %" PRIu64
			  " from 0 to %u, got '%.64s'", j->id, j->attempt, att);
		return;
	}
	if (task) {
		const char *slash = strrchr(task, '/');
		if (!slash || parse_u64_str(slash + 1, &idx) || idx > UINT_MAX) {
			reply_err(r, YERR(BAD_REQUEST), "task: expected ROLE/INDEX, got '%.64s'", task);
			return;
		}
		role = xstrndup(task, (size_t)(slash - task));
	}
	t = jobs_attempt_task(j, (unsigned)attempt, role, (unsigned)idx);
	free(role);
	if (!t) {
		reply_err(r, YERR(NOT_FOUND), "job %" PRIu64 " has no task '%.64s' in attempt %" PRIu64,
			  j->id, task ? task : "", attempt);
		return;
	}
	r->task_id = t->id;
	if (follow && !strcmp(follow, "1") && !task_state_is_final(t->state) &&
	    logs_size(r->m, t, r->stream) <= r->offset) {
		r->wait = WAIT_LOGS;
		r->deadline_ms = mono_ms() + LOG_FOLLOW_MS;
		return;
	}
	logs_reply(r, t);
}

bool api_logs_poll(struct req *r, uint64_t now_ms)
{
	struct task *t = core_task(r->m, r->task_id);

	if (!t) {
		reply_err(r, YERR(NOT_FOUND), "task %" PRIu64 " is gone", r->task_id);
		return true;
	}
	if (now_ms < r->deadline_ms && !task_state_is_final(t->state) &&
	    logs_size(r->m, t, r->stream) <= r->offset)
		return false;
	logs_reply(r, t);
	return true;
}
