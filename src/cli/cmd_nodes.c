#include "base/compat.h"

#include "base/parse.h"
#include "base/strbuf.h"
#include "cli/cmd.h"

/* models: the distinct GPU models of a node, comma-separated, into sb. */
static void models(const json_t *gpus, struct strbuf *sb)
{
	json_t *g, *h;
	size_t i, j;

	json_array_foreach(gpus, i, g) {
		const char *m = cli_jstr(g, "model");
		bool seen = false;
		json_array_foreach(gpus, j, h) {
			if (j >= i)
				break;
			if (!strcmp(cli_jstr(h, "model"), m))
				seen = true;
		}
		if (!seen)
			strbuf_addf(sb, "%s%s", sb->len ? "," : "", m);
	}
}

/* runtimes: a node's runtimes, comma-separated, into sb; a master from
 * before runtimes sends none, and its nodes had the process runtime alone. */
static void runtimes(const json_t *names, struct strbuf *sb)
{
	const json_t *v;
	size_t i;

	json_array_foreach(names, i, v)
		if (json_is_string(v))
			strbuf_addf(sb, "%s%s", sb->len ? "," : "", json_string_value(v));
	if (!sb->len)
		strbuf_addstr(sb, json_is_array(names) ? "-" : "process");
}

int cmd_nodes(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "STATE", "ADDR", "CPUS", "MEMORY",
					       "GPUS", "MODEL", "POOL", "RUNTIMES", "LABELS" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	struct strbuf rt = STRBUF_INIT;
	json_t *reply = NULL, *node;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "nodes", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_nodes(&ctx->client, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "nodes"), i, node) {
		json_t *gpus = json_object_get(node, "gpus"), *g;
		struct strbuf m = STRBUF_INIT;
		char mem[32];
		size_t used = 0, j;

		json_array_foreach(gpus, j, g)
			if (json_is_integer(json_object_get(g, "job")))
				used++;
		format_size((uint64_t)cli_jint(node, "memory"), mem, sizeof(mem));
		models(gpus, &m);
		cli_table_add(&t, "%s", cli_jstr(node, "name"));
		cli_table_add(&t, "%s", cli_jstr(node, "state"));
		cli_table_add(&t, "%s", cli_jstr(node, "addr"));
		cli_table_add(&t, "%g", json_number_value(json_object_get(node, "cpus")));
		cli_table_add(&t, "%s", mem);
		cli_table_add(&t, "%zu/%zu", used, json_array_size(gpus));
		cli_table_add(&t, "%s", m.len ? m.buf : "-");
		cli_table_add(&t, "%s", json_is_string(json_object_get(node, "pool"))
						? cli_jstr(node, "pool") : "default");
		runtimes(json_object_get(node, "runtimes"), &rt);
		cli_table_add(&t, "%s", rt.buf);
		strbuf_reset(&rt);
		{
			struct strbuf l = STRBUF_INIT;
			const char *key;
			json_t *v;
			json_object_foreach(json_object_get(node, "labels"), key, v)
				strbuf_addf(&l, "%s%s=%s", l.len ? "," : "", key, json_string_value(v));
			cli_table_add(&t, "%s", l.len ? l.buf : "-");
			strbuf_release(&l);
		}
		strbuf_release(&m);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	strbuf_release(&rt);
	json_decref(reply);
	return EXIT_OK;
}
