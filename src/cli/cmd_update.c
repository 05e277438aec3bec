/* yard update ID --priority P: change a job after submit (POST /v1/jobs/{id}). */
#include "base/compat.h"

#include "cli/cmd.h"

int cmd_update(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *priority = NULL;
	const struct cli_option opts[] = {
		{ "priority", 0, CLI_OPT_STRING, &priority, "P",
		  "the job's new priority: low, normal or high (the next pass sees it)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "update ID --priority P", opts, ARRAY_SIZE(opts), argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (!priority)
		return cli_usage_error(ctx, "nothing to change: give --priority");
	if (client_job_priority(&ctx->client, id, priority, &job, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(job);
	else
		printf("%" PRIu64 " priority %s\n", id, cli_jstr(job, "priority"));
	json_decref(job);
	return EXIT_OK;
}
