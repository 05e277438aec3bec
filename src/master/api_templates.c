/* The API's routes of job templates (master/templates.h; the route table
 * is api.c's). */
#include "base/compat.h"
#include "master/api_handlers.h"

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
