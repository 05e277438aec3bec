/* yard hold ID... / yard release ID...: keep queued jobs from starting, and
 * let them start again (POST /v1/jobs/{id}/hold, /release). */
#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"

/* hold_or_release does action ("hold" or "release") to every job id of
 * argv; the first failure is reported, the others still tried. */
static int hold_or_release(struct cli_ctx *ctx, const char *action, int argc, char **argv)
{
	char synopsis[32];
	int npos, rc, status = EXIT_OK;

	snprintf(synopsis, sizeof(synopsis), "%s ID...", action);
	rc = cli_parse_jobs(ctx, synopsis, NULL, 0, argc, argv, false, &npos);
	if (rc >= 0)
		return rc;
	for (int i = 1; i <= npos; i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *job = NULL;
		uint64_t id;

		parse_u64_str(argv[i], &id);
		if (client_job_action(&ctx->client, id, action, &job, &eb)) {
			rc = cli_fail(ctx, &eb);
			if (status == EXIT_OK)
				status = rc;
			continue;
		}
		if (ctx->json)
			cli_print_json(job);
		else
			printf("%" PRIu64 " %s\n", id, !strcmp(action, "hold") ? "held" : "released");
		json_decref(job);
	}
	return status;
}

int cmd_hold(struct cli_ctx *ctx, int argc, char **argv)
{
	return hold_or_release(ctx, "hold", argc, argv);
}

int cmd_release(struct cli_ctx *ctx, int argc, char **argv)
{
	return hold_or_release(ctx, "release", argc, argv);
}
