/*
 * What a task leaves behind, handed to the master on a libuv worker
 * thread, never on the agent's loop:
 *  - its outputs (docs/api.md, "Outputs"): the dir the task writes as
 *    YARD_OUTPUT_DIR (WORK/outputs/TASK: outside the task dir, which goes
 *    once the task's end is acknowledged, maybe before the upload), as the
 *    outputs of that task, so one per attempt;
 *  - its job's checkpoint dir, when it is its attempt's first task.
 * Both go into the chunk store that datasets use (common/chunks.h): only
 * the chunks the master lacks are sent, then their manifest. The agent
 * reports the task's end once both are done, and holds its user
 * (--run-as) until then. Outputs that could not be handed in stay on the
 * node, root's (mode 0700) when the task had a user of its own.
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

/* One dir handed in, queued by outputs_queue. */
struct outputs_job {
	const char *master_url, *token; /* copied */
	struct httpc_tls tls;           /* its strings copied */
	const char *path;               /* copied: "/v1/tasks/ID/outputs" */
	const char *dir;                /* copied: the dir to hand in */
	const char *key;                /* the reply's member naming the digest */
	const char *what;               /* for messages: "the outputs of task 7" */
	/* read dir as uid:gid (the dir is the task's to change while it is
	 * read, and nothing it could not read itself may be handed in);
	 * remove dir once handed in (or empty) */
	bool run_as, remove;
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
