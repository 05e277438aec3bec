/*
 * What a task leaves behind, packed and handed to the master on a libuv
 * worker thread, never on the agent's loop:
 *  - its outputs (docs/api.md, "Outputs"): the dir the task writes as
 *    YARD_OUTPUT_DIR (WORK/outputs/TASK: outside the task dir, which goes
 *    once the task's end is acknowledged, maybe before the upload), as the
 *    outputs of that task, so one per attempt;
 *  - its job's checkpoint dir, when it is its attempt's first task.
 * The agent reports the task's end once both are done, and holds its user
 * (--run-as) until then. Outputs that could not be handed in stay on the
 * node, root's (mode 0700) when the task had a user of its own.
 * Both are deterministic tar.gz archives (codepack.h).
 */
#ifndef YARD_AGENT_OUTPUTS_H
#define YARD_AGENT_OUTPUTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "common/httpc.h"

/* outputs_pack packs dir as tar.gz into out (nothing, *empty set, when dir
 * is missing or empty). With run_as, as uid:gid (this thread's file-system
 * ids, setfsuid): the dir is the task's to change while it is read, and
 * nothing the task could not read itself may end up in the archive. */
int outputs_pack(const char *dir, bool run_as, uid_t uid, gid_t gid, struct strbuf *out, bool *empty,
		 struct errbuf *eb);

/* One pack and POST, queued by outputs_queue. */
struct outputs_job {
	const char *master_url, *token; /* copied */
	struct httpc_tls tls;           /* its strings copied */
	const char *path;               /* copied: "/v1/tasks/ID/outputs" */
	const char *dir;                /* copied: the dir to pack */
	const char *key;                /* the reply's member naming the digest */
	/* copied, or NULL: where the archive's list of files goes once it is
	 * handed in ("/v1/tasks/ID/outputs/files", at most OUTPUTS_FILES_MAX) */
	const char *files_path;
	const char *what;               /* for messages: "the outputs of task 7" */
	bool run_as, remove;            /* pack as uid:gid; remove dir once handed in (or empty) */
	uid_t uid;
	gid_t gid;
	/* called on the loop when done (may be NULL): digest the master's
	 * "sha256:HEX", NULL when nothing was handed in (empty, or failed:
	 * logged on stderr) */
	void (*done)(void *arg, const char *digest);
	void *arg;
};

/* outputs_queue copies job and runs it on loop's worker threads; returns
 * at once. 0, or -1 (logged) when it could not be queued: done is then
 * never called. */
int outputs_queue(uv_loop_t *loop, const struct outputs_job *job);

#endif
