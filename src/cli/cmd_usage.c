/* yard usage: what tasks used, by user, team or pool, as Slurm's sreport
 * reports it (GET /v1/usage, master/usage.h). */
#include "base/compat.h"

#include <inttypes.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

static double jreal(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* One row per key: its jobs, tasks, GPU- and CPU-hours, peak memory. */
static void totals(const json_t *reply, const char *by)
{
	const char *headers[] = { by, "JOBS", "TASKS", "GPU_HOURS", "CPU_HOURS", "PEAK_MEMORY" };
	struct cli_table t;
	json_t *row;
	size_t i;

	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "rows"), i, row) {
		char mem[32] = "-";
		if (json_is_integer(json_object_get(row, "memory_peak")))
			format_size((uint64_t)cli_jint(row, "memory_peak"), mem, sizeof(mem));
		cli_table_add(&t, "%s", *cli_jstr(row, "key") ? cli_jstr(row, "key") : "(none)");
		cli_table_add(&t, "%" PRId64, cli_jint(row, "jobs"));
		cli_table_add(&t, "%" PRId64, cli_jint(row, "tasks"));
		cli_table_add(&t, "%.3f", jreal(row, "gpu_seconds") / 3600);
		cli_table_add(&t, "%.3f", jreal(row, "cpu_seconds") / 3600);
		cli_table_add(&t, "%s", mem);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
}

/* --step: one row per step and key that used GPUs then. */
static void steps(const json_t *reply, const char *by)
{
	const char *headers[] = { "START", by, "GPU_HOURS" };
	struct cli_table t;
	json_t *b, *v;
	const char *key;
	size_t i;

	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "buckets"), i, b) {
		char when[32];
		format_time_utc((uint64_t)cli_jint(b, "start"), when, sizeof(when));
		json_object_foreach(json_object_get(b, "gpu_seconds"), key, v) {
			cli_table_add(&t, "%s", when);
			cli_table_add(&t, "%s", *key ? key : "(none)");
			cli_table_add(&t, "%.3f", json_number_value(v) / 3600);
		}
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
}

int cmd_usage(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *by = "user", *since = NULL, *step = NULL;
	const struct cli_option opts[] = {
		{ "by", 0, CLI_OPT_STRING, &by, "user|team|pool", "group by (default: user)" },
		{ "since", 0, CLI_OPT_STRING, &since, "DURATION", "this far back (default: 30d)" },
		{ "step", 0, CLI_OPT_STRING, &step, "DURATION", "GPU-hours per step of the window instead" },
	};
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf path = STRBUF_INIT;
	json_t *reply = NULL;
	char upper[16];
	int npos, rc;

	rc = cli_parse(ctx, "usage [--by user|team|pool] [--since DURATION] [--step DURATION]", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (strcmp(by, "user") && strcmp(by, "team") && strcmp(by, "pool"))
		return cli_usage_error(ctx, "--by: '%s' is not user, team or pool", by);
	strbuf_addf(&path, "/v1/usage?by=%s", by);
	for (int k = 0; k < 2; k++) {
		const char *v = k ? step : since;
		char *e = v ? url_escape(v) : NULL;
		if (e)
			strbuf_addf(&path, "&%s=%s", k ? "step" : "since", e);
		free(e);
	}
	rc = client_json(&ctx->client, "GET", path.buf, NULL, &reply, NULL, &eb);
	strbuf_release(&path);
	if (rc)
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
	} else {
		size_t i;
		for (i = 0; by[i] && i < sizeof(upper) - 1; i++)
			upper[i] = (char)(by[i] - 'a' + 'A');
		upper[i] = '\0';
		(step ? steps : totals)(reply, upper);
	}
	json_decref(reply);
	return EXIT_OK;
}
