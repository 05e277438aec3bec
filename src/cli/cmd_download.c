/* yard download: a job's outputs (each task's YARD_OUTPUT_DIR, its latest
 * attempt unless --attempt says which) or its checkpoint, unpacked into DIR,
 * each archive checked against its digest (docs/api.md, "Outputs"). */
#include "base/compat.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/codepack.h"

/* Fetches the archive of digest and unpacks it into dest. */
static int fetch_into(struct cli_ctx *ctx, const char *digest, const char *dir, const char *dest,
		      struct errbuf *eb)
{
	char *tmp = xasprintf("%s/.yard-download-%d.tar.gz", dir, (int)getpid());
	int ret = client_archive_get(&ctx->client, digest, tmp, eb);

	if (!ret)
		ret = codepack_extract(tmp, dest, eb);
	unlink(tmp);
	free(tmp);
	if (!ret)
		printf("%s -> %s\n", digest, dest);
	return ret;
}

/* Whether tk is the latest attempt with outputs of its role and index. */
static bool latest_of(const json_t *tasks, const json_t *tk)
{
	size_t i;
	json_t *o;

	json_array_foreach(tasks, i, o)
		if (json_is_string(json_object_get(o, "outputs")) &&
		    !strcmp(cli_jstr(o, "role"), cli_jstr(tk, "role")) &&
		    cli_jint(o, "index") == cli_jint(tk, "index") && cli_jint(o, "attempt") > cli_jint(tk, "attempt"))
			return false;
	return true;
}

int cmd_download(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL, *attempt = NULL;
	int ckpt = 0;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "only this task" },
		{ "attempt", 0, CLI_OPT_STRING, &attempt, "N", "this attempt (default: each task's latest)" },
		{ "checkpoint", 0, CLI_OPT_FLAG, &ckpt, NULL, "the job's latest checkpoint instead" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL, *tasks, *tk;
	uint64_t id;
	size_t i, got = 0;
	int npos, rc, ret = EXIT_OK;
	const char *dir;

	rc = cli_parse(ctx, "download ID [--task ROLE/INDEX] [--attempt N] [--checkpoint] DIR", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 2)
		return cli_usage_error(ctx, "expected a job ID and a DIR");
	if (parse_u64_str(argv[1], &id))
		return cli_usage_error(ctx, "job ID: '%s' is not a number", argv[1]);
	dir = argv[2];
	if (mkdir_p(dir, 0755) < 0)
		return cli_usage_error(ctx, "DIR: cannot create '%s': %s", dir, strerror(errno));
	if (cli_outputs_get(ctx, id, task, attempt, &reply, &eb))
		return cli_fail(ctx, &eb);
	if (ckpt) {
		const char *d = json_string_value(json_object_get(reply, "checkpoint"));
		if (!d)
			error(&eb, YERR(NOT_FOUND), "job %" PRIu64 " has no checkpoint", id);
		else
			fetch_into(ctx, d, dir, dir, &eb);
		ret = eb.code ? cli_fail(ctx, &eb) : EXIT_OK;
		goto out;
	}
	tasks = json_object_get(reply, "tasks");
	json_array_foreach(tasks, i, tk) {
		const char *d = json_string_value(json_object_get(tk, "outputs"));
		if (!d || (!attempt && !latest_of(tasks, tk)))
			continue;
		/* one task: into DIR; else DIR/ROLE-INDEX each */
		char *dest = task ? xstrdup(dir)
				  : xasprintf("%s/%s-%" PRId64, dir, cli_jstr(tk, "role"), cli_jint(tk, "index"));
		rc = fetch_into(ctx, d, dir, dest, &eb);
		free(dest);
		if (rc) {
			ret = cli_fail(ctx, &eb);
			goto out;
		}
		got++;
	}
	if (!got) {
		error(&eb, YERR(NOT_FOUND), "job %" PRIu64 " has no outputs%s%s", id, task ? " of task " : "",
		      task ? task : "");
		ret = cli_fail(ctx, &eb);
	}
out:
	json_decref(reply);
	return ret;
}
