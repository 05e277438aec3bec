/*
 * The docker runtime: a task in the job's image, run by a container shim
 * (shim_docker.h) through the Docker Engine API, Docker's or Podman's. It is
 * the process runtime's shim life (start, stop, wait, reattach through
 * TASKDIR/shim.pid) with two differences: the shim is the yard binary (the
 * small yard-shim has no HTTP client), and a task whose shim died while its
 * container runs gets a new shim, which adopts the container.
 */
#include "base/compat.h"
#include "agent/imagebuild.h"
#include "agent/imagestore.h"
#include "agent/runtime.h"

#include <ctype.h>

#include "agent/taskdir.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* "yard-AGENT-HASH-ID": unique per agent work dir and task (cgroup_base is
 * "yard/NAME-HASH"), in the characters container names allow. */
static char *container_name(const struct runtime_ctx *ctx, int64_t id)
{
	struct strbuf sb = STRBUF_INIT;
	for (const char *p = ctx->cgroup_base; *p; p++)
		strbuf_addch(&sb, isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.' ? *p : '-');
	strbuf_addf(&sb, "-%" PRId64, id);
	return strbuf_detach(&sb, NULL);
}

/* The task's image into the shim's conf: the one it names, or one built
 * from the code, named here by its content; the shim builds it unless the
 * engine has it (imagebuild.h). */
static int conf_image(const struct runtime_ctx *ctx, const struct runtime_task *t, const json_t *task,
		      json_t *conf, struct errbuf *eb)
{
	const json_t *build = json_object_get(task, "image_build");
	json_t *shim_build;
	char *tag;
	int ret;

	if (!build) {
		json_object_set(conf, "image", json_object_get(task, "image"));
		return 0;
	}
	ret = imagebuild_tag(json_string_value(json_object_get(build, "registry")),
			     json_string_value(json_object_get(task, "code")),
			     json_string_value(json_object_get(conf, "cwd")),
			     json_string_value(json_object_get(build, "dockerfile")),
			     json_object_get(build, "args"), &tag, eb);
	if (ret)
		return ret;
	json_object_set_new(conf, "image", json_string(tag));
	shim_build = json_deep_copy(build);
	/* with the master's store: where the shim saves what it built, for
	 * the agent to hand in (imagebuild.h) */
	if (json_is_true(json_object_get(build, "store"))) {
		char *save_dir = imagestore_save_dir(ctx->work_dir, t->id);
		json_object_set_new(shim_build, "save_dir", json_string(save_dir));
		free(save_dir);
	}
	json_object_set_new(conf, "image_build", shim_build);
	free(tag);
	return 0;
}

static int docker_start(const struct runtime_ctx *ctx, struct runtime_task *t, struct errbuf *eb)
{
	json_t *task = NULL, *conf;
	char buf[32];
	int ret;

	if (!ctx->docker_socket)
		return error(eb, YERR(BAD_REQUEST), "this agent has no container runtime (start it with "
			     "--runtime process,docker)");
	if ((ret = taskdir_read_json(t->dir, "task.json", &task, eb)))
		return ret;
	conf = runtime_shim_conf(ctx, t, task);
	if ((ret = conf_image(ctx, t, task, conf, eb))) {
		json_decref(conf);
		json_decref(task);
		return ret;
	}
	char *name = container_name(ctx, t->id);
	json_t *labels = json_object();
	snprintf(buf, sizeof(buf), "%" PRId64, t->id);
	json_object_set_new(labels, "yard.task", json_string(buf));
	snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(task, "job")));
	json_object_set_new(labels, "yard.job", json_string(buf));
	if (json_is_string(json_object_get(task, "role")))
		json_object_set(labels, "yard.role", json_object_get(task, "role"));
	json_object_set_new(labels, "yard.agent", json_string(ctx->cgroup_base));
	json_object_set_new(conf, "runtime", json_string("docker"));
	json_object_set_new(conf, "docker_socket", json_string(ctx->docker_socket));
	json_object_set_new(conf, "container", json_string(name));
	json_object_set_new(conf, "labels", labels);
	ret = taskdir_write_json(t->dir, "shim.json", conf, 0, eb);
	free(name);
	json_decref(conf);
	json_decref(task);
	return ret ? ret : runtime_shim_spawn(t, ctx->yard_exe, eb);
}

/* The shim still runs: as for a process. It died without a verdict: a new
 * shim adopts the container if it is still there (or reports how it ended),
 * and says "lost" if not. */
static int docker_reattach(const struct runtime_ctx *ctx, struct runtime_task *t)
{
	struct task_exit e;
	struct errbuf eb = ERRBUF_INIT;
	if (runtime_shim_reattach(ctx, t) == 1)
		return 1;
	if (task_exit_read(t->dir, &e, NULL) == 0 || !ctx->docker_socket)
		return 0;
	if (runtime_shim_spawn(t, ctx->yard_exe, &eb)) {
		fprintf(stderr, "yard agent: task %" PRId64 ": cannot start a shim to adopt its container: %s\n",
			t->id, eb.msg);
		return 0;
	}
	/* the adopting shim reports "running" again; the task is known to run */
	close(t->start_fd);
	t->start_fd = -1;
	t->start_known = true;
	return t->exit_fd >= 0 ? 1 : 0;
}

const struct runtime_ops runtime_docker_ops = {
	.name = "docker",
	.start = docker_start,
	.started = runtime_shim_started,
	.stop = runtime_shim_stop,
	.reattach = docker_reattach,
	.wait = runtime_shim_wait,
	.cleanup = runtime_shim_cleanup,
};
