/*
 * The spec's `image` field: a reference to an image the engine has or
 * pulls, or an image built from the job's own code (docs/images.md).
 *
 *   image: debian:bookworm
 *   image: {build: {dockerfile: PATH, args: {NAME: VALUE}}}
 *
 *   dockerfile  the Dockerfile's path inside the job's code, relative,
 *               without "." or ".." components (default "Dockerfile")
 *   args        the build's ARGs, as env's: names of letters, digits and
 *               '_', values strings, numbers or bools (their text)
 *
 * The code (the uploaded directory or code.git) is the build's context;
 * the image is tagged by its content (agent/imagebuild.h), so the same
 * code, Dockerfile and args are built once per engine.
 */
#ifndef YARD_COMMON_SPEC_IMAGE_H
#define YARD_COMMON_SPEC_IMAGE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"

#define SPEC_IMAGE_DOCKERFILE "Dockerfile"

struct job_spec;

struct spec_image_build {
	char *dockerfile;      /* owned path inside the code */
	json_t *args;          /* owned object of strings, never NULL */
	char *shown;           /* owned "build of PATH" (spec_image_shown) */
};

/* The known fields of image (an object) and of image.build. */
extern const char *const spec_image_fields[];
extern const char *const spec_image_build_fields[];

/* spec_image_parse validates v (NULL: none) into spec->image (a reference)
 * or spec->image_build; errors name the field ("image.build.dockerfile: ..."). */
int spec_image_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb);
/* spec_image_to_json sets doc's "image": the reference, {build: {dockerfile,
 * args}}, or null. */
void spec_image_to_json(const struct job_spec *spec, json_t *doc);
void spec_image_build_free(struct spec_image_build *b);

/* spec_image_check_code: an image built needs the job's code (its
 * context): 0, or an error naming image.build when has_code is false. */
int spec_image_check_code(const struct job_spec *spec, bool has_code, struct errbuf *eb);
/* spec_image_shown: the image as messages and the scheduler name it: the
 * reference, "build of PATH" for one built, or NULL (no image: the process
 * runtime). */
const char *spec_image_shown(const struct job_spec *spec);
/* spec_image_registry_problem: why HOST[:PORT] cannot be the registry of
 * built images (REGISTRY/yard/build:HEX), or NULL. */
const char *spec_image_registry_problem(const char *registry);
/* spec_image_ref_problem: why s is not a Docker image reference, or NULL. */
const char *spec_image_ref_problem(const char *s);

#endif
