/* yard template create NAME FILE --on-dataset DATASET | --on-git BRANCH ... |
 * ls | show NAME | rm NAME: jobs run again on each new version of a dataset
 * (docs/pipelines.md, "Templates") or on each push to a branch of their
 * repository (docs/git.md, "Push hooks"). */
#include "base/compat.h"

#include <inttypes.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/httpc.h"

#define CREATE_USAGE "template create NAME FILE (--on-dataset DATASET | --on-git BRANCH ... [--git URL] " \
	"[--build-only]) [--set PATH=VALUE ...]"

/* The trigger of the template being made: "on_dataset" or "on_git" of its
 * request, from the flags; NULL after a usage error in eb. */
static json_t *trigger(const char *dataset, const struct cli_list *branches, bool build_only, struct errbuf *eb)
{
	json_t *globs;

	if (!dataset == !branches->nr) {
		error(eb, YERR(BAD_REQUEST), "expected --on-dataset DATASET or --on-git BRANCH (a template runs on "
		      "one of the two)");
		return NULL;
	}
	if (dataset && build_only) {
		error(eb, YERR(BAD_REQUEST), "--build-only: only a template on git builds its image alone");
		return NULL;
	}
	if (dataset)
		return json_pack("{s:s}", "on_dataset", dataset);
	globs = json_array();
	for (size_t i = 0; i < branches->nr; i++)
		json_array_append_new(globs, json_string(branches->items[i]));
	return json_pack("{s:{s:o, s:b}}", "on_git", "branches", globs, "build_only", build_only);
}

