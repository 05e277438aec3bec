/* The API's routes of control after submit: cancel, hold, release and a
 * new priority of a job (master/control.h; the route table is api.c's). */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "base/parse.h"
#include "master/control.h"
#include "master/jobs.h"

void h_job_cancel(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);

	if (!j)
		return;
	if (jobs_cancel(r->m, j, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, jobs_job_json(r->m, j, true));
}

void h_job_hold(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);
	struct caller c = caller_of(r);

	if (!j)
		return;
	if (control_hold(r->m, j, c.user, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, jobs_job_json(r->m, j, true));
}

void h_job_release(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);

	if (!j)
		return;
	if (control_release(r->m, j, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, jobs_job_json(r->m, j, true));
}

/* POST /v1/jobs/{id}: {"priority": "low"|"normal"|"high"}, the one field
 * that changes after submit for now. */
void h_job_update(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);
	json_t *body, *p;
	const char *key;

	if (!j || !(body = body_json(r)))
		return;
	json_object_foreach(body, key, p) {
		if (strcmp(key, "priority")) {
			reply_err(r, YERR(BAD_REQUEST), "%s: unknown field (a job's priority is the one "
				  "field that changes)", key);
			goto out;
		}
	}
	p = json_object_get(body, "priority");
	if (!p) {
		reply_err(r, YERR(BAD_REQUEST), "priority: required");
		goto out;
	}
	if (!json_is_string(p)) {
		char *text = json_dumps(p, JSON_ENCODE_ANY | JSON_COMPACT);
		reply_err(r, YERR(BAD_REQUEST), "priority: expected low, normal or high, got %s",
			  text ? text : "?");
		free(text);
		goto out;
	}
	struct caller c = caller_of(r);
	if (visibility_job_priority(&c, j, &eb) || control_set_priority(r->m, j, json_string_value(p), &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, jobs_job_json(r->m, j, true));
out:
	json_decref(body);
}
