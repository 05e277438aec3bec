/*
 * Images built from a job's code (spec `image: {build: ...}`,
 * common/spec_image.h, docs/images.md).
 *
 * The agent names the image by its content when it starts the task:
 * yard/build:SHA256 of the code's digest, the Dockerfile's path and bytes,
 * and the build's args, under the cluster's registry when the master has
 * one. The container shim (shim_docker.c) then builds it through the
 * engine's API, unless the engine has that name already or pulls it from
 * the registry (and pushes what it built there), or loads it from the
 * master's store (and saves what it built there): the same content is built
 * once per node, or once per cluster with either, and one that differs
 * in any of the three is another image. The build's output is the task's.
 */
#ifndef YARD_AGENT_IMAGEBUILD_H
#define YARD_AGENT_IMAGEBUILD_H

#include <jansson.h>

#include "agent/docker.h"
#include "base/error.h"

/* The repository built images are tagged in. */
#define IMAGEBUILD_REPO "yard/build"

/* imagebuild_tag: [REGISTRY/]IMAGEBUILD_REPO:HEX for the task's code (its
 * digest, CODE), its Dockerfile (the path DOCKERFILE in CODE_DIR) and ARGS
 * (REGISTRY: the cluster's, or NULL): 0 and *out (caller frees), or an
 * error (image_build_failed: no such file) for the task's start to fail
 * with. */
int imagebuild_tag(const char *registry, const char *code, const char *code_dir, const char *dockerfile,
		   const json_t *args, char **out, struct errbuf *eb);

/* imagebuild_ensure (DIR: the task dir, where IMAGEBUILD_FILE is written
 * once the image is there): the engine has TAG, or takes it from where
 * built images are shared (the cluster's registry, BUILD's "registry": a
 * pull; the master's store, BUILD's "store": a load of what the agent
 * fetched), or builds it from CODE_DIR with BUILD's dockerfile and args
 * ({dockerfile, args, registry, store, save_dir}, as the task's
 * image_build) and shares it there (a push; a save into save_dir); what was
 * done and the build's output go to OUT_FD; building(arg, TAG) is called
 * before a build begins. 0, or image_build_failed with the engine's error
 * and the last lines of the build's output. A share that fails is said in
 * the output, not an error: the task runs in the image built. */
int imagebuild_ensure(struct docker *d, const char *tag, const char *dir, const char *code_dir,
		      const json_t *build, int out_fd, void (*building)(void *arg, const char *tag), void *arg,
		      struct errbuf *eb);

/* The file of a task dir that says which built image its task runs in:
 * {"tag", "size" (bytes, as the engine counts them), "how": "built",
 * "pulled", "loaded" or "present"}; the agent passes it on with the task's
 * running report (yard images ls). */
#define IMAGEBUILD_FILE "image.json"

/* With the master's store (BUILD's "store": true, --store-images), the
 * agent and the shim share the work: the agent speaks to the master, the
 * shim to the engine (agent/imagestore.h).
 * - Before the task starts, the agent fetches the image the master keeps
 *   (if the engine lacks it) and writes IMAGESTORE_FETCHED in the task dir:
 *   {"tag", "file": the tar, verified} or {"tag", "error": why not}; the
 *   shim loads the file (docker load) and removes it, or builds.
 * - A shim that built the image saves it (docker save) as
 *   IMAGESTORE_SAVED in BUILD's "save_dir"; the agent hands that dir to the
 *   master once the task runs, and removes it. */
#define IMAGESTORE_FETCHED "image_store.json"
#define IMAGESTORE_SAVED "image.tar"


#endif
