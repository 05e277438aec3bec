#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"

/* yard cancel ID...: every job is tried; the first failure sets the exit
 * status. One line (or one JSON document) per job, in the order given. */
int cmd_cancel(struct cli_ctx *ctx, int argc, char **argv)
{
	int npos, rc, status = EXIT_OK;
	uint64_t id;

	rc = cli_parse_jobs(ctx, "cancel ID...", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	for (int i = 1; i <= npos; i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *job = NULL;

		parse_u64_str(argv[i], &id);
		if (client_cancel(&ctx->client, id, &job, &eb)) {
			rc = cli_fail(ctx, &eb);
			if (status == EXIT_OK)
				status = rc;
			continue;
		}
		if (ctx->json)
			cli_print_json(job);
		else if (npos > 1)
			printf("%" PRIu64 " %s\n", id, cli_jstr(job, "state"));
		else
			printf("%s\n", cli_jstr(job, "state"));
		json_decref(job);
	}
	return status;
}
