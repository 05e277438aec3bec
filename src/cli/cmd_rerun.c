/* yard rerun ID [--set PATH=VALUE ...] [--ref REF]: a new job from an old
 * one's spec and code (the spec as the master keeps it, the same code
 * digest; code from git: the same commit, or REF of its repository). */
#include "base/compat.h"

#include "cli/cmd.h"
#include "common/spec.h"

int cmd_rerun(struct cli_ctx *ctx, int argc, char **argv)
{
	struct cli_list sets = { NULL, 0, 0 };
	const char *ref = NULL;
	const struct cli_option opts[] = {
		{ "set", 0, CLI_OPT_LIST, &sets, "PATH=VALUE",
		  "override a field of the old job's spec (repeatable), as yard submit --set" },
		{ "ref", 0, CLI_OPT_STRING, &ref, "REF",
		  "code from git: run REF of the old job's repository (resolved\n"
		  "again), not the commit the old job ran" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *old = NULL, *doc = NULL, *job = NULL;
	struct job_spec spec;
	const char *code;
	uint64_t id;
	int status, ret;

	memset(&spec, 0, sizeof(spec));
	status = cli_parse_job(ctx, "rerun ID [--set PATH=VALUE ...] [--ref REF]", opts, ARRAY_SIZE(opts), argc,
			       argv, &id);
	if (status >= 0)
		goto out;
	if (client_job_get(&ctx->client, id, &old, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	if (!json_is_object(json_object_get(old, "spec")) || json_object_get(old, "redacted")) {
		error(&eb, YERR(FORBIDDEN), "job %" PRIu64 ": its spec is not yours to see, so it "
		      "cannot be rerun", id);
		status = cli_fail(ctx, &eb);
		goto out;
	}
	doc = json_deep_copy(json_object_get(old, "spec"));
	if (ref) {
		json_t *gc = json_object_get(doc, "code");
		if (!json_is_object(gc)) {
			status = cli_usage_error(ctx, "--ref: job %" PRIu64 "'s code is not from git", id);
			goto out;
		}
		/* the ref resolved again by the master: no commit pinned */
		json_object_set_new(gc, "ref", json_string(ref));
		json_object_del(gc, "sha");
	}
	for (size_t i = 0; i < sets.nr; i++) {
		if ((ret = spec_set(doc, sets.items[i], &eb))) {
			status = ret == YERR(BAD_REQUEST) ? cli_usage_error(ctx, "%s", eb.msg)
							   : cli_fail(ctx, &eb);
			goto out;
		}
	}
	if (spec_from_json(doc, &spec, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	/* code from git is fetched by the master (at code.sha), not uploaded */
	code = spec.code ? NULL : json_string_value(json_object_get(old, "code"));
	if (client_submit(&ctx->client, doc, code, &job, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	if (ctx->json)
		cli_print_json(job);
	else
		printf("%" PRId64 "\n", cli_jint(job, "id"));
	status = EXIT_OK;
out:
	spec_release(&spec);
	json_decref(old);
	json_decref(doc);
	json_decref(job);
	cli_list_release(&sets);
	return status;
}
