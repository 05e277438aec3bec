/*
 * What a job leaves behind (docs/api.md, "Outputs"): each task's
 * YARD_OUTPUT_DIR and the job's checkpoint dir, both manifests of chunks in
 * the store that datasets use (datasets.h: a chunk is held once, whatever
 * holds it), handed in by the agents and listed per task and attempt for
 * those who may see the job whole.
 */
#include "base/compat.h"
#include "master/api.h"
#include "master/api_handlers.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/state.h"
#include "master/codeindex.h"
#include "master/core.h"
#include "master/datasets.h"
#include "master/images.h"

/* What a task left (its outputs or its job's checkpoint), as its agent
 * hands it in: the body {"manifest": {"files": [...]}}, its chunks held. */
struct left {
	struct task *t;
	json_t *body;
	char digest[72];
	uint64_t size;
	unsigned files;
	const char *replaced; /* the digest it replaces, or NULL */
};

/* The path's task and the body's manifest, stored as datasets_manifest_put:
 * true, or false once the error reply is sent. */
static bool take_left(struct req *r, struct left *l)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int rc;

	if (!(l->t = path_agent_task(r)) || !(l->body = body_json(r)))
		return false;
	rc = datasets_manifest_put(r->m, json_object_get(l->body, "manifest"), l->digest, &l->size, &l->files,
				   &reply, &eb);
	if (rc == YERR(MISSING_CHUNKS))
		reply_err_with(r, &eb, "missing", json_incref(json_object_get(reply, "missing")));
	else if (rc)
		req_error(r, &eb);
	json_decref(reply);
	if (rc)
		json_decref(l->body);
	return !rc;
}

/* Answers 201 {key: digest, size, files}; the manifest replaced goes unless
 * something else holds it. */
static void reply_left(struct req *r, struct left *l, const char *key)
{
	if (l->replaced && strcmp(l->replaced, l->digest))
		datasets_drop_manifest(r->m, l->replaced);
	req_json(r, 201, json_pack("{s:s, s:I, s:i}", key, l->digest, "size", (json_int_t)l->size, "files",
				   (int)l->files));
	json_decref(l->body);
}

/* A task's checkpoint dir as it ended: what a restart of the job starts
 * from, on any node. */
void h_task_checkpoint(struct req *r)
{
	struct left l;

	if (!take_left(r, &l))
		return;
	l.replaced = l.t->job->checkpoint;
	reply_left(r, &l, "checkpoint"); /* before core_set_checkpoint frees it */
	core_set_checkpoint(r->m, l.t->job, l.digest);
}

/* The image a task's node built, saved through its engine (docker save)
 * into the chunk store for the other nodes to load (--store-images,
 * images.h): ?tag=TAG, the body {"manifest"}. */
void h_task_image(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	const char *q = req_query(r, "tag");
	json_t *tag = q ? json_string(q) : NULL;
	struct left l;

	if (!r->m->store_images) {
		reply_err(r, YERR(CONFLICT), "this master keeps no images (it has no store-images)");
		goto out;
	}
	if (!take_left(r, &l))
		goto out;
	if (images_store_put(r->m, l.t, tag, l.digest, &eb)) {
		datasets_drop_manifest(r->m, l.digest);
		req_error(r, &eb);
		json_decref(l.body);
		goto out;
	}
	l.replaced = NULL; /* images_store_put dropped it */
	reply_left(r, &l, "image");
out:
	json_decref(tag);
}

/* The first OUTPUTS_FILES_MAX files of manifest, {"files": [{path, size}],
 * "count": N}: what the job's outputs document lists. */
static json_t *listing(const json_t *manifest, unsigned count)
{
	json_t *files = json_array(), *f;
	size_t i;

	json_array_foreach(json_object_get(manifest, "files"), i, f) {
		if (i == OUTPUTS_FILES_MAX)
			break;
		json_array_append_new(files, json_pack("{s:O, s:O}", "path", json_object_get(f, "path"), "size",
						       json_object_get(f, "size")));
	}
	return json_pack("{s:o, s:i}", "files", files, "count", (int)count);
}

/* A task's outputs dir as it ended: kept with the task (so per attempt),
 * readable by whoever may see the job whole. */
void h_task_outputs(struct req *r)
{
	struct left l;
	struct task *t;

	if (!take_left(r, &l))
		return;
	t = l.t;
	json_decref(t->outputs_files);
	t->outputs_files = listing(json_object_get(l.body, "manifest"), l.files);
	t->outputs_size = l.size;
	codeindex_add(&r->m->code_index, l.digest, t->job->id);
	l.replaced = t->outputs;
	reply_left(r, &l, "outputs");
	free(t->outputs);
	t->outputs = xstrdup(l.digest);
	core_save_task(r->m, t);
}

/* The "task" filter, ROLE/INDEX: OUT role (into buf) and index. */
static int parse_task_filter(const char *s, char *role, size_t cap, uint64_t *index)
{
	const char *slash = s ? strrchr(s, '/') : NULL;

	if (!slash || slash == s || (size_t)(slash - s) >= cap || parse_u64_str(slash + 1, index))
		return -1;
	memcpy(role, s, (size_t)(slash - s));
	role[slash - s] = '\0';
	return 0;
}

void h_job_outputs(struct req *r)
{
	struct job *j = path_job(r);
	const char *tq = req_query(r, "task"), *aq = req_query(r, "attempt");
	char role[128];
	uint64_t index = 0, attempt = 0;
	json_t *tasks;

	if (!j)
		return;
	if (tq && parse_task_filter(tq, role, sizeof(role), &index)) {
		reply_err(r, YERR(BAD_REQUEST), "task: '%s' is not ROLE/INDEX", tq);
		return;
	}
	if (aq && parse_u64_str(aq, &attempt)) {
		reply_err(r, YERR(BAD_REQUEST), "attempt: '%s' is not a number", aq);
		return;
	}
	tasks = json_array();
	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *t = j->tasks[i];
		if ((tq && (strcmp(t->role, role) || t->index != index)) || (aq && t->attempt != attempt))
			continue;
		json_t *files = json_object_get(t->outputs_files, "files");
		json_array_append_new(tasks, json_pack("{s:I, s:s, s:i, s:i, s:s, s:o, s:I, s:O, s:O}", "task",
						       (json_int_t)t->id, "role", t->role, "index",
						       (int)t->index, "attempt", (int)t->attempt, "state",
						       task_state_name(t->state), "outputs",
						       t->outputs ? json_string(t->outputs) : json_null(),
						       "size", (json_int_t)t->outputs_size,
						       "files", files ? files : json_null(), "files_count",
						       json_object_get(t->outputs_files, "count") ?
						       json_object_get(t->outputs_files, "count") : json_null()));
	}
	req_json(r, 200, json_pack("{s:I, s:o, s:o}", "job", (json_int_t)j->id, "checkpoint",
				   j->checkpoint ? json_string(j->checkpoint) : json_null(), "tasks", tasks));
}
