/* The API's routes of experiments (master/experiments.h; the route table
 * is api.c's). */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "base/parse.h"
#include "master/experiments.h"

/* the experiment of the route's {id}, or NULL after replying 404 (the
 * route's scope let only those who may see it in) */
static struct experiment *path_experiment(struct req *r)
{
	uint64_t id;
	struct experiment *e = NULL;

	if (!parse_u64_str(r->cap[0], &id))
		e = experiments_find(r->m, id);
	if (!e)
		reply_err(r, YERR(NOT_FOUND), "no experiment '%s'", r->cap[0]);
	return e;
}

void h_experiments_post(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct caller c = caller_of(r);
	json_t *body = body_json(r);
	struct experiment *e;
	bool again;

	if (!body)
		return;
	if (experiments_submit(r->m, &c, body, &e, &again, &eb))
		req_error(r, &eb);
	else
		req_json(r, again ? 200 : 201, experiments_json(r->m, e, true));
	json_decref(body);
}

/* GET /v1/experiments: those the caller may see, newest first. */
void h_experiments_list(struct req *r)
{
	struct caller c = caller_of(r);
	json_t *arr = json_array();

	for (size_t i = r->m->nexps; i-- > 0;)
		if (visibility_experiment(r->m, &c, r->m->exps[i]))
			json_array_append_new(arr, experiments_json(r->m, r->m->exps[i], false));
	req_json(r, 200, json_pack("{s:o}", "experiments", arr));
}

void h_experiment_get(struct req *r)
{
	struct experiment *e = path_experiment(r);

	if (e)
		req_json(r, 200, experiments_json(r->m, e, true));
}

void h_experiment_cancel(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct experiment *e = path_experiment(r);

	if (!e)
		return;
	if (experiments_cancel(r->m, e, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, experiments_json(r->m, e, true));
}
