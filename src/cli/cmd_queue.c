#include "base/compat.h"

#include "cli/cmd.h"

/* find_job: the job with this id in a {"jobs": [...]} reply, or NULL. */
static const json_t *find_job(const json_t *list, json_int_t id)
{
	json_t *job;
	size_t i;

	json_array_foreach(json_object_get(list, "jobs"), i, job)
		if (json_integer_value(json_object_get(job, "id")) == id)
			return job;
	return NULL;
}

int cmd_queue(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "POS", "ID", "NAME", "USER", "AHEAD", "START", "REASON" };
	struct client_jobs_filter f = { "queued", NULL, 0, false };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *queued = NULL, *entry;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "queue", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_queue(&ctx->client, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	/* queue entries carry id, position and reason: names come from the job list */
	if (json_array_size(json_object_get(reply, "queue")) &&
	    client_jobs_list(&ctx->client, &f, &queued, &eb)) {
		json_decref(reply);
		return cli_fail(ctx, &eb);
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "queue"), i, entry) {
		json_int_t id = json_integer_value(json_object_get(entry, "id"));
		const json_t *job = find_job(queued, id);
		char *reason = cli_reason(json_object_get(entry, "reason"));
		cli_table_add(&t, "%" PRId64, cli_jint(entry, "position"));
		cli_table_add(&t, "%" JSON_INTEGER_FORMAT, id);
		cli_table_add(&t, "%s", json_object_get(entry, "name") ? cli_jstr(entry, "name")
									: cli_jstr(job, "name"));
		cli_table_add(&t, "%s", json_object_get(entry, "user") ? cli_jstr(entry, "user")
									: cli_jstr(job, "user"));
		if (json_is_integer(json_object_get(entry, "ahead_count")))
			cli_table_add(&t, "%" PRId64, cli_jint(entry, "ahead_count"));
		else
			cli_table_add(&t, "-");
		/* START: when it is expected to start, or "unknown" (why is in --output json) */
		if (json_is_integer(json_object_get(entry, "start_estimate"))) {
			char when[32];
			cli_until(cli_jint(entry, "start_estimate"), when, sizeof(when));
			cli_table_add(&t, "%s", when);
		} else {
			cli_table_add(&t, "unknown");
		}
		cli_table_add(&t, "%s", reason);
		free(reason);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(queued);
	json_decref(reply);
	return EXIT_OK;
}
