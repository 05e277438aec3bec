/*
 * A task's outputs (docs/api.md, "Outputs"): the dir a task writes as
 * YARD_OUTPUT_DIR (WORK/outputs/TASK: outside the task dir, which goes
 * once the task's end is acknowledged, maybe before the upload), packed as a tar.gz when the task ends
 * and handed to the master as the outputs of that task (one per attempt, as
 * each attempt is a task of its own). The pack and the upload run on a
 * libuv worker thread, never on the agent's loop.
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

/* outputs_pack packs dir as tar.gz into out (empty when dir is missing or
 * empty: *empty set). With run_as, as uid:gid (this thread's file-system
 * ids, setfsuid), so nothing the task could not read itself is packed. */
int outputs_pack(const char *dir, bool run_as, uid_t uid, gid_t gid, struct strbuf *out, bool *empty,
		 struct errbuf *eb);

/* outputs_upload queues the pack and upload of dir as task's outputs
 * (POST /v1/tasks/{task}/outputs) on loop's worker threads and returns at
 * once; strings are copied. dir is removed once the master holds it (or
 * when empty); failures are logged on stderr and leave it. */
void outputs_upload(uv_loop_t *loop, const char *master_url, const struct httpc_tls *tls,
		    const char *token, int64_t task, const char *dir, bool run_as, uid_t uid, gid_t gid);

#endif
