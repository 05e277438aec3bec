#include "base/compat.h"

#include "cli/cmd.h"

int cmd_cancel(struct cli_ctx *ctx, int argc, char **argv)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "cancel ID", NULL, 0, argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (client_cancel(&ctx->client, id, &job, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(job);
	else
		printf("%s\n", cli_jstr(job, "state"));
	json_decref(job);
	return EXIT_OK;
}
