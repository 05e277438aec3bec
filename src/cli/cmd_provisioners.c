/* `yard provisioners`: the elastic pools (docs/elastic.md), GET
 * /v1/provisioners as two tables: the pools, then the requests under way. */
#include "base/compat.h"

#include "base/parse.h"
#include "base/strbuf.h"
#include "cli/cmd.h"

int cmd_provisioners(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const pool_headers[] = { "POOL", "PROVISIONER", "MIN", "MAX", "IDLE", "NODES",
						    "DEMAND", "NOTE" };
	static const char *const req_headers[] = { "REQUEST", "POOL", "STATE", "ID", "JOBS", "NODES" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *v;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "provisioners", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_provisioners(&ctx->client, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	if (!json_array_size(json_object_get(reply, "pools"))) {
		printf("no pool has a provisioner (yard master --provisioner POOL=KIND:ARG)\n");
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(pool_headers), pool_headers);
	json_array_foreach(json_object_get(reply, "pools"), i, v) {
		const json_t *n = json_object_get(v, "nodes");
		struct strbuf cell = STRBUF_INIT;
		static const char *const states[] = { "requesting", "pending", "ready", "leaving", "releasing" };
		char idle[32];
		for (size_t k = 0; k < ARRAY_SIZE(states); k++)
			if (cli_jint(n, states[k]))
				strbuf_addf(&cell, "%s%" PRId64 " %s", cell.len ? ", " : "", cli_jint(n, states[k]),
					    states[k]);
		cli_table_add(&t, "%s", cli_jstr(v, "pool"));
		cli_table_add(&t, "%s", cli_jstr(v, "provisioner"));
		cli_table_add(&t, "%" PRId64, cli_jint(v, "min"));
		cli_table_add(&t, "%" PRId64, cli_jint(v, "max"));
		snprintf(idle, sizeof(idle), "%" PRId64 "s", cli_jint(v, "idle_ms") / 1000);
		cli_table_add(&t, "%s", idle);
		cli_table_add(&t, "%s", cell.len ? cell.buf : "none");
		cli_table_add(&t, "%" PRId64, cli_jint(v, "demand"));
		if (cli_jint(v, "backoff_ms"))
			cli_table_add(&t, "cooling down %" PRId64 "s: %s", (cli_jint(v, "backoff_ms") + 999) / 1000,
				      json_is_string(json_object_get(v, "last_error")) ? cli_jstr(v, "last_error") : "");
		else
			cli_table_add(&t, "-");
		strbuf_release(&cell);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	if (json_array_size(json_object_get(reply, "requests"))) {
		printf("\n");
		cli_table_init(&t, ARRAY_SIZE(req_headers), req_headers);
		json_array_foreach(json_object_get(reply, "requests"), i, v) {
			struct strbuf jobs = STRBUF_INIT, nodes = STRBUF_INIT;
			json_t *x;
			size_t k;
			json_array_foreach(json_object_get(v, "jobs"), k, x)
				strbuf_addf(&jobs, "%s%" JSON_INTEGER_FORMAT, jobs.len ? "," : "", json_integer_value(x));
			json_array_foreach(json_object_get(v, "nodes"), k, x)
				strbuf_addf(&nodes, "%s%s %s", nodes.len ? ", " : "",
					    json_is_string(json_object_get(x, "name")) ? cli_jstr(x, "name") : "(unnamed)",
					    cli_jstr(x, "state"));
			cli_table_add(&t, "%" PRId64, cli_jint(v, "id"));
			cli_table_add(&t, "%s", cli_jstr(v, "pool"));
			cli_table_add(&t, "%s", cli_jstr(v, "state"));
			cli_table_add(&t, "%s", json_is_string(json_object_get(v, "external")) ? cli_jstr(v, "external") : "-");
			cli_table_add(&t, "%s", jobs.len ? jobs.buf : "-");
			cli_table_add(&t, "%s", nodes.len ? nodes.buf : "-");
			strbuf_release(&jobs);
			strbuf_release(&nodes);
		}
		cli_table_print(&t, stdout);
		cli_table_release(&t);
	}
	json_decref(reply);
	return EXIT_OK;
}
