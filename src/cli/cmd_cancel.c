#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"

/* yard cancel ID... [--experiment ID]: every job is tried, then the
 * experiment (its live trials, and no more); the first failure sets the exit
 * status. One line (or one JSON document) per job or experiment, in order. */
int cmd_cancel(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *exp = NULL;
	const struct cli_option opts[] = {
		{ "experiment", 'e', CLI_OPT_STRING, &exp, "ID",
		  "cancel an experiment: its queued and running trials, and no more trials" },
	};
	int npos, rc, status = EXIT_OK;
	uint64_t id, exp_id;

	rc = cli_parse_jobs(ctx, "cancel ID... | --experiment ID", opts, ARRAY_SIZE(opts), argc, argv,
			    true, &npos);
	if (rc < 0 && !npos && !exp)
		rc = cli_usage_error(ctx, "expected one or more job ids, or --experiment ID");
	if (rc < 0 && exp)
		rc = cli_experiment_id(ctx, exp, &exp_id);
	if (rc >= 0)
		return rc;
	for (int i = 1; i <= npos + (exp != NULL); i++) {
		struct errbuf eb = ERRBUF_INIT;
		json_t *doc = NULL;
		bool is_exp = i > npos;

		if (!is_exp)
			parse_u64_str(argv[i], &id);
		if (is_exp ? client_experiment(&ctx->client, exp_id, true, &doc, &eb)
			   : client_cancel(&ctx->client, id, &doc, &eb)) {
			rc = cli_fail(ctx, &eb);
			if (status == EXIT_OK)
				status = rc;
			continue;
		}
		if (ctx->json)
			cli_print_json(doc);
		else if (is_exp)
			printf("experiment %" PRIu64 " %s\n", exp_id, cli_jstr(doc, "state"));
		else if (npos > 1 || exp)
			printf("%" PRIu64 " %s\n", id, cli_jstr(doc, "state"));
		else
			printf("%s\n", cli_jstr(doc, "state"));
		json_decref(doc);
	}
	return status;
}
