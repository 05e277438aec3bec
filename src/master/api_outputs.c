/*
 * What a job leaves behind (docs/api.md, "Outputs"): each task's
 * YARD_OUTPUT_DIR and the job's checkpoint dir, both tar.gz archives in the
 * store (code/HEX.tar.gz, downloaded as GET /v1/code/{digest}), handed in by
 * the agents and listed per task and attempt for those who may see the job
 * whole.
 */
#include "base/compat.h"
#include "master/api.h"
#include "master/api_handlers.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/codepack.h"
#include "common/state.h"
#include "master/codeindex.h"
#include "master/core.h"

/* A task's checkpoint dir, packed by its agent when the task ended: the
 * content that a restart of the job starts from, on any node. */
void h_task_checkpoint(struct req *r)
{
	struct task *t = path_agent_task(r);
	char hex[65], digest[80];

	if (!t || store_upload(r, hex))
		return;
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	core_set_checkpoint(r->m, t->job, digest);
	req_json(r, 201, json_pack("{s:s, s:I}", "checkpoint", digest, "size",
				   (json_int_t)r->upload_size));
}

/* A task's outputs dir, packed by its agent when the task ended: kept with
 * the task (so per attempt), readable by whoever may read the job's code. */
void h_task_outputs(struct req *r)
{
	struct task *t = path_agent_task(r);
	char hex[65], digest[80];

	if (!t || store_upload(r, hex))
		return;
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	free(t->outputs);
	t->outputs = xstrdup(digest);
	t->outputs_size = r->upload_size;
	json_decref(t->outputs_files);
	t->outputs_files = NULL;
	codeindex_add(&r->m->code_index, digest, t->job->id);
	core_save_task(r->m, t);
	req_json(r, 201, json_pack("{s:s, s:I}", "outputs", digest, "size", (json_int_t)r->upload_size));
}

/* The files of a task's outputs archive, as its agent read them from the
 * archive it handed in: {"outputs": DIGEST, "files": [{"path", "size"}],
 * "count": N}, at most OUTPUTS_FILES_MAX files listed of the N. */
void h_task_outputs_files(struct req *r)
{
	struct task *t = path_agent_task(r);
	const json_t *files, *f, *count;
	const char *digest;
	json_t *body, *kept;
	size_t i;

	if (!t || !(body = body_json(r)))
		return;
	digest = json_string_value(json_object_get(body, "outputs"));
	files = json_object_get(body, "files");
	count = json_object_get(body, "count");
	if (!digest || !t->outputs || strcmp(digest, t->outputs)) {
		reply_err(r, YERR(CONFLICT), "outputs: not task %" PRIu64 "'s outputs archive", t->id);
		json_decref(body);
		return;
	}
	if (!json_is_array(files) || json_array_size(files) > OUTPUTS_FILES_MAX || !json_is_integer(count) ||
	    json_integer_value(count) < (json_int_t)json_array_size(files)) {
		reply_err(r, YERR(BAD_REQUEST), "files: expected at most %d {path, size} and count, the "
			  "number of files in all", OUTPUTS_FILES_MAX);
		json_decref(body);
		return;
	}
	kept = json_array();
	json_array_foreach(files, i, f) {
		const char *path = json_string_value(json_object_get(f, "path"));
		json_t *size = json_object_get(f, "size");
		if (!path || strlen(path) > 4096 || !json_is_integer(size) || json_integer_value(size) < 0) {
			json_decref(kept);
			json_decref(body);
			reply_err(r, YERR(BAD_REQUEST), "files[%zu]: expected {path, size}", i);
			return;
		}
		json_array_append_new(kept, json_pack("{s:s, s:O}", "path", path, "size", size));
	}
	json_decref(t->outputs_files);
	t->outputs_files = json_pack("{s:o, s:O}", "files", kept, "count", count);
	core_save_task(r->m, t);
	req_json(r, 200, json_pack("{s:I}", "count", json_integer_value(count)));
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
