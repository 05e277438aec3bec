#ifndef YARD_MASTER_IMAGES_H
#define YARD_MASTER_IMAGES_H
/*
 * The images built from jobs' code that their tasks ran in (docs/images.md):
 * what a task's agent reports when it runs (its image's name, size and how
 * it came: built, pulled from the cluster's registry, loaded from the
 * master's store, present), and the image a node saved into the master's
 * store (--store-images) for the others to load, kept with
 * the job as "image_built", with the repository and commit of its code.
 * GET /v1/images (yard images ls) lists them, one entry per image, from
 * the jobs the caller may see.
 */
#include <jansson.h>
#include <stdbool.h>

#include "master/core.h"
#include "master/visibility.h"

/* images_reported takes a running report's "image" of task t (anything
 * malformed is ignored): the job's image_built, stored when it changed. */
void images_reported(struct master *m, struct task *t, const json_t *image);

/* images_store_put: the image tag that task t's agent saved into the
 * master's store (--store-images) as the manifest digest, kept with t's
 * job's image_built (so held, datasets.h, while the job is kept); a digest
 * it replaces is dropped. A tag that is not a built image's is
 * YERR(BAD_REQUEST) naming it. */
int images_store_put(struct master *m, struct task *t, const json_t *tag, const char *digest, struct errbuf *eb);

/* images_store_find: the digest of the manifest of image tag kept in the
 * master's store (the latest job's that stored it), or NULL. */
const char *images_store_find(const struct master *m, const char *tag);

/* images_store_holds: whether digest is the manifest of an image kept in
 * the store (agents may read it: any node may load it). */
bool images_store_holds(const struct master *m, const char *digest);

/* images_list: {"images": [{"image", "size", "git", "sha", "code",
 * "dockerfile", "built_by", "built_on", "jobs", "last_job", "last_at",
 * "stored" (kept in the master's store)}]},
 * the most recently used first, from the jobs c may see. */
json_t *images_list(struct master *m, const struct caller *c);

/* images_registry_auth: the credential of the cluster's registry (its
 * HOST[:PORT]) in the file at path (USER:PASSWORD on its first line, the
 * registry-credential-file option) as the Engine API's X-Registry-Auth
 * takes it, base64url of {"username", "password", "serveraddress"}, into
 * *out (caller frees); an error naming the option and the file, never its
 * contents. Agents get it with each task that builds an image. */
int images_registry_auth(const char *registry, const char *path, char **out, struct errbuf *eb);

#endif
