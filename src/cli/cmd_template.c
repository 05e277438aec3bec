/* yard template create NAME FILE --on-dataset DATASET | ls | show NAME | rm
 * NAME: jobs run again on each new version of a dataset (docs/pipelines.md,
 * "Templates"). */
#include "base/compat.h"

#include <inttypes.h>

#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/httpc.h"

static int template_create(struct cli_ctx *ctx, int argc, char **argv)
{
	struct cli_list sets = { NULL, 0, 0 };
	const char *dataset = NULL;
	const struct cli_option opts[] = {
		{ "on-dataset", 0, CLI_OPT_STRING, &dataset, "NAME",
		  "run it on each new version of this dataset (required)" },
		{ "set", 0, CLI_OPT_LIST, &sets, "PATH=VALUE", "override a field of the spec (as yard submit)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL, *body, *reply = NULL;
	char *digest = NULL;
	bool usage;
	int npos, rc;

	rc = cli_parse(ctx, "template create NAME FILE --on-dataset DATASET [--set PATH=VALUE ...]", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		goto out;
	if (npos != 2 || !dataset) {
		rc = cli_usage_error(ctx, "expected a NAME, a spec FILE and --on-dataset DATASET");
		goto out;
	}
	if (cli_load_spec(argv[2], &sets, NULL, &doc, &usage, &eb)) {
		rc = usage ? cli_usage_error(ctx, "%s", eb.msg) : cli_fail(ctx, &eb);
		goto out;
	}
	if (cli_upload_code(ctx, argv[2], &digest, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	body = json_pack("{s:s, s:O, s:s, s:s?}", "name", argv[1], "spec", doc, "on_dataset", dataset, "code",
			 digest);
	rc = client_json(&ctx->client, "POST", "/v1/templates", body, &reply, NULL, &eb);
	json_decref(body);
	if (rc) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	if (ctx->json)
		cli_print_json(reply);
	else
		printf("template %s: runs on each new version of %s\n", cli_jstr(reply, "name"), dataset);
	rc = EXIT_OK;
out:
	free(sets.items);
	free(digest);
	json_decref(doc);
	json_decref(reply);
	return rc;
}

/* The last run of template tp: "v3: job 12", "v4: refused: ...", or "-". */
static void add_last_run(struct cli_table *t, const json_t *tp)
{
	const json_t *runs = json_object_get(tp, "runs");
	const json_t *last = json_array_get(runs, json_array_size(runs) - 1);

	if (!last)
		cli_table_add(t, "-");
	else if (json_object_get(last, "job"))
		cli_table_add(t, "v%" PRId64 ": job %" PRId64, cli_jint(last, "version"), cli_jint(last, "job"));
	else
		cli_table_add(t, "v%" PRId64 ": refused: %s", cli_jint(last, "version"), cli_jstr(last, "error"));
}

static int template_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "USER", "ON DATASET", "RUNS", "LAST RUN" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *doc = NULL, *tp;
	int npos, rc = cli_parse(ctx, "template ls", NULL, 0, argc, argv, &npos);
	size_t i;

	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "template ls takes no arguments");
	if (client_json(&ctx->client, "GET", "/v1/templates", NULL, &doc, NULL, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
		json_decref(doc);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(doc, "templates"), i, tp) {
		cli_table_add(&t, "%s", cli_jstr(tp, "name"));
		cli_table_add(&t, "%s", cli_jstr(tp, "user"));
		cli_table_add(&t, "%s", cli_jstr(tp, "on_dataset"));
		cli_table_add(&t, "%zu", json_array_size(json_object_get(tp, "runs")));
		add_last_run(&t, tp);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(doc);
	return EXIT_OK;
}

/* show NAME (GET) or rm NAME (DELETE). */
static int template_one(struct cli_ctx *ctx, int argc, char **argv, const char *method)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL, *r;
	int npos, rc = cli_parse(ctx, strcmp(method, "GET") ? "template rm NAME" : "template show NAME", NULL, 0,
				 argc, argv, &npos);
	size_t i;

	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected a template NAME");
	char *name = url_escape(argv[1]), *path = xasprintf("/v1/templates/%s", name);
	rc = client_json(&ctx->client, method, path, NULL, &doc, NULL, &eb);
	free(name);
	free(path);
	if (rc)
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
	} else if (!strcmp(method, "DELETE")) {
		printf("template %s deleted (its jobs stay)\n", cli_jstr(doc, "name"));
	} else {
		printf("template %s (%s): runs on each new version of %s\n", cli_jstr(doc, "name"),
		       cli_jstr(doc, "user"), cli_jstr(doc, "on_dataset"));
		json_array_foreach(json_object_get(doc, "runs"), i, r) {
			if (json_object_get(r, "job"))
				printf("  %s@%" PRId64 ": job %" PRId64 "\n", cli_jstr(doc, "on_dataset"),
				       cli_jint(r, "version"), cli_jint(r, "job"));
			else
				printf("  %s@%" PRId64 ": refused: %s\n", cli_jstr(doc, "on_dataset"),
				       cli_jint(r, "version"), cli_jstr(r, "error"));
		}
	}
	json_decref(doc);
	return EXIT_OK;
}

int cmd_template(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (sub && !strcmp(sub, "create"))
		return template_create(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "ls"))
		return template_ls(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "show"))
		return template_one(ctx, argc - 1, argv + 1, "GET");
	if (sub && !strcmp(sub, "rm"))
		return template_one(ctx, argc - 1, argv + 1, "DELETE");
	if (sub && (!strcmp(sub, "-h") || !strcmp(sub, "--help"))) {
		printf("usage: yard template create NAME FILE --on-dataset DATASET [--set PATH=VALUE ...]\n"
		       "       yard template ls | show NAME | rm NAME\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected create, ls, show or rm");
}
