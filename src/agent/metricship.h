/*
 * Shipping a task's training metrics (docs/protocol.md, "Metrics"). The
 * agent's shipper thread, never the task's path, reads the task's output
 * files TASKDIR/stdout and TASKDIR/stderr line by line from a cursor, parses
 * each line (common/metricparse.h) and posts the points in batches:
 *
 *   POST /v1/tasks/ID/metrics?stream=S&offset=CURSOR
 *   {"end": END, "points": [{"name", "step" (or null), "value", "time"}]}
 *
 * A batch covers the complete lines of [CURSOR, END): at most 10,000 points
 * and at most 64 MiB of output. The master stores a batch once (by offset) and
 * answers 200 {"offset": E} (E >= END), or 409 {"offset": E} when it holds a
 * different cursor; then the agent parses again from E. The acknowledged
 * cursor and the parser state at it are kept in TASKDIR/metrics.json, so an
 * agent killed at any point and restarted loses and duplicates nothing.
 *
 * Lines longer than METRIC_LINE_MAX are skipped unparsed. A last line
 * without '\n' is parsed once the task has finished. Points are timed with
 * the agent's clock when it parses their line.
 */
#ifndef YARD_AGENT_METRICSHIP_H
#define YARD_AGENT_METRICSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "common/httpc.h"

/* Batch limits. */
#define METRIC_BATCH_POINTS 10000
/* A batch covers at most this much output: the parse again after an agent
 * restart, from the acknowledged cursor. Output without points used to
 * cost a batch (a commit at the master) every MiB, 1,024 of them for a
 * gigabyte of plain log lines. */
#define METRIC_BATCH_BYTES ((uint64_t)64 << 20)

struct metric_ship;

/* metric_ship_new starts shipping the task in dir (task id task_id) from the
 * cursors of dir/metrics.json (0 when absent). Caller frees with
 * metric_ship_free. */
struct metric_ship *metric_ship_new(const char *dir, int64_t task_id);
void metric_ship_free(struct metric_ship *ms);

/* metric_ship_run parses what is new in both streams and posts it through c,
 * a few batches at most per call. finished: the task has ended, its files
 * are complete. Returns 1 when every point up to the end of both files is
 * acknowledged (with finished: the task's metrics are all at the master),
 * 0 when work is left, or the error of a failed request (*status: its HTTP
 * status, 0 when none came); a failed batch is posted again by the next
 * call. */
int metric_ship_run(struct metric_ship *ms, struct httpc *c, bool finished, long *status,
		    struct errbuf *eb);

/* metric_ship_checkpoint_at: the wall_us time at which the last line with a
 * numeric "checkpoint" member ("@yard {\"checkpoint\": 120}", the task's word
 * that it has written a checkpoint) of either stream was parsed, kept across
 * agent restarts in metrics.json; 0 when none. A line parsed again (a batch
 * posted again) may move it a little later. */
int64_t metric_ship_checkpoint_at(const struct metric_ship *ms);

#endif
