/* `yard images [ls]`: the images built from jobs' code (docs/images.md),
 * GET /v1/images as a table, the most recently used first. */
#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"

/* "abcdef0123456789...": a commit or a digest shortened as git does. */
static const char *short_hex(const char *s, char *buf, size_t len)
{
	const char *hex = s && strchr(s, ':') ? strchr(s, ':') + 1 : s;

	if (!hex)
		return "-";
	snprintf(buf, len, "%.12s", hex);
	return buf;
}

int cmd_images(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "IMAGE", "SIZE", "REPOSITORY", "COMMIT", "DOCKERFILE", "BUILT BY",
					       "JOBS", "LAST JOB" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *v;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "images [ls]", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos > 1 || (npos == 1 && strcmp(argv[1], "ls")))
		return cli_usage_error(ctx, "unexpected argument '%s' (yard images ls)", argv[npos]);
	if (client_images(&ctx->client, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	if (!json_array_size(json_object_get(reply, "images"))) {
		printf("no image built from a job's code has run (image: {build: ...}, docs/images.md)\n");
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "images"), i, v) {
		char size[32], sha[16];
		const char *git = json_string_value(json_object_get(v, "git"));
		format_size((uint64_t)cli_jint(v, "size"), size, sizeof(size));
		cli_table_add(&t, "%s", cli_jstr(v, "image"));
		cli_table_add(&t, "%s", size);
		cli_table_add(&t, "%s", git ? git : "(uploaded)");
		cli_table_add(&t, "%s", short_hex(json_string_value(json_object_get(v, git ? "sha" : "code")), sha,
						   sizeof(sha)));
		cli_table_add(&t, "%s", cli_jstr(v, "dockerfile"));
		if (json_is_integer(json_object_get(v, "built_by")))
			cli_table_add(&t, "job %" PRId64 " on %s", cli_jint(v, "built_by"), cli_jstr(v, "built_on"));
		else
			cli_table_add(&t, "-");
		cli_table_add(&t, "%" PRId64, cli_jint(v, "jobs"));
		cli_table_add(&t, "%" PRId64, cli_jint(v, "last_job"));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}
