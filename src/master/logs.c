#include "base/compat.h"
#include "master/logs.h"

void logs_name(char out[LOGS_NAME_MAX], uint64_t task_id, enum log_stream s)
{
	snprintf(out, LOGS_NAME_MAX, "logs/%" PRIu64 ".%s", task_id, log_stream_name(s));
}

uint64_t logs_size(struct master *m, struct task *t, enum log_stream s)
{
	struct errbuf eb = ERRBUF_INIT;
	char name[LOGS_NAME_MAX];
	uint64_t size;
	int rc;

	if (t->log_size_known[s])
		return t->log_size[s];
	logs_name(name, t->id, s);
	rc = m->sops->blob_size(m->store, name, &size, &eb);
	if (rc && rc != YERR(NOT_FOUND)) {
		fprintf(stderr, "yard master: the log size of task %" PRIu64 ": %s\n", t->id, eb.msg);
		return t->log_size[s];
	}
	t->log_size[s] = size;
	t->log_size_known[s] = true;
	return size;
}

int logs_stream_parse(const char *s)
{
	if (!s || !strcmp(s, "stdout"))
		return LOG_STDOUT;
	if (!strcmp(s, "stderr"))
		return LOG_STDERR;
	return -1;
}

int logs_append(struct master *m, struct task *t, enum log_stream s, uint64_t offset,
		const void *data, size_t len, uint64_t *have, struct errbuf *eb)
{
	char name[LOGS_NAME_MAX];
	int ret;

	*have = logs_size(m, t, s);
	ret = core_batch_open(m);
	if (ret) {
		*eb = m->batch_eb;
		return ret;
	}
	logs_name(name, t->id, s);
	ret = m->sops->blob_append(m->store, name, offset, data, len, have, eb);
	if (!ret || ret == YERR(CONFLICT)) {
		t->log_size[s] = *have;
		t->log_size_known[s] = true;
	}
	/* the job's document shows the size */
	core_job_changed(m, t->job);
	return ret;
}

int logs_settle(struct master *m, struct task *t, const json_t *sizes, json_t *reply,
		struct errbuf *eb)
{
	uint64_t have[2];
	bool lost = false;

	for (int s = 0; s < 2; s++) {
		const json_t *want = json_object_get(sizes, log_stream_name(s));
		have[s] = logs_size(m, t, s);
		lost |= json_is_integer(want) && (uint64_t)json_integer_value(want) > have[s];
	}
	if (lost) {
		json_t *logs = json_object_get(reply, "logs");
		if (!logs)
			json_object_set_new(reply, "logs", logs = json_array());
		json_array_append_new(logs, json_pack("{s:I, s:I, s:I}", "id", (json_int_t)t->id,
						       "stdout", (json_int_t)have[0], "stderr",
						       (json_int_t)have[1]));
		return 0;
	}
	if (core_batch_open(m)) {
		*eb = m->batch_eb;
		return -1;
	}
	for (int s = 0; s < 2; s++) {
		char name[LOGS_NAME_MAX];
		logs_name(name, t->id, s);
		if (have[s] && m->sops->blob_sync(m->store, name, eb))
			return -1;
	}
	return 1;
}

struct task *jobs_attempt_task(const struct job *j, unsigned attempt, const char *role,
			       unsigned index)
{
	for (size_t i = 0; i < j->ntasks; i++) {
		struct task *t = j->tasks[i];
		if (t->attempt != attempt)
			continue;
		if (!role || (!strcmp(t->role, role) && t->index == index))
			return t;
	}
	return NULL;
}
