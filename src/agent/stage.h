/*
 * Staging: a task's "data" (docs/datasets.md, "The assignment") made
 * present in the node cache (agent/cache.h) and linked under the task's
 * data dir, before the task starts. Blocking: the agent calls it on a worker
 * thread, never on its event loop.
 *
 * - yard: GET /v1/manifests/{digest} and each chunk GET /v1/blobs/{digest}
 *   from the master (agent token), every chunk and the manifest verified;
 * - s3: ListObjectsV2 (path-style) and GET of every object under the
 *   prefix, signed with SigV4 by libcurl; sizes and plain-MD5 ETags checked;
 * - https/http: one GET to a file, its sha256 checked;
 * - job: each archive of an earlier job's outputs or checkpoint (the
 *   master pins them: jobsource.h) by GET /v1/code/{digest}, verified and
 *   unpacked into its dir of the entry;
 * - file: a symlink to the path, never a copy.
 */
#ifndef YARD_AGENT_STAGE_H
#define YARD_AGENT_STAGE_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/cache.h"
#include "base/error.h"
#include "common/httpc.h"

struct stage_config {
	struct cache *cache;        /* borrowed */
	const char *master_url;     /* yard sources */
	const char *token;          /* the agent's bearer token for the master */
	struct httpc_tls tls;       /* how an https master is verified; strings borrowed */
	/* s3 sources: NULL endpoint: this agent has no S3 store */
	const char *s3_endpoint;    /* "http://127.0.0.1:4569", no trailing slash needed */
	const char *s3_region;      /* "us-east-1" when NULL */
	const char *s3_key, *s3_secret;
	/* the task's data dir gets a symlink per mount (true, the process
	 * runtime) or an empty mount point per mount and a bind in binds (false,
	 * containers) */
	bool symlinks;
	/* polled between transfers and during them: non-zero gives up */
	const volatile sig_atomic_t *cancel;
	/* called at most every 250 ms and once at the end, from the staging
	 * thread, with bytes staged so far (cache hits count) and the total known */
	void (*progress)(void *arg, uint64_t staged, uint64_t total);
	void *progress_arg;
};

struct stage_result {
	json_t *keys;          /* owned array: the cache keys held for the task */
	json_t *binds;         /* owned array of [host_path, container_path] (symlinks false) */
	uint64_t transferred;  /* bytes that came over the network */
	uint64_t staged;       /* bytes of the task's data in all */
};

void stage_result_init(struct stage_result *r);
void stage_result_release(struct stage_result *r);

/* stage_data stages every entry of data (the assignment's array) and makes
 * DATA_DIR/<mount> for each. On success out holds the cache keys held for
 * the task (release them with stage_unhold when it ends). On failure nothing
 * stays held and eb says "data[I] (SOURCE): WHY"; the code is
 * YERR(UNAVAILABLE) for a store that cannot be reached, YERR(NO_SPACE) for
 * a full disk or cache, YERR(IO) for a checksum that never matched,
 * YERR(BAD_REQUEST) for an entry or a listing that is refused. */
int stage_data(const struct stage_config *cfg, const json_t *data, const char *data_dir,
	       struct stage_result *out, struct errbuf *eb);

/* stage_unhold releases the holds in keys (stage_result.keys, or what
 * staged.json kept of it). */
void stage_unhold(struct cache *c, const json_t *keys);


/* stage_s3_credentials reads AWS_ACCESS_KEY_ID=... and
 * AWS_SECRET_ACCESS_KEY=... lines from path; caller frees both. */
int stage_s3_credentials(const char *path, char **key, char **secret, struct errbuf *eb);

#endif
