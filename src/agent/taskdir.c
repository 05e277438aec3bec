#include "base/compat.h"
#include "agent/taskdir.h"

#include "base/fsutil.h"
#include "base/xalloc.h"

int taskdir_write_json(const char *dir, const char *name, const json_t *doc, unsigned flags,
		       struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", dir, name);
	char *text = json_dumps(doc, JSON_COMPACT);
	int ret = 0;
	if (!text || ((flags & TASKDIR_DURABLE) ? write_file_atomic(path, text, strlen(text), 0644)
						: write_file_replace(path, text, strlen(text), 0644)) < 0)
		ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	free(text);
	free(path);
	return ret;
}

int taskdir_read_json(const char *dir, const char *name, json_t **out, struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", dir, name);
	json_error_t jerr;
	int ret = 0;
	*out = json_load_file(path, 0, &jerr);
	if (!*out) {
		if (!path_exists(path))
			ret = error(eb, YERR(NOT_FOUND), "'%s' does not exist", path);
		else
			ret = error(eb, YERR(IO), "cannot read '%s': %s", path, jerr.text);
	}
	free(path);
	return ret;
}

int task_exit_write(const char *dir, const struct task_exit *e, struct errbuf *eb)
{
	json_t *doc = json_pack("{s:o, s:o, s:b, s:s}",
				"exit_code", e->has_code ? json_integer(e->exit_code) : json_null(),
				"signal", e->signal ? json_integer(e->signal) : json_null(),
				"oom_killed", e->oom_killed, "reason", e->reason);
	if (e->usage.has_cpu)
		json_object_set_new(doc, "cpu_usec", json_integer((json_int_t)e->usage.cpu_usec));
	if (e->usage.has_memory)
		json_object_set_new(doc, "memory_peak", json_integer((json_int_t)e->usage.memory_peak));
	int ret = taskdir_write_json(dir, "exit.json", doc, TASKDIR_DURABLE, eb);
	json_decref(doc);
	return ret;
}

json_t *task_exit_json(const struct task_exit *e)
{
	const struct cgroup_usage *u = &e->usage;

	return json_pack("{s:o, s:o, s:b, s:s, s:o, s:o}", "exit_code",
			 e->has_code ? json_integer(e->exit_code) : json_null(), "signal",
			 e->signal ? json_integer(e->signal) : json_null(), "oom_killed", e->oom_killed,
			 "message", e->reason, "cpu_usec", u->has_cpu ? json_integer((json_int_t)u->cpu_usec) : json_null(),
			 "memory_peak", u->has_memory ? json_integer((json_int_t)u->memory_peak) : json_null());
}

int task_exit_read(const char *dir, struct task_exit *e, struct errbuf *eb)
{
	json_t *doc;
	int ret = taskdir_read_json(dir, "exit.json", &doc, eb);
	memset(e, 0, sizeof(*e));
	if (ret)
		return ret;
	json_t *code = json_object_get(doc, "exit_code");
	const char *reason = json_string_value(json_object_get(doc, "reason"));
	e->has_code = json_is_integer(code);
	e->exit_code = (int)json_integer_value(code);
	e->signal = (int)json_integer_value(json_object_get(doc, "signal"));
	e->oom_killed = json_is_true(json_object_get(doc, "oom_killed"));
	snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
	e->start_failed = !strncmp(e->reason, "start_failed", 12);
	e->usage.has_cpu = json_is_integer(json_object_get(doc, "cpu_usec"));
	e->usage.cpu_usec = (uint64_t)json_integer_value(json_object_get(doc, "cpu_usec"));
	e->usage.has_memory = json_is_integer(json_object_get(doc, "memory_peak"));
	e->usage.memory_peak = (uint64_t)json_integer_value(json_object_get(doc, "memory_peak"));
	json_decref(doc);
	return 0;
}
