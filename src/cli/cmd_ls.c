#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"
#include "common/state.h"

int cmd_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *state = NULL, *user = NULL, *limit = NULL;
	const struct cli_option opts[] = {
		{ "state", 0, CLI_OPT_STRING, &state, "STATE", "only jobs in this state" },
		{ "user", 0, CLI_OPT_STRING, &user, "USER", "only this user's jobs" },
		{ "limit", 0, CLI_OPT_STRING, &limit, "N", "at most N jobs (newest first)" },
	};
	static const char *const headers[] = { "ID", "NAME", "USER", "STATE", "TASKS", "GPUS",
					       "AGE", "REASON" };
	struct client_jobs_filter f = { NULL, NULL, 0, false };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *job;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "ls [--state STATE] [--user USER] [--limit N]", opts, ARRAY_SIZE(opts),
		       argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (state && job_state_parse(state) < 0)
		return cli_usage_error(ctx, "unknown job state '%s'", state);
	if (limit && (parse_u64_str(limit, &f.limit) < 0 || !f.limit))
		return cli_usage_error(ctx, "--limit expects a number > 0, got '%s'", limit);
	f.state = state;
	f.user = user;
	f.summary = !ctx->json; /* a table needs a tenth of each job */
	if (client_jobs_list(&ctx->client, &f, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "jobs"), i, job) {
		char age[32];
		char *reason = cli_reason(json_object_get(job, "reason"));
		cli_age(cli_jint(job, "submitted_at"), age, sizeof(age));
		/* a master from before view=summary answers whole jobs */
		bool whole = !json_object_get(job, "task_count");
		cli_table_add(&t, "%" PRId64, cli_jint(job, "id"));
		/* an interactive job (yard shell): marked after its name */
		if (whole ? json_is_object(json_object_get(json_object_get(job, "spec"), "interactive"))
			  : json_is_true(json_object_get(job, "interactive")))
			cli_table_add(&t, "%s (interactive)", cli_jstr(job, "name"));
		else
			cli_table_add(&t, "%s", cli_jstr(job, "name"));
		cli_table_add(&t, "%s", cli_jstr(job, "user"));
		cli_table_add(&t, "%s", cli_jstr(job, "state"));
		if (whole) {
			cli_table_add(&t, "%zu", json_array_size(json_object_get(job, "tasks")));
			cli_table_add(&t, "%" PRIu64, cli_job_gpus(job));
		} else {
			cli_table_add(&t, "%" PRId64, cli_jint(job, "task_count"));
			cli_table_add(&t, "%" PRId64, cli_jint(job, "gpus"));
		}
		cli_table_add(&t, "%s", age);
		cli_table_add(&t, "%s", reason);
		free(reason);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}
