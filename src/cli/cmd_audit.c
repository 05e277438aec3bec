#include "base/compat.h"

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cmd.h"

/* yard audit: the master's audit log (GET /v1/audit), newest first. */
int cmd_audit(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "TIME", "USER", "ROLE", "TOKEN", "ADDRESS", "STATUS",
					       "CODE", "REQUEST" };
	const char *user = NULL, *since = NULL, *limit = NULL;
	const struct cli_option opts[] = {
		{ "user", 0, CLI_OPT_STRING, &user, "NAME", "only this user's requests" },
		{ "since", 0, CLI_OPT_STRING, &since, "DURATION", "only the last DURATION: 1d, 12h, 90m" },
		{ "limit", 0, CLI_OPT_STRING, &limit, "N", "at most N entries (default 100)" },
	};
	struct client_audit_filter f = { 0 };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *e;
	char when[32];
	uint64_t ms;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "audit [--user NAME] [--since DURATION] [--limit N]", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (since && parse_duration_str(since, &ms))
		return cli_usage_error(ctx, "--since '%s': expected a duration such as 1d, 12h or 90m",
				       since);
	if (limit && (parse_u64_str(limit, &f.limit) || !f.limit))
		return cli_usage_error(ctx, "--limit '%s': expected a number >= 1", limit);
	f.user = user;
	f.since = since;
	if (client_audit(&ctx->client, &f, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "entries"), i, e) {
		format_time_utc((uint64_t)cli_jint(e, "time"), when, sizeof(when));
		cli_table_add(&t, "%s", when);
		cli_table_add(&t, "%s", cli_jstr(e, "user"));
		cli_table_add(&t, "%s", cli_jstr(e, "role"));
		cli_table_add(&t, "%s", cli_jstr(e, "token"));
		cli_table_add(&t, "%s", cli_jstr(e, "addr"));
		cli_table_add(&t, "%" PRId64, cli_jint(e, "status"));
		cli_table_add(&t, "%s", cli_jstr(e, "code"));
		cli_table_add(&t, "%s %s", cli_jstr(e, "method"), cli_jstr(e, "path"));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}
