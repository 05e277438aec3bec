/* yard data push|ls|show|rm: datasets on the master (docs/datasets.md). */
#include "base/compat.h"

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/chunks.h"
#include "common/dataset.h"

/* --from-job ID: job ID's outputs as one manifest (yard download's layout):
 * their chunks are held already, so nothing is read or sent again. */
static int manifest_from_job(struct cli_ctx *ctx, const char *job, const char *task, json_t **manifest,
			     struct errbuf *eb)
{
	uint64_t id;

	if (parse_u64_str(job, &id))
		return cli_usage_error(ctx, "--from-job: '%s' is not a job id", job);
	if (cli_outputs_manifest(ctx, id, task, NULL, manifest, eb))
		return cli_fail(ctx, eb);
	return -1;
}

static void print_pushed(const json_t *reply, const struct chunks_stats *st)
{
	char size[32];

	format_size((uint64_t)cli_jint(reply, "size"), size, sizeof(size));
	printf("%s@%" PRId64 " %s, %" PRId64 " files, %s (uploaded %" PRIu64 " of %" PRIu64 " chunks)\n",
	       cli_jstr(reply, "name"), cli_jint(reply, "version"), size, cli_jint(reply, "files"),
	       json_is_true(json_object_get(reply, "created")) ? "new version" : "unchanged", st->uploaded,
	       st->chunks);
}

static int data_push(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *team = NULL, *from_job = NULL, *from_task = NULL;
	const struct cli_option opts[] = {
		{ "team", 0, CLI_OPT_STRING, &team, "TEAM", "the team whose quota it counts against" },
		{ "from-job", 0, CLI_OPT_STRING, &from_job, "ID", "push job ID's outputs (yard download's layout)" },
		{ "task", 0, CLI_OPT_STRING, &from_task, "ROLE/INDEX", "with --from-job: only this task's" },
	};
	struct errbuf eb = ERRBUF_INIT;
	struct chunks_set set = { 0 };
	struct chunks_stats st = { 0, 0, 0 };
	json_t *manifest = NULL, *reply = NULL, *body;
	const char *name;
	int npos, rc;

	rc = cli_parse(ctx, "data push DIR|FILE NAME [--team TEAM] | --from-job ID [--task ROLE/INDEX] NAME",
		       opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != (from_job ? 1 : 2))
		return cli_usage_error(ctx, from_job ? "expected NAME after --from-job ID" : "expected DIR|FILE and NAME");
	name = argv[npos];
	if (!dataset_name_valid(name))
		return cli_usage_error(ctx, "'%s' is not a dataset name ([a-z0-9][a-z0-9_.-]{0,62})", name);
	if (from_job) {
		const json_t *f;
		size_t i;
		if ((rc = manifest_from_job(ctx, from_job, from_task, &manifest, &eb)) >= 0)
			return rc;
		json_array_foreach(json_object_get(manifest, "files"), i, f)
			st.chunks += json_array_size(json_object_get(f, "chunks"));
	} else if ((rc = chunks_walk(&set, argv[1], false, NULL, &eb))) {
		chunks_set_release(&set);
		return rc == YERR(NOT_FOUND) ? cli_usage_error(ctx, "%s", eb.msg) : cli_fail(ctx, &eb);
	}
	/* a chunk that the master let go of in between (it held it once, for
	 * something now deleted) is sent again */
	for (int tries = 0; tries < 3; tries++) {
		if (!from_job && (rc = client_chunks_push(&ctx->client, &set, &manifest, &st, &eb)))
			break;
		body = json_pack("{s:s, s:o}", "name", name, "manifest", manifest);
		if (team)
			json_object_set_new(body, "team", json_string(team));
		rc = client_json(&ctx->client, "POST", "/v1/datasets", body, &reply, NULL, &eb);
		json_decref(body);
		manifest = NULL;
		if (rc != YERR(MISSING_CHUNKS) || from_job)
			break;
	}
	chunks_set_release(&set);
	if (rc)
		return cli_fail(ctx, &eb);
	json_object_set_new(reply, "chunks", json_integer((json_int_t)st.chunks));
	json_object_set_new(reply, "uploaded", json_integer((json_int_t)st.uploaded));
	json_object_set_new(reply, "uploaded_bytes", json_integer((json_int_t)st.uploaded_bytes));
	if (ctx->json)
		cli_print_json(reply);
	else
		print_pushed(reply, &st);
	json_decref(reply);
	return EXIT_OK;
}

