/*
 * Training metrics at the master (docs/architecture.md "Metrics from training code";
 * the wire format is in docs/protocol.md). Agents parse their tasks' output
 * (src/common/metricparse.h) and post the points of each output stream in
 * batches that cover a byte range [offset, end) of the stream. The master
 * keeps a cursor per task stream: the end of the last batch it stored. A
 * batch's points and the new cursor go into the open batch transaction
 * together, so a batch is stored whole or not at all, and once: a batch
 * that ends at or before the cursor is a duplicate, acknowledged and
 * dropped. Points live only in the store, never in the master's memory.
 */
#ifndef YARD_MASTER_METRICS_H
#define YARD_MASTER_METRICS_H

#include <jansson.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "master/core.h"

/* The most points one POST may carry. */
#define METRICS_POST_MAX 10000

/* metrics_post applies one agent batch, body {"end": E, "points": [{"name",
 * "step" (integer >= 0, null or absent), "value", "time"}]}, for the bytes
 * [offset, E) of task t's stream s. A point without a step gets its series'
 * largest step + 1 (0 for the first) in that task. OUT *stored: the cursor
 * afterwards (>= E on success). Returns 0 when the points are stored (in
 * the open batch: the reply must wait for its commit) or already were;
 * YERR(CONFLICT) when the batch neither starts at the cursor nor ends at or
 * before it (*stored tells the agent where to resume); YERR(BAD_REQUEST)
 * for a malformed body (nothing stored); the store's error otherwise. */
int metrics_post(struct master *m, const struct task *t, enum log_stream s, uint64_t offset,
		 const json_t *body, uint64_t *stored, struct errbuf *eb);

/* metrics_job_doc appends the document of GET /v1/jobs/{id}/metrics to out:
 * {"job": ID, "series": [{"task": "ROLE/INDEX", "task_id", "attempt", "name",
 * "points": [[step, value, time_us], ...]}]}, series ordered by task (as the
 * spec lists them, then attempt) and name, points by step then arrival.
 * role NULL: every task, else only ROLE/index (every attempt); name NULL:
 * every series. Tasks without points have no series. */
int metrics_job_doc(struct master *m, const struct job *j, const char *role, unsigned index,
		    const char *name, struct strbuf *out, struct errbuf *eb);

#endif
