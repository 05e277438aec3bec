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

/* The PROVISIONED cell (docs/elastic.md): "-", or what made the node and
 * its id there ("slurm job 4411_0", "command request 3"), and whether its
 * agent is ephemeral. */
static void provisioned_cell(const json_t *node, struct strbuf *sb)
{
	const json_t *p = json_object_get(node, "provisioned");
	const char *prov = json_string_value(json_object_get(p, "provisioner"));
	const char *id = json_string_value(json_object_get(p, "id"));
	const char *slurm = json_string_value(json_object_get(node, "slurm_job"));

	if (prov && !strncmp(prov, "slurm:", 6) && (id || slurm))
		strbuf_addf(sb, "slurm job %s", id ? id : slurm);
	else if (prov)
		strbuf_addf(sb, "%.*s request %" JSON_INTEGER_FORMAT, (int)strcspn(prov, ":"), prov,
			    json_integer_value(json_object_get(p, "request")));
	else if (slurm)
		strbuf_addf(sb, "slurm job %s", slurm);
	else if (json_is_true(json_object_get(node, "ephemeral")))
		strbuf_addstr(sb, "ephemeral");
	else
		strbuf_addstr(sb, "-");
	if (json_is_string(json_object_get(p, "state")) && strcmp(cli_jstr(p, "state"), "ready"))
		strbuf_addf(sb, " (%s)", cli_jstr(p, "state"));
}

/* The DRAIN cell: "-", or "drained" and the reason, as the admin gave it. */
static void drain_cell(const json_t *node, struct strbuf *sb)
{
	const json_t *drain = json_object_get(node, "drain");
	const char *reason = json_string_value(json_object_get(drain, "reason"));

	if (!json_is_true(json_object_get(node, "drained")))
		strbuf_addstr(sb, "-");
	else if (reason)
		strbuf_addf(sb, "drained: %s", reason);
	else
		strbuf_addstr(sb, "drained");
}

static int nodes_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "STATE", "ADDR", "CPUS", "MEMORY",
					       "GPUS", "MODEL", "POOL", "RUNTIMES", "LABELS", "PROVISIONED", "DRAIN" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	struct strbuf rt = STRBUF_INIT;
	json_t *reply = NULL, *node;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "nodes [ls]", NULL, 0, argc, argv, &npos);
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
			strbuf_reset(&l);
			provisioned_cell(node, &l);
			cli_table_add(&t, "%s", l.buf);
			strbuf_reset(&l);
			drain_cell(node, &l);
			cli_table_add(&t, "%s", l.buf);
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

static int nodes_drain(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *reason = NULL;
	const struct cli_option opts[] = {
		{ "reason", 0, CLI_OPT_STRING, &reason, "TEXT", "why, shown by 'yard nodes' and in the "
		  "reasons of the jobs that wait for it" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int npos, rc;

	rc = cli_parse(ctx, "nodes drain NAME [--reason TEXT]", opts, ARRAY_SIZE(opts), argc, argv,
		       &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected 'yard nodes drain NAME [--reason TEXT]'");
	if (client_node_drain(&ctx->client, argv[1], reason, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("drained node %s%s%s (its tasks run on; no new ones until 'yard nodes resume %s')\n",
		       cli_jstr(reply, "name"), reason ? ": " : "", reason ? reason : "",
		       cli_jstr(reply, "name"));
	json_decref(reply);
	return EXIT_OK;
}

/* resume and rm: one NAME, one request, one line. */
static int nodes_one(struct cli_ctx *ctx, int argc, char **argv, const char *what,
		     int (*fn)(struct client *, const char *, json_t **, struct errbuf *),
		     const char *done)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	char synopsis[32], usage[64];
	int npos, rc;

	snprintf(synopsis, sizeof(synopsis), "nodes %s NAME", what);
	snprintf(usage, sizeof(usage), "expected 'yard nodes %s NAME'", what);
	rc = cli_parse(ctx, synopsis, NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "%s", usage);
	if (fn(&ctx->client, argv[1], &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("%s node %s\n", done, cli_jstr(reply, "name"));
	json_decref(reply);
	return EXIT_OK;
}

static int nodes_resume(struct cli_ctx *ctx, int argc, char **argv)
{
	return nodes_one(ctx, argc, argv, "resume", client_node_resume, "resumed");
}

static int nodes_rm(struct cli_ctx *ctx, int argc, char **argv)
{
	return nodes_one(ctx, argc, argv, "rm", client_node_remove, "removed");
}

/* yard nodes [ls|drain|resume|rm]: the subcommand is argv[1] (none: ls);
 * each parses the rest with argv[0] naming it, as cli_parse expects. */
static const struct {
	const char *name;
	int (*fn)(struct cli_ctx *ctx, int argc, char **argv);
} subcommands[] = {
	{ "ls", nodes_ls },
	{ "drain", nodes_drain },
	{ "resume", nodes_resume },
	{ "rm", nodes_rm },
};

int cmd_nodes(struct cli_ctx *ctx, int argc, char **argv)
{
	if (argc >= 2)
		for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
			if (!strcmp(argv[1], subcommands[i].name))
				return subcommands[i].fn(ctx, argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: yard nodes [ls]\n"
		       "       yard nodes drain NAME [--reason TEXT]\n"
		       "       yard nodes resume NAME\n"
		       "       yard nodes rm NAME\n");
		return EXIT_OK;
	}
	if (argc >= 2 && argv[1][0] != '-')
		return cli_usage_error(ctx, "unknown subcommand '%s'; expected 'yard nodes "
				       "[ls|drain|resume|rm]'", argv[1]);
	return nodes_ls(ctx, argc, argv);
}
