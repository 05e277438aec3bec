/*
 * Images built from jobs' code kept in the master's store, for a cluster
 * without a registry (master's store-images, docs/images.md): the agent's
 * half of it, which speaks to the master; the shim's half, which speaks to
 * the engine, is imagebuild.c's (imagebuild.h says who writes which file).
 *
 * The image travels as a dataset's files do (common/chunks.h): one file, the
 * tar the engine saves, cut into chunks held once by their digest, and a
 * manifest the master keeps with the job that stored it. It goes in as a
 * task's outputs go (outputs.h: only the chunks the master lacks, then
 * POST /v1/tasks/{id}/image?tag=TAG with the manifest) and comes back as a
 * checkpoint does (GET /v1/images/stored?tag=TAG names the manifest, then
 * every chunk is fetched and checked against its digest), over the agent's
 * own connection and token. Both run on libuv worker threads, never on the
 * agent's loop.
 */
#ifndef YARD_AGENT_IMAGESTORE_H
#define YARD_AGENT_IMAGESTORE_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "agent/fetch.h"

/* imagestore_save_dir: WORK/images/TASK, where the shim of task saves the
 * image it built and from where the agent hands it in (caller frees). */
char *imagestore_save_dir(const char *work_dir, int64_t task);

/* imagestore_fetch, on a staging worker thread once the task's code is in
 * TASK_DIR/code: for a task (TASK_DIR/task.json) whose image is built and
 * kept in the master's store (image_build.store), when the engine at
 * DOCKER_SOCKET (NULL: no container runtime) lacks it and the master has
 * it, fetches it into TASK_DIR (every chunk and the file's size checked)
 * and writes IMAGESTORE_FETCHED there: the file, or why it could not be
 * fetched (the shim says so and builds it). Never the task's failure;
 * nothing is written when there is nothing to load. */
void imagestore_fetch(const struct fetch_config *cfg, const char *docker_socket, const char *task_dir);

/* What imagestore_hand_in needs of the agent: its connection to the master. */
struct imagestore_conn {
	const char *master_url, *token; /* copied */
	struct httpc_tls tls;           /* its strings copied */
};

/* imagestore_hand_in, on the agent's loop once task ID runs: when its shim
 * saved the image it built (WORK/images/ID/IMAGESTORE_SAVED), queues its
 * upload to the master, which keeps it as the image TAG (image.json's);
 * what became of it is said in the task's output (TASK_DIR/stdout) and the
 * dir is removed. Returns at once. */
void imagestore_hand_in(uv_loop_t *loop, const struct imagestore_conn *conn, const char *work_dir, int64_t id,
			const char *task_dir);

#endif
