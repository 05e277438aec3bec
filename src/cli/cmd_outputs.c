/* yard outputs: the files a job's tasks left in YARD_OUTPUT_DIR, per task
 * and attempt, and the job's checkpoint (docs/api.md, "Outputs"). */
#include "base/compat.h"

#include <inttypes.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/httpc.h"

int cli_outputs_get(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
		    json_t **out, struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	int ret;

	strbuf_addf(&path, "/v1/jobs/%" PRIu64 "/outputs", id);
	if (task) {
		char *t = url_escape(task);
		strbuf_addf(&path, "?task=%s", t);
		free(t);
	}
	if (attempt) {
		char *a = url_escape(attempt);
		strbuf_addf(&path, "%sattempt=%s", task ? "&" : "?", a);
		free(a);
	}
	ret = client_json(&ctx->client, "GET", path.buf, NULL, out, NULL, eb);
	strbuf_release(&path);
	return ret;
}

/* One row per file of task tk's outputs; one for its manifest when its
 * files are not listed, and one saying how many more when they are not all. */
static void add_task_rows(struct cli_table *t, const json_t *tk)
{
	const json_t *files = json_object_get(tk, "files"), *f;
	json_int_t shown = (json_int_t)json_array_size(files), count = cli_jint(tk, "files_count");
	size_t i, rows = json_is_array(files) ? json_array_size(files) : 1;

	for (i = 0; i < rows + (count > shown); i++) {
		cli_table_add(t, "%s/%" PRId64, cli_jstr(tk, "role"), cli_jint(tk, "index"));
		cli_table_add(t, "%" PRId64, cli_jint(tk, "attempt"));
		cli_table_add(t, "%s", cli_jstr(tk, "state"));
		if (!json_is_string(json_object_get(tk, "outputs"))) {
			cli_table_add(t, "(none)");
			cli_table_add(t, "-");
		} else if (!json_is_array(files)) {
			cli_table_add(t, "(manifest %s)", cli_jstr(tk, "outputs"));
			cli_table_add(t, "%" PRId64, cli_jint(tk, "size"));
		} else if (i < rows) {
			f = json_array_get(files, i);
			cli_table_add(t, "%s", cli_jstr(f, "path"));
			cli_table_add(t, "%" PRId64, cli_jint(f, "size"));
		} else {
			cli_table_add(t, "(%" JSON_INTEGER_FORMAT " more files: yard download)", count - shown);
			cli_table_add(t, "-");
		}
	}
}

int cmd_outputs(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "TASK", "ATTEMPT", "STATE", "FILE", "SIZE" };
	const char *task = NULL, *attempt = NULL;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "only this task" },
		{ "attempt", 0, CLI_OPT_STRING, &attempt, "N", "only this attempt" },
	};
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *tk;
	uint64_t id;
	size_t i;
	int rc;

	rc = cli_parse_job(ctx, "outputs ID [--task ROLE/INDEX] [--attempt N]", opts, ARRAY_SIZE(opts),
			   argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (cli_outputs_get(ctx, id, task, attempt, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "tasks"), i, tk)
		add_task_rows(&t, tk);
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	printf("checkpoint: %s\n", cli_jstr(reply, "checkpoint"));
	json_decref(reply);
	return EXIT_OK;
}
