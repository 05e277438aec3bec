/*
 * Task logs at the master: one file per task and stream under
 * DATA_DIR/logs/ (TASKID.stdout, TASKID.stderr). The file is the truth about
 * how many bytes the master holds; appends are idempotent by offset
 * (log_chunk_decide) and fdatasync'd before they are acknowledged.
 */
#ifndef YARD_MASTER_LOGS_H
#define YARD_MASTER_LOGS_H

#include <stddef.h>
#include <stdint.h>

#include "master/core.h"

/* logs_path: a new string, caller frees. */
char *logs_path(const struct master *m, uint64_t task_id, enum log_stream s);
/* logs_size: bytes held for the stream (0 when nothing was shipped yet). */
uint64_t logs_size(const struct master *m, uint64_t task_id, enum log_stream s);
/* logs_append stores the len bytes that start at offset; *have gets the size
 * held afterwards. YERR(CONFLICT) when offset is past the held size (a gap;
 * *have tells the agent where to resume), YERR(IO)/YERR(NO_SPACE) when the
 * disk fails. */
int logs_append(struct master *m, struct task *t, enum log_stream s, uint64_t offset,
		const void *data, size_t len, uint64_t *have, struct errbuf *eb);
/* logs_stream_parse: "stdout"/"stderr" (NULL: stdout), or -1. */
int logs_stream_parse(const char *s);

#endif
