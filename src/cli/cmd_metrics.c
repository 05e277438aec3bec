/* yard metrics: a job's training metric series, one row each with a sparkline. */
#include "base/compat.h"

#include <math.h>

#include "base/xalloc.h"
#include "cli/cmd.h"

#define SPARK_WIDTH 30

void cli_sparkline(struct strbuf *out, const double *values, size_t n, size_t width)
{
	static const char *const blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584",
					      "\u2585", "\u2586", "\u2587", "\u2588" };
	size_t cols = n < width ? n : width;
	double *mean = xcalloc(cols + 1, sizeof(*mean));
	double lo = 0, hi = 0;

	for (size_t c = 0; c < cols; c++) {
		size_t from = c * n / cols, to = (c + 1) * n / cols;
		double sum = 0;
		/* divided first, so that no sum of finite values overflows */
		for (size_t i = from; i < to; i++)
			sum += values[i] / (double)(to - from);
		mean[c] = sum;
		if (!c || mean[c] < lo)
			lo = mean[c];
		if (!c || mean[c] > hi)
			hi = mean[c];
	}
	for (size_t c = 0; c < cols; c++) {
		/* a flat series is a line in the middle; halves keep hi - lo finite */
		int level = 3;
		if (hi > lo) {
			double f = (mean[c] / 2 - lo / 2) / (hi / 2 - lo / 2);
			level = isfinite(f) ? (int)(f * 7 + 0.5) : 0;
		}
		strbuf_addstr(out, blocks[level < 0 ? 0 : level > 7 ? 7 : level]);
	}
	free(mean);
}

/* The TASK cell: "worker/0", and the attempt when the job was restarted. */
static void add_task_cell(struct cli_table *t, const json_t *series)
{
	int64_t attempt = cli_jint(series, "attempt");

	if (attempt > 0)
		cli_table_add(t, "%s (attempt %" PRId64 ")", cli_jstr(series, "task"), attempt);
	else
		cli_table_add(t, "%s", cli_jstr(series, "task"));
}

static void print_series(const json_t *series)
{
	static const char *const headers[] = { "TASK", "NAME", "POINTS", "LAST STEP", "LAST VALUE",
					       "TREND" };
	struct cli_table t;
	const json_t *s;
	size_t i;

	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(series, i, s) {
		const json_t *pts = json_object_get(s, "points"), *p;
		const json_t *last = json_array_get(pts, json_array_size(pts) - 1);
		size_t n = json_array_size(pts), k;
		double *values = xcalloc(n + 1, sizeof(*values));
		struct strbuf spark = STRBUF_INIT;

		json_array_foreach(pts, k, p)
			values[k] = json_number_value(json_array_get(p, 1));
		cli_sparkline(&spark, values, n, SPARK_WIDTH);
		add_task_cell(&t, s);
		cli_table_add(&t, "%s", cli_jstr(s, "name"));
		cli_table_add(&t, "%zu", n);
		if (last) {
			cli_table_add(&t, "%" JSON_INTEGER_FORMAT, json_integer_value(json_array_get(last, 0)));
			cli_table_add(&t, "%.6g", json_number_value(json_array_get(last, 1)));
		} else {
			cli_table_add(&t, "-");
			cli_table_add(&t, "-");
		}
		cli_table_add(&t, "%s", spark.buf);
		strbuf_release(&spark);
		free(values);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
}

int cmd_metrics(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL, *name = NULL;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "only this task (every attempt)" },
		{ "name", 0, CLI_OPT_STRING, &name, "NAME", "only this series" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL, *series;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "metrics ID [--task ROLE/INDEX] [--name NAME]", opts, ARRAY_SIZE(opts),
			   argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (task && !strchr(task, '/'))
		return cli_usage_error(ctx, "expected --task ROLE/INDEX, got '%s'", task);
	if (name && !*name)
		return cli_usage_error(ctx, "--name needs a series name");
	if (client_metrics(&ctx->client, id, task, name, &doc, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
		json_decref(doc);
		return EXIT_OK;
	}
	series = json_object_get(doc, "series");
	if (!json_array_size(series))
		printf("job %" PRIu64 " has no metrics%s\n", id, task || name ? " that match" : "");
	else
		print_series(series);
	json_decref(doc);
	return EXIT_OK;
}
