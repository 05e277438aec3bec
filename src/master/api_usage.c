/* GET /v1/usage (master/usage.h; the route table is api.c's): what the
 * tasks of the jobs the caller sees whole used, by user, team or pool; and
 * GET /v1/images (master/images.h): the images built from their code. */
#include "base/compat.h"
#include "master/api_handlers.h"

#include <inttypes.h>
#include <string.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "common/state.h"
#include "master/images.h"
#include "master/core.h"
#include "master/usage.h"

#define USAGE_DEFAULT_SINCE_MS (30ull * 24 * 3600 * 1000)

/* A duration query parameter name (absent: *ms unchanged): 0, or -1 after
 * replying 400 naming it. */
static int query_duration(struct req *r, const char *name, uint64_t *ms)
{
	const char *v = req_query(r, name);

	if (v && (parse_duration_str(v, ms) || !*ms)) {
		reply_err(r, YERR(BAD_REQUEST), "%s: '%s' is not a duration such as 30d, 12h or 15m", name, v);
		return -1;
	}
	return 0;
}

static const char *group_of(const struct job *j, const char *by)
{
	if (!strcmp(by, "team"))
		return j->team ? j->team : "";
	return !strcmp(by, "pool") ? j->pool : j->user;
}

void h_usage(struct req *r)
{
	struct master *m = r->m;
	struct caller c = caller_of(r);
	struct errbuf eb = ERRBUF_INIT;
	const char *by = req_query(r, "by") ? req_query(r, "by") : "user";
	uint64_t since_ms = USAGE_DEFAULT_SINCE_MS, step_ms = 0, now = wall_us(), since, step_us;
	struct usage_run *runs = NULL;
	size_t n = 0, alloc = 0;
	json_t *rows, *buckets;

	if (strcmp(by, "user") && strcmp(by, "team") && strcmp(by, "pool")) {
		reply_err(r, YERR(BAD_REQUEST), "by: '%s' is not user, team or pool", by);
		return;
	}
	if (query_duration(r, "since", &since_ms) || query_duration(r, "step", &step_ms))
		return;
	/* a window longer than the epoch, or a step longer than the window, is
	 * all of it (and never overflows) */
	since = since_ms < now / 1000 ? now - since_ms * 1000 : 0;
	step_us = step_ms < (now - since) / 1000 ? step_ms * 1000 : now - since;
	for (size_t i = 0; i < m->njobs; i++) {
		const struct job *j = m->jobs[i];
		if (!j || !visibility_job(m, &c, j) || (job_state_is_final(j->state) && j->finished_at < since))
			continue;
		for (size_t k = 0; k < j->ntasks; k++) {
			const struct task *t = j->tasks[k];
			bool ended = task_state_is_final(t->state);
			if (!t->started_at)
				continue; /* never ran */
			ALLOC_GROW(runs, n + 1, alloc);
			runs[n++] = (struct usage_run){ group_of(j, by), j->id, t->ngpus, t->started_at,
							ended && t->finished_at ? t->finished_at : now, ended,
							t->has_cpu, t->has_memory_peak, t->cpu_usec, t->memory_peak };
		}
	}
	if (usage_report(runs, n, since, now, step_us, &rows, &buckets, &eb)) {
		req_error(r, &eb);
	} else {
		json_t *doc = json_pack("{s:s, s:I, s:I, s:o}", "by", by, "since", (json_int_t)since, "until",
					(json_int_t)now, "rows", rows);
		if (buckets)
			json_object_set_new(doc, "buckets", buckets);
		json_object_set_new(doc, "step", step_us ? json_integer((json_int_t)(step_us / 1000000)) : json_null());
		req_json(r, 200, doc);
	}
	free(runs);
}

void h_images(struct req *r)
{
	struct caller c = caller_of(r);

	req_json(r, 200, images_list(r->m, &c));
}

/* An agent asks for an image before it builds it (--store-images): the
 * manifest of the image kept in the master's store, which it then fetches
 * chunk by chunk as staging does (agent/imagestore.h). */
void h_image_stored(struct req *r)
{
	const char *tag = req_query(r, "tag");
	const char *digest;

	if (!tag || !*tag) {
		reply_err(r, YERR(BAD_REQUEST), "tag: the image's name is missing (?tag=yard/build:HEX)");
		return;
	}
	if (!(digest = images_store_find(r->m, tag))) {
		reply_err(r, YERR(NOT_FOUND), "the master's store has no image '%.300s'", tag);
		return;
	}
	req_json(r, 200, json_pack("{s:s, s:s}", "tag", tag, "manifest", digest));
}
