/* A process started inside a running task (taskproc.h). */
#include "base/compat.h"
#include "agent/taskproc.h"

#include "agent/taskdir.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

static const char *conf_str(const json_t *conf, const char *key)
{
	return json_string_value(json_object_get(conf, key));
}

char **taskproc_env(const json_t *task, const json_t *conf)
{
	json_t *env = json_object_get(task, "env");
	size_t n = json_object_size(env) + 8, k = 0;
	char **out = xcalloc(n, sizeof(*out));
	const char *key;
	json_t *v;

	json_object_foreach(env, key, v) {
		if (!json_is_string(v) || !strcmp(key, "YARD_CHECKPOINT_DIR") || !strcmp(key, "YARD_DATA_DIR") ||
		    !strcmp(key, "YARD_OUTPUT_DIR"))
			continue;
		out[k++] = xasprintf("%s=%s", key, json_string_value(v));
	}
	out[k++] = xasprintf("YARD_CHECKPOINT_DIR=%s", conf_str(conf, "checkpoint_dir"));
	out[k++] = xasprintf("YARD_DATA_DIR=%s", conf_str(conf, "data_dir"));
	if (conf_str(conf, "output_dir"))
		out[k++] = xasprintf("YARD_OUTPUT_DIR=%s", conf_str(conf, "output_dir"));
	if (!json_object_get(env, "PATH"))
		out[k++] = xstrdup("PATH=" TASKPROC_DEFAULT_PATH);
	if (!json_object_get(env, "YARD_MASTER") && conf_str(conf, "master_url"))
		out[k++] = xasprintf("YARD_MASTER=%s", conf_str(conf, "master_url"));
	/* what a `yard` inside the task needs to trust an https master */
	if (!json_object_get(env, "YARD_CA") && conf_str(conf, "master_ca"))
		out[k++] = xasprintf("YARD_CA=%s", conf_str(conf, "master_ca"));
	if (!json_object_get(env, "YARD_PIN") && conf_str(conf, "master_pin"))
		out[k++] = xasprintf("YARD_PIN=%s", conf_str(conf, "master_pin"));
	if (!json_object_get(env, "HOME"))
		out[k++] = xasprintf("HOME=%s", conf_str(conf, "cwd"));
	out[k] = NULL;
	return out;
}

void taskproc_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int taskproc_user(const json_t *conf, struct spawn_opts *o, struct errbuf *eb)
{
	json_t *ra = json_object_get(conf, "run_as");
	json_int_t uid = json_integer_value(json_object_get(ra, "uid"));
	json_int_t gid = json_integer_value(json_object_get(ra, "gid"));

	if (!ra)
		return 0;
	if (uid <= 0 || gid <= 0 || uid >= UINT32_MAX || gid >= UINT32_MAX)
		return error(eb, YERR(BAD_REQUEST), "shim.json: run_as uid %" JSON_INTEGER_FORMAT
			     " gid %" JSON_INTEGER_FORMAT " refused (not root, below 2^32-1)", uid, gid);
	o->flags |= SPAWN_SETUID;
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	return 0;
}

/* The task's PATH in env ("PATH=..."), or the default. */
static const char *env_path(char **env)
{
	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], "PATH=", 5))
			return env[i] + 5;
	return TASKPROC_DEFAULT_PATH;
}

/* The first DIR/name of path that is an executable file, or NULL (caller
 * frees). An empty entry of path is the working dir, as for execvp. */
static char *path_lookup(const char *name, const char *path, const char *cwd)
{
	for (const char *p = path;;) {
		size_t n = strcspn(p, ":");
		char *cand = n ? xasprintf("%.*s/%s", (int)n, p, name) : xasprintf("%s/%s", cwd, name);
		struct stat st;
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (!p[n])
			return NULL;
		p += n + 1;
	}
}

int taskproc_prepare(struct taskproc *p, const char *dir, const json_t *argv, struct errbuf *eb)
{
	json_t *task = NULL, *conf = NULL, *v;
	const char *rel, *yard_exe;
	size_t i;
	int ret;

	memset(p, 0, sizeof(*p));
	spawn_opts_init(&p->user);
	if ((ret = taskdir_read_json(dir, "task.json", &task, eb)) ||
	    (ret = taskdir_read_json(dir, "shim.json", &conf, eb)))
		goto out;
	if (!json_array_size(argv)) {
		ret = error(eb, YERR(BAD_REQUEST), "nothing to run: the command is empty");
		goto out;
	}
	p->argv = xcalloc(json_array_size(argv) + 1, sizeof(*p->argv));
	json_array_foreach(argv, i, v)
		p->argv[i] = xstrdup(json_is_string(v) ? json_string_value(v) : "");
	p->env = taskproc_env(task, conf);
	p->cwd = xstrdup(conf_str(conf, "cwd") ? conf_str(conf, "cwd") : "/");
	yard_exe = conf_str(conf, "yard_exe");
	if (!strcmp(p->argv[0], "yard") && yard_exe) {
		free(p->argv[0]);
		p->argv[0] = xstrdup(yard_exe);
	} else if (!*p->argv[0]) {
		ret = error(eb, YERR(BAD_REQUEST), "nothing to run: the command's first word is empty");
		goto out;
	} else if (!strchr(p->argv[0], '/')) {
		char *found = path_lookup(p->argv[0], env_path(p->env), p->cwd);
		if (!found) {
			ret = error(eb, YERR(NOT_FOUND), "'%s' is not an executable in the task's PATH (%s)",
				    p->argv[0], env_path(p->env));
			goto out;
		}
		free(p->argv[0]);
		p->argv[0] = found;
	}
	if ((ret = taskproc_user(conf, &p->user, eb)))
		goto out;
	rel = conf_str(conf, "cgroup_rel");
	if (rel) {
		const struct cgroup_ops *ops = cgroup_detect(conf_str(conf, "cgroup_root"));
		if (ops) {
			cgroup_init(&p->cg, ops, conf_str(conf, "cgroup_root"), rel);
			p->have_cg = true;
		}
	}
out:
	json_decref(task);
	json_decref(conf);
	return ret;
}

void taskproc_spawn_opts(const struct taskproc *p, struct spawn_opts *o)
{
	o->argv = p->argv;
	o->env = p->env;
	o->cwd = p->cwd;
	o->cgroup_procs = p->have_cg ? (const char *const *)p->cg.join : NULL;
	o->flags |= p->user.flags & SPAWN_SETUID;
	o->uid = p->user.uid;
	o->gid = p->user.gid;
}

void taskproc_release(struct taskproc *p)
{
	taskproc_strv_free(p->argv);
	taskproc_strv_free(p->env);
	free(p->cwd);
	if (p->have_cg)
		cgroup_release(&p->cg);
	memset(p, 0, sizeof(*p));
}
