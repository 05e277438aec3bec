/* The API's routes of job templates (master/templates.h) and of the git
 * pushes that run them (master/githook.h); the route table is api.c's. */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "master/githook.h"
#include "master/templates.h"

/* the template of the route's {name}, or NULL after replying 404 (the
 * route's scope let only those who may see it in) */
static struct jtemplate *path_template(struct req *r)
{
	struct jtemplate *t = templates_find(r->m, r->cap[0]);

	if (!t)
		reply_err(r, YERR(NOT_FOUND), "no template '%s'", r->cap[0]);
	return t;
}

void h_templates_post(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct caller c = caller_of(r);
	json_t *body = body_json(r);
	struct jtemplate *t;

	if (!body)
		return;
	if (templates_create(r->m, &c, body, &t, &eb))
		req_error(r, &eb);
	else
		req_json(r, 201, templates_json(t));
	json_decref(body);
}

void h_templates_list(struct req *r)
{
	struct caller c = caller_of(r);
	json_t *arr = json_array();

	for (size_t i = 0; i < r->m->ntemplates; i++)
		if (visibility_template(r->m, &c, r->m->templates[i]))
			json_array_append_new(arr, templates_json(r->m->templates[i]));
	req_json(r, 200, json_pack("{s:o}", "templates", arr));
}

void h_template_get(struct req *r)
{
	struct jtemplate *t = path_template(r);

	if (t)
		req_json(r, 200, templates_json(t));
}

void h_template_delete(struct req *r)
{
	struct jtemplate *t = path_template(r);
	json_t *doc;

	if (!t)
		return;
	doc = templates_json(t);
	templates_delete(r->m, t);
	req_json(r, 200, doc);
}

/* The event a git server says it sends (X-GitHub-Event, X-Gitea-Event,
 * X-Gogs-Event), or NULL when it says none. */
static const char *push_event(struct req *r)
{
	static const char *const headers[] = { "X-GitHub-Event", "X-Gitea-Event", "X-Gogs-Event" };

	for (size_t i = 0; i < ARRAY_SIZE(headers); i++)
		if (req_header(r, headers[i]))
			return req_header(r, headers[i]);
	return NULL;
}

void h_hook_git(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	const char *event = push_event(r);
	const char *sig = req_header(r, "X-Gitea-Signature");
	struct git_push p;
	json_t *body, *runs;

	if (!r->m->git_hook_secret) {
		reply_err(r, YERR(NOT_FOUND), "this master takes no pushes from git servers: it has no "
			  "git-hook-secret-file");
		return;
	}
	if (githook_verify(r->m->git_hook_secret, req_header(r, "X-Hub-Signature-256"),
			   sig ? sig : req_header(r, "X-Gogs-Signature"), r->body.buf, r->body.len, &eb)) {
		req_error(r, &eb);
		return;
	}
	/* a server's test delivery, or an event that runs nothing */
	if (event && strcmp(event, "push")) {
		req_json(r, 200, json_pack("{s:s, s:[]}", "event", strlen(event) <= 40 ? event : "(other)",
					   "runs"));
		return;
	}
	if (!(body = body_json(r)))
		return;
	if (githook_parse_push(body, &p, &eb)) {
		req_error(r, &eb);
		json_decref(body);
		return;
	}
	runs = json_array();
	if (p.branch && !p.deleted)
		templates_on_push(r->m, &p, runs);
	req_json(r, 202, json_pack("{s:s, s:s?, s:s, s:o}", "event", "push", "branch", p.branch, "commit", p.sha,
				   "runs", runs));
	git_push_release(&p);
	json_decref(body);
}