static int template_create(struct cli_ctx *ctx, int argc, char **argv)
{
	struct cli_list sets = { NULL, 0, 0 }, branches = { NULL, 0, 0 };
	const char *dataset = NULL, *git = NULL;
	int build_only = 0;
	const struct cli_option opts[] = {
		{ "on-dataset", 0, CLI_OPT_STRING, &dataset, "NAME", "run it on each new version of this dataset" },
		{ "on-git", 0, CLI_OPT_LIST, &branches, "BRANCH",
		  "run it on each push to this branch (or glob: release/*) of\n"
		  "the spec's repository, at the pushed commit (repeatable)" },
		{ "git", 0, CLI_OPT_STRING, &git, "URL", "the repository (the spec's code: {git: URL})" },
		{ "build-only", 0, CLI_OPT_FLAG, &build_only, NULL,
		  "on a push, only build the spec's image (image.build), so that\n"
		  "the commit's jobs find it built" },
		{ "set", 0, CLI_OPT_LIST, &sets, "PATH=VALUE", "override a field of the spec (as yard submit)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL, *body = NULL, *reply = NULL;
	char *digest = NULL;
	bool usage;
	int npos, rc;

	rc = cli_parse(ctx, CREATE_USAGE, opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		goto out;
	if (npos != 2) {
		rc = cli_usage_error(ctx, "expected a NAME and a spec FILE");
		goto out;
	}
	if (!(body = trigger(dataset, &branches, build_only, &eb))) {
		rc = cli_usage_error(ctx, "%s", eb.msg);
		goto out;
	}
	if (cli_load_spec(argv[2], &sets, NULL, &doc, &usage, &eb) ||
	    (git && cli_apply_git(doc, git, &usage, &eb))) {
		rc = usage ? cli_usage_error(ctx, "%s", eb.msg) : cli_fail(ctx, &eb);
		goto out;
	}
	/* code from git is the master's to fetch: nothing is uploaded (and a
	 * template on git always takes it from there) */
	if (!json_object_get(doc, "code") && !branches.nr && cli_upload_code(ctx, argv[2], &digest, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	json_object_set_new(body, "name", json_string(argv[1]));
	json_object_set(body, "spec", doc);
	if (digest)
		json_object_set_new(body, "code", json_string(digest));
	if (client_json(&ctx->client, "POST", "/v1/templates", body, &reply, NULL, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	if (ctx->json)
		cli_print_json(reply);
	else if (dataset)
		printf("template %s: runs on each new version of %s\n", cli_jstr(reply, "name"), dataset);
	else
		printf("template %s: %s on each push to %s of %s\n", cli_jstr(reply, "name"),
		       build_only ? "builds its image" : "runs", branches.items[0],
		       cli_jstr(json_object_get(doc, "code"), "git"));
	rc = EXIT_OK;
out:
	free(sets.items);
	free(branches.items);
	free(digest);
	json_decref(body);
	json_decref(doc);
	json_decref(reply);
	return rc;
}

/* What template tp runs on, into sb: "dataset digits" or "git main, release/v*". */
static void trigger_text(struct strbuf *sb, const json_t *tp)
{
	const json_t *on_git = json_object_get(tp, "on_git"), *b;
	size_t i;

	if (!json_is_object(on_git)) {
		strbuf_addf(sb, "dataset %s", cli_jstr(tp, "on_dataset"));
		return;
	}
	strbuf_addstr(sb, "git ");
	json_array_foreach(json_object_get(on_git, "branches"), i, b)
		strbuf_addf(sb, "%s%s", i ? ", " : "", json_string_value(b));
	if (json_is_true(json_object_get(on_git, "build_only")))
		strbuf_addstr(sb, " (build only)");
}

/* What made run r: "digits@3" or "main@1a2b3c4". */
static void run_origin(char *buf, size_t n, const json_t *tp, const json_t *r)
{
	if (json_object_get(r, "commit"))
		snprintf(buf, n, "%s@%.7s", cli_jstr(r, "ref"), cli_jstr(r, "commit"));
	else
		snprintf(buf, n, "%s@%" PRId64, cli_jstr(tp, "on_dataset"), cli_jint(r, "version"));
}

/* "job 12", "refused: ..." or "fetching". */
static void run_outcome(char *buf, size_t n, const json_t *r)
{
	if (json_object_get(r, "job"))
		snprintf(buf, n, "job %" PRId64, cli_jint(r, "job"));
	else if (json_object_get(r, "error"))
		snprintf(buf, n, "refused: %s", cli_jstr(r, "error"));
	else
		snprintf(buf, n, "fetching its code");
}

/* The last run of template tp: "digits@3: job 12", "main@1a2b3c4: refused: ...", or "-". */
static void add_last_run(struct cli_table *t, const json_t *tp)
{
	const json_t *runs = json_object_get(tp, "runs");
	const json_t *last = json_array_get(runs, json_array_size(runs) - 1);
	char origin[300], outcome[700];

	if (!last) {
		cli_table_add(t, "-");
		return;
	}
	run_origin(origin, sizeof(origin), tp, last);
	run_outcome(outcome, sizeof(outcome), last);
	cli_table_add(t, "%s: %s", origin, outcome);
}

static int template_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "USER", "RUNS ON", "RUNS", "LAST RUN" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	struct strbuf sb = STRBUF_INIT;
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
		trigger_text(&sb, tp);
		cli_table_add(&t, "%s", sb.buf);
		strbuf_reset(&sb);
		cli_table_add(&t, "%zu", json_array_size(json_object_get(tp, "runs")));
		add_last_run(&t, tp);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	strbuf_release(&sb);
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
		struct strbuf sb = STRBUF_INIT;
		char origin[300], outcome[700];
		trigger_text(&sb, doc);
		printf("template %s (%s): runs on %s\n", cli_jstr(doc, "name"), cli_jstr(doc, "user"), sb.buf);
		strbuf_release(&sb);
		json_array_foreach(json_object_get(doc, "runs"), i, r) {
			run_origin(origin, sizeof(origin), doc, r);
			run_outcome(outcome, sizeof(outcome), r);
			printf("  %s: %s\n", origin, outcome);
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
		printf("usage: yard " CREATE_USAGE "\n"
		       "       yard template ls | show NAME | rm NAME\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected create, ls, show or rm");
}
