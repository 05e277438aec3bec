/*
 * Files in and out of the master's chunk store (docs/datasets.md): a dir
 * cut into chunks of DATASET_CHUNK_MAX bytes, each held once by its
 * sha256 digest whatever holds it (dataset versions, tasks' outputs, jobs'
 * checkpoints), and described by a manifest (common/dataset.h). Shared by
 * the CLI (yard data push, yard download) and the agent (outputs and
 * checkpoints handed in, checkpoints restored). Blocking; one struct httpc
 * per thread.
 */
#ifndef YARD_COMMON_CHUNKS_H
#define YARD_COMMON_CHUNKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "common/httpc.h"

/* Digests asked about per POST /v1/blobs/missing (well under its 1 MiB body). */
#define CHUNKS_MISSING_BATCH 8192
/* Chunks PUT at once by chunks_push, each on a connection of its own. */
#define CHUNKS_PUT_PARALLEL 8

struct chunks_file {
	char *rel;       /* owned: the manifest path */
	char *abs;       /* owned: where it is read from */
	uint64_t size;
	unsigned mode;
};

/* Whose the files are to read: a task's dir is read with its user's
 * file-system ids (setfsuid, this thread only), so that nothing it could
 * not read itself is handed in; the network is used as the caller. */
struct chunks_as {
	uid_t uid;
	gid_t gid;
};

/* What a dir holds, as chunks_walk found it. */
struct chunks_set {
	bool as_user;              /* read as as (below), else as the caller */
	struct chunks_as as;
	struct chunks_file *files; /* sorted by rel once walked */
	size_t n, alloc;
	/* lenient walks: what a manifest cannot hold, left out (a symbolic
	 * link to anything but a regular file, a special file, a name that is
	 * not a manifest path): the number, and up to 3 of them named by path */
	unsigned skipped;
	char skipped_names[512];
};

struct chunks_stats {
	uint64_t chunks;         /* chunks of the manifest, copies counted */
	uint64_t uploaded;       /* of them, those the master lacked and was sent */
	uint64_t uploaded_bytes;
};

/* chunks_walk collects the regular files under src: a dir (paths relative
 * to it), or one file (named by its base name). Strict (yard data push): a
 * symbolic link, a special file or a name no manifest can hold is refused,
 * naming it. Lenient (what a task left): a symbolic link to a regular file
 * is read as that file, and the rest is counted in set->skipped. A missing
 * src is YERR(NOT_FOUND) (an empty set when lenient). With as (may be
 * NULL), the walk and chunks_push's reads are made as that user. */
int chunks_walk(struct chunks_set *set, const char *src, bool lenient, const struct chunks_as *as,
		struct errbuf *eb);
void chunks_set_release(struct chunks_set *set);

/* chunks_push reads and hashes set's files, asks h's master which chunks
 * it lacks and PUTs only those, CHUNKS_PUT_PARALLEL at once (threads with
 * connections like h's, httpc_init_like): *manifest ({"files": [...]}, new reference)
 * then names chunks that are all held, until something deletes them (the
 * master keeps those of the manifests it was handed). st may be NULL. */
int chunks_push(struct httpc *h, const struct chunks_set *set, json_t **manifest, struct chunks_stats *st,
		struct errbuf *eb);

/* chunks_manifest_get: GET /v1/manifests/{digest}, checked against digest. */
int chunks_manifest_get(struct httpc *h, const char *digest, json_t **manifest, struct errbuf *eb);

/* chunks_fetch writes manifest's files under dir (made, with its parents):
 * each chunk checked against its digest, each file against its size and
 * given its mode. A file that exists already is replaced. */
int chunks_fetch(struct httpc *h, const json_t *manifest, const char *dir, struct errbuf *eb);

#endif
