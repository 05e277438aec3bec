/*
 * Task logs at the master: one blob of the store (store.h) per task and
 * stream, named logs/TASKID.stdout and logs/TASKID.stderr (with SQLite,
 * the files of those names under DATA_DIR; with PostgreSQL, rows). The
 * store is the truth about how many bytes the master holds; appends are
 * idempotent by offset (log_chunk_decide), written in the loop turn's batch
 * and acknowledged once it is committed. An acknowledged append is written,
 * not yet synced (with SQLite): a task's logs are synced when its end is
 * recorded (logs_settle), and until then its agent keeps its own copy and
 * ships again what a master that went down with its machine lost.
 */
#ifndef YARD_MASTER_LOGS_H
#define YARD_MASTER_LOGS_H

#include <stddef.h>
#include <stdint.h>

#include "master/core.h"

/* LOGS_NAME_MAX: room for a log's blob name. */
#define LOGS_NAME_MAX 48
/* logs_name writes the blob name of a task's stream into out. */
void logs_name(char out[LOGS_NAME_MAX], uint64_t task_id, enum log_stream s);
/* logs_size: bytes held for the stream (0 when nothing was shipped yet).
 * Asked of the store once per task and stream, then kept in the task
 * (t->log_size) as appends change it; a store that cannot answer gives
 * what the task's record says. */
uint64_t logs_size(struct master *m, struct task *t, enum log_stream s);
/* logs_append stores the len bytes that start at offset (in the open batch,
 * opened on demand: the reply waits for its commit); *have gets the size
 * held afterwards. YERR(CONFLICT) when offset is past the held size (a gap;
 * *have tells the agent where to resume), YERR(IO)/YERR(NO_SPACE) when the
 * store fails. */
int logs_append(struct master *m, struct task *t, enum log_stream s, uint64_t offset,
		const void *data, size_t len, uint64_t *have, struct errbuf *eb);
/* logs_settle takes the log sizes a task's end comes with from its agent
 * (sizes: {"stdout": N, "stderr": N}, as far as the agent shipped them;
 * absent from an older agent): 1 when the master holds them all, and
 * they are synced at the commit of this batch, before the end is
 * acknowledged; 0 when it holds less (its machine went down before the
 * kernel wrote back what it had acknowledged), and the end must not be
 * taken: reply's "logs" array gets {"id", "stdout", "stderr"}, the sizes
 * held, from which the agent ships again before it reports the end once
 * more; -1 when the store fails (eb). */
int logs_settle(struct master *m, struct task *t, const json_t *sizes, json_t *reply,
		struct errbuf *eb);
/* logs_stream_parse: "stdout"/"stderr" (NULL: stdout), or -1. */
int logs_stream_parse(const char *s);

/* jobs_attempt_task: the task of attempt `attempt` of job j (attempts are
 * numbered from 0, as struct job's and struct task's attempt) named
 * role/index; role NULL: the attempt's first task. NULL when there is none. */
struct task *jobs_attempt_task(const struct job *j, unsigned attempt, const char *role,
			       unsigned index);

#endif
