#include "base/compat.h"

#include "base/clock.h"
#include "cli/cmd.h"

/* A wall_us time of a listing as "2026-11-29T16:15:27Z", or none. */
static void time_cell(const json_t *obj, const char *key, const char *none, char *buf, size_t len)
{
	int64_t us = cli_jint(obj, key);

	if (us > 0)
		format_time_utc((uint64_t)us, buf, (unsigned)len);
	else
		snprintf(buf, len, "%s", none);
}

/* Whether a token of the listing is active, expired or revoked. */
static const char *token_state(const json_t *tok)
{
	int64_t exp = cli_jint(tok, "expires_at");

	if (cli_jint(tok, "revoked_at") > 0)
		return "revoked";
	if (exp > 0 && (uint64_t)exp <= wall_us())
		return "expired";
	return "active";
}

static int token_create(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *user = NULL, *team = NULL, *expires = NULL;
	int admin = 0, team_admin = 0;
	const struct cli_option opts[] = {
		{ "user", 0, CLI_OPT_STRING, &user, "NAME", "the user the token is for (required)" },
		{ "admin", 0, CLI_OPT_FLAG, &admin, NULL, "an admin token" },
		{ "team", 0, CLI_OPT_STRING, &team, "TEAM", "the user's team" },
		{ "team-admin", 0, CLI_OPT_FLAG, &team_admin, NULL,
		  "an admin of --team: may change the priority of the team's jobs" },
		{ "expires", 0, CLI_OPT_STRING, &expires, "DURATION",
		  "refused after this long: 30d, 12h, 90m, 3600 (seconds); default never" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int npos, rc;

	rc = cli_parse(ctx, "token create --user NAME [--admin] [--team TEAM [--team-admin]] [--expires DURATION]",
		       opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (!user || !*user)
		return cli_usage_error(ctx, "--user NAME is required");
	if (client_token_create(&ctx->client, user, admin, team, team_admin, expires, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("%s\n", cli_jstr(reply, "token"));
	json_decref(reply);
	return EXIT_OK;
}

static int token_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "ID", "USER", "TEAM", "ROLE", "CREATED", "LAST USED",
					       "EXPIRES", "STATE" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *tok;
	char created[32], expires[32], used[32];
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "token ls", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_tokens_list(&ctx->client, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "tokens"), i, tok) {
		time_cell(tok, "created_at", "-", created, sizeof(created));
		time_cell(tok, "expires_at", "never", expires, sizeof(expires));
		cli_age(cli_jint(tok, "last_used"), used, sizeof(used));
		cli_table_add(&t, "%s", cli_jstr(tok, "id"));
		cli_table_add(&t, "%s", cli_jstr(tok, "user"));
		cli_table_add(&t, "%s", cli_jstr(tok, "team"));
		cli_table_add(&t, "%s", json_is_true(json_object_get(tok, "team_admin")) ? "team-admin" : cli_jstr(tok, "role"));
		cli_table_add(&t, "%s", created);
		cli_table_add(&t, "%s%s", used, strcmp(used, "-") ? " ago" : "");
		cli_table_add(&t, "%s", expires);
		cli_table_add(&t, "%s", token_state(tok));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}

static int token_revoke(struct cli_ctx *ctx, int argc, char **argv)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int npos, rc;

	rc = cli_parse(ctx, "token revoke ID", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected 'yard token revoke ID' (ids: 'yard token ls')");
	if (client_token_revoke(&ctx->client, argv[1], &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("revoked token %s (user %s)\n", cli_jstr(reply, "id"), cli_jstr(reply, "user"));
	json_decref(reply);
	return EXIT_OK;
}

/* yard token create|ls|revoke: the subcommand is argv[1]; each parses the
 * rest with argv[0] naming it, as cli_parse expects. */
static const struct {
	const char *name;
	int (*fn)(struct cli_ctx *ctx, int argc, char **argv);
} subcommands[] = {
	{ "create", token_create },
	{ "ls", token_ls },
	{ "revoke", token_revoke },
};

int cmd_token(struct cli_ctx *ctx, int argc, char **argv)
{
	if (argc >= 2)
		for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
			if (!strcmp(argv[1], subcommands[i].name))
				return subcommands[i].fn(ctx, argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: yard token create --user NAME [--admin] [--team TEAM [--team-admin]] [--expires DURATION]\n"
		       "       yard token ls\n"
		       "       yard token revoke ID\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected 'yard token create|ls|revoke'");
}