static int data_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "LATEST", "VERSIONS", "SIZE", "TEAM" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *d;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "data ls", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_json(&ctx->client, "GET", "/v1/datasets", NULL, &reply, NULL, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "datasets"), i, d) {
		char size[32];
		format_size((uint64_t)cli_jint(d, "size"), size, sizeof(size));
		cli_table_add(&t, "%s", cli_jstr(d, "name"));
		cli_table_add(&t, "%" PRId64, cli_jint(d, "latest"));
		cli_table_add(&t, "%" PRId64, cli_jint(d, "versions"));
		cli_table_add(&t, "%s", size);
		cli_table_add(&t, "%s", cli_jstr(d, "team"));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}

/* NAME[@N] into the API path /v1/datasets/NAME[/N]; NULL when malformed. */
static char *dataset_ref_path(const char *ref)
{
	const char *at = strchr(ref, '@');
	char *name = at ? xstrndup(ref, (size_t)(at - ref)) : xstrdup(ref), *path = NULL;
	uint64_t v = 0;

	if (dataset_name_valid(name) && (!at || (!parse_u64_str(at + 1, &v) && v)))
		path = at ? xasprintf("/v1/datasets/%s/%" PRIu64, name, v) : xasprintf("/v1/datasets/%s", name);
	free(name);
	return path;
}

static int data_show_rm(struct cli_ctx *ctx, int argc, char **argv, bool rm)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL, *v;
	char *path;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, rm ? "data rm NAME[@VERSION]" : "data show NAME[@VERSION]", NULL, 0, argc,
		       argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected NAME[@VERSION]");
	if (!(path = dataset_ref_path(argv[1])))
		return cli_usage_error(ctx, "'%s' is not NAME[@VERSION]", argv[1]);
	rc = client_json(&ctx->client, rm ? "DELETE" : "GET", path, NULL, &reply, NULL, &eb);
	free(path);
	if (rc)
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
	} else if (rm) {
		printf("deleted %s\n", argv[1]);
	} else if (json_object_get(reply, "manifest")) {
		char size[32];
		format_size((uint64_t)cli_jint(reply, "size"), size, sizeof(size));
		printf("%s@%" PRId64 " %s %s, %" PRId64 " files\n", cli_jstr(reply, "name"),
		       cli_jint(reply, "version"), cli_jstr(reply, "digest"), size, cli_jint(reply, "files"));
		json_array_foreach(json_object_get(json_object_get(reply, "manifest"), "files"), i, v)
			printf("  %s %" PRId64 "\n", cli_jstr(v, "path"), cli_jint(v, "size"));
	} else {
		static const char *const headers[] = { "VERSION", "DIGEST", "SIZE", "FILES", "AGE" };
		struct cli_table t;
		printf("%s (team %s)\n", cli_jstr(reply, "name"), cli_jstr(reply, "team"));
		cli_table_init(&t, ARRAY_SIZE(headers), headers);
		json_array_foreach(json_object_get(reply, "versions"), i, v) {
			char size[32], age[32];
			format_size((uint64_t)cli_jint(v, "size"), size, sizeof(size));
			cli_age(cli_jint(v, "created_at"), age, sizeof(age));
			cli_table_add(&t, "%" PRId64, cli_jint(v, "version"));
			cli_table_add(&t, "%s", cli_jstr(v, "digest"));
			cli_table_add(&t, "%s", size);
			cli_table_add(&t, "%" PRId64, cli_jint(v, "files"));
			cli_table_add(&t, "%s", age);
		}
		cli_table_print(&t, stdout);
		cli_table_release(&t);
	}
	json_decref(reply);
	return EXIT_OK;
}

int cmd_data(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (sub && !strcmp(sub, "push"))
		return data_push(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "ls"))
		return data_ls(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "show"))
		return data_show_rm(ctx, argc - 1, argv + 1, false);
	if (sub && !strcmp(sub, "rm"))
		return data_show_rm(ctx, argc - 1, argv + 1, true);
	if (sub && (!strcmp(sub, "-h") || !strcmp(sub, "--help"))) {
		printf("usage: yard data push DIR|FILE NAME [--team TEAM] | ls | show NAME[@N] | rm NAME[@N]\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected push, ls, show or rm");
}
