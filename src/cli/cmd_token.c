#include "base/compat.h"

#include "cli/cmd.h"

int cmd_token(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *user = NULL, *team = NULL;
	int admin = 0;
	const struct cli_option opts[] = {
		{ "user", 0, CLI_OPT_STRING, &user, "NAME", "the user the token is for (required)" },
		{ "admin", 0, CLI_OPT_FLAG, &admin, NULL, "an admin token" },
		{ "team", 0, CLI_OPT_STRING, &team, "TEAM", "the user's team" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int npos, rc;

	rc = cli_parse(ctx, "token create --user NAME [--admin] [--team TEAM]", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1 || strcmp(argv[1], "create"))
		return cli_usage_error(ctx, "expected 'yard token create --user NAME'");
	if (!user || !*user)
		return cli_usage_error(ctx, "--user NAME is required");
	if (client_token_create(&ctx->client, user, admin, team, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("%s\n", cli_jstr(reply, "token"));
	json_decref(reply);
	return EXIT_OK;
}
