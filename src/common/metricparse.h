/*
 * Training metrics in a task's output (docs/architecture.md "Metrics
 * from training code"): one line of output in, the points it holds out. Pure: no I/O, no
 * clocks, no globals. The agent runs it on every complete line of a task's
 * stdout and stderr; a struct metric_parser per stream carries what later
 * lines depend on (Caffe's current iteration, MXNet's batch count).
 *
 * A line is the bytes before its '\n' (the caller strips it). Trailing '\r's
 * are dropped, and of a line that still holds a '\r' (a progress bar redrawn
 * in place) only the part after the last '\r' counts: what a terminal shows.
 * Lines longer than METRIC_LINE_MAX bytes yield nothing.
 *
 * Grammar. NUM is a decimal number, [+-]?(D+(.D*)?|.D+)([eE][+-]?D+)?, that
 * ends the line or is followed by a space, tab, ',', ';' or ')'; "nan",
 * "inf" and numbers that overflow are not finite: that point is dropped
 * (in @yard JSON, jansson refuses them and with them the line).
 * NAME is [A-Za-z0-9_./-]+ (Caffe blob names such as "loss3/top-1" hold
 * '/' and '-'). The first rule whose marker the line holds decides; the
 * others are not tried.
 *
 * 1. Yard's own: "@yard", one or more spaces or tabs, then a JSON object
 *    (anywhere in the line, so launcher prefixes such as torchrun's
 *    "[default0]:" or mpirun's "[1,0]<stdout>:" do not matter; bytes after
 *    the object are ignored). Every top-level member whose value is a
 *    number (integer or real) becomes a point of the series named by its
 *    key, except "step": an integer >= 0 there is the step of every point of
 *    the line (otherwise they have none). Strings, booleans, nulls, arrays
 *    and objects are ignored; a line whose JSON does not parse yields
 *    nothing. Example: @yard {"step": 120, "loss": 0.31, "acc": 0.94}
 *
 * 2. Caffe (glog lines; the "I0412 10:15:30.1 123 solver.cpp:218] " prefix
 *    is optional):
 *    "Iteration N" (at the start of the line or after ' ' or ']') sets the
 *    stream's current iteration. When followed by an optional " (...)" and
 *    ", NAME = NUM" it is a point NAME at step N:
 *      Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.35  -> loss@100
 *      Iteration 100, lr = 0.01                                   -> lr@100
 *    "Iteration N, Testing net (#K)" starts test net K's results:
 *      Test net output #J: NAME = NUM ...  -> "test/NAME" (net 0) or
 *                                             "testK/NAME" at the iteration
 *      Train net output #J: NAME = NUM ... -> NAME at the iteration
 *    Caffe prints a display iteration's loss twice (the smoothed "Iteration
 *    N ..., loss = X" and the raw "Train net output #0: loss = X"): a train
 *    net output of the same name and step as the Iteration line's point is
 *    dropped, so a series has one point per step. Before any Iteration line
 *    net outputs have no step.
 *
 * 3. MXNet (logging prefixes such as "INFO:root:" are fine):
 *    "Epoch[E] Batch [B]" or "Epoch[E] Batch [A-B]" (also "Iter[E]"), then
 *    fields separated by tabs or spaces: "Speed: NUM samples/sec" is the
 *    series "samples_per_sec", each "NAME=NUM" the series NAME ("Train-"
 *    dropped from NAME: these are running values within an epoch). Their
 *    step estimates the global batch number: B plus the last B seen in each
 *    earlier epoch of the stream. It only grows, but undercounts an epoch's
 *    batches after its last report.
 *    "Epoch[E] Train-NAME=NUM", "Epoch[E] Validation-NAME=NUM" and
 *    "Epoch[E] Time cost=NUM" are "train/NAME", "validation/NAME" and
 *    "time_cost" at step E.
 *
 * 4. Keras: a progress line "N/N ..." (the two counts equal: the step or
 *    epoch is done; lines of a bar still running are running averages and
 *    yield nothing) with " - NAME: NUM" parts, Keras 2 and 3, verbose 1 or 2:
 *      1875/1875 [=====] - 3s 1ms/step - loss: 0.2950 - val_loss: 0.1
 *      1875/1875 ━━━━━━━ 3s 1ms/step - accuracy: 0.9145 - loss: 0.2950
 *    Each is a point without a step (the master numbers them).
 *
 * Series names are 1..METRIC_NAME_MAX bytes of UTF-8 without control characters
 * (metric_name_valid); a member or field whose name is not is skipped. A
 * line gives at most METRIC_LINE_POINTS points (the first ones), so that a
 * batch of points stays bounded by its lines.
 */
#ifndef YARD_METRICPARSE_H
#define YARD_METRICPARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRIC_NAME_MAX 128
#define METRIC_LINE_MAX 65536
#define METRIC_LINE_POINTS 1000
#define METRIC_NO_STEP INT64_C(-1)

struct metric_point {
	int64_t step;                   /* >= 0, or METRIC_NO_STEP */
	double value;                   /* finite */
	char name[METRIC_NAME_MAX + 1]; /* NUL-terminated, metric_name_valid */
};

/* A growable array of points; v is NULL while empty. */
struct metric_points {
	struct metric_point *v;
	size_t n, alloc;
};

#define METRIC_POINTS_INIT { NULL, 0, 0 }

void metric_points_release(struct metric_points *pts);

/* What one output stream has said that later lines depend on. Plain values:
 * copy it to snapshot it. */
struct metric_parser {
	int64_t caffe_iter;      /* N of the last "Iteration N", or -1 */
	int64_t caffe_loss_step; /* step of the last Iteration line's "loss", or -1 */
	unsigned caffe_test_net; /* K of the last "Testing net (#K)" */
	int64_t mx_epoch;        /* E of the last MXNet batch line, or -1 */
	int64_t mx_base;         /* batches counted in the stream's earlier epochs */
	int64_t mx_batch;        /* B of the last batch line of mx_epoch */
};

void metric_parser_init(struct metric_parser *p);
/* metric_parser_save: the state as a JSON object (new reference), for a
 * parser to resume where it stopped after a restart. */
json_t *metric_parser_save(const struct metric_parser *p);
/* metric_parser_load: the state from metric_parser_save's object; members
 * missing or of the wrong type keep metric_parser_init's values. */
void metric_parser_load(struct metric_parser *p, const json_t *doc);

/* metric_parse_line appends the points of one line (len bytes, no '\n'; it
 * may hold NULs and need not be NUL-terminated) to out and updates p.
 * Returns how many points it appended. */
size_t metric_parse_line(struct metric_parser *p, const char *line, size_t len,
			 struct metric_points *out);

/* metric_name_valid: 1..METRIC_NAME_MAX bytes of UTF-8, none below 0x20 nor 0x7f. */
bool metric_name_valid(const char *name, size_t len);

#endif
