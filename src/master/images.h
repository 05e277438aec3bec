#ifndef YARD_MASTER_IMAGES_H
#define YARD_MASTER_IMAGES_H
/*
 * The images built from jobs' code that their tasks ran in (docs/images.md):
 * what a task's agent reports when it runs (its image's name, size and how
 * it came: built, pulled from the cluster's registry, present), kept with
 * the job as "image_built", with the repository and commit of its code.
 * GET /v1/images (yard images ls) lists them, one entry per image, from
 * the jobs the caller may see.
 */
#include <jansson.h>

#include "master/core.h"
#include "master/visibility.h"

/* images_reported takes a running report's "image" of task t (anything
 * malformed is ignored): the job's image_built, stored when it changed. */
void images_reported(struct master *m, struct task *t, const json_t *image);

/* images_list: {"images": [{"image", "size", "git", "sha", "code",
 * "dockerfile", "built_by", "built_on", "jobs", "last_job", "last_at"}]},
 * the most recently used first, from the jobs c may see. */
json_t *images_list(struct master *m, const struct caller *c);

#endif
