/*
 * Datasets on the master (docs/datasets.md): a content-addressed chunk store
 * (the store's blobs blobs/HEX: with SQLite files of the data dir, written
 * as tmp + fsync + rename), manifests (blobs manifests/HEX.json) and named,
 * versioned datasets whose rows live in the store. Chunks and manifests are
 * written in the batch (their replies wait for its commit). Team quotas bound the unique chunk bytes of a team's
 * datasets. Everything runs on the master's loop thread.
 */
#ifndef YARD_MASTER_DATASETS_H
#define YARD_MASTER_DATASETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

/* datasets_open creates DATA_DIR/blobs and DATA_DIR/manifests (SQLite's
 * blobs; unused with PostgreSQL). */
int datasets_open(struct master *m, struct errbuf *eb);
/* datasets_parse_quota parses "TEAM=SIZE" (--data-quota) into *out (its
 * team owned); what names the flag or the config file's line and key. */
int datasets_parse_quota(const char *what, const char *arg, struct data_quota *out, struct errbuf *eb);

/* datasets_chunk_name: the store's blob of a chunk of a valid digest,
 * "blobs/HEX" (store.h), written into out. */
#define DATASETS_NAME_MAX 96
void datasets_chunk_name(char out[DATASETS_NAME_MAX], const char *digest);
/* datasets_blob_put stores one chunk under its digest after checking that
 * data hashes to it (YERR(DIGEST_MISMATCH) if not). OUT: *created false when
 * the chunk was already held. */
int datasets_blob_put(struct master *m, const char *digest, const void *data, size_t len,
		      bool *created, struct errbuf *eb);
/* datasets_missing: {"missing": [...]} for a body {"digests": [...]} (new
 * reference), or NULL with eb set. */
json_t *datasets_missing(struct master *m, const json_t *body, struct errbuf *eb);

/* datasets_create makes a version from {"name", "manifest", "team"?}
 * for caller c (team defaults to c's; another team, or a new version of a
 * dataset c may not see, is YERR(FORBIDDEN)). OUT: *reply the reply document (new
 * reference) and *status 201 or 200 (the digest equals the latest
 * version's). On YERR(MISSING_CHUNKS) *reply holds the missing digests
 * ({"missing": [...]}); on other errors *reply is NULL. */
struct caller;
int datasets_create(struct master *m, const struct caller *c, const json_t *body, json_t **reply,
		    int *status, struct errbuf *eb);

struct dataset *datasets_find(const struct master *m, const char *name);
/* datasets_version: the version n of ds (0: the latest), or NULL. */
struct dataset_version *datasets_version(struct dataset *ds, unsigned n);
json_t *datasets_list_json(const struct master *m);
json_t *datasets_json(const struct dataset *ds);
/* datasets_version_json: the version with its "manifest", or NULL (eb set). */
json_t *datasets_version_json(struct master *m, const struct dataset *ds,
			      const struct dataset_version *v, struct errbuf *eb);
/* datasets_manifest: the manifest of a digest (new reference), or NULL. */
json_t *datasets_manifest(const struct master *m, const char *digest);

/* datasets_manifest_put stores man (a manifest of held chunks: each file's
 * chunks holding exactly its bytes) in the open batch, as the manifest of
 * *digest, for what is not a dataset version: a task's outputs, a job's
 * checkpoint, what a job reads of another. YERR(MISSING_CHUNKS) with
 * *reply {"missing": [...]} (new reference) when chunks are not held. */
int datasets_manifest_put(struct master *m, const json_t *man, char digest[72], uint64_t *size, unsigned *files,
			  json_t **reply, struct errbuf *eb);
/* datasets_drop_manifest: digest is no longer held by what held it; once
 * the batch is committed, datasets_collect_garbage removes it and its
 * chunks unless something still holds them. */
void datasets_drop_manifest(struct master *m, const char *digest);

/* datasets_delete removes version n of ds (0: all of them, and the
 * dataset), refusing with YERR(IN_USE) while a queued, starting or running
 * job uses it (*jobs_out: an array of their ids, new reference). Chunks and
 * manifests no remaining version references are removed by
 * datasets_collect_garbage once the batch is committed. ds may be freed. */
int datasets_delete(struct master *m, struct dataset *ds, unsigned n, json_t **jobs_out,
		    struct errbuf *eb);

/* datasets_collect_garbage removes the files of the versions deleted (and
 * the manifests dropped) in the batch just committed: those that no
 * dataset version, task's outputs, job's checkpoint or job not final still
 * holds (committed: false after a failed commit, which
 * brought them back: nothing is removed). */
void datasets_collect_garbage(struct master *m, bool committed);

/* datasets_resolve: for a spec at submit, the resolved data entries of
 * docs/datasets.md (new reference, NULL when the spec has none), pinning
 * each yard source without a version to the latest (spec->data[i].source
 * becomes yard://NAME@N). A missing dataset or version is YERR(INVALID_SPEC)
 * naming data[i].source; one that c may not see (visibility.h) is
 * YERR(FORBIDDEN). */
int datasets_resolve(struct master *m, const struct caller *c, struct job_spec *spec, json_t **out,
		     struct errbuf *eb);

#endif
