/*
 * What a task starts from, fetched from the master before it starts: the
 * job's code archive (kept as WORK/code/HEX.tar.gz for the job's next
 * tasks, and unpacked into each task's own code dir) and the job's latest
 * checkpoint, from the master's chunk store (WORK/checkpoints/JOB, shared
 * by the job's tasks on this node;
 * WORK/checkpoints/JOB.digest names the master's checkpoint it holds).
 *
 * Blocking: the agent calls fetch_task_inputs on a staging worker thread,
 * never on its event loop, so a large archive stalls no other task. The
 * fetches of an agent take its lock one at a time: two tasks of one job
 * starting together fetch its code and checkpoint once.
 */
#ifndef YARD_AGENT_FETCH_H
#define YARD_AGENT_FETCH_H

#include <pthread.h>
#include <stdint.h>

#include "base/error.h"
#include "common/httpc.h"

struct fetch_config {
	const char *work_dir;     /* the agent's WORK */
	const char *master_url;
	struct httpc_tls tls;     /* strings borrowed */
	const char *token;        /* the agent's bearer token */
	pthread_mutex_t *lock;    /* the agent's: one fetch at a time */
};

/* fetch_task_inputs makes the code of digest code (NULL: none) present and
 * unpacks it into code_dir (*archive_out: the archive's path, caller
 * frees; NULL without code), and makes the checkpoint dir of job hold the
 * checkpoint digest ckpt (NULL: nothing to fetch). */
int fetch_task_inputs(const struct fetch_config *cfg, const char *code, const char *code_dir, int64_t job,
		      const char *ckpt, char **archive_out, struct errbuf *eb);

/* ckpt_path: WORK/checkpoints/JOB followed by suffix ("" or ".digest");
 * caller frees. */
char *ckpt_path(const char *work_dir, int64_t job, const char *suffix);
/* ckpt_set_digest records that the checkpoint dir of job holds digest. */
void ckpt_set_digest(const char *work_dir, int64_t job, const char *digest);

#endif
