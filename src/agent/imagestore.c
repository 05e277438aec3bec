/* Built images through the master's store, the agent's half (imagestore.h). */
#include "base/compat.h"
#include "agent/imagestore.h"

#include <inttypes.h>

#include "agent/docker.h"
#include "agent/imagebuild.h"
#include "agent/outputs.h"
#include "agent/shim_docker.h"
#include "agent/taskdir.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/chunks.h"

char *imagestore_save_dir(const char *work_dir, int64_t task)
{
	return xasprintf("%s/images/%" PRId64, work_dir, task);
}

/* Whether the engine has image tag; an engine that cannot be asked is
 * taken for one without it (the shim then says what is wrong). */
static bool engine_has(const char *docker_socket, const char *tag)
{
	struct errbuf eb = ERRBUF_INIT;
	struct docker d;
	char *path = xasprintf("/images/%s/json", tag);
	long status = 0;

	docker_init(&d, docker_socket);
	if (docker_call(&d, "GET", path, NULL, &status, NULL, &eb))
		status = 0;
	docker_release(&d);
	free(path);
	return status == 200;
}

/* Fetches the image the master keeps as tag into dir/IMAGESTORE_SAVED: 0,
 * 1 when it keeps none, or why not. */
static int fetch(const struct fetch_config *cfg, const char *tag, const char *dir, struct errbuf *eb)
{
	json_t *found = NULL, *manifest = NULL;
	char *esc = url_escape(tag), *path = xasprintf("/v1/images/stored?tag=%s", esc);
	const char *digest, *file;
	struct httpc h;
	long status = 0;
	int ret;

	httpc_init_bulk(&h, cfg->master_url, &cfg->tls, cfg->token);
	h.timeout_ms = 600000;
	ret = httpc_json(&h, "GET", path, NULL, &found, &status, eb);
	if (ret && status == 404)
		ret = 1;
	if (ret)
		goto out;
	digest = json_string_value(json_object_get(found, "manifest"));
	if ((ret = chunks_manifest_get(&h, digest, &manifest, eb)))
		goto out;
	file = json_string_value(json_object_get(json_array_get(json_object_get(manifest, "files"), 0), "path"));
	if (json_array_size(json_object_get(manifest, "files")) != 1 || !file || strcmp(file, IMAGESTORE_SAVED)) {
		ret = error(eb, YERR(BAD_REQUEST), "manifest '%s' holds no image: one file '%s' expected",
			    digest, IMAGESTORE_SAVED);
		goto out;
	}
	ret = chunks_fetch(&h, manifest, dir, eb);
out:
	httpc_release(&h);
	json_decref(found);
	json_decref(manifest);
	free(path);
	free(esc);
	return ret;
}

void imagestore_fetch(const struct fetch_config *cfg, const char *docker_socket, const char *task_dir)
{
	struct errbuf eb = ERRBUF_INIT;
	char *tag = NULL, *dir = NULL, *file = NULL, *code_dir = NULL;
	json_t *doc = NULL, *task = NULL;
	const json_t *build;
	int ret;

	if (!docker_socket || taskdir_read_json(task_dir, "task.json", &task, NULL))
		return;
	build = json_object_get(task, "image_build");
	if (!json_is_true(json_object_get(build, "store")))
		goto out;
	code_dir = xasprintf("%s/code", task_dir);
	/* a missing Dockerfile: the start fails with it (runtime_docker.c) */
	if (imagebuild_tag(json_string_value(json_object_get(build, "registry")),
			   json_string_value(json_object_get(task, "code")), code_dir,
			   json_string_value(json_object_get(build, "dockerfile")), json_object_get(build, "args"),
			   &tag, &eb) ||
	    engine_has(docker_socket, tag))
		goto out;
	dir = xasprintf("%s/image-in", task_dir);
	file = xasprintf("%s/%s", dir, IMAGESTORE_SAVED);
	pthread_mutex_lock(cfg->lock);
	ret = fetch(cfg, tag, dir, &eb);
	pthread_mutex_unlock(cfg->lock);
	if (ret == 1)
		goto out; /* none kept: the shim builds it */
	if (ret) {
		fprintf(stderr, "yard agent: cannot fetch image %s from the master's store: %s\n", tag, eb.msg);
		rm_rf(dir);
		doc = json_pack("{s:s, s:s+}", "tag", tag, "error", "cannot fetch it: ", eb.msg);
	} else {
		doc = json_pack("{s:s, s:s}", "tag", tag, "file", file);
	}
	if (taskdir_write_json(task_dir, IMAGESTORE_FETCHED, doc, 0, &eb))
		fprintf(stderr, "yard agent: %s\n", eb.msg);
out:
	json_decref(doc);
	json_decref(task);
	free(tag);
	free(dir);
	free(file);
	free(code_dir);
}

/* An upload under way: what its end is said in. */
struct hand_in {
	char *task_dir, *tag;
};

static void handed_in(void *arg, const char *digest)
{
	struct hand_in *hi = arg;

	if (digest)
		shim_docker_say(hi->task_dir, "stored image %s in the master's store (%s)", hi->tag, digest);
	else
		shim_docker_say(hi->task_dir, "cannot store image %s in the master's store (other nodes build it "
				"again; the agent's log says why)", hi->tag);
	free(hi->task_dir);
	free(hi->tag);
	free(hi);
}

void imagestore_hand_in(uv_loop_t *loop, const struct imagestore_conn *conn, const char *work_dir, int64_t id,
			const char *task_dir)
{
	char *dir = imagestore_save_dir(work_dir, id), *file = xasprintf("%s/%s", dir, IMAGESTORE_SAVED);
	json_t *img = NULL;
	const char *tag;
	char *esc = NULL, *path = NULL, *what = NULL;
	struct hand_in *hi;

	if (!path_exists(file))
		goto out; /* nothing built here, or nothing saved (the shim said why) */
	if (taskdir_read_json(task_dir, IMAGEBUILD_FILE, &img, NULL) ||
	    !(tag = json_string_value(json_object_get(img, "tag")))) {
		fprintf(stderr, "yard agent: task %" PRId64 ": an image saved, and no %s names it\n", id,
			IMAGEBUILD_FILE);
		rm_rf(dir);
		goto out;
	}
	esc = url_escape(tag);
	path = xasprintf("/v1/tasks/%" PRId64 "/image?tag=%s", id, esc);
	what = xasprintf("image %s of task %" PRId64, tag, id);
	hi = xcalloc(1, sizeof(*hi));
	hi->task_dir = xstrdup(task_dir);
	hi->tag = xstrdup(tag);
	struct outputs_job j = { conn->master_url, conn->token, conn->tls, path, dir, "image", what, false, true, 0,
				 0, handed_in, hi };
	if (outputs_queue(loop, &j)) {
		free(hi->task_dir);
		free(hi->tag);
		free(hi);
		rm_rf(dir);
	}
out:
	json_decref(img);
	free(esc);
	free(path);
	free(what);
	free(dir);
	free(file);
}
