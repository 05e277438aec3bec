/*
 * Datasets (docs/datasets.md): names, chunk digests and manifests, shared by
 * the master (which validates what it is sent) and the CLI (which builds
 * manifests). Pure: no I/O.
 */
#ifndef YARD_COMMON_DATASET_H
#define YARD_COMMON_DATASET_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define DATASET_CHUNK_MAX ((uint64_t)8 << 20) /* bytes of a chunk */
#define DATASET_PATH_MAX 4096                  /* bytes of a manifest path */
#define DATASET_FILES_MAX 1000000              /* files of a manifest */

/* dataset_name_valid: [a-z0-9][a-z0-9_.-]{0,62}, and not "." or "..". */
bool dataset_name_valid(const char *s);
/* dataset_digest_valid: "sha256:" and 64 lowercase hex digits. */
bool dataset_digest_valid(const char *s);
/* dataset_path_valid: a manifest path: relative, '/'-separated, no empty,
 * "." or ".." component, 1..4096 bytes, no NUL or newline. */
bool dataset_path_valid(const char *s);

/* manifest_validate checks a manifest's shape strictly: an object with only
 * "files", an array of objects with exactly path, size, mode and chunks;
 * valid paths, sorted by byte order and unique (so no file is also a
 * directory of another: "a" and "a/b" are refused), sizes >= 0, mode
 * 0..0777, chunk digests valid, an empty file has no chunks and a non-empty
 * one between ceil(size / 8 MiB) and size chunks. Errors are
 * YERR(BAD_REQUEST) with the field "manifest.files[3].path". OUT: *size the
 * sum of the file sizes, *files their number (either may be NULL). */
int manifest_validate(const json_t *manifest, uint64_t *size, unsigned *files, struct errbuf *eb);

/* manifest_digest: "sha256:" + sha256 of json_dumps(manifest, JSON_COMPACT |
 * JSON_SORT_KEYS), into out[72]. */
void manifest_digest(const json_t *manifest, char out[72]);

/* manifest_merge: one manifest of several, manifests[i]'s files under
 * dirs[i] ("worker-0/model.pt"; "" keeps its paths), sorted (a new
 * reference; the caller validates it: two parts may name one path). */
json_t *manifest_merge(const char *const *dirs, json_t *const *manifests, size_t n);

#endif
