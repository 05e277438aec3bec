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

/* Stores the manifest of what a task left, the body's {"manifest": {"files":
 * [...]}}, as datasets_manifest_put: 0, or the error reply is sent. */
static int put_left(struct req *r, json_t *body, char digest[72], uint64_t *size, unsigned *files)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int rc = datasets_manifest_put(r->m, json_object_get(body, "manifest"), digest, size, files, &reply, &eb);

	if (rc == YERR(MISSING_CHUNKS))
		reply_err_with(r, &eb, "missing", json_incref(json_object_get(reply, "missing")));
	else if (rc)
		req_error(r, &eb);
	json_decref(reply);
	return rc;
}

/* A task's checkpoint dir as it ended, its chunks handed in by its agent:
 * what a restart of the job starts from, on any node. The one it replaces
 * goes unless something else holds it. */
void h_task_checkpoint(struct req *r)
{
	struct task *t = path_agent_task(r);
	json_t *body = t ? body_json(r) : NULL;
	char digest[72];
	uint64_t size;
	unsigned files;

	if (!body)
		return;
	if (!put_left(r, body, digest, &size, &files)) {
		if (t->job->checkpoint && strcmp(t->job->checkpoint, digest))
			datasets_drop_manifest(r->m, t->job->checkpoint);
		core_set_checkpoint(r->m, t->job, digest);
		req_json(r, 201, json_pack("{s:s, s:I, s:i}", "checkpoint", digest, "size", (json_int_t)size,
					   "files", (int)files));
	}
	json_decref(body);
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

/* A task's outputs dir as it ended, its chunks handed in by its agent:
 * kept with the task (so per attempt), readable by whoever may see the job
 * whole. */
void h_task_outputs(struct req *r)
{
	struct task *t = path_agent_task(r);
	json_t *body = t ? body_json(r) : NULL;
	char digest[72];
	uint64_t size;
	unsigned files;

	if (!body)
		return;
	if (!put_left(r, body, digest, &size, &files)) {
		if (t->outputs && strcmp(t->outputs, digest))
			datasets_drop_manifest(r->m, t->outputs);
		free(t->outputs);
		t->outputs = xstrdup(digest);
		t->outputs_size = size;
		json_decref(t->outputs_files);
		t->outputs_files = listing(json_object_get(body, "manifest"), files);
		codeindex_add(&r->m->code_index, digest, t->job->id);
		core_save_task(r->m, t);
		req_json(r, 201, json_pack("{s:s, s:I, s:i}", "outputs", digest, "size", (json_int_t)size,
					   "files", (int)files));
	}
	json_decref(body);
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
