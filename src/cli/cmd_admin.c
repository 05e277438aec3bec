/* yard admin reload: the master reads its config file again (POST
 * /v1/admin/reload, docs/configuration.md); reached through `yard admin`
 * (src/admin.c), whose other commands run on the master's host. */
#include "base/compat.h"

#include "cli/cmd.h"

/* Prints one line "  WHAT: a, b" of the names in list, if any. */
static void print_names(const char *what, const json_t *list)
{
	size_t i;
	json_t *v;

	if (!json_array_size(list))
		return;
	printf("  %s: ", what);
	json_array_foreach(list, i, v)
		printf("%s%s", i ? ", " : "", json_string_value(v));
	printf("\n");
}

int cmd_admin_reload(struct cli_ctx *ctx, int argc, char **argv)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	int npos, rc = cli_parse(ctx, "admin reload\n\n"
				      "The master reads its config file (--config) again: it applies the keys\n"
				      "that a reload may change and names those that need a restart.",
				 NULL, 0, argc, argv, &npos);

	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "expected no arguments, got '%s'", argv[1]);
	if (client_json(&ctx->client, "POST", "/v1/admin/reload", NULL, &doc, NULL, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
	} else {
		printf("reloaded %s\n", cli_jstr(doc, "file"));
		if (!json_array_size(json_object_get(doc, "applied")))
			printf("  nothing to apply\n");
		print_names("applied", json_object_get(doc, "applied"));
		print_names("needs a restart to change", json_object_get(doc, "restart"));
		print_names("changed in the file, but a flag of the master wins", json_object_get(doc, "overridden"));
	}
	json_decref(doc);
	return EXIT_OK;
}
