/*
 * Private to the API's files (api.c, api_access.c, api_logs.c): the helpers every
 * handler uses, and the handlers the route table in api.c names from the
 * other files.
 */
#ifndef YARD_MASTER_API_HANDLERS_H
#define YARD_MASTER_API_HANDLERS_H

#include <jansson.h>

#include "master/http.h"
#include "master/visibility.h"

/* reply_err answers r with an error of code and a message. */
void reply_err(struct req *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* reply_err_with: the error of eb with one more member (key: v, stolen) in
 * its error object. */
void reply_err_with(struct req *r, const struct errbuf *eb, const char *key, json_t *v);
/* body_json: r's JSON body (new reference), or NULL after replying with an
 * error (not JSON, not an object, nested too deep). */
json_t *body_json(struct req *r);
/* path_job: the job of the route's {id}, or NULL after replying 404. */
struct job *path_job(struct req *r);
/* caller_of: r's caller as the visibility rule sees it. */
struct caller caller_of(const struct req *r);

/* path_agent_task: the task of r's {id}, or NULL after replying 404. */
struct task *path_agent_task(struct req *r);
/* store_upload puts r's streamed upload into the store as code/HEX.tar.gz
 * in the open batch; OUT hex its digest. Replies with the error, -1. */
int store_upload(struct req *r, char hex[65]);

/* api_templates.c */
void h_templates_post(struct req *r);
void h_templates_list(struct req *r);
void h_template_get(struct req *r);
void h_template_delete(struct req *r);
void h_hook_git(struct req *r);

/* api_elastic.c */
void h_provisioners(struct req *r);

/* api_usage.c */
void h_usage(struct req *r);
void h_images(struct req *r);
void h_image_stored(struct req *r);

/* api_outputs.c */
void h_task_checkpoint(struct req *r);
void h_task_outputs(struct req *r);
void h_task_image(struct req *r);
void h_job_outputs(struct req *r);

/* api_access.c */
void h_whoami(struct req *r);
void h_admin_reload(struct req *r);
void h_tokens(struct req *r);
void h_tokens_list(struct req *r);
void h_token_revoke(struct req *r);
void h_audit(struct req *r);

/* api_control.c */
void h_job_cancel(struct req *r);
void h_job_hold(struct req *r);
void h_job_release(struct req *r);
void h_job_update(struct req *r);
/* api_experiments.c */
void h_experiments_post(struct req *r);
void h_experiments_list(struct req *r);
void h_experiment_get(struct req *r);
void h_experiment_cancel(struct req *r);
/* api_sessions.c */
void h_exec_session(struct req *r);
void h_attach_session(struct req *r);
void h_portforward_session(struct req *r);
void h_agent_session(struct req *r);
/* api_logs.c */
void h_job_logs(struct req *r);
/* api_logs_poll: a held logs request (WAIT_LOGS): true once it is answered. */
bool api_logs_poll(struct req *r, uint64_t now_ms);

#endif
